//! The serving index of one file-based catalog.
//!
//! Built once at start by streaming every document of the catalog directory
//! ([`scan`]), it keeps only what point queries and the update graph need:
//! names, versions, image references, channel entries (replaces, skips,
//! skipRange), provided and required GVKs, deprecation messages, and for each
//! bundle, package and custom document the byte range of its document. Full
//! documents (CSV metadata, manifests, properties) are read back from the
//! files on demand ([`store`]).
//!
//! # Memory model
//!
//! All strings live in one interned pool ([`strings::StrPool`]) and records
//! refer to them by 4-byte ids; records live in flat vectors sorted for binary
//! search (packages by name; channels by package then name; entries by channel
//! then bundle name; bundles by package then name), so there is no hash map
//! and no per-record allocation once the index is built. A catalog of 20,000
//! bundles and 25,000 channel entries takes a few MiB, whatever the size of its
//! documents. The page cache, not the process, holds document bytes.

mod build;
pub(crate) mod scan;
pub(crate) mod store;
pub(crate) mod strings;

use std::{
    num::NonZeroUsize,
    path::{Path, PathBuf},
};

#[cfg(feature = "resolver-input")]
pub(crate) use self::build::read_threads;
pub(crate) use self::build::valid_meta_key_component as valid_meta_key;
use self::{
    scan::BlobRef,
    store::BlobStore,
    strings::{StrId, StrPool},
};
use crate::{error::IndexError, limits::IndexLimits};

/// How to build a [`CatalogIndex`].
#[derive(Debug, Clone, Default)]
pub struct IndexOptions {
    /// Limits the catalog must stay within.
    pub limits: IndexLimits,
    /// Where to put the spill file of converted YAML documents (an unnamed
    /// temporary file, removed when the index is dropped or the process
    /// exits). Defaults to the system temporary directory.
    pub spill_dir: Option<PathBuf>,
    /// Threads that read files in parallel. Defaults to the available
    /// parallelism, at most 8.
    pub threads: Option<NonZeroUsize>,
}

/// Counts and sizes of an index, for logs and metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexStats {
    /// Files read.
    pub files: usize,
    /// Bytes of all files.
    pub bytes: u64,
    /// Packages.
    pub packages: usize,
    /// Channels over all packages.
    pub channels: usize,
    /// Bundles.
    pub bundles: usize,
    /// Channel entries over all channels (what `ListBundles` streams).
    pub channel_entries: usize,
    /// Documents of custom schemas.
    pub custom_documents: usize,
    /// Bytes of YAML documents converted to JSON into the spill file.
    pub spilled_bytes: u64,
    /// Heap bytes held by the index itself (not the page cache).
    pub heap_bytes: usize,
}

/// A contiguous run of records in one of the index's vectors.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) start: u32,
    pub(crate) len: u32,
}

impl Span {
    pub(crate) fn range(self) -> std::ops::Range<usize> {
        self.start as usize..(self.start + self.len) as usize
    }
}

#[derive(Debug)]
pub(crate) struct PackageRec {
    pub(crate) name: StrId,
    pub(crate) default_channel: StrId,
    pub(crate) channels: Span,
    pub(crate) blob: BlobRef,
    pub(crate) deprecation: Option<StrId>,
}

#[derive(Debug)]
pub(crate) struct ChannelRec {
    pub(crate) name: StrId,
    pub(crate) package: u32,
    pub(crate) entries: Span,
    /// The head entry (an index into `entries` of the index).
    pub(crate) head: u32,
    pub(crate) deprecation: Option<StrId>,
}

#[derive(Debug)]
pub(crate) struct EntryRec {
    pub(crate) bundle: u32,
    pub(crate) channel: u32,
    pub(crate) replaces: StrId,
    pub(crate) skips: Span,
    pub(crate) skip_range: StrId,
}

#[derive(Debug)]
pub(crate) struct BundleRec {
    pub(crate) name: StrId,
    pub(crate) package: u32,
    pub(crate) version: StrId,
    pub(crate) image: StrId,
    /// Provided GVKs in `bundle_gvks`, in document order.
    pub(crate) provided: Span,
    /// Required GVKs in `bundle_gvks`, in document order.
    pub(crate) required: Span,
    /// This bundle's entries in `bundle_entries`.
    pub(crate) entries: Span,
    pub(crate) blob: BlobRef,
    pub(crate) deprecation: Option<StrId>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct GvkRec {
    pub(crate) group: StrId,
    pub(crate) version: StrId,
    pub(crate) kind: StrId,
}

#[derive(Debug)]
pub(crate) struct CustomRec {
    pub(crate) schema: StrId,
    pub(crate) package: StrId,
    pub(crate) blob: BlobRef,
}

/// The serving index of one file-based catalog; see the module docs.
#[derive(Debug)]
pub struct CatalogIndex {
    pub(crate) strings: StrPool,
    pub(crate) packages: Vec<PackageRec>,
    pub(crate) channels: Vec<ChannelRec>,
    pub(crate) entries: Vec<EntryRec>,
    pub(crate) bundles: Vec<BundleRec>,
    pub(crate) skips: Vec<StrId>,
    /// Distinct GVKs, sorted by their string ids.
    pub(crate) gvks: Vec<GvkRec>,
    /// Indexes into `gvks`, in runs per bundle.
    pub(crate) bundle_gvks: Vec<u32>,
    /// Entry ids, in runs per bundle.
    pub(crate) bundle_entries: Vec<u32>,
    /// `(gvk, bundle)` for every provided GVK, sorted.
    pub(crate) providers: Vec<(u32, u32)>,
    /// Entry ids in `ListBundles` order: channel name, package name, bundle name.
    pub(crate) list_order: Vec<u32>,
    /// Custom-schema documents, sorted by schema then package, in catalog order.
    pub(crate) customs: Vec<CustomRec>,
    pub(crate) store: BlobStore,
    pub(crate) stats: IndexStats,
    /// The single answers of recently served bundles.
    pub(crate) answers: crate::answer_cache::AnswerCache,
}

impl CatalogIndex {
    /// Indexes the file-based catalog in directory `root`.
    ///
    /// Every file under `root` (except those listed in `.indexignore` files)
    /// is read as a stream of JSON values or YAML documents. The catalog must
    /// be valid as `opm serve` requires: every problem found is returned in
    /// [`IndexError::Invalid`], located by file and line.
    pub fn build(root: impl AsRef<Path>, options: &IndexOptions) -> Result<Self, IndexError> {
        build::build(root.as_ref(), options)
    }

    /// Counts and sizes of this index.
    pub fn stats(&self) -> &IndexStats {
        &self.stats
    }

    /// The catalog directory this index reads documents from.
    pub fn root(&self) -> &Path {
        self.store.root()
    }

    /// Package names, sorted.
    pub fn package_names(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.packages.iter().map(|p| self.strings.get(p.name))
    }

    pub(crate) fn str(&self, id: StrId) -> &str {
        self.strings.get(id)
    }

    /// The package named `name`.
    pub(crate) fn package(&self, name: &str) -> Option<u32> {
        self.packages
            .binary_search_by(|p| self.str(p.name).cmp(name))
            .ok()
            .map(|i| i as u32)
    }

    /// The channel named `name` of package `package`.
    pub(crate) fn channel(&self, package: u32, name: &str) -> Option<u32> {
        let span = self.packages[package as usize].channels;
        self.channels[span.range()]
            .binary_search_by(|c| self.str(c.name).cmp(name))
            .ok()
            .map(|i| span.start + i as u32)
    }

    /// The entry of bundle `bundle` in channel `channel`.
    pub(crate) fn entry(&self, channel: u32, bundle: &str) -> Option<u32> {
        let span = self.channels[channel as usize].entries;
        self.entries[span.range()]
            .binary_search_by(|e| self.str(self.bundles[e.bundle as usize].name).cmp(bundle))
            .ok()
            .map(|i| span.start + i as u32)
    }

    /// The GVK with these strings, if any bundle provides or requires it.
    pub(crate) fn gvk(&self, group: &str, version: &str, kind: &str) -> Option<u32> {
        let wanted = GvkRec {
            group: self.strings.find(group)?,
            version: self.strings.find(version)?,
            kind: self.strings.find(kind)?,
        };
        self.gvks.binary_search(&wanted).ok().map(|i| i as u32)
    }

    /// Bundles that provide GVK `gvk`, in bundle order.
    pub(crate) fn providers_of(&self, gvk: u32) -> impl Iterator<Item = u32> + '_ {
        let start = self.providers.partition_point(|(g, _)| *g < gvk);
        self.providers[start..]
            .iter()
            .take_while(move |(g, _)| *g == gvk)
            .map(|(_, b)| *b)
    }

    /// Whether bundle `bundle` provides GVK `gvk`.
    pub(crate) fn provides(&self, bundle: u32, gvk: u32) -> bool {
        let span = self.bundles[bundle as usize].provided;
        self.bundle_gvks[span.range()].contains(&gvk)
    }

    /// The entry ids of bundle `bundle`.
    pub(crate) fn entries_of(&self, bundle: u32) -> &[u32] {
        &self.bundle_entries[self.bundles[bundle as usize].entries.range()]
    }

    /// The skips of entry `entry`.
    pub(crate) fn skips_of(&self, entry: &EntryRec) -> &[StrId] {
        &self.skips[entry.skips.range()]
    }
}
