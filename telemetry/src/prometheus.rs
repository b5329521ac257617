//! `/metrics`: the OTel SDK's instruments rendered in the Prometheus text format (0.0.4).
//!
//! Design: one metric system. Binaries record only into OpenTelemetry instruments; the
//! `SdkMeterProvider` has two readers, a periodic OTLP exporter (when an endpoint is set) and
//! the pull-based [`ManualReader`] below, which a scrape collects and renders. The alternative,
//! a `prometheus-client` registry next to the OTel SDK, would mean recording every measurement
//! twice or exporting only one way. The upstream `opentelemetry-prometheus` 0.33 bridge does the
//! same as this file but through the `prometheus` crate's registry and encoder, a second
//! metrics library kept only to print text; the rendering here (names, `_total`, unit
//! suffixes, cumulative buckets, escaping) is small, and `promtool check metrics` checks it
//! in the tests. Metric names follow the OTel-to-Prometheus rules: dots become underscores, the unit
//! is appended (`s` -> `_seconds`, `By` -> `_bytes`, `{...}` dropped), monotonic sums get
//! `_total`; resource attributes go on `target_info`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Weak};
use std::time::Duration;

use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData, ResourceMetrics};
use opentelemetry_sdk::metrics::reader::MetricReader;
use opentelemetry_sdk::metrics::{InstrumentKind, ManualReader, Pipeline, Temporality};

use crate::TelemetryError;

/// A pull reader shared between the meter provider and the `/metrics` handler.
#[derive(Debug, Clone)]
pub struct PrometheusExporter {
    reader: Arc<ManualReader>,
}

/// What the provider owns: a handle on the same reader.
#[derive(Debug)]
pub(crate) struct SharedReader(Arc<ManualReader>);

impl MetricReader for SharedReader {
    fn register_pipeline(&self, pipeline: Weak<Pipeline>) {
        self.0.register_pipeline(pipeline);
    }
    fn collect(&self, rm: &mut ResourceMetrics) -> OTelSdkResult {
        self.0.collect(rm)
    }
    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }
    fn temporality(&self, kind: InstrumentKind) -> Temporality {
        self.0.temporality(kind)
    }
}

impl PrometheusExporter {
    /// A new exporter and the reader to register on the `SdkMeterProvider`.
    pub(crate) fn new() -> (Self, SharedReader) {
        // Prometheus counters are cumulative, the ManualReader's default.
        let reader = Arc::new(ManualReader::builder().build());
        (
            Self {
                reader: Arc::clone(&reader),
            },
            SharedReader(reader),
        )
    }

    /// Collects every instrument now and renders the Prometheus text format.
    pub fn render(&self) -> Result<String, TelemetryError> {
        let mut rm = ResourceMetrics::default();
        self.reader
            .collect(&mut rm)
            .map_err(|e| TelemetryError::Collect(e.to_string()))?;
        Ok(render(&rm))
    }

    /// Serves `GET /metrics` on `addr` until the returned server is dropped or aborted.
    /// Binding happens before this returns, so a busy port is an error here, not later.
    /// Needs a Tokio runtime.
    pub async fn serve(&self, addr: SocketAddr) -> Result<MetricsServer, TelemetryError> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| TelemetryError::Bind { addr, source })?;
        let local_addr = listener
            .local_addr()
            .map_err(|source| TelemetryError::Bind { addr, source })?;
        let exporter = self.clone();
        let app = axum::Router::new().route(
            "/metrics",
            axum::routing::get(move || {
                let exporter = exporter.clone();
                async move { scrape(&exporter) }
            }),
        );
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "metrics server stopped");
            }
        });
        Ok(MetricsServer { local_addr, task })
    }
}

fn scrape(exporter: &PrometheusExporter) -> axum::response::Response {
    use axum::response::IntoResponse;
    match exporter.render() {
        Ok(body) => (
            [(
                http::header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            body,
        )
            .into_response(),
        Err(e) => (http::StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// A running `/metrics` server. Dropping it stops the server.
#[derive(Debug)]
pub struct MetricsServer {
    local_addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl MetricsServer {
    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The Prometheus name of an OTel instrument.
fn metric_name(name: &str, unit: &str, monotonic_sum: bool) -> String {
    let mut out = sanitize(name);
    let suffix = match unit {
        "s" => Some("seconds"),
        "ms" => Some("milliseconds"),
        "By" => Some("bytes"),
        "1" if !monotonic_sum => Some("ratio"),
        _ => None, // `{packet}` and other annotations carry no Prometheus unit
    };
    if let Some(suffix) = suffix
        && !out.ends_with(&format!("_{suffix}"))
    {
        out.push('_');
        out.push_str(suffix);
    }
    if monotonic_sum && !out.ends_with("_total") {
        out.push_str("_total");
    }
    out
}

/// Replaces every character outside `[a-zA-Z0-9_]` by `_` (and a leading digit).
fn sanitize(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

fn escape_label_value(v: &str) -> String {
    v.replace('\\', r"\\")
        .replace('\n', r"\n")
        .replace('"', "\\\"")
}

fn escape_help(v: &str) -> String {
    v.replace('\\', r"\\").replace('\n', r"\n")
}

fn format_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_owned()
    } else if v == f64::INFINITY {
        "+Inf".to_owned()
    } else if v == f64::NEG_INFINITY {
        "-Inf".to_owned()
    } else {
        format!("{v}")
    }
}

/// Label pairs, sorted by name, as `{a="x",b="y"}` (empty string when there are none).
fn labels<'a>(
    pairs: impl Iterator<Item = (String, String)> + 'a,
    extra: Option<(&str, &str)>,
) -> String {
    let mut sorted: BTreeMap<String, String> = pairs.collect();
    if let Some((k, v)) = extra {
        sorted.insert(k.to_owned(), v.to_owned());
    }
    if sorted.is_empty() {
        return String::new();
    }
    let body: Vec<String> = sorted
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape_label_value(v)))
        .collect();
    format!("{{{}}}", body.join(","))
}

fn attrs<'a>(
    kvs: impl Iterator<Item = &'a opentelemetry::KeyValue> + 'a,
) -> impl Iterator<Item = (String, String)> + 'a {
    kvs.map(|kv| (sanitize(kv.key.as_str()), kv.value.to_string()))
}

/// Numeric data points as `f64` for the text format.
trait AsF64: Copy {
    fn as_f64(self) -> f64;
}
impl AsF64 for f64 {
    fn as_f64(self) -> f64 {
        self
    }
}
impl AsF64 for u64 {
    #[allow(clippy::cast_precision_loss)] // exact up to 2^53, which counters never reach
    fn as_f64(self) -> f64 {
        self as f64
    }
}
impl AsF64 for i64 {
    #[allow(clippy::cast_precision_loss)]
    fn as_f64(self) -> f64 {
        self as f64
    }
}

fn render_data<T: AsF64>(
    out: &mut String,
    name: &str,
    unit: &str,
    help: &str,
    data: &MetricData<T>,
) {
    let header = |out: &mut String, full: &str, kind: &str| {
        let _ = writeln!(out, "# HELP {full} {}", escape_help(help));
        let _ = writeln!(out, "# TYPE {full} {kind}");
    };
    match data {
        MetricData::Gauge(g) => {
            let full = metric_name(name, unit, false);
            let mut points = g.data_points().peekable();
            if points.peek().is_none() {
                return;
            }
            header(out, &full, "gauge");
            for p in points {
                let l = labels(attrs(p.attributes()), None);
                let _ = writeln!(out, "{full}{l} {}", format_value(p.value().as_f64()));
            }
        }
        MetricData::Sum(s) => {
            let full = metric_name(name, unit, s.is_monotonic());
            let mut points = s.data_points().peekable();
            if points.peek().is_none() {
                return;
            }
            header(
                out,
                &full,
                if s.is_monotonic() { "counter" } else { "gauge" },
            );
            for p in points {
                let l = labels(attrs(p.attributes()), None);
                let _ = writeln!(out, "{full}{l} {}", format_value(p.value().as_f64()));
            }
        }
        MetricData::Histogram(h) => {
            let full = metric_name(name, unit, false);
            let mut points = h.data_points().peekable();
            if points.peek().is_none() {
                return;
            }
            header(out, &full, "histogram");
            for p in points {
                let mut cumulative = 0u64;
                for (bound, count) in p.bounds().zip(p.bucket_counts()) {
                    cumulative += count;
                    let le = format_value(bound);
                    let l = labels(attrs(p.attributes()), Some(("le", &le)));
                    let _ = writeln!(out, "{full}_bucket{l} {cumulative}");
                }
                let l = labels(attrs(p.attributes()), Some(("le", "+Inf")));
                let _ = writeln!(out, "{full}_bucket{l} {}", p.count());
                let l = labels(attrs(p.attributes()), None);
                let _ = writeln!(out, "{full}_sum{l} {}", format_value(p.sum().as_f64()));
                let _ = writeln!(out, "{full}_count{l} {}", p.count());
            }
        }
        // Not configured by this crate (no view selects exponential aggregation).
        MetricData::ExponentialHistogram(_) => {}
    }
}

/// Renders collected metrics; `target_info` first, then each instrument.
pub(crate) fn render(rm: &ResourceMetrics) -> String {
    let mut out = String::new();
    let resource = labels(
        rm.resource()
            .iter()
            .map(|(k, v)| (sanitize(k.as_str()), v.to_string())),
        None,
    );
    let _ = writeln!(out, "# HELP target_info Target metadata");
    let _ = writeln!(out, "# TYPE target_info gauge");
    let _ = writeln!(out, "target_info{resource} 1");
    for scope in rm.scope_metrics() {
        for m in scope.metrics() {
            let help = if m.description().is_empty() {
                m.name()
            } else {
                m.description()
            };
            match m.data() {
                AggregatedMetrics::F64(d) => render_data(&mut out, m.name(), m.unit(), help, d),
                AggregatedMetrics::U64(d) => render_data(&mut out, m.name(), m.unit(), help, d),
                AggregatedMetrics::I64(d) => render_data(&mut out, m.name(), m.unit(), help, d),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_otel_to_prometheus_rules() {
        assert_eq!(
            metric_name("kbng.dhcp.dora.duration", "s", false),
            "kbng_dhcp_dora_duration_seconds"
        );
        assert_eq!(
            metric_name("kbng.dataplane.packets", "{packet}", true),
            "kbng_dataplane_packets_total"
        );
        assert_eq!(
            metric_name("kbng.dataplane.io", "By", true),
            "kbng_dataplane_io_bytes_total"
        );
        assert_eq!(
            metric_name("kbng.sessions", "{session}", false),
            "kbng_sessions"
        );
        assert_eq!(metric_name("x.total", "", true), "x_total");
        assert_eq!(sanitize("k8s.pod.name"), "k8s_pod_name");
        assert_eq!(sanitize("9lives"), "_9lives");
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        let l = labels(
            [
                ("b".to_owned(), "2".to_owned()),
                ("a".to_owned(), "1".to_owned()),
            ]
            .into_iter(),
            Some(("le", "+Inf")),
        );
        assert_eq!(l, r#"{a="1",b="2",le="+Inf"}"#);
    }
}
