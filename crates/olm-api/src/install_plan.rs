//! `InstallPlan` (`operators.coreos.com/v1alpha1`): the resolved set of objects
//! catalog-operator creates to install or upgrade the operators of a namespace.

use k8s_openapi::{api::core::v1::ObjectReference, apimachinery::pkg::apis::meta::v1::Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{conditions::impl_status_condition, open_value::open_string, subscription::Approval};

/// Which ClusterServiceVersions an InstallPlan installs and whether it may run.
// Every `printcolumn(...)` repeats `type_ = "string"`, which clippy mistakes for
// duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "InstallPlan",
    plural = "installplans",
    singular = "installplan",
    shortname = "ip",
    category = "olm",
    namespaced,
    status = "InstallPlanStatus",
    derive = "PartialEq",
    doc = "The objects OLM creates to install or upgrade the operators of a namespace, and their progress.",
    printcolumn(
        name = "CSV",
        type_ = "string",
        json_path = ".spec.clusterServiceVersionNames[0]",
        description = "The first ClusterServiceVersion the plan installs"
    ),
    printcolumn(
        name = "Approval",
        type_ = "string",
        json_path = ".spec.approval",
        description = "Whether the plan needs manual approval"
    ),
    printcolumn(name = "Approved", type_ = "boolean", json_path = ".spec.approved")
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = |s: &mut schemars::Schema| crate::field_schema::require(s, &["approval", "approved", "clusterServiceVersionNames"]))]
pub struct InstallPlanSpec {
    /// Name of the CatalogSource the plan was resolved from (informational).
    #[serde(default, rename = "source", skip_serializing_if = "Option::is_none")]
    pub catalog_source: Option<String>,

    /// Namespace of that CatalogSource (informational).
    #[serde(
        default,
        rename = "sourceNamespace",
        skip_serializing_if = "Option::is_none"
    )]
    pub catalog_source_namespace: Option<String>,

    /// Names of the ClusterServiceVersions the plan installs.
    #[serde(default, rename = "clusterServiceVersionNames")]
    pub cluster_service_version_names: Vec<String>,

    /// `Automatic` or `Manual`. A Manual plan waits in `RequiresApproval`
    /// until `approved` is true.
    #[serde(default)]
    pub approval: Approval,

    /// Whether the plan may run. Set this to true to approve a Manual plan.
    #[serde(default)]
    pub approved: bool,

    /// Position of this plan in the namespace's sequence of plans; each new
    /// plan gets a higher number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::field_schema::go_int")]
    pub generation: Option<i64>,
}

/// Progress of an InstallPlan. Status may trail the state of the cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = |s: &mut schemars::Schema| crate::field_schema::require(s, &["catalogSources", "phase"]))]
pub struct InstallPlanStatus {
    /// Where the plan stands: `RequiresApproval`, `Installing`, `Complete` or
    /// `Failed` (empty before the first sync).
    #[serde(default)]
    pub phase: InstallPlanPhase,

    /// Conditions of the plan (`Installed`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<InstallPlanCondition>,

    /// Catalogs the plan's content came from.
    #[serde(default)]
    pub catalog_sources: Vec<String>,

    /// The steps of the plan, in the order they are applied.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plan: Vec<Step>,

    /// Bundles whose content is still being fetched for this plan.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bundle_lookups: Vec<BundleLookup>,

    /// The ServiceAccount whose permissions the plan runs with, when the
    /// OperatorGroup names one (scoped install).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attenuated_service_account_ref: Option<ObjectReference>,

    /// When the plan started installing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,

    /// Human-readable detail about the plan's state, such as the error being
    /// retried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

open_string! {
    /// InstallPlan phase (`status.phase`).
    pub struct InstallPlanPhase (schema = open) {
        /// Not yet synced.
        NONE = "",
        /// Declared upstream, never set.
        PLANNING = "Planning",
        /// Waiting for `spec.approved`.
        REQUIRES_APPROVAL = "RequiresApproval",
        /// Steps are being applied.
        INSTALLING = "Installing",
        /// Every step is done.
        COMPLETE = "Complete",
        /// A step failed for good.
        FAILED = "Failed",
    }
}

/// One condition of an InstallPlan.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstallPlanCondition {
    /// Type of the condition (`Installed`).
    #[serde(
        default,
        rename = "type",
        skip_serializing_if = "InstallPlanConditionType::is_empty"
    )]
    pub type_: InstallPlanConditionType,

    /// Status of the condition: `True`, `False` or `Unknown`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status: String,

    /// When the condition was last changed in any way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,

    /// When the condition's status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,

    /// Machine-readable reason for the condition's last transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<InstallPlanConditionReason>,

    /// Human-readable detail about the condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl_status_condition!(InstallPlanCondition, update = last_update_time);

open_string! {
    /// InstallPlan condition types (`status.conditions[].type`).
    pub struct InstallPlanConditionType (schema = open) {
        /// Declared upstream, not set.
        RESOLVED = "Resolved",
        /// Whether the plan's steps were applied.
        INSTALLED = "Installed",
    }
}

open_string! {
    /// InstallPlan condition reasons (`status.conditions[].reason`).
    pub struct InstallPlanConditionReason (schema = open) {
        /// Declared upstream, not set.
        PLAN_UNKNOWN = "PlanUnknown",
        /// A step could not be applied.
        INSTALL_COMPONENT_FAILED = "InstallComponentFailed",
        /// Declared upstream, not set.
        DEPENDENCIES_CONFLICT = "DependenciesConflict",
        /// The OperatorGroup's ServiceAccount could not be looked up (retried).
        INSTALL_CHECK_FAILED = "InstallCheckFailed",
        /// Written upstream after a recovered `InstallCheckFailed`.
        UNKNOWN = "Unknown",
    }
}

/// One object an InstallPlan creates or checks.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = |s: &mut schemars::Schema| crate::field_schema::require(s, &["resolving", "resource", "status"]))]
pub struct Step {
    /// Name of the ClusterServiceVersion this step belongs to.
    #[serde(default)]
    pub resolving: String,

    /// The object to create.
    #[serde(default)]
    pub resource: StepResource,

    /// Whether a failure of this step may be ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,

    /// Where the step stands: `Unknown`, `NotPresent`, `Present`, `Created`,
    /// `WaitingForApi`, ...
    #[serde(default)]
    pub status: StepStatus,
}

/// The object a step creates, and where its manifest came from.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = |s: &mut schemars::Schema| crate::field_schema::require(s, &["group", "kind", "name", "sourceName", "sourceNamespace", "version"]))]
pub struct StepResource {
    /// Name of the CatalogSource the manifest came from.
    #[serde(default, rename = "sourceName")]
    pub catalog_source: String,

    /// Namespace of that CatalogSource.
    #[serde(default, rename = "sourceNamespace")]
    pub catalog_source_namespace: String,

    /// API group of the object (empty for the core group).
    #[serde(default)]
    pub group: String,

    /// API version of the object.
    #[serde(default)]
    pub version: String,

    /// Kind of the object.
    #[serde(default)]
    pub kind: String,

    /// Name of the object.
    #[serde(default)]
    pub name: String,

    /// The object as JSON, or a JSON reference to the unpacked bundle
    /// ConfigMap that holds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<String>,
}

open_string! {
    /// Status of an InstallPlan step (`status.plan[].status`).
    pub struct StepStatus (schema = open) {
        /// Not yet looked at; will be applied.
        UNKNOWN = "Unknown",
        /// The object does not exist; will be applied.
        NOT_PRESENT = "NotPresent",
        /// The object already existed (and was updated if needed).
        PRESENT = "Present",
        /// The object was created.
        CREATED = "Created",
        /// Declared upstream.
        NOT_CREATED = "NotCreated",
        /// The object was created and its API is not served yet (CRDs).
        WAITING_FOR_API = "WaitingForApi",
        /// The kind is not one an InstallPlan may create.
        UNSUPPORTED_RESOURCE = "UnsupportedResource",
    }
}

/// A request to fetch and unpack the content of one bundle for a plan.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = |s: &mut schemars::Schema| crate::field_schema::require(s, &["catalogSourceRef", "identifier", "path", "replaces"]))]
pub struct BundleLookup {
    /// Where to fetch the bundle from, typically an image reference.
    #[serde(default)]
    pub path: String,

    /// Catalog-unique name of the bundle (its CSV name).
    #[serde(default)]
    pub identifier: String,

    /// Name of the bundle this one replaces.
    #[serde(default)]
    pub replaces: String,

    /// The CatalogSource the bundle was resolved from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog_source_ref: Option<ObjectReference>,

    /// Conditions of the lookup (`BundleLookupPending`, `BundleLookupFailed`, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<BundleLookupCondition>,

    /// The bundle's properties as JSON, as the resolver saw them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<String>,
}

/// One condition of a bundle lookup.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = |s: &mut schemars::Schema| crate::field_schema::require(s, &["status", "type"]))]
pub struct BundleLookupCondition {
    /// Type of the condition.
    #[serde(default, rename = "type")]
    pub type_: BundleLookupConditionType,

    /// Status of the condition: `True`, `False` or `Unknown`.
    #[serde(default)]
    pub status: String,

    /// Machine-readable reason for the condition's last transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,

    /// Human-readable detail about the condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,

    /// When the condition was last changed in any way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,

    /// When the condition's status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

impl_status_condition!(BundleLookupCondition, update = last_update_time);

open_string! {
    /// Bundle lookup condition types (`status.bundleLookups[].conditions[].type`).
    pub struct BundleLookupConditionType (schema = open) {
        /// The bundle is still being unpacked.
        PENDING = "BundleLookupPending",
        /// Unpacking the bundle failed.
        FAILED = "BundleLookupFailed",
        /// The unpacked content is not yet in the plan's steps.
        NOT_PERSISTED = "BundleLookupNotPersisted",
    }
}

/// Known reasons of bundle lookup conditions.
pub mod bundle_lookup_reason {
    /// The bundle contents are not yet in the plan.
    pub const BUNDLE_NOT_UNPACKED: &str = "BundleNotUnpacked";
    /// The unpack Job has not started.
    pub const JOB_NOT_STARTED: &str = "JobNotStarted";
    /// The unpack Job has not completed.
    pub const JOB_INCOMPLETE: &str = "JobIncomplete";
    /// The CatalogSource the bundle came from is gone.
    pub const CATALOG_SOURCE_MISSING: &str = "CatalogSourceMissing";
}

impl InstallPlan {
    /// Whether the plan reached a phase it does not leave by itself.
    pub fn is_terminal(&self) -> bool {
        self.status.as_ref().is_some_and(|s| {
            s.phase == InstallPlanPhase::COMPLETE || s.phase == InstallPlanPhase::FAILED
        })
    }
}
