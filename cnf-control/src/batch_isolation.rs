//! Session batches that a dataplane refuses, split until the refused sessions stand alone.
//!
//! The contract's batches are atomic: one session a dataplane will not take (its tables full,
//! an address or line key it already holds for another session) refuses the whole batch. The
//! control used to treat that as a broken connection; the reconnect's reconcile sent the same
//! session again, so one refused session kept every other one out, and the dataplane
//! connection (with the punt stream, hence all DHCP) down, for good. Here a refused batch is
//! halved until each refused session is alone; the others are installed, and the refused ones
//! go back to the engine, which ends them. A removal the dataplane answers with "not found"
//! is likewise split: a session it does not hold is removed already. A modification answered
//! "not found" names sessions the dataplane lacks; the engine installs them again.

use kbng_api::v1 as pb;
use kbng_api::v1::dataplane_client::DataplaneClient;
use tonic::transport::Channel;
use tonic::{Code, Status};

use crate::core::SessionId;

/// Whether `s` refuses the items of an install rather than the call: the dataplane answered
/// and will answer the same for the same items.
pub fn refuses_items(s: &Status) -> bool {
    matches!(
        s.code(),
        Code::InvalidArgument | Code::AlreadyExists | Code::ResourceExhausted
    )
}

/// Whether `s` says that a session named in the batch is not in the dataplane.
pub fn lacks_items(s: &Status) -> bool {
    s.code() == Code::NotFound
}

/// The halving of one refused batch: [`Isolation::next`] gives the batches to send, in order,
/// and [`Isolation::answer`] takes what the dataplane said to each. A refused batch is halved
/// until every refused item stands alone; the refused batch itself is not sent again. (A loop
/// over an async closure would be shorter, but its future is not provably `Send`.)
struct Isolation<T> {
    todo: Vec<(Vec<T>, Option<Status>)>,
    refuses: fn(&Status) -> bool,
    /// Set once a lone item's refusal is final for the rest (tables full).
    stop: Option<Status>,
}

impl<T: Clone> Isolation<T> {
    fn new(batch: Vec<T>, refusal: Status, refuses: fn(&Status) -> bool) -> Self {
        Isolation {
            todo: vec![(batch, Some(refusal))],
            refuses,
            stop: None,
        }
    }

    /// The next batch to send, or `None` when every item is placed. Meanwhile each item
    /// refused alone goes to `lone` with its refusal; once `lone` answers true (no use asking
    /// again), every item not yet sent goes to `lone` with the same refusal, unasked.
    fn next(&mut self, lone: &mut impl FnMut(&T, &Status) -> bool) -> Option<Vec<T>> {
        while let Some((mut batch, known)) = self.todo.pop() {
            if batch.is_empty() {
                continue;
            }
            if let Some(s) = &self.stop {
                for item in &batch {
                    let _ = lone(item, s);
                }
                continue;
            }
            let Some(s) = known else {
                return Some(batch);
            };
            if batch.len() == 1 {
                if lone(&batch[0], &s) {
                    self.stop = Some(s);
                }
                continue;
            }
            let back = batch.split_off(batch.len() / 2);
            self.todo.push((back, None));
            self.todo.push((batch, None));
        }
        None
    }

    /// What the dataplane answered to `batch`, the last one [`Isolation::next`] gave. An error
    /// that is not a refusal ends the isolation, as it would any call.
    fn answer(&mut self, batch: Vec<T>, r: Result<(), Status>) -> Result<(), Status> {
        match r {
            Err(s) if (self.refuses)(&s) => {
                self.todo.push((batch, Some(s)));
                Ok(())
            }
            r => r,
        }
    }
}

/// Install `sessions`, a batch the dataplane refused as a whole with `refusal`: the sessions
/// it takes are installed (in order), the refused ones returned with the dataplane's reason.
/// Once a session alone is refused for lack of room, the ones after it are refused too
/// without asking (no room frees meanwhile).
pub async fn install(
    c: &mut DataplaneClient<Channel>,
    sessions: Vec<pb::Session>,
    refusal: Status,
) -> Result<Vec<(SessionId, String)>, Status> {
    let mut refused = Vec::new();
    let mut lone = |s: &pb::Session, why: &Status| {
        refused.push((s.session_id, why.message().to_owned()));
        why.code() == Code::ResourceExhausted
    };
    let mut iso = Isolation::new(sessions, refusal, refuses_items);
    while let Some(b) = iso.next(&mut lone) {
        let req = pb::InstallSessionsRequest {
            sessions: b.clone(),
        };
        let r = c.install_sessions(req).await;
        iso.answer(b, r.map(drop))?;
    }
    Ok(refused)
}

/// Remove `ids`, a batch the dataplane answered with `not_found` as a whole: the ones it holds
/// are removed, and all of them are gone when this returns `Ok`.
pub async fn remove(
    c: &mut DataplaneClient<Channel>,
    ids: Vec<SessionId>,
    not_found: Status,
) -> Result<(), Status> {
    let mut lone = |id: &SessionId, _: &Status| {
        tracing::info!(session = id, "not in the dataplane: removed already");
        false
    };
    let mut iso = Isolation::new(ids, not_found, lacks_items);
    while let Some(b) = iso.next(&mut lone) {
        let req = pb::RemoveSessionsRequest {
            session_ids: b.clone(),
        };
        let r = c.remove_sessions(req).await;
        iso.answer(b, r.map(drop))?;
    }
    Ok(())
}

/// Modify as `changes` asks, a batch the dataplane answered with `not_found` as a whole: the
/// sessions it holds are modified, and the ones it lacks are returned, to be installed again
/// as the control now wants them.
pub async fn modify(
    c: &mut DataplaneClient<Channel>,
    changes: Vec<pb::SessionChange>,
    not_found: Status,
) -> Result<Vec<SessionId>, Status> {
    let mut missing = Vec::new();
    let mut lone = |ch: &pb::SessionChange, _: &Status| {
        missing.push(ch.session_id);
        false
    };
    let mut iso = Isolation::new(changes, not_found, lacks_items);
    while let Some(b) = iso.next(&mut lone) {
        let req = pb::ModifySessionsRequest { changes: b.clone() };
        let r = c.modify_sessions(req).await;
        iso.answer(b, r.map(drop))?;
    }
    Ok(missing)
}
