//! Named limits on what the registry reads and answers.
//!
//! Each limit has a clear error when it is hit and a test with hostile input
//! (architecture rule 7). The defaults are far above any real catalog (the
//! largest public catalogs have a few thousand bundles) and far below what
//! would exhaust a small pod.

/// The largest request message the server decodes. Every request of the
/// registry API carries at most a few names; a bigger message is refused with
/// `RESOURCE_EXHAUSTED` before it is read into memory.
pub const MAX_REQUEST_MESSAGE_BYTES: usize = 64 * 1024;

/// The largest response message the server encodes and the client decodes.
/// A bundle with its manifests is about twice its catalog document, so this is
/// twice [`IndexLimits::max_document_bytes`]'s default.
pub const MAX_RESPONSE_MESSAGE_BYTES: usize = 2 * DEFAULT_MAX_DOCUMENT_BYTES;

/// The longest name (package, channel, CSV, group, version, kind, schema) a
/// request may carry. Kubernetes names are at most 253 bytes; anything longer
/// than this is refused with `INVALID_ARGUMENT` and never echoed back whole.
pub const MAX_NAME_BYTES: usize = 1024;

/// Default for [`IndexLimits::max_document_bytes`]: 32 MiB.
pub const DEFAULT_MAX_DOCUMENT_BYTES: usize = 32 * 1024 * 1024;

/// How much the index accepts from a catalog directory. A catalog that exceeds
/// any of these is refused with [`crate::IndexError::LimitExceeded`], naming
/// the limit, instead of being loaded partially or exhausting memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexLimits {
    /// Files in the catalog directory tree (every file is read as FBC).
    pub max_files: usize,
    /// Bytes of all files together.
    pub max_total_bytes: u64,
    /// Bytes of one JSON value or YAML document. Documents are held in memory
    /// one at a time while indexing, so this bounds the indexer's memory.
    pub max_document_bytes: usize,
    /// Documents of any schema.
    pub max_documents: usize,
    /// `olm.package` documents.
    pub max_packages: usize,
    /// `olm.bundle` documents.
    pub max_bundles: usize,
    /// Channel entries over all channels.
    pub max_channel_entries: usize,
    /// Problems reported in detail when a catalog is invalid; the rest are counted.
    pub max_reported_problems: usize,
}

impl Default for IndexLimits {
    fn default() -> Self {
        Self {
            max_files: 100_000,
            max_total_bytes: 16 * 1024 * 1024 * 1024,
            max_document_bytes: DEFAULT_MAX_DOCUMENT_BYTES,
            max_documents: 4_000_000,
            max_packages: 100_000,
            max_bundles: 1_000_000,
            max_channel_entries: 2_000_000,
            max_reported_problems: 100,
        }
    }
}

/// Default for [`StreamLimits::max_messages`]: far above the largest public
/// catalogs (tens of thousands of bundle-channel entries).
pub const DEFAULT_MAX_STREAM_MESSAGES: usize = 250_000;

/// Default for [`StreamLimits::max_bytes`]: 256 MiB of encoded messages.
pub const DEFAULT_MAX_STREAM_BYTES: u64 = 256 * 1024 * 1024;

/// Default for [`StreamLimits::max_duration`]: two minutes, against a few
/// seconds for the largest real catalogs served locally.
pub const DEFAULT_MAX_STREAM_DURATION: std::time::Duration = std::time::Duration::from_secs(120);

/// How much the client reads from one streaming answer (`ListBundles`,
/// `ListPackages`, the `GetChannelEntries...` calls). catalog-operator and
/// packageserver are shared by every tenant and talk to any address a
/// CatalogSource names, so a hostile server must not be able to make them
/// read without end: a stream past any of these fails with
/// [`crate::ClientError::LimitExceeded`], naming the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamLimits {
    /// Messages in one answer.
    pub max_messages: usize,
    /// Encoded bytes of all messages of one answer together.
    pub max_bytes: u64,
    /// Time from the call to the end of its answer.
    pub max_duration: std::time::Duration,
}

impl Default for StreamLimits {
    fn default() -> Self {
        Self {
            max_messages: DEFAULT_MAX_STREAM_MESSAGES,
            max_bytes: DEFAULT_MAX_STREAM_BYTES,
            max_duration: DEFAULT_MAX_STREAM_DURATION,
        }
    }
}
