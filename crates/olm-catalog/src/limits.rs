//! Bounds on untrusted input (ARCHITECTURE rule 7): every limit is a named
//! constant, collected in [`Limits`] so that a caller with stricter needs (an
//! unpacker reading a bundle image) can tighten them.
//!
//! The defaults leave ample room for real data: the largest real catalog file
//! we know of is a few tens of MiB, the deepest real manifest (a CRD schema)
//! nests 37 levels, and a real bundle is at most a few MiB. They exist so that
//! hostile input fails with a clear error instead of exhausting memory or the
//! stack.

/// Largest file read from a catalog or bundle: 512 MiB.
pub const MAX_FILE_BYTES: u64 = 512 * 1024 * 1024;

/// Largest single YAML or JSON document: 128 MiB.
pub const MAX_DOCUMENT_BYTES: usize = 128 * 1024 * 1024;

/// Most documents in one file: 1,000,000.
pub const MAX_DOCUMENTS_PER_FILE: usize = 1_000_000;

/// Deepest nesting of mappings and sequences in a document we interpret:
/// 100 levels. serde_json and serde_yaml_ng stop at 128 on their own; this
/// limit is lower so that our error, with its location, is the one users see.
pub const MAX_NESTING_DEPTH: usize = 100;

/// Most files in a catalog directory tree: 200,000.
pub const MAX_CATALOG_FILES: usize = 200_000;

/// Most bytes in all the files of a catalog together: 8 GiB.
pub const MAX_CATALOG_BYTES: u64 = 8 * 1024 * 1024 * 1024;

/// Most files in one bundle (`manifests/` and `metadata/` together): 10,000.
pub const MAX_BUNDLE_FILES: usize = 10_000;

/// Most bytes in all the files of one bundle together: 256 MiB.
pub const MAX_BUNDLE_BYTES: u64 = 256 * 1024 * 1024;

/// Largest `olm.constraint` value, as upstream enforces it (`2 << 16` bytes,
/// "olm.constraint value is greater than max constraint size 131072 bytes").
pub const MAX_CONSTRAINT_BYTES: usize = 2 << 16;

/// Longest path (in bytes) accepted for an in-memory file: 4,096.
pub const MAX_PATH_BYTES: usize = 4096;

/// The limits applied while reading a catalog or a bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// See [`MAX_FILE_BYTES`].
    pub max_file_bytes: u64,
    /// See [`MAX_DOCUMENT_BYTES`].
    pub max_document_bytes: usize,
    /// See [`MAX_DOCUMENTS_PER_FILE`].
    pub max_documents_per_file: usize,
    /// See [`MAX_NESTING_DEPTH`].
    pub max_nesting_depth: usize,
    /// Most files read in total: [`MAX_CATALOG_FILES`] for catalogs,
    /// [`MAX_BUNDLE_FILES`] for bundles.
    pub max_files: usize,
    /// Most bytes read in total: [`MAX_CATALOG_BYTES`] for catalogs,
    /// [`MAX_BUNDLE_BYTES`] for bundles.
    pub max_total_bytes: u64,
}

impl Limits {
    /// The defaults for reading a file-based catalog.
    pub const fn catalog() -> Self {
        Self {
            max_file_bytes: MAX_FILE_BYTES,
            max_document_bytes: MAX_DOCUMENT_BYTES,
            max_documents_per_file: MAX_DOCUMENTS_PER_FILE,
            max_nesting_depth: MAX_NESTING_DEPTH,
            max_files: MAX_CATALOG_FILES,
            max_total_bytes: MAX_CATALOG_BYTES,
        }
    }

    /// The defaults for reading one bundle.
    pub const fn bundle() -> Self {
        Self {
            max_files: MAX_BUNDLE_FILES,
            max_total_bytes: MAX_BUNDLE_BYTES,
            ..Self::catalog()
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self::catalog()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_constraint_limit_is_128_kib() {
        assert_eq!(MAX_CONSTRAINT_BYTES, 131_072);
    }

    #[test]
    fn bundle_limits_are_tighter_than_catalog_limits() {
        let (catalog, bundle) = (Limits::catalog(), Limits::bundle());
        assert!(bundle.max_total_bytes < catalog.max_total_bytes);
        assert!(bundle.max_files < catalog.max_files);
        assert_eq!(bundle.max_nesting_depth, catalog.max_nesting_depth);
        assert_eq!(Limits::default(), catalog);
    }
}
