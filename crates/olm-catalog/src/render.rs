//! Writing a catalog back as JSON or YAML, the way `opm render` and
//! `opm migrate` write it, losing nothing that was read.
//!
//! Documents are grouped by package (packages in name order); within a
//! package come the `olm.package` document, the channels by name, the bundles
//! by name, other schemas by schema (stably), then the deprecations; documents
//! of other schemas without a package come last. JSON is indented with four
//! spaces like Go's `json.Encoder` (raw values are re-indented too); YAML
//! documents each start with `---`. Known fields are written in upstream's
//! order with upstream's omissions; unknown fields follow them, and documents
//! of other schemas are written exactly as they were read (in JSON) or as
//! their YAML rendering.

use std::{
    collections::BTreeMap,
    io::{self, Write},
    path::Path,
};

use serde::{Serialize, Serializer, ser::SerializeMap};

use crate::{
    document::parse_json_value,
    fbc::{
        Bundle, Catalog, Channel, Deprecation, DeprecationEntry, ExtraFields, Icon, Meta, Package,
        RelatedImage, SCHEMA_BUNDLE, SCHEMA_CHANNEL, SCHEMA_DEPRECATIONS, SCHEMA_PACKAGE,
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

    fn compact_json(&self) -> Result<String, RenderError> {
        let result = match self {
            Self::Package(p) => serde_json::to_string(p),
            Self::Channel(c) => serde_json::to_string(c),
            Self::Bundle(b) => serde_json::to_string(b),
            Self::Deprecation(d) => serde_json::to_string(d),
            Self::Meta(m) => return Ok(m.blob.get().to_owned()),
        };
        result.map_err(|e| RenderError::Convert {
            document: self.describe(),
            message: e.to_string(),
        })
    }
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
) -> Result<(), RenderError> {
    let io_error = |source| RenderError::Io {
        path: path.to_owned(),
        source,
    };
    let limits = Limits::default();
    for doc in docs {
        let json = doc.compact_json()?;
        match format {
            Format::Json => {
                let mut text = go_indent(&json, "    ");
                text.push('\n');
                out.write_all(text.as_bytes()).map_err(io_error)?;
            }
            Format::Yaml => {
                let value = parse_json_value(&json, &limits).map_err(|e| RenderError::Convert {
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

/// Writes the whole catalog to `out`.
pub fn write(catalog: &Catalog, format: Format, out: &mut dyn Write) -> Result<(), RenderError> {
    write_docs(&documents(catalog), format, out, "output")
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
        write_docs(&docs, format, &mut out, &file.display().to_string())?;
        std::fs::write(&file, out).map_err(io_error(&file))?;
    }
    if !root_others.is_empty() {
        let file = dir.join(format!("catalog{}", format.extension()));
        let docs: Vec<Doc<'_>> = root_others.into_iter().map(Doc::Meta).collect();
        let mut out = Vec::new();
        write_docs(&docs, format, &mut out, &file.display().to_string())?;
        std::fs::write(&file, out).map_err(io_error(&file))?;
    }
    Ok(())
}

/// Re-indents JSON text as Go's `json.Indent` does: insignificant whitespace
/// dropped, one element per line, `": "` after keys, empty objects and arrays
/// kept as `{}` and `[]`.
pub fn go_indent(json: &str, indent: &str) -> String {
    let bytes = json.as_bytes();
    let mut out = String::with_capacity(json.len() + json.len() / 4);
    let mut depth = 0usize;
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
                    newline(&mut out, depth);
                    need_indent = false;
                }
                let start = i;
                i += 1;
                while i < bytes.len() {
                    match bytes[i] {
                        b'\\' => i += 2,
                        b'"' => {
                            i += 1;
                            break;
                        }
                        _ => i += 1,
                    }
                }
                out.push_str(&json[start..i.min(bytes.len())]);
                continue;
            }
            b'{' | b'[' => {
                if need_indent {
                    newline(&mut out, depth);
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
                    newline(&mut out, depth);
                }
                out.push(b as char);
            }
            b',' => {
                out.push(',');
                newline(&mut out, depth);
            }
            b':' => out.push_str(": "),
            _ => {
                if need_indent {
                    newline(&mut out, depth);
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
    out
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
}
