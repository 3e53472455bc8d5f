//! OLM on a real node: the example operator installed from an image
//! CatalogSource whose registry pod really runs (containerd, runc, the `opm`
//! image serving `/configs`), the operator's own pod running on the node and
//! reconciling its custom resource through the `kubernetes` Service
//! (kube-proxy), and an upgrade when the catalog image is re-pushed under the
//! same tag (polled by digest).
//!
//! catalog-operator, bundle-unpacker and olm-operator run in-process, as in
//! the other end-to-end tests; they reach the registry pod through its
//! Service's ClusterIP (`--service-lookup cluster-ip`), since this host has
//! no cluster DNS. The node needs root and the packages `cargo xtask
//! envtest` installs: without them the test says why and skips, or fails
//! under CI.

// Test helpers: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::{
    sync::OnceLock,
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api,
    api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams},
};
use olm_api::catalog_source::CatalogSource;
use olm_e2e::{
    eventually,
    harness::{
        ServiceOptions, create_operator_group, create_subscription, describe, init_logs,
        olm_crds_installed, start_services_with, wait_installed,
    },
    workspace_binary,
};
use olm_images::example;
use olm_testkit::{
    ControlPlaneOptions,
    node::{Mirror, NodeOptions, RealNode},
    registry::Registry,
};
use serde_json::{Value, json};

/// How long a step on the real node may take (image pulls, pod starts).
const NODE_WAIT: Duration = Duration::from_secs(180);
/// How often the catalog image is polled for a new digest.
const POLL_INTERVAL: &str = "10s";

/// The registry and node every test of this binary shares.
struct Node {
    registry: Registry,
    _node: RealNode,
    started: Duration,
}

static NODE: OnceLock<Option<Node>> = OnceLock::new();

/// The shared node, or `None` (after saying why) when this machine cannot
/// run one outside CI.
fn node() -> Option<&'static Node> {
    // Start-up blocks on runtimes of its own, which must not be nested in the
    // test's.
    NODE.get_or_init(|| {
        std::thread::spawn(start_node)
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
    .as_ref()
}

fn start_node() -> Option<Node> {
    {
        if let Some(reason) = RealNode::unsupported() {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must run the real-node tests: {reason}"
            );
            eprintln!("skipping the real-node tests: {reason}");
            return None;
        }
        let started = Instant::now();
        let registry = Registry::start().unwrap_or_else(|err| panic!("registry: {err}"));
        let plane = olm_testkit::ControlPlane::start_with(&ControlPlaneOptions::for_real_node())
            .unwrap_or_else(|err| panic!("control plane: {err}"));
        let plane = olm_testkit::set_control_plane(plane).unwrap_or_else(|err| panic!("{err}"));
        let host = registry.host();
        push_images(&host);
        let mirrors = olm_images::node_mirrors(&host)
            .into_iter()
            .map(|(registry, endpoint)| Mirror { registry, endpoint })
            .collect();
        let node = RealNode::start(plane, &NodeOptions { mirrors })
            .unwrap_or_else(|err| panic!("real node: {err}"));
        eprintln!(
            "real node Ready in {:.1} s (containerd {:.1} s); with control plane and images {:.1} s",
            node.timings().ready.as_secs_f64(),
            node.timings().containerd.as_secs_f64(),
            started.elapsed().as_secs_f64()
        );
        Some(Node {
            registry,
            _node: node,
            started: started.elapsed(),
        })
    }
}

/// The images the node runs, pushed where its mirrors find them.
fn push_images(host: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime
        .block_on(olm_images::push_node_images(
            host,
            &workspace_binary("opm"),
            &workspace_binary("example-operator"),
            "e2e",
        ))
        .unwrap();
}

fn greetings(client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.olm-rs.dev", "v1", "Greeting"),
        "greetings",
    );
    Api::namespaced_with(client.clone(), namespace, &resource)
}

/// Subscribed to the example package through an image catalog holding
/// 0.1.0, the operator runs on the real node and answers its Greeting;
/// re-pushing the catalog image with 0.2.0 and 0.3.0 upgrades it straight
/// to 0.3.0 (its skipRange), and the Greeting is answered by the new
/// version.
#[tokio::test]
async fn the_example_operator_installs_from_an_image_catalog_and_upgrades_when_it_is_repushed() {
    init_logs();
    let Some(node) = node() else { return };
    let host = node.registry.host();
    let version = env!("CARGO_PKG_VERSION");
    let opm = workspace_binary("opm");
    let base = format!("{host}/olm-rs/opm:{version}");
    let catalog_tag = "latest";
    let published = example::publish(&opm, &host, &["0.1.0"], catalog_tag, &base).unwrap();
    eprintln!("published {published}");

    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let ns = plane.namespace("e2e-real-node").await;
    let namespace = ns.name();
    let client = plane.client().await;
    let services = start_services_with(
        namespace,
        &host,
        ServiceOptions {
            service_lookup: olm_runtime::service_address::ServiceLookup::ClusterIp,
            ..ServiceOptions::default()
        },
    )
    .await;

    create_operator_group(&client, namespace, json!({})).await;
    let catalogs: Api<CatalogSource> = Api::namespaced(client.clone(), namespace);
    let toleration =
        json!({"key": olm_testkit::node::NODE_TAINT, "operator": "Exists", "effect": "NoSchedule"});
    catalogs
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
                "metadata": {"name": "example-catalog"},
                "spec": {
                    "sourceType": "grpc",
                    "image": example::catalog_image(&host, catalog_tag),
                    "displayName": "Example operators",
                    "updateStrategy": {"registryPoll": {"interval": POLL_INTERVAL}},
                    "grpcPodConfig": {
                        "nodeSelector": {"kubernetes.io/hostname": olm_testkit::node::NODE_NAME},
                        "tolerations": [toleration],
                        "securityContextConfig": "restricted",
                    },
                }
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let install_started = Instant::now();
    create_subscription(
        &client,
        namespace,
        example::PACKAGE,
        "example-catalog",
        None,
    )
    .await;
    let wait = async {
        wait_installed(
            &client,
            namespace,
            example::PACKAGE,
            "example-operator.v0.1.0",
        )
        .await;
    };
    if tokio::time::timeout(NODE_WAIT, wait).await.is_err() {
        panic!(
            "example-operator.v0.1.0 not installed after {NODE_WAIT:?}:\n{}\npods: {}",
            describe(&client, namespace).await,
            pods(&client, namespace).await
        );
    }
    let install_time = install_started.elapsed();

    // The operator is at work: its pod runs on the real node and answers.
    let pod = operator_pod(&client, namespace).await;
    assert_eq!(
        pod["spec"]["nodeName"],
        olm_testkit::node::NODE_NAME,
        "{pod}"
    );
    let greetings = greetings(&client, namespace);
    greetings
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "example.olm-rs.dev/v1", "kind": "Greeting",
                "metadata": {"name": "world"},
                "spec": {"name": "world"}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let status = answered(&greetings, "0.1.0").await;
    assert_eq!(status["message"], "Hello, world!", "{status}");

    // A new catalog image under the same tag: the poll sees its digest
    // change, and the subscription moves to the head of the channel.
    let republished = example::publish(&opm, &host, example::VERSIONS, catalog_tag, &base).unwrap();
    assert_ne!(published, republished, "the new catalog has a new digest");
    let upgrade_started = Instant::now();
    let csvs: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        namespace,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("operators.coreos.com", "v1alpha1", "ClusterServiceVersion"),
            "clusterserviceversions",
        ),
    );
    let upgraded = eventually("example-operator.v0.3.0 Succeeded", NODE_WAIT, || async {
        match csvs.get_opt("example-operator.v0.3.0").await {
            Ok(Some(csv)) if csv.data["status"]["phase"] == "Succeeded" => Ok(true),
            Ok(Some(csv)) => Err(format!("phase {}", csv.data["status"]["phase"])),
            Ok(None) if upgrade_started.elapsed() < NODE_WAIT - Duration::from_secs(1) => {
                Err("no CSV yet".to_owned())
            }
            Ok(None) => Ok(false),
            Err(err) => Err(err.to_string()),
        }
    })
    .await;
    if !upgraded {
        let catalog = catalogs.get("example-catalog").await.unwrap();
        panic!(
            "no upgrade to example-operator.v0.3.0 after {NODE_WAIT:?}:\ncatalog status: {}\n{}\npods: {}",
            serde_json::to_string(&catalog.status).unwrap_or_default(),
            describe(&client, namespace).await,
            pods(&client, namespace).await
        );
    }
    wait_installed(
        &client,
        namespace,
        example::PACKAGE,
        "example-operator.v0.3.0",
    )
    .await;
    let upgrade_time = upgrade_started.elapsed();
    let status = answered(&greetings, "0.3.0").await;
    assert_eq!(status["message"], "Hello, world!", "{status}");
    eprintln!(
        "real node: node and images {:.1} s, install (Subscription -> CSV Succeeded) {:.1} s, \
         upgrade after re-push {:.1} s",
        node.started.as_secs_f64(),
        install_time.as_secs_f64(),
        upgrade_time.as_secs_f64()
    );
    services.stop().await;
}

/// The Greeting's status once the operator at `version` wrote it.
async fn answered(greetings: &Api<DynamicObject>, version: &str) -> Value {
    eventually(
        &format!("Greeting answered by {version}"),
        NODE_WAIT,
        || async {
            let greeting = greetings.get("world").await.map_err(|e| e.to_string())?;
            let status = greeting.data["status"].clone();
            let ready = status["conditions"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            });
            if ready && status["operatorVersion"] == version {
                Ok(status)
            } else {
                Err(status.to_string())
            }
        },
    )
    .await
}

/// The example operator's running pod.
async fn operator_pod(client: &kube::Client, namespace: &str) -> Value {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    eventually("the operator pod Running", NODE_WAIT, || async {
        let list = pods
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        list.items
            .iter()
            .find(|p| {
                p.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with("example-operator-"))
                    && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
            })
            .map(|p| serde_json::to_value(p).unwrap_or_default())
            .ok_or_else(|| summarize(&list.items))
    })
    .await
}

async fn pods(client: &kube::Client, namespace: &str) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    match pods.list(&ListParams::default()).await {
        Ok(list) => summarize(&list.items),
        Err(err) => err.to_string(),
    }
}

fn summarize(pods: &[Pod]) -> String {
    pods.iter()
        .map(|p| {
            let status = p.status.clone().unwrap_or_default();
            format!(
                "{} on {:?}: {:?} {:?}",
                p.metadata.name.as_deref().unwrap_or_default(),
                p.spec.as_ref().and_then(|s| s.node_name.clone()),
                status.phase,
                status
                    .container_statuses
                    .unwrap_or_default()
                    .iter()
                    .map(|c| format!("{}: {:?}", c.name, c.state))
                    .collect::<Vec<_>>()
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}
