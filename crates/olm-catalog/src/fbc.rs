//! The file-based catalog (FBC) model and its loader: a directory tree of JSON
//! and YAML files holding `olm.package`, `olm.channel`, `olm.bundle` and
//! `olm.deprecations` documents, and documents of any other schema, which are
//! kept verbatim.
//!
//! Loading follows operator-registry's `declcfg.LoadFS`: every file in the
//! tree is read (whatever its extension) except `.indexignore` files and the
//! paths they exclude with `.gitignore` semantics (patterns are relative to
//! the directory holding the `.indexignore`; deeper files take precedence);
//! each file may hold several YAML documents or concatenated JSON values, and
//! formats may be mixed. Decoding and limits are described in
//! [`crate::document`]; reading is spread over threads, file by file, and the
//! result is in file order whatever the number of threads.
//!
//! Loading checks syntax and the types of the fields it reads, nothing more:
//! a loaded catalog can be invalid, and [`crate::validate`] says how. Unknown
//! fields are kept (as raw JSON) on every object so that writing the catalog
//! back ([`crate::render`]) loses nothing; property values stay raw JSON until
//! asked for (see [`crate::property`]).

use std::{
    ops::ControlFlow,
    path::Path,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
};

use serde_json::value::RawValue;

use crate::{
    document::{
        DocumentError, DocumentErrorKind, Fields, Found, ObjectFields, RawDocument, decode_text,
        for_each_document,
    },
    files::{
        Budget, FileError, FoundFile, canonical_root, list_files, normalize_relative_path,
        read_file,
    },
    go_json,
    graph::{self, ChannelEntry, GraphError},
    limits::{Limits, MAX_NESTING_DEPTH},
    location::Origin,
    property::{
        self, BundleObject, Nesting, PackageProperty, Property, PropertyError, PropertyValue,
    },
    semver::{Version, VersionError},
};

/// `olm.package`.
pub const SCHEMA_PACKAGE: &str = "olm.package";
/// `olm.channel`.
pub const SCHEMA_CHANNEL: &str = "olm.channel";
/// `olm.bundle`.
pub const SCHEMA_BUNDLE: &str = "olm.bundle";
/// `olm.deprecations`.
pub const SCHEMA_DEPRECATIONS: &str = "olm.deprecations";

/// The name of the files that exclude paths from a catalog.
pub const INDEX_IGNORE_FILE: &str = ".indexignore";

/// Unknown fields of an object, in document order, as raw JSON. Equality
/// ignores whitespace outside strings.
#[derive(Debug, Clone, Default)]
pub struct ExtraFields(pub Vec<(String, Box<RawValue>)>);

impl PartialEq for ExtraFields {
    fn eq(&self, other: &Self) -> bool {
        self.0.len() == other.0.len()
            && self
                .0
                .iter()
                .zip(&other.0)
                .all(|((ka, va), (kb, vb))| ka == kb && property::json_text_eq(va.get(), vb.get()))
    }
}

impl std::ops::Deref for ExtraFields {
    type Target = Vec<(String, Box<RawValue>)>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for ExtraFields {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

/// A whole catalog: every document of every file, grouped by schema, in the
/// order read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Catalog {
    /// `olm.package` documents.
    pub packages: Vec<Package>,
    /// `olm.channel` documents.
    pub channels: Vec<Channel>,
    /// `olm.bundle` documents.
    pub bundles: Vec<Bundle>,
    /// `olm.deprecations` documents.
    pub deprecations: Vec<Deprecation>,
    /// Documents of any other schema, verbatim.
    pub others: Vec<Meta>,
    /// What was tolerated while loading (see [`LoadWarning`]).
    pub warnings: Vec<LoadWarning>,
    /// Whether the values of `olm.bundle.object` and `olm.csv.metadata`
    /// properties were left out while loading (see
    /// [`LoadOptions::drop_payloads`]); they then read as `null`.
    pub payloads_dropped: bool,
    /// The payloads left out that do not decode, in the order read.
    pub payload_problems: Vec<PayloadProblem>,
    /// Where the payloads left out lie, by file, when asked for (see
    /// [`LoadOptions::payload_spans`]).
    pub payload_spans: std::collections::BTreeMap<Arc<str>, FileSpans>,
}

/// Something tolerated while loading, as upstream tolerates it, recorded so
/// that [`crate::validate`] can report it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadWarning {
    /// A key appeared more than once in one mapping; the last value was kept.
    DuplicateKey {
        /// The document, and the object holding the key when known.
        location: crate::location::Location,
        /// The repeated key.
        key: String,
    },
}

impl std::fmt::Display for LoadWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::DuplicateKey { location, key } => {
                write!(
                    f,
                    "{location}: duplicate key {key:?}, the last value is used"
                )
            }
        }
    }
}

/// An `olm.package` document.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Package {
    /// The package name.
    pub name: String,
    /// The channel subscriptions use when they name none; empty when unset.
    pub default_channel: String,
    /// The package's icon.
    pub icon: Option<Icon>,
    /// A description of the package.
    pub description: String,
    /// Package properties.
    pub properties: Vec<Property>,
    /// Unknown fields.
    pub extra: ExtraFields,
    /// Where it was read.
    pub origin: Origin,
}

/// A package icon.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Icon {
    /// The image, base64-encoded (upstream decodes it; [`crate::validate`]
    /// checks it).
    pub base64data: String,
    /// The media type, for example `image/svg+xml`.
    pub mediatype: String,
    /// Unknown fields.
    pub extra: Vec<(String, String)>,
}

/// An `olm.channel` document.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Channel {
    /// The channel name.
    pub name: String,
    /// The package it belongs to.
    pub package: String,
    /// The update graph entries, in document order.
    pub entries: Vec<ChannelEntry>,
    /// Unknown fields of entries, by entry index (sparse; almost always empty).
    pub entry_extras: Vec<(usize, ExtraFields)>,
    /// Channel properties.
    pub properties: Vec<Property>,
    /// Unknown fields.
    pub extra: ExtraFields,
    /// Where it was read.
    pub origin: Origin,
}

/// An `olm.bundle` document.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Bundle {
    /// The bundle name (the CSV name).
    pub name: String,
    /// The package it belongs to.
    pub package: String,
    /// The bundle image reference.
    pub image: String,
    /// Bundle properties (package, APIs, dependencies, CSV data…).
    pub properties: Vec<Property>,
    /// Images the bundle uses.
    pub related_images: Vec<RelatedImage>,
    /// Unknown fields.
    pub extra: ExtraFields,
    /// Where it was read.
    pub origin: Origin,
}

/// An image a bundle uses.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RelatedImage {
    /// The image's role, may be empty.
    pub name: String,
    /// The image reference.
    pub image: String,
    /// Unknown fields.
    pub extra: ExtraFields,
}

/// An `olm.deprecations` document.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Deprecation {
    /// The package whose parts are deprecated.
    pub package: String,
    /// What is deprecated, and why.
    pub entries: Vec<DeprecationEntry>,
    /// Unknown fields.
    pub extra: ExtraFields,
    /// Where it was read.
    pub origin: Origin,
}

/// One deprecated package, channel or bundle.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeprecationEntry {
    /// The schema of what is deprecated: `olm.package`, `olm.channel` or
    /// `olm.bundle`.
    pub schema: String,
    /// The channel or bundle name; empty for the package.
    pub name: String,
    /// The message shown to users.
    pub message: String,
    /// Unknown fields of the entry (beside `reference` and `message`).
    pub extra: ExtraFields,
    /// Unknown fields of the `reference`.
    pub reference_extra: ExtraFields,
}

/// A document of a schema this crate does not model, kept verbatim.
#[derive(Debug, Clone)]
pub struct Meta {
    /// Its `schema`.
    pub schema: String,
    /// Its `package`, if any (empty otherwise).
    pub package: String,
    /// Its `name`, if any (empty otherwise).
    pub name: String,
    /// The whole document as JSON, exactly as read.
    pub blob: Box<RawValue>,
    /// Where it was read.
    pub origin: Origin,
}

impl PartialEq for Meta {
    fn eq(&self, other: &Self) -> bool {
        self.schema == other.schema
            && self.package == other.package
            && self.name == other.name
            && property::json_text_eq(self.blob.get(), other.blob.get())
            && self.origin == other.origin
    }
}

/// Why a catalog could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A file could not be listed or read.
    #[error(transparent)]
    Files(#[from] FileError),
    /// A file or document could not be decoded.
    #[error(transparent)]
    Document(#[from] DocumentError),
    /// A `.indexignore` pattern is invalid.
    #[error("{path}: invalid pattern {pattern:?}: {message}")]
    IndexIgnore {
        /// The `.indexignore` file.
        path: String,
        /// The pattern.
        pattern: String,
        /// What is wrong with it.
        message: String,
    },
}

/// How to load a catalog.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// Bounds on the input.
    pub limits: Limits,
    /// Threads decoding files; 0 means one per available CPU.
    pub threads: usize,
    /// Leave out the values of `olm.bundle.object` and `olm.csv.metadata`
    /// properties (they read as `null`), which are most of a catalog's
    /// bytes. A server can index such a catalog in a fraction of the memory
    /// and read a bundle's payload again when asked, with
    /// [`Catalog::load_document`] and the bundle's [`Origin`]. Each value is
    /// checked before it is left out, and why it does not decode is kept in
    /// [`Catalog::payload_problems`], so validation loses nothing.
    pub drop_payloads: bool,
    /// With `drop_payloads`, which of the values left out are checked first.
    pub payload_checks: PayloadChecks,
    /// With `drop_payloads`, record where in its file each value left out
    /// lies ([`Catalog::payload_spans`]), so that it can be read back alone.
    pub payload_spans: bool,
}

/// Which payload values a load that leaves them out checks first (see
/// [`LoadOptions::drop_payloads`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PayloadChecks {
    /// Every value, as validation requires.
    #[default]
    Every,
    /// `olm.bundle.object` values only, which upstream's loader refuses
    /// the whole catalog for (`opm render` reads the rest again).
    BundleObjects,
    /// None: [`Catalog::payload_problems`] stays empty.
    None,
}

impl LoadOptions {
    fn payloads(&self) -> Payloads {
        if self.drop_payloads {
            Payloads::Drop {
                checks: self.payload_checks,
                spans: self.payload_spans,
            }
        } else {
            Payloads::Keep
        }
    }
}

/// What a load does with payload property values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Payloads {
    Keep,
    /// Left out, after the checks named, noting where each lies when
    /// `spans`.
    Drop {
        checks: PayloadChecks,
        spans: bool,
    },
}

impl Payloads {
    /// Whether the value of a payload property of type `type_` is checked
    /// before it is left out.
    fn checks(self, type_: &str) -> bool {
        match self {
            Self::Keep => false,
            Self::Drop { checks, .. } => match checks {
                PayloadChecks::Every => true,
                PayloadChecks::BundleObjects => type_ == property::BUNDLE_OBJECT,
                PayloadChecks::None => false,
            },
        }
    }
}

/// Where the payload values left out of one file's bundles lie in the file
/// (see [`LoadOptions::payload_spans`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileSpans {
    /// The file's length in bytes when it was read.
    pub file_bytes: usize,
    /// One per value left out, in document order and, within a document,
    /// in property order.
    pub spans: Vec<PayloadSpan>,
    /// Whether some value left out has no span, because its document was
    /// converted from YAML rather than read as it is written: such a file
    /// must be read again whole.
    pub incomplete: bool,
}

/// Where one payload value left out at load lies in its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PayloadSpan {
    /// The document's index in the file.
    pub document: usize,
    /// The property's index in the document's `properties`.
    pub property: usize,
    /// The value's byte offset in the file.
    pub offset: usize,
    /// Its length in bytes.
    pub len: usize,
    /// The CRC-32 of those bytes, so that a file changed since it was read
    /// is noticed.
    pub crc: u32,
}

impl PayloadSpan {
    /// The value in `file` (the whole file, as read again), if the file
    /// still holds it there.
    pub fn value_in<'a>(&self, file: &'a [u8]) -> Option<&'a str> {
        let bytes = file.get(self.offset..self.offset.checked_add(self.len)?)?;
        if crc32fast::hash(bytes) != self.crc {
            return None;
        }
        std::str::from_utf8(bytes).ok()
    }
}

/// A payload property left out at load (see [`LoadOptions::drop_payloads`])
/// that does not decode: what validation would have said of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PayloadProblem {
    /// The document holding the property.
    pub origin: Origin,
    /// The property's index in the document's `properties`.
    pub property: usize,
    /// The property's type (`olm.bundle.object` or `olm.csv.metadata`).
    pub type_: String,
    /// Why it does not decode.
    pub error: String,
}

impl Catalog {
    /// Loads the catalog in the directory tree at `root` with default options.
    pub fn load_dir(root: impl AsRef<Path>) -> Result<Self, LoadError> {
        Self::load_dir_with(root, &LoadOptions::default())
    }

    /// Loads the catalog in the directory tree at `root`.
    pub fn load_dir_with(root: impl AsRef<Path>, options: &LoadOptions) -> Result<Self, LoadError> {
        let wanted = wanted_files(root.as_ref(), &options.limits)?;
        let limits = &options.limits;
        parse_in_parallel(&wanted, options.threads, |file| {
            // The budget above has counted the file; read it within the
            // per-file limit only.
            let mut unlimited = Budget::new(limits);
            let bytes = read_file(file, &mut unlimited).map_err(LoadError::from)?;
            parse_file(&file.relative, &bytes, limits, options.payloads())
        })
    }

    /// The bytes of the files a load of the catalog directory at `root`
    /// reads ([`Catalog::load_dir_with`] with `limits`: `.indexignore`
    /// applied, within the limits), as they are listed, without reading
    /// them.
    ///
    /// # Errors
    ///
    /// As the load's listing fails.
    pub fn bytes_in_dir(root: impl AsRef<Path>, limits: &Limits) -> Result<u64, LoadError> {
        Ok(wanted_files(root.as_ref(), limits)?
            .iter()
            .map(|f| f.size)
            .sum())
    }

    /// Loads a catalog from in-memory files, given as (relative path, contents)
    /// pairs, for example the entries of an image layer.
    pub fn load_files<P, B>(
        files: impl IntoIterator<Item = (P, B)>,
        options: &LoadOptions,
    ) -> Result<Self, LoadError>
    where
        P: AsRef<str>,
        B: AsRef<[u8]> + Sync,
    {
        let mut budget = Budget::new(&options.limits);
        let mut named: Vec<(String, B)> = Vec::new();
        for (path, bytes) in files {
            let path = normalize_relative_path(path.as_ref())?;
            budget.charge(&path, bytes.as_ref().len() as u64)?;
            named.push((path, bytes));
        }
        named.sort_by(|a, b| a.0.cmp(&b.0));
        if let Some(w) = named.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(FileError::DuplicatePath {
                path: w[0].0.clone(),
            }
            .into());
        }
        let mut ignore = IndexIgnore::default();
        for (path, bytes) in named.iter().filter(|(p, _)| is_index_ignore(p)) {
            ignore.add(path, bytes.as_ref())?;
        }
        let wanted: Vec<&(String, B)> = named
            .iter()
            .filter(|(p, _)| !is_index_ignore(p) && !ignore.is_ignored(p))
            .collect();
        parse_in_parallel(&wanted, options.threads, |(path, bytes)| {
            parse_file(path, bytes.as_ref(), &options.limits, options.payloads())
        })
    }

    /// Loads the documents of one file (named `file` in locations).
    pub fn load_file(file: &str, bytes: &[u8], limits: &Limits) -> Result<Self, LoadError> {
        parse_file(file, bytes, limits, Payloads::Keep)
    }

    /// Reads again the one document at `origin` (as recorded by a load of the
    /// catalog rooted at `root`), payloads included; the result's origins are
    /// `origin`. The file is read within the per-file limit and must still
    /// hold the document at the same place.
    pub fn load_document(
        root: impl AsRef<Path>,
        origin: &Origin,
        limits: &Limits,
    ) -> Result<Self, LoadError> {
        let (relative, bytes) = read_file_in(root.as_ref(), &origin.file, limits)?;
        let slice = bytes
            .get(origin.offset..origin.offset.saturating_add(origin.len))
            .filter(|_| origin.len > 0)
            .ok_or_else(|| FileError::Io {
                path: relative.clone(),
                source: std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the document is no longer there",
                ),
            })?;
        let mut catalog = parse_file(&relative, slice, limits, Payloads::Keep)?;
        let origins = catalog
            .packages
            .iter_mut()
            .map(|p| &mut p.origin)
            .chain(catalog.channels.iter_mut().map(|c| &mut c.origin))
            .chain(catalog.bundles.iter_mut().map(|b| &mut b.origin))
            .chain(catalog.deprecations.iter_mut().map(|d| &mut d.origin))
            .chain(catalog.others.iter_mut().map(|m| &mut m.origin));
        for o in origins {
            *o = origin.clone();
        }
        Ok(catalog)
    }

    /// The bytes of the one file `file` (relative, as origins name it) of
    /// the catalog rooted at `root`, read within the per-file limit.
    pub fn file_bytes_in(
        root: impl AsRef<Path>,
        file: &str,
        limits: &Limits,
    ) -> Result<Vec<u8>, LoadError> {
        read_file_in(root.as_ref(), file, limits).map(|(_, bytes)| bytes)
    }

    /// Loads again the one file `file` (relative, as origins name it) of the
    /// catalog rooted at `root`, payloads included, within the per-file
    /// limit: origins are the file's own, as a load of the whole catalog
    /// records them.
    pub fn load_file_in(
        root: impl AsRef<Path>,
        file: &str,
        limits: &Limits,
    ) -> Result<Self, LoadError> {
        let (relative, bytes) = read_file_in(root.as_ref(), file, limits)?;
        parse_file(&relative, &bytes, limits, Payloads::Keep)
    }

    /// Appends the documents of `other`.
    pub fn merge(&mut self, other: Catalog) {
        self.packages.extend(other.packages);
        self.channels.extend(other.channels);
        self.bundles.extend(other.bundles);
        self.deprecations.extend(other.deprecations);
        self.others.extend(other.others);
        self.warnings.extend(other.warnings);
        self.payloads_dropped |= other.payloads_dropped;
        self.payload_problems.extend(other.payload_problems);
        self.payload_spans.extend(other.payload_spans);
    }

    /// Resets every origin, so that catalogs read from different places can
    /// be compared.
    pub fn clear_origins(&mut self) {
        let origins = self
            .packages
            .iter_mut()
            .map(|p| &mut p.origin)
            .chain(self.channels.iter_mut().map(|c| &mut c.origin))
            .chain(self.bundles.iter_mut().map(|b| &mut b.origin))
            .chain(self.deprecations.iter_mut().map(|d| &mut d.origin))
            .chain(self.others.iter_mut().map(|m| &mut m.origin));
        for origin in origins {
            *origin = Origin::default();
        }
    }

    /// The total number of channel entries.
    pub fn channel_entry_count(&self) -> usize {
        self.channels.iter().map(|c| c.entries.len()).sum()
    }
}

fn is_index_ignore(path: &str) -> bool {
    path.rsplit('/').next() == Some(INDEX_IGNORE_FILE)
}

/// Parses `items` on up to `threads` threads and merges the results in item
/// order.
fn parse_in_parallel<T: Sync>(
    items: &[T],
    threads: usize,
    parse: impl Fn(&T) -> Result<Catalog, LoadError> + Sync,
) -> Result<Catalog, LoadError> {
    let threads = match threads {
        0 => std::thread::available_parallelism().map_or(1, usize::from),
        n => n,
    }
    .clamp(1, items.len().max(1));
    if threads == 1 {
        let mut catalog = Catalog::default();
        for item in items {
            catalog.merge(parse(item)?);
        }
        return Ok(catalog);
    }
    let next = AtomicUsize::new(0);
    let results: Vec<Mutex<Option<Result<Catalog, LoadError>>>> =
        items.iter().map(|_| Mutex::new(None)).collect();
    let failed = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= items.len() || failed.load(Ordering::Relaxed) {
                        break;
                    }
                    let result = parse(&items[i]);
                    if result.is_err() {
                        failed.store(true, Ordering::Relaxed);
                    }
                    if let Ok(mut slot) = results[i].lock() {
                        *slot = Some(result);
                    }
                }
            });
        }
    });
    let mut catalog = Catalog::default();
    for slot in results {
        let result = slot
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match result {
            Some(Ok(part)) => catalog.merge(part),
            Some(Err(err)) => return Err(err),
            // Not parsed because another file failed first; that failure is
            // reported when its slot comes.
            None => {}
        }
    }
    Ok(catalog)
}

/// The files under `root` a load reads: every file but the `.indexignore`
/// files and what they ignore, their sizes counted against the limits.
fn wanted_files(root: &Path, limits: &Limits) -> Result<Vec<FoundFile>, LoadError> {
    let canonical = canonical_root(root)?;
    let mut found = Vec::new();
    list_files(&canonical, &canonical, "", true, &mut found)?;
    let mut budget = Budget::new(limits);
    let mut ignore = IndexIgnore::default();
    for file in found.iter().filter(|f| is_index_ignore(&f.relative)) {
        let bytes = read_file(file, &mut budget)?;
        ignore.add(&file.relative, &bytes)?;
    }
    let wanted: Vec<FoundFile> = found
        .into_iter()
        .filter(|f| !is_index_ignore(&f.relative) && !ignore.is_ignored(&f.relative))
        .collect();
    for file in &wanted {
        budget.charge(&file.relative, file.size)?;
    }
    Ok(wanted)
}

/// The `.indexignore` files of a catalog, as gitignore matchers.
#[derive(Default)]
struct IndexIgnore {
    /// (directory relative to the root, "" for the root; matcher), deepest
    /// directories last.
    matchers: Vec<(String, ignore::gitignore::Gitignore)>,
}

impl IndexIgnore {
    fn add(&mut self, path: &str, bytes: &[u8]) -> Result<(), LoadError> {
        let dir = path.rsplit_once('/').map_or("", |(dir, _)| dir).to_owned();
        let text = String::from_utf8_lossy(bytes);
        let mut builder = ignore::gitignore::GitignoreBuilder::new("");
        for line in text.lines() {
            // Upstream trims every line and skips comments and blank lines.
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            builder
                .add_line(None, line)
                .map_err(|e| LoadError::IndexIgnore {
                    path: path.to_owned(),
                    pattern: line.to_owned(),
                    message: e.to_string(),
                })?;
        }
        let matcher = builder.build().map_err(|e| LoadError::IndexIgnore {
            path: path.to_owned(),
            pattern: String::new(),
            message: e.to_string(),
        })?;
        self.matchers.push((dir, matcher));
        self.matchers.sort_by_key(|(dir, _)| {
            if dir.is_empty() {
                0
            } else {
                dir.matches('/').count() + 1
            }
        });
        Ok(())
    }

    fn is_ignored(&self, path: &str) -> bool {
        for (dir, matcher) in self.matchers.iter().rev() {
            let relative = if dir.is_empty() {
                path
            } else {
                match path
                    .strip_prefix(dir.as_str())
                    .and_then(|p| p.strip_prefix('/'))
                {
                    Some(relative) => relative,
                    None => continue,
                }
            };
            let matched = matcher.matched_path_or_any_parents(relative, false);
            if matched.is_ignore() {
                return true;
            }
            if matched.is_whitelist() {
                return false;
            }
        }
        false
    }
}

/// Parses the documents of one file.
/// Reads the file `file` (relative to `root`) within the per-file limit,
/// refusing a path that leaves the root, directly or through a symlink.
fn read_file_in(root: &Path, file: &str, limits: &Limits) -> Result<(String, Vec<u8>), LoadError> {
    let relative = normalize_relative_path(file)?;
    let canonical = canonical_root(root)?;
    let path = canonical.join(&relative);
    let resolved = std::fs::canonicalize(&path).map_err(|source| FileError::Io {
        path: relative.clone(),
        source,
    })?;
    if !resolved.starts_with(&canonical) {
        return Err(FileError::SymlinkEscapes {
            path: relative,
            target: resolved.display().to_string(),
        }
        .into());
    }
    let size = std::fs::metadata(&resolved)
        .map_err(|source| FileError::Io {
            path: relative.clone(),
            source,
        })?
        .len();
    let found = FoundFile {
        relative: relative.clone(),
        path: resolved,
        size,
    };
    let bytes = read_file(&found, &mut Budget::new(limits))?;
    Ok((relative, bytes))
}

fn parse_file(
    file: &str,
    bytes: &[u8],
    limits: &Limits,
    payloads: Payloads,
) -> Result<Catalog, LoadError> {
    let file: Arc<str> = Arc::from(file);
    let text = decode_text(&file, bytes, limits)?;
    let mut catalog = Catalog {
        payloads_dropped: payloads != Payloads::Keep,
        ..Catalog::default()
    };
    let mut spans = matches!(payloads, Payloads::Drop { spans: true, .. }).then(|| SpanNotes {
        file: bytes.as_ptr_range(),
        spans: FileSpans {
            file_bytes: bytes.len(),
            ..FileSpans::default()
        },
    });
    for_each_document::<LoadError>(&file, text, limits, |doc| {
        add_document(&mut catalog, doc, limits, payloads, spans.as_mut())?;
        Ok(ControlFlow::Continue(()))
    })?;
    if let Some(notes) = spans {
        catalog.payload_spans.insert(file, notes.spans);
    }
    Ok(catalog)
}

/// Attaches a location to a decoding failure.
/// The location is built only on failure: a load reads every field of every
/// document through one of these.
fn at<'a>(
    origin: &'a Origin,
    field: Option<&'a str>,
) -> impl Fn(DocumentErrorKind) -> DocumentError + 'a {
    move |kind| {
        let location = match field {
            Some(field) => origin.field(field),
            None => origin.location(),
        };
        DocumentError::new(location, kind)
    }
}

/// [`at`] a field whose path is built, on failure only, by `path`.
fn at_with<'a>(
    origin: &'a Origin,
    path: impl Fn() -> String + 'a,
) -> impl Fn(DocumentErrorKind) -> DocumentError + 'a {
    move |kind| DocumentError::new(origin.field(path()), kind)
}

fn invalid(message: impl Into<String>) -> DocumentErrorKind {
    DocumentErrorKind::InvalidField {
        message: message.into(),
    }
}

/// Notes where the payload values left out of one file lie.
struct SpanNotes {
    /// The file's bytes, as read.
    file: std::ops::Range<*const u8>,
    spans: FileSpans,
}

impl SpanNotes {
    /// Notes a value left out, at its place in the file when it is a slice
    /// of the file's bytes (documents read as written; not those converted
    /// from YAML).
    fn note(&mut self, document: usize, property: usize, value: &RawValue) {
        let bytes = value.get().as_bytes();
        let within = self.file.start <= bytes.as_ptr()
            && bytes.as_ptr_range().end <= self.file.end
            && !bytes.is_empty();
        if !within {
            self.spans.incomplete = true;
            return;
        }
        self.spans.spans.push(PayloadSpan {
            document,
            property,
            offset: bytes.as_ptr() as usize - self.file.start as usize,
            len: bytes.len(),
            crc: crc32fast::hash(bytes),
        });
    }
}

/// Notes repeated keys found while reading one document.
struct Notes<'o> {
    origin: &'o Origin,
    warnings: Vec<LoadWarning>,
    /// What is done with payload property values.
    payloads: Payloads,
    /// Payloads left out that do not decode.
    payload_problems: Vec<PayloadProblem>,
    /// Where payloads left out lie, when that is noted.
    spans: Option<&'o mut SpanNotes>,
    /// What the document's nesting check says of its values.
    nesting: Nesting,
}

impl Notes<'_> {
    fn duplicates(&mut self, path: Option<&str>, keys: Vec<String>) {
        for key in keys {
            self.warnings.push(LoadWarning::DuplicateKey {
                location: match path {
                    Some(path) => self.origin.field(path),
                    None => self.origin.location(),
                },
                key,
            });
        }
    }

    /// The fields not taken, noting repeated keys.
    fn rest(&mut self, fields: Fields<'_>, path: Option<&str>) -> ExtraFields {
        let (rest, duplicates) = fields.into_rest();
        self.duplicates(path, duplicates);
        ExtraFields(rest)
    }

    /// [`Notes::rest`] of an object at a path built only if a key repeats.
    fn rest_in(&mut self, fields: Fields<'_>, path: impl Fn() -> String) -> ExtraFields {
        let (rest, duplicates) = fields.into_rest();
        if !duplicates.is_empty() {
            self.duplicates(Some(&path()), duplicates);
        }
        ExtraFields(rest)
    }
}

fn add_document(
    catalog: &mut Catalog,
    doc: RawDocument<'_>,
    limits: &Limits,
    payloads: Payloads,
    spans: Option<&mut SpanNotes>,
) -> Result<(), DocumentError> {
    let origin = doc.origin;
    let mut notes = Notes {
        origin: &origin,
        warnings: Vec::new(),
        payloads,
        payload_problems: Vec::new(),
        spans,
        // Every document has been checked against the limit.
        nesting: if limits.max_nesting_depth <= MAX_NESTING_DEPTH {
            Nesting::Within
        } else {
            Nesting::Unchecked
        },
    };
    notes.duplicates(None, doc.duplicate_keys);
    let fields = match doc.fields {
        Some(found) => Fields::from_found(found),
        None => Fields::parse(&doc.json),
    };
    let result = fields
        .map_err(at(&origin, None))
        .and_then(|fields| add_fields(catalog, &origin, &doc.json, fields, &mut notes));
    catalog.warnings.extend(notes.warnings);
    catalog.payload_problems.extend(notes.payload_problems);
    result
}

fn add_fields(
    catalog: &mut Catalog,
    origin: &Origin,
    json: &str,
    mut fields: Fields<'_>,
    notes: &mut Notes<'_>,
) -> Result<(), DocumentError> {
    let origin = origin.clone();
    let schema = fields
        .take_string("schema")
        .map_err(at(&origin, Some("schema")))?;
    match schema.as_deref() {
        None | Some("") => Err(at(&origin, Some("schema"))(
            DocumentErrorKind::MissingSchema,
        )),
        Some(SCHEMA_PACKAGE) => {
            catalog.packages.push(read_package(fields, origin, notes)?);
            Ok(())
        }
        Some(SCHEMA_CHANNEL) => {
            catalog.channels.push(read_channel(fields, origin, notes)?);
            Ok(())
        }
        Some(SCHEMA_BUNDLE) => {
            catalog.bundles.push(read_bundle(fields, origin, notes)?);
            Ok(())
        }
        Some(SCHEMA_DEPRECATIONS) => {
            catalog
                .deprecations
                .push(read_deprecation(fields, origin, notes)?);
            Ok(())
        }
        Some(other) => {
            let package = fields
                .take_string("package")
                .map_err(at(&origin, Some("package")))?;
            let name = fields
                .take_string("name")
                .map_err(at(&origin, Some("name")))?;
            notes.rest(fields, None);
            let blob = RawValue::from_string(json.to_owned())
                .map_err(|e| at(&origin, None)(invalid(e.to_string())))?;
            catalog.others.push(Meta {
                schema: other.to_owned(),
                package: package.unwrap_or_default(),
                name: name.unwrap_or_default(),
                blob,
                origin,
            });
            Ok(())
        }
    }
}

fn take_string(
    fields: &mut Fields<'_>,
    origin: &Origin,
    name: &str,
) -> Result<String, DocumentError> {
    Ok(fields
        .take_string(name)
        .map_err(at(origin, Some(name)))?
        .unwrap_or_default())
}

/// Takes field `name` as an array (absent or `null`: none) whose items are
/// read as objects' fields (or what each is instead), in one pass over the
/// array.
fn take_objects<'a>(
    fields: &mut Fields<'a>,
    origin: &Origin,
    name: &str,
) -> Result<Vec<Found<'a>>, DocumentError> {
    match fields.take(name).map_err(at(origin, Some(name)))? {
        None => Ok(Vec::new()),
        Some(raw) => serde_json::from_str::<Option<Vec<ObjectFields<'a>>>>(raw.get())
            .map(|items| items.unwrap_or_default().into_iter().map(|o| o.0).collect())
            .map_err(|_| at(origin, Some(name))(invalid("expected an array"))),
    }
}

/// Whether a payload property's value decodes as validation requires
/// ([`check_bundle_object`]; an `olm.csv.metadata` must parse, or be null,
/// which upstream reads as empty).
fn check_payload(type_: &str, value: &RawValue, nesting: Nesting) -> Result<(), String> {
    if type_ == property::BUNDLE_OBJECT {
        return check_bundle_object(value);
    }
    if value.get() == "null" {
        return Ok(());
    }
    property::parse_value(type_, value.get(), nesting)
        .map(drop)
        .map_err(|e| e.to_string())
}

/// Why a payload property's value (`olm.bundle.object` or
/// `olm.csv.metadata`) does not decode as upstream's loader needs it to, for
/// readers that keep it as it is written, as `opm serve` does: the check
/// [`LoadOptions::drop_payloads`] makes.
///
/// # Errors
///
/// Why it does not decode.
pub fn check_payload_value(type_: &str, value: &RawValue) -> Result<(), String> {
    check_payload(type_, value, Nesting::Unchecked)
}

/// Decodes one `olm.bundle.object` value as upstream's loader does (base64,
/// then YAML or JSON), without building more than it must.
pub(crate) fn check_bundle_object(value: &RawValue) -> Result<(), String> {
    #[derive(serde::Deserialize)]
    struct Data<'a> {
        #[serde(borrow)]
        data: std::borrow::Cow<'a, str>,
    }
    let data = match serde_json::from_str::<Data<'_>>(value.get()) {
        Ok(d) => d.data.into_owned(),
        Err(_) => {
            let property = Property {
                type_: property::BUNDLE_OBJECT.to_owned(),
                value: value.to_owned(),
                extra: Vec::new(),
            };
            match property.parse() {
                Ok(property::PropertyValue::BundleObject(object)) => object.data,
                Ok(_) => return Ok(()),
                Err(err) => return Err(err.to_string()),
            }
        }
    };
    let bytes = crate::go_json::decode_base64(&data).map_err(|e| format!("invalid base64: {e}"))?;
    let looks_like_json = bytes
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|b| *b == b'{');
    if looks_like_json && serde_json::from_slice::<serde::de::IgnoredAny>(&bytes).is_ok() {
        return Ok(());
    }
    manifest_to_json(&bytes, &crate::limits::Limits::default()).map(drop)
}

/// Reads the `properties` of a document. Those of a bundle (`of_bundle`)
/// are the ones whose payloads a load may leave out: a payload type on a
/// package or channel is kept, as its readers take it from there.
fn read_properties(
    fields: &mut Fields<'_>,
    origin: &Origin,
    notes: &mut Notes<'_>,
    of_bundle: bool,
) -> Result<Vec<Property>, DocumentError> {
    let items = take_objects(fields, origin, "properties")?;
    let mut properties = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let path = || format!("properties[{i}]");
        let mut f = Fields::from_found(item).map_err(at_with(origin, path))?;
        let type_ = f
            .take_string("type")
            .map_err(at_with(origin, || format!("{}.type", path())))?
            .unwrap_or_default();
        let value = f
            .take("value")
            .map_err(at_with(origin, || format!("{}.value", path())))?
            .ok_or_else(|| {
                at_with(origin, || format!("{}.value", path()))(invalid("property has no value"))
            })?;
        let payload = property::is_payload(&type_);
        let value = if notes.payloads != Payloads::Keep && payload && of_bundle {
            if let Some(spans) = notes.spans.as_deref_mut() {
                spans.note(origin.document, i, value);
            }
            if notes.payloads.checks(&type_)
                && let Err(error) = check_payload(&type_, value, notes.nesting)
            {
                notes.payload_problems.push(PayloadProblem {
                    origin: notes.origin.clone(),
                    property: i,
                    type_: type_.clone(),
                    error,
                });
            }
            Box::<RawValue>::default()
        } else {
            value.to_owned()
        };
        let extra = notes.rest_in(f, path).0;
        properties.push(Property {
            type_,
            value,
            extra,
        });
    }
    Ok(properties)
}

fn read_package(
    mut fields: Fields<'_>,
    origin: Origin,
    notes: &mut Notes<'_>,
) -> Result<Package, DocumentError> {
    let name = take_string(&mut fields, &origin, "name")?;
    let default_channel = take_string(&mut fields, &origin, "defaultChannel")?;
    let description = take_string(&mut fields, &origin, "description")?;
    let icon = match fields.take("icon").map_err(at(&origin, Some("icon")))? {
        None => None,
        Some(raw) if raw.get() == "null" => None,
        Some(raw) => {
            let mut f = Fields::parse(raw.get()).map_err(at(&origin, Some("icon")))?;
            let base64data = f
                .take_string("base64data")
                .map_err(at(&origin, Some("icon.base64data")))?
                .unwrap_or_default();
            let mediatype = f
                .take_string("mediatype")
                .map_err(at(&origin, Some("icon.mediatype")))?
                .unwrap_or_default();
            let extra = notes
                .rest(f, Some("icon"))
                .0
                .into_iter()
                .map(|(k, v)| (k, v.get().to_owned()))
                .collect();
            Some(Icon {
                base64data,
                mediatype,
                extra,
            })
        }
    };
    let properties = read_properties(&mut fields, &origin, notes, false)?;
    Ok(Package {
        name,
        default_channel,
        icon,
        description,
        properties,
        extra: notes.rest(fields, None),
        origin,
    })
}

fn read_channel(
    mut fields: Fields<'_>,
    origin: Origin,
    notes: &mut Notes<'_>,
) -> Result<Channel, DocumentError> {
    let name = take_string(&mut fields, &origin, "name")?;
    let package = take_string(&mut fields, &origin, "package")?;
    let items = take_objects(&mut fields, &origin, "entries")?;
    let mut entries = Vec::with_capacity(items.len());
    let mut entry_extras = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        let path = || format!("entries[{i}]");
        let mut f = Fields::from_found(item).map_err(at_with(&origin, path))?;
        let field = |name: &str| format!("{}.{name}", path());
        let name = f
            .take_string("name")
            .map_err(at_with(&origin, || field("name")))?
            .unwrap_or_default();
        let replaces = f
            .take_string("replaces")
            .map_err(at_with(&origin, || field("replaces")))?
            .filter(|r| !r.is_empty());
        let skips = f
            .take_parsed::<Option<Vec<String>>>("skips")
            .map_err(at_with(&origin, || field("skips")))?
            .flatten()
            .unwrap_or_default();
        let skip_range = f
            .take_string("skipRange")
            .map_err(at_with(&origin, || field("skipRange")))?
            .filter(|r| !r.is_empty());
        let extra = notes.rest_in(f, path);
        if !extra.is_empty() {
            entry_extras.push((i, extra));
        }
        entries.push(ChannelEntry {
            name,
            replaces,
            skips,
            skip_range,
        });
    }
    let properties = read_properties(&mut fields, &origin, notes, false)?;
    Ok(Channel {
        name,
        package,
        entries,
        entry_extras,
        properties,
        extra: notes.rest(fields, None),
        origin,
    })
}

fn read_bundle(
    mut fields: Fields<'_>,
    origin: Origin,
    notes: &mut Notes<'_>,
) -> Result<Bundle, DocumentError> {
    let name = take_string(&mut fields, &origin, "name")?;
    let package = take_string(&mut fields, &origin, "package")?;
    let image = take_string(&mut fields, &origin, "image")?;
    let properties = read_properties(&mut fields, &origin, notes, true)?;
    let items = take_objects(&mut fields, &origin, "relatedImages")?;
    let mut related_images = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let path = || format!("relatedImages[{i}]");
        let mut f = Fields::from_found(item).map_err(at_with(&origin, path))?;
        let name = f
            .take_string("name")
            .map_err(at_with(&origin, || format!("{}.name", path())))?
            .unwrap_or_default();
        let image = f
            .take_string("image")
            .map_err(at_with(&origin, || format!("{}.image", path())))?
            .unwrap_or_default();
        let extra = notes.rest_in(f, path);
        related_images.push(RelatedImage { name, image, extra });
    }
    Ok(Bundle {
        name,
        package,
        image,
        properties,
        related_images,
        extra: notes.rest(fields, None),
        origin,
    })
}

fn read_deprecation(
    mut fields: Fields<'_>,
    origin: Origin,
    notes: &mut Notes<'_>,
) -> Result<Deprecation, DocumentError> {
    let package = take_string(&mut fields, &origin, "package")?;
    let items = take_objects(&mut fields, &origin, "entries")?;
    let mut entries = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let path = || format!("entries[{i}]");
        let mut f = Fields::from_found(item).map_err(at_with(&origin, path))?;
        let message = f
            .take_string("message")
            .map_err(at_with(&origin, || format!("{}.message", path())))?
            .unwrap_or_default();
        let reference_path = || format!("{}.reference", path());
        let (schema, name, reference_extra) = match f
            .take("reference")
            .map_err(at_with(&origin, reference_path))?
        {
            None => (String::new(), String::new(), ExtraFields::default()),
            Some(raw) if raw.get() == "null" => {
                (String::new(), String::new(), ExtraFields::default())
            }
            Some(raw) => {
                let mut r = Fields::parse(raw.get()).map_err(at_with(&origin, reference_path))?;
                let schema = r
                    .take_string("schema")
                    .map_err(at_with(&origin, || format!("{}.schema", reference_path())))?
                    .unwrap_or_default();
                let name = r
                    .take_string("name")
                    .map_err(at_with(&origin, || format!("{}.name", reference_path())))?
                    .unwrap_or_default();
                let extra = notes.rest_in(r, reference_path);
                (schema, name, extra)
            }
        };
        let extra = notes.rest_in(f, path);
        entries.push(DeprecationEntry {
            schema,
            name,
            message,
            extra,
            reference_extra,
        });
    }
    Ok(Deprecation {
        package,
        entries,
        extra: notes.rest(fields, None),
        origin,
    })
}

impl Channel {
    /// The channel head (see [`graph::channel_head`]).
    pub fn head(&self) -> Result<&ChannelEntry, GraphError> {
        graph::channel_head(&self.entries)
    }

    /// The unknown fields of entry `index`, if any.
    pub fn entry_extra(&self, index: usize) -> Option<&ExtraFields> {
        self.entry_extras
            .iter()
            .find(|(i, _)| *i == index)
            .map(|(_, extra)| extra)
    }
}

/// Why a bundle's version could not be determined.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BundleVersionError {
    /// The bundle has no `olm.package` property.
    #[error("bundle {bundle:?} has no olm.package property")]
    Missing {
        /// The bundle.
        bundle: String,
    },
    /// The bundle has more than one `olm.package` property.
    #[error("bundle {bundle:?} has {count} olm.package properties")]
    Several {
        /// The bundle.
        bundle: String,
        /// How many.
        count: usize,
    },
    /// The property does not decode.
    #[error("bundle {bundle:?}: {source}")]
    Property {
        /// The bundle.
        bundle: String,
        /// Why.
        #[source]
        source: PropertyError,
    },
    /// The version is not strict semver.
    #[error("bundle {bundle:?}: invalid version {version:?}: {source}")]
    Version {
        /// The bundle.
        bundle: String,
        /// The version as written.
        version: String,
        /// Why.
        #[source]
        source: VersionError,
    },
}

impl Bundle {
    /// The bundle's single `olm.package` property.
    pub fn package_property(&self) -> Result<PackageProperty, BundleVersionError> {
        let mut found = None;
        let mut count = 0;
        for p in self
            .properties
            .iter()
            .filter(|p| p.type_ == property::PACKAGE)
        {
            count += 1;
            if found.is_none() {
                found = Some(p);
            }
        }
        let p = match (found, count) {
            (None, _) => {
                return Err(BundleVersionError::Missing {
                    bundle: self.name.clone(),
                });
            }
            (Some(p), 1) => p,
            (Some(_), count) => {
                return Err(BundleVersionError::Several {
                    bundle: self.name.clone(),
                    count,
                });
            }
        };
        match p.parse() {
            Ok(PropertyValue::Package(package)) => Ok(package),
            // `parse` decodes every olm.package value as a package.
            Ok(_) => Err(BundleVersionError::Missing {
                bundle: self.name.clone(),
            }),
            Err(source) => Err(BundleVersionError::Property {
                bundle: self.name.clone(),
                source,
            }),
        }
    }

    /// The bundle's version, from its `olm.package` property, parsed strictly
    /// as upstream's model does.
    pub fn version(&self) -> Result<Version, BundleVersionError> {
        let package = self.package_property()?;
        Version::parse(&package.version).map_err(|source| BundleVersionError::Version {
            bundle: self.name.clone(),
            version: package.version.clone(),
            source,
        })
    }

    /// The properties of one type.
    pub fn properties_of<'a>(&'a self, type_: &'a str) -> impl Iterator<Item = &'a Property> + 'a {
        self.properties.iter().filter(move |p| p.type_ == type_)
    }

    /// Each `olm.bundle.object` of the bundle that does not decode as
    /// upstream's loader reads it (base64, then YAML or JSON): its property
    /// index and why.
    pub fn undecodable_objects(&self) -> impl Iterator<Item = (usize, String)> + '_ {
        self.properties
            .iter()
            .enumerate()
            .filter(|(_, p)| p.type_ == property::BUNDLE_OBJECT)
            .filter_map(|(i, p)| check_bundle_object(&p.value).err().map(|e| (i, e)))
    }

    /// The bundle's manifests from its `olm.bundle.object` properties, as JSON
    /// strings (YAML manifests converted), in property order: what the
    /// registry API serves as `object`.
    pub fn objects(&self) -> Result<Vec<String>, String> {
        let limits = Limits::default();
        let mut objects = Vec::new();
        for (i, p) in self.properties.iter().enumerate() {
            if p.type_ != property::BUNDLE_OBJECT {
                continue;
            }
            let object: BundleObject = match p.parse() {
                Ok(PropertyValue::BundleObject(object)) => object,
                Ok(_) => continue,
                Err(err) => return Err(format!("properties[{i}]: {err}")),
            };
            let bytes = object
                .decode()
                .map_err(|e| format!("properties[{i}]: invalid base64: {e}"))?;
            objects.push(
                manifest_to_json(&bytes, &limits).map_err(|e| format!("properties[{i}]: {e}"))?,
            );
        }
        Ok(objects)
    }

    /// The CSV among [`Bundle::objects`], if any: what the registry API serves
    /// as `csvJson`.
    pub fn csv_json(&self) -> Result<Option<String>, String> {
        Ok(self.objects()?.into_iter().find(|o| {
            serde_json::from_str::<KindOnly>(o).is_ok_and(|k| k.kind == "ClusterServiceVersion")
        }))
    }
}

impl Catalog {
    /// Rewrites the catalog's JSON as upstream's loader leaves it, so that
    /// writing it back ([`crate::render`]) gives `opm render`'s bytes.
    ///
    /// Upstream decodes every document into a Go `map[string]interface{}`
    /// and encodes it again (with HTML escaping off) before decoding it into
    /// its types, so property values, unknown fields and documents of other
    /// schemas come out of `opm render` re-encoded, not as written: keys
    /// sorted, strings decoded and escaped Go's way, numbers as `float64`
    /// (see [`go_json::reencode`]). Fields read into strings need nothing
    /// here; the writer escapes them. The icon, a `[]byte` upstream, is
    /// decoded from base64 and encoded again, which drops the line breaks a
    /// YAML block scalar leaves; base64 Go cannot decode is an error, as it
    /// is upstream's.
    pub fn reencode_like_go(&mut self, limits: &Limits) -> Result<(), LoadError> {
        let depth = limits.max_nesting_depth;
        let fail = |origin: &Origin, field: Option<String>, message: String| {
            let location = match field {
                Some(field) => origin.field(field),
                None => origin.location(),
            };
            LoadError::from(DocumentError::new(location, invalid(message)))
        };
        let reencode = |raw: &mut Box<RawValue>| -> Result<(), String> {
            let text = go_json::reencode(raw.get(), false, depth).map_err(|e| e.to_string())?;
            *raw = RawValue::from_string(text).map_err(|e| e.to_string())?;
            Ok(())
        };
        let extras = |extra: &mut ExtraFields, origin: &Origin, path: &str| {
            for (key, value) in extra.iter_mut() {
                reencode(value).map_err(|m| fail(origin, Some(join(path, key)), m))?;
            }
            Ok::<_, LoadError>(())
        };
        let properties = |properties: &mut [Property], origin: &Origin| {
            for (i, p) in properties.iter_mut().enumerate() {
                let path = format!("properties[{i}]");
                reencode(&mut p.value)
                    .map_err(|m| fail(origin, Some(format!("{path}.value")), m))?;
                for (key, value) in &mut p.extra {
                    reencode(value).map_err(|m| fail(origin, Some(join(&path, key)), m))?;
                }
            }
            Ok::<_, LoadError>(())
        };
        for p in &mut self.packages {
            if let Some(icon) = &mut p.icon {
                icon.base64data = go_json::reencode_base64(&icon.base64data)
                    .map_err(|e| fail(&p.origin, Some("icon.base64data".into()), e.to_string()))?;
                for (key, value) in &mut icon.extra {
                    *value = go_json::reencode(value, false, depth)
                        .map_err(|e| fail(&p.origin, Some(join("icon", key)), e.to_string()))?;
                }
            }
            properties(&mut p.properties, &p.origin)?;
            extras(&mut p.extra, &p.origin, "")?;
        }
        for c in &mut self.channels {
            for (i, extra) in &mut c.entry_extras {
                extras(extra, &c.origin, &format!("entries[{i}]"))?;
            }
            properties(&mut c.properties, &c.origin)?;
            extras(&mut c.extra, &c.origin, "")?;
        }
        for b in &mut self.bundles {
            properties(&mut b.properties, &b.origin)?;
            for (i, r) in b.related_images.iter_mut().enumerate() {
                extras(&mut r.extra, &b.origin, &format!("relatedImages[{i}]"))?;
            }
            extras(&mut b.extra, &b.origin, "")?;
        }
        for d in &mut self.deprecations {
            for (i, e) in d.entries.iter_mut().enumerate() {
                let path = format!("entries[{i}]");
                extras(&mut e.extra, &d.origin, &path)?;
                extras(&mut e.reference_extra, &d.origin, &join(&path, "reference"))?;
            }
            extras(&mut d.extra, &d.origin, "")?;
        }
        for m in &mut self.others {
            reencode(&mut m.blob).map_err(|message| fail(&m.origin, None, message))?;
        }
        Ok(())
    }
}

/// `path.key`, or `key` at the top.
fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

#[derive(serde::Deserialize)]
struct KindOnly {
    #[serde(default)]
    kind: String,
}

/// Converts a manifest (JSON or YAML, first document) to compact JSON, as
/// upstream's `yaml.ToJSON` does for bundle objects.
pub(crate) fn manifest_to_json(bytes: &[u8], limits: &Limits) -> Result<String, String> {
    let file: Arc<str> = Arc::from("");
    let text = decode_text(&file, bytes, limits).map_err(|e| e.kind.to_string())?;
    let mut out = None;
    for_each_document::<DocumentError>(&file, text, limits, |doc| {
        out = Some(doc.json.into_owned());
        Ok(ControlFlow::Break(()))
    })
    .map_err(|e| e.kind.to_string())?;
    out.ok_or_else(|| "empty manifest".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = r#"---
schema: olm.package
name: foo
defaultChannel: stable
icon:
  base64data: PHN2Zy8+
  mediatype: image/svg+xml
---
schema: olm.channel
package: foo
name: stable
entries:
  - name: foo.v0.2.0
    replaces: foo.v0.1.0
    skips: [foo.v0.1.1]
    skipRange: <0.2.0
  - name: foo.v0.1.0
    weight: 3
---
schema: olm.bundle
name: foo.v0.2.0
package: foo
image: quay.io/example/foo-bundle:v0.2.0
properties:
  - type: olm.package
    value: {packageName: foo, version: 0.2.0}
  - type: olm.gvk
    value: {group: example.com, kind: Foo, version: v1}
relatedImages:
  - name: operator
    image: quay.io/example/foo:v0.2.0
---
schema: olm.deprecations
package: foo
entries:
  - reference: {schema: olm.bundle, name: foo.v0.1.0}
    message: use 0.2.0
---
schema: vendor.example.custom
package: foo
name: extra
payload: {a: [1, 2]}
"#;

    fn small() -> Catalog {
        Catalog::load_file("foo/catalog.yaml", SMALL.as_bytes(), &Limits::default()).unwrap()
    }

    #[test]
    fn every_schema_is_modelled() {
        let c = small();
        assert_eq!(c.packages.len(), 1);
        assert_eq!(c.packages[0].default_channel, "stable");
        assert_eq!(
            c.packages[0].icon.as_ref().unwrap().mediatype,
            "image/svg+xml"
        );
        assert_eq!(c.channels[0].entries.len(), 2);
        assert_eq!(c.channels[0].entries[0].skips, ["foo.v0.1.1"]);
        assert_eq!(
            c.channels[0].entries[0].skip_range.as_deref(),
            Some("<0.2.0")
        );
        assert_eq!(c.channels[0].entry_extra(1).unwrap()[0].0, "weight");
        assert_eq!(c.channels[0].head().unwrap().name, "foo.v0.2.0");
        assert_eq!(c.bundles[0].version().unwrap(), Version::new(0, 2, 0));
        assert_eq!(c.bundles[0].related_images[0].name, "operator");
        assert_eq!(c.deprecations[0].entries[0].schema, "olm.bundle");
        assert_eq!(c.others[0].schema, "vendor.example.custom");
        assert_eq!(c.others[0].name, "extra");
        assert_eq!(c.others[0].origin.document, 4);
        assert_eq!(c.others[0].origin.line, 39);
    }

    #[test]
    fn mixed_formats_in_one_tree() {
        let files = vec![
            ("a/catalog.json", br#"{"schema":"olm.package","name":"a","defaultChannel":"s"}{"schema":"olm.channel","package":"a","name":"s","entries":[{"name":"a.v1"}]}"#.to_vec()),
            ("b/catalog.yaml", b"schema: olm.package\nname: b\n".to_vec()),
        ];
        let c = Catalog::load_files(files, &LoadOptions::default()).unwrap();
        assert_eq!(
            c.packages
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert_eq!(c.channels[0].origin.file.as_ref(), "a/catalog.json");
        assert_eq!(c.channels[0].origin.document, 1);
    }

    #[test]
    fn missing_schema_is_an_error() {
        let err = Catalog::load_file("x.yaml", b"name: foo\n", &Limits::default()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "x.yaml, document index 0 (line 1), field schema: object is missing root schema field"
        );
    }

    #[test]
    fn every_field_read_from_a_list_is_named_when_it_is_wrong() {
        let cases: [(&str, &str); 10] = [
            (
                r#"{"schema":"olm.bundle","properties":[{"type":"t","value":1},7]}"#,
                "properties[1]",
            ),
            (
                r#"{"schema":"olm.bundle","properties":[{"type":7,"value":1}]}"#,
                "properties[0].type",
            ),
            (
                r#"{"schema":"olm.bundle","properties":[{"type":"t"}]}"#,
                "properties[0].value",
            ),
            (
                r#"{"schema":"olm.bundle","relatedImages":[{"name":7}]}"#,
                "relatedImages[0].name",
            ),
            (
                r#"{"schema":"olm.bundle","relatedImages":[{},{"image":[]}]}"#,
                "relatedImages[1].image",
            ),
            (
                r#"{"schema":"olm.channel","entries":[{"name":"a"},{"replaces":1}]}"#,
                "entries[1].replaces",
            ),
            (
                r#"{"schema":"olm.channel","entries":[{"skipRange":{}}]}"#,
                "entries[0].skipRange",
            ),
            (
                r#"{"schema":"olm.deprecations","entries":[{"message":1}]}"#,
                "entries[0].message",
            ),
            (
                r#"{"schema":"olm.deprecations","entries":[{"reference":{"schema":1}}]}"#,
                "entries[0].reference.schema",
            ),
            (
                r#"{"schema":"olm.deprecations","entries":[{},{"reference":{"name":true}}]}"#,
                "entries[1].reference.name",
            ),
        ];
        for (json, field) in cases {
            let err =
                Catalog::load_file("c.json", json.as_bytes(), &Limits::default()).expect_err(json);
            let LoadError::Document(err) = err else {
                panic!("{json}: {err}")
            };
            assert_eq!(err.location.field.as_deref(), Some(field), "{json}");
        }
    }

    #[test]
    fn wrong_field_types_name_the_field() {
        let err = Catalog::load_file(
            "c.yaml",
            b"schema: olm.channel\nname: s\npackage: p\nentries:\n- name: a\n  skips: a\n",
            &Limits::default(),
        )
        .unwrap_err();
        let LoadError::Document(err) = err else {
            panic!()
        };
        assert_eq!(err.location.field.as_deref(), Some("entries[0].skips"));
        let err = Catalog::load_file(
            "c.json",
            br#"{"schema":"olm.bundle","properties":[{"type":"olm.gvk"}]}"#,
            &Limits::default(),
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("field properties[0].value: property has no value"),
            "{err}"
        );
        let err = Catalog::load_file("c.json", br#"{"schema":5}"#, &Limits::default()).unwrap_err();
        assert!(err.to_string().contains("field schema"), "{err}");
    }

    #[test]
    fn case_variants_of_field_names_are_read() {
        let c = Catalog::load_file(
            "c.yaml",
            b"Schema: olm.package\nName: foo\nDefaultChannel: s\n",
            &Limits::default(),
        )
        .unwrap();
        assert_eq!(c.packages[0].name, "foo");
        assert_eq!(c.packages[0].default_channel, "s");
        assert!(c.packages[0].extra.is_empty());
    }

    #[test]
    fn index_ignore_follows_gitignore_semantics() {
        let files = vec![
            (
                ".indexignore",
                b"# comment\n  *.md\nignored/\n!keep.md\n".to_vec(),
            ),
            ("README.md", b"# not yaml: [\n".to_vec()),
            ("keep.md", b"schema: olm.package\nname: kept\n".to_vec()),
            ("ignored/x.yaml", b"garbage: [\n".to_vec()),
            ("pkg/.indexignore", b"/local.yaml\n".to_vec()),
            ("pkg/local.yaml", b"garbage: [\n".to_vec()),
            (
                "pkg/sub/local.yaml",
                b"schema: olm.package\nname: deep\n".to_vec(),
            ),
            (
                "pkg/catalog.yaml",
                b"schema: olm.package\nname: pkg\n".to_vec(),
            ),
        ];
        let c = Catalog::load_files(files, &LoadOptions::default()).unwrap();
        let names: Vec<&str> = c.packages.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["kept", "pkg", "deep"]);
    }

    #[test]
    fn in_memory_paths_are_checked() {
        let err = Catalog::load_files([("../x.yaml", b"".to_vec())], &LoadOptions::default())
            .unwrap_err();
        assert!(
            matches!(err, LoadError::Files(FileError::UnsafePath { .. })),
            "{err}"
        );
        let err = Catalog::load_files(
            [("a.yaml", b"".to_vec()), ("./a.yaml", b"".to_vec())],
            &LoadOptions::default(),
        )
        .unwrap_err();
        assert!(
            matches!(err, LoadError::Files(FileError::DuplicatePath { .. })),
            "{err}"
        );
    }

    #[test]
    fn parallel_and_serial_loads_agree() {
        let files: Vec<(String, Vec<u8>)> = (0..40)
            .map(|i| {
                (
                    format!("p{i:02}/catalog.yaml"),
                    format!("schema: olm.package\nname: p{i:02}\n").into_bytes(),
                )
            })
            .collect();
        let serial = Catalog::load_files(
            files.clone(),
            &LoadOptions {
                threads: 1,
                ..LoadOptions::default()
            },
        )
        .unwrap();
        let parallel = Catalog::load_files(
            files,
            &LoadOptions {
                threads: 4,
                ..LoadOptions::default()
            },
        )
        .unwrap();
        assert_eq!(serial, parallel);
        assert_eq!(serial.packages[39].name, "p39");
    }

    #[test]
    fn the_first_failing_file_is_reported() {
        let mut files: Vec<(String, Vec<u8>)> = (0..20)
            .map(|i| (format!("p{i:02}.yaml"), b"schema: olm.package\n".to_vec()))
            .collect();
        files[7].1 = b"bad: [\n".to_vec();
        files[15].1 = b"bad: [\n".to_vec();
        let err = Catalog::load_files(
            files,
            &LoadOptions {
                threads: 3,
                ..LoadOptions::default()
            },
        )
        .unwrap_err();
        assert!(err.to_string().starts_with("p07.yaml"), "{err}");
    }

    #[test]
    fn the_bytes_of_a_directory_are_those_a_load_reads() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("foo")).unwrap();
        std::fs::write(dir.path().join("foo/catalog.yaml"), SMALL).unwrap();
        std::fs::write(dir.path().join("foo/notes.md"), "x".repeat(1000)).unwrap();
        std::fs::write(dir.path().join(".indexignore"), "*.md\n").unwrap();
        let bytes = Catalog::bytes_in_dir(dir.path(), &Limits::default()).unwrap();
        assert_eq!(bytes, SMALL.len() as u64);
        assert!(Catalog::load_dir(dir.path()).is_ok());
    }

    #[test]
    fn payloads_dropped_unchecked_are_left_out_unread() {
        let text = format!(
            "{SMALL}---\nschema: olm.bundle\nname: foo.v0.1.0\npackage: foo\nimage: i\nproperties:\n- {{type: olm.package, value: {{packageName: foo, version: 0.1.0}}}}\n- {{type: olm.bundle.object, value: {{data: '!!'}}}}\n- {{type: olm.csv.metadata, value: {{displayName: 7}}}}\n"
        );
        let load = |payload_checks| {
            let options = LoadOptions {
                drop_payloads: true,
                payload_checks,
                ..LoadOptions::default()
            };
            Catalog::load_files([("foo/catalog.yaml", text.as_bytes())], &options).unwrap()
        };
        let kinds = |catalog: &Catalog| -> Vec<String> {
            catalog
                .payload_problems
                .iter()
                .map(|p| p.type_.clone())
                .collect()
        };
        assert_eq!(
            kinds(&load(PayloadChecks::Every)),
            [property::BUNDLE_OBJECT, property::CSV_METADATA]
        );
        assert_eq!(
            kinds(&load(PayloadChecks::BundleObjects)),
            [property::BUNDLE_OBJECT]
        );
        let unchecked = load(PayloadChecks::None);
        assert!(unchecked.payloads_dropped);
        assert!(unchecked.payload_problems.is_empty());
        let values: Vec<&str> = unchecked
            .bundles
            .last()
            .unwrap()
            .properties
            .iter()
            .map(|p| p.value.get())
            .collect();
        assert_eq!(values[1..], ["null", "null"]);
    }

    #[test]
    fn payloads_left_out_of_json_are_found_again_by_their_spans() {
        let object = BundleObject::encode(b"{\"kind\":\"ConfigMap\"}").data;
        // A package may carry a payload type too: it is not a bundle's, so
        // it is kept.
        let json = format!(
            r#"{{"schema":"olm.package","name":"foo","properties":[{{"type":"olm.csv.metadata","value":{{"a":1}}}}]}}
{{"schema": "olm.bundle", "name": "foo.v1", "package": "foo", "image": "i",
  "properties": [
    {{"type": "olm.package", "value": {{"packageName": "foo", "version": "1.0.0"}}}},
    {{"type": "olm.bundle.object", "value": {{"data": "{object}"}}}},
    {{"type": "olm.csv.metadata", "value": {{ "displayName": "\u00e9 <x>" }} }}
  ]}}
"#
        );
        let yaml = "schema: olm.bundle\nname: bar.v1\npackage: bar\nimage: i\nproperties:\n- {type: olm.csv.metadata, value: {displayName: y}}\n";
        let files = [
            ("foo/catalog.json", json.as_str()),
            ("bar/catalog.yaml", yaml),
        ];
        let options = LoadOptions {
            drop_payloads: true,
            payload_spans: true,
            ..LoadOptions::default()
        };
        let lean = Catalog::load_files(files.map(|(p, t)| (p, t.as_bytes())), &options).unwrap();
        let whole = Catalog::load_files(
            files.map(|(p, t)| (p, t.as_bytes())),
            &LoadOptions::default(),
        )
        .unwrap();
        assert_eq!(lean.packages[0].properties, whole.packages[0].properties);

        let spans = &lean.payload_spans["foo/catalog.json"];
        assert_eq!(spans.file_bytes, json.len());
        assert!(!spans.incomplete);
        let found: Vec<(usize, usize, &str)> = spans
            .spans
            .iter()
            .map(|s| (s.document, s.property, s.value_in(json.as_bytes()).unwrap()))
            .collect();
        let bundle = whole.bundles.iter().find(|b| b.name == "foo.v1").unwrap();
        assert_eq!(
            found,
            [
                (1, 1, bundle.properties[1].value.get()),
                (1, 2, bundle.properties[2].value.get()),
            ]
        );
        // Converted from YAML: no span, and the file says so.
        let yaml_spans = &lean.payload_spans["bar/catalog.yaml"];
        assert!(yaml_spans.incomplete && yaml_spans.spans.is_empty());

        // A value that is no longer there, or no longer the same, is not
        // given back.
        let span = spans.spans[1];
        assert!(span.value_in(&json.as_bytes()[..span.offset + 3]).is_none());
        let mut changed = json.clone().into_bytes();
        changed[span.offset + 5] ^= 1;
        assert!(span.value_in(&changed).is_none());
        // Offsets count from the file's first byte, a byte order mark
        // included.
        let marked = format!("\u{feff}{json}");
        let lean =
            Catalog::load_files([("foo/catalog.json", marked.as_bytes())], &options).unwrap();
        let spans = &lean.payload_spans["foo/catalog.json"];
        let values: Vec<&str> = spans
            .spans
            .iter()
            .map(|s| s.value_in(marked.as_bytes()).unwrap())
            .collect();
        assert_eq!(
            values,
            [
                bundle.properties[1].value.get(),
                bundle.properties[2].value.get()
            ]
        );
        // Without asking, none are noted.
        let unnoted = Catalog::load_files(
            files.map(|(p, t)| (p, t.as_bytes())),
            &LoadOptions {
                drop_payloads: true,
                ..LoadOptions::default()
            },
        )
        .unwrap();
        assert!(unnoted.payload_spans.is_empty());
    }

    #[test]
    fn payloads_can_be_dropped_and_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let object = BundleObject::encode(b"{\"kind\":\"ConfigMap\"}").data;
        let text = format!(
            "{SMALL}---\nschema: olm.bundle\nname: foo.v0.1.0\npackage: foo\nimage: i\nproperties:\n- {{type: olm.package, value: {{packageName: foo, version: 0.1.0}}}}\n- {{type: olm.bundle.object, value: {{data: {object}}}}}\n"
        );
        std::fs::create_dir(dir.path().join("foo")).unwrap();
        std::fs::write(dir.path().join("foo/catalog.yaml"), &text).unwrap();
        let options = LoadOptions {
            drop_payloads: true,
            ..LoadOptions::default()
        };
        let lean = Catalog::load_dir_with(dir.path(), &options).unwrap();
        assert!(lean.payloads_dropped);
        let bundle = lean
            .bundles
            .iter()
            .find(|b| b.name == "foo.v0.1.0")
            .unwrap();
        assert_eq!(bundle.properties[1].value.get(), "null");
        assert!(
            crate::validate::validate_catalog(&lean)
                .of(crate::validate::Rule::InvalidBundleObject)
                .next()
                .is_none()
        );
        let full = Catalog::load_document(dir.path(), &bundle.origin, &Limits::default()).unwrap();
        assert_eq!(full.bundles.len(), 1);
        assert_eq!(full.bundles[0].origin, bundle.origin);
        assert_eq!(
            full.bundles[0].objects().unwrap(),
            [r#"{"kind":"ConfigMap"}"#]
        );
        // JSON files too.
        std::fs::write(
            dir.path().join("foo/catalog.yaml"),
            crate::render::to_string(&small(), crate::render::Format::Json).unwrap(),
        )
        .unwrap();
        let lean = Catalog::load_dir_with(dir.path(), &options).unwrap();
        let channel = &lean.channels[0];
        let again =
            Catalog::load_document(dir.path(), &channel.origin, &Limits::default()).unwrap();
        assert_eq!(again.channels[0].entries, channel.entries);
    }

    #[test]
    fn bundle_objects_decode() {
        let csv = br#"{"apiVersion":"operators.coreos.com/v1alpha1","kind":"ClusterServiceVersion","metadata":{"name":"foo.v1"}}"#;
        let yaml = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n";
        let bundle = Bundle {
            properties: vec![
                Property::new(property::BUNDLE_OBJECT, &BundleObject::encode(yaml)).unwrap(),
                Property::new(property::BUNDLE_OBJECT, &BundleObject::encode(csv)).unwrap(),
            ],
            ..Bundle::default()
        };
        let objects = bundle.objects().unwrap();
        assert_eq!(
            objects[0],
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm"}}"#
        );
        assert_eq!(
            bundle.csv_json().unwrap().unwrap(),
            std::str::from_utf8(csv).unwrap()
        );
    }

    #[test]
    fn bundle_versions_need_exactly_one_package_property() {
        let mut bundle = Bundle {
            name: "b".into(),
            ..Bundle::default()
        };
        assert!(matches!(
            bundle.version(),
            Err(BundleVersionError::Missing { .. })
        ));
        let p = Property::from_json(property::PACKAGE, r#"{"packageName":"b","version":"v1"}"#)
            .unwrap();
        bundle.properties.push(p.clone());
        assert!(matches!(
            bundle.version(),
            Err(BundleVersionError::Version { .. })
        ));
        bundle.properties.push(p);
        assert!(matches!(
            bundle.version(),
            Err(BundleVersionError::Several { count: 2, .. })
        ));
    }
}
