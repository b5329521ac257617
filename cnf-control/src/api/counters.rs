//! `GET /v1/sessions/{id}/counters`: a session's counters as its dataplane holds them, and
//! since when it has counted them.
//!
//! A dataplane counts a session from the moment it is given it: at its binding, or, after the
//! dataplane restarted, at the reinstall that followed (every count starts from zero again).
//! An operator comparing two readings, or a subscriber's usage with the counters, needs to
//! know which of those it was, so the answer says so (`countedSinceNs`, `dataplaneBootId`).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use kbng_api::v1 as pb;
use serde_json::json;

use super::{ApiError, ApiState, ask, err};
use crate::service::ApiCmd;

/// When the dataplane that counted began counting a session bound at `bound_at_ns`: the later
/// of that binding and the start of the dataplane (`counted_by`, the boot of the counters;
/// `id`, the dataplane's identity read after them). None when the two reads came from
/// different boots (a restart between them) or nothing is known of the binding.
pub(super) fn counted_since(
    bound_at_ns: Option<u64>,
    counted_by: u64,
    id: Option<&pb::Identity>,
) -> Option<u64> {
    let bound = bound_at_ns?;
    let id = id.filter(|i| i.boot_id == counted_by)?;
    let started = u64::try_from(id.started_unix_ns).unwrap_or(0);
    Some(bound.max(started))
}

fn colours(d: Option<&pb::ColourCounters>) -> serde_json::Value {
    d.map_or(serde_json::Value::Null, |d| {
        json!({
            "greenPackets": d.green_packets, "greenBytes": d.green_bytes,
            "yellowPackets": d.yellow_packets, "yellowBytes": d.yellow_bytes,
            "redPackets": d.red_packets, "redBytes": d.red_bytes,
            "droppedPackets": d.dropped_packets, "droppedBytes": d.dropped_bytes,
        })
    })
}

pub(super) async fn counters(
    State(s): State<ApiState>,
    Path(id): Path<u64>,
) -> Result<Response, ApiError> {
    let v = ask(&s, |reply| ApiCmd::Get { id, reply })
        .await?
        .ok_or_else(|| err(StatusCode::NOT_FOUND, format!("no session {id}")))?;
    let addr = s
        .dp_addrs
        .get(v.dataplane as usize)
        .ok_or_else(|| err(StatusCode::NOT_FOUND, "no such dataplane"))?;
    let mut c = crate::dataplane::connect(addr)
        .await
        .map_err(|e| err(StatusCode::SERVICE_UNAVAILABLE, e.to_string()))?;
    let r = c
        .get_counters(crate::dataplane::sessions_request(vec![id]))
        .await
        .map_err(|e| err(StatusCode::BAD_GATEWAY, e.message().to_string()))?
        .into_inner();
    // After the counters: a restart between the two reads shows as a changed boot id.
    let identity = c
        .get_identity(pb::GetIdentityRequest {})
        .await
        .ok()
        .map(tonic::Response::into_inner);
    let sc = r.sessions.first();
    Ok(Json(json!({
        "id": id,
        "upstream": colours(sc.and_then(|c| c.upstream.as_ref())),
        "downstream": colours(sc.and_then(|c| c.downstream.as_ref())),
        "countedSinceNs": counted_since(v.bound_at_ns, r.boot_id, identity.as_ref()),
        "dataplaneBootId": r.boot_id,
    }))
    .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn booted(boot_id: u64, started_unix_ns: i64) -> pb::Identity {
        pb::Identity {
            boot_id,
            started_unix_ns,
            ..pb::Identity::default()
        }
    }

    #[test]
    fn a_session_bound_after_the_dataplane_started_counts_from_its_binding() {
        assert_eq!(
            counted_since(Some(500), 7, Some(&booted(7, 100))),
            Some(500)
        );
    }

    #[test]
    fn a_restarted_dataplane_counts_from_its_start() {
        assert_eq!(
            counted_since(Some(500), 8, Some(&booted(8, 900))),
            Some(900)
        );
    }

    #[test]
    fn unknown_when_the_reads_came_from_different_boots_or_the_binding_is_unknown() {
        assert_eq!(counted_since(Some(500), 7, Some(&booted(8, 900))), None);
        assert_eq!(counted_since(Some(500), 7, None), None);
        assert_eq!(counted_since(None, 7, Some(&booted(7, 100))), None);
    }

    #[test]
    fn a_start_before_the_epoch_is_read_as_the_epoch() {
        assert_eq!(counted_since(Some(5), 7, Some(&booted(7, -3))), Some(5));
    }
}
