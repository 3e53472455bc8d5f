//! Reading an inventory from a directory laid out as upstream's image lays
//! it out (`/opt/openshift/operator/<arch>/<sample>/{imagestreams,templates}/*.json`):
//! the only file-system I/O of the inventory, feeding the pure
//! [`Inventory::from_files`].

use std::{
    fs, io,
    io::Read,
    path::{Path, PathBuf},
};

use crate::decide::inventory::{Inventory, InventoryError, MAX_SAMPLE_FILE_BYTES, SampleKind};

/// Why an inventory directory cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A directory (the inventory itself or one beneath it) cannot be listed.
    #[error("cannot read the inventory directory {}", path.display())]
    ReadDir {
        /// The directory.
        path: PathBuf,
        /// What the file system said.
        #[source]
        source: io::Error,
    },
    /// A sample file cannot be read.
    #[error("cannot read sample file {}", path.display())]
    ReadFile {
        /// The file.
        path: PathBuf,
        /// What the file system said.
        #[source]
        source: io::Error,
    },
    /// A path beneath the inventory is not UTF-8, so it cannot be named in
    /// the inventory's terms.
    #[error("the inventory path {} is not UTF-8", path.display())]
    NonUtf8Path {
        /// The path.
        path: PathBuf,
    },
    /// The files were read but do not make an inventory.
    #[error("the inventory in {} is not valid", dir.display())]
    Inventory {
        /// The inventory directory.
        dir: PathBuf,
        /// What is wrong with it.
        #[source]
        source: InventoryError,
    },
}

/// Reads the inventory under `dir`: every sample file beneath it, in sorted
/// order, depth first, named by its path relative to `dir`.
///
/// Only files whose parent directory is `imagestreams` or `templates` are
/// read; a file larger than [`MAX_SAMPLE_FILE_BYTES`] is refused before it is
/// read. A symbolic link is followed only to a file inside `dir`; links to
/// directories are not followed (so the walk cannot loop), and links leading
/// out of `dir` are skipped, as are entries that are neither files nor
/// directories.
pub fn load_dir(dir: &Path) -> Result<Inventory, LoadError> {
    let root = dir.canonicalize().map_err(|source| LoadError::ReadDir {
        path: dir.to_owned(),
        source,
    })?;
    let mut walk = Walk {
        dir,
        root: &root,
        files: Vec::new(),
    };
    walk.directory(&root)?;
    Inventory::from_files(walk.files).map_err(|source| LoadError::Inventory {
        dir: dir.to_owned(),
        source,
    })
}

/// One walk of an inventory directory.
struct Walk<'a> {
    /// The directory as the caller named it, for errors.
    dir: &'a Path,
    /// The same, canonical, which links must stay inside.
    root: &'a Path,
    /// The sample files found so far, by relative path.
    files: Vec<(String, Vec<u8>)>,
}

impl Walk<'_> {
    /// Collects the sample files beneath `dir`.
    fn directory(&mut self, dir: &Path) -> Result<(), LoadError> {
        let read_dir_error = |source| LoadError::ReadDir {
            path: dir.to_owned(),
            source,
        };
        let mut entries = fs::read_dir(dir)
            .map_err(read_dir_error)?
            .map(|entry| entry.map(|entry| entry.path()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(read_dir_error)?;
        entries.sort();
        for path in entries {
            let metadata = fs::symlink_metadata(&path).map_err(|source| LoadError::ReadFile {
                path: path.clone(),
                source,
            })?;
            let file_type = metadata.file_type();
            if file_type.is_dir() {
                self.directory(&path)?;
                continue;
            }
            let target = if file_type.is_symlink() {
                match fs::canonicalize(&path) {
                    Ok(target) if target.starts_with(self.root) => target,
                    // A dangling link, or one leading out of the inventory,
                    // is no sample.
                    Ok(_) | Err(_) => continue,
                }
            } else {
                path.clone()
            };
            let relative = self.relative_name(&path)?;
            if SampleKind::of_path(&relative).is_none() {
                continue;
            }
            if let Some(bytes) = self.read_sample(&target, &relative)? {
                self.files.push((relative, bytes));
            }
        }
        Ok(())
    }

    /// `path` relative to the inventory, `/`-separated.
    fn relative_name(&self, path: &Path) -> Result<String, LoadError> {
        let non_utf8 = || LoadError::NonUtf8Path {
            path: path.to_owned(),
        };
        // Every path walked is beneath the root, which it was joined to.
        let relative = path.strip_prefix(self.root).unwrap_or(path);
        let components = relative
            .components()
            .map(|component| component.as_os_str().to_str().ok_or_else(non_utf8))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(components.join("/"))
    }

    /// The bytes of the regular file at `path`, or `None` when it is not a
    /// regular file. The size is checked before reading, and the read is
    /// capped just past the limit in case the file grows meanwhile, so that
    /// [`Inventory::from_files`] sees and refuses it.
    fn read_sample(&self, path: &Path, relative: &str) -> Result<Option<Vec<u8>>, LoadError> {
        let read_error = |source| LoadError::ReadFile {
            path: path.to_owned(),
            source,
        };
        let metadata = fs::metadata(path).map_err(read_error)?;
        if !metadata.is_file() {
            return Ok(None);
        }
        let limit = u64::try_from(MAX_SAMPLE_FILE_BYTES).unwrap_or(u64::MAX);
        if metadata.len() > limit {
            return Err(LoadError::Inventory {
                dir: self.dir.to_owned(),
                source: InventoryError::TooLarge {
                    path: relative.to_owned(),
                    size: metadata.len(),
                    limit: MAX_SAMPLE_FILE_BYTES,
                },
            });
        }
        let mut bytes = Vec::new();
        fs::File::open(path)
            .and_then(|file| file.take(limit.saturating_add(1)).read_to_end(&mut bytes))
            .map_err(read_error)?;
        Ok(Some(bytes))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::error::Error as _;

    use super::*;

    /// Writes `text` at `relative` under `root`, creating directories.
    fn write(root: &Path, relative: &str, text: &str) {
        let path = root.join(relative);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    fn stream(name: &str) -> String {
        format!(
            r#"{{"kind": "ImageStream", "metadata": {{"name": "{name}"}}, "spec": {{"tags": []}}}}"#
        )
    }

    fn template(name: &str) -> String {
        format!(r#"{{"kind": "Template", "metadata": {{"name": "{name}"}}, "objects": []}}"#)
    }

    /// The error and its sources, joined, as a log line would show them.
    fn chain(error: &LoadError) -> String {
        let mut text = error.to_string();
        let mut source = error.source();
        while let Some(cause) = source {
            text.push_str(": ");
            text.push_str(&cause.to_string());
            source = cause.source();
        }
        text
    }

    #[test]
    fn upstream_image_layout_loads() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(
            root,
            "fixture-ruby/imagestreams/ruby-rhel.json",
            &stream("fixture-ruby"),
        );
        write(
            root,
            "fixture-ruby/templates/app.json",
            &template("fixture-ruby-app"),
        );
        write(
            root,
            "fixture-nginx/imagestreams/nginx.json",
            &stream("fixture-nginx"),
        );
        write(root, "README.md", "not a sample");
        write(
            root,
            "fixture-ruby/imagestreams/notes/todo.txt",
            "not a sample",
        );
        let inventory = load_dir(root).unwrap();
        assert_eq!(
            inventory.image_streams.keys().collect::<Vec<_>>(),
            ["fixture-nginx", "fixture-ruby"]
        );
        assert_eq!(
            inventory.templates.keys().collect::<Vec<_>>(),
            ["fixture-ruby-app"]
        );
    }

    #[test]
    fn library_layout_with_official_and_community_levels_loads() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(
            root,
            "official/fixture-ruby/imagestreams/a.json",
            &stream("fixture-ruby"),
        );
        write(
            root,
            "community/fixture-nginx/templates/b.json",
            &template("fixture-nginx"),
        );
        let inventory = load_dir(root).unwrap();
        assert!(inventory.image_streams.contains_key("fixture-ruby"));
        assert!(inventory.templates.contains_key("fixture-nginx"));
    }

    #[test]
    fn a_duplicate_names_both_files_in_walk_order() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "b/imagestreams/x.json", &stream("fixture-ruby"));
        write(root, "a/imagestreams/x.json", &stream("fixture-ruby"));
        let error = chain(&load_dir(root).unwrap_err());
        assert!(
            error.contains("a/imagestreams/x.json and b/imagestreams/x.json both hold"),
            "{error}"
        );
    }

    #[test]
    fn a_broken_file_is_named_relative_to_the_inventory() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "fixture-ruby/templates/bad.json", "{");
        let error = load_dir(dir.path()).unwrap_err();
        assert!(matches!(error, LoadError::Inventory { .. }));
        let error = chain(&error);
        assert!(
            error.contains("sample file fixture-ruby/templates/bad.json is not a JSON Template"),
            "{error}"
        );
    }

    #[test]
    fn an_oversized_sample_is_refused_and_an_oversized_other_file_ignored() {
        let limit = u64::try_from(MAX_SAMPLE_FILE_BYTES).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(
            root,
            "fixture-ruby/imagestreams/ruby.json",
            &stream("fixture-ruby"),
        );
        // Sparse files: the size is what is checked, before any read.
        let other = fs::File::create(root.join("fixture-ruby/big.tar")).unwrap();
        other.set_len(limit * 10).unwrap();
        assert_eq!(load_dir(root).unwrap().image_streams.len(), 1);

        write(root, "fixture-ruby/templates/huge.json", "");
        let huge = fs::File::options()
            .write(true)
            .open(root.join("fixture-ruby/templates/huge.json"))
            .unwrap();
        huge.set_len(limit + 1).unwrap();
        let error = load_dir(root).unwrap_err();
        assert!(
            matches!(&error, LoadError::Inventory {
                source: InventoryError::TooLarge { path, .. }, ..
            } if path == "fixture-ruby/templates/huge.json"),
            "{}",
            chain(&error)
        );
    }

    #[test]
    fn a_missing_directory_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("fixture-missing");
        let error = load_dir(&missing).unwrap_err();
        assert!(matches!(error, LoadError::ReadDir { .. }));
        assert!(error.to_string().contains("fixture-missing"), "{error}");
    }

    #[cfg(unix)]
    #[test]
    fn links_are_followed_only_to_files_inside_the_inventory() {
        use std::os::unix::fs::symlink;

        let outside = tempfile::tempdir().unwrap();
        write(
            outside.path(),
            "secret/imagestreams/x.json",
            &stream("fixture-outside"),
        );
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        // A link to a file inside, from a sample directory: read.
        write(root, "shared/ruby.json", &stream("fixture-ruby"));
        fs::create_dir_all(root.join("fixture-ruby/imagestreams")).unwrap();
        symlink(
            "../../shared/ruby.json",
            root.join("fixture-ruby/imagestreams/ruby.json"),
        )
        .unwrap();
        // A link out of the inventory: skipped.
        symlink(
            outside.path().join("secret/imagestreams/x.json"),
            root.join("fixture-ruby/imagestreams/outside.json"),
        )
        .unwrap();
        // A directory link out, and one inside (which would read every
        // sample twice): neither followed.
        symlink(outside.path().join("secret"), root.join("secret")).unwrap();
        symlink(root.join("fixture-ruby"), root.join("again")).unwrap();
        // A dangling link: skipped.
        symlink(
            "nowhere.json",
            root.join("fixture-ruby/imagestreams/dangling.json"),
        )
        .unwrap();

        let inventory = load_dir(root).unwrap();
        assert_eq!(
            inventory.image_streams.keys().collect::<Vec<_>>(),
            ["fixture-ruby"]
        );
    }

    #[cfg(unix)]
    #[test]
    fn the_inventory_may_itself_be_reached_through_a_link() {
        use std::os::unix::fs::symlink;

        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "real/fixture-ruby/imagestreams/a.json",
            &stream("fixture-ruby"),
        );
        symlink(dir.path().join("real"), dir.path().join("current")).unwrap();
        let inventory = load_dir(&dir.path().join("current")).unwrap();
        assert_eq!(inventory.image_streams.len(), 1);
    }
}
