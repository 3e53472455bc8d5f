//! A typed client of the registry API: connect with a deadline, check health,
//! and call each RPC as a method that returns Rust types (streams as
//! [`Stream`]s or collected vectors).
//!
//! It talks to any server of the contract: ours, or upstream's `opm serve`.

use std::time::Duration;

use futures::{Stream, StreamExt, TryStreamExt};
use tonic::{
    Request,
    metadata::MetadataValue,
    transport::{Channel, Endpoint},
};
use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};

use crate::{
    api::{
        self, experimental_registry_client::ExperimentalRegistryClient,
        registry_client::RegistryClient as GrpcClient,
    },
    error::ClientError,
    limits::{MAX_REQUEST_MESSAGE_BYTES, MAX_RESPONSE_MESSAGE_BYTES, StreamLimits},
    server::HEADER_ACKNOWLEDGE_EXPERIMENTAL,
};

/// Deadlines of a [`RegistryClient`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientOptions {
    /// How long connecting may take.
    pub connect_timeout: Duration,
    /// How long one call may take until its answer starts (for streams) or
    /// arrives (for single answers).
    pub request_timeout: Duration,
    /// How much one streaming answer may hold, and how long it may last.
    pub stream_limits: StreamLimits,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(60),
            stream_limits: StreamLimits::default(),
        }
    }
}

/// An API to look providers up by: group, version and kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GvkQuery<'a> {
    /// API group; empty for the core group.
    pub group: &'a str,
    /// API version, for example `v1alpha1`.
    pub version: &'a str,
    /// Kind, for example `EtcdCluster`.
    pub kind: &'a str,
}

impl<'a> GvkQuery<'a> {
    /// The query for `group`/`version`, `kind`.
    pub fn new(group: &'a str, version: &'a str, kind: &'a str) -> Self {
        Self {
            group,
            version,
            kind,
        }
    }
}

/// A connected registry client; cheap to clone (clones share the connection).
#[derive(Debug, Clone)]
pub struct RegistryClient {
    registry: GrpcClient<Channel>,
    experimental: ExperimentalRegistryClient<Channel>,
    health: HealthClient<Channel>,
    timeout: Duration,
    limits: StreamLimits,
}

fn status(rpc: &'static str) -> impl Fn(tonic::Status) -> ClientError {
    move |status| ClientError::Status { rpc, status }
}

impl RegistryClient {
    /// Connects to `endpoint` (for example `http://127.0.0.1:50051`) within
    /// `options.connect_timeout`.
    pub async fn connect(endpoint: &str, options: ClientOptions) -> Result<Self, ClientError> {
        let channel = Endpoint::from_shared(endpoint.to_owned())
            .map_err(|source| ClientError::InvalidEndpoint {
                endpoint: endpoint.to_owned(),
                source,
            })?
            .connect_timeout(options.connect_timeout)
            .timeout(options.request_timeout)
            .tcp_nodelay(true)
            .connect()
            .await
            .map_err(|source| ClientError::Connect {
                endpoint: endpoint.to_owned(),
                source,
            })?;
        Ok(Self::from_channel(channel, options.request_timeout)
            .with_stream_limits(options.stream_limits))
    }

    /// The same client with other limits on streaming answers.
    #[must_use]
    pub fn with_stream_limits(mut self, limits: StreamLimits) -> Self {
        self.limits = limits;
        self
    }

    /// A client over an existing channel, with the default
    /// [`StreamLimits`].
    pub fn from_channel(channel: Channel, timeout: Duration) -> Self {
        Self {
            registry: GrpcClient::new(channel.clone())
                .max_decoding_message_size(MAX_RESPONSE_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_REQUEST_MESSAGE_BYTES),
            experimental: ExperimentalRegistryClient::new(channel.clone())
                .max_decoding_message_size(MAX_RESPONSE_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_REQUEST_MESSAGE_BYTES),
            health: HealthClient::new(channel),
            timeout,
            limits: StreamLimits::default(),
        }
    }

    /// The generated client, for calls this type does not wrap.
    pub fn raw(&self) -> GrpcClient<Channel> {
        self.registry.clone()
    }

    /// A request with the client's timeout, carrying the trace context of
    /// the caller's span (W3C `traceparent` metadata) so that the server's
    /// spans join the caller's trace.
    fn request<T>(&self, message: T) -> Request<T> {
        let mut request = Request::new(message);
        request.set_timeout(self.timeout);
        olm_trace::inject_metadata(&tracing::Span::current(), request.metadata_mut());
        request
    }

    /// Whether the server reports `service` as serving (`""` asks about the
    /// whole server; OLM asks about `Registry`).
    pub async fn health_check(&self, service: &str) -> Result<bool, ClientError> {
        let response = self
            .health
            .clone()
            .check(self.request(HealthCheckRequest {
                service: service.to_owned(),
            }))
            .await
            .map_err(status("Health/Check"))?;
        Ok(response.into_inner().status == ServingStatus::Serving as i32)
    }

    /// Every package name.
    pub async fn list_packages(&self) -> Result<Vec<String>, ClientError> {
        let stream = self
            .registry
            .clone()
            .list_packages(self.request(api::ListPackageRequest {}))
            .await
            .map_err(status("ListPackages"))?
            .into_inner();
        bounded(stream, "ListPackages", self.limits)
            .map_ok(|p| p.name)
            .try_collect()
            .await
    }

    /// One package with its channels and default channel.
    pub async fn get_package(&self, name: &str) -> Result<api::Package, ClientError> {
        let request = self.request(api::GetPackageRequest {
            name: name.to_owned(),
        });
        let response = self.registry.clone().get_package(request).await;
        Ok(response.map_err(status("GetPackage"))?.into_inner())
    }

    /// One bundle of a package's channel.
    pub async fn get_bundle(
        &self,
        package: &str,
        channel: &str,
        csv_name: &str,
    ) -> Result<api::Bundle, ClientError> {
        let request = self.request(api::GetBundleRequest {
            pkg_name: package.to_owned(),
            channel_name: channel.to_owned(),
            csv_name: csv_name.to_owned(),
        });
        let response = self.registry.clone().get_bundle(request).await;
        Ok(response.map_err(status("GetBundle"))?.into_inner())
    }

    /// The head bundle of a package's channel.
    pub async fn get_bundle_for_channel(
        &self,
        package: &str,
        channel: &str,
    ) -> Result<api::Bundle, ClientError> {
        let request = self.request(api::GetBundleInChannelRequest {
            pkg_name: package.to_owned(),
            channel_name: channel.to_owned(),
        });
        #[allow(deprecated)]
        let response = self.registry.clone().get_bundle_for_channel(request).await;
        Ok(response
            .map_err(status("GetBundleForChannel"))?
            .into_inner())
    }

    /// Channel entries, in any package, that replace or skip `csv_name`.
    pub async fn get_channel_entries_that_replace(
        &self,
        csv_name: &str,
    ) -> Result<Vec<api::ChannelEntry>, ClientError> {
        let request = self.request(api::GetAllReplacementsRequest {
            csv_name: csv_name.to_owned(),
        });
        let response = self
            .registry
            .clone()
            .get_channel_entries_that_replace(request)
            .await;
        collect(response, "GetChannelEntriesThatReplace", self.limits).await
    }

    /// The bundle of a package's channel that replaces or skips `csv_name`.
    pub async fn get_bundle_that_replaces(
        &self,
        csv_name: &str,
        package: &str,
        channel: &str,
    ) -> Result<api::Bundle, ClientError> {
        let request = self.request(api::GetReplacementRequest {
            csv_name: csv_name.to_owned(),
            pkg_name: package.to_owned(),
            channel_name: channel.to_owned(),
        });
        let response = self
            .registry
            .clone()
            .get_bundle_that_replaces(request)
            .await;
        Ok(response
            .map_err(status("GetBundleThatReplaces"))?
            .into_inner())
    }

    /// Channel entries of every bundle that provides `gvk`.
    pub async fn get_channel_entries_that_provide(
        &self,
        gvk: GvkQuery<'_>,
    ) -> Result<Vec<api::ChannelEntry>, ClientError> {
        let request = self.request(api::GetAllProvidersRequest {
            group: gvk.group.to_owned(),
            version: gvk.version.to_owned(),
            kind: gvk.kind.to_owned(),
            plural: String::new(),
        });
        let response = self
            .registry
            .clone()
            .get_channel_entries_that_provide(request)
            .await;
        collect(response, "GetChannelEntriesThatProvide", self.limits).await
    }

    /// Channel entries of channel heads that provide `gvk`.
    pub async fn get_latest_channel_entries_that_provide(
        &self,
        gvk: GvkQuery<'_>,
    ) -> Result<Vec<api::ChannelEntry>, ClientError> {
        let request = self.request(api::GetLatestProvidersRequest {
            group: gvk.group.to_owned(),
            version: gvk.version.to_owned(),
            kind: gvk.kind.to_owned(),
            plural: String::new(),
        });
        let response = self
            .registry
            .clone()
            .get_latest_channel_entries_that_provide(request)
            .await;
        collect(response, "GetLatestChannelEntriesThatProvide", self.limits).await
    }

    /// The default-channel head that provides `gvk`, from the first package
    /// by name.
    pub async fn get_default_bundle_that_provides(
        &self,
        gvk: GvkQuery<'_>,
    ) -> Result<api::Bundle, ClientError> {
        let request = self.request(api::GetDefaultProviderRequest {
            group: gvk.group.to_owned(),
            version: gvk.version.to_owned(),
            kind: gvk.kind.to_owned(),
            plural: String::new(),
        });
        let response = self
            .registry
            .clone()
            .get_default_bundle_that_provides(request)
            .await;
        Ok(response
            .map_err(status("GetDefaultBundleThatProvides"))?
            .into_inner())
    }

    /// Every bundle once per channel it is in, as a stream.
    pub async fn list_bundles(
        &self,
    ) -> Result<impl Stream<Item = Result<api::Bundle, ClientError>> + Send + 'static, ClientError>
    {
        let stream = self
            .registry
            .clone()
            .list_bundles(self.request(api::ListBundlesRequest {}))
            .await
            .map_err(status("ListBundles"))?
            .into_inner();
        Ok(bounded(stream, "ListBundles", self.limits))
    }

    /// Documents of a custom schema for a package (experimental upstream;
    /// this method sends the acknowledgement header).
    pub async fn list_package_custom_schemas(
        &self,
        schema: &str,
        package: &str,
    ) -> Result<Vec<serde_json::Map<String, serde_json::Value>>, ClientError> {
        let mut request = self.request(api::ExperimentalListPackageCustomSchemasRequest {
            schema: schema.to_owned(),
            package_name: package.to_owned(),
        });
        request.metadata_mut().insert(
            HEADER_ACKNOWLEDGE_EXPERIMENTAL,
            MetadataValue::from_static("true"),
        );
        let rpc = "ExperimentalListPackageCustomSchemas";
        let stream = self
            .experimental
            .clone()
            .experimental_list_package_custom_schemas(request)
            .await
            .map_err(status(rpc))?
            .into_inner();
        bounded(stream, rpc, self.limits)
            .map_ok(crate::structs::from_struct)
            .try_collect()
            .await
    }
}

async fn collect<T: prost::Message + Send + 'static>(
    response: Result<tonic::Response<tonic::Streaming<T>>, tonic::Status>,
    rpc: &'static str,
    limits: StreamLimits,
) -> Result<Vec<T>, ClientError> {
    let stream = response.map_err(status(rpc))?.into_inner();
    bounded(stream, rpc, limits).try_collect().await
}

/// `stream` read within `limits`: past any of them it yields one
/// [`ClientError::LimitExceeded`] naming the limit and ends, without reading
/// further. The duration counts from here, and a server that sends nothing
/// at all is cut off by it too.
fn bounded<T: prost::Message + Send + 'static>(
    stream: tonic::Streaming<T>,
    rpc: &'static str,
    limits: StreamLimits,
) -> futures::stream::BoxStream<'static, Result<T, ClientError>> {
    struct State<T> {
        stream: tonic::Streaming<T>,
        deadline: tokio::time::Instant,
        messages: usize,
        bytes: u64,
        done: bool,
    }
    let exceeded =
        move |limit: &'static str, value: String| ClientError::LimitExceeded { rpc, limit, value };
    let state = State {
        stream,
        deadline: tokio::time::Instant::now() + limits.max_duration,
        messages: 0,
        bytes: 0,
        done: false,
    };
    futures::stream::unfold(state, move |mut state| async move {
        if state.done {
            return None;
        }
        let next = tokio::time::timeout_at(state.deadline, state.stream.next()).await;
        let item = match next {
            Err(_) => Err(exceeded(
                "max_duration",
                format!("{:?}", limits.max_duration),
            )),
            Ok(None) => return None,
            Ok(Some(Err(error))) => Err(status(rpc)(error)),
            Ok(Some(Ok(message))) => {
                state.messages += 1;
                state.bytes += message.encoded_len() as u64;
                if state.messages > limits.max_messages {
                    Err(exceeded(
                        "max_messages",
                        format!("{} messages", limits.max_messages),
                    ))
                } else if state.bytes > limits.max_bytes {
                    Err(exceeded("max_bytes", format!("{} bytes", limits.max_bytes)))
                } else {
                    Ok(message)
                }
            }
        };
        state.done = item.is_err();
        Some((item, state))
    })
    // Boxed, so callers may poll it without pinning it themselves.
    .boxed()
}

/// Collects a stream of results, for tests and tools.
pub async fn collect_stream<T>(
    stream: impl Stream<Item = Result<T, ClientError>>,
) -> Result<Vec<T>, ClientError> {
    let mut out = Vec::new();
    let mut stream = std::pin::pin!(stream);
    while let Some(item) = stream.next().await {
        out.push(item?);
    }
    Ok(out)
}
