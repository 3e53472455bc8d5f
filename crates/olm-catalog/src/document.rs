//! Decoding of YAML and JSON files into JSON documents, within [`Limits`].
//!
//! A file is read the way upstream's `k8s.io/apimachinery` `YAMLOrJSONDecoder`
//! reads it: if its first non-whitespace character is `{` it is a stream of
//! concatenated JSON values, otherwise a stream of YAML documents separated by
//! lines that start with `---` (only a comment may follow the marker). Every
//! document is handed on as JSON text: JSON documents as the exact bytes of the
//! input (so opaque values are kept byte for byte), YAML documents converted.
//!
//! Decisions, where upstream's behaviour is undefined or unhelpful:
//!
//! * **Empty documents** (only whitespace and comments, or `null`) are skipped,
//!   as upstream's `opm serve` skips them. Upstream's `validate` and `render`
//!   pass them on and then fail with "missing root schema field"; a stray
//!   `---` is not worth a failed catalog (docs/opm.md lists the difference).
//! * **Duplicate keys**: the last value wins, as in upstream's decoders (Go's
//!   `encoding/json` and non-strict YAML), so that every catalog upstream
//!   accepts loads here (one of operator-registry's own fixtures repeats a
//!   key). Unlike upstream, every duplicate is recorded with its document,
//!   and validation reports it as a warning, so nothing is lost silently.
//!   Values kept opaque (property values and unknown fields of JSON
//!   documents) are stored byte for byte, duplicates included.
//! * **Nesting** deeper than [`Limits::max_nesting_depth`] is an error for
//!   every document, JSON or YAML. For YAML it is checked twice: on the
//!   parsed tree, and before parsing on the raw brackets (`[`, `{`), counted
//!   wherever they appear, even in strings and comments. The YAML parser
//!   (libyaml) spends time proportional to the flow nesting on every token,
//!   so a deeply bracketed document would otherwise take hours to reject; a
//!   real document never has a hundred unclosed brackets in a row.
//! * **Encoding**: files must be UTF-8; a leading byte order mark is dropped.
//! * **YAML scalars** follow YAML 1.2 (serde_yaml_ng): `yes`, `on` and a bare
//!   `=` are strings, as Go's YAML reads them for the fields OLM uses.
//! * **Non-string mapping keys** in YAML (`1:`, `true:`) become strings, as in
//!   Go's `sigs.k8s.io/yaml`; a sequence or mapping as a key is an error.

use std::{
    borrow::Cow,
    cell::{Cell, RefCell},
    fmt,
    ops::ControlFlow,
    sync::Arc,
};

use serde::de::{
    self, Deserialize, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess,
    VariantAccess, Visitor,
};
use serde_json::{Map, Number, Value, value::RawValue};

use crate::{
    limits::Limits,
    location::{Location, Origin},
};

/// Why a file or one of its documents could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{location}: {kind}")]
pub struct DocumentError {
    /// Where: the file, and the document and field when known.
    pub location: Location,
    /// What went wrong.
    pub kind: DocumentErrorKind,
}

impl DocumentError {
    pub(crate) fn new(location: Location, kind: DocumentErrorKind) -> Self {
        Self { location, kind }
    }
}

/// What went wrong while decoding a file or document.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DocumentErrorKind {
    /// The file is larger than [`Limits::max_file_bytes`].
    #[error("file is {size} bytes, more than the limit of {limit} bytes")]
    FileTooLarge {
        /// The file's size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The file is not UTF-8.
    #[error("file is not valid utf-8 (invalid byte at offset {offset})")]
    InvalidUtf8 {
        /// Offset of the first invalid byte.
        offset: usize,
    },
    /// A document is larger than [`Limits::max_document_bytes`].
    #[error("document is {size} bytes, more than the limit of {limit} bytes")]
    DocumentTooLarge {
        /// The document's size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// The file has more than [`Limits::max_documents_per_file`] documents.
    #[error("file has more than {limit} documents")]
    TooManyDocuments {
        /// The limit.
        limit: usize,
    },
    /// A line starts with `---` and continues with something other than a
    /// comment.
    #[error("invalid yaml document separator {line:?}: only a comment may follow '---'")]
    BadSeparator {
        /// The separator line.
        line: String,
    },
    /// The YAML does not parse.
    #[error("invalid yaml: {message}")]
    Yaml {
        /// The parser's message.
        message: String,
    },
    /// The JSON does not parse.
    #[error("invalid json: {message}")]
    Json {
        /// The parser's message.
        message: String,
    },
    /// Mappings and sequences nest deeper than [`Limits::max_nesting_depth`].
    #[error("nesting is deeper than the limit of {limit} levels")]
    TooDeep {
        /// The limit.
        limit: usize,
    },
    /// A YAML mapping key is a sequence or a mapping.
    #[error("mapping keys must be scalars")]
    NonScalarKey,
    /// A YAML number is infinite or not a number, which JSON cannot carry.
    #[error("number {value} cannot be represented in json")]
    NonFiniteNumber {
        /// The number as Rust prints it.
        value: String,
    },
    /// The document has no `schema` (or an empty one).
    #[error("object is missing root schema field")]
    MissingSchema,
    /// The document is not a mapping.
    #[error("document is not an object (found {found})")]
    NotAnObject {
        /// What was found instead.
        found: &'static str,
    },
    /// A field has the wrong type or shape.
    #[error("{message}")]
    InvalidField {
        /// The decoder's message.
        message: String,
    },
}

/// One document of a file, as JSON text.
#[derive(Debug, Clone)]
pub(crate) struct RawDocument<'a> {
    /// Where the document is.
    pub origin: Origin,
    /// The document as JSON: borrowed from a JSON file, converted from YAML.
    pub json: Cow<'a, str>,
    /// Keys that appeared more than once in a mapping of a YAML document
    /// (the last value was kept).
    pub duplicate_keys: Vec<String>,
    /// The top-level fields of a document of a JSON file, read while the
    /// file was split (or what the document is instead of an object), so
    /// that [`Fields`] need not read `json` again. `None` for YAML.
    pub fields: Option<Found<'a>>,
}

/// A JSON value read as an object's fields: the fields, or what was found
/// instead of an object.
pub(crate) type Found<'a> = Result<FieldEntries<'a>, &'static str>;

/// [`Found`] as something serde reads: one pass over the value keeps each
/// field's value as raw JSON borrowed from the input.
pub(crate) struct ObjectFields<'a>(pub(crate) Found<'a>);

impl<'de> Deserialize<'de> for ObjectFields<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(FieldsVisitor).map(Self)
    }
}

/// Checks a file's size and encoding and returns its text.
pub(crate) fn decode_text<'a>(
    file: &Arc<str>,
    bytes: &'a [u8],
    limits: &Limits,
) -> Result<&'a str, DocumentError> {
    let file_location = || Origin::new(file.clone(), 0, 0).location();
    let size = bytes.len() as u64;
    if size > limits.max_file_bytes {
        return Err(DocumentError::new(
            file_location(),
            DocumentErrorKind::FileTooLarge {
                size,
                limit: limits.max_file_bytes,
            },
        ));
    }
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    std::str::from_utf8(bytes).map_err(|e| {
        DocumentError::new(
            file_location(),
            DocumentErrorKind::InvalidUtf8 {
                offset: e.valid_up_to(),
            },
        )
    })
}

/// Whether upstream's decoder would read `text` as JSON.
fn looks_like_json(text: &str) -> bool {
    text.trim_start().starts_with('{')
}

/// Calls `each` with every non-empty document of `text`, in order, until it
/// returns [`ControlFlow::Break`].
pub(crate) fn for_each_document<'a, E: From<DocumentError>>(
    file: &Arc<str>,
    text: &'a str,
    limits: &Limits,
    mut each: impl FnMut(RawDocument<'a>) -> Result<ControlFlow<()>, E>,
) -> Result<(), E> {
    if looks_like_json(text) {
        for_each_json_document(file, text, limits, &mut each)
    } else {
        for_each_yaml_document(file, text, limits, &mut each)
    }
}

/// Counts lines up to increasing byte offsets without rescanning.
struct LineCounter<'a> {
    bytes: &'a [u8],
    offset: usize,
    line: usize,
}

impl<'a> LineCounter<'a> {
    fn new(text: &'a str) -> Self {
        Self {
            bytes: text.as_bytes(),
            offset: 0,
            line: 1,
        }
    }

    /// The 1-based line of `offset`, which must not be smaller than the offset
    /// of the previous call.
    fn line_at(&mut self, offset: usize) -> usize {
        let end = offset.min(self.bytes.len());
        if end > self.offset {
            self.line += memchr::memchr_iter(b'\n', &self.bytes[self.offset..end]).count();
            self.offset = end;
        }
        self.line
    }
}

fn check_document_count<E: From<DocumentError>>(
    origin: &Origin,
    index: usize,
    limits: &Limits,
) -> Result<(), E> {
    if index >= limits.max_documents_per_file {
        return Err(DocumentError::new(
            origin.location(),
            DocumentErrorKind::TooManyDocuments {
                limit: limits.max_documents_per_file,
            },
        )
        .into());
    }
    Ok(())
}

fn check_document_size<E: From<DocumentError>>(
    origin: &Origin,
    size: usize,
    limits: &Limits,
) -> Result<(), E> {
    if size > limits.max_document_bytes {
        return Err(DocumentError::new(
            origin.location(),
            DocumentErrorKind::DocumentTooLarge {
                size,
                limit: limits.max_document_bytes,
            },
        )
        .into());
    }
    Ok(())
}

fn for_each_json_document<'a, E: From<DocumentError>>(
    file: &Arc<str>,
    text: &'a str,
    limits: &Limits,
    each: &mut impl FnMut(RawDocument<'a>) -> Result<ControlFlow<()>, E>,
) -> Result<(), E> {
    let mut lines = LineCounter::new(text);
    let base = text.as_ptr() as usize;
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<ObjectFields<'a>>();
    let mut index = 0;
    loop {
        let before = stream.byte_offset();
        let found = match stream.next() {
            None => return Ok(()),
            Some(Ok(ObjectFields(found))) => found,
            Some(Err(err)) => {
                let line = if err.line() > 0 {
                    err.line()
                } else {
                    lines.line_at(before)
                };
                let origin = Origin::new(file.clone(), index, line);
                return Err(DocumentError::new(
                    origin.location(),
                    DocumentErrorKind::Json {
                        message: json_error_message(&err),
                    },
                )
                .into());
            }
        };
        // The stream stops right after a value, and skips whitespace only
        // before the next one.
        let json = text[before..stream.byte_offset()].trim_start_matches([' ', '\n', '\t', '\r']);
        let start = (json.as_ptr() as usize).saturating_sub(base);
        let origin =
            Origin::new(file.clone(), index, lines.line_at(start)).with_bytes(start, json.len());
        check_document_count(&origin, index, limits)?;
        check_document_size(&origin, json.len(), limits)?;
        if json_nesting_exceeds(json, limits.max_nesting_depth) {
            return Err(DocumentError::new(
                origin.location(),
                DocumentErrorKind::TooDeep {
                    limit: limits.max_nesting_depth,
                },
            )
            .into());
        }
        index += 1;
        if each(RawDocument {
            origin,
            json: Cow::Borrowed(json),
            duplicate_keys: Vec::new(),
            fields: Some(found),
        })?
        .is_break()
        {
            return Ok(());
        }
    }
}

/// Whether the JSON text nests arrays and objects deeper than `limit`.
/// The text has been validated by serde_json already.
pub(crate) fn json_nesting_exceeds(json: &str, limit: usize) -> bool {
    let bytes = json.as_bytes();
    // Nesting deeper than the limit takes more opening brackets than it:
    // text with no more of them (most documents, and nearly every property
    // value) is answered by one count, which the compiler vectorizes,
    // without stepping through strings.
    let opening = bytes.iter().filter(|&&b| b == b'[' || b == b'{').count();
    if opening <= limit {
        return false;
    }
    let mut depth = 0usize;
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'"' => {
                i += 1;
                // Skip the string: find its closing quote, stepping over
                // escapes. Strings are where catalogs keep their bulk (base64
                // manifests), so this is done with memchr.
                loop {
                    let Some(rest) = bytes.get(i..) else {
                        return false;
                    };
                    match memchr::memchr2(b'"', b'\\', rest) {
                        Some(j) if rest[j] == b'\\' => i += j + 2,
                        Some(j) => {
                            i += j + 1;
                            break;
                        }
                        None => return false,
                    }
                }
                continue;
            }
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    false
}

/// Whether `[` and `{` nest deeper than `limit` in `text`, counting every
/// bracket (see the module documentation for why quotes are not skipped).
fn brackets_nest_deeper_than(text: &str, limit: usize) -> bool {
    let mut depth = 0usize;
    for &b in text.as_bytes() {
        match b {
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// Whether a YAML chunk has nothing but blank lines and comments.
fn yaml_is_blank(chunk: &str) -> bool {
    chunk.lines().all(|l| {
        let t = l.trim();
        t.is_empty() || t.starts_with('#')
    })
}

fn for_each_yaml_document<'a, E: From<DocumentError>>(
    file: &Arc<str>,
    text: &'a str,
    limits: &Limits,
    each: &mut impl FnMut(RawDocument<'a>) -> Result<ControlFlow<()>, E>,
) -> Result<(), E> {
    let mut index = 0;
    let mut chunk_start = 0usize;
    let mut chunk_line = 1usize;
    let mut offset = 0usize;
    let mut emit =
        |start: usize, end: usize, first_line: usize, index: &mut usize| -> Result<bool, E> {
            let chunk = &text[start..end];
            if yaml_is_blank(chunk) {
                return Ok(true);
            }
            let origin =
                Origin::new(file.clone(), *index, first_line).with_bytes(start, end - start);
            check_document_count(&origin, *index, limits)?;
            check_document_size(&origin, chunk.len(), limits)?;
            if brackets_nest_deeper_than(chunk, limits.max_nesting_depth) {
                return Err(DocumentError::new(
                    origin.location(),
                    DocumentErrorKind::TooDeep {
                        limit: limits.max_nesting_depth,
                    },
                )
                .into());
            }
            let (value, duplicate_keys) = yaml_to_json_value(chunk, &origin, limits)?;
            if value.is_null() {
                return Ok(true);
            }
            let json = serde_json::to_string(&value).map_err(|e| {
                DocumentError::new(
                    origin.location(),
                    DocumentErrorKind::Json {
                        message: json_error_message(&e),
                    },
                )
            })?;
            *index += 1;
            Ok(each(RawDocument {
                origin,
                json: Cow::Owned(json),
                duplicate_keys,
                fields: None,
            })?
            .is_continue())
        };
    for (line_no, line) in (1usize..).zip(text.split_inclusive('\n')) {
        let line_start = offset;
        offset += line.len();
        if let Some(rest) = line.strip_prefix("---") {
            let rest = rest.trim();
            if !rest.is_empty() && !rest.starts_with('#') {
                let origin = Origin::new(file.clone(), index, line_no);
                return Err(DocumentError::new(
                    origin.location(),
                    DocumentErrorKind::BadSeparator {
                        line: line.trim_end().to_owned(),
                    },
                )
                .into());
            }
            if line_start > chunk_start && !emit(chunk_start, line_start, chunk_line, &mut index)? {
                return Ok(());
            }
            chunk_start = offset;
            chunk_line = line_no + 1;
        }
    }
    if text.len() > chunk_start {
        emit(chunk_start, text.len(), chunk_line, &mut index)?;
    }
    Ok(())
}

/// Converts one YAML document to a JSON value within the nesting limit, and
/// lists the keys that were repeated.
fn yaml_to_json_value(
    chunk: &str,
    origin: &Origin,
    limits: &Limits,
) -> Result<(Value, Vec<String>), DocumentError> {
    let failure = Cell::new(None);
    let duplicates = RefCell::new(Vec::new());
    let seed = CheckedValue {
        depth_left: limits.max_nesting_depth,
        failure: &failure,
        duplicates: &duplicates,
    };
    let de = serde_yaml_ng::Deserializer::from_str(chunk);
    match seed.deserialize(de) {
        Ok(value) => Ok((value, duplicates.into_inner())),
        Err(err) => {
            let kind = match failure.take() {
                Some(f) => f.into_kind(limits),
                None => DocumentErrorKind::Yaml {
                    message: yaml_error_message(&err, origin.line),
                },
            };
            // Point at the line of the failure where the parser knows it.
            let line = err
                .location()
                .map(|l| origin.line + l.line().saturating_sub(1))
                .unwrap_or(origin.line);
            let at = Origin::new(origin.file.clone(), origin.document, line);
            Err(DocumentError::new(at.location(), kind))
        }
    }
}

/// A serde_yaml_ng message with its chunk-relative line numbers made
/// absolute (libyaml messages can name two positions).
fn yaml_error_message(err: &serde_yaml_ng::Error, first_line: usize) -> String {
    let message = err.to_string();
    let mut out = String::with_capacity(message.len());
    let mut rest = message.as_str();
    while let Some(i) = rest.find("line ") {
        let (before, after) = rest.split_at(i + "line ".len());
        out.push_str(before);
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        match after[..digits].parse::<usize>() {
            Ok(line) => out.push_str(&(first_line + line.saturating_sub(1)).to_string()),
            Err(_) => out.push_str(&after[..digits]),
        }
        rest = &after[digits..];
    }
    out.push_str(rest);
    out
}

/// A serde_json message without the position suffix, which is relative to the
/// value being decoded and would mislead.
pub(crate) fn json_error_message(err: &serde_json::Error) -> String {
    let message = err.to_string();
    let suffix = format!(" at line {} column {}", err.line(), err.column());
    match message.strip_suffix(&suffix) {
        Some(bare) => bare.to_owned(),
        None => message,
    }
}

/// Why [`CheckedValue`] refused a document; reported through a side channel
/// so that the error keeps its structure through the YAML deserializer.
enum Failure {
    TooDeep,
    NonScalarKey,
    NonFinite(f64),
}

impl Failure {
    fn into_kind(self, limits: &Limits) -> DocumentErrorKind {
        match self {
            Self::TooDeep => DocumentErrorKind::TooDeep {
                limit: limits.max_nesting_depth,
            },
            Self::NonScalarKey => DocumentErrorKind::NonScalarKey,
            Self::NonFinite(v) => DocumentErrorKind::NonFiniteNumber {
                value: v.to_string(),
            },
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooDeep => f.write_str("nesting too deep"),
            Self::NonScalarKey => f.write_str("mapping keys must be scalars"),
            Self::NonFinite(v) => write!(f, "non-finite number {v}"),
        }
    }
}

/// Deserializes any value into a [`Value`], counting nesting and noting
/// repeated keys (the last value wins).
#[derive(Clone, Copy)]
struct CheckedValue<'c> {
    depth_left: usize,
    failure: &'c Cell<Option<Failure>>,
    duplicates: &'c RefCell<Vec<String>>,
}

impl CheckedValue<'_> {
    fn fail<E: de::Error>(&self, failure: Failure) -> E {
        let message = failure.to_string();
        self.failure.set(Some(failure));
        E::custom(message)
    }

    fn nested<E: de::Error>(&self) -> Result<Self, E> {
        match self.depth_left.checked_sub(1) {
            Some(depth_left) => Ok(Self {
                depth_left,
                ..*self
            }),
            None => Err(self.fail(Failure::TooDeep)),
        }
    }

    fn float<E: de::Error>(&self, v: f64) -> Result<Value, E> {
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| self.fail(Failure::NonFinite(v)))
    }
}

impl<'de> DeserializeSeed<'de> for CheckedValue<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for CheckedValue<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Value, E> {
        match i64::try_from(v) {
            Ok(v) => Ok(Value::Number(v.into())),
            // Go reads integers beyond 64 bits as float64.
            Err(_) => self.float(v as f64),
        }
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Value, E> {
        match u64::try_from(v) {
            Ok(v) => Ok(Value::Number(v.into())),
            Err(_) => self.float(v as f64),
        }
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        self.float(v)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Value, E> {
        Ok(Value::String(String::from_utf8_lossy(v).into_owned()))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        self.deserialize(deserializer)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Value, D::Error> {
        self.deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let child = self.nested()?;
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(item) = seq.next_element_seed(child)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let child = self.nested()?;
        let mut object = Map::new();
        while let Some(key) = map.next_key_seed(KeySeed { value: self })? {
            let value = map.next_value_seed(child)?;
            if object.contains_key(&key) {
                self.duplicates.borrow_mut().push(key.clone());
            }
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Value, A::Error> {
        // A YAML value with a custom tag (`!Foo bar`): keep the value, drop
        // the tag, as Go's YAML-to-JSON conversion does.
        let (_tag, variant): (de::IgnoredAny, _) = data.variant()?;
        variant.newtype_variant_seed(self)
    }
}

/// Deserializes a mapping key, turning scalar keys into strings.
struct KeySeed<'c> {
    value: CheckedValue<'c>,
}

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<String, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_> {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a scalar mapping key")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        Ok(v.to_owned())
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<String, E> {
        Ok(v)
    }

    fn visit_unit<E: de::Error>(self) -> Result<String, E> {
        Ok("null".to_owned())
    }

    fn visit_none<E: de::Error>(self) -> Result<String, E> {
        Ok("null".to_owned())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<String, A::Error> {
        Err(self.value.fail(Failure::NonScalarKey))
    }

    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<String, A::Error> {
        Err(self.value.fail(Failure::NonScalarKey))
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<String, A::Error> {
        let (_tag, variant): (de::IgnoredAny, _) = data.variant()?;
        variant.newtype_variant_seed(self)
    }
}

/// Parses JSON text into a [`Value`] within the nesting limit (a repeated key
/// keeps its last value, as in Go). Used where an opaque value must become a
/// tree (rendering YAML, decoding a property).
pub(crate) fn parse_json_value(json: &str, limits: &Limits) -> Result<Value, DocumentErrorKind> {
    parse_json_value_noting_duplicates(json, limits).map(|(value, _)| value)
}

/// [`parse_json_value`], also listing the repeated keys.
pub(crate) fn parse_json_value_noting_duplicates(
    json: &str,
    limits: &Limits,
) -> Result<(Value, Vec<String>), DocumentErrorKind> {
    let failure = Cell::new(None);
    let duplicates = RefCell::new(Vec::new());
    let seed = CheckedValue {
        depth_left: limits.max_nesting_depth,
        failure: &failure,
        duplicates: &duplicates,
    };
    let mut de = serde_json::Deserializer::from_str(json);
    let value = seed.deserialize(&mut de).and_then(|v| de.end().map(|()| v));
    value
        .map(|v| (v, duplicates.take()))
        .map_err(|err| match failure.take() {
            Some(f) => f.into_kind(limits),
            None => DocumentErrorKind::Json {
                message: json_error_message(&err),
            },
        })
}

/// The top-level fields of a JSON object, in document order, with values
/// kept as raw JSON. Known fields are taken out by name; what remains is kept
/// verbatim. A repeated field keeps its last value, as in Go, and is noted.
pub(crate) struct Fields<'a> {
    entries: Vec<(Cow<'a, str>, Option<&'a RawValue>)>,
    duplicates: Vec<String>,
}

impl<'a> Fields<'a> {
    /// Reads the fields of the object `json`.
    pub(crate) fn parse(json: &'a str) -> Result<Self, DocumentErrorKind> {
        let mut de = serde_json::Deserializer::from_str(json);
        // Raw values borrow from the input, so keys and values are not copied.
        let entries = de
            .deserialize_any(FieldsVisitor)
            .and_then(|e| de.end().map(|()| e))
            .map_err(|err| DocumentErrorKind::InvalidField {
                message: json_error_message(&err),
            })?;
        Self::from_found(entries)
    }

    /// The fields of a value already read as [`Found`]; an error when it is
    /// not an object.
    pub(crate) fn from_found(entries: Found<'a>) -> Result<Self, DocumentErrorKind> {
        match entries {
            Ok(entries) => Ok(Self {
                entries,
                duplicates: Vec::new(),
            }),
            Err(found) => Err(DocumentErrorKind::NotAnObject { found }),
        }
    }

    /// Takes the value of field `name`: an exact match, or else one that
    /// differs only in ASCII case (Go's `encoding/json` matches fields that
    /// way). Of several candidates the last wins, and the key is noted.
    pub(crate) fn take(&mut self, name: &str) -> Result<Option<&'a RawValue>, DocumentErrorKind> {
        let mut found: Option<&'a RawValue> = None;
        let mut key_seen: Option<String> = None;
        for (key, value) in &mut self.entries {
            if value.is_some() && key.eq_ignore_ascii_case(name) {
                if found.is_some() {
                    key_seen = Some(key.clone().into_owned());
                }
                found = value.take();
            }
        }
        if let Some(key) = key_seen {
            self.duplicates.push(key);
        }
        Ok(found)
    }

    /// Takes a string field; `null` reads as absent, as in Go.
    pub(crate) fn take_string(&mut self, name: &str) -> Result<Option<String>, DocumentErrorKind> {
        self.take_parsed::<Option<String>>(name)
            .map(Option::flatten)
    }

    /// Takes a field and decodes it as `T`.
    pub(crate) fn take_parsed<T: serde::de::DeserializeOwned>(
        &mut self,
        name: &str,
    ) -> Result<Option<T>, DocumentErrorKind> {
        match self.take(name)? {
            None => Ok(None),
            Some(raw) => serde_json::from_str(raw.get()).map(Some).map_err(|err| {
                DocumentErrorKind::InvalidField {
                    message: format!("field {name:?}: {}", json_error_message(&err)),
                }
            }),
        }
    }

    /// The fields not taken, in document order, as owned raw JSON (a repeated
    /// key keeps its first position and its last value), and every key found
    /// repeated, taken or not.
    pub(crate) fn into_rest(mut self) -> (Vec<(String, Box<RawValue>)>, Vec<String>) {
        let mut rest: Vec<(String, Box<RawValue>)> = Vec::new();
        for (key, value) in self.entries {
            if let Some(value) = value {
                match rest.iter_mut().find(|(k, _)| *k == key) {
                    Some(slot) => {
                        self.duplicates.push(key.clone().into_owned());
                        slot.1 = value.to_owned();
                    }
                    None => rest.push((key.into_owned(), value.to_owned())),
                }
            }
        }
        (rest, self.duplicates)
    }
}

struct FieldsVisitor;

pub(crate) type FieldEntries<'a> = Vec<(Cow<'a, str>, Option<&'a RawValue>)>;

impl<'de> Visitor<'de> for FieldsVisitor {
    /// The fields, or what was found instead of an object.
    type Value = Result<FieldEntries<'de>, &'static str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key_seed(BorrowedKey)? {
            let value: &'de RawValue = map.next_value()?;
            entries.push((key, Some(value)));
        }
        Ok(Ok(entries))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<de::IgnoredAny>()?.is_some() {}
        Ok(Err("an array"))
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Err("a string"))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Err("a boolean"))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Err("a number"))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Err("a number"))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Err("a number"))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Err("null"))
    }
}

/// A key borrowed from the input when it has no escapes.
struct BorrowedKey;

impl<'de> DeserializeSeed<'de> for BorrowedKey {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for BorrowedKey {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string key")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs(text: &str) -> Result<Vec<(usize, usize, String)>, DocumentError> {
        docs_with(text, &Limits::default())
    }

    fn docs_with(
        text: &str,
        limits: &Limits,
    ) -> Result<Vec<(usize, usize, String)>, DocumentError> {
        let file: Arc<str> = Arc::from("test.yaml");
        let mut out = Vec::new();
        for_each_document::<DocumentError>(&file, text, limits, |d| {
            out.push((d.origin.document, d.origin.line, d.json.into_owned()));
            Ok(ControlFlow::Continue(()))
        })?;
        Ok(out)
    }

    fn kind(result: Result<Vec<(usize, usize, String)>, DocumentError>) -> DocumentErrorKind {
        result.unwrap_err().kind
    }

    #[test]
    fn multi_document_yaml_with_leading_marker_and_comments() {
        let text = "---\na: 1\n--- # second\nb: [x, y]\n---\n# only a comment\n---\nc: '='\n";
        let got = docs(text).unwrap();
        assert_eq!(
            got,
            vec![
                (0, 2, r#"{"a":1}"#.to_owned()),
                (1, 4, r#"{"b":["x","y"]}"#.to_owned()),
                (2, 8, r#"{"c":"="}"#.to_owned()),
            ]
        );
    }

    #[test]
    fn yaml_1_1_quirks_read_as_go_reads_them() {
        // A bare `=` (quirk 1) and `yes` stay strings.
        let got = docs("enum:\n- =\n- yes\n1: one\ntrue: t\n").unwrap();
        assert_eq!(got[0].2, r#"{"enum":["=","yes"],"1":"one","true":"t"}"#);
    }

    #[test]
    fn concatenated_json_stream() {
        let text = "{\"a\":1}\n{\"b\":\n  2}{\"c\":3}";
        let got = docs(text).unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(got[1], (1, 2, "{\"b\":\n  2}".to_owned()));
        assert_eq!(got[2].1, 3);
    }

    #[test]
    fn json_documents_are_kept_byte_for_byte() {
        let text = "{ \"a\" : 1.50, \"b\":\"\\u00e9\" }";
        assert_eq!(docs(text).unwrap()[0].2, text);
    }

    #[test]
    fn bad_separator_is_an_error() {
        let err = docs("a: 1\n--- b: 2\n").unwrap_err();
        assert!(matches!(err.kind, DocumentErrorKind::BadSeparator { .. }));
        assert_eq!(err.location.origin.line, 2);
    }

    #[test]
    fn malformed_yaml_names_the_absolute_line() {
        // The indentation error of eventing-kogito's dependencies.yaml (quirk 2).
        let text = "---\nok: 1\n---\ndependencies:\n  - type: olm.gvk\n  value:\n     group: x\n    kind: Y\n";
        let err = docs(text).unwrap_err();
        let DocumentErrorKind::Yaml { message } = &err.kind else {
            panic!("{err}");
        };
        assert!(
            message.contains("line 6") || message.contains("line 7") || message.contains("line 8"),
            "{message}"
        );
        assert_eq!(err.location.origin.document, 1);
        assert!(err.location.origin.line >= 4, "{err}");
    }

    #[test]
    fn malformed_json_is_an_error() {
        assert!(matches!(
            kind(docs("{\"a\": }")),
            DocumentErrorKind::Json { .. }
        ));
        assert!(matches!(
            kind(docs("{\"a\": 1} trailing")),
            DocumentErrorKind::Json { .. }
        ));
    }

    #[test]
    fn duplicate_keys_keep_the_last_value_and_are_noted() {
        let file: Arc<str> = Arc::from("d.yaml");
        let mut seen = Vec::new();
        for_each_document::<DocumentError>(
            &file,
            "a: 1\nb:\n  c: 1\n  c: 2\n",
            &Limits::default(),
            |d| {
                seen.push((d.json.into_owned(), d.duplicate_keys));
                Ok(ControlFlow::Continue(()))
            },
        )
        .unwrap();
        assert_eq!(
            seen,
            [(r#"{"a":1,"b":{"c":2}}"#.to_owned(), vec!["c".to_owned()])]
        );
    }

    #[test]
    fn json_nesting_is_measured_by_depth_not_by_bracket_count() {
        let deep = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
        let wide = |n: usize| format!("[{}]", vec!["{}"; n].join(","));
        let cases = [
            (deep(3), 3, false),
            (deep(4), 3, true),
            // More brackets than the limit, none deeper than two.
            (wide(50), 3, false),
            // Brackets inside strings do not nest, escaped quotes included.
            (
                format!("[\"{}\\\"{}\"]", "[".repeat(9), "{".repeat(9)),
                3,
                false,
            ),
            (format!("{{\"a\":\"]]]]\",\"b\":{}}}", deep(3)), 3, true),
            (format!("{{\"a\":\"]]]]\",\"b\":{}}}", deep(2)), 3, false),
        ];
        for (json, limit, deeper) in cases {
            assert!(serde_json::from_str::<Value>(&json).is_ok(), "{json}");
            assert_eq!(json_nesting_exceeds(&json, limit), deeper, "{json}");
        }
    }

    #[test]
    fn deep_nesting_is_refused_in_yaml_and_json() {
        let limits = Limits {
            max_nesting_depth: 10,
            ..Limits::default()
        };
        let ok_yaml = format!("{}1{}", "[".repeat(10), "]".repeat(10));
        assert!(docs_with(&format!("a: {ok_yaml}"), &limits).is_err());
        assert!(docs_with(&ok_yaml, &limits).is_ok());
        let deep = format!("{}1{}", "[".repeat(11), "]".repeat(11));
        assert_eq!(
            kind(docs_with(&deep, &limits)),
            DocumentErrorKind::TooDeep { limit: 10 }
        );
        let deep_json = format!("{{\"a\":{deep}}}");
        assert_eq!(
            kind(docs_with(&deep_json, &limits)),
            DocumentErrorKind::TooDeep { limit: 10 }
        );
        // Brackets inside strings do not count.
        let in_string = format!("{{\"a\":\"{}\\\"{}\"}}", "[".repeat(50), "{".repeat(50));
        assert!(docs_with(&in_string, &limits).is_ok());
    }

    #[test]
    fn yaml_brackets_count_even_in_strings() {
        let limits = Limits {
            max_nesting_depth: 3,
            ..Limits::default()
        };
        assert!(docs_with("a: '[[['\n", &limits).is_ok());
        assert_eq!(
            kind(docs_with("a: '[[[['\n", &limits)),
            DocumentErrorKind::TooDeep { limit: 3 }
        );
        // Balanced brackets in text never add up.
        let text = format!("a: '{}'\n", "[x] ".repeat(1000));
        assert!(docs_with(&text, &limits).is_ok());
    }

    #[test]
    fn hostile_flow_nesting_is_rejected_quickly() {
        // libyaml is quadratic in flow nesting: a million brackets would take
        // hours to parse; the pre-scan rejects them at once.
        let deep = format!("a: {}\n", "[".repeat(1_000_000));
        let start = std::time::Instant::now();
        assert!(matches!(
            kind(docs(&deep)),
            DocumentErrorKind::TooDeep { .. }
        ));
        assert!(start.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn hostile_depth_with_default_limits_is_an_error_not_a_crash() {
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(matches!(
            kind(docs(&deep)),
            DocumentErrorKind::TooDeep { .. }
        ));
        let deep_json = format!("{{\"a\":{deep}}}");
        assert!(matches!(
            kind(docs(&deep_json)),
            DocumentErrorKind::TooDeep { .. }
        ));
        let deep_map = format!("{}x", "a:\n ".repeat(2000));
        assert!(docs(&deep_map).is_err());
    }

    #[test]
    fn alias_bombs_are_refused() {
        let bomb = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n\
                    c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n\
                    e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n\
                    g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]\nh: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]\n\
                    i: [*h, *h, *h, *h, *h, *h, *h, *h, *h]\n";
        assert!(matches!(kind(docs(bomb)), DocumentErrorKind::Yaml { .. }));
    }

    #[test]
    fn document_size_and_count_limits() {
        let limits = Limits {
            max_document_bytes: 16,
            max_documents_per_file: 2,
            ..Limits::default()
        };
        assert!(matches!(
            kind(docs_with("a: 0123456789abcdef\n", &limits)),
            DocumentErrorKind::DocumentTooLarge { .. }
        ));
        assert!(matches!(
            kind(docs_with("{\"a\":\"0123456789abcdef\"}", &limits)),
            DocumentErrorKind::DocumentTooLarge { .. }
        ));
        assert!(matches!(
            kind(docs_with("a: 1\n---\nb: 2\n---\nc: 3\n", &limits)),
            DocumentErrorKind::TooManyDocuments { limit: 2 }
        ));
        assert!(matches!(
            kind(docs_with("{}{}{}", &limits)),
            DocumentErrorKind::TooManyDocuments { limit: 2 }
        ));
    }

    #[test]
    fn file_size_and_encoding_are_checked() {
        let file: Arc<str> = Arc::from("f");
        let limits = Limits {
            max_file_bytes: 4,
            ..Limits::default()
        };
        assert!(matches!(
            decode_text(&file, b"12345", &limits).unwrap_err().kind,
            DocumentErrorKind::FileTooLarge { size: 5, limit: 4 }
        ));
        assert_eq!(
            decode_text(&file, b"a: \xff", &Limits::default())
                .unwrap_err()
                .kind,
            DocumentErrorKind::InvalidUtf8 { offset: 3 }
        );
        assert_eq!(
            decode_text(&file, b"\xEF\xBB\xBFa: 1", &Limits::default()).unwrap(),
            "a: 1"
        );
    }

    #[test]
    fn non_finite_and_non_scalar_keys() {
        assert!(matches!(
            kind(docs("a: .inf\n")),
            DocumentErrorKind::NonFiniteNumber { .. }
        ));
        assert_eq!(kind(docs("? [a]\n: b\n")), DocumentErrorKind::NonScalarKey);
    }

    #[test]
    fn empty_and_null_documents_are_skipped() {
        assert!(docs("").unwrap().is_empty());
        assert!(docs("\n\n# nothing\n---\n---\n").unwrap().is_empty());
        assert!(docs("~\n").unwrap().is_empty());
    }

    #[test]
    fn custom_tags_are_dropped() {
        assert_eq!(docs("a: !Foo bar\n").unwrap()[0].2, r#"{"a":"bar"}"#);
    }

    #[test]
    fn fields_are_taken_case_insensitively_and_the_rest_is_kept() {
        let json = r#"{"Schema":"olm.package","name":"a","x":{"k":[1, 2]},"y":null}"#;
        let mut fields = Fields::parse(json).unwrap();
        assert_eq!(
            fields.take_string("schema").unwrap().as_deref(),
            Some("olm.package")
        );
        assert_eq!(fields.take_string("name").unwrap().as_deref(), Some("a"));
        assert_eq!(fields.take_string("missing").unwrap(), None);
        let (rest, duplicates) = fields.into_rest();
        assert!(duplicates.is_empty());
        assert_eq!(rest.len(), 2);
        assert_eq!(rest[0].1.get(), r#"{"k":[1, 2]}"#);
    }

    #[test]
    fn fields_keep_the_last_duplicate_and_refuse_non_objects() {
        let mut fields = Fields::parse(r#"{"name":"a","Name":"b","x":1,"x":2}"#).unwrap();
        assert_eq!(fields.take_string("name").unwrap().as_deref(), Some("b"));
        let (rest, duplicates) = fields.into_rest();
        assert_eq!(rest.len(), 1);
        assert_eq!(rest[0].1.get(), "2");
        assert_eq!(duplicates, ["Name", "x"]);
        assert_eq!(
            Fields::parse("[1]").err(),
            Some(DocumentErrorKind::NotAnObject { found: "an array" })
        );
        let mut fields = Fields::parse(r#"{"name":5}"#).unwrap();
        assert!(matches!(
            fields.take_string("name"),
            Err(DocumentErrorKind::InvalidField { .. })
        ));
    }

    #[test]
    fn json_values_parse_within_limits() {
        let limits = Limits {
            max_nesting_depth: 2,
            ..Limits::default()
        };
        assert!(parse_json_value("[[1]]", &limits).is_ok());
        assert_eq!(
            parse_json_value("[[[1]]]", &limits),
            Err(DocumentErrorKind::TooDeep { limit: 2 })
        );
        assert_eq!(
            parse_json_value_noting_duplicates(r#"{"a":1,"a":2}"#, &limits),
            Ok((serde_json::json!({"a": 2}), vec!["a".to_owned()]))
        );
    }
}
