//! Telemetry of kbng-dataplane, entirely on the control core: never on a worker, never on the
//! packet path.
//!
//! ```text
//!  workers: single-writer counters (node counters, loop stats, per-slot session counters)
//!       │  read (relaxed loads) every POLL_INTERVAL by a task on the control thread
//!       ▼
//!  Poller ── accumulates per-session deltas into per-plan totals ──► snapshot (Mutex)
//!       ▲                                                              │ cloned at each OTLP
//!  shadow (slot → session id, plan) under the control lock, briefly    ▼ export and scrape
//!                                                           kbng_telemetry DataplaneMetrics
//! ```
//!
//! Per-plan policer counts come from the per-session counters, because workers count colours
//! per session, not per plan (adding a per-plan counter would put another cache line on the
//! packet path). A session's counters restart at zero when its slot is reused, and they vanish
//! when it is removed, so the poller keeps the last value it read per worker and slot and adds
//! only what grew: the per-plan totals are monotonic, and traffic of a session removed between
//! two polls (at most one interval's worth) is not counted. Memory: one entry per slot in use
//! per worker; time: one read of two cache lines per session per worker per poll.
//!
//! The SDK and the tokio runtime of the exporters start from a thread pinned to the control
//! core, so every thread they create inherits that affinity (see [`init`]).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use kbng_telemetry::metrics::{
    Colour, ControlPathDrop, DataplaneMetrics, DataplaneSnapshot, Direction, DropCount,
    NodeRuntime, PolicerCount, PortCount, PortLink, WorkerStats as WorkerSnapshot,
};
use kbng_telemetry::{PrometheusExporter, TelemetryConfig, TelemetryError, TelemetryGuard};

use crate::control::Control;
use crate::counters::{SessionCounts, WorkerStats};
use crate::grpc::ControlPathCounters;
use crate::grpc_tls::TlsCounters;
use crate::pipeline::PipelineCounters;
use crate::tables::SessionCounterArray;

/// How often the workers' counters are read, at most...
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);
/// ...and at most this share (1/20) of the control core goes to reading them.
const POLL_BUDGET_DIVISOR: u32 = 20;
/// Sessions read per turn of the poller before it lets the runtime's other tasks run (a few
/// hundred µs of work).
const POLL_CHUNK: usize = 4096;

/// Node counters that count packets dropped at that node (the "Drop:" counters of each node's
/// documentation). Every other counter counts packets passed on or handled; a test checks that
/// each counter of the pipeline is in exactly one of the two lists.
const DROPS: &[(&str, &str)] = &[
    ("ethernet-input", "bad L2 header"),
    ("ethernet-input", "bad IPv4 header"),
    ("ethernet-input", "bad ARP"),
    ("ethernet-input", "unsupported ethertype"),
    ("ethernet-input", "not our MAC"),
    ("ethernet-input", "frame overflow"),
    ("arp-reply", "bad ARP request"),
    ("arp-reply", "frame overflow"),
    ("uplink-arp", "uplink ARP not for us"),
    ("uplink-arp", "bad uplink ARP"),
    ("uplink-arp", "frame overflow"),
    ("session-lookup", "no session"),
    ("session-lookup", "no session downstream"),
    ("session-lookup", "spoofed source"),
    ("session-lookup", "frame overflow"),
    ("walled-garden", "walled garden blocked"),
    ("walled-garden", "frame overflow"),
    ("policer", "policer dropped"),
    ("policer", "no session"),
    ("policer", "frame overflow"),
    ("ip4-rewrite", "next hop unresolved"),
    ("ip4-rewrite", "no headroom"),
    ("ip4-rewrite", "no session"),
    ("ip4-rewrite", "frame overflow"),
    ("icmp-error", "ICMP error rate limited"),
    ("icmp-error", "no error for an ICMP error"),
    ("icmp-error", "no error for a fragment"),
    ("icmp-error", "no error for a non-unicast address"),
    ("icmp-error", "no source address"),
    ("icmp-error", "next hop unresolved"),
    ("icmp-error", "no headroom"),
    ("icmp-error", "malformed"),
    ("icmp-error", "frame overflow"),
    ("punt", "punt rate limited"),
    ("punt", "punt queue full"),
];

/// Counters that are not drops (kept as a list so that a new counter must be classified).
#[cfg(test)]
const NOT_DROPS: &[(&str, &str)] = &[
    ("ethernet-input", "upstream IPv4"),
    ("ethernet-input", "downstream IPv4"),
    ("ethernet-input", "DHCP punted"),
    ("ethernet-input", "ARP punted"),
    ("ethernet-input", "proxy ARP"),
    ("ethernet-input", "uplink ARP"),
    ("arp-reply", "proxy ARP replies"),
    ("uplink-arp", "uplink ARP replies"),
    ("uplink-arp", "next hop confirmed"),
    ("uplink-arp", "next hop MAC changed"),
    ("uplink-arp", "next hop ARP consumed"),
    ("session-lookup", "upstream hit"),
    ("session-lookup", "downstream hit"),
    ("walled-garden", "walled garden allowed"),
    ("walled-garden", "HTTP redirect punted"),
    ("policer", "green"),
    ("policer", "yellow"),
    ("policer", "red"),
    ("policer", "re-marked"),
    ("ip4-rewrite", "to uplink"),
    ("ip4-rewrite", "to access"),
    ("ip4-rewrite", "TTL expired"),
    ("icmp-error", "time exceeded sent"),
    ("punt", "punted"),
];

/// The pseudo-node of the whole graph: calls are non-empty bursts, vectors the packets of
/// those bursts, cycles the TSC cycles of those iterations (graph and transmit). The rows of
/// the nodes themselves follow it ([`crate::pipeline::RUNTIME_NODES`]).
pub const GRAPH_NODE: &str = "graph";

/// Why telemetry could not start.
#[derive(Debug, thiserror::Error)]
pub enum ObserveError {
    /// The exporters' runtime could not be built.
    #[error("building the telemetry runtime")]
    Runtime(#[source] std::io::Error),
    /// The telemetry initialisation thread failed.
    #[error("starting telemetry")]
    Telemetry(#[source] TelemetryError),
    /// The initialisation thread panicked or could not be spawned.
    #[error("the telemetry initialisation thread failed: {0}")]
    Thread(String),
    /// `--metrics-listen` could not be bound.
    #[error("--metrics-listen {addr}")]
    Metrics {
        addr: SocketAddr,
        #[source]
        source: TelemetryError,
    },
}

/// Keeps telemetry running; dropping it flushes the exporters, then stops their runtime.
#[derive(Debug)]
pub struct Telemetry {
    guard: Option<TelemetryGuard>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        // The guard's final flush needs the runtime its exporters run on.
        drop(self.guard.take());
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(Duration::from_secs(1));
        }
    }
}

struct Shared {
    meter: kbng_telemetry::Meter,
    prometheus: PrometheusExporter,
    metrics_listen: Option<SocketAddr>,
}

static SHARED: OnceLock<Shared> = OnceLock::new();

/// Starts logs, traces and metrics (`service.name` kbng-dataplane, `OTEL_*` environment),
/// logging to stderr. The SDK's threads and the exporters' one-thread runtime are created
/// from a thread pinned to `control_core`, so they inherit its affinity and never run on a
/// worker core. `/metrics` is served on `metrics_listen` once [`start`] runs.
pub fn init(
    control_core: u32,
    metrics_listen: Option<SocketAddr>,
) -> Result<Telemetry, ObserveError> {
    let core = control_core as usize;
    let started = std::thread::Builder::new()
        .name("kbng-telemetry-init".into())
        .spawn(move || {
            if !core_affinity::set_for_current(core_affinity::CoreId { id: core }) {
                eprintln!("kbng-dataplane: could not pin telemetry threads to core {core}");
            }
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("kbng-telemetry")
                .enable_all()
                .build()
                .map_err(ObserveError::Runtime)?;
            let guard = {
                let _in = rt.enter();
                kbng_telemetry::init(
                    "kbng-dataplane",
                    &TelemetryConfig {
                        log_to_stderr: true,
                        ..Default::default()
                    },
                )
                .map_err(ObserveError::Telemetry)?
            };
            Ok((guard, rt))
        })
        .map_err(|e| ObserveError::Thread(e.to_string()))?
        .join()
        .map_err(|_| ObserveError::Thread("panicked".into()))?;
    let (guard, rt) = started?;
    let _ = SHARED.set(Shared {
        meter: guard.meter(),
        prometheus: guard.prometheus().clone(),
        metrics_listen,
    });
    Ok(Telemetry {
        guard: Some(guard),
        runtime: Some(rt),
    })
}

/// On the control thread's runtime: registers the dataplane's instruments, starts the task
/// that reads the workers' counters every [`POLL_INTERVAL`], and serves `/metrics` when asked.
/// `paths` are the main core's own drop counters, `tls` the gRPC listener's when it has mutual
/// TLS. A no-op without [`init`].
pub async fn start(
    control: Arc<tokio::sync::Mutex<Control>>,
    paths: Arc<ControlPathCounters>,
    tls: Option<Arc<TlsCounters>>,
) -> Result<(), ObserveError> {
    let Some(shared) = SHARED.get() else {
        return Ok(());
    };
    let server = match shared.metrics_listen {
        Some(addr) => Some(
            shared
                .prometheus
                .serve(addr)
                .await
                .map_err(|source| ObserveError::Metrics { addr, source })?,
        ),
        None => None,
    };
    let snapshot: Arc<std::sync::Mutex<DataplaneSnapshot>> = Arc::default();
    let read = Arc::clone(&snapshot);
    let instruments = DataplaneMetrics::register(&shared.meter, move || {
        read.lock().map(|s| s.clone()).unwrap_or_default()
    });
    tokio::spawn(async move {
        let _keep = (instruments, server);
        let mut poller = Poller {
            paths: Some(paths),
            tls,
            ..Poller::default()
        };
        loop {
            let t = std::time::Instant::now();
            let s = poller.poll(&control).await;
            if let Ok(mut g) = snapshot.lock() {
                *g = s;
            }
            // A poll's cost grows with the sessions (125 ms for a million on this machine
            // when it read them in one go): past about 50,000 sessions the interval
            // stretches to keep it near 5% of the control core. The elapsed time counts
            // the turns it yielded to other tasks too, so under load it polls less often.
            let cost = t.elapsed();
            tokio::time::sleep(POLL_INTERVAL.max(cost * POLL_BUDGET_DIVISOR)).await;
        }
    });
    Ok(())
}

/// What the poller reads of one worker (shared handles, cloned once).
#[derive(Debug)]
struct WorkerHandles {
    sessions: SessionCounterArray,
    nodes: PipelineCounters,
    stats: Arc<WorkerStats>,
}

/// The last counts read of one slot of one worker, and whose they were.
#[derive(Debug, Clone, Copy, Default)]
struct Seen {
    id: u64,
    counts: SessionCounts,
}

/// Accumulated totals of one worker.
#[derive(Debug, Clone, Copy, Default)]
struct Totals {
    packets: [u64; 2],
    bytes: [u64; 2],
}

/// Turns the workers' counters into snapshots; owns the per-slot memory of the deltas.
#[derive(Debug, Default)]
pub struct Poller {
    workers: Vec<WorkerHandles>,
    seen: Vec<Vec<Seen>>,
    totals: Vec<Totals>,
    /// Plan name → packets by [direction][colour]. One entry per plan, so a session with
    /// traffic costs one lookup per poll, and a String only the first time its plan is seen
    /// (a tuple key with the name in it cost an allocation per session, direction and colour
    /// that grew, on every poll).
    policer: HashMap<String, [[u64; 3]; 2]>,
    /// (slot, session id, plan id) of every session, refilled each poll.
    scratch: Vec<(u32, u64, u32)>,
    /// The ports' counters as (port, counter, value), read each poll.
    ports: Vec<(&'static str, &'static str, u64)>,
    /// The ports' links, read each poll.
    links: Vec<PortLink>,
    /// The main core's control-path counters (none in tests that do not need them).
    paths: Option<Arc<ControlPathCounters>>,
    /// The gRPC listener's mutual TLS counters, when it has mutual TLS.
    tls: Option<Arc<TlsCounters>>,
}

impl Poller {
    /// Reads every worker once and returns the snapshot.
    pub async fn poll(&mut self, control: &tokio::sync::Mutex<Control>) -> DataplaneSnapshot {
        let plans: HashMap<u32, String> = {
            let c = control.lock().await;
            if self.workers.is_empty() {
                self.workers = c
                    .workers
                    .iter()
                    .map(|w| WorkerHandles {
                        sessions: Arc::clone(&w.sessions),
                        nodes: w.nodes.clone(),
                        stats: Arc::clone(&w.stats),
                    })
                    .collect();
            }
            self.ports.clear();
            self.links.clear();
            for p in &c.ports {
                p.snapshot(&mut self.ports);
                if let Some(up) = p.link_up() {
                    self.links.push(PortLink { port: p.node(), up });
                }
            }
            c.shadow
                .plans()
                .map(|p| (p.proto.plan_id, p.proto.name.clone()))
                .collect()
        };
        // The sessions a chunk at a time, yielding between chunks: this runtime has one thread,
        // which also pumps punted DHCP to the control and serves the programming calls. Read
        // in one go under the lock (about 0.1 µs each), the 280,000-370,000 sessions of a
        // DHCP bench search stalled that thread for some 30 ms each second, as long as the
        // workers' 1,024-deep punt rings last at 35,000 punts/s: the bench's first losses were
        // "punt queue full" until the walk was split.
        let mut after = 0;
        loop {
            self.scratch.clear();
            let last =
                control
                    .lock()
                    .await
                    .shadow
                    .slots_after(after, POLL_CHUNK, &mut self.scratch);
            self.accumulate(&plans);
            match last {
                Some(id) if self.scratch.len() == POLL_CHUNK => after = id,
                _ => break,
            }
            tokio::task::yield_now().await;
        }
        self.snapshot()
    }

    fn accumulate(&mut self, plans: &HashMap<u32, String>) {
        let n = self.workers.len();
        self.seen.resize_with(n, Vec::new);
        self.totals.resize(n, Totals::default());
        for (w, h) in self.workers.iter().enumerate() {
            let seen = &mut self.seen[w];
            let totals = &mut self.totals[w];
            for &(slot, id, plan_id) in &self.scratch {
                let Some(cell) = h.sessions.get(slot as usize) else {
                    continue;
                };
                let now = cell.read();
                if seen.len() <= slot as usize {
                    seen.resize(slot as usize + 1, Seen::default());
                }
                let last = &mut seen[slot as usize];
                // Another session in the slot, or the slot was cleared: count from zero.
                let base = if last.id == id {
                    last.counts
                } else {
                    SessionCounts::default()
                };
                let plan = match plan_id {
                    0 => "none",
                    p => plans.get(&p).map_or("unknown", String::as_str),
                };
                let mut gained = [[0u64; 3]; 2];
                for (d, row) in gained.iter_mut().enumerate() {
                    for (c, g) in row.iter_mut().enumerate() {
                        *g = grown(now.packets[d][c], base.packets[d][c]);
                        totals.packets[d] += *g;
                        totals.bytes[d] += grown(now.bytes[d][c], base.bytes[d][c]);
                    }
                }
                if gained != [[0; 3]; 2] {
                    let per_plan = match self.policer.get_mut(plan) {
                        Some(p) => p,
                        None => self.policer.entry(plan.to_owned()).or_default(),
                    };
                    for (sum, add) in per_plan.iter_mut().flatten().zip(gained.iter().flatten()) {
                        *sum += add;
                    }
                }
                *last = Seen { id, counts: now };
            }
        }
    }

    fn snapshot(&self) -> DataplaneSnapshot {
        let workers = self
            .workers
            .iter()
            .zip(&self.totals)
            .enumerate()
            .map(|(i, (h, t))| {
                let mut drops: Vec<DropCount> = h
                    .nodes
                    .snapshot()
                    .into_iter()
                    .filter(|(node, reason, _)| is_drop(node, reason))
                    .map(|(node, reason, packets)| DropCount {
                        node,
                        reason,
                        packets,
                    })
                    .collect();
                drops.push(DropCount {
                    node: "port-tx",
                    reason: "tx queue full",
                    packets: h.stats.tx_dropped.get(),
                });
                WorkerSnapshot {
                    worker: i as u16,
                    packets_up: t.packets[0],
                    packets_down: t.packets[1],
                    bytes_up: t.bytes[0],
                    bytes_down: t.bytes[1],
                    drops,
                    nodes: std::iter::once(NodeRuntime {
                        node: GRAPH_NODE,
                        calls: h.stats.rx_bursts.get(),
                        vectors: h.stats.rx_packets.get(),
                        cycles: h.stats.busy_cycles.get(),
                    })
                    .chain(h.nodes.runtime_rows().into_iter().map(
                        |(node, calls, vectors, cycles)| NodeRuntime {
                            node,
                            calls,
                            vectors,
                            cycles,
                        },
                    ))
                    .collect(),
                }
            })
            .collect();
        let mut policer: Vec<PolicerCount> = Vec::new();
        for (plan, counts) in &self.policer {
            for (d, colours) in counts.iter().enumerate() {
                for (c, &packets) in colours.iter().enumerate() {
                    if packets == 0 {
                        continue;
                    }
                    policer.push(PolicerCount {
                        plan: plan.clone(),
                        direction: if d == 0 {
                            Direction::Up
                        } else {
                            Direction::Down
                        },
                        colour: match c {
                            0 => Colour::Green,
                            1 => Colour::Yellow,
                            _ => Colour::Red,
                        },
                        packets,
                    });
                }
            }
        }
        policer.sort_by(|a, b| {
            (&a.plan, a.direction.as_str(), a.colour.as_str()).cmp(&(
                &b.plan,
                b.direction.as_str(),
                b.colour.as_str(),
            ))
        });
        let ports = self
            .ports
            .iter()
            .map(|&(port, counter, packets)| PortCount {
                port,
                counter,
                packets,
            })
            .collect();
        let control_path = self
            .paths
            .iter()
            .flat_map(|p| p.drops())
            .map(|(reason, frames)| ControlPathDrop { reason, frames })
            .collect();
        let grpc_tls = self.tls.as_ref().map(|t| t.read());
        DataplaneSnapshot {
            workers,
            policer,
            ports,
            control_path,
            grpc_tls,
            links: self.links.clone(),
        }
    }
}

/// What a counter gained since `before`; a counter below `before` was reset and gained all
/// it holds.
fn grown(now: u64, before: u64) -> u64 {
    now.checked_sub(before).unwrap_or(now)
}

fn is_drop(node: &str, reason: &str) -> bool {
    DROPS.iter().any(|&(n, r)| n == node && r == reason)
}

#[cfg(test)]
#[path = "observe_tests.rs"]
mod tests;
