//! CatalogSources end to end: address catalogs connect, image catalogs get
//! their registry objects, bad specs and missing ConfigMaps are reported,
//! image templates resolve from the cluster version.

use std::time::Duration;

use k8s_openapi::api::{
    core::v1::{Pod, Service, ServiceAccount},
    networking::v1::NetworkPolicy,
};
use kube::{
    Api,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use olm_api::catalog_source::CatalogSource;
use olm_registry::{CatalogIndex, IndexOptions, RegistryServer};

use crate::{RunningOperator, eventually, init_logs, olm_crds_installed};

const WAIT: Duration = Duration::from_secs(30);

pub(crate) fn catalog(name: &str, spec: serde_json::Value) -> CatalogSource {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "CatalogSource",
        "metadata": { "name": name },
        "spec": spec,
    }))
    .unwrap()
}

/// A small file-based catalog served by olm-registry on loopback.
pub(crate) async fn serve_fixture() -> (olm_registry::RunningServer, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("catalog.yaml"),
        r#"---
schema: olm.package
name: etcd
defaultChannel: alpha
---
schema: olm.channel
package: etcd
name: alpha
entries:
  - name: etcd.v0.9.0
---
schema: olm.bundle
name: etcd.v0.9.0
package: etcd
image: quay.io/example/etcd-bundle:v0.9.0
properties:
  - type: olm.package
    value: {packageName: etcd, version: 0.9.0}
"#,
    )
    .unwrap();
    let index = CatalogIndex::build(dir.path(), &IndexOptions::default()).unwrap();
    let server = RegistryServer::new(index).spawn_loopback().await.unwrap();
    (server, dir)
}

pub(crate) async fn status_of(
    api: &Api<CatalogSource>,
    name: &str,
) -> Result<serde_json::Value, String> {
    let catalog = api.get(name).await.map_err(|e| e.to_string())?;
    Ok(serde_json::to_value(catalog.status.unwrap_or_default()).unwrap())
}

#[tokio::test]
async fn an_address_catalog_reports_its_connection() {
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let ns = plane.namespace("catsrc-address").await;
    let client = plane.client().await;
    let (server, _dir) = serve_fixture().await;
    let operator = RunningOperator::start(ns.name()).await;
    let api: Api<CatalogSource> = Api::namespaced(client.clone(), ns.name());
    let address = server.addr().to_string();
    api.create(
        &PostParams::default(),
        &catalog(
            "local",
            serde_json::json!({"sourceType": "grpc", "address": address}),
        ),
    )
    .await
    .unwrap();

    let status = eventually("connection READY", WAIT, || async {
        let status = status_of(&api, "local").await?;
        match status
            .pointer("/connectionState/lastObservedState")
            .and_then(|s| s.as_str())
        {
            Some("READY") => Ok(status),
            other => Err(format!("state {other:?}: {status}")),
        }
    })
    .await;
    assert_eq!(status["connectionState"]["address"], address.as_str());
    assert_eq!(status["registryService"]["protocol"], "grpc");
    assert!(
        status["registryService"].get("serviceName").is_none(),
        "{status}"
    );
    assert!(status.get("reason").is_none(), "{status}");
    let ready_series = format!(
        "catalogsource_ready{{namespace=\"{}\",name=\"local\"}} 1",
        ns.name()
    );
    assert!(
        operator.metrics_text().contains(&ready_series),
        "{}",
        operator.metrics_text()
    );

    // The registry goes away: the status says so within the recheck.
    server.shutdown().await.unwrap();
    eventually("connection TRANSIENT_FAILURE", WAIT, || async {
        let status = status_of(&api, "local").await?;
        match status
            .pointer("/connectionState/lastObservedState")
            .and_then(|s| s.as_str())
        {
            Some("TRANSIENT_FAILURE") => Ok(()),
            other => Err(format!("state {other:?}")),
        }
    })
    .await;
    operator.stop().await;
}

#[tokio::test]
async fn an_image_catalog_gets_its_registry_objects() {
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let ns = plane.namespace("catsrc-image").await;
    let client = plane.client().await;
    let operator = RunningOperator::start(ns.name()).await;
    let api: Api<CatalogSource> = Api::namespaced(client.clone(), ns.name());
    api.create(
        &PostParams::default(),
        &catalog(
            "my.catalog",
            serde_json::json!({"sourceType": "grpc", "image": "quay.io/example/catalog:v1", "secrets": ["pull"]}),
        ),
    )
    .await
    .unwrap();

    let pods: Api<Pod> = Api::namespaced(client.clone(), ns.name());
    let selector = ListParams::default().labels("olm.catalogSource=my.catalog");
    let first = eventually("a registry pod", WAIT, || async {
        let list = pods.list(&selector).await.map_err(|e| e.to_string())?;
        match list.items.as_slice() {
            [pod] => Ok(pod.clone()),
            other => Err(format!("{} pods", other.len())),
        }
    })
    .await;
    let spec = first.spec.clone().unwrap();
    assert_eq!(
        spec.containers[0].image.as_deref(),
        Some("quay.io/example/catalog:v1")
    );
    assert_eq!(spec.service_account_name.as_deref(), Some("my.catalog"));

    let services: Api<Service> = Api::namespaced(client.clone(), ns.name());
    let service = eventually("the registry service", WAIT, || async {
        services.get("my-catalog").await.map_err(|e| e.to_string())
    })
    .await;
    assert_eq!(service.spec.unwrap().ports.unwrap()[0].port, 50051);
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), ns.name());
    let account = accounts.get("my.catalog").await.unwrap();
    assert_eq!(account.image_pull_secrets.unwrap()[0].name, "pull");
    let policies: Api<NetworkPolicy> = Api::namespaced(client.clone(), ns.name());
    let mut names: Vec<_> = policies
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["my.catalog-grpc-server", "my.catalog-unpack-bundles"]
    );

    let status = eventually("registryService in status", WAIT, || async {
        let status = status_of(&api, "my.catalog").await?;
        if status.pointer("/registryService/serviceName").is_some()
            && status
                .pointer("/connectionState/lastObservedState")
                .is_some()
        {
            Ok(status)
        } else {
            Err(status.to_string())
        }
    })
    .await;
    assert_eq!(status["registryService"]["serviceName"], "my-catalog");
    assert_eq!(status["registryService"]["serviceNamespace"], ns.name());
    assert_eq!(status["registryService"]["port"], "50051");
    assert_eq!(
        status["connectionState"]["address"],
        format!("my-catalog.{}.svc:50051", ns.name()).as_str()
    );
    // Nothing serves behind that Service in this cluster (kwok runs no
    // containers), and the status says so rather than READY.
    assert_ne!(status["connectionState"]["lastObservedState"], "READY");

    // A new image: a new pod with the new spec replaces the old one.
    api.patch(
        "my.catalog",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"spec": {"image": "quay.io/example/catalog:v2"}})),
    )
    .await
    .unwrap();
    let old_name = first.metadata.name.clone().unwrap();
    eventually("the pod replaced", WAIT, || async {
        let list = pods.list(&selector).await.map_err(|e| e.to_string())?;
        let live: Vec<_> = list
            .items
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        match live.as_slice() {
            [pod] if pod.metadata.name.as_deref() != Some(old_name.as_str()) => {
                let image = pod.spec.as_ref().unwrap().containers[0].image.clone();
                if image.as_deref() == Some("quay.io/example/catalog:v2") {
                    Ok(())
                } else {
                    Err(format!("image {image:?}"))
                }
            }
            other => Err(format!("{} live pods", other.len())),
        }
    })
    .await;

    // Steady state: the registry objects are not written again.
    let version = services
        .get("my-catalog")
        .await
        .unwrap()
        .metadata
        .resource_version;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        services
            .get("my-catalog")
            .await
            .unwrap()
            .metadata
            .resource_version,
        version
    );
    operator.stop().await;
}

#[tokio::test]
async fn bad_specs_and_missing_configmaps_are_reported() {
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let ns = plane.namespace("catsrc-invalid").await;
    let client = plane.client().await;
    let operator = RunningOperator::start(ns.name()).await;
    let api: Api<CatalogSource> = Api::namespaced(client.clone(), ns.name());
    let cases = [
        (
            "no-image",
            serde_json::json!({"sourceType": "grpc"}),
            "SpecInvalidError",
            "image and address unset: at least one must be set for sourcetype: grpc",
        ),
        (
            "no-configmap-name",
            serde_json::json!({"sourceType": "configmap"}),
            "SpecInvalidError",
            "configmap name unset: must be set for sourcetype: configmap",
        ),
        (
            "missing-configmap",
            serde_json::json!({"sourceType": "configmap", "configMap": "nope"}),
            "ConfigMapError",
            "failed to get catalog config map nope: configmaps \"nope\" not found",
        ),
    ];
    for (name, spec, _, _) in &cases {
        api.create(&PostParams::default(), &catalog(name, spec.clone()))
            .await
            .unwrap();
    }
    for (name, _, reason, message) in cases {
        eventually(name, WAIT, || async {
            let status = status_of(&api, name).await?;
            if status["reason"] == reason && status["message"] == message {
                Ok(())
            } else {
                Err(status.to_string())
            }
        })
        .await;
    }
    operator.stop().await;
}

#[tokio::test]
async fn image_templates_resolve_from_the_cluster_version() {
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let ns = plane.namespace("catsrc-template").await;
    let client = plane.client().await;
    let operator = RunningOperator::start(ns.name()).await;
    let api: Api<CatalogSource> = Api::namespaced(client.clone(), ns.name());
    let mut templated = catalog(
        "templated",
        serde_json::json!({"sourceType": "grpc", "image": "quay.io/example/catalog:old"}),
    );
    templated.metadata.annotations = Some(
        [(
            "olm.catalogImageTemplate".to_owned(),
            "quay.io/example/catalog:v{kube_major_version}.{kube_minor_version}".to_owned(),
        )]
        .into(),
    );
    api.create(&PostParams::default(), &templated)
        .await
        .unwrap();
    let version = client.apiserver_version().await.unwrap();
    let want = format!(
        "quay.io/example/catalog:v{}.{}",
        version.major,
        version.minor.trim_end_matches('+')
    );
    eventually("spec.image resolved", WAIT, || async {
        let catalog = api.get("templated").await.map_err(|e| e.to_string())?;
        let status = serde_json::to_value(catalog.status.clone().unwrap_or_default()).unwrap();
        let conditions = status["conditions"].as_array().cloned().unwrap_or_default();
        let resolved = conditions.iter().any(|c| {
            c["type"] == "ResolvedImage" && c["status"] == "True" && c["message"] == want.as_str()
        });
        if catalog.spec.image.as_deref() == Some(want.as_str()) && resolved {
            Ok(())
        } else {
            Err(format!("image {:?}, status {status}", catalog.spec.image))
        }
    })
    .await;
    operator.stop().await;
}

/// Pushes a one-file catalog image with `content` to `reference`.
async fn push_catalog(client: &olm_oci::Client, reference: &str, content: &str) -> String {
    let built = olm_oci::ImageBuilder::new()
        .label(
            "operators.operatorframework.io.index.configs.v1",
            "/configs",
        )
        .add_file("configs/catalog.json", content.as_bytes().to_vec())
        .unwrap()
        .build()
        .unwrap();
    let reference = olm_oci::Reference::parse(reference).unwrap();
    client
        .push_image(&reference, &built)
        .await
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn a_polled_catalog_switches_to_new_content_by_digest() {
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let ns = plane.namespace("catsrc-poll").await;
    let client = plane.client().await;
    let registry = olm_testkit::registry::Registry::start().unwrap();
    let host = registry.host();
    let oci =
        olm_oci::Client::new(olm_oci::ClientOptions::default().plain_http(host.clone())).unwrap();
    let image = format!("{host}/olm/catalog:latest");
    let first = push_catalog(&oci, &image, r#"{"schema":"olm.package","name":"a"}"#).await;

    let insecure = host.clone();
    let operator =
        RunningOperator::start_with(ns.name(), move |c| c.insecure_registries = vec![insecure])
            .await;
    let api: Api<CatalogSource> = Api::namespaced(client.clone(), ns.name());
    api.create(
        &PostParams::default(),
        &catalog(
            "polled",
            serde_json::json!({"sourceType": "grpc", "image": image, "updateStrategy": {"registryPoll": {"interval": "1s"}}}),
        ),
    )
    .await
    .unwrap();

    let pods: Api<Pod> = Api::namespaced(client.clone(), ns.name());
    let serving = |digest: String| {
        let pods = pods.clone();
        async move {
            let list = pods
                .list(&ListParams::default().labels("olm.catalogSource=polled"))
                .await
                .map_err(|e| e.to_string())?;
            let live: Vec<_> = list
                .items
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .collect();
            let images: Vec<_> = live
                .iter()
                .map(|p| {
                    p.spec.as_ref().unwrap().containers[0]
                        .image
                        .clone()
                        .unwrap()
                })
                .collect();
            match images.as_slice() {
                [one] if one.ends_with(&format!("@{digest}")) => {
                    Ok(live[0].metadata.name.clone().unwrap())
                }
                other => Err(format!("serving {other:?}, want @{digest}")),
            }
        }
    };
    let first_pod = eventually("a pod pinned to the first digest", WAIT, || {
        serving(first.clone())
    })
    .await;
    // The status is written after the pod is created, in the same pass.
    eventually("latestImageRegistryPoll set", WAIT, || async {
        let status = status_of(&api, "polled").await?;
        if status["latestImageRegistryPoll"].is_string() {
            Ok(())
        } else {
            Err(status.to_string())
        }
    })
    .await;

    // Same content pushed again: same digest, nothing changes.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(serving(first.clone()).await.unwrap(), first_pod);

    // New content under the same tag: a new pod pinned to the new digest
    // takes over once ready, and the old one goes.
    let second = push_catalog(&oci, &image, r#"{"schema":"olm.package","name":"b"}"#).await;
    assert_ne!(first, second);
    let second_pod = eventually("the pod switched to the second digest", WAIT, || {
        serving(second.clone())
    })
    .await;
    assert_ne!(first_pod, second_pod);
    let updates = pods
        .list(&ListParams::default().labels("catalogsource.operators.coreos.com/update=polled"))
        .await
        .unwrap();
    assert!(
        updates
            .items
            .iter()
            .all(|p| p.metadata.deletion_timestamp.is_some()),
        "no update pod left"
    );
    operator.stop().await;
}
