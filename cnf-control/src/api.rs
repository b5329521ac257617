//! The operator API, HTTP/JSON (used by `kbngctl` and the end-to-end tests). No endpoint returns
//! every session at once: listings are pages of at most 1,000 ordered by id.
//!
//! | method | path | what |
//! |---|---|---|
//! | GET | /v1/sessions?after=&limit=&state=&mac=&ip=&captive=&plan=&outerVlan=&innerVlan= | a page; `nextAfter` 0 at the end |
//! | GET | /v1/sessions/{id} | one session |
//! | GET | /v1/sessions/{id}/counters | its dataplane counters, and since when they count |
//! | DELETE | /v1/sessions/{id} | release it (locally and in the dataplane) |
//! | PUT | /v1/sessions/{id}/plan | `{"plan": name}`: change its plan |
//! | POST | /v1/sessions/drain?max= | release up to `max` (default all), in chunks between which DHCP is served |
//! | GET | /v1/watch | NDJSON stream of state changes |
//! | GET | /v1/status | sessions {total, active, captive}, sessionsByPlan, licence, dataplanes' identities, counters |
//! | GET | /v1/plans | plans with rates and active sessions on each |
//! | GET | /v1/dataplanes | connection, boot id, last reconcile (leaks, orphans) |
//! | GET | /v1/dataplanes/{i}/counters | that dataplane's node counters |
//! | GET | /v1/audit | a fresh comparison with every dataplane (leaks, orphans) |
//! | POST | /v1/subscribers?format=csv\|json | bulk import; a JSON object adds one record |
//! | GET | /v1/subscribers?after=&limit= | a page of records; `next` (a cursor) absent at the end |
//! | GET | /v1/subscribers/{mac} | the record of a MAC |
//! | DELETE | /v1/subscribers/{mac} | remove one |
//! | GET, DELETE | /v1/subscribers/option82?circuitId=&remoteId= | the same for a record keyed by option 82 |
//! | GET | /v1/subscribers/file/held?after=&limit= | a page of the records a held subscribers file would remove |
//! | POST | /v1/subscribers/file/accept | put in force a subscribers file held for the records it removes |
//!
//! HTTP/JSON rather than gRPC: operators and scripts reach it with curl, and a watch is a plain
//! chunked response. `cnf-control/API.md` documents the fields clients rely on.

pub mod auth;
mod counters;
mod status;
mod subscribers;

use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio_stream::wrappers::BroadcastStream;

use crate::config::Config;
use crate::core::aaa::parse_mac;
use crate::core::engine::PlanChangeError;
use crate::dataplane::{DpCmd, DpStatus};
use crate::service::{ApiCmd, Filter, WatchEvent};

/// Largest page.
pub const PAGE_MAX: usize = 1000;

#[derive(Clone, Debug)]
pub struct ApiState {
    pub engine: mpsc::Sender<ApiCmd>,
    pub dps: Vec<mpsc::UnboundedSender<DpCmd>>,
    pub dp_status: Vec<Arc<Mutex<DpStatus>>>,
    pub dp_addrs: Vec<crate::dataplane::Target>,
    pub watch: broadcast::Sender<WatchEvent>,
    /// Plans and their rates, the default plan, the dataplanes' addresses.
    pub cfg: Arc<Config>,
}

type ApiError = (StatusCode, Json<serde_json::Value>);
type ApiResult = Result<Response, ApiError>;

fn err(code: StatusCode, msg: impl Into<String>) -> ApiError {
    (code, Json(json!({ "error": msg.into() })))
}

async fn ask<T>(s: &ApiState, f: impl FnOnce(oneshot::Sender<T>) -> ApiCmd) -> Result<T, ApiError> {
    let (tx, rx) = oneshot::channel();
    s.engine
        .send(f(tx))
        .await
        .map_err(|_| err(StatusCode::SERVICE_UNAVAILABLE, "engine stopped"))?;
    rx.await
        .map_err(|_| err(StatusCode::SERVICE_UNAVAILABLE, "engine stopped"))
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    after: Option<u64>,
    limit: Option<usize>,
    state: Option<String>,
    mac: Option<String>,
    ip: Option<Ipv4Addr>,
    captive: Option<bool>,
    /// A plan's name.
    plan: Option<String>,
    #[serde(rename = "outerVlan")]
    outer_vlan: Option<u16>,
    #[serde(rename = "innerVlan")]
    inner_vlan: Option<u16>,
}

async fn list(State(s): State<ApiState>, Query(q): Query<ListQuery>) -> ApiResult {
    let limit = q.limit.unwrap_or(100).clamp(1, PAGE_MAX);
    let mac = match q.mac.as_deref() {
        Some(m) => Some(parse_mac(m).ok_or_else(|| err(StatusCode::BAD_REQUEST, "bad mac"))?),
        None => None,
    };
    let plan_id = match q.plan.as_deref() {
        Some(name) => Some(
            s.cfg
                .plans
                .iter()
                .find(|p| p.name == name)
                .map(|p| p.id)
                .ok_or_else(|| err(StatusCode::BAD_REQUEST, format!("unknown plan {name:?}")))?,
        ),
        None => None,
    };
    // A misspelt state would select nothing and look like an empty BNG.
    if let Some(st) = q.state.as_deref()
        && !crate::core::session::STATE_NAMES.contains(&st)
    {
        return Err(err(
            StatusCode::BAD_REQUEST,
            format!(
                "unknown state {st:?}: one of {}",
                crate::core::session::STATE_NAMES.join(", ")
            ),
        ));
    }
    let filter = Filter {
        state: q.state,
        mac,
        ip: q.ip,
        captive: q.captive,
        plan_id,
        outer_vlan: q.outer_vlan,
        inner_vlan: q.inner_vlan,
    };
    let (page, next) = ask(&s, |reply| ApiCmd::List {
        after: q.after.unwrap_or(0),
        limit,
        filter,
        reply,
    })
    .await?;
    Ok(Json(json!({ "sessions": page, "nextAfter": next })).into_response())
}

async fn get_one(State(s): State<ApiState>, Path(id): Path<u64>) -> ApiResult {
    match ask(&s, |reply| ApiCmd::Get { id, reply }).await? {
        Some(v) => Ok(Json(v).into_response()),
        None => Err(err(StatusCode::NOT_FOUND, format!("no session {id}"))),
    }
}

async fn release(State(s): State<ApiState>, Path(id): Path<u64>) -> ApiResult {
    if ask(&s, |reply| ApiCmd::Release { id, reply }).await? {
        Ok(Json(json!({ "released": id })).into_response())
    } else {
        Err(err(StatusCode::NOT_FOUND, format!("no session {id}")))
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanBody {
    plan: String,
}

async fn change_plan(
    State(s): State<ApiState>,
    Path(id): Path<u64>,
    Json(b): Json<PlanBody>,
) -> ApiResult {
    ask(&s, |reply| ApiCmd::ChangePlan {
        id,
        plan: b.plan,
        reply,
    })
    .await?
    .map_err(|e| {
        let status = match e {
            PlanChangeError::UnknownPlan(_) => StatusCode::BAD_REQUEST,
            PlanChangeError::NoSession(_) => StatusCode::NOT_FOUND,
        };
        err(status, e.to_string())
    })?;
    Ok(Json(json!({ "id": id })).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DrainQuery {
    max: Option<usize>,
}

/// Sessions one engine call of a drain disconnects. Draining 300,000 sessions in one call held
/// the engine's thread for 1.05 s (engine_dora bench), and with it the DHCP of everyone else;
/// chunks of 10,000 took up to 66 ms each, longer than a punt ring lasts at full DHCP load.
const DRAIN_CHUNK: usize = 2_000;

async fn drain(State(s): State<ApiState>, Query(q): Query<DrainQuery>) -> ApiResult {
    let mut left = q.max.unwrap_or(usize::MAX);
    let (mut after, mut before) = (0, None);
    let remaining = loop {
        let asked = left.min(DRAIN_CHUNK);
        let step = ask(&s, |reply| ApiCmd::Drain {
            after,
            max: asked,
            reply,
        })
        .await?;
        before.get_or_insert(step.before);
        left -= step.started;
        after = step.last;
        if step.started < asked || left == 0 {
            break step.remaining;
        }
    };
    Ok(Json(json!({ "before": before.unwrap_or(0), "remaining": remaining })).into_response())
}

async fn dataplanes(State(s): State<ApiState>) -> ApiResult {
    let v: Vec<DpStatus> = s
        .dp_status
        .iter()
        .map(|m| m.lock().map(|g| g.clone()).unwrap_or_default())
        .collect();
    Ok(Json(v).into_response())
}

async fn audit(State(s): State<ApiState>) -> ApiResult {
    let mut out = Vec::new();
    for (i, tx) in s.dps.iter().enumerate() {
        let desired = ask(&s, |reply| ApiCmd::Desired {
            dataplane: i as u32,
            reply,
        })
        .await?;
        let (rtx, rrx) = oneshot::channel();
        tx.send(DpCmd::Audit {
            desired,
            reply: rtx,
        })
        .map_err(|_| err(StatusCode::SERVICE_UNAVAILABLE, "dataplane task stopped"))?;
        let d = rrx
            .await
            .map_err(|_| err(StatusCode::SERVICE_UNAVAILABLE, "dataplane task stopped"))?
            .map_err(|e| err(StatusCode::SERVICE_UNAVAILABLE, e))?;
        out.push(json!({ "dataplane": i, "diff": d }));
    }
    Ok(Json(out).into_response())
}

async fn nodes(State(s): State<ApiState>, Path(i): Path<usize>) -> ApiResult {
    let addr = s
        .dp_addrs
        .get(i)
        .ok_or_else(|| err(StatusCode::NOT_FOUND, "no such dataplane"))?;
    let mut c = crate::dataplane::connect(addr)
        .await
        .map_err(|e| err(StatusCode::SERVICE_UNAVAILABLE, e.to_string()))?;
    let r = c
        .get_counters(kbng_api::v1::GetCountersRequest {
            session_ids: vec![],
            include_nodes: true,
            include_workers: true,
            ..Default::default()
        })
        .await
        .map_err(|e| err(StatusCode::BAD_GATEWAY, e.message().to_string()))?
        .into_inner();
    let mut nodes: Vec<_> = r
        .nodes
        .iter()
        .map(|n| json!({ "node": n.node, "reason": n.reason, "value": n.value }))
        .collect();
    // The workers count transmit drops apart from the nodes; the KbngDataplaneTxDrops
    // alert's series (node port-tx) is their sum over workers, so the row is made the same.
    let tx_full: u64 = r.workers.iter().map(|w| w.tx_dropped).sum();
    nodes.push(json!({ "node": "port-tx", "reason": "tx queue full", "value": tx_full }));
    Ok(Json(json!({ "nodes": nodes })).into_response())
}

async fn watch(State(s): State<ApiState>) -> Response {
    let stream = BroadcastStream::new(s.watch.subscribe()).map(|r| {
        let line = match r {
            Ok(ev) => serde_json::to_string(&ev).unwrap_or_default(),
            Err(e) => json!({ "lagged": e.to_string() }).to_string(),
        };
        Ok::<_, std::convert::Infallible>(format!("{line}\n"))
    });
    Response::builder()
        .header("content-type", "application/x-ndjson")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// The readiness probe's path: 200 once the engine task answers a query. Outside the token
/// check (the kubelet holds no secret) and says nothing about sessions.
pub const READY_PATH: &str = "/v1/ready";

async fn ready(State(s): State<ApiState>) -> ApiResult {
    ask(&s, |reply| ApiCmd::List {
        after: 0,
        limit: 1,
        filter: Filter::default(),
        reply,
    })
    .await?;
    Ok(Json(json!({ "ready": true })).into_response())
}

pub fn router(state: ApiState) -> Router {
    Router::new()
        .route("/v1/sessions", get(list))
        .route("/v1/sessions/drain", post(drain))
        .route("/v1/sessions/{id}", get(get_one).delete(release))
        .route("/v1/sessions/{id}/counters", get(counters::counters))
        .route("/v1/sessions/{id}/plan", put(change_plan))
        .route("/v1/watch", get(watch))
        .route("/v1/status", get(status::status))
        .route("/v1/plans", get(status::plans))
        .route("/v1/dataplanes", get(dataplanes))
        .route("/v1/dataplanes/{i}/counters", get(nodes))
        .route("/v1/audit", get(audit))
        .route(
            "/v1/subscribers",
            post(subscribers::import).get(subscribers::list).layer(
                axum::extract::DefaultBodyLimit::max(subscribers::IMPORT_MAX_BYTES),
            ),
        )
        .route(
            "/v1/subscribers/option82",
            get(subscribers::show_opt82).delete(subscribers::remove_opt82),
        )
        .route(
            "/v1/subscribers/file/accept",
            post(subscribers::accept_file),
        )
        .route("/v1/subscribers/file/held", get(subscribers::held))
        .route(
            "/v1/subscribers/{mac}",
            get(subscribers::show_mac).delete(subscribers::remove_mac),
        )
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::require_token,
        ))
        .route(READY_PATH, get(ready))
        .with_state(state)
}
