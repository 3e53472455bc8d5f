//! The inventory: the sample ImageStreams and Templates the operator keeps in
//! the `openshift` namespace, read from files laid out as upstream ships them
//! (`<sample>/imagestreams/*.json`, `<sample>/templates/*.json`) or from the
//! copy built into this binary, one per flavour and architecture.
//!
//! Upstream keys its inventory by `metadata.name` and lets the last file read
//! win when two files share a name; we refuse the inventory instead, since one
//! of the two samples would silently never be installed.

use std::{collections::BTreeMap, fmt, str::FromStr};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use olm_api::openshift::{ImageStream, Template};
use serde::{Deserialize, Serialize};

/// The largest sample file read, in bytes: upstream's largest is about 27 KB.
pub const MAX_SAMPLE_FILE_BYTES: usize = 1024 * 1024;

/// The most ImageStreams, and separately the most Templates, an inventory may
/// hold: upstream ships about fifty of each.
pub const MAX_SAMPLES: usize = 4096;

/// The directory name that makes a file an ImageStream.
pub const IMAGE_STREAMS_DIR: &str = "imagestreams";

/// The directory name that makes a file a Template.
pub const TEMPLATES_DIR: &str = "templates";

/// The `apiVersion` every inventory ImageStream gets.
const IMAGE_STREAM_API_VERSION: &str = "image.openshift.io/v1";

/// The `apiVersion` every inventory Template gets.
const TEMPLATE_API_VERSION: &str = "template.openshift.io/v1";

/// Streams whose names start with this are left out of
/// [`Inventory::tag_to_image`], as upstream leaves them out (`files.go`).
const TAG_TO_IMAGE_EXCLUDED_PREFIX: &str = "jenkins";

/// The kind of object a sample file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SampleKind {
    /// An `image.openshift.io/v1` ImageStream.
    ImageStream,
    /// A `template.openshift.io/v1` Template.
    Template,
}

impl SampleKind {
    /// The kind of the sample file at `path` (relative, `/`-separated): the
    /// name of its parent directory decides; `None` for every other file,
    /// which the inventory ignores. (Upstream only asks that the directory
    /// path end in `imagestreams` or `templates`, so it would also read
    /// `old-imagestreams/`; no shipped directory is named so.)
    pub fn of_path(path: &str) -> Option<SampleKind> {
        let mut components = path.rsplit('/');
        let _file = components.next();
        match components.next()? {
            IMAGE_STREAMS_DIR => Some(SampleKind::ImageStream),
            TEMPLATES_DIR => Some(SampleKind::Template),
            _ => None,
        }
    }

    /// Its Kubernetes kind: `ImageStream` or `Template`.
    pub fn as_str(self) -> &'static str {
        match self {
            SampleKind::ImageStream => "ImageStream",
            SampleKind::Template => "Template",
        }
    }
}

impl fmt::Display for SampleKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which product's samples: OpenShift's (Red Hat images) or OKD's
/// (community images).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Flavour {
    /// OpenShift Container Platform.
    #[default]
    Ocp,
    /// OKD, the community distribution.
    Okd,
}

impl Flavour {
    /// Every flavour.
    pub const ALL: [Flavour; 2] = [Flavour::Ocp, Flavour::Okd];

    /// Its name: `ocp` or `okd`.
    pub fn as_str(self) -> &'static str {
        match self {
            Flavour::Ocp => "ocp",
            Flavour::Okd => "okd",
        }
    }
}

impl fmt::Display for Flavour {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A flavour name that is neither `ocp` nor `okd`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown samples flavour {0:?}: expected ocp or okd")]
pub struct UnknownFlavour(pub String);

impl FromStr for Flavour {
    type Err = UnknownFlavour;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Flavour::ALL
            .into_iter()
            .find(|flavour| flavour.as_str() == s)
            .ok_or_else(|| UnknownFlavour(s.to_owned()))
    }
}

/// The directory upstream's image keeps an architecture's samples in
/// (`/opt/openshift/operator/<dir>`, `GetBaseDir` upstream), for an
/// architecture as Config `spec.architectures` spells it; `None` for one the
/// operator does not know. `aarch64` is accepted too, though upstream's
/// validation would refuse it, because it is what `uname -m` says.
pub fn architecture_dir(architecture: &str) -> Option<&'static str> {
    match architecture {
        "x86_64" | "amd64" => Some("x86_64"),
        "arm64" | "aarch64" => Some("aarch64"),
        "ppc64le" => Some("ppc64le"),
        "s390x" => Some("s390x"),
        _ => None,
    }
}

/// The inventories built into this binary, as `(flavour, architecture
/// directory)`; each is `inventory/<flavour>-<dir>.json` in this crate.
pub const SHIPPED_INVENTORIES: [(Flavour, &str); 5] = [
    (Flavour::Ocp, "x86_64"),
    (Flavour::Ocp, "aarch64"),
    (Flavour::Ocp, "ppc64le"),
    (Flavour::Ocp, "s390x"),
    (Flavour::Okd, "x86_64"),
];

/// The text of a shipped inventory (one of [`SHIPPED_INVENTORIES`]).
fn shipped_text(flavour: Flavour, dir: &str) -> Option<&'static str> {
    match (flavour, dir) {
        (Flavour::Ocp, "x86_64") => Some(include_str!("../../inventory/ocp-x86_64.json")),
        (Flavour::Ocp, "aarch64") => Some(include_str!("../../inventory/ocp-aarch64.json")),
        (Flavour::Ocp, "ppc64le") => Some(include_str!("../../inventory/ocp-ppc64le.json")),
        (Flavour::Ocp, "s390x") => Some(include_str!("../../inventory/ocp-s390x.json")),
        (Flavour::Okd, "x86_64") => Some(include_str!("../../inventory/okd-x86_64.json")),
        _ => None,
    }
}

/// Why an inventory cannot be read. Every message names the file (or, for
/// the shipped data, the entry) at fault.
#[derive(Debug, thiserror::Error)]
pub enum InventoryError {
    /// A sample file is larger than [`MAX_SAMPLE_FILE_BYTES`].
    #[error("sample file {path} is {size} bytes, over the limit of {limit}")]
    TooLarge {
        /// The file.
        path: String,
        /// Its size.
        size: u64,
        /// [`MAX_SAMPLE_FILE_BYTES`].
        limit: usize,
    },
    /// A sample file would make more than [`MAX_SAMPLES`] of its kind.
    #[error("sample file {path} would be {kind} number {count}, over the limit of {limit}")]
    TooMany {
        /// The file.
        path: String,
        /// The kind it holds.
        kind: SampleKind,
        /// How many of that kind it would make.
        count: usize,
        /// [`MAX_SAMPLES`].
        limit: usize,
    },
    /// A sample file is not JSON of the expected shape.
    #[error("sample file {path} is not a JSON {expected}")]
    Parse {
        /// The file.
        path: String,
        /// What it should have held.
        expected: &'static str,
        /// The parser's complaint, with line and column.
        #[source]
        source: serde_json::Error,
    },
    /// A sample has no `metadata.name`, which is its key.
    #[error("sample file {path} holds a {kind} without a metadata.name")]
    MissingName {
        /// The file.
        path: String,
        /// The kind it holds.
        kind: SampleKind,
    },
    /// Two files hold samples of one kind with the same name.
    #[error("{first} and {second} both hold the {kind} {name:?}")]
    Duplicate {
        /// The kind both hold.
        kind: SampleKind,
        /// The name both use.
        name: String,
        /// The file read first.
        first: String,
        /// The file read second.
        second: String,
    },
}

/// The samples of one flavour and architecture, by `metadata.name`.
///
/// Each object is as the file holds it, except that `apiVersion` and `kind`
/// are forced (as upstream forces `apiVersion`) and the fields the API server
/// owns (`metadata.namespace`, `resourceVersion`, `uid`, `creationTimestamp`)
/// are cleared, so an object can be created in any namespace.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Inventory {
    /// The ImageStreams, by name.
    pub image_streams: BTreeMap<String, ImageStream>,
    /// The Templates, by name.
    pub templates: BTreeMap<String, Template>,
}

/// The shipped file format: each kind's objects sorted by name.
#[derive(Serialize, Deserialize)]
struct Shipped<I, T> {
    imagestreams: Vec<I>,
    templates: Vec<T>,
}

impl Inventory {
    /// Reads an inventory from `(path, bytes)` pairs, the paths relative and
    /// `/`-separated. A file whose parent directory is `imagestreams` holds
    /// one ImageStream, one under `templates` one Template, both as JSON;
    /// every other file is ignored, as upstream ignores it.
    pub fn from_files<P: AsRef<str>>(
        files: impl IntoIterator<Item = (P, Vec<u8>)>,
    ) -> Result<Inventory, InventoryError> {
        let mut builder = Builder::default();
        for (path, bytes) in files {
            let path = path.as_ref();
            let Some(kind) = SampleKind::of_path(path) else {
                continue;
            };
            if bytes.len() > MAX_SAMPLE_FILE_BYTES {
                return Err(InventoryError::TooLarge {
                    path: path.to_owned(),
                    size: u64::try_from(bytes.len()).unwrap_or(u64::MAX),
                    limit: MAX_SAMPLE_FILE_BYTES,
                });
            }
            let parse_error = |source| InventoryError::Parse {
                path: path.to_owned(),
                expected: kind.as_str(),
                source,
            };
            match kind {
                SampleKind::ImageStream => {
                    let stream = serde_json::from_slice(&bytes).map_err(parse_error)?;
                    builder.add_image_stream(path, stream)?;
                }
                SampleKind::Template => {
                    let template = serde_json::from_slice(&bytes).map_err(parse_error)?;
                    builder.add_template(path, template)?;
                }
            }
        }
        Ok(builder.inventory)
    }

    /// The inventory built into this binary for `flavour` and an
    /// architecture as Config `spec.architectures` spells it (`x86_64` and
    /// `amd64` are one, as are `arm64` and `aarch64`); `None` when that
    /// flavour ships nothing for the architecture (OKD ships only x86_64) or
    /// the architecture is unknown. It is parsed on each call.
    pub fn embedded(
        flavour: Flavour,
        architecture: &str,
    ) -> Result<Option<Inventory>, InventoryError> {
        let Some(dir) = architecture_dir(architecture) else {
            return Ok(None);
        };
        shipped_text(flavour, dir)
            .map(|text| Inventory::from_shipped_json(&format!("{flavour}-{dir}.json"), text))
            .transpose()
    }

    /// Reads the shipped format, `{"imagestreams": [...], "templates": [...]}`;
    /// `origin` names the file in errors.
    fn from_shipped_json(origin: &str, text: &str) -> Result<Inventory, InventoryError> {
        let shipped: Shipped<ImageStream, Template> =
            serde_json::from_str(text).map_err(|source| InventoryError::Parse {
                path: origin.to_owned(),
                expected: r#"inventory ({"imagestreams": [...], "templates": [...]})"#,
                source,
            })?;
        let mut builder = Builder::default();
        for (index, stream) in shipped.imagestreams.into_iter().enumerate() {
            builder.add_image_stream(&format!("{origin} imagestreams[{index}]"), stream)?;
        }
        for (index, template) in shipped.templates.into_iter().enumerate() {
            builder.add_template(&format!("{origin} templates[{index}]"), template)?;
        }
        Ok(builder.inventory)
    }

    /// The inventory in the shipped format: `{"imagestreams": [...],
    /// "templates": [...]}`, each list sorted by name, pretty-printed with
    /// two-space indents and a final newline so a refresh diffs line by line.
    pub fn to_shipped_json(&self) -> Result<String, serde_json::Error> {
        let shipped = Shipped {
            imagestreams: self.image_streams.values().collect::<Vec<_>>(),
            templates: self.templates.values().collect::<Vec<_>>(),
        };
        let mut text = serde_json::to_string_pretty(&shipped)?;
        text.push('\n');
        Ok(text)
    }

    /// The data of upstream's `imagestreamtag-to-image` ConfigMap: for every
    /// spec tag that points at a `DockerImage`, `<stream>_<tag>` to the pull
    /// spec as the inventory holds it (before any samplesRegistry rewrite).
    /// Streams whose names start with `jenkins` are left out, as upstream
    /// leaves them out.
    pub fn tag_to_image(&self) -> BTreeMap<String, String> {
        self.image_streams
            .iter()
            .filter(|(name, _)| !name.starts_with(TAG_TO_IMAGE_EXCLUDED_PREFIX))
            .flat_map(|(name, stream)| {
                stream.spec_tags().into_iter().filter_map(move |tag| {
                    // Upstream dereferences a missing `from` and panics; no
                    // shipped tag lacks one, and such a tag has no image.
                    let from = tag.from?;
                    (from.kind == "DockerImage")
                        .then(|| (format!("{name}_{}", tag.name), from.name))
                })
            })
            .collect()
    }
}

/// Collects samples, checking names and limits; remembers where each came
/// from so a duplicate names both files.
#[derive(Default)]
struct Builder {
    inventory: Inventory,
    image_stream_paths: BTreeMap<String, String>,
    template_paths: BTreeMap<String, String>,
}

impl Builder {
    fn add_image_stream(
        &mut self,
        path: &str,
        mut stream: ImageStream,
    ) -> Result<(), InventoryError> {
        IMAGE_STREAM_API_VERSION.clone_into(&mut stream.api_version);
        SampleKind::ImageStream
            .as_str()
            .clone_into(&mut stream.kind);
        clear_server_fields(&mut stream.metadata);
        let name = checked_name(
            path,
            SampleKind::ImageStream,
            &stream.metadata,
            &self.image_stream_paths,
        )?;
        self.image_stream_paths
            .insert(name.clone(), path.to_owned());
        self.inventory.image_streams.insert(name, stream);
        Ok(())
    }

    fn add_template(&mut self, path: &str, mut template: Template) -> Result<(), InventoryError> {
        TEMPLATE_API_VERSION.clone_into(&mut template.api_version);
        SampleKind::Template.as_str().clone_into(&mut template.kind);
        clear_server_fields(&mut template.metadata);
        let name = checked_name(
            path,
            SampleKind::Template,
            &template.metadata,
            &self.template_paths,
        )?;
        self.template_paths.insert(name.clone(), path.to_owned());
        self.inventory.templates.insert(name, template);
        Ok(())
    }
}

/// Clears what the API server sets, so the object can be created anywhere.
fn clear_server_fields(metadata: &mut ObjectMeta) {
    metadata.namespace = None;
    metadata.resource_version = None;
    metadata.uid = None;
    metadata.creation_timestamp = None;
}

/// The sample's name, once it is known to be present, new, and within
/// [`MAX_SAMPLES`] of its kind.
fn checked_name(
    path: &str,
    kind: SampleKind,
    metadata: &ObjectMeta,
    seen: &BTreeMap<String, String>,
) -> Result<String, InventoryError> {
    let name = metadata
        .name
        .as_deref()
        .filter(|name| !name.is_empty())
        .ok_or_else(|| InventoryError::MissingName {
            path: path.to_owned(),
            kind,
        })?;
    if let Some(first) = seen.get(name) {
        return Err(InventoryError::Duplicate {
            kind,
            name: name.to_owned(),
            first: first.clone(),
            second: path.to_owned(),
        });
    }
    if seen.len() >= MAX_SAMPLES {
        return Err(InventoryError::TooMany {
            path: path.to_owned(),
            kind,
            count: seen.len() + 1,
            limit: MAX_SAMPLES,
        });
    }
    Ok(name.to_owned())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;

    /// A sample file as `from_files` takes it.
    type SampleFile = (String, Vec<u8>);

    fn file(path: &str, object: &Value) -> SampleFile {
        (path.to_owned(), serde_json::to_vec(object).unwrap())
    }

    fn stream_named(name: &str) -> Value {
        json!({"apiVersion": "image.openshift.io/v1", "kind": "ImageStream", "metadata": {"name": name}})
    }

    fn template_named(name: &str) -> Value {
        json!({"apiVersion": "template.openshift.io/v1", "kind": "Template", "metadata": {"name": name}})
    }

    #[test]
    fn the_parent_directory_decides_the_kind() {
        let cases = [
            (
                "fixture-ruby/imagestreams/ruby.json",
                Some(SampleKind::ImageStream),
            ),
            (
                "a/b/fixture-ruby/imagestreams/ruby.json",
                Some(SampleKind::ImageStream),
            ),
            ("imagestreams/ruby.json", Some(SampleKind::ImageStream)),
            (
                "fixture-ruby/templates/ruby.json",
                Some(SampleKind::Template),
            ),
            // No extension filter, as upstream has none.
            ("fixture-ruby/templates/ruby", Some(SampleKind::Template)),
            ("fixture-ruby/README.md", None),
            ("fixture-ruby/imagestreams/nested/ruby.json", None),
            ("fixture-ruby/old-imagestreams/ruby.json", None),
            ("fixture-ruby/imagestreams", None),
            ("imagestreams", None),
            ("", None),
        ];
        for (path, expected) in cases {
            assert_eq!(SampleKind::of_path(path), expected, "{path}");
        }
    }

    #[test]
    fn files_are_sorted_into_streams_and_templates_and_others_ignored() {
        let inventory = Inventory::from_files([
            file(
                "fixture-ruby/imagestreams/ruby.json",
                &stream_named("fixture-ruby"),
            ),
            file(
                "fixture-ruby/templates/app.json",
                &template_named("fixture-ruby-app"),
            ),
            // The same name in the other kind is no clash.
            file(
                "fixture-ruby/templates/same.json",
                &template_named("fixture-ruby"),
            ),
            ("fixture-ruby/README.md".to_owned(), b"not json".to_vec()),
            (
                "fixture-ruby/imagestreams/nested/x.json".to_owned(),
                b"not json".to_vec(),
            ),
        ])
        .unwrap();
        assert_eq!(
            inventory.image_streams.keys().collect::<Vec<_>>(),
            ["fixture-ruby"]
        );
        assert_eq!(
            inventory.templates.keys().collect::<Vec<_>>(),
            ["fixture-ruby", "fixture-ruby-app"]
        );
        assert_eq!(
            Inventory::from_files(Vec::<(&str, Vec<u8>)>::new()).unwrap(),
            Inventory::default()
        );
    }

    #[test]
    fn api_version_and_kind_are_forced_and_server_fields_cleared() {
        let server_fields = json!({
            "name": "fixture-ruby", "namespace": "fixture-ns", "resourceVersion": "7",
            "uid": "fixture-uid", "creationTimestamp": "2024-01-01T00:00:00Z",
            "labels": {"fixture": "label"}, "annotations": {"fixture": "annotation"},
        });
        let inventory = Inventory::from_files([
            file(
                "s/imagestreams/a.json",
                &json!({"apiVersion": "v1", "kind": "Wrong", "metadata": server_fields,
                        "spec": {"tags": []}, "status": {"dockerImageRepository": ""}}),
            ),
            file(
                "s/templates/a.json",
                &json!({"metadata": server_fields, "objects": [], "parameters": [{"name": "P"}]}),
            ),
        ])
        .unwrap();
        let expected_metadata = json!({
            "name": "fixture-ruby",
            "labels": {"fixture": "label"}, "annotations": {"fixture": "annotation"},
        });
        let stream = serde_json::to_value(&inventory.image_streams["fixture-ruby"]).unwrap();
        assert_eq!(
            stream,
            json!({"apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
                   "metadata": expected_metadata, "spec": {"tags": []},
                   "status": {"dockerImageRepository": ""}})
        );
        let template = serde_json::to_value(&inventory.templates["fixture-ruby"]).unwrap();
        assert_eq!(
            template,
            json!({"apiVersion": "template.openshift.io/v1", "kind": "Template",
                   "metadata": expected_metadata, "objects": [], "parameters": [{"name": "P"}]})
        );
    }

    #[test]
    fn broken_inventories_are_refused_naming_the_files() {
        let too_large = (
            "big/imagestreams/big.json".to_owned(),
            vec![b' '; MAX_SAMPLE_FILE_BYTES + 1],
        );
        let cases: Vec<(Vec<SampleFile>, &[&str])> = vec![
            (
                vec![
                    file("one/imagestreams/a.json", &stream_named("fixture-ruby")),
                    file("two/imagestreams/b.json", &stream_named("fixture-ruby")),
                ],
                &[
                    "one/imagestreams/a.json",
                    "two/imagestreams/b.json",
                    "ImageStream",
                    "\"fixture-ruby\"",
                ],
            ),
            (
                vec![
                    file("one/templates/a.json", &template_named("fixture-app")),
                    file("two/templates/b.json", &template_named("fixture-app")),
                ],
                &["one/templates/a.json", "two/templates/b.json", "Template"],
            ),
            (
                vec![file("s/imagestreams/a.json", &json!({"metadata": {}}))],
                &["s/imagestreams/a.json", "metadata.name"],
            ),
            (
                vec![file(
                    "s/templates/a.json",
                    &json!({"metadata": {"name": ""}}),
                )],
                &["s/templates/a.json", "metadata.name"],
            ),
            (
                vec![(
                    "s/imagestreams/a.json".to_owned(),
                    b"{\"metadata\": ".to_vec(),
                )],
                &["s/imagestreams/a.json", "not a JSON ImageStream"],
            ),
            (
                vec![(
                    "s/templates/a.yaml".to_owned(),
                    b"metadata: {name: a}".to_vec(),
                )],
                &["s/templates/a.yaml", "not a JSON Template"],
            ),
            (
                vec![file("s/templates/a.json", &json!(["fixture"]))],
                &["s/templates/a.json", "not a JSON Template"],
            ),
            (
                vec![too_large],
                &["big/imagestreams/big.json", "over the limit of 1048576"],
            ),
        ];
        for (files, expected) in cases {
            let error = Inventory::from_files(files).unwrap_err().to_string();
            for part in expected {
                assert!(error.contains(part), "{part:?} not in {error:?}");
            }
        }
    }

    #[test]
    fn a_file_of_exactly_the_size_limit_is_read() {
        let mut bytes = serde_json::to_vec(&stream_named("fixture-ruby")).unwrap();
        bytes.resize(MAX_SAMPLE_FILE_BYTES, b' ');
        let inventory = Inventory::from_files([("s/imagestreams/a.json", bytes)]).unwrap();
        assert_eq!(inventory.image_streams.len(), 1);
    }

    #[test]
    fn each_kind_holds_at_most_max_samples() {
        let files = |kind_dir: &str, count: usize| {
            (0..count)
                .map(|i| {
                    let name = format!("fixture-{i:05}");
                    let object = if kind_dir == "imagestreams" {
                        stream_named(&name)
                    } else {
                        template_named(&name)
                    };
                    file(&format!("s/{kind_dir}/{name}.json"), &object)
                })
                .collect::<Vec<_>>()
        };
        let full = Inventory::from_files(
            files("imagestreams", MAX_SAMPLES)
                .into_iter()
                .chain(files("templates", MAX_SAMPLES)),
        )
        .unwrap();
        assert_eq!(full.image_streams.len(), MAX_SAMPLES);
        assert_eq!(full.templates.len(), MAX_SAMPLES);

        for kind_dir in ["imagestreams", "templates"] {
            let error = Inventory::from_files(files(kind_dir, MAX_SAMPLES + 1)).unwrap_err();
            assert!(
                matches!(&error, InventoryError::TooMany { path, count, limit: MAX_SAMPLES, .. }
                    if path == &format!("s/{kind_dir}/fixture-04096.json") && *count == MAX_SAMPLES + 1),
                "{error}"
            );
        }
    }

    #[test]
    fn tag_to_image_maps_docker_image_tags_before_any_rewrite() {
        let ruby = json!({
            "apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
            "metadata": {"name": "fixture-ruby"},
            "spec": {"tags": [
                {"name": "3.3", "from": {"kind": "DockerImage", "name": "registry.example.com/fixture/ruby:3.3"}},
                {"name": "latest", "from": {"kind": "ImageStreamTag", "name": "3.3"}},
                {"name": "no-source"},
            ]},
        });
        let jenkins = json!({
            "metadata": {"name": "jenkins-fixture"},
            "spec": {"tags": [{"name": "2", "from": {"kind": "DockerImage", "name": "quay.example/jenkins:2"}}]},
        });
        let nginx = json!({
            "metadata": {"name": "fixture-nginx"},
            "spec": {"tags": [{"name": "1.24", "from": {"kind": "DockerImage", "name": "quay.example/a/nginx@sha256:1"}}]},
        });
        let inventory = Inventory::from_files([
            file("ruby/imagestreams/ruby.json", &ruby),
            file("jenkins/imagestreams/jenkins.json", &jenkins),
            file("nginx/imagestreams/nginx.json", &nginx),
        ])
        .unwrap();
        let expected: BTreeMap<String, String> = [
            ("fixture-nginx_1.24", "quay.example/a/nginx@sha256:1"),
            ("fixture-ruby_3.3", "registry.example.com/fixture/ruby:3.3"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(inventory.tag_to_image(), expected);
    }

    #[test]
    fn flavours_parse_and_print_as_their_flag_values() {
        for flavour in Flavour::ALL {
            assert_eq!(flavour.to_string().parse::<Flavour>().unwrap(), flavour);
        }
        assert_eq!("ocp".parse::<Flavour>().unwrap(), Flavour::Ocp);
        assert_eq!("okd".parse::<Flavour>().unwrap(), Flavour::Okd);
        let error = "OCP".parse::<Flavour>().unwrap_err().to_string();
        assert!(error.contains("\"OCP\""), "{error}");
    }

    #[test]
    fn architectures_map_to_upstream_directories() {
        let cases = [
            ("x86_64", Some("x86_64")),
            ("amd64", Some("x86_64")),
            ("arm64", Some("aarch64")),
            ("aarch64", Some("aarch64")),
            ("ppc64le", Some("ppc64le")),
            ("s390x", Some("s390x")),
            ("X86_64", None),
            ("riscv64", None),
            ("", None),
        ];
        for (architecture, expected) in cases {
            assert_eq!(architecture_dir(architecture), expected, "{architecture}");
        }
    }

    /// The counts upstream ships (cluster-samples-operator `assets/operator`);
    /// a refresh that changes them updates this table.
    const SHIPPED_COUNTS: [(Flavour, &str, usize, usize); 5] = [
        (Flavour::Ocp, "x86_64", 50, 50),
        (Flavour::Ocp, "aarch64", 27, 26),
        (Flavour::Ocp, "ppc64le", 40, 44),
        (Flavour::Ocp, "s390x", 40, 44),
        (Flavour::Okd, "x86_64", 26, 26),
    ];

    #[test]
    fn every_shipped_inventory_loads_with_upstream_counts() {
        for (flavour, architecture, streams, templates) in SHIPPED_COUNTS {
            let inventory = Inventory::embedded(flavour, architecture).unwrap().unwrap();
            assert_eq!(
                (inventory.image_streams.len(), inventory.templates.len()),
                (streams, templates),
                "{flavour}-{architecture}"
            );
            for stream in inventory.image_streams.values() {
                assert_eq!(stream.api_version, IMAGE_STREAM_API_VERSION);
                assert_eq!(stream.kind, "ImageStream");
                assert_eq!(stream.metadata.namespace, None);
            }
            for template in inventory.templates.values() {
                assert_eq!(template.api_version, TEMPLATE_API_VERSION);
                assert_eq!(template.kind, "Template");
                assert_eq!(template.metadata.namespace, None);
            }
        }
        assert_eq!(
            SHIPPED_COUNTS.map(|(f, a, _, _)| (f, a)),
            SHIPPED_INVENTORIES,
            "every shipped inventory is counted"
        );
    }

    #[test]
    fn shipped_inventories_are_in_their_canonical_form() {
        // What `cargo xtask samples-inventory` writes; a hand edit that
        // breaks the sorting or layout fails here.
        for (flavour, dir) in SHIPPED_INVENTORIES {
            let text = shipped_text(flavour, dir).unwrap();
            let inventory = Inventory::from_shipped_json("fixture.json", text).unwrap();
            assert!(
                inventory.to_shipped_json().unwrap() == text,
                "{flavour}-{dir}.json is not as `cargo xtask samples-inventory` writes it"
            );
        }
    }

    #[test]
    fn architecture_spellings_select_the_same_data() {
        let x86 = Inventory::embedded(Flavour::Ocp, "x86_64").unwrap();
        assert!(x86.is_some());
        assert_eq!(Inventory::embedded(Flavour::Ocp, "amd64").unwrap(), x86);
        assert_eq!(
            Inventory::embedded(Flavour::Ocp, "arm64").unwrap(),
            Inventory::embedded(Flavour::Ocp, "aarch64").unwrap()
        );
        assert_ne!(
            Inventory::embedded(Flavour::Okd, "x86_64").unwrap(),
            x86,
            "okd ships its own samples"
        );
    }

    #[test]
    fn missing_data_is_none() {
        let cases = [
            (Flavour::Okd, "s390x"),
            (Flavour::Okd, "ppc64le"),
            (Flavour::Okd, "arm64"),
            (Flavour::Ocp, "riscv64"),
            (Flavour::Ocp, ""),
        ];
        for (flavour, architecture) in cases {
            assert_eq!(
                Inventory::embedded(flavour, architecture).unwrap(),
                None,
                "{flavour} {architecture}"
            );
        }
    }

    #[test]
    fn the_shipped_format_round_trips_and_refuses_duplicates() {
        let inventory = Inventory::from_files([
            file("s/imagestreams/b.json", &stream_named("fixture-b")),
            file("s/imagestreams/a.json", &stream_named("fixture-a")),
            file("s/templates/a.json", &template_named("fixture-t")),
        ])
        .unwrap();
        let text = inventory.to_shipped_json().unwrap();
        assert!(
            text.starts_with("{\n  \"imagestreams\": [\n    {\n"),
            "{text}"
        );
        assert!(text.ends_with("}\n"));
        let a = text.find("\"fixture-a\"").unwrap();
        let b = text.find("\"fixture-b\"").unwrap();
        assert!(a < b, "sorted by name");
        assert_eq!(
            Inventory::from_shipped_json("fixture.json", &text).unwrap(),
            inventory
        );

        let twice =
            json!({"imagestreams": [stream_named("x"), stream_named("x")], "templates": []});
        let error = Inventory::from_shipped_json("fixture.json", &twice.to_string())
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("fixture.json imagestreams[0]")
                && error.contains("fixture.json imagestreams[1]"),
            "{error}"
        );
        let error = Inventory::from_shipped_json("fixture.json", "[]")
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("sample file fixture.json is not a JSON inventory"),
            "{error}"
        );
    }

    /// One ImageStream and one Template per name.
    fn files_named(names: &std::collections::BTreeSet<String>) -> Vec<SampleFile> {
        names
            .iter()
            .flat_map(|name| {
                [
                    file(&format!("{name}/imagestreams/is.json"), &stream_named(name)),
                    file(&format!("{name}/templates/t.json"), &template_named(name)),
                ]
            })
            .collect()
    }

    proptest! {
        #[test]
        fn the_order_of_files_does_not_matter(
            (names, shuffled) in proptest::collection::btree_set("[a-z]{1,6}", 0..8)
                .prop_flat_map(|names| {
                    let files = files_named(&names);
                    (Just(names), Just(files).prop_shuffle())
                }),
        ) {
            let inventory = Inventory::from_files(files_named(&names)).unwrap();
            prop_assert_eq!(inventory.image_streams.len(), names.len());
            prop_assert_eq!(inventory.templates.len(), names.len());
            prop_assert_eq!(Inventory::from_files(shuffled).unwrap(), inventory);
        }
    }
}
