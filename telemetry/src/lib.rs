//! Traces, metrics and logs for every kbng binary: OpenTelemetry over OTLP/gRPC, a Prometheus
//! `/metrics` endpoint, and W3C trace context across the control <-> dataplane gRPC hop.
//!
//! ```text
//!  tracing spans/events ──► tracing-subscriber registry ─┬─► fmt layer (text or JSON, RUST_LOG)
//!                                                        ├─► tracing-opentelemetry ─► SdkTracerProvider ─► OTLP/gRPC*
//!                                                        └─► log bridge ─► SdkLoggerProvider ─► OTLP/gRPC*
//!  metrics::{Control,Dataplane,Operator}Metrics ─► SdkMeterProvider ─┬─► PeriodicReader ─► OTLP/gRPC*
//!                                                                    └─► ManualReader ◄── GET /metrics
//!  grpc::TraceContextInterceptor (client) ── traceparent ──► grpc::server_span (server)
//!                                                   * only when an OTLP endpoint is configured
//! ```
//!
//! Invariants:
//! - Configuration comes from the standard `OTEL_*` variables (`OTEL_EXPORTER_OTLP_ENDPOINT` and
//!   the per-signal `OTEL_EXPORTER_OTLP_{TRACES,METRICS,LOGS}_ENDPOINT`, `OTEL_SERVICE_NAME`,
//!   `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_METRIC_EXPORT_INTERVAL`, `OTEL_TRACES_SAMPLER`,
//!   `OTEL_SDK_DISABLED`, `OTEL_<SIGNAL>_EXPORTER=none`) and the downward-API variables
//!   `K8S_POD_NAME`, `K8S_NAMESPACE_NAME`, `K8S_NODE_NAME`. With no endpoint set, nothing is
//!   exported and nothing fails; spans still get trace ids, so propagation works.
//! - One metric system: the OTel SDK. `/metrics` reads the same instruments as OTLP.
//! - No per-subscriber series: the metric API takes no free-form attributes (see [`metrics`]).
//! - Dropping the [`TelemetryGuard`] flushes and shuts down every exporter.
//!
//! With an endpoint set, [`init`] must run inside a Tokio runtime (the tonic exporters use it),
//! and the guard is best dropped from a multi-thread runtime or outside any runtime: the final
//! flush blocks while tonic needs the runtime to make progress.

#![forbid(unsafe_code)]

mod env;
pub mod grpc;
pub mod metrics;
mod prometheus;
pub mod trace;

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_appender_tracing::layer::OpenTelemetryTracingBridge;
use opentelemetry_otlp::ExporterBuildError;
use opentelemetry_sdk::logs::SdkLoggerProvider;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer as _, Registry};

pub use crate::prometheus::{MetricsServer, PrometheusExporter};
use env::{EnvSnapshot, Signal};
pub use opentelemetry::metrics::Meter;

/// The instrumentation scope of every kbng span, log and instrument.
const SCOPE: &str = "kbng";

/// How long the guard waits for each provider's final export.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// How console logs are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// Human-readable lines (the default).
    #[default]
    Text,
    /// One JSON object per line, with the current span's fields.
    Json,
}

impl FromStr for LogFormat {
    type Err = ParseLogFormatError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(ParseLogFormatError(other.to_owned())),
        }
    }
}

impl fmt::Display for LogFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LogFormat::Text => "text",
            LogFormat::Json => "json",
        })
    }
}

/// A log format other than `text` or `json`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("unknown log format {0:?} (expected \"text\" or \"json\")")]
pub struct ParseLogFormatError(String);

/// What a binary chooses; everything else comes from the environment.
#[derive(Debug, Clone)]
pub struct TelemetryConfig {
    /// Console log format.
    pub log_format: LogFormat,
    /// The filter used when `RUST_LOG` is unset, in `EnvFilter` syntax.
    pub default_filter: String,
    /// Console logs go to stderr instead of stdout (for a binary whose stdout is data).
    pub log_to_stderr: bool,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self {
            log_format: LogFormat::Text,
            default_filter: "info".to_owned(),
            log_to_stderr: false,
        }
    }
}

/// Why [`init`] or the `/metrics` server failed.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// `RUST_LOG` (or the default filter) does not parse.
    #[error("invalid log filter {filter:?}")]
    Filter {
        filter: String,
        #[source]
        source: tracing_subscriber::filter::ParseError,
    },
    /// An OTLP endpoint is configured but [`init`] ran outside a Tokio runtime.
    #[error("OTLP export over gRPC needs a Tokio runtime: call init inside one")]
    NoRuntime,
    /// An OTLP exporter could not be built (a malformed endpoint, for instance).
    #[error("building the OTLP {signal} exporter")]
    Exporter {
        signal: &'static str,
        #[source]
        source: ExporterBuildError,
    },
    /// A global `tracing` subscriber was already installed.
    #[error("a global tracing subscriber is already installed")]
    AlreadyInitialized(#[source] tracing_subscriber::util::TryInitError),
    /// The `/metrics` listener could not be bound.
    #[error("binding the metrics endpoint on {addr}")]
    Bind {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// The SDK refused a collection (after shutdown).
    #[error("collecting metrics: {0}")]
    Collect(String),
}

/// Which signals go out over OTLP in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exports {
    pub traces: bool,
    pub metrics: bool,
    pub logs: bool,
}

/// Keeps the providers alive; dropping it flushes and shuts them down.
pub struct TelemetryGuard {
    tracer_provider: SdkTracerProvider,
    meter_provider: SdkMeterProvider,
    logger_provider: Option<SdkLoggerProvider>,
    prometheus: PrometheusExporter,
    exports: Exports,
}

impl fmt::Debug for TelemetryGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TelemetryGuard")
            .field("exports", &self.exports)
            .finish_non_exhaustive()
    }
}

impl TelemetryGuard {
    /// The meter to build [`metrics::ControlMetrics`] and friends on.
    pub fn meter(&self) -> Meter {
        self.meter_provider.meter(SCOPE)
    }

    /// Which signals are exported over OTLP.
    pub fn exports(&self) -> Exports {
        self.exports
    }

    /// The pull side of the metrics, for `/metrics`.
    pub fn prometheus(&self) -> &PrometheusExporter {
        &self.prometheus
    }

    /// Serves `GET /metrics` on `addr` (see [`PrometheusExporter::serve`]).
    pub async fn serve_metrics(
        &self,
        addr: std::net::SocketAddr,
    ) -> Result<MetricsServer, TelemetryError> {
        self.prometheus.serve(addr).await
    }

    /// Exports everything buffered now (spans, metric points, logs). Errors are logged.
    pub fn force_flush(&self) {
        let results = [
            ("traces", self.tracer_provider.force_flush()),
            ("metrics", self.meter_provider.force_flush()),
            (
                "logs",
                self.logger_provider
                    .as_ref()
                    .map_or(Ok(()), SdkLoggerProvider::force_flush),
            ),
        ];
        for (signal, result) in results {
            if let Err(e) = result {
                tracing::warn!(signal, error = %e, "telemetry flush failed");
            }
        }
    }

    fn shutdown(&self) {
        // Errors go to stderr: the tracing pipeline is what is being shut down.
        if let Err(e) = self.tracer_provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT) {
            eprintln!("kbng-telemetry: trace provider shutdown: {e}");
        }
        if let Err(e) = self.meter_provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT) {
            eprintln!("kbng-telemetry: meter provider shutdown: {e}");
        }
        if let Some(logs) = &self.logger_provider
            && let Err(e) = logs.shutdown_with_timeout(SHUTDOWN_TIMEOUT)
        {
            eprintln!("kbng-telemetry: logger provider shutdown: {e}");
        }
    }
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        // On a multi-thread runtime worker, let tonic's tasks run elsewhere while we block.
        match tokio::runtime::Handle::try_current() {
            Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(|| self.shutdown());
            }
            _ => self.shutdown(),
        }
    }
}

/// Crates whose own logs must not go into the OTLP log exporter (they are the exporter).
fn is_exporter_internal(target: &str) -> bool {
    ["opentelemetry", "tonic", "h2", "hyper", "tower", "reqwest"]
        .iter()
        .any(|t| target.starts_with(t))
}

fn filter(config: &TelemetryConfig) -> Result<EnvFilter, TelemetryError> {
    let spec = std::env::var(EnvFilter::DEFAULT_ENV)
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| config.default_filter.clone());
    EnvFilter::try_new(&spec).map_err(|source| TelemetryError::Filter {
        filter: spec,
        source,
    })
}

/// Installs the global `tracing` subscriber, the OTel providers and the W3C propagator for
/// the binary `service_name` (`kbng-control`, `kbng-dataplane`, `kbng-operator`); keep the
/// guard until exit.
pub fn init(
    service_name: &str,
    config: &TelemetryConfig,
) -> Result<TelemetryGuard, TelemetryError> {
    let env = EnvSnapshot::capture();
    let exports = Exports {
        traces: env.exports(Signal::Traces),
        metrics: env.exports(Signal::Metrics),
        logs: env.exports(Signal::Logs),
    };
    if (exports.traces || exports.metrics || exports.logs)
        && tokio::runtime::Handle::try_current().is_err()
    {
        return Err(TelemetryError::NoRuntime);
    }
    let env_filter = filter(config)?;
    let resource = env.resource(service_name, std::process::id());

    // Traces: always a provider (ids and propagation work), an exporter only when configured.
    let mut traces = SdkTracerProvider::builder().with_resource(resource.clone());
    if exports.traces {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .build()
            .map_err(|source| TelemetryError::Exporter {
                signal: "traces",
                source,
            })?;
        traces = traces.with_batch_exporter(exporter);
    }
    let tracer_provider = traces.build();

    // Metrics: the pull reader for /metrics always, the periodic OTLP push when configured
    // (its interval comes from OTEL_METRIC_EXPORT_INTERVAL, default 60 s).
    let (prometheus, pull_reader) = PrometheusExporter::new();
    let mut meters = SdkMeterProvider::builder()
        .with_resource(resource.clone())
        .with_reader(pull_reader);
    if exports.metrics {
        let exporter = opentelemetry_otlp::MetricExporter::builder()
            .with_tonic()
            .build()
            .map_err(|source| TelemetryError::Exporter {
                signal: "metrics",
                source,
            })?;
        meters = meters.with_reader(PeriodicReader::builder(exporter).build());
    }
    let meter_provider = meters.build();

    let logger_provider = if exports.logs {
        let exporter = opentelemetry_otlp::LogExporter::builder()
            .with_tonic()
            .build()
            .map_err(|source| TelemetryError::Exporter {
                signal: "logs",
                source,
            })?;
        Some(
            SdkLoggerProvider::builder()
                .with_resource(resource)
                .with_batch_exporter(exporter)
                .build(),
        )
    } else {
        None
    };

    let fmt_layer = match (config.log_format, config.log_to_stderr) {
        (LogFormat::Text, false) => tracing_subscriber::fmt::layer().boxed(),
        (LogFormat::Text, true) => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .boxed(),
        (LogFormat::Json, to_stderr) => {
            let json = tracing_subscriber::fmt::layer()
                .json()
                .with_current_span(true)
                .with_span_list(false);
            if to_stderr {
                json.with_writer(std::io::stderr).boxed()
            } else {
                json.boxed()
            }
        }
    };
    let otel_layer = tracing_opentelemetry::layer()
        .with_tracer(tracer_provider.tracer(SCOPE))
        .boxed();
    let log_bridge = logger_provider.as_ref().map(|p| {
        OpenTelemetryTracingBridge::new(p)
            .with_filter(tracing_subscriber::filter::filter_fn(|m| {
                !is_exporter_internal(m.target())
            }))
            .boxed()
    });
    Registry::default()
        .with(env_filter)
        .with(
            vec![Some(fmt_layer), Some(otel_layer), log_bridge]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>(),
        )
        .try_init()
        .map_err(TelemetryError::AlreadyInitialized)?;

    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    opentelemetry::global::set_tracer_provider(tracer_provider.clone());
    opentelemetry::global::set_meter_provider(meter_provider.clone());

    if let Some(protocol) = env.unsupported_protocol() {
        tracing::warn!(
            protocol,
            "OTEL_EXPORTER_OTLP_PROTOCOL is not grpc; kbng exports OTLP over gRPC only"
        );
    }
    tracing::info!(
        service = service_name,
        traces = exports.traces,
        metrics = exports.metrics,
        logs = exports.logs,
        "telemetry initialised"
    );
    Ok(TelemetryGuard {
        tracer_provider,
        meter_provider,
        logger_provider,
        prometheus,
        exports,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_format_parses_and_prints() {
        assert_eq!("json".parse::<LogFormat>().ok(), Some(LogFormat::Json));
        assert_eq!(LogFormat::Text.to_string(), "text");
        assert!("yaml".parse::<LogFormat>().is_err());
    }

    #[test]
    fn exporter_crates_are_kept_out_of_the_log_export() {
        assert!(is_exporter_internal("opentelemetry_sdk::metrics"));
        assert!(is_exporter_internal("h2::codec"));
        assert!(!is_exporter_internal("kbng_control::dhcp"));
    }
}
