//! Authentication and authorization delegated to the kube-apiserver, as an
//! aggregated API server must do them:
//!
//! * requests the aggregator forwards carry a front-proxy client certificate
//!   signed by the requestheader CA (with an allowed name) and the user in
//!   `X-Remote-User` / `X-Remote-Group` / `X-Remote-Extra-*` headers;
//! * direct callers present a client certificate from the cluster's client
//!   CA, or a bearer token checked with a TokenReview;
//! * every authenticated request is authorized with a SubjectAccessReview.
//!
//! The CAs and header names come from the
//! `kube-system/extension-apiserver-authentication` ConfigMap. Anonymous
//! requests are refused. Results are cached briefly, as upstream's delegated
//! authenticator and authorizer do.

use std::{
    collections::{BTreeMap, HashMap},
    hash::Hash,
    sync::{Arc, Mutex, RwLock},
    time::{Duration, Instant},
};

use k8s_openapi::api::{
    authentication::v1::{TokenReview, TokenReviewSpec},
    authorization::v1::{
        NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
    },
};
use kube::api::{Api, PostParams};
use olm_api::package_manifest::GROUP;
use rustls::{
    DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme,
    client::danger::HandshakeSignatureValid,
    server::{
        WebPkiClientVerifier,
        danger::{ClientCertVerified, ClientCertVerifier},
    },
};
use rustls_pki_types::{CertificateDer, UnixTime, pem::PemObject};
use sha2::{Digest, Sha256};
use thiserror::Error;
use x509_parser::{certificate::X509Certificate, prelude::FromDer};

use crate::request::{RequestInfo, percent_decode};

/// Namespace of the ConfigMap that carries delegated authentication settings.
pub const AUTH_CONFIGMAP_NAMESPACE: &str = "kube-system";

/// Name of that ConfigMap.
pub const AUTH_CONFIGMAP_NAME: &str = "extension-apiserver-authentication";

/// How long TokenReview and SubjectAccessReview answers are reused (upstream's
/// delegated authenticator and authorizer default to 10 s).
pub const REVIEW_CACHE_TTL: Duration = Duration::from_secs(10);

/// Upper bound on cached review answers; the cache is cleared when full.
pub const MAX_CACHE_ENTRIES: usize = 4096;

/// Upper bound on a bearer token's length.
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// Upper bound on the groups and extra values taken from request headers.
pub const MAX_HEADER_VALUES: usize = 256;

/// Why authentication settings or a review failed.
#[derive(Debug, Error)]
pub enum AuthError {
    /// The ConfigMap's content is malformed.
    #[error("invalid {key} in {AUTH_CONFIGMAP_NAMESPACE}/{AUTH_CONFIGMAP_NAME}: {reason}")]
    Config {
        /// The ConfigMap key.
        key: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// A TokenReview or SubjectAccessReview could not be made.
    #[error("{review} failed: {source}")]
    Review {
        /// `TokenReview` or `SubjectAccessReview`.
        review: &'static str,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// rustls refused the CA set.
    #[error("client ca: {0}")]
    Tls(String),
}

/// Delegated authentication settings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AuthConfig {
    /// CAs of client certificates of direct callers (`client-ca-file`).
    pub client_ca: Vec<CertificateDer<'static>>,
    /// CAs of the front proxy (`requestheader-client-ca-file`).
    pub requestheader_ca: Vec<CertificateDer<'static>>,
    /// Common names a front-proxy certificate may carry; empty allows any.
    pub allowed_names: Vec<String>,
    /// Headers naming the user.
    pub username_headers: Vec<String>,
    /// Headers naming the user's UID.
    pub uid_headers: Vec<String>,
    /// Headers naming the user's groups.
    pub group_headers: Vec<String>,
    /// Prefixes of headers carrying extra user attributes.
    pub extra_prefixes: Vec<String>,
}

fn json_list(data: &BTreeMap<String, String>, key: &'static str) -> Result<Vec<String>, AuthError> {
    match data.get(key) {
        None => Ok(Vec::new()),
        Some(text) if text.trim().is_empty() => Ok(Vec::new()),
        Some(text) => serde_json::from_str(text).map_err(|e| AuthError::Config {
            key,
            reason: e.to_string(),
        }),
    }
}

fn pem_certs(
    data: &BTreeMap<String, String>,
    key: &'static str,
) -> Result<Vec<CertificateDer<'static>>, AuthError> {
    let Some(text) = data.get(key) else {
        return Ok(Vec::new());
    };
    CertificateDer::pem_slice_iter(text.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| AuthError::Config {
            key,
            reason: e.to_string(),
        })
}

impl AuthConfig {
    /// Reads the `extension-apiserver-authentication` ConfigMap's data.
    pub fn from_configmap(data: &BTreeMap<String, String>) -> Result<Self, AuthError> {
        Ok(Self {
            client_ca: pem_certs(data, "client-ca-file")?,
            requestheader_ca: pem_certs(data, "requestheader-client-ca-file")?,
            allowed_names: json_list(data, "requestheader-allowed-names")?,
            username_headers: json_list(data, "requestheader-username-headers")?,
            uid_headers: json_list(data, "requestheader-uid-headers")?,
            group_headers: json_list(data, "requestheader-group-headers")?,
            extra_prefixes: json_list(data, "requestheader-extra-headers-prefix")?,
        })
    }

    /// Every CA a client certificate may chain to.
    pub fn all_client_cas(&self) -> Vec<CertificateDer<'static>> {
        self.requestheader_ca
            .iter()
            .chain(&self.client_ca)
            .cloned()
            .collect()
    }
}

/// An authenticated user.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct User {
    /// User name.
    pub name: String,
    /// UID, when known.
    pub uid: Option<String>,
    /// Groups.
    pub groups: Vec<String>,
    /// Extra attributes.
    pub extra: BTreeMap<String, Vec<String>>,
}

/// The group every authenticated user belongs to (the API server's
/// authenticators add it; authorization rules such as `system:discovery`
/// rely on it).
pub const AUTHENTICATED_GROUP: &str = "system:authenticated";

fn with_authenticated_group(mut user: User) -> User {
    if !user.groups.iter().any(|g| g == AUTHENTICATED_GROUP) {
        user.groups.push(AUTHENTICATED_GROUP.to_owned());
    }
    user
}

/// The client certificates a TLS connection presented (leaf first).
#[derive(Debug, Clone, Default)]
pub struct PeerCertificates(pub Arc<Vec<CertificateDer<'static>>>);

fn signed_by_any(leaf: &X509Certificate<'_>, cas: &[CertificateDer<'_>]) -> bool {
    cas.iter().any(|der| {
        X509Certificate::from_der(der).is_ok_and(|(_, ca)| {
            leaf.issuer() == ca.subject() && leaf.verify_signature(Some(ca.public_key())).is_ok()
        })
    })
}

fn common_name(cert: &X509Certificate<'_>) -> Option<String> {
    cert.subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .map(str::to_owned)
}

fn header_values<'a>(headers: &'a http::HeaderMap, name: &str) -> impl Iterator<Item = &'a str> {
    headers.get_all(name).iter().filter_map(|v| v.to_str().ok())
}

/// How a request's certificate identifies its caller (the TLS layer has
/// already verified the chain and validity).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertIdentity {
    /// A front proxy vouching for the user named in the headers.
    FrontProxy(User),
    /// A front-proxy certificate with a name not allowed, or no user header.
    RejectedProxy(String),
    /// A direct caller with a client certificate.
    Client(User),
    /// No usable certificate.
    None,
}

/// Identifies the caller from its certificate and, for front proxies, the
/// request headers.
pub fn identify(
    config: &AuthConfig,
    peer: &[CertificateDer<'_>],
    headers: &http::HeaderMap,
) -> CertIdentity {
    let Some(leaf_der) = peer.first() else {
        return CertIdentity::None;
    };
    let Ok((_, leaf)) = X509Certificate::from_der(leaf_der) else {
        return CertIdentity::None;
    };
    let name = common_name(&leaf).unwrap_or_default();
    if signed_by_any(&leaf, &config.requestheader_ca) {
        if !config.allowed_names.is_empty() && !config.allowed_names.contains(&name) {
            return CertIdentity::RejectedProxy(format!(
                "front-proxy certificate name {name:?} is not allowed"
            ));
        }
        let user = config
            .username_headers
            .iter()
            .find_map(|h| header_values(headers, h).find(|v| !v.is_empty()));
        let Some(user) = user else {
            return CertIdentity::RejectedProxy("no user in the request headers".to_owned());
        };
        let uid = config
            .uid_headers
            .iter()
            .find_map(|h| header_values(headers, h).find(|v| !v.is_empty()))
            .map(str::to_owned);
        let groups: Vec<String> = config
            .group_headers
            .iter()
            .flat_map(|h| header_values(headers, h))
            .take(MAX_HEADER_VALUES)
            .map(str::to_owned)
            .collect();
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut count = 0;
        for (header, value) in headers {
            let header = header.as_str();
            for prefix in &config.extra_prefixes {
                let prefix = prefix.to_ascii_lowercase();
                if let Some(key) = header.strip_prefix(&prefix)
                    && let (Some(key), Ok(value)) = (percent_decode(key), value.to_str())
                    && count < MAX_HEADER_VALUES
                {
                    count += 1;
                    extra
                        .entry(key.to_ascii_lowercase())
                        .or_default()
                        .push(value.to_owned());
                }
            }
        }
        return CertIdentity::FrontProxy(with_authenticated_group(User {
            name: user.to_owned(),
            uid,
            groups,
            extra,
        }));
    }
    if signed_by_any(&leaf, &config.client_ca) && !name.is_empty() {
        let groups = leaf
            .subject()
            .iter_organization()
            .filter_map(|o| o.as_str().ok().map(str::to_owned))
            .collect();
        return CertIdentity::Client(with_authenticated_group(User {
            name,
            groups,
            ..User::default()
        }));
    }
    CertIdentity::None
}

/// The bearer token of an `Authorization` header, when well-formed.
pub fn bearer_token(headers: &http::HeaderMap) -> Option<&str> {
    let value = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty() && token.len() <= MAX_TOKEN_BYTES)
        .then_some(token)
}

/// A small time-bounded cache of review answers.
#[derive(Debug)]
struct TtlCache<K, V> {
    entries: HashMap<K, (Instant, V)>,
}

impl<K: Eq + Hash, V: Clone> TtlCache<K, V> {
    fn new() -> Self {
        Self {
            entries: HashMap::new(),
        }
    }

    fn get(&self, key: &K, now: Instant) -> Option<V> {
        self.entries
            .get(key)
            .filter(|(expires, _)| *expires > now)
            .map(|(_, v)| v.clone())
    }

    fn insert(&mut self, key: K, value: V, now: Instant) {
        if self.entries.len() >= MAX_CACHE_ENTRIES {
            self.entries.retain(|_, (expires, _)| *expires > now);
            if self.entries.len() >= MAX_CACHE_ENTRIES {
                self.entries.clear();
            }
        }
        self.entries.insert(key, (now + REVIEW_CACHE_TTL, value));
    }
}

/// The outcome of checking one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Authenticated and authorized.
    Allowed(User),
    /// Not authenticated (401).
    Unauthenticated(String),
    /// Authenticated but not authorized (403).
    Forbidden(User, String),
}

/// Delegated authentication and authorization.
pub struct Delegated {
    client: kube::Client,
    config: RwLock<Arc<AuthConfig>>,
    tokens: Mutex<TtlCache<[u8; 32], Option<User>>>,
    decisions: Mutex<TtlCache<(User, String), (bool, String)>>,
}

impl std::fmt::Debug for Delegated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delegated").finish_non_exhaustive()
    }
}

impl Delegated {
    /// Delegates to the API server behind `client`.
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            config: RwLock::new(Arc::new(AuthConfig::default())),
            tokens: Mutex::new(TtlCache::new()),
            decisions: Mutex::new(TtlCache::new()),
        }
    }

    /// Replaces the authentication settings.
    pub fn set_config(&self, config: AuthConfig) {
        *self
            .config
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(config);
    }

    /// The current authentication settings.
    pub fn config(&self) -> Arc<AuthConfig> {
        self.config
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    async fn token_user(&self, token: &str) -> Result<Option<User>, AuthError> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let now = Instant::now();
        if let Some(hit) = lock(&self.tokens).get(&key, now) {
            return Ok(hit);
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_owned()),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let api: Api<TokenReview> = Api::all(self.client.clone());
        let answer = api
            .create(&PostParams::default(), &review)
            .await
            .map_err(|source| AuthError::Review {
                review: "TokenReview",
                source,
            })?;
        let user = answer
            .status
            .filter(|s| s.authenticated == Some(true))
            .and_then(|s| s.user)
            .and_then(|u| {
                Some(User {
                    name: u.username?,
                    uid: u.uid,
                    groups: u.groups.unwrap_or_default(),
                    extra: u.extra.unwrap_or_default().into_iter().collect(),
                })
            });
        lock(&self.tokens).insert(key, user.clone(), now);
        Ok(user)
    }

    /// Authenticates and authorizes one request.
    pub async fn check(
        &self,
        info: &RequestInfo,
        peer: &[CertificateDer<'_>],
        headers: &http::HeaderMap,
    ) -> Result<Verdict, AuthError> {
        let config = self.config();
        let user = match identify(&config, peer, headers) {
            CertIdentity::FrontProxy(user) | CertIdentity::Client(user) => user,
            CertIdentity::RejectedProxy(why) => return Ok(Verdict::Unauthenticated(why)),
            CertIdentity::None => match bearer_token(headers) {
                Some(token) => match self.token_user(token).await? {
                    Some(user) => user,
                    None => return Ok(Verdict::Unauthenticated("invalid bearer token".into())),
                },
                None => {
                    return Ok(Verdict::Unauthenticated(
                        "anonymous requests are not allowed".into(),
                    ));
                }
            },
        };
        let (allowed, reason) = self.authorize(&user, info).await?;
        Ok(if allowed {
            Verdict::Allowed(user)
        } else {
            Verdict::Forbidden(user, reason)
        })
    }

    async fn authorize(
        &self,
        user: &User,
        info: &RequestInfo,
    ) -> Result<(bool, String), AuthError> {
        let spec = review_spec(user, info);
        let key = (
            user.clone(),
            format!(
                "{:?}",
                (&spec.resource_attributes, &spec.non_resource_attributes)
            ),
        );
        let now = Instant::now();
        if let Some(hit) = lock(&self.decisions).get(&key, now) {
            return Ok(hit);
        }
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let review = SubjectAccessReview {
            spec,
            ..SubjectAccessReview::default()
        };
        let answer = api
            .create(&PostParams::default(), &review)
            .await
            .map_err(|source| AuthError::Review {
                review: "SubjectAccessReview",
                source,
            })?;
        let status = answer.status.unwrap_or_default();
        let decision = (
            status.allowed && status.denied != Some(true),
            status.reason.unwrap_or_default(),
        );
        lock(&self.decisions).insert(key, decision.clone(), now);
        Ok(decision)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The SubjectAccessReview spec for a request.
pub fn review_spec(user: &User, info: &RequestInfo) -> SubjectAccessReviewSpec {
    let mut spec = SubjectAccessReviewSpec {
        user: Some(user.name.clone()),
        uid: user.uid.clone(),
        groups: Some(user.groups.clone()),
        extra: (!user.extra.is_empty()).then(|| user.extra.clone().into_iter().collect()),
        ..SubjectAccessReviewSpec::default()
    };
    match info {
        RequestInfo::Resource(r) => {
            spec.resource_attributes = Some(ResourceAttributes {
                group: Some(GROUP.to_owned()),
                version: Some(olm_api::package_manifest::VERSION.to_owned()),
                resource: Some(r.resource.clone()),
                subresource: r.subresource.clone(),
                namespace: r.namespace.clone(),
                name: r.name.clone(),
                verb: Some(r.verb.clone()),
                ..ResourceAttributes::default()
            });
        }
        RequestInfo::NonResource { path, verb } => {
            spec.non_resource_attributes = Some(NonResourceAttributes {
                path: Some(path.clone()),
                verb: Some(verb.clone()),
            });
        }
        RequestInfo::Health(_) => {}
    }
    spec
}

/// The message a 403 carries, as the API server words it.
pub fn forbidden_message(user: &User, info: &RequestInfo, reason: &str) -> String {
    let base = match info {
        RequestInfo::Resource(r) => {
            let resource = match &r.subresource {
                Some(sub) => format!("{}/{sub}", r.resource),
                None => r.resource.clone(),
            };
            let target = match &r.name {
                Some(name) => format!("{}.{GROUP} \"{name}\"", r.resource),
                None => format!("{}.{GROUP}", r.resource),
            };
            let scope = match &r.namespace {
                Some(ns) => format!(" in the namespace \"{ns}\""),
                None => " at the cluster scope".to_owned(),
            };
            format!(
                "{target} is forbidden: User \"{}\" cannot {} resource \"{resource}\" in API group \"{GROUP}\"{scope}",
                user.name, r.verb
            )
        }
        RequestInfo::NonResource { path, verb } => format!(
            "forbidden: User \"{}\" cannot {verb} path \"{path}\"",
            user.name
        ),
        RequestInfo::Health(path) => format!("forbidden: {path}"),
    };
    if reason.is_empty() {
        base
    } else {
        format!("{base}: {reason}")
    }
}

/// A client-certificate verifier over CAs that can be replaced while
/// serving. Client certificates are optional (token callers present none).
#[derive(Debug)]
pub struct ClientCaVerifier {
    inner: RwLock<Option<Arc<dyn ClientCertVerifier>>>,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl ClientCaVerifier {
    /// A verifier that accepts no client certificate until CAs are set.
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            inner: RwLock::new(None),
            provider: olm_certs::reload::provider(),
        })
    }

    /// Trusts exactly `cas` from now on.
    pub fn set_cas(&self, cas: Vec<CertificateDer<'static>>) -> Result<(), AuthError> {
        let verifier = if cas.is_empty() {
            None
        } else {
            let mut roots = RootCertStore::empty();
            for ca in cas {
                roots.add(ca).map_err(|e| AuthError::Tls(e.to_string()))?;
            }
            Some(
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), self.provider.clone())
                    .allow_unauthenticated()
                    .build()
                    .map_err(|e| AuthError::Tls(e.to_string()))?,
            )
        };
        *self
            .inner
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = verifier;
        Ok(())
    }

    fn current(&self) -> Option<Arc<dyn ClientCertVerifier>> {
        self.inner
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

impl ClientCertVerifier for ClientCaVerifier {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        // No hints: clients with one certificate send it anyway.
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        match self.current() {
            Some(v) => v.verify_client_cert(end_entity, intermediates, now),
            None => Err(rustls::Error::General("no client ca is loaded yet".into())),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

    use super::*;

    struct Ca {
        der: CertificateDer<'static>,
        issuer: Issuer<'static, KeyPair>,
    }

    fn ca(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Ca {
            der: cert.der().clone(),
            issuer: Issuer::new(params, key),
        }
    }

    fn client(ca: &Ca, cn: &str, org: Option<&str>) -> CertificateDer<'static> {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        if let Some(org) = org {
            params
                .distinguished_name
                .push(DnType::OrganizationName, org);
        }
        let key = KeyPair::generate().unwrap();
        params.signed_by(&key, &ca.issuer).unwrap().der().clone()
    }

    fn config(proxy: &Ca, clients: &Ca) -> AuthConfig {
        AuthConfig {
            client_ca: vec![clients.der.clone()],
            requestheader_ca: vec![proxy.der.clone()],
            allowed_names: vec!["front-proxy-client".into()],
            username_headers: vec!["X-Remote-User".into()],
            uid_headers: vec![],
            group_headers: vec!["X-Remote-Group".into()],
            extra_prefixes: vec!["X-Remote-Extra-".into()],
        }
    }

    fn headers(pairs: &[(&str, &str)]) -> http::HeaderMap {
        let mut h = http::HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                http::HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn identities_follow_the_delegation_rules() {
        let proxy = ca("front-proxy-ca");
        let clients = ca("cluster-ca");
        let rogue = ca("rogue-ca");
        let cfg = config(&proxy, &clients);
        let user_headers = headers(&[
            ("X-Remote-User", "alice"),
            ("X-Remote-Group", "devs"),
            ("X-Remote-Group", "system:authenticated"),
            ("X-Remote-Extra-Scopes%2Fone", "a"),
        ]);
        let proxied = identify(
            &cfg,
            &[client(&proxy, "front-proxy-client", None)],
            &user_headers,
        );
        let CertIdentity::FrontProxy(user) = proxied else {
            panic!("{proxied:?}");
        };
        assert_eq!(user.name, "alice");
        assert_eq!(
            user.groups,
            ["devs", "system:authenticated"],
            "not added twice"
        );
        let lone = identify(
            &cfg,
            &[client(&proxy, "front-proxy-client", None)],
            &headers(&[("X-Remote-User", "system:aggregator")]),
        );
        let CertIdentity::FrontProxy(lone) = lone else {
            panic!("{lone:?}")
        };
        assert_eq!(
            lone.groups,
            ["system:authenticated"],
            "every authenticated user is in system:authenticated"
        );
        assert_eq!(user.extra["scopes/one"], ["a"]);

        let table = [
            (
                "proxy name not allowed",
                identify(&cfg, &[client(&proxy, "someone-else", None)], &user_headers),
            ),
            (
                "proxy without user",
                identify(
                    &cfg,
                    &[client(&proxy, "front-proxy-client", None)],
                    &headers(&[]),
                ),
            ),
        ];
        for (name, got) in table {
            assert!(
                matches!(got, CertIdentity::RejectedProxy(_)),
                "{name}: {got:?}"
            );
        }
        // Headers from a direct client are ignored: the certificate names the user.
        let direct = identify(
            &cfg,
            &[client(&clients, "bob", Some("admins"))],
            &user_headers,
        );
        assert_eq!(
            direct,
            CertIdentity::Client(User {
                name: "bob".into(),
                groups: vec!["admins".into(), "system:authenticated".into()],
                ..User::default()
            })
        );
        assert_eq!(
            identify(
                &cfg,
                &[client(&rogue, "front-proxy-client", None)],
                &user_headers
            ),
            CertIdentity::None
        );
        assert_eq!(identify(&cfg, &[], &user_headers), CertIdentity::None);
        assert_eq!(
            identify(&cfg, &[CertificateDer::from(vec![1, 2, 3])], &user_headers),
            CertIdentity::None
        );
    }

    #[test]
    fn header_values_are_bounded() {
        let proxy = ca("front-proxy-ca");
        let clients = ca("cluster-ca");
        let cfg = config(&proxy, &clients);
        let mut h = headers(&[("X-Remote-User", "alice")]);
        for i in 0..MAX_HEADER_VALUES + 10 {
            h.append(
                "X-Remote-Group",
                http::HeaderValue::from_str(&format!("g{i}")).unwrap(),
            );
        }
        let CertIdentity::FrontProxy(user) =
            identify(&cfg, &[client(&proxy, "front-proxy-client", None)], &h)
        else {
            panic!("front proxy expected");
        };
        // The bounded header groups plus system:authenticated.
        assert_eq!(user.groups.len(), MAX_HEADER_VALUES + 1);
    }

    #[test]
    fn configmap_parses_and_rejects_garbage() {
        let proxy = ca("front-proxy-ca");
        let pem = format!(
            "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
            base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &proxy.der)
        );
        let data = BTreeMap::from([
            ("requestheader-client-ca-file".to_owned(), pem.clone()),
            ("client-ca-file".to_owned(), pem),
            (
                "requestheader-allowed-names".to_owned(),
                r#"["front-proxy-client"]"#.to_owned(),
            ),
            (
                "requestheader-username-headers".to_owned(),
                r#"["X-Remote-User"]"#.to_owned(),
            ),
            (
                "requestheader-group-headers".to_owned(),
                r#"["X-Remote-Group"]"#.to_owned(),
            ),
            (
                "requestheader-extra-headers-prefix".to_owned(),
                r#"["X-Remote-Extra-"]"#.to_owned(),
            ),
        ]);
        let cfg = AuthConfig::from_configmap(&data).unwrap();
        assert_eq!(cfg.requestheader_ca.len(), 1);
        assert_eq!(cfg.allowed_names, ["front-proxy-client"]);
        assert_eq!(cfg.all_client_cas().len(), 2);
        let mut bad = data.clone();
        bad.insert("requestheader-allowed-names".into(), "not json".into());
        assert!(AuthConfig::from_configmap(&bad).is_err());
        let mut bad = data;
        bad.insert(
            "client-ca-file".into(),
            "-----BEGIN CERTIFICATE-----\n!!\n-----END CERTIFICATE-----\n".into(),
        );
        assert!(AuthConfig::from_configmap(&bad).is_err());
    }

    #[test]
    fn bearer_tokens_are_bounded() {
        assert_eq!(
            bearer_token(&headers(&[("Authorization", "Bearer abc")])),
            Some("abc")
        );
        assert_eq!(
            bearer_token(&headers(&[("Authorization", "bearer abc")])),
            Some("abc")
        );
        assert_eq!(
            bearer_token(&headers(&[("Authorization", "Basic abc")])),
            None
        );
        assert_eq!(
            bearer_token(&headers(&[("Authorization", "Bearer ")])),
            None
        );
        let long = format!("Bearer {}", "a".repeat(MAX_TOKEN_BYTES + 1));
        assert_eq!(bearer_token(&headers(&[("Authorization", &long)])), None);
    }

    #[test]
    fn review_specs_and_messages_name_the_request() {
        let info = RequestInfo::parse(
            &http::Method::GET,
            "/apis/packages.operators.coreos.com/v1/namespaces/team/packagemanifests",
            None,
        );
        let user = User {
            name: "system:serviceaccount:team:bot".into(),
            ..User::default()
        };
        let spec = review_spec(&user, &info);
        let attrs = spec.resource_attributes.unwrap();
        assert_eq!(attrs.verb.as_deref(), Some("list"));
        assert_eq!(attrs.namespace.as_deref(), Some("team"));
        assert_eq!(attrs.group.as_deref(), Some(GROUP));
        assert_eq!(
            forbidden_message(&user, &info, ""),
            "packagemanifests.packages.operators.coreos.com is forbidden: User \"system:serviceaccount:team:bot\" cannot list resource \"packagemanifests\" in API group \"packages.operators.coreos.com\" in the namespace \"team\""
        );
        let discovery = RequestInfo::parse(&http::Method::GET, "/apis", None);
        assert_eq!(
            review_spec(&user, &discovery)
                .non_resource_attributes
                .unwrap()
                .path
                .as_deref(),
            Some("/apis")
        );
    }

    #[test]
    fn cache_is_bounded_and_expires() {
        let mut cache = TtlCache::new();
        let now = Instant::now();
        for i in 0..=MAX_CACHE_ENTRIES {
            cache.insert(i, i, now);
        }
        assert!(cache.entries.len() <= MAX_CACHE_ENTRIES);
        cache.insert(usize::MAX, 1, now);
        assert_eq!(cache.get(&usize::MAX, now), Some(1));
        assert_eq!(cache.get(&usize::MAX, now + REVIEW_CACHE_TTL), None);
    }
}
