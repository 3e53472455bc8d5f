//! The HTTP side of the aggregated API: every request is classified
//! ([`RequestInfo`]), authenticated and authorized through the [`Gate`], then
//! answered from the [`Store`]: discovery, OpenAPI, get, list (JSON or Table,
//! paged with `limit`/`continue` by [`paging`]), watch (JSON or one-row
//! Tables) and the icon subresource.

use std::{
    convert::Infallible,
    future::Future,
    pin::Pin,
    sync::Arc,
    time::{Duration, SystemTime},
};

use axum::body::Body;
use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, header};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use olm_api::package_manifest::{GROUP, PLURAL, PackageManifest};
use olm_runtime::admin::Readiness;
use rustls_pki_types::CertificateDer;
use serde::Serialize;
use serde_json::{Value, json, value::RawValue};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;

use crate::{
    auth::{AuthError, PeerCertificates, Verdict, forbidden_message},
    discovery, manifest,
    metrics::ApiMetrics,
    paging::{self, Page, PageRequest, PagingError},
    request::{RequestInfo, ResourceRequest, query_params},
    selector::{FieldSelector, LabelSelector},
    store::{self, Change, EventKind, Store, Stored, WatchStart},
    table::{self, IncludeObject},
};

/// Longest a watch stays open; clients reconnect from their last version.
pub const MAX_WATCH_DURATION: Duration = Duration::from_secs(30 * 60);

/// How often an idle watch that allows bookmarks gets one.
pub const BOOKMARK_INTERVAL: Duration = Duration::from_secs(30);

/// Upper bound on the warnings added about stale catalogs.
pub const MAX_STALE_WARNINGS: usize = 3;

/// Upper bound on one warning's text.
pub const MAX_WARNING_BYTES: usize = 256;

/// Annotation a bookmark carries at the end of initial events
/// (`sendInitialEvents=true`).
pub const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// Decides whether a request may proceed.
pub trait Gate: Send + Sync {
    /// Authenticates and authorizes one request.
    fn check<'a>(
        &'a self,
        info: &'a RequestInfo,
        peer: &'a [CertificateDer<'static>],
        headers: &'a http::HeaderMap,
    ) -> Pin<Box<dyn Future<Output = Result<Verdict, AuthError>> + Send + 'a>>;
}

impl Gate for crate::auth::Delegated {
    fn check<'a>(
        &'a self,
        info: &'a RequestInfo,
        peer: &'a [CertificateDer<'static>],
        headers: &'a http::HeaderMap,
    ) -> Pin<Box<dyn Future<Output = Result<Verdict, AuthError>> + Send + 'a>> {
        Box::pin(crate::auth::Delegated::check(self, info, peer, headers))
    }
}

/// The OpenAPI documents, rendered once.
#[derive(Debug, Clone)]
pub struct OpenApi {
    v2: Bytes,
    v3_index: Bytes,
    v3_group: Bytes,
}

impl OpenApi {
    /// Renders the documents.
    pub fn render() -> Self {
        let v3_group = Bytes::from(discovery::openapi_v3_group().to_string());
        Self {
            v2: Bytes::from(discovery::openapi_v2().to_string()),
            v3_index: Bytes::from(discovery::openapi_v3_index(&v3_group).to_string()),
            v3_group,
        }
    }
}

/// Everything a request handler needs.
pub struct App {
    /// The packages.
    pub store: Arc<Store>,
    /// Authentication and authorization.
    pub gate: Arc<dyn Gate>,
    /// Readiness of the process (`/readyz`).
    pub readiness: Readiness,
    /// OpenAPI documents.
    pub openapi: OpenApi,
    /// Request metrics.
    pub metrics: ApiMetrics,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App").finish_non_exhaustive()
    }
}

fn json_response(status: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    let mut response = Response::new(Body::from(body.into()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn value_response(status: StatusCode, value: &Value) -> Response<Body> {
    json_response(status, value.to_string())
}

/// A `metav1.Status` failure response.
pub fn status_error(
    code: StatusCode,
    reason: &str,
    message: &str,
    details: Option<Value>,
) -> Response<Body> {
    let mut body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code.as_u16(),
    });
    if let (Some(details), Some(object)) = (details, body.as_object_mut()) {
        object.insert("details".into(), details);
    }
    value_response(code, &body)
}

fn not_found_resource() -> Response<Body> {
    status_error(
        StatusCode::NOT_FOUND,
        "NotFound",
        "the server could not find the requested resource",
        None,
    )
}

fn not_found(name: &str) -> Response<Body> {
    status_error(
        StatusCode::NOT_FOUND,
        "NotFound",
        &format!("{PLURAL}.{GROUP} \"{name}\" not found"),
        Some(json!({"name": name, "group": GROUP, "kind": PLURAL})),
    )
}

fn bad_request(message: &str) -> Response<Body> {
    status_error(StatusCode::BAD_REQUEST, "BadRequest", message, None)
}

fn method_not_allowed() -> Response<Body> {
    status_error(
        StatusCode::METHOD_NOT_ALLOWED,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
        None,
    )
}

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut response = Response::new(Body::from(text));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// Answers one request.
pub async fn handle(app: Arc<App>, request: Request<Body>) -> Response<Body> {
    let started = std::time::Instant::now();
    let info = RequestInfo::parse(
        request.method(),
        request.uri().path(),
        request.uri().query(),
    );
    let verb = match &info {
        RequestInfo::Resource(r) => r.verb.clone(),
        RequestInfo::NonResource { .. } => "nonresource".to_owned(),
        RequestInfo::Health(_) => "health".to_owned(),
    };
    let response = respond(&app, &info, request).await;
    if !matches!(info, RequestInfo::Health(_)) && verb != "watch" {
        app.metrics
            .observe(&verb, response.status().as_u16(), started.elapsed());
    }
    response
}

async fn respond(app: &App, info: &RequestInfo, request: Request<Body>) -> Response<Body> {
    // The body is never read: every operation is a GET.
    let (request, _body) = request.into_parts();
    if request.uri.path().len() > crate::request::MAX_PATH_BYTES
        || request
            .uri
            .query()
            .is_some_and(|q| q.len() > crate::request::MAX_QUERY_BYTES)
    {
        return status_error(
            StatusCode::URI_TOO_LONG,
            "RequestURITooLong",
            "request uri too long",
            None,
        );
    }
    if let RequestInfo::Health(path) = info {
        return health(app, path);
    }
    let peer = request
        .extensions
        .get::<PeerCertificates>()
        .cloned()
        .unwrap_or_default();
    match app.gate.check(info, &peer.0, &request.headers).await {
        Ok(Verdict::Allowed(_)) => {}
        Ok(Verdict::Unauthenticated(why)) => {
            tracing::debug!(%why, path = request.uri.path(), "unauthenticated request");
            return status_error(
                StatusCode::UNAUTHORIZED,
                "Unauthorized",
                "Unauthorized",
                None,
            );
        }
        Ok(Verdict::Forbidden(user, reason)) => {
            let message = forbidden_message(&user, info, &reason);
            let details = match info {
                RequestInfo::Resource(r) => {
                    json!({"name": r.name.clone().unwrap_or_default(), "group": GROUP, "kind": r.resource})
                }
                _ => json!({}),
            };
            return status_error(StatusCode::FORBIDDEN, "Forbidden", &message, Some(details));
        }
        Err(error) => {
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                "delegated authorization failed"
            );
            return status_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                &format!("Internal error occurred: {error}"),
                None,
            );
        }
    }
    if request.method != http::Method::GET && request.method != http::Method::HEAD {
        return method_not_allowed();
    }
    match info {
        RequestInfo::NonResource { path, .. } => non_resource(app, path),
        RequestInfo::Resource(r) if r.is_ours() => resource(app, r, &request),
        RequestInfo::Resource(_) | RequestInfo::Health(_) => not_found_resource(),
    }
}

fn health(app: &App, path: &str) -> Response<Body> {
    if path.starts_with("/readyz") {
        let unmet = app.readiness.unmet();
        if !unmet.is_empty() {
            return plain(StatusCode::SERVICE_UNAVAILABLE, "not ready\n");
        }
    }
    plain(StatusCode::OK, "ok")
}

fn non_resource(app: &App, path: &str) -> Response<Body> {
    let group_path = format!("/apis/{GROUP}");
    let version_path = format!("/apis/{GROUP}/{}", olm_api::package_manifest::VERSION);
    let v3_group = format!(
        "/openapi/v3/apis/{GROUP}/{}",
        olm_api::package_manifest::VERSION
    );
    match path {
        "/apis" | "/apis/" => value_response(StatusCode::OK, &discovery::api_group_list()),
        p if p == group_path || p == format!("{group_path}/") => {
            value_response(StatusCode::OK, &discovery::api_group())
        }
        p if p == version_path || p == format!("{version_path}/") => {
            value_response(StatusCode::OK, &discovery::api_resource_list())
        }
        "/openapi/v2" => json_response(StatusCode::OK, app.openapi.v2.clone()),
        "/openapi/v3" => json_response(StatusCode::OK, app.openapi.v3_index.clone()),
        p if p == v3_group => json_response(StatusCode::OK, app.openapi.v3_group.clone()),
        _ => not_found_resource(),
    }
}

/// A PackageManifest as written on the wire: our metadata (in the request's
/// namespace) around the stored, pre-serialized status.
#[derive(Serialize)]
struct WireItem<'a> {
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    kind: &'static str,
    metadata: &'a ObjectMeta,
    spec: Value,
    status: &'a RawValue,
}

fn metadata_in(stored: &Stored, namespace: Option<&str>) -> ObjectMeta {
    let mut metadata = stored.manifest.metadata.clone();
    if let Some(ns) = namespace {
        metadata.namespace = Some(ns.to_owned());
    }
    metadata
}

fn write_item(out: &mut Vec<u8>, stored: &Stored, namespace: Option<&str>) {
    let metadata = metadata_in(stored, namespace);
    let item = WireItem {
        api_version: "packages.operators.coreos.com/v1",
        kind: "PackageManifest",
        metadata: &metadata,
        spec: json!({}),
        status: &stored.status_json,
    };
    // Writing plain data into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, &item);
}

/// A manifest as GET and LIST return it: icons stripped, in `namespace`.
fn served_manifest(stored: &Stored, namespace: Option<&str>) -> PackageManifest {
    let mut m = stored.manifest.clone();
    manifest::strip_icons(&mut m);
    m.metadata = metadata_in(stored, namespace);
    m
}

fn stale_warnings(stale: &[((String, String), String)]) -> Vec<HeaderValue> {
    stale
        .iter()
        .take(MAX_STALE_WARNINGS)
        .filter_map(|((ns, name), error)| {
            let mut text = format!(
                "299 - \"catalog {ns}/{name} could not be refreshed, serving its last known packages: {}\"",
                error.replace(['"', '\\'], "'")
            );
            if text.len() > MAX_WARNING_BYTES {
                let mut cut = MAX_WARNING_BYTES - 1;
                while !text.is_char_boundary(cut) {
                    cut -= 1;
                }
                text.truncate(cut);
                text.push('"');
            }
            HeaderValue::from_str(&text).ok()
        })
        .collect()
}

struct Query {
    labels: LabelSelector,
    fields: FieldSelector,
    table: bool,
    include: IncludeObject,
}

fn parse_query(
    params: &std::collections::BTreeMap<String, String>,
    accept: &str,
) -> Result<Query, Box<Response<Body>>> {
    let labels = LabelSelector::parse(params.get("labelSelector").map_or("", String::as_str))
        .map_err(|e| Box::new(bad_request(&e.to_string())))?;
    let fields = FieldSelector::parse(params.get("fieldSelector").map_or("", String::as_str))
        .map_err(|e| Box::new(bad_request(&e.to_string())))?;
    let include = IncludeObject::parse(params.get("includeObject").map(String::as_str))
        .map_err(|e| Box::new(bad_request(&e)))?;
    Ok(Query {
        labels,
        fields,
        table: table::wants_table(accept),
        include,
    })
}

fn selected(stored: &Stored, query: &Query) -> bool {
    let m = &stored.manifest;
    query.labels.matches(m.metadata.labels.as_ref())
        && query
            .fields
            .matches(m.metadata.name.as_deref().unwrap_or_default())
}

fn resource(app: &App, r: &ResourceRequest, request: &http::request::Parts) -> Response<Body> {
    let params = query_params(request.uri.query());
    let accept = request
        .headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let query = match parse_query(&params, accept) {
        Ok(q) => q,
        Err(response) => return *response,
    };
    let namespace = r.namespace.as_deref();
    match (r.verb.as_str(), &r.name, &r.subresource) {
        ("list", None, None) => {
            let page_request = match paging::parse(
                params.get("limit").map(String::as_str),
                params.get("continue").map(String::as_str),
                params.get("resourceVersion").map(String::as_str),
            ) {
                Ok(request) => request,
                Err(PagingError::BadRequest(message)) => return bad_request(&message),
                Err(PagingError::Expired { continue_token }) => return expired(&continue_token),
            };
            list(app, namespace, &query, &page_request)
        }
        ("watch", None, None) => watch(app, namespace, query, &params),
        ("get", Some(name), None) => get(app, namespace, name, &query),
        ("get", Some(name), Some(_)) => icon(app, namespace, name),
        _ => method_not_allowed(),
    }
}

fn expired(continue_token: &str) -> Response<Body> {
    let body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {"continue": continue_token},
        "status": "Failure",
        "message": paging::EXPIRED_MESSAGE,
        "reason": "Expired",
        "code": StatusCode::GONE.as_u16(),
    });
    value_response(StatusCode::GONE, &body)
}

fn list_metadata(rv: &str, page: &Page<&Arc<Stored>>) -> Value {
    let mut metadata = json!({"resourceVersion": rv});
    if let Some(token) = &page.continue_token {
        metadata["continue"] = json!(token);
    }
    if let Some(remaining) = page.remaining {
        metadata["remainingItemCount"] = json!(remaining);
    }
    metadata
}

fn list(
    app: &App,
    namespace: Option<&str>,
    query: &Query,
    page_request: &PageRequest,
) -> Response<Body> {
    let snapshot = app.store.snapshot(namespace);
    let rv = snapshot.resource_version.to_string();
    let items: Vec<&Arc<Stored>> = snapshot
        .items
        .iter()
        .filter(|s| selected(s, query))
        .collect();
    // As the API server: the count of remaining items only without selectors.
    let unfiltered = query.labels.is_empty() && query.fields == FieldSelector::default();
    let page = match paging::paginate(
        items,
        |s| store::sort_key(&s.manifest, namespace),
        page_request,
        &snapshot.generation,
        unfiltered,
    ) {
        Ok(page) => page,
        Err(PagingError::BadRequest(message)) => return bad_request(&message),
        Err(PagingError::Expired { continue_token }) => return expired(&continue_token),
    };
    let metadata = list_metadata(&rv, &page);
    let mut response = if query.table {
        let served: Vec<PackageManifest> = page
            .items
            .iter()
            .map(|s| served_manifest(s, namespace))
            .collect();
        let mut table = table::table(&served, &rv, query.include, SystemTime::now());
        table["metadata"] = metadata;
        value_response(StatusCode::OK, &table)
    } else {
        let mut out = Vec::with_capacity(64 * 1024);
        out.extend_from_slice(
            br#"{"kind":"PackageManifestList","apiVersion":"packages.operators.coreos.com/v1","metadata":"#,
        );
        // Writing plain data into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut out, &metadata);
        out.extend_from_slice(br#","items":["#);
        for (i, stored) in page.items.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_item(&mut out, stored, namespace);
        }
        out.extend_from_slice(b"]}");
        json_response(StatusCode::OK, out)
    };
    for warning in stale_warnings(&snapshot.stale) {
        response.headers_mut().append(header::WARNING, warning);
    }
    response
}

fn find<'a>(snapshot: &'a crate::store::Snapshot, name: &str) -> Option<&'a Arc<Stored>> {
    snapshot
        .items
        .iter()
        .find(|s| s.manifest.metadata.name.as_deref() == Some(name))
}

fn get(app: &App, namespace: Option<&str>, name: &str, query: &Query) -> Response<Body> {
    let snapshot = app.store.snapshot(namespace);
    let Some(stored) = find(&snapshot, name) else {
        return not_found(name);
    };
    let mut response = if query.table {
        let served = served_manifest(stored, namespace);
        value_response(
            StatusCode::OK,
            &table::table(
                &[served],
                &snapshot.resource_version.to_string(),
                query.include,
                SystemTime::now(),
            ),
        )
    } else {
        let mut out = Vec::with_capacity(8 * 1024);
        write_item(&mut out, stored, namespace);
        json_response(StatusCode::OK, out)
    };
    for warning in stale_warnings(&snapshot.stale) {
        response.headers_mut().append(header::WARNING, warning);
    }
    response
}

fn icon(app: &App, namespace: Option<&str>, name: &str) -> Response<Body> {
    let snapshot = app.store.snapshot(namespace);
    let Some(stored) = find(&snapshot, name) else {
        return not_found(name);
    };
    let (bytes, media) = manifest::icon(&stored.manifest);
    let mut response = Response::new(Body::from(bytes));
    if let Ok(value) = HeaderValue::from_str(&media) {
        response.headers_mut().insert(header::CONTENT_TYPE, value);
    }
    response
}

fn event_line(kind: &str, object: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(object.len() + 32);
    out.extend_from_slice(br#"{"type":""#);
    out.extend_from_slice(kind.as_bytes());
    out.extend_from_slice(br#"","object":"#);
    out.extend_from_slice(object);
    out.extend_from_slice(b"}\n");
    Bytes::from(out)
}

fn bookmark(rv: u64, initial_end: bool) -> Bytes {
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        metadata["annotations"] = json!({INITIAL_EVENTS_END: "true"});
    }
    let object = json!({
        "kind": "PackageManifest",
        "apiVersion": "packages.operators.coreos.com/v1",
        "metadata": metadata,
    });
    event_line("BOOKMARK", object.to_string().as_bytes())
}

fn gone_event(message: &str) -> Bytes {
    let status = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": "Expired", "code": 410,
    });
    event_line("ERROR", status.to_string().as_bytes())
}

struct WatchFilter {
    store: Arc<Store>,
    namespace: Option<String>,
    query: Query,
    /// Whether a Table event with column definitions went out already: as
    /// the API server, only the first Table event of a watch carries them.
    columns_sent: bool,
}

impl WatchFilter {
    /// The event line for one package, as a PackageManifest or, when the
    /// client asked for Tables, as a one-row Table with the list's columns.
    fn line(&mut self, kind: EventKind, stored: &Stored) -> Bytes {
        let namespace = self.namespace.as_deref();
        if !self.query.table {
            let mut object = Vec::with_capacity(4096);
            write_item(&mut object, stored, namespace);
            return event_line(kind.as_str(), &object);
        }
        let served = served_manifest(stored, namespace);
        let rv = served.metadata.resource_version.clone().unwrap_or_default();
        let mut table = table::table(&[served], &rv, self.query.include, SystemTime::now());
        if self.columns_sent {
            table["columnDefinitions"] = Value::Null;
        }
        self.columns_sent = true;
        event_line(kind.as_str(), table.to_string().as_bytes())
    }

    fn event(&mut self, change: &Change) -> Option<Bytes> {
        let stored = &change.manifest;
        if !self.store.visible(
            self.namespace.as_deref(),
            &stored.manifest.status.catalog_source_namespace,
        ) || !selected(stored, &self.query)
        {
            return None;
        }
        Some(self.line(change.kind, stored))
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        if self.query.table {
            // A Table has list metadata, which has no annotations: the
            // bookmark carries only the version.
            let object = json!({
                "kind": "Table",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": {"resourceVersion": rv.to_string()},
                "columnDefinitions": null,
                "rows": [],
            });
            return event_line("BOOKMARK", object.to_string().as_bytes());
        }
        bookmark(rv, initial_end)
    }
}

fn watch(
    app: &App,
    namespace: Option<&str>,
    query: Query,
    params: &std::collections::BTreeMap<String, String>,
) -> Response<Body> {
    let requested = params
        .get("resourceVersion")
        .map(String::as_str)
        .unwrap_or_default();
    let send_initial = params.get("sendInitialEvents").is_some_and(|v| v == "true");
    let bookmarks = params
        .get("allowWatchBookmarks")
        .is_some_and(|v| v == "true");
    let timeout = params
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map_or(MAX_WATCH_DURATION, |s| {
            Duration::from_secs(s).min(MAX_WATCH_DURATION)
        });
    let from: Option<u64> = match requested {
        "" | "0" => None,
        v => match v.parse() {
            Ok(rv) => Some(rv),
            Err(_) => return bad_request(&format!("invalid resource version: {v:?}")),
        },
    };
    // Subscribe before reading so no change falls between the two.
    let mut live = app.store.subscribe();
    let mut filter = WatchFilter {
        store: Arc::clone(&app.store),
        namespace: namespace.map(str::to_owned),
        query,
        columns_sent: false,
    };
    let mut initial: Vec<Bytes> = Vec::new();
    let mut last_rv;
    let initial_list = from.is_none() || send_initial;
    if initial_list {
        let snapshot = app.store.snapshot(namespace);
        last_rv = snapshot.resource_version;
        for stored in &snapshot.items {
            if selected(stored, &filter.query) {
                initial.push(filter.line(EventKind::Added, stored));
            }
        }
        if send_initial {
            initial.push(filter.bookmark(last_rv, true));
        }
    } else {
        let rv = from.unwrap_or_default();
        match app.store.watch_from(rv) {
            WatchStart::Gone => {
                let current = app.store.resource_version();
                // A version from the future was handed out by another
                // replica (each numbers its own changes): relisting is the
                // only safe resumption, so both cases answer 410.
                let message = if rv > current {
                    format!("too large resource version: {rv}, current: {current}")
                } else {
                    format!("too old resource version: {rv} ({current})")
                };
                let (tx, rx) = mpsc::channel::<Bytes>(1);
                tokio::spawn(async move {
                    let _ = tx.send(gone_event(&message)).await;
                });
                return watch_response(rx);
            }
            WatchStart::Replay(changes) => {
                last_rv = rv;
                for change in &changes {
                    last_rv = change.resource_version;
                    initial.extend(filter.event(change));
                }
            }
        }
    }
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    tokio::spawn(async move {
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        for line in initial {
            if tx.send(line).await.is_err() {
                return;
            }
        }
        let mut ticker = tokio::time::interval(BOOKMARK_INTERVAL);
        ticker.tick().await;
        loop {
            tokio::select! {
                () = &mut deadline => return,
                _ = ticker.tick(), if bookmarks => {
                    if tx.send(filter.bookmark(last_rv, false)).await.is_err() {
                        return;
                    }
                }
                change = live.recv() => match change {
                    Ok(change) => {
                        if change.resource_version <= last_rv {
                            continue;
                        }
                        last_rv = change.resource_version;
                        if let Some(line) = filter.event(&change)
                            && tx.send(line).await.is_err()
                        {
                            return;
                        }
                    }
                    // A watcher that fell behind ends; the client resumes
                    // from its last version and the history replays it.
                    Err(RecvError::Lagged(_) | RecvError::Closed) => return,
                },
                () = tx.closed() => return,
            }
        }
    });
    watch_response(rx)
}

fn watch_response(rx: mpsc::Receiver<Bytes>) -> Response<Body> {
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|line| (Ok::<_, Infallible>(line), rx))
    });
    let mut response = Response::new(Body::from_stream(stream));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests {
    use http_body_util_shim::collect;
    use olm_api::package_manifest::{PackageChannel, PackageManifest};

    use super::*;
    use crate::auth::User;

    /// Collecting a body without another dependency.
    mod http_body_util_shim {
        use axum::body::Body;

        pub(super) async fn collect(body: Body) -> Vec<u8> {
            axum::body::to_bytes(body, usize::MAX)
                .await
                .unwrap()
                .to_vec()
        }
    }

    struct Fixed(Verdict);

    impl Gate for Fixed {
        fn check<'a>(
            &'a self,
            _info: &'a RequestInfo,
            _peer: &'a [CertificateDer<'static>],
            _headers: &'a http::HeaderMap,
        ) -> Pin<Box<dyn Future<Output = Result<Verdict, AuthError>> + Send + 'a>> {
            let verdict = self.0.clone();
            Box::pin(async move { Ok(verdict) })
        }
    }

    fn manifest(name: &str, ns: &str, catalog: &str) -> PackageManifest {
        let mut m = PackageManifest::default();
        m.metadata.name = Some(name.into());
        m.metadata.namespace = Some(ns.into());
        m.metadata.labels = Some([("catalog".to_owned(), catalog.to_owned())].into());
        m.status.catalog_source = catalog.into();
        m.status.catalog_source_namespace = ns.into();
        m.status.catalog_source_display_name = format!("{catalog} display");
        m.status.package_name = name.into();
        m.status.default_channel = "stable".into();
        m.status.channels = vec![PackageChannel {
            name: "stable".into(),
            current_csv: format!("{name}.v1"),
            current_csv_desc: olm_api::package_manifest::CsvDescription {
                icon: Some(vec![olm_api::csv::Icon {
                    base64_data: "aGk=".into(),
                    media_type: "image/png".into(),
                }]),
                ..Default::default()
            },
            ..PackageChannel::default()
        }];
        m
    }

    fn app(verdict: Verdict) -> Arc<App> {
        let store = Arc::new(Store::new("olm", 1000));
        let now = SystemTime::now();
        store.replace_catalog(
            &("olm".into(), "global".into()),
            vec![
                manifest("etcd", "olm", "global"),
                manifest("redis", "olm", "global"),
            ],
            now,
        );
        store.replace_catalog(
            &("team".into(), "local".into()),
            vec![manifest("widget", "team", "local")],
            now,
        );
        Arc::new(App {
            store,
            gate: Arc::new(Fixed(verdict)),
            readiness: Readiness::default(),
            openapi: OpenApi::render(),
            metrics: {
                let mut registry = olm_runtime::metrics::MetricsRegistry::default();
                crate::metrics::Metrics::register(&mut registry).api
            },
        })
    }

    fn allowed() -> Verdict {
        Verdict::Allowed(User {
            name: "tester".into(),
            ..User::default()
        })
    }

    async fn get(
        app: &Arc<App>,
        uri: &str,
        accept: Option<&str>,
    ) -> (StatusCode, http::HeaderMap, Value) {
        let mut request = Request::get(uri);
        if let Some(accept) = accept {
            request = request.header(header::ACCEPT, accept);
        }
        let response = handle(Arc::clone(app), request.body(Body::empty()).unwrap()).await;
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = collect(response.into_body()).await;
        let value = serde_json::from_slice(&bytes)
            .unwrap_or(Value::String(String::from_utf8_lossy(&bytes).into()));
        (status, headers, value)
    }

    const BASE: &str = "/apis/packages.operators.coreos.com/v1";

    #[tokio::test]
    async fn lists_are_scoped_renamespaced_and_iconless() {
        let app = app(allowed());
        let (status, _, list) = get(
            &app,
            &format!("{BASE}/namespaces/team/packagemanifests"),
            None,
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(list["kind"], "PackageManifestList");
        let names: Vec<&str> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["widget", "etcd", "redis"]);
        for item in list["items"].as_array().unwrap() {
            assert_eq!(item["metadata"]["namespace"], "team");
            assert!(
                item["status"]["channels"][0]["currentCSVDesc"]
                    .get("icon")
                    .is_none()
            );
            let typed: PackageManifest = serde_json::from_value(item.clone()).unwrap();
            assert_eq!(typed.spec, Default::default());
        }
        let (_, _, all) = get(&app, &format!("{BASE}/packagemanifests"), None).await;
        assert_eq!(all["items"].as_array().unwrap().len(), 3);
        let (_, _, selected) = get(
            &app,
            &format!("{BASE}/packagemanifests?labelSelector=catalog%3Dlocal"),
            None,
        )
        .await;
        assert_eq!(selected["items"].as_array().unwrap().len(), 1);
        let (_, _, named) = get(
            &app,
            &format!("{BASE}/packagemanifests?fieldSelector=metadata.name%3Detcd"),
            None,
        )
        .await;
        assert_eq!(named["items"][0]["metadata"]["name"], "etcd");
    }

    #[tokio::test]
    async fn get_icon_table_and_errors() {
        let app = app(allowed());
        let (status, _, one) = get(
            &app,
            &format!("{BASE}/namespaces/team/packagemanifests/etcd"),
            None,
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(one["metadata"]["namespace"], "team");
        let (status, _, missing) = get(
            &app,
            &format!("{BASE}/namespaces/team/packagemanifests/nope"),
            None,
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(
            missing["message"],
            "packagemanifests.packages.operators.coreos.com \"nope\" not found"
        );
        let response = handle(
            Arc::clone(&app),
            Request::get(format!("{BASE}/namespaces/team/packagemanifests/etcd/icon"))
                .body(Body::empty())
                .unwrap(),
        )
        .await;
        assert_eq!(response.headers()[header::CONTENT_TYPE], "image/png");
        assert_eq!(collect(response.into_body()).await, b"hi");
        let table_accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
        let (_, _, table) = get(
            &app,
            &format!("{BASE}/packagemanifests"),
            Some(table_accept),
        )
        .await;
        assert_eq!(table["kind"], "Table");
        assert_eq!(table["rows"][0]["cells"][1], "global display");
        let (status, _, bad) = get(
            &app,
            &format!("{BASE}/packagemanifests?labelSelector=a+in+(b"),
            None,
        )
        .await;
        assert_eq!(
            (status, bad["reason"].as_str()),
            (StatusCode::BAD_REQUEST, Some("BadRequest"))
        );
        let (status, _, _) = get(
            &app,
            &format!("{BASE}/packagemanifests?fieldSelector=spec.x%3Dy"),
            None,
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        let (status, _, _) = get(&app, &format!("{BASE}/widgets"), None).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let (status, _, _) = get(
            &app,
            &format!("{BASE}/packagemanifests?{}", "a".repeat(9000)),
            None,
        )
        .await;
        assert_eq!(status, StatusCode::URI_TOO_LONG);
        let delete = handle(
            Arc::clone(&app),
            Request::delete(format!("{BASE}/namespaces/team/packagemanifests/etcd"))
                .body(Body::empty())
                .unwrap(),
        )
        .await;
        assert_eq!(delete.status(), StatusCode::METHOD_NOT_ALLOWED);
    }

    #[tokio::test]
    async fn paths_over_the_limit_are_refused_as_too_long() {
        let app = app(allowed());
        let prefix = format!("{BASE}/namespaces/team/packagemanifests/");
        let name_for = |path_bytes: usize| "n".repeat(path_bytes - prefix.len());
        for (path_bytes, expected) in [
            (crate::request::MAX_PATH_BYTES, StatusCode::NOT_FOUND),
            (crate::request::MAX_PATH_BYTES + 1, StatusCode::URI_TOO_LONG),
            (16 * 1024, StatusCode::URI_TOO_LONG),
        ] {
            let uri = format!("{prefix}{}", name_for(path_bytes));
            assert_eq!(uri.len(), path_bytes);
            let (status, _, body) = get(&app, &uri, None).await;
            assert_eq!(status, expected, "{path_bytes} bytes: {body}");
            if expected == StatusCode::URI_TOO_LONG {
                assert_eq!(body["reason"], "RequestURITooLong");
                assert_eq!(body["message"], "request uri too long");
            }
        }
    }

    #[tokio::test]
    async fn discovery_and_openapi() {
        let app = app(allowed());
        let (_, _, v) = get(&app, "/apis", None).await;
        assert_eq!(v["kind"], "APIGroupList");
        let (_, _, v) = get(&app, "/apis/packages.operators.coreos.com", None).await;
        assert_eq!(v["kind"], "APIGroup");
        let (_, _, v) = get(&app, BASE, None).await;
        assert_eq!(v["kind"], "APIResourceList");
        let (_, _, v) = get(&app, "/openapi/v2", None).await;
        assert_eq!(v["swagger"], "2.0");
        let (_, _, index) = get(&app, "/openapi/v3", None).await;
        let url = index["paths"]["apis/packages.operators.coreos.com/v1"]["serverRelativeURL"]
            .as_str()
            .unwrap()
            .to_owned();
        let (status, _, v) = get(&app, &url, None).await;
        assert_eq!(
            (status, v["openapi"].as_str()),
            (StatusCode::OK, Some("3.0.0"))
        );
    }

    #[tokio::test]
    async fn refusals_carry_kubernetes_statuses() {
        let (status, _, body) = get(&app(Verdict::Unauthenticated("no".into())), BASE, None).await;
        assert_eq!(
            (status, body["reason"].as_str()),
            (StatusCode::UNAUTHORIZED, Some("Unauthorized"))
        );
        let forbidden = Verdict::Forbidden(
            User {
                name: "eve".into(),
                ..User::default()
            },
            String::new(),
        );
        let (status, _, body) = get(
            &app(forbidden),
            &format!("{BASE}/namespaces/x/packagemanifests"),
            None,
        )
        .await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        assert!(
            body["message"]
                .as_str()
                .unwrap()
                .contains("User \"eve\" cannot list resource")
        );
        // Health needs no credentials.
        let (status, _, _) = get(
            &app(Verdict::Unauthenticated("no".into())),
            "/healthz",
            None,
        )
        .await;
        assert_eq!(status, StatusCode::OK);
    }

    #[tokio::test]
    async fn stale_catalogs_are_announced() {
        let app = app(allowed());
        app.store.record_failure(
            &("olm".into(), "global".into()),
            "connection refused".into(),
        );
        let (_, headers, _) = get(
            &app,
            &format!("{BASE}/namespaces/team/packagemanifests"),
            None,
        )
        .await;
        let warning = headers[header::WARNING].to_str().unwrap();
        assert!(
            warning.starts_with("299 - \"catalog olm/global could not be refreshed"),
            "{warning}"
        );
        let long = "x".repeat(1000);
        assert!(stale_warnings(&[(("a".into(), "b".into()), long)])[0].len() <= MAX_WARNING_BYTES);
    }

    #[tokio::test]
    async fn stale_warnings_stop_at_the_limit() {
        let app = app(allowed());
        let failing = MAX_STALE_WARNINGS + 2;
        for n in 0..failing {
            app.store.record_failure(
                &("team".into(), format!("broken-{n}")),
                format!("refusal {n}"),
            );
        }
        let (status, headers, _) = get(
            &app,
            &format!("{BASE}/namespaces/team/packagemanifests"),
            None,
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        let warnings: Vec<&str> = headers
            .get_all(header::WARNING)
            .iter()
            .map(|w| w.to_str().unwrap())
            .collect();
        assert_eq!(warnings.len(), MAX_STALE_WARNINGS, "{warnings:#?}");
        for warning in warnings {
            assert!(
                warning.starts_with("299 - \"catalog team/broken-"),
                "{warning}"
            );
        }
    }

    #[tokio::test]
    async fn lists_page_with_limit_and_continue() {
        let app = app(allowed());
        let mut uri = format!("{BASE}/packagemanifests?limit=1");
        let mut names = Vec::new();
        let mut remaining = Vec::new();
        loop {
            let (status, _, page) = get(&app, &uri, None).await;
            assert_eq!(status, StatusCode::OK, "{page}");
            let items = page["items"].as_array().unwrap();
            assert_eq!(items.len(), 1);
            names.push(items[0]["metadata"]["name"].as_str().unwrap().to_owned());
            remaining.push(page["metadata"]["remainingItemCount"].as_u64());
            match page["metadata"]["continue"].as_str() {
                Some(token) => {
                    uri = format!("{BASE}/packagemanifests?limit=1&continue={token}");
                }
                None => break,
            }
        }
        assert_eq!(names, ["etcd", "redis", "widget"]);
        assert_eq!(remaining, [Some(2), Some(1), None]);

        // With a selector: no remaining count, as the API server.
        let (_, _, page) = get(
            &app,
            &format!(
                "{BASE}/namespaces/team/packagemanifests?limit=1&labelSelector=catalog%3Dglobal"
            ),
            None,
        )
        .await;
        assert!(page["metadata"]["continue"].is_string());
        assert!(page["metadata"].get("remainingItemCount").is_none());

        // Tables page the same way.
        let table_accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
        let (_, _, table) = get(
            &app,
            &format!("{BASE}/packagemanifests?limit=2"),
            Some(table_accept),
        )
        .await;
        assert_eq!(table["kind"], "Table");
        assert_eq!(table["rows"].as_array().unwrap().len(), 2);
        let token = table["metadata"]["continue"].as_str().unwrap().to_owned();
        let (_, _, rest) = get(
            &app,
            &format!("{BASE}/packagemanifests?limit=2&continue={token}"),
            Some(table_accept),
        )
        .await;
        assert_eq!(rest["rows"][0]["cells"][0], "widget");
        assert!(rest["metadata"].get("continue").is_none());

        // A change of the visible content expires the token (410), with a
        // fresh token for the rest.
        app.store.replace_catalog(
            &("olm".into(), "global".into()),
            vec![
                manifest("etcd", "olm", "global"),
                manifest("redis", "olm", "global"),
                manifest("zookeeper", "olm", "global"),
            ],
            SystemTime::now(),
        );
        let (status, _, gone) = get(
            &app,
            &format!("{BASE}/packagemanifests?limit=2&continue={token}"),
            None,
        )
        .await;
        assert_eq!(status, StatusCode::GONE);
        assert_eq!(gone["reason"], "Expired");
        assert_eq!(gone["message"], paging::EXPIRED_MESSAGE);
        let fresh = gone["metadata"]["continue"].as_str().unwrap();
        let (status, _, rest) = get(
            &app,
            &format!("{BASE}/packagemanifests?continue={fresh}"),
            None,
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(rest["items"][0]["metadata"]["name"], "widget");

        // A change in a namespace the list does not see leaves it valid.
        let (_, _, first) = get(
            &app,
            &format!("{BASE}/namespaces/elsewhere/packagemanifests?limit=1"),
            None,
        )
        .await;
        let token = first["metadata"]["continue"].as_str().unwrap().to_owned();
        app.store.replace_catalog(
            &("team".into(), "local".into()),
            vec![manifest("gadget", "team", "local")],
            SystemTime::now(),
        );
        let (status, _, _) = get(
            &app,
            &format!("{BASE}/namespaces/elsewhere/packagemanifests?limit=1&continue={token}"),
            None,
        )
        .await;
        assert_eq!(status, StatusCode::OK);
    }

    #[tokio::test]
    async fn hostile_paging_parameters_are_bad_requests() {
        let app = app(allowed());
        let hostile = [
            "limit=abc".to_owned(),
            "limit=1e3".to_owned(),
            // (`continue=%%%` is dropped as a malformed pair, as Go's query
            // parsing in the API server drops it.)
            "continue=%25%25%25".to_owned(),
            "continue=bm90IGpzb24".to_owned(),
            "continue=eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MSwic3RhcnQiOiIvIn0".to_owned(),
            format!("continue={}", "QUFB".repeat(1100)),
            "continue=eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJnZW4iOiJ4Iiwic3RhcnQiOltmYWxzZSwiYSIsImIiLCJjIl19&resourceVersion=5".to_owned(),
        ];
        for query in hostile {
            let (status, _, body) =
                get(&app, &format!("{BASE}/packagemanifests?{query}"), None).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
            assert_eq!(body["reason"], "BadRequest", "{query}");
        }
    }

    #[tokio::test]
    async fn table_watches_send_one_row_tables() {
        let app = app(allowed());
        let table_accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
        let response = handle(
            Arc::clone(&app),
            Request::get(format!(
                "{BASE}/namespaces/team/packagemanifests?watch=true"
            ))
            .header(header::ACCEPT, table_accept)
            .body(Body::empty())
            .unwrap(),
        )
        .await;
        app.store.replace_catalog(
            &("team".into(), "local".into()),
            vec![
                manifest("widget", "team", "local"),
                manifest("gadget", "team", "local"),
            ],
            SystemTime::now(),
        );
        let events = lines(response, 4).await;
        let (_, _, list) = get(
            &app,
            &format!("{BASE}/namespaces/team/packagemanifests"),
            Some(table_accept),
        )
        .await;
        for (i, event) in events.iter().enumerate() {
            let object = &event["object"];
            assert_eq!(object["kind"], "Table", "{event}");
            assert_eq!(object["rows"].as_array().unwrap().len(), 1);
            if i == 0 {
                assert_eq!(object["columnDefinitions"], list["columnDefinitions"]);
            } else {
                assert!(object["columnDefinitions"].is_null(), "{event}");
            }
            assert_eq!(
                object["metadata"]["resourceVersion"],
                object["rows"][0]["object"]["metadata"]["resourceVersion"]
            );
        }
        let rows: Vec<(&str, &str)> = events
            .iter()
            .map(|e| {
                (
                    e["type"].as_str().unwrap(),
                    e["object"]["rows"][0]["cells"][0].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                ("ADDED", "widget"),
                ("ADDED", "etcd"),
                ("ADDED", "redis"),
                ("ADDED", "gadget")
            ]
        );
        assert_eq!(
            events[3]["object"]["rows"][0]["cells"][1], "local display",
            "same cells as the list's rows"
        );
    }

    async fn lines(response: Response<Body>, count: usize) -> Vec<Value> {
        use futures::StreamExt as _;
        let mut stream = response.into_body().into_data_stream();
        let mut buffer = Vec::new();
        let mut out = Vec::new();
        while out.len() < count {
            let chunk = tokio::time::timeout(Duration::from_secs(5), stream.next())
                .await
                .unwrap()
                .unwrap()
                .unwrap();
            buffer.extend_from_slice(&chunk);
            while let Some(pos) = buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buffer.drain(..=pos).collect();
                out.push(serde_json::from_slice(&line).unwrap());
            }
        }
        out
    }

    #[tokio::test]
    async fn watches_replay_then_follow_changes() {
        let app = app(allowed());
        let rv = app.store.resource_version();
        let response = handle(
            Arc::clone(&app),
            Request::get(format!("{BASE}/namespaces/team/packagemanifests?watch=true&resourceVersion={rv}&allowWatchBookmarks=true"))
                .body(Body::empty())
                .unwrap(),
        )
        .await;
        app.store.replace_catalog(
            &("team".into(), "local".into()),
            vec![
                manifest("widget", "team", "local"),
                manifest("gadget", "team", "local"),
            ],
            SystemTime::now(),
        );
        app.store
            .remove_catalog(&("other".into(), "invisible".into()));
        let events = lines(response, 1).await;
        assert_eq!(events[0]["type"], "ADDED");
        assert_eq!(events[0]["object"]["metadata"]["name"], "gadget");
        assert_eq!(
            events[0]["object"]["metadata"]["resourceVersion"],
            (rv + 1).to_string()
        );

        // Initial events and the end bookmark for sendInitialEvents.
        let response = handle(
            Arc::clone(&app),
            Request::get(format!("{BASE}/packagemanifests?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&labelSelector=catalog%3Dlocal"))
                .body(Body::empty())
                .unwrap(),
        )
        .await;
        let events = lines(response, 3).await;
        assert_eq!(events[2]["type"], "BOOKMARK");
        assert_eq!(
            events[2]["object"]["metadata"]["annotations"][INITIAL_EVENTS_END],
            "true"
        );

        // Too old a version: 410 in an ERROR event.
        let response = handle(
            Arc::clone(&app),
            Request::get(format!("{BASE}/packagemanifests?watch=1&resourceVersion=5"))
                .body(Body::empty())
                .unwrap(),
        )
        .await;
        let events = lines(response, 1).await;
        assert_eq!(events[0]["type"], "ERROR");
        assert_eq!(events[0]["object"]["code"], 410);
        let (status, _, _) = get(
            &app,
            &format!("{BASE}/packagemanifests?watch=1&resourceVersion=abc"),
            None,
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
    }
}
