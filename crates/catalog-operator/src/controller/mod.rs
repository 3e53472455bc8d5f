//! The service wiring: watches and caches, the reconcilers, and what they do
//! to the cluster. Every reconcile reads the caches, calls [`crate::decide`]
//! and carries out what it returns; only this module touches a client.
//!
//! Caches: CatalogSources, Namespaces (for pod security labels), and the
//! registry Pods, Services, ServiceAccounts and NetworkPolicies OLM manages
//! (`olm.managed=true`). A change to a managed object requeues the catalog
//! named by its `olm.catalogSource` label or its owner reference.

pub mod catalog_source;
mod connections;
pub mod install_plan;
mod promotion;
mod snapshots;
pub mod subscription;

pub use promotion::ContentDial;

use std::{sync::Arc, time::Duration};

use futures::{StreamExt, channel::mpsc};
use k8s_openapi::api::{
    core::v1::{ConfigMap, Namespace, Pod, Service, ServiceAccount},
    networking::v1::NetworkPolicy,
};
use kube::{
    Api, Client, Resource, ResourceExt,
    core::PartialObjectMeta,
    runtime::{
        reflector::{ObjectRef, Store},
        watcher,
    },
};
use olm_api::{
    catalog_source::CatalogSource, csv::ClusterServiceVersion, install_plan::InstallPlan, labels,
    operator_group::OperatorGroup, subscription::Subscription,
};
use olm_bus::Bus;
use olm_runtime::{
    admin::Readiness,
    apply::FieldManager,
    cache::{self, Reflector},
    controller::{Controller, in_watched_namespaces},
    service_address::{AddressResolver, ServiceLookup},
};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::decide::{catalog_source::RegistryPodOptions, image_template::KubeVersion};

pub use connections::Connections;

/// The field manager of everything catalog-operator applies.
pub const FIELD_MANAGER: FieldManager = FieldManager::new("catalog-operator");

/// Upstream's default resync period (`--interval`).
pub const DEFAULT_RESYNC: Duration = Duration::from_secs(15 * 60);

/// How often a READY registry is checked again by default, so a registry
/// that goes away shows in status within this time.
pub const READY_RECHECK: Duration = Duration::from_secs(30);

const CACHE_POLL: Duration = Duration::from_millis(50);

/// How long a namespace's resolution waits for its inputs to settle: events
/// within this time are resolved in one pass.
pub const RESOLVE_DEBOUNCE: Duration = Duration::from_millis(200);

/// Stands for "every namespace with a Subscription" on the resolve queue.
const ALL_NAMESPACES: &str = "";

/// The client span of a call to a catalog's registry API: the call carries
/// its context to the registry server (gRPC metadata), and the install's
/// trace shows which catalog answered and how long it took.
pub(crate) fn catalog_call_span(
    method: &'static str,
    namespace: &str,
    name: &str,
) -> tracing::Span {
    tracing::info_span!(
        "catalog_call",
        otel.name = format!("api.Registry/{method}"),
        otel.kind = "client",
        rpc.system = "grpc",
        rpc.service = "api.Registry",
        rpc.method = method,
        k8s.namespace.name = namespace,
        olm.catalog = name,
        olm.package = tracing::field::Empty,
        olm.csv = tracing::field::Empty,
    )
}

fn requeue_namespace<K: Resource>(
    sender: &mpsc::UnboundedSender<ObjectRef<Namespace>>,
    object: &K,
) {
    if let Some(namespace) = object.meta().namespace.as_deref() {
        let _ = sender.unbounded_send(ObjectRef::new(namespace));
    }
}

fn namespaced_trigger<K>(
    client: &Client,
    readiness: &Readiness,
    sender: &mpsc::UnboundedSender<ObjectRef<Namespace>>,
    config: watcher::Config,
) -> Reflector<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let kind = K::kind(&()).into_owned();
    let sender = sender.clone();
    cache::reflect(
        Api::<K>::all(client.clone()),
        config,
        readiness.gate(format!("cache:{kind}")),
        move |object: &K, _| requeue_namespace(&sender, object),
    )
}

/// How the controllers are run.
#[derive(Clone, Debug)]
pub struct ControllerConfig {
    /// The global catalog namespace: its catalogs serve every namespace.
    pub global_catalog_namespace: String,
    /// Every object is reconciled again after this long (`--interval`).
    pub resync: Duration,
    /// What shapes registry pods.
    pub pod_options: RegistryPodOptions,
    /// How long connecting to a registry and a health check may take.
    pub registry_timeout: Duration,
    /// How often a READY registry is checked again.
    pub ready_recheck: Duration,
    /// Namespaces whose catalogs and InstallPlans are reconciled; empty
    /// means all.
    pub watched_namespaces: Vec<String>,
    /// How long after its start a failing InstallPlan keeps retrying
    /// (`--install-plan-retry-timeout`).
    pub install_plan_retry_timeout: jiff::SignedDuration,
    /// Registries (`host[:port]`) reached over plain HTTP when polling
    /// catalog images.
    pub insecure_registries: Vec<String>,
    /// The allowed-registries policy for catalog images; empty allows all.
    pub allowed_registries: Vec<olm_oci::policy::RegistryRule>,
    /// The hosts a CatalogSource's `spec.address` may name; empty allows
    /// all.
    pub allowed_catalog_addresses: Vec<olm_oci::policy::RegistryRule>,
    /// How a registry address naming a Service is dialled
    /// (`--service-lookup`); status keeps reporting the DNS name either
    /// way.
    pub service_lookup: ServiceLookup,
    /// Where the promotion guard reads a guarded catalog's new content
    /// from (the update pod's IP, except in tests).
    pub content_dial: ContentDial,
}

impl ControllerConfig {
    /// Whether catalogs of `namespace` are reconciled.
    pub fn watches(&self, namespace: &str) -> bool {
        olm_runtime::controller::watches(&self.watched_namespaces, namespace)
    }
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            global_catalog_namespace: "olm".to_owned(),
            resync: DEFAULT_RESYNC,
            pod_options: RegistryPodOptions::default(),
            registry_timeout: Duration::from_secs(5),
            ready_recheck: READY_RECHECK,
            watched_namespaces: Vec::new(),
            install_plan_retry_timeout: crate::decide::install_plan::DEFAULT_RETRY_TIMEOUT,
            insecure_registries: Vec::new(),
            allowed_registries: Vec::new(),
            allowed_catalog_addresses: Vec::new(),
            service_lookup: ServiceLookup::Dns,
            content_dial: ContentDial::PodIp,
        }
    }
}

/// The caches every reconcile reads.
#[derive(Clone)]
pub(crate) struct Caches {
    pub(crate) catalogs: Store<CatalogSource>,
    pub(crate) namespaces: Store<Namespace>,
    pub(crate) pods: Store<Pod>,
    pub(crate) services: Store<Service>,
    pub(crate) service_accounts: Store<ServiceAccount>,
    pub(crate) network_policies: Store<NetworkPolicy>,
    pub(crate) install_plans: Store<InstallPlan>,
    pub(crate) subscriptions: Store<Subscription>,
    pub(crate) csvs: Store<ClusterServiceVersion>,
    pub(crate) operator_groups: Store<OperatorGroup>,
    /// The metadata of the ConfigMaps bundle-unpacker stores bundle content
    /// (or an unpack failure) in.
    pub(crate) unpacked: Store<PartialObjectMeta<ConfigMap>>,
}

/// What every reconcile shares.
pub(crate) struct Context {
    pub(crate) client: Client,
    /// The client plans are carried out with (when no service account is
    /// impersonated): it counts API warnings.
    pub(crate) plan_client: Client,
    pub(crate) config: ControllerConfig,
    pub(crate) caches: Caches,
    pub(crate) connections: Connections,
    pub(crate) snapshots: snapshots::Snapshots,
    pub(crate) recorder: olm_runtime::events::EventRecorder,
    pub(crate) bus: Bus,
    pub(crate) metrics: crate::metrics::CatalogMetrics,
    /// The cluster's version, for `olm.catalogImageTemplate`.
    pub(crate) kube_version: KubeVersion,
    /// The promotion guard's memory of each guarded catalog.
    pub(crate) guard: promotion::Memory,
}

impl Context {
    /// Writes the status a rule decided for `object` when it differs from
    /// the `stored` one, as catalog-operator: a status the API server
    /// refuses is written in its minimal form instead, with a
    /// `StatusRejected` event (ARCHITECTURE rule 4,
    /// [`olm_runtime::apply::write_status`]). Returns whether it wrote.
    pub(crate) async fn write_status<K, S>(
        &self,
        object: &K,
        stored: Option<&S>,
        status: &S,
    ) -> Result<bool, crate::Error>
    where
        K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + std::fmt::Debug
            + DeserializeOwned,
        S: serde::Serialize + olm_api::status::MinimalStatus + PartialEq + Default,
    {
        let unchanged = match stored {
            Some(stored) => stored == status,
            None => *status == S::default(),
        };
        if unchanged {
            return Ok(false);
        }
        let namespace = object.meta().namespace.as_deref().unwrap_or_default();
        let api: kube::Api<K> = kube::Api::namespaced(self.client.clone(), namespace);
        olm_runtime::apply::write_status(
            &api,
            &FIELD_MANAGER,
            object,
            status,
            Some(&self.recorder),
        )
        .await?;
        Ok(true)
    }
}

/// The catalog a managed registry object belongs to: its
/// `olm.catalogSource` label, else its CatalogSource owner.
fn catalog_of<K: Resource>(object: &K) -> Option<ObjectRef<CatalogSource>> {
    let namespace = object.meta().namespace.as_deref()?;
    if let Some(name) = object
        .meta()
        .labels
        .as_ref()
        .and_then(|l| l.get(labels::CATALOG_SOURCE))
        .filter(|n| !n.is_empty())
    {
        return Some(ObjectRef::new(name).within(namespace));
    }
    object
        .meta()
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.kind == "CatalogSource")
        .map(|o| ObjectRef::new(&o.name).within(namespace))
}

fn managed<K>(
    client: &Client,
    readiness: &Readiness,
    sender: &mpsc::UnboundedSender<ObjectRef<CatalogSource>>,
) -> Reflector<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let kind = K::kind(&()).into_owned();
    let sender = sender.clone();
    cache::reflect(
        Api::<K>::all(client.clone()),
        watcher::Config::default().labels(&format!(
            "{}={}",
            labels::MANAGED,
            labels::MANAGED_VALUE
        )),
        readiness.gate(format!("cache:{kind}")),
        move |object: &K, _| {
            if let Some(catalog) = catalog_of(object) {
                let _ = sender.unbounded_send(catalog);
            }
        },
    )
}

/// Reads the cluster version for image templates; an unreadable version
/// leaves the placeholders unresolved (and says so in the conditions).
async fn kube_version(client: &Client) -> KubeVersion {
    match client.apiserver_version().await {
        Ok(info) => KubeVersion::from_version_info(&info.major, &info.minor, &info.git_version),
        Err(error) => {
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                "cannot read the API server version; catalog image templates stay unresolved"
            );
            KubeVersion::default()
        }
    }
}

/// Runs catalog-operator's controllers until `shutdown` is cancelled.
/// Readiness gates named `cache:<Kind>` are set as each cache fills; no
/// reconcile starts before all of them are.
pub async fn run(
    kube_config: kube::Config,
    config: ControllerConfig,
    metrics: crate::metrics::CatalogMetrics,
    bus: Bus,
    readiness: Readiness,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let client = Client::try_from(kube_config.clone())?;
    let kube_version = kube_version(&client).await;
    let (catalog_tx, catalog_rx) = mpsc::unbounded::<ObjectRef<CatalogSource>>();
    let (ns_tx, ns_rx) = mpsc::unbounded::<ObjectRef<Namespace>>();
    let connections = Connections::new(AddressResolver::new(config.service_lookup, client.clone()));
    let guard = promotion::Memory::default();

    let catalogs = {
        let tx = catalog_tx.clone();
        let connections = connections.clone();
        let guard = guard.clone();
        let ns_tx = ns_tx.clone();
        let global = config.global_catalog_namespace.clone();
        let metrics = metrics.clone();
        cache::reflect(
            Api::<CatalogSource>::all(client.clone()),
            watcher::Config::default(),
            readiness.gate("cache:CatalogSource"),
            move |catalog: &CatalogSource, change| {
                if change == cache::Change::Deleted {
                    let namespace = catalog.metadata.namespace.as_deref().unwrap_or_default();
                    connections.forget(namespace, &catalog.name_any());
                    guard.forget(catalog);
                    metrics.catalog_deleted(namespace, &catalog.name_any());
                }
                let _ = tx.unbounded_send(ObjectRef::from_obj(catalog));
                // A catalog's health or content changed: resolve again where
                // it is visible (everywhere, for the global namespace).
                let namespace = catalog.metadata.namespace.clone().unwrap_or_default();
                if namespace == global {
                    let _ = ns_tx.unbounded_send(ObjectRef::new(ALL_NAMESPACES));
                } else {
                    let _ = ns_tx.unbounded_send(ObjectRef::new(&namespace));
                }
            },
        )
    };
    let namespaces = {
        let tx = catalog_tx.clone();
        let catalogs = catalogs.store.clone();
        cache::reflect(
            Api::<Namespace>::all(client.clone()),
            watcher::Config::default(),
            readiness.gate("cache:Namespace"),
            move |namespace: &Namespace, _| {
                // The pod security level of a namespace shapes its registry pods.
                let name = namespace.name_any();
                for catalog in catalogs.state() {
                    if catalog.metadata.namespace.as_deref() == Some(name.as_str()) {
                        let _ = tx.unbounded_send(ObjectRef::from_obj(catalog.as_ref()));
                    }
                }
            },
        )
    };
    let (plan_tx, plan_rx) = mpsc::unbounded::<ObjectRef<InstallPlan>>();
    let install_plans = {
        let tx = plan_tx.clone();
        let ns_tx = ns_tx.clone();
        cache::reflect(
            Api::<InstallPlan>::all(client.clone()),
            watcher::Config::default(),
            readiness.gate("cache:InstallPlan"),
            move |plan: &InstallPlan, _| {
                let _ = tx.unbounded_send(ObjectRef::from_obj(plan));
                requeue_namespace(&ns_tx, plan);
            },
        )
    };
    // Bundle content arriving wakes the plans waiting for it. Only the
    // metadata is watched: the content is read when a plan needs it.
    let unpacked = {
        let tx = plan_tx.clone();
        let plans = install_plans.store.clone();
        cache::reflect(
            Api::<PartialObjectMeta<ConfigMap>>::all(client.clone()),
            watcher::Config::default().labels(labels::BUNDLE_UNPACK_REF),
            readiness.gate("cache:UnpackedBundle"),
            move |config_map: &PartialObjectMeta<ConfigMap>, _| {
                let namespace = config_map.metadata.namespace.as_deref().unwrap_or_default();
                let Some(image) = config_map
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(olm_catalog::unpacked::SOURCE_IMAGE))
                else {
                    return;
                };
                for plan in plans.state() {
                    if crate::decide::install_plan::waits_for_bundle(&plan, namespace, image) {
                        let _ = tx.unbounded_send(ObjectRef::from_obj(plan.as_ref()));
                    }
                }
            },
        )
    };
    let subscriptions =
        namespaced_trigger::<Subscription>(&client, &readiness, &ns_tx, watcher::Config::default());
    let csvs = namespaced_trigger::<ClusterServiceVersion>(
        &client,
        &readiness,
        &ns_tx,
        watcher::Config::default().labels(&format!("!{}", labels::COPIED_FROM)),
    );
    let operator_groups = namespaced_trigger::<OperatorGroup>(
        &client,
        &readiness,
        &ns_tx,
        watcher::Config::default(),
    );
    let pods = managed::<Pod>(&client, &readiness, &catalog_tx);
    let services = managed::<Service>(&client, &readiness, &catalog_tx);
    let service_accounts = managed::<ServiceAccount>(&client, &readiness, &catalog_tx);
    let network_policies = managed::<NetworkPolicy>(&client, &readiness, &catalog_tx);

    let caches = Caches {
        catalogs: catalogs.store.clone(),
        namespaces: namespaces.store.clone(),
        pods: pods.store.clone(),
        services: services.store.clone(),
        service_accounts: service_accounts.store.clone(),
        network_policies: network_policies.store.clone(),
        install_plans: install_plans.store.clone(),
        subscriptions: subscriptions.store.clone(),
        csvs: csvs.store.clone(),
        operator_groups: operator_groups.store.clone(),
        unpacked: unpacked.store.clone(),
    };
    let context = Arc::new(Context {
        client: client.clone(),
        plan_client: install_plan::counting_warnings(kube_config, metrics.clone())?,
        config,
        caches,
        connections,
        snapshots: snapshots::Snapshots::default(),
        recorder: olm_runtime::events::EventRecorder::new(client.clone(), "catalog-operator", None),
        bus,
        metrics,
        kube_version,
        guard,
    });

    let reflector_tasks = futures::future::join_all([
        catalogs.task,
        namespaces.task,
        pods.task,
        services.task,
        service_accounts.task,
        network_policies.task,
        install_plans.task,
        subscriptions.task,
        csvs.task,
        operator_groups.task,
        unpacked.task,
    ]);

    let controllers = {
        let readiness = readiness.clone();
        let shutdown = shutdown.clone();
        let context = context.clone();
        async move {
            let caches_warm = async {
                while !readiness.is_ready() {
                    tokio::time::sleep(CACHE_POLL).await;
                }
            };
            tokio::select! {
                () = caches_warm => {}
                () = shutdown.cancelled() => return,
            }
            tracing::info!("caches warm; starting controllers");
            for catalog in context.caches.catalogs.state() {
                let _ = catalog_tx.unbounded_send(ObjectRef::from_obj(catalog.as_ref()));
            }
            let _ = ns_tx.unbounded_send(ObjectRef::new(ALL_NAMESPACES));
            for plan in context.caches.install_plans.state() {
                let _ = plan_tx.unbounded_send(ObjectRef::from_obj(plan.as_ref()));
            }
            let metrics = &context.metrics;
            let catalog_loop = Controller::new(metrics.catalog_source_reconciles.clone()).run(
                context.caches.catalogs.clone(),
                in_watched_namespaces(context.config.watched_namespaces.clone(), catalog_rx),
                context.clone(),
                catalog_source::reconcile,
                shutdown.clone(),
            );
            let plan_loop = Controller::new(metrics.install_plan_reconciles.clone())
                .span(install_plan::span)
                .run(
                    context.caches.install_plans.clone(),
                    in_watched_namespaces(context.config.watched_namespaces.clone(), plan_rx),
                    context.clone(),
                    install_plan::reconcile,
                    shutdown.clone(),
                );
            let wanted = context.config.clone();
            let subscriptions = context.caches.subscriptions.clone();
            let namespaces = ns_rx
                .flat_map(move |r| {
                    // The global catalog namespace changed: every namespace
                    // with a Subscription resolves again.
                    let names: Vec<String> = if r.name == ALL_NAMESPACES {
                        let mut names: Vec<String> = subscriptions
                            .state()
                            .iter()
                            .filter_map(|s| s.metadata.namespace.clone())
                            .collect();
                        names.sort();
                        names.dedup();
                        names
                    } else {
                        vec![r.name]
                    };
                    futures::stream::iter(names)
                })
                .filter(move |name| std::future::ready(wanted.watches(name)))
                .map(|name| ObjectRef::new(&name));
            let namespace_loop = Controller::new(metrics.resolution_reconciles.clone())
                .span(subscription::span)
                .debounce(RESOLVE_DEBOUNCE)
                .run(
                    context.caches.namespaces.clone(),
                    namespaces,
                    context.clone(),
                    subscription::reconcile,
                    shutdown.clone(),
                );
            futures::join!(catalog_loop, plan_loop, namespace_loop);
        }
    };

    tokio::select! {
        () = controllers => {}
        _ = reflector_tasks => {}
    }
    Ok(())
}
