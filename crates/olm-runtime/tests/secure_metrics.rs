//! The secured metrics listener answers real HTTPS requests on a loopback
//! port, with the probes left on the plain listener. Tokens are judged by a
//! table here; the API server's judgement is tested in `tests/cluster`.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use futures::future::BoxFuture;
use olm_runtime::{
    admin::{
        AdminServer, MetricsCertificate, Readiness, SecureMetrics,
        metrics_auth::{ReviewError, ReviewOutcome, TokenReviewer},
    },
    config::{AdminServerArgs, MetricsAuth},
    metrics::{MetricsRegistry, ReconcileMetrics},
    shutdown::CancellationToken,
};

/// Bound on every request and on shutdown.
const DEADLINE: Duration = Duration::from_secs(10);

/// The token [`TableReviewer`] lets in.
const READER_TOKEN: &str = "sample-reader-token";

/// A valid token whose user RBAC does not allow to read metrics.
const OUTSIDER_TOKEN: &str = "sample-outsider-token";

/// Allows [`READER_TOKEN`], denies [`OUTSIDER_TOKEN`], knows no other.
struct TableReviewer;

impl TokenReviewer for TableReviewer {
    fn review<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<ReviewOutcome, ReviewError>> {
        let outcome = match token {
            READER_TOKEN => ReviewOutcome::Allowed {
                user: "sample-reader".to_owned(),
            },
            OUTSIDER_TOKEN => ReviewOutcome::Denied {
                user: "sample-outsider".to_owned(),
                reason: String::new(),
            },
            _ => ReviewOutcome::Unauthenticated,
        };
        Box::pin(async move { Ok(outcome) })
    }
}

fn loopback() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// A registry with one counted reconcile, so the text has a known line.
fn sample_registry() -> Arc<MetricsRegistry> {
    let mut registry = MetricsRegistry::default();
    let reconcile = ReconcileMetrics::register(registry.component("sample_operator"));
    drop(reconcile.controller("sample-subscription").start());
    Arc::new(registry)
}

const SAMPLE_LINE: &str =
    "sample_operator_reconcile_runs_total{controller=\"sample-subscription\"} 1";

/// An HTTPS client that trusts exactly `ca_pem`.
fn client_trusting(ca_pem: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca_pem.as_bytes()).expect("ca"))
        .timeout(DEADLINE)
        .build()
        .expect("client builds")
}

/// `GET url`, with `token` as bearer when given: status, headers and body.
async fn get(
    client: &reqwest::Client,
    url: &str,
    token: Option<&str>,
) -> (u16, reqwest::header::HeaderMap, String) {
    let mut request = client.get(url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.expect("response");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.text().await.expect("body"))
}

async fn stop(
    shutdown: CancellationToken,
    serving: tokio::task::JoinHandle<olm_runtime::Result<()>>,
) {
    shutdown.cancel();
    tokio::time::timeout(DEADLINE, serving)
        .await
        .expect("stops in time")
        .expect("not panicked")
        .expect("clean stop");
}

#[tokio::test]
async fn self_signed_metrics_are_served_over_tls_to_allowed_tokens_only() {
    let server = AdminServer::bind_with_secure_metrics(
        loopback(),
        SecureMetrics {
            address: loopback(),
            certificate: MetricsCertificate::SelfSigned,
            reviewer: Some(Arc::new(TableReviewer)),
        },
        sample_registry(),
        Readiness::default(),
    )
    .await
    .expect("bound");
    let plain = server.local_addr().expect("plain address");
    let secure = server
        .metrics_local_addr()
        .expect("secure address")
        .expect("secured metrics configured");
    let https = client_trusting(server.metrics_ca_pem().expect("self-signed"));
    let shutdown = CancellationToken::new();
    let serving = tokio::spawn(server.serve(shutdown.clone()));

    // The certificate verifies for localhost against the CA it came with.
    let url = format!("https://localhost:{}/metrics", secure.port());
    let (status, headers, _) = get(&https, &url, None).await;
    assert_eq!(status, 401);
    assert_eq!(
        headers
            .get(reqwest::header::WWW_AUTHENTICATE)
            .map(|v| v.as_bytes()),
        Some(&b"Bearer"[..])
    );
    assert_eq!(get(&https, &url, Some("sample-forged")).await.0, 401);
    assert_eq!(get(&https, &url, Some(OUTSIDER_TOKEN)).await.0, 403);
    let (status, headers, body) = get(&https, &url, Some(READER_TOKEN)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        headers
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok()),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    assert!(body.lines().any(|line| line == SAMPLE_LINE), "{body}");
    let elsewhere = format!("https://localhost:{}/healthz", secure.port());
    assert_eq!(get(&https, &elsewhere, Some(READER_TOKEN)).await.0, 404);

    // Probes stay plain; metrics are no longer served there.
    let http = reqwest::Client::builder()
        .timeout(DEADLINE)
        .build()
        .expect("client builds");
    let plain_url = |path: &str| format!("http://{plain}{path}");
    assert_eq!(get(&http, &plain_url("/healthz"), None).await.0, 200);
    assert_eq!(get(&http, &plain_url("/readyz"), None).await.0, 200);
    assert_eq!(get(&http, &plain_url("/metrics"), None).await.0, 404);

    // Plain HTTP on the secured port gets no metrics.
    let plain_to_secure = http
        .get(format!("http://{secure}/metrics"))
        .send()
        .await
        .map(|response| response.status().as_u16());
    assert!(!matches!(plain_to_secure, Ok(200)), "{plain_to_secure:?}");

    stop(shutdown, serving).await;
    assert!(
        tokio::net::TcpStream::connect(secure).await.is_err(),
        "no longer listening after shutdown"
    );
}

#[tokio::test]
async fn certificate_files_and_no_auth_come_from_the_arguments() {
    let material = olm_certs::bootstrap(
        std::time::SystemTime::now(),
        &olm_certs::RotationPolicy::default(),
        &olm_certs::Profile {
            hosts: vec!["localhost".to_owned()],
            organization: "sample-organization".to_owned(),
        },
    )
    .expect("certificates");
    let dir = tempfile::tempdir().expect("temporary folder");
    let cert = dir.path().join("sample-tls.crt");
    let key = dir.path().join("sample-tls.key");
    std::fs::write(&cert, &material.cert_pem).expect("write certificate");
    std::fs::write(&key, &material.key_pem).expect("write key");
    let args = AdminServerArgs {
        bind_address: loopback(),
        metrics_bind_address: Some(loopback()),
        metrics_tls_cert_file: Some(cert),
        metrics_tls_key_file: Some(key),
        metrics_auth: MetricsAuth::None,
    };
    let server = AdminServer::from_args(
        &args,
        &offline_client(),
        sample_registry(),
        Readiness::default(),
    )
    .await
    .expect("bound");
    assert_eq!(
        server.metrics_ca_pem(),
        None,
        "the certificate is the files'"
    );
    let secure = server
        .metrics_local_addr()
        .expect("secure address")
        .expect("secured metrics configured");
    let shutdown = CancellationToken::new();
    let serving = tokio::spawn(server.serve(shutdown.clone()));

    let https = client_trusting(&material.ca_bundle_pem);
    let url = format!("https://localhost:{}/metrics", secure.port());
    let (status, _, body) = get(&https, &url, None).await;
    assert_eq!(status, 200, "no token needed with --metrics-auth=none");
    assert!(body.lines().any(|line| line == SAMPLE_LINE), "{body}");

    stop(shutdown, serving).await;
}

#[tokio::test]
async fn without_a_metrics_address_everything_stays_plain() {
    let args = AdminServerArgs {
        bind_address: loopback(),
        ..AdminServerArgs::default()
    };
    let server = AdminServer::from_args(
        &args,
        &offline_client(),
        sample_registry(),
        Readiness::default(),
    )
    .await
    .expect("bound");
    assert_eq!(server.metrics_local_addr().expect("address"), None);
    let plain = server.local_addr().expect("plain address");
    let shutdown = CancellationToken::new();
    let serving = tokio::spawn(server.serve(shutdown.clone()));
    let http = reqwest::Client::builder()
        .timeout(DEADLINE)
        .build()
        .expect("client builds");
    let (status, _, body) = get(&http, &format!("http://{plain}/metrics"), None).await;
    assert_eq!(status, 200);
    assert!(body.lines().any(|line| line == SAMPLE_LINE), "{body}");
    stop(shutdown, serving).await;
}

#[tokio::test]
async fn unreadable_or_half_given_certificates_name_the_flag() {
    let missing = AdminServerArgs {
        bind_address: loopback(),
        metrics_bind_address: Some(loopback()),
        metrics_tls_cert_file: Some("/nonexistent/sample-tls.crt".into()),
        metrics_tls_key_file: Some("/nonexistent/sample-tls.key".into()),
        metrics_auth: MetricsAuth::Kubernetes,
    };
    let error = AdminServer::from_args(
        &missing,
        &offline_client(),
        sample_registry(),
        Readiness::default(),
    )
    .await
    .expect_err("no such file");
    let message = error.to_string();
    assert!(message.contains("--metrics-tls-cert-file"), "{message}");
    assert!(message.contains("/nonexistent/sample-tls.crt"), "{message}");
    assert_eq!(error.category(), "config");

    let half = AdminServerArgs {
        metrics_tls_key_file: None,
        ..missing
    };
    let error = AdminServer::from_args(
        &half,
        &offline_client(),
        sample_registry(),
        Readiness::default(),
    )
    .await
    .expect_err("key missing");
    assert!(
        error.to_string().contains("--metrics-tls-key-file"),
        "{error}"
    );
}

/// A client for an address where nothing listens: building it needs no
/// server, and `--metrics-auth=none` never uses it.
fn offline_client() -> kube::Client {
    let config = kube::Config::new("http://127.0.0.1:9".parse().expect("valid URL"));
    kube::Client::try_from(config).expect("client builds")
}
