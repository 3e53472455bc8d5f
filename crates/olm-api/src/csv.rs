//! `ClusterServiceVersion` (`operators.coreos.com/v1alpha1`): one version of an
//! operator, with everything OLM needs to install it and everything a console
//! needs to present it.
//!
//! The types read every real bundle without loss: a field that upstream's Go
//! type omits when empty is an `Option` here, so a CSV that spells out an empty
//! list or object serializes back exactly as written. A field that upstream
//! always writes (it has no `omitempty`) is a plain value, read leniently with
//! `#[serde(default)]` and put back into the schema's `required` list.
//!
//! Phases, reasons, requirement statuses, install mode types and strategy names
//! are open string sets (transparent string newtypes with one constant per
//! known value): an older binary reads and writes back values a newer one
//! invented.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::{
        admissionregistration::v1::RuleWithOperations, apps::v1::DeploymentSpec,
        rbac::v1::PolicyRule,
    },
    apimachinery::pkg::{
        apis::meta::v1::{LabelSelector, Time},
        util::intstr::IntOrString,
    },
};
use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema, transform::Transform};
use serde::{Deserialize, Serialize};

use crate::{field_schema::require, open_value::open_string};

/// The desired state of a `ClusterServiceVersion`: how to install the operator
/// (deployments and the permissions they need), which APIs it owns and needs,
/// where it sits in its package's update graph, and how it is presented.
// Every `printcolumn(...)` repeats `type_ = "string"`, which clippy mistakes for
// duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "ClusterServiceVersion",
    plural = "clusterserviceversions",
    singular = "clusterserviceversion",
    shortname = "csv",
    shortname = "csvs",
    category = "olm",
    namespaced,
    status = "ClusterServiceVersionStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "One version of an operator: how OLM installs it, the APIs it owns and requires, and how it is shown to users.",
    printcolumn(
        name = "Display",
        type_ = "string",
        json_path = ".spec.displayName",
        description = "The name of the CSV"
    ),
    printcolumn(
        name = "Version",
        type_ = "string",
        json_path = ".spec.version",
        description = "The version of the CSV"
    ),
    printcolumn(
        name = "Release",
        type_ = "string",
        json_path = ".spec.release",
        description = "The release of this version of the CSV"
    ),
    printcolumn(
        name = "Replaces",
        type_ = "string",
        json_path = ".spec.replaces",
        description = "The name of a CSV that this one replaces"
    ),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase")
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = Upstream(&["displayName", "install"]))]
pub struct ClusterServiceVersionSpec {
    /// How OLM installs the operator: the deployments to create and the RBAC
    /// their service accounts are granted.
    #[serde(default)]
    pub install: NamedInstallStrategy,

    /// Semantic version of the operator, for example `1.4.2`. Upgrades within a
    /// channel follow `replaces`, `skips` and the `olm.skipRange` annotation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<OperatorVersion>,

    /// Release of this version, for rebuilds that do not change the operator's
    /// version (for example a fixed description). Dot-separated identifiers of
    /// alphanumerics and hyphens, at most 20 characters, no leading zeros in
    /// numeric identifiers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<OperatorRelease>,

    /// Self-declared maturity of the operator, such as `alpha`, `beta` or
    /// `stable`. Shown to users only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maturity: Option<String>,

    /// CustomResourceDefinitions the operator owns (ships and manages) and
    /// requires (expects another operator to provide).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub customresourcedefinitions: Option<CustomResourceDefinitions>,

    /// Aggregated APIs (APIServices) the operator serves itself or requires
    /// from another operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apiservicedefinitions: Option<ApiServiceDefinitions>,

    /// Admission and conversion webhooks served by the operator's deployments;
    /// OLM creates their configurations and serving certificates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhookdefinitions: Option<Vec<WebhookDescription>>,

    /// Built-in Kubernetes APIs the operator needs; installation waits until
    /// the cluster serves each of them.
    #[serde(
        default,
        rename = "nativeAPIs",
        skip_serializing_if = "Option::is_none"
    )]
    pub native_apis: Option<Vec<GroupVersionKind>>,

    /// Oldest Kubernetes version the operator runs on, for example `1.25.0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_kube_version: Option<String>,

    /// Human-readable name of the operator.
    #[serde(default)]
    pub display_name: String,

    /// Long description of the operator, in Markdown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,

    /// Words users may search for to find the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keywords: Option<Vec<String>>,

    /// People or teams who maintain the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintainers: Option<Vec<Maintainer>>,

    /// The organisation that publishes the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<AppLink>,

    /// Links to documentation, source code and other resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub links: Option<Vec<AppLink>>,

    /// Logos of the operator; the first one is shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon: Option<Vec<Icon>>,

    /// Which OperatorGroup target-namespace configurations the operator supports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_modes: Option<Vec<InstallMode>>,

    /// Name of the CSV this one upgrades, within the same channel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,

    /// Free-form labels describing the operator (not the CSV's own metadata
    /// labels).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,

    /// Free-form annotations describing the operator (not the CSV's own
    /// metadata annotations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,

    /// Selects the objects that belong to this operator, for tools that group
    /// them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,

    /// Removal of the operator's custom resources when the CSV is deleted.
    /// Declared upstream but not acted upon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleanup: Option<CleanupSpec>,

    /// Names of CSVs this one can upgrade directly, in addition to the one it
    /// replaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skips: Option<Vec<String>>,

    /// Images the operator uses, so that mirroring tools can copy them for
    /// disconnected clusters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub related_images: Option<Vec<RelatedImage>>,
}

impl ClusterServiceVersionSpec {
    /// The CustomResourceDefinitions this operator owns.
    pub fn owned_crds(&self) -> &[CrdDescription] {
        self.customresourcedefinitions
            .as_ref()
            .and_then(|crds| crds.owned.as_deref())
            .unwrap_or_default()
    }

    /// The CustomResourceDefinitions this operator requires from others.
    pub fn required_crds(&self) -> &[CrdDescription] {
        self.customresourcedefinitions
            .as_ref()
            .and_then(|crds| crds.required.as_deref())
            .unwrap_or_default()
    }

    /// The aggregated APIs this operator serves.
    pub fn owned_api_services(&self) -> &[ApiServiceDescription] {
        self.apiservicedefinitions
            .as_ref()
            .and_then(|apis| apis.owned.as_deref())
            .unwrap_or_default()
    }

    /// The aggregated APIs this operator requires from others.
    pub fn required_api_services(&self) -> &[ApiServiceDescription] {
        self.apiservicedefinitions
            .as_ref()
            .and_then(|apis| apis.required.as_deref())
            .unwrap_or_default()
    }

    /// The webhooks this operator serves.
    pub fn webhooks(&self) -> &[WebhookDescription] {
        self.webhookdefinitions.as_deref().unwrap_or_default()
    }

    /// The install modes this operator declares, supported or not.
    pub fn install_modes(&self) -> &[InstallMode] {
        self.install_modes.as_deref().unwrap_or_default()
    }
}

/// A semantic version as written in the CSV (`spec.version`).
///
/// Kept as the string the author wrote; parsing and ordering belong to the
/// catalog crate, which knows upstream's tolerant semver rules.
#[derive(
    Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema,
)]
#[serde(transparent)]
pub struct OperatorVersion(pub String);

impl OperatorVersion {
    /// The version as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for OperatorVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for OperatorVersion {
    fn from(value: &str) -> Self {
        Self(value.to_owned())
    }
}

/// A release identifier as written in the CSV (`spec.release`), for example
/// `2` or `rc.1`. Validated by the API server with upstream's CEL rules.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(transparent)]
pub struct OperatorRelease(pub String);

impl OperatorRelease {
    /// The release as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for OperatorRelease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for OperatorRelease {
    fn from(value: &str) -> Self {
        Self(value.to_owned())
    }
}

impl JsonSchema for OperatorRelease {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        "OperatorRelease".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "maxLength": 20,
            "x-kubernetes-validations": [
                {
                    "rule": r"self.matches('^[0-9A-Za-z-]+(\\.[0-9A-Za-z-]+)*$')",
                    "message": "release version must be composed of dot-separated identifiers containing only alphanumerics and hyphens",
                },
                {
                    "rule": "!self.split('.').exists(x, x.matches('^0[0-9]+$'))",
                    "message": "numeric identifiers in release version must not have leading zeros",
                },
            ],
        })
    }
}

/// How OLM installs the operator.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[schemars(transform = Upstream(&["strategy"]))]
pub struct NamedInstallStrategy {
    /// Name of the install strategy; `deployment` is the only one upstream
    /// implements.
    #[serde(default)]
    pub strategy: StrategyName,

    /// Details of the `deployment` strategy.
    #[serde(default, skip_serializing_if = "StrategyDetailsDeployment::is_empty")]
    pub spec: StrategyDetailsDeployment,
}

open_string! {
    /// Name of an install strategy (`spec.install.strategy`). A free string upstream.
    pub struct StrategyName (schema = open) {
        /// Create Deployments plus the Roles, ClusterRoles and bindings their
        /// service accounts need.
        DEPLOYMENT = "deployment",
    }
}

/// The `deployment` install strategy: Deployments and the permissions of the
/// service accounts they run as.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = Upstream(&["deployments"]))]
pub struct StrategyDetailsDeployment {
    /// Deployments OLM creates in the CSV's namespace.
    #[serde(default)]
    pub deployments: Vec<StrategyDeploymentSpec>,

    /// Namespaced permissions, granted by a Role and RoleBinding in every
    /// namespace the operator watches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<Vec<StrategyDeploymentPermissions>>,

    /// Cluster-wide permissions, granted by a ClusterRole and
    /// ClusterRoleBinding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_permissions: Option<Vec<StrategyDeploymentPermissions>>,
}

impl StrategyDetailsDeployment {
    /// Whether nothing at all is declared (the whole `spec` was absent).
    pub fn is_empty(&self) -> bool {
        self.deployments.is_empty()
            && self.permissions.is_none()
            && self.cluster_permissions.is_none()
    }
}

/// One Deployment of the install strategy.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[schemars(transform = Upstream(&["name", "spec"]))]
pub struct StrategyDeploymentSpec {
    /// Name of the Deployment.
    #[serde(default)]
    pub name: String,

    /// The Deployment's spec; OLM adds its own labels, annotations and
    /// environment before creating it.
    #[serde(default)]
    pub spec: DeploymentSpec,

    /// Extra labels for the Deployment object itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<BTreeMap<String, String>>,
}

/// RBAC rules granted to one service account.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = Upstream(&["rules", "serviceAccountName"]))]
pub struct StrategyDeploymentPermissions {
    /// The service account, created by OLM if it does not exist.
    #[serde(default)]
    pub service_account_name: String,

    /// The rules granted to it.
    // Keys are matched to fields as Go does, so a rule spelling `apigroups`
    // grants what upstream grants (not in the doc: it is the CRD's text).
    #[serde(default, deserialize_with = "go_policy_rules")]
    pub rules: Vec<PolicyRule>,
}

/// The fields of `rbac/v1.PolicyRule`.
const POLICY_RULE_FIELDS: &[&str] = &[
    "verbs",
    "apiGroups",
    "resources",
    "resourceNames",
    "nonResourceURLs",
];

/// Policy rules read as upstream's Go types read them: each key fills the
/// field [`crate::go_text::match_field`] names (a later key wins over an
/// earlier one for the same field), and unknown keys are ignored.
fn go_policy_rules<'de, D>(deserializer: D) -> Result<Vec<PolicyRule>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    use serde::de::Error as _;
    let Some(rules) = Option::<Vec<serde_json::Value>>::deserialize(deserializer)? else {
        return Ok(Vec::new());
    };
    rules
        .into_iter()
        .map(|rule| {
            let rule = match rule {
                serde_json::Value::Object(object) => {
                    let mut fields = serde_json::Map::new();
                    for (key, value) in object {
                        if let Some(field) = crate::go_text::match_field(&key, POLICY_RULE_FIELDS) {
                            fields.insert(field.to_owned(), value);
                        }
                    }
                    serde_json::Value::Object(fields)
                }
                other => other,
            };
            serde_json::from_value(rule).map_err(D::Error::custom)
        })
        .collect()
}

/// The CustomResourceDefinitions an operator owns and requires.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[schemars(transform = Upstream(&[]))]
pub struct CustomResourceDefinitions {
    /// CRDs shipped in the bundle and managed by this operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owned: Option<Vec<CrdDescription>>,

    /// CRDs another operator must provide before this one is installed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<Vec<CrdDescription>>,
}

/// One CustomResourceDefinition an operator owns or requires, with hints for
/// user interfaces.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = Upstream(&["kind", "name", "version"]))]
pub struct CrdDescription {
    /// Name of the CRD, `<plural>.<group>`.
    #[serde(default)]
    pub name: String,

    /// The API version of the CRD this description speaks of.
    #[serde(default)]
    pub version: String,

    /// Kind of the custom resource.
    #[serde(default)]
    pub kind: String,

    /// Human-readable name of the resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,

    /// What the resource is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,

    /// Kinds of objects the operator creates for each custom resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Vec<ApiResourceReference>>,

    /// Hints for showing fields of the resource's status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_descriptors: Option<Vec<StatusDescriptor>>,

    /// Hints for showing and editing fields of the resource's spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_descriptors: Option<Vec<SpecDescriptor>>,

    /// Hints for actions a user can take on the resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_descriptors: Option<Vec<ActionDescriptor>>,
}

/// The aggregated APIs an operator serves and requires.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[schemars(transform = Upstream(&[]))]
pub struct ApiServiceDefinitions {
    /// APIs served by this operator's deployments; OLM creates their
    /// APIServices, Services and certificates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owned: Option<Vec<ApiServiceDescription>>,

    /// APIs another operator must serve before this one is installed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<Vec<ApiServiceDescription>>,
}

/// One aggregated API an operator serves or requires.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = Upstream(&["group", "kind", "name", "version"]))]
pub struct ApiServiceDescription {
    /// Plural resource name of the API.
    #[serde(default)]
    pub name: String,

    /// API group.
    #[serde(default)]
    pub group: String,

    /// API version; the APIService is named `<version>.<group>`.
    #[serde(default)]
    pub version: String,

    /// Kind of the resource.
    #[serde(default)]
    pub kind: String,

    /// Strategy deployment that serves the API (owned APIs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_name: Option<String>,

    /// Port the serving container listens on (owned APIs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_port: Option<i32>,

    /// Human-readable name of the resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,

    /// What the resource is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,

    /// Kinds of objects the operator creates for each resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Vec<ApiResourceReference>>,

    /// Hints for showing fields of the resource's status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_descriptors: Option<Vec<StatusDescriptor>>,

    /// Hints for showing and editing fields of the resource's spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_descriptors: Option<Vec<SpecDescriptor>>,

    /// Hints for actions a user can take on the resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_descriptors: Option<Vec<ActionDescriptor>>,
}

/// A kind of object the operator creates for a custom resource.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[schemars(transform = Upstream(&["kind", "name", "version"]))]
pub struct ApiResourceReference {
    /// Name of the object, if fixed.
    #[serde(default)]
    pub name: String,

    /// Kind of the object.
    #[serde(default)]
    pub kind: String,

    /// API version of the object.
    #[serde(default)]
    pub version: String,
}

/// A user-interface hint for one field of a resource: spec, status and action
/// descriptors share this shape.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = Upstream(&["path"]))]
pub struct Descriptor {
    /// Dot-separated path of the field within the spec or status, for example
    /// `replicas` or `storage.size`.
    #[serde(default)]
    pub path: String,

    /// Label shown for the field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,

    /// Help text shown for the field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,

    /// Widget hints such as `urn:alm:descriptor:com.tectonic.ui:podCount`.
    #[serde(
        default,
        rename = "x-descriptors",
        skip_serializing_if = "Option::is_none"
    )]
    pub x_descriptors: Option<Vec<String>>,

    /// A raw JSON value attached to the descriptor, kept as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "raw_json_bytes")]
    pub value: Option<serde_json::Value>,
}

/// A hint for a field of a resource's spec.
pub type SpecDescriptor = Descriptor;

/// A hint for a field of a resource's status.
pub type StatusDescriptor = Descriptor;

/// A hint for an action on a resource.
pub type ActionDescriptor = Descriptor;

/// A webhook served by one of the operator's deployments.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = Upstream(&["admissionReviewVersions", "generateName", "sideEffects", "type"]))]
pub struct WebhookDescription {
    /// Base name of the webhook; also names its configuration object.
    #[serde(default)]
    pub generate_name: String,

    /// Kind of webhook.
    #[serde(default, rename = "type")]
    pub type_: WebhookAdmissionType,

    /// Strategy deployment that serves the webhook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_name: Option<String>,

    /// Port of the Service OLM creates in front of the deployment. Defaults to
    /// 443.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535), extend("default" = 443))]
    pub container_port: Option<i32>,

    /// Container port the Service forwards to, as a number or a port name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_port: Option<IntOrString>,

    /// Operations and resources the webhook intercepts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<Vec<RuleWithOperations>>,

    /// What the API server does when the webhook fails: `Ignore` or `Fail`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_policy: Option<String>,

    /// How rules match requests for other versions of the same resource:
    /// `Exact` or `Equivalent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_policy: Option<String>,

    /// Selects the objects, by their labels, that the webhook sees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_selector: Option<LabelSelector>,

    /// Whether calling the webhook has side effects: `None` or `NoneOnDryRun`
    /// (admission webhooks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub side_effects: Option<String>,

    /// Seconds the API server waits for the webhook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i32>,

    /// `AdmissionReview` versions the webhook accepts, preferred first.
    #[serde(default)]
    pub admission_review_versions: Vec<String>,

    /// Whether a mutating webhook is called again after other mutations:
    /// `Never` or `IfNeeded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reinvocation_policy: Option<String>,

    /// URL path the webhook is served at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_path: Option<String>,

    /// CRDs (by name) whose conversion this webhook performs (conversion
    /// webhooks only).
    #[serde(
        default,
        rename = "conversionCRDs",
        skip_serializing_if = "Option::is_none"
    )]
    pub conversion_crds: Option<Vec<String>>,
}

open_string! {
    /// Kind of webhook (`spec.webhookdefinitions[].type`). Upstream's schema
    /// restricts it to the known values; unknown values are still read.
    pub struct WebhookAdmissionType (schema = closed) {
        /// A ValidatingWebhookConfiguration entry.
        VALIDATING = "ValidatingAdmissionWebhook",
        /// A MutatingWebhookConfiguration entry.
        MUTATING = "MutatingAdmissionWebhook",
        /// A conversion webhook for the CRDs named in `conversionCRDs`.
        CONVERSION = "ConversionWebhook",
    }
}

/// Group, version and kind of an API.
#[derive(
    Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema,
)]
#[schemars(transform = Upstream(&["group", "kind", "version"]))]
pub struct GroupVersionKind {
    /// API group; empty for the core group.
    #[serde(default)]
    pub group: String,

    /// API version.
    #[serde(default)]
    pub version: String,

    /// Kind.
    #[serde(default)]
    pub kind: String,
}

/// A person or team maintaining the operator.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[schemars(transform = Upstream(&[]))]
pub struct Maintainer {
    /// Name of the maintainer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,

    /// Contact e-mail address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
}

/// A named link (also used for the provider).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[schemars(transform = Upstream(&[]))]
pub struct AppLink {
    /// Text of the link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,

    /// Target of the link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// An image shown for the operator.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[schemars(transform = Upstream(&["base64data", "mediatype"]))]
pub struct Icon {
    /// The image, base64-encoded.
    #[serde(default, rename = "base64data")]
    pub base64_data: String,

    /// Media type of the image, for example `image/svg+xml`.
    #[serde(default, rename = "mediatype")]
    pub media_type: String,
}

/// Whether the operator supports one kind of OperatorGroup target namespace
/// set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = Upstream(&["supported", "type"]))]
pub struct InstallMode {
    /// The kind of target namespace set.
    #[serde(default, rename = "type")]
    pub type_: InstallModeType,

    /// Whether the operator can run with that kind of target namespace set.
    #[serde(default)]
    pub supported: bool,
}

open_string! {
    /// A kind of OperatorGroup target namespace set (`spec.installModes[].type`).
    /// A free string upstream.
    pub struct InstallModeType (schema = open) {
        /// The operator watches only its own namespace.
        OWN_NAMESPACE = "OwnNamespace",
        /// The operator watches one namespace, not necessarily its own.
        SINGLE_NAMESPACE = "SingleNamespace",
        /// The operator watches several namespaces.
        MULTI_NAMESPACE = "MultiNamespace",
        /// The operator watches every namespace.
        ALL_NAMESPACES = "AllNamespaces",
    }
}

/// An image the operator uses.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[schemars(transform = Upstream(&["image", "name"]))]
pub struct RelatedImage {
    /// Short name of the image's role, for example `operator` or `agent`.
    #[serde(default)]
    pub name: String,

    /// Image reference, ideally pinned by digest.
    #[serde(default)]
    pub image: String,
}

/// Whether custom resources are removed with the operator.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[schemars(transform = Upstream(&["enabled"]))]
pub struct CleanupSpec {
    /// Remove the operator's custom resources when its CSV is deleted.
    #[serde(default)]
    pub enabled: bool,
}

/// What OLM observed while installing and running a `ClusterServiceVersion`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = Upstream(&[]))]
pub struct ClusterServiceVersionStatus {
    /// Where the CSV is in its lifecycle, for example `Pending`, `Installing`,
    /// `Succeeded` or `Failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<CsvPhase>,

    /// Human-readable explanation of the current phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,

    /// Machine-readable reason for the current phase, in CamelCase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<CsvReason>,

    /// When the status was last written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,

    /// When the phase last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,

    /// History of phase and reason changes, newest last (OLM keeps the last
    /// 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<ClusterServiceVersionCondition>>,

    /// One entry per requirement OLM checked: CRDs, APIs, service accounts and
    /// their permissions, the Kubernetes version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requirement_status: Option<Vec<RequirementStatus>>,

    /// When OLM last issued serving certificates for the operator's
    /// APIServices and webhooks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certs_last_updated: Option<Time>,

    /// When those certificates are due for rotation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certs_rotate_at: Option<Time>,

    /// Custom resources awaiting removal before the CSV can go away.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleanup: Option<CleanupStatus>,
}

/// One entry of a CSV's phase history.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = Upstream(&[]))]
pub struct ClusterServiceVersionCondition {
    /// The phase the CSV entered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<CsvPhase>,

    /// Human-readable explanation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,

    /// Machine-readable reason, in CamelCase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<CsvReason>,

    /// When this entry was last written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,

    /// When the CSV entered this phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

open_string! {
    /// Lifecycle phase of a CSV (`status.phase`). Open: a newer OLM may add
    /// phases.
    pub struct CsvPhase (schema = open) {
        /// Not yet seen by OLM (the empty string).
        NONE = "",
        /// Waiting for requirements (CRDs, APIs, permissions, an
        /// OperatorGroup) to be met.
        PENDING = "Pending",
        /// Requirements met; the install strategy is about to run.
        INSTALL_READY = "InstallReady",
        /// Install components created; waiting for them to become healthy.
        INSTALLING = "Installing",
        /// Installed and healthy.
        SUCCEEDED = "Succeeded",
        /// Something is wrong; the reason and message say what.
        FAILED = "Failed",
        /// Declared upstream but never set.
        UNKNOWN = "Unknown",
        /// A newer CSV that replaces this one is being installed.
        REPLACING = "Replacing",
        /// Replaced by a newer CSV that succeeded; about to be deleted.
        DELETING = "Deleting",
    }
}

open_string! {
    /// Reason for a CSV's phase (`status.reason`, `status.conditions[].reason`).
    /// Open: a newer OLM may add reasons.
    pub struct CsvReason (schema = open) {
        /// Requirements have not been checked yet.
        REQUIREMENTS_UNKNOWN = "RequirementsUnknown",
        /// One or more requirements are missing; see `requirementStatus`.
        REQUIREMENTS_NOT_MET = "RequirementsNotMet",
        /// Every requirement is present.
        ALL_REQUIREMENTS_MET = "AllRequirementsMet",
        /// An owned CRD or APIService belongs to another operator.
        OWNER_CONFLICT = "OwnerConflict",
        /// Creating an install component failed; OLM retries.
        INSTALL_COMPONENT_FAILED = "InstallComponentFailed",
        /// Creating an install component was forbidden; OLM waits for a
        /// change of RBAC before retrying.
        INSTALL_COMPONENT_FAILED_NO_RETRY = "InstallComponentFailedNoRetry",
        /// The install strategy cannot be understood.
        INVALID_INSTALL_STRATEGY = "InvalidInstallStrategy",
        /// Waiting for install components.
        INSTALL_WAITING = "InstallWaiting",
        /// The install strategy ran, or completed, successfully.
        INSTALL_SUCCEEDED = "InstallSucceeded",
        /// Install components did not become healthy in time.
        INSTALL_CHECK_FAILED = "InstallCheckFailed",
        /// An install component stopped being healthy.
        COMPONENT_UNHEALTHY = "ComponentUnhealthy",
        /// A newer CSV replaces this one.
        BEING_REPLACED = "BeingReplaced",
        /// A newer CSV replaced this one and succeeded.
        REPLACED = "Replaced",
        /// Install components must be created again.
        NEEDS_REINSTALL = "NeedsReinstall",
        /// Serving certificates must be rotated.
        NEEDS_CERT_ROTATION = "NeedsCertRotation",
        /// An owned APIService or its supporting objects are broken.
        API_SERVICE_RESOURCE_ISSUE = "APIServiceResourceIssue",
        /// An owned APIService's supporting objects must be created again.
        API_SERVICE_RESOURCES_NEED_REINSTALL = "APIServiceResourcesNeedReinstall",
        /// An owned APIService did not become available.
        API_SERVICE_INSTALL_FAILED = "APIServiceInstallFailed",
        /// This CSV is a copy of one running in another namespace.
        COPIED = "Copied",
        /// The install modes are contradictory (for example duplicated).
        INVALID_INSTALL_MODES = "InvalidInstallModes",
        /// The OperatorGroup selects no namespace.
        NO_TARGET_NAMESPACES = "NoTargetNamespaces",
        /// The install modes do not allow the OperatorGroup's namespaces.
        UNSUPPORTED_OPERATOR_GROUP = "UnsupportedOperatorGroup",
        /// The namespace has no OperatorGroup.
        NO_OPERATOR_GROUP = "NoOperatorGroup",
        /// The namespace has more than one OperatorGroup.
        TOO_MANY_OPERATOR_GROUPS = "TooManyOperatorGroups",
        /// Another OperatorGroup with overlapping namespaces provides the same
        /// APIs.
        INTER_OPERATOR_GROUP_OWNER_CONFLICT = "InterOperatorGroupOwnerConflict",
        /// A static OperatorGroup would have to change its provided APIs.
        CANNOT_MODIFY_STATIC_OPERATOR_GROUP_PROVIDED_APIS = "CannotModifyStaticOperatorGroupProvidedAPIs",
        /// RBAC in the namespace changed; requirements are checked again.
        DETECTED_CLUSTER_CHANGE = "DetectedClusterChange",
        /// A webhook definition is invalid.
        INVALID_WEBHOOK_DESCRIPTION = "InvalidWebhookDescription",
        /// The CSV being replaced reports through its OperatorCondition that it
        /// cannot be upgraded now.
        OPERATOR_CONDITION_NOT_UPGRADEABLE = "OperatorConditionNotUpgradeable",
        /// Waiting for cleanup of custom resources (declared upstream, unused).
        WAITING_FOR_CLEANUP = "WaitingOnCleanup",
    }
}

/// The outcome of one requirement check.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[schemars(transform = Upstream(&["group", "kind", "message", "name", "status", "version"]))]
pub struct RequirementStatus {
    /// API group of the required object.
    #[serde(default)]
    pub group: String,

    /// API version of the required object.
    #[serde(default)]
    pub version: String,

    /// Kind of the required object.
    #[serde(default)]
    pub kind: String,

    /// Name of the required object.
    #[serde(default)]
    pub name: String,

    /// Outcome of the check, for example `Present` or `NotPresent`.
    #[serde(default)]
    pub status: RequirementStatusReason,

    /// Human-readable explanation of the outcome.
    #[serde(default)]
    pub message: String,

    /// UID of the object found, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,

    /// Finer-grained checks this requirement depends on, such as single
    /// permission rules of a service account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependents: Option<Vec<DependentStatus>>,
}

/// The outcome of one check a requirement depends on.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[schemars(transform = Upstream(&["group", "kind", "status", "version"]))]
pub struct DependentStatus {
    /// API group of the checked object.
    #[serde(default)]
    pub group: String,

    /// API version of the checked object.
    #[serde(default)]
    pub version: String,

    /// Kind of the checked object.
    #[serde(default)]
    pub kind: String,

    /// Outcome of the check, for example `Satisfied`.
    #[serde(default)]
    pub status: RequirementStatusReason,

    /// UID of the object found, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,

    /// Human-readable explanation of the outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

open_string! {
    /// Outcome of a requirement or dependent check
    /// (`status.requirementStatus[].status`). Open: upstream itself writes values
    /// beyond its declared constants.
    pub struct RequirementStatusReason (schema = open) {
        /// The requirement is present and usable.
        PRESENT = "Present",
        /// The requirement is missing.
        NOT_PRESENT = "NotPresent",
        /// The requirement exists but does not satisfy the CSV.
        PRESENT_NOT_SATISFIED = "PresentNotSatisfied",
        /// The requirement exists but is not available yet.
        PRESENT_NOT_AVAILABLE = "PresentNotAvailable",
        /// A dependent check passed.
        SATISFIED = "Satisfied",
        /// A dependent check failed.
        NOT_SATISFIED = "NotSatisfied",
        /// The deployment backing an owned APIService is in the install
        /// strategy (written by upstream, not declared as a constant there).
        DEPLOYMENT_FOUND = "DeploymentFound",
        /// The deployment backing an owned APIService is not in the install
        /// strategy.
        DEPLOYMENT_NOT_FOUND = "DeploymentNotFound",
    }
}

/// Custom resources awaiting removal.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = Upstream(&[]))]
pub struct CleanupStatus {
    /// Objects still to be deleted, grouped by kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_deletion: Option<Vec<ResourceList>>,
}

/// Objects of one kind awaiting removal.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[schemars(transform = Upstream(&["group", "instances", "kind"]))]
pub struct ResourceList {
    /// API group of the objects.
    #[serde(default)]
    pub group: String,

    /// Kind of the objects.
    #[serde(default)]
    pub kind: String,

    /// The objects.
    #[serde(default)]
    pub instances: Vec<ResourceInstance>,
}

/// One object awaiting removal.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[schemars(transform = Upstream(&["name"]))]
pub struct ResourceInstance {
    /// Name of the object.
    #[serde(default)]
    pub name: String,

    /// Namespace of the object; empty for cluster-scoped objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// Brings a derived object schema in line with controller-gen's output for the
/// same Go type: the listed fields are required (they are `#[serde(default)]`
/// here only so that reading stays lenient, so the default schemars infers from
/// that is dropped as well), and `Option` fields are plain, not `nullable`
/// (upstream's CRD has no `nullable`, so the API server prunes nulls).
struct Upstream(&'static [&'static str]);

impl Transform for Upstream {
    fn transform(&mut self, schema: &mut Schema) {
        not_nullable(schema);
        if let Some(properties) = schema
            .get_mut("properties")
            .and_then(serde_json::Value::as_object_mut)
        {
            for field in self.0 {
                if let Some(property) = properties
                    .get_mut(*field)
                    .and_then(serde_json::Value::as_object_mut)
                {
                    property.remove("default");
                }
            }
        }
        if !self.0.is_empty() {
            require(schema, self.0);
        }
    }
}

/// Removes the `null` type schemars adds for `Option` fields, here and below.
fn not_nullable(schema: &mut Schema) {
    schemars::transform::transform_subschemas(&mut not_nullable, schema);
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    if let Some(types) = object
        .get_mut("type")
        .and_then(serde_json::Value::as_array_mut)
    {
        types.retain(|t| t != "null");
        if let [single] = types.as_slice() {
            let single = single.clone();
            object.insert("type".into(), single);
        }
    }
    if let Some(values) = object
        .get_mut("enum")
        .and_then(serde_json::Value::as_array_mut)
    {
        values.retain(|v| !v.is_null());
    }
    if let Some(variants) = object
        .get_mut("anyOf")
        .and_then(serde_json::Value::as_array_mut)
    {
        variants.retain(|v| v.get("type").is_none_or(|t| t != "null"));
        if let [single] = variants.as_slice()
            && let Some(single) = single.as_object().cloned()
        {
            object.remove("anyOf");
            for (key, value) in single {
                object.entry(key).or_insert(value);
            }
        }
    }
    object.remove("nullable");
}

/// Upstream's descriptor `value` is a Go `json.RawMessage`, which controller-gen
/// describes as base64 bytes; the Rust field keeps whatever JSON was written.
fn raw_json_bytes(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "format": "byte" })
}

#[cfg(test)]
mod tests {
    use kube::{CustomResourceExt, Resource};
    use serde_json::{Value, json};

    use super::*;

    /// A small CSV with made-up names, covering every kind of spec field.
    const WIDGET_CSV: &str = r#"
apiVersion: operators.coreos.com/v1alpha1
kind: ClusterServiceVersion
metadata:
  name: widget-operator.v0.3.1
  namespace: gadget-system
  annotations:
    olm.skipRange: ">=0.1.0 <0.3.1"
spec:
  displayName: Widget Operator
  version: 0.3.1
  release: "2"
  replaces: widget-operator.v0.3.0
  skips: [widget-operator.v0.2.9]
  minKubeVersion: 1.27.0
  maturity: beta
  description: Keeps widgets spinning.
  keywords: [widgets]
  maintainers: [{name: Ada Sprocket, email: ada@widgets.example}]
  provider: {name: Widgets Inc}
  links: [{name: Docs, url: "https://widgets.example/docs"}]
  icon: [{base64data: PHN2Zz48L3N2Zz4=, mediatype: image/svg+xml}]
  labels: {tier: gears}
  selector: {matchLabels: {app: widget}}
  installModes:
    - {type: OwnNamespace, supported: true}
    - {type: AllNamespaces, supported: false}
  nativeAPIs: [{group: apps, version: v1, kind: Deployment}]
  relatedImages: [{name: spinner, image: "registry.example/spinner@sha256:0123"}]
  customresourcedefinitions:
    owned:
      - name: widgets.gadgets.example.test
        version: v1beta2
        kind: Widget
        displayName: Widget
        resources: [{name: "", kind: ConfigMap, version: v1}]
        specDescriptors: [{path: size, x-descriptors: ["urn:alm:descriptor:com.tectonic.ui:podCount"]}]
        statusDescriptors: []
    required: []
  apiservicedefinitions: {}
  webhookdefinitions:
    - generateName: vwidget.gadgets.example.test
      type: ValidatingAdmissionWebhook
      deploymentName: widget-controller
      containerPort: 8443
      targetPort: webhook
      sideEffects: None
      admissionReviewVersions: [v1]
      rules: [{apiGroups: [gadgets.example.test], apiVersions: [v1beta2], operations: [CREATE], resources: [widgets]}]
  install:
    strategy: deployment
    spec:
      deployments:
        - name: widget-controller
          label: {app: widget}
          spec:
            replicas: 1
            selector: {matchLabels: {app: widget}}
            template:
              metadata: {labels: {app: widget}}
              spec:
                serviceAccountName: widget-sa
                containers:
                  - name: manager
                    image: registry.example/widget@sha256:4567
                    resources: {limits: {cpu: 500m}}
      permissions:
        - serviceAccountName: widget-sa
          rules: [{apiGroups: [""], resources: [configmaps], verbs: [get, list]}]
      clusterPermissions:
        - serviceAccountName: widget-sa
          rules: [{apiGroups: [gadgets.example.test], resources: [widgets], verbs: ["*"]}]
"#;

    fn widget_json() -> Value {
        serde_yaml_ng::from_str(WIDGET_CSV).expect("fixture is valid YAML")
    }

    #[test]
    fn fixture_round_trips_without_loss() {
        let original = widget_json();
        let csv: ClusterServiceVersion =
            serde_json::from_value(original.clone()).expect("fixture decodes");
        assert_eq!(csv.spec.display_name, "Widget Operator");
        assert_eq!(csv.spec.install.strategy, StrategyName::DEPLOYMENT);
        assert_eq!(csv.spec.owned_crds()[0].kind, "Widget");
        assert!(csv.spec.required_crds().is_empty());
        assert!(csv.spec.owned_api_services().is_empty());
        assert_eq!(
            csv.spec.webhooks()[0].type_,
            WebhookAdmissionType::VALIDATING
        );
        assert_eq!(
            csv.spec.install_modes()[1].type_,
            InstallModeType::ALL_NAMESPACES
        );
        assert!(!csv.spec.install_modes()[1].supported);

        let written = serde_json::to_value(&csv).expect("CSV serializes");
        assert_eq!(written, original);
    }

    #[test]
    fn missing_required_fields_read_leniently() {
        let csv: ClusterServiceVersion = serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "ClusterServiceVersion",
            "metadata": {"name": "bare.v0.0.1"},
            "spec": {"icon": [{"mediatype": "image/png"}]},
        }))
        .expect("a CSV without install or displayName still decodes");
        assert_eq!(csv.spec.display_name, "");
        assert!(csv.spec.install.spec.is_empty());
        assert_eq!(
            csv.spec
                .icon
                .as_deref()
                .map(|icons| icons[0].base64_data.as_str()),
            Some("")
        );
    }

    #[test]
    fn phase_constants_match_upstream_strings() {
        let expected = [
            "",
            "Pending",
            "InstallReady",
            "Installing",
            "Succeeded",
            "Failed",
            "Unknown",
            "Replacing",
            "Deleting",
        ];
        let known: Vec<&str> = CsvPhase::KNOWN.iter().map(CsvPhase::as_str).collect();
        assert_eq!(known, expected);
        assert_eq!(CsvPhase::SUCCEEDED, "Succeeded");
        assert!(CsvPhase::NONE.is_empty());
    }

    #[test]
    fn reason_constants_match_upstream_strings() {
        let expected = [
            "RequirementsUnknown",
            "RequirementsNotMet",
            "AllRequirementsMet",
            "OwnerConflict",
            "InstallComponentFailed",
            "InstallComponentFailedNoRetry",
            "InvalidInstallStrategy",
            "InstallWaiting",
            "InstallSucceeded",
            "InstallCheckFailed",
            "ComponentUnhealthy",
            "BeingReplaced",
            "Replaced",
            "NeedsReinstall",
            "NeedsCertRotation",
            "APIServiceResourceIssue",
            "APIServiceResourcesNeedReinstall",
            "APIServiceInstallFailed",
            "Copied",
            "InvalidInstallModes",
            "NoTargetNamespaces",
            "UnsupportedOperatorGroup",
            "NoOperatorGroup",
            "TooManyOperatorGroups",
            "InterOperatorGroupOwnerConflict",
            "CannotModifyStaticOperatorGroupProvidedAPIs",
            "DetectedClusterChange",
            "InvalidWebhookDescription",
            "OperatorConditionNotUpgradeable",
            "WaitingOnCleanup",
        ];
        let known: Vec<&str> = CsvReason::KNOWN.iter().map(CsvReason::as_str).collect();
        assert_eq!(known, expected);
    }

    #[test]
    fn other_value_sets_match_upstream_strings() {
        let statuses: Vec<&str> = RequirementStatusReason::KNOWN
            .iter()
            .map(RequirementStatusReason::as_str)
            .collect();
        assert_eq!(
            statuses,
            [
                "Present",
                "NotPresent",
                "PresentNotSatisfied",
                "PresentNotAvailable",
                "Satisfied",
                "NotSatisfied",
                "DeploymentFound",
                "DeploymentNotFound",
            ]
        );
        let modes: Vec<&str> = InstallModeType::KNOWN
            .iter()
            .map(InstallModeType::as_str)
            .collect();
        assert_eq!(
            modes,
            [
                "OwnNamespace",
                "SingleNamespace",
                "MultiNamespace",
                "AllNamespaces"
            ]
        );
        assert_eq!(StrategyName::DEPLOYMENT, "deployment");
    }

    #[test]
    fn unknown_status_values_survive_a_round_trip() {
        let status = json!({
            "phase": "Hibernating",
            "reason": "MoonPhaseUnfavourable",
            "message": "waiting for the tide",
            "lastUpdateTime": "2031-04-05T06:07:08Z",
            "conditions": [{"phase": "Hibernating", "reason": "MoonPhaseUnfavourable"}],
            "requirementStatus": [{
                "group": "gadgets.example.test",
                "version": "v1",
                "kind": "Sprocket",
                "name": "sprockets.gadgets.example.test",
                "status": "PartiallyPresent",
                "message": "half a sprocket",
                "dependents": [{"group": "", "version": "v1", "kind": "Cog", "status": "Wobbly"}],
            }],
        });
        let decoded: ClusterServiceVersionStatus =
            serde_json::from_value(status.clone()).expect("status decodes");
        let phase = decoded.phase.clone().expect("phase is set");
        assert!(!phase.is_known());
        assert_eq!(phase, "Hibernating");
        assert!(!decoded.reason.as_ref().expect("reason is set").is_known());
        assert_eq!(
            serde_json::to_value(&decoded).expect("status serializes"),
            status
        );
    }

    #[test]
    fn unknown_spec_values_survive_a_round_trip() {
        let modes = json!([{"type": "ClusterWideOnTuesdays", "supported": true}]);
        let decoded: Vec<InstallMode> =
            serde_json::from_value(modes.clone()).expect("install modes decode");
        assert!(!decoded[0].type_.is_known());
        assert_eq!(
            serde_json::to_value(&decoded).expect("install modes serialize"),
            modes
        );

        let webhook: WebhookAdmissionType =
            serde_json::from_value(json!("FancyWebhook")).expect("decodes");
        assert_eq!(
            serde_json::to_value(&webhook).expect("serializes"),
            json!("FancyWebhook")
        );
    }

    proptest::proptest! {
        #[test]
        fn any_phase_or_reason_round_trips(value in ".*") {
            let phase = CsvPhase::from(value.as_str());
            let written = serde_json::to_value(&phase).expect("phase serializes");
            proptest::prop_assert_eq!(&written, &json!(value));
            let read: CsvReason = serde_json::from_value(written).expect("reason decodes");
            proptest::prop_assert_eq!(read.as_str(), value.as_str());
        }
    }

    #[test]
    fn resource_names_match_upstream() {
        assert_eq!(ClusterServiceVersion::group(&()), "operators.coreos.com");
        assert_eq!(ClusterServiceVersion::version(&()), "v1alpha1");
        assert_eq!(ClusterServiceVersion::kind(&()), "ClusterServiceVersion");
        assert_eq!(ClusterServiceVersion::plural(&()), "clusterserviceversions");

        let crd = ClusterServiceVersion::crd();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("clusterserviceversions.operators.coreos.com")
        );
        assert_eq!(crd.spec.scope, "Namespaced");
        assert_eq!(
            crd.spec.names.singular.as_deref(),
            Some("clusterserviceversion")
        );
        assert_eq!(
            crd.spec.names.short_names,
            Some(vec!["csv".to_owned(), "csvs".to_owned()])
        );
        assert_eq!(crd.spec.names.categories, Some(vec!["olm".to_owned()]));
        let version = &crd.spec.versions[0];
        assert!(
            version
                .subresources
                .as_ref()
                .and_then(|s| s.status.as_ref())
                .is_some()
        );
        let columns: Vec<(&str, &str, &str)> = version
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| (c.name.as_str(), c.type_.as_str(), c.json_path.as_str()))
            .collect();
        assert_eq!(
            columns,
            [
                ("Display", "string", ".spec.displayName"),
                ("Version", "string", ".spec.version"),
                ("Release", "string", ".spec.release"),
                ("Replaces", "string", ".spec.replaces"),
                ("Phase", "string", ".status.phase"),
            ]
        );
    }

    /// The schema we ship (after the CRD pipeline in [`crate::crd`]).
    fn crd_schema() -> Value {
        let crd = crate::crd::all()
            .into_iter()
            .find(|crd| crd.spec.names.kind == "ClusterServiceVersion")
            .expect("the CSV CRD is generated");
        let schema = crd.spec.versions[0]
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref());
        serde_json::to_value(schema).expect("schema serializes")
    }

    #[test]
    fn schema_requires_what_upstream_requires() {
        let schema = crd_schema();
        let required = |pointer: &str| schema.pointer(&format!("{pointer}/required")).cloned();
        assert_eq!(
            required("/properties/spec"),
            Some(json!(["displayName", "install"]))
        );
        assert_eq!(
            required("/properties/spec/properties/install"),
            Some(json!(["strategy"]))
        );
        assert_eq!(
            required("/properties/spec/properties/webhookdefinitions/items"),
            Some(json!([
                "admissionReviewVersions",
                "generateName",
                "sideEffects",
                "type"
            ]))
        );
        assert_eq!(
            required("/properties/status/properties/requirementStatus/items"),
            Some(json!([
                "group", "kind", "message", "name", "status", "version"
            ]))
        );
        // Lenient reading must not leak defaults into the API server's schema.
        assert_eq!(
            schema.pointer("/properties/spec/properties/displayName/default"),
            None
        );
    }

    #[test]
    fn schema_keeps_status_open_and_spec_enum_where_upstream_has_one() {
        let schema = crd_schema();
        let status = schema.pointer("/properties/status").expect("status schema");
        assert!(
            !status.to_string().contains("\"enum\""),
            "no enum under status: {status}"
        );
        assert_eq!(
            schema.pointer(
                "/properties/spec/properties/webhookdefinitions/items/properties/type/enum"
            ),
            Some(&json!([
                "ValidatingAdmissionWebhook",
                "MutatingAdmissionWebhook",
                "ConversionWebhook"
            ]))
        );
        let release = schema
            .pointer("/properties/spec/properties/release")
            .expect("release schema");
        assert_eq!(release["maxLength"], json!(20));
        assert_eq!(
            release["x-kubernetes-validations"].as_array().map(Vec::len),
            Some(2)
        );
    }

    #[test]
    fn schema_has_no_nullable_fields() {
        // Upstream's CRD has none: optional fields are simply absent.
        let schema = crd_schema();
        assert!(!schema.to_string().contains("\"nullable\""));
    }
}
