//! Errors of certificate handling.

use thiserror::Error;

/// Why certificate material could not be read, issued or used.
#[derive(Debug, Error)]
pub enum CertError {
    /// PEM text is malformed or holds no certificate.
    #[error("invalid pem: {0}")]
    Pem(String),
    /// A stored value is larger than [`crate::MAX_PEM_BYTES`].
    #[error("pem value of {0} bytes exceeds the limit")]
    TooLarge(usize),
    /// A bundle holds more certificates than [`crate::MAX_BUNDLE_CERTS`].
    #[error("bundle holds more than {0} certificates")]
    BundleTooLong(usize),
    /// A certificate does not parse as X.509.
    #[error("invalid certificate: {0}")]
    X509(String),
    /// A private key does not parse.
    #[error("invalid private key: {0}")]
    Key(String),
    /// A private key belongs to no certificate where it should.
    #[error("private key does not match the {0}")]
    KeyMismatch(&'static str),
    /// rcgen could not make a certificate.
    #[error("issuing a certificate: {0}")]
    Issue(String),
    /// rustls refused the material or configuration.
    #[error("tls: {0}")]
    Tls(#[from] rustls::Error),
    /// The served chain does not verify against the bundle.
    #[error("served certificate does not verify against the ca bundle: {0}")]
    Untrusted(String),
}

impl From<rcgen::Error> for CertError {
    fn from(err: rcgen::Error) -> Self {
        Self::Issue(err.to_string())
    }
}
