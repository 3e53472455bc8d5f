//! The whole install path, end to end, on a real control plane with a real
//! OCI registry: a catalog whose bundles carry only CSV metadata (as current
//! catalogs are built), served over gRPC; a Subscription; catalog-operator
//! resolves and writes the InstallPlan; bundle-unpacker pulls the bundle
//! image from the registry; catalog-operator applies its CRD and CSV;
//! olm-operator takes the CSV to Succeeded.

// Test helpers: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::{future::Future, time::Duration};

use kube::{Api, api::PostParams};
use olm_api::{
    catalog_source::CatalogSource, csv::ClusterServiceVersion, install_plan::InstallPlan,
    operator_group::OperatorGroup, subscription::Subscription,
};
use olm_catalog::bundle::{LoadBundleOptions, Payload, RegistryBundle};
use olm_runtime::admin::Readiness;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(90);

async fn eventually<T, F, Fut>(what: &str, deadline: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let started = tokio::time::Instant::now();
    let mut last = String::from("not checked yet");
    while started.elapsed() < deadline {
        match check().await {
            Ok(value) => return value,
            Err(error) => last = error,
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("{what}: not within {deadline:?}; last: {last}");
}

/// A small bundle of our own: one CRD and a CSV with one Deployment.
fn bundle_files(group: &str) -> Vec<(String, Vec<u8>)> {
    bundle_files_at(group, "1.0.0", None)
}

/// The bundle at `version`, replacing `replaces` if given.
fn bundle_files_at(group: &str, version: &str, replaces: Option<&str>) -> Vec<(String, Vec<u8>)> {
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("gadgets.{group}")},
        "spec": {
            "group": group, "scope": "Namespaced",
            "names": {"kind": "Gadget", "listKind": "GadgetList", "plural": "gadgets", "singular": "gadget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    });
    let csv = json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": format!("gadgets.v{version}"), "annotations": {"capabilities": "Basic Install"}},
        "spec": {
            "displayName": "Gadgets", "version": version, "provider": {"name": "Example"},
            "replaces": replaces,
            "installModes": [
                {"type": "OwnNamespace", "supported": true}, {"type": "SingleNamespace", "supported": true},
                {"type": "MultiNamespace", "supported": false}, {"type": "AllNamespaces", "supported": true}],
            "customresourcedefinitions": {"owned": [{"name": format!("gadgets.{group}"), "version": "v1", "kind": "Gadget", "displayName": "Gadget"}]},
            "install": {"strategy": "deployment", "spec": {
                "permissions": [{"serviceAccountName": "gadget-operator", "rules": [{"apiGroups": [group], "resources": ["gadgets"], "verbs": ["*"]}]}],
                "deployments": [{"name": "gadget-operator", "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {"app": "gadget-operator"}},
                    "template": {"metadata": {"labels": {"app": "gadget-operator"}},
                        "spec": {"serviceAccountName": "gadget-operator",
                            "containers": [{"name": "operator", "image": format!("quay.io/example/gadget-operator:v{version}")}]}}
                }}]
            }}
        }
    });
    let annotations = "annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: registry+v1\n  operators.operatorframework.io.bundle.manifests.v1: manifests/\n  operators.operatorframework.io.bundle.metadata.v1: metadata/\n  operators.operatorframework.io.bundle.package.v1: gadgets\n  operators.operatorframework.io.bundle.channels.v1: stable\n  operators.operatorframework.io.bundle.channel.default.v1: stable\n";
    vec![
        (
            "manifests/gadgets.crd.yaml".into(),
            serde_yaml_ng::to_string(&crd).unwrap().into_bytes(),
        ),
        (
            "manifests/gadgets.v1.0.0.clusterserviceversion.yaml".into(),
            serde_yaml_ng::to_string(&csv).unwrap().into_bytes(),
        ),
        (
            "metadata/annotations.yaml".into(),
            annotations.as_bytes().to_vec(),
        ),
    ]
}

/// Pushes the bundle as an image with upstream's labels; returns it by tag.
async fn push_bundle(
    registry_host: &str,
    files: &[(String, Vec<u8>)],
    bundle: &RegistryBundle,
) -> String {
    let image = format!("{registry_host}/e2e/gadgets-bundle:v{}", bundle.version());
    let mut builder = olm_oci::ImageBuilder::new().labels(bundle.annotations.clone());
    for (path, bytes) in files {
        builder = builder.add_file(path, bytes.clone()).unwrap();
    }
    let built = builder.build().unwrap();
    let client =
        olm_oci::Client::new(olm_oci::ClientOptions::default().plain_http(registry_host)).unwrap();
    client
        .push_image(&olm_oci::Reference::parse(&image).unwrap(), &built)
        .await
        .unwrap();
    image
}

/// A catalog of the bundle with CSV metadata only: the content is in the
/// image, so installing needs the unpacker.
async fn serve_catalog(
    bundle: &RegistryBundle,
    image: &str,
) -> (olm_registry::RunningServer, tempfile::TempDir) {
    serve_bundles(&[(bundle, image)]).await
}

/// A catalog of `bundles` (CSV metadata only) in one channel, in order.
async fn serve_bundles(
    bundles: &[(&RegistryBundle, &str)],
) -> (olm_registry::RunningServer, tempfile::TempDir) {
    let entries: Vec<_> = bundles
        .iter()
        .map(|(b, _)| {
            let name = b.to_fbc_bundle("", Payload::CsvMetadata).name;
            match b.replaces() {
                Some(replaces) => json!({"name": name, "replaces": replaces}),
                None => json!({"name": name}),
            }
        })
        .collect();
    let mut documents = vec![
        json!({"schema": "olm.package", "name": "gadgets", "defaultChannel": "stable"}),
        json!({"schema": "olm.channel", "package": "gadgets", "name": "stable", "entries": entries}),
    ];
    for (bundle, image) in bundles {
        documents
            .push(serde_json::to_value(bundle.to_fbc_bundle(image, Payload::CsvMetadata)).unwrap());
    }
    let dir = tempfile::tempdir().unwrap();
    let text: String = documents.iter().map(|d| format!("{d}\n")).collect();
    assert!(
        !text.contains("olm.bundle.object"),
        "the catalog must not carry the objects"
    );
    std::fs::write(dir.path().join("catalog.json"), text).unwrap();
    let index =
        olm_registry::CatalogIndex::build(dir.path(), &olm_registry::IndexOptions::default())
            .unwrap();
    (
        olm_registry::RegistryServer::new(index)
            .spawn_loopback()
            .await
            .unwrap(),
        dir,
    )
}

/// catalog-operator, bundle-unpacker and olm-operator, in-process, watching
/// `namespace`; cancel the token to stop them.
async fn start_services(
    namespace: &str,
    registry_host: &str,
) -> (CancellationToken, Vec<tokio::task::JoinHandle<()>>) {
    let plane = olm_testkit::control_plane();
    let client = plane.client().await;
    let namespace = namespace.to_owned();
    let registry_host = registry_host.to_owned();
    let mut tasks = Vec::new();
    let shutdown = CancellationToken::new();
    {
        let kube_config = plane.config().await.unwrap();
        let mut registry_metrics = olm_runtime::metrics::MetricsRegistry::default();
        let metrics = catalog_operator::metrics::CatalogMetrics::register(&mut registry_metrics);
        let config = catalog_operator::controller::ControllerConfig {
            watched_namespaces: vec![namespace.clone()],
            ready_recheck: Duration::from_secs(2),
            ..Default::default()
        };
        let stop = shutdown.clone();
        tasks.push(tokio::spawn(async move {
            catalog_operator::controller::run(
                kube_config,
                config,
                metrics,
                olm_bus::Bus::disabled(),
                Readiness::default(),
                stop,
            )
            .await
            .unwrap();
        }));
    }
    {
        let client = client.clone();
        let mut registry_metrics = olm_runtime::metrics::MetricsRegistry::default();
        let metrics = bundle_unpacker::metrics::UnpackMetrics::register(&mut registry_metrics);
        let config = bundle_unpacker::controller::UnpackerConfig {
            watched_namespaces: vec![namespace.clone()],
            insecure_registries: [registry_host.clone()].into(),
            resync: Duration::from_secs(2),
            watch_grace: Duration::from_millis(100),
            ..Default::default()
        };
        let stop = shutdown.clone();
        tasks.push(tokio::spawn(async move {
            let (watch_tx, watch_rx) = tokio::sync::watch::channel(true);
            bundle_unpacker::controller::run(
                client,
                config,
                metrics,
                olm_bus::Bus::disabled(),
                Readiness::default(),
                watch_rx,
                stop,
            )
            .await
            .unwrap();
            drop(watch_tx);
        }));
    }
    {
        let client = client.clone();
        let mut registry_metrics = olm_runtime::metrics::MetricsRegistry::default();
        let metrics = olm_operator::metrics::OperatorMetrics::register(&mut registry_metrics);
        let config = olm_operator::controller::ControllerConfig {
            watched_namespaces: vec![namespace.clone()],
            ..Default::default()
        };
        let stop = shutdown.clone();
        tasks.push(tokio::spawn(async move {
            olm_operator::controller::run(client, config, metrics, Readiness::default(), stop)
                .await
                .unwrap();
        }));
    }

    (shutdown, tasks)
}

#[tokio::test]
async fn a_subscription_installs_an_operator_from_a_bundle_image() {
    let plane = olm_testkit::control_plane();
    plane.install_crds(&olm_e2e::workspace_root().join("deploy/crds"));
    let ns = plane.namespace("e2e-install").await;
    let namespace = ns.name().to_owned();
    let client = plane.client().await;
    let registry = olm_testkit::registry::Registry::start().unwrap();
    let group = format!("{namespace}.e2e.olm.io");
    let files = bundle_files(&group);
    let bundle = RegistryBundle::load_files(files.clone(), &LoadBundleOptions::new()).unwrap();
    let image = push_bundle(&registry.host(), &files, &bundle).await;
    let (server, _dir) = serve_catalog(&bundle, &image).await;

    let (shutdown, tasks) = start_services(&namespace, &registry.host()).await;

    let (_, subs) = subscribe(&client, &namespace, &server.addr().to_string(), None).await;

    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &namespace);
    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), &namespace);
    eventually("the CSV Succeeded", WAIT, || async {
        let Some(csv) = csvs
            .get_opt("gadgets.v1.0.0")
            .await
            .map_err(|e| e.to_string())?
        else {
            // Say where the install stands.
            let plans = plans
                .list(&Default::default())
                .await
                .map_err(|e| e.to_string())?;
            let sub = subs.get("gadgets").await.map_err(|e| e.to_string())?;
            return Err(format!(
                "no CSV yet; subscription {}; plans {}",
                serde_json::to_string(&sub.status).unwrap(),
                serde_json::to_string(&plans.items.iter().map(|p| &p.status).collect::<Vec<_>>())
                    .unwrap()
            ));
        };
        let status = serde_json::to_value(csv.status.unwrap_or_default()).unwrap();
        if status["phase"] == "Succeeded" {
            Ok(())
        } else {
            Err(status.to_string())
        }
    })
    .await;
    let sub = eventually("the Subscription AtLatestKnown", WAIT, || async {
        let sub = subs.get("gadgets").await.map_err(|e| e.to_string())?;
        let status = serde_json::to_value(sub.status.unwrap_or_default()).unwrap();
        if status["state"] == "AtLatestKnown" {
            Ok(status)
        } else {
            Err(status.to_string())
        }
    })
    .await;
    assert_eq!(sub["installedCSV"], "gadgets.v1.0.0");
    let list = plans.list(&Default::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    let status = serde_json::to_value(list.items[0].status.clone().unwrap()).unwrap();
    assert_eq!(status["phase"], "Complete");
    assert!(
        status
            .get("bundleLookups")
            .is_none_or(|l| l.as_array().is_none_or(Vec::is_empty)),
        "{status}"
    );
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(client.clone(), &namespace);
    deployments.get("gadget-operator").await.unwrap();

    shutdown.cancel();
    for task in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(20), task).await;
    }
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    let _ = crds
        .delete(&format!("gadgets.{group}"), &Default::default())
        .await;
}

/// Creates the CatalogSource `gadgets-catalog` at `address`, an
/// OperatorGroup targeting `namespace`, and the Subscription `gadgets` to
/// its stable channel (with `approval` when given).
async fn subscribe(
    client: &kube::Client,
    namespace: &str,
    address: &str,
    approval: Option<&str>,
) -> (Api<CatalogSource>, Api<Subscription>) {
    let catalogs: Api<CatalogSource> = Api::namespaced(client.clone(), namespace);
    catalogs
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
                "metadata": {"name": "gadgets-catalog"},
                "spec": {"sourceType": "grpc", "address": address, "displayName": "Gadgets"}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let groups: Api<OperatorGroup> = Api::namespaced(client.clone(), namespace);
    groups
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
                "metadata": {"name": "og"}, "spec": {"targetNamespaces": [namespace]}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let mut spec = json!({"name": "gadgets", "channel": "stable", "source": "gadgets-catalog", "sourceNamespace": namespace});
    if let Some(approval) = approval {
        spec["installPlanApproval"] = json!(approval);
    }
    let subs: Api<Subscription> = Api::namespaced(client.clone(), namespace);
    subs.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": "gadgets"}, "spec": spec
        }))
        .unwrap(),
    )
    .await
    .unwrap();
    (catalogs, subs)
}

async fn csv_phase(csvs: &Api<ClusterServiceVersion>, name: &str) -> Result<String, String> {
    let csv = csvs
        .get_opt(name)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("no CSV {name}"))?;
    Ok(csv
        .status
        .and_then(|s| s.phase)
        .map(|p| p.to_string())
        .unwrap_or_default())
}

#[tokio::test]
async fn a_new_catalog_version_upgrades_along_replaces() {
    let plane = olm_testkit::control_plane();
    plane.install_crds(&olm_e2e::workspace_root().join("deploy/crds"));
    let ns = plane.namespace("e2e-upgrade").await;
    let namespace = ns.name().to_owned();
    let client = plane.client().await;
    let registry = olm_testkit::registry::Registry::start().unwrap();
    let group = format!("{namespace}.e2e.olm.io");
    let v1_files = bundle_files_at(&group, "1.0.0", None);
    let v2_files = bundle_files_at(&group, "2.0.0", Some("gadgets.v1.0.0"));
    let v1 = RegistryBundle::load_files(v1_files.clone(), &LoadBundleOptions::new()).unwrap();
    let v2 = RegistryBundle::load_files(v2_files.clone(), &LoadBundleOptions::new()).unwrap();
    let v1_image = push_bundle(&registry.host(), &v1_files, &v1).await;
    let v2_image = push_bundle(&registry.host(), &v2_files, &v2).await;
    let (old_catalog, _old_dir) = serve_bundles(&[(&v1, &v1_image)]).await;
    let (new_catalog, _new_dir) = serve_bundles(&[(&v1, &v1_image), (&v2, &v2_image)]).await;
    let (shutdown, tasks) = start_services(&namespace, &registry.host()).await;

    let (catalogs, subs) =
        subscribe(&client, &namespace, &old_catalog.addr().to_string(), None).await;
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &namespace);
    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), &namespace);
    eventually("v1 Succeeded", WAIT, || async {
        match csv_phase(&csvs, "gadgets.v1.0.0").await {
            Ok(phase) if phase == "Succeeded" => Ok(()),
            other => {
                let sub = subs.get("gadgets").await.map_err(|e| e.to_string())?;
                let plans = plans
                    .list(&Default::default())
                    .await
                    .map_err(|e| e.to_string())?;
                Err(format!(
                    "{other:?}; subscription {}; plans {}",
                    serde_json::to_string(&sub.status).unwrap(),
                    serde_json::to_string(
                        &plans.items.iter().map(|p| &p.status).collect::<Vec<_>>()
                    )
                    .unwrap()
                ))
            }
        }
    })
    .await;

    // The catalog now serves v2, which replaces v1: the Subscription
    // upgrades, v2 takes over and v1 is removed.
    catalogs
        .patch(
            "gadgets-catalog",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"address": new_catalog.addr().to_string()}})),
        )
        .await
        .unwrap();
    eventually("v2 Succeeded and v1 gone", WAIT, || async {
        let v2 = csv_phase(&csvs, "gadgets.v2.0.0").await?;
        let v1_left = csvs
            .get_opt("gadgets.v1.0.0")
            .await
            .map_err(|e| e.to_string())?
            .is_some();
        if v2 == "Succeeded" && !v1_left {
            Ok(())
        } else {
            Err(format!("v2 {v2}, v1 still there: {v1_left}"))
        }
    })
    .await;
    let sub = eventually("the Subscription at v2", WAIT, || async {
        let sub = subs.get("gadgets").await.map_err(|e| e.to_string())?;
        let status = serde_json::to_value(sub.status.unwrap_or_default()).unwrap();
        if status["state"] == "AtLatestKnown" && status["installedCSV"] == "gadgets.v2.0.0" {
            Ok(status)
        } else {
            Err(status.to_string())
        }
    })
    .await;
    assert_eq!(sub["currentCSV"], "gadgets.v2.0.0");
    let list = plans.list(&Default::default()).await.unwrap();
    assert_eq!(list.items.len(), 2, "one plan per resolution");
    let deployment: k8s_openapi::api::apps::v1::Deployment =
        Api::namespaced(client.clone(), &namespace)
            .get("gadget-operator")
            .await
            .unwrap();
    let image = deployment.spec.unwrap().template.spec.unwrap().containers[0]
        .image
        .clone();
    assert_eq!(
        image.as_deref(),
        Some("quay.io/example/gadget-operator:v2.0.0")
    );

    shutdown.cancel();
    for task in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(20), task).await;
    }
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    let _ = crds
        .delete(&format!("gadgets.{group}"), &Default::default())
        .await;
}

#[tokio::test]
async fn a_manual_subscription_waits_for_approval() {
    let plane = olm_testkit::control_plane();
    plane.install_crds(&olm_e2e::workspace_root().join("deploy/crds"));
    let ns = plane.namespace("e2e-manual").await;
    let namespace = ns.name().to_owned();
    let client = plane.client().await;
    let registry = olm_testkit::registry::Registry::start().unwrap();
    let group = format!("{namespace}.e2e.olm.io");
    let files = bundle_files(&group);
    let bundle = RegistryBundle::load_files(files.clone(), &LoadBundleOptions::new()).unwrap();
    let image = push_bundle(&registry.host(), &files, &bundle).await;
    let (server, _dir) = serve_catalog(&bundle, &image).await;
    let (shutdown, tasks) = start_services(&namespace, &registry.host()).await;

    let (_, subs) = subscribe(
        &client,
        &namespace,
        &server.addr().to_string(),
        Some("Manual"),
    )
    .await;

    // The plan waits for approval, and the Subscription says so.
    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), &namespace);
    let plan_name = eventually("the Subscription pending approval", WAIT, || async {
        let sub = subs.get("gadgets").await.map_err(|e| e.to_string())?;
        let status = serde_json::to_value(sub.status.unwrap_or_default()).unwrap();
        let pending = status["conditions"].as_array().and_then(|c| {
            c.iter()
                .find(|c| c["type"] == "InstallPlanPending")
                .cloned()
        });
        match pending {
            Some(c) if c["reason"] == "RequiresApproval" => Ok(status["installPlanRef"]["name"]
                .as_str()
                .unwrap()
                .to_owned()),
            _ => Err(status.to_string()),
        }
    })
    .await;
    let plan = plans.get(&plan_name).await.unwrap();
    assert!(!plan.spec.approved);
    assert_eq!(plan.spec.approval.as_str(), "Manual");
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &namespace);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        csvs.get_opt("gadgets.v1.0.0").await.unwrap().is_none(),
        "nothing installed before approval"
    );

    plans
        .patch(
            &plan_name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"approved": true}})),
        )
        .await
        .unwrap();
    eventually("the CSV Succeeded after approval", WAIT, || async {
        match csv_phase(&csvs, "gadgets.v1.0.0").await {
            Ok(phase) if phase == "Succeeded" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;

    shutdown.cancel();
    for task in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(20), task).await;
    }
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    let _ = crds
        .delete(&format!("gadgets.{group}"), &Default::default())
        .await;
}
