//! The engine task: the one owner of [`Engine`]. It takes punted frames and dataplane events,
//! operator commands and ticks; processes whatever is queued as one batch; and hands the batch's
//! effects to the commit stage (`crate::commit`), which commits its store changes and only then
//! lets its DHCP replies and dataplane programming out, in batch order, so no client holds a
//! lease the store lacks. The engine goes on with the next batch while one commits.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use kbng_api::v1 as pb;
use serde::Serialize;
use tokio::sync::{broadcast, mpsc, oneshot};

use crate::commit::{Committer, Effects};
use crate::config::Config;
use crate::core::SessionId;
use crate::core::aaa::{AaaError, SubscriberRecord, format_mac};
use crate::core::engine::{DpSession, Engine, Output, Session, dp_session};
use crate::core::licence::Cap;
use crate::core::subscriber_page::RecordKey;
use crate::dataplane::{DpCmd, DpEvent};
use crate::store::subscribers::{Overlay, SubscriberChange};
use crate::store::{Store, StoreOp};

mod subscribers_file;

pub use crate::clock::now_ns;

/// A session as the operator API shows it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionView {
    pub id: SessionId,
    pub state: &'static str,
    pub mac: String,
    pub ip: Option<Ipv4Addr>,
    pub dataplane: u32,
    pub port: u32,
    pub outer_vlan: u16,
    pub inner_vlan: u16,
    pub plan_id: Option<u32>,
    pub captive: Option<bool>,
    pub created_ns: u64,
    pub bound_at_ns: Option<u64>,
    pub renewed_at_ns: Option<u64>,
    pub lease_secs: Option<u32>,
    /// When a Session-Timeout (the Access-Accept's or a CoA's) ends the session; none without.
    pub ends_at_ns: Option<u64>,
    /// Whether the session is authorized again at `ends_at_ns` rather than ended there
    /// (RADIUS Termination-Action RADIUS-Request).
    pub reauthorize_at_end: bool,
    pub circuit_id: Option<String>,
    pub remote_id: Option<String>,
}

pub fn view(s: &Session) -> SessionView {
    let b = s.state.bound();
    SessionView {
        id: s.id,
        state: s.state.name(),
        mac: format_mac(&s.mac),
        ip: s.state.ip(),
        dataplane: s.line.dataplane,
        port: s.line.port,
        outer_vlan: s.line.outer_vlan,
        inner_vlan: s.line.inner_vlan,
        plan_id: b.map(|(_, g)| g.plan_id()),
        captive: b.map(|(_, g)| g.captive()),
        created_ns: s.created_ns,
        bound_at_ns: b.map(|(l, _)| l.bound_at_ns),
        renewed_at_ns: b.map(|(l, _)| l.renewed_at_ns),
        lease_secs: b.map(|(l, _)| l.lease_secs),
        ends_at_ns: s.ends_at_ns.map(std::num::NonZeroU64::get),
        reauthorize_at_end: s.reauthorize_at_end,
        circuit_id: s
            .circuit_id
            .as_ref()
            .map(|c| String::from_utf8_lossy(c).into_owned()),
        remote_id: s
            .remote_id
            .as_ref()
            .map(|c| String::from_utf8_lossy(c).into_owned()),
    }
}

/// Which sessions a listing wants.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub state: Option<String>,
    pub mac: Option<[u8; 6]>,
    pub ip: Option<Ipv4Addr>,
    pub captive: Option<bool>,
    /// Bound sessions granted this plan (captive ones beyond the cap carry the plan they are
    /// promoted to).
    pub plan_id: Option<u32>,
    /// The access line's VLANs (0: untagged), for what one line holds.
    pub outer_vlan: Option<u16>,
    pub inner_vlan: Option<u16>,
}

impl Filter {
    fn matches(&self, s: &Session) -> bool {
        self.state.as_deref().is_none_or(|st| s.state.name() == st)
            && self.mac.is_none_or(|m| s.mac == m)
            && self.ip.is_none_or(|ip| s.state.ip() == Some(ip))
            && self
                .captive
                .is_none_or(|c| s.state.bound().map(|(_, g)| g.captive()) == Some(c))
            && self
                .plan_id
                .is_none_or(|p| s.state.bound().map(|(_, g)| g.plan_id()) == Some(p))
            && self.outer_vlan.is_none_or(|v| s.line.outer_vlan == v)
            && self.inner_vlan.is_none_or(|v| s.line.inner_vlan == v)
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusView {
    pub sessions: usize,
    pub by_state: HashMap<&'static str, usize>,
    pub cap: Cap,
    pub admitted_active: usize,
    pub waiting_captive: usize,
    pub counters: Vec<(&'static str, u64)>,
    pub store_errors: u64,
    /// In the shape the operator copies into the BNG status.
    pub pools: Vec<kbng_crds::bng::PoolUsage>,
    pub subscribers: SubscribersView,
}

/// The local subscriber store in `/v1/status`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscribersView {
    /// Records in force: the file's with the API's changes over them.
    pub records: usize,
    /// The subscribers file, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<SubscribersFileView>,
    /// A change of the records is being applied to the sessions admitted before it.
    pub applying: bool,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscribersFileView {
    pub path: String,
    /// Why the file's present content is not in force (the records before it are), while so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rejected: Option<String>,
    /// A content held back for the records it would remove, while so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held: Option<HeldView>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HeldView {
    /// Records the held content has (with the API's changes over it).
    pub records: usize,
    /// Records in force it would remove.
    pub removes: usize,
}

/// A held subscribers file put in force.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AcceptedFile {
    pub records: usize,
    pub removed: usize,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WatchEvent {
    pub id: SessionId,
    pub state: &'static str,
    pub at_ns: u64,
}

/// What one chunk of a drain did (the API's loop decides from it whether to go on).
#[derive(Debug, Clone, Copy)]
pub struct DrainStep {
    /// Sessions held before the chunk.
    pub before: usize,
    /// Sessions held after it, releasing ones included.
    pub remaining: usize,
    /// Sessions it disconnected (fewer than asked: none were left).
    pub started: usize,
    /// The last session it disconnected (the next chunk's `after`).
    pub last: SessionId,
}

/// Operator commands.
#[derive(Debug)]
pub enum ApiCmd {
    List {
        after: SessionId,
        limit: usize,
        filter: Filter,
        reply: oneshot::Sender<(Vec<SessionView>, SessionId)>,
    },
    Get {
        id: SessionId,
        reply: oneshot::Sender<Option<SessionView>>,
    },
    Release {
        id: SessionId,
        reply: oneshot::Sender<bool>,
    },
    /// One chunk of a drain: up to `max` sessions after `after`.
    Drain {
        after: SessionId,
        max: usize,
        reply: oneshot::Sender<DrainStep>,
    },
    Status {
        reply: oneshot::Sender<StatusView>,
    },
    Desired {
        dataplane: u32,
        reply: oneshot::Sender<Vec<DpSession>>,
    },
    ImportSubscribers {
        rows: Vec<(usize, SubscriberRecord)>,
        /// Of the rows that did not parse.
        errors: Vec<AaaError>,
        reply: oneshot::Sender<Result<usize, Vec<String>>>,
    },
    /// Answered once the removal is kept: whether there was such a record.
    RemoveSubscriber {
        key: RecordKey,
        reply: oneshot::Sender<bool>,
    },
    ShowSubscriber {
        key: RecordKey,
        reply: oneshot::Sender<Option<SubscriberRecord>>,
    },
    /// A page of the subscriber store (`crate::core::subscriber_page`).
    ListSubscribers {
        after: Option<RecordKey>,
        limit: usize,
        reply: oneshot::Sender<crate::core::subscriber_page::Page>,
    },
    /// The subscribers file changed (`crate::subscribers_file::watch`).
    SubscribersFile(crate::subscribers_file::FileEvent),
    /// A page of the records in force the held content of the subscribers file lacks (`None`
    /// when none is held): (records, cursor, how many in all).
    HeldRemovals {
        after: Option<RecordKey>,
        limit: usize,
        reply: oneshot::Sender<Option<(crate::core::subscriber_page::Page, usize)>>,
    },
    /// Put the held content of the subscribers file in force: the records it removes.
    AcceptSubscribersFile {
        reply: oneshot::Sender<Result<AcceptedFile, String>>,
    },
    ChangePlan {
        id: SessionId,
        plan: String,
        reply: oneshot::Sender<Result<(), crate::core::engine::PlanChangeError>>,
    },
}

/// Everything the engine task talks to.
#[derive(Debug)]
pub struct EngineTask {
    /// RADIUS, when configured (`crate::radius`).
    pub radius: Option<crate::radius::Link>,
    pub engine: Engine,
    pub store: Store,
    pub dps: Vec<mpsc::UnboundedSender<DpCmd>>,
    pub dp_events: mpsc::Receiver<DpEvent>,
    pub api: mpsc::Receiver<ApiCmd>,
    pub watch: broadcast::Sender<WatchEvent>,
    pub cfg: Arc<Config>,
    /// Relay mode: the socket to the DHCP servers.
    pub relay: Option<crate::relay::RelayLink>,
    /// With a subscribers file: the API's changes kept in the store, to lay over the file
    /// whenever it changes (`None` without a file).
    pub subscriber_overlay: Option<Overlay>,
    /// The subscribers file's content held, or rejected, at start.
    pub subscribers_file: crate::subscribers_guard::FileState,
}

/// The engine task once started: the commit stage owns the store and the way out.
struct Running {
    radius: Option<crate::radius::Link>,
    engine: Engine,
    dp_events: mpsc::Receiver<DpEvent>,
    api: mpsc::Receiver<ApiCmd>,
    cfg: Arc<Config>,
    relay: Option<crate::relay::RelayLink>,
    committer: Committer,
    /// For frames that need not wait for the commit stage (see [`Running::send_early`]).
    dps: Vec<mpsc::UnboundedSender<DpCmd>>,
    health: crate::health_metrics::HealthFeed,
    subscriber_overlay: Option<Overlay>,
    /// A rejected or held content of the subscribers file.
    subscribers_file: crate::subscribers_guard::FileState,
}

type Batch = Effects;

impl EngineTask {
    pub async fn run(self) {
        let EngineTask {
            radius,
            engine,
            store,
            dps,
            dp_events,
            api,
            watch,
            cfg,
            relay,
            subscriber_overlay,
            subscribers_file,
        } = self;
        if cfg.subscribers_file.is_some() {
            // Started on it: in force, held, or rejected and started on the content kept
            // (`crate::subscribers_guard`).
            subscribers_file.report();
        }
        let committer = match Committer::start(Arc::new(store), dps.clone(), watch) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!("cannot start the commit thread: {e}");
                return;
            }
        };
        Running {
            radius,
            engine,
            dp_events,
            api,
            cfg,
            relay,
            committer,
            dps,
            health: Default::default(),
            subscriber_overlay,
            subscribers_file,
        }
        .run()
        .await
    }
}

impl Running {
    async fn run(mut self) {
        let mut tick = tokio::time::interval(Duration::from_millis(20));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut cap_check = tokio::time::interval(Duration::from_secs(1));
        loop {
            let mut b = Batch::default();
            tokio::select! {
                ev = self.dp_events.recv() => {
                    let Some(ev) = ev else { return };
                    self.dp_event(ev, &mut b);
                    // Whatever else is queued joins this batch (bounded).
                    for _ in 0..2000 {
                        match self.dp_events.try_recv() {
                            Ok(ev) => self.dp_event(ev, &mut b),
                            Err(_) => break,
                        }
                    }
                }
                Some(d) = crate::relay::recv(&mut self.relay) => {
                    if d.dropped_before > 0 {
                        self.engine.add_counter(crate::relay::DROPPED_BUSY, d.dropped_before);
                    }
                    let out = self.engine.relay_reply(d.from, &d.payload, now_ns());
                    self.outputs(out, &mut b);
                }
                Some(ev) = crate::radius::recv(&mut self.radius) => {
                    // An event came, so RADIUS is configured.
                    if let Some(link) = &self.radius {
                        let (out, reply) =
                            crate::radius::on_event(link, &mut self.engine, ev, now_ns());
                        self.outputs(out, &mut b);
                        b.replies.extend(reply);
                    }
                }
                cmd = self.api.recv() => {
                    let Some(cmd) = cmd else { return };
                    self.api_cmd(cmd, &mut b);
                }
                _ = tick.tick() => {
                    let out = self.engine.tick(now_ns());
                    self.outputs(out, &mut b);
                }
                _ = cap_check.tick() => {
                    crate::observe::tick(&self.engine);
                    self.health.publish(&self.engine, self.committer.errors());
                    // A changed source counts too, so an expiry is reported truly.
                    if let Some(cap) = self.cfg.current_cap(now_ns())
                        && cap != *self.engine.cap()
                    {
                        let (n, source) = (cap.max_sessions, &cap.source);
                        tracing::warn!(cap = n, ?source, "licence cap changed");
                        let out = self.engine.set_cap(cap, now_ns());
                        self.outputs(out, &mut b);
                    }
                }
            }
            self.send_early(&mut b);
            // Committed and released by the commit stage, in order, while this task goes on
            // with the next batch.
            if !b.is_empty() {
                b.next_id = self.engine.next_id();
                if !self.committer.submit(b).await {
                    tracing::error!("the commit thread is gone");
                    return;
                }
            }
        }
    }

    /// Frames of a batch that changes nothing in the store and programs nothing (OFFERs, NAKs,
    /// INFORM answers, portal redirects) leave at once instead of waiting behind an earlier
    /// batch's sync: they promise nothing a commit must make durable, and a client matches
    /// replies by xid, as it must when UDP reorders them anyway. The batch's watch events and
    /// operator replies still go through the commit stage, in order.
    fn send_early(&self, b: &mut Batch) {
        let only_frames = b
            .sends
            .iter()
            .all(|(_, c)| matches!(c, DpCmd::Inject { .. }));
        if !b.store.is_empty() || !only_frames {
            return;
        }
        for (dp, cmd) in b.sends.drain(..) {
            if let Some(tx) = self.dps.get(dp as usize) {
                let _ = tx.send(cmd);
            }
        }
    }

    fn outputs(&mut self, out: Vec<Output>, b: &mut Batch) {
        crate::observe::outputs(&self.engine, &out);
        for o in out {
            match o {
                Output::Inject {
                    dataplane,
                    port,
                    frame,
                    announces,
                } => b.sends.push((
                    dataplane,
                    DpCmd::Inject {
                        port,
                        frame,
                        announces,
                    },
                )),
                Output::Program { dataplane, op } => b.sends.push((dataplane, DpCmd::Program(op))),
                Output::Persist(s) => b.store.push(StoreOp::Put(s)),
                Output::Forget(id) => b.store.push(StoreOp::Delete(id)),
                Output::Changed { id, state } => b.watch.push(WatchEvent {
                    id,
                    state,
                    at_ns: now_ns(),
                }),
                Output::Authorize { .. } | Output::Accounting { .. } => {
                    let sent = self
                        .radius
                        .as_ref()
                        .is_some_and(|r| r.forward(&self.engine, &o));
                    if !sent && matches!(o, Output::Authorize { .. }) {
                        tracing::warn!("external authorization requested but no RADIUS adapter");
                    }
                }
                // Not held for the store: relaying a client message promises nothing yet.
                Output::ToServer { server, payload } => {
                    if let Some(l) = &self.relay {
                        let _ = l.tx.send(crate::core::relay::ToServer { server, payload });
                    }
                }
            }
        }
    }

    fn dp_event(&mut self, ev: DpEvent, b: &mut Batch) {
        let now = now_ns();
        match ev {
            DpEvent::Punted { dataplane, frame } => match pb::PuntReason::try_from(frame.reason) {
                Ok(pb::PuntReason::Dhcp) => {
                    crate::observe::input_started();
                    let out = self
                        .engine
                        .handle_dhcp(dataplane, frame.port, &frame.frame, now);
                    self.outputs(out, b);
                }
                Ok(pb::PuntReason::PortalHttp) => {
                    match crate::portal::answer(&frame.frame, &self.cfg.portal_url) {
                        Ok(answers) => {
                            for f in answers {
                                b.sends.push((
                                    dataplane,
                                    DpCmd::Inject {
                                        port: frame.port,
                                        frame: f,
                                        announces: None,
                                    },
                                ));
                            }
                        }
                        Err(why) => self.engine.add_counter(why, 1),
                    }
                }
                // Proxy ARP answers the gateways in the dataplane; the control has nothing
                // to say to other ARP, nor to a reason newer than itself.
                Ok(pb::PuntReason::Arp) => self.engine.add_counter("ARP punt ignored", 1),
                _ => self
                    .engine
                    .add_counter("punt of an unknown reason dropped", 1),
            },
            DpEvent::Up {
                dataplane,
                port_macs,
                session_capacity,
                desired,
            } => {
                for (port, mac) in port_macs {
                    self.engine.set_port_mac(dataplane, port, mac);
                }
                self.engine
                    .set_dataplane_capacity(dataplane, session_capacity);
                let _ = desired.send(self.engine.desired(dataplane));
            }
            DpEvent::Removed { ids } => {
                for id in ids {
                    let out = self.engine.removed(id, now);
                    self.outputs(out, b);
                }
            }
            DpEvent::Refused { sessions } => {
                for (id, _) in sessions {
                    let out = self.engine.refused(id, now);
                    self.outputs(out, b);
                }
            }
            DpEvent::Missing { ids } => {
                for id in ids {
                    let out = self.engine.missing(id);
                    self.outputs(out, b);
                }
            }
            DpEvent::Stopping { dataplane } => {
                tracing::info!(dataplane, "dataplane stopping");
                // Its counters go with it: accounting reads them while it still serves them,
                // and without accounting the dataplane is told at once that nothing will be.
                match &self.radius {
                    Some(r) => {
                        let _ =
                            r.tx.send(crate::radius::RadiusCmd::ReadCounters { dataplane });
                    }
                    None => b.sends.push((dataplane, DpCmd::NothingToRead)),
                }
            }
        }
    }

    fn api_cmd(&mut self, cmd: ApiCmd, b: &mut Batch) {
        let now = now_ns();
        match cmd {
            ApiCmd::List {
                after,
                limit,
                filter,
                reply,
            } => {
                let page: Vec<SessionView> = self
                    .engine
                    .list(after, limit, move |s| filter.matches(s))
                    .map(view)
                    .collect();
                let next = if page.len() == limit {
                    page.last().map_or(0, |v| v.id)
                } else {
                    0
                };
                let _ = reply.send((page, next));
            }
            ApiCmd::Get { id, reply } => {
                let _ = reply.send(self.engine.session(id).map(view));
            }
            ApiCmd::Release { id, reply } => {
                let out = self.engine.disconnect(id, now);
                let found = out.is_some();
                self.outputs(out.unwrap_or_default(), b);
                b.replies.push(Box::new(move || {
                    let _ = reply.send(found);
                }));
            }
            ApiCmd::Drain { after, max, reply } => {
                let before = self.engine.sessions_len();
                let d = self.engine.drain(after, max, now);
                let answer = DrainStep {
                    before,
                    remaining: d.remaining,
                    started: d.started,
                    last: d.last,
                };
                self.outputs(d.out, b);
                b.replies.push(Box::new(move || {
                    let _ = reply.send(answer);
                }));
            }
            ApiCmd::Status { reply } => {
                // From the engine's census: a status call does not walk the sessions on the
                // thread that serves DHCP.
                let mut by_state: HashMap<&'static str, usize> = HashMap::new();
                for ((state, _), n) in self.engine.census().iter() {
                    *by_state.entry(state).or_default() += n as usize;
                }
                let (active, waiting) = self.engine.admission_counts();
                let _ = reply.send(StatusView {
                    sessions: self.engine.sessions_len(),
                    by_state,
                    cap: self.engine.cap().clone(),
                    admitted_active: active,
                    waiting_captive: waiting,
                    counters: self.engine.counters(),
                    store_errors: self.committer.errors(),
                    pools: self.engine.pool_usage().collect(),
                    subscribers: SubscribersView {
                        records: self.engine.subscribers.len(),
                        applying: self.engine.reauthorizing(),
                        file: self
                            .cfg
                            .subscribers_file
                            .as_ref()
                            .map(|p| SubscribersFileView {
                                path: p.display().to_string(),
                                rejected: self.subscribers_file.problem().map(str::to_string),
                                held: self.subscribers_file.held.as_ref().map(|h| HeldView {
                                    records: h.loaded.store.len(),
                                    removes: h.removed,
                                }),
                            }),
                    },
                });
            }
            ApiCmd::Desired { dataplane, reply } => {
                // Sent after this batch's programming, so an audit sees it applied.
                let desired = self.engine.desired(dataplane);
                b.replies.push(Box::new(move || {
                    let _ = reply.send(desired);
                }));
            }
            // Kept in the store, and answered once kept: a restart keeps what the API did.
            ApiCmd::ImportSubscribers {
                rows,
                errors,
                reply,
            } => {
                let kept: Vec<SubscriberChange> = rows
                    .iter()
                    .map(|(_, r)| SubscriberChange::Added(r.clone()))
                    .collect();
                let r = self.engine.subscribers.import_rows(rows, errors);
                if r.is_ok() {
                    for c in kept {
                        self.keep_subscriber_change(c, b);
                    }
                    self.engine.subscribers_changed();
                }
                let r = r.map_err(|errs| errs.iter().map(|e| e.to_string()).collect());
                b.replies.push(Box::new(move || {
                    let _ = reply.send(r);
                }));
            }
            ApiCmd::ShowSubscriber { key, reply } => {
                let _ = reply.send(self.engine.subscribers.get(&key).cloned());
            }
            ApiCmd::ListSubscribers {
                after,
                limit,
                reply,
            } => {
                let _ = reply.send(self.engine.subscribers.page(after.as_ref(), limit));
            }
            ApiCmd::RemoveSubscriber { key, reply } => {
                let removed = self.engine.subscribers.remove(&key);
                if removed {
                    self.keep_subscriber_change(SubscriberChange::Removed(key), b);
                    self.engine.subscribers_changed();
                }
                b.replies.push(Box::new(move || {
                    let _ = reply.send(removed);
                }));
            }
            ApiCmd::SubscribersFile(e) => self.subscribers_file(e, b),
            ApiCmd::HeldRemovals {
                after,
                limit,
                reply,
            } => {
                let _ = reply.send(self.held_removals(after.as_ref(), limit));
            }
            ApiCmd::AcceptSubscribersFile { reply } => {
                let r = self.accept_subscribers_file(b);
                // Answered once the content in force is kept.
                b.replies.push(Box::new(move || {
                    let _ = reply.send(r);
                }));
            }
            ApiCmd::ChangePlan { id, plan, reply } => {
                let r = self.engine.change_plan(id, &plan, now);
                let r = r.map(|out| self.outputs(out, b));
                b.replies.push(Box::new(move || {
                    let _ = reply.send(r);
                }));
            }
        }
    }
}

impl Running {
    /// In the store with `b`, and in the overlay a reread file must not undo.
    fn keep_subscriber_change(&mut self, c: SubscriberChange, b: &mut Batch) {
        if let Some(o) = &mut self.subscriber_overlay {
            o.note(c.clone());
        }
        b.store.push(StoreOp::Subscriber(c));
    }
}

/// Every bound session as the dataplane form (used by tests and audits).
pub fn desired_of(sessions: &[Session]) -> Vec<DpSession> {
    sessions.iter().filter_map(dp_session).collect()
}
