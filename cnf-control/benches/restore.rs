//! Benchmark (not a timed test): restore time of persisted sessions from the control's redb
//! store, and the control's memory per restored session.
//!
//! 1. Writes `KBNG_RESTORE_SESSIONS` (default 1,000,000) bound sessions into a fresh store with
//!    `Store::apply`, in transactions of 10,000 as the engine task commits batches (write rate).
//! 2. Re-runs itself as a fresh child process that does exactly what `kbng-control` does at
//!    start (`Store::open`, then `Store::restore_into` an engine whose pool holds every address:
//!    rows decoded and restored in chunks) and reports the elapsed time and its resident memory (VmRSS) before opening the
//!    store and after the restore, with the loaded vector already consumed. A fresh process keeps
//!    the writer's caches and heap out of the memory figure; the store file is in the page cache
//!    (it was just written), so the time is a warm-cache restore and says so.
//!
//! Prints one JSON object on its last line (and writes it to `KBNG_BENCH_JSON` when set).

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail};
use kbng_control::config::ConfigFile;
use kbng_control::core::Line;
use kbng_control::core::engine::{Engine, Session, SubscriberKey};
use kbng_control::core::licence::{Cap, CapSource};
use kbng_control::core::session::{Lease, State};
use kbng_control::store::{Store, StoreOp};
use serde_json::{Value, json};

const CHILD_ENV: &str = "KBNG_RESTORE_CHILD_STORE";
const BASE_NS: u64 = 1_780_000_000_000_000_000;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// A memory figure of this process in bytes from `/proc/self/status`: `VmRSS:` (resident now)
/// or `VmHWM:` (the peak resident size, which is what a pod's memory limit must allow).
fn status_bytes(field: &str) -> anyhow::Result<u64> {
    let s = std::fs::read_to_string("/proc/self/status")?;
    let kb: u64 = s
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("no {field} in /proc/self/status"))?;
    Ok(kb * 1024)
}

/// The pool every session's address comes from: 100.64.0.0/12 (1,048,576 addresses, of which
/// the network, broadcast and gateway are not leased).
const POOL_CIDR: &str = "100.64.0.0/12";

fn first_ip() -> u32 {
    u32::from(Ipv4Addr::new(100, 64, 0, 2))
}

fn session(i: u64) -> Session {
    let line = Line {
        dataplane: 0,
        port: 0,
        outer_vlan: 1 + (i / 4000 % 4000) as u16,
        inner_vlan: 1 + (i % 4000) as u16,
    };
    let m = (i as u32).to_be_bytes();
    let mac = [0x02, 0xbe, m[0], m[1], m[2], m[3]];
    Session {
        id: i + 1,
        key: SubscriberKey::Mac { line, mac },
        line,
        mac,
        circuit_id: None,
        remote_id: None,
        created_ns: BASE_NS + i,
        ends_at_ns: None,
        reauthorize_at_end: false,
        state: State::Active {
            lease: Lease {
                ip: Ipv4Addr::from(first_ip() + i as u32),
                // Long enough that no timer of the restored engine fires during the bench.
                lease_secs: 86_400,
                bound_at_ns: BASE_NS + i,
                renewed_at_ns: BASE_NS + i,
            },
            plan_id: 10,
        },
        pending: None,
        last_offer_ns: 0,
    }
}

fn engine_config(store: &Path) -> anyhow::Result<ConfigFile> {
    let yaml = format!(
        r#"
dataplanes: ["unix:/nonexistent"]
pools:
  - {{name: p0, cidr: {POOL_CIDR}, gateway: 100.64.0.1, leaseSecs: 86400, dns: [192.0.2.53]}}
plans: [{{name: gold, id: 10, rateBps: 100000000}}]
defaultPlan: gold
store: {}
apiListen: 127.0.0.1:1
walledGarden: {{portalUrl: "http://portal.kbng.test/"}}
maxSessionsPerLine: 1000000
"#,
        store.display()
    );
    serde_yaml_ng::from_str(&yaml).context("bench config")
}

/// Child: restore `store` as `kbng-control` does at start; print the measurements as JSON.
fn child(store: &Path) -> anyhow::Result<()> {
    let cfg = engine_config(store)?
        .validate()
        .map_err(|p| anyhow::anyhow!("bench config: {p:?}"))?;
    let cap = Cap {
        max_sessions: 10_000_000,
        source: CapSource::File {
            path: "bench".into(),
        },
    };
    let now = BASE_NS + 1_000_000_000;
    let mut engine =
        Engine::new(cfg.engine, cap, now).map_err(|e| anyhow::anyhow!("engine: {e:?}"))?;
    let rss_before = status_bytes("VmRSS:")?;
    let t = Instant::now();
    let db = Store::open(store)?;
    let restored = db.restore_into(&mut engine)?;
    let secs = t.elapsed().as_secs_f64();
    let rss_after = status_bytes("VmRSS:")?;
    let rss_peak = status_bytes("VmHWM:")?;
    let (loaded, problems) = (restored.loaded, restored.problems);
    // The load alone (open, read and decode every row), for where the time goes.
    let t = Instant::now();
    let mut decoded = 0;
    db.load_chunked(kbng_control::store::RESTORE_CHUNK, |c| decoded += c.len())?;
    let load_secs = t.elapsed().as_secs_f64();
    if decoded != loaded {
        bail!("the second read found {decoded} rows, the restore {loaded}");
    }
    let (active, _) = engine.admission_counts();
    println!(
        "{}",
        json!({
            "loaded": loaded,
            "active_after_restore": active,
            "problems": problems.len(),
            "first_problem": problems.first(),
            "load_secs": load_secs,
            "restore_secs": secs,
            "rss_before_bytes": rss_before,
            "rss_after_bytes": rss_after,
            "rss_peak_bytes": rss_peak,
        })
    );
    Ok(())
}

fn write_store(path: &Path, n: u64) -> anyhow::Result<f64> {
    let _ = std::fs::remove_file(path);
    let db = Store::open(path)?;
    let t = Instant::now();
    let mut i = 0;
    while i < n {
        let end = (i + 10_000).min(n);
        let ops: Vec<StoreOp> = (i..end)
            .map(|k| StoreOp::Put(Box::new(session(k))))
            .collect();
        db.apply(&ops, end + 1)?;
        i = end;
    }
    Ok(t.elapsed().as_secs_f64())
}

fn main() -> anyhow::Result<()> {
    if let Some(store) = std::env::var_os(CHILD_ENV) {
        return child(Path::new(&store));
    }
    if !std::env::args().any(|a| a == "--bench") {
        println!("restore benchmark: run with `cargo bench -p kbng-control --bench restore`");
        return Ok(());
    }
    let n: u64 = env_or("KBNG_RESTORE_SESSIONS", 1_000_000);
    if n == 0 || n > 1_000_000 {
        bail!("KBNG_RESTORE_SESSIONS: between 1 and 1000000 (the pool is a /12)");
    }
    let dir = std::env::var_os("KBNG_RESTORE_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
    let store = dir.join(format!("kbng-restore-{}.redb", std::process::id()));
    let write_secs = write_store(&store, n)?;
    let file_bytes = std::fs::metadata(&store)?.len();

    let out = Command::new(std::env::current_exe()?)
        .env(CHILD_ENV, &store)
        .output()
        .context("running the restore child")?;
    let _ = std::fs::remove_file(&store);
    if !out.status.success() {
        bail!(
            "restore child failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let r: Value = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .context("restore child printed no JSON")?;
    let num = |k: &str| r.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    let restored = num("active_after_restore");
    let secs = num("restore_secs");
    let rss_delta = num("rss_after_bytes") - num("rss_before_bytes");
    let completion = restored / n as f64;
    let out = json!({
        "bench": "restore",
        "sessions": n,
        "figures": [
            {
                "figure": format!("restore of {n} persisted sessions (redb load + engine restore)"),
                "unit": "s",
                "value": secs,
                "load_secs": num("load_secs"),
                "sessions_per_sec": if secs > 0.0 { restored / secs } else { 0.0 },
                "completion": completion,
                "problems": r.get("problems"),
                "first_problem": r.get("first_problem"),
                "offered_headroom": 1.0,
                "offered_note": "one restore of a store of this size; nothing is offered faster than it is taken",
                "limited_by": "cpu: one thread decoding rows and rebuilding the engine's maps (warm page cache)",
                "store_file_bytes": file_bytes,
            },
            {
                "figure": "control memory per restored session (RSS delta / sessions)",
                "unit": "bytes/session",
                "value": if restored > 0.0 { rss_delta / restored } else { 0.0 },
                "rss_before_bytes": r.get("rss_before_bytes"),
                "rss_after_bytes": r.get("rss_after_bytes"),
                "completion": completion,
                "offered_headroom": 1.0,
                "offered_note": "a measurement of state, not a rate",
                "limited_by": "none: includes the allocator's retained free memory from loading",
                "sessions_note": "keyed by line and MAC, without option-82 circuit/remote ids, whose strings would add their heap",
            },
            {
                "figure": "control peak resident memory during the restore, per session (VmHWM / sessions)",
                "unit": "bytes/session",
                "value": if restored > 0.0 { num("rss_peak_bytes") / restored } else { 0.0 },
                "rss_peak_bytes": r.get("rss_peak_bytes"),
                "completion": completion,
                "offered_headroom": 1.0,
                "offered_note": "a measurement of state, not a rate",
                "limited_by": "none: the engine's maps and one chunk of decoded rows held at once; what the pod's memory limit must allow",
            },
            {
                "figure": "session store on disk per session (redb file / sessions)",
                "unit": "bytes/session",
                "value": file_bytes as f64 / n as f64,
                "store_file_bytes": file_bytes,
                "completion": completion,
                "offered_headroom": 1.0,
                "offered_note": "a measurement of state, not a rate",
                "limited_by": "none: rows plus redb's B-tree pages and free space after the writes",
            },
            {
                "figure": format!("store write, {n} sessions in transactions of 10,000"),
                "unit": "sessions/s",
                "value": n as f64 / write_secs,
                "secs": write_secs,
                "completion": completion,
                "offered_headroom": 1.0,
                "offered_note": "closed loop: the next transaction starts when the last committed",
                "limited_by": "cpu and fsync: one thread encoding rows and committing redb transactions",
            }
        ],
    });
    let text = serde_json::to_string(&out)?;
    if let Some(p) = std::env::var_os("KBNG_BENCH_JSON") {
        std::fs::write(&p, &text).with_context(|| format!("writing {p:?}"))?;
    }
    println!("{text}");
    Ok(())
}
