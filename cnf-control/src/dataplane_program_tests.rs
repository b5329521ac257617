//! `program` against an in-process dataplane that answers as the real one does for the three
//! session calls (whole batches refused: ResourceExhausted when full, NotFound for a session
//! it does not hold) and refuses every other call.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use kbng_api::v1::dataplane_server::{Dataplane, DataplaneServer};
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::{Request, Response, Status};

use super::tests::dp;
use super::*;

#[derive(Default)]
struct Held {
    sessions: BTreeMap<SessionId, (u32, bool)>,
    /// Sizes of the session calls, in order.
    calls: Vec<(&'static str, usize)>,
}

struct Fake {
    room: usize,
    held: Arc<Mutex<Held>>,
}

fn absent(h: &Held, ids: impl IntoIterator<Item = SessionId>) -> Result<(), Status> {
    match ids.into_iter().find(|id| !h.sessions.contains_key(id)) {
        Some(id) => Err(Status::not_found(format!("session {id} not found"))),
        None => Ok(()),
    }
}

#[tonic::async_trait]
impl Dataplane for Fake {
    async fn install_sessions(
        &self,
        r: Request<pb::InstallSessionsRequest>,
    ) -> Result<Response<pb::InstallSessionsResponse>, Status> {
        let r = r.into_inner();
        let mut h = self.held.lock().unwrap();
        h.calls.push(("install", r.sessions.len()));
        let new = r
            .sessions
            .iter()
            .filter(|s| !h.sessions.contains_key(&s.session_id));
        if h.sessions.len() + new.count() > self.room {
            return Err(Status::resource_exhausted(format!(
                "room for {}",
                self.room
            )));
        }
        for s in &r.sessions {
            h.sessions.insert(s.session_id, (s.plan_id, s.captive));
        }
        Ok(Response::new(pb::InstallSessionsResponse::default()))
    }

    async fn modify_sessions(
        &self,
        r: Request<pb::ModifySessionsRequest>,
    ) -> Result<Response<pb::ModifySessionsResponse>, Status> {
        let r = r.into_inner();
        let mut h = self.held.lock().unwrap();
        h.calls.push(("modify", r.changes.len()));
        absent(&h, r.changes.iter().map(|c| c.session_id))?;
        for c in &r.changes {
            h.sessions.insert(c.session_id, (c.plan_id, c.captive));
        }
        Ok(Response::new(pb::ModifySessionsResponse::default()))
    }

    async fn remove_sessions(
        &self,
        r: Request<pb::RemoveSessionsRequest>,
    ) -> Result<Response<pb::RemoveSessionsResponse>, Status> {
        let r = r.into_inner();
        let mut h = self.held.lock().unwrap();
        h.calls.push(("remove", r.session_ids.len()));
        absent(&h, r.session_ids.iter().copied())?;
        for id in &r.session_ids {
            h.sessions.remove(id);
        }
        Ok(Response::new(pb::RemoveSessionsResponse::default()))
    }

    async fn get_counters(
        &self,
        _: Request<pb::GetCountersRequest>,
    ) -> Result<Response<pb::GetCountersResponse>, Status> {
        // Read before removals for accounting; an empty answer is enough here.
        Ok(Response::new(pb::GetCountersResponse::default()))
    }

    async fn get_identity(
        &self,
        _: Request<pb::GetIdentityRequest>,
    ) -> Result<Response<pb::Identity>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn install_plans(
        &self,
        _: Request<pb::InstallPlansRequest>,
    ) -> Result<Response<pb::InstallPlansResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn remove_plans(
        &self,
        _: Request<pb::RemovePlansRequest>,
    ) -> Result<Response<pb::RemovePlansResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn list_plans(
        &self,
        _: Request<pb::ListPlansRequest>,
    ) -> Result<Response<pb::ListPlansResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn configure_access(
        &self,
        _: Request<pb::AccessConfig>,
    ) -> Result<Response<pb::ConfigureAccessResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn list_sessions(
        &self,
        _: Request<pb::ListSessionsRequest>,
    ) -> Result<Response<pb::ListSessionsResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }

    type PuntStream = ReceiverStream<Result<pb::PuntedFrame, Status>>;

    async fn punt(
        &self,
        _: Request<tonic::Streaming<pb::InjectedFrame>>,
    ) -> Result<Response<Self::PuntStream>, Status> {
        Err(Status::unimplemented("fake"))
    }
}

/// A fake holding `held` (plan 1) with room for `room`, and a client connected to it.
async fn fake(room: usize, held: &[SessionId]) -> (DataplaneClient<Channel>, Arc<Mutex<Held>>) {
    let state = Arc::new(Mutex::new(Held {
        sessions: held.iter().map(|id| (*id, (1, false))).collect(),
        calls: Vec::new(),
    }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let svc = DataplaneServer::new(Fake {
        room,
        held: Arc::clone(&state),
    });
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(svc)
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    let c = connect(&Target {
        addr: format!("http://{addr}"),
        tls: None,
    })
    .await
    .unwrap();
    (c, state)
}

fn modify(id: SessionId) -> ProgramOp {
    ProgramOp::Modify {
        id,
        plan_id: 2,
        captive: false,
    }
}

#[tokio::test]
async fn a_modification_of_sessions_the_dataplane_lacks_names_them_and_does_the_rest() {
    let held: Vec<SessionId> = (1..=10).filter(|id| *id != 4 && *id != 9).collect();
    let (mut c, state) = fake(100, &held).await;
    let mut ops: Vec<ProgramOp> = (1..=10).map(modify).collect();
    ops.push(ProgramOp::Install(dp(11, false)));
    let mut answers = Answers::default();
    program(&mut c, ops, &mut answers)
        .await
        .expect("no error ends the connection");
    assert_eq!(answers.missing, [4, 9]);
    assert!(answers.refused.is_empty() && answers.removed.is_empty());
    let h = state.lock().unwrap();
    for id in held {
        assert_eq!(h.sessions[&id], (2, false), "session {id} modified");
    }
    assert!(!h.sessions.contains_key(&4) && !h.sessions.contains_key(&9));
    assert!(
        h.sessions.contains_key(&11),
        "the install after the modifications was sent"
    );
    assert_eq!(h.calls[0], ("modify", 10), "the whole batch first");
    assert!(
        !h.calls[1..].contains(&("modify", 10)),
        "the refused batch is not sent again"
    );
}

#[tokio::test]
async fn a_dataplane_out_of_room_installs_what_fits_and_refuses_the_rest() {
    let (mut c, state) = fake(5, &[]).await;
    let ops = (1..=8)
        .map(|id| ProgramOp::Install(dp(id, false)))
        .collect();
    let mut answers = Answers::default();
    program(&mut c, ops, &mut answers).await.unwrap();
    let refused: Vec<SessionId> = answers.refused.iter().map(|(id, _)| *id).collect();
    assert_eq!(refused, [6, 7, 8]);
    assert!(answers.refused.iter().all(|(_, why)| why == "room for 5"));
    let h = state.lock().unwrap();
    assert_eq!(
        h.sessions.keys().copied().collect::<Vec<_>>(),
        [1, 2, 3, 4, 5]
    );
    let asked_alone = h.calls.iter().filter(|c| **c == ("install", 1)).count();
    assert!(
        asked_alone <= 3,
        "after the first lone refusal the rest go unasked: {:?}",
        h.calls
    );
}

#[tokio::test]
async fn a_removal_of_sessions_the_dataplane_lacks_removes_the_others() {
    let (mut c, state) = fake(100, &[1, 2, 3]).await;
    let ops = [1, 5, 3].map(ProgramOp::Remove).to_vec();
    let mut answers = Answers::default();
    program(&mut c, ops, &mut answers).await.unwrap();
    assert_eq!(answers.removed, [1, 5, 3], "all confirmed removed");
    assert_eq!(
        state
            .lock()
            .unwrap()
            .sessions
            .keys()
            .copied()
            .collect::<Vec<_>>(),
        [2]
    );
}
