//! Upgrades and dependencies, end to end, on a real control plane with a real
//! OCI registry: catalogs whose bundles carry only CSV metadata, served over
//! gRPC (address sources); catalog-operator, bundle-unpacker and olm-operator
//! in-process. Each test has its own namespace, registry and CRD group.

// Test helpers: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use k8s_openapi::{
    api::apps::v1::Deployment,
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api,
    api::{ApiResource, DynamicObject, GroupVersionKind, PostParams},
};
use olm_api::{csv::ClusterServiceVersion, subscription::Subscription};
use olm_e2e::{
    eventually,
    harness::{
        BundleSpec, CrdVersion, ServiceOptions, Setup, WAIT, condition, create_catalog,
        create_operator_group, create_subscription, create_subscription_with, delete_crds,
        describe, install_plans, names, planned_csvs, point_catalog, publish, serve_bundles,
        start_services_with, subscription_status, wait_installed,
    },
};
use serde_json::{Value, json};

/// The image of the operator Deployment `name`.
async fn deployment_image(setup: &Setup, name: &str) -> String {
    let deployment: Deployment = setup.api().get(name).await.unwrap();
    deployment.spec.unwrap().template.spec.unwrap().containers[0]
        .image
        .clone()
        .unwrap_or_default()
}

/// Subscribed at v1 (`startingCSV`) to a channel v1 ← v2 ← v3, automatic
/// approval walks the chain one step per InstallPlan, ending at v3 with v1
/// and v2 gone.
#[tokio::test]
async fn automatic_approval_walks_a_replaces_chain_to_its_head() {
    let started = Instant::now();
    let setup = Setup::new("e2e-chain").await;
    let ns = setup.namespace();
    let host = setup.registry.host();
    let v1 = BundleSpec::new(&setup.group, "1.0.0");
    let v2 = BundleSpec::new(&setup.group, "2.0.0").replaces("gadgets.v1.0.0");
    let v3 = BundleSpec::new(&setup.group, "3.0.0").replaces("gadgets.v2.0.0");
    let (b1, i1) = publish(&host, &v1).await;
    let (b2, i2) = publish(&host, &v2).await;
    let (b3, i3) = publish(&host, &v3).await;
    let (catalog, _dir) = serve_bundles(&[(&b1, &i1), (&b2, &i2), (&b3, &i3)]).await;
    let services = start_services_with(ns, &host, ServiceOptions::default()).await;

    create_catalog(
        &setup.client,
        ns,
        "gadgets-catalog",
        &catalog.addr().to_string(),
    )
    .await;
    create_operator_group(&setup.client, ns, json!({})).await;
    create_subscription_with(
        &setup.client,
        ns,
        "gadgets",
        "gadgets-catalog",
        json!({"startingCSV": "gadgets.v1.0.0"}),
    )
    .await;

    let status = wait_installed(&setup.client, ns, "gadgets", "gadgets.v3.0.0").await;
    assert_eq!(status["currentCSV"], "gadgets.v3.0.0");
    eventually("v1 and v2 removed", WAIT, || async {
        let csvs = names::<ClusterServiceVersion>(&setup.client, ns).await;
        if csvs == ["gadgets.v3.0.0"] {
            Ok(())
        } else {
            Err(format!("{csvs:?}"))
        }
    })
    .await;
    // One InstallPlan per step of the chain, in order: nothing skipped.
    assert_eq!(
        planned_csvs(&setup.client, ns).await,
        [
            vec!["gadgets.v1.0.0".to_owned()],
            vec!["gadgets.v2.0.0".to_owned()],
            vec!["gadgets.v3.0.0".to_owned()]
        ]
    );
    for plan in install_plans(&setup.client, ns).await {
        assert_eq!(plan["status"]["phase"], "Complete", "{plan}");
    }
    assert_eq!(
        deployment_image(&setup, "gadget-operator").await,
        "quay.io/example/gadget-operator:v3.0.0"
    );
    assert_eq!(names::<Deployment>(&setup.client, ns).await.len(), 1);

    services.stop().await;
    delete_crds(&setup.client, &[v1.crd_name()]).await;
    eprintln!("wall time: {:?}", started.elapsed());
}

/// v1 installed; the catalog's next version adds v2 (replaces v1) and v3
/// whose `olm.skipRange` covers v1 and v2: the Subscription goes straight to
/// v3, v2 is never installed, and v3 replaces v1.
#[tokio::test]
async fn a_skip_range_jumps_straight_to_the_newest_bundle() {
    let started = Instant::now();
    let setup = Setup::new("e2e-skiprange").await;
    let ns = setup.namespace();
    let host = setup.registry.host();
    let v1 = BundleSpec::new(&setup.group, "1.0.0");
    let v2 = BundleSpec::new(&setup.group, "2.0.0").replaces("gadgets.v1.0.0");
    let v3 = BundleSpec::new(&setup.group, "3.0.0")
        .replaces("gadgets.v2.0.0")
        .skip_range(">=1.0.0 <3.0.0");
    let (b1, i1) = publish(&host, &v1).await;
    let (b2, i2) = publish(&host, &v2).await;
    let (b3, i3) = publish(&host, &v3).await;
    let (old, _old_dir) = serve_bundles(&[(&b1, &i1)]).await;
    let (new, _new_dir) = serve_bundles(&[(&b1, &i1), (&b2, &i2), (&b3, &i3)]).await;
    let services = start_services_with(ns, &host, ServiceOptions::default()).await;

    let catalogs = create_catalog(
        &setup.client,
        ns,
        "gadgets-catalog",
        &old.addr().to_string(),
    )
    .await;
    create_operator_group(&setup.client, ns, json!({})).await;
    create_subscription(&setup.client, ns, "gadgets", "gadgets-catalog", None).await;
    wait_installed(&setup.client, ns, "gadgets", "gadgets.v1.0.0").await;

    point_catalog(&catalogs, "gadgets-catalog", &new.addr().to_string()).await;
    wait_installed(&setup.client, ns, "gadgets", "gadgets.v3.0.0").await;
    eventually("v1 replaced", WAIT, || async {
        let csvs = names::<ClusterServiceVersion>(&setup.client, ns).await;
        if csvs == ["gadgets.v3.0.0"] {
            Ok(())
        } else {
            Err(format!("{csvs:?}"))
        }
    })
    .await;
    assert_eq!(
        planned_csvs(&setup.client, ns).await,
        [
            vec!["gadgets.v1.0.0".to_owned()],
            vec!["gadgets.v3.0.0".to_owned()]
        ],
        "v2 never planned"
    );
    assert_eq!(
        deployment_image(&setup, "gadget-operator").await,
        "quay.io/example/gadget-operator:v3.0.0"
    );

    services.stop().await;
    delete_crds(&setup.client, &[v1.crd_name()]).await;
    eprintln!("wall time: {:?}", started.elapsed());
}

/// `gadgets` (catalog A) requires the `Widget` API (`olm.gvk`, and a
/// required CRD in its CSV) that only `widgets` in catalog B provides: one
/// InstallPlan installs both, with a Subscription for the dependency
/// pointing at catalog B.
#[tokio::test]
async fn a_dependency_comes_from_a_second_catalog_in_the_same_install_plan() {
    let started = Instant::now();
    let setup = Setup::new("e2e-deps").await;
    let ns = setup.namespace();
    let host = setup.registry.host();
    let widgets = BundleSpec::package("widgets", &setup.group, "1.0.0");
    let gadgets = BundleSpec::new(&setup.group, "1.0.0")
        .dependency(json!({"type": "olm.gvk",
            "value": {"group": setup.group, "version": "v1", "kind": "Widget"}}))
        .requires_crd(&widgets.crd_name(), "v1", "Widget");
    let (gb, gi) = publish(&host, &gadgets).await;
    let (wb, wi) = publish(&host, &widgets).await;
    let (catalog_a, _a) = serve_bundles(&[(&gb, &gi)]).await;
    let (catalog_b, _b) = serve_bundles(&[(&wb, &wi)]).await;
    let services = start_services_with(ns, &host, ServiceOptions::default()).await;

    create_catalog(
        &setup.client,
        ns,
        "gadgets-catalog",
        &catalog_a.addr().to_string(),
    )
    .await;
    create_catalog(
        &setup.client,
        ns,
        "widgets-catalog",
        &catalog_b.addr().to_string(),
    )
    .await;
    create_operator_group(&setup.client, ns, json!({})).await;
    create_subscription(&setup.client, ns, "gadgets", "gadgets-catalog", None).await;

    wait_installed(&setup.client, ns, "gadgets", "gadgets.v1.0.0").await;
    olm_e2e::harness::wait_csv_succeeded(&setup.client, ns, "widgets.v1.0.0").await;
    assert_eq!(
        planned_csvs(&setup.client, ns).await,
        [vec![
            "gadgets.v1.0.0".to_owned(),
            "widgets.v1.0.0".to_owned()
        ]],
        "both in one InstallPlan"
    );
    // The dependency's Subscription, as upstream names it.
    let subs: Api<Subscription> = setup.api();
    let dependency_name = format!("widgets-stable-widgets-catalog-{ns}");
    let dependency = eventually("the dependency's Subscription", WAIT, || async {
        match subs.get_opt(&dependency_name).await {
            Ok(Some(sub)) => Ok(sub),
            Ok(None) => Err(describe(&setup.client, ns).await),
            Err(e) => Err(e.to_string()),
        }
    })
    .await;
    let spec = serde_json::to_value(&dependency.spec).unwrap();
    assert_eq!(spec["source"], "widgets-catalog", "{spec}");
    assert_eq!(spec["name"], "widgets", "{spec}");
    let status = wait_installed(&setup.client, ns, &dependency_name, "widgets.v1.0.0").await;
    assert_eq!(status["state"], "AtLatestKnown");
    assert_eq!(
        names::<Deployment>(&setup.client, ns).await,
        ["gadget-operator", "widget-operator"]
    );

    services.stop().await;
    delete_crds(&setup.client, &[gadgets.crd_name(), widgets.crd_name()]).await;
    eprintln!("wall time: {:?}", started.elapsed());
}

/// A Gadget custom resource at `version` with `spec`.
async fn create_gadget(setup: &Setup, version: &str, name: &str, spec: Value) {
    let gvk = GroupVersionKind::gvk(&setup.group, version, "Gadget");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "gadgets");
    let api: Api<DynamicObject> =
        Api::namespaced_with(setup.client.clone(), setup.namespace(), &resource);
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{}/{version}", setup.group), "kind": "Gadget",
        "metadata": {"name": name}, "spec": spec
    }))
    .unwrap();
    eventually("the Gadget created", WAIT, || async {
        api.create(&PostParams::default(), &object)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .await;
}

/// Installs v1 (CRD at `v1`, open schema) with one Gadget holding
/// `{"size": "big"}`, then offers v2 whose CRD has `new_versions`: the
/// InstallPlan fails naming what it refused, and nothing of v2 is applied.
async fn crd_upgrade_is_refused(prefix: &str, new_versions: Vec<CrdVersion>, expected: &[&str]) {
    let started = Instant::now();
    let setup = Setup::new(prefix).await;
    let ns = setup.namespace();
    let host = setup.registry.host();
    let v1 = BundleSpec::new(&setup.group, "1.0.0");
    let v2 = BundleSpec::new(&setup.group, "2.0.0")
        .replaces("gadgets.v1.0.0")
        .crd_versions(new_versions);
    let (b1, i1) = publish(&host, &v1).await;
    let (b2, i2) = publish(&host, &v2).await;
    let (old, _old_dir) = serve_bundles(&[(&b1, &i1)]).await;
    let (new, _new_dir) = serve_bundles(&[(&b1, &i1), (&b2, &i2)]).await;
    let services = start_services_with(
        ns,
        &host,
        ServiceOptions {
            install_plan_retry_timeout: Some(Duration::from_secs(3)),
            ..ServiceOptions::default()
        },
    )
    .await;

    let catalogs = create_catalog(
        &setup.client,
        ns,
        "gadgets-catalog",
        &old.addr().to_string(),
    )
    .await;
    create_operator_group(&setup.client, ns, json!({})).await;
    let subs = create_subscription(&setup.client, ns, "gadgets", "gadgets-catalog", None).await;
    wait_installed(&setup.client, ns, "gadgets", "gadgets.v1.0.0").await;
    create_gadget(&setup, "v1", "my-gadget", json!({"size": "big"})).await;
    let crds: Api<CustomResourceDefinition> = Api::all(setup.client.clone());
    let crd_before = crds.get(&v1.crd_name()).await.unwrap();

    point_catalog(&catalogs, "gadgets-catalog", &new.addr().to_string()).await;
    let failed = eventually("the v2 InstallPlan Failed", WAIT, || async {
        let plans = install_plans(&setup.client, ns).await;
        let plan = plans
            .iter()
            .find(|p| p["spec"]["clusterServiceVersionNames"] == json!(["gadgets.v2.0.0"]))
            .ok_or_else(|| format!("no v2 plan; {plans:?}"))?;
        if plan["status"]["phase"] == "Failed" {
            Ok(plan.clone())
        } else {
            Err(plan["status"].to_string())
        }
    })
    .await;
    let installed = failed["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Installed"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(installed["status"], "False", "{failed}");
    assert_eq!(installed["reason"], "InstallComponentFailed", "{failed}");
    let message = installed["message"].as_str().unwrap_or_default();
    for part in expected {
        let part = part.replace("{crd}", &v1.crd_name());
        assert!(message.contains(&part), "{part:?} not in {message:?}");
    }
    // `kubectl olm preview` of the same upgrade reaches the same verdict,
    // with the same words, before anything is applied.
    let out = olm_e2e::kubectl_olm(
        ns,
        &[
            "preview",
            "gadgets",
            "-o",
            "json",
            "--insecure-registry",
            &host,
        ],
    )
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let preview: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout}{}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(preview["changes"][0]["csv"], "gadgets.v2.0.0", "{preview}");
    let verdict = &preview["changes"][0]["crds"][0];
    assert_eq!(verdict["name"], v1.crd_name().as_str(), "{preview}");
    assert_eq!(verdict["verdict"], "refused", "{preview}");
    let refusal = verdict["message"].as_str().unwrap_or_default();
    for part in expected {
        let part = part.replace("{crd}", &v1.crd_name());
        assert!(
            refusal.contains(&part),
            "preview: {part:?} not in {refusal:?}"
        );
    }
    assert_eq!(
        refusal, message,
        "the preview's refusal is the InstallPlan's, word for word"
    );

    // The Subscription says so.
    eventually("InstallPlanFailed on the Subscription", WAIT, || async {
        let status = subscription_status(&subs, "gadgets").await?;
        match condition(&status, "InstallPlanFailed") {
            Some(c) if c["status"] == "True" => Ok(()),
            _ => Err(status.to_string()),
        }
    })
    .await;

    // Nothing of v2 was applied: the CRD is as it was, no v2 CSV, the
    // operator still runs v1.
    let crd_after = crds.get(&v1.crd_name()).await.unwrap();
    assert_eq!(
        serde_json::to_value(&crd_after.spec).unwrap(),
        serde_json::to_value(&crd_before.spec).unwrap(),
        "the CRD was changed"
    );
    let csvs: Api<ClusterServiceVersion> = setup.api();
    assert!(csvs.get_opt("gadgets.v2.0.0").await.unwrap().is_none());
    assert_eq!(
        olm_e2e::harness::csv_phase(&csvs, "gadgets.v1.0.0")
            .await
            .unwrap(),
        "Succeeded"
    );
    assert_eq!(
        deployment_image(&setup, "gadget-operator").await,
        "quay.io/example/gadget-operator:v1.0.0"
    );

    services.stop().await;
    delete_crds(&setup.client, &[v1.crd_name()]).await;
    eprintln!("wall time: {:?}", started.elapsed());
}

/// v2's CRD serves only `v2`, dropping `v1`, a stored version.
#[tokio::test]
async fn a_crd_upgrade_dropping_a_stored_version_is_refused() {
    crd_upgrade_is_refused(
        "e2e-crd-drop",
        vec![CrdVersion::open("v2", true)],
        &[
            "risk of data loss updating \"{crd}\"",
            "new CRD removes version v1 that is listed as a stored version on the existing CRD",
        ],
    )
    .await;
}

/// v2's CRD keeps `v1` but requires `spec.size` to be an integer, which the
/// existing Gadget (`size: big`) is not.
#[tokio::test]
async fn a_crd_upgrade_invalidating_an_existing_resource_is_refused() {
    let strict = CrdVersion {
        name: "v1".to_owned(),
        storage: true,
        schema: json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}),
    };
    crd_upgrade_is_refused(
        "e2e-crd-invalid",
        vec![strict],
        &[
            "error validating existing CRs against new CRD's schema for \"{crd}\"",
            "my-gadget",
            "v1",
        ],
    )
    .await;
}
