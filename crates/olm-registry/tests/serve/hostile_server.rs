//! A hostile registry server against our client: catalog-operator and
//! packageserver read from any address a CatalogSource names, so an answer
//! that never ends, grows without bound or drips forever must stop at a
//! named limit instead of filling their memory.

use std::{net::SocketAddr, pin::Pin, time::Duration};

use futures::{Stream, StreamExt};
use olm_registry::{
    ClientError, ClientOptions, RegistryClient, StreamLimits, api,
    api::registry_server::{Registry, RegistryServer as GrpcServer},
};
use tonic::{Request, Response, Status, transport::server::TcpIncoming};

type Answer<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

/// How the hostile server answers ListBundles and ListPackages.
#[derive(Clone, Copy, Debug)]
enum Hostility {
    /// Small messages, without end.
    Endless,
    /// Messages of about 1 MiB, without end.
    Huge,
    /// One message, then nothing, never closing.
    Drip,
    /// GetBundle answers with one message bigger than any real bundle.
    Oversized,
}

struct Hostile(Hostility);

fn bundle(padding: usize) -> api::Bundle {
    api::Bundle {
        csv_name: "flood.v1.0.0".to_owned(),
        package_name: "flood".to_owned(),
        channel_name: "stable".to_owned(),
        bundle_path: "x".repeat(padding),
        ..api::Bundle::default()
    }
}

fn hostile<T: Send + 'static>(
    how: Hostility,
    item: impl Fn(usize) -> T + Send + Sync + 'static,
) -> Answer<T> {
    match how {
        Hostility::Endless => Box::pin(futures::stream::repeat_with(move || Ok(item(16)))),
        Hostility::Huge => Box::pin(futures::stream::repeat_with(move || Ok(item(1024 * 1024)))),
        Hostility::Drip | Hostility::Oversized => Box::pin(
            futures::stream::once(async move { Ok(item(16)) }).chain(futures::stream::pending()),
        ),
    }
}

fn unimplemented<T>() -> Result<Response<T>, Status> {
    Err(Status::unimplemented("hostile server"))
}

#[tonic::async_trait]
impl Registry for Hostile {
    type ListPackagesStream = Answer<api::PackageName>;
    type GetChannelEntriesThatReplaceStream = Answer<api::ChannelEntry>;
    type GetChannelEntriesThatProvideStream = Answer<api::ChannelEntry>;
    type GetLatestChannelEntriesThatProvideStream = Answer<api::ChannelEntry>;
    type ListBundlesStream = Answer<api::Bundle>;

    async fn list_packages(
        &self,
        _: Request<api::ListPackageRequest>,
    ) -> Result<Response<Self::ListPackagesStream>, Status> {
        Ok(Response::new(hostile(self.0, |padding| api::PackageName {
            name: "p".repeat(padding),
        })))
    }
    async fn get_package(
        &self,
        _: Request<api::GetPackageRequest>,
    ) -> Result<Response<api::Package>, Status> {
        unimplemented()
    }
    async fn get_bundle(
        &self,
        _: Request<api::GetBundleRequest>,
    ) -> Result<Response<api::Bundle>, Status> {
        match self.0 {
            Hostility::Oversized => Ok(Response::new(bundle(
                olm_registry::MAX_RESPONSE_MESSAGE_BYTES + 1,
            ))),
            _ => unimplemented(),
        }
    }
    async fn get_bundle_for_channel(
        &self,
        _: Request<api::GetBundleInChannelRequest>,
    ) -> Result<Response<api::Bundle>, Status> {
        unimplemented()
    }
    async fn get_channel_entries_that_replace(
        &self,
        _: Request<api::GetAllReplacementsRequest>,
    ) -> Result<Response<Self::GetChannelEntriesThatReplaceStream>, Status> {
        Ok(Response::new(hostile(self.0, |padding| {
            api::ChannelEntry {
                package_name: "p".repeat(padding),
                ..api::ChannelEntry::default()
            }
        })))
    }
    async fn get_bundle_that_replaces(
        &self,
        _: Request<api::GetReplacementRequest>,
    ) -> Result<Response<api::Bundle>, Status> {
        unimplemented()
    }
    async fn get_channel_entries_that_provide(
        &self,
        _: Request<api::GetAllProvidersRequest>,
    ) -> Result<Response<Self::GetChannelEntriesThatProvideStream>, Status> {
        unimplemented()
    }
    async fn get_latest_channel_entries_that_provide(
        &self,
        _: Request<api::GetLatestProvidersRequest>,
    ) -> Result<Response<Self::GetLatestChannelEntriesThatProvideStream>, Status> {
        unimplemented()
    }
    async fn get_default_bundle_that_provides(
        &self,
        _: Request<api::GetDefaultProviderRequest>,
    ) -> Result<Response<api::Bundle>, Status> {
        unimplemented()
    }
    async fn list_bundles(
        &self,
        _: Request<api::ListBundlesRequest>,
    ) -> Result<Response<Self::ListBundlesStream>, Status> {
        Ok(Response::new(hostile(self.0, bundle)))
    }
}

/// Serves `how` on a loopback port until the test ends. The server's own
/// message limit is lifted: only the client's limits are under test.
async fn serve_hostile(how: Hostility) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(GrpcServer::new(Hostile(how)).max_encoding_message_size(usize::MAX))
            .serve_with_incoming(TcpIncoming::from(listener)),
    );
    addr
}

/// Small limits, so the test is quick; the defaults are checked below.
const TEST_LIMITS: StreamLimits = StreamLimits {
    max_messages: 2_000,
    max_bytes: 8 * 1024 * 1024,
    max_duration: Duration::from_secs(2),
};

async fn client(addr: SocketAddr) -> RegistryClient {
    let options = ClientOptions {
        stream_limits: TEST_LIMITS,
        ..ClientOptions::default()
    };
    RegistryClient::connect(&format!("http://{addr}"), options)
        .await
        .unwrap()
}

fn limit_named(
    result: Result<Vec<api::Bundle>, ClientError>,
) -> (&'static str, &'static str, String) {
    match result {
        Err(ClientError::LimitExceeded { rpc, limit, value }) => (rpc, limit, value),
        other => panic!("expected a limit, got {:?}", other.map(|v| v.len())),
    }
}

async fn list_bundles(client: &RegistryClient) -> Result<Vec<api::Bundle>, ClientError> {
    olm_registry::collect_stream(client.list_bundles().await?).await
}

#[tokio::test]
async fn an_endless_list_stops_at_the_message_limit() {
    let client = client(serve_hostile(Hostility::Endless).await).await;
    let (rpc, limit, value) = limit_named(list_bundles(&client).await);
    assert_eq!((rpc, limit), ("ListBundles", "max_messages"));
    assert_eq!(value, "2000 messages");
    let packages = client.list_packages().await;
    assert!(
        matches!(
            packages,
            Err(ClientError::LimitExceeded {
                rpc: "ListPackages",
                limit: "max_messages",
                ..
            })
        ),
        "{packages:?}"
    );
    let replacing = client.get_channel_entries_that_replace("flood.v0").await;
    assert!(
        matches!(
            replacing,
            Err(ClientError::LimitExceeded {
                limit: "max_messages",
                ..
            })
        ),
        "{replacing:?}"
    );
}

#[tokio::test]
async fn a_growing_list_stops_at_the_byte_limit() {
    let client = client(serve_hostile(Hostility::Huge).await).await;
    let (_, limit, value) = limit_named(list_bundles(&client).await);
    assert_eq!(limit, "max_bytes");
    assert_eq!(value, format!("{} bytes", 8 * 1024 * 1024));
}

#[tokio::test]
async fn a_dripping_list_stops_at_the_time_limit() {
    let client = client(serve_hostile(Hostility::Drip).await).await;
    let started = std::time::Instant::now();
    let (_, limit, _) = limit_named(list_bundles(&client).await);
    assert_eq!(limit, "max_duration");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn the_error_names_the_limit_for_status_messages() {
    let client = client(serve_hostile(Hostility::Endless).await).await;
    let error = list_bundles(&client).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "registry call ListBundles exceeded the limit max_messages (2000 messages); the answer was dropped"
    );
}

#[test]
fn the_default_limits_are_far_above_real_catalogs_and_far_below_a_pods_memory() {
    let limits = StreamLimits::default();
    // The generated bench catalog (1,000 packages, 20,000 bundles) and the
    // largest public indexes stay well inside.
    assert!(limits.max_messages >= 100_000);
    assert!(limits.max_bytes <= 512 * 1024 * 1024);
    assert!(limits.max_duration >= Duration::from_secs(60));
}

#[tokio::test]
async fn a_message_over_the_response_limit_is_refused_unread() {
    let addr = serve_hostile(Hostility::Oversized).await;
    let client = client(addr).await;
    let error = client
        .get_bundle("flood", "stable", "flood.v1.0.0")
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(tonic::Code::OutOfRange), "{error}");
    assert!(
        error.to_string().contains("message length too large"),
        "{error}"
    );
}
