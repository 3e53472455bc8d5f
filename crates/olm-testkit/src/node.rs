//! A real node beside kwok's fake one: containerd and runc (Debian's
//! packages) run the containers, the CNI `bridge` plugin gives pods
//! addresses, a kubelet built from `k8s.io/kubernetes` at the pinned release
//! registers the node, and kube-proxy (iptables) routes Service ClusterIPs,
//! from pods and from this host.
//!
//! The node is tainted with [`NODE_TAINT`]: only pods that tolerate it (OLM's
//! own, the example operator) land there. Images are pulled through
//! registry mirrors (see [`NodeOptions::mirrors`]), so a pod may name
//! `ghcr.io/olm-rs/...` and get the image a test pushed to its loopback
//! registry.
//!
//! There is one real node per machine (its bridges and addresses are fixed):
//! a lock file serialises users, and whoever holds it may start one. It needs
//! root. Everything it changes on the host (bridges, iptables rules, mounts,
//! network namespaces) is undone when it is dropped or, for a node that lives
//! until its process exits, by a janitor that runs then.

use std::{
    io::{BufRead, BufReader, Write},
    path::{Path, PathBuf},
    process::{Child, ChildStdin, Command, Stdio},
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Node;
use kube::{Api, Client};

use crate::{
    ControlPlane, Error, assets,
    process::{Supervised, free_port},
};

/// The node's name.
pub const NODE_NAME: &str = "real-node";
/// The node's address, on [`NODE_BRIDGE`]; the API server advertises it when
/// a control plane is started for a real node.
pub const NODE_IP: &str = "10.250.0.1";
/// The bridge that carries [`NODE_IP`] (this kernel may lack `dummy` links;
/// bridges are always there).
pub const NODE_BRIDGE: &str = "olm-node0";
/// The bridge pods are attached to.
pub const POD_BRIDGE: &str = "olm-cni0";
/// The pods' addresses.
pub const POD_SUBNET: &str = "10.251.0.0/24";
/// The taint the node registers with; pods must tolerate it to land there.
pub const NODE_TAINT: &str = "olm.operatorframework.io/real-node";
/// The image every pod sandbox runs (containerd's default pause image);
/// whoever starts the node must make it pullable, for example by mirroring
/// `registry.k8s.io` to a registry holding `pause:3.10`.
pub const SANDBOX_IMAGE: &str = "registry.k8s.io/pause:3.10";
/// How long the node may take to register and become Ready.
const NODE_READY_TIMEOUT: Duration = Duration::from_secs(120);
/// How long to wait for another process's node to go away.
const LOCK_WAIT: Duration = Duration::from_secs(20 * 60);
/// The machine-wide lock.
const LOCK_FILE: &str = "olm-testkit-real-node.lock";
/// Where CNI plugins are installed by Debian's `containernetworking-plugins`.
const CNI_BIN_DIR: &str = "/usr/lib/cni";
/// The CNI network's name.
const CNI_NETWORK: &str = "olm-node";
/// The janitor: run under `flock` on the machine's lock, it says `locked`,
/// then waits for its standard input to close (the node was dropped, which
/// first writes `stopped`, or its process exited) and undoes what the node
/// changed on the host. `$1` is the node's folder, `$2` kube-proxy. The lock
/// is held until the host is clean, so the next node never races a teardown.
const JANITOR: &str = r#"
# Ctrl-C in a terminal signals the whole process group, this shell too:
# the teardown must still run.
trap '' INT TERM HUP
dir=$1
echo locked
read -r said
[ "$said" = stopped ] || sleep 3
# Containers outlive containerd (their shims keep them): kill them first.
runc_root="$dir/runc/k8s.io"
if [ -d "$runc_root" ]; then
  for id in $(runc --root "$runc_root" list -q 2>/dev/null); do
    runc --root "$runc_root" kill "$id" KILL 2>/dev/null
    runc --root "$runc_root" delete --force "$id" 2>/dev/null
  done
fi
pkill -KILL -f "containerd-shim-runc-v2 .*-address $dir/containerd.sock" 2>/dev/null
# Network namespaces the sandboxes pinned, and only those.
if [ -f "$dir/netns.before" ]; then
  for ns in $(ls /run/netns 2>/dev/null); do
    grep -qx "$ns" "$dir/netns.before" || ip netns delete "$ns" 2>/dev/null
  done
fi
# Mounts under the node's folder, deepest first.
awk -v d="$dir" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r |
  while read -r m; do umount -l "$m" 2>/dev/null; done
ip link delete olm-cni0 2>/dev/null
ip link delete olm-node0 2>/dev/null
"$2" --cleanup >/dev/null 2>&1
# The kubelet's own chains (its canary, and the localnet firewall).
for cmd in iptables ip6tables; do
  for table in filter nat mangle; do
    for chain in INPUT OUTPUT; do
      $cmd -t $table -D $chain -j KUBE-FIREWALL 2>/dev/null
    done
    for chain in KUBE-FIREWALL KUBE-KUBELET-CANARY KUBE-IPTABLES-HINT; do
      $cmd -t $table -F $chain 2>/dev/null && $cmd -t $table -X $chain 2>/dev/null
    done
  done
done
rm -rf "$dir"
"#;

/// Where images are pulled from: each `registry` host is mirrored to an
/// `endpoint` (`http://127.0.0.1:5000`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mirror {
    /// The registry host pods name, for example `ghcr.io`.
    pub registry: String,
    /// The URL containerd pulls from instead.
    pub endpoint: String,
}

/// Options of [`RealNode::start`].
#[derive(Debug, Clone, Default)]
pub struct NodeOptions {
    /// Registry mirrors. A loopback registry should be mirrored to itself
    /// (`127.0.0.1:5000` → `http://127.0.0.1:5000`) so that it is reached
    /// over plain HTTP.
    pub mirrors: Vec<Mirror>,
}

/// How long each part of the node took, for reporting.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeTimings {
    /// From start to containerd answering.
    pub containerd: Duration,
    /// From start to the Node being Ready.
    pub ready: Duration,
}

/// A running real node. Dropping it stops its processes and undoes what it
/// changed on the host.
#[derive(Debug)]
pub struct RealNode {
    // Field order is drop order.
    kube_proxy: Option<Supervised>,
    kubelet: Option<Supervised>,
    containerd: Option<Supervised>,
    dir: PathBuf,
    timings: NodeTimings,
    janitor: Janitor,
}

impl RealNode {
    /// Why a real node cannot run here, if it cannot: not root, or a piece
    /// missing. Tests skip (or, under CI, fail) with this message.
    pub fn unsupported() -> Option<String> {
        if !assets::is_root() {
            return Some("a real node needs root (mounts, bridges, iptables)".to_owned());
        }
        let mut missing = Vec::new();
        for name in ["containerd", "runc", "iptables", "ip"] {
            if assets::find(name).is_err() {
                missing.push(name.to_owned());
            }
        }
        for name in ["kubelet", "kube-proxy"] {
            if assets::find_pinned(name).is_err() {
                missing.push(name.to_owned());
            }
        }
        if !Path::new(CNI_BIN_DIR).join("bridge").exists() {
            missing.push(format!("{CNI_BIN_DIR}/bridge"));
        }
        (!missing.is_empty()).then(|| {
            format!(
                "a real node needs {} (run `cargo xtask envtest`)",
                missing.join(", ")
            )
        })
    }

    /// Starts the node against `plane`, which must have been started with
    /// [`crate::ControlPlaneOptions::for_real_node`], and waits until it is
    /// Ready. Blocks while another process holds the machine's real node.
    pub fn start(plane: &ControlPlane, options: &NodeOptions) -> Result<RealNode, Error> {
        let plane_dir = plane.dir().to_owned();
        let kubeconfig = plane.kubeconfig_path().to_owned();
        let options = options.clone();
        // Start-up blocks on a runtime of its own, which must not be nested
        // in the caller's.
        std::thread::spawn(move || start_blocking(&plane_dir, &kubeconfig, &options))
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }

    /// The node's folder: configuration, state and logs (`logs/`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// How long start-up took.
    pub fn timings(&self) -> NodeTimings {
        self.timings
    }

    /// The containerd socket, for `ctr --address`.
    pub fn containerd_socket(&self) -> PathBuf {
        self.dir.join("containerd.sock")
    }
}

impl Drop for RealNode {
    fn drop(&mut self) {
        for process in [
            &mut self.kube_proxy,
            &mut self.kubelet,
            &mut self.containerd,
        ]
        .into_iter()
        .flatten()
        {
            process.stop();
        }
        self.janitor.finish();
    }
}

fn start_blocking(
    plane_dir: &Path,
    kubeconfig: &Path,
    options: &NodeOptions,
) -> Result<RealNode, Error> {
    if let Some(reason) = RealNode::unsupported() {
        return Err(Error::Unsupported(reason));
    }
    let started = Instant::now();
    // Not under the control plane's folder, which may be in /dev/shm and is
    // removed by its own janitor: the node's teardown must find its mounts.
    let dir = tempfile::Builder::new()
        .prefix("olm-real-node-")
        .tempdir()
        .map_err(|source| Error::io(std::env::temp_dir(), source))?
        .keep();
    let logs = dir.join("logs");
    for sub in ["logs", "cni", "cni-state", "kubelet", "runc"] {
        let path = dir.join(sub);
        std::fs::create_dir_all(&path).map_err(|source| Error::io(&path, source))?;
    }
    let kube_proxy_bin = assets::find_pinned("kube-proxy")?;
    let janitor = Janitor::start(&dir, &kube_proxy_bin)?;
    // Leftovers of a node whose process was killed before its janitor ran.
    let _ = Command::new(&kube_proxy_bin)
        .arg("--cleanup")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    record_netns(&dir)?;
    host_network()?;

    let config = dir.join("containerd.toml");
    write(&config, &containerd_config(&dir, &options.mirrors))?;
    let socket = dir.join("containerd.sock");
    let mut containerd = Supervised::spawn(
        "containerd",
        &assets::find("containerd")?,
        &["--config".to_owned(), config.display().to_string()],
        &logs.join("containerd.log"),
        &[],
    )?;
    wait_for_socket(&mut containerd, &socket, Duration::from_secs(30))?;
    let containerd_ready = started.elapsed();

    let cni = dir.join("cni").join("10-olm-node.conflist");
    write(&cni, &cni_config(&dir.join("cni-state")))?;

    let kubelet_config = dir.join("kubelet.yaml");
    write(
        &kubelet_config,
        &kubelet_config_yaml(&socket, &plane_dir.join("pki").join("ca.crt"))?,
    )?;
    let kubelet = Supervised::spawn(
        "kubelet",
        &assets::find_pinned("kubelet")?,
        &[
            format!("--config={}", kubelet_config.display()),
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--hostname-override={NODE_NAME}"),
            format!("--root-dir={}", dir.join("kubelet").display()),
            format!("--node-ip={NODE_IP}"),
            "--v=1".to_owned(),
        ],
        &logs.join("kubelet.log"),
        &[],
    )?;
    let kube_proxy = Supervised::spawn(
        "kube-proxy",
        &kube_proxy_bin,
        &[
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--hostname-override={NODE_NAME}"),
            "--proxy-mode=iptables".to_owned(),
            // Replies from a pod to a pod that reached it through a
            // ClusterIP must come back through the host: there is no
            // br_netfilter here to un-NAT them on the bridge.
            "--masquerade-all=true".to_owned(),
            format!("--cluster-cidr={POD_SUBNET}"),
            format!("--healthz-bind-address=127.0.0.1:{}", free_port()?),
            format!("--metrics-bind-address=127.0.0.1:{}", free_port()?),
            // Leave the host's conntrack sysctls alone (read-only in a sandbox).
            "--conntrack-max-per-core=0".to_owned(),
            "--conntrack-tcp-timeout-established=0".to_owned(),
            "--conntrack-tcp-timeout-close-wait=0".to_owned(),
            "--iptables-localhost-nodeports=false".to_owned(),
            "--v=1".to_owned(),
        ],
        &logs.join("kube-proxy.log"),
        &[],
    )?;
    let mut node = RealNode {
        kube_proxy: Some(kube_proxy),
        kubelet: Some(kubelet),
        containerd: Some(containerd),
        dir,
        timings: NodeTimings {
            containerd: containerd_ready,
            ready: Duration::ZERO,
        },
        janitor,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| Error::io("tokio runtime", source))?;
    runtime.block_on(node.wait_ready(kubeconfig))?;
    node.timings.ready = started.elapsed();
    tracing::info!(timings = ?node.timings, dir = %node.dir.display(), "real node ready");
    Ok(node)
}

impl RealNode {
    async fn wait_ready(&mut self, kubeconfig: &Path) -> Result<(), Error> {
        let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig)?;
        let config = kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &kube::config::KubeConfigOptions::default(),
        )
        .await?;
        let nodes: Api<Node> = Api::all(Client::try_from(config)?);
        let started = Instant::now();
        let mut last = String::from("not registered");
        while started.elapsed() < NODE_READY_TIMEOUT {
            for process in [
                &mut self.containerd,
                &mut self.kubelet,
                &mut self.kube_proxy,
            ]
            .into_iter()
            .flatten()
            {
                if let Some(status) = process.exited() {
                    return Err(process.exited_error(status));
                }
            }
            match nodes.get_opt(NODE_NAME).await {
                Ok(Some(node)) => {
                    let ready = node
                        .status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
                    match ready {
                        Some(c) if c.status == "True" => return Ok(()),
                        Some(c) => {
                            last = format!(
                                "Ready={} {}",
                                c.status,
                                c.message.as_deref().unwrap_or_default()
                            );
                        }
                        None => last = "no Ready condition".to_owned(),
                    }
                }
                Ok(None) => {}
                Err(err) => last = err.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        Err(Error::NotReady {
            name: format!("node {NODE_NAME}"),
            waited_secs: NODE_READY_TIMEOUT.as_secs(),
            last_error: last,
            log: self.dir.join("logs").join("kubelet.log"),
        })
    }
}

/// The process that holds the machine's real-node lock and cleans up after
/// the node.
#[derive(Debug)]
struct Janitor {
    child: Child,
    stdin: Option<ChildStdin>,
}

impl Janitor {
    /// Starts the janitor and waits until it holds the lock (while another
    /// process's node runs, up to [`LOCK_WAIT`]).
    fn start(dir: &Path, kube_proxy: &Path) -> Result<Janitor, Error> {
        let lock = std::env::temp_dir().join(LOCK_FILE);
        let flock = assets::find("flock")?;
        let mut child = Command::new(flock)
            .arg("--exclusive")
            .arg(format!("--wait={}", LOCK_WAIT.as_secs()))
            .arg(&lock)
            .arg("sh")
            .arg("-c")
            .arg(JANITOR)
            .arg("olm-testkit-node-janitor")
            .arg(dir)
            .arg(kube_proxy)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|source| Error::Spawn {
                name: "node janitor (flock)".to_owned(),
                source,
            })?;
        let stdin = child.stdin.take();
        let (said, heard) = std::sync::mpsc::channel();
        if let Some(stdout) = child.stdout.take() {
            std::thread::spawn(move || {
                let mut first = String::new();
                let _ = BufReader::new(stdout).read_line(&mut first);
                let _ = said.send(first);
            });
        }
        let first = match heard.recv_timeout(Duration::from_secs(2)) {
            Ok(first) => first,
            Err(_) => {
                eprintln!(
                    "olm-testkit: waiting for another process's real node to stop ({})",
                    lock.display()
                );
                heard.recv().unwrap_or_default()
            }
        };
        if first.trim() != "locked" {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Error::Unsupported(format!(
                "another process held the real node ({}) for more than {} s",
                lock.display(),
                LOCK_WAIT.as_secs()
            )));
        }
        Ok(Janitor { child, stdin })
    }

    /// Cleans up now (the node's processes have stopped) and waits for it.
    fn finish(&mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.write_all(b"stopped\n");
        }
        let _ = self.child.wait();
    }
}

fn record_netns(dir: &Path) -> Result<(), Error> {
    let names: Vec<String> = std::fs::read_dir("/run/netns")
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    let mut text = names.join("\n");
    text.push('\n');
    write(&dir.join("netns.before"), &text)
}

/// The node's address on a bridge of its own; the pod bridge is made by CNI.
fn host_network() -> Result<(), Error> {
    let _ = ip(&["link", "delete", POD_BRIDGE]);
    let _ = ip(&["link", "delete", NODE_BRIDGE]);
    ip(&["link", "add", NODE_BRIDGE, "type", "bridge"])?;
    ip(&["addr", "add", &format!("{NODE_IP}/32"), "dev", NODE_BRIDGE])?;
    ip(&["link", "set", NODE_BRIDGE, "up"])?;
    // Pods reach other networks through this host.
    let forward = Path::new("/proc/sys/net/ipv4/ip_forward");
    if std::fs::read_to_string(forward).is_ok_and(|v| v.trim() != "1") {
        std::fs::write(forward, "1").map_err(|source| Error::io(forward, source))?;
    }
    Ok(())
}

fn ip(args: &[&str]) -> Result<(), Error> {
    let output = Command::new("ip")
        .args(args)
        .output()
        .map_err(|source| Error::Spawn {
            name: "ip".to_owned(),
            source,
        })?;
    if !output.status.success() {
        return Err(Error::Unsupported(format!(
            "ip {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(())
}

fn write(path: &Path, contents: &str) -> Result<(), Error> {
    std::fs::write(path, contents).map_err(|source| Error::io(path, source))
}

fn wait_for_socket(
    process: &mut Supervised,
    socket: &Path,
    timeout: Duration,
) -> Result<(), Error> {
    let started = Instant::now();
    while started.elapsed() < timeout {
        if let Some(status) = process.exited() {
            return Err(process.exited_error(status));
        }
        if std::os::unix::net::UnixStream::connect(socket).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(Error::NotReady {
        name: process.name().to_owned(),
        waited_secs: timeout.as_secs(),
        last_error: format!("{} does not accept connections", socket.display()),
        log: process.log().to_owned(),
    })
}

/// containerd's configuration: private root, state and socket, the CRI
/// plugin with the CNI network, and the registry mirrors.
pub(crate) fn containerd_config(dir: &Path, mirrors: &[Mirror]) -> String {
    let d = dir.display();
    let mut text = format!(
        r#"version = 2
root = "{d}/containerd-root"
state = "{d}/containerd-state"
[grpc]
  address = "{d}/containerd.sock"
[ttrpc]
  address = "{d}/containerd.sock.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{SANDBOX_IMAGE}"
  # Inside a sandboxed host a process may not lower its oom_score_adj, which
  # the CRI asks for the pause container; without this every sandbox fails
  # with runc's "can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  Root = "{d}/runc"
[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = "{CNI_BIN_DIR}"
  conf_dir = "{d}/cni"
"#
    );
    for mirror in mirrors {
        text.push_str(&format!(
            "[plugins.\"io.containerd.grpc.v1.cri\".registry.mirrors.\"{}\"]\n  endpoint = [\"{}\"]\n",
            mirror.registry, mirror.endpoint
        ));
    }
    text
}

/// The pod network: a bridge with `host-local` addresses, this host as the
/// gateway, and port mappings.
pub(crate) fn cni_config(state: &Path) -> String {
    serde_json::json!({
        "cniVersion": "0.4.0",
        "name": CNI_NETWORK,
        "plugins": [
            {
                "type": "bridge",
                "bridge": POD_BRIDGE,
                "isGateway": true,
                "ipMasq": true,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{ "subnet": POD_SUBNET }]],
                    "routes": [{ "dst": "0.0.0.0/0" }],
                    "dataDir": state.display().to_string(),
                }
            },
            { "type": "portmap", "capabilities": { "portMappings": true } }
        ]
    })
    .to_string()
}

/// The kubelet's configuration for this machine: cgroupfs on cgroup v1, no
/// QoS cgroups or evictions (the sandbox does not allow them), the taint,
/// and its API (logs, exec) on the node address only.
pub(crate) fn kubelet_config_yaml(socket: &Path, client_ca: &Path) -> Result<String, Error> {
    let config = serde_json::json!({
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        // The kubelet's own API trusts nobody anonymous; the API server
        // reaches it with a client certificate of the cluster CA (logs, exec).
        "authentication": {
            "anonymous": { "enabled": false },
            "webhook": { "enabled": false },
            "x509": { "clientCAFile": client_ca.display().to_string() },
        },
        "authorization": { "mode": "AlwaysAllow" },
        "cgroupDriver": "cgroupfs",
        "failSwapOn": false,
        "failCgroupV1": false,
        "containerRuntimeEndpoint": format!("unix://{}", socket.display()),
        "registerWithTaints": [{ "key": NODE_TAINT, "value": "true", "effect": "NoSchedule" }],
        "address": NODE_IP,
        "port": free_port()?,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": free_port()?,
        "resolvConf": "",
        "cgroupsPerQOS": false,
        "enforceNodeAllocatable": [],
        "localStorageCapacityIsolation": false,
        "evictionHard": {},
        "imageGCHighThresholdPercent": 100,
        "serializeImagePulls": false,
        "nodeStatusReportFrequency": "10s",
    });
    serde_yaml_ng::to_string(&config)
        .map_err(|err| Error::Unsupported(format!("cannot write the kubelet configuration: {err}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containerd_mirrors_each_registry_to_its_endpoint() {
        let text = containerd_config(
            Path::new("/tmp/n"),
            &[Mirror {
                registry: "ghcr.io".into(),
                endpoint: "http://127.0.0.1:5000".into(),
            }],
        );
        assert!(
            text.contains(
                "registry.mirrors.\"ghcr.io\"]\n  endpoint = [\"http://127.0.0.1:5000\"]"
            ),
            "{text}"
        );
        assert!(
            text.contains("address = \"/tmp/n/containerd.sock\""),
            "{text}"
        );
        assert!(text.contains("restrict_oom_score_adj = true"), "{text}");
        assert!(text.contains(&format!("sandbox_image = \"{SANDBOX_IMAGE}\"")));
    }

    #[test]
    fn the_kubelet_registers_tainted_on_the_node_address() {
        let yaml = kubelet_config_yaml(Path::new("/tmp/n/containerd.sock"), Path::new("/p/ca.crt"))
            .unwrap();
        let config: serde_json::Value = serde_yaml_ng::from_str(&yaml).unwrap();
        assert_eq!(config["registerWithTaints"][0]["key"], NODE_TAINT);
        assert_eq!(config["address"], NODE_IP);
        assert_eq!(
            config["containerRuntimeEndpoint"],
            "unix:///tmp/n/containerd.sock"
        );
        assert_eq!(config["authentication"]["anonymous"]["enabled"], false);
        assert_eq!(
            config["authentication"]["x509"]["clientCAFile"],
            "/p/ca.crt"
        );
    }

    #[test]
    fn pods_get_addresses_from_the_pod_subnet() {
        let config: serde_json::Value =
            serde_json::from_str(&cni_config(Path::new("/tmp/n/cni-state"))).unwrap();
        let bridge = &config["plugins"][0];
        assert_eq!(bridge["bridge"], POD_BRIDGE);
        assert_eq!(bridge["ipam"]["ranges"][0][0]["subnet"], POD_SUBNET);
        assert_eq!(bridge["ipam"]["dataDir"], "/tmp/n/cni-state");
    }
}
