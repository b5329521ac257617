//! `arp-reply`: proxy ARP for the subscriber gateway addresses (RFC 826 "Packet Reception",
//! RFC 1027). `ethernet-input` sends here only requests from the access port whose target is a
//! gateway address; the request is turned into the reply in place (same VLAN tags) and sent
//! back out of the access port, so the control plane never sees ARP for its gateways.
//!
//! A reply is never larger than its request, so a subscriber gains no amplification; requests
//! are still bounded by the receive rate of the access queue.
//!
//! Next nodes: tx on the access port, drop.
//! Counters: see [`ArpReplyCounter`].
//! Per-core state: the counters.

use kbng_wire::{ArpRepr, MacAddr};

use super::{NodeEnv, enqueue_tx};
use crate::counters::NodeCounters;
use crate::node_counters;
use crate::packet::{Frame, PacketBuf, TxFrame};

node_counters! {
    /// Counters of `arp-reply`.
    pub enum ArpReplyCounter ("arp-reply") {
        /// Replies sent.
        Replied => "proxy ARP replies",
        /// Drop: the request could not be turned into a reply.
        BadRequest => "bad ARP request",
        /// Drop: internal frame overflow (never expected).
        FrameOverflow => "frame overflow",
    }
}

/// Where `arp-reply` sends a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArpReplyNext {
    /// Back out of the access port.
    TxAccess,
    /// Dropped, with the reason.
    Drop(ArpReplyCounter),
}

/// The `arp-reply` node.
#[derive(Debug, Default)]
pub struct ArpReplyNode {
    /// Counters.
    pub counters: NodeCounters<ArpReplyCounter>,
}

impl ArpReplyNode {
    /// Turn one request into its reply in place.
    #[inline]
    pub fn reply<P: PacketBuf>(&self, env: &NodeEnv, buf: &mut P, l3: usize) -> ArpReplyNext {
        let data = buf.data_mut();
        let Some(reply) = data
            .get(l3..)
            .and_then(|b| ArpRepr::parse(b).ok())
            .and_then(|req| req.reply_to(MacAddr(env.access_mac)))
        else {
            return ArpReplyNext::Drop(ArpReplyCounter::BadRequest);
        };
        let Some(arp) = data.get_mut(l3..) else {
            return ArpReplyNext::Drop(ArpReplyCounter::BadRequest);
        };
        if reply.emit(arp).is_err() {
            return ArpReplyNext::Drop(ArpReplyCounter::BadRequest);
        }
        if let Some(h) = data.get_mut(..12) {
            h[0..6].copy_from_slice(&reply.target_mac.0);
            h[6..12].copy_from_slice(&env.access_mac);
        }
        ArpReplyNext::TxAccess
    }

    /// Process a frame.
    pub fn run<P: PacketBuf>(&mut self, env: &NodeEnv, input: &mut Frame<P>, tx: &mut TxFrame<P>) {
        for mut pkt in input.drain(..) {
            let l3 = usize::from(pkt.meta.l3);
            match self.reply(env, &mut pkt.buf, l3) {
                ArpReplyNext::TxAccess => {
                    self.counters.inc(ArpReplyCounter::Replied);
                    if enqueue_tx(tx, pkt) {
                        self.counters.inc(ArpReplyCounter::FrameOverflow);
                    }
                }
                ArpReplyNext::Drop(reason) => self.counters.inc(reason),
            }
        }
    }
}
