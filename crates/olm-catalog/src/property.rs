//! Properties of bundles, packages and channels (`{type, value}`), kept as raw
//! JSON and decoded on demand into the types OLM knows.
//!
//! A catalog can hold tens of thousands of properties, most of them never
//! looked at (`olm.bundle.object` carries whole base64 manifests). A
//! [`Property`] therefore keeps its value as the exact JSON text it was read
//! from, and [`Property::parse`] decodes it when asked, the way upstream's
//! `property.Parse` does: field names match case-insensitively (see
//! [`crate::field_names`]), unknown fields are ignored (except in
//! `olm.constraint`, where upstream refuses them), and `null` reads as empty.

use std::{collections::BTreeMap, fmt};

use base64::Engine as _;
use olm_api::{
    csv::{
        ApiServiceDefinitions, AppLink, CustomResourceDefinitions, GroupVersionKind, InstallMode,
        Maintainer,
    },
    labels::property_type,
};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Value, value::RawValue};

use crate::{
    document::{json_error_message, json_nesting_exceeds, parse_json_value},
    field_names::{Shape, canonicalize},
    go_json,
    limits::{Limits, MAX_CONSTRAINT_BYTES, MAX_NESTING_DEPTH},
};

/// `olm.package`: the bundle's own package name and version.
pub const PACKAGE: &str = property_type::PACKAGE;
/// `olm.package.required`: a package (and version range) the bundle needs.
pub const PACKAGE_REQUIRED: &str = property_type::PACKAGE_REQUIRED;
/// `olm.gvk`: an API the bundle provides.
pub const GVK: &str = property_type::GVK;
/// `olm.gvk.required`: an API the bundle needs.
pub const GVK_REQUIRED: &str = property_type::GVK_REQUIRED;
/// `olm.label`: a label the bundle carries.
pub const LABEL: &str = property_type::LABEL;
/// `olm.label.required`: a label the bundle needs another bundle to carry.
pub const LABEL_REQUIRED: &str = property_type::LABEL_REQUIRED;
/// `olm.constraint`: a generic dependency (gvk, package, all, any, not, cel).
pub const CONSTRAINT: &str = property_type::CONSTRAINT;
/// `olm.deprecated`: the legacy marker that makes a bundle uninstallable.
pub const DEPRECATED: &str = property_type::DEPRECATED;
/// `olm.csv.metadata`: the presentational part of a CSV, in place of the CSV.
pub const CSV_METADATA: &str = property_type::CSV_METADATA;
/// `olm.bundle.object`: one manifest of the bundle, base64-encoded.
pub const BUNDLE_OBJECT: &str = "olm.bundle.object";
/// `olm.channel`: upstream's internal channel property (not for public use).
pub const CHANNEL: &str = "olm.channel";

/// Whether a property of type `type_` is one of a bundle's payloads
/// (`olm.bundle.object`, `olm.csv.metadata`): most of a catalog's bytes,
/// and nothing resolution reads.
pub fn is_payload(type_: &str) -> bool {
    type_ == BUNDLE_OBJECT || type_ == CSV_METADATA
}

/// One property: a type and a JSON value, kept as written.
#[derive(Debug, Clone)]
pub struct Property {
    /// The property type, for example `olm.gvk`.
    pub type_: String,
    /// The value, as the exact JSON text it was read from.
    pub value: Box<RawValue>,
    /// Fields of the property object other than `type` and `value`, kept
    /// verbatim so that rendering loses nothing. Upstream drops them.
    pub extra: Vec<(String, Box<RawValue>)>,
}

impl PartialEq for Property {
    /// Equal when the types are equal and the values are the same JSON text
    /// up to insignificant whitespace.
    fn eq(&self, other: &Self) -> bool {
        self.type_ == other.type_
            && json_text_eq(self.value.get(), other.value.get())
            && self.extra.len() == other.extra.len()
            && self
                .extra
                .iter()
                .zip(&other.extra)
                .all(|((ka, va), (kb, vb))| ka == kb && json_text_eq(va.get(), vb.get()))
    }
}

/// Whether two JSON texts are equal up to whitespace outside strings.
pub(crate) fn json_text_eq(a: &str, b: &str) -> bool {
    let mut a = JsonChars::new(a);
    let mut b = JsonChars::new(b);
    loop {
        match (a.next(), b.next()) {
            (None, None) => return true,
            (x, y) if x != y => return false,
            _ => {}
        }
    }
}

/// The bytes of JSON text without insignificant whitespace.
struct JsonChars<'a> {
    bytes: std::slice::Iter<'a, u8>,
    in_string: bool,
    escaped: bool,
}

impl<'a> JsonChars<'a> {
    fn new(text: &'a str) -> Self {
        Self {
            bytes: text.as_bytes().iter(),
            in_string: false,
            escaped: false,
        }
    }
}

impl Iterator for JsonChars<'_> {
    type Item = u8;

    fn next(&mut self) -> Option<u8> {
        loop {
            let b = *self.bytes.next()?;
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                }
                return Some(b);
            }
            match b {
                b' ' | b'\t' | b'\n' | b'\r' => continue,
                b'"' => {
                    self.in_string = true;
                    return Some(b);
                }
                _ => return Some(b),
            }
        }
    }
}

/// Why a property value could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PropertyError {
    /// The value does not have the shape its type requires.
    #[error("invalid {type_} value: {message}")]
    Invalid {
        /// The property type.
        type_: String,
        /// What is wrong.
        message: String,
    },
    /// An `olm.constraint` value is larger than upstream allows.
    #[error("olm.constraint value is greater than max constraint size {limit} bytes")]
    ConstraintTooLarge {
        /// The limit, [`MAX_CONSTRAINT_BYTES`].
        limit: usize,
    },
}

impl Property {
    /// A property with a value serialized from `value`.
    pub fn new(
        type_: impl Into<String>,
        value: &impl Serialize,
    ) -> Result<Self, serde_json::Error> {
        Ok(Self {
            type_: type_.into(),
            value: serde_json::value::to_raw_value(value)?,
            extra: Vec::new(),
        })
    }

    /// A property from a type and a JSON text value.
    pub fn from_json(type_: impl Into<String>, json: &str) -> Result<Self, serde_json::Error> {
        Ok(Self {
            type_: type_.into(),
            value: RawValue::from_string(json.to_owned())?,
            extra: Vec::new(),
        })
    }

    /// Decodes the value according to the type.
    pub fn parse(&self) -> Result<PropertyValue, PropertyError> {
        parse_value(&self.type_, self.value.get(), Nesting::Unchecked)
    }
}

/// What is known of a value's nesting before it is decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Nesting {
    /// Nothing: decoding checks it against [`MAX_NESTING_DEPTH`].
    Unchecked,
    /// It is no deeper than [`MAX_NESTING_DEPTH`] (it is part of a document
    /// checked against that limit or a lower one).
    Within,
}

/// [`Property::parse`] of a property of type `type_` whose value is `raw`.
pub(crate) fn parse_value(
    type_: &str,
    raw: &str,
    nesting: Nesting,
) -> Result<PropertyValue, PropertyError> {
    let invalid = |message: String| PropertyError::Invalid {
        type_: type_.to_owned(),
        message,
    };
    Ok(match type_ {
        PACKAGE => PropertyValue::Package(decode(raw, nesting, &PACKAGE_SHAPE).map_err(invalid)?),
        PACKAGE_REQUIRED => PropertyValue::PackageRequired(
            decode(raw, nesting, &PACKAGE_REQUIRED_SHAPE).map_err(invalid)?,
        ),
        GVK => PropertyValue::Gvk(decode(raw, nesting, &GVK_SHAPE).map_err(invalid)?),
        GVK_REQUIRED => {
            PropertyValue::GvkRequired(decode(raw, nesting, &GVK_SHAPE).map_err(invalid)?)
        }
        LABEL => PropertyValue::Label(decode(raw, nesting, &LABEL_SHAPE).map_err(invalid)?),
        LABEL_REQUIRED => {
            PropertyValue::LabelRequired(decode(raw, nesting, &LABEL_SHAPE).map_err(invalid)?)
        }
        BUNDLE_OBJECT => PropertyValue::BundleObject(
            decode(raw, nesting, &BUNDLE_OBJECT_SHAPE).map_err(invalid)?,
        ),
        CSV_METADATA => PropertyValue::CsvMetadata(Box::new(
            decode(raw, nesting, &CSV_METADATA_SHAPE).map_err(invalid)?,
        )),
        CHANNEL => PropertyValue::Channel(decode(raw, nesting, &CHANNEL_SHAPE).map_err(invalid)?),
        CONSTRAINT => PropertyValue::Constraint(Constraint::parse(raw)?),
        DEPRECATED => PropertyValue::Deprecated,
        _ => PropertyValue::Other,
    })
}

/// Decodes `raw` as `T` after Go-style case folding of the known fields.
fn decode<T: serde::de::DeserializeOwned>(
    raw: &str,
    nesting: Nesting,
    shape: &Shape,
) -> Result<T, String> {
    if let Some(value) = decode_exact(raw, nesting) {
        return Ok(value);
    }
    decode_folded(raw, shape)
}

/// `raw` decoded straight into `T`, when that gives what [`decode_folded`]
/// gives: an object, within the nesting limit, every key spelled as its
/// field and none repeated (serde refuses a repeated field) or left unread
/// (a key in another case, which Go would match). Otherwise `None`, and the
/// caller takes the slow path, which builds a value tree to fold keys.
fn decode_exact<T: serde::de::DeserializeOwned>(raw: &str, nesting: Nesting) -> Option<T> {
    if !raw.trim_start().starts_with('{')
        || (nesting == Nesting::Unchecked && json_nesting_exceeds(raw, MAX_NESTING_DEPTH))
    {
        return None;
    }
    let mut unread = false;
    let mut de = serde_json::Deserializer::from_str(raw);
    let value = serde_ignored::deserialize(&mut de, |_| unread = true).ok()?;
    de.end().ok()?;
    (!unread).then_some(value)
}

/// [`decode`] through a value tree whose keys are folded to the fields'
/// spelling first.
fn decode_folded<T: serde::de::DeserializeOwned>(raw: &str, shape: &Shape) -> Result<T, String> {
    let mut value = parse_json_value(raw, &Limits::default()).map_err(|e| e.to_string())?;
    // serde would read a struct from an array of its fields; Go refuses.
    match &value {
        Value::Object(_) => {}
        Value::Null => value = Value::Object(serde_json::Map::new()),
        Value::Array(_) => return Err("expected an object, found an array".to_owned()),
        Value::String(_) => return Err("expected an object, found a string".to_owned()),
        Value::Number(_) => return Err("expected an object, found a number".to_owned()),
        Value::Bool(_) => return Err("expected an object, found a boolean".to_owned()),
    }
    canonicalize(&mut value, shape);
    // Go reads a null as the zero value where serde refuses it.
    crate::go_null::from_value(&value).map_err(|e| json_error_message(&e))
}

/// Reads `null` as the default value, as Go's `encoding/json` does.
fn null_as_default<'de, D: Deserializer<'de>, T: Default + Deserialize<'de>>(
    deserializer: D,
) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// A decoded property value.
#[derive(Debug, Clone, PartialEq)]
pub enum PropertyValue {
    /// `olm.package`.
    Package(PackageProperty),
    /// `olm.package.required`.
    PackageRequired(PackageRequired),
    /// `olm.gvk`.
    Gvk(Gvk),
    /// `olm.gvk.required`.
    GvkRequired(Gvk),
    /// `olm.label`.
    Label(Label),
    /// `olm.label.required`.
    LabelRequired(Label),
    /// `olm.constraint`.
    Constraint(Constraint),
    /// `olm.bundle.object`.
    BundleObject(BundleObject),
    /// `olm.csv.metadata`.
    CsvMetadata(Box<CsvMetadata>),
    /// `olm.channel` (upstream-internal).
    Channel(ChannelProperty),
    /// `olm.deprecated`.
    Deprecated,
    /// Any other type: the value is opaque.
    Other,
}

/// `olm.package`: `{packageName, version, release}`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PackageProperty {
    /// The package name.
    #[serde(default, deserialize_with = "null_as_default")]
    pub package_name: String,
    /// The version, a strict semantic version in a valid catalog.
    #[serde(default, deserialize_with = "null_as_default")]
    pub version: String,
    /// The release of the version (upstream's newest addition), if any.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub release: String,
}

static PACKAGE_SHAPE: Shape = Shape::Object(&[
    ("packageName", &Shape::Opaque),
    ("version", &Shape::Opaque),
    ("release", &Shape::Opaque),
]);

/// `olm.package.required`: `{packageName, versionRange}`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PackageRequired {
    /// The package needed.
    #[serde(default, deserialize_with = "null_as_default")]
    pub package_name: String,
    /// A blang semver range of acceptable versions.
    #[serde(default, deserialize_with = "null_as_default")]
    pub version_range: String,
}

static PACKAGE_REQUIRED_SHAPE: Shape = Shape::Object(&[
    ("packageName", &Shape::Opaque),
    ("versionRange", &Shape::Opaque),
]);

/// `olm.gvk` and `olm.gvk.required`: `{group, kind, version}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize)]
pub struct Gvk {
    /// The API group.
    #[serde(default, deserialize_with = "null_as_default")]
    pub group: String,
    /// The kind.
    #[serde(default, deserialize_with = "null_as_default")]
    pub kind: String,
    /// The API version.
    #[serde(default, deserialize_with = "null_as_default")]
    pub version: String,
}

static GVK_SHAPE: Shape = Shape::Object(&[
    ("group", &Shape::Opaque),
    ("kind", &Shape::Opaque),
    ("version", &Shape::Opaque),
]);

/// `olm.label` and `olm.label.required`: `{label}`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Label {
    /// The label.
    #[serde(default, deserialize_with = "null_as_default")]
    pub label: String,
}

static LABEL_SHAPE: Shape = Shape::Object(&[("label", &Shape::Opaque)]);

/// `olm.channel` (upstream-internal): `{channelName}`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChannelProperty {
    /// The channel name.
    #[serde(default, deserialize_with = "null_as_default")]
    pub channel_name: String,
}

static CHANNEL_SHAPE: Shape = Shape::Object(&[("channelName", &Shape::Opaque)]);

/// `olm.bundle.object`: `{data}`, one manifest of the bundle, base64-encoded.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct BundleObject {
    /// The manifest (JSON or YAML), base64-encoded.
    #[serde(default, deserialize_with = "null_as_default")]
    pub data: String,
}

static BUNDLE_OBJECT_SHAPE: Shape = Shape::Object(&[("data", &Shape::Opaque)]);

impl BundleObject {
    /// The object for `manifest`, encoded as upstream encodes it.
    pub fn encode(manifest: &[u8]) -> Self {
        Self {
            data: base64::engine::general_purpose::STANDARD.encode(manifest),
        }
    }

    /// The manifest bytes, decoded as upstream's loader decodes them (see
    /// [`go_json::decode_base64`]): line breaks are skipped and non-zero
    /// bits after the last byte accepted, as Go's decoder does.
    pub fn decode(&self) -> Result<Vec<u8>, go_json::Base64Error> {
        go_json::decode_base64(&self.data)
    }
}

/// `olm.csv.metadata`: what a catalog keeps of a CSV when it does not carry the
/// CSV itself (upstream `property.CSVMetadata`). Field order and omission
/// follow upstream, so that a rendered value matches `opm`'s.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CsvMetadata {
    /// The CSV's `metadata.annotations`.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub annotations: BTreeMap<String, String>,
    /// `spec.apiservicedefinitions`; upstream always writes it (`omitempty`
    /// does not apply to Go structs), even empty.
    #[serde(default, deserialize_with = "null_as_default")]
    pub api_service_definitions: ApiServiceDefinitions,
    /// `spec.customresourcedefinitions`; always written, like the above.
    #[serde(
        default,
        rename = "crdDescriptions",
        deserialize_with = "null_as_default"
    )]
    pub custom_resource_definitions: CustomResourceDefinitions,
    /// `spec.description`.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub description: String,
    /// `spec.displayName`.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub display_name: String,
    /// `spec.installModes`.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub install_modes: Vec<InstallMode>,
    /// `spec.keywords`.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub keywords: Vec<String>,
    /// The CSV's `metadata.labels`.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub labels: BTreeMap<String, String>,
    /// `spec.links`.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub links: Vec<AppLink>,
    /// `spec.maintainers`.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub maintainers: Vec<Maintainer>,
    /// `spec.maturity`.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub maturity: String,
    /// `spec.minKubeVersion`.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub min_kube_version: String,
    /// `spec.nativeAPIs`.
    #[serde(
        default,
        rename = "nativeAPIs",
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub native_apis: Vec<GroupVersionKind>,
    /// `spec.provider`; upstream always writes it, even empty.
    #[serde(default, deserialize_with = "null_as_default")]
    pub provider: AppLink,
}

static APP_LINK_SHAPE: Shape = Shape::Object(&[("name", &Shape::Opaque), ("url", &Shape::Opaque)]);
static APP_LINKS_SHAPE: Shape = Shape::List(&APP_LINK_SHAPE);
static MAINTAINER_SHAPE: Shape =
    Shape::Object(&[("name", &Shape::Opaque), ("email", &Shape::Opaque)]);
static INSTALL_MODE_SHAPE: Shape =
    Shape::Object(&[("type", &Shape::Opaque), ("supported", &Shape::Opaque)]);
static GROUP_VERSION_KIND_SHAPE: Shape = Shape::Object(&[
    ("group", &Shape::Opaque),
    ("version", &Shape::Opaque),
    ("kind", &Shape::Opaque),
]);

static CSV_METADATA_SHAPE: Shape = Shape::Object(&[
    ("annotations", &Shape::Opaque),
    (
        "apiServiceDefinitions",
        &crate::csv_keys::API_SERVICE_DEFINITIONS_SHAPE,
    ),
    ("crdDescriptions", &crate::csv_keys::CRD_DEFINITIONS_SHAPE),
    ("description", &Shape::Opaque),
    ("displayName", &Shape::Opaque),
    ("installModes", &Shape::List(&INSTALL_MODE_SHAPE)),
    ("keywords", &Shape::Opaque),
    ("labels", &Shape::Opaque),
    ("links", &APP_LINKS_SHAPE),
    ("maintainers", &Shape::List(&MAINTAINER_SHAPE)),
    ("maturity", &Shape::Opaque),
    ("minKubeVersion", &Shape::Opaque),
    ("nativeAPIs", &Shape::List(&GROUP_VERSION_KIND_SHAPE)),
    ("provider", &APP_LINK_SHAPE),
]);

/// `olm.constraint` (operator-framework/api `constraints.Constraint`).
///
/// Upstream allows several alternatives to be set at once and uses the first
/// in the order gvk, package, all, any, not, cel; [`Constraint::kind`] does
/// the same.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Constraint {
    /// The message shown when the constraint cannot be satisfied.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub failure_message: String,
    /// A CEL rule over the candidate's properties.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cel: Option<CelConstraint>,
    /// A package and version range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<PackageConstraint>,
    /// An API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gvk: Option<Gvk>,
    /// All of these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all: Option<CompoundConstraint>,
    /// At least one of these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub any: Option<CompoundConstraint>,
    /// None of these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not: Option<CompoundConstraint>,
}

/// The constraint list of `all`, `any` and `not`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompoundConstraint {
    /// The constraints combined.
    #[serde(default, deserialize_with = "null_as_default")]
    pub constraints: Vec<Constraint>,
}

/// A CEL constraint: `{rule}`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CelConstraint {
    /// The CEL expression; it must evaluate to a boolean.
    #[serde(default, deserialize_with = "null_as_default")]
    pub rule: String,
}

/// A package constraint: `{packageName, versionRange}`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PackageConstraint {
    /// The package needed.
    #[serde(default, deserialize_with = "null_as_default")]
    pub package_name: String,
    /// A blang semver range of acceptable versions.
    #[serde(default, deserialize_with = "null_as_default")]
    pub version_range: String,
}

/// Which alternative of a [`Constraint`] is in effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConstraintKind<'a> {
    /// An API.
    Gvk(&'a Gvk),
    /// A package and version range.
    Package(&'a PackageConstraint),
    /// All of these.
    All(&'a [Constraint]),
    /// At least one of these.
    Any(&'a [Constraint]),
    /// None of these.
    Not(&'a [Constraint]),
    /// A CEL rule.
    Cel(&'a CelConstraint),
}

static CONSTRAINT_SHAPE: Shape = Shape::Object(&[
    ("failureMessage", &Shape::Opaque),
    ("cel", &Shape::Object(&[("rule", &Shape::Opaque)])),
    (
        "package",
        &Shape::Object(&[
            ("packageName", &Shape::Opaque),
            ("versionRange", &Shape::Opaque),
        ]),
    ),
    ("gvk", &GVK_SHAPE),
    ("all", &COMPOUND_SHAPE),
    ("any", &COMPOUND_SHAPE),
    ("not", &COMPOUND_SHAPE),
]);
static COMPOUND_SHAPE: Shape = Shape::Object(&[("constraints", &CONSTRAINTS_SHAPE)]);
static CONSTRAINTS_SHAPE: Shape = Shape::List(&CONSTRAINT_SHAPE);

impl Constraint {
    /// Parses an `olm.constraint` value as upstream's `constraints.Parse`
    /// does: at most [`MAX_CONSTRAINT_BYTES`], unknown fields refused.
    pub fn parse(raw: &str) -> Result<Self, PropertyError> {
        if raw.len() > MAX_CONSTRAINT_BYTES {
            return Err(PropertyError::ConstraintTooLarge {
                limit: MAX_CONSTRAINT_BYTES,
            });
        }
        decode(raw, Nesting::Unchecked, &CONSTRAINT_SHAPE).map_err(|message| {
            PropertyError::Invalid {
                type_: CONSTRAINT.to_owned(),
                message,
            }
        })
    }

    /// The alternative in effect, in upstream's order of precedence; `None`
    /// for an empty constraint (which upstream's resolver rejects with
    /// "constraint is empty").
    pub fn kind(&self) -> Option<ConstraintKind<'_>> {
        if let Some(gvk) = &self.gvk {
            Some(ConstraintKind::Gvk(gvk))
        } else if let Some(package) = &self.package {
            Some(ConstraintKind::Package(package))
        } else if let Some(all) = &self.all {
            Some(ConstraintKind::All(&all.constraints))
        } else if let Some(any) = &self.any {
            Some(ConstraintKind::Any(&any.constraints))
        } else if let Some(not) = &self.not {
            Some(ConstraintKind::Not(&not.constraints))
        } else {
            self.cel.as_ref().map(ConstraintKind::Cel)
        }
    }

    /// How many alternatives are set (upstream uses only the first).
    pub fn alternatives_set(&self) -> usize {
        [
            self.gvk.is_some(),
            self.package.is_some(),
            self.all.is_some(),
            self.any.is_some(),
            self.not.is_some(),
            self.cel.is_some(),
        ]
        .into_iter()
        .filter(|set| *set)
        .count()
    }
}

impl fmt::Display for Property {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.type_, self.value.get())
    }
}

/// Serializes a property as `{"type":…,"value":…}` plus its extra fields.
impl Serialize for Property {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(2 + self.extra.len()))?;
        map.serialize_entry("type", &self.type_)?;
        map.serialize_entry("value", &self.value)?;
        for (key, value) in &self.extra {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// A JSON value as a [`Value`] (for callers that want a tree).
pub fn raw_to_value(raw: &RawValue) -> Result<Value, String> {
    parse_json_value(raw.get(), &Limits::default()).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    mod exact_decoding {
        use proptest::prelude::*;

        use super::super::*;

        /// Pieces of CSV metadata, each with keys as written, some in
        /// another case, some repeated, some of the wrong type.
        const FIELDS: &[&str] = &[
            r#""description":"d""#,
            r#""Description":"D""#,
            r#""displayName":"n""#,
            r#""displayname":7"#,
            r#""annotations":{"a":"1","A":"2"}"#,
            r#""annotations":{"a":1}"#,
            r#""annotations":null"#,
            r#""keywords":["k","l"]"#,
            r#""keywords":"k""#,
            r#""installModes":[{"type":"OwnNamespace","supported":true}]"#,
            r#""installModes":[{"Type":"AllNamespaces","supported":false}]"#,
            r#""installModes":[{"type":"OwnNamespace","supported":"yes"}]"#,
            r#""maintainers":[{"name":"m","email":"e"}]"#,
            r#""maintainers":[null]"#,
            r#""provider":{"name":"p"}"#,
            r#""provider":{"NAME":"p","url":"u"}"#,
            r#""provider":["p","u"]"#,
            r#""nativeAPIs":[{"group":"","version":"v1","kind":"Pod"}]"#,
            r#""crdDescriptions":{"owned":[{"name":"a.b","version":"v1","kind":"A"}]}"#,
            r#""crdDescriptions":{"Owned":[{"Name":"a.b","version":"v1","kind":"A"}]}"#,
            r#""apiServiceDefinitions":null"#,
            r#""vendor":{"deep":[[[1]]]}"#,
            r#""maturity":"alpha""#,
            r#""minKubeVersion":null"#,
            r#""links":[{"name":"l","url":"u"}],"labels":{"x":"y"}"#,
            r#""keywords":["k",null]"#,
            r#""installModes":[null,{"type":null,"supported":null}]"#,
        ];

        fn metadata(picks: &[usize]) -> String {
            let fields: Vec<&str> = picks.iter().map(|&i| FIELDS[i % FIELDS.len()]).collect();
            format!("{{{}}}", fields.join(","))
        }

        #[test]
        fn canonical_text_takes_the_fast_path_and_the_rest_does_not() {
            let canonical = metadata(&[0, 2, 4, 7, 9, 12, 14, 17, 18, 22, 24]);
            let fast = decode_exact::<CsvMetadata>(&canonical, Nesting::Unchecked)
                .expect("fast path taken");
            assert_eq!(
                Ok(fast),
                decode_folded::<CsvMetadata>(&canonical, &CSV_METADATA_SHAPE)
            );
            let slow = [
                (metadata(&[1]), "a key in another case"),
                (metadata(&[0, 0]), "a repeated field"),
                (metadata(&[10]), "a nested key in another case"),
                (metadata(&[21]), "an unknown field"),
                ("[\"d\"]".to_owned(), "an array"),
                ("null".to_owned(), "null"),
                (
                    format!(
                        r#"{{"vendor":{}1{}}}"#,
                        "[".repeat(MAX_NESTING_DEPTH),
                        "]".repeat(MAX_NESTING_DEPTH)
                    ),
                    "nesting over the limit",
                ),
            ];
            for (text, why) in slow {
                assert!(
                    decode_exact::<CsvMetadata>(&text, Nesting::Unchecked).is_none(),
                    "{why}: {text}"
                );
            }
            // Each of those still decodes (or fails) as Go would.
            assert_eq!(
                decode::<CsvMetadata>(&metadata(&[1]), Nesting::Unchecked, &CSV_METADATA_SHAPE)
                    .unwrap()
                    .description,
                "D"
            );
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]
            #[test]
            fn the_fast_path_decodes_what_folding_decodes(
                picks in proptest::collection::vec(0usize..64, 0..8)
            ) {
                let text = metadata(&picks);
                if let Some(fast) = decode_exact::<CsvMetadata>(&text, Nesting::Unchecked) {
                    prop_assert_eq!(
                        Ok(fast),
                        decode_folded::<CsvMetadata>(&text, &CSV_METADATA_SHAPE),
                        "{}", text
                    );
                }
                let package = text.replace("description", "packageName");
                if let Some(fast) = decode_exact::<PackageProperty>(&package, Nesting::Unchecked) {
                    prop_assert_eq!(Ok(fast), decode_folded(&package, &PACKAGE_SHAPE), "{}", package);
                }
            }
        }
    }

    fn prop(type_: &str, json: &str) -> Property {
        Property::from_json(type_, json).unwrap()
    }

    #[test]
    fn known_types_decode() {
        assert_eq!(
            prop(PACKAGE, r#"{"packageName":"etcd","version":"0.9.4"}"#)
                .parse()
                .unwrap(),
            PropertyValue::Package(PackageProperty {
                package_name: "etcd".into(),
                version: "0.9.4".into(),
                release: String::new(),
            })
        );
        assert_eq!(
            prop(GVK_REQUIRED, r#"{"group":"g","kind":"K","version":"v1"}"#)
                .parse()
                .unwrap(),
            PropertyValue::GvkRequired(Gvk {
                group: "g".into(),
                kind: "K".into(),
                version: "v1".into()
            })
        );
        assert_eq!(
            prop("vendor.example", "[1,2]").parse().unwrap(),
            PropertyValue::Other
        );
        assert_eq!(
            prop(DEPRECATED, "{}").parse().unwrap(),
            PropertyValue::Deprecated
        );
    }

    #[test]
    fn decoding_is_lenient_like_go() {
        // Case-insensitive names, unknown fields ignored, null as empty.
        let p = prop(
            PACKAGE_REQUIRED,
            r#"{"PackageName":"p","versionrange":">=1.0.0","namespace":"x","channel":null}"#,
        );
        assert_eq!(
            p.parse().unwrap(),
            PropertyValue::PackageRequired(PackageRequired {
                package_name: "p".into(),
                version_range: ">=1.0.0".into()
            })
        );
        assert_eq!(
            prop(PACKAGE, r#"{"packageName":null,"version":"1.0.0"}"#)
                .parse()
                .unwrap(),
            PropertyValue::Package(PackageProperty {
                version: "1.0.0".into(),
                ..PackageProperty::default()
            })
        );
    }

    #[test]
    fn wrong_shapes_are_errors() {
        let err = prop(PACKAGE, r#"{"packageName":1}"#).parse().unwrap_err();
        assert!(
            err.to_string()
                .starts_with("invalid olm.package value: invalid type: integer"),
            "{err}"
        );
        assert!(prop(GVK, "[]").parse().is_err());
        assert!(prop(BUNDLE_OBJECT, r#"{"data":5}"#).parse().is_err());
    }

    #[test]
    fn constraints_follow_upstream() {
        let c = prop(
            CONSTRAINT,
            r#"{"failureMessage":"needs x","any":{"constraints":[{"gvk":{"group":"g","version":"v1","kind":"K"}},{"package":{"packageName":"p","versionRange":">=1.0.0"}}]}}"#,
        );
        let PropertyValue::Constraint(c) = c.parse().unwrap() else {
            panic!()
        };
        let Some(ConstraintKind::Any(subs)) = c.kind() else {
            panic!("{c:?}")
        };
        assert_eq!(subs.len(), 2);
        assert!(matches!(subs[1].kind(), Some(ConstraintKind::Package(_))));

        // Unknown fields are refused, as upstream's DisallowUnknownFields does.
        assert!(
            prop(CONSTRAINT, r#"{"gvk":{"group":"g"},"bogus":1}"#)
                .parse()
                .is_err()
        );
        // An empty constraint parses; the resolver refuses it later.
        let PropertyValue::Constraint(empty) = prop(CONSTRAINT, "{}").parse().unwrap() else {
            panic!()
        };
        assert_eq!(empty.kind(), None);
        // Several alternatives: the first in upstream's order wins.
        let both = Constraint::parse(
            r#"{"cel":{"rule":"true"},"gvk":{"group":"g","version":"v","kind":"K"}}"#,
        )
        .unwrap();
        assert!(matches!(both.kind(), Some(ConstraintKind::Gvk(_))));
        assert_eq!(both.alternatives_set(), 2);
    }

    #[test]
    fn oversized_constraints_are_refused() {
        let rule = "x".repeat(MAX_CONSTRAINT_BYTES);
        let raw = format!(r#"{{"cel":{{"rule":"{rule}"}}}}"#);
        assert_eq!(
            Constraint::parse(&raw),
            Err(PropertyError::ConstraintTooLarge { limit: 131_072 })
        );
        assert_eq!(
            Constraint::parse(&raw).unwrap_err().to_string(),
            "olm.constraint value is greater than max constraint size 131072 bytes"
        );
    }

    #[test]
    fn deeply_nested_constraints_are_an_error_not_a_crash() {
        let depth = 10_000;
        let raw = format!(
            "{}{}",
            r#"{"not":{"constraints":["#.repeat(depth),
            "]}}".repeat(depth)
        );
        assert!(Constraint::parse(&raw[..raw.len().min(MAX_CONSTRAINT_BYTES)]).is_err());
        let small = format!(
            "{}{}",
            r#"{"not":{"constraints":["#.repeat(60),
            "]}}".repeat(60)
        );
        assert!(Constraint::parse(&small).is_err());
    }

    #[test]
    fn bundle_objects_round_trip_base64() {
        let object = BundleObject::encode(b"{\"kind\":\"ConfigMap\"}");
        assert_eq!(object.decode().unwrap(), b"{\"kind\":\"ConfigMap\"}");
        let wrapped = BundleObject {
            data: format!("{}\n{}", &object.data[..8], &object.data[8..]),
        };
        assert_eq!(wrapped.decode().unwrap(), b"{\"kind\":\"ConfigMap\"}");
        assert_eq!(
            BundleObject {
                data: "YR==".into()
            }
            .decode()
            .unwrap(),
            b"a",
            "non-zero trailing bits are accepted, as Go accepts them"
        );
        assert_eq!(
            BundleObject { data: "!!".into() }.decode(),
            Err(go_json::Base64Error { offset: 0 })
        );
    }

    #[test]
    fn csv_metadata_writes_like_upstream() {
        let metadata = CsvMetadata {
            display_name: "Etcd".into(),
            ..CsvMetadata::default()
        };
        assert_eq!(
            serde_json::to_string(&metadata).unwrap(),
            r#"{"apiServiceDefinitions":{},"crdDescriptions":{},"displayName":"Etcd","provider":{}}"#
        );
        let p = prop(
            CSV_METADATA,
            r#"{"DisplayName":"x","crdDescriptions":{"owned":[{"name":"a.b","version":"v1","kind":"A"}]},"provider":{"name":"me"}}"#,
        );
        let PropertyValue::CsvMetadata(m) = p.parse().unwrap() else {
            panic!()
        };
        assert_eq!(m.display_name, "x");
        assert_eq!(
            m.custom_resource_definitions.owned.as_ref().unwrap()[0].name,
            "a.b"
        );
    }

    #[test]
    fn equality_ignores_whitespace_outside_strings_only() {
        assert_eq!(
            prop(GVK, r#"{ "a" : [1, 2] }"#),
            prop(GVK, r#"{"a":[1,2]}"#)
        );
        assert_ne!(prop(GVK, r#"{"a":"x y"}"#), prop(GVK, r#"{"a":"xy"}"#));
        assert_ne!(prop(GVK, r#"{"a":1}"#), prop(GVK_REQUIRED, r#"{"a":1}"#));
        assert!(json_text_eq(r#""a\" b""#, r#""a\" b""#));
        assert!(!json_text_eq(r#""a\" b""#, r#""a\"b""#));
    }

    #[test]
    fn properties_serialize_with_extras() {
        let mut p = prop(GVK, r#"{"group":"g"}"#);
        p.extra
            .push(("note".into(), RawValue::from_string("1".into()).unwrap()));
        assert_eq!(
            serde_json::to_string(&p).unwrap(),
            r#"{"type":"olm.gvk","value":{"group":"g"},"note":1}"#
        );
    }
}
