//! `opm serve`, ours and upstream's, on the same catalogs: every registry
//! RPC a client makes gets the same answer, message for message and, for
//! `csvJson` and `object`, byte for byte.
//!
//! Streams are compared in a canonical order (upstream's follows Go map
//! iteration, which is random per run, so no order can be matched); point
//! answers are compared exactly.

use std::{
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use olm_registry::{ClientOptions, GvkQuery, RegistryClient, api};

use super::{ours, upstream};

/// A child process, killed on drop (also when a comparison panics).
struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A running `opm serve` and a client connected to it.
struct Served {
    client: RegistryClient,
    _process: Kill,
    _scratch: tempfile::TempDir,
}

async fn serve(binary: &Path, catalog: &Path) -> Served {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let scratch = tempfile::tempdir().unwrap();
    let mut process = Kill(
        Command::new(binary)
            .arg("serve")
            .arg(catalog)
            .args(["--port", &port.to_string(), "-t"])
            .arg(scratch.path().join("termination-log"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Upstream takes seconds to build its cache on the larger catalogs.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let endpoint = format!("http://127.0.0.1:{port}");
        if let Ok(client) = RegistryClient::connect(&endpoint, ClientOptions::default()).await
            && client.list_packages().await.is_ok()
        {
            return Served {
                client,
                _process: process,
                _scratch: scratch,
            };
        }
        if let Ok(Some(status)) = process.0.try_wait() {
            panic!(
                "{} serve {} exited: {status}",
                binary.display(),
                catalog.display()
            );
        }
        assert!(
            Instant::now() < deadline,
            "{} serve {} did not answer",
            binary.display(),
            catalog.display()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The first difference between two answers, for the failure message: the
/// first line of their pretty `Debug` forms that differs, cut to the
/// characters around the first difference (`csvJson` is one long line).
fn differ<T: std::fmt::Debug + PartialEq>(what: &str, ours: &T, theirs: &T) {
    if ours != theirs {
        let (a, b) = (format!("{ours:#?}"), format!("{theirs:#?}"));
        let (line, (x, y)) = a
            .lines()
            .zip(b.lines())
            .enumerate()
            .find(|(_, (x, y))| x != y)
            .unwrap_or((0, ("", "")));
        let at = x
            .chars()
            .zip(y.chars())
            .position(|(p, q)| p != q)
            .unwrap_or_else(|| x.chars().count().min(y.chars().count()));
        let cut = |text: &str| -> String {
            text.chars()
                .skip(at.saturating_sub(120))
                .take(240)
                .collect()
        };
        let field = a
            .lines()
            .take(line + 1)
            .filter(|l| l.trim_start().ends_with('{') || l.contains(": "))
            .map(|l| l.split(": ").next().unwrap_or_default().trim().to_owned())
            .last()
            .unwrap_or_default();
        panic!(
            "{what}: answers differ at line {line} (field {field}), character {at}\nours:     {}\nupstream: {}",
            cut(x),
            cut(y)
        );
    }
}

fn bundle_key(b: &api::Bundle) -> (String, String, String) {
    (
        b.package_name.clone(),
        b.channel_name.clone(),
        b.csv_name.clone(),
    )
}

/// Results of a call that may fail: the value, or "error" (the codes and
/// texts of errors are compared by the single-call tests).
fn settle<T>(result: Result<T, olm_registry::ClientError>) -> Option<T> {
    result.ok()
}

async fn compare_catalog(upstream: &Path, catalog: &Path) -> usize {
    let ours = ours();
    let (mine, theirs) = tokio::join!(serve(&ours, catalog), serve(upstream, catalog));
    let (a, b) = (&mine.client, &theirs.client);
    let name = catalog.display().to_string();
    let mut calls = 0;

    let mut packages = a.list_packages().await.unwrap();
    let mut theirs_packages = b.list_packages().await.unwrap();
    packages.sort();
    theirs_packages.sort();
    differ(
        &format!("{name}: ListPackages"),
        &packages,
        &theirs_packages,
    );
    calls += 1;

    for package in &packages {
        let p = a.get_package(package).await.unwrap();
        let q = b.get_package(package).await.unwrap();
        differ(&format!("{name}: GetPackage {package}"), &p, &q);
        calls += 1;
        for channel in &p.channels {
            let x = settle(a.get_bundle_for_channel(package, &channel.name).await);
            let y = settle(b.get_bundle_for_channel(package, &channel.name).await);
            differ(
                &format!("{name}: GetBundleForChannel {package}/{}", channel.name),
                &x,
                &y,
            );
            calls += 1;
        }
    }

    let mut listed = olm_registry::collect_stream(a.list_bundles().await.unwrap())
        .await
        .unwrap();
    let mut theirs_listed = olm_registry::collect_stream(b.list_bundles().await.unwrap())
        .await
        .unwrap();
    listed.sort_by_key(bundle_key);
    theirs_listed.sort_by_key(bundle_key);
    assert_eq!(
        listed.len(),
        theirs_listed.len(),
        "{name}: ListBundles count"
    );
    for (x, y) in listed.iter().zip(&theirs_listed) {
        differ(&format!("{name}: ListBundles {:?}", bundle_key(x)), x, y);
    }
    calls += 1;

    // Point queries over every bundle: GetBundle, what replaces it, and
    // what provides each API it provides.
    let mut gvks = std::collections::BTreeSet::new();
    for bundle in &listed {
        let (package, channel, csv) = bundle_key(bundle);
        let x = settle(a.get_bundle(&package, &channel, &csv).await);
        let y = settle(b.get_bundle(&package, &channel, &csv).await);
        differ(
            &format!("{name}: GetBundle {package}/{channel}/{csv}"),
            &x,
            &y,
        );
        let x = settle(a.get_bundle_that_replaces(&csv, &package, &channel).await);
        let replacing: Vec<&str> = listed
            .iter()
            .filter(|r| {
                r.package_name == package
                    && r.channel_name == channel
                    && (r.replaces == csv || r.skips.contains(&csv))
            })
            .map(|r| r.csv_name.as_str())
            .collect();
        if replacing.len() > 1 {
            // Upstream returns whichever comes first in Go map order, so any
            // of them is its answer: ours must be one, encoded as upstream
            // encodes that bundle.
            let x = x.unwrap_or_else(|| panic!("{name}: GetBundleThatReplaces {csv}: none"));
            assert!(
                replacing.contains(&x.csv_name.as_str()),
                "{name}: GetBundleThatReplaces {csv}: {} is not one of {replacing:?}",
                x.csv_name
            );
            let y = settle(b.get_bundle(&package, &channel, &x.csv_name).await);
            differ(
                &format!("{name}: GetBundleThatReplaces {csv}"),
                &Some(x),
                &y,
            );
        } else {
            let y = settle(b.get_bundle_that_replaces(&csv, &package, &channel).await);
            differ(&format!("{name}: GetBundleThatReplaces {csv}"), &x, &y);
        }
        let x = settle(a.get_channel_entries_that_replace(&csv).await).map(sorted_entries);
        let y = settle(b.get_channel_entries_that_replace(&csv).await).map(sorted_entries);
        differ(
            &format!("{name}: GetChannelEntriesThatReplace {csv}"),
            &x,
            &y,
        );
        calls += 3;
        for gvk in &bundle.provided_apis {
            gvks.insert((gvk.group.clone(), gvk.version.clone(), gvk.kind.clone()));
        }
    }
    for (group, version, kind) in &gvks {
        let query = GvkQuery::new(group, version, kind);
        let x = settle(a.get_channel_entries_that_provide(query).await).map(sorted_entries);
        let y = settle(b.get_channel_entries_that_provide(query).await).map(sorted_entries);
        differ(
            &format!("{name}: GetChannelEntriesThatProvide {kind}"),
            &x,
            &y,
        );
        let x = settle(a.get_latest_channel_entries_that_provide(query).await).map(sorted_entries);
        let y = settle(b.get_latest_channel_entries_that_provide(query).await).map(sorted_entries);
        differ(
            &format!("{name}: GetLatestChannelEntriesThatProvide {kind}"),
            &x,
            &y,
        );
        let x = settle(a.get_default_bundle_that_provides(query).await);
        let y = settle(b.get_default_bundle_that_provides(query).await);
        differ(
            &format!("{name}: GetDefaultBundleThatProvides {kind}"),
            &x,
            &y,
        );
        calls += 3;
    }
    calls
}

fn sorted_entries(mut entries: Vec<api::ChannelEntry>) -> Vec<api::ChannelEntry> {
    entries.sort_by(|x, y| {
        (
            &x.package_name,
            &x.channel_name,
            &x.bundle_name,
            &x.replaces,
        )
            .cmp(&(
                &y.package_name,
                &y.channel_name,
                &y.bundle_name,
                &y.replaces,
            ))
    });
    entries
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_answers_match_upstream_on_every_corpus_catalog() {
    let (Some(upstream), Some(testdata)) = (upstream(), olm_testkit::testdata()) else {
        return;
    };
    let mut catalogs: Vec<_> = std::fs::read_dir(testdata.join("catalogs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    catalogs.sort();
    catalogs.push(super::fixture("catalog"));
    for catalog in catalogs {
        let calls = compare_catalog(&upstream, &catalog).await;
        println!("{}: {calls} calls answered alike", catalog.display());
        assert!(calls > 3, "{}: nothing compared", catalog.display());
    }
}
