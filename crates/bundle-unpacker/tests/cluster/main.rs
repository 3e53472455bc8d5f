//! bundle-unpacker against a real control plane, a real OCI registry and a
//! real NATS server (all from `olm-testkit`), one test binary so the control
//! plane starts once. Each test runs the service in-process, serving only
//! its own namespace, and plays catalog-operator's part by hand: a
//! CatalogSource object and an InstallPlan whose status has a pending
//! bundle lookup.

// Helpers of a test binary: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod binary;
mod fixtures;
mod unpacking;

use std::time::Duration;

use bundle_unpacker::{
    controller::{self, UnpackerConfig},
    metrics::UnpackMetrics,
};
use olm_bus::Bus;
use olm_runtime::admin::Readiness;
pub(crate) use olm_testkit::{eventually, olm_crds_installed};
use tokio_util::sync::CancellationToken;

/// Installs a log subscriber that the test harness captures, once.
pub(crate) fn init_logs() {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "bundle_unpacker=debug".into()),
        )
        .try_init();
}

/// One replica of the service running in this test; stopped on drop.
pub(crate) struct RunningUnpacker {
    pub(crate) metrics: UnpackMetrics,
    registry: olm_runtime::metrics::MetricsRegistry,
    shutdown: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl RunningUnpacker {
    pub(crate) async fn start(config: UnpackerConfig, bus: Bus) -> Self {
        let client = olm_testkit::control_plane().client().await;
        let readiness = Readiness::default();
        let shutdown = CancellationToken::new();
        let mut registry = olm_runtime::metrics::MetricsRegistry::default();
        let metrics = UnpackMetrics::register(&mut registry);
        let (_watch_tx, watch_rx) = tokio::sync::watch::channel(true);
        let task = tokio::spawn({
            let readiness = readiness.clone();
            let shutdown = shutdown.clone();
            let metrics = metrics.clone();
            async move {
                let _keep = _watch_tx;
                controller::run(client, config, metrics, bus, readiness, watch_rx, shutdown)
                    .await
                    .unwrap();
            }
        });
        let _ = readiness.gate("cache:InstallPlan");
        eventually("caches warm", Duration::from_secs(30), || {
            let readiness = readiness.clone();
            async move {
                if readiness.is_ready() {
                    Ok(())
                } else {
                    Err(format!("unmet: {:?}", readiness.unmet()))
                }
            }
        })
        .await;
        Self {
            metrics,
            registry,
            shutdown,
            task: Some(task),
        }
    }

    /// The metrics as `/metrics` would serve them.
    pub(crate) fn metrics_text(&self) -> String {
        self.registry.encode().unwrap()
    }

    pub(crate) async fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(20), task)
                .await
                .expect("the service stops within 20 s")
                .unwrap();
        }
    }
}

impl Drop for RunningUnpacker {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}
