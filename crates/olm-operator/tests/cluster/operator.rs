//! The Operator aggregate object: created for an operator installed by a
//! Subscription, listing the objects that carry its component label.

use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
};
use olm_api::{
    csv::ClusterServiceVersion, operator::Operator, operator_group::OperatorGroup,
    subscription::Subscription,
};
use serde_json::json;

use crate::{
    RunningOperator,
    csv_lifecycle::{
        CSV_NAME, create_widget_crd, delete_crd, explained, own_namespace_group, wait_for,
        wait_for_csv_phase, widget_csv,
    },
    init_logs, olm_crds_installed,
};

#[tokio::test]
async fn an_installed_operator_gets_an_operator_object_listing_its_components() {
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let test_namespace = plane.namespace("widget-aggregate").await;
    let namespace = test_namespace.name().to_owned();
    let client = plane.client().await;
    let operator = RunningOperator::start(&namespace).await;
    let crd = create_widget_crd(&client, &namespace).await;

    explained(&namespace, async {
        Api::<OperatorGroup>::namespaced(client.clone(), &namespace)
            .create(&PostParams::default(), &own_namespace_group(&namespace))
            .await
            .unwrap();
        // A Subscription that installed the CSV, as catalog-operator leaves it.
        let subscriptions: Api<Subscription> = Api::namespaced(client.clone(), &namespace);
        let subscription: Subscription = serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "Subscription",
            "metadata": { "name": "widget-sub", "namespace": namespace },
            "spec": { "name": "widget", "source": "gadget-catalog", "sourceNamespace": namespace }
        }))
        .unwrap();
        subscriptions
            .create(&PostParams::default(), &subscription)
            .await
            .unwrap();
        subscriptions
            .patch_status(
                "widget-sub",
                &PatchParams::default(),
                &Patch::Merge(
                    json!({ "status": { "installedCSV": CSV_NAME, "state": "AtLatestKnown", "lastUpdated": "2026-01-01T00:00:00Z" } }),
                ),
            )
            .await
            .unwrap();
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &namespace);
        csvs.create(&PostParams::default(), &widget_csv(&namespace))
            .await
            .unwrap();
        wait_for_csv_phase(&csvs, CSV_NAME, "Succeeded", "InstallSucceeded").await;

        let name = format!("widget.{namespace}");
        let label = format!("operators.coreos.com/{name}");
        let operators: Api<Operator> = Api::all(client.clone());
        let found = wait_for(&operators, &name, "operator with its components", |o| {
            o.and_then(|o| o.status.clone())
                .and_then(|s| s.components)
                .is_some_and(|c| {
                    let kinds: Vec<&str> =
                        c.refs.iter().filter_map(|r| r.kind.as_deref()).collect();
                    [
                        "ClusterServiceVersion",
                        "Deployment",
                        "Subscription",
                        "OperatorCondition",
                    ]
                    .iter()
                    .all(|k| kinds.contains(k))
                        && c.refs.iter().any(|r| {
                            r.kind.as_deref() == Some("ClusterServiceVersion")
                                && r.conditions.first().is_some_and(|c| c.type_ == "Succeeded")
                        })
                })
        })
        .await
        .unwrap();
        let components = found.status.unwrap().components.unwrap();
        let selector = components
            .label_selector
            .unwrap()
            .match_expressions
            .unwrap();
        assert_eq!(
            (selector[0].key.as_str(), selector[0].operator.as_str()),
            (label.as_str(), "Exists")
        );
        let csv_ref = components
            .refs
            .iter()
            .find(|r| r.kind.as_deref() == Some("ClusterServiceVersion"))
            .unwrap();
        assert_eq!(
            (
                csv_ref.name.as_deref(),
                csv_ref.namespace.as_deref(),
                csv_ref.api_version.as_deref()
            ),
            (
                Some(CSV_NAME),
                Some(namespace.as_str()),
                Some("operators.coreos.com/v1alpha1")
            )
        );
        operators.delete(&name, &Default::default()).await.unwrap();
    })
    .await;

    operator.stop().await;
    delete_crd(&client, &crd).await;
}
