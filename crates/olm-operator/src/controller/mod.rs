//! The service wiring: watches and caches, the reconcilers, and what they do
//! to the cluster.
//!
//! Every reconcile follows the same pipeline: **dereference** (read the
//! object's surroundings from the caches), **decide** (the pure functions of
//! [`crate::decide`]), **act** (server-side apply with the `olm-operator` field
//! manager, deletions, status, events). Only the act part touches the client.
//!
//! Controllers: ClusterServiceVersions (lifecycle, OperatorCondition
//! generation, per-API roles, adoption), their copies and target-namespace
//! RBAC (keyed by the parent CSV and debounced by [`COPY_DEBOUNCE`]),
//! OperatorGroups (targets, aggregated roles, provided APIs),
//! OperatorConditions (RBAC, status), the `cluster` OLMConfig
//! (`DisabledCopiedCSVs`), and Operator objects (`status.components`).
//!
//! Caches: CSVs (copies excluded with `!olm.copiedFrom`), copies (a
//! metadata-only watch on `olm.copiedFrom`, kept as small records in
//! [`copies::CopyIndex`]),
//! OperatorGroups, OperatorConditions, Subscriptions, Operators, the
//! OLMConfig, Namespaces, CRDs, and the Deployments, ServiceAccounts, Roles,
//! RoleBindings, ClusterRoles and ClusterRoleBindings OLM manages
//! (`olm.managed=true`, as upstream filters them). Managed fields are dropped
//! from every cached object, and CRDs are cached without their OpenAPI
//! schemas ([`trim_crd`]). A change to a managed object requeues the CSV
//! named by its owner labels; a change to an OperatorGroup requeues the CSVs
//! of its namespace; a change to a CRD requeues the CSVs that own or require
//! it; a change to a Namespace requeues every OperatorGroup and every CSV's
//! copies. Metadata-only watches on `olm.managed` Secrets, webhook
//! configurations and APIServices wake the CSV named by their owner labels
//! (see `serving`). No reconcile runs before every cache has delivered its first
//! list, and `/readyz` says so. Subscriptions are cached trimmed and wake
//! their CSVs only when their config or CSV names change
//! ([`subscriptions`]); every Role, RoleBinding, ClusterRole and
//! ClusterRoleBinding is also watched, metadata-only and uncached, to retry
//! installs the API server refused ([`scoped`]).

use olm_runtime::cache as caches;
mod copies;
mod csv;
mod events;
mod install;
mod olm_config;
mod operator;
mod operator_condition;
mod operator_group;
mod scoped;
mod serving;
mod subscriptions;
mod targets;

use std::{sync::Arc, time::Duration};

use futures::{StreamExt, channel::mpsc};
use k8s_openapi::{
    api::{
        apps::v1::Deployment,
        core::v1::{Namespace, ServiceAccount},
        rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding},
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client, Resource, ResourceExt,
    core::PartialObjectMeta,
    runtime::{
        WatchStreamExt,
        reflector::{ObjectRef, Store},
        watcher,
    },
};
use olm_api::{
    csv::ClusterServiceVersion, labels, olm_config::OLMConfig, operator::Operator,
    operator_condition::OperatorCondition, operator_group::OperatorGroup,
    subscription::Subscription,
};
use olm_runtime::{
    admin::Readiness,
    apply::FieldManager,
    controller::{Controller, in_watched_namespaces},
};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::{Error, metrics::OperatorMetrics};

/// The field manager of everything olm-operator applies.
pub const FIELD_MANAGER: FieldManager = FieldManager::new("olm-operator");

/// The name olm-operator reports Events under.
pub const EVENT_REPORTER: &str = "olm-operator";

/// Upstream's default resync period (`--interval`).
pub const DEFAULT_RESYNC: Duration = Duration::from_secs(5 * 60);

/// How often the controllers check whether every cache is warm before they
/// start.
const CACHE_POLL: Duration = Duration::from_millis(50);

/// How long the copies of a CSV wait for it to settle: every change of the
/// CSV within this time restarts the wait, so a CSV passing through several
/// phases in quick succession has its copies written once.
pub const COPY_DEBOUNCE: Duration = Duration::from_secs(2);

/// How long the OLMConfig condition waits for copy syncs to settle.
const OLM_CONFIG_DEBOUNCE: Duration = Duration::from_secs(1);

/// How the controllers are run.
#[derive(Clone, Debug)]
pub struct ControllerConfig {
    /// Namespaces whose CSVs and OperatorGroups are reconciled; empty (or
    /// containing `""`) means all namespaces (upstream's
    /// `--watchedNamespaces`).
    pub watched_namespaces: Vec<String>,
    /// Every object is reconciled again after this long (`--interval`).
    pub resync: Duration,
    /// Namespaces that keep copied CSVs of operators installed for all
    /// namespaces even when the `cluster` OLMConfig disables copies
    /// (upstream's `--protectedCopiedCSVNamespaces`).
    pub protected_copied_csv_namespaces: std::collections::BTreeSet<String>,
    /// Lifetimes and thresholds of the serving certificates of owned
    /// APIServices and webhooks.
    pub certificates: olm_certs::RotationPolicy,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            watched_namespaces: Vec::new(),
            resync: DEFAULT_RESYNC,
            protected_copied_csv_namespaces: std::collections::BTreeSet::new(),
            certificates: olm_certs::RotationPolicy::default(),
        }
    }
}

impl ControllerConfig {
    /// The one namespace to watch namespaced objects in, or `None` for all
    /// (several namespaces are watched cluster-wide and filtered).
    fn single_namespace(&self) -> Option<&str> {
        match self.watched_namespaces.as_slice() {
            [only] if !only.is_empty() => Some(only),
            _ => None,
        }
    }

    /// Whether objects of `namespace` are reconciled.
    fn watches(&self, namespace: &str) -> bool {
        olm_runtime::controller::watches(&self.watched_namespaces, namespace)
    }

    fn api<K>(&self, client: &Client) -> Api<K>
    where
        K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
    {
        match self.single_namespace() {
            Some(namespace) => Api::namespaced(client.clone(), namespace),
            None => Api::all(client.clone()),
        }
    }
}

/// The caches every reconcile reads.
#[derive(Clone)]
pub(crate) struct Caches {
    pub(crate) csvs: Store<ClusterServiceVersion>,
    pub(crate) operator_groups: Store<OperatorGroup>,
    pub(crate) namespaces: Store<Namespace>,
    pub(crate) crds: Store<CustomResourceDefinition>,
    pub(crate) deployments: Store<Deployment>,
    pub(crate) service_accounts: Store<ServiceAccount>,
    pub(crate) roles: Store<Role>,
    pub(crate) role_bindings: Store<RoleBinding>,
    pub(crate) cluster_roles: Store<ClusterRole>,
    pub(crate) cluster_role_bindings: Store<ClusterRoleBinding>,
    /// Copied CSVs: where each is, its parent, uid and copy hashes.
    pub(crate) copies: copies::CopyIndex,
    pub(crate) olm_configs: Store<OLMConfig>,
    pub(crate) operator_conditions: Store<OperatorCondition>,
    pub(crate) subscriptions: Store<Subscription>,
    pub(crate) operators: Store<Operator>,
}

/// What every reconcile shares.
pub(crate) struct Context {
    pub(crate) client: Client,
    pub(crate) config: ControllerConfig,
    pub(crate) caches: Caches,
    pub(crate) recorder: events::Events,
    pub(crate) metrics: OperatorMetrics,
    /// The API server's `gitVersion`, for `minKubeVersion`.
    pub(crate) server_version: Option<String>,
    /// Requests to reconcile a CSV (from actions naming another CSV).
    pub(crate) csv_requeue: mpsc::UnboundedSender<ObjectRef<ClusterServiceVersion>>,
    /// Requests to reconcile an OperatorGroup.
    pub(crate) operator_group_requeue: mpsc::UnboundedSender<ObjectRef<OperatorGroup>>,
    /// Requests to reconcile the copies of a CSV.
    pub(crate) copy_requeue: mpsc::UnboundedSender<ObjectRef<ClusterServiceVersion>>,
    /// Requests to compute the OLMConfig condition again.
    pub(crate) olm_config_requeue: mpsc::UnboundedSender<()>,
    /// Requests to compute an Operator's components again, by name.
    pub(crate) operator_requeue: mpsc::UnboundedSender<String>,
}

impl Context {
    /// Writes `status` to `object` as olm-operator: a status the API server
    /// refuses is written in its minimal form instead, with a
    /// `StatusRejected` event (ARCHITECTURE rule 4,
    /// `olm_runtime::apply::write_status`). `what` names the failure.
    pub(crate) async fn write_status<K, S>(
        &self,
        api: &Api<K>,
        object: &K,
        status: &S,
        what: &'static str,
    ) -> Result<(), Error>
    where
        K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + DeserializeOwned,
        S: serde::Serialize + olm_api::status::MinimalStatus,
    {
        olm_runtime::apply::write_status(
            api,
            &FIELD_MANAGER,
            object,
            status,
            Some(self.recorder.recorder()),
        )
        .await
        .map(|_| ())
        .map_err(Error::runtime(what))
    }
}

fn requeue_csvs<'a>(
    sender: &mpsc::UnboundedSender<ObjectRef<ClusterServiceVersion>>,
    csvs: impl IntoIterator<Item = &'a ClusterServiceVersion>,
) {
    for csv in csvs {
        let _ = sender.unbounded_send(ObjectRef::from_obj(csv));
    }
}

/// The CSV named by a managed object's owner labels, if any.
fn owner_of(
    object_labels: &std::collections::BTreeMap<String, String>,
) -> Option<ObjectRef<ClusterServiceVersion>> {
    if object_labels.get(labels::OWNER_KIND).map(String::as_str) != Some("ClusterServiceVersion") {
        return None;
    }
    let name = object_labels.get(labels::OWNER)?;
    let namespace = object_labels.get(labels::OWNER_NAMESPACE)?;
    Some(ObjectRef::new(name).within(namespace))
}

fn managed<K>(
    api: Api<K>,
    readiness: &Readiness,
    sender: &mpsc::UnboundedSender<ObjectRef<ClusterServiceVersion>>,
) -> caches::Reflector<K>
where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let kind = K::kind(&()).into_owned();
    let sender = sender.clone();
    caches::reflect(
        api,
        watcher::Config::default().labels(&format!(
            "{}={}",
            labels::MANAGED,
            labels::MANAGED_VALUE
        )),
        readiness.gate(format!("cache:{kind}")),
        move |object: &K, _| {
            if let Some(owner) = owner_of(object.labels()) {
                let _ = sender.unbounded_send(owner);
            }
        },
    )
}

/// Drops what no reconcile reads of a cached CRD and what makes CRDs large:
/// the managed fields, the `kubectl.kubernetes.io/last-applied-configuration`
/// annotation (the whole CRD again) and every version's OpenAPI schema. (The
/// CSV CRD alone carries a schema of well over half a megabyte.) Reconciles
/// read names, versions, conditions, annotations, labels and the conversion
/// settings; conversion webhooks are written to a CRD read fresh from the API
/// server, never to the cached copy.
fn trim_crd(crd: &mut CustomResourceDefinition) {
    crd.metadata.managed_fields = None;
    if let Some(annotations) = crd.metadata.annotations.as_mut() {
        annotations.remove(labels::KUBECTL_LAST_APPLIED);
    }
    for version in &mut crd.spec.versions {
        version.schema = None;
    }
}

/// Sends every CSV of the store to `sender`.
fn requeue_all(
    sender: &mpsc::UnboundedSender<ObjectRef<ClusterServiceVersion>>,
    csvs: &Store<ClusterServiceVersion>,
) {
    requeue_csvs(sender, csvs.state().iter().map(AsRef::as_ref));
}

/// Runs olm-operator's controllers (ClusterServiceVersions, their copies,
/// OperatorGroups, OperatorConditions, the OLMConfig) until `shutdown` is
/// cancelled. Readiness gates named `cache:<Kind>` are registered in
/// `readiness` and set as each cache is filled; no reconcile starts before
/// all of them are.
pub async fn run(
    client: Client,
    config: ControllerConfig,
    metrics: OperatorMetrics,
    readiness: Readiness,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    let server_version = match client.apiserver_version().await {
        Ok(info) => Some(info.git_version),
        Err(error) => {
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                "cannot read the API server version; minKubeVersion stays unchecked"
            );
            None
        }
    };

    let (csv_tx, csv_rx) = mpsc::unbounded::<ObjectRef<ClusterServiceVersion>>();
    let (og_tx, og_rx) = mpsc::unbounded::<ObjectRef<OperatorGroup>>();
    let (copy_tx, copy_rx) = mpsc::unbounded::<ObjectRef<ClusterServiceVersion>>();
    let (oc_tx, oc_rx) = mpsc::unbounded::<ObjectRef<OperatorCondition>>();
    let (olm_config_tx, olm_config_rx) = mpsc::unbounded::<()>();
    let (operator_tx, operator_rx) = mpsc::unbounded::<String>();

    // CSVs: copies are another informer's (upstream lists with the same
    // selector). Every change wakes the CSV and, debounced, its copies.
    let csv_reflector = {
        let csv_tx = csv_tx.clone();
        let copy_tx = copy_tx.clone();
        caches::reflect(
            config.api::<ClusterServiceVersion>(&client),
            watcher::Config::default().labels(&format!("!{}", labels::COPIED_FROM)),
            readiness.gate("cache:ClusterServiceVersion"),
            move |csv: &ClusterServiceVersion, _| {
                let _ = csv_tx.unbounded_send(ObjectRef::from_obj(csv));
                let _ = copy_tx.unbounded_send(ObjectRef::from_obj(csv));
            },
        )
    };
    let csvs = csv_reflector.store.clone();

    // Copies: metadata only, kept as small records; a copy changed or
    // deleted by someone else wakes its parent, which puts it right.
    let (copies, copies_task) = {
        let copy_tx = copy_tx.clone();
        let stream = watcher(
            Api::<PartialObjectMeta<ClusterServiceVersion>>::all(client.clone()),
            watcher::Config::default().labels(labels::COPIED_FROM),
        )
        .default_backoff();
        copies::index(
            stream,
            readiness.gate("cache:CopiedClusterServiceVersion"),
            move |copy: &PartialObjectMeta<ClusterServiceVersion>, _| {
                if let (Some(name), Some(parent_namespace)) = (
                    copy.metadata.name.as_deref(),
                    copy.labels().get(labels::COPIED_FROM),
                ) {
                    let _ = copy_tx.unbounded_send(ObjectRef::new(name).within(parent_namespace));
                }
            },
        )
    };

    // The groups of a namespace depend on each other (the
    // MultipleOperatorGroup condition), so a change of one wakes the others
    // through the store, which exists only once the reflector does.
    let group_store: Arc<std::sync::OnceLock<Store<OperatorGroup>>> = Arc::default();
    let operator_groups = {
        let csvs = csvs.clone();
        let csv_tx = csv_tx.clone();
        let og_tx = og_tx.clone();
        let client = client.clone();
        let group_store = group_store.clone();
        caches::reflect(
            config.api::<OperatorGroup>(&client),
            watcher::Config::default(),
            readiness.gate("cache:OperatorGroup"),
            move |group: &OperatorGroup, change| {
                if change == caches::Change::Deleted {
                    operator_group::deleted(client.clone(), group);
                }
                let _ = og_tx.unbounded_send(ObjectRef::from_obj(group));
                let namespace = group.metadata.namespace.as_deref();
                for sibling in group_store.get().map(Store::state).unwrap_or_default() {
                    if sibling.metadata.namespace.as_deref() == namespace
                        && sibling.metadata.name != group.metadata.name
                    {
                        let _ = og_tx.unbounded_send(ObjectRef::from_obj(sibling.as_ref()));
                    }
                }
                requeue_csvs(
                    &csv_tx,
                    csvs.state()
                        .iter()
                        .filter(|csv| csv.metadata.namespace.as_deref() == namespace)
                        .map(AsRef::as_ref),
                );
            },
        )
    };
    let _ = group_store.set(operator_groups.store.clone());
    let namespaces = {
        let groups = operator_groups.store.clone();
        let og_tx = og_tx.clone();
        let csvs = csvs.clone();
        let copy_tx = copy_tx.clone();
        caches::reflect(
            Api::<Namespace>::all(client.clone()),
            watcher::Config::default(),
            readiness.gate("cache:Namespace"),
            move |_: &Namespace, _| {
                for group in groups.state() {
                    let _ = og_tx.unbounded_send(ObjectRef::from_obj(group.as_ref()));
                }
                // A namespace appearing or going changes where copies of
                // operators watching all namespaces belong.
                requeue_all(&copy_tx, &csvs);
            },
        )
    };
    let crds = {
        let csvs = csvs.clone();
        let csv_tx = csv_tx.clone();
        let stream = watcher(
            Api::<CustomResourceDefinition>::all(client.clone()),
            watcher::Config::default(),
        )
        .default_backoff()
        .modify(trim_crd);
        caches::reflect_stream(
            stream,
            readiness.gate("cache:CustomResourceDefinition"),
            move |crd: &CustomResourceDefinition, _| {
                let name = crd.metadata.name.as_deref().unwrap_or_default();
                requeue_csvs(
                    &csv_tx,
                    csvs.state()
                        .iter()
                        .filter(|csv| {
                            csv.spec
                                .owned_crds()
                                .iter()
                                .chain(csv.spec.required_crds())
                                .any(|d| d.name == name)
                        })
                        .map(AsRef::as_ref),
                );
            },
        )
    };
    let olm_configs = {
        let csvs = csvs.clone();
        let copy_tx = copy_tx.clone();
        let olm_config_tx = olm_config_tx.clone();
        caches::reflect(
            Api::<OLMConfig>::all(client.clone()),
            watcher::Config::default(),
            readiness.gate("cache:OLMConfig"),
            move |_: &OLMConfig, _| {
                requeue_all(&copy_tx, &csvs);
                let _ = olm_config_tx.unbounded_send(());
            },
        )
    };
    let operator_conditions = {
        let csvs = csvs.clone();
        let csv_tx = csv_tx.clone();
        let oc_tx = oc_tx.clone();
        caches::reflect(
            config.api::<OperatorCondition>(&client),
            watcher::Config::default(),
            readiness.gate("cache:OperatorCondition"),
            move |condition: &OperatorCondition, _| {
                let _ = oc_tx.unbounded_send(ObjectRef::from_obj(condition));
                // A condition gates the CSVs replacing its CSV.
                let namespace = condition.metadata.namespace.as_deref();
                requeue_csvs(
                    &csv_tx,
                    csvs.state()
                        .iter()
                        .filter(|csv| csv.metadata.namespace.as_deref() == namespace)
                        .map(AsRef::as_ref),
                );
            },
        )
    };
    let subscriptions =
        subscriptions::reflector(config.api::<Subscription>(&client), &readiness, &csv_tx);
    let operators = {
        let operator_tx = operator_tx.clone();
        caches::reflect(
            Api::<Operator>::all(client.clone()),
            watcher::Config::default(),
            readiness.gate("cache:Operator"),
            move |operator: &Operator, _| {
                let _ = operator_tx.unbounded_send(operator.name_any());
            },
        )
    };
    let deployments = managed(config.api::<Deployment>(&client), &readiness, &csv_tx);
    let service_accounts = managed(config.api::<ServiceAccount>(&client), &readiness, &csv_tx);
    let roles = managed(config.api::<Role>(&client), &readiness, &csv_tx);
    let role_bindings = managed(config.api::<RoleBinding>(&client), &readiness, &csv_tx);
    let cluster_roles = managed(Api::<ClusterRole>::all(client.clone()), &readiness, &csv_tx);
    let cluster_role_bindings = managed(
        Api::<ClusterRoleBinding>::all(client.clone()),
        &readiness,
        &csv_tx,
    );
    let serving_wakeups = serving::wakeups(&client, config.api(&client), &readiness, &csv_tx);

    let caches = Caches {
        csvs: csvs.clone(),
        operator_groups: operator_groups.store.clone(),
        namespaces: namespaces.store.clone(),
        crds: crds.store.clone(),
        deployments: deployments.store.clone(),
        service_accounts: service_accounts.store.clone(),
        roles: roles.store.clone(),
        role_bindings: role_bindings.store.clone(),
        cluster_roles: cluster_roles.store.clone(),
        cluster_role_bindings: cluster_role_bindings.store.clone(),
        copies,
        olm_configs: olm_configs.store.clone(),
        operator_conditions: operator_conditions.store.clone(),
        subscriptions: subscriptions.store.clone(),
        operators: operators.store.clone(),
    };
    let reflector_tasks = futures::future::join_all([
        csv_reflector.task,
        copies_task,
        operator_groups.task,
        namespaces.task,
        crds.task,
        olm_configs.task,
        operator_conditions.task,
        subscriptions.task,
        operators.task,
        deployments.task,
        service_accounts.task,
        roles.task,
        role_bindings.task,
        cluster_roles.task,
        cluster_role_bindings.task,
    ]);
    let reflector_tasks =
        futures::future::join(reflector_tasks, futures::future::join_all(serving_wakeups));

    let context = Arc::new(Context {
        client: client.clone(),
        config: config.clone(),
        caches: caches.clone(),
        recorder: events::Events::new(client.clone(), EVENT_REPORTER),
        metrics,
        server_version,
        csv_requeue: csv_tx,
        operator_group_requeue: og_tx,
        copy_requeue: copy_tx,
        olm_config_requeue: olm_config_tx,
        operator_requeue: operator_tx,
    });

    let controllers = {
        let readiness = readiness.clone();
        let shutdown = shutdown.clone();
        let context = context.clone();
        async move {
            // Decisions made on half-filled caches would be wrong (a CSV
            // would fail for want of an OperatorGroup not listed yet).
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
            // Everything listed so far gets its first reconcile.
            requeue_all(&context.csv_requeue, &context.caches.csvs);
            requeue_all(&context.copy_requeue, &context.caches.csvs);
            for group in context.caches.operator_groups.state() {
                let _ = context
                    .operator_group_requeue
                    .unbounded_send(ObjectRef::from_obj(group.as_ref()));
            }
            for condition in context.caches.operator_conditions.state() {
                let _ = oc_tx.unbounded_send(ObjectRef::from_obj(condition.as_ref()));
            }
            let _ = context.olm_config_requeue.unbounded_send(());

            let config = &context.config;
            let metrics = &context.metrics;
            let csv_loop = Controller::new(metrics.csv_reconciles.clone())
                .span(csv::span)
                .run(
                    context.caches.csvs.clone(),
                    in_watched_namespaces(config.watched_namespaces.clone(), csv_rx),
                    context.clone(),
                    csv::reconcile,
                    shutdown.clone(),
                );
            let copy_loop = Controller::new(metrics.target_reconciles.clone())
                .debounce(COPY_DEBOUNCE)
                .run(
                    context.caches.csvs.clone(),
                    in_watched_namespaces(config.watched_namespaces.clone(), copy_rx),
                    context.clone(),
                    targets::reconcile,
                    shutdown.clone(),
                );
            let og_loop = Controller::new(metrics.operator_group_reconciles.clone()).run(
                context.caches.operator_groups.clone(),
                in_watched_namespaces(config.watched_namespaces.clone(), og_rx),
                context.clone(),
                operator_group::reconcile,
                shutdown.clone(),
            );
            let oc_loop = Controller::new(metrics.operator_condition_reconciles.clone()).run(
                context.caches.operator_conditions.clone(),
                in_watched_namespaces(config.watched_namespaces.clone(), oc_rx),
                context.clone(),
                operator_condition::reconcile,
                shutdown.clone(),
            );
            let olm_config_loop = Controller::new(metrics.olm_config_reconciles.clone())
                .debounce(OLM_CONFIG_DEBOUNCE)
                .run(
                    context.caches.olm_configs.clone(),
                    olm_config_rx.map(|()| ObjectRef::new(olm_api::olm_config::OLM_CONFIG_NAME)),
                    context.clone(),
                    olm_config::reconcile,
                    shutdown.clone(),
                );
            let operator_loop = Controller::new(metrics.operator_reconciles.clone())
                .debounce(COPY_DEBOUNCE)
                .run(
                    context.caches.operators.clone(),
                    operator_rx.map(|name| ObjectRef::new(&name)),
                    context.clone(),
                    operator::reconcile,
                    shutdown.clone(),
                );
            let sweep = sweep_dangling_copies(context.clone(), shutdown.clone());
            let rbac_retries = scoped::retry_on_rbac_changes(context.clone(), shutdown.clone());
            futures::join!(
                csv_loop,
                copy_loop,
                og_loop,
                oc_loop,
                olm_config_loop,
                operator_loop,
                sweep,
                rbac_retries
            );
        }
    };

    // The controllers end once `shutdown` is cancelled and their running
    // reconciles have finished; the watches never end on their own.
    tokio::select! {
        () = controllers => {}
        _ = reflector_tasks => {}
    }
    Ok(())
}

/// Every resync period, deletes the copies whose parent (in a watched
/// namespace) no longer exists: the copy controller is keyed by parents, so a
/// parent deleted while this service was down leaves its copies to this
/// sweep (upstream's `removeDanglingChildCSVs` on copy informer resyncs).
async fn sweep_dangling_copies(context: Arc<Context>, shutdown: CancellationToken) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(context.config.resync) => {}
            () = shutdown.cancelled() => return,
        }
        let dangling = context.caches.copies.filter(|_, name, parent_namespace| {
            context.config.watches(parent_namespace)
                && context
                    .caches
                    .csvs
                    .get(&ObjectRef::new(name).within(parent_namespace))
                    .is_none()
        });
        for copy in dangling {
            let (name, namespace) = (copy.name.as_str(), copy.namespace.as_str());
            tracing::info!(namespace, name, "deleting copied csv whose parent is gone");
            let api: Api<ClusterServiceVersion> =
                Api::namespaced(context.client.clone(), namespace);
            if let Err(error) = olm_runtime::apply::delete_if_exists(&api, name).await {
                tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    "cannot delete copied csv"
                );
            }
        }
    }
}
