//! The `cluster` OLMConfig: its `DisabledCopiedCSVs` condition says whether
//! the copies of operators installed for all namespaces are as the
//! `disableCopiedCSVs` feature wants them (upstream's `syncOLMConfig`). A
//! change of the feature requeues every CSV's copies; the condition is
//! computed again after each copy sync that touches such an operator.

use std::{collections::BTreeSet, sync::Arc};

use jiff::Timestamp;
use kube::{Api, ResourceExt, runtime::controller::Action};
use olm_api::{labels, olm_config::OLMConfig};

use super::Context;
use crate::{
    Error,
    decide::{
        copied_csv::{copies_as_expected, copies_enabled, is_copied, olm_config_status},
        operator_group::NAMESPACE_ALL,
    },
};

/// Reconciles the OLMConfig's condition.
pub(crate) async fn reconcile(
    config: Arc<OLMConfig>,
    context: Arc<Context>,
) -> Result<Action, Error> {
    if config.name_any() != olm_api::olm_config::OLM_CONFIG_NAME {
        return Ok(Action::await_change());
    }
    let enabled = copies_enabled(Some(&config));
    let active_namespaces = context.caches.namespaces.state().len();
    let out_of_place = context
        .caches
        .csvs
        .state()
        .iter()
        .filter(|csv| !is_copied(csv) && csv.metadata.deletion_timestamp.is_none())
        .filter(|csv| {
            csv.annotations()
                .get(labels::TARGET_NAMESPACES)
                .map(String::as_str)
                == Some(NAMESPACE_ALL)
        })
        .any(|csv| {
            let namespace = csv.metadata.namespace.clone().unwrap_or_default();
            let with_copies: BTreeSet<String> = context
                .caches
                .copies
                .of_parent(&namespace, &csv.name_any())
                .into_iter()
                .map(|c| c.namespace)
                .collect();
            !copies_as_expected(
                enabled,
                active_namespaces,
                &context.config.protected_copied_csv_namespaces,
                &with_copies,
            )
        });
    let decided = olm_config_status(
        config.status.as_ref(),
        enabled,
        out_of_place,
        Timestamp::now(),
    );
    if let Some(status) = decided {
        let api: Api<OLMConfig> = Api::all(context.client.clone());
        context
            .write_status(&api, &config, &status, "cannot write olmconfig status")
            .await?;
    }
    Ok(Action::requeue(context.config.resync))
}
