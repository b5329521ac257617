//! `policer`: meters each packet with its session's plan (RFC 2697 srTCM or RFC 2698 trTCM,
//! colour-blind, per session and direction) and applies the plan's action for the colour:
//! transmit, re-mark DSCP (with an RFC 1624 incremental checksum update), or drop.
//!
//! The metered length is the IPv4 total length (tags and Ethernet header excluded, so that
//! a subscriber's rate does not depend on how many tags the access network adds). The clock
//! is the TSC value read once per burst by the worker.
//!
//! Next nodes: `ip4-rewrite`, drop.
//! Counters: see [`PolicerCounter`]; and per session and direction, packets and bytes per
//! colour ([`crate::tables::SessionTable::count`]).
//! Per-core state: the counters; meter buckets live in the worker's session table.

use kbng_wire::Ipv4Packet;

use super::enqueue;
use crate::counters::{BurstCounts, NodeCounters};
use crate::meter::Colour;
use crate::node_counters;
use crate::packet::{Direction, Frame, PacketBuf, Pkt};
use crate::tables::{ColourAction, PlanTable, SessionLine, SessionTable};

node_counters! {
    /// Counters of `policer`.
    pub enum PolicerCounter ("policer") {
        /// Packets coloured green.
        Green => "green",
        /// Packets coloured yellow.
        Yellow => "yellow",
        /// Packets coloured red.
        Red => "red",
        /// Packets whose DSCP was re-marked.
        Remarked => "re-marked",
        /// Drop: the colour's action is drop.
        PolicerDropped => "policer dropped",
        /// Drop: the session vanished between lookup and policing (never expected).
        NoSession => "no session",
        /// Drop: internal frame overflow (never expected).
        FrameOverflow => "frame overflow",
    }
}

/// Where `policer` sends a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicerNext {
    /// Forward.
    Ip4Rewrite,
    /// Dropped, with the reason.
    Drop(PolicerCounter),
}

/// The `policer` node.
#[derive(Debug, Default)]
pub struct PolicerNode {
    /// Counters.
    pub counters: NodeCounters<PolicerCounter>,
}

const COLOUR_COUNTER: [PolicerCounter; 3] = [
    PolicerCounter::Green,
    PolicerCounter::Yellow,
    PolicerCounter::Red,
];

impl PolicerNode {
    /// Police one packet at TSC time `now`: colour it, count it per session and node, apply
    /// the colour's action. The body of [`Self::run`].
    #[inline(always)]
    pub fn police<P: PacketBuf>(
        counts: &mut BurstCounts<PolicerCounter>,
        sessions: &SessionTable,
        plans: &PlanTable,
        now: u64,
        pkt: &mut Pkt<P>,
    ) -> PolicerNext {
        match sessions.line(pkt.meta.slot, pkt.meta.dir) {
            Some(line) => Self::police_line(counts, sessions, line, plans, now, pkt),
            None => PolicerNext::Drop(PolicerCounter::NoSession),
        }
    }

    /// [`Self::police`] with the session's line for the packet's direction in hand: the
    /// fused fast path ([`crate::pipeline`]) gets it from `session-lookup`, which prefetched
    /// and read it, so it is in L1 here.
    #[inline(always)]
    pub fn police_line<P: PacketBuf>(
        counts: &mut BurstCounts<PolicerCounter>,
        sessions: &SessionTable,
        line: &SessionLine,
        plans: &PlanTable,
        now: u64,
        pkt: &mut Pkt<P>,
    ) -> PolicerNext {
        use PolicerCounter as C;
        let slot = pkt.meta.slot;
        let dir = pkt.meta.dir;
        let len = u32::from(pkt.meta.ip_len);
        let plan = plans.get(line.plan());
        let policy = match dir {
            Direction::Up => &plan.up,
            Direction::Down => &plan.down,
        };
        let colour: Colour = line.police(&policy.meter, now, len);
        sessions.count_on(line, slot, dir, colour, len);
        counts.inc(COLOUR_COUNTER[colour.index()]);
        match policy.actions[colour.index()] {
            ColourAction::Transmit => PolicerNext::Ip4Rewrite,
            ColourAction::Remark(dscp) => {
                let l3 = usize::from(pkt.meta.l3);
                if let Some(b) = pkt.buf.data_mut().get_mut(l3..)
                    && let Ok(mut ip) = Ipv4Packet::new_checked(b)
                {
                    ip.set_dscp(dscp);
                }
                counts.inc(C::Remarked);
                PolicerNext::Ip4Rewrite
            }
            ColourAction::Drop => {
                sessions.count_drop(slot, dir, len);
                PolicerNext::Drop(C::PolicerDropped)
            }
        }
    }

    /// Process a frame at TSC time `now` (packets of captive sessions that the walled garden
    /// let through; the others are policed on the fused path).
    pub fn run<P: PacketBuf>(
        &mut self,
        sessions: &SessionTable,
        plans: &PlanTable,
        now: u64,
        input: &mut Frame<P>,
        rewrite: &mut Frame<P>,
    ) {
        let mut counts = BurstCounts::default();
        for mut pkt in input.drain(..) {
            match Self::police(&mut counts, sessions, plans, now, &mut pkt) {
                PolicerNext::Ip4Rewrite => {
                    if enqueue(rewrite, pkt).is_some() {
                        counts.inc(PolicerCounter::FrameOverflow);
                    }
                }
                PolicerNext::Drop(reason) => counts.inc(reason),
            }
        }
        counts.flush(&self.counters);
    }
}
