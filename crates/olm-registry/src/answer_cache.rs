//! The answers of recently served single bundles.
//!
//! `GetBundle`, `GetBundleForChannel` and their kin answer with a whole
//! bundle: its properties re-encoded, and its manifests (`object`,
//! `csvJson`) either decoded from `olm.bundle.object` (base64, YAML or
//! JSON, written again as Go writes it: milliseconds for bundles with large
//! CRDs) or synthesized from `olm.csv.metadata` with the package's icon and
//! description (a 64 KB CSV on the real catalogs). catalog-operator and
//! packageserver ask for the same channel heads over and over. Upstream
//! converts every bundle once when it builds its cache (seconds, and the
//! memory of all of them); here the most recently built answers are kept,
//! within [`ANSWER_CACHE_BYTES`], and the oldest go first.
//!
//! A kept answer is what the catalog said when it was indexed and read: a
//! file changed on disk afterwards is reported (`ReadError::Changed`) only
//! for answers not kept yet, as upstream's cache keeps answering too.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex},
};

use prost::Message as _;

use crate::api;

/// How many bytes of answers the cache keeps (as encoded on the wire):
/// 16 MiB. An answer that is larger is built on every call instead.
pub const ANSWER_CACHE_BYTES: usize = 16 * 1024 * 1024;

/// One bundle's single answer, without what depends on the channel entry
/// it was asked through.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CachedAnswer {
    /// The answer with `channelName` and `skipRange` empty, and `object`
    /// empty when it was `csvJson` alone (a synthesized CSV: kept once).
    bundle: api::Bundle,
    /// Whether `object` is `[csvJson]`.
    object_is_csv: bool,
}

impl CachedAnswer {
    /// Keeps `bundle`, a single answer (no `replaces`, no `skips`).
    pub(crate) fn new(mut bundle: api::Bundle) -> Self {
        bundle.channel_name.clear();
        bundle.skip_range.clear();
        let object_is_csv = bundle.object.len() == 1 && bundle.object[0] == bundle.csv_json;
        if object_is_csv {
            bundle.object.clear();
        }
        Self {
            bundle,
            object_is_csv,
        }
    }

    /// The answer through a channel entry.
    pub(crate) fn answer(&self, channel_name: &str, skip_range: &str) -> api::Bundle {
        let mut bundle = self.bundle.clone();
        channel_name.clone_into(&mut bundle.channel_name);
        skip_range.clone_into(&mut bundle.skip_range);
        if self.object_is_csv {
            bundle.object.push(bundle.csv_json.clone());
        }
        bundle
    }

    /// The manifests: `object` and `csvJson`.
    pub(crate) fn manifests(&self) -> (Vec<String>, String) {
        let mut objects = self.bundle.object.clone();
        if self.object_is_csv {
            objects.push(self.bundle.csv_json.clone());
        }
        (objects, self.bundle.csv_json.clone())
    }

    fn bytes(&self) -> usize {
        self.bundle.encoded_len()
    }
}

/// Answers by bundle, oldest evicted first.
#[derive(Debug)]
pub(crate) struct AnswerCache {
    budget: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    used: usize,
    by_bundle: HashMap<u32, Arc<CachedAnswer>>,
    order: VecDeque<u32>,
}

impl AnswerCache {
    pub(crate) fn new(budget: usize) -> Self {
        Self {
            budget,
            inner: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn get(&self, bundle: u32) -> Option<Arc<CachedAnswer>> {
        self.lock().by_bundle.get(&bundle).cloned()
    }

    /// Keeps `answer` unless it alone exceeds the budget; evicts the oldest
    /// entries until it fits.
    pub(crate) fn insert(&self, bundle: u32, answer: CachedAnswer) {
        let size = answer.bytes();
        if size > self.budget {
            return;
        }
        let mut inner = self.lock();
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
        inner.by_bundle.insert(bundle, Arc::new(answer));
    }

    #[cfg(test)]
    fn used(&self) -> usize {
        self.lock().used
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(csv: &str, objects: &[&str]) -> api::Bundle {
        api::Bundle {
            csv_name: "a.v1".to_owned(),
            channel_name: "stable".to_owned(),
            skip_range: "<1.0.0".to_owned(),
            csv_json: csv.to_owned(),
            object: objects.iter().map(|o| (*o).to_owned()).collect(),
            ..api::Bundle::default()
        }
    }

    #[test]
    fn an_answer_comes_back_through_any_channel_entry() {
        let first = answer("{csv}", &["{csv}"]);
        let cached = CachedAnswer::new(first.clone());
        assert!(cached.object_is_csv, "a lone CSV object is kept once");
        assert_eq!(cached.answer("stable", "<1.0.0"), first);
        let other = cached.answer("fast", "");
        assert_eq!(
            (other.channel_name.as_str(), other.skip_range.as_str()),
            ("fast", "")
        );
        assert_eq!(other.object, ["{csv}"]);
        assert_eq!(
            cached.manifests(),
            (vec!["{csv}".to_owned()], "{csv}".to_owned())
        );

        // Decoded manifests (a CRD and the CSV) are kept as they are.
        let decoded = answer("{csv}", &["{crd}", "{csv}"]);
        let cached = CachedAnswer::new(decoded.clone());
        assert!(!cached.object_is_csv);
        assert_eq!(cached.answer("stable", "<1.0.0"), decoded);
        // No manifests at all.
        let bare = answer("", &[]);
        assert_eq!(
            CachedAnswer::new(bare.clone()).answer("stable", "<1.0.0"),
            bare
        );
    }

    #[test]
    fn the_oldest_go_first_and_the_budget_holds() {
        let sized = |n: usize| CachedAnswer::new(answer(&"x".repeat(n), &[]));
        let size = sized(40).bytes();
        let cache = AnswerCache::new(2 * size + size / 2);
        cache.insert(1, sized(40));
        cache.insert(2, sized(40));
        assert_eq!(cache.used(), 2 * size);
        cache.insert(3, sized(40));
        assert!(cache.get(1).is_none(), "the oldest was evicted");
        assert!(cache.get(2).is_some() && cache.get(3).is_some());
        assert_eq!(cache.used(), 2 * size);
        // Larger than the whole budget: never kept, nothing evicted for it.
        cache.insert(4, sized(4 * size));
        assert!(cache.get(4).is_none());
        assert_eq!(cache.used(), 2 * size);
        // Kept once.
        cache.insert(2, sized(10));
        assert_eq!(cache.get(2).unwrap().bundle.csv_json.len(), 40);
    }

    #[test]
    fn the_default_budget_is_named() {
        assert_eq!(ANSWER_CACHE_BYTES, 16 << 20);
    }
}
