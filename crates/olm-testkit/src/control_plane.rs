//! One real Kubernetes control plane per test binary: etcd, kube-apiserver,
//! kube-controller-manager (garbage collection, namespace deletion,
//! Deployments to ReplicaSets to Pods), kube-scheduler, and kwok with one fake
//! node so that pods are "running" and Deployments become Available without a
//! kubelet.

use std::{
    path::{Path, PathBuf},
    sync::OnceLock,
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::{Namespace, Node, ServiceAccount};
use kube::{
    Api, Client, Config,
    api::{DeleteParams, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
};

use crate::{
    Error, assets, pki,
    process::{Supervised, free_port, wait_for_port},
};

/// How long etcd may take to accept connections.
const ETCD_START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long kube-apiserver may take to report ready.
const APISERVER_READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the controllers and kwok may take to make the fake node Ready and
/// the default ServiceAccount appear.
const WORKLOADS_READY_TIMEOUT: Duration = Duration::from_secs(60);
/// Set this variable to keep the control plane's folder (state and component
/// logs) after the test process exits.
pub(crate) const KEEP_ENV: &str = "OLM_TESTKIT_KEEP";
/// Set this variable (to anything) to have kube-apiserver write an audit log
/// of every request, metadata only, to `audit.log` in the control plane's
/// folder: benchmarks count API requests per client with it
/// ([`crate::audit`]).
pub const AUDIT_ENV: &str = "OLM_TESTKIT_AUDIT";
/// The audit policy: metadata only, one event per request when it completes;
/// a watch is logged when its response starts and when it ends
/// ([`crate::audit::parse_event`] counts it once).
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
";
/// How long a newly applied CRD may take to become Established.
pub const CRD_ESTABLISHED_TIMEOUT: Duration = Duration::from_secs(60);
/// Where the control plane keeps its state when the folder exists.
const SHARED_MEMORY_DIR: &str = "/dev/shm";
/// The audit log's file name in the control plane's folder.
const AUDIT_LOG: &str = "audit.log";
/// How long the tokens of [`ControlPlane::service_account_kubeconfig`] are
/// valid: longer than any test.
pub const SERVICE_ACCOUNT_TOKEN_LIFETIME: Duration = Duration::from_secs(600);
/// The fake node kwok manages.
pub const KWOK_NODE_NAME: &str = "kwok-node-0";
/// The annotation that hands a node to kwok.
const KWOK_NODE_ANNOTATION: &str = "kwok.x-k8s.io/node";

/// How a control plane is started.
#[derive(Debug, Clone, Default)]
pub struct ControlPlaneOptions {
    /// Serve the API on every interface and advertise this address, so that
    /// pods reach it through the `kubernetes` Service (kube-proxy routes its
    /// ClusterIP here). `None`: loopback only.
    pub advertise_address: Option<String>,
    /// Taint kwok's fake node (`kwok.x-k8s.io/node=fake:NoSchedule`) so that
    /// only pods tolerating it land there, and everything else goes to a real
    /// node.
    pub taint_fake_node: bool,
    /// Write an audit log of every request (as [`AUDIT_ENV`] does), for
    /// tests that check who was refused what.
    pub audit: bool,
}

impl ControlPlaneOptions {
    /// What a [`crate::node::RealNode`] needs: the API server on the node's
    /// address, and kwok's node kept for pods that ask for it.
    pub fn for_real_node() -> Self {
        ControlPlaneOptions {
            advertise_address: Some(crate::node::NODE_IP.to_owned()),
            taint_fake_node: true,
            audit: false,
        }
    }
}

/// The taint [`ControlPlaneOptions::taint_fake_node`] puts on kwok's node.
pub const FAKE_NODE_TAINT: &str = KWOK_NODE_ANNOTATION;

/// How long each part took to become ready, for reporting.
#[derive(Debug, Clone, Copy, Default)]
pub struct ControlPlaneTimings {
    /// From start to etcd accepting connections.
    pub etcd: Duration,
    /// From start to kube-apiserver's `/readyz` answering 200.
    pub apiserver: Duration,
    /// From start to the fake node Ready and the default ServiceAccount present.
    pub total: Duration,
}

/// A running control plane. The shared one ([`control_plane`]) lives until the
/// test binary exits; one from [`ControlPlane::start`] stops when dropped.
#[derive(Debug)]
pub struct ControlPlane {
    // Field order is drop order: clients of the API server stop first.
    _kwok: Supervised,
    _scheduler: Supervised,
    _controller_manager: Supervised,
    _apiserver: Supervised,
    _etcd: Supervised,
    dir: PathBuf,
    _tempdir: Option<tempfile::TempDir>,
    kubeconfig: PathBuf,
    server_url: String,
    timings: ControlPlaneTimings,
}

static SHARED: OnceLock<ControlPlane> = OnceLock::new();

/// The control plane shared by every test of this test binary, started on
/// first use. Panics, with the reason and what to do, when it cannot start.
pub fn control_plane() -> &'static ControlPlane {
    SHARED.get_or_init(|| match ControlPlane::start() {
        Ok(plane) => plane,
        Err(err) => panic!("cannot start the test control plane: {}", error_chain(&err)),
    })
}

/// Makes `plane` the one [`control_plane`] returns, for a test binary whose
/// control plane needs options (a real node). Fails, stopping `plane`, when
/// the shared one was already started.
pub fn set_control_plane(plane: ControlPlane) -> Result<&'static ControlPlane, Error> {
    SHARED.set(plane).map_err(|_| {
        Error::Unsupported("the shared control plane was started before this one".to_owned())
    })?;
    Ok(control_plane())
}

/// An error and its sources, one line.
pub(crate) fn error_chain(err: &dyn std::error::Error) -> String {
    let mut message = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

impl ControlPlane {
    /// Starts a control plane in a new temporary folder, removed when the
    /// control plane is dropped (or, for the shared one, when the test process
    /// exits).
    pub fn start() -> Result<ControlPlane, Error> {
        ControlPlane::start_with(&ControlPlaneOptions::default())
    }

    /// [`ControlPlane::start`] with options.
    pub fn start_with(options: &ControlPlaneOptions) -> Result<ControlPlane, Error> {
        // etcd fsyncs every write; in memory (/dev/shm) that costs nothing,
        // and tests need no durability.
        let base = Path::new(SHARED_MEMORY_DIR);
        let base = if base.is_dir() {
            base.to_owned()
        } else {
            std::env::temp_dir()
        };
        let tempdir = tempfile::Builder::new()
            .prefix("olm-control-plane-")
            .tempdir_in(&base)
            .map_err(|source| Error::io(&base, source))?;
        let dir = tempdir.path().to_owned();
        if std::env::var_os(KEEP_ENV).is_some() {
            // Kept for debugging: state and logs outlive the test process.
            let dir = tempdir.keep();
            eprintln!(
                "olm-testkit: keeping the control plane folder {}",
                dir.display()
            );
            return ControlPlane::start_in_with(&dir, options);
        }
        janitor(&dir)?;
        let mut plane = ControlPlane::start_in_with(&dir, options)?;
        plane._tempdir = Some(tempdir);
        Ok(plane)
    }

    /// Starts a control plane whose state and kubeconfig live in `dir`, which
    /// outlives it (for `cargo xtask dev`).
    pub fn start_in(dir: &Path) -> Result<ControlPlane, Error> {
        ControlPlane::start_in_with(dir, &ControlPlaneOptions::default())
    }

    /// [`ControlPlane::start_in`] with options.
    pub fn start_in_with(dir: &Path, options: &ControlPlaneOptions) -> Result<ControlPlane, Error> {
        // Start-up blocks on a runtime of its own, which must not be nested in
        // the caller's (tests call this from inside `#[tokio::test]`).
        let dir = dir.to_owned();
        let options = options.clone();
        std::thread::spawn(move || ControlPlane::start_blocking(&dir, &options))
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }

    fn start_blocking(dir: &Path, options: &ControlPlaneOptions) -> Result<ControlPlane, Error> {
        let started = Instant::now();
        let dir = dir.to_owned();
        for sub in [
            "pki",
            "etcd",
            "logs",
            "apiserver",
            "controller-manager",
            "scheduler",
        ] {
            let path = dir.join(sub);
            std::fs::create_dir_all(&path).map_err(|source| Error::io(&path, source))?;
        }
        let pki = pki::generate(&dir.join("pki"))?;
        let logs = dir.join("logs");

        let etcd_port = free_port()?;
        let etcd_peer_port = free_port()?;
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let peer_url = format!("http://127.0.0.1:{etcd_peer_port}");
        let mut etcd = Supervised::spawn(
            "etcd",
            &assets::find_pinned("etcd")?,
            &[
                format!("--data-dir={}", dir.join("etcd").display()),
                format!("--listen-client-urls={etcd_url}"),
                format!("--advertise-client-urls={etcd_url}"),
                format!("--listen-peer-urls={peer_url}"),
                format!("--initial-advertise-peer-urls={peer_url}"),
                format!("--initial-cluster=default={peer_url}"),
                "--name=default".to_owned(),
                // Tests need no durability, and fsync dominates etcd's latency.
                "--unsafe-no-fsync=true".to_owned(),
                "--logger=zap".to_owned(),
                "--log-level=warn".to_owned(),
            ],
            &logs.join("etcd.log"),
            &[("ETCD_UNSUPPORTED_ARCH", std::env::consts::ARCH)],
        )?;
        wait_for_port(&mut etcd, etcd_port, ETCD_START_TIMEOUT)?;
        let etcd_ready = started.elapsed();

        let apiserver_port = free_port()?;
        let server_url = format!("https://127.0.0.1:{apiserver_port}");
        let mut apiserver = Supervised::spawn(
            "kube-apiserver",
            &assets::find_pinned("kube-apiserver")?,
            &{
                let mut args = apiserver_args(&dir, &pki, &etcd_url, apiserver_port);
                if let Some(address) = &options.advertise_address {
                    args.retain(|a| {
                        !a.starts_with("--bind-address=") && !a.starts_with("--advertise-address=")
                    });
                    args.push("--bind-address=0.0.0.0".to_owned());
                    args.push(format!("--advertise-address={address}"));
                }
                if options.audit || std::env::var_os(AUDIT_ENV).is_some() {
                    let policy = dir.join("apiserver").join("audit-policy.yaml");
                    std::fs::write(&policy, AUDIT_POLICY)
                        .map_err(|source| Error::io(&policy, source))?;
                    args.push(format!("--audit-policy-file={}", policy.display()));
                    args.push(format!(
                        "--audit-log-path={}",
                        dir.join(AUDIT_LOG).display()
                    ));
                    args.push("--audit-log-format=json".to_owned());
                    args.push("--audit-log-mode=blocking".to_owned());
                }
                args
            },
            &logs.join("kube-apiserver.log"),
            &[],
        )?;
        let kubeconfig = write_kubeconfig(&dir, &pki, &server_url)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|source| Error::io("tokio runtime", source))?;
        runtime.block_on(wait_for_readyz(&mut apiserver, &kubeconfig))?;
        let apiserver_ready = started.elapsed();

        let controller_manager = Supervised::spawn(
            "kube-controller-manager",
            &assets::find_pinned("kube-controller-manager")?,
            &controller_manager_args(&dir, &pki, &kubeconfig)?,
            &logs.join("kube-controller-manager.log"),
            &[],
        )?;
        let scheduler = Supervised::spawn(
            "kube-scheduler",
            &assets::find_pinned("kube-scheduler")?,
            &scheduler_args(&dir, &kubeconfig)?,
            &logs.join("kube-scheduler.log"),
            &[],
        )?;
        let kwok = Supervised::spawn(
            "kwok",
            &assets::find_pinned("kwok")?,
            &[
                format!("--kubeconfig={}", kubeconfig.display()),
                "--manage-all-nodes=false".to_owned(),
                format!("--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake"),
                "--cidr=10.0.0.1/24".to_owned(),
                "--node-ip=10.0.0.1".to_owned(),
                "--node-lease-duration-seconds=40".to_owned(),
                format!("--server-address=127.0.0.1:{}", free_port()?),
            ],
            &logs.join("kwok.log"),
            &[],
        )?;
        let mut plane = ControlPlane {
            _kwok: kwok,
            _scheduler: scheduler,
            _controller_manager: controller_manager,
            _apiserver: apiserver,
            _etcd: etcd,
            dir,
            _tempdir: None,
            kubeconfig,
            server_url,
            timings: ControlPlaneTimings {
                etcd: etcd_ready,
                apiserver: apiserver_ready,
                total: Duration::ZERO,
            },
        };
        runtime.block_on(plane.wait_for_workloads(options.taint_fake_node))?;
        plane.timings.total = started.elapsed();
        tracing::info!(timings = ?plane.timings, dir = %plane.dir.display(), "test control plane ready");
        Ok(plane)
    }

    /// A new admin client. Create one per test: a client belongs to the tokio
    /// runtime it was created on.
    pub async fn client(&self) -> Client {
        let config = self
            .config()
            .await
            .unwrap_or_else(|err| panic!("test kubeconfig unusable: {}", error_chain(&err)));
        Client::try_from(config)
            .unwrap_or_else(|err| panic!("cannot build a kube client: {}", error_chain(&err)))
    }

    /// A kubeconfig that acts as the ServiceAccount `namespace/account`:
    /// the admin's, with a token of that account (valid for
    /// [`SERVICE_ACCOUNT_TOKEN_LIFETIME`]) in place of the admin's
    /// credentials, written into `dir`. For tests that prove a set of RBAC
    /// rules is enough, or that a missing one is reported.
    pub async fn service_account_kubeconfig(
        &self,
        namespace: &str,
        account: &str,
        dir: &Path,
    ) -> Result<PathBuf, Error> {
        use k8s_openapi::api::{
            authentication::v1::{TokenRequest, TokenRequestSpec},
            core::v1::ServiceAccount,
        };
        let accounts: kube::Api<ServiceAccount> =
            kube::Api::namespaced(self.client().await, namespace);
        let request = TokenRequest {
            spec: TokenRequestSpec {
                audiences: Vec::new(),
                expiration_seconds: Some(SERVICE_ACCOUNT_TOKEN_LIFETIME.as_secs() as i64),
                ..TokenRequestSpec::default()
            },
            ..TokenRequest::default()
        };
        let token = accounts
            .create_token_request(account, &kube::api::PostParams::default(), &request)
            .await?
            .status
            .map(|status| status.token)
            .unwrap_or_default();
        let mut kubeconfig = Kubeconfig::read_from(&self.kubeconfig)?;
        for user in &mut kubeconfig.auth_infos {
            user.auth_info = Some(kube::config::AuthInfo {
                token: Some(token.clone().into()),
                ..kube::config::AuthInfo::default()
            });
        }
        let path = dir.join(format!("{namespace}-{account}.kubeconfig"));
        let text = serde_yaml_ng::to_string(&kubeconfig).map_err(|source| {
            Error::io(
                &path,
                std::io::Error::new(std::io::ErrorKind::InvalidData, source.to_string()),
            )
        })?;
        std::fs::write(&path, text).map_err(|source| Error::io(&path, source))?;
        Ok(path)
    }

    /// Creates the Service `namespace/name` with one TCP `port` and no
    /// selector, and returns the ClusterIP the API server gave it: a
    /// registry Service as `--service-lookup cluster-ip` finds it.
    pub async fn create_service(
        &self,
        namespace: &str,
        name: &str,
        port: i32,
    ) -> Result<String, Error> {
        use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
        let services: kube::Api<Service> = kube::Api::namespaced(self.client().await, namespace);
        let service = Service {
            metadata: kube::api::ObjectMeta {
                name: Some(name.to_owned()),
                ..kube::api::ObjectMeta::default()
            },
            spec: Some(ServiceSpec {
                ports: Some(vec![ServicePort {
                    port,
                    ..ServicePort::default()
                }]),
                ..ServiceSpec::default()
            }),
            ..Service::default()
        };
        let created = services
            .create(&kube::api::PostParams::default(), &service)
            .await?;
        Ok(created
            .spec
            .and_then(|spec| spec.cluster_ip)
            .unwrap_or_default())
    }

    /// A client from the kubeconfig at `path` (one of
    /// [`ControlPlane::service_account_kubeconfig`], say).
    pub async fn client_from(path: &Path) -> Result<Client, Error> {
        let config = Config::from_custom_kubeconfig(
            Kubeconfig::read_from(path)?,
            &KubeConfigOptions::default(),
        )
        .await?;
        Ok(Client::try_from(config)?)
    }

    /// The admin client configuration.
    pub async fn config(&self) -> Result<Config, Error> {
        let kubeconfig = Kubeconfig::read_from(&self.kubeconfig)?;
        Ok(Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?)
    }

    /// The admin kubeconfig file.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// The API server's URL.
    pub fn server_url(&self) -> &str {
        &self.server_url
    }

    /// The folder holding the control plane's state and component logs
    /// (`logs/*.log`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The audit log kube-apiserver writes when [`AUDIT_ENV`] was set at
    /// start-up; `None` otherwise.
    pub fn audit_log(&self) -> Option<PathBuf> {
        let path = self.dir.join(AUDIT_LOG);
        path.is_file().then_some(path)
    }

    /// How long start-up took.
    pub fn timings(&self) -> ControlPlaneTimings {
        self.timings
    }

    /// A `kubectl` command already pointed at this control plane.
    pub fn kubectl(&self) -> std::process::Command {
        let binary = assets::find_pinned("kubectl")
            .or_else(|_| assets::find("kubectl"))
            .unwrap_or_else(|err| panic!("{err}"));
        let mut command = std::process::Command::new(binary);
        command.arg(format!("--kubeconfig={}", self.kubeconfig.display()));
        command
    }

    /// Applies every CRD manifest in `dir` (server-side, as a user would with
    /// `kubectl apply`) and waits until each one is Established. Panics with
    /// kubectl's own words when either step fails.
    pub fn install_crds(&self, dir: &Path) {
        let dir = dir.display().to_string();
        self.kubectl_ok(&["apply", "--server-side", "-f", &dir]);
        let names = self.kubectl_ok(&["get", "-f", &dir, "-o", "name"]);
        for name in names.lines().filter_map(|line| line.split_once('/')) {
            self.wait_crd_established(name.1);
        }
    }

    /// Waits until the CRD `name` is Established; panics after
    /// [`CRD_ESTABLISHED_TIMEOUT`] with the last status seen. (Polls:
    /// `kubectl wait` fails outright while a new CRD has no conditions yet.)
    pub fn wait_crd_established(&self, name: &str) {
        let started = Instant::now();
        loop {
            let crd = self.kubectl_ok(&["get", &format!("crd/{name}"), "-o", "json"]);
            let crd: serde_json::Value = serde_json::from_str(&crd)
                .unwrap_or_else(|err| panic!("kubectl printed no JSON for crd/{name}: {err}"));
            let conditions = &crd["status"]["conditions"];
            let established = conditions.as_array().is_some_and(|conditions| {
                conditions
                    .iter()
                    .any(|c| c["type"] == "Established" && c["status"] == "True")
            });
            if established {
                return;
            }
            assert!(
                started.elapsed() < CRD_ESTABLISHED_TIMEOUT,
                "CRD {name} not Established after {CRD_ESTABLISHED_TIMEOUT:?} (conditions {conditions})"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn kubectl_ok(&self, args: &[&str]) -> String {
        let output = self
            .kubectl()
            .args(args)
            .output()
            .unwrap_or_else(|err| panic!("cannot run kubectl {args:?}: {err}"));
        assert!(
            output.status.success(),
            "kubectl {args:?} failed: {}{}",
            String::from_utf8_lossy(&output.stderr),
            String::from_utf8_lossy(&output.stdout)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Creates a namespace named `<prefix>-<random>` for one test; it is
    /// deleted when the returned guard is dropped, even if the test panics.
    pub async fn namespace(&self, prefix: &str) -> TestNamespace {
        let name = format!("{}-{}", prefix, random_suffix());
        let client = self.client().await;
        let namespaces: Api<Namespace> = Api::all(client);
        let namespace: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": { "name": name, "labels": { "olm-testkit/test-namespace": "true" } }
        }))
        .unwrap_or_else(|err| panic!("namespace object: {err}"));
        namespaces
            .create(&PostParams::default(), &namespace)
            .await
            .unwrap_or_else(|err| panic!("cannot create test namespace {name}: {err}"));
        TestNamespace {
            name,
            kubeconfig: self.kubeconfig.clone(),
        }
    }

    async fn wait_for_workloads(&self, taint_fake_node: bool) -> Result<(), Error> {
        let client = Client::try_from(self.config().await?)?;
        let nodes: Api<Node> = Api::all(client.clone());
        let node: Node = serde_json::from_value(fake_node(taint_fake_node))
            .unwrap_or_else(|err| panic!("fake node object: {err}"));
        match nodes.create(&PostParams::default(), &node).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(err) => return Err(err.into()),
        }
        let service_accounts: Api<ServiceAccount> = Api::namespaced(client, "default");
        let started = Instant::now();
        let mut last = String::from("not checked yet");
        while started.elapsed() < WORKLOADS_READY_TIMEOUT {
            // Schedulable means Ready and the not-ready taint lifted by the
            // node lifecycle controller.
            let node_ready = nodes.get(KWOK_NODE_NAME).await.ok().is_some_and(|node| {
                let untainted = node
                    .spec
                    .as_ref()
                    .and_then(|spec| spec.taints.as_ref())
                    .is_none_or(|taints| taints.iter().all(|t| t.key == FAKE_NODE_TAINT));
                let ready = node
                    .status
                    .and_then(|status| status.conditions)
                    .unwrap_or_default()
                    .iter()
                    .any(|condition| condition.type_ == "Ready" && condition.status == "True");
                ready && untainted
            });
            let account = service_accounts.get_opt("default").await?.is_some();
            if node_ready && account {
                return Ok(());
            }
            last = format!("fake node Ready: {node_ready}, default ServiceAccount: {account}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(Error::NotReady {
            name: "kube-controller-manager and kwok".to_owned(),
            waited_secs: WORKLOADS_READY_TIMEOUT.as_secs(),
            last_error: last,
            log: self.dir.join("logs"),
        })
    }
}

/// A namespace that exists for one test.
#[derive(Debug)]
pub struct TestNamespace {
    name: String,
    kubeconfig: PathBuf,
}

impl TestNamespace {
    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        // The test's runtime may be gone (or be the one panicking), so the
        // deletion runs on a runtime of its own.
        let name = self.name.clone();
        let kubeconfig = self.kubeconfig.clone();
        let deleted = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime.block_on(async move {
                let kubeconfig = Kubeconfig::read_from(&kubeconfig).ok()?;
                let config =
                    Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                        .await
                        .ok()?;
                let client = Client::try_from(config).ok()?;
                Api::<Namespace>::all(client)
                    .delete(&name, &DeleteParams::background())
                    .await
                    .ok()
            })
        })
        .join();
        if !matches!(deleted, Ok(Some(_))) {
            eprintln!("olm-testkit: could not delete test namespace {}", self.name);
        }
    }
}

fn random_suffix() -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    (0..6)
        .map(|_| char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]))
        .collect()
}

fn fake_node(tainted: bool) -> serde_json::Value {
    let taints = if tainted {
        serde_json::json!([{ "key": FAKE_NODE_TAINT, "value": "fake", "effect": "NoSchedule" }])
    } else {
        serde_json::json!([])
    };
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": KWOK_NODE_NAME,
            "annotations": { KWOK_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0" },
            "labels": {
                "type": "kwok",
                "kubernetes.io/hostname": KWOK_NODE_NAME,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/role": "agent",
            }
        },
        "spec": { "taints": taints },
        "status": {
            "allocatable": { "cpu": "64", "memory": "256Gi", "pods": "500" },
            "capacity": { "cpu": "64", "memory": "256Gi", "pods": "500" },
        }
    })
}

/// Removes `dir` once the test process has exited (the shared control plane is
/// a static, which Rust never drops).
fn janitor(dir: &Path) -> Result<(), Error> {
    let script = r#"read -r _ ; sleep 3 ; rm -rf "$1""#;
    let child = std::process::Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg("olm-testkit-janitor")
        .arg(dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|source| Error::Spawn {
            name: "janitor".to_owned(),
            source,
        })?;
    // The janitor's standard input must stay open for as long as this process
    // lives: its end-of-file is the signal. Leaking the handle does exactly that.
    std::mem::forget(child);
    Ok(())
}

fn apiserver_args(dir: &Path, pki: &pki::Pki, etcd_url: &str, port: u16) -> Vec<String> {
    let path = |p: &PathBuf| p.display().to_string();
    vec![
        format!("--etcd-servers={etcd_url}"),
        "--bind-address=127.0.0.1".to_owned(),
        "--advertise-address=127.0.0.1".to_owned(),
        format!("--secure-port={port}"),
        format!("--cert-dir={}", dir.join("apiserver").display()),
        format!("--tls-cert-file={}", path(&pki.serving_cert)),
        format!("--tls-private-key-file={}", path(&pki.serving_key)),
        format!("--client-ca-file={}", path(&pki.ca_cert)),
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local".to_owned(),
        format!(
            "--service-account-key-file={}",
            path(&pki.service_account_public_key)
        ),
        format!(
            "--service-account-signing-key-file={}",
            path(&pki.service_account_key)
        ),
        "--service-cluster-ip-range=10.0.0.0/24".to_owned(),
        "--authorization-mode=RBAC".to_owned(),
        "--allow-privileged=true".to_owned(),
        // Aggregated API servers (packageserver) are reached through the
        // front proxy, with request headers only trusted from its client cert.
        format!(
            "--requestheader-client-ca-file={}",
            path(&pki.front_proxy_ca_cert)
        ),
        format!(
            "--requestheader-allowed-names={}",
            pki::FRONT_PROXY_CLIENT_NAME
        ),
        "--requestheader-username-headers=X-Remote-User".to_owned(),
        "--requestheader-group-headers=X-Remote-Group".to_owned(),
        "--requestheader-extra-headers-prefix=X-Remote-Extra-".to_owned(),
        format!(
            "--proxy-client-cert-file={}",
            path(&pki.front_proxy_client_cert)
        ),
        format!(
            "--proxy-client-key-file={}",
            path(&pki.front_proxy_client_key)
        ),
        // There is no kube-proxy: the aggregator must dial endpoints directly.
        "--enable-aggregator-routing=true".to_owned(),
        // A real node is reached by its address (its name resolves nowhere),
        // with the admin identity, for logs and exec.
        "--kubelet-preferred-address-types=InternalIP,Hostname".to_owned(),
        format!("--kubelet-client-certificate={}", path(&pki.admin_cert)),
        format!("--kubelet-client-key={}", path(&pki.admin_key)),
        "--profiling=false".to_owned(),
        "--v=1".to_owned(),
    ]
}

fn controller_manager_args(
    dir: &Path,
    pki: &pki::Pki,
    kubeconfig: &Path,
) -> Result<Vec<String>, Error> {
    let kubeconfig = kubeconfig.display();
    Ok(vec![
        format!("--kubeconfig={kubeconfig}"),
        format!("--authentication-kubeconfig={kubeconfig}"),
        format!("--authorization-kubeconfig={kubeconfig}"),
        "--bind-address=127.0.0.1".to_owned(),
        format!("--secure-port={}", free_port()?),
        format!("--cert-dir={}", dir.join("controller-manager").display()),
        "--leader-elect=false".to_owned(),
        format!(
            "--service-account-private-key-file={}",
            pki.service_account_key.display()
        ),
        format!("--root-ca-file={}", pki.ca_cert.display()),
        "--use-service-account-credentials=false".to_owned(),
        // Controllers that need a cloud or real volumes are left out. The node
        // lifecycle controller stays: it lifts the not-ready taint from kwok's node.
        "--controllers=*,-nodeipam,-cloud-node-lifecycle,-service,-route,-persistentvolume-binder,-attachdetach,-persistentvolume-expander".to_owned(),
        "--v=1".to_owned(),
    ])
}

fn scheduler_args(dir: &Path, kubeconfig: &Path) -> Result<Vec<String>, Error> {
    let kubeconfig = kubeconfig.display();
    Ok(vec![
        format!("--kubeconfig={kubeconfig}"),
        format!("--authentication-kubeconfig={kubeconfig}"),
        format!("--authorization-kubeconfig={kubeconfig}"),
        "--bind-address=127.0.0.1".to_owned(),
        format!("--secure-port={}", free_port()?),
        format!("--cert-dir={}", dir.join("scheduler").display()),
        "--leader-elect=false".to_owned(),
        "--v=1".to_owned(),
    ])
}

fn write_kubeconfig(dir: &Path, pki: &pki::Pki, server_url: &str) -> Result<PathBuf, Error> {
    let admin_cert = &pki.admin_cert;
    let admin_key = &pki.admin_key;
    let kubeconfig = format!(
        "apiVersion: v1
kind: Config
clusters:
- name: olm-test
  cluster:
    server: {server_url}
    certificate-authority: {ca}
users:
- name: olm-test-admin
  user:
    client-certificate: {cert}
    client-key: {key}
contexts:
- name: olm-test
  context:
    cluster: olm-test
    user: olm-test-admin
    namespace: default
current-context: olm-test
",
        ca = pki.ca_cert.display(),
        cert = admin_cert.display(),
        key = admin_key.display(),
    );
    let path = dir.join("kubeconfig");
    std::fs::write(&path, kubeconfig).map_err(|source| Error::io(&path, source))?;
    Ok(path)
}

async fn wait_for_readyz(apiserver: &mut Supervised, kubeconfig: &Path) -> Result<(), Error> {
    let started = Instant::now();
    let kubeconfig = Kubeconfig::read_from(kubeconfig)?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    let client = Client::try_from(config)?;
    let mut last_error = String::from("never answered");
    while started.elapsed() < APISERVER_READY_TIMEOUT {
        if let Some(status) = apiserver.exited() {
            return Err(apiserver.exited_error(status));
        }
        let request = http::Request::get("/readyz")
            .body(Vec::new())
            .unwrap_or_else(|err| panic!("readyz request: {err}"));
        match client.request_text(request).await {
            Ok(body) if body.trim() == "ok" => return Ok(()),
            Ok(body) => last_error = body,
            Err(err) => last_error = error_chain(&err),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(Error::NotReady {
        name: apiserver.name().to_owned(),
        waited_secs: APISERVER_READY_TIMEOUT.as_secs(),
        last_error,
        log: apiserver.log().to_owned(),
    })
}
