//! Building an OCI image from local files, without a container engine: a
//! reproducible gzip tar layer (sorted entries, zero times and owners, modes
//! `0644`/`0755`), a config carrying the labels and run configuration, and
//! an OCI manifest. The layer is the whole image, or goes on top of a
//! [`BaseImage`] whose layers, run configuration and labels the image
//! inherits, as a Dockerfile's `FROM` does.

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
    /// A platform asked for that is not the base image's.
    #[error("platform {requested} asked for, but the base image is {base}")]
    PlatformMismatch {
        /// The base image's `os/architecture`.
        base: String,
        /// The one asked for.
        requested: String,
    },
}

/// Files and labels of an image to build.
#[derive(Debug, Clone, Default)]
pub struct ImageBuilder {
    files: BTreeMap<String, (Vec<u8>, bool)>,
    scratch_dirs: std::collections::BTreeSet<String>,
    labels: BTreeMap<String, String>,
    platform: Option<Platform>,
    run: RunConfig,
    base: Option<BaseImage>,
}

/// An image to build on: its manifest, its config (parsed, and whole, so
/// that fields this crate does not model, such as `ExposedPorts` or
/// `history`, are kept) and every layer's bytes, each verified against its
/// descriptor. Made by [`Client::pull_base`](crate::Client::pull_base) or
/// [`BuiltImage::as_base`].
#[derive(Clone)]
pub struct BaseImage {
    digest: Digest,
    manifest: ImageManifest,
    config: ImageConfig,
    raw_config: serde_json::Map<String, serde_json::Value>,
    layers: Vec<Bytes>,
}

impl std::fmt::Debug for BaseImage {
    // The layers are megabytes of binary: their digests say which they are.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BaseImage")
            .field("digest", &self.digest)
            .field("layers", &self.manifest.layers)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl BaseImage {
    /// Assembles a base image from parts the caller has verified: each of
    /// `layers` matches its descriptor in `manifest`, `raw_config` is the
    /// config blob `config` was read from, and its `rootfs.diff_ids` has one
    /// entry per layer.
    pub(crate) fn from_verified_parts(
        digest: Digest,
        manifest: ImageManifest,
        config: ImageConfig,
        raw_config: serde_json::Map<String, serde_json::Value>,
        layers: Vec<Bytes>,
    ) -> Self {
        Self {
            digest,
            manifest,
            config,
            raw_config,
            layers,
        }
    }

    /// The digest of the base image's manifest.
    pub fn digest(&self) -> &Digest {
        &self.digest
    }

    /// The base image's manifest; its layers come first in an image built
    /// on it.
    pub fn manifest(&self) -> &ImageManifest {
        &self.manifest
    }

    /// The base image's config.
    pub fn config(&self) -> &ImageConfig {
        &self.config
    }

    /// The layers' bytes, in the manifest's order.
    pub fn layers(&self) -> &[Bytes] {
        &self.layers
    }
}

/// A built image: its blobs and manifest, ready to push.
#[derive(Debug, Clone)]
pub struct BuiltImage {
    /// The config blob.
    pub config: Bytes,
    /// The layers of the base image, in order (none without a base).
    pub base_layers: Vec<Bytes>,
    /// The layer built from the files (gzip tar), the last one.
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
    /// Every layer with its descriptor, base layers first.
    pub fn layers(&self) -> impl Iterator<Item = (&Descriptor, &Bytes)> {
        self.parsed
            .layers
            .iter()
            .zip(self.base_layers.iter().chain(std::iter::once(&self.layer)))
    }

    /// This image as the base of another.
    pub fn as_base(&self) -> BaseImage {
        let raw_config = serde_json::from_slice(&self.config).unwrap_or_default();
        let config = serde_json::from_slice(&self.config).unwrap_or_default();
        BaseImage {
            digest: self.manifest_digest.clone(),
            manifest: self.parsed.clone(),
            config,
            raw_config,
            layers: self
                .base_layers
                .iter()
                .chain([&self.layer])
                .cloned()
                .collect(),
        }
    }

    /// Writes the image into the OCI image layout at `dir` (created when
    /// missing), named `ref_name` in its `index.json`; an image already
    /// there under that name is replaced, other images are kept. The layout
    /// is what `skopeo`, `crane` and `ctr images import` read.
    pub fn write_oci_layout(&self, dir: &Path, ref_name: &str) -> Result<(), BuildError> {
        let blobs = dir.join("blobs").join("sha256");
        std::fs::create_dir_all(&blobs).map_err(|e| io(&blobs, e))?;
        let layers = self
            .layers()
            .map(|(descriptor, bytes)| (&descriptor.digest, bytes));
        for (digest, bytes) in layers.chain([
            (&self.parsed.config.digest, &self.config),
            (&self.manifest_digest, &self.manifest),
        ]) {
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

    /// Adds an empty directory anyone may write to, sticky (mode `1777`),
    /// as `/tmp` is: a non-root process can then create files there.
    pub fn add_scratch_dir(mut self, destination: &str) -> Result<Self, BuildError> {
        let destination = clean_destination(destination)?;
        if self.files.len() + self.scratch_dirs.len() >= MAX_BUILD_FILES {
            return Err(BuildError::TooManyFiles);
        }
        self.scratch_dirs.insert(destination);
        Ok(self)
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

    /// Builds on `base`: its layers come first, and its run configuration
    /// (user, environment, entrypoint, command, working directory) and
    /// labels are inherited, what this builder sets winning. As in a
    /// Dockerfile, setting an entrypoint drops the base's command, and an
    /// environment variable set here replaces the base's of the same name.
    /// The platform is the base's.
    pub fn on_base(mut self, base: BaseImage) -> Self {
        self.base = Some(base);
        self
    }

    /// Sets the platform written in the config; with a base image it must
    /// be the base's.
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
        let layer_descriptor = Descriptor {
            media_type: OCI_LAYER_GZIP.into(),
            digest: Digest::of(&layer),
            size: layer.len() as u64,
            platform: None,
            annotations: BTreeMap::new(),
        };
        let (config, layers, base_layers) = match self.base {
            None => {
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
                let config = serde_json::to_vec(&config).unwrap_or_default();
                (config, vec![layer_descriptor], Vec::new())
            }
            Some(base) => {
                if let Some(requested) = &self.platform {
                    check_base_platform(&base.config, requested)?;
                }
                let run = inherit_run_config(&base.config.config, self.run, self.labels);
                let config = layered_config(base.raw_config, &run, &diff_id);
                let config = serde_json::to_vec(&config).unwrap_or_default();
                let mut layers = base.manifest.layers;
                layers.push(layer_descriptor);
                (config, layers, base.layers)
            }
        };
        let config = Bytes::from(config);
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
            layers,
            annotations: BTreeMap::new(),
        };
        let manifest = Bytes::from(serde_json::to_vec(&parsed).unwrap_or_default());
        Ok(BuiltImage {
            manifest_digest: Digest::of(&manifest),
            config,
            base_layers,
            layer,
            manifest,
            parsed,
        })
    }

    fn tar(&self) -> std::io::Result<Vec<u8>> {
        let mut builder = tar::Builder::new(Vec::new());
        let mut dirs_written = std::collections::BTreeSet::new();
        for dir in &self.scratch_dirs {
            let mut parent = String::new();
            for part in dir.split('/') {
                if !parent.is_empty() {
                    parent.push('/');
                }
                parent.push_str(part);
                if dirs_written.insert(parent.clone()) {
                    let mode = if parent == *dir { 0o1777 } else { 0o755 };
                    let mut header = header(tar::EntryType::Directory, mode, 0);
                    builder.append_data(&mut header, format!("{parent}/"), std::io::empty())?;
                }
            }
        }
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

/// The run configuration of an image built on a base whose own is `base`:
/// each field set in `own` wins over the base's, environment variables by
/// name and `labels` by key; an entrypoint set in `own` drops the base's
/// command, which was arguments to the base's entrypoint (Docker does the
/// same).
fn inherit_run_config(
    base: &RunConfig,
    own: RunConfig,
    labels: BTreeMap<String, String>,
) -> RunConfig {
    let cmd = match (&own.entrypoint, own.cmd) {
        (_, Some(cmd)) => Some(cmd),
        (Some(_), None) => None,
        (None, None) => base.cmd.clone(),
    };
    let env = match (&base.env, own.env) {
        (base_env, None) => base_env.clone(),
        (None, Some(own_env)) => Some(own_env),
        (Some(base_env), Some(own_env)) => {
            let name = |entry: &str| entry.split_once('=').map_or(entry, |(k, _)| k).to_owned();
            let mut merged: Vec<String> = base_env.clone();
            for entry in own_env {
                match merged.iter().position(|e| name(e) == name(&entry)) {
                    Some(i) => merged[i] = entry,
                    None => merged.push(entry),
                }
            }
            Some(merged)
        }
    };
    let mut all_labels = base.labels.clone().unwrap_or_default();
    all_labels.extend(labels);
    RunConfig {
        user: own.user.or_else(|| base.user.clone()),
        env,
        entrypoint: own.entrypoint.or_else(|| base.entrypoint.clone()),
        cmd,
        working_dir: own.working_dir.or_else(|| base.working_dir.clone()),
        labels: Some(all_labels),
    }
}

/// The base's config JSON with `run`'s fields and one more layer: every
/// other field (`ExposedPorts`, `Volumes`, `created`, `variant`…) is kept;
/// `history`, when the base has one, gets an entry for the new layer so it
/// keeps one entry per layer.
fn layered_config(
    mut config: serde_json::Map<String, serde_json::Value>,
    run: &RunConfig,
    diff_id: &Digest,
) -> serde_json::Map<String, serde_json::Value> {
    use serde_json::{Value, json};
    let mut run_fields = match config.remove("config") {
        Some(Value::Object(fields)) => fields,
        _ => serde_json::Map::new(),
    };
    for key in ["User", "Env", "Entrypoint", "Cmd", "WorkingDir", "Labels"] {
        run_fields.remove(key);
    }
    if let Ok(Value::Object(fields)) = serde_json::to_value(run) {
        run_fields.extend(fields);
    }
    config.insert("config".into(), Value::Object(run_fields));
    let mut diff_ids = config
        .get("rootfs")
        .and_then(|rootfs| rootfs.get("diff_ids"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    diff_ids.push(Value::String(diff_id.to_string()));
    config.insert(
        "rootfs".into(),
        json!({ "type": "layers", "diff_ids": diff_ids }),
    );
    if let Some(Value::Array(history)) = config.get_mut("history") {
        history.push(json!({ "created_by": "olm-oci ImageBuilder" }));
    }
    config
}

fn check_base_platform(base: &ImageConfig, requested: &Platform) -> Result<(), BuildError> {
    if base.os == requested.os && base.architecture == requested.architecture {
        return Ok(());
    }
    Err(BuildError::PlatformMismatch {
        base: format!("{}/{}", base.os, base.architecture),
        requested: format!("{}/{}", requested.os, requested.architecture),
    })
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

#[cfg(test)]
mod tests {

    #[test]
    fn a_scratch_dir_is_world_writable_and_sticky() {
        let image = ImageBuilder::new()
            .add_scratch_dir("tmp")
            .unwrap()
            .add_file("tmp/keep", b"x".to_vec())
            .unwrap()
            .build()
            .unwrap();
        let mut tar = Vec::new();
        std::io::Read::read_to_end(
            &mut flate2::read::GzDecoder::new(image.layer.as_ref()),
            &mut tar,
        )
        .unwrap();
        let mut archive = tar::Archive::new(tar.as_slice());
        let modes: Vec<(String, u32)> = archive
            .entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.path().unwrap().display().to_string(),
                    e.header().mode().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            modes,
            [("tmp/".to_owned(), 0o1777), ("tmp/keep".to_owned(), 0o644)]
        );
        assert!(ImageBuilder::new().add_scratch_dir("../tmp").is_err());
    }

    use super::*;

    fn strings(items: &[&str]) -> Option<Vec<String>> {
        Some(items.iter().map(|s| (*s).to_owned()).collect())
    }

    fn base_run() -> RunConfig {
        RunConfig {
            user: Some("1001".into()),
            env: strings(&["PATH=/usr/bin", "HOME=/home/base"]),
            entrypoint: strings(&["/bin/base-tool"]),
            cmd: strings(&["--base-flag"]),
            working_dir: Some("/base".into()),
            labels: Some(BTreeMap::from([
                ("base.only".to_owned(), "b".to_owned()),
                ("overlaid".to_owned(), "from-base".to_owned()),
            ])),
        }
    }

    #[test]
    fn what_the_builder_leaves_unset_comes_from_the_base() {
        let run = inherit_run_config(&base_run(), RunConfig::default(), BTreeMap::new());
        assert_eq!(run, base_run());
    }

    #[test]
    fn what_the_builder_sets_wins_by_field_variable_and_label() {
        let own = RunConfig {
            user: Some("65532".into()),
            env: strings(&["HOME=/home/own", "EXTRA=1"]),
            working_dir: Some("/own".into()),
            ..RunConfig::default()
        };
        let labels = BTreeMap::from([
            ("overlaid".to_owned(), "from-builder".to_owned()),
            ("own.only".to_owned(), "o".to_owned()),
        ]);
        let run = inherit_run_config(&base_run(), own, labels);
        assert_eq!(run.user.as_deref(), Some("65532"));
        assert_eq!(
            run.env,
            strings(&["PATH=/usr/bin", "HOME=/home/own", "EXTRA=1"])
        );
        assert_eq!(run.working_dir.as_deref(), Some("/own"));
        assert_eq!(run.entrypoint, strings(&["/bin/base-tool"]));
        assert_eq!(run.cmd, strings(&["--base-flag"]));
        assert_eq!(
            run.labels,
            Some(BTreeMap::from([
                ("base.only".to_owned(), "b".to_owned()),
                ("overlaid".to_owned(), "from-builder".to_owned()),
                ("own.only".to_owned(), "o".to_owned()),
            ]))
        );
    }

    #[test]
    fn a_new_entrypoint_drops_the_base_command_unless_one_is_given() {
        let entrypoint_only = RunConfig {
            entrypoint: strings(&["/bin/opm"]),
            ..RunConfig::default()
        };
        let run = inherit_run_config(&base_run(), entrypoint_only.clone(), BTreeMap::new());
        assert_eq!(run.entrypoint, strings(&["/bin/opm"]));
        assert_eq!(run.cmd, None);
        let both = RunConfig {
            cmd: strings(&["serve", "/configs"]),
            ..entrypoint_only
        };
        let run = inherit_run_config(&base_run(), both, BTreeMap::new());
        assert_eq!(run.cmd, strings(&["serve", "/configs"]));
        let cmd_only = RunConfig {
            cmd: strings(&["--other"]),
            ..RunConfig::default()
        };
        let run = inherit_run_config(&base_run(), cmd_only, BTreeMap::new());
        assert_eq!(run.entrypoint, strings(&["/bin/base-tool"]));
        assert_eq!(run.cmd, strings(&["--other"]));
    }

    #[test]
    fn unmodelled_config_fields_are_kept_and_history_gets_the_new_layer() {
        let base = serde_json::json!({
            "architecture": "arm64",
            "os": "linux",
            "variant": "v8",
            "created": "2024-01-01T00:00:00Z",
            "config": {"ExposedPorts": {"50051/tcp": {}}, "User": "1001", "Cmd": ["x"]},
            "rootfs": {"type": "layers", "diff_ids": ["sha256:aa"]},
            "history": [{"created_by": "base"}],
        });
        let serde_json::Value::Object(base) = base else {
            unreachable!("an object literal")
        };
        let run = RunConfig {
            entrypoint: strings(&["/bin/opm"]),
            ..RunConfig::default()
        };
        let diff_id = Digest::of(b"layer");
        let config = serde_json::Value::Object(layered_config(base, &run, &diff_id));
        assert_eq!(config["variant"], "v8");
        assert_eq!(config["created"], "2024-01-01T00:00:00Z");
        assert_eq!(
            config["config"],
            serde_json::json!({"ExposedPorts": {"50051/tcp": {}}, "Entrypoint": ["/bin/opm"]}),
            "the run fields are replaced by the merged ones, User and Cmd included"
        );
        assert_eq!(
            config["rootfs"]["diff_ids"],
            serde_json::json!(["sha256:aa", diff_id.to_string()])
        );
        assert_eq!(config["history"].as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn a_platform_other_than_the_base_is_refused() {
        let base = ImageConfig {
            architecture: "amd64".into(),
            os: "linux".into(),
            ..ImageConfig::default()
        };
        assert!(check_base_platform(&base, &Platform::linux_amd64()).is_ok());
        let refused = check_base_platform(&base, &Platform::parse("linux/arm64").unwrap());
        assert_eq!(
            refused.map_err(|e| e.to_string()),
            Err("platform linux/arm64 asked for, but the base image is linux/amd64".to_owned())
        );
    }
}
