//! A rustls server certificate that can be swapped while serving, and the
//! server configuration built around it.

use std::sync::{Arc, RwLock};

use rustls::{
    RootCertStore, ServerConfig,
    client::{WebPkiServerVerifier, danger::ServerCertVerifier},
    crypto::CryptoProvider,
    server::{ClientHello, ResolvesServerCert, danger::ClientCertVerifier},
    sign::CertifiedKey,
};
use rustls_pki_types::{PrivateKeyDer, ServerName, UnixTime, pem::PemObject};

use crate::{error::CertError, material::parse_certificates};

/// The crypto provider every configuration of this crate uses (ring).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Builds a rustls [`CertifiedKey`] from PEM text.
pub fn certified_key(cert_pem: &str, key_pem: &str) -> Result<CertifiedKey, CertError> {
    let chain = parse_certificates(cert_pem)?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
        .map_err(|e| CertError::Key(e.to_string()))?;
    let signing = provider()
        .key_provider
        .load_private_key(key)
        .map_err(CertError::Tls)?;
    let certified = CertifiedKey::new(chain, signing);
    certified.keys_match().map_err(CertError::Tls)?;
    Ok(certified)
}

/// A server certificate resolver whose certificate is replaced atomically:
/// handshakes after [`HotCertificate::set`] use the new certificate,
/// connections already established keep theirs.
#[derive(Debug, Default)]
pub struct HotCertificate {
    current: RwLock<Option<Arc<CertifiedKey>>>,
}

impl HotCertificate {
    /// A resolver with no certificate yet (handshakes fail until
    /// [`HotCertificate::set`]).
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Replaces the served certificate.
    pub fn set(&self, key: CertifiedKey) {
        let mut guard = self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *guard = Some(Arc::new(key));
    }

    /// Replaces the served certificate from PEM text.
    pub fn set_pem(&self, cert_pem: &str, key_pem: &str) -> Result<(), CertError> {
        self.set(certified_key(cert_pem, key_pem)?);
        Ok(())
    }

    /// The certificate handshakes use now.
    pub fn current(&self) -> Option<Arc<CertifiedKey>> {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

impl ResolvesServerCert for HotCertificate {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current()
    }
}

/// A server configuration (TLS 1.2 and 1.3, ALPN `h2` and `http/1.1`) that
/// serves whatever `certificate` holds and checks client certificates with
/// `client_verifier` (or asks for none).
pub fn server_config(
    certificate: Arc<HotCertificate>,
    client_verifier: Option<Arc<dyn ClientCertVerifier>>,
) -> Result<ServerConfig, CertError> {
    let builder =
        ServerConfig::builder_with_provider(provider()).with_safe_default_protocol_versions()?;
    let builder = match client_verifier {
        Some(verifier) => builder.with_client_cert_verifier(verifier),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_cert_resolver(certificate);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// A root store of every certificate in a PEM bundle.
pub fn root_store(bundle_pem: &str) -> Result<RootCertStore, CertError> {
    let mut roots = RootCertStore::empty();
    for der in parse_certificates(bundle_pem)? {
        roots.add(der).map_err(CertError::Tls)?;
    }
    Ok(roots)
}

/// Verifies, as a TLS client would at `now`, that the bundle trusts the
/// served certificate for `host`.
pub fn verify_served(
    bundle_pem: &str,
    cert_pem: &str,
    host: &str,
    now: std::time::SystemTime,
) -> Result<(), CertError> {
    let roots = Arc::new(root_store(bundle_pem)?);
    let verifier = WebPkiServerVerifier::builder_with_provider(roots, provider())
        .build()
        .map_err(|e| CertError::Untrusted(e.to_string()))?;
    let chain = parse_certificates(cert_pem)?;
    let name = ServerName::try_from(host.to_owned())
        .map_err(|e| CertError::Untrusted(format!("invalid host {host:?}: {e}")))?;
    let since_epoch = now
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| CertError::Untrusted("time before the epoch".to_owned()))?;
    verifier
        .verify_server_cert(
            &chain[0],
            &chain[1..],
            &name,
            &[],
            UnixTime::since_unix_epoch(since_epoch),
        )
        .map(|_| ())
        .map_err(|e| CertError::Untrusted(e.to_string()))
}
