//! The control workload: one `kbng-control` pod per BNG (a StatefulSet, for its stable name
//! and its session-store volume), its headless Service, its configuration and its identity.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, EmptyDirVolumeSource, KeyToPath,
    PersistentVolumeClaim, PersistentVolumeClaimSpec, PodSecurityContext, PodSpec, PodTemplateSpec,
    ResourceRequirements, SecurityContext, Service, ServiceAccount, ServicePort, ServiceSpec,
    Sysctl, Volume, VolumeMount, VolumeResourceRequirements,
};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kbng_crds::bng::{RadiusSpec, SubscribersSource};
use kbng_crds::{Bng, Licence};
use kube::ResourceExt;

use super::control_config::{fnv1a, render};
use super::{
    Base, BuildError, Inputs, container_env, container_ports, container_security, control_name,
    grpc_tls_mount, pod_security, probe, read_only_mount, secret_volume,
};
use crate::binaries::control;
use crate::config::{SessionStore, WorkloadConfig};
use crate::quantity;

pub const COMPONENT: &str = "control";
const STORE_VOLUME: &str = "session-store";
const CONFIG_VOLUME: &str = "config";
const RADIUS_VOLUME: &str = "radius-secret";
const SUBSCRIBERS_VOLUME: &str = "subscribers";
const API_TOKEN_VOLUME: &str = "api-token";
/// On the control pod template: the hash of its configuration file. `kbng-control` reads the
/// file at start, so a changed file must roll the pod; the session cap is a separate key it
/// re-reads, so a licence change does not restart anything.
pub const CONFIG_HASH_ANNOTATION: &str = "kbng.dev/config-hash";

pub(crate) fn service_account(base: &Base) -> ServiceAccount {
    ServiceAccount {
        metadata: base.meta(control_name(&base.bng), COMPONENT),
        // The dataplane pods talk to no API server; only the control pod mounts a token.
        automount_service_account_token: Some(true),
        ..ServiceAccount::default()
    }
}

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str], names: &[String]) -> PolicyRule {
    let strings = |xs: &[&str]| xs.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    PolicyRule {
        api_groups: Some(strings(groups)),
        resources: Some(strings(resources)),
        verbs: strings(verbs),
        resource_names: (!names.is_empty()).then(|| names.to_vec()),
        ..PolicyRule::default()
    }
}

/// Least privilege for the control pod: read its own configuration and its BNG, find its
/// dataplane pods, read the RADIUS secret it is given, and publish events. (The drain is
/// asked over the control's HTTP API, so it needs no write access to any pod.) Nothing cluster-wide, nothing it could use to change its workloads.
pub(crate) fn role(base: &Base, bng: &Bng) -> Role {
    let control = control_name(&base.bng);
    let mut rules = vec![
        rule(
            &[""],
            &["configmaps"],
            &["get", "list", "watch"],
            std::slice::from_ref(&control),
        ),
        rule(
            &["kbng.dev"],
            &["bngs"],
            &["get", "list", "watch"],
            std::slice::from_ref(&base.bng),
        ),
        // Pod IPs of the dataplanes; RBAC cannot restrict by label, so this is namespace-wide
        // read of pods (no secrets, no exec).
        rule(&[""], &["pods"], &["get", "list", "watch"], &[]),
        rule(&["events.k8s.io"], &["events"], &["create", "patch"], &[]),
    ];
    if let Some(radius) = &bng.spec.aaa.radius {
        rules.push(rule(
            &[""],
            &["secrets"],
            &["get", "watch", "list"],
            std::slice::from_ref(&radius.secret_ref.name),
        ));
    }
    Role {
        metadata: base.meta(control, COMPONENT),
        rules: Some(rules),
    }
}

pub(crate) fn role_binding(base: &Base) -> RoleBinding {
    let name = control_name(&base.bng);
    RoleBinding {
        metadata: base.meta(name.clone(), COMPONENT),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: name.clone(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name,
            namespace: Some(base.namespace.clone()),
            ..Subject::default()
        }]),
    }
}

/// The configuration file, the signed licence and its public key, as `kbng-control` reads
/// them.
pub(crate) fn config_map(base: &Base, inputs: &Inputs<'_>) -> Result<ConfigMap, BuildError> {
    let encode = |e: serde_json::Error| BuildError::Encode(e.to_string());
    let text = serde_json::to_string_pretty(&render(base, inputs)).map_err(encode)?;
    let mut data = BTreeMap::from([
        (control::CONFIG_KEY.to_string(), text),
        (
            control::PUBLIC_KEY_KEY.to_string(),
            inputs.config.licence_public_key.clone(),
        ),
    ]);
    if let Some(licence) = inputs.licence {
        data.insert(
            control::LICENCE_KEY.to_string(),
            serde_json::to_string_pretty(&signed_licence(licence)).map_err(encode)?,
        );
    }
    Ok(ConfigMap {
        metadata: base.meta(control_name(&base.bng), COMPONENT),
        data: Some(data),
        ..ConfigMap::default()
    })
}

/// The Licence as issued: name and spec (with its signature), none of the cluster's
/// bookkeeping, so the ConfigMap changes only when the grant does.
fn signed_licence(licence: &Licence) -> Licence {
    let mut out = Licence::new(&licence.name_any(), licence.spec.clone());
    out.metadata.namespace = licence.namespace();
    out
}

/// The hash [`CONFIG_HASH_ANNOTATION`] carries.
pub(crate) fn config_hash(cm: &ConfigMap) -> String {
    let text = cm
        .data
        .as_ref()
        .and_then(|d| d.get(control::CONFIG_KEY))
        .map_or("", String::as_str);
    fnv1a(text)
}

/// Headless: it gives the StatefulSet pod its stable DNS name and exposes the admin port, and
/// the dynamic-authorization port when the BNG has one.
pub(crate) fn service(base: &Base, radius: Option<&RadiusSpec>) -> Service {
    let das = das_port(radius).map(|port| ServicePort {
        name: Some(DAS_PORT_NAME.into()),
        port,
        protocol: Some("UDP".into()),
        ..ServicePort::default()
    });
    let admin = ServicePort {
        name: Some("admin".into()),
        port: control::ADMIN_PORT,
        protocol: Some("TCP".into()),
        ..ServicePort::default()
    };
    Service {
        metadata: base.meta(control_name(&base.bng), COMPONENT),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            selector: Some(base.selector(COMPONENT)),
            ports: Some(std::iter::once(admin).chain(das).collect()),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// The name of the control's UDP port for CoA and Disconnect requests.
pub const DAS_PORT_NAME: &str = "radius-das";

fn das_port(radius: Option<&RadiusSpec>) -> Option<i32> {
    radius
        .and_then(|r| r.dynamic_authorization.as_ref())
        .map(|d| i32::from(d.port))
}

/// The control container's ports: admin, metrics, and the dynamic-authorization port.
fn ports(radius: Option<&RadiusSpec>) -> Vec<ContainerPort> {
    let mut ports = container_ports("admin", control::ADMIN_PORT);
    ports.extend(das_port(radius).map(|port| ContainerPort {
        name: Some(DAS_PORT_NAME.into()),
        container_port: port,
        protocol: Some("UDP".into()),
        ..ContainerPort::default()
    }));
    ports
}

fn quantity(s: &str) -> Quantity {
    Quantity(s.to_string())
}

/// Resources of the control container; its memory from the sessions its BNG's tables hold.
/// The restore bench (1,000,000 sessions keyed by MAC) measured 688 resident bytes per session
/// at rest and 920 at the peak of a restart's restore when every row was decoded before the
/// engine took them; 727 since rows are restored in chunks. Under a fixed 1 GiB limit a
/// restart past about 1.1 million sessions would be OOM-killed, and would repeat, so the limit
/// allows the older peak with a quarter more (room for option-82 identities, whose strings the
/// bench's sessions lack), and the request the rest state; the floors keep small BNGs as they
/// were.
const MEMORY_BASE_MIB: u64 = 256;
const REQUEST_BYTES_PER_SESSION: u64 = 768;
const LIMIT_BYTES_PER_SESSION: u64 = 1152;
const REQUEST_FLOOR_MIB: u64 = 512;
const LIMIT_FLOOR_MIB: u64 = 1024;

fn resources(session_capacity: u64) -> ResourceRequirements {
    let mib = |per_session: u64, floor: u64| {
        let sessions = session_capacity
            .saturating_mul(per_session)
            .div_ceil(1 << 20);
        quantity(&format!(
            "{}Mi",
            MEMORY_BASE_MIB.saturating_add(sessions).max(floor)
        ))
    };
    ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".into(), quantity("500m")),
            (
                "memory".into(),
                mib(REQUEST_BYTES_PER_SESSION, REQUEST_FLOOR_MIB),
            ),
        ])),
        limits: Some(BTreeMap::from([(
            "memory".into(),
            mib(LIMIT_BYTES_PER_SESSION, LIMIT_FLOOR_MIB),
        )])),
        ..ResourceRequirements::default()
    }
}

/// Disk for the session store. The restore bench's store of 1,000,000 sessions took about
/// 570 MB (redb rows); redb commits copy-on-write, so a commit needs free pages beside the live
/// data. A claim of the operator's fixed size (1 GiB by default) would fill near 1.8 million
/// sessions and every commit after that would fail, so the claim allows 1 KiB per session and
/// 256 MiB, in whole GiB, and never less than the operator's configured size.
const STORE_BASE_BYTES: u64 = 256 << 20;
const STORE_BYTES_PER_SESSION: u64 = 1024;

/// The session-store claim size for `session_capacity` sessions, at least `floor`.
pub fn store_size(session_capacity: u64, floor: &str) -> String {
    let needed = session_capacity
        .saturating_mul(STORE_BYTES_PER_SESSION)
        .saturating_add(STORE_BASE_BYTES);
    match quantity::bytes(floor) {
        Some(f) if f >= needed => floor.to_string(),
        _ => quantity::gib_ceil(needed),
    }
}

/// A StatefulSet's volumeClaimTemplates cannot change once it exists (the API server refuses
/// the whole update), so a BNG whose capacity grew keeps the claim template it was created
/// with, and the claims themselves are expanded instead (`reconcile::bng`). Without this, a
/// capacity change would freeze every other change of the control StatefulSet too.
/// Only claims replace claims: a change between a claim and an emptyDir (the operator's
/// `--session-store`) is still applied as built, and refused by the API server as before.
pub fn keep_claim_templates(built: &mut StatefulSet, existing: Option<&StatefulSet>) {
    let old = existing
        .and_then(|s| s.spec.as_ref())
        .and_then(|s| s.volume_claim_templates.clone());
    let new = built
        .spec
        .as_mut()
        .and_then(|s| s.volume_claim_templates.as_mut());
    if let (Some(old), Some(new)) = (old, new) {
        *new = old;
    }
}

/// Mounts the ConfigMap of `aaa.subscribers`, when there is one, where the control's
/// configuration names its file. A ConfigMap that does not exist keeps the pod from starting
/// (the kubelet reports it in the pod's events), as a missing RADIUS Secret does.
pub(crate) fn mount_subscribers(sts: &mut StatefulSet, source: Option<&SubscribersSource>) {
    let Some(source) = source else { return };
    let Some(pod) = sts.spec.as_mut().and_then(|s| s.template.spec.as_mut()) else {
        return;
    };
    pod.volumes.get_or_insert_with(Vec::new).push(Volume {
        name: SUBSCRIBERS_VOLUME.into(),
        config_map: Some(ConfigMapVolumeSource {
            name: source.config_map.clone(),
            items: Some(vec![KeyToPath {
                key: source.key.clone(),
                path: source.key.clone(),
                ..KeyToPath::default()
            }]),
            ..ConfigMapVolumeSource::default()
        }),
        ..Volume::default()
    });
    for c in &mut pod.containers {
        c.volume_mounts
            .get_or_insert_with(Vec::new)
            .push(read_only_mount(
                SUBSCRIBERS_VOLUME,
                control::SUBSCRIBERS_DIR,
            ));
    }
}

pub(crate) fn stateful_set(
    base: &Base,
    config: &WorkloadConfig,
    config_hash: String,
    relay: bool,
    radius: Option<&RadiusSpec>,
    session_capacity: u64,
    grpc_tls: Option<Volume>,
) -> StatefulSet {
    let name = control_name(&base.bng);
    let mut volumes = vec![Volume {
        name: CONFIG_VOLUME.into(),
        config_map: Some(ConfigMapVolumeSource {
            name: name.clone(),
            ..ConfigMapVolumeSource::default()
        }),
        ..Volume::default()
    }];
    if let Some(r) = &radius {
        let item = KeyToPath {
            key: r.secret_ref.key.clone(),
            path: control::RADIUS_SECRET_FILE.into(),
            ..KeyToPath::default()
        };
        volumes.push(secret_volume(
            RADIUS_VOLUME,
            &r.secret_ref.name,
            Some(vec![item]),
        ));
    }
    let has_tls = grpc_tls.is_some();
    volumes.extend(grpc_tls);
    volumes.push(secret_volume(
        API_TOKEN_VOLUME,
        &control::api_token_secret(&base.bng),
        None,
    ));
    let claims = match &config.session_store {
        SessionStore::EmptyDir => {
            volumes.push(Volume {
                name: STORE_VOLUME.into(),
                empty_dir: Some(EmptyDirVolumeSource::default()),
                ..Volume::default()
            });
            None
        }
        SessionStore::Pvc {
            size,
            storage_class,
        } => Some(vec![PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some(STORE_VOLUME.into()),
                labels: Some(base.labels(COMPONENT)),
                ..ObjectMeta::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                storage_class_name: storage_class.clone(),
                resources: Some(VolumeResourceRequirements {
                    requests: Some(BTreeMap::from([(
                        "storage".into(),
                        quantity(&store_size(session_capacity, size)),
                    )])),
                    ..VolumeResourceRequirements::default()
                }),
                ..PersistentVolumeClaimSpec::default()
            }),
            ..PersistentVolumeClaim::default()
        }]),
    };
    let container = Container {
        name: control::CONTAINER.into(),
        image: Some(config.control_image.clone()),
        image_pull_policy: Some(config.image_pull_policy.clone()),
        command: Some(control::command()),
        args: Some(control::args()),
        env: Some(container_env(control::BINARY, config)),
        ports: Some(ports(radius)),
        // The API listener is up once the store is restored (a large store takes a while:
        // the startup probe allows five minutes); ready when the engine task answers a query;
        // alive while the listener accepts (a busy engine is not a reason to restart it).
        startup_probe: Some(probe(control::ADMIN_PORT, None, 5, 3, 60)),
        readiness_probe: Some(probe(
            control::ADMIN_PORT,
            Some(control::READY_PATH),
            5,
            3,
            3,
        )),
        liveness_probe: Some(probe(control::ADMIN_PORT, None, 10, 3, 6)),
        resources: Some(resources(session_capacity)),
        volume_mounts: Some(
            [
                VolumeMount {
                    name: CONFIG_VOLUME.into(),
                    mount_path: control::CONFIG_DIR.into(),
                    read_only: Some(true),
                    ..VolumeMount::default()
                },
                VolumeMount {
                    name: STORE_VOLUME.into(),
                    mount_path: control::STORE_DIR.into(),
                    ..VolumeMount::default()
                },
                read_only_mount(API_TOKEN_VOLUME, control::API_TOKEN_DIR),
            ]
            .into_iter()
            .chain(
                radius
                    .as_ref()
                    .map(|_| read_only_mount(RADIUS_VOLUME, control::RADIUS_SECRET_DIR)),
            )
            .chain(has_tls.then(grpc_tls_mount))
            .collect(),
        ),
        security_context: Some(SecurityContext {
            run_as_non_root: Some(true),
            ..container_security(&[])
        }),
        ..Container::default()
    };
    StatefulSet {
        metadata: base.meta(name.clone(), COMPONENT),
        spec: Some(StatefulSetSpec {
            replicas: Some(1),
            service_name: Some(name.clone()),
            selector: LabelSelector {
                match_labels: Some(base.selector(COMPONENT)),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(base.labels(COMPONENT)),
                    annotations: Some(BTreeMap::from([(
                        CONFIG_HASH_ANNOTATION.to_string(),
                        config_hash,
                    )])),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    service_account_name: Some(name),
                    containers: vec![container],
                    volumes: Some(volumes),
                    security_context: Some(PodSecurityContext {
                        // A DHCP relay agent listens on port 67 (RFC 2131 §4.1: servers answer
                        // relays there). Rather than a capability a non-root user could not
                        // use anyway, the pod's own network namespace lets ports from 67 up
                        // be bound unprivileged (a namespaced, safe sysctl).
                        sysctls: relay.then(|| {
                            vec![Sysctl {
                                name: "net.ipv4.ip_unprivileged_port_start".into(),
                                value: "67".into(),
                            }]
                        }),
                        run_as_non_root: Some(true),
                        run_as_user: Some(65532),
                        fs_group: Some(65532),
                        ..pod_security()
                    }),
                    ..PodSpec::default()
                }),
            },
            volume_claim_templates: claims,
            ..StatefulSetSpec::default()
        }),
        ..StatefulSet::default()
    }
}
