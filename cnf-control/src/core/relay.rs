//! DHCPv4 relay agent (RFC 1542 §4.1, RFC 2131 §4.1, option 82 of RFC 3046): the client's
//! message goes to a configured server with `giaddr` set and `hops` raised, and the server's
//! answer comes back to the client's line. Pure: frames and datagrams in, datagrams and frames
//! out, time injected; the engine builds sessions from the ACKs this hands it.
//!
//! ```text
//!  client ─punt─▶ client() ──hops+1, giaddr, opt 82──▶ ToServer ─UDP─▶ server[i]
//!                   │ pending (xid, chaddr)                              │ no answer in timeout:
//!                   ▼                                                    ▼ tick() fails over to i+1
//!  client ◀─inject─ Relayed::frame() ◀── server_reply() ◀── OFFER/ACK/NAK from server[i]
//! ```
//!
//! The message is relayed as bytes, not re-encoded: options this crate does not represent
//! (vendor class, FQDN, ...) reach the server untouched. Only hops, giaddr and option 82 change.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, SocketAddrV4};

use kbng_wire::dhcpv4::{CLIENT_PORT, MIN_MESSAGE_LEN, OPTIONS_OFFSET, SERVER_PORT, option};
use kbng_wire::ethernet::ethertype;
use kbng_wire::{
    DhcpMessageType, DhcpOp, DhcpPacket, DhcpRepr, Ipv4Packet, L2, MacAddr as WireMac,
    RelayAgentInfo, UdpFrame, UdpPacket, WireError, parse_l2,
};

use super::dhcp::Inbound;
use super::pacing::{Pacer, PacingConfig};
use super::{FastMap, Line, MacAddr};

/// What the relay does with option 82 on client messages (RFC 3046 §2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Option82Policy {
    /// Add ours (circuit-id = the line) unless a trusted access node already added one.
    Insert,
    /// Remove any option 82 the client side sent and add ours.
    Replace,
    /// Forward the message's option 82 (or none) as it came.
    Keep,
}

/// The relay's validated configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayConfig {
    /// Servers in failover order.
    pub servers: Vec<SocketAddrV4>,
    /// The relay's address on the subscriber side (a pool gateway): servers select the subnet
    /// by it and answer to it (RFC 2131 §4.1).
    pub giaddr: Ipv4Addr,
    pub option82: Option82Policy,
    /// Remote-id sub-option of the option 82 we add (none if unset).
    pub remote_id: Option<Vec<u8>>,
    /// How long a server has to answer before the next one is tried.
    pub timeout_ns: u64,
    /// How long a server that timed out is passed over for new transactions.
    pub server_down_ns: u64,
    /// Messages that already went through this many relays are dropped (RFC 1542 §4.1.1).
    pub max_hops: u8,
    /// At most one DISCOVER per client MAC and line is relayed in this interval (storms).
    pub discover_interval_ns: u64,
}

/// Why a message was not relayed; each is a counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RelayDrop {
    TooManyHops,
    GiaddrSet,
    BadClientMessage,
    TooLong,
    StormSuppressed,
    LinePendingLimit,
    TooManyTransactions,
    Queued,
    PacedOut,
    ReplyMalformed,
    ReplyNotBootReply,
    ReplyWrongGiaddr,
    ReplyFromUnknownServer,
    ReplyUnmatched,
    NotRelayed,
}

impl RelayDrop {
    pub fn as_str(self) -> &'static str {
        match self {
            RelayDrop::TooManyHops => "relay: too many hops",
            RelayDrop::GiaddrSet => "relay: giaddr already set",
            RelayDrop::BadClientMessage => "relay: client message unusable",
            RelayDrop::TooLong => "relay: message too long",
            RelayDrop::StormSuppressed => "relay: DISCOVER storm suppressed",
            RelayDrop::LinePendingLimit => "relay: line pending limit",
            RelayDrop::TooManyTransactions => "relay: too many transactions",
            RelayDrop::Queued => "relay: DISCOVER queued by pacing",
            RelayDrop::PacedOut => "relay: DISCOVER dropped by pacing",
            RelayDrop::ReplyMalformed => "relay: malformed server reply",
            RelayDrop::ReplyNotBootReply => "relay: server sent no BOOTREPLY",
            RelayDrop::ReplyWrongGiaddr => "relay: reply for another giaddr",
            RelayDrop::ReplyFromUnknownServer => "relay: reply from an unknown server",
            RelayDrop::ReplyUnmatched => "relay: reply matches no request",
            RelayDrop::NotRelayed => "relay: message type not relayed",
        }
    }
}

/// A datagram for a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToServer {
    pub server: SocketAddrV4,
    pub payload: Vec<u8>,
}

/// A client message ready to go (rewritten), waiting for pacing or a server.
#[derive(Debug, Clone)]
struct Forward {
    line: Line,
    request: Inbound,
    payload: Vec<u8>,
    inserted82: bool,
}

#[derive(Debug, Clone)]
struct Pending {
    fwd: Forward,
    server: usize,
    tried: usize,
    deadline_ns: u64,
}

/// A server's answer matched to the client request it answers.
#[derive(Debug, Clone)]
pub struct Relayed {
    pub line: Line,
    pub request: Inbound,
    pub reply: DhcpRepr,
    /// Index of the answering server.
    pub server: usize,
    /// The reply as the client gets it (our option 82 removed, RFC 3046 §2.2).
    to_client: Vec<u8>,
}

impl Relayed {
    /// The whole frame for the client's line: its VLAN tags, from the gateway (`giaddr`,
    /// `src_mac`), broadcast for a NAK or when the client asked so, else unicast to the
    /// address and chaddr (RFC 2131 §4.1, relay delivery).
    pub fn frame(&self, giaddr: Ipv4Addr, src_mac: WireMac) -> Result<Vec<u8>, WireError> {
        let r = &self.reply;
        let (dst, dst_ip) = if r.message_type == DhcpMessageType::Nak || r.broadcast {
            (WireMac::BROADCAST, Ipv4Addr::BROADCAST)
        } else if !r.yiaddr.is_unspecified() {
            (r.chaddr, r.yiaddr)
        } else if !r.ciaddr.is_unspecified() {
            (r.chaddr, r.ciaddr)
        } else if !self.request.msg.ciaddr.is_unspecified() {
            (r.chaddr, self.request.msg.ciaddr)
        } else {
            (WireMac::BROADCAST, Ipv4Addr::BROADCAST)
        };
        let f = UdpFrame {
            l2: L2 {
                dst,
                src: src_mac,
                ..self.request.l2
            },
            src_ip: giaddr,
            dst_ip,
            src_port: SERVER_PORT,
            dst_port: CLIENT_PORT,
            ttl: 64,
            dscp: 48,
        };
        let mut buf = vec![0u8; f.payload_offset() + self.to_client.len()];
        let n = f.emit_with(&mut buf, |p| {
            let (len, room) = (self.to_client.len(), p.len());
            let dst = p.get_mut(..len).ok_or(WireError::TooLong {
                what: "relayed reply",
                len,
                max: room,
            })?;
            dst.copy_from_slice(&self.to_client);
            Ok(len)
        })?;
        buf.truncate(n);
        Ok(buf)
    }
}

/// Largest message relayed: one Ethernet MTU of UDP payload, so nothing fragments.
const MAX_RELAYED: usize = 1472;
/// Bound on transactions in flight across all lines.
const MAX_PENDING: usize = 65_536;

/// The relay agent's state.
#[derive(Debug)]
pub struct Relay {
    cfg: RelayConfig,
    max_pending_per_line: u32,
    pending: FastMap<(u32, MacAddr), Pending>,
    deadlines: BTreeSet<(u64, u32, MacAddr)>,
    pending_per_line: FastMap<Line, u32>,
    last_discover: FastMap<(Line, MacAddr), u64>,
    pacer: Pacer<(Line, MacAddr), Forward>,
    down_until_ns: Vec<u64>,
    counters: BTreeMap<&'static str, u64>,
}

impl Relay {
    pub fn new(
        cfg: RelayConfig,
        pacing: PacingConfig,
        max_pending_per_line: u32,
        now: u64,
    ) -> Self {
        Relay {
            down_until_ns: vec![0; cfg.servers.len()],
            cfg,
            max_pending_per_line,
            pending: FastMap::default(),
            deadlines: BTreeSet::new(),
            pending_per_line: FastMap::default(),
            last_discover: FastMap::default(),
            pacer: Pacer::new(pacing, now),
            counters: BTreeMap::new(),
        }
    }

    pub fn config(&self) -> &RelayConfig {
        &self.cfg
    }

    fn count(&mut self, what: &'static str) {
        *self.counters.entry(what).or_default() += 1;
    }

    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        let mut v: Vec<_> = self.counters.iter().map(|(k, v)| (*k, *v)).collect();
        v.push(("relay: pacing dropped", self.pacer.dropped));
        v.push(("relay: pacing stale dropped", self.pacer.stale));
        v.push(("relay: transactions pending", self.pending.len() as u64));
        v
    }

    /// Transactions waiting for a server on `line`.
    pub fn pending_on(&self, line: &Line) -> u32 {
        self.pending_per_line.get(line).copied().unwrap_or(0)
    }

    /// A client message punted on `line` (`frame` is the punted frame, `request` its parse).
    /// `new_subscriber` DISCOVERs (no session yet) are paced and bounded per line.
    pub fn client(
        &mut self,
        line: Line,
        request: Inbound,
        frame: &[u8],
        new_subscriber: bool,
        now_ns: u64,
    ) -> Result<Vec<ToServer>, RelayDrop> {
        let r = self.client_inner(line, request, frame, new_subscriber, now_ns);
        if let Err(d) = r {
            self.count(d.as_str());
        }
        r
    }

    fn client_inner(
        &mut self,
        line: Line,
        request: Inbound,
        frame: &[u8],
        new_subscriber: bool,
        now_ns: u64,
    ) -> Result<Vec<ToServer>, RelayDrop> {
        // RFC 1542 §4.1.1: a message that went through too many relays is discarded.
        if request.msg.hops >= self.cfg.max_hops {
            return Err(RelayDrop::TooManyHops);
        }
        // A client-side relay already set giaddr: the server would answer it, not us.
        if !request.msg.giaddr.is_unspecified() {
            return Err(RelayDrop::GiaddrSet);
        }
        let payload = udp_payload(frame).ok_or(RelayDrop::BadClientMessage)?;
        let ours = RelayAgentInfo {
            circuit_id: Some(circuit_id(&line)),
            remote_id: self.cfg.remote_id.clone(),
            other: Vec::new(),
        };
        let (payload, inserted82) = rewrite_request(
            payload,
            self.cfg.giaddr,
            request.msg.hops.saturating_add(1),
            self.cfg.option82,
            &ours,
        )?;
        let kind = request.msg.message_type;
        let mac = request.msg.chaddr.0;
        let fwd = Forward {
            line,
            request,
            payload,
            inserted82,
        };
        match kind {
            DhcpMessageType::Discover => {
                if let Some(&t) = self.last_discover.get(&(line, mac))
                    && now_ns < t.saturating_add(self.cfg.discover_interval_ns)
                {
                    return Err(RelayDrop::StormSuppressed);
                }
                if new_subscriber {
                    if self.pending_on(&line) >= self.max_pending_per_line {
                        return Err(RelayDrop::LinePendingLimit);
                    }
                    self.last_discover.insert((line, mac), now_ns);
                    let dropped = self.pacer.dropped;
                    return match self.pacer.offer((line, mac), fwd, now_ns) {
                        Some(fwd) => Ok(self.send(fwd, now_ns).into_iter().collect()),
                        None if self.pacer.dropped > dropped => Err(RelayDrop::PacedOut),
                        None => Err(RelayDrop::Queued),
                    };
                }
                self.last_discover.insert((line, mac), now_ns);
                Ok(self.send(fwd, now_ns).into_iter().collect())
            }
            DhcpMessageType::Request
            | DhcpMessageType::Inform
            | DhcpMessageType::Release
            | DhcpMessageType::Decline => Ok(self.send(fwd, now_ns).into_iter().collect()),
            _ => Err(RelayDrop::NotRelayed),
        }
    }

    /// The first server not passed over; if all are, the one back soonest (so one is probed).
    fn pick(&self, now_ns: u64) -> usize {
        (0..self.down_until_ns.len())
            .find(|&i| self.down_until_ns[i] <= now_ns)
            .or_else(|| (0..self.down_until_ns.len()).min_by_key(|&i| self.down_until_ns[i]))
            .unwrap_or(0)
    }

    fn send(&mut self, fwd: Forward, now_ns: u64) -> Option<ToServer> {
        let msg = &fwd.request.msg;
        let kind = msg.message_type;
        // A REQUEST, RELEASE or DECLINE names its server (option 54): go to it if it is ours.
        let named = msg
            .server_id
            .and_then(|sid| self.cfg.servers.iter().position(|s| *s.ip() == sid));
        let server = named.unwrap_or_else(|| self.pick(now_ns));
        let addr = *self.cfg.servers.get(server)?;
        let payload = fwd.payload.clone();
        self.count(match kind {
            DhcpMessageType::Discover => "relay: DISCOVER relayed",
            DhcpMessageType::Request => "relay: REQUEST relayed",
            DhcpMessageType::Release => "relay: RELEASE relayed",
            DhcpMessageType::Decline => "relay: DECLINE relayed",
            _ => "relay: INFORM relayed",
        });
        if matches!(
            kind,
            DhcpMessageType::Discover | DhcpMessageType::Request | DhcpMessageType::Inform
        ) {
            self.track(fwd, server, 1, now_ns);
        }
        Some(ToServer {
            server: addr,
            payload,
        })
    }

    fn track(&mut self, fwd: Forward, server: usize, tried: usize, now_ns: u64) {
        let key = (fwd.request.msg.xid, fwd.request.msg.chaddr.0);
        if self.untrack(key).is_none() && self.pending.len() >= MAX_PENDING {
            self.count(RelayDrop::TooManyTransactions.as_str());
            return;
        }
        let deadline_ns = now_ns.saturating_add(self.cfg.timeout_ns);
        *self.pending_per_line.entry(fwd.line).or_default() += 1;
        self.deadlines.insert((deadline_ns, key.0, key.1));
        self.pending.insert(
            key,
            Pending {
                fwd,
                server,
                tried,
                deadline_ns,
            },
        );
    }

    fn untrack(&mut self, key: (u32, MacAddr)) -> Option<Pending> {
        let p = self.pending.remove(&key)?;
        self.deadlines.remove(&(p.deadline_ns, key.0, key.1));
        if let Some(n) = self.pending_per_line.get_mut(&p.fwd.line) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.pending_per_line.remove(&p.fwd.line);
            }
        }
        Some(p)
    }

    /// A datagram from `from`: matched to its request, or dropped with the reason counted.
    pub fn server_reply(
        &mut self,
        from: SocketAddrV4,
        payload: &[u8],
        now_ns: u64,
    ) -> Result<Relayed, RelayDrop> {
        let r = self.server_reply_inner(from, payload, now_ns);
        match &r {
            Ok(_) => self.count("relay: replies relayed"),
            Err(d) => self.count(d.as_str()),
        }
        r
    }

    fn server_reply_inner(
        &mut self,
        from: SocketAddrV4,
        payload: &[u8],
        now_ns: u64,
    ) -> Result<Relayed, RelayDrop> {
        let server = self
            .cfg
            .servers
            .iter()
            .position(|s| s.ip() == from.ip())
            .ok_or(RelayDrop::ReplyFromUnknownServer)?;
        let reply = DhcpRepr::parse(payload).map_err(|_| RelayDrop::ReplyMalformed)?;
        if reply.op != DhcpOp::BootReply
            || !matches!(
                reply.message_type,
                DhcpMessageType::Offer | DhcpMessageType::Ack | DhcpMessageType::Nak
            )
        {
            return Err(RelayDrop::ReplyNotBootReply);
        }
        if reply.giaddr != self.cfg.giaddr {
            return Err(RelayDrop::ReplyWrongGiaddr);
        }
        // The server answers: it is up, whatever the match below says.
        if let Some(d) = self.down_until_ns.get_mut(server) {
            *d = 0;
        }
        let _ = now_ns;
        let p = self
            .untrack((reply.xid, reply.chaddr.0))
            .ok_or(RelayDrop::ReplyUnmatched)?;
        let to_client = if p.fwd.inserted82 {
            strip_option82(payload)?
        } else {
            payload.to_vec()
        };
        Ok(Relayed {
            line: p.fwd.line,
            request: p.fwd.request,
            reply,
            server,
            to_client,
        })
    }

    /// Time passed: paced DISCOVERs whose turn came, and failover for transactions a server
    /// left unanswered; a transaction no server answered is dropped and counted.
    pub fn tick(&mut self, now_ns: u64) -> Vec<ToServer> {
        let mut out = Vec::new();
        for fwd in self.pacer.due(now_ns) {
            out.extend(self.send(fwd, now_ns));
        }
        while let Some(&(t, xid, mac)) = self.deadlines.first() {
            if t > now_ns {
                break;
            }
            let Some(p) = self.untrack((xid, mac)) else {
                self.deadlines.pop_first();
                continue;
            };
            self.count("relay: server timeout");
            let n = self.cfg.servers.len();
            if let Some(d) = self.down_until_ns.get_mut(p.server) {
                *d = now_ns.saturating_add(self.cfg.server_down_ns);
            }
            if p.tried >= n {
                self.count("relay: no server answered");
                continue;
            }
            let next = (p.server + 1) % n;
            if let Some(&addr) = self.cfg.servers.get(next) {
                self.count("relay: failover to next server");
                out.push(ToServer {
                    server: addr,
                    payload: p.fwd.payload.clone(),
                });
                self.track(p.fwd, next, p.tried + 1, now_ns);
            }
        }
        let keep = self.cfg.discover_interval_ns;
        self.last_discover
            .retain(|_, t| now_ns < t.saturating_add(keep));
        out
    }
}

/// Circuit-id of a line: `dataplane/port/outer-vlan/inner-vlan` in ASCII.
pub fn circuit_id(line: &Line) -> Vec<u8> {
    format!(
        "{}/{}/{}/{}",
        line.dataplane, line.port, line.outer_vlan, line.inner_vlan
    )
    .into_bytes()
}

/// The UDP payload of a punted Ethernet/IPv4/UDP frame.
pub fn udp_payload(frame: &[u8]) -> Option<&[u8]> {
    let l2 = parse_l2(frame).ok()?;
    if l2.ethertype != ethertype::IPV4 {
        return None;
    }
    let l3 = l2.l3_offset();
    let ip = Ipv4Packet::new_checked(frame.get(l3..)?).ok()?;
    let udp = UdpPacket::new_checked(ip.payload()).ok()?;
    // The views borrow their temporaries; slice the frame itself at the same place.
    let off = l3 + ip.header_len() + 8;
    frame.get(off..off + udp.payload().len())
}

/// The options of a message as (code, value) slices, pads skipped, up to END.
fn options(payload: &[u8]) -> Result<Vec<(u8, &[u8])>, RelayDrop> {
    let mut out = Vec::new();
    let mut i = OPTIONS_OFFSET;
    while let Some(&code) = payload.get(i) {
        match code {
            option::PAD => i += 1,
            option::END => break,
            _ => {
                let len = usize::from(*payload.get(i + 1).ok_or(RelayDrop::BadClientMessage)?);
                let v = payload
                    .get(i + 2..i + 2 + len)
                    .ok_or(RelayDrop::BadClientMessage)?;
                out.push((code, v));
                i += 2 + len;
            }
        }
    }
    Ok(out)
}

fn assemble(head: &[u8], opts: &[(u8, &[u8])], extra: Option<&[u8]>) -> Result<Vec<u8>, RelayDrop> {
    let mut out = head.to_vec();
    for (code, v) in opts {
        out.push(*code);
        out.push(u8::try_from(v.len()).map_err(|_| RelayDrop::TooLong)?);
        out.extend_from_slice(v);
    }
    if let Some(v) = extra {
        out.push(option::RELAY_AGENT_INFO);
        out.push(u8::try_from(v.len()).map_err(|_| RelayDrop::TooLong)?);
        out.extend_from_slice(v);
    }
    out.push(option::END);
    if out.len() < MIN_MESSAGE_LEN {
        out.resize(MIN_MESSAGE_LEN, 0);
    }
    if out.len() > MAX_RELAYED {
        return Err(RelayDrop::TooLong);
    }
    Ok(out)
}

/// The client's message as relayed: `hops` and `giaddr` set (RFC 1542 §4.1.1), option 82 per
/// `policy`, added last (RFC 3046 §2.1). Returns the bytes and whether we added option 82.
pub fn rewrite_request(
    payload: &[u8],
    giaddr: Ipv4Addr,
    hops: u8,
    policy: Option82Policy,
    ours: &RelayAgentInfo,
) -> Result<(Vec<u8>, bool), RelayDrop> {
    DhcpPacket::new_checked(payload).map_err(|_| RelayDrop::BadClientMessage)?;
    let mut head = payload
        .get(..OPTIONS_OFFSET)
        .ok_or(RelayDrop::BadClientMessage)?
        .to_vec();
    head[3] = hops;
    head[24..28].copy_from_slice(&giaddr.octets());
    let all = options(payload)?;
    let had82 = all.iter().any(|(c, _)| *c == option::RELAY_AGENT_INFO);
    let insert = match policy {
        Option82Policy::Insert => !had82,
        Option82Policy::Replace => true,
        Option82Policy::Keep => false,
    };
    let kept: Vec<(u8, &[u8])> = all
        .into_iter()
        .filter(|(c, _)| !(insert && *c == option::RELAY_AGENT_INFO))
        .collect();
    let ours = if insert {
        Some(ours.to_bytes().map_err(|_| RelayDrop::TooLong)?)
    } else {
        None
    };
    Ok((assemble(&head, &kept, ours.as_deref())?, insert))
}

/// A server reply without option 82, for the client (RFC 3046 §2.2).
pub fn strip_option82(payload: &[u8]) -> Result<Vec<u8>, RelayDrop> {
    let head = payload
        .get(..OPTIONS_OFFSET)
        .ok_or(RelayDrop::ReplyMalformed)?;
    let kept: Vec<(u8, &[u8])> = options(payload)
        .map_err(|_| RelayDrop::ReplyMalformed)?
        .into_iter()
        .filter(|(c, _)| *c != option::RELAY_AGENT_INFO)
        .collect();
    assemble(head, &kept, None).map_err(|_| RelayDrop::ReplyMalformed)
}

#[cfg(test)]
#[path = "relay_tests.rs"]
mod tests;
