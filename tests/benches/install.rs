//! `cargo xtask bench install`: from Subscription creation to CSV Succeeded,
//! on a real control plane (kwok makes the Deployments Available), with a
//! real OCI registry and NATS, the services in-process, release build.
//!
//! - 20 sequential installs (one Subscription at a time, each a package of
//!   its own, in one namespace): p50 / p90 / max of Subscription created →
//!   CSV Succeeded. Target: p50 under 3 s.
//! - 20 Subscriptions created at once in a fresh namespace: time until all
//!   their CSVs are Succeeded. Target: under 20 s.
//! - API requests made by OLM's services per install, counted from
//!   kube-apiserver's audit log (`olm_testkit::audit`), by verb.
//!
//! `cargo xtask bench --vs-upstream install` measures ours and upstream
//! OLM's the same way instead (`vs_upstream.rs` here says how).
//!
//! The registry is warm (every bundle pushed, the catalog served and
//! connected) before the clock starts. `OLM_BENCH_INSTALLS` changes the
//! count (default 20).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use kube::Api;
use olm_api::{csv::ClusterServiceVersion, subscription::Subscription};
use olm_catalog::bundle::RegistryBundle;
use olm_e2e::harness::{
    BundleSpec, ServiceOptions, create_catalog, create_operator_group, create_subscription,
    delete_crds, publish, serve_bundles, start_services_with,
};
use olm_testkit::{
    audit::{AuditLog, Request, count_by},
    side_by_side::env_count,
};
use serde_json::json;

/// How long one install may take before the bench gives up.
const INSTALL_DEADLINE: Duration = Duration::from_secs(120);
/// How often the bench looks at the CSVs (its own requests are not counted).
const POLL: Duration = Duration::from_millis(50);
/// The bench's own User-Agent, so its requests can be told apart.
const BENCH_AGENT: &str = "olm-bench-install";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--vs-upstream") {
        vs_upstream::run();
        return;
    }
    if let Some(who) = args.iter().find_map(|a| a.strip_prefix("--one=")) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(vs_upstream::measure(who)).print();
        return;
    }
    if std::env::var_os(olm_testkit::AUDIT_ENV).is_none() {
        // The control plane must start with its audit log on: run again with
        // the variable set (environment changes in-process are unsafe).
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args(std::env::args_os().skip(1))
            .env(olm_testkit::AUDIT_ENV, "1")
            .status()
            .expect("re-running the bench");
        std::process::exit(status.code().unwrap_or(1));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(bench());
}

async fn bench() {
    let count = env_count("OLM_BENCH_INSTALLS", 20);
    let plane = olm_testkit::control_plane();
    olm_e2e::harness::olm_crds_installed().await;
    let client = {
        let mut config = plane.config().await.unwrap();
        olm_runtime::config::identify(&mut config, BENCH_AGENT, "0");
        kube::Client::try_from(config).unwrap()
    };
    let registry = olm_testkit::registry::Registry::start().unwrap();
    let nats = olm_testkit::nats::NatsServer::start().unwrap();
    let group = "bench.install.olm.io";

    // Every bundle in the registry, one catalog serving them all.
    let mut published: Vec<(String, String, RegistryBundle, String)> = Vec::new();
    let mut crds = Vec::new();
    for phase in ["seq", "par"] {
        for i in 0..count {
            let spec = BundleSpec::package(&format!("{phase}{i:02}gadgets"), group, "1.0.0");
            let (bundle, image) = publish(&registry.host(), &spec).await;
            crds.push(spec.crd_name());
            published.push((spec.package.clone(), spec.csv_name(), bundle, image));
        }
    }
    let served: Vec<(&RegistryBundle, &str)> = published
        .iter()
        .map(|(_, _, b, i)| (b, i.as_str()))
        .collect();
    let (server, _dir) = serve_bundles(&served).await;
    let address = server.addr().to_string();
    let audit_path = plane
        .audit_log()
        .expect("the control plane keeps an audit log");

    // Sequential installs.
    let seq = plane.namespace("bench-seq").await;
    let services = start(seq.name(), &registry.host(), &nats.url()).await;
    create_catalog(&client, seq.name(), "bench", &address).await;
    create_operator_group(&client, seq.name(), json!({})).await;
    let mut audit = AuditLog::from_end(&audit_path).unwrap();
    let mut times = Vec::new();
    for (package, csv, _, _) in published.iter().filter(|p| p.0.starts_with("seq")) {
        let started = Instant::now();
        create_subscription(&client, seq.name(), package, "bench", None).await;
        wait_succeeded(&client, seq.name(), std::slice::from_ref(csv)).await;
        times.push(started.elapsed());
    }
    // What the services did during the installs (and the settling that
    // follows each: status updates land after Succeeded).
    tokio::time::sleep(Duration::from_secs(5)).await;
    let requests = audit.read_new().unwrap();
    services.stop().await;

    // All at once.
    let par = plane.namespace("bench-par").await;
    let services = start(par.name(), &registry.host(), &nats.url()).await;
    create_catalog(&client, par.name(), "bench", &address).await;
    create_operator_group(&client, par.name(), json!({})).await;
    // Let the catalog connect before the clock starts, as for the first
    // sequential install.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let started = Instant::now();
    let (packages, csvs): (Vec<String>, Vec<String>) = published
        .iter()
        .filter(|p| p.0.starts_with("par"))
        .map(|(package, csv, _, _)| (package.clone(), csv.clone()))
        .unzip();
    subscribe_at_once(&client, par.name(), &packages).await;
    wait_succeeded(&client, par.name(), &csvs).await;
    let all_at_once = started.elapsed();
    let plans = Api::<olm_api::install_plan::InstallPlan>::namespaced(client.clone(), par.name())
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .len();
    services.stop().await;
    delete_crds(&client, &crds).await;

    report(count, &mut times, all_at_once, plans, &requests);
}

async fn start(namespace: &str, registry: &str, nats: &str) -> olm_e2e::harness::Services {
    start_services_with(
        namespace,
        registry,
        ServiceOptions {
            nats_url: Some(nats.to_owned()),
            ..ServiceOptions::default()
        },
    )
    .await
}

#[path = "install/vs_upstream.rs"]
mod vs_upstream;

/// Waits until every CSV named is Succeeded.
async fn wait_succeeded(client: &kube::Client, namespace: &str, names: &[String]) {
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), namespace);
    let started = Instant::now();
    loop {
        let list = csvs.list(&Default::default()).await.unwrap();
        let succeeded = list
            .items
            .iter()
            .filter(|c| {
                c.metadata
                    .name
                    .as_ref()
                    .is_some_and(|name| names.contains(name))
                    && c.status
                        .as_ref()
                        .and_then(|s| s.phase.as_ref())
                        .is_some_and(|p| *p == olm_api::csv::CsvPhase::SUCCEEDED)
            })
            .count();
        if succeeded == names.len() {
            return;
        }
        if started.elapsed() > INSTALL_DEADLINE {
            let subs: Api<Subscription> = Api::namespaced(client.clone(), namespace);
            let states: Vec<_> = subs
                .list(&Default::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .map(|s| (s.metadata.name, s.status.and_then(|s| s.state)))
                .collect();
            panic!(
                "{succeeded}/{} Succeeded after {INSTALL_DEADLINE:?}; subscriptions: {states:?}",
                names.len()
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

fn report(
    count: usize,
    times: &mut [Duration],
    all_at_once: Duration,
    plans: usize,
    requests: &[Request],
) {
    times.sort();
    let at = |q: f64| {
        let index = ((times.len() as f64 - 1.0) * q).round() as usize;
        times[index.min(times.len() - 1)]
    };
    println!("install: {count} sequential installs, Subscription created -> CSV Succeeded");
    println!(
        "  p50 {:.2} s   p90 {:.2} s   max {:.2} s   (target p50 < 3 s)",
        at(0.5).as_secs_f64(),
        at(0.9).as_secs_f64(),
        at(1.0).as_secs_f64()
    );
    println!(
        "install: {count} Subscriptions created at once -> all Succeeded in {:.2} s in {plans} InstallPlan(s) (target < 20 s)",
        all_at_once.as_secs_f64()
    );
    let by_agent = count_by(requests, |r| r.user_agent.clone());
    println!("install: API requests during the sequential installs, by client:");
    for (agent, n) in &by_agent {
        let name = if agent.is_empty() { "(none)" } else { agent };
        println!("  {n:>6}  {name}");
    }
    let ours: Vec<Request> = requests
        .iter()
        .filter(|r| is_olm(&r.user_agent))
        .cloned()
        .collect();
    println!(
        "install: OLM's services made {} requests, {:.1} per install",
        ours.len(),
        ours.len() as f64 / count as f64
    );
    let by_verb: BTreeMap<String, usize> = count_by(&ours, |r| r.verb.clone());
    for (verb, n) in &by_verb {
        println!(
            "  {verb:<8} {n:>6}  ({:.1} per install)",
            *n as f64 / count as f64
        );
    }
    let writes = ours.iter().filter(|r| r.is_write()).count();
    println!(
        "  writes {writes} ({:.1} per install)",
        writes as f64 / count as f64
    );
    println!("  most frequent:");
    print_most_frequent(&ours, 25);
}

/// The `top` most frequent service/verb/resource triples of `requests`.
fn print_most_frequent(requests: &[Request], top: usize) {
    let by_resource = count_by(requests, |r| {
        let service = r.user_agent.split('/').next().unwrap_or_default();
        format!("{service} {} {}", r.verb, r.resource)
    });
    let mut sorted: Vec<_> = by_resource.into_iter().collect();
    sorted.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    for (what, n) in sorted.iter().take(top) {
        println!("    {n:>6}  {what}");
    }
}

/// Creates a Subscription to each of `packages` in `namespace`, all at
/// once, from the catalog `bench`.
async fn subscribe_at_once(client: &kube::Client, namespace: &str, packages: &[String]) {
    let creates = packages.iter().map(|package| async move {
        create_subscription(client, namespace, package, "bench", None).await;
    });
    futures::future::join_all(creates).await;
}

/// Whether a User-Agent is one of OLM's services.
fn is_olm(agent: &str) -> bool {
    ["catalog-operator/", "olm-operator/", "bundle-unpacker/"]
        .iter()
        .any(|prefix| agent.starts_with(prefix))
}
