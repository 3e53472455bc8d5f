//! The admin HTTP server every service runs: `/metrics` (OpenMetrics text),
//! `/healthz` (liveness: the process is serving) and `/readyz` (readiness:
//! every registered [`ReadinessGate`] is set, for example "caches warm").
//!
//! ```no_run
//! # async fn example(args: olm_runtime::config::AdminServerArgs) -> olm_runtime::Result<()> {
//! use std::sync::Arc;
//! use olm_runtime::{admin::{AdminServer, Readiness}, metrics::MetricsRegistry, shutdown};
//!
//! let registry = MetricsRegistry::default();
//! let readiness = Readiness::default();
//! let caches_warm = readiness.gate("caches-warm");
//! let server = AdminServer::bind(args.bind_address, Arc::new(registry), readiness).await?;
//! let shutdown = shutdown::on_signal()?;
//! tokio::spawn(server.serve(shutdown.clone()));
//! // ... once every watch has delivered its first list:
//! caches_warm.set();
//! # Ok(())
//! # }
//! ```

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    sync::{Arc, Mutex, PoisonError},
};

use axum::{
    Router,
    extract::State,
    http::{StatusCode, header},
    response::{IntoResponse, Response},
    routing::get,
};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::{
    error::{Error, Result},
    metrics::{MetricsRegistry, OPENMETRICS_CONTENT_TYPE},
};

/// The set of conditions that must all hold before `/readyz` answers 200.
/// Cheap to clone; every clone sees the same gates.
#[derive(Clone, Debug, Default)]
pub struct Readiness {
    gates: Arc<Mutex<BTreeMap<String, bool>>>,
}

impl Readiness {
    /// Registers an unmet gate named `name` (or returns the existing one).
    /// Register every gate before the admin server starts, so that it never
    /// reports ready before the gates exist.
    pub fn gate(&self, name: impl Into<String>) -> ReadinessGate {
        let name = name.into();
        self.lock().entry(name.clone()).or_insert(false);
        ReadinessGate {
            name,
            readiness: self.clone(),
        }
    }

    /// The names of the gates not yet set, in name order.
    pub fn unmet(&self) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|(_, set)| !**set)
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// Whether every gate is set.
    pub fn is_ready(&self) -> bool {
        self.lock().values().all(|set| *set)
    }

    fn set(&self, name: &str, value: bool) {
        if let Some(set) = self.lock().get_mut(name) {
            *set = value;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, bool>> {
        // A panic while holding this lock cannot leave the map half-updated.
        self.gates.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One named readiness condition, unmet until [`ReadinessGate::set`].
#[derive(Clone, Debug)]
pub struct ReadinessGate {
    name: String,
    readiness: Readiness,
}

impl ReadinessGate {
    /// The gate's name, as listed by `/readyz` while unmet.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Marks the condition as met.
    pub fn set(&self) {
        self.readiness.set(&self.name, true);
    }

    /// Marks the condition as unmet again (for example when a watch is lost).
    pub fn unset(&self) {
        self.readiness.set(&self.name, false);
    }
}

#[derive(Clone)]
struct AdminState {
    registry: Arc<MetricsRegistry>,
    readiness: Readiness,
}

/// The routes of the admin server, for embedding in another server.
pub fn router(registry: Arc<MetricsRegistry>, readiness: Readiness) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(AdminState {
            registry,
            readiness,
        })
}

async fn metrics(State(state): State<AdminState>) -> Response {
    match state.registry.encode() {
        Ok(text) => ([(header::CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE)], text).into_response(),
        Err(error) => {
            tracing::error!(
                error = &error as &dyn std::error::Error,
                "failed to encode metrics"
            );
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "failed to encode metrics\n",
            )
                .into_response()
        }
    }
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(state): State<AdminState>) -> Response {
    let unmet = state.readiness.unmet();
    if unmet.is_empty() {
        "ok\n".into_response()
    } else {
        let body: String = unmet
            .iter()
            .map(|gate| format!("unmet: {gate}\n"))
            .collect();
        (StatusCode::SERVICE_UNAVAILABLE, body).into_response()
    }
}

/// The admin server, bound and ready to serve.
#[derive(Debug)]
pub struct AdminServer {
    listener: TcpListener,
    router: Router,
}

impl AdminServer {
    /// Binds `address` (port 0 picks a free port; see [`Self::local_addr`]).
    pub async fn bind(
        address: SocketAddr,
        registry: Arc<MetricsRegistry>,
        readiness: Readiness,
    ) -> Result<Self> {
        let listener = TcpListener::bind(address)
            .await
            .map_err(|source| Error::AdminBind { address, source })?;
        Ok(Self {
            listener,
            router: router(registry, readiness),
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.listener
            .local_addr()
            .map_err(|source| Error::AdminServe { source })
    }

    /// Serves until `shutdown` is cancelled, then stops accepting connections
    /// and finishes the requests in flight.
    pub async fn serve(self, shutdown: CancellationToken) -> Result<()> {
        if let Ok(address) = self.listener.local_addr() {
            tracing::info!(%address, "admin server listening");
        }
        axum::serve(self.listener, self.router)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await
            .map_err(|source| Error::AdminServe { source })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_only_when_every_gate_is_set() {
        let readiness = Readiness::default();
        assert!(readiness.is_ready(), "no gates: nothing to wait for");
        let caches = readiness.gate("caches-warm");
        let webhook = readiness.gate("webhook-certificates");
        assert_eq!(readiness.unmet(), ["caches-warm", "webhook-certificates"]);
        caches.set();
        assert_eq!(readiness.unmet(), ["webhook-certificates"]);
        assert!(!readiness.is_ready());
        webhook.set();
        assert!(readiness.is_ready());
        caches.unset();
        assert_eq!(readiness.unmet(), [caches.name()]);
    }

    #[test]
    fn registering_a_gate_again_keeps_its_state() {
        let readiness = Readiness::default();
        readiness.gate("caches-warm").set();
        let again = readiness.gate("caches-warm");
        assert!(readiness.is_ready());
        again.unset();
        assert!(!readiness.is_ready());
    }
}
