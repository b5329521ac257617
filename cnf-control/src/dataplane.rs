//! The adapter to one dataplane over `kbng.dataplane.v1`: connection and reconnection, plans and
//! access configuration, batched session programming, the punt stream, and reconciliation.
//!
//! On every (re)connect, before anything else is programmed, the dataplane's sessions are listed
//! page by page and compared with what the engine wants: sessions the dataplane lacks are
//! installed (leaks: the control knew them, the dataplane did not), sessions it holds that the
//! control does not know are removed (orphans), differing ones are modified. Both lists are kept
//! as enumerated session ids for the operator API. A changed `boot_id` tells a dataplane restart
//! from a mere reconnect, which the report records.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kbng_api::v1 as pb;
use kbng_api::v1::dataplane_client::DataplaneClient;
use serde::Serialize;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::{Channel, Endpoint, Uri};
use tracing::Instrument as _;

pub use crate::dataplane_tls::Target;

use crate::batch_isolation;
use crate::config::{Config, Plan};
use crate::core::SessionId;
use crate::core::engine::{DpSession, ProgramOp};
use crate::dataplane_renewal::Renewal;
use crate::observe;
use kbng_crds::plan::{ColourAction, ColourActionKind, DirectionPolicy, PolicerMode};

/// Most items in one programming RPC.
pub const BATCH_MAX: usize = 5000;

/// Commands to the dataplane task.
#[derive(Debug)]
pub enum DpCmd {
    Program(ProgramOp),
    Inject {
        port: u32,
        frame: Vec<u8>,
        /// The session an ACK announces (see `Output::Inject`).
        announces: Option<SessionId>,
    },
    /// Compare with `desired` and report without changing anything.
    Audit {
        desired: Vec<DpSession>,
        reply: oneshot::Sender<Result<Diff, String>>,
    },
    /// Tell a stopping dataplane that the control reads none of its counters (no accounting):
    /// a read of nothing, after which it stops (`kbng_dataplane::stopping`).
    NothingToRead,
}

/// A counters request for the sessions `ids` alone (no node or worker counters).
pub fn sessions_request(ids: Vec<SessionId>) -> pb::GetCountersRequest {
    pb::GetCountersRequest {
        session_ids: ids,
        include_nodes: false,
        include_workers: false,
        last_read: false,
    }
}

/// The last read a stopping dataplane waits for (`kbng_dataplane::stopping`): it asks for
/// nothing, and once it is answered the dataplane stops.
pub fn last_read_request() -> pb::GetCountersRequest {
    pb::GetCountersRequest {
        last_read: true,
        ..sessions_request(Vec::new())
    }
}

/// What the dataplane task tells the engine task.
#[derive(Debug)]
pub enum DpEvent {
    Punted {
        dataplane: u32,
        frame: pb::PuntedFrame,
    },
    /// Connected; port MACs by index. The engine answers with its desired set.
    Up {
        dataplane: u32,
        port_macs: Vec<(u32, [u8; 6])>,
        /// Sessions the dataplane's tables hold (its identity's `session_capacity`).
        session_capacity: u64,
        desired: oneshot::Sender<Vec<DpSession>>,
    },
    Removed {
        ids: Vec<SessionId>,
    },
    /// Sessions the dataplane refused to install, with its reason: the engine ends them.
    Refused {
        sessions: Vec<(SessionId, String)>,
    },
    /// Sessions the dataplane lacked when asked to modify them: the engine installs them.
    Missing {
        ids: Vec<SessionId>,
    },
    /// The dataplane is stopping and serves its counters a last time.
    Stopping {
        dataplane: u32,
    },
}

/// What the dataplane answered about single sessions of a programming run, for the engine.
#[derive(Debug, Default)]
struct Answers {
    /// Removed (or not held: removed already).
    removed: Vec<SessionId>,
    /// Refused to install, with the dataplane's reason.
    refused: Vec<(SessionId, String)>,
    /// Lacked when a modification named them.
    missing: Vec<SessionId>,
}

impl Answers {
    /// Hand everything gathered to the engine, leaving this empty.
    async fn report(&mut self, index: u32, events: &mpsc::Sender<DpEvent>) {
        for (id, reason) in &self.refused {
            tracing::error!(
                dataplane = index,
                session = id,
                "the dataplane refused the session: {reason}"
            );
        }
        for id in &self.missing {
            tracing::warn!(
                dataplane = index,
                session = id,
                "the dataplane lacked the session it was asked to modify: installing it"
            );
        }
        let removed = std::mem::take(&mut self.removed);
        let sessions = std::mem::take(&mut self.refused);
        let missing = std::mem::take(&mut self.missing);
        let evs = [
            (!removed.is_empty()).then_some(DpEvent::Removed { ids: removed }),
            (!sessions.is_empty()).then_some(DpEvent::Refused { sessions }),
            (!missing.is_empty()).then_some(DpEvent::Missing { ids: missing }),
        ];
        for ev in evs.into_iter().flatten() {
            if events.send(ev).await.is_err() {
                return;
            }
        }
    }
}

/// A comparison of the dataplane's sessions with the control's.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Diff {
    /// Known to the control, missing in the dataplane.
    pub leaks: Vec<SessionId>,
    /// Held by the dataplane, unknown to the control.
    pub orphans: Vec<SessionId>,
    /// In both with different contents.
    pub mismatched: Vec<SessionId>,
    pub matching: usize,
}

/// The last reconciliation of a dataplane.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DpStatus {
    pub address: String,
    pub connected: bool,
    pub dataplane_id: String,
    pub boot_id: u64,
    pub restarts_seen: u64,
    pub reconnects: u64,
    pub last_reconcile: Option<Diff>,
    pub last_error: Option<String>,
}

pub fn to_proto(s: &DpSession) -> pb::Session {
    pb::Session {
        session_id: s.id,
        access_port: s.port,
        outer_vlan: u32::from(s.outer_vlan),
        inner_vlan: u32::from(s.inner_vlan),
        mac: s.mac.to_vec(),
        ipv4: u32::from(s.ip),
        plan_id: s.plan_id,
        captive: s.captive,
    }
}

/// A plan as the dataplane API takes it.
pub fn plan_proto(p: &Plan) -> pb::Plan {
    pb::Plan {
        plan_id: p.id,
        name: p.name.clone(),
        upstream: Some(meter_proto(&p.upstream)),
        downstream: Some(meter_proto(&p.downstream)),
    }
}

fn meter_proto(d: &DirectionPolicy) -> pb::Meter {
    let colour = |c: ColourAction| pb::ColourPolicy {
        action: match c.action {
            ColourActionKind::Transmit => pb::ColourAction::Transmit,
            ColourActionKind::Remark => pb::ColourAction::RemarkDscp,
            ColourActionKind::Drop => pb::ColourAction::Drop,
        } as i32,
        dscp: c.dscp.map_or(0, u32::from),
    };
    pb::Meter {
        mode: match d.mode {
            PolicerMode::SrTcm => pb::MeterMode::Srtcm,
            PolicerMode::TrTcm => pb::MeterMode::Trtcm,
        } as i32,
        cir_bps: d.cir_bps,
        pir_bps: d.pir_bps.unwrap_or(0),
        cbs_bytes: d.cbs_bytes,
        pbs_bytes: d.pbs_bytes,
        green: Some(colour(d.actions.green)),
        yellow: Some(colour(d.actions.yellow)),
        red: Some(colour(d.actions.red)),
    }
}

/// `e` and its sources, outermost first: tonic's own message is only "transport error", the
/// reason (refused, a certificate's issuer unknown, ...) is in the sources.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        out.push_str(": ");
        out.push_str(&s.to_string());
        next = s.source();
    }
    out
}

/// Connect to `target` (`unix:/path`, `http://host:port`, or `https://host:port` with its
/// TLS files, read now: a renewed certificate is used from the next connection). The error
/// carries its sources (tonic's own message is only "transport error").
pub async fn connect(target: &Target) -> Result<DataplaneClient<Channel>, String> {
    open(target).await.map_err(|e| error_chain(&*e))
}

async fn open(
    target: &Target,
) -> Result<DataplaneClient<Channel>, Box<dyn std::error::Error + Send + Sync>> {
    let addr = &target.addr;
    let ch = if let Some(path) = addr.strip_prefix("unix:") {
        let path = path.to_owned();
        Endpoint::from_static("http://[::]:50051")
            .connect_with_connector(tower::service_fn(move |_: Uri| {
                let p = path.clone();
                async move {
                    Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(
                        tokio::net::UnixStream::connect(p).await?,
                    ))
                }
            }))
            .await?
    } else {
        let mut e = Endpoint::from_shared(addr.to_owned())?;
        if let Some(tls) = &target.tls {
            e = e.tls_config(tls.client_config()?)?;
        }
        e.connect().await?
    };
    Ok(DataplaneClient::new(ch)
        .max_decoding_message_size(64 << 20)
        .max_encoding_message_size(64 << 20))
}

/// Every session the dataplane holds, page by page.
pub async fn list_all(c: &mut DataplaneClient<Channel>) -> Result<Vec<pb::Session>, tonic::Status> {
    let mut out = Vec::new();
    let mut after = 0;
    // Bounded: each page advances `after`; a dataplane of 16M sessions is 1,600 pages.
    for _ in 0..100_000 {
        let r = c
            .list_sessions(pb::ListSessionsRequest {
                page_size: 10_000,
                after_session_id: after,
            })
            .await?
            .into_inner();
        out.extend(r.sessions);
        if r.next_after_session_id == 0 {
            break;
        }
        after = r.next_after_session_id;
    }
    Ok(out)
}

/// Compare the dataplane's sessions with the desired ones.
pub fn diff(held: &[pb::Session], desired: &[DpSession]) -> Diff {
    let want: BTreeMap<SessionId, pb::Session> =
        desired.iter().map(|s| (s.id, to_proto(s))).collect();
    let have: BTreeMap<SessionId, &pb::Session> = held.iter().map(|s| (s.session_id, s)).collect();
    let mut d = Diff::default();
    for (id, w) in &want {
        match have.get(id) {
            None => d.leaks.push(*id),
            Some(h) if *h != w => d.mismatched.push(*id),
            Some(_) => d.matching += 1,
        }
    }
    d.orphans = have
        .keys()
        .filter(|id| !want.contains_key(id))
        .copied()
        .collect();
    d
}

/// Bring the dataplane to `desired`; returns what was found.
async fn reconcile(
    c: &mut DataplaneClient<Channel>,
    desired: &[DpSession],
    refused: &mut Vec<(SessionId, String)>,
) -> Result<Diff, tonic::Status> {
    let held = list_all(c).await?;
    let d = diff(&held, desired);
    let want: BTreeMap<SessionId, &DpSession> = desired.iter().map(|s| (s.id, s)).collect();
    // Orphans and mismatched go first (a mismatched session may hold an address or key that a
    // leak needs), then everything missing is installed.
    let mut remove: Vec<SessionId> = d.orphans.clone();
    remove.extend(&d.mismatched);
    for chunk in remove.chunks(BATCH_MAX) {
        let r = c
            .remove_sessions(pb::RemoveSessionsRequest {
                session_ids: chunk.to_vec(),
            })
            .await;
        match r {
            Err(s) if s.code() == tonic::Code::NotFound => {
                batch_isolation::remove(c, chunk.to_vec(), s).await?;
            }
            r => {
                r?;
            }
        }
    }
    let mut install: Vec<pb::Session> = Vec::new();
    for id in d.leaks.iter().chain(&d.mismatched) {
        if let Some(s) = want.get(id) {
            install.push(to_proto(s));
        }
    }
    for chunk in install.chunks(BATCH_MAX) {
        let r = c
            .install_sessions(pb::InstallSessionsRequest {
                sessions: chunk.to_vec(),
            })
            .await;
        match r {
            Err(s) if batch_isolation::refuses_items(&s) => {
                tracing::warn!("reconcile: the dataplane refused a batch ({s}): isolating");
                refused.extend(batch_isolation::install(c, chunk.to_vec(), s).await?);
            }
            r => {
                r?;
            }
        }
    }
    Ok(d)
}

/// Send a run of program ops, keeping their order across kinds.
async fn program(
    c: &mut DataplaneClient<Channel>,
    ops: Vec<ProgramOp>,
    answers: &mut Answers,
) -> Result<(), tonic::Status> {
    let mut i = 0;
    while i < ops.len() {
        let kind = std::mem::discriminant(&ops[i]);
        let mut j = i;
        while j < ops.len() && std::mem::discriminant(&ops[j]) == kind && j - i < BATCH_MAX {
            j += 1;
        }
        let run = &ops[i..j];
        match &run[0] {
            ProgramOp::Install(_) => {
                // Built again only if the batch is refused (no copy kept for the common case).
                let protos = || -> Vec<pb::Session> {
                    run.iter()
                        .filter_map(|o| match o {
                            ProgramOp::Install(s) => Some(to_proto(s)),
                            _ => None,
                        })
                        .collect()
                };
                let sessions = protos();
                let ids: Vec<SessionId> = sessions.iter().map(|s| s.session_id).collect();
                let span = observe::programming_span("InstallSessions", &ids);
                let req = observe::request(pb::InstallSessionsRequest { sessions }, &span);
                let t = std::time::Instant::now();
                let r = c.install_sessions(req).instrument(span).await;
                observe::programmed(ids.len(), r.is_ok(), t.elapsed(), &ids);
                match r {
                    Err(s) if batch_isolation::refuses_items(&s) => {
                        tracing::warn!("the dataplane refused a batch ({s}): isolating");
                        let refused = batch_isolation::install(c, protos(), s).await?;
                        answers.refused.extend(refused);
                    }
                    r => {
                        r?;
                    }
                }
            }
            ProgramOp::Modify { .. } => {
                // Built again only if a session is missing, as for installs.
                let changes = || -> Vec<pb::SessionChange> {
                    run.iter()
                        .filter_map(|o| match o {
                            ProgramOp::Modify {
                                id,
                                plan_id,
                                captive,
                            } => Some(pb::SessionChange {
                                session_id: *id,
                                plan_id: *plan_id,
                                captive: *captive,
                            }),
                            _ => None,
                        })
                        .collect()
                };
                let req = pb::ModifySessionsRequest { changes: changes() };
                let (n, t) = (req.changes.len(), std::time::Instant::now());
                let r = c.modify_sessions(req).await;
                observe::programmed(n, r.is_ok(), t.elapsed(), &[]);
                match r {
                    Err(s) if batch_isolation::lacks_items(&s) => {
                        tracing::warn!("the dataplane lacks a session to modify ({s}): isolating");
                        let missing = batch_isolation::modify(c, changes(), s).await?;
                        answers.missing.extend(missing);
                    }
                    r => {
                        r?;
                    }
                }
            }
            ProgramOp::Remove(_) => {
                let ids: Vec<SessionId> = run
                    .iter()
                    .filter_map(|o| match o {
                        ProgramOp::Remove(id) => Some(*id),
                        _ => None,
                    })
                    .collect();
                // Accounting Stops carry the counters as they were just before the removal.
                crate::radius::finals::before_removal(c, &ids).await;
                let t = std::time::Instant::now();
                let r = c
                    .remove_sessions(pb::RemoveSessionsRequest {
                        session_ids: ids.clone(),
                    })
                    .await;
                observe::programmed(ids.len(), r.is_ok(), t.elapsed(), &[]);
                match r {
                    Err(s) if s.code() == tonic::Code::NotFound => {
                        batch_isolation::remove(c, ids.clone(), s).await?;
                    }
                    r => {
                        r?;
                    }
                }
                answers.removed.extend(ids);
            }
        }
        i = j;
    }
    Ok(())
}

/// Why a connection's [`session`] ended without an error.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    /// The engine is gone: the control is stopping.
    EngineGone,
    /// The TLS files changed: the connection reopens with them at once.
    Renewed,
}

/// What one dataplane's task keeps from one connection to the next.
struct Across {
    /// The dataplane's boot id at the last connection: another one means it restarted.
    last_boot: Option<u64>,
    /// When the TLS files' changes reopen the connection.
    renewal: Renewal,
}

/// The task serving dataplane `index` at `target`, until the engine is gone. `renewed`
/// changes when the TLS files do ([`crate::dataplane_tls::watch_files`]).
pub async fn run(
    index: u32,
    target: Target,
    cfg: Arc<Config>,
    mut cmds: mpsc::UnboundedReceiver<DpCmd>,
    events: mpsc::Sender<DpEvent>,
    status: Arc<Mutex<DpStatus>>,
    renewed: Option<watch::Receiver<Option<u64>>>,
) {
    let mut across = Across {
        last_boot: None,
        renewal: Renewal::new(renewed, index),
    };
    // Reported before the first attempt, so a dataplane that never answers shows as lost.
    crate::health_metrics::dataplane_connected(index, false);
    loop {
        let res = session(
            index,
            &target,
            &cfg,
            &mut cmds,
            &events,
            &status,
            &mut across,
        )
        .await;
        crate::health_metrics::dataplane_connected(index, false);
        if let Ok(mut s) = status.lock() {
            s.connected = false;
            if let Err(e) = &res {
                s.last_error = Some(e.clone());
            }
        }
        let pause = match res {
            Err(e) => {
                tracing::warn!(dataplane = index, addr = %target.addr, "dataplane connection ended: {e}");
                Duration::from_secs(1)
            }
            Ok(Ended::Renewed) => {
                tracing::info!(dataplane = index, addr = %target.addr, "TLS files renewed: reconnecting with them");
                Duration::ZERO
            }
            Ok(Ended::EngineGone) => Duration::ZERO,
        };
        // While disconnected, removals are confirmed (the next reconcile removes any that
        // remain, as orphans) and other commands are dropped: the reconcile supersedes them.
        let deadline = tokio::time::Instant::now() + pause;
        let mut removed = Vec::new();
        while let Ok(Some(cmd)) = tokio::time::timeout_at(deadline, cmds.recv()).await {
            match cmd {
                DpCmd::Program(ProgramOp::Remove(id)) => removed.push(id),
                DpCmd::Audit { reply, .. } => {
                    let _ = reply.send(Err("dataplane not connected".into()));
                }
                _ => {}
            }
        }
        if !removed.is_empty()
            && events
                .send(DpEvent::Removed { ids: removed })
                .await
                .is_err()
        {
            return;
        }
        if events.is_closed() {
            return;
        }
    }
}

async fn session(
    index: u32,
    target: &Target,
    cfg: &Config,
    cmds: &mut mpsc::UnboundedReceiver<DpCmd>,
    events: &mpsc::Sender<DpEvent>,
    status: &Mutex<DpStatus>,
    across: &mut Across,
) -> Result<Ended, String> {
    let Across { last_boot, renewal } = across;
    // Marked before the files are read: a change from here on reopens this connection.
    renewal.mark();
    let mut c = connect(target).await.map_err(|e| format!("connect: {e}"))?;
    let id = c
        .get_identity(pb::GetIdentityRequest {})
        .await
        .map_err(|e| format!("GetIdentity: {e}"))?
        .into_inner();
    let restarted = last_boot.is_some_and(|b| b != id.boot_id);
    *last_boot = Some(id.boot_id);
    c.install_plans(pb::InstallPlansRequest {
        plans: cfg.plans.iter().map(plan_proto).collect(),
    })
    .await
    .map_err(|e| format!("InstallPlans: {e}"))?;
    let gateways = cfg
        .engine
        .pools
        .iter()
        .map(|p| pb::Gateway {
            address: u32::from(p.gateway),
            prefix_len: u32::from(p.prefix_len),
        })
        .collect();
    let allow = cfg
        .garden
        .iter()
        .map(|(a, l, proto, port)| pb::GardenRule {
            prefix: Some(pb::Ipv4Prefix {
                address: u32::from(*a),
                prefix_len: u32::from(*l),
            }),
            protocol: u32::from(*proto),
            port: u32::from(*port),
        })
        .collect();
    c.configure_access(pb::AccessConfig {
        gateways,
        walled_garden: Some(pb::WalledGarden {
            allow,
            redirect_http: true,
        }),
    })
    .await
    .map_err(|e| format!("ConfigureAccess: {e}"))?;

    // The punt stream first, so no DHCP is lost between reconcile and serving.
    let (inject_tx, inject_rx) = mpsc::channel::<pb::InjectedFrame>(4096);
    let punts = c
        .punt(ReceiverStream::new(inject_rx))
        .await
        .map_err(|e| format!("Punt: {e}"))?
        .into_inner();

    let port_macs = id
        .ports
        .iter()
        .filter_map(|p| {
            <[u8; 6]>::try_from(p.mac.as_slice())
                .ok()
                .map(|m| (p.index, m))
        })
        .collect();
    let (dtx, drx) = oneshot::channel();
    events
        .send(DpEvent::Up {
            dataplane: index,
            port_macs,
            session_capacity: id.session_capacity,
            desired: dtx,
        })
        .await
        .map_err(|_| "engine gone".to_string())?;
    let desired = drx.await.map_err(|_| "engine gone".to_string())?;
    // Commands queued before the snapshot are superseded by it; removals are confirmed.
    let mut answers = Answers::default();
    while let Ok(cmd) = cmds.try_recv() {
        if let DpCmd::Program(ProgramOp::Remove(id)) = cmd {
            answers.removed.push(id);
        }
    }
    let report = reconcile(&mut c, &desired, &mut answers.refused)
        .await
        .map_err(|e| format!("reconcile: {e}"))?;
    tracing::info!(
        dataplane = index,
        restarted,
        leaks = report.leaks.len(),
        orphans = report.orphans.len(),
        mismatched = report.mismatched.len(),
        matching = report.matching,
        "reconciled"
    );
    crate::health_metrics::reconciled(index, &report);
    crate::health_metrics::dataplane_connected(index, true);
    if let Ok(mut s) = status.lock() {
        s.connected = true;
        s.dataplane_id = id.dataplane_id.clone();
        s.boot_id = id.boot_id;
        s.restarts_seen += u64::from(restarted);
        s.reconnects += 1;
        s.last_reconcile = Some(report);
        s.last_error = None;
    }
    answers.report(index, events).await;

    // Punts are read by a task of their own, so that frames keep flowing to the engine while
    // this one waits on a programming call (before, the stream stalled for each call).
    let mut reader = AbortOnDrop(tokio::spawn(forward_punts(index, punts, events.clone())));
    loop {
        tokio::select! {
            r = &mut reader.0 => {
                return match r {
                    Ok(r) => r.map(|()| Ended::EngineGone),
                    Err(e) => Err(format!("punt reader: {e}")),
                };
            }
            () = renewal.due() => return Ok(Ended::Renewed),
            cmd = cmds.recv() => {
                let Some(cmd) = cmd else { return Ok(Ended::EngineGone) };
                let mut ops = Vec::new();
                let mut injects = Vec::new();
                let mut pending = Some(cmd);
                // Batch whatever else is already queued.
                while let Some(cmd) = pending.take() {
                    match cmd {
                        DpCmd::Program(op) => ops.push(op),
                        // Frames wait for the batch's programming: an ACK leaves only after
                        // the session it announces is installed.
                        DpCmd::Inject { port, frame, announces } => {
                            injects.push((announces, pb::InjectedFrame { port, frame }));
                        }
                        DpCmd::Audit { desired, reply } => {
                            let r = program(&mut c, std::mem::take(&mut ops), &mut answers).await;
                            let d = match r {
                                Ok(()) => list_all(&mut c).await.map(|h| diff(&h, &desired)).map_err(|e| e.to_string()),
                                Err(e) => Err(e.to_string()),
                            };
                            let _ = reply.send(d);
                        }
                        DpCmd::NothingToRead => {
                            let _ = c.get_counters(last_read_request()).await;
                        }
                    }
                    if ops.len() < BATCH_MAX {
                        pending = cmds.try_recv().ok();
                    }
                }
                let r = program(&mut c, ops, &mut answers).await;
                drop_acks_of_refused(&mut injects, &answers.refused);
                // Waits rather than drops when the stream is behind (HTTP/2 flow control is the
                // bound); an error means the stream is gone, which ends this connection.
                for (_, f) in injects {
                    if inject_tx.send(f).await.is_err() {
                        return Err("inject stream closed".into());
                    }
                }
                observe::replies_sent(index);
                answers.report(index, events).await;
                r.map_err(|e| format!("programming: {e}"))?;
            }
        }
    }
}

/// An ACK for a session the dataplane refused would promise a session that is not there: it
/// stays unsent (the engine ends the session). Other frames are kept, in order.
fn drop_acks_of_refused(
    injects: &mut Vec<(Option<SessionId>, pb::InjectedFrame)>,
    refused: &[(SessionId, String)],
) {
    if !refused.is_empty() {
        injects.retain(|(a, _)| a.is_none_or(|id| refused.iter().all(|(r, _)| *r != id)));
    }
}

/// Aborts the task when dropped (when the connection's session ends, its punt reader goes too).
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Hand every punted frame to the engine task until the stream ends (an error) or the engine
/// is gone (`Ok`).
async fn forward_punts(
    index: u32,
    mut punts: tonic::Streaming<pb::PuntedFrame>,
    events: mpsc::Sender<DpEvent>,
) -> Result<(), String> {
    loop {
        match punts.message().await {
            Ok(Some(frame)) => {
                let ev = if frame.stopping {
                    DpEvent::Stopping { dataplane: index }
                } else {
                    DpEvent::Punted {
                        dataplane: index,
                        frame,
                    }
                };
                if events.send(ev).await.is_err() {
                    return Ok(());
                }
            }
            Ok(None) => return Err("punt stream closed".into()),
            Err(e) => return Err(format!("punt stream: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn an_ack_of_a_refused_session_stays_unsent() {
        let frame = |b: u8| pb::InjectedFrame {
            port: 0,
            frame: vec![b],
        };
        let mut injects = vec![
            (None, frame(1)),
            (Some(7), frame(2)),
            (Some(8), frame(3)),
            (None, frame(4)),
        ];
        drop_acks_of_refused(&mut injects, &[]);
        assert_eq!(injects.len(), 4, "nothing refused, nothing dropped");
        drop_acks_of_refused(&mut injects, &[(7, "room for 0".into())]);
        let left: Vec<u8> = injects.iter().map(|(_, f)| f.frame[0]).collect();
        assert_eq!(left, [1, 3, 4]);
    }

    pub(super) fn dp(id: u64, captive: bool) -> DpSession {
        DpSession {
            id,
            port: 0,
            outer_vlan: 0,
            inner_vlan: 0,
            mac: [2, 0, 0, 0, 0, id as u8],
            ip: Ipv4Addr::new(100, 64, 0, id as u8),
            plan_id: 1,
            captive,
        }
    }

    #[test]
    fn diff_enumerates_leaks_orphans_and_mismatches() {
        let held = vec![
            to_proto(&dp(1, false)),
            to_proto(&dp(2, false)),
            to_proto(&dp(9, false)),
        ];
        let desired = vec![dp(1, false), dp(2, true), dp(3, false)];
        let d = diff(&held, &desired);
        assert_eq!(d.leaks, vec![3]);
        assert_eq!(d.orphans, vec![9]);
        assert_eq!(d.mismatched, vec![2]);
        assert_eq!(d.matching, 1);
    }

    #[test]
    fn a_plan_reaches_the_wire_whole_in_each_direction() {
        use kbng_crds::plan::ColourActions;
        let up = DirectionPolicy {
            mode: PolicerMode::TrTcm,
            cir_bps: 5_000_000,
            pir_bps: Some(10_000_000),
            cbs_bytes: 62_500,
            pbs_bytes: 125_000,
            actions: ColourActions {
                yellow: ColourAction {
                    action: ColourActionKind::Remark,
                    dscp: Some(8),
                },
                ..ColourActions::default()
            },
        };
        let plan = Plan {
            name: "duo".into(),
            id: 11,
            upstream: up,
            downstream: DirectionPolicy::single_rate(20_000_000),
        };
        let p = plan_proto(&plan);
        let (u, d) = (p.upstream.unwrap(), p.downstream.unwrap());
        assert_eq!(u.mode, pb::MeterMode::Trtcm as i32);
        assert_eq!((u.cir_bps, u.pir_bps), (5_000_000, 10_000_000));
        assert_eq!((u.cbs_bytes, u.pbs_bytes), (62_500, 125_000));
        let yellow = u.yellow.unwrap();
        assert_eq!(yellow.action, pb::ColourAction::RemarkDscp as i32);
        assert_eq!(yellow.dscp, 8);
        assert_eq!(u.red.unwrap().action, pb::ColourAction::Drop as i32);
        assert_eq!(d.mode, pb::MeterMode::Srtcm as i32);
        assert_eq!((d.cir_bps, d.pir_bps), (20_000_000, 0));
        assert_eq!(d.green.unwrap().action, pb::ColourAction::Transmit as i32);
    }
}

#[cfg(test)]
#[path = "dataplane_program_tests.rs"]
mod program_tests;
