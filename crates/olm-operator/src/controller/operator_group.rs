//! The OperatorGroup reconciler: `status.namespaces` (and `lastUpdated`) from
//! [`target_namespaces`], written only when the set changes.

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{Api, Resource, ResourceExt, runtime::controller::Action};
use olm_api::operator_group::OperatorGroup;
use olm_runtime::apply::apply_status;
use tracing::Instrument;

use super::{Context, FIELD_MANAGER};
use crate::{
    Error,
    decide::{
        csv_status::truncate_to_seconds,
        operator_group::{ObservedNamespace, namespaces_changed, target_namespaces},
    },
};

fn key(group: &OperatorGroup) -> String {
    format!(
        "og/{}/{}",
        group.metadata.namespace.as_deref().unwrap_or_default(),
        group.name_any()
    )
}

/// Reconciles one OperatorGroup.
pub(crate) async fn reconcile(
    group: Arc<OperatorGroup>,
    context: Arc<Context>,
) -> Result<Action, Error> {
    let namespace = group.metadata.namespace.clone().unwrap_or_default();
    if !context.config.watches(&namespace) || group.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let span = tracing::info_span!(
        "reconcile_operatorgroup",
        namespace,
        name = group.name_any()
    );
    olm_runtime::telemetry::record_trace_id(&span);
    let timer = context.metrics.operator_group_reconciles.start();
    let result = sync(&group, &context).instrument(span).await;
    match &result {
        Ok(_) => context.succeeded(&key(&group)),
        Err(error) => {
            tracing::info!(
                namespace,
                name = group.name_any(),
                error = error as &dyn std::error::Error,
                "operatorgroup sync did not finish"
            );
            timer.failed(error.category());
        }
    }
    result
}

/// The delay before a failed reconcile is retried (capped exponential).
pub(crate) fn error_policy(
    group: Arc<OperatorGroup>,
    _error: &Error,
    context: Arc<Context>,
) -> Action {
    Action::requeue(context.backoff(key(&group)))
}

async fn sync(group: &OperatorGroup, context: &Context) -> Result<Action, Error> {
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
    if never_written || namespaces_changed(&targets, &current) {
        let namespace = group.metadata.namespace.clone().unwrap_or_default();
        let api: Api<OperatorGroup> = Api::namespaced(context.client.clone(), &namespace);
        let status = serde_json::json!({
            "namespaces": targets,
            "lastUpdated": Time(truncate_to_seconds(Timestamp::now())),
        });
        apply_status(&api, &FIELD_MANAGER, &group.name_any(), &status)
            .await
            .map_err(|source| Error::Runtime {
                what: "cannot write operatorgroup status",
                source: Box::new(source),
            })?;
        tracing::info!(?targets, "operatorgroup targets changed");
    }
    Ok(Action::requeue(context.config.resync))
}
