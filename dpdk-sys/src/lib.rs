//! Bindings to the system DPDK (22.11) and the safe wrappers the dataplane uses. This is the
//! only crate of kbng that contains `unsafe`.
//!
//! # Purpose
//! `build.rs` finds `libdpdk` with pkg-config, compiles `shim/shim.c` (non-inline wrappers for
//! DPDK's static-inline fast path: rx/tx burst, mbuf alloc/free and data helpers, rdtsc, lcore
//! id, prefetch, the meter checks) and generates [`ffi`] with bindgen. The rest of the crate
//! wraps that in owning types that hand out `&[u8]`/`&mut [u8]`, never raw pointers (outside
//! [`ffi`]).
//!
//! # Invariants
//! - **EAL once.** [`Eal::init`] succeeds once per process; every constructor that needs the
//!   EAL takes `&Eal` as proof. Dropping the [`Eal`] runs `rte_eal_cleanup` only when no
//!   [`Mempool`] or [`Port`] is alive; otherwise the memory is left to process exit.
//! - **Mbuf ownership.** An [`Mbuf`] is the sole owner of a direct mbuf with reference count
//!   1 and frees it on drop; a [`Burst`] owns up to `N` of them in a fixed array (no heap) and
//!   frees them in bulk. Transmitting moves ownership to the driver. A [`Mempool`] whose mbufs
//!   are still out is not freed when dropped (it leaks rather than dangle). A started [`Port`]
//!   keeps its rx pool alive through an `Arc<Mempool>`.
//! - **Ports.** One [`Port`] value per port id. Packets move only through queue handles
//!   ([`RxQueue`], [`TxQueue`]): one handle per queue, taken from a started port. While any
//!   handle is alive the port cannot be configured or stopped (DPDK forbids that while queues
//!   are polled); dropping the port value and all handles stops and closes the device.
//!
//! # Thread rules
//! - [`Eal`] is `!Send` and `Sync`: init and drop happen on one thread (it becomes the main
//!   lcore); set-up may borrow it from scoped threads.
//! - [`RxQueue`]/[`TxQueue`] are `Send`: move each to the one worker that polls it. Their
//!   `rx`/`tx` take `&mut self`, so a queue is never polled from two threads at once.
//! - [`Mempool`] is `Send + Sync`; alloc/free are thread-safe. Threads that are EAL lcores, or
//!   that called [`register_thread`] (std threads: keep the guard for the thread's life), use
//!   the lock-free per-lcore cache; other threads go to the shared ring (slower, correct).
//! - [`Mbuf`] and [`Burst`] are `Send`: a packet may be freed or sent on another thread.
//! - `Port` queries (`stats`, `link`, `mac`, `device_info`) take `&self` and may run on the
//!   control thread while workers poll.
//! - [`tsc`], [`lcore_id`], [`socket_id`] are per-thread reads, callable anywhere.
//!
//! # Data flow
//! ```text
//!   Eal::init ──► Mempool::new (per socket) ──► Port::open ─► configure(pool) ─► start
//!                                                                  │
//!                         rx_queue(q) / tx_queue(q) handles ◄──────┘  (moved to workers)
//!   worker loop:
//!     now = tsc()                         once per burst
//!     rxq.rx(&mut burst)                  driver writes mbuf pointers into the burst's array
//!     for m in burst.drain() { ... }      sort into per-next-node bursts: pointer moves only
//!     txq.tx(&mut out)                    driver takes ownership; unsent ones bulk-freed
//! ```

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod cpu;
mod eal;
mod error;
mod hugemem;
mod mbuf;
mod mempool;
pub mod meter;
mod port;
mod queue;

pub use cpu::prefetch;
pub use eal::{Eal, ThreadRegistration, lcore_id, register_thread, socket_id, tsc, tsc_hz};
pub use error::DpdkError;
pub use hugemem::{HugeBacking, back_with_huge_pages};
pub use mbuf::{Burst, Drain, MAX_BURST, Mbuf};
pub use mempool::{DEFAULT_DATA_ROOM, Mempool, MempoolConfig};
pub use port::{
    DeviceInfo, Link, MAX_QUEUES, Port, PortConfig, PortSetup, PortStats, PortStatsReader, RssHash,
    RssOutcome,
};
pub use queue::{RxQueue, TxCount, TxQueue};

/// Raw bindgen output for the allowlisted DPDK API and the `kbng_*` shim functions. Everything
/// here is `unsafe` to call; prefer the safe wrappers.
#[allow(
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case,
    dead_code,
    missing_docs,
    missing_debug_implementations,
    unsafe_op_in_unsafe_fn,
    clippy::all,
    clippy::pedantic,
    clippy::undocumented_unsafe_blocks
)]
pub mod ffi {
    include!(concat!(env!("OUT_DIR"), "/bindings.rs"));
}
