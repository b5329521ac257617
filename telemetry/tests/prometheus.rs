//! `/metrics` over real HTTP: every kind of instrument the binaries record is scraped, checked
//! line by line, and (when `promtool` is installed; always in CI) linted by
//! `promtool check metrics`.

#![allow(clippy::unwrap_used)]

use std::process::Stdio;
use std::time::Duration;

use kbng_telemetry::metrics::{
    AaaBackend, AaaResult, BngLicence, Colour, ControlMetrics, ControlPathDrop, DataplaneMetrics,
    DataplaneSnapshot, Direction, DropCount, GrpcTlsCounts, NodeRuntime, OperatorMetrics, Outcome,
    PolicerCount, PortCount, PortLink, SessionState, WorkerStats,
};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

fn snapshot() -> DataplaneSnapshot {
    DataplaneSnapshot {
        workers: (0..2)
            .map(|w| WorkerStats {
                worker: w,
                packets_up: 1000,
                packets_down: 2000,
                bytes_up: 64_000,
                bytes_down: 3_000_000,
                drops: vec![DropCount {
                    node: "session-lookup",
                    reason: "no session",
                    packets: 7,
                }],
                nodes: vec![NodeRuntime {
                    node: "ethernet-input",
                    calls: 100,
                    vectors: 3000,
                    cycles: 90_000,
                }],
            })
            .collect(),
        policer: vec![PolicerCount {
            plan: "gold".to_owned(),
            direction: Direction::Down,
            colour: Colour::Red,
            packets: 5,
        }],
        ports: vec![PortCount {
            port: "port-access",
            counter: "rx missed",
            packets: 11,
        }],
        control_path: vec![ControlPathDrop {
            reason: "inject dropped: bad frame or ring full",
            frames: 4,
        }],
        grpc_tls: Some(GrpcTlsCounts {
            handshakes_failed: 3,
            handshakes_timed_out: 1,
            reloads_failed: 2,
            cert_not_after: Some(2_111_773_675),
            // A CA whose validity could not be read: no series rather than a wrong one.
            client_ca_not_after: None,
        }),
        links: vec![
            PortLink {
                port: "port-access",
                up: true,
            },
            PortLink {
                port: "port-uplink",
                up: false,
            },
        ],
    }
}

/// `GET /metrics` with a plain HTTP/1.1 request; returns (status line, body).
async fn scrape(addr: std::net::SocketAddr) -> (String, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut response = String::new();
    tokio::time::timeout(
        Duration::from_secs(10),
        stream.read_to_string(&mut response),
    )
    .await
    .expect("scrape answers within 10 s")
    .unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_owned(), body.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_endpoint_serves_valid_prometheus_text() {
    let guard = kbng_telemetry::init("kbng-dataplane", &Default::default()).unwrap();
    let meter = guard.meter();

    let control = ControlMetrics::new(&meter);
    control.set_sessions(SessionState::Active, "gold", 3);
    control.set_sessions(SessionState::Captive, "gold", 1);
    control.record_dora(Duration::from_millis(12));
    control.record_aaa(
        AaaBackend::Radius,
        AaaResult::Accept,
        Duration::from_millis(4),
    );
    control.record_programming(16, Outcome::Ok, Duration::from_millis(2));
    control.set_licence(1000, 4);
    control.set_pool("p0", 253, 4, 1);
    control.add_events("ACK sent", 4);
    control.add_events("ACK sent", 2);
    control.add_events("pool exhausted", 1);
    control.add_store_errors(1);
    control.add_api_unauthorized();
    control.set_dataplane_connected(0, true);
    control.set_dataplane_connected(1, false);
    control.add_reconciled(0, 2, 1, 0);
    control.set_dataplane_tls_expiry("cert", 1_796_413_675);
    control.set_clock_offset(-2.5);
    control.set_subscribers(100_000);
    control.set_subscribers_file_rejected(true);
    let operator = OperatorMetrics::new(&meter);
    operator.record_reconcile("BNG", Outcome::Ok, Duration::from_millis(30));
    let licence = |valid, expires_unix_secs| {
        Some(BngLicence {
            valid,
            expires_unix_secs,
        })
    };
    operator.set_bng_licence("bng/a", licence(true, Some(1_798_761_600)));
    operator.set_bng_licence("bng/missing", licence(false, None));
    operator.set_bng_licence("bng/deleted", licence(true, Some(1)));
    operator.set_bng_licence("bng/deleted", None);
    let _dataplane = DataplaneMetrics::register(&meter, snapshot);

    let server = guard
        .serve_metrics("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let (status, body) = scrape(server.local_addr()).await;
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");

    for line in [
        "# TYPE kbng_sessions gauge",
        r#"kbng_sessions{plan="gold",state="active"} 3"#,
        r#"kbng_sessions{plan="gold",state="captive"} 1"#,
        "# TYPE kbng_dhcp_dora_duration_seconds histogram",
        r#"kbng_dhcp_dora_duration_seconds_bucket{le="0.01"} 0"#,
        r#"kbng_dhcp_dora_duration_seconds_bucket{le="0.025"} 1"#,
        r#"kbng_dhcp_dora_duration_seconds_bucket{le="+Inf"} 1"#,
        "kbng_dhcp_dora_duration_seconds_sum 0.012",
        "kbng_dhcp_dora_duration_seconds_count 1",
        r#"kbng_aaa_duration_seconds_count{backend="radius",result="accept"} 1"#,
        r#"kbng_programming_batch_size_bucket{le="16"} 1"#,
        r#"kbng_programming_duration_seconds_count{result="ok"} 1"#,
        "kbng_licence_sessions_limit 1000",
        "kbng_licence_sessions_usage 4",
        r#"kbng_pool_addresses_limit{pool="p0"} 253"#,
        r#"kbng_pool_addresses_usage{pool="p0"} 4"#,
        r#"kbng_pool_addresses_fixed{pool="p0"} 1"#,
        "# TYPE kbng_control_events_total counter",
        r#"kbng_control_events_total{event="ACK sent"} 6"#,
        r#"kbng_control_events_total{event="pool exhausted"} 1"#,
        "kbng_store_commit_errors_total 1",
        "kbng_control_api_unauthorized_total 1",
        r#"kbng_control_dataplane_connected{dataplane="0"} 1"#,
        r#"kbng_control_dataplane_connected{dataplane="1"} 0"#,
        r#"kbng_control_reconcile_sessions_total{dataplane="0",kind="leak"} 2"#,
        r#"kbng_control_reconcile_sessions_total{dataplane="0",kind="orphan"} 1"#,
        r#"kbng_control_reconcile_sessions_total{dataplane="0",kind="mismatch"} 0"#,
        r#"kbng_control_dataplane_tls_expiry_timestamp_seconds{file="cert"} 1796413675"#,
        "kbng_control_clock_offset_seconds -2.5",
        "kbng_control_subscribers 100000",
        "kbng_control_subscribers_file_rejected 1",
        r#"kbng_operator_reconcile_duration_seconds_count{kind="BNG",result="ok"} 1"#,
        "# TYPE kbng_licence_expiry_timestamp_seconds gauge",
        r#"kbng_licence_expiry_timestamp_seconds{bng="bng/a"} 1798761600"#,
        r#"kbng_licence_valid{bng="bng/a"} 1"#,
        r#"kbng_licence_valid{bng="bng/missing"} 0"#,
        "# TYPE kbng_dataplane_port_link_up gauge",
        r#"kbng_dataplane_port_link_up{port="port-access"} 1"#,
        r#"kbng_dataplane_port_link_up{port="port-uplink"} 0"#,
        "# TYPE kbng_dataplane_packets_total counter",
        r#"kbng_dataplane_packets_total{direction="down",worker="1"} 2000"#,
        r#"kbng_dataplane_io_bytes_total{direction="down",worker="0"} 3000000"#,
        r#"kbng_dataplane_drops_total{node="session-lookup",reason="no session",worker="1"} 7"#,
        r#"kbng_dataplane_node_vectors_total{node="ethernet-input",worker="0"} 3000"#,
        r#"kbng_dataplane_node_cycles_total{node="ethernet-input",worker="0"} 90000"#,
        r#"kbng_policer_packets_total{colour="red",direction="down",plan="gold"} 5"#,
        r#"kbng_dataplane_port_packets_total{counter="rx missed",port="port-access"} 11"#,
        r#"kbng_dataplane_control_path_drops_total{reason="inject dropped: bad frame or ring full"} 4"#,
        r#"kbng_dataplane_grpc_tls_refused_total{reason="handshake failed"} 3"#,
        r#"kbng_dataplane_grpc_tls_refused_total{reason="handshake timed out"} 1"#,
        "kbng_dataplane_grpc_tls_reload_errors_total 2",
        r#"kbng_dataplane_grpc_tls_expiry_timestamp_seconds{file="cert"} 2111773675"#,
    ] {
        assert!(
            body.lines().any(|l| l == line),
            "missing line {line:?} in:\n{body}"
        );
    }
    assert!(
        !body.contains("bng/deleted")
            && !body.contains(r#"kbng_licence_expiry_timestamp_seconds{bng="bng/missing"}"#)
            && !body.contains(r#"file="client-ca""#),
        "a deleted BNG, the expiry of a missing Licence, or of a CA not read, has a \
         series:\n{body}"
    );
    let target_info = body
        .lines()
        .find(|l| l.starts_with("target_info{"))
        .unwrap();
    assert!(
        target_info.contains(r#"service_name="kbng-dataplane""#),
        "{target_info}"
    );

    promtool_check(&body).await;
    dashboard_uses_only_exposed_metrics(&body);
    alerts_use_only_exposed_metrics(&body);
    drop(server);
    drop(guard);
}

/// `promtool check metrics` must accept the scrape without a single complaint.
async fn promtool_check(body: &str) {
    let Some(out) = promtool(&["check", "metrics"], body).await else {
        return;
    };
    let complaints = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && complaints.trim().is_empty(),
        "promtool check metrics: {}\n{complaints}\n--- scrape ---\n{body}",
        out.status
    );
}

/// The chart's alerting rules load, and their unit tests (every alert firing on a series that
/// should page and quiet on one that should not) pass.
#[tokio::test]
async fn alert_rules_pass_promtool_and_their_unit_tests() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../charts/kbng/alerts");
    for args in [
        ["check", "rules", "kbng.rules.yaml"],
        ["test", "rules", "kbng.rules.test.yaml"],
    ] {
        let Some(out) = promtool_in(dir, &args, "").await else {
            return;
        };
        assert!(
            out.status.success(),
            "promtool {}: {}\n{}{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Every alert has a test in which it fires.
    let rules = std::fs::read_to_string(format!("{dir}/kbng.rules.yaml")).unwrap();
    let tests = std::fs::read_to_string(format!("{dir}/kbng.rules.test.yaml")).unwrap();
    let alerts: Vec<&str> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .collect();
    assert!(
        alerts.len() >= 10,
        "the rules have their alerts: {alerts:?}"
    );
    for alert in alerts {
        let fires = tests
            .split("alertname: ")
            .skip(1)
            .any(|case| case.starts_with(&format!("{alert}\n")) && case.contains("exp_labels"));
        assert!(fires, "no test shows {alert} firing");
    }
}

/// Runs promtool with `stdin`; `None` (with a note) when promtool is missing, except in CI
/// (`CI` set), where that is a failure.
async fn promtool(args: &[&str], stdin: &str) -> Option<std::process::Output> {
    promtool_in(".", args, stdin).await
}

async fn promtool_in(dir: &str, args: &[&str], stdin: &str) -> Option<std::process::Output> {
    let child = tokio::process::Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            assert!(
                std::env::var_os("CI").is_none(),
                "promtool is required in CI (Debian package `prometheus`, telemetry/PACKAGES)"
            );
            eprintln!(
                "promtool not installed: skipping `promtool {}`",
                args.join(" ")
            );
            return None;
        }
        Err(e) => panic!("running promtool: {e}"),
    };
    let mut pipe = child.stdin.take().unwrap();
    pipe.write_all(stdin.as_bytes()).await.unwrap();
    drop(pipe);
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("promtool finishes within 60 s")
        .unwrap();
    Some(out)
}

/// Every `kbng_*` series the Grafana dashboard queries is one this scrape exposes.
fn dashboard_uses_only_exposed_metrics(body: &str) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../charts/kbng/dashboards/kbng.json"
    );
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let exprs: Vec<&str> = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().into_iter().flatten())
        .filter_map(|t| t["expr"].as_str())
        .collect();
    assert!(exprs.len() > 10, "the dashboard has its queries");
    assert_only_exposed(body, &exprs, "dashboard query");
}

/// Every `kbng_*` series the alerting rules query is one this scrape exposes.
fn alerts_use_only_exposed_metrics(body: &str) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../charts/kbng/alerts/kbng.rules.yaml"
    );
    let rules = std::fs::read_to_string(path).unwrap();
    // Every line but comments: expressions, folded or not (annotations name no series).
    let exprs: Vec<&str> = rules
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect();
    let names = assert_only_exposed(body, &exprs, "alert rule");
    assert!(names > 10, "the rules query kbng series");
}

/// Asserts that every `kbng_*` name in `exprs` (a histogram's `_bucket`, `_sum` and `_count`
/// by their family) has a `# TYPE` line in `body`; returns how many names were checked.
fn assert_only_exposed(body: &str, exprs: &[&str], what: &str) -> usize {
    let mut names = 0;
    for expr in exprs {
        for (start, _) in expr.match_indices("kbng_") {
            let name: String = expr[start..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s))
                .unwrap_or(&name);
            names += 1;
            assert!(
                body.contains(&format!("# TYPE {family} ")),
                "{what} uses {name}, which /metrics does not expose: {expr}"
            );
        }
    }
    names
}
