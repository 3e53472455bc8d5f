//! catalog-operator's controllers against a real control plane
//! (kube-apiserver, etcd, controller-manager, scheduler and kwok from
//! `olm-testkit`), one test binary so the control plane starts once. Each
//! test runs the controllers in-process, watching only its own namespace.

// Helpers of a test binary: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod binary;
mod catalogs;
mod install_plans;
mod service_lookup;
mod subscriptions;

use std::time::Duration;

use catalog_operator::controller::{self, ControllerConfig};
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
                .unwrap_or_else(|_| "catalog_operator=debug".into()),
        )
        .try_init();
}

/// The controllers running in this test for one namespace; stopped on drop.
pub(crate) struct RunningOperator {
    registry: olm_runtime::metrics::MetricsRegistry,
    shutdown: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl RunningOperator {
    pub(crate) async fn start(namespace: &str) -> Self {
        Self::start_with(namespace, |_| {}).await
    }

    pub(crate) async fn start_with(
        namespace: &str,
        adjust: impl FnOnce(&mut ControllerConfig),
    ) -> Self {
        let kube_config = olm_testkit::control_plane().config().await.unwrap();
        let readiness = Readiness::default();
        let shutdown = CancellationToken::new();
        let mut registry = olm_runtime::metrics::MetricsRegistry::default();
        let metrics = catalog_operator::metrics::CatalogMetrics::register(&mut registry);
        let config = ControllerConfig {
            watched_namespaces: vec![namespace.to_owned()],
            ready_recheck: Duration::from_secs(1),
            registry_timeout: Duration::from_secs(2),
            install_plan_retry_timeout: jiff::SignedDuration::from_secs(2),
            ..ControllerConfig::default()
        };
        let mut config = config;
        adjust(&mut config);
        let task = tokio::spawn({
            let readiness = readiness.clone();
            let shutdown = shutdown.clone();
            async move {
                controller::run(
                    kube_config,
                    config,
                    metrics,
                    Bus::disabled(),
                    readiness,
                    shutdown,
                )
                .await
                .unwrap();
            }
        });
        let _ = readiness.gate("cache:CatalogSource");
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
        Self {
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

/// The InstallPlans `plans` lists, once there is at least one and every
/// one is `Complete`. A Subscription is `AtLatestKnown` as soon as its CSV
/// exists; its plan is `Complete` only once every step is, which can take
/// one more pass (a new CRD not yet Established when the CSV was created).
pub(crate) async fn plans_complete(
    plans: &kube::Api<olm_api::install_plan::InstallPlan>,
) -> Vec<olm_api::install_plan::InstallPlan> {
    eventually(
        "every InstallPlan Complete",
        Duration::from_secs(60),
        || async {
            let list = plans
                .list(&Default::default())
                .await
                .map_err(|e| e.to_string())?;
            let phases: Vec<String> = list
                .items
                .iter()
                .map(|p| {
                    p.status
                        .as_ref()
                        .map(|s| s.phase.to_string())
                        .unwrap_or_default()
                })
                .collect();
            if !phases.is_empty() && phases.iter().all(|phase| phase == "Complete") {
                Ok(list.items)
            } else {
                Err(format!("phases {phases:?}"))
            }
        },
    )
    .await
}

/// Creates the OperatorGroup `name` in `namespace` with `spec`, and writes
/// the status olm-operator would give it (it does not run in these tests):
/// `status.namespaces` (so the group manages its targets) and, for a
/// group naming a `serviceAccountName`, the `serviceAccountRef` of that
/// account once it exists.
pub(crate) async fn managing_group(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    spec: serde_json::Value,
) -> olm_api::operator_group::OperatorGroup {
    use k8s_openapi::api::core::v1::ServiceAccount;
    use kube::api::{Api, Patch, PatchParams, PostParams};
    let groups: Api<olm_api::operator_group::OperatorGroup> =
        Api::namespaced(client.clone(), namespace);
    groups
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({
                "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
                "metadata": {"name": name}, "spec": spec
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    // Upstream writes `[""]` for a group that targets every namespace.
    let targets = spec["targetNamespaces"]
        .as_array()
        .cloned()
        .unwrap_or_else(|| vec![serde_json::json!("")]);
    let mut status = serde_json::json!({
        "namespaces": targets,
        "lastUpdated": jiff::Timestamp::now().round(jiff::Unit::Second).unwrap().to_string(),
    });
    if let Some(account) = spec["serviceAccountName"].as_str() {
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
        let found = accounts.get(account).await.unwrap();
        status["serviceAccountRef"] = serde_json::json!({
            "apiVersion": "v1", "kind": "ServiceAccount", "namespace": namespace,
            "name": account, "uid": found.metadata.uid,
            "resourceVersion": found.metadata.resource_version,
        });
    }
    groups
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "status": status })),
        )
        .await
        .unwrap()
}
