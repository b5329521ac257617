//! Subscriber plans: the meter and colour actions per direction. Plans are few (thousands at
//! most) and small, so the table is a plain array indexed by a plan slot.

use crate::meter::{Colour, SrTcm, SrTcmProfile, TrTcm, TrTcmProfile};

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
    /// Action per colour, indexed by [`Colour::index`].
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

/// Per-session, per-direction meter state; its kind follows the plan's profile and is reset
/// (buckets full) when the kind changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MeterState {
    /// No meter.
    #[default]
    Off,
    /// srTCM buckets.
    Sr(SrTcm),
    /// trTCM buckets.
    Tr(TrTcm),
}

impl MeterState {
    /// Fresh state for a profile (buckets full at `now`).
    pub fn new(p: &MeterProfile, now: u64) -> Self {
        match p {
            MeterProfile::Off => MeterState::Off,
            MeterProfile::Sr(p) => MeterState::Sr(SrTcm::new(p, now)),
            MeterProfile::Tr(p) => MeterState::Tr(TrTcm::new(p, now)),
        }
    }

    /// Colour a packet; if the plan's meter kind changed since this state was made, start over.
    #[inline(always)]
    pub fn check(&mut self, p: &MeterProfile, now: u64, len: u32) -> Colour {
        match (p, &mut *self) {
            (MeterProfile::Off, _) => Colour::Green,
            (MeterProfile::Sr(p), MeterState::Sr(m)) => m.check(p, now, len),
            (MeterProfile::Tr(p), MeterState::Tr(m)) => m.check(p, now, len),
            (p, s) => {
                *s = MeterState::new(p, now);
                s.check(p, now, len)
            }
        }
    }
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
