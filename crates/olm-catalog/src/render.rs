//! Writing a catalog back as JSON or YAML, the way `opm render` and
//! `opm migrate` write it, losing nothing that was read.
//!
//! Documents are grouped by package (packages in name order); within a
//! package come the `olm.package` document, the channels by name, the bundles
//! by name, other schemas by schema (stably), then the deprecations; documents
//! of other schemas without a package come last. JSON is indented with four
//! spaces like Go's `json.Encoder` (raw values are re-indented too); YAML
//! documents each start with `---`. Known fields are written in upstream's
//! order with upstream's omissions and Go's string escapes (HTML escaping
//! off); unknown fields follow them. Raw values (property values, unknown
//! fields, documents of other schemas) are written as they are held: for
//! `opm render`'s bytes, re-encode a loaded catalog first with
//! [`Catalog::reencode_like_go`], as upstream's loader re-encodes it.

use std::{
    collections::BTreeMap,
    io::{self, Write},
    path::Path,
    sync::Arc,
};

use olm_api::go_text::write_json_string;
use serde::{Serialize, Serializer, ser::SerializeMap};
use serde_json::value::RawValue;

use crate::{
    document::parse_json_value,
    fbc::{
        Bundle, Catalog, Channel, Deprecation, DeprecationEntry, ExtraFields, FileSpans, Icon,
        Meta, Package, RelatedImage, SCHEMA_BUNDLE, SCHEMA_CHANNEL, SCHEMA_DEPRECATIONS,
        SCHEMA_PACKAGE,
    },
    graph::ChannelEntry,
    limits::Limits,
    property::Property,
};

/// The output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Indented JSON documents, one after another.
    Json,
    /// YAML documents, each starting with `---`.
    Yaml,
}

impl Format {
    /// The file extension `opm` uses, with the dot.
    pub fn extension(self) -> &'static str {
        match self {
            Self::Json => ".json",
            Self::Yaml => ".yaml",
        }
    }
}

/// Why a catalog could not be written.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// Writing failed.
    #[error("write {path}: {source}")]
    Io {
        /// What was being written.
        path: String,
        /// The failure.
        #[source]
        source: io::Error,
    },
    /// A document could not be converted (for example a raw value nested
    /// deeper than the limit, when writing YAML).
    #[error("{document}: {message}")]
    Convert {
        /// The document.
        document: String,
        /// What went wrong.
        message: String,
    },
    /// A package name cannot be used as a directory name.
    #[error("invalid package name {name:?}: must be a single local path element")]
    PackageName {
        /// The name.
        name: String,
    },
}

/// The documents of one package, or of no package.
#[derive(Default)]
struct Group<'a> {
    packages: Vec<&'a Package>,
    channels: Vec<&'a Channel>,
    bundles: Vec<&'a Bundle>,
    others: Vec<&'a Meta>,
    deprecations: Vec<&'a Deprecation>,
}

/// The catalog grouped as `opm` writes it: by package, then documents with no
/// package.
fn groups(catalog: &Catalog) -> (BTreeMap<&str, Group<'_>>, Vec<&Meta>) {
    let mut by_package: BTreeMap<&str, Group<'_>> = BTreeMap::new();
    let mut root_others = Vec::new();
    for p in &catalog.packages {
        if !p.name.is_empty() {
            by_package.entry(&p.name).or_default().packages.push(p);
        }
    }
    for c in &catalog.channels {
        if !c.package.is_empty() {
            by_package.entry(&c.package).or_default().channels.push(c);
        }
    }
    for b in &catalog.bundles {
        if !b.package.is_empty() {
            by_package.entry(&b.package).or_default().bundles.push(b);
        }
    }
    for o in &catalog.others {
        if o.package.is_empty() {
            root_others.push(o);
        } else {
            by_package.entry(&o.package).or_default().others.push(o);
        }
    }
    for d in &catalog.deprecations {
        if !d.package.is_empty() {
            by_package
                .entry(&d.package)
                .or_default()
                .deprecations
                .push(d);
        }
    }
    for group in by_package.values_mut() {
        group.channels.sort_by(|a, b| a.name.cmp(&b.name));
        group.bundles.sort_by(|a, b| a.name.cmp(&b.name));
        group.others.sort_by(|a, b| a.schema.cmp(&b.schema));
    }
    (by_package, root_others)
}

/// One document, as compact JSON.
enum Doc<'a> {
    Package(&'a Package),
    Channel(&'a Channel),
    Bundle(&'a Bundle),
    Deprecation(&'a Deprecation),
    Meta(&'a Meta),
}

impl Doc<'_> {
    fn describe(&self) -> String {
        match self {
            Self::Package(p) => format!("olm.package {:?} ({})", p.name, p.origin),
            Self::Channel(c) => format!("olm.channel {:?} ({})", c.name, c.origin),
            Self::Bundle(b) => format!("olm.bundle {:?} ({})", b.name, b.origin),
            Self::Deprecation(d) => format!("olm.deprecations of {:?} ({})", d.package, d.origin),
            Self::Meta(m) => format!("{} ({})", m.schema, m.origin),
        }
    }

    /// The document as Go's encoder writes it with HTML escaping off: typed
    /// fields as strings, raw values (property values, unknown fields,
    /// documents of other schemas) as they are, since Go only compacts a
    /// `json.RawMessage`.
    fn compact_json(&self, buffer: &mut String) -> Result<(), RenderError> {
        buffer.clear();
        let convert = |message: String| RenderError::Convert {
            document: self.describe(),
            message,
        };
        let mut bytes = std::mem::take(buffer).into_bytes();
        let result = match self {
            Self::Package(p) => serde_json::to_writer(&mut bytes, p),
            Self::Channel(c) => serde_json::to_writer(&mut bytes, c),
            Self::Bundle(b) => serde_json::to_writer(&mut bytes, b),
            Self::Deprecation(d) => serde_json::to_writer(&mut bytes, d),
            Self::Meta(m) => {
                bytes.extend_from_slice(m.blob.get().as_bytes());
                Ok(())
            }
        };
        result.map_err(|e| convert(e.to_string()))?;
        // Both serde_json and the raw values held write only UTF-8.
        *buffer = String::from_utf8(bytes).map_err(|e| convert(e.to_string()))?;
        // A document of another schema is a raw value, kept as it is.
        if !matches!(self, Self::Meta(_)) {
            escape_line_separators(buffer);
        }
        Ok(())
    }
}

/// serde_json escapes strings as Go does with HTML escaping off (`\b`,
/// `\f`, `\n`, `\r`, `\t`, `\u00XX` for other control characters, `<>&`
/// as they are) except U+2028 and U+2029, which Go escapes in every string
/// it encodes. They can only occur inside strings, so escaping every one in
/// the text is exact for the strings of our types. A `json.RawMessage` Go
/// only compacts, escaping these two only along with HTML, which is off
/// here, so a literal one in a raw value would stay as it is; but the raw
/// values here hold none, as they were re-encoded by
/// [`Catalog::reencode_like_go`] or built by [`crate::go_json`], which
/// writes them escaped.
fn escape_line_separators(json: &mut String) {
    // Both start with the bytes E2 80 (as do other characters, kept as
    // they are): look no further in text without them.
    if memchr::memmem::find(json.as_bytes(), b"\xe2\x80").is_none() {
        return;
    }
    *json = json
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029");
}

fn documents(catalog: &Catalog) -> Vec<Doc<'_>> {
    let (by_package, root_others) = groups(catalog);
    let mut docs = Vec::new();
    for group in by_package.into_values() {
        push_group(&mut docs, group);
    }
    docs.extend(root_others.into_iter().map(Doc::Meta));
    docs
}

fn push_group<'a>(docs: &mut Vec<Doc<'a>>, group: Group<'a>) {
    docs.extend(group.packages.into_iter().map(Doc::Package));
    docs.extend(group.channels.into_iter().map(Doc::Channel));
    docs.extend(group.bundles.into_iter().map(Doc::Bundle));
    docs.extend(group.others.into_iter().map(Doc::Meta));
    docs.extend(group.deprecations.into_iter().map(Doc::Deprecation));
}

fn write_docs(
    docs: &[Doc<'_>],
    format: Format,
    out: &mut dyn Write,
    path: &str,
    mut payloads: Option<&mut PayloadsFromFiles>,
) -> Result<(), RenderError> {
    let io_error = |source| RenderError::Io {
        path: path.to_owned(),
        source,
    };
    let limits = Limits::default();
    // One document's compact and indented text, their buffers used again.
    let mut compact = String::new();
    let mut text = String::new();
    for doc in docs {
        match (doc, payloads.as_deref_mut(), format) {
            (Doc::Bundle(lean), Some(payloads), Format::Json) => {
                // Written straight in Go's indentation: the payloads, most of
                // the text, are not copied into a bundle and read again.
                let values = payloads.values(lean)?;
                text.clear();
                write_bundle_json(lean, &values, &mut text);
                escape_line_separators(&mut text);
                text.push('\n');
                out.write_all(text.as_bytes()).map_err(io_error)?;
                continue;
            }
            (Doc::Bundle(lean), Some(payloads), _) => {
                Doc::Bundle(&payloads.fill(lean)?).compact_json(&mut compact)?
            }
            _ => doc.compact_json(&mut compact)?,
        }
        let json = compact.as_str();
        match format {
            Format::Json => {
                text.clear();
                go_indent_into(json, INDENT, &mut text);
                text.push('\n');
                out.write_all(text.as_bytes()).map_err(io_error)?;
            }
            Format::Yaml => {
                let value = parse_json_value(json, &limits).map_err(|e| RenderError::Convert {
                    document: doc.describe(),
                    message: e.to_string(),
                })?;
                let yaml = serde_yaml_ng::to_string(&value).map_err(|e| RenderError::Convert {
                    document: doc.describe(),
                    message: e.to_string(),
                })?;
                out.write_all(b"---\n").map_err(io_error)?;
                out.write_all(yaml.as_bytes()).map_err(io_error)?;
            }
        }
    }
    Ok(())
}

/// The indentation of rendered JSON, as `opm` writes it.
const INDENT: &str = "    ";

/// Writes `bundle` as [`write_docs`] writes it as JSON (compact JSON from
/// its serializer, indented as Go indents), field by field: the values of
/// its payload properties (`olm.bundle.object`, `olm.csv.metadata`) are
/// taken from `payloads`, in order, as compact JSON.
fn write_bundle_json(bundle: &Bundle, payloads: &[Box<str>], out: &mut String) {
    let mut payloads = payloads.iter();
    let mut doc = GoObject::open(out, 0);
    doc.string("schema", SCHEMA_BUNDLE);
    if !bundle.name.is_empty() {
        doc.string("name", &bundle.name);
    }
    if !bundle.package.is_empty() {
        doc.string("package", &bundle.package);
    }
    doc.string("image", &bundle.image);
    if !bundle.properties.is_empty() {
        let depth = doc.key("properties");
        go_array(doc.out, depth, &bundle.properties, |out, depth, p| {
            let mut property = GoObject::open(out, depth);
            property.string("type", &p.type_);
            let value = match is_payload(p) {
                true => payloads.next().map_or("null", |v| v),
                false => p.value.get(),
            };
            property.raw("value", value);
            for (key, value) in &p.extra {
                property.raw(key, value.get());
            }
            property.close();
        });
    }
    if !bundle.related_images.is_empty() {
        let depth = doc.key("relatedImages");
        go_array(doc.out, depth, &bundle.related_images, |out, depth, r| {
            let mut image = GoObject::open(out, depth);
            image.string("name", &r.name);
            image.string("image", &r.image);
            for (key, value) in r.extra.iter() {
                image.raw(key, value.get());
            }
            image.close();
        });
    }
    for (key, value) in bundle.extra.iter() {
        doc.raw(key, value.get());
    }
    doc.close();
}

/// An object being written in Go's indentation, at `depth`.
struct GoObject<'o> {
    out: &'o mut String,
    depth: usize,
    empty: bool,
}

impl<'o> GoObject<'o> {
    fn open(out: &'o mut String, depth: usize) -> Self {
        out.push('{');
        Self {
            out,
            depth,
            empty: true,
        }
    }

    /// Writes the key of the next field; its value is at the depth given.
    fn key(&mut self, key: &str) -> usize {
        self.out.push_str(if self.empty { "\n" } else { ",\n" });
        self.empty = false;
        push_indent(self.out, self.depth + 1);
        write_json_string(self.out, key, false);
        self.out.push_str(": ");
        self.depth + 1
    }

    fn string(&mut self, key: &str, value: &str) {
        self.key(key);
        write_json_string(self.out, value, false);
    }

    /// A field whose value is JSON text, indented here.
    fn raw(&mut self, key: &str, json: &str) {
        let depth = self.key(key);
        go_indent_at(json, INDENT, depth, self.out);
    }

    fn close(self) {
        if !self.empty {
            self.out.push('\n');
            push_indent(self.out, self.depth);
        }
        self.out.push('}');
    }
}

/// Writes a non-empty array at `depth` in Go's indentation, each item by
/// `item` at the depth it is given.
fn go_array<T>(
    out: &mut String,
    depth: usize,
    items: &[T],
    mut item: impl FnMut(&mut String, usize, &T),
) {
    out.push('[');
    for (i, value) in items.iter().enumerate() {
        out.push_str(if i == 0 { "\n" } else { ",\n" });
        push_indent(out, depth + 1);
        item(out, depth + 1, value);
    }
    if !items.is_empty() {
        out.push('\n');
        push_indent(out, depth);
    }
    out.push(']');
}

fn push_indent(out: &mut String, depth: usize) {
    for _ in 0..depth {
        out.push_str(INDENT);
    }
}

/// Writes the whole catalog to `out`.
pub fn write(catalog: &Catalog, format: Format, out: &mut dyn Write) -> Result<(), RenderError> {
    write_docs(&documents(catalog), format, out, "output", None)
}

/// Writes a catalog loaded with its payloads left out
/// ([`crate::fbc::LoadOptions::drop_payloads`]), each bundle with its
/// payloads read back by `payloads` as it is written: the same text as
/// [`write`] of the whole catalog, holding one bundle's payloads at a time
/// rather than all.
pub fn write_filling(
    catalog: &Catalog,
    format: Format,
    out: &mut dyn Write,
    payloads: &mut PayloadsFromFiles,
) -> Result<(), RenderError> {
    write_docs(&documents(catalog), format, out, "output", Some(payloads))
}

/// The bundles of one file of the catalog at `root`, re-encoded as
/// [`Catalog::reencode_like_go`] does, by document index.
fn load_bundles(
    root: &Path,
    file: &str,
    limits: &Limits,
) -> Result<BTreeMap<usize, Bundle>, String> {
    let mut catalog = Catalog::load_file_in(root, file, limits).map_err(|e| e.to_string())?;
    check_bundle_objects(&catalog.bundles).map_err(|e| e.to_string())?;
    catalog
        .reencode_like_go(limits)
        .map_err(|e| e.to_string())?;
    Ok(catalog
        .bundles
        .into_iter()
        .map(|b| (b.origin.document, b))
        .collect())
}

/// The payload values of one file of the catalog at `root`, read at their
/// `spans` and re-encoded as [`Catalog::reencode_like_go`] does: for each
/// bundle, by document index, its values in property order.
fn load_values(
    root: &Path,
    file: &str,
    spans: &FileSpans,
    limits: &Limits,
) -> Result<BTreeMap<usize, Vec<Box<str>>>, String> {
    let bytes = Catalog::file_bytes_in(root, file, limits).map_err(|e| e.to_string())?;
    if bytes.len() != spans.file_bytes {
        return Err(CHANGED.to_owned());
    }
    let mut values: BTreeMap<usize, Vec<Box<str>>> = BTreeMap::new();
    for span in &spans.spans {
        let value = span.value_in(&bytes).ok_or(CHANGED)?;
        let text = crate::go_json::reencode(value, false, limits.max_nesting_depth)
            .map_err(|e| format!("properties[{}].value: {e}", span.property))?;
        values
            .entry(span.document)
            .or_default()
            .push(text.into_boxed_str());
    }
    Ok(values)
}

/// Why a bundle's payloads cannot be given back: its file changed since
/// the catalog was loaded.
const CHANGED: &str = "the file no longer holds the bundle's payloads";

/// Refuses a catalog with an `olm.bundle.object` that does not decode, as
/// upstream's loader does when it reads a catalog directory ("read bundle
/// objects"): `opm render` of a directory fails on one.
///
/// # Errors
///
/// The first bundle object that does not decode.
pub fn check_bundle_objects<'a>(
    bundles: impl IntoIterator<Item = &'a Bundle>,
) -> Result<(), RenderError> {
    for b in bundles {
        if let Some((i, err)) = b.undecodable_objects().next() {
            return Err(undecodable_object(&b.origin, &b.package, &b.name, i, &err));
        }
    }
    Ok(())
}

/// Upstream's words for property `index` of bundle `name` of `package`
/// (read from `origin`), an `olm.bundle.object` that does not decode, as
/// `error` says.
fn undecodable_object(
    origin: &crate::location::Origin,
    package: &str,
    name: &str,
    index: usize,
    error: &str,
) -> RenderError {
    RenderError::Convert {
        document: format!("olm.bundle {name:?} ({origin})"),
        message: format!(
            "read bundle objects: package {package:?}, bundle {name:?}: property at index {index}: {error}"
        ),
    }
}

/// Refuses a catalog loaded without its payloads (checking its bundle
/// objects: [`crate::fbc::PayloadChecks::BundleObjects`]) when one does not
/// decode, with the words of [`check_bundle_objects`].
///
/// # Errors
///
/// The first bundle object that does not decode.
pub fn check_dropped_bundle_objects(catalog: &Catalog) -> Result<(), RenderError> {
    let Some(problem) = catalog
        .payload_problems
        .iter()
        .find(|p| p.type_ == crate::property::BUNDLE_OBJECT)
    else {
        return Ok(());
    };
    let bundle = catalog.bundles.iter().find(|b| b.origin == problem.origin);
    let (package, name) = bundle.map_or(("", ""), |b| (b.package.as_str(), b.name.as_str()));
    Err(undecodable_object(
        &problem.origin,
        package,
        name,
        problem.property,
        &problem.error,
    ))
}

/// Gives bundles of a catalog directory loaded without payloads their
/// payloads back, reading their files again (once per run of bundles from
/// the same file, which rendering in package order gives for catalogs laid
/// out a file per package). Where the load noted where each payload lies
/// ([`crate::fbc::LoadOptions::payload_spans`]), only those bytes are read
/// back and re-encoded; otherwise (documents converted from YAML) the file
/// is loaded again whole and re-encoded as [`Catalog::reencode_like_go`]
/// does.
pub struct PayloadsFromFiles {
    root: std::path::PathBuf,
    limits: Limits,
    /// Where the payloads lie, by file, as the load noted.
    spans: Arc<BTreeMap<Arc<str>, FileSpans>>,
    file: Option<Arc<str>>,
    /// The payloads of `file`.
    payloads: FilePayloads,
    /// Files read ahead: reader `i` reads files `i`, `i + n`, ... of the
    /// write order, and they are taken from the readers in turn.
    ahead: Vec<std::sync::mpsc::Receiver<LoadedFile>>,
    /// How many files have been taken from `ahead`.
    taken: usize,
}

/// The payloads of one file read again.
enum FilePayloads {
    /// Its bundles, loaded whole, by document index.
    Bundles(BTreeMap<usize, Bundle>),
    /// Each bundle's payload values, by document index, in property order,
    /// as compact JSON.
    Values(BTreeMap<usize, Vec<Box<str>>>),
}

/// One file read again: its name and its payloads, or why it could not be
/// read.
type LoadedFile = (Arc<str>, Result<FilePayloads, String>);

/// How many files each reader of [`PayloadsFromFiles::reading_ahead`]
/// holds ready.
pub const FILES_READ_AHEAD: usize = 1;

/// Reads the payloads of `file` again: at their spans when the load noted
/// them all, else by loading the file whole.
fn load_payloads(
    root: &Path,
    file: &str,
    spans: Option<&FileSpans>,
    limits: &Limits,
) -> Result<FilePayloads, String> {
    match spans.filter(|s| !s.incomplete) {
        Some(spans) => load_values(root, file, spans, limits).map(FilePayloads::Values),
        None => load_bundles(root, file, limits).map(FilePayloads::Bundles),
    }
}

impl PayloadsFromFiles {
    /// Reads from the catalog rooted at `root`, within `limits`, payloads
    /// left out of `catalog`.
    pub fn new(root: impl Into<std::path::PathBuf>, limits: Limits, catalog: &Catalog) -> Self {
        Self {
            root: root.into(),
            limits,
            spans: Arc::new(catalog.payload_spans.clone()),
            file: None,
            payloads: FilePayloads::Bundles(BTreeMap::new()),
            ahead: Vec::new(),
            taken: 0,
        }
    }

    /// As [`PayloadsFromFiles::new`], with threads (one per CPU) reading the
    /// files of `catalog`'s bundles in the order [`write_filling`] asks for
    /// them, each at most [`FILES_READ_AHEAD`] ahead, so reading and writing
    /// overlap. A bundle asked for out of that order is read directly.
    pub fn reading_ahead(
        root: impl Into<std::path::PathBuf>,
        limits: Limits,
        catalog: &Catalog,
    ) -> Self {
        let mut files: Vec<Arc<str>> = Vec::new();
        for doc in documents(catalog) {
            if let Doc::Bundle(b) = doc
                && files.last() != Some(&b.origin.file)
            {
                files.push(b.origin.file.clone());
            }
        }
        let mut payloads = Self::new(root, limits, catalog);
        let readers = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .clamp(1, files.len().max(1));
        for reader in 0..readers {
            let (sender, receiver) = std::sync::mpsc::sync_channel(FILES_READ_AHEAD);
            let (root, limits) = (payloads.root.clone(), payloads.limits.clone());
            let spans = payloads.spans.clone();
            let mine: Vec<Arc<str>> = files
                .iter()
                .skip(reader)
                .step_by(readers)
                .cloned()
                .collect();
            std::thread::spawn(move || {
                for file in mine {
                    let loaded = load_payloads(&root, &file, spans.get(&file), &limits);
                    if sender.send((file, loaded)).is_err() {
                        return;
                    }
                }
            });
            payloads.ahead.push(receiver);
        }
        payloads
    }

    /// `lean` with the values of its payload properties read again.
    ///
    /// # Errors
    ///
    /// As [`PayloadsFromFiles::values`].
    pub fn fill(&mut self, lean: &Bundle) -> Result<Bundle, RenderError> {
        let mut values = self.values(lean)?.into_iter();
        let mut filled = lean.clone();
        for property in filled.properties.iter_mut().filter(|p| is_payload(p)) {
            let value = values.next().unwrap_or_default();
            property.value =
                RawValue::from_string(value.into()).map_err(|e| RenderError::Convert {
                    document: format!("olm.bundle {:?} ({})", lean.name, lean.origin),
                    message: e.to_string(),
                })?;
        }
        Ok(filled)
    }

    /// The values of `lean`'s payload properties read again, in property
    /// order, as compact JSON re-encoded as [`Catalog::reencode_like_go`]
    /// does.
    ///
    /// # Errors
    ///
    /// When the file cannot be read or re-encoded, or no longer holds the
    /// bundle as it was loaded.
    pub fn values(&mut self, lean: &Bundle) -> Result<Vec<Box<str>>, RenderError> {
        let fail = |message: String| RenderError::Convert {
            document: format!("olm.bundle {:?} ({})", lean.name, lean.origin),
            message,
        };
        if self.file.as_deref() != Some(&*lean.origin.file) {
            self.payloads = FilePayloads::Bundles(BTreeMap::new());
            let ahead = match self.ahead.len() {
                0 => None,
                readers => self.ahead[self.taken % readers].recv().ok(),
            };
            self.taken += 1;
            let loaded = match ahead {
                Some((file, loaded)) if file == lean.origin.file => loaded,
                other => {
                    if other.is_some() {
                        // Out of the expected order: read directly from now on.
                        self.ahead.clear();
                    }
                    let file = &lean.origin.file;
                    load_payloads(&self.root, file, self.spans.get(file), &self.limits)
                }
            };
            self.payloads = loaded.map_err(fail)?;
            self.file = Some(lean.origin.file.clone());
        }
        let values: Vec<Box<str>> = match &mut self.payloads {
            FilePayloads::Bundles(bundles) => bundles
                .remove(&lean.origin.document)
                .filter(|full| full.name == lean.name)
                .ok_or_else(|| fail("the file no longer holds the bundle".to_owned()))?
                .properties
                .into_iter()
                .filter(is_payload)
                .map(|p| p.value.into())
                .collect(),
            FilePayloads::Values(values) => {
                values.remove(&lean.origin.document).unwrap_or_default()
            }
        };
        if values.len() != lean.properties.iter().filter(|p| is_payload(p)).count() {
            return Err(fail(CHANGED.to_owned()));
        }
        Ok(values)
    }
}

/// Whether a property is one whose value a load may leave out.
fn is_payload(p: &Property) -> bool {
    crate::property::is_payload(&p.type_)
}

/// The whole catalog as a string.
pub fn to_string(catalog: &Catalog, format: Format) -> Result<String, RenderError> {
    let mut out = Vec::new();
    write(catalog, format, &mut out)?;
    // Both writers only ever write UTF-8.
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Writes the catalog as a directory tree, one `<package>/catalog.<ext>` per
/// package and a root `catalog.<ext>` for documents with no package, as
/// `opm`'s `WriteFS` does.
pub fn write_dir(catalog: &Catalog, format: Format, dir: &Path) -> Result<(), RenderError> {
    let io_error = |path: &Path| {
        let path = path.display().to_string();
        move |source| RenderError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io_error(dir))?;
    let (by_package, root_others) = groups(catalog);
    for (name, group) in by_package {
        if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\\', '\0']) {
            return Err(RenderError::PackageName {
                name: name.to_owned(),
            });
        }
        let package_dir = dir.join(name);
        std::fs::create_dir_all(&package_dir).map_err(io_error(&package_dir))?;
        let file = package_dir.join(format!("catalog{}", format.extension()));
        let mut docs = Vec::new();
        push_group(&mut docs, group);
        let mut out = Vec::new();
        write_docs(&docs, format, &mut out, &file.display().to_string(), None)?;
        std::fs::write(&file, out).map_err(io_error(&file))?;
    }
    if !root_others.is_empty() {
        let file = dir.join(format!("catalog{}", format.extension()));
        let docs: Vec<Doc<'_>> = root_others.into_iter().map(Doc::Meta).collect();
        let mut out = Vec::new();
        write_docs(&docs, format, &mut out, &file.display().to_string(), None)?;
        std::fs::write(&file, out).map_err(io_error(&file))?;
    }
    Ok(())
}

/// Re-indents JSON text as Go's `json.Indent` does: insignificant whitespace
/// dropped, one element per line, `": "` after keys, empty objects and arrays
/// kept as `{}` and `[]`.
pub fn go_indent(json: &str, indent: &str) -> String {
    let mut out = String::with_capacity(json.len() + json.len() / 4);
    go_indent_into(json, indent, &mut out);
    out
}

/// [`go_indent`], appending to `out`.
pub fn go_indent_into(json: &str, indent: &str, out: &mut String) {
    go_indent_at(json, indent, 0, out);
}

/// [`go_indent_into`] of a value that sits `depth` levels deep in the text
/// being written.
fn go_indent_at(json: &str, indent: &str, depth: usize, out: &mut String) {
    let bytes = json.as_bytes();
    let mut depth = depth;
    let mut need_indent = false;
    let mut i = 0;
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        for _ in 0..depth {
            out.push_str(indent);
        }
    };
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b' ' | b'\t' | b'\n' | b'\r' => {
                i += 1;
                continue;
            }
            b'"' => {
                if need_indent {
                    newline(out, depth);
                    need_indent = false;
                }
                let start = i;
                i += 1;
                // Strings hold most of a catalog's bytes: find the closing
                // quote with memchr, stepping over escapes.
                while let Some(rest) = bytes.get(i..) {
                    match memchr::memchr2(b'"', b'\\', rest) {
                        Some(j) if rest[j] == b'\\' => i += j + 2,
                        Some(j) => {
                            i += j + 1;
                            break;
                        }
                        None => {
                            i = bytes.len();
                            break;
                        }
                    }
                }
                out.push_str(&json[start..i.min(bytes.len())]);
                continue;
            }
            b'{' | b'[' => {
                if need_indent {
                    newline(out, depth);
                }
                out.push(b as char);
                depth += 1;
                need_indent = true;
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                if need_indent {
                    // An empty object or array stays on one line.
                    need_indent = false;
                } else {
                    newline(out, depth);
                }
                out.push(b as char);
            }
            b',' => {
                out.push(',');
                newline(out, depth);
            }
            b':' => out.push_str(": "),
            _ => {
                if need_indent {
                    newline(out, depth);
                    need_indent = false;
                }
                // A literal: copy up to the next structural character.
                let start = i;
                while i < bytes.len()
                    && !matches!(
                        bytes[i],
                        b',' | b'}' | b']' | b':' | b' ' | b'\t' | b'\n' | b'\r'
                    )
                {
                    i += 1;
                }
                out.push_str(&json[start..i]);
                continue;
            }
        }
        i += 1;
    }
}

/// Serializes a map from a list of optional entries plus extra fields.
struct Entries<'a> {
    known: Vec<(&'static str, Field<'a>)>,
    extra: &'a ExtraFields,
}

enum Field<'a> {
    Str(&'a str),
    Properties(&'a [Property]),
    Icon(&'a Icon),
    ChannelEntries(&'a Channel),
    RelatedImages(&'a [RelatedImage]),
    DeprecationEntries(&'a [DeprecationEntry]),
    Reference(&'a DeprecationEntry),
}

impl Serialize for Field<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Str(v) => s.serialize_str(v),
            Self::Properties(v) => v.serialize(s),
            Self::Icon(icon) => {
                let mut map = s.serialize_map(None)?;
                map.serialize_entry("base64data", &icon.base64data)?;
                map.serialize_entry("mediatype", &icon.mediatype)?;
                for (k, v) in &icon.extra {
                    let raw: &serde_json::value::RawValue =
                        serde_json::from_str(v).map_err(serde::ser::Error::custom)?;
                    map.serialize_entry(k, raw)?;
                }
                map.end()
            }
            Self::ChannelEntries(channel) => {
                let entries: Vec<EntryDoc<'_>> = channel
                    .entries
                    .iter()
                    .enumerate()
                    .map(|(i, entry)| EntryDoc {
                        entry,
                        extra: channel.entry_extra(i),
                    })
                    .collect();
                entries.serialize(s)
            }
            Self::RelatedImages(images) => {
                let docs: Vec<Entries<'_>> = images
                    .iter()
                    .map(|r| Entries {
                        known: vec![
                            ("name", Field::Str(&r.name)),
                            ("image", Field::Str(&r.image)),
                        ],
                        extra: &r.extra,
                    })
                    .collect();
                docs.serialize(s)
            }
            Self::DeprecationEntries(entries) => {
                let docs: Vec<Entries<'_>> = entries
                    .iter()
                    .map(|e| Entries {
                        known: vec![
                            ("reference", Field::Reference(e)),
                            ("message", Field::Str(&e.message)),
                        ],
                        extra: &e.extra,
                    })
                    .collect();
                docs.serialize(s)
            }
            Self::Reference(e) => {
                let mut known = vec![("schema", Field::Str(&e.schema))];
                if !e.name.is_empty() {
                    known.push(("name", Field::Str(&e.name)));
                }
                Entries {
                    known,
                    extra: &e.reference_extra,
                }
                .serialize(s)
            }
        }
    }
}

impl Serialize for Entries<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.known.len() + self.extra.len()))?;
        for (key, value) in &self.known {
            map.serialize_entry(key, value)?;
        }
        for (key, value) in self.extra.iter() {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

struct EntryDoc<'a> {
    entry: &'a ChannelEntry,
    extra: Option<&'a ExtraFields>,
}

impl Serialize for EntryDoc<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("name", &self.entry.name)?;
        if let Some(replaces) = self.entry.replaces.as_deref().filter(|r| !r.is_empty()) {
            map.serialize_entry("replaces", replaces)?;
        }
        if !self.entry.skips.is_empty() {
            map.serialize_entry("skips", &self.entry.skips)?;
        }
        if let Some(range) = self.entry.skip_range.as_deref().filter(|r| !r.is_empty()) {
            map.serialize_entry("skipRange", range)?;
        }
        for (key, value) in self.extra.map(|e| e.iter()).into_iter().flatten() {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

impl Serialize for Package {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut known = vec![
            ("schema", Field::Str(SCHEMA_PACKAGE)),
            ("name", Field::Str(&self.name)),
            ("defaultChannel", Field::Str(&self.default_channel)),
        ];
        if let Some(icon) = &self.icon {
            known.push(("icon", Field::Icon(icon)));
        }
        if !self.description.is_empty() {
            known.push(("description", Field::Str(&self.description)));
        }
        if !self.properties.is_empty() {
            known.push(("properties", Field::Properties(&self.properties)));
        }
        Entries {
            known,
            extra: &self.extra,
        }
        .serialize(s)
    }
}

impl Serialize for Channel {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut known = vec![
            ("schema", Field::Str(SCHEMA_CHANNEL)),
            ("name", Field::Str(&self.name)),
            ("package", Field::Str(&self.package)),
            ("entries", Field::ChannelEntries(self)),
        ];
        if !self.properties.is_empty() {
            known.push(("properties", Field::Properties(&self.properties)));
        }
        Entries {
            known,
            extra: &self.extra,
        }
        .serialize(s)
    }
}

impl Serialize for Bundle {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut known = vec![("schema", Field::Str(SCHEMA_BUNDLE))];
        if !self.name.is_empty() {
            known.push(("name", Field::Str(&self.name)));
        }
        if !self.package.is_empty() {
            known.push(("package", Field::Str(&self.package)));
        }
        known.push(("image", Field::Str(&self.image)));
        if !self.properties.is_empty() {
            known.push(("properties", Field::Properties(&self.properties)));
        }
        if !self.related_images.is_empty() {
            known.push(("relatedImages", Field::RelatedImages(&self.related_images)));
        }
        Entries {
            known,
            extra: &self.extra,
        }
        .serialize(s)
    }
}

impl Serialize for Deprecation {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Entries {
            known: vec![
                ("schema", Field::Str(SCHEMA_DEPRECATIONS)),
                ("package", Field::Str(&self.package)),
                ("entries", Field::DeprecationEntries(&self.entries)),
            ],
            extra: &self.extra,
        }
        .serialize(s)
    }
}

#[cfg(test)]
mod tests {
    /// A catalog of two files where one package's bundles sit in both and
    /// the other file holds two packages: payloads come back from the right
    /// file whatever the order files are visited in, whether the files are
    /// YAML or JSON and whether the load noted where payloads lie.
    #[test]
    fn payloads_read_again_match_the_whole_load() {
        for (extension, spans) in [
            ("yaml", false),
            ("yaml", true),
            ("json", false),
            ("json", true),
        ] {
            payloads_come_back(extension, spans);
        }
    }

    fn payloads_come_back(extension: &str, spans: bool) {
        use crate::fbc::LoadOptions;
        let case = format!("{extension}, spans noted: {spans}");
        let object = |name: &str| {
            use base64::Engine as _;
            let manifest = format!(
                "{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":\"{name}\"}}}}"
            );
            base64::engine::general_purpose::STANDARD.encode(manifest)
        };
        let bundle = |package: &str, name: &str| {
            format!(
                "---\nschema: olm.bundle\npackage: {package}\nname: {name}\nimage: i\nproperties:\n- type: olm.bundle.object\n  value: {{data: {}}}\n- type: olm.package\n  value: {{packageName: {package}, version: 1.0.0}}\n- type: olm.csv.metadata\n  value: {{displayName: \"{name} <&>\u{e9}\", zeta: 1.50, alpha: [1e2]}}\n",
                object(name)
            )
        };
        // The same documents as YAML, or as indented JSON.
        let text = |yaml: String| match extension {
            "yaml" => yaml,
            _ => serde_yaml_ng::Deserializer::from_str(&yaml)
                .map(|doc| {
                    let value =
                        <serde_json::Value as serde::Deserialize>::deserialize(doc).unwrap();
                    serde_json::to_string_pretty(&value).unwrap() + "\n"
                })
                .collect(),
        };
        let dir = tempfile::tempdir().unwrap();
        let first = format!(
            "---\nschema: olm.package\nname: b\n{}{}---\nschema: olm.package\nname: a\n{}",
            bundle("b", "b.v2"),
            bundle("a", "a.v1"),
            bundle("b", "b.v1")
        );
        let (one, two) = (format!("one.{extension}"), format!("two.{extension}"));
        std::fs::write(dir.path().join(&one), text(first)).unwrap();
        std::fs::write(dir.path().join(&two), text(bundle("b", "b.v3"))).unwrap();
        let limits = Limits::default();
        let mut whole = Catalog::load_dir(dir.path()).unwrap();
        whole.reencode_like_go(&limits).unwrap();
        let options = LoadOptions {
            drop_payloads: true,
            payload_spans: spans,
            ..LoadOptions::default()
        };
        let mut lean = Catalog::load_dir_with(dir.path(), &options).unwrap();
        lean.reencode_like_go(&limits).unwrap();
        assert!(
            lean.bundles
                .iter()
                .all(|b| b.properties[0].value.get() == "null"),
            "{case}"
        );
        let read_at_spans = lean
            .payload_spans
            .values()
            .filter(|s| !s.incomplete && !s.spans.is_empty())
            .count();
        assert_eq!(
            read_at_spans,
            if spans && extension == "json" { 2 } else { 0 },
            "{case}"
        );
        // Read when asked, and read ahead in write order: the same text, in
        // either format.
        let ways = [false, true]
            .into_iter()
            .flat_map(|ahead| [(ahead, Format::Json), (ahead, Format::Yaml)]);
        for (ahead, format) in ways {
            let mut payloads = if ahead {
                PayloadsFromFiles::reading_ahead(dir.path(), limits.clone(), &lean)
            } else {
                PayloadsFromFiles::new(dir.path(), limits.clone(), &lean)
            };
            let mut text = Vec::new();
            write_filling(&lean, format, &mut text, &mut payloads).unwrap();
            assert_eq!(
                String::from_utf8(text).unwrap(),
                to_string(&whole, format).unwrap(),
                "{case}, read ahead: {ahead}, {format:?}"
            );
        }
        // Asked out of that order, it reads directly, and still right.
        let mut payloads = PayloadsFromFiles::reading_ahead(dir.path(), limits.clone(), &lean);
        for bundle in lean.bundles.iter().rev() {
            let filled = payloads.fill(bundle).unwrap();
            let want = whole
                .bundles
                .iter()
                .find(|b| b.name == bundle.name)
                .unwrap();
            assert_eq!(
                filled.properties, want.properties,
                "{case}: {}",
                bundle.name
            );
        }

        // A file that changed since the load is said to have changed: one
        // that lost the bundle, and one whose payload changed in place.
        let written = std::fs::read_to_string(dir.path().join(&two)).unwrap();
        let in_place = written.replacen("b.v3 <&>", "b.v3 <!>", 1);
        assert_ne!(in_place, written);
        for changed in [
            text("---\nschema: olm.package\nname: c\n".to_owned()),
            in_place,
        ] {
            std::fs::write(dir.path().join(&two), changed).unwrap();
            let mut payloads = PayloadsFromFiles::new(dir.path(), limits.clone(), &lean);
            let mut sink = Vec::new();
            let result = write_filling(&lean, Format::Json, &mut sink, &mut payloads);
            let Err(error) = result.map_err(|e| e.to_string()) else {
                // Loaded whole, a change to a payload alone is the file's
                // text now: nothing says the bundle changed.
                assert!(
                    !(spans && extension == "json"),
                    "{case}: a change went unnoticed"
                );
                continue;
            };
            assert!(
                error.contains("b.v3") && error.contains("no longer holds"),
                "{case}: {error}"
            );
        }
    }

    use super::*;
    use crate::{fbc::LoadOptions, limits::Limits};

    const CATALOG: &str = r#"
schema: vendor.root
name: no-package
---
schema: olm.bundle
name: b.v1
package: b
image: img
properties:
- {type: olm.package, value: {packageName: b, version: 1.0.0}}
---
schema: olm.package
name: b
defaultChannel: s
---
schema: olm.channel
package: b
name: s
entries: [{name: b.v1, extra: 1}]
---
schema: olm.channel
package: b
name: a
entries: []
---
schema: olm.deprecations
package: b
entries: [{reference: {schema: olm.package}, message: gone}]
---
schema: vendor.custom
package: b
data: {x: 1}
"#;

    fn catalog() -> Catalog {
        Catalog::load_file("c.yaml", CATALOG.as_bytes(), &Limits::default()).unwrap()
    }

    #[test]
    fn go_indentation() {
        assert_eq!(
            go_indent(r#"{"a":[1,{"b":"x, y: {"},[],{}],"c":null}"#, "  "),
            "{\n  \"a\": [\n    1,\n    {\n      \"b\": \"x, y: {\"\n    },\n    [],\n    {}\n  ],\n  \"c\": null\n}"
        );
        assert_eq!(go_indent("{ \"a\" :\n 1 }", "  "), "{\n  \"a\": 1\n}");
        assert_eq!(go_indent(r#""a\"b""#, "  "), r#""a\"b""#);
    }

    #[test]
    fn line_and_paragraph_separators_are_escaped_and_their_neighbours_kept() {
        // U+2014, U+2026 and U+20AC share the first bytes (E2 80, E2 82)
        // or the first byte with the two separators.
        let cases = [
            ("plain", "plain"),
            ("a\u{2028}b", "a\\u2028b"),
            ("\u{2029}", "\\u2029"),
            (
                "\u{2014}\u{2028}\u{2026}\u{2029}\u{20ac}",
                "\u{2014}\\u2028\u{2026}\\u2029\u{20ac}",
            ),
        ];
        for (text, expected) in cases {
            let mut json = text.to_owned();
            escape_line_separators(&mut json);
            assert_eq!(json, expected, "{text:?}");
        }
    }

    #[test]
    fn documents_are_ordered_like_opm() {
        let json = to_string(&catalog(), Format::Json).unwrap();
        let schemas: Vec<&str> = json
            .lines()
            .filter_map(|l| l.strip_prefix("    \"schema\": "))
            .collect();
        assert_eq!(
            schemas,
            [
                "\"olm.package\",",
                "\"olm.channel\",",
                "\"olm.channel\",",
                "\"olm.bundle\",",
                "\"vendor.custom\",",
                "\"olm.deprecations\",",
                "\"vendor.root\",",
            ]
        );
        assert!(json.starts_with("{\n    \"schema\": \"olm.package\",\n    \"name\": \"b\",\n    \"defaultChannel\": \"s\"\n}\n"));
        assert!(json.contains("\"entries\": [\n        {\n            \"name\": \"b.v1\",\n            \"extra\": 1\n        }\n    ]"));
    }

    #[test]
    fn json_and_yaml_round_trip() {
        let mut original = catalog();
        original.clear_origins();
        for format in [Format::Json, Format::Yaml] {
            let text = to_string(&original, format).unwrap();
            let mut again = Catalog::load_file("x", text.as_bytes(), &Limits::default()).unwrap();
            again.clear_origins();
            // Reading sorts nothing; compare as sets of documents in render order.
            let text_again = to_string(&again, format).unwrap();
            assert_eq!(text, text_again, "{format:?}");
            assert_eq!(again.packages, original.packages);
            assert_eq!(again.bundles, original.bundles);
            assert_eq!(again.deprecations, original.deprecations);
        }
    }

    #[test]
    fn directories_are_written_per_package() {
        let dir = tempfile::tempdir().unwrap();
        write_dir(&catalog(), Format::Yaml, dir.path()).unwrap();
        assert!(dir.path().join("b/catalog.yaml").is_file());
        assert!(dir.path().join("catalog.yaml").is_file());
        let again = Catalog::load_dir_with(dir.path(), &LoadOptions::default()).unwrap();
        assert_eq!(again.channels.len(), 2);
        let mut bad = catalog();
        bad.packages[0].name = "../x".into();
        assert!(matches!(
            write_dir(&bad, Format::Json, dir.path()),
            Err(RenderError::PackageName { .. })
        ));
    }

    /// Loads one JSON file, re-encodes it as upstream's loader does and
    /// renders it as JSON.
    fn render_json(text: &str) -> Result<String, String> {
        let limits = Limits::default();
        let mut catalog =
            Catalog::load_file("c.json", text.as_bytes(), &limits).map_err(|e| e.to_string())?;
        catalog
            .reencode_like_go(&limits)
            .map_err(|e| e.to_string())?;
        to_string(&catalog, Format::Json).map_err(|e| e.to_string())
    }

    /// Escape classes: how a string's content is written in the source
    /// JSON, and how Go's encoder (HTML escaping off) writes it back.
    const ESCAPES: &[(&str, &str)] = &[
        (r"\u00e9", "é"),
        ("é", "é"),
        (r"\u00E9\u0301", "\u{e9}\u{301}"),
        (r"\/", "/"),
        (r"\u003c\u003e\u0026", "<>&"),
        ("<>&", "<>&"),
        (r"\u2028\u2029", r"\u2028\u2029"),
        ("\u{2028}\u{2029}", r"\u2028\u2029"),
        (r"\u0001\u001f", r"\u0001\u001f"),
        (r"\u0008\u000c\u000a\u000d\u0009", r"\b\f\n\r\t"),
        (r"\b\f\n\r\t", r"\b\f\n\r\t"),
        (r#"\"\\"#, r#"\"\\"#),
        (r"\u007f", "\u{7f}"),
        ("\u{7f}", "\u{7f}"),
        (r"\ud83d\ude00", "😀"),
        (r"\uFEFF", "\u{feff}"),
    ];

    /// Where a string sits in a document: typed strings (re-escaped when
    /// written) and raw values (re-encoded when loaded).
    const FIELDS: &[(&str, &str)] = &[
        (
            "package description (typed)",
            r#"{"schema":"olm.package","name":"p","defaultChannel":"s","description":"X"}"#,
        ),
        (
            "bundle image (typed)",
            r#"{"schema":"olm.bundle","name":"b","package":"p","image":"X"}"#,
        ),
        (
            "channel entry skips (typed)",
            r#"{"schema":"olm.channel","name":"s","package":"p","entries":[{"name":"b","skips":["X"]}]}"#,
        ),
        (
            "related image name (typed)",
            r#"{"schema":"olm.bundle","name":"b","package":"p","image":"i","relatedImages":[{"name":"X","image":"i"}]}"#,
        ),
        (
            "deprecation message (typed)",
            r#"{"schema":"olm.deprecations","package":"p","entries":[{"reference":{"schema":"olm.package"},"message":"X"}]}"#,
        ),
        (
            "property value (raw)",
            r#"{"schema":"olm.bundle","name":"b","package":"p","image":"i","properties":[{"type":"t","value":{"k":"X"}}]}"#,
        ),
        (
            "property value key (raw)",
            r#"{"schema":"olm.bundle","name":"b","package":"p","image":"i","properties":[{"type":"t","value":{"X":1}}]}"#,
        ),
        (
            "unknown field (raw)",
            r#"{"schema":"olm.package","name":"p","defaultChannel":"s","vendor":["X"]}"#,
        ),
        (
            "document of another schema (raw)",
            r#"{"schema":"vendor.thing","package":"p","k":"X"}"#,
        ),
    ];

    #[test]
    fn every_escape_class_in_every_kind_of_field_is_written_as_go_writes_it() {
        for (field, template) in FIELDS {
            for (source, expected) in ESCAPES {
                let text = template.replace('X', &format!("a{source}z"));
                let rendered = render_json(&text).unwrap_or_else(|e| panic!("{field}: {e}"));
                assert!(
                    rendered.contains(&format!("\"a{expected}z\"")),
                    "{field}, {source:?}: expected {expected:?} in\n{rendered}"
                );
            }
        }
    }

    #[test]
    fn raw_values_take_gos_other_decodings() {
        let rendered = render_json(
            r#"{"schema":"vendor.thing","package":"p","s":"\ud800 \udc00x \ud800\u0041",
                "n":[1.0,1e3,-0,12345678901234567890,1e-7,1e21,0.10],"k":2,"k":3,"B":{"z":[],"a":{}}}"#,
        )
        .unwrap();
        let compact: String = rendered.split_whitespace().collect();
        assert_eq!(
            compact,
            r#"{"B":{"a":{},"z":[]},"k":3,"n":[1,1000,-0,12345678901234567000,1e-7,1e+21,0.1],"package":"p","s":"��x�A","schema":"vendor.thing"}"#
        );
        // Go refuses a number beyond float64, and so does the re-encoding.
        let err = render_json(r#"{"schema":"vendor.thing","n":1e400}"#).unwrap_err();
        assert!(err.contains("cannot unmarshal number 1e400"), "{err}");
    }

    #[test]
    fn icons_are_decoded_and_encoded_again() {
        let limits = Limits::default();
        let yaml = "schema: olm.package\nname: p\ndefaultChannel: s\nicon:\n  base64data: |\n    aGVs\n    bG8=\n  mediatype: text/plain\n";
        let mut catalog = Catalog::load_file("c.yaml", yaml.as_bytes(), &limits).unwrap();
        assert_eq!(
            catalog.packages[0].icon.as_ref().unwrap().base64data,
            "aGVs\nbG8=\n"
        );
        catalog.reencode_like_go(&limits).unwrap();
        let json = to_string(&catalog, Format::Json).unwrap();
        assert!(json.contains("\"base64data\": \"aGVsbG8=\""), "{json}");
        // Non-zero trailing bits are accepted and dropped, as Go's decoder does.
        let json = render_json(
            r#"{"schema":"olm.package","name":"p","defaultChannel":"s","icon":{"base64data":"YR==","mediatype":""}}"#,
        )
        .unwrap();
        assert!(json.contains("\"base64data\": \"YQ==\""), "{json}");
        let err = render_json(
            r#"{"schema":"olm.package","name":"p","defaultChannel":"s","icon":{"base64data":"aGVsbG8","mediatype":""}}"#,
        )
        .unwrap_err();
        assert!(
            err.contains("icon.base64data: illegal base64 data at input byte 4"),
            "{err}"
        );
    }

    #[test]
    fn values_built_in_go_form_are_written_as_they_are() {
        // A bundle rendered from a bundle directory carries values that Go's
        // json.Marshal wrote, HTML escaped: they are written untouched, while
        // the typed strings next to them are not HTML escaped.
        let mut catalog = Catalog::default();
        catalog.bundles.push(Bundle {
            name: "b<1>".into(),
            package: "p".into(),
            image: "i\u{2028}".into(),
            properties: vec![Property::from_json("t", r#"{"k":"\u003cx\u003e\u2028"}"#).unwrap()],
            ..Bundle::default()
        });
        let json = to_string(&catalog, Format::Json).unwrap();
        assert!(json.contains(r#""name": "b<1>""#), "{json}");
        assert!(json.contains(r#""image": "i\u2028""#), "{json}");
        assert!(json.contains(r#""k": "\u003cx\u003e\u2028""#), "{json}");
    }

    proptest::proptest! {
        /// Whatever the source escapes, the rendered catalog reads back as
        /// the same values: typed strings equal, raw values equal as JSON
        /// (numbers as float64).
        #[test]
        fn rendered_catalogs_read_back_as_the_values_read(
            description in proptest::prelude::any::<String>(),
            value in crate::go_json::tests::json_value(),
            ascii in proptest::prelude::any::<bool>(),
        ) {
            use crate::go_json::tests::{ascii_json, same_value};
            use serde_json::{Value, json};
            let encode = |v: &Value| if ascii { ascii_json(v) } else { v.to_string() };
            let text = format!(
                "{}\n{}",
                encode(&json!({
                    "schema": "olm.package", "name": "p", "defaultChannel": "s",
                    "description": description,
                    "properties": [{"type": "t", "value": value}],
                })),
                encode(&json!({"schema": "vendor.thing", "package": "p", "v": value})),
            );
            let rendered = render_json(&text).unwrap();
            let docs: Vec<Value> = serde_json::Deserializer::from_str(&rendered)
                .into_iter()
                .collect::<Result<_, _>>()
                .unwrap();
            proptest::prop_assert_eq!(docs.len(), 2);
            // An empty description is left out, as Go's omitempty does.
            let read = docs[0].get("description").and_then(Value::as_str).unwrap_or_default();
            proptest::prop_assert_eq!(read, description.as_str());
            proptest::prop_assert!(same_value(&docs[0]["properties"][0]["value"], &value));
            proptest::prop_assert!(same_value(&docs[1]["v"], &value));
        }
    }
    /// A bundle with its payloads given apart, as a render that reads them
    /// back writes it.
    fn bundle_apart() -> impl proptest::strategy::Strategy<Value = (Bundle, Vec<Box<str>>)> {
        use proptest::prelude::*;
        let text = "[a-z<>&\"\\\\/\u{7f}\u{e9}\u{2028}\u{2029}\u{1F600}\u{0}-\u{1f}]{0,8}";
        // Held as read: compact, or with spaces and newlines.
        let raw = (crate::go_json::tests::json_value(), any::<bool>())
            .prop_map(|(v, pretty)| {
                let json = match pretty {
                    true => serde_json::to_string_pretty(&v).unwrap(),
                    false => v.to_string(),
                };
                RawValue::from_string(json).unwrap()
            })
            .boxed();
        let extra = prop::collection::vec((text, raw.clone()), 0..3);
        let kind = prop_oneof![
            Just(crate::property::BUNDLE_OBJECT.to_owned()),
            Just(crate::property::CSV_METADATA.to_owned()),
            Just(crate::property::PACKAGE.to_owned()),
            text,
        ];
        let property = (kind, raw.clone(), extra.clone()).prop_map(|(t, value, extra)| Property {
            type_: t.to_string(),
            value,
            extra,
        });
        let image = (text, text, extra.clone()).prop_map(|(name, image, extra)| RelatedImage {
            name,
            image,
            extra: ExtraFields(extra),
        });
        (
            (text, text, text),
            prop::collection::vec(property, 0..5),
            prop::collection::vec(image, 0..3),
            extra,
        )
            .prop_map(
                |((name, package, image), properties, related_images, extra)| {
                    let full = Bundle {
                        name,
                        package,
                        image,
                        properties,
                        related_images,
                        extra: ExtraFields(extra),
                        origin: Default::default(),
                    };
                    let mut lean = full.clone();
                    let mut payloads = Vec::new();
                    for p in lean.properties.iter_mut().filter(|p| is_payload(p)) {
                        let value = std::mem::replace(
                            &mut p.value,
                            RawValue::from_string("null".into()).unwrap(),
                        );
                        payloads.push(Box::<str>::from(value));
                    }
                    (lean, payloads)
                },
            )
    }

    proptest::proptest! {
        #[test]
        fn bundles_written_field_by_field_match_the_serializer((lean, payloads) in bundle_apart()) {
            let mut full = lean.clone();
            let mut values = payloads.iter();
            for p in full.properties.iter_mut().filter(|p| is_payload(p)) {
                p.value = RawValue::from_string(values.next().unwrap().to_string()).unwrap();
            }
            let mut want = Vec::new();
            write_docs(&[Doc::Bundle(&full)], Format::Json, &mut want, "test", None).unwrap();
            let mut text = String::new();
            write_bundle_json(&lean, &payloads, &mut text);
            escape_line_separators(&mut text);
            text.push('\n');
            proptest::prop_assert_eq!(text, String::from_utf8(want).unwrap());
        }
    }
}
