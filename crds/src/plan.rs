//! The `SubscriberPlan` resource: what a subscriber may send and receive.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Smallest burst a bucket may hold: one full Ethernet frame (1518 bytes), so that a
/// maximum-size packet can ever be green.
pub const MIN_BURST_BYTES: u64 = 1518;

/// Per-direction policing of a subscriber.
#[derive(CustomResource, Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[kube(
    group = "kbng.dev",
    version = "v1alpha1",
    kind = "SubscriberPlan",
    plural = "subscriberplans",
    namespaced,
    status = "SubscriberPlanStatus",
    shortname = "plan",
    shortname = "splan",
    category = "kbng",
    printcolumn = r#"{"name":"Up CIR","type":"integer","jsonPath":".spec.upstream.cirBps"}"#,
    printcolumn = r#"{"name":"Up PIR","type":"integer","jsonPath":".spec.upstream.pirBps"}"#,
    printcolumn = r#"{"name":"Down CIR","type":"integer","jsonPath":".spec.downstream.cirBps"}"#,
    printcolumn = r#"{"name":"Down PIR","type":"integer","jsonPath":".spec.downstream.pirBps"}"#,
    printcolumn = r#"{"name":"Sessions","type":"integer","jsonPath":".status.sessions"}"#,
    printcolumn = r#"{"name":"Valid","type":"string","jsonPath":".status.conditions[?(@.type==\"Valid\")].status"}"#
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SubscriberPlanSpec {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 1024))]
    pub description: String,
    /// Subscriber to network.
    pub upstream: DirectionPolicy,
    /// Network to subscriber.
    pub downstream: DirectionPolicy,
}

/// The policer algorithm of one direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum PolicerMode {
    /// RFC 2697 single-rate three-colour marker: CIR, CBS, EBS.
    #[serde(rename = "srTCM")]
    SrTcm,
    /// RFC 2698 two-rate three-colour marker: CIR, PIR, CBS, PBS.
    #[serde(rename = "trTCM")]
    TrTcm,
}

/// What happens to a packet of a colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ColourActionKind {
    Transmit,
    /// Transmit with the DSCP rewritten.
    Remark,
    Drop,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[x_kube(validation = Rule::new("self.action == 'remark' ? has(self.dscp) : !has(self.dscp)").message("dscp is required with action remark and allowed only there"))]
pub struct ColourAction {
    pub action: ColourActionKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 63))]
    pub dscp: Option<u8>,
}

impl ColourAction {
    pub const TRANSMIT: ColourAction = ColourAction {
        action: ColourActionKind::Transmit,
        dscp: None,
    };
    pub const DROP: ColourAction = ColourAction {
        action: ColourActionKind::Drop,
        dscp: None,
    };
}

/// Actions per colour; the defaults are the conventional transmit / transmit / drop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ColourActions {
    pub green: ColourAction,
    pub yellow: ColourAction,
    pub red: ColourAction,
}

impl Default for ColourActions {
    fn default() -> Self {
        ColourActions {
            green: ColourAction::TRANSMIT,
            yellow: ColourAction::TRANSMIT,
            red: ColourAction::DROP,
        }
    }
}

/// One direction's policer. Rates are bit/s of layer-2 frames, bursts are bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[x_kube(validation = Rule::new("self.mode == 'trTCM' ? has(self.pirBps) : !has(self.pirBps)").message("pirBps is required with trTCM and not allowed with srTCM"))]
#[x_kube(validation = Rule::new("!has(self.pirBps) || self.pirBps >= self.cirBps").message("pirBps must be at least cirBps"))]
#[x_kube(validation = Rule::new("self.mode == 'srTCM' || self.pbsBytes >= self.cbsBytes").message("with trTCM, pbsBytes must be at least cbsBytes"))]
pub struct DirectionPolicy {
    pub mode: PolicerMode,
    #[schemars(range(min = 8_000, max = 400_000_000_000u64))]
    pub cir_bps: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 8_000, max = 400_000_000_000u64))]
    pub pir_bps: Option<u64>,
    /// Committed burst size.
    #[schemars(range(min = 1518, max = 1_073_741_824))]
    pub cbs_bytes: u64,
    /// trTCM: peak burst size; srTCM: excess burst size.
    #[schemars(range(min = 1518, max = 1_073_741_824))]
    pub pbs_bytes: u64,
    #[serde(default)]
    pub actions: ColourActions,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriberPlanStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Sessions currently on this plan, summed over the BNGs that use it.
    #[serde(default)]
    pub sessions: u64,
    /// The numeric id the dataplanes know this plan by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_id: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}
