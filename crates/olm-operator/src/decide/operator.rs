//! The `Operator` aggregate object (`operators.coreos.com/v1`,
//! cluster-scoped): its name, the component label that ties objects to it,
//! which objects get that label (adoption), and its `status.components`.
//!
//! Upstream: `pkg/controller/operators/operator_controller.go`,
//! `adoption_controller.go` and `decorators/operator.go`.
//!
//! - An operator installed by a Subscription for package `<package>` in
//!   `<namespace>` is named `<package>.<namespace>`; its component label is
//!   `operators.coreos.com/<name>` (cut to 63 characters), value `""`.
//! - The Subscription and the CSV it installed carry the label; the CSV's
//!   components (Deployments, ServiceAccounts, Roles, RoleBindings,
//!   ClusterRoles, ClusterRoleBindings, its OperatorCondition, owned CRDs)
//!   are labelled after it. Copies never are.
//! - `status.components` lists every object carrying the label, with its
//!   `status.conditions`; a CSV is shown with one synthetic condition made of
//!   its phase.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use olm_api::{
    csv::ClusterServiceVersion,
    labels,
    operator::{ComponentCondition, Components, OperatorStatus, RichReference},
    subscription::Subscription,
};
use serde_json::Value;

use super::copied_csv::is_copied;

/// The name of the Operator for a package installed in a namespace
/// (`<package>.<namespace>`, just `<package>` for all namespaces).
pub fn operator_name(package: &str, namespace: &str) -> String {
    if namespace.is_empty() {
        package.to_owned()
    } else {
        format!("{package}.{namespace}")
    }
}

/// The Operator name behind a component label key, if the key is one.
pub fn operator_of_label(key: &str) -> Option<&str> {
    key.strip_prefix(labels::OPERATOR_COMPONENT_PREFIX)
        .filter(|name| !name.is_empty() && !name.contains('/'))
}

/// The component label keys on an object.
pub fn component_labels(object_labels: Option<&BTreeMap<String, String>>) -> Vec<String> {
    object_labels
        .into_iter()
        .flatten()
        .filter(|(key, _)| operator_of_label(key).is_some())
        .map(|(key, _)| key.clone())
        .collect()
}

/// The component label a Subscription's operator uses: from its package
/// (`spec.name`, `package` here) and namespace.
pub fn subscription_component_label(subscription: &Subscription) -> Option<String> {
    let package = subscription.spec.package.as_str();
    if package.is_empty() {
        return None;
    }
    let namespace = subscription
        .metadata
        .namespace
        .as_deref()
        .unwrap_or_default();
    Some(labels::operator_component_label(&operator_name(
        package, namespace,
    )))
}

/// The component labels a CSV should carry: those of the Subscriptions that
/// installed it (`status.installedCSV`). Copies carry none.
pub fn csv_component_labels(
    csv: &ClusterServiceVersion,
    subscriptions: &[Subscription],
) -> Vec<String> {
    if is_copied(csv) {
        return Vec::new();
    }
    let name = csv.metadata.name.as_deref();
    subscriptions
        .iter()
        .filter(|s| s.metadata.namespace == csv.metadata.namespace)
        .filter(|s| s.status.as_ref().and_then(|st| st.installed_csv.as_deref()) == name)
        .filter_map(subscription_component_label)
        .collect()
}

/// The labels missing from `object_labels` among `wanted` (each with the
/// value `""`), or `None` when all are there.
pub fn missing_component_labels(
    object_labels: Option<&BTreeMap<String, String>>,
    wanted: &[String],
) -> Option<BTreeMap<String, String>> {
    let missing: BTreeMap<String, String> = wanted
        .iter()
        .filter(|key| object_labels.is_none_or(|l| !l.contains_key(*key)))
        .map(|key| (key.clone(), String::new()))
        .collect();
    (!missing.is_empty()).then_some(missing)
}

/// The kinds listed in `status.components`, as upstream lists them:
/// (API group, version, kind, plural, namespaced).
pub const COMPONENT_KINDS: &[(&str, &str, &str, &str, bool)] = &[
    ("", "v1", "Namespace", "namespaces", false),
    (
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        false,
    ),
    (
        "apiregistration.k8s.io",
        "v1",
        "APIService",
        "apiservices",
        false,
    ),
    (
        "operators.coreos.com",
        "v1alpha1",
        "Subscription",
        "subscriptions",
        true,
    ),
    (
        "operators.coreos.com",
        "v1alpha1",
        "InstallPlan",
        "installplans",
        true,
    ),
    (
        "operators.coreos.com",
        "v1alpha1",
        "ClusterServiceVersion",
        "clusterserviceversions",
        true,
    ),
    (
        "operators.coreos.com",
        "v2",
        "OperatorCondition",
        "operatorconditions",
        true,
    ),
    ("apps", "v1", "Deployment", "deployments", true),
    ("", "v1", "Service", "services", true),
    ("", "v1", "Secret", "secrets", true),
    ("", "v1", "ConfigMap", "configmaps", true),
    ("", "v1", "ServiceAccount", "serviceaccounts", true),
    ("rbac.authorization.k8s.io", "v1", "Role", "roles", true),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
        true,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
        false,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
    ),
];

/// One labelled object as the Operator's status shows it. `object` is the
/// object's JSON (`metadata`, and `status` when it has conditions).
pub fn component_ref(api_version: &str, kind: &str, object: &Value) -> RichReference {
    let metadata = &object["metadata"];
    let text = |value: &Value| value.as_str().map(str::to_owned);
    let conditions = if kind == "ClusterServiceVersion" {
        csv_conditions(&object["status"])
    } else {
        serde_json::from_value::<Vec<ComponentCondition>>(object["status"]["conditions"].clone())
            .unwrap_or_default()
    };
    RichReference {
        api_version: Some(api_version.to_owned()),
        kind: Some(kind.to_owned()),
        name: text(&metadata["name"]),
        namespace: text(&metadata["namespace"]),
        conditions,
        ..RichReference::default()
    }
}

/// A CSV's one synthetic condition: its phase as the type, status True,
/// with reason, message and times.
fn csv_conditions(status: &Value) -> Vec<ComponentCondition> {
    let Some(phase) = status["phase"].as_str().filter(|p| !p.is_empty()) else {
        return Vec::new();
    };
    let time = |key: &str| serde_json::from_value(status[key].clone()).ok();
    vec![ComponentCondition {
        type_: phase.to_owned(),
        status: "True".to_owned(),
        reason: status["reason"].as_str().map(str::to_owned),
        message: status["message"].as_str().map(str::to_owned),
        last_update_time: time("lastUpdateTime"),
        last_transition_time: time("lastTransitionTime"),
    }]
}

/// The Operator's status for its component label and the labelled objects:
/// the selector `{matchExpressions: [{key: <label>, operator: Exists}]}` and
/// the references sorted by kind, namespace and name so that an unchanged
/// set is never rewritten.
pub fn operator_status(label_key: &str, mut refs: Vec<RichReference>) -> OperatorStatus {
    refs.sort_by(|a, b| (&a.kind, &a.namespace, &a.name).cmp(&(&b.kind, &b.namespace, &b.name)));
    OperatorStatus {
        components: Some(Components {
            label_selector: Some(LabelSelector {
                match_expressions: Some(vec![LabelSelectorRequirement {
                    key: label_key.to_owned(),
                    operator: "Exists".to_owned(),
                    values: None,
                }]),
                match_labels: None,
            }),
            refs,
        }),
    }
}
