//! Benchmark (not a timed test): sessions programmed into a running `kbng-dataplane` per second
//! over gRPC, batched, as `kbng-control` programs them (`dataplane::connect`, `InstallSessions`).
//!
//! Starts the real dataplane (`--no-huge --no-pci`, `net_null` ports, one worker running the full
//! pipeline), installs one plan, then for each batch size installs `KBNG_PROGRAM_SESSIONS`
//! sessions in batches, checks the dataplane's identity reports exactly that many, removes them
//! all, and goes on. One client, one request in flight (closed loop): the offered rate is what the
//! dataplane acknowledges, so the headroom is 1 and the figure is what one sequential client gets.
//! The client shares the machine's cores with the dataplane's gRPC thread and its busy-polling
//! worker; the CPU time of each is reported so that `limited_by` names the one that was saturated.
//!
//! Prints one JSON object on its last line (and writes it to `KBNG_BENCH_JSON` when set).
//! Environment: `KBNG_DATAPLANE_BIN` (default `<target>/release/kbng-dataplane`),
//! `KBNG_PROGRAM_SESSIONS` (default 200000), `KBNG_PROGRAM_BATCHES` (default `100,1000,10000`),
//! `KBNG_PROGRAM_MAX_SECS` (the dataplane's `--run-seconds`, default 300), `KBNG_PROGRAM_CORES`
//! (the dataplane's `--cores`, default `0,1`: the control core, then one worker).
//!
//! Counters: with the first batch size's sessions installed, every session's counters are read
//! once as the RADIUS accounting reads them (`radius::accounting::read_counters`: requests of
//! 1,000 sessions, one in flight), for the interims and the reads between them
//! (`countersReadSecs`): the figure says what share of that rate a million sessions read every
//! 30 s (the default) would take.
//!
//! Memory: the dataplane's resident size is read before the first batch and while the first
//! batch size's sessions are all installed. The difference per session is what an installed
//! session costs beyond what the dataplane allocated at start (each worker's tables, sized for
//! the capacity, are allocated and touched then): the control thread's shadow plus what an
//! install adds per worker. Both are plain heap memory, not hugepages; the BNG schema's rule on
//! `memoryMib` against `sessionCapacity` and `workerCores` allows for them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use kbng_api::v1 as pb;
use kbng_api::v1::dataplane_client::DataplaneClient;
use kbng_control::config::Plan;
use kbng_control::dataplane::plan_proto;
use kbng_crds::plan::DirectionPolicy;
use serde_json::{Value, json};
use tonic::transport::Channel;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// CPU nanoseconds (Linux schedstat) of every thread of `pid`: (tid, name, ns).
fn threads_cpu_ns(pid: u32) -> Vec<(u32, String, u64)> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for t in dir.flatten() {
        let name = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        let ns = std::fs::read_to_string(t.path().join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .unwrap_or(0);
        let tid = t.file_name().to_string_lossy().parse().unwrap_or(0);
        out.push((tid, name.trim().to_owned(), ns));
    }
    out
}

/// CPU time of the dataplane's control side: every thread but the workers (worker 0 is the
/// main thread, on EAL's main lcore; the others are named `kbng-worker<N>`).
fn dataplane_control_cpu_ns(pid: u32) -> u64 {
    threads_cpu_ns(pid)
        .iter()
        .filter(|(tid, n, _)| *tid != pid && !n.starts_with("kbng-worker"))
        .map(|(_, _, ns)| ns)
        .sum()
}

fn own_cpu_ns() -> u64 {
    threads_cpu_ns(std::process::id())
        .iter()
        .map(|(_, _, ns)| ns)
        .sum()
}

/// `VmRSS` of `pid` in bytes.
fn resident_bytes(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmRSS in /proc/<pid>/status")?;
    Ok(kb * 1024)
}

fn session(i: u64, plan_id: u32) -> pb::Session {
    let ip = u32::from(std::net::Ipv4Addr::new(100, 64, 0, 0)) + i as u32 + 2;
    let m = (i as u32).to_be_bytes();
    pb::Session {
        session_id: i + 1,
        access_port: 0,
        outer_vlan: 1 + (i / 4000 % 4000) as u32,
        inner_vlan: 1 + (i % 4000) as u32,
        mac: vec![0x02, 0xbe, m[0], m[1], m[2], m[3]],
        ipv4: ip,
        plan_id,
        captive: false,
    }
}

/// Single-rate 100 Mbit/s each way, as the control programs a `rateBps` plan.
fn plan(id: u32) -> pb::Plan {
    let policy = DirectionPolicy::single_rate(100_000_000);
    plan_proto(&Plan {
        name: "bench".into(),
        id,
        upstream: policy.clone(),
        downstream: policy,
    })
}

struct Dataplane {
    child: Child,
}

impl Drop for Dataplane {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_dataplane(
    bin: &Path,
    sock: &Path,
    capacity: u64,
    cores: &str,
    max_secs: u64,
) -> anyhow::Result<Dataplane> {
    let child = Command::new(bin)
        .args(["--cores", cores])
        .args(["--access", "net_null0", "--uplink", "net_null1"])
        .args(["--no-huge", "--no-pci", "-m", "1024", "--no-shconf"])
        .args(["--next-hop-mac", "02:00:00:00:00:cc", "--plans", "16"])
        .args(["--sessions", &capacity.to_string()])
        .args(["--grpc-listen", &format!("unix:{}", sock.display())])
        .args(["--run-seconds", &max_secs.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    Ok(Dataplane { child })
}

async fn connect(sock: &Path) -> anyhow::Result<DataplaneClient<Channel>> {
    let target = kbng_control::dataplane::Target {
        addr: format!("unix:{}", sock.display()),
        tls: None,
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if sock.exists()
            && let Ok(mut c) = kbng_control::dataplane::connect(&target).await
            && c.get_identity(pb::GetIdentityRequest {}).await.is_ok()
        {
            return Ok(c);
        }
        if Instant::now() > deadline {
            bail!(
                "the dataplane did not answer on {} within 60 s",
                target.addr
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn sessions_held(c: &mut DataplaneClient<Channel>) -> anyhow::Result<u64> {
    Ok(c.get_identity(pb::GetIdentityRequest {})
        .await?
        .into_inner()
        .sessions)
}

/// One batch size: install `n` sessions, verify, (with `read`, read their counters), remove
/// them. Returns the figures.
async fn run_batch(
    c: &mut DataplaneClient<Channel>,
    dp_pid: u32,
    n: u64,
    batch: usize,
    read: bool,
) -> anyhow::Result<Vec<Value>> {
    let all: Vec<pb::Session> = (0..n).map(|i| session(i, 1)).collect();
    let dp_cpu0 = dataplane_control_cpu_ns(dp_pid);
    let me_cpu0 = own_cpu_ns();
    let t = Instant::now();
    let mut created = 0u64;
    let mut errors = 0u64;
    let mut first_error = None;
    for chunk in all.chunks(batch) {
        match c
            .install_sessions(pb::InstallSessionsRequest {
                sessions: chunk.to_vec(),
            })
            .await
        {
            Ok(r) => created += u64::from(r.into_inner().created),
            Err(e) => {
                errors += 1;
                first_error.get_or_insert_with(|| e.to_string());
            }
        }
    }
    let secs = t.elapsed().as_secs_f64();
    let dp_cpu = dataplane_control_cpu_ns(dp_pid).saturating_sub(dp_cpu0) as f64 / 1e9;
    let me_cpu = own_cpu_ns().saturating_sub(me_cpu0) as f64 / 1e9;
    let held = sessions_held(c).await?;
    let rss_installed = resident_bytes(dp_pid)?;
    let counters = if read {
        Some(read_figure(c, dp_pid, n).await)
    } else {
        None
    };

    let t = Instant::now();
    let mut removed = 0u64;
    for chunk in all.chunks(10_000) {
        let ids = chunk.iter().map(|s| s.session_id).collect();
        removed += u64::from(
            c.remove_sessions(pb::RemoveSessionsRequest { session_ids: ids })
                .await?
                .into_inner()
                .removed,
        );
    }
    let remove_secs = t.elapsed().as_secs_f64();
    let left = sessions_held(c).await?;

    let rate = created as f64 / secs;
    let limited_by = limited_by(
        secs,
        me_cpu,
        dp_cpu,
        "InstallSessions waiting (the dataplane's hand-off of each batch to its workers)",
    );
    let installed = json!({
        "figure": format!("sessions installed over gRPC, batches of {batch}"),
        "unit": "sessions/s",
        "value": rate,
        "sessions": n,
        "batch": batch,
        "secs": secs,
        "created": created,
        "held_after_install": held,
        "dataplane_rss_installed": rss_installed,
        "failed_batches": errors,
        "first_error": first_error,
        "completion": if n == 0 { 0.0 } else { held.min(created) as f64 / n as f64 },
        "offered_headroom": 1.0,
        "offered_note": "closed loop: one client, one batch in flight; offered = acknowledged",
        "limited_by": limited_by,
        "client_cpu_secs": me_cpu,
        "dataplane_control_cpu_secs": dp_cpu,
        "removed": removed,
        "remove_rate": removed as f64 / remove_secs,
        "held_after_remove": left,
        "target": 200_000.0,
    });
    Ok(std::iter::once(installed).chain(counters).collect())
}

/// What limited a closed-loop run of `secs` in which the client used `me_cpu` seconds of CPU
/// and the dataplane's control threads `dp_cpu`: the side whose CPU time nearly fills the wall
/// time, else neither (`waiting` names where the rest went).
fn limited_by(secs: f64, me_cpu: f64, dp_cpu: f64, waiting: &str) -> String {
    if dp_cpu >= 0.85 * secs {
        "none: the dataplane's gRPC/control threads (busy for the whole run)".to_owned()
    } else if me_cpu >= 0.85 * secs {
        "cpu of the generator: the bench client (busy for the whole run)".to_owned()
    } else {
        format!(
            "none: waiting, not CPU: the client was busy {:.0}% and the dataplane's control \
             threads {:.0}% of the wall time; the rest is spent inside {waiting}",
            100.0 * me_cpu / secs,
            100.0 * dp_cpu / secs
        )
    }
}

/// Every one of `n` installed sessions' counters read once, as the accounting reads them.
async fn read_figure(c: &mut DataplaneClient<Channel>, dp_pid: u32, n: u64) -> Value {
    let ids: Vec<u64> = (1..=n).collect();
    let dp_cpu0 = dataplane_control_cpu_ns(dp_pid);
    let me_cpu0 = own_cpu_ns();
    let t = Instant::now();
    let read = kbng_control::radius::accounting::read_counters(c, &ids).await;
    let secs = t.elapsed().as_secs_f64();
    let dp_cpu = dataplane_control_cpu_ns(dp_pid).saturating_sub(dp_cpu0) as f64 / 1e9;
    let me_cpu = own_cpu_ns().saturating_sub(me_cpu0) as f64 / 1e9;
    let rate = read.len() as f64 / secs;
    // A million sessions read every 30 s (countersReadSecs' default), beside their interims.
    let needed = 1_000_000.0 / 30.0;
    json!({
        "figure": "session counters read over gRPC, as the accounting reads them (1,000 a request)",
        "unit": "sessions/s",
        "value": rate,
        "sessions": n,
        "read": read.len(),
        "secs": secs,
        "completion": read.len() as f64 / n.max(1) as f64,
        "offered_headroom": 1.0,
        "offered_note": "closed loop: one client, one request in flight; offered = answered",
        "limited_by": limited_by(secs, me_cpu, dp_cpu, "GetCounters waiting"),
        "client_cpu_secs": me_cpu,
        "dataplane_control_cpu_secs": dp_cpu,
        "share_for_1m_sessions_every_30s": needed / rate,
    })
}

/// Resident bytes per installed session, from the first batch size's full install.
fn memory_figure(started: u64, installed: u64, n: u64, capacity: u64, workers: u64) -> Value {
    let per = installed.saturating_sub(started) as f64 / n.max(1) as f64;
    json!({
        "figure": format!(
            "dataplane resident memory per installed session ({workers} workers, shadow included)"
        ),
        "unit": "bytes/session",
        "value": per.round(),
        "sessions": n,
        "capacity": capacity,
        "workers": workers,
        "rss_started": started,
        "rss_installed": installed,
        "all_in_bytes_per_session": installed / n.max(1),
        "completion": 1.0,
        "offered_headroom": 1.0,
        "limited_by": "none: a measurement of memory, not of a rate",
    })
}

fn default_bin() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"),
        PathBuf::from,
    );
    target.join("release/kbng-dataplane")
}

fn main() -> anyhow::Result<()> {
    if !std::env::args().any(|a| a == "--bench") {
        println!(
            "program-rate benchmark: run with `cargo bench -p kbng-control --bench program_rate`"
        );
        return Ok(());
    }
    let bin = std::env::var_os("KBNG_DATAPLANE_BIN").map_or_else(default_bin, PathBuf::from);
    let n: u64 = env_or("KBNG_PROGRAM_SESSIONS", 200_000);
    let max_secs: u64 = env_or("KBNG_PROGRAM_MAX_SECS", 300);
    let batches: Vec<usize> = std::env::var("KBNG_PROGRAM_BATCHES")
        .unwrap_or_else(|_| "100,1000,10000".into())
        .split(',')
        .map(|b| {
            b.trim()
                .parse()
                .context("KBNG_PROGRAM_BATCHES: not a list of numbers")
        })
        .collect::<anyhow::Result<_>>()?;
    if batches.contains(&0) {
        bail!("KBNG_PROGRAM_BATCHES: a batch size must be at least 1");
    }
    let dir = std::env::temp_dir().join(format!("kbng-program-rate-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let sock = dir.join("dp.sock");
    let cores = std::env::var("KBNG_PROGRAM_CORES").unwrap_or_else(|_| "0,1".into());
    let workers = cores.split(',').count().saturating_sub(1) as u64;
    let capacity = n.next_power_of_two().max(1024);
    let dp = start_dataplane(&bin, &sock, capacity, &cores, max_secs)?;
    let dp_pid = dp.child.id();

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let result = rt.block_on(async {
        let mut c = connect(&sock).await?;
        c.install_plans(pb::InstallPlansRequest {
            plans: vec![plan(1)],
        })
        .await?;
        let rss_started = resident_bytes(dp_pid)?;
        let mut figures = Vec::new();
        for (i, &b) in batches.iter().enumerate() {
            figures.extend(run_batch(&mut c, dp_pid, n, b, i == 0).await?);
        }
        if let Some(installed) = figures
            .first()
            .and_then(|f| f["dataplane_rss_installed"].as_u64())
        {
            figures.push(memory_figure(rss_started, installed, n, capacity, workers));
        }
        anyhow::Ok(figures)
    });
    drop(dp);
    let _ = std::fs::remove_dir_all(&dir);
    let figures = result?;
    let out = json!({
        "bench": "program_rate",
        "dataplane": bin.display().to_string(),
        "figures": figures,
    });
    let text = serde_json::to_string(&out)?;
    if let Some(p) = std::env::var_os("KBNG_BENCH_JSON") {
        std::fs::write(&p, &text).with_context(|| format!("writing {p:?}"))?;
    }
    println!("{text}");
    Ok(())
}
