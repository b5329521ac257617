//! The `Licence` resource: a signed grant of a session cap.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A signed grant: who may run how many sessions, between which instants.
///
/// The signature is Ed25519 over the canonical payload of [`crate::grant::canonical_payload`];
/// the operator verifies it against the public key it is configured with and writes the
/// verdict to status. Nothing in the spec is trusted until then.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[kube(
    group = "kbng.dev",
    version = "v1alpha1",
    kind = "Licence",
    plural = "licences",
    namespaced,
    status = "LicenceStatus",
    shortname = "lic",
    category = "kbng",
    printcolumn = r#"{"name":"Valid","type":"boolean","jsonPath":".status.valid"}"#,
    printcolumn = r#"{"name":"Source","type":"string","jsonPath":".status.source"}"#,
    printcolumn = r#"{"name":"Max Sessions","type":"integer","jsonPath":".status.maxSessions"}"#,
    printcolumn = r#"{"name":"Days Left","type":"integer","jsonPath":".status.daysRemaining"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","jsonPath":".status.reason","priority":1}"#,
    validation = Rule::new("self.spec.notAfter > self.spec.notBefore").message("notAfter must be later than notBefore")
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LicenceSpec {
    #[schemars(length(min = 1, max = 256))]
    pub customer: String,
    #[schemars(length(min = 1, max = 128))]
    pub licence_id: String,
    #[schemars(range(min = 1, max = 100_000_000))]
    pub max_sessions: u64,
    pub not_before: Time,
    pub not_after: Time,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub features: Vec<String>,
    /// Base64 of the 64-byte Ed25519 signature.
    #[schemars(length(min = 86, max = 88))]
    pub signature: String,
}

/// Where the session cap in force comes from. Always the truth of the last evaluation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum LicenceSource {
    /// A licence whose signature verified and whose validity window contains now.
    Licence,
    /// No valid licence: the free baseline cap applies.
    FreeBaseline,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct LicenceStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    pub valid: bool,
    /// Why the licence is (not) valid, in a word an operator can grep: `Verified`,
    /// `BadSignature`, `Expired`, `NotYetValid`, `Malformed`.
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The cap in force: the licence's when valid, the free baseline's otherwise.
    pub max_sessions: u64,
    pub source: Option<LicenceSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub days_remaining: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}
