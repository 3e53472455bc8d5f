//! `Config` (`samples.operator.openshift.io/v1`, cluster-scoped, named
//! `cluster`): how the samples operator keeps OpenShift's sample
//! ImageStreams and Templates. Field names and constants match OpenShift's
//! `samples/v1` API; the schema keeps upstream's validations of the spec
//! (the pattern on `spec.managementState`, the limits and CEL rule on
//! `spec.skippedHelmCharts`) and its CRD annotations, but puts no enum or
//! pattern on status, so that an older binary can always write what it knows
//! (rule 4 of our conventions).

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::conditions::StatusCondition;

/// The API group.
pub const GROUP: &str = "samples.operator.openshift.io";

/// The name of the one Config the samples operator reads.
pub const CONFIG_NAME: &str = "cluster";

/// The finalizer that removes the samples when the Config is deleted.
pub const CONFIG_FINALIZER: &str = "samples.operator.openshift.io/finalizer";

/// The label on every sample the operator manages (`"true"`); skipped
/// samples get `"false"`.
pub const MANAGED_LABEL: &str = "samples.operator.openshift.io/managed";

/// The annotation recording the operator version that wrote a sample.
pub const VERSION_ANNOTATION: &str = "samples.operator.openshift.io/version";

/// The namespace the operator runs in upstream, and keeps its ConfigMaps in.
pub const OPERATOR_NAMESPACE: &str = "openshift-cluster-samples-operator";

/// The namespace the samples live in.
pub const SAMPLES_NAMESPACE: &str = "openshift";

/// The pattern upstream's CRD puts on `spec.managementState`.
pub const MANAGEMENT_STATE_PATTERN: &str = "^(Managed|Unmanaged|Force|Removed)$";

/// The CEL rule upstream's CRD puts on `spec.skippedHelmCharts`: every name
/// is a lowercase DNS subdomain (a Kubernetes resource name).
pub const SKIPPED_HELM_CHARTS_RULE: &str =
    r"self.all(x, x.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'))";

/// The message the API server returns when [`SKIPPED_HELM_CHARTS_RULE`]
/// fails, as upstream words it.
pub const SKIPPED_HELM_CHARTS_MESSAGE: &str = "skippedHelmCharts must be a valid Kubernetes resource name. May contain only lowercase alphanumeric characters, hyphens and periods, and each period separated segment must begin and end with an alphanumeric character";

/// `spec.managementState` / `status.managementState` values.
pub mod management_state {
    /// Samples are created, updated and put back.
    pub const MANAGED: &str = "Managed";
    /// Nothing is touched.
    pub const UNMANAGED: &str = "Unmanaged";
    /// Managed samples are removed.
    pub const REMOVED: &str = "Removed";
    /// Accepted by the schema, treated as `Managed` (upstream does the same).
    pub const FORCE: &str = "Force";
}

/// Architectures (`spec.architectures`), as upstream spells them.
pub mod architecture {
    /// Intel and AMD 64-bit; `amd64` means the same.
    pub const X86_64: &str = "x86_64";
    /// The Go spelling of `x86_64`.
    pub const AMD64: &str = "amd64";
    /// 64-bit ARM.
    pub const ARM64: &str = "arm64";
    /// The inventory directory spelling of `arm64`.
    pub const AARCH64: &str = "aarch64";
    /// IBM Power, little-endian.
    pub const PPC64LE: &str = "ppc64le";
    /// IBM Z.
    pub const S390X: &str = "s390x";
}

/// Condition types of `status.conditions`.
pub mod condition {
    /// Credentials to import from the samples registry exist.
    pub const IMPORT_CREDENTIALS_EXIST: &str = "ImportCredentialsExist";
    /// The samples exist in the `openshift` namespace.
    pub const SAMPLES_EXIST: &str = "SamplesExist";
    /// The spec is valid.
    pub const CONFIGURATION_VALID: &str = "ConfigurationValid";
    /// Deprecated: accepted, never set.
    pub const IMAGE_CHANGES_IN_PROGRESS: &str = "ImageChangesInProgress";
    /// A switch to `Removed` is under way.
    pub const REMOVE_PENDING: &str = "RemovePending";
    /// Deprecated: accepted, never set.
    pub const MIGRATION_IN_PROGRESS: &str = "MigrationInProgress";
    /// Some ImageStream tags failed to import.
    pub const IMPORT_IMAGE_ERRORS_EXIST: &str = "ImportImageErrorsExist";
}

/// How the samples operator manages the samples.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "samples.operator.openshift.io",
    version = "v1",
    kind = "Config",
    plural = "configs",
    singular = "config",
    status = "ConfigStatus",
    derive = "PartialEq",
    annotation(
        "api-approved.openshift.io",
        "https://github.com/openshift/api/pull/513"
    ),
    annotation("api.openshift.io/merged-by-featuregates", "true"),
    annotation("description", "Extension for configuring openshift samples operator."),
    annotation("displayName", "ConfigsSamples"),
    annotation("include.release.openshift.io/ibm-cloud-managed", "true"),
    annotation("include.release.openshift.io/self-managed-high-availability", "true"),
    doc = "The configuration and detailed status of the samples operator; it reads the one named cluster."
)]
#[serde(rename_all = "camelCase")]
pub struct ConfigSpec {
    /// `Managed` (samples are created, updated and put back), `Unmanaged`
    /// (nothing is touched) or `Removed` (managed samples are deleted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = MANAGEMENT_STATE_PATTERN))]
    pub management_state: Option<String>,

    /// The registry image references point at instead of the inventory's
    /// (`host[:port]`, optionally with a path); empty keeps them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples_registry: Option<String>,

    /// The architecture whose samples are installed (one entry); chosen from
    /// the operator's own architecture when the Config is created and not
    /// changeable afterwards.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub architectures: Vec<String>,

    /// ImageStreams (by name) the operator leaves alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped_imagestreams: Vec<String>,

    /// Templates (by name) the operator leaves alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped_templates: Vec<String>,

    /// Helm charts (by name) the operator leaves alone; accepted and kept.
    /// At most 16, each a Kubernetes resource name (lowercase alphanumerics,
    /// hyphens and periods, each period-separated segment beginning and
    /// ending with an alphanumeric, 1 to 253 characters), none twice.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16), inner(length(min = 1, max = 253)))]
    #[schemars(extend(
        "x-kubernetes-list-type" = "set",
        "x-kubernetes-validations" = [{
            "rule": SKIPPED_HELM_CHARTS_RULE,
            "message": SKIPPED_HELM_CHARTS_MESSAGE,
        }],
    ))]
    pub skipped_helm_charts: Vec<String>,
}

/// What the samples operator has done.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigStatus {
    /// The management state in effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub management_state: Option<String>,

    /// How things stand: `SamplesExist`, `ImportCredentialsExist`,
    /// `ConfigurationValid`, `RemovePending`, `ImportImageErrorsExist`
    /// (`ImageChangesInProgress` and `MigrationInProgress` are deprecated).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ConfigCondition>,

    /// The samples registry in effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples_registry: Option<String>,

    /// The architectures in effect.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub architectures: Vec<String>,

    /// The skipped ImageStreams in effect.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped_imagestreams: Vec<String>,

    /// The skipped Templates in effect.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped_templates: Vec<String>,

    /// The operator version the samples were last brought to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// One condition of `status.conditions` (`ConfigCondition`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigCondition {
    /// The condition type.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// When the condition last changed in any way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    /// When `status` last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// Why, in CamelCase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Why, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl ConfigCondition {
    /// A condition without timestamps; [`crate::conditions::set`] adds them.
    pub fn new(type_: &str, status: &str, reason: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        Self {
            type_: type_.to_owned(),
            status: status.to_owned(),
            last_update_time: None,
            last_transition_time: None,
            reason: (!reason.is_empty()).then(|| reason.to_owned()),
            message: (!message.is_empty()).then_some(message),
        }
    }
}

impl StatusCondition for ConfigCondition {
    fn condition_type(&self) -> &str {
        &self.type_
    }

    fn condition_status(&self) -> &str {
        &self.status
    }

    fn last_transition_time(&self) -> Option<Timestamp> {
        self.last_transition_time.as_ref().map(|time| time.0)
    }

    fn set_last_transition_time(&mut self, at: Timestamp) {
        self.last_transition_time = Some(Time(at));
    }

    fn set_last_update_time(&mut self, at: Timestamp) {
        self.last_update_time = Some(Time(at));
    }

    fn clear_timestamps(&mut self) {
        self.last_transition_time = None;
        self.last_update_time = None;
    }
}

impl ConfigSpec {
    /// The management state, `Managed` when unset (as upstream reads it) and
    /// `Force` read as `Managed`.
    pub fn effective_management_state(&self) -> &str {
        match self.management_state.as_deref() {
            None | Some("") | Some(management_state::FORCE) => management_state::MANAGED,
            Some(state) => state,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn upstream_config_reads_and_writes_back_unchanged() {
        let text = r#"{
          "apiVersion": "samples.operator.openshift.io/v1",
          "kind": "Config",
          "metadata": {"name": "cluster", "finalizers": ["samples.operator.openshift.io/finalizer"]},
          "spec": {"managementState": "Managed", "architectures": ["x86_64"],
                   "skippedImagestreams": ["fixture-ruby"], "skippedHelmCharts": ["fixture-chart"]},
          "status": {"managementState": "Managed", "version": "4.18.0",
                     "conditions": [{"type": "SamplesExist", "status": "True",
                                     "lastUpdateTime": "2024-01-01T00:00:00Z",
                                     "lastTransitionTime": "2024-01-01T00:00:00Z"}]}
        }"#;
        let config: Config = serde_json::from_str(text).unwrap();
        assert_eq!(config.spec.skipped_imagestreams, ["fixture-ruby"]);
        let status = config.status.as_ref().unwrap();
        assert!(crate::conditions::is_true(
            &status.conditions,
            condition::SAMPLES_EXIST
        ));
        let back = serde_json::to_value(&config).unwrap();
        let original: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(back, original);
    }

    #[test]
    fn management_state_defaults_to_managed_and_reads_force_as_managed() {
        let mut spec = ConfigSpec::default();
        assert_eq!(spec.effective_management_state(), "Managed");
        spec.management_state = Some("Force".to_owned());
        assert_eq!(spec.effective_management_state(), "Managed");
        spec.management_state = Some("Removed".to_owned());
        assert_eq!(spec.effective_management_state(), "Removed");
    }

    /// The generated CRD, as JSON.
    fn config_crd() -> serde_json::Value {
        let crd = crate::crd::all()
            .into_iter()
            .find(|crd| {
                crd.metadata.name.as_deref() == Some("configs.samples.operator.openshift.io")
            })
            .unwrap();
        serde_json::to_value(crd).unwrap()
    }

    #[test]
    fn crd_validates_skipped_helm_charts_as_upstream_does() {
        let crd = config_crd();
        let charts = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
            ["properties"]["skippedHelmCharts"];
        assert_eq!(charts["type"], "array");
        assert_eq!(charts["maxItems"], 16);
        assert_eq!(charts["x-kubernetes-list-type"], "set");
        assert_eq!(charts["items"]["type"], "string");
        assert_eq!(charts["items"]["minLength"], 1);
        assert_eq!(charts["items"]["maxLength"], 253);
        // Upstream's rule as its YAML spells it: the backslash is doubled for
        // the CEL string literal, so the regex sees `\.`.
        assert_eq!(
            charts["x-kubernetes-validations"],
            serde_json::json!([{
                "rule": r"self.all(x, x.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'))",
                "message": "skippedHelmCharts must be a valid Kubernetes resource name. May contain only lowercase alphanumeric characters, hyphens and periods, and each period separated segment must begin and end with an alphanumeric character",
            }])
        );
    }

    #[test]
    fn crd_carries_upstream_annotations_and_no_status_pattern() {
        let crd = config_crd();
        let annotations = &crd["metadata"]["annotations"];
        assert_eq!(
            annotations["api-approved.openshift.io"],
            "https://github.com/openshift/api/pull/513"
        );
        assert_eq!(
            annotations["include.release.openshift.io/self-managed-high-availability"],
            "true"
        );
        assert_eq!(annotations.as_object().unwrap().len(), 6);
        let properties = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"];
        assert_eq!(
            properties["spec"]["properties"]["managementState"]["pattern"],
            MANAGEMENT_STATE_PATTERN
        );
        let status_state = &properties["status"]["properties"]["managementState"];
        assert_eq!(status_state["type"], "string");
        assert!(status_state.get("pattern").is_none());
    }

    #[test]
    fn condition_update_time_follows_content() {
        let mut list = Vec::new();
        let t0 = Timestamp::from_second(10).unwrap();
        let t1 = Timestamp::from_second(20).unwrap();
        let exists = ConfigCondition::new(condition::SAMPLES_EXIST, "True", "", "");
        assert!(crate::conditions::set(&mut list, exists.clone(), t0));
        assert!(!crate::conditions::set(&mut list, exists, t1));
        let with_message = ConfigCondition::new(condition::SAMPLES_EXIST, "True", "", "again");
        assert!(crate::conditions::set(&mut list, with_message, t1));
        assert_eq!(list[0].last_transition_time, Some(Time(t0)));
        assert_eq!(list[0].last_update_time, Some(Time(t1)));
    }
}
