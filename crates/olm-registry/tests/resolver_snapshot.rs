//! `resolver_input::snapshot` (a catalog read through the serving index, as
//! `kubectl olm resolve` reads a directory) against the two other ways a
//! catalog becomes resolver input, on every file-based catalog of the shared
//! test data:
//!
//! * `CatalogSnapshot::from_fbc` (the catalog loaded whole by `olm-catalog`):
//!   the same entries with the same bundle data, the same channel orders,
//!   and the same resolution of every package's default channel;
//! * a registry serving the directory, read as catalog-operator reads it
//!   (packages, then `ListBundles` through `bundle_input`): the same entries
//!   in the same order.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::Arc,
};

use futures::TryStreamExt;
use olm_catalog::{fbc::Catalog, property::Gvk};
use olm_registry::{
    CatalogIndex, ClientOptions, IndexOptions, RegistryClient, RegistryServer, resolver_input,
};
use olm_resolver::{
    CatalogKey, CatalogSnapshot, DependencyError, NamespaceState, ResolveRequest, Subscription,
    resolve,
};
use serde_json::Value;

const CATALOG_NAME: &str = "corpus-catalog";
const CATALOG_NAMESPACE: &str = "corpus-olm";

/// One file-based catalog of the corpus: a directory, or a single file that
/// is a catalog of its own (upstream's e2e fixtures keep several variants of
/// one package side by side).
enum CorpusCatalog {
    Dir(PathBuf),
    File(PathBuf),
}

/// Every file-based catalog of the shared test data: the real catalogs and
/// the upstream fixtures that olm-catalog's tests load as catalogs.
fn corpus_catalogs() -> Option<Vec<CorpusCatalog>> {
    let testdata = olm_testkit::testdata()?;
    let mut dirs = sorted_children(&testdata.join("catalogs"));
    assert!(
        dirs.len() >= 4,
        "expected the four real catalogs of SOURCES.md under {}",
        testdata.join("catalogs").display()
    );
    let fixtures = testdata.join("upstream-fixtures");
    dirs.extend(
        [
            "operator-registry/fbc-dir/file-based-catalog",
            "operator-registry/alpha/action/testdata/list-index",
            "operator-registry/alpha/action/testdata/foo-index-v0.2.0-declcfg",
        ]
        .map(|d| fixtures.join(d)),
    );
    dirs.extend(sorted_children(
        &fixtures.join("operator-registry/alpha/action/testdata/index-declcfgs"),
    ));
    let mut catalogs: Vec<CorpusCatalog> = dirs.into_iter().map(CorpusCatalog::Dir).collect();
    for dir in [
        "operator-lifecycle-manager/test/e2e/testdata/magiccatalog",
        "operator-lifecycle-manager/test/e2e/testdata/subscription",
        "operator-lifecycle-manager/test/e2e/testdata/bad-csv",
    ] {
        catalogs.extend(
            sorted_children(&fixtures.join(dir))
                .into_iter()
                .map(CorpusCatalog::File),
        );
    }
    Some(catalogs)
}

fn sorted_children(dir: &Path) -> Vec<PathBuf> {
    let mut children: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    children.sort();
    children
}

fn key() -> CatalogKey {
    CatalogKey::new(CATALOG_NAME, CATALOG_NAMESPACE)
}

fn through_index(dir: &Path) -> CatalogSnapshot {
    let index = CatalogIndex::build(dir, &IndexOptions::default())
        .unwrap_or_else(|e| panic!("indexing {}: {e}", dir.display()));
    resolver_input::snapshot(&index, key(), 0, true)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
}

/// The snapshot a client of a registry serving `dir` builds, as
/// catalog-operator and `kubectl olm resolve --catalog ns/name=grpc://...`
/// build it.
fn through_a_served_registry(runtime: &tokio::runtime::Runtime, dir: &Path) -> CatalogSnapshot {
    runtime.block_on(async {
        let index = CatalogIndex::build(dir, &IndexOptions::default())
            .unwrap_or_else(|e| panic!("indexing {}: {e}", dir.display()));
        let server = RegistryServer::new(index).spawn_loopback().await.unwrap();
        let client = RegistryClient::connect(&server.endpoint(), ClientOptions::default())
            .await
            .unwrap();
        let mut packages = Vec::new();
        for name in client.list_packages().await.unwrap() {
            let package = client.get_package(&name).await.unwrap();
            packages.push((package.name, package.default_channel_name));
        }
        let bundles: Vec<_> = client
            .list_bundles()
            .await
            .unwrap()
            .map_ok(resolver_input::bundle_input)
            .try_collect()
            .await
            .unwrap();
        server.shutdown().await.unwrap();
        CatalogSnapshot::build(key(), 0, true, &packages, bundles)
    })
}

fn through_fbc(dir: &Path) -> CatalogSnapshot {
    let catalog =
        Catalog::load_dir(dir).unwrap_or_else(|e| panic!("loading {}: {e}", dir.display()));
    CatalogSnapshot::from_fbc(key(), 0, &catalog)
}

/// What resolution reads of one entry, with the bundle's data.
#[derive(Debug, PartialEq)]
struct EntryView {
    replaces: Option<String>,
    skips: Vec<String>,
    skip_range: Option<String>,
    default_channel: bool,
    package: String,
    version: Option<String>,
    provided: Vec<Gvk>,
    labels: Vec<String>,
    dependencies: Vec<String>,
    dependency_errors: Vec<DependencyError>,
    deprecated: bool,
    has_package_property: bool,
    properties: Vec<(String, Value)>,
    bundle_path: Option<String>,
}

/// The entries by (package, channel, bundle); the order of `entries` is
/// the source's (catalog order, or `ListBundles` order) and not compared.
fn entries(snapshot: &CatalogSnapshot) -> BTreeMap<(String, String, String), EntryView> {
    let mut out = BTreeMap::new();
    for e in &snapshot.entries {
        let b = &e.bundle;
        let view = EntryView {
            replaces: e.replaces.as_deref().map(str::to_owned),
            skips: e.skips.iter().map(|s| s.to_string()).collect(),
            skip_range: e.skip_range.as_deref().map(str::to_owned),
            default_channel: e.default_channel,
            package: b.package.to_string(),
            version: b.version.as_ref().map(|v| format!("{v:?}")),
            provided: b.provided.clone(),
            labels: b.labels.clone(),
            dependencies: b.dependencies.iter().map(|d| format!("{d:?}")).collect(),
            dependency_errors: b.dependency_errors.clone(),
            deprecated: b.deprecated,
            has_package_property: b.has_package_property,
            properties: b
                .properties
                .iter()
                .map(|p| (p.type_.to_string(), p.decoded()))
                .collect(),
            bundle_path: b.bundle_path.as_deref().map(str::to_owned),
        };
        let key = (
            b.package.to_string(),
            e.channel.to_string(),
            e.name.to_string(),
        );
        let previous = out.insert(key, view);
        assert!(previous.is_none(), "an entry listed twice");
    }
    out
}

/// Each channel's entries in OLM's preference order, by name.
fn channel_orders(
    snapshot: &CatalogSnapshot,
    channels: impl Iterator<Item = (String, String)>,
) -> BTreeMap<(String, String), Result<Vec<String>, String>> {
    channels
        .map(|(package, channel)| {
            let order = snapshot.sorted_channel(&package, &channel).map(|ids| {
                ids.iter()
                    .map(|&id| snapshot.entries[id as usize].name.to_string())
                    .collect()
            });
            ((package, channel), order)
        })
        .collect()
}

/// What resolving a Subscription to `package`'s default channel decides.
fn resolve_default_channel(snapshot: &Arc<CatalogSnapshot>, package: &str) -> String {
    let state = NamespaceState {
        namespace: "corpus-operators".into(),
        csvs: Vec::new(),
        subscriptions: vec![Subscription {
            name: format!("{package}-subscription"),
            package: package.into(),
            channel: String::new(),
            catalog: CATALOG_NAME.into(),
            catalog_namespace: CATALOG_NAMESPACE.into(),
            ..Default::default()
        }],
    };
    let result = resolve(&ResolveRequest {
        state: &state,
        catalogs: std::slice::from_ref(snapshot),
        global_namespace: CATALOG_NAMESPACE,
        exclude_global: false,
    });
    format!("{result:#?}")
}

/// Holds the entries read through the index to those read another way.
fn assert_same_entries(
    name: &str,
    other_way: &str,
    indexed: &BTreeMap<(String, String, String), EntryView>,
    other: &BTreeMap<(String, String, String), EntryView>,
) {
    assert_eq!(
        indexed.keys().collect::<Vec<_>>(),
        other.keys().collect::<Vec<_>>(),
        "{name}: the entries differ (left: through the index, right: {other_way})"
    );
    for (key, entry) in other {
        assert_eq!(
            &indexed[key], entry,
            "{name}: entry {key:?} differs (left: through the index, right: {other_way})"
        );
    }
}

/// Holds the three snapshots of the catalog in `dir` to the same answers.
fn assert_same_resolver_input(runtime: &tokio::runtime::Runtime, name: &str, dir: &Path) {
    let indexed = Arc::new(through_index(dir));
    let loaded = Arc::new(through_fbc(dir));
    let served = through_a_served_registry(runtime, dir);

    let in_order = |s: &CatalogSnapshot| -> Vec<(String, String)> {
        s.entries
            .iter()
            .map(|e| (e.channel.to_string(), e.name.to_string()))
            .collect()
    };
    assert_eq!(
        in_order(&indexed),
        in_order(&served),
        "{name}: the entries differ from ListBundles' (left: through the index, right: served)"
    );
    let indexed_entries = entries(&indexed);
    assert_same_entries(name, "served", &indexed_entries, &entries(&served));
    let loaded_entries = entries(&loaded);
    assert!(!loaded_entries.is_empty(), "{name}: no entries");
    assert_same_entries(name, "from_fbc", &indexed_entries, &loaded_entries);

    let channels = || {
        loaded_entries
            .keys()
            .map(|(package, channel, _)| (package.clone(), channel.clone()))
    };
    assert_eq!(
        channel_orders(&indexed, channels()),
        channel_orders(&loaded, channels()),
        "{name}: channel orders differ"
    );

    let mut packages: Vec<&str> = loaded_entries
        .keys()
        .map(|(package, ..)| package.as_str())
        .collect();
    packages.dedup();
    println!(
        "{name}: {} entries, {} packages resolved alike",
        loaded_entries.len(),
        packages.len()
    );
    for package in packages {
        assert_eq!(
            resolve_default_channel(&indexed, package),
            resolve_default_channel(&loaded, package),
            "{name}: resolving {package} on its default channel differs \
             (left: through the index, right: from_fbc)"
        );
    }
}

#[test]
fn every_corpus_catalog_gives_the_resolver_the_same_input_through_the_index() {
    let Some(catalogs) = corpus_catalogs() else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for catalog in catalogs {
        match catalog {
            CorpusCatalog::Dir(dir) => {
                assert_same_resolver_input(&runtime, &dir.display().to_string(), &dir);
            }
            CorpusCatalog::File(file) => {
                // The loaders read directories; give the file one of its own.
                let dir = tempfile::tempdir().unwrap();
                std::fs::copy(&file, dir.path().join(file.file_name().unwrap())).unwrap();
                assert_same_resolver_input(&runtime, &file.display().to_string(), dir.path());
            }
        }
    }
}
