//! Serving a large synthetic catalog: how fast the registry answers after
//! start, how much memory it holds, and how fast it streams and looks up.
//!
//! ```text
//! cargo bench -p olm-registry --bench serve
//! ```
//!
//! The benchmark writes a deterministic (seeded) file-based catalog
//! (`olm_testkit::synthetic_catalog`) shaped
//! like the large real ones into a temporary directory: by default 1,000
//! packages, 20,000 bundles and about 250 MB of pretty-printed JSON, with
//! bundle sizes, channels per package, provided APIs per bundle and graph
//! shapes (replaces chains, skips, skipRange) drawn from the statistics of
//! `shared/testdata/catalogs/community-operators-prod-v4.21`.
//!
//! The server runs in a child process (this binary, re-executed), so its
//! memory is measured alone from `/proc/<pid>/status` (VmRSS, VmHWM). The
//! parent process is the client. Figures printed:
//!
//! * index build time (in the child) and time from spawning the child to
//!   the first successful `ListPackages` answer (no pre-built cache);
//! * server RSS after load, and its peak during a `ListBundles` storm from
//!   8 clients on separate connections;
//! * `ListBundles` throughput for one client and for the storm;
//! * `GetBundleForChannel` and `GetPackage` latency, p50 and p99, one client.
//!
//! Knobs (environment): `OLM_BENCH_PACKAGES`, `OLM_BENCH_BUNDLES`,
//! `OLM_BENCH_SEED`, `OLM_BENCH_DIR` (write the catalog there and keep it),
//! `OLM_BENCH_SERVER_THREADS` (the server's runtime workers, default 2),
//! `OLM_BENCH_CATALOG` (serve this existing catalog directory instead, a
//! real one for example; nothing is generated), `OLM_BENCH_QUERIES`
//! (point queries of each kind, default 4,000), `OLM_BENCH_THREADS`
//! (indexing threads).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use futures::StreamExt;
use olm_registry::{CatalogIndex, ClientOptions, IndexOptions, RegistryClient, RegistryServer};

const ROLE_ENV: &str = "OLM_BENCH_ROLE";
const STORM_CLIENTS: usize = 8;
/// Point queries of each kind, unless `OLM_BENCH_QUERIES` says otherwise.
const POINT_QUERIES: usize = 4_000;

fn main() {
    if std::env::var(ROLE_ENV).as_deref() == Ok("server") {
        let dir = std::env::var("OLM_BENCH_SERVE_DIR").expect("catalog directory");
        server_main(Path::new(&dir));
        return;
    }
    // `cargo bench` passes `--bench`; a plain `cargo test --benches` run
    // passes nothing and should stay cheap.
    if !std::env::args().any(|a| a == "--bench") {
        println!("serve benchmark: run with `cargo bench -p olm-registry --bench serve`");
        return;
    }
    parent_main();
}

// ---------------------------------------------------------------- child --

fn server_main(dir: &Path) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(env_usize("OLM_BENCH_SERVER_THREADS", 2))
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let started = Instant::now();
        let options = IndexOptions {
            threads: std::env::var("OLM_BENCH_THREADS")
                .ok()
                .and_then(|t| t.parse().ok()),
            ..IndexOptions::default()
        };
        let index = CatalogIndex::build(dir, &options).expect("indexing the catalog");
        let index_ms = started.elapsed().as_secs_f64() * 1e3;
        let heap = index.stats().heap_bytes;
        let server = RegistryServer::new(index).spawn_loopback().await.unwrap();
        println!("READY {} {index_ms:.1} {heap}", server.addr().port());
        // Serve until the parent closes stdin.
        tokio::task::spawn_blocking(|| {
            let mut line = String::new();
            while std::io::stdin()
                .read_line(&mut line)
                .map(|n| n > 0)
                .unwrap_or(false)
            {
                line.clear();
            }
        })
        .await
        .unwrap();
        server.shutdown().await.unwrap();
    });
}

// --------------------------------------------------------------- parent --

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn proc_status_kib(pid: u32, field: &str) -> u64 {
    olm_testkit::side_by_side::proc_status(pid, field).unwrap_or(0)
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn parent_main() {
    let packages = env_usize("OLM_BENCH_PACKAGES", 1_000);
    let bundles = env_usize("OLM_BENCH_BUNDLES", 20_000);
    let seed = env_usize("OLM_BENCH_SEED", 0x5eed) as u64;
    let (dir, _guard) = match std::env::var_os("OLM_BENCH_DIR") {
        Some(d) => (PathBuf::from(d), None),
        None => {
            let t = tempfile::tempdir().unwrap();
            (t.path().to_owned(), Some(t))
        }
    };

    // What the catalog holds, when this bench wrote it: (packages, entries).
    let expected = match std::env::var_os("OLM_BENCH_CATALOG") {
        Some(catalog) => {
            println!("== existing catalog {}", Path::new(&catalog).display());
            drop(_guard);
            return serve_and_measure(Path::new(&catalog), None, seed);
        }
        None => {
            let started = Instant::now();
            let generated = olm_testkit::synthetic_catalog::write(&dir, packages, bundles, seed);
            println!("== synthetic catalog (seed {seed:#x}) in {}", dir.display());
            println!(
                "   {} packages, {} channels, {} bundles, {} channel entries, {:.1} MB JSON in {} files ({:.1} s to write)",
                generated.packages,
                generated.channels,
                generated.bundles,
                generated.entries,
                generated.bytes as f64 / 1e6,
                generated.packages,
                started.elapsed().as_secs_f64()
            );
            (generated.packages, generated.entries)
        }
    };
    serve_and_measure(&dir, Some(expected), seed);
}

/// Serves `dir` in a child process and measures it; `expected` (packages,
/// channel entries) is checked against what the server answers.
fn serve_and_measure(dir: &Path, expected: Option<(usize, usize)>, seed: u64) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();

    // Start the server in a child process and wait for its first answer.
    let spawned = Instant::now();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env(ROLE_ENV, "server")
        .env("OLM_BENCH_SERVE_DIR", dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut ready = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    let fields: Vec<&str> = ready.split_whitespace().collect();
    assert_eq!(
        fields.first(),
        Some(&"READY"),
        "server failed to start: {ready:?}"
    );
    let port: u16 = fields[1].parse().unwrap();
    let index_ms: f64 = fields[2].parse().unwrap();
    let heap: usize = fields[3].parse().unwrap();
    let endpoint = format!("http://127.0.0.1:{port}");

    runtime.block_on(async {
        let client = RegistryClient::connect(&endpoint, ClientOptions::default()).await.unwrap();
        let names = client.list_packages().await.unwrap();
        let first_answer = spawned.elapsed();
        if let Some((packages, _)) = expected {
            assert_eq!(names.len(), packages);
        }
        let rss_loaded = proc_status_kib(pid, "VmRSS:");
        let hwm_loaded = proc_status_kib(pid, "VmHWM:");
        println!("== start (no pre-built cache)");
        println!("   index build in the server:             {index_ms:8.1} ms (index heap {:.1} MiB)", heap as f64 / 1048576.0);
        println!("   spawn to first ListPackages answer:    {:8.1} ms", first_answer.as_secs_f64() * 1e3);
        println!(
            "   server RSS after load:                 {:8.1} MiB (anonymous {:.1}, file {:.1}; peak so far {:.1} MiB)",
            mib(rss_loaded),
            mib(proc_status_kib(pid, "RssAnon:")),
            mib(proc_status_kib(pid, "RssFile:")),
            mib(hwm_loaded)
        );

        // Point queries: GetPackage then GetBundleForChannel of its default
        // channel, as packageserver does, for random packages.
        let mut rng = olm_testkit::synthetic_catalog::Rng::new(seed ^ 0xfeed);
        let queries = env_usize("OLM_BENCH_QUERIES", POINT_QUERIES);
        let mut get_package = Vec::with_capacity(queries);
        let mut get_bundle = Vec::with_capacity(queries);
        let mut pairs = Vec::with_capacity(queries);
        for _ in 0..queries {
            let name = &names[rng.below(names.len())];
            let t = Instant::now();
            let package = client.get_package(name).await.unwrap();
            let t_pkg = t.elapsed();
            let t2 = Instant::now();
            let bundle = client
                .get_bundle_for_channel(name, &package.default_channel_name)
                .await
                .unwrap();
            get_bundle.push(t2.elapsed());
            get_package.push(t_pkg);
            pairs.push(t.elapsed());
            assert!(!bundle.csv_json.is_empty());
        }
        get_package.sort();
        get_bundle.sort();
        pairs.sort();
        println!("== point queries ({queries} each, one client, sequential)");
        for (name, samples) in [
            ("GetPackage", &get_package),
            ("GetBundleForChannel", &get_bundle),
            ("GetPackage + GetBundleForChannel", &pairs),
        ] {
            println!(
                "   {name:34} p50 {:7.3} ms   p99 {:7.3} ms",
                percentile(samples, 0.5).as_secs_f64() * 1e3,
                percentile(samples, 0.99).as_secs_f64() * 1e3
            );
        }

        // One client streams every bundle.
        let t = Instant::now();
        let (count, bytes) = list_all(&client).await;
        let single = t.elapsed();
        if let Some((_, entries)) = expected {
            assert_eq!(count, entries);
        }
        println!("== ListBundles");
        println!(
            "   one client:  {count} bundles in {:6.3} s = {:8.0} bundles/s ({:.1} MB of messages)",
            single.as_secs_f64(),
            count as f64 / single.as_secs_f64(),
            bytes as f64 / 1e6
        );

        // The storm: 8 clients on their own connections at once, while the
        // server's RSS is sampled.
        let sampling = Arc::new(AtomicBool::new(true));
        let peak = Arc::new(AtomicU64::new(0));
        let sampler = {
            let (sampling, peak) = (sampling.clone(), peak.clone());
            std::thread::spawn(move || {
                while sampling.load(Ordering::Relaxed) {
                    peak.fetch_max(proc_status_kib(pid, "VmRSS:"), Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(10));
                }
            })
        };
        let t = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..STORM_CLIENTS {
            let endpoint = endpoint.clone();
            tasks.push(tokio::spawn(async move {
                let client = RegistryClient::connect(&endpoint, ClientOptions::default()).await.unwrap();
                list_all(&client).await
            }));
        }
        let mut total = 0;
        for task in tasks {
            let (count, _) = task.await.unwrap();
            if let Some((_, entries)) = expected {
            assert_eq!(count, entries);
        }
            total += count;
        }
        let storm = t.elapsed();
        sampling.store(false, Ordering::Relaxed);
        sampler.join().unwrap();
        println!(
            "   {STORM_CLIENTS} clients:   {total} bundles in {:6.3} s = {:8.0} bundles/s",
            storm.as_secs_f64(),
            total as f64 / storm.as_secs_f64()
        );
        println!("== server memory");
        println!("   RSS after load:        {:8.1} MiB", mib(rss_loaded));
        println!("   RSS peak during storm: {:8.1} MiB (sampled every 10 ms)", mib(peak.load(Ordering::Relaxed)));
        println!("   RSS after storm:       {:8.1} MiB", mib(proc_status_kib(pid, "VmRSS:")));
        println!("   VmHWM (whole run):     {:8.1} MiB", mib(proc_status_kib(pid, "VmHWM:")));
    });

    drop(child.stdin.take());
    let _ = child.wait();
}

async fn list_all(client: &RegistryClient) -> (usize, usize) {
    use prost::Message as _;
    let mut stream = std::pin::pin!(client.list_bundles().await.unwrap());
    let (mut count, mut bytes) = (0, 0);
    while let Some(bundle) = stream.next().await {
        bytes += bundle.unwrap().encoded_len();
        count += 1;
    }
    (count, bytes)
}
