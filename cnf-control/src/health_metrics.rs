//! The control's health as metrics, for the chart's alerting rules
//! (`charts/kbng/alerts/kbng.rules.yaml`): address pools, the engine's event counters, failed
//! store commits, each dataplane's connection and what its reconciles repaired, when the
//! dataplane TLS certificates expire, and how far the host's clock is from the control's.
//! Recorded on the process's observer ([`crate::observe`]); nothing happens without one.

use std::collections::HashMap;

use crate::core::engine::Engine;
use crate::dataplane::Diff;
use crate::observe;

/// Events the alerting rules watch with `increase()`. They are reported as 0 from the start:
/// Prometheus needs a sample before the first occurrence to see it as an increase.
pub const ALERTED_EVENTS: &[&str] = &[
    "pool exhausted",
    "admitted captive over cap",
    "pacing dropped",
    "line session limit",
    "dataplane full",
    "RADIUS accounting requests lost",
    "RADIUS accounting counters not stored",
    "Framed-IP-Address unavailable",
    "Framed-Pool unknown",
    "Framed-Pool exhausted",
    "subscriber ipv4 unavailable",
    "subscriber pool unknown",
    "subscriber pool exhausted",
    "session replaced: another MAC with its identity",
];

/// Entries of `Engine::counters` that are levels, not counts: exported as nothing here (the
/// status API shows them).
const LEVELS: &[&str] = &["pacing queued", "relay: transactions pending"];

/// What was last reported, so that counters advance by what happened since.
#[derive(Debug, Default)]
pub struct HealthFeed {
    events: HashMap<&'static str, u64>,
    store_errors: u64,
    started: bool,
    clock: crate::clock::StepWatch,
}

impl HealthFeed {
    /// Report pools, events, store errors and the clock offset (from the engine task, once a
    /// second); a clock step is logged even without an observer.
    pub fn publish(&mut self, engine: &Engine, store_errors: u64) {
        let offset = crate::clock::wall_offset_ns();
        if let Some(o) = self.clock.check(offset) {
            tracing::warn!(
                offset_secs = o as f64 / 1e9,
                "the host's wall clock stepped; the control's time follows it at most 10% fast \
                 or slow, so no lease moves at once"
            );
        }
        let Some(m) = observe::metrics() else { return };
        m.set_clock_offset(offset as f64 / 1e9);
        if !self.started {
            self.started = true;
            for e in ALERTED_EVENTS {
                m.add_events(e, 0);
            }
            m.add_store_errors(0);
        }
        m.set_subscribers(engine.subscribers.len() as u64);
        for p in engine.pool_usage() {
            m.set_pool(&p.name, p.leasable.into(), p.in_use.into(), p.fixed.into());
        }
        for (event, n) in engine.counters() {
            if LEVELS.contains(&event) {
                continue;
            }
            let last = self.events.entry(event).or_default();
            m.add_events(event, n.saturating_sub(*last));
            *last = n;
        }
        m.add_store_errors(store_errors.saturating_sub(self.store_errors));
        self.store_errors = store_errors;
    }
}

/// Dataplane `index` connected (after its reconcile) or lost.
pub fn dataplane_connected(index: u32, connected: bool) {
    if let Some(m) = observe::metrics() {
        m.set_dataplane_connected(index, connected);
    }
}

/// The certificates of the dataplane TLS file `file` (`"cert"`, `"ca"`) expire at this Unix
/// time.
pub fn dataplane_tls_expiry(file: &'static str, not_after_unix_secs: i64) {
    if let Some(m) = observe::metrics() {
        m.set_dataplane_tls_expiry(file, not_after_unix_secs);
    }
}

/// Whether the subscribers file now holds a content the control rejected or holds back.
pub fn subscribers_file_rejected(rejected: bool) {
    if let Some(m) = observe::metrics() {
        m.set_subscribers_file_rejected(rejected);
    }
}

/// An admin API request refused for its bearer token.
pub fn api_unauthorized() {
    if let Some(m) = observe::metrics() {
        m.add_api_unauthorized();
    }
}

/// A reconcile with dataplane `index` found `diff`.
pub fn reconciled(index: u32, diff: &Diff) {
    if let Some(m) = observe::metrics() {
        m.add_reconciled(
            index,
            diff.leaks.len() as u64,
            diff.orphans.len() as u64,
            diff.mismatched.len() as u64,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rules name events by the strings the engine and the RADIUS task count: a renamed
    /// counter would silently disable its alert.
    #[test]
    fn alerted_events_are_the_engines_and_the_rules_names() {
        let counted = [
            include_str!("core/engine.rs"),
            include_str!("core/engine_address.rs"),
            include_str!("radius/task.rs"),
            include_str!("radius/acct_store.rs"),
        ]
        .concat();
        let rules = include_str!("../../charts/kbng/alerts/kbng.rules.yaml");
        for e in ALERTED_EVENTS {
            assert!(
                counted.contains(&format!("\"{e}\"")),
                "nothing counts {e:?}"
            );
        }
        // Both `event="a"` and `event=~"a|b"`.
        let in_rules: Vec<&str> = rules
            .split("event=")
            .skip(1)
            .filter_map(|rest| rest.trim_start_matches('~').strip_prefix('"'))
            .filter_map(|rest| rest.split('"').next())
            .flat_map(|alternatives| alternatives.split('|'))
            .collect();
        assert!(
            in_rules.len() > ALERTED_EVENTS.len() / 2,
            "the rules select events"
        );
        for e in in_rules {
            assert!(
                ALERTED_EVENTS.contains(&e),
                "the rules watch {e:?}, which is not reported from the start"
            );
        }
    }
}
