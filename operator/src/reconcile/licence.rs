//! Licence: verify the signature, evaluate the window, write the verdict, and come back when
//! the verdict changes by itself (at `notBefore` or `notAfter`) or a day ticks over.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kbng_crds::common::{FALSE, TRUE, set_condition};
use kbng_crds::grant::{Verdict, evaluate};
use kbng_crds::{Licence, LicenceStatus};
use kube::api::{Patch, PatchParams};
use kube::runtime::{Controller, controller::Action, watcher};
use kube::{Api, Client, ResourceExt};
use tracing::info;

use super::{Context, ReconcileError, api, now_secs};
use crate::build::FIELD_MANAGER;

/// Re-evaluate at least this often, so `daysRemaining` stays true.
const REFRESH: Duration = Duration::from_secs(3600);

pub fn controller(
    client: &Client,
    namespace: Option<&str>,
    wc: watcher::Config,
) -> Controller<Licence> {
    Controller::new(api::<Licence>(client, namespace), wc)
}

/// The status a verdict becomes, keeping condition times from `previous`.
pub fn status_for(
    verdict: &Verdict,
    generation: Option<i64>,
    previous: Option<&LicenceStatus>,
    now: k8s_openapi::jiff::Timestamp,
) -> LicenceStatus {
    let mut conditions = previous.map(|p| p.conditions.clone()).unwrap_or_default();
    set_condition(
        &mut conditions,
        Condition {
            type_: "Valid".into(),
            status: if verdict.valid { TRUE } else { FALSE }.into(),
            reason: verdict.reason.as_str().into(),
            message: verdict.message.clone(),
            observed_generation: generation,
            last_transition_time: Time(now),
        },
    );
    LicenceStatus {
        observed_generation: generation,
        valid: verdict.valid,
        reason: verdict.reason.as_str().into(),
        message: verdict.message.clone(),
        max_sessions: verdict.max_sessions,
        source: Some(verdict.source),
        expires_at: Some(Time(verdict.expires_at)),
        days_remaining: verdict.days_remaining,
        conditions,
    }
}

/// When to look again: at the verdict's own review time, at most [`REFRESH`] away.
pub fn requeue_after(verdict: &Verdict, now: k8s_openapi::jiff::Timestamp) -> Duration {
    verdict
        .review_at
        .map(|at| {
            let secs = at.as_second().saturating_sub(now.as_second()).max(1);
            Duration::from_secs(secs as u64 + 1)
        })
        .unwrap_or(REFRESH)
        .min(REFRESH)
}

pub async fn reconcile(lic: Arc<Licence>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let now = now_secs();
    let verdict = evaluate(&lic.spec, &ctx.licence_key, now);
    let previous = lic.status.as_ref();
    let status = status_for(&verdict, lic.metadata.generation, previous, now);
    if previous != Some(&status) {
        let ns = lic.namespace().unwrap_or_default();
        let api: Api<Licence> = Api::namespaced(ctx.client.clone(), &ns);
        let body = serde_json::json!({
            "apiVersion": "kbng.dev/v1alpha1",
            "kind": "Licence",
            "status": status,
        });
        api.patch_status(
            &lic.name_any(),
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&body),
        )
        .await?;
        let changed = previous.is_none_or(|p| p.valid != status.valid || p.reason != status.reason);
        if changed {
            info!(licence = %lic.name_any(), valid = verdict.valid, reason = verdict.reason.as_str(), "licence evaluated");
            ctx.event(
                lic.as_ref(),
                !verdict.valid,
                verdict.reason.as_str(),
                "Verify",
                format!(
                    "{}: cap {} sessions ({:?})",
                    verdict.message, verdict.max_sessions, verdict.source
                ),
            )
            .await;
        }
    }
    ctx.succeeded(&super::key_of(lic.as_ref()));
    Ok(Action::requeue(requeue_after(&verdict, now)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::SigningKey;
    use k8s_openapi::jiff::Timestamp;
    use kbng_crds::grant::{FREE_BASELINE_SESSIONS, sign};
    use kbng_crds::licence::{LicenceSource, LicenceSpec};

    fn spec(key: &SigningKey, from: i64, to: i64) -> LicenceSpec {
        let mut spec = LicenceSpec {
            customer: "Lab".into(),
            licence_id: "L-1".into(),
            max_sessions: 1000,
            not_before: Time(Timestamp::from_second(from).unwrap()),
            not_after: Time(Timestamp::from_second(to).unwrap()),
            features: vec![],
            signature: String::new(),
        };
        spec.signature = sign(&spec, key);
        spec
    }

    #[test]
    fn valid_forged_and_expired_statuses() {
        let key = SigningKey::from_bytes(&[7; 32]);
        let pk = key.verifying_key();
        let now = Timestamp::from_second(1_000_000).unwrap();
        let good = spec(&key, 0, 1_000_000 + 86_400 * 10 + 5);
        let v = evaluate(&good, &pk, now);
        let s = status_for(&v, Some(2), None, now);
        assert!(s.valid);
        assert_eq!(s.days_remaining, Some(10));
        assert_eq!(s.source, Some(LicenceSource::Licence));
        assert_eq!(s.conditions[0].status, TRUE);
        assert_eq!(requeue_after(&v, now), REFRESH);

        let mut forged = good.clone();
        forged.max_sessions = 1_000_000;
        let s = status_for(&evaluate(&forged, &pk, now), Some(2), Some(&s), now);
        assert!(!s.valid);
        assert_eq!(s.reason, "BadSignature");
        assert_eq!(s.max_sessions, FREE_BASELINE_SESSIONS);
        assert_eq!(s.source, Some(LicenceSource::FreeBaseline));

        let expired = spec(&key, 0, 999_000);
        let s = status_for(&evaluate(&expired, &pk, now), None, None, now);
        assert_eq!((s.valid, s.reason.as_str()), (false, "Expired"));
    }

    #[test]
    fn requeue_at_expiry_when_sooner_than_an_hour() {
        let key = SigningKey::from_bytes(&[7; 32]);
        let now = Timestamp::from_second(1_000_000).unwrap();
        let v = evaluate(&spec(&key, 0, 1_000_060), &key.verifying_key(), now);
        assert_eq!(requeue_after(&v, now), Duration::from_secs(61));
        let v = evaluate(&spec(&key, 1_000_030, 2_000_000), &key.verifying_key(), now);
        assert_eq!(v.reason.as_str(), "NotYetValid");
        assert_eq!(requeue_after(&v, now), Duration::from_secs(31));
    }
}
