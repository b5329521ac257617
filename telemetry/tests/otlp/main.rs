//! End to end over real OTLP/gRPC: a child process configured only through environment
//! variables (`OTEL_EXPORTER_OTLP_ENDPOINT`, `K8S_*`) runs an "onboarding" span that calls a
//! tiny tonic server over a real gRPC hop, records metrics and logs, and exits; the receiver in
//! this process checks that the spans form one linked trace with the right resource, and that
//! the metric points and logs arrived.
//!
//! A child process because `init` installs process-global state and reads the real
//! environment, which this crate cannot set (`set_var` is unsafe in edition 2024).
//!
//! The hop server is opentelemetry-proto's generated `LogsService` (any unary gRPC service
//! would do; this one is already compiled), standing in for the dataplane.

#![allow(clippy::unwrap_used)]

mod receiver;

use std::collections::HashMap;
use std::time::Duration;

use kbng_telemetry::grpc::{TraceContextInterceptor, server_span};
use kbng_telemetry::metrics::{
    AaaBackend, AaaResult, ControlMetrics, DataplaneMetrics, DataplaneSnapshot, DropCount, Outcome,
    SessionState, WorkerStats,
};
use opentelemetry_proto::tonic::collector::logs::v1::logs_service_client::LogsServiceClient;
use opentelemetry_proto::tonic::collector::logs::v1::logs_service_server::{
    LogsService, LogsServiceServer,
};
use opentelemetry_proto::tonic::collector::logs::v1::{
    ExportLogsServiceRequest, ExportLogsServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{metric, number_data_point};
use opentelemetry_proto::tonic::trace::v1::Span;
use tracing::Instrument as _;

const CHILD_ENV: &str = "KBNG_TELEMETRY_TEST_CHILD";

/// The fake dataplane: its handler opens the programming span inside the request's span.
#[derive(Debug, Default)]
struct FakeDataplane;

#[tonic::async_trait]
impl LogsService for FakeDataplane {
    async fn export(
        &self,
        _request: tonic::Request<ExportLogsServiceRequest>,
    ) -> Result<tonic::Response<ExportLogsServiceResponse>, tonic::Status> {
        let span = tracing::info_span!("dataplane.program", session.id = 42_u64);
        async { tracing::info!("session programmed") }
            .instrument(span)
            .await;
        Ok(tonic::Response::new(ExportLogsServiceResponse::default()))
    }
}

/// Runs in the child process only (the parent passes `--ignored` and sets `CHILD_ENV`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by otlp_export_links_spans_across_grpc in a child process"]
async fn otlp_child() {
    if std::env::var(CHILD_ENV).is_err() {
        return;
    }
    let guard = kbng_telemetry::init("kbng-control", &Default::default()).unwrap();
    assert!(guard.exports().traces && guard.exports().metrics && guard.exports().logs);

    // The dataplane side: a tonic server whose requests get `server_span`.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hop = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .trace_fn(server_span)
            .add_service(LogsServiceServer::new(FakeDataplane))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{hop}"))
        .unwrap()
        .connect()
        .await
        .unwrap();

    // The control side: an onboarding span around a call through the interceptor ...
    let mut linked = LogsServiceClient::with_interceptor(channel.clone(), TraceContextInterceptor);
    async {
        tracing::info!("subscriber onboarding");
        linked
            .export(ExportLogsServiceRequest::default())
            .await
            .unwrap();
    }
    .instrument(tracing::info_span!("onboarding", session.id = 42_u64))
    .await;
    // ... and one without it, whose server span must start a trace of its own.
    let mut unlinked = LogsServiceClient::new(channel);
    async {
        unlinked
            .export(ExportLogsServiceRequest::default())
            .await
            .unwrap();
    }
    .instrument(tracing::info_span!("unlinked"))
    .await;

    let metrics = ControlMetrics::new(&guard.meter());
    metrics.record_dora(Duration::from_millis(12));
    metrics.record_aaa(
        AaaBackend::Local,
        AaaResult::Accept,
        Duration::from_millis(2),
    );
    metrics.record_programming(1, Outcome::Ok, Duration::from_millis(3));
    metrics.set_sessions(SessionState::Active, "gold", 3);
    let _dataplane = DataplaneMetrics::register(&guard.meter(), || DataplaneSnapshot {
        workers: vec![WorkerStats {
            worker: 0,
            drops: vec![DropCount {
                node: "session-lookup",
                reason: "no session",
                packets: 7,
            }],
            ..Default::default()
        }],
        policer: vec![],
        ports: vec![],
        control_path: vec![],
        grpc_tls: None,
        links: vec![],
    });
    drop(guard); // flushes every exporter before the process exits
}

/// A resource or data point attribute as a string.
fn attr(attrs: &[KeyValue], key: &str) -> Option<String> {
    attrs.iter().find(|kv| kv.key == key).and_then(|kv| {
        match kv.value.as_ref()?.value.as_ref()? {
            any_value::Value::StringValue(s) => Some(s.clone()),
            any_value::Value::IntValue(i) => Some(i.to_string()),
            other => Some(format!("{other:?}")),
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn otlp_export_links_spans_across_grpc() {
    let (addr, receiver) = receiver::start().await;
    let child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args(["otlp_child", "--exact", "--ignored", "--nocapture"])
        .env(CHILD_ENV, "1")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{addr}"))
        .env("OTEL_METRIC_EXPORT_INTERVAL", "60000") // the final flush must deliver
        .env("K8S_POD_NAME", "kbng-control-7")
        .env("K8S_NAMESPACE_NAME", "kbng-test")
        .env("K8S_NODE_NAME", "node-a")
        .env("RUST_LOG", "info")
        .env_remove("OTEL_SERVICE_NAME")
        .env_remove("OTEL_RESOURCE_ATTRIBUTES")
        .env_remove("OTEL_SDK_DISABLED")
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), child)
        .await
        .expect("child finishes within 60 s")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("1 passed"),
        "the child test did not run:\n{stdout}"
    );

    // The child's guard waited for every export to be acknowledged before it exited.
    let received = receiver.received.lock().unwrap();

    // Resource attributes, from the environment only.
    let resource = &received.traces[0].resource_spans[0]
        .resource
        .as_ref()
        .unwrap()
        .attributes;
    for (key, want) in [
        ("service.name", "kbng-control"),
        ("service.instance.id", "kbng-control-7"),
        ("k8s.pod.name", "kbng-control-7"),
        ("k8s.namespace.name", "kbng-test"),
        ("k8s.node.name", "node-a"),
    ] {
        assert_eq!(attr(resource, key).as_deref(), Some(want), "{key}");
    }

    let spans: Vec<&Span> = received
        .traces
        .iter()
        .flat_map(|r| &r.resource_spans)
        .flat_map(|r| &r.scope_spans)
        .flat_map(|s| &s.spans)
        .collect();
    let by_name =
        |name: &str| -> Vec<&Span> { spans.iter().copied().filter(|s| s.name == name).collect() };
    let onboarding = by_name("onboarding");
    let servers = by_name("grpc.server");
    let programs = by_name("dataplane.program");
    let unlinked = by_name("unlinked");
    assert_eq!(onboarding.len(), 1, "spans: {spans:#?}");
    assert_eq!(servers.len(), 2, "one server span per call");
    assert_eq!(programs.len(), 2);
    let onboarding = onboarding[0];
    assert!(onboarding.parent_span_id.is_empty(), "onboarding is a root");
    assert_eq!(
        attr(&onboarding.attributes, "session.id").as_deref(),
        Some("42")
    );

    // The linked call: onboarding -> grpc.server (over traceparent) -> dataplane.program.
    let server = servers
        .iter()
        .find(|s| s.trace_id == onboarding.trace_id)
        .expect("a server span in the onboarding's trace");
    assert_eq!(server.parent_span_id, onboarding.span_id);
    assert_eq!(
        attr(&server.attributes, "rpc.method").as_deref(),
        Some("/opentelemetry.proto.collector.logs.v1.LogsService/Export")
    );
    let program = programs
        .iter()
        .find(|s| s.parent_span_id == server.span_id)
        .expect("the programming span is the server span's child");
    assert_eq!(program.trace_id, onboarding.trace_id);

    // Without the interceptor nothing links: the server span is a root in another trace.
    let other = servers
        .iter()
        .find(|s| s.trace_id != onboarding.trace_id)
        .expect("the uninstrumented call's server span");
    assert!(other.parent_span_id.is_empty());
    assert_ne!(other.trace_id, unlinked[0].trace_id);

    // Metric points: the DORA histogram, the sessions gauge, the dataplane drop counter.
    let metrics: HashMap<&str, &metric::Data> = received
        .metrics
        .iter()
        .flat_map(|r| &r.resource_metrics)
        .flat_map(|r| &r.scope_metrics)
        .flat_map(|s| &s.metrics)
        .filter_map(|m| Some((m.name.as_str(), m.data.as_ref()?)))
        .collect();
    let Some(metric::Data::Histogram(dora)) = metrics.get("kbng.dhcp.dora.duration") else {
        panic!("no DORA histogram in {:?}", metrics.keys());
    };
    assert_eq!(dora.data_points[0].count, 1);
    assert!((dora.data_points[0].sum.unwrap() - 0.012).abs() < 1e-9);
    let Some(metric::Data::Gauge(sessions)) = metrics.get("kbng.sessions") else {
        panic!("no sessions gauge");
    };
    let p = &sessions.data_points[0];
    assert_eq!(p.value, Some(number_data_point::Value::AsInt(3)));
    assert_eq!(attr(&p.attributes, "state").as_deref(), Some("active"));
    assert_eq!(attr(&p.attributes, "plan").as_deref(), Some("gold"));
    let Some(metric::Data::Sum(drops)) = metrics.get("kbng.dataplane.drops") else {
        panic!("no drop counter");
    };
    assert!(drops.is_monotonic);
    let p = &drops.data_points[0];
    assert_eq!(p.value, Some(number_data_point::Value::AsInt(7)));
    assert_eq!(attr(&p.attributes, "reason").as_deref(), Some("no session"));
    assert_eq!(attr(&p.attributes, "worker").as_deref(), Some("0"));

    // Logs through the tracing bridge, correlated with the span they were emitted in.
    let log = received
        .logs
        .iter()
        .flat_map(|r| &r.resource_logs)
        .flat_map(|r| &r.scope_logs)
        .flat_map(|s| &s.log_records)
        .find(|l| {
            matches!(
                l.body.as_ref().and_then(|b| b.value.as_ref()),
                Some(any_value::Value::StringValue(s)) if s == "subscriber onboarding"
            )
        })
        .expect("the onboarding log record");
    assert_eq!(log.trace_id, onboarding.trace_id);
    assert_eq!(log.span_id, onboarding.span_id);
}
