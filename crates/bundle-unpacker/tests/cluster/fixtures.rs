//! Images, catalogs and InstallPlans as the tests need them.

use std::{collections::BTreeMap, path::Path, time::Duration};

use bundle_unpacker::controller::UnpackerConfig;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
};
use olm_api::install_plan::InstallPlan;
use olm_catalog::unpacked::{self, UnpackedBundle};
use olm_oci::{ClientOptions, Credentials, ImageBuilder, Reference};
use serde_json::json;

use crate::eventually;

/// How long a test waits for a stored result.
pub(crate) const WAIT: Duration = Duration::from_secs(60);

/// A config serving only `namespace`, with `registry_host` over plain HTTP.
pub(crate) fn config(namespace: &str, registry_host: &str) -> UnpackerConfig {
    UnpackerConfig {
        watched_namespaces: vec![namespace.to_owned()],
        insecure_registries: [registry_host.to_owned()].into(),
        resync: Duration::from_secs(2),
        watch_grace: Duration::from_secs(1),
        ..UnpackerConfig::default()
    }
}

/// Pushes the bundle in `dir` as `image` (labels from annotations.yaml, as
/// `opm alpha bundle push` does); returns the digest.
pub(crate) async fn push_bundle(
    dir: &Path,
    image: &str,
    credentials: Option<Credentials>,
) -> String {
    let bundle = olm_catalog::bundle::RegistryBundle::load_dir(dir).unwrap();
    let builder = ImageBuilder::new()
        .labels(bundle.annotations.clone())
        .add_dir(&dir.join("manifests"), "manifests")
        .unwrap()
        .add_dir(&dir.join("metadata"), "metadata")
        .unwrap();
    push(builder, image, credentials).await
}

/// Pushes an image built by `builder`.
pub(crate) async fn push(
    builder: ImageBuilder,
    image: &str,
    credentials: Option<Credentials>,
) -> String {
    let reference = Reference::parse(image).unwrap();
    let mut options = ClientOptions::default().plain_http(reference.registry());
    if let Some(credentials) = credentials {
        options = options.with_credentials(reference.registry(), credentials);
    }
    let client = olm_oci::Client::new(options).unwrap();
    client
        .push_image(&reference, &builder.build().unwrap())
        .await
        .unwrap()
        .to_string()
}

/// A CatalogSource object (nothing serves it; only its UID and secrets matter).
pub(crate) async fn create_catalog(client: &Client, namespace: &str, name: &str, secrets: &[&str]) {
    let catalogs: Api<olm_api::catalog_source::CatalogSource> =
        Api::namespaced(client.clone(), namespace);
    let catalog = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "CatalogSource",
        "metadata": {"name": name},
        "spec": {"sourceType": "grpc", "address": "127.0.0.1:1", "secrets": secrets},
    }))
    .unwrap();
    catalogs
        .create(&PostParams::default(), &catalog)
        .await
        .unwrap();
}

/// An OperatorGroup with `annotations`.
pub(crate) async fn create_operator_group(
    client: &Client,
    namespace: &str,
    annotations: &[(&str, &str)],
) {
    let groups: Api<olm_api::operator_group::OperatorGroup> =
        Api::namespaced(client.clone(), namespace);
    let annotations: BTreeMap<_, _> = annotations.iter().copied().collect();
    let group = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1",
        "kind": "OperatorGroup",
        "metadata": {"name": "fixture-group", "annotations": annotations},
        "spec": {},
    }))
    .unwrap();
    groups.create(&PostParams::default(), &group).await.unwrap();
}

/// An InstallPlan whose status has one pending lookup per image, as
/// catalog-operator writes it.
pub(crate) async fn create_plan(
    client: &Client,
    namespace: &str,
    name: &str,
    catalog: &str,
    images: &[&str],
) {
    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), namespace);
    let plan: InstallPlan = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "InstallPlan",
        "metadata": {"name": name},
        "spec": {"clusterServiceVersionNames": ["etcdoperator.v0.9.4"], "approval": "Automatic", "approved": true, "generation": 1},
    }))
    .unwrap();
    plans.create(&PostParams::default(), &plan).await.unwrap();
    let lookups: Vec<_> = images
        .iter()
        .map(|image| {
            json!({
                "path": image,
                "identifier": "etcdoperator.v0.9.4",
                "replaces": "",
                "catalogSourceRef": {"name": catalog, "namespace": namespace},
                "conditions": [
                    {"type": "BundleLookupNotPersisted", "status": "True", "reason": "BundleNotUnpacked",
                     "message": "bundle contents have not yet been persisted to installplan status"},
                    {"type": "BundleLookupPending", "status": "True", "reason": "JobNotStarted",
                     "message": "unpack job not yet started"},
                ],
            })
        })
        .collect();
    plans
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Installing", "catalogSources": [catalog], "bundleLookups": lookups}})),
        )
        .await
        .unwrap();
}

/// What the ConfigMap of `image` says, once it exists.
pub(crate) enum Stored {
    Content(Box<UnpackedBundle>, ConfigMap),
    Failure(String, String, ConfigMap),
}

/// Waits for the ConfigMap of `image` and reads it.
pub(crate) async fn wait_stored(client: &Client, namespace: &str, image: &str) -> Stored {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let name = unpacked::config_map_name(image);
    // The ConfigMap found is the one read: a failure record can be deleted
    // by a retry at any moment, so a second read could miss it.
    let cm = eventually(&format!("configmap of {image}"), WAIT, || {
        let api = api.clone();
        let name = name.clone();
        async move {
            api.get_opt(&name)
                .await
                .map_err(|e| e.to_string())?
                .ok_or_else(|| "absent".to_owned())
        }
    })
    .await;
    read(cm)
}

/// Reads a stored ConfigMap.
pub(crate) fn read(cm: ConfigMap) -> Stored {
    let annotations = cm.metadata.annotations.clone().unwrap_or_default();
    if let Some((reason, message)) = unpacked::failure(&annotations) {
        return Stored::Failure(reason, message, cm);
    }
    let data: BTreeMap<String, Vec<u8>> = cm
        .binary_data
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect();
    Stored::Content(Box::new(unpacked::decode(&annotations, &data).unwrap()), cm)
}
