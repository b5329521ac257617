//! Benchmark (not a timed test): `cargo bench -p kbng-dataplane --bench pipeline`.
//!
//! In one run on this machine, `net_null` ports, 64-byte frames:
//! 1. `dpdk-testpmd` io-forward on one forwarding core: the I/O limit, the reference;
//! 2. `kbng-dataplane --mode empty`: our loop over `dpdk-sys`, no processing;
//! 3. the same plus the traffic stamper (the synthetic-traffic cost, see `src/bench.rs`);
//! 4. the full BNG pipeline among 10,000 and among 1,000,000 sessions (QinQ parse, session
//!    lookup with anti-spoofing, trTCM upstream / srTCM downstream, rewrite), with one worker
//!    and with two;
//! 5. callgrind instruction counts per packet: of the worker loop (`Worker::run`) for 2-4, and
//!    of the pipeline alone on heap buffers (`bench::process_vector`).
//!
//! Writes `benches/results/latest.json` (schema in `benches/results/README.md`) and
//! `latest.md`. Rounds alternate the setups so that noise from other work on the machine
//! spreads over all of them. Every run is bounded in time; the whole benchmark takes about
//! three minutes.
//!
//! Environment: `KBNG_BENCH_SECS` (per run, default 4), `KBNG_BENCH_ROUNDS` (default 2),
//! `KBNG_BENCH_CALLGRIND=0` to skip the callgrind runs, `KBNG_BENCH_OUT` (output directory).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const SCHEMA: &str = "kbng-dataplane-bench/2";

struct Setup {
    name: &'static str,
    key: &'static str,
    workers: usize,
    sessions: Option<u32>,
    args: Vec<String>,
    limited_by: &'static str,
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
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

/// The CPUs and caches of this machine as the kernel reports them (a figure's limit depends on
/// them, and runs are compared across hosts).
fn machine() -> String {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let cpuinfo = read("/proc/cpuinfo");
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or("unknown CPU", |(_, m)| m.trim())
        .to_string();
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let cache = |index: u32| {
        let dir = format!("/sys/devices/system/cpu/cpu0/cache/index{index}");
        let (size, shared) = (
            read(&format!("{dir}/size")),
            read(&format!("{dir}/shared_cpu_list")),
        );
        format!("{} shared by CPUs {}", size.trim(), shared.trim())
    };
    format!(
        "{cpus} CPUs, {model}; L2 {}; L3 {}; other work on the machine possible",
        cache(2),
        cache(3)
    )
}

/// Stop a child we started: SIGINT, then wait up to 10 s, then kill.
fn stop_child(child: &mut std::process::Child) {
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
}

/// Seconds testpmd is given beyond `secs` to start forwarding.
const TESTPMD_STARTUP_SECS: u64 = 4;

/// testpmd io-forward for `secs`: (wall Mpps, median of per-second samples after the first
/// two; on-CPU Mpps of the forwarding lcore, total packets over its CPU time), or why no
/// figure came out of the run (the reference is then missing, never zero).
fn testpmd(secs: u64) -> Result<(f64, f64), String> {
    // testpmd dies by re-raising SIGINT, so stdio it buffered for a pipe is lost: line-buffer it.
    let mut child = Command::new("stdbuf")
        .args(["-oL", "dpdk-testpmd"])
        .args(["-l", "0,1", "--no-huge", "-m", "512", "--no-pci"])
        .args(["--no-shconf", "--vdev=net_null0", "--vdev=net_null1", "--"])
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
        .map_err(|e| format!("dpdk-testpmd did not start: {e}"))?;
    // Start-up (EAL memory without hugepages, port setup) takes seconds, and the first two
    // samples are skipped: without this allowance a short run left no sample at all.
    std::thread::sleep(Duration::from_secs(secs + TESTPMD_STARTUP_SECS));
    let cpu_ns = thread_cpu_ns(child.id(), "rte-worker-1").unwrap_or(0);
    stop_child(&mut child);
    let out = child
        .wait_with_output()
        .map_err(|e| format!("dpdk-testpmd output lost: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let rx: Vec<f64> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Rx-pps:"))
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect();
    // Two ports per sample; skip the first two samples.
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
    if totals.is_empty() {
        return Err(format!(
            "no Rx-pps sample after the first two ({} lines of output)",
            text.lines().count()
        ));
    }
    if cpu_ns == 0 {
        return Err("no CPU time for thread rte-worker-1".into());
    }
    if total_rx <= 0.0 {
        return Err("no RX-packets in the accumulated forward statistics".into());
    }
    Ok((median(totals), total_rx / cpu_ns as f64 * 1e3))
}

/// `x / reference`, or null when the reference was not measured in this run.
fn ratio(x: f64, reference: f64) -> Value {
    if reference > 0.0 {
        json!(x / reference)
    } else {
        Value::Null
    }
}

/// Per node of the last run's worker 0: calls, packets per call (vector size) and TSC cycles
/// per packet, from the binary's own runtime rows.
fn node_runtime(last_run: Option<&Value>) -> Value {
    let rows = last_run
        .and_then(|v| v["workers"].get(0))
        .and_then(|w| w["runtime"].as_array())
        .cloned()
        .unwrap_or_default();
    rows.iter()
        .filter_map(|r| {
            let (calls, vectors, cycles) = (
                r["calls"].as_f64()?,
                r["vectors"].as_f64()?,
                r["cycles"].as_f64()?,
            );
            (calls > 0.0).then(|| {
                json!({"node": r["node"], "calls": calls, "vectors_per_call": vectors / calls,
                       "cycles_per_packet": cycles / vectors.max(1.0)})
            })
        })
        .collect()
}

/// The `--cores` list for `workers` workers on this 2-vCPU machine: one worker runs beside the
/// control thread's core; two workers take both vCPUs, worker 0 sharing core 0 with the
/// (mostly idle) control thread.
fn cores(workers: usize) -> &'static str {
    if workers >= 2 { "0,0,1" } else { "0,1" }
}

fn ours_cmd(bin: &str, s: &Setup, secs: u64) -> Command {
    let mut c = Command::new(bin);
    c.args(["--cores", cores(s.workers), "--access", "net_null0"])
        .args([
            "--uplink",
            "net_null1",
            "--no-huge",
            "--no-pci",
            "-m",
            "1024",
        ])
        .args(["--no-shconf", "--next-hop-mac", "02:00:00:00:00:cc"])
        .args([
            "--grpc-listen",
            "127.0.0.1:0",
            "--run-seconds",
            &secs.to_string(),
        ])
        .args(&s.args)
        .stdin(Stdio::null());
    c
}

fn ours(bin: &str, s: &Setup, secs: u64) -> Option<Value> {
    let out = ours_cmd(bin, s, secs).stderr(Stdio::null()).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().find_map(|l| serde_json::from_str(l).ok())
}

/// `Collected : N` from a callgrind log.
fn collected(stderr: &str) -> Option<f64> {
    stderr
        .lines()
        .find_map(|l| l.split("Collected :").nth(1))
        .and_then(|n| n.trim().parse().ok())
}

/// `valgrind --tool=callgrind` under `timeout`, killed after `limit_secs`.
///
/// Valgrind runs one thread at a time, and its default lock lets a thread that never blocks
/// (a polling worker) take it back at once: in a run of 1558ca4 the control thread, whose
/// timer ends a `--run-seconds` run, waited 14 minutes for its turn and the bench hung.
/// `--fair-sched=yes` hands the lock round in turn; the timeout bounds the run whatever
/// happens (the figure then reports no count).
fn callgrind(limit_secs: u64) -> Command {
    let mut c = Command::new("timeout");
    c.args(["--kill-after=10", &limit_secs.to_string(), "valgrind"])
        .args([
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            "--fair-sched=yes",
        ]);
    c
}

/// Instructions per packet of `Worker::run` under callgrind, over a bounded run.
fn callgrind_ours(bin: &str, s: &Setup, secs: u64) -> Value {
    let mut cmd = callgrind(20 * secs + 300);
    cmd.arg("--toggle-collect=kbng_dataplane::io::Worker::run");
    let inner = ours_cmd(bin, s, secs);
    cmd.arg(inner.get_program()).args(inner.get_args());
    let Ok(out) = cmd.stdin(Stdio::null()).output() else {
        return json!({"error": "valgrind did not start"});
    };
    let err = String::from_utf8_lossy(&out.stderr);
    let stats: Option<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| serde_json::from_str(l).ok());
    let rx: f64 = stats
        .as_ref()
        .and_then(|v| v["workers"].as_array())
        .map(|w| w.iter().filter_map(|w| w["rx_packets"].as_f64()).sum())
        .unwrap_or(0.0);
    match collected(&err) {
        Some(ir) if rx > 0.0 => json!({
            "instructions_per_packet": ir / rx,
            "instructions": ir,
            "packets": rx,
            "counted": "callgrind Ir inside kbng_dataplane::io::Worker::run (rx, pipeline, tx, \
                        command ring, stats), divided by packets received",
        }),
        _ => json!({"error": "no callgrind count or no packets", "exit": out.status.code(),
            "stderr_tail": err.lines().rev().take(5).collect::<Vec<_>>()}),
    }
}

/// Instructions per packet of the pipeline alone (no I/O) under callgrind.
fn callgrind_no_io(sessions: u32, bursts: u64) -> Value {
    let Ok(exe) = std::env::current_exe() else {
        return json!({"error": "no current exe"});
    };
    let out = callgrind(900)
        .arg("--toggle-collect=*process_vector*")
        .arg(exe)
        .args(["--no-io-child", &sessions.to_string(), &bursts.to_string()])
        .stdin(Stdio::null())
        .output();
    let Ok(out) = out else {
        return json!({"error": "valgrind did not start"});
    };
    let err = String::from_utf8_lossy(&out.stderr);
    let packets: f64 = String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| serde_json::from_str::<Value>(l).ok())
        .and_then(|v| v["packets"].as_f64())
        .unwrap_or(0.0);
    match collected(&err) {
        Some(ir) if packets > 0.0 => json!({
            "instructions_per_packet": ir / packets,
            "instructions": ir,
            "packets": packets,
            "counted": "callgrind Ir inside bench::process_vector: the whole graph on heap \
                        buffers, without rx, tx or the traffic stamper",
        }),
        _ => json!({"error": "no callgrind count", "exit": out.status.code()}),
    }
}

/// Per-run figures from our binary's JSON: (on-CPU Mpps per core, cycles/packet, completion,
/// tsc Hz, bytes/session, wall Mpps total).
fn per_run(v: &Value) -> Option<(f64, f64, f64, f64, u64, f64)> {
    let ws = v["workers"].as_array()?;
    let hz = v["tsc_hz"].as_f64()?;
    let secs = v["elapsed_secs"].as_f64()?;
    let (mut rx, mut tx, mut cpu) = (0.0, 0.0, 0.0);
    for w in ws {
        rx += w["rx_packets"].as_f64()?;
        tx += w["tx_packets"].as_f64()?;
        cpu += w["cpu_ns"].as_f64().unwrap_or(0.0);
    }
    Some((
        rx / cpu.max(1.0) * 1e3,
        cpu * hz / 1e9 / rx.max(1.0),
        tx / rx.max(1.0),
        hz,
        v["bytes_per_session_per_worker"].as_u64().unwrap_or(0),
        rx / secs / 1e6,
    ))
}

fn setups() -> Vec<Setup> {
    let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
    let full = |n: &str| s(&["--mode", "full", "--sessions", n, "--bench-sessions", n]);
    vec![
        Setup {
            name: "kbng empty pipeline",
            key: "empty",
            workers: 1,
            sessions: None,
            args: s(&["--mode", "empty", "--sessions", "10000"]),
            limited_by: "platform: net_null rx/tx and mempool through dpdk-sys, plus moving each \
                         mbuf through the rx and tx frames",
        },
        Setup {
            name: "kbng empty pipeline + traffic stamper",
            key: "empty_stamper",
            workers: 1,
            sessions: Some(10_000),
            args: s(&[
                "--mode",
                "empty",
                "--sessions",
                "10000",
                "--bench-sessions",
                "10000",
            ]),
            limited_by: "generator: I/O plus writing a 64-byte frame per packet in the worker \
                         (the synthetic-traffic cost, paid by every full-pipeline figure too)",
        },
        Setup {
            name: "kbng full pipeline, 10k sessions, 1 worker",
            key: "full_10k_1w",
            workers: 1,
            sessions: Some(10_000),
            args: full("10000"),
            limited_by: "cpu: instructions of the graph (about 540 per packet: packet moves \
                         through the frames, hashing and an index walk, parse, two meters, \
                         rewrite) plus L2 misses on index buckets and session lines (about \
                         2.7 MB per worker, more than a core's L2: see machine), on top of I/O \
                         and the stamper (the empty pipeline with stamper row: already about \
                         0.55-0.6x testpmd)",
        },
        Setup {
            name: "kbng full pipeline, 1M sessions, 1 worker",
            key: "full_1m_1w",
            workers: 1,
            sessions: Some(1_000_000),
            args: full("1000000"),
            limited_by: "memory latency: two random DRAM lines per packet (index bucket, session \
                         line) in 240 MB of tables, prefetched per burst; the tables are on \
                         transparent huge pages when the kernel grants them (tables_huge_pages)",
        },
        Setup {
            name: "kbng full pipeline, 10k sessions, 2 workers",
            key: "full_10k_2w",
            workers: 2,
            sessions: Some(10_000),
            args: full("10000"),
            limited_by: "platform: 2 vCPUs, worker 0 shares its core with the control thread; \
                         the vCPUs are hyperthreads or shared host cores of a KVM guest",
        },
        Setup {
            name: "kbng full pipeline, 1M sessions, 2 workers",
            key: "full_1m_2w",
            workers: 2,
            sessions: Some(1_000_000),
            args: full("1000000"),
            limited_by: "platform and memory: 2 vCPUs (worker 0 shares a core with the control \
                         thread), both workers missing to DRAM on their own 240 MB replica",
        },
    ]
}

fn no_io_child(mut args: impl Iterator<Item = String>) {
    let sessions: u32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let bursts: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1000);
    let r = kbng_dataplane::bench::run_no_io(sessions, bursts, 600.0);
    println!(
        "{}",
        json!({"packets": r.packets, "forwarded": r.forwarded, "cpu_ns": r.cpu_ns,
               "clock_reads": r.clock_reads,
               "tsc_read_cycles": kbng_dataplane::bench::tsc_read_cycles(1_000_000)})
    );
}

fn main() {
    let mut args = std::env::args().skip(1);
    if let Some(a) = args.next()
        && a == "--no-io-child"
    {
        no_io_child(args);
        return;
    }
    if !std::env::args().any(|a| a == "--bench") {
        println!("pipeline benchmark: run with `cargo bench -p kbng-dataplane --bench pipeline`");
        return;
    }
    let bin = env!("CARGO_BIN_EXE_kbng-dataplane");
    let secs: u64 = env_or("KBNG_BENCH_SECS", 4);
    let rounds: usize = env_or("KBNG_BENCH_ROUNDS", 2);
    let use_callgrind = env_or("KBNG_BENCH_CALLGRIND", 1) != 0
        && Command::new("valgrind")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
    let setups = setups();
    let started = Instant::now();
    let mut tp = Vec::new();
    let mut tp_cpu = Vec::new();
    let mut tp_failures = Vec::new();
    let mut results: Vec<Vec<Value>> = vec![Vec::new(); setups.len()];
    for round in 0..rounds {
        eprintln!("round {}/{rounds}: testpmd", round + 1);
        match testpmd(secs) {
            Ok((wall, cpu)) => {
                tp.push(wall);
                tp_cpu.push(cpu);
            }
            Err(why) => {
                eprintln!("testpmd failed: {why}");
                tp_failures.push(why);
            }
        }
        for (i, setup) in setups.iter().enumerate() {
            eprintln!("round {}/{rounds}: {}", round + 1, setup.name);
            if let Some(v) = ours(bin, setup, secs) {
                results[i].push(v);
            }
        }
    }
    let mut cg: Vec<Value> = vec![Value::Null; setups.len()];
    let mut cg_no_io = Vec::new();
    if use_callgrind {
        for (i, setup) in setups.iter().enumerate() {
            // Two workers count the same instructions as one; 1M sessions under valgrind
            // spend most of a bounded run populating the table, so they get more time.
            if setup.workers != 1 {
                continue;
            }
            eprintln!("callgrind: {}", setup.name);
            let t = if setup.sessions == Some(1_000_000) {
                40
            } else {
                12
            };
            cg[i] = callgrind_ours(bin, setup, t);
        }
        for n in [10_000u32, 1_000_000] {
            eprintln!("callgrind: pipeline alone, {n} sessions");
            cg_no_io.push(json!({"sessions": n, "result": callgrind_no_io(n, 2000)}));
        }
    }
    // The per-node runtime accounting's price: its TSC reads per packet (counted by the
    // pipeline alone, natively) times what one read costs here.
    let alone = kbng_dataplane::bench::run_no_io(10_000, 20_000, 10.0);
    let read_cycles = kbng_dataplane::bench::tsc_read_cycles(1_000_000);
    let reads_per_packet = alone.clock_reads as f64 / (alone.packets.max(1)) as f64;
    let runtime_overhead = json!({
        "tsc_read_cycles": read_cycles,
        "clock_reads_per_packet": reads_per_packet,
        "cycles_per_packet": read_cycles * reads_per_packet,
        "counted": "pipeline alone on heap buffers, 10k sessions, vectors of 64: one TSC read \
                    per vector plus one per node that had packets; a read's cost measured \
                    over 1,000,000 back-to-back reads on this machine",
    });
    let tp_mpps = median(tp.clone());
    let tp_cpu_mpps = median(tp_cpu.clone());
    let hz_any = results
        .iter()
        .flatten()
        .find_map(|v| v["tsc_hz"].as_f64())
        .unwrap_or(0.0);
    let mut rows = vec![json!({
        "key": "testpmd",
        "figure": "dpdk-testpmd io-forward (reference)",
        "workers": 1,
        "sessions": null,
        "mpps_per_core": if tp_cpu_mpps > 0.0 { json!(tp_cpu_mpps) } else { Value::Null },
        "ratio_to_testpmd": if tp_cpu_mpps > 0.0 { json!(1.0) } else { Value::Null },
        "wall_mpps": if tp_mpps > 0.0 { json!(tp_mpps) } else { Value::Null },
        "wall_ratio_to_testpmd": if tp_mpps > 0.0 { json!(1.0) } else { Value::Null },
        "runs": tp.len(),
        "failures": tp_failures,
        "tsc_cycles_per_packet": ratio(hz_any / 1e6, tp_cpu_mpps),
        "ns_per_packet": ratio(1e3, tp_cpu_mpps),
        "instructions_per_packet": null,
        "instructions_note": "not counted: Debian's testpmd is stripped, so callgrind cannot \
                              isolate its forwarding loop",
        "bytes_per_session_per_worker": null,
        "samples_mpps_on_cpu": tp_cpu,
        "samples_wall_mpps": tp,
        "limited_by": "platform: net_null PMD rx/tx and mempool (the I/O limit of this machine)",
        "offered_headroom": null,
        "offered_headroom_note": "unbounded: net_null rx returns a full burst on every call",
        "completion": 1.0,
    })];
    for ((setup, runs), cg) in setups.iter().zip(&results).zip(&cg) {
        let pr: Vec<_> = runs.iter().filter_map(per_run).collect();
        let mpps = median(pr.iter().map(|x| x.0).collect());
        let hz = pr.first().map_or(0.0, |x| x.3);
        let cycles = median(pr.iter().map(|x| x.1).collect());
        rows.push(json!({
            "key": setup.key,
            "figure": setup.name,
            "workers": setup.workers,
            "sessions": setup.sessions,
            "mpps_per_core": mpps,
            "ratio_to_testpmd": ratio(mpps, tp_cpu_mpps),
            "wall_mpps": median(pr.iter().map(|x| x.5).collect()),
            "wall_ratio_to_testpmd": ratio(median(pr.iter().map(|x| x.5).collect()), tp_mpps),
            "tsc_cycles_per_packet": cycles,
            "ns_per_packet": if hz > 0.0 { cycles / hz * 1e9 } else { 0.0 },
            "instructions_per_packet": cg.get("instructions_per_packet").cloned()
                .unwrap_or(Value::Null),
            "callgrind": cg,
            "bytes_per_session_per_worker": pr.first().map(|x| x.4),
            "samples_mpps_on_cpu": pr.iter().map(|x| x.0).collect::<Vec<_>>(),
            "limited_by": setup.limited_by,
            "offered_headroom": null,
            "offered_headroom_note": "unbounded: net_null rx returns a full burst on every call",
            "completion": median(pr.iter().map(|x| x.2).collect()),
            "runs": runs.len(),
            "node_runtime": node_runtime(runs.last()),
            "last_run": runs.last().cloned().unwrap_or(Value::Null),
        }));
    }
    let get = |k: &str, f: &str| {
        rows.iter()
            .find(|r| r["key"] == k)
            .and_then(|r| r[f].as_f64())
            .unwrap_or(0.0)
    };
    let scaling = |n: &str| {
        let one = get(&format!("full_{n}_1w"), "wall_mpps");
        let two = get(&format!("full_{n}_2w"), "wall_mpps");
        let one_cpu = get(&format!("full_{n}_1w"), "mpps_per_core");
        let two_cpu = get(&format!("full_{n}_2w"), "mpps_per_core");
        json!({
            "sessions": n,
            "wall_mpps_1_worker": one,
            "wall_mpps_2_workers": two,
            "wall_speedup": if one > 0.0 { two / one } else { 0.0 },
            "on_cpu_speedup": if one_cpu > 0.0 { 2.0 * two_cpu / one_cpu } else { 0.0 },
            "target": 1.8,
            "limited_by": "platform: 2 vCPUs shared with other work; worker 0 shares its core \
                           with the control thread and the 1-worker run already has a core to \
                           itself, so wall speedup is bounded by the CPU time the machine gives",
        })
    };
    let target = |k: &str, t: f64| {
        let r = rows
            .iter()
            .find(|r| r["key"] == k)
            .and_then(|r| r["ratio_to_testpmd"].as_f64());
        match r {
            Some(r) => json!({"figure": k, "ratio_to_testpmd": r, "target": t, "met": r >= t,
                              "shortfall": (t - r).max(0.0)}),
            None => json!({"figure": k, "ratio_to_testpmd": null, "target": t, "met": null,
                           "why_unknown": format!("no testpmd reference in this run: {}",
                                                  tp_failures.join("; "))}),
        }
    };
    let report = json!({
        "schema": SCHEMA,
        "machine": format!(
            "{}; mbufs without hugepages (--no-huge, 4 KiB pages); session tables on \
             transparent huge pages where granted (madvise)",
            machine()
        ),
        "method": "mpps_per_core = packets / CPU time of the forwarding threads (schedstat), so \
                   time a thread spent preempted by other work is excluded; wall_mpps = packets \
                   / elapsed time, all workers. cycles per packet = on-CPU ns x TSC Hz. \
                   Instructions from callgrind over bounded runs.",
        "frame_bytes": 64,
        "seconds_per_run": secs,
        "rounds": rounds,
        "duration_secs": started.elapsed().as_secs_f64(),
        "figures": rows,
        "pipeline_alone_callgrind": cg_no_io,
        "two_worker_scaling": [scaling("10k"), scaling("1m")],
        "targets": [target("full_10k_1w", 0.5), target("full_1m_1w", 0.33)],
        "node_runtime_overhead": runtime_overhead,
        "reference_vpp_cycles_per_packet": 330,
    });
    let dir = std::env::var("KBNG_BENCH_OUT")
        .unwrap_or_else(|_| format!("{}/benches/results", env!("CARGO_MANIFEST_DIR")));
    let _ = std::fs::create_dir_all(&dir);
    let md = markdown(&report);
    let pretty = serde_json::to_string_pretty(&report).unwrap_or_default();
    let _ = std::fs::write(format!("{dir}/latest.json"), &pretty);
    let _ = std::fs::write(format!("{dir}/latest.md"), &md);
    println!("{md}");
    println!("written: {dir}/latest.json and latest.md");
}

fn markdown(report: &Value) -> String {
    let f = |v: &Value, d: usize| v.as_f64().map_or("-".into(), |x| format!("{x:.d$}"));
    let mut md = String::from(
        "| figure | workers | Mpps/core (on CPU) | × testpmd | wall Mpps | cycles/pkt | ns/pkt | \
         instr/pkt | bytes/session | completion | limited_by |\n\
         |---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in report["figures"].as_array().into_iter().flatten() {
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r["figure"].as_str().unwrap_or(""),
            r["workers"],
            f(&r["mpps_per_core"], 2),
            f(&r["ratio_to_testpmd"], 2),
            f(&r["wall_mpps"], 2),
            f(&r["tsc_cycles_per_packet"], 0),
            f(&r["ns_per_packet"], 1),
            f(&r["instructions_per_packet"], 0),
            r["bytes_per_session_per_worker"]
                .as_u64()
                .map_or("-".into(), |b| b.to_string()),
            f(&r["completion"], 3),
            r["limited_by"].as_str().unwrap_or(""),
        ));
    }
    md.push_str("\nPipeline alone (heap buffers, no I/O), callgrind:\n\n");
    for c in report["pipeline_alone_callgrind"]
        .as_array()
        .into_iter()
        .flatten()
    {
        md.push_str(&format!(
            "- {} sessions: {} instructions/packet\n",
            c["sessions"],
            f(&c["result"]["instructions_per_packet"], 0)
        ));
    }
    md.push_str("\nTwo workers:\n\n");
    for s in report["two_worker_scaling"]
        .as_array()
        .into_iter()
        .flatten()
    {
        md.push_str(&format!(
            "- {} sessions: wall speedup {} (on-CPU {}), target {}\n",
            s["sessions"].as_str().unwrap_or(""),
            f(&s["wall_speedup"], 2),
            f(&s["on_cpu_speedup"], 2),
            s["target"]
        ));
    }
    md.push_str("\nTargets:\n\n");
    for t in report["targets"].as_array().into_iter().flatten() {
        let verdict = match t["met"].as_bool() {
            Some(true) => "met".to_owned(),
            Some(false) => format!("missed by {}", f(&t["shortfall"], 2)),
            None => format!("unknown: {}", t["why_unknown"].as_str().unwrap_or("")),
        };
        md.push_str(&format!(
            "- {}: {} × testpmd, target {}: {verdict}\n",
            t["figure"].as_str().unwrap_or(""),
            f(&t["ratio_to_testpmd"], 2),
            t["target"],
        ));
    }
    for r in report["figures"].as_array().into_iter().flatten() {
        let rows = r["node_runtime"].as_array().cloned().unwrap_or_default();
        if rows.is_empty() {
            continue;
        }
        md.push_str(&format!(
            "\nPer node, {} (worker 0 of the last run):\n\n| node | calls | packets/call | \
             cycles/packet |\n|---|---|---|---|\n",
            r["figure"].as_str().unwrap_or("")
        ));
        for n in rows {
            md.push_str(&format!(
                "| {} | {} | {} | {} |\n",
                n["node"].as_str().unwrap_or(""),
                f(&n["calls"], 0),
                f(&n["vectors_per_call"], 1),
                f(&n["cycles_per_packet"], 1)
            ));
        }
    }
    md.push_str("\nSession tables on transparent huge pages (worker 0 of the last run):\n\n");
    for r in report["figures"].as_array().into_iter().flatten() {
        let h = &r["last_run"]["workers"][0]["tables_huge_pages"];
        if h.is_object() {
            md.push_str(&format!(
                "- {}: {} of {} MiB collapsed onto huge pages ({} MiB advised only)\n",
                r["figure"].as_str().unwrap_or(""),
                h["collapsed_bytes"].as_u64().unwrap_or(0) >> 20,
                h["table_bytes"].as_u64().unwrap_or(0) >> 20,
                h["advised_only_bytes"].as_u64().unwrap_or(0) >> 20,
            ));
        }
    }
    let o = &report["node_runtime_overhead"];
    md.push_str(&format!(
        "\nPer-node runtime accounting costs {} cycles per packet ({} TSC reads per packet \
         at {} cycles each).\n",
        f(&o["cycles_per_packet"], 1),
        f(&o["clock_reads_per_packet"], 3),
        f(&o["tsc_read_cycles"], 1)
    ));
    md
}
