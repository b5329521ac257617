//! Leader election on a `coordination.k8s.io/v1` Lease, as client-go's leaderelection does it:
//! the holder renews `renewTime` every `retry` period; anyone may take the Lease once
//! `renewTime + leaseDurationSeconds` has passed. Every write is a `replace` carrying the
//! resourceVersion read, so two candidates racing for an expired Lease cannot both win: the
//! API server accepts one write and answers the other with 409 Conflict.
//!
//! kube-rs 5 has no lease helper of its own; this is the small one the operator needs.
//! A holder that cannot renew within `renew_deadline` (shorter than the lease duration) must
//! stop acting before anyone else can have taken over; [`LeaderLease::hold`] returns then,
//! and the binary exits.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Api;
use kube::api::PostParams;
use tracing::{info, warn};

#[derive(Clone, Debug)]
pub struct LeaseConfig {
    pub name: String,
    pub identity: String,
    pub duration: Duration,
    pub renew_deadline: Duration,
    pub retry: Duration,
}

impl LeaseConfig {
    /// client-go's ratios: renew deadline 2/3 and retry 1/5 of the lease duration.
    pub fn new(name: String, identity: String, duration: Duration) -> LeaseConfig {
        LeaseConfig {
            name,
            identity,
            duration,
            renew_deadline: duration * 2 / 3,
            retry: duration / 5,
        }
    }
}

#[derive(Debug)]
pub struct LeaderLease {
    api: Api<Lease>,
    cfg: LeaseConfig,
}

/// What to write, if anything, given the Lease as read and the time: pure, so the election
/// rules are unit-tested without an API server.
pub fn decide(current: Option<&LeaseSpec>, cfg: &LeaseConfig, now: Timestamp) -> Option<LeaseSpec> {
    let me = cfg.identity.as_str();
    let duration_secs = i32::try_from(cfg.duration.as_secs()).unwrap_or(i32::MAX);
    let fresh = |transitions| LeaseSpec {
        holder_identity: Some(me.to_string()),
        lease_duration_seconds: Some(duration_secs),
        acquire_time: Some(MicroTime(now)),
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(transitions),
        ..LeaseSpec::default()
    };
    let Some(spec) = current else {
        return Some(fresh(0));
    };
    let holder = spec.holder_identity.as_deref().filter(|h| !h.is_empty());
    if holder == Some(me) {
        return Some(LeaseSpec {
            renew_time: Some(MicroTime(now)),
            lease_duration_seconds: Some(duration_secs),
            ..spec.clone()
        });
    }
    let expired = match (&spec.renew_time, spec.lease_duration_seconds) {
        (Some(renewed), Some(secs)) => renewed.0 + SignedDuration::from_secs(i64::from(secs)) < now,
        _ => true,
    };
    (holder.is_none() || expired).then(|| fresh(spec.lease_transitions.unwrap_or(0) + 1))
}

impl LeaderLease {
    pub fn new(api: Api<Lease>, cfg: LeaseConfig) -> LeaderLease {
        LeaderLease { api, cfg }
    }

    /// One attempt to take or renew the Lease. `Ok(true)` when we hold it now.
    pub async fn try_acquire(&self) -> Result<bool, kube::Error> {
        let now = Timestamp::now();
        let current = self.api.get_opt(&self.cfg.name).await?;
        let Some(spec) = decide(
            current.as_ref().and_then(|l| l.spec.as_ref()),
            &self.cfg,
            now,
        ) else {
            return Ok(false);
        };
        let result = match current {
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.cfg.name.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(spec),
                };
                self.api.create(&PostParams::default(), &lease).await
            }
            Some(mut lease) => {
                lease.spec = Some(spec);
                self.api
                    .replace(&self.cfg.name, &PostParams::default(), &lease)
                    .await
            }
        };
        match result {
            Ok(_) => Ok(true),
            // Someone else wrote first (409) or created it first (409 AlreadyExists).
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(err) => Err(err),
        }
    }

    /// Waits until this candidate holds the Lease; `health` says standby meanwhile.
    pub async fn acquire(&self, health: &crate::health::Health) {
        let mut waiting_logged = false;
        loop {
            match self.try_acquire().await {
                Ok(true) => {
                    info!(lease = %self.cfg.name, identity = %self.cfg.identity, "leader lease acquired");
                    return;
                }
                Ok(false) if !waiting_logged => {
                    info!(lease = %self.cfg.name, "another replica holds the leader lease; standing by");
                    health.standby();
                    waiting_logged = true;
                }
                Ok(false) => health.standby(),
                Err(err) => warn!(%err, "leader lease: could not read or write"),
            }
            tokio::time::sleep(self.cfg.retry).await;
        }
    }

    /// Keeps renewing; returns when the Lease is lost or could not be renewed within the
    /// renew deadline. The caller must stop acting at once.
    pub async fn hold(&self) {
        let mut last_renewed = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(self.cfg.retry).await;
            match self.try_acquire().await {
                Ok(true) => last_renewed = tokio::time::Instant::now(),
                Ok(false) => {
                    warn!(lease = %self.cfg.name, "leader lease taken by another replica");
                    return;
                }
                Err(err) => warn!(%err, "leader lease: renew failed"),
            }
            if last_renewed.elapsed() > self.cfg.renew_deadline {
                warn!(lease = %self.cfg.name, "leader lease not renewed within the deadline");
                return;
            }
        }
    }

    /// Gives the Lease up (on shutdown) so a standby takes over without waiting it out.
    pub async fn release(&self) -> Result<(), kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.cfg.name).await? else {
            return Ok(());
        };
        let Some(spec) = lease.spec.as_mut() else {
            return Ok(());
        };
        if spec.holder_identity.as_deref() != Some(self.cfg.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        self.api
            .replace(&self.cfg.name, &PostParams::default(), &lease)
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(me: &str) -> LeaseConfig {
        LeaseConfig::new("kbng-operator".into(), me.into(), Duration::from_secs(15))
    }

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap()
    }

    #[test]
    fn take_a_missing_lease() {
        let spec = decide(None, &cfg("a"), at(100)).unwrap();
        assert_eq!(spec.holder_identity.as_deref(), Some("a"));
        assert_eq!(spec.lease_duration_seconds, Some(15));
        assert_eq!(spec.lease_transitions, Some(0));
    }

    #[test]
    fn renew_own_and_respect_anothers() {
        let held = decide(None, &cfg("a"), at(100)).unwrap();
        let renewed = decide(Some(&held), &cfg("a"), at(105)).unwrap();
        assert_eq!(renewed.renew_time, Some(MicroTime(at(105))));
        assert_eq!(renewed.acquire_time, Some(MicroTime(at(100))));
        assert_eq!(decide(Some(&renewed), &cfg("b"), at(110)), None);
        assert_eq!(
            decide(Some(&renewed), &cfg("b"), at(120)),
            None,
            "exactly at expiry"
        );
    }

    #[test]
    fn take_over_an_expired_or_released_lease() {
        let held = decide(None, &cfg("a"), at(100)).unwrap();
        let taken = decide(Some(&held), &cfg("b"), at(116)).unwrap();
        assert_eq!(taken.holder_identity.as_deref(), Some("b"));
        assert_eq!(taken.lease_transitions, Some(1));
        let released = LeaseSpec {
            holder_identity: None,
            ..held
        };
        assert!(decide(Some(&released), &cfg("b"), at(101)).is_some());
    }

    #[test]
    fn deadlines_follow_client_go() {
        let c = cfg("a");
        assert_eq!(c.renew_deadline, Duration::from_secs(10));
        assert_eq!(c.retry, Duration::from_secs(3));
    }
}
