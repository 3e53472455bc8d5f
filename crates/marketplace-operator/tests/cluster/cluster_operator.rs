//! ClusterOperator status, with the ClusterOperator API, and in the
//! OperatorHub's `status.components` without it.
//!
//! The ClusterOperator CRD is cluster-wide and the control plane is shared
//! by the whole test binary, so the two tests here take turns (one installs
//! the CRD and removes it when done, the other needs it absent). The other
//! tests do not mind either way: they run no OLM Deployments, so they report
//! no ClusterOperator.

use k8s_openapi::api::apps::v1::Deployment;
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, GroupVersionKind, PostParams},
};
use olm_testkit::FAKE_NODE_TAINT;
use serde_json::json;
use tokio::sync::Mutex;

use crate::{RunningMarketplace, WAIT, crds_installed, default_source, eventually};

const CRD_NAME: &str = "clusteroperators.config.openshift.io";

/// Held by a test for as long as it relies on the CRD being there or not.
static CLUSTER_OPERATOR_API: Mutex<()> = Mutex::const_new(());

/// Removes the ClusterOperator CRD (and so every ClusterOperator) on drop,
/// even when the test fails.
struct InstalledCrd;

impl Drop for InstalledCrd {
    fn drop(&mut self) {
        let _ = olm_testkit::control_plane()
            .kubectl()
            .args(["delete", "crd", CRD_NAME, "--ignore-not-found"])
            .output();
    }
}

/// Installs the ClusterOperator CRD, open, as OpenShift's stands in for,
/// and waits until discovery serves it.
async fn install_cluster_operator_crd(client: &Client) -> InstalledCrd {
    let mut crd = olm_testkit::open_crd(
        "config.openshift.io",
        "clusteroperators",
        "ClusterOperator",
        "Cluster",
        true,
    );
    crd.spec.names.short_names = Some(vec!["co".to_owned()]);
    // Taken before the install, so that a CRD created but never served is
    // removed too.
    let guard = InstalledCrd;
    olm_testkit::install_open_crd(client, &crd).await;
    guard
}

async fn cluster_operator_served(client: &Client) -> bool {
    kube::discovery::group(client, "config.openshift.io")
        .await
        .is_ok_and(|group| {
            group
                .recommended_resources()
                .iter()
                .any(|(resource, _)| resource.plural == "clusteroperators")
        })
}

/// A one-replica Deployment of OLM named `name`, running `version`, whose
/// pod kwok makes Ready.
async fn create_olm_deployment(client: &Client, namespace: &str, name: &str, version: &str) {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "labels": { "app.kubernetes.io/part-of": "olm", "app": name },
        },
        "spec": {
            "replicas": 1,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": {
                    "app": name,
                    "app.kubernetes.io/part-of": "olm",
                    "app.kubernetes.io/version": version,
                }},
                "spec": {
                    "containers": [{ "name": "main", "image": format!("quay.io/fixture/{name}:{version}") }],
                    "tolerations": [{ "key": FAKE_NODE_TAINT, "operator": "Exists", "effect": "NoSchedule" }],
                },
            },
        },
    }))
    .unwrap();
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
}

/// `(Available, Progressing, Degraded, operator version)` of the
/// ClusterOperator `name`.
async fn cluster_operator_summary(
    api: &Api<DynamicObject>,
    name: &str,
) -> Result<(String, String, String, String), String> {
    let object = api
        .get_opt(name)
        .await
        .map_err(|e| e.to_string())?
        .ok_or(format!("no ClusterOperator {name} yet"))?;
    let status = &object.data["status"];
    let condition = |type_: &str| {
        status["conditions"]
            .as_array()
            .and_then(|list| list.iter().find(|c| c["type"] == type_))
            .and_then(|c| c["status"].as_str())
            .unwrap_or_default()
            .to_owned()
    };
    let version = status["versions"]
        .as_array()
        .and_then(|list| list.iter().find(|v| v["name"] == "operator"))
        .and_then(|v| v["version"].as_str())
        .unwrap_or_default()
        .to_owned();
    Ok((
        condition("Available"),
        condition("Progressing"),
        condition("Degraded"),
        version,
    ))
}

#[tokio::test]
async fn olm_deployments_are_reported_in_cluster_operators() {
    let _turn = CLUSTER_OPERATOR_API.lock().await;
    crds_installed().await;
    let plane = olm_testkit::control_plane();
    let client = plane.client().await;
    let _crd = install_cluster_operator_crd(&client).await;
    let namespace = plane.namespace("marketplace-co").await;
    create_olm_deployment(
        &client,
        namespace.name(),
        "olm-operator",
        "0.1.0-fixture-olm",
    )
    .await;
    create_olm_deployment(
        &client,
        namespace.name(),
        "catalog-operator",
        "0.1.0-fixture-catalog",
    )
    .await;

    let service = RunningMarketplace::start(RunningMarketplace::config(
        namespace.name(),
        vec![default_source("alpha")],
    ))
    .await;
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "config.openshift.io",
        "v1",
        "ClusterOperator",
    ));
    let operators: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    for (name, version) in [
        ("operator-lifecycle-manager", "0.1.0-fixture-olm"),
        (
            "operator-lifecycle-manager-catalog",
            "0.1.0-fixture-catalog",
        ),
    ] {
        eventually(
            &format!("ClusterOperator {name} reported"),
            WAIT,
            || async {
                let seen = cluster_operator_summary(&operators, name).await?;
                let expected = (
                    "True".to_owned(),
                    "False".to_owned(),
                    "False".to_owned(),
                    version.to_owned(),
                );
                if seen == expected {
                    Ok(())
                } else {
                    Err(format!("{name}: {seen:?}"))
                }
            },
        )
        .await;
    }
    // No marketplace-operator Deployment runs here, so nothing reports it.
    assert!(operators.get_opt("marketplace").await.unwrap().is_none());
    let written = operators.get("operator-lifecycle-manager").await.unwrap();
    let managers: Vec<_> = written
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|entry| entry.manager)
        .collect();
    assert!(
        managers.iter().any(|m| m == "marketplace-operator"),
        "{managers:?}"
    );
    service.stop().await;
}

/// `(Available, Progressing, Degraded, operator version)`.
type Summary = (String, String, String, String);

/// The [`Summary`] of component `name` in the OperatorHub's
/// `status.components`, and how many sources `status.sources` lists.
fn hub_component_summary(
    hub: &olm_api::operator_hub::OperatorHub,
    name: &str,
) -> Result<(Summary, usize), String> {
    let status = hub.status.clone().unwrap_or_default();
    let component = status
        .components
        .iter()
        .find(|c| c.name == name)
        .ok_or_else(|| format!("no component {name} in {:?}", status.components))?;
    let condition = |type_: &str| {
        component
            .conditions
            .iter()
            .find(|c| c.type_ == type_)
            .map(|c| c.status.clone())
            .unwrap_or_default()
    };
    let version = component
        .versions
        .iter()
        .find(|v| v.name == "operator")
        .map(|v| v.version.clone())
        .unwrap_or_default();
    Ok((
        (
            condition("Available"),
            condition("Progressing"),
            condition("Degraded"),
            version,
        ),
        status.sources.len(),
    ))
}

#[tokio::test]
async fn without_the_cluster_operator_api_the_operator_hub_reports_the_components() {
    let _turn = CLUSTER_OPERATOR_API.lock().await;
    crds_installed().await;
    let plane = olm_testkit::control_plane();
    let client = plane.client().await;
    // The other test may have just removed the CRD.
    eventually("no ClusterOperator API", WAIT, || async {
        if cluster_operator_served(&client).await {
            Err("still served".to_owned())
        } else {
            Ok(())
        }
    })
    .await;
    let namespace = plane.namespace("marketplace-noco").await;
    create_olm_deployment(
        &client,
        namespace.name(),
        "olm-operator",
        "0.1.0-fixture-olm",
    )
    .await;

    let service = RunningMarketplace::start(RunningMarketplace::config(
        namespace.name(),
        vec![default_source("alpha")],
    ))
    .await;
    let hubs: Api<olm_api::operator_hub::OperatorHub> = Api::all(client.clone());
    let hub = || async {
        hubs.get_opt(&service.hub_name)
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| "no OperatorHub yet".to_owned())
    };
    let want = (
        "True".to_owned(),
        "False".to_owned(),
        "False".to_owned(),
        "0.1.0-fixture-olm".to_owned(),
    );
    eventually(
        "the components and the sources on the OperatorHub",
        WAIT,
        || async {
            match hub_component_summary(&hub().await?, "operator-lifecycle-manager")? {
                (summary, 1) if summary == want => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;

    // A change of sources is applied by another field manager: the
    // components stay.
    crate::marketplace::patch_hub(
        &client,
        &service.hub_name,
        json!({"disableAllDefaultSources": true}),
    )
    .await;
    eventually("the source disabled, the components kept", WAIT, || async {
        let hub = hub().await?;
        let disabled = hub
            .status
            .as_ref()
            .and_then(|s| s.sources.first())
            .and_then(|s| s.disabled);
        match (
            disabled,
            hub_component_summary(&hub, "operator-lifecycle-manager")?,
        ) {
            (Some(true), (summary, 1)) if summary == want => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert!(service.is_running(), "the service keeps running");
    assert!(
        !cluster_operator_served(&client).await,
        "nothing installed the ClusterOperator API"
    );
    service.stop().await;
}
