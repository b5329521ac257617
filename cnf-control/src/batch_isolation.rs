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

/// Install `sessions`, a batch the dataplane refused as a whole: the sessions it takes are
/// installed (in order), the refused ones returned with the dataplane's reason. Once a session
/// alone is refused for lack of room, the ones after it are refused too without asking (no
/// room frees meanwhile). An error that is not a refusal ends it, as for any call.
pub async fn install(
    c: &mut DataplaneClient<Channel>,
    sessions: Vec<pb::Session>,
) -> Result<Vec<(SessionId, String)>, Status> {
    let mut refused = Vec::new();
    let mut todo = vec![sessions];
    let mut full: Option<String> = None;
    while let Some(mut batch) = todo.pop() {
        if batch.is_empty() {
            continue;
        }
        if let Some(reason) = &full {
            refused.extend(batch.iter().map(|s| (s.session_id, reason.clone())));
            continue;
        }
        let req = pb::InstallSessionsRequest {
            sessions: batch.clone(),
        };
        match c.install_sessions(req).await {
            Ok(_) => {}
            Err(s) if refuses_items(&s) && batch.len() == 1 => {
                if s.code() == Code::ResourceExhausted {
                    full = Some(s.message().to_owned());
                }
                refused.push((batch[0].session_id, s.message().to_owned()));
            }
            Err(s) if refuses_items(&s) => {
                let back = batch.split_off(batch.len() / 2);
                todo.push(back);
                todo.push(batch);
            }
            Err(s) => return Err(s),
        }
    }
    Ok(refused)
}

/// Remove `ids`, a batch the dataplane answered with "not found": the ones it holds are
/// removed, and all of them are gone when this returns `Ok`.
pub async fn remove(c: &mut DataplaneClient<Channel>, ids: Vec<SessionId>) -> Result<(), Status> {
    let mut todo = vec![ids];
    while let Some(mut batch) = todo.pop() {
        if batch.is_empty() {
            continue;
        }
        let req = pb::RemoveSessionsRequest {
            session_ids: batch.clone(),
        };
        match c.remove_sessions(req).await {
            Ok(_) => {}
            Err(s) if s.code() == Code::NotFound && batch.len() == 1 => {
                tracing::info!(session = batch[0], "not in the dataplane: removed already");
            }
            Err(s) if s.code() == Code::NotFound => {
                let back = batch.split_off(batch.len() / 2);
                todo.push(back);
                todo.push(batch);
            }
            Err(s) => return Err(s),
        }
    }
    Ok(())
}
