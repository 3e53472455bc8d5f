//! The samples controller: it watches the Config `cluster`, the
//! ImageStreams and Templates of the samples namespace and its own
//! ConfigMaps, asks [`crate::decide::plan`] what to do, writes it, reports
//! the Config's status and, where the cluster serves them, the
//! ClusterOperator `openshift-samples`.
//!
//! There is one object to reconcile, so every change wakes one
//! level-triggered reconcile of everything; a resync, a capped backoff
//! after failures and the plan's own requeue bring it back without a
//! change. When the Config is absent it makes the default one (see
//! [`crate::decide::bootstrap`]), probing the samples registry first.
//!
//! On a cluster that serves no `image.openshift.io` ImageStreams or
//! `template.openshift.io` Templates it says so in the Config's status and
//! its log, does nothing else, and looks again every resync.

mod bootstrap;
pub mod uninstall;
mod write;

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, Client, ResourceExt as _,
    api::{ApiResource, DynamicObject},
    runtime::{
        reflector::{ObjectRef, Store},
        watcher,
    },
};
use olm_api::{
    openshift::{IMAGE_GROUP, ImageStream, TEMPLATE_GROUP, Template},
    samples::{CONFIG_NAME, Config, SAMPLES_NAMESPACE, condition, management_state},
};
use olm_runtime::{
    admin::Readiness,
    apply::{FieldManager, write_status},
    cache::{reflect, wake_on_change as wake},
    cluster_operator::ClusterOperators,
    discovery::served_resource,
    error::kube_error_category,
    retry::{self, backoff},
};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use crate::{
    decide::{
        bootstrap::{BOOTSTRAP_ANNOTATION, RemovedBecause, SUPPORTED_ARCHITECTURES},
        cluster_operator::{
            CLUSTER_OPERATOR_NAME, Observed as OperatorObserved, cluster_operator_status, degraded,
        },
        credentials::{
            DOCKER_CONFIG_KEY, PULL_SECRET_NAME, PULL_SECRET_NAMESPACE, missing_registry_credential,
        },
        imports::{IMAGESTREAM_ERROR_LABEL, TAG_TO_IMAGE_CONFIG_MAP},
        inventory::{Flavour, Inventory},
        plan::{Observed, Plan, WriteFailure, plan},
    },
    metrics::{MetricsSnapshot, SamplesMetrics},
    probe::Probe,
};

/// The field manager of every write of this service.
pub const FIELD_MANAGER: FieldManager = FieldManager::new("samples-operator");

/// How often everything is reconciled again without a change.
pub const DEFAULT_RESYNC: Duration = Duration::from_secs(10 * 60);

/// How often a cluster without the image and template APIs is looked at
/// again (and its Config's deletion let go), at most.
const ABSENT_APIS_LOOK: Duration = Duration::from_secs(60);

/// How many ImageStreamImports (import retries) run at once.
const IMPORT_RETRIES_AT_ONCE: usize = 4;

pub use crate::decide::bootstrap::APIS_ABSENT_REASON;

/// Where the samples come from.
#[derive(Clone, Debug)]
pub enum InventorySource {
    /// The data shipped in the binary, of this flavour, for the Config's
    /// architecture.
    Embedded(Flavour),
    /// One inventory, whatever the architecture (`--inventory DIR`, tests).
    Fixed(Arc<Inventory>),
}

/// How the operator decides the default Config's management state.
#[derive(Clone, Debug)]
pub struct BootstrapSettings {
    /// The architecture the default Config names (the operator's own), or
    /// `None` when samples have none for it.
    pub architecture: Option<String>,
    /// The cluster's network is IPv6.
    pub ipv6: bool,
    /// A global proxy is set in the operator's environment.
    pub proxy: bool,
    /// The registry probe, or `None` to assume the registry is reachable.
    pub probe: Option<Probe>,
    /// How long the probe keeps trying.
    pub probe_deadline: Duration,
    /// The wait between probe attempts.
    pub probe_interval: Duration,
}

/// What the controller serves.
#[derive(Clone, Debug)]
pub struct SamplesConfig {
    /// The Config read (and made when absent): `cluster` but in tests.
    pub config_name: String,
    /// The namespace of the samples: `openshift`.
    pub samples_namespace: String,
    /// The namespace of the operator's ConfigMaps.
    pub operator_namespace: String,
    /// The operator's version, written on every sample.
    pub operator_version: String,
    /// Where the samples come from.
    pub inventory: InventorySource,
    /// How the default Config is decided.
    pub bootstrap: BootstrapSettings,
    /// Whether to report in the ClusterOperator `openshift-samples` where
    /// the cluster serves ClusterOperators (tests turn it off to run side
    /// by side).
    pub report_cluster_operator: bool,
    /// How often everything is reconciled again without a change (and the
    /// image and template APIs looked for, when absent).
    pub resync: Duration,
}

impl SamplesConfig {
    /// The defaults: the Config `cluster`, samples in `openshift`, the
    /// embedded OCP inventory, the operator's own architecture, the public
    /// registry probe, and [`DEFAULT_RESYNC`].
    pub fn new(operator_namespace: impl Into<String>, operator_version: impl Into<String>) -> Self {
        Self {
            config_name: CONFIG_NAME.to_owned(),
            samples_namespace: SAMPLES_NAMESPACE.to_owned(),
            operator_namespace: operator_namespace.into(),
            operator_version: operator_version.into(),
            inventory: InventorySource::Embedded(Flavour::Ocp),
            bootstrap: BootstrapSettings {
                architecture: crate::decide::bootstrap::config_architecture(std::env::consts::ARCH)
                    .map(str::to_owned),
                ipv6: false,
                proxy: false,
                probe: Some(Probe::public(crate::probe::DEFAULT_TARGET)),
                probe_deadline: crate::probe::DEFAULT_DEADLINE,
                probe_interval: crate::probe::PROBE_INTERVAL,
            },
            report_cluster_operator: true,
            resync: DEFAULT_RESYNC,
        }
    }
}

/// A failure of one reconcile.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Discovery of an API the operator needs failed.
    #[error("cannot discover the {what} API")]
    Discover {
        /// What was looked for.
        what: &'static str,
        /// What failed.
        #[source]
        source: olm_runtime::Error,
    },
    /// Reading an object failed.
    #[error("cannot read {kind} {name}")]
    Read {
        /// The kind.
        kind: &'static str,
        /// Its name.
        name: String,
        /// The API server's answer.
        #[source]
        source: kube::Error,
    },
    /// The default Config could not be created.
    #[error("cannot create the default Config {name}")]
    CreateConfig {
        /// Its name.
        name: String,
        /// The API server's answer.
        #[source]
        source: kube::Error,
    },
    /// A write of a sample, ConfigMap, import or finalizer failed.
    #[error("cannot {verb} {kind} {name}")]
    Write {
        /// `create`, `update` or `delete`.
        verb: &'static str,
        /// The kind.
        kind: &'static str,
        /// Its name.
        name: String,
        /// The API server's answer.
        #[source]
        source: kube::Error,
    },
    /// A ConfigMap apply failed.
    #[error("cannot apply ConfigMap {name}")]
    ApplyConfigMap {
        /// Its name.
        name: String,
        /// What failed.
        #[source]
        source: olm_runtime::Error,
    },
    /// The Config's status could not be written.
    #[error("cannot write the status of Config {name}")]
    WriteStatus {
        /// Its name.
        name: String,
        /// What failed.
        #[source]
        source: olm_runtime::Error,
    },
    /// The ClusterOperator could not be read or written.
    #[error("cannot report in the ClusterOperator")]
    ClusterOperator {
        /// What failed.
        #[source]
        source: olm_runtime::Error,
    },
    /// A watch stopped before its first list.
    #[error("the {kind} cache stopped before it filled")]
    CacheStopped {
        /// The kind watched.
        kind: &'static str,
    },
    /// The operator's pods did not stop for an uninstall.
    #[error("{pods} pod(s) of {deployment} still running after {timeout:?}")]
    OperatorStillRunning {
        /// The Deployment, `namespace/name`.
        deployment: String,
        /// How many pods were left.
        pods: usize,
        /// How long it waited.
        timeout: Duration,
    },
    /// The shipped inventory does not parse (a bug of the build).
    #[error("cannot read the samples inventory")]
    Inventory {
        /// What failed.
        #[source]
        source: crate::decide::inventory::InventoryError,
    },
}

impl Error {
    /// The refusal this error stands for when retrying will not cure it
    /// (forbidden, denied by a webhook, over quota...), as upstream's
    /// `ShouldNotGoDegraded` tells them apart: conflicts, invalid objects
    /// and a server that is busy or unreachable are not.
    pub fn lasting_failure(&self) -> Option<WriteFailure> {
        let Self::Write { source, .. } = self else {
            return None;
        };
        let kube::Error::Api(status) = source else {
            return None;
        };
        let passing = matches!(status.code, 409 | 422 | 429) || status.code >= 500;
        (!passing).then(|| WriteFailure {
            status_reason: if status.reason.is_empty() {
                "Unknown".to_owned()
            } else {
                status.reason.clone()
            },
            message: olm_runtime::events::error_chain(self),
        })
    }

    /// A stable name for metrics and event reasons.
    pub fn category(&self) -> &'static str {
        match self {
            Self::Read { source, .. }
            | Self::CreateConfig { source, .. }
            | Self::Write { source, .. } => kube_error_category(source),
            Self::Discover { source, .. }
            | Self::ApplyConfigMap { source, .. }
            | Self::WriteStatus { source, .. }
            | Self::ClusterOperator { source } => source.category(),
            Self::CacheStopped { .. } => "cache_stopped",
            Self::Inventory { .. } => "inventory",
            Self::OperatorStillRunning { .. } => "operator_still_running",
        }
    }
}

/// The APIs of the cluster the controller uses, as discovered.
struct Apis {
    image_streams: Option<ApiResource>,
    templates: Option<ApiResource>,
    image_stream_imports: Option<ApiResource>,
    image_config: Option<ApiResource>,
    proxy_config: Option<ApiResource>,
    cluster_operators: Option<ClusterOperators>,
}

impl Apis {
    async fn discover(client: &Client, with_cluster_operators: bool) -> Result<Self, Error> {
        let served = |group: &'static str, plural: &'static str, what: &'static str| async move {
            served_resource(client, group, plural)
                .await
                .map_err(|source| Error::Discover { what, source })
        };
        Ok(Self {
            image_streams: served(IMAGE_GROUP, "imagestreams", "ImageStream").await?,
            templates: served(TEMPLATE_GROUP, "templates", "Template").await?,
            image_stream_imports: served(IMAGE_GROUP, "imagestreamimports", "ImageStreamImport")
                .await?,
            image_config: served("config.openshift.io", "images", "Image config").await?,
            proxy_config: served("config.openshift.io", "proxies", "Proxy config").await?,
            cluster_operators: if with_cluster_operators {
                ClusterOperators::discover(client, FIELD_MANAGER)
                    .await
                    .map_err(|source| Error::Discover {
                        what: "ClusterOperator",
                        source,
                    })?
            } else {
                None
            },
        })
    }

    fn samples_served(&self) -> bool {
        self.image_streams.is_some() && self.templates.is_some()
    }
}

/// Runs the controller until `shutdown`; it reconciles only while `leading`
/// holds `true`, and sets `readiness` gates once its caches are warm.
pub async fn run(
    client: Client,
    config: SamplesConfig,
    metrics: SamplesMetrics,
    readiness: Readiness,
    mut leading: watch::Receiver<bool>,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    let apis_gate = readiness.gate("discovery:image-and-template-apis");
    let mut failures = 0u32;
    let apis = loop {
        let delay = match Apis::discover(&client, config.report_cluster_operator).await {
            Ok(apis) if apis.samples_served() => break apis,
            Ok(apis) => {
                // Ready: there is nothing to wait for on such a cluster.
                apis_gate.set();
                tracing::warn!(
                    samples_namespace = %config.samples_namespace,
                    "this cluster serves no image.openshift.io ImageStreams or template.openshift.io Templates; the samples operator does nothing but report so, and looks again every {:?}",
                    config.resync.min(ABSENT_APIS_LOOK)
                );
                if *leading.borrow_and_update()
                    && let Err(error) = bootstrap::report_apis_absent(&client, &config, &apis).await
                {
                    tracing::warn!(
                        error = &error as &dyn std::error::Error,
                        "cannot report the absent APIs in the Config's status"
                    );
                }
                failures = 0;
                config.resync.min(ABSENT_APIS_LOOK)
            }
            Err(error) => {
                failures = failures.saturating_add(1);
                tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    "discovery failed; retrying with backoff"
                );
                backoff(failures)
            }
        };
        tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            () = tokio::time::sleep(delay) => {}
            result = leading.changed() => if result.is_err() { return Ok(()) },
        }
    };
    apis_gate.set();
    serve(client, config, apis, metrics, readiness, leading, shutdown).await
}

#[allow(clippy::too_many_arguments)]
async fn serve(
    client: Client,
    config: SamplesConfig,
    apis: Apis,
    metrics: SamplesMetrics,
    readiness: Readiness,
    mut leading: watch::Receiver<bool>,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    let changed = Arc::new(Notify::new());
    let configs: Api<Config> = Api::all(client.clone());
    let streams: Api<ImageStream> = Api::namespaced(client.clone(), &config.samples_namespace);
    let templates: Api<Template> = Api::namespaced(client.clone(), &config.samples_namespace);
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &config.operator_namespace);
    let config_cache = reflect(
        configs.clone(),
        watcher::Config::default().fields(&format!("metadata.name={}", config.config_name)),
        readiness.gate("cache:Config"),
        wake(&changed),
    );
    let stream_cache = reflect(
        streams.clone(),
        watcher::Config::default(),
        readiness.gate("cache:ImageStream"),
        wake(&changed),
    );
    let template_cache = reflect(
        templates.clone(),
        watcher::Config::default(),
        readiness.gate("cache:Template"),
        wake(&changed),
    );
    let error_cache = reflect(
        config_maps.clone(),
        watcher::Config::default().labels(&format!("{IMAGESTREAM_ERROR_LABEL}=true")),
        readiness.gate("cache:ConfigMap"),
        wake(&changed),
    );
    let tag_cache = reflect(
        config_maps.clone(),
        watcher::Config::default().fields(&format!("metadata.name={TAG_TO_IMAGE_CONFIG_MAP}")),
        readiness.gate("cache:ConfigMap:tag-to-image"),
        wake(&changed),
    );
    let imports = apis.image_stream_imports.as_ref().map(|resource| {
        Api::<DynamicObject>::namespaced_with(client.clone(), &config.samples_namespace, resource)
    });
    let mut reconciler = Reconciler {
        client,
        configs,
        streams,
        templates,
        config_maps,
        imports,
        config_store: config_cache.store,
        stream_store: stream_cache.store,
        template_store: template_cache.store,
        error_store: error_cache.store,
        tag_store: tag_cache.store,
        apis,
        metrics,
        inventories: BTreeMap::new(),
        last_retries: BTreeMap::new(),
        write_failure: None,
        import_slots: Arc::new(tokio::sync::Semaphore::new(IMPORT_RETRIES_AT_ONCE)),
        config,
    };
    let watches = tokio::spawn(futures::future::join5(
        config_cache.task,
        stream_cache.task,
        template_cache.task,
        error_cache.task,
        tag_cache.task,
    ));
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
    result
}

struct Reconciler {
    client: Client,
    configs: Api<Config>,
    streams: Api<ImageStream>,
    templates: Api<Template>,
    config_maps: Api<ConfigMap>,
    imports: Option<Api<DynamicObject>>,
    config_store: Store<Config>,
    stream_store: Store<ImageStream>,
    template_store: Store<Template>,
    error_store: Store<ConfigMap>,
    tag_store: Store<ConfigMap>,
    apis: Apis,
    metrics: SamplesMetrics,
    /// Parsed inventories by architecture.
    inventories: BTreeMap<String, Arc<Inventory>>,
    /// When each ImageStream's imports were last retried.
    last_retries: BTreeMap<String, Timestamp>,
    /// The last reconcile's lasting write failure, for the status.
    write_failure: Option<WriteFailure>,
    /// Import retries run beside the reconcile (OpenShift imports before it
    /// answers), at most this many at once.
    import_slots: Arc<tokio::sync::Semaphore>,
    config: SamplesConfig,
}

impl retry::ReconcileOne for Reconciler {
    async fn reconcile_once(&mut self, shutdown: &CancellationToken) -> retry::Next {
        let metrics = self.metrics.clone();
        let timer = metrics.reconcile.start();
        match self.reconcile(shutdown).await {
            Ok(outcome) if outcome.retry => retry::Next::Retry,
            Ok(outcome) => outcome
                .requeue_after
                .map_or(retry::Next::Resync, retry::Next::After),
            Err(error) => {
                timer.failed(error.category());
                tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    "reconcile of the samples Config failed; retrying with backoff"
                );
                retry::Next::Retry
            }
        }
    }
}

/// How one reconcile ended, when it did not fail outright.
#[derive(Debug, Default)]
struct Outcome {
    /// Some write met a stale cache: try again soon.
    retry: bool,
    /// The plan asks to run again after this long.
    requeue_after: Option<Duration>,
}

impl Reconciler {
    async fn warm_up(&self) -> Result<(), Error> {
        let wait = |kind| move |_| Error::CacheStopped { kind };
        self.config_store
            .wait_until_ready()
            .await
            .map_err(wait("Config"))?;
        self.stream_store
            .wait_until_ready()
            .await
            .map_err(wait("ImageStream"))?;
        self.template_store
            .wait_until_ready()
            .await
            .map_err(wait("Template"))?;
        self.error_store
            .wait_until_ready()
            .await
            .map_err(wait("ConfigMap"))?;
        self.tag_store
            .wait_until_ready()
            .await
            .map_err(wait("ConfigMap"))
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

    #[tracing::instrument(skip_all, fields(config = %self.config.config_name))]
    async fn reconcile(&mut self, shutdown: &CancellationToken) -> Result<Outcome, Error> {
        let Some(current) = self
            .config_store
            .get(&ObjectRef::new(&self.config.config_name))
        else {
            bootstrap::create_default(
                &self.client,
                &self.configs,
                &self.config,
                self.apis.image_config.as_ref(),
                self.apis.proxy_config.as_ref(),
                shutdown,
            )
            .await?;
            return Ok(Outcome::default());
        };
        let inventory = self.inventory_for(&current)?;
        // Read only where it decides something: a Managed Config's
        // validation. A failed read is a reason the spec cannot be checked,
        // shown in the status, never a failed reconcile (that would stop a
        // deletion's cleanup too).
        let managed = current.spec.effective_management_state() == management_state::MANAGED
            && current.metadata.deletion_timestamp.is_none();
        let image_policy = match (&self.apis.image_config, managed) {
            (Some(resource), true) => match bootstrap::image_policy(&self.client, resource).await {
                Ok(policy) => policy.map(Ok),
                Err(error) => Some(Err(olm_runtime::events::error_chain(&error))),
            },
            _ => None,
        };
        let image_streams: BTreeMap<String, ImageStream> = self
            .stream_store
            .state()
            .iter()
            .map(|stream| (stream.name_any(), (**stream).clone()))
            .collect();
        let templates: BTreeMap<String, Template> = self
            .template_store
            .state()
            .iter()
            .map(|template| (template.name_any(), (**template).clone()))
            .collect();
        let error_config_maps: BTreeMap<String, ConfigMap> = self
            .error_store
            .state()
            .iter()
            .map(|cm| (cm.name_any(), (**cm).clone()))
            .collect();
        let tag_to_image = self
            .tag_store
            .get(&ObjectRef::new(TAG_TO_IMAGE_CONFIG_MAP).within(&self.config.operator_namespace));
        // Whole seconds: what the API server keeps of a timestamp, so that a
        // status read back compares equal to the one written.
        let now = Timestamp::from_second(Timestamp::now().as_second()).unwrap_or_default();
        let decided = plan(&Observed {
            config: &current,
            inventory: &inventory,
            image_streams: &image_streams,
            templates: &templates,
            error_config_maps: &error_config_maps,
            tag_to_image: tag_to_image.as_deref(),
            operator_namespace: &self.config.operator_namespace,
            operator_version: &self.config.operator_version,
            image_policy: image_policy
                .as_ref()
                .map(|policy| policy.as_ref().map_err(String::as_str)),
            write_failure: self.write_failure.as_ref(),
            last_retries: &self.last_retries,
            now,
        });
        for note in &decided.notes {
            tracing::info!("{note}");
        }
        let mut outcome = Outcome {
            requeue_after: decided.requeue_after,
            ..Outcome::default()
        };
        // The status first: a removal says RemovePending before it deletes.
        if current.status.as_ref() != Some(&decided.status) {
            write_status(
                &self.configs,
                &FIELD_MANAGER,
                &current,
                &decided.status,
                None,
            )
            .await
            .map_err(|source| Error::WriteStatus {
                name: self.config.config_name.clone(),
                source,
            })?;
        }
        let mut first_error = None;
        let mut failure = None;
        for action in &decided.writes {
            match self.execute(action, &current, now).await {
                Ok(write::Written::Done) => self.metrics.wrote(action.kind(), action.verb(), true),
                Ok(write::Written::Stale) => outcome.retry = true,
                Err(error) => {
                    self.metrics.wrote(action.kind(), action.verb(), false);
                    tracing::warn!(
                        error = &error as &dyn std::error::Error,
                        kind = action.kind(),
                        name = action.name(),
                        "a samples write failed"
                    );
                    if failure.is_none() {
                        failure = error.lasting_failure();
                    }
                    first_error.get_or_insert(error);
                }
            }
        }
        // A refusal that retrying will not cure shows in the status from
        // the next reconcile on; success clears it.
        if failure != self.write_failure {
            self.write_failure = failure;
            outcome.retry = true;
        }
        self.report(&current, &decided).await?;
        match first_error {
            Some(error) => Err(error),
            None => Ok(outcome),
        }
    }

    /// The inventory of the Config's architecture (cached); empty when
    /// there is none for it.
    fn inventory_for(&mut self, current: &Config) -> Result<Arc<Inventory>, Error> {
        let flavour = match &self.config.inventory {
            InventorySource::Fixed(inventory) => return Ok(inventory.clone()),
            InventorySource::Embedded(flavour) => *flavour,
        };
        let Some(architecture) = current.spec.architectures.first() else {
            return Ok(Arc::default());
        };
        if !SUPPORTED_ARCHITECTURES.contains(&architecture.as_str()) {
            return Ok(Arc::default());
        }
        if let Some(inventory) = self.inventories.get(architecture) {
            return Ok(inventory.clone());
        }
        let inventory = Arc::new(
            Inventory::embedded(flavour, architecture)
                .map_err(|source| Error::Inventory { source })?
                .unwrap_or_default(),
        );
        self.inventories
            .insert(architecture.clone(), inventory.clone());
        Ok(inventory)
    }

    /// Reports the ClusterOperator (where served) and the metrics.
    async fn report(&self, current: &Config, decided: &Plan) -> Result<(), Error> {
        let registry_unreachable = current.spec.effective_management_state() == "Removed"
            && current
                .annotations()
                .get(BOOTSTRAP_ANNOTATION)
                .is_some_and(|reason| reason == RemovedBecause::RegistryUnreachable.as_str());
        let observed = OperatorObserved {
            status: &decided.status,
            deleting: current.metadata.deletion_timestamp.is_some(),
            unsupported_architecture: current
                .spec
                .architectures
                .first()
                .is_some_and(|arch| !SUPPORTED_ARCHITECTURES.contains(&arch.as_str())),
            registry_unreachable_at_bootstrap: registry_unreachable,
            failing_streams: &decided.failing_streams,
            operator_version: &self.config.operator_version,
        };
        let is_degraded;
        if let Some(operators) = &self.apis.cluster_operators {
            let reported = operators
                .current_status(CLUSTER_OPERATOR_NAME)
                .await
                .map_err(|source| Error::ClusterOperator { source })?;
            let desired = cluster_operator_status(&observed, Some(&reported), Timestamp::now());
            is_degraded = degraded(&desired);
            if desired != reported {
                operators
                    .write_status(CLUSTER_OPERATOR_NAME, &desired)
                    .await
                    .map_err(|source| Error::ClusterOperator { source })?;
            }
        } else {
            let desired = cluster_operator_status(&observed, None, Timestamp::now());
            is_degraded = degraded(&desired);
        }
        let state = current.spec.effective_management_state();
        let reporting =
            state == management_state::MANAGED && current.metadata.deletion_timestamp.is_none();
        let missing_registry_credential =
            reporting && self.registry_credential_missing(current).await;
        self.metrics.observe(&MetricsSnapshot {
            reporting,
            degraded: is_degraded,
            invalid_config: !olm_api::conditions::is_true(
                &decided.status.conditions,
                condition::CONFIGURATION_VALID,
            ),
            registry_unreachable_at_bootstrap: registry_unreachable,
            streams: decided.streams.clone(),
            missing_secret: !olm_api::conditions::is_true(
                &decided.status.conditions,
                condition::IMPORT_CREDENTIALS_EXIST,
            ),
            missing_registry_credential,
        });
        Ok(())
    }

    /// Whether the install pull secret lacks registry.redhat.io, read only
    /// on OpenShift (where the cluster serves its config APIs and the
    /// secret is the install's); elsewhere there is no such secret to judge.
    async fn registry_credential_missing(&self, current: &Config) -> bool {
        if self.apis.image_config.is_none() {
            return false;
        }
        let secrets: Api<k8s_openapi::api::core::v1::Secret> =
            Api::namespaced(self.client.clone(), PULL_SECRET_NAMESPACE);
        let docker_config = match secrets.get_opt(PULL_SECRET_NAME).await {
            Ok(secret) => secret
                .and_then(|secret| secret.data?.remove(DOCKER_CONFIG_KEY).map(|bytes| bytes.0)),
            Err(error) => {
                tracing::debug!(
                    error = &error as &dyn std::error::Error,
                    "cannot read the install pull secret; not judging its credentials"
                );
                return false;
            }
        };
        missing_registry_credential(
            current.spec.samples_registry.as_deref().unwrap_or_default(),
            docker_config.as_deref(),
        )
    }
}
