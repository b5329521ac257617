//! `kbng-operator`: waits for the leader Lease, then runs the Licence, SubscriberPlan and BNG
//! controllers until the Lease is lost (exit 1: the Deployment restarts it as a standby) or a
//! signal asks it to stop (the Lease is released so a standby takes over at once).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, ValueEnum};
use kbng_operator::config::{DEFAULT_DRAIN_TIMEOUT, SessionStore, WorkloadConfig};
use kbng_operator::control_api::ControlUrls;
use kbng_operator::health::Health;
use kbng_operator::lease::{LeaderLease, LeaseConfig};
use kbng_operator::reconcile::{self, Context};
use kube::{Api, Client};
use tracing::{error, info};

#[derive(Clone, Copy, Debug, ValueEnum)]
enum StoreKind {
    Pvc,
    Emptydir,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// Kubernetes operator for kbng: reconciles BNG, SubscriberPlan and Licence resources.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// Base64 of the 32-byte Ed25519 public key licences are verified against.
    #[arg(long, env = "KBNG_LICENCE_PUBLIC_KEY")]
    licence_public_key: String,
    #[arg(long, env = "KBNG_CONTROL_IMAGE", default_value_t = WorkloadConfig::default().control_image)]
    control_image: String,
    #[arg(long, env = "KBNG_DATAPLANE_IMAGE", default_value_t = WorkloadConfig::default().dataplane_image)]
    dataplane_image: String,
    #[arg(long, env = "KBNG_IMAGE_PULL_POLICY", default_value = "IfNotPresent",
          value_parser = ["Always", "IfNotPresent", "Never"])]
    image_pull_policy: String,
    /// Where control pods keep sessions: a PersistentVolumeClaim, or an emptyDir (labs).
    #[arg(long, env = "KBNG_SESSION_STORE", value_enum, default_value = "pvc")]
    session_store: StoreKind,
    #[arg(long, env = "KBNG_SESSION_STORE_SIZE", default_value = "1Gi")]
    session_store_size: String,
    /// StorageClass of the session-store claim; the cluster default when absent.
    #[arg(long, env = "KBNG_SESSION_STORE_CLASS")]
    session_store_class: Option<String>,
    /// How long a deleted BNG waits for its control pods to drain sessions.
    #[arg(long, env = "KBNG_DRAIN_TIMEOUT_SECS", default_value_t = DEFAULT_DRAIN_TIMEOUT.as_secs())]
    drain_timeout_secs: u64,
    /// The OTLP/gRPC endpoint the control and dataplane pods export to (their
    /// OTEL_EXPORTER_OTLP_ENDPOINT); they export nothing over OTLP when absent.
    #[arg(long, env = "KBNG_WORKLOAD_OTLP_ENDPOINT")]
    workload_otlp_endpoint: Option<String>,
    /// Reconcile only this namespace; all namespaces when absent.
    #[arg(long, env = "KBNG_WATCH_NAMESPACE")]
    watch_namespace: Option<String>,
    /// Namespace of the leader Lease (the operator's own).
    #[arg(long, env = "POD_NAMESPACE", default_value = "kbng-system")]
    lease_namespace: String,
    #[arg(long, env = "KBNG_LEASE_NAME", default_value = "kbng-operator")]
    lease_name: String,
    /// How long the leader's Lease holds without renewal (renewed every two thirds of it).
    #[arg(long, env = "KBNG_LEASE_DURATION_SECS", default_value_t = 15,
          value_parser = clap::value_parser!(u64).range(3..=3600))]
    lease_duration_secs: u64,
    /// This replica's name in the Lease and in events; hostname and pid when absent.
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    #[arg(long, env = "KBNG_LOG_FORMAT", value_enum, default_value = "text")]
    log_format: LogFormat,
    /// The admin listener (e.g. 0.0.0.0:8081): /healthz, /readyz and Prometheus /metrics;
    /// none when absent.
    #[arg(long, visible_alias = "metrics-listen", env = "KBNG_ADMIN_LISTEN")]
    admin_listen: Option<std::net::SocketAddr>,
    /// Reach a BNG's control API at this URL instead of its pod's DNS name:
    /// `[<namespace>/]<bng>=http://host:port` (repeatable; comma-separated in the env).
    /// For tests and for operators running outside the cluster.
    #[arg(long, env = "KBNG_CONTROL_URL_OVERRIDE", value_delimiter = ',')]
    control_url_override: Vec<String>,
}

fn default_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "kbng-operator".into());
    format!("{host}-{}", std::process::id())
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    // Logs, traces and metrics: OTLP export when OTEL_EXPORTER_OTLP_ENDPOINT is set, plain
    // logs otherwise. Kept alive until exit so the last spans are flushed.
    let telemetry = kbng_telemetry::init(
        "kbng-operator",
        &kbng_telemetry::TelemetryConfig {
            log_format: match args.log_format {
                LogFormat::Text => kbng_telemetry::LogFormat::Text,
                LogFormat::Json => kbng_telemetry::LogFormat::Json,
            },
            ..Default::default()
        },
    )
    .context("starting telemetry")?;
    let control_urls = ControlUrls::new(&args.control_url_override).map_err(anyhow::Error::msg)?;
    let health = Arc::new(Health::default());
    let _admin = match args.admin_listen {
        Some(addr) => Some(
            kbng_operator::health::serve(
                addr,
                health.clone(),
                Some(telemetry.prometheus().clone()),
            )
            .await
            .with_context(|| format!("--admin-listen {addr}"))?,
        ),
        None => None,
    };

    let key = kbng_crds::grant::public_key_from_base64(&args.licence_public_key)
        .context("--licence-public-key")?;
    if kbng_operator::quantity::bytes(&args.session_store_size).is_none_or(|b| b == 0) {
        anyhow::bail!(
            "--session-store-size {:?}: not a storage quantity such as 1Gi or 500Mi",
            args.session_store_size
        );
    }
    let workload = WorkloadConfig {
        control_image: args.control_image,
        dataplane_image: args.dataplane_image,
        image_pull_policy: args.image_pull_policy,
        session_store: match args.session_store {
            StoreKind::Pvc => SessionStore::Pvc {
                size: args.session_store_size,
                storage_class: args.session_store_class,
            },
            StoreKind::Emptydir => SessionStore::EmptyDir,
        },
        otlp_endpoint: args.workload_otlp_endpoint.filter(|e| !e.is_empty()),
        licence_public_key: args.licence_public_key.trim().to_string(),
    };
    let identity = args.identity.unwrap_or_else(default_identity);
    let client = Client::try_default()
        .await
        .context("connecting to the Kubernetes API")?;

    let lease = LeaderLease::new(
        Api::namespaced(client.clone(), &args.lease_namespace),
        LeaseConfig::new(
            args.lease_name,
            identity.clone(),
            Duration::from_secs(args.lease_duration_secs),
        ),
    );
    info!(%identity, "waiting for the leader lease");
    tokio::select! {
        _ = lease.acquire(&health) => {}
        _ = shutdown_signal() => {
            info!("stopped before becoming leader");
            return Ok(());
        }
    }

    let ctx = Arc::new(
        Context::new(
            client,
            key,
            workload,
            Duration::from_secs(args.drain_timeout_secs),
            identity,
        )
        .with_control_urls(control_urls)
        .with_metrics(kbng_telemetry::metrics::OperatorMetrics::new(
            &telemetry.meter(),
        )),
    );
    tokio::select! {
        _ = reconcile::run(ctx, args.watch_namespace, health) => {
            error!("controllers stopped");
            std::process::exit(1);
        }
        _ = lease.hold() => {
            // Stop acting at once: another replica may take over after the lease expires.
            error!("leader lease lost; exiting");
            std::process::exit(1);
        }
        _ = shutdown_signal() => {
            info!("shutting down; releasing the leader lease");
            if let Err(err) = lease.release().await {
                error!(%err, "could not release the leader lease");
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(extra: &[&str]) -> Result<Args, clap::Error> {
        let mut v = vec!["kbng-operator", "--licence-public-key", "k"];
        v.extend_from_slice(extra);
        Args::try_parse_from(v)
    }

    #[test]
    fn out_of_range_flags_stop_the_binary_naming_them() {
        assert!(parse(&[]).is_ok());
        for (flag, value) in [
            ("--lease-duration-secs", "2"),
            ("--lease-duration-secs", "18446744073709551615"),
            ("--image-pull-policy", "Sometimes"),
        ] {
            let e = parse(&[flag, value]).unwrap_err().to_string();
            assert!(e.contains(flag) && e.contains(value), "{flag} {value}: {e}");
        }
    }
}
