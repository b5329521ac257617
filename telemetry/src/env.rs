//! What the process environment says about exporting and about the resource.
//!
//! Everything is read once into an [`EnvSnapshot`], so the decisions below are pure functions
//! that unit tests drive with a map (edition 2024 makes `std::env::set_var` unsafe, and this
//! crate forbids `unsafe`).

use std::collections::BTreeMap;

use opentelemetry::KeyValue;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::resource::TelemetryResourceDetector;

/// The downward-API variables the Helm chart sets, and the resource keys they become.
const K8S_ATTRIBUTES: [(&str, &str); 3] = [
    ("K8S_POD_NAME", "k8s.pod.name"),
    ("K8S_NAMESPACE_NAME", "k8s.namespace.name"),
    ("K8S_NODE_NAME", "k8s.node.name"),
];

/// One telemetry signal, as the `OTEL_*` variables name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    Traces,
    Metrics,
    Logs,
}

impl Signal {
    fn upper(self) -> &'static str {
        match self {
            Signal::Traces => "TRACES",
            Signal::Metrics => "METRICS",
            Signal::Logs => "LOGS",
        }
    }
}

/// The environment variables this crate looks at, captured once.
#[derive(Debug, Clone, Default)]
pub(crate) struct EnvSnapshot {
    vars: BTreeMap<String, String>,
}

impl EnvSnapshot {
    /// The current process environment (only `OTEL_*`, `K8S_*` and `HOSTNAME`).
    pub(crate) fn capture() -> Self {
        Self::from_pairs(
            std::env::vars().filter(|(k, _)| {
                k.starts_with("OTEL_") || k.starts_with("K8S_") || k == "HOSTNAME"
            }),
        )
    }

    pub(crate) fn from_pairs<I, K, V>(pairs: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        Self {
            vars: pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }

    /// A variable's value, `None` when unset or empty (the OTel spec treats both alike).
    fn get(&self, key: &str) -> Option<&str> {
        self.vars
            .get(key)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
    }

    /// Whether `signal` is to be exported over OTLP: an endpoint is configured (the generic
    /// or the signal's own), the SDK is not disabled, and `OTEL_<SIGNAL>_EXPORTER` is not
    /// `none`. Without an endpoint nothing is exported: we never guess `localhost:4317`.
    pub(crate) fn exports(&self, signal: Signal) -> bool {
        if self
            .get("OTEL_SDK_DISABLED")
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
        {
            return false;
        }
        if self
            .get(&format!("OTEL_{}_EXPORTER", signal.upper()))
            .is_some_and(|v| v.eq_ignore_ascii_case("none"))
        {
            return false;
        }
        self.get("OTEL_EXPORTER_OTLP_ENDPOINT").is_some()
            || self
                .get(&format!("OTEL_EXPORTER_OTLP_{}_ENDPOINT", signal.upper()))
                .is_some()
    }

    /// The OTLP protocol asked for, when it is not gRPC (the only one this crate speaks).
    pub(crate) fn unsupported_protocol(&self) -> Option<&str> {
        self.get("OTEL_EXPORTER_OTLP_PROTOCOL")
            .filter(|p| !p.eq_ignore_ascii_case("grpc"))
    }

    /// `service.instance.id`: the pod name, else `hostname-pid`.
    fn instance_id(&self, pid: u32) -> String {
        if let Some(pod) = self.get("K8S_POD_NAME") {
            return pod.to_owned();
        }
        let host = self
            .get("HOSTNAME")
            .map(str::to_owned)
            .or_else(|| {
                std::fs::read_to_string("/proc/sys/kernel/hostname")
                    .ok()
                    .map(|h| h.trim().to_owned())
                    .filter(|h| !h.is_empty())
            })
            .unwrap_or_else(|| "unknown-host".to_owned());
        format!("{host}-{pid}")
    }

    /// The resource every signal carries. Precedence, lowest first: the SDK's own
    /// attributes; `service.name` from the binary, `service.instance.id`, the `k8s.*`
    /// attributes from the downward API; `OTEL_RESOURCE_ATTRIBUTES`; `OTEL_SERVICE_NAME`.
    /// Explicit OTel configuration thus always wins over what we infer.
    pub(crate) fn resource(&self, service_name: &str, pid: u32) -> Resource {
        let mut inferred = vec![
            KeyValue::new("service.name", service_name.to_owned()),
            KeyValue::new("service.namespace", "kbng"),
            KeyValue::new("service.instance.id", self.instance_id(pid)),
        ];
        for (var, key) in K8S_ATTRIBUTES {
            if let Some(value) = self.get(var) {
                inferred.push(KeyValue::new(key, value.to_owned()));
            }
        }
        let mut builder = Resource::builder_empty()
            .with_detector(Box::new(TelemetryResourceDetector))
            .with_attributes(inferred);
        if let Some(attrs) = self.get("OTEL_RESOURCE_ATTRIBUTES") {
            // The SDK's `EnvResourceDetector` reads the live environment; we parse the
            // snapshot instead (same `k=v,k=v` format) so that tests can drive it.
            builder = builder.with_attributes(parse_resource_attributes(attrs));
        }
        if let Some(name) = self.get("OTEL_SERVICE_NAME") {
            builder = builder.with_service_name(name.to_owned());
        }
        builder.build()
    }
}

/// `key1=value1,key2=value2` as in `OTEL_RESOURCE_ATTRIBUTES`; malformed items are skipped.
fn parse_resource_attributes(s: &str) -> Vec<KeyValue> {
    s.split(',')
        .filter_map(|item| {
            let (k, v) = item.split_once('=')?;
            let (k, v) = (k.trim(), v.trim());
            (!k.is_empty()).then(|| KeyValue::new(k.to_owned(), v.to_owned()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::Key;

    fn attr(r: &Resource, key: &'static str) -> Option<String> {
        r.get(&Key::from_static_str(key)).map(|v| v.to_string())
    }

    #[test]
    fn nothing_is_exported_without_an_endpoint() {
        let env = EnvSnapshot::from_pairs([("OTEL_SERVICE_NAME", "x")]);
        assert!(!env.exports(Signal::Traces));
        assert!(!env.exports(Signal::Metrics));
        assert!(!env.exports(Signal::Logs));
    }

    #[test]
    fn generic_and_signal_endpoints_enable_export() {
        let env = EnvSnapshot::from_pairs([("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317")]);
        assert!(env.exports(Signal::Traces) && env.exports(Signal::Metrics));
        let env =
            EnvSnapshot::from_pairs([("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:4317")]);
        assert!(env.exports(Signal::Traces));
        assert!(!env.exports(Signal::Metrics));
    }

    #[test]
    fn disabled_sdk_and_none_exporter_win_over_endpoint() {
        let env = EnvSnapshot::from_pairs([
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
            ("OTEL_METRICS_EXPORTER", "none"),
        ]);
        assert!(env.exports(Signal::Traces));
        assert!(!env.exports(Signal::Metrics));
        let env = EnvSnapshot::from_pairs([
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
            ("OTEL_SDK_DISABLED", "TRUE"),
        ]);
        assert!(!env.exports(Signal::Traces));
    }

    #[test]
    fn resource_from_downward_api() {
        let env = EnvSnapshot::from_pairs([
            ("K8S_POD_NAME", "kbng-control-0"),
            ("K8S_NAMESPACE_NAME", "bng"),
            ("K8S_NODE_NAME", "node-a"),
        ]);
        let r = env.resource("kbng-control", 42);
        assert_eq!(attr(&r, "service.name").as_deref(), Some("kbng-control"));
        assert_eq!(
            attr(&r, "service.instance.id").as_deref(),
            Some("kbng-control-0")
        );
        assert_eq!(attr(&r, "k8s.pod.name").as_deref(), Some("kbng-control-0"));
        assert_eq!(attr(&r, "k8s.namespace.name").as_deref(), Some("bng"));
        assert_eq!(attr(&r, "k8s.node.name").as_deref(), Some("node-a"));
        assert!(attr(&r, "telemetry.sdk.name").is_some());
    }

    #[test]
    fn instance_id_without_a_pod_is_host_and_pid() {
        let env = EnvSnapshot::from_pairs([("HOSTNAME", "lab1")]);
        let r = env.resource("kbng-dataplane", 7);
        assert_eq!(attr(&r, "service.instance.id").as_deref(), Some("lab1-7"));
        assert_eq!(attr(&r, "k8s.pod.name"), None);
    }

    #[test]
    fn otel_variables_override_inferred_attributes() {
        let env = EnvSnapshot::from_pairs([
            ("K8S_NAMESPACE_NAME", "bng"),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "k8s.namespace.name=override, deployment.environment=lab,broken",
            ),
            ("OTEL_SERVICE_NAME", "renamed"),
        ]);
        let r = env.resource("kbng-control", 1);
        assert_eq!(attr(&r, "service.name").as_deref(), Some("renamed"));
        assert_eq!(attr(&r, "k8s.namespace.name").as_deref(), Some("override"));
        assert_eq!(attr(&r, "deployment.environment").as_deref(), Some("lab"));
    }
}
