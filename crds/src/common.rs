//! Types shared by the kbng resources.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::KubeSchema;
use serde::{Deserialize, Serialize};

/// Condition status strings of Kubernetes.
pub const TRUE: &str = "True";
pub const FALSE: &str = "False";
pub const UNKNOWN: &str = "Unknown";

/// A reference to another object of the same namespace by name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(deny_unknown_fields)]
pub struct LocalRef {
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// A reference to one key of a Secret in the same namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(deny_unknown_fields)]
pub struct SecretKeyRef {
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
}

/// An inclusive range of VLAN ids.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[x_kube(validation = Rule::new("self.first <= self.last").message("first must not exceed last"))]
pub struct VlanRange {
    #[schemars(range(min = 1, max = 4094))]
    pub first: u16,
    #[schemars(range(min = 1, max = 4094))]
    pub last: u16,
}

/// Finds a condition of the given type.
pub fn condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Sets a condition, keeping `lastTransitionTime` when the status did not change, as
/// `meta.SetStatusCondition` does in Go.
pub fn set_condition(conditions: &mut Vec<Condition>, new: Condition) {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(old) => {
            let keep_time = old.status == new.status;
            let time = old.last_transition_time.clone();
            *old = new;
            if keep_time {
                old.last_transition_time = time;
            }
        }
        None => conditions.push(new),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    fn cond(status: &str, secs: i64) -> Condition {
        Condition {
            type_: "Ready".into(),
            status: status.into(),
            reason: "R".into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: Time(Timestamp::from_second(secs).unwrap()),
        }
    }

    #[test]
    fn transition_time_kept_when_status_unchanged() {
        let mut all = vec![cond(TRUE, 10)];
        set_condition(&mut all, cond(TRUE, 20));
        assert_eq!(
            all[0].last_transition_time,
            cond(TRUE, 10).last_transition_time
        );
        set_condition(&mut all, cond(FALSE, 30));
        assert_eq!(
            all[0].last_transition_time,
            cond(FALSE, 30).last_transition_time
        );
        assert_eq!(all.len(), 1);
    }
}
