//! The secured `/metrics` asks the real API server about bearer tokens: a
//! ServiceAccount's token is let in only once RBAC allows it `get` on the
//! non-resource URL `/metrics`, as kube-rbac-proxy would.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use k8s_openapi::api::{
    authentication::v1::{TokenRequest, TokenRequestSpec},
    core::v1::ServiceAccount,
    rbac::v1::{ClusterRole, ClusterRoleBinding},
};
use kube::{
    Api,
    api::{DeleteParams, PostParams},
};
use olm_runtime::{
    admin::{AdminServer, Readiness},
    config::{AdminServerArgs, MetricsAuth},
    metrics::{MetricsRegistry, ReconcileMetrics},
    shutdown::CancellationToken,
};

use crate::{init_logs, within};

/// Bound on each request, on RBAC taking effect and on shutdown.
const DEADLINE: Duration = Duration::from_secs(30);

/// How long the token handed to the test scraper is valid (the API server's
/// minimum is ten minutes).
const TOKEN_SECONDS: i64 = 600;

/// A line the sample registry's text must contain.
const SAMPLE_LINE: &str =
    "sample_operator_reconcile_runs_total{controller=\"sample-subscription\"} 1";

/// The status of `GET url` with `token` as bearer when given, and the body.
async fn get(client: &reqwest::Client, url: &str, token: Option<&str>) -> (u16, String) {
    let mut request = client.get(url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.expect("response");
    let status = response.status().as_u16();
    (status, response.text().await.expect("body"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_account_tokens_need_rbac_on_the_metrics_url() {
    init_logs();
    let plane = olm_testkit::control_plane();
    let namespace = plane.namespace("secure-metrics").await;
    let client = plane.client().await;

    // The scraper: a ServiceAccount and a token minted for it.
    let scraper_name = "sample-scraper";
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace.name());
    let account: ServiceAccount = serde_json::from_value(serde_json::json!({
        "metadata": { "name": scraper_name }
    }))
    .expect("service account object");
    accounts
        .create(&PostParams::default(), &account)
        .await
        .expect("service account created");
    let token = accounts
        .create_token_request(
            scraper_name,
            &PostParams::default(),
            &TokenRequest {
                spec: TokenRequestSpec {
                    // The API server's own audience, as a projected token has.
                    audiences: Vec::new(),
                    expiration_seconds: Some(TOKEN_SECONDS),
                    ..TokenRequestSpec::default()
                },
                ..TokenRequest::default()
            },
        )
        .await
        .expect("token issued")
        .status
        .expect("token status")
        .token;

    // The service: reviews with its own (here: the admin's) client.
    let mut registry = MetricsRegistry::default();
    let reconcile = ReconcileMetrics::register(registry.component("sample_operator"));
    drop(reconcile.controller("sample-subscription").start());
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let args = AdminServerArgs {
        bind_address: loopback,
        metrics_bind_address: Some(loopback),
        metrics_auth: MetricsAuth::Kubernetes,
        ..AdminServerArgs::default()
    };
    let server = AdminServer::from_args(&args, &client, Arc::new(registry), Readiness::default())
        .await
        .expect("bound");
    let secure = server
        .metrics_local_addr()
        .expect("address")
        .expect("secured metrics configured");
    let https = reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(
            reqwest::Certificate::from_pem(
                server.metrics_ca_pem().expect("self-signed").as_bytes(),
            )
            .expect("ca"),
        )
        .timeout(DEADLINE)
        .build()
        .expect("client builds");
    let shutdown = CancellationToken::new();
    let serving = tokio::spawn(server.serve(shutdown.clone()));
    let url = format!("https://localhost:{}/metrics", secure.port());

    assert_eq!(get(&https, &url, None).await.0, 401, "no token");
    assert_eq!(
        get(&https, &url, Some("sample-forged-token")).await.0,
        401,
        "a token the API server did not issue"
    );
    let (status, body) = get(&https, &url, Some(&token)).await;
    assert_eq!(status, 403, "authenticated but not yet allowed: {body}");

    // Allow the scraper, as a Prometheus deployment's RBAC would.
    let role_name = format!("sample-metrics-reader-{}", namespace.name());
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    let role: ClusterRole = serde_json::from_value(serde_json::json!({
        "metadata": { "name": role_name },
        "rules": [{ "nonResourceURLs": ["/metrics"], "verbs": ["get"] }]
    }))
    .expect("cluster role object");
    let binding: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": { "name": role_name },
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": role_name
        },
        "subjects": [{
            "kind": "ServiceAccount",
            "name": scraper_name,
            "namespace": namespace.name()
        }]
    }))
    .expect("cluster role binding object");
    roles
        .create(&PostParams::default(), &role)
        .await
        .expect("cluster role created");
    bindings
        .create(&PostParams::default(), &binding)
        .await
        .expect("cluster role binding created");

    // The API server's authorizer sees new RBAC objects through its own
    // informers; denials are not cached here, so the next tries tell.
    let body = within(
        DEADLINE,
        "the scraper is let in once RBAC allows it",
        async {
            loop {
                let (status, body) = get(&https, &url, Some(&token)).await;
                match status {
                    200 => break body,
                    403 => tokio::time::sleep(Duration::from_millis(100)).await,
                    other => panic!("unexpected status {other}: {body}"),
                }
            }
        },
    )
    .await;
    assert!(body.lines().any(|line| line == SAMPLE_LINE), "{body}");
    assert_eq!(
        get(&https, &url, Some("sample-forged-token")).await.0,
        401,
        "an allowed scraper does not open the door for others"
    );

    shutdown.cancel();
    within(DEADLINE, "admin server stops", serving)
        .await
        .expect("not panicked")
        .expect("clean stop");
    // Cluster-scoped objects outlive the test namespace.
    let _ = bindings.delete(&role_name, &DeleteParams::default()).await;
    let _ = roles.delete(&role_name, &DeleteParams::default()).await;
}
