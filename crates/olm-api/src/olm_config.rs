//! `OLMConfig` (`operators.coreos.com/v1`, cluster-scoped): cluster-wide OLM
//! settings, a singleton named `cluster`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{open_value::open_string, optional_spec::optional_spec};

/// The name of the one OLMConfig OLM reads.
pub const OLM_CONFIG_NAME: &str = "cluster";

/// Pattern of `spec.features.packageServerSyncInterval`, as upstream's schema
/// has it: one or more `<number>[.<fraction>]<s|m|h>` groups.
pub const SYNC_INTERVAL_PATTERN: &str = r"^([0-9]+(\.[0-9]+)?(s|m|h))+$";

optional_spec! {
    []
    /// Cluster-wide OLM settings.
    #[derive(CustomResource, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
    #[kube(
        group = "operators.coreos.com",
        version = "v1",
        kind = "OLMConfig",
        plural = "olmconfigs",
        singular = "olmconfig",
        category = "olm",
        status = "OLMConfigStatus",
        derive = "PartialEq",
        doc = "Cluster-wide settings of OLM; OLM reads the one named cluster."
    )]
    pub struct OLMConfigSpec {
        /// Optional OLM features to turn on or off.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub features: Option<Features>,
    }
}

/// Optional OLM features.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Features {
    /// When true, OLM stops copying the CSVs of operators installed for all
    /// namespaces into every namespace, and deletes existing copies. Setting it
    /// back to false makes OLM copy them again.
    #[serde(
        default,
        rename = "disableCopiedCSVs",
        skip_serializing_if = "Option::is_none"
    )]
    pub disable_copied_csvs: Option<bool>,

    /// How often packageserver re-reads every catalog, as a duration of hours,
    /// minutes and seconds only (for example `60m` or `1h30m`). When unset,
    /// packageserver's own default applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = SYNC_INTERVAL_PATTERN))]
    pub package_server_sync_interval: Option<String>,
}

/// What OLM reports about its configuration.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct OLMConfigStatus {
    /// Conditions of the configuration (`DisabledCopiedCSVs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::field_schema::metav1_conditions")]
    pub conditions: Vec<Condition>,
}

open_string! {
    /// OLMConfig condition types (`status.conditions[].type`).
    pub struct OLMConfigConditionType (schema = open) {
        /// Whether copied CSVs are disabled.
        DISABLED_COPIED_CSVS = "DisabledCopiedCSVs",
    }
}

open_string! {
    /// OLMConfig condition reasons (`status.conditions[].reason`).
    pub struct OLMConfigConditionReason (schema = open) {
        /// Copied CSVs are enabled.
        COPIED_CSVS_ENABLED = "CopiedCSVsEnabled",
        /// Copied CSVs are disabled.
        COPIED_CSVS_DISABLED = "CopiedCSVsDisabled",
    }
}

impl OLMConfig {
    /// Whether copied CSVs are disabled (unset means enabled).
    pub fn copied_csvs_disabled(&self) -> bool {
        self.spec
            .features
            .as_ref()
            .and_then(|f| f.disable_copied_csvs)
            .unwrap_or(false)
    }
}
