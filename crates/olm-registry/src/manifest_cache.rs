//! The manifests of recently served bundles, decoded.
//!
//! A bundle that carries its manifests as `olm.bundle.object` properties is
//! answered with them as JSON (`object`, `csvJson`): base64 decoded, read
//! as YAML or JSON and written again as Go writes it. That costs
//! milliseconds for bundles with large CRDs, on every `GetBundle`, and
//! catalog-operator asks for the same bundles over and over. Upstream
//! decodes every bundle once when it builds its cache (seconds, and the
//! memory of all of them); here the most recently decoded ones are kept,
//! within [`MANIFEST_CACHE_BYTES`], and the oldest go first.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex},
};

/// How many bytes of decoded manifests the cache keeps: 16 MiB. A bundle
/// whose manifests are larger is decoded on every call instead.
pub const MANIFEST_CACHE_BYTES: usize = 16 * 1024 * 1024;

/// One bundle's manifests, as answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Manifests {
    pub(crate) objects: Vec<String>,
    pub(crate) csv_json: String,
}

impl Manifests {
    fn bytes(&self) -> usize {
        self.csv_json.len() + self.objects.iter().map(String::len).sum::<usize>()
    }
}

/// Decoded manifests by bundle, oldest evicted first.
#[derive(Debug)]
pub(crate) struct ManifestCache {
    budget: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    used: usize,
    by_bundle: HashMap<u32, Arc<Manifests>>,
    order: VecDeque<u32>,
}

impl ManifestCache {
    pub(crate) fn new(budget: usize) -> Self {
        Self {
            budget,
            inner: Mutex::default(),
        }
    }

    pub(crate) fn get(&self, bundle: u32) -> Option<Arc<Manifests>> {
        let inner = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        inner.by_bundle.get(&bundle).cloned()
    }

    /// Keeps `manifests` unless they alone exceed the budget; evicts the
    /// oldest entries until they fit.
    pub(crate) fn insert(&self, bundle: u32, manifests: Manifests) {
        let size = manifests.bytes();
        if size > self.budget {
            return;
        }
        let mut inner = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if inner.by_bundle.contains_key(&bundle) {
            return;
        }
        while inner.used + size > self.budget {
            let Some(oldest) = inner.order.pop_front() else {
                break;
            };
            if let Some(gone) = inner.by_bundle.remove(&oldest) {
                inner.used -= gone.bytes();
            }
        }
        inner.used += size;
        inner.order.push_back(bundle);
        inner.by_bundle.insert(bundle, Arc::new(manifests));
    }

    #[cfg(test)]
    fn used(&self) -> usize {
        self.inner.lock().map(|i| i.used).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifests(bytes: usize) -> Manifests {
        Manifests {
            objects: vec!["x".repeat(bytes)],
            csv_json: String::new(),
        }
    }

    #[test]
    fn the_oldest_go_first_and_the_budget_holds() {
        let cache = ManifestCache::new(100);
        cache.insert(1, manifests(40));
        cache.insert(2, manifests(40));
        assert_eq!(cache.used(), 80);
        cache.insert(3, manifests(40));
        assert!(cache.get(1).is_none(), "the oldest was evicted");
        assert!(cache.get(2).is_some() && cache.get(3).is_some());
        assert_eq!(cache.used(), 80);
        // Larger than the whole budget: never kept, nothing evicted for it.
        cache.insert(4, manifests(101));
        assert!(cache.get(4).is_none());
        assert_eq!(cache.used(), 80);
        // Kept once.
        cache.insert(2, manifests(10));
        assert_eq!(cache.get(2).unwrap().objects[0].len(), 40);
    }

    #[test]
    fn the_default_budget_is_named() {
        assert_eq!(MANIFEST_CACHE_BYTES, 16 << 20);
    }
}
