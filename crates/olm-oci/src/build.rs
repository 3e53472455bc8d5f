//! Building a single-layer OCI image from local files, without a container
//! engine: a reproducible gzip tar layer (sorted entries, zero times and
//! owners, modes `0644`/`0755`), a config carrying the labels, and an OCI
//! manifest.

use std::{
    collections::BTreeMap,
    io::Write,
    path::{Path, PathBuf},
};

use bytes::Bytes;

use crate::{
    digest::Digest,
    manifest::{
        Descriptor, ImageConfig, ImageManifest, OCI_CONFIG, OCI_LAYER_GZIP, OCI_MANIFEST, Platform,
        RootFs, RunConfig,
    },
};

/// Most files one image built here may hold.
pub const MAX_BUILD_FILES: usize = 100_000;

/// Why an image could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
    /// A symbolic link leaving the source directory.
    #[error("{path}: symbolic link leaves {root}")]
    LinkEscapes {
        /// The link.
        path: String,
        /// The source directory.
        root: String,
    },
    /// A destination path with `..` or a root.
    #[error("invalid destination path {0:?} in the image")]
    Destination(String),
    /// More than [`MAX_BUILD_FILES`] files.
    #[error("more than {MAX_BUILD_FILES} files")]
    TooManyFiles,
}

/// Files and labels of an image to build.
#[derive(Debug, Clone, Default)]
pub struct ImageBuilder {
    files: BTreeMap<String, (Vec<u8>, bool)>,
    labels: BTreeMap<String, String>,
    platform: Option<Platform>,
    run: RunConfig,
}

/// A built image: its blobs and manifest, ready to push.
#[derive(Debug, Clone)]
pub struct BuiltImage {
    /// The config blob.
    pub config: Bytes,
    /// The one layer (gzip tar).
    pub layer: Bytes,
    /// The manifest.
    pub manifest: Bytes,
    /// The manifest's digest.
    pub manifest_digest: Digest,
    /// The manifest, parsed.
    pub parsed: ImageManifest,
}

/// Annotation naming an image in an OCI layout's `index.json`.
pub const REF_NAME_ANNOTATION: &str = "org.opencontainers.image.ref.name";

impl BuiltImage {
    /// Writes the image into the OCI image layout at `dir` (created when
    /// missing), named `ref_name` in its `index.json`; an image already
    /// there under that name is replaced, other images are kept. The layout
    /// is what `skopeo`, `crane` and `ctr images import` read.
    pub fn write_oci_layout(&self, dir: &Path, ref_name: &str) -> Result<(), BuildError> {
        let blobs = dir.join("blobs").join("sha256");
        std::fs::create_dir_all(&blobs).map_err(|e| io(&blobs, e))?;
        for (digest, bytes) in [
            (&self.parsed.config.digest, &self.config),
            (&self.parsed.layers[0].digest, &self.layer),
            (&self.manifest_digest, &self.manifest),
        ] {
            let path = blobs.join(digest.hex());
            std::fs::write(&path, bytes).map_err(|e| io(&path, e))?;
        }
        let layout = dir.join("oci-layout");
        std::fs::write(&layout, br#"{"imageLayoutVersion":"1.0.0"}"#)
            .map_err(|e| io(&layout, e))?;
        let index_path = dir.join("index.json");
        let mut manifests: Vec<serde_json::Value> = std::fs::read(&index_path)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
            .and_then(|index| index["manifests"].as_array().cloned())
            .unwrap_or_default();
        manifests.retain(|m| m["annotations"][REF_NAME_ANNOTATION] != ref_name);
        manifests.push(serde_json::json!({
            "mediaType": OCI_MANIFEST,
            "digest": self.manifest_digest.to_string(),
            "size": self.manifest.len(),
            "annotations": { REF_NAME_ANNOTATION: ref_name },
        }));
        manifests.sort_by(|a, b| {
            a["annotations"][REF_NAME_ANNOTATION]
                .as_str()
                .cmp(&b["annotations"][REF_NAME_ANNOTATION].as_str())
        });
        let index = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": manifests,
        });
        let text = serde_json::to_vec_pretty(&index).unwrap_or_default();
        std::fs::write(&index_path, text).map_err(|e| io(&index_path, e))?;
        Ok(())
    }
}

impl ImageBuilder {
    /// An empty image for linux/amd64.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets a label.
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// Sets labels.
    pub fn labels(mut self, labels: impl IntoIterator<Item = (String, String)>) -> Self {
        self.labels.extend(labels);
        self
    }

    /// Sets the command the container runs.
    pub fn entrypoint(mut self, command: &[&str]) -> Self {
        self.run.entrypoint = Some(command.iter().map(|s| (*s).to_owned()).collect());
        self
    }

    /// Sets the default arguments to the entrypoint.
    pub fn cmd(mut self, args: &[&str]) -> Self {
        self.run.cmd = Some(args.iter().map(|s| (*s).to_owned()).collect());
        self
    }

    /// Sets the user the process runs as (`uid:gid`).
    pub fn user(mut self, user: &str) -> Self {
        self.run.user = Some(user.to_owned());
        self
    }

    /// Adds an environment variable.
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.run
            .env
            .get_or_insert_with(Vec::new)
            .push(format!("{key}={value}"));
        self
    }

    /// Sets the working directory.
    pub fn working_dir(mut self, dir: &str) -> Self {
        self.run.working_dir = Some(dir.to_owned());
        self
    }

    /// Adds one executable file (mode `0755`) at `destination`.
    pub fn add_executable(
        mut self,
        destination: &str,
        content: Vec<u8>,
    ) -> Result<Self, BuildError> {
        let destination = clean_destination(destination)?;
        if self.files.len() >= MAX_BUILD_FILES {
            return Err(BuildError::TooManyFiles);
        }
        self.files.insert(destination, (content, true));
        Ok(self)
    }

    /// Sets the platform written in the config.
    pub fn platform(mut self, platform: Platform) -> Self {
        self.platform = Some(platform);
        self
    }

    /// Adds one file at `destination` (relative, `/`-separated).
    pub fn add_file(mut self, destination: &str, content: Vec<u8>) -> Result<Self, BuildError> {
        let destination = clean_destination(destination)?;
        if self.files.len() >= MAX_BUILD_FILES {
            return Err(BuildError::TooManyFiles);
        }
        self.files.insert(destination, (content, false));
        Ok(self)
    }

    /// Adds the tree at `source` under `destination` (`""` for the image
    /// root). Symbolic links are followed when they stay inside `source`.
    pub fn add_dir(mut self, source: &Path, destination: &str) -> Result<Self, BuildError> {
        let destination = if destination.trim_matches('/').is_empty() {
            String::new()
        } else {
            clean_destination(destination)?
        };
        let root = std::fs::canonicalize(source).map_err(|e| io(source, e))?;
        let mut stack = vec![(root.clone(), destination)];
        while let Some((dir, prefix)) = stack.pop() {
            let mut children: Vec<PathBuf> = std::fs::read_dir(&dir)
                .map_err(|e| io(&dir, e))?
                .map(|e| e.map(|e| e.path()))
                .collect::<Result<_, _>>()
                .map_err(|e| io(&dir, e))?;
            children.sort();
            for child in children {
                let name = child
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let target = if prefix.is_empty() {
                    name
                } else {
                    format!("{prefix}/{name}")
                };
                let resolved = std::fs::canonicalize(&child).map_err(|e| io(&child, e))?;
                if !resolved.starts_with(&root) {
                    return Err(BuildError::LinkEscapes {
                        path: child.display().to_string(),
                        root: root.display().to_string(),
                    });
                }
                let meta = std::fs::metadata(&resolved).map_err(|e| io(&child, e))?;
                if meta.is_dir() {
                    stack.push((resolved, target));
                } else if meta.is_file() {
                    if self.files.len() >= MAX_BUILD_FILES {
                        return Err(BuildError::TooManyFiles);
                    }
                    let content = std::fs::read(&resolved).map_err(|e| io(&child, e))?;
                    #[cfg(unix)]
                    let executable = {
                        use std::os::unix::fs::PermissionsExt;
                        meta.permissions().mode() & 0o111 != 0
                    };
                    #[cfg(not(unix))]
                    let executable = false;
                    self.files.insert(target, (content, executable));
                }
            }
        }
        Ok(self)
    }

    /// The paths added so far.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.files.keys().map(String::as_str)
    }

    /// Builds the layer, config and manifest.
    pub fn build(self) -> Result<BuiltImage, BuildError> {
        let tar = self.tar().map_err(|e| io(Path::new("<layer>"), e))?;
        let diff_id = Digest::of(&tar);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&tar)
            .map_err(|e| io(Path::new("<layer>"), e))?;
        let layer = Bytes::from(gz.finish().map_err(|e| io(Path::new("<layer>"), e))?);
        let platform = self.platform.unwrap_or_else(Platform::linux_amd64);
        let config = ImageConfig {
            architecture: platform.architecture,
            os: platform.os,
            config: RunConfig {
                labels: Some(self.labels),
                ..self.run
            },
            rootfs: RootFs {
                type_: "layers".into(),
                diff_ids: vec![diff_id.to_string()],
            },
        };
        let config = Bytes::from(serde_json::to_vec(&config).unwrap_or_default());
        let parsed = ImageManifest {
            schema_version: 2,
            media_type: Some(OCI_MANIFEST.into()),
            config: Descriptor {
                media_type: OCI_CONFIG.into(),
                digest: Digest::of(&config),
                size: config.len() as u64,
                platform: None,
                annotations: BTreeMap::new(),
            },
            layers: vec![Descriptor {
                media_type: OCI_LAYER_GZIP.into(),
                digest: Digest::of(&layer),
                size: layer.len() as u64,
                platform: None,
                annotations: BTreeMap::new(),
            }],
            annotations: BTreeMap::new(),
        };
        let manifest = Bytes::from(serde_json::to_vec(&parsed).unwrap_or_default());
        Ok(BuiltImage {
            manifest_digest: Digest::of(&manifest),
            config,
            layer,
            manifest,
            parsed,
        })
    }

    fn tar(&self) -> std::io::Result<Vec<u8>> {
        let mut builder = tar::Builder::new(Vec::new());
        let mut dirs_written = std::collections::BTreeSet::new();
        for (path, (content, executable)) in &self.files {
            // Parent directories first, each once.
            let mut parent = String::new();
            for part in path.split('/').take(path.matches('/').count()) {
                if !parent.is_empty() {
                    parent.push('/');
                }
                parent.push_str(part);
                if dirs_written.insert(parent.clone()) {
                    let mut header = header(tar::EntryType::Directory, 0o755, 0);
                    builder.append_data(&mut header, format!("{parent}/"), std::io::empty())?;
                }
            }
            let mode = if *executable { 0o755 } else { 0o644 };
            let mut header = header(tar::EntryType::Regular, mode, content.len() as u64);
            builder.append_data(&mut header, path, content.as_slice())?;
        }
        builder.into_inner()
    }
}

fn header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(kind);
    header.set_mode(mode);
    header.set_size(size);
    header.set_mtime(0);
    header.set_uid(0);
    header.set_gid(0);
    header
}

fn clean_destination(path: &str) -> Result<String, BuildError> {
    let parts: Vec<&str> = path
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    if parts.is_empty() || parts.contains(&"..") || path.contains('\0') {
        return Err(BuildError::Destination(path.to_owned()));
    }
    Ok(parts.join("/"))
}

fn io(path: &Path, source: std::io::Error) -> BuildError {
    BuildError::Io {
        path: path.display().to_string(),
        source,
    }
}
