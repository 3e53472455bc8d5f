//! Which files of a catalog directory are read: every regular file below
//! it, in name order, except what `.indexignore` files exclude, and no link
//! leading outside the catalog.

use std::{
    io,
    path::{Path, PathBuf},
};

use olm_catalog::fbc::INDEX_IGNORE_FILE;

use super::SourceFile;
use crate::{error::IndexError, limits::IndexLimits};

/// Lists the files of the catalog, sorted by path, honouring `.indexignore`
/// files and the file-count and size limits.
pub(crate) fn list_files(root: &Path, limits: &IndexLimits) -> Result<Vec<SourceFile>, IndexError> {
    let meta = std::fs::metadata(root).map_err(|source| IndexError::Read {
        path: root.to_owned(),
        source,
    })?;
    if !meta.is_dir() {
        return Err(IndexError::NotADirectory {
            path: root.to_owned(),
        });
    }
    // Symbolic links are checked against the root's real place, so that a
    // root reached through a link itself still works.
    let real_root = std::fs::canonicalize(root).map_err(|source| IndexError::Read {
        path: root.to_owned(),
        source,
    })?;
    let mut files = Vec::new();
    let mut total: u64 = 0;
    let mut ignores: Vec<IgnoreRules> = Vec::new();
    walk_dir(
        root,
        &real_root,
        Path::new(""),
        limits,
        &mut ignores,
        &mut files,
        &mut total,
    )?;
    files.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(files)
}

/// Refuses a symbolic link of the catalog whose target, fully resolved, is
/// not under the catalog root: `opm serve` serves what it reads, so a link
/// to `/etc/passwd` or `../../secret` in a catalog image would publish that
/// file. The error names the link, where it leads and the rule.
pub(super) fn check_link_inside(real_root: &Path, link: &Path) -> Result<(), IndexError> {
    let resolved = std::fs::canonicalize(link).map_err(|source| IndexError::Read {
        path: link.to_owned(),
        source,
    })?;
    if resolved.starts_with(real_root) {
        return Ok(());
    }
    Err(IndexError::Read {
        path: link.to_owned(),
        source: io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "symbolic link leads to {}, outside the catalog root {}; \
                 catalog files must resolve inside the served directory",
                resolved.display(),
                real_root.display()
            ),
        ),
    })
}

/// Walks `rel_dir` of the catalog at `root`, whose real place (every
/// symbolic link resolved) is `real_root`.
pub(super) fn walk_dir(
    root: &Path,
    real_root: &Path,
    rel_dir: &Path,
    limits: &IndexLimits,
    ignores: &mut Vec<IgnoreRules>,
    files: &mut Vec<SourceFile>,
    total: &mut u64,
) -> Result<(), IndexError> {
    let dir = root.join(rel_dir);
    let read_err = |source| IndexError::Read {
        path: dir.clone(),
        source,
    };
    let mut names: Vec<(std::ffi::OsString, std::fs::FileType)> = Vec::new();
    for entry in std::fs::read_dir(&dir).map_err(read_err)? {
        let entry = entry.map_err(read_err)?;
        names.push((entry.file_name(), entry.file_type().map_err(read_err)?));
    }
    names.sort_by(|a, b| a.0.cmp(&b.0));
    let ignore_file = dir.join(INDEX_IGNORE_FILE);
    if names
        .iter()
        .any(|(name, kind)| name == INDEX_IGNORE_FILE && kind.is_symlink())
    {
        check_link_inside(real_root, &ignore_file)?;
    }
    let pushed = match std::fs::read_to_string(&ignore_file) {
        Ok(text) => {
            ignores.push(IgnoreRules::parse(rel_dir, &text));
            true
        }
        Err(_) => false,
    };
    for (name, file_type) in names {
        let rel = rel_dir.join(&name);
        if name == INDEX_IGNORE_FILE {
            continue;
        }
        // A symbolic link counts as what it points to, but directories are
        // only entered through real directories, so a link cannot loop.
        let (is_dir, is_file) = if file_type.is_symlink() {
            match std::fs::metadata(root.join(&rel)) {
                Ok(m) => (false, m.is_file()),
                Err(_) => (false, false),
            }
        } else {
            (file_type.is_dir(), file_type.is_file())
        };
        if ignores.iter().any(|rules| rules.ignores(&rel, is_dir)) {
            continue;
        }
        if is_dir {
            walk_dir(root, real_root, &rel, limits, ignores, files, total)?;
        } else if is_file {
            let path = root.join(&rel);
            // A real file under a real directory is inside the root by
            // construction; only a link can lead elsewhere.
            if file_type.is_symlink() {
                check_link_inside(real_root, &path)?;
            }
            let meta = std::fs::metadata(&path).map_err(|source| IndexError::Read {
                path: path.clone(),
                source,
            })?;
            *total += meta.len();
            if files.len() >= limits.max_files {
                return Err(IndexError::LimitExceeded {
                    what: "files",
                    field: "max_files",
                    limit: limits.max_files as u64,
                });
            }
            if *total > limits.max_total_bytes {
                return Err(IndexError::LimitExceeded {
                    what: "bytes in all files",
                    field: "max_total_bytes",
                    limit: limits.max_total_bytes,
                });
            }
            files.push(SourceFile {
                rel,
                len: meta.len(),
                modified: meta.modified().ok(),
            });
        }
    }
    if pushed {
        ignores.pop();
    }
    Ok(())
}

/// The patterns of one `.indexignore` file: gitignore-style globs relative to
/// the directory holding the file (`*`, `?`, `**`, a trailing `/` for
/// directories only, a leading `/` to anchor). Negated patterns (`!`) are not
/// supported and are skipped.
#[derive(Debug)]
pub(super) struct IgnoreRules {
    base: PathBuf,
    patterns: Vec<IgnorePattern>,
}

#[derive(Debug)]
pub(super) struct IgnorePattern {
    glob: String,
    anchored: bool,
    dir_only: bool,
}

impl IgnoreRules {
    fn parse(base: &Path, text: &str) -> Self {
        let patterns = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('!'))
            .map(|line| {
                let dir_only = line.ends_with('/');
                let line = line.trim_end_matches('/');
                let anchored = line.contains('/');
                IgnorePattern {
                    glob: line.trim_start_matches('/').to_owned(),
                    anchored,
                    dir_only,
                }
            })
            .collect();
        Self {
            base: base.to_owned(),
            patterns,
        }
    }

    fn ignores(&self, rel: &Path, is_dir: bool) -> bool {
        let Ok(below) = rel.strip_prefix(&self.base) else {
            return false;
        };
        let below = below.to_string_lossy();
        let name = rel
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        self.patterns.iter().any(|p| {
            (!p.dir_only || is_dir)
                && if p.anchored {
                    glob_match(p.glob.as_bytes(), below.as_bytes())
                } else {
                    glob_match(p.glob.as_bytes(), name.as_bytes())
                }
        })
    }
}

/// Matches a glob where `*` and `?` stay within a path segment and `**`
/// crosses segments.
pub(super) fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some((b'*', rest)) if rest.first() == Some(&b'*') => {
            let rest = &rest[1..];
            let rest = rest.strip_prefix(b"/").unwrap_or(rest);
            (0..=text.len()).any(|i| glob_match(rest, &text[i..]))
        }
        Some((b'*', rest)) => {
            let mut i = 0;
            loop {
                if glob_match(rest, &text[i..]) {
                    return true;
                }
                if i == text.len() || text[i] == b'/' {
                    return false;
                }
                i += 1;
            }
        }
        Some((b'?', rest)) => {
            matches!(text.first(), Some(c) if *c != b'/') && glob_match(rest, &text[1..])
        }
        Some((c, rest)) => text.first() == Some(c) && glob_match(rest, &text[1..]),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn globs_match_like_gitignore() {
        assert!(glob_match(b"*.md", b"README.md"));
        assert!(!glob_match(b"*.md", b"docs/README.md"));
        assert!(glob_match(b"**/*.md", b"docs/README.md"));
        assert!(glob_match(b"a?c", b"abc"));
        assert!(!glob_match(b"a?c", b"a/c"));
    }

    #[test]
    fn ignore_rules_apply_below_their_directory() {
        let rules = IgnoreRules::parse(Path::new("pkg"), "# comment\n*.md\n/tests/\n!keep\n");
        assert!(rules.ignores(Path::new("pkg/README.md"), false));
        assert!(rules.ignores(Path::new("pkg/tests"), true));
        assert!(!rules.ignores(Path::new("pkg/tests"), false));
        assert!(!rules.ignores(Path::new("other/README.md"), false));
    }
}
