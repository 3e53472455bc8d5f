//! The gRPC surface beyond the registry RPCs: health, reflection, message
//! size limits.

use futures::StreamExt;
use olm_registry::{MAX_REQUEST_MESSAGE_BYTES, api};
use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};
use tonic_reflection::pb::v1::{
    ServerReflectionRequest, server_reflection_client::ServerReflectionClient,
    server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
};

use crate::fixtures::{bundle, catalog, channel, package, serve};

async fn channel_to(server: &olm_registry::RunningServer) -> tonic::transport::Channel {
    tonic::transport::Endpoint::from_shared(server.endpoint())
        .unwrap()
        .connect()
        .await
        .unwrap()
}

fn tiny_catalog() -> tempfile::TempDir {
    catalog(&[(
        "app/catalog.json",
        &[
            package("app", "stable"),
            channel("app", "stable", r#"[{"name":"app.v1.0.0"}]"#),
            bundle("app", "app.v1.0.0", "1.0.0", ""),
        ]
        .join("\n"),
    )])
}

#[tokio::test]
async fn health_reports_serving_for_any_service_name() {
    let dir = tiny_catalog();
    let (server, client) = serve(dir.path()).await;
    for service in ["", "Registry", "api.Registry", "anything.else"] {
        assert!(client.health_check(service).await.unwrap(), "{service:?}");
    }
    let mut health = HealthClient::new(channel_to(&server).await);
    let mut watch = health
        .watch(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let first = watch.message().await.unwrap().expect("a first status");
    assert_eq!(first.status, ServingStatus::Serving as i32);
}

#[tokio::test]
async fn reflection_lists_every_service_and_describes_the_contract() {
    let dir = tiny_catalog();
    let (server, _client) = serve(dir.path()).await;
    let mut reflection = ServerReflectionClient::new(channel_to(&server).await);
    let requests = futures::stream::iter([
        ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::ListServices(String::new())),
        },
        ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::FileContainingSymbol("api.Registry".into())),
        },
    ]);
    let mut responses = reflection
        .server_reflection_info(requests)
        .await
        .unwrap()
        .into_inner();

    let Some(MessageResponse::ListServicesResponse(list)) =
        responses.next().await.unwrap().unwrap().message_response
    else {
        panic!("expected a service list");
    };
    let mut names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    names.sort();
    for expected in [
        "api.ExperimentalRegistry",
        "api.Registry",
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} missing from {names:?}"
        );
    }

    let Some(MessageResponse::FileDescriptorResponse(files)) =
        responses.next().await.unwrap().unwrap().message_response
    else {
        panic!("expected file descriptors");
    };
    use prost::Message as _;
    let descriptors: Vec<prost_types::FileDescriptorProto> = files
        .file_descriptor_proto
        .iter()
        .map(|bytes| prost_types::FileDescriptorProto::decode(bytes.as_slice()).unwrap())
        .collect();
    let registry = descriptors
        .iter()
        .find(|f| f.package() == "api")
        .expect("the api package");
    assert!(registry.message_type.iter().any(|m| m.name() == "Bundle"));
}

#[tokio::test]
async fn requests_over_the_message_limit_are_refused_before_decoding() {
    let dir = tiny_catalog();
    let (server, _client) = serve(dir.path()).await;
    // The generated client has no request limit of its own; the server's is
    // what refuses this.
    let mut raw = api::registry_client::RegistryClient::connect(server.endpoint())
        .await
        .unwrap();
    let status = raw
        .get_package(api::GetPackageRequest {
            name: "x".repeat(MAX_REQUEST_MESSAGE_BYTES + 1),
        })
        .await
        .unwrap_err();
    // tonic reports an oversized message as OUT_OF_RANGE (grpc-go says
    // RESOURCE_EXHAUSTED); either way the server never decoded it.
    assert_eq!(status.code(), tonic::Code::OutOfRange, "{status}");
    assert!(status.message().contains("too large"), "{status}");
}
