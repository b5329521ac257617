//! The dataplane workload: `kbng-dataplane` pods that poll SR-IOV VFs with DPDK.
//!
//! What makes a DPDK pod behave on Kubernetes, and where each piece is set:
//! - Guaranteed QoS with integer CPUs (requests == limits for every resource): only then does
//!   the kubelet's static CPU manager give the container exclusive cores.
//! - `hugepages-<size>` requests and a `medium: HugePages` emptyDir at the EAL's `--huge-dir`.
//! - One VF each from the access and uplink SR-IOV device-plugin pools, attached by Multus
//!   (`k8s.v1.cni.cncf.io/networks`) in the order access, uplink.
//! - The kubelet's topology manager (`single-numa-node`) aligns cores, hugepages and VFs on
//!   one NUMA node at admission; the dataplane learns which cores it got from its affinity
//!   mask (`--cores auto:N`) and its VFs from the device plugin's `PCIDEVICE_*` variables.
//! - A StatefulSet rather than a Deployment: each dataplane gets a stable DNS name through the
//!   headless Service, which the control pod's configuration lists (it dials every dataplane;
//!   pod IPs change with every restart, names do not).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec};
use k8s_openapi::api::core::v1::{
    Affinity, Container, EmptyDirVolumeSource, PodAffinityTerm, PodAntiAffinity, PodSpec,
    PodTemplateSpec, Probe, ResourceRequirements, SecurityContext, Service, ServicePort,
    ServiceSpec, Volume, VolumeMount, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kbng_crds::Bng;
use kbng_crds::bng::{DataplaneSpec, HugepageSize};

use super::{
    Base, container_env, container_ports, container_security, dataplane_name, grpc_tls_mount,
    grpc_tls_volume, pod_security, probe,
};
use crate::binaries::dataplane;
use crate::config::WorkloadConfig;

pub const COMPONENT: &str = "dataplane";
pub const MULTUS_ANNOTATION: &str = "k8s.v1.cni.cncf.io/networks";
/// Interface names inside the pod for the two VFs.
pub const ACCESS_INTERFACE: &str = "access0";
pub const UPLINK_INTERFACE: &str = "uplink0";

/// Linux capabilities of the dataplane container; everything else is dropped.
pub const CAPABILITIES: [&str; 3] = [
    // IPC_LOCK: DPDK locks its hugepage memory (mlock) so the pages backing DMA buffers can
    // never be swapped or moved while the NIC writes into them; vfio's DMA mapping of user
    // memory also counts against RLIMIT_MEMLOCK, which IPC_LOCK lifts.
    "IPC_LOCK",
    // NET_RAW: the punt/inject path for control packets (DHCP, ARP) towards the control pod
    // and the kernel-side test PMDs use AF_PACKET raw sockets.
    "NET_RAW",
    // SYS_NICE: the EAL pins lcore threads (sched_setaffinity on its own threads is free,
    // but set_mempolicy/mbind for NUMA-local hugepage allocation and raising the polling
    // threads' scheduling priority need it).
    "SYS_NICE",
];

/// The CPUs a dataplane pod asks for: one per worker lcore plus the main lcore. Whole CPUs,
/// so that the static CPU manager grants them exclusively.
pub fn cpus(spec: &DataplaneSpec) -> u32 {
    spec.worker_cores + 1
}

/// The hugepage resource name and the quantity a pod asks for.
pub fn hugepages(spec: &DataplaneSpec) -> (String, Quantity) {
    let count = u64::from(spec.hugepages.count);
    let amount = match spec.hugepages.size {
        HugepageSize::OneGi => format!("{count}Gi"),
        HugepageSize::TwoMi => format!("{}Mi", count * 2),
    };
    (
        format!("hugepages-{}", spec.hugepages.size.as_str()),
        Quantity(amount),
    )
}

/// Requests, equal to limits, of one dataplane container.
pub fn resources(spec: &DataplaneSpec) -> BTreeMap<String, Quantity> {
    let (huge_name, huge_amount) = hugepages(spec);
    let mut out = BTreeMap::from([
        ("cpu".to_string(), Quantity(cpus(spec).to_string())),
        (
            "memory".to_string(),
            Quantity(format!("{}Mi", spec.memory_mib)),
        ),
        (huge_name, huge_amount),
    ]);
    // Access and uplink VFs may come from one pool; then the pod asks for two of it.
    let mut vfs: BTreeMap<&str, u32> = BTreeMap::new();
    *vfs.entry(spec.sriov.access_resource.as_str()).or_default() += 1;
    *vfs.entry(spec.sriov.uplink_resource.as_str()).or_default() += 1;
    for (name, n) in vfs {
        out.insert(name.to_string(), Quantity(n.to_string()));
    }
    out
}

/// The Multus network selection: access first, then uplink, with fixed interface names.
pub fn networks_annotation(spec: &DataplaneSpec) -> String {
    serde_json::json!([
        {"name": spec.networks.access, "interface": ACCESS_INTERFACE},
        {"name": spec.networks.uplink, "interface": UPLINK_INTERFACE},
    ])
    .to_string()
}

/// The dataplane serves only gRPC (no health service), so its probes are TCP connects to the
/// gRPC port, which it binds only after EAL, mempool and both ports have started.
fn grpc_probe(period_secs: i32, failures: i32) -> Probe {
    probe(dataplane::GRPC_PORT, None, period_secs, 2, failures)
}

/// Headless: one DNS name per dataplane pod (`<pod>.<bng>-dataplane.<ns>.svc`).
pub(crate) fn service(base: &Base) -> Service {
    Service {
        metadata: base.meta(dataplane_name(&base.bng), COMPONENT),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            selector: Some(base.selector(COMPONENT)),
            // The control dials a dataplane while it starts, before it is ready.
            publish_not_ready_addresses: Some(true),
            ports: Some(vec![ServicePort {
                name: Some("grpc".into()),
                port: dataplane::GRPC_PORT,
                protocol: Some("TCP".into()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

pub(crate) fn stateful_set(base: &Base, bng: &Bng, config: &WorkloadConfig) -> StatefulSet {
    let spec = &bng.spec.dataplane;
    let resources = resources(spec);
    let image = spec
        .image
        .clone()
        .unwrap_or_else(|| config.dataplane_image.clone());
    let container = Container {
        name: dataplane::CONTAINER.into(),
        image: Some(image),
        image_pull_policy: Some(config.image_pull_policy.clone()),
        command: Some(dataplane::command()),
        args: Some(dataplane::args(
            spec,
            &bng.spec.uplink.address,
            &bng.spec.uplink.gateway,
        )),
        env: Some(container_env(dataplane::BINARY, config)),
        ports: Some(container_ports("grpc", dataplane::GRPC_PORT)),
        // EAL start-up with hugepages takes seconds; allow two minutes.
        startup_probe: Some(grpc_probe(5, 24)),
        readiness_probe: Some(grpc_probe(5, 2)),
        liveness_probe: Some(grpc_probe(10, 3)),
        resources: Some(ResourceRequirements {
            requests: Some(resources.clone()),
            limits: Some(resources),
            ..ResourceRequirements::default()
        }),
        volume_mounts: Some(
            vec![
                VolumeMount {
                    name: "hugepages".into(),
                    mount_path: dataplane::HUGEPAGES_DIR.into(),
                    ..VolumeMount::default()
                },
                VolumeMount {
                    name: "dpdk-runtime".into(),
                    mount_path: dataplane::RUNTIME_DIR.into(),
                    ..VolumeMount::default()
                },
            ]
            .into_iter()
            .chain(spec.grpc_tls.as_ref().map(|_| grpc_tls_mount()))
            .collect(),
        ),
        security_context: Some(SecurityContext {
            // Not privileged: the VFs arrive through the device plugin (vfio devices mounted
            // into the container), so no host device access is needed beyond them.
            privileged: Some(false),
            // Root inside the container, because Kubernetes grants added capabilities only
            // to uid 0 (it sets no ambient capabilities); the bounding set is CAPABILITIES.
            run_as_user: Some(0),
            ..container_security(&CAPABILITIES)
        }),
        ..Container::default()
    };
    let selector = base.selector(COMPONENT);
    let name = dataplane_name(&base.bng);
    StatefulSet {
        metadata: base.meta(name.clone(), COMPONENT),
        spec: Some(StatefulSetSpec {
            replicas: Some(i32::try_from(spec.replicas).unwrap_or(i32::MAX)),
            service_name: Some(name),
            // Dataplanes are independent: start and replace them in parallel. A rolling
            // update replaces one pod at a time and never surges, so it never needs a second
            // set of VFs and hugepages on the node.
            pod_management_policy: Some("Parallel".into()),
            selector: LabelSelector {
                match_labels: Some(selector.clone()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(base.labels(COMPONENT)),
                    annotations: Some(BTreeMap::from([(
                        MULTUS_ANNOTATION.to_string(),
                        networks_annotation(spec),
                    )])),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    // The dataplane never talks to the API server.
                    automount_service_account_token: Some(false),
                    containers: vec![container],
                    node_selector: (!spec.node_selector.is_empty())
                        .then(|| spec.node_selector.clone()),
                    affinity: Some(spread(selector)),
                    volumes: Some(
                        vec![
                            Volume {
                                name: "hugepages".into(),
                                empty_dir: Some(EmptyDirVolumeSource {
                                    medium: Some("HugePages".into()),
                                    ..EmptyDirVolumeSource::default()
                                }),
                                ..Volume::default()
                            },
                            Volume {
                                name: "dpdk-runtime".into(),
                                empty_dir: Some(EmptyDirVolumeSource {
                                    medium: Some("Memory".into()),
                                    size_limit: Some(Quantity("64Mi".into())),
                                }),
                                ..Volume::default()
                            },
                        ]
                        .into_iter()
                        .chain(grpc_tls_volume(bng))
                        .collect(),
                    ),
                    security_context: Some(pod_security()),
                    ..PodSpec::default()
                }),
            },
            ..StatefulSetSpec::default()
        }),
        ..StatefulSet::default()
    }
}

/// Prefer one dataplane of a BNG per node: losing a node then loses one dataplane, not all.
fn spread(selector: BTreeMap<String, String>) -> Affinity {
    Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                WeightedPodAffinityTerm {
                    weight: 100,
                    pod_affinity_term: PodAffinityTerm {
                        label_selector: Some(LabelSelector {
                            match_labels: Some(selector),
                            ..LabelSelector::default()
                        }),
                        topology_key: "kubernetes.io/hostname".into(),
                        ..PodAffinityTerm::default()
                    },
                },
            ]),
            ..PodAntiAffinity::default()
        }),
        ..Affinity::default()
    }
}
