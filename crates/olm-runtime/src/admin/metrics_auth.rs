//! Who may read the secured `/metrics`: the caller's bearer token is checked
//! with a TokenReview (`authentication.k8s.io/v1`), and the user it names is
//! authorized with a SubjectAccessReview (`authorization.k8s.io/v1`) for
//! `get` on the non-resource URL `/metrics`, as kube-rbac-proxy does. A
//! Prometheus in the cluster is then let in by an RBAC rule such as
//!
//! ```yaml
//! rules:
//! - nonResourceURLs: ["/metrics"]
//!   verbs: ["get"]
//! ```
//!
//! The decision is split so that it can be tested without a cluster:
//! [`bearer_token`] and [`status_of`] are pure, the API server is behind the
//! [`TokenReviewer`] seam ([`KubeTokenReviewer`] in production), and
//! [`MetricsAuthorizer`] adds a short-lived cache of allowed tokens so that
//! every scrape does not cost two API requests.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use futures::future::BoxFuture;
use http::{HeaderValue, StatusCode};
use k8s_openapi::api::{
    authentication::v1::{TokenReview, TokenReviewSpec},
    authorization::v1::{NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec},
};
use kube::api::{Api, PostParams};
use sha2::{Digest, Sha256};

use crate::error::kube_error_category;

/// The non-resource URL a caller must be allowed to read.
pub const METRICS_PATH: &str = "/metrics";

/// The verb a caller must be allowed on [`METRICS_PATH`] (what an HTTP GET
/// maps to in Kubernetes authorization).
pub const METRICS_VERB: &str = "get";

/// How long an allowed token is let in without asking the API server again.
/// Prometheus scrapes every 15 to 60 s, so this saves most reviews while a
/// revoked token or RoleBinding stops working within half a minute.
pub const ALLOWED_CACHE_TTL: Duration = Duration::from_secs(30);

/// Upper bound on cached allowed tokens: far more scrapers than any cluster
/// runs, yet a few hundred KiB at most.
pub const MAX_CACHED_TOKENS: usize = 1024;

/// Upper bound on a bearer token's length; service account tokens are about
/// 1 KiB, and anything much longer is not worth sending to the API server.
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// Deadline of each review request, so that a slow API server fails a scrape
/// instead of holding connections open until Prometheus gives up.
pub const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the API server could not be asked about a token.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// The TokenReview request failed.
    #[error("token review failed")]
    TokenReview {
        /// The underlying cause.
        #[source]
        source: Box<kube::Error>,
    },

    /// The SubjectAccessReview request failed.
    #[error("subject access review failed")]
    SubjectAccessReview {
        /// The underlying cause.
        #[source]
        source: Box<kube::Error>,
    },

    /// A review request did not finish within [`REVIEW_TIMEOUT`].
    #[error("{review} timed out after {timeout:?}")]
    Timeout {
        /// `TokenReview` or `SubjectAccessReview`.
        review: &'static str,
        /// How long it waited.
        timeout: Duration,
    },
}

impl ReviewError {
    /// A short, stable, lowercase name for the kind of failure (see
    /// [`kube_error_category`]); `kube_forbidden` usually means this
    /// service's account may not create the reviews.
    pub fn category(&self) -> &'static str {
        match self {
            Self::TokenReview { source } | Self::SubjectAccessReview { source } => {
                kube_error_category(source)
            }
            Self::Timeout { .. } => "kube_timeout",
        }
    }
}

/// What the API server said about one token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReviewOutcome {
    /// The token names nobody (invalid, expired, or for another audience).
    Unauthenticated,
    /// The token names `user`, who may not read the metrics.
    Denied {
        /// The user the token names.
        user: String,
        /// The authorizer's reason, often empty.
        reason: String,
    },
    /// The token names `user`, who may read the metrics.
    Allowed {
        /// The user the token names.
        user: String,
    },
}

/// Asks whether a bearer token may read the metrics: the seam between the
/// decision and the API server, so that tests can answer without a cluster.
pub trait TokenReviewer: Send + Sync {
    /// Reviews `token`; an `Err` means no answer could be had (it is never
    /// cached).
    fn review<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<ReviewOutcome, ReviewError>>;
}

/// A [`TokenReviewer`] that asks the API server behind a client: a
/// TokenReview, then a SubjectAccessReview for `get` on `/metrics`.
///
/// The client is the service's own, so its service account needs `create` on
/// `tokenreviews` (`authentication.k8s.io`) and `subjectaccessreviews`
/// (`authorization.k8s.io`), as the `system:auth-delegator` ClusterRole
/// grants; without them every scrape fails with 500 and a `kube_forbidden`
/// warning in the log.
#[derive(Clone)]
pub struct KubeTokenReviewer {
    client: kube::Client,
}

impl std::fmt::Debug for KubeTokenReviewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeTokenReviewer").finish_non_exhaustive()
    }
}

/// The user a TokenReview vouched for, as a SubjectAccessReview needs it.
struct ReviewedUser {
    name: String,
    uid: Option<String>,
    groups: Vec<String>,
    extra: BTreeMap<String, Vec<String>>,
}

impl KubeTokenReviewer {
    /// Reviews tokens with `client`'s identity.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }

    async fn authenticate(&self, token: &str) -> Result<Option<ReviewedUser>, ReviewError> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_owned()),
                // The API server's own audiences: tokens minted for anything
                // else are not meant for us.
                audiences: None,
            },
            ..TokenReview::default()
        };
        let api: Api<TokenReview> = Api::all(self.client.clone());
        let answer =
            tokio::time::timeout(REVIEW_TIMEOUT, api.create(&PostParams::default(), &review))
                .await
                .map_err(|_| ReviewError::Timeout {
                    review: "TokenReview",
                    timeout: REVIEW_TIMEOUT,
                })?
                .map_err(|source| ReviewError::TokenReview {
                    source: Box::new(source),
                })?;
        Ok(answer
            .status
            .filter(|status| status.authenticated == Some(true))
            .and_then(|status| status.user)
            .and_then(|user| {
                Some(ReviewedUser {
                    name: user.username.filter(|name| !name.is_empty())?,
                    uid: user.uid,
                    groups: user.groups.unwrap_or_default(),
                    extra: user.extra.unwrap_or_default(),
                })
            }))
    }

    async fn authorize(&self, user: &ReviewedUser) -> Result<(bool, String), ReviewError> {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.name.clone()),
                uid: user.uid.clone(),
                groups: Some(user.groups.clone()),
                extra: Some(user.extra.clone()),
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(METRICS_PATH.to_owned()),
                    verb: Some(METRICS_VERB.to_owned()),
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let answer =
            tokio::time::timeout(REVIEW_TIMEOUT, api.create(&PostParams::default(), &review))
                .await
                .map_err(|_| ReviewError::Timeout {
                    review: "SubjectAccessReview",
                    timeout: REVIEW_TIMEOUT,
                })?
                .map_err(|source| ReviewError::SubjectAccessReview {
                    source: Box::new(source),
                })?;
        let status = answer.status.unwrap_or_default();
        Ok((
            status.allowed && status.denied != Some(true),
            status.reason.unwrap_or_default(),
        ))
    }
}

impl TokenReviewer for KubeTokenReviewer {
    fn review<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<ReviewOutcome, ReviewError>> {
        Box::pin(async move {
            let Some(user) = self.authenticate(token).await? else {
                return Ok(ReviewOutcome::Unauthenticated);
            };
            let (allowed, reason) = self.authorize(&user).await?;
            Ok(if allowed {
                ReviewOutcome::Allowed { user: user.name }
            } else {
                ReviewOutcome::Denied {
                    user: user.name,
                    reason,
                }
            })
        })
    }
}

/// The token of an `Authorization: Bearer <token>` header value; `None` when
/// the header is missing, of another scheme, empty or longer than
/// [`MAX_TOKEN_BYTES`].
pub fn bearer_token(authorization: Option<&HeaderValue>) -> Option<&str> {
    let value = authorization?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty() && token.len() <= MAX_TOKEN_BYTES)
        .then_some(token)
}

/// The status a request earns from its review: 200 when allowed, 401 when
/// the token names nobody, 403 when its user is denied, and 500 when the API
/// server could not be asked (the caller may be entitled; it should retry).
pub fn status_of(outcome: &Result<ReviewOutcome, ReviewError>) -> StatusCode {
    match outcome {
        Ok(ReviewOutcome::Allowed { .. }) => StatusCode::OK,
        Ok(ReviewOutcome::Unauthenticated) => StatusCode::UNAUTHORIZED,
        Ok(ReviewOutcome::Denied { .. }) => StatusCode::FORBIDDEN,
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The tokens recently allowed, keyed by their SHA-256 so that no token is
/// kept in memory longer than its request, each with its expiry.
#[derive(Debug, Default)]
struct AllowedTokens {
    expiries: HashMap<[u8; 32], Instant>,
}

impl AllowedTokens {
    fn is_allowed(&self, key: &[u8; 32], now: Instant) -> bool {
        self.expiries.get(key).is_some_and(|expiry| *expiry > now)
    }

    fn allow(&mut self, key: [u8; 32], now: Instant) {
        if self.expiries.len() >= MAX_CACHED_TOKENS && !self.expiries.contains_key(&key) {
            self.expiries.retain(|_, expiry| *expiry > now);
            if self.expiries.len() >= MAX_CACHED_TOKENS {
                // Still full of live entries: the one closest to expiry is
                // the cheapest to lose.
                let soonest = self
                    .expiries
                    .iter()
                    .min_by_key(|(_, expiry)| **expiry)
                    .map(|(key, _)| *key);
                if let Some(soonest) = soonest {
                    self.expiries.remove(&soonest);
                }
            }
        }
        self.expiries.insert(key, now + ALLOWED_CACHE_TTL);
    }
}

/// Decides who may read the secured `/metrics`: [`bearer_token`], then a
/// cache of allowed tokens ([`ALLOWED_CACHE_TTL`], [`MAX_CACHED_TOKENS`]),
/// then the [`TokenReviewer`]. Only allowed answers are cached: a denied
/// caller granted RBAC is let in on its next scrape, and a failed review is
/// asked again.
pub struct MetricsAuthorizer {
    reviewer: Arc<dyn TokenReviewer>,
    allowed: Mutex<AllowedTokens>,
}

impl std::fmt::Debug for MetricsAuthorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsAuthorizer").finish_non_exhaustive()
    }
}

impl MetricsAuthorizer {
    /// Decides with `reviewer`'s answers.
    pub fn new(reviewer: Arc<dyn TokenReviewer>) -> Self {
        Self {
            reviewer,
            allowed: Mutex::default(),
        }
    }

    /// The status for a request with this `Authorization` header arriving at
    /// `now`: 200 lets it read the metrics, anything else is the answer.
    pub async fn check(&self, authorization: Option<&HeaderValue>, now: Instant) -> StatusCode {
        let Some(token) = bearer_token(authorization) else {
            return StatusCode::UNAUTHORIZED;
        };
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if self.lock().is_allowed(&key, now) {
            return StatusCode::OK;
        }
        let outcome = self.reviewer.review(token).await;
        match &outcome {
            Ok(ReviewOutcome::Allowed { user }) => {
                tracing::debug!(user, "metrics reader allowed");
                self.lock().allow(key, now);
            }
            Ok(ReviewOutcome::Denied { user, reason }) => {
                tracing::debug!(user, reason, "metrics reader denied");
            }
            Ok(ReviewOutcome::Unauthenticated) => {
                tracing::debug!("metrics reader's token is not valid");
            }
            Err(error) => tracing::warn!(
                error = error as &dyn std::error::Error,
                category = error.category(),
                "cannot review a metrics reader's token"
            ),
        }
        status_of(&outcome)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, AllowedTokens> {
        // The map is only ever replaced entry by entry: a panic elsewhere
        // cannot leave it inconsistent.
        self.allowed.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use kube::core::Status;

    use super::*;

    /// Answers from a fixed table of tokens and counts the questions.
    struct TableReviewer {
        calls: AtomicUsize,
    }

    /// A token the table lets in.
    const READER_TOKEN: &str = "sample-reader-token";
    /// A valid token whose user lacks RBAC.
    const OUTSIDER_TOKEN: &str = "sample-outsider-token";
    /// A token whose review fails (the API server is unreachable).
    const UNLUCKY_TOKEN: &str = "sample-unlucky-token";

    impl TokenReviewer for TableReviewer {
        fn review<'a>(
            &'a self,
            token: &'a str,
        ) -> BoxFuture<'a, Result<ReviewOutcome, ReviewError>> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let outcome = match token {
                READER_TOKEN => Ok(ReviewOutcome::Allowed {
                    user: "system:serviceaccount:sample-monitoring:sample-prometheus".to_owned(),
                }),
                OUTSIDER_TOKEN => Ok(ReviewOutcome::Denied {
                    user: "system:serviceaccount:sample-apps:sample-outsider".to_owned(),
                    reason: String::new(),
                }),
                UNLUCKY_TOKEN => Err(ReviewError::TokenReview {
                    source: Box::new(kube::Error::Api(
                        Status::failure("sample outage", "ServiceUnavailable")
                            .with_code(503)
                            .boxed(),
                    )),
                }),
                _ => Ok(ReviewOutcome::Unauthenticated),
            };
            Box::pin(async move { outcome })
        }
    }

    fn authorizer() -> (MetricsAuthorizer, Arc<TableReviewer>) {
        let reviewer = Arc::new(TableReviewer {
            calls: AtomicUsize::new(0),
        });
        (MetricsAuthorizer::new(reviewer.clone()), reviewer)
    }

    fn bearer(token: &str) -> HeaderValue {
        HeaderValue::from_str(&format!("Bearer {token}")).expect("valid header")
    }

    #[test]
    fn bearer_tokens_are_read_from_well_formed_headers_only() {
        let header = |text: &str| HeaderValue::from_str(text).expect("valid header");
        assert_eq!(bearer_token(Some(&header("Bearer abc"))), Some("abc"));
        assert_eq!(bearer_token(Some(&header("bearer  abc "))), Some("abc"));
        assert_eq!(bearer_token(None), None);
        assert_eq!(bearer_token(Some(&header("Basic YWxhZGRpbjpv"))), None);
        assert_eq!(bearer_token(Some(&header("Bearer"))), None);
        assert_eq!(bearer_token(Some(&header("Bearer   "))), None);
        let huge = format!("Bearer {}", "t".repeat(MAX_TOKEN_BYTES + 1));
        assert_eq!(bearer_token(Some(&header(&huge))), None);
    }

    #[test]
    fn each_outcome_earns_its_status() {
        let cases = [
            (
                Ok(ReviewOutcome::Allowed {
                    user: "sample-user".to_owned(),
                }),
                StatusCode::OK,
            ),
            (Ok(ReviewOutcome::Unauthenticated), StatusCode::UNAUTHORIZED),
            (
                Ok(ReviewOutcome::Denied {
                    user: "sample-user".to_owned(),
                    reason: String::new(),
                }),
                StatusCode::FORBIDDEN,
            ),
            (
                Err(ReviewError::Timeout {
                    review: "TokenReview",
                    timeout: REVIEW_TIMEOUT,
                }),
                StatusCode::INTERNAL_SERVER_ERROR,
            ),
        ];
        for (outcome, status) in cases {
            assert_eq!(status_of(&outcome), status, "{outcome:?}");
        }
    }

    #[tokio::test]
    async fn requests_without_a_token_are_refused_unasked() {
        let (authorizer, reviewer) = authorizer();
        let now = Instant::now();
        assert_eq!(authorizer.check(None, now).await, StatusCode::UNAUTHORIZED);
        let basic = HeaderValue::from_static("Basic c2FtcGxlOnNhbXBsZQ==");
        assert_eq!(
            authorizer.check(Some(&basic), now).await,
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(reviewer.calls.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn allowed_tokens_are_reused_until_the_ttl_passes() {
        let (authorizer, reviewer) = authorizer();
        let start = Instant::now();
        let header = bearer(READER_TOKEN);
        assert_eq!(authorizer.check(Some(&header), start).await, StatusCode::OK);
        let within = start + ALLOWED_CACHE_TTL - Duration::from_secs(1);
        assert_eq!(
            authorizer.check(Some(&header), within).await,
            StatusCode::OK
        );
        assert_eq!(reviewer.calls.load(Ordering::SeqCst), 1, "cached");
        let after = start + ALLOWED_CACHE_TTL;
        assert_eq!(authorizer.check(Some(&header), after).await, StatusCode::OK);
        assert_eq!(reviewer.calls.load(Ordering::SeqCst), 2, "asked again");
    }

    #[tokio::test]
    async fn refusals_and_failures_are_never_cached() {
        let (authorizer, reviewer) = authorizer();
        let now = Instant::now();
        for (token, status) in [
            ("sample-forged-token", StatusCode::UNAUTHORIZED),
            (OUTSIDER_TOKEN, StatusCode::FORBIDDEN),
            (UNLUCKY_TOKEN, StatusCode::INTERNAL_SERVER_ERROR),
        ] {
            let header = bearer(token);
            assert_eq!(
                authorizer.check(Some(&header), now).await,
                status,
                "{token}"
            );
            assert_eq!(
                authorizer.check(Some(&header), now).await,
                status,
                "{token}"
            );
        }
        assert_eq!(reviewer.calls.load(Ordering::SeqCst), 6);
    }

    #[test]
    fn the_cache_stays_bounded_and_drops_expired_entries_first() {
        let mut cache = AllowedTokens::default();
        let start = Instant::now();
        let key = |n: usize| -> [u8; 32] { Sha256::digest(n.to_le_bytes()).into() };
        cache.allow(key(0), start);
        let later = start + Duration::from_secs(1);
        for n in 1..MAX_CACHED_TOKENS {
            cache.allow(key(n), later);
        }
        assert_eq!(cache.expiries.len(), MAX_CACHED_TOKENS);
        cache.allow(key(MAX_CACHED_TOKENS), later);
        assert_eq!(cache.expiries.len(), MAX_CACHED_TOKENS);
        assert!(!cache.is_allowed(&key(0), later), "soonest to expire went");
        assert!(cache.is_allowed(&key(MAX_CACHED_TOKENS), later));

        let expired = later + ALLOWED_CACHE_TTL;
        cache.allow(key(MAX_CACHED_TOKENS + 1), expired);
        assert_eq!(cache.expiries.len(), 1, "expired entries are purged");
    }

    #[test]
    fn review_errors_are_categorised() {
        let forbidden = ReviewError::SubjectAccessReview {
            source: Box::new(kube::Error::Api(
                Status::failure("sample denial", "Forbidden")
                    .with_code(403)
                    .boxed(),
            )),
        };
        assert_eq!(forbidden.category(), "kube_forbidden");
        assert_eq!(forbidden.to_string(), "subject access review failed");
    }
}
