//! `punt`: hands packets to the control plane (DHCP, ARP not answered locally, captive HTTP).
//! Punting is rate-limited per worker with an RFC 2697 srTCM in packet units (one token per
//! packet), because a subscriber can trigger it; only green packets are punted.
//!
//! Next nodes: the worker's punt ring; drop.
//! Counters: see [`PuntCounter`].
//! Per-core state: the counters, the rate limiter's buckets and one scratch record.

use crate::counters::NodeCounters;
use crate::meter::{Colour, SrTcm, SrTcmProfile};
use crate::node_counters;
use crate::packet::{Frame, PacketBuf};
use crate::punt::{NO_SLOT, PUNT_SNAPLEN, PuntReason, PuntRecord, PuntSink};

node_counters! {
    /// Counters of `punt`.
    pub enum PuntCounter ("punt") {
        /// Delivered to the control plane.
        Punted => "punted",
        /// Drop: above the punt rate.
        RateLimited => "punt rate limited",
        /// Drop: the punt ring is full (control plane not keeping up).
        QueueFull => "punt queue full",
    }
}

/// Where `punt` sends a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PuntNext {
    /// To the ring.
    Deliver,
    /// Dropped, with the reason.
    Drop(PuntCounter),
}

/// The `punt` node.
#[derive(Debug)]
pub struct PuntNode {
    /// Counters.
    pub counters: NodeCounters<PuntCounter>,
    limit: SrTcmProfile,
    bucket: SrTcm,
    worker: u16,
    scratch: Box<PuntRecord>,
}

impl PuntNode {
    /// A punt node for `worker` admitting packets per `limit` (tokens are packets).
    pub fn new(worker: u16, limit: SrTcmProfile, now: u64) -> Self {
        Self {
            counters: NodeCounters::default(),
            limit,
            bucket: SrTcm::new(&limit, now),
            worker,
            scratch: Box::default(),
        }
    }

    /// Process a frame.
    pub fn run<P: PacketBuf>(&mut self, now: u64, input: &mut Frame<P>, sink: &mut impl PuntSink) {
        for pkt in input.drain(..) {
            let next = if self.bucket.check(&self.limit, now, 1) != Colour::Green {
                PuntNext::Drop(PuntCounter::RateLimited)
            } else {
                let data = pkt.buf.data();
                let n = data.len().min(PUNT_SNAPLEN);
                let rec = &mut *self.scratch;
                rec.reason = PuntReason::from_u8(pkt.meta.punt_reason);
                rec.port = pkt.meta.rx_port;
                rec.worker = self.worker;
                rec.slot = match rec.reason {
                    PuntReason::HttpRedirect => pkt.meta.slot,
                    _ => NO_SLOT,
                };
                rec.len = n as u16;
                rec.orig_len = data.len() as u32;
                rec.data[..n].copy_from_slice(&data[..n]);
                if sink.deliver(rec) {
                    PuntNext::Deliver
                } else {
                    PuntNext::Drop(PuntCounter::QueueFull)
                }
            };
            match next {
                PuntNext::Deliver => self.counters.inc(PuntCounter::Punted),
                PuntNext::Drop(reason) => self.counters.inc(reason),
            }
        }
    }
}
