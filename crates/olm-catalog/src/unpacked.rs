//! The stored form of an unpacked bundle: what bundle-unpacker writes into a
//! ConfigMap after pulling a bundle image, and what catalog-operator reads to
//! build InstallPlan steps. Both sides use this module, so the format has one
//! definition.
//!
//! A ConfigMap named [`config_map_name`] (the SHA-256 of the bundle image
//! reference, as upstream names its unpack objects) in the CatalogSource's
//! namespace carries:
//!
//! - labels `olm.managed=true` and `operatorframework.io/bundle-unpack-ref`
//!   (its own name): readers watch the label, so a ConfigMap without it is
//!   never seen;
//! - annotation [`SOURCE_IMAGE`] (`olm.sourceImage`): the image reference;
//! - annotation [`CONTENT_ENCODING`] (`olm.contentEncoding`): `gzip+json`;
//! - the bundle's `metadata/annotations.yaml` entries as annotations
//!   (`operators.operatorframework.io.bundle.*`), as upstream's writer does;
//! - `binaryData[CONTENT_KEY]`: gzip of the JSON [`UnpackedBundle`] (the
//!   CSV name and every manifest as JSON, the CSV included);
//!
//! or, when unpacking failed, annotations [`FAILURE_REASON`] and
//! [`FAILURE_MESSAGE`] and no content.
//!
//! Compressed, a bundle with large CRDs stays well below the 1 MiB a
//! ConfigMap may hold; [`MAX_STORED_BYTES`] refuses what would not fit.

use std::{collections::BTreeMap, io::Read, io::Write};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Annotation: the bundle image the content came from.
pub const SOURCE_IMAGE: &str = "olm.sourceImage";
/// Annotation: how `binaryData` is encoded.
pub const CONTENT_ENCODING: &str = "olm.contentEncoding";
/// The only encoding written and read.
pub const ENCODING: &str = "gzip+json";
/// Annotation: the image digest the content was pulled at.
pub const IMAGE_DIGEST: &str = "olm.imageDigest";
/// Annotation: why unpacking failed (a CamelCase reason).
pub const FAILURE_REASON: &str = "olm.unpackFailureReason";
/// Annotation: what went wrong, for people.
pub const FAILURE_MESSAGE: &str = "olm.unpackFailureMessage";
/// The `binaryData` key holding the content.
pub const CONTENT_KEY: &str = "bundle.json.gz";
/// The most compressed bytes stored: a ConfigMap holds at most 1 MiB, with
/// room left for metadata.
pub const MAX_STORED_BYTES: usize = 900 * 1024;
/// The most bytes a stored content may inflate to when read back.
pub const MAX_CONTENT_BYTES: u64 = 64 * 1024 * 1024;

/// A bundle's content as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnpackedBundle {
    /// The CSV's name.
    pub csv_name: String,
    /// Every manifest as JSON, the CSV included, in bundle order.
    pub objects: Vec<String>,
    /// The entries of `metadata/annotations.yaml`.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// Why stored content cannot be written or read.
#[derive(Debug, thiserror::Error)]
pub enum UnpackedError {
    /// The compressed content is larger than [`MAX_STORED_BYTES`].
    #[error(
        "the unpacked bundle is {size} bytes compressed; at most {MAX_STORED_BYTES} fit in a ConfigMap"
    )]
    TooLarge {
        /// The compressed size.
        size: usize,
    },
    /// The stored content uses another encoding.
    #[error("unknown content encoding {0:?} (expected {ENCODING:?})")]
    Encoding(String),
    /// No content key.
    #[error("no {CONTENT_KEY} in the ConfigMap")]
    Missing,
    /// The content inflates to more than [`MAX_CONTENT_BYTES`].
    #[error("the stored bundle inflates to more than {MAX_CONTENT_BYTES} bytes")]
    Bomb,
    /// The content is not gzip of the expected JSON.
    #[error("the stored bundle is corrupt: {0}")]
    Corrupt(String),
}

/// The name of the ConfigMap of a bundle image: the hex SHA-256 of the
/// reference, cut to 63 characters (a valid object name and label value).
pub fn config_map_name(bundle_image: &str) -> String {
    let digest = Sha256::digest(bundle_image.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    hex[..63].to_owned()
}

/// Encodes content for `binaryData[CONTENT_KEY]`.
pub fn encode(bundle: &UnpackedBundle) -> Result<Vec<u8>, UnpackedError> {
    let json = serde_json::to_vec(bundle).map_err(|e| UnpackedError::Corrupt(e.to_string()))?;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder
        .write_all(&json)
        .and_then(|()| encoder.finish())
        .map_err(|e| UnpackedError::Corrupt(e.to_string()))
        .and_then(|bytes| {
            if bytes.len() > MAX_STORED_BYTES {
                Err(UnpackedError::TooLarge { size: bytes.len() })
            } else {
                Ok(bytes)
            }
        })
}

/// Decodes stored content, given the ConfigMap's annotations and binary data.
pub fn decode(
    annotations: &BTreeMap<String, String>,
    binary_data: &BTreeMap<String, Vec<u8>>,
) -> Result<UnpackedBundle, UnpackedError> {
    match annotations.get(CONTENT_ENCODING) {
        Some(encoding) if encoding == ENCODING => {}
        Some(other) => return Err(UnpackedError::Encoding(other.clone())),
        None => return Err(UnpackedError::Encoding(String::new())),
    }
    let bytes = binary_data.get(CONTENT_KEY).ok_or(UnpackedError::Missing)?;
    let mut json = Vec::new();
    flate2::read::GzDecoder::new(bytes.as_slice())
        .take(MAX_CONTENT_BYTES + 1)
        .read_to_end(&mut json)
        .map_err(|e| UnpackedError::Corrupt(e.to_string()))?;
    if json.len() as u64 > MAX_CONTENT_BYTES {
        return Err(UnpackedError::Bomb);
    }
    serde_json::from_slice(&json).map_err(|e| UnpackedError::Corrupt(e.to_string()))
}

/// A recorded failure, if the ConfigMap holds one.
pub fn failure(annotations: &BTreeMap<String, String>) -> Option<(String, String)> {
    let reason = annotations.get(FAILURE_REASON)?;
    let message = annotations
        .get(FAILURE_MESSAGE)
        .cloned()
        .unwrap_or_default();
    Some((reason.clone(), message))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle() -> UnpackedBundle {
        UnpackedBundle {
            csv_name: "etcd.v1".into(),
            objects: vec![
                r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}"#.into(),
            ],
            annotations: BTreeMap::from([(
                "operators.operatorframework.io.bundle.package.v1".into(),
                "etcd".into(),
            )]),
        }
    }

    fn stored(bytes: Vec<u8>) -> (BTreeMap<String, String>, BTreeMap<String, Vec<u8>>) {
        (
            BTreeMap::from([(CONTENT_ENCODING.to_owned(), ENCODING.to_owned())]),
            BTreeMap::from([(CONTENT_KEY.to_owned(), bytes)]),
        )
    }

    #[test]
    fn round_trips() {
        let (annotations, data) = stored(encode(&bundle()).unwrap());
        assert_eq!(decode(&annotations, &data).unwrap(), bundle());
    }

    #[test]
    fn names_are_63_hex_characters_and_stable() {
        let name = config_map_name("quay.io/example/etcd-bundle:v1");
        assert_eq!(name.len(), 63);
        assert!(
            name.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        assert_eq!(name, config_map_name("quay.io/example/etcd-bundle:v1"));
        assert_ne!(name, config_map_name("quay.io/example/etcd-bundle:v2"));
    }

    #[test]
    fn hostile_content_is_refused() {
        let (mut annotations, data) = stored(b"not gzip".to_vec());
        assert!(matches!(
            decode(&annotations, &data),
            Err(UnpackedError::Corrupt(_))
        ));
        annotations.insert(CONTENT_ENCODING.into(), "gzip+base64".into());
        assert!(matches!(
            decode(&annotations, &data),
            Err(UnpackedError::Encoding(_))
        ));
        let (annotations, _) = stored(Vec::new());
        assert!(matches!(
            decode(&annotations, &BTreeMap::new()),
            Err(UnpackedError::Missing)
        ));

        // A gzip bomb: 100 MiB of zeros compresses to ~100 KiB.
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let zeros = vec![0u8; 1024 * 1024];
        for _ in 0..100 {
            encoder.write_all(&zeros).unwrap();
        }
        let (annotations, data) = stored(encoder.finish().unwrap());
        assert!(matches!(
            decode(&annotations, &data),
            Err(UnpackedError::Bomb)
        ));
    }

    #[test]
    fn content_that_cannot_fit_is_refused() {
        // Incompressible content over the limit.
        let mut state = 0x1234_5678_u64;
        let noise: String = (0..2 * MAX_STORED_BYTES)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                char::from(b'a' + (state % 26) as u8)
            })
            .collect();
        let big = UnpackedBundle {
            csv_name: "big".into(),
            objects: vec![noise],
            annotations: BTreeMap::new(),
        };
        assert!(matches!(encode(&big), Err(UnpackedError::TooLarge { .. })));
    }

    #[test]
    fn failures_are_read_back() {
        let annotations = BTreeMap::from([
            (FAILURE_REASON.to_owned(), "ImagePullFailed".to_owned()),
            (FAILURE_MESSAGE.to_owned(), "manifest unknown".to_owned()),
        ]);
        assert_eq!(
            failure(&annotations),
            Some(("ImagePullFailed".into(), "manifest unknown".into()))
        );
        assert_eq!(failure(&BTreeMap::new()), None);
    }
}
