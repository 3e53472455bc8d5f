//! Ours and upstream's, side by side: the same input, the same machine, the
//! same run, alternating which goes first.
//!
//! ```text
//! cargo xtask bench --vs-upstream catalog   # or render, validate, all
//! ```
//!
//! `cargo xtask` builds upstream's binaries from their Go modules at pinned
//! versions (`cargo xtask upstream`) and names them in `OLM_UPSTREAM_OPM`;
//! this file never builds anything. Ours is this package's `opm`, built by
//! `cargo bench` in the bench (release) profile.
//!
//! Inputs: the two community catalogs of `shared/testdata` (real data) and
//! a generated catalog (`olm_testkit::synthetic_catalog`, 1,000 packages /
//! 20,000 bundles by default), kept under `target/vs-upstream/` between
//! runs. Each figure is the median of `OLM_BENCH_RUNS` runs (default 3),
//! with the spread (min-max). Peak RSS is the kernel's high-water mark
//! (`VmHWM`) sampled every 5 ms while the process runs: growth in its last
//! 5 ms can be missed, nothing before it.
//!
//! Results: a table on stdout, `target/vs-upstream/results.json`, and
//! `target/vs-upstream/ratios.png` (upstream / ours, log scale).
//!
//! Knobs (environment): `OLM_BENCH_RUNS`, `OLM_BENCH_PACKAGES`,
//! `OLM_BENCH_BUNDLES`, `OLM_BENCH_SEED`, `OLM_BENCH_QUERIES` (point
//! queries per run, default 2,000), `OLM_BENCH_INPUTS` (comma-separated
//! input names to keep, for example `generated`).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    missing_docs
)]

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use olm_registry::{ClientOptions, RegistryClient};
use olm_testkit::side_by_side;

pub(crate) use olm_testkit::side_by_side::{OURS, Row, UPSTREAM, median};
const UPSTREAM_CACHED: &str = "upstream, pre-built cache";

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("vs_upstream: run with `cargo xtask bench --vs-upstream <scenario>`");
        return;
    }
    let scenarios: Vec<String> = std::env::args()
        .filter_map(|a| a.strip_prefix("--scenario=").map(str::to_owned))
        .collect();
    if scenarios.is_empty() {
        eprintln!(
            "vs_upstream: no --scenario=NAME given; run it through `cargo xtask bench --vs-upstream <scenario>`"
        );
        std::process::exit(2);
    }
    let needs_opm = scenarios.iter().any(|s| s != "resolve");
    let upstream = std::env::var_os("OLM_UPSTREAM_OPM").map(PathBuf::from);
    if needs_opm && upstream.is_none() {
        eprintln!(
            "vs_upstream: OLM_UPSTREAM_OPM is not set; run it through `cargo xtask bench --vs-upstream`, which builds upstream's opm"
        );
        std::process::exit(2);
    }
    let upstream = upstream.unwrap_or_default();
    let ours = PathBuf::from(env!("CARGO_BIN_EXE_opm"));
    let out = side_by_side::out_dir();
    std::fs::create_dir_all(&out).unwrap();
    let inputs = if needs_opm { inputs(&out) } else { Vec::new() };
    let runs = env_usize("OLM_BENCH_RUNS", 3).max(1);
    let upstream_version = if needs_opm {
        version(&upstream)
    } else {
        String::new()
    };
    if needs_opm {
        println!(
            "vs_upstream: ours {}, upstream {} ({upstream_version}), {runs} runs each, alternating\n",
            ours.display(),
            upstream.display(),
        );
    }

    let mut rows = Vec::new();
    for scenario in &scenarios {
        match scenario.as_str() {
            "catalog" => rows.extend(catalog(&ours, &upstream, &inputs, runs)),
            "render" => rows.extend(one_shot("render", &ours, &upstream, &inputs, runs)),
            "validate" => rows.extend(one_shot("validate", &ours, &upstream, &inputs, runs)),
            "resolve" => rows.extend(resolve::scenario(&out)),
            other => panic!("unknown scenario {other}"),
        }
    }
    let mut versions = Vec::new();
    if needs_opm {
        versions.push(upstream_version);
    }
    side_by_side::report(&rows, &out, &versions, runs);
}

#[path = "vs_upstream/resolve.rs"]
mod resolve;

// ---------------------------------------------------------------- inputs --

struct Input {
    name: String,
    dir: PathBuf,
    what: String,
}

fn inputs(out: &Path) -> Vec<Input> {
    let mut inputs = Vec::new();
    match olm_testkit::testdata() {
        Some(testdata) => {
            for (name, catalog) in [
                ("real-v4.21", "community-operators-prod-v4.21"),
                ("real-v4.16", "community-operators-prod-v4.16"),
            ] {
                let dir = testdata.join("catalogs").join(catalog);
                inputs.push(Input {
                    name: name.to_owned(),
                    what: format!("{catalog} ({})", describe(&dir)),
                    dir,
                });
            }
        }
        None => println!("shared/testdata is missing: the real catalogs are left out"),
    }
    let packages = env_usize("OLM_BENCH_PACKAGES", 1_000);
    let bundles = env_usize("OLM_BENCH_BUNDLES", 20_000);
    let seed = env_usize("OLM_BENCH_SEED", 1) as u64;
    let dir = olm_testkit::synthetic_catalog::written_once(out, packages, bundles, seed);
    inputs.push(Input {
        name: "generated".to_owned(),
        what: format!(
            "synthetic, {packages} packages / {bundles} bundles, seed {seed} ({})",
            describe(&dir)
        ),
        dir,
    });
    if let Ok(keep) = std::env::var("OLM_BENCH_INPUTS") {
        let keep: Vec<&str> = keep.split(',').collect();
        inputs.retain(|i| keep.contains(&i.name.as_str()));
    }
    inputs
}

/// "N files, M MB".
fn describe(dir: &Path) -> String {
    let (mut files, mut bytes) = (0_u64, 0_u64);
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let entry = entry.unwrap();
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                stack.push(entry.path());
            } else if !entry.file_name().to_string_lossy().starts_with('.') {
                files += 1;
                bytes += meta.len();
            }
        }
    }
    format!("{files} files, {:.0} MB", bytes as f64 / 1e6)
}

// ------------------------------------------------------------- measuring --

/// A child process whose peak RSS is sampled while it runs; killed on drop.
/// Its stderr goes to a file (a pipe nobody reads could stall it).
struct Watched {
    child: Child,
    peak_kib: u64,
    stderr: tempfile::NamedTempFile,
}

impl Watched {
    fn spawn(command: &mut Command) -> Self {
        let stderr = tempfile::NamedTempFile::new().unwrap();
        let child = command
            .stdout(Stdio::null())
            .stderr(stderr.reopen().unwrap())
            .spawn()
            .unwrap();
        Self {
            child,
            peak_kib: 0,
            stderr,
        }
    }

    fn sample(&mut self) {
        if let Some(kib) = side_by_side::peak_rss_kib(self.child.id()) {
            self.peak_kib = self.peak_kib.max(kib);
        }
    }

    /// Waits for the exit, sampling; returns whether it succeeded.
    fn wait(&mut self) -> bool {
        loop {
            self.sample();
            if let Some(status) = self.child.try_wait().unwrap() {
                if !status.success() {
                    let err = std::fs::read_to_string(self.stderr.path()).unwrap_or_default();
                    eprintln!(
                        "  exited {status}: {}",
                        err.lines().last().unwrap_or_default()
                    );
                }
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn peak_mb(&self) -> f64 {
        self.peak_kib as f64 * 1024.0 / 1e6
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The implementations in the order of run `run`: alternating who starts.
fn order<'a>(run: usize, ours: &'a Path, upstream: &'a Path) -> [(&'static str, &'a Path); 2] {
    if run.is_multiple_of(2) {
        [(OURS, ours), (UPSTREAM, upstream)]
    } else {
        [(UPSTREAM, upstream), (OURS, ours)]
    }
}

// -------------------------------------------------------- render/validate --

fn one_shot(
    command: &'static str,
    ours: &Path,
    upstream: &Path,
    inputs: &[Input],
    runs: usize,
) -> Vec<Row> {
    let mut rows = Vec::new();
    for input in inputs {
        println!("{command} {}: {}", input.name, input.what);
        let mut time = Row::new(command, &input.name, "wall time", "s");
        let mut rss = Row::new(command, &input.name, "peak RSS", "MB");
        let mut verdicts = Vec::new();
        for run in 0..runs {
            for (who, binary) in order(run, ours, upstream) {
                let started = Instant::now();
                let mut watched = Watched::spawn(
                    Command::new(binary)
                        .arg(command)
                        .arg(&input.dir)
                        .current_dir(std::env::temp_dir()),
                );
                let ok = watched.wait();
                let elapsed = started.elapsed().as_secs_f64();
                verdicts.push((who, ok));
                println!(
                    "  run {run} {who:<9} {elapsed:>7.2} s {:>8.0} MB{}",
                    watched.peak_mb(),
                    if ok { "" } else { "  (failed)" }
                );
                time.push(who, elapsed);
                rss.push(who, watched.peak_mb());
            }
        }
        // A speed figure means nothing if the two disagree on the answer.
        let ours_ok: Vec<bool> = verdicts
            .iter()
            .filter(|(w, _)| *w == OURS)
            .map(|(_, ok)| *ok)
            .collect();
        let upstream_ok: Vec<bool> = verdicts
            .iter()
            .filter(|(w, _)| *w == UPSTREAM)
            .map(|(_, ok)| *ok)
            .collect();
        assert_eq!(
            ours_ok, upstream_ok,
            "{command} {}: the verdicts differ",
            input.name
        );
        rows.push(time);
        rows.push(rss);
    }
    rows
}

// --------------------------------------------------------------- catalog --

fn catalog(ours: &Path, upstream: &Path, inputs: &[Input], runs: usize) -> Vec<Row> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let queries = env_usize("OLM_BENCH_QUERIES", 2_000);
    let mut rows = Vec::new();
    for input in inputs {
        println!("serve {}: {}", input.name, input.what);
        // Upstream's pre-built cache, made once per input (not timed as a
        // serve start; its build time is printed).
        let cache = tempfile::tempdir().unwrap();
        let started = Instant::now();
        let mut build = Watched::spawn(
            Command::new(upstream)
                .arg("serve")
                .arg(&input.dir)
                .arg("--cache-only")
                .arg("--cache-dir")
                .arg(cache.path().join("cache"))
                .arg("-t")
                .arg(cache.path().join("termination-log")),
        );
        assert!(build.wait(), "upstream could not pre-build its cache");
        println!(
            "  upstream's --cache-only build: {:.1} s, {:.0} MB peak",
            started.elapsed().as_secs_f64(),
            build.peak_mb()
        );

        let mut first = Row::new(
            "catalog",
            &input.name,
            "serve start to first ListPackages",
            "s",
        );
        let mut rss = Row::new("catalog", &input.name, "serve peak RSS", "MB");
        let mut health = Row::new("catalog", &input.name, "Health Check median", "ms");
        let mut get_package = Row::new("catalog", &input.name, "GetPackage median", "ms");
        let mut get_bundle = Row::new("catalog", &input.name, "GetBundleForChannel median", "ms");
        let mut get_bundle_p90 = Row::new("catalog", &input.name, "GetBundleForChannel p90", "ms");
        for run in 0..runs {
            let mut plan: Vec<(&'static str, &Path, Option<PathBuf>)> = order(run, ours, upstream)
                .into_iter()
                .map(|(who, binary)| (who, binary, None))
                .collect();
            plan.push((UPSTREAM_CACHED, upstream, Some(cache.path().join("cache"))));
            for (who, binary, cache_dir) in plan {
                let scratch = tempfile::tempdir().unwrap();
                let m = runtime.block_on(serve_once(
                    binary,
                    &input.dir,
                    cache_dir.as_deref(),
                    scratch.path(),
                    queries,
                ));
                println!(
                    "  run {run} {who:<26} first answer {:>6.2} s, {:>6.0} MB, Health {:.3} ms, GetPackage {:.3} ms, GetBundleForChannel {:.3} ms (p90 {:.3})",
                    m.first_answer_s,
                    m.peak_mb,
                    m.health_ms,
                    m.get_package_ms,
                    m.get_bundle_ms,
                    m.get_bundle_p90_ms
                );
                first.push(who, m.first_answer_s);
                rss.push(who, m.peak_mb);
                health.push(who, m.health_ms);
                get_package.push(who, m.get_package_ms);
                get_bundle.push(who, m.get_bundle_ms);
                get_bundle_p90.push(who, m.get_bundle_p90_ms);
            }
        }
        rows.extend([first, rss, health, get_package, get_bundle, get_bundle_p90]);
    }
    rows
}

struct ServeFigures {
    first_answer_s: f64,
    peak_mb: f64,
    /// The cheapest call either server answers: the fixed cost of a call
    /// with this client on this machine, which bounds the other ratios.
    health_ms: f64,
    get_package_ms: f64,
    get_bundle_ms: f64,
    get_bundle_p90_ms: f64,
}

async fn serve_once(
    binary: &Path,
    catalog: &Path,
    cache_dir: Option<&Path>,
    scratch: &Path,
    queries: usize,
) -> ServeFigures {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let started = Instant::now();
    let mut command = Command::new(binary);
    command
        .arg("serve")
        .arg(catalog)
        .args(["--port", &port.to_string()])
        .arg("-t")
        .arg(scratch.join("termination-log"));
    // Without --cache-dir upstream builds its cache in a temporary folder
    // at every start (with one, it insists the cache is already there).
    if let Some(dir) = cache_dir {
        command.arg("--cache-dir").arg(dir);
    }
    let mut watched = Watched::spawn(&mut command);
    let endpoint = format!("http://127.0.0.1:{port}");
    let deadline = started + Duration::from_secs(600);
    // One connection, reused for every query, as catalog-operator does.
    let (client, packages) = loop {
        watched.sample();
        if let Ok(client) = RegistryClient::connect(&endpoint, ClientOptions::default()).await
            && let Ok(packages) = client.list_packages().await
        {
            break (client, packages);
        }
        assert!(
            watched.child.try_wait().unwrap().is_none(),
            "{} serve exited",
            binary.display()
        );
        assert!(
            Instant::now() < deadline,
            "{} serve never answered",
            binary.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let first_answer_s = started.elapsed().as_secs_f64();

    let mut health_times = Vec::new();
    for _ in 0..queries {
        let t = Instant::now();
        assert!(
            client.health_check("").await.unwrap(),
            "the server is not serving"
        );
        health_times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let mut package_times = Vec::new();
    let mut channels = Vec::new();
    for name in packages.iter().cycle().take(queries.max(packages.len())) {
        let t = Instant::now();
        let package = client.get_package(name).await.unwrap();
        package_times.push(t.elapsed().as_secs_f64() * 1e3);
        if channels.len() < packages.len() {
            channels.push((name.clone(), package.default_channel_name));
        }
    }
    let mut bundle_times = Vec::new();
    for (package, channel) in channels.iter().cycle().take(queries) {
        let t = Instant::now();
        client
            .get_bundle_for_channel(package, channel)
            .await
            .unwrap();
        bundle_times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    watched.sample();
    bundle_times.sort_by(f64::total_cmp);
    let p90 = bundle_times[(bundle_times.len() - 1) * 9 / 10];
    ServeFigures {
        first_answer_s,
        peak_mb: watched.peak_mb(),
        health_ms: median(&health_times),
        get_package_ms: median(&package_times),
        get_bundle_ms: median(&bundle_times),
        get_bundle_p90_ms: p90,
    }
}

// ----------------------------------------------------------------- misc --

fn version(opm: &Path) -> String {
    Command::new(opm)
        .arg("version")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
        .and_then(|v| {
            v.split("OpmVersion:\"")
                .nth(1)
                .and_then(|s| s.split('"').next())
                .map(|s| format!("opm {s}"))
        })
        .unwrap_or_else(|| "opm (version unknown)".to_owned())
}

pub(crate) fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
