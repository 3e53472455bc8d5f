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

fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

struct Process {
    child: Child,
    metrics_url: String,
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
    fn start(pid: u32, metrics_url: String) -> Self {
        let samples = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let started = Instant::now();
        let sink = samples.clone();
        let task = tokio::spawn(async move {
            let process = ProcStatus(pid);
            loop {
                let copy_writes = sum(
                    &parse_metrics(&reqwest_free_get(&metrics_url).await),
                    "olm_operator_copied_csv_writes_total",
                );
                let sample = Sample {
                    at: started.elapsed().as_secs_f64(),
                    rss_mib: process.field("VmRSS:") as f64 / 1024.0,
                    threads: process.field("Threads:"),
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

/// Fields of `/proc/<pid>/status`.
struct ProcStatus(u32);

impl ProcStatus {
    fn field(&self, field: &str) -> u64 {
        let text = std::fs::read_to_string(format!("/proc/{}/status", self.0)).unwrap_or_default();
        text.lines()
            .find(|l| l.starts_with(field))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
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
        ProcStatus(self.child.id()).field(field)
    }

    /// Peak and current RSS in MiB.
    fn rss_mib(&self) -> (f64, f64) {
        (
            self.proc_status("VmHWM:") as f64 / 1024.0,
            self.proc_status("VmRSS:") as f64 / 1024.0,
        )
    }

    /// User plus system CPU seconds.
    fn cpu_seconds(&self) -> f64 {
        let text =
            std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap_or_default();
        // Fields after the command name (which is in parentheses).
        let rest = text.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks = |i: usize| {
            fields
                .get(i)
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        // utime and stime are fields 14 and 15 of the whole line, 12 and 13
        // after the command name.
        (ticks(11) + ticks(12)) / 100.0
    }

    async fn metrics(&self) -> BTreeMap<String, f64> {
        parse_metrics(&reqwest_free_get(&self.metrics_url).await)
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

fn operator_csv(namespace: &str, index: usize) -> serde_json::Value {
    let group = format!("scale{index}.example.test");
    let name = format!("scale-operator-{index}.v1.0.0");
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

#[tokio::main]
async fn main() {
    let namespace_count = env_count("OLM_SCALE_NAMESPACES", 1000);
    let operator_count = env_count("OLM_SCALE_OPERATORS", 10);
    println!("scale: {namespace_count} namespaces, {operator_count} AllNamespaces operators");

    let plane = olm_testkit::control_plane();
    plane.install_crds(&workspace_root().join("deploy/crds"));
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
    let mut process = Process {
        child: Command::new(env!("CARGO_BIN_EXE_olm-operator"))
            .arg("--kubeconfig")
            .arg(plane.kubeconfig_path())
            .args(["--admin-bind-address", &format!("127.0.0.1:{port}")])
            .env("RUST_LOG", "olm_operator=warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
        metrics_url: format!("http://127.0.0.1:{port}/metrics"),
    };
    let mut timeline = Timeline::start(process.child.id(), process.metrics_url.clone());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (_, idle_rss) = process.rss_mib();
    let idle_cpu = process.cpu_seconds();
    println!(
        "olm-operator idle with {total_namespaces} namespaces: RSS {idle_rss:.1} MiB, {idle_cpu:.2} CPU s"
    );

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
    let writes = sum(&metrics, "olm_operator_api_writes_total");
    let copy_writes = sum(&metrics, "olm_operator_copied_csv_writes_total");
    let (peak, now) = process.rss_mib();
    println!(
        "converged: {operator_count} CSVs Succeeded and {expected_copies} copies {:.1} s after the CSVs were created; olm-operator used {cpu:.1} CPU s",
        converged.as_secs_f64(),
    );
    println!(
        "API writes: {writes} total ({:.2} per copy); copied CSV writes: {copy_writes} ({:.2} per copy)",
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

    tokio::time::sleep(IDLE_PERIOD).await;
    let after = process.metrics().await;
    println!(
        "idle {} s: {} API writes, {} copied CSV writes",
        IDLE_PERIOD.as_secs(),
        sum(&after, "olm_operator_api_writes_total") - writes,
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
    timeline.mark("no copy left");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (peak, now) = process.rss_mib();
    let final_metrics = process.metrics().await;
    println!(
        "disableCopiedCSVs: {} copies left after {:.1} s, {:.1} CPU s, {} API writes; RSS peak {peak:.1} MiB, now {now:.1} MiB",
        count_copies(&client).await,
        disable_started.elapsed().as_secs_f64() - 3.0,
        process.cpu_seconds() - cpu_before,
        sum(&final_metrics, "olm_operator_api_writes_total")
            - sum(&after, "olm_operator_api_writes_total"),
    );
    println!("threads: {}", process.proc_status("Threads:"));
    timeline.print();
    let _ = process.child.kill();
}
