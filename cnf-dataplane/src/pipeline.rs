//! The graph of one worker: node instances, the frames between them, and the per-worker
//! tables. [`Pipeline::process`] runs one received vector through every node in topological
//! order; each node drains its input frame completely before the next node runs, so frames
//! never hold packets between bursts and never overflow.
//!
//! The fused fast path: `session-lookup` calls the policer and the rewrite of `policer` and
//! `ip4-rewrite` for each packet of a non-captive session, instead of moving it through their
//! two frames. Chosen over VPP's frame-per-edge after measuring: each hand-off (a move of the
//! packet handle plus a drain) cost more instructions than policing the packet. The nodes keep
//! their own files, counters and `run`, which serves the captive path (`walled-garden` ->
//! `policer` -> `ip4-rewrite` through frames).
//!
//! Runtime (VPP's `show runtime`): the TSC is read once after every node that had packets, so
//! each node's vector gets its cycles at one `rdtsc` per node and burst ([`RUNTIME_NODES`]);
//! the fused stage is one row, named for all three nodes.

use std::sync::Arc;

use crate::counters::{BurstCounts, NodeClock, NodeCounters};
use crate::meter::SrTcmProfile;
use crate::nodes::NodeEnv;
use crate::nodes::arp_reply::{ArpReplyCounter, ArpReplyNode};
use crate::nodes::ethernet_input::{EthernetInputCounter, EthernetInputNode};
use crate::nodes::icmp_error::{IcmpErrorCounter, IcmpErrorNode};
use crate::nodes::ip4_rewrite::{Ip4RewriteCounter, Ip4RewriteNode};
use crate::nodes::policer::{PolicerCounter, PolicerNext, PolicerNode};
use crate::nodes::punt::{PuntCounter, PuntNode};
use crate::nodes::session_lookup::{SessionLookupCounter, SessionLookupNode};
use crate::nodes::uplink_arp::{UplinkArpCounter, UplinkArpNode};
use crate::nodes::walled_garden::{WalledGardenCounter, WalledGardenNode};
use crate::packet::{Frame, PacketBuf, TxFrame};
use crate::punt::PuntSink;
use crate::tables::{AccessTable, HugeTableBacking, PlanTable, SessionTable};

/// The tables one worker owns.
#[derive(Debug)]
pub struct Tables {
    /// Sessions, meters and session counters.
    pub sessions: SessionTable,
    /// Plans.
    pub plans: PlanTable,
    /// Gateways and walled garden in force.
    pub access: AccessTable,
    /// Access configuration being received (swapped in on commit).
    pub staged_access: AccessTable,
    /// How much of the session table sits on transparent huge pages.
    pub huge: HugeTableBacking,
}

impl Tables {
    /// Tables for `sessions` sessions and `plans` plans, hash seed `seed`; the session table
    /// is backed with transparent huge pages where the kernel allows it.
    pub fn new(sessions: usize, plans: usize, seed: u64) -> Self {
        let sessions = SessionTable::new(sessions, seed);
        Self {
            huge: sessions.back_with_huge_pages(),
            sessions,
            plans: PlanTable::new(plans),
            access: AccessTable::default(),
            staged_access: AccessTable::default(),
        }
    }
}

/// Shared handles on every node counter of one worker (for the control thread).
#[derive(Debug, Clone)]
pub struct PipelineCounters {
    /// ethernet-input
    pub ethernet_input: NodeCounters<EthernetInputCounter>,
    /// arp-reply
    pub arp_reply: NodeCounters<ArpReplyCounter>,
    /// session-lookup
    pub session_lookup: NodeCounters<SessionLookupCounter>,
    /// walled-garden
    pub walled_garden: NodeCounters<WalledGardenCounter>,
    /// policer
    pub policer: NodeCounters<PolicerCounter>,
    /// ip4-rewrite
    pub ip4_rewrite: NodeCounters<Ip4RewriteCounter>,
    /// punt
    pub punt: NodeCounters<PuntCounter>,
    /// uplink-arp
    pub uplink_arp: NodeCounters<UplinkArpCounter>,
    /// icmp-error
    pub icmp_error: NodeCounters<IcmpErrorCounter>,
    /// Runtime of each row of [`RUNTIME_NODES`].
    pub runtime: Arc<Runtime>,
}

/// The runtime rows of one worker, in the order the graph runs them.
pub const RUNTIME_NODES: [&str; 9] = [
    "ethernet-input",
    "arp-reply",
    "uplink-arp",
    FUSED_FORWARD,
    "walled-garden",
    "policer",
    "ip4-rewrite",
    "icmp-error",
    "punt",
];

/// The runtime row of the fused stage: session lookup of every packet, plus policing and
/// rewrite of the packets of non-captive sessions.
pub const FUSED_FORWARD: &str = "session-lookup+policer+ip4-rewrite";

/// Counter names of the runtime rows in [`PipelineCounters::snapshot_with_runtime`].
pub const RUNTIME_COUNTERS: [&str; 3] = ["runtime calls", "runtime vectors", "runtime cycles"];

/// Runtime of every row of [`RUNTIME_NODES`].
pub type Runtime = [NodeClock; RUNTIME_NODES.len()];

mod row {
    pub const ETHERNET_INPUT: usize = 0;
    pub const ARP_REPLY: usize = 1;
    pub const UPLINK_ARP: usize = 2;
    pub const FORWARD: usize = 3;
    pub const WALLED_GARDEN: usize = 4;
    pub const POLICER: usize = 5;
    pub const IP4_REWRITE: usize = 6;
    pub const ICMP_ERROR: usize = 7;
    pub const PUNT: usize = 8;
}

/// Times consecutive nodes of one burst: each lap ends one node's time and starts the next's.
struct Stopwatch<'a> {
    runtime: &'a Runtime,
    t: u64,
}

impl Stopwatch<'_> {
    #[inline(always)]
    fn lap(&mut self, row: usize, packets: usize) {
        let t = dpdk_sys::tsc();
        if let Some(c) = self.runtime.get(row) {
            c.add(packets, t.wrapping_sub(self.t));
        }
        self.t = t;
    }
}

impl PipelineCounters {
    /// (node, counter, value) for every counter.
    pub fn snapshot(&self) -> Vec<(&'static str, &'static str, u64)> {
        let mut v = Vec::new();
        self.ethernet_input.snapshot(&mut v);
        self.arp_reply.snapshot(&mut v);
        self.session_lookup.snapshot(&mut v);
        self.walled_garden.snapshot(&mut v);
        self.policer.snapshot(&mut v);
        self.ip4_rewrite.snapshot(&mut v);
        self.punt.snapshot(&mut v);
        self.uplink_arp.snapshot(&mut v);
        self.icmp_error.snapshot(&mut v);
        v
    }

    /// [`Self::snapshot`] followed by three rows per [`RUNTIME_NODES`] entry (calls, vectors,
    /// cycles; names in [`RUNTIME_COUNTERS`]): what the gRPC `GetCounters` reports.
    pub fn snapshot_with_runtime(&self) -> Vec<(&'static str, &'static str, u64)> {
        let mut v = self.snapshot();
        for (node, calls, vectors, cycles) in self.runtime_rows() {
            let [c, vs, cy] = RUNTIME_COUNTERS;
            v.extend([(node, c, calls), (node, vs, vectors), (node, cy, cycles)]);
        }
        v
    }

    /// (node, calls, vectors, cycles) for every row of [`RUNTIME_NODES`].
    pub fn runtime_rows(&self) -> Vec<(&'static str, u64, u64, u64)> {
        RUNTIME_NODES
            .iter()
            .zip(self.runtime.iter())
            .map(|(&n, c)| (n, c.calls.get(), c.vectors.get(), c.cycles.get()))
            .collect()
    }
}

/// The nodes and inter-node frames of one worker.
#[derive(Debug)]
pub struct Pipeline<P> {
    /// Static environment.
    pub env: NodeEnv,
    ethernet_input: EthernetInputNode,
    arp_reply: ArpReplyNode,
    session_lookup: SessionLookupNode,
    walled_garden: WalledGardenNode,
    policer: PolicerNode,
    ip4_rewrite: Ip4RewriteNode,
    punt: PuntNode,
    uplink_arp: UplinkArpNode,
    icmp_error: IcmpErrorNode,
    to_lookup: Box<Frame<P>>,
    to_arp: Box<Frame<P>>,
    to_punt: Box<Frame<P>>,
    to_garden: Box<Frame<P>>,
    to_policer: Box<Frame<P>>,
    to_rewrite: Box<Frame<P>>,
    to_uplink_arp: Box<Frame<P>>,
    to_icmp: Box<Frame<P>>,
    runtime: Arc<Runtime>,
}

impl<P: PacketBuf> Pipeline<P> {
    /// A pipeline for worker `worker`; punts are limited by `punt_limit` (packet tokens), and
    /// so are ICMP errors until [`Self::with_icmp_error_limit`] says otherwise.
    pub fn new(env: NodeEnv, worker: u16, punt_limit: SrTcmProfile, now: u64) -> Self {
        Self {
            env,
            ethernet_input: EthernetInputNode::default(),
            arp_reply: ArpReplyNode::default(),
            session_lookup: SessionLookupNode::default(),
            walled_garden: WalledGardenNode::default(),
            policer: PolicerNode::default(),
            ip4_rewrite: Ip4RewriteNode::default(),
            punt: PuntNode::new(worker, punt_limit, now),
            uplink_arp: UplinkArpNode::default(),
            icmp_error: IcmpErrorNode::new(punt_limit, now),
            to_lookup: Box::default(),
            to_arp: Box::default(),
            to_punt: Box::default(),
            to_garden: Box::default(),
            to_policer: Box::default(),
            to_rewrite: Box::default(),
            to_uplink_arp: Box::default(),
            to_icmp: Box::default(),
            runtime: Arc::default(),
        }
    }

    /// Limit ICMP errors of this worker to `limit` (packet tokens).
    pub fn with_icmp_error_limit(mut self, limit: SrTcmProfile, now: u64) -> Self {
        self.icmp_error = IcmpErrorNode::new(limit, now);
        self
    }

    /// Shared handles on this pipeline's counters.
    pub fn counters(&self) -> PipelineCounters {
        PipelineCounters {
            ethernet_input: self.ethernet_input.counters.clone(),
            arp_reply: self.arp_reply.counters.clone(),
            session_lookup: self.session_lookup.counters.clone(),
            walled_garden: self.walled_garden.counters.clone(),
            policer: self.policer.counters.clone(),
            ip4_rewrite: self.ip4_rewrite.counters.clone(),
            punt: self.punt.counters.clone(),
            uplink_arp: self.uplink_arp.counters.clone(),
            icmp_error: self.icmp_error.counters.clone(),
            runtime: Arc::clone(&self.runtime),
        }
    }

    /// Run one received vector (packets from either port, `meta.rx_port` set) through the
    /// graph at TSC time `now`. Leaves `rx` empty and appends to the two tx frames, which the
    /// caller must have drained to at most `FRAME_SIZE - rx.len()` packets.
    pub fn process(
        &mut self,
        tables: &mut Tables,
        now: u64,
        rx: &mut Frame<P>,
        tx_access: &mut TxFrame<P>,
        tx_uplink: &mut TxFrame<P>,
        punt_sink: &mut impl PuntSink,
    ) {
        self.env.refresh_next_hop();
        let env = &self.env;
        let mut clock = Stopwatch {
            runtime: &self.runtime,
            t: dpdk_sys::tsc(),
        };
        let n = rx.len();
        let in_place = self.ethernet_input.run(
            env,
            &tables.access,
            rx,
            &mut self.to_lookup,
            &mut self.to_arp,
            &mut self.to_uplink_arp,
            &mut self.to_punt,
        );
        clock.lap(row::ETHERNET_INPUT, n);
        let to_lookup: &mut Frame<P> = if in_place { rx } else { &mut self.to_lookup };
        let n = self.to_arp.len();
        if n > 0 {
            self.arp_reply.run(env, &mut self.to_arp, tx_access);
            clock.lap(row::ARP_REPLY, n);
        }
        let n = self.to_uplink_arp.len();
        if n > 0 {
            self.uplink_arp
                .run(env, now, &mut self.to_uplink_arp, tx_uplink);
            clock.lap(row::UPLINK_ARP, n);
        }
        let n = to_lookup.len();
        if n > 0 {
            let sessions = &tables.sessions;
            let plans = &tables.plans;
            let to_icmp = &mut *self.to_icmp;
            let mut policed = BurstCounts::default();
            let mut rewritten = BurstCounts::default();
            self.session_lookup
                .run(sessions, to_lookup, &mut self.to_garden, |mut pkt, line| {
                    match PolicerNode::police_line(
                        &mut policed,
                        sessions,
                        line,
                        plans,
                        now,
                        &mut pkt,
                    ) {
                        PolicerNext::Ip4Rewrite => Ip4RewriteNode::forward(
                            &mut rewritten,
                            env,
                            line,
                            pkt,
                            tx_access,
                            tx_uplink,
                            to_icmp,
                        ),
                        PolicerNext::Drop(reason) => policed.inc(reason),
                    }
                });
            policed.flush(&self.policer.counters);
            rewritten.flush(&self.ip4_rewrite.counters);
            clock.lap(row::FORWARD, n);
        }
        let n = self.to_garden.len();
        if n > 0 {
            self.walled_garden.run(
                &tables.access,
                &mut self.to_garden,
                &mut self.to_policer,
                &mut self.to_punt,
            );
            clock.lap(row::WALLED_GARDEN, n);
        }
        let n = self.to_policer.len();
        if n > 0 {
            self.policer.run(
                &tables.sessions,
                &tables.plans,
                now,
                &mut self.to_policer,
                &mut self.to_rewrite,
            );
            clock.lap(row::POLICER, n);
        }
        let n = self.to_rewrite.len();
        if n > 0 {
            self.ip4_rewrite.run(
                env,
                &tables.sessions,
                &mut self.to_rewrite,
                tx_access,
                tx_uplink,
                &mut self.to_icmp,
            );
            clock.lap(row::IP4_REWRITE, n);
        }
        let n = self.to_icmp.len();
        if n > 0 {
            self.icmp_error.run(
                env,
                &tables.access,
                now,
                &mut self.to_icmp,
                tx_access,
                tx_uplink,
            );
            clock.lap(row::ICMP_ERROR, n);
        }
        let n = self.to_punt.len();
        if n > 0 {
            self.punt.run(now, &mut self.to_punt, punt_sink);
            clock.lap(row::PUNT, n);
        }
    }
}

#[cfg(test)]
#[path = "pipeline_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "pipeline_uplink_tests.rs"]
mod uplink_tests;
