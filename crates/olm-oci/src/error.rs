//! The errors of the distribution client.

use crate::{auth::ChallengeError, digest::Digest, layer::ExtractError, manifest::ManifestError};

/// Why a registry operation failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request could not be sent or its body not read.
    #[error("request {url}: {source}")]
    Http {
        /// The URL.
        url: String,
        /// The failure.
        #[source]
        source: reqwest::Error,
    },
    /// The registry has no such manifest or blob.
    #[error("{reference}: not found ({url})")]
    NotFound {
        /// The image.
        reference: String,
        /// The URL.
        url: String,
    },
    /// Authentication failed or was refused.
    #[error("{url}: unauthorized: {message}")]
    Unauthorized {
        /// The URL.
        url: String,
        /// What went wrong: statuses and the registry's error messages,
        /// never other reply text.
        message: String,
    },
    /// Another unexpected status.
    #[error("{url}: unexpected status {status}: {body}")]
    Status {
        /// The URL.
        url: String,
        /// The status code.
        status: u16,
        /// The registry's error messages when the reply is an OCI error
        /// body, else only a note on the reply's size: other text (a
        /// proxy's HTML page, say) is never quoted.
        body: String,
    },
    /// The registry broke the protocol.
    #[error("{url}: {message}")]
    Protocol {
        /// The URL.
        url: String,
        /// What was wrong.
        message: String,
    },
    /// A malformed `WWW-Authenticate` header.
    #[error("{url}: {source}")]
    Challenge {
        /// The URL.
        url: String,
        /// The parse failure.
        #[source]
        source: ChallengeError,
    },
    /// A response larger than its limit.
    #[error("{url}: response larger than the limit of {limit} bytes")]
    ResponseTooLarge {
        /// The URL.
        url: String,
        /// The limit.
        limit: u64,
    },
    /// A blob larger than allowed (by the caller or its descriptor).
    #[error("blob {digest} is larger than the limit of {limit} bytes")]
    BlobTooLarge {
        /// The blob.
        digest: Digest,
        /// The limit.
        limit: u64,
    },
    /// Content whose digest is not the expected one.
    #[error("{what}: digest mismatch: expected {expected}, got {actual}")]
    DigestMismatch {
        /// What was checked.
        what: String,
        /// The expected digest.
        expected: Digest,
        /// The computed digest.
        actual: Digest,
    },
    /// A blob shorter than its descriptor says.
    #[error("blob {digest}: expected {expected} bytes, got {actual}")]
    SizeMismatch {
        /// The blob.
        digest: Digest,
        /// The descriptor's size.
        expected: u64,
        /// The bytes received.
        actual: u64,
    },
    /// A manifest that could not be read.
    #[error("manifest of {reference}: {source}")]
    Manifest {
        /// The image.
        reference: String,
        /// The failure.
        #[source]
        source: ManifestError,
    },
    /// An image config that could not be read.
    #[error("config of {reference}: {source}")]
    Config {
        /// The image.
        reference: String,
        /// The failure.
        #[source]
        source: serde_json::Error,
    },
    /// A base image whose layers together are larger than the limit.
    #[error(
        "base image {reference}: its layers are {size} bytes, more than the limit of {limit} bytes"
    )]
    BaseImageTooLarge {
        /// The image.
        reference: String,
        /// The sum of its layers' sizes.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// An image config whose `rootfs.diff_ids` does not name each layer.
    #[error("config of {reference}: {diff_ids} diff_ids for {layers} layers")]
    DiffIdsMismatch {
        /// The image.
        reference: String,
        /// How many diff_ids the config lists.
        diff_ids: usize,
        /// How many layers the manifest lists.
        layers: usize,
    },
    /// An index without the wanted platform.
    #[error("{reference}: no image for platform {platform} in the index")]
    NoPlatform {
        /// The image.
        reference: String,
        /// The platform.
        platform: String,
    },
    /// An index pointing at another index.
    #[error("{reference}: index entry is itself an index")]
    NestedIndex {
        /// The image.
        reference: String,
    },
    /// A layer that could not be extracted.
    #[error("layer {digest}: {source}")]
    Extract {
        /// The layer.
        digest: Digest,
        /// The failure.
        #[source]
        source: ExtractError,
    },
    /// A local file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// A stable category for metrics and event reasons.
    pub fn category(&self) -> &'static str {
        match self {
            Self::Http { .. } => "network",
            Self::NotFound { .. } => "not_found",
            Self::Unauthorized { .. } | Self::Challenge { .. } => "unauthorized",
            Self::Status { .. } | Self::Protocol { .. } => "registry",
            Self::ResponseTooLarge { .. }
            | Self::BlobTooLarge { .. }
            | Self::BaseImageTooLarge { .. } => "too_large",
            Self::DigestMismatch { .. } | Self::SizeMismatch { .. } => "integrity",
            Self::Manifest { .. }
            | Self::Config { .. }
            | Self::DiffIdsMismatch { .. }
            | Self::NoPlatform { .. }
            | Self::NestedIndex { .. } => "manifest",
            Self::Extract { .. } => "layer",
            Self::Io { .. } => "io",
        }
    }
}
