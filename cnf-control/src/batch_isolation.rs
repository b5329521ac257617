//! Session batches that a dataplane refuses, split until the refused sessions stand alone.
//!
//! The contract's batches are atomic: one session a dataplane will not take (its tables full,
//! an address or line key it already holds for another session) refuses the whole batch. The
//! control used to treat that as a broken connection; the reconnect's reconcile sent the same
//! session again, so one refused session kept every other one out, and the dataplane
//! connection (with the punt stream, hence all DHCP) down, for good. Here a refused batch is
//! halved until each refused session is alone; the others are installed, and the refused ones
//! go back to the engine, which ends them. A removal the dataplane answers with "not found"
//! is likewise split: a session it does not hold is removed already.

use kbng_api::v1 as pb;
use kbng_api::v1::dataplane_client::DataplaneClient;
use tonic::transport::Channel;
use tonic::{Code, Status};

use crate::core::SessionId;

/// Whether `s` refuses the items of a batch rather than the call: the dataplane answered and
/// will answer the same for the same items.
pub fn refuses_items(s: &Status) -> bool {
    matches!(
        s.code(),
        Code::InvalidArgument | Code::AlreadyExists | Code::ResourceExhausted
    )
}

/// Push `batch`'s two halves on `todo`, the front one to be taken first, each still to ask.
fn push_halves<T>(todo: &mut Vec<(Vec<T>, Option<Status>)>, mut batch: Vec<T>) {
    let back = batch.split_off(batch.len() / 2);
    todo.push((back, None));
    todo.push((batch, None));
}

/// Install `sessions`, a batch the dataplane refused as a whole with `refusal`: the sessions
/// it takes are installed (in order), the refused ones returned with the dataplane's reason.
/// The refused batch itself is not sent again, only its halves. Once a session alone is
/// refused for lack of room, the ones after it are refused too without asking (no room frees
/// meanwhile). An error that is not a refusal ends it, as for any call.
pub async fn install(
    c: &mut DataplaneClient<Channel>,
    sessions: Vec<pb::Session>,
    refusal: Status,
) -> Result<Vec<(SessionId, String)>, Status> {
    let mut refused = Vec::new();
    let mut full: Option<String> = None;
    let mut todo = vec![(sessions, Some(refusal))];
    while let Some((batch, known)) = todo.pop() {
        if batch.is_empty() {
            continue;
        }
        if let Some(reason) = &full {
            refused.extend(batch.iter().map(|s| (s.session_id, reason.clone())));
            continue;
        }
        let answer = match known {
            Some(s) => Err(s),
            None => {
                let req = pb::InstallSessionsRequest {
                    sessions: batch.clone(),
                };
                c.install_sessions(req).await.map(drop)
            }
        };
        match answer {
            Ok(()) => {}
            Err(s) if refuses_items(&s) && batch.len() == 1 => {
                if s.code() == Code::ResourceExhausted {
                    full = Some(s.message().to_owned());
                }
                refused.push((batch[0].session_id, s.message().to_owned()));
            }
            Err(s) if refuses_items(&s) => push_halves(&mut todo, batch),
            Err(s) => return Err(s),
        }
    }
    Ok(refused)
}

/// Remove `ids`, a batch the dataplane answered with `not_found` as a whole: the ones it holds
/// are removed (the batch itself is not sent again, only its halves), and all of them are
/// gone when this returns `Ok`.
pub async fn remove(
    c: &mut DataplaneClient<Channel>,
    ids: Vec<SessionId>,
    not_found: Status,
) -> Result<(), Status> {
    let mut todo = vec![(ids, Some(not_found))];
    while let Some((batch, known)) = todo.pop() {
        if batch.is_empty() {
            continue;
        }
        let answer = match known {
            Some(s) => Err(s),
            None => {
                let req = pb::RemoveSessionsRequest {
                    session_ids: batch.clone(),
                };
                c.remove_sessions(req).await.map(drop)
            }
        };
        match answer {
            Ok(()) => {}
            Err(s) if s.code() == Code::NotFound && batch.len() == 1 => {
                tracing::info!(session = batch[0], "not in the dataplane: removed already");
            }
            Err(s) if s.code() == Code::NotFound => push_halves(&mut todo, batch),
            Err(s) => return Err(s),
        }
    }
    Ok(())
}
