//! `olm-operator apply-crds`: makes the cluster's CustomResourceDefinitions
//! exactly the chart's, for a Helm hook Job to run before every install and
//! upgrade (Helm installs a chart's `crds/` once and never upgrades them).
//!
//! It reads every regular `*.yaml` and `*.yml` file directly in `--dir`,
//! following symbolic links and skipping hidden entries, so that a projected
//! ConfigMap volume (`name.yaml -> ..data/name.yaml`, with hidden `..data`
//! and `..<timestamp>` directories) reads as its files. Each file must hold
//! exactly one `apiextensions.k8s.io/v1` CustomResourceDefinition named
//! `<plural>.<group>`, with one storage version; every file is checked, and every CRD's live version
//! read and judged, before anything is written, so a bad file or a refused
//! CRD leaves the cluster as it was.
//!
//! Then, in the order of the file names, each CRD is created when it is
//! missing and otherwise replaced by the file's: its spec becomes the
//! file's, the file's labels and annotations are set over the live ones,
//! and everything else of the live object (finalizers, owners, other labels
//! and annotations) stays. The replacement carries the `resourceVersion` it
//! was read at, and a run that loses a race to another writer reads again
//! and decides again. A CRD whose spec, labels and annotations already are
//! the file's is not written at all. Once settled, the run waits (up to
//! `--timeout`) until the CRD is `Established` and its names accepted, and
//! prints `customresourcedefinition/<name> created|replaced|kept`.
//!
//! Specs are compared as the API server stores them: its defaults filled in
//! (`conversion.strategy: None`, `names.singular`, `names.listKind`, a
//! conversion webhook's port 443) and the zero values it drops left out
//! (`deprecated: false`, `required: []`, ...), so a file that spells those
//! out is still `kept`.
//!
//! It refuses to replace a CRD when a version in the live object's
//! `status.storedVersions` is missing from the file's `spec.versions`:
//! objects stored in that version could no longer be read. Such a version
//! must first be migrated away from and dropped from `storedVersions`.
//!
//! # Permissions
//!
//! It needs exactly these, cluster-wide (the chart's ClusterRole grants no
//! more):
//!
//! - `get` and `update` on `customresourcedefinitions` in the
//!   `apiextensions.k8s.io` group, which may be limited to the CRDs' names
//!   (`resourceNames`);
//! - `create` on `customresourcedefinitions`, which cannot be limited by
//!   name, since RBAC does not know a name before the object exists.
//!
//! It never lists, watches, patches or deletes anything: it waits for a CRD
//! by reading it again.
//!
//! What to write is decided by pure functions ([`read_crd_files`] aside,
//! which only reads files): [`parse_crd_file`] and [`decide`]; [`run`] only
//! reads, writes, retries and waits.

use std::{
    collections::{BTreeMap, BTreeSet},
    ffi::OsStr,
    fmt, fs,
    path::{Path, PathBuf},
    time::Duration,
};

use k8s_openapi::{
    apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        CustomResourceConversion, CustomResourceDefinition, CustomResourceDefinitionCondition,
        CustomResourceDefinitionSpec, JSONSchemaProps, JSONSchemaPropsOrArray,
        JSONSchemaPropsOrBool, JSONSchemaPropsOrStringArray,
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::{Api, Client, api::PostParams};
use olm_runtime::config::{KubeArgs, TelemetryArgs, parse_duration};
use serde::Deserialize as _;

/// The `apiVersion` every file must declare.
const CRD_API_VERSION: &str = "apiextensions.k8s.io/v1";
/// The `kind` every file must declare.
const CRD_KIND: &str = "CustomResourceDefinition";
/// How often one CRD is read and written again after losing a race to
/// another writer before the run gives up.
const MAX_ATTEMPTS: usize = 5;
/// How long to wait between two reads of a CRD that is not Established yet.
const ESTABLISHED_POLL_INTERVAL: Duration = Duration::from_millis(200);

/// Creates or replaces the CustomResourceDefinitions in a directory's YAML
/// files, and waits until each is Established.
#[derive(Debug, clap::Args)]
pub(crate) struct ApplyCrdsArgs {
    /// The directory of the CRD files: every regular `*.yaml` and `*.yml`
    /// file directly in it (symbolic links followed, hidden entries
    /// skipped), one CustomResourceDefinition each.
    #[arg(long = "dir", env = "OLM_CRDS_DIR", value_name = "DIR")]
    pub(crate) dir: PathBuf,

    /// How long to wait for each CRD to be Established.
    #[arg(
        long = "timeout",
        env = "OLM_CRDS_TIMEOUT",
        default_value = "2m",
        value_parser = parse_duration,
        value_name = "DURATION"
    )]
    pub(crate) timeout: Duration,

    #[command(flatten)]
    pub(crate) kube: KubeArgs,
    #[command(flatten)]
    pub(crate) telemetry: TelemetryArgs,
}

/// A failure of `apply-crds`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// `--dir` cannot be listed.
    #[error("cannot read directory {}", dir.display())]
    ReadDir {
        /// The directory.
        dir: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },

    /// `--dir` holds no CRD file.
    #[error("directory {} holds no *.yaml or *.yml file", dir.display())]
    NoFiles {
        /// The directory.
        dir: PathBuf,
    },

    /// A file cannot be read (a dangling link, say).
    #[error("cannot read {}", path.display())]
    ReadFile {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },

    /// A file is not YAML.
    #[error("{} is not valid YAML", path.display())]
    Yaml {
        /// The file.
        path: PathBuf,
        /// The parser's error.
        #[source]
        source: serde_yaml_ng::Error,
    },

    /// A file holds no document, or several.
    #[error(
        "{} holds {count} YAML documents; it must hold exactly one CustomResourceDefinition",
        path.display()
    )]
    NotOneDocument {
        /// The file.
        path: PathBuf,
        /// The documents in it that are not empty.
        count: usize,
    },

    /// A file holds something other than a v1 CustomResourceDefinition.
    #[error(
        "{} holds kind {kind:?} of apiVersion {api_version:?}, not a {CRD_KIND} of {CRD_API_VERSION}",
        path.display()
    )]
    NotACrd {
        /// The file.
        path: PathBuf,
        /// Its `kind`, empty when it has none.
        kind: String,
        /// Its `apiVersion`, empty when it has none.
        api_version: String,
    },

    /// A file's CRD does not fit the CustomResourceDefinition type.
    #[error("{} is not a valid {CRD_KIND}", path.display())]
    InvalidCrd {
        /// The file.
        path: PathBuf,
        /// Why it does not fit.
        #[source]
        source: serde_json::Error,
    },

    /// A file's CRD has no `metadata.name`.
    #[error("the {CRD_KIND} in {} has no metadata.name", path.display())]
    NoName {
        /// The file.
        path: PathBuf,
    },

    /// A file's CRD is not named `<plural>.<group>`, which the API server
    /// would refuse.
    #[error(
        "the {CRD_KIND} in {} is named {name:?}; it must be {expected:?} (<spec.names.plural>.<spec.group>)",
        path.display()
    )]
    Misnamed {
        /// The file.
        path: PathBuf,
        /// Its `metadata.name`.
        name: String,
        /// The name its spec requires.
        expected: String,
    },

    /// A file's CRD does not have exactly one storage version, which the
    /// API server would refuse.
    #[error(
        "the {CRD_KIND} in {} has {count} versions with storage: true; it must have exactly one",
        path.display()
    )]
    StorageVersions {
        /// The file.
        path: PathBuf,
        /// How many it has.
        count: usize,
    },

    /// Two files hold the same CRD.
    #[error("{} and {} both hold customresourcedefinition/{name}", first.display(), second.display())]
    Duplicate {
        /// The CRD.
        name: String,
        /// The file read first.
        first: PathBuf,
        /// The other file.
        second: PathBuf,
    },

    /// Replacing the CRD would drop a version objects are stored in.
    #[error(
        "refusing to replace customresourcedefinition/{name}: stored versions {versions} are missing from spec.versions in {}; objects stored in them could no longer be read (migrate them and remove the versions from status.storedVersions first)",
        path.display()
    )]
    StrandedVersions {
        /// The CRD.
        name: String,
        /// The file.
        path: PathBuf,
        /// The versions it would drop, comma-separated.
        versions: String,
    },

    /// The CRD is being deleted; replacing it would not keep it.
    #[error("customresourcedefinition/{name} is being deleted; run again once it is gone")]
    Terminating {
        /// The CRD.
        name: String,
    },

    /// RBAC refused a request.
    #[error(
        "forbidden to {verb} customresourcedefinition/{name}: this needs `{verb}` on customresourcedefinitions.apiextensions.k8s.io{scope}"
    )]
    Forbidden {
        /// The verb refused: `get`, `create` or `update`.
        verb: &'static str,
        /// The CRD.
        name: String,
        /// Whether the permission may be limited to the name.
        scope: &'static str,
        /// The API server's answer.
        #[source]
        source: Box<kube::Error>,
    },

    /// Any other failed request.
    #[error("cannot {verb} customresourcedefinition/{name}")]
    Kube {
        /// The verb: `get`, `create` or `update`.
        verb: &'static str,
        /// The CRD.
        name: String,
        /// The client's error.
        #[source]
        source: Box<kube::Error>,
    },

    /// Other writers changed the CRD between every read and write.
    #[error(
        "customresourcedefinition/{name} changed under every one of {MAX_ATTEMPTS} attempts to write it"
    )]
    Contended {
        /// The CRD.
        name: String,
    },

    /// The CRD was deleted while the run waited for it.
    #[error("customresourcedefinition/{name} was deleted while waiting for it to be Established")]
    Vanished {
        /// The CRD.
        name: String,
    },

    /// The CRD did not become Established in time.
    #[error("customresourcedefinition/{name} is not Established after {timeout:?}: {conditions}")]
    NotEstablished {
        /// The CRD.
        name: String,
        /// `--timeout`.
        timeout: Duration,
        /// Its conditions when the run gave up.
        conditions: String,
    },
}

/// What a run did to one CRD; printed as
/// `customresourcedefinition/<name> <outcome>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// It did not exist and was created.
    Created,
    /// Its spec, labels or annotations differed from the file's and were
    /// replaced.
    Replaced,
    /// It already was as the file says; nothing was written.
    Kept,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Outcome::Created => "created",
            Outcome::Replaced => "replaced",
            Outcome::Kept => "kept",
        })
    }
}

/// A write to make: `create` of a new CRD, or `update` of the one read, with
/// the `resourceVersion` it was read at.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Write {
    /// Create this CRD; fails if another writer created it first.
    Create(CustomResourceDefinition),
    /// Replace the CRD; fails if it changed since it was read.
    Replace(CustomResourceDefinition),
}

/// What to do about one CRD, given what was read.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Decision {
    /// What will have happened once `write` succeeds.
    pub(crate) outcome: Outcome,
    /// The write to make; `None` when the CRD is kept as it is.
    pub(crate) write: Option<Write>,
}

/// One CRD file, read and checked.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CrdFile {
    /// Where it was read from.
    pub(crate) path: PathBuf,
    /// The CRD it holds, with a name.
    pub(crate) crd: CustomResourceDefinition,
}

impl CrdFile {
    /// The CRD's `metadata.name`, which [`parse_crd_file`] made sure of.
    pub(crate) fn name(&self) -> &str {
        self.crd.metadata.name.as_deref().unwrap_or_default()
    }
}

/// Whether a directory entry named `name` is read as a CRD file: a `*.yaml`
/// or `*.yml` that is not hidden (a ConfigMap volume's `..data` is).
fn is_crd_file_name(name: &OsStr) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
    !name.starts_with('.')
        && Path::new(name)
            .extension()
            .and_then(OsStr::to_str)
            .is_some_and(|extension| matches!(extension, "yaml" | "yml"))
}

/// Reads and checks every CRD file in `dir`, sorted by name; fails on the
/// first bad file, or when two files hold the same CRD.
pub(crate) fn read_crd_files(dir: &Path) -> Result<Vec<CrdFile>, Error> {
    let read_dir = |source| Error::ReadDir {
        dir: dir.to_owned(),
        source,
    };
    let mut paths = Vec::new();
    for entry in fs::read_dir(dir).map_err(read_dir)? {
        let entry = entry.map_err(read_dir)?;
        if !is_crd_file_name(&entry.file_name()) {
            continue;
        }
        let path = entry.path();
        // `fs::metadata` follows links: a ConfigMap volume's files are links
        // into its hidden `..data` directory.
        let metadata = fs::metadata(&path).map_err(|source| Error::ReadFile {
            path: path.clone(),
            source,
        })?;
        if metadata.is_file() {
            paths.push(path);
        }
    }
    if paths.is_empty() {
        return Err(Error::NoFiles {
            dir: dir.to_owned(),
        });
    }
    paths.sort();

    let mut files: Vec<CrdFile> = Vec::with_capacity(paths.len());
    for path in paths {
        let text = fs::read_to_string(&path).map_err(|source| Error::ReadFile {
            path: path.clone(),
            source,
        })?;
        let crd = parse_crd_file(&path, &text)?;
        let file = CrdFile { path, crd };
        if let Some(first) = files.iter().find(|other| other.name() == file.name()) {
            return Err(Error::Duplicate {
                name: file.name().to_owned(),
                first: first.path.clone(),
                second: file.path,
            });
        }
        files.push(file);
    }
    Ok(files)
}

/// The CRD in the file `path` holding `text`: exactly one YAML document
/// (empty ones aside) that is an `apiextensions.k8s.io/v1`
/// CustomResourceDefinition named `<plural>.<group>`, with one storage
/// version. (The API server checks the rest; these are checked here so that
/// a file it would refuse stops the run before anything is written.)
pub(crate) fn parse_crd_file(path: &Path, text: &str) -> Result<CustomResourceDefinition, Error> {
    let mut documents = Vec::new();
    for document in serde_yaml_ng::Deserializer::from_str(text) {
        let value = serde_json::Value::deserialize(document).map_err(|source| Error::Yaml {
            path: path.to_owned(),
            source,
        })?;
        if !value.is_null() {
            documents.push(value);
        }
    }
    let document = match documents.pop() {
        Some(document) if documents.is_empty() => document,
        last => {
            return Err(Error::NotOneDocument {
                path: path.to_owned(),
                count: documents.len() + usize::from(last.is_some()),
            });
        }
    };
    let field = |name: &str| {
        document
            .get(name)
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let (kind, api_version) = (field("kind"), field("apiVersion"));
    if kind != CRD_KIND || api_version != CRD_API_VERSION {
        return Err(Error::NotACrd {
            path: path.to_owned(),
            kind,
            api_version,
        });
    }
    let crd: CustomResourceDefinition =
        serde_json::from_value(document).map_err(|source| Error::InvalidCrd {
            path: path.to_owned(),
            source,
        })?;
    let name = crd.metadata.name.as_deref().unwrap_or_default();
    if name.is_empty() {
        return Err(Error::NoName {
            path: path.to_owned(),
        });
    }
    let expected = format!("{}.{}", crd.spec.names.plural, crd.spec.group);
    if name != expected {
        return Err(Error::Misnamed {
            path: path.to_owned(),
            name: name.to_owned(),
            expected,
        });
    }
    let count = crd.spec.versions.iter().filter(|v| v.storage).count();
    if count != 1 {
        return Err(Error::StorageVersions {
            path: path.to_owned(),
            count,
        });
    }
    Ok(crd)
}

/// What to do about the CRD of `file`, given the live one as read (`None`:
/// it does not exist). Refuses a CRD being deleted, and a replacement that
/// would drop a version in the live `status.storedVersions`.
pub(crate) fn decide(
    file: &CrdFile,
    observed: Option<&CustomResourceDefinition>,
) -> Result<Decision, Error> {
    let Some(observed) = observed else {
        return Ok(Decision {
            outcome: Outcome::Created,
            write: Some(Write::Create(new_crd(&file.crd))),
        });
    };
    if observed.metadata.deletion_timestamp.is_some() {
        return Err(Error::Terminating {
            name: file.name().to_owned(),
        });
    }
    let stranded = stranded_versions(observed, &file.crd.spec);
    if !stranded.is_empty() {
        return Err(Error::StrandedVersions {
            name: file.name().to_owned(),
            path: file.path.clone(),
            versions: stranded.join(","),
        });
    }
    let mut desired = observed.clone();
    desired.spec = file.crd.spec.clone();
    let relabelled = merge_over(
        &mut desired.metadata.labels,
        file.crd.metadata.labels.as_ref(),
    );
    let reannotated = merge_over(
        &mut desired.metadata.annotations,
        file.crd.metadata.annotations.as_ref(),
    );
    let respecified = as_stored(&desired.spec) != as_stored(&observed.spec);
    Ok(if relabelled || reannotated || respecified {
        Decision {
            outcome: Outcome::Replaced,
            write: Some(Write::Replace(desired)),
        }
    } else {
        Decision {
            outcome: Outcome::Kept,
            write: None,
        }
    })
}

/// The versions in `observed`'s `status.storedVersions` that `spec` does
/// not list, in the order they were stored.
pub(crate) fn stranded_versions(
    observed: &CustomResourceDefinition,
    spec: &CustomResourceDefinitionSpec,
) -> Vec<String> {
    let listed: BTreeSet<&str> = spec.versions.iter().map(|v| v.name.as_str()).collect();
    observed
        .status
        .as_ref()
        .and_then(|status| status.stored_versions.as_ref())
        .into_iter()
        .flatten()
        .filter(|stored| !listed.contains(stored.as_str()))
        .cloned()
        .collect()
}

/// A new CRD as the file says: only its name, labels and annotations of the
/// file's metadata, and no status.
fn new_crd(file: &CustomResourceDefinition) -> CustomResourceDefinition {
    CustomResourceDefinition {
        metadata: ObjectMeta {
            name: file.metadata.name.clone(),
            labels: file.metadata.labels.clone(),
            annotations: file.metadata.annotations.clone(),
            ..ObjectMeta::default()
        },
        spec: file.spec.clone(),
        status: None,
    }
}

/// Sets every entry of `from` in `target`, keeping `target`'s others.
/// Returns whether anything changed.
fn merge_over(
    target: &mut Option<BTreeMap<String, String>>,
    from: Option<&BTreeMap<String, String>>,
) -> bool {
    let Some(from) = from.filter(|from| !from.is_empty()) else {
        return false;
    };
    let target = target.get_or_insert_with(BTreeMap::new);
    let mut changed = false;
    for (key, value) in from {
        if target.get(key) != Some(value) {
            target.insert(key.clone(), value.clone());
            changed = true;
        }
    }
    changed
}

/// `spec` as the API server stores it, to compare a file's spec with a live
/// one: with the server's defaults filled in (apiextensions/v1
/// `defaults.go`) and without the zero values its JSON encoding drops
/// (`omitempty` fields that are not pointers).
pub(crate) fn as_stored(spec: &CustomResourceDefinitionSpec) -> CustomResourceDefinitionSpec {
    let mut spec = spec.clone();
    let names = &mut spec.names;
    if names.singular.as_deref().unwrap_or_default().is_empty() {
        names.singular = Some(names.kind.to_lowercase());
    }
    if names.list_kind.as_deref().unwrap_or_default().is_empty() && !names.kind.is_empty() {
        names.list_kind = Some(format!("{}List", names.kind));
    }
    omit_if(&mut names.short_names, Vec::is_empty);
    omit_if(&mut names.categories, Vec::is_empty);
    let conversion = spec
        .conversion
        .get_or_insert_with(|| CustomResourceConversion {
            strategy: "None".to_owned(),
            webhook: None,
        });
    if let Some(client) = conversion
        .webhook
        .as_mut()
        .and_then(|webhook| webhook.client_config.as_mut())
    {
        omit_if(&mut client.ca_bundle, |bundle| bundle.0.is_empty());
        if let Some(service) = client.service.as_mut() {
            service.port.get_or_insert(443);
        }
    }
    omit_if(&mut spec.preserve_unknown_fields, |keep| !keep);
    for version in &mut spec.versions {
        omit_if(&mut version.deprecated, |deprecated| !deprecated);
        omit_if(&mut version.selectable_fields, Vec::is_empty);
        for column in version.additional_printer_columns.iter_mut().flatten() {
            omit_if(&mut column.priority, |priority| *priority == 0);
            omit_if(&mut column.format, String::is_empty);
            omit_if(&mut column.description, String::is_empty);
        }
        omit_if(&mut version.additional_printer_columns, Vec::is_empty);
        if let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|validation| validation.open_api_v3_schema.as_mut())
        {
            omit_schema_zeros(schema);
        }
    }
    spec
}

/// Clears `value` when `is_zero` says it holds what Go's JSON encoding
/// would leave out.
fn omit_if<T>(value: &mut Option<T>, is_zero: impl FnOnce(&T) -> bool) {
    if value.as_ref().is_some_and(is_zero) {
        *value = None;
    }
}

/// Leaves out the zero values of `schema` and its subschemas that the API
/// server does not store. Literal values (`default`, `enum`, `example`) are
/// kept as they are: there `false` or `[]` is a value.
fn omit_schema_zeros(schema: &mut JSONSchemaProps) {
    let subschemas = schema
        .properties
        .iter_mut()
        .chain(schema.pattern_properties.iter_mut())
        .chain(schema.definitions.iter_mut())
        .flat_map(|map| map.values_mut())
        .chain(
            schema
                .all_of
                .iter_mut()
                .chain(schema.one_of.iter_mut())
                .chain(schema.any_of.iter_mut())
                .flatten(),
        );
    for subschema in subschemas {
        omit_schema_zeros(subschema);
    }
    if let Some(not) = schema.not.as_mut() {
        omit_schema_zeros(not);
    }
    match schema.items.as_mut() {
        Some(JSONSchemaPropsOrArray::Schema(items)) => omit_schema_zeros(items),
        Some(JSONSchemaPropsOrArray::Schemas(items)) => {
            items.iter_mut().for_each(omit_schema_zeros)
        }
        None => {}
    }
    for either in [
        &mut schema.additional_properties,
        &mut schema.additional_items,
    ] {
        if let Some(JSONSchemaPropsOrBool::Schema(subschema)) = either.as_mut() {
            omit_schema_zeros(subschema);
        }
    }
    for dependency in schema
        .dependencies
        .iter_mut()
        .flat_map(|map| map.values_mut())
    {
        if let JSONSchemaPropsOrStringArray::Schema(subschema) = dependency {
            omit_schema_zeros(subschema);
        }
    }
    for rule in schema.x_kubernetes_validations.iter_mut().flatten() {
        omit_if(&mut rule.message, String::is_empty);
        omit_if(&mut rule.message_expression, String::is_empty);
        omit_if(&mut rule.field_path, String::is_empty);
    }

    for text in [
        &mut schema.id,
        &mut schema.schema,
        &mut schema.description,
        &mut schema.type_,
        &mut schema.format,
        &mut schema.title,
        &mut schema.pattern,
    ] {
        omit_if(text, String::is_empty);
    }
    for flag in [
        &mut schema.exclusive_maximum,
        &mut schema.exclusive_minimum,
        &mut schema.unique_items,
        &mut schema.nullable,
        &mut schema.x_kubernetes_embedded_resource,
        &mut schema.x_kubernetes_int_or_string,
    ] {
        omit_if(flag, |set| !set);
    }
    omit_if(&mut schema.enum_, Vec::is_empty);
    omit_if(&mut schema.all_of, Vec::is_empty);
    omit_if(&mut schema.one_of, Vec::is_empty);
    omit_if(&mut schema.any_of, Vec::is_empty);
    omit_if(&mut schema.required, Vec::is_empty);
    omit_if(&mut schema.x_kubernetes_list_map_keys, Vec::is_empty);
    omit_if(&mut schema.x_kubernetes_validations, Vec::is_empty);
    omit_if(&mut schema.properties, BTreeMap::is_empty);
    omit_if(&mut schema.pattern_properties, BTreeMap::is_empty);
    omit_if(&mut schema.definitions, BTreeMap::is_empty);
    omit_if(&mut schema.dependencies, BTreeMap::is_empty);
}

/// Whether `crd` can be used: `Established` and `NamesAccepted` are both
/// True.
pub(crate) fn is_established(crd: &CustomResourceDefinition) -> bool {
    ["Established", "NamesAccepted"].iter().all(|wanted| {
        conditions(crd).any(|condition| condition.type_ == *wanted && condition.status == "True")
    })
}

/// `crd`'s conditions, for an error: `Type=Status (Reason: message)`,
/// comma-separated.
fn describe_conditions(crd: &CustomResourceDefinition) -> String {
    let described: Vec<String> = conditions(crd)
        .map(|condition| {
            format!(
                "{}={} ({}: {})",
                condition.type_,
                condition.status,
                condition.reason.as_deref().unwrap_or_default(),
                condition.message.as_deref().unwrap_or_default()
            )
        })
        .collect();
    if described.is_empty() {
        "it has no conditions yet".to_owned()
    } else {
        described.join(", ")
    }
}

/// `crd`'s status conditions.
fn conditions(
    crd: &CustomResourceDefinition,
) -> impl Iterator<Item = &CustomResourceDefinitionCondition> {
    crd.status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .into_iter()
        .flatten()
}

/// Applies the CRDs in `args.dir`, printing
/// `customresourcedefinition/<name> <outcome>` for each once it is
/// Established.
pub(crate) async fn run(client: Client, args: &ApplyCrdsArgs) -> Result<(), Error> {
    let files = read_crd_files(&args.dir)?;
    let crds: Api<CustomResourceDefinition> = Api::all(client);

    // Every CRD is judged before the first write, so that a refusal leaves
    // all of them as they were.
    let mut observed = Vec::with_capacity(files.len());
    for file in &files {
        let live = read(&crds, file.name()).await?;
        decide(file, live.as_ref())?;
        observed.push(live);
    }

    for (file, live) in files.iter().zip(observed) {
        let (outcome, settled) = settle(&crds, file, live).await?;
        tracing::debug!(crd = %file.name(), path = %file.path.display(), %outcome, "settled");
        wait_established(&crds, file.name(), settled, args.timeout).await?;
        println!("customresourcedefinition/{} {outcome}", file.name());
    }
    Ok(())
}

/// The CRD `name`, or `None` when it does not exist.
async fn read(
    crds: &Api<CustomResourceDefinition>,
    name: &str,
) -> Result<Option<CustomResourceDefinition>, Error> {
    crds.get_opt(name)
        .await
        .map_err(|source| request_error("get", name, source))
}

/// Decides and writes `file`'s CRD starting from `observed`, and again from
/// a new read when another writer got there first, until a write succeeds
/// or none is needed. Returns what happened and the CRD as last seen.
async fn settle(
    crds: &Api<CustomResourceDefinition>,
    file: &CrdFile,
    mut observed: Option<CustomResourceDefinition>,
) -> Result<(Outcome, Option<CustomResourceDefinition>), Error> {
    let name = file.name();
    for attempt in 1..=MAX_ATTEMPTS {
        let decision = decide(file, observed.as_ref())?;
        let written = match decision.write {
            None => return Ok((decision.outcome, observed)),
            Some(Write::Create(crd)) => crds
                .create(&PostParams::default(), &crd)
                .await
                .map_err(|error| ("create", error)),
            Some(Write::Replace(crd)) => crds
                .replace(name, &PostParams::default(), &crd)
                .await
                .map_err(|error| ("update", error)),
        };
        match written {
            Ok(written) => return Ok((decision.outcome, Some(written))),
            // AlreadyExists and Conflict: another writer got there first.
            // NotFound: the CRD was deleted since it was read.
            Err((verb, kube::Error::Api(status))) if status.code == 409 || status.code == 404 => {
                tracing::debug!(crd = %name, verb, attempt, reason = %status.reason, "lost a race; reading again");
            }
            Err((verb, source)) => return Err(request_error(verb, name, source)),
        }
        observed = read(crds, name).await?;
    }
    Err(Error::Contended {
        name: name.to_owned(),
    })
}

/// Reads the CRD `name` until it is Established (starting from `last`, as
/// last seen, when there is one), for up to `timeout`.
async fn wait_established(
    crds: &Api<CustomResourceDefinition>,
    name: &str,
    mut last: Option<CustomResourceDefinition>,
    timeout: Duration,
) -> Result<(), Error> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let crd = match last.take() {
            Some(crd) => crd,
            None => read(crds, name).await?.ok_or_else(|| Error::Vanished {
                name: name.to_owned(),
            })?,
        };
        if is_established(&crd) {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::NotEstablished {
                name: name.to_owned(),
                timeout,
                conditions: describe_conditions(&crd),
            });
        }
        tokio::time::sleep(ESTABLISHED_POLL_INTERVAL).await;
    }
}

/// The error of a failed `verb` on the CRD `name`, naming the permission
/// it lacks when RBAC refused it.
fn request_error(verb: &'static str, name: &str, source: kube::Error) -> Error {
    let forbidden = matches!(&source, kube::Error::Api(status) if status.code == 403);
    let (name, source) = (name.to_owned(), Box::new(source));
    if forbidden {
        let scope = if verb == "create" {
            " (RBAC cannot limit create to a name)"
        } else {
            " (resourceNames may limit it to this name)"
        };
        Error::Forbidden {
            verb,
            name,
            scope,
            source,
        }
    } else {
        Error::Kube { verb, name, source }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file every decision test reads from.
    const FILE: &str = "/sample/crds/sample.example.dev_gizmos.yaml";

    /// The chart's file: one version, `v1`, with a `spec.size`.
    const GIZMOS: &str = r#"
# A comment before the document, as generated files have.
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gizmos.sample.example.dev
  labels:
    app.kubernetes.io/part-of: sample-chart
spec:
  group: sample.example.dev
  names:
    kind: Gizmo
    plural: gizmos
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size:
                type: integer
"#;

    /// `GIZMOS` as the API server returns it once created: defaults filled
    /// in, a resourceVersion, someone else's label and finalizer, and
    /// `v1alpha1` still stored from an earlier chart.
    const LIVE_GIZMOS: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gizmos.sample.example.dev
  uid: sample-uid
  resourceVersion: "42"
  finalizers:
  - customresourcecleanup.apiextensions.k8s.io
  labels:
    app.kubernetes.io/part-of: sample-chart
    sample.example.dev/owner: sample-team
spec:
  conversion:
    strategy: None
  group: sample.example.dev
  names:
    kind: Gizmo
    listKind: GizmoList
    plural: gizmos
    singular: gizmo
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size:
                type: integer
status:
  storedVersions: [v1alpha1, v1]
  conditions:
  - type: NamesAccepted
    status: "True"
  - type: Established
    status: "True"
"#;

    fn crd(yaml: &str) -> CustomResourceDefinition {
        parse_crd_file(Path::new(FILE), yaml).unwrap()
    }

    fn file(yaml: &str) -> CrdFile {
        CrdFile {
            path: PathBuf::from(FILE),
            crd: crd(yaml),
        }
    }

    /// `GIZMOS` with `from` replaced by `to` (which must occur once).
    fn gizmos_with(from: &str, to: &str) -> String {
        assert_eq!(GIZMOS.matches(from).count(), 1, "{from:?}");
        GIZMOS.replace(from, to)
    }

    /// `LIVE_GIZMOS` with `from` replaced by `to` (which must occur once).
    fn live_with(from: &str, to: &str) -> String {
        assert_eq!(LIVE_GIZMOS.matches(from).count(), 1, "{from:?}");
        LIVE_GIZMOS.replace(from, to)
    }

    /// `v1alpha1` listed again in front of `v1`.
    const WITH_V1ALPHA1: &str = "  versions:\n  - name: v1alpha1\n    served: false\n    storage: false\n    schema:\n      openAPIV3Schema:\n        type: object\n  - name: v1\n";

    #[test]
    fn each_crd_is_created_kept_replaced_or_refused_as_the_live_one_allows() {
        let v1alpha1 = gizmos_with("  versions:\n  - name: v1\n", WITH_V1ALPHA1);
        let with_alpha =
            |yaml: &str| yaml.replacen("  versions:\n  - name: v1\n", WITH_V1ALPHA1, 1);
        let live_v1_only = live_with("[v1alpha1, v1]", "[v1]");
        struct Case {
            what: &'static str,
            file: String,
            observed: Option<String>,
            /// The outcome, or a part of the refusal.
            expected: Result<Outcome, &'static str>,
        }
        let cases = [
            Case {
                what: "absent",
                file: GIZMOS.to_owned(),
                observed: None,
                expected: Ok(Outcome::Created),
            },
            Case {
                what: "the same, with the server's defaults and more labels",
                file: v1alpha1.clone(),
                observed: Some(with_alpha(LIVE_GIZMOS)),
                expected: Ok(Outcome::Kept),
            },
            Case {
                what: "the same, spelling out zero values the server drops",
                file: gizmos_with(
                    "              size:\n                type: integer\n",
                    "              size:\n                type: integer\n                description: \"\"\n                nullable: false\n                enum: []\n            required: []\n    deprecated: false\n    additionalPrinterColumns: []\n  preserveUnknownFields: false\n",
                ),
                observed: Some(live_v1_only.clone()),
                expected: Ok(Outcome::Kept),
            },
            Case {
                what: "the same, with the defaults spelled out",
                file: gizmos_with(
                    "    plural: gizmos\n",
                    "    plural: gizmos\n    singular: gizmo\n    listKind: GizmoList\n  conversion:\n    strategy: None\n",
                ),
                observed: Some(live_v1_only.clone()),
                expected: Ok(Outcome::Kept),
            },
            Case {
                what: "a property added",
                file: gizmos_with(
                    "              size:\n",
                    "              colour:\n                type: string\n              size:\n",
                ),
                observed: Some(live_v1_only.clone()),
                expected: Ok(Outcome::Replaced),
            },
            Case {
                what: "a property removed",
                file: GIZMOS.to_owned(),
                observed: Some(live_with(
                    "              size:\n",
                    "              colour:\n                type: string\n              size:\n",
                ).replace("[v1alpha1, v1]", "[v1]")),
                expected: Ok(Outcome::Replaced),
            },
            Case {
                // An empty object that is a value: it turns the status
                // subresource on.
                what: "the status subresource added",
                file: gizmos_with(
                    "    storage: true\n",
                    "    storage: true\n    subresources:\n      status: {}\n",
                ),
                observed: Some(live_v1_only.clone()),
                expected: Ok(Outcome::Replaced),
            },
            Case {
                what: "a default of false added",
                file: gizmos_with(
                    "                type: integer\n",
                    "                type: integer\n                default: false\n",
                ),
                observed: Some(live_v1_only.clone()),
                expected: Ok(Outcome::Replaced),
            },
            Case {
                what: "a label added",
                file: gizmos_with(
                    "    app.kubernetes.io/part-of: sample-chart\n",
                    "    app.kubernetes.io/part-of: sample-chart\n    app.kubernetes.io/version: sample-2\n",
                ),
                observed: Some(live_v1_only.clone()),
                expected: Ok(Outcome::Replaced),
            },
            Case {
                what: "an annotation added",
                file: gizmos_with(
                    "  labels:\n",
                    "  annotations:\n    sample.example.dev/note: sample\n  labels:\n",
                ),
                observed: Some(live_v1_only.clone()),
                expected: Ok(Outcome::Replaced),
            },
            Case {
                what: "a stored version dropped",
                file: GIZMOS.to_owned(),
                observed: Some(with_alpha(LIVE_GIZMOS)),
                expected: Err("stored versions v1alpha1 are missing"),
            },
            Case {
                what: "a stored version dropped while unchanged otherwise",
                file: GIZMOS.to_owned(),
                observed: Some(LIVE_GIZMOS.to_owned()),
                expected: Err("stored versions v1alpha1 are missing"),
            },
            Case {
                what: "being deleted",
                file: GIZMOS.to_owned(),
                observed: Some(live_with(
                    "  uid: sample-uid\n",
                    "  uid: sample-uid\n  deletionTimestamp: \"2024-01-01T00:00:00Z\"\n",
                )
                .replace("[v1alpha1, v1]", "[v1]")),
                expected: Err("is being deleted"),
            },
        ];
        for case in cases {
            let what = case.what;
            let file = file(&case.file);
            let observed = case.observed.as_deref().map(crd);
            let decided = decide(&file, observed.as_ref());
            let decision = match (decided, case.expected) {
                (Ok(decision), Ok(outcome)) => {
                    assert_eq!(decision.outcome, outcome, "{what}");
                    decision
                }
                (Err(error), Err(part)) => {
                    let message = error.to_string();
                    assert!(message.contains(part), "{what}: {message}");
                    assert!(message.contains(file.name()), "{what}: {message}");
                    continue;
                }
                (decided, expected) => panic!("{what}: {decided:?}, expected {expected:?}"),
            };
            match (decision.write, observed) {
                (None, _) => assert_eq!(decision.outcome, Outcome::Kept, "{what}"),
                (Some(Write::Create(created)), None) => {
                    assert_eq!(created.metadata.name, file.crd.metadata.name, "{what}");
                    assert_eq!(created.metadata.labels, file.crd.metadata.labels);
                    assert_eq!(created.metadata.resource_version, None);
                    assert_eq!(created.spec, file.crd.spec, "{what}");
                    assert_eq!(created.status, None, "{what}");
                }
                (Some(Write::Replace(replaced)), Some(observed)) => {
                    // Exactly the file's spec, conditional on what was read,
                    // and whatever else of the live object stays.
                    assert_eq!(replaced.spec, file.crd.spec, "{what}");
                    let (meta, live) = (&replaced.metadata, &observed.metadata);
                    assert_eq!(meta.resource_version.as_deref(), Some("42"), "{what}");
                    assert_eq!(meta.uid, live.uid, "{what}");
                    assert_eq!(meta.finalizers, live.finalizers, "{what}");
                    let labels = meta.labels.as_ref().unwrap();
                    assert_eq!(labels["sample.example.dev/owner"], "sample-team");
                    for (key, value) in file.crd.metadata.labels.iter().flatten() {
                        assert_eq!(&labels[key], value, "{what}");
                    }
                    for (key, value) in file.crd.metadata.annotations.iter().flatten() {
                        assert_eq!(&meta.annotations.as_ref().unwrap()[key], value);
                    }
                }
                (write, observed) => panic!("{what}: {write:?} after reading {observed:?}"),
            }
        }
    }

    #[test]
    fn every_version_dropped_from_stored_versions_is_named() {
        let observed = crd(&live_with("[v1alpha1, v1]", "[v1alpha1, v1beta1, v1]"));
        let error = decide(&file(GIZMOS), Some(&observed)).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                "refusing to replace customresourcedefinition/gizmos.sample.example.dev: stored versions v1alpha1,v1beta1 are missing from spec.versions in {FILE}; objects stored in them could no longer be read (migrate them and remove the versions from status.storedVersions first)"
            )
        );
    }

    /// Writes `files` (name, content) into a new directory.
    fn directory(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, content) in files {
            fs::write(dir.path().join(name), content).unwrap();
        }
        dir
    }

    /// `GIZMOS` renamed to the kind `kind` (lowercase plural `<kind>s`).
    fn crd_of_kind(kind: &str) -> String {
        let plural = format!("{}s", kind.to_lowercase());
        GIZMOS.replace("Gizmo", kind).replace("gizmos", &plural)
    }

    #[test]
    fn a_configmap_volume_reads_as_its_files_in_name_order() {
        // The layout of a projected ConfigMap volume: the files are links
        // into a hidden timestamped directory, through `..data`.
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("..2024_01_01_00_00_00.000000001");
        fs::create_dir(&data).unwrap();
        let contents = [
            ("sample.example.dev_widgets.yaml", crd_of_kind("Widget")),
            ("sample.example.dev_gizmos.yml", crd_of_kind("Gizmo")),
        ];
        for (name, content) in &contents {
            fs::write(data.join(name), content).unwrap();
        }
        // A file only in the hidden directory is not read.
        fs::write(data.join("sample-hidden.yaml"), "not: [a crd").unwrap();
        std::os::unix::fs::symlink(data.file_name().unwrap(), dir.path().join("..data")).unwrap();
        for (name, _) in &contents {
            std::os::unix::fs::symlink(Path::new("..data").join(name), dir.path().join(name))
                .unwrap();
        }
        // Neither a hidden file, nor another extension, nor a directory.
        fs::write(dir.path().join(".sample.yaml"), "not: [a crd").unwrap();
        fs::write(dir.path().join("README.md"), "not a crd").unwrap();
        fs::create_dir(dir.path().join("sample-dir.yaml")).unwrap();

        let files = read_crd_files(dir.path()).unwrap();
        let read: Vec<(&str, &str)> = files
            .iter()
            .map(|file| {
                (
                    file.path.file_name().unwrap().to_str().unwrap(),
                    file.name(),
                )
            })
            .collect();
        assert_eq!(
            read,
            [
                ("sample.example.dev_gizmos.yml", "gizmos.sample.example.dev"),
                (
                    "sample.example.dev_widgets.yaml",
                    "widgets.sample.example.dev"
                ),
            ]
        );
        assert_eq!(files[1].crd.spec.names.kind, "Widget");
    }

    #[test]
    fn a_bad_file_is_rejected_by_name() {
        let cases: [(&str, String, &str); 11] = [
            (
                "bad YAML",
                "kind: [unclosed".to_owned(),
                "is not valid YAML",
            ),
            (
                "empty",
                "# nothing here\n".to_owned(),
                "holds 0 YAML documents",
            ),
            (
                "two documents",
                format!("{GIZMOS}---\n{}", crd_of_kind("Widget")),
                "holds 2 YAML documents",
            ),
            (
                "a ConfigMap",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sample\n".to_owned(),
                r#"holds kind "ConfigMap" of apiVersion "v1""#,
            ),
            (
                "an old CRD",
                GIZMOS.replace("apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1"),
                r#"apiVersion "apiextensions.k8s.io/v1beta1""#,
            ),
            ("a list", "- a\n- b\n".to_owned(), r#"holds kind """#),
            (
                "no name",
                GIZMOS.replace("  name: gizmos.sample.example.dev\n", ""),
                "has no metadata.name",
            ),
            (
                "a wrong name",
                GIZMOS.replace("name: gizmos.sample.example.dev", "name: sample"),
                r#"is named "sample"; it must be "gizmos.sample.example.dev""#,
            ),
            (
                "no versions",
                GIZMOS.replace("  versions:\n", "  sample-versions:\n"),
                "has 0 versions with storage: true",
            ),
            (
                "two storage versions",
                gizmos_with(
                    "  versions:\n",
                    "  versions:\n  - name: v1alpha1\n    served: true\n    storage: true\n",
                ),
                "has 2 versions with storage: true",
            ),
            (
                "versions not a list",
                GIZMOS.replace(
                    "  versions:\n  - name: v1",
                    "  versions: v1\n  sample:\n  - name: v1",
                ),
                "is not a valid CustomResourceDefinition",
            ),
        ];
        for (what, content, part) in cases {
            // A good file beside it changes nothing: the bad one fails the
            // whole run.
            let dir = directory(&[("sample-bad.yaml", &content), ("sample-good.yaml", GIZMOS)]);
            let error = read_crd_files(dir.path()).unwrap_err();
            let message = error.to_string();
            assert!(message.contains("sample-bad.yaml"), "{what}: {message}");
            assert!(message.contains(part), "{what}: {message}");
        }
    }

    #[test]
    fn a_dangling_link_an_empty_directory_and_a_duplicate_are_errors() {
        let dir = directory(&[]);
        assert!(matches!(
            read_crd_files(dir.path()),
            Err(Error::NoFiles { .. })
        ));
        std::os::unix::fs::symlink("..data/sample.yaml", dir.path().join("sample.yaml")).unwrap();
        let dangling = read_crd_files(dir.path()).unwrap_err();
        assert!(
            matches!(&dangling, Error::ReadFile { path, .. } if path.ends_with("sample.yaml")),
            "{dangling:?}"
        );

        let dir = directory(&[("sample-a.yaml", GIZMOS), ("sample-b.yaml", GIZMOS)]);
        assert_eq!(
            read_crd_files(dir.path()).unwrap_err().to_string(),
            format!(
                "{} and {} both hold customresourcedefinition/gizmos.sample.example.dev",
                dir.path().join("sample-a.yaml").display(),
                dir.path().join("sample-b.yaml").display()
            )
        );

        assert!(matches!(
            read_crd_files(&dir.path().join("sample-missing")),
            Err(Error::ReadDir { .. })
        ));
    }

    #[test]
    fn the_charts_crd_files_are_read_as_they_are() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../charts/olm/crds");
        let files = read_crd_files(&dir).unwrap();
        assert!(!files.is_empty());
        for file in &files {
            // Upstream's names: `<group>_<plural>.yaml`.
            let spec = &file.crd.spec;
            let expected = format!("{}_{}.yaml", spec.group, spec.names.plural);
            assert!(file.path.ends_with(&expected), "{}", file.path.display());
            // A file compared with itself as stored is kept.
            let mut live = file.crd.clone();
            live.spec = as_stored(&live.spec);
            let decision = decide(file, Some(&live)).unwrap();
            assert_eq!(decision.outcome, Outcome::Kept, "{}", file.name());
        }
    }

    #[test]
    fn a_crd_is_usable_once_established_with_its_names_accepted() {
        let live = crd(LIVE_GIZMOS);
        assert!(is_established(&live));
        let installing = crd(&LIVE_GIZMOS.replace(
            "  - type: Established\n    status: \"True\"\n",
            "  - type: Established\n    status: \"False\"\n    reason: Installing\n    message: the initial names have not been accepted\n",
        ));
        assert!(!is_established(&installing));
        assert_eq!(
            describe_conditions(&installing),
            "NamesAccepted=True (: ), Established=False (Installing: the initial names have not been accepted)"
        );
        let new = crd(GIZMOS);
        assert!(!is_established(&new));
        assert_eq!(describe_conditions(&new), "it has no conditions yet");
    }

    #[test]
    fn a_refusal_names_the_verb_the_crd_and_whether_names_can_limit_it() {
        let forbidden = || {
            let status = kube::core::Status::failure("forbidden", "Forbidden")
                .with_code(403)
                .boxed();
            kube::Error::Api(status)
        };
        assert_eq!(
            request_error("update", "gizmos.sample.example.dev", forbidden()).to_string(),
            "forbidden to update customresourcedefinition/gizmos.sample.example.dev: this needs `update` on customresourcedefinitions.apiextensions.k8s.io (resourceNames may limit it to this name)"
        );
        assert_eq!(
            request_error("create", "gizmos.sample.example.dev", forbidden()).to_string(),
            "forbidden to create customresourcedefinition/gizmos.sample.example.dev: this needs `create` on customresourcedefinitions.apiextensions.k8s.io (RBAC cannot limit create to a name)"
        );
    }
}
