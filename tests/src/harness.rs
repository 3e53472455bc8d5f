//! The pieces every install test (and the install benchmark) shares: small
//! bundles of our own, pushed to a real OCI registry; catalogs of them served
//! over gRPC on loopback (the address source); catalog-operator,
//! bundle-unpacker and olm-operator run in-process; the objects a user
//! creates to subscribe; and the reads the tests wait on.

pub use olm_testkit::olm_crds_installed;
use std::time::Duration;

use kube::{Api, api::PostParams};
use olm_api::{
    catalog_source::CatalogSource, csv::ClusterServiceVersion, install_plan::InstallPlan,
    operator_group::OperatorGroup, subscription::Subscription,
};
use olm_catalog::bundle::{LoadBundleOptions, Payload, RegistryBundle};
use olm_runtime::admin::Readiness;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// Logs of the in-process services on the test's output, when `RUST_LOG`
/// is set (e.g. `RUST_LOG=catalog_operator=debug`).
pub fn init_logs() {
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
    }
}

/// What one test starts with: OLM's CRDs installed, a namespace of its
/// own, a client, a registry, and an API group unique to the test.
#[allow(missing_debug_implementations)]
pub struct Setup {
    /// A client of the control plane.
    pub client: kube::Client,
    /// The test's namespace (deleted when dropped).
    pub ns: olm_testkit::TestNamespace,
    /// A real OCI registry on loopback.
    pub registry: olm_testkit::registry::Registry,
    /// `<namespace>.e2e.olm.io`, for the test's CRDs.
    pub group: String,
}

impl Setup {
    /// Sets up a test whose namespace starts with `prefix`.
    pub async fn new(prefix: &str) -> Self {
        init_logs();
        olm_crds_installed().await;
        let plane = olm_testkit::control_plane();
        let ns = plane.namespace(prefix).await;
        let client = plane.client().await;
        let registry = olm_testkit::registry::Registry::start()
            .unwrap_or_else(|err| panic!("registry: {err}"));
        let group = format!("{}.e2e.olm.io", ns.name());
        Self {
            client,
            ns,
            registry,
            group,
        }
    }

    /// The test's namespace.
    pub fn namespace(&self) -> &str {
        self.ns.name()
    }

    /// Typed access to a namespaced kind in the test's namespace.
    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), self.ns.name())
    }
}

/// How long a test waits for one step of an install.
pub const WAIT: Duration = Duration::from_secs(90);

/// The files of a bundle: `(path in the image, bytes)`.
pub type BundleFiles = Vec<(String, Vec<u8>)>;

/// One version of a CRD served by a bundle.
#[derive(Debug, Clone)]
pub struct CrdVersion {
    /// The version's name, e.g. `v1`.
    pub name: String,
    /// Whether it is the storage version.
    pub storage: bool,
    /// Its `openAPIV3Schema`.
    pub schema: Value,
}

impl CrdVersion {
    /// A served version; the schema keeps every field.
    pub fn open(name: &str, storage: bool) -> Self {
        Self {
            name: name.to_owned(),
            storage,
            schema: json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
        }
    }
}

/// A small bundle of our own: one owned CRD (`<plural>.<group>`), a CSV
/// `<package>.v<version>` with one Deployment `<singular>-operator`, and
/// upstream's annotations. The package name is the CRD's plural, e.g.
/// `gadgets` (kind `Gadget`).
#[derive(Debug, Clone)]
pub struct BundleSpec {
    /// The package (also the CRD's plural).
    pub package: String,
    /// The CRD's group.
    pub group: String,
    /// The CSV's `spec.version`.
    pub version: String,
    /// The CSV's `spec.replaces`.
    pub replaces: Option<String>,
    /// The CSV's `olm.skipRange` annotation.
    pub skip_range: Option<String>,
    /// The versions of the owned CRD.
    pub crd_versions: Vec<CrdVersion>,
    /// `metadata/dependencies.yaml` entries (`{"type", "value"}`).
    pub dependencies: Vec<Value>,
    /// CRDs the CSV requires: `(name, version, kind)`.
    pub required_crds: Vec<(String, String, String)>,
    /// Rules of the CSV's `clusterPermissions` (none when empty).
    pub cluster_rules: Vec<Value>,
    /// Further objects in `manifests/` (RBAC, ConfigMaps, ...), as
    /// `(file name, object)`.
    pub extra_manifests: Vec<(String, Value)>,
}

impl BundleSpec {
    /// The `gadgets` bundle at `version`, CRD `gadgets.<group>` served at `v1`.
    pub fn new(group: &str, version: &str) -> Self {
        Self::package("gadgets", group, version)
    }

    /// The bundle of `package` (a plural such as `widgets`) at `version`.
    pub fn package(package: &str, group: &str, version: &str) -> Self {
        Self {
            package: package.to_owned(),
            group: group.to_owned(),
            version: version.to_owned(),
            replaces: None,
            skip_range: None,
            crd_versions: vec![CrdVersion::open("v1", true)],
            dependencies: Vec::new(),
            required_crds: Vec::new(),
            cluster_rules: Vec::new(),
            extra_manifests: Vec::new(),
        }
    }

    /// Replaces the CSV `replaces`.
    #[must_use]
    pub fn replaces(mut self, replaces: &str) -> Self {
        self.replaces = Some(replaces.to_owned());
        self
    }

    /// Sets the `olm.skipRange` annotation.
    #[must_use]
    pub fn skip_range(mut self, range: &str) -> Self {
        self.skip_range = Some(range.to_owned());
        self
    }

    /// Sets the owned CRD's versions.
    #[must_use]
    pub fn crd_versions(mut self, versions: Vec<CrdVersion>) -> Self {
        self.crd_versions = versions;
        self
    }

    /// Adds a `dependencies.yaml` entry.
    #[must_use]
    pub fn dependency(mut self, dependency: Value) -> Self {
        self.dependencies.push(dependency);
        self
    }

    /// Adds a required CRD to the CSV.
    #[must_use]
    pub fn requires_crd(mut self, name: &str, version: &str, kind: &str) -> Self {
        self.required_crds
            .push((name.to_owned(), version.to_owned(), kind.to_owned()));
        self
    }

    /// Adds a rule to the CSV's `clusterPermissions`.
    #[must_use]
    pub fn cluster_permission(mut self, rule: Value) -> Self {
        self.cluster_rules.push(rule);
        self
    }

    /// Adds an object to the bundle's `manifests/`.
    #[must_use]
    pub fn manifest(mut self, file: &str, object: Value) -> Self {
        self.extra_manifests.push((file.to_owned(), object));
        self
    }

    /// The singular of the package (`gadgets` → `gadget`).
    pub fn singular(&self) -> String {
        self.package
            .strip_suffix('s')
            .unwrap_or(&self.package)
            .to_owned()
    }

    /// The kind of the owned CRD (`gadgets` → `Gadget`).
    pub fn kind(&self) -> String {
        let singular = self.singular();
        let mut chars = singular.chars();
        chars
            .next()
            .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
            .unwrap_or_default()
    }

    /// The owned CRD's name.
    pub fn crd_name(&self) -> String {
        format!("{}.{}", self.package, self.group)
    }

    /// The CSV's name.
    pub fn csv_name(&self) -> String {
        format!("{}.v{}", self.package, self.version)
    }

    /// The operator Deployment's name.
    pub fn deployment_name(&self) -> String {
        format!("{}-operator", self.singular())
    }

    /// The owned CRD.
    pub fn crd(&self) -> Value {
        let versions: Vec<Value> = self
            .crd_versions
            .iter()
            .map(|v| {
                json!({"name": v.name, "served": true, "storage": v.storage,
                    "schema": {"openAPIV3Schema": v.schema}})
            })
            .collect();
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": self.crd_name()},
            "spec": {
                "group": self.group, "scope": "Namespaced",
                "names": {"kind": self.kind(), "listKind": format!("{}List", self.kind()),
                    "plural": self.package, "singular": self.singular()},
                "versions": versions
            }
        })
    }

    /// The CSV.
    pub fn csv(&self) -> Value {
        let storage = self
            .crd_versions
            .iter()
            .find(|v| v.storage)
            .map_or("v1", |v| v.name.as_str());
        let mut annotations = json!({"capabilities": "Basic Install"});
        if let Some(range) = &self.skip_range {
            annotations["olm.skipRange"] = json!(range);
        }
        let required: Vec<Value> = self
            .required_crds
            .iter()
            .map(|(name, version, kind)| {
                json!({"name": name, "version": version, "kind": kind, "displayName": kind})
            })
            .collect();
        let mut crds = json!({"owned": [{"name": self.crd_name(), "version": storage,
            "kind": self.kind(), "displayName": self.kind()}]});
        if !required.is_empty() {
            crds["required"] = json!(required);
        }
        let deployment = self.deployment_name();
        let mut csv = json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": self.csv_name(), "annotations": annotations},
            "spec": {
                "displayName": self.kind(), "version": self.version, "provider": {"name": "Example"},
                "replaces": self.replaces,
                "installModes": [
                    {"type": "OwnNamespace", "supported": true}, {"type": "SingleNamespace", "supported": true},
                    {"type": "MultiNamespace", "supported": false}, {"type": "AllNamespaces", "supported": true}],
                "customresourcedefinitions": crds,
                "install": {"strategy": "deployment", "spec": {
                    "permissions": [{"serviceAccountName": deployment,
                        "rules": [{"apiGroups": [self.group], "resources": [self.package], "verbs": ["*"]}]}],
                    "deployments": [{"name": deployment, "spec": {
                        "replicas": 1,
                        "selector": {"matchLabels": {"app": deployment}},
                        "template": {"metadata": {"labels": {"app": deployment}},
                            "spec": {"serviceAccountName": deployment,
                                "containers": [{"name": "operator",
                                    "image": format!("quay.io/example/{deployment}:v{}", self.version)}]}}
                    }}]
                }}
            }
        });
        if !self.cluster_rules.is_empty() {
            csv["spec"]["install"]["spec"]["clusterPermissions"] =
                json!([{"serviceAccountName": deployment, "rules": self.cluster_rules}]);
        }
        csv
    }

    /// The bundle's files, as `opm alpha bundle generate` lays them out.
    pub fn files(&self) -> BundleFiles {
        let annotations = format!(
            "annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: registry+v1\n  \
             operators.operatorframework.io.bundle.manifests.v1: manifests/\n  \
             operators.operatorframework.io.bundle.metadata.v1: metadata/\n  \
             operators.operatorframework.io.bundle.package.v1: {}\n  \
             operators.operatorframework.io.bundle.channels.v1: stable\n  \
             operators.operatorframework.io.bundle.channel.default.v1: stable\n",
            self.package
        );
        let mut files = vec![
            (
                format!("manifests/{}.crd.yaml", self.package),
                yaml(&self.crd()),
            ),
            (
                format!("manifests/{}.clusterserviceversion.yaml", self.csv_name()),
                yaml(&self.csv()),
            ),
            ("metadata/annotations.yaml".into(), annotations.into_bytes()),
        ];
        for (file, object) in &self.extra_manifests {
            files.push((format!("manifests/{file}"), yaml(object)));
        }
        if !self.dependencies.is_empty() {
            files.push((
                "metadata/dependencies.yaml".into(),
                yaml(&json!({"dependencies": self.dependencies})),
            ));
        }
        files
    }

    /// The bundle as `opm` reads it.
    pub fn load(&self) -> RegistryBundle {
        RegistryBundle::load_files(self.files(), &LoadBundleOptions::new())
            .unwrap_or_else(|err| panic!("bundle {}: {err}", self.csv_name()))
    }
}

fn yaml(value: &Value) -> Vec<u8> {
    serde_yaml_ng::to_string(value)
        .unwrap_or_else(|err| panic!("yaml: {err}"))
        .into_bytes()
}

/// The `gadgets` bundle at `version`, replacing `replaces` if given.
pub fn bundle_files_at(group: &str, version: &str, replaces: Option<&str>) -> BundleFiles {
    let mut spec = BundleSpec::new(group, version);
    spec.replaces = replaces.map(str::to_owned);
    spec.files()
}

/// Pushes the bundle to the (plain HTTP) registry at `registry_host` as an
/// image with upstream's labels; returns it by tag
/// (`<host>/e2e/<package>-bundle:v<version>`).
pub async fn push_bundle(
    registry_host: &str,
    files: &[(String, Vec<u8>)],
    bundle: &RegistryBundle,
) -> String {
    let image = format!(
        "{registry_host}/e2e/{}-bundle:v{}",
        bundle.package,
        bundle.version()
    );
    push_bundle_as(registry_host, &image, files, bundle).await;
    image
}

/// Pushes the bundle as `image` (on the plain HTTP registry `registry_host`).
pub async fn push_bundle_as(
    registry_host: &str,
    image: &str,
    files: &[(String, Vec<u8>)],
    bundle: &RegistryBundle,
) {
    let mut builder = olm_oci::ImageBuilder::new().labels(bundle.annotations.clone());
    for (path, bytes) in files {
        builder = builder
            .add_file(path, bytes.clone())
            .unwrap_or_else(|err| panic!("layer {path}: {err}"));
    }
    let built = builder.build().unwrap_or_else(|err| panic!("image: {err}"));
    let client = olm_oci::Client::new(olm_oci::ClientOptions::default().plain_http(registry_host))
        .unwrap_or_else(|err| panic!("client: {err}"));
    let reference = olm_oci::Reference::parse(image).unwrap_or_else(|err| panic!("{image}: {err}"));
    client
        .push_image(&reference, &built)
        .await
        .unwrap_or_else(|err| panic!("push {image}: {err}"));
}

/// Builds the spec's bundle and pushes it; returns the bundle and its image.
pub async fn publish(registry_host: &str, spec: &BundleSpec) -> (RegistryBundle, String) {
    let files = spec.files();
    let bundle = spec.load();
    let image = push_bundle(registry_host, &files, &bundle).await;
    (bundle, image)
}

/// A catalog served over gRPC on loopback, and the directory it was built from.
pub type ServedCatalog = (olm_registry::RunningServer, tempfile::TempDir);

/// A catalog of one bundle with CSV metadata only: the content is in the
/// image, so installing needs the unpacker.
pub async fn serve_catalog(bundle: &RegistryBundle, image: &str) -> ServedCatalog {
    serve_bundles(&[(bundle, image)]).await
}

/// A catalog of `bundles` (CSV metadata only), each package with one
/// `stable` channel holding its bundles in the order given.
pub async fn serve_bundles(bundles: &[(&RegistryBundle, &str)]) -> ServedCatalog {
    serve_bundles_as(bundles, Payload::CsvMetadata).await
}

/// [`serve_bundles`] with each bundle's content in the catalog as
/// `payload` says: [`Payload::BundleObjects`] carries every manifest, so
/// nothing needs unpacking from the image.
pub async fn serve_bundles_as(
    bundles: &[(&RegistryBundle, &str)],
    payload: Payload,
) -> ServedCatalog {
    let mut packages: Vec<&str> = Vec::new();
    for (bundle, _) in bundles {
        if !packages.contains(&bundle.package.as_str()) {
            packages.push(&bundle.package);
        }
    }
    let mut documents = Vec::new();
    for package in packages {
        let entries: Vec<Value> = bundles
            .iter()
            .filter(|(b, _)| b.package == package)
            .map(|(b, _)| {
                let mut entry = json!({"name": b.name});
                if let Some(replaces) = b.replaces() {
                    entry["replaces"] = json!(replaces);
                }
                if let Some(range) = b.skip_range() {
                    entry["skipRange"] = json!(range);
                }
                entry
            })
            .collect();
        documents
            .push(json!({"schema": "olm.package", "name": package, "defaultChannel": "stable"}));
        documents.push(json!({"schema": "olm.channel", "package": package, "name": "stable", "entries": entries}));
    }
    for (bundle, image) in bundles {
        documents.push(
            serde_json::to_value(bundle.to_fbc_bundle(image, payload))
                .unwrap_or_else(|err| panic!("fbc: {err}")),
        );
    }
    serve_any_documents(&documents).await
}

/// A catalog of the given FBC documents, which must not carry manifests
/// (`olm.bundle.object`): tests install from the bundle images.
pub async fn serve_documents(documents: &[Value]) -> ServedCatalog {
    assert!(
        !documents
            .iter()
            .any(|d| d.to_string().contains("olm.bundle.object")),
        "the catalog must not carry the objects"
    );
    serve_any_documents(documents).await
}

/// [`serve_documents`] without the check.
async fn serve_any_documents(documents: &[Value]) -> ServedCatalog {
    let dir = tempfile::tempdir().unwrap_or_else(|err| panic!("tempdir: {err}"));
    let text: String = documents.iter().map(|d| format!("{d}\n")).collect();
    std::fs::write(dir.path().join("catalog.json"), text).unwrap_or_else(|err| panic!("{err}"));
    let index =
        olm_registry::CatalogIndex::build(dir.path(), &olm_registry::IndexOptions::default())
            .unwrap_or_else(|err| panic!("index: {err}"));
    let server = olm_registry::RegistryServer::new(index)
        .spawn_loopback()
        .await
        .unwrap_or_else(|err| panic!("serve: {err}"));
    (server, dir)
}

/// What runs in-process, beyond the defaults.
#[derive(Debug, Clone, Default)]
pub struct ServiceOptions {
    /// bundle-unpacker's `--allowed-registries` rules.
    pub allowed_registries: Vec<String>,
    /// Skip catalog-operator (a test runs its binary instead).
    pub without_catalog_operator: bool,
    /// Skip bundle-unpacker (a test runs its binary instead).
    pub without_bundle_unpacker: bool,
    /// Connect catalog-operator and bundle-unpacker to this NATS server
    /// (the work queue); without it both rely on watches alone.
    pub nats_url: Option<String>,
    /// A folder holding each service's NKey seed as `<service>.nk`
    /// ([`SecuredNats::nkey_dir`]); without it the services connect
    /// anonymously.
    pub nats_nkeys: Option<std::path::PathBuf>,
    /// catalog-operator's `--install-plan-retry-timeout` (1 minute when unset).
    pub install_plan_retry_timeout: Option<Duration>,
    /// How catalog-operator dials registry Services: `ClusterIp` for
    /// registry pods on a real node, reached through kube-proxy from this
    /// host, which has no cluster DNS.
    pub service_lookup: olm_runtime::service_address::ServiceLookup,
}

/// Services running in-process; [`Services::stop`] ends them.
#[derive(Debug)]
pub struct Services {
    /// Cancelled to stop every service.
    pub shutdown: CancellationToken,
    /// The services' tasks.
    pub tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Services {
    /// Stops the services and waits (a bounded time) for them to end.
    pub async fn stop(self) {
        self.shutdown.cancel();
        for task in self.tasks {
            let _ = tokio::time::timeout(Duration::from_secs(20), task).await;
        }
    }
}

/// catalog-operator, bundle-unpacker and olm-operator, in-process, watching
/// `namespace`; cancel the token to stop them. `registry_host` is reached
/// over plain HTTP.
pub async fn start_services(
    namespace: &str,
    registry_host: &str,
) -> (CancellationToken, Vec<tokio::task::JoinHandle<()>>) {
    let services = start_services_with(namespace, registry_host, ServiceOptions::default()).await;
    (services.shutdown, services.tasks)
}

/// [`start_services`] with options.
pub async fn start_services_with(
    namespace: &str,
    registry_host: &str,
    options: ServiceOptions,
) -> Services {
    let plane = olm_testkit::control_plane();
    let namespace = namespace.to_owned();
    let registry_host = registry_host.to_owned();
    let mut tasks = Vec::new();
    let shutdown = CancellationToken::new();
    if !options.without_catalog_operator {
        let kube_config = identified(plane, "catalog-operator").await;
        let mut registry_metrics = olm_runtime::metrics::MetricsRegistry::default();
        let metrics = catalog_operator::metrics::CatalogMetrics::register(&mut registry_metrics);
        let config = catalog_operator::controller::ControllerConfig {
            watched_namespaces: vec![namespace.clone()],
            ready_recheck: Duration::from_secs(2),
            install_plan_retry_timeout: options
                .install_plan_retry_timeout
                .and_then(|d| jiff::SignedDuration::try_from(d).ok())
                .unwrap_or(
                    catalog_operator::controller::ControllerConfig::default()
                        .install_plan_retry_timeout,
                ),
            insecure_registries: vec![registry_host.clone()],
            service_lookup: options.service_lookup,
            ..Default::default()
        };
        let bus = connect_bus(
            options.nats_url.as_deref(),
            options.nats_nkeys.as_deref(),
            "catalog-operator",
        )
        .await;
        let stop = shutdown.clone();
        tasks.push(tokio::spawn(async move {
            if let Err(err) = catalog_operator::controller::run(
                kube_config,
                config,
                metrics,
                bus,
                Readiness::default(),
                stop,
            )
            .await
            {
                panic!("catalog-operator: {err}");
            }
        }));
    }
    if !options.without_bundle_unpacker {
        let client = kube::Client::try_from(identified(plane, "bundle-unpacker").await)
            .unwrap_or_else(|err| panic!("client: {err}"));
        let mut registry_metrics = olm_runtime::metrics::MetricsRegistry::default();
        let metrics = bundle_unpacker::metrics::UnpackMetrics::register(&mut registry_metrics);
        let config = bundle_unpacker::controller::UnpackerConfig {
            watched_namespaces: vec![namespace.clone()],
            insecure_registries: [registry_host.clone()].into(),
            allowed_registries: options
                .allowed_registries
                .iter()
                .map(|r| bundle_unpacker::decide::registries::RegistryRule::new(r))
                .collect(),
            resync: Duration::from_secs(2),
            watch_grace: Duration::from_millis(100),
            ..Default::default()
        };
        let bus = connect_bus(
            options.nats_url.as_deref(),
            options.nats_nkeys.as_deref(),
            "bundle-unpacker",
        )
        .await;
        let stop = shutdown.clone();
        tasks.push(tokio::spawn(async move {
            let (watch_tx, watch_rx) = tokio::sync::watch::channel(true);
            if let Err(err) = bundle_unpacker::controller::run(
                client,
                config,
                metrics,
                bus,
                Readiness::default(),
                watch_rx,
                stop,
            )
            .await
            {
                panic!("bundle-unpacker: {err}");
            }
            drop(watch_tx);
        }));
    }
    {
        let client = kube::Client::try_from(identified(plane, "olm-operator").await)
            .unwrap_or_else(|err| panic!("client: {err}"));
        let mut registry_metrics = olm_runtime::metrics::MetricsRegistry::default();
        let metrics = olm_operator::metrics::OperatorMetrics::register(&mut registry_metrics);
        let config = olm_operator::controller::ControllerConfig {
            watched_namespaces: vec![namespace.clone()],
            ..Default::default()
        };
        let stop = shutdown.clone();
        tasks.push(tokio::spawn(async move {
            if let Err(err) =
                olm_operator::controller::run(client, config, metrics, Readiness::default(), stop)
                    .await
            {
                panic!("olm-operator: {err}");
            }
        }));
    }
    Services { shutdown, tasks }
}

/// The control plane's admin configuration, with `service` as its
/// User-Agent (as the service's binary sends), so the API server's audit
/// log tells the in-process services apart.
async fn identified(plane: &olm_testkit::ControlPlane, service: &str) -> kube::Config {
    let mut config = plane
        .config()
        .await
        .unwrap_or_else(|err| panic!("kube config: {err}"));
    olm_runtime::config::identify(&mut config, service, env!("CARGO_PKG_VERSION"));
    config
}

/// A bus to `url` (waiting until connected), or a disabled one.
async fn connect_bus(
    url: Option<&str>,
    nkeys: Option<&std::path::Path>,
    service: &str,
) -> olm_bus::Bus {
    let Some(url) = url else {
        return olm_bus::Bus::disabled();
    };
    let args = olm_bus::BusArgs {
        nats_nkey_file: nkeys.map(|dir| dir.join(format!("{service}.nk"))),
        ..olm_bus::BusArgs::with_url(url)
    };
    let bus = olm_bus::Bus::connect(&args, service)
        .await
        .unwrap_or_else(|err| panic!("bus: {err}"));
    bus.wait_connected(Duration::from_secs(10))
        .await
        .unwrap_or_else(|err| panic!("bus: {err}"));
    bus
}

fn create_failed(what: &str, err: &kube::Error) -> ! {
    panic!("create {what}: {err}")
}

fn decode<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).unwrap_or_else(|err| panic!("decode: {err}"))
}

/// Creates the grpc CatalogSource `name` at `address` in `namespace`.
pub async fn create_catalog(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    address: &str,
) -> Api<CatalogSource> {
    let catalogs: Api<CatalogSource> = Api::namespaced(client.clone(), namespace);
    catalogs
        .create(
            &PostParams::default(),
            &decode(json!({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
                "metadata": {"name": name},
                "spec": {"sourceType": "grpc", "address": address, "displayName": name}
            })),
        )
        .await
        .unwrap_or_else(|err| create_failed("CatalogSource", &err));
    catalogs
}

/// Creates the OperatorGroup `og` targeting `namespace`, with `annotations`.
pub async fn create_operator_group(client: &kube::Client, namespace: &str, annotations: Value) {
    let groups: Api<OperatorGroup> = Api::namespaced(client.clone(), namespace);
    groups
        .create(
            &PostParams::default(),
            &decode(json!({
                "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
                "metadata": {"name": "og", "annotations": annotations},
                "spec": {"targetNamespaces": [namespace]}
            })),
        )
        .await
        .unwrap_or_else(|err| create_failed("OperatorGroup", &err));
}

/// Creates the Subscription `package` to `package`'s stable channel in the
/// catalog `source` of `namespace` (with `approval` when given).
pub async fn create_subscription(
    client: &kube::Client,
    namespace: &str,
    package: &str,
    source: &str,
    approval: Option<&str>,
) -> Api<Subscription> {
    let mut extra = json!({});
    if let Some(approval) = approval {
        extra["installPlanApproval"] = json!(approval);
    }
    create_subscription_with(client, namespace, package, source, extra).await
}

/// [`create_subscription`] with further spec fields (`startingCSV`, ...).
pub async fn create_subscription_with(
    client: &kube::Client,
    namespace: &str,
    package: &str,
    source: &str,
    extra: Value,
) -> Api<Subscription> {
    let mut spec = json!({"name": package, "channel": "stable", "source": source, "sourceNamespace": namespace});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    let subs: Api<Subscription> = Api::namespaced(client.clone(), namespace);
    subs.create(
        &PostParams::default(),
        &decode(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": package}, "spec": spec
        })),
    )
    .await
    .unwrap_or_else(|err| create_failed("Subscription", &err));
    subs
}

/// Creates the CatalogSource `gadgets-catalog` at `address`, an
/// OperatorGroup targeting `namespace`, and the Subscription `gadgets` to
/// its stable channel (with `approval` when given).
pub async fn subscribe(
    client: &kube::Client,
    namespace: &str,
    address: &str,
    approval: Option<&str>,
) -> (Api<CatalogSource>, Api<Subscription>) {
    let catalogs = create_catalog(client, namespace, "gadgets-catalog", address).await;
    create_operator_group(client, namespace, json!({})).await;
    let subs = create_subscription(client, namespace, "gadgets", "gadgets-catalog", approval).await;
    (catalogs, subs)
}

/// The phase of CSV `name`, or why it cannot be read.
pub async fn csv_phase(csvs: &Api<ClusterServiceVersion>, name: &str) -> Result<String, String> {
    let csv = csvs
        .get_opt(name)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("no CSV {name}"))?;
    Ok(csv
        .status
        .and_then(|s| s.phase)
        .map(|p| p.to_string())
        .unwrap_or_default())
}

/// Where an install stands: the Subscription's and every InstallPlan's
/// status, for failure messages.
pub async fn describe(client: &kube::Client, namespace: &str) -> String {
    let subs: Api<Subscription> = Api::namespaced(client.clone(), namespace);
    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), namespace);
    let subs = subs
        .list(&Default::default())
        .await
        .map(|l| {
            l.items
                .into_iter()
                .map(|s| json!({"name": s.metadata.name, "status": s.status}))
                .collect::<Vec<_>>()
        })
        .map_err(|e| e.to_string());
    let plans = plans
        .list(&Default::default())
        .await
        .map(|l| {
            l.items
                .into_iter()
                .map(|p| json!({"name": p.metadata.name, "status": p.status}))
                .collect::<Vec<_>>()
        })
        .map_err(|e| e.to_string());
    format!("subscriptions {subs:?}; plans {plans:?}")
}

/// Waits until CSV `name` is Succeeded, describing the install on timeout.
pub async fn wait_csv_succeeded(client: &kube::Client, namespace: &str, name: &str) {
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), namespace);
    crate::eventually(&format!("{name} Succeeded"), WAIT, || async {
        match csv_phase(&csvs, name).await {
            Ok(phase) if phase == "Succeeded" => Ok(()),
            other => Err(format!("{other:?}; {}", describe(client, namespace).await)),
        }
    })
    .await;
}

/// The Subscription `name`'s status as JSON.
pub async fn subscription_status(subs: &Api<Subscription>, name: &str) -> Result<Value, String> {
    let sub = subs.get(name).await.map_err(|e| e.to_string())?;
    serde_json::to_value(sub.status.unwrap_or_default()).map_err(|e| e.to_string())
}

/// The condition of `kind` in a status's `conditions`, if any.
pub fn condition<'a>(status: &'a Value, kind: &str) -> Option<&'a Value> {
    status["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == kind))
}

/// Deletes the CRDs named (cluster-scoped, so they outlive the namespace).
pub async fn delete_crds(client: &kube::Client, names: &[String]) {
    let crds: Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = Api::all(client.clone());
    for name in names {
        let _ = crds.delete(name, &Default::default()).await;
    }
}

/// The path of a binary of this workspace (`catalog-operator`,
/// `bundle-unpacker`, `opm`), built first (once per test binary) in the profile and
/// target directory of the running test, so it is never stale.
pub fn service_binary(name: &str) -> std::path::PathBuf {
    static BUILT: std::sync::OnceLock<Result<std::path::PathBuf, String>> =
        std::sync::OnceLock::new();
    let profile_dir = BUILT
        .get_or_init(|| {
            let exe = std::env::current_exe().map_err(|e| e.to_string())?;
            // target/<profile>/deps/<test binary>
            let profile_dir = exe
                .parent()
                .and_then(std::path::Path::parent)
                .ok_or("no profile directory")?
                .to_owned();
            let target_dir = profile_dir.parent().ok_or("no target directory")?;
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
            let mut command = std::process::Command::new(cargo);
            command
                .current_dir(crate::workspace_root())
                .args([
                    "build",
                    "--bins",
                    "-p",
                    "catalog-operator",
                    "-p",
                    "bundle-unpacker",
                    "-p",
                    "olm-operator",
                    "-p",
                    "opm",
                ])
                .arg("--target-dir")
                .arg(target_dir);
            if profile_dir.file_name().is_some_and(|n| n == "release") {
                command.arg("--release");
            }
            let status = command.status().map_err(|e| e.to_string())?;
            if status.success() {
                Ok(profile_dir)
            } else {
                Err(format!("building the service binaries: {status}"))
            }
        })
        .as_ref()
        .unwrap_or_else(|err| panic!("{err}"));
    profile_dir.join(name)
}

/// A service binary run as a child process, its output in a log file;
/// killed with SIGKILL when dropped or by [`ServiceProcess::kill`].
#[derive(Debug)]
pub struct ServiceProcess {
    child: std::process::Child,
    log: std::path::PathBuf,
}

impl ServiceProcess {
    /// Starts `name` against the test control plane with `args` (plus
    /// `--kubeconfig` and a free admin port); its log goes to `log`.
    pub fn start(name: &str, args: &[String], log: &std::path::Path) -> Self {
        Self::start_with_env(name, args, &[], log)
    }

    /// [`ServiceProcess::start`] with extra environment variables.
    pub fn start_with_env(
        name: &str,
        args: &[String],
        env: &[(&str, &str)],
        log: &std::path::Path,
    ) -> Self {
        let plane = olm_testkit::control_plane();
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap_or_else(|err| panic!("{}: {err}", log.display()));
        let err = out
            .try_clone()
            .unwrap_or_else(|err| panic!("{}: {err}", log.display()));
        let child = std::process::Command::new(service_binary(name))
            .arg("--kubeconfig")
            .arg(plane.kubeconfig_path())
            .args(["--admin-bind-address", "127.0.0.1:0"])
            .args(args)
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|err| panic!("starting {name}: {err}"));
        Self {
            child,
            log: log.to_owned(),
        }
    }

    /// Kills the process with SIGKILL and reaps it.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The log file.
    pub fn log(&self) -> &std::path::Path {
        &self.log
    }
}

impl Drop for ServiceProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until the Subscription `sub` is `AtLatestKnown` with
/// `installedCSV` = `csv` and that CSV is Succeeded; returns the
/// Subscription's status.
pub async fn wait_installed(client: &kube::Client, namespace: &str, sub: &str, csv: &str) -> Value {
    wait_csv_succeeded(client, namespace, csv).await;
    let subs: Api<Subscription> = Api::namespaced(client.clone(), namespace);
    crate::eventually(&format!("{sub} AtLatestKnown at {csv}"), WAIT, || async {
        let status = subscription_status(&subs, sub).await?;
        if status["state"] == "AtLatestKnown" && status["installedCSV"] == csv {
            Ok(status)
        } else {
            Err(status.to_string())
        }
    })
    .await
}

/// The namespace's InstallPlans as JSON, oldest generation first.
pub async fn install_plans(client: &kube::Client, namespace: &str) -> Vec<Value> {
    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), namespace);
    let mut list: Vec<Value> = plans
        .list(&Default::default())
        .await
        .unwrap_or_else(|err| panic!("list InstallPlans: {err}"))
        .items
        .into_iter()
        .map(|p| serde_json::to_value(p).unwrap_or_default())
        .collect();
    list.sort_by_key(|p| p["spec"]["generation"].as_i64().unwrap_or_default());
    list
}

/// [`install_plans`] once there is at least one and every one is
/// `Complete`. A Subscription reaches `AtLatestKnown` (and its CSV may
/// succeed) as soon as the CSV exists; the plan is `Complete` only once all
/// its steps are, which can take one more pass (a new CRD not yet
/// Established when the CSV was created).
pub async fn install_plans_complete(client: &kube::Client, namespace: &str) -> Vec<Value> {
    crate::eventually("every InstallPlan Complete", WAIT, || async {
        let plans = install_plans(client, namespace).await;
        let phases: Vec<&Value> = plans.iter().map(|p| &p["status"]["phase"]).collect();
        if !plans.is_empty() && phases.iter().all(|phase| *phase == "Complete") {
            Ok(plans)
        } else {
            Err(format!("phases {phases:?}"))
        }
    })
    .await
}

/// The CSV names of every InstallPlan, oldest generation first.
pub async fn planned_csvs(client: &kube::Client, namespace: &str) -> Vec<Vec<String>> {
    install_plans(client, namespace)
        .await
        .iter()
        .map(|p| {
            let mut names: Vec<String> = p["spec"]["clusterServiceVersionNames"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|n| n.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            names.sort();
            names
        })
        .collect()
}

/// The names of the objects of a namespaced kind in `namespace`.
pub async fn names<K>(client: &kube::Client, namespace: &str) -> Vec<String>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    <K as kube::Resource>::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let mut names: Vec<String> = api
        .list(&Default::default())
        .await
        .unwrap_or_else(|err| panic!("list: {err}"))
        .items
        .iter()
        .filter_map(|o| o.meta().name.clone())
        .collect();
    names.sort();
    names
}

/// Points the CatalogSource `name` at another address (a new catalog
/// version, as a registry Deployment rolling to a new image would).
pub async fn point_catalog(catalogs: &Api<CatalogSource>, name: &str, address: &str) {
    catalogs
        .patch(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"address": address}})),
        )
        .await
        .unwrap_or_else(|err| panic!("patch CatalogSource {name}: {err}"));
}

/// A TCP proxy on loopback in front of `target` that holds every new
/// connection for `delay` before passing it on: a slow registry, so a test
/// can act while a pull is in flight. Stops when dropped.
#[derive(Debug)]
pub struct SlowProxy {
    addr: std::net::SocketAddr,
    connections: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl SlowProxy {
    /// Starts the proxy.
    pub async fn start(target: &str, delay: Duration) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|err| panic!("bind: {err}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|err| panic!("addr: {err}"));
        let connections = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = connections.clone();
        let target = target.to_owned();
        let task = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let target = target.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        Self {
            addr,
            connections,
            task,
        }
    }

    /// `127.0.0.1:<port>`, to use as a registry host.
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for SlowProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A registry host that accepts connections and never answers (a registry
/// that hangs, as an unreachable staging registry does behind a firewall).
/// Stops when dropped.
#[derive(Debug)]
pub struct Blackhole {
    addr: std::net::SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Blackhole {
    /// Starts it.
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|err| panic!("bind: {err}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|err| panic!("addr: {err}"));
        let task = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                held.push(stream);
            }
        });
        Self { addr, task }
    }

    /// `127.0.0.1:<port>`.
    pub fn host(&self) -> String {
        self.addr.to_string()
    }
}

impl Drop for Blackhole {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves a catalog of `bundles` (as [`serve_bundles`]) on `listener`, until
/// the returned guard is dropped.
pub async fn serve_bundles_on(
    bundles: &[(&RegistryBundle, &str)],
    listener: tokio::net::TcpListener,
) -> (tokio_util::sync::DropGuard, tempfile::TempDir) {
    let (server, dir) = serve_bundles(bundles).await;
    // Only the directory is wanted: the loopback server stops at once.
    drop(server);
    let index =
        olm_registry::CatalogIndex::build(dir.path(), &olm_registry::IndexOptions::default())
            .unwrap_or_else(|err| panic!("index: {err}"));
    let stop = CancellationToken::new();
    let stopped = stop.clone();
    tokio::spawn(async move {
        let _ = olm_registry::RegistryServer::new(index)
            .serve(listener, async move { stopped.cancelled().await })
            .await;
    });
    (stop.drop_guard(), dir)
}

/// A NATS server with JetStream that admits only OLM's services, each with
/// its own NKey and the permissions `olm_bus::auth` gives it, as the Helm
/// chart sets NATS up. The seeds are written to a private folder, one file
/// per service, as a pod would mount them.
#[derive(Debug)]
pub struct SecuredNats {
    /// The server.
    pub server: olm_testkit::nats::NatsServer,
    dir: tempfile::TempDir,
}

impl SecuredNats {
    /// Generates the keys and starts the server.
    pub fn start() -> Self {
        let keys = olm_bus::auth::generate_keys().unwrap_or_else(|err| panic!("keys: {err}"));
        let dir = tempfile::tempdir().unwrap_or_else(|err| panic!("tempdir: {err}"));
        for key in &keys {
            std::fs::write(dir.path().join(format!("{}.nk", key.service)), &key.seed)
                .unwrap_or_else(|err| panic!("writing a seed: {err}"));
        }
        let pairs: Vec<(&str, &str)> = keys
            .iter()
            .map(|k| (k.service, k.public.as_str()))
            .collect();
        let config = olm_bus::auth::server_authorization(&pairs)
            .unwrap_or_else(|err| panic!("authorization: {err}"));
        let server = olm_testkit::nats::NatsServer::start_with_config(&config)
            .unwrap_or_else(|err| panic!("nats-server: {err}"));
        Self { server, dir }
    }

    /// The client URL.
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// The folder of `<service>.nk` seed files.
    pub fn nkey_dir(&self) -> std::path::PathBuf {
        self.dir.path().to_owned()
    }

    /// The command-line flags that connect `service`'s binary.
    pub fn cli_args(&self, service: &str) -> Vec<String> {
        vec![
            "--nats-url".to_owned(),
            self.url(),
            "--nats-nkey-file".to_owned(),
            self.dir
                .path()
                .join(format!("{service}.nk"))
                .display()
                .to_string(),
        ]
    }
}
