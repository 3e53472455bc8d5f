//! Bundles pulled from a real registry into ConfigMaps: public and private
//! images, images that are not bundles, deadlines, a lost bus message, and
//! two replicas sharing the work queue.

use std::{path::PathBuf, time::Duration};

use base64::Engine as _;
use bundle_unpacker::{
    controller::UnpackerConfig,
    decide::{content::ATTEMPTS_ANNOTATION, failure},
    metrics::{DUPLICATE, FAILED, SUCCEEDED},
};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use olm_bus::{
    Bus, BusArgs, ConnectionState,
    events::{BundleUnpackRequest, ObjectRef},
};
use olm_catalog::unpacked;
use olm_oci::{Credentials, ImageBuilder};
use olm_testkit::{
    control_plane,
    nats::NatsServer,
    registry::{BASIC_AUTH_PASSWORD, BASIC_AUTH_USER, Registry},
};
use serde_json::json;

use crate::{
    RunningUnpacker, eventually,
    fixtures::{
        self, Stored, WAIT, config, create_catalog, create_operator_group, create_plan, push,
        push_bundle, wait_stored,
    },
    init_logs, olm_crds_installed,
};

fn corpus_bundle(version: &str) -> Option<PathBuf> {
    olm_testkit::testdata().map(|d| d.join("bundles/etcd").join(version))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_lookup_becomes_a_config_map_owned_by_its_catalog() {
    init_logs();
    let Some(dir) = corpus_bundle("0.9.4") else {
        return;
    };
    olm_crds_installed().await;
    let registry = Registry::start().unwrap();
    let ns = control_plane().namespace("unpack-public").await;
    let client = control_plane().client().await;
    let image = format!("{}/olm/etcd-bundle:v0.9.4", registry.host());
    let digest = push_bundle(&dir, &image, None).await;
    create_catalog(&client, ns.name(), "fixture-catalog", &[]).await;
    let unpacker =
        RunningUnpacker::start(config(ns.name(), &registry.host()), Bus::disabled()).await;
    create_plan(
        &client,
        ns.name(),
        "install-fixture",
        "fixture-catalog",
        &[&image],
    )
    .await;

    let Stored::Content(bundle, cm) = wait_stored(&client, ns.name(), &image).await else {
        panic!("expected content");
    };
    assert_eq!(bundle.csv_name, "etcdoperator.v0.9.4");
    assert_eq!(bundle.objects.len(), 4);
    assert_eq!(
        bundle.annotations["operators.operatorframework.io.bundle.package.v1"],
        "etcd"
    );
    let annotations = cm.annotations();
    assert_eq!(
        annotations[unpacked::IMAGE_DIGEST],
        digest,
        "the tag is resolved to its digest"
    );
    assert_eq!(annotations[unpacked::SOURCE_IMAGE], image);
    assert_eq!(
        annotations["operators.operatorframework.io.bundle.channels.v1"],
        "singlenamespace-alpha"
    );
    assert_eq!(cm.labels()["olm.managed"], "true");
    assert_eq!(
        cm.labels()["operatorframework.io/bundle-unpack-ref"],
        cm.name_any()
    );
    let owner = &cm.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("CatalogSource", "fixture-catalog", Some(false))
    );
    // Counted once the ConfigMap's create is answered, a moment after the
    // ConfigMap can be seen.
    eventually("the unpack counted", WAIT, || async {
        match unpacker.metrics.count(SUCCEEDED) {
            0 => Err("not yet".to_owned()),
            n => Ok(n),
        }
    })
    .await;
    assert_eq!(unpacker.metrics.count(SUCCEEDED), 1);
    assert!(
        unpacker
            .metrics_text()
            .contains("bundle_unpacker_unpacks_total{outcome=\"succeeded\",reason=\"\"} 1"),
        "{}",
        unpacker.metrics_text()
    );
    assert!(
        unpacker
            .metrics_text()
            .contains("bundle_unpacker_reconcile_runs_total{controller=\"installplan\"}"),
        "the watch's reconciles are counted: {}",
        unpacker.metrics_text()
    );

    // Resyncs find the content stored and pull nothing more.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(unpacker.metrics.count(SUCCEEDED), 1);
    assert_eq!(unpacker.metrics.count(DUPLICATE), 0);

    // The content goes with its catalog.
    let catalogs: Api<olm_api::catalog_source::CatalogSource> =
        Api::namespaced(client.clone(), ns.name());
    catalogs
        .delete("fixture-catalog", &DeleteParams::background())
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    let name = cm.name_any();
    eventually("content garbage-collected with its catalog", WAIT, || {
        let cms = cms.clone();
        let name = name.clone();
        async move {
            match cms.get_opt(&name).await.map_err(|e| e.to_string())? {
                None => Ok(()),
                Some(_) => Err("still there".to_owned()),
            }
        }
    })
    .await;
    unpacker.stop().await;
}

fn docker_config_secret(name: &str, registry: &str) -> Secret {
    let auth = base64::engine::general_purpose::STANDARD
        .encode(format!("{BASIC_AUTH_USER}:{BASIC_AUTH_PASSWORD}"));
    let body = json!({"auths": {registry: {"auth": auth}}}).to_string();
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": base64::engine::general_purpose::STANDARD.encode(body)},
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_image_needs_a_pull_secret_and_is_retried_once_it_exists() {
    init_logs();
    let Some(dir) = corpus_bundle("0.9.2") else {
        return;
    };
    olm_crds_installed().await;
    let registry = Registry::start_with_basic_auth().unwrap();
    let ns = control_plane().namespace("unpack-private").await;
    let client = control_plane().client().await;
    let credentials = Credentials::basic(BASIC_AUTH_USER, BASIC_AUTH_PASSWORD);
    let image = format!("{}/private/etcd-bundle:v0.9.2", registry.host());
    push_bundle(&dir, &image, Some(credentials.clone())).await;
    create_operator_group(
        &client,
        ns.name(),
        &[(olm_api::labels::BUNDLE_UNPACK_MIN_RETRY_INTERVAL, "1s")],
    )
    .await;
    create_catalog(
        &client,
        ns.name(),
        "private-catalog",
        &["fixture-pull-secret"],
    )
    .await;
    let unpacker =
        RunningUnpacker::start(config(ns.name(), &registry.host()), Bus::disabled()).await;
    create_plan(
        &client,
        ns.name(),
        "install-private",
        "private-catalog",
        &[&image],
    )
    .await;

    // Without the secret: refused, and the registry's words recorded.
    let Stored::Failure(reason, message, _) = wait_stored(&client, ns.name(), &image).await else {
        panic!("expected a failure without credentials");
    };
    assert_eq!(reason, failure::UNAUTHORIZED);
    assert!(message.contains("401"), "{message}");

    // The secret named by the catalog appears: the next retry succeeds.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns.name());
    secrets
        .create(
            &PostParams::default(),
            &docker_config_secret("fixture-pull-secret", &registry.host()),
        )
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    let name = unpacked::config_map_name(&image);
    let bundle = eventually("content after the secret appears", WAIT, || {
        let cms = cms.clone();
        let name = name.clone();
        async move {
            let cm = cms
                .get_opt(&name)
                .await
                .map_err(|e| e.to_string())?
                .ok_or("absent")?;
            match fixtures::read(cm) {
                Stored::Content(bundle, _) => Ok(bundle),
                Stored::Failure(reason, message, _) => Err(format!("{reason}: {message}")),
            }
        }
    })
    .await;
    assert_eq!(bundle.csv_name, "etcdoperator.v0.9.2");
    assert!(unpacker.metrics.retry_count() >= 1);

    // The namespace's default ServiceAccount's imagePullSecrets serve a
    // catalog that names none.
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), ns.name());
    eventually("default serviceaccount", WAIT, || {
        let accounts = accounts.clone();
        async move {
            accounts
                .get_opt("default")
                .await
                .map_err(|e| e.to_string())?
                .ok_or_else(|| "absent".to_owned())
        }
    })
    .await;
    accounts
        .patch(
            "default",
            &PatchParams::default(),
            &Patch::Merge(json!({"imagePullSecrets": [{"name": "fixture-pull-secret"}]})),
        )
        .await
        .unwrap();
    let second = format!("{}/private/etcd-bundle:v0.9.2-again", registry.host());
    push_bundle(&dir, &second, Some(credentials)).await;
    create_catalog(&client, ns.name(), "plain-catalog", &[]).await;
    create_plan(
        &client,
        ns.name(),
        "install-private-2",
        "plain-catalog",
        &[&second],
    )
    .await;
    let Stored::Content(bundle, _) = wait_stored(&client, ns.name(), &second).await else {
        panic!("expected content with the serviceaccount's pull secret");
    };
    assert_eq!(bundle.csv_name, "etcdoperator.v0.9.2");
    unpacker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_that_is_not_a_bundle_is_recorded_and_retried_with_backoff() {
    init_logs();
    olm_crds_installed().await;
    let registry = Registry::start().unwrap();
    let ns = control_plane().namespace("unpack-invalid").await;
    let client = control_plane().client().await;
    let image = format!("{}/olm/not-a-bundle:v1", registry.host());
    push(
        ImageBuilder::new()
            .add_file("hello.txt", b"hello".to_vec())
            .unwrap(),
        &image,
        None,
    )
    .await;
    create_operator_group(
        &client,
        ns.name(),
        &[(olm_api::labels::BUNDLE_UNPACK_MIN_RETRY_INTERVAL, "1s")],
    )
    .await;
    create_catalog(&client, ns.name(), "fixture-catalog", &[]).await;
    let unpacker =
        RunningUnpacker::start(config(ns.name(), &registry.host()), Bus::disabled()).await;
    create_plan(
        &client,
        ns.name(),
        "install-invalid",
        "fixture-catalog",
        &[&image],
    )
    .await;

    let Stored::Failure(reason, message, first) = wait_stored(&client, ns.name(), &image).await
    else {
        panic!("expected a failure");
    };
    assert_eq!(reason, failure::INVALID_BUNDLE);
    assert!(message.contains(&image), "{message}");
    assert_eq!(first.annotations()[ATTEMPTS_ANNOTATION], "1");

    // After the interval the record is cleared and the image tried again;
    // the attempt count carries over, so retries back off (1 s, 2 s, 4 s...).
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    let name = first.name_any();
    let first_uid = first.uid().unwrap();
    let second = eventually("a retry", WAIT, || {
        let cms = cms.clone();
        let name = name.clone();
        let first_uid = first_uid.clone();
        async move {
            let cm = cms
                .get_opt(&name)
                .await
                .map_err(|e| e.to_string())?
                .ok_or("absent")?;
            if cm.uid().as_deref() != Some(first_uid.as_str())
                && cm.annotations().contains_key(ATTEMPTS_ANNOTATION)
            {
                Ok(cm)
            } else {
                Err("not retried yet".to_owned())
            }
        }
    })
    .await;
    assert_eq!(second.annotations()[ATTEMPTS_ANNOTATION], "2");
    assert!(unpacker.metrics.retry_count() >= 1);
    // Never a tight loop: within 4 more seconds at most two further tries.
    let failed = unpacker.metrics.count(FAILED);
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(
        unpacker.metrics.count(FAILED) <= failed + 2,
        "{}",
        unpacker.metrics_text()
    );
    unpacker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unpack_past_the_operator_group_deadline_is_recorded_as_deadline_exceeded() {
    init_logs();
    let Some(dir) = corpus_bundle("0.9.0") else {
        return;
    };
    olm_crds_installed().await;
    let registry = Registry::start().unwrap();
    let ns = control_plane().namespace("unpack-deadline").await;
    let client = control_plane().client().await;
    let image = format!("{}/olm/etcd-bundle:v0.9.0", registry.host());
    push_bundle(&dir, &image, None).await;
    create_operator_group(
        &client,
        ns.name(),
        &[(olm_api::labels::BUNDLE_UNPACK_TIMEOUT, "1ns")],
    )
    .await;
    create_catalog(&client, ns.name(), "fixture-catalog", &[]).await;
    let unpacker =
        RunningUnpacker::start(config(ns.name(), &registry.host()), Bus::disabled()).await;
    create_plan(
        &client,
        ns.name(),
        "install-deadline",
        "fixture-catalog",
        &[&image],
    )
    .await;
    let Stored::Failure(reason, message, _) = wait_stored(&client, ns.name(), &image).await else {
        panic!("expected a deadline failure");
    };
    assert_eq!(reason, failure::DEADLINE_EXCEEDED, "{message}");
    unpacker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_nats_down_the_watch_still_converges() {
    init_logs();
    let Some(dir) = corpus_bundle("0.6.1") else {
        return;
    };
    olm_crds_installed().await;
    let registry = Registry::start().unwrap();
    let mut nats = NatsServer::start().unwrap();
    let ns = control_plane().namespace("unpack-nats-down").await;
    let client = control_plane().client().await;
    let image = format!("{}/olm/etcd-bundle:v0.6.1", registry.host());
    push_bundle(&dir, &image, None).await;
    create_catalog(&client, ns.name(), "fixture-catalog", &[]).await;
    let bus = Bus::connect(&BusArgs::with_url(nats.url()), "bundle-unpacker")
        .await
        .unwrap();
    bus.wait_connected(Duration::from_secs(10)).await.unwrap();
    // A grace far beyond the test: only a disconnected bus lets the watch act at once.
    let config = UnpackerConfig {
        watch_grace: Duration::from_secs(600),
        ..config(ns.name(), &registry.host())
    };
    let unpacker = RunningUnpacker::start(config, bus.clone()).await;
    nats.stop();
    eventually("the bus notices NATS is gone", WAIT, || {
        let state = bus.connection_state();
        async move {
            if state == ConnectionState::Connected {
                Err(format!("{state:?}"))
            } else {
                Ok(())
            }
        }
    })
    .await;
    // catalog-operator's request is lost with NATS; the plan says what is needed.
    create_plan(
        &client,
        ns.name(),
        "install-nats-down",
        "fixture-catalog",
        &[&image],
    )
    .await;
    let Stored::Content(bundle, _) = wait_stored(&client, ns.name(), &image).await else {
        panic!("expected content");
    };
    assert_eq!(bundle.csv_name, "etcdoperator.v0.6.1");
    assert_eq!(unpacker.metrics.work_count("watch"), 1);
    assert_eq!(unpacker.metrics.work_count("queue"), 0);
    unpacker.stop().await;
}

fn request(namespace: &str, image: &str, plan_version: &str) -> BundleUnpackRequest {
    BundleUnpackRequest {
        bundle_path: image.to_owned(),
        bundle_name: "etcd".to_owned(),
        catalog: Some(ObjectRef::new(
            "operators.coreos.com/v1alpha1",
            "CatalogSource",
            namespace,
            "fixture-catalog",
        )),
        install_plan: Some(
            ObjectRef::new(
                "operators.coreos.com/v1alpha1",
                "InstallPlan",
                namespace,
                "install-shared",
            )
            .at("uid-install-shared", plan_version),
        ),
        deadline: None,
        occurred_at: Some(olm_bus::events::now()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_share_the_work_queue_without_double_work() {
    init_logs();
    let Some(testdata) = olm_testkit::testdata() else {
        return;
    };
    olm_crds_installed().await;
    let registry = Registry::start().unwrap();
    let nats = NatsServer::start().unwrap();
    let ns = control_plane().namespace("unpack-replicas").await;
    let client = control_plane().client().await;
    let versions = [
        "0.6.1",
        "0.9.0",
        "0.9.2",
        "0.9.4",
        "0.9.2-clusterwide",
        "0.9.4-clusterwide",
    ];
    let mut images = Vec::new();
    for version in versions {
        let image = format!("{}/olm/etcd-bundle:v{version}", registry.host());
        push_bundle(&testdata.join("bundles/etcd").join(version), &image, None).await;
        images.push(image);
    }
    create_catalog(&client, ns.name(), "fixture-catalog", &[]).await;
    // Only the queue acts in this test: the watch's grace outlasts it.
    let config = UnpackerConfig {
        watch_grace: Duration::from_secs(600),
        ..config(ns.name(), &registry.host())
    };
    let mut replicas = Vec::new();
    for _ in 0..2 {
        let bus = Bus::connect(&BusArgs::with_url(nats.url()), "bundle-unpacker")
            .await
            .unwrap();
        bus.wait_connected(Duration::from_secs(10)).await.unwrap();
        replicas.push(RunningUnpacker::start(config.clone(), bus).await);
    }
    let image_refs: Vec<&str> = images.iter().map(String::as_str).collect();
    create_plan(
        &client,
        ns.name(),
        "install-shared",
        "fixture-catalog",
        &image_refs,
    )
    .await;
    let requester = Bus::connect(&BusArgs::with_url(nats.url()), "catalog-operator")
        .await
        .unwrap();
    requester
        .wait_connected(Duration::from_secs(10))
        .await
        .unwrap();
    requester.declare_streams().await.unwrap();
    for image in &images {
        requester
            .publish(&request(ns.name(), image, "1"))
            .await
            .unwrap();
    }
    for image in &images {
        let Stored::Content(_, _) = wait_stored(&client, ns.name(), image).await else {
            panic!("expected content for {image}");
        };
    }
    let total = |f: &dyn Fn(&RunningUnpacker) -> u64| replicas.iter().map(f).sum::<u64>();
    // The last unpack is counted once its ConfigMap's create is answered.
    eventually("every unpack counted", WAIT, || async {
        match total(&|r| r.metrics.count(SUCCEEDED)) {
            n if n >= images.len() as u64 => Ok(()),
            n => Err(format!("{n} of {}", images.len())),
        }
    })
    .await;
    assert_eq!(total(&|r| r.metrics.count(SUCCEEDED)), images.len() as u64);
    assert_eq!(total(&|r| r.metrics.count(DUPLICATE)), 0);
    assert_eq!(
        total(&|r| r.metrics.work_count("queue")),
        images.len() as u64
    );
    assert_eq!(total(&|r| r.metrics.work_count("watch")), 0);
    println!(
        "work per replica: {:?}",
        replicas
            .iter()
            .map(|r| r.metrics.work_count("queue"))
            .collect::<Vec<_>>()
    );

    // Asked again (a resync of catalog-operator): nothing is pulled twice.
    for image in &images {
        requester
            .publish(&request(ns.name(), image, "2"))
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        total(&|r| r.metrics.work_count("queue")),
        images.len() as u64
    );
    assert_eq!(total(&|r| r.metrics.count(SUCCEEDED)), images.len() as u64);
    for replica in replicas {
        replica.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundle_outside_the_allowed_registries_is_refused_before_any_pull() {
    init_logs();
    olm_crds_installed().await;
    let ns = control_plane().namespace("unpack-allowed").await;
    let client = control_plane().client().await;
    // No registry runs at this address: a pull would fail differently.
    let image = "127.0.0.1:1/staging/etcd-bundle:v9";
    create_catalog(&client, ns.name(), "fixture-catalog", &[]).await;
    let config = UnpackerConfig {
        allowed_registries: vec![bundle_unpacker::decide::registries::RegistryRule::new(
            "quay.io",
        )],
        ..config(ns.name(), "127.0.0.1:1")
    };
    let unpacker = RunningUnpacker::start(config, Bus::disabled()).await;
    create_plan(
        &client,
        ns.name(),
        "install-allowed",
        "fixture-catalog",
        &[image],
    )
    .await;
    let Stored::Failure(reason, message, _) = wait_stored(&client, ns.name(), image).await else {
        panic!("expected a refusal");
    };
    assert_eq!(reason, failure::REGISTRY_NOT_ALLOWED);
    assert!(
        message.contains(image) && message.contains("[quay.io]"),
        "{message}"
    );
    unpacker.stop().await;
}

/// A TCP listener on loopback that counts the connections made to it: a
/// registry address that tells whether anything tried to pull from it.
async fn counting_listener() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host = listener.local_addr().unwrap().to_string();
    let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = count.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            drop(stream);
        }
    });
    (host, count)
}

/// Anyone who can publish on the bus could ask for a pull of any image, with
/// any catalog's pull secrets, into any namespace. Requests are now checked
/// against the InstallPlan they name: forged ones are dropped unread and
/// nothing is pulled, while a genuine request is still served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_unpack_request_pulls_nothing() {
    use std::sync::atomic::Ordering;
    init_logs();
    olm_crds_installed().await;
    let nats = NatsServer::start().unwrap();
    let ns = control_plane().namespace("unpack-forged").await;
    let client = control_plane().client().await;
    let (forged_host, forged_pulls) = counting_listener().await;
    let (genuine_host, genuine_pulls) = counting_listener().await;
    let forged_image = format!("{forged_host}/attacker/bundle:v1");
    let genuine_image = format!("{genuine_host}/olm/bundle:v1");
    create_catalog(&client, ns.name(), "fixture-catalog", &[]).await;
    create_catalog(&client, ns.name(), "secret-catalog", &["admin-pull-secret"]).await;
    create_plan(
        &client,
        ns.name(),
        "install-genuine",
        "fixture-catalog",
        &[&genuine_image],
    )
    .await;
    let config = UnpackerConfig {
        // Only the queue acts in this test: the watch's grace outlasts it.
        watch_grace: Duration::from_secs(600),
        ..config(ns.name(), &genuine_host)
    };
    let bus = Bus::connect(&BusArgs::with_url(nats.url()), "bundle-unpacker")
        .await
        .unwrap();
    bus.wait_connected(Duration::from_secs(10)).await.unwrap();
    let unpacker = RunningUnpacker::start(config, bus).await;
    let forger = Bus::connect(&BusArgs::with_url(nats.url()), "forger")
        .await
        .unwrap();
    forger
        .wait_connected(Duration::from_secs(10))
        .await
        .unwrap();
    forger.declare_streams().await.unwrap();

    // Each request speaks of its own plan version, so that the stream's
    // deduplication (by plan and image) keeps them all.
    let asked = std::cell::Cell::new(0);
    let ask = |image: &str, catalog: &str, plan: &str| {
        asked.set(asked.get() + 1);
        let mut request = request(ns.name(), image, &asked.get().to_string());
        if let Some(c) = request.catalog.as_mut() {
            c.name = catalog.to_owned();
        }
        if let Some(p) = request.install_plan.as_mut() {
            p.name = plan.to_owned();
        }
        request
    };
    // A plan that does not exist; an existing plan that never asked for
    // this image; the genuine image, but with another catalog's secrets.
    for forged in [
        ask(&forged_image, "fixture-catalog", "install-made-up"),
        ask(&forged_image, "fixture-catalog", "install-genuine"),
        ask(&genuine_image, "secret-catalog", "install-genuine"),
    ] {
        forger.publish(&forged).await.unwrap();
    }
    forger
        .publish(&ask(&genuine_image, "fixture-catalog", "install-genuine"))
        .await
        .unwrap();

    // The genuine request is served (its "registry" is no registry, so a
    // failure is recorded): the consumer was alive throughout.
    let Stored::Failure(..) = wait_stored(&client, ns.name(), &genuine_image).await else {
        panic!("expected a recorded failure for the genuine request");
    };
    eventually("three refusals counted", WAIT, || async {
        match unpacker.metrics.refused_count() {
            3 => Ok(()),
            other => Err(format!("{other} refused")),
        }
    })
    .await;
    assert_eq!(
        forged_pulls.load(Ordering::SeqCst),
        0,
        "a forged image was pulled"
    );
    assert!(genuine_pulls.load(Ordering::SeqCst) > 0);
    assert_eq!(unpacker.metrics.work_count("queue"), 1);
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    let forged_map = unpacked::config_map_name(&forged_image);
    assert!(maps.get_opt(&forged_map).await.unwrap().is_none());
    unpacker.stop().await;
}
