//! `walled-garden`: traffic of captive sessions (not yet authorised, e.g. awaiting portal
//! login). Upstream packets to an allowed prefix (and, if the rule lists ports, an allowed
//! TCP/UDP destination port) and downstream packets from one (allowed source port) pass on;
//! other upstream TCP to port 80 is punted so the control plane can answer with the portal
//! redirect; everything else is dropped and counted.
//!
//! Rules are few (a BNG's portal, DNS and payment servers), so a linear scan of a small
//! array is faster than any trie here.
//!
//! Next nodes: `policer`, `punt`, drop.
//! Counters: see [`WalledGardenCounter`].
//! Per-core state: the counters; the rules are read-only after start-up.

use kbng_wire::ipv4::protocol;

use super::{be16, be32, enqueue};
use crate::counters::{BurstCounts, NodeCounters};
use crate::node_counters;
use crate::packet::{Direction, Frame, PacketBuf, Pkt};
use crate::punt::PuntReason;
use crate::tables::AccessTable;

/// An allowed prefix, optionally restricted to one IP protocol and one port (the destination
/// port upstream, the source port downstream).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WalledGardenRule {
    net: u32,
    mask: u32,
    /// IP protocol, 0 = any.
    proto: u8,
    /// TCP/UDP port, 0 = any.
    port: u16,
}

impl WalledGardenRule {
    /// A rule for `net/len` (host bits ignored), protocol `proto` and `port` (0 = any).
    pub fn new(net: u32, len: u8, proto: u8, port: u16) -> Self {
        let mask = if len == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(len.min(32)))
        };
        Self {
            net: net & mask,
            mask,
            proto,
            port,
        }
    }

    /// Does the rule allow `addr`, protocol `proto`, port `port` (`None`: no TCP/UDP header
    /// in this packet, e.g. a later fragment)?
    #[inline]
    pub fn allows(&self, addr: u32, proto: u8, port: Option<u16>) -> bool {
        addr & self.mask == self.net
            && (self.proto == 0 || self.proto == proto)
            && (self.port == 0 || port == Some(self.port))
    }
}

node_counters! {
    /// Counters of `walled-garden`.
    pub enum WalledGardenCounter ("walled-garden") {
        /// Allowed packets.
        Allowed => "walled garden allowed",
        /// Upstream HTTP punted for the portal redirect.
        HttpPunted => "HTTP redirect punted",
        /// Drop: not allowed.
        Blocked => "walled garden blocked",
        /// Drop: internal frame overflow (never expected).
        FrameOverflow => "frame overflow",
    }
}

/// Where `walled-garden` sends a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalledGardenNext {
    /// Allowed.
    Policer,
    /// Portal redirect.
    Punt,
    /// Dropped, with the reason.
    Drop(WalledGardenCounter),
}

/// The `walled-garden` node.
#[derive(Debug, Default)]
pub struct WalledGardenNode {
    /// Counters.
    pub counters: NodeCounters<WalledGardenCounter>,
}

impl WalledGardenNode {
    /// Classify one packet.
    #[inline]
    pub fn classify<P: PacketBuf>(&self, access: &AccessTable, pkt: &Pkt<P>) -> WalledGardenNext {
        let d = pkt.buf.data();
        let l3 = usize::from(pkt.meta.l3);
        let proto = d.get(l3 + 9).copied().unwrap_or(0);
        let ihl = usize::from(d.get(l3).copied().unwrap_or(0x45) & 0x0f) * 4;
        let first_fragment = be16(d, l3 + 6) & 0x1fff == 0;
        let l4 = (first_fragment && (proto == protocol::TCP || proto == protocol::UDP))
            .then_some(l3 + ihl);
        let (addr, port) = match pkt.meta.dir {
            Direction::Up => (be32(d, l3 + 16), l4.map(|o| be16(d, o + 2))),
            Direction::Down => (be32(d, l3 + 12), l4.map(|o| be16(d, o))),
        };
        if access.rules().iter().any(|r| r.allows(addr, proto, port)) {
            WalledGardenNext::Policer
        } else if access.redirect_http()
            && pkt.meta.dir == Direction::Up
            && proto == protocol::TCP
            && port == Some(80)
        {
            WalledGardenNext::Punt
        } else {
            WalledGardenNext::Drop(WalledGardenCounter::Blocked)
        }
    }

    /// Process a frame.
    pub fn run<P: PacketBuf>(
        &mut self,
        access: &AccessTable,
        input: &mut Frame<P>,
        policer: &mut Frame<P>,
        punt: &mut Frame<P>,
    ) {
        use WalledGardenCounter as C;
        let mut counts = BurstCounts::default();
        for mut pkt in input.drain(..) {
            let overflow = match self.classify(access, &pkt) {
                WalledGardenNext::Policer => {
                    counts.inc(C::Allowed);
                    enqueue(policer, pkt)
                }
                WalledGardenNext::Punt => {
                    counts.inc(C::HttpPunted);
                    pkt.meta.punt_reason = PuntReason::HttpRedirect as u8;
                    enqueue(punt, pkt)
                }
                WalledGardenNext::Drop(reason) => {
                    counts.inc(reason);
                    None
                }
            };
            if overflow.is_some() {
                counts.inc(C::FrameOverflow);
            }
        }
        counts.flush(&self.counters);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nodes::testpkt::*;
    use crate::packet::{HeapBuf, PortId};

    fn classify(bytes: Vec<u8>, dir: Direction) -> WalledGardenNext {
        let mut p = Pkt::new(HeapBuf::from_bytes(&bytes), PortId::Access);
        p.meta.l3 = 14;
        p.meta.dir = dir;
        WalledGardenNode::default().classify(&access(), &p)
    }

    #[test]
    fn allows_only_the_garden() {
        use WalledGardenNext as N;
        let tcp = |dst, dport| ipv4_l4(SUB_MAC, ACCESS_MAC, &[], SUB_IP, dst, 6, 40000, dport, 64);
        assert_eq!(classify(tcp(PORTAL_IP, 443), Direction::Up), N::Policer);
        assert_eq!(
            classify(tcp(PORTAL_IP, 22), Direction::Up),
            N::Drop(WalledGardenCounter::Blocked)
        );
        let dns = ipv4_l4(SUB_MAC, ACCESS_MAC, &[], SUB_IP, DNS_IP, 17, 40000, 53, 64);
        assert_eq!(classify(dns, Direction::Up), N::Policer);
        assert_eq!(classify(tcp(CORE_IP, 80), Direction::Up), N::Punt);
        assert_eq!(
            classify(tcp(CORE_IP, 443), Direction::Up),
            N::Drop(WalledGardenCounter::Blocked)
        );
        let icmp = ipv4_l4(SUB_MAC, ACCESS_MAC, &[], SUB_IP, PORTAL_IP, 1, 0, 0, 64);
        assert_eq!(
            classify(icmp, Direction::Up),
            N::Drop(WalledGardenCounter::Blocked)
        );
        let back = ipv4_l4(
            CORE_MAC,
            UPLINK_MAC,
            &[],
            PORTAL_IP,
            SUB_IP,
            6,
            80,
            40000,
            64,
        );
        assert_eq!(classify(back, Direction::Down), N::Policer);
        let other = ipv4_l4(CORE_MAC, UPLINK_MAC, &[], CORE_IP, SUB_IP, 6, 80, 40000, 64);
        assert_eq!(
            classify(other, Direction::Down),
            N::Drop(WalledGardenCounter::Blocked)
        );
    }

    #[test]
    fn rule_prefix_and_any_port() {
        let r = WalledGardenRule::new(0xc000_0200, 24, 0, 0);
        assert!(r.allows(0xc000_02fe, 1, None));
        assert!(!r.allows(0xc000_0300, 6, Some(80)));
        let all = WalledGardenRule::new(0, 0, 17, 53);
        assert!(all.allows(0x0808_0808, 17, Some(53)));
        assert!(!all.allows(0x0808_0808, 6, Some(53)));
        assert!(!all.allows(0x0808_0808, 17, None));
    }
}
