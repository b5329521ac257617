//! `uplink-arp`: ARP on the uplink (RFC 826), answered and learned on the worker so neither the
//! control plane nor a static neighbour entry is in the uplink's ARP path.
//!
//! `ethernet-input` sends here every ARP packet from the uplink when an uplink address is
//! configured. A packet whose sender is the next-hop address (reply, request or gratuitous)
//! updates the shared [`NextHopCell`](crate::neighbour::NextHopCell) (RFC 826 "merge": the
//! sender's pair is learned from any packet). A request for our uplink address is turned into
//! its reply in place (same tags) and sent back out of the uplink. Everything else is dropped
//! and counted: the control plane has no use for uplink ARP.
//!
//! Next nodes: tx on the uplink, drop (after learning, a reply or gratuitous ARP is consumed).
//! Counters: see [`UplinkArpCounter`].
//! Per-core state: the counters.

use kbng_wire::{ArpOp, ArpRepr, MacAddr};

use super::{NodeEnv, enqueue_tx};
use crate::counters::NodeCounters;
use crate::node_counters;
use crate::packet::{Frame, PacketBuf, TxFrame};

node_counters! {
    /// Counters of `uplink-arp`.
    pub enum UplinkArpCounter ("uplink-arp") {
        /// Requests for our uplink address answered.
        Replied => "uplink ARP replies",
        /// ARP from the next hop seen (its MAC confirmed).
        Learned => "next hop confirmed",
        /// ARP from the next hop carried a MAC different from the one in use.
        Changed => "next hop MAC changed",
        /// Consumed: ARP from the next hop that needs no answer.
        Consumed => "next hop ARP consumed",
        /// Drop: neither from the next hop nor a request for our address.
        NotOurs => "uplink ARP not for us",
        /// Drop: not an Ethernet/IPv4 ARP packet, or a sender MAC that is not unicast.
        Bad => "bad uplink ARP",
        /// Drop: internal frame overflow (never expected).
        FrameOverflow => "frame overflow",
    }
}

/// Where `uplink-arp` sends a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UplinkArpNext {
    /// The reply, back out of the uplink.
    TxUplink,
    /// Dropped or consumed, with the reason.
    Drop(UplinkArpCounter),
}

/// The `uplink-arp` node.
#[derive(Debug, Default)]
pub struct UplinkArpNode {
    /// Counters.
    pub counters: NodeCounters<UplinkArpCounter>,
}

fn is_unicast(mac: &[u8; 6]) -> bool {
    mac[0] & 1 == 0 && *mac != [0; 6]
}

impl UplinkArpNode {
    /// Learn from and answer one packet at TSC time `now`.
    #[inline]
    pub fn handle<P: PacketBuf>(
        &self,
        env: &NodeEnv,
        now: u64,
        buf: &mut P,
        l3: usize,
    ) -> UplinkArpNext {
        use UplinkArpCounter as C;
        let data = buf.data_mut();
        let Some(arp) = data.get(l3..).and_then(|b| ArpRepr::parse(b).ok()) else {
            return UplinkArpNext::Drop(C::Bad);
        };
        if !is_unicast(&arp.sender_mac.0) {
            return UplinkArpNext::Drop(C::Bad);
        }
        let from_next_hop = env.next_hop_ip != 0 && u32::from(arp.sender_ip) == env.next_hop_ip;
        if from_next_hop {
            self.counters.inc(C::Learned);
            if env.next_hop.learn(arp.sender_mac.0, now) {
                self.counters.inc(C::Changed);
            }
        }
        let for_us = arp.op == ArpOp::Request
            && u32::from(arp.target_ip) == env.uplink_ip
            && !arp.is_gratuitous();
        if !for_us {
            return UplinkArpNext::Drop(if from_next_hop {
                C::Consumed
            } else {
                C::NotOurs
            });
        }
        let Some(reply) = arp.reply_to(MacAddr(env.uplink_mac)) else {
            return UplinkArpNext::Drop(C::Bad);
        };
        let emitted = data.get_mut(l3..).is_some_and(|b| reply.emit(b).is_ok());
        let Some(h) = data.get_mut(..12).filter(|_| emitted) else {
            return UplinkArpNext::Drop(C::Bad);
        };
        h[0..6].copy_from_slice(&reply.target_mac.0);
        h[6..12].copy_from_slice(&env.uplink_mac);
        UplinkArpNext::TxUplink
    }

    /// Process a frame.
    pub fn run<P: PacketBuf>(
        &mut self,
        env: &NodeEnv,
        now: u64,
        input: &mut Frame<P>,
        tx_uplink: &mut TxFrame<P>,
    ) {
        for mut pkt in input.drain(..) {
            let l3 = usize::from(pkt.meta.l3);
            match self.handle(env, now, &mut pkt.buf, l3) {
                UplinkArpNext::TxUplink => {
                    self.counters.inc(UplinkArpCounter::Replied);
                    if enqueue_tx(tx_uplink, pkt) {
                        self.counters.inc(UplinkArpCounter::FrameOverflow);
                    }
                }
                UplinkArpNext::Drop(reason) => self.counters.inc(reason),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nodes::testpkt::*;
    use crate::packet::HeapBuf;

    fn handle(env: &NodeEnv, frame: &[u8], now: u64) -> (UplinkArpNext, HeapBuf) {
        let node = UplinkArpNode::default();
        let mut b = HeapBuf::from_bytes(frame);
        (node.handle(env, now, &mut b, 14), b)
    }

    #[test]
    fn answers_requests_for_the_uplink_address_and_learns_the_asker() {
        let env = uplink_env();
        let req = arp_request(CORE_MAC, &[], NEXT_HOP_IP, UPLINK_IP);
        let (next, b) = handle(&env, &req, 7);
        assert_eq!(next, UplinkArpNext::TxUplink);
        let r = ArpRepr::parse(&b.data()[14..]).unwrap();
        assert_eq!(r.op, ArpOp::Reply);
        assert_eq!(r.sender_ip.octets(), UPLINK_IP);
        assert_eq!(r.sender_mac.0, UPLINK_MAC);
        assert_eq!(r.target_mac.0, CORE_MAC);
        assert_eq!(&b.data()[..6], &CORE_MAC);
        assert_eq!(&b.data()[6..12], &UPLINK_MAC);
        // The request came from the next hop: its MAC is learned too.
        assert_eq!(env.next_hop.mac(), Some(CORE_MAC));
    }

    #[test]
    fn learns_replies_and_gratuitous_arp_from_the_next_hop_only() {
        let env = uplink_env();
        let other = [2, 0, 0, 0, 0, 0x77];
        let (next, _) = handle(&env, &arp_reply(other, [192, 0, 2, 9], UPLINK_IP), 1);
        assert_eq!(next, UplinkArpNext::Drop(UplinkArpCounter::NotOurs));
        assert_eq!(env.next_hop.mac(), None);
        let (next, _) = handle(&env, &arp_reply(CORE_MAC, NEXT_HOP_IP, UPLINK_IP), 2);
        assert_eq!(next, UplinkArpNext::Drop(UplinkArpCounter::Consumed));
        assert_eq!(env.next_hop.mac(), Some(CORE_MAC));
        // The next hop moves to another MAC and announces it.
        let moved = [2, 0, 0, 0, 0, 0xdd];
        let garp = arp_request(moved, &[], NEXT_HOP_IP, NEXT_HOP_IP);
        let (next, _) = handle(&env, &garp, 3);
        assert_eq!(next, UplinkArpNext::Drop(UplinkArpCounter::Consumed));
        assert_eq!(env.next_hop.mac(), Some(moved));
    }

    #[test]
    fn refuses_broadcast_senders_and_garbage() {
        let env = uplink_env();
        let bad = arp_reply([0xff; 6], NEXT_HOP_IP, UPLINK_IP);
        assert_eq!(
            handle(&env, &bad, 1).0,
            UplinkArpNext::Drop(UplinkArpCounter::Bad)
        );
        assert_eq!(env.next_hop.mac(), None);
        let short = arp_request(CORE_MAC, &[], NEXT_HOP_IP, UPLINK_IP);
        assert_eq!(
            handle(&env, &short[..30], 1).0,
            UplinkArpNext::Drop(UplinkArpCounter::Bad)
        );
    }
}
