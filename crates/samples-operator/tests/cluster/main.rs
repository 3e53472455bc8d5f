//! samples-operator against a real API server (from `olm-testkit`), one test
//! binary so the control plane starts once. OpenShift's image and template
//! APIs are installed as open CRDs, and the tests write import results into
//! ImageStream status themselves (as kwok stands in for a kubelet). Each
//! test runs the controller in-process on namespaces and a Config name of
//! its own, so that tests run side by side; tests that change what the
//! cluster serves (the APIs, the image policy) hold [`CLUSTER_APIS`]
//! exclusively.

// Helpers of a test binary: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod bootstrap;
mod imports;
mod samples;
mod states;

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use k8s_openapi::{
    api::core::v1::ConfigMap,
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use olm_api::{
    openshift::{ImageStream, Template},
    samples::Config,
};
use olm_runtime::admin::Readiness;
pub(crate) use olm_testkit::{eventually, olm_crds_installed, open_crd};
use samples_operator::{
    controller::{self, InventorySource, SamplesConfig},
    decide::inventory::Inventory,
    metrics::SamplesMetrics,
};
use serde::Deserialize as _;
use serde_json::{Value, json};
use tokio::sync::RwLock;
use tokio_util::sync::CancellationToken;

/// How long a test waits for the controller to converge.
pub(crate) const WAIT: Duration = Duration::from_secs(30);

/// Held shared by tests that need the image and template APIs, and
/// exclusively by tests that change what the cluster serves.
pub(crate) static CLUSTER_APIS: RwLock<()> = RwLock::const_new(());

/// The version the operator runs at, unless a test says otherwise.
pub(crate) const VERSION: &str = "4.99.0-fixture";

/// Installs a log subscriber that the test harness captures, once.
pub(crate) fn init_logs() {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "samples_operator=debug".into()),
        )
        .try_init();
}

/// The image and template APIs (ImageStream, ImageStreamImport, Template),
/// as `deploy/dev` has them for `cargo xtask dev`.
fn sample_api_crds() -> Vec<CustomResourceDefinition> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/dev/openshift-image-and-template-apis.yaml"
    );
    let text = std::fs::read_to_string(path).unwrap();
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|document| CustomResourceDefinition::deserialize(document).unwrap())
        .collect()
}

/// Creates `crds` (when absent) and waits until discovery serves them.
pub(crate) async fn install_crds(client: &Client, crds: Vec<CustomResourceDefinition>) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in &crds {
        match api.create(&PostParams::default(), crd).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.is_already_exists() => {}
            Err(error) => panic!("cannot create CRD: {error}"),
        }
    }
    for crd in crds {
        let name = crd.metadata.name.clone().unwrap();
        tokio::task::spawn_blocking(move || {
            olm_testkit::control_plane().wait_crd_established(&name)
        })
        .await
        .unwrap();
        let client = client.clone();
        let (group, plural) = (crd.spec.group.clone(), crd.spec.names.plural.clone());
        eventually(&format!("{plural}.{group} discoverable"), WAIT, || async {
            olm_runtime::discovery::served_resource(&client, &group, &plural)
                .await
                .ok()
                .flatten()
                .map(|_| ())
                .ok_or_else(|| "not yet".to_owned())
        })
        .await;
    }
}

/// Deletes `names` CRDs and waits until discovery no longer serves them.
pub(crate) async fn remove_crds(client: &Client, crds: &[(&str, &str)]) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for (group, plural) in crds {
        let _ = api
            .delete(&format!("{plural}.{group}"), &DeleteParams::default())
            .await;
    }
    for (group, plural) in crds {
        let client = client.clone();
        eventually(&format!("{plural}.{group} gone"), WAIT, || async {
            match olm_runtime::discovery::served_resource(&client, group, plural).await {
                Ok(None) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
    }
}

/// Removes the image and template APIs (hold [`CLUSTER_APIS`] exclusively).
pub(crate) async fn remove_sample_apis(client: &Client) {
    remove_crds(
        client,
        &[
            ("image.openshift.io", "imagestreams"),
            ("image.openshift.io", "imagestreamimports"),
            ("template.openshift.io", "templates"),
        ],
    )
    .await;
}

/// Installs OpenShift's Image config API (`config.openshift.io/v1`
/// `images`; hold [`CLUSTER_APIS`] exclusively).
pub(crate) async fn install_image_config_api(client: &Client) {
    install_crds(
        client,
        vec![open_crd(
            "config.openshift.io",
            "images",
            "Image",
            "Cluster",
            true,
        )],
    )
    .await;
}

/// The shared hold on the image and template APIs, installed.
pub(crate) async fn sample_apis(client: &Client) -> tokio::sync::RwLockReadGuard<'static, ()> {
    let guard = CLUSTER_APIS.read().await;
    install_crds(client, sample_api_crds()).await;
    guard
}

/// A small inventory: `fixture-ruby` (a DockerImage tag and an alias),
/// `fixture-httpd`, and the Templates `fixture-app` and `fixture-db`.
pub(crate) fn fixture_inventory() -> Inventory {
    let stream = |name: &str, image: &str| {
        json!({
            "kind": "ImageStream", "apiVersion": "image.openshift.io/v1",
            "metadata": {"name": name, "annotations": {"openshift.io/display-name": name}},
            "spec": {"tags": [
                {"name": "1.0", "from": {"kind": "DockerImage", "name": image},
                 "generation": null, "importPolicy": {}, "referencePolicy": {"type": "Local"}},
                {"name": "latest", "from": {"kind": "ImageStreamTag", "name": "1.0"},
                 "generation": null, "referencePolicy": {"type": "Local"}}
            ]}
        })
    };
    let template = |name: &str| {
        json!({
            "kind": "Template", "apiVersion": "template.openshift.io/v1",
            "metadata": {"name": name},
            "objects": [{"kind": "Service", "apiVersion": "v1", "metadata": {"name": "${NAME}"}}],
            "parameters": [{"name": "NAME", "value": name}]
        })
    };
    let files = [
        (
            "ruby/imagestreams/ruby.json",
            stream("fixture-ruby", "registry.redhat.io/ubi9/ruby-33:latest"),
        ),
        (
            "httpd/imagestreams/httpd.json",
            stream("fixture-httpd", "quay.io/fixture/httpd:2.4"),
        ),
        ("app/templates/app.json", template("fixture-app")),
        ("db/templates/db.json", template("fixture-db")),
    ];
    Inventory::from_files(
        files
            .into_iter()
            .map(|(path, value)| (path, serde_json::to_vec(&value).unwrap())),
    )
    .unwrap()
}

/// Namespaces and a Config of a test's own.
pub(crate) struct Fixture {
    pub(crate) client: Client,
    pub(crate) samples: olm_testkit::TestNamespace,
    pub(crate) operator: olm_testkit::TestNamespace,
    pub(crate) config_name: String,
}

impl Fixture {
    pub(crate) async fn new(prefix: &str) -> Self {
        init_logs();
        olm_crds_installed().await;
        let plane = olm_testkit::control_plane();
        let client = plane.client().await;
        let samples = plane.namespace(&format!("{prefix}-samples")).await;
        let operator = plane.namespace(&format!("{prefix}-op")).await;
        let config_name = format!("cluster-{}", operator.name());
        Self {
            client,
            samples,
            operator,
            config_name,
        }
    }

    /// The service's settings for this fixture: the fixture inventory, no
    /// registry probe, no ClusterOperator, a short resync.
    pub(crate) fn config(&self) -> SamplesConfig {
        let mut config = SamplesConfig::new(self.operator.name(), VERSION);
        config.config_name.clone_from(&self.config_name);
        config.samples_namespace = self.samples.name().to_owned();
        config.inventory = InventorySource::Fixed(Arc::new(fixture_inventory()));
        config.bootstrap.architecture = Some("x86_64".to_owned());
        config.bootstrap.probe = None;
        config.report_cluster_operator = false;
        config.resync = Duration::from_secs(3);
        config
    }

    pub(crate) fn configs(&self) -> Api<Config> {
        Api::all(self.client.clone())
    }

    pub(crate) fn streams(&self) -> Api<ImageStream> {
        Api::namespaced(self.client.clone(), self.samples.name())
    }

    pub(crate) fn templates(&self) -> Api<Template> {
        Api::namespaced(self.client.clone(), self.samples.name())
    }

    pub(crate) fn config_maps(&self) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), self.operator.name())
    }

    /// The Config, once it exists.
    pub(crate) async fn config_object(&self) -> Config {
        let configs = self.configs();
        let name = self.config_name.clone();
        eventually("the Config exists", WAIT, || async {
            configs
                .get_opt(&name)
                .await
                .map_err(|e| e.to_string())?
                .ok_or_else(|| "absent".to_owned())
        })
        .await
    }

    /// Waits until the Config's status satisfies `check`.
    pub(crate) async fn status_until(
        &self,
        what: &str,
        check: impl Fn(&Config) -> Result<(), String>,
    ) -> Config {
        let configs = self.configs();
        let name = self.config_name.clone();
        eventually(what, WAIT, || async {
            let config = configs
                .get_opt(&name)
                .await
                .map_err(|e| e.to_string())?
                .ok_or_else(|| "no Config".to_owned())?;
            check(&config).map(|()| config)
        })
        .await
    }

    /// Merge-patches the Config's spec.
    pub(crate) async fn patch_spec(&self, spec: Value) {
        self.configs()
            .patch(
                &self.config_name,
                &PatchParams::default(),
                &Patch::Merge(&json!({ "spec": spec })),
            )
            .await
            .unwrap();
    }

    /// The names of the ImageStreams and Templates in the samples
    /// namespace, with the managed label of each.
    pub(crate) async fn samples(&self) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
        let label = |labels: Option<&BTreeMap<String, String>>| {
            labels
                .and_then(|labels| labels.get(olm_api::samples::MANAGED_LABEL))
                .cloned()
                .unwrap_or_default()
        };
        let streams = self
            .streams()
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|s| {
                (
                    s.metadata.name.clone().unwrap(),
                    label(s.metadata.labels.as_ref()),
                )
            })
            .collect();
        let templates = self
            .templates()
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|t| {
                (
                    t.metadata.name.clone().unwrap(),
                    label(t.metadata.labels.as_ref()),
                )
            })
            .collect();
        (streams, templates)
    }

    /// Waits until the samples namespace holds exactly these managed
    /// ImageStreams and Templates.
    pub(crate) async fn managed_samples_are(&self, streams: &[&str], templates: &[&str]) {
        let want = (
            streams.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>(),
            templates
                .iter()
                .map(|s| (*s).to_owned())
                .collect::<Vec<_>>(),
        );
        eventually("the managed samples", WAIT, || async {
            let (streams, templates) = self.samples().await;
            let managed = |map: BTreeMap<String, String>| {
                map.into_iter()
                    .filter(|(_, label)| label == "true")
                    .map(|(name, _)| name)
                    .collect::<Vec<_>>()
            };
            let got = (managed(streams), managed(templates));
            if got == want {
                Ok(())
            } else {
                Err(format!("{got:?}"))
            }
        })
        .await;
    }

    /// Writes a successful import of every tag into each ImageStream's
    /// status, as OpenShift's image API would once it pulled them.
    pub(crate) async fn import_everything(&self) {
        let streams = self.streams();
        for stream in streams.list(&Default::default()).await.unwrap() {
            let tags: Vec<Value> = stream
                .spec_tags()
                .iter()
                .map(|tag| {
                    json!({"tag": tag.name, "items": [{
                        "image": "sha256:fixture", "dockerImageReference": "fixture@sha256:fixture",
                        "generation": 1, "created": "2026-01-01T00:00:00Z"
                    }]})
                })
                .collect();
            streams
                .patch_status(
                    &stream.metadata.name.clone().unwrap(),
                    &PatchParams::default(),
                    &Patch::Merge(&json!({"status": {"tags": tags}})),
                )
                .await
                .unwrap();
        }
    }

    /// Waits until every fixture sample is there and managed.
    pub(crate) async fn every_sample_managed(&self) {
        self.managed_samples_are(
            &["fixture-httpd", "fixture-ruby"],
            &["fixture-app", "fixture-db"],
        )
        .await;
    }

    /// Waits until the Config says `SamplesExist=True`.
    pub(crate) async fn samples_exist(&self) -> Config {
        self.status_until("samples exist", |config| {
            expect_condition(config, olm_api::samples::condition::SAMPLES_EXIST, "True")
        })
        .await
    }

    /// Deletes the Config (the tests' clean-up; its finalizer goes with the
    /// service stopped).
    pub(crate) async fn delete_config(&self) {
        let configs = self.configs();
        let _ = configs
            .patch(
                &self.config_name,
                &PatchParams::default(),
                &Patch::Merge(&json!({"metadata": {"finalizers": null}})),
            )
            .await;
        let _ = configs
            .delete(&self.config_name, &DeleteParams::default())
            .await;
    }
}

/// The service, running in this test; stopped on drop.
pub(crate) struct RunningSamples {
    pub(crate) registry: Arc<olm_runtime::metrics::MetricsRegistry>,
    shutdown: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl RunningSamples {
    pub(crate) async fn start(client: &Client, config: SamplesConfig) -> Self {
        let readiness = Readiness::default();
        let shutdown = CancellationToken::new();
        let mut registry = olm_runtime::metrics::MetricsRegistry::default();
        let metrics = SamplesMetrics::register(&mut registry);
        let (leading_tx, leading_rx) = tokio::sync::watch::channel(true);
        let task = tokio::spawn({
            let client = client.clone();
            let shutdown = shutdown.clone();
            async move {
                let _keep = leading_tx;
                controller::run(client, config, metrics, readiness, leading_rx, shutdown)
                    .await
                    .unwrap();
            }
        });
        Self {
            registry: Arc::new(registry),
            shutdown,
            task: Some(task),
        }
    }

    /// How many sample writes (ImageStreams, Templates, ConfigMaps) the
    /// service has made, from its metrics.
    pub(crate) fn sample_writes(&self) -> u64 {
        self.registry
            .encode()
            .unwrap()
            .lines()
            .filter(|line| line.starts_with("samples_operator_sample_writes_total{"))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }

    pub(crate) async fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(20), task)
                .await
                .expect("the service stops within 20 s")
                .unwrap();
        }
    }
}

impl Drop for RunningSamples {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// The status of condition `type_` of a Config, `""` when absent.
pub(crate) fn condition(config: &Config, type_: &str) -> String {
    config
        .status
        .as_ref()
        .and_then(|status| olm_api::conditions::find(&status.conditions, type_))
        .map(|c| c.status.clone())
        .unwrap_or_default()
}

/// `Ok` when `condition` of `config` is `value`.
pub(crate) fn expect_condition(config: &Config, type_: &str, value: &str) -> Result<(), String> {
    let got = condition(config, type_);
    if got == value {
        Ok(())
    } else {
        Err(format!("{type_} is {got:?}, status {:?}", config.status))
    }
}
