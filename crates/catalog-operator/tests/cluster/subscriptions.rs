//! Subscriptions end to end: a Subscription against a catalog served over
//! gRPC is resolved, an InstallPlan appears and installs the bundle's CRD
//! and CSV, and the Subscription's status follows each step.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
};
use olm_api::{
    catalog_source::CatalogSource, csv::ClusterServiceVersion, install_plan::InstallPlan,
    subscription::Subscription,
};
use olm_registry::{CatalogIndex, IndexOptions, RegistryServer, RunningServer};
use serde_json::json;

use crate::{
    RunningOperator, eventually, init_logs, managing_group, olm_crds_installed, plans_complete,
};

const WAIT: Duration = Duration::from_secs(40);

/// A catalog with package `widgets` (channel stable: v1 <- v2) whose
/// bundles carry their objects, and a CRD in an API group unique to `tag`.
pub(crate) async fn serve_widgets(tag: &str) -> (RunningServer, tempfile::TempDir, String) {
    let group = format!("{tag}.test.olm.io");
    let crd = serde_json::to_value(olm_testkit::open_crd(
        &group,
        "widgets",
        "Widget",
        "Namespaced",
        false,
    ))
    .unwrap();
    let csv = |version: &str, replaces: Option<&str>| {
        let mut spec = json!({
            "displayName": "Widgets",
            "version": version,
            "install": {"strategy": "deployment", "spec": {"deployments": []}},
            "installModes": [{"type": "OwnNamespace", "supported": true}, {"type": "SingleNamespace", "supported": true},
                             {"type": "MultiNamespace", "supported": false}, {"type": "AllNamespaces", "supported": true}],
            "customresourcedefinitions": {"owned": [{"name": format!("widgets.{group}"), "version": "v1", "kind": "Widget"}]},
        });
        if let Some(r) = replaces {
            spec["replaces"] = json!(r);
        }
        json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
               "metadata": {"name": format!("widgets.v{version}")}, "spec": spec})
    };
    let b64 = |v: &serde_json::Value| {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(v.to_string())
    };
    let bundle = |version: &str, replaces: Option<&str>| {
        json!({
            "schema": "olm.bundle",
            "name": format!("widgets.v{version}"),
            "package": "widgets",
            "image": format!("quay.io/example/widgets-bundle:v{version}"),
            "properties": [
                {"type": "olm.package", "value": {"packageName": "widgets", "version": version}},
                {"type": "olm.gvk", "value": {"group": group, "version": "v1", "kind": "Widget"}},
                {"type": "olm.bundle.object", "value": {"data": b64(&csv(version, replaces))}},
                {"type": "olm.bundle.object", "value": {"data": b64(&crd)}},
            ]
        })
    };
    let documents = [
        json!({"schema": "olm.package", "name": "widgets", "defaultChannel": "stable"}),
        json!({"schema": "olm.channel", "package": "widgets", "name": "stable",
               "entries": [{"name": "widgets.v1.0.0"}, {"name": "widgets.v2.0.0", "replaces": "widgets.v1.0.0"}]}),
        bundle("1.0.0", None),
        bundle("2.0.0", Some("widgets.v1.0.0")),
        json!({"schema": "olm.deprecations", "package": "widgets", "entries": [
            {"reference": {"schema": "olm.package"}, "message": "widgets is end of life"},
            {"reference": {"schema": "olm.bundle", "name": "widgets.v2.0.0"}, "message": "v2.0.0 leaks memory"},
        ]}),
    ];
    let dir = tempfile::tempdir().unwrap();
    let text: String = documents.iter().map(|d| format!("{d}\n")).collect();
    std::fs::write(dir.path().join("catalog.json"), text).unwrap();
    let index = CatalogIndex::build(dir.path(), &IndexOptions::default()).unwrap();
    let server = RegistryServer::new(index).spawn_loopback().await.unwrap();
    (server, dir, group)
}

/// Creates the grpc CatalogSource `widgets-catalog` at `address`.
pub(crate) async fn widgets_catalog(client: &kube::Client, namespace: &str, address: &str) {
    let catalogs: Api<CatalogSource> = Api::namespaced(client.clone(), namespace);
    catalogs
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
                "metadata": {"name": "widgets-catalog"},
                "spec": {"sourceType": "grpc", "address": address}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
}

/// Creates the Subscription `package` to `package`'s stable channel in
/// `widgets-catalog`.
pub(crate) async fn subscribe(
    client: &kube::Client,
    namespace: &str,
    package: &str,
) -> Subscription {
    let subs: Api<Subscription> = Api::namespaced(client.clone(), namespace);
    subs.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": package},
            "spec": {"name": package, "channel": "stable", "source": "widgets-catalog", "sourceNamespace": namespace}
        }))
        .unwrap(),
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn a_subscription_is_resolved_and_installed() {
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let ns = plane.namespace("sub-install").await;
    let client = plane.client().await;
    let (server, _dir, group) = serve_widgets(ns.name()).await;
    let operator = RunningOperator::start(ns.name()).await;

    widgets_catalog(&client, ns.name(), &server.addr().to_string()).await;
    managing_group(
        &client,
        ns.name(),
        "og",
        json!({"targetNamespaces": [ns.name()]}),
    )
    .await;
    let subs: Api<Subscription> = Api::namespaced(client.clone(), ns.name());
    subscribe(&client, ns.name(), "widgets").await;

    // The head of the channel is chosen, an InstallPlan is written and
    // carried out, and the Subscription settles at the latest version.
    let status = eventually("Subscription AtLatestKnown", WAIT, || async {
        let sub = subs.get("widgets").await.map_err(|e| e.to_string())?;
        let status = serde_json::to_value(sub.status.unwrap_or_default()).unwrap();
        if status["state"] == "AtLatestKnown" {
            Ok(status)
        } else {
            Err(status.to_string())
        }
    })
    .await;
    assert_eq!(status["currentCSV"], "widgets.v2.0.0");
    assert_eq!(status["installedCSV"], "widgets.v2.0.0");
    let plan_name = status["installPlanRef"]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(plan_name.starts_with("install-"), "{plan_name}");
    assert_eq!(status["installplan"]["name"], plan_name.as_str());
    let health = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "CatalogSourcesUnhealthy")
        .unwrap();
    assert_eq!(health["status"], "False", "{status}");
    assert!(
        status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["type"] != "ResolutionFailed"),
        "{status}"
    );

    // The catalog's deprecations show on the Subscription once installed.
    eventually("deprecation conditions", WAIT, || async {
        let sub = subs.get("widgets").await.map_err(|e| e.to_string())?;
        let status = serde_json::to_value(sub.status.unwrap_or_default()).unwrap();
        let message_of = |t: &str| {
            status["conditions"]
                .as_array()
                .and_then(|c| c.iter().find(|c| c["type"] == t))
                .map(|c| c["message"].as_str().unwrap_or_default().to_owned())
        };
        let want = "olm.package/widgets: widgets is end of life; olm.bundle/widgets.v2.0.0: v2.0.0 leaks memory";
        if message_of("Deprecated").as_deref() == Some(want)
            && message_of("PackageDeprecated").is_some()
            && message_of("BundleDeprecated").is_some()
            && message_of("ChannelDeprecated").is_none()
        {
            Ok(())
        } else {
            Err(status.to_string())
        }
    })
    .await;

    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), ns.name());
    let plan = plans_complete(&plans)
        .await
        .into_iter()
        .find(|p| p.metadata.name.as_deref() == Some(plan_name.as_str()))
        .unwrap();
    assert_eq!(plan.spec.cluster_service_version_names, ["widgets.v2.0.0"]);
    assert!(plan.spec.approved);
    let plan_status = serde_json::to_value(plan.status.unwrap()).unwrap();
    let kinds: Vec<_> = plan_status["plan"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["resource"]["kind"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(kinds, ["ClusterServiceVersion", "CustomResourceDefinition"]);
    let owners = plan.metadata.owner_references.unwrap();
    assert_eq!(owners[0].kind, "Subscription");

    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), ns.name());
    let csv = csvs.get("widgets.v2.0.0").await.unwrap();
    let annotations = csv.metadata.annotations.unwrap();
    assert!(
        annotations["operatorframework.io/properties"].contains("olm.package"),
        "{annotations:?}"
    );
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.get(&format!("widgets.{group}")).await.unwrap();

    // Exactly one plan was written for this resolution.
    assert_eq!(
        plans.list(&Default::default()).await.unwrap().items.len(),
        1
    );
    crds.delete(&format!("widgets.{group}"), &Default::default())
        .await
        .unwrap();
    operator.stop().await;
}

#[tokio::test]
async fn an_unsatisfiable_subscription_reports_resolution_failed() {
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let ns = plane.namespace("sub-unsat").await;
    let client = plane.client().await;
    let (server, _dir, _group) = serve_widgets(ns.name()).await;
    let operator = RunningOperator::start(ns.name()).await;
    widgets_catalog(&client, ns.name(), &server.addr().to_string()).await;
    let subs: Api<Subscription> = Api::namespaced(client.clone(), ns.name());
    managing_group(&client, ns.name(), "og", json!({})).await;
    subscribe(&client, ns.name(), "gadgets").await;
    // Early passes may fail for other reasons (the catalog not connected
    // yet); the pass that settles names the missing package.
    let condition = eventually("ResolutionFailed", WAIT, || async {
        let sub = subs.get("gadgets").await.map_err(|e| e.to_string())?;
        let status = serde_json::to_value(sub.status.unwrap_or_default()).unwrap();
        let condition = status["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "ResolutionFailed").cloned())
            .ok_or_else(|| status.to_string())?;
        let message = condition["message"].as_str().unwrap_or_default();
        if condition["reason"] == "ConstraintsNotSatisfiable" && message.contains("gadgets") {
            Ok(condition)
        } else {
            Err(condition.to_string())
        }
    })
    .await;
    assert_eq!(condition["status"], "True");
    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), ns.name());
    assert!(
        plans
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    // Once the catalog is fixed by subscribing to what exists, it resolves.
    subs.patch(
        "gadgets",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"name": "widgets"}})),
    )
    .await
    .unwrap();
    eventually("resolved after the fix", WAIT, || async {
        let sub = subs.get("gadgets").await.map_err(|e| e.to_string())?;
        let status = serde_json::to_value(sub.status.unwrap_or_default()).unwrap();
        if status["state"] == "AtLatestKnown" {
            Ok(())
        } else {
            Err(status.to_string())
        }
    })
    .await;
    operator.stop().await;
}

/// catalog-operator stopped after writing a plan and before writing the
/// Subscription's status (the window a SIGKILL can hit): when it comes back,
/// the Subscription adopts that plan instead of a second one being written.
#[tokio::test]
async fn a_plan_whose_subscription_status_was_never_written_is_adopted() {
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let ns = plane.namespace("sub-orphan").await;
    let client = plane.client().await;
    let (server, _dir, _group) = serve_widgets(ns.name()).await;
    widgets_catalog(&client, ns.name(), &server.addr().to_string()).await;
    managing_group(
        &client,
        ns.name(),
        "og",
        json!({"targetNamespaces": [ns.name()]}),
    )
    .await;
    let subs: Api<Subscription> = Api::namespaced(client.clone(), ns.name());
    let sub = subscribe(&client, ns.name(), "widgets").await;
    // What the stopped operator had written: the plan, owned by the
    // Subscription and naming the CSV chosen for it, and nothing else.
    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), ns.name());
    plans
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
                "metadata": {
                    "name": "install-orphn",
                    "annotations": {"olm.catalog-operator/resolved-subscriptions": "{\"widgets\":\"widgets.v2.0.0\"}"},
                    "ownerReferences": [{"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
                        "name": "widgets", "uid": sub.metadata.uid.clone().unwrap()}]
                },
                "spec": {"clusterServiceVersionNames": ["widgets.v2.0.0"], "approval": "Automatic", "approved": true, "generation": 1}
            }))
            .unwrap(),
        )
        .await
        .unwrap();

    let operator = RunningOperator::start(ns.name()).await;
    let status = eventually("the Subscription adopts the plan", WAIT, || async {
        let sub = subs.get("widgets").await.map_err(|e| e.to_string())?;
        let status = serde_json::to_value(sub.status.unwrap_or_default()).unwrap();
        if status["installPlanRef"]["name"] == "install-orphn" {
            Ok(status)
        } else {
            Err(status.to_string())
        }
    })
    .await;
    assert_eq!(status["currentCSV"], "widgets.v2.0.0");
    // Several resolutions later, still one plan.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let names: Vec<String> = plans
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    assert_eq!(names, ["install-orphn"]);
    operator.stop().await;
}
