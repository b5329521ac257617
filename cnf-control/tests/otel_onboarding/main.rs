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

mod checks;
mod lab;
// The same in-test OTLP/gRPC receiver as the telemetry crate's own test.
#[path = "../../../telemetry/tests/otlp/receiver.rs"]
mod receiver;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use lab::{
    Lab, Procs, free_port, http_get, in_ns, prerequisites, promtool_check, sample, wait_for,
};

const CHILD: &str = "KBNG_OTEL_E2E_DIR";
const CLIENT_MAC: &str = "02:00:00:00:0a:01";
const CORE_IP: &str = "192.0.2.1";

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
    // Both af_packet ports run, so both report their link up.
    for port in ["port-access", "port-uplink"] {
        let key = format!(r#"kbng_dataplane_port_link_up{{port="{port}"}}"#);
        assert_eq!(sample(&dp_body, &key), Some(1.0), "{key} in:\n{dp_body}");
    }
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
    checks::trace(&received, session_id);
    checks::control_metrics(&received);
    checks::dataplane_metrics(&received);
    println!(
        "checked: session {session_id}, {} trace and {} metric export requests",
        received.traces.len(),
        received.metrics.len()
    );
}
