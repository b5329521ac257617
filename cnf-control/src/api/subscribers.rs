//! The subscriber store's routes: bulk import, a record by its MAC or its option 82
//! identity, removal, the store listed in pages (`crate::core::subscriber_page`), and a
//! subscribers file held for what it removes (`crate::subscribers_guard`): its removals
//! listed, its acceptance.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::Deserialize;
use serde_json::json;

use super::{ApiResult, ApiState, PAGE_MAX, ask, err};
use crate::core::aaa::opt82_key;
use crate::core::subscriber_page::RecordKey;
use crate::service::ApiCmd;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImportQuery {
    format: Option<String>,
}

pub(super) async fn import(
    State(s): State<ApiState>,
    Query(q): Query<ImportQuery>,
    body: String,
) -> ApiResult {
    let json = match q.format.as_deref() {
        None | Some("csv") => false,
        Some("json") => true,
        Some(f) => {
            return Err(err(
                StatusCode::BAD_REQUEST,
                format!("format {f:?}: want csv or json"),
            ));
        }
    };
    // One record (a JSON object) is an import of one, with the same validation.
    let body = if json && body.trim_start().starts_with('{') {
        format!("[{body}]")
    } else {
        body
    };
    // Parsed here, once, off the engine task (which serves DHCP meanwhile).
    let (rows, errors) = crate::core::aaa::parse(&body, json);
    // Rows naming a plan or a pool the control does not serve, or asking for an address in
    // none of its pools: the store would accept them and admit those subscribers on no plan,
    // or in the walled garden on every attempt. Syntax errors are left to the store's checks.
    let unknown = crate::core::aaa::unresolved(&rows, &s.cfg.engine);
    if !unknown.is_empty() {
        return Err((StatusCode::BAD_REQUEST, Json(json!({ "errors": unknown }))));
    }
    match ask(&s, |reply| ApiCmd::ImportSubscribers {
        rows,
        errors,
        reply,
    })
    .await?
    {
        Ok(n) => Ok(Json(json!({ "imported": n })).into_response()),
        Err(errors) => Err((StatusCode::BAD_REQUEST, Json(json!({ "errors": errors })))),
    }
}

/// The largest subscriber import. axum's default of 2 MiB refused a CSV of 100,000 MAC rows
/// (about 2.5 MB); this takes some 2,000,000 such rows, or 100,000 with long option 82
/// identities, and bounds what one request can make the control buffer.
pub(super) const IMPORT_MAX_BYTES: usize = 64 << 20;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    after: Option<String>,
    limit: Option<usize>,
}

impl ListQuery {
    fn after(&self) -> Result<Option<RecordKey>, super::ApiError> {
        match self.after.as_deref() {
            None | Some("") => Ok(None),
            Some(c) => RecordKey::from_cursor(c).map(Some).ok_or_else(|| {
                err(
                    StatusCode::BAD_REQUEST,
                    format!("after {c:?}: not a cursor this API gave"),
                )
            }),
        }
    }

    fn limit(&self) -> usize {
        self.limit.unwrap_or(100).clamp(1, PAGE_MAX)
    }
}

/// A page: `{"subscribers": [...], "next": cursor}`, `next` absent after the last.
pub(super) async fn list(State(s): State<ApiState>, Query(q): Query<ListQuery>) -> ApiResult {
    let (after, limit) = (q.after()?, q.limit());
    let (records, next) = ask(&s, |reply| ApiCmd::ListSubscribers {
        after,
        limit,
        reply,
    })
    .await?;
    let mut body = json!({ "subscribers": records });
    if let Some(k) = next {
        body["next"] = k.cursor().into();
    }
    Ok(Json(body).into_response())
}

fn mac_key(mac: &str) -> Result<RecordKey, super::ApiError> {
    RecordKey::mac(mac).ok_or_else(|| err(StatusCode::BAD_REQUEST, format!("bad MAC {mac:?}")))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Opt82Query {
    circuit_id: Option<String>,
    remote_id: Option<String>,
}

fn opt82(q: &Opt82Query) -> Result<RecordKey, super::ApiError> {
    if q.circuit_id.is_none() && q.remote_id.is_none() {
        return Err(err(
            StatusCode::BAD_REQUEST,
            "give circuitId, remoteId or both (the record's exact option 82 identity)",
        ));
    }
    Ok(RecordKey::Opt82(opt82_key(
        q.circuit_id.as_deref(),
        q.remote_id.as_deref(),
    )))
}

async fn show(s: ApiState, key: RecordKey) -> ApiResult {
    match ask(&s, |reply| ApiCmd::ShowSubscriber { key, reply }).await? {
        Some(rec) => Ok(Json(rec).into_response()),
        None => Err(err(StatusCode::NOT_FOUND, "no such subscriber")),
    }
}

async fn remove(s: ApiState, key: RecordKey) -> ApiResult {
    if ask(&s, |reply| ApiCmd::RemoveSubscriber { key, reply }).await? {
        Ok(Json(json!({ "removed": true })).into_response())
    } else {
        Err(err(StatusCode::NOT_FOUND, "no such subscriber"))
    }
}

pub(super) async fn show_mac(State(s): State<ApiState>, Path(mac): Path<String>) -> ApiResult {
    show(s, mac_key(&mac)?).await
}

pub(super) async fn remove_mac(State(s): State<ApiState>, Path(mac): Path<String>) -> ApiResult {
    remove(s, mac_key(&mac)?).await
}

pub(super) async fn show_opt82(
    State(s): State<ApiState>,
    Query(q): Query<Opt82Query>,
) -> ApiResult {
    show(s, opt82(&q)?).await
}

pub(super) async fn remove_opt82(
    State(s): State<ApiState>,
    Query(q): Query<Opt82Query>,
) -> ApiResult {
    remove(s, opt82(&q)?).await
}

/// The held content of the subscribers file in force (`crate::subscribers_guard`): 409 when
/// none is held, or when the file's present content is rejected (it is not the held one).
pub(super) async fn accept_file(State(s): State<ApiState>) -> ApiResult {
    match ask(&s, |reply| ApiCmd::AcceptSubscribersFile { reply }).await? {
        Ok(a) => Ok(Json(a).into_response()),
        Err(why) => Err(err(StatusCode::CONFLICT, why)),
    }
}

/// A page of the records in force that the held subscribers file lacks: `{"removes": n,
/// "subscribers": [...], "next": cursor}`; a page may be short while `next` is there (the
/// control looks at a bounded number of records per page). 404 when nothing is held.
pub(super) async fn held(State(s): State<ApiState>, Query(q): Query<ListQuery>) -> ApiResult {
    let (after, limit) = (q.after()?, q.limit());
    let Some(((records, next), removes)) = ask(&s, |reply| ApiCmd::HeldRemovals {
        after,
        limit,
        reply,
    })
    .await?
    else {
        return Err(err(
            StatusCode::NOT_FOUND,
            "no subscribers file content is held",
        ));
    };
    let mut body = json!({ "removes": removes, "subscribers": records });
    if let Some(k) = next {
        body["next"] = k.cursor().into();
    }
    Ok(Json(body).into_response())
}
