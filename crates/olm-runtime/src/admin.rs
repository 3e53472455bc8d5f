//! The admin HTTP server every service runs: `/metrics` (OpenMetrics text),
//! `/healthz` (liveness: the process is serving) and `/readyz` (readiness:
//! every registered [`ReadinessGate`] is set, for example "caches warm").
//!
//! The probes are always plain HTTP, because kubelet probes carry no
//! credentials. `/metrics` is plain too unless a secured
//! metrics address is configured ([`SecureMetrics`],
//! `--metrics-bind-address`): then it is served only there, over TLS, and by
//! default only to callers whose bearer token RBAC allows `get` on
//! `/metrics` ([`metrics_auth`]).
//!
//! ```no_run
//! # async fn example(
//! #     args: olm_runtime::config::AdminServerArgs,
//! #     client: kube::Client,
//! # ) -> olm_runtime::Result<()> {
//! use std::sync::Arc;
//! use olm_runtime::{admin::{AdminServer, Readiness}, metrics::MetricsRegistry, shutdown};
//!
//! let registry = MetricsRegistry::default();
//! let readiness = Readiness::default();
//! let caches_warm = readiness.gate("caches-warm");
//! let server = AdminServer::from_args(&args, &client, Arc::new(registry), readiness).await?;
//! let shutdown = shutdown::on_signal()?;
//! tokio::spawn(server.serve(shutdown.clone()));
//! // ... once every watch has delivered its first list:
//! caches_warm.set();
//! # Ok(())
//! # }
//! ```

pub mod metrics_auth;

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    path::PathBuf,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant, SystemTime},
};

use axum::{
    Router,
    extract::State,
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Response},
    routing::get,
};
use hyper_util::{
    rt::{TokioExecutor, TokioIo},
    service::TowerToHyperService,
};
use olm_certs::{HotCertificate, Profile, RotationPolicy};
use tokio::{net::TcpListener, task::JoinSet};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use self::metrics_auth::{KubeTokenReviewer, MetricsAuthorizer, TokenReviewer};
use crate::{
    config::{AdminServerArgs, MetricsAuth},
    error::{Error, Result},
    metrics::{MetricsRegistry, OPENMETRICS_CONTENT_TYPE},
};

/// The names a self-signed metrics certificate is made for. Scrapers reach
/// pods by IP and cannot verify a certificate nobody distributed anyway;
/// these let a port-forward or a test on the same host verify it.
pub const SELF_SIGNED_HOSTS: &[&str] = &["localhost", "127.0.0.1"];

/// The organization of a self-signed metrics certificate.
pub const SELF_SIGNED_ORGANIZATION: &str = "operator-lifecycle-manager";

/// Deadline of a TLS handshake on the secured metrics listener, so that a
/// client that connects and says nothing does not hold a task forever.
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long secured metrics connections may finish their requests at
/// shutdown.
pub const TLS_DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the secured listener pauses after a failed `accept` (usually
/// out of file descriptors) before it tries again, instead of spinning.
const ACCEPT_RETRY_DELAY: Duration = Duration::from_millis(100);

/// The set of conditions that must all hold before `/readyz` answers 200.
/// Cheap to clone; every clone sees the same gates.
#[derive(Clone, Debug, Default)]
pub struct Readiness {
    gates: Arc<Mutex<BTreeMap<String, bool>>>,
}

impl Readiness {
    /// Registers an unmet gate named `name` (or returns the existing one).
    /// Register every gate before the admin server starts, so that it never
    /// reports ready before the gates exist.
    pub fn gate(&self, name: impl Into<String>) -> ReadinessGate {
        let name = name.into();
        self.lock().entry(name.clone()).or_insert(false);
        ReadinessGate {
            name,
            readiness: self.clone(),
        }
    }

    /// The names of the gates not yet set, in name order.
    pub fn unmet(&self) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|(_, set)| !**set)
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// Whether every gate is set.
    pub fn is_ready(&self) -> bool {
        self.lock().values().all(|set| *set)
    }

    fn set(&self, name: &str, value: bool) {
        if let Some(set) = self.lock().get_mut(name) {
            *set = value;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, bool>> {
        // A panic while holding this lock cannot leave the map half-updated.
        self.gates.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One named readiness condition, unmet until [`ReadinessGate::set`].
#[derive(Clone, Debug)]
pub struct ReadinessGate {
    name: String,
    readiness: Readiness,
}

impl ReadinessGate {
    /// The gate's name, as listed by `/readyz` while unmet.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Marks the condition as met.
    pub fn set(&self) {
        self.readiness.set(&self.name, true);
    }

    /// Marks the condition as unmet again (for example when a watch is lost).
    pub fn unset(&self) {
        self.readiness.set(&self.name, false);
    }
}

/// The routes of the admin server, for embedding in another server.
pub fn router(registry: Arc<MetricsRegistry>, readiness: Readiness) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .with_state(registry)
        .merge(probe_router(readiness))
}

/// `/healthz` and `/readyz` alone: the plain listener when `/metrics` is
/// served on the secured one.
fn probe_router<S>(readiness: Readiness) -> Router<S> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(readiness)
}

async fn metrics(State(registry): State<Arc<MetricsRegistry>>) -> Response {
    encode_metrics(&registry)
}

fn encode_metrics(registry: &MetricsRegistry) -> Response {
    match registry.encode() {
        Ok(text) => ([(header::CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE)], text).into_response(),
        Err(error) => {
            tracing::error!(
                error = &error as &dyn std::error::Error,
                "failed to encode metrics"
            );
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "failed to encode metrics\n",
            )
                .into_response()
        }
    }
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(readiness): State<Readiness>) -> Response {
    let unmet = readiness.unmet();
    if unmet.is_empty() {
        "ok\n".into_response()
    } else {
        let body: String = unmet
            .iter()
            .map(|gate| format!("unmet: {gate}\n"))
            .collect();
        (StatusCode::SERVICE_UNAVAILABLE, body).into_response()
    }
}

/// Where the secured metrics listener gets its certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MetricsCertificate {
    /// A PEM certificate chain and its PEM private key, read once at start.
    Files {
        /// The certificate chain, leaf first.
        cert: PathBuf,
        /// The leaf's private key.
        key: PathBuf,
    },
    /// A CA and a certificate for [`SELF_SIGNED_HOSTS`] made in memory at
    /// start (see [`AdminServer::metrics_ca_pem`]).
    SelfSigned,
}

/// The secured `/metrics` listener: TLS, and optionally bearer tokens
/// checked against the API server.
#[derive(Clone)]
pub struct SecureMetrics {
    /// Where it listens (port 0 picks a free port).
    pub address: SocketAddr,
    /// The certificate it serves.
    pub certificate: MetricsCertificate,
    /// Who decides whether a caller may read the metrics; `None` lets
    /// everyone who reaches the port in.
    pub reviewer: Option<Arc<dyn TokenReviewer>>,
}

impl std::fmt::Debug for SecureMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecureMetrics")
            .field("address", &self.address)
            .field("certificate", &self.certificate)
            .field("authenticated", &self.reviewer.is_some())
            .finish()
    }
}

/// The admin server, bound and ready to serve.
#[derive(Debug)]
pub struct AdminServer {
    listener: TcpListener,
    router: Router,
    secure: Option<SecureListener>,
}

/// The bound secured metrics listener.
struct SecureListener {
    listener: TcpListener,
    acceptor: TlsAcceptor,
    router: Router,
    generated_ca_pem: Option<String>,
}

impl std::fmt::Debug for SecureListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The acceptor has no `Debug`, and the router says nothing useful.
        f.debug_struct("SecureListener")
            .field("listener", &self.listener)
            .field("self_signed", &self.generated_ca_pem.is_some())
            .finish_non_exhaustive()
    }
}

#[derive(Clone)]
struct SecureState {
    registry: Arc<MetricsRegistry>,
    authorizer: Option<Arc<MetricsAuthorizer>>,
}

impl AdminServer {
    /// Binds `address` for all three endpoints over plain HTTP (port 0 picks
    /// a free port; see [`Self::local_addr`]).
    pub async fn bind(
        address: SocketAddr,
        registry: Arc<MetricsRegistry>,
        readiness: Readiness,
    ) -> Result<Self> {
        let listener = bind_listener(address).await?;
        Ok(Self {
            listener,
            router: router(registry, readiness),
            secure: None,
        })
    }

    /// Binds `address` for the probes over plain HTTP, and `secure.address`
    /// for `/metrics` over TLS.
    pub async fn bind_with_secure_metrics(
        address: SocketAddr,
        secure: SecureMetrics,
        registry: Arc<MetricsRegistry>,
        readiness: Readiness,
    ) -> Result<Self> {
        let (certificate, generated_ca_pem) = load_certificate(&secure.certificate).await?;
        let tls = olm_certs::server_config(certificate, None).map_err(|error| {
            Error::InvalidArgument {
                argument: "--metrics-tls-cert-file",
                reason: format!("unusable for tls: {error}"),
            }
        })?;
        let state = SecureState {
            registry,
            authorizer: secure
                .reviewer
                .map(|reviewer| Arc::new(MetricsAuthorizer::new(reviewer))),
        };
        let listener = bind_listener(address).await?;
        let secure_listener = bind_listener(secure.address).await?;
        Ok(Self {
            listener,
            router: probe_router(readiness),
            secure: Some(SecureListener {
                listener: secure_listener,
                acceptor: TlsAcceptor::from(Arc::new(tls)),
                router: Router::new()
                    .route("/metrics", get(secured_metrics))
                    .with_state(state),
                generated_ca_pem,
            }),
        })
    }

    /// Binds what `args` describe: [`Self::bind`], or with
    /// `--metrics-bind-address` [`Self::bind_with_secure_metrics`], checking
    /// callers with `client` under `--metrics-auth=kubernetes` (so the
    /// service account behind `client` needs `create` on `tokenreviews` and
    /// `subjectaccessreviews`; see [`KubeTokenReviewer`]).
    pub async fn from_args(
        args: &AdminServerArgs,
        client: &kube::Client,
        registry: Arc<MetricsRegistry>,
        readiness: Readiness,
    ) -> Result<Self> {
        let Some(metrics_address) = args.metrics_bind_address else {
            return Self::bind(args.bind_address, registry, readiness).await;
        };
        let certificate = match (&args.metrics_tls_cert_file, &args.metrics_tls_key_file) {
            (Some(cert), Some(key)) => MetricsCertificate::Files {
                cert: cert.clone(),
                key: key.clone(),
            },
            (None, None) => MetricsCertificate::SelfSigned,
            _ => {
                return Err(Error::InvalidArgument {
                    argument: "--metrics-tls-cert-file",
                    reason: "give both --metrics-tls-cert-file and --metrics-tls-key-file, or \
                             neither"
                        .to_owned(),
                });
            }
        };
        let reviewer: Option<Arc<dyn TokenReviewer>> = match args.metrics_auth {
            MetricsAuth::Kubernetes => Some(Arc::new(KubeTokenReviewer::new(client.clone()))),
            MetricsAuth::None => {
                tracing::warn!(
                    address = %metrics_address,
                    "metrics are readable by anyone who can reach them (--metrics-auth=none)"
                );
                None
            }
        };
        let secure = SecureMetrics {
            address: metrics_address,
            certificate,
            reviewer,
        };
        Self::bind_with_secure_metrics(args.bind_address, secure, registry, readiness).await
    }

    /// The address actually bound by the plain listener.
    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.listener
            .local_addr()
            .map_err(|source| Error::AdminServe { source })
    }

    /// The address actually bound by the secured metrics listener, if any.
    pub fn metrics_local_addr(&self) -> Result<Option<SocketAddr>> {
        self.secure
            .as_ref()
            .map(|secure| secure.listener.local_addr())
            .transpose()
            .map_err(|source| Error::AdminServe { source })
    }

    /// The PEM CA that signed a self-signed metrics certificate, for clients
    /// that want to verify it; `None` when the certificate came from files or
    /// metrics are not secured.
    pub fn metrics_ca_pem(&self) -> Option<&str> {
        self.secure
            .as_ref()
            .and_then(|secure| secure.generated_ca_pem.as_deref())
    }

    /// Serves until `shutdown` is cancelled, then stops accepting connections
    /// and finishes the requests in flight.
    pub async fn serve(self, shutdown: CancellationToken) -> Result<()> {
        if let Ok(address) = self.listener.local_addr() {
            tracing::info!(%address, "admin server listening");
        }
        let plain = async {
            axum::serve(self.listener, self.router)
                .with_graceful_shutdown(shutdown.clone().cancelled_owned())
                .await
                .map_err(|source| Error::AdminServe { source })
        };
        match self.secure {
            None => plain.await,
            Some(secure) => {
                tokio::try_join!(plain, serve_tls(secure, shutdown.clone())).map(|_| ())
            }
        }
    }
}

async fn bind_listener(address: SocketAddr) -> Result<TcpListener> {
    TcpListener::bind(address)
        .await
        .map_err(|source| Error::AdminBind { address, source })
}

/// The certificate to serve, and the CA that signed it when it was made here.
async fn load_certificate(
    certificate: &MetricsCertificate,
) -> Result<(Arc<HotCertificate>, Option<String>)> {
    let hot = HotCertificate::new();
    match certificate {
        MetricsCertificate::Files { cert, key } => {
            let read = |path: PathBuf, argument: &'static str| async move {
                tokio::fs::read_to_string(&path)
                    .await
                    .map_err(|error| Error::InvalidArgument {
                        argument,
                        reason: format!("cannot read {}: {error}", path.display()),
                    })
            };
            let cert_pem = read(cert.clone(), "--metrics-tls-cert-file").await?;
            let key_pem = read(key.clone(), "--metrics-tls-key-file").await?;
            hot.set_pem(&cert_pem, &key_pem)
                .map_err(|error| Error::InvalidArgument {
                    argument: "--metrics-tls-cert-file",
                    reason: format!(
                        "{} with {} is not a usable certificate and key: {error}",
                        cert.display(),
                        key.display()
                    ),
                })?;
            Ok((hot, None))
        }
        MetricsCertificate::SelfSigned => {
            let profile = Profile {
                hosts: SELF_SIGNED_HOSTS
                    .iter()
                    .map(|&host| host.to_owned())
                    .collect(),
                organization: SELF_SIGNED_ORGANIZATION.to_owned(),
            };
            // Upstream's two-year lifetimes: nothing rotates this
            // certificate, but every start makes a new one, and no process
            // runs for two years.
            let generated =
                olm_certs::bootstrap(SystemTime::now(), &RotationPolicy::default(), &profile)
                    .and_then(|material| {
                        hot.set_pem(&material.cert_pem, &material.key_pem)?;
                        Ok(material.ca_bundle_pem)
                    })
                    .map_err(|error| Error::InvalidArgument {
                        argument: "--metrics-tls-cert-file",
                        reason: format!(
                            "not given, and a self-signed certificate could not be made: {error}"
                        ),
                    })?;
            Ok((hot, Some(generated)))
        }
    }
}

async fn secured_metrics(State(state): State<SecureState>, headers: HeaderMap) -> Response {
    if let Some(authorizer) = &state.authorizer {
        let status = authorizer
            .check(headers.get(header::AUTHORIZATION), Instant::now())
            .await;
        if status != StatusCode::OK {
            return refusal(status);
        }
    }
    encode_metrics(&state.registry)
}

/// The answer to a refused metrics request: the reason phrase only, since
/// the details (who the token named, why RBAC said no) are for the log.
fn refusal(status: StatusCode) -> Response {
    let body = format!("{}\n", status.canonical_reason().unwrap_or("refused"));
    if status == StatusCode::UNAUTHORIZED {
        // RFC 6750: tell the client which scheme is expected.
        (status, [(header::WWW_AUTHENTICATE, "Bearer")], body).into_response()
    } else {
        (status, body).into_response()
    }
}

/// Accepts TLS connections until `shutdown`, then waits (at most
/// [`TLS_DRAIN_TIMEOUT`] per connection) for those open to finish.
async fn serve_tls(secure: SecureListener, shutdown: CancellationToken) -> Result<()> {
    if let Ok(address) = secure.listener.local_addr() {
        tracing::info!(%address, "secured metrics listening");
    }
    let mut connections = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            () = shutdown.cancelled() => break,
            // Reap finished connections as they end, so the set stays small.
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            accepted = secure.listener.accept() => accepted,
        };
        match accepted {
            Ok((tcp, remote)) => {
                connections.spawn(tls_connection(
                    secure.acceptor.clone(),
                    tcp,
                    remote,
                    secure.router.clone(),
                    shutdown.clone(),
                ));
            }
            Err(error) => {
                tracing::warn!(%error, "secured metrics accept failed");
                tokio::time::sleep(ACCEPT_RETRY_DELAY).await;
            }
        }
    }
    drop(secure.listener);
    while connections.join_next().await.is_some() {}
    Ok(())
}

async fn tls_connection(
    acceptor: TlsAcceptor,
    tcp: tokio::net::TcpStream,
    remote: SocketAddr,
    router: Router,
    shutdown: CancellationToken,
) {
    let tls = match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(error)) => {
            tracing::debug!(%remote, %error, "metrics tls handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!(%remote, "metrics tls handshake timed out");
            return;
        }
    };
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    let connection = builder.serve_connection(TokioIo::new(tls), TowerToHyperService::new(router));
    tokio::pin!(connection);
    tokio::select! {
        result = connection.as_mut() => {
            if let Err(error) = result {
                tracing::debug!(%remote, %error, "metrics connection ended with an error");
            }
        }
        () = shutdown.cancelled() => {
            connection.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(TLS_DRAIN_TIMEOUT, connection).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_only_when_every_gate_is_set() {
        let readiness = Readiness::default();
        assert!(readiness.is_ready(), "no gates: nothing to wait for");
        let caches = readiness.gate("caches-warm");
        let webhook = readiness.gate("webhook-certificates");
        assert_eq!(readiness.unmet(), ["caches-warm", "webhook-certificates"]);
        caches.set();
        assert_eq!(readiness.unmet(), ["webhook-certificates"]);
        assert!(!readiness.is_ready());
        webhook.set();
        assert!(readiness.is_ready());
        caches.unset();
        assert_eq!(readiness.unmet(), [caches.name()]);
    }

    #[test]
    fn registering_a_gate_again_keeps_its_state() {
        let readiness = Readiness::default();
        readiness.gate("caches-warm").set();
        let again = readiness.gate("caches-warm");
        assert!(readiness.is_ready());
        again.unset();
        assert!(!readiness.is_ready());
    }
}
