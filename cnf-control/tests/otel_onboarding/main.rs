//! End to end over real OTLP/gRPC: a real DHCP client (udhcpc) onboards through the real
//! `kbng-dataplane` and `kbng-control` binaries, both configured only by `OTEL_*` variables to
//! export to a real OTLP/gRPC receiver in this test; then the test checks the trace, the metric
//! points and both `/metrics` endpoints (`promtool check metrics`).
//!
//! ```text
//!  ns sub: udhcpc s0 ⇄ d0 ┐ ns dut: kbng-dataplane ┌ d1 ⇄ c0 ns core (192.0.2.1)
//!                         │  kbng-control, OTLP receiver, /metrics, all on dut's loopback
//! ```
//!
//! The parent test builds the namespaces and runs the rest of itself inside `dut`
//! (`ip netns exec`), so every socket is on a loopback of a namespace this test made.
//!
//! It asserts: an `onboarding` root span carries the session's id and MAC, with `dhcp.discover`,
//! `aaa` and `dhcp.request` children; the control's `dataplane.program` span is its child; the
//! dataplane's `grpc.server` span for `InstallSessions` is in the same trace with the control's
//! programming span as parent; the control exported the sessions gauge (active, gold), a DORA
//! histogram with at least one point and AAA and programming latencies; the dataplane exported
//! per-worker packets in both directions, per-plan policer counts and the graph runtime; the
//! dataplane's telemetry threads are pinned to the control core; both `/metrics` pass promtool.
//!
//! Needs root, `ip`, `ethtool`, `udhcpc`, `promtool` and a `kbng-dataplane` binary built from
//! the current sources next to `kbng-control` (`cargo test --workspace` builds both). Skipped
//! with a message when any is missing, unless `KBNG_E2E_REQUIRED=1` (the test command sets it).
//! Every process it starts is stopped by its id and every namespace deleted, also on failure.

#![allow(clippy::unwrap_used)]

mod receiver;

use std::collections::HashMap;
use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{Metric, metric, number_data_point};
use opentelemetry_proto::tonic::trace::v1::Span;

const CHILD: &str = "KBNG_OTEL_E2E_DIR";
const CLIENT_MAC: &str = "02:00:00:00:0a:01";
const CORE_IP: &str = "192.0.2.1";

// ---------------------------------------------------------------- processes and namespaces

fn run(args: &[&str]) -> Result<String, String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("running {args:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{args:?}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn sh(args: &[&str]) -> String {
    run(args).unwrap_or_else(|e| panic!("{e}"))
}

fn in_ns(ns: &str, args: &[&str]) -> String {
    let mut v = vec!["ip", "netns", "exec", ns];
    v.extend_from_slice(args);
    sh(&v)
}

fn has_tool(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The newest modification time of any file under `dir`.
fn newest(dir: &Path) -> SystemTime {
    let mut t = SystemTime::UNIX_EPOCH;
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            let m = if p.is_dir() {
                newest(&p)
            } else {
                e.metadata()
                    .and_then(|m| m.modified())
                    .unwrap_or(SystemTime::UNIX_EPOCH)
            };
            t = t.max(m);
        }
    }
    t
}

/// The two binaries, or why the test cannot run.
fn prerequisites() -> Result<(PathBuf, PathBuf), String> {
    if sh(&["id", "-u"]).trim() != "0" {
        return Err("not root".into());
    }
    for tool in ["ip", "ethtool", "udhcpc", "promtool", "bash"] {
        if !has_tool(tool) {
            return Err(format!("{tool} missing"));
        }
    }
    let ctl = PathBuf::from(env!("CARGO_BIN_EXE_kbng-control"));
    let dp = ctl.with_file_name("kbng-dataplane");
    let built = std::fs::metadata(&dp)
        .and_then(|m| m.modified())
        .map_err(|_| format!("{} missing: cargo build -p kbng-dataplane", dp.display()))?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for src in [
        "cnf-dataplane/src",
        "telemetry/src",
        "api/src",
        "dpdk-sys/src",
    ] {
        if newest(&root.join(src)) > built {
            return Err(format!(
                "{} is older than {src}: cargo build -p kbng-dataplane",
                dp.display()
            ));
        }
    }
    Ok((ctl, dp))
}

/// Namespaces of one run; deleted (after killing what runs in them) on drop.
struct Lab {
    tag: String,
}

impl Lab {
    fn ns(&self, role: &str) -> String {
        format!("{}-{role}", self.tag)
    }

    fn up() -> (Lab, String) {
        let lab = Lab {
            tag: format!("kot{}", std::process::id() % 100_000),
        };
        let (sub, dut, core) = (lab.ns("sub"), lab.ns("dut"), lab.ns("core"));
        for ns in [&sub, &dut, &core] {
            sh(&["ip", "netns", "add", ns]);
            in_ns(ns, &["ip", "link", "set", "lo", "up"]);
            in_ns(ns, &["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"]);
            in_ns(
                ns,
                &["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"],
            );
        }
        sh(&[
            "ip", "link", "add", "s0", "netns", &sub, "address", CLIENT_MAC, "type", "veth",
            "peer", "name", "d0", "netns", &dut,
        ]);
        sh(&[
            "ip", "link", "add", "d1", "netns", &dut, "type", "veth", "peer", "name", "c0",
            "netns", &core,
        ]);
        for (ns, dev) in [(&sub, "s0"), (&dut, "d0"), (&dut, "d1"), (&core, "c0")] {
            in_ns(ns, &["ip", "link", "set", dev, "up"]);
        }
        // Checksums are otherwise left to offload on veth and arrive wrong through af_packet.
        in_ns(&sub, &["ethtool", "-K", "s0", "tx", "off"]);
        in_ns(&core, &["ethtool", "-K", "c0", "tx", "off"]);
        let d1_mac = in_ns(&dut, &["cat", "/sys/class/net/d1/address"]);
        let c0_mac = in_ns(&core, &["cat", "/sys/class/net/c0/address"]);
        in_ns(
            &core,
            &["ip", "addr", "add", &format!("{CORE_IP}/24"), "dev", "c0"],
        );
        in_ns(
            &core,
            &["ip", "route", "add", "100.64.0.0/10", "via", "192.0.2.254"],
        );
        in_ns(
            &core,
            &[
                "ip",
                "neigh",
                "replace",
                "192.0.2.254",
                "lladdr",
                d1_mac.trim(),
                "dev",
                "c0",
            ],
        );
        (lab, c0_mac.trim().to_owned())
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for role in ["sub", "dut", "core"] {
            let ns = self.ns(role);
            if let Ok(pids) = run(&["ip", "netns", "pids", &ns]) {
                for pid in pids.split_whitespace() {
                    let _ = Command::new("kill").args(["-9", pid]).status();
                }
            }
            let _ = Command::new("ip").args(["netns", "del", &ns]).status();
        }
    }
}

/// Child processes, stopped by id on drop (SIGTERM, then SIGKILL).
#[derive(Default)]
struct Procs(Vec<(&'static str, Child)>);

impl Procs {
    fn pid(&self, name: &str) -> u32 {
        self.0
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, c)| c.id())
            .unwrap()
    }

    /// SIGTERM `name` and wait (bounded) for it to exit; its exit status.
    fn stop(&mut self, name: &str) -> Option<std::process::ExitStatus> {
        let i = self.0.iter().position(|(n, _)| *n == name)?;
        let (_, mut c) = self.0.remove(i);
        let _ = Command::new("kill")
            .args(["-TERM", &c.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Ok(Some(s)) = c.try_wait() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = c.kill();
        let _ = c.wait();
        None
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        let names: Vec<&'static str> = self.0.iter().map(|(n, _)| *n).collect();
        for n in names {
            self.stop(n);
        }
    }
}

fn free_port() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

/// A plain HTTP/1.0 GET: (status code, body).
fn http_get(addr: SocketAddr, path: &str) -> Result<(u16, String), String> {
    let mut s =
        TcpStream::connect_timeout(&addr, Duration::from_secs(2)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").map_err(|e| e.to_string())?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).map_err(|e| e.to_string())?;
    let (head, body) = raw.split_once("\r\n\r\n").ok_or("no header end")?;
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or("no status")?;
    Ok((code, body.to_owned()))
}

fn wait_for<T>(what: &str, secs: u64, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {secs} s: {what}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `promtool check metrics` accepts `body` without a complaint.
fn promtool_check(who: &str, body: &str) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool check metrics on {who}'s /metrics: {}\n{}{}\n{body}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The value of the first sample of `series` (a metric name with its `{labels}` in the
/// exposition's order) in a scrape.
fn sample(body: &str, series: &str) -> Option<f64> {
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}

// ---------------------------------------------------------------- the test

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn onboarding_is_traced_and_measured_end_to_end() {
    let (ctl, dp) = match prerequisites() {
        Ok(b) => b,
        Err(why) => {
            assert!(
                std::env::var("KBNG_E2E_REQUIRED").is_err(),
                "end-to-end prerequisites missing: {why}"
            );
            eprintln!("SKIPPED onboarding_is_traced_and_measured_end_to_end: {why}");
            return;
        }
    };
    let (lab, c0_mac) = Lab::up();
    let dir = tempdir(&lab.tag);
    let child = tokio::process::Command::new("ip")
        .args(["netns", "exec", &lab.ns("dut")])
        .arg(std::env::current_exe().unwrap())
        .args(["child_in_dut", "--exact", "--ignored", "--nocapture"])
        .env(CHILD, &dir)
        .env("KBNG_OTEL_E2E_SUB", lab.ns("sub"))
        .env("KBNG_OTEL_E2E_CONTROL", &ctl)
        .env("KBNG_OTEL_E2E_DATAPLANE", &dp)
        .env("KBNG_OTEL_E2E_NEXT_HOP", &c0_mac)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(240), child)
        .await
        .expect("the run in the dut namespace ends within 240 s")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let logs = ["dataplane.log", "control.log", "udhcpc.log"]
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(dir.join(f)).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(15).collect();
            format!(
                "--- {f} (last lines)\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "the run in the dut namespace failed: {}\n{stdout}\n{}\n{logs}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    for line in stdout.lines().filter(|l| l.starts_with("checked:")) {
        println!("{line}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    drop(lab);
}

fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kbng-otel-e2e-{tag}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn var(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} not set by the parent test"))
}

fn otel_env(cmd: &mut Command, otlp: SocketAddr) -> &mut Command {
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{otlp}"))
        .env("OTEL_METRIC_EXPORT_INTERVAL", "1000")
        .env("OTEL_BSP_SCHEDULE_DELAY", "200")
        .env("RUST_LOG", "info")
        .env_remove("OTEL_SERVICE_NAME")
        .env_remove("OTEL_RESOURCE_ATTRIBUTES")
        .env_remove("OTEL_SDK_DISABLED")
        .env_remove("OTEL_TRACES_SAMPLER")
}

/// Runs inside the dut namespace (started by the test above).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by onboarding_is_traced_and_measured_end_to_end inside its dut namespace"]
async fn child_in_dut() {
    let Ok(dir) = std::env::var(CHILD) else {
        return;
    };
    let dir = PathBuf::from(dir);
    let (otlp, receiver) = receiver::start().await;
    let mut procs = Procs::default();
    let sock = dir.join("dp.sock");
    let (dp_metrics, ctl_metrics, api) = (free_port(), free_port(), free_port());

    let log = |name: &str| std::fs::File::create(dir.join(name)).unwrap();
    let mut dp = Command::new(var("KBNG_OTEL_E2E_DATAPLANE"));
    dp.args(["--cores", "0,1"])
        .args(["--access", "net_af_packet0,iface=d0"])
        .args(["--uplink", "net_af_packet1,iface=d1"])
        .args(["--no-huge", "--no-pci", "-m", "512", "--no-shconf"])
        .args(["--next-hop-mac", &var("KBNG_OTEL_E2E_NEXT_HOP")])
        .args(["--sessions", "4096", "--plans", "16"])
        .args(["--grpc-listen", &format!("unix:{}", sock.display())])
        .args(["--metrics-listen", &dp_metrics.to_string()])
        .stdout(Stdio::null())
        .stderr(log("dataplane.log"));
    procs
        .0
        .push(("dataplane", otel_env(&mut dp, otlp).spawn().unwrap()));

    std::fs::write(
        dir.join("subscribers.csv"),
        format!("mac,circuit_id,remote_id,plan\n{CLIENT_MAC},,,gold\n"),
    )
    .unwrap();
    std::fs::write(dir.join("cap"), "1000\n").unwrap();
    std::fs::write(
        dir.join("control.yaml"),
        format!(
            r#"dataplanes: ["unix:{sock}"]
pools:
  - {{name: p0, cidr: 100.64.0.0/24, gateway: 100.64.0.1, leaseSecs: 600, dns: [192.0.2.53]}}
plans: [{{name: gold, id: 10, rateBps: 100000000}}]
defaultPlan: gold
unknownSubscribers: captive
subscribersFile: {dir}/subscribers.csv
licence: {{capFile: {dir}/cap}}
store: {dir}/sessions.redb
apiListen: "{api}"
walledGarden: {{portalUrl: "http://portal.kbng.test/login", allowed: [{{prefix: 192.0.2.53/32}}]}}
"#,
            sock = sock.display(),
            dir = dir.display(),
        ),
    )
    .unwrap();
    let mut ctl = Command::new(var("KBNG_OTEL_E2E_CONTROL"));
    ctl.arg("--config")
        .arg(dir.join("control.yaml"))
        .args(["--metrics-listen", &ctl_metrics.to_string()])
        .stdout(log("control.log"))
        .stderr(log("control.err.log"));
    procs
        .0
        .push(("control", otel_env(&mut ctl, otlp).spawn().unwrap()));
    wait_for("the control connects to the dataplane", 60, || {
        http_get(api, "/v1/dataplanes")
            .ok()
            .filter(|(_, b)| b.contains("\"connected\":true"))
    });

    // The onboarding: a real DHCP client, then a little traffic both ways.
    let sub = var("KBNG_OTEL_E2E_SUB");
    let udhcpc = Command::new("ip")
        .args(["netns", "exec", &sub, "timeout", "30", "udhcpc", "-i", "s0"])
        .args(["-n", "-q", "-f", "-s", "/etc/udhcpc/default.script"])
        .stdout(log("udhcpc.log"))
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(udhcpc.success(), "udhcpc got no lease: {udhcpc}");
    let (_, body) = http_get(api, "/v1/sessions?limit=10&state=active").unwrap();
    let sessions: serde_json::Value = serde_json::from_str(&body).unwrap();
    let session = &sessions["sessions"][0];
    assert_eq!(session["mac"], CLIENT_MAC, "{body}");
    let session_id = session["id"].as_u64().unwrap();
    let traffic =
        format!("for i in $(seq 1 20); do echo kbng >/dev/udp/{CORE_IP}/9; sleep 0.05; done");
    in_ns(&sub, &["bash", "-c", &traffic]);

    // /metrics of both, as a scraper sees them, and promtool's opinion.
    let dp_body = wait_for("the dataplane counts the subscriber's packets", 20, || {
        let (code, body) = http_get(dp_metrics, "/metrics").ok()?;
        let up = sample(
            &body,
            r#"kbng_dataplane_packets_total{direction="up",worker="0"}"#,
        )?;
        let down = sample(
            &body,
            r#"kbng_dataplane_packets_total{direction="down",worker="0"}"#,
        )?;
        (code == 200 && up >= 20.0 && down >= 1.0).then_some(body)
    });
    let ctl_body = wait_for("the control reports the active session", 20, || {
        let (code, body) = http_get(ctl_metrics, "/metrics").ok()?;
        let n = sample(&body, r#"kbng_sessions{plan="gold",state="active"}"#)?;
        (code == 200 && n == 1.0).then_some(body)
    });
    promtool_check("kbng-dataplane", &dp_body);
    promtool_check("kbng-control", &ctl_body);

    // The exporters' threads never run on the worker core (1).
    let dp_pid = procs.pid("dataplane");
    let mut telemetry_threads = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{dp_pid}/task"))
        .unwrap()
        .flatten()
    {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
        let cpus = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap_or("")
            .trim()
            .to_owned();
        if comm.starts_with("OpenTelemetry") || comm.starts_with("kbng-telemetry") {
            telemetry_threads.push((comm.trim().to_owned(), cpus));
        }
    }
    assert!(
        telemetry_threads.len() >= 3,
        "telemetry threads: {telemetry_threads:?}"
    );
    for (comm, cpus) in &telemetry_threads {
        assert_eq!(cpus, "0", "thread {comm} may run on {cpus}");
    }

    // Stopping flushes every exporter before exit.
    assert!(
        procs.stop("control").is_some_and(|s| s.success()),
        "control exit"
    );
    assert!(
        procs.stop("dataplane").is_some_and(|s| s.success()),
        "dataplane exit"
    );

    let received = receiver.received.lock().unwrap();
    check_trace(&received, session_id);
    check_control_metrics(&received);
    check_dataplane_metrics(&received);
    println!(
        "checked: session {session_id}, {} trace and {} metric export requests",
        received.traces.len(),
        received.metrics.len()
    );
}

// ---------------------------------------------------------------- what arrived

fn attr(attrs: &[KeyValue], key: &str) -> Option<String> {
    attrs.iter().find(|kv| kv.key == key).and_then(|kv| {
        match kv.value.as_ref()?.value.as_ref()? {
            any_value::Value::StringValue(s) => Some(s.clone()),
            any_value::Value::IntValue(i) => Some(i.to_string()),
            other => Some(format!("{other:?}")),
        }
    })
}

/// Every span received, with the `service.name` of its resource.
fn spans(r: &receiver::Received) -> Vec<(String, &Span)> {
    let mut v = Vec::new();
    for req in &r.traces {
        for rs in &req.resource_spans {
            let service = rs
                .resource
                .as_ref()
                .and_then(|res| attr(&res.attributes, "service.name"))
                .unwrap_or_default();
            for ss in &rs.scope_spans {
                for s in &ss.spans {
                    v.push((service.clone(), s));
                }
            }
        }
    }
    v
}

fn check_trace(r: &receiver::Received, session_id: u64) {
    let all = spans(r);
    let names: Vec<(&str, &str)> = all
        .iter()
        .map(|(svc, s)| (svc.as_str(), s.name.as_str()))
        .collect();
    let onboarding = all
        .iter()
        .find(|(svc, s)| {
            svc == "kbng-control"
                && s.name == "onboarding"
                && attr(&s.attributes, "session.id") == Some(session_id.to_string())
        })
        .map(|(_, s)| *s)
        .unwrap_or_else(|| panic!("no onboarding span for session {session_id}: {names:?}"));
    assert!(onboarding.parent_span_id.is_empty(), "onboarding is a root");
    assert_eq!(
        attr(&onboarding.attributes, "subscriber.mac").as_deref(),
        Some(CLIENT_MAC)
    );
    assert_eq!(
        attr(&onboarding.attributes, "session.state").as_deref(),
        Some("active")
    );
    assert!(onboarding.end_time_unix_nano > onboarding.start_time_unix_nano);
    let in_trace: Vec<&Span> = all
        .iter()
        .filter(|(_, s)| s.trace_id == onboarding.trace_id)
        .map(|(_, s)| *s)
        .collect();
    let child = |name: &str, parent: &Span| -> &Span {
        in_trace
            .iter()
            .copied()
            .find(|s| s.name == name && s.parent_span_id == parent.span_id)
            .unwrap_or_else(|| panic!("no {name} under {}: {names:?}", parent.name))
    };
    let discover = child("dhcp.discover", onboarding);
    let aaa = child("aaa", discover);
    assert_eq!(
        attr(&aaa.attributes, "aaa.result").as_deref(),
        Some("accept")
    );
    let request = child("dhcp.request", onboarding);
    assert!(request.start_time_unix_nano >= discover.end_time_unix_nano);
    let program = child("dataplane.program", onboarding);
    assert_eq!(
        attr(&program.attributes, "session.id"),
        Some(session_id.to_string())
    );
    // The dataplane's server span: same trace, the control's programming span as parent.
    let server = all
        .iter()
        .find(|(svc, s)| {
            svc == "kbng-dataplane"
                && s.name == "grpc.server"
                && s.parent_span_id == program.span_id
        })
        .map(|(_, s)| *s)
        .unwrap_or_else(|| panic!("no dataplane span under the programming span: {names:?}"));
    assert_eq!(server.trace_id, onboarding.trace_id);
    assert_eq!(
        attr(&server.attributes, "rpc.method").as_deref(),
        Some("/kbng.dataplane.v1.Dataplane/InstallSessions")
    );
    // Everything of the onboarding lies within it.
    for s in &in_trace {
        assert!(
            s.start_time_unix_nano >= onboarding.start_time_unix_nano
                && s.end_time_unix_nano <= onboarding.end_time_unix_nano,
            "{} outside the onboarding",
            s.name
        );
    }
}

/// The last point of every metric of `service`, by name.
fn metrics<'a>(r: &'a receiver::Received, service: &str) -> HashMap<&'a str, &'a Metric> {
    let mut m = HashMap::new();
    for req in &r.metrics {
        for rm in &req.resource_metrics {
            let svc = rm
                .resource
                .as_ref()
                .and_then(|res| attr(&res.attributes, "service.name"));
            if svc.as_deref() != Some(service) {
                continue;
            }
            for sm in &rm.scope_metrics {
                for metric in &sm.metrics {
                    m.insert(metric.name.as_str(), metric); // later exports win
                }
            }
        }
    }
    m
}

fn int(p: &opentelemetry_proto::tonic::metrics::v1::NumberDataPoint) -> i64 {
    match p.value {
        Some(number_data_point::Value::AsInt(v)) => v,
        Some(number_data_point::Value::AsDouble(v)) => v as i64,
        None => 0,
    }
}

fn histogram_count(m: &HashMap<&str, &Metric>, name: &str) -> u64 {
    match m.get(name).and_then(|m| m.data.as_ref()) {
        Some(metric::Data::Histogram(h)) => h.data_points.iter().map(|p| p.count).sum(),
        other => panic!("{name}: not a histogram: {other:?} (have {:?})", m.keys()),
    }
}

fn check_control_metrics(r: &receiver::Received) {
    let m = metrics(r, "kbng-control");
    let Some(metric::Data::Gauge(g)) = m.get("kbng.sessions").and_then(|m| m.data.as_ref()) else {
        panic!("no sessions gauge: {:?}", m.keys());
    };
    let active = g
        .data_points
        .iter()
        .find(|p| {
            attr(&p.attributes, "state").as_deref() == Some("active")
                && attr(&p.attributes, "plan").as_deref() == Some("gold")
        })
        .expect("a sessions point for (active, gold)");
    assert_eq!(int(active), 1);
    assert!(histogram_count(&m, "kbng.dhcp.dora.duration") >= 1);
    assert!(histogram_count(&m, "kbng.aaa.duration") >= 1);
    assert!(histogram_count(&m, "kbng.programming.duration") >= 1);
    assert!(histogram_count(&m, "kbng.programming.batch.size") >= 1);
    let Some(metric::Data::Gauge(limit)) = m
        .get("kbng.licence.sessions.limit")
        .and_then(|m| m.data.as_ref())
    else {
        panic!("no licence limit gauge");
    };
    assert_eq!(int(&limit.data_points[0]), 1000);
}

fn sum_points<'a>(
    m: &HashMap<&str, &'a Metric>,
    name: &str,
) -> &'a [opentelemetry_proto::tonic::metrics::v1::NumberDataPoint] {
    match m.get(name).and_then(|m| m.data.as_ref()) {
        Some(metric::Data::Sum(s)) => {
            assert!(s.is_monotonic, "{name} is a counter");
            &s.data_points
        }
        other => panic!("{name}: not a sum: {other:?} (have {:?})", m.keys()),
    }
}

fn check_dataplane_metrics(r: &receiver::Received) {
    let m = metrics(r, "kbng-dataplane");
    let packets = sum_points(&m, "kbng.dataplane.packets");
    let of = |dir: &str| {
        packets
            .iter()
            .find(|p| {
                attr(&p.attributes, "worker").as_deref() == Some("0")
                    && attr(&p.attributes, "direction").as_deref() == Some(dir)
            })
            .map_or(0, int)
    };
    assert!(of("up") >= 20, "worker 0 up: {}", of("up"));
    assert!(of("down") >= 1, "worker 0 down: {}", of("down"));
    let gold: i64 = sum_points(&m, "kbng.policer.packets")
        .iter()
        .filter(|p| attr(&p.attributes, "plan").as_deref() == Some("gold"))
        .map(int)
        .sum();
    assert!(gold >= 20, "policer packets of plan gold: {gold}");
    let vectors = sum_points(&m, "kbng.dataplane.node.vectors")
        .iter()
        .find(|p| attr(&p.attributes, "node").as_deref() == Some("graph"))
        .map_or(0, int);
    assert!(vectors >= 20, "graph vectors: {vectors}");
    assert!(!sum_points(&m, "kbng.dataplane.drops").is_empty());
}
