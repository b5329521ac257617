//! kbng-dataplane's metrics: observed, never recorded from the packet path.
//!
//! The dataplane's workers already keep per-core single-writer counters (VPP's scheme); an
//! OTel call per burst would add hashing and a lock to the packet path. So the dataplane hands
//! us a closure that snapshots those counters, and the SDK calls it at each collection (each
//! OTLP export and each `/metrics` scrape). The instruments are cumulative counters, but for
//! the ports' link state and the gRPC certificates' expiry, gauges.

use std::sync::Arc;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Meter, ObservableCounter, ObservableGauge};

use super::labels::{Colour, Direction, PlanLabels};

/// Dropped packets of one (node, reason) on one worker, since start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DropCount {
    /// The graph node's display name (`"session-lookup"`).
    pub node: &'static str,
    /// The counter's display string (`"no session"`).
    pub reason: &'static str,
    /// Packets dropped.
    pub packets: u64,
}

/// One graph node's runtime on one worker, since start (VPP's `show runtime`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeRuntime {
    /// The graph node's display name.
    pub node: &'static str,
    /// Times the node was called (one call per vector).
    pub calls: u64,
    /// Packets the node processed.
    pub vectors: u64,
    /// TSC cycles spent in the node.
    pub cycles: u64,
}

/// One worker's counters, since start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkerStats {
    /// The worker's index.
    pub worker: u16,
    /// Subscriber packets (those of a session, counted where it is policed), subscriber to
    /// core.
    pub packets_up: u64,
    /// Subscriber packets, core to subscriber.
    pub packets_down: u64,
    /// Subscriber bytes, subscriber to core.
    pub bytes_up: u64,
    /// Subscriber bytes, core to subscriber.
    pub bytes_down: u64,
    /// Drops by node and reason (zeros may be left out).
    pub drops: Vec<DropCount>,
    /// Per-node runtime.
    pub nodes: Vec<NodeRuntime>,
}

/// Policer verdicts for one plan, direction and colour, summed over workers, since start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicerCount {
    /// The plan's name (see [`super::PlanLabels`] for the cap on distinct names).
    pub plan: String,
    /// Traffic direction.
    pub direction: Direction,
    /// The verdict.
    pub colour: Colour,
    /// Packets given that verdict.
    pub packets: u64,
}

/// One counter of one port's device, since start: what it received and sent, and what it
/// lost before any worker saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortCount {
    /// The port's role as a node name (`"port-access"`, `"port-uplink"`).
    pub port: &'static str,
    /// The counter (`"rx packets"`, `"rx missed"`, ...).
    pub counter: &'static str,
    /// Packets.
    pub packets: u64,
}

/// Everything the dataplane reports at one collection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DataplaneSnapshot {
    /// One entry per worker.
    pub workers: Vec<WorkerStats>,
    /// One entry per (plan, direction, colour).
    pub policer: Vec<PolicerCount>,
    /// One entry per (port, counter).
    pub ports: Vec<PortCount>,
    /// Drops on the main core's control path (punted frames with no stream to go to,
    /// replies that could not be queued for transmit), one entry per reason.
    pub control_path: Vec<ControlPathDrop>,
    /// The gRPC listener's mutual TLS, when it has it.
    pub grpc_tls: Option<GrpcTlsCounts>,
    /// Each port's link; none for a port whose state could not be read.
    pub links: Vec<PortLink>,
}

/// What the gRPC listener's mutual TLS refused or could not reload, since start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GrpcTlsCounts {
    /// Connections whose handshake failed (no certificate, an untrusted one, not TLS).
    pub handshakes_failed: u64,
    /// Connections that did not finish their handshake in time.
    pub handshakes_timed_out: u64,
    /// Checks of the certificate files that found them changed but unusable.
    pub reloads_failed: u64,
    /// When the certificate chain the listener presents stops being valid (the earliest
    /// notAfter of the chain, Unix seconds); none when a certificate's validity could not be
    /// read.
    pub cert_not_after: Option<i64>,
    /// When the first of the CA certificates that admit clients expires (Unix seconds).
    pub client_ca_not_after: Option<i64>,
}

/// One port's link as the device reports it at this collection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortLink {
    /// The port's role as a node name (`"port-access"`, `"port-uplink"`).
    pub port: &'static str,
    pub up: bool,
}

/// Frames the main core's control path dropped for one reason, since start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlPathDrop {
    /// The counter's display string (`"inject dropped: bad frame or ring full"`).
    pub reason: &'static str,
    /// Frames dropped.
    pub frames: u64,
}

type Source = Arc<dyn Fn() -> DataplaneSnapshot + Send + Sync>;

/// Writes one observation: value and attributes.
type Sink<'a> = &'a mut dyn FnMut(u64, &[KeyValue]);

/// Turns a snapshot into one instrument's observations.
type Observe = fn(&DataplaneSnapshot, &PlanLabels, Sink<'_>);

/// The dataplane's observable instruments; keep it alive as long as the dataplane runs.
#[derive(Debug)]
pub struct DataplaneMetrics {
    _instruments: Vec<ObservableCounter<u64>>,
    _link: ObservableGauge<u64>,
    _tls_expiry: ObservableGauge<i64>,
}

fn worker(w: &WorkerStats) -> KeyValue {
    KeyValue::new("worker", i64::from(w.worker))
}

impl DataplaneMetrics {
    /// Registers the dataplane's instruments on `meter`, all reading from `source`. The
    /// closure runs once per instrument per collection (thirteen instruments, so thirteen calls per
    /// export or scrape), on the collecting thread: it should only read the workers' counters.
    pub fn register<F>(meter: &Meter, source: F) -> Self
    where
        F: Fn() -> DataplaneSnapshot + Send + Sync + 'static,
    {
        let source: Source = Arc::new(source);
        let plans = PlanLabels::default();
        let counter = |name: &'static str,
                       unit: &'static str,
                       description: &'static str,
                       observe: Observe| {
            let source = Arc::clone(&source);
            let plans = plans.clone();
            meter
                .u64_observable_counter(name)
                .with_unit(unit)
                .with_description(description)
                .with_callback(move |instrument| {
                    let snapshot = source();
                    observe(&snapshot, &plans, &mut |v, attrs| {
                        instrument.observe(v, attrs)
                    });
                })
                .build()
        };
        let instruments = vec![
            counter(
                "kbng.dataplane.packets",
                "{packet}",
                "Subscriber packets policed per worker and direction.",
                |s, _, out| {
                    for w in &s.workers {
                        out(w.packets_up, &[worker(w), KeyValue::new("direction", "up")]);
                        out(
                            w.packets_down,
                            &[worker(w), KeyValue::new("direction", "down")],
                        );
                    }
                },
            ),
            counter(
                "kbng.dataplane.io",
                "By",
                "Subscriber bytes policed per worker and direction.",
                |s, _, out| {
                    for w in &s.workers {
                        out(w.bytes_up, &[worker(w), KeyValue::new("direction", "up")]);
                        out(
                            w.bytes_down,
                            &[worker(w), KeyValue::new("direction", "down")],
                        );
                    }
                },
            ),
            counter(
                "kbng.dataplane.drops",
                "{packet}",
                "Packets dropped per worker, graph node and reason.",
                |s, _, out| {
                    for w in &s.workers {
                        for d in &w.drops {
                            out(
                                d.packets,
                                &[
                                    worker(w),
                                    KeyValue::new("node", d.node),
                                    KeyValue::new("reason", d.reason),
                                ],
                            );
                        }
                    }
                },
            ),
            counter(
                "kbng.dataplane.node.calls",
                "{call}",
                "Graph node calls (one per vector) per worker.",
                |s, _, out| node_field(s, out, |n| n.calls),
            ),
            counter(
                "kbng.dataplane.node.vectors",
                "{packet}",
                "Packets processed per graph node and worker.",
                |s, _, out| node_field(s, out, |n| n.vectors),
            ),
            counter(
                "kbng.dataplane.node.cycles",
                "{cycle}",
                "CPU cycles spent per graph node and worker.",
                |s, _, out| node_field(s, out, |n| n.cycles),
            ),
            counter(
                "kbng.dataplane.port.packets",
                "{packet}",
                "Packets each port's device received, sent and lost (rx missed: the rx queue \
                 was full), since start.",
                |s, _, out| {
                    for p in &s.ports {
                        out(
                            p.packets,
                            &[
                                KeyValue::new("port", p.port),
                                KeyValue::new("counter", p.counter),
                            ],
                        );
                    }
                },
            ),
            counter(
                "kbng.dataplane.control_path.drops",
                "{frame}",
                "Frames the dataplane's main core dropped between the workers and the control \
                 (DHCP and ARP punted with no Punt stream or a full one, replies that could \
                 not be queued for transmit), per reason.",
                |s, _, out| {
                    for d in &s.control_path {
                        out(d.frames, &[KeyValue::new("reason", d.reason)]);
                    }
                },
            ),
            counter(
                "kbng.dataplane.grpc.tls.refused",
                "{connection}",
                "Connections to the dataplane's gRPC listener refused by mutual TLS, per \
                 reason: a client without a certificate the dataplane trusts (a stranger, or \
                 the control after a renewal from another CA) or one that never finished.",
                |s, _, out| {
                    if let Some(t) = &s.grpc_tls {
                        out(
                            t.handshakes_failed,
                            &[KeyValue::new("reason", "handshake failed")],
                        );
                        out(
                            t.handshakes_timed_out,
                            &[KeyValue::new("reason", "handshake timed out")],
                        );
                    }
                },
            ),
            counter(
                "kbng.dataplane.grpc.tls.reload_errors",
                "{check}",
                "Checks of the gRPC certificate files that found them changed but unusable \
                 (unreadable, or not a certificate, key and CA that load together); the \
                 dataplane keeps serving with the old ones until they expire.",
                |s, _, out| {
                    if let Some(t) = &s.grpc_tls {
                        out(t.reloads_failed, &[]);
                    }
                },
            ),
            counter(
                "kbng.policer.packets",
                "{packet}",
                "Policer verdicts per plan, direction and colour.",
                |s, plans, out| {
                    for p in &s.policer {
                        out(
                            p.packets,
                            &[
                                KeyValue::new("plan", plans.label(&p.plan)),
                                KeyValue::new("direction", p.direction.as_str()),
                                KeyValue::new("colour", p.colour.as_str()),
                            ],
                        );
                    }
                },
            ),
        ];
        let source_tls = Arc::clone(&source);
        let link = meter
            .u64_observable_gauge("kbng.dataplane.port.link_up")
            .with_description(
                "1 when the port's device reports its link up, 0 when down (read once a \
                 second, without waiting for auto-negotiation), per port.",
            )
            .with_callback(move |g| {
                for l in source().links {
                    g.observe(u64::from(l.up), &[KeyValue::new("port", l.port)]);
                }
            })
            .build();
        let tls_expiry = meter
            .i64_observable_gauge("kbng.dataplane.grpc.tls.expiry_timestamp")
            .with_unit("s")
            .with_description(
                "When the certificates the gRPC listener holds stop being valid (notAfter, Unix \
                 time), per file: `cert` (the earliest of the served chain) and `client-ca` \
                 (the earliest CA that admits the control). Read from what is loaded, so a \
                 renewal that never reached the process shows here.",
            )
            .with_callback(move |g| {
                let Some(t) = source_tls().grpc_tls else {
                    return;
                };
                for (file, at) in [
                    ("cert", t.cert_not_after),
                    ("client-ca", t.client_ca_not_after),
                ] {
                    if let Some(at) = at {
                        g.observe(at, &[KeyValue::new("file", file)]);
                    }
                }
            })
            .build();
        Self {
            _instruments: instruments,
            _link: link,
            _tls_expiry: tls_expiry,
        }
    }
}

fn node_field(s: &DataplaneSnapshot, out: Sink<'_>, field: fn(&NodeRuntime) -> u64) {
    for w in &s.workers {
        for n in &w.nodes {
            out(field(n), &[worker(w), KeyValue::new("node", n.node)]);
        }
    }
}
