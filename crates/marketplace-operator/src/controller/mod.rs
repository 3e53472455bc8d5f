//! The OperatorHub controller: watches the OperatorHub (creating it when
//! absent) and the CatalogSources of the marketplace namespace, asks
//! [`crate::decide`] what to do, writes the CatalogSources, and reports in
//! the OperatorHub's `status.sources`.
//!
//! There is one object to reconcile, so every change (of the OperatorHub or
//! of any CatalogSource in the namespace) wakes one level-triggered
//! reconcile of everything; a resync and a capped backoff after failures
//! bring it back without a change.
//!
//! Alongside it, where the cluster serves ClusterOperators (OpenShift),
//! the `cluster_operator` module reports marketplace and the OLM components there.

mod cluster_operator;
mod write;

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use kube::{
    Api, Client, Resource as _, ResourceExt as _,
    api::PostParams,
    runtime::{
        reflector::{ObjectRef, Store},
        watcher,
    },
};
use olm_api::{
    catalog_source::CatalogSource,
    operator_hub::{OPERATOR_HUB_NAME, OperatorHub, OperatorHubSpec},
};
use olm_runtime::{
    admin::Readiness,
    apply::FieldManager,
    cache::{reflect, wake_on_change as wake},
    error::kube_error_category,
    events::{EventRecorder, error_chain},
    retry,
};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use crate::{
    decide::{
        cluster_operator::ReconcileHealth,
        plan::{Action, Inputs, ObservedCatalog, plan, status_sources},
        sources::DefaultSource,
    },
    metrics::MarketplaceMetrics,
};

/// The field manager of every write of this service.
pub const FIELD_MANAGER: FieldManager = FieldManager::new("marketplace-operator");

/// How often everything is reconciled again without a change.
pub const DEFAULT_RESYNC: Duration = Duration::from_secs(5 * 60);

/// What the controller serves.
#[derive(Clone, Debug)]
pub struct MarketplaceConfig {
    /// The namespace the default CatalogSources live in.
    pub namespace: String,
    /// The namespace of the OLM Deployments reported in ClusterOperators.
    pub olm_namespace: String,
    /// The OperatorHub read (and created when absent): `cluster` but in tests.
    pub operator_hub_name: String,
    /// The default sources.
    pub default_sources: Vec<DefaultSource>,
    /// Take over a same-named CatalogSource without the managed-by
    /// annotation when its source is enabled, as upstream does.
    pub adopt_unmanaged: bool,
    /// How often everything is reconciled again without a change.
    pub resync: Duration,
}

impl MarketplaceConfig {
    /// The defaults: the OperatorHub `cluster`, adoption as upstream, and
    /// [`DEFAULT_RESYNC`].
    /// The OLM namespace is the marketplace namespace.
    pub fn new(namespace: impl Into<String>, default_sources: Vec<DefaultSource>) -> Self {
        let namespace = namespace.into();
        Self {
            olm_namespace: namespace.clone(),
            namespace,
            operator_hub_name: OPERATOR_HUB_NAME.to_owned(),
            default_sources,
            adopt_unmanaged: true,
            resync: DEFAULT_RESYNC,
        }
    }
}

/// A failure of one reconcile.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The OperatorHub is absent and could not be created.
    #[error("cannot create OperatorHub {name}")]
    CreateHub {
        /// Its name.
        name: String,
        /// The API server's answer.
        #[source]
        source: kube::Error,
    },
    /// A CatalogSource write failed.
    #[error("cannot {verb} CatalogSource {namespace}/{name}")]
    WriteCatalog {
        /// `create`, `update` or `delete`.
        verb: &'static str,
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The API server's answer.
        #[source]
        source: kube::Error,
    },
    /// Not even the minimal status could be written.
    #[error("cannot write the status of OperatorHub {name}")]
    WriteStatus {
        /// Its name.
        name: String,
        /// What failed.
        #[source]
        source: olm_runtime::Error,
    },
    /// Discovering, reading or writing a ClusterOperator failed.
    #[error("cannot report in ClusterOperators")]
    ClusterOperator {
        /// What failed.
        #[source]
        source: olm_runtime::Error,
    },
    /// The OperatorHub could not be read to report the components in.
    #[error("cannot read OperatorHub {name} to report the OLM components")]
    ReadHubForComponents {
        /// Its name.
        name: String,
        /// The API server's answer.
        #[source]
        source: kube::Error,
    },
    /// Applying the OLM components' status to the OperatorHub failed.
    #[error("cannot write the OLM components' status to OperatorHub {name}")]
    WriteHubComponents {
        /// The OperatorHub's name.
        name: String,
        /// The failure.
        #[source]
        source: olm_runtime::Error,
    },
    /// A watch stopped before its first list.
    #[error("the {kind} cache stopped before it filled")]
    CacheStopped {
        /// The kind watched.
        kind: &'static str,
    },
}

impl Error {
    /// A stable name for metrics and event reasons.
    pub fn category(&self) -> &'static str {
        match self {
            Self::CreateHub { source, .. }
            | Self::WriteCatalog { source, .. }
            | Self::ReadHubForComponents { source, .. } => kube_error_category(source),
            Self::WriteStatus { source, .. }
            | Self::WriteHubComponents { source, .. }
            | Self::ClusterOperator { source } => source.category(),
            Self::CacheStopped { .. } => "cache_stopped",
        }
    }
}

/// Runs the controller until `shutdown`; it reconciles only while `leading`
/// holds `true`, and sets `readiness` gates once its caches are warm. It
/// reports OLM's components on the same terms: in ClusterOperators where the
/// cluster serves them, else in the OperatorHub's `status.components`.
pub async fn run(
    client: Client,
    config: MarketplaceConfig,
    metrics: MarketplaceMetrics,
    readiness: Readiness,
    mut leading: watch::Receiver<bool>,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    let (health, health_rx) = watch::channel(ReconcileHealth::default());
    let cluster_operators = tokio::spawn(cluster_operator::run(
        client.clone(),
        config.olm_namespace.clone(),
        config.operator_hub_name.clone(),
        health_rx,
        readiness.clone(),
        leading.clone(),
        shutdown.clone(),
    ));
    let changed = Arc::new(Notify::new());
    let hubs: Api<OperatorHub> = Api::all(client.clone());
    let catalogs: Api<CatalogSource> = Api::namespaced(client.clone(), &config.namespace);
    let hub_cache = reflect(
        hubs.clone(),
        watcher::Config::default().fields(&format!("metadata.name={}", config.operator_hub_name)),
        readiness.gate("cache:OperatorHub"),
        wake(&changed),
    );
    let catalog_cache = reflect(
        catalogs.clone(),
        watcher::Config::default(),
        readiness.gate("cache:CatalogSource"),
        wake(&changed),
    );
    let mut reconciler = Reconciler {
        hubs,
        catalogs,
        hub_store: hub_cache.store.clone(),
        catalog_store: catalog_cache.store.clone(),
        recorder: EventRecorder::new(
            client,
            FIELD_MANAGER.as_str(),
            std::env::var("POD_NAME").ok(),
        ),
        metrics,
        config,
        health,
    };
    let watches = tokio::spawn(futures::future::join(hub_cache.task, catalog_cache.task));
    let result = tokio::select! {
        () = shutdown.cancelled() => Ok(()),
        result = reconciler.warm_up() => match result {
            Ok(()) => {
                reconciler.serve(&changed, &mut leading, &shutdown).await;
                Ok(())
            }
            Err(error) => Err(error),
        },
    };
    watches.abort();
    if shutdown.is_cancelled() {
        // It stops on the same signal; let it finish its write.
        let _ = cluster_operators.await;
    } else {
        cluster_operators.abort();
    }
    result
}

struct Reconciler {
    hubs: Api<OperatorHub>,
    catalogs: Api<CatalogSource>,
    hub_store: Store<OperatorHub>,
    catalog_store: Store<CatalogSource>,
    recorder: EventRecorder,
    metrics: MarketplaceMetrics,
    config: MarketplaceConfig,
    /// The health of this reconcile, for the ClusterOperator status.
    health: watch::Sender<ReconcileHealth>,
}

impl retry::ReconcileOne for Reconciler {
    async fn reconcile_once(&mut self, _shutdown: &CancellationToken) -> retry::Next {
        let timer = self.metrics.reconcile.start();
        let result = self.reconcile().await;
        self.record_health(result.as_ref().err());
        match result {
            Ok(Outcome { retry: false }) => retry::Next::Resync,
            Ok(Outcome { retry: true }) => retry::Next::Retry,
            Err(error) => {
                timer.failed(error.category());
                tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    "reconcile of the OperatorHub failed; retrying with backoff"
                );
                retry::Next::Retry
            }
        }
    }
}

/// How one reconcile ended, when it did not fail outright.
#[derive(Debug, Default)]
struct Outcome {
    /// Some write failed or met a stale cache: try again soon.
    retry: bool,
}

impl Reconciler {
    async fn warm_up(&self) -> Result<(), Error> {
        self.hub_store
            .wait_until_ready()
            .await
            .map_err(|_| Error::CacheStopped {
                kind: "OperatorHub",
            })?;
        self.catalog_store
            .wait_until_ready()
            .await
            .map_err(|_| Error::CacheStopped {
                kind: "CatalogSource",
            })
    }

    async fn serve(
        &mut self,
        changed: &Notify,
        leading: &mut watch::Receiver<bool>,
        shutdown: &CancellationToken,
    ) {
        let resync = self.config.resync;
        retry::serve_one(self, changed, leading, shutdown, resync).await;
    }

    /// Counts failed reconciles in a row for the ClusterOperator status,
    /// waking its writer only when something changed.
    fn record_health(&self, error: Option<&Error>) {
        self.health.send_if_modified(|health| {
            let next = match error {
                None => ReconcileHealth::default(),
                Some(error) => ReconcileHealth {
                    failures_in_a_row: health.failures_in_a_row.saturating_add(1),
                    last_error: Some(error_chain(error)),
                },
            };
            let modified = *health != next;
            *health = next;
            modified
        });
    }

    #[tracing::instrument(skip(self), fields(operatorhub = %self.config.operator_hub_name))]
    async fn reconcile(&self) -> Result<Outcome, Error> {
        let hub = match self
            .hub_store
            .get(&ObjectRef::new(&self.config.operator_hub_name))
        {
            Some(hub) => hub,
            None => Arc::new(self.create_hub().await?),
        };
        let observed: Vec<ObservedCatalog> = self
            .catalog_store
            .state()
            .iter()
            .map(|catalog| observe(catalog))
            .collect();
        let decided = plan(Inputs {
            defaults: &self.config.default_sources,
            hub: &hub.spec,
            observed: &observed,
            adopt_unmanaged: self.config.adopt_unmanaged,
        });
        let mut outcome = Outcome::default();
        let mut failures = BTreeMap::new();
        for action in &decided.actions {
            match self.execute(action, &hub).await {
                Ok(write::Written::Done) => {
                    self.metrics.wrote(action.verb(), true);
                    self.event_done(&hub, action).await;
                }
                Ok(write::Written::Stale) => outcome.retry = true,
                Err(error) => {
                    self.metrics.wrote(action.verb(), false);
                    tracing::warn!(
                        error = &error as &dyn std::error::Error,
                        catalog = action.name(),
                        "a default CatalogSource write failed"
                    );
                    self.event_failed(&hub, action, &error).await;
                    failures.insert(action.name().to_owned(), error_chain(&error));
                    outcome.retry = true;
                }
            }
        }
        let sources = status_sources(&decided, &failures);
        self.metrics.set_sources(
            sources
                .iter()
                .filter_map(|s| Some((s.name.as_deref()?, s.status.as_deref()?))),
        );
        self.write_status(&hub, sources).await?;
        Ok(outcome)
    }

    /// Creates the OperatorHub with an empty spec, as the release manifest
    /// upstream ships does (`manifests/0000_03_marketplace-operator_02_operatorhub.cr.yaml`).
    async fn create_hub(&self) -> Result<OperatorHub, Error> {
        let name = &self.config.operator_hub_name;
        let hub = OperatorHub::new(name, OperatorHubSpec::default());
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.as_str().to_owned()),
            ..PostParams::default()
        };
        match self.hubs.create(&params, &hub).await {
            Ok(created) => {
                tracing::info!(operatorhub = %name, "created the absent OperatorHub");
                Ok(created)
            }
            // Someone created it since the cache was read.
            Err(kube::Error::Api(status)) if status.is_already_exists() => self
                .hubs
                .get(name)
                .await
                .map_err(|source| Error::CreateHub {
                    name: name.clone(),
                    source,
                }),
            Err(source) => Err(Error::CreateHub {
                name: name.clone(),
                source,
            }),
        }
    }

    async fn event_done(&self, hub: &OperatorHub, action: &Action) {
        let (reason, note) = match action {
            Action::Create { name, .. } => (
                "CatalogSourceCreated",
                format!(
                    "created the default CatalogSource {}/{name}",
                    self.config.namespace
                ),
            ),
            Action::Update { name, .. } => (
                "CatalogSourceRestored",
                format!(
                    "put the default CatalogSource {}/{name} back to its default spec",
                    self.config.namespace
                ),
            ),
            Action::Delete { name } => (
                "CatalogSourceDeleted",
                format!(
                    "deleted the default CatalogSource {}/{name}: its source is disabled",
                    self.config.namespace
                ),
            ),
        };
        let reference = hub.object_ref(&());
        if let Err(error) = self
            .recorder
            .normal(&reference, reason, action.verb(), &note)
            .await
        {
            tracing::debug!(
                error = &error as &dyn std::error::Error,
                "event not published"
            );
        }
    }

    async fn event_failed(&self, hub: &OperatorHub, action: &Action, error: &Error) {
        let reference = hub.object_ref(&());
        if let Err(error) = self
            .recorder
            .warning(&reference, error.category(), action.verb(), error)
            .await
        {
            tracing::debug!(
                error = &error as &dyn std::error::Error,
                "event not published"
            );
        }
    }
}

fn observe(catalog: &CatalogSource) -> ObservedCatalog {
    ObservedCatalog {
        name: catalog.name_any(),
        annotations: catalog.annotations().clone(),
        spec: catalog.spec.clone(),
        deleting: catalog.metadata.deletion_timestamp.is_some(),
    }
}
