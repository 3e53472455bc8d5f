//! Scoped installs, carried out: the client a CSV is installed with (OLM's
//! own, or one impersonating the OperatorGroup's ServiceAccount), the
//! group's `serviceAccountRef`/conditions, the `olm.operatorgroup.uid/<uid>`
//! namespace labels, and the retry of installs the API server refused once
//! RBAC changes.
//!
//! The rules are in [`crate::decide::scoped`]; this module only reads the
//! caches and talks to the API server.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use futures::{StreamExt, channel::mpsc};
use jiff::Timestamp;
use k8s_openapi::api::{
    core::v1::{Namespace, ServiceAccount},
    rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding},
};
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{ListParams, Patch, PatchParams},
    core::PartialObjectMeta,
    runtime::{WatchStreamExt, reflector::ObjectRef, watcher},
};
use olm_api::{
    csv::{ClusterServiceVersion, CsvReason},
    labels,
    operator_group::OperatorGroup,
};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use super::Context;
use crate::{
    Error,
    decide::{
        csv_phase::detected_cluster_change,
        csv_status,
        scoped::{
            IdentityUnavailable, ServiceAccountLookup, namespace_group_labels,
            namespace_label_patch, requested_service_account, service_account_reference,
        },
    },
};

/// The client the CSV's install strategy (ServiceAccounts, RBAC,
/// Deployments) is carried out with: OLM's own, or, when the namespace's
/// OperatorGroup names a `serviceAccountName`, one impersonating it.
pub(crate) fn install_client(
    context: &Context,
    csv: &ClusterServiceVersion,
) -> Result<Client, IdentityUnavailable> {
    let namespace = csv.metadata.namespace.as_deref().unwrap_or_default();
    let groups = context.caches.operator_groups.state();
    olm_runtime::impersonation::install_client(
        &context.client,
        namespace,
        groups.iter().map(AsRef::as_ref),
    )
    .map(|(client, _)| client)
}

/// Looks up the group's ServiceAccount (uncached: until OLM labels it, the
/// filtered ServiceAccount cache does not hold it) and labels it
/// `olm.managed=true` once found, as upstream does.
pub(crate) async fn lookup_service_account(
    context: &Context,
    group: &OperatorGroup,
) -> Result<ServiceAccountLookup, Error> {
    let Some(name) = requested_service_account(group) else {
        return Ok(ServiceAccountLookup::NotRequested);
    };
    let namespace = group.metadata.namespace.clone().unwrap_or_default();
    let api: Api<ServiceAccount> = Api::namespaced(context.client.clone(), &namespace);
    let kube_error = |action| {
        let name = format!("{namespace}/{name}");
        move |source| Error::Kube {
            action,
            kind: "ServiceAccount",
            name,
            source: Box::new(source),
        }
    };
    let Some(mut account) = api
        .get_opt(name)
        .await
        .map_err(kube_error("get operatorgroup service account"))?
    else {
        return Ok(ServiceAccountLookup::NotFound);
    };
    if account.labels().get(labels::MANAGED).map(String::as_str) != Some(labels::MANAGED_VALUE) {
        let patch = serde_json::json!({
            "metadata": { "labels": { labels::MANAGED: labels::MANAGED_VALUE } }
        });
        account = api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(kube_error("label operatorgroup service account"))?;
    }
    Ok(ServiceAccountLookup::Found(service_account_reference(
        &namespace,
        name,
        account.metadata.uid.as_deref(),
        account.metadata.resource_version.as_deref(),
    )))
}

/// Moves the CSVs that failed with `InstallComponentFailedNoRetry` (and
/// match `which`) back to Pending, reason `DetectedClusterChange`, so their
/// install is tried again.
pub(crate) async fn retry_forbidden_installs(
    context: &Context,
    which: impl Fn(&ClusterServiceVersion) -> bool,
) {
    let now = Timestamp::now();
    for csv in context.caches.csvs.state() {
        let namespace = csv.metadata.namespace.clone().unwrap_or_default();
        if !context.config.watches(&namespace) || !which(&csv) {
            continue;
        }
        let status = csv.status.clone().unwrap_or_default();
        if csv_status::reason_of(&status) != CsvReason::INSTALL_COMPONENT_FAILED_NO_RETRY {
            continue;
        }
        let Some(status) = detected_cluster_change(&csv, now) else {
            continue;
        };
        tracing::info!(
            namespace,
            name = csv.name_any(),
            "cluster resources changed; retrying a forbidden install"
        );
        let api: Api<ClusterServiceVersion> = Api::namespaced(context.client.clone(), &namespace);
        if let Err(error) = context
            .write_status(&api, &csv, &status, "cannot move a csv back to pending")
            .await
        {
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                "cannot move a csv back to pending"
            );
            continue;
        }
        let _ = context
            .csv_requeue
            .unbounded_send(ObjectRef::from_obj(csv.as_ref()));
    }
}

/// Watches (metadata only, nothing cached) Roles, RoleBindings,
/// ClusterRoles and ClusterRoleBindings, and retries the forbidden installs
/// of the namespace (or of every namespace, for cluster-scoped RBAC) an
/// object was created, changed or deleted in: granting a ServiceAccount
/// what it lacked is how an administrator fixes a scoped install.
///
/// Upstream retries on changes of the Roles, RoleBindings and
/// ServiceAccounts it manages only, so an administrator's own grant was
/// noticed at the next OperatorGroup resync at best.
pub(crate) async fn retry_on_rbac_changes(context: Arc<Context>, shutdown: CancellationToken) {
    let (tx, mut rx) = mpsc::unbounded::<Option<String>>();
    let client = context.client.clone();
    let namespace = context.config.single_namespace();
    let watches = futures::future::join4(
        changes::<Role>(namespaced_meta(&client, namespace), tx.clone()),
        changes::<RoleBinding>(namespaced_meta(&client, namespace), tx.clone()),
        changes::<ClusterRole>(Api::all(client.clone()), tx.clone()),
        changes::<ClusterRoleBinding>(Api::all(client.clone()), tx),
    );
    let retries = async {
        while let Some(first) = rx.next().await {
            // A burst of RBAC changes (an install applies several at once)
            // is one scan: everything queued by now is handled together.
            let mut namespaces = BTreeSet::from([first]);
            while let Ok(more) = rx.try_recv() {
                namespaces.insert(more);
            }
            let everywhere = namespaces.contains(&None);
            retry_forbidden_installs(&context, |csv| {
                everywhere || namespaces.contains(&csv.metadata.namespace)
            })
            .await;
        }
    };
    tokio::select! {
        _ = watches => {}
        () = retries => {}
        () = shutdown.cancelled() => {}
    }
}

fn namespaced_meta<K>(client: &Client, namespace: Option<&str>) -> Api<PartialObjectMeta<K>>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    match namespace {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    }
}

/// Sends the namespace (`None` for cluster-scoped objects) of every created,
/// changed or deleted object of `api`; the initial list is not a change.
async fn changes<K>(api: Api<PartialObjectMeta<K>>, sender: mpsc::UnboundedSender<Option<String>>)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    let mut stream = std::pin::pin!(stream);
    while let Some(event) = stream.next().await {
        let object = match event {
            Ok(watcher::Event::Apply(object) | watcher::Event::Delete(object)) => object,
            Ok(_) => continue,
            Err(error) => {
                tracing::debug!(
                    error = &error as &dyn std::error::Error,
                    "rbac watch failed; retrying with backoff"
                );
                continue;
            }
        };
        if sender.unbounded_send(object.metadata.namespace).is_err() {
            return;
        }
    }
}

/// Brings the `olm.operatorgroup.uid/<uid>` labels of `group`'s target
/// namespaces, and of the namespaces that carry its label, in line with
/// every known group (upstream's `syncNamespace`, limited to the namespaces
/// this group touches so that a sync costs no more than its targets).
pub(crate) async fn sync_namespace_labels(
    context: &Context,
    group: &OperatorGroup,
) -> Result<(), Error> {
    let groups: Vec<OperatorGroup> = context
        .caches
        .operator_groups
        .state()
        .iter()
        .map(|g| OperatorGroup::clone(g))
        .collect();
    let known: Vec<&str> = groups
        .iter()
        .filter_map(|g| g.metadata.uid.as_deref())
        .collect();
    let all_known = context.config.single_namespace().is_none()
        && context
            .config
            .watched_namespaces
            .iter()
            .all(String::is_empty);
    let own_label = group
        .metadata
        .uid
        .as_deref()
        .map(labels::operator_group_uid_label);
    let targets = group
        .status
        .as_ref()
        .map(|s| s.namespaces.clone())
        .unwrap_or_default();
    let api: Api<Namespace> = Api::all(context.client.clone());
    for namespace in context.caches.namespaces.state() {
        let name = namespace.name_any();
        let labelled = own_label
            .as_ref()
            .is_some_and(|l| namespace.labels().contains_key(l));
        if !labelled && !targets.contains(&name) {
            continue;
        }
        let desired = namespace_group_labels(&name, &groups);
        let Some(patch) = namespace_label_patch(
            namespace.metadata.labels.as_ref(),
            &desired,
            &known,
            all_known,
        ) else {
            continue;
        };
        patch_namespace_labels(&api, &name, &patch).await?;
    }
    Ok(())
}

async fn patch_namespace_labels(
    api: &Api<Namespace>,
    name: &str,
    patch: &BTreeMap<String, Option<String>>,
) -> Result<(), Error> {
    let body = serde_json::json!({ "metadata": { "labels": patch } });
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(&body))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
        Err(source) => Err(Error::Kube {
            action: "label",
            kind: "Namespace",
            name: name.to_owned(),
            source: Box::new(source),
        }),
    }
}

/// Removes a deleted group's `olm.operatorgroup.uid/<uid>` label from every
/// namespace carrying it (found by label, so the namespaces need not be in
/// any cache).
pub(crate) async fn remove_namespace_labels(client: Client, uid: &str) {
    let label = labels::operator_group_uid_label(uid);
    let api: Api<Namespace> = Api::all(client);
    let list = match api
        .list_metadata(&ListParams::default().labels(&label))
        .await
    {
        Ok(list) => list,
        Err(error) => {
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                label,
                "cannot list the namespaces of a deleted operatorgroup"
            );
            return;
        }
    };
    let patch = BTreeMap::from([(label.clone(), None)]);
    for namespace in list.items {
        let name = namespace.name_any();
        if let Err(error) = patch_namespace_labels(&api, &name, &patch).await {
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                namespace = name,
                "cannot remove a deleted operatorgroup's namespace label"
            );
        }
    }
}
