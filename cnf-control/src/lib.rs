//! kbng-control: the control plane of kbng. It turns a powered-on CPE into a session in the
//! dataplane that serves it, keeps the truth about sessions, and survives restarts.
//!
//! ```text
//!  dataplane ──Punt(DHCP, portal HTTP)──▶ dataplane.rs ──▶ engine task (core::engine, pure)
//!      ▲                                                     │ Output::{Inject, Program,
//!      └──Install/Modify/Remove (batched), Inject ◀──────────┘  Persist, Accounting, ...}
//!                                                store/ (redb) ◀─┘   radius/, api.rs
//! ```
//!
//! Invariants:
//! - `core/` is pure: no I/O, no clock; time arrives as Unix nanoseconds and timeouts as ticks,
//!   so every protocol rule is tested as a script.
//! - One task owns the engine; adapters talk to it through channels, so nothing locks.
//! - The store holds every bound session; the dataplanes are reconciled to it, never the
//!   reverse: what a dataplane lacks is installed, what the control does not know is removed,
//!   and both are reported as enumerated session ids.
//! - No address is handed out twice (property-tested in `core::pool`).
#![forbid(unsafe_code)]

pub mod api;
pub mod batch_isolation;
pub mod clock;
pub mod commit;
pub mod config;
pub mod core;
pub mod dataplane;
pub mod dataplane_renewal;
pub mod dataplane_tls;
pub mod health_metrics;
pub mod licence_file;
pub mod observe;
pub mod portal;
pub mod radius;
pub mod relay;
pub mod service;
pub mod store;
pub mod subscribers_file;
pub mod subscribers_guard;
