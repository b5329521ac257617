//! A `SubscriberPlan` spec validated into the domain plan the control pods program.
//!
//! The CRD's CEL rules refuse most bad plans at the API server already; this is the second
//! line, for objects stored before a rule existed or written with validation off, and the one
//! place that turns a spec into a value the rest of the operator trusts. Every problem is
//! reported, not only the first, so one status condition tells the whole story.

use kbng_crds::plan::{
    ColourAction, ColourActions, DirectionPolicy, PolicerMode, SubscriberPlanSpec,
};
use serde::Serialize;

/// One direction of a validated plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Direction {
    pub mode: PolicerMode,
    pub cir_bps: u64,
    /// trTCM: the peak rate; srTCM: equal to `cir_bps` (RFC 2697 has one rate).
    pub pir_bps: u64,
    pub cbs_bytes: u64,
    /// trTCM: peak burst size (RFC 2698); srTCM: excess burst size (RFC 2697).
    pub pbs_bytes: u64,
    pub green: ColourAction,
    pub yellow: ColourAction,
    pub red: ColourAction,
}

impl Direction {
    /// Back to the SubscriberPlan's shape, as the control's config file takes it.
    pub fn policy(&self) -> DirectionPolicy {
        DirectionPolicy {
            mode: self.mode,
            cir_bps: self.cir_bps,
            pir_bps: (self.mode == PolicerMode::TrTcm).then_some(self.pir_bps),
            cbs_bytes: self.cbs_bytes,
            pbs_bytes: self.pbs_bytes,
            actions: ColourActions {
                green: self.green,
                yellow: self.yellow,
                red: self.red,
            },
        }
    }
}

/// A plan the dataplanes can be programmed with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    pub name: String,
    /// The id the dataplanes know the plan by; stable for a name (see [`plan_id`]).
    pub plan_id: u32,
    pub upstream: Direction,
    pub downstream: Direction,
}

/// Everything wrong with one plan spec.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", .problems.join("; "))]
pub struct PlanError {
    pub problems: Vec<String>,
}

impl Plan {
    /// Validates `spec` into a plan named `name`, reporting every problem found.
    pub fn validate(name: &str, spec: &SubscriberPlanSpec) -> Result<Plan, PlanError> {
        let mut problems = Vec::new();
        let upstream = direction("upstream", &spec.upstream, &mut problems);
        let downstream = direction("downstream", &spec.downstream, &mut problems);
        match (upstream, downstream) {
            (Some(upstream), Some(downstream)) if problems.is_empty() => Ok(Plan {
                name: name.to_string(),
                plan_id: plan_id(name),
                upstream,
                downstream,
            }),
            _ => Err(PlanError { problems }),
        }
    }
}

fn direction(which: &str, d: &DirectionPolicy, problems: &mut Vec<String>) -> Option<Direction> {
    let found = d.problems(which);
    let ok = found.is_empty();
    problems.extend(found);
    let pir_bps = d.peak_bps();
    ok.then_some(Direction {
        mode: d.mode,
        cir_bps: d.cir_bps,
        pir_bps,
        cbs_bytes: d.cbs_bytes,
        pbs_bytes: d.pbs_bytes,
        green: d.actions.green,
        yellow: d.actions.yellow,
        red: d.actions.red,
    })
}

/// A plan's numeric id: FNV-1a of its name, folded to 31 bits and never 0 (0 means "no plan"
/// on the wire). Derived rather than allocated so that two operator replicas, or one
/// restarted, agree without storing a counter; a collision between two names in one
/// namespace is reported by [`colliding_ids`].
pub fn plan_id(name: &str) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in name.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    (hash & 0x7fff_ffff).max(1)
}

/// Names of plans whose ids collide with an earlier plan's in `plans`.
pub fn colliding_ids(plans: &[Plan]) -> Vec<String> {
    let mut seen = std::collections::BTreeMap::new();
    let mut out = Vec::new();
    for p in plans {
        if let Some(other) = seen.insert(p.plan_id, &p.name) {
            out.push(format!(
                "{} and {} share plan id {}",
                other, p.name, p.plan_id
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use kbng_crds::plan::ColourActionKind;

    fn dir(mode: PolicerMode, cir: u64, pir: Option<u64>, cbs: u64, pbs: u64) -> DirectionPolicy {
        DirectionPolicy {
            mode,
            cir_bps: cir,
            pir_bps: pir,
            cbs_bytes: cbs,
            pbs_bytes: pbs,
            actions: ColourActions::default(),
        }
    }

    fn spec(up: DirectionPolicy, down: DirectionPolicy) -> SubscriberPlanSpec {
        SubscriberPlanSpec {
            description: String::new(),
            upstream: up,
            downstream: down,
        }
    }

    #[test]
    fn valid_sr_and_tr_plans() {
        let plan = Plan::validate(
            "basic",
            &spec(
                dir(PolicerMode::SrTcm, 10_000_000, None, 125_000, 125_000),
                dir(
                    PolicerMode::TrTcm,
                    50_000_000,
                    Some(100_000_000),
                    625_000,
                    1_250_000,
                ),
            ),
        )
        .unwrap();
        assert_eq!(plan.upstream.pir_bps, 10_000_000, "srTCM has one rate");
        assert_eq!(plan.downstream.pir_bps, 100_000_000);
        assert_eq!(plan.plan_id, plan_id("basic"));
    }

    #[test]
    fn every_problem_is_reported() {
        let mut down = dir(PolicerMode::TrTcm, 50_000_000, Some(10_000_000), 2000, 1000);
        down.actions.yellow = ColourAction {
            action: ColourActionKind::Remark,
            dscp: None,
        };
        let err = Plan::validate(
            "bad",
            &spec(dir(PolicerMode::SrTcm, 1000, Some(5), 100, 100), down),
        )
        .unwrap_err();
        let all = err.to_string();
        for needle in [
            "upstream.cirBps 1000 is below",
            "upstream.pirBps is not allowed with srTCM",
            "upstream.cbsBytes 100",
            "upstream.pbsBytes 100",
            "downstream.pirBps 10000000 is below cirBps",
            "downstream.pbsBytes 1000 is below cbsBytes 2000",
            "downstream.actions.yellow: remark needs a dscp",
        ] {
            assert!(all.contains(needle), "{needle:?} missing from {all}");
        }
        assert_eq!(err.problems.len(), 8, "{all}");
    }

    #[test]
    fn tr_tcm_without_pir_is_refused() {
        let err = Plan::validate(
            "p",
            &spec(
                dir(PolicerMode::TrTcm, 10_000_000, None, 2000, 2000),
                dir(PolicerMode::SrTcm, 10_000_000, None, 2000, 2000),
            ),
        )
        .unwrap_err();
        assert_eq!(err.problems, ["upstream.pirBps is required with trTCM"]);
    }

    #[test]
    fn plan_ids_are_stable_nonzero_and_31_bit() {
        // Pinned: the ids are written into the control's configuration and its stored
        // sessions, so a changed hash would renumber every plan at an upgrade. "" and "a" are
        // FNV-1a's published vectors (0x811c9dc5, 0xe40c292c) less their top bit.
        assert_eq!(plan_id(""), 0x011c_9dc5);
        assert_eq!(plan_id("a"), 0x640c_292c);
        assert_eq!(plan_id("basic-50m"), 0x212e_b9f0);
        assert_eq!(plan_id("premium-1g"), 0x79af_07bd);
        for name in ["", "a", "basic-50m", "premium-1g"] {
            let id = plan_id(name);
            assert!(id > 0 && id <= 0x7fff_ffff, "{name}: {id}");
        }
    }
}
