//! kbng-operator's metrics: its reconciles, and the licence each BNG runs under.
//!
//! A licence that lapses drops its BNGs to the free baseline cap, and every subscriber beyond
//! it becomes captive: the expiry must be watched before that day, per BNG, since a BNG's
//! licence is what decides its cap. The gauges are observed from a map the BNG reconciler keeps
//! (set at each reconcile, removed when the BNG is deleted), so a deleted BNG leaves no series.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Histogram, Meter, ObservableGauge};

use super::control::latency;
use super::labels::Outcome;

/// The licence a BNG references, as the operator evaluated it last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BngLicence {
    /// Whether it is in force (signature good, inside its window).
    pub valid: bool,
    /// Its `notAfter` (Unix seconds); `None` when the referenced Licence does not exist.
    pub expires_unix_secs: Option<i64>,
}

type Licences = Arc<Mutex<BTreeMap<String, BngLicence>>>;

/// kbng-operator's instruments. Cheap to clone; clones share the instruments.
#[derive(Debug, Clone)]
pub struct OperatorMetrics {
    reconcile: Histogram<f64>,
    licences: Licences,
    _gauges: Arc<[ObservableGauge<i64>; 2]>,
}

impl OperatorMetrics {
    /// Creates the instruments on `meter`.
    pub fn new(meter: &Meter) -> Self {
        let licences = Licences::default();
        let gauge = |name: &'static str,
                     unit: &'static str,
                     description: &'static str,
                     value: fn(&BngLicence) -> Option<i64>| {
            let licences = Arc::clone(&licences);
            meter
                .i64_observable_gauge(name)
                .with_unit(unit)
                .with_description(description)
                .with_callback(move |g| {
                    let map = licences.lock().unwrap_or_else(|p| p.into_inner());
                    for (bng, l) in map.iter() {
                        if let Some(v) = value(l) {
                            g.observe(v, &[KeyValue::new("bng", bng.clone())]);
                        }
                    }
                })
                .build()
        };
        let gauges = [
            gauge(
                "kbng.licence.expiry_timestamp",
                "s",
                "When the Licence a BNG references stops being valid (its notAfter, Unix time), \
                 per BNG (namespace/name); none when the Licence does not exist.",
                |l| l.expires_unix_secs,
            ),
            gauge(
                "kbng.licence.valid",
                "",
                "1 when the Licence a BNG references is in force, 0 when it is not (missing, \
                 forged, expired or not yet valid: the free baseline cap applies), per BNG.",
                |l| Some(i64::from(l.valid)),
            ),
        ];
        Self {
            reconcile: latency(
                meter,
                "kbng.operator.reconcile.duration",
                "Time of one reconcile, by resource kind and result.",
            ),
            licences,
            _gauges: Arc::new(gauges),
        }
    }

    /// One reconcile of a `kind` ("BNG", "SubscriberPlan", "Licence") took `elapsed`.
    pub fn record_reconcile(&self, kind: &'static str, outcome: Outcome, elapsed: Duration) {
        self.reconcile.record(
            elapsed.as_secs_f64(),
            &[
                KeyValue::new("kind", kind),
                KeyValue::new("result", outcome.as_str()),
            ],
        );
    }

    /// The licence of the BNG `key` (`namespace/name`); `None`: the BNG references none, or
    /// is gone, and has no series.
    pub fn set_bng_licence(&self, key: &str, licence: Option<BngLicence>) {
        let mut map = self.licences.lock().unwrap_or_else(|p| p.into_inner());
        match licence {
            Some(l) => {
                map.insert(key.to_owned(), l);
            }
            None => {
                map.remove(key);
            }
        }
    }
}
