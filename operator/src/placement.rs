//! Can a dataplane pod fit anywhere, and where did its pods go.
//!
//! The scheduler decides placement; this only answers two questions the BNG's status needs:
//! before placing, "does any node matching the selector have enough allocatable CPU, hugepages
//! and VFs at all?" (if not, the BNG is Stalled with a reason instead of waiting forever), and
//! after, "which node is each pod on, or what did the scheduler say?".

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kbng_crds::bng::{DataplaneSpec, DataplaneStatus};

use crate::build::dataplane;

/// A quantity in thousandths of its unit (millicores for CPU, milli-bytes for memory), so
/// CPU and byte quantities compare exactly in integers. `None` for what we cannot parse.
pub fn milli(q: &Quantity) -> Option<u128> {
    let s = q.0.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(split);
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let int: u128 = if int.is_empty() { 0 } else { int.parse().ok()? };
    // Three fractional digits are all a millis representation can hold.
    let mut frac_milli: u128 = 0;
    for (i, d) in frac.chars().take(3).enumerate() {
        frac_milli += u128::from(d.to_digit(10)?) * 10u128.pow(2 - i as u32);
    }
    let base = int * 1000 + frac_milli;
    let factor: u128 = match suffix {
        "" => 1,
        "m" => return Some(base / 1000),
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        _ => return None,
    };
    Some(base * factor)
}

fn selector_matches(node: &Node, selector: &BTreeMap<String, String>) -> bool {
    let labels = node.metadata.labels.clone().unwrap_or_default();
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// Why no node can ever hold a dataplane pod, or `None` when at least one could (ignoring
/// what other pods already use: that is the scheduler's business and shows as Pending).
pub fn unsatisfiable(spec: &DataplaneSpec, nodes: &[Node]) -> Option<String> {
    let wanted = dataplane::resources(spec);
    let candidates: Vec<&Node> = nodes
        .iter()
        .filter(|n| selector_matches(n, &spec.node_selector))
        .collect();
    if candidates.is_empty() {
        return Some(format!(
            "no node matches nodeSelector {:?} (of {} nodes)",
            spec.node_selector,
            nodes.len()
        ));
    }
    let mut best_cpu: u128 = 0;
    for node in &candidates {
        let alloc = node
            .status
            .as_ref()
            .and_then(|s| s.allocatable.clone())
            .unwrap_or_default();
        best_cpu = best_cpu.max(alloc.get("cpu").and_then(milli).unwrap_or(0));
        let fits = wanted.iter().all(|(name, want)| {
            match (alloc.get(name).and_then(milli), milli(want)) {
                (Some(have), Some(want)) => have >= want,
                _ => false,
            }
        });
        if fits {
            return None;
        }
    }
    let cpus = dataplane::cpus(spec);
    if u128::from(cpus) * 1000 > best_cpu {
        return Some(format!(
            "{cpus} CPUs requested ({} worker cores + 1 main) but the largest matching node has {} allocatable",
            spec.worker_cores,
            best_cpu as f64 / 1000.0
        ));
    }
    let list = wanted
        .iter()
        .map(|(k, v)| format!("{k}={}", v.0))
        .collect::<Vec<_>>()
        .join(", ");
    Some(format!(
        "none of the {} matching nodes has allocatable {list}",
        candidates.len()
    ))
}

/// What the cluster says about one dataplane pod. NUMA node, cores and PCI addresses are what
/// the dataplane reports about itself; until its report arrives they stay empty and
/// `connected` stays false, rather than echo what was requested.
pub fn dataplane_status(pod: &Pod) -> DataplaneStatus {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let node = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .filter(|n| !n.is_empty());
    let status = pod.status.as_ref();
    let phase = status
        .and_then(|s| s.phase.clone())
        .unwrap_or_else(|| "Unknown".into());
    let scheduled = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"));
    let placement = match (&node, scheduled) {
        (Some(node), _) => format!("scheduled on {node} ({phase})"),
        (None, Some(c)) if c.status == "False" => format!(
            "{}: {}",
            c.reason.clone().unwrap_or_else(|| "Unschedulable".into()),
            c.message.clone().unwrap_or_default()
        ),
        (None, _) => "waiting for the scheduler".into(),
    };
    DataplaneStatus {
        pod: name,
        node,
        placement,
        numa_node: None,
        cores: Vec::new(),
        pci_addresses: Vec::new(),
        connected: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::tests::sample_bng;
    use k8s_openapi::api::core::v1::{NodeStatus, PodCondition, PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn q(s: &str) -> Quantity {
        Quantity(s.into())
    }

    fn node(name: &str, labels: &[(&str, &str)], alloc: &[(&str, &str)]) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            status: Some(NodeStatus {
                allocatable: Some(alloc.iter().map(|(k, v)| (k.to_string(), q(v))).collect()),
                ..NodeStatus::default()
            }),
            ..Node::default()
        }
    }

    const SRIOV: (&str, &str) = ("feature.node.kubernetes.io/network-sriov.capable", "true");

    fn telco(cpu: &str) -> Node {
        node(
            "sriov",
            &[SRIOV],
            &[
                ("cpu", cpu),
                ("memory", "171Gi"),
                ("hugepages-1Gi", "16Gi"),
                ("intel.com/sriov_access", "8"),
                ("intel.com/sriov_uplink", "4"),
            ],
        )
    }

    #[test]
    fn quantities() {
        assert_eq!(milli(&q("3")), Some(3000));
        assert_eq!(milli(&q("2500m")), Some(2500));
        assert_eq!(milli(&q("1.5")), Some(1500));
        assert_eq!(milli(&q("2Gi")), Some(2000 * (1 << 30)));
        assert_eq!(milli(&q("1024Mi")), milli(&q("1Gi")));
        assert_eq!(milli(&q("1k")), Some(1_000_000));
        assert_eq!(milli(&q("x")), None);
        assert_eq!(milli(&q("1Qi")), None);
    }

    #[test]
    fn fits_on_a_telco_node_only() {
        let spec = sample_bng().spec.dataplane;
        let plain = node("plain", &[], &[("cpu", "15"), ("memory", "60Gi")]);
        assert_eq!(unsatisfiable(&spec, &[plain.clone(), telco("30")]), None);
        let why = unsatisfiable(&spec, &[plain]).unwrap();
        assert!(why.contains("no node matches nodeSelector"), "{why}");
    }

    #[test]
    fn more_cores_than_any_node_has() {
        let mut spec = sample_bng().spec.dataplane;
        spec.worker_cores = 40;
        let why = unsatisfiable(&spec, &[telco("30")]).unwrap();
        assert!(why.contains("41 CPUs requested"), "{why}");
        assert!(why.contains("has 30 allocatable"), "{why}");
    }

    #[test]
    fn missing_vf_pool_is_named() {
        let mut spec = sample_bng().spec.dataplane;
        spec.sriov.uplink_resource = "example.com/other".into();
        let why = unsatisfiable(&spec, &[telco("30")]).unwrap();
        assert!(why.contains("example.com/other=1"), "{why}");
    }

    #[test]
    fn pending_pod_shows_the_schedulers_message() {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("lab-dataplane-x".into()),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec::default()),
            status: Some(PodStatus {
                phase: Some("Pending".into()),
                conditions: Some(vec![PodCondition {
                    type_: "PodScheduled".into(),
                    status: "False".into(),
                    reason: Some("Unschedulable".into()),
                    message: Some("0/3 nodes are available: 3 Insufficient hugepages-1Gi.".into()),
                    ..PodCondition::default()
                }]),
                ..PodStatus::default()
            }),
        };
        let s = dataplane_status(&pod);
        assert_eq!(s.node, None);
        assert_eq!(
            s.placement,
            "Unschedulable: 0/3 nodes are available: 3 Insufficient hugepages-1Gi."
        );
        assert!(!s.connected && s.cores.is_empty() && s.pci_addresses.is_empty());
        let mut bound = pod.clone();
        bound.spec.as_mut().unwrap().node_name = Some("kbng-sriov-a".into());
        bound.status.as_mut().unwrap().phase = Some("Running".into());
        let s = dataplane_status(&bound);
        assert_eq!(s.node.as_deref(), Some("kbng-sriov-a"));
        assert_eq!(s.placement, "scheduled on kbng-sriov-a (Running)");
    }
}
