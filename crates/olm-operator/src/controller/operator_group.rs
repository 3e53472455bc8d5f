//! The OperatorGroup reconciler: `status.namespaces` (and `lastUpdated`) from
//! [`target_namespaces`], written only when the set changes; the group's
//! aggregated admin/edit/view ClusterRoles for the APIs its members provide;
//! pruning of `olm.providedAPIs`; and a requeue of every CSV providing one of
//! those APIs, so that an intersection conflict elsewhere is looked at again
//! (upstream's `syncOperatorGroups`).

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::{api::rbac::v1::ClusterRole, apimachinery::pkg::apis::meta::v1::Time};
use kube::{
    Api, Resource, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams},
    runtime::controller::Action,
};
use olm_api::{
    csv::ClusterServiceVersion,
    labels,
    operator_group::{OperatorGroup, OperatorGroupStatus},
};
use olm_runtime::apply::apply;

use super::{Context, FIELD_MANAGER, requeue_csvs, scoped};
use crate::decide::Error as Decision;
use crate::{
    Error,
    decide::{
        api_surface::{ApiSet, api_surface, parse_api_set},
        csv_status::{self, truncate_to_seconds},
        group_rbac::{group_owner_labels, group_role_needs_write, operator_group_cluster_roles},
        operator_group::{
            MemberApis, ObservedNamespace, namespaces_changed, pruned_provided_apis,
            target_namespaces,
        },
        scoped::{
            IdentityUnavailable, ServiceAccountLookup, group_status_update,
            requested_service_account, service_account_not_found_message,
        },
    },
};

/// Reconciles one OperatorGroup.
pub(crate) async fn reconcile(
    group: Arc<OperatorGroup>,
    context: Arc<Context>,
) -> Result<Action, Error> {
    if group.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    sync(&group, &context).await
}

async fn sync(group: &OperatorGroup, context: &Context) -> Result<Action, Error> {
    let now = Timestamp::now();
    let groups_in_namespace = context
        .caches
        .operator_groups
        .state()
        .iter()
        .filter(|g| g.metadata.namespace == group.metadata.namespace)
        .filter(|g| g.metadata.deletion_timestamp.is_none())
        .count();
    let lookup = scoped::lookup_service_account(context, group).await?;
    let scoped_status = group_status_update(group, groups_in_namespace, &lookup, now);
    let namespaces: Vec<ObservedNamespace> = context
        .caches
        .namespaces
        .state()
        .iter()
        .map(|ns| ObservedNamespace::from(ns.as_ref()))
        .collect();
    let targets = match target_namespaces(group, &namespaces) {
        Ok(targets) => targets,
        Err(error) => {
            // The spec must change before this can succeed; say so and wait.
            context
                .recorder
                .warning(
                    &group.object_ref(&()),
                    error.category(),
                    "ComputeTargetNamespaces",
                    &olm_runtime::events::error_chain(&error),
                )
                .await;
            return Ok(Action::await_change());
        }
    };
    let current = group
        .status
        .as_ref()
        .map(|s| s.namespaces.clone())
        .unwrap_or_default();
    let never_written = group
        .status
        .as_ref()
        .is_none_or(|s| s.last_updated.is_none());
    let targets_changed = never_written || namespaces_changed(&targets, &current);
    if targets_changed || scoped_status.changed {
        let namespace = group.metadata.namespace.clone().unwrap_or_default();
        let api: Api<OperatorGroup> = Api::namespaced(context.client.clone(), &namespace);
        // One apply holds every status field this service owns: a field
        // left out of it would be removed.
        let last_updated = if targets_changed || scoped_status.service_account_ref_changed {
            Some(Time(truncate_to_seconds(now)))
        } else {
            group.status.as_ref().and_then(|s| s.last_updated.clone())
        };
        let status = OperatorGroupStatus {
            namespaces: targets.clone(),
            service_account_ref: scoped_status.service_account_ref.clone(),
            last_updated,
            conditions: scoped_status.conditions.clone(),
        };
        context
            .write_status(&api, group, &status, "cannot write operatorgroup status")
            .await?;
        if targets_changed {
            tracing::info!(?targets, "operatorgroup targets changed");
        }
    }
    if scoped_status.service_account_ref_changed {
        // Installs the old identity could not do may pass with the new one.
        let namespace = group.metadata.namespace.clone();
        let name = group.metadata.name.clone();
        scoped::retry_forbidden_installs(context, |csv| {
            csv.metadata.namespace == namespace
                && csv.annotations().get(labels::OPERATOR_GROUP) == name.as_ref()
        })
        .await;
    }
    if !targets_changed {
        ensure_group_roles_and_apis(group, context).await?;
        scoped::sync_namespace_labels(context, group).await?;
    }
    if lookup == ServiceAccountLookup::NotFound {
        // Upstream retries until the account appears; it carries no label
        // yet, so no cached watch would tell.
        let name = requested_service_account(group).unwrap_or_default();
        return Err(Decision::InstallIdentity {
            source: IdentityUnavailable(service_account_not_found_message(name)),
        }
        .into());
    }
    Ok(Action::requeue(context.config.resync))
}

/// The member CSVs of a group (annotated with its name, in its namespace).
fn members(context: &Context, group: &OperatorGroup) -> Vec<ClusterServiceVersion> {
    let namespace = group.metadata.namespace.as_deref();
    let name = group.metadata.name.as_ref();
    context
        .caches
        .csvs
        .state()
        .iter()
        .filter(|csv| {
            csv.metadata.namespace.as_deref() == namespace
                && csv.annotations().get(labels::OPERATOR_GROUP) == name
        })
        .map(|csv| ClusterServiceVersion::clone(csv))
        .collect()
}

async fn ensure_group_roles_and_apis(
    group: &OperatorGroup,
    context: &Context,
) -> Result<(), Error> {
    let namespace = group.metadata.namespace.clone().unwrap_or_default();
    let annotated = group
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(labels::PROVIDED_APIS))
        .map(|v| parse_api_set(v))
        .unwrap_or_default();
    let members = members(context, group);
    let mut apis: ApiSet = annotated.clone();
    let mut member_apis = Vec::new();
    for csv in &members {
        let Ok(surface) = api_surface(&csv.spec) else {
            continue;
        };
        apis.extend(surface.provided.iter().cloned());
        member_apis.push(MemberApis {
            provided: surface.provided,
            phase: csv_status::phase_of(&csv.status.clone().unwrap_or_default()),
            deleting: csv.metadata.deletion_timestamp.is_some(),
        });
    }

    let existing = context.caches.cluster_roles.state();
    let cluster_roles: Api<ClusterRole> = Api::all(context.client.clone());
    for role in operator_group_cluster_roles(group, &apis) {
        let current = existing
            .iter()
            .find(|r| r.metadata.name == role.metadata.name);
        if current.is_some_and(|current| !group_role_needs_write(current, &role)) {
            continue;
        }
        apply(&cluster_roles, &FIELD_MANAGER, &role)
            .await
            .map_err(Error::runtime("cannot apply operatorgroup cluster role"))?;
    }

    // Conflicting CSVs in intersecting groups may be free now.
    requeue_csvs(
        &context.csv_requeue,
        context
            .caches
            .csvs
            .state()
            .iter()
            .map(AsRef::as_ref)
            .filter(|csv| {
                api_surface(&csv.spec)
                    .is_ok_and(|s| s.provided.iter().any(|api| apis.contains(api)))
            }),
    );

    if let Some(value) = pruned_provided_apis(group, &member_apis) {
        let api: Api<OperatorGroup> = Api::namespaced(context.client.clone(), &namespace);
        let patch = serde_json::json!({
            "metadata": { "annotations": { labels::PROVIDED_APIS: value } }
        });
        api.patch(
            &group.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .map_err(|source| Error::Kube {
            action: "prune provided apis of",
            kind: "OperatorGroup",
            name: format!("{namespace}/{}", group.name_any()),
            source: Box::new(source),
        })?;
    }
    Ok(())
}

/// Deletes the ClusterRoles a deleted group owned (by its owner labels), in
/// the background: an OperatorGroup has no finalizer, so this runs from the
/// watch event, and the resync of a group that no longer exists never comes.
pub(crate) fn deleted(client: kube::Client, group: &OperatorGroup) {
    if let Some(uid) = group.metadata.uid.clone() {
        let client = client.clone();
        tokio::spawn(async move { scoped::remove_namespace_labels(client, &uid).await });
    }
    let selector = group_owner_labels(group)
        .iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect::<Vec<_>>()
        .join(",");
    tokio::spawn(async move {
        let api: Api<ClusterRole> = Api::all(client);
        if let Err(error) = api
            .delete_collection(
                &DeleteParams::background(),
                &ListParams::default().labels(&selector),
            )
            .await
        {
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                selector,
                "cannot delete the cluster roles of a deleted operatorgroup"
            );
        }
    });
}
