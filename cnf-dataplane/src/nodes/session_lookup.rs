//! `session-lookup`: finds each packet's session and enforces anti-spoofing.
//!
//! Upstream packets are looked up by (access port, outer VLAN, inner VLAN, source MAC) and
//! must carry the session's IPv4 address as their source; downstream packets are looked up by
//! destination IPv4. The burst is resolved in three stages, VPP's dual/quad-loop idea spread
//! over the whole vector: (1) hash every packet's key and prefetch its index bucket; (2) find
//! the first tag match in each (now cached) bucket and prefetch that session's line for the
//! packet's direction; (3) compare keys, check and sort. The prefetches of a stage are
//! independent of each other, so the cache misses of the whole burst overlap instead of
//! stalling one packet at a time; policer and rewrite then find the line in L1.
//!
//! Next nodes: `walled-garden` (captive sessions), `policer` (called per packet, fused with
//! `ip4-rewrite`: see [`crate::pipeline`]), drop.
//! Counters: see [`SessionLookupCounter`].
//! Per-core state: the counters; the session table is the worker's own replica.

use super::enqueue;
use crate::counters::{BurstCounts, NodeCounters};
use crate::node_counters;
use crate::packet::{Direction, FRAME_SIZE, Frame, PacketBuf, Pkt};
use crate::tables::{NO_CANDIDATE, SessionKey, SessionLine, SessionTable};

node_counters! {
    /// Counters of `session-lookup`.
    pub enum SessionLookupCounter ("session-lookup") {
        /// Upstream packets matched.
        UpstreamHit => "upstream hit",
        /// Downstream packets matched.
        DownstreamHit => "downstream hit",
        /// Drop: no session for the upstream key.
        NoSession => "no session",
        /// Drop: no session for the downstream address.
        NoSessionDownstream => "no session downstream",
        /// Drop: the source address is not the session's.
        SpoofedSource => "spoofed source",
        /// Drop: internal frame overflow (never expected).
        FrameOverflow => "frame overflow",
    }
}

/// Where `session-lookup` sends a packet.
#[derive(Debug, Clone, Copy)]
enum SessionLookupNext<'a> {
    /// Captive session.
    WalledGarden,
    /// Normal session, with its line for the packet's direction.
    Policer(&'a SessionLine),
    /// Dropped, with the reason.
    Drop(SessionLookupCounter),
}

/// The `session-lookup` node.
#[derive(Debug)]
pub struct SessionLookupNode {
    /// Counters.
    pub counters: NodeCounters<SessionLookupCounter>,
    /// Stage-one hashes, kept here so no burst re-zeroes 2 KiB.
    hashes: Box<[u64; FRAME_SIZE]>,
    /// Stage-two candidate slots (the first tag match of each packet's probe chain).
    candidates: Box<[u32; FRAME_SIZE]>,
}

impl Default for SessionLookupNode {
    fn default() -> Self {
        Self {
            counters: NodeCounters::default(),
            hashes: Box::new([0; FRAME_SIZE]),
            candidates: Box::new([NO_CANDIDATE; FRAME_SIZE]),
        }
    }
}

/// The upstream key of a packet.
#[inline(always)]
fn up_key<P: PacketBuf>(pkt: &Pkt<P>) -> SessionKey {
    SessionKey {
        port: 0,
        outer_vid: pkt.meta.outer_vid,
        inner_vid: pkt.meta.inner_vid,
        mac: pkt.meta.src_mac,
    }
}

impl SessionLookupNode {
    /// Process a frame: captive sessions' packets go to the `walled_garden` frame, the others
    /// to `policer`, called per packet with the session's line (the pipeline passes the fused policer and ip4-rewrite
    /// step there; see [`crate::pipeline`]).
    pub fn run<P: PacketBuf>(
        &mut self,
        sessions: &SessionTable,
        input: &mut Frame<P>,
        walled_garden: &mut Frame<P>,
        mut policer: impl FnMut(Pkt<P>, &SessionLine),
    ) {
        use SessionLookupCounter as C;
        use SessionLookupNext as N;
        let hashes = &mut *self.hashes;
        for (pkt, h) in input.iter().zip(hashes.iter_mut()) {
            let dir = pkt.meta.dir;
            *h = match dir {
                Direction::Up => sessions.up_hash(&up_key(pkt)),
                Direction::Down => sessions.down_hash(pkt.meta.dst_ip),
            };
            sessions.prefetch_bucket(dir, *h);
        }
        let candidates = &mut *self.candidates;
        for ((pkt, &h), c) in input.iter().zip(hashes.iter()).zip(candidates.iter_mut()) {
            *c = sessions.prefetch_line(pkt.meta.dir, h);
        }
        let mut counts = BurstCounts::default();
        for (i, mut pkt) in input.drain(..).enumerate() {
            // The mask keeps the index in range without a bounds check (i < FRAME_SIZE).
            let (hash, cand) = (
                hashes[i & (FRAME_SIZE - 1)],
                candidates[i & (FRAME_SIZE - 1)],
            );
            let next = match pkt.meta.dir {
                Direction::Up => match sessions.up_find_at(&up_key(&pkt), hash, cand) {
                    None => N::Drop(C::NoSession),
                    Some((_, s)) if s.ipv4() != pkt.meta.src_ip => N::Drop(C::SpoofedSource),
                    Some((slot, s)) => {
                        pkt.meta.slot = slot;
                        counts.inc(C::UpstreamHit);
                        if s.captive() {
                            N::WalledGarden
                        } else {
                            N::Policer(s)
                        }
                    }
                },
                Direction::Down => match sessions.down_find_at(pkt.meta.dst_ip, hash, cand) {
                    None => N::Drop(C::NoSessionDownstream),
                    Some((slot, s)) => {
                        pkt.meta.slot = slot;
                        counts.inc(C::DownstreamHit);
                        if s.captive() {
                            N::WalledGarden
                        } else {
                            N::Policer(s)
                        }
                    }
                },
            };
            match next {
                N::WalledGarden => {
                    if enqueue(walled_garden, pkt).is_some() {
                        counts.inc(C::FrameOverflow);
                    }
                }
                N::Policer(line) => policer(pkt, line),
                N::Drop(reason) => counts.inc(reason),
            }
        }
        counts.flush(&self.counters);
    }
}
