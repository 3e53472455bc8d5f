//! The admin server answers real HTTP requests on a loopback port.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use olm_runtime::{
    admin::{AdminServer, Readiness},
    metrics::{MetricsRegistry, ReconcileMetrics},
    shutdown::CancellationToken,
};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// Bound on every request and on shutdown.
const DEADLINE: Duration = Duration::from_secs(10);

/// A parsed HTTP/1.1 response.
struct Response {
    status: u16,
    content_type: Option<String>,
    body: String,
}

/// Sends `GET path` and reads the whole response (the server closes the
/// connection as asked).
async fn get(address: SocketAddr, path: &str) -> Response {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(address)
            .await
            .expect("connect");
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.expect("send");
        let mut raw = String::new();
        stream.read_to_string(&mut raw).await.expect("receive");
        raw
    };
    let raw = tokio::time::timeout(DEADLINE, exchange)
        .await
        .expect("response in time");
    let (head, body) = raw.split_once("\r\n\r\n").expect("complete response");
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|code| code.parse().ok())
        .expect("status line");
    let content_type = lines
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.eq_ignore_ascii_case("content-type"))
        .map(|(_, value)| value.trim().to_owned());
    Response {
        status,
        content_type,
        body: body.to_owned(),
    }
}

#[tokio::test]
async fn probes_and_metrics_are_served() {
    let mut registry = MetricsRegistry::default();
    let reconcile = ReconcileMetrics::register(registry.component("sample_operator"));
    let subscriptions = reconcile.controller("sample-subscription");
    drop(subscriptions.start());
    subscriptions.start().failed("kube_conflict");

    let readiness = Readiness::default();
    let caches_warm = readiness.gate("caches-warm");
    let certificates = readiness.gate("serving-certificates");
    let server = AdminServer::bind(
        SocketAddr::from(([127, 0, 0, 1], 0)),
        Arc::new(registry),
        readiness,
    )
    .await
    .expect("bound");
    let address = server.local_addr().expect("address");
    let shutdown = CancellationToken::new();
    let serving = tokio::spawn(server.serve(shutdown.clone()));

    let healthz = get(address, "/healthz").await;
    assert_eq!(healthz.status, 200, "liveness does not wait for readiness");

    let readyz = get(address, "/readyz").await;
    assert_eq!(readyz.status, 503);
    assert_eq!(
        readyz.body,
        "unmet: caches-warm\nunmet: serving-certificates\n"
    );

    caches_warm.set();
    let readyz = get(address, "/readyz").await;
    assert_eq!(readyz.status, 503);
    assert_eq!(readyz.body, "unmet: serving-certificates\n");

    certificates.set();
    let readyz = get(address, "/readyz").await;
    assert_eq!(readyz.status, 200, "{}", readyz.body);

    let metrics = get(address, "/metrics").await;
    assert_eq!(metrics.status, 200);
    assert_eq!(
        metrics.content_type.as_deref(),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    for line in [
        "# TYPE sample_operator_reconcile_runs counter",
        "sample_operator_reconcile_runs_total{controller=\"sample-subscription\"} 2",
        "sample_operator_reconcile_failures_total{controller=\"sample-subscription\",category=\"kube_conflict\"} 1",
        "sample_operator_reconcile_duration_seconds_count{controller=\"sample-subscription\"} 2",
        "# EOF",
    ] {
        assert!(
            metrics.body.lines().any(|l| l == line),
            "missing {line:?} in\n{}",
            metrics.body
        );
    }

    assert_eq!(get(address, "/nowhere").await.status, 404);

    shutdown.cancel();
    tokio::time::timeout(DEADLINE, serving)
        .await
        .expect("stops in time")
        .expect("not panicked")
        .expect("clean stop");
    assert!(
        tokio::net::TcpStream::connect(address).await.is_err(),
        "no longer listening after shutdown"
    );
}

#[tokio::test]
async fn binding_a_busy_address_fails_with_the_address() {
    let taken = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bound");
    let address = taken.local_addr().expect("address");
    let error = AdminServer::bind(address, Arc::default(), Readiness::default())
        .await
        .expect_err("address in use");
    assert!(error.to_string().contains(&address.to_string()), "{error}");
    assert_eq!(error.category(), "admin_server");
}
