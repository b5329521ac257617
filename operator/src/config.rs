//! What the operator is configured with (flags and environment, set by the chart), as the pure
//! builders need it.

use std::time::Duration;

/// Where the control pod keeps its session store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionStore {
    /// A PersistentVolumeClaim per control pod (StatefulSet volumeClaimTemplate): sessions
    /// survive a restart or a reschedule. `storage_class` empty means the cluster default.
    Pvc {
        size: String,
        storage_class: Option<String>,
    },
    /// An emptyDir: sessions survive a container restart but not a pod reschedule. For labs
    /// without a storage provisioner.
    EmptyDir,
}

/// The operator's configuration of the workloads it builds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadConfig {
    pub control_image: String,
    pub dataplane_image: String,
    pub image_pull_policy: String,
    pub session_store: SessionStore,
    /// Where the control and dataplane pods export OTLP (`OTEL_EXPORTER_OTLP_ENDPOINT`);
    /// none when absent (they still serve `/metrics`).
    pub otlp_endpoint: Option<String>,
    /// The base64 Ed25519 key licences are verified against; the control pods get it too.
    pub licence_public_key: String,
}

impl Default for WorkloadConfig {
    fn default() -> Self {
        WorkloadConfig {
            control_image: "ghcr.io/kbng/kbng-control:0.1.0".into(),
            dataplane_image: "ghcr.io/kbng/kbng-dataplane:0.1.0".into(),
            image_pull_policy: "IfNotPresent".into(),
            session_store: SessionStore::Pvc {
                size: "1Gi".into(),
                storage_class: None,
            },
            otlp_endpoint: None,
            licence_public_key: String::new(),
        }
    }
}

/// How long a deleting BNG waits for its control pods to report drained before the
/// finalizer lets it go anyway (recorded in an event).
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(60);
