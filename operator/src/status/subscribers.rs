//! `SubscribersInForce`: whether the records of the BNG's `spec.aaa.subscribers` ConfigMap
//! are the ones the control admits by. The control rereads the mounted file when the kubelet
//! updates it and keeps the records before an edit it cannot use, or one that would remove
//! too many of them (held until accepted); without this condition an operator who applied
//! such an edit would see nothing wrong on the BNG.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use super::{ControlView, Observed, cond};

/// The condition's type; present only on a BNG with `spec.aaa.subscribers`.
pub const SUBSCRIBERS_IN_FORCE: &str = "SubscribersInForce";

/// The condition, or `None` when the BNG names no subscribers ConfigMap.
pub(super) fn condition(o: &Observed) -> Option<Condition> {
    if !o.subscribers_configured {
        return None;
    }
    let c = |ok, reason, message| Some(cond(SUBSCRIBERS_IN_FORCE, ok, reason, message, o));
    let report = match o.control {
        ControlView::Unreachable(why) => {
            return c(
                None,
                "AwaitingReport",
                format!("no report from the control: {why}"),
            );
        }
        ControlView::Reported { subscribers, .. } => subscribers,
    };
    match report {
        None => c(
            None,
            "NotReported",
            "the control does not report its subscriber store (a version before the report)".into(),
        ),
        Some(r) => match &r.file {
            None => c(
                None,
                "NoFileYet",
                "the control reads no subscribers file yet (its pod predates spec.aaa.subscribers)"
                    .into(),
            ),
            Some(None) => c(
                Some(true),
                "FileInForce",
                format!("{} subscriber record(s) in force", r.records),
            ),
            Some(Some(why)) if r.held_removes.is_some() => c(
                Some(false),
                "FileHeld",
                format!(
                    "the ConfigMap's present content is held, so the {} record(s) read before \
                     it stay in force: {why}",
                    r.records
                ),
            ),
            Some(Some(why)) => c(
                Some(false),
                "FileRejected",
                format!(
                    "the ConfigMap's present content cannot be used, so the {} record(s) read \
                     before it stay in force: {why}",
                    r.records
                ),
            ),
        },
    }
}
