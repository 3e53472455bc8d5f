//! marketplace-operator against a real API server (from `olm-testkit`), one
//! test binary so the control plane starts once. Each test runs the
//! controller in-process on a namespace of its own and an OperatorHub of
//! its own name (the object is cluster-scoped; the service reads `cluster`),
//! so that tests run side by side.

// Helpers of a test binary: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod cluster_operator;
mod marketplace;

use std::time::Duration;

use kube::{Api, Client, api::DeleteParams};
use marketplace_operator::{
    controller::{self, MarketplaceConfig},
    decide::sources::DefaultSource,
    metrics::MarketplaceMetrics,
};
use olm_api::operator_hub::OperatorHub;
use olm_runtime::admin::Readiness;
pub(crate) use olm_testkit::{eventually, olm_crds_installed as crds_installed};
use tokio_util::sync::CancellationToken;

/// How long a test waits for the controller to converge.
pub(crate) const WAIT: Duration = Duration::from_secs(30);

/// Installs a log subscriber that the test harness captures, once.
pub(crate) fn init_logs() {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "marketplace_operator=debug".into()),
        )
        .try_init();
}

/// A source named `name` of a fixture image.
pub(crate) fn default_source(name: &str) -> DefaultSource {
    DefaultSource {
        name: name.to_owned(),
        image: format!("quay.io/fixture/{name}-index:v1"),
        display_name: Some(format!("Fixture {name}")),
        publisher: Some("Fixture Publisher".to_owned()),
        priority: Some(-100),
        poll_interval: Some("30m".to_owned()),
        grpc_pod_config: Some(serde_json::json!({"nodeSelector": {"kubernetes.io/os": "linux"}})),
    }
}

/// The service, running in this test on `namespace` with an OperatorHub
/// named after it; stopped (and its OperatorHub deleted) on drop.
pub(crate) struct RunningMarketplace {
    pub(crate) client: Client,
    pub(crate) hub_name: String,
    pub(crate) metrics: MarketplaceMetrics,
    shutdown: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl RunningMarketplace {
    /// A config for `namespace` with `sources`, a short resync and an
    /// OperatorHub of the namespace's name.
    pub(crate) fn config(namespace: &str, sources: Vec<DefaultSource>) -> MarketplaceConfig {
        let mut config = MarketplaceConfig::new(namespace, sources);
        config.operator_hub_name = format!("hub-{namespace}");
        config.resync = Duration::from_secs(3);
        config
    }

    pub(crate) async fn start(config: MarketplaceConfig) -> Self {
        init_logs();
        crds_installed().await;
        let client = olm_testkit::control_plane().client().await;
        let readiness = Readiness::default();
        let shutdown = CancellationToken::new();
        let mut registry = olm_runtime::metrics::MetricsRegistry::default();
        let metrics = MarketplaceMetrics::register(&mut registry);
        let (leading_tx, leading_rx) = tokio::sync::watch::channel(true);
        let hub_name = config.operator_hub_name.clone();
        let task = tokio::spawn({
            let client = client.clone();
            let readiness = readiness.clone();
            let shutdown = shutdown.clone();
            let metrics = metrics.clone();
            async move {
                let _keep = leading_tx;
                controller::run(client, config, metrics, readiness, leading_rx, shutdown)
                    .await
                    .unwrap();
            }
        });
        Self {
            client,
            hub_name,
            metrics,
            shutdown,
            task: Some(task),
        }
    }

    /// Whether the service is still running (it has not failed or stopped).
    pub(crate) fn is_running(&self) -> bool {
        self.task.as_ref().is_some_and(|task| !task.is_finished())
    }

    pub(crate) async fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(20), task)
                .await
                .expect("the service stops within 20 s")
                .unwrap();
        }
        let hubs: Api<OperatorHub> = Api::all(self.client.clone());
        let _ = hubs.delete(&self.hub_name, &DeleteParams::default()).await;
    }
}

impl Drop for RunningMarketplace {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}
