//! The RADIUS adapter: authorization (RFC 2865), accounting (RFC 2866) and dynamic
//! authorization (RFC 5176) for the engine, which stays pure.
//!
//! ```text
//!  engine task ── Output::Authorize / Accounting ──▶ forward() ──RadiusCmd──▶ radius task
//!       ▲                                                                     │ client.rs: ids,
//!       │◀── RadiusEvent::Auth(outcome) ◀── verified Access-Accept/Reject ◀──┘ retransmit,
//!       │                                                                       failover
//!       │◀── RadiusEvent::Das{req, reply} ◀── das.rs (UDP 3799) ◀── CoA / Disconnect-Request
//!       └── on_event(): engine.auth_result / change_plan / disconnect ─▶ ACK/NAK after the batch
//! ```
//!
//! Counters (timeouts, failovers, bad authenticators, NAKs) are added to the engine's, so
//! `/v1/status` lists them with the rest.

pub mod accounting;
pub mod auth;
pub mod client;
pub mod config;
pub mod das;

use std::collections::{BTreeSet, HashMap};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kbng_wire::radius::code;
use kbng_wire::{RadiusBuilder, RadiusPacket, WireError};
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, oneshot};

use self::accounting::{AcctSession, Counts, Status};
use self::auth::Subject;
use self::client::{Client, Done, Port, Request, Rng};
use self::config::RadiusConfig;
use self::das::{DasAnswer, DasRequest};
use crate::core::SessionId;
use crate::core::aaa::AuthOutcome;
use crate::core::engine::{AcctKind, Engine, Output, Session};
use crate::core::session::EndReason;

/// A request the client can build for any server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Req {
    Auth {
        session: SessionId,
        user_name: String,
        password: Vec<u8>,
        attrs: Vec<(u8, Vec<u8>)>,
    },
    Acct {
        session: SessionId,
        attrs: Vec<(u8, Vec<u8>)>,
    },
}

impl Request for Req {
    fn port(&self) -> Port {
        match self {
            Req::Auth { .. } => Port::Auth,
            Req::Acct { .. } => Port::Acct,
        }
    }

    fn build(&self, identifier: u8, ra: [u8; 16], secret: &[u8]) -> Result<Vec<u8>, WireError> {
        match self {
            Req::Auth {
                user_name,
                password,
                attrs,
                ..
            } => {
                let mut b = RadiusBuilder::access_request(identifier, ra);
                b.user_name(user_name)?;
                b.user_password(password, secret)?;
                for (k, v) in attrs {
                    b.attr(*k, v)?;
                }
                b.message_authenticator()?;
                b.finish(secret)
            }
            Req::Acct { attrs, .. } => {
                let mut b = RadiusBuilder::accounting_request(identifier);
                for (k, v) in attrs {
                    b.attr(*k, v)?;
                }
                b.finish(secret)
            }
        }
    }
}

/// From the engine task to the RADIUS task.
#[derive(Debug)]
pub enum RadiusCmd {
    Authorize(Subject),
    Start(AcctSession),
    Stop { id: SessionId, reason: EndReason },
}

/// From the RADIUS side to the engine task.
#[derive(Debug)]
pub enum RadiusEvent {
    Auth {
        id: SessionId,
        outcome: AuthOutcome,
    },
    Das {
        req: DasRequest,
        reply: oneshot::Sender<DasAnswer>,
    },
    Counts(Vec<(&'static str, u64)>),
}

/// Counters gathered by a RADIUS task, handed to the engine about once a second.
#[derive(Debug)]
pub struct Tally {
    counts: Vec<(&'static str, u64)>,
    since: Instant,
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            counts: Vec::new(),
            since: Instant::now(),
        }
    }
}

impl Tally {
    pub fn add_n(&mut self, what: &'static str, n: u64) {
        match self.counts.iter_mut().find(|(k, _)| *k == what) {
            Some((_, v)) => *v += n,
            None => self.counts.push((what, n)),
        }
    }

    pub fn add(&mut self, what: &'static str) {
        self.add_n(what, 1);
    }

    /// The counts gathered, once a second, when there are any.
    pub fn due(&mut self) -> Option<Vec<(&'static str, u64)>> {
        if self.counts.is_empty() || self.since.elapsed() < Duration::from_secs(1) {
            return None;
        }
        self.since = Instant::now();
        Some(std::mem::take(&mut self.counts))
    }
}

/// The engine task's end of the adapter.
#[derive(Debug)]
pub struct Link {
    pub tx: mpsc::UnboundedSender<RadiusCmd>,
    pub rx: mpsc::Receiver<RadiusEvent>,
    pub cfg: Arc<RadiusConfig>,
}

/// The next event, or never when RADIUS is not configured (for `select!`).
pub async fn recv(link: &mut Option<Link>) -> Option<RadiusEvent> {
    match link {
        Some(l) => match l.rx.recv().await {
            Some(ev) => Some(ev),
            None => std::future::pending().await,
        },
        None => std::future::pending().await,
    }
}

fn subject(s: &Session) -> Subject {
    Subject {
        id: s.id,
        mac: s.mac,
        circuit_id: s.circuit_id.clone(),
        remote_id: s.remote_id.clone(),
        line: s.line,
    }
}

fn acct_session(cfg: &RadiusConfig, s: &Session) -> Option<AcctSession> {
    let (lease, _) = s.state.bound()?;
    let subject = subject(s);
    Some(AcctSession {
        user_name: auth::user_name(cfg, &subject),
        subject,
        ip: lease.ip,
        bound_at_ns: lease.bound_at_ns,
        interim_secs: cfg.interim_secs,
        last: Counts::default(),
    })
}

/// The bound sessions restored from the store, whose Start was sent before the restart: the
/// accounting carries on with their interims and Stop.
pub fn restored<'a>(
    cfg: &RadiusConfig,
    sessions: impl Iterator<Item = &'a Session>,
) -> Vec<AcctSession> {
    sessions.filter_map(|s| acct_session(cfg, s)).collect()
}

impl Link {
    /// Hand an engine output that concerns RADIUS to the RADIUS task; returns whether it did.
    pub fn forward(&self, engine: &Engine, o: &Output) -> bool {
        let cmd = match o {
            Output::Authorize { id, .. } => engine
                .session(*id)
                .map(|s| RadiusCmd::Authorize(subject(s))),
            Output::Accounting { .. } if !self.cfg.accounting => None,
            Output::Accounting {
                id,
                kind: AcctKind::Start,
                ..
            } => engine
                .session(*id)
                .and_then(|s| acct_session(&self.cfg, s))
                .map(RadiusCmd::Start),
            Output::Accounting {
                id,
                kind: AcctKind::Stop,
                reason,
                ..
            } => Some(RadiusCmd::Stop {
                id: *id,
                reason: reason.unwrap_or(EndReason::Released),
            }),
            _ => return false,
        };
        if let Some(c) = cmd {
            let _ = self.tx.send(c);
        }
        true
    }
}

/// An engine-task reply to run after the batch's store commit and programming.
pub type Reply = Box<dyn FnOnce() + Send>;

/// Apply a RADIUS event to the engine (the engine task calls this).
pub fn on_event(engine: &mut Engine, ev: RadiusEvent, now_ns: u64) -> (Vec<Output>, Option<Reply>) {
    match ev {
        RadiusEvent::Auth { id, outcome } => (engine.auth_result(id, outcome, now_ns), None),
        RadiusEvent::Das { req, reply } => {
            let (out, answer) = das::apply(engine, &req, now_ns);
            let r: Reply = Box::new(move || {
                let _ = reply.send(answer);
            });
            (out, Some(r))
        }
        RadiusEvent::Counts(v) => {
            for (k, n) in v {
                engine.add_counter(k, n);
            }
            (vec![], None)
        }
    }
}

/// Start the client (and the DAS, if configured). `dataplanes` are the addresses the
/// accounting reads per-session counters from, by index.
pub async fn start(
    cfg: RadiusConfig,
    dataplanes: Vec<String>,
    restored: Vec<AcctSession>,
) -> std::io::Result<Link> {
    let cfg = Arc::new(cfg);
    let any: IpAddr = match cfg.servers.first().map(|s| s.auth) {
        Some(SocketAddr::V6(_)) => Ipv6Addr::UNSPECIFIED.into(),
        _ => Ipv4Addr::UNSPECIFIED.into(),
    };
    let socket = Arc::new(UdpSocket::bind(SocketAddr::new(any, 0)).await?);
    let (ev_tx, ev_rx) = mpsc::channel(8192);
    let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
    if let Some(d) = &cfg.das {
        let s = UdpSocket::bind(d.listen).await.map_err(|e| {
            std::io::Error::new(e.kind(), format!("aaa.radius.das.listen {}: {e}", d.listen))
        })?;
        tracing::info!(listen = %d.listen, "RADIUS dynamic authorization server");
        let clients = d.clients.iter().map(|(a, s)| (*a, s.0.clone())).collect();
        tokio::spawn(das::serve(Arc::clone(&cfg), clients, s, ev_tx.clone()));
    }
    let (dg_tx, dg_rx) = mpsc::channel(4096);
    let rs = Arc::clone(&socket);
    tokio::spawn(async move {
        let mut buf = vec![0u8; 4096];
        loop {
            match rs.recv_from(&mut buf).await {
                Ok((n, from)) => {
                    if dg_tx.send((from, buf[..n].to_vec())).await.is_err() {
                        return;
                    }
                }
                // A transient error (an ICMP error queued on the socket) must not end the
                // reader; the pause keeps a persistent one from spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    });
    let client = Client::new(cfg.servers.clone(), cfg.timeout, cfg.retries, Rng::open()?);
    let now = Instant::now();
    let mut due = BTreeSet::new();
    let mut sessions = HashMap::new();
    for s in restored {
        due.extend(next_interim(s.interim_secs, now).map(|t| (t, s.subject.id)));
        sessions.insert(s.subject.id, s);
    }
    let (fetched_tx, fetched_rx) = mpsc::channel(1024);
    let task = Task {
        cfg: Arc::clone(&cfg),
        client,
        socket,
        sessions,
        due,
        accept_interim: HashMap::new(),
        events: ev_tx,
        dataplanes,
        fetched_tx,
        tally: Tally::default(),
    };
    tokio::spawn(task.run(cmd_rx, dg_rx, fetched_rx));
    Ok(Link {
        tx: cmd_tx,
        rx: ev_rx,
        cfg,
    })
}

fn next_interim(secs: u32, now: Instant) -> Option<Instant> {
    (secs > 0).then(|| now + Duration::from_secs(u64::from(secs)))
}

/// Counters read for an accounting request that waits for them.
#[derive(Debug)]
enum Fetched {
    Interim {
        ids: Vec<SessionId>,
        counts: HashMap<SessionId, Counts>,
    },
    Stop {
        s: AcctSession,
        reason: EndReason,
        counts: Option<Counts>,
    },
}

/// Accept-supplied interims waiting for their session's Start; bounded (an accepted session
/// may never bind).
const ACCEPT_INTERIM_MAX: usize = 1 << 16;

struct Task {
    cfg: Arc<RadiusConfig>,
    client: Client<Req>,
    socket: Arc<UdpSocket>,
    sessions: HashMap<SessionId, AcctSession>,
    /// When each session's next Interim-Update is due. An entry whose session stopped is
    /// skipped when it comes up (ids are never reused), so a Stop need not search here.
    due: BTreeSet<(Instant, SessionId)>,
    accept_interim: HashMap<SessionId, u32>,
    events: mpsc::Sender<RadiusEvent>,
    dataplanes: Vec<String>,
    fetched_tx: mpsc::Sender<Fetched>,
    tally: Tally,
}

impl Task {
    async fn run(
        mut self,
        mut cmds: mpsc::UnboundedReceiver<RadiusCmd>,
        mut datagrams: mpsc::Receiver<(SocketAddr, Vec<u8>)>,
        mut fetched: mpsc::Receiver<Fetched>,
    ) {
        let mut tick = tokio::time::interval(Duration::from_millis(50));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            let mut done = Vec::new();
            tokio::select! {
                c = cmds.recv() => {
                    let Some(c) = c else { return };
                    done.extend(self.command(c));
                }
                d = datagrams.recv() => {
                    let Some((from, bytes)) = d else { return };
                    done.extend(self.client.on_datagram(from, &bytes));
                }
                f = fetched.recv() => {
                    if let Some(f) = f {
                        done.extend(self.fetched(f));
                    }
                }
                _ = tick.tick() => {
                    done.extend(self.client.on_tick(Instant::now()));
                    self.interims();
                }
            }
            for (dest, bytes) in self.client.take_outgoing() {
                if self.socket.send_to(&bytes, dest).await.is_err() {
                    self.tally.add("RADIUS send errors");
                }
            }
            for d in done {
                if !self.done(d).await {
                    return;
                }
            }
            for (k, n) in self.client.take_counters() {
                self.tally.add_n(k, n);
            }
            if let Some(c) = self.tally.due()
                && self.events.send(RadiusEvent::Counts(c)).await.is_err()
            {
                return;
            }
        }
    }

    fn send(&mut self, r: Req) -> Option<Done<Req>> {
        self.client.send(r, Instant::now())
    }

    fn command(&mut self, c: RadiusCmd) -> Option<Done<Req>> {
        match c {
            RadiusCmd::Authorize(s) => {
                self.tally.add("RADIUS Access-Requests");
                let r = auth::access_request(&self.cfg, &s);
                self.send(r)
            }
            RadiusCmd::Start(mut s) => {
                if let Some(i) = self.accept_interim.remove(&s.subject.id) {
                    s.interim_secs = i;
                }
                let r = accounting::request(&self.cfg, &s, Status::Start, crate::service::now_ns());
                let id = s.subject.id;
                let next = next_interim(s.interim_secs, Instant::now());
                self.due.extend(next.map(|t| (t, id)));
                self.sessions.insert(id, s);
                self.tally.add("RADIUS Accounting Start");
                self.send(r)
            }
            RadiusCmd::Stop { id, reason } => {
                let Some(s) = self.sessions.remove(&id) else {
                    self.tally.add("RADIUS Accounting Stop for no Start");
                    return None;
                };
                let addr = self
                    .dataplanes
                    .get(s.subject.line.dataplane as usize)
                    .cloned();
                let tx = self.fetched_tx.clone();
                tokio::spawn(async move {
                    let counts = match addr {
                        Some(a) => accounting::fetch_counters(&a, &[id]).await.remove(&id),
                        None => None,
                    };
                    let _ = tx.send(Fetched::Stop { s, reason, counts }).await;
                });
                None
            }
        }
    }

    /// Start reading counters for the sessions whose interim is due.
    fn interims(&mut self) {
        let now = Instant::now();
        let mut by_dp: HashMap<u32, Vec<SessionId>> = HashMap::new();
        while let Some(&(t, id)) = self.due.first() {
            if t > now {
                break;
            }
            self.due.pop_first();
            let Some(s) = self.sessions.get(&id) else {
                continue;
            };
            self.due
                .extend(next_interim(s.interim_secs, now).map(|t| (t, id)));
            by_dp.entry(s.subject.line.dataplane).or_default().push(id);
        }
        for (dp, ids) in by_dp {
            let addr = self.dataplanes.get(dp as usize).cloned();
            let tx = self.fetched_tx.clone();
            tokio::spawn(async move {
                let counts = match addr {
                    Some(a) => accounting::fetch_counters(&a, &ids).await,
                    None => HashMap::new(),
                };
                let _ = tx.send(Fetched::Interim { ids, counts }).await;
            });
        }
    }

    fn fetched(&mut self, f: Fetched) -> Vec<Done<Req>> {
        let now_ns = crate::service::now_ns();
        let mut done = Vec::new();
        match f {
            Fetched::Interim { ids, counts } => {
                for id in ids {
                    let Some(s) = self.sessions.get_mut(&id) else {
                        continue; // Stopped meanwhile.
                    };
                    match counts.get(&id) {
                        Some(c) => s.last = *c,
                        None => self.tally.add("RADIUS interim without fresh counters"),
                    }
                    let r = accounting::request(&self.cfg, s, Status::Interim, now_ns);
                    self.tally.add("RADIUS Accounting Interim-Update");
                    done.extend(self.send(r));
                }
            }
            Fetched::Stop {
                mut s,
                reason,
                counts,
            } => {
                match counts {
                    Some(c) => s.last = c,
                    None => self
                        .tally
                        .add("RADIUS Stop with the last interim's counters"),
                }
                let r = accounting::request(&self.cfg, &s, Status::Stop(reason), now_ns);
                self.tally.add("RADIUS Accounting Stop");
                done.extend(self.send(r));
            }
        }
        done
    }

    /// A request finished; false when the engine is gone.
    async fn done(&mut self, d: Done<Req>) -> bool {
        let (id, outcome) = match d {
            Done::Answered {
                req: Req::Auth { session, .. },
                code: c,
                packet,
            } => {
                let attrs: Vec<(u8, Vec<u8>)> = RadiusPacket::new_checked(&packet[..])
                    .map(|p| {
                        p.attributes()
                            .map_while(Result::ok)
                            .map(|a| (a.kind, a.value.to_vec()))
                            .collect()
                    })
                    .unwrap_or_default();
                let (outcome, interim) = auth::outcome(&self.cfg, c, &attrs);
                self.tally.add(match c {
                    code::ACCESS_ACCEPT => "RADIUS Access-Accept",
                    code::ACCESS_REJECT => "RADIUS Access-Reject",
                    _ => "RADIUS Access-Challenge refused",
                });
                if let Some(i) = interim {
                    if self.accept_interim.len() >= ACCEPT_INTERIM_MAX {
                        self.accept_interim.clear();
                    }
                    self.accept_interim.insert(session, i);
                }
                (session, outcome)
            }
            Done::GaveUp {
                req: Req::Auth { session, .. },
            } => {
                tracing::warn!(session, "no RADIUS server answered the Access-Request");
                (session, AuthOutcome::Unreachable)
            }
            Done::Answered {
                req: Req::Acct { .. },
                code: c,
                ..
            } => {
                self.tally.add(if c == code::ACCOUNTING_RESPONSE {
                    "RADIUS Accounting-Response"
                } else {
                    "RADIUS unexpected accounting answer"
                });
                return true;
            }
            Done::GaveUp {
                req: Req::Acct { session, .. },
            } => {
                tracing::warn!(session, "no RADIUS server answered an Accounting-Request");
                self.tally.add("RADIUS accounting requests lost");
                return true;
            }
        };
        self.events
            .send(RadiusEvent::Auth { id, outcome })
            .await
            .is_ok()
    }
}
