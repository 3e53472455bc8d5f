//! The gRPC server: `api.Registry`, `api.ExperimentalRegistry`,
//! `grpc.health.v1.Health` and server reflection over one [`CatalogIndex`].
//!
//! Answers follow operator-registry's `opm serve` (its `pkg/server` over
//! `pkg/cache`), with three deliberate differences: lookups of something that
//! does not exist fail with `NOT_FOUND` (upstream says `UNKNOWN`, with the
//! same message); malformed requests (a required name empty or longer than
//! [`MAX_NAME_BYTES`]) fail with `INVALID_ARGUMENT`; and every answer that
//! upstream produces in Go map order is sorted, so answers are repeatable.

use std::{future::Future, net::SocketAddr, pin::Pin, sync::Arc};

use futures::{Stream, StreamExt, stream};
use tokio::{net::TcpListener, sync::mpsc};
use tonic::{Request, Response, Status, transport::server::TcpIncoming};
use tonic_health::pb::{
    HealthCheckRequest, HealthCheckResponse,
    health_check_response::ServingStatus,
    health_server::{Health, HealthServer},
};

use crate::{
    api::{
        self,
        experimental_registry_server::{ExperimentalRegistry, ExperimentalRegistryServer},
        registry_server::{Registry, RegistryServer as GrpcRegistryServer},
    },
    bundle::BundleForm,
    error::{ReadError, ServeError},
    index::CatalogIndex,
    limits::{MAX_NAME_BYTES, MAX_REQUEST_MESSAGE_BYTES, MAX_RESPONSE_MESSAGE_BYTES},
};

/// The encoded `FileDescriptorSet` of `proto/api/registry.proto` and its
/// imports, served by reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!("gen/api.fds.bin");

/// The metadata header that experimental RPCs require, set to `true`.
pub const HEADER_ACKNOWLEDGE_EXPERIMENTAL: &str = "x-acknowledge-experimental";

/// How many bundles a `ListBundles` stream prepares ahead of the client. The
/// bound keeps memory flat however many clients stream at once.
const LIST_BUNDLES_BUFFER: usize = 16;

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

/// The registry server over one catalog index.
///
/// ```no_run
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// use olm_registry::{CatalogIndex, IndexOptions, RegistryServer};
///
/// let index = CatalogIndex::build("/configs", &IndexOptions::default())?;
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:50051").await?;
/// RegistryServer::new(index)
///     .serve(listener, std::future::pending())
///     .await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct RegistryServer {
    index: Arc<CatalogIndex>,
}

impl RegistryServer {
    /// A server answering from `index`.
    pub fn new(index: impl Into<Arc<CatalogIndex>>) -> Self {
        Self {
            index: index.into(),
        }
    }

    /// The index this server answers from.
    pub fn index(&self) -> &Arc<CatalogIndex> {
        &self.index
    }

    /// The tonic router with every service mounted and the message size
    /// limits applied, for callers that add layers or services of their own.
    pub fn router(&self) -> tonic::transport::server::Router {
        let service = RegistryService {
            index: self.index.clone(),
        };
        let registry = GrpcRegistryServer::new(service.clone())
            .max_decoding_message_size(MAX_REQUEST_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_RESPONSE_MESSAGE_BYTES);
        let experimental = ExperimentalRegistryServer::new(service)
            .max_decoding_message_size(MAX_REQUEST_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_RESPONSE_MESSAGE_BYTES);
        let health =
            HealthServer::new(AlwaysServing).max_decoding_message_size(MAX_REQUEST_MESSAGE_BYTES);
        let reflection = || {
            tonic_reflection::server::Builder::configure()
                .register_encoded_file_descriptor_set(FILE_DESCRIPTOR_SET)
                .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        };
        let mut router = tonic::transport::Server::builder()
            .trace_fn(request_span)
            .add_service(registry)
            .add_service(experimental)
            .add_service(health);
        // The descriptor sets are compiled in and checked by tests, so
        // building reflection cannot fail at run time; if it ever did, the
        // registry still serves without it.
        match reflection().build_v1() {
            Ok(v1) => router = router.add_service(v1),
            Err(err) => tracing::error!(%err, "grpc reflection v1 unavailable"),
        }
        match reflection().build_v1alpha() {
            Ok(v1alpha) => router = router.add_service(v1alpha),
            Err(err) => tracing::error!(%err, "grpc reflection v1alpha unavailable"),
        }
        router
    }

    /// Serves on `listener` until `shutdown` completes, then drains.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), ServeError> {
        let addr = listener.local_addr().map_err(ServeError::Listener)?;
        tracing::info!(%addr, packages = self.index.stats().packages, "serving registry");
        let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
        self.router()
            .serve_with_incoming_shutdown(incoming, shutdown)
            .await?;
        Ok(())
    }

    /// Starts serving on a free loopback port in a background task; for tests,
    /// benchmarks and tools. The server stops when the handle is dropped or
    /// [`RunningServer::shutdown`] is awaited.
    pub async fn spawn_loopback(self) -> Result<RunningServer, ServeError> {
        let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .map_err(ServeError::Listener)?;
        let addr = listener.local_addr().map_err(ServeError::Listener)?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(self.serve(listener, async move {
            let _ = stopped.await;
        }));
        Ok(RunningServer {
            addr,
            stop: Some(stop),
            task: Some(task),
        })
    }
}

/// A server started by [`RegistryServer::spawn_loopback`].
#[derive(Debug)]
pub struct RunningServer {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<(), ServeError>>>,
}

impl RunningServer {
    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The `http://` endpoint of the server, for clients.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops the server and waits until it has drained.
    pub async fn shutdown(mut self) -> Result<(), ServeError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.task.take() {
            Some(task) => task.await.unwrap_or(Ok(())),
            None => Ok(()),
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Checks a name from a request: at most [`MAX_NAME_BYTES`], and not empty
/// when `required`.
/// The server span of one registry call, a child of the caller's span when
/// the request carries a trace context (W3C `traceparent` metadata). Health
/// checks and reflection get none: probes would fill the trace store.
fn request_span(request: &tonic::codegen::http::Request<()>) -> tracing::Span {
    let path = request.uri().path().trim_start_matches('/');
    let Some((service, method)) = path.split_once('/') else {
        return tracing::Span::none();
    };
    if !service.starts_with("api.") {
        return tracing::Span::none();
    }
    let span = tracing::info_span!(
        "grpc_server",
        otel.name = path,
        otel.kind = "server",
        rpc.system = "grpc",
        rpc.service = service,
        rpc.method = method,
    );
    olm_trace::continue_from_headers(&span, request.headers());
    span
}

fn check_name<'a>(field: &str, value: &'a str, required: bool) -> Result<&'a str, Status> {
    if value.len() > MAX_NAME_BYTES {
        return Err(Status::invalid_argument(format!(
            "{field} is {} bytes long; the limit is {MAX_NAME_BYTES}",
            value.len()
        )));
    }
    if required && value.is_empty() {
        return Err(Status::invalid_argument(format!(
            "{field} must not be empty"
        )));
    }
    Ok(value)
}

fn read_failed(err: ReadError) -> Status {
    tracing::error!(error = %err, "reading a catalog document failed");
    Status::internal(err.to_string())
}

/// The services over the index; cheap to clone.
#[derive(Debug, Clone)]
struct RegistryService {
    index: Arc<CatalogIndex>,
}

impl RegistryService {
    /// Materializes one bundle. This reads one or two documents (the bundle,
    /// and the package for a synthesized CSV) with positioned reads of files
    /// that are in the page cache once served; doing it inline costs less than
    /// a hop to the blocking pool (about 0.1 ms of a 0.3 ms answer here).
    /// Streams, which read thousands of documents, use the blocking pool.
    fn bundle(&self, entry: u32, form: BundleForm) -> Result<api::Bundle, Status> {
        self.index.bundle_message(entry, form).map_err(read_failed)
    }

    fn package(&self, name: &str) -> Result<u32, Status> {
        self.index
            .package(name)
            .ok_or_else(|| Status::not_found(format!("package {name:?} not found")))
    }

    fn channel(&self, package_name: &str, package: u32, name: &str) -> Result<u32, Status> {
        self.index.channel(package, name).ok_or_else(|| {
            Status::not_found(format!(
                "package {package_name:?}, channel {name:?} not found"
            ))
        })
    }

    fn channel_entry(
        &self,
        entry: u32,
        replaces: crate::index::strings::StrId,
    ) -> api::ChannelEntry {
        let index = &self.index;
        let e = &index.entries[entry as usize];
        let c = &index.channels[e.channel as usize];
        api::ChannelEntry {
            package_name: index
                .str(index.packages[c.package as usize].name)
                .to_owned(),
            channel_name: index.str(c.name).to_owned(),
            bundle_name: index.str(index.bundles[e.bundle as usize].name).to_owned(),
            replaces: index.str(replaces).to_owned(),
        }
    }

    /// Upstream's `channelEntriesForBundle`: the entry itself, then one per
    /// skip that differs from `replaces` (and, unless `any_channel`, names a
    /// bundle of the same channel).
    fn entries_for_bundle(&self, entry: u32, any_channel: bool, out: &mut Vec<api::ChannelEntry>) {
        let index = &self.index;
        let e = &index.entries[entry as usize];
        out.push(self.channel_entry(entry, e.replaces));
        for skip in index.skips_of(e) {
            if *skip == e.replaces {
                continue;
            }
            if any_channel || index.entry(e.channel, index.str(*skip)).is_some() {
                out.push(self.channel_entry(entry, *skip));
            }
        }
    }

    fn provider_request(group: &str, version: &str, kind: &str) -> Result<(), Status> {
        check_name("group", group, false)?;
        check_name("version", version, true)?;
        check_name("kind", kind, true)?;
        Ok(())
    }

    /// Upstream's `GetLatestChannelEntriesThatProvide`: channel heads that
    /// provide the GVK, with their skips within the channel.
    fn latest_providers(
        &self,
        group: &str,
        version: &str,
        kind: &str,
    ) -> Result<Vec<api::ChannelEntry>, Status> {
        let index = &self.index;
        let mut out = Vec::new();
        if let Some(gvk) = index.gvk(group, version, kind) {
            for c in &index.channels {
                let head = &index.entries[c.head as usize];
                if index.provides(head.bundle, gvk) {
                    self.entries_for_bundle(c.head, false, &mut out);
                }
            }
        }
        if out.is_empty() {
            return Err(Status::not_found(format!(
                "no channel entries found that provide group:{group:?} version:{version:?} kind:{kind:?}"
            )));
        }
        Ok(out)
    }
}

fn stream_of<T: Send + 'static>(items: Vec<T>) -> BoxStream<T> {
    Box::pin(stream::iter(items.into_iter().map(Ok)))
}

#[tonic::async_trait]
impl Registry for RegistryService {
    type ListPackagesStream = BoxStream<api::PackageName>;
    type GetChannelEntriesThatReplaceStream = BoxStream<api::ChannelEntry>;
    type GetChannelEntriesThatProvideStream = BoxStream<api::ChannelEntry>;
    type GetLatestChannelEntriesThatProvideStream = BoxStream<api::ChannelEntry>;
    type ListBundlesStream = BoxStream<api::Bundle>;

    #[tracing::instrument(level = "debug", skip_all)]
    async fn list_packages(
        &self,
        _request: Request<api::ListPackageRequest>,
    ) -> Result<Response<Self::ListPackagesStream>, Status> {
        let names: Vec<api::PackageName> = self
            .index
            .package_names()
            .map(|name| api::PackageName {
                name: name.to_owned(),
            })
            .collect();
        Ok(Response::new(stream_of(names)))
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn get_package(
        &self,
        request: Request<api::GetPackageRequest>,
    ) -> Result<Response<api::Package>, Status> {
        let req = request.into_inner();
        let name = check_name("name", &req.name, true)?;
        let index = &self.index;
        let p = &index.packages[self.package(name)? as usize];
        let deprecation = |d: Option<crate::index::strings::StrId>| {
            d.map(|m| api::Deprecation {
                message: index.str(m).to_owned(),
            })
        };
        let channels = index.channels[p.channels.range()]
            .iter()
            .map(|c| api::Channel {
                name: index.str(c.name).to_owned(),
                csv_name: index
                    .str(index.bundles[index.entries[c.head as usize].bundle as usize].name)
                    .to_owned(),
                deprecation: deprecation(c.deprecation),
            })
            .collect();
        Ok(Response::new(api::Package {
            name: index.str(p.name).to_owned(),
            channels,
            default_channel_name: index.str(p.default_channel).to_owned(),
            deprecation: deprecation(p.deprecation),
        }))
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn get_bundle(
        &self,
        request: Request<api::GetBundleRequest>,
    ) -> Result<Response<api::Bundle>, Status> {
        let req = request.into_inner();
        let pkg_name = check_name("pkgName", &req.pkg_name, true)?;
        let channel_name = check_name("channelName", &req.channel_name, true)?;
        let csv_name = check_name("csvName", &req.csv_name, true)?;
        let package = self.package(pkg_name)?;
        let channel = self.channel(pkg_name, package, channel_name)?;
        let entry = self.index.entry(channel, csv_name).ok_or_else(|| {
            Status::not_found(format!(
                "package {pkg_name:?}, channel {channel_name:?}, bundle {csv_name:?} not found"
            ))
        })?;
        self.bundle(entry, BundleForm::Single).map(Response::new)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn get_bundle_for_channel(
        &self,
        request: Request<api::GetBundleInChannelRequest>,
    ) -> Result<Response<api::Bundle>, Status> {
        let req = request.into_inner();
        let pkg_name = check_name("pkgName", &req.pkg_name, true)?;
        let channel_name = check_name("channelName", &req.channel_name, true)?;
        let package = self.package(pkg_name)?;
        let channel = self.channel(pkg_name, package, channel_name)?;
        let head = self.index.channels[channel as usize].head;
        self.bundle(head, BundleForm::Single).map(Response::new)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn get_channel_entries_that_replace(
        &self,
        request: Request<api::GetAllReplacementsRequest>,
    ) -> Result<Response<Self::GetChannelEntriesThatReplaceStream>, Status> {
        let req = request.into_inner();
        let name = check_name("csvName", &req.csv_name, true)?;
        let index = &self.index;
        let mut out = Vec::new();
        if let Some(id) = index.strings.find(name) {
            for (entry_id, e) in index.entries.iter().enumerate() {
                // Upstream reports the entry once for `replaces` and once
                // more for a matching skip, both with the entry's `replaces`.
                if e.replaces == id {
                    out.push(self.channel_entry(entry_id as u32, e.replaces));
                }
                for skip in index.skips_of(e) {
                    if *skip == id && *skip != e.replaces {
                        out.push(self.channel_entry(entry_id as u32, e.replaces));
                    }
                }
            }
        }
        if out.is_empty() {
            return Err(Status::not_found(format!(
                "no channel entries found that replace {name}"
            )));
        }
        Ok(Response::new(stream_of(out)))
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn get_bundle_that_replaces(
        &self,
        request: Request<api::GetReplacementRequest>,
    ) -> Result<Response<api::Bundle>, Status> {
        let req = request.into_inner();
        let csv_name = check_name("csvName", &req.csv_name, true)?;
        let pkg_name = check_name("pkgName", &req.pkg_name, true)?;
        let channel_name = check_name("channelName", &req.channel_name, true)?;
        let package = self
            .index
            .package(pkg_name)
            .ok_or_else(|| Status::not_found(format!("package {pkg_name} not found")))?;
        let channel = self.channel(pkg_name, package, channel_name)?;
        let index = &self.index;
        // Upstream takes whichever entry its map yields first; entries are in
        // bundle-name order here, so the answer is at least repeatable.
        let span = index.channels[channel as usize].entries;
        let found = span.range().find(|&e| {
            let entry = &index.entries[e];
            index.str(entry.replaces) == csv_name
                || index
                    .skips_of(entry)
                    .iter()
                    .any(|s| index.str(*s) == csv_name)
        });
        let Some(entry) = found else {
            return Err(Status::not_found(format!(
                "no entry found for package {pkg_name:?}, channel {channel_name:?}"
            )));
        };
        self.bundle(entry as u32, BundleForm::Single)
            .map(Response::new)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn get_channel_entries_that_provide(
        &self,
        request: Request<api::GetAllProvidersRequest>,
    ) -> Result<Response<Self::GetChannelEntriesThatProvideStream>, Status> {
        let req = request.into_inner();
        Self::provider_request(&req.group, &req.version, &req.kind)?;
        let index = &self.index;
        let mut out = Vec::new();
        if let Some(gvk) = index.gvk(&req.group, &req.version, &req.kind) {
            for bundle in index.providers_of(gvk) {
                for entry in index.entries_of(bundle) {
                    self.entries_for_bundle(*entry, true, &mut out);
                }
            }
        }
        if out.is_empty() {
            return Err(Status::not_found(format!(
                "no channel entries found that provide group:{:?} version:{:?} kind:{:?}",
                req.group, req.version, req.kind
            )));
        }
        Ok(Response::new(stream_of(out)))
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn get_latest_channel_entries_that_provide(
        &self,
        request: Request<api::GetLatestProvidersRequest>,
    ) -> Result<Response<Self::GetLatestChannelEntriesThatProvideStream>, Status> {
        let req = request.into_inner();
        Self::provider_request(&req.group, &req.version, &req.kind)?;
        let out = self.latest_providers(&req.group, &req.version, &req.kind)?;
        Ok(Response::new(stream_of(out)))
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn get_default_bundle_that_provides(
        &self,
        request: Request<api::GetDefaultProviderRequest>,
    ) -> Result<Response<api::Bundle>, Status> {
        let req = request.into_inner();
        Self::provider_request(&req.group, &req.version, &req.kind)?;
        let latest = self.latest_providers(&req.group, &req.version, &req.kind)?;
        // The first package by name whose default channel's head provides it;
        // entries come out in package order already.
        let index = &self.index;
        for entry in &latest {
            let Some(p) = index.package(&entry.package_name) else {
                continue;
            };
            if index.str(index.packages[p as usize].default_channel) != entry.channel_name {
                continue;
            }
            let Some(c) = index.channel(p, &entry.channel_name) else {
                continue;
            };
            if let Some(e) = index.entry(c, &entry.bundle_name) {
                return self.bundle(e, BundleForm::Single).map(Response::new);
            }
        }
        Err(Status::not_found(format!(
            "no entry found that provides group:{:?} version:{:?} kind:{:?}",
            req.group, req.version, req.kind
        )))
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn list_bundles(
        &self,
        _request: Request<api::ListBundlesRequest>,
    ) -> Result<Response<Self::ListBundlesStream>, Status> {
        let (tx, rx) = mpsc::channel::<Result<api::Bundle, Status>>(LIST_BUNDLES_BUFFER);
        let index = self.index.clone();
        // One blocking task per stream reads documents in ListBundles order
        // and waits whenever the client is LIST_BUNDLES_BUFFER bundles behind.
        tokio::task::spawn_blocking(move || {
            for message in index.listed_bundles(BundleForm::Listed, 0..index.listed_count()) {
                let message = message.map_err(read_failed);
                let failed = message.is_err();
                if tx.blocking_send(message).is_err() || failed {
                    break;
                }
            }
        });
        let stream = stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        });
        Ok(Response::new(stream.boxed()))
    }
}

#[tonic::async_trait]
impl ExperimentalRegistry for RegistryService {
    type ExperimentalListPackageCustomSchemasStream = BoxStream<prost_types::Struct>;

    #[tracing::instrument(level = "debug", skip_all)]
    async fn experimental_list_package_custom_schemas(
        &self,
        request: Request<api::ExperimentalListPackageCustomSchemasRequest>,
    ) -> Result<Response<Self::ExperimentalListPackageCustomSchemasStream>, Status> {
        let acknowledged = request
            .metadata()
            .get(HEADER_ACKNOWLEDGE_EXPERIMENTAL)
            .is_some_and(|v| v.as_bytes() == b"true");
        if !acknowledged {
            // Unaware clients see an empty stream, as upstream does.
            return Ok(Response::new(stream_of(Vec::new())));
        }
        let req = request.into_inner();
        let schema = check_name("schema", &req.schema, false)?;
        let package = check_name("packageName", &req.package_name, false)?;
        if schema.is_empty() {
            return Err(Status::invalid_argument("schema is required"));
        }
        let key_error = |name: &str, value: &str| {
            Status::invalid_argument(format!(
                "invalid custom schema query: invalid {name} {value:?}: must match ^[a-zA-Z0-9][a-zA-Z0-9._-]*$"
            ))
        };
        if !crate::index::valid_meta_key(schema) {
            return Err(key_error("schema", schema));
        }
        if !package.is_empty() && !crate::index::valid_meta_key(package) {
            return Err(key_error("packageName", package));
        }
        let index = self.index.clone();
        let (schema, package) = (schema.to_owned(), package.to_owned());
        let documents =
            tokio::task::spawn_blocking(move || index.custom_documents(&schema, &package))
                .await
                .map_err(|e| Status::internal(format!("custom schema task failed: {e}")))??;
        Ok(Response::new(stream_of(documents)))
    }
}

impl CatalogIndex {
    /// How many bundles the `ListBundles` answer holds: one per channel
    /// entry.
    pub(crate) fn listed_count(&self) -> usize {
        self.list_order.len()
    }

    /// The bundles at `positions` of the `ListBundles` answer (one per
    /// channel entry, by channel name, package name and bundle name), in
    /// `form`. One home for the stream and for resolver input read without
    /// a server, which reads runs of it in parallel.
    pub(crate) fn listed_bundles(
        &self,
        form: BundleForm,
        positions: std::ops::Range<usize>,
    ) -> impl Iterator<Item = Result<api::Bundle, ReadError>> + '_ {
        self.list_order[positions]
            .iter()
            .map(move |&entry| self.bundle_message(entry, form))
    }

    /// The custom-schema documents with this schema and package, as structs.
    fn custom_documents(
        &self,
        schema: &str,
        package: &str,
    ) -> Result<Vec<prost_types::Struct>, Status> {
        let key = |c: &crate::index::CustomRec| (self.str(c.schema), self.str(c.package));
        let start = self.customs.partition_point(|c| key(c) < (schema, package));
        let mut out = Vec::new();
        for c in self.customs[start..]
            .iter()
            .take_while(|c| key(c) == (schema, package))
        {
            let bytes = self.store.read(c.blob).map_err(read_failed)?;
            let value: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| {
                read_failed(ReadError::Corrupt {
                    path: self.store.describe(c.blob),
                    offset: c.blob.offset,
                    message: e.to_string(),
                })
            })?;
            if let serde_json::Value::Object(map) = value {
                out.push(crate::structs::to_struct(map));
            }
        }
        Ok(out)
    }
}

/// The health service: the registry is ready once it serves, so every
/// service name (including `""` for the whole server, and `Registry`, which
/// OLM's client asks for) is `SERVING`.
#[derive(Debug, Clone, Copy)]
struct AlwaysServing;

#[tonic::async_trait]
impl Health for AlwaysServing {
    type WatchStream = BoxStream<HealthCheckResponse>;

    async fn check(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        check_name("service", &request.get_ref().service, false)?;
        Ok(Response::new(HealthCheckResponse {
            status: ServingStatus::Serving as i32,
        }))
    }

    async fn watch(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        check_name("service", &request.get_ref().service, false)?;
        // The status never changes, so the stream sends it once and then
        // stays open until the client goes away.
        let first = stream::once(async {
            Ok(HealthCheckResponse {
                status: ServingStatus::Serving as i32,
            })
        });
        Ok(Response::new(first.chain(stream::pending()).boxed()))
    }
}
