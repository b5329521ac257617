//! Benchmark (not a timed test): `cargo bench -p kbng-dataplane --bench pipeline`.
//!
//! In one run on this machine, on `net_null` ports with 64-byte frames, one forwarding core:
//! 1. `dpdk-testpmd` io-forward: the I/O limit, the reference;
//! 2. `kbng-dataplane --mode empty`: our loop over `dpdk-sys`, no processing;
//! 3. the same plus the traffic stamper (the synthetic-traffic cost, see `bench.rs`);
//! 4. the full BNG pipeline among 10,000 sessions and among 1,000,000 sessions (QinQ parse,
//!    session lookup with anti-spoofing, trTCM upstream / srTCM downstream, rewrite).
//!
//! Reports Mpps per worker core, the ratio to testpmd, TSC cycles and ns per packet, bytes per
//! session, `limited_by`, offered headroom and completion for each figure, as JSON and as a
//! markdown table (`target/kbng-bench/pipeline.{json,md}`). Rounds alternate the setups so that
//! noise from other work on the machine spreads over all of them. Every run is bounded in time.
//!
//! Environment: `KBNG_BENCH_SECS` (per run, default 6), `KBNG_BENCH_ROUNDS` (default 2).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

struct Setup {
    name: &'static str,
    args: Vec<String>,
    limited_by: &'static str,
}

fn secs() -> u64 {
    std::env::var("KBNG_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// CPU nanoseconds of the thread of `pid` named `comm` (Linux schedstat).
fn thread_cpu_ns(pid: u32, comm: &str) -> Option<u64> {
    for t in std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
    {
        let name = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if name.trim() == comm {
            let s = std::fs::read_to_string(t.path().join("schedstat")).ok()?;
            return s.split_whitespace().next()?.parse().ok();
        }
    }
    None
}

/// testpmd io-forward for `secs`: (wall Mpps, median of per-second samples after the first
/// two; on-CPU Mpps of the forwarding lcore, total packets over its CPU time).
fn testpmd(secs: u64) -> Option<(f64, f64)> {
    let mut child = Command::new("dpdk-testpmd")
        .args([
            "-l",
            "0,1",
            "--no-huge",
            "-m",
            "512",
            "--no-pci",
            "--no-shconf",
        ])
        .args(["--vdev=net_null0", "--vdev=net_null1", "--"])
        .args([
            "--forward-mode=io",
            "--nb-cores=1",
            "--total-num-mbufs=16384",
        ])
        .args(["--stats-period", "1"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    let cpu_ns = thread_cpu_ns(child.id(), "rte-worker-1").unwrap_or(0);
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let kill_deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < kill_deadline {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let out = child.wait_with_output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let rx: Vec<f64> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Rx-pps:"))
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect();
    // Two ports per sample; skip the first two samples of each port.
    let totals: Vec<f64> = rx
        .chunks(2)
        .skip(2)
        .filter(|c| c.len() == 2)
        .map(|c| (c[0] + c[1]) / 1e6)
        .collect();
    let total_rx: f64 = text
        .lines()
        .skip_while(|l| !l.contains("Accumulated forward statistics"))
        .find_map(|l| l.trim().strip_prefix("RX-packets:"))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0);
    let on_cpu = if cpu_ns > 0 {
        total_rx / cpu_ns as f64 * 1e3
    } else {
        0.0
    };
    (!totals.is_empty()).then(|| (median(totals), on_cpu))
}

fn ours(bin: &str, s: &Setup, secs: u64) -> Option<Value> {
    let out = Command::new(bin)
        .args([
            "--cores",
            "0,1",
            "--access",
            "net_null0",
            "--uplink",
            "net_null1",
        ])
        .args(["--no-huge", "--no-pci", "-m", "1024", "--no-shconf"])
        .args(["--next-hop-mac", "02:00:00:00:00:cc"])
        .args([
            "--grpc-listen",
            "127.0.0.1:0",
            "--run-seconds",
            &secs.to_string(),
        ])
        .args(&s.args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().find_map(|l| serde_json::from_str(l).ok())
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("pipeline benchmark: run with `cargo bench -p kbng-dataplane --bench pipeline`");
        return;
    }
    let bin = env!("CARGO_BIN_EXE_kbng-dataplane");
    let secs = secs();
    let rounds: usize = std::env::var("KBNG_BENCH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
    let setups = [
        Setup {
            name: "kbng empty pipeline",
            args: s(&["--mode", "empty", "--sessions", "10000"]),
            limited_by: "I/O: net_null rx/tx and mempool through dpdk-sys (same work as testpmd io)",
        },
        Setup {
            name: "kbng empty pipeline + traffic stamper",
            args: s(&[
                "--mode",
                "empty",
                "--sessions",
                "10000",
                "--bench-sessions",
                "10000",
            ]),
            limited_by: "I/O plus writing 64 bytes per frame (the synthetic-traffic cost)",
        },
        Setup {
            name: "kbng full pipeline, 10k sessions",
            args: s(&[
                "--mode",
                "full",
                "--sessions",
                "10000",
                "--bench-sessions",
                "10000",
            ]),
            limited_by: "memory: L2 misses on index, session, meter and counter lines \
                         (3.3 MB of tables per worker > 512 KiB L2 per core; perf: the \
                         touch passes take most samples)",
        },
        Setup {
            name: "kbng full pipeline, 1M sessions",
            args: s(&[
                "--mode",
                "full",
                "--sessions",
                "1000000",
                "--bench-sessions",
                "1000000",
            ]),
            limited_by: "memory latency: four random DRAM lines per packet (index, session, meter, \
                         counters) in 309 MB of tables, 4 KiB pages",
        },
    ];
    let mut tp = Vec::new();
    let mut tp_cpu = Vec::new();
    let mut results: Vec<Vec<Value>> = vec![Vec::new(); setups.len()];
    for round in 0..rounds {
        eprintln!("round {}/{rounds}: testpmd", round + 1);
        if let Some((wall, cpu)) = testpmd(secs) {
            tp.push(wall);
            tp_cpu.push(cpu);
        }
        for (i, setup) in setups.iter().enumerate() {
            eprintln!("round {}/{rounds}: {}", round + 1, setup.name);
            if let Some(v) = ours(bin, setup, secs) {
                results[i].push(v);
            }
        }
    }
    let tp_mpps = median(tp.clone());
    let tp_cpu_mpps = median(tp_cpu.clone());
    let mut rows = vec![json!({
        "figure": "dpdk-testpmd io-forward (reference)",
        "mpps_per_core": tp_cpu_mpps,
        "ratio_to_testpmd": 1.0,
        "wall_mpps": tp_mpps,
        "wall_ratio_to_testpmd": 1.0,
        "samples_mpps_on_cpu": tp_cpu,
        "samples_wall_mpps": tp,
        "limited_by": "I/O: net_null PMD rx/tx and mempool (the I/O limit of this machine)",
        "offered_headroom": "unbounded: net_null rx always returns a full burst",
        "completion": 1.0,
    })];
    for (setup, runs) in setups.iter().zip(&results) {
        let per_run: Vec<(f64, f64, f64, f64, u64, f64)> = runs
            .iter()
            .filter_map(|v| {
                let w = v["workers"].get(0)?;
                let rx = w["rx_packets"].as_f64()?;
                let tx = w["tx_packets"].as_f64()?;
                let busy = w["busy_cycles"].as_f64()?;
                let secs = v["elapsed_secs"].as_f64()?;
                let hz = v["tsc_hz"].as_f64()?;
                let cpu_ns = w["cpu_ns"].as_f64().unwrap_or(0.0);
                let _ = busy;
                Some((
                    rx / cpu_ns.max(1.0) * 1e3,
                    cpu_ns * hz / 1e9 / rx.max(1.0),
                    tx / rx.max(1.0),
                    hz,
                    v["bytes_per_session_per_worker"].as_u64().unwrap_or(0),
                    rx / secs / 1e6,
                ))
            })
            .collect();
        let mpps = median(per_run.iter().map(|x| x.0).collect());
        let wall = median(per_run.iter().map(|x| x.5).collect());
        let cycles = median(per_run.iter().map(|x| x.1).collect());
        let completion = median(per_run.iter().map(|x| x.2).collect());
        let hz = per_run.first().map_or(0.0, |x| x.3);
        let bytes = per_run.first().map_or(0, |x| x.4);
        rows.push(json!({
            "figure": setup.name,
            "mpps_per_core": mpps,
            "ratio_to_testpmd": if tp_cpu_mpps > 0.0 { mpps / tp_cpu_mpps } else { 0.0 },
            "wall_mpps": wall,
            "wall_ratio_to_testpmd": if tp_mpps > 0.0 { wall / tp_mpps } else { 0.0 },
            "samples_mpps_on_cpu": per_run.iter().map(|x| x.0).collect::<Vec<_>>(),
            "tsc_cycles_per_packet": cycles,
            "ns_per_packet": if hz > 0.0 { cycles / hz * 1e9 } else { 0.0 },
            "bytes_per_session_per_worker": bytes,
            "limited_by": setup.limited_by,
            "offered_headroom": "unbounded: net_null rx always returns a full burst",
            "completion": completion,
            "last_run": runs.last().cloned().unwrap_or(Value::Null),
        }));
    }
    let report = json!({
        "machine": "2 vCPU KVM guest, shared with other builds; no hugepages (--no-huge)",
        "method": "mpps_per_core = packets / CPU time of the forwarding thread (schedstat), so time \
                   the thread spent preempted by other work on this shared machine is excluded; \
                   wall_mpps = packets / elapsed time. Cycles per packet = on-CPU ns x TSC Hz.",
        "frame_bytes": 64,
        "worker_cores": 1,
        "seconds_per_run": secs,
        "rounds": rounds,
        "two_worker_scaling": "not measured: 2 vCPUs hold one control and one worker core",
        "instructions_per_packet": "not measured here: DPDK under callgrind is not supported by this harness",
        "figures": rows,
    });
    let dir = format!("{}/../target/kbng-bench", env!("CARGO_MANIFEST_DIR"));
    let _ = std::fs::create_dir_all(&dir);
    let mut md = String::from(
        "| figure | Mpps/core (on CPU) | × testpmd | wall Mpps | cycles/pkt | ns/pkt | bytes/session | completion | limited_by |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in report["figures"].as_array().into_iter().flatten() {
        md.push_str(&format!(
            "| {} | {:.2} | {:.2} | {:.2} | {} | {} | {} | {:.3} | {} |\n",
            r["figure"].as_str().unwrap_or(""),
            r["mpps_per_core"].as_f64().unwrap_or(0.0),
            r["ratio_to_testpmd"].as_f64().unwrap_or(0.0),
            r["wall_mpps"].as_f64().unwrap_or(0.0),
            r["tsc_cycles_per_packet"]
                .as_f64()
                .map_or("-".into(), |c| format!("{c:.0}")),
            r["ns_per_packet"]
                .as_f64()
                .map_or("-".into(), |c| format!("{c:.1}")),
            r["bytes_per_session_per_worker"]
                .as_u64()
                .map_or("-".into(), |b| b.to_string()),
            r["completion"].as_f64().unwrap_or(0.0),
            r["limited_by"].as_str().unwrap_or(""),
        ));
    }
    let pretty = serde_json::to_string_pretty(&report).unwrap_or_default();
    let _ = std::fs::write(format!("{dir}/pipeline.json"), &pretty);
    let _ = std::fs::write(format!("{dir}/pipeline.md"), &md);
    println!("{md}");
    println!("written: {dir}/pipeline.json and pipeline.md");
}
