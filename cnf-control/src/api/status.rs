//! `GET /v1/status` and `GET /v1/plans`: what the operator copies into the BNG status and what
//! `kbngctl` shows. Field names are a contract (see `cnf-control/API.md`).
//!
//! Session counts are tallied by walking the session listing page by page (as any client
//! would), not by a dedicated engine query: the engine task stays free between pages, so a
//! status poll during an in-rush never holds up DHCP for the time of a full scan. The price is
//! that the counts are not one atomic snapshot while sessions change.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::response::IntoResponse;
use serde::Serialize;
use serde_json::json;

use super::{ApiResult, ApiState, PAGE_MAX, ask};
use crate::service::{ApiCmd, Filter, now_ns};

/// How long a status waits for one dataplane's identity.
const IDENTITY_TIMEOUT: Duration = Duration::from_secs(2);

/// Bound sessions by admission and plan.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct Tally {
    /// Every session the control holds, in any state.
    pub total: usize,
    /// Bound and not captive.
    pub active: usize,
    /// Bound in the walled garden (unknown subscribers and those beyond the cap).
    pub captive: usize,
    /// Active sessions by plan id.
    pub by_plan_id: BTreeMap<u32, usize>,
}

pub(super) async fn tally(s: &ApiState) -> Result<Tally, super::ApiError> {
    let mut t = Tally::default();
    let mut after = 0;
    loop {
        let (page, next) = ask(s, |reply| ApiCmd::List {
            after,
            limit: PAGE_MAX,
            filter: Filter::default(),
            reply,
        })
        .await?;
        t.total += page.len();
        for v in &page {
            match (v.captive, v.plan_id) {
                (Some(true), _) => t.captive += 1,
                (Some(false), Some(p)) => {
                    t.active += 1;
                    *t.by_plan_id.entry(p).or_default() += 1;
                }
                (Some(false), None) => t.active += 1,
                (None, _) => {}
            }
        }
        if next == 0 {
            return Ok(t);
        }
        after = next;
    }
}

/// Active sessions by plan name; every configured plan appears, with 0 when unused.
fn by_plan_name(s: &ApiState, t: &Tally) -> BTreeMap<String, usize> {
    let mut out: BTreeMap<String, usize> =
        s.cfg.plans.iter().map(|p| (p.name.clone(), 0)).collect();
    for (id, n) in &t.by_plan_id {
        let name = s
            .cfg
            .plans
            .iter()
            .find(|p| p.id == *id)
            .map_or_else(|| format!("plan-{id}"), |p| p.name.clone());
        *out.entry(name).or_default() += n;
    }
    out
}

/// What a dataplane says of itself: NUMA node, cores, ports with their PCI or vdev names.
async fn identity(target: &crate::dataplane::Target) -> Result<serde_json::Value, String> {
    let addr = &target.addr;
    let ask = async {
        let mut c = crate::dataplane::connect(target)
            .await
            .map_err(|e| format!("connect {addr}: {e}"))?;
        c.get_identity(kbng_api::v1::GetIdentityRequest {})
            .await
            .map(tonic::Response::into_inner)
            .map_err(|e| format!("GetIdentity {addr}: {}", e.message()))
    };
    let id = tokio::time::timeout(IDENTITY_TIMEOUT, ask)
        .await
        .map_err(|_| format!("GetIdentity {addr}: no answer in {IDENTITY_TIMEOUT:?}"))??;
    let ports: Vec<_> = id
        .ports
        .iter()
        .map(|p| {
            json!({
                "index": p.index,
                "role": kbng_api::v1::PortRole::try_from(p.role)
                    .map_or("unknown", |r| r.as_str_name()),
                "deviceName": p.device_name,
                "busAddress": p.bus_address,
                "numaNode": p.numa_node,
                "linkUp": p.link_up,
                "speedMbps": p.speed_mbps,
            })
        })
        .collect();
    Ok(json!({
        "dataplaneId": id.dataplane_id,
        "version": id.version,
        "bootId": id.boot_id,
        "startedUnixNs": id.started_unix_ns,
        "numaNode": id.numa_node,
        "mainCore": id.main_core,
        "workerCores": id.worker_cores,
        "ports": ports,
        "sessionCapacity": id.session_capacity,
        "sessions": id.sessions,
        "warnings": id.warnings,
    }))
}

async fn dataplanes(s: &ApiState) -> Vec<serde_json::Value> {
    let asks = s.dp_addrs.iter().map(identity);
    let ids = futures::future::join_all(asks).await;
    ids.into_iter()
        .enumerate()
        .map(|(i, id)| {
            let connected = s
                .dp_status
                .get(i)
                .and_then(|m| m.lock().ok().map(|g| g.connected))
                .unwrap_or(false);
            let (identity, error) = match id {
                Ok(v) => (v, None),
                Err(e) => (serde_json::Value::Null, Some(e)),
            };
            json!({
                "index": i,
                "address": s.dp_addrs.get(i).map(|t| &t.addr),
                "connected": connected,
                "identity": identity,
                "error": error,
            })
        })
        .collect()
}

pub(super) async fn status(State(s): State<ApiState>) -> ApiResult {
    let v = ask(&s, |reply| ApiCmd::Status { reply }).await?;
    let t = tally(&s).await?;
    let licence = v.cap.report(now_ns());
    let mut out = serde_json::to_value(&v).unwrap_or_default();
    if let Some(o) = out.as_object_mut() {
        o.insert(
            "sessions".into(),
            json!({ "total": t.total, "active": t.active, "captive": t.captive }),
        );
        o.insert("sessionsByPlan".into(), json!(by_plan_name(&s, &t)));
        o.insert("licence".into(), json!(licence));
        o.insert("dataplanes".into(), json!(dataplanes(&s).await));
    }
    Ok(Json(out).into_response())
}

pub(super) async fn plans(State(s): State<ApiState>) -> ApiResult {
    let t = tally(&s).await?;
    let default_plan = s.cfg.engine.default_plan;
    let plans: Vec<_> = s
        .cfg
        .plans
        .iter()
        .map(|p| {
            json!({
                "name": p.name,
                "id": p.id,
                "upstream": p.upstream,
                "downstream": p.downstream,
                "default": p.id == default_plan,
                "sessions": t.by_plan_id.get(&p.id).copied().unwrap_or(0),
            })
        })
        .collect();
    Ok(Json(json!({ "plans": plans, "captive": t.captive })).into_response())
}
