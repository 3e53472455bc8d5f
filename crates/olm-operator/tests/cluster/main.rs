//! olm-operator's controllers against a real control plane (kube-apiserver,
//! controller-manager, scheduler and kwok from `olm-testkit`), one test
//! binary so the control plane starts once. Each test runs the controllers
//! in-process, watching only its own throwaway namespace, and asserts on the
//! state of the world.

// Helpers of a test binary: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod copies;
mod csv_lifecycle;
mod groups;
mod operator;
mod restart;
mod scoped;
mod serving;
mod upgrade;

use std::{sync::Arc, time::Duration};

use olm_operator::{
    controller::{self, ControllerConfig},
    metrics::OperatorMetrics,
};
use olm_runtime::{admin::Readiness, metrics::MetricsRegistry};
pub(crate) use olm_testkit::{eventually, olm_crds_installed};
use tokio_util::sync::CancellationToken;

/// Installs a log subscriber that the test harness captures, once.
pub(crate) fn init_logs() {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "olm_operator=debug".into()),
        )
        .try_init();
}

/// The controllers of olm-operator running in this test, watching one
/// namespace; stopped when dropped.
pub(crate) struct RunningOperator {
    pub(crate) registry: Arc<std::sync::Mutex<MetricsRegistry>>,
    pub(crate) readiness: Readiness,
    shutdown: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl RunningOperator {
    /// Starts the controllers for `namespace`.
    pub(crate) async fn start(namespace: &str) -> Self {
        Self::start_watching(&[namespace]).await
    }

    /// Starts the controllers for several namespaces (watched cluster-wide
    /// and filtered, as `--watchedNamespaces` with more than one does).
    pub(crate) async fn start_watching(namespaces: &[&str]) -> Self {
        Self::start_with(ControllerConfig {
            watched_namespaces: namespaces.iter().map(|ns| (*ns).to_owned()).collect(),
            ..ControllerConfig::default()
        })
        .await
    }

    /// Starts the controllers with `config`.
    pub(crate) async fn start_with(config: ControllerConfig) -> Self {
        let client = olm_testkit::control_plane().client().await;
        let mut registry = MetricsRegistry::default();
        let metrics = OperatorMetrics::register(&mut registry);
        let readiness = Readiness::default();
        let shutdown = CancellationToken::new();
        let task = tokio::spawn({
            let readiness = readiness.clone();
            let shutdown = shutdown.clone();
            async move {
                controller::run(client, config, metrics, readiness, shutdown)
                    .await
                    .unwrap();
            }
        });
        let running = Self {
            registry: Arc::new(std::sync::Mutex::new(registry)),
            readiness,
            shutdown,
            task: Some(task),
        };
        // `run` registers its gates when it starts; registering one of them
        // here first makes the wait below mean "every cache is warm".
        let _ = running.readiness.gate("cache:ClusterServiceVersion");
        let readiness = running.readiness.clone();
        eventually("controllers ready", Duration::from_secs(30), || {
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
        running
    }

    /// The metrics as `/metrics` would serve them.
    pub(crate) fn metrics_text(&self) -> String {
        self.registry.lock().unwrap().encode().unwrap()
    }

    /// Stops the controllers and waits for them to drain.
    pub(crate) async fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(20), task)
                .await
                .expect("controllers stop within 20 s")
                .unwrap();
        }
    }
}

impl Drop for RunningOperator {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}
