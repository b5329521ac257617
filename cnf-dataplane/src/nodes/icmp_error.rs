//! `icmp-error`: ICMP Time Exceeded (RFC 792, type 11 code 0) for packets whose TTL would reach
//! zero (RFC 1812 §5.3.1), built in the packet's own buffer: no allocation, no copy of the
//! payload.
//!
//! `ip4-rewrite` sends here the packets it cannot forward for their TTL, untouched. The
//! message quotes the offending IP header and the first 8 bytes of its payload (RFC 792; RFC
//! 1812 §4.3.2.3 allows more, 8 is what every traceroute needs). Built in place: 28 bytes are
//! prepended (new IP and ICMP headers), which leaves the quoted header exactly where it was,
//! and the tail beyond the quote is trimmed. Upstream the error goes back to the subscriber
//! with the tags it came with, from its gateway address; downstream it goes to the next hop,
//! from our uplink address (RFC 1812 §4.3.2.4: the address of the interface it leaves by).
//!
//! Not answered (RFC 1812 §4.3.2.7), counted by reason: ICMP errors, non-initial fragments,
//! sources that are not a unique unicast host, multicast or broadcast destinations. Errors are
//! rate-limited per worker by a token bucket in packet units (RFC 1812 §4.3.2.8; an RFC 2697
//! srTCM whose green is the only admitting colour), because a subscriber can trigger them.
//!
//! Next nodes: tx on the access port (upstream), tx on the uplink (downstream), drop.
//! Counters: see [`IcmpErrorCounter`].
//! Per-core state: the counters, the token bucket and the IP identification sequence.

use kbng_wire::Ipv4Packet;
use kbng_wire::checksum::checksum;

use super::{NodeEnv, enqueue_tx};
use crate::counters::NodeCounters;
use crate::meter::{Colour, SrTcm, SrTcmProfile};
use crate::node_counters;
use crate::packet::{Direction, Frame, PacketBuf, Pkt, TxFrame};
use crate::tables::AccessTable;

node_counters! {
    /// Counters of `icmp-error`.
    pub enum IcmpErrorCounter ("icmp-error") {
        /// ICMP Time Exceeded sent.
        TimeExceeded => "time exceeded sent",
        /// Drop: above the ICMP error rate.
        RateLimited => "ICMP error rate limited",
        /// Drop: the expired packet is itself an ICMP error.
        ForIcmpError => "no error for an ICMP error",
        /// Drop: the expired packet is a non-initial fragment.
        ForFragment => "no error for a fragment",
        /// Drop: its source is not a unicast host, or its destination is multicast/broadcast.
        ForAddress => "no error for a non-unicast address",
        /// Drop: no gateway (upstream) or uplink address (downstream) to send from.
        NoSourceAddress => "no source address",
        /// Drop: downstream, the next hop's MAC is not resolved.
        NextHopUnresolved => "next hop unresolved",
        /// Drop: no headroom for the new headers.
        NoHeadroom => "no headroom",
        /// Drop: the packet could not be parsed again (never expected).
        Malformed => "malformed",
        /// Drop: internal frame overflow (never expected).
        FrameOverflow => "frame overflow",
    }
}

/// Where `icmp-error` sends a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IcmpErrorNext {
    /// The error, to the subscriber.
    TxAccess,
    /// The error, to the next hop.
    TxUplink,
    /// Dropped, with the reason.
    Drop(IcmpErrorCounter),
}

/// Bytes the error adds in front of the quoted header: IPv4 (20) and ICMP (8).
const NEW_HEADERS: usize = 28;
/// IP precedence 6, internetwork control (RFC 1812 §4.3.2.5).
const TOS_INTERNETWORK_CONTROL: u8 = 0xc0;

/// ICMP types that are errors (RFC 792, RFC 1812 §4.3.2.7 "ICMP error message").
fn is_icmp_error(t: u8) -> bool {
    matches!(t, 3 | 4 | 5 | 11 | 12)
}

/// A source an error may be sent to: not 0/8, loopback, multicast, class E or broadcast.
fn is_unicast_host(ip: u32) -> bool {
    let first = ip >> 24;
    first != 0 && first != 127 && first < 224
}

/// The `icmp-error` node.
#[derive(Debug)]
pub struct IcmpErrorNode {
    /// Counters.
    pub counters: NodeCounters<IcmpErrorCounter>,
    limit: SrTcmProfile,
    bucket: SrTcm,
    ident: u16,
}

impl IcmpErrorNode {
    /// A node admitting errors per `limit` (tokens are packets) from TSC time `now`.
    pub fn new(limit: SrTcmProfile, now: u64) -> Self {
        Self {
            counters: NodeCounters::default(),
            limit,
            bucket: SrTcm::new(&limit, now),
            ident: 0,
        }
    }

    /// Turn one expired packet into its Time Exceeded message, in place.
    pub fn time_exceeded<P: PacketBuf>(
        &mut self,
        env: &NodeEnv,
        access: &AccessTable,
        now: u64,
        pkt: &mut Pkt<P>,
    ) -> IcmpErrorNext {
        use IcmpErrorCounter as C;
        use IcmpErrorNext as N;
        let l3 = usize::from(pkt.meta.l3);
        let data = pkt.buf.data();
        let Some(ip) = data.get(l3..).and_then(|b| Ipv4Packet::new_checked(b).ok()) else {
            return N::Drop(C::Malformed);
        };
        let (src, dst) = (u32::from(ip.src()), u32::from(ip.dst()));
        let hlen = ip.header_len();
        let total = usize::from(ip.total_len());
        let quote = hlen + (total - hlen).min(8);
        let surplus = data.len() - l3 - quote;
        if ip.frag_offset() != 0 {
            return N::Drop(C::ForFragment);
        }
        if ip.protocol() == kbng_wire::ipv4::protocol::ICMP
            && ip.payload().first().is_some_and(|t| is_icmp_error(*t))
        {
            return N::Drop(C::ForIcmpError);
        }
        if !is_unicast_host(src) || dst >> 28 >= 0xe {
            return N::Drop(C::ForAddress);
        }
        let (from, up) = match pkt.meta.dir {
            Direction::Up => (access.gateway_for(src), true),
            Direction::Down => ((env.uplink_ip != 0).then_some(env.uplink_ip), false),
        };
        let Some(from) = from else {
            return N::Drop(C::NoSourceAddress);
        };
        if !up && !env.next_hop_resolved {
            return N::Drop(C::NextHopUnresolved);
        }
        if self.bucket.check(&self.limit, now, 1) != Colour::Green {
            return N::Drop(C::RateLimited);
        }
        if !pkt.buf.prepend(NEW_HEADERS) {
            return N::Drop(C::NoHeadroom);
        }
        if !pkt.buf.trim(surplus) {
            return N::Drop(C::Malformed);
        }
        // Layout now: [28 new][old L2: l3][quoted IP header + 8].
        let b = pkt.buf.data_mut();
        if up {
            // Back to the subscriber: its MAC as destination, the tags it came with.
            b.copy_within(NEW_HEADERS + 6..NEW_HEADERS + 12, 0);
            b[6..12].copy_from_slice(&env.access_mac);
            b.copy_within(NEW_HEADERS + 12..NEW_HEADERS + l3, 12);
        } else if let Some(h) = b.get_mut(l3 - 14..l3) {
            h[0..6].copy_from_slice(&env.next_hop_mac);
            h[6..12].copy_from_slice(&env.uplink_mac);
            h[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        }
        self.ident = self.ident.wrapping_add(1);
        let len = (NEW_HEADERS + quote) as u16;
        let Some(h) = b.get_mut(l3..l3 + NEW_HEADERS + quote) else {
            return N::Drop(C::Malformed);
        };
        h[..20].fill(0);
        h[0] = 0x45;
        h[1] = TOS_INTERNETWORK_CONTROL;
        h[2..4].copy_from_slice(&len.to_be_bytes());
        h[4..6].copy_from_slice(&self.ident.to_be_bytes());
        h[8] = 64;
        h[9] = kbng_wire::ipv4::protocol::ICMP;
        h[12..16].copy_from_slice(&from.to_be_bytes());
        h[16..20].copy_from_slice(&src.to_be_bytes());
        let c = checksum(&h[..20]);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        h[20..28].copy_from_slice(&[11, 0, 0, 0, 0, 0, 0, 0]);
        let c = checksum(&h[20..]);
        h[22..24].copy_from_slice(&c.to_be_bytes());
        if up {
            N::TxAccess
        } else {
            if l3 > 14 && !pkt.buf.adj(l3 - 14) {
                return N::Drop(C::Malformed);
            }
            pkt.meta.l3 = 14;
            N::TxUplink
        }
    }

    /// Process a frame.
    pub fn run<P: PacketBuf>(
        &mut self,
        env: &NodeEnv,
        access: &AccessTable,
        now: u64,
        input: &mut Frame<P>,
        tx_access: &mut TxFrame<P>,
        tx_uplink: &mut TxFrame<P>,
    ) {
        use IcmpErrorCounter as C;
        for mut pkt in input.drain(..) {
            let overflow = match self.time_exceeded(env, access, now, &mut pkt) {
                IcmpErrorNext::TxAccess => {
                    self.counters.inc(C::TimeExceeded);
                    enqueue_tx(tx_access, pkt)
                }
                IcmpErrorNext::TxUplink => {
                    self.counters.inc(C::TimeExceeded);
                    enqueue_tx(tx_uplink, pkt)
                }
                IcmpErrorNext::Drop(reason) => {
                    self.counters.inc(reason);
                    false
                }
            };
            if overflow {
                self.counters.inc(C::FrameOverflow);
            }
        }
    }
}

#[cfg(test)]
#[path = "icmp_error_tests.rs"]
mod tests;
