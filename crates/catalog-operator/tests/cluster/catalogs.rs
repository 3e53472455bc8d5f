//! CatalogSources end to end: address catalogs connect, image catalogs get
//! their registry objects, bad specs and missing ConfigMaps are reported,
//! image templates resolve from the cluster version, polled catalogs switch
//! content (and recover from a switch cut short), and the promotion guard
//! holds back content outside the policy.

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
    // The reconciles ran through the shared controller loop, which counts
    // them per controller.
    let runs = operator
        .metrics_text()
        .lines()
        .find_map(|line| {
            line.strip_prefix(
                "catalog_operator_reconcile_runs_total{controller=\"catalogsource\"} ",
            )
            .and_then(|value| value.trim().parse::<f64>().ok())
        })
        .unwrap_or_default();
    assert!(runs >= 1.0, "{}", operator.metrics_text());

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

/// The name of the one live registry pod of `catalog`, if it runs the
/// image pinned to `digest`; else every pod of the catalog as it stands.
async fn serving_pod(pods: &Api<Pod>, catalog: &str, digest: &str) -> Result<String, String> {
    match try_live_images(pods, &format!("olm.catalogSource={catalog}"))
        .await?
        .as_slice()
    {
        [(name, image)] if image.ends_with(&format!("@{digest}")) => Ok(name.clone()),
        _ => Err(format!(
            "want one pod serving @{digest}; the pods: {}",
            pods_as_they_stand(pods).await
        )),
    }
}

/// Every pod in the namespace in a few words (labels, image, node, phase,
/// readiness, deletion), for a wait that timed out.
async fn pods_as_they_stand(pods: &Api<Pod>) -> String {
    let list = match pods.list(&ListParams::default()).await {
        Ok(list) => list,
        Err(error) => return format!("cannot list them: {error}"),
    };
    let words: Vec<String> = list
        .items
        .iter()
        .map(|p| {
            let status = p.status.clone().unwrap_or_default();
            let ready = status
                .conditions
                .unwrap_or_default()
                .iter()
                .find(|c| c.type_ == "Ready")
                .map_or("-".to_owned(), |c| c.status.clone());
            let spec = p.spec.clone().unwrap_or_default();
            format!(
                "{} labels={:?} image={} node={} phase={} ready={} deleting={}",
                p.metadata.name.as_deref().unwrap_or_default(),
                p.metadata.labels.clone().unwrap_or_default(),
                spec.containers
                    .first()
                    .and_then(|c| c.image.clone())
                    .unwrap_or_default(),
                spec.node_name.unwrap_or_default(),
                status.phase.unwrap_or_default(),
                ready,
                p.metadata.deletion_timestamp.is_some(),
            )
        })
        .collect();
    format!("[{}]; {}", words.join("; "), fake_node_as_it_stands().await)
}

/// kwok's node in a few words (Ready, taints): why pods would not be
/// scheduled or made ready.
async fn fake_node_as_it_stands() -> String {
    let client = olm_testkit::control_plane().client().await;
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client);
    match nodes.get(olm_testkit::KWOK_NODE_NAME).await {
        Ok(node) => {
            let ready = node
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .into_iter()
                .find(|c| c.type_ == "Ready")
                .map_or("-".to_owned(), |c| format!("{} ({:?})", c.status, c.reason));
            let taints: Vec<String> = node
                .spec
                .and_then(|s| s.taints)
                .unwrap_or_default()
                .into_iter()
                .map(|t| format!("{}:{}", t.key, t.effect))
                .collect();
            format!("node ready={ready} taints={taints:?}")
        }
        Err(error) => format!("node: {error}"),
    }
}

/// A polled image catalog (`interval: 1s`) on a loopback registry, with
/// its first content pushed and the controllers running for its namespace.
struct PolledCatalog {
    operator: RunningOperator,
    api: Api<CatalogSource>,
    pods: Api<Pod>,
    oci: olm_oci::Client,
    /// The catalog image's tag.
    image: String,
    /// The digest of the first content.
    first: String,
    _registry: olm_testkit::registry::Registry,
    _ns: olm_testkit::TestNamespace,
}

impl PolledCatalog {
    async fn start(prefix: &str, name: &str) -> Self {
        init_logs();
        olm_crds_installed().await;
        let plane = olm_testkit::control_plane();
        let ns = plane.namespace(prefix).await;
        let client = plane.client().await;
        let registry = olm_testkit::registry::Registry::start().unwrap();
        let host = registry.host();
        let oci = olm_oci::Client::new(olm_oci::ClientOptions::default().plain_http(host.clone()))
            .unwrap();
        let image = format!("{host}/olm/catalog:latest");
        let first = push_catalog(&oci, &image, r#"{"schema":"olm.package","name":"a"}"#).await;
        let operator =
            RunningOperator::start_with(ns.name(), move |c| c.insecure_registries = vec![host])
                .await;
        let api: Api<CatalogSource> = Api::namespaced(client.clone(), ns.name());
        api.create(
            &PostParams::default(),
            &catalog(
                name,
                serde_json::json!({"sourceType": "grpc", "image": image, "updateStrategy": {"registryPoll": {"interval": "1s"}}}),
            ),
        )
        .await
        .unwrap();
        Self {
            operator,
            api,
            pods: Api::namespaced(client, ns.name()),
            oci,
            image,
            first,
            _registry: registry,
            _ns: ns,
        }
    }
}

#[tokio::test]
async fn a_polled_catalog_switches_to_new_content_by_digest() {
    let PolledCatalog {
        operator,
        api,
        pods,
        oci,
        image,
        first,
        // Bound, so that the registry and the namespace live to the end.
        _registry,
        _ns,
    } = PolledCatalog::start("catsrc-poll", "polled").await;
    let serving = |digest: String| {
        let pods = pods.clone();
        async move { serving_pod(&pods, "polled", &digest).await }
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

#[tokio::test]
async fn a_promotion_cut_short_leaves_one_pod_serving() {
    let PolledCatalog {
        operator,
        api: _,
        pods,
        oci,
        image,
        first,
        // Bound, so that the registry and the namespace live to the end.
        _registry,
        _ns: ns,
    } = PolledCatalog::start("catsrc-cut", "cut").await;
    let first_pod = eventually("a pod pinned to the first digest", WAIT, || {
        serving_pod(&pods, "cut", &first)
    })
    .await;

    // What an operator stopped between relabelling a ready update pod and
    // deleting the old one leaves: two pods serving one spec, the newer on
    // new content and marked promoted. Made with the operator stopped, so
    // that no poll sees the new content first.
    operator.stop().await;
    let second = push_catalog(&oci, &image, r#"{"schema":"olm.package","name":"b"}"#).await;
    let mut promoted = pods.get(&first_pod).await.unwrap();
    promoted.metadata = kube::api::ObjectMeta {
        name: Some(format!("{first_pod}-promoted")),
        labels: promoted.metadata.labels.take(),
        annotations: promoted.metadata.annotations.take(),
        ..Default::default()
    };
    promoted.status = None;
    let annotations = promoted
        .metadata
        .annotations
        .get_or_insert_with(Default::default);
    annotations.insert("olm.catalog-operator/image-digest".into(), second.clone());
    annotations.insert(
        "olm.catalog-operator/promoted-at".into(),
        jiff::Timestamp::now().to_string(),
    );
    let container = &mut promoted.spec.as_mut().unwrap().containers[0];
    container.image = Some(container.image.take().unwrap().replace(&first, &second));
    pods.create(&PostParams::default(), &promoted)
        .await
        .unwrap();
    let host = image.split('/').next().unwrap().to_owned();
    let operator =
        RunningOperator::start_with(ns.name(), move |c| c.insecure_registries = vec![host]).await;

    // The promoted pod stays, the old one goes, and no update pod starts
    // the content that already serves.
    let kept = eventually("one pod serving the second digest", WAIT, || {
        serving_pod(&pods, "cut", &second)
    })
    .await;
    assert_eq!(kept, format!("{first_pod}-promoted"));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(serving_pod(&pods, "cut", &second).await.unwrap(), kept);
    assert_eq!(
        live_images(&pods, "catalogsource.operators.coreos.com/update=cut").await,
        vec![],
        "no update pod started"
    );
    operator.stop().await;
}

/// A registry on a fixed loopback address standing in for a guarded
/// catalog's update pod (kwok pods do not run): serves `bundles` (name,
/// image) of one package.
async fn stand_in(
    address: std::net::SocketAddr,
    bundles: &[(&str, &str)],
) -> (tokio::sync::oneshot::Sender<()>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::from(
        "---\nschema: olm.package\nname: etcd\ndefaultChannel: alpha\n---\nschema: olm.channel\npackage: etcd\nname: alpha\nentries:\n",
    );
    let mut replaces: Option<&str> = None;
    for (name, _) in bundles {
        text.push_str(&format!("  - name: {name}\n"));
        if let Some(previous) = replaces {
            text.push_str(&format!("    replaces: {previous}\n"));
        }
        replaces = Some(name);
    }
    for (name, image) in bundles {
        let version = name.trim_start_matches("etcd.v");
        text.push_str(&format!(
            "---\nschema: olm.bundle\nname: {name}\npackage: etcd\nimage: {image}\nproperties:\n  - type: olm.package\n    value: {{packageName: etcd, version: {version}}}\n"
        ));
    }
    std::fs::write(dir.path().join("catalog.yaml"), text).unwrap();
    let index = CatalogIndex::build(dir.path(), &IndexOptions::default()).unwrap();
    // The previous stand-in may still be releasing the port.
    let listener = eventually("the stand-in's port", WAIT, || async {
        tokio::net::TcpListener::bind(address)
            .await
            .map_err(|e| e.to_string())
    })
    .await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(RegistryServer::new(index).serve(listener, async move {
        let _ = stopped.await;
    }));
    (stop, dir)
}

/// The `PromotionBlocked` condition of the catalog, as (status, reason,
/// message).
async fn promotion_condition(
    api: &Api<CatalogSource>,
    name: &str,
) -> Result<(String, String, String), String> {
    let status = status_of(api, name).await?;
    status["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "PromotionBlocked"))
        .map(|c| {
            let field = |f: &str| c[f].as_str().unwrap_or_default().to_owned();
            (field("status"), field("reason"), field("message"))
        })
        .ok_or_else(|| format!("no PromotionBlocked condition in {status}"))
}

/// The images of the live pods with `selector`.
async fn live_images(pods: &Api<Pod>, selector: &str) -> Vec<(String, String)> {
    try_live_images(pods, selector).await.unwrap()
}

/// [`live_images`], with a failed list as the error.
async fn try_live_images(pods: &Api<Pod>, selector: &str) -> Result<Vec<(String, String)>, String> {
    Ok(pods
        .list(&ListParams::default().labels(selector))
        .await
        .map_err(|e| e.to_string())?
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            let image = p.spec.as_ref().unwrap().containers[0]
                .image
                .clone()
                .unwrap();
            (p.metadata.name.unwrap(), image)
        })
        .collect())
}

#[tokio::test]
async fn a_guarded_catalog_keeps_serving_when_new_content_leaves_the_policy() {
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let ns = plane.namespace("catsrc-guard").await;
    let client = plane.client().await;
    let registry = olm_testkit::registry::Registry::start().unwrap();
    let host = registry.host();
    let oci =
        olm_oci::Client::new(olm_oci::ClientOptions::default().plain_http(host.clone())).unwrap();
    let image = format!("{host}/olm/catalog:latest");
    let first = push_catalog(&oci, &image, r#"{"schema":"olm.package","name":"a"}"#).await;

    // The stand-in update pod first serves content with a bundle outside
    // the policy.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let bad = [
        ("etcd.v0.9.0", "quay.io/example/etcd-bundle:v0.9.0"),
        ("etcd.v0.9.2", "evil.example.com/etcd/bundle:v0.9.2"),
    ];
    let (stop_bad, _bad_dir) = stand_in(port, &bad).await;

    let allowed = host.clone();
    let operator = RunningOperator::start_with(ns.name(), move |c| {
        c.insecure_registries = vec![allowed.clone()];
        c.allowed_registries = ["quay.io", allowed.as_str()]
            .iter()
            .map(|r| olm_oci::policy::RegistryRule::new(r))
            .collect();
        c.content_dial = catalog_operator::controller::ContentDial::Fixed(port.to_string());
    })
    .await;
    let api: Api<CatalogSource> = Api::namespaced(client.clone(), ns.name());
    let mut guarded = catalog(
        "guarded",
        serde_json::json!({"sourceType": "grpc", "image": image, "updateStrategy": {"registryPoll": {"interval": "1s"}}}),
    );
    guarded.metadata.annotations = Some(
        [("olm.promotionGuard".to_owned(), "true".to_owned())]
            .into_iter()
            .collect(),
    );
    api.create(&PostParams::default(), &guarded).await.unwrap();

    let pods: Api<Pod> = Api::namespaced(client.clone(), ns.name());
    let serving = |digest: String| {
        let pods = pods.clone();
        async move { serving_pod(&pods, "guarded", &digest).await }
    };
    let first_pod = eventually("a pod pinned to the first digest", WAIT, || {
        serving(first.clone())
    })
    .await;

    // New content under the same tag: the guard refuses it, names the
    // bundle and its registry, and the first pod keeps serving.
    let second = push_catalog(&oci, &image, r#"{"schema":"olm.package","name":"b"}"#).await;
    let (status, reason, message) = eventually("the promotion is blocked", WAIT, || async {
        match promotion_condition(&api, "guarded").await? {
            blocked if blocked.0 == "True" => Ok(blocked),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "BundleRegistryNotAllowed")
    );
    for needle in ["evil.example.com", "etcd.v0.9.2", &second] {
        assert!(message.contains(needle), "{needle} not in {message}");
    }
    assert!(
        !message.contains("etcd.v0.9.0"),
        "allowed bundles are not named: {message}"
    );
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(client.clone(), ns.name());
    eventually("a PromotionBlocked warning event", WAIT, || async {
        let list = events
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        list.items
            .iter()
            .find(|e| {
                e.reason.as_deref() == Some("PromotionBlocked")
                    && e.type_.as_deref() == Some("Warning")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("guarded")
            })
            .map(|_| ())
            .ok_or_else(|| format!("{} events, none PromotionBlocked", list.items.len()))
    })
    .await;
    // Several polls later: the refused content is not started again, and
    // the first pod still serves.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(serving(first.clone()).await.unwrap(), first_pod);
    let updating = "catalogsource.operators.coreos.com/update=guarded";
    assert_eq!(
        live_images(&pods, updating).await,
        vec![],
        "no update pod retried"
    );

    // Fixed content (a new digest) passes; the guard clears by itself.
    let _ = stop_bad.send(());
    let good = [("etcd.v0.9.2", "quay.io/example/etcd-bundle:v0.9.2")];
    let (stop_good, _good_dir) = stand_in(port, &good).await;
    let third = push_catalog(&oci, &image, r#"{"schema":"olm.package","name":"c"}"#).await;
    let third_pod = eventually("the pod switched to the fixed content", WAIT, || {
        serving(third.clone())
    })
    .await;
    assert_ne!(third_pod, first_pod);
    // The pass that promotes the pod writes the condition after relabelling
    // it, so the pod can be seen switched a moment before the status is.
    let (status, reason, message) = eventually("the guard clears", WAIT, || async {
        match promotion_condition(&api, "guarded").await? {
            cleared if cleared.0 == "False" => Ok(cleared),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "ContentPromoted")
    );
    assert!(message.contains(&third), "{message}");
    assert_eq!(
        live_images(&pods, updating).await,
        vec![],
        "no update pod left"
    );

    // A spec change to refused content: the new spec starts as an update
    // pod, is refused, and the pod of the old spec keeps serving.
    let _ = stop_good.send(());
    let (_stop_bad, _bad_dir) = stand_in(port, &bad).await;
    let other = format!("{host}/olm/catalog:other");
    let fourth = push_catalog(&oci, &other, r#"{"schema":"olm.package","name":"d"}"#).await;
    api.patch(
        "guarded",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"spec": {"image": other}})),
    )
    .await
    .unwrap();
    eventually("the spec change is blocked", WAIT, || async {
        match promotion_condition(&api, "guarded").await? {
            (status, _, message) if status == "True" && message.contains(&fourth) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(serving(third.clone()).await.unwrap(), third_pod);
    assert_eq!(live_images(&pods, updating).await, vec![]);
    operator.stop().await;
}
