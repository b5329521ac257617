//! How a workload container learns who it is and where to send telemetry: the standard
//! OpenTelemetry variables, with the pod's identity from the downward API.
//!
//! The kubelet expands `$(VAR)` in an env value from the variables defined before it, so the
//! `K8S_*` field references come first and `OTEL_RESOURCE_ATTRIBUTES` is assembled from them:
//! `service.instance.id` is the pod's UID (a restarted StatefulSet pod keeps its name, not
//! its UID, and the OpenTelemetry conventions want an id unique per instance).

use k8s_openapi::api::core::v1::{ContainerPort, EnvVar, EnvVarSource, ObjectFieldSelector};

use crate::binaries::telemetry::*;

/// `name` from the pod's own `field_path` (downward API).
pub(crate) fn field_env(name: &str, field_path: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: field_path.into(),
                ..ObjectFieldSelector::default()
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

fn value_env(name: &str, value: String) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value),
        ..EnvVar::default()
    }
}

/// The resource attributes, as `OTEL_RESOURCE_ATTRIBUTES` carries them once expanded.
pub fn resource_attributes() -> String {
    [
        ("k8s.pod.name", ENV_K8S_POD_NAME),
        ("k8s.namespace.name", ENV_K8S_NAMESPACE_NAME),
        ("k8s.node.name", ENV_K8S_NODE_NAME),
        ("service.instance.id", ENV_K8S_POD_UID),
    ]
    .map(|(key, var)| format!("{key}=$({var})"))
    .join(",")
}

/// The telemetry environment of a container of `service` (`kbng-control`, `kbng-dataplane`).
/// Without an `endpoint` nothing is exported over OTLP (the binaries never guess one); the
/// `/metrics` endpoint is served either way.
pub(crate) fn env(service: &str, endpoint: Option<&str>) -> Vec<EnvVar> {
    let mut env = vec![
        field_env(ENV_K8S_POD_NAME, "metadata.name"),
        field_env(ENV_K8S_POD_UID, "metadata.uid"),
        field_env(ENV_K8S_NAMESPACE_NAME, "metadata.namespace"),
        field_env(ENV_K8S_NODE_NAME, "spec.nodeName"),
        value_env(ENV_SERVICE_NAME, service.to_string()),
        value_env(ENV_RESOURCE_ATTRIBUTES, resource_attributes()),
    ];
    if let Some(endpoint) = endpoint.filter(|e| !e.is_empty()) {
        env.push(value_env(ENV_ENDPOINT, endpoint.to_string()));
    }
    env
}

/// The named port `--metrics-listen` serves.
pub(crate) fn metrics_port() -> ContainerPort {
    ContainerPort {
        name: Some(METRICS_PORT_NAME.into()),
        container_port: METRICS_PORT,
        protocol: Some("TCP".into()),
        ..ContainerPort::default()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::Container;

    use crate::build::tests::{sample_bng, sample_plans};
    use crate::build::{Inputs, build};
    use crate::config::WorkloadConfig;

    fn containers(config: &WorkloadConfig) -> [Container; 2] {
        let (bng, plans) = (sample_bng(), sample_plans());
        let o = build(&Inputs {
            bng: &bng,
            plans: &plans,
            licence: None,
            config,
        })
        .unwrap();
        let c = |s: k8s_openapi::api::apps::v1::StatefulSet| {
            s.spec.unwrap().template.spec.unwrap().containers[0].clone()
        };
        [c(o.control), c(o.dataplane)]
    }

    /// The kubelet's expansion of a container's env, with the downward API answering from
    /// `fields`: `$(VAR)` is replaced only by variables defined earlier in the list.
    fn expand(c: &Container, fields: &BTreeMap<&str, &str>) -> BTreeMap<String, String> {
        let mut out: BTreeMap<String, String> = BTreeMap::new();
        for e in c.env.clone().unwrap() {
            let v = match (&e.value, &e.value_from) {
                (Some(v), None) => out
                    .iter()
                    .fold(v.clone(), |v, (k, x)| v.replace(&format!("$({k})"), x)),
                (None, Some(from)) => {
                    let path = &from.field_ref.as_ref().unwrap().field_path;
                    fields[path.as_str()].to_string()
                }
                other => panic!("{}: {other:?}", e.name),
            };
            out.insert(e.name, v);
        }
        out
    }

    #[test]
    fn workloads_carry_the_otel_variables_and_a_metrics_port() {
        let fields = BTreeMap::from([
            ("metadata.name", "lab-control-0"),
            ("metadata.uid", "5f0c-uid"),
            ("metadata.namespace", "kbng"),
            ("spec.nodeName", "node-a"),
        ]);
        let config = WorkloadConfig {
            otlp_endpoint: Some("http://otel-collector.observability:4317".into()),
            ..WorkloadConfig::default()
        };
        for (c, service) in containers(&config)
            .iter()
            .zip(["kbng-control", "kbng-dataplane"])
        {
            let env = expand(c, &fields);
            assert_eq!(env["OTEL_SERVICE_NAME"], service);
            assert_eq!(
                env["OTEL_RESOURCE_ATTRIBUTES"],
                "k8s.pod.name=lab-control-0,k8s.namespace.name=kbng,k8s.node.name=node-a,\
                 service.instance.id=5f0c-uid"
            );
            assert_eq!(
                env["OTEL_EXPORTER_OTLP_ENDPOINT"],
                "http://otel-collector.observability:4317"
            );
            let args = c.args.clone().unwrap();
            let at = args.iter().position(|a| a == "--metrics-listen").unwrap();
            assert_eq!(args[at + 1], "0.0.0.0:9090", "{service}");
            let port = c
                .ports
                .clone()
                .unwrap()
                .into_iter()
                .find(|p| p.name.as_deref() == Some("metrics"))
                .unwrap();
            assert_eq!(port.container_port, 9090, "{service}");
        }
    }

    #[test]
    fn without_an_endpoint_nothing_is_exported() {
        for c in containers(&WorkloadConfig::default()) {
            let names: Vec<String> = c.env.unwrap().into_iter().map(|e| e.name).collect();
            assert!(
                names.contains(&"OTEL_SERVICE_NAME".to_string()),
                "{names:?}"
            );
            assert!(!names.iter().any(|n| n == "OTEL_EXPORTER_OTLP_ENDPOINT"));
        }
    }
}
