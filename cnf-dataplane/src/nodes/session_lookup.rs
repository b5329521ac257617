//! `session-lookup`: finds each packet's session and enforces anti-spoofing.
//!
//! Upstream packets are looked up by (access port, outer VLAN, inner VLAN, source MAC) and
//! must carry the session's IPv4 address as their source; downstream packets are looked up by
//! destination IPv4. The burst is resolved in two passes: the first computes every packet's
//! hash and reads its index word, the second reads the session records. The loads of one pass
//! are independent of each other, so the CPU overlaps their cache misses, which is what an
//! explicit prefetch would buy (a prefetch intrinsic needs `unsafe`, forbidden in this crate).
//!
//! Next nodes: `walled-garden` (captive sessions), `policer`, drop.
//! Counters: see [`SessionLookupCounter`].
//! Per-core state: the counters; the session table is the worker's own replica.

use super::{NodeEnv, enqueue};
use crate::counters::NodeCounters;
use crate::node_counters;
use crate::packet::{Direction, FRAME_SIZE, Frame, PacketBuf, Pkt};
use crate::tables::{SessionKey, SessionTable};

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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionLookupNext {
    /// Captive session.
    WalledGarden,
    /// Normal session.
    Policer,
    /// Dropped, with the reason.
    Drop(SessionLookupCounter),
}

/// The `session-lookup` node.
#[derive(Debug)]
pub struct SessionLookupNode {
    /// Counters.
    pub counters: NodeCounters<SessionLookupCounter>,
    /// Pass-one results (hash, home index word), kept here so no burst re-zeroes 4 KiB.
    probe: Box<[(u64, u64); FRAME_SIZE]>,
}

impl Default for SessionLookupNode {
    fn default() -> Self {
        Self {
            counters: NodeCounters::default(),
            probe: Box::new([(0, 0); FRAME_SIZE]),
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
    /// Process a frame.
    pub fn run<P: PacketBuf>(
        &mut self,
        _env: &NodeEnv,
        sessions: &SessionTable,
        input: &mut Frame<P>,
        walled_garden: &mut Frame<P>,
        policer: &mut Frame<P>,
    ) {
        use SessionLookupCounter as C;
        use SessionLookupNext as N;
        // Pass one: hashes and index words for the whole burst.
        let probe = &mut *self.probe;
        for (pkt, pr) in input.iter().zip(probe.iter_mut()) {
            *pr = match pkt.meta.dir {
                Direction::Up => sessions.up_probe(&up_key(pkt)),
                Direction::Down => sessions.down_probe(pkt.meta.dst_ip),
            };
        }
        // Pass one and a half: touch the records the home words name (see `touch_record`).
        let mut sink = 0u32;
        for &(_, first) in probe.iter().take(input.len()) {
            sink ^= sessions.touch_record(first);
        }
        std::hint::black_box(sink);
        // Pass two: resolve against the session records, check, sort.
        for (mut pkt, &(hash, first)) in input.drain(..).zip(probe.iter()) {
            let next = match pkt.meta.dir {
                Direction::Up => match sessions.up_find(&up_key(&pkt), hash, first) {
                    None => N::Drop(C::NoSession),
                    Some(slot) => {
                        pkt.meta.slot = slot;
                        match sessions.get(slot) {
                            Some(s) if s.ipv4 != pkt.meta.src_ip => N::Drop(C::SpoofedSource),
                            Some(s) => {
                                self.counters.inc(C::UpstreamHit);
                                if s.captive {
                                    N::WalledGarden
                                } else {
                                    N::Policer
                                }
                            }
                            None => N::Drop(C::NoSession),
                        }
                    }
                },
                Direction::Down => match sessions.down_find(pkt.meta.dst_ip, hash, first) {
                    None => N::Drop(C::NoSessionDownstream),
                    Some(slot) => {
                        pkt.meta.slot = slot;
                        self.counters.inc(C::DownstreamHit);
                        match sessions.get(slot) {
                            Some(s) if s.captive => N::WalledGarden,
                            Some(_) => N::Policer,
                            None => N::Drop(C::NoSessionDownstream),
                        }
                    }
                },
            };
            let overflow = match next {
                N::WalledGarden => enqueue(walled_garden, pkt),
                N::Policer => enqueue(policer, pkt),
                N::Drop(reason) => {
                    self.counters.inc(reason);
                    None
                }
            };
            if overflow.is_some() {
                self.counters.inc(C::FrameOverflow);
            }
        }
    }
}
