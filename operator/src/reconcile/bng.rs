//! BNG: gather the licence verdict, the plans and the nodes; apply the owned objects; observe
//! the workloads and the control pod's report; write status and events. A finalizer drains
//! sessions before deletion.
//!
//! The control pod is read and driven through its HTTP API (`GET /v1/status`,
//! `POST /v1/sessions/drain`), each call bounded by [`crate::control_api::REQUEST_TIMEOUT`].
//! A control that does not answer is a `ControlReporting=False` condition with the reason,
//! and the reconcile succeeds: no error, no tight retry.
//!
//! Drain: on deletion the operator asks the control to release every session, then polls its
//! status until it holds none, at most `--drain-timeout`, and lets the BNG go either way,
//! saying in an event what was left. The start time is kept in an annotation on the BNG, so
//! an operator restart does not restart the wait.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{
    ConfigMap, Node, PersistentVolumeClaim, Pod, Service, ServiceAccount,
};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
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
use crate::config::SessionStore;
use crate::control_api::{self, ControlReport};
use crate::placement;
use crate::plan::{Plan, colliding_ids};
use crate::quantity;
use crate::status::{
    ClaimView, ControlView, LicenceState, Observed, PlanState, StoreView, compute, transitions,
};

pub const FINALIZER: &str = "kbng.dev/drain";
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
        .owns(api::<ConfigMap>(client, namespace), owned.clone())
        .owns(api::<Service>(client, namespace), owned.clone())
        .owns(api::<ServiceAccount>(client, namespace), owned.clone())
        .owns(api::<Role>(client, namespace), owned.clone())
        .owns(api::<RoleBinding>(client, namespace), owned.clone())
        .owns(api::<NetworkPolicy>(client, namespace), owned.clone())
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

/// The verdict on the BNG's Licence, and the Licence itself for its control pods (which
/// verify it themselves).
async fn licence_state(
    bng: &Bng,
    ns: &str,
    ctx: &Context,
    now: Timestamp,
) -> Result<(LicenceState, Option<Licence>), kube::Error> {
    let Some(r) = &bng.spec.licence_ref else {
        return Ok((LicenceState::NotReferenced, None));
    };
    let api: Api<Licence> = Api::namespaced(ctx.client.clone(), ns);
    Ok(match api.get_opt(&r.name).await? {
        None => (LicenceState::NotFound(r.name.clone()), None),
        // Evaluated here rather than read from the Licence's status: the verdict is a pure
        // function of the spec, the key and the clock, and a status could be stale.
        Some(lic) => (
            LicenceState::Evaluated {
                name: r.name.clone(),
                verdict: evaluate(&lic.spec, &ctx.licence_key, now),
            },
            Some(lic),
        ),
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
        (
            "Service (dataplane)",
            apply(client, ns, &o.dataplane_service).await,
        ),
        (
            "StatefulSet (dataplane)",
            apply(client, ns, &o.dataplane).await,
        ),
        (
            "NetworkPolicy (control)",
            apply(client, ns, &o.control_policy).await,
        ),
        (
            "NetworkPolicy (dataplane)",
            apply(client, ns, &o.dataplane_policy).await,
        ),
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

/// Asks for `needed` on every session-store claim of the BNG's control that requests less.
/// The API server accepts it only for a bound claim whose StorageClass allows expansion; a
/// refusal is reported in status (the claim template cannot change, see
/// `build::control::keep_claim_templates`), not retried as an error.
async fn grow_store_claims(
    client: &Client,
    ns: &str,
    bng: &str,
    needed: String,
) -> Result<StoreView, kube::Error> {
    let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
    let found = api
        .list(&ListParams::default().labels(&selector(bng, build::control::COMPONENT)))
        .await?;
    let need = quantity::bytes(&needed).unwrap_or(0);
    let storage = |m: Option<&std::collections::BTreeMap<String, Quantity>>| {
        m.and_then(|m| m.get("storage")).map(|q| q.0.clone())
    };
    let mut claims = Vec::new();
    for pvc in found.items {
        if pvc.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let mut claim = ClaimView {
            name: pvc.name_any(),
            requested: storage(
                pvc.spec
                    .as_ref()
                    .and_then(|s| s.resources.as_ref())
                    .and_then(|r| r.requests.as_ref()),
            )
            .unwrap_or_default(),
            capacity: storage(pvc.status.as_ref().and_then(|s| s.capacity.as_ref())),
            refused: None,
        };
        if quantity::bytes(&claim.requested).is_some_and(|b| b < need) {
            let body = serde_json::json!({
                "spec": {"resources": {"requests": {"storage": &needed}}}
            });
            let params = PatchParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..PatchParams::default()
            };
            match api.patch(&claim.name, &params, &Patch::Merge(&body)).await {
                Ok(_) => {
                    info!(claim = %claim.name, from = %claim.requested, to = %needed, "session-store claim expansion requested");
                    claim.requested = needed.clone();
                }
                Err(kube::Error::Api(s)) if matches!(s.code, 400 | 403 | 422) => {
                    // The first line says why; an immutable-spec refusal appends a diff.
                    claim.refused = Some(s.message.lines().next().unwrap_or_default().into());
                }
                Err(err) => return Err(err),
            }
        }
        claims.push(claim);
    }
    claims.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(StoreView::Claims { needed, claims })
}

fn selector(bng: &str, component: &str) -> String {
    format!(
        "app.kubernetes.io/name=kbng,app.kubernetes.io/instance={bng},{COMPONENT_LABEL}={component}"
    )
}

async fn converge(bng: &Bng, ns: &str, ctx: &Context) -> Result<Action, ReconcileError> {
    let name = bng.name_any();
    // The BNG's key in the operator's gauges (`namespace/name`).
    let key = format!("{ns}/{name}");
    let now = now_secs();
    let (licence, signed) = licence_state(bng, ns, ctx, now).await?;
    ctx.set_bng_licence(&key, Some(&licence));
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

    let mut owned = build::build(&Inputs {
        bng,
        plans: &valid,
        licence: signed.as_ref(),
        config: &ctx.workload,
    })?;
    let sts: Api<StatefulSet> = Api::namespaced(ctx.client.clone(), ns);
    let existing = sts.get_opt(&control_name(&name)).await?;
    build::control::keep_claim_templates(&mut owned.control, existing.as_ref());
    let token = super::api_token::ensure(&ctx.client, ns, bng).await?;
    let refused = apply_all(&ctx.client, ns, &owned).await?;
    let capacity = bng.spec.dataplane.session_capacity;
    let store = match &ctx.workload.session_store {
        SessionStore::EmptyDir => StoreView::EmptyDir,
        SessionStore::Pvc { size, .. } => {
            let needed = build::control::store_size(capacity, size);
            grow_store_claims(&ctx.client, ns, &name, needed).await?
        }
    };

    let control_ready = sts
        .get_opt(&control_name(&name))
        .await?
        .and_then(|s| s.status)
        .and_then(|s| s.ready_replicas)
        .unwrap_or(0)
        >= 1;
    let dataplanes_ready = sts
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
    let control = match control_report(ctx, ns, &name, token.as_deref()).await {
        Ok(report) => {
            merge_report(&mut dataplanes, &report);
            ctx.set_plan_sessions(&key, Some(report.by_plan.clone()));
            ControlView::Reported {
                sessions: report.sessions,
                links: report
                    .dataplanes
                    .iter()
                    .map(|d| {
                        (
                            d.id.clone().unwrap_or_else(|| d.address.clone()),
                            d.links_up,
                        )
                    })
                    .collect(),
                pools: report.pools.clone(),
                subscribers: report.subscribers.clone(),
            }
        }
        Err(why) => ControlView::Unreachable(why),
    };

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
        subscribers_configured: bng.spec.aaa.subscribers.is_some(),
        pools: &bng.spec.pools,
        portal_url: &bng.spec.walled_garden.portal_url,
        control: &control,
        store: &store,
        session_capacity: capacity,
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
        // Session counts are polled: a reachable control every 30 s; one that did not answer
        // every 15 s, so a control that comes up is seen soon (each try costs at most the
        // request timeout, and an unchanged status is not rewritten).
        let poll = match control {
            ControlView::Reported { .. } => 30,
            ControlView::Unreachable(_) => 15,
        };
        Duration::from_secs(until_review.min(poll))
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

/// Reads the control pod's `/v1/status`; the error says what went wrong, for a condition.
/// `token` is the control API's, from [`super::api_token::ensure`] in the same reconcile.
async fn control_report(
    ctx: &Context,
    ns: &str,
    bng: &str,
    token: Option<&str>,
) -> Result<ControlReport, String> {
    let url = ctx.control_urls.url(ns, bng);
    control_api::call(
        hyper::Method::GET,
        &url,
        "/v1/status",
        token,
        control_api::REQUEST_TIMEOUT,
    )
    .await
    .map(|v| control_api::parse_status(&v))
    .map_err(|e| e.to_string())
}

/// Copies what the control learnt from each dataplane into the entry of its pod. The
/// operator starts each dataplane with `--dataplane-id` = its pod name; a control that only
/// knows an address is matched by the pod's DNS name in it.
pub fn merge_report(dataplanes: &mut [kbng_crds::bng::DataplaneStatus], report: &ControlReport) {
    for d in dataplanes.iter_mut() {
        let found = report.dataplanes.iter().find(|r| {
            r.id.as_deref() == Some(d.pod.as_str())
                || r.address
                    .strip_prefix("http://")
                    .is_some_and(|a| a.starts_with(&format!("{}.", d.pod)))
        });
        if let Some(r) = found {
            d.connected = r.connected;
            d.numa_node = r.numa_node;
            d.cores = r.cores.clone();
            d.pci_addresses = r.devices.clone();
        }
    }
}

fn tally_text(t: &control_api::SessionTally) -> String {
    format!(
        "{} sessions ({} active, {} captive)",
        t.total, t.active, t.captive
    )
}

/// One step of the drain; removes the finalizer when the control holds no session, or when
/// out of time.
async fn drain(bng: &Bng, ns: &str, ctx: &Context) -> Result<Action, ReconcileError> {
    let name = bng.name_any();
    let now = now_secs();
    let url = ctx.control_urls.url(ns, &name);
    let started = bng
        .annotations()
        .get(DRAIN_STARTED)
        .and_then(|s| s.parse::<Timestamp>().ok());
    let Some(started) = started else {
        ctx.event(
            bng,
            false,
            "Draining",
            "Drain",
            format!(
                "asking the control ({url}) to release every session; waiting up to {}s",
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
    // Asked again on every step: idempotent, and it also ends a session that was being set
    // up while the previous request ran.
    let t = control_api::REQUEST_TIMEOUT;
    let token = super::api_token::read(&ctx.client, ns, &bng.name_any()).await;
    let token = token.as_deref();
    let asked = control_api::call(hyper::Method::POST, &url, "/v1/sessions/drain", token, t).await;
    let left = match asked {
        Ok(_) => control_api::call(hyper::Method::GET, &url, "/v1/status", token, t)
            .await
            .map(|v| control_api::parse_status(&v).sessions),
        Err(e) => Err(e),
    };
    if let Ok(Some(tally)) = &left
        && tally.total == 0
    {
        ctx.event(
            bng,
            false,
            "Drained",
            "Drain",
            "the control reports no session left".into(),
        )
        .await;
        return release(bng, ns, ctx).await;
    }
    let waited =
        Duration::from_secs(now.as_second().saturating_sub(started.as_second()).max(0) as u64);
    if waited >= ctx.drain_timeout {
        let what = match &left {
            Ok(Some(t)) => format!("{} left", tally_text(t)),
            Ok(None) => "the control does not report session counts; sessions left unknown".into(),
            Err(e) => format!("the control did not answer ({e}); sessions left unknown"),
        };
        ctx.event(
            bng,
            true,
            "DrainTimedOut",
            "Drain",
            format!(
                "drain not finished within {}s: {what}; deleting anyway",
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
    let key = format!("{ns}/{}", bng.name_any());
    ctx.set_plan_sessions(&key, None);
    ctx.set_bng_licence(&key, None);
    info!(bng = %bng.name_any(), namespace = ns, "finalizer removed");
    Ok(Action::await_change())
}
