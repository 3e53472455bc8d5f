//! Why an unpack failed, as the CamelCase reason recorded in the ConfigMap
//! (`olm.unpackFailureReason`) and shown on the InstallPlan's lookup, and
//! whether trying again at once may help.

use olm_oci::{Error as OciError, layer::ExtractError};

/// The image could not be pulled (not found, registry error, unreachable).
pub const IMAGE_PULL_FAILED: &str = "ImagePullFailed";
/// The registry refused the credentials (or there were none).
pub const UNAUTHORIZED: &str = "Unauthorized";
/// The image is not a valid `registry+v1` bundle, or its layers are unsafe.
pub const INVALID_BUNDLE: &str = "InvalidBundle";
/// The image, its layers or its content exceed a limit.
pub const TOO_LARGE: &str = "TooLarge";
/// The unpack did not finish within its deadline (upstream's Job reason).
pub const DEADLINE_EXCEEDED: &str = "DeadlineExceeded";
/// The image reference cannot be parsed.
pub const INVALID_IMAGE_REFERENCE: &str = "InvalidImageReference";
/// The image is outside the allowed-registries policy.
pub const REGISTRY_NOT_ALLOWED: &str = "RegistryNotAllowed";

/// The most bytes of a failure message stored (the registry's own words
/// are kept, cut here).
pub const MAX_FAILURE_MESSAGE_BYTES: usize = 1024;

/// A failure to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The reason (one of the constants of this module).
    pub reason: &'static str,
    /// What went wrong, for people.
    pub message: String,
    /// Whether an immediate retry may succeed (network trouble, a 5xx or
    /// 429 from the registry), as opposed to a fact about the image.
    pub transient: bool,
}

impl Failure {
    /// A failure with `reason` and `message` (cut to
    /// [`MAX_FAILURE_MESSAGE_BYTES`]).
    pub fn new(reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: truncate(message.into()),
            transient: false,
        }
    }
}

/// Cuts `text` to [`MAX_FAILURE_MESSAGE_BYTES`] on a character boundary.
pub fn truncate(mut text: String) -> String {
    if text.len() > MAX_FAILURE_MESSAGE_BYTES {
        let mut end = MAX_FAILURE_MESSAGE_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// Classifies a pull failure of `bundle_path`.
pub fn from_pull_error(bundle_path: &str, error: &OciError) -> Failure {
    let message = format!("pull {bundle_path}: {}", error_chain(error));
    let (reason, transient) = match error {
        OciError::Unauthorized { .. } | OciError::Challenge { .. } => (UNAUTHORIZED, false),
        OciError::NotFound { .. } => (IMAGE_PULL_FAILED, false),
        // A redirect the client refused (https to http, or a loop) will be
        // refused again: retrying it at once only delays the failure.
        OciError::Http { source, .. } => (IMAGE_PULL_FAILED, !source.is_redirect()),
        OciError::Status { status, .. } => (IMAGE_PULL_FAILED, *status == 429 || *status >= 500),
        OciError::ResponseTooLarge { .. }
        | OciError::BlobTooLarge { .. }
        | OciError::BaseImageTooLarge { .. } => (TOO_LARGE, false),
        OciError::Extract { source, .. } => match source {
            ExtractError::CompressedTooLarge { .. }
            | ExtractError::UncompressedTooLarge { .. }
            | ExtractError::TooManyEntries { .. }
            | ExtractError::CompressionRatio { .. } => (TOO_LARGE, false),
            _ => (INVALID_BUNDLE, false),
        },
        OciError::Manifest { .. }
        | OciError::Config { .. }
        | OciError::NoPlatform { .. }
        | OciError::NestedIndex { .. }
        | OciError::DiffIdsMismatch { .. } => (INVALID_BUNDLE, false),
        // A digest or size that does not match may be a broken transfer.
        OciError::DigestMismatch { .. } | OciError::SizeMismatch { .. } => {
            (IMAGE_PULL_FAILED, true)
        }
        OciError::Protocol { .. } | OciError::Io { .. } => (IMAGE_PULL_FAILED, false),
    };
    Failure {
        transient,
        ..Failure::new(reason, message)
    }
}

/// The failure of content that did not read as a bundle.
pub fn invalid_bundle(bundle_path: &str, error: &(dyn std::error::Error + 'static)) -> Failure {
    Failure::new(
        INVALID_BUNDLE,
        format!(
            "{bundle_path} is not a valid registry+v1 bundle: {}",
            error_chain(error)
        ),
    )
}

/// The failure of an unpack that ran out of time.
pub fn deadline_exceeded(bundle_path: &str, timeout: std::time::Duration) -> Failure {
    Failure::new(
        DEADLINE_EXCEEDED,
        format!(
            "unpacking {bundle_path} did not finish within {}s (the OperatorGroup annotation operatorframework.io/bundle-unpack-timeout sets the deadline)",
            timeout.as_secs()
        ),
    )
}

/// An error and its sources, joined with `: ` (skipping a source whose text
/// its parent already shows).
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
