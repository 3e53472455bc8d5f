//! `OperatorCondition` (`operators.coreos.com`): the channel through which an
//! operator tells OLM about its own state (today: whether it may be upgraded),
//! and through which an administrator can override that.
//!
//! Served as `v2` (storage, adds `spec.conditions`) and `v1`. The `v2` types are
//! re-exported at this module's root.

pub use v2::*;

/// Condition type an operator sets to `False` to block its own upgrade.
pub const UPGRADEABLE: &str = "Upgradeable";

/// A condition in `spec.overrides`: like `metav1.Condition`, but written by an
/// administrator, so `lastTransitionTime` may be missing.
#[derive(
    serde::Serialize, serde::Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct ConditionOverride {
    /// Type of the overridden condition, for example `Upgradeable`.
    #[serde(rename = "type")]
    pub type_: String,

    /// Status forced on the condition: `True`, `False` or `Unknown`.
    pub status: String,

    /// Machine-readable reason for the override.
    pub reason: String,

    /// Human-readable explanation of the override.
    pub message: String,

    /// The metadata.generation the override was written for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// When the override last changed status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
}

crate::conditions::impl_status_condition!(ConditionOverride);

/// `operators.coreos.com/v2` OperatorCondition, the storage version.
pub mod v2 {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    use super::ConditionOverride;
    use crate::optional_spec::optional_spec;

    optional_spec! {
        [#[serde(rename_all = "camelCase")]]
        /// What OLM manages for an operator's OperatorCondition, the conditions the
        /// operator sets, and administrator overrides.
        #[derive(CustomResource, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
        #[kube(
            group = "operators.coreos.com",
            version = "v2",
            kind = "OperatorCondition",
            plural = "operatorconditions",
            singular = "operatorcondition",
            shortname = "condition",
            category = "olm",
            namespaced,
            status = "OperatorConditionStatus",
            derive = "PartialEq",
            doc = "Conditions an operator reports to OLM about itself (such as Upgradeable), and administrator overrides of them."
        )]
        pub struct OperatorConditionSpec {
            /// ServiceAccounts of the operator that may update this object.
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            pub service_accounts: Vec<String>,

            /// Deployments of the operator that receive `OPERATOR_CONDITION_NAME`.
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            pub deployments: Vec<String>,

            /// Conditions set by an administrator that take precedence over the
            /// operator's own.
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            #[schemars(schema_with = "crate::field_schema::metav1_override_conditions")]
            pub overrides: Vec<ConditionOverride>,

            /// Conditions the operator sets about itself; OLM copies them to the
            /// status.
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            #[schemars(schema_with = "crate::field_schema::metav1_conditions")]
            pub conditions: Vec<Condition>,
        }
    }

    /// The conditions OLM acts upon.
    #[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
    pub struct OperatorConditionStatus {
        /// The operator's conditions as OLM observed them, with the generation
        /// they were observed at.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        #[schemars(schema_with = "crate::field_schema::metav1_conditions")]
        pub conditions: Vec<Condition>,
    }
}

/// `operators.coreos.com/v1` OperatorCondition, served for old clients.
pub mod v1 {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    use super::ConditionOverride;
    use crate::optional_spec::optional_spec;

    optional_spec! {
        [#[serde(rename_all = "camelCase")]]
        /// What OLM manages for an operator's OperatorCondition, and administrator
        /// overrides (v1, without `conditions`).
        #[derive(CustomResource, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
        #[kube(
            group = "operators.coreos.com",
            version = "v1",
            kind = "OperatorCondition",
            plural = "operatorconditions",
            singular = "operatorcondition",
            shortname = "condition",
            category = "olm",
            namespaced,
            status = "OperatorConditionStatus",
            derive = "PartialEq",
            storage = false,
            doc = "Conditions an operator reports to OLM about itself (older version, without spec.conditions)."
        )]
        pub struct OperatorConditionSpec {
            /// ServiceAccounts of the operator that may update this object.
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            pub service_accounts: Vec<String>,

            /// Deployments of the operator that receive `OPERATOR_CONDITION_NAME`.
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            pub deployments: Vec<String>,

            /// Conditions set by an administrator that take precedence over the
            /// operator's own.
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            #[schemars(schema_with = "crate::field_schema::metav1_override_conditions")]
            pub overrides: Vec<ConditionOverride>,
        }
    }

    /// The conditions OLM acts upon.
    #[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
    pub struct OperatorConditionStatus {
        /// The operator's conditions as OLM observed them.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        #[schemars(schema_with = "crate::field_schema::metav1_conditions")]
        pub conditions: Vec<Condition>,
    }
}
