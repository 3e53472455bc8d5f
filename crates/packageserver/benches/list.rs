//! packageserver through the real aggregation layer with three synthetic
//! catalogs of 1,000 packages each: full LIST p50/p99, filtered GET p99, the
//! replicas' RSS, and how long a catalog update takes to show in LIST.
//! Prints its figures; `cargo xtask bench packageserver` runs it (as root,
//! with the control-plane binaries from `cargo xtask envtest`).
#![allow(clippy::unwrap_used)]

#[allow(dead_code, unreachable_pub)]
#[path = "../tests/aggregation/harness.rs"]
mod harness;

use std::{
    net::SocketAddr,
    path::Path,
    time::{Duration, Instant},
};

use harness::{GLOBAL_NAMESPACE, TEAM_NAMESPACE, apply, harness};
use kube::{
    Api,
    api::{ListParams, Patch, PatchParams},
};
use olm_api::{catalog_source::CatalogSource, package_manifest::PackageManifest};
use olm_registry::{CatalogIndex, IndexOptions, RegistryServer};
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

fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
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
    let h = harness();
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
    runtime.block_on(async {
        let client = olm_testkit::control_plane().client().await;
        let all: Api<PackageManifest> = Api::all(client.clone());
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
        let expected = CATALOGS * PACKAGES + 4;
        loop {
            let n = all.list(&ListParams::default()).await.map(|l| l.items.len()).unwrap_or(0);
            if n >= expected {
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(180), "catalogs not served within 180 s ({n} items)");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        println!("packageserver: {CATALOGS} catalogs x {PACKAGES} packages served through the aggregator {:.1} s after the CatalogSources were created", started.elapsed().as_secs_f64());

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
        let rss: Vec<f64> = h.replicas.iter().filter_map(|r| r.server_pid()).map(rss_mib).collect();
        println!(
            "packageserver: full LIST ({} items) p50 {:.1} ms, p99 {:.1} ms (target p99 < 200 ms)",
            expected,
            percentile(&mut lists, 0.5).as_secs_f64() * 1e3,
            percentile(&mut lists, 0.99).as_secs_f64() * 1e3
        );
        println!(
            "packageserver: GET one package p50 {:.1} ms, p99 {:.1} ms; LIST by catalog label ({PACKAGES} items) p50 {:.1} ms, p99 {:.1} ms",
            percentile(&mut gets, 0.5).as_secs_f64() * 1e3,
            percentile(&mut gets, 0.99).as_secs_f64() * 1e3,
            percentile(&mut filtered, 0.5).as_secs_f64() * 1e3,
            percentile(&mut filtered, 0.99).as_secs_f64() * 1e3
        );
        println!("packageserver: RSS per replica {rss:.1?} MiB (target < 128 MiB)");

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
        println!(
            "packageserver: catalog update visible in LIST {:.0} ms after the CatalogSource changed (target < 2000 ms)",
            t.elapsed().as_secs_f64() * 1e3
        );
        let rss: Vec<f64> = h.replicas.iter().filter_map(|r| r.server_pid()).map(rss_mib).collect();
        println!("packageserver: RSS per replica after the update {rss:.1?} MiB");
    });
}
