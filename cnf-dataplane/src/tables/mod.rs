//! Per-worker tables: sessions (with their meter state and counters) and plans, sized once at
//! start-up and never reallocated.

pub mod access;
pub mod index;
pub mod plan;
pub mod session;

pub use access::{AccessTable, MAX_GARDEN_RULES, MAX_GATEWAYS};
pub use plan::{ColourAction, DirPolicy, MeterProfile, Plan, PlanTable};
pub use session::{
    HugeTableBacking, NO_CANDIDATE, Session, SessionCounterArray, SessionCounters, SessionKey,
    SessionLine, SessionTable, SlotCounters,
};
