//! A [`DirectionPolicy`] at run time: the rules the CRD's CEL and range markers state, for the
//! places that read a policy without the API server in front of them (the operator, for objects
//! stored before a rule existed; the control, from its config file), and the single-rate
//! shorthand the control's config file allows.

use crate::plan::{ColourActionKind, ColourActions, DirectionPolicy, MIN_BURST_BYTES, PolicerMode};

/// Lowest rate a policer is programmed with, bit/s (the CRD's minimum).
pub const MIN_RATE_BPS: u64 = 8_000;

impl DirectionPolicy {
    /// srTCM at `rate_bps` with 100 ms of committed and excess burst (never below ten maximum
    /// frames, so a TCP window's first burst is not cut), green and yellow sent, red dropped.
    pub fn single_rate(rate_bps: u64) -> DirectionPolicy {
        let burst = (rate_bps / 8 / 10).max(10 * MIN_BURST_BYTES);
        DirectionPolicy {
            mode: PolicerMode::SrTcm,
            cir_bps: rate_bps,
            pir_bps: None,
            cbs_bytes: burst,
            pbs_bytes: burst,
            actions: ColourActions::default(),
        }
    }

    /// Every problem with this policy, each prefixed with `which` ("upstream", "plans[2].downstream").
    pub fn problems(&self, which: &str) -> Vec<String> {
        let mut problems = Vec::new();
        if self.cir_bps < MIN_RATE_BPS {
            problems.push(format!(
                "{which}.cirBps {} is below {MIN_RATE_BPS}",
                self.cir_bps
            ));
        }
        match (self.mode, self.pir_bps) {
            (PolicerMode::TrTcm, None) => {
                problems.push(format!("{which}.pirBps is required with trTCM"))
            }
            (PolicerMode::TrTcm, Some(pir)) if pir < self.cir_bps => problems.push(format!(
                "{which}.pirBps {pir} is below cirBps {} (RFC 2698 requires PIR >= CIR)",
                self.cir_bps
            )),
            (PolicerMode::SrTcm, Some(_)) => {
                problems.push(format!("{which}.pirBps is not allowed with srTCM"))
            }
            _ => {}
        }
        for (field, bytes) in [("cbsBytes", self.cbs_bytes), ("pbsBytes", self.pbs_bytes)] {
            if bytes < MIN_BURST_BYTES {
                problems.push(format!(
                    "{which}.{field} {bytes} is below one maximum frame ({MIN_BURST_BYTES} bytes)"
                ));
            }
        }
        if self.mode == PolicerMode::TrTcm && self.pbs_bytes < self.cbs_bytes {
            problems.push(format!(
                "{which}.pbsBytes {} is below cbsBytes {} (trTCM)",
                self.pbs_bytes, self.cbs_bytes
            ));
        }
        let a = &self.actions;
        for (colour, action) in [("green", a.green), ("yellow", a.yellow), ("red", a.red)] {
            match (action.action, action.dscp) {
                (ColourActionKind::Remark, None) => {
                    problems.push(format!("{which}.actions.{colour}: remark needs a dscp"))
                }
                (ColourActionKind::Remark, Some(dscp)) if dscp > 63 => {
                    problems.push(format!("{which}.actions.{colour}: dscp {dscp} is above 63"))
                }
                (ColourActionKind::Transmit | ColourActionKind::Drop, Some(_)) => problems.push(
                    format!("{which}.actions.{colour}: dscp is only allowed with remark"),
                ),
                _ => {}
            }
        }
        problems
    }

    /// The peak rate a meter runs at: trTCM's PIR; srTCM has one rate (RFC 2697), its CIR.
    pub fn peak_bps(&self) -> u64 {
        match self.mode {
            PolicerMode::TrTcm => self.pir_bps.unwrap_or(self.cir_bps),
            PolicerMode::SrTcm => self.cir_bps,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_rate_policies_pass_the_rules() {
        for rate in [MIN_RATE_BPS, 20_000_000, 10_000_000_000] {
            let p = DirectionPolicy::single_rate(rate);
            assert_eq!(p.problems("up"), Vec::<String>::new(), "{rate}");
            assert_eq!(p.peak_bps(), rate);
        }
        assert_eq!(
            DirectionPolicy::single_rate(8_000_000_000).cbs_bytes,
            100_000_000
        );
    }

    #[test]
    fn every_problem_is_named_with_its_field() {
        let mut p = DirectionPolicy::single_rate(1_000);
        p.mode = PolicerMode::TrTcm;
        p.pbs_bytes = 100;
        let got = p.problems("plans[0].upstream");
        assert_eq!(got.len(), 4, "{got:?}");
        assert!(got[0].starts_with("plans[0].upstream.cirBps"));
        assert!(got[1].starts_with("plans[0].upstream.pirBps is required"));
        assert!(got[2].starts_with("plans[0].upstream.pbsBytes 100 is below one"));
        assert!(got[3].starts_with("plans[0].upstream.pbsBytes 100 is below cbsBytes"));
    }
}
