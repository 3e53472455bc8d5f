//! What an operator gets in the namespaces its OperatorGroup targets: copies
//! of its CSV ([`plan_copies`]) and the RBAC that follows membership
//! ([`crate::decide::group_rbac`]: Roles copied into target namespaces, or
//! lifted to the cluster for groups targeting all namespaces).
//!
//! This controller is keyed by the parent CSV and debounced: a parent that
//! moves through several phases in quick succession has its copies written
//! once, with the phase it settled in. Existing copies are known from a
//! metadata-only watch kept as small records (see [`super::copies`]), so
//! deciding that nothing needs writing costs no API call and holds no copy
//! bodies in memory.

use std::{collections::BTreeMap, sync::Arc};

use futures::StreamExt;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::{
    Api, Resource, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams},
    runtime::controller::Action,
};
use olm_api::ownership::{has_owner_labels, owner_labels};
use olm_api::{csv::ClusterServiceVersion, labels, operator_group::OperatorGroup};
use olm_runtime::apply::apply;

use super::{Context, FIELD_MANAGER};
use crate::{
    Error,
    decide::{
        copied_csv::{
            COPY_HASH_STATUS_ANNOTATION, CopyInputs, CopyWrite, ExistingCopy, copies_enabled,
            is_copied, plan_copies,
        },
        group_rbac::{
            binds_role, copied_role_needs_write, lifted_cluster_rbac, target_namespace_rbac,
        },
        operator_group::{NAMESPACE_ALL, is_active_member},
    },
};

/// How many copies of one parent are written (or deleted) at a time: enough
/// to keep a thousand target namespaces from taking minutes, few enough that
/// one parent cannot monopolise the API server.
pub(crate) const COPY_WRITE_CONCURRENCY: usize = 8;

fn kube_error(
    action: &'static str,
    kind: &'static str,
    name: String,
) -> impl FnOnce(kube::Error) -> Error {
    move |source| Error::Kube {
        action,
        kind,
        name,
        source: Box::new(source),
    }
}

/// Reconciles the copies and target-namespace RBAC of one parent CSV.
pub(crate) async fn reconcile(
    parent: Arc<ClusterServiceVersion>,
    context: Arc<Context>,
) -> Result<Action, Error> {
    if is_copied(&parent) {
        return Ok(Action::await_change());
    }
    sync(&parent, &context).await
}

/// The group `parent` is an active member of, if any.
fn active_group(context: &Context, parent: &ClusterServiceVersion) -> Option<OperatorGroup> {
    let namespace = parent.metadata.namespace.as_deref();
    let name = parent.annotations().get(labels::OPERATOR_GROUP)?;
    context
        .caches
        .operator_groups
        .state()
        .iter()
        .find(|g| {
            g.metadata.namespace.as_deref() == namespace && g.metadata.name.as_ref() == Some(name)
        })
        .filter(|g| is_active_member(parent, g))
        .map(|g| OperatorGroup::clone(g))
}

/// The existing copies of `parent`, by namespace, with their uids.
fn existing_copies(
    context: &Context,
    parent: &ClusterServiceVersion,
) -> (BTreeMap<String, ExistingCopy>, BTreeMap<String, String>) {
    let name = parent.name_any();
    let namespace = parent.metadata.namespace.clone().unwrap_or_default();
    let mut existing = BTreeMap::new();
    let mut uids = BTreeMap::new();
    for copy in context.caches.copies.of_parent(&namespace, &name) {
        if let Some(uid) = copy.uid {
            uids.insert(copy.namespace.clone(), uid);
        }
        existing.insert(
            copy.namespace,
            ExistingCopy {
                hashes: copy.hashes,
            },
        );
    }
    (existing, uids)
}

async fn sync(parent: &ClusterServiceVersion, context: &Context) -> Result<Action, Error> {
    let group = active_group(context, parent);
    let namespaces: Vec<String> = context
        .caches
        .namespaces
        .state()
        .iter()
        .map(|ns| ns.name_any())
        .collect();
    let config = context
        .caches
        .olm_configs
        .get(&kube::runtime::reflector::ObjectRef::new(
            olm_api::olm_config::OLM_CONFIG_NAME,
        ));
    let enabled = copies_enabled(config.as_deref());
    let (existing, mut uids) = existing_copies(context, parent);
    let plan = plan_copies(CopyInputs {
        parent,
        group: group.as_ref(),
        namespaces: &namespaces,
        copied_csvs_enabled: enabled,
        protected_namespaces: &context.config.protected_copied_csv_namespaces,
        existing: &existing,
    })?;

    // The closures take indices: a closure taking `&CopyWrite` would be
    // inferred for every lifetime, and the spawned controller task could not
    // then prove its future `Send`.
    if let Some(prototype) = &plan.prototype {
        let planned = plan.writes.as_slice();
        let writes = (0..planned.len()).map(move |i| write_copy(context, prototype, &planned[i]));
        for (namespace, uid) in bounded(writes, COPY_WRITE_CONCURRENCY).await? {
            if let Some(uid) = uid {
                uids.insert(namespace, uid);
            }
        }
    }
    let planned = plan.deletes.as_slice();
    let deletes = (0..planned.len()).map(move |i| delete_copy(context, parent, &planned[i]));
    bounded(deletes, COPY_WRITE_CONCURRENCY).await?;
    for namespace in &plan.deletes {
        uids.remove(namespace);
    }
    if let Some(event) = &plan.event {
        context
            .recorder
            .warning(
                &parent.object_ref(&()),
                &event.reason,
                "CopyCSVs",
                &event.message,
            )
            .await;
    }
    if !plan.writes.is_empty() || !plan.deletes.is_empty() {
        tracing::info!(
            written = plan.writes.len(),
            deleted = plan.deletes.len(),
            "copies synced"
        );
    }

    if let Some(group) = &group {
        let targets = group
            .status
            .as_ref()
            .map(|s| s.namespaces.clone())
            .unwrap_or_default();
        if targets.as_slice() == [NAMESPACE_ALL] {
            lift_rbac(context, parent).await?;
            let _ = context.olm_config_requeue.unbounded_send(());
        } else {
            for (namespace, uid) in &uids {
                if targets.contains(namespace) {
                    copy_rbac(context, parent, namespace, uid).await?;
                }
            }
        }
    } else if !plan.deletes.is_empty() {
        let _ = context.olm_config_requeue.unbounded_send(());
    }
    Ok(Action::requeue(context.config.resync))
}

/// Runs `futures` with at most `limit` in flight, creating each only when a
/// slot is free: a future holds its request body and response while it runs,
/// and a thousand of them created at once (one per target namespace) would
/// hold a thousand copies of the parent for the whole sync. Every future runs
/// even after one fails; the result is the first error, or else the outputs
/// in the order they finished.
pub(crate) async fn bounded<I, F, T>(futures: I, limit: usize) -> Result<Vec<T>, Error>
where
    I: IntoIterator<Item = F>,
    F: std::future::Future<Output = Result<T, Error>>,
{
    let mut pending = futures.into_iter();
    let mut running = futures::stream::FuturesUnordered::new();
    let mut outputs = Vec::new();
    let mut first_error = None;
    loop {
        while running.len() < limit.max(1) {
            let Some(future) = pending.next() else {
                break;
            };
            running.push(future);
        }
        let Some(result) = running.next().await else {
            break;
        };
        match result {
            Ok(output) => outputs.push(output),
            Err(error) => {
                first_error.get_or_insert(error);
            }
        }
    }
    match first_error {
        Some(error) => Err(error),
        None => Ok(outputs),
    }
}

/// A copy as it is applied: the prototype's metadata with the target
/// namespace, and its spec, borrowed rather than cloned per namespace.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct CopyObject<'a> {
    api_version: &'a str,
    kind: &'a str,
    metadata: CopyMeta<'a>,
    spec: &'a olm_api::csv::ClusterServiceVersionSpec,
}

/// A copy's status as it is applied to the status subresource.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct CopyStatus<'a> {
    api_version: &'a str,
    kind: &'a str,
    metadata: CopyMeta<'a>,
    status: &'a Option<olm_api::csv::ClusterServiceVersionStatus>,
}

/// The metadata of a copy: what [`crate::decide::copied_csv::copy_for_namespace`]
/// sets (name, labels, annotations), in `namespace`.
#[derive(Debug, serde::Serialize)]
struct CopyMeta<'a> {
    name: &'a str,
    namespace: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    labels: Option<&'a BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    annotations: Option<&'a BTreeMap<String, String>>,
}

/// Writes one copy of `prototype` into `write.namespace`: the object
/// (metadata and spec) by server-side apply, then the status; a status-only
/// change also records its new hash. Returns the namespace and the copy's uid
/// when the object was written.
async fn write_copy(
    context: &Context,
    prototype: &ClusterServiceVersion,
    write: &CopyWrite,
) -> Result<(String, Option<String>), Error> {
    let namespace = write.namespace.as_str();
    let name = prototype.metadata.name.as_deref().unwrap_or_default();
    let api_version = ClusterServiceVersion::api_version(&());
    let kind = ClusterServiceVersion::kind(&());
    let metadata = || CopyMeta {
        name,
        namespace,
        labels: prototype.metadata.labels.as_ref(),
        annotations: prototype.metadata.annotations.as_ref(),
    };
    let api: Api<ClusterServiceVersion> = Api::namespaced(context.client.clone(), namespace);
    let mut uid = None;
    if write.spec {
        let object = CopyObject {
            api_version: &api_version,
            kind: &kind,
            metadata: metadata(),
            spec: &prototype.spec,
        };
        let written = api
            .patch_metadata(
                name,
                &PatchParams::apply(FIELD_MANAGER.as_str()).force(),
                &Patch::Apply(&object),
            )
            .await
            .map_err(kube_error(
                "apply copy",
                "ClusterServiceVersion",
                format!("{namespace}/{name}"),
            ))?;
        uid = written.metadata.uid;
    }
    if write.status {
        let body = CopyStatus {
            api_version: &api_version,
            kind: &kind,
            metadata: CopyMeta {
                labels: None,
                annotations: None,
                ..metadata()
            },
            status: &prototype.status,
        };
        api.patch_status(name, &FIELD_MANAGER.status_params(), &Patch::Apply(&body))
            .await
            .map_err(kube_error(
                "write status of copy",
                "ClusterServiceVersion",
                format!("{namespace}/{name}"),
            ))?;
        if !write.spec {
            // The status subresource ignores metadata: the status hash is
            // recorded separately, after the status it describes.
            let hash = prototype
                .annotations()
                .get(COPY_HASH_STATUS_ANNOTATION)
                .cloned()
                .unwrap_or_default();
            let patch = serde_json::json!({
                "metadata": { "annotations": { COPY_HASH_STATUS_ANNOTATION: hash } }
            });
            api.patch_metadata(
                name,
                &PatchParams {
                    field_manager: Some(FIELD_MANAGER.as_str().to_owned()),
                    ..PatchParams::default()
                },
                &Patch::Merge(&patch),
            )
            .await
            .map_err(kube_error(
                "record status hash of copy",
                "ClusterServiceVersion",
                format!("{namespace}/{name}"),
            ))?;
        }
    }
    context.metrics.count_copy_write();
    Ok((namespace.to_owned(), uid))
}

/// Deletes the copy of `parent` in `namespace` and the RBAC copied there for
/// it (which its ownerReferences would also remove, later).
async fn delete_copy(
    context: &Context,
    parent: &ClusterServiceVersion,
    namespace: &str,
) -> Result<(), Error> {
    let name = parent.name_any();
    let api: Api<ClusterServiceVersion> = Api::namespaced(context.client.clone(), namespace);
    olm_runtime::apply::delete_if_exists(&api, &name)
        .await
        .map_err(Error::runtime("cannot delete copied csv"))?;
    // RBAC is copied only for groups targeting other namespaces; most copies
    // (those of operators watching all namespaces) have none to delete.
    let owned_here = |object_labels: Option<&BTreeMap<String, String>>,
                      namespace_of: Option<&str>| {
        namespace_of == Some(namespace)
            && object_labels.is_some_and(|l| {
                l.get(labels::OWNER) == Some(&name)
                    && l.get(labels::OWNER_NAMESPACE).map(String::as_str) == Some(namespace)
            })
    };
    let has_rbac = context
        .caches
        .roles
        .state()
        .iter()
        .any(|r| owned_here(r.metadata.labels.as_ref(), r.metadata.namespace.as_deref()))
        || context
            .caches
            .role_bindings
            .state()
            .iter()
            .any(|b| owned_here(b.metadata.labels.as_ref(), b.metadata.namespace.as_deref()));
    if !has_rbac {
        return Ok(());
    }
    let selector = format!(
        "{}={name},{}={namespace},{}=ClusterServiceVersion",
        labels::OWNER,
        labels::OWNER_NAMESPACE,
        labels::OWNER_KIND
    );
    let list = ListParams::default().labels(&selector);
    let bindings: Api<RoleBinding> = Api::namespaced(context.client.clone(), namespace);
    bindings
        .delete_collection(&DeleteParams::background(), &list)
        .await
        .map_err(kube_error(
            "delete copied role bindings in",
            "Namespace",
            namespace.to_owned(),
        ))?;
    let roles: Api<Role> = Api::namespaced(context.client.clone(), namespace);
    roles
        .delete_collection(&DeleteParams::background(), &list)
        .await
        .map_err(kube_error(
            "delete copied roles in",
            "Namespace",
            namespace.to_owned(),
        ))?;
    Ok(())
}

/// The parent's own Roles and RoleBindings (owner labels, its namespace).
fn owned_rbac(context: &Context, parent: &ClusterServiceVersion) -> (Vec<Role>, Vec<RoleBinding>) {
    let namespace = parent.metadata.namespace.as_deref();
    let roles = context
        .caches
        .roles
        .state()
        .iter()
        .filter(|r| {
            r.metadata.namespace.as_deref() == namespace
                && has_owner_labels(r.metadata.labels.as_ref(), parent)
        })
        .map(|r| Role::clone(r))
        .collect();
    let bindings = context
        .caches
        .role_bindings
        .state()
        .iter()
        .filter(|b| {
            b.metadata.namespace.as_deref() == namespace
                && has_owner_labels(b.metadata.labels.as_ref(), parent)
                && binds_role(b)
        })
        .map(|b| RoleBinding::clone(b))
        .collect();
    (roles, bindings)
}

/// Lifts the parent's Roles and RoleBindings to the cluster, creating each
/// only when absent (upstream never updates them).
async fn lift_rbac(context: &Context, parent: &ClusterServiceVersion) -> Result<(), Error> {
    let (roles, bindings) = owned_rbac(context, parent);
    let (cluster_roles, cluster_bindings) = lifted_cluster_rbac(&roles, &bindings);
    let have_roles = context.caches.cluster_roles.state();
    let have_bindings = context.caches.cluster_role_bindings.state();
    let api: Api<ClusterRole> = Api::all(context.client.clone());
    for role in cluster_roles {
        if have_roles
            .iter()
            .any(|r| r.metadata.name == role.metadata.name)
        {
            continue;
        }
        apply(&api, &FIELD_MANAGER, &role)
            .await
            .map_err(Error::runtime("cannot apply lifted cluster role"))?;
    }
    let api: Api<ClusterRoleBinding> = Api::all(context.client.clone());
    for binding in cluster_bindings {
        if have_bindings
            .iter()
            .any(|b| b.metadata.name == binding.metadata.name)
        {
            continue;
        }
        apply(&api, &FIELD_MANAGER, &binding)
            .await
            .map_err(Error::runtime("cannot apply lifted cluster role binding"))?;
    }
    Ok(())
}

/// Copies the parent's Roles and RoleBindings into `namespace`, owned by the
/// copy there (`uid`).
async fn copy_rbac(
    context: &Context,
    parent: &ClusterServiceVersion,
    namespace: &str,
    uid: &str,
) -> Result<(), Error> {
    if parent.metadata.namespace.as_deref() == Some(namespace) {
        return Ok(());
    }
    let (roles, bindings) = owned_rbac(context, parent);
    let mut copy_meta = kube::api::ObjectMeta {
        name: parent.metadata.name.clone(),
        namespace: Some(namespace.to_owned()),
        uid: Some(uid.to_owned()),
        ..Default::default()
    };
    copy_meta.labels = Some(BTreeMap::from([(
        labels::COPIED_FROM.to_owned(),
        parent.metadata.namespace.clone().unwrap_or_default(),
    )]));
    let copy = ClusterServiceVersion {
        metadata: copy_meta,
        spec: Default::default(),
        status: None,
    };
    let (copied_roles, copied_bindings) = target_namespace_rbac(&copy, &roles, &bindings);
    let copy_owner = owner_labels(&copy);
    let have_roles = context.caches.roles.state();
    let have_bindings = context.caches.role_bindings.state();
    let roles_api: Api<Role> = Api::namespaced(context.client.clone(), namespace);
    for role in copied_roles {
        let existing = have_roles.iter().find(|r| {
            r.metadata.namespace.as_deref() == Some(namespace)
                && r.metadata.name == role.metadata.name
        });
        if !copied_role_needs_write(existing.map(AsRef::as_ref), &role) {
            continue;
        }
        apply(&roles_api, &FIELD_MANAGER, &role)
            .await
            .map_err(Error::runtime("cannot apply copied role"))?;
    }
    let bindings_api: Api<RoleBinding> = Api::namespaced(context.client.clone(), namespace);
    for binding in copied_bindings {
        let present = have_bindings.iter().any(|b| {
            b.metadata.namespace.as_deref() == Some(namespace)
                && b.metadata.name == binding.metadata.name
                && copy_owner.iter().all(|(k, v)| b.labels().get(k) == Some(v))
        });
        if present {
            continue;
        }
        apply(&bindings_api, &FIELD_MANAGER, &binding)
            .await
            .map_err(Error::runtime("cannot apply copied role binding"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    };

    use super::*;

    /// Counts futures created and not yet finished, and the most at once.
    #[derive(Default)]
    struct Live {
        now: AtomicUsize,
        most: AtomicUsize,
    }

    impl Live {
        fn created(&self) {
            let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(now, Ordering::SeqCst);
        }
    }

    fn run(count: usize, limit: usize, failing: &[usize]) -> (Result<Vec<usize>, Error>, usize) {
        let live = Arc::new(Live::default());
        let futures = (0..count).map(|i| {
            live.created();
            let live = live.clone();
            let fails = failing.contains(&i);
            async move {
                // Finish out of order: later futures yield fewer times.
                for _ in 0..(count - i) % 3 {
                    tokio::task::yield_now().await;
                }
                live.now.fetch_sub(1, Ordering::SeqCst);
                if fails {
                    Err(Error::from(crate::decide::Error::Serving {
                        message: format!("future {i} failed"),
                    }))
                } else {
                    Ok(i)
                }
            }
        });
        let result = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(bounded(futures, limit));
        (result, live.most.load(Ordering::SeqCst))
    }

    #[test]
    fn bounded_never_creates_more_futures_than_the_limit() {
        for (count, limit) in [(1013, COPY_WRITE_CONCURRENCY), (5, 8), (10, 1), (3, 0)] {
            let (result, most) = run(count, limit, &[]);
            let mut outputs = result.expect("no failure");
            outputs.sort_unstable();
            assert_eq!(outputs, (0..count).collect::<Vec<_>>(), "{count}/{limit}");
            assert!(most <= limit.max(1), "{most} futures alive, limit {limit}");
        }
    }

    #[test]
    fn bounded_runs_everything_and_reports_the_first_error() {
        let ran = Arc::new(AtomicUsize::new(0));
        let futures = (0..20).map(|i| {
            let ran = ran.clone();
            async move {
                ran.fetch_add(1, Ordering::SeqCst);
                if i == 3 || i == 7 {
                    Err(Error::from(crate::decide::Error::Serving {
                        message: format!("future {i} failed"),
                    }))
                } else {
                    Ok(i)
                }
            }
        });
        let result = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(bounded(futures, 4));
        assert!(result.is_err());
        assert_eq!(ran.load(Ordering::SeqCst), 20, "every future ran");
        let (result, _) = run(10, 2, &[9]);
        assert!(result.is_err());
    }
}
