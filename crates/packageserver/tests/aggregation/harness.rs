//! A packageserver deployment for tests, as close to a cluster's as a
//! kubelet-less control plane allows: two replicas of the real binary, each
//! in its own network namespace joined to the host by a veth pair (the
//! aggregator refuses loopback endpoints), behind a selector-less Service
//! whose Endpoints the harness manages like a kubelet and the endpoints
//! controller would; least-privilege RBAC and a ServiceAccount token; a real
//! registry server over a small file-based catalog; and a TCP relay so the
//! replicas reach the loopback-only API server.
//!
//! Everything outside the test process (network namespaces, veth pairs,
//! packageserver processes) is owned by guardian shells that clean up when
//! the test process exits, however it exits.
//!
//! The same deployment runs upstream OLM's packageserver instead of ours
//! ([`Server::Upstream`], for the side-by-side bench): it serves a
//! self-signed certificate and does not manage its APIService, so the
//! harness creates the APIService (with `insecureSkipTLSVerify`, as a
//! cluster without OLM's certificate handling would), probes readiness on
//! the secure port, and runs it with the in-cluster configuration of a pod
//! ([`IN_POD`]).

use std::{
    io::Write as _,
    net::{Ipv4Addr, SocketAddr},
    path::{Path, PathBuf},
    process::{Child, ChildStdin, Command, Stdio},
    sync::{Mutex, OnceLock},
    time::{Duration, Instant},
};

use olm_registry::{CatalogIndex, IndexOptions, RegistryServer};
use serde_json::json;
use tokio::net::{TcpListener, TcpStream};

/// Namespace of packageserver, its Service, Secret and ServiceAccount.
pub(crate) const SERVER_NAMESPACE: &str = "ps-system";
/// The global catalog namespace packageserver is told about.
pub(crate) const GLOBAL_NAMESPACE: &str = "ps-global";
/// A namespace with a catalog of its own.
pub(crate) const TEAM_NAMESPACE: &str = "ps-team";
/// The Service in front of the replicas.
pub(crate) const SERVICE: &str = "packageserver-service";
/// The certificate Secret.
pub(crate) const SECRET: &str = "packageserver-service-cert";
/// The APIService.
pub(crate) const APISERVICE: &str = "v1.packages.operators.coreos.com";
/// The global CatalogSource.
pub(crate) const GLOBAL_CATALOG: &str = "fixture-catalog";
/// Its display name.
pub(crate) const GLOBAL_CATALOG_DISPLAY: &str = "Fixture Catalog";
/// The team's CatalogSource.
pub(crate) const TEAM_CATALOG: &str = "team-catalog";
/// The port packageserver serves on.
pub(crate) const SECURE_PORT: u16 = 5443;
/// The admin (metrics, health) port of each replica.
pub(crate) const ADMIN_PORT: u16 = 8080;

/// Certificate lifetimes of the test deployment: short enough that a soak
/// sees many CA rotations, long enough for the overlap to cover the
/// aggregator's and the other replica's reaction time.
pub(crate) const CA_LIFETIME: &str = "20s";
/// See [`CA_LIFETIME`].
pub(crate) const SERVING_LIFETIME: &str = "8s";
/// See [`CA_LIFETIME`].
pub(crate) const CA_RENEW_BEFORE: &str = "8s";
/// See [`CA_LIFETIME`].
pub(crate) const CERT_OVERLAP: &str = "2s";
/// See [`CA_LIFETIME`].
pub(crate) const RENEW_FRACTION: &str = "0.5";

/// A catalog of one-bundle packages named `packages`, each in channel
/// `stable`, written as `dir/catalog/index.json`.
pub(crate) fn write_simple_catalog(dir: &Path, packages: &[&str]) {
    let mut text = String::new();
    for package in packages {
        let name = format!("{package}.v0.1.0");
        let csv = json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "ClusterServiceVersion",
            "metadata": {"name": name},
            "spec": {"displayName": package, "version": "0.1.0",
                     "provider": {"name": "Bus Works"},
                     "installModes": [{"type": "AllNamespaces", "supported": true}],
                     "install": {"strategy": "deployment", "spec": {"deployments": []}}},
        });
        for doc in [
            json!({"schema": "olm.package", "name": package, "defaultChannel": "stable"}),
            json!({"schema": "olm.channel", "package": package, "name": "stable", "entries": [{"name": name}]}),
            json!({"schema": "olm.bundle", "package": package, "name": name,
            "image": format!("registry.example/{package}-bundle:v0.1.0"),
            "properties": [
                {"type": "olm.package", "value": {"packageName": package, "version": "0.1.0"}},
                {"type": "olm.bundle.object", "value": {"data": base64::Engine::encode(&base64::engine::general_purpose::STANDARD, csv.to_string())}},
            ]}),
        ] {
            text.push_str(&format!("{doc}\n"));
        }
    }
    std::fs::create_dir_all(dir.join("catalog")).unwrap();
    std::fs::write(dir.join("catalog/index.json"), text).unwrap();
}

/// Serves the catalog written in `dir` on `host`, from the caller's runtime.
pub(crate) async fn serve_registry(host: Ipv4Addr, dir: &Path) -> SocketAddr {
    let index = CatalogIndex::build(dir.join("catalog"), &IndexOptions::default()).unwrap();
    let listener = TcpListener::bind((host, 0)).await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(RegistryServer::new(index).serve(listener, std::future::pending()));
    address
}

/// A TCP relay on `host` whose target can be switched: new connections go
/// to the target of the moment (existing ones stay where they are).
pub(crate) async fn switchable_relay(
    host: Ipv4Addr,
    target: std::sync::Arc<Mutex<SocketAddr>>,
) -> SocketAddr {
    let listener = TcpListener::bind((host, 0)).await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut inbound, _)) = listener.accept().await else {
                continue;
            };
            let to = *target.lock().unwrap();
            tokio::spawn(async move {
                if let Ok(mut outbound) = TcpStream::connect(to).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    address
}

/// The catalog the registry serves: two packages, one with an icon and two
/// channels, one deprecated bundle.
fn write_catalog(dir: &Path) {
    let csv = |name: &str, display: &str, icon: bool| {
        let icon = if icon {
            json!([{"base64data": "PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciLz4=", "mediatype": "image/svg+xml"}])
        } else {
            json!([])
        };
        json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "ClusterServiceVersion",
            "metadata": {"name": name, "annotations": {"capabilities": "Basic Install"}},
            "spec": {
                "displayName": display,
                "version": name.rsplit_once(".v").map_or("0.0.1", |(_, v)| v),
                "provider": {"name": "Gizmo Works", "url": "https://gizmo.example"},
                "icon": icon,
                "installModes": [{"type": "AllNamespaces", "supported": true}],
                "install": {"strategy": "deployment", "spec": {"deployments": []}},
            }
        })
    };
    let bundle = |pkg: &str,
                  name: &str,
                  version: &str,
                  csv: serde_json::Value,
                  deprecated: bool| {
        let mut properties = vec![
            json!({"type": "olm.package", "value": {"packageName": pkg, "version": version}}),
            json!({"type": "olm.bundle.object", "value": {"data": base64::Engine::encode(&base64::engine::general_purpose::STANDARD, csv.to_string())}}),
        ];
        if deprecated {
            properties.push(json!({"type": "olm.deprecated", "value": {}}));
        }
        json!({"schema": "olm.bundle", "package": pkg, "name": name,
               "image": format!("registry.example/{pkg}-bundle:v{version}"), "properties": properties})
    };
    let docs = [
        json!({"schema": "olm.package", "name": "gizmo-operator", "defaultChannel": "stable"}),
        json!({"schema": "olm.channel", "package": "gizmo-operator", "name": "stable", "entries": [
            {"name": "gizmo-operator.v1.0.0"}, {"name": "gizmo-operator.v1.1.0", "replaces": "gizmo-operator.v1.0.0"}]}),
        json!({"schema": "olm.channel", "package": "gizmo-operator", "name": "fast", "entries": [
            {"name": "gizmo-operator.v1.1.0"}]}),
        bundle(
            "gizmo-operator",
            "gizmo-operator.v1.0.0",
            "1.0.0",
            csv("gizmo-operator.v1.0.0", "Gizmo", true),
            true,
        ),
        bundle(
            "gizmo-operator",
            "gizmo-operator.v1.1.0",
            "1.1.0",
            csv("gizmo-operator.v1.1.0", "Gizmo", true),
            false,
        ),
        json!({"schema": "olm.package", "name": "sprocket-operator", "defaultChannel": "alpha"}),
        json!({"schema": "olm.channel", "package": "sprocket-operator", "name": "alpha", "entries": [
            {"name": "sprocket-operator.v0.1.0"}]}),
        bundle(
            "sprocket-operator",
            "sprocket-operator.v0.1.0",
            "0.1.0",
            csv("sprocket-operator.v0.1.0", "Sprocket", false),
            false,
        ),
    ];
    let text: String = docs.iter().map(|d| format!("{d}\n")).collect();
    std::fs::create_dir_all(dir.join("catalog")).unwrap();
    std::fs::write(dir.join("catalog/index.json"), text).unwrap();
}

/// Which packageserver the deployment runs.
#[derive(Clone, Debug, PartialEq, Eq)]
// The tests run ours only; the side-by-side bench runs both.
#[allow(dead_code)]
pub(crate) enum Server {
    /// This workspace's.
    Ours,
    /// Upstream OLM's `cmd/package-server`, at this path.
    Upstream(PathBuf),
}

/// Runs a command as in a pod, inside a replica's network namespace (whose
/// mount namespace `ip netns exec` already made private): the
/// ServiceAccount's token, CA and namespace where client-go's in-cluster
/// configuration reads them, and `kubernetes` (the name the API server's
/// certificate holds) resolving to the relay. Arguments: the folder
/// holding `token`, `ca.crt`, `namespace` and `hosts`, then the command.
const IN_POD: &str = r#"set -e
dir="$1"; shift
mount -t tmpfs tmpfs /run
mkdir -p /run/secrets/kubernetes.io/serviceaccount
cp "$dir/token" "$dir/ca.crt" "$dir/namespace" /run/secrets/kubernetes.io/serviceaccount/
mount --bind "$dir/hosts" /etc/hosts
exec "$@""#;

/// One packageserver replica in its own network namespace.
pub(crate) struct Replica {
    /// Its address on the veth pair.
    pub(crate) address: Ipv4Addr,
    netns: String,
    binary: PathBuf,
    /// Where it answers readiness probes.
    ready_url: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    log: PathBuf,
    child: Mutex<Option<(Child, ChildStdin)>>,
}

impl Replica {
    fn spawn(&self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let mut command = Command::new("sh");
        command
            .arg("-c")
            // The guardian: runs packageserver in the namespace and stops it
            // when its standard input closes (test process gone or stop()).
            .arg(r#"ns="$1"; shift; ip netns exec "$ns" "$@" & pid=$!; read _; kill -TERM $pid 2>/dev/null; wait $pid"#)
            .arg("guardian")
            .arg(&self.netns)
            .arg(&self.binary)
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        let mut child = command.spawn().unwrap();
        let stdin = child.stdin.take().unwrap();
        *self.child.lock().unwrap() = Some((child, stdin));
    }

    /// Stops the replica (SIGTERM, then waits for it to exit).
    pub(crate) fn stop(&self) {
        if let Some((mut child, stdin)) = self.child.lock().unwrap().take() {
            drop(stdin);
            child.wait().unwrap();
        }
    }

    /// Starts the replica again.
    pub(crate) fn start(&self) {
        self.spawn();
    }

    /// Whether the replica reports ready on its admin port.
    pub(crate) async fn ready(&self) -> bool {
        let out = tokio::process::Command::new("curl")
            .args(Self::probe_args(&self.ready_url))
            .output()
            .await
            .unwrap();
        out.stdout == b"200"
    }

    /// [`Replica::ready`] for callers outside a runtime.
    pub(crate) fn ready_blocking(&self) -> bool {
        let out = Command::new("curl")
            .args(Self::probe_args(&self.ready_url))
            .output()
            .unwrap();
        out.stdout == b"200"
    }

    /// curl's arguments for a probe of `url` that prints only the status
    /// code. `-k`: upstream's replicas serve a self-signed certificate (a
    /// kubelet's HTTPS probes do not verify either).
    fn probe_args(url: &str) -> [&str; 9] {
        [
            "-k",
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--max-time",
            "2",
            url,
        ]
    }

    /// Its metrics text.
    pub(crate) async fn metrics(&self) -> String {
        let url = format!("http://{}:{ADMIN_PORT}/metrics", self.address);
        let out = tokio::process::Command::new("curl")
            .args(["-s", "--max-time", "5", &url])
            .output()
            .await
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The process id of the packageserver process (the guardian's child).
    #[allow(dead_code)]
    pub(crate) fn server_pid(&self) -> Option<u32> {
        let guard = self.child.lock().unwrap();
        let shell = guard.as_ref()?.0.id();
        let children =
            std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children")).ok()?;
        children.split_whitespace().next()?.parse().ok()
    }

    /// The replica's log so far.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// The running deployment.
pub(crate) struct Harness {
    /// The replicas (two).
    pub(crate) replicas: Vec<Replica>,
    /// Where the registry serves, as the replicas reach it.
    #[allow(dead_code)]
    pub(crate) registry_address: SocketAddr,
    /// The host's address on the first veth pair: servers bound here are
    /// reachable from every replica.
    #[allow(dead_code)]
    pub(crate) host_address: Ipv4Addr,
    /// A folder for files of this test run.
    pub(crate) dir: PathBuf,
    /// The NATS server the replicas subscribe to (their `--nats-url`
    /// reaches it through a relay on the host's veth address).
    pub(crate) nats: olm_testkit::nats::NatsServer,
    _guardian: Mutex<ChildStdin>,
}

fn run(command: &mut Command) {
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn kubectl(args: &[&str], stdin: Option<&str>) -> String {
    let mut command = olm_testkit::control_plane().kubectl();
    command
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if stdin.is_some() {
        command.stdin(Stdio::piped());
    }
    let mut child = command.spawn().unwrap();
    if let Some(text) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Applies JSON objects with kubectl.
pub(crate) fn apply(objects: &[serde_json::Value]) {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
    kubectl(
        &["apply", "--server-side", "--force-conflicts", "-f", "-"],
        Some(&list.to_string()),
    );
}

/// packageserver's ServiceAccount, as a binding's subject.
fn server_account() -> serde_json::Value {
    json!({"kind": "ServiceAccount", "name": "packageserver", "namespace": SERVER_NAMESPACE})
}

/// A ClusterRole `name` with `rules`, bound to packageserver's
/// ServiceAccount.
fn bound_cluster_role(name: &str, rules: serde_json::Value) -> [serde_json::Value; 2] {
    [
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": name}, "rules": rules}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": name},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
               "subjects": [server_account()]}),
    ]
}

fn rbac_objects() -> Vec<serde_json::Value> {
    let sa = server_account();
    let [role, binding] = bound_cluster_role(
        "packageserver-test",
        json!([
            {"apiGroups": ["operators.coreos.com"], "resources": ["catalogsources"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["apiregistration.k8s.io"], "resources": ["apiservices"], "verbs": ["get", "create", "patch"]},
        ]),
    );
    vec![
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "packageserver", "namespace": SERVER_NAMESPACE}}),
        role,
        binding,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "packageserver-test-auth-delegator"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:auth-delegator"},
               "subjects": [sa]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "packageserver-test-auth-reader", "namespace": "kube-system"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "extension-apiserver-authentication-reader"},
               "subjects": [sa]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": "packageserver-cert", "namespace": SERVER_NAMESPACE},
               "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch", "create", "update"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "packageserver-cert", "namespace": SERVER_NAMESPACE},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "packageserver-cert"},
               "subjects": [sa]}),
    ]
}

/// What upstream's packageserver needs beyond ours, which OLM's CSV for it
/// would create: read access to OLMConfigs, and the APIService (ours
/// manages its own, with the CA it rotates).
fn upstream_objects() -> Vec<serde_json::Value> {
    let [role, binding] = bound_cluster_role(
        "packageserver-test-upstream",
        json!([{"apiGroups": ["operators.coreos.com"], "resources": ["olmconfigs"], "verbs": ["get", "list", "watch"]}]),
    );
    vec![
        role,
        binding,
        json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
               "metadata": {"name": APISERVICE},
               "spec": {"group": "packages.operators.coreos.com", "version": "v1",
                        "service": {"name": SERVICE, "namespace": SERVER_NAMESPACE, "port": 443},
                        "insecureSkipTLSVerify": true,
                        "groupPriorityMinimum": 2000, "versionPriority": 15}}),
    ]
}

/// The Endpoints of the Service: `ready` replicas as addresses, the others
/// as not-ready addresses (what the endpoints controller does with
/// readiness probes).
pub(crate) fn endpoints(replicas: &[(Ipv4Addr, bool)]) -> serde_json::Value {
    let address = |ip: &Ipv4Addr| json!({"ip": ip.to_string()});
    let ready: Vec<_> = replicas
        .iter()
        .filter(|(_, r)| *r)
        .map(|(ip, _)| address(ip))
        .collect();
    let not_ready: Vec<_> = replicas
        .iter()
        .filter(|(_, r)| !*r)
        .map(|(ip, _)| address(ip))
        .collect();
    json!({"apiVersion": "v1", "kind": "Endpoints",
           "metadata": {"name": SERVICE, "namespace": SERVER_NAMESPACE},
           "subsets": [{"addresses": ready, "notReadyAddresses": not_ready,
                        "ports": [{"name": "https", "port": SECURE_PORT, "protocol": "TCP"}]}]})
}

async fn relay(listener: TcpListener, target: SocketAddr) {
    loop {
        let Ok((mut inbound, _)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(async move {
            if let Ok(mut outbound) = TcpStream::connect(target).await {
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            }
        });
    }
}

fn ca_of_plane() -> String {
    let plane = olm_testkit::control_plane();
    let kubeconfig: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(plane.kubeconfig_path()).unwrap())
            .unwrap();
    let ca_path = kubeconfig["clusters"][0]["cluster"]["certificate-authority"]
        .as_str()
        .unwrap();
    std::fs::read_to_string(ca_path).unwrap()
}

/// The deployment of our packageserver, started once per test binary.
pub(crate) fn harness() -> &'static Harness {
    harness_of(&Server::Ours)
}

/// The deployment of `server`, started once per test binary. Panics when
/// the binary's deployment was started with the other server.
pub(crate) fn harness_of(server: &Server) -> &'static Harness {
    static HARNESS: OnceLock<(Server, Harness)> = OnceLock::new();
    let (started, harness) = HARNESS.get_or_init(|| (server.clone(), start(server)));
    assert_eq!(
        started, server,
        "this test binary's packageserver deployment was started with {started:?}, not {server:?}"
    );
    harness
}

fn start(server: &Server) -> Harness {
    let started = Instant::now();
    let plane = olm_testkit::control_plane();
    plane.install_crds(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/crds"));
    let dir = tempfile::Builder::new()
        .prefix("packageserver-test-")
        .tempdir()
        .unwrap()
        .keep();
    // Distinct subnets per test process, so parallel runs do not collide.
    let octet = u8::try_from(std::process::id() % 200).unwrap() + 20;
    let tag = format!("{}", std::process::id());
    let names: Vec<(String, String, String, Ipv4Addr, Ipv4Addr)> = (0..2u8)
        .map(|i| {
            (
                format!("olmps-{tag}-{i}"),
                format!("psh{tag}{i}"),
                format!("psc{tag}{i}"),
                Ipv4Addr::new(10, 213, octet, 4 * i + 1),
                Ipv4Addr::new(10, 213, octet, 4 * i + 2),
            )
        })
        .collect();
    // The guardian removes the namespaces (and with them the veth pairs)
    // when the test process exits.
    let cleanup: String = names
        .iter()
        .map(|(ns, host, ..)| {
            format!("ip netns del {ns} 2>/dev/null; ip link del {host} 2>/dev/null; ")
        })
        .collect();
    // Never waited for on purpose: it must outlive the test process to clean
    // up after it.
    #[allow(clippy::zombie_processes)]
    let mut guardian = Command::new("sh")
        .arg("-c")
        .arg(format!("read _; {cleanup}"))
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let guardian_stdin = guardian.stdin.take().unwrap();
    for (ns, host, inner, host_ip, inner_ip) in &names {
        run(Command::new("ip").args(["netns", "add", ns]));
        run(Command::new("ip").args(["link", "add", host, "type", "veth", "peer", "name", inner]));
        run(Command::new("ip").args(["link", "set", inner, "netns", ns]));
        run(Command::new("ip").args(["addr", "add", &format!("{host_ip}/30"), "dev", host]));
        run(Command::new("ip").args(["link", "set", host, "up"]));
        let exec = |args: &[&str]| {
            run(Command::new("ip").args(["netns", "exec", ns]).args(args));
        };
        exec(&["ip", "addr", "add", &format!("{inner_ip}/30"), "dev", inner]);
        exec(&["ip", "link", "set", inner, "up"]);
        exec(&["ip", "link", "set", "lo", "up"]);
        exec(&["ip", "route", "add", "default", "via", &host_ip.to_string()]);
    }
    let host_ip = names[0].3;

    // Background runtime for the relay and the registry: it outlives every
    // test's own runtime.
    let (tx, rx) = std::sync::mpsc::channel();
    let catalog_dir = dir.join("fbc");
    write_catalog(&catalog_dir);
    let api_url = plane.server_url().to_owned();
    let nats = olm_testkit::nats::NatsServer::start().unwrap();
    let nats_port: u16 = nats.url().rsplit_once(':').unwrap().1.parse().unwrap();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let api_port: u16 = api_url
                .rsplit_once(':')
                .unwrap()
                .1
                .trim_end_matches('/')
                .parse()
                .unwrap();
            let relay_listener = TcpListener::bind((host_ip, 0)).await.unwrap();
            let relay_addr = relay_listener.local_addr().unwrap();
            tokio::spawn(relay(
                relay_listener,
                SocketAddr::from(([127, 0, 0, 1], api_port)),
            ));
            let index =
                CatalogIndex::build(catalog_dir.join("catalog"), &IndexOptions::default()).unwrap();
            let registry_listener = TcpListener::bind((host_ip, 0)).await.unwrap();
            let registry_addr = registry_listener.local_addr().unwrap();
            tokio::spawn(
                RegistryServer::new(index).serve(registry_listener, std::future::pending()),
            );
            let nats_listener = TcpListener::bind((host_ip, 0)).await.unwrap();
            let nats_relay = nats_listener.local_addr().unwrap();
            tokio::spawn(relay(
                nats_listener,
                SocketAddr::from(([127, 0, 0, 1], nats_port)),
            ));
            tx.send((relay_addr, registry_addr, nats_relay)).unwrap();
            std::future::pending::<()>().await;
        });
    });
    let (relay_addr, registry_addr, nats_relay) = rx.recv().unwrap();

    for ns in [SERVER_NAMESPACE, GLOBAL_NAMESPACE, TEAM_NAMESPACE] {
        apply(&[json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})]);
    }
    apply(&rbac_objects());
    if let Server::Upstream(_) = server {
        apply(&upstream_objects());
    }
    apply(&[
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": SERVICE, "namespace": SERVER_NAMESPACE},
               "spec": {"ports": [{"name": "https", "port": 443, "targetPort": SECURE_PORT, "protocol": "TCP"}]}}),
        // Not ready until their readiness endpoint says so (below).
        endpoints(&names.iter().map(|n| (n.4, false)).collect::<Vec<_>>()),
        json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
               "metadata": {"name": GLOBAL_CATALOG, "namespace": GLOBAL_NAMESPACE, "labels": {"fixture": "global"}},
               "spec": {"sourceType": "grpc", "address": registry_addr.to_string(), "displayName": GLOBAL_CATALOG_DISPLAY, "publisher": "Fixture Works"}}),
        json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
               "metadata": {"name": TEAM_CATALOG, "namespace": TEAM_NAMESPACE},
               "spec": {"sourceType": "grpc", "address": registry_addr.to_string(), "displayName": "Team Catalog", "publisher": "Team"}}),
    ]);
    write_catalog_operator_status(
        server,
        &[
            (GLOBAL_NAMESPACE, GLOBAL_CATALOG),
            (TEAM_NAMESPACE, TEAM_CATALOG),
        ],
    );
    let token = kubectl(
        &[
            "create",
            "token",
            "packageserver",
            "-n",
            SERVER_NAMESPACE,
            "--duration=2h",
        ],
        None,
    );
    let kubeconfig = json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "test", "cluster": {
            "server": format!("https://{relay_addr}"),
            "certificate-authority-data": base64::Engine::encode(&base64::engine::general_purpose::STANDARD, ca_of_plane()),
            "tls-server-name": "kubernetes"}}],
        "users": [{"name": "packageserver", "user": {"token": token.trim()}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "packageserver"}}],
        "current-context": "test",
    });
    let kubeconfig_path = dir.join("kubeconfig");
    std::fs::write(&kubeconfig_path, kubeconfig.to_string()).unwrap();
    // Upstream's packageserver runs as in its pod: the same ServiceAccount
    // token, the cluster's CA and a `kubernetes` host (see [`IN_POD`]).
    // Out of cluster it cannot: its delegated authorization ignores
    // `--authorization-kubeconfig` and `--kubeconfig` (v0.46.0 sets the
    // kubeconfig on the authentication options twice) and so wants the
    // in-cluster configuration.
    let pod_dir = dir.join("pod");
    std::fs::create_dir_all(&pod_dir).unwrap();
    std::fs::write(pod_dir.join("token"), token.trim()).unwrap();
    std::fs::write(pod_dir.join("ca.crt"), ca_of_plane()).unwrap();
    std::fs::write(pod_dir.join("namespace"), SERVER_NAMESPACE).unwrap();
    std::fs::write(
        pod_dir.join("hosts"),
        format!("127.0.0.1 localhost\n{} kubernetes\n", relay_addr.ip()),
    )
    .unwrap();

    let nats_url = format!("nats://{nats_relay}");
    let ours: Vec<String> = [
        "--nats-url",
        nats_url.as_str(),
        "--namespace",
        SERVER_NAMESPACE,
        "--global-namespace",
        GLOBAL_NAMESPACE,
        "--interval",
        "1m",
        "--ca-lifetime",
        CA_LIFETIME,
        "--serving-cert-lifetime",
        SERVING_LIFETIME,
        "--ca-renew-before",
        CA_RENEW_BEFORE,
        "--cert-overlap",
        CERT_OVERLAP,
        "--serving-cert-renew-fraction",
        RENEW_FRACTION,
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let replicas: Vec<Replica> = names
        .iter()
        .enumerate()
        .map(|(i, (ns, _, _, _, inner_ip))| match server {
            Server::Ours => Replica {
                address: *inner_ip,
                netns: ns.clone(),
                binary: PathBuf::from(env!("CARGO_BIN_EXE_packageserver")),
                ready_url: format!("http://{inner_ip}:{ADMIN_PORT}/readyz"),
                args: ours.clone(),
                env: vec![
                    ("KUBECONFIG".into(), kubeconfig_path.display().to_string()),
                    ("RUST_LOG".into(), "info,packageserver=debug".into()),
                    (
                        "OLM_ADMIN_BIND_ADDRESS".into(),
                        format!("{inner_ip}:{ADMIN_PORT}"),
                    ),
                ],
                log: dir.join(format!("packageserver-{i}.log")),
                child: Mutex::new(None),
            },
            Server::Upstream(binary) => {
                let cert_dir = dir.join(format!("upstream-certs-{i}"));
                let args: Vec<String> = [
                    "-c",
                    IN_POD,
                    "in-pod",
                    &pod_dir.display().to_string(),
                    &binary.display().to_string(),
                    "--secure-port",
                    &SECURE_PORT.to_string(),
                    "--global-namespace",
                    GLOBAL_NAMESPACE,
                    "--interval",
                    "1m",
                    "--cert-dir",
                    &cert_dir.display().to_string(),
                ]
                .iter()
                .map(|s| (*s).to_owned())
                .collect();
                Replica {
                    address: *inner_ip,
                    netns: ns.clone(),
                    binary: PathBuf::from("sh"),
                    ready_url: format!("https://{inner_ip}:{SECURE_PORT}/readyz"),
                    args,
                    env: vec![
                        ("KUBERNETES_SERVICE_HOST".into(), "kubernetes".into()),
                        (
                            "KUBERNETES_SERVICE_PORT".into(),
                            relay_addr.port().to_string(),
                        ),
                    ],
                    log: dir.join(format!("packageserver-upstream-{i}.log")),
                    child: Mutex::new(None),
                }
            }
        })
        .collect();
    for replica in &replicas {
        replica.spawn();
    }
    let harness = Harness {
        replicas,
        registry_address: registry_addr,
        host_address: host_ip,
        dir,
        nats,
        _guardian: Mutex::new(guardian_stdin),
    };
    // Readiness, as a kubelet and the endpoints controller would do it: a
    // replica becomes a ready address of the Service only once its /readyz
    // answers 200. Listing replicas as ready before they listen made the
    // suite flaky: the aggregator fetches the group's discovery document
    // from one endpoint whenever the APIService changes, and a fetch that
    // lands on a replica not listening yet marks the group's discovery stale
    // until the next change of the APIService (seconds later, at the next CA
    // rotation). kubectl needs discovery and failed throughout that window,
    // while direct requests (kube-rs) went through: five tests failed
    // together. Real clusters have the readiness probe for this.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut ready = vec![false; harness.replicas.len()];
    while ready.iter().any(|r| !r) {
        let now_ready: Vec<bool> = harness
            .replicas
            .iter()
            .map(Replica::ready_blocking)
            .collect();
        if now_ready != ready {
            ready = now_ready;
            apply(&[endpoints(
                &harness
                    .replicas
                    .iter()
                    .zip(&ready)
                    .map(|(r, ready)| (r.address, *ready))
                    .collect::<Vec<_>>(),
            )]);
        }
        if Instant::now() > deadline {
            let logs: String = harness.replicas.iter().map(|r| r.log()).collect();
            panic!("packageserver replicas not ready within 60 s: {ready:?}\nlogs:\n{logs}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // Then the aggregator: the APIService Available and kubectl (which
    // resolves the resource through the aggregated discovery) served.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let available = plane
            .kubectl()
            .args([
                "get",
                "apiservice",
                APISERVICE,
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Available\")].status}",
            ])
            .output()
            .unwrap();
        let out = plane
            .kubectl()
            .args([
                "get",
                "packagemanifests",
                "-n",
                TEAM_NAMESPACE,
                "-o",
                "name",
            ])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        if available.stdout == b"True"
            && out.status.success()
            && text.contains("gizmo-operator")
            && text.contains("sprocket-operator")
        {
            break;
        }
        if Instant::now() > deadline {
            let logs: String = harness.replicas.iter().map(|r| r.log()).collect();
            panic!(
                "packageserver not served through the aggregator within 60 s: {}\n{}\nlogs:\n{logs}",
                String::from_utf8_lossy(&out.stderr),
                kubectl(&["get", "apiservice", APISERVICE, "-o", "yaml"], None)
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    eprintln!(
        "packageserver harness ready in {:.1} s (dir {})",
        started.elapsed().as_secs_f64(),
        harness.dir.display()
    );
    harness
}

/// For upstream's packageserver, writes what upstream's catalog-operator
/// writes on a CatalogSource with an `address`:
/// `status.registryService{protocol: grpc, createdAt}`. Upstream's
/// packageserver connects to no source without it; ours reads the address
/// alone, so for ours this does nothing.
pub(crate) fn write_catalog_operator_status(server: &Server, sources: &[(&str, &str)]) {
    if *server == Server::Ours {
        return;
    }
    let now = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let status =
        json!({"status": {"registryService": {"protocol": "grpc", "createdAt": now}}}).to_string();
    for (namespace, name) in sources {
        kubectl(
            &[
                "patch",
                "catalogsource",
                name,
                "-n",
                namespace,
                "--subresource=status",
                "--type=merge",
                "-p",
                &status,
            ],
            None,
        );
    }
}

/// Runs kubectl against the control plane; panics with its stderr on failure.
pub(crate) fn kubectl_ok(args: &[&str]) -> String {
    kubectl(args, None)
}

/// Runs kubectl and returns (success, stdout, stderr).
pub(crate) fn kubectl_try(args: &[&str]) -> (bool, String, String) {
    let out = olm_testkit::control_plane()
        .kubectl()
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
