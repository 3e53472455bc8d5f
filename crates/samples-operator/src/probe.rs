//! Whether the samples registry can be reached: a TCP connect with a short
//! timeout (a disconnected cluster can otherwise hang for many minutes),
//! then a TLS handshake that checks the registry's certificate, tried
//! again every [`PROBE_INTERVAL`] until it succeeds or the deadline passes.
//! Upstream's operator does the same against registry.redhat.io before it
//! makes its first Config.

use std::{sync::Arc, time::Duration};

use rustls::{ClientConfig, RootCertStore, pki_types::ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_util::sync::CancellationToken;

/// Where the probe dials by default.
pub const DEFAULT_TARGET: &str = "registry.redhat.io:443";

/// How long one TCP connect may take (upstream: 15 s).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// How long the probe keeps trying by default (upstream says 3 minutes in
/// its log line; its code waits 5).
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(3 * 60);

/// The wait between attempts (upstream: 20 s).
pub const PROBE_INTERVAL: Duration = Duration::from_secs(20);

/// Why one attempt failed.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The target is not `host:port`.
    #[error("probe target {0:?} is not host:port")]
    Target(String),
    /// The TCP connect failed or timed out.
    #[error("test connection to {target} with timeout failed with {reason}")]
    Connect {
        /// Where it dialled.
        target: String,
        /// Why it failed.
        reason: String,
    },
    /// The TLS handshake failed (an untrusted certificate, for instance).
    #[error("test tls connection to {host} experienced SSL handshake error {source}")]
    Handshake {
        /// The host dialled.
        host: String,
        /// What failed.
        #[source]
        source: std::io::Error,
    },
}

/// A registry to probe and the certificate authorities it is checked
/// against.
#[derive(Clone)]
pub struct Probe {
    target: String,
    tls: Arc<ClientConfig>,
    connect_timeout: Duration,
}

impl std::fmt::Debug for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Probe")
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

impl Probe {
    /// A probe of `target` (`host:port`) that trusts the public web's
    /// certificate authorities (compiled in: the operator's image carries no
    /// CA files).
    pub fn public(target: impl Into<String>) -> Self {
        let roots = RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        Self::with_roots(target, roots)
    }

    /// A probe of `target` that trusts only `roots`.
    pub fn with_roots(target: impl Into<String>, roots: RootCertStore) -> Self {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("the ring provider supports TLS 1.2 and 1.3")
            .with_root_certificates(roots)
            .with_no_client_auth();
        Self {
            target: target.into(),
            tls: Arc::new(tls),
            connect_timeout: CONNECT_TIMEOUT,
        }
    }

    /// The same probe with another connect timeout.
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Where it dials.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// One attempt: connect, then complete a TLS handshake.
    ///
    /// # Errors
    ///
    /// [`ProbeError`] says which step failed.
    pub async fn attempt(&self) -> Result<(), ProbeError> {
        let (host, _) = self
            .target
            .rsplit_once(':')
            .filter(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok())
            .ok_or_else(|| ProbeError::Target(self.target.clone()))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let server_name = ServerName::try_from(host.to_owned())
            .map_err(|_| ProbeError::Target(self.target.clone()))?;
        let stream = tokio::time::timeout(self.connect_timeout, TcpStream::connect(&self.target))
            .await
            .map_err(|_| ProbeError::Connect {
                target: self.target.clone(),
                reason: format!("i/o timeout after {:?}", self.connect_timeout),
            })?
            .map_err(|error| ProbeError::Connect {
                target: self.target.clone(),
                reason: error.to_string(),
            })?;
        let connector = TlsConnector::from(self.tls.clone());
        tokio::time::timeout(self.connect_timeout, connector.connect(server_name, stream))
            .await
            .map_err(|_| ProbeError::Handshake {
                host: host.to_owned(),
                source: std::io::Error::new(std::io::ErrorKind::TimedOut, "handshake timed out"),
            })?
            .map_err(|source| ProbeError::Handshake {
                host: host.to_owned(),
                source,
            })?;
        Ok(())
    }

    /// Tries every `interval` until an attempt succeeds (`Some(true)`),
    /// `deadline` passes (`Some(false)`) or `shutdown` fires (`None`).
    pub async fn reachable_within(
        &self,
        deadline: Duration,
        interval: Duration,
        shutdown: &CancellationToken,
    ) -> Option<bool> {
        let give_up = tokio::time::Instant::now() + deadline;
        loop {
            match self.attempt().await {
                Ok(()) => {
                    tracing::info!(target = %self.target, "test connection to the samples registry successful");
                    return Some(true);
                }
                Err(error) => tracing::info!(
                    target = %self.target,
                    error = &error as &dyn std::error::Error,
                    "the samples registry probe failed"
                ),
            }
            let next = tokio::time::Instant::now() + interval;
            if next >= give_up {
                return Some(false);
            }
            tokio::select! {
                () = shutdown.cancelled() => return None,
                () = tokio::time::sleep_until(next) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::time::SystemTime;

    use olm_certs::{
        HotCertificate, Profile, RotationPolicy, bootstrap, root_store, server_config,
    };
    use tokio::net::TcpListener;
    use tokio_rustls::TlsAcceptor;

    use super::*;

    /// Resolves to loopback; the certificate is issued for it.
    const HOST: &str = "localhost";

    /// A TLS server on loopback for `HOST`; returns its port and the CA.
    async fn serve_tls() -> (u16, String) {
        let profile = Profile {
            hosts: vec![HOST.to_owned()],
            organization: "Fixture".to_owned(),
        };
        let material = bootstrap(SystemTime::now(), &RotationPolicy::default(), &profile).unwrap();
        let certificate = HotCertificate::new();
        certificate
            .set_pem(&material.cert_pem, &material.key_pem)
            .unwrap();
        let acceptor = TlsAcceptor::from(Arc::new(server_config(certificate, None).unwrap()));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let _ = acceptor.accept(stream).await;
                });
            }
        });
        (port, material.ca_bundle_pem)
    }

    #[tokio::test]
    async fn a_trusted_registry_is_reachable() {
        let (port, ca) = serve_tls().await;
        let probe = Probe::with_roots(format!("{HOST}:{port}"), root_store(&ca).unwrap());
        probe.attempt().await.unwrap();
        let reachable = probe
            .reachable_within(
                Duration::from_secs(5),
                Duration::from_millis(100),
                &CancellationToken::new(),
            )
            .await;
        assert_eq!(reachable, Some(true));
    }

    #[tokio::test]
    async fn an_untrusted_certificate_fails_the_handshake() {
        let (port, _) = serve_tls().await;
        let probe = Probe::with_roots(format!("{HOST}:{port}"), RootCertStore::empty());
        let error = probe.attempt().await.unwrap_err();
        assert!(matches!(error, ProbeError::Handshake { .. }), "{error}");
    }

    #[tokio::test]
    async fn a_closed_port_is_unreachable_by_the_deadline() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let probe = Probe::public(format!("localhost:{port}"));
        assert!(matches!(
            probe.attempt().await.unwrap_err(),
            ProbeError::Connect { .. }
        ));
        let reachable = probe
            .reachable_within(
                Duration::from_millis(300),
                Duration::from_millis(100),
                &CancellationToken::new(),
            )
            .await;
        assert_eq!(reachable, Some(false));
    }

    #[tokio::test]
    async fn a_malformed_target_is_refused() {
        for target in ["registry.fixture.test", ":443", "host:port"] {
            let error = Probe::public(target).attempt().await.unwrap_err();
            assert!(matches!(error, ProbeError::Target(_)), "{target}: {error}");
        }
    }
}
