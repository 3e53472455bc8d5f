//! Resolution benchmark (`cargo xtask bench resolve`): three synthetic
//! catalogs totalling 20,000 bundle entries; one namespace with 10
//! Subscriptions whose bundles have transitive API, package and CEL
//! requirements, and one with 100 Subscriptions. Prints p50/p99 of
//! `resolve` and the process's peak RSS.
#![allow(clippy::unwrap_used, missing_docs)]

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use olm_resolver::{
    BundleInput, CatalogKey, CatalogSnapshot, NamespaceState, ResolveRequest, Subscription, resolve,
};

/// Bundles per package (one channel, a replaces chain with skipRanges).
const VERSIONS: usize = 25;

/// A tiny deterministic generator (no dependency, same catalog every run).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn gvk(kind: usize) -> String {
    format!(r#"{{"group":"bench.example.com","version":"v1","kind":"Kind{kind}"}}"#)
}

/// A catalog of `packages` packages, numbered from `first`. Package `i`
/// provides `Kind{i}` and its bundles require up to two APIs or packages of
/// lower-numbered packages of the same catalog (or of alpha's), so
/// requirements form chains.
fn catalog(name: &str, priority: i32, first: usize, packages: usize, seed: u64) -> CatalogSnapshot {
    let mut rng = SplitMix(seed);
    let mut bundles = Vec::with_capacity(packages * VERSIONS);
    let mut defaults = Vec::new();
    for p in first..first + packages {
        let package = format!("pkg{p}");
        defaults.push((package.clone(), "stable".to_owned()));
        // The package's requirements hold for all its versions, as in real
        // catalogs.
        let mut requires = Vec::new();
        if p > first {
            for _ in 0..rng.below(3) {
                // Mostly within the catalog; sometimes on alpha's packages.
                let dep = if first > 0 && rng.below(4) == 0 {
                    rng.below(280)
                } else {
                    first + rng.below(p - first)
                };
                requires.push(match rng.below(10) {
                    0..=5 => ("olm.gvk.required".to_owned(), gvk(dep)),
                    6..=7 => (
                        "olm.package.required".to_owned(),
                        format!(r#"{{"packageName":"pkg{dep}","versionRange":">=1.5.0"}}"#),
                    ),
                    8 => (
                        "olm.constraint".to_owned(),
                        format!(
                            r#"{{"failureMessage":"needs a recent pkg{dep}","all":{{"constraints":[{{"gvk":{}}},{{"cel":{{"rule":"properties.exists(p, p.type == \"olm.package\" && semver_compare(p.value.version, \"1.3.0\") >= 0)"}}}}]}}}}"#,
                            gvk(dep)
                        ),
                    ),
                    _ => (
                        "olm.constraint".to_owned(),
                        format!(
                            r#"{{"any":{{"constraints":[{{"package":{{"packageName":"pkg{dep}","versionRange":">=1.10.0"}}}},{{"gvk":{}}}]}}}}"#,
                            gvk(dep)
                        ),
                    ),
                });
            }
        }
        for v in 0..VERSIONS {
            let csv = format!("pkg{p}.v1.{v}.0");
            let mut properties = vec![
                (
                    "olm.package".to_owned(),
                    format!(r#"{{"packageName":"{package}","version":"1.{v}.0"}}"#),
                ),
                ("olm.gvk".to_owned(), gvk(p)),
            ];
            properties.extend(requires.iter().cloned());
            bundles.push(BundleInput {
                name: csv,
                package: package.clone(),
                channel: "stable".into(),
                replaces: if v == 0 {
                    String::new()
                } else {
                    format!("pkg{p}.v1.{}.0", v - 1)
                },
                skip_range: if v % 5 == 4 {
                    format!(">=1.{}.0 <1.{v}.0", v - 4)
                } else {
                    String::new()
                },
                bundle_path: format!("quay.io/bench/pkg{p}:v1.{v}.0"),
                properties,
                ..Default::default()
            });
        }
    }
    CatalogSnapshot::build(
        CatalogKey::new(name, "olm"),
        priority,
        true,
        &defaults,
        bundles,
    )
}

fn peak_rss_kib() -> Option<u64> {
    olm_testkit::side_by_side::peak_rss_kib(std::process::id())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn measure(label: &str, catalogs: &[Arc<CatalogSnapshot>], packages: &[usize], iterations: usize) {
    let state = NamespaceState {
        namespace: "bench".into(),
        csvs: vec![],
        subscriptions: packages
            .iter()
            .map(|&p| Subscription {
                name: format!("sub-pkg{p}"),
                package: format!("pkg{p}"),
                channel: "stable".into(),
                catalog: if p < 280 {
                    "alpha"
                } else if p < 560 {
                    "beta"
                } else {
                    "gamma"
                }
                .into(),
                catalog_namespace: "olm".into(),
                ..Default::default()
            })
            .collect(),
    };
    let request = ResolveRequest {
        state: &state,
        catalogs,
        global_namespace: "olm",
        exclude_global: false,
    };
    let first = resolve(&request).unwrap_or_else(|e| panic!("{label}: {e}"));
    let mut times = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let start = Instant::now();
        let r = resolve(&request).unwrap();
        times.push(start.elapsed());
        assert_eq!(r.operators.len(), first.operators.len());
    }
    times.sort();
    println!(
        "{label}: {} subscriptions -> {} bundles; p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms ({iterations} runs)",
        packages.len(),
        first.operators.len(),
        percentile(&times, 0.5).as_secs_f64() * 1e3,
        percentile(&times, 0.99).as_secs_f64() * 1e3,
        times.last().unwrap().as_secs_f64() * 1e3,
    );
}

fn main() {
    let start = Instant::now();
    // 280 + 280 + 240 packages x 25 versions = 20,000 entries. beta repeats
    // 100 of alpha's packages (same names and APIs) at a higher priority, so
    // requirements see candidates from several catalogs.
    let catalogs = vec![
        Arc::new(catalog("alpha", 0, 0, 280, 1)),
        Arc::new(catalog("beta", 10, 180, 280, 2)),
        Arc::new(catalog("gamma", -10, 560, 240, 3)),
    ];
    let entries: usize = catalogs.iter().map(|c| c.entries.len()).sum();
    println!(
        "built 3 catalogs, {entries} bundle entries, in {:.0} ms; peak RSS {} KiB",
        start.elapsed().as_secs_f64() * 1e3,
        peak_rss_kib().unwrap_or(0)
    );
    assert_eq!(entries, 20_000);

    // Ten Subscriptions to packages deep in the requirement chains.
    let ten: Vec<usize> = (0..10).map(|i| 270 - i * 25).collect();
    measure("10 subscriptions", &catalogs, &ten, 200);

    // A hundred Subscriptions in one namespace, across the three catalogs.
    let hundred: Vec<usize> = (0..34)
        .map(|i| 799 - i * 7)
        .chain((0..33).map(|i| 459 - i * 8))
        .chain((0..33).map(|i| 179 - i * 5))
        .collect();
    measure("100 subscriptions", &catalogs, &hundred, 50);

    println!("peak RSS {} KiB", peak_rss_kib().unwrap_or(0));
}
