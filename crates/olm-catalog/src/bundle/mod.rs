//! `registry+v1` bundles: a `manifests/` directory (the CSV, CRDs and other
//! objects) and a `metadata/` directory (`annotations.yaml`, optional
//! dependencies and properties), read from a directory or from in-memory
//! files (for example the entries of an image layer), and the properties
//! `opm render` derives from them.
//!
//! Reading follows operator-registry's bundle parser (`pkg/registry/parse.go`)
//! and `ObjectsAndPropertiesFromBundle`, so that a bundle upstream renders is
//! rendered here, with the same properties in the same order:
//!
//! * `manifests/`: every regular file not starting with `.`, in name order,
//!   `.yaml`, `.yml` or `.json` alike; only the first document of a file is
//!   used; a file that does not decode to an object with a `kind` is skipped;
//!   only the first CSV is used. Each of those is recorded as a
//!   [`BundleWarning`]; [`crate::validate::validate_bundle`] turns the ones
//!   `opm alpha bundle validate` rejects into errors.
//! * `metadata/`: every file is tried as the annotations file, the
//!   dependencies file and the properties file, by content, not by name (so
//!   a misnamed `dependency.yaml`, or a `properties.yaml` holding
//!   `dependencies:`, work as upstream); the first file that decodes to a
//!   non-empty one of each wins; files that do not decode are skipped.
//! * `annotations.yaml` is authoritative: the package and channels come from
//!   it, not from the CSV or the directory name, and image labels that
//!   disagree with it are reported and ignored.
//! * The CSV is read after Go-style key normalisation
//!   ([`crate::csv_keys::normalize_csv_keys`]); every rename is a warning.
//!
//! Properties, as `opm render` derives them: `olm.package` (annotations'
//! package, CSV version and release), `olm.gvk` for every CRD version and
//! owned APIService, `olm.gvk.required` for required CRDs and APIServices and
//! for `olm.gvk` dependencies, `olm.package.required` for `olm.package`
//! dependencies (the dependency's `version` is the range), other
//! dependencies (`olm.constraint`, `olm.label`) and `properties.yaml`
//! entries verbatim, properties from the CSV's `olm.properties` annotation,
//! and one `olm.bundle.object` per manifest; deduplicated and sorted by type
//! and value as upstream sorts them.

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt,
    ops::ControlFlow,
    path::Path,
    sync::Arc,
};

use olm_api::{csv::ClusterServiceVersion, labels::bundle as annotation};
use serde::Deserialize;
use serde_json::{Value, value::RawValue};

use crate::{
    csv_keys::normalize_csv_keys,
    document::{DocumentError, DocumentErrorKind, decode_text, for_each_document},
    fbc,
    field_names::Renamed,
    files::{
        Budget, FileError, FoundFile, canonical_root, list_files, normalize_relative_path,
        read_file,
    },
    go_json,
    limits::Limits,
    location::Location,
    property::{self, CsvMetadata, Property},
};

mod derive;
mod go_sort;
mod omit_empty;

use derive::{DeriveInput, derive_properties, property_error};

/// The `registry+v1` media type.
pub const MEDIA_TYPE_REGISTRY_V1: &str = "registry+v1";
/// The manifests directory.
pub const MANIFESTS_DIR: &str = "manifests";
/// The metadata directory.
pub const METADATA_DIR: &str = "metadata";
/// The CSV annotation holding extra properties as a JSON list.
pub const PROPERTIES_ANNOTATION: &str = "olm.properties";
/// The CSV annotation naming the bundle it substitutes for.
pub const SUBSTITUTES_FOR_ANNOTATION: &str = "olm.substitutesFor";

/// A group, version, kind and plural of an API a bundle provides or needs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct ApiKey {
    /// The API group.
    pub group: String,
    /// The API version.
    pub version: String,
    /// The kind.
    pub kind: String,
    /// The plural resource name.
    pub plural: String,
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}/{} ({})",
            self.group, self.version, self.kind, self.plural
        )
    }
}

/// One object of `manifests/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// The file, relative to the bundle root (`manifests/…`).
    pub file: String,
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `metadata.name`.
    pub name: String,
    /// The object as JSON, written as Go writes it (sorted keys), which is
    /// what `opm render` puts into `olm.bundle.object`.
    pub json: String,
}

/// Something tolerated while reading a bundle, as upstream tolerates it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BundleWarning {
    /// A manifest file was skipped because it does not decode to an object
    /// with a `kind`.
    SkippedManifest {
        /// The file.
        file: String,
        /// Why.
        reason: String,
    },
    /// A manifest file holds more than one document; only the first is used.
    ExtraDocuments {
        /// The file.
        file: String,
    },
    /// A key appears twice in one mapping of a file; the last value is used.
    DuplicateKey {
        /// The file.
        file: String,
        /// The key.
        key: String,
    },
    /// A second CSV was ignored; only the first is used.
    ExtraCsv {
        /// The file of the ignored CSV.
        file: String,
    },
    /// A metadata file does not decode and was ignored (for example a
    /// dependencies file with invalid YAML: the bundle then has no
    /// dependencies, as with upstream).
    UnreadableMetadataFile {
        /// The file.
        file: String,
        /// Why.
        reason: String,
    },
    /// A CSV key was read under its canonical spelling.
    RenamedCsvKey {
        /// The CSV file.
        file: String,
        /// The rename.
        renamed: Renamed,
    },
    /// The CSV's `olm.properties` annotation is not a JSON list of properties
    /// and was ignored.
    InvalidPropertiesAnnotation {
        /// Why.
        reason: String,
    },
    /// An image label disagrees with `annotations.yaml`, which wins.
    LabelMismatch {
        /// The label key.
        key: String,
        /// The label's value.
        label: String,
        /// The annotation's value (used).
        annotation: String,
    },
}

impl fmt::Display for BundleWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::SkippedManifest { file, reason } => write!(f, "{file}: skipped: {reason}"),
            Self::ExtraDocuments { file } => {
                write!(
                    f,
                    "{file}: more than one document, using only the first one"
                )
            }
            Self::DuplicateKey { file, key } => {
                write!(f, "{file}: duplicate key {key:?}, the last value is used")
            }
            Self::ExtraCsv { file } => write!(
                f,
                "{file}: ignored: only the first ClusterServiceVersion is used"
            ),
            Self::UnreadableMetadataFile { file, reason } => write!(f, "{file}: ignored: {reason}"),
            Self::RenamedCsvKey { file, renamed } => write!(f, "{file}: {renamed}"),
            Self::InvalidPropertiesAnnotation { reason } => {
                write!(
                    f,
                    "csv annotation {PROPERTIES_ANNOTATION:?} ignored: {reason}"
                )
            }
            Self::LabelMismatch {
                key,
                label,
                annotation,
            } => write!(
                f,
                "image label {key}={label:?} disagrees with annotations.yaml ({annotation:?}), which is used"
            ),
        }
    }
}

/// Why a bundle could not be read (where upstream `opm render` fails too, or
/// a limit was hit).
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// Files could not be listed or read, or a limit was hit.
    #[error(transparent)]
    Files(#[from] FileError),
    /// A file exceeded a decoding limit.
    #[error(transparent)]
    Document(#[from] DocumentError),
    /// `manifests/` or `metadata/` is missing.
    #[error("error opening {dir} directory: not found")]
    MissingDirectory {
        /// The directory.
        dir: &'static str,
    },
    /// No manifest decoded to an object.
    #[error("no bundle objects found")]
    NoObjects,
    /// No manifest is a ClusterServiceVersion.
    #[error("no csv in bundle")]
    NoCsv,
    /// No metadata file is an annotations file.
    #[error("could not find annotations file")]
    NoAnnotations,
    /// The CSV does not decode.
    #[error("{location}: invalid ClusterServiceVersion: {message}")]
    InvalidCsv {
        /// Where.
        location: Location,
        /// Why.
        message: String,
    },
    /// A CRD does not decode.
    #[error("{location}: error decoding CRD: {message}")]
    InvalidCrd {
        /// Where.
        location: Location,
        /// Why.
        message: String,
    },
    /// An owned or required CRD's name is not `<plural>.<group>`.
    #[error("{location}: couldn't parse plural.group from crd name: {name}")]
    InvalidCrdName {
        /// Where (the CSV).
        location: Location,
        /// The name.
        name: String,
    },
    /// A CRD the CSV owns is not in the bundle.
    #[error("error checking provided apis in bundle {bundle}: couldn't find {missing} in bundle. found: [{}]", .found.join(", "))]
    OwnedCrdMissing {
        /// The bundle (CSV) name.
        bundle: String,
        /// The owned API not found.
        missing: Box<ApiKey>,
        /// The APIs the bundle provides.
        found: Vec<String>,
    },
    /// A property or dependency of a known type does not decode.
    #[error("{location}: {message}")]
    InvalidProperty {
        /// Where.
        location: Location,
        /// Why.
        message: String,
    },
}

/// How to read a bundle.
#[derive(Debug, Clone, Default)]
pub struct LoadBundleOptions {
    /// Bounds on the input.
    pub limits: Limits,
    /// The bundle image's labels, if read from an image; where they disagree
    /// with `annotations.yaml`, the annotations win and a warning is recorded.
    pub image_labels: Option<BTreeMap<String, String>>,
}

impl LoadBundleOptions {
    /// Options with the bundle limits ([`Limits::bundle`]).
    pub fn new() -> Self {
        Self {
            limits: Limits::bundle(),
            image_labels: None,
        }
    }
}

/// A `registry+v1` bundle as read.
#[derive(Debug, Clone)]
pub struct RegistryBundle {
    /// The bundle name: the CSV's `metadata.name`.
    pub name: String,
    /// The package, from `annotations.yaml`.
    pub package: String,
    /// The channels, from `annotations.yaml` (comma-separated there).
    pub channels: Vec<String>,
    /// The default channel annotation, if present (may be empty).
    pub default_channel: Option<String>,
    /// Every annotation of the annotations file, values as strings (other
    /// scalars as their JSON text).
    pub annotations: BTreeMap<String, String>,
    /// The annotations file, relative to the bundle root.
    pub annotations_file: String,
    /// The CSV, decoded after key normalisation.
    pub csv: ClusterServiceVersion,
    /// The CSV as JSON, as upstream serves it (`csvJson`).
    pub csv_json: String,
    /// The CSV's file.
    pub csv_file: String,
    /// Every object used, CSV included, in file order.
    pub objects: Vec<Manifest>,
    /// Files of further CSVs, which upstream ignores.
    pub ignored_csv_files: Vec<String>,
    /// The dependencies file's entries, as written.
    pub dependencies: Vec<Property>,
    /// The dependencies file, if any.
    pub dependencies_file: Option<String>,
    /// The properties file's entries, as written.
    pub declared_properties: Vec<Property>,
    /// The properties file, if any.
    pub properties_file: Option<String>,
    /// APIs the bundle provides (CRD versions and owned APIServices).
    pub provided_apis: BTreeSet<ApiKey>,
    /// APIs the bundle requires (required CRDs and APIServices).
    pub required_apis: BTreeSet<ApiKey>,
    /// The properties `opm render` gives the bundle, in its order.
    pub properties: Vec<Property>,
    /// What was tolerated while reading.
    pub warnings: Vec<BundleWarning>,
}

/// How an FBC bundle carries the bundle's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Payload {
    /// One `olm.bundle.object` per manifest (`opm render` by default).
    #[default]
    BundleObjects,
    /// One `olm.csv.metadata` instead (`opm render --migrate-level
    /// bundle-object-to-csv-metadata`, as current catalogs are built).
    CsvMetadata,
}

/// A file of the bundle, read.
struct BundleFile {
    path: String,
    bytes: Vec<u8>,
}

impl RegistryBundle {
    /// Reads the bundle in directory `dir` with [`LoadBundleOptions::new`].
    pub fn load_dir(dir: impl AsRef<Path>) -> Result<Self, BundleError> {
        Self::load_dir_with(dir, &LoadBundleOptions::new())
    }

    /// Reads the bundle in directory `dir`.
    pub fn load_dir_with(
        dir: impl AsRef<Path>,
        options: &LoadBundleOptions,
    ) -> Result<Self, BundleError> {
        let root = canonical_root(dir.as_ref())?;
        let mut budget = Budget::new(&options.limits);
        let mut files = Vec::new();
        let mut found_dirs = (false, false);
        for (sub, found) in [
            (MANIFESTS_DIR, &mut found_dirs.0),
            (METADATA_DIR, &mut found_dirs.1),
        ] {
            let path = root.join(sub);
            // A symlinked directory is followed only if it stays inside.
            let Ok(canonical) = std::fs::canonicalize(&path) else {
                continue;
            };
            if !canonical.starts_with(&root) {
                return Err(FileError::SymlinkEscapes {
                    path: sub.to_owned(),
                    target: canonical.display().to_string(),
                }
                .into());
            }
            if !canonical.is_dir() {
                continue;
            }
            *found = true;
            let mut listed: Vec<FoundFile> = Vec::new();
            list_files(&root, &canonical, sub, false, &mut listed)?;
            for file in listed {
                let bytes = read_file(&file, &mut budget)?;
                files.push(BundleFile {
                    path: file.relative,
                    bytes,
                });
            }
        }
        if !found_dirs.0 {
            return Err(BundleError::MissingDirectory { dir: MANIFESTS_DIR });
        }
        if !found_dirs.1 {
            return Err(BundleError::MissingDirectory { dir: METADATA_DIR });
        }
        parse_bundle(files, options)
    }

    /// Reads a bundle from in-memory files given as (relative path, contents)
    /// pairs. Files outside `manifests/` and `metadata/`, and in their
    /// subdirectories, are ignored, as upstream ignores them.
    pub fn load_files<P, B>(
        files: impl IntoIterator<Item = (P, B)>,
        options: &LoadBundleOptions,
    ) -> Result<Self, BundleError>
    where
        P: AsRef<str>,
        B: Into<Vec<u8>>,
    {
        let mut budget = Budget::new(&options.limits);
        let mut read = Vec::new();
        let mut seen = BTreeSet::new();
        let (mut manifests, mut metadata) = (false, false);
        for (path, bytes) in files {
            let path = normalize_relative_path(path.as_ref())?;
            if !seen.insert(path.clone()) {
                return Err(FileError::DuplicatePath { path }.into());
            }
            let Some((dir, name)) = path.split_once('/') else {
                continue;
            };
            manifests |= dir == MANIFESTS_DIR;
            metadata |= dir == METADATA_DIR;
            if (dir != MANIFESTS_DIR && dir != METADATA_DIR) || name.contains('/') {
                continue;
            }
            let bytes = bytes.into();
            budget.charge(&path, bytes.len() as u64)?;
            read.push(BundleFile { path, bytes });
        }
        if !manifests {
            return Err(BundleError::MissingDirectory { dir: MANIFESTS_DIR });
        }
        if !metadata {
            return Err(BundleError::MissingDirectory { dir: METADATA_DIR });
        }
        read.sort_by(|a, b| a.path.cmp(&b.path));
        parse_bundle(read, options)
    }

    /// The bundle as an FBC `olm.bundle`, as `opm render` writes it: the
    /// given image, related images from the CSV plus the bundle image and
    /// the operator images, bundle objects (or CSV metadata) last.
    pub fn to_fbc_bundle(&self, image: &str, payload: Payload) -> fbc::Bundle {
        let mut properties: Vec<Property> = self
            .properties
            .iter()
            .filter(|p| p.type_ != property::BUNDLE_OBJECT && p.type_ != property::CSV_METADATA)
            .cloned()
            .collect();
        let objects = self
            .properties
            .iter()
            .filter(|p| property::is_payload(&p.type_));
        match payload {
            // Upstream only migrates bundles that have an image.
            Payload::CsvMetadata if !image.is_empty() => {
                if let Ok(p) = Property::new(property::CSV_METADATA, &self.csv_metadata()) {
                    properties.push(p);
                }
            }
            _ => properties.extend(objects.cloned()),
        }
        fbc::Bundle {
            name: self.name.clone(),
            package: self.package.clone(),
            image: image.to_owned(),
            properties,
            related_images: self.related_images(image),
            ..fbc::Bundle::default()
        }
    }

    /// The `olm.csv.metadata` value of this bundle's CSV, with Go's
    /// `omitempty` applied as upstream's encoder applies it (an empty list or
    /// string the CSV spells out is left out).
    pub fn csv_metadata(&self) -> CsvMetadata {
        let spec = &self.csv.spec;
        let mut metadata = CsvMetadata {
            annotations: self.csv.metadata.annotations.clone().unwrap_or_default(),
            api_service_definitions: spec.apiservicedefinitions.clone().unwrap_or_default(),
            custom_resource_definitions: spec.customresourcedefinitions.clone().unwrap_or_default(),
            description: spec.description.clone().unwrap_or_default(),
            display_name: spec.display_name.clone(),
            install_modes: spec.install_modes.clone().unwrap_or_default(),
            keywords: spec.keywords.clone().unwrap_or_default(),
            labels: self.csv.metadata.labels.clone().unwrap_or_default(),
            links: spec.links.clone().unwrap_or_default(),
            maintainers: spec.maintainers.clone().unwrap_or_default(),
            maturity: spec.maturity.clone().unwrap_or_default(),
            min_kube_version: spec.min_kube_version.clone().unwrap_or_default(),
            native_apis: spec.native_apis.clone().unwrap_or_default(),
            provider: spec.provider.clone().unwrap_or_default(),
        };
        omit_empty::csv_metadata(&mut metadata);
        metadata
    }

    /// Related images as `opm render` lists them: the CSV's
    /// `spec.relatedImages` as written, then the bundle image and the images
    /// of the install strategy's containers and init containers not listed
    /// yet, ordered by [`sort_related_images`].
    ///
    /// Upstream appends the container images in Go map order, which changes
    /// from run to run; they are appended here in the order the deployments
    /// list them. That order only shows when images are listed more than
    /// once and there are more than 12 entries (see [`sort_related_images`]).
    /// Like upstream, the bundle image does not count as listed for the
    /// containers: a container running the bundle image adds it again.
    pub fn related_images(&self, bundle_image: &str) -> Vec<fbc::RelatedImage> {
        let mut images: Vec<fbc::RelatedImage> = self
            .csv
            .spec
            .related_images
            .iter()
            .flatten()
            .map(|r| fbc::RelatedImage {
                name: r.name.clone(),
                image: r.image.clone(),
                ..fbc::RelatedImage::default()
            })
            .collect();
        let mut listed: BTreeSet<String> = images.iter().map(|r| r.image.clone()).collect();
        let unnamed = |image: &str| fbc::RelatedImage {
            image: image.to_owned(),
            ..fbc::RelatedImage::default()
        };
        if !bundle_image.is_empty() && !listed.contains(bundle_image) {
            images.push(unnamed(bundle_image));
        }
        if self.csv.spec.install.strategy.as_str() == "deployment" {
            for deployment in &self.csv.spec.install.spec.deployments {
                let pod = deployment.spec.template.spec.as_ref();
                let containers = pod.map(|p| p.containers.iter()).into_iter().flatten();
                let init = pod
                    .and_then(|p| p.init_containers.as_ref())
                    .map(|c| c.iter())
                    .into_iter()
                    .flatten();
                for container in containers.chain(init) {
                    let image = container.image.as_deref().unwrap_or_default();
                    if listed.insert(image.to_owned()) {
                        images.push(unnamed(image));
                    }
                }
            }
        }
        sort_related_images(&mut images);
        images
    }

    /// The CSV's `spec.version`, as written.
    pub fn version(&self) -> &str {
        self.csv.spec.version.as_ref().map_or("", |v| v.as_str())
    }

    /// The CSV's `spec.replaces`.
    pub fn replaces(&self) -> Option<&str> {
        self.csv.spec.replaces.as_deref().filter(|r| !r.is_empty())
    }

    /// The CSV's `spec.skips`.
    pub fn skips(&self) -> &[String] {
        self.csv.spec.skips.as_deref().unwrap_or_default()
    }

    /// The CSV's `olm.skipRange` annotation.
    pub fn skip_range(&self) -> Option<&str> {
        self.csv
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(olm_api::labels::SKIP_RANGE))
            .map(String::as_str)
            .filter(|r| !r.is_empty())
    }

    /// This bundle as an update graph entry.
    pub fn channel_entry(&self) -> crate::graph::ChannelEntry {
        crate::graph::ChannelEntry {
            name: self.name.clone(),
            replaces: self.replaces().map(str::to_owned),
            skips: self.skips().to_vec(),
            skip_range: self.skip_range().map(str::to_owned),
        }
    }
}

/// Orders related images as `opm render` does: by image, with Go's
/// `sort.Slice`, which is not stable. Entries sharing an image come out in
/// the order Go's sort leaves them, which depends on the whole input order:
/// for at most 12 entries that is the input order (Go sorts short slices by
/// insertion); beyond, it is what Go's pattern-defeating quicksort does,
/// followed here step for step. On a list this has already sorted it
/// changes nothing.
pub fn sort_related_images(images: &mut [fbc::RelatedImage]) {
    go_sort::sort_slice(images, |a, b| a.image < b.image);
}

/// The first document of a file as a JSON value, whether there are more, and
/// the keys it repeats.
type FirstDocument = (Value, bool, Vec<String>);

/// Reads the first document of a file; an inner error is a reason to skip
/// the file, an outer one a limit hit.
fn first_document(
    file: &BundleFile,
    limits: &Limits,
) -> Result<Result<FirstDocument, String>, BundleError> {
    let name: Arc<str> = Arc::from(file.path.as_str());
    let text = match decode_text(&name, &file.bytes, limits) {
        Ok(text) => text,
        Err(err) => match err.kind {
            DocumentErrorKind::FileTooLarge { .. } => return Err(err.into()),
            kind => return Ok(Err(kind.to_string())),
        },
    };
    let mut first: Option<(Value, Vec<String>)> = None;
    let mut more = false;
    let result = for_each_document::<DocumentError>(&name, text, limits, |doc| {
        if first.is_some() {
            more = true;
            return Ok(ControlFlow::Break(()));
        }
        let (value, mut duplicates) =
            crate::document::parse_json_value_noting_duplicates(&doc.json, limits)
                .map_err(|kind| DocumentError::new(doc.origin.location(), kind))?;
        duplicates.extend(doc.duplicate_keys);
        first = Some((value, duplicates));
        Ok(ControlFlow::Continue(()))
    });
    match (result, first) {
        // A broken second document does not spoil the first, as upstream
        // only looks at the second to warn.
        (_, Some((value, duplicates))) => Ok(Ok((value, more, duplicates))),
        (Err(err), None) => match err.kind {
            DocumentErrorKind::TooDeep { .. }
            | DocumentErrorKind::DocumentTooLarge { .. }
            | DocumentErrorKind::TooManyDocuments { .. } => Err(err.into()),
            kind => Ok(Err(kind.to_string())),
        },
        (Ok(()), None) => Ok(Err("no document".to_owned())),
    }
}

#[derive(Deserialize)]
struct CrdInfo {
    #[serde(rename = "apiVersion", default)]
    api_version: String,
    spec: CrdSpec,
}

#[derive(Deserialize)]
struct CrdSpec {
    #[serde(default)]
    group: String,
    #[serde(default)]
    names: CrdNames,
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    versions: Option<Vec<CrdVersion>>,
}

#[derive(Deserialize, Default)]
struct CrdNames {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    plural: String,
}

#[derive(Deserialize)]
struct CrdVersion {
    #[serde(default)]
    name: String,
}

fn string_field<'v>(value: &'v Value, key: &str) -> &'v str {
    value.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// Splits a CRD description's `<plural>.<group>` name.
fn plural_and_group(name: &str) -> Option<(&str, &str)> {
    name.split_once('.')
}

fn parse_bundle(
    files: Vec<BundleFile>,
    options: &LoadBundleOptions,
) -> Result<RegistryBundle, BundleError> {
    let limits = &options.limits;
    let mut warnings = Vec::new();
    let (manifest_files, metadata_files): (Vec<&BundleFile>, Vec<&BundleFile>) = files
        .iter()
        .filter(|f| {
            let name = f.path.rsplit('/').next().unwrap_or_default();
            !(f.path.starts_with("manifests/") && name.starts_with('.'))
        })
        .partition(|f| f.path.starts_with("manifests/"));

    // Manifests.
    let mut objects = Vec::new();
    let mut csv_value = None;
    let mut ignored_csv_files = Vec::new();
    for file in manifest_files {
        let (value, more, duplicates) = match first_document(file, limits)? {
            Ok(found) => found,
            Err(reason) => {
                warnings.push(BundleWarning::SkippedManifest {
                    file: file.path.clone(),
                    reason,
                });
                continue;
            }
        };
        if more {
            warnings.push(BundleWarning::ExtraDocuments {
                file: file.path.clone(),
            });
        }
        warnings.extend(
            duplicates
                .into_iter()
                .map(|key| BundleWarning::DuplicateKey {
                    file: file.path.clone(),
                    key,
                }),
        );
        if !value.is_object() {
            warnings.push(BundleWarning::SkippedManifest {
                file: file.path.clone(),
                reason: "not an object".to_owned(),
            });
            continue;
        }
        let kind = string_field(&value, "kind").to_owned();
        if kind.is_empty() {
            warnings.push(BundleWarning::SkippedManifest {
                file: file.path.clone(),
                reason: "Object 'Kind' is missing".to_owned(),
            });
            continue;
        }
        if kind == "ClusterServiceVersion" {
            if csv_value.is_some() {
                ignored_csv_files.push(file.path.clone());
                warnings.push(BundleWarning::ExtraCsv {
                    file: file.path.clone(),
                });
                continue;
            }
            csv_value = Some((file.path.clone(), value.clone()));
        }
        objects.push(Manifest {
            file: file.path.clone(),
            api_version: string_field(&value, "apiVersion").to_owned(),
            name: value
                .get("metadata")
                .map(|m| string_field(m, "name"))
                .unwrap_or_default()
                .to_owned(),
            json: go_json::to_string(&value, true),
            kind,
        });
    }
    if objects.is_empty() {
        return Err(BundleError::NoObjects);
    }
    let Some((csv_file, csv_raw)) = csv_value else {
        return Err(BundleError::NoCsv);
    };
    let csv_location = Location {
        origin: crate::location::Origin::new(csv_file.as_str(), 0, 0),
        field: None,
    };
    let mut csv_normalized = csv_raw.clone();
    for renamed in normalize_csv_keys(&mut csv_normalized) {
        warnings.push(BundleWarning::RenamedCsvKey {
            file: csv_file.clone(),
            renamed,
        });
    }
    let csv: ClusterServiceVersion =
        serde_json::from_value(csv_normalized).map_err(|e| BundleError::InvalidCsv {
            location: csv_location.clone(),
            message: crate::document::json_error_message(&e),
        })?;
    let name = csv.metadata.name.clone().unwrap_or_default();
    let csv_json = go_json::to_string(&csv_raw, true);

    // Provided APIs: every CRD version, and owned APIServices.
    let mut provided_apis = BTreeSet::new();
    for object in objects
        .iter()
        .filter(|o| o.kind == "CustomResourceDefinition")
    {
        let crd_version = object.api_version.rsplit('/').next().unwrap_or_default();
        if crd_version != "v1" && crd_version != "v1beta1" {
            continue;
        }
        let crd: CrdInfo =
            serde_json::from_str(&object.json).map_err(|e| BundleError::InvalidCrd {
                location: Location {
                    origin: crate::location::Origin::new(object.file.as_str(), 0, 0),
                    field: None,
                },
                message: crate::document::json_error_message(&e),
            })?;
        let key = |version: &str| ApiKey {
            group: crd.spec.group.clone(),
            version: version.to_owned(),
            kind: crd.spec.names.kind.clone(),
            plural: crd.spec.names.plural.clone(),
        };
        for version in crd.spec.versions.iter().flatten() {
            provided_apis.insert(key(&version.name));
        }
        if crd.api_version.ends_with("v1beta1")
            && let Some(version) = crd.spec.version.as_deref().filter(|v| !v.is_empty())
        {
            provided_apis.insert(key(version));
        }
    }
    for api in csv.spec.owned_api_services() {
        provided_apis.insert(ApiKey {
            group: api.group.clone(),
            version: api.version.clone(),
            kind: api.kind.clone(),
            plural: api.name.clone(),
        });
    }
    // Every owned CRD must be in the bundle.
    for (i, owned) in csv.spec.owned_crds().iter().enumerate() {
        let Some((plural, group)) = plural_and_group(&owned.name) else {
            return Err(BundleError::InvalidCrdName {
                location: Location {
                    origin: csv_location.origin.clone(),
                    field: Some(format!("spec.customresourcedefinitions.owned[{i}].name")),
                },
                name: owned.name.clone(),
            });
        };
        let key = ApiKey {
            group: group.to_owned(),
            version: owned.version.clone(),
            kind: owned.kind.clone(),
            plural: plural.to_owned(),
        };
        if !provided_apis.contains(&key) {
            return Err(BundleError::OwnedCrdMissing {
                bundle: name.clone(),
                missing: Box::new(key),
                found: provided_apis.iter().map(ToString::to_string).collect(),
            });
        }
    }
    let mut required_apis = BTreeSet::new();
    for (i, required) in csv.spec.required_crds().iter().enumerate() {
        let Some((plural, group)) = plural_and_group(&required.name) else {
            return Err(BundleError::InvalidCrdName {
                location: Location {
                    origin: csv_location.origin.clone(),
                    field: Some(format!("spec.customresourcedefinitions.required[{i}].name")),
                },
                name: required.name.clone(),
            });
        };
        required_apis.insert(ApiKey {
            group: group.to_owned(),
            version: required.version.clone(),
            kind: required.kind.clone(),
            plural: plural.to_owned(),
        });
    }
    for api in csv.spec.required_api_services() {
        required_apis.insert(ApiKey {
            group: api.group.clone(),
            version: api.version.clone(),
            kind: api.kind.clone(),
            plural: api.name.clone(),
        });
    }

    // Metadata: each file may be any of the three.
    let mut annotations_found: Option<(String, BTreeMap<String, String>)> = None;
    let mut dependencies_found: Option<(String, Vec<Property>)> = None;
    let mut properties_found: Option<(String, Vec<Property>)> = None;
    for file in metadata_files {
        if annotations_found.is_some() && dependencies_found.is_some() && properties_found.is_some()
        {
            break;
        }
        let value =
            match first_document(file, limits)? {
                Ok((value, _, duplicates)) => {
                    warnings.extend(duplicates.into_iter().map(|key| {
                        BundleWarning::DuplicateKey {
                            file: file.path.clone(),
                            key,
                        }
                    }));
                    value
                }
                Err(reason) => {
                    warnings.push(BundleWarning::UnreadableMetadataFile {
                        file: file.path.clone(),
                        reason,
                    });
                    continue;
                }
            };
        if annotations_found.is_none()
            && let Some(annotations) = read_annotations(&value)
        {
            annotations_found = Some((file.path.clone(), annotations));
        }
        if dependencies_found.is_none()
            && let Some((list, missing)) = read_property_list(&value, "dependencies")
            && !list.is_empty()
        {
            check_values_present(&file.path, "dependencies", &list, &missing)?;
            dependencies_found = Some((file.path.clone(), list));
        }
        if properties_found.is_none()
            && let Some((list, missing)) = read_property_list(&value, "properties")
            && !list.is_empty()
        {
            check_values_present(&file.path, "properties", &list, &missing)?;
            properties_found = Some((file.path.clone(), list));
        }
    }
    let Some((annotations_file, annotations)) = annotations_found else {
        return Err(BundleError::NoAnnotations);
    };
    let package = annotations
        .get(annotation::PACKAGE)
        .cloned()
        .unwrap_or_default();
    let channels: Vec<String> = annotations
        .get(annotation::CHANNELS)
        .filter(|c| !c.is_empty())
        .map(|c| c.split(',').map(str::to_owned).collect())
        .unwrap_or_default();
    let default_channel = annotations.get(annotation::CHANNEL_DEFAULT).cloned();
    if let Some(labels) = &options.image_labels {
        for (key, label) in labels {
            if let Some(value) = annotations.get(key)
                && value != label
            {
                warnings.push(BundleWarning::LabelMismatch {
                    key: key.clone(),
                    label: label.clone(),
                    annotation: value.clone(),
                });
            }
        }
    }
    let (dependencies_file, dependencies) =
        dependencies_found.map_or((None, Vec::new()), |(f, d)| (Some(f), d));
    let (properties_file, declared_properties) =
        properties_found.map_or((None, Vec::new()), |(f, p)| (Some(f), p));

    let properties = derive_properties(
        &DeriveInput {
            package: &package,
            csv: &csv,
            objects: &objects,
            dependencies: &dependencies,
            dependencies_file: dependencies_file.as_deref(),
            declared: &declared_properties,
            properties_file: properties_file.as_deref(),
            provided: &provided_apis,
            required: &required_apis,
        },
        &mut warnings,
    )?;

    Ok(RegistryBundle {
        name,
        package,
        channels,
        default_channel,
        annotations,
        annotations_file,
        csv,
        csv_json,
        csv_file,
        objects,
        ignored_csv_files,
        dependencies,
        dependencies_file,
        declared_properties,
        properties_file,
        provided_apis,
        required_apis,
        properties,
        warnings,
    })
}

/// An annotations file: `annotations:` with at least one of package,
/// channels or default channel set, all three strings if present (as Go's
/// typed decoding requires). Other annotations are kept as text.
fn read_annotations(value: &Value) -> Option<BTreeMap<String, String>> {
    let object = value.as_object()?;
    let annotations = object
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("annotations"))?
        .1
        .as_object()?;
    for key in [
        annotation::PACKAGE,
        annotation::CHANNELS,
        annotation::CHANNEL_DEFAULT,
    ] {
        if annotations
            .get(key)
            .is_some_and(|v| !v.is_string() && !v.is_null())
        {
            return None;
        }
    }
    let map: BTreeMap<String, String> = annotations
        .iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| {
            (
                k.clone(),
                v.as_str().map_or_else(|| v.to_string(), str::to_owned),
            )
        })
        .collect();
    let set = |key| map.get(key).is_some_and(|v: &String| !v.is_empty());
    (set(annotation::PACKAGE) || set(annotation::CHANNELS) || set(annotation::CHANNEL_DEFAULT))
        .then_some(map)
}

/// A `dependencies:` or `properties:` list of `{type, value}`, values in
/// Go's JSON form (the form upstream's YAML decoding yields). An absent
/// value reads as `null`; its index is listed second, because upstream
/// cannot decode an absent `olm.gvk` or `olm.package` value.
fn read_property_list(value: &Value, key: &str) -> Option<(Vec<Property>, Vec<usize>)> {
    let object = value.as_object()?;
    let list = object.iter().find(|(k, _)| k.eq_ignore_ascii_case(key))?.1;
    if list.is_null() {
        return Some((Vec::new(), Vec::new()));
    }
    let items = list.as_array()?;
    let mut out = Vec::with_capacity(items.len());
    let mut missing = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let item = item.as_object()?;
        let field = |name: &str| {
            item.iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v)
        };
        let type_ = match field("type") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(_) => return None,
        };
        if field("value").is_none() {
            missing.push(i);
        }
        let value = go_json::to_string(field("value").unwrap_or(&Value::Null), true);
        out.push(Property {
            type_,
            value: RawValue::from_string(value).ok()?,
            extra: Vec::new(),
        });
    }
    Some((out, missing))
}

/// Upstream fails to render a bundle whose `olm.gvk` or `olm.package`
/// dependency or property has no value ("unexpected end of JSON input").
fn check_values_present(
    file: &str,
    list: &str,
    properties: &[Property],
    missing: &[usize],
) -> Result<(), BundleError> {
    for &i in missing {
        if matches!(
            properties[i].type_.as_str(),
            property::GVK | property::PACKAGE
        ) {
            return Err(property_error(
                Some(file),
                list,
                i,
                "unexpected end of JSON input",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod related_image_order_tests {
    use proptest::prelude::*;

    use super::*;

    /// Related images named by their input position.
    fn numbered(images: &str) -> Vec<fbc::RelatedImage> {
        images
            .chars()
            .enumerate()
            .map(|(i, image)| fbc::RelatedImage {
                name: i.to_string(),
                image: image.to_string(),
                ..fbc::RelatedImage::default()
            })
            .collect()
    }

    fn positions(images: &[fbc::RelatedImage]) -> Vec<usize> {
        images.iter().map(|r| r.name.parse().unwrap()).collect()
    }

    /// Inputs (one image per character) and where Go 1.26's `sort.Slice`
    /// by image puts each entry, recorded from Go.
    const GO_ORDERS: &[(&str, &[usize])] = &[
        // Insertion sort: stable.
        ("CABAB", &[1, 3, 2, 4, 0]),
        // 14 entries: one partition, then insertion sorts.
        (
            "GGGFEEDDCCBBBA",
            &[13, 12, 11, 10, 8, 9, 6, 7, 5, 4, 3, 0, 2, 1],
        ),
        (
            "FGCDHFFFHDFCHCCAHHCGHADGHAAEEBDDGHFFHCFE",
            &[
                25, 15, 26, 21, 29, 37, 11, 18, 2, 14, 13, 9, 3, 30, 22, 31, 27, 28, 39, 10, 35,
                38, 34, 5, 6, 7, 0, 23, 1, 19, 32, 33, 24, 12, 17, 20, 36, 4, 16, 8,
            ],
        ),
        // 61 entries, nearly sorted: Tukey's ninther and partial insertion.
        (
            "AAAAAABBBKCCCDGDEEENFFDGGHHHHHIIIIIIIJJJKKCLLMMMFNNOOOPPPPPRR",
            &[
                0, 1, 2, 3, 4, 5, 8, 7, 6, 42, 10, 11, 12, 22, 13, 15, 16, 17, 18, 21, 20, 48, 14,
                23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 9, 43,
                44, 45, 46, 47, 19, 49, 50, 52, 51, 53, 54, 55, 56, 57, 58, 59, 60,
            ],
        ),
        // 101 entries in descending order: reversed first.
        (
            r"rppnnnmlkkkjihhgfeddccbbaa````___^^]\\\\\[[ZZZYXVVVUUUTSSRQPOOONMLJJIIIHHGGGFEEEEDDDDDCCCCCCCCBBBBAAA",
            &[
                100, 99, 98, 97, 96, 95, 94, 93, 92, 91, 90, 89, 88, 87, 86, 85, 84, 83, 82, 81,
                80, 79, 78, 77, 76, 75, 74, 73, 72, 71, 70, 69, 68, 67, 66, 65, 64, 63, 62, 61, 60,
                59, 58, 57, 56, 55, 54, 51, 53, 52, 49, 50, 48, 47, 46, 45, 44, 43, 41, 42, 40, 39,
                38, 37, 36, 35, 34, 33, 30, 32, 31, 26, 28, 27, 29, 24, 25, 23, 22, 21, 20, 19, 18,
                17, 16, 15, 14, 13, 12, 11, 9, 10, 8, 7, 6, 5, 4, 3, 2, 1, 0,
            ],
        ),
    ];

    #[test]
    fn ties_end_where_gos_sort_puts_them() {
        for (input, expected) in GO_ORDERS {
            let mut images = numbered(input);
            sort_related_images(&mut images);
            assert_eq!(positions(&images), *expected, "{input}");
        }
    }

    proptest! {
        /// Sorted by image, nothing lost, stable up to 12 entries, and a
        /// second sort changes nothing (render sorts bundles it has already
        /// sorted).
        #[test]
        fn sorting_orders_by_image_and_is_idempotent(images in "[A-F]{0,80}") {
            let mut sorted = numbered(&images);
            sort_related_images(&mut sorted);
            prop_assert!(sorted.windows(2).all(|w| w[0].image <= w[1].image));
            let mut seen = positions(&sorted);
            seen.sort_unstable();
            prop_assert_eq!(seen, (0..images.len()).collect::<Vec<_>>());
            if images.len() <= 12 {
                let mut stable = numbered(&images);
                stable.sort_by(|a, b| a.image.cmp(&b.image));
                prop_assert_eq!(&sorted, &stable);
            }
            let once = sorted.clone();
            sort_related_images(&mut sorted);
            prop_assert_eq!(sorted, once);
        }
    }

    const ANNOTATIONS: &str = "annotations:
  operators.operatorframework.io.bundle.mediatype.v1: registry+v1
  operators.operatorframework.io.bundle.manifests.v1: manifests/
  operators.operatorframework.io.bundle.metadata.v1: metadata/
  operators.operatorframework.io.bundle.package.v1: widget
  operators.operatorframework.io.bundle.channels.v1: stable
";

    fn bundle(related: &str, containers: &[&str]) -> RegistryBundle {
        let containers: String = containers
            .iter()
            .enumerate()
            .map(|(i, image)| format!("              - {{name: c{i}, image: {image}}}\n"))
            .collect();
        let csv = format!(
            "apiVersion: operators.coreos.com/v1alpha1
kind: ClusterServiceVersion
metadata:
  name: widget.v1.0.0
spec:
  version: 1.0.0
  relatedImages: {related}
  install:
    strategy: deployment
    spec:
      deployments:
      - name: widget
        spec:
          template:
            spec:
              containers:
{containers}"
        );
        RegistryBundle::load_files(
            [
                ("manifests/csv.yaml".to_owned(), csv.into_bytes()),
                (
                    "metadata/annotations.yaml".to_owned(),
                    ANNOTATIONS.as_bytes().to_vec(),
                ),
            ],
            &LoadBundleOptions::new(),
        )
        .unwrap()
    }

    fn pairs(images: &[fbc::RelatedImage]) -> Vec<(&str, &str)> {
        images
            .iter()
            .map(|r| (r.name.as_str(), r.image.as_str()))
            .collect()
    }

    #[test]
    fn the_csvs_images_then_the_bundle_and_containers_sorted_by_image() {
        let b = bundle(
            "[{name: b, image: img-b}, {name: a2, image: img-a}, {name: a1, image: img-a}]",
            &["img-c", "img-b", "img-c"],
        );
        assert_eq!(
            pairs(&b.related_images("img-bundle")),
            [
                ("a2", "img-a"),
                ("a1", "img-a"),
                ("b", "img-b"),
                ("", "img-bundle"),
                ("", "img-c"),
            ]
        );
        // No image, no bundle entry.
        assert_eq!(b.related_images("").len(), 4);
    }

    #[test]
    fn a_container_running_the_bundle_image_adds_it_again_as_upstream_does() {
        let b = bundle("[]", &["img-bundle"]);
        assert_eq!(
            pairs(&b.related_images("img-bundle")),
            [("", "img-bundle"), ("", "img-bundle")]
        );
        // Listed in the CSV, it is not added at all.
        let b = bundle("[{name: self, image: img-bundle}]", &["img-bundle"]);
        assert_eq!(
            pairs(&b.related_images("img-bundle")),
            [("self", "img-bundle")]
        );
    }
}
