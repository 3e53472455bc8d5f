//! Every OLM object in the shared test data survives decoding into our typed
//! structs and encoding back: nothing is lost, renamed or invented.
//!
//! The walk covers every `.yaml`, `.yml` and `.json` file under the test data
//! folder (multi-document YAML and concatenated JSON streams included) and the
//! manifests embedded in file-based catalogs as `olm.bundle.object`
//! properties. Each document whose `apiVersion`/`kind` is one of our typed
//! kinds is decoded, encoded, and compared with the original.
//!
//! The comparison normalises only what the Kubernetes API itself normalises:
//! - `null` values are dropped (the API server prunes them; this also covers
//!   `creationTimestamp: null`);
//! - numbers compare by value (`1` equals `1.0`), and a quantity written as a
//!   YAML number may come back as the equivalent string;
//! - a field the schema does not know is dropped (structural pruning);
//! - a field the schema requires may be added with its empty value where the
//!   input left it out (upstream's Go types always write those fields too);
//! - a field the input left out may be added when, after the API server's
//!   defaulting, both sides are the same (kube-derive always writes `spec`).
//!
//! Each normalisation is counted and printed, so nothing is hidden. Inputs that
//! upstream's own Go types reject are listed in [`ALLOW_LIST`] with a reason;
//! an entry that stops failing is an error too, so the list stays honest.
//!
//! The data lives outside the repository: `../shared/testdata` next to the
//! workspace, or the folder named by `OLM_TESTDATA`. Without it the test
//! skips, except under `CI`, where it fails.

use std::{
    collections::BTreeMap,
    fmt::Write as _,
    fs,
    path::{Path, PathBuf},
};

use base64::Engine as _;
use kube::Resource;
use olm_api::{
    catalog_source::CatalogSource, csv::ClusterServiceVersion, install_plan::InstallPlan,
    olm_config::OLMConfig, operator::Operator, operator_condition, operator_group,
    operator_hub::OperatorHub, package_manifest::PackageManifest, subscription::Subscription,
};
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use serde_json::Value;

/// Inputs that upstream's Go types cannot decode either, so they are not ours
/// to read. Matched against the path relative to the test data folder (for an
/// embedded manifest, the catalog file's path). Every entry must still fail.
const ALLOW_LIST: &[(&str, &str)] = &[
    (
        "upstream-fixtures/api/pkg/validation/internal/testdata/dataTypeMismatch.csv.yaml",
        "validation fixture with deliberately mistyped fields (spec.maintainers is a string); Go's decoder rejects it",
    ),
    (
        "upstream-fixtures/api/pkg/validation/internal/testdata/invalid_min_kube_version.csv.yaml",
        "validation fixture: spec.minKubeVersion is the number 1.21 and spec.maintainers a string; Go's decoder rejects both",
    ),
    (
        "bundles/eventing-kogito/1.1.0/metadata/dependencies.yaml",
        "invalid YAML (mis-indented `value:`), listed in SOURCES.md; Go's YAML parser rejects it as well",
    ),
    (
        "bundles/eventing-kogito/1.2.0/metadata/dependencies.yaml",
        "invalid YAML (mis-indented `value:`), listed in SOURCES.md; Go's YAML parser rejects it as well",
    ),
];

/// Decodes a document into a typed object and encodes it back.
type RoundTrip = fn(&Value) -> Result<Value, String>;

/// One typed kind of the walk.
struct TypedKind {
    api_version: String,
    kind: String,
    round_trip: RoundTrip,
}

fn typed<K>() -> TypedKind
where
    K: Resource<DynamicType = ()> + DeserializeOwned + Serialize,
{
    TypedKind {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        round_trip: round_trip::<K>,
    }
}

fn round_trip<K: DeserializeOwned + Serialize>(document: &Value) -> Result<Value, String> {
    let typed: K = serde_path_to_error::deserialize(document)
        .map_err(|error| format!("decode failed at {}: {}", error.path(), error.inner()))?;
    serde_json::to_value(&typed).map_err(|error| format!("encode failed: {error}"))
}

/// The kinds the walk decodes. Adding a typed kind to `olm-api` means adding one
/// line here; a document of the `operators.coreos.com` groups whose kind is
/// missing fails the test, so the table cannot silently fall behind.
fn typed_kinds() -> Vec<TypedKind> {
    vec![
        typed::<ClusterServiceVersion>(),
        typed::<CatalogSource>(),
        typed::<Subscription>(),
        typed::<InstallPlan>(),
        typed::<operator_group::v1::OperatorGroup>(),
        typed::<operator_group::v1alpha2::OperatorGroup>(),
        typed::<operator_condition::v2::OperatorCondition>(),
        typed::<operator_condition::v1::OperatorCondition>(),
        typed::<Operator>(),
        typed::<OLMConfig>(),
        typed::<OperatorHub>(),
        typed::<PackageManifest>(),
    ]
}

/// API groups whose every kind must be in [`typed_kinds`].
const OWNED_GROUPS: &[&str] = &["operators.coreos.com", "packages.operators.coreos.com"];

/// The structural schema we ship for each CRD kind, by `(apiVersion, kind)`.
fn shipped_schemas() -> BTreeMap<(String, String), Value> {
    let mut schemas = BTreeMap::new();
    for crd in olm_api::crd::all() {
        for version in &crd.spec.versions {
            let Some(schema) = version
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
            else {
                continue;
            };
            let Ok(schema) = serde_json::to_value(schema) else {
                continue;
            };
            let api_version = format!("{}/{}", crd.spec.group, version.name);
            schemas.insert((api_version, crd.spec.names.kind.clone()), schema);
        }
    }
    schemas
}

/// The test data folder: `OLM_TESTDATA` when set (then it must exist), else
/// `../shared/testdata` next to the workspace if present.
fn testdata_root() -> Option<PathBuf> {
    olm_testkit::testdata()
}

#[test]
fn every_olm_document_in_the_corpus_round_trips() {
    let Some(root) = testdata_root() else {
        let message = "test data folder not found: set OLM_TESTDATA or place it at ../shared/testdata next to the workspace";
        assert!(
            std::env::var_os("CI").is_none(),
            "{message} (CI is set, so this is an error)"
        );
        println!("SKIPPED corpus round trip: {message}");
        return;
    };

    let mut corpus = Corpus::new(typed_kinds(), shipped_schemas());
    let mut files = Vec::new();
    collect_files(&root, &mut files);
    files.sort();
    for file in &files {
        let relative = file
            .strip_prefix(&root)
            .unwrap_or(file)
            .to_string_lossy()
            .replace('\\', "/");
        corpus.read_file(file, &relative);
    }

    let report = corpus.report(files.len());
    println!("{report}");
    assert!(
        corpus.failures.is_empty(),
        "{} documents failed the round trip; see the report above",
        corpus.failures.len()
    );
    assert!(
        corpus.stale_allow_list().is_empty(),
        "allow-list entries that no longer fail: {:?}",
        corpus.stale_allow_list()
    );
    assert!(
        corpus.counts.values().map(|c| c.read).sum::<usize>() > 0,
        "no OLM document found under {}",
        root.display()
    );
}

fn collect_files(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_files(&path, files);
        } else if matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml" | "json")
        ) {
            files.push(path);
        }
    }
}

/// Results of one kind.
#[derive(Default)]
struct KindCount {
    read: usize,
    /// Of `read`, how many were manifests embedded in catalogs.
    embedded: usize,
    passed: usize,
    allow_listed: usize,
    failed: usize,
}

/// A normalisation the comparison applied, grouped by where it happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Normalisation {
    /// A field unknown to the schema was dropped (the API server prunes it).
    Pruned,
    /// As [`Normalisation::Pruned`], but the name differs from a known field
    /// only in case: Go's `encoding/json` (which upstream uses to read bundle
    /// files) would have read it as that field. Printed as a warning.
    PrunedGoWouldRead,
    /// A required field absent from the input was written with its empty value.
    RequiredAdded,
    /// A field absent from the input was written with what the API server's
    /// defaulting would have filled in.
    Defaulted,
    /// A quantity written as a number came back as the equivalent string.
    QuantityAsString,
    /// A field the input spelled with other case came back spelled as the
    /// schema spells it, as Go's decoder reads it (policy rules:
    /// `olm_api::go_text::match_field`).
    ReadAsGoReads,
}

struct Corpus {
    kinds: Vec<TypedKind>,
    schemas: BTreeMap<(String, String), Value>,
    counts: BTreeMap<String, KindCount>,
    failures: Vec<String>,
    allow_listed: Vec<String>,
    allow_list_hits: Vec<&'static str>,
    /// `(normalisation, kind, pointer pattern)` -> (count, first location).
    normalisations: BTreeMap<(Normalisation, String, String), (usize, String)>,
    embedded_manifests: usize,
    other_documents: usize,
}

impl Corpus {
    fn new(kinds: Vec<TypedKind>, schemas: BTreeMap<(String, String), Value>) -> Self {
        Self {
            kinds,
            schemas,
            counts: BTreeMap::new(),
            failures: Vec::new(),
            allow_listed: Vec::new(),
            allow_list_hits: Vec::new(),
            normalisations: BTreeMap::new(),
            embedded_manifests: 0,
            other_documents: 0,
        }
    }

    fn read_file(&mut self, path: &Path, relative: &str) {
        let text = match fs::read_to_string(path) {
            Ok(text) => text,
            Err(error) => return self.fail(relative, relative, format!("unreadable: {error}")),
        };
        let documents = match parse_documents(&text, relative.ends_with(".json")) {
            Ok(documents) => documents,
            Err(error) => return self.fail(relative, relative, format!("not parseable: {error}")),
        };
        for (index, document) in documents.iter().enumerate() {
            let location = format!("{relative} [document {index}]");
            self.read_document(document, relative, &location, false);
            if document.get("schema").and_then(Value::as_str) == Some("olm.bundle") {
                self.read_embedded_manifests(document, relative, &location);
            }
        }
    }

    /// The manifests of an FBC `olm.bundle` carried as base64 JSON in
    /// `olm.bundle.object` properties.
    fn read_embedded_manifests(&mut self, bundle: &Value, relative: &str, location: &str) {
        let name = bundle.get("name").and_then(Value::as_str).unwrap_or("?");
        let properties = bundle
            .get("properties")
            .and_then(Value::as_array)
            .into_iter()
            .flatten();
        for (index, property) in properties.enumerate() {
            if property.get("type").and_then(Value::as_str) != Some("olm.bundle.object") {
                continue;
            }
            let location = format!("{location} bundle {name} property {index}");
            let Some(data) = property.pointer("/value/data").and_then(Value::as_str) else {
                self.fail(
                    relative,
                    &location,
                    "olm.bundle.object without value.data".into(),
                );
                continue;
            };
            let manifest = base64::engine::general_purpose::STANDARD
                .decode(data)
                .map_err(|error| format!("base64: {error}"))
                .and_then(|bytes| {
                    serde_json::from_slice::<Value>(&bytes)
                        .map_err(|error| format!("json: {error}"))
                });
            match manifest {
                Ok(manifest) => {
                    self.embedded_manifests += 1;
                    self.read_document(&manifest, relative, &location, true);
                }
                Err(error) => self.fail(
                    relative,
                    &location,
                    format!("embedded manifest unreadable: {error}"),
                ),
            }
        }
    }

    fn read_document(&mut self, document: &Value, relative: &str, location: &str, embedded: bool) {
        let (Some(api_version), Some(kind)) = (
            document.get("apiVersion").and_then(Value::as_str),
            document.get("kind").and_then(Value::as_str),
        ) else {
            self.other_documents += 1;
            return;
        };
        let Some(typed) = self
            .kinds
            .iter()
            .find(|k| k.api_version == api_version && k.kind == kind)
        else {
            let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
            if OWNED_GROUPS.contains(&group) {
                let label = format!("{api_version} {kind}");
                self.counts.entry(label.clone()).or_default().read += 1;
                self.counts.entry(label).or_default().failed += 1;
                self.fail(
                    relative,
                    location,
                    format!("{api_version} {kind} has no typed struct in the walk"),
                );
            } else {
                self.other_documents += 1;
            }
            return;
        };
        let label = format!("{api_version} {kind}");
        let round_trip = typed.round_trip;
        let count = self.counts.entry(label.clone()).or_default();
        count.read += 1;
        count.embedded += usize::from(embedded);
        let schema = self
            .schemas
            .get(&(api_version.to_owned(), kind.to_owned()))
            .cloned();

        let original = without_nulls(document);
        let outcome = round_trip(&original).and_then(|written| {
            let mut found = Vec::new();
            let mut pointer = String::new();
            compare(
                &original,
                &written,
                schema.as_ref(),
                &mut pointer,
                &mut found,
            )?;
            Ok(found)
        });
        match outcome {
            Ok(found) => {
                self.counts.entry(label.clone()).or_default().passed += 1;
                for (normalisation, pointer) in found {
                    let key = (normalisation, label.clone(), pattern_of(&pointer));
                    let entry = self
                        .normalisations
                        .entry(key)
                        .or_insert((0, format!("{location} at {pointer}")));
                    entry.0 += 1;
                }
            }
            Err(problem) => {
                if self.allow(relative, location, &problem) {
                    self.counts.entry(label).or_default().allow_listed += 1;
                } else {
                    self.counts.entry(label).or_default().failed += 1;
                    self.failures.push(format!("{location}: {problem}"));
                }
            }
        }
    }

    fn fail(&mut self, relative: &str, location: &str, problem: String) {
        if !self.allow(relative, location, &problem) {
            self.failures.push(format!("{location}: {problem}"));
        }
    }

    /// Records an allow-listed failure; false if `relative` is not listed.
    fn allow(&mut self, relative: &str, location: &str, problem: &str) -> bool {
        let Some((path, reason)) = ALLOW_LIST.iter().find(|(path, _)| *path == relative) else {
            return false;
        };
        self.allow_list_hits.push(path);
        self.allow_listed.push(format!(
            "{location}: {problem}\n      why allowed: {reason}"
        ));
        true
    }

    fn stale_allow_list(&self) -> Vec<&'static str> {
        ALLOW_LIST
            .iter()
            .map(|(path, _)| *path)
            .filter(|path| !self.allow_list_hits.contains(path))
            .collect()
    }

    fn report(&self, files: usize) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "corpus round trip: {files} files, {} manifests embedded in catalogs, {} documents of other kinds skipped",
            self.embedded_manifests, self.other_documents
        );
        let _ = writeln!(
            out,
            "documents per kind: read (of which embedded in catalogs) / passed / allow-listed / failed"
        );
        for (kind, count) in &self.counts {
            let _ = writeln!(
                out,
                "  {kind}: {} ({}) / {} / {} / {}",
                count.read, count.embedded, count.passed, count.allow_listed, count.failed
            );
        }
        let _ = writeln!(
            out,
            "normalisations applied (kind, pointer, count, first seen):"
        );
        for ((normalisation, kind, pattern), (count, first)) in &self.normalisations {
            let what = match normalisation {
                Normalisation::Pruned => "pruned unknown field",
                Normalisation::PrunedGoWouldRead => {
                    "WARNING pruned unknown field that Go's case-insensitive decoder would read"
                }
                Normalisation::RequiredAdded => "added empty required field",
                Normalisation::Defaulted => "added what API server defaulting fills in",
                Normalisation::QuantityAsString => "quantity number written as string",
                Normalisation::ReadAsGoReads => "field spelled in other case read as Go reads it",
            };
            let _ = writeln!(out, "  {what}: {kind} {pattern} x{count} (first: {first})");
        }
        let _ = writeln!(out, "allow-listed ({}):", self.allow_listed.len());
        for entry in &self.allow_listed {
            let _ = writeln!(out, "  {entry}");
        }
        let _ = writeln!(out, "failures ({}):", self.failures.len());
        for failure in &self.failures {
            let _ = writeln!(out, "  {failure}");
        }
        out
    }
}

/// Splits a file into documents: a concatenated JSON stream for `.json` files
/// (as FBC writes them), YAML documents otherwise (and as a fallback).
fn parse_documents(text: &str, json: bool) -> Result<Vec<Value>, String> {
    if json {
        let stream: Result<Vec<Value>, _> = serde_json::Deserializer::from_str(text)
            .into_iter::<Value>()
            .collect();
        if let Ok(documents) = stream {
            return Ok(documents);
        }
    }
    let mut documents = Vec::new();
    for document in serde_yaml_ng::Deserializer::from_str(text) {
        let value = Value::deserialize(document).map_err(|error| error.to_string())?;
        if !value.is_null() {
            documents.push(value);
        }
    }
    Ok(documents)
}

/// Drops `null` object members at every depth, as the API server does.
fn without_nulls(value: &Value) -> Value {
    match value {
        Value::Object(object) => Value::Object(
            object
                .iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

/// Compares what was read with what was written; returns the first real
/// difference, and records every normalisation it applied.
fn compare(
    original: &Value,
    written: &Value,
    schema: Option<&Value>,
    pointer: &mut String,
    found: &mut Vec<(Normalisation, String)>,
) -> Result<(), String> {
    match (original, written) {
        (Value::Object(before), Value::Object(after)) => {
            for (key, value) in before {
                let mark = pointer.len();
                push_pointer(pointer, key);
                match after.get(key) {
                    Some(counterpart) => compare(
                        value,
                        counterpart,
                        child_schema(schema, key),
                        pointer,
                        found,
                    )?,
                    None if schema_prunes(schema, key) => {
                        let normalisation = if has_property_ignoring_case(schema, key) {
                            Normalisation::PrunedGoWouldRead
                        } else {
                            Normalisation::Pruned
                        };
                        found.push((normalisation, pointer.clone()));
                    }
                    None => {
                        return Err(format!(
                            "first difference at {pointer}: dropped {}",
                            excerpt(value)
                        ));
                    }
                }
                pointer.truncate(mark);
            }
            for (key, value) in after.iter().filter(|(key, _)| !before.contains_key(*key)) {
                let mark = pointer.len();
                push_pointer(pointer, key);
                let spelled_otherwise = before
                    .iter()
                    .find(|(other, _)| {
                        other.eq_ignore_ascii_case(key) && !after.contains_key(*other)
                    })
                    .map(|(_, read)| read);
                if schema_requires(schema, key) && is_empty_value(value) {
                    found.push((Normalisation::RequiredAdded, pointer.clone()));
                } else if let Some(read) = spelled_otherwise {
                    compare(read, value, child_schema(schema, key), pointer, found)?;
                    found.push((Normalisation::ReadAsGoReads, pointer.clone()));
                } else if is_server_default(value, child_schema(schema, key)) {
                    found.push((Normalisation::Defaulted, pointer.clone()));
                } else {
                    return Err(format!(
                        "first difference at {pointer}: added {}",
                        excerpt(value)
                    ));
                }
                pointer.truncate(mark);
            }
            Ok(())
        }
        (Value::Array(before), Value::Array(after)) => {
            if before.len() != after.len() {
                return Err(format!(
                    "first difference at {pointer}: {} items read, {} written",
                    before.len(),
                    after.len()
                ));
            }
            let items = schema.and_then(|s| s.get("items"));
            for (index, (value, counterpart)) in before.iter().zip(after).enumerate() {
                let mark = pointer.len();
                let _ = write!(pointer, "/{index}");
                compare(value, counterpart, items, pointer, found)?;
                pointer.truncate(mark);
            }
            Ok(())
        }
        (Value::Number(before), Value::Number(after)) if same_number(before, after) => Ok(()),
        (Value::Number(before), Value::String(after))
            if is_int_or_string(schema) && after.parse::<f64>().ok() == before.as_f64() =>
        {
            found.push((Normalisation::QuantityAsString, pointer.clone()));
            Ok(())
        }
        (before, after) if before == after => Ok(()),
        (before, after) => Err(format!(
            "first difference at {pointer}: read {}, wrote {}",
            excerpt(before),
            excerpt(after)
        )),
    }
}

fn push_pointer(pointer: &mut String, key: &str) {
    pointer.push('/');
    pointer.push_str(&key.replace('~', "~0").replace('/', "~1"));
}

fn child_schema<'a>(schema: Option<&'a Value>, key: &str) -> Option<&'a Value> {
    let schema = schema?;
    schema
        .pointer(&format!(
            "/properties/{}",
            key.replace('~', "~0").replace('/', "~1")
        ))
        .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()))
}

/// Whether the API server would prune `key` from an object with this schema:
/// the schema lists properties, `key` is not one, and nothing preserves it.
fn schema_prunes(schema: Option<&Value>, key: &str) -> bool {
    let Some(schema) = schema else {
        return false;
    };
    let lists_properties = schema.get("properties").is_some_and(Value::is_object);
    let preserves = schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
        || schema.get("additionalProperties").is_some();
    lists_properties && !preserves && child_schema(Some(schema), key).is_none()
}

fn has_property_ignoring_case(schema: Option<&Value>, key: &str) -> bool {
    schema
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object)
        .is_some_and(|properties| properties.keys().any(|name| name.eq_ignore_ascii_case(key)))
}

fn schema_requires(schema: Option<&Value>, key: &str) -> bool {
    schema
        .and_then(|s| s.get("required"))
        .and_then(Value::as_array)
        .is_some_and(|required| required.iter().any(|name| name == key))
}

/// Whether `value` is what the API server would store for an absent field with
/// this schema: its `default`, once nested defaults are applied to both.
fn is_server_default(value: &Value, schema: Option<&Value>) -> bool {
    let Some(schema) = schema else {
        return false;
    };
    let Some(default) = schema.get("default") else {
        return false;
    };
    with_defaults(value, schema) == with_defaults(default, schema)
}

/// `value` with the `default` of every absent property filled in, at any depth.
fn with_defaults(value: &Value, schema: &Value) -> Value {
    match value {
        Value::Object(object) => {
            let mut filled = object.clone();
            let properties = schema.get("properties").and_then(Value::as_object);
            for (name, property) in properties.into_iter().flatten() {
                match filled.get(name) {
                    Some(present) => {
                        let present = with_defaults(present, property);
                        filled.insert(name.clone(), present);
                    }
                    None => {
                        if let Some(default) = property.get("default") {
                            filled.insert(name.clone(), with_defaults(default, property));
                        }
                    }
                }
            }
            Value::Object(filled)
        }
        Value::Array(items) => match schema.get("items") {
            Some(item_schema) => Value::Array(
                items
                    .iter()
                    .map(|item| with_defaults(item, item_schema))
                    .collect(),
            ),
            None => value.clone(),
        },
        other => other.clone(),
    }
}

fn is_int_or_string(schema: Option<&Value>) -> bool {
    schema.and_then(|s| s.get("x-kubernetes-int-or-string")) == Some(&Value::Bool(true))
}

/// The empty value of a field: `""`, `0`, `false`, `[]`, or an object of such.
fn is_empty_value(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(object) => object.values().all(is_empty_value),
    }
}

fn same_number(a: &serde_json::Number, b: &serde_json::Number) -> bool {
    match (a.as_i64(), b.as_i64()) {
        (Some(x), Some(y)) => x == y,
        _ => match (a.as_u64(), b.as_u64()) {
            (Some(x), Some(y)) => x == y,
            _ => a.as_f64() == b.as_f64(),
        },
    }
}

/// A pointer with array indices replaced by `*`, to group findings.
fn pattern_of(pointer: &str) -> String {
    pointer
        .split('/')
        .map(|segment| {
            if segment.parse::<usize>().is_ok() {
                "*"
            } else {
                segment
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

fn excerpt(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(120) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

#[test]
fn comparison_normalises_only_what_the_api_server_does() {
    let schema = serde_json::json!({
        "type": "object",
        "required": ["name"],
        "properties": {
            "name": {"type": "string"},
            "size": {"x-kubernetes-int-or-string": true},
            "count": {"type": "integer"},
        },
    });
    let check = |original: Value, written: Value| {
        let mut found = Vec::new();
        compare(
            &without_nulls(&original),
            &written,
            Some(&schema),
            &mut String::new(),
            &mut found,
        )
        .map(|()| found)
    };

    let pruned = check(
        serde_json::json!({"name": "a", "colour": "blue"}),
        serde_json::json!({"name": "a"}),
    );
    assert_eq!(pruned.map(|f| f.len()), Ok(1));
    let added = check(serde_json::json!({}), serde_json::json!({"name": ""}));
    assert_eq!(added.map(|f| f.len()), Ok(1));
    let quantity = check(
        serde_json::json!({"name": "a", "size": 2}),
        serde_json::json!({"name": "a", "size": "2"}),
    );
    assert_eq!(quantity.map(|f| f.len()), Ok(1));
    let nulls = check(
        serde_json::json!({"name": "a", "count": null}),
        serde_json::json!({"name": "a"}),
    );
    assert_eq!(nulls.map(|f| f.len()), Ok(0));
    let float = check(
        serde_json::json!({"name": "a", "count": 3.0}),
        serde_json::json!({"name": "a", "count": 3}),
    );
    assert_eq!(float.map(|f| f.len()), Ok(0));

    let defaulted_schema = serde_json::json!({
        "type": "object",
        "properties": {"spec": {
            "type": "object",
            "default": {"mode": "Default"},
            "properties": {"mode": {"type": "string", "default": "Default"}},
        }},
    });
    let mut found = Vec::new();
    let defaulted = compare(
        &serde_json::json!({}),
        &serde_json::json!({"spec": {}}),
        Some(&defaulted_schema),
        &mut String::new(),
        &mut found,
    );
    assert_eq!(defaulted, Ok(()));
    assert_eq!(found, [(Normalisation::Defaulted, "/spec".to_owned())]);
    let other_value = compare(
        &serde_json::json!({}),
        &serde_json::json!({"spec": {"mode": "Fancy"}}),
        Some(&defaulted_schema),
        &mut String::new(),
        &mut Vec::new(),
    );
    assert!(other_value.is_err());

    let go_case = check(
        serde_json::json!({"name": "a", "Count": 3}),
        serde_json::json!({"name": "a"}),
    );
    assert_eq!(
        go_case,
        Ok(vec![(
            Normalisation::PrunedGoWouldRead,
            "/Count".to_owned()
        )])
    );

    let lost = check(
        serde_json::json!({"name": "a", "count": 3}),
        serde_json::json!({"name": "a"}),
    );
    assert_eq!(
        lost,
        Err("first difference at /count: dropped 3".to_owned())
    );
    let renamed = check(
        serde_json::json!({"name": "a"}),
        serde_json::json!({"name": "b"}),
    );
    assert_eq!(
        renamed,
        Err("first difference at /name: read \"a\", wrote \"b\"".to_owned())
    );
    let count_as_string = check(
        serde_json::json!({"name": "a", "count": 3}),
        serde_json::json!({"name": "a", "count": "3"}),
    );
    assert!(count_as_string.is_err());
}
