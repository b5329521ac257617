//! Subscriber plans: the meter and colour actions per direction. Plans are few (thousands at
//! most) and small, so the table is a plain array indexed by a plan slot.

use crate::meter::{SrTcmProfile, TrTcmProfile};

/// What a meter's colour does to a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ColourAction {
    /// Forward unchanged.
    #[default]
    Transmit,
    /// Forward with the IPv4 DSCP set to this value (0..=63).
    Remark(u8),
    /// Drop (counted as "policer dropped" on the policer node).
    Drop,
}

/// A meter profile: none, srTCM or trTCM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MeterProfile {
    /// No metering: every packet is green.
    #[default]
    Off,
    /// RFC 2697.
    Sr(SrTcmProfile),
    /// RFC 2698.
    Tr(TrTcmProfile),
}

/// Per-direction policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DirPolicy {
    /// The meter.
    pub meter: MeterProfile,
    /// Action per colour, indexed by [`crate::meter::Colour::index`].
    pub actions: [ColourAction; 3],
}

/// A plan: upstream and downstream policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Plan {
    /// Subscriber to core.
    pub up: DirPolicy,
    /// Core to subscriber.
    pub down: DirPolicy,
}

/// The plan table of one worker.
#[derive(Debug, Clone)]
pub struct PlanTable {
    plans: Box<[Plan]>,
}

impl PlanTable {
    /// A table of `capacity` plans, all "no meter, transmit".
    pub fn new(capacity: usize) -> Self {
        Self {
            plans: vec![Plan::default(); capacity.max(1)].into_boxed_slice(),
        }
    }
    /// Capacity.
    pub fn capacity(&self) -> usize {
        self.plans.len()
    }
    /// The plan in a slot (slot 0's default if out of range; control validates slots).
    #[inline(always)]
    pub fn get(&self, slot: u16) -> &Plan {
        self.plans.get(usize::from(slot)).unwrap_or(&self.plans[0])
    }
    /// Install a plan.
    pub fn set(&mut self, slot: u16, plan: Plan) {
        if let Some(p) = self.plans.get_mut(usize::from(slot)) {
            *p = plan;
        }
    }
}
