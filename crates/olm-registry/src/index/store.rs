//! Reading documents back by byte range: from the catalog's own files (JSON
//! documents, read in place) or from the spill files (YAML documents converted
//! to JSON at indexing).
//!
//! Source files are opened per read rather than kept open, so a catalog of
//! thousands of files needs no file descriptors while idle. Each read checks
//! that the file still has the size and modification time it had when
//! indexed: a catalog changed under a running server is reported, never
//! served as garbage.

use std::{
    fs::File,
    os::unix::fs::FileExt,
    path::{Path, PathBuf},
};

use super::scan::{BlobRef, SourceFile};
use crate::error::ReadError;

/// The files that hold the catalog's documents.
#[derive(Debug)]
pub(crate) struct BlobStore {
    root: PathBuf,
    sources: Vec<SourceFile>,
    /// Spill files, by store id minus the number of sources.
    spills: Vec<Option<File>>,
}

impl BlobStore {
    pub(crate) fn new(root: PathBuf, sources: Vec<SourceFile>, spills: Vec<Option<File>>) -> Self {
        Self {
            root,
            sources,
            spills,
        }
    }

    /// The catalog directory.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// The bytes of one document.
    pub(crate) fn read(&self, blob: BlobRef) -> Result<Vec<u8>, ReadError> {
        let mut buf = vec![0; blob.len as usize];
        let store = blob.store as usize;
        if let Some(source) = self.sources.get(store) {
            let path = self.root.join(&source.rel);
            let io = |source| ReadError::Io {
                path: path.clone(),
                source,
            };
            let file = File::open(&path).map_err(io)?;
            let meta = file.metadata().map_err(io)?;
            if meta.len() != source.len || meta.modified().ok() != source.modified {
                return Err(ReadError::Changed { path });
            }
            file.read_exact_at(&mut buf, blob.offset).map_err(io)?;
        } else {
            let spill = self
                .spills
                .get(store - self.sources.len())
                .and_then(Option::as_ref)
                .ok_or_else(|| ReadError::Changed {
                    path: PathBuf::from("<spill>"),
                })?;
            spill
                .read_exact_at(&mut buf, blob.offset)
                .map_err(|source| ReadError::Io {
                    path: PathBuf::from("<spill>"),
                    source,
                })?;
        }
        Ok(buf)
    }

    /// The catalog-relative path of a document's file, for messages.
    pub(crate) fn describe(&self, blob: BlobRef) -> PathBuf {
        match self.sources.get(blob.store as usize) {
            Some(source) => source.rel.clone(),
            None => PathBuf::from("<converted yaml>"),
        }
    }
}
