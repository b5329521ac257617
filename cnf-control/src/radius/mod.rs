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
pub mod acct_store;
pub mod auth;
pub mod client;
pub mod config;
pub mod das;
pub mod finals;
mod idle;
pub mod nas;
mod task;

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kbng_wire::{RadiusBuilder, WireError};
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, oneshot};

use self::accounting::{AcctSession, Counts, Reading};
use self::auth::Subject;
use self::client::{Client, Port, Request, Rng};
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
        /// CHAP-Password instead of User-Password.
        chap: bool,
        attrs: Vec<(u8, Vec<u8>)>,
    },
    Acct {
        session: SessionId,
        attrs: Vec<(u8, Vec<u8>)>,
    },
    /// Accounting-On or -Off (`nas.rs`).
    Nas {
        off: bool,
        attrs: Vec<(u8, Vec<u8>)>,
    },
}

impl Request for Req {
    fn port(&self) -> Port {
        match self {
            Req::Auth { .. } => Port::Auth,
            Req::Acct { .. } | Req::Nas { .. } => Port::Acct,
        }
    }

    fn build(&self, identifier: u8, ra: [u8; 16], secret: &[u8]) -> Result<Vec<u8>, WireError> {
        match self {
            Req::Auth {
                user_name,
                password,
                chap,
                attrs,
                ..
            } => {
                let mut b = RadiusBuilder::access_request(identifier, ra);
                b.user_name(user_name)?;
                if *chap {
                    b.chap_password(password)?;
                } else {
                    b.user_password(password, secret)?;
                }
                for (k, v) in attrs {
                    b.attr(*k, v)?;
                }
                b.message_authenticator()?;
                b.finish(secret)
            }
            Req::Acct { attrs, .. } | Req::Nas { attrs, .. } => {
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
    /// An Access-Request; `bound` is the session's address when it is already bound.
    Authorize {
        subject: Subject,
        bound: Option<Ipv4Addr>,
    },
    Start(AcctSession),
    Stop {
        id: SessionId,
        reason: EndReason,
    },
    /// Counters read just before the dataplane removed `asked` (`finals.rs`); an id asked but
    /// missing from `counts` could not be read.
    Finals {
        asked: Vec<SessionId>,
        counts: HashMap<SessionId, Reading>,
    },
    /// Clean shutdown: Accounting-Off if no session carries on (`nas.rs`).
    Off {
        reply: oneshot::Sender<nas::OffOutcome>,
    },
    /// A CoA changed a session's Idle-Timeout (0: none, counted from now), interim interval
    /// or Class.
    CoaAccounting(das::AcctChange),
    /// The dataplane is stopping: read its sessions' counters while it still serves them.
    ReadCounters {
        dataplane: u32,
    },
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
    /// The session sent nothing upstream for its Idle-Timeout.
    Idle {
        id: SessionId,
    },
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
        carried: Counts::default(),
        raw: None,
        class: Vec::new(),
        idle_secs: 0,
        idle_seen: None,
        queued: Default::default(),
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
            Output::Authorize { id, .. } => engine.session(*id).map(|s| RadiusCmd::Authorize {
                subject: subject(s),
                bound: s.state.bound().map(|(l, _)| l.ip),
            }),
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
            } => {
                // Marked before the removal reaches the dataplane task, so the dataplane
                // adapter reads the final counters ahead of it.
                finals::expect(*id);
                Some(RadiusCmd::Stop {
                    id: *id,
                    reason: reason.unwrap_or(EndReason::Released),
                })
            }
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
pub fn on_event(
    link: &Link,
    engine: &mut Engine,
    ev: RadiusEvent,
    now_ns: u64,
) -> (Vec<Output>, Option<Reply>) {
    match ev {
        RadiusEvent::Auth { id, outcome } => {
            crate::observe::auth_answered(id, &outcome);
            (engine.auth_result(id, outcome, now_ns), None)
        }
        RadiusEvent::Das { req, reply } => {
            let das::Applied { out, answer, acct } = das::apply(engine, &req, now_ns);
            if let Some(change) = acct {
                let _ = link.tx.send(RadiusCmd::CoaAccounting(change));
            }
            let r: Reply = Box::new(move || {
                let _ = reply.send(answer);
            });
            (out, Some(r))
        }
        RadiusEvent::Idle { id } => (engine.idle_timeout(id, now_ns), None),
        RadiusEvent::Counts(v) => {
            for (k, n) in v {
                engine.add_counter(k, n);
            }
            (vec![], None)
        }
    }
}

/// Start the client (and the DAS, if configured). `dataplanes` are the addresses the
/// accounting reads per-session counters from, by index. `kept_at` is the accounting's file
/// (`acct_store`): the restored sessions get their totals from it, and it keeps them from
/// here on; without it, totals start from the dataplane's counters at each start.
pub async fn start(
    cfg: RadiusConfig,
    dataplanes: Vec<crate::dataplane::Target>,
    mut restored: Vec<AcctSession>,
    kept_at: Option<&std::path::Path>,
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
    let mut kept = None;
    if cfg.accounting {
        finals::register(cmd_tx.clone());
        if let Some(path) = kept_at {
            let st = acct_store::AcctStore::open(path).map_err(std::io::Error::other)?;
            let given = st.restore(&mut restored).map_err(std::io::Error::other)?;
            tracing::info!(path = %path.display(), sessions = given, "accounting totals restored");
            kept = Some(acct_store::Writer::spawn(st, ev_tx.clone())?.0);
        }
    }
    let task = task::Task::new(
        Arc::clone(&cfg),
        client,
        socket,
        ev_tx,
        dataplanes,
        restored,
        kept,
    );
    tokio::spawn(task.run(cmd_rx, dg_rx));
    Ok(Link {
        tx: cmd_tx,
        rx: ev_rx,
        cfg,
    })
}
