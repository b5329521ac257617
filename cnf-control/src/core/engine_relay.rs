//! Relay mode of the engine: client DHCP goes to the configured servers through
//! [`super::super::relay::Relay`], and a session is built from the server's ACK (its address
//! and lease time) with the same admission as in server mode (local AAA or RADIUS, licence cap
//! -> captive). The session state machine is the server mode's: an ACK for a new subscriber
//! enters it as an adopted REQUEST (`Authenticating` -> bound), a renewal ACK as a REQUEST for
//! the bound address; the ACK frame itself waits in `relay_acks` until the state machine's
//! `SendAck`, so a subscriber the AAA rejects never sees it. A NAK, or no answer, builds nothing.

use std::net::{Ipv4Addr, SocketAddrV4};

use kbng_wire::DhcpMessageType;

use super::super::aaa::Authorization;
use super::super::dhcp::Inbound;
use super::super::relay::{Relay, RelayConfig, Relayed, ToServer};
use super::super::session::{Event, State};
use super::super::{Line, SessionId};
use super::{Engine, FALLBACK_MAC, Output, SubscriberKey, UnknownPolicy};

/// A server's ACK waiting for the session's `SendAck`.
#[derive(Debug, Clone)]
pub(super) struct RelayAck {
    pub frame: Vec<u8>,
    pub lease_secs: u32,
}

fn to_outputs(sends: Vec<ToServer>, out: &mut Vec<Output>) {
    out.extend(sends.into_iter().map(|s| Output::ToServer {
        server: s.server,
        payload: s.payload,
    }));
}

impl Engine {
    /// Switch to relay mode: DHCP is relayed to `cfg.servers` instead of served from the pools.
    /// The pools still bound which addresses a server may hand out (the dataplanes answer ARP
    /// for their gateways) and record which are in use.
    pub fn enable_relay(&mut self, cfg: RelayConfig, now_ns: u64) {
        self.relay = Some(Relay::new(
            cfg,
            self.cfg.pacing,
            self.cfg.max_sessions_per_line,
            now_ns,
        ));
    }

    pub fn relay_mode(&self) -> bool {
        self.relay.is_some()
    }

    /// A client message in relay mode (called by `handle_dhcp` after parsing).
    pub(super) fn relay_client(
        &mut self,
        line: Line,
        key: SubscriberKey,
        inb: Inbound,
        frame: &[u8],
        now_ns: u64,
        out: &mut Vec<Output>,
    ) {
        let existing = self.by_key.get(&key).copied();
        let kind = inb.msg.message_type;
        self.count(match kind {
            DhcpMessageType::Discover => "DISCOVER",
            DhcpMessageType::Request => "REQUEST",
            DhcpMessageType::Release => "RELEASE",
            DhcpMessageType::Decline => "DECLINE",
            DhcpMessageType::Inform => "INFORM",
            _ => "server message from a client",
        });
        if existing.is_none()
            && matches!(kind, DhcpMessageType::Discover | DhcpMessageType::Request)
        {
            // Requests in flight count too: otherwise a burst of new subscribers gets the
            // server to lease more addresses to the line than it may hold sessions.
            let in_flight = self.relay.as_ref().map_or(0, |r| r.pending_on(&line));
            if let Some(why) = self.no_room(line, in_flight) {
                self.count(why);
                return;
            }
            // Rejected anyway at the ACK: spare the server the lease.
            if !self.cfg.external_auth
                && self.cfg.unknown == UnknownPolicy::Reject
                && self
                    .subscribers
                    .lookup(&self.identity_of(line, &inb), self.by_circuit())
                    == Authorization::Unknown
            {
                self.count("relay: unknown subscriber not relayed");
                return;
            }
        }
        match (kind, existing) {
            (DhcpMessageType::Release, Some(id)) if self.session_ip(id) == Some(inb.msg.ciaddr) => {
                self.event(id, Event::Release, now_ns, out);
            }
            (DhcpMessageType::Decline, Some(id)) if self.session_ip(id) == inb.msg.requested_ip => {
                self.event(id, Event::Decline, now_ns, out);
            }
            (DhcpMessageType::Release, _) => self.count("RELEASE for no lease"),
            (DhcpMessageType::Decline, _) => self.count("DECLINE for no lease"),
            _ => {}
        }
        let Some(relay) = self.relay.as_mut() else {
            return;
        };
        // Drops are counted by the relay itself.
        if let Ok(sends) = relay.client(line, inb, frame, existing.is_none(), now_ns) {
            to_outputs(sends, out);
        }
    }

    /// A datagram from a DHCP server.
    pub fn relay_reply(&mut self, from: SocketAddrV4, payload: &[u8], now_ns: u64) -> Vec<Output> {
        let mut out = Vec::new();
        let Some(relay) = self.relay.as_mut() else {
            self.count("relay: datagram while not relaying");
            return out;
        };
        let giaddr = relay.config().giaddr;
        let Ok(r) = relay.server_reply(from, payload, now_ns) else {
            return out;
        };
        let mac = self
            .port_macs
            .get(&(r.line.dataplane, r.line.port))
            .copied()
            .unwrap_or(FALLBACK_MAC);
        let Ok(frame) = r.frame(giaddr, mac) else {
            self.count("relay: reply could not be built");
            return out;
        };
        let inject = |out: &mut Vec<Output>, frame: Vec<u8>| {
            out.push(Output::Inject {
                dataplane: r.line.dataplane,
                port: r.line.port,
                frame,
                announces: None,
            })
        };
        match (r.request.msg.message_type, r.reply.message_type) {
            (DhcpMessageType::Request, DhcpMessageType::Ack)
                if !r.reply.yiaddr.is_unspecified() =>
            {
                self.relay_bind(r, frame, now_ns, &mut out);
            }
            (DhcpMessageType::Request, DhcpMessageType::Nak) => {
                self.count("relay: NAK relayed");
                self.relay_nak(&r, now_ns, &mut out);
                inject(&mut out, frame);
            }
            (_, DhcpMessageType::Offer) => {
                self.count("relay: OFFER relayed");
                inject(&mut out, frame);
            }
            _ => {
                self.count("relay: other reply relayed");
                inject(&mut out, frame);
            }
        }
        out
    }

    /// A NAK to a bound subscriber's REQUEST for its own address ends the session: the client
    /// must start over (RFC 2131 §4.4.5).
    fn relay_nak(&mut self, r: &Relayed, now_ns: u64, out: &mut Vec<Output>) {
        let key = self.key_of(r.line, &r.request);
        let Some(&id) = self.by_key.get(&key) else {
            return;
        };
        let asked = r.request.msg.requested_ip.unwrap_or(r.request.msg.ciaddr);
        let bound_ip = self
            .sessions
            .get(&id)
            .and_then(|s| s.state.bound())
            .map(|(l, _)| l.ip);
        if bound_ip == Some(asked) {
            self.count("relay: NAK ended a session");
            self.event(id, Event::Disconnect, now_ns, out);
        }
    }

    /// The server's ACK of a REQUEST: a new session, or the renewal of a bound one.
    pub(super) fn relay_bind(
        &mut self,
        r: Relayed,
        frame: Vec<u8>,
        now_ns: u64,
        out: &mut Vec<Output>,
    ) {
        let ip = r.reply.yiaddr;
        let Some(lease_secs) = r.reply.lease_secs else {
            self.count("relay: ACK without lease time");
            return;
        };
        if self.pools.pool_of(ip).is_none() {
            self.count("relay: ACK address outside the pools");
            return;
        }
        let key = self.key_of(r.line, &r.request);
        let xid = r.request.msg.xid;
        if let Some(&id) = self.by_key.get(&key) {
            let state = self.sessions.get(&id).map(|s| s.state.clone());
            // With option 82 or line identity, another device may hold the key (a CPE
            // swapped): the session it would renew holds the old MAC, which the dataplane
            // checks, so it ends, even when the server gives the same address (a
            // reservation by circuit-id); the new device's next REQUEST builds its own.
            let other_device = self.held_by_another_device(id, &r.request);
            match state {
                Some(st) if !other_device && st.bound().is_some_and(|(l, _)| l.ip == ip) => {
                    self.count("relay: lease renewed");
                    self.relay_acks.insert(key, RelayAck { frame, lease_secs });
                    let ev = Event::Request {
                        xid,
                        ip,
                        server_matches: true,
                    };
                    self.event(id, ev, now_ns, out);
                    return;
                }
                Some(State::Authenticating { ip: held, .. }) if !other_device && held == ip => {
                    // The client repeated its REQUEST while the AAA decides: answer the latest.
                    self.relay_acks.insert(key, RelayAck { frame, lease_secs });
                    return;
                }
                Some(_) => {
                    if other_device {
                        self.end_replaced(id, now_ns, out);
                    } else {
                        // The server gave this subscriber another address: the old session ends.
                        self.count("relay: subscriber moved to another address");
                        self.event(id, Event::Disconnect, now_ns, out);
                    }
                    if self.by_key.get(&key) == Some(&id) {
                        self.by_key.remove(&key);
                    }
                }
                None => {}
            }
        }
        if self.pools.is_allocated(ip) {
            // Held by the session this ACK just ended (a reservation by circuit-id for a
            // swapped CPE): answered once the dataplane confirms that session's removal.
            match self.by_ip.get(&ip).copied() {
                Some(old) if self.releasing(old) => self.hold_relay_ack(old, r, frame, now_ns),
                _ => self.count("relay: ACK address held by another session"),
            }
            return;
        }
        self.relay_acks
            .insert(key.clone(), RelayAck { frame, lease_secs });
        self.create(r.line, r.request, Some(ip), now_ns, out);
        if !self.by_key.contains_key(&key) {
            self.relay_acks.remove(&key);
        }
    }

    /// The state machine's `SendAck` in relay mode: the server's ACK, as relayed.
    pub(super) fn relay_send_ack(&mut self, id: SessionId, out: &mut Vec<Output>) {
        let Some(s) = self.sessions.get_mut(&id) else {
            return;
        };
        s.pending = None;
        let line = s.line;
        match self.relay_acks.remove(&s.key) {
            Some(a) => {
                self.count("ACK sent");
                out.push(Output::Inject {
                    dataplane: line.dataplane,
                    port: line.port,
                    frame: a.frame,
                    announces: Some(id),
                });
            }
            None => self.count("relay: no server ACK to send"),
        }
    }

    /// Relay timers: pacing and server failover.
    pub(super) fn relay_tick(&mut self, now_ns: u64, out: &mut Vec<Output>) {
        if let Some(relay) = self.relay.as_mut() {
            to_outputs(relay.tick(now_ns), out);
        }
    }

    /// The relay's gateway address as seen by servers, if relaying.
    pub fn relay_giaddr(&self) -> Option<Ipv4Addr> {
        self.relay.as_ref().map(|r| r.config().giaddr)
    }
}
