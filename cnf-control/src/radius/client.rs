//! The RADIUS client transport: one UDP socket for every server, identifiers allocated per
//! destination (RFC 2865 §3), retransmission of the very same bytes (same identifier and
//! authenticator, RFC 5080 §2.2.1) every `timeout`, failover to the next server after
//! `retries` retransmissions, and answers accepted only when their Response Authenticator (and
//! Message-Authenticator, if any) verifies against the request they answer.
//!
//! Not async itself: the owner feeds it datagrams and ticks, so its rules are unit-tested
//! without a network. Requests are rebuilt for each server (the secret differs), so the
//! transport holds what to build, not bytes.

use std::collections::{HashMap, VecDeque};
use std::io::Read;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use kbng_wire::WireError;
use kbng_wire::radius_auth::verify_response;

use super::config::Server;

/// Which of a server's ports a request goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Port {
    Auth,
    Acct,
}

/// Something the transport can (re)build for any server.
pub trait Request {
    fn port(&self) -> Port;
    /// The packet with `identifier`, Request Authenticator `ra` (Access-Request only) and
    /// `secret`.
    fn build(&self, identifier: u8, ra: [u8; 16], secret: &[u8]) -> Result<Vec<u8>, WireError>;
}

/// Unpredictable Request Authenticators (RFC 2865 §3), from the kernel's CSPRNG.
#[derive(Debug)]
pub struct Rng {
    file: std::fs::File,
    buf: Vec<u8>,
}

impl Rng {
    pub fn open() -> std::io::Result<Rng> {
        Ok(Rng {
            file: std::fs::File::open("/dev/urandom")?,
            buf: Vec::new(),
        })
    }

    pub fn authenticator(&mut self) -> std::io::Result<[u8; 16]> {
        if self.buf.len() < 16 {
            self.buf.resize(4096, 0);
            self.file.read_exact(&mut self.buf)?;
        }
        let mut a = [0u8; 16];
        let at = self.buf.len() - 16;
        a.copy_from_slice(&self.buf[at..]);
        self.buf.truncate(at);
        Ok(a)
    }
}

#[derive(Debug)]
struct Pending<R> {
    req: R,
    server: usize,
    /// Servers tried so far for this request, this one included.
    tried: usize,
    sends: u32,
    deadline: Instant,
    ra: [u8; 16],
    bytes: Vec<u8>,
}

/// What became of a request.
#[derive(Debug)]
pub enum Done<R> {
    /// A verified answer: its code and bytes.
    Answered { req: R, code: u8, packet: Vec<u8> },
    /// Every server was tried `retries + 1` times without a verified answer.
    GaveUp { req: R },
}

/// The transport's state; the owner sends what [`Client::take_outgoing`] returns.
#[derive(Debug)]
pub struct Client<R> {
    servers: Vec<Server>,
    timeout: Duration,
    retries: u32,
    /// The server new requests go to first, per port; moves on at each failover.
    current: [usize; 2],
    next_id: HashMap<SocketAddr, u8>,
    pending: HashMap<(SocketAddr, u8), Pending<R>>,
    /// Waiting for a free identifier towards their server (256 outstanding per destination).
    waiting: VecDeque<(R, usize, usize)>,
    outgoing: Vec<(SocketAddr, Vec<u8>)>,
    rng: Rng,
    pub counters: Vec<(&'static str, u64)>,
}

const fn slot(p: Port) -> usize {
    match p {
        Port::Auth => 0,
        Port::Acct => 1,
    }
}

impl<R: Request> Client<R> {
    pub fn new(servers: Vec<Server>, timeout: Duration, retries: u32, rng: Rng) -> Self {
        Client {
            servers,
            timeout,
            retries,
            current: [0, 0],
            next_id: HashMap::new(),
            pending: HashMap::new(),
            waiting: VecDeque::new(),
            outgoing: Vec::new(),
            rng,
            counters: Vec::new(),
        }
    }

    fn count(&mut self, what: &'static str) {
        match self.counters.iter_mut().find(|(k, _)| *k == what) {
            Some((_, v)) => *v += 1,
            None => self.counters.push((what, 1)),
        }
    }

    /// Counters since the last call.
    pub fn take_counters(&mut self) -> Vec<(&'static str, u64)> {
        std::mem::take(&mut self.counters)
    }

    pub fn in_flight(&self) -> usize {
        self.pending.len() + self.waiting.len()
    }

    /// Datagrams to send now.
    pub fn take_outgoing(&mut self) -> Vec<(SocketAddr, Vec<u8>)> {
        std::mem::take(&mut self.outgoing)
    }

    fn dest(&self, server: usize, port: Port) -> Option<SocketAddr> {
        self.servers.get(server).map(|s| match port {
            Port::Auth => s.auth,
            Port::Acct => s.acct,
        })
    }

    /// Send `req` to the current server of its port.
    pub fn send(&mut self, req: R, now: Instant) -> Option<Done<R>> {
        let server = self.current[slot(req.port())];
        self.start(req, server, 1, now)
    }

    fn start(&mut self, req: R, server: usize, tried: usize, now: Instant) -> Option<Done<R>> {
        let Some(dest) = self.dest(server, req.port()) else {
            return Some(Done::GaveUp { req });
        };
        let first = self.next_id.get(&dest).copied().unwrap_or(0);
        let Some(id) = (0..=255u8)
            .map(|k| first.wrapping_add(k))
            .find(|id| !self.pending.contains_key(&(dest, *id)))
        else {
            self.count("RADIUS requests queued for an identifier");
            self.waiting.push_back((req, server, tried));
            return None;
        };
        self.next_id.insert(dest, id.wrapping_add(1));
        let ra = match self.rng.authenticator() {
            Ok(ra) => ra,
            Err(_) => {
                self.count("RADIUS no randomness");
                return Some(Done::GaveUp { req });
            }
        };
        let secret = &self.servers[server].secret.0;
        let bytes = match req.build(id, ra, secret) {
            Ok(b) => b,
            Err(_) => {
                self.count("RADIUS request could not be built");
                return Some(Done::GaveUp { req });
            }
        };
        // Accounting requests carry their authenticator in the packet (RFC 2866 §3); the
        // answer is verified against what was sent either way.
        let mut sent_ra = [0u8; 16];
        sent_ra.copy_from_slice(&bytes[4..20]);
        self.outgoing.push((dest, bytes.clone()));
        self.pending.insert(
            (dest, id),
            Pending {
                req,
                server,
                tried,
                sends: 1,
                deadline: now + self.timeout,
                ra: sent_ra,
                bytes,
            },
        );
        None
    }

    /// A datagram from `from`: the answer to a pending request, or counted and dropped.
    pub fn on_datagram(&mut self, from: SocketAddr, packet: &[u8]) -> Option<Done<R>> {
        let Some(&id) = packet.get(1) else {
            self.count("RADIUS malformed answer");
            return None;
        };
        let Some(p) = self.pending.get(&(from, id)) else {
            self.count("RADIUS answer to no request");
            return None;
        };
        let secret = &self.servers[p.server].secret.0;
        match verify_response(packet, &p.ra, secret) {
            Ok(v) => {
                let code = v.code();
                let packet = v.as_bytes().to_vec();
                let p = self.pending.remove(&(from, id))?;
                self.refill(Instant::now());
                Some(Done::Answered {
                    req: p.req,
                    code,
                    packet,
                })
            }
            Err(WireError::BadAuthenticator) => {
                // Possibly spoofed: the request stays pending for the real answer.
                self.count("RADIUS answer with a bad authenticator");
                None
            }
            Err(_) => {
                self.count("RADIUS malformed answer");
                None
            }
        }
    }

    /// Retransmit what timed out, fail over what ran out of retries; returns what gave up.
    pub fn on_tick(&mut self, now: Instant) -> Vec<Done<R>> {
        let due: Vec<(SocketAddr, u8)> = self
            .pending
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(k, _)| *k)
            .collect();
        let mut done = Vec::new();
        for k in due {
            let Some(p) = self.pending.get_mut(&k) else {
                continue;
            };
            if p.sends <= self.retries {
                p.sends += 1;
                p.deadline = now + self.timeout;
                let bytes = p.bytes.clone();
                self.outgoing.push((k.0, bytes));
                self.count("RADIUS retransmissions");
                continue;
            }
            let Some(p) = self.pending.remove(&k) else {
                continue;
            };
            let port = slot(p.req.port());
            if p.tried < self.servers.len() {
                let next = (p.server + 1) % self.servers.len();
                // Later requests start at the server that took over.
                if self.current[port] == p.server {
                    self.current[port] = next;
                }
                self.count("RADIUS failovers");
                done.extend(self.start(p.req, next, p.tried + 1, now));
            } else {
                self.count("RADIUS requests given up");
                done.push(Done::GaveUp { req: p.req });
            }
        }
        done.extend(self.refill(now));
        done
    }

    fn refill(&mut self, now: Instant) -> Vec<Done<R>> {
        let mut done = Vec::new();
        let n = self.waiting.len();
        for _ in 0..n {
            let Some((req, server, tried)) = self.waiting.pop_front() else {
                break;
            };
            let before = self.waiting.len();
            done.extend(self.start(req, server, tried, now));
            if self.waiting.len() > before {
                break; // Still no identifier free: the rest waits too.
            }
        }
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::radius::config::Secret;
    use kbng_wire::RadiusBuilder;
    use kbng_wire::RadiusPacket;
    use kbng_wire::radius::code;

    #[derive(Debug, Clone, PartialEq)]
    struct Ping(u32);

    impl Request for Ping {
        fn port(&self) -> Port {
            Port::Auth
        }
        fn build(&self, id: u8, ra: [u8; 16], secret: &[u8]) -> Result<Vec<u8>, WireError> {
            let mut b = RadiusBuilder::access_request(id, ra);
            b.user_name(&self.0.to_string())?;
            b.message_authenticator()?;
            b.finish(secret)
        }
    }

    fn server(port: u16, secret: &str) -> Server {
        Server {
            auth: SocketAddr::from(([127, 0, 0, 1], port)),
            acct: SocketAddr::from(([127, 0, 0, 1], port + 1)),
            secret: Secret(secret.into()),
        }
    }

    fn client() -> Client<Ping> {
        Client::new(
            vec![server(1812, "one"), server(2812, "two")],
            Duration::from_secs(1),
            2,
            Rng::open().unwrap(),
        )
    }

    fn accept_for(req: &[u8], secret: &str) -> Vec<u8> {
        let p = RadiusPacket::new_checked(req).unwrap();
        RadiusBuilder::response(code::ACCESS_ACCEPT, &p)
            .finish(secret.as_bytes())
            .unwrap()
    }

    #[test]
    fn retransmits_the_same_bytes_then_fails_over_then_gives_up() {
        let mut c = client();
        let t0 = Instant::now();
        assert!(c.send(Ping(1), t0).is_none());
        let first = c.take_outgoing();
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].0.port(), 1812);
        for k in 1..=2 {
            assert!(c.on_tick(t0 + Duration::from_secs(k)).is_empty());
            let again = c.take_outgoing();
            assert_eq!(again, first.clone(), "retransmission {k} is byte-identical");
        }
        // Third timeout: retries exhausted, the second server takes over with its secret.
        assert!(c.on_tick(t0 + Duration::from_secs(3)).is_empty());
        let over = c.take_outgoing();
        assert_eq!(over[0].0.port(), 2812);
        assert_ne!(over[0].1, first[0].1);
        // New requests now start at the second server.
        c.send(Ping(2), t0 + Duration::from_secs(3));
        assert_eq!(c.take_outgoing()[0].0.port(), 2812);
        // The first request gives up after the second server's retries.
        let mut gave_up = Vec::new();
        for s in 4..=8 {
            gave_up.extend(c.on_tick(t0 + Duration::from_secs(s)));
        }
        let ids: Vec<u32> = gave_up
            .iter()
            .map(|d| match d {
                Done::GaveUp { req } => req.0,
                Done::Answered { .. } => 0,
            })
            .collect();
        assert!(ids.contains(&1), "{ids:?}");
    }

    #[test]
    fn only_a_verified_answer_from_the_right_server_completes() {
        let mut c = client();
        let t0 = Instant::now();
        c.send(Ping(7), t0);
        let (dest, req) = c.take_outgoing().remove(0);
        // Wrong secret: counted, the request stays pending.
        assert!(c.on_datagram(dest, &accept_for(&req, "two")).is_none());
        // Right bytes from the wrong address: no such request.
        let good = accept_for(&req, "one");
        assert!(
            c.on_datagram(SocketAddr::from(([127, 0, 0, 2], 1812)), &good)
                .is_none()
        );
        assert!(c.on_datagram(dest, &[1]).is_none());
        match c.on_datagram(dest, &good) {
            Some(Done::Answered { req, code, .. }) => {
                assert_eq!((req, code), (Ping(7), code::ACCESS_ACCEPT))
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(c.in_flight(), 0);
        let counted: Vec<&str> = c.take_counters().iter().map(|(k, _)| *k).collect();
        assert!(counted.contains(&"RADIUS answer with a bad authenticator"));
        assert!(counted.contains(&"RADIUS answer to no request"));
        assert!(counted.contains(&"RADIUS malformed answer"));
    }

    #[test]
    fn identifiers_are_unique_per_destination_and_excess_requests_wait() {
        let mut c = client();
        let t0 = Instant::now();
        for i in 0..300 {
            assert!(c.send(Ping(i), t0).is_none());
        }
        let out = c.take_outgoing();
        assert_eq!(out.len(), 256);
        let mut ids: Vec<u8> = out.iter().map(|(_, b)| b[1]).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 256);
        assert_eq!(c.in_flight(), 300);
        // One answer frees one identifier for a waiting request.
        let good = accept_for(&out[0].1, "one");
        assert!(matches!(
            c.on_datagram(out[0].0, &good),
            Some(Done::Answered { .. })
        ));
        assert_eq!(c.take_outgoing().len(), 1);
    }
}
