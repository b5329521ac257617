//! The two NetworkPolicies of a BNG: who may reach its pods on the cluster network.
//!
//! A dataplane installs whatever sessions its gRPC client asks for, and the control's admin
//! API drains and lists them: anyone else on the pod network who could reach those ports
//! could give a subscriber service without AAA, or end every session. So ingress is allowed
//! only where a peer needs it:
//!
//! - dataplane: gRPC from its own BNG's control pods; `/metrics` from anywhere;
//! - control: the admin API from pods labelled [`API_CLIENT_LABEL`] in any namespace (the
//!   chart labels the operator's pods so; give the label to a pod that runs `kbngctl`);
//!   `/metrics` from anywhere; CoA/Disconnect from the configured clients' addresses only;
//!   in relay mode, DHCP from the relay servers' addresses only.
//!
//! Egress is not restricted (the control calls the API server, RADIUS, DHCP servers and the
//! OTLP collector). The kubelet's probes come from the node, which NetworkPolicy always
//! admits. Subscriber traffic does not touch these rules: it arrives on the SR-IOV VFs of
//! the Multus networks, outside the cluster network a NetworkPolicy governs.

use k8s_openapi::api::networking::v1::{
    IPBlock, NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort,
    NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kbng_crds::Bng;
use kbng_crds::bng::DhcpMode;

use super::{Base, control, control_name, dataplane, dataplane_name};
use crate::binaries;

/// The label (value `"true"`) of the pods allowed to call a control's admin API.
pub const API_CLIENT_LABEL: &str = "kbng.dev/api-client";

/// The port the control takes relayed DHCP replies on (RFC 2131: the server port).
const DHCP_SERVER_PORT: i32 = 67;

fn port(number: i32, protocol: &str) -> NetworkPolicyPort {
    NetworkPolicyPort {
        port: Some(IntOrString::Int(number)),
        protocol: Some(protocol.into()),
        ..NetworkPolicyPort::default()
    }
}

fn from_addresses(addresses: &[&str]) -> Vec<NetworkPolicyPeer> {
    addresses
        .iter()
        .map(|a| NetworkPolicyPeer {
            ip_block: Some(IPBlock {
                cidr: format!("{a}/32"),
                except: None,
            }),
            ..NetworkPolicyPeer::default()
        })
        .collect()
}

fn pods(labels: std::collections::BTreeMap<String, String>) -> LabelSelector {
    LabelSelector {
        match_labels: Some(labels),
        ..LabelSelector::default()
    }
}

/// `/metrics`, from any source: Prometheus may run anywhere.
fn metrics_rule() -> NetworkPolicyIngressRule {
    NetworkPolicyIngressRule {
        from: None,
        ports: Some(vec![port(binaries::telemetry::METRICS_PORT, "TCP")]),
    }
}

fn policy(
    base: &Base,
    name: String,
    component: &str,
    ingress: Vec<NetworkPolicyIngressRule>,
) -> NetworkPolicy {
    NetworkPolicy {
        metadata: base.meta(name, component),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(pods(base.selector(component))),
            policy_types: Some(vec!["Ingress".into()]),
            ingress: Some(ingress),
            ..NetworkPolicySpec::default()
        }),
    }
}

/// The dataplane pods' policy: gRPC from this BNG's control pods only.
pub(crate) fn dataplane(base: &Base) -> NetworkPolicy {
    let grpc = NetworkPolicyIngressRule {
        from: Some(vec![NetworkPolicyPeer {
            pod_selector: Some(pods(base.selector(control::COMPONENT))),
            ..NetworkPolicyPeer::default()
        }]),
        ports: Some(vec![port(binaries::dataplane::GRPC_PORT, "TCP")]),
    };
    policy(
        base,
        dataplane_name(&base.bng),
        dataplane::COMPONENT,
        vec![grpc, metrics_rule()],
    )
}

/// The control pods' policy: the admin API from labelled clients, CoA and relayed DHCP from
/// their configured peers only.
pub(crate) fn control(base: &Base, bng: &Bng) -> NetworkPolicy {
    let api_clients = NetworkPolicyPeer {
        namespace_selector: Some(LabelSelector::default()),
        pod_selector: Some(pods(
            [(API_CLIENT_LABEL.to_string(), "true".to_string())].into(),
        )),
        ..NetworkPolicyPeer::default()
    };
    let mut ingress = vec![
        NetworkPolicyIngressRule {
            from: Some(vec![api_clients]),
            ports: Some(vec![port(binaries::control::ADMIN_PORT, "TCP")]),
        },
        metrics_rule(),
    ];
    let das = bng
        .spec
        .aaa
        .radius
        .as_ref()
        .and_then(|r| r.dynamic_authorization.as_ref());
    if let Some(d) = das {
        let clients: Vec<&str> = d.clients.iter().map(|c| c.address.as_str()).collect();
        ingress.push(NetworkPolicyIngressRule {
            from: Some(from_addresses(&clients)),
            ports: Some(vec![port(i32::from(d.port), "UDP")]),
        });
    }
    if bng.spec.dhcp.mode == DhcpMode::Relay {
        let servers: Vec<&str> = bng
            .spec
            .dhcp
            .relay_servers
            .iter()
            .map(String::as_str)
            .collect();
        ingress.push(NetworkPolicyIngressRule {
            from: Some(from_addresses(&servers)),
            ports: Some(vec![port(DHCP_SERVER_PORT, "UDP")]),
        });
    }
    policy(base, control_name(&base.bng), control::COMPONENT, ingress)
}
