//! packageserver through the real aggregation layer with three synthetic
//! catalogs of 1,000 packages each: full LIST p50/p99, filtered GET p99, the
//! replicas' RSS, and how long a catalog update takes to show in LIST.
//! Prints its figures; `cargo xtask bench packageserver` runs it (as root,
//! with the control-plane binaries from `cargo xtask envtest`).
//!
//! `cargo xtask bench --vs-upstream packageserver` runs the same with
//! upstream OLM's packageserver (`OLM_UPSTREAM_PACKAGESERVER`) in the same
//! deployment: each run is a child process of this bench
//! (`--one=ours|upstream`) on a fresh control plane, alternating who goes
//! first (`OLM_BENCH_PACKAGESERVER_RUNS`, default 3).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[allow(dead_code, unreachable_pub)]
#[path = "../tests/aggregation/harness.rs"]
mod harness;

use std::{
    net::SocketAddr,
    path::Path,
    time::{Duration, Instant},
};

use harness::{
    GLOBAL_NAMESPACE, Server, TEAM_NAMESPACE, apply, harness_of, write_catalog_operator_status,
};
use kube::{
    Api,
    api::{ListParams, Patch, PatchParams},
};
use olm_api::{catalog_source::CatalogSource, package_manifest::PackageManifest};
use olm_registry::{CatalogIndex, IndexOptions, RegistryServer};
use olm_testkit::side_by_side::{self, Figures, OURS, UPSTREAM, env_count};
use serde_json::json;

/// Catalogs served.
const CATALOGS: usize = 3;
/// Packages per catalog.
const PACKAGES: usize = 1000;
/// Full LISTs measured.
const LIST_RUNS: usize = 60;
/// Filtered GETs measured.
const GET_RUNS: usize = 300;

fn write_catalog(dir: &Path, catalog: usize, extra_package: bool) {
    let description = "A synthetic operator used to measure packageserver. ".repeat(20);
    let mut text = String::new();
    let count = PACKAGES + usize::from(extra_package);
    for p in 0..count {
        let pkg = if p == PACKAGES {
            format!("bench-new-{catalog}")
        } else {
            format!("bench-{catalog}-{p:04}")
        };
        text.push_str(
            &json!({"schema": "olm.package", "name": pkg, "defaultChannel": "stable"}).to_string(),
        );
        text.push('\n');
        let bundles = [format!("{pkg}.v1.0.0"), format!("{pkg}.v1.1.0")];
        text.push_str(
            &json!({"schema": "olm.channel", "package": pkg, "name": "stable", "entries": [
            {"name": bundles[0]}, {"name": bundles[1], "replaces": bundles[0]}]})
            .to_string(),
        );
        text.push('\n');
        for (i, bundle) in bundles.iter().enumerate() {
            let version = format!("1.{i}.0");
            let csv = json!({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
                "metadata": {"name": bundle, "annotations": {"capabilities": "Basic Install", "categories": "Developer Tools"}},
                "spec": {"displayName": format!("Bench {p}"), "version": version, "description": description,
                         "provider": {"name": "Bench"}, "keywords": ["bench", "synthetic"],
                         "installModes": [{"type": "AllNamespaces", "supported": true}],
                         "install": {"strategy": "deployment", "spec": {"deployments": []}}},
            });
            text.push_str(&json!({"schema": "olm.bundle", "package": pkg, "name": bundle,
                "image": format!("registry.example/{pkg}:v{version}"),
                "properties": [
                    {"type": "olm.package", "value": {"packageName": pkg, "version": version}},
                    {"type": "olm.bundle.object", "value": {"data": base64::Engine::encode(&base64::engine::general_purpose::STANDARD, csv.to_string())}},
                ]}).to_string());
            text.push('\n');
        }
    }
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("index.json"), text).unwrap();
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    let index = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[index]
}

/// Milliseconds of a duration.
fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    if !std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout == b"0\n")
    {
        eprintln!("packageserver bench needs root (network namespaces); skipped");
        return;
    }
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--vs-upstream") {
        assert!(
            std::env::var_os("OLM_UPSTREAM_PACKAGESERVER").is_some(),
            "OLM_UPSTREAM_PACKAGESERVER is not set: run `cargo xtask bench --vs-upstream packageserver`, which builds upstream's packageserver"
        );
        let runs = env_count("OLM_BENCH_PACKAGESERVER_RUNS", 3).max(1);
        let input = format!("{CATALOGS} catalogs x {PACKAGES} packages, 2 replicas");
        side_by_side::run_on_control_planes("packageserver", &input, runs);
        return;
    }
    let one = args.iter().find_map(|a| a.strip_prefix("--one="));
    let server = match one {
        None | Some(OURS) => Server::Ours,
        Some(UPSTREAM) => Server::Upstream(
            std::env::var_os("OLM_UPSTREAM_PACKAGESERVER")
                .map(std::path::PathBuf::from)
                .expect("OLM_UPSTREAM_PACKAGESERVER names upstream's packageserver"),
        ),
        Some(other) => panic!("--one={other}: ours or upstream"),
    };
    let figures = measure(&server);
    if one.is_some() {
        figures.print();
    }
}

/// One run: the deployment of `server` started, the catalogs served, and
/// LIST, GET, RSS and a catalog update measured.
fn measure(server: &Server) -> Figures {
    let h = harness_of(server);
    let dir = h.dir.join("bench");
    for c in 0..CATALOGS {
        write_catalog(&dir.join(format!("catalog-{c}")), c, false);
    }
    write_catalog(&dir.join("catalog-0-updated"), 0, true);
    let host = h.host_address;
    let (tx, rx) = std::sync::mpsc::channel();
    let dirs: Vec<_> = (0..CATALOGS)
        .map(|c| dir.join(format!("catalog-{c}")))
        .chain([dir.join("catalog-0-updated")])
        .collect();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let mut addresses: Vec<SocketAddr> = Vec::new();
            for d in dirs {
                let index = CatalogIndex::build(&d, &IndexOptions::default()).unwrap();
                let listener = tokio::net::TcpListener::bind((host, 0)).await.unwrap();
                addresses.push(listener.local_addr().unwrap());
                tokio::spawn(RegistryServer::new(index).serve(listener, std::future::pending()));
            }
            tx.send(addresses).unwrap();
            std::future::pending::<()>().await;
        });
    });
    let addresses = rx.recv().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let pids: Vec<u32> = h.replicas.iter().filter_map(|r| r.server_pid()).collect();
    let replicas_mib = |read: fn(u32) -> Option<u64>| -> Vec<f64> {
        pids.iter()
            .map(|&pid| read(pid).unwrap_or(0) as f64 / 1024.0)
            .collect()
    };
    let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    let mut figures = Figures::default();
    runtime.block_on(async {
        let client = olm_testkit::control_plane().client().await;
        let all: Api<PackageManifest> = Api::all(client.clone());
        let idle = replicas_mib(side_by_side::rss_kib);
        println!("packageserver: RSS per replica with the small fixture catalogs {idle:.1?} MiB");
        figures.add("RSS per replica, idle (max)", "MiB", max(&idle));
        let started = Instant::now();
        apply(
            &(0..CATALOGS)
                .map(|c| {
                    json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
                       "metadata": {"name": format!("bench-{c}"), "namespace": GLOBAL_NAMESPACE},
                       "spec": {"sourceType": "grpc", "address": addresses[c].to_string(), "displayName": format!("Bench {c}")}})
                })
                .collect::<Vec<_>>(),
        );
        let names: Vec<String> = (0..CATALOGS).map(|c| format!("bench-{c}")).collect();
        let sources: Vec<(&str, &str)> = names.iter().map(|n| (GLOBAL_NAMESPACE, n.as_str())).collect();
        write_catalog_operator_status(server, &sources);
        let expected = CATALOGS * PACKAGES + 4;
        loop {
            let n = all.list(&ListParams::default()).await.map(|l| l.items.len()).unwrap_or(0);
            if n >= expected {
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(180), "catalogs not served within 180 s ({n} items)");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let served = started.elapsed();
        println!("packageserver: {CATALOGS} catalogs x {PACKAGES} packages served through the aggregator {:.1} s after the CatalogSources were created", served.as_secs_f64());
        figures.add("catalogs served in LIST after creation", "s", served.as_secs_f64());

        let mut lists = Vec::with_capacity(LIST_RUNS);
        for _ in 0..LIST_RUNS {
            let t = Instant::now();
            let list = all.list(&ListParams::default()).await.unwrap();
            lists.push(t.elapsed());
            assert!(list.items.len() >= expected);
        }
        let team: Api<PackageManifest> = Api::namespaced(client.clone(), TEAM_NAMESPACE);
        let mut gets = Vec::with_capacity(GET_RUNS);
        for i in 0..GET_RUNS {
            let name = format!("bench-{}-{:04}", i % CATALOGS, (i * 37) % PACKAGES);
            let t = Instant::now();
            let m = team.get(&name).await.unwrap();
            gets.push(t.elapsed());
            assert_eq!(m.metadata.name.as_deref(), Some(name.as_str()));
        }
        let mut filtered = Vec::with_capacity(GET_RUNS);
        for i in 0..GET_RUNS / 3 {
            let t = Instant::now();
            let l = team
                .list(&ListParams::default().labels(&format!("catalog=bench-{}", i % CATALOGS)))
                .await
                .unwrap();
            filtered.push(t.elapsed());
            assert_eq!(l.items.len(), PACKAGES);
        }
        let rss = replicas_mib(side_by_side::rss_kib);
        let (list_p50, list_p99) = (ms(percentile(&mut lists, 0.5)), ms(percentile(&mut lists, 0.99)));
        let (get_p50, get_p99) = (ms(percentile(&mut gets, 0.5)), ms(percentile(&mut gets, 0.99)));
        let (label_p50, label_p99) = (ms(percentile(&mut filtered, 0.5)), ms(percentile(&mut filtered, 0.99)));
        println!(
            "packageserver: full LIST ({expected} items) p50 {list_p50:.1} ms, p99 {list_p99:.1} ms (target p99 < 200 ms)"
        );
        println!(
            "packageserver: GET one package p50 {get_p50:.1} ms, p99 {get_p99:.1} ms; LIST by catalog label ({PACKAGES} items) p50 {label_p50:.1} ms, p99 {label_p99:.1} ms"
        );
        println!("packageserver: RSS per replica {rss:.1?} MiB (target < 128 MiB)");
        figures.add("full LIST p50", "ms", list_p50);
        figures.add("full LIST p99", "ms", list_p99);
        figures.add("GET one package p50", "ms", get_p50);
        figures.add("GET one package p99", "ms", get_p99);
        figures.add("LIST by catalog label p50", "ms", label_p50);
        figures.add("RSS per replica, serving (max)", "MiB", max(&rss));

        // A catalog update: the registry behind bench-0 now holds one more
        // package; the CatalogSource points at it (as the catalog operator
        // does when a new registry pod serves).
        let catalogs: Api<CatalogSource> = Api::namespaced(client.clone(), GLOBAL_NAMESPACE);
        let t = Instant::now();
        catalogs
            .patch("bench-0", &PatchParams::default(), &Patch::Merge(json!({"spec": {"address": addresses[CATALOGS].to_string()}})))
            .await
            .unwrap();
        loop {
            let l = all.list(&ListParams::default().fields("metadata.name=bench-new-0")).await.unwrap();
            if !l.items.is_empty() {
                break;
            }
            assert!(t.elapsed() < Duration::from_secs(30), "update not visible within 30 s");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let update = ms(t.elapsed());
        println!(
            "packageserver: catalog update visible in LIST {update:.0} ms after the CatalogSource changed (target < 2000 ms)"
        );
        figures.add("catalog update visible in LIST", "ms", update);
        let rss = replicas_mib(side_by_side::rss_kib);
        let peak = replicas_mib(side_by_side::peak_rss_kib);
        let cpu: f64 = pids.iter().filter_map(|&pid| side_by_side::cpu_seconds(pid)).sum();
        println!("packageserver: RSS per replica after the update {rss:.1?} MiB, peak {peak:.1?} MiB; CPU of both replicas {cpu:.1} s");
        figures.add("peak RSS per replica (max)", "MiB", max(&peak));
        figures.add("CPU seconds, both replicas", "s", cpu);
    });
    figures
}
