//! The ports' own counters (`rte_eth_stats`), beside the graph's node counters: what the
//! device received and sent, and what it lost before any worker saw it (an rx queue that
//! overflowed because the worker fell behind, no mbuf to receive into). Read on the main
//! lcore, from [`dpdk_sys::PortStatsReader`] handles; never on a worker.

use dpdk_sys::{Link, PortStats, PortStatsReader};

/// One port's counters as rows `(node, counter, value)`, the node named for the port's role
/// (`"port-access"`, `"port-uplink"`).
#[derive(Debug, Clone)]
pub struct PortCounters {
    node: &'static str,
    reader: PortStatsReader,
}

/// Reads one counter out of a port's stats.
type Field = fn(&PortStats) -> u64;

/// The counters exported per port, and their fields. The last four count packets lost.
pub const ROWS: &[(&str, Field)] = &[
    ("rx packets", |s| s.ipackets),
    ("tx packets", |s| s.opackets),
    ("rx missed", |s| s.imissed),
    ("rx errors", |s| s.ierrors),
    ("rx no mbuf", |s| s.rx_nombuf),
    ("tx errors", |s| s.oerrors),
];

impl PortCounters {
    /// Counters of the port `reader` reads, reported under `node`.
    pub fn new(node: &'static str, reader: PortStatsReader) -> Self {
        Self { node, reader }
    }

    /// The port's role, as its rows name it.
    pub fn node(&self) -> &'static str {
        self.node
    }

    /// The link as the device reports it now (without waiting for auto-negotiation); `None`
    /// when it cannot say.
    pub fn link(&self) -> Option<Link> {
        match self.reader.link() {
            Ok(l) => Some(l),
            Err(e) => {
                tracing::debug!(port = self.node, "port link: {e}");
                None
            }
        }
    }

    /// Whether the device reports its link up; `None` when it cannot say.
    pub fn link_up(&self) -> Option<bool> {
        self.link().map(|l| l.up)
    }

    /// Appends this port's rows to `out`; a port whose counters cannot be read adds none (and
    /// says so at debug level: at shutdown the device may be going away).
    pub fn snapshot(&self, out: &mut Vec<(&'static str, &'static str, u64)>) {
        match self.reader.stats() {
            Ok(s) => out.extend(ROWS.iter().map(|&(c, f)| (self.node, c, f(&s)))),
            Err(e) => tracing::debug!(port = self.node, "port counters: {e}"),
        }
    }
}
