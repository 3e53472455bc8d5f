//! From pulled image files to the stored form catalog-operator reads
//! ([`olm_catalog::unpacked`]), and back from a stored ConfigMap to what it
//! says about the image.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::{
    ByteString,
    api::core::v1::ConfigMap,
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference},
};
use olm_api::labels;
use olm_catalog::{
    bundle::{LoadBundleOptions, RegistryBundle},
    unpacked::{self, UnpackedBundle},
};

use super::{
    failure::{self, Failure},
    retry::Stored,
};

/// Annotation (ours): how many unpacks of the image failed in a row, so that
/// retries back off across replicas and restarts.
pub const ATTEMPTS_ANNOTATION: &str = "olm.unpackAttempts";

/// The most bytes of `annotations.yaml` entries copied onto the ConfigMap
/// (all annotations of an object must stay under 256 KiB).
pub const MAX_COPIED_ANNOTATION_BYTES: usize = 64 * 1024;

/// The longest annotation key name part (after any prefix).
const MAX_KEY_NAME: usize = 63;
/// The longest annotation key prefix.
const MAX_KEY_PREFIX: usize = 253;

/// A bundle read from image files, ready to store.
#[derive(Debug, Clone)]
pub struct Content {
    /// What is stored.
    pub bundle: UnpackedBundle,
    /// Its encoding (gzip of JSON), within [`unpacked::MAX_STORED_BYTES`].
    pub encoded: Vec<u8>,
    /// What reading tolerated (upstream tolerates it too).
    pub warnings: Vec<String>,
}

/// Reads `files` (relative paths under `manifests/` and `metadata/`) as a
/// bundle, with the image's `labels` (annotations.yaml wins where they
/// disagree), and encodes it.
pub fn bundle_content(
    bundle_path: &str,
    files: &BTreeMap<String, Vec<u8>>,
    labels: &BTreeMap<String, String>,
) -> Result<Content, Failure> {
    let options = LoadBundleOptions {
        image_labels: Some(labels.clone()),
        ..LoadBundleOptions::new()
    };
    let bundle = RegistryBundle::load_files(
        files
            .iter()
            .map(|(path, bytes)| (path.as_str(), bytes.clone())),
        &options,
    )
    .map_err(|error| failure::invalid_bundle(bundle_path, &error))?;
    let stored = UnpackedBundle {
        csv_name: bundle.name.clone(),
        objects: bundle.objects.iter().map(|m| m.json.clone()).collect(),
        annotations: bundle.annotations.clone(),
    };
    let encoded = unpacked::encode(&stored).map_err(|error| match error {
        unpacked::UnpackedError::TooLarge { .. } => {
            Failure::new(failure::TOO_LARGE, format!("{bundle_path}: {error}"))
        }
        other => failure::invalid_bundle(bundle_path, &other),
    })?;
    Ok(Content {
        bundle: stored,
        encoded,
        warnings: bundle.warnings.iter().map(ToString::to_string).collect(),
    })
}

/// The CatalogSource that owns stored content (garbage-collected with it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// Its name.
    pub name: String,
    /// Its UID.
    pub uid: String,
}

fn base_config_map(
    namespace: &str,
    bundle_path: &str,
    owner: &Owner,
    annotations: BTreeMap<String, String>,
) -> ConfigMap {
    let name = unpacked::config_map_name(bundle_path);
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(namespace.to_owned()),
            labels: Some(BTreeMap::from([
                (labels::MANAGED.to_owned(), labels::MANAGED_VALUE.to_owned()),
                (labels::BUNDLE_UNPACK_REF.to_owned(), name),
            ])),
            annotations: Some(annotations),
            owner_references: Some(vec![OwnerReference {
                api_version: "operators.coreos.com/v1alpha1".to_owned(),
                kind: "CatalogSource".to_owned(),
                name: owner.name.clone(),
                uid: owner.uid.clone(),
                controller: Some(false),
                block_owner_deletion: Some(false),
            }]),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}

/// The ConfigMap holding `content` of `bundle_path` pulled at `digest`.
pub fn content_config_map(
    namespace: &str,
    bundle_path: &str,
    digest: &str,
    owner: &Owner,
    content: &Content,
) -> ConfigMap {
    let mut annotations = BTreeMap::new();
    let mut budget = MAX_COPIED_ANNOTATION_BYTES;
    for (key, value) in &content.bundle.annotations {
        let size = key.len() + value.len();
        if is_annotation_key(key) && size <= budget {
            budget -= size;
            annotations.insert(key.clone(), value.clone());
        }
    }
    annotations.insert(unpacked::SOURCE_IMAGE.to_owned(), bundle_path.to_owned());
    annotations.insert(
        unpacked::CONTENT_ENCODING.to_owned(),
        unpacked::ENCODING.to_owned(),
    );
    annotations.insert(unpacked::IMAGE_DIGEST.to_owned(), digest.to_owned());
    let mut config_map = base_config_map(namespace, bundle_path, owner, annotations);
    config_map.binary_data = Some(BTreeMap::from([(
        unpacked::CONTENT_KEY.to_owned(),
        ByteString(content.encoded.clone()),
    )]));
    config_map
}

/// The ConfigMap recording `failure` of attempt `attempt`.
pub fn failure_config_map(
    namespace: &str,
    bundle_path: &str,
    digest: Option<&str>,
    owner: &Owner,
    failure: &Failure,
    attempt: u32,
) -> ConfigMap {
    let mut annotations = BTreeMap::from([
        (unpacked::SOURCE_IMAGE.to_owned(), bundle_path.to_owned()),
        (
            unpacked::FAILURE_REASON.to_owned(),
            failure.reason.to_owned(),
        ),
        (
            unpacked::FAILURE_MESSAGE.to_owned(),
            failure.message.clone(),
        ),
        (ATTEMPTS_ANNOTATION.to_owned(), attempt.to_string()),
    ]);
    if let Some(digest) = digest {
        annotations.insert(unpacked::IMAGE_DIGEST.to_owned(), digest.to_owned());
    }
    base_config_map(namespace, bundle_path, owner, annotations)
}

/// What a ConfigMap of the image's name says about `bundle_path`.
pub fn stored_state(bundle_path: &str, config_map: Option<&ConfigMap>) -> Stored {
    let Some(config_map) = config_map else {
        return Stored::Nothing;
    };
    let empty = BTreeMap::new();
    let annotations = config_map.metadata.annotations.as_ref().unwrap_or(&empty);
    if annotations.get(unpacked::SOURCE_IMAGE).map(String::as_str) != Some(bundle_path) {
        return Stored::Foreign;
    }
    let has_content = config_map
        .binary_data
        .as_ref()
        .is_some_and(|d| d.contains_key(unpacked::CONTENT_KEY));
    if has_content && unpacked::failure(annotations).is_none() {
        return Stored::Content;
    }
    // A failure, or a record without content: retried like a failure.
    Stored::Failure {
        recorded_at: config_map
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(Timestamp::UNIX_EPOCH, |t| t.0),
        attempts: annotations
            .get(ATTEMPTS_ANNOTATION)
            .and_then(|a| a.parse().ok())
            .unwrap_or(1),
        uid: config_map.metadata.uid.clone().unwrap_or_default(),
        resource_version: config_map
            .metadata
            .resource_version
            .clone()
            .unwrap_or_default(),
    }
}

/// Whether `key` is a valid annotation key (`[prefix/]name`, the prefix a
/// DNS subdomain, the name up to 63 alphanumerics, `-`, `_`, `.`, starting
/// and ending alphanumeric).
pub fn is_annotation_key(key: &str) -> bool {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    let name_ok = !name.is_empty()
        && name.len() <= MAX_KEY_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric())
        && name
            .bytes()
            .last()
            .is_some_and(|b| b.is_ascii_alphanumeric());
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= MAX_KEY_PREFIX
            && p.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            })
    });
    name_ok && prefix_ok
}

/// The most compressed bytes of one bundle image layer pulled.
pub const MAX_LAYER_COMPRESSED_BYTES: u64 = 64 * 1024 * 1024;
/// The most bytes all layers of a bundle image may expand to.
pub const MAX_BUNDLE_UNCOMPRESSED_BYTES: u64 = 256 * 1024 * 1024;
/// The most tar entries one bundle image layer may hold.
pub const MAX_LAYER_ENTRIES: u64 = 10_000;
/// The most uncompressed bytes per compressed byte of one layer.
pub const MAX_COMPRESSION_RATIO: u64 = olm_oci::layer::DEFAULT_MAX_COMPRESSION_RATIO;

/// What is extracted from a bundle image (`manifests/` and `metadata/`
/// only) and within which limits.
pub fn extract_options() -> olm_oci::ExtractOptions {
    olm_oci::ExtractOptions {
        limits: olm_oci::ExtractLimits {
            max_compressed_bytes: MAX_LAYER_COMPRESSED_BYTES,
            max_uncompressed_bytes: MAX_BUNDLE_UNCOMPRESSED_BYTES,
            max_entries: MAX_LAYER_ENTRIES,
            max_compression_ratio: MAX_COMPRESSION_RATIO,
        },
        path_prefixes: vec![
            olm_catalog::bundle::MANIFESTS_DIR.to_owned(),
            olm_catalog::bundle::METADATA_DIR.to_owned(),
        ],
    }
}
