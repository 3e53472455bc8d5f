//! `cargo xtask bench scale`: olm-operator on a real control plane with many
//! namespaces and operators installed for all namespaces.
//!
//! Creates `OLM_SCALE_NAMESPACES` (default 1,000) namespaces and
//! `OLM_SCALE_OPERATORS` (default 10) operators, each in its own namespace
//! with an OperatorGroup targeting all namespaces, then runs the built
//! `olm-operator` binary and prints:
//!
//! - time and CPU seconds until every CSV is Succeeded and every copy exists;
//! - the binary's peak and final RSS (`/proc/<pid>/status`);
//! - API writes (the binary's own `olm_operator_api_writes_total`) and copied
//!   CSV writes (`olm_operator_copied_csv_writes_total`), against the number
//!   of copies;
//! - writes during an idle period afterwards (should be none);
//! - with `disableCopiedCSVs` set: time until no copy is left, and copies
//!   remaining (should be zero).
//!
//! Targets (issue 5): RSS under 150 MiB, each copy written once, zero copies
//! with `disableCopiedCSVs`.
//!
//! `cargo xtask bench --vs-upstream scale` runs the same with upstream OLM's
//! olm-operator (`OLM_UPSTREAM_OLM`) too: each run is a child process of
//! this bench (`--one=ours|upstream`) on a fresh control plane with an
//! audit log, alternating who goes first (`OLM_BENCH_SCALE_RUNS`, default
//! 1), and API writes are counted from the audit log by User-Agent for
//! both. The bench creates each operator's ServiceAccount and Role, as an
//! InstallPlan would have: upstream requires them before it installs.
//!
//! `OLM_SCALE_WRAP` runs our binary under a profiler (`heaptrack -o
//! /tmp/scale`, say), for where its memory goes.
//!
//! While the binary runs, its RSS, thread count and copy writes are sampled
//! every [`SAMPLE_EVERY`] and printed as a timeline, so a peak can be matched
//! with what the operator was doing at the time.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::{
    collections::BTreeMap,
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::{
    api::core::v1::Namespace,
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client,
    api::{ListParams, Patch, PatchParams, PostParams},
    core::PartialObjectMeta,
};
use olm_api::{csv::ClusterServiceVersion, olm_config::OLMConfig, operator_group::OperatorGroup};
use olm_testkit::side_by_side::{self, env_count};
use serde_json::json;

/// How long convergence may take before the bench gives up.
const CONVERGE_DEADLINE: Duration = Duration::from_secs(900);

/// How long the operator is watched for writes after it converged.
const IDLE_PERIOD: Duration = Duration::from_secs(20);

/// Requests in flight while the bench creates its objects.
const CREATE_CONCURRENCY: usize = 16;

/// How often the timeline samples the binary.
const SAMPLE_EVERY: Duration = Duration::from_secs(1);

/// One line of the timeline is printed per this many samples.
const SAMPLES_PER_LINE: usize = 5;

struct Process {
    child: Child,
    /// Ours serves metrics; upstream's run has none to read here.
    metrics_url: Option<String>,
}

/// One sample of the timeline.
#[derive(Clone, Copy, Debug)]
struct Sample {
    /// Seconds since the binary started.
    at: f64,
    rss_mib: f64,
    threads: u64,
    copy_writes: f64,
}

/// Samples the binary every [`SAMPLE_EVERY`] until dropped.
struct Timeline {
    samples: std::sync::Arc<std::sync::Mutex<Vec<Sample>>>,
    marks: Vec<(f64, &'static str)>,
    started: Instant,
    task: tokio::task::JoinHandle<()>,
}

impl Timeline {
    fn start(pid: u32, metrics_url: Option<String>) -> Self {
        let samples = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let started = Instant::now();
        let sink = samples.clone();
        let task = tokio::spawn(async move {
            loop {
                let copy_writes = match &metrics_url {
                    Some(url) => sum(
                        &parse_metrics(&reqwest_free_get(url).await),
                        "olm_operator_copied_csv_writes_total",
                    ),
                    None => 0.0,
                };
                let sample = Sample {
                    at: started.elapsed().as_secs_f64(),
                    rss_mib: side_by_side::rss_kib(pid).unwrap_or(0) as f64 / 1024.0,
                    threads: side_by_side::proc_status(pid, "Threads:").unwrap_or(0),
                    copy_writes,
                };
                sink.lock().unwrap().push(sample);
                tokio::time::sleep(SAMPLE_EVERY).await;
            }
        });
        Self {
            samples,
            marks: Vec::new(),
            started,
            task,
        }
    }

    fn mark(&mut self, what: &'static str) {
        self.marks
            .push((self.started.elapsed().as_secs_f64(), what));
    }

    /// Prints the highest RSS of every [`SAMPLES_PER_LINE`] samples, the copy
    /// writes so far and the marks that fall in that window.
    fn print(&self) {
        self.task.abort();
        let samples = self.samples.lock().unwrap().clone();
        println!("timeline (s since start: max RSS MiB, threads, copy writes so far):");
        for chunk in samples.chunks(SAMPLES_PER_LINE) {
            let (Some(first), Some(last)) = (chunk.first(), chunk.last()) else {
                continue;
            };
            let peak = chunk.iter().map(|s| s.rss_mib).fold(0.0, f64::max);
            let threads = chunk.iter().map(|s| s.threads).max().unwrap_or(0);
            let marks: Vec<&str> = self
                .marks
                .iter()
                .filter(|(at, _)| *at >= first.at && *at < last.at + SAMPLE_EVERY.as_secs_f64())
                .map(|(_, what)| *what)
                .collect();
            println!(
                "  {:>6.0} s: {peak:>6.1} MiB, {threads:>3} threads, {:>6} copy writes {}",
                first.at,
                last.copy_writes,
                marks.join(", ")
            );
        }
    }
}

fn parse_metrics(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (name, value) = l.rsplit_once(' ')?;
            Some((name.to_owned(), value.parse().ok()?))
        })
        .collect()
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Process {
    fn proc_status(&self, field: &str) -> u64 {
        side_by_side::proc_status(self.child.id(), field).unwrap_or(0)
    }

    /// Peak and current RSS in MiB.
    fn rss_mib(&self) -> (f64, f64) {
        let pid = self.child.id();
        let mib = |kib: Option<u64>| kib.unwrap_or(0) as f64 / 1024.0;
        (
            mib(side_by_side::peak_rss_kib(pid)),
            mib(side_by_side::rss_kib(pid)),
        )
    }

    /// User plus system CPU seconds.
    fn cpu_seconds(&self) -> f64 {
        side_by_side::cpu_seconds(self.child.id()).unwrap_or(0.0)
    }

    async fn metrics(&self) -> BTreeMap<String, f64> {
        match &self.metrics_url {
            Some(url) => parse_metrics(&reqwest_free_get(url).await),
            None => BTreeMap::new(),
        }
    }
}

/// A plain HTTP GET over a TCP socket (the admin server speaks HTTP/1.1).
async fn reqwest_free_get(url: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = url.trim_start_matches("http://").split('/').next().unwrap();
    let Ok(mut stream) = tokio::net::TcpStream::connect(address).await else {
        return String::new();
    };
    let request = format!("GET /metrics HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut body = Vec::new();
    let _ = stream.read_to_end(&mut body).await;
    let text = String::from_utf8_lossy(&body).into_owned();
    text.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn sum(metrics: &BTreeMap<String, f64>, prefix: &str) -> f64 {
    metrics
        .iter()
        .filter(|(k, _)| k.starts_with(prefix))
        .map(|(_, v)| v)
        .sum()
}

fn operator_csv_name(index: usize) -> String {
    format!("scale-operator-{index}.v1.0.0")
}

fn operator_csv(namespace: &str, index: usize) -> serde_json::Value {
    let group = format!("scale{index}.example.test");
    let name = operator_csv_name(index);
    json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": { "name": name, "namespace": namespace },
        "spec": {
            "displayName": format!("Scale Operator {index}"),
            "version": "1.0.0",
            "installModes": [
                { "type": "OwnNamespace", "supported": true },
                { "type": "SingleNamespace", "supported": true },
                { "type": "MultiNamespace", "supported": false },
                { "type": "AllNamespaces", "supported": true }
            ],
            "customresourcedefinitions": {
                "owned": [{ "name": format!("gizmos.{group}"), "version": "v1", "kind": "Gizmo" }]
            },
            "install": {
                "strategy": "deployment",
                "spec": {
                    "permissions": [{
                        "serviceAccountName": "scale-operator",
                        "rules": [{ "apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"] }]
                    }],
                    "deployments": [{
                        "name": "scale-controller",
                        "spec": {
                            "replicas": 1,
                            "selector": { "matchLabels": { "app": "scale-controller" } },
                            "template": {
                                "metadata": { "labels": { "app": "scale-controller" } },
                                "spec": {
                                    "serviceAccountName": "scale-operator",
                                    "containers": [{ "name": "manager", "image": "registry.example.test/scale:v1" }]
                                }
                            }
                        }
                    }]
                }
            }
        }
    })
}

async fn create_crd(client: &Client, index: usize) {
    let group = format!("scale{index}.example.test");
    let name = format!("gizmos.{group}");
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": {
            "group": group, "scope": "Namespaced",
            "names": { "plural": "gizmos", "singular": "gizmo", "kind": "Gizmo", "listKind": "GizmoList" },
            "versions": [{ "name": "v1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": { "type": "object", "x-kubernetes-preserve-unknown-fields": true } } }]
        }
    }))
    .unwrap();
    let _ = Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await;
    olm_testkit::control_plane().wait_crd_established(&name);
}

async fn count_copies(client: &Client) -> usize {
    Api::<PartialObjectMeta<ClusterServiceVersion>>::all(client.clone())
        .list_metadata(&ListParams::default().labels("olm.copiedFrom"))
        .await
        .map(|l| l.items.len())
        .unwrap_or(usize::MAX)
}

async fn succeeded(client: &Client) -> usize {
    Api::<ClusterServiceVersion>::all(client.clone())
        .list(&ListParams::default().labels("!olm.copiedFrom"))
        .await
        .map(|l| {
            l.items
                .iter()
                .filter(|c| {
                    c.status
                        .as_ref()
                        .and_then(|s| s.phase.as_ref())
                        .map(|p| p.to_string())
                        == Some("Succeeded".to_owned())
                })
                .count()
        })
        .unwrap_or(0)
}

async fn wait_until<F, Fut>(what: &str, mut check: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while !check().await {
        assert!(
            started.elapsed() < CONVERGE_DEADLINE,
            "{what}: not within {CONVERGE_DEADLINE:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    started.elapsed()
}

/// The olm-operator a run measures.
enum Operator {
    /// This package's binary.
    Ours,
    /// Upstream OLM's, built by `cargo xtask upstream`.
    Upstream(PathBuf),
}

impl Operator {
    /// The start of the User-Agent its API requests carry: ours names
    /// itself; upstream's client-go uses its binary's file name.
    fn user_agent_prefix(&self) -> String {
        match self {
            Self::Ours => "olm-operator/".to_owned(),
            Self::Upstream(path) => path
                .file_name()
                .map(|n| format!("{}/", n.to_string_lossy()))
                .unwrap_or_default(),
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--vs-upstream") {
        vs_upstream();
        return;
    }
    let one = args.iter().find_map(|a| a.strip_prefix("--one="));
    let operator = match one {
        None | Some(side_by_side::OURS) => Operator::Ours,
        Some(side_by_side::UPSTREAM) => Operator::Upstream(
            std::env::var_os("OLM_UPSTREAM_OLM")
                .map(PathBuf::from)
                .expect("OLM_UPSTREAM_OLM names upstream's olm-operator"),
        ),
        Some(other) => panic!("--one={other}: ours or upstream"),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let figures = runtime.block_on(measure(&operator, one.is_some()));
    if one.is_some() {
        figures.print();
    }
}

/// `cargo xtask bench --vs-upstream scale`: ours and upstream's, each on a
/// fresh control plane (a child process per run), alternating.
fn vs_upstream() {
    assert!(
        std::env::var_os("OLM_UPSTREAM_OLM").is_some(),
        "OLM_UPSTREAM_OLM is not set: run `cargo xtask bench --vs-upstream scale`, which builds upstream's olm-operator"
    );
    let namespaces = env_count("OLM_SCALE_NAMESPACES", 1000);
    let operators = env_count("OLM_SCALE_OPERATORS", 10);
    let runs = env_count("OLM_BENCH_SCALE_RUNS", 1).max(1);
    let input = format!("{namespaces} ns, {operators} ops");
    side_by_side::run_on_control_planes("scale", &input, runs);
}

/// A command running `binary`, under the profiler `OLM_SCALE_WRAP` names
/// when it is set (`heaptrack -o /tmp/scale`, say: a command and its
/// arguments, split at spaces). The RSS and CPU figures are then the
/// wrapper's, not the binary's: a wrapped run is for its profile.
fn wrapped(binary: &str) -> Command {
    match std::env::var("OLM_SCALE_WRAP") {
        Ok(wrapper) if !wrapper.trim().is_empty() => {
            let mut words = wrapper.split_whitespace();
            let mut command = Command::new(words.next().unwrap_or_default());
            command.args(words).arg(binary);
            println!("running olm-operator under {wrapper:?}: RSS and CPU below are the wrapper's");
            command
        }
        _ => Command::new(binary),
    }
}

/// One run: the cluster set up, `operator` started, the CSVs created, and
/// convergence, idleness and `disableCopiedCSVs` measured. With `audited`
/// (the control plane keeps an audit log), API writes are counted from the
/// log by the operator's User-Agent, the same way for both
/// implementations; otherwise from our binary's own metrics.
async fn measure(operator: &Operator, audited: bool) -> side_by_side::Figures {
    let namespace_count = env_count("OLM_SCALE_NAMESPACES", 1000);
    let operator_count = env_count("OLM_SCALE_OPERATORS", 10);
    println!("scale: {namespace_count} namespaces, {operator_count} AllNamespaces operators");

    let plane = olm_testkit::control_plane();
    // OLM's own CRDs, as upstream ships them (its olm-operator cannot run
    // with our OperatorHub CRD installed).
    olm_testkit::operators_crds_installed();
    let client = plane.client().await;

    let started = Instant::now();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    futures::stream::iter(0..namespace_count)
        .map(|i| {
            let namespaces = namespaces.clone();
            async move {
                let ns: Namespace = serde_json::from_value(
                    json!({ "metadata": { "name": format!("tenant-{i:05}") } }),
                )
                .unwrap();
                namespaces
                    .create(&PostParams::default(), &ns)
                    .await
                    .map(|_| ())
            }
        })
        .buffer_unordered(CREATE_CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await
        .unwrap();
    for index in 0..operator_count {
        let namespace = format!("operator-{index:02}");
        let ns: Namespace =
            serde_json::from_value(json!({ "metadata": { "name": namespace } })).unwrap();
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .unwrap();
        create_crd(&client, index).await;
        create_service_account(&client, &namespace, &operator_csv_name(index)).await;
        let group: OperatorGroup = serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
            "metadata": { "name": "global", "namespace": namespace }, "spec": {}
        }))
        .unwrap();
        Api::<OperatorGroup>::namespaced(client.clone(), &namespace)
            .create(&PostParams::default(), &group)
            .await
            .unwrap();
    }
    let total_namespaces = namespaces
        .list_metadata(&ListParams::default())
        .await
        .unwrap()
        .items
        .len();
    println!(
        "setup: {total_namespaces} namespaces in the cluster, created in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let port = free_port();
    let child = match operator {
        Operator::Ours => wrapped(env!("CARGO_BIN_EXE_olm-operator"))
            .arg("--kubeconfig")
            .arg(plane.kubeconfig_path())
            .args(["--admin-bind-address", &format!("127.0.0.1:{port}")])
            .env("RUST_LOG", "olm_operator=warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
        // Out of cluster, as upstream's own e2e runs it: the kubeconfig
        // from the environment, no ClusterOperator status.
        Operator::Upstream(path) => {
            let log = side_by_side::out_dir().join("scale-upstream-olm.log");
            std::fs::create_dir_all(side_by_side::out_dir()).unwrap();
            println!("upstream's log: {}", log.display());
            Command::new(path)
                .env("KUBECONFIG", plane.kubeconfig_path())
                .args(["--writeStatusName=", "--writePackageServerStatusName="])
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap())
                .spawn()
                .unwrap()
        }
    };
    let metrics_url =
        matches!(operator, Operator::Ours).then(|| format!("http://127.0.0.1:{port}/metrics"));
    let mut process = Process { child, metrics_url };
    let agent = operator.user_agent_prefix();
    let mut audit = audited.then(|| {
        olm_testkit::audit::AuditLog::from_end(
            &plane
                .audit_log()
                .expect("the control plane keeps an audit log"),
        )
        .unwrap()
    });
    let mut timeline = Timeline::start(process.child.id(), process.metrics_url.clone());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (_, idle_rss) = process.rss_mib();
    let idle_cpu = process.cpu_seconds();
    println!(
        "olm-operator idle with {total_namespaces} namespaces: RSS {idle_rss:.1} MiB, {idle_cpu:.2} CPU s"
    );
    let mut figures = side_by_side::Figures::default();
    figures.add("RSS idle, before the CSVs", "MiB", idle_rss);
    // Writes from start-up (before the CSVs) are not the convergence's.
    let mut startup_writes = 0.0;
    if let Some(audit) = audit.as_mut() {
        startup_writes = writes_by(&audit.read_new().unwrap(), &agent);
    }

    let csv_started = Instant::now();
    timeline.mark("CSVs created");
    for index in 0..operator_count {
        let namespace = format!("operator-{index:02}");
        let csv: ClusterServiceVersion =
            serde_json::from_value(operator_csv(&namespace, index)).unwrap();
        Api::<ClusterServiceVersion>::namespaced(client.clone(), &namespace)
            .create(&PostParams::default(), &csv)
            .await
            .unwrap();
    }
    let expected_copies = operator_count * (total_namespaces - 1);
    wait_until("every copy written", || async {
        succeeded(&client).await == operator_count && count_copies(&client).await == expected_copies
    })
    .await;
    let converged = csv_started.elapsed();
    timeline.mark("converged");
    // Let the last writes land in the metrics.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let cpu = process.cpu_seconds() - idle_cpu;
    let metrics = process.metrics().await;
    let mut writes = sum(&metrics, "olm_operator_api_writes_total");
    if let Some(audit) = audit.as_mut() {
        let requests = audit.read_new().unwrap();
        print_top_agents(&requests);
        let audited_writes = writes_by(&requests, &agent);
        if process.metrics_url.is_some() {
            println!("API writes: {writes} by the metrics, {audited_writes} in the audit log");
        }
        writes = audited_writes;
    }
    let copy_writes = sum(&metrics, "olm_operator_copied_csv_writes_total");
    let (peak, now) = process.rss_mib();
    println!(
        "converged: {operator_count} CSVs Succeeded and {expected_copies} copies {:.1} s after the CSVs were created; olm-operator used {cpu:.1} CPU s",
        converged.as_secs_f64(),
    );
    println!(
        "API writes: {writes} total ({:.2} per copy); copied CSV writes: {copy_writes} ({:.2} per copy); {startup_writes} at start-up",
        writes / expected_copies as f64,
        copy_writes / expected_copies as f64
    );
    for (name, value) in metrics
        .iter()
        .filter(|(k, _)| k.starts_with("olm_operator_api_writes_total"))
    {
        println!("  {name} {value}");
    }
    println!("RSS: peak {peak:.1} MiB, now {now:.1} MiB (target < 150 MiB)");
    figures.add("time to converge", "s", converged.as_secs_f64());
    figures.add("CPU seconds to converge", "s", cpu);
    figures.add("API writes to converge", "writes", writes);
    figures.add("peak RSS", "MiB", peak);

    tokio::time::sleep(IDLE_PERIOD).await;
    let after = process.metrics().await;
    let idle_writes = writes_since(audit.as_mut(), &agent, &metrics, &after);
    println!(
        "idle {} s: {idle_writes} API writes, {} copied CSV writes",
        IDLE_PERIOD.as_secs(),
        sum(&after, "olm_operator_copied_csv_writes_total") - copy_writes
    );

    timeline.mark("idle period over; disableCopiedCSVs");
    let disable_started = Instant::now();
    Api::<OLMConfig>::all(client.clone())
        .patch(
            "cluster",
            &PatchParams::apply("scale-bench").force(),
            &Patch::Apply(json!({
                "apiVersion": "operators.coreos.com/v1", "kind": "OLMConfig",
                "metadata": { "name": "cluster" },
                "spec": { "features": { "disableCopiedCSVs": true } }
            })),
        )
        .await
        .unwrap();
    let cpu_before = process.cpu_seconds();
    wait_until("no copies left", || async {
        count_copies(&client).await == 0
    })
    .await;
    let disabled = disable_started.elapsed();
    timeline.mark("no copy left");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (peak, now) = process.rss_mib();
    let final_metrics = process.metrics().await;
    let disable_writes = writes_since(audit.as_mut(), &agent, &after, &final_metrics);
    println!(
        "disableCopiedCSVs: {} copies left after {:.1} s, {:.1} CPU s, {disable_writes} API writes; RSS peak {peak:.1} MiB, now {now:.1} MiB",
        count_copies(&client).await,
        disabled.as_secs_f64(),
        process.cpu_seconds() - cpu_before,
    );
    figures.add(
        "disableCopiedCSVs: time to no copy",
        "s",
        disabled.as_secs_f64(),
    );
    figures.add("disableCopiedCSVs: API writes", "writes", disable_writes);
    println!(
        "threads: {}; RSS now {:.1} MiB anonymous, {:.1} MiB file-backed (the binary's pages)",
        process.proc_status("Threads:"),
        process.proc_status("RssAnon:") as f64 / 1024.0,
        process.proc_status("RssFile:") as f64 / 1024.0,
    );
    timeline.print();
    let _ = process.child.kill();
    figures
}

/// The operator's API writes since the last look: from the audit log (by
/// `agent`) when there is one, else the growth of our binary's write
/// metric from `before` to `now`.
fn writes_since(
    audit: Option<&mut olm_testkit::audit::AuditLog>,
    agent: &str,
    before: &BTreeMap<String, f64>,
    now: &BTreeMap<String, f64>,
) -> f64 {
    match audit {
        Some(audit) => writes_by(&audit.read_new().unwrap(), agent),
        None => {
            sum(now, "olm_operator_api_writes_total") - sum(before, "olm_operator_api_writes_total")
        }
    }
}

/// Writes (create, update, patch, delete, deletecollection) by clients
/// whose User-Agent starts with `agent`.
fn writes_by(requests: &[olm_testkit::audit::Request], agent: &str) -> f64 {
    requests
        .iter()
        .filter(|r| r.user_agent.starts_with(agent) && r.is_write())
        .count() as f64
}

/// The clients that made the most requests, so a User-Agent that does not
/// match what [`writes_by`] looks for shows.
fn print_top_agents(requests: &[olm_testkit::audit::Request]) {
    let by_agent = olm_testkit::audit::count_by(requests, |r| {
        r.user_agent
            .split(' ')
            .next()
            .unwrap_or_default()
            .to_owned()
    });
    let mut top: Vec<_> = by_agent.into_iter().collect();
    top.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    println!("requests by client while converging:");
    for (agent, n) in top.iter().take(6) {
        println!("  {n:>7}  {agent}");
    }
}

/// The operator's ServiceAccount with the namespaced rules its CSV asks
/// for, as an InstallPlan would have created them: upstream's olm-operator
/// reports a CSV whose ServiceAccount is missing as RequirementsNotMet.
async fn create_service_account(client: &Client, namespace: &str, csv: &str) {
    // The labels an InstallPlan's RBAC carries: upstream finds the roles to
    // widen for an AllNamespaces group by them.
    let owner = json!({
        "olm.owner": csv, "olm.owner.namespace": namespace,
        "olm.owner.kind": "ClusterServiceVersion",
    });
    let objects = [
        json!({ "apiVersion": "v1", "kind": "ServiceAccount", "metadata": { "name": "scale-operator" } }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": { "name": "scale-operator", "labels": owner },
            "rules": [{ "apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"] }]
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": { "name": "scale-operator", "labels": owner },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "scale-operator" },
            "subjects": [{ "kind": "ServiceAccount", "name": "scale-operator", "namespace": namespace }]
        }),
    ];
    for body in objects {
        let object: kube::api::DynamicObject = serde_json::from_value(body).unwrap();
        let types = object.types.clone().expect("apiVersion and kind");
        let (group, version) = types
            .api_version
            .split_once('/')
            .unwrap_or(("", &types.api_version));
        let resource = kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
            group,
            version,
            &types.kind,
        ));
        Api::<kube::api::DynamicObject>::namespaced_with(client.clone(), namespace, &resource)
            .create(&PostParams::default(), &object)
            .await
            .unwrap();
    }
}
