//! BNG: gather the licence verdict, the plans and the nodes; apply the owned objects; observe
//! the workloads; write status and events. A finalizer drains sessions before deletion.
//!
//! Drain protocol (the control pod's side is implemented in `cnf-control`'s Kubernetes
//! adapter): the operator annotates each ready control pod with
//! `kbng.dev/drain-requested: <token>`; the control pod ends its sessions (accounting stop,
//! DHCP leases released) and annotates its own pod `kbng.dev/drained: <token>`. The operator
//! waits for every asked pod, at most `--drain-timeout`, then lets the BNG go either way and
//! says which in an event. The start time is kept in an annotation on the BNG, so an operator
//! restart does not restart the wait. Kubernetes objects carry the request rather than a
//! direct connection to the pod so that the operator needs no network path to pod IPs.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kbng_crds::bng::{BngStatus, gates};
use kbng_crds::common::{FALSE, TRUE, condition, set_condition};
use kbng_crds::grant::evaluate;
use kbng_crds::{Bng, Licence, SubscriberPlan};
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{Controller, controller::Action, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tracing::info;

use super::{Context, ReconcileError, api, now_secs};
use crate::build::{
    self, BNG_LABEL, COMPONENT_LABEL, FIELD_MANAGER, Inputs, Owned, control_name, dataplane_name,
};
use crate::placement;
use crate::plan::{Plan, colliding_ids};
use crate::status::{LicenceState, Observed, PlanState, compute, transitions};

pub const FINALIZER: &str = "kbng.dev/drain";
pub const DRAIN_REQUESTED: &str = "kbng.dev/drain-requested";
pub const DRAINED: &str = "kbng.dev/drained";
pub const DRAIN_STARTED: &str = "kbng.dev/drain-started";
const MANAGED: &str = "app.kubernetes.io/managed-by=kbng-operator";

pub fn controller(
    client: &Client,
    namespace: Option<&str>,
    wc: watcher::Config,
) -> Controller<Bng> {
    let owned = watcher::Config::default().labels(MANAGED).any_semantic();
    let c = Controller::new(api::<Bng>(client, namespace), wc.clone());
    let for_plans = c.store();
    let for_licences = c.store();
    c.owns(api::<StatefulSet>(client, namespace), owned.clone())
        .owns(api::<Deployment>(client, namespace), owned.clone())
        .owns(api::<ConfigMap>(client, namespace), owned.clone())
        .owns(api::<Service>(client, namespace), owned.clone())
        .owns(api::<ServiceAccount>(client, namespace), owned.clone())
        .owns(api::<Role>(client, namespace), owned.clone())
        .owns(api::<RoleBinding>(client, namespace), owned.clone())
        // Pods belong to ReplicaSets, not to the BNG; their label names it.
        .watches(api::<Pod>(client, namespace), owned, |pod| {
            let ns = pod.namespace().unwrap_or_default();
            pod.labels()
                .get(BNG_LABEL)
                .map(|b| ObjectRef::new(b).within(&ns))
        })
        .watches(
            api::<SubscriberPlan>(client, namespace),
            wc.clone(),
            move |plan| {
                let ns = plan.namespace();
                let name = plan.name_any();
                for_plans
                    .state()
                    .iter()
                    .filter(|b| b.namespace() == ns && b.spec.plans.iter().any(|p| p.name == name))
                    .map(|b| ObjectRef::from(b.as_ref()))
                    .collect::<Vec<_>>()
            },
        )
        .watches(api::<Licence>(client, namespace), wc, move |lic| {
            let ns = lic.namespace();
            let name = lic.name_any();
            for_licences
                .state()
                .iter()
                .filter(|b| {
                    b.namespace() == ns
                        && b.spec.licence_ref.as_ref().is_some_and(|r| r.name == name)
                })
                .map(|b| ObjectRef::from(b.as_ref()))
                .collect::<Vec<_>>()
        })
}

pub async fn reconcile(bng: Arc<Bng>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let ns = bng.namespace().unwrap_or_default();
    let has_finalizer = bng.finalizers().iter().any(|f| f == FINALIZER);
    let action = if bng.metadata.deletion_timestamp.is_some() {
        if has_finalizer {
            drain(&bng, &ns, &ctx).await?
        } else {
            Action::await_change()
        }
    } else if !has_finalizer {
        let mut finalizers = bng.finalizers().to_vec();
        finalizers.push(FINALIZER.into());
        patch_meta(
            &ctx,
            &bng,
            &ns,
            serde_json::json!({ "finalizers": finalizers }),
        )
        .await?;
        // The patch triggers the next reconcile.
        Action::await_change()
    } else {
        converge(&bng, &ns, &ctx).await?
    };
    ctx.succeeded(&super::key_of(bng.as_ref()));
    Ok(action)
}

/// A merge patch of the BNG's metadata, guarded by its resourceVersion so a concurrent
/// change (another finalizer, an edit) is not overwritten.
async fn patch_meta(
    ctx: &Context,
    bng: &Bng,
    ns: &str,
    mut meta: serde_json::Value,
) -> Result<(), ReconcileError> {
    meta["resourceVersion"] = serde_json::json!(bng.resource_version());
    let api: Api<Bng> = Api::namespaced(ctx.client.clone(), ns);
    api.patch(
        &bng.name_any(),
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({ "metadata": meta })),
    )
    .await?;
    Ok(())
}

async fn licence_state(
    bng: &Bng,
    ns: &str,
    ctx: &Context,
    now: Timestamp,
) -> Result<LicenceState, kube::Error> {
    let Some(r) = &bng.spec.licence_ref else {
        return Ok(LicenceState::NotReferenced);
    };
    let api: Api<Licence> = Api::namespaced(ctx.client.clone(), ns);
    Ok(match api.get_opt(&r.name).await? {
        None => LicenceState::NotFound(r.name.clone()),
        // Evaluated here rather than read from the Licence's status: the verdict is a pure
        // function of the spec, the key and the clock, and a status could be stale.
        Some(lic) => LicenceState::Evaluated {
            name: r.name.clone(),
            verdict: evaluate(&lic.spec, &ctx.licence_key, now),
        },
    })
}

async fn plan_states(bng: &Bng, ns: &str, ctx: &Context) -> Result<Vec<PlanState>, kube::Error> {
    let api: Api<SubscriberPlan> = Api::namespaced(ctx.client.clone(), ns);
    let mut out = Vec::with_capacity(bng.spec.plans.len());
    for r in &bng.spec.plans {
        out.push(match api.get_opt(&r.name).await? {
            None => PlanState::NotFound(r.name.clone()),
            Some(p) => match Plan::validate(&r.name, &p.spec) {
                Ok(plan) => PlanState::Valid(plan),
                Err(err) => PlanState::Invalid {
                    name: r.name.clone(),
                    why: err.to_string(),
                },
            },
        });
    }
    let valid: Vec<Plan> = out
        .iter()
        .filter_map(|p| match p {
            PlanState::Valid(p) => Some(p.clone()),
            _ => None,
        })
        .collect();
    for clash in colliding_ids(&valid) {
        out.push(PlanState::Invalid {
            name: "plan ids".into(),
            why: clash,
        });
    }
    Ok(out)
}

async fn apply<K>(client: &Client, ns: &str, obj: &K) -> Result<(), kube::Error>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Serialize
        + DeserializeOwned
        + Clone
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let name = obj.meta().name.clone().unwrap_or_default();
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(obj),
    )
    .await?;
    Ok(())
}

/// Applies every owned object. `Ok(Some(why))` when the API server refused one as invalid:
/// bad input that retrying cannot fix, reported in status instead.
async fn apply_all(client: &Client, ns: &str, o: &Owned) -> Result<Option<String>, kube::Error> {
    let results = [
        (
            "ServiceAccount",
            apply(client, ns, &o.service_account).await,
        ),
        ("Role", apply(client, ns, &o.role).await),
        ("RoleBinding", apply(client, ns, &o.role_binding).await),
        ("ConfigMap", apply(client, ns, &o.config_map).await),
        ("Service", apply(client, ns, &o.service).await),
        ("StatefulSet", apply(client, ns, &o.control).await),
        ("Deployment", apply(client, ns, &o.dataplane).await),
    ];
    let mut refused = Vec::new();
    for (kind, r) in results {
        match r {
            Ok(()) => {}
            Err(kube::Error::Api(s)) if s.code == 422 || s.code == 400 => {
                refused.push(format!("{kind}: {}", s.message));
            }
            Err(err) => return Err(err),
        }
    }
    Ok((!refused.is_empty()).then(|| refused.join("; ")))
}

fn selector(bng: &str, component: &str) -> String {
    format!(
        "app.kubernetes.io/name=kbng,app.kubernetes.io/instance={bng},{COMPONENT_LABEL}={component}"
    )
}

async fn converge(bng: &Bng, ns: &str, ctx: &Context) -> Result<Action, ReconcileError> {
    let name = bng.name_any();
    let now = now_secs();
    let licence = licence_state(bng, ns, ctx, now).await?;
    let plans = plan_states(bng, ns, ctx).await?;
    let valid: Vec<Plan> = plans
        .iter()
        .filter_map(|p| match p {
            PlanState::Valid(p) => Some(p.clone()),
            _ => None,
        })
        .collect();
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    let nodes = nodes.list(&ListParams::default()).await?.items;
    let unsatisfiable = placement::unsatisfiable(&bng.spec.dataplane, &nodes);

    let owned = build::build(&Inputs {
        bng,
        plans: &valid,
        cap: licence.cap(),
        config: &ctx.workload,
    })?;
    let refused = apply_all(&ctx.client, ns, &owned).await?;

    let sts: Api<StatefulSet> = Api::namespaced(ctx.client.clone(), ns);
    let control_ready = sts
        .get_opt(&control_name(&name))
        .await?
        .and_then(|s| s.status)
        .and_then(|s| s.ready_replicas)
        .unwrap_or(0)
        >= 1;
    let deps: Api<Deployment> = Api::namespaced(ctx.client.clone(), ns);
    let dataplanes_ready = deps
        .get_opt(&dataplane_name(&name))
        .await?
        .and_then(|d| d.status)
        .and_then(|s| s.ready_replicas)
        .unwrap_or(0);
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    let mut dataplanes: Vec<_> = pods
        .list(&ListParams::default().labels(&selector(&name, build::dataplane::COMPONENT)))
        .await?
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(placement::dataplane_status)
        .collect();
    dataplanes.sort_by(|a, b| a.pod.cmp(&b.pod));

    let observed = Observed {
        generation: bng.metadata.generation,
        licence: &licence,
        plans: &plans,
        unsatisfiable,
        dataplanes,
        dataplanes_desired: bng.spec.dataplane.replicas,
        dataplanes_ready: u32::try_from(dataplanes_ready).unwrap_or(0),
        control_ready,
        aaa_mode: bng.spec.aaa.mode,
        pools: &bng.spec.pools,
        portal_url: &bng.spec.walled_garden.portal_url,
        now,
    };
    let previous = bng.status.as_ref();
    let mut status = compute(&observed, previous);
    if let Some(why) = &refused {
        refuse(&mut status, why, bng.metadata.generation, now);
    }
    if previous != Some(&status) {
        write_status(ctx, bng, ns, &status).await?;
        for t in transitions(previous, &status) {
            ctx.event(bng, t.warning, &t.reason, "Reconcile", t.note)
                .await;
        }
    }
    let is = |t: &str| condition(&status.conditions, t).is_some_and(|c| c.status == TRUE);
    let review = match &licence {
        LicenceState::Evaluated { verdict, .. } => verdict.review_at,
        _ => None,
    };
    Ok(Action::requeue(if is(gates::RECONCILING) {
        Duration::from_secs(10)
    } else if is(gates::STALLED) {
        Duration::from_secs(60)
    } else {
        let until_review = review
            .map(|at| (at.as_second() - now.as_second()).max(1) as u64 + 1)
            .unwrap_or(300);
        Duration::from_secs(until_review.min(300))
    }))
}

/// An object the API server refused: Stalled and not Ready, with its message.
fn refuse(status: &mut BngStatus, why: &str, generation: Option<i64>, now: Timestamp) {
    for (t, s) in [(gates::STALLED, TRUE), (gates::READY, FALSE)] {
        set_condition(
            &mut status.conditions,
            Condition {
                type_: t.into(),
                status: s.into(),
                reason: "ApplyRefused".into(),
                message: format!("the API server refused an owned object: {why}"),
                observed_generation: generation,
                last_transition_time: Time(now),
            },
        );
    }
}

async fn write_status(
    ctx: &Context,
    bng: &Bng,
    ns: &str,
    status: &BngStatus,
) -> Result<(), ReconcileError> {
    let api: Api<Bng> = Api::namespaced(ctx.client.clone(), ns);
    let body = serde_json::json!({
        "apiVersion": "kbng.dev/v1alpha1",
        "kind": "BNG",
        "status": status,
    });
    api.patch_status(
        &bng.name_any(),
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&body),
    )
    .await?;
    Ok(())
}

fn pod_ready(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none()
        && p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == TRUE))
}

/// One step of the drain; removes the finalizer when done or out of time.
async fn drain(bng: &Bng, ns: &str, ctx: &Context) -> Result<Action, ReconcileError> {
    let name = bng.name_any();
    let now = now_secs();
    let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    let pods: Vec<Pod> = pods_api
        .list(&ListParams::default().labels(&selector(&name, build::control::COMPONENT)))
        .await?
        .items
        .into_iter()
        .filter(pod_ready)
        .collect();
    let started = bng
        .annotations()
        .get(DRAIN_STARTED)
        .and_then(|s| s.parse::<Timestamp>().ok());
    let Some(started) = started else {
        if pods.is_empty() {
            ctx.event(
                bng,
                true,
                "DrainSkipped",
                "Drain",
                "no ready control pod to drain: sessions, if any, end without accounting stop"
                    .into(),
            )
            .await;
            return release(bng, ns, ctx).await;
        }
        ctx.event(
            bng,
            false,
            "Draining",
            "Drain",
            format!(
                "asked {} control pod(s) to drain sessions; waiting up to {}s",
                pods.len(),
                ctx.drain_timeout.as_secs()
            ),
        )
        .await;
        let mut annotations = std::collections::BTreeMap::new();
        annotations.insert(DRAIN_STARTED.to_string(), now.to_string());
        patch_meta(
            ctx,
            bng,
            ns,
            serde_json::json!({ "annotations": annotations }),
        )
        .await?;
        return Ok(Action::requeue(Duration::from_secs(1)));
    };
    let token = started.to_string();
    let mut acked = 0;
    for pod in &pods {
        let ann = pod.annotations();
        if ann.get(DRAINED) == Some(&token) {
            acked += 1;
        } else if ann.get(DRAIN_REQUESTED) != Some(&token) {
            pods_api
                .patch(
                    &pod.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(serde_json::json!({
                        "metadata": { "annotations": { DRAIN_REQUESTED: token } }
                    })),
                )
                .await?;
        }
    }
    let waited =
        Duration::from_secs(now.as_second().saturating_sub(started.as_second()).max(0) as u64);
    if acked == pods.len() {
        ctx.event(
            bng,
            false,
            "Drained",
            "Drain",
            format!("{acked} control pod(s) drained their sessions"),
        )
        .await;
        return release(bng, ns, ctx).await;
    }
    if waited >= ctx.drain_timeout {
        ctx.event(
            bng,
            true,
            "DrainTimedOut",
            "Drain",
            format!(
                "{acked} of {} control pod(s) acknowledged the drain within {}s; deleting anyway",
                pods.len(),
                ctx.drain_timeout.as_secs()
            ),
        )
        .await;
        return release(bng, ns, ctx).await;
    }
    Ok(Action::requeue(
        (ctx.drain_timeout - waited).min(Duration::from_secs(2)),
    ))
}

/// Removes the finalizer; garbage collection then deletes every owned object.
async fn release(bng: &Bng, ns: &str, ctx: &Context) -> Result<Action, ReconcileError> {
    let finalizers: Vec<&String> = bng
        .finalizers()
        .iter()
        .filter(|f| *f != FINALIZER)
        .collect();
    patch_meta(
        ctx,
        bng,
        ns,
        serde_json::json!({ "finalizers": finalizers }),
    )
    .await?;
    info!(bng = %bng.name_any(), namespace = ns, "finalizer removed");
    Ok(Action::await_change())
}
