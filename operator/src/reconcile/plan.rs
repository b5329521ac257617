//! SubscriberPlan: validate into a domain plan, say what is wrong, say who uses it.
//!
//! Handing a valid plan to the control pods is the BNG reconciler's job (it renders the
//! control ConfigMap and watches plans); this one writes the plan's own status.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kbng_crds::common::{FALSE, TRUE, set_condition};
use kbng_crds::{Bng, SubscriberPlan, SubscriberPlanStatus};
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{Controller, controller::Action, watcher};
use kube::{Api, Client, ResourceExt};

use super::{Context, ReconcileError, api, now_secs};
use crate::build::FIELD_MANAGER;
use crate::plan::{Plan, plan_id};

pub fn controller(
    client: &Client,
    namespace: Option<&str>,
    wc: watcher::Config,
) -> Controller<SubscriberPlan> {
    // A BNG starting or stopping to use a plan changes the plan's InUse condition.
    Controller::new(api::<SubscriberPlan>(client, namespace), wc.clone()).watches(
        api::<Bng>(client, namespace),
        wc,
        |bng| {
            let ns = bng.namespace().unwrap_or_default();
            bng.spec
                .plans
                .iter()
                .map(|p| ObjectRef::new(&p.name).within(&ns))
                .collect::<Vec<_>>()
        },
    )
}

/// The status of a plan named `name` with `spec`, used by the BNGs `users`.
pub fn status_for(
    plan: &SubscriberPlan,
    users: &[String],
    sessions: u64,
    now: k8s_openapi::jiff::Timestamp,
) -> SubscriberPlanStatus {
    let name = plan.name_any();
    let generation = plan.metadata.generation;
    let previous = plan.status.as_ref();
    let mut conditions = previous.map(|p| p.conditions.clone()).unwrap_or_default();
    let cond = |type_: &str, ok: bool, reason: &str, message: String| Condition {
        type_: type_.into(),
        status: if ok { TRUE } else { FALSE }.into(),
        reason: reason.into(),
        message,
        observed_generation: generation,
        last_transition_time: Time(now),
    };
    let valid = Plan::validate(&name, &plan.spec);
    set_condition(
        &mut conditions,
        match &valid {
            Ok(_) => cond("Valid", true, "Validated", String::new()),
            Err(err) => cond("Valid", false, "InvalidSpec", err.to_string()),
        },
    );
    set_condition(
        &mut conditions,
        if users.is_empty() {
            cond(
                "InUse",
                false,
                "Unreferenced",
                "no BNG lists this plan".into(),
            )
        } else {
            cond(
                "InUse",
                true,
                "Referenced",
                format!("used by BNG {}", users.join(", ")),
            )
        },
    );
    SubscriberPlanStatus {
        observed_generation: generation,
        // Per-plan session counts come with the control pods' session report, which does not
        // exist yet; until then no session is attributed to any plan.
        sessions,
        plan_id: valid.is_ok().then(|| plan_id(&name)),
        conditions,
    }
}

pub async fn reconcile(
    plan: Arc<SubscriberPlan>,
    ctx: Arc<Context>,
) -> Result<Action, ReconcileError> {
    let ns = plan.namespace().unwrap_or_default();
    let name = plan.name_any();
    let bngs: Api<Bng> = Api::namespaced(ctx.client.clone(), &ns);
    let mut users: Vec<String> = bngs
        .list(&ListParams::default())
        .await?
        .into_iter()
        .filter(|b| b.spec.plans.iter().any(|p| p.name == name))
        .map(|b| b.name_any())
        .collect();
    users.sort();
    let keys: Vec<String> = users.iter().map(|u| format!("{ns}/{u}")).collect();
    let sessions = ctx.sessions_on_plan(&name, &keys);
    let status = status_for(&plan, &users, sessions, now_secs());
    let previous = plan.status.as_ref();
    if previous != Some(&status) {
        let was_valid = previous.map(|p| p.plan_id.is_some());
        let api: Api<SubscriberPlan> = Api::namespaced(ctx.client.clone(), &ns);
        let body = serde_json::json!({
            "apiVersion": "kbng.dev/v1alpha1",
            "kind": "SubscriberPlan",
            "status": status,
        });
        api.patch_status(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&body),
        )
        .await?;
        let now_valid = status.plan_id.is_some();
        if was_valid != Some(now_valid) {
            let message = status
                .conditions
                .iter()
                .find(|c| c.type_ == "Valid")
                .map(|c| c.message.clone())
                .unwrap_or_default();
            if now_valid {
                ctx.event(
                    plan.as_ref(),
                    false,
                    "Validated",
                    "Validate",
                    format!("plan id {}", plan_id(&name)),
                )
                .await;
            } else {
                ctx.event(plan.as_ref(), true, "InvalidSpec", "Validate", message)
                    .await;
            }
        }
    }
    ctx.succeeded(&super::key_of(plan.as_ref()));
    // A BNG's status write (its counts changed) triggers this through the BNG watch; the
    // periodic look catches a session moving between plans with the BNG's totals unchanged.
    Ok(if users.is_empty() {
        Action::await_change()
    } else {
        Action::requeue(std::time::Duration::from_secs(60))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::ObjectMeta;

    fn plan(yaml_idx: usize) -> SubscriberPlan {
        let text = include_str!("../../../deploy/samples/plans.yaml");
        let doc = serde_yaml_ng::Deserializer::from_str(text)
            .nth(yaml_idx)
            .unwrap();
        let mut p: SubscriberPlan = serde::Deserialize::deserialize(doc).unwrap();
        p.metadata = ObjectMeta {
            generation: Some(4),
            ..p.metadata
        };
        p
    }

    #[test]
    fn valid_plan_gets_an_id_and_its_users() {
        let now = k8s_openapi::jiff::Timestamp::from_second(10).unwrap();
        let s = status_for(&plan(0), &["lab".into()], 3, now);
        assert_eq!(s.sessions, 3);
        assert_eq!(s.plan_id, Some(plan_id("basic-50m")));
        assert_eq!(s.observed_generation, Some(4));
        assert_eq!(s.conditions[0].status, TRUE);
        assert_eq!(s.conditions[1].message, "used by BNG lab");
    }

    #[test]
    fn invalid_plan_says_what_is_wrong_and_has_no_id() {
        let now = k8s_openapi::jiff::Timestamp::from_second(10).unwrap();
        let mut p = plan(1);
        p.spec.downstream.pir_bps = Some(1);
        let s = status_for(&p, &[], 0, now);
        assert_eq!(s.plan_id, None);
        let valid = &s.conditions[0];
        assert_eq!(
            (valid.status.as_str(), valid.reason.as_str()),
            (FALSE, "InvalidSpec")
        );
        assert!(
            valid
                .message
                .contains("downstream.pirBps 1 is below cirBps"),
            "{}",
            valid.message
        );
        assert_eq!(s.conditions[1].reason, "Unreferenced");
    }
}
