//! The worker poll loop over DPDK queues (`dpdk-sys`), and `PacketBuf` for `Mbuf`.
//!
//! One iteration: read the TSC once, apply queued control commands (bounded), receive a burst
//! from each port's queue of this worker, run the pipeline, transmit the two tx frames, then
//! transmit frames the control plane injected (worker 0 only). Nothing here allocates: frames
//! and bursts are fixed arrays made before the loop.
//!
//! Idle back-off (`--idle-sleep-us`, off by default): after [`IDLE_POLLS`] iterations in a row
//! that received, injected and applied nothing, the worker sleeps that long before polling
//! again, as DPDK's l3fwd-power does, and keeps sleeping between single polls until something
//! arrives. Production keeps the pure busy-poll (lowest latency, a
//! whole core); the back-off is for hosts where the worker shares CPUs with its control plane,
//! such as the 2-vCPU benchmark machine. A sleep lasts at least the thread's timer slack
//! (50 µs by default on Linux), so a packet arriving meanwhile waits up to that long plus the
//! sleep; the rx rings (`--rx-desc`) absorb the burst.
//!
//! RSS: each worker owns rx queue `i` of both ports. The access port hashes on the IPv4
//! source only and the uplink on the destination only (`RssHash::IpSourceOnly` /
//! `IpDestinationOnly`), with the same key and table, so a subscriber's upstream and downstream
//! packets land on the same worker and its policer buckets there see all of its traffic. Every
//! worker holds every session, so a device that cannot hash that way still forwards correctly;
//! only policing then splits per worker (start-up reports the RSS outcome).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use dpdk_sys::{Burst, Mbuf, Mempool, RxQueue, TxQueue};

use crate::bench::BenchTraffic;
use crate::command::CommandReceiver;
use crate::counters::WorkerStats;
use crate::doorbell::Doorbell;
use crate::packet::{Frame, PacketBuf, Pkt, PortId, TxFrame};
use crate::pipeline::{Pipeline, Tables};
use crate::punt::{PUNT_SNAPLEN, PuntRing};
use crate::task_bell::TaskBell;

impl PacketBuf for Mbuf {
    #[inline(always)]
    fn data(&self) -> &[u8] {
        Mbuf::data(self)
    }
    #[inline(always)]
    fn data_mut(&mut self) -> &mut [u8] {
        Mbuf::data_mut(self)
    }
    #[inline(always)]
    fn prepend(&mut self, n: usize) -> bool {
        u16::try_from(n)
            .ok()
            .and_then(|n| Mbuf::prepend(self, n))
            .is_some()
    }
    #[inline(always)]
    fn adj(&mut self, n: usize) -> bool {
        u16::try_from(n).is_ok_and(|n| Mbuf::adj(self, n))
    }
    #[inline(always)]
    fn trim(&mut self, n: usize) -> bool {
        u16::try_from(n).is_ok_and(|n| Mbuf::trim(self, n))
    }
}

/// A frame the control plane asks to transmit.
#[derive(Debug, Clone, Copy)]
pub struct InjectRecord {
    /// Port to send on.
    pub port: PortId,
    /// Bytes used in `data`.
    pub len: u16,
    /// The whole frame.
    pub data: [u8; PUNT_SNAPLEN],
}

impl Default for InjectRecord {
    fn default() -> Self {
        Self {
            port: PortId::Access,
            len: 0,
            data: [0; PUNT_SNAPLEN],
        }
    }
}

/// Which graph a worker runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PipelineMode {
    /// The BNG pipeline.
    Full,
    /// No processing: access rx to uplink tx and back (the I/O cost alone, like testpmd io).
    Empty,
}

/// The queues one worker owns, indexed by [`PortId`].
#[derive(Debug)]
pub struct WorkerQueues {
    /// Receive queues (access, uplink).
    pub rx: [RxQueue; 2],
    /// Transmit queues (access, uplink).
    pub tx: [TxQueue; 2],
}

/// Everything one worker owns.
#[derive(Debug)]
pub struct Worker {
    /// Worker index.
    pub index: u16,
    /// Tables (the worker's replica).
    pub tables: Tables,
    /// The graph.
    pub pipeline: Pipeline<Mbuf>,
    /// Control commands.
    pub commands: CommandReceiver,
    /// Punted packets to the control thread.
    pub punt: PuntRing,
    /// Rung after a burst that punted: wakes the punt pump.
    pub punt_bell: TaskBell,
    /// Answered by this worker: the control thread rings it after queueing an injected frame,
    /// which ends an idle back-off sleep early.
    pub wake: Doorbell,
    /// Injected frames from the control thread, and the pool to build them in.
    pub inject: Option<(rtrb::Consumer<InjectRecord>, Arc<Mempool>)>,
    /// Loop statistics.
    pub stats: Arc<WorkerStats>,
    /// Graph choice.
    pub mode: PipelineMode,
    /// Benchmark traffic stamping (bench mode only).
    pub bench: Option<BenchTraffic>,
    /// Sleep this long after [`IDLE_POLLS`] empty iterations (`--idle-sleep-us`); `None`:
    /// busy-poll.
    pub idle_sleep: Option<std::time::Duration>,
}

/// Empty iterations in a row before an idle sleep (a few µs of polling on this class of CPU).
/// Short, because every burst of control traffic (a punt, an inject, a session install) is
/// followed by this many polls: at 256, that spinning was most of the worker's CPU in the
/// DHCP bench. An injected frame rings the worker awake, so only received packets wait for
/// the sleep to end.
pub const IDLE_POLLS: u32 = 32;

/// Receive burst size per port and iteration.
pub const RX_BURST: usize = 32;
/// Commands applied per iteration at most.
pub const COMMANDS_PER_ITERATION: usize = 256;

impl Worker {
    /// Poll until `stop` is set.
    pub fn run(&mut self, q: &mut WorkerQueues, stop: &AtomicBool) {
        let mut burst: Burst<RX_BURST> = Burst::new();
        let mut out: Box<Burst<{ crate::packet::FRAME_SIZE }>> = Box::new(Burst::new());
        let mut rx: Box<Frame<Mbuf>> = Box::default();
        let mut tx_a: Box<TxFrame<Mbuf>> = Box::default();
        let mut tx_u: Box<TxFrame<Mbuf>> = Box::default();
        let cpu_start = crate::counters::thread_cpu_ns();
        self.wake.answer_here();
        let mut empty_polls: u32 = 0;
        while !stop.load(Ordering::Relaxed) {
            let now = dpdk_sys::tsc();
            let applied = self
                .commands
                .drain(&mut self.tables, now, COMMANDS_PER_ITERATION);
            for port in [PortId::Access, PortId::Uplink] {
                let n = q.rx[port as usize].rx(&mut burst);
                if n == 0 {
                    continue;
                }
                for mut m in burst.drain() {
                    if let Some(b) = self.bench.as_mut() {
                        b.stamp(&mut m, port);
                    }
                    // Cannot fail: 2 * RX_BURST <= FRAME_SIZE.
                    let _ = rx.try_push(Pkt::new(m, port));
                }
            }
            let rx_seen = !rx.is_empty();
            if rx_seen {
                self.stats.rx_packets.add(rx.len() as u64);
                self.stats.rx_bursts.add(1);
                match self.mode {
                    PipelineMode::Full => self.pipeline.process(
                        &mut self.tables,
                        now,
                        &mut rx,
                        &mut tx_a,
                        &mut tx_u,
                        &mut self.punt,
                    ),
                    PipelineMode::Empty => {
                        for p in rx.drain(..) {
                            let _ = match p.meta.rx_port {
                                PortId::Access => tx_u.try_push(p.buf),
                                PortId::Uplink => tx_a.try_push(p.buf),
                            };
                        }
                    }
                }
                for (frame, port) in [(&mut tx_a, PortId::Access), (&mut tx_u, PortId::Uplink)] {
                    if frame.is_empty() {
                        continue;
                    }
                    let c = q.tx[port as usize].tx_vec(frame);
                    self.stats.tx_packets.add(c.sent as u64);
                    self.stats.tx_dropped.add(c.dropped as u64);
                }
                if self.punt.take_pushed() {
                    self.punt_bell.ring();
                }
                self.stats
                    .busy_cycles
                    .add(dpdk_sys::tsc().saturating_sub(now));
            }
            let injected = self.inject(q, &mut out);
            if let Some(pause) = self.idle_sleep {
                if rx_seen || applied > 0 || injected > 0 {
                    empty_polls = 0;
                } else {
                    // Saturates: once idle, every empty poll sleeps again, so a quiet port
                    // costs one poll per sleep instead of IDLE_POLLS.
                    empty_polls = empty_polls.saturating_add(1);
                    if empty_polls >= IDLE_POLLS {
                        self.wake.wait(pause);
                    }
                }
            }
        }
        self.stats
            .cpu_ns
            .add(crate::counters::thread_cpu_ns().saturating_sub(cpu_start));
    }

    /// Transmits up to 32 injected frames, one transmit call per run of frames for the same
    /// port (DHCP replies come in runs: one `sendto` per run on af_packet, one doorbell on a
    /// NIC); returns how many were taken from the ring.
    fn inject(
        &mut self,
        q: &mut WorkerQueues,
        out: &mut Burst<{ crate::packet::FRAME_SIZE }>,
    ) -> usize {
        let Some((ring, pool)) = self.inject.as_mut() else {
            return 0;
        };
        let mut taken = 0;
        let mut run_port: Option<PortId> = None;
        // Records are read in place (a pop copies all 1.5 KiB of one out first), up to 32.
        // An empty ring returns before taking a chunk: committing even an empty one stores the
        // ring's head, on every poll of a busy-polling worker.
        let n = ring.slots().min(32);
        if n == 0 {
            return 0;
        }
        let Ok(chunk) = ring.read_chunk(n) else {
            return 0;
        };
        let (first, second) = chunk.as_slices();
        for rec in first.iter().chain(second) {
            taken += 1;
            let Some(mut m) = pool.alloc() else {
                self.stats.tx_dropped.add(1);
                continue;
            };
            let len = usize::from(rec.len).min(PUNT_SNAPLEN);
            match m.append(len as u16) {
                Some(b) => b.copy_from_slice(&rec.data[..len]),
                None => {
                    self.stats.tx_dropped.add(1);
                    continue;
                }
            }
            if let Some(p) = run_port
                && p != rec.port
            {
                transmit_injected(q, out, p, &self.stats);
            }
            run_port = Some(rec.port);
            let _ = out.push(m);
        }
        chunk.commit_all();
        if let Some(p) = run_port {
            transmit_injected(q, out, p, &self.stats);
        }
        taken
    }
}

fn transmit_injected(
    q: &mut WorkerQueues,
    out: &mut Burst<{ crate::packet::FRAME_SIZE }>,
    port: PortId,
    stats: &WorkerStats,
) {
    let c = q.tx[port as usize].tx(out);
    stats.injected.add(c.sent as u64);
    stats.tx_dropped.add(c.dropped as u64);
}
