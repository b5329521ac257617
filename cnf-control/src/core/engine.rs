//! The engine: every subscriber's session, the pools, admission, pacing and local AAA, driven
//! by punted DHCP frames, ticks and operator commands, and answering with [`Output`]s that the
//! adapters carry out. Pure and single-owner: one task owns it, so nothing here locks.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::net::Ipv4Addr;
use std::num::NonZeroU64;

use kbng_wire::DhcpMessageType;
use kbng_wire::MacAddr as WireMac;
use serde::{Deserialize, Serialize};

use super::aaa::{AddressChoice, AuthOutcome, Authorization, Identity, SubscriberStore};
use super::census::Census;
use super::dhcp::{self, Inbound, LeaseParams, RequestKind};
use super::licence::{Admission, Admit, Cap};
use super::mac_index::{MacHolder, MacIndex};
use super::pacing::{Pacer, PacingConfig};
use super::pool::{PoolConfig, Pools};
use super::session::{self, Action, EndReason, Event, Grant, NS_PER_SEC, State};
use super::session_table::SessionTable;
use super::{FastMap, FastSet, Line, MacAddr, SessionId};

/// What to do with subscribers the AAA does not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum UnknownPolicy {
    Captive,
    Reject,
}

/// The engine's validated configuration.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    pub pools: Vec<PoolConfig>,
    /// Plan name → dataplane plan id.
    pub plans: HashMap<String, u32>,
    pub default_plan: u32,
    /// Plan id given to unknown (captive) subscribers.
    pub captive_plan: u32,
    pub unknown: UnknownPolicy,
    pub option82_identity: bool,
    /// The access line (as the circuit-id `dataplane/port/outer/inner`) is the identity of a
    /// subscriber whose option 82 is not: 1:1 VLAN access, one subscriber per line.
    pub line_identity: bool,
    /// Authorization by RADIUS: the engine emits [`Output::Authorize`] and waits.
    pub external_auth: bool,
    pub pacing: PacingConfig,
    /// Sessions (any state) one line (port + VLANs) may hold: bounds starvation attacks.
    pub max_sessions_per_line: u32,
    pub quarantine_secs: u64,
    /// At most one re-sent OFFER per session per this many ns (DISCOVER storms).
    pub reoffer_interval_ns: u64,
}

/// How a subscriber is recognised across messages.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SubscriberKey {
    Mac {
        line: Line,
        mac: MacAddr,
    },
    /// Boxed, so that the key is 24 bytes rather than 56: it is in every session and keys
    /// the subscriber index, which is sized for the dataplanes' capacity (64 MiB less for a
    /// million sessions). Serialised as the struct variant it replaced (stored JSON rows).
    Opt82(Box<Opt82Key>),
}

/// An option 82 identity on one dataplane.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Opt82Key {
    pub dataplane: u32,
    pub circuit_id: Option<Vec<u8>>,
    pub remote_id: Option<Vec<u8>>,
}

/// One subscriber's session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    pub id: SessionId,
    pub key: SubscriberKey,
    pub line: Line,
    pub mac: MacAddr,
    pub circuit_id: Option<Vec<u8>>,
    pub remote_id: Option<Vec<u8>>,
    pub created_ns: u64,
    pub state: State,
    /// When a Session-Timeout (from the Access-Accept or a CoA) ends the session (Unix ns):
    /// no lease granted runs past it, and a timer ends the session there (`Engine::end_after`).
    /// Non-zero, so that the field costs 8 bytes a session, not 16.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ends_at_ns: Option<NonZeroU64>,
    /// At `ends_at_ns` the session is authorized again rather than ended (RADIUS
    /// Termination-Action RADIUS-Request): its leases are not cut to that end.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reauthorize_at_end: bool,
    /// The request to answer next (not persisted). Boxed because it is almost always `None`
    /// and an inline `Inbound` (about 300 bytes) made every held session that much larger.
    #[serde(skip)]
    pub pending: Option<Box<Inbound>>,
    #[serde(skip)]
    pub last_offer_ns: u64,
}

impl Session {
    /// Who the AAA is asked about.
    pub fn identity(&self) -> Identity {
        Identity {
            mac: self.mac,
            circuit_id: self.circuit_id.clone(),
            remote_id: self.remote_id.clone(),
        }
    }
}

/// A session as a dataplane holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DpSession {
    pub id: SessionId,
    pub port: u32,
    pub outer_vlan: u16,
    pub inner_vlan: u16,
    pub mac: MacAddr,
    pub ip: Ipv4Addr,
    pub plan_id: u32,
    pub captive: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProgramOp {
    Install(DpSession),
    Modify {
        id: SessionId,
        plan_id: u32,
        captive: bool,
    },
    Remove(SessionId),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum AcctKind {
    Start,
    Stop,
}

/// What the adapters must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    Inject {
        dataplane: u32,
        port: u32,
        frame: Vec<u8>,
        /// The session an ACK announces: the frame leaves only if that session's install,
        /// issued before it, was not refused.
        announces: Option<SessionId>,
    },
    Program {
        dataplane: u32,
        op: ProgramOp,
    },
    Authorize {
        id: SessionId,
        identity: Identity,
    },
    Accounting {
        id: SessionId,
        kind: AcctKind,
        ip: Option<Ipv4Addr>,
        mac: MacAddr,
        reason: Option<EndReason>,
    },
    Persist(Box<Session>),
    Forget(SessionId),
    Changed {
        id: SessionId,
        state: &'static str,
    },
    /// Relay mode: a client message for a DHCP server.
    ToServer {
        server: std::net::SocketAddrV4,
        payload: Vec<u8>,
    },
}

/// The engine.
#[derive(Debug)]
pub struct Engine {
    cfg: EngineConfig,
    pools: Pools,
    params: Vec<LeaseParams>,
    server_ids: Vec<Ipv4Addr>,
    pub subscribers: SubscriberStore,
    admission: Admission,
    pacer: Pacer<SubscriberKey, (Line, Inbound)>,
    sessions: SessionTable,
    /// Sessions per state and plan, kept with `sessions` (the gauges read it).
    census: Census,
    by_key: FastMap<SubscriberKey, SessionId>,
    /// Address -> the session holding it, kept with `sessions` (RFC 5176 requests name a
    /// session by Framed-IP-Address; finding it by walking every session held this thread).
    by_ip: FastMap<Ipv4Addr, SessionId>,
    /// MAC -> the session holding it, kept with `sessions` (a request may name only that).
    by_mac: MacIndex,
    per_line: FastMap<Line, u32>,
    /// Sessions (any state) per dataplane: each may end up installed there, so a dataplane
    /// whose reported capacity they fill takes no new subscriber.
    per_dataplane: FastMap<u32, u64>,
    /// Deadlines, earliest first, never removed: a session whose deadline moved leaves its old
    /// entry behind, and the `Tick` it becomes is a no-op (the state machine checks its own
    /// deadline). A heap, not an ordered set: a push is a few comparisons where a B-tree
    /// insert searched every level (8% of the engine's instructions per DORA).
    timers: BinaryHeap<Reverse<(u64, SessionId)>>,
    quarantine: VecDeque<(u64, Ipv4Addr)>,
    sticky: FastMap<SubscriberKey, Ipv4Addr>,
    port_macs: FastMap<(u32, u32), WireMac>,
    /// Session capacity each connected dataplane reported (sizes the session indexes).
    capacities: FastMap<u32, u64>,
    /// The sessions the indexes are sized for (from `capacities`).
    session_room: usize,
    next_id: SessionId,
    /// Bumped several times per DHCP message: hashed, not searched by string compares.
    counters: FastMap<&'static str, u64>,
    /// Relay mode (`engine_relay.rs`): the relay agent, and server ACKs awaiting `SendAck`.
    relay: Option<super::relay::Relay>,
    relay_acks: FastMap<SubscriberKey, relay_glue::RelayAck>,
    /// A walk applying a changed subscriber store to the sessions (`engine_reauth.rs`).
    sweep: Option<reauth::Sweep>,
    /// The last DISCOVER (or relayed ACK) for a releasing session, handled once its removal
    /// is confirmed (`engine_releasing.rs`); at most one per releasing session.
    after_removal: FastMap<SessionId, releasing::Held>,
    /// Sessions authorized again at their Session-Timeout, awaiting the answer
    /// (`engine_termination.rs`).
    reauthorizing: FastSet<SessionId>,
}

/// What the server answers a client.
struct Reply {
    kind: DhcpMessageType,
    /// The address offered or acknowledged (unspecified for a NAK or an INFORM's ACK).
    yiaddr: Ipv4Addr,
    /// The pool whose lease parameters the reply carries.
    pool: usize,
    /// The session an ACK announces (see [`Output::Inject`]).
    announces: Option<SessionId>,
    /// The lease time, when not the pool's (a session that ends sooner).
    lease_secs: Option<u32>,
}

impl Reply {
    /// A NAK, or the ACK of an INFORM: no address, no session.
    fn without_address(kind: DhcpMessageType, pool: usize) -> Self {
        Reply {
            kind,
            yiaddr: Ipv4Addr::UNSPECIFIED,
            pool,
            announces: None,
            lease_secs: None,
        }
    }
}

const STICKY_MAX: usize = 1 << 20;
const FALLBACK_MAC: WireMac = WireMac([0x02, 0x6b, 0x62, 0x6e, 0x67, 0x01]);

impl Engine {
    pub fn new(
        cfg: EngineConfig,
        cap: Cap,
        now_ns: u64,
    ) -> Result<Engine, Vec<super::pool::PoolError>> {
        let pools = Pools::new(cfg.pools.clone())?;
        let params: Vec<LeaseParams> = cfg
            .pools
            .iter()
            .map(|p| LeaseParams {
                server_id: p.gateway,
                subnet_mask: Ipv4Addr::from(if p.prefix_len == 0 {
                    0
                } else {
                    u32::MAX << (32 - p.prefix_len)
                }),
                router: p.gateway,
                dns: p.dns.clone(),
                lease_secs: p.lease_secs,
            })
            .collect();
        let server_ids = params.iter().map(|p| p.server_id).collect();
        Ok(Engine {
            pacer: Pacer::new(cfg.pacing, now_ns),
            cfg,
            pools,
            params,
            server_ids,
            subscribers: SubscriberStore::default(),
            admission: Admission::new(cap),
            sessions: SessionTable::default(),
            census: Census::default(),
            by_key: FastMap::default(),
            by_ip: FastMap::default(),
            by_mac: MacIndex::default(),
            per_line: FastMap::default(),
            per_dataplane: FastMap::default(),
            timers: BinaryHeap::new(),
            quarantine: VecDeque::new(),
            sticky: FastMap::default(),
            port_macs: FastMap::default(),
            capacities: FastMap::default(),
            session_room: 0,
            next_id: 1,
            counters: FastMap::default(),
            relay: None,
            relay_acks: FastMap::default(),
            sweep: None,
            after_removal: FastMap::default(),
            reauthorizing: FastSet::default(),
        })
    }

    fn count(&mut self, what: &'static str) {
        *self.counters.entry(what).or_default() += 1;
    }

    /// Puts `subs` in force (a changed subscribers file, the API's changes laid over it):
    /// admissions look there from now on, and the sessions admitted are walked to follow it.
    pub fn replace_subscribers(&mut self, subs: SubscriberStore) {
        self.subscribers = subs;
        self.count("subscribers file reloaded");
        self.subscribers_changed();
    }

    /// A changed subscribers file that cannot be used: counted, the store in force stays.
    pub fn subscribers_file_rejected(&mut self) {
        self.count("subscribers file rejected");
    }

    /// A changed subscribers file that would remove too many records: counted, held.
    pub fn subscribers_file_held(&mut self) {
        self.count("subscribers file held: removes too many records");
    }

    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        let mut v: Vec<_> = self.counters.iter().map(|(k, v)| (*k, *v)).collect();
        v.sort_unstable_by_key(|(k, _)| *k);
        v.push(("pacing dropped", self.pacer.dropped));
        v.push(("pacing replaced", self.pacer.replaced));
        v.push(("pacing stale dropped", self.pacer.stale));
        v.push(("pacing queued", self.pacer.queued() as u64));
        if let Some(r) = &self.relay {
            v.extend(r.counters());
        }
        v
    }

    /// Each pool's addresses, as status and metrics report them.
    pub fn pool_usage(&self) -> impl Iterator<Item = kbng_crds::bng::PoolUsage> + '_ {
        self.pools.iter().map(|p| kbng_crds::bng::PoolUsage {
            name: p.config.name.clone(),
            leasable: p.usable(),
            in_use: p.in_use(),
            fixed: p.held_excluded() as u32,
        })
    }

    pub fn cap(&self) -> &Cap {
        self.admission.cap()
    }

    pub fn admission_counts(&self) -> (usize, usize) {
        (self.admission.active(), self.admission.waiting())
    }

    pub fn next_id(&self) -> SessionId {
        self.next_id
    }

    pub fn set_port_mac(&mut self, dataplane: u32, port: u32, mac: MacAddr) {
        self.port_macs.insert((dataplane, port), WireMac(mac));
    }

    /// Record that `dataplane` holds up to `sessions` sessions and size the session indexes
    /// (subscriber, address, MAC, admission) for all dataplanes' sessions (no more than the
    /// pools can address, in server mode), so that filling them never rehashes: at 229,376 and
    /// 458,752 sessions a rehash held this thread for 7.6 and 16 ms (engine_dora bench), while
    /// punted frames queued behind it.
    pub fn set_dataplane_capacity(&mut self, dataplane: u32, sessions: u64) {
        self.capacities.insert(dataplane, sessions);
        let mut want: u64 = self.capacities.values().sum();
        let addresses: u64 = self.pools.iter().map(|p| u64::from(p.usable())).sum();
        if self.relay.is_none() && addresses > 0 {
            want = want.min(addresses);
        }
        self.session_room = usize::try_from(want).unwrap_or(usize::MAX);
        self.by_key
            .reserve(self.session_room.saturating_sub(self.by_key.len()));
        self.by_ip
            .reserve(self.session_room.saturating_sub(self.by_ip.len()));
        self.by_mac.reserve(self.session_room);
        self.admission.reserve(self.session_room);
    }

    /// Why a new session on `line` may not be created, if it may not (the counter to bump):
    /// the line holds `max_sessions_per_line` sessions, counting `in_flight` ones about to be
    /// created; or its dataplane's sessions fill the capacity it reported (its tables would
    /// refuse another install; unknown until the dataplane has connected once).
    pub(super) fn no_room(&self, line: Line, in_flight: u32) -> Option<&'static str> {
        let on_line = self.per_line.get(&line).copied().unwrap_or(0);
        if on_line.saturating_add(in_flight) >= self.cfg.max_sessions_per_line {
            return Some("line session limit");
        }
        let on_dataplane = self
            .per_dataplane
            .get(&line.dataplane)
            .copied()
            .unwrap_or(0);
        let full = self
            .capacities
            .get(&line.dataplane)
            .is_some_and(|&cap| on_dataplane >= cap);
        full.then_some("dataplane full")
    }

    /// Gateways (address, prefix length) the dataplanes must answer ARP for.
    pub fn gateways(&self) -> Vec<(Ipv4Addr, u8)> {
        self.cfg
            .pools
            .iter()
            .map(|p| (p.gateway, p.prefix_len))
            .collect()
    }

    pub fn sessions_len(&self) -> usize {
        self.sessions.len()
    }

    /// Sessions per state and plan, without walking them.
    pub fn census(&self) -> &Census {
        &self.census
    }

    pub fn session(&self, id: SessionId) -> Option<&Session> {
        self.sessions.get(&id)
    }

    /// Sessions with id > `after`, in id order, at most `limit`, matching `filter`.
    pub fn list<'a>(
        &'a self,
        after: SessionId,
        limit: usize,
        filter: impl Fn(&Session) -> bool + 'a,
    ) -> impl Iterator<Item = &'a Session> + 'a {
        self.sessions
            .from_id(after.saturating_add(1))
            .filter(move |s| filter(s))
            .take(limit)
    }

    /// What `dataplane` should hold: every bound session of its lines.
    pub fn desired(&self, dataplane: u32) -> Vec<DpSession> {
        self.sessions
            .values()
            .filter(|s| s.line.dataplane == dataplane)
            .filter_map(dp_session)
            .collect()
    }

    /// Rebuild from the store: bound sessions only, with their original timestamps. Leases
    /// that ran out while the control was down expire at the next tick.
    pub fn restore(&mut self, sessions: Vec<Session>, next_id: SessionId) -> Vec<String> {
        let mut problems = Vec::new();
        self.next_id = self.next_id.max(next_id);
        for s in sessions {
            let Some((lease, grant)) = s.state.bound() else {
                problems.push(format!(
                    "session {} stored in state {}",
                    s.id,
                    s.state.name()
                ));
                continue;
            };
            if self.pools.allocate_held(lease.ip).is_none() {
                problems.push(format!(
                    "session {}: address {} not free in the pools",
                    s.id, lease.ip
                ));
                continue;
            }
            match grant {
                Grant::Active { .. } => self.admission.restore_active(s.id),
                Grant::Captive { over_cap: true, .. } => {
                    self.admission.admit(s.id);
                }
                Grant::Captive { .. } => {}
            }
            self.next_id = self.next_id.max(s.id + 1);
            self.by_key.insert(s.key.clone(), s.id);
            *self.per_line.entry(s.line).or_default() += 1;
            *self.per_dataplane.entry(s.line.dataplane).or_default() += 1;
            if let Some(d) = s.state.next_deadline_ns() {
                self.timers.push(Reverse((d, s.id)));
            }
            if let Some(end) = s.ends_at_ns {
                self.timers.push(Reverse((end.get(), s.id)));
            }
            self.census.add(&s.state);
            self.index_ip(s.id, None, s.state.ip());
            self.by_mac.add(s.mac, s.id);
            self.sessions.insert(s.id, s);
        }
        problems
    }

    /// How the subscriber on `line` that sent `inb` presents itself: with the option 82 it
    /// carries, or, with `line_identity` and no option 82 taken as identity, with its line as
    /// the circuit-id (the form a relay's own option 82 has, `super::relay::circuit_id`).
    fn identity_of(&self, line: Line, inb: &Inbound) -> Identity {
        let info = inb.msg.relay_agent_info.as_ref();
        let carried = info.is_some_and(|i| i.circuit_id.is_some() || i.remote_id.is_some());
        if self.cfg.line_identity && !(self.cfg.option82_identity && carried) {
            return Identity {
                mac: inb.msg.chaddr.0,
                circuit_id: Some(super::relay::circuit_id(&line)),
                remote_id: None,
            };
        }
        Identity {
            mac: inb.msg.chaddr.0,
            circuit_id: info.and_then(|i| i.circuit_id.clone()),
            remote_id: info.and_then(|i| i.remote_id.clone()),
        }
    }

    /// Whether subscribers are known (and their sessions keyed) by circuit-id and remote-id
    /// before their MAC: option 82's, or their line's.
    fn by_circuit(&self) -> bool {
        self.cfg.option82_identity || self.cfg.line_identity
    }

    fn key_of(&self, line: Line, inb: &Inbound) -> SubscriberKey {
        let id = self.identity_of(line, inb);
        if self.by_circuit() && (id.circuit_id.is_some() || id.remote_id.is_some()) {
            SubscriberKey::Opt82(Box::new(Opt82Key {
                dataplane: line.dataplane,
                circuit_id: id.circuit_id,
                remote_id: id.remote_id,
            }))
        } else {
            SubscriberKey::Mac {
                line,
                mac: inb.msg.chaddr.0,
            }
        }
    }

    /// A DHCP frame punted by `dataplane` on access `port`.
    pub fn handle_dhcp(
        &mut self,
        dataplane: u32,
        port: u32,
        frame: &[u8],
        now_ns: u64,
    ) -> Vec<Output> {
        let inb = match dhcp::parse_frame(frame) {
            Ok(i) => i,
            Err(d) => {
                self.count(d.as_str());
                return vec![];
            }
        };
        let line = Line {
            dataplane,
            port,
            outer_vlan: inb.l2.outer_vid().unwrap_or(0),
            inner_vlan: inb.l2.inner_vid().unwrap_or(0),
        };
        let key = self.key_of(line, &inb);
        // A DORA message yields up to six outputs (state change, reply, program, persist,
        // accounting): one allocation instead of growing through 1, 2 and 4.
        let mut out = Vec::with_capacity(8);
        if self.relay.is_some() {
            self.relay_client(line, key, inb, frame, now_ns, &mut out);
            return out;
        }
        let existing = self.by_key.get(&key).copied();
        let existing = match key {
            // The MAC is in the key: another device has another key.
            SubscriberKey::Mac { .. } => existing,
            SubscriberKey::Opt82(_) => self.unless_replaced(existing, &inb, now_ns, &mut out),
        };
        match inb.msg.message_type {
            DhcpMessageType::Discover => {
                self.count("DISCOVER");
                self.discover(existing, key, line, inb, now_ns, &mut out);
            }
            DhcpMessageType::Request => {
                self.count("REQUEST");
                let kind = dhcp::classify_request(&inb.msg, &self.server_ids);
                self.request(existing, kind, line, inb, now_ns, &mut out);
            }
            DhcpMessageType::Release => {
                self.count("RELEASE");
                match existing {
                    Some(id) if self.session_ip(id) == Some(inb.msg.ciaddr) => {
                        self.event(id, Event::Release, now_ns, &mut out)
                    }
                    _ => self.count("RELEASE for no lease"),
                }
            }
            DhcpMessageType::Decline => {
                self.count("DECLINE");
                match existing {
                    Some(id) if self.session_ip(id) == inb.msg.requested_ip => {
                        self.event(id, Event::Decline, now_ns, &mut out)
                    }
                    _ => self.count("DECLINE for no lease"),
                }
            }
            DhcpMessageType::Inform => {
                self.count("INFORM");
                // RFC 2131 §4.3.5: answer with configuration, no address and no lease.
                if let Some(p) = self.pools.pool_of(inb.msg.ciaddr) {
                    let ack = Reply::without_address(DhcpMessageType::Ack, p);
                    self.reply(&inb, line, ack, &mut out);
                } else {
                    self.count("INFORM from outside the pools");
                }
            }
            _ => self.count("server message from a client"),
        }
        out
    }

    /// Session `existing`, found by the identity of `inb`, unless `inb` came from another
    /// device: with option 82 or line identity, a CPE swapped on the line. Its session held
    /// the old MAC, which the dataplane checks upstream, so it ends (Port-Preempted) and the
    /// new device starts its own: at once if the old one was not yet bound, else once the
    /// dataplanes confirm the removal (a DISCOVER meanwhile is held and answered then, a
    /// REQUEST is NAKed). The line's address is offered to the new one again (sticky by
    /// identity).
    fn unless_replaced(
        &mut self,
        existing: Option<SessionId>,
        inb: &Inbound,
        now_ns: u64,
        out: &mut Vec<Output>,
    ) -> Option<SessionId> {
        let id = existing?;
        let asks = matches!(
            inb.msg.message_type,
            DhcpMessageType::Discover | DhcpMessageType::Request
        );
        if asks && self.held_by_another_device(id, inb) {
            self.end_replaced(id, now_ns, out);
            return self.by_key.get(&self.sessions.get(&id)?.key).copied();
        }
        Some(id)
    }

    /// Whether session `id`, found by the identity of `inb`, holds another device's MAC.
    fn held_by_another_device(&self, id: SessionId, inb: &Inbound) -> bool {
        self.sessions
            .get(&id)
            .is_some_and(|s| s.mac != inb.msg.chaddr.0)
    }

    /// Session `id` ends because another device came with its identity (server and relay).
    fn end_replaced(&mut self, id: SessionId, now_ns: u64, out: &mut Vec<Output>) {
        self.count("session replaced: another MAC with its identity");
        self.event(id, Event::Replaced, now_ns, out);
    }

    fn session_ip(&self, id: SessionId) -> Option<Ipv4Addr> {
        self.sessions.get(&id).and_then(|s| s.state.ip())
    }

    /// A DISCOVER for session `existing` (found by `key`), or for a new one.
    fn discover(
        &mut self,
        existing: Option<SessionId>,
        key: SubscriberKey,
        line: Line,
        inb: Inbound,
        now_ns: u64,
        out: &mut Vec<Output>,
    ) {
        if let Some(id) = existing {
            self.discover_existing(id, line, inb, now_ns, out);
            return;
        }
        // Checked before pacing, so one line's flood spends no tokens.
        if let Some(why) = self.no_room(line, 0) {
            self.count(why);
            return;
        }
        if let Some((line, inb)) = self.pacer.offer(key, (line, inb), now_ns) {
            self.create(line, inb, None, now_ns, out);
        }
    }

    fn discover_existing(
        &mut self,
        id: SessionId,
        line: Line,
        inb: Inbound,
        now_ns: u64,
        out: &mut Vec<Output>,
    ) {
        let Some(s) = self.sessions.get_mut(&id) else {
            return;
        };
        if matches!(s.state, State::Releasing { .. }) {
            self.hold_discover(id, line, inb, now_ns);
            return;
        }
        if now_ns < s.last_offer_ns.saturating_add(self.cfg.reoffer_interval_ns)
            && !matches!(s.state, State::Discovering { .. })
        {
            self.count("DISCOVER storm suppressed");
            return;
        }
        let xid = inb.msg.xid;
        s.pending = Some(Box::new(inb));
        self.event(id, Event::Discover { xid }, now_ns, out);
    }

    fn request(
        &mut self,
        existing: Option<SessionId>,
        kind: RequestKind,
        line: Line,
        inb: Inbound,
        now_ns: u64,
        out: &mut Vec<Output>,
    ) {
        let xid = inb.msg.xid;
        let (ip, ours) = match kind {
            RequestKind::Selecting { ip, ours } => (ip, ours),
            RequestKind::InitReboot { ip } | RequestKind::Renewing { ip } => (ip, true),
            RequestKind::Invalid => {
                self.count("REQUEST without address");
                return;
            }
        };
        if let Some(id) = existing {
            if let Some(s) = self.sessions.get_mut(&id) {
                s.pending = Some(Box::new(inb));
            }
            let ev = Event::Request {
                xid,
                ip,
                server_matches: ours,
            };
            self.event(id, ev, now_ns, out);
            return;
        }
        if !ours {
            return; // Another server's client.
        }
        // No session: we lost it (restart before the store commit) or never had it. Adopt the
        // address if it is ours and free, else NAK so the client starts over.
        let Some(p) = self.pools.pool_of(ip) else {
            self.count("NAK: address not ours");
            self.reply(
                &inb,
                line,
                Reply::without_address(DhcpMessageType::Nak, 0),
                out,
            );
            return;
        };
        if self.pools.is_allocated(ip) {
            self.count("NAK: address taken");
            self.reply(
                &inb,
                line,
                Reply::without_address(DhcpMessageType::Nak, p),
                out,
            );
            return;
        }
        self.create(line, inb, Some(ip), now_ns, out);
    }

    /// A new session for a paced DISCOVER (`adopt` = None) or an adopted REQUEST.
    fn create(
        &mut self,
        line: Line,
        inb: Inbound,
        adopt: Option<Ipv4Addr>,
        now_ns: u64,
        out: &mut Vec<Output>,
    ) {
        let key = self.key_of(line, &inb);
        if self.by_key.contains_key(&key) {
            // A paced DISCOVER whose subscriber got a session meanwhile.
            return;
        }
        if let Some(why) = self.no_room(line, 0) {
            self.count(why);
            return;
        }
        let ip = match adopt {
            Some(ip) => self.pools.allocate_specific(ip).map(|_| ip),
            None => {
                let prefer = self.sticky.get(&key).copied();
                self.pools.allocate(prefer).map(|(_, ip)| ip)
            }
        };
        let Some(ip) = ip else {
            self.count("pool exhausted");
            return;
        };
        let id = self.next_id;
        self.next_id += 1;
        let identity = self.identity_of(line, &inb);
        let xid = inb.msg.xid;
        let state = match adopt {
            Some(_) => State::Authenticating {
                xid,
                ip,
                since_ns: now_ns,
            },
            None => State::Discovering {
                xid,
                ip,
                since_ns: now_ns,
            },
        };
        let s = Session {
            id,
            key: key.clone(),
            line,
            mac: identity.mac,
            circuit_id: identity.circuit_id.clone(),
            remote_id: identity.remote_id.clone(),
            created_ns: now_ns,
            state,
            ends_at_ns: None,
            reauthorize_at_end: false,
            pending: Some(Box::new(inb)),
            last_offer_ns: 0,
        };
        self.count("sessions created");
        self.by_key.insert(key, id);
        *self.per_line.entry(line).or_default() += 1;
        *self.per_dataplane.entry(line.dataplane).or_default() += 1;
        self.census.add(&s.state);
        self.index_ip(id, None, s.state.ip());
        self.by_mac.add(s.mac, id);
        self.sessions.insert(id, s);
        self.changed(id, out);
        self.schedule(id);
        if self.cfg.external_auth {
            out.push(Output::Authorize { id, identity });
        } else {
            let grant = self.authorize_local(id, &identity);
            self.event(id, Event::Authorized(grant), now_ns, out);
        }
    }

    fn authorize_local(&mut self, id: SessionId, identity: &Identity) -> Option<Grant> {
        let auth = self.subscribers.lookup(identity, self.by_circuit());
        let (plan, address) = match auth {
            Authorization::Known { plan, address } => (plan, address),
            Authorization::Unknown => {
                return match self.cfg.unknown {
                    UnknownPolicy::Captive => Some(Grant::Captive {
                        plan_id: self.cfg.captive_plan,
                        over_cap: false,
                    }),
                    UnknownPolicy::Reject => None,
                };
            }
        };
        self.grant_with_address(id, plan.as_deref(), &address, Asker::Record)
    }

    /// Admission of a subscriber the AAA knows, on the address it asks for: one that cannot
    /// be given is handled as a Reject (counted apart); a REQUEST for another is NAKed.
    fn grant_with_address(
        &mut self,
        id: SessionId,
        plan: Option<&str>,
        address: &AddressChoice,
        asker: Asker,
    ) -> Option<Grant> {
        match self.take_asked_address(id, address, asker) {
            Ok(()) => self.grant_for(id, plan),
            Err(refusal) => {
                self.count(refusal.counter(asker));
                match refusal {
                    AddressRefusal::Nak => None,
                    _ => self.unauthorized_grant(),
                }
            }
        }
    }

    /// The dataplane id of plan name `plan` (`None` = the default plan; so is a name the
    /// control lacks, counted).
    fn plan_id(&mut self, plan: Option<&str>) -> u32 {
        match plan {
            None => self.cfg.default_plan,
            Some(name) => match self.cfg.plans.get(name) {
                Some(p) => *p,
                None => {
                    self.count("unknown plan name");
                    self.cfg.default_plan
                }
            },
        }
    }

    /// Admission of a known subscriber with plan name `plan` (`None` = default).
    fn grant_for(&mut self, id: SessionId, plan: Option<&str>) -> Option<Grant> {
        let plan_id = self.plan_id(plan);
        Some(match self.admission.admit(id) {
            Admit::Active => Grant::Active { plan_id },
            Admit::Captive => {
                self.count("admitted captive over cap");
                Grant::Captive {
                    plan_id,
                    over_cap: true,
                }
            }
        })
    }

    /// The answer of an external AAA. A late answer (the attempt already timed out, or the
    /// session is bound) changes nothing and is counted.
    pub fn auth_result(&mut self, id: SessionId, result: AuthOutcome, now_ns: u64) -> Vec<Output> {
        if self.reauthorizing.remove(&id) {
            return self.reauthorized(id, result, now_ns);
        }
        let mut out = Vec::new();
        let waiting = self.sessions.get(&id).is_some_and(|s| {
            matches!(
                s.state,
                State::Discovering { .. } | State::Authenticating { .. }
            )
        });
        if !waiting {
            self.count("late authorization ignored");
            return out;
        }
        let grant = match result {
            AuthOutcome::Accept {
                plan,
                session_timeout_secs,
                address,
                reauthorize,
            } => {
                self.count("authorization accepted");
                // Zero is "no limit" to some servers, as it is in a CoA.
                let secs = session_timeout_secs.unwrap_or(0);
                self.end_after(id, secs, now_ns);
                if let Some(s) = self.sessions.get_mut(&id) {
                    s.reauthorize_at_end = reauthorize && secs > 0;
                }
                self.grant_with_address(id, plan.as_deref(), &address, Asker::Radius)
            }
            AuthOutcome::Reject | AuthOutcome::Unreachable => {
                self.count(if result == AuthOutcome::Reject {
                    "authorization rejected"
                } else {
                    "authorization unreachable"
                });
                self.unauthorized_grant()
            }
        };
        self.event(id, Event::Authorized(grant), now_ns, &mut out);
        out
    }

    /// What a subscriber the AAA did not authorize gets: the walled garden, or nothing.
    fn unauthorized_grant(&self) -> Option<Grant> {
        match self.cfg.unknown {
            UnknownPolicy::Captive => Some(Grant::Captive {
                plan_id: self.cfg.captive_plan,
                over_cap: false,
            }),
            UnknownPolicy::Reject => None,
        }
    }

    /// Add `n` to counter `what` on behalf of an adapter (RADIUS), so that `/v1/status`
    /// shows every counter in one list.
    pub fn add_counter(&mut self, what: &'static str, n: u64) {
        *self.counters.entry(what).or_default() += n;
    }

    fn schedule(&mut self, id: SessionId) {
        if let Some(d) = self
            .sessions
            .get(&id)
            .and_then(|s| s.state.next_deadline_ns())
        {
            self.timers.push(Reverse((d, id)));
        }
    }

    fn changed(&self, id: SessionId, out: &mut Vec<Output>) {
        if let Some(s) = self.sessions.get(&id) {
            out.push(Output::Changed {
                id,
                state: s.state.name(),
            });
        }
    }

    fn lease_secs_for(&self, ip: Option<Ipv4Addr>) -> (usize, u32) {
        let p = ip.and_then(|ip| self.pools.pool_of(ip)).unwrap_or(0);
        (p, self.params.get(p).map(|p| p.lease_secs).unwrap_or(3600))
    }

    /// Feed one event to a session and carry out its actions. The session is looked up once
    /// before its step and once after its actions (which may end it): this runs several times
    /// per DORA, and lookups were most of its cost.
    fn event(&mut self, id: SessionId, ev: Event, now_ns: u64, out: &mut Vec<Output>) {
        let Some(s) = self.sessions.get_mut(&id) else {
            return;
        };
        let before = s.state.name();
        let old_state = s.state.clone();
        // A session authorized again at its end is not cut there: its leases run whole.
        let ends_at = s.ends_at_ns.filter(|_| !s.reauthorize_at_end);
        // The relayed server's lease is in its ACK, which passes through unchanged.
        let relayed = self.relay_acks.get(&s.key).map(|a| a.lease_secs);
        let ip = old_state.ip();
        let (pool, mut lease_secs) = self.lease_secs_for(ip);
        if let Some(l) = relayed {
            lease_secs = l;
        } else if let Some(end) = ends_at {
            // No lease past the session's end, where its timer ends it (Acct-Terminate-Cause
            // Session-Timeout). Renewals near the end get what is left; a second at least, so
            // that no lease is zero.
            let left = end.get().saturating_sub(now_ns) / NS_PER_SEC;
            lease_secs = lease_secs.min(u32::try_from(left).unwrap_or(u32::MAX).max(1));
        }
        let (next, actions) = session::step(old_state, ev, now_ns, lease_secs);
        let Some(s) = self.sessions.get_mut(&id) else {
            return;
        };
        self.census.moved(&s.state, &next);
        let ips = (s.state.ip(), next.ip());
        s.state = next;
        let after = s.state.name();
        self.index_ip(id, ips.0, ips.1);
        for a in actions {
            self.act(id, a, (pool, lease_secs), now_ns, out);
        }
        if before != after {
            self.changed(id, out);
        }
        let Some(s) = self.sessions.get(&id) else {
            return;
        };
        let terminal = s.state.is_terminal();
        let ending = matches!(s.state, State::Releasing { .. } | State::Expired { .. });
        let deadline = s.state.next_deadline_ns();
        if ending {
            for p in self.admission.release(id) {
                self.event(p, Event::Promote, now_ns, out);
            }
        }
        if terminal {
            self.drop_session(id);
        } else if let Some(d) = deadline {
            self.timers.push(Reverse((d, id)));
        }
    }

    fn drop_session(&mut self, id: SessionId) {
        self.after_removal.remove(&id);
        self.reauthorizing.remove(&id);
        if let Some(s) = self.sessions.remove(&id) {
            self.census.remove(&s.state);
            self.index_ip(id, s.state.ip(), None);
            self.by_mac.remove(s.mac);
            if self.by_key.get(&s.key) == Some(&id) {
                self.by_key.remove(&s.key);
                self.relay_acks.remove(&s.key);
            }
            if let Some(n) = self.per_line.get_mut(&s.line) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.per_line.remove(&s.line);
                }
            }
            if let Some(n) = self.per_dataplane.get_mut(&s.line.dataplane) {
                *n = n.saturating_sub(1);
            }
        }
    }

    /// Session `id` went from holding address `from` to holding `to`.
    fn index_ip(&mut self, id: SessionId, from: Option<Ipv4Addr>, to: Option<Ipv4Addr>) {
        if from == to {
            return;
        }
        if let Some(ip) = from
            && self.by_ip.get(&ip) == Some(&id)
        {
            self.by_ip.remove(&ip);
        }
        if let Some(ip) = to {
            self.by_ip.insert(ip, id);
        }
    }

    /// Carry out `a` for session `id`, whose address is of pool `pool` and whose lease time
    /// in this step is `lease_secs`.
    fn act(
        &mut self,
        id: SessionId,
        a: Action,
        (pool, lease_secs): (usize, u32),
        now_ns: u64,
        out: &mut Vec<Output>,
    ) {
        let Some(s) = self.sessions.get_mut(&id) else {
            return;
        };
        let dataplane = s.line.dataplane;
        match a {
            Action::Authorize => out.push(Output::Authorize {
                id,
                identity: s.identity(),
            }),
            Action::SendAck { .. } if self.relay.is_some() => self.relay_send_ack(id, out),
            Action::SendOffer { .. } | Action::SendAck { .. } | Action::SendNak { .. } => {
                let (kind, yi) = match a {
                    Action::SendOffer { ip, .. } => {
                        s.last_offer_ns = now_ns;
                        (DhcpMessageType::Offer, ip)
                    }
                    Action::SendAck { ip, .. } => (DhcpMessageType::Ack, ip),
                    _ => (DhcpMessageType::Nak, Ipv4Addr::UNSPECIFIED),
                };
                let line = s.line;
                if let Some(inb) = s.pending.take() {
                    let reply = Reply {
                        kind,
                        yiaddr: yi,
                        pool,
                        announces: (kind == DhcpMessageType::Ack).then_some(id),
                        lease_secs: Some(lease_secs),
                    };
                    self.reply(&inb, line, reply, out);
                }
            }
            Action::Install { .. } | Action::Modify { .. } => {
                let Some(dp) = dp_session(s) else {
                    return;
                };
                let op = if matches!(a, Action::Install { .. }) {
                    ProgramOp::Install(dp)
                } else {
                    ProgramOp::Modify {
                        id,
                        plan_id: dp.plan_id,
                        captive: dp.captive,
                    }
                };
                out.push(Output::Program { dataplane, op });
            }
            Action::Remove => out.push(Output::Program {
                dataplane,
                op: ProgramOp::Remove(id),
            }),
            Action::FreeAddress { ip, quarantine } => {
                let key = s.key.clone();
                // A relay's server quarantines declined addresses itself.
                if quarantine && self.relay.is_none() {
                    self.count("addresses quarantined");
                    self.quarantine
                        .push_back((now_ns + self.cfg.quarantine_secs * NS_PER_SEC, ip));
                } else {
                    self.pools.release(ip);
                    if self.sticky.len() >= STICKY_MAX {
                        self.sticky.clear();
                    }
                    self.sticky.insert(key, ip);
                }
            }
            Action::AccountingStart | Action::AccountingStop { .. } => {
                let reason = match a {
                    Action::AccountingStop { reason } => Some(reason),
                    _ => None,
                };
                out.push(Output::Accounting {
                    id,
                    kind: if reason.is_some() {
                        AcctKind::Stop
                    } else {
                        AcctKind::Start
                    },
                    ip: s.state.ip(),
                    mac: s.mac,
                    reason,
                });
            }
            Action::Persist => out.push(Output::Persist(Box::new(s.clone()))),
            Action::Forget => out.push(Output::Forget(id)),
        }
    }

    /// Answer `inb` on `line` as `reply` says.
    fn reply(&mut self, inb: &Inbound, line: Line, reply: Reply, out: &mut Vec<Output>) {
        let Reply {
            kind,
            yiaddr,
            pool,
            announces,
            lease_secs,
        } = reply;
        let Some(params) = self.params.get(pool) else {
            return;
        };
        let shorter;
        let params = match lease_secs {
            Some(l) if l != params.lease_secs => {
                shorter = LeaseParams {
                    lease_secs: l,
                    ..params.clone()
                };
                &shorter
            }
            _ => params,
        };
        let mac = self
            .port_macs
            .get(&(line.dataplane, line.port))
            .copied()
            .unwrap_or(FALLBACK_MAC);
        match dhcp::build_reply(inb, kind, yiaddr, params, mac) {
            Ok(frame) => {
                self.count(match kind {
                    DhcpMessageType::Offer => "OFFER sent",
                    DhcpMessageType::Ack => "ACK sent",
                    _ => "NAK sent",
                });
                out.push(Output::Inject {
                    dataplane: line.dataplane,
                    port: line.port,
                    frame,
                    announces,
                });
            }
            Err(_) => self.count("reply could not be built"),
        }
    }

    /// Time passed: paced DISCOVERs whose turn came, deadlines, quarantine.
    pub fn tick(&mut self, now_ns: u64) -> Vec<Output> {
        let mut out = Vec::new();
        self.relay_tick(now_ns, &mut out);
        for (line, inb) in self.pacer.due(now_ns) {
            self.create(line, inb, None, now_ns, &mut out);
        }
        while let Some(&Reverse((t, id))) = self.timers.peek() {
            if t > now_ns {
                break;
            }
            self.timers.pop();
            // The session's end is not a deadline of its state (a lease granted before a CoA
            // set it may outlast it), so the timer entry says so here.
            let ev = match self.sessions.get(&id) {
                Some(s)
                    if s.ends_at_ns.is_some_and(|e| e.get() <= now_ns)
                        && s.state.bound().is_some() =>
                {
                    if s.reauthorize_at_end {
                        // Asked once; the entry may be one of its state's deadlines too.
                        self.reauthorize_at_timeout(id, &mut out);
                        Event::Tick
                    } else {
                        Event::SessionTimeout
                    }
                }
                _ => Event::Tick,
            };
            self.event(id, ev, now_ns, &mut out);
        }
        while let Some(&(t, ip)) = self.quarantine.front() {
            if t > now_ns {
                break;
            }
            self.quarantine.pop_front();
            self.pools.release(ip);
        }
        self.sweep_step(now_ns, &mut out);
        out
    }

    /// The dataplane confirmed a removal.
    pub fn removed(&mut self, id: SessionId, now_ns: u64) -> Vec<Output> {
        let mut out = Vec::new();
        let held = self.after_removal.remove(&id);
        self.event(id, Event::Removed, now_ns, &mut out);
        if let Some(held) = held {
            self.replay_held(held, now_ns, &mut out);
        }
        out
    }

    /// A dataplane refused to install session `id` (its tables full, or an address or line it
    /// holds for another session): the session is ended like a Disconnect, so that its
    /// address and slot are freed and the subscriber starts over (RADIUS: NAS-Error).
    pub fn refused(&mut self, id: SessionId, now_ns: u64) -> Vec<Output> {
        let mut out = Vec::new();
        if self.sessions.contains_key(&id) {
            self.count("refused by dataplane");
            self.event(id, Event::Refused, now_ns, &mut out);
        }
        out
    }

    /// A dataplane answered a modification of session `id` with "not found" (a refusal of
    /// its install not yet seen here, or tables that lost it): it is installed again as it is
    /// now, if it is still bound. A session that ended meanwhile needs nothing.
    pub fn missing(&mut self, id: SessionId) -> Vec<Output> {
        let Some(s) = self.sessions.get(&id) else {
            return Vec::new();
        };
        let Some(dp) = dp_session(s) else {
            return Vec::new();
        };
        let dataplane = s.line.dataplane;
        self.count("reinstalled: missing in dataplane");
        vec![Output::Program {
            dataplane,
            op: ProgramOp::Install(dp),
        }]
    }

    /// Operator or CoA Disconnect.
    pub fn disconnect(&mut self, id: SessionId, now_ns: u64) -> Option<Vec<Output>> {
        self.sessions.contains_key(&id).then(|| {
            let mut out = Vec::new();
            self.event(id, Event::Disconnect, now_ns, &mut out);
            out
        })
    }

    /// The RADIUS Idle-Timeout of session `id` passed without traffic from the subscriber.
    pub fn idle_timeout(&mut self, id: SessionId, now_ns: u64) -> Vec<Output> {
        let mut out = Vec::new();
        self.event(id, Event::IdleTimeout, now_ns, &mut out);
        out
    }

    /// CoA: bound session `id` may last `secs` more from now (0: without limit), and at that
    /// end is authorized again (`reauthorize`, Termination-Action RADIUS-Request) or ended
    /// (Default); `None` leaves either as it was. Renewals are cut to an end where the
    /// session ends, and a lease granted before that outlasts it ends at it (Stop with
    /// Session-Timeout). `None` when no bound session has that id.
    pub fn set_session_timeout(
        &mut self,
        id: SessionId,
        secs: Option<u32>,
        reauthorize: Option<bool>,
        now_ns: u64,
    ) -> Option<Vec<Output>> {
        self.sessions.get(&id)?.state.bound()?;
        if let Some(secs) = secs {
            self.end_after(id, secs, now_ns);
            self.count("session timeout changed");
        }
        if let Some(again) = reauthorize {
            self.sessions.get_mut(&id)?.reauthorize_at_end = again;
            self.count("termination action changed");
        }
        let s = self.sessions.get(&id)?;
        Some(vec![Output::Persist(Box::new(s.clone()))])
    }

    /// Session `id` ends `secs` from `now_ns` (0: without limit). Leases are cut to its end,
    /// and a timer ends it there when a lease outlasts it (one granted before a CoA, or a
    /// relayed server's, which passes unchanged).
    fn end_after(&mut self, id: SessionId, secs: u32, now_ns: u64) {
        let end = (secs > 0)
            .then(|| now_ns.saturating_add(u64::from(secs) * NS_PER_SEC))
            .and_then(NonZeroU64::new);
        if let Some(s) = self.sessions.get_mut(&id) {
            s.ends_at_ns = end;
        }
        if let Some(end) = end {
            self.timers.push(Reverse((end.get(), id)));
        }
    }

    /// CoA or the operator's API: a new plan by name.
    pub fn change_plan(
        &mut self,
        id: SessionId,
        plan: &str,
        now_ns: u64,
    ) -> Result<Vec<Output>, PlanChangeError> {
        let plan_id = *self
            .cfg
            .plans
            .get(plan)
            .ok_or_else(|| PlanChangeError::UnknownPlan(plan.to_string()))?;
        if !self.sessions.contains_key(&id) {
            return Err(PlanChangeError::NoSession(id));
        }
        let mut out = Vec::new();
        self.event(id, Event::PlanChanged { plan_id }, now_ns, &mut out);
        Ok(out)
    }

    /// Disconnect up to `max` sessions with ids above `after`, in id order, passing over those
    /// already releasing (drain). A caller drains everything in chunks, each call starting
    /// after the previous one's `last`, so that no call holds this thread for long and none
    /// walks again past the sessions an earlier chunk set releasing.
    pub fn drain(&mut self, after: SessionId, max: usize, now_ns: u64) -> Drained {
        let ids: Vec<SessionId> = self
            .sessions
            .from_id(after.saturating_add(1))
            .filter(|s| !matches!(s.state, State::Releasing { .. }))
            .map(|s| s.id)
            .take(max)
            .collect();
        let mut out = Vec::new();
        for &id in &ids {
            self.event(id, Event::Drain, now_ns, &mut out);
        }
        Drained {
            out,
            started: ids.len(),
            last: ids.last().copied().unwrap_or(after),
            remaining: self.sessions.len(),
        }
    }

    /// A new licence cap; promotes waiting captive sessions if it was raised.
    pub fn set_cap(&mut self, cap: Cap, now_ns: u64) -> Vec<Output> {
        let mut out = Vec::new();
        let promoted = self.admission.set_cap(cap);
        self.admission.reserve(self.session_room);
        for id in promoted {
            self.event(id, Event::Promote, now_ns, &mut out);
        }
        out
    }

    /// Find a session by address or MAC (CoA identification): one lookup either way, but a
    /// MAC held on several lines at once walks the sessions for the first (by id) holding it.
    pub fn find(&self, ip: Option<Ipv4Addr>, mac: Option<MacAddr>) -> Option<SessionId> {
        if let Some(ip) = ip {
            let id = *self.by_ip.get(&ip)?;
            let s = self.sessions.get(&id)?;
            return mac.is_none_or(|m| s.mac == m).then_some(id);
        }
        if let Some(m) = mac {
            match self.by_mac.get(&m) {
                MacHolder::None => return None,
                MacHolder::One(id) => return Some(id),
                MacHolder::Several => {}
            }
        }
        self.sessions
            .values()
            .find(|s| {
                ip.is_none_or(|ip| s.state.ip() == Some(ip)) && mac.is_none_or(|m| s.mac == m)
            })
            .map(|s| s.id)
    }
}

/// What one [`Engine::drain`] call did.
#[derive(Debug)]
pub struct Drained {
    /// Its outputs.
    pub out: Vec<Output>,
    /// Sessions it disconnected (fewer than asked: none were left after `last`).
    pub started: usize,
    /// The last session it disconnected (the next chunk's `after`).
    pub last: SessionId,
    /// Sessions held in all, releasing ones included.
    pub remaining: usize,
}

/// Why [`Engine::change_plan`] refused: the API answers 400 for the one and 404 for the other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanChangeError {
    UnknownPlan(String),
    NoSession(SessionId),
}

impl std::fmt::Display for PlanChangeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::UnknownPlan(p) => write!(f, "unknown plan {p:?}"),
            Self::NoSession(id) => write!(f, "no session {id}"),
        }
    }
}

/// The dataplane form of a bound session.
pub fn dp_session(s: &Session) -> Option<DpSession> {
    let (lease, grant) = s.state.bound()?;
    Some(DpSession {
        id: s.id,
        port: s.line.port,
        outer_vlan: s.line.outer_vlan,
        inner_vlan: s.line.inner_vlan,
        mac: s.mac,
        ip: lease.ip,
        plan_id: grant.plan_id(),
        captive: grant.captive(),
    })
}

#[path = "engine_relay.rs"]
mod relay_glue;

#[path = "engine_address.rs"]
mod address;

#[path = "engine_reauth.rs"]
mod reauth;

#[path = "engine_releasing.rs"]
mod releasing;

#[path = "engine_termination.rs"]
mod termination;
use address::{AddressRefusal, Asker};

#[cfg(test)]
#[path = "engine_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "engine_aaa_tests.rs"]
mod aaa_tests;

#[cfg(test)]
#[path = "engine_address_tests.rs"]
mod address_tests;

#[cfg(test)]
#[path = "engine_reauth_tests.rs"]
mod reauth_tests;

#[cfg(test)]
#[path = "engine_identity_tests.rs"]
mod identity_tests;

#[cfg(test)]
#[path = "engine_termination_tests.rs"]
mod termination_tests;
