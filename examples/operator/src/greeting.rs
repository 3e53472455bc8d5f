//! The `Greeting` custom resource (`greetings.example.olm-rs.dev/v1`): its
//! spec says whom to greet, its status carries the greeting.
//!
//! The doc comments on the fields are the user documentation `kubectl explain
//! greeting.spec` prints, and the schema in the bundles' CRD is generated
//! from these types (`tests/manifests.rs` keeps the committed YAML fresh).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The API group of [`Greeting`].
pub const GROUP: &str = "example.olm-rs.dev";
/// The only version of [`Greeting`].
pub const VERSION: &str = "v1";
/// The CRD's name, `<plural>.<group>`.
pub const CRD_NAME: &str = "greetings.example.olm-rs.dev";
/// The condition type that says whether the greeting is up to date.
pub const READY: &str = "Ready";

/// Whom to greet, and how.
#[derive(CustomResource, Serialize, Deserialize, Debug, Clone, PartialEq, Eq, JsonSchema)]
#[kube(
    group = "example.olm-rs.dev",
    version = "v1",
    kind = "Greeting",
    plural = "greetings",
    namespaced,
    status = "GreetingStatus",
    derive = "PartialEq",
    doc = "A Greeting asks the example operator to greet someone; the greeting appears in its status.",
    // Raw JSON rather than `printcolumn(name = ..)`: clippy reads repeated
    // `type_ = "string"` in the nested form as a duplicated attribute.
    printcolumn = r#"{"name": "Name", "type": "string", "jsonPath": ".spec.name"}"#,
    printcolumn = r#"{"name": "Message", "type": "string", "jsonPath": ".status.message"}"#,
    printcolumn = r#"{"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct GreetingSpec {
    /// Who to greet, for example `world`.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Whether the greeting ends in excitement (`Hello, world!!!`) rather than
    /// a single exclamation mark. Defaults to false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excited: Option<bool>,
}

/// What the operator made of the spec.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GreetingStatus {
    /// The greeting, for example `Hello, world!`. Absent while the spec cannot
    /// be greeted (see the Ready condition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The version of the operator that wrote this status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_version: Option<String>,
    /// The `metadata.generation` of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The latest observations of the Greeting's state. `Ready` is True once
    /// `message` greets the current spec.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}
