//! `ip4-rewrite`: the last node before transmit. Decrements the TTL with an RFC 1624
//! incremental checksum update (RFC 1812 §5.3.1; a packet with TTL <= 1 goes, untouched, to
//! `icmp-error` for a Time Exceeded message), then rebuilds the
//! Ethernet header: upstream, tags popped, next-hop MAC from the uplink MAC; downstream, the
//! session's tags pushed (outer TPID from config, inner 0x8100), session MAC from the access
//! MAC.
//!
//! The header is rewritten in place by moving the packet start (`adj` to pop, `prepend` to
//! push), never by copying the payload.
//!
//! Upstream needs the next hop's MAC: while it is unresolved (see `neighbour`) the packet is
//! dropped and counted.
//!
//! Next nodes: tx on the uplink, tx on the access port, icmp-error, drop.
//! Counters: see [`Ip4RewriteCounter`].
//! Per-core state: the counters.

use kbng_wire::fastpath::decrement_ttl;

use super::{NodeEnv, enqueue, enqueue_tx};
use crate::counters::{BurstCounts, NodeCounters};
use crate::node_counters;
use crate::packet::{Direction, Frame, PacketBuf, Pkt, TxFrame};
use crate::tables::{SessionLine, SessionTable};

node_counters! {
    /// Counters of `ip4-rewrite`.
    pub enum Ip4RewriteCounter ("ip4-rewrite") {
        /// Sent to the uplink.
        ToUplink => "to uplink",
        /// Sent to the access port.
        ToAccess => "to access",
        /// TTL expired: sent to icmp-error.
        TtlExpired => "TTL expired",
        /// Drop: upstream, the next hop's MAC is not resolved.
        NextHopUnresolved => "next hop unresolved",
        /// Drop: no headroom for the tags.
        NoHeadroom => "no headroom",
        /// Drop: the session vanished (never expected).
        NoSession => "no session",
        /// Drop: internal frame overflow (never expected).
        FrameOverflow => "frame overflow",
    }
}

/// Where `ip4-rewrite` sends a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ip4RewriteNext {
    /// Transmit on the uplink.
    TxUplink,
    /// Transmit on the access port.
    TxAccess,
    /// TTL expired: to icmp-error.
    IcmpError,
    /// Dropped, with the reason.
    Drop(Ip4RewriteCounter),
}

/// The `ip4-rewrite` node.
#[derive(Debug, Default)]
pub struct Ip4RewriteNode {
    /// Counters.
    pub counters: NodeCounters<Ip4RewriteCounter>,
}

/// Give `pkt` an Ethernet header with `N` 802.1Q/802.1ad tags (0, 1 or 2) in front of its IPv4
/// header: grow or shrink the L2 header to `14 + 4 * N` bytes, write it, and move `meta.l3`.
/// `false`, nothing written, without the headroom. One instance per tag count, so every offset
/// is a constant and the writes need no bounds checks.
#[inline(always)]
fn set_l2<P: PacketBuf, const N: usize>(
    pkt: &mut Pkt<P>,
    dst: &[u8; 6],
    src: &[u8; 6],
    tags: [(u16, u16); N],
) -> bool {
    let (l3, want) = (usize::from(pkt.meta.l3), 14 + 4 * N);
    let resized = if want > l3 {
        pkt.buf.prepend(want - l3)
    } else {
        want == l3 || pkt.buf.adj(l3 - want)
    };
    if !resized {
        return false;
    }
    pkt.meta.l3 = want as u16;
    let Some(h) = pkt.buf.data_mut().get_mut(..want) else {
        return true;
    };
    h[0..6].copy_from_slice(dst);
    h[6..12].copy_from_slice(src);
    for (k, (tpid, vid)) in tags.into_iter().enumerate() {
        let at = 12 + 4 * k;
        h[at..at + 2].copy_from_slice(&tpid.to_be_bytes());
        h[at + 2..at + 4].copy_from_slice(&(vid & 0x0fff).to_be_bytes());
    }
    h[want - 2..want].copy_from_slice(&0x0800u16.to_be_bytes());
    true
}

impl Ip4RewriteNode {
    /// Rewrite one packet of the session whose line for the packet's direction is `line`.
    #[inline(always)]
    pub fn rewrite<P: PacketBuf>(
        env: &NodeEnv,
        line: &SessionLine,
        pkt: &mut Pkt<P>,
    ) -> Ip4RewriteNext {
        use Ip4RewriteCounter as C;
        let l3 = usize::from(pkt.meta.l3);
        // ethernet-input validated this header and nothing since has moved it.
        let ttl_ok = match pkt.buf.data_mut().get_mut(l3..) {
            Some(b) => decrement_ttl(b),
            None => false,
        };
        if !ttl_ok {
            return Ip4RewriteNext::IcmpError;
        }
        match pkt.meta.dir {
            Direction::Up => {
                if !env.next_hop_resolved {
                    return Ip4RewriteNext::Drop(C::NextHopUnresolved);
                }
                // Pop: exactly 14 bytes of header remain.
                if !set_l2(pkt, &env.next_hop_mac, &env.uplink_mac, []) {
                    return Ip4RewriteNext::Drop(C::NoHeadroom);
                }
                Ip4RewriteNext::TxUplink
            }
            Direction::Down => {
                let (mac, outer_vid, inner_vid) = line.l2();
                let src = &env.access_mac;
                let pushed = match (outer_vid, inner_vid) {
                    (0, _) => set_l2(pkt, &mac, src, []),
                    (o, 0) => set_l2(pkt, &mac, src, [(0x8100, o)]),
                    (o, i) => set_l2(pkt, &mac, src, [(env.outer_tpid, o), (0x8100, i)]),
                };
                if !pushed {
                    return Ip4RewriteNext::Drop(C::NoHeadroom);
                }
                Ip4RewriteNext::TxAccess
            }
        }
    }

    /// Rewrite one packet and put it into its next frame, counting it. The body of
    /// [`Self::run`], and the last step of the fused fast path ([`crate::pipeline`]).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub fn forward<P: PacketBuf>(
        counts: &mut BurstCounts<Ip4RewriteCounter>,
        env: &NodeEnv,
        line: &SessionLine,
        mut pkt: Pkt<P>,
        tx_access: &mut TxFrame<P>,
        tx_uplink: &mut TxFrame<P>,
        icmp: &mut Frame<P>,
    ) {
        use Ip4RewriteCounter as C;
        let overflow = match Self::rewrite(env, line, &mut pkt) {
            Ip4RewriteNext::TxUplink => {
                counts.inc(C::ToUplink);
                enqueue_tx(tx_uplink, pkt)
            }
            Ip4RewriteNext::TxAccess => {
                counts.inc(C::ToAccess);
                enqueue_tx(tx_access, pkt)
            }
            Ip4RewriteNext::IcmpError => {
                counts.inc(C::TtlExpired);
                enqueue(icmp, pkt).is_some()
            }
            Ip4RewriteNext::Drop(reason) => {
                counts.inc(reason);
                false
            }
        };
        if overflow {
            counts.inc(C::FrameOverflow);
        }
    }

    /// Process a frame (packets of captive sessions; the others come on the fused path).
    pub fn run<P: PacketBuf>(
        &mut self,
        env: &NodeEnv,
        sessions: &SessionTable,
        input: &mut Frame<P>,
        tx_access: &mut TxFrame<P>,
        tx_uplink: &mut TxFrame<P>,
        icmp: &mut Frame<P>,
    ) {
        let mut counts = BurstCounts::default();
        for pkt in input.drain(..) {
            match sessions.line(pkt.meta.slot, pkt.meta.dir) {
                Some(line) => {
                    Self::forward(&mut counts, env, line, pkt, tx_access, tx_uplink, icmp);
                }
                None => counts.inc(Ip4RewriteCounter::NoSession),
            }
        }
        counts.flush(&self.counters);
    }
}
