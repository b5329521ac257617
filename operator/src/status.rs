//! A BNG's status as a pure function of what the reconciler observed, and the events its
//! condition transitions deserve.
//!
//! Nothing here claims more than was observed: a gate that depends on a report the
//! dataplanes or the control pod have not made yet is `False`/`Unknown` with a reason saying
//! so, never `True` by assumption.

use std::net::Ipv4Addr;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kbng_crds::bng::{
    AaaMode, BngStatus, DataplaneStatus, PoolSpec, PoolUsage, SessionCounts, gates,
};
use kbng_crds::common::{FALSE, TRUE, UNKNOWN, condition, set_condition};
use kbng_crds::grant::{FREE_BASELINE_SESSIONS, Verdict};
use kbng_crds::licence::LicenceSource;

use crate::build::SessionCap;
use crate::control_api::{SessionTally, SubscribersReport};
use crate::plan::Plan;

/// The condition saying whether the control pod's API answered the last status poll.
pub const CONTROL_REPORTING: &str = "ControlReporting";

/// What the control pod's `/v1/status` gave, or why there is nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ControlView {
    Reported {
        /// `None` when the control does not report counts.
        sessions: Option<SessionTally>,
        /// Per dataplane the control knows: its id (or address) and whether every port is
        /// up (`None`: it reported no ports).
        links: Vec<(String, Option<bool>)>,
        pools: Vec<PoolUsage>,
        /// `None` from a control older than the report.
        subscribers: Option<SubscribersReport>,
    },
    Unreachable(String),
}

/// The condition saying whether the control's session-store claims hold what the BNG's
/// `sessionCapacity` needs (not a launch gate: a small store fails late, not at start).
pub const SESSION_STORE_SIZED: &str = "SessionStoreSized";

/// The session-store claims as found (and grown) by this reconcile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreView {
    /// An emptyDir: nothing to size.
    EmptyDir,
    Claims {
        /// What the capacity needs, as a quantity.
        needed: String,
        claims: Vec<ClaimView>,
    },
}

/// One session-store claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimView {
    pub name: String,
    /// `spec.resources.requests.storage`, after this reconcile's expansion if it was accepted.
    pub requested: String,
    /// `status.capacity.storage`: what the bound volume has (none while unbound).
    pub capacity: Option<String>,
    /// The API server's message when it refused to expand the claim.
    pub refused: Option<String>,
}

/// What the BNG's `licenceRef` led to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LicenceState {
    NotReferenced,
    NotFound(String),
    Evaluated { name: String, verdict: Verdict },
}

impl LicenceState {
    pub fn cap(&self) -> SessionCap {
        match self {
            LicenceState::Evaluated { verdict, .. } if verdict.valid => SessionCap {
                max_sessions: verdict.max_sessions,
                source: LicenceSource::Licence,
            },
            _ => SessionCap {
                max_sessions: FREE_BASELINE_SESSIONS,
                source: LicenceSource::FreeBaseline,
            },
        }
    }
}

/// One entry of the BNG's `spec.plans`, as found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlanState {
    Valid(Plan),
    NotFound(String),
    Invalid { name: String, why: String },
}

/// Everything the status is computed from.
#[derive(Clone, Debug)]
pub struct Observed<'a> {
    pub generation: Option<i64>,
    pub licence: &'a LicenceState,
    pub plans: &'a [PlanState],
    /// Why no node can hold a dataplane pod (see [`crate::placement::unsatisfiable`]).
    pub unsatisfiable: Option<String>,
    pub dataplanes: Vec<DataplaneStatus>,
    pub dataplanes_desired: u32,
    pub dataplanes_ready: u32,
    pub control_ready: bool,
    pub aaa_mode: AaaMode,
    /// The BNG names a ConfigMap of subscriber records (`spec.aaa.subscribers`).
    pub subscribers_configured: bool,
    pub pools: &'a [PoolSpec],
    pub portal_url: &'a str,
    pub control: &'a ControlView,
    pub store: &'a StoreView,
    pub session_capacity: u64,
    pub now: Timestamp,
}

/// An event to publish for a transition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transition {
    pub warning: bool,
    pub reason: String,
    pub note: String,
}

fn cond(type_: &str, ok: Option<bool>, reason: &str, message: String, o: &Observed) -> Condition {
    Condition {
        type_: type_.into(),
        status: match ok {
            Some(true) => TRUE,
            Some(false) => FALSE,
            None => UNKNOWN,
        }
        .into(),
        reason: reason.into(),
        message,
        observed_generation: o.generation,
        last_transition_time: Time(o.now),
    }
}

fn store_condition(o: &Observed) -> Condition {
    let c = |ok, reason, message| cond(SESSION_STORE_SIZED, ok, reason, message, o);
    let (needed, claims) = match o.store {
        StoreView::EmptyDir => {
            return c(
                Some(true),
                "EmptyDir",
                "sessions are kept in an emptyDir: no claim to size".into(),
            );
        }
        StoreView::Claims { needed, claims } => (needed, claims),
    };
    let for_capacity = format!("{needed} needed for sessionCapacity {}", o.session_capacity);
    if claims.is_empty() {
        return c(
            None,
            "NoClaim",
            format!("no session-store claim exists yet; {for_capacity}"),
        );
    }
    if let Some(claim) = claims.iter().find(|c| c.refused.is_some()) {
        return c(
            Some(false),
            "ExpansionRefused",
            format!(
                "{} requests {}, {for_capacity}; the API server refused to expand it (its \
                 StorageClass must allow volume expansion, and the claim be bound): {}",
                claim.name,
                claim.requested,
                claim.refused.as_deref().unwrap_or_default()
            ),
        );
    }
    let need = crate::quantity::bytes(needed).unwrap_or(u64::MAX);
    let below = |q: &str| crate::quantity::bytes(q).is_none_or(|b| b < need);
    if let Some(claim) = claims.iter().find(|c| below(&c.requested)) {
        return c(
            Some(false),
            "TooSmall",
            format!(
                "{} requests {}, {for_capacity}",
                claim.name, claim.requested
            ),
        );
    }
    if let Some(claim) = claims
        .iter()
        .find(|c| c.capacity.as_deref().is_some_and(below))
    {
        return c(
            Some(false),
            "Resizing",
            format!(
                "{} requests {} and has {} so far; {for_capacity}",
                claim.name,
                claim.requested,
                claim.capacity.as_deref().unwrap_or_default()
            ),
        );
    }
    let names: Vec<&str> = claims.iter().map(|c| c.name.as_str()).collect();
    c(
        Some(true),
        "Sized",
        format!("{} request at least {for_capacity}", names.join(", ")),
    )
}

/// Computes the new status from `o`, keeping transition times of unchanged conditions from
/// `previous`.
pub fn compute(o: &Observed, previous: Option<&BngStatus>) -> BngStatus {
    let cap = o.licence.cap();
    let mut gate_conditions = Vec::with_capacity(gates::ALL.len());

    let baseline = format!("the free baseline of {FREE_BASELINE_SESSIONS} sessions applies");
    gate_conditions.push(match o.licence {
        LicenceState::NotReferenced => cond(
            gates::LICENCE_VALID,
            Some(false),
            "NoLicence",
            format!("no licenceRef: {baseline}"),
            o,
        ),
        LicenceState::NotFound(name) => cond(
            gates::LICENCE_VALID,
            Some(false),
            "LicenceNotFound",
            format!("Licence {name} does not exist: {baseline}"),
            o,
        ),
        LicenceState::Evaluated { name, verdict } if verdict.valid => cond(
            gates::LICENCE_VALID,
            Some(true),
            verdict.reason.as_str(),
            format!("Licence {name}: {}", verdict.message),
            o,
        ),
        LicenceState::Evaluated { name, verdict } => cond(
            gates::LICENCE_VALID,
            Some(false),
            verdict.reason.as_str(),
            format!("Licence {name}: {}; {baseline}", verdict.message),
            o,
        ),
    });

    gate_conditions.push(match cap.source {
        LicenceSource::Licence => cond(
            gates::SESSION_CAP_KNOWN,
            Some(true),
            "Licence",
            format!("cap {} sessions from a verified licence", cap.max_sessions),
            o,
        ),
        LicenceSource::FreeBaseline => cond(
            gates::SESSION_CAP_KNOWN,
            Some(true),
            "FreeBaseline",
            format!("cap {} sessions: no valid licence", cap.max_sessions),
            o,
        ),
    });

    let connected = o.dataplanes.iter().filter(|d| d.connected).count() as u32;
    let unplaced: Vec<&DataplaneStatus> =
        o.dataplanes.iter().filter(|d| d.node.is_none()).collect();
    gate_conditions.push(
        if o.dataplanes_desired > 0 && connected >= o.dataplanes_desired {
            cond(
                gates::DATAPLANES_CONNECTED,
                Some(true),
                "Connected",
                format!(
                    "{connected} of {} dataplanes connected",
                    o.dataplanes_desired
                ),
                o,
            )
        } else if let Some(first) = unplaced.first() {
            cond(
                gates::DATAPLANES_CONNECTED,
                Some(false),
                "NotScheduled",
                format!(
                    "{connected} of {} connected; {} not placed: {}: {}",
                    o.dataplanes_desired,
                    unplaced.len(),
                    first.pod,
                    first.placement
                ),
                o,
            )
        } else {
            cond(
                gates::DATAPLANES_CONNECTED,
                Some(false),
                "AwaitingReport",
                format!(
                    "{connected} of {} dataplanes have reported to the control pod",
                    o.dataplanes_desired
                ),
                o,
            )
        },
    );

    gate_conditions.push(match (o.aaa_mode, o.control_ready) {
        (AaaMode::Local, true) => cond(
            gates::AAA_REACHABLE,
            Some(true),
            "LocalStore",
            "local subscriber store in the control pod".into(),
            o,
        ),
        (_, false) => cond(
            gates::AAA_REACHABLE,
            Some(false),
            "ControlNotReady",
            "the control pod is not ready".into(),
            o,
        ),
        (AaaMode::Radius, true) => cond(
            gates::AAA_REACHABLE,
            None,
            "NotReported",
            "the control pod has not reported RADIUS reachability".into(),
            o,
        ),
    });

    let missing: Vec<&str> = o
        .plans
        .iter()
        .filter_map(|p| match p {
            PlanState::NotFound(n) => Some(n.as_str()),
            _ => None,
        })
        .collect();
    let invalid: Vec<String> = o
        .plans
        .iter()
        .filter_map(|p| match p {
            PlanState::Invalid { name, why } => Some(format!("{name}: {why}")),
            _ => None,
        })
        .collect();
    let valid = o.plans.len() - missing.len() - invalid.len();
    let plan_problem = if !missing.is_empty() {
        Some((
            "PlanNotFound",
            format!("SubscriberPlan not found: {}", missing.join(", ")),
        ))
    } else if !invalid.is_empty() {
        Some((
            "PlanInvalid",
            format!("invalid SubscriberPlan {}", invalid.join("; ")),
        ))
    } else {
        None
    };
    gate_conditions.push(match &plan_problem {
        Some((reason, message)) => cond(
            gates::PLANS_PROGRAMMED,
            Some(false),
            reason,
            message.clone(),
            o,
        ),
        None => cond(
            gates::PLANS_PROGRAMMED,
            Some(true),
            "Configured",
            format!("{valid} plans validated and handed to the control configuration"),
            o,
        ),
    });

    let usable: Vec<(String, u64)> = o
        .pools
        .iter()
        .map(|p| (p.name.clone(), usable_addresses(p)))
        .collect();
    let summary = usable
        .iter()
        .map(|(n, c)| format!("{n}: {c} addresses"))
        .collect::<Vec<_>>()
        .join(", ");
    gate_conditions.push(if usable.iter().all(|(_, c)| *c > 0) {
        cond(
            gates::POOL_USABLE,
            Some(true),
            "AddressesAvailable",
            summary,
            o,
        )
    } else {
        cond(gates::POOL_USABLE, Some(false), "PoolEmpty", summary, o)
    });

    gate_conditions.push(cond(
        gates::CAPTIVE_PORTAL_SET,
        Some(!o.portal_url.is_empty()),
        if o.portal_url.is_empty() {
            "NoPortal"
        } else {
            "PortalConfigured"
        },
        o.portal_url.to_string(),
        o,
    ));

    gate_conditions.push(interfaces(o));

    let stalled = match (&o.unsatisfiable, &plan_problem) {
        (Some(why), _) => Some(("Unschedulable", why.clone())),
        (None, Some((reason, message))) => Some((*reason, message.clone())),
        (None, None) => None,
    };
    let converging = !o.control_ready || o.dataplanes_ready < o.dataplanes_desired;
    let first_failing = gate_conditions.iter().find(|c| c.status != TRUE);

    let mut conditions = previous.map(|p| p.conditions.clone()).unwrap_or_default();
    let mut ready = match (&stalled, first_failing) {
        (Some((reason, message)), _) => cond(gates::READY, Some(false), reason, message.clone(), o),
        (None, Some(gate)) => cond(
            gates::READY,
            Some(false),
            &gate.type_,
            format!("{}: {}", gate.reason, gate.message),
            o,
        ),
        (None, None) => cond(gates::READY, Some(true), "AllGatesPassed", String::new(), o),
    };
    if ready.status == FALSE && converging && stalled.is_none() && first_failing.is_none() {
        ready.reason = "Reconciling".into();
    }
    set_condition(&mut conditions, ready);
    set_condition(
        &mut conditions,
        match &stalled {
            Some((reason, message)) => cond(gates::STALLED, Some(true), reason, message.clone(), o),
            None => cond(gates::STALLED, Some(false), "Progressing", String::new(), o),
        },
    );
    set_condition(
        &mut conditions,
        if converging {
            cond(
                gates::RECONCILING,
                Some(true),
                "RollingOut",
                format!(
                    "control {}; {} of {} dataplane pods ready",
                    if o.control_ready {
                        "ready"
                    } else {
                        "not ready"
                    },
                    o.dataplanes_ready,
                    o.dataplanes_desired
                ),
                o,
            )
        } else {
            cond(
                gates::RECONCILING,
                Some(false),
                "Converged",
                String::new(),
                o,
            )
        },
    );
    for c in gate_conditions {
        set_condition(&mut conditions, c);
    }
    set_condition(
        &mut conditions,
        match o.control {
            ControlView::Reported { .. } => cond(
                CONTROL_REPORTING,
                Some(true),
                "StatusRead",
                "the control pod's /v1/status answered".into(),
                o,
            ),
            ControlView::Unreachable(why) => cond(
                CONTROL_REPORTING,
                Some(false),
                "ControlUnreachable",
                why.clone(),
                o,
            ),
        },
    );
    set_condition(&mut conditions, store_condition(o));
    match subscribers::condition(o) {
        Some(c) => set_condition(&mut conditions, c),
        None => conditions.retain(|c| c.type_ != subscribers::SUBSCRIBERS_IN_FORCE),
    }
    // Stable order: Ready, Stalled, Reconciling, then the gates in their documented order.
    let order = |t: &str| {
        [gates::READY, gates::STALLED, gates::RECONCILING]
            .iter()
            .chain(gates::ALL.iter())
            .position(|x| *x == t)
            .unwrap_or(usize::MAX)
    };
    conditions.sort_by_key(|c| order(&c.type_));

    BngStatus {
        observed_generation: o.generation,
        conditions,
        sessions: match o.control {
            ControlView::Reported {
                sessions: Some(t), ..
            } => SessionCounts {
                active: t.active,
                captive: t.captive,
                total: t.total,
                cap: cap.max_sessions,
            },
            // Unreachable now: keep the last counts seen rather than claim zero sessions.
            _ => SessionCounts {
                cap: cap.max_sessions,
                ..previous.map(|p| p.sessions.clone()).unwrap_or_default()
            },
        },
        licence_source: Some(cap.source),
        dataplanes: o.dataplanes.clone(),
        // Unreachable now: the last pools seen, as with the session counts.
        pools: match o.control {
            ControlView::Reported { pools, .. } => pools.clone(),
            ControlView::Unreachable(_) => previous.map(|p| p.pools.clone()).unwrap_or_default(),
        },
    }
}

/// InterfacesUp: every dataplane's ports up, as the dataplanes told the control.
fn interfaces(o: &Observed) -> Condition {
    let links = match o.control {
        ControlView::Unreachable(why) => {
            return cond(
                gates::INTERFACES_UP,
                Some(false),
                "AwaitingReport",
                format!("no link report: {why}"),
                o,
            );
        }
        ControlView::Reported { links, .. } => links,
    };
    let down: Vec<&str> = links
        .iter()
        .filter(|(_, up)| *up == Some(false))
        .map(|(d, _)| d.as_str())
        .collect();
    let up = links.iter().filter(|(_, up)| *up == Some(true)).count() as u32;
    if !down.is_empty() {
        cond(
            gates::INTERFACES_UP,
            Some(false),
            "LinkDown",
            format!("a port is down on {}", down.join(", ")),
            o,
        )
    } else if o.dataplanes_desired > 0 && up >= o.dataplanes_desired {
        cond(
            gates::INTERFACES_UP,
            Some(true),
            "LinksUp",
            format!("access and uplink up on {up} dataplanes"),
            o,
        )
    } else {
        cond(
            gates::INTERFACES_UP,
            Some(false),
            "AwaitingReport",
            format!(
                "{up} of {} dataplanes reported their access and uplink up",
                o.dataplanes_desired
            ),
            o,
        )
    }
}

/// Events for conditions whose status changed since `previous` (or that start out bad).
pub fn transitions(previous: Option<&BngStatus>, new: &BngStatus) -> Vec<Transition> {
    let mut out = Vec::new();
    for c in &new.conditions {
        let before = previous.and_then(|p| condition(&p.conditions, &c.type_));
        let bad = if c.type_ == gates::STALLED || c.type_ == gates::RECONCILING {
            c.status == TRUE
        } else {
            c.status != TRUE
        };
        let changed = match before {
            Some(b) => b.status != c.status || (bad && b.reason != c.reason),
            // A first status is news only where something is wrong, and for Ready.
            None => bad || c.type_ == gates::READY,
        };
        // Reconciling flips with every rollout; its events would drown the others.
        if !changed || c.type_ == gates::RECONCILING {
            continue;
        }
        // A BNG that was never Ready is not news as a warning; one that stops being Ready is.
        let warning = bad && !(c.type_ == gates::READY && before.is_none());
        out.push(Transition {
            warning,
            reason: c.reason.clone(),
            note: format!("{} is {}: {}", c.type_, c.status, c.message),
        });
    }
    out
}

fn parse_cidr(text: &str) -> Option<(u32, u32)> {
    let (addr, len) = text.split_once('/')?;
    let addr: Ipv4Addr = addr.parse().ok()?;
    let len: u32 = len.parse().ok()?;
    if len > 32 {
        return None;
    }
    let size = 1u64 << (32 - len);
    let start = u32::from(addr) & !((size - 1) as u32);
    Some((start, start + (size - 1) as u32))
}

/// Addresses a pool can lease: its prefix less network and broadcast (for prefixes up to
/// /30), the gateway and the exclusions (overlaps counted once).
pub fn usable_addresses(pool: &PoolSpec) -> u64 {
    let Some((start, end)) = parse_cidr(&pool.cidr) else {
        return 0;
    };
    let mut taken: Vec<(u32, u32)> = pool
        .exclusions
        .iter()
        .filter_map(|e| parse_cidr(e))
        .map(|(s, e)| (s.max(start), e.min(end)))
        .filter(|(s, e)| s <= e)
        .collect();
    if let Ok(gw) = pool.gateway.parse::<Ipv4Addr>() {
        let gw = u32::from(gw);
        if (start..=end).contains(&gw) {
            taken.push((gw, gw));
        }
    }
    if end - start >= 3 {
        taken.push((start, start));
        taken.push((end, end));
    }
    taken.sort_unstable();
    let mut excluded: u64 = 0;
    let mut cursor: Option<u32> = None; // last excluded address so far
    for (s, e) in taken {
        let s = match cursor {
            Some(c) if c >= e => continue,
            Some(c) if c >= s => c + 1,
            _ => s,
        };
        excluded += u64::from(e - s) + 1;
        cursor = Some(e);
    }
    (u64::from(end - start) + 1).saturating_sub(excluded)
}

mod subscribers;
pub use subscribers::SUBSCRIBERS_IN_FORCE;

#[cfg(test)]
mod tests;
