//! `OperatorGroup` (`operators.coreos.com`): which namespaces the operators of a
//! namespace watch, and with which ServiceAccount they are installed.
//!
//! Served as `v1` (storage) and `v1alpha2` (no `upgradeStrategy`, no
//! conditions). The versions differ only additively, so no conversion webhook
//! is needed. The `v1` types are re-exported at this module's root.

pub use v1::*;

/// `operators.coreos.com/v1` OperatorGroup, the storage version.
pub mod v1 {
    use k8s_openapi::{
        api::core::v1::ObjectReference,
        apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time},
    };
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    use crate::{open_value::open_string, optional_spec::optional_spec};

    optional_spec! {
        [#[serde(rename_all = "camelCase")]]
        /// Which namespaces the operators in this namespace watch, and how they are
        /// installed and upgraded.
        #[derive(CustomResource, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
        #[kube(
            group = "operators.coreos.com",
            version = "v1",
            kind = "OperatorGroup",
            plural = "operatorgroups",
            singular = "operatorgroup",
            shortname = "og",
            category = "olm",
            namespaced,
            status = "OperatorGroupStatus",
            derive = "PartialEq",
            doc = "Selects the namespaces the operators of its namespace watch, and how they are installed and upgraded."
        )]
        pub struct OperatorGroupSpec {
            /// Selects the target namespaces by label; used when `targetNamespaces`
            /// is empty. Neither set means all namespaces.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub selector: Option<LabelSelector>,

            /// Explicit list of target namespaces; takes precedence over `selector`.
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            #[schemars(extend("x-kubernetes-list-type" = "set"))]
            pub target_namespaces: Vec<String>,

            /// ServiceAccount in this namespace whose permissions scope the
            /// installation of operators (InstallPlan steps, Deployments, RBAC).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub service_account_name: Option<String>,

            /// When true, OLM does not update the group's `olm.providedAPIs`
            /// annotation; an administrator maintains it.
            #[serde(
                default,
                rename = "staticProvidedAPIs",
                skip_serializing_if = "Option::is_none"
            )]
            pub static_provided_apis: Option<bool>,

            /// How OLM upgrades the group's operators: `Default` (only a
            /// successfully installed CSV is replaced) or
            /// `TechPreviewUnsafeFailForward` (a failed CSV or InstallPlan may be
            /// replaced by a newer one).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            #[schemars(extend("default" = "Default"))]
            pub upgrade_strategy: Option<UpgradeStrategy>,
        }
    }

    open_string! {
        /// Upgrade strategy of an OperatorGroup (`spec.upgradeStrategy`). The
        /// schema restricts it to the known values, as upstream's does; unknown
        /// values behave as `Default`.
        pub struct UpgradeStrategy (schema = closed) {
            /// Only a CSV that installed successfully is replaced.
            DEFAULT = "Default",
            /// Failed CSVs and InstallPlans may be replaced by newer ones.
            TECH_PREVIEW_UNSAFE_FAIL_FORWARD = "TechPreviewUnsafeFailForward",
        }
    }

    /// What OLM computed for an OperatorGroup.
    #[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    #[schemars(transform = |s: &mut schemars::Schema| crate::field_schema::require(s, &["lastUpdated"]))]
    pub struct OperatorGroupStatus {
        /// The namespaces the group's operators watch; `[""]` means all.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        #[schemars(extend("x-kubernetes-list-type" = "set"))]
        pub namespaces: Vec<String>,

        /// The ServiceAccount named by `spec.serviceAccountName`, once found.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub service_account_ref: Option<ObjectReference>,

        /// When `namespaces` last changed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub last_updated: Option<Time>,

        /// Conditions of the group (`MultipleOperatorGroup`,
        /// `OperatorGroupServiceAccount`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        #[schemars(schema_with = "crate::field_schema::metav1_conditions")]
        pub conditions: Vec<Condition>,
    }

    open_string! {
        /// OperatorGroup condition types (`status.conditions[].type`).
        pub struct OperatorGroupConditionType (schema = open) {
            /// More than one OperatorGroup exists in the namespace.
            MULTIPLE_OPERATOR_GROUP = "MultipleOperatorGroup",
            /// The ServiceAccount named by `spec.serviceAccountName` is missing.
            SERVICE_ACCOUNT = "OperatorGroupServiceAccount",
        }
    }

    open_string! {
        /// OperatorGroup condition reasons (`status.conditions[].reason`).
        pub struct OperatorGroupConditionReason (schema = open) {
            /// More than one OperatorGroup exists in the namespace.
            MULTIPLE_OPERATOR_GROUPS_FOUND = "MultipleOperatorGroupsFound",
            /// The ServiceAccount named by `spec.serviceAccountName` is missing.
            SERVICE_ACCOUNT_NOT_FOUND = "ServiceAccountNotFound",
        }
    }

    impl OperatorGroup {
        /// Whether failed CSVs and InstallPlans may be replaced by newer ones.
        /// Unknown strategies behave as `Default`.
        pub fn fail_forward_enabled(&self) -> bool {
            self.spec.upgrade_strategy.as_ref()
                == Some(&UpgradeStrategy::TECH_PREVIEW_UNSAFE_FAIL_FORWARD)
        }
    }
}

/// `operators.coreos.com/v1alpha2` OperatorGroup, served for old clients.
pub mod v1alpha2 {
    use k8s_openapi::{
        api::core::v1::ObjectReference,
        apimachinery::pkg::apis::meta::v1::{LabelSelector, Time},
    };
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    use crate::optional_spec::optional_spec;

    optional_spec! {
        [#[serde(rename_all = "camelCase")]]
        /// Which namespaces the operators in this namespace watch (v1alpha2).
        #[derive(CustomResource, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
        #[kube(
            group = "operators.coreos.com",
            version = "v1alpha2",
            kind = "OperatorGroup",
            plural = "operatorgroups",
            singular = "operatorgroup",
            shortname = "og",
            category = "olm",
            namespaced,
            status = "OperatorGroupStatus",
            derive = "PartialEq",
            storage = false,
            doc = "Selects the namespaces the operators of its namespace watch (older version, without upgradeStrategy)."
        )]
        pub struct OperatorGroupSpec {
            /// Selects the target namespaces by label; used when `targetNamespaces`
            /// is empty. Neither set means all namespaces.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub selector: Option<LabelSelector>,

            /// Explicit list of target namespaces; takes precedence over `selector`.
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            pub target_namespaces: Vec<String>,

            /// ServiceAccount in this namespace whose permissions scope the
            /// installation of operators.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub service_account_name: Option<String>,

            /// When true, OLM does not update the group's `olm.providedAPIs`
            /// annotation; an administrator maintains it.
            #[serde(
                default,
                rename = "staticProvidedAPIs",
                skip_serializing_if = "Option::is_none"
            )]
            pub static_provided_apis: Option<bool>,
        }
    }

    /// What OLM computed for an OperatorGroup (v1alpha2).
    #[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    #[schemars(transform = |s: &mut schemars::Schema| crate::field_schema::require(s, &["lastUpdated"]))]
    pub struct OperatorGroupStatus {
        /// The namespaces the group's operators watch; `[""]` means all.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub namespaces: Vec<String>,

        /// The ServiceAccount named by `spec.serviceAccountName`, once found.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub service_account_ref: Option<ObjectReference>,

        /// When `namespaces` last changed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub last_updated: Option<Time>,
    }
}
