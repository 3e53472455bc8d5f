//! Reading the files of a catalog or bundle, from a directory tree or from
//! memory (for example the entries of an image layer), safely.
//!
//! A directory is walked in lexical order like Go's `fs.WalkDir`. A symbolic
//! link is followed only when its target is a regular file inside the root;
//! a link that leaves the root, dangles or points at a directory is refused,
//! as are FIFOs, sockets and devices (reading a FIFO would block forever).
//! In-memory file names must be relative paths that stay inside the root:
//! absolute paths, `..` components, empty components, backslashes and NUL
//! bytes are refused, and a leading `./` is dropped.

use std::{
    fs,
    io::Read,
    path::{Path, PathBuf},
};

use crate::limits::{Limits, MAX_PATH_BYTES};

/// Why a file tree could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// An I/O operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The path concerned.
        path: String,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
    /// A symbolic link points outside the root (or cannot be resolved).
    #[error("{path}: symbolic link leaves the root directory (target {target})")]
    SymlinkEscapes {
        /// The link, relative to the root.
        path: String,
        /// Where it points.
        target: String,
    },
    /// A symbolic link points at a directory; such links are not followed.
    #[error("{path}: symbolic link to a directory is not followed")]
    SymlinkToDirectory {
        /// The link, relative to the root.
        path: String,
    },
    /// A FIFO, socket or device.
    #[error("{path}: not a regular file")]
    NotARegularFile {
        /// The path, relative to the root.
        path: String,
    },
    /// An in-memory file name is not a safe relative path.
    #[error("file name {path:?} is not allowed: {reason}")]
    UnsafePath {
        /// The name as given.
        path: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// Two in-memory files have the same name (after dropping `./`).
    #[error("file {path:?} is given twice")]
    DuplicatePath {
        /// The repeated name.
        path: String,
    },
    /// A file is larger than [`Limits::max_file_bytes`].
    #[error("{path}: file is {size} bytes, more than the limit of {limit} bytes")]
    FileTooLarge {
        /// The path, relative to the root.
        path: String,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// More files than [`Limits::max_files`].
    #[error("more than {limit} files")]
    TooManyFiles {
        /// The limit.
        limit: usize,
    },
    /// More bytes in total than [`Limits::max_total_bytes`].
    #[error("files add up to more than the limit of {limit} bytes")]
    TooManyBytes {
        /// The limit.
        limit: u64,
    },
}

impl FileError {
    fn io(path: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
}

/// Checks an in-memory file name and returns it normalised (`/`-separated,
/// without a leading `./`).
pub fn normalize_relative_path(path: &str) -> Result<String, FileError> {
    let refuse = |reason| FileError::UnsafePath {
        path: path.to_owned(),
        reason,
    };
    if path.len() > MAX_PATH_BYTES {
        return Err(refuse("longer than the limit of 4096 bytes"));
    }
    if path.contains('\0') {
        return Err(refuse("contains a NUL byte"));
    }
    if path.contains('\\') {
        return Err(refuse("contains a backslash"));
    }
    if path.starts_with('/') {
        return Err(refuse("is absolute"));
    }
    let mut rest = path;
    while let Some(stripped) = rest.strip_prefix("./") {
        rest = stripped;
    }
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.is_empty() {
        return Err(refuse("is empty"));
    }
    for component in rest.split('/') {
        match component {
            "" => return Err(refuse("has an empty component")),
            "." => return Err(refuse("has a '.' component")),
            ".." => return Err(refuse("leaves the root with '..'")),
            _ => {}
        }
    }
    Ok(rest.to_owned())
}

/// Keeps the running totals of files and bytes within the limits.
#[derive(Debug)]
pub(crate) struct Budget<'l> {
    limits: &'l Limits,
    files: usize,
    bytes: u64,
}

impl<'l> Budget<'l> {
    pub(crate) fn new(limits: &'l Limits) -> Self {
        Self {
            limits,
            files: 0,
            bytes: 0,
        }
    }

    /// Accounts for one more file of `size` bytes.
    pub(crate) fn charge(&mut self, path: &str, size: u64) -> Result<(), FileError> {
        if size > self.limits.max_file_bytes {
            return Err(FileError::FileTooLarge {
                path: path.to_owned(),
                size,
                limit: self.limits.max_file_bytes,
            });
        }
        self.files += 1;
        if self.files > self.limits.max_files {
            return Err(FileError::TooManyFiles {
                limit: self.limits.max_files,
            });
        }
        self.bytes = self.bytes.saturating_add(size);
        if self.bytes > self.limits.max_total_bytes {
            return Err(FileError::TooManyBytes {
                limit: self.limits.max_total_bytes,
            });
        }
        Ok(())
    }
}

/// A regular file found under a root directory.
#[derive(Debug, Clone)]
pub(crate) struct FoundFile {
    /// Relative to the root, `/`-separated.
    pub relative: String,
    /// The path to open.
    pub path: PathBuf,
    /// Its size when listed.
    pub size: u64,
}

/// Lists the regular files under `dir` (relative path `relative`, empty for
/// the root), recursively or not, in lexical order, refusing unsafe links.
pub(crate) fn list_files(
    canonical_root: &Path,
    dir: &Path,
    relative: &str,
    recursive: bool,
    out: &mut Vec<FoundFile>,
) -> Result<(), FileError> {
    let display = |name: &str| {
        if relative.is_empty() {
            name.to_owned()
        } else {
            format!("{relative}/{name}")
        }
    };
    let mut entries: Vec<(String, PathBuf)> = fs::read_dir(dir)
        .map_err(|e| FileError::io(display(""), e))?
        .map(|entry| {
            let entry = entry.map_err(|e| FileError::io(display(""), e))?;
            Ok((
                entry.file_name().to_string_lossy().into_owned(),
                entry.path(),
            ))
        })
        .collect::<Result<_, FileError>>()?;
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, path) in entries {
        let rel = display(&name);
        let meta = fs::symlink_metadata(&path).map_err(|e| FileError::io(rel.clone(), e))?;
        let file_type = meta.file_type();
        if file_type.is_dir() {
            if recursive {
                list_files(canonical_root, &path, &rel, recursive, out)?;
            }
            continue;
        }
        if file_type.is_symlink() {
            let target = fs::canonicalize(&path).map_err(|_| FileError::SymlinkEscapes {
                path: rel.clone(),
                target: fs::read_link(&path)
                    .map(|t| t.display().to_string())
                    .unwrap_or_default(),
            })?;
            if !target.starts_with(canonical_root) {
                return Err(FileError::SymlinkEscapes {
                    path: rel,
                    target: target.display().to_string(),
                });
            }
            let target_meta = fs::metadata(&target).map_err(|e| FileError::io(rel.clone(), e))?;
            if target_meta.is_dir() {
                if recursive {
                    return Err(FileError::SymlinkToDirectory { path: rel });
                }
                continue;
            }
            if !target_meta.is_file() {
                return Err(FileError::NotARegularFile { path: rel });
            }
            out.push(FoundFile {
                relative: rel,
                path: target,
                size: target_meta.len(),
            });
            continue;
        }
        if !file_type.is_file() {
            return Err(FileError::NotARegularFile { path: rel });
        }
        out.push(FoundFile {
            relative: rel,
            path,
            size: meta.len(),
        });
    }
    Ok(())
}

/// Canonicalises a root directory.
pub(crate) fn canonical_root(root: &Path) -> Result<PathBuf, FileError> {
    fs::canonicalize(root).map_err(|e| FileError::io(root.display().to_string(), e))
}

/// Reads a listed file, never more than the per-file limit even if the file
/// grew since it was listed, and charges it to the budget.
pub(crate) fn read_file(file: &FoundFile, budget: &mut Budget<'_>) -> Result<Vec<u8>, FileError> {
    budget.charge(&file.relative, file.size)?;
    let limit = budget.limits.max_file_bytes;
    let handle = fs::File::open(&file.path).map_err(|e| FileError::io(file.relative.clone(), e))?;
    let mut bytes = Vec::with_capacity(usize::try_from(file.size.min(limit)).unwrap_or(0));
    handle
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| FileError::io(file.relative.clone(), e))?;
    if bytes.len() as u64 > limit {
        return Err(FileError::FileTooLarge {
            path: file.relative.clone(),
            size: bytes.len() as u64,
            limit,
        });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_relative_paths_are_normalised() {
        assert_eq!(
            normalize_relative_path("./manifests/a.yaml").unwrap(),
            "manifests/a.yaml"
        );
        assert_eq!(normalize_relative_path("metadata/").unwrap(), "metadata");
        assert_eq!(normalize_relative_path("a..b/c").unwrap(), "a..b/c");
    }

    #[test]
    fn traversal_and_odd_names_are_refused() {
        for bad in [
            "../etc/passwd",
            "manifests/../../x",
            "/etc/passwd",
            "a//b",
            "a/./b",
            "",
            "./",
            "a\\..\\b",
            "a\0b",
        ] {
            assert!(
                matches!(
                    normalize_relative_path(bad),
                    Err(FileError::UnsafePath { .. })
                ),
                "{bad:?}"
            );
        }
        let long = "a/".repeat(3000);
        assert!(normalize_relative_path(&long).is_err());
    }

    #[test]
    fn budget_counts_files_and_bytes() {
        let limits = Limits {
            max_files: 2,
            max_total_bytes: 10,
            max_file_bytes: 8,
            ..Limits::default()
        };
        let mut budget = Budget::new(&limits);
        budget.charge("a", 5).unwrap();
        assert!(matches!(
            budget.charge("b", 9),
            Err(FileError::FileTooLarge { .. })
        ));
        assert!(matches!(
            budget.charge("b", 6),
            Err(FileError::TooManyBytes { .. })
        ));
        let mut budget = Budget::new(&limits);
        budget.charge("a", 1).unwrap();
        budget.charge("b", 1).unwrap();
        assert!(matches!(
            budget.charge("c", 1),
            Err(FileError::TooManyFiles { .. })
        ));
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_out_of_the_root_are_refused() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "x").unwrap();
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("inside"), "y").unwrap();
        std::os::unix::fs::symlink(root.path().join("inside"), root.path().join("ok")).unwrap();
        let canonical = canonical_root(root.path()).unwrap();
        let mut out = Vec::new();
        list_files(&canonical, root.path(), "", true, &mut out).unwrap();
        assert_eq!(
            out.iter().map(|f| f.relative.as_str()).collect::<Vec<_>>(),
            ["inside", "ok"]
        );
        std::os::unix::fs::symlink(outside.path().join("secret"), root.path().join("zz")).unwrap();
        let mut out = Vec::new();
        let err = list_files(&canonical, root.path(), "", true, &mut out).unwrap_err();
        assert!(matches!(err, FileError::SymlinkEscapes { .. }), "{err}");
    }

    #[cfg(unix)]
    #[test]
    fn dangling_links_and_directory_links_are_refused() {
        let root = tempfile::tempdir().unwrap();
        let canonical = canonical_root(root.path()).unwrap();
        std::fs::create_dir(root.path().join("d")).unwrap();
        std::os::unix::fs::symlink(root.path().join("d"), root.path().join("link")).unwrap();
        let mut out = Vec::new();
        assert!(matches!(
            list_files(&canonical, root.path(), "", true, &mut out),
            Err(FileError::SymlinkToDirectory { .. })
        ));
        std::fs::remove_file(root.path().join("link")).unwrap();
        std::os::unix::fs::symlink(root.path().join("nowhere"), root.path().join("link")).unwrap();
        assert!(matches!(
            list_files(&canonical, root.path(), "", true, &mut out),
            Err(FileError::SymlinkEscapes { .. })
        ));
    }
}
