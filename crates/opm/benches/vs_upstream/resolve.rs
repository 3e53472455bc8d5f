//! The resolver, ours and upstream OLM's, on the same Subscriptions against
//! the same file-based catalogs.
//!
//! Upstream's runs through `xtask/upstream/resolver` (OLM v0.46.0's
//! `Resolver.Resolve`, wired as catalog-operator wires it, catalogs read
//! through operator-registry's own cache); ours is `olm_resolver::resolve`
//! on snapshots built from the same directories. Each side loads once and
//! resolves `OLM_BENCH_RESOLVE_RUNS` times (default 5); the medians are
//! compared, and so are the decisions (the CSVs chosen, with their
//! catalogs), which must be equal for the times to mean anything.

use std::{
    collections::BTreeSet,
    io::Write,
    path::{Path, PathBuf},
    sync::Arc,
    time::Instant,
};

use olm_resolver::{
    CatalogKey, CatalogSnapshot, NamespaceState, ResolveRequest, Subscription, resolve,
};
use serde_json::{Value, json};

use super::{OURS, Row, UPSTREAM, env_usize, median};

const NAMESPACE: &str = "bench";
const CATALOG_NAMESPACE: &str = "olm";

/// One resolution input: a folder of catalogs and the Subscriptions.
struct Case {
    name: String,
    what: String,
    catalogs: PathBuf,
    subscriptions: Vec<Subscription>,
}

pub(crate) fn scenario(out: &Path) -> Vec<Row> {
    let Some(harness) = std::env::var_os("OLM_UPSTREAM_RESOLVER").map(PathBuf::from) else {
        eprintln!(
            "resolve: OLM_UPSTREAM_RESOLVER is not set; run it through `cargo xtask bench --vs-upstream resolve`"
        );
        std::process::exit(2);
    };
    let runs = env_usize("OLM_BENCH_RESOLVE_RUNS", 5).max(1);
    let mut cases = Vec::new();
    if let Some(case) = real_case(out) {
        cases.push(case);
    }
    cases.push(generated_case(out));
    let mut rows = Vec::new();
    for case in &cases {
        println!("resolve {}: {}", case.name, case.what);
        let mut load = Row::new("resolve", &case.name, "load catalogs", "ms");
        let mut time = Row::new("resolve", &case.name, "resolve median", "ms");

        let (ours_load, ours_times, ours_decision) = ours(case, runs);
        let theirs = upstream(&harness, case, runs, out);
        println!(
            "  ours     load {ours_load:>8.1} ms, resolve median {:>9.2} ms ({} runs)",
            median(&ours_times),
            ours_times.len()
        );
        println!(
            "  upstream load {:>8.1} ms, resolve median {:>9.2} ms ({} runs)",
            theirs.load_ms,
            median(&theirs.resolve_ms),
            theirs.resolve_ms.len()
        );
        match (&ours_decision, &theirs.outcome) {
            (Ok(a), Ok(b)) if a == b => println!("  decisions agree: {} operators", a.len()),
            (Err(a), Err(b)) => println!("  both refuse: ours {a:?}; upstream {b:?}"),
            (a, b) => println!("  DECISIONS DIFFER\n    ours:     {a:?}\n    upstream: {b:?}"),
        }
        load.push(OURS, ours_load);
        load.push(UPSTREAM, theirs.load_ms);
        for t in ours_times {
            time.push(OURS, t);
        }
        for t in theirs.resolve_ms {
            time.push(UPSTREAM, t);
        }
        rows.extend([load, time]);
    }
    rows
}

/// The CSVs chosen, with their catalogs: what both sides must agree on.
type Decision = Result<BTreeSet<(String, String)>, String>;

fn ours(case: &Case, runs: usize) -> (f64, Vec<f64>, Decision) {
    let started = Instant::now();
    let mut catalogs = Vec::new();
    for dir in catalog_dirs(&case.catalogs) {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let catalog = olm_catalog::fbc::Catalog::load_dir(&dir).unwrap();
        catalogs.push(Arc::new(CatalogSnapshot::from_fbc(
            CatalogKey::new(&name, CATALOG_NAMESPACE),
            0,
            &catalog,
        )));
    }
    let load_ms = started.elapsed().as_secs_f64() * 1e3;
    let state = NamespaceState {
        namespace: NAMESPACE.into(),
        csvs: vec![],
        subscriptions: case.subscriptions.clone(),
    };
    let request = ResolveRequest {
        state: &state,
        catalogs: &catalogs,
        global_namespace: CATALOG_NAMESPACE,
        exclude_global: false,
    };
    let decision = match resolve(&request) {
        Ok(r) => Ok(r
            .operators
            .iter()
            .map(|o| (o.name.clone(), o.catalog.clone()))
            .collect()),
        Err(e) => Err(e.to_string()),
    };
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        let _ = std::hint::black_box(resolve(&request));
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    (load_ms, times, decision)
}

fn upstream(
    harness: &Path,
    case: &Case,
    runs: usize,
    out: &Path,
) -> olm_testkit::upstream_resolver::Run {
    let subscriptions: Vec<olm_testkit::upstream_resolver::Subscription> = case
        .subscriptions
        .iter()
        .map(|s| olm_testkit::upstream_resolver::Subscription {
            namespace: NAMESPACE.to_owned(),
            name: s.name.clone(),
            package: s.package.clone(),
            channel: s.channel.clone(),
            catalog: s.catalog.clone(),
            catalog_namespace: s.catalog_namespace.clone(),
            starting_csv: s.starting_csv.clone(),
        })
        .collect();
    let scratch = out.join(format!("resolve-input-{}", case.name));
    std::fs::create_dir_all(&scratch).unwrap();
    olm_testkit::upstream_resolver::run(
        harness,
        &case.catalogs,
        &subscriptions,
        runs,
        CATALOG_NAMESPACE,
        &scratch,
    )
}

fn catalog_dirs(root: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

fn subscription(package: &str, channel: &str, catalog: &str) -> Subscription {
    Subscription {
        name: format!("sub-{package}"),
        package: package.to_owned(),
        channel: channel.to_owned(),
        catalog: catalog.to_owned(),
        catalog_namespace: CATALOG_NAMESPACE.to_owned(),
        ..Subscription::default()
    }
}

/// The real community catalog, ten of its packages on their default
/// channels.
fn real_case(out: &Path) -> Option<Case> {
    let testdata = olm_testkit::testdata()?;
    let source = testdata.join("catalogs/community-operators-prod-v4.21");
    let catalogs = out.join("resolve-real");
    let link = catalogs.join("community");
    if !link.exists() {
        std::fs::create_dir_all(&catalogs).unwrap();
        std::os::unix::fs::symlink(&source, &link).unwrap();
    }
    let catalog = olm_catalog::fbc::Catalog::load_dir(&source).unwrap();
    let mut packages: Vec<&str> = catalog.packages.iter().map(|p| p.name.as_str()).collect();
    packages.sort_unstable();
    let step = (packages.len() / 10).max(1);
    let subscriptions: Vec<Subscription> = packages
        .iter()
        .step_by(step)
        .take(10)
        .map(|p| subscription(p, "", "community"))
        .collect();
    Some(Case {
        name: "real-v4.21".to_owned(),
        what: format!(
            "community-operators-prod-v4.21, {} Subscriptions on default channels",
            subscriptions.len()
        ),
        catalogs,
        subscriptions,
    })
}

/// Versions per generated package: one channel, a replaces chain with a
/// skipRange every fifth version.
const VERSIONS: usize = 25;

/// Three generated catalogs of 280, 280 and 240 packages (20,000 entries),
/// beta repeating 100 of alpha's packages, every package after the first
/// of its catalog requiring up to two APIs or packages of lower-numbered
/// ones (gvk, package, CEL and compound constraints): the shape of
/// `cargo xtask bench resolve`, written as FBC so both resolvers read it.
fn generated_case(out: &Path) -> Case {
    let catalogs = out.join("resolve-generated");
    let done = catalogs.join(".complete");
    if !done.exists() {
        let _ = std::fs::remove_dir_all(&catalogs);
        for (name, first, packages, seed) in [
            ("alpha", 0, 280, 1),
            ("beta", 180, 280, 2),
            ("gamma", 560, 240, 3),
        ] {
            write_generated(&catalogs.join(name), first, packages, seed);
        }
        std::fs::write(&done, "").unwrap();
    }
    let subscriptions = (0..10)
        .map(|i| 270 - i * 25)
        .map(|p| subscription(&format!("pkg{p}"), "stable", "alpha"))
        .collect();
    Case {
        name: "generated".to_owned(),
        what: "3 generated catalogs, 20,000 entries, requirement chains; 10 Subscriptions deep in the chains".to_owned(),
        catalogs,
        subscriptions,
    }
}

fn gvk(kind: usize) -> Value {
    json!({"group": "bench.example.com", "version": "v1", "kind": format!("Kind{kind}")})
}

fn write_generated(dir: &Path, first: usize, packages: usize, seed: u64) {
    std::fs::create_dir_all(dir).unwrap();
    let mut rng = olm_testkit::synthetic_catalog::Rng::new(seed);
    let mut file =
        std::io::BufWriter::new(std::fs::File::create(dir.join("catalog.json")).unwrap());
    let mut write = |doc: Value| {
        serde_json::to_writer(&mut file, &doc).unwrap();
        file.write_all(b"\n").unwrap();
    };
    for p in first..first + packages {
        let package = format!("pkg{p}");
        let mut requires: Vec<Value> = Vec::new();
        if p > first {
            for _ in 0..rng.below(3) {
                let dep = if first > 0 && rng.below(4) == 0 {
                    rng.below(280)
                } else {
                    first + rng.below(p - first)
                };
                requires.push(match rng.below(10) {
                    0..=5 => json!({"type": "olm.gvk.required", "value": gvk(dep)}),
                    6..=7 => json!({"type": "olm.package.required", "value": {"packageName": format!("pkg{dep}"), "versionRange": ">=1.5.0"}}),
                    8 => json!({"type": "olm.constraint", "value": {"failureMessage": format!("needs a recent pkg{dep}"), "all": {"constraints": [
                        {"gvk": gvk(dep)},
                        {"cel": {"rule": "properties.exists(p, p.type == \"olm.package\" && semver_compare(p.value.version, \"1.3.0\") >= 0)"}},
                    ]}}}),
                    _ => json!({"type": "olm.constraint", "value": {"any": {"constraints": [
                        {"package": {"packageName": format!("pkg{dep}"), "versionRange": ">=1.10.0"}},
                        {"gvk": gvk(dep)},
                    ]}}}),
                });
            }
        }
        write(json!({"schema": "olm.package", "name": package, "defaultChannel": "stable"}));
        let entries: Vec<Value> = (0..VERSIONS)
            .map(|v| {
                let mut entry = json!({"name": format!("{package}.v1.{v}.0")});
                if v > 0 {
                    entry["replaces"] = json!(format!("{package}.v1.{}.0", v - 1));
                }
                if v % 5 == 4 {
                    entry["skipRange"] = json!(format!(">=1.{}.0 <1.{v}.0", v - 4));
                }
                entry
            })
            .collect();
        write(
            json!({"schema": "olm.channel", "package": package, "name": "stable", "entries": entries}),
        );
        for v in 0..VERSIONS {
            let mut properties = vec![
                json!({"type": "olm.package", "value": {"packageName": package, "version": format!("1.{v}.0")}}),
                json!({"type": "olm.gvk", "value": gvk(p)}),
            ];
            properties.extend(requires.iter().cloned());
            write(json!({
                "schema": "olm.bundle",
                "name": format!("{package}.v1.{v}.0"),
                "package": package,
                "image": format!("quay.io/bench/{package}:v1.{v}.0"),
                "properties": properties,
            }));
        }
    }
    file.flush().unwrap();
}
