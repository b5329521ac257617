//! The pipeline alone, on heap buffers, no EAL: cycles per packet of the graph itself.
//! `cargo run --release -p kbng-dataplane --example pipeline_no_io -- SESSIONS SECONDS`

use std::time::Instant;

use kbng_dataplane::bench::{BenchTraffic, populate};
use kbng_dataplane::counters::thread_cpu_ns;
use kbng_dataplane::meter::SrTcmProfile;
use kbng_dataplane::nodes::NodeEnv;
use kbng_dataplane::packet::{Frame, HeapBuf, Pkt, PortId};
use kbng_dataplane::pipeline::{Pipeline, Tables};
use kbng_dataplane::punt::NullPuntSink;

fn main() {
    let mut a = std::env::args().skip(1);
    let sessions: u32 = a.next().and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let secs: f64 = a.next().and_then(|s| s.parse().ok()).unwrap_or(3.0);
    let hz = 2_000_000_000;
    let env = NodeEnv::default();
    let mut tables = Tables::new(sessions as usize, 4, 1);
    populate(&mut tables, sessions, hz);
    let mut traffic = BenchTraffic::new(sessions, env.access_mac, env.uplink_mac, 1);
    let limit = SrTcmProfile::new(hz, 1000, 64, 0).expect("valid");
    let mut pipe: Pipeline<HeapBuf> = Pipeline::new(env, 0, limit, 0);
    let mut pool: Vec<HeapBuf> = (0..512).map(|_| HeapBuf::from_bytes(&[0; 64])).collect();
    let mut rx: Box<Frame<HeapBuf>> = Box::default();
    let mut tx_a: Box<Frame<HeapBuf>> = Box::default();
    let mut tx_u: Box<Frame<HeapBuf>> = Box::default();
    let start = Instant::now();
    let cpu0 = thread_cpu_ns();
    let mut packets = 0u64;
    let mut now = 0u64;
    while start.elapsed().as_secs_f64() < secs {
        for _ in 0..1000 {
            for i in 0..64 {
                let port = if i % 2 == 0 {
                    PortId::Access
                } else {
                    PortId::Uplink
                };
                let mut b = pool.pop().unwrap_or_else(|| HeapBuf::from_bytes(&[0; 64]));
                b.reset(&[0; 64]);
                traffic.stamp(&mut b, port);
                let _ = rx.try_push(Pkt::new(b, port));
            }
            now += 64 * 100;
            pipe.process(
                &mut tables,
                now,
                &mut rx,
                &mut tx_a,
                &mut tx_u,
                &mut NullPuntSink,
            );
            packets += 64;
            pool.extend(tx_a.drain(..).map(|p| p.buf));
            pool.extend(tx_u.drain(..).map(|p| p.buf));
        }
    }
    let cpu = (thread_cpu_ns() - cpu0) as f64;
    println!(
        "sessions {sessions}: {:.2} Mpps on CPU, {:.0} ns/pkt, forwarded {}",
        packets as f64 / cpu * 1e3,
        cpu / packets as f64,
        pipe.counters()
            .snapshot()
            .iter()
            .filter(|x| x.1 == "to uplink" || x.1 == "to access")
            .map(|x| x.2)
            .sum::<u64>()
    );
}
