//! Manifests and descriptors: the OCI image manifest and index, and Docker's
//! v2 schema 2 manifest and manifest list (same shapes, other media types).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::digest::Digest;

/// OCI image manifest.
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// OCI image index.
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
/// Docker v2 schema 2 manifest.
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
/// Docker manifest list.
pub const DOCKER_MANIFEST_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
/// OCI image config.
pub const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
/// Docker image config.
pub const DOCKER_CONFIG: &str = "application/vnd.docker.container.image.v1+json";
/// OCI gzip layer.
pub const OCI_LAYER_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
/// OCI zstd layer.
pub const OCI_LAYER_ZSTD: &str = "application/vnd.oci.image.layer.v1.tar+zstd";
/// OCI uncompressed layer.
pub const OCI_LAYER_TAR: &str = "application/vnd.oci.image.layer.v1.tar";
/// Docker gzip layer.
pub const DOCKER_LAYER_GZIP: &str = "application/vnd.docker.image.rootfs.diff.tar.gzip";

/// Every manifest media type this client asks for, as an `Accept` value.
pub const ACCEPT_MANIFESTS: &str = "application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json";

/// Longest manifest this client reads.
pub const MAX_MANIFEST_BYTES: usize = 4 * 1024 * 1024;

/// A reference to content by digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// The content's media type.
    pub media_type: String,
    /// Its digest.
    pub digest: Digest,
    /// Its size in bytes.
    pub size: u64,
    /// The platform, in an index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<Platform>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// An image's platform.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Platform {
    /// CPU architecture (`amd64`, `arm64`).
    pub architecture: String,
    /// Operating system (`linux`).
    pub os: String,
    /// CPU variant (`v8`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
}

impl Platform {
    /// `linux/amd64`, the default.
    pub fn linux_amd64() -> Self {
        Self {
            architecture: "amd64".into(),
            os: "linux".into(),
            variant: None,
        }
    }

    /// Parses `os/arch[/variant]`.
    pub fn parse(text: &str) -> Option<Self> {
        let mut parts = text.split('/');
        let os = parts.next().filter(|s| !s.is_empty())?;
        let architecture = parts.next().filter(|s| !s.is_empty())?;
        let variant = parts.next().map(str::to_owned);
        if parts.next().is_some() {
            return None;
        }
        Some(Self {
            architecture: architecture.into(),
            os: os.into(),
            variant,
        })
    }

    fn matches(&self, other: &Platform) -> bool {
        self.os == other.os
            && self.architecture == other.architecture
            && (self.variant.is_none() || self.variant == other.variant)
    }
}

/// An image manifest (OCI or Docker schema 2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageManifest {
    /// Always 2.
    pub schema_version: u32,
    /// The media type, when written in the manifest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// The config blob.
    pub config: Descriptor,
    /// The layers, base first.
    pub layers: Vec<Descriptor>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// An index of manifests (OCI index or Docker manifest list).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageIndex {
    /// Always 2.
    pub schema_version: u32,
    /// The media type, when written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// The manifests.
    pub manifests: Vec<Descriptor>,
}

impl ImageIndex {
    /// The manifest for `platform`, if any.
    pub fn select(&self, platform: &Platform) -> Option<&Descriptor> {
        self.manifests
            .iter()
            .find(|d| d.platform.as_ref().is_some_and(|p| platform.matches(p)))
    }
}

/// A manifest as fetched: an image or an index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Manifest {
    /// One image.
    Image(ImageManifest),
    /// Several, by platform.
    Index(ImageIndex),
}

/// Why a manifest could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// Larger than [`MAX_MANIFEST_BYTES`].
    #[error("manifest is {size} bytes, more than the limit of {MAX_MANIFEST_BYTES}")]
    TooLarge {
        /// Its size.
        size: usize,
    },
    /// A media type this client does not read (schema 1, artifacts…).
    #[error("unsupported manifest media type {0:?}")]
    UnsupportedMediaType(String),
    /// Malformed JSON.
    #[error("malformed manifest: {0}")]
    Json(#[from] serde_json::Error),
    /// schemaVersion is not 2.
    #[error("unsupported manifest schemaVersion {0}")]
    SchemaVersion(u32),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Probe {
    #[serde(default)]
    media_type: Option<String>,
    #[serde(default)]
    manifests: Option<serde::de::IgnoredAny>,
}

impl Manifest {
    /// Reads a manifest; `content_type` is the response's Content-Type, used
    /// when the document names no media type.
    pub fn parse(bytes: &[u8], content_type: Option<&str>) -> Result<Self, ManifestError> {
        if bytes.len() > MAX_MANIFEST_BYTES {
            return Err(ManifestError::TooLarge { size: bytes.len() });
        }
        let probe: Probe = serde_json::from_slice(bytes)?;
        let media_type = probe
            .media_type
            .clone()
            .or_else(|| {
                content_type
                    .map(|c| c.split(';').next().unwrap_or_default().trim().to_owned())
                    .filter(|c| c.starts_with("application/vnd."))
            })
            .unwrap_or_else(|| {
                if probe.manifests.is_some() {
                    OCI_INDEX.to_owned()
                } else {
                    OCI_MANIFEST.to_owned()
                }
            });
        let manifest = match media_type.as_str() {
            OCI_INDEX | DOCKER_MANIFEST_LIST => Self::Index(serde_json::from_slice(bytes)?),
            OCI_MANIFEST | DOCKER_MANIFEST => Self::Image(serde_json::from_slice(bytes)?),
            other => return Err(ManifestError::UnsupportedMediaType(other.to_owned())),
        };
        let version = match &manifest {
            Self::Image(m) => m.schema_version,
            Self::Index(i) => i.schema_version,
        };
        if version != 2 {
            return Err(ManifestError::SchemaVersion(version));
        }
        Ok(manifest)
    }
}

/// The parts of an image config that tools read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageConfig {
    /// CPU architecture.
    #[serde(default)]
    pub architecture: String,
    /// Operating system.
    #[serde(default)]
    pub os: String,
    /// The run configuration, where the labels are.
    #[serde(default)]
    pub config: RunConfig,
    /// The layers' uncompressed digests.
    #[serde(default)]
    pub rootfs: RootFs,
}

/// The run configuration of an image config.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunConfig {
    /// The user the process runs as (`uid[:gid]` or a name).
    #[serde(rename = "User", default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Environment variables, `KEY=value`.
    #[serde(rename = "Env", default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<String>>,
    /// The command the container runs.
    #[serde(
        rename = "Entrypoint",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub entrypoint: Option<Vec<String>>,
    /// Default arguments to the entrypoint.
    #[serde(rename = "Cmd", default, skip_serializing_if = "Option::is_none")]
    pub cmd: Option<Vec<String>>,
    /// The working directory.
    #[serde(
        rename = "WorkingDir",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub working_dir: Option<String>,
    /// Image labels.
    #[serde(rename = "Labels", default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
}

/// The root filesystem of an image config.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RootFs {
    /// Always `layers`.
    #[serde(rename = "type", default)]
    pub type_: String,
    /// Digests of the uncompressed layers.
    #[serde(default)]
    pub diff_ids: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    #[test]
    fn reads_each_manifest_kind() {
        let image = format!(
            r#"{{"schemaVersion":2,"mediaType":"{DOCKER_MANIFEST}","config":{{"mediaType":"{DOCKER_CONFIG}","digest":"{D}","size":1}},"layers":[{{"mediaType":"{DOCKER_LAYER_GZIP}","digest":"{D}","size":2}}]}}"#
        );
        assert!(
            matches!(Manifest::parse(image.as_bytes(), None).unwrap(), Manifest::Image(m) if m.layers.len() == 1)
        );
        let untyped = format!(
            r#"{{"schemaVersion":2,"config":{{"mediaType":"{OCI_CONFIG}","digest":"{D}","size":1}},"layers":[]}}"#
        );
        assert!(matches!(
            Manifest::parse(untyped.as_bytes(), Some(OCI_MANIFEST)).unwrap(),
            Manifest::Image(_)
        ));
        let index = format!(
            r#"{{"schemaVersion":2,"mediaType":"{OCI_INDEX}","manifests":[
              {{"mediaType":"{OCI_MANIFEST}","digest":"{D}","size":3,"platform":{{"architecture":"arm64","os":"linux","variant":"v8"}}}},
              {{"mediaType":"{OCI_MANIFEST}","digest":"{D}","size":4,"platform":{{"architecture":"amd64","os":"linux"}}}}]}}"#
        );
        let Manifest::Index(index) = Manifest::parse(index.as_bytes(), None).unwrap() else {
            panic!("not an index")
        };
        assert_eq!(index.select(&Platform::linux_amd64()).unwrap().size, 4);
        assert_eq!(
            index
                .select(&Platform::parse("linux/arm64").unwrap())
                .unwrap()
                .size,
            3
        );
        assert!(
            index
                .select(&Platform::parse("linux/s390x").unwrap())
                .is_none()
        );
        let list =
            format!(r#"{{"schemaVersion":2,"mediaType":"{DOCKER_MANIFEST_LIST}","manifests":[]}}"#);
        assert!(matches!(
            Manifest::parse(list.as_bytes(), None).unwrap(),
            Manifest::Index(_)
        ));
    }

    #[test]
    fn refuses_malformed_manifests() {
        let huge = vec![b' '; MAX_MANIFEST_BYTES + 1];
        assert!(matches!(
            Manifest::parse(&huge, None),
            Err(ManifestError::TooLarge { .. })
        ));
        assert!(matches!(
            Manifest::parse(br#"{"schemaVersion":1,"mediaType":"application/vnd.docker.distribution.manifest.v1+json"}"#, None),
            Err(ManifestError::UnsupportedMediaType(_))
        ));
        assert!(Manifest::parse(br#"{"schemaVersion":2,"config":{}}"#, None).is_err());
        assert!(Manifest::parse(b"not json", None).is_err());
        let bad_digest = r#"{"schemaVersion":2,"config":{"mediaType":"x","digest":"sha256:zz","size":1},"layers":[]}"#;
        assert!(Manifest::parse(bad_digest.as_bytes(), None).is_err());
        let v3 = format!(
            r#"{{"schemaVersion":3,"config":{{"mediaType":"x","digest":"{D}","size":1}},"layers":[]}}"#
        );
        assert!(matches!(
            Manifest::parse(v3.as_bytes(), None),
            Err(ManifestError::SchemaVersion(3))
        ));
        for bad in ["", "linux", "linux/", "/amd64", "a/b/c/d"] {
            assert!(Platform::parse(bad).is_none(), "{bad}");
        }
    }
}
