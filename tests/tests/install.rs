//! The whole install path, end to end, on a real control plane with a real
//! OCI registry: a catalog whose bundles carry only CSV metadata (as current
//! catalogs are built), served over gRPC; a Subscription; catalog-operator
//! resolves and writes the InstallPlan; bundle-unpacker pulls the bundle
//! image from the registry; catalog-operator applies its CRD and CSV;
//! olm-operator takes the CSV to Succeeded.

// Test helpers: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use kube::Api;
use olm_api::{csv::ClusterServiceVersion, install_plan::InstallPlan};
use olm_catalog::bundle::{LoadBundleOptions, RegistryBundle};
use olm_e2e::{
    eventually,
    harness::{
        WAIT, bundle_files_at, csv_phase, push_bundle, serve_bundles, serve_catalog,
        start_services, subscribe,
    },
};
use serde_json::json;

/// A small bundle of our own: one CRD and a CSV with one Deployment.
fn bundle_files(group: &str) -> Vec<(String, Vec<u8>)> {
    bundle_files_at(group, "1.0.0", None)
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
    let list = olm_e2e::harness::install_plans_complete(&client, &namespace).await;
    assert_eq!(list.len(), 1);
    let status = &list[0]["status"];
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

/// Runs `opm` with `args`, failing the test with its own words.
fn opm(args: &[&str]) -> Vec<u8> {
    let output = std::process::Command::new(olm_e2e::harness::service_binary("opm"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "opm {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

/// A real operator's bundle from the shared corpus (etcd 0.9.4), pushed with
/// `opm alpha bundle push`, rendered with `opm render` into a catalog of CSV
/// metadata only, served by `opm serve`: the Subscription installs it.
#[tokio::test]
async fn a_corpus_bundle_pushed_and_served_with_opm_installs() {
    let Some(testdata) = olm_e2e::testdata() else {
        return;
    };
    let setup = olm_e2e::harness::Setup::new("e2e-opm").await;
    let namespace = setup.namespace().to_owned();
    let bundle_dir = testdata.join("bundles/etcd/0.9.4");
    let image = format!("{}/e2e/etcd-bundle:v0.9.4", setup.registry.host());
    opm(&[
        "alpha",
        "bundle",
        "push",
        bundle_dir.to_str().unwrap(),
        &image,
        "--insecure",
    ]);
    let rendered = opm(&[
        "render",
        "--use-http",
        &image,
        "--migrate-level",
        "bundle-object-to-csv-metadata",
        "-o",
        "json",
    ]);
    let bundle: serde_json::Value = serde_json::from_slice(&rendered).unwrap();
    assert_eq!(bundle["name"], "etcdoperator.v0.9.4");
    let catalog = tempfile::tempdir().unwrap();
    let documents = [
        json!({"schema": "olm.package", "name": "etcd", "defaultChannel": "singlenamespace-alpha"}),
        json!({"schema": "olm.channel", "package": "etcd", "name": "singlenamespace-alpha",
            "entries": [{"name": "etcdoperator.v0.9.4"}]}),
        bundle,
    ];
    let text: String = documents.iter().map(|d| format!("{d}\n")).collect();
    assert!(!text.contains("olm.bundle.object"), "CSV metadata only");
    std::fs::write(catalog.path().join("catalog.json"), text).unwrap();
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let mut serve = std::process::Command::new(olm_e2e::harness::service_binary("opm"))
        .args([
            "serve",
            catalog.path().to_str().unwrap(),
            "-p",
            &port.to_string(),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let address = format!("127.0.0.1:{port}");
    eventually("opm serve listening", WAIT, || async {
        tokio::net::TcpStream::connect(&address)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .await;

    let services = olm_e2e::harness::start_services_with(
        &namespace,
        &setup.registry.host(),
        olm_e2e::harness::ServiceOptions::default(),
    )
    .await;
    olm_e2e::harness::create_catalog(&setup.client, &namespace, "corpus", &address).await;
    olm_e2e::harness::create_operator_group(&setup.client, &namespace, json!({})).await;
    olm_e2e::harness::create_subscription_with(
        &setup.client,
        &namespace,
        "etcd",
        "corpus",
        json!({"channel": "singlenamespace-alpha"}),
    )
    .await;
    let status =
        olm_e2e::harness::wait_installed(&setup.client, &namespace, "etcd", "etcdoperator.v0.9.4")
            .await;
    assert_eq!(status["currentCSV"], "etcdoperator.v0.9.4");
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(setup.client.clone(), &namespace);
    deployments.get("etcd-operator").await.unwrap();
    let plans = olm_e2e::harness::install_plans(&setup.client, &namespace).await;
    assert_eq!(plans.len(), 1, "{plans:?}");
    let kinds: Vec<&str> = plans[0]["status"]["plan"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["resource"]["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds
            .iter()
            .filter(|k| **k == "CustomResourceDefinition")
            .count(),
        3,
        "{kinds:?}"
    );
    services.stop().await;
    let _ = serve.kill();
    let _ = serve.wait();
    olm_e2e::harness::delete_crds(
        &setup.client,
        &[
            "etcdclusters.etcd.database.coreos.com".to_owned(),
            "etcdbackups.etcd.database.coreos.com".to_owned(),
            "etcdrestores.etcd.database.coreos.com".to_owned(),
        ],
    )
    .await;
}
