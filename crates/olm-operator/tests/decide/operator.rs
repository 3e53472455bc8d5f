//! The Operator aggregate object: names, adoption labels, components.

use olm_api::subscription::Subscription;
use olm_operator::decide::operator::{
    component_labels, component_ref, csv_component_labels, missing_component_labels, operator_name,
    operator_of_label, operator_status,
};
use serde_json::json;

use super::fixtures::{CsvFixture, sprocket_subscription, widget_operator};

#[test]
fn names_and_labels_follow_package_and_namespace() {
    assert_eq!(
        operator_name("widget", "gadget-system"),
        "widget.gadget-system"
    );
    assert_eq!(operator_name("widget", ""), "widget");
    assert_eq!(
        operator_of_label("operators.coreos.com/widget.gadget-system"),
        Some("widget.gadget-system")
    );
    assert_eq!(operator_of_label("operators.coreos.com/"), None);
    assert_eq!(operator_of_label("olm.managed"), None);
    // The fixture CSV carries one component label, among others.
    assert_eq!(
        component_labels(widget_operator().metadata.labels.as_ref()),
        ["operators.coreos.com/widget-operator.gadget-system"]
    );
}

#[test]
fn the_installing_subscription_names_the_csvs_operator() {
    let mut subscription: Subscription = sprocket_subscription();
    subscription.metadata.namespace = Some("gadget-system".into());
    let installed = subscription.status.get_or_insert_with(Default::default);
    installed.installed_csv = Some("widget-operator.v1.2.0".into());
    let package = subscription.spec.package.clone();
    let labels = csv_component_labels(&widget_operator(), std::slice::from_ref(&subscription));
    assert_eq!(
        labels,
        [format!("operators.coreos.com/{package}.gadget-system")]
    );

    // A copy is never adopted.
    let copy = widget_operator().copied_from("cog-works");
    assert!(csv_component_labels(&copy, &[subscription]).is_empty());

    let wanted = vec!["operators.coreos.com/a.b".to_owned()];
    assert!(missing_component_labels(None, &wanted).is_some());
    let mut present = std::collections::BTreeMap::new();
    present.insert("operators.coreos.com/a.b".to_owned(), String::new());
    assert_eq!(missing_component_labels(Some(&present), &wanted), None);
}

#[test]
fn components_show_conditions_and_sort_stably() {
    let csv = json!({
        "metadata": { "name": "widget-operator.v1.2.0", "namespace": "gadget-system" },
        "status": {
            "phase": "Succeeded", "reason": "InstallSucceeded",
            "message": "install strategy completed with no errors",
            "lastTransitionTime": "2031-01-01T00:00:00Z"
        }
    });
    let deployment = json!({
        "metadata": { "name": "widget-controller", "namespace": "gadget-system" },
        "status": { "conditions": [{ "type": "Available", "status": "True", "reason": "MinimumReplicasAvailable" }] }
    });
    let csv_ref = component_ref(
        "operators.coreos.com/v1alpha1",
        "ClusterServiceVersion",
        &csv,
    );
    assert_eq!(csv_ref.conditions.len(), 1);
    assert_eq!(csv_ref.conditions[0].type_, "Succeeded");
    assert_eq!(csv_ref.conditions[0].status, "True");
    assert_eq!(
        csv_ref.conditions[0].reason.as_deref(),
        Some("InstallSucceeded")
    );
    assert!(csv_ref.conditions[0].last_transition_time.is_some());
    let deployment_ref = component_ref("apps/v1", "Deployment", &deployment);
    assert_eq!(deployment_ref.conditions[0].type_, "Available");

    let forward = operator_status(
        "operators.coreos.com/widget.gadget-system",
        vec![csv_ref.clone(), deployment_ref.clone()],
    );
    let backward = operator_status(
        "operators.coreos.com/widget.gadget-system",
        vec![deployment_ref, csv_ref],
    );
    assert_eq!(forward, backward, "order of listing does not matter");
    let components = forward.components.expect("components");
    let expression = &components
        .label_selector
        .expect("selector")
        .match_expressions
        .expect("expressions")[0];
    assert_eq!(expression.operator, "Exists");
    assert_eq!(
        components.refs[0].kind.as_deref(),
        Some("ClusterServiceVersion")
    );
}
