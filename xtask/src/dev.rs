//! `cargo xtask dev`: the whole of OLM on this machine, from one command.
//!
//! Stage by stage: the binaries are built; an OCI registry, a control plane
//! and (when this machine can run one) a real node start; the images the
//! node runs are pushed (the pause image, `opm`, the example operator, and
//! OLM's services with NATS); the example catalog is published as an image
//! that serves itself; then OLM is installed:
//!
//! - `--services pods` (the default with a real node): by the Helm chart
//!   (`charts/olm`), as a user installs it, every service a pod on the node,
//!   the example catalog the chart's default catalog;
//! - `--services host`: OLM's CRDs applied and the services run as host
//!   processes with the admin identity (the developer loop: stop one and run
//!   it with `cargo xtask run` instead), the example catalog a CatalogSource;
//! - `--services none`: CRDs only.
//!
//! Everything is waited for until Ready. Then it says what to type next.
//!
//! When `cargo xtask envtest` has built Jaeger, it runs beside the rest and
//! OLM's services export their traces to it (host processes through
//! `OTEL_EXPORTER_OTLP_ENDPOINT`, pods through the chart's
//! `tracing.otlpEndpoint`); the banner says where to read them.
//!
//! Without a real node (not root, or no containerd) the control plane runs
//! with kwok only: pods cannot run, so the services run on the host, catalog
//! images cannot be served, and the example catalog is left out; the command
//! says so.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use olm_testkit::{
    ControlPlane, ControlPlaneOptions, Supervised,
    jaeger::Jaeger,
    node::{Mirror, NODE_IP, NODE_NAME, NODE_TAINT, NodeOptions, RealNode},
    registry::Registry,
};

use crate::workspace_root;

/// The namespace OLM's global catalogs live in.
const OLM_NAMESPACE: &str = "olm";
/// The example catalog's CatalogSource.
const EXAMPLE_CATALOG: &str = "example-catalog";
/// How long each wait may take.
const STAGE_TIMEOUT: Duration = Duration::from_secs(180);
/// packageserver's port on the node address.
const PACKAGESERVER_PORT: u16 = 5443;
/// How long (ms) the services' span batches wait before export
/// (`OTEL_BSP_SCHEDULE_DELAY`; the SDK's default is 5 s): short, so that a
/// trace shows in Jaeger while one is still looking for it.
const SPAN_EXPORT_DELAY_MS: &str = "500";

/// How OLM's services run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ServicesMode {
    /// As pods on the real node, installed by the Helm chart when there is
    /// one; as host processes otherwise.
    Auto,
    /// As pods on the real node, installed by the Helm chart.
    Pods,
    /// As processes on this host, with the admin identity (the developer loop).
    Host,
    /// Not at all: start them yourself with `cargo xtask run <service>`.
    None,
}

/// Options of `cargo xtask dev`.
#[derive(Debug, clap::Args)]
pub(crate) struct DevArgs {
    /// Where the control plane keeps its state and kubeconfig.
    #[arg(long, env = "OLM_DEV_DIR")]
    dir: Option<PathBuf>,
    /// How OLM's services run.
    #[arg(long, value_enum, default_value = "auto")]
    services: ServicesMode,
    /// Do not start a real node even when this machine can run one.
    #[arg(long)]
    no_node: bool,
}

/// The services `--services host` runs: (binary, extra arguments).
fn services(registry: &str, with_node: bool) -> Vec<(&'static str, Vec<String>)> {
    let lookup = if with_node { "cluster-ip" } else { "dns" };
    let mut list = vec![
        ("olm-operator", vec![]),
        (
            "catalog-operator",
            vec![
                format!("--service-lookup={lookup}"),
                format!("--insecure-registry={registry}"),
            ],
        ),
        (
            "bundle-unpacker",
            vec![format!("--insecure-registry={registry}")],
        ),
    ];
    // The samples, into the stand-in image and template APIs; nothing to
    // probe from a developer's machine.
    list.push((
        "samples-operator",
        vec![
            format!("--namespace={OLM_NAMESPACE}"),
            "--registry-probe=none".to_owned(),
        ],
    ));
    if with_node {
        // The aggregator reaches packageserver at the node address (it
        // refuses loopback endpoints).
        list.push((
            "packageserver",
            vec![
                format!("--namespace={OLM_NAMESPACE}"),
                format!("--global-namespace={OLM_NAMESPACE}"),
                format!("--service-lookup={lookup}"),
                format!("--bind-address={NODE_IP}"),
                format!("--secure-port={PACKAGESERVER_PORT}"),
            ],
        ));
    }
    list
}

/// Prints a stage as it starts and how long it took when it ends.
struct Stages {
    started: Instant,
    current: Option<(String, Instant)>,
}

impl Stages {
    fn begin(&mut self, name: &str) {
        self.end();
        println!("==> {name}");
        self.current = Some((name.to_owned(), Instant::now()));
    }

    fn end(&mut self) {
        if let Some((name, at)) = self.current.take() {
            println!("    {name}: done in {:.1} s", at.elapsed().as_secs_f64());
        }
    }
}

/// A service running as a host process under testkit's guardian: it stops
/// when dropped, and when `cargo xtask dev` dies however it dies.
struct HostService {
    process: Supervised,
    admin: String,
}

pub(crate) fn run(args: &DevArgs) -> Result<()> {
    let mut stages = Stages {
        started: Instant::now(),
        current: None,
    };
    stages.begin("installing the control plane's binaries (cargo xtask envtest)");
    crate::envtest::install(&crate::envtest::EnvtestArgs::default())?;

    stages.begin("building OLM's binaries");
    let packages = [
        "olm-operator",
        "catalog-operator",
        "bundle-unpacker",
        "packageserver",
        "marketplace-operator",
        "samples-operator",
        "opm",
        "example-operator",
    ];
    let mut cargo = Command::new(env!("CARGO"));
    cargo.current_dir(workspace_root()).arg("build");
    for package in packages {
        cargo.args(["-p", package]);
    }
    let status = cargo.status().context("running cargo build")?;
    if !status.success() {
        bail!("building OLM's binaries failed ({status})");
    }
    let bin = workspace_root().join("target").join("debug");

    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| workspace_root().join(".cache/dev"));
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("clearing {}", dir.display()))?;
    }
    std::fs::create_dir_all(dir.join("logs"))
        .with_context(|| format!("creating {}", dir.display()))?;

    let node_refusal = if args.no_node {
        Some("--no-node".to_owned())
    } else {
        RealNode::unsupported()
    };
    let mode = match (args.services, &node_refusal) {
        (ServicesMode::Pods, Some(reason)) => {
            bail!("--services pods needs a real node, and this machine cannot run one: {reason}")
        }
        (ServicesMode::Auto, Some(_)) => ServicesMode::Host,
        (ServicesMode::Auto, None) => ServicesMode::Pods,
        (mode, _) => mode,
    };

    stages.begin("starting an OCI registry");
    // Pods reach the registry at the node's address (catalog polls,
    // bundle pulls from inside OLM's pods), so in pods mode it listens on
    // every interface; otherwise on loopback only.
    let registry = if mode == ServicesMode::Pods {
        println!("    listening on every interface, for pods: do not run this on a shared network");
        Registry::start_listening_on("0.0.0.0")
    } else {
        Registry::start()
    }
    .context("starting the OCI registry (docker-registry)")?;
    let jaeger = start_jaeger(&mut stages, mode)?;
    let host = registry.host();
    // The registry as pods and images name it.
    let pod_host = if mode == ServicesMode::Pods {
        registry.host_at(NODE_IP)
    } else {
        host.clone()
    };
    stages.begin("starting the control plane (etcd, kube-apiserver, controllers, kwok)");
    let options = if node_refusal.is_none() {
        ControlPlaneOptions::for_real_node()
    } else {
        ControlPlaneOptions::default()
    };
    let plane =
        ControlPlane::start_in_with(&dir, &options).context("starting the control plane")?;

    let node = match &node_refusal {
        Some(reason) => {
            println!("    no real node: {reason}; pods run on kwok's fake node only");
            None
        }
        None => {
            stages.begin("pushing the node's images (pause, opm, example operator)");
            let runtime = tokio::runtime::Runtime::new()?;
            let revision = olm_images::git_revision();
            runtime.block_on(olm_images::push_node_images(
                &host,
                &bin.join("opm"),
                &bin.join("example-operator"),
                &revision,
            ))?;
            let opm_image = format!("{pod_host}/olm-rs/opm:{}", env!("CARGO_PKG_VERSION"));
            if mode == ServicesMode::Pods {
                stages.begin("pushing OLM's images (services, NATS)");
                runtime.block_on(olm_images::push_service_images(
                    &host,
                    &bin,
                    env!("CARGO_PKG_VERSION"),
                    &revision,
                ))?;
            }
            stages.begin("starting the real node (containerd, kubelet, kube-proxy)");
            let mut mirrors: Vec<Mirror> = olm_images::node_mirrors(&host)
                .into_iter()
                .map(|(registry, endpoint)| Mirror { registry, endpoint })
                .collect();
            if pod_host != host {
                mirrors.push(Mirror {
                    registry: pod_host.clone(),
                    endpoint: format!("http://{host}"),
                });
            }
            let node = RealNode::start(&plane, &NodeOptions { mirrors })
                .context("starting the real node")?;
            Some((node, opm_image))
        }
    };

    if mode == ServicesMode::Pods {
        let Some((_, opm_image)) = &node else {
            bail!("pods need the real node");
        };
        stages.begin("publishing the example catalog");
        let catalog = olm_images::example::publish(
            &bin.join("opm"),
            &pod_host,
            olm_images::example::VERSIONS,
            "latest",
            opm_image,
        )?;
        println!("    {catalog}");
        stages.begin("standing in for OpenShift's image and template APIs");
        openshift_stand_ins(&plane)?;
        stages.begin("installing OLM with its Helm chart (helm install --wait)");
        let values = dir.join("values.yaml");
        let otlp_endpoint = jaeger
            .as_ref()
            .map(|jaeger| jaeger.otlp_endpoint_at(NODE_IP));
        std::fs::write(&values, chart_values(&pod_host, otlp_endpoint.as_deref()))
            .with_context(|| format!("writing {}", values.display()))?;
        helm(
            &plane,
            &[
                "install",
                "olm",
                &workspace_root().join("charts/olm").display().to_string(),
                "--namespace",
                OLM_NAMESPACE,
                "--create-namespace",
                "--values",
                &values.display().to_string(),
                "--wait",
                "--timeout",
                "5m",
            ],
        )?;
        stages.begin("waiting for the example catalog to serve");
        wait_for_catalog(&plane)?;
        stages.end();
        println!();
        println!(
            "OLM is installed by its Helm chart, every service a pod on {NODE_NAME}, in {:.0} s.",
            stages.started.elapsed().as_secs_f64()
        );
        print_next_steps(&plane, &dir, true);
        println!("  kubectl -n {OLM_NAMESPACE} get pods -o wide");
        println!(
            "  {} --kubeconfig {} -n {OLM_NAMESPACE} status olm",
            olm_testkit::assets::bin_dir().join("helm").display(),
            plane.kubeconfig_path().display()
        );
        print_traces(jaeger.as_ref());
        println!("Press Ctrl-C to stop.");
        wait_for_ctrl_c()?;
        println!("stopping");
        drop(node);
        drop(plane);
        drop(registry);
        drop(jaeger);
        return Ok(());
    }

    stages.begin("standing in for OpenShift's image and template APIs");
    openshift_stand_ins(&plane)?;
    stages.begin("applying OLM's CRDs and the olm namespace");
    kubectl(
        &plane,
        &["apply", "--server-side", "-f"],
        Some(&workspace_root().join("deploy/crds")),
    )?;
    kubectl(
        &plane,
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd",
            "--all",
        ],
        None,
    )?;
    apply_yaml(
        &plane,
        &format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {OLM_NAMESPACE}\n"),
    )?;

    let mut running = Vec::new();
    if mode == ServicesMode::Host {
        stages.begin("starting OLM's services as host processes");
        if node.is_some() {
            apply_yaml(&plane, &packageserver_endpoints())?;
        }
        for (index, (name, extra)) in services(&host, node.is_some()).into_iter().enumerate() {
            running.push(start_service(
                &plane,
                &bin,
                name,
                &extra,
                &dir,
                index,
                jaeger.as_ref(),
            )?);
        }
        for service in &mut running {
            wait_ready(service)?;
        }
    }

    if let Some((_, opm_image)) = &node {
        stages.begin("publishing the example catalog and its CatalogSource");
        let catalog = olm_images::example::publish(
            &bin.join("opm"),
            &host,
            olm_images::example::VERSIONS,
            "latest",
            opm_image,
        )?;
        println!("    {catalog}");
        apply_yaml(&plane, &example_catalog_source(&host))?;
        if mode == ServicesMode::Host {
            stages.begin("waiting for the example catalog to serve");
            wait_for_catalog(&plane)?;
        }
    }
    stages.end();

    println!();
    println!(
        "OLM is ready in {:.0} s.",
        stages.started.elapsed().as_secs_f64()
    );
    print_next_steps(&plane, &dir, node.is_some());
    if !running.is_empty() {
        println!(
            "Services: {} (stop one with kill, then `cargo xtask run <service>`)",
            running
                .iter()
                .map(|s| {
                    let pid = s
                        .process
                        .pid()
                        .map_or_else(|| "?".to_owned(), |p| p.to_string());
                    format!("{} pid {pid} admin {}", s.process.name(), s.admin)
                })
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    print_traces(jaeger.as_ref());
    println!("Press Ctrl-C to stop.");
    wait_for_ctrl_c()?;
    println!("stopping");
    drop(running);
    drop(node);
    drop(plane);
    drop(registry);
    drop(jaeger);
    Ok(())
}

/// Starts Jaeger when `cargo xtask envtest` has built it; without it the
/// services export nothing, and the banner says how to get it. For pods its
/// OTLP receiver listens on every interface, as the registry does.
fn start_jaeger(stages: &mut Stages, mode: ServicesMode) -> Result<Option<Jaeger>> {
    if olm_testkit::assets::find_pinned("jaeger").is_err() {
        return Ok(None);
    }
    stages.begin("starting Jaeger (traces)");
    let jaeger = if mode == ServicesMode::Pods {
        Jaeger::start_with_otlp_on("0.0.0.0")
    } else {
        Jaeger::start()
    }
    .context("starting Jaeger")?;
    println!(
        "    OTLP/gRPC {}, query {}",
        jaeger.otlp_endpoint(),
        jaeger.query_url()
    );
    Ok(Some(jaeger))
}

/// Where the traces are, or how to get them.
fn print_traces(jaeger: Option<&Jaeger>) {
    let Some(jaeger) = jaeger else {
        println!("Traces: Jaeger is not installed; `cargo xtask envtest` builds it.");
        return;
    };
    let query = jaeger.query_url();
    println!(
        "Traces: Jaeger at {query} (OTLP/gRPC {}; `cargo xtask run <service> -- --otlp-endpoint {}`)",
        jaeger.otlp_endpoint(),
        jaeger.otlp_endpoint()
    );
    println!(
        "  curl -s '{query}/api/traces?service=catalog-operator&limit=5'   # the JSON API \
         (the UI page is a placeholder in a module build)"
    );
}

fn wait_for_ctrl_c() -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(tokio::signal::ctrl_c())?;
    Ok(())
}

/// What to type next.
fn print_next_steps(plane: &ControlPlane, dir: &Path, with_node: bool) {
    println!("  export KUBECONFIG={}", plane.kubeconfig_path().display());
    println!(
        "  export PATH={}:$PATH   # the pinned kubectl and helm",
        olm_testkit::assets::bin_dir().display()
    );
    if with_node {
        println!("Install the example operator and greet someone:");
        println!("  kubectl apply -f examples/install/");
        println!(
            "  kubectl get csv -n example-operator -w      # Succeeded, pod Running on {NODE_NAME}"
        );
        println!("  kubectl get greetings -n example-operator");
        println!("  kubectl get packagemanifests -n {OLM_NAMESPACE}");
    }
    println!("Logs: {}", dir.join("logs").display());
}

/// Waits until the example catalog serves and packageserver lists it.
fn wait_for_catalog(plane: &ControlPlane) -> Result<()> {
    wait_until(STAGE_TIMEOUT, "the example CatalogSource READY", || {
        let out = kubectl_output(
            plane,
            &[
                "get",
                "catalogsource",
                "-n",
                OLM_NAMESPACE,
                EXAMPLE_CATALOG,
                "-o",
                "jsonpath={.status.connectionState.lastObservedState}",
            ],
        )?;
        if out == "READY" {
            Ok(())
        } else {
            Err(anyhow::anyhow!("state {out:?}"))
        }
    })?;
    wait_until(
        STAGE_TIMEOUT,
        "packagemanifests through the aggregator",
        || {
            let out = kubectl_output(plane, &["get", "packagemanifests", "-n", OLM_NAMESPACE])?;
            if out.contains("example-operator") {
                Ok(())
            } else {
                Err(anyhow::anyhow!("{out}"))
            }
        },
    )
}

/// Runs the pinned helm against the cluster.
fn helm(plane: &ControlPlane, args: &[&str]) -> Result<()> {
    let helm = olm_testkit::assets::find_pinned("helm")
        .context("helm is not installed (cargo xtask envtest builds it)")?;
    let output = Command::new(helm)
        .arg("--kubeconfig")
        .arg(plane.kubeconfig_path())
        .args(args)
        .output()
        .context("running helm")?;
    if !output.status.success() {
        // Which component, why, and where its log is.
        let pods = kubectl_output(plane, &["get", "pods", "-n", OLM_NAMESPACE, "-o", "wide"])
            .unwrap_or_else(|e| e.to_string());
        let events = kubectl_output(
            plane,
            &[
                "get",
                "events",
                "-n",
                OLM_NAMESPACE,
                "--field-selector=type=Warning",
                "--sort-by=.lastTimestamp",
            ],
        )
        .unwrap_or_else(|e| e.to_string());
        bail!(
            "helm {} failed: {}{}\n\nOLM's pods:\n{pods}\n\nwarnings:\n{events}\n\n\
             a pod's log: kubectl -n {OLM_NAMESPACE} logs <pod> (KUBECONFIG={})",
            args.first().copied().unwrap_or_default(),
            String::from_utf8_lossy(&output.stdout).trim(),
            String::from_utf8_lossy(&output.stderr).trim(),
            plane.kubeconfig_path().display()
        );
    }
    Ok(())
}

/// The chart's values for this machine: every pod on the real node, no
/// cluster DNS (ClusterIPs instead), the registry over plain HTTP at the
/// node's address, the example catalog as the default catalog, and traces
/// to `otlp_endpoint` when there is one.
fn chart_values(registry: &str, otlp_endpoint: Option<&str>) -> String {
    let mut values = format!(
        "# Written by cargo xtask dev.
nodeSelector: {{kubernetes.io/hostname: {NODE_NAME}}}
tolerations: [{{key: {NODE_TAINT}, operator: Exists, effect: NoSchedule}}]
serviceLookup: cluster-ip
insecureRegistries: [\"{registry}\"]
# The example catalog is a default catalog, which the OperatorHub turns on
# and off.
marketplaceOperator: {{enabled: true}}
# The samples, into the stand-in image and template APIs.
samplesOperator: {{enabled: true, registryProbe: none}}
defaultCatalogs:
  - name: {EXAMPLE_CATALOG}
    image: {image}
    displayName: Example operators
    publisher: olm-rs
    pollInterval: 1m
",
        image = olm_images::example::catalog_image(registry, "latest"),
    );
    if let Some(endpoint) = otlp_endpoint {
        values.push_str(&format!("tracing: {{otlpEndpoint: \"{endpoint}\"}}\n"));
    }
    values
}

fn start_service(
    plane: &ControlPlane,
    bin: &Path,
    name: &'static str,
    extra: &[String],
    dir: &Path,
    index: usize,
    jaeger: Option<&Jaeger>,
) -> Result<HostService> {
    let log = dir.join("logs").join(format!("{name}.log"));
    let admin = format!("127.0.0.1:{}", 18080 + index);
    let kubeconfig = plane.kubeconfig_path().display().to_string();
    let otlp_endpoint = jaeger.map(Jaeger::otlp_endpoint);
    let mut env = vec![
        ("KUBECONFIG", kubeconfig.as_str()),
        ("OLM_ADMIN_BIND_ADDRESS", admin.as_str()),
    ];
    // Through the environment rather than `--otlp-endpoint`, so that a
    // service without the telemetry flags still starts.
    if let Some(endpoint) = &otlp_endpoint {
        env.push(("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()));
        env.push(("OTEL_BSP_SCHEDULE_DELAY", SPAN_EXPORT_DELAY_MS));
    }
    let process = Supervised::spawn(name, &bin.join(name), extra, &log, &env)
        .with_context(|| format!("starting {name}"))?;
    Ok(HostService { process, admin })
}

fn wait_ready(service: &mut HostService) -> Result<()> {
    let started = Instant::now();
    loop {
        if let Some(status) = service.process.exited() {
            bail!(
                "{} exited ({status}); its log: {}",
                service.process.name(),
                service.process.log().display()
            );
        }
        if http_ok(&service.admin, "/readyz") {
            println!(
                "    {} ready in {:.1} s (admin {})",
                service.process.name(),
                started.elapsed().as_secs_f64(),
                service.admin
            );
            return Ok(());
        }
        if started.elapsed() > STAGE_TIMEOUT {
            bail!(
                "{} not ready after {} s; its log: {}",
                service.process.name(),
                STAGE_TIMEOUT.as_secs(),
                service.process.log().display()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Whether `GET http://<address><path>` answers 200.
fn http_ok(address: &str, path: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(address) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).is_ok() && head.ends_with(b"200")
}

fn wait_until<F>(timeout: Duration, what: &str, mut check: F) -> Result<()>
where
    F: FnMut() -> Result<(), anyhow::Error>,
{
    let started = Instant::now();
    loop {
        match check() {
            Ok(()) => return Ok(()),
            Err(last) if started.elapsed() > timeout => {
                bail!(
                    "{what}: not true after {} s; last: {last:#}",
                    timeout.as_secs()
                )
            }
            Err(_) => std::thread::sleep(Duration::from_millis(500)),
        }
    }
}

fn kubectl(plane: &ControlPlane, args: &[&str], path: Option<&Path>) -> Result<()> {
    let mut command = plane.kubectl();
    command.args(args);
    if let Some(path) = path {
        command.arg(path);
    }
    let output = command.output().context("running kubectl")?;
    if !output.status.success() {
        bail!(
            "kubectl {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}

fn kubectl_output(plane: &ControlPlane, args: &[&str]) -> Result<String> {
    let output = plane
        .kubectl()
        .args(args)
        .output()
        .context("running kubectl")?;
    if !output.status.success() {
        bail!("{}", String::from_utf8_lossy(&output.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// Open CRDs standing in for OpenShift's image and template APIs
/// (`deploy/dev`), and the `openshift` namespace, so that samples-operator
/// has samples to keep.
fn openshift_stand_ins(plane: &ControlPlane) -> Result<()> {
    let crds = workspace_root().join("deploy/dev/openshift-image-and-template-apis.yaml");
    kubectl(plane, &["apply", "--server-side", "-f"], Some(&crds))?;
    kubectl(
        plane,
        &["wait", "--for=condition=Established", "--timeout=60s", "-f"],
        Some(&crds),
    )?;
    apply_yaml(
        plane,
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: openshift\n",
    )
}

fn apply_yaml(plane: &ControlPlane, yaml: &str) -> Result<()> {
    use std::io::Write;
    let mut child = plane
        .kubectl()
        .args(["apply", "--server-side", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("running kubectl")?;
    child
        .stdin
        .take()
        .context("kubectl stdin")?
        .write_all(yaml.as_bytes())?;
    let output = child.wait_with_output()?;
    if !output.status.success() {
        bail!(
            "kubectl apply failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}

/// The Service the APIService names, with an EndpointSlice at the node
/// address where the host's packageserver listens.
fn packageserver_endpoints() -> String {
    format!(
        "apiVersion: v1
kind: Service
metadata: {{name: packageserver-service, namespace: {OLM_NAMESPACE}}}
spec:
  ports: [{{name: https, port: 443, targetPort: {PACKAGESERVER_PORT}, protocol: TCP}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: packageserver-host
  namespace: {OLM_NAMESPACE}
  labels: {{kubernetes.io/service-name: packageserver-service}}
addressType: IPv4
ports: [{{name: https, port: {PACKAGESERVER_PORT}, protocol: TCP}}]
endpoints: [{{addresses: [\"{NODE_IP}\"], conditions: {{ready: true}}}}]
"
    )
}

/// The example catalog, served by a registry pod on the real node.
fn example_catalog_source(registry: &str) -> String {
    format!(
        "apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata: {{name: {EXAMPLE_CATALOG}, namespace: {OLM_NAMESPACE}}}
spec:
  sourceType: grpc
  image: {image}
  displayName: Example operators
  publisher: olm-rs
  updateStrategy: {{registryPoll: {{interval: 1m}}}}
  grpcPodConfig:
    securityContextConfig: restricted
    nodeSelector: {{kubernetes.io/hostname: {NODE_NAME}}}
    tolerations: [{{key: {NODE_TAINT}, operator: Exists, effect: NoSchedule}}]
",
        image = olm_images::example::catalog_image(registry, "latest"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_manifests_it_applies_are_valid_yaml_naming_the_node() {
        let catalog: serde_json::Value =
            serde_yaml_ng::from_str(&example_catalog_source("127.0.0.1:5000")).unwrap_or_default();
        assert_eq!(
            catalog["spec"]["image"],
            "127.0.0.1:5000/olm-rs/example-catalog:latest"
        );
        assert_eq!(
            catalog["spec"]["grpcPodConfig"]["tolerations"][0]["key"],
            NODE_TAINT
        );
        let documents: Vec<serde_json::Value> =
            serde_yaml_ng::Deserializer::from_str(&packageserver_endpoints())
                .map(|d| serde::Deserialize::deserialize(d).unwrap_or_default())
                .collect();
        assert_eq!(documents.len(), 2);
        assert_eq!(documents[1]["endpoints"][0]["addresses"][0], NODE_IP);
        assert_eq!(
            documents[1]["metadata"]["labels"]["kubernetes.io/service-name"],
            documents[0]["metadata"]["name"]
        );
    }

    #[test]
    fn the_chart_values_put_every_pod_on_the_node_and_serve_the_example_catalog() {
        let values: serde_json::Value =
            serde_yaml_ng::from_str(&chart_values("10.250.0.1:5000", None)).unwrap_or_default();
        assert_eq!(
            values["nodeSelector"]["kubernetes.io/hostname"], NODE_NAME,
            "{values}"
        );
        assert_eq!(values["tolerations"][0]["key"], NODE_TAINT);
        assert_eq!(values["serviceLookup"], "cluster-ip");
        assert_eq!(values["insecureRegistries"][0], "10.250.0.1:5000");
        assert_eq!(values["defaultCatalogs"][0]["name"], EXAMPLE_CATALOG);
        assert_eq!(
            values["defaultCatalogs"][0]["image"],
            "10.250.0.1:5000/olm-rs/example-catalog:latest"
        );
        assert_eq!(values["tracing"], serde_json::Value::Null);
    }

    #[test]
    fn with_jaeger_the_chart_exports_traces_to_it() {
        let values: serde_json::Value = serde_yaml_ng::from_str(&chart_values(
            "10.250.0.1:5000",
            Some("http://10.250.0.1:4317"),
        ))
        .unwrap_or_default();
        assert_eq!(
            values["tracing"]["otlpEndpoint"], "http://10.250.0.1:4317",
            "{values}"
        );
    }

    #[test]
    fn without_a_node_services_dial_by_dns_and_packageserver_stays_off() {
        let names: Vec<&str> = services("127.0.0.1:5000", false)
            .iter()
            .map(|(n, _)| *n)
            .collect();
        assert!(!names.contains(&"packageserver"), "{names:?}");
        let with_node = services("127.0.0.1:5000", true);
        let catalog = with_node
            .iter()
            .find(|(n, _)| *n == "catalog-operator")
            .map(|(_, a)| a.clone())
            .unwrap_or_default();
        assert!(catalog.contains(&"--service-lookup=cluster-ip".to_owned()));
        assert!(catalog.contains(&"--insecure-registry=127.0.0.1:5000".to_owned()));
    }
}
