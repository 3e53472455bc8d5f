//! `OperatorHub` (`config.openshift.io/v1`, cluster-scoped): which default
//! catalogs the marketplace operator installs. Matches OpenShift's CRD.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::optional_spec::optional_spec;

/// The name of the one OperatorHub the marketplace operator reads.
pub const OPERATOR_HUB_NAME: &str = "cluster";

optional_spec! {
    [#[serde(rename_all = "camelCase")]]
    /// Which default catalogs to install.
    #[derive(CustomResource, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
    #[kube(
        group = "config.openshift.io",
        version = "v1",
        kind = "OperatorHub",
        plural = "operatorhubs",
        singular = "operatorhub",
        status = "OperatorHubStatus",
        derive = "PartialEq",
        doc = "Cluster-wide choice of the default catalogs the marketplace operator installs; it reads the one named cluster."
    )]
    pub struct OperatorHubSpec {
        /// When true, every default catalog is disabled unless `sources` enables it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub disable_all_default_sources: Option<bool>,

        /// Per-catalog settings that take precedence over
        /// `disableAllDefaultSources`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub sources: Vec<HubSource>,
    }
}

/// Whether one default catalog is enabled.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct HubSource {
    /// Name of the default catalog.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub name: Option<String>,

    /// Whether the catalog is disabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
}

/// What the marketplace operator did with each default catalog.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct OperatorHubStatus {
    /// One entry per default catalog.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<HubSourceStatus>,

    /// Ours: marketplace and each OLM component, with the conditions and
    /// versions an OpenShift ClusterOperator would report; written only where
    /// the cluster has no ClusterOperator API.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub components: Vec<HubComponentStatus>,
}

/// How one component is doing (ours), as its ClusterOperator would say.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct HubComponentStatus {
    /// The name of the ClusterOperator it stands for (`marketplace`,
    /// `operator-lifecycle-manager`, ...).
    pub name: String,

    /// `Available`, `Progressing`, `Degraded` and `Upgradeable`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<crate::cluster_operator::ClusterOperatorCondition>,

    /// The versions rolled out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub versions: Vec<crate::cluster_operator::OperandVersion>,
}

/// The state of one default catalog.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct HubSourceStatus {
    /// Name of the default catalog.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub name: Option<String>,

    /// Whether the catalog is disabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,

    /// Outcome of applying the setting, for example `Success` or `Error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,

    /// Human-readable detail, such as an error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}
