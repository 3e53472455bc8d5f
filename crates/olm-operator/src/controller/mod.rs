//! The service wiring: watches and caches, the ClusterServiceVersion and
//! OperatorGroup reconcilers, and what they do to the cluster.
//!
//! Every reconcile follows the same pipeline: **dereference** (read the CSV's
//! surroundings from the caches), **decide** (the pure functions of
//! [`crate::decide`]), **act** (server-side apply with the `olm-operator` field
//! manager, deletions, status, events). Only the act part touches the client.
//!
//! Caches: CSVs (copies excluded with `!olm.copiedFrom`), OperatorGroups,
//! Namespaces, CRDs, and the Deployments, ServiceAccounts, Roles, RoleBindings,
//! ClusterRoles and ClusterRoleBindings OLM manages (`olm.managed=true`, as
//! upstream filters them). A change to a managed object requeues the CSV named
//! by its owner labels; a change to an OperatorGroup requeues the CSVs of its
//! namespace; a change to a CRD requeues the CSVs that own or require it; a
//! change to a Namespace requeues every OperatorGroup. No reconcile runs before
//! every cache has delivered its first list, and `/readyz` says so.

mod caches;
mod csv;
mod events;
mod install;
mod operator_group;

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
    runtime::{
        self, applier,
        reflector::{ObjectRef, Store},
        watcher,
    },
};
use olm_api::{csv::ClusterServiceVersion, labels, operator_group::OperatorGroup};
use olm_runtime::{admin::Readiness, apply::FieldManager};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::{Error, metrics::OperatorMetrics};

/// The field manager of everything olm-operator applies.
pub const FIELD_MANAGER: FieldManager = FieldManager::new("olm-operator");

/// The name olm-operator reports Events under.
pub const EVENT_REPORTER: &str = "olm-operator";

/// Upstream's default resync period (`--interval`).
pub const DEFAULT_RESYNC: Duration = Duration::from_secs(5 * 60);

/// The first delay of a failing reconcile; doubled on every further failure.
pub const RETRY_BACKOFF_BASE: Duration = Duration::from_millis(500);

/// The longest delay between retries of a failing reconcile.
pub const RETRY_BACKOFF_CAP: Duration = Duration::from_secs(60);

/// How often the controllers check whether every cache is warm before they
/// start.
const CACHE_POLL: Duration = Duration::from_millis(50);

/// How the controllers are run.
#[derive(Clone, Debug)]
pub struct ControllerConfig {
    /// Namespaces whose CSVs and OperatorGroups are reconciled; empty (or
    /// containing `""`) means all namespaces (upstream's
    /// `--watchedNamespaces`).
    pub watched_namespaces: Vec<String>,
    /// Every object is reconciled again after this long (`--interval`).
    pub resync: Duration,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            watched_namespaces: Vec::new(),
            resync: DEFAULT_RESYNC,
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
        self.watched_namespaces.is_empty()
            || self
                .watched_namespaces
                .iter()
                .any(|ns| ns.is_empty() || ns == namespace)
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
    /// Consecutive failures per object, for capped exponential backoff.
    pub(crate) failures: std::sync::Mutex<std::collections::HashMap<String, u32>>,
}

impl Context {
    /// The delay before retrying `key` after one more failure.
    pub(crate) fn backoff(&self, key: String) -> Duration {
        let mut failures = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = failures.entry(key).or_insert(0);
        *count = count.saturating_add(1);
        let factor = 2u32.saturating_pow(count.saturating_sub(1).min(16));
        RETRY_BACKOFF_BASE
            .saturating_mul(factor)
            .min(RETRY_BACKOFF_CAP)
    }

    /// Forgets the failures of `key` after a successful reconcile.
    pub(crate) fn succeeded(&self, key: &str) {
        self.failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(key);
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
        move |object: &K| {
            if let Some(owner) = owner_of(object.labels()) {
                let _ = sender.unbounded_send(owner);
            }
        },
    )
}

/// Runs the ClusterServiceVersion and OperatorGroup controllers until
/// `shutdown` is cancelled. Readiness gates named `cache:<Kind>` are
/// registered in `readiness` and set as each cache is filled; no reconcile
/// starts before all of them are.
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

    // CSVs: copies are another informer's (upstream lists with the same
    // selector).
    let csv_reflector = {
        let csv_tx = csv_tx.clone();
        caches::reflect(
            config.api::<ClusterServiceVersion>(&client),
            watcher::Config::default().labels(&format!("!{}", labels::COPIED_FROM)),
            readiness.gate("cache:ClusterServiceVersion"),
            move |csv: &ClusterServiceVersion| {
                let _ = csv_tx.unbounded_send(ObjectRef::from_obj(csv));
            },
        )
    };
    let csvs = csv_reflector.store.clone();

    let operator_groups = {
        let csvs = csvs.clone();
        let csv_tx = csv_tx.clone();
        let og_tx = og_tx.clone();
        caches::reflect(
            config.api::<OperatorGroup>(&client),
            watcher::Config::default(),
            readiness.gate("cache:OperatorGroup"),
            move |group: &OperatorGroup| {
                let _ = og_tx.unbounded_send(ObjectRef::from_obj(group));
                let namespace = group.metadata.namespace.as_deref();
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
    let namespaces = {
        let groups = operator_groups.store.clone();
        let og_tx = og_tx.clone();
        caches::reflect(
            Api::<Namespace>::all(client.clone()),
            watcher::Config::default(),
            readiness.gate("cache:Namespace"),
            move |_: &Namespace| {
                for group in groups.state() {
                    let _ = og_tx.unbounded_send(ObjectRef::from_obj(group.as_ref()));
                }
            },
        )
    };
    let crds = {
        let csvs = csvs.clone();
        let csv_tx = csv_tx.clone();
        caches::reflect(
            Api::<CustomResourceDefinition>::all(client.clone()),
            watcher::Config::default(),
            readiness.gate("cache:CustomResourceDefinition"),
            move |crd: &CustomResourceDefinition| {
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
    };
    let reflector_tasks = futures::future::join_all([
        csv_reflector.task,
        operator_groups.task,
        namespaces.task,
        crds.task,
        deployments.task,
        service_accounts.task,
        roles.task,
        role_bindings.task,
        cluster_roles.task,
        cluster_role_bindings.task,
    ]);

    let context = Arc::new(Context {
        client: client.clone(),
        config: config.clone(),
        caches: caches.clone(),
        recorder: events::Events::new(client.clone(), EVENT_REPORTER),
        metrics,
        server_version,
        csv_requeue: csv_tx,
        operator_group_requeue: og_tx,
        failures: std::sync::Mutex::default(),
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
            requeue_csvs(
                &context.csv_requeue,
                context.caches.csvs.state().iter().map(AsRef::as_ref),
            );
            for group in context.caches.operator_groups.state() {
                let _ = context
                    .operator_group_requeue
                    .unbounded_send(ObjectRef::from_obj(group.as_ref()));
            }

            let csv_loop = applier(
                |csv, context| Box::pin(csv::reconcile(csv, context)),
                csv::error_policy,
                context.clone(),
                context.caches.csvs.clone(),
                csv_rx
                    .map(Ok::<_, std::convert::Infallible>)
                    .take_until(shutdown.clone().cancelled_owned()),
                runtime::Config::default(),
            )
            .for_each(|result| async move {
                if let Err(error) = result {
                    tracing::debug!(error = %error, "csv controller");
                }
            });
            let og_loop = applier(
                |group, context| Box::pin(operator_group::reconcile(group, context)),
                operator_group::error_policy,
                context.clone(),
                context.caches.operator_groups.clone(),
                og_rx
                    .map(Ok::<_, std::convert::Infallible>)
                    .take_until(shutdown.clone().cancelled_owned()),
                runtime::Config::default(),
            )
            .for_each(|result| async move {
                if let Err(error) = result {
                    tracing::debug!(error = %error, "operatorgroup controller");
                }
            });
            futures::join!(csv_loop, og_loop);
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
