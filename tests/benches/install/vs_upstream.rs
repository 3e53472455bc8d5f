//! `cargo xtask bench --vs-upstream install`: ours and upstream OLM's
//! catalog-operator and olm-operator, each run as processes out of cluster
//! against a fresh control plane (one child process of this bench per run,
//! alternating who goes first; `OLM_BENCH_INSTALL_RUNS`, default 3).
//!
//! Both get the same catalog, served by our registry on loopback, whose
//! bundles carry every manifest (`olm.bundle.object`) and name no image,
//! so neither unpacks anything: upstream unpacks every bundle that names
//! an image, with a Job running its opm image, which this machine cannot
//! pull. Both get the CRDs upstream
//! ships (`operators.coreos.com` only) and an OwnNamespace OperatorGroup.
//!
//! Per run, after both CatalogSources are READY (connecting is not
//! timed):
//! - `OLM_BENCH_INSTALLS` (default 20) sequential installs, one package
//!   each: Subscription created -> CSV Succeeded, p50 and p90;
//! - API requests and writes per install, from the audit log by the two
//!   operators' User-Agents, over the sequential installs and 5 s after;
//! - as many Subscriptions created at once in another namespace: time
//!   until every CSV is Succeeded;
//! - the two operators' peak RSS (summed) and CPU seconds over the run.

use std::{
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use kube::Api;
use olm_api::catalog_source::CatalogSource;
use olm_catalog::bundle::{Payload, RegistryBundle};
use olm_e2e::harness::{
    BundleSpec, ServiceProcess, create_catalog, create_operator_group, create_subscription,
    serve_bundles_as,
};
use olm_testkit::{
    audit::{AuditLog, Request},
    side_by_side::{self, Figures, OURS, UPSTREAM, env_count},
};

use super::{BENCH_AGENT, print_most_frequent, subscribe_at_once, wait_succeeded};

/// How long a CatalogSource may take to connect.
const CONNECT_DEADLINE: Duration = Duration::from_secs(60);

/// The parent: runs [`measure`] in a child per implementation and run,
/// then reports.
pub(super) fn run() {
    for var in ["OLM_UPSTREAM_OLM", "OLM_UPSTREAM_CATALOG"] {
        assert!(
            std::env::var_os(var).is_some(),
            "{var} is not set: run `cargo xtask bench --vs-upstream install`, which builds upstream's operators"
        );
    }
    let runs = env_count("OLM_BENCH_INSTALL_RUNS", 3).max(1);
    let count = env_count("OLM_BENCH_INSTALLS", 20);
    side_by_side::run_on_control_planes("install", &format!("{count} packages"), runs);
}

/// One implementation's operators, running.
struct Operators {
    /// Ours, run through the harness (its log, its binary lookup); held
    /// to be killed on drop.
    _ours: Vec<ServiceProcess>,
    upstream: Vec<Child>,
    pids: Vec<u32>,
    /// The start of each operator's User-Agent.
    agents: Vec<String>,
}

impl Operators {
    fn start(who: &str, plane: &olm_testkit::ControlPlane, logs: &std::path::Path) -> Self {
        match who {
            OURS => {
                let catalog = ServiceProcess::start(
                    "catalog-operator",
                    &[],
                    &logs.join("install-ours-catalog.log"),
                );
                let olm =
                    ServiceProcess::start("olm-operator", &[], &logs.join("install-ours-olm.log"));
                let pids = [&catalog, &olm].iter().map(|p| p.pid()).collect();
                Self {
                    _ours: vec![catalog, olm],
                    upstream: Vec::new(),
                    pids,
                    agents: vec!["catalog-operator/".to_owned(), "olm-operator/".to_owned()],
                }
            }
            UPSTREAM => {
                let mut upstream = Vec::new();
                let mut agents = Vec::new();
                for (var, args) in [
                    // The global catalog namespace is upstream's default, `olm`.
                    ("OLM_UPSTREAM_CATALOG", &["--writeStatusName="][..]),
                    (
                        "OLM_UPSTREAM_OLM",
                        &["--writeStatusName=", "--writePackageServerStatusName="][..],
                    ),
                ] {
                    let path = PathBuf::from(std::env::var_os(var).unwrap());
                    let name = path.file_name().unwrap().to_string_lossy().into_owned();
                    let log =
                        std::fs::File::create(logs.join(format!("install-{name}.log"))).unwrap();
                    upstream.push(
                        Command::new(&path)
                            .env("KUBECONFIG", plane.kubeconfig_path())
                            .args(args)
                            .stdout(Stdio::null())
                            .stderr(log)
                            .spawn()
                            .unwrap(),
                    );
                    // client-go names itself after the binary.
                    agents.push(format!("{name}/"));
                }
                let pids = upstream.iter().map(Child::id).collect();
                Self {
                    _ours: Vec::new(),
                    upstream,
                    pids,
                    agents,
                }
            }
            other => panic!("--one={other}: ours or upstream"),
        }
    }

    fn is_theirs(&self, request: &Request) -> bool {
        self.agents
            .iter()
            .any(|a| request.user_agent.starts_with(a))
    }

    /// The operators' peak RSS, summed, in MiB.
    fn peak_rss_mib(&self) -> f64 {
        self.pids
            .iter()
            .filter_map(|pid| side_by_side::peak_rss_kib(*pid))
            .sum::<u64>() as f64
            / 1024.0
    }

    fn cpu_seconds(&self) -> f64 {
        self.pids
            .iter()
            .filter_map(|pid| side_by_side::cpu_seconds(*pid))
            .sum()
    }
}

impl Drop for Operators {
    /// Also on a panic: upstream's processes must not outlive the run
    /// (ours are killed by their own drop).
    fn drop(&mut self) {
        for child in &mut self.upstream {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// One run of one implementation on this process's control plane.
pub(super) async fn measure(who: &str) -> Figures {
    let count = env_count("OLM_BENCH_INSTALLS", 20);
    let plane = olm_testkit::control_plane();
    olm_testkit::operators_crds_installed();
    let client = {
        let mut config = plane.config().await.unwrap();
        olm_runtime::config::identify(&mut config, BENCH_AGENT, "0");
        kube::Client::try_from(config).unwrap()
    };
    let logs = side_by_side::out_dir();
    std::fs::create_dir_all(&logs).unwrap();

    // The catalog: every bundle's manifests in it.
    let group = "bench.install.olm.io";
    let mut bundles: Vec<(String, String, RegistryBundle, String)> = Vec::new();
    for phase in ["seq", "par"] {
        for i in 0..count {
            let spec = BundleSpec::package(&format!("{phase}{i:02}gadgets"), group, "1.0.0");
            // No image: upstream unpacks any bundle that names one (its
            // BundlePath), whatever the catalog carries.
            let image = String::new();
            bundles.push((spec.package.clone(), spec.csv_name(), spec.load(), image));
        }
    }
    let served: Vec<(&RegistryBundle, &str)> =
        bundles.iter().map(|(_, _, b, i)| (b, i.as_str())).collect();
    let (server, _dir) = serve_bundles_as(&served, Payload::BundleObjects).await;
    let address = server.addr().to_string();

    // The global catalog namespace, `olm` for both.
    Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .create(
            &kube::api::PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": "olm"}})).unwrap(),
        )
        .await
        .unwrap();
    let seq = plane.namespace("bench-seq").await;
    let par = plane.namespace("bench-par").await;
    for ns in [seq.name(), par.name()] {
        create_catalog(&client, ns, "bench", &address).await;
        create_operator_group(&client, ns, serde_json::json!({})).await;
    }
    let operators = Operators::start(who, plane, &logs);
    for ns in [seq.name(), par.name()] {
        wait_ready(&client, ns, "bench").await;
    }
    println!(
        "{who}: both catalogs READY; pids {:?}, logs in {}",
        operators.pids,
        logs.display()
    );
    let audit_path = plane
        .audit_log()
        .expect("the control plane keeps an audit log");
    let mut audit = AuditLog::from_end(&audit_path).unwrap();

    let mut times = Vec::new();
    for (package, csv, _, _) in bundles.iter().filter(|b| b.0.starts_with("seq")) {
        let started = Instant::now();
        create_subscription(&client, seq.name(), package, "bench", None).await;
        wait_succeeded(&client, seq.name(), std::slice::from_ref(csv)).await;
        times.push(started.elapsed().as_secs_f64());
    }
    // Status writes land after Succeeded: count them too.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let requests: Vec<Request> = audit
        .read_new()
        .unwrap()
        .into_iter()
        .filter(|r| operators.is_theirs(r))
        .collect();
    let writes = requests.iter().filter(|r| r.is_write()).count();

    let started = Instant::now();
    let (packages, csvs): (Vec<String>, Vec<String>) = bundles
        .iter()
        .filter(|b| b.0.starts_with("par"))
        .map(|(package, csv, ..)| (package.clone(), csv.clone()))
        .unzip();
    subscribe_at_once(&client, par.name(), &packages).await;
    wait_succeeded(&client, par.name(), &csvs).await;
    let all_at_once = started.elapsed().as_secs_f64();

    let peak = operators.peak_rss_mib();
    let cpu = operators.cpu_seconds();
    drop(operators);

    times.sort_by(f64::total_cmp);
    let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    let per_install = |n: usize| n as f64 / count as f64;
    println!(
        "{who}: p50 {:.2} s, p90 {:.2} s, {count} at once {all_at_once:.2} s, {:.1} requests and {:.1} writes per install, peak RSS {peak:.1} MiB, {cpu:.1} CPU s",
        at(0.5),
        at(0.9),
        per_install(requests.len()),
        per_install(writes),
    );
    print_most_frequent(&requests, 12);

    let mut figures = Figures::default();
    figures.add("Subscription to Succeeded p50", "s", at(0.5));
    figures.add("Subscription to Succeeded p90", "s", at(0.9));
    figures.add("all Succeeded, created at once", "s", all_at_once);
    figures.add(
        "API requests per install",
        "requests",
        per_install(requests.len()),
    );
    figures.add("API writes per install", "writes", per_install(writes));
    figures.add("operators' peak RSS (sum)", "MiB", peak);
    figures.add("operators' CPU seconds", "s", cpu);
    figures
}

/// Waits until the CatalogSource reports a READY connection.
async fn wait_ready(client: &kube::Client, namespace: &str, name: &str) {
    let catalogs: Api<CatalogSource> = Api::namespaced(client.clone(), namespace);
    olm_testkit::eventually(
        &format!("CatalogSource {namespace}/{name} READY"),
        CONNECT_DEADLINE,
        || async {
            let catalog = catalogs.get(name).await.map_err(|e| e.to_string())?;
            let value = serde_json::to_value(&catalog).map_err(|e| e.to_string())?;
            match value.pointer("/status/connectionState/lastObservedState") {
                Some(state) if state == "READY" => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
}
