//! Bounded extraction of image layers (tar, gzip or zstd, detected from the
//! first bytes) into a directory or into memory.
//!
//! Every layer is untrusted: sizes, entry count and compression ratio are
//! capped ([`ExtractLimits`]); paths with `..` or a leading `/` are refused;
//! symbolic and hard links must stay inside the root, also when followed
//! through other links of the tree; nothing is ever written through a
//! symbolic link; only regular files, directories and links are created,
//! with modes `0644`/`0755`. OCI whiteouts (`.wh.NAME`,
//! `.wh..wh..opq`) delete what earlier layers put there.

use std::{
    collections::BTreeMap,
    io::{self, Read},
    path::{Component, Path, PathBuf},
};

/// Default cap on one layer's compressed size.
pub const DEFAULT_MAX_COMPRESSED_BYTES: u64 = 1024 * 1024 * 1024;
/// Default cap on the uncompressed size of all layers extracted together.
pub const DEFAULT_MAX_UNCOMPRESSED_BYTES: u64 = 4 * 1024 * 1024 * 1024;
/// Default cap on the number of tar entries of one layer.
pub const DEFAULT_MAX_ENTRIES: u64 = 100_000;
/// Default cap on uncompressed / compressed bytes of one layer.
pub const DEFAULT_MAX_COMPRESSION_RATIO: u64 = 100;
/// Uncompressed bytes allowed before the ratio is enforced, so that tiny,
/// highly compressible layers are not refused.
pub const RATIO_GRACE_BYTES: u64 = 1024 * 1024;
/// Most symbolic links followed to resolve one link (itself included). A
/// longer chain (or a loop) is refused rather than followed further,
/// because a link that cannot be resolved to its end cannot be shown to
/// stay inside the root.
pub const MAX_SYMLINK_DEPTH: usize = 16;

const WHITEOUT_PREFIX: &str = ".wh.";
const OPAQUE_WHITEOUT: &str = ".wh..wh..opq";

/// Caps on what a layer may expand to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtractLimits {
    /// Compressed bytes of one layer.
    pub max_compressed_bytes: u64,
    /// Uncompressed bytes of all layers of one extraction.
    pub max_uncompressed_bytes: u64,
    /// Tar entries of one layer.
    pub max_entries: u64,
    /// Uncompressed bytes per compressed byte of one layer (after
    /// [`RATIO_GRACE_BYTES`]).
    pub max_compression_ratio: u64,
}

impl Default for ExtractLimits {
    fn default() -> Self {
        Self {
            max_compressed_bytes: DEFAULT_MAX_COMPRESSED_BYTES,
            max_uncompressed_bytes: DEFAULT_MAX_UNCOMPRESSED_BYTES,
            max_entries: DEFAULT_MAX_ENTRIES,
            max_compression_ratio: DEFAULT_MAX_COMPRESSION_RATIO,
        }
    }
}

/// What to extract and within which bounds.
#[derive(Debug, Clone, Default)]
pub struct ExtractOptions {
    /// The caps.
    pub limits: ExtractLimits,
    /// When not empty, only entries under one of these relative directories
    /// (for example `manifests/` and `metadata/`) are extracted.
    pub path_prefixes: Vec<String>,
}

impl ExtractOptions {
    /// Only entries under `prefixes`.
    pub fn only(prefixes: &[&str]) -> Self {
        Self {
            path_prefixes: prefixes.iter().map(|p| (*p).to_owned()).collect(),
            ..Self::default()
        }
    }
}

/// Why a layer was refused.
#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    /// More compressed bytes than allowed.
    #[error("layer is larger than the limit of {limit} compressed bytes")]
    CompressedTooLarge {
        /// The limit.
        limit: u64,
    },
    /// More uncompressed bytes than allowed.
    #[error("layers expand to more than the limit of {limit} bytes")]
    UncompressedTooLarge {
        /// The limit.
        limit: u64,
    },
    /// More entries than allowed.
    #[error("layer has more than the limit of {limit} entries")]
    TooManyEntries {
        /// The limit.
        limit: u64,
    },
    /// Expands too much for its size: a decompression bomb.
    #[error("layer expands more than {limit} times its compressed size")]
    CompressionRatio {
        /// The limit.
        limit: u64,
    },
    /// A path with `..` or a root.
    #[error("layer entry {path:?} leaves the extraction root")]
    PathTraversal {
        /// The entry path.
        path: String,
    },
    /// A link whose target is outside the root.
    #[error("layer entry {path:?} links outside the extraction root (to {target:?})")]
    LinkEscapes {
        /// The entry path.
        path: String,
        /// The link target.
        target: String,
    },
    /// A link that reaches a chain of more links than allowed, or a loop.
    #[error(
        "layer entry {path:?} is a symbolic link whose chain is longer than the limit of {limit} links"
    )]
    LinkChainTooLong {
        /// The entry path.
        path: String,
        /// The limit ([`MAX_SYMLINK_DEPTH`]).
        limit: usize,
    },
    /// A hard link to something not extracted before.
    #[error("layer entry {path:?} is a hard link to {target:?}, which is not a file of the layer")]
    DanglingHardLink {
        /// The entry path.
        path: String,
        /// The link target.
        target: String,
    },
    /// An entry would be written through a symbolic link.
    #[error("layer entry {path:?} would be written through the symbolic link {link:?}")]
    ThroughSymlink {
        /// The entry path.
        path: String,
        /// The link on the way.
        link: String,
    },
    /// A malformed archive or a failed write.
    #[error("read layer: {0}")]
    Io(#[from] io::Error),
}

/// How a layer is compressed, by its magic bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Plain tar.
    None,
    /// gzip.
    Gzip,
    /// zstd.
    Zstd,
}

impl Compression {
    /// Detects the compression from a layer's first bytes.
    pub fn detect(head: &[u8]) -> Self {
        if head.starts_with(&[0x1f, 0x8b]) {
            Self::Gzip
        } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Self::Zstd
        } else {
            Self::None
        }
    }
}

/// Files extracted into memory, by relative path (`manifests/csv.yaml`).
pub type MemoryTree = BTreeMap<String, Vec<u8>>;

/// Totals of one extraction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExtractStats {
    /// Regular files written.
    pub files: u64,
    /// Uncompressed bytes read.
    pub uncompressed_bytes: u64,
    /// Entries skipped (outside the prefixes, devices, fifos).
    pub skipped: u64,
}

/// Where entries go.
trait Sink {
    fn directory(&mut self, path: &str) -> Result<(), ExtractError>;
    fn file(&mut self, path: &str, mode: u32, content: &mut dyn Read) -> Result<(), ExtractError>;
    fn symlink(&mut self, path: &str, target: &str) -> Result<(), ExtractError>;
    fn hardlink(&mut self, path: &str, target: &str) -> Result<(), ExtractError>;
    fn remove(&mut self, path: &str) -> Result<(), ExtractError>;
    fn clear_dir(&mut self, path: &str) -> Result<(), ExtractError>;
    /// The target, as written, of the symbolic link at `path`, if `path`
    /// is one.
    fn link_target(&self, path: &str) -> Option<String>;
    /// Every symbolic link of the tree, including those of earlier layers.
    fn links(&self) -> Result<Vec<String>, ExtractError>;
}

/// An extraction of one or more layers, applied in order.
pub struct Extractor<'a> {
    options: &'a ExtractOptions,
    uncompressed_total: u64,
    stats: ExtractStats,
}

impl<'a> Extractor<'a> {
    /// Starts an extraction.
    pub fn new(options: &'a ExtractOptions) -> Self {
        Self {
            options,
            uncompressed_total: 0,
            stats: ExtractStats::default(),
        }
    }

    /// Totals so far.
    pub fn stats(&self) -> ExtractStats {
        self.stats
    }

    /// Applies one layer onto directory `root` (created if missing).
    pub fn extract_to_dir(&mut self, layer: impl Read, root: &Path) -> Result<(), ExtractError> {
        std::fs::create_dir_all(root)?;
        let mut sink = DirSink {
            root: root.to_path_buf(),
        };
        self.apply(layer, &mut sink)
    }

    /// Applies one layer onto `tree`.
    pub fn extract_to_memory(
        &mut self,
        layer: impl Read,
        tree: &mut MemoryTree,
    ) -> Result<(), ExtractError> {
        let mut sink = MemorySink {
            tree,
            links: BTreeMap::new(),
        };
        self.apply(layer, &mut sink)?;
        sink.resolve_links();
        Ok(())
    }

    fn apply(&mut self, layer: impl Read, sink: &mut dyn Sink) -> Result<(), ExtractError> {
        let slot = LimitSlot::default();
        let applied = self
            .apply_layer(layer, sink, &slot)
            .map_err(|error| classify(&slot, error));
        // Links are checked again once the layer is applied, also when it
        // failed half-way: a link can escape through a link written after
        // it (`x/l -> sub/../..`, then `x/sub -> ..`), so no check made
        // when a link is written is enough on its own.
        let links = verify_links(sink);
        applied.and(links)
    }

    fn apply_layer<'r>(
        &mut self,
        layer: impl Read + 'r,
        sink: &mut dyn Sink,
        slot: &LimitSlot,
    ) -> Result<(), ExtractError> {
        let limits = &self.options.limits;
        let compressed = Counting::new(layer);
        let compressed_count = compressed.count.clone();
        let mut compressed = LimitedCompressed {
            inner: compressed,
            limit: limits.max_compressed_bytes,
            slot: slot.clone(),
        };
        let mut head = [0u8; 4];
        let head_len = read_head(&mut compressed, &mut head)?;
        let chained = io::Cursor::new(head[..head_len].to_vec()).chain(compressed);
        let decoded: Box<dyn Read + 'r> = match Compression::detect(&head[..head_len]) {
            Compression::None => Box::new(chained),
            Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(chained)),
            Compression::Zstd => Box::new(
                ruzstd::decoding::StreamingDecoder::new(chained)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?,
            ),
        };
        let guarded = Guarded {
            inner: decoded,
            compressed: compressed_count,
            layer_bytes: 0,
            total_before: self.uncompressed_total,
            limits: limits.clone(),
            slot: slot.clone(),
        };
        let mut archive = tar::Archive::new(guarded);
        let mut entries_seen = 0u64;
        for entry in archive.entries()? {
            let mut entry = entry?;
            entries_seen += 1;
            if entries_seen > limits.max_entries {
                return Err(ExtractError::TooManyEntries {
                    limit: limits.max_entries,
                });
            }
            let raw_path = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
            let path = clean_path(&raw_path)?;
            let Some(path) = path else {
                continue; // the root itself
            };
            let (dir, name) = match path.rsplit_once('/') {
                Some((d, n)) => (d, n),
                None => ("", path.as_str()),
            };
            if !self.wanted(&path) {
                self.stats.skipped += 1;
                continue;
            }
            if name == OPAQUE_WHITEOUT {
                sink.clear_dir(dir)?;
                continue;
            }
            if let Some(hidden) = name.strip_prefix(WHITEOUT_PREFIX) {
                let target = join(dir, hidden);
                clean_path(&target)?;
                sink.remove(&target)?;
                continue;
            }
            let kind = entry.header().entry_type();
            let mode = entry.header().mode().unwrap_or(0o644);
            match kind {
                tar::EntryType::Directory => sink.directory(&path)?,
                tar::EntryType::Regular | tar::EntryType::Continuous => {
                    sink.file(&path, mode, &mut entry)?;
                    self.stats.files += 1;
                }
                tar::EntryType::Symlink => {
                    let target = link_name(&entry)?;
                    check_symlink(&path, dir, &target)?;
                    sink.symlink(&path, &target)?;
                }
                tar::EntryType::Link => {
                    let target = link_name(&entry)?;
                    let cleaned = clean_path(&target)
                        .map_err(|_| ExtractError::LinkEscapes {
                            path: path.clone(),
                            target: target.clone(),
                        })?
                        .ok_or_else(|| ExtractError::LinkEscapes {
                            path: path.clone(),
                            target: target.clone(),
                        })?;
                    sink.hardlink(&path, &cleaned)?;
                }
                _ => self.stats.skipped += 1,
            }
        }
        let guarded = archive.into_inner();
        self.uncompressed_total = guarded.total_before + guarded.layer_bytes;
        self.stats.uncompressed_bytes = self.uncompressed_total;
        Ok(())
    }

    fn wanted(&self, path: &str) -> bool {
        self.options.path_prefixes.is_empty()
            || self.options.path_prefixes.iter().any(|prefix| {
                let prefix = prefix.trim_matches('/');
                path == prefix
                    || path
                        .strip_prefix(prefix)
                        .is_some_and(|rest| rest.starts_with('/'))
            })
    }
}

/// Extracts `layers` (base first) into `root` with `options`.
pub fn extract_layers_to_dir<R: Read>(
    layers: impl IntoIterator<Item = R>,
    root: &Path,
    options: &ExtractOptions,
) -> Result<ExtractStats, ExtractError> {
    let mut extractor = Extractor::new(options);
    for layer in layers {
        extractor.extract_to_dir(layer, root)?;
    }
    Ok(extractor.stats())
}

/// Extracts `layers` (base first) into memory with `options`.
pub fn extract_layers_to_memory<R: Read>(
    layers: impl IntoIterator<Item = R>,
    options: &ExtractOptions,
) -> Result<MemoryTree, ExtractError> {
    let mut extractor = Extractor::new(options);
    let mut tree = MemoryTree::new();
    for layer in layers {
        extractor.extract_to_memory(layer, &mut tree)?;
    }
    Ok(tree)
}

fn read_head(reader: &mut impl Read, head: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < head.len() {
        match reader.read(&mut head[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

fn link_name<R: Read>(entry: &tar::Entry<'_, R>) -> Result<String, ExtractError> {
    Ok(entry
        .link_name_bytes()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default())
}

/// A normalised relative path (`a/b`), `None` for the root itself; refuses
/// absolute paths and `..`.
fn clean_path(raw: &str) -> Result<Option<String>, ExtractError> {
    let traversal = || ExtractError::PathTraversal {
        path: raw.chars().take(300).collect(),
    };
    if raw.contains('\0') {
        return Err(traversal());
    }
    let mut parts = Vec::new();
    for component in Path::new(raw).components() {
        match component {
            Component::Normal(part) => parts.push(part.to_string_lossy().into_owned()),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(traversal());
            }
        }
    }
    Ok((!parts.is_empty()).then(|| parts.join("/")))
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_owned()
    } else {
        format!("{dir}/{name}")
    }
}

/// A symlink at `path` (in `dir`) to `target` must resolve lexically inside
/// the root.
fn check_symlink(path: &str, dir: &str, target: &str) -> Result<(), ExtractError> {
    let escapes = || ExtractError::LinkEscapes {
        path: path.to_owned(),
        target: target.chars().take(300).collect(),
    };
    if target.is_empty() || target.starts_with('/') || target.contains('\0') {
        return Err(escapes());
    }
    let mut stack: Vec<&str> = dir.split('/').filter(|s| !s.is_empty()).collect();
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if stack.pop().is_none() {
                    return Err(escapes());
                }
            }
            other => stack.push(other),
        }
    }
    Ok(())
}

/// Why a link could not be resolved inside the root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unresolvable {
    /// A `..` left the root, or a link on the way is absolute.
    Escapes,
    /// More than [`MAX_SYMLINK_DEPTH`] links on the way.
    TooLong,
}

/// Where the symbolic link at `path` leads, as the components of a path
/// relative to the root (none for the root itself), following every link
/// met on the way as the kernel would: a `..` after a link climbs from
/// where the link leads, not from where it sits. `lookup` gives the target
/// of a link of the tree.
///
/// The components kept are never links themselves, so the result is the
/// physical place; a component that does not exist is kept as a name
/// (the kernel would fail there, so assuming a directory is the cautious
/// choice).
fn resolve_link(
    path: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<String>, Unresolvable> {
    let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
    let mut resolved: Vec<String> = dir
        .split('/')
        .filter(|part| !part.is_empty())
        .map(str::to_owned)
        .collect();
    // The walk starts as if it had just met `path` itself.
    let mut pending = std::collections::VecDeque::from([name.to_owned()]);
    let mut followed = 0usize;
    while let Some(part) = pending.pop_front() {
        match part.as_str() {
            "" | "." => {}
            ".." => {
                if resolved.pop().is_none() {
                    return Err(Unresolvable::Escapes);
                }
            }
            _ => {
                resolved.push(part);
                let Some(target) = lookup(&resolved.join("/")) else {
                    continue;
                };
                followed += 1;
                if followed > MAX_SYMLINK_DEPTH {
                    return Err(Unresolvable::TooLong);
                }
                if target.is_empty() || target.starts_with('/') || target.contains('\0') {
                    return Err(Unresolvable::Escapes);
                }
                resolved.pop();
                for part in target.split('/').rev() {
                    pending.push_front(part.to_owned());
                }
            }
        }
    }
    Ok(resolved)
}

/// Refuses the tree if any of its symbolic links, followed through the
/// others, leads outside the root or through too long a chain. The
/// offending links are removed first, so that a caller keeping the
/// directory despite the error still cannot be led outside.
fn verify_links(sink: &mut dyn Sink) -> Result<(), ExtractError> {
    let mut refused: Vec<(String, ExtractError)> = Vec::new();
    for path in sink.links()? {
        let lookup = |p: &str| sink.link_target(p);
        let error = match resolve_link(&path, &lookup) {
            Ok(_) => continue,
            Err(Unresolvable::Escapes) => ExtractError::LinkEscapes {
                target: sink
                    .link_target(&path)
                    .unwrap_or_default()
                    .chars()
                    .take(300)
                    .collect(),
                path: path.clone(),
            },
            Err(Unresolvable::TooLong) => ExtractError::LinkChainTooLong {
                path: path.clone(),
                limit: MAX_SYMLINK_DEPTH,
            },
        };
        refused.push((path, error));
    }
    for (path, _) in &refused {
        sink.remove(path)?;
    }
    match refused.into_iter().next() {
        Some((_, error)) => Err(error),
        None => Ok(()),
    }
}

/// A limit hit deep inside a reader, reported beside the `io::Error` that
/// the tar and decompression layers pass along.
type LimitSlot = std::rc::Rc<std::cell::RefCell<Option<ExtractError>>>;

fn limit_error(slot: &LimitSlot, error: ExtractError) -> io::Error {
    let message = error.to_string();
    *slot.borrow_mut() = Some(error);
    io::Error::other(message)
}

/// The limit that caused `error`, if one did, else `error` itself.
fn classify(slot: &LimitSlot, error: ExtractError) -> ExtractError {
    slot.borrow_mut().take().unwrap_or(error)
}

/// Counts bytes read through it.
struct Counting<R> {
    inner: R,
    count: std::rc::Rc<std::cell::Cell<u64>>,
}

impl<R> Counting<R> {
    fn new(inner: R) -> Self {
        Self {
            inner,
            count: std::rc::Rc::default(),
        }
    }
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.set(self.count.get() + n as u64);
        Ok(n)
    }
}

/// Refuses to read past the compressed limit.
struct LimitedCompressed<R> {
    inner: Counting<R>,
    limit: u64,
    slot: LimitSlot,
}

impl<R: Read> Read for LimitedCompressed<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if self.inner.count.get() > self.limit {
            return Err(limit_error(
                &self.slot,
                ExtractError::CompressedTooLarge { limit: self.limit },
            ));
        }
        Ok(n)
    }
}

/// Enforces the uncompressed and ratio limits on decoded bytes.
struct Guarded<'r> {
    inner: Box<dyn Read + 'r>,
    compressed: std::rc::Rc<std::cell::Cell<u64>>,
    layer_bytes: u64,
    total_before: u64,
    limits: ExtractLimits,
    slot: LimitSlot,
}

impl Read for Guarded<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.layer_bytes += n as u64;
        if self.total_before + self.layer_bytes > self.limits.max_uncompressed_bytes {
            return Err(limit_error(
                &self.slot,
                ExtractError::UncompressedTooLarge {
                    limit: self.limits.max_uncompressed_bytes,
                },
            ));
        }
        let compressed = self.compressed.get().max(1);
        if self.layer_bytes > RATIO_GRACE_BYTES
            && self.layer_bytes / compressed > self.limits.max_compression_ratio
        {
            return Err(limit_error(
                &self.slot,
                ExtractError::CompressionRatio {
                    limit: self.limits.max_compression_ratio,
                },
            ));
        }
        Ok(n)
    }
}

struct DirSink {
    root: PathBuf,
}

impl DirSink {
    /// The destination of `path`, after checking that no existing ancestor
    /// is a symbolic link (so nothing is written through one).
    fn target(&self, path: &str) -> Result<PathBuf, ExtractError> {
        let mut current = self.root.clone();
        let parts: Vec<&str> = path.split('/').collect();
        for (i, part) in parts.iter().enumerate() {
            current.push(part);
            if i + 1 == parts.len() {
                break;
            }
            if let Ok(meta) = std::fs::symlink_metadata(&current)
                && meta.file_type().is_symlink()
            {
                return Err(ExtractError::ThroughSymlink {
                    path: path.to_owned(),
                    link: parts[..=i].join("/"),
                });
            }
        }
        Ok(current)
    }

    fn make_parent(&self, target: &Path) -> Result<(), ExtractError> {
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        Ok(())
    }

    fn remove_existing(target: &Path) -> Result<(), ExtractError> {
        match std::fs::symlink_metadata(target) {
            Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(target)?,
            Ok(_) => std::fs::remove_file(target)?,
            Err(_) => {}
        }
        Ok(())
    }
}

impl Sink for DirSink {
    fn directory(&mut self, path: &str) -> Result<(), ExtractError> {
        let target = self.target(path)?;
        if std::fs::symlink_metadata(&target).is_ok_and(|m| !m.is_dir()) {
            Self::remove_existing(&target)?;
        }
        std::fs::create_dir_all(&target)?;
        Ok(())
    }

    fn file(&mut self, path: &str, mode: u32, content: &mut dyn Read) -> Result<(), ExtractError> {
        let target = self.target(path)?;
        self.make_parent(&target)?;
        Self::remove_existing(&target)?;
        let mut file = std::fs::File::create(&target)?;
        io::copy(content, &mut file)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = if mode & 0o111 != 0 { 0o755 } else { 0o644 };
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(mode))?;
        }
        #[cfg(not(unix))]
        let _ = mode;
        Ok(())
    }

    fn symlink(&mut self, path: &str, target: &str) -> Result<(), ExtractError> {
        let at = self.target(path)?;
        self.make_parent(&at)?;
        Self::remove_existing(&at)?;
        #[cfg(unix)]
        std::os::unix::fs::symlink(target, &at)?;
        #[cfg(not(unix))]
        let _ = target;
        Ok(())
    }

    fn hardlink(&mut self, path: &str, target: &str) -> Result<(), ExtractError> {
        let source = self.target(target)?;
        let is_file = std::fs::symlink_metadata(&source).is_ok_and(|m| m.is_file());
        if !is_file {
            return Err(ExtractError::DanglingHardLink {
                path: path.to_owned(),
                target: target.to_owned(),
            });
        }
        let at = self.target(path)?;
        self.make_parent(&at)?;
        Self::remove_existing(&at)?;
        // A copy, not a link: later layers may change either independently.
        std::fs::copy(&source, &at)?;
        Ok(())
    }

    fn remove(&mut self, path: &str) -> Result<(), ExtractError> {
        let target = self.target(path)?;
        Self::remove_existing(&target)
    }

    fn clear_dir(&mut self, path: &str) -> Result<(), ExtractError> {
        let target = if path.is_empty() {
            self.root.clone()
        } else {
            self.target(path)?
        };
        if std::fs::symlink_metadata(&target).is_ok_and(|m| m.is_dir()) {
            for child in std::fs::read_dir(&target)? {
                Self::remove_existing(&child?.path())?;
            }
        }
        Ok(())
    }

    fn link_target(&self, path: &str) -> Option<String> {
        // `path` is made of components already known not to be links, so
        // only its last component could be followed here, and
        // `symlink_metadata` does not follow it.
        let at = self.root.join(path);
        let meta = std::fs::symlink_metadata(&at).ok()?;
        if !meta.file_type().is_symlink() {
            return None;
        }
        let target = std::fs::read_link(&at).ok()?;
        Some(target.to_string_lossy().into_owned())
    }

    fn links(&self) -> Result<Vec<String>, ExtractError> {
        // The whole tree, not only this layer's entries: links left by
        // earlier layers (or earlier extractions into the same root) can be
        // reached through the new ones.
        let mut links = Vec::new();
        let mut dirs = vec![String::new()];
        while let Some(dir) = dirs.pop() {
            for child in std::fs::read_dir(self.root.join(&dir))? {
                let child = child?;
                let name = child.file_name().to_string_lossy().into_owned();
                let rel = join(&dir, &name);
                let kind = child.file_type()?;
                if kind.is_symlink() {
                    links.push(rel);
                } else if kind.is_dir() {
                    dirs.push(rel);
                }
            }
        }
        links.sort();
        Ok(links)
    }
}

struct MemorySink<'t> {
    tree: &'t mut MemoryTree,
    /// This layer's symbolic links, by path, to their targets as written.
    links: BTreeMap<String, String>,
}

impl MemorySink<'_> {
    /// Replaces symbolic links to files by copies of the files; links to
    /// nothing (or to directories) are dropped.
    fn resolve_links(&mut self) {
        let links = std::mem::take(&mut self.links);
        let lookup = |p: &str| links.get(p).cloned();
        for path in links.keys() {
            // Links that cannot be resolved were refused by `verify_links`
            // already; skipping them here is only a second guard.
            let Ok(resolved) = resolve_link(path, &lookup) else {
                continue;
            };
            if let Some(bytes) = self.tree.get(&resolved.join("/")).cloned() {
                self.tree.insert(path.clone(), bytes);
            }
        }
    }

    fn remove_under(&mut self, path: &str) {
        let prefix = format!("{path}/");
        self.tree
            .retain(|k, _| k != path && !k.starts_with(&prefix));
        self.links
            .retain(|k, _| k != path && !k.starts_with(&prefix));
    }
}

impl Sink for MemorySink<'_> {
    fn directory(&mut self, _path: &str) -> Result<(), ExtractError> {
        Ok(())
    }

    fn file(&mut self, path: &str, _mode: u32, content: &mut dyn Read) -> Result<(), ExtractError> {
        let mut bytes = Vec::new();
        content.read_to_end(&mut bytes)?;
        self.links.remove(path);
        self.tree.insert(path.to_owned(), bytes);
        Ok(())
    }

    fn symlink(&mut self, path: &str, target: &str) -> Result<(), ExtractError> {
        self.tree.remove(path);
        self.links.insert(path.to_owned(), target.to_owned());
        Ok(())
    }

    fn hardlink(&mut self, path: &str, target: &str) -> Result<(), ExtractError> {
        let bytes =
            self.tree
                .get(target)
                .cloned()
                .ok_or_else(|| ExtractError::DanglingHardLink {
                    path: path.to_owned(),
                    target: target.to_owned(),
                })?;
        self.links.remove(path);
        self.tree.insert(path.to_owned(), bytes);
        Ok(())
    }

    fn remove(&mut self, path: &str) -> Result<(), ExtractError> {
        self.remove_under(path);
        Ok(())
    }

    fn clear_dir(&mut self, path: &str) -> Result<(), ExtractError> {
        if path.is_empty() {
            self.tree.clear();
            self.links.clear();
        } else {
            self.remove_under(path);
        }
        Ok(())
    }

    fn link_target(&self, path: &str) -> Option<String> {
        self.links.get(path).cloned()
    }

    fn links(&self) -> Result<Vec<String>, ExtractError> {
        Ok(self.links.keys().cloned().collect())
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    /// One entry of a test archive.
    enum E<'a> {
        File(&'a str, &'a [u8]),
        Dir(&'a str),
        Symlink(&'a str, &'a str),
        Hardlink(&'a str, &'a str),
        Fifo(&'a str),
    }

    fn tar_of(entries: &[E<'_>]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for entry in entries {
            let mut header = tar::Header::new_gnu();
            header.set_mode(0o644);
            match entry {
                E::File(path, content) => {
                    header.set_entry_type(tar::EntryType::Regular);
                    header.set_size(content.len() as u64);
                    // Raw path bytes: `append_data` would refuse `..`.
                    set_raw_path(&mut header, path);
                    header.set_cksum();
                    builder.append(&header, *content).unwrap();
                }
                E::Dir(path) => {
                    header.set_entry_type(tar::EntryType::Directory);
                    header.set_size(0);
                    set_raw_path(&mut header, path);
                    header.set_cksum();
                    builder.append(&header, std::io::empty()).unwrap();
                }
                E::Symlink(path, target) | E::Hardlink(path, target) => {
                    let kind = if matches!(entry, E::Symlink(..)) {
                        tar::EntryType::Symlink
                    } else {
                        tar::EntryType::Link
                    };
                    header.set_entry_type(kind);
                    header.set_size(0);
                    set_raw_path(&mut header, path);
                    let bytes = target.as_bytes();
                    header.as_old_mut().linkname[..bytes.len()].copy_from_slice(bytes);
                    header.set_cksum();
                    builder.append(&header, std::io::empty()).unwrap();
                }
                E::Fifo(path) => {
                    header.set_entry_type(tar::EntryType::Fifo);
                    header.set_size(0);
                    set_raw_path(&mut header, path);
                    header.set_cksum();
                    builder.append(&header, std::io::empty()).unwrap();
                }
            }
        }
        builder.into_inner().unwrap()
    }

    fn set_raw_path(header: &mut tar::Header, path: &str) {
        let name = &mut header.as_old_mut().name;
        name.fill(0);
        name[..path.len()].copy_from_slice(path.as_bytes());
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(bytes).unwrap();
        gz.finish().unwrap()
    }

    fn memory(layers: &[Vec<u8>], options: &ExtractOptions) -> Result<MemoryTree, ExtractError> {
        extract_layers_to_memory(layers.iter().map(|l| l.as_slice()), options)
    }

    fn bundle_layer() -> Vec<u8> {
        tar_of(&[
            E::Dir("manifests/"),
            E::File("manifests/csv.yaml", b"kind: ClusterServiceVersion"),
            E::File("./metadata/annotations.yaml", b"annotations: {}"),
            E::File("etc/passwd", b"root"),
        ])
    }

    #[test]
    fn extracts_plain_gzip_and_zstd_layers_alike() {
        let plain = bundle_layer();
        for layer in [plain.clone(), gzip(&plain)] {
            let tree = memory(&[layer], &ExtractOptions::default()).unwrap();
            assert_eq!(tree.len(), 3);
            assert_eq!(tree["metadata/annotations.yaml"], b"annotations: {}");
        }
        assert_eq!(
            Compression::detect(&[0x28, 0xb5, 0x2f, 0xfd, 0]),
            Compression::Zstd
        );
        assert_eq!(Compression::detect(&[0x1f, 0x8b]), Compression::Gzip);
        assert_eq!(Compression::detect(b"manifests/"), Compression::None);
    }

    #[test]
    fn zstd_layers_are_decoded() {
        // A zstd frame holding one raw block: the tar bytes stored verbatim.
        let plain = bundle_layer();
        let frame = zstd_raw_frame(&plain);
        let tree = memory(&[frame], &ExtractOptions::default()).unwrap();
        assert_eq!(tree["manifests/csv.yaml"], b"kind: ClusterServiceVersion");
    }

    /// A valid zstd frame made of raw (stored) blocks, so that tests need
    /// no zstd encoder.
    fn zstd_raw_frame(data: &[u8]) -> Vec<u8> {
        let mut out = vec![0x28, 0xb5, 0x2f, 0xfd];
        // Frame header descriptor: single segment, 8-byte content size.
        out.push(0b1110_0000);
        out.extend_from_slice(&(data.len() as u64).to_le_bytes());
        let chunks: Vec<&[u8]> = data.chunks(100_000).collect();
        for (i, chunk) in chunks.iter().enumerate() {
            let last = u32::from(i + 1 == chunks.len());
            let header = last | ((chunk.len() as u32) << 3);
            out.extend_from_slice(&header.to_le_bytes()[..3]);
            out.extend_from_slice(chunk);
        }
        out
    }

    #[test]
    fn prefix_filter_keeps_only_the_named_directories() {
        let options = ExtractOptions::only(&["manifests/", "metadata"]);
        let tree = memory(&[bundle_layer()], &options).unwrap();
        assert_eq!(
            tree.keys().collect::<Vec<_>>(),
            ["manifests/csv.yaml", "metadata/annotations.yaml"]
        );
        // A sibling sharing the prefix's spelling is not under it.
        let tree = memory(&[tar_of(&[E::File("manifests-evil/x", b"x")])], &options).unwrap();
        assert!(tree.is_empty());
    }

    #[test]
    fn refuses_path_traversal_and_absolute_paths() {
        for path in [
            "../escape",
            "manifests/../../escape",
            "/etc/passwd",
            "./../x",
        ] {
            let layer = tar_of(&[E::File(path, b"x")]);
            let error = memory(std::slice::from_ref(&layer), &ExtractOptions::default());
            assert!(
                matches!(error, Err(ExtractError::PathTraversal { .. })),
                "{path}: {error:?}"
            );
            let dir = tempfile::tempdir().unwrap();
            let error = extract_layers_to_dir(
                [layer.as_slice()],
                &dir.path().join("root"),
                &ExtractOptions::default(),
            );
            assert!(
                matches!(error, Err(ExtractError::PathTraversal { .. })),
                "{path}"
            );
            assert!(!dir.path().join("escape").exists());
        }
    }

    #[test]
    fn refuses_links_leaving_the_root() {
        for (path, target) in [
            ("manifests/l", "../../outside"),
            ("l", "/etc/passwd"),
            ("a/b/l", "../../../x"),
        ] {
            let layer = tar_of(&[E::Symlink(path, target)]);
            assert!(
                matches!(
                    memory(&[layer], &ExtractOptions::default()),
                    Err(ExtractError::LinkEscapes { .. })
                ),
                "{path} -> {target}"
            );
        }
        let layer = tar_of(&[E::Hardlink("x", "../../etc/passwd")]);
        assert!(matches!(
            memory(&[layer], &ExtractOptions::default()),
            Err(ExtractError::LinkEscapes { .. })
        ));
        let layer = tar_of(&[E::Hardlink("x", "missing")]);
        assert!(matches!(
            memory(&[layer], &ExtractOptions::default()),
            Err(ExtractError::DanglingHardLink { .. })
        ));
    }

    #[test]
    fn links_inside_the_root_are_kept() {
        let layer = tar_of(&[
            E::File("manifests/real.yaml", b"real"),
            E::Symlink("manifests/soft.yaml", "real.yaml"),
            E::Hardlink("manifests/hard.yaml", "manifests/real.yaml"),
        ]);
        let tree = memory(std::slice::from_ref(&layer), &ExtractOptions::default()).unwrap();
        assert_eq!(tree["manifests/soft.yaml"], b"real");
        assert_eq!(tree["manifests/hard.yaml"], b"real");
        let dir = tempfile::tempdir().unwrap();
        extract_layers_to_dir([layer.as_slice()], dir.path(), &ExtractOptions::default()).unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("manifests/soft.yaml")).unwrap(),
            b"real"
        );
        assert_eq!(
            std::fs::read(dir.path().join("manifests/hard.yaml")).unwrap(),
            b"real"
        );
    }

    /// Both sinks, for tests that hold for either.
    fn extract_both(layers: &[Vec<u8>]) -> (Result<MemoryTree, ExtractError>, ExtractInDir) {
        let memory = memory(layers, &ExtractOptions::default());
        let parent = tempfile::tempdir().unwrap();
        let root = parent.path().join("root");
        let result = extract_layers_to_dir(
            layers.iter().map(|l| l.as_slice()),
            &root,
            &ExtractOptions::default(),
        );
        (
            memory,
            ExtractInDir {
                _parent: parent,
                root,
                result,
            },
        )
    }

    struct ExtractInDir {
        _parent: tempfile::TempDir,
        root: PathBuf,
        result: Result<ExtractStats, ExtractError>,
    }

    #[test]
    fn chained_links_cannot_escape_the_root() {
        // Each link alone stays inside the root when read lexically; followed
        // through the others, the last one leaves it.
        // In memory, a layer's links become copies of their files once the
        // layer is applied, so a later layer cannot chain through them: the
        // cross-layer case yields no link there rather than an error.
        let cases: &[(&str, Vec<Vec<u8>>, &str)] = &[
            (
                "a link through an earlier link to ..",
                vec![tar_of(&[
                    E::Dir("x/"),
                    E::Symlink("x/sub", ".."),
                    E::Symlink("x/l", "sub/../.."),
                ])],
                "x/l",
            ),
            (
                "the link it goes through comes later",
                vec![tar_of(&[
                    E::Symlink("x/l", "sub/../.."),
                    E::Symlink("x/sub", ".."),
                ])],
                "x/l",
            ),
            (
                "the link it goes through comes in a later layer",
                vec![
                    tar_of(&[E::Symlink("x/l", "sub/../..")]),
                    tar_of(&[E::Symlink("x/sub", "..")]),
                ],
                "x/l",
            ),
            (
                "the same link twice on the way",
                vec![tar_of(&[
                    E::Dir("x/"),
                    E::Symlink("x/up", ".."),
                    E::Symlink("x/l", "up/x/up/.."),
                ])],
                "x/l",
            ),
        ];
        for (name, layers, escaping) in cases {
            let (in_memory, in_dir) = extract_both(layers);
            match in_memory {
                Err(ExtractError::LinkEscapes { .. }) => {}
                Ok(tree) if layers.len() > 1 => assert!(!tree.contains_key(*escaping), "{name}"),
                other => panic!("{name}: {other:?}"),
            }
            assert!(
                matches!(&in_dir.result, Err(ExtractError::LinkEscapes { path, .. }) if path == escaping),
                "{name}: {:?}",
                in_dir.result
            );
            // The escaping link is not left behind for a careless caller.
            assert!(
                std::fs::symlink_metadata(in_dir.root.join(escaping)).is_err(),
                "{name}: {escaping} is still there"
            );
        }
    }

    #[test]
    fn link_chains_longer_than_the_limit_are_refused() {
        let chain = |links: usize| {
            let names: Vec<String> = (0..=links).map(|i| format!("l{i}")).collect();
            let mut entries = vec![E::File("l0", b"end")];
            // l1 -> l0 (the file), l2 -> l1, ...: resolving the last link
            // follows `links` links, itself included.
            for pair in names.windows(2) {
                entries.push(E::Symlink(&pair[1], &pair[0]));
            }
            let layer = tar_of(&entries);
            (
                memory(std::slice::from_ref(&layer), &ExtractOptions::default()),
                {
                    let dir = tempfile::tempdir().unwrap();
                    let result = extract_layers_to_dir(
                        [layer.as_slice()],
                        dir.path(),
                        &ExtractOptions::default(),
                    );
                    result.map(|_| ())
                },
            )
        };
        let (in_memory, in_dir) = chain(MAX_SYMLINK_DEPTH);
        assert_eq!(in_memory.unwrap()[&format!("l{MAX_SYMLINK_DEPTH}")], b"end");
        in_dir.unwrap();
        let (in_memory, in_dir) = chain(MAX_SYMLINK_DEPTH + 1);
        for result in [in_memory.map(|_| ()), in_dir] {
            assert!(
                matches!(
                    result,
                    Err(ExtractError::LinkChainTooLong {
                        limit: MAX_SYMLINK_DEPTH,
                        ..
                    })
                ),
                "{result:?}"
            );
        }
        // A loop never ends: refused the same way.
        let (in_memory, in_dir) =
            extract_both(&[tar_of(&[E::Symlink("a", "b"), E::Symlink("b", "a")])]);
        assert!(matches!(
            in_memory,
            Err(ExtractError::LinkChainTooLong { .. })
        ));
        assert!(matches!(
            in_dir.result,
            Err(ExtractError::LinkChainTooLong { .. })
        ));
    }

    #[test]
    fn chained_links_inside_the_root_are_kept() {
        let layer = tar_of(&[
            E::File("real/f.yaml", b"real"),
            E::Symlink("d", "real"),
            E::Symlink("x/l", "../d/f.yaml"),
            E::Symlink("x/y/up", ".."),
            E::Symlink("x/y/m", "up/../d/./f.yaml"),
        ]);
        let (in_memory, in_dir) = extract_both(&[layer]);
        let tree = in_memory.unwrap();
        assert_eq!(tree["x/l"], b"real");
        assert_eq!(tree["x/y/m"], b"real");
        in_dir.result.unwrap();
        assert_eq!(std::fs::read(in_dir.root.join("x/l")).unwrap(), b"real");
        assert_eq!(std::fs::read(in_dir.root.join("x/y/m")).unwrap(), b"real");
    }

    #[test]
    fn links_resolve_like_the_kernel_would() {
        let tree: BTreeMap<String, String> = [
            ("x/sub", ".."),
            ("x/up", ".."),
            ("d", "real"),
            ("abs", "/etc"),
            ("loop", "loop"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let cases: &[(&str, &str, Result<&str, Unresolvable>)] = &[
            ("plain sibling", "real.yaml", Ok("m/real.yaml")),
            ("up and down", "../d/f", Ok("real/f")),
            ("through a link to the root", "../x/sub/d", Ok("real")),
            (
                "lexically inside, really outside",
                "../x/sub/../..",
                Err(Unresolvable::Escapes),
            ),
            ("straight out", "../..", Err(Unresolvable::Escapes)),
            (
                "through an absolute link",
                "../abs/passwd",
                Err(Unresolvable::Escapes),
            ),
            ("through a loop", "../loop/x", Err(Unresolvable::TooLong)),
            ("to the root itself", "..", Ok("")),
        ];
        for (name, target, want) in cases {
            let mut links = tree.clone();
            links.insert("m/l".to_owned(), (*target).to_owned());
            let lookup = |p: &str| links.get(p).cloned();
            let got = resolve_link("m/l", &lookup).map(|parts| parts.join("/"));
            assert_eq!(got, want.map(str::to_owned), "{name}");
        }
    }

    #[test]
    fn never_writes_through_a_symlink() {
        // `d` points inside the root, but a later entry under `d/` would
        // be written wherever the link leads: refused.
        let layer = tar_of(&[
            E::Dir("real/"),
            E::Symlink("d", "real"),
            E::File("d/x", b"x"),
        ]);
        let dir = tempfile::tempdir().unwrap();
        let error =
            extract_layers_to_dir([layer.as_slice()], dir.path(), &ExtractOptions::default());
        assert!(
            matches!(error, Err(ExtractError::ThroughSymlink { .. })),
            "{error:?}"
        );
    }

    #[test]
    fn whiteouts_delete_what_earlier_layers_wrote() {
        let base = tar_of(&[
            E::File("manifests/a.yaml", b"a"),
            E::File("manifests/b.yaml", b"b"),
            E::File("metadata/annotations.yaml", b"m"),
            E::File("metadata/old/x", b"x"),
        ]);
        let top = tar_of(&[
            E::File("manifests/.wh.a.yaml", b""),
            E::File("metadata/.wh..wh..opq", b""),
            E::File("metadata/annotations.yaml", b"new"),
        ]);
        let tree = memory(&[base.clone(), top.clone()], &ExtractOptions::default()).unwrap();
        assert_eq!(
            tree.keys().collect::<Vec<_>>(),
            ["manifests/b.yaml", "metadata/annotations.yaml"]
        );
        assert_eq!(tree["metadata/annotations.yaml"], b"new");
        let dir = tempfile::tempdir().unwrap();
        extract_layers_to_dir(
            [base.as_slice(), top.as_slice()],
            dir.path(),
            &ExtractOptions::default(),
        )
        .unwrap();
        assert!(!dir.path().join("manifests/a.yaml").exists());
        assert!(dir.path().join("manifests/b.yaml").exists());
        assert!(!dir.path().join("metadata/old").exists());
        assert!(!dir.path().join("metadata/.wh..wh..opq").exists());
        assert_eq!(
            std::fs::read(dir.path().join("metadata/annotations.yaml")).unwrap(),
            b"new"
        );
        // A whiteout cannot reach outside the root either.
        let evil = tar_of(&[E::File("a/.wh...", b"")]);
        assert!(memory(&[evil], &ExtractOptions::default()).is_err());
    }

    #[test]
    fn devices_and_fifos_are_skipped() {
        let tree = memory(
            &[tar_of(&[E::Fifo("fifo"), E::File("f", b"1")])],
            &ExtractOptions::default(),
        )
        .unwrap();
        assert_eq!(tree.keys().collect::<Vec<_>>(), ["f"]);
    }

    fn limits(f: impl FnOnce(&mut ExtractLimits)) -> ExtractOptions {
        let mut options = ExtractOptions::default();
        f(&mut options.limits);
        options
    }

    #[test]
    fn max_compressed_bytes_is_enforced() {
        let layer = gzip(&bundle_layer());
        let options = limits(|l| l.max_compressed_bytes = layer.len() as u64 - 1);
        assert!(matches!(
            memory(std::slice::from_ref(&layer), &options),
            Err(ExtractError::CompressedTooLarge { .. })
        ));
        let options = limits(|l| l.max_compressed_bytes = layer.len() as u64);
        assert!(memory(&[layer], &options).is_ok());
    }

    #[test]
    fn max_uncompressed_bytes_is_enforced_across_layers() {
        let layer = tar_of(&[E::File("f", &[b'x'; 4096])]);
        let options = limits(|l| l.max_uncompressed_bytes = layer.len() as u64 + 10);
        assert!(memory(std::slice::from_ref(&layer), &options).is_ok());
        let error = memory(&[layer.clone(), layer], &options);
        assert!(
            matches!(error, Err(ExtractError::UncompressedTooLarge { .. })),
            "{error:?}"
        );
    }

    #[test]
    fn max_entries_is_enforced() {
        let names: Vec<String> = (0..11).map(|i| format!("f{i}")).collect();
        let entries: Vec<E<'_>> = names.iter().map(|n| E::File(n, b"")).collect();
        let layer = tar_of(&entries);
        assert!(
            memory(
                std::slice::from_ref(&layer),
                &limits(|l| l.max_entries = 11)
            )
            .is_ok()
        );
        assert!(matches!(
            memory(&[layer], &limits(|l| l.max_entries = 10)),
            Err(ExtractError::TooManyEntries { limit: 10 })
        ));
    }

    #[test]
    fn decompression_bombs_are_refused_by_ratio() {
        // 64 MiB of zeros compress to about 64 KiB: a ratio near 1000.
        let zeros = vec![0u8; 64 * 1024 * 1024];
        let layer = gzip(&tar_of(&[E::File("bomb", &zeros)]));
        drop(zeros);
        let error = memory(std::slice::from_ref(&layer), &ExtractOptions::default());
        assert!(
            matches!(
                error,
                Err(ExtractError::CompressionRatio {
                    limit: DEFAULT_MAX_COMPRESSION_RATIO
                })
            ),
            "{error:?}"
        );
        let dir = tempfile::tempdir().unwrap();
        let error =
            extract_layers_to_dir([layer.as_slice()], dir.path(), &ExtractOptions::default());
        assert!(
            matches!(error, Err(ExtractError::CompressionRatio { .. })),
            "{error:?}"
        );
        // Small, highly compressible layers stay under the grace amount.
        let small = gzip(&tar_of(&[E::File("ok", &[0u8; 512 * 1024])]));
        assert!(memory(&[small], &ExtractOptions::default()).is_ok());
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for garbage in [
            vec![0x1f, 0x8b, 1, 2, 3],
            vec![0x28, 0xb5, 0x2f, 0xfd, 0xff, 0xff],
            b"not a tar at all, but long enough to fill a header block? no".to_vec(),
            vec![0xff; 1024],
        ] {
            let _ = memory(&[garbage], &ExtractOptions::default());
        }
        // An empty layer is an empty tree.
        assert!(
            memory(&[Vec::new()], &ExtractOptions::default())
                .unwrap()
                .is_empty()
        );
    }
}
