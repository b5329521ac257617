//! kbng-operator: reconciles `BNG`, `SubscriberPlan` and `Licence` resources into running
//! gateways.
//!
//! ```text
//!   Licence ──verify(public key)──▶ Licence.status ─┐
//!   SubscriberPlan ──validate─────▶ Plan.status ────┤
//!   BNG ─────────────────────────────────────────────┴─▶ build::* ──SSA──▶ owned objects
//!                                                        status::* ─────▶ BNG.status
//! ```
//!
//! Layout: [`plan`], [`build`], [`status`] and [`placement`] are pure (no I/O, unit-tested);
//! [`reconcile`] and [`lease`] are the kube-rs adapters around them.
//!
//! Invariants:
//! - Only the holder of the leader Lease reconciles; a replica that loses the Lease exits.
//! - Every write to an owned object is a server-side apply with field manager
//!   [`build::FIELD_MANAGER`], and every owned object has the BNG as controller owner, so
//!   deleting the BNG garbage-collects them after the drain finalizer lets go.
//! - Bad input (missing plan, invalid licence, unsatisfiable placement) becomes a condition and
//!   an event, never an error loop: reconcile errors are reserved for the API being unreachable.
#![forbid(unsafe_code)]

pub mod binaries;
pub mod build;
pub mod config;
pub mod control_api;
pub mod health;
pub mod lease;
pub mod placement;
pub mod plan;
pub mod quantity;
pub mod reconcile;
pub mod status;
