//! The distribution API client: resolve, pull manifests and verified blobs,
//! push blobs and manifests, with anonymous, basic and bearer-token auth.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
    sync::{Arc, Mutex},
    time::Duration,
};

use bytes::Bytes;
use futures::StreamExt;
use reqwest::{Method, Response, StatusCode, header};
use sha2::{Digest as _, Sha256};
use tokio::io::AsyncWriteExt;

use crate::{
    auth::{Challenge, Credentials, DockerConfig, parse_challenges},
    digest::Digest,
    error::Error,
    manifest::{
        ACCEPT_MANIFESTS, Descriptor, ImageConfig, ImageManifest, MAX_MANIFEST_BYTES, Manifest,
        Platform,
    },
    reference::Reference,
};

/// Default timeout of one request (headers and body).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(300);
/// Default connect timeout.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest token-endpoint response read.
pub const MAX_TOKEN_RESPONSE_BYTES: usize = 1024 * 1024;
/// Longest config blob read.
pub const MAX_CONFIG_BYTES: u64 = 4 * 1024 * 1024;
/// Most bytes of a registry's error reply that are read; the rest is never
/// read, so a registry streaming an endless error body costs this much
/// memory and no more.
pub const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;
/// Longest registry error message quoted in an error (errors end up in
/// Kubernetes status and events).
pub const MAX_ERROR_MESSAGE_CHARS: usize = 512;
/// Most redirects followed for one request. Registries redirect blob
/// downloads once or twice (to a CDN or a blob store); more is a loop.
pub const MAX_REDIRECTS: usize = 10;

/// How to reach registries.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Registries (`host[:port]`, as in references) reached over plain HTTP
    /// instead of HTTPS; meant for loopback test registries.
    pub plain_http_hosts: BTreeSet<String>,
    /// Accept invalid TLS certificates (every host).
    pub skip_tls_verify: bool,
    /// Credentials by registry.
    pub credentials: DockerConfig,
    /// The platform picked from an index.
    pub platform: Platform,
    /// Timeout of one request.
    pub request_timeout: Duration,
    /// The User-Agent header.
    pub user_agent: String,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            plain_http_hosts: BTreeSet::new(),
            skip_tls_verify: false,
            credentials: DockerConfig::default(),
            platform: Platform::linux_amd64(),
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            user_agent: concat!("olm-oci/", env!("CARGO_PKG_VERSION")).to_owned(),
        }
    }
}

impl ClientOptions {
    /// Reaches `host` over plain HTTP.
    pub fn plain_http(mut self, host: impl Into<String>) -> Self {
        self.plain_http_hosts.insert(host.into());
        self
    }

    /// Uses `credentials` for `registry`.
    pub fn with_credentials(mut self, registry: &str, credentials: Credentials) -> Self {
        self.credentials.insert(registry, credentials);
        self
    }
}

/// An image's manifest, pinned by digest, with its config.
#[derive(Debug, Clone)]
pub struct PulledManifest {
    /// The digest of the image manifest (after platform selection).
    pub digest: Digest,
    /// The image manifest.
    pub manifest: ImageManifest,
    /// The image config.
    pub config: ImageConfig,
}

impl PulledManifest {
    /// The image's labels.
    pub fn labels(&self) -> BTreeMap<String, String> {
        self.config.config.labels.clone().unwrap_or_default()
    }
}

/// A distribution API client; cheap to clone, caches tokens.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    options: Arc<ClientOptions>,
    /// Authorization header values by (api host, scope).
    tokens: Arc<Mutex<BTreeMap<(String, String), String>>>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// What a request needs from the repository.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    Pull,
    Push,
}

impl Access {
    fn scope(self, repository: &str) -> String {
        match self {
            Self::Pull => format!("repository:{repository}:pull"),
            Self::Push => format!("repository:{repository}:pull,push"),
        }
    }
}

/// A request to build (again, after an auth challenge).
struct Request<'a> {
    method: Method,
    url: String,
    headers: Vec<(header::HeaderName, String)>,
    body: Option<Bytes>,
    reference: &'a Reference,
    access: Access,
}

impl Client {
    /// A client with `options`.
    pub fn new(options: ClientOptions) -> Result<Self, Error> {
        let http = reqwest::Client::builder()
            .user_agent(options.user_agent.clone())
            .redirect(reqwest::redirect::Policy::custom(|attempt| {
                // `previous` holds every URL asked so far, so its length is
                // the number of redirects including this one.
                let hops = attempt.previous().len();
                let check = match attempt.previous().last() {
                    Some(from) => redirect_allowed(from, attempt.url(), hops),
                    None => Ok(()),
                };
                match check {
                    Ok(()) => attempt.follow(),
                    Err(refused) => attempt.error(refused),
                }
            }))
            .connect_timeout(DEFAULT_CONNECT_TIMEOUT)
            .timeout(options.request_timeout)
            .danger_accept_invalid_certs(options.skip_tls_verify)
            .build()
            .map_err(|source| Error::Http {
                url: String::new(),
                source,
            })?;
        Ok(Self {
            http,
            options: Arc::new(options),
            tokens: Arc::default(),
        })
    }

    /// The options.
    pub fn options(&self) -> &ClientOptions {
        &self.options
    }

    fn base_url(&self, reference: &Reference) -> String {
        let scheme = if self.options.plain_http_hosts.contains(reference.registry())
            || self.options.plain_http_hosts.contains(reference.api_host())
        {
            "http"
        } else {
            "https"
        };
        format!(
            "{scheme}://{}/v2/{}",
            reference.api_host(),
            reference.repository()
        )
    }

    /// The digest `reference` points at: its own digest if pinned, else the
    /// `Docker-Content-Digest` of a HEAD request, else the sha256 of the
    /// manifest fetched with GET.
    pub async fn resolve(&self, reference: &Reference) -> Result<Digest, Error> {
        if let Some(digest) = reference.digest() {
            return Ok(digest.clone());
        }
        let url = format!(
            "{}/manifests/{}",
            self.base_url(reference),
            reference.manifest_reference()
        );
        let response = self
            .send(Request {
                method: Method::HEAD,
                url: url.clone(),
                headers: vec![(header::ACCEPT, ACCEPT_MANIFESTS.to_owned())],
                body: None,
                reference,
                access: Access::Pull,
            })
            .await?;
        let response = check_status(response, &url, reference).await?;
        if let Some(digest) = response
            .headers()
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<Digest>().ok())
        {
            return Ok(digest);
        }
        let (bytes, _) = self
            .manifest_bytes(reference, reference.manifest_reference())
            .await?;
        Ok(Digest::of(&bytes))
    }

    async fn manifest_bytes(
        &self,
        reference: &Reference,
        what: &str,
    ) -> Result<(Bytes, Option<String>), Error> {
        let url = format!("{}/manifests/{what}", self.base_url(reference));
        let response = self
            .send(Request {
                method: Method::GET,
                url: url.clone(),
                headers: vec![(header::ACCEPT, ACCEPT_MANIFESTS.to_owned())],
                body: None,
                reference,
                access: Access::Pull,
            })
            .await?;
        let response = check_status(response, &url, reference).await?;
        let content_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let bytes = read_capped(response, &url, MAX_MANIFEST_BYTES as u64).await?;
        Ok((bytes, content_type))
    }

    /// Fetches the manifest `reference` names (an image or an index),
    /// verified against the reference's digest when it has one; returns it
    /// with its digest.
    pub async fn fetch_manifest(&self, reference: &Reference) -> Result<(Manifest, Digest), Error> {
        let (bytes, content_type) = self
            .manifest_bytes(reference, reference.manifest_reference())
            .await?;
        let digest = Digest::of(&bytes);
        if let Some(expected) = reference.digest()
            && expected != &digest
        {
            return Err(Error::DigestMismatch {
                what: format!("manifest of {reference}"),
                expected: expected.clone(),
                actual: digest,
            });
        }
        let manifest =
            Manifest::parse(&bytes, content_type.as_deref()).map_err(|source| Error::Manifest {
                reference: reference.to_string(),
                source,
            })?;
        Ok((manifest, digest))
    }

    /// The image manifest for this client's platform (following an index)
    /// and the image config.
    pub async fn pull_manifest(&self, reference: &Reference) -> Result<PulledManifest, Error> {
        let (pulled, _) = self.pull_manifest_and_config(reference).await?;
        Ok(pulled)
    }

    /// [`Client::pull_manifest`], with the config blob as fetched.
    pub(crate) async fn pull_manifest_and_config(
        &self,
        reference: &Reference,
    ) -> Result<(PulledManifest, Bytes), Error> {
        let (manifest, digest) = self.fetch_manifest(reference).await?;
        let (manifest, digest) = match manifest {
            Manifest::Image(image) => (image, digest),
            Manifest::Index(index) => {
                let chosen =
                    index
                        .select(&self.options.platform)
                        .ok_or_else(|| Error::NoPlatform {
                            reference: reference.to_string(),
                            platform: format!(
                                "{}/{}",
                                self.options.platform.os, self.options.platform.architecture
                            ),
                        })?;
                let pinned = reference.with_digest(chosen.digest.clone());
                match self.fetch_manifest(&pinned).await? {
                    (Manifest::Image(image), digest) => (image, digest),
                    (Manifest::Index(_), _) => {
                        return Err(Error::NestedIndex {
                            reference: reference.to_string(),
                        });
                    }
                }
            }
        };
        let config_bytes = self
            .fetch_blob(reference, &manifest.config, MAX_CONFIG_BYTES)
            .await?;
        let config: ImageConfig =
            serde_json::from_slice(&config_bytes).map_err(|source| Error::Config {
                reference: reference.to_string(),
                source,
            })?;
        Ok((
            PulledManifest {
                digest,
                manifest,
                config,
            },
            config_bytes,
        ))
    }

    async fn blob_response(
        &self,
        reference: &Reference,
        digest: &Digest,
    ) -> Result<(Response, String), Error> {
        let url = format!("{}/blobs/{digest}", self.base_url(reference));
        let response = self
            .send(Request {
                method: Method::GET,
                url: url.clone(),
                headers: Vec::new(),
                body: None,
                reference,
                access: Access::Pull,
            })
            .await?;
        Ok((check_status(response, &url, reference).await?, url))
    }

    /// Fetches a blob into memory, refusing more than `max_bytes` or the
    /// descriptor's size, and checking its size and digest.
    pub async fn fetch_blob(
        &self,
        reference: &Reference,
        descriptor: &Descriptor,
        max_bytes: u64,
    ) -> Result<Bytes, Error> {
        check_declared_size(descriptor, max_bytes)?;
        let (response, url) = self.blob_response(reference, &descriptor.digest).await?;
        let mut body = Vec::new();
        let mut hasher = Sha256::new();
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|source| Error::Http {
                url: url.clone(),
                source,
            })?;
            if body.len() as u64 + chunk.len() as u64 > descriptor.size {
                return Err(Error::BlobTooLarge {
                    digest: descriptor.digest.clone(),
                    limit: descriptor.size,
                });
            }
            hasher.update(&chunk);
            body.extend_from_slice(&chunk);
        }
        verify(descriptor, body.len() as u64, hasher)?;
        Ok(Bytes::from(body))
    }

    /// Streams a blob into the file `path` (created or truncated), with the
    /// same checks as [`Client::fetch_blob`]; the file is removed on failure.
    pub async fn fetch_blob_to_file(
        &self,
        reference: &Reference,
        descriptor: &Descriptor,
        max_bytes: u64,
        path: &Path,
    ) -> Result<(), Error> {
        check_declared_size(descriptor, max_bytes)?;
        let (response, url) = self.blob_response(reference, &descriptor.digest).await?;
        let io_error = |source| Error::Io {
            path: path.display().to_string(),
            source,
        };
        let result = async {
            let mut file = tokio::fs::File::create(path).await.map_err(io_error)?;
            let mut hasher = Sha256::new();
            let mut written = 0u64;
            let mut stream = response.bytes_stream();
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|source| Error::Http {
                    url: url.clone(),
                    source,
                })?;
                written += chunk.len() as u64;
                if written > descriptor.size {
                    return Err(Error::BlobTooLarge {
                        digest: descriptor.digest.clone(),
                        limit: descriptor.size,
                    });
                }
                hasher.update(&chunk);
                file.write_all(&chunk).await.map_err(io_error)?;
            }
            file.flush().await.map_err(io_error)?;
            verify(descriptor, written, hasher)
        }
        .await;
        if result.is_err() {
            let _ = tokio::fs::remove_file(path).await;
        }
        result
    }

    /// Whether the repository has the blob.
    pub async fn blob_exists(&self, reference: &Reference, digest: &Digest) -> Result<bool, Error> {
        let url = format!("{}/blobs/{digest}", self.base_url(reference));
        let response = self
            .send(Request {
                method: Method::HEAD,
                url: url.clone(),
                headers: Vec::new(),
                body: None,
                reference,
                access: Access::Push,
            })
            .await?;
        match response.status() {
            StatusCode::OK => Ok(true),
            StatusCode::NOT_FOUND => Ok(false),
            _ => check_status(response, &url, reference).await.map(|_| false),
        }
    }

    /// Uploads a blob in one piece (POST then PUT), unless the repository
    /// already has it; returns whether it was uploaded.
    pub async fn push_blob(&self, reference: &Reference, bytes: Bytes) -> Result<bool, Error> {
        let digest = Digest::of(&bytes);
        if self.blob_exists(reference, &digest).await? {
            return Ok(false);
        }
        let url = format!("{}/blobs/uploads/", self.base_url(reference));
        let response = self
            .send(Request {
                method: Method::POST,
                url: url.clone(),
                headers: vec![(header::CONTENT_LENGTH, "0".to_owned())],
                body: Some(Bytes::new()),
                reference,
                access: Access::Push,
            })
            .await?;
        let response = check_status(response, &url, reference).await?;
        let location = response
            .headers()
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| Error::Protocol {
                url: url.clone(),
                message: "upload started without a Location header".into(),
            })?;
        let upload = resolve_location(&url, location);
        let separator = if upload.contains('?') { '&' } else { '?' };
        let put_url = format!("{upload}{separator}digest={digest}");
        let response = self
            .send(Request {
                method: Method::PUT,
                url: put_url.clone(),
                headers: vec![(header::CONTENT_TYPE, "application/octet-stream".to_owned())],
                body: Some(bytes),
                reference,
                access: Access::Push,
            })
            .await?;
        check_status(response, &put_url, reference).await?;
        Ok(true)
    }

    /// Uploads a manifest under the reference's tag (or digest); returns its
    /// digest.
    pub async fn push_manifest(
        &self,
        reference: &Reference,
        media_type: &str,
        bytes: Bytes,
    ) -> Result<Digest, Error> {
        let digest = Digest::of(&bytes);
        let url = format!(
            "{}/manifests/{}",
            self.base_url(reference),
            reference.tag().unwrap_or(digest.as_str())
        );
        let response = self
            .send(Request {
                method: Method::PUT,
                url: url.clone(),
                headers: vec![(header::CONTENT_TYPE, media_type.to_owned())],
                body: Some(bytes),
                reference,
                access: Access::Push,
            })
            .await?;
        check_status(response, &url, reference).await?;
        Ok(digest)
    }

    /// Sends a request, answering one authentication challenge.
    async fn send(&self, request: Request<'_>) -> Result<Response, Error> {
        let scope = request.access.scope(request.reference.repository());
        let key = (request.reference.api_host().to_owned(), scope.clone());
        let cached = self.tokens.lock().ok().and_then(|t| t.get(&key).cloned());
        let response = self.send_once(&request, cached.as_deref()).await?;
        if response.status() != StatusCode::UNAUTHORIZED {
            return Ok(response);
        }
        let challenges = response
            .headers()
            .get_all(header::WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(parse_challenges)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|source| Error::Challenge {
                url: request.url.clone(),
                source,
            })?
            .concat();
        let credentials = self
            .options
            .credentials
            .for_registry(request.reference.registry());
        let authorization = self
            .answer(&request.url, &challenges, credentials, &scope)
            .await?;
        let Some(authorization) = authorization else {
            return Ok(response);
        };
        if let Ok(mut tokens) = self.tokens.lock() {
            tokens.insert(key, authorization.clone());
        }
        self.send_once(&request, Some(&authorization)).await
    }

    async fn send_once(
        &self,
        request: &Request<'_>,
        authorization: Option<&str>,
    ) -> Result<Response, Error> {
        let mut builder = self.http.request(request.method.clone(), &request.url);
        for (name, value) in &request.headers {
            builder = builder.header(name, value);
        }
        if let Some(authorization) = authorization {
            builder = builder.header(header::AUTHORIZATION, authorization);
        }
        if let Some(body) = &request.body {
            builder = builder.body(body.clone());
        }
        builder.send().await.map_err(|source| Error::Http {
            url: request.url.clone(),
            source,
        })
    }

    /// The Authorization value answering `challenges`, if one can be given.
    async fn answer(
        &self,
        url: &str,
        challenges: &[Challenge],
        credentials: Option<&Credentials>,
        scope: &str,
    ) -> Result<Option<String>, Error> {
        if let Some(bearer) = challenges.iter().find(|c| c.scheme == "bearer") {
            return self
                .fetch_token(url, bearer, credentials, scope)
                .await
                .map(Some);
        }
        if challenges.iter().any(|c| c.scheme == "basic") {
            return Ok(credentials.and_then(Credentials::basic_header));
        }
        Ok(None)
    }

    /// The bearer-token flow: GET realm?service=…&scope=… (with basic
    /// credentials if any), or POST with a refresh token for an identity
    /// token; the answer's `token` or `access_token` is the bearer.
    async fn fetch_token(
        &self,
        url: &str,
        challenge: &Challenge,
        credentials: Option<&Credentials>,
        scope: &str,
    ) -> Result<String, Error> {
        let realm = challenge.param("realm").ok_or_else(|| Error::Protocol {
            url: url.to_owned(),
            message: "bearer challenge without realm".into(),
        })?;
        let realm_url = reqwest::Url::parse(realm).map_err(|_| Error::Protocol {
            url: url.to_owned(),
            message: format!("bearer realm {realm:?} is not a URL"),
        })?;
        // Ask for everything the operation needs (pull and push for a push),
        // not the narrower scope of the request that was challenged, so one
        // token serves the whole operation.
        let scope = scope.to_owned();
        let service = challenge.param("service").unwrap_or_default().to_owned();
        let builder = match credentials {
            Some(Credentials::IdentityToken(token)) => self.http.post(realm_url).form(&[
                ("grant_type", "refresh_token"),
                ("refresh_token", token.as_str()),
                ("service", service.as_str()),
                ("scope", scope.as_str()),
                ("client_id", "olm-oci"),
            ]),
            Some(Credentials::Basic { username, password }) => self
                .http
                .get(realm_url)
                .query(&[("service", service.as_str()), ("scope", scope.as_str())])
                .basic_auth(username, Some(password)),
            None => self
                .http
                .get(realm_url)
                .query(&[("service", service.as_str()), ("scope", scope.as_str())]),
        };
        let response = builder.send().await.map_err(|source| Error::Http {
            url: realm.to_owned(),
            source,
        })?;
        if !response.status().is_success() {
            return Err(Error::Unauthorized {
                url: url.to_owned(),
                message: format!("token endpoint {realm} answered {}", response.status()),
            });
        }
        let body = read_capped(response, realm, MAX_TOKEN_RESPONSE_BYTES as u64).await?;
        #[derive(serde::Deserialize)]
        struct TokenResponse {
            #[serde(default)]
            token: Option<String>,
            #[serde(default)]
            access_token: Option<String>,
        }
        let parsed: TokenResponse = serde_json::from_slice(&body).map_err(|e| Error::Protocol {
            url: realm.to_owned(),
            // Not `{e}`: serde quotes the strings it could not use, and
            // the endpoint's text must not reach Kubernetes status.
            message: format!(
                "token response of {} bytes is not a JSON object with a token (line {}, column {})",
                body.len(),
                e.line(),
                e.column()
            ),
        })?;
        let token = parsed
            .token
            .filter(|t| !t.is_empty())
            .or(parsed.access_token.filter(|t| !t.is_empty()))
            .ok_or_else(|| Error::Protocol {
                url: realm.to_owned(),
                message: "token response has neither token nor access_token".into(),
            })?;
        Ok(format!("Bearer {token}"))
    }
}

fn check_declared_size(descriptor: &Descriptor, max_bytes: u64) -> Result<(), Error> {
    if descriptor.size > max_bytes {
        return Err(Error::BlobTooLarge {
            digest: descriptor.digest.clone(),
            limit: max_bytes,
        });
    }
    Ok(())
}

fn verify(descriptor: &Descriptor, size: u64, hasher: Sha256) -> Result<(), Error> {
    let actual = Digest::from_hasher(hasher);
    if actual != descriptor.digest {
        return Err(Error::DigestMismatch {
            what: format!("blob of {size} bytes"),
            expected: descriptor.digest.clone(),
            actual,
        });
    }
    if size != descriptor.size {
        return Err(Error::SizeMismatch {
            digest: descriptor.digest.clone(),
            expected: descriptor.size,
            actual: size,
        });
    }
    Ok(())
}

/// Resolves an upload `Location` (absolute, or relative to the registry).
fn resolve_location(request_url: &str, location: &str) -> String {
    match reqwest::Url::parse(request_url).and_then(|base| base.join(location)) {
        Ok(url) => url.to_string(),
        Err(_) => location.to_owned(),
    }
}

async fn read_capped(response: Response, url: &str, max: u64) -> Result<Bytes, Error> {
    if response.content_length().is_some_and(|len| len > max) {
        return Err(Error::ResponseTooLarge {
            url: url.to_owned(),
            limit: max,
        });
    }
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|source| Error::Http {
            url: url.to_owned(),
            source,
        })?;
        if body.len() as u64 + chunk.len() as u64 > max {
            return Err(Error::ResponseTooLarge {
                url: url.to_owned(),
                limit: max,
            });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(body))
}

/// Why a redirect was not followed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RedirectRefused {
    /// From https to http: the rest of the exchange (and what it returns)
    /// would travel in clear.
    #[error("redirect from {from} to {to} downgrades https to http")]
    Downgrade {
        /// Where the redirect came from.
        from: String,
        /// Where it pointed.
        to: String,
    },
    /// To a scheme that is neither https nor http.
    #[error("redirect to {to} uses scheme {scheme:?}, not https or http")]
    Scheme {
        /// Where it pointed.
        to: String,
        /// Its scheme.
        scheme: String,
    },
    /// More redirects than [`MAX_REDIRECTS`].
    #[error("more than the limit of {limit} redirects")]
    TooMany {
        /// The limit.
        limit: usize,
    },
}

/// Whether a redirect from `from` to `to`, the `hops`-th of its request
/// (counting from 1), may be followed. Other hosts are allowed, since
/// registries send blob downloads to CDNs and blob stores; reqwest drops
/// the `Authorization` header when the host changes.
pub fn redirect_allowed(
    from: &reqwest::Url,
    to: &reqwest::Url,
    hops: usize,
) -> Result<(), RedirectRefused> {
    if hops > MAX_REDIRECTS {
        return Err(RedirectRefused::TooMany {
            limit: MAX_REDIRECTS,
        });
    }
    match to.scheme() {
        "https" => Ok(()),
        "http" if from.scheme() == "https" => Err(RedirectRefused::Downgrade {
            from: from.to_string(),
            to: to.to_string(),
        }),
        "http" => Ok(()),
        other => Err(RedirectRefused::Scheme {
            to: to.to_string(),
            scheme: other.to_owned(),
        }),
    }
}

/// Reads at most [`MAX_ERROR_BODY_BYTES`] of an error reply; says whether
/// more was there. A body that fails half-way counts as what was read.
async fn read_error_body(response: Response) -> (Vec<u8>, bool) {
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(Ok(chunk)) = stream.next().await {
        let room = MAX_ERROR_BODY_BYTES - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            // Dropping the stream here closes the connection instead of
            // draining the rest.
            return (body, true);
        }
        body.extend_from_slice(&chunk);
    }
    (body, false)
}

/// What an error reply says, fit to be quoted in an error: the messages of
/// an OCI distribution error body (`{"errors":[{"code","message"}]}`),
/// cut to [`MAX_ERROR_MESSAGE_CHARS`] and without control characters;
/// for anything else (HTML from a proxy, text, a cut body), only its size,
/// because such text is not the registry's answer and must not reach
/// Kubernetes status.
fn describe_error_body(body: &[u8], truncated: bool) -> String {
    #[derive(serde::Deserialize)]
    struct ErrorBody {
        errors: Vec<ErrorEntry>,
    }
    #[derive(serde::Deserialize)]
    struct ErrorEntry {
        #[serde(default)]
        code: String,
        #[serde(default)]
        message: String,
    }
    if truncated {
        return format!("reply of more than {MAX_ERROR_BODY_BYTES} bytes, not read further");
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return "empty reply".to_owned();
    }
    let parsed = match serde_json::from_slice::<ErrorBody>(body) {
        Ok(parsed) if !parsed.errors.is_empty() => parsed,
        Ok(_) => return format!("JSON reply of {} bytes without an error list", body.len()),
        Err(_) if serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok() => {
            return format!("JSON reply of {} bytes without an error list", body.len());
        }
        Err(_) => return format!("non-JSON reply of {} bytes", body.len()),
    };
    let text = parsed
        .errors
        .iter()
        .map(|e| match (e.code.is_empty(), e.message.is_empty()) {
            (false, false) => format!("{}: {}", e.code, e.message),
            (false, true) => e.code.clone(),
            _ => e.message.clone(),
        })
        .collect::<Vec<_>>()
        .join("; ");
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(MAX_ERROR_MESSAGE_CHARS)
        .collect()
}

/// Turns a non-success status into an error naming the reference.
async fn check_status(
    response: Response,
    url: &str,
    reference: &Reference,
) -> Result<Response, Error> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let (body, truncated) = read_error_body(response).await;
    let body = describe_error_body(&body, truncated);
    Err(match status {
        StatusCode::NOT_FOUND => Error::NotFound {
            reference: reference.to_string(),
            url: url.to_owned(),
        },
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => Error::Unauthorized {
            url: url.to_owned(),
            message: format!("{status}: {body}"),
        },
        _ => Error::Status {
            url: url.to_owned(),
            status: status.as_u16(),
            body,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upload_locations_resolve_against_the_registry() {
        assert_eq!(
            resolve_location(
                "http://127.0.0.1:5000/v2/a/blobs/uploads/",
                "/v2/a/blobs/uploads/uuid?_state=x"
            ),
            "http://127.0.0.1:5000/v2/a/blobs/uploads/uuid?_state=x"
        );
        assert_eq!(
            resolve_location(
                "http://127.0.0.1:5000/v2/a/blobs/uploads/",
                "https://cdn.example/up/1"
            ),
            "https://cdn.example/up/1"
        );
    }

    #[test]
    fn redirects_may_change_host_but_not_drop_tls() {
        let url = |s: &str| reqwest::Url::parse(s).unwrap();
        let downgrade = |from: &str, to: &str| {
            Err(RedirectRefused::Downgrade {
                from: from.to_owned(),
                to: to.to_owned(),
            })
        };
        let cases = [
            (
                "https to a CDN",
                "https://quay.io/v2/a/blobs/x",
                "https://cdn.quay.io/x",
                1,
                Ok(()),
            ),
            (
                "https to https on the same host",
                "https://quay.io/v2/a",
                "https://quay.io/v2/b",
                2,
                Ok(()),
            ),
            (
                "plain http test registry to another port",
                "http://127.0.0.1:5000/v2/a",
                "http://127.0.0.1:5001/b",
                1,
                Ok(()),
            ),
            (
                "http upgraded to https",
                "http://127.0.0.1:5000/v2/a",
                "https://cdn.example/b",
                1,
                Ok(()),
            ),
            (
                "https to http on another host",
                "https://quay.io/v2/a",
                "http://cdn.example/b",
                1,
                downgrade("https://quay.io/v2/a", "http://cdn.example/b"),
            ),
            (
                "https to http on the same host",
                "https://quay.io/v2/a",
                "http://quay.io/v2/a",
                1,
                downgrade("https://quay.io/v2/a", "http://quay.io/v2/a"),
            ),
            (
                "another scheme",
                "https://quay.io/v2/a",
                "file:///etc/passwd",
                1,
                Err(RedirectRefused::Scheme {
                    to: "file:///etc/passwd".to_owned(),
                    scheme: "file".to_owned(),
                }),
            ),
            (
                "the last redirect allowed",
                "https://a.example/",
                "https://b.example/",
                MAX_REDIRECTS,
                Ok(()),
            ),
            (
                "one redirect too many",
                "https://a.example/",
                "https://b.example/",
                MAX_REDIRECTS + 1,
                Err(RedirectRefused::TooMany {
                    limit: MAX_REDIRECTS,
                }),
            ),
        ];
        for (name, from, to, hops, want) in cases {
            assert_eq!(redirect_allowed(&url(from), &url(to), hops), want, "{name}");
        }
    }

    #[test]
    fn only_oci_error_messages_are_quoted() {
        let long_message = "m".repeat(MAX_ERROR_MESSAGE_CHARS * 2);
        let long_body = format!(r#"{{"errors":[{{"code":"DENIED","message":"{long_message}"}}]}}"#);
        let cases: [(&str, &[u8], bool, String); 8] = [
            (
                "an OCI error body",
                br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown","detail":{}}]}"#,
                false,
                "MANIFEST_UNKNOWN: manifest unknown".to_owned(),
            ),
            (
                "several errors, one without a message",
                br#"{"errors":[{"code":"DENIED","message":"no"},{"code":"UNAUTHORIZED"}]}"#,
                false,
                "DENIED: no; UNAUTHORIZED".to_owned(),
            ),
            (
                "control characters are blanked",
                br#"{"errors":[{"code":"X","message":"a\nb\u001b[31m"}]}"#,
                false,
                "X: a b [31m".to_owned(),
            ),
            (
                "a long message is cut",
                long_body.as_bytes(),
                false,
                format!("DENIED: {long_message}")
                    .chars()
                    .take(MAX_ERROR_MESSAGE_CHARS)
                    .collect(),
            ),
            (
                "a proxy's HTML page",
                b"<html><body>Welcome to <a href=\"http://evil\">nginx</a></body></html>",
                false,
                "non-JSON reply of 68 bytes".to_owned(),
            ),
            (
                "JSON that is not an error list",
                br#"{"message":"click http://evil.example"}"#,
                false,
                "JSON reply of 39 bytes without an error list".to_owned(),
            ),
            ("nothing", b"\n", false, "empty reply".to_owned()),
            (
                "a body cut at the read limit",
                br#"{"errors":[{"code":"X","message":"#,
                true,
                format!("reply of more than {MAX_ERROR_BODY_BYTES} bytes, not read further"),
            ),
        ];
        for (name, body, truncated, want) in cases {
            assert_eq!(describe_error_body(body, truncated), want, "{name}");
        }
    }

    #[test]
    fn plain_http_is_per_host() {
        let client = Client::new(ClientOptions::default().plain_http("127.0.0.1:5000")).unwrap();
        let local = Reference::parse("127.0.0.1:5000/a/b:t").unwrap();
        let remote = Reference::parse("quay.io/a/b:t").unwrap();
        assert_eq!(client.base_url(&local), "http://127.0.0.1:5000/v2/a/b");
        assert_eq!(client.base_url(&remote), "https://quay.io/v2/a/b");
        let hub = Reference::parse("busybox").unwrap();
        assert_eq!(
            client.base_url(&hub),
            "https://registry-1.docker.io/v2/library/busybox"
        );
    }

    #[test]
    fn declared_sizes_above_the_cap_are_refused_before_download() {
        let descriptor = Descriptor {
            media_type: "x".into(),
            digest: Digest::of(b""),
            size: 11,
            platform: None,
            annotations: BTreeMap::new(),
        };
        assert!(matches!(
            check_declared_size(&descriptor, 10),
            Err(Error::BlobTooLarge { .. })
        ));
        assert!(check_declared_size(&descriptor, 11).is_ok());
        let hasher = Sha256::new();
        assert!(matches!(
            verify(&descriptor, 0, hasher),
            Err(Error::SizeMismatch { .. })
        ));
        let hasher = Sha256::new_with_prefix(b"x");
        assert!(matches!(
            verify(&descriptor, 0, hasher),
            Err(Error::DigestMismatch { .. })
        ));
    }
}
