//! The `BNG` resource: one broadband network gateway, its dataplanes and its subscribers' world.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{LocalRef, SecretKeyRef, VlanRange};
use crate::licence::LicenceSource;

/// Dotted-quad IPv4 address. Fields using it also carry `maxLength: 15`, and prefixes
/// `maxLength: 18`: without a bound the API server estimates the cost of the `cidr()` CEL rules
/// as unbounded and refuses the CRD.
const IPV4_PATTERN: &str = r"^((25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])$";
/// Dotted-quad IPv4 prefix with a length.
const CIDR_PATTERN: &str = r"^((25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])/([0-9]|[12][0-9]|3[0-2])$";
/// A Kubernetes resource name such as `intel.com/sriov_access`.
const RESOURCE_PATTERN: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$";

/// A broadband network gateway.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[kube(
    group = "kbng.dev",
    version = "v1alpha1",
    kind = "BNG",
    root = "Bng",
    plural = "bngs",
    namespaced,
    status = "BngStatus",
    shortname = "bng",
    category = "kbng",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Active","type":"integer","jsonPath":".status.sessions.active"}"#,
    printcolumn = r#"{"name":"Captive","type":"integer","jsonPath":".status.sessions.captive"}"#,
    printcolumn = r#"{"name":"Cap","type":"integer","jsonPath":".status.sessions.cap"}"#,
    printcolumn = r#"{"name":"Licence","type":"string","jsonPath":".status.licenceSource","priority":1}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BngSpec {
    pub dataplane: DataplaneSpec,
    pub access: AccessSpec,
    pub uplink: UplinkSpec,
    #[schemars(length(min = 1, max = 64))]
    pub pools: Vec<PoolSpec>,
    pub dhcp: DhcpSpec,
    pub aaa: AaaSpec,
    pub walled_garden: WalledGardenSpec,
    /// The Licence granting the session cap; without one the free baseline applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub licence_ref: Option<LocalRef>,
    /// The SubscriberPlans this BNG may assign.
    #[schemars(length(min = 1, max = 256))]
    pub plans: Vec<LocalRef>,
}

// ---------------------------------------------------------------- dataplane placement

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum NumaPolicy {
    /// Cores, hugepages and VFs on one NUMA node (kubelet topology policy single-numa-node).
    SingleNumaNode,
    /// NUMA locality preferred, not required.
    BestEffort,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum HugepageSize {
    #[serde(rename = "2Mi")]
    TwoMi,
    #[serde(rename = "1Gi")]
    OneGi,
}

impl HugepageSize {
    pub fn as_str(self) -> &'static str {
        match self {
            HugepageSize::TwoMi => "2Mi",
            HugepageSize::OneGi => "1Gi",
        }
    }

    pub fn bytes(self) -> u64 {
        match self {
            HugepageSize::TwoMi => 2 << 20,
            HugepageSize::OneGi => 1 << 30,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HugepagesSpec {
    pub size: HugepageSize,
    #[schemars(range(min = 1, max = 1024))]
    pub count: u32,
}

/// SR-IOV device-plugin resource names of the VFs a dataplane pod requests.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SriovSpec {
    #[schemars(regex(pattern = RESOURCE_PATTERN), length(max = 253))]
    pub access_resource: String,
    #[schemars(regex(pattern = RESOURCE_PATTERN), length(max = 253))]
    pub uplink_resource: String,
}

/// Multus NetworkAttachmentDefinition names, attached in this order: access, uplink.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NetworksSpec {
    #[schemars(length(min = 1, max = 253))]
    pub access: String,
    #[schemars(length(min = 1, max = 253))]
    pub uplink: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[x_kube(validation = Rule::new("self.rxDescriptors % 32 == 0 && self.txDescriptors % 32 == 0").message("descriptor counts must be multiples of 32"))]
pub struct QueuesSpec {
    #[schemars(range(min = 64, max = 8192))]
    pub rx_descriptors: u16,
    #[schemars(range(min = 64, max = 8192))]
    pub tx_descriptors: u16,
}

impl Default for QueuesSpec {
    fn default() -> Self {
        QueuesSpec {
            rx_descriptors: 1024,
            tx_descriptors: 1024,
        }
    }
}

/// Where and how the DPDK dataplane pods run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[x_kube(validation = Rule::new("self.memoryMib * 1048576 >= 134217728 + self.sessionCapacity * (300 + 352 * self.workerCores)").message("memoryMib is too small for sessionCapacity and workerCores: it must be at least 128 + sessionCapacity * (300 + 352 * workerCores) / 1048576 MiB, since every worker sizes its session tables at start"))]
pub struct DataplaneSpec {
    #[schemars(range(min = 1, max = 64))]
    pub replicas: u32,
    /// Polling worker cores per pod; one more core is requested for the main lcore.
    #[schemars(range(min = 1, max = 128))]
    pub worker_cores: u32,
    pub numa_policy: NumaPolicy,
    /// The NUMA node the VFs sit on, when the nodes' labels do not tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 63))]
    pub numa_node: Option<u32>,
    pub hugepages: HugepagesSpec,
    /// Ordinary memory per pod besides hugepages. The session tables live here, sized at
    /// start, so it must be at least 128 MiB + `sessionCapacity` × (300 + 352 × `workerCores`)
    /// bytes ([`DataplaneSpec::memory_floor_mib`]; the schema refuses less): each worker
    /// allocates 256-288 bytes per session slot, and the control thread's copy of the
    /// installed sessions takes about 265 bytes each (cnf-control's program_rate bench).
    #[schemars(range(min = 256, max = 1_048_576))]
    pub memory_mib: u32,
    pub sriov: SriovSpec,
    pub networks: NetworksSpec,
    #[serde(default)]
    pub queues: QueuesSpec,
    /// Sessions the tables are sized for at start-up. The control pod's memory request and
    /// limit grow with it (about 1 KiB per session at the peak of a restart's restore). New
    /// subscribers beyond it are turned away (counted as `dataplane full`) even when the
    /// pools have addresses left.
    #[schemars(range(min = 1, max = 16_000_000))]
    pub session_capacity: u64,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Overrides the chart's dataplane image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Mutual TLS between the control and the dataplanes. Absent: plaintext gRPC, guarded
    /// only by the BNG's NetworkPolicy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc_tls: Option<GrpcTlsSpec>,
}

/// A Secret in the BNG's namespace holding `tls.crt`, `tls.key` and `ca.crt` (what
/// cert-manager writes): one certificate that both ends present, valid for server and client
/// authentication, with the DNS name `*.<bng>-dataplane.<namespace>.svc`; `ca.crt` signs it.
/// A renewal needs no restart: the dataplane reads the files again for new connections (every
/// few seconds at most), the control at each connection it opens; open ones carry on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrpcTlsSpec {
    #[schemars(length(min = 1, max = 253))]
    pub secret_name: String,
}

impl DataplaneSpec {
    /// Ordinary memory (MiB) a dataplane pod needs for its session tables and the rest of the
    /// process: the same formula as the schema's rule on this type (a test holds them equal).
    pub fn memory_floor_mib(&self) -> u64 {
        let bytes = MEMORY_BASE_BYTES
            + self.session_capacity
                * (MEMORY_SHADOW_BYTES + MEMORY_WORKER_BYTES * u64::from(self.worker_cores));
        bytes.div_ceil(1 << 20)
    }
}

/// The process without sessions: binary, runtime, gRPC, DPDK's own non-hugepage memory, with room.
const MEMORY_BASE_BYTES: u64 = 128 << 20;
/// Per session on the control thread (its copy of every installed session; ~265 measured).
const MEMORY_SHADOW_BYTES: u64 = 300;
/// Per session slot per worker: two 64-byte lines, 96 of cold counters, both indexes at up
/// to 64 (power-of-two rounding), and what an install leaves behind (~52 measured).
const MEMORY_WORKER_BYTES: u64 = 352;

#[cfg(test)]
mod memory_tests {
    use super::*;
    use kube::CustomResourceExt;

    fn spec(capacity: u64, workers: u32) -> DataplaneSpec {
        serde_json::from_value(serde_json::json!({
            "replicas": 1, "workerCores": workers, "numaPolicy": "single-numa-node",
            "hugepages": {"size": "1Gi", "count": 1}, "memoryMib": 256,
            "sriov": {"accessResource": "a/b", "uplinkResource": "a/c"},
            "networks": {"access": "a", "uplink": "u"}, "sessionCapacity": capacity,
        }))
        .expect("a valid dataplane spec")
    }

    #[test]
    fn the_floor_grows_with_capacity_and_workers() {
        assert_eq!(spec(100_000, 2).memory_floor_mib(), 224);
        assert_eq!(spec(1_000_000, 2).memory_floor_mib(), 1086);
        assert_eq!(spec(1_000_000, 4).memory_floor_mib(), 1757);
        assert_eq!(spec(16_000_000, 1).memory_floor_mib(), 10077);
    }

    #[test]
    fn the_schema_rule_uses_the_same_constants() {
        let crd = serde_json::to_string(&Bng::crd()).expect("crd serializes");
        let rule = format!(
            "self.memoryMib * 1048576 >= {MEMORY_BASE_BYTES} + self.sessionCapacity * \
             ({MEMORY_SHADOW_BYTES} + {MEMORY_WORKER_BYTES} * self.workerCores)"
        );
        assert!(crd.contains(&rule), "the CRD lacks the rule {rule}");
    }
}

// ---------------------------------------------------------------- access and uplink

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum VlanMode {
    Untagged,
    /// One 802.1Q tag per subscriber or service.
    Dot1q,
    /// Two tags: outer S-tag (0x88a8 or 0x8100), inner C-tag.
    Qinq,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[x_kube(validation = Rule::new("self.vlanMode == 'untagged' ? size(self.outerVlans) == 0 : size(self.outerVlans) > 0").message("outerVlans are required with dot1q and qinq, and not allowed untagged"))]
#[x_kube(validation = Rule::new("self.vlanMode == 'qinq' ? size(self.innerVlans) > 0 : size(self.innerVlans) == 0").message("innerVlans are required with qinq and allowed only there"))]
pub struct AccessSpec {
    pub vlan_mode: VlanMode,
    #[serde(default)]
    #[schemars(length(max = 64))]
    pub outer_vlans: Vec<VlanRange>,
    #[serde(default)]
    #[schemars(length(max = 64))]
    pub inner_vlans: Vec<VlanRange>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[x_kube(validation = Rule::new("cidr(self.address).containsIP(self.gateway)").message("gateway must be inside the uplink address's prefix"))]
pub struct UplinkSpec {
    /// The dataplane's uplink address with its prefix, e.g. `192.0.2.2/30`.
    #[schemars(regex(pattern = CIDR_PATTERN), length(max = 18))]
    pub address: String,
    #[schemars(regex(pattern = IPV4_PATTERN), length(max = 15))]
    pub gateway: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 4094))]
    pub vlan: Option<u16>,
}

// ---------------------------------------------------------------- pools and DHCP

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[x_kube(validation = Rule::new("cidr(self.cidr) == cidr(self.cidr).masked()").message("cidr must not have host bits set"))]
#[x_kube(validation = Rule::new("cidr(self.cidr).containsIP(self.gateway)").message("gateway must be inside cidr"))]
#[x_kube(validation = Rule::new("self.exclusions.all(e, cidr(self.cidr).containsCIDR(e))").message("every exclusion must be inside cidr"))]
pub struct PoolSpec {
    #[schemars(regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"), length(max = 63))]
    pub name: String,
    #[schemars(regex(pattern = CIDR_PATTERN), length(max = 18))]
    pub cidr: String,
    #[schemars(regex(pattern = IPV4_PATTERN), length(max = 15))]
    pub gateway: String,
    #[schemars(range(min = 60, max = 31_536_000))]
    pub lease_secs: u32,
    /// Prefixes never leased (a single address is a /32). A RADIUS Framed-IP-Address or a
    /// subscriber record's ipv4 may still give one of their addresses to its subscriber: keep
    /// fixed addresses here.
    #[serde(default)]
    #[schemars(length(max = 256), inner(regex(pattern = CIDR_PATTERN), length(max = 18)))]
    pub exclusions: Vec<String>,
    #[serde(default)]
    #[schemars(length(max = 4), inner(regex(pattern = IPV4_PATTERN), length(max = 15)))]
    pub dns: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum DhcpMode {
    /// kbng leases addresses from its pools.
    Server,
    /// kbng relays to external DHCP servers (giaddr set) and builds sessions from their ACKs.
    Relay,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[x_kube(validation = Rule::new("self.mode == 'relay' ? size(self.relayServers) > 0 : size(self.relayServers) == 0").message("relayServers are required in relay mode and allowed only there"))]
pub struct DhcpSpec {
    pub mode: DhcpMode,
    #[serde(default)]
    #[schemars(length(max = 8), inner(regex(pattern = IPV4_PATTERN), length(max = 15)))]
    pub relay_servers: Vec<String>,
    /// Use option 82 (circuit-id, remote-id) as the subscriber's identity (RFC 3046).
    #[serde(default)]
    pub option82_identity: bool,
    /// Use the access line as the identity of a subscriber whose option 82 is not (off, or
    /// absent from its messages): 1:1 VLAN access, one subscriber per line. Its circuit-id is
    /// `dataplane/port/outer-vlan/inner-vlan` (`0/0/100/200`; 0 for a VLAN tag not there), and
    /// local records keyed by that circuit-id (and RADIUS, which is sent it) name it.
    /// `dataplane` is the dataplane pod's ordinal (its StatefulSet index), so a line keeps its
    /// name when replicas are added; fewer replicas leave the lines of the ones removed.
    #[serde(default)]
    pub line_identity: bool,
    /// In-rush pacing of new subscribers (after a power restore, thousands of CPEs ask at
    /// once). Absent: the control's defaults, 2,000 a second with a burst of 200 and a queue
    /// of 20,000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacing: Option<PacingSpec>,
    /// Sessions one access line (dataplane port, outer and inner VLAN) may hold; a DISCOVER
    /// for a new subscriber beyond it is dropped and counted (`line session limit`), so that
    /// random MACs on one line cannot drain a pool. Absent: the control's 64, right for 1:1
    /// VLANs (a QinQ pair per subscriber); a VLAN or untagged port shared by many subscribers
    /// (N:1) needs at least their number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 16_000_000))]
    pub max_sessions_per_line: Option<u32>,
    /// How often the control forces its session store to the disk, in milliseconds. Absent
    /// or 0: at every commit, before the ACKs of the commit leave, so a lease survives a power
    /// loss the moment its client holds it. Above 0: commits still reach the file (a control
    /// crash or restart loses nothing) and at most one disk sync is made per interval, so a
    /// crash of the node can forget the leases of the last interval (their clients keep
    /// their addresses until they renew); each commit then costs less CPU and the ACKs do not
    /// wait for the disk. Kea's memfile lease file is never synced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 60_000))]
    pub lease_sync_interval_ms: Option<u32>,
}

/// DISCOVERs that would create a session are admitted at `ratePerSec` (bursts of `burst`);
/// beyond it they wait in a queue holding one per subscriber, and are dropped and counted
/// when it is full or when they waited longer than `maxWaitMs` (default 4,000: a client's
/// first retransmission, RFC 2131 section 4.1, after which the waiting DISCOVER is stale).
/// Exchanges already under way (REQUESTs, renewals) are never paced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PacingSpec {
    #[schemars(range(min = 1, max = 1_000_000))]
    pub rate_per_sec: u32,
    #[schemars(range(min = 1, max = 1_000_000))]
    pub burst: u32,
    #[serde(default = "default_pacing_queue")]
    #[schemars(range(min = 1, max = 1_000_000))]
    pub queue: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 60_000))]
    pub max_wait_ms: Option<u32>,
}

fn default_pacing_queue() -> u32 {
    20_000
}

// ---------------------------------------------------------------- AAA and walled garden

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum AaaMode {
    /// The control pod's own subscriber store.
    Local,
    /// RFC 2865 / 2866 servers.
    Radius,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum UnknownSubscriberPolicy {
    /// Admitted to the walled garden only.
    Captive,
    /// Not leased an address.
    Reject,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RadiusServer {
    #[schemars(regex(pattern = IPV4_PATTERN), length(max = 15))]
    pub address: String,
    #[serde(default = "default_auth_port")]
    #[schemars(range(min = 1, max = 65535))]
    pub auth_port: u16,
    #[serde(default = "default_acct_port")]
    #[schemars(range(min = 1, max = 65535))]
    pub acct_port: u16,
}

fn default_auth_port() -> u16 {
    1812
}

fn default_acct_port() -> u16 {
    1813
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RadiusSpec {
    #[schemars(length(min = 1, max = 8))]
    pub servers: Vec<RadiusServer>,
    pub secret_ref: SecretKeyRef,
    #[schemars(length(min = 1, max = 253))]
    pub nas_identifier: String,
    #[serde(default = "default_interim_secs")]
    #[schemars(range(min = 60, max = 86_400))]
    pub interim_interval_secs: u32,
    /// How often each session's counters are read and kept between its Interim-Updates
    /// (sessions whose interims come less often, or not at all): a dataplane lost without
    /// warning (a crash, a node failure) loses at most this much of their counted traffic; a
    /// dataplane stopped by Kubernetes is read before it goes. 0: read at interims only.
    #[serde(default = "default_counters_read_secs")]
    #[schemars(range(max = 3_600))]
    pub counters_read_interval_secs: u32,
    /// How an Access-Request proves the subscriber's password.
    #[serde(default)]
    pub auth_method: RadiusAuthMethod,
    /// Change-of-Authorization and Disconnect requests (RFC 5176) from the RADIUS side: a
    /// plan changed or a session ended live. Absent: the control does not listen for them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamic_authorization: Option<DynamicAuthorizationSpec>,
}

/// Where the control listens for CoA and Disconnect requests, and whom it answers. Each
/// client signs with the BNG's RADIUS secret (`secretRef`); a request from any other address,
/// or with another secret, is discarded and counted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[x_kube(validation = Rule::new("self.port != 8080 && self.port != 9090").message("port must not be the control's admin port (8080) or metrics port (9090)"))]
pub struct DynamicAuthorizationSpec {
    /// UDP port of the control pod (RFC 5176's is 3799). Unprivileged: the control runs
    /// without the capability to bind below 1024.
    #[serde(default = "default_das_port")]
    #[schemars(range(min = 1024, max = 65535))]
    pub port: u16,
    /// The source addresses requests come from (RADIUS servers or proxies).
    #[schemars(length(min = 1, max = 16))]
    pub clients: Vec<DasClient>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DasClient {
    #[schemars(regex(pattern = IPV4_PATTERN), length(max = 15))]
    pub address: String,
}

fn default_das_port() -> u16 {
    3799
}

/// `pap` sends User-Password, which every server can check whatever form it stores
/// passwords in; `chap` sends a CHAP response, so the password never travels, but the
/// server must hold it in clear text (RFC 2865 §5.2, §5.3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum RadiusAuthMethod {
    #[default]
    Pap,
    Chap,
}

fn default_interim_secs() -> u32 {
    300
}

fn default_counters_read_secs() -> u32 {
    30
}

/// A ConfigMap key holding subscriber records: CSV rows `mac,circuit_id,remote_id,plan[,ipv4,
/// pool]` in a key ending `.csv`, or a JSON array of records in one ending `.json` (as
/// `kbngctl subscribers import` takes them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SubscribersSource {
    #[schemars(
        regex(pattern = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"),
        length(min = 1, max = 253)
    )]
    pub config_map: String,
    #[schemars(regex(pattern = r"^[-._a-zA-Z0-9]+\.(csv|json)$"), length(max = 253))]
    pub key: String,
    /// An edit that would remove more than this percentage of the records in force (and at
    /// least 10 of them) is held, not applied, until `kbngctl subscribers accept-file` or
    /// another edit: a truncated ConfigMap does not wall in every subscriber it drops. 100
    /// holds no edit. Default 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub max_removal_percent: Option<u8>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[x_kube(validation = Rule::new("self.mode == 'radius' ? has(self.radius) : !has(self.radius)").message("radius is required with mode radius and allowed only there"))]
#[x_kube(validation = Rule::new("self.mode == 'local' || !has(self.subscribers)").message("subscribers are the local store's records; with mode radius the server decides"))]
pub struct AaaSpec {
    pub mode: AaaMode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub radius: Option<RadiusSpec>,
    /// The local store's subscriber records, from a ConfigMap of the BNG's namespace. Read
    /// when the control starts and again when the mounted file changes (an edit is in force
    /// without a restart; one that does not parse changes nothing and is alerted); records
    /// changed through its API are kept apart and applied over them. A ConfigMap holds at most
    /// 1 MiB (some 40,000 CSV rows); import larger stores through the control's API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscribers: Option<SubscribersSource>,
    /// The plan of a known subscriber whose record names none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_plan: Option<LocalRef>,
    pub unknown_subscribers: UnknownSubscriberPolicy,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum GardenProtocol {
    Any,
    Tcp,
    Udp,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[x_kube(validation = Rule::new("self.protocol != 'any' || !has(self.port)").message("a port needs protocol tcp or udp"))]
#[x_kube(validation = Rule::new("cidr(self.prefix) == cidr(self.prefix).masked()").message("prefix must not have host bits set"))]
pub struct GardenAllow {
    #[schemars(regex(pattern = CIDR_PATTERN), length(max = 18))]
    pub prefix: String,
    pub protocol: GardenProtocol,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<u16>,
}

/// Where captive subscribers may go.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WalledGardenSpec {
    /// Captive subscribers' HTTP is answered with a 302 to this URL.
    #[schemars(regex(pattern = r"^https?://[^\s]+$"), length(max = 2048))]
    pub portal_url: String,
    #[schemars(length(min = 1, max = 64))]
    pub allowed: Vec<GardenAllow>,
}

// ---------------------------------------------------------------- status

/// The launch-gate condition types a BNG must pass before it carries subscribers.
pub mod gates {
    pub const LICENCE_VALID: &str = "LicenceValid";
    pub const SESSION_CAP_KNOWN: &str = "SessionCapKnown";
    pub const DATAPLANES_CONNECTED: &str = "DataplanesConnected";
    pub const AAA_REACHABLE: &str = "AAAReachable";
    pub const PLANS_PROGRAMMED: &str = "PlansProgrammed";
    pub const POOL_USABLE: &str = "PoolUsable";
    pub const CAPTIVE_PORTAL_SET: &str = "CaptivePortalSet";
    pub const INTERFACES_UP: &str = "InterfacesUp";
    /// Every gate, in the order they are reported.
    pub const ALL: [&str; 8] = [
        LICENCE_VALID,
        SESSION_CAP_KNOWN,
        DATAPLANES_CONNECTED,
        AAA_REACHABLE,
        PLANS_PROGRAMMED,
        POOL_USABLE,
        CAPTIVE_PORTAL_SET,
        INTERFACES_UP,
    ];
    pub const READY: &str = "Ready";
    pub const RECONCILING: &str = "Reconciling";
    pub const STALLED: &str = "Stalled";
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionCounts {
    pub active: u64,
    pub captive: u64,
    /// Every session the control holds, in any state (active, captive, being set up).
    #[serde(default)]
    pub total: u64,
    /// The cap in force (from the Licence's status, or the free baseline).
    pub cap: u64,
}

/// What one dataplane reports about itself (not what was asked for).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataplaneStatus {
    pub pod: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Why the pod is where it is, or why it is not placed (the scheduler's message).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub placement: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_node: Option<i32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cores: Vec<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pci_addresses: Vec<String>,
    pub connected: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct BngStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default)]
    pub sessions: SessionCounts,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub licence_source: Option<LicenceSource>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dataplanes: Vec<DataplaneStatus>,
    /// Each address pool's use, as the control reports it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<PoolUsage>,
}

/// A pool's addresses: leasable (network, broadcast, gateway and exclusions left out), in use
/// (offered, bound, or quarantined after a DECLINE), and fixed: excluded addresses held by
/// sessions because RADIUS (Framed-IP-Address) or a subscriber record (`ipv4`) assigned them,
/// counted in neither of the others.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct PoolUsage {
    pub name: String,
    pub leasable: u32,
    pub in_use: u32,
    /// Absent from controls older than this field: read as 0.
    #[serde(default)]
    pub fixed: u32,
}
