//! `kubectl olm resolve` over a large local file-based catalog: the time
//! to load it and the peak RSS of the process, for the way the command reads
//! a directory (the registry's serving index, then
//! `olm_registry::resolver_input::snapshot`) and the way it read one before
//! (`olm_catalog::fbc::Catalog::load_dir`, then `CatalogSnapshot::from_fbc`).
//!
//! ```text
//! cargo bench -p kubectl-olm --bench resolve_local
//! ```
//!
//! The catalog is `olm_testkit::synthetic_catalog` (1,000 packages and
//! 20,000 bundles by default), written once under
//! `target/vs-upstream/generated-<packages>x<bundles>-seed<seed>`, where the
//! side-by-side bench against upstream keeps the same one. The state holds
//! Subscriptions to ten of its packages on their default channels.
//!
//! Each way runs in a child process (this binary, re-executed), so its
//! memory is measured alone: the kernel's high-water mark (`VmHWM`), sampled
//! every 5 ms while it runs. The child loads the catalog, resolves, and
//! prints its load and resolve times. Then the real command,
//! `kubectl-olm resolve`, runs on the same input: its wall time and peak
//! RSS are the figures a user sees. Every run must decide the same, or the
//! figures mean nothing. Each figure is the median of `OLM_BENCH_RUNS` runs
//! (default 3).
//!
//! Knobs (environment): `OLM_BENCH_RUNS`, `OLM_BENCH_PACKAGES`,
//! `OLM_BENCH_BUNDLES`, `OLM_BENCH_SEED`, `OLM_BENCH_DIR` (a catalog
//! directory to read instead of the generated one).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_precision_loss,
    missing_docs
)]

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

use olm_catalog::fbc::Catalog;
use olm_registry::{CatalogIndex, IndexOptions, resolver_input};
use olm_resolver::{
    CatalogKey, CatalogSnapshot, NamespaceState, ResolveRequest, Subscription, resolve,
};
use olm_testkit::side_by_side;

const ROLE_ENV: &str = "OLM_BENCH_ROLE";
const DIR_ENV: &str = "OLM_BENCH_CATALOG";
const SUBSCRIBED_ENV: &str = "OLM_BENCH_SUBSCRIBED";
const CATALOG_NAME: &str = "generated";
const CATALOG_NAMESPACE: &str = "olm";
const NAMESPACE: &str = "operators";
const SUBSCRIPTIONS: usize = 10;

/// How a catalog directory becomes resolver input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Way {
    /// The registry's serving index (what `kubectl olm resolve` does).
    Index,
    /// The whole catalog through olm-catalog (what it did before).
    LoadDir,
}

impl Way {
    const ALL: [Way; 2] = [Way::LoadDir, Way::Index];

    fn role(self) -> &'static str {
        match self {
            Way::Index => "index",
            Way::LoadDir => "load-dir",
        }
    }

    /// The two steps, as the table names them.
    fn steps(self) -> (&'static str, &'static str) {
        match self {
            Way::Index => ("CatalogIndex::build", "resolver_input::snapshot"),
            Way::LoadDir => ("Catalog::load_dir", "CatalogSnapshot::from_fbc"),
        }
    }

    /// The snapshot of the catalog in `dir`, and how long the first step
    /// (reading the directory) took, in ms.
    fn load(self, dir: &Path) -> (CatalogSnapshot, f64) {
        let key = CatalogKey::new(CATALOG_NAME, CATALOG_NAMESPACE);
        let started = Instant::now();
        match self {
            Way::Index => {
                let index = CatalogIndex::build(dir, &IndexOptions::default()).unwrap();
                let read_ms = started.elapsed().as_secs_f64() * 1e3;
                let snapshot = resolver_input::snapshot(&index, key, 0, true).unwrap();
                (snapshot, read_ms)
            }
            Way::LoadDir => {
                let catalog = Catalog::load_dir(dir).unwrap();
                let read_ms = started.elapsed().as_secs_f64() * 1e3;
                (CatalogSnapshot::from_fbc(key, 0, &catalog), read_ms)
            }
        }
    }
}

fn main() {
    if let Ok(role) = std::env::var(ROLE_ENV) {
        let way = Way::ALL
            .into_iter()
            .find(|w| w.role() == role)
            .expect("a known role");
        let dir = PathBuf::from(std::env::var_os(DIR_ENV).expect("a catalog directory"));
        let subscribed = std::env::var(SUBSCRIBED_ENV).expect("packages to subscribe to");
        child_main(way, &dir, subscribed.split(','));
        return;
    }
    // `cargo bench` passes `--bench`; a plain `cargo test --benches` run
    // passes nothing and should stay cheap.
    if !std::env::args().any(|a| a == "--bench") {
        println!("resolve_local: run with `cargo bench -p kubectl-olm --bench resolve_local`");
        return;
    }
    parent_main();
}

// ---------------------------------------------------------------- child --

/// Loads the catalog one way, resolves Subscriptions to `packages` on
/// their default channels, and prints
/// `LOADED <load ms> <read ms> <resolve ms> <decision>`.
fn child_main<'a>(way: Way, dir: &Path, packages: impl Iterator<Item = &'a str>) {
    let started = Instant::now();
    let (snapshot, read_ms) = way.load(dir);
    let snapshot = Arc::new(snapshot);
    let load_ms = started.elapsed().as_secs_f64() * 1e3;
    let state = NamespaceState {
        namespace: NAMESPACE.to_owned(),
        csvs: Vec::new(),
        subscriptions: packages
            .map(|package| Subscription {
                name: package.to_owned(),
                package: package.to_owned(),
                catalog: CATALOG_NAME.to_owned(),
                catalog_namespace: CATALOG_NAMESPACE.to_owned(),
                ..Subscription::default()
            })
            .collect(),
    };
    let started = Instant::now();
    let resolution = resolve(&ResolveRequest {
        state: &state,
        catalogs: std::slice::from_ref(&snapshot),
        global_namespace: CATALOG_NAMESPACE,
        exclude_global: false,
    })
    .expect("the generated catalog resolves");
    let resolve_ms = started.elapsed().as_secs_f64() * 1e3;
    println!(
        "LOADED {load_ms:.1} {read_ms:.1} {resolve_ms:.2} {}",
        decision(resolution.operators.iter().map(|o| o.name.as_str()))
    );
}

/// The CSVs chosen, sorted and joined: what every run must agree on.
fn decision<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let mut names: Vec<&str> = names.collect();
    names.sort_unstable();
    names.join(",")
}

// --------------------------------------------------------------- parent --

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"),
        PathBuf::from,
    )
}

/// The catalog to read: `OLM_BENCH_DIR`, or the generated one, written
/// once.
fn catalog_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("OLM_BENCH_DIR") {
        return PathBuf::from(dir);
    }
    let packages = env_usize("OLM_BENCH_PACKAGES", 1_000);
    let bundles = env_usize("OLM_BENCH_BUNDLES", 20_000);
    let seed = env_usize("OLM_BENCH_SEED", 1) as u64;
    olm_testkit::synthetic_catalog::written_once(
        &target_dir().join("vs-upstream"),
        packages,
        bundles,
        seed,
    )
}

/// Bytes and files under `dir`.
fn size_of(dir: &Path) -> (u64, usize) {
    let mut bytes = 0;
    let mut files = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let meta = entry.metadata().unwrap();
        if meta.is_dir() {
            let (b, f) = size_of(&entry.path());
            bytes += b;
            files += f;
        } else {
            bytes += meta.len();
            files += 1;
        }
    }
    (bytes, files)
}

/// A child process whose peak RSS is sampled while it runs.
struct Watched {
    child: Child,
    started: Instant,
    peak_kib: u64,
}

impl Watched {
    fn spawn(command: &mut Command) -> Self {
        let started = Instant::now();
        let child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        Self {
            child,
            started,
            peak_kib: 0,
        }
    }

    fn sample(&mut self) {
        if let Some(kib) = side_by_side::peak_rss_kib(self.child.id()) {
            self.peak_kib = self.peak_kib.max(kib);
        }
    }

    /// Waits for a successful exit, sampling; returns the wall time in ms,
    /// the peak RSS in MiB and stdout. Stdout is small (one line, or one
    /// report), so reading it after the exit cannot stall the child.
    fn wait(mut self) -> (f64, f64, String) {
        let status = loop {
            self.sample();
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let wall_ms = self.started.elapsed().as_secs_f64() * 1e3;
        let mut stdout = String::new();
        std::io::Read::read_to_string(&mut self.child.stdout.take().unwrap(), &mut stdout).unwrap();
        assert!(status.success(), "exited {status}: {stdout}");
        (wall_ms, self.peak_kib as f64 / 1024.0, stdout)
    }
}

/// Figures of one way over the runs.
#[derive(Default)]
struct Figures {
    wall_ms: Vec<f64>,
    load_ms: Vec<f64>,
    read_ms: Vec<f64>,
    snapshot_ms: Vec<f64>,
    resolve_ms: Vec<f64>,
    peak_mib: Vec<f64>,
}

fn parent_main() {
    let runs = env_usize("OLM_BENCH_RUNS", 3).max(1);
    let dir = catalog_dir();
    let (bytes, files) = size_of(&dir);
    println!(
        "== {} ({:.1} MB in {files} files), {runs} runs each, medians",
        dir.display(),
        bytes as f64 / 1e6
    );

    let subscribed = subscribed_packages(&dir);
    let state = tempfile::NamedTempFile::new().unwrap();
    write_state(state.path(), &subscribed);
    let catalog = format!("{CATALOG_NAMESPACE}/{CATALOG_NAME}={}", dir.display());

    let mut decided: Option<String> = None;
    let mut agree = |way: &str, decision: String| match &decided {
        None => decided = Some(decision),
        Some(first) => assert_eq!(first, &decision, "{way} decided otherwise"),
    };
    let mut figures = Way::ALL.map(|w| (w, Figures::default()));
    let mut command_figures = Figures::default();
    for run in 0..runs {
        // Alternate which way goes first, so the page cache favours neither.
        let mut order = Way::ALL.to_vec();
        if run % 2 == 1 {
            order.reverse();
        }
        for way in order {
            let (wall_ms, peak_mib, stdout) = Watched::spawn(
                Command::new(std::env::current_exe().unwrap())
                    .env(ROLE_ENV, way.role())
                    .env(DIR_ENV, &dir)
                    .env(SUBSCRIBED_ENV, subscribed.join(",")),
            )
            .wait();
            let fields: Vec<&str> = stdout.split_whitespace().collect();
            assert_eq!(fields.first(), Some(&"LOADED"), "{stdout}");
            let f = &mut figures.iter_mut().find(|(w, _)| *w == way).unwrap().1;
            f.wall_ms.push(wall_ms);
            let (load_ms, read_ms): (f64, f64) =
                (fields[1].parse().unwrap(), fields[2].parse().unwrap());
            f.load_ms.push(load_ms);
            f.read_ms.push(read_ms);
            f.snapshot_ms.push(load_ms - read_ms);
            f.resolve_ms.push(fields[3].parse().unwrap());
            f.peak_mib.push(peak_mib);
            agree(way.role(), fields.get(4).copied().unwrap_or("").to_owned());
        }
        let (wall_ms, peak_mib, stdout) = Watched::spawn(
            Command::new(env!("CARGO_BIN_EXE_kubectl-olm"))
                .args(["resolve", "--catalog", &catalog, "--state"])
                .arg(state.path())
                .args(["-o", "json"])
                .env_remove("KUBECTL_OLM_CATALOGS")
                .env_remove("KUBECTL_OLM_STATE")
                .env_remove("KUBECTL_OLM_OUTPUT"),
        )
        .wait();
        let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(report["decision"], "Resolved", "{stdout}");
        agree(
            "kubectl-olm resolve",
            decision(
                report["operators"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|o| o["name"].as_str().unwrap()),
            ),
        );
        command_figures.wall_ms.push(wall_ms);
        command_figures.peak_mib.push(peak_mib);
    }

    let chosen = decided.unwrap_or_default();
    println!(
        "   every run chose the same {} CSVs",
        chosen.split(',').filter(|s| !s.is_empty()).count()
    );
    println!(
        "   {:<48} {:>9} {:>10} {:>9} {:>10}",
        "", "load ms", "resolve ms", "wall ms", "peak MiB"
    );
    for (way, f) in &figures {
        let (read, snapshot) = way.steps();
        let read_ms = side_by_side::median(&f.read_ms);
        let load_ms = side_by_side::median(&f.load_ms);
        println!(
            "   {:<48} {load_ms:>9.1} {:>10.2} {:>9.1} {:>10.1}",
            format!("{read} + {snapshot}"),
            side_by_side::median(&f.resolve_ms),
            side_by_side::median(&f.wall_ms),
            side_by_side::median(&f.peak_mib)
        );
        println!("     {read:<46} {read_ms:>9.1}");
        println!(
            "     {snapshot:<46} {:>9.1}",
            side_by_side::median(&f.snapshot_ms)
        );
    }
    println!(
        "   {:<48} {:>9} {:>10} {:>9.1} {:>10.1}",
        "kubectl-olm resolve (the command)",
        "",
        "",
        side_by_side::median(&command_figures.wall_ms),
        side_by_side::median(&command_figures.peak_mib)
    );
}

/// Ten packages spread over the catalog, by name. Indexing here also puts
/// the catalog in the page cache before any measured run.
fn subscribed_packages(dir: &Path) -> Vec<String> {
    let index = CatalogIndex::build(dir, &IndexOptions::default()).unwrap();
    let names = index.package_names();
    let step = (names.len() / SUBSCRIPTIONS).max(1);
    names
        .step_by(step)
        .take(SUBSCRIPTIONS)
        .map(str::to_owned)
        .collect()
}

/// The state file for the command: Subscriptions to `packages` on their
/// default channels.
fn write_state(path: &Path, packages: &[String]) {
    let mut yaml = String::new();
    for package in packages {
        yaml.push_str(&format!(
            "---\napiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\n\
             metadata: {{name: {package}, namespace: {NAMESPACE}}}\n\
             spec: {{name: {package}, source: {CATALOG_NAME}, sourceNamespace: {CATALOG_NAMESPACE}}}\n"
        ));
    }
    std::fs::write(path, yaml).unwrap();
}
