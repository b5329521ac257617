//! The pipeline alone, on heap buffers, no EAL: CPU time per packet of the graph itself (plus
//! the traffic stamper). `cargo run --release -p kbng-dataplane --example pipeline_no_io --
//! SESSIONS SECONDS`

use kbng_dataplane::bench::run_no_io;

fn main() {
    let mut a = std::env::args().skip(1);
    let sessions: u32 = a.next().and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let secs: f64 = a.next().and_then(|s| s.parse().ok()).unwrap_or(3.0);
    let r = run_no_io(sessions, u64::MAX, secs);
    println!(
        "sessions {sessions}: {:.2} Mpps on CPU, {:.0} ns/pkt, {} packets, forwarded {}",
        r.packets as f64 / r.cpu_ns.max(1) as f64 * 1e3,
        r.cpu_ns as f64 / r.packets.max(1) as f64,
        r.packets,
        r.forwarded
    );
}
