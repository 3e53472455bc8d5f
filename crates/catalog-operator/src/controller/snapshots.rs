//! Resolution snapshots of catalogs: every channel entry of a catalog read
//! once over the registry API (`ListPackages`, `GetPackage`, `ListBundles`)
//! and indexed by olm-resolver, kept until the catalog's connection is made
//! again (new content) or the snapshot is older than [`SNAPSHOT_TTL`], as
//! upstream's resolver cache does. When a catalog's registry pod is replaced
//! (a polled image changed), no snapshot is kept for a short settle window,
//! in which the old pod may still answer.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use futures::TryStreamExt;
use olm_registry::{ClientError, RegistryClient};
use olm_resolver::{BundleInput, CatalogKey, CatalogSnapshot};

/// How long a snapshot is used before the catalog is read again.
pub(crate) const SNAPSHOT_TTL: Duration = Duration::from_secs(30 * 60);

struct Cached {
    taken: Instant,
    priority: i32,
    snapshot: Arc<CatalogSnapshot>,
}

/// Snapshots by catalog (namespace, name).
#[derive(Clone, Default)]
pub(crate) struct Snapshots {
    cached: Arc<Mutex<HashMap<(String, String), Cached>>>,
    /// Catalogs whose registry was just replaced, until when: their
    /// snapshots are read but not kept, since the old registry may still
    /// answer.
    settling: Arc<Mutex<HashMap<(String, String), Instant>>>,
}

impl Snapshots {
    /// The catalog's registry was replaced: drop its snapshot and keep none
    /// for `window`.
    pub(crate) fn settle(&self, namespace: &str, name: &str, window: Duration) {
        self.invalidate(namespace, name);
        self.settling
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                (namespace.to_owned(), name.to_owned()),
                Instant::now() + window,
            );
    }

    /// Whether the catalog is within a settle window.
    pub(crate) fn settling(&self, namespace: &str, name: &str) -> bool {
        self.settling
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&(namespace.to_owned(), name.to_owned()))
            .is_some_and(|until| Instant::now() < *until)
    }

    /// True once, when the catalog's settle window has passed: its snapshot
    /// is dropped again, so the next one is read from the new registry.
    pub(crate) fn settled(&self, namespace: &str, name: &str) -> bool {
        let key = (namespace.to_owned(), name.to_owned());
        let mut settling = self.settling.lock().unwrap_or_else(PoisonError::into_inner);
        match settling.get(&key) {
            Some(until) if Instant::now() >= *until => {
                settling.remove(&key);
                drop(settling);
                self.invalidate(namespace, name);
                true
            }
            _ => false,
        }
    }

    /// Drops the snapshot of a catalog (its content may have changed).
    pub(crate) fn invalidate(&self, namespace: &str, name: &str) {
        self.cached
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&(namespace.to_owned(), name.to_owned()));
    }

    /// An empty snapshot standing for an unhealthy catalog: it blocks
    /// resolution in its scope, as upstream does.
    pub(crate) fn unhealthy(namespace: &str, name: &str, priority: i32) -> Arc<CatalogSnapshot> {
        Arc::new(CatalogSnapshot::build(
            CatalogKey::new(name, namespace),
            priority,
            false,
            &[],
            Vec::new(),
        ))
    }

    /// The snapshot of a healthy catalog, read through `client` unless a
    /// fresh one is cached; `on_read` is called when the catalog is read.
    pub(crate) async fn get(
        &self,
        namespace: &str,
        name: &str,
        priority: i32,
        client: &RegistryClient,
        on_read: impl FnOnce(),
    ) -> Result<Arc<CatalogSnapshot>, ClientError> {
        let key = (namespace.to_owned(), name.to_owned());
        if let Some(cached) = self
            .cached
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
            .filter(|c| c.taken.elapsed() < SNAPSHOT_TTL && c.priority == priority)
        {
            return Ok(cached.snapshot.clone());
        }
        on_read();
        let span = super::catalog_call_span("ListBundles", namespace, name);
        let snapshot = Arc::new(
            tracing::Instrument::instrument(read(namespace, name, priority, client), span).await?,
        );
        if self.settling(namespace, name) {
            return Ok(snapshot);
        }
        self.cached
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                key,
                Cached {
                    taken: Instant::now(),
                    priority,
                    snapshot: snapshot.clone(),
                },
            );
        Ok(snapshot)
    }
}

async fn read(
    namespace: &str,
    name: &str,
    priority: i32,
    client: &RegistryClient,
) -> Result<CatalogSnapshot, ClientError> {
    let mut packages = Vec::new();
    for package in client.list_packages().await? {
        let found = client.get_package(&package).await?;
        packages.push((found.name, found.default_channel_name));
    }
    // Upstream's fallbacks for bundles without properties apply here as in
    // `kubectl olm`: one function for both.
    let bundles: Vec<BundleInput> = client
        .list_bundles()
        .await?
        .map_ok(olm_registry::resolver_input::bundle_input)
        .try_collect()
        .await?;
    Ok(CatalogSnapshot::build(
        CatalogKey::new(name, namespace),
        priority,
        true,
        &packages,
        bundles,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replaced_registry_settles_once_its_window_has_passed() {
        let snapshots = Snapshots::default();
        assert!(!snapshots.settling("ns", "c"));
        assert!(!snapshots.settled("ns", "c"), "nothing was replaced");
        snapshots.settle("ns", "c", Duration::from_millis(50));
        assert!(snapshots.settling("ns", "c"));
        assert!(!snapshots.settled("ns", "c"), "still within the window");
        assert!(!snapshots.settling("ns", "other"));
        std::thread::sleep(Duration::from_millis(60));
        assert!(!snapshots.settling("ns", "c"));
        assert!(snapshots.settled("ns", "c"), "settled after the window");
        assert!(!snapshots.settled("ns", "c"), "and only once");
    }
}
