//! The kube-rs adapters: one Controller per resource kind, sharing a [`Context`].
//!
//! Reconcilers return `Err` only for what retrying can fix (the API server unreachable, a
//! conflict); those requeue with exponential backoff per object. Bad input is written to
//! status and events and the reconcile succeeds, so nothing crash-loops on a bad CR.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ed25519_dalek::VerifyingKey;
use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;
use kbng_telemetry::metrics::{BngLicence, OperatorMetrics, Outcome};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::{controller::Action, watcher};
use kube::{Client, Resource};
use tracing::{debug, info, warn};

use crate::config::WorkloadConfig;
use crate::control_api::ControlUrls;
use crate::health::Health;

pub mod api_token;
pub mod bng;
pub mod licence;
pub mod plan;

/// The controller name in events (`reportingController`).
pub const CONTROLLER: &str = "kbng.dev/operator";

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("building owned objects: {0}")]
    Build(#[from] crate::build::BuildError),
    #[error("encoding status: {0}")]
    Encode(#[from] serde_json::Error),
}

/// What every reconciler shares.
pub struct Context {
    pub client: Client,
    pub licence_key: VerifyingKey,
    pub workload: WorkloadConfig,
    pub drain_timeout: Duration,
    pub recorder: Recorder,
    /// Where each BNG's control pod API is reached.
    pub control_urls: ControlUrls,
    /// Active sessions by plan name, per BNG (`namespace/name`), from the last status poll of
    /// its control pod: the SubscriberPlan reconciler sums them into each plan's status.
    pub plan_sessions: Mutex<HashMap<String, BTreeMap<String, u64>>>,
    /// Consecutive failures per object, for exponential backoff.
    failures: Mutex<HashMap<String, u32>>,
    /// Reconcile durations and outcomes (none in tests without telemetry).
    metrics: Option<OperatorMetrics>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("workload", &self.workload)
            .field("drain_timeout", &self.drain_timeout)
            .finish_non_exhaustive()
    }
}

impl Context {
    pub fn new(
        client: Client,
        licence_key: VerifyingKey,
        workload: WorkloadConfig,
        drain_timeout: Duration,
        identity: String,
    ) -> Context {
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: CONTROLLER.into(),
                instance: Some(identity),
            },
        );
        Context {
            client,
            licence_key,
            workload,
            drain_timeout,
            recorder,
            control_urls: ControlUrls::default(),
            plan_sessions: Mutex::default(),
            failures: Mutex::default(),
            metrics: None,
        }
    }

    /// The licence gauges of the BNG `key` (`namespace/name`); `None`: the BNG is gone.
    pub fn set_bng_licence(&self, key: &str, state: Option<&crate::status::LicenceState>) {
        use crate::status::LicenceState;
        let Some(m) = &self.metrics else { return };
        let licence = state.and_then(|s| match s {
            LicenceState::NotReferenced => None,
            LicenceState::NotFound(_) => Some(BngLicence {
                valid: false,
                expires_unix_secs: None,
            }),
            LicenceState::Evaluated { verdict, .. } => Some(BngLicence {
                valid: verdict.valid,
                expires_unix_secs: Some(verdict.expires_at.as_second()),
            }),
        });
        m.set_bng_licence(key, licence);
    }

    /// Records every reconcile on `metrics`.
    pub fn with_metrics(mut self, metrics: OperatorMetrics) -> Context {
        self.metrics = Some(metrics);
        self
    }

    pub fn with_control_urls(mut self, urls: ControlUrls) -> Context {
        self.control_urls = urls;
        self
    }

    /// Records a BNG's sessions by plan (`None`: forget the BNG).
    pub fn set_plan_sessions(&self, bng_key: &str, by_plan: Option<BTreeMap<String, u64>>) {
        if let Ok(mut m) = self.plan_sessions.lock() {
            match by_plan {
                Some(b) => {
                    m.insert(bng_key.to_string(), b);
                }
                None => {
                    m.remove(bng_key);
                }
            }
        }
    }

    /// Sessions on `plan` summed over the given BNGs (`namespace/name`).
    pub fn sessions_on_plan(&self, plan: &str, bng_keys: &[String]) -> u64 {
        self.plan_sessions.lock().map_or(0, |m| {
            bng_keys
                .iter()
                .filter_map(|k| m.get(k).and_then(|b| b.get(plan)))
                .sum()
        })
    }

    /// Publishes an event about `obj`; a failure to publish is logged, never fatal.
    pub async fn event<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        warning: bool,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let ev = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.into(),
            note: Some(truncate(note, 1000)),
            action: action.into(),
            secondary: None,
        };
        if let Err(err) = self.recorder.publish(&ev, &obj.object_ref(&())).await {
            warn!(%err, reason, "could not publish event");
        }
    }

    fn succeeded(&self, key: &str) {
        if let Ok(mut f) = self.failures.lock() {
            f.remove(key);
        }
    }

    /// The next retry delay for `key`: 2 s doubling up to 5 min.
    fn backoff(&self, key: &str) -> Duration {
        let n = match self.failures.lock() {
            Ok(mut f) => {
                let n = f.entry(key.to_string()).or_insert(0);
                *n = n.saturating_add(1);
                *n
            }
            Err(_) => 1,
        };
        backoff_delay(n)
    }
}

/// Exponential backoff for the `n`th consecutive failure (1-based).
pub fn backoff_delay(n: u32) -> Duration {
    let secs = 2u64.saturating_mul(1u64 << n.saturating_sub(1).min(10));
    Duration::from_secs(secs.min(300))
}

fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
    s
}

/// Now, to the second: Kubernetes stores condition times with second precision, and a
/// status compared with what the server returns must not differ in nanoseconds alone.
pub fn now_secs() -> Timestamp {
    let now = Timestamp::now();
    Timestamp::from_second(now.as_second()).unwrap_or(now)
}

fn key_of<K>(obj: &K) -> String
where
    K: Resource,
    K::DynamicType: Default,
{
    let m = obj.meta();
    format!(
        "{}/{}/{}",
        K::kind(&Default::default()),
        m.namespace.as_deref().unwrap_or(""),
        m.name.as_deref().unwrap_or("")
    )
}

pub(crate) fn error_policy<K>(obj: Arc<K>, err: &ReconcileError, ctx: Arc<Context>) -> Action
where
    K: Resource,
    K::DynamicType: Default,
{
    let key = key_of(obj.as_ref());
    if err.is_conflict() {
        // Optimistic concurrency at work: the object changed between our read and our write.
        // The watch already carries the newer version, so retry soon and do not escalate.
        debug!(object = %key, %err, "write raced a newer version; retrying");
        return Action::requeue(CONFLICT_RETRY);
    }
    if err.is_not_found() {
        // The object went away while it was being reconciled (deleted, finalizer released):
        // nothing is left to converge, and nothing to report.
        debug!(object = %key, %err, "object gone during reconcile");
        return Action::await_change();
    }
    let delay = ctx.backoff(&key);
    warn!(object = %key, %err, retry_in = ?delay, "reconcile failed");
    Action::requeue(delay)
}

/// How soon a write refused with 409 Conflict is retried.
const CONFLICT_RETRY: Duration = Duration::from_millis(200);

impl ReconcileError {
    /// A 409 Conflict: the write carried a stale resourceVersion.
    pub fn is_conflict(&self) -> bool {
        matches!(self, ReconcileError::Kube(kube::Error::Api(status)) if status.code == 409)
    }

    /// A 404: what was being written no longer exists.
    pub fn is_not_found(&self) -> bool {
        matches!(self, ReconcileError::Kube(kube::Error::Api(status)) if status.code == 404)
    }
}

/// Runs the three controllers until one stream ends (shutdown) or `stop` resolves.
/// `health` turns ready once the three primary watch caches have listed everything.
pub async fn run(ctx: Arc<Context>, namespace: Option<String>, health: Arc<Health>) {
    let wc = watcher::Config::default().any_semantic();
    health.leader_syncing();
    let licences = licence::controller(&ctx.client, namespace.as_deref(), wc.clone());
    let plans = plan::controller(&ctx.client, namespace.as_deref(), wc.clone());
    let bngs = bng::controller(&ctx.client, namespace.as_deref(), wc);
    let stores = (licences.store(), plans.store(), bngs.store());
    let synced = async move {
        let (l, p, b) = stores;
        if l.wait_until_ready().await.is_ok()
            && p.wait_until_ready().await.is_ok()
            && b.wait_until_ready().await.is_ok()
        {
            health.synced();
            info!("watch caches synced");
        }
    };
    let licences = licences
        .run(
            |o, c| timed("Licence", c.clone(), licence::reconcile(o, c)),
            error_policy,
            ctx.clone(),
        )
        .for_each(|r| async move { log_result(r) });
    let plans = plans
        .run(
            |o, c| timed("SubscriberPlan", c.clone(), plan::reconcile(o, c)),
            error_policy,
            ctx.clone(),
        )
        .for_each(|r| async move { log_result(r) });
    let bngs = bngs
        .run(
            |o, c| timed("BNG", c.clone(), bng::reconcile(o, c)),
            error_policy,
            ctx.clone(),
        )
        .for_each(|r| async move { log_result(r) });
    info!("controllers started");
    tokio::join!(licences, plans, bngs, synced);
}

/// One reconcile of a `kind`, timed and counted by outcome
/// (`kbng_operator_reconcile_duration_seconds`).
async fn timed(
    kind: &'static str,
    ctx: Arc<Context>,
    reconcile: impl std::future::Future<Output = Result<Action, ReconcileError>>,
) -> Result<Action, ReconcileError> {
    let t = std::time::Instant::now();
    let r = reconcile.await;
    if let Some(m) = &ctx.metrics {
        m.record_reconcile(kind, outcome(&r), t.elapsed());
    }
    r
}

fn outcome(r: &Result<Action, ReconcileError>) -> Outcome {
    match r {
        Ok(_) => Outcome::Ok,
        Err(e) if e.is_conflict() || e.is_not_found() => Outcome::Raced,
        Err(_) => Outcome::Error,
    }
}

fn log_result<K: Resource, E: std::fmt::Display>(
    r: Result<(kube::runtime::reflector::ObjectRef<K>, Action), E>,
) where
    K::DynamicType: std::fmt::Debug,
{
    match r {
        Ok((obj, _)) => tracing::debug!(object = %obj, "reconciled"),
        Err(err) => tracing::debug!(%err, "reconcile did not complete"),
    }
}

/// Api for a namespaced kind, in one namespace or all.
pub(crate) fn api<K>(client: &Client, namespace: Option<&str>) -> kube::Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(ns) => kube::Api::namespaced(client.clone(), ns),
        None => kube::Api::all(client.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        assert_eq!(backoff_delay(1), Duration::from_secs(2));
        assert_eq!(backoff_delay(2), Duration::from_secs(4));
        assert_eq!(backoff_delay(5), Duration::from_secs(32));
        assert_eq!(backoff_delay(9), Duration::from_secs(300));
        assert_eq!(backoff_delay(u32::MAX), Duration::from_secs(300));
    }

    #[test]
    fn api_error_kinds() {
        let api = |code: u16| {
            ReconcileError::Kube(kube::Error::Api(
                kube::core::Status::failure("x", "y")
                    .with_code(code)
                    .boxed(),
            ))
        };
        assert!(api(404).is_not_found() && !api(404).is_conflict());
        assert!(api(409).is_conflict() && !api(409).is_not_found());
        assert!(!api(500).is_not_found() && !api(500).is_conflict());
    }

    #[test]
    fn truncate_respects_char_boundaries() {
        assert_eq!(truncate("héllo".into(), 2), "h");
        assert_eq!(truncate("abc".into(), 10), "abc");
    }
}
