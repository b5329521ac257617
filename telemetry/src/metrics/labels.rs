//! The closed attribute values of kbng's metrics.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use opentelemetry::Value;

/// Most distinct plan names given their own series; later ones are counted as `other`.
pub const MAX_PLANS: usize = 64;

/// The attribute value for plans beyond [`MAX_PLANS`].
pub(crate) const OTHER_PLAN: &str = "other";

macro_rules! label_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $var:ident => $s:literal,)+ }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name { $($(#[$vm])* $var,)+ }
        impl $name {
            /// Every value, for tests and dashboards.
            pub const ALL: &'static [$name] = &[$($name::$var,)+];
            /// The attribute value.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$var => $s,)+ }
            }
        }
    };
}

label_enum! {
    /// A subscriber session's state, as counted by `kbng.sessions` (the session state
    /// machine's variants, without the per-session data; `Expired` sessions are gone).
    SessionState {
        Discovering => "discovering",
        Offered => "offered",
        Authenticating => "authenticating",
        Active => "active",
        Captive => "captive",
        Renewing => "renewing",
        Releasing => "releasing",
    }
}

label_enum! {
    /// Where an AAA decision came from.
    AaaBackend {
        Local => "local",
        Radius => "radius",
    }
}

label_enum! {
    /// An AAA decision.
    AaaResult {
        Accept => "accept",
        Reject => "reject",
        Timeout => "timeout",
        Error => "error",
    }
}

label_enum! {
    /// Whether an operation (dataplane programming, a reconcile) succeeded.
    Outcome {
        Ok => "ok",
        Error => "error",
        /// A reconcile whose write lost an optimistic-concurrency race, or whose object went
        /// away meanwhile: retried at once or over, not a failure.
        Raced => "raced",
    }
}

label_enum! {
    /// Direction of subscriber traffic.
    Direction {
        /// Subscriber to core.
        Up => "up",
        /// Core to subscriber.
        Down => "down",
    }
}

label_enum! {
    /// A policer's verdict colour (RFC 2697 / RFC 2698).
    Colour {
        Green => "green",
        Yellow => "yellow",
        Red => "red",
    }
}

/// The plan names seen so far, capped at [`MAX_PLANS`]. Plans come from `SubscriberPlan`
/// resources, so the cap is never reached in a sane deployment; it is the guard that keeps a
/// bug (a session id passed as a plan) from turning into one series per subscriber.
#[derive(Debug, Clone, Default)]
pub struct PlanLabels {
    seen: Arc<Mutex<BTreeSet<String>>>,
}

impl PlanLabels {
    /// The attribute value for `plan`: the name itself while fewer than [`MAX_PLANS`] names
    /// have been seen, else `other`.
    pub fn label(&self, plan: &str) -> Value {
        // A poisoned lock only means another thread panicked mid-insert; the set is intact.
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.contains(plan) {
            return Value::from(plan.to_owned());
        }
        if seen.len() < MAX_PLANS {
            seen.insert(plan.to_owned());
            return Value::from(plan.to_owned());
        }
        Value::from(OTHER_PLAN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_beyond_the_cap_become_other() {
        let plans = PlanLabels::default();
        for i in 0..MAX_PLANS {
            assert_eq!(
                plans.label(&format!("plan-{i}")).as_str(),
                format!("plan-{i}")
            );
        }
        assert_eq!(plans.label("plan-0").as_str(), "plan-0");
        assert_eq!(plans.label("session-12345").as_str(), OTHER_PLAN);
    }

    #[test]
    fn label_values_are_snake_case() {
        for s in SessionState::ALL {
            assert!(
                s.as_str()
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c == '_')
            );
        }
    }
}
