//! The bearer-token flow against the real docker-registry configured for
//! token authentication: the registry challenges, the client asks the token
//! endpoint named in the challenge (with its credentials, if any) and
//! retries with the token; the registry verifies the token's signature,
//! issuer, audience and granted actions.
//!
//! The token endpoint is a small issuer run by this test: it signs ES256
//! JWTs with a key whose self-signed certificate is the registry's root
//! bundle, grants `pull` to anyone and `push` only to the right user.
#![allow(clippy::unwrap_used)]

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{SystemTime, UNIX_EPOCH},
};

use base64::Engine as _;
use olm_oci::{Client, ClientOptions, Credentials, Error, ExtractOptions, ImageBuilder, Reference};
use olm_testkit::registry::Registry;

const SERVICE: &str = "olm-test-registry";
const ISSUER: &str = "olm-test-issuer";
const USER: &str = "pusher";
const PASSWORD: &str = "push-secret";

struct Issuer {
    key: ring::signature::EcdsaKeyPair,
    cert_der: Vec<u8>,
    requests: AtomicUsize,
}

fn b64url(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

impl Issuer {
    /// A JWT granting `actions` on `repository`.
    fn token(&self, repository: &str, actions: &[&str]) -> String {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let header = serde_json::json!({
            "typ": "JWT",
            "alg": "ES256",
            "x5c": [base64::engine::general_purpose::STANDARD.encode(&self.cert_der)],
        });
        let claims = serde_json::json!({
            "iss": ISSUER,
            "sub": USER,
            "aud": SERVICE,
            "exp": now + 300,
            "nbf": now - 10,
            "iat": now,
            "jti": format!("token-{}", self.requests.load(Ordering::SeqCst)),
            "access": [{"type": "repository", "name": repository, "actions": actions}],
        });
        let signing_input = format!(
            "{}.{}",
            b64url(header.to_string().as_bytes()),
            b64url(claims.to_string().as_bytes())
        );
        let rng = ring::rand::SystemRandom::new();
        let signature = self.key.sign(&rng, signing_input.as_bytes()).unwrap();
        format!("{signing_input}.{}", b64url(signature.as_ref()))
    }

    fn answer(&self, query: &str, authorization: Option<&str>) -> (u16, String) {
        self.requests.fetch_add(1, Ordering::SeqCst);
        let mut service = "";
        let mut scope = String::new();
        for pair in query.split('&') {
            match pair.split_once('=') {
                Some(("service", v)) => service = v,
                Some(("scope", v)) => {
                    scope = v
                        .replace("%3A", ":")
                        .replace("%2F", "/")
                        .replace("%2C", ",")
                }
                _ => {}
            }
        }
        if service != SERVICE {
            return (400, "wrong service".into());
        }
        let authenticated = match authorization.and_then(|a| a.strip_prefix("Basic ")) {
            None => false,
            Some(encoded) => {
                let decoded = base64::engine::general_purpose::STANDARD
                    .decode(encoded)
                    .unwrap_or_default();
                if decoded != format!("{USER}:{PASSWORD}").as_bytes() {
                    return (401, "bad credentials".into());
                }
                true
            }
        };
        // scope = repository:<name>:<actions>
        let mut parts = scope.splitn(3, ':');
        let (Some("repository"), Some(repository), Some(wanted)) =
            (parts.next(), parts.next(), parts.next())
        else {
            return (400, format!("bad scope {scope:?}"));
        };
        let granted: Vec<&str> = wanted
            .split(',')
            .filter(|action| *action == "pull" || (authenticated && *action == "push"))
            .collect();
        let token = self.token(repository, &granted);
        (200, serde_json::json!({"token": token}).to_string())
    }
}

/// Starts the issuer on a loopback port; returns its realm URL.
async fn start_issuer(issuer: Arc<Issuer>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new().fallback(move |request: axum::extract::Request| {
        let issuer = issuer.clone();
        async move {
            let query = request.uri().query().unwrap_or_default().to_owned();
            let authorization = request
                .headers()
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let (status, body) = issuer.answer(&query, authorization.as_deref());
            (axum::http::StatusCode::from_u16(status).unwrap(), body)
        }
    });
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/token")
}

fn new_issuer() -> (Arc<Issuer>, String) {
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["olm-test-issuer".to_owned()]).unwrap();
    let cert = params.self_signed(&key).unwrap();
    let rng = ring::rand::SystemRandom::new();
    let signing = ring::signature::EcdsaKeyPair::from_pkcs8(
        &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
        &key.serialize_der(),
        &rng,
    )
    .unwrap();
    let issuer = Issuer {
        key: signing,
        cert_der: cert.der().to_vec(),
        requests: AtomicUsize::new(0),
    };
    (Arc::new(issuer), cert.pem())
}

#[tokio::test]
async fn bearer_tokens_from_the_challenge_realm() {
    let (issuer, root_pem) = new_issuer();
    let realm = start_issuer(issuer.clone()).await;
    let registry = Registry::start_with_token_auth(&realm, SERVICE, ISSUER, &root_pem).unwrap();
    let reference = Reference::parse(&format!("{}/olm/tokened:v1", registry.host())).unwrap();
    let image = ImageBuilder::new()
        .label(
            "operators.operatorframework.io.bundle.package.v1",
            "tokened",
        )
        .add_file("manifests/a.yaml", b"a: 1\n".to_vec())
        .unwrap()
        .build()
        .unwrap();

    // Anonymous clients get pull-only tokens: pushing is refused.
    let anonymous = Client::new(ClientOptions::default().plain_http(registry.host())).unwrap();
    let error = anonymous.push_image(&reference, &image).await.unwrap_err();
    assert!(matches!(error, Error::Unauthorized { .. }), "{error}");

    // Wrong credentials are refused by the token endpoint.
    let wrong = Client::new(
        ClientOptions::default()
            .plain_http(registry.host())
            .with_credentials(&registry.host(), Credentials::basic(USER, "nope")),
    )
    .unwrap();
    let error = wrong.push_image(&reference, &image).await.unwrap_err();
    assert!(matches!(error, Error::Unauthorized { .. }), "{error}");

    // The right ones get push: the image lands.
    let pusher = Client::new(
        ClientOptions::default()
            .plain_http(registry.host())
            .with_credentials(&registry.host(), Credentials::basic(USER, PASSWORD)),
    )
    .unwrap();
    let before = issuer.requests.load(Ordering::SeqCst);
    let digest = pusher.push_image(&reference, &image).await.unwrap();
    // One token for the whole push: it is cached per repository scope.
    assert_eq!(issuer.requests.load(Ordering::SeqCst) - before, 1);

    // Anonymous pulls work with a pull token.
    let pulled = anonymous
        .pull_to_memory(&reference, &ExtractOptions::default())
        .await
        .unwrap();
    assert_eq!(pulled.manifest.digest, digest);
    assert_eq!(pulled.files["manifests/a.yaml"], b"a: 1\n");
}
