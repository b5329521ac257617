//! Pure builders: a `BNG`, its validated plans and its session cap in; the objects the
//! operator owns for it out. No I/O: the reconciler applies what these return with
//! server-side apply, so every field set here is a field the operator manages.
//!
//! ```text
//!   Bng + [Plan] + Licence + WorkloadConfig
//!     ├─ control::*   ServiceAccount, Role, RoleBinding, ConfigMap, Service, StatefulSet
//!     ├─ dataplane::* StatefulSet (Guaranteed QoS, hugepages, VFs, Multus) and its headless
//!     │               Service (a stable DNS name per dataplane for the control to dial)
//!     └─ network_policy::* one NetworkPolicy per component: who may reach its ports
//! ```

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMap, ContainerPort, EnvVar, HTTPGetAction, KeyToPath, PodSecurityContext,
    Probe, SeccompProfile, SecretVolumeSource, SecurityContext, Service, ServiceAccount,
    TCPSocketAction, Volume, VolumeMount,
};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kbng_crds::{Bng, Licence, LicenceSource};
use kube::{Resource, ResourceExt};

use crate::config::WorkloadConfig;
use crate::plan::Plan;

pub mod control;
pub mod control_config;
pub mod dataplane;
pub mod network_policy;
pub mod telemetry;

/// The field manager of every server-side apply the operator makes.
pub const FIELD_MANAGER: &str = "kbng-operator";
/// The label every owned object and pod carries with its BNG's name.
pub const BNG_LABEL: &str = "kbng.dev/bng";
pub const COMPONENT_LABEL: &str = "app.kubernetes.io/component";

/// The session cap in force for a BNG, and where it comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionCap {
    pub max_sessions: u64,
    pub source: LicenceSource,
}

/// Everything the builders need.
#[derive(Clone, Copy, Debug)]
pub struct Inputs<'a> {
    pub bng: &'a Bng,
    /// Valid plans the BNG references, in the order of `spec.plans`.
    pub plans: &'a [Plan],
    /// The Licence the BNG references, when it exists, valid or not: the control verifies it
    /// against the same public key and falls back to the free baseline by itself.
    pub licence: Option<&'a Licence>,
    pub config: &'a WorkloadConfig,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BuildError {
    #[error("the BNG has no {0} (it must come from the API server)")]
    MissingMeta(&'static str),
    #[error("could not encode the control configuration: {0}")]
    Encode(String),
}

/// The objects owned for one BNG.
#[derive(Clone, Debug)]
pub struct Owned {
    pub service_account: ServiceAccount,
    pub role: Role,
    pub role_binding: RoleBinding,
    pub config_map: ConfigMap,
    pub service: Service,
    pub control: StatefulSet,
    pub dataplane: StatefulSet,
    pub dataplane_service: Service,
    pub control_policy: NetworkPolicy,
    pub dataplane_policy: NetworkPolicy,
}

/// Builds every owned object of `inputs.bng`.
pub fn build(inputs: &Inputs<'_>) -> Result<Owned, BuildError> {
    let base = Base::new(inputs.bng)?;
    let config_map = control::config_map(&base, inputs)?;
    let mut control_sts = control::stateful_set(
        &base,
        inputs.config,
        control::config_hash(&config_map),
        inputs.bng.spec.dhcp.mode == kbng_crds::bng::DhcpMode::Relay,
        inputs.bng.spec.aaa.radius.as_ref(),
        inputs.bng.spec.dataplane.session_capacity,
        grpc_tls_volume(inputs.bng),
    );
    control::mount_subscribers(&mut control_sts, inputs.bng.spec.aaa.subscribers.as_ref());
    Ok(Owned {
        service_account: control::service_account(&base),
        role: control::role(&base, inputs.bng),
        role_binding: control::role_binding(&base),
        config_map: config_map.clone(),
        service: control::service(&base, inputs.bng.spec.aaa.radius.as_ref()),
        control: control_sts,
        dataplane: dataplane::stateful_set(&base, inputs.bng, inputs.config),
        dataplane_service: dataplane::service(&base),
        control_policy: network_policy::control(&base, inputs.bng),
        dataplane_policy: network_policy::dataplane(&base),
    })
}

pub fn control_name(bng: &str) -> String {
    format!("{bng}-control")
}

pub fn dataplane_name(bng: &str) -> String {
    format!("{bng}-dataplane")
}

/// Name, namespace and owner reference shared by every owned object.
#[derive(Clone, Debug)]
pub(crate) struct Base {
    pub bng: String,
    pub namespace: String,
    pub owner: OwnerReference,
}

impl Base {
    fn new(bng: &Bng) -> Result<Base, BuildError> {
        let namespace = bng
            .namespace()
            .ok_or(BuildError::MissingMeta("namespace"))?;
        let owner = bng
            .controller_owner_ref(&())
            .filter(|o| !o.uid.is_empty())
            .ok_or(BuildError::MissingMeta("uid"))?;
        Ok(Base {
            bng: bng.name_any(),
            namespace,
            owner,
        })
    }

    /// Labels selecting one component's pods; never change them (selectors are immutable).
    pub fn selector(&self, component: &str) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("app.kubernetes.io/name".to_string(), "kbng".to_string()),
            ("app.kubernetes.io/instance".to_string(), self.bng.clone()),
            (COMPONENT_LABEL.to_string(), component.to_string()),
        ])
    }

    pub fn labels(&self, component: &str) -> BTreeMap<String, String> {
        let mut labels = self.selector(component);
        labels.insert(
            "app.kubernetes.io/managed-by".into(),
            FIELD_MANAGER.to_string(),
        );
        labels.insert(BNG_LABEL.into(), self.bng.clone());
        labels
    }

    pub fn meta(&self, name: String, component: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name),
            namespace: Some(self.namespace.clone()),
            labels: Some(self.labels(component)),
            owner_references: Some(vec![self.owner.clone()]),
            ..ObjectMeta::default()
        }
    }
}

/// Every workload container's environment: its pod name (the dataplane's `--dataplane-id`
/// expands it) and the OpenTelemetry set of [`telemetry::env`].
pub(crate) fn container_env(service: &str, config: &WorkloadConfig) -> Vec<EnvVar> {
    std::iter::once(telemetry::field_env(
        crate::binaries::dataplane::ENV_POD_NAME,
        "metadata.name",
    ))
    .chain(telemetry::env(service, config.otlp_endpoint.as_deref()))
    .collect()
}

/// A workload container's own TCP port `name`, and the `/metrics` port.
pub(crate) fn container_ports(name: &str, port: i32) -> Vec<ContainerPort> {
    vec![
        ContainerPort {
            name: Some(name.into()),
            container_port: port,
            protocol: Some("TCP".into()),
            ..ContainerPort::default()
        },
        telemetry::metrics_port(),
    ]
}

/// A probe of `port`: an HTTP GET of `http_path` when given, else a TCP connect.
pub(crate) fn probe(
    port: i32,
    http_path: Option<&str>,
    period_secs: i32,
    timeout_secs: i32,
    failures: i32,
) -> Probe {
    let port = IntOrString::Int(port);
    Probe {
        http_get: http_path.map(|p| HTTPGetAction {
            path: Some(p.into()),
            port: port.clone(),
            ..HTTPGetAction::default()
        }),
        tcp_socket: http_path.is_none().then_some(TCPSocketAction {
            port,
            ..TCPSocketAction::default()
        }),
        period_seconds: Some(period_secs),
        timeout_seconds: Some(timeout_secs),
        failure_threshold: Some(failures),
        ..Probe::default()
    }
}

/// What every workload container shares: no privilege escalation, a read-only root
/// filesystem, and every capability dropped except `add`.
pub(crate) fn container_security(add: &[&str]) -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        read_only_root_filesystem: Some(true),
        capabilities: Some(Capabilities {
            add: (!add.is_empty()).then(|| add.iter().map(|c| c.to_string()).collect()),
            drop: Some(vec!["ALL".into()]),
        }),
        ..SecurityContext::default()
    }
}

const GRPC_TLS_VOLUME: &str = "grpc-tls";

/// Volume `name` holding Secret `secret` (only `items` of it, when given), its files readable
/// by owner and group only.
pub(crate) fn secret_volume(name: &str, secret: &str, items: Option<Vec<KeyToPath>>) -> Volume {
    Volume {
        name: name.into(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret.into()),
            items,
            default_mode: Some(0o440),
            ..SecretVolumeSource::default()
        }),
        ..Volume::default()
    }
}

/// Volume `name` mounted read-only at `path`.
pub(crate) fn read_only_mount(name: &str, path: &str) -> VolumeMount {
    VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        read_only: Some(true),
        ..VolumeMount::default()
    }
}

/// The BNG's `dataplane.grpcTls` Secret as a volume, when it names one (both pods mount it).
pub(crate) fn grpc_tls_volume(bng: &Bng) -> Option<Volume> {
    let tls = bng.spec.dataplane.grpc_tls.as_ref()?;
    Some(secret_volume(GRPC_TLS_VOLUME, &tls.secret_name, None))
}

pub(crate) fn grpc_tls_mount() -> VolumeMount {
    read_only_mount(GRPC_TLS_VOLUME, crate::binaries::grpc_tls::DIR)
}

/// What every workload pod shares: the container runtime's default seccomp profile.
pub(crate) fn pod_security() -> PodSecurityContext {
    PodSecurityContext {
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".into(),
            ..SeccompProfile::default()
        }),
        ..PodSecurityContext::default()
    }
}

#[cfg(test)]
pub(crate) mod tests;
