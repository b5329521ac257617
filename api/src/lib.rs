//! The control ↔ dataplane contract of kbng: protobuf package `kbng.dataplane.v1`.
//!
//! ```text
//!  kbng-control ──InstallSessions/Plans, ListSessions, GetCounters──▶ kbng-dataplane
//!       ▲                                                                  │
//!       └──────────── Punt stream: PuntedFrame ◀─▶ InjectedFrame ──────────┘
//! ```
//!
//! The generated code in `src/gen/` is checked in so that building the product needs no
//! `protoc`; the test `generated_code_is_current` regenerates it and fails on any difference
//! (`KBNG_REGEN=1 cargo test -p kbng-api` rewrites it).
//!
//! Invariants of the contract, relied on by both sides:
//! - batches are atomic: a rejected batch changes nothing;
//! - installing an identical session again succeeds and changes nothing;
//! - every error crosses the wire through [`ApiError`], so codes and field names are uniform.
#![forbid(unsafe_code)]

mod error;
pub mod fields;

pub use error::ApiError;

/// Generated messages, client and server of `kbng.dataplane.v1`.
pub mod v1 {
    #![allow(missing_debug_implementations, clippy::all)]
    include!("gen/kbng.dataplane.v1.rs");
}

/// The proto files of the contract, relative to this crate's `proto/` folder.
pub const PROTO_FILES: &[&str] = &["kbng/dataplane/v1/dataplane.proto"];
