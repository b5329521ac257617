//! Counters written by exactly one worker and read by the control thread.
//!
//! A counter is an `AtomicU64` updated with a relaxed load and store (not a locked
//! read-modify-write): there is a single writer, so no update is lost, and on x86-64 both are
//! plain `mov`s. Readers see a value at most one burst old. This is VPP's per-thread counter
//! scheme; the alternative (a stats snapshot command over the ring) would make counter reads
//! wait on the workers.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A single-writer counter.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Add `n` (writer side only).
    #[inline(always)]
    pub fn add(&self, n: u64) {
        self.0.store(self.0.load(Relaxed).wrapping_add(n), Relaxed);
    }
    /// Current value (any thread).
    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
    /// Reset to zero (writer side only, e.g. when a session slot is reused).
    pub fn clear(&self) {
        self.0.store(0, Relaxed);
    }
}

/// Implemented by each node's counter enum.
pub trait CounterKind: Copy + 'static {
    /// Number of counters of this node.
    const COUNT: usize;
    /// The node's display name ("session-lookup").
    const NODE: &'static str;
    /// All counters, in index order.
    fn all() -> &'static [Self];
    /// Index of the counter.
    fn index(self) -> usize;
    /// The counter's display string ("no session").
    fn name(self) -> &'static str;
}

/// Declare a node's counter enum with its display strings.
#[macro_export]
macro_rules! node_counters {
    ($(#[$m:meta])* $vis:vis enum $name:ident ($node:literal) { $($(#[$vm:meta])* $var:ident => $s:literal,)+ }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u8)]
        $vis enum $name { $($(#[$vm])* $var,)+ }
        impl $crate::counters::CounterKind for $name {
            const COUNT: usize = [$($name::$var,)+].len();
            const NODE: &'static str = $node;
            fn all() -> &'static [Self] { &[$($name::$var,)+] }
            fn index(self) -> usize { self as usize }
            fn name(self) -> &'static str { match self { $($name::$var => $s,)+ } }
        }
    };
}

/// The counters of one node on one worker. Cloning shares them (the worker writes, the
/// control thread's clone reads).
#[derive(Debug)]
pub struct NodeCounters<K: CounterKind> {
    cells: std::sync::Arc<[Counter]>,
    _k: std::marker::PhantomData<K>,
}

impl<K: CounterKind> Default for NodeCounters<K> {
    fn default() -> Self {
        Self {
            cells: (0..K::COUNT).map(|_| Counter::default()).collect(),
            _k: std::marker::PhantomData,
        }
    }
}

impl<K: CounterKind> Clone for NodeCounters<K> {
    fn clone(&self) -> Self {
        Self {
            cells: std::sync::Arc::clone(&self.cells),
            _k: std::marker::PhantomData,
        }
    }
}

impl<K: CounterKind> NodeCounters<K> {
    /// Count one event.
    #[inline(always)]
    pub fn inc(&self, k: K) {
        self.add(k, 1);
    }
    /// Count `n` events.
    #[inline(always)]
    pub fn add(&self, k: K, n: u64) {
        if let Some(c) = self.cells.get(k.index()) {
            c.add(n);
        }
    }
    /// Value of one counter.
    pub fn get(&self, k: K) -> u64 {
        self.cells.get(k.index()).map_or(0, Counter::get)
    }
    /// (node, counter, value) for every counter.
    pub fn snapshot(&self, out: &mut Vec<(&'static str, &'static str, u64)>) {
        for &k in K::all() {
            out.push((K::NODE, k.name(), self.get(k)));
        }
    }
}

/// Most counters a node may declare (the size of a [`BurstCounts`]).
pub const MAX_NODE_COUNTERS: usize = 16;

/// One node's counts over one burst, kept on the stack and added to the node's shared
/// counters once at the end: a packet costs one add to a local array instead of a load and
/// a store through the shared counter cells.
#[derive(Debug)]
pub struct BurstCounts<K: CounterKind> {
    n: [u32; MAX_NODE_COUNTERS],
    _k: std::marker::PhantomData<K>,
}

impl<K: CounterKind> Default for BurstCounts<K> {
    #[inline(always)]
    fn default() -> Self {
        const { assert!(K::COUNT <= MAX_NODE_COUNTERS) };
        Self {
            n: [0; MAX_NODE_COUNTERS],
            _k: std::marker::PhantomData,
        }
    }
}

impl<K: CounterKind> BurstCounts<K> {
    /// Count one event (a burst holds at most `FRAME_SIZE` packets: `u32` cannot overflow).
    #[inline(always)]
    pub fn inc(&mut self, k: K) {
        if let Some(c) = self.n.get_mut(k.index()) {
            *c += 1;
        }
    }

    /// Add the burst's counts to `to`.
    #[inline(always)]
    pub fn flush(&self, to: &NodeCounters<K>) {
        for (cell, &n) in to.cells.iter().zip(&self.n) {
            if n != 0 {
                cell.add(u64::from(n));
            }
        }
    }
}

/// Runtime of one node on one worker, as VPP's `show runtime` reports it: calls (non-empty
/// vectors the node processed), the packets of those vectors, and the TSC cycles spent in
/// the node. Single writer, like [`Counter`].
#[derive(Debug, Default)]
pub struct NodeClock {
    /// Non-empty vectors processed.
    pub calls: Counter,
    /// Packets in those vectors.
    pub vectors: Counter,
    /// TSC cycles spent processing them.
    pub cycles: Counter,
}

impl NodeClock {
    /// Account one vector of `packets` packets that took `cycles` (writer side only).
    #[inline(always)]
    pub fn add(&self, packets: usize, cycles: u64) {
        self.calls.add(1);
        self.vectors.add(packets as u64);
        self.cycles.add(cycles);
    }
}

/// A plain copy of a session's counters: `[direction][colour]` packets and bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionCounts {
    /// Packets per direction (up, down) and colour (green, yellow, red).
    pub packets: [[u64; 3]; 2],
    /// Bytes per direction and colour.
    pub bytes: [[u64; 3]; 2],
    /// Packets dropped by the colour's action, per direction.
    pub dropped: [u64; 2],
    /// Bytes of those packets, per direction.
    pub dropped_bytes: [u64; 2],
}

impl SessionCounts {
    /// Add another worker's counts.
    pub fn merge(&mut self, o: &SessionCounts) {
        for d in 0..2 {
            self.dropped[d] += o.dropped[d];
            self.dropped_bytes[d] += o.dropped_bytes[d];
            for c in 0..3 {
                self.packets[d][c] += o.packets[d][c];
                self.bytes[d][c] += o.bytes[d][c];
            }
        }
    }
}

/// Poll-loop statistics of one worker.
#[derive(Debug, Default)]
pub struct WorkerStats {
    /// Packets received.
    pub rx_packets: Counter,
    /// Packets transmitted.
    pub tx_packets: Counter,
    /// Packets the NIC did not take (dropped, counted).
    pub tx_dropped: Counter,
    /// Non-empty receive bursts.
    pub rx_bursts: Counter,
    /// TSC cycles spent on non-empty iterations.
    pub busy_cycles: Counter,
    /// Injected frames transmitted.
    pub injected: Counter,
    /// Nanoseconds the worker thread was on a CPU during its loop (from
    /// `/proc/thread-self/schedstat`; unlike TSC cycles it excludes time the thread was
    /// preempted on a shared machine). Written when the loop ends.
    pub cpu_ns: Counter,
}

/// Nanoseconds the calling thread has run on a CPU (Linux schedstat), 0 if unknown.
pub fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}
