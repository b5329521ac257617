//! The uplink next hop: its MAC address, learned by ARP (RFC 826) and published to the workers
//! without locks.
//!
//! [`NextHopCell`] is one atomic word (MAC in the low 48 bits, a valid bit above) plus the TSC
//! time it was last confirmed. Workers read the word once per burst (`Acquire`); the
//! `uplink-arp` node on any worker writes it when an ARP packet from the next-hop address
//! arrives (reply, request or gratuitous). A single word means a reader never sees half of an
//! old MAC and half of a new one. The alternative, pushing the MAC through every worker's
//! command ring, would need the main core in the learning path; the ring is kept for table
//! updates that must be acknowledged.
//!
//! [`Resolver`] runs on the main core (never on a worker): a pure state machine stepped with
//! the time. Unresolved, it asks by broadcast once a second (RFC 1122 §2.3.2.1 limits requests
//! to one per second per destination). Resolved and older than the reachable time, it re-asks
//! by unicast up to [`UNICAST_PROBES`] times, one second apart, so a live next hop is refreshed
//! before it expires; with no answer it invalidates the entry (upstream traffic is then dropped
//! and counted as "next hop unresolved") and goes back to broadcasting. At start-up it also
//! announces the uplink address with a gratuitous ARP so a neighbour with a stale entry for it
//! (after a restart on another MAC) updates at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use kbng_wire::{ArpOp, ArpRepr, MacAddr};

use crate::counters::NodeCounters;
use crate::node_counters;

const VALID: u64 = 1 << 63;
const MAC_MASK: u64 = (1 << 48) - 1;

/// Unicast refresh requests sent before a silent next hop is forgotten.
pub const UNICAST_PROBES: u32 = 3;

fn pack(mac: [u8; 6]) -> u64 {
    let mut b = [0u8; 8];
    b[2..].copy_from_slice(&mac);
    u64::from_be_bytes(b) | VALID
}

fn unpack(word: u64) -> Option<[u8; 6]> {
    if word & VALID == 0 {
        return None;
    }
    let b = (word & MAC_MASK).to_be_bytes();
    let mut mac = [0u8; 6];
    mac.copy_from_slice(&b[2..]);
    Some(mac)
}

/// The next hop's MAC as the workers see it.
#[derive(Debug, Default)]
pub struct NextHopCell {
    word: AtomicU64,
    confirmed_tsc: AtomicU64,
}

impl NextHopCell {
    /// A cell holding a configured MAC that never expires (`--next-hop-mac`).
    pub fn fixed(mac: [u8; 6]) -> Self {
        Self {
            word: AtomicU64::new(pack(mac)),
            confirmed_tsc: AtomicU64::new(u64::MAX),
        }
    }

    /// The MAC, if resolved (any thread; one atomic load).
    #[inline(always)]
    pub fn mac(&self) -> Option<[u8; 6]> {
        unpack(self.word.load(Ordering::Acquire))
    }

    /// An ARP packet from the next hop says it is at `mac` (time `now`, TSC). Returns whether
    /// the MAC changed (a new or moved next hop).
    #[inline]
    pub fn learn(&self, mac: [u8; 6], now: u64) -> bool {
        let new = pack(mac);
        // The time first: the resolver reads the word then the time, so it never sees a new
        // word with an old time and expires a fresh entry.
        self.confirmed_tsc.store(now, Ordering::Release);
        self.word.swap(new, Ordering::AcqRel) != new
    }

    /// (MAC word, confirmation time) for the resolver.
    fn snapshot(&self) -> (u64, u64) {
        let w = self.word.load(Ordering::Acquire);
        (w, self.confirmed_tsc.load(Ordering::Acquire))
    }

    /// Forget the MAC unless a worker has learned it again since `seen` was read.
    fn invalidate_if(&self, seen: (u64, u64)) -> bool {
        if self.confirmed_tsc.load(Ordering::Acquire) != seen.1 {
            return false;
        }
        self.word
            .compare_exchange(seen.0, 0, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }
}

node_counters! {
    /// Counters of the main-core next-hop resolver.
    pub enum ResolverCounter ("arp-resolver") {
        /// Broadcast ARP requests for the next hop.
        Broadcasts => "ARP requests broadcast",
        /// Unicast refresh requests to the known next-hop MAC.
        Refreshes => "ARP refresh requests",
        /// Gratuitous ARP announcing the uplink address.
        Announcements => "gratuitous ARP sent",
        /// The next hop stopped answering and was forgotten.
        Expired => "next hop expired",
        /// A request could not be queued for transmission.
        InjectFull => "ARP request not queued",
    }
}

/// Uplink addressing, from validated configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UplinkAddressing {
    /// Our uplink address (host order).
    pub address: u32,
    /// Its prefix length.
    pub prefix_len: u8,
    /// The next hop (host order), inside the prefix.
    pub next_hop: u32,
}

/// Main-core resolver of the next hop's MAC.
#[derive(Debug)]
pub struct Resolver {
    cell: Arc<NextHopCell>,
    our_mac: [u8; 6],
    addr: UplinkAddressing,
    hz: u64,
    reachable_tsc: u64,
    last_sent: Option<u64>,
    probes: u32,
    announced: bool,
    /// Counters (exported with the node counters).
    pub counters: NodeCounters<ResolverCounter>,
}

impl Resolver {
    /// A resolver publishing to `cell`; an entry is refreshed after `reachable_secs`.
    pub fn new(
        cell: Arc<NextHopCell>,
        our_mac: [u8; 6],
        addr: UplinkAddressing,
        hz: u64,
        reachable_secs: u64,
    ) -> Self {
        Self {
            cell,
            our_mac,
            addr,
            hz,
            reachable_tsc: reachable_secs.saturating_mul(hz),
            last_sent: None,
            probes: 0,
            announced: false,
            counters: NodeCounters::default(),
        }
    }

    /// One step at TSC time `now`: the ARP frame to send on the uplink, if any.
    pub fn poll(&mut self, now: u64) -> Option<[u8; ARP_FRAME_LEN]> {
        if !self.announced {
            self.announced = true;
            self.counters.inc(ResolverCounter::Announcements);
            return Some(self.frame(None, self.addr.address));
        }
        let due = self
            .last_sent
            .is_none_or(|t| now.saturating_sub(t) >= self.hz);
        let seen = self.cell.snapshot();
        match unpack(seen.0) {
            None => {
                self.probes = 0;
                due.then(|| {
                    self.last_sent = Some(now);
                    self.counters.inc(ResolverCounter::Broadcasts);
                    self.frame(None, self.addr.next_hop)
                })
            }
            Some(mac) => {
                if now.saturating_sub(seen.1) < self.reachable_tsc || seen.1 > now {
                    self.probes = 0;
                    return None;
                }
                if !due {
                    return None;
                }
                if self.probes < UNICAST_PROBES {
                    self.probes += 1;
                    self.last_sent = Some(now);
                    self.counters.inc(ResolverCounter::Refreshes);
                    return Some(self.frame(Some(mac), self.addr.next_hop));
                }
                if self.cell.invalidate_if(seen) {
                    self.counters.inc(ResolverCounter::Expired);
                }
                self.probes = 0;
                self.last_sent = Some(now);
                self.counters.inc(ResolverCounter::Broadcasts);
                Some(self.frame(None, self.addr.next_hop))
            }
        }
    }

    /// Count a frame `poll` returned that could not be queued.
    pub fn not_sent(&self) {
        self.counters.inc(ResolverCounter::InjectFull);
    }

    fn frame(&self, to: Option<[u8; 6]>, target_ip: u32) -> [u8; ARP_FRAME_LEN] {
        arp_request_frame(self.our_mac, self.addr.address, to, target_ip)
    }
}

/// An ARP frame padded to the Ethernet minimum (60 bytes without FCS).
pub const ARP_FRAME_LEN: usize = 60;

/// An ARP request from `src_mac`/`src_ip` for `target_ip`, to `to` (broadcast if `None`). A
/// request for our own address is the gratuitous announcement (RFC 5227 §2.3).
pub fn arp_request_frame(
    src_mac: [u8; 6],
    src_ip: u32,
    to: Option<[u8; 6]>,
    target_ip: u32,
) -> [u8; ARP_FRAME_LEN] {
    let mut f = [0u8; ARP_FRAME_LEN];
    f[0..6].copy_from_slice(&to.unwrap_or([0xff; 6]));
    f[6..12].copy_from_slice(&src_mac);
    f[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    let req = ArpRepr {
        op: ArpOp::Request,
        sender_mac: MacAddr(src_mac),
        sender_ip: src_ip.into(),
        target_mac: MacAddr([0; 6]),
        target_ip: target_ip.into(),
    };
    // Cannot fail: 46 bytes follow the Ethernet header, ARP needs 28.
    let _ = req.emit(&mut f[14..]);
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    const HZ: u64 = 1000;
    const NH: [u8; 6] = [2, 0, 0, 0, 0, 0xcc];
    const ME: [u8; 6] = [2, 0, 0, 0, 0, 0xbb];

    fn resolver() -> (Arc<NextHopCell>, Resolver) {
        let cell = Arc::new(NextHopCell::default());
        let addr = UplinkAddressing {
            address: u32::from_be_bytes([192, 0, 2, 254]),
            prefix_len: 24,
            next_hop: u32::from_be_bytes([192, 0, 2, 1]),
        };
        let r = Resolver::new(Arc::clone(&cell), ME, addr, HZ, 30);
        (cell, r)
    }

    fn parse(f: &[u8; ARP_FRAME_LEN]) -> ([u8; 6], ArpRepr) {
        let mut dst = [0; 6];
        dst.copy_from_slice(&f[..6]);
        (dst, ArpRepr::parse(&f[14..]).expect("ARP"))
    }

    #[test]
    fn cell_packs_and_learns() {
        let c = NextHopCell::default();
        assert_eq!(c.mac(), None);
        assert!(c.learn(NH, 5));
        assert!(!c.learn(NH, 6));
        assert_eq!(c.mac(), Some(NH));
        assert!(c.learn([2, 0, 0, 0, 0, 0xdd], 7));
        assert_eq!(c.mac(), Some([2, 0, 0, 0, 0, 0xdd]));
        assert_eq!(NextHopCell::fixed(NH).mac(), Some(NH));
    }

    #[test]
    fn announces_then_broadcasts_once_a_second() {
        let (_cell, mut r) = resolver();
        let (dst, a) = parse(&r.poll(0).expect("announcement"));
        assert_eq!(dst, [0xff; 6]);
        assert!(a.is_gratuitous());
        let (dst, q) = parse(&r.poll(0).expect("request"));
        assert_eq!((dst, q.op), ([0xff; 6], ArpOp::Request));
        assert_eq!(q.target_ip.octets(), [192, 0, 2, 1]);
        assert_eq!(q.sender_ip.octets(), [192, 0, 2, 254]);
        assert_eq!(q.sender_mac.0, ME);
        assert!(r.poll(HZ - 1).is_none(), "one request per second");
        assert!(r.poll(HZ).is_some());
        assert_eq!(r.counters.get(ResolverCounter::Broadcasts), 2);
    }

    #[test]
    fn refreshes_by_unicast_then_expires() {
        let (cell, mut r) = resolver();
        r.poll(0);
        r.poll(0);
        cell.learn(NH, 10);
        // Fresh: silent.
        for t in [11, 29 * HZ] {
            assert!(r.poll(t).is_none(), "at {t}");
        }
        // Past the reachable time: three unicast refreshes a second apart, still resolved.
        let t0 = 10 + 30 * HZ;
        for i in 0..UNICAST_PROBES {
            let (dst, q) = parse(&r.poll(t0 + u64::from(i) * HZ).expect("refresh"));
            assert_eq!((dst, q.op), (NH, ArpOp::Request));
            assert_eq!(cell.mac(), Some(NH));
        }
        // No answer: forgotten, and back to broadcasting.
        let (dst, _) = parse(&r.poll(t0 + 3 * HZ).expect("broadcast"));
        assert_eq!(dst, [0xff; 6]);
        assert_eq!(cell.mac(), None);
        assert_eq!(r.counters.get(ResolverCounter::Expired), 1);
        assert_eq!(r.counters.get(ResolverCounter::Refreshes), 3);
    }

    #[test]
    fn an_answer_during_refresh_keeps_the_entry() {
        let (cell, mut r) = resolver();
        r.poll(0);
        cell.learn(NH, 0);
        let t0 = 30 * HZ;
        assert!(r.poll(t0).is_some());
        cell.learn(NH, t0 + 1);
        for t in [t0 + HZ, t0 + 10 * HZ, t0 + 29 * HZ] {
            assert!(r.poll(t).is_none(), "at {t}");
        }
        assert_eq!(cell.mac(), Some(NH));
        assert_eq!(r.counters.get(ResolverCounter::Expired), 0);
    }

    #[test]
    fn a_learn_racing_the_expiry_wins() {
        let cell = NextHopCell::default();
        cell.learn(NH, 1);
        let seen = cell.snapshot();
        cell.learn(NH, 2);
        assert!(!cell.invalidate_if(seen));
        assert_eq!(cell.mac(), Some(NH));
    }
}
