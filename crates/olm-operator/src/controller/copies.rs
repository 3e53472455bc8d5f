//! The copied-CSV index: what the copy controller knows of every copy, kept
//! small because copies are the one thing olm-operator holds per namespace
//! per operator (10,000 at 1,000 namespaces and 10 AllNamespaces operators).
//!
//! A copy is watched metadata-only (`olm.copiedFrom`), and of each the
//! index keeps a [`CopyRecord`]: where it is, its parent's namespace, its
//! uid and the two copy hashes. A reflector store of the trimmed metadata
//! cost about 2 KB a copy (the `ObjectMeta` struct, two B-tree nodes for
//! labels and annotations, the store's key) and was 59% of the service's
//! peak heap in the scale bench; a record costs about 200 bytes.
//!
//! The index follows the watch like a reflector: a relist (`Init`,
//! `InitApply`, `InitDone`) fills a fresh map that replaces the live one
//! only when complete, so a copy deleted while the watch was down is gone
//! after the relist, and readers never see a half-filled index.

use std::{
    collections::HashMap,
    sync::{Arc, RwLock},
};

use futures::StreamExt;
use kube::{ResourceExt, core::PartialObjectMeta, runtime::watcher};
use olm_api::{csv::ClusterServiceVersion, labels};
use olm_runtime::{admin::ReadinessGate, cache::Change};

use crate::decide::copied_csv::{
    COPY_HASH_SPEC_ANNOTATION, COPY_HASH_STATUS_ANNOTATION, CopyHashes,
};

/// One copied CSV, as the copy controller needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CopyRecord {
    /// The namespace the copy is in.
    pub(crate) namespace: String,
    /// Its name, which is its parent's.
    pub(crate) name: String,
    /// Its parent's namespace (the `olm.copiedFrom` label).
    pub(crate) parent_namespace: String,
    /// Its uid.
    pub(crate) uid: Option<String>,
    /// The hashes in its annotations, when it has both.
    pub(crate) hashes: Option<CopyHashes>,
}

/// A copy's place: namespace and name.
type Key = (Box<str>, Box<str>);

/// What the index keeps of a copy besides its [`Key`].
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    parent_namespace: Box<str>,
    uid: Option<Box<str>>,
    hashes: Option<(Box<str>, Box<str>)>,
}

/// The key and entry of a copy's metadata; `None` when it has no name, no
/// namespace or no `olm.copiedFrom` label (the watch selects on the label,
/// so only a malformed object lacks it).
fn entry_of(copy: &PartialObjectMeta<ClusterServiceVersion>) -> Option<(Key, Entry)> {
    let name = copy.metadata.name.as_deref()?;
    let namespace = copy.metadata.namespace.as_deref()?;
    let parent_namespace = copy.labels().get(labels::COPIED_FROM)?;
    let annotations = copy.annotations();
    let hashes = match (
        annotations.get(COPY_HASH_SPEC_ANNOTATION),
        annotations.get(COPY_HASH_STATUS_ANNOTATION),
    ) {
        (Some(spec), Some(status)) => Some((spec.as_str().into(), status.as_str().into())),
        _ => None,
    };
    Some((
        (namespace.into(), name.into()),
        Entry {
            parent_namespace: parent_namespace.as_str().into(),
            uid: copy.metadata.uid.as_deref().map(Into::into),
            hashes,
        },
    ))
}

fn record(key: &Key, entry: &Entry) -> CopyRecord {
    CopyRecord {
        namespace: key.0.to_string(),
        name: key.1.to_string(),
        parent_namespace: entry.parent_namespace.to_string(),
        uid: entry.uid.as_deref().map(str::to_owned),
        hashes: entry.hashes.as_ref().map(|(spec, status)| CopyHashes {
            spec: spec.to_string(),
            status: status.to_string(),
        }),
    }
}

/// The index's maps: the live one, and the one a relist is filling.
#[derive(Debug, Default)]
struct State {
    live: HashMap<Key, Entry>,
    relisting: Option<HashMap<Key, Entry>>,
}

impl State {
    /// Applies one watch event; says whether a relist just completed.
    fn apply(&mut self, event: &watcher::Event<PartialObjectMeta<ClusterServiceVersion>>) -> bool {
        match event {
            watcher::Event::Apply(copy) => {
                if let Some((key, entry)) = entry_of(copy) {
                    self.live.insert(key, entry);
                }
            }
            watcher::Event::Delete(copy) => {
                if let (Some(namespace), Some(name)) = (
                    copy.metadata.namespace.as_deref(),
                    copy.metadata.name.as_deref(),
                ) {
                    self.live.remove(&(Box::from(namespace), Box::from(name)));
                }
            }
            watcher::Event::Init => self.relisting = Some(HashMap::new()),
            watcher::Event::InitApply(copy) => {
                if let Some((key, entry)) = entry_of(copy) {
                    self.relisting
                        .get_or_insert_with(HashMap::new)
                        .insert(key, entry);
                }
            }
            watcher::Event::InitDone => {
                let mut fresh = self.relisting.take().unwrap_or_default();
                fresh.shrink_to_fit();
                self.live = fresh;
                return true;
            }
        }
        false
    }
}

/// The copied CSVs, shared by every reconcile.
#[derive(Clone, Debug, Default)]
pub(crate) struct CopyIndex {
    state: Arc<RwLock<State>>,
}

impl CopyIndex {
    fn read<T>(&self, f: impl FnOnce(&HashMap<Key, Entry>) -> T) -> T {
        // A poisoned lock means a panic while applying an event, which
        // leaves the map whole (each event is one insert, remove or swap).
        let state = self
            .state
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&state.live)
    }

    /// The copies for which `keep(namespace, name, parent_namespace)`
    /// holds; only those are copied out of the index.
    pub(crate) fn filter(&self, keep: impl Fn(&str, &str, &str) -> bool) -> Vec<CopyRecord> {
        self.read(|live| {
            live.iter()
                .filter(|(key, entry)| keep(&key.0, &key.1, &entry.parent_namespace))
                .map(|(key, entry)| record(key, entry))
                .collect()
        })
    }

    /// The copies of the CSV `name` in `parent_namespace`.
    pub(crate) fn of_parent(&self, parent_namespace: &str, name: &str) -> Vec<CopyRecord> {
        self.filter(|_, copy_name, parent| copy_name == name && parent == parent_namespace)
    }

    /// Applies a watch event (what [`index`]'s task does with each).
    fn apply(&self, event: &watcher::Event<PartialObjectMeta<ClusterServiceVersion>>) -> bool {
        self.state
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .apply(event)
    }
}

/// Builds the index over a watch of copies, and the task that fills it:
/// the first complete list sets `gate`, and every later change is handed
/// to `on_change` (as [`olm_runtime::cache::reflect_stream`] does).
pub(crate) fn index<S, F>(
    stream: S,
    gate: ReadinessGate,
    on_change: F,
) -> (CopyIndex, futures::future::BoxFuture<'static, ()>)
where
    S: futures::Stream<
            Item = Result<watcher::Event<PartialObjectMeta<ClusterServiceVersion>>, watcher::Error>,
        > + Send
        + 'static,
    F: Fn(&PartialObjectMeta<ClusterServiceVersion>, Change) + Send + Sync + 'static,
{
    let copies = CopyIndex::default();
    let filled = copies.clone();
    let task = async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(event) => {
                    if filled.apply(&event) {
                        tracing::debug!(kind = "CopiedClusterServiceVersion", "cache warm");
                        gate.set();
                    }
                    match &event {
                        watcher::Event::Apply(copy) => on_change(copy, Change::Applied),
                        watcher::Event::Delete(copy) => on_change(copy, Change::Deleted),
                        _ => {}
                    }
                }
                Err(error) => tracing::warn!(
                    kind = "CopiedClusterServiceVersion",
                    error = &error as &dyn std::error::Error,
                    "watch failed; retrying with backoff"
                ),
            }
        }
    };
    (copies, Box::pin(task))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;

    fn copy(
        namespace: &str,
        name: &str,
        parent: Option<&str>,
        hashes: Option<(&str, &str)>,
    ) -> PartialObjectMeta<ClusterServiceVersion> {
        let mut annotations = std::collections::BTreeMap::from([(
            "description".to_owned(),
            "a long text the index must not keep".to_owned(),
        )]);
        if let Some((spec, status)) = hashes {
            annotations.insert(COPY_HASH_SPEC_ANNOTATION.to_owned(), spec.to_owned());
            annotations.insert(COPY_HASH_STATUS_ANNOTATION.to_owned(), status.to_owned());
        }
        let mut labels = std::collections::BTreeMap::new();
        if let Some(parent) = parent {
            labels.insert(labels::COPIED_FROM.to_owned(), parent.to_owned());
        }
        PartialObjectMeta {
            types: None,
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(namespace.to_owned()),
                uid: Some(format!("uid-{namespace}-{name}")),
                labels: Some(labels),
                annotations: Some(annotations),
                ..ObjectMeta::default()
            },
            _phantom: std::marker::PhantomData,
        }
    }

    /// Applies a watch event of [`copy`]`(namespace, name, parent, hashes)`.
    fn apply_copy(
        index: &CopyIndex,
        namespace: &str,
        name: &str,
        parent: Option<&str>,
        hashes: Option<(&str, &str)>,
    ) {
        index.apply(&watcher::Event::Apply(copy(
            namespace, name, parent, hashes,
        )));
    }

    fn namespaces(records: &[CopyRecord]) -> Vec<&str> {
        let mut v: Vec<&str> = records.iter().map(|r| r.namespace.as_str()).collect();
        v.sort_unstable();
        v
    }

    impl CopyIndex {
        fn all(&self) -> Vec<CopyRecord> {
            self.filter(|_, _, _| true)
        }
    }

    #[test]
    fn a_record_keeps_place_parent_uid_and_hashes() {
        let index = CopyIndex::default();
        apply_copy(&index, "team-a", "op.v1", Some("ops"), Some(("s1", "t1")));
        assert_eq!(
            index.all(),
            vec![CopyRecord {
                namespace: "team-a".into(),
                name: "op.v1".into(),
                parent_namespace: "ops".into(),
                uid: Some("uid-team-a-op.v1".into()),
                hashes: Some(CopyHashes {
                    spec: "s1".into(),
                    status: "t1".into()
                }),
            }]
        );
    }

    #[test]
    fn a_copy_with_one_hash_has_none_and_one_without_parent_is_not_kept() {
        let index = CopyIndex::default();
        let mut half = copy("team-a", "op.v1", Some("ops"), None);
        half.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(COPY_HASH_SPEC_ANNOTATION.to_owned(), "s1".to_owned());
        index.apply(&watcher::Event::Apply(half));
        apply_copy(&index, "team-b", "op.v1", None, Some(("s", "t")));
        let all = index.all();
        assert_eq!(all.len(), 1, "{all:?}");
        assert_eq!(all[0].hashes, None);
    }

    #[test]
    fn copies_are_found_by_parent_name_and_namespace() {
        let index = CopyIndex::default();
        for (ns, name, parent) in [
            ("a", "op.v1", "ops"),
            ("b", "op.v1", "ops"),
            ("c", "op.v1", "other"),
            ("d", "op.v2", "ops"),
        ] {
            apply_copy(&index, ns, name, Some(parent), None);
        }
        assert_eq!(namespaces(&index.of_parent("ops", "op.v1")), ["a", "b"]);
        assert_eq!(namespaces(&index.of_parent("other", "op.v1")), ["c"]);
        assert_eq!(namespaces(&index.of_parent("ops", "op.v2")), ["d"]);
        assert!(index.of_parent("ops", "op.v3").is_empty());
    }

    #[test]
    fn an_update_replaces_and_a_delete_removes() {
        let index = CopyIndex::default();
        apply_copy(&index, "a", "op.v1", Some("ops"), Some(("s1", "t1")));
        apply_copy(&index, "a", "op.v1", Some("ops"), Some(("s2", "t2")));
        let all = index.all();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].hashes.as_ref().map(|h| h.spec.as_str()), Some("s2"));
        index.apply(&watcher::Event::Delete(copy(
            "a",
            "op.v1",
            Some("ops"),
            None,
        )));
        assert!(index.all().is_empty());
    }

    #[test]
    fn a_relist_replaces_the_index_only_when_complete() {
        let index = CopyIndex::default();
        apply_copy(&index, "gone", "op.v1", Some("ops"), None);
        apply_copy(&index, "kept", "op.v1", Some("ops"), None);
        assert!(!index.apply(&watcher::Event::Init));
        assert!(!index.apply(&watcher::Event::InitApply(copy(
            "kept",
            "op.v1",
            Some("ops"),
            None
        ))));
        assert!(!index.apply(&watcher::Event::InitApply(copy(
            "new",
            "op.v1",
            Some("ops"),
            None
        ))));
        // Mid-relist, readers still see the last complete list.
        assert_eq!(namespaces(&index.all()), ["gone", "kept"]);
        assert!(index.apply(&watcher::Event::InitDone));
        assert_eq!(namespaces(&index.all()), ["kept", "new"]);
        // A relist of nothing empties the index.
        index.apply(&watcher::Event::Init);
        assert!(index.apply(&watcher::Event::InitDone));
        assert!(index.all().is_empty());
    }

    #[tokio::test]
    async fn the_task_sets_the_gate_on_the_first_list_and_reports_changes() {
        let readiness = olm_runtime::admin::Readiness::default();
        let gate = readiness.gate("cache:CopiedClusterServiceVersion");
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = seen.clone();
        let events = vec![
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(copy(
                "a",
                "op.v1",
                Some("ops"),
                None,
            ))),
            Ok(watcher::Event::InitDone),
            Ok(watcher::Event::Apply(copy("b", "op.v1", Some("ops"), None))),
            Ok(watcher::Event::Delete(copy(
                "a",
                "op.v1",
                Some("ops"),
                None,
            ))),
        ];
        let (index, task) = index(futures::stream::iter(events), gate, move |c, change| {
            sink.lock()
                .unwrap()
                .push((c.metadata.namespace.clone().unwrap_or_default(), change));
        });
        assert!(!readiness.is_ready());
        task.await;
        assert!(readiness.is_ready());
        assert_eq!(namespaces(&index.all()), ["b"]);
        assert_eq!(
            *seen.lock().unwrap(),
            vec![
                ("b".to_owned(), Change::Applied),
                ("a".to_owned(), Change::Deleted)
            ]
        );
    }
}
