//! `Subscription` (`operators.coreos.com/v1alpha1`): a user's request to install
//! an operator package from a catalog and keep it updated along a channel.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::core::v1::{
        Affinity, EnvFromSource, EnvVar, ObjectReference, ResourceRequirements, Toleration, Volume,
        VolumeMount,
    },
    apimachinery::pkg::apis::meta::v1::{LabelSelector, Time},
};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{conditions::impl_status_condition, open_value::open_string};

/// Which operator package to install, from which catalog, along which channel,
/// and how its deployments are to be adjusted.
// Every `printcolumn(...)` repeats `type_ = "string"`, which clippy mistakes for
// duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "Subscription",
    plural = "subscriptions",
    singular = "subscription",
    shortname = "sub",
    shortname = "subs",
    category = "olm",
    namespaced,
    status = "SubscriptionStatus",
    derive = "PartialEq",
    doc = "A request to install an operator package from a catalog and keep it up to date along a channel.",
    printcolumn(
        name = "Package",
        type_ = "string",
        json_path = ".spec.name",
        description = "The package subscribed to"
    ),
    printcolumn(
        name = "Source",
        type_ = "string",
        json_path = ".spec.source",
        description = "The catalog the package comes from"
    ),
    printcolumn(
        name = "Channel",
        type_ = "string",
        json_path = ".spec.channel",
        description = "The channel followed"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionSpec {
    /// Name of the CatalogSource to install from.
    pub source: String,

    /// Namespace of that CatalogSource: this namespace or the global catalog
    /// namespace.
    pub source_namespace: String,

    /// Name of the operator package to install.
    #[serde(rename = "name")]
    pub package: String,

    /// Channel of the package to follow; the package's default channel when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,

    /// Name of the ClusterServiceVersion to install first; later upgrades follow
    /// the channel from there.
    #[serde(
        default,
        rename = "startingCSV",
        skip_serializing_if = "Option::is_none"
    )]
    pub starting_csv: Option<String>,

    /// `Automatic` (default) or `Manual`: whether InstallPlans for this
    /// Subscription wait for a user to approve them. Only the exact value
    /// `Manual` requires approval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_plan_approval: Option<Approval>,

    /// Adjustments OLM applies to every Deployment of the installed operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<SubscriptionConfig>,
}

open_string! {
    /// InstallPlan approval mode (Subscription `spec.installPlanApproval`,
    /// InstallPlan `spec.approval`). Anything but `Manual` behaves as `Automatic`.
    pub struct Approval (schema = open) {
        /// InstallPlans run as soon as they are created.
        AUTOMATIC = "Automatic",
        /// InstallPlans wait until `spec.approved` is set to true.
        MANUAL = "Manual",
    }
}

/// Adjustments OLM applies to the Deployments of a subscribed operator.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionConfig {
    /// Accepted for compatibility and not used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,

    /// Replaces the node selector of the operator's pods.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,

    /// Tolerations appended to the operator's pods (if not already present).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,

    /// Replaces the resources of every container of the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,

    /// Sources of environment variables appended to every container.
    #[serde(default, rename = "envFrom", skip_serializing_if = "Vec::is_empty")]
    pub env_from: Vec<EnvFromSource>,

    /// Environment variables merged by name into every container (these win).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,

    /// Volumes merged by name into the operator's pods (these win).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Volume>,

    /// Volume mounts merged by name into every container (these win).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volume_mounts: Vec<VolumeMount>,

    /// Overrides the affinity of the operator's pods, per sub-field; an empty
    /// sub-field clears it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,

    /// Annotations added to the operator's Deployments and pod templates (and
    /// owned APIServices) for keys not already set.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// What OLM observed and decided for a Subscription.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = |s: &mut schemars::Schema| crate::field_schema::require(s, &["lastUpdated"]))]
pub struct SubscriptionStatus {
    /// The ClusterServiceVersion the Subscription currently resolves to (the
    /// one being installed or installed).
    #[serde(
        default,
        rename = "currentCSV",
        skip_serializing_if = "Option::is_none"
    )]
    pub current_csv: Option<String>,

    /// The ClusterServiceVersion that is installed for this Subscription.
    #[serde(
        default,
        rename = "installedCSV",
        skip_serializing_if = "Option::is_none"
    )]
    pub installed_csv: Option<String>,

    /// Legacy reference to the latest InstallPlan; see `installPlanRef`.
    #[serde(
        default,
        rename = "installplan",
        skip_serializing_if = "Option::is_none"
    )]
    pub install_plan: Option<InstallPlanReference>,

    /// Reference to the latest InstallPlan created for this Subscription.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_plan_ref: Option<ObjectReference>,

    /// `spec.generation` of the InstallPlan referenced by `installPlanRef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::field_schema::go_int")]
    pub install_plan_generation: Option<i64>,

    /// Where the Subscription stands: `UpgradePending`, `AtLatestKnown`,
    /// `UpgradeFailed`, or empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<SubscriptionState>,

    /// Machine-readable reason for the current state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<SubscriptionConditionReason>,

    /// Health of every catalog the Subscription can resolve from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub catalog_health: Vec<SubscriptionCatalogHealth>,

    /// Conditions of the Subscription (resolution, unpacking, InstallPlan,
    /// catalog health, deprecation).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<SubscriptionCondition>,

    /// When OLM last updated this status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_updated: Option<Time>,
}

open_string! {
    /// Subscription state (`status.state`).
    pub struct SubscriptionState (schema = open) {
        /// Nothing resolved yet.
        NONE = "",
        /// Declared upstream, never set.
        UPGRADE_AVAILABLE = "UpgradeAvailable",
        /// An InstallPlan to reach `currentCSV` exists and is not done.
        UPGRADE_PENDING = "UpgradePending",
        /// `currentCSV` is installed and nothing newer is known.
        AT_LATEST_KNOWN = "AtLatestKnown",
        /// The InstallPlan failed (fail-forward upgrades only).
        UPGRADE_FAILED = "UpgradeFailed",
    }
}

/// Legacy reference from a Subscription to its InstallPlan.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = |s: &mut schemars::Schema| crate::field_schema::require(s, &["apiVersion", "kind", "name", "uuid"]))]
pub struct InstallPlanReference {
    /// API version of the InstallPlan.
    #[serde(default)]
    pub api_version: String,

    /// Kind of the referent (`InstallPlan`).
    #[serde(default)]
    pub kind: String,

    /// Name of the InstallPlan.
    #[serde(default)]
    pub name: String,

    /// UID of the InstallPlan.
    #[serde(default)]
    pub uuid: String,
}

/// Health of one catalog as seen by a Subscription.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = |s: &mut schemars::Schema| crate::field_schema::require(s, &["catalogSourceRef", "healthy", "lastUpdated"]))]
pub struct SubscriptionCatalogHealth {
    /// The CatalogSource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog_source_ref: Option<ObjectReference>,

    /// When this entry was last updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_updated: Option<Time>,

    /// Whether the catalog's registry server is reachable and its spec valid.
    #[serde(default)]
    pub healthy: bool,
}

/// One condition of a Subscription.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionCondition {
    /// Type of the condition, for example `ResolutionFailed`.
    #[serde(rename = "type")]
    pub type_: SubscriptionConditionType,

    /// Status of the condition: `True`, `False` or `Unknown`.
    pub status: String,

    /// Machine-readable reason for the condition's last transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<SubscriptionConditionReason>,

    /// Human-readable detail about the condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,

    /// When the condition was last changed in any way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_heartbeat_time: Option<Time>,

    /// When the condition's status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

impl_status_condition!(SubscriptionCondition, update = last_heartbeat_time);

open_string! {
    /// Subscription condition types (`status.conditions[].type`).
    pub struct SubscriptionConditionType (schema = open) {
        /// A catalog the Subscription can use is unhealthy or missing.
        CATALOG_SOURCES_UNHEALTHY = "CatalogSourcesUnhealthy",
        /// The referenced InstallPlan does not exist.
        INSTALL_PLAN_MISSING = "InstallPlanMissing",
        /// The referenced InstallPlan is not finished (or awaits approval).
        INSTALL_PLAN_PENDING = "InstallPlanPending",
        /// The referenced InstallPlan failed.
        INSTALL_PLAN_FAILED = "InstallPlanFailed",
        /// Dependency resolution for the namespace failed.
        RESOLUTION_FAILED = "ResolutionFailed",
        /// Bundle content is being unpacked.
        BUNDLE_UNPACKING = "BundleUnpacking",
        /// Unpacking bundle content failed.
        BUNDLE_UNPACK_FAILED = "BundleUnpackFailed",
        /// Roll-up of the deprecation conditions below.
        DEPRECATED = "Deprecated",
        /// The package is deprecated in the catalog.
        PACKAGE_DEPRECATED = "PackageDeprecated",
        /// The followed channel is deprecated in the catalog.
        CHANNEL_DEPRECATED = "ChannelDeprecated",
        /// The installed bundle is deprecated in the catalog.
        BUNDLE_DEPRECATED = "BundleDeprecated",
    }
}

open_string! {
    /// Subscription reasons (`status.reason`, `status.conditions[].reason`).
    /// InstallPlan phases also appear as `InstallPlanPending` reasons.
    pub struct SubscriptionConditionReason (schema = open) {
        /// Every catalog is healthy.
        ALL_CATALOG_SOURCES_HEALTHY = "AllCatalogSourcesHealthy",
        /// A catalog is unhealthy or missing.
        UNHEALTHY_CATALOG_SOURCE_FOUND = "UnhealthyCatalogSourceFound",
        /// A catalog was added.
        CATALOG_SOURCES_ADDED = "CatalogSourcesAdded",
        /// A catalog was deleted.
        CATALOG_SOURCES_DELETED = "CatalogSourcesDeleted",
        /// A catalog changed.
        CATALOG_SOURCES_UPDATED = "CatalogSourcesUpdated",
        /// There is no catalog to resolve from.
        NO_CATALOG_SOURCES_FOUND = "NoCatalogSourcesFound",
        /// The referenced InstallPlan was not found.
        REFERENCED_INSTALL_PLAN_NOT_FOUND = "ReferencedInstallPlanNotFound",
        /// The referenced InstallPlan has no phase yet.
        INSTALL_PLAN_NOT_YET_RECONCILED = "InstallPlanNotYetReconciled",
        /// The referenced InstallPlan failed.
        INSTALL_PLAN_FAILED = "InstallPlanFailed",
        /// The resolver found no solution.
        CONSTRAINTS_NOT_SATISFIABLE = "ConstraintsNotSatisfiable",
        /// An error (not the constraints) stopped resolution.
        ERROR_PREVENTED_RESOLUTION = "ErrorPreventedResolution",
        /// Bundle unpacking is in progress.
        UNPACKING_IN_PROGRESS = "UnpackingInProgress",
        /// Bundle unpacking failed.
        BUNDLE_UNPACK_FAILED = "BundleUnpackFailed",
        /// A fatal bundle error stopped unpacking.
        ERROR_PREVENTED_UNPACKING = "ErrorPreventedUnpacking",
        /// The InstallPlan could not be created or updated.
        ENSURE_INSTALL_PLAN_FAILED = "EnsureInstallPlanFailed",
        /// Declared upstream, not set.
        INVALID_CATALOG = "InvalidCatalog",
        /// Declared upstream, not set.
        UPGRADE_SUCCEEDED = "UpgradeSucceeded",
    }
}

impl Subscription {
    /// Whether InstallPlans for this Subscription need manual approval (only the
    /// exact value `Manual` does).
    pub fn requires_manual_approval(&self) -> bool {
        self.spec.install_plan_approval.as_ref() == Some(&Approval::MANUAL)
    }
}
