//! The in-memory store of PackageManifests: the last good packages of every
//! catalog, a resourceVersion that grows with every change, and a bounded
//! history of changes that watches replay from.
//!
//! Reads never wait on a catalog: a refresh builds its packages first and
//! swaps them in under a short write lock.

use std::{
    collections::{BTreeMap, VecDeque},
    sync::{Arc, RwLock},
    time::SystemTime,
};

use olm_api::package_manifest::PackageManifest;
use sha2::{Digest as _, Sha256};
use tokio::sync::broadcast;

/// How many changes the store keeps for watches to resume from; a watch
/// from an older resourceVersion gets `410 Gone` and relists.
pub const HISTORY_LIMIT: usize = 20_000;

/// Bytes of the content digest kept in [`Snapshot::generation`] (hex).
pub const GENERATION_BYTES: usize = 16;

/// Capacity of the live change channel; a watcher that falls further behind
/// is ended and resumes from its last resourceVersion.
pub const LIVE_CHANNEL_CAPACITY: usize = 8_192;

/// One package as stored: the manifest (with icons, for the icon
/// subresource) and its `status` pre-serialized without icons, so that a
/// LIST writes stored bytes instead of serializing every package again.
#[derive(Debug, Clone)]
pub struct Stored {
    /// The manifest, in its catalog's namespace.
    pub manifest: PackageManifest,
    /// `status` as JSON, icons stripped.
    pub status_json: Box<serde_json::value::RawValue>,
    /// SHA-256 of what a LIST shows of the package except its
    /// resourceVersion: equal on every replica that fetched the same
    /// catalog content (see [`Snapshot::generation`]).
    pub digest: [u8; 32],
}

impl Stored {
    /// Prepares a manifest for serving.
    pub fn new(manifest: PackageManifest) -> Self {
        let mut status = manifest.status.clone();
        for channel in &mut status.channels {
            channel.current_csv_desc.icon = None;
        }
        // Serializing plain data to JSON cannot fail; an empty status is the
        // harmless fallback should it ever.
        let status_json = serde_json::value::to_raw_value(&status)
            .or_else(|_| serde_json::value::RawValue::from_string("{}".to_owned()))
            .unwrap_or_default();
        let mut metadata = manifest.metadata.clone();
        metadata.resource_version = None;
        let mut hasher = Sha256::new();
        // Serializing plain data cannot fail; an empty slice would only make
        // two packages look alike to a continue token.
        hasher.update(serde_json::to_vec(&metadata).unwrap_or_default());
        hasher.update([0]);
        hasher.update(status_json.get().as_bytes());
        Self {
            manifest,
            status_json,
            digest: hasher.finalize().into(),
        }
    }
}

/// Where an item sorts in a snapshot for a request in `namespace`: the
/// request's own namespace first, then by name, catalog and catalog
/// namespace. Total, so a continue token can name a position.
pub type SortKey = (bool, String, String, String);

/// The [`SortKey`] of a package for a request in `namespace`.
pub fn sort_key(manifest: &PackageManifest, namespace: Option<&str>) -> SortKey {
    let (foreign, name, catalog, catalog_namespace) = sort_key_ref(manifest, namespace);
    (
        foreign,
        name.to_owned(),
        catalog.to_owned(),
        catalog_namespace.to_owned(),
    )
}

/// [`sort_key`] without copies, for sorting.
pub fn sort_key_ref<'a>(
    manifest: &'a PackageManifest,
    namespace: Option<&str>,
) -> (bool, &'a str, &'a str, &'a str) {
    let catalog_namespace = manifest.status.catalog_source_namespace.as_str();
    (
        Some(catalog_namespace) != namespace,
        manifest.metadata.name.as_deref().unwrap_or_default(),
        manifest.status.catalog_source.as_str(),
        catalog_namespace,
    )
}

/// A catalog: `(namespace, name)`.
pub type CatalogKey = (String, String);

/// The kind of a change, as watch events name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// A package appeared.
    Added,
    /// A package changed.
    Modified,
    /// A package disappeared.
    Deleted,
}

impl EventKind {
    /// The watch event type.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One change of one package, with the resourceVersion it produced.
#[derive(Debug, Clone)]
pub struct Change {
    /// What happened.
    pub kind: EventKind,
    /// The package after the change (before it, for deletions), in its
    /// catalog's namespace, with `metadata.resourceVersion` set.
    pub manifest: Arc<Stored>,
    /// The store's resourceVersion after this change.
    pub resource_version: u64,
}

/// Health of one catalog's data.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CatalogHealth {
    /// When the packages were last fetched successfully.
    pub last_success: Option<SystemTime>,
    /// The last refresh error, cleared on success.
    pub last_error: Option<String>,
}

#[derive(Debug, Default)]
struct CatalogData {
    packages: BTreeMap<String, Arc<Stored>>,
    health: CatalogHealth,
    /// SHA-256 over the packages' names and digests.
    digest: [u8; 32],
}

fn catalog_digest(packages: &BTreeMap<String, Arc<Stored>>) -> [u8; 32] {
    let mut hasher = Sha256::new();
    for (name, stored) in packages {
        hasher.update(name.as_bytes());
        hasher.update([0]);
        hasher.update(stored.digest);
    }
    hasher.finalize().into()
}

#[derive(Debug)]
struct State {
    catalogs: BTreeMap<CatalogKey, CatalogData>,
    resource_version: u64,
    history: VecDeque<Change>,
}

/// The store; cheap to share behind an [`Arc`].
#[derive(Debug)]
pub struct Store {
    state: RwLock<State>,
    live: broadcast::Sender<Change>,
    global_namespace: String,
}

/// A consistent read of the visible packages.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The packages, in their catalogs' namespaces, sorted by namespace, name
    /// and catalog.
    pub items: Vec<Arc<Stored>>,
    /// The store's resourceVersion at the time of the read.
    pub resource_version: u64,
    /// Visible catalogs whose data is stale, with the reason.
    pub stale: Vec<(CatalogKey, String)>,
    /// A digest of the visible content (catalogs, packages, everything a
    /// LIST shows but resourceVersions): it changes when anything visible
    /// changes, and replicas that hold the same catalog content agree on it,
    /// so a continue token issued by one replica is honoured by another.
    pub generation: String,
}

/// Where a watch starts.
#[derive(Debug)]
pub enum WatchStart {
    /// Changes after the requested version, to replay before live ones.
    Replay(Vec<Change>),
    /// The requested version is older than the kept history (or unknown):
    /// the client must relist.
    Gone,
}

impl Store {
    /// An empty store; `global_namespace` holds catalogs visible from every
    /// namespace. resourceVersions start at `initial_version` (callers use a
    /// clock-derived value so that versions of a restarted or another
    /// replica rarely collide).
    pub fn new(global_namespace: impl Into<String>, initial_version: u64) -> Self {
        let (live, _) = broadcast::channel(LIVE_CHANNEL_CAPACITY);
        Self {
            state: RwLock::new(State {
                catalogs: BTreeMap::new(),
                resource_version: initial_version,
                history: VecDeque::new(),
            }),
            live,
            global_namespace: global_namespace.into(),
        }
    }

    /// The global catalog namespace.
    pub fn global_namespace(&self) -> &str {
        &self.global_namespace
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Subscribes to live changes (take the subscription before reading the
    /// history so nothing falls between the two).
    pub fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.live.subscribe()
    }

    /// The current resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.read().resource_version
    }

    /// Replaces a catalog's packages with a fresh, complete fetch and records
    /// its success. Unchanged packages keep their resourceVersion.
    pub fn replace_catalog(
        &self,
        key: &CatalogKey,
        packages: Vec<PackageManifest>,
        now: SystemTime,
    ) {
        let mut state = self.write();
        let old = state
            .catalogs
            .remove(key)
            .map(|c| c.packages)
            .unwrap_or_default();
        let mut changes = Vec::new();
        let mut next = BTreeMap::new();
        let mut rv = state.resource_version;
        for mut manifest in packages {
            let name = manifest.metadata.name.clone().unwrap_or_default();
            if next.contains_key(&name) {
                continue;
            }
            let previous = old.get(&name);
            if let Some(previous) = previous {
                manifest.metadata.resource_version =
                    previous.manifest.metadata.resource_version.clone();
                if manifest == previous.manifest {
                    next.insert(name, Arc::clone(previous));
                    continue;
                }
            }
            rv += 1;
            manifest.metadata.resource_version = Some(rv.to_string());
            let manifest = Arc::new(Stored::new(manifest));
            changes.push(Change {
                kind: if previous.is_some() {
                    EventKind::Modified
                } else {
                    EventKind::Added
                },
                manifest: Arc::clone(&manifest),
                resource_version: rv,
            });
            next.insert(name, manifest);
        }
        for (name, manifest) in &old {
            if !next.contains_key(name) {
                rv += 1;
                let mut gone = (**manifest).clone();
                gone.manifest.metadata.resource_version = Some(rv.to_string());
                changes.push(Change {
                    kind: EventKind::Deleted,
                    manifest: Arc::new(gone),
                    resource_version: rv,
                });
            }
        }
        let digest = catalog_digest(&next);
        state.catalogs.insert(
            key.clone(),
            CatalogData {
                packages: next,
                health: CatalogHealth {
                    last_success: Some(now),
                    last_error: None,
                },
                digest,
            },
        );
        self.commit(&mut state, rv, changes);
    }

    /// Records a failed refresh: the last good packages stay served.
    pub fn record_failure(&self, key: &CatalogKey, error: String) {
        let mut state = self.write();
        state
            .catalogs
            .entry(key.clone())
            .or_default()
            .health
            .last_error = Some(error);
    }

    /// Removes a deleted catalog and its packages.
    pub fn remove_catalog(&self, key: &CatalogKey) {
        let mut state = self.write();
        let Some(data) = state.catalogs.remove(key) else {
            return;
        };
        let mut rv = state.resource_version;
        let mut changes = Vec::new();
        for manifest in data.packages.values() {
            rv += 1;
            let mut gone = (**manifest).clone();
            gone.manifest.metadata.resource_version = Some(rv.to_string());
            changes.push(Change {
                kind: EventKind::Deleted,
                manifest: Arc::new(gone),
                resource_version: rv,
            });
        }
        self.commit(&mut state, rv, changes);
    }

    fn commit(&self, state: &mut State, rv: u64, changes: Vec<Change>) {
        state.resource_version = rv;
        for change in changes {
            if state.history.len() >= HISTORY_LIMIT {
                state.history.pop_front();
            }
            state.history.push_back(change.clone());
            // No receivers is fine: nobody watches.
            let _ = self.live.send(change);
        }
    }

    /// The catalogs known, with their health.
    pub fn catalogs(&self) -> Vec<(CatalogKey, usize, CatalogHealth)> {
        self.read()
            .catalogs
            .iter()
            .map(|(k, d)| (k.clone(), d.packages.len(), d.health.clone()))
            .collect()
    }

    /// Whether a package of catalog namespace `catalog_namespace` is visible
    /// from a request for `namespace` (`None`: all namespaces).
    pub fn visible(&self, namespace: Option<&str>, catalog_namespace: &str) -> bool {
        match namespace {
            None => true,
            Some(ns) => ns == catalog_namespace || catalog_namespace == self.global_namespace,
        }
    }

    /// The packages visible from `namespace` (`None`: all namespaces).
    pub fn snapshot(&self, namespace: Option<&str>) -> Snapshot {
        let state = self.read();
        let mut items = Vec::new();
        let mut stale = Vec::new();
        let mut generation = Sha256::new();
        for (key, data) in &state.catalogs {
            if !self.visible(namespace, &key.0) {
                continue;
            }
            if let Some(error) = &data.health.last_error {
                stale.push((key.clone(), error.clone()));
            }
            generation.update(key.0.as_bytes());
            generation.update([0]);
            generation.update(key.1.as_bytes());
            generation.update([0]);
            generation.update(data.digest);
            items.extend(data.packages.values().cloned());
        }
        // The request's own namespace first (GET picks the first match), then
        // by name and catalog.
        items.sort_by(|a, b| {
            sort_key_ref(&a.manifest, namespace).cmp(&sort_key_ref(&b.manifest, namespace))
        });
        let generation: [u8; 32] = generation.finalize().into();
        Snapshot {
            items,
            resource_version: state.resource_version,
            stale,
            generation: generation[..GENERATION_BYTES]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect(),
        }
    }

    /// Where a watch from `resource_version` starts.
    pub fn watch_from(&self, resource_version: u64) -> WatchStart {
        let state = self.read();
        if resource_version > state.resource_version {
            return WatchStart::Gone;
        }
        if resource_version == state.resource_version {
            return WatchStart::Replay(Vec::new());
        }
        let oldest_known = state
            .history
            .front()
            .map_or(state.resource_version, |c| c.resource_version - 1);
        if resource_version < oldest_known {
            return WatchStart::Gone;
        }
        WatchStart::Replay(
            state
                .history
                .iter()
                .filter(|c| c.resource_version > resource_version)
                .cloned()
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn pm(name: &str, ns: &str, catalog: &str, provider: &str) -> PackageManifest {
        let mut m = PackageManifest {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(ns.into()),
                ..ObjectMeta::default()
            },
            ..PackageManifest::default()
        };
        m.status.catalog_source = catalog.into();
        m.status.catalog_source_namespace = ns.into();
        m.status.provider.name = Some(provider.into());
        m
    }

    fn key(ns: &str, name: &str) -> CatalogKey {
        (ns.into(), name.into())
    }

    #[test]
    fn namespaces_see_their_catalogs_and_the_global_ones() {
        let store = Store::new("olm", 100);
        let now = SystemTime::now();
        store.replace_catalog(
            &key("olm", "global"),
            vec![pm("a", "olm", "global", "x")],
            now,
        );
        store.replace_catalog(
            &key("team", "local"),
            vec![pm("b", "team", "local", "x")],
            now,
        );
        store.replace_catalog(&key("other", "c"), vec![pm("c", "other", "c", "x")], now);
        let names = |ns: Option<&str>| -> Vec<String> {
            store
                .snapshot(ns)
                .items
                .iter()
                .filter_map(|m| m.manifest.metadata.name.clone())
                .collect()
        };
        assert_eq!(names(Some("team")), ["b", "a"], "own namespace first");
        assert_eq!(names(Some("olm")), ["a"]);
        assert_eq!(names(None), ["a", "b", "c"]);
        assert_eq!(names(Some("empty")), ["a"]);
    }

    #[test]
    fn versions_change_only_with_content() {
        let store = Store::new("olm", 100);
        let now = SystemTime::now();
        let k = key("olm", "cat");
        store.replace_catalog(
            &k,
            vec![pm("a", "olm", "cat", "x"), pm("b", "olm", "cat", "x")],
            now,
        );
        assert_eq!(store.resource_version(), 102);
        store.replace_catalog(
            &k,
            vec![pm("a", "olm", "cat", "x"), pm("b", "olm", "cat", "x")],
            now,
        );
        assert_eq!(
            store.resource_version(),
            102,
            "an identical refresh changes nothing"
        );
        store.replace_catalog(&k, vec![pm("a", "olm", "cat", "y")], now);
        assert_eq!(store.resource_version(), 104);
        let WatchStart::Replay(changes) = store.watch_from(102) else {
            panic!("history kept");
        };
        let kinds: Vec<_> = changes.iter().map(|c| c.kind).collect();
        assert_eq!(kinds, [EventKind::Modified, EventKind::Deleted]);
        assert!(matches!(store.watch_from(99), WatchStart::Gone));
        assert!(matches!(store.watch_from(105), WatchStart::Gone));
        assert!(matches!(store.watch_from(104), WatchStart::Replay(v) if v.is_empty()));
    }

    #[test]
    fn failures_keep_the_last_good_packages() {
        let store = Store::new("olm", 1);
        let k = key("olm", "cat");
        store.replace_catalog(&k, vec![pm("a", "olm", "cat", "x")], SystemTime::now());
        store.record_failure(&k, "connection refused".into());
        let snap = store.snapshot(Some("olm"));
        assert_eq!(snap.items.len(), 1);
        assert_eq!(snap.stale, [(k.clone(), "connection refused".to_owned())]);
        store.remove_catalog(&k);
        assert!(store.snapshot(None).items.is_empty());
    }

    #[test]
    fn generations_follow_content_not_replicas() {
        let now = SystemTime::now();
        let fill = |store: &Store, provider: &str| {
            store.replace_catalog(
                &key("olm", "global"),
                vec![
                    pm("a", "olm", "global", provider),
                    pm("b", "olm", "global", "x"),
                ],
                now,
            );
            store.replace_catalog(
                &key("team", "local"),
                vec![pm("c", "team", "local", "x")],
                now,
            );
        };
        // Two replicas: different version counters, same content.
        let (one, two) = (Store::new("olm", 10), Store::new("olm", 5_000));
        fill(&one, "x");
        fill(&two, "x");
        assert_ne!(one.resource_version(), two.resource_version());
        for ns in [None, Some("team"), Some("other")] {
            assert_eq!(
                one.snapshot(ns).generation,
                two.snapshot(ns).generation,
                "{ns:?}"
            );
            assert_eq!(one.snapshot(ns).generation.len(), 2 * GENERATION_BYTES);
        }
        let before = (
            one.snapshot(None).generation,
            one.snapshot(Some("team")).generation,
            one.snapshot(Some("other")).generation,
        );
        // A change in the team's catalog: visible from the team and from all
        // namespaces, not from another namespace.
        one.replace_catalog(
            &key("team", "local"),
            vec![pm("c", "team", "local", "y")],
            now,
        );
        assert_ne!(one.snapshot(None).generation, before.0);
        assert_ne!(one.snapshot(Some("team")).generation, before.1);
        assert_eq!(one.snapshot(Some("other")).generation, before.2);
        // Back to the same content: the same generation again.
        one.replace_catalog(
            &key("team", "local"),
            vec![pm("c", "team", "local", "x")],
            now,
        );
        assert_eq!(one.snapshot(None).generation, before.0);
        fill(&two, "z");
        assert_ne!(two.snapshot(Some("other")).generation, before.2);
    }

    #[test]
    fn sort_keys_are_total() {
        let store = Store::new("olm", 1);
        let now = SystemTime::now();
        // Same package and catalog name in two namespaces.
        store.replace_catalog(&key("a", "cat"), vec![pm("p", "a", "cat", "x")], now);
        store.replace_catalog(&key("b", "cat"), vec![pm("p", "b", "cat", "x")], now);
        let snapshot = store.snapshot(None);
        let keys: Vec<SortKey> = snapshot
            .items
            .iter()
            .map(|s| sort_key(&s.manifest, None))
            .collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "{keys:?}");
    }

    #[test]
    fn history_is_bounded() {
        let store = Store::new("olm", 0);
        let k = key("olm", "cat");
        for round in 0..3 {
            let packages = (0..HISTORY_LIMIT / 2)
                .map(|i| pm(&format!("p{i}"), "olm", "cat", &format!("v{round}")))
                .collect();
            store.replace_catalog(&k, packages, SystemTime::now());
        }
        assert!(matches!(store.watch_from(1), WatchStart::Gone));
        let rv = store.resource_version();
        assert!(matches!(store.watch_from(rv - 10), WatchStart::Replay(v) if v.len() == 10));
    }
}
