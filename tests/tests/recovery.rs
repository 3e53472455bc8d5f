//! Failures and recovery, end to end, on a real control plane with a real
//! OCI registry and real NATS: an unreachable catalog, the staging-registry
//! incident, the allowed-registries policy, SIGKILL of the real
//! catalog-operator and bundle-unpacker binaries mid-install, and NATS
//! stopped mid-install. In each, the install converges with nobody's help
//! and leaves no duplicate or orphaned objects.

// Test helpers: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use k8s_openapi::api::{apps::v1::Deployment, batch::v1::Job, core::v1::ConfigMap};
use kube::Api;
use olm_api::{csv::ClusterServiceVersion, install_plan::InstallPlan};
use olm_e2e::{
    eventually,
    harness::{
        Blackhole, BundleSpec, ServiceOptions, ServiceProcess, Setup, SlowProxy, WAIT, condition,
        create_catalog, create_operator_group, create_subscription, delete_crds, describe,
        install_plans, install_plans_complete, names, planned_csvs, point_catalog, push_bundle_as,
        serve_bundles, serve_bundles_on, start_services_with, subscription_status, wait_installed,
    },
};
use serde_json::{Value, json};

/// The unpacked-bundle ConfigMaps of the namespace, by source image.
async fn unpacked_images(setup: &Setup) -> Vec<String> {
    let maps: Api<ConfigMap> = setup.api();
    let mut images: Vec<String> = maps
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter_map(|m| {
            m.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("olm.sourceImage"))
                .cloned()
        })
        .collect();
    images.sort();
    images
}

/// Waits for the Subscription condition `kind` to satisfy `check`; returns it.
async fn wait_condition(
    setup: &Setup,
    what: &str,
    kind: &str,
    deadline: Duration,
    check: impl Fn(&Value) -> bool,
) -> Value {
    let subs = setup.api();
    eventually(what, deadline, || async {
        let status = subscription_status(&subs, "gadgets").await?;
        match condition(&status, kind) {
            Some(c) if check(c) => Ok(c.clone()),
            _ => Err(status.to_string()),
        }
    })
    .await
}

/// The install left exactly one of everything: one InstallPlan (Complete),
/// one CSV, one operator Deployment, one unpacked bundle.
async fn assert_single_install(setup: &Setup, image: &str) {
    let ns = setup.namespace();
    let plans = install_plans_complete(&setup.client, ns).await;
    assert_eq!(plans.len(), 1, "one InstallPlan: {plans:?}");
    assert_eq!(
        names::<ClusterServiceVersion>(&setup.client, ns).await,
        ["gadgets.v1.0.0"]
    );
    assert_eq!(
        names::<Deployment>(&setup.client, ns).await,
        ["gadget-operator"]
    );
    assert_eq!(unpacked_images(setup).await, [image]);
    assert!(names::<Job>(&setup.client, ns).await.is_empty());
}

/// The catalog's address answers nobody: the Subscription reports
/// `CatalogSourcesUnhealthy` naming the catalog; once a registry serves that
/// address, the condition clears and the install proceeds.
#[tokio::test]
async fn an_unreachable_catalog_is_reported_and_cleared_when_it_returns() {
    let started = Instant::now();
    let setup = Setup::new("e2e-unhealthy").await;
    let ns = setup.namespace();
    let host = setup.registry.host();
    let spec = BundleSpec::new(&setup.group, "1.0.0");
    let (bundle, image) = olm_e2e::harness::publish(&host, &spec).await;
    // A free port nobody listens on yet.
    let address = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let services = start_services_with(ns, &host, ServiceOptions::default()).await;
    create_catalog(&setup.client, ns, "gadgets-catalog", &address.to_string()).await;
    create_operator_group(&setup.client, ns, json!({})).await;
    create_subscription(&setup.client, ns, "gadgets", "gadgets-catalog", None).await;

    let unhealthy = wait_condition(
        &setup,
        "CatalogSourcesUnhealthy",
        "CatalogSourcesUnhealthy",
        WAIT,
        |c| c["status"] == "True",
    )
    .await;
    // Upstream's reason says what changed in the set of catalogs (the
    // first time: CatalogSourcesAdded); the message names the catalog.
    assert!(
        [
            "UnhealthyCatalogSourceFound",
            "CatalogSourcesAdded",
            "CatalogSourcesUpdated"
        ]
        .contains(&unhealthy["reason"].as_str().unwrap_or_default()),
        "{unhealthy}"
    );
    assert_eq!(
        unhealthy["message"],
        format!("targeted catalogsource {ns}/gadgets-catalog unhealthy")
    );
    let status = subscription_status(&setup.api(), "gadgets").await.unwrap();
    let health = status["catalogHealth"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        health
            .iter()
            .any(|h| h["catalogSourceRef"]["name"] == "gadgets-catalog" && h["healthy"] == false),
        "{status}"
    );
    assert!(
        names::<InstallPlan>(&setup.client, ns).await.is_empty(),
        "nothing planned without the catalog"
    );

    // The registry comes up on that address.
    let listener = tokio::net::TcpListener::bind(address).await.unwrap();
    let (_serving, _dir) = serve_bundles_on(&[(&bundle, &image)], listener).await;
    wait_condition(
        &setup,
        "CatalogSourcesUnhealthy cleared",
        "CatalogSourcesUnhealthy",
        WAIT,
        |c| c["status"] == "False" && c["message"] == "all available catalogsources are healthy",
    )
    .await;
    wait_installed(&setup.client, ns, "gadgets", "gadgets.v1.0.0").await;
    assert_single_install(&setup, &image).await;

    services.stop().await;
    delete_crds(&setup.client, &[spec.crd_name()]).await;
    eprintln!("wall time: {:?}", started.elapsed());
}

/// The staging-registry incident. v1 is installed from catalog version 1.
/// Catalog version 2 adds v2, whose bundle image points at a registry that
/// never answers: within the OperatorGroup's shortened deadline the
/// Subscription says `BundleUnpackFailed`, and v1 keeps running. Catalog
/// version 3 points v2 at the right registry: the upgrade completes with no
/// manual step.
///
/// Orphans, counted at the end, are: InstallPlans not Complete; InstallPlans
/// still naming the bad image; ConfigMaps of the bad image (failure
/// records); Jobs; CSVs other than v2; Deployments other than the
/// operator's; and unpack conditions left on the Subscription. All zero.
#[tokio::test]
async fn the_staging_registry_incident_recovers_by_itself_with_no_orphans() {
    staging_registry_incident("e2e-incident", Fix::Fixed).await;
}

/// The same incident, ended by reverting the catalog to version 1 (v1
/// only): the Subscription settles back at v1, with no orphans.
#[tokio::test]
async fn the_staging_registry_incident_reverted_leaves_no_orphans() {
    staging_registry_incident("e2e-revert", Fix::Reverted).await;
}

/// How catalog version 3 ends the incident.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fix {
    /// v2 again, its image on the right registry.
    Fixed,
    /// Back to v1 only.
    Reverted,
}

async fn staging_registry_incident(prefix: &str, fix: Fix) {
    let started = Instant::now();
    let setup = Setup::new(prefix).await;
    let ns = setup.namespace();
    let host = setup.registry.host();
    let staging = Blackhole::start().await;
    let v1 = BundleSpec::new(&setup.group, "1.0.0");
    let v2 = BundleSpec::new(&setup.group, "2.0.0").replaces("gadgets.v1.0.0");
    let (b1, i1) = olm_e2e::harness::publish(&host, &v1).await;
    let (b2, good_image) = olm_e2e::harness::publish(&host, &v2).await;
    let bad_image = format!("{}/e2e/gadgets-bundle:v2.0.0", staging.host());
    let (catalog_v1, _d1) = serve_bundles(&[(&b1, &i1)]).await;
    let (catalog_v2, _d2) = serve_bundles(&[(&b1, &i1), (&b2, &bad_image)]).await;
    let (catalog_v3, _d3) = match fix {
        Fix::Fixed => serve_bundles(&[(&b1, &i1), (&b2, &good_image)]).await,
        Fix::Reverted => serve_bundles(&[(&b1, &i1)]).await,
    };
    let last = match fix {
        Fix::Fixed => "gadgets.v2.0.0",
        Fix::Reverted => "gadgets.v1.0.0",
    };
    let services = start_services_with(ns, &host, ServiceOptions::default()).await;

    let catalogs = create_catalog(
        &setup.client,
        ns,
        "gadgets-catalog",
        &catalog_v1.addr().to_string(),
    )
    .await;
    create_operator_group(
        &setup.client,
        ns,
        json!({"operatorframework.io/bundle-unpack-timeout": "5s"}),
    )
    .await;
    create_subscription(&setup.client, ns, "gadgets", "gadgets-catalog", None).await;
    wait_installed(&setup.client, ns, "gadgets", "gadgets.v1.0.0").await;

    // Catalog version 2: the bad image fails clearly, within the deadline
    // (5 s) plus the time to notice.
    let switched = Instant::now();
    point_catalog(&catalogs, "gadgets-catalog", &catalog_v2.addr().to_string()).await;
    let failed = wait_condition(
        &setup,
        "BundleUnpackFailed",
        "BundleUnpackFailed",
        Duration::from_secs(40),
        |c| c["status"] == "True",
    )
    .await;
    let failed_after = switched.elapsed();
    let message = failed["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("DeadlineExceeded"),
        "the failure says why: {message}"
    );
    assert!(
        message.contains(&staging.host()) || message.contains(&bad_image),
        "the failure names the image: {message}"
    );
    // v1 is untouched meanwhile.
    let csvs: Api<ClusterServiceVersion> = setup.api();
    assert_eq!(
        olm_e2e::harness::csv_phase(&csvs, "gadgets.v1.0.0")
            .await
            .unwrap(),
        "Succeeded"
    );
    assert!(csvs.get_opt("gadgets.v2.0.0").await.unwrap().is_none());
    // While the catalog still offers the bad image, no further plan is
    // written (the unpack is retried with backoff, not re-planned).
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        planned_csvs(&setup.client, ns).await,
        [
            vec!["gadgets.v1.0.0".to_owned()],
            vec!["gadgets.v2.0.0".to_owned()]
        ],
        "one plan per resolution, none repeated"
    );

    // Catalog version 3, fixed: nobody deletes anything.
    point_catalog(&catalogs, "gadgets-catalog", &catalog_v3.addr().to_string()).await;
    wait_installed(&setup.client, ns, "gadgets", last).await;
    let recovered_after = switched.elapsed();

    // Count the leftovers, once things have had a moment to settle.
    eventually("no orphans", Duration::from_secs(30), || async {
        let mut orphans = Vec::new();
        for plan in install_plans(&setup.client, ns).await {
            let name = plan["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if plan["status"]["phase"] != "Complete" {
                orphans.push(format!(
                    "InstallPlan {name} {} for {} with {} steps, lookups {}",
                    plan["status"]["phase"],
                    plan["spec"]["clusterServiceVersionNames"],
                    plan["status"]["plan"].as_array().map_or(0, Vec::len),
                    plan["status"]["bundleLookups"]
                ));
            }
            if plan.to_string().contains(&bad_image) {
                orphans.push(format!("InstallPlan {name} naming {bad_image}"));
            }
        }
        for image in unpacked_images(&setup).await {
            if image == bad_image {
                orphans.push(format!("ConfigMap of {image}"));
            }
        }
        for job in names::<Job>(&setup.client, ns).await {
            orphans.push(format!("Job {job}"));
        }
        for csv in names::<ClusterServiceVersion>(&setup.client, ns).await {
            if csv != last {
                orphans.push(format!("CSV {csv}"));
            }
        }
        for deployment in names::<Deployment>(&setup.client, ns).await {
            if deployment != "gadget-operator" {
                orphans.push(format!("Deployment {deployment}"));
            }
        }
        let status = subscription_status(&setup.api(), "gadgets").await?;
        for kind in ["BundleUnpackFailed", "BundleUnpacking", "InstallPlanFailed"] {
            if condition(&status, kind).is_some_and(|c| c["status"] == "True") {
                orphans.push(format!("Subscription condition {kind}"));
            }
        }
        if orphans.is_empty() {
            Ok(())
        } else {
            Err(format!("{} orphans: {orphans:?}", orphans.len()))
        }
    })
    .await;
    if fix == Fix::Fixed {
        assert_eq!(
            planned_csvs(&setup.client, ns).await.last(),
            Some(&vec!["gadgets.v2.0.0".to_owned()])
        );
    }
    eprintln!(
        "failure reported after {failed_after:?}, upgrade complete after {recovered_after:?}"
    );

    services.stop().await;
    delete_crds(&setup.client, &[v1.crd_name()]).await;
    eprintln!("wall time: {:?}", started.elapsed());
}

/// With an allowed-registries policy, a bundle from elsewhere is refused
/// before any pull: the registry sees no connection, and the Subscription's
/// condition names the bundle and the rules.
#[tokio::test]
async fn a_bundle_outside_the_allowed_registries_is_refused_before_any_pull() {
    let started = Instant::now();
    let setup = Setup::new("e2e-allowed").await;
    let ns = setup.namespace();
    let host = setup.registry.host();
    // Every request to the registry through this host is counted.
    let counted = SlowProxy::start(&host, Duration::ZERO).await;
    let spec = BundleSpec::new(&setup.group, "1.0.0");
    let bundle = spec.load();
    let image = format!("{}/e2e/gadgets-bundle:v1.0.0", counted.host());
    push_bundle_as(&counted.host(), &image, &spec.files(), &bundle).await;
    let after_push = counted.connections();
    assert!(after_push > 0, "the proxy counts requests");
    let (catalog, _dir) = serve_bundles(&[(&bundle, &image)]).await;
    let services = start_services_with(
        ns,
        &counted.host(),
        ServiceOptions {
            allowed_registries: vec!["quay.io".to_owned(), "*.example.com".to_owned()],
            ..ServiceOptions::default()
        },
    )
    .await;
    create_catalog(
        &setup.client,
        ns,
        "gadgets-catalog",
        &catalog.addr().to_string(),
    )
    .await;
    create_operator_group(&setup.client, ns, json!({})).await;
    create_subscription(&setup.client, ns, "gadgets", "gadgets-catalog", None).await;

    let failed = wait_condition(
        &setup,
        "BundleUnpackFailed",
        "BundleUnpackFailed",
        WAIT,
        |c| c["status"] == "True",
    )
    .await;
    let message = failed["message"].as_str().unwrap_or_default();
    for part in [
        "RegistryNotAllowed",
        image.as_str(),
        "quay.io",
        "*.example.com",
    ] {
        assert!(message.contains(part), "{part:?} not in {message:?}");
    }
    // A resync or two later, still no request reached the registry.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        counted.connections(),
        after_push,
        "the registry was contacted"
    );
    let csvs: Api<ClusterServiceVersion> = setup.api();
    assert!(csvs.get_opt("gadgets.v1.0.0").await.unwrap().is_none());

    services.stop().await;
    delete_crds(&setup.client, &[spec.crd_name()]).await;
    eprintln!("wall time: {:?}", started.elapsed());
}

/// A log file for a service binary of the test.
fn log_file(setup: &Setup, service: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("olm-e2e-{}-{service}.log", setup.namespace()))
}

/// The real catalog-operator binary, killed with SIGKILL while the
/// InstallPlan waits for its bundle: started again, the install converges
/// with one InstallPlan, one CSV, one Deployment.
#[tokio::test]
async fn sigkill_of_catalog_operator_mid_install_converges_without_duplicates() {
    // Built (or found fresh) before the clock starts.
    olm_e2e::harness::service_binary("catalog-operator");
    let started = Instant::now();
    let setup = Setup::new("e2e-kill-catalog").await;
    let ns = setup.namespace();
    let host = setup.registry.host();
    // The pull takes a while, so the kill lands mid-install.
    let slow = SlowProxy::start(&host, Duration::from_secs(2)).await;
    let spec = BundleSpec::new(&setup.group, "1.0.0");
    let bundle = spec.load();
    olm_e2e::harness::push_bundle(&host, &spec.files(), &bundle).await;
    let image = format!("{}/e2e/gadgets-bundle:v1.0.0", slow.host());
    let (catalog, _dir) = serve_bundles(&[(&bundle, &image)]).await;
    let services = start_services_with(
        ns,
        &slow.host(),
        ServiceOptions {
            without_catalog_operator: true,
            ..ServiceOptions::default()
        },
    )
    .await;
    let log = log_file(&setup, "catalog-operator");
    let args = ["--watchedNamespaces".to_owned(), ns.to_owned()];
    let first = ServiceProcess::start("catalog-operator", &args, &log);
    create_catalog(
        &setup.client,
        ns,
        "gadgets-catalog",
        &catalog.addr().to_string(),
    )
    .await;
    create_operator_group(&setup.client, ns, json!({})).await;
    create_subscription(&setup.client, ns, "gadgets", "gadgets-catalog", None).await;

    eventually("an InstallPlan waiting for its bundle", WAIT, || async {
        let plans = install_plans(&setup.client, ns).await;
        if plans.is_empty() {
            Err(format!("none yet (log {})", log.display()))
        } else {
            Ok(())
        }
    })
    .await;
    let csvs: Api<ClusterServiceVersion> = setup.api();
    assert!(
        csvs.get_opt("gadgets.v1.0.0").await.unwrap().is_none(),
        "killed before the CSV exists"
    );
    first.kill();

    let _second = ServiceProcess::start("catalog-operator", &args, &log);
    wait_installed(&setup.client, ns, "gadgets", "gadgets.v1.0.0").await;
    assert_single_install(&setup, &image).await;

    services.stop().await;
    delete_crds(&setup.client, &[spec.crd_name()]).await;
    eprintln!("wall time: {:?}", started.elapsed());
}

/// The real bundle-unpacker binary (with NATS), killed with SIGKILL while
/// it pulls the bundle: started again, the install converges with one
/// unpacked bundle, one InstallPlan, one CSV, one Deployment.
#[tokio::test]
async fn sigkill_of_bundle_unpacker_mid_pull_converges_without_duplicates() {
    // Built (or found fresh) before the clock starts.
    olm_e2e::harness::service_binary("bundle-unpacker");
    let started = Instant::now();
    let setup = Setup::new("e2e-kill-unpacker").await;
    let ns = setup.namespace();
    let host = setup.registry.host();
    let nats = olm_e2e::harness::SecuredNats::start();
    let slow = SlowProxy::start(&host, Duration::from_secs(2)).await;
    let spec = BundleSpec::new(&setup.group, "1.0.0");
    let bundle = spec.load();
    olm_e2e::harness::push_bundle(&host, &spec.files(), &bundle).await;
    let image = format!("{}/e2e/gadgets-bundle:v1.0.0", slow.host());
    let (catalog, _dir) = serve_bundles(&[(&bundle, &image)]).await;
    let services = start_services_with(
        ns,
        &slow.host(),
        ServiceOptions {
            without_bundle_unpacker: true,
            nats_url: Some(nats.url()),
            nats_nkeys: Some(nats.nkey_dir()),
            ..ServiceOptions::default()
        },
    )
    .await;
    let log = log_file(&setup, "bundle-unpacker");
    let mut args = vec![
        "--watchedNamespaces".to_owned(),
        ns.to_owned(),
        "--insecure-registry".to_owned(),
        slow.host(),
        "--watch-grace".to_owned(),
        "1s".to_owned(),
        "--resync".to_owned(),
        "5s".to_owned(),
    ];
    args.extend(nats.cli_args("bundle-unpacker"));
    let first = ServiceProcess::start("bundle-unpacker", &args, &log);
    create_catalog(
        &setup.client,
        ns,
        "gadgets-catalog",
        &catalog.addr().to_string(),
    )
    .await;
    create_operator_group(&setup.client, ns, json!({})).await;
    create_subscription(&setup.client, ns, "gadgets", "gadgets-catalog", None).await;

    // Killed once the pull has reached the (slow) registry.
    eventually("the pull started", WAIT, || async {
        if slow.connections() > 0 {
            Ok(())
        } else {
            Err(format!(
                "no connection yet (log {}); {}",
                log.display(),
                describe(&setup.client, ns).await
            ))
        }
    })
    .await;
    first.kill();
    assert!(
        unpacked_images(&setup).await.is_empty(),
        "killed before the bundle was stored"
    );

    let _second = ServiceProcess::start("bundle-unpacker", &args, &log);
    wait_installed(&setup.client, ns, "gadgets", "gadgets.v1.0.0").await;
    assert_single_install(&setup, &image).await;

    services.stop().await;
    delete_crds(&setup.client, &[spec.crd_name()]).await;
    eprintln!("wall time: {:?}", started.elapsed());
}

/// NATS stops while the bundle is being pulled (the work came over the
/// queue): the install still converges through the watches, once.
#[tokio::test]
async fn nats_stopped_mid_install_still_converges() {
    let started = Instant::now();
    let setup = Setup::new("e2e-nats-down").await;
    let ns = setup.namespace();
    let host = setup.registry.host();
    let mut nats = olm_e2e::harness::SecuredNats::start();
    let slow = SlowProxy::start(&host, Duration::from_secs(2)).await;
    let spec = BundleSpec::new(&setup.group, "1.0.0");
    let bundle = spec.load();
    olm_e2e::harness::push_bundle(&host, &spec.files(), &bundle).await;
    let image = format!("{}/e2e/gadgets-bundle:v1.0.0", slow.host());
    let (catalog, _dir) = serve_bundles(&[(&bundle, &image)]).await;
    let services = start_services_with(
        ns,
        &slow.host(),
        ServiceOptions {
            nats_url: Some(nats.url()),
            nats_nkeys: Some(nats.nkey_dir()),
            ..ServiceOptions::default()
        },
    )
    .await;
    create_catalog(
        &setup.client,
        ns,
        "gadgets-catalog",
        &catalog.addr().to_string(),
    )
    .await;
    create_operator_group(&setup.client, ns, json!({})).await;
    create_subscription(&setup.client, ns, "gadgets", "gadgets-catalog", None).await;

    eventually("the pull started", WAIT, || async {
        if slow.connections() > 0 {
            Ok(())
        } else {
            Err(describe(&setup.client, ns).await)
        }
    })
    .await;
    nats.server.stop();
    assert!(!nats.server.is_running());
    assert!(
        unpacked_images(&setup).await.is_empty(),
        "NATS stopped before the bundle was stored"
    );

    wait_installed(&setup.client, ns, "gadgets", "gadgets.v1.0.0").await;
    assert_single_install(&setup, &image).await;

    services.stop().await;
    delete_crds(&setup.client, &[spec.crd_name()]).await;
    eprintln!("wall time: {:?}", started.elapsed());
}
