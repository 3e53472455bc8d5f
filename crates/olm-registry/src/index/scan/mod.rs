//! Reading a catalog directory once, as a stream of documents: each file is
//! read in chunks, split into documents (JSON values or YAML documents), and
//! each document is reduced to the few fields the index keeps plus its byte
//! range. Nothing but the current document is held in memory.
//!
//! JSON documents are referenced where they are in their file. YAML documents
//! are converted once to compact JSON and appended to a spill file (an
//! anonymous temporary file), so every document is read back the same way.

use std::{
    borrow::Cow,
    fs::File,
    io::{self, BufWriter, Read, Write},
    path::{Path, PathBuf},
    sync::atomic::{AtomicBool, AtomicUsize, Ordering},
};

use serde::Deserialize;
use serde_json::value::RawValue;

use olm_catalog::{
    fbc::check_payload_value,
    go_json,
    validate::{Rule, message},
};

use crate::{
    error::{IndexError, Problem},
    limits::IndexLimits,
};

/// How much of a file is read at a time.
pub(crate) const READ_CHUNK: usize = 1 << 20;

mod files;

pub(crate) use files::list_files;

/// Where a document's bytes are: a store (a source file or a spill file), a
/// byte offset and a length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BlobRef {
    pub(crate) store: u32,
    pub(crate) offset: u64,
    pub(crate) len: u32,
}

/// Where a document starts in its source file, for error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct DocLoc {
    pub(crate) file: u32,
    pub(crate) offset: u64,
}

/// A group/version/kind triple as written in a property.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize, Default)]
#[serde(default)]
pub(crate) struct RawGvk {
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) kind: String,
}

/// An `olm.package` document.
#[derive(Debug)]
pub(crate) struct RawPackage {
    pub(crate) loc: DocLoc,
    pub(crate) name: String,
    pub(crate) default_channel: String,
    pub(crate) blob: BlobRef,
}

/// One entry of an `olm.channel` document.
#[derive(Debug, Default)]
pub(crate) struct RawEntry {
    pub(crate) name: String,
    pub(crate) replaces: String,
    pub(crate) skips: Vec<String>,
    pub(crate) skip_range: String,
}

/// An `olm.channel` document.
#[derive(Debug)]
pub(crate) struct RawChannel {
    pub(crate) loc: DocLoc,
    pub(crate) package: String,
    pub(crate) name: String,
    pub(crate) entries: Vec<RawEntry>,
}

/// An `olm.bundle` document, reduced to what the index keeps.
#[derive(Debug)]
pub(crate) struct RawBundle {
    pub(crate) loc: DocLoc,
    pub(crate) package: String,
    pub(crate) name: String,
    pub(crate) image: String,
    /// `(packageName, version)` of each `olm.package` property.
    pub(crate) package_properties: Vec<(String, String)>,
    /// `olm.gvk` properties, in document order, as indexes into the
    /// file's [`FileScan::gvks`] (a package repeats the same few APIs in
    /// every bundle, so this keeps the scan's memory small).
    pub(crate) provided: Vec<u32>,
    /// `olm.gvk.required` properties, likewise.
    pub(crate) required: Vec<u32>,
    /// How many `olm.bundle.object` properties the bundle has.
    pub(crate) objects: usize,
    /// How many `olm.csv.metadata` properties the bundle has.
    pub(crate) csv_metadata: usize,
    pub(crate) blob: BlobRef,
}

/// One entry of an `olm.deprecations` document.
#[derive(Debug)]
pub(crate) struct RawDeprecationEntry {
    pub(crate) schema: String,
    pub(crate) name: String,
    pub(crate) message: String,
}

/// An `olm.deprecations` document.
#[derive(Debug)]
pub(crate) struct RawDeprecations {
    pub(crate) loc: DocLoc,
    pub(crate) package: String,
    pub(crate) entries: Vec<RawDeprecationEntry>,
}

/// A document of any other schema.
#[derive(Debug)]
pub(crate) struct RawCustom {
    pub(crate) loc: DocLoc,
    pub(crate) schema: String,
    pub(crate) package: String,
    pub(crate) blob: BlobRef,
}

/// One catalog document, reduced.
#[derive(Debug)]
pub(crate) enum RawDoc {
    Package(RawPackage),
    Channel(RawChannel),
    Bundle(RawBundle),
    Deprecations(RawDeprecations),
    Custom(RawCustom),
}

/// A problem found while scanning, located by byte offset only.
#[derive(Debug)]
pub(crate) struct ScanProblem {
    pub(crate) loc: DocLoc,
    pub(crate) rule: Option<Rule>,
    pub(crate) message: String,
}

/// A source file of the catalog.
#[derive(Debug, Clone)]
pub(crate) struct SourceFile {
    /// Path relative to the catalog root.
    pub(crate) rel: PathBuf,
    pub(crate) len: u64,
    pub(crate) modified: Option<std::time::SystemTime>,
}

/// What scanning one file produced.
#[derive(Debug, Default)]
pub(crate) struct FileScan {
    pub(crate) docs: Vec<RawDoc>,
    pub(crate) problems: Vec<ScanProblem>,
    /// The distinct GVKs of the file's bundles.
    pub(crate) gvks: Vec<RawGvk>,
    gvk_ids: std::collections::HashMap<RawGvk, u32>,
}

impl FileScan {
    fn gvk_id(&mut self, gvk: RawGvk) -> u32 {
        if let Some(id) = self.gvk_ids.get(&gvk) {
            return *id;
        }
        let id = self.gvks.len() as u32;
        self.gvk_ids.insert(gvk.clone(), id);
        self.gvks.push(gvk);
        id
    }
}

/// Counters shared by the scanning threads, so limits hold for the whole
/// catalog and one thread's failure stops the others early.
#[derive(Debug, Default)]
pub(crate) struct ScanCounters {
    documents: AtomicUsize,
    packages: AtomicUsize,
    bundles: AtomicUsize,
    entries: AtomicUsize,
    pub(crate) abort: AtomicBool,
}

impl ScanCounters {
    fn add(
        counter: &AtomicUsize,
        n: usize,
        limit: usize,
        what: &'static str,
        field: &'static str,
    ) -> Result<(), IndexError> {
        let total = counter.fetch_add(n, Ordering::Relaxed) + n;
        if total > limit {
            Err(IndexError::LimitExceeded {
                what,
                field,
                limit: limit as u64,
            })
        } else {
            Ok(())
        }
    }
}

/// Reads a file in chunks and keeps the unconsumed tail in a buffer. The
/// buffer belongs to the scanning thread and is reused from file to file, so
/// scanning does not leave large freed blocks between the index's records.
struct ChunkReader<'b> {
    file: File,
    buf: &'b mut Vec<u8>,
    /// File offset of `buf[0]`.
    base: u64,
    /// Bytes of `buf` already consumed.
    pos: usize,
    eof: bool,
}

impl<'b> ChunkReader<'b> {
    fn new(file: File, buf: &'b mut Vec<u8>) -> Self {
        buf.clear();
        Self {
            file,
            buf,
            base: 0,
            pos: 0,
            eof: false,
        }
    }

    /// Drops the consumed bytes and reads up to `want` more.
    fn fill(&mut self, want: usize) -> io::Result<()> {
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.base += self.pos as u64;
            self.pos = 0;
        }
        let got = (&mut self.file).take(want as u64).read_to_end(self.buf)?;
        if got == 0 {
            self.eof = true;
        }
        Ok(())
    }

    fn rest(&self) -> &[u8] {
        &self.buf[self.pos..]
    }

    fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }
}

/// Appends converted documents to an anonymous temporary file.
pub(crate) struct SpillWriter {
    dir: PathBuf,
    store: u32,
    out: Option<(BufWriter<File>, u64)>,
}

impl SpillWriter {
    pub(crate) fn new(dir: PathBuf, store: u32) -> Self {
        Self {
            dir,
            store,
            out: None,
        }
    }

    fn append(&mut self, bytes: &[u8]) -> Result<BlobRef, IndexError> {
        let spill_err = |dir: &Path, source| IndexError::Spill {
            dir: dir.to_owned(),
            source,
        };
        if self.out.is_none() {
            let file = tempfile::tempfile_in(&self.dir).map_err(|e| spill_err(&self.dir, e))?;
            self.out = Some((BufWriter::with_capacity(1 << 16, file), 0));
        }
        let Some((out, len)) = self.out.as_mut() else {
            unreachable!("the spill file was just created");
        };
        out.write_all(bytes).map_err(|e| spill_err(&self.dir, e))?;
        let blob = BlobRef {
            store: self.store,
            offset: *len,
            len: u32::try_from(bytes.len()).map_err(|_| IndexError::LimitExceeded {
                what: "bytes in one document",
                field: "max_document_bytes",
                limit: u64::from(u32::MAX),
            })?,
        };
        *len += bytes.len() as u64;
        Ok(blob)
    }

    /// Flushes and returns the spill file, if any document was written.
    pub(crate) fn finish(self) -> Result<Option<File>, IndexError> {
        match self.out {
            None => Ok(None),
            Some((out, _)) => out.into_inner().map(Some).map_err(|e| IndexError::Spill {
                dir: self.dir.clone(),
                source: e.into_error(),
            }),
        }
    }
}

/// Scans one source file into reduced documents. `None` means the scan
/// stopped because another thread failed.
pub(crate) fn scan_file(
    root: &Path,
    file_index: u32,
    source: &SourceFile,
    limits: &IndexLimits,
    counters: &ScanCounters,
    spill: &mut SpillWriter,
    buf: &mut Vec<u8>,
) -> Result<Option<FileScan>, IndexError> {
    let path = root.join(&source.rel);
    let read_err = |source| IndexError::Read {
        path: path.clone(),
        source,
    };
    let file = File::open(&path).map_err(read_err)?;
    let mut reader = ChunkReader::new(file, buf);
    reader.fill(READ_CHUNK).map_err(read_err)?;
    let mut scan = FileScan::default();
    let mut ctx = DocContext {
        file_index,
        limits,
        counters,
        spill,
        scan: &mut scan,
    };
    // Like upstream's YAML-or-JSON decoder, the content decides the format:
    // a file whose first non-blank byte opens an object is a JSON stream.
    // A leading byte order mark is dropped, as upstream's decoder drops it.
    if reader.rest().starts_with(b"\xEF\xBB\xBF") {
        reader.pos += 3;
    }
    let first = reader.rest().iter().find(|b| !b.is_ascii_whitespace());
    let result = if first == Some(&b'{') {
        scan_json(&mut reader, &mut ctx)
    } else {
        scan_yaml(&mut reader, &mut ctx)
    };
    drop(std::mem::take(&mut scan.gvk_ids));
    drop(reader);
    // Keep the buffer for the next file, unless a huge document grew it.
    if buf.capacity() > 4 * READ_CHUNK {
        *buf = Vec::new();
    }
    match result {
        Ok(()) => Ok(Some(scan)),
        Err(ScanFailure::Aborted) => Ok(None),
        Err(ScanFailure::Io(source)) => Err(IndexError::Read { path, source }),
        Err(ScanFailure::Index(e)) => {
            counters.abort.store(true, Ordering::Relaxed);
            Err(e)
        }
    }
}

/// A failure that ends the scan of a file.
enum ScanFailure {
    Io(io::Error),
    Index(IndexError),
    /// Another thread failed; its error is the one reported.
    Aborted,
}

impl From<io::Error> for ScanFailure {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}

impl From<IndexError> for ScanFailure {
    fn from(e: IndexError) -> Self {
        Self::Index(e)
    }
}

struct DocContext<'a> {
    file_index: u32,
    limits: &'a IndexLimits,
    counters: &'a ScanCounters,
    spill: &'a mut SpillWriter,
    scan: &'a mut FileScan,
}

impl DocContext<'_> {
    fn problem(&mut self, offset: u64, message: impl Into<String>) {
        self.scan.problems.push(ScanProblem {
            loc: DocLoc {
                file: self.file_index,
                offset,
            },
            rule: None,
            message: message.into(),
        });
    }

    fn check_abort(&self) -> Result<(), ScanFailure> {
        if self.counters.abort.load(Ordering::Relaxed) {
            Err(ScanFailure::Aborted)
        } else {
            Ok(())
        }
    }

    fn too_big(&self) -> ScanFailure {
        self.counters.abort.store(true, Ordering::Relaxed);
        ScanFailure::Index(IndexError::LimitExceeded {
            what: "bytes in one document",
            field: "max_document_bytes",
            limit: self.limits.max_document_bytes as u64,
        })
    }
}

fn is_json_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// The result of trying to parse the next JSON value of a buffer.
enum NextJson<'a> {
    /// A whole value of `len` bytes; its head, or why the head did not parse
    /// (with the schema, when at least that could be read).
    Complete {
        len: usize,
        head: Result<Head<'a>, (serde_json::Error, MetaHead<'a>)>,
    },
    /// The buffer ends inside the value.
    Incomplete,
    /// Not JSON: the stream cannot be followed further.
    Invalid(serde_json::Error),
}

fn next_json(avail: &[u8]) -> NextJson<'_> {
    let mut stream = serde_json::Deserializer::from_slice(avail).into_iter::<Head<'_>>();
    match stream.next() {
        Some(Ok(head)) => NextJson::Complete {
            len: stream.byte_offset(),
            head: Ok(head),
        },
        Some(Err(e)) if e.is_eof() => NextJson::Incomplete,
        Some(Err(e)) => {
            // The document may be valid JSON of a custom schema whose fields
            // collide with ours in shape; read just its metadata to tell.
            let mut meta = serde_json::Deserializer::from_slice(avail).into_iter::<MetaHead<'_>>();
            match meta.next() {
                Some(Ok(m)) => NextJson::Complete {
                    len: meta.byte_offset(),
                    head: Err((e, m)),
                },
                Some(Err(e2)) if e2.is_eof() => NextJson::Incomplete,
                _ => NextJson::Invalid(e),
            }
        }
        None => NextJson::Incomplete,
    }
}

fn scan_json(reader: &mut ChunkReader<'_>, ctx: &mut DocContext<'_>) -> Result<(), ScanFailure> {
    loop {
        ctx.check_abort()?;
        // Skip the blanks between values, reading on as needed.
        loop {
            let skip = reader.rest().iter().take_while(|b| is_json_ws(**b)).count();
            reader.pos += skip;
            if !reader.rest().is_empty() || reader.eof {
                break;
            }
            reader.fill(READ_CHUNK)?;
        }
        if reader.rest().is_empty() {
            return Ok(());
        }
        let offset = reader.offset();
        match json_kind(reader.rest()[0]) {
            Kind::Object => {}
            // Upstream's serve passes a null document over.
            Kind::Null => {
                if reader.rest().len() < 4 && !reader.eof {
                    reader.fill(READ_CHUNK)?;
                    continue;
                }
                if reader.rest().starts_with(b"null") {
                    reader.pos += 4;
                    continue;
                }
                ctx.problem(offset, "invalid json: expected value");
                return Ok(());
            }
            // Not followed further: upstream stops at the first such value.
            Kind::Other(kind) => {
                ctx.problem(offset, not_an_object(kind));
                return Ok(());
            }
        }
        let avail = reader.rest();
        match next_json(avail) {
            NextJson::Complete { len, head } => {
                if len > ctx.limits.max_document_bytes {
                    return Err(ctx.too_big());
                }
                let doc = &avail[..len];
                let blob = BlobRef {
                    store: ctx.file_index,
                    offset,
                    len: len as u32,
                };
                match head {
                    Ok(head) => ctx.add_doc(offset, head, doc, || Ok(blob))?,
                    Err((err, meta)) => ctx.add_unparsed(offset, doc, err, meta, || Ok(blob))?,
                }
                reader.pos += len;
            }
            NextJson::Incomplete => {
                let have = avail.len();
                if reader.eof {
                    ctx.problem(offset, "unexpected end of file inside a json document");
                    return Ok(());
                }
                if have > ctx.limits.max_document_bytes {
                    return Err(ctx.too_big());
                }
                // Read at least as much again, so a large document is parsed
                // a bounded number of times.
                reader.fill(READ_CHUNK.max(have))?;
            }
            NextJson::Invalid(err) => {
                let at = offset + offset_in(avail, err.line(), err.column()) as u64;
                ctx.problem(at, format!("invalid json: {err}"));
                return Ok(());
            }
        }
    }
}

/// Byte offset of a 1-based line and column in `text`.
pub(crate) fn offset_in(text: &[u8], line: usize, column: usize) -> usize {
    let mut offset = 0;
    for _ in 1..line {
        match text[offset..].iter().position(|b| *b == b'\n') {
            Some(i) => offset += i + 1,
            None => return text.len(),
        }
    }
    (offset + column.saturating_sub(1)).min(text.len())
}

/// Finds the start of the next line that is a YAML document marker (`---`
/// alone or followed by a blank), at or after `from`.
fn next_yaml_marker(text: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i < text.len() {
        let line_end = text[i..]
            .iter()
            .position(|b| *b == b'\n')
            .map_or(text.len(), |p| i + p);
        let line = &text[i..line_end];
        if line.starts_with(b"---")
            && line
                .get(3)
                .is_none_or(|b| matches!(b, b' ' | b'\t' | b'\r'))
        {
            return Some(i);
        }
        i = line_end + 1;
    }
    None
}

/// Whether a YAML document has content: anything but blank lines, comments
/// and document markers.
fn yaml_has_content(doc: &[u8]) -> bool {
    doc.split(|b| *b == b'\n').any(|line| {
        let line = line.trim_ascii();
        !(line.is_empty()
            || line.starts_with(b"#")
            || line == b"..."
            || (line.starts_with(b"---") && line[3..].trim_ascii().is_empty()))
    })
}

fn scan_yaml(reader: &mut ChunkReader<'_>, ctx: &mut DocContext<'_>) -> Result<(), ScanFailure> {
    loop {
        ctx.check_abort()?;
        let avail = reader.rest();
        if avail.is_empty() && reader.eof {
            return Ok(());
        }
        // A document ends where the next marker line starts; the first line
        // of a document may itself be a marker.
        let first_line_end = avail
            .iter()
            .position(|b| *b == b'\n')
            .map_or(avail.len(), |p| p + 1);
        let end = match next_yaml_marker(avail, first_line_end) {
            Some(end) => end,
            None if reader.eof => avail.len(),
            None => {
                if avail.len() > ctx.limits.max_document_bytes {
                    return Err(ctx.too_big());
                }
                reader.fill(READ_CHUNK.max(avail.len()))?;
                continue;
            }
        };
        if end > ctx.limits.max_document_bytes {
            return Err(ctx.too_big());
        }
        let offset = reader.offset();
        let doc = &avail[..end];
        if yaml_has_content(doc) {
            match serde_yaml_ng::from_slice::<serde_json::Value>(doc) {
                // Upstream's serve passes a null document over.
                Ok(serde_json::Value::Null) => {}
                Ok(value) if !value.is_object() => {
                    let kind = match value {
                        serde_json::Value::Array(_) => "array",
                        serde_json::Value::String(_) => "string",
                        serde_json::Value::Bool(_) => "bool",
                        _ => "number",
                    };
                    ctx.problem(offset, not_an_object(kind));
                }
                Ok(value) => {
                    let json = go_json::to_string_decoded(&value, false);
                    drop(value);
                    let bytes = json.as_bytes();
                    let mut parsed =
                        serde_json::Deserializer::from_slice(bytes).into_iter::<Head<'_>>();
                    match parsed.next() {
                        Some(Ok(head)) => {
                            // Split borrows: the spill writer is used only if
                            // the document's schema needs its bytes later.
                            let spill = &mut *ctx.spill;
                            let blob = || spill.append(bytes);
                            add_doc_with(
                                ctx.file_index,
                                ctx.limits,
                                ctx.counters,
                                ctx.scan,
                                offset,
                                head,
                                bytes,
                                blob,
                            )?;
                        }
                        Some(Err(err)) => match serde_json::from_slice::<MetaHead<'_>>(bytes) {
                            Ok(meta) => {
                                let spill = &mut *ctx.spill;
                                let blob = || spill.append(bytes);
                                add_unparsed_with(
                                    ctx.file_index,
                                    ctx.scan,
                                    offset,
                                    bytes,
                                    err,
                                    meta,
                                    blob,
                                )?;
                            }
                            Err(_) => ctx.problem(offset, format!("invalid document: {err}")),
                        },
                        None => ctx.problem(offset, "empty document"),
                    }
                }
                Err(err) => {
                    let at = offset + err.location().map_or(0, |l| l.index() as u64);
                    ctx.problem(at, format!("invalid yaml: {err}"));
                }
            }
        }
        reader.pos += end;
    }
}

/// What a JSON value is, from its first byte.
enum Kind {
    Object,
    Null,
    /// Go's name for the kind.
    Other(&'static str),
}

fn json_kind(first: u8) -> Kind {
    match first {
        b'{' => Kind::Object,
        b'n' => Kind::Null,
        b'[' => Kind::Other("array"),
        b'"' => Kind::Other("string"),
        b't' | b'f' => Kind::Other("bool"),
        _ => Kind::Other("number"),
    }
}

/// A document that is not an object, in the words of upstream's loader
/// (which reads every document into a map first). Serde would read an
/// array into the document's fields by position; it is refused before.
fn not_an_object(kind: &str) -> String {
    format!(
        "invalid document: json: cannot unmarshal {kind} into Go value of type map[string]interface {{}}"
    )
}

/// The fields of any catalog document that the index reads. Unknown fields
/// are skipped without being copied; `properties` values are kept as raw
/// slices of the input and parsed only for the types the index needs.
#[derive(Debug, Deserialize)]
pub(crate) struct Head<'a> {
    #[serde(borrow, default)]
    schema: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    package: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "defaultChannel")]
    default_channel: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    image: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    entries: Option<Vec<HeadEntry<'a>>>,
    #[serde(borrow, default)]
    properties: Option<Vec<HeadProperty<'a>>>,
    /// An `olm.package`'s icon, checked as upstream's loader decodes it.
    #[serde(borrow, default, deserialize_with = "present_raw")]
    icon: Option<&'a RawValue>,
}

/// The part of an `olm.package` icon the index checks.
#[derive(Debug, Deserialize)]
struct HeadIcon<'a> {
    #[serde(borrow, default)]
    base64data: Option<Cow<'a, str>>,
}

/// Upstream's loader decodes `icon.base64data` into bytes and refuses the
/// catalog when that fails; so does the index (validate's `icon-invalid`).
fn check_icon(icon: &RawValue) -> Result<(), String> {
    let icon: Option<HeadIcon<'_>> =
        serde_json::from_str(icon.get()).map_err(|e| format!("invalid icon: {e}"))?;
    match icon.and_then(|i| i.base64data) {
        Some(data) => olm_catalog::go_json::decode_base64(&data)
            .map(drop)
            .map_err(message::icon_invalid),
        None => Ok(()),
    }
}

/// An entry of a channel or of a deprecations document (their fields differ,
/// and each reads only its own).
#[derive(Debug, Deserialize)]
struct HeadEntry<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    replaces: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    skips: Option<Vec<Cow<'a, str>>>,
    #[serde(borrow, default, rename = "skipRange")]
    skip_range: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    reference: Option<HeadReference<'a>>,
    #[serde(borrow, default)]
    message: Option<Cow<'a, str>>,
}

#[derive(Debug, Deserialize)]
struct HeadReference<'a> {
    #[serde(borrow, default)]
    schema: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
}

#[derive(Debug, Deserialize)]
struct HeadProperty<'a> {
    #[serde(borrow, default, rename = "type")]
    ty: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "present_raw")]
    value: Option<&'a RawValue>,
}

/// A field that is present, even as `null`, is `Some`; only a missing field
/// is `None` (Go's `json.RawMessage` makes the same difference).
pub(crate) fn present_raw<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// Only the identifying fields of a document.
#[derive(Debug, Deserialize)]
pub(crate) struct MetaHead<'a> {
    #[serde(borrow, default)]
    schema: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    package: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct PackageValue {
    #[serde(default, rename = "packageName")]
    package_name: String,
    #[serde(default)]
    version: String,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct PackageRequiredValue {
    #[serde(default, rename = "packageName")]
    package_name: String,
    #[serde(default, rename = "versionRange")]
    version_range: String,
}

/// The OLM schemas (anything else is a custom schema) and the property
/// types the index reads: olm-catalog's, the one home of FBC's names.
pub(crate) use olm_catalog::{
    fbc::{SCHEMA_BUNDLE, SCHEMA_CHANNEL, SCHEMA_DEPRECATIONS, SCHEMA_PACKAGE},
    property::{
        BUNDLE_OBJECT as PROPERTY_BUNDLE_OBJECT, CSV_METADATA as PROPERTY_CSV_METADATA,
        GVK as PROPERTY_GVK, GVK_REQUIRED as PROPERTY_GVK_REQUIRED, PACKAGE as PROPERTY_PACKAGE,
        PACKAGE_REQUIRED as PROPERTY_PACKAGE_REQUIRED,
    },
};

impl DocContext<'_> {
    fn add_doc(
        &mut self,
        offset: u64,
        head: Head<'_>,
        doc: &[u8],
        blob: impl FnOnce() -> Result<BlobRef, IndexError>,
    ) -> Result<(), ScanFailure> {
        add_doc_with(
            self.file_index,
            self.limits,
            self.counters,
            self.scan,
            offset,
            head,
            doc,
            blob,
        )
    }

    fn add_unparsed(
        &mut self,
        offset: u64,
        doc: &[u8],
        err: serde_json::Error,
        meta: MetaHead<'_>,
        blob: impl FnOnce() -> Result<BlobRef, IndexError>,
    ) -> Result<(), ScanFailure> {
        add_unparsed_with(self.file_index, self.scan, offset, doc, err, meta, blob)
    }
}

fn owned(s: Option<Cow<'_, str>>) -> String {
    s.map(Cow::into_owned).unwrap_or_default()
}

/// A document whose OLM fields did not parse: a custom-schema document is
/// fine (it is served as it is), an OLM-schema document is a problem.
fn add_unparsed_with(
    file_index: u32,
    scan: &mut FileScan,
    offset: u64,
    doc: &[u8],
    err: serde_json::Error,
    meta: MetaHead<'_>,
    blob: impl FnOnce() -> Result<BlobRef, IndexError>,
) -> Result<(), ScanFailure> {
    let loc = DocLoc {
        file: file_index,
        offset,
    };
    let schema = meta.schema.as_deref().unwrap_or("");
    match schema {
        SCHEMA_PACKAGE | SCHEMA_CHANNEL | SCHEMA_BUNDLE | SCHEMA_DEPRECATIONS | "" => {
            let at = offset + offset_in(doc, err.line(), err.column()) as u64;
            let what = if schema.is_empty() {
                "document"
            } else {
                schema
            };
            scan.problems.push(ScanProblem {
                loc: DocLoc {
                    file: file_index,
                    offset: at,
                },
                rule: None,
                message: format!("parse {what}: {err}"),
            });
        }
        _ => scan.docs.push(RawDoc::Custom(RawCustom {
            loc,
            schema: schema.to_owned(),
            package: owned(meta.package),
            blob: blob()?,
        })),
    }
    Ok(())
}

fn push_problem(scan: &mut FileScan, loc: DocLoc, rule: Option<Rule>, message: String) {
    scan.problems.push(ScanProblem { loc, rule, message });
}

#[allow(clippy::too_many_arguments)]
fn add_doc_with(
    file_index: u32,
    limits: &IndexLimits,
    counters: &ScanCounters,
    scan: &mut FileScan,
    offset: u64,
    head: Head<'_>,
    doc: &[u8],
    blob: impl FnOnce() -> Result<BlobRef, IndexError>,
) -> Result<(), ScanFailure> {
    let loc = DocLoc {
        file: file_index,
        offset,
    };
    let guard = |r: Result<(), IndexError>| {
        r.map_err(|e| {
            counters.abort.store(true, Ordering::Relaxed);
            ScanFailure::Index(e)
        })
    };
    guard(ScanCounters::add(
        &counters.documents,
        1,
        limits.max_documents,
        "documents",
        "max_documents",
    ))?;
    let schema = head.schema.as_deref().unwrap_or("");
    match schema {
        "" => {
            let preview: String = String::from_utf8_lossy(&doc[..doc.len().min(200)]).into_owned();
            push_problem(
                scan,
                loc,
                None,
                format!("object '{preview}' is missing root schema field"),
            );
        }
        SCHEMA_PACKAGE => {
            guard(ScanCounters::add(
                &counters.packages,
                1,
                limits.max_packages,
                "packages",
                "max_packages",
            ))?;
            if let Some(Err(message)) = head.icon.map(check_icon) {
                push_problem(scan, loc, Some(Rule::IconInvalid), message);
            }
            scan.docs.push(RawDoc::Package(RawPackage {
                loc,
                name: owned(head.name),
                default_channel: owned(head.default_channel),
                blob: blob()?,
            }));
        }
        SCHEMA_CHANNEL => {
            let entries: Vec<RawEntry> = head
                .entries
                .unwrap_or_default()
                .into_iter()
                .map(|e| RawEntry {
                    name: owned(e.name),
                    replaces: owned(e.replaces),
                    skips: e
                        .skips
                        .unwrap_or_default()
                        .into_iter()
                        .map(Cow::into_owned)
                        .collect(),
                    skip_range: owned(e.skip_range),
                })
                .collect();
            guard(ScanCounters::add(
                &counters.entries,
                entries.len(),
                limits.max_channel_entries,
                "channel entries",
                "max_channel_entries",
            ))?;
            scan.docs.push(RawDoc::Channel(RawChannel {
                loc,
                package: owned(head.package),
                name: owned(head.name),
                entries,
            }));
        }
        SCHEMA_BUNDLE => {
            guard(ScanCounters::add(
                &counters.bundles,
                1,
                limits.max_bundles,
                "bundles",
                "max_bundles",
            ))?;
            let name = owned(head.name);
            let mut bundle = RawBundle {
                loc,
                package: owned(head.package),
                name,
                image: owned(head.image),
                package_properties: Vec::new(),
                provided: Vec::new(),
                required: Vec::new(),
                objects: 0,
                csv_metadata: 0,
                blob: BlobRef {
                    store: 0,
                    offset: 0,
                    len: 0,
                },
            };
            let mut bad = None;
            for (i, property) in head.properties.unwrap_or_default().into_iter().enumerate() {
                let ty = property.ty.as_deref().unwrap_or("");
                let Some(value) = property.value else {
                    bad.get_or_insert_with(|| format!(
                        "parse properties for bundle {:?}: parse property[{i}] of type {ty:?}: value is missing",
                        bundle.name
                    ));
                    continue;
                };
                let parsed = match ty {
                    PROPERTY_PACKAGE => serde_json::from_str::<PackageValue>(value.get())
                        .map(|p| bundle.package_properties.push((p.package_name, p.version))),
                    PROPERTY_GVK => serde_json::from_str::<RawGvk>(value.get())
                        .map(|g| bundle.provided.push(scan.gvk_id(g))),
                    PROPERTY_GVK_REQUIRED => serde_json::from_str::<RawGvk>(value.get())
                        .map(|g| bundle.required.push(scan.gvk_id(g))),
                    PROPERTY_PACKAGE_REQUIRED => {
                        serde_json::from_str::<PackageRequiredValue>(value.get()).map(|_| ())
                    }
                    // Payloads are checked as upstream's cache build reads
                    // them (and as validate checks them), then left where
                    // they are until asked for.
                    PROPERTY_BUNDLE_OBJECT => {
                        bundle.objects += 1;
                        if let Err(err) = check_payload_value(ty, value) {
                            push_problem(
                                scan,
                                loc,
                                Some(Rule::InvalidBundleObject),
                                message::bundle_object_invalid(&bundle.package, &bundle.name, err),
                            );
                        }
                        Ok(())
                    }
                    PROPERTY_CSV_METADATA => {
                        bundle.csv_metadata += 1;
                        if let Err(err) = check_payload_value(ty, value) {
                            bad.get_or_insert_with(|| message::property_invalid(&bundle.name, err));
                        }
                        Ok(())
                    }
                    _ => Ok(()),
                };
                if let Err(err) = parsed {
                    bad.get_or_insert_with(|| format!(
                        "parse properties for bundle {:?}: parse property[{i}] of type {ty:?}: {err}",
                        bundle.name
                    ));
                }
            }
            // The bundle stays known even with a bad property, so the
            // catalog is refused for that property alone (as validate
            // refuses it), not also for channel entries naming the bundle.
            if let Some(message) = bad {
                push_problem(scan, loc, Some(Rule::InvalidProperty), message);
            }
            bundle.blob = blob()?;
            scan.docs.push(RawDoc::Bundle(bundle));
        }
        SCHEMA_DEPRECATIONS => {
            let entries = head
                .entries
                .unwrap_or_default()
                .into_iter()
                .map(|e| {
                    let (schema, name) = e
                        .reference
                        .map(|r| (owned(r.schema), owned(r.name)))
                        .unwrap_or_default();
                    RawDeprecationEntry {
                        schema,
                        name,
                        message: owned(e.message),
                    }
                })
                .collect();
            scan.docs.push(RawDoc::Deprecations(RawDeprecations {
                loc,
                package: owned(head.package),
                entries,
            }));
        }
        custom => scan.docs.push(RawDoc::Custom(RawCustom {
            loc,
            schema: custom.to_owned(),
            package: owned(head.package),
            blob: blob()?,
        })),
    }
    Ok(())
}

/// Turns scan problems into located [`Problem`]s, reading each affected file
/// once, in chunks, to turn offsets into line numbers (only on this error
/// path).
pub(crate) fn locate(root: &Path, files: &[SourceFile], problems: &[ScanProblem]) -> Vec<Problem> {
    let mut sorted: Vec<&ScanProblem> = problems.iter().collect();
    sorted.sort_by_key(|p| p.loc);
    let mut out: Vec<Problem> = Vec::with_capacity(problems.len());
    let mut i = 0;
    while i < sorted.len() {
        let file_index = sorted[i].loc.file;
        let end = i + sorted[i..]
            .iter()
            .take_while(|p| p.loc.file == file_index)
            .count();
        let file = &files[file_index as usize];
        let offsets: Vec<u64> = sorted[i..end].iter().map(|p| p.loc.offset).collect();
        let lines = line_numbers(&root.join(&file.rel), &offsets);
        for (k, p) in sorted[i..end].iter().enumerate() {
            out.push(Problem {
                path: file.rel.clone(),
                offset: Some(p.loc.offset),
                line: lines.as_ref().map(|l| l[k]),
                message: p.message.clone(),
                rule: p.rule,
            });
        }
        i = end;
    }
    out
}

/// The 1-based line of each of the sorted `offsets` in the file.
fn line_numbers(path: &Path, offsets: &[u64]) -> Option<Vec<u64>> {
    let mut file = File::open(path).ok()?;
    let mut buf = vec![0u8; READ_CHUNK];
    let mut lines = Vec::with_capacity(offsets.len());
    let (mut pos, mut line) = (0u64, 1u64);
    let mut next = 0;
    while next < offsets.len() {
        let n = file.read(&mut buf).ok()?;
        let chunk = &buf[..n];
        while next < offsets.len() && (n == 0 || offsets[next] < pos + n as u64) {
            let upto = offsets[next].saturating_sub(pos).min(n as u64) as usize;
            lines.push(line + chunk[..upto].iter().filter(|b| **b == b'\n').count() as u64);
            next += 1;
        }
        if n == 0 {
            break;
        }
        line += chunk.iter().filter(|b| **b == b'\n').count() as u64;
        pos += n as u64;
    }
    Some(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_markers_start_documents() {
        let text = b"---\na: 1\n---\nb: 2\n--- # c\n---x: 3\n";
        assert_eq!(next_yaml_marker(text, 4), Some(9));
        assert_eq!(next_yaml_marker(text, 10), Some(18));
        assert_eq!(next_yaml_marker(text, 19), None);
        assert!(!yaml_has_content(b"---\n# only a comment\n\n"));
        assert!(yaml_has_content(b"---\nschema: olm.package\n"));
    }

    #[test]
    fn offsets_follow_lines_and_columns() {
        let text = b"ab\ncd\nef";
        assert_eq!(offset_in(text, 1, 1), 0);
        assert_eq!(offset_in(text, 2, 2), 4);
        assert_eq!(offset_in(text, 9, 1), text.len());
    }
}
