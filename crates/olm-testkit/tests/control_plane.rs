//! The test control plane behaves like a real cluster: it serves the API,
//! runs controllers (Deployments become Available on kwok's fake node, deleted
//! namespaces finish deleting) and accepts aggregated-API configuration.

use std::time::{Duration, Instant};

use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{ConfigMap, Namespace, Pod},
};
use kube::{
    Api,
    api::{DeleteParams, ListParams, PostParams},
};

const DEADLINE: Duration = Duration::from_secs(60);

#[tokio::test]
async fn reports_its_start_up_time() {
    let plane = olm_testkit::control_plane();
    let timings = plane.timings();
    println!(
        "control plane ready: etcd {:?}, kube-apiserver {:?}, all {:?}",
        timings.etcd, timings.apiserver, timings.total
    );
    assert!(timings.etcd <= timings.apiserver && timings.apiserver <= timings.total);
    let version = plane.client().await.apiserver_version().await.unwrap();
    assert_eq!(
        format!("v{}", olm_testkit::assets::KUBERNETES_VERSION),
        version.git_version
    );
}

#[tokio::test]
async fn a_deployment_becomes_available_on_the_fake_node() {
    let plane = olm_testkit::control_plane();
    let namespace = plane.namespace("testkit-deploy").await;
    let client = plane.client().await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace.name());
    let deployment: Deployment = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "sample-workload" },
        "spec": {
            "replicas": 2,
            "selector": { "matchLabels": { "app": "sample-workload" } },
            "template": {
                "metadata": { "labels": { "app": "sample-workload" } },
                "spec": { "containers": [{ "name": "main", "image": "example.invalid/sample:1" }] }
            }
        }
    }))
    .unwrap();
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    let started = Instant::now();
    loop {
        let current = deployments.get("sample-workload").await.unwrap();
        let available = current
            .status
            .as_ref()
            .and_then(|status| status.conditions.as_ref())
            .is_some_and(|conditions| {
                conditions
                    .iter()
                    .any(|c| c.type_ == "Available" && c.status == "True")
            });
        let ready = current.status.as_ref().and_then(|s| s.ready_replicas);
        if available && ready == Some(2) {
            break;
        }
        assert!(
            started.elapsed() < DEADLINE,
            "deployment not Available after {DEADLINE:?}: {:?}; logs in {}",
            current.status,
            plane.dir().join("logs").display()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!("deployment Available after {:?}", started.elapsed());
    let pods: Api<Pod> = Api::namespaced(client, namespace.name());
    let listed = pods.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 2);
    for pod in listed.items {
        let spec = pod.spec.unwrap();
        assert_eq!(spec.node_name.as_deref(), Some(olm_testkit::KWOK_NODE_NAME));
        assert_eq!(pod.status.unwrap().phase.as_deref(), Some("Running"));
    }
}

#[tokio::test]
async fn deleting_a_namespace_completes() {
    let plane = olm_testkit::control_plane();
    let client = plane.client().await;
    let name = "testkit-doomed";
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace: Namespace =
        serde_json::from_value(serde_json::json!({ "metadata": { "name": name } })).unwrap();
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    let config_maps: Api<ConfigMap> = Api::namespaced(client, name);
    let config_map: ConfigMap =
        serde_json::from_value(serde_json::json!({ "metadata": { "name": "content" } })).unwrap();
    config_maps
        .create(&PostParams::default(), &config_map)
        .await
        .unwrap();
    namespaces
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
    let started = Instant::now();
    while namespaces.get_opt(name).await.unwrap().is_some() {
        assert!(
            started.elapsed() < DEADLINE,
            "namespace {name} still present after {DEADLINE:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!("namespace deleted after {:?}", started.elapsed());
}

#[tokio::test]
async fn test_namespaces_are_unique_and_removed_on_drop() {
    let plane = olm_testkit::control_plane();
    let first = plane.namespace("testkit-unique").await;
    let second = plane.namespace("testkit-unique").await;
    assert_ne!(first.name(), second.name());
    let name = first.name().to_owned();
    drop(first);
    let namespaces: Api<Namespace> = Api::all(plane.client().await);
    let gone_or_terminating = namespaces
        .get_opt(&name)
        .await
        .unwrap()
        .is_none_or(|ns| ns.metadata.deletion_timestamp.is_some());
    assert!(gone_or_terminating, "namespace {name} was not deleted");
}

#[test]
fn kubectl_reaches_the_control_plane() {
    let plane = olm_testkit::control_plane();
    let output = plane
        .kubectl()
        .args(["get", "--raw", "/readyz"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "ok");
}
