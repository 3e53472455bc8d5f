//! `Operator` (`operators.coreos.com/v1`, cluster-scoped): an aggregate view of
//! one installed operator and every object that belongs to it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{conditions::impl_status_condition, optional_spec::optional_spec};

optional_spec! {
    []
    /// An Operator has no settings; OLM creates it and fills in its status.
    #[derive(CustomResource, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
    #[kube(
        group = "operators.coreos.com",
        version = "v1",
        kind = "Operator",
        plural = "operators",
        singular = "operator",
        category = "olm",
        status = "OperatorStatus",
        derive = "PartialEq",
        doc = "An installed operator and the objects that belong to it."
    )]
    pub struct OperatorSpec {}
}

/// The objects that make up an operator.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct OperatorStatus {
    /// The operator's components and how they are selected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub components: Option<Components>,
}

/// The components of an operator.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = |s: &mut schemars::Schema| crate::field_schema::require(s, &["labelSelector"]))]
pub struct Components {
    /// Selects the components: objects labelled `operators.coreos.com/<operator name>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,

    /// The selected components, each with its conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refs: Vec<RichReference>,
}

/// A reference to a component, with that component's status conditions.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-map-type" = "atomic"))]
pub struct RichReference {
    /// API version of the component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,

    /// Path to a part of the component, if the reference is to a part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_path: Option<String>,

    /// Kind of the component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,

    /// Name of the component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,

    /// Namespace of the component (empty for cluster-scoped components).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,

    /// resourceVersion of the component when it was observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,

    /// UID of the component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,

    /// The component's own status conditions (for a ClusterServiceVersion, one
    /// condition whose type is its phase).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ComponentCondition>,
}

/// One status condition of an operator component.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = |s: &mut schemars::Schema| crate::field_schema::require(s, &["status", "type"]))]
pub struct ComponentCondition {
    /// Type of the condition, as the component reports it.
    #[serde(default, rename = "type")]
    pub type_: String,

    /// Status of the condition: `True`, `False` or `Unknown`.
    #[serde(default)]
    pub status: String,

    /// Machine-readable reason for the condition's last transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,

    /// Human-readable detail about the condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,

    /// When the condition was last observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,

    /// When the condition's status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

impl_status_condition!(ComponentCondition, update = last_update_time);
