//! Turning an indexed bundle and one of its channel entries into the
//! `api.Bundle` message, reading the bundle's document from the catalog.
//!
//! This follows operator-registry's `ConvertModelBundleToAPIBundle`:
//!
//! * `properties` are the document's properties except `olm.bundle.object`
//!   and `olm.csv.metadata` (too big to project into CSV annotations), each
//!   value re-encoded compactly with sorted keys;
//! * `dependencies` are `olm.gvk.required` (as `olm.gvk`) and
//!   `olm.package.required` (as `olm.package` with the range as version);
//! * `object` holds each `olm.bundle.object` manifest as JSON, and `csvJson`
//!   the one whose kind is `ClusterServiceVersion`;
//! * without manifests but with exactly one `olm.csv.metadata`, a stub CSV is
//!   synthesized from it (install strategy `deployment`, the package icon, the
//!   bundle's related images, the package description as a fallback) and
//!   serves as both `csvJson` and the only object.
//!
//! A single answer, once built, is kept in the answer cache
//! ([`crate::answer_cache`]) and given again through any channel entry of
//! the bundle, with that entry's channel and `skipRange`.

use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Map, Value, value::RawValue};

use olm_catalog::go_json;

use crate::{
    answer_cache::CachedAnswer,
    api, csv_types,
    error::ReadError,
    index::{
        CatalogIndex, EntryRec,
        scan::{
            PROPERTY_BUNDLE_OBJECT, PROPERTY_CSV_METADATA, PROPERTY_GVK, PROPERTY_GVK_REQUIRED,
            PROPERTY_PACKAGE_REQUIRED,
        },
    },
};

/// Which form of a bundle an RPC answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BundleForm {
    /// `GetBundle`, `GetBundleForChannel`, `GetBundleThatReplaces`,
    /// `GetDefaultBundleThatProvides`: everything, but without the entry's
    /// `replaces` and `skips` (upstream trims them from single bundles).
    Single,
    /// `ListBundles`: the entry's `replaces` and `skips`, and no `csvJson`
    /// or `object` when the bundle has an image.
    Listed,
    /// `Listed` without `csvJson` and `object` whatever the image: every
    /// field resolver input reads, without decoding or synthesizing the
    /// manifests it would drop.
    #[cfg(feature = "resolver-input")]
    ListedMetadata,
}

impl BundleForm {
    /// Whether this form carries the channel entry's `replaces` and `skips`.
    fn has_entry_edges(self) -> bool {
        self != BundleForm::Single
    }

    /// Whether a bundle with this image gets `csvJson` and `object`.
    fn has_manifests(self, image: &str) -> bool {
        match self {
            BundleForm::Single => true,
            BundleForm::Listed => image.is_empty(),
            #[cfg(feature = "resolver-input")]
            BundleForm::ListedMetadata => false,
        }
    }
}

#[derive(Deserialize)]
struct BundleDoc<'a> {
    #[serde(borrow, default)]
    properties: Option<Vec<PropertyDoc<'a>>>,
    #[serde(borrow, default, rename = "relatedImages")]
    related_images: Option<Vec<RelatedImageDoc<'a>>>,
}

#[derive(Deserialize)]
struct PropertyDoc<'a> {
    #[serde(borrow, default, rename = "type")]
    ty: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "crate::index::scan::present_raw")]
    value: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct RelatedImageDoc<'a> {
    #[serde(borrow, default)]
    name: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    image: Option<std::borrow::Cow<'a, str>>,
}

#[derive(Deserialize)]
struct BundleObjectValue {
    #[serde(default)]
    data: String,
}

#[derive(Deserialize)]
struct PackageRequiredValue {
    #[serde(default, rename = "packageName")]
    package_name: String,
    #[serde(default, rename = "versionRange")]
    version_range: String,
}

#[derive(Deserialize)]
struct PackageDoc {
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    icon: Option<IconDoc>,
}

#[derive(Deserialize)]
struct IconDoc {
    #[serde(default)]
    base64data: Option<String>,
    #[serde(default)]
    mediatype: Option<String>,
}

impl CatalogIndex {
    /// The `api.Bundle` for entry `entry_id` in the given form.
    pub(crate) fn bundle_message(
        &self,
        entry_id: u32,
        form: BundleForm,
    ) -> Result<api::Bundle, ReadError> {
        let entry = &self.entries[entry_id as usize];
        let rec = &self.bundles[entry.bundle as usize];
        let channel = &self.channels[entry.channel as usize];
        let package = &self.packages[rec.package as usize];
        let image = self.str(rec.image);
        if form == BundleForm::Single
            && let Some(hit) = self.answers.get(entry.bundle)
        {
            return Ok(hit.answer(self.str(channel.name), self.str(entry.skip_range)));
        }
        let want_manifests = form.has_manifests(image);
        // A listed bundle without an image carries its manifests too: a
        // single answer already built has them.
        let cached = want_manifests
            .then(|| self.answers.get(entry.bundle))
            .flatten()
            .map(|hit| hit.manifests());

        let bytes = self.store.read(rec.blob)?;
        let corrupt = |message: String| ReadError::Corrupt {
            path: self.store.describe(rec.blob),
            offset: rec.blob.offset,
            message,
        };
        let doc: BundleDoc<'_> =
            serde_json::from_slice(&bytes).map_err(|e| corrupt(e.to_string()))?;

        let mut properties = Vec::new();
        let mut dependencies = Vec::new();
        let mut objects = Vec::new();
        let mut csv_metadata: Option<&RawValue> = None;
        for p in doc.properties.iter().flatten() {
            let ty = p.ty.as_deref().unwrap_or("");
            let Some(raw) = p.value else {
                return Err(corrupt(format!("property of type {ty:?} has no value")));
            };
            match ty {
                PROPERTY_BUNDLE_OBJECT => {
                    if want_manifests && cached.is_none() {
                        objects.push(manifest_json(raw).map_err(&corrupt)?);
                    }
                    continue;
                }
                PROPERTY_CSV_METADATA => {
                    csv_metadata = Some(raw);
                    continue;
                }
                _ => {}
            }
            let value: Value =
                serde_json::from_str(raw.get()).map_err(|e| corrupt(e.to_string()))?;
            let canonical = go_json::to_string_decoded(&value, false);
            match ty {
                PROPERTY_GVK_REQUIRED => dependencies.push(api::Dependency {
                    r#type: PROPERTY_GVK.to_owned(),
                    value: canonical.clone(),
                }),
                PROPERTY_PACKAGE_REQUIRED => {
                    let required: PackageRequiredValue =
                        serde_json::from_value(value).map_err(|e| corrupt(e.to_string()))?;
                    let mut v = String::from("{\"packageName\":");
                    go_json::write_string(&mut v, &required.package_name, false);
                    v.push_str(",\"version\":");
                    go_json::write_string(&mut v, &required.version_range, false);
                    v.push('}');
                    dependencies.push(api::Dependency {
                        r#type: crate::index::scan::PROPERTY_PACKAGE.to_owned(),
                        value: v,
                    });
                }
                _ => {}
            }
            properties.push(api::Property {
                r#type: ty.to_owned(),
                value: canonical,
            });
        }

        let mut csv_json = String::new();
        if let Some((cached_objects, cached_csv)) = cached {
            objects = cached_objects;
            csv_json = cached_csv;
        } else if want_manifests {
            csv_json = objects
                .iter()
                .find(|o| is_csv(o))
                .cloned()
                .unwrap_or_default();
            if let Some(meta) = csv_metadata.filter(|_| csv_json.is_empty()) {
                let stub = self.stub_csv(
                    entry,
                    meta,
                    doc.related_images.as_deref().unwrap_or(&[]),
                    package.blob,
                )?;
                if objects.is_empty() {
                    objects.push(stub.clone());
                }
                csv_json = stub;
            }
        }

        let gvks = |span: crate::index::Span| -> Vec<api::GroupVersionKind> {
            self.bundle_gvks[span.range()]
                .iter()
                .map(|g| {
                    let g = &self.gvks[*g as usize];
                    api::GroupVersionKind {
                        group: self.str(g.group).to_owned(),
                        version: self.str(g.version).to_owned(),
                        kind: self.str(g.kind).to_owned(),
                        plural: String::new(),
                    }
                })
                .collect()
        };
        let (replaces, skips) = if form.has_entry_edges() {
            (
                self.str(entry.replaces).to_owned(),
                self.skips_of(entry)
                    .iter()
                    .map(|s| self.str(*s).to_owned())
                    .collect(),
            )
        } else {
            (String::new(), Vec::new())
        };
        let answer = api::Bundle {
            csv_name: self.str(rec.name).to_owned(),
            package_name: self.str(package.name).to_owned(),
            channel_name: self.str(channel.name).to_owned(),
            csv_json,
            object: objects,
            bundle_path: image.to_owned(),
            provided_apis: gvks(rec.provided),
            required_apis: gvks(rec.required),
            version: self.str(rec.version).to_owned(),
            skip_range: self.str(entry.skip_range).to_owned(),
            dependencies,
            properties,
            replaces,
            skips,
            deprecation: rec.deprecation.map(|m| api::Deprecation {
                message: self.str(m).to_owned(),
            }),
        };
        if form == BundleForm::Single {
            self.answers
                .insert(entry.bundle, CachedAnswer::new(answer.clone()));
        }
        Ok(answer)
    }

    /// A CSV synthesized from `olm.csv.metadata`, as upstream builds it.
    fn stub_csv(
        &self,
        entry: &EntryRec,
        metadata: &RawValue,
        related_images: &[RelatedImageDoc<'_>],
        package_blob: crate::index::scan::BlobRef,
    ) -> Result<String, ReadError> {
        let rec = &self.bundles[entry.bundle as usize];
        let corrupt = |blob: crate::index::scan::BlobRef, message: String| ReadError::Corrupt {
            path: self.store.describe(blob),
            offset: blob.offset,
            message,
        };
        let meta: Map<String, Value> =
            serde_json::from_str(metadata.get()).map_err(|e| corrupt(rec.blob, e.to_string()))?;
        let package_bytes = self.store.read(package_blob)?;
        let package: PackageDoc = serde_json::from_slice(&package_bytes)
            .map_err(|e| corrupt(package_blob, e.to_string()))?;

        let get = |key: &str| meta.get(key).filter(|v| !is_empty_value(v));
        // No `creationTimestamp`: upstream's apimachinery omits the zero
        // time (`omitzero`), where older releases wrote `null`.
        let mut metadata_fields: Vec<(&str, Node<'_>)> =
            vec![("name", Node::Str(self.str(rec.name).to_owned()))];
        if let Some(labels) = get("labels") {
            metadata_fields.push(("labels", Node::Value(labels)));
        }
        if let Some(annotations) = get("annotations") {
            metadata_fields.push(("annotations", Node::Value(annotations)));
        }

        let mut spec: Vec<(&str, Node<'_>)> = vec![
            (
                "install",
                Node::Raw("{\"strategy\":\"deployment\",\"spec\":{\"deployments\":null}}"),
            ),
            ("version", Node::Str(self.str(rec.version).to_owned())),
        ];
        if let Some(v) = get("maturity") {
            spec.push(("maturity", Node::Value(v)));
        }
        spec.push((
            "customresourcedefinitions",
            get("crdDescriptions").map_or(Node::Raw("{}"), |v| {
                Node::Typed(v, &csv_types::CUSTOM_RESOURCE_DEFINITIONS)
            }),
        ));
        spec.push((
            "apiservicedefinitions",
            get("apiServiceDefinitions").map_or(Node::Raw("{}"), |v| {
                Node::Typed(v, &csv_types::API_SERVICE_DEFINITIONS)
            }),
        ));
        if let Some(v) = get("nativeAPIs") {
            spec.push(("nativeAPIs", Node::Typed(v, &csv_types::NATIVE_APIS)));
        }
        if let Some(v) = get("minKubeVersion") {
            spec.push(("minKubeVersion", Node::Value(v)));
        }
        spec.push((
            "displayName",
            meta.get("displayName")
                .map_or(Node::Raw("\"\""), Node::Value),
        ));
        match get("description") {
            Some(v) => spec.push(("description", Node::Value(v))),
            None => {
                if let Some(d) = package.description.filter(|d| !d.is_empty()) {
                    spec.push(("description", Node::Str(d)));
                }
            }
        }
        if let Some(v) = get("keywords") {
            spec.push(("keywords", Node::Value(v)));
        }
        if let Some(v) = get("maintainers") {
            spec.push(("maintainers", Node::Typed(v, &csv_types::MAINTAINERS)));
        }
        spec.push((
            "provider",
            meta.get("provider")
                .map_or(Node::Raw("{}"), |v| Node::Typed(v, &csv_types::APP_LINK)),
        ));
        if let Some(v) = get("links") {
            spec.push(("links", Node::Typed(v, &csv_types::APP_LINKS)));
        }
        if let Some(icon) = package.icon {
            // Upstream decodes the icon and encodes it again, with Go's
            // decoder (the index refused icons it cannot decode).
            let data = icon.base64data.unwrap_or_default();
            let data = go_json::reencode_base64(&data).unwrap_or(data);
            let mut icon_json = String::from("[{\"base64data\":");
            go_json::write_string(&mut icon_json, &data, true);
            icon_json.push_str(",\"mediatype\":");
            go_json::write_string(
                &mut icon_json,
                icon.mediatype.as_deref().unwrap_or(""),
                true,
            );
            icon_json.push_str("}]");
            spec.push(("icon", Node::Owned(icon_json)));
        }
        if let Some(v) = get("installModes") {
            spec.push(("installModes", Node::Typed(v, &csv_types::INSTALL_MODES)));
        }
        spec.push(("cleanup", Node::Raw("{\"enabled\":false}")));
        if !related_images.is_empty() {
            let mut images = String::from("[");
            for (i, r) in related_images.iter().enumerate() {
                if i > 0 {
                    images.push(',');
                }
                images.push_str("{\"name\":");
                go_json::write_string(&mut images, r.name.as_deref().unwrap_or(""), true);
                images.push_str(",\"image\":");
                go_json::write_string(&mut images, r.image.as_deref().unwrap_or(""), true);
                images.push('}');
            }
            images.push(']');
            spec.push(("relatedImages", Node::Owned(images)));
        }

        let csv = Node::Struct(vec![
            ("kind", Node::Raw("\"ClusterServiceVersion\"")),
            ("apiVersion", Node::Raw("\"operators.coreos.com/v1alpha1\"")),
            ("metadata", Node::Struct(metadata_fields)),
            ("spec", Node::Struct(spec)),
            ("status", Node::Raw("{\"cleanup\":{}}")),
        ]);
        let mut out = String::new();
        csv.write(&mut out);
        Ok(out)
    }
}

/// Whether Go's `omitempty` would leave this value out.
fn is_empty_value(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(_) => false,
    }
}

/// A JSON tree whose top levels keep Go's struct field order, and whose
/// leaves are written with sorted keys.
enum Node<'a> {
    Struct(Vec<(&'a str, Node<'a>)>),
    Value(&'a Value),
    /// A value written as Go writes it once decoded into a struct type.
    Typed(&'a Value, &'static csv_types::GoType),
    Str(String),
    Raw(&'static str),
    Owned(String),
}

impl Node<'_> {
    fn write(&self, out: &mut String) {
        match self {
            Node::Struct(fields) => {
                out.push('{');
                for (i, (key, node)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    go_json::write_string(out, key, true);
                    out.push(':');
                    node.write(out);
                }
                out.push('}');
            }
            Node::Value(v) => go_json::write_value(out, v, true, go_json::Numbers::Float64),
            Node::Typed(v, ty) => csv_types::write(out, v, ty),
            Node::Str(s) => go_json::write_string(out, s, true),
            Node::Raw(s) => out.push_str(s),
            Node::Owned(s) => out.push_str(s),
        }
    }
}

/// One `olm.bundle.object` manifest as JSON, as upstream's `yaml.ToJSON`
/// writes it: the base64 data decoded, parsed as YAML (JSON is YAML), and
/// encoded with sorted keys and HTML escaping.
fn manifest_json(raw: &RawValue) -> Result<String, String> {
    let object: BundleObjectValue =
        serde_json::from_str(raw.get()).map_err(|e| format!("parse bundle object: {e}"))?;
    let data = base64::engine::general_purpose::STANDARD
        .decode(object.data.as_bytes())
        .map_err(|e| format!("decode bundle object data: {e}"))?;
    let value: Value = match serde_json::from_slice(&data) {
        Ok(v) => v,
        Err(_) => serde_yaml_ng::from_slice(&data)
            .map_err(|e| format!("convert bundle object to json: {e}"))?,
    };
    Ok(go_json::to_string_decoded(&value, true))
}

/// Whether a manifest is a ClusterServiceVersion.
fn is_csv(manifest: &str) -> bool {
    #[derive(Deserialize)]
    struct Kind<'a> {
        #[serde(borrow, default)]
        kind: Option<std::borrow::Cow<'a, str>>,
    }
    serde_json::from_str::<Kind<'_>>(manifest)
        .ok()
        .and_then(|k| k.kind)
        .is_some_and(|k| k == "ClusterServiceVersion")
}
