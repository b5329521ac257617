//! Traces and metrics of kbng-control, taken at the adapter boundaries: the engine task hands
//! over every batch of engine outputs, the dataplane tasks report each programming RPC. The
//! pure core knows nothing of this.
//!
//! One trace per subscriber onboarding, from the DHCP message that created the session to the
//! ACK handed to the dataplane after the session was programmed:
//!
//! ```text
//!  onboarding (session.id, subscriber.mac, line)             root, DISCOVER in .. ACK out
//!  ├─ dhcp.discover   DISCOVER in .. OFFER built
//!  │  └─ aaa          authorization asked .. decided (backend, result)
//!  ├─ dhcp.request    REQUEST in .. ACK decided (active | captive)
//!  └─ dataplane.program   the InstallSessions RPC; its traceparent makes the dataplane's
//!                         grpc.server span a child
//! ```
//!
//! Times are real intervals: the engine task marks when a punted frame reaches the engine
//! ([`input_started`]) and the outputs say what that input did, so spans are built with
//! explicit timestamps ([`TimedSpan`]). With local AAA the decision is made inside the engine
//! call that handles the DISCOVER, so its span is that call (an upper bound); with RADIUS it
//! runs from the request to the answer.
//!
//! The observer is process-global (like the tracing subscriber it feeds), installed once by
//! `main`; every hook is a no-op when none is installed (unit tests, other binaries). State
//! sits behind one mutex shared by the engine task and the dataplane tasks; it is held for a
//! few map operations per batch, never across an await.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use kbng_telemetry::metrics::{AaaBackend, AaaResult, ControlMetrics, Outcome, SessionState};
use kbng_telemetry::trace::{KeyValue, TimedSpan, wall_time};

use crate::config::Config;
use crate::core::SessionId;
use crate::core::aaa::{AuthOutcome, format_mac};
use crate::core::engine::{Engine, Output};
use crate::core::session::{AUTH_TIMEOUT_NS, Grant, NS_PER_SEC, State};

/// Most onboardings traced at once; beyond it new ones are not traced (counted in the log).
const MAX_IN_FLIGHT: usize = 65_536;
/// An onboarding still open after this long is ended as abandoned (its session vanished
/// without a state change we saw, or programming never succeeded).
const ABANDON_AFTER: Duration = Duration::from_secs(120);
/// Session gauges are recounted at most this often...
const GAUGE_MIN_INTERVAL: Duration = Duration::from_secs(1);
/// ...and at most this share of the engine task's time goes to recounting (a recount of a
/// million sessions takes tens of milliseconds).
const GAUGE_BUDGET_DIVISOR: u32 = 100;

static OBSERVER: OnceLock<Observer> = OnceLock::new();

/// Installs the process's observer; false if one was installed already.
pub fn install(observer: Observer) -> bool {
    OBSERVER.set(observer).is_ok()
}

/// The installed observer's instruments, for the health metrics ([`crate::health_metrics`]).
pub fn metrics() -> Option<&'static ControlMetrics> {
    OBSERVER.get().map(|o| &o.metrics)
}

fn with<R>(f: impl FnOnce(&Observer, &mut Inner) -> R) -> Option<R> {
    OBSERVER.get().map(|o| o.with(f))
}

/// The telemetry of the control plane.
#[derive(Debug)]
pub struct Observer {
    metrics: ControlMetrics,
    backend: AaaBackend,
    plan_names: HashMap<u32, String>,
    /// Build onboarding spans. Off when no trace exporter is configured: the spans would be
    /// built and dropped unseen, and building them was 8% of the control's CPU per DORA
    /// (perf, `tests/bench/results/2026-12-01-dhcp-control-profile.md`). Metrics stay on.
    spans: bool,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// When the input now being handled reached the engine.
    mark: Option<Instant>,
    onboardings: HashMap<SessionId, Onboarding>,
    /// Bound sessions authorized again (Termination-Action RADIUS-Request): when it was asked.
    reauthorizing: HashMap<SessionId, Instant>,
    /// Onboardings whose session is installed, by dataplane, waiting for their ACK to be
    /// handed over ([`replies_sent`] takes them without scanning every onboarding).
    programmed: Vec<(u32, SessionId)>,
    untraced: u64,
    gauges_due: Option<Instant>,
    reported: HashSet<(SessionState, String)>,
}

#[derive(Debug)]
struct Onboarding {
    /// None when spans are off ([`Observer::spans`]); so are `step` and the span of `aaa`.
    root: Option<TimedSpan>,
    started: Instant,
    /// Started by a DISCOVER (a DORA), not by a REQUEST for a lost session.
    dora: bool,
    dataplane: u32,
    /// The DHCP exchange in progress (`dhcp.discover` or `dhcp.request`).
    step: Option<TimedSpan>,
    aaa: Option<(Option<TimedSpan>, Instant)>,
    phase: Phase,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Authorizing,
    Offered,
    /// ACK decided, waiting for the dataplane to install the session.
    Bound,
    /// Installed; the ACK leaves with the batch.
    Programmed,
}

impl Observer {
    /// An observer recording on `metrics`, for the configuration `cfg`.
    pub fn new(metrics: ControlMetrics, cfg: &Config) -> Self {
        Self {
            metrics,
            backend: if cfg.engine.external_auth {
                AaaBackend::Radius
            } else {
                AaaBackend::Local
            },
            plan_names: cfg.plans.iter().map(|p| (p.id, p.name.clone())).collect(),
            spans: true,
            inner: Mutex::default(),
        }
    }

    /// Whether onboarding spans are built (`true` by default): pass whether traces are
    /// exported.
    pub fn with_spans(mut self, on: bool) -> Self {
        self.spans = on;
        self
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic elsewhere while holding it leaves maps that are still consistent.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on this observer's state (the hooks below run it on the installed one).
    fn with<R>(&self, f: impl FnOnce(&Observer, &mut Inner) -> R) -> R {
        let mut inner = self.lock();
        f(self, &mut inner)
    }

    /// The plan's name; `none` for plan 0 (what unknown subscribers get in the walled garden).
    fn plan(&self, id: u32) -> &str {
        match self.plan_names.get(&id) {
            Some(name) => name,
            None if id == 0 => "none",
            None => "unknown",
        }
    }
}

/// The engine task is about to hand a punted frame to the engine.
pub fn input_started() {
    with(|_, i| i.mark = Some(Instant::now()));
}

/// One engine call's outputs, before the engine task carries them out.
pub fn outputs(engine: &Engine, out: &[Output]) {
    with(|o, i| {
        let now = Instant::now();
        let start = i.mark.take().unwrap_or(now);
        for output in out {
            match output {
                Output::Changed { id, state } => changed(o, i, engine, *id, state, start, now),
                Output::Authorize { id, .. }
                    if engine
                        .session(*id)
                        .is_some_and(|s| s.state.bound().is_some()) =>
                {
                    i.reauthorizing.insert(*id, now);
                }
                _ => {}
            }
        }
    });
}

/// The AAA answered session `id` (the engine takes the answer next). A re-authorization's
/// time and result go to the AAA histogram as an onboarding's do, so that a RADIUS server
/// that stops answering them shows there too.
pub fn auth_answered(id: SessionId, outcome: &AuthOutcome) {
    with(|o, i| {
        let Some(asked) = i.reauthorizing.remove(&id) else {
            return;
        };
        let result = match outcome {
            AuthOutcome::Accept { .. } => AaaResult::Accept,
            AuthOutcome::Reject => AaaResult::Reject,
            AuthOutcome::Unreachable => AaaResult::Timeout,
        };
        o.metrics.record_aaa(o.backend, result, asked.elapsed());
    });
}

fn changed(
    o: &Observer,
    i: &mut Inner,
    engine: &Engine,
    id: SessionId,
    state: &str,
    start: Instant,
    now: Instant,
) {
    match state {
        "discovering" | "authenticating" if !i.onboardings.contains_key(&id) => {
            begin(o, i, engine, id, state == "discovering", start);
        }
        "offered" => {
            if let Some(ob) = i.onboardings.get_mut(&id) {
                end_aaa(o, ob, engine, id, now);
                if let Some(step) = ob.step.take() {
                    step.set_attribute(KeyValue::new("dhcp.reply", "OFFER"));
                    step.end_at(wall_time(now), None);
                }
                ob.phase = Phase::Offered;
            }
        }
        "active" | "captive" => {
            if let Some(ob) = i.onboardings.get_mut(&id)
                && matches!(ob.phase, Phase::Authorizing | Phase::Offered)
            {
                end_aaa(o, ob, engine, id, now);
                if let Some(root) = &ob.root {
                    let step = ob.step.take().unwrap_or_else(|| {
                        root.child("dhcp.request", wall_time(start), Vec::new())
                    });
                    step.set_attribute(KeyValue::new("dhcp.reply", "ACK"));
                    step.end_at(wall_time(now), None);
                    root.set_attribute(KeyValue::new("session.state", state.to_owned()));
                    if let Some(g) = engine.session(id).and_then(|s| s.state.bound()) {
                        root.set_attribute(KeyValue::new("plan", o.plan(g.1.plan_id()).to_owned()));
                    }
                }
                ob.phase = Phase::Bound;
            }
        }
        "releasing" | "expired" => {
            if let Some(mut ob) = i.onboardings.remove(&id) {
                end_aaa(o, &mut ob, engine, id, now);
                if let Some(step) = ob.step.take() {
                    step.end_at(wall_time(now), Some(format!("session {state}")));
                }
                if let Some(root) = ob.root {
                    root.end_at(
                        wall_time(now),
                        Some(format!("session {state} before it was programmed")),
                    );
                }
            }
        }
        _ => {}
    }
}

fn begin(o: &Observer, i: &mut Inner, engine: &Engine, id: SessionId, dora: bool, start: Instant) {
    let Some(s) = engine.session(id) else {
        return;
    };
    if i.onboardings.len() >= MAX_IN_FLIGHT {
        i.untraced += 1;
        if i.untraced.is_power_of_two() {
            tracing::warn!(
                untraced = i.untraced,
                "more than {MAX_IN_FLIGHT} onboardings in flight; new ones are not traced"
            );
        }
        return;
    }
    let (root, step, aaa) = if o.spans {
        let (root, step, aaa) = spans(o, s, id, dora, wall_time(start));
        (Some(root), Some(step), Some(aaa))
    } else {
        (None, None, None)
    };
    i.onboardings.insert(
        id,
        Onboarding {
            root,
            started: start,
            dora,
            dataplane: s.line.dataplane,
            step,
            aaa: Some((aaa, start)),
            phase: Phase::Authorizing,
        },
    );
}

/// The root, first step and AAA spans of a new onboarding, all started `at`.
fn spans(
    o: &Observer,
    s: &crate::core::engine::Session,
    id: SessionId,
    dora: bool,
    at: std::time::SystemTime,
) -> (TimedSpan, TimedSpan, TimedSpan) {
    let root = TimedSpan::root(
        "onboarding",
        at,
        vec![
            KeyValue::new("session.id", id as i64),
            KeyValue::new("subscriber.mac", format_mac(&s.mac)),
            KeyValue::new("dataplane", i64::from(s.line.dataplane)),
            KeyValue::new("access.port", i64::from(s.line.port)),
            KeyValue::new("vlan.outer", i64::from(s.line.outer_vlan)),
            KeyValue::new("vlan.inner", i64::from(s.line.inner_vlan)),
            KeyValue::new("dhcp.first", if dora { "DISCOVER" } else { "REQUEST" }),
        ],
    );
    let step = root.child(
        if dora {
            "dhcp.discover"
        } else {
            "dhcp.request"
        },
        at,
        vec![KeyValue::new("session.id", id as i64)],
    );
    let aaa = step.child(
        "aaa",
        at,
        vec![KeyValue::new("aaa.backend", o.backend.as_str())],
    );
    tracing::debug!(session = id, trace = %root.trace_id(), "onboarding traced");
    (root, step, aaa)
}

/// Ends the AAA span of `ob` (if still open) with the decision the engine now shows.
fn end_aaa(o: &Observer, ob: &mut Onboarding, engine: &Engine, id: SessionId, now: Instant) {
    let Some((span, since)) = ob.aaa.take() else {
        return;
    };
    let grant = engine.session(id).and_then(|s| match &s.state {
        State::Offered { grant, .. } => Some(*grant),
        st => st.bound().map(|(_, g)| g),
    });
    let elapsed = now.saturating_duration_since(since);
    let result = match grant {
        // An unknown subscriber put in the walled garden was refused by the AAA.
        Some(Grant::Captive {
            over_cap: false, ..
        }) => AaaResult::Reject,
        Some(_) => AaaResult::Accept,
        // No grant: rejected, or no answer within the engine's authorization timeout.
        None if elapsed.as_nanos() >= u128::from(AUTH_TIMEOUT_NS) => AaaResult::Timeout,
        None => AaaResult::Reject,
    };
    o.metrics.record_aaa(o.backend, result, elapsed);
    if let Some(span) = span {
        span.set_attribute(KeyValue::new("aaa.result", result.as_str()));
        span.end_at(wall_time(now), None);
    }
}

/// A tracing span for a programming RPC of `kind` carrying `ids`: a child of the first
/// onboarding among them that waits for it, linked to the others. Enter nothing before
/// sending; pass it to [`request`] and `.instrument()` the call with it.
pub fn programming_span(kind: &'static str, ids: &[SessionId]) -> tracing::Span {
    let span = tracing::info_span!(
        "dataplane.program",
        otel.kind = "client",
        rpc.method = kind,
        batch.size = ids.len(),
        session.id = tracing::field::Empty,
    );
    with(|_, i| {
        let mut parent = None;
        for id in ids {
            if let Some(ob) = i.onboardings.get(id)
                && ob.phase == Phase::Bound
                && let Some(root) = &ob.root
            {
                match parent {
                    None => {
                        root.adopt(&span);
                        span.record("session.id", *id);
                        parent = Some(*id);
                    }
                    Some(_) => root.link_from(&span),
                }
            }
        }
    });
    span
}

/// A request carrying `span`'s W3C trace context.
pub fn request<T>(message: T, span: &tracing::Span) -> tonic::Request<T> {
    let mut r = tonic::Request::new(message);
    kbng_telemetry::grpc::inject_span_context(span, r.metadata_mut());
    r
}

/// A programming RPC of `sessions` items ended with `ok` after `elapsed`; for an install,
/// `installed` are its sessions.
pub fn programmed(sessions: usize, ok: bool, elapsed: Duration, installed: &[SessionId]) {
    with(|o, i| {
        let outcome = if ok { Outcome::Ok } else { Outcome::Error };
        o.metrics
            .record_programming(sessions as u64, outcome, elapsed);
        if ok {
            for id in installed {
                if let Some(ob) = i.onboardings.get_mut(id)
                    && ob.phase == Phase::Bound
                {
                    ob.phase = Phase::Programmed;
                    i.programmed.push((ob.dataplane, *id));
                }
            }
        }
    });
}

/// Dataplane `dataplane` has been handed the batch's DHCP replies: onboardings whose session
/// it installed are complete.
pub fn replies_sent(dataplane: u32) {
    with(|o, i| {
        if i.programmed.is_empty() {
            return;
        }
        let now = Instant::now();
        let mut programmed = std::mem::take(&mut i.programmed);
        programmed.retain(|&(dp, id)| {
            if dp != dataplane {
                return true;
            }
            // Gone or no longer waiting: released or abandoned meanwhile, ended there.
            let waiting = i
                .onboardings
                .get(&id)
                .is_some_and(|ob| ob.phase == Phase::Programmed);
            if let Some(ob) = waiting.then(|| i.onboardings.remove(&id)).flatten() {
                if ob.dora {
                    o.metrics
                        .record_dora(now.saturating_duration_since(ob.started));
                }
                if let Some(root) = ob.root {
                    root.end_at(wall_time(now), None);
                }
            }
            false
        });
        i.programmed = programmed;
    });
}

/// Once a second from the engine task: session gauges by state and plan, the licence, and
/// onboardings that will never finish.
pub fn tick(engine: &Engine) {
    with(|o, i| {
        let now = Instant::now();
        abandon_stale(i, now);
        if i.gauges_due.is_some_and(|t| now < t) {
            return;
        }
        // The engine keeps these counts as it goes (`core::census`): no walk of the sessions
        // on the thread that serves DHCP.
        let mut counts: HashMap<(SessionState, String), u64> = HashMap::new();
        for ((name, plan_id), n) in engine.census().iter() {
            let Some(state) = state_named(name) else {
                continue;
            };
            *counts
                .entry((state, o.plan(plan_id).to_owned()))
                .or_default() += n;
        }
        // Pairs seen before and now empty are reported as 0, so a drained plan drops to 0.
        for key in &i.reported {
            if !counts.contains_key(key) {
                o.metrics.set_sessions(key.0, &key.1, 0);
            }
        }
        for ((state, plan), n) in &counts {
            o.metrics.set_sessions(*state, plan, *n);
        }
        i.reported.extend(counts.into_keys());
        let (active, _) = engine.admission_counts();
        o.metrics
            .set_licence(engine.cap().max_sessions, active as u64);
        let cost = now.elapsed();
        i.gauges_due = Some(now + GAUGE_MIN_INTERVAL.max(cost * GAUGE_BUDGET_DIVISOR));
    });
}

fn abandon_stale(i: &mut Inner, now: Instant) {
    i.reauthorizing
        .retain(|_, asked| now.saturating_duration_since(*asked) <= ABANDON_AFTER);
    let stale: Vec<SessionId> = i
        .onboardings
        .iter()
        .filter(|(_, ob)| now.saturating_duration_since(ob.started) > ABANDON_AFTER)
        .map(|(id, _)| *id)
        .collect();
    for id in stale {
        if let Some(mut ob) = i.onboardings.remove(&id) {
            let why = format!("not completed within {} s", ABANDON_AFTER.as_secs());
            if let Some((Some(span), _)) = ob.aaa.take() {
                span.end_at(wall_time(now), Some(why.clone()));
            }
            if let Some(step) = ob.step.take() {
                step.end_at(wall_time(now), Some(why.clone()));
            }
            if let Some(root) = ob.root {
                root.end_at(wall_time(now), Some(why));
            }
        }
    }
}

/// The gauge state of a core state's name (`State::name`); `None` for states not reported.
fn state_named(name: &str) -> Option<SessionState> {
    Some(match name {
        "discovering" => SessionState::Discovering,
        "offered" => SessionState::Offered,
        "authenticating" => SessionState::Authenticating,
        "active" => SessionState::Active,
        "captive" => SessionState::Captive,
        "renewing" => SessionState::Renewing,
        "releasing" => SessionState::Releasing,
        _ => return None,
    })
}

// Keeps the abandon limit above the engine's own timeouts, so only a real leak is abandoned.
const _: () = assert!(ABANDON_AFTER.as_secs() > 3 * AUTH_TIMEOUT_NS / NS_PER_SEC);
