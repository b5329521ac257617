//! Metrics recorded by kbng-control and kbng-operator: synchronous instruments, called from
//! control tasks (never from a packet path).

use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Gauge, Histogram, Meter};

use super::labels::{AaaBackend, AaaResult, Outcome, PlanLabels, SessionState};

/// Latency buckets (seconds) for DORA, AAA, programming and reconciles: 1 ms to 10 s.
const LATENCY_BUCKETS_SECS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// Sessions per programming batch.
const BATCH_BUCKETS: [f64; 12] = [
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 4096.0,
];

pub(super) fn latency(
    meter: &Meter,
    name: &'static str,
    description: &'static str,
) -> Histogram<f64> {
    meter
        .f64_histogram(name)
        .with_unit("s")
        .with_description(description)
        .with_boundaries(LATENCY_BUCKETS_SECS.to_vec())
        .build()
}

/// kbng-control's instruments. Cheap to clone; clones share the instruments.
#[derive(Debug, Clone)]
pub struct ControlMetrics {
    sessions: Gauge<u64>,
    dora: Histogram<f64>,
    aaa: Histogram<f64>,
    batch_size: Histogram<u64>,
    programming: Histogram<f64>,
    licence_limit: Gauge<u64>,
    licence_usage: Gauge<u64>,
    plans: PlanLabels,
    pool_limit: Gauge<u64>,
    pool_usage: Gauge<u64>,
    pool_fixed: Gauge<u64>,
    /// Pool names are configuration, as plan names are: capped the same way.
    pools: PlanLabels,
    events: Counter<u64>,
    store_errors: Counter<u64>,
    api_unauthorized: Counter<u64>,
    dp_connected: Gauge<u64>,
    reconciled: Counter<u64>,
    dp_tls_expiry: Gauge<i64>,
    clock_offset: Gauge<f64>,
    subscribers: Gauge<u64>,
    subscribers_file_rejected: Gauge<u64>,
}

impl ControlMetrics {
    /// Creates the instruments on `meter` (normally `guard.meter()`).
    pub fn new(meter: &Meter) -> Self {
        Self {
            sessions: meter
                .u64_gauge("kbng.sessions")
                .with_unit("{session}")
                .with_description("Subscriber sessions by state and plan.")
                .build(),
            dora: latency(
                meter,
                "kbng.dhcp.dora.duration",
                "Time from DHCPDISCOVER to DHCPACK for a new session.",
            ),
            aaa: latency(
                meter,
                "kbng.aaa.duration",
                "Time to an AAA decision (onboarding or re-authorization), by backend and result.",
            ),
            batch_size: meter
                .u64_histogram("kbng.programming.batch.size")
                .with_unit("{session}")
                .with_description("Sessions per dataplane programming batch.")
                .with_boundaries(BATCH_BUCKETS.to_vec())
                .build(),
            programming: latency(
                meter,
                "kbng.programming.duration",
                "Time for a dataplane to acknowledge a programming batch.",
            ),
            licence_limit: meter
                .u64_gauge("kbng.licence.sessions.limit")
                .with_unit("{session}")
                .with_description("Sessions the licence allows.")
                .build(),
            licence_usage: meter
                .u64_gauge("kbng.licence.sessions.usage")
                .with_unit("{session}")
                .with_description("Sessions counted against the licence cap.")
                .build(),
            plans: PlanLabels::default(),
            pool_limit: meter
                .u64_gauge("kbng.pool.addresses.limit")
                .with_unit("{address}")
                .with_description("Addresses a pool can lease (network, broadcast, gateway and exclusions left out).")
                .build(),
            pool_usage: meter
                .u64_gauge("kbng.pool.addresses.usage")
                .with_unit("{address}")
                .with_description("Addresses of a pool held by sessions or quarantined.")
                .build(),
            pool_fixed: meter
                .u64_gauge("kbng.pool.addresses.fixed")
                .with_unit("{address}")
                .with_description("Excluded addresses of a pool held by sessions as fixed addresses (RADIUS Framed-IP-Address or a subscriber record's ipv4); not in limit or usage.")
                .build(),
            pools: PlanLabels::default(),
            events: meter
                .u64_counter("kbng.control.events")
                .with_unit("{event}")
                .with_description("What the control counted: DHCP messages, refusals, pacing, relay and AAA outcomes.")
                .build(),
            store_errors: meter
                .u64_counter("kbng.store.commit.errors")
                .with_unit("{commit}")
                .with_description("Session-store commits that failed (their leases are not durable).")
                .build(),
            api_unauthorized: meter
                .u64_counter("kbng.control.api.unauthorized")
                .with_unit("{request}")
                .with_description("Admin API requests refused for a missing or wrong bearer token.")
                .build(),
            dp_connected: meter
                .u64_gauge("kbng.control.dataplane.connected")
                .with_description("1 while the control holds a reconciled connection to the dataplane, else 0.")
                .build(),
            reconciled: meter
                .u64_counter("kbng.control.reconcile.sessions")
                .with_unit("{session}")
                .with_description("Sessions a reconcile with a dataplane found wrong, by kind (leak, orphan, mismatch).")
                .build(),
            dp_tls_expiry: meter
                .i64_gauge("kbng.control.dataplane.tls.expiry_timestamp")
                .with_unit("s")
                .with_description("When the control's dataplane TLS files stop being valid (the earliest notAfter, Unix time), per file: `cert` (the client chain it presents) and `ca` (the CAs it trusts dataplanes by).")
                .build(),
            clock_offset: meter
                .f64_gauge("kbng.control.clock.offset")
                .with_unit("s")
                .with_description("How far the host's wall clock is ahead of the control's time (negative: behind). After a step of the host's clock the control's time slews toward it at most 10% fast or slow, so leases do not move at once; this is what is left to absorb.")
                .build(),
            subscribers: meter
                .u64_gauge("kbng.control.subscribers")
                .with_unit("{record}")
                .with_description("Local subscriber records in force: the subscribers file's, with the changes made through the API over them.")
                .build(),
            subscribers_file_rejected: meter
                .u64_gauge("kbng.control.subscribers.file.rejected")
                .with_description("1 while the subscribers file holds a content the control could not use or holds back for the records it would remove (the records read before stay in force), else 0.")
                .build(),
        }
    }

    /// Sets the number of sessions in `state` on `plan`. Report every (state, plan) pair
    /// the control knows of, zeros included, so that a drained pair drops to 0.
    pub fn set_sessions(&self, state: SessionState, plan: &str, count: u64) {
        self.sessions.record(
            count,
            &[
                KeyValue::new("state", state.as_str()),
                KeyValue::new("plan", self.plans.label(plan)),
            ],
        );
    }

    /// A DORA exchange completed in `elapsed`.
    pub fn record_dora(&self, elapsed: Duration) {
        self.dora.record(elapsed.as_secs_f64(), &[]);
    }

    /// An AAA decision took `elapsed`.
    pub fn record_aaa(&self, backend: AaaBackend, result: AaaResult, elapsed: Duration) {
        self.aaa.record(
            elapsed.as_secs_f64(),
            &[
                KeyValue::new("backend", backend.as_str()),
                KeyValue::new("result", result.as_str()),
            ],
        );
    }

    /// A programming batch of `sessions` sessions was acknowledged (or failed) after `elapsed`.
    pub fn record_programming(&self, sessions: u64, outcome: Outcome, elapsed: Duration) {
        self.batch_size.record(sessions, &[]);
        self.programming.record(
            elapsed.as_secs_f64(),
            &[KeyValue::new("result", outcome.as_str())],
        );
    }

    /// The licence's session cap and the sessions counted against it.
    pub fn set_licence(&self, limit: u64, usage: u64) {
        self.licence_limit.record(limit, &[]);
        self.licence_usage.record(usage, &[]);
    }

    /// A pool's leasable addresses, those in use, and its excluded addresses held as fixed
    /// addresses.
    pub fn set_pool(&self, pool: &str, limit: u64, usage: u64, fixed: u64) {
        let label = [KeyValue::new("pool", self.pools.label(pool))];
        self.pool_limit.record(limit, &label);
        self.pool_usage.record(usage, &label);
        self.pool_fixed.record(fixed, &label);
    }

    /// `n` more of the control's event `event` (a fixed counter name of the engine).
    pub fn add_events(&self, event: &'static str, n: u64) {
        self.events.add(n, &[KeyValue::new("event", event)]);
    }

    /// `n` more failed session-store commits.
    pub fn add_store_errors(&self, n: u64) {
        self.store_errors.add(n, &[]);
    }

    /// One more admin API request refused for its token.
    pub fn add_api_unauthorized(&self) {
        self.api_unauthorized.add(1, &[]);
    }

    /// Whether dataplane `index` (its place in the control's configuration) is connected.
    pub fn set_dataplane_connected(&self, index: u32, connected: bool) {
        self.dp_connected.record(
            u64::from(connected),
            &[KeyValue::new("dataplane", i64::from(index))],
        );
    }

    /// When the certificates of the dataplane TLS file `file` (`"cert"`, `"ca"`) expire.
    pub fn set_dataplane_tls_expiry(&self, file: &'static str, not_after_unix_secs: i64) {
        self.dp_tls_expiry
            .record(not_after_unix_secs, &[KeyValue::new("file", file)]);
    }

    /// Local subscriber records in force.
    pub fn set_subscribers(&self, records: u64) {
        self.subscribers.record(records, &[]);
    }

    /// Whether the subscribers file now holds a content the control rejected.
    pub fn set_subscribers_file_rejected(&self, rejected: bool) {
        self.subscribers_file_rejected
            .record(u64::from(rejected), &[]);
    }

    /// The host's wall clock is `secs` ahead of the control's time.
    pub fn set_clock_offset(&self, secs: f64) {
        self.clock_offset.record(secs, &[]);
    }

    /// A reconcile with dataplane `index` found these sessions wrong.
    pub fn add_reconciled(&self, index: u32, leaks: u64, orphans: u64, mismatched: u64) {
        let dp = KeyValue::new("dataplane", i64::from(index));
        for (kind, n) in [
            ("leak", leaks),
            ("orphan", orphans),
            ("mismatch", mismatched),
        ] {
            // Zero adds too, so every kind has a series from the first reconcile on.
            self.reconciled
                .add(n, &[dp.clone(), KeyValue::new("kind", kind)]);
        }
    }
}
