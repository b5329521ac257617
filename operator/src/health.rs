//! `/healthz`, `/readyz` and `/metrics` on the operator's admin listener.
//!
//! - live: the process serves HTTP (a wedged runtime stops answering and is restarted).
//! - ready: a standby is ready once it has read the leader Lease (it can take over); the
//!   leader once the watch caches of its three controllers have their first full listing
//!   (before that it would act on a partial view). Neither depends on a BNG being healthy:
//!   bad CRs are status, not an operator fault.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;

const STANDBY: u8 = 1;
const LEADER_SYNCING: u8 = 2;
const LEADER_SYNCED: u8 = 3;

/// The operator's role and progress, shared with the admin server.
#[derive(Debug, Default)]
pub struct Health {
    state: AtomicU8,
}

impl Health {
    pub fn standby(&self) {
        self.state.store(STANDBY, Ordering::Relaxed);
    }
    pub fn leader_syncing(&self) {
        self.state.store(LEADER_SYNCING, Ordering::Relaxed);
    }
    pub fn synced(&self) {
        self.state.store(LEADER_SYNCED, Ordering::Relaxed);
    }

    /// `Ok(what)` when ready, `Err(why not)` otherwise.
    pub fn readiness(&self) -> Result<&'static str, &'static str> {
        match self.state.load(Ordering::Relaxed) {
            STANDBY => Ok("standby: the leader Lease is readable"),
            LEADER_SYNCED => Ok("leader: watch caches synced"),
            LEADER_SYNCING => Err("leader: watch caches not synced yet"),
            _ => Err("starting: the leader Lease has not been read yet"),
        }
    }
}

#[derive(Clone, Debug)]
struct AdminState {
    health: Arc<Health>,
    metrics: Option<kbng_telemetry::PrometheusExporter>,
}

async fn healthz() -> impl IntoResponse {
    (StatusCode::OK, "ok\n")
}

async fn readyz(State(s): State<AdminState>) -> impl IntoResponse {
    match s.health.readiness() {
        Ok(what) => (StatusCode::OK, format!("{what}\n")),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")),
    }
}

async fn metrics_text(State(s): State<AdminState>) -> impl IntoResponse {
    match s.metrics.as_ref().map(|m| m.render()) {
        Some(Ok(text)) => (
            StatusCode::OK,
            [("content-type", "text/plain; version=0.0.4")],
            text,
        )
            .into_response(),
        Some(Err(e)) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
        None => (StatusCode::NOT_FOUND, "no metrics\n").into_response(),
    }
}

pub fn router(health: Arc<Health>, metrics: Option<kbng_telemetry::PrometheusExporter>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .with_state(AdminState { health, metrics })
}

/// Binds `addr` and serves the admin routes until the process ends.
pub async fn serve(
    addr: std::net::SocketAddr,
    health: Arc<Health>,
    metrics: Option<kbng_telemetry::PrometheusExporter>,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let app = router(health, metrics);
    Ok(tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(%e, "admin listener stopped");
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_follows_the_role() {
        let h = Health::default();
        assert!(h.readiness().is_err());
        h.standby();
        assert!(h.readiness().is_ok());
        h.leader_syncing();
        assert_eq!(h.readiness(), Err("leader: watch caches not synced yet"));
        h.synced();
        assert!(h.readiness().is_ok());
    }
}
