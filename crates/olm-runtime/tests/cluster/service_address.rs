//! Dialling Services by ClusterIP: the resolver reads real Services, with
//! ClusterIPs the API server allocated.

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use kube::{
    Api, Client,
    api::{ObjectMeta, PostParams},
};
use olm_runtime::{
    Error,
    service_address::{AddressResolver, ServiceLookup, Unroutable},
};

use crate::init_logs;

/// Creates the Service `name` serving `port`, with `spec` as given
/// otherwise, and returns it as stored (with its allocated ClusterIP).
async fn create_service(
    client: &Client,
    namespace: &str,
    name: &str,
    port: i32,
    spec: ServiceSpec,
) -> Service {
    let services: Api<Service> = Api::namespaced(client.clone(), namespace);
    let service = Service {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            ports: Some(vec![ServicePort {
                name: Some("grpc".to_owned()),
                port,
                ..ServicePort::default()
            }]),
            ..spec
        }),
        ..Service::default()
    };
    services
        .create(&PostParams::default(), &service)
        .await
        .expect("service created")
}

fn cluster_ip_of(service: &Service) -> String {
    service
        .spec
        .as_ref()
        .and_then(|spec| spec.cluster_ip.clone())
        .expect("the API server allocates a cluster IP")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_ip_lookup_dials_the_service_s_cluster_ip() {
    init_logs();
    let plane = olm_testkit::control_plane();
    let namespace = plane.namespace("service-address").await;
    let ns = namespace.name();
    let client = plane.client().await;
    let service = create_service(
        &client,
        ns,
        "sample-registry",
        50051,
        ServiceSpec::default(),
    )
    .await;
    let ip = cluster_ip_of(&service);
    assert!(ip.parse::<std::net::IpAddr>().is_ok(), "cluster IP {ip:?}");

    let resolver = AddressResolver::new(ServiceLookup::ClusterIp, client.clone());
    assert_eq!(resolver.lookup(), ServiceLookup::ClusterIp);
    let cases = [
        (
            format!("sample-registry.{ns}.svc:50051"),
            format!("{ip}:50051"),
        ),
        (
            format!("sample-registry.{ns}.svc.cluster.local:50051"),
            format!("{ip}:50051"),
        ),
        (
            format!("http://sample-registry.{ns}.svc:50051"),
            format!("http://{ip}:50051"),
        ),
        (format!("sample-registry.{ns}.svc"), ip.clone()),
        // Not a Service's DNS name: dialled as given.
        ("127.0.0.1:50051".to_owned(), "127.0.0.1:50051".to_owned()),
        (
            "registry.example.com:50051".to_owned(),
            "registry.example.com:50051".to_owned(),
        ),
    ];
    for (address, want) in cases {
        let dialled = resolver.resolve(&address).await.expect(&address);
        assert_eq!(dialled, want, "{address}");
    }

    // With DNS lookup nothing is rewritten.
    let dns = AddressResolver::new(ServiceLookup::Dns, client);
    let address = format!("sample-registry.{ns}.svc:50051");
    assert_eq!(dns.resolve(&address).await.unwrap(), address);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_without_a_routable_cluster_ip_are_named_in_the_error() {
    init_logs();
    let plane = olm_testkit::control_plane();
    let namespace = plane.namespace("service-unroutable").await;
    let ns = namespace.name();
    let client = plane.client().await;
    create_service(
        &client,
        ns,
        "sample-headless",
        50051,
        ServiceSpec {
            cluster_ip: Some("None".to_owned()),
            ..ServiceSpec::default()
        },
    )
    .await;
    create_service(
        &client,
        ns,
        "sample-alias",
        50051,
        ServiceSpec {
            type_: Some("ExternalName".to_owned()),
            external_name: Some("registry.example.com".to_owned()),
            ..ServiceSpec::default()
        },
    )
    .await;
    create_service(
        &client,
        ns,
        "sample-other-port",
        8080,
        ServiceSpec::default(),
    )
    .await;

    let resolver = AddressResolver::cluster_ip(client);
    let cases = [
        ("sample-missing", Unroutable::NotFound),
        ("sample-headless", Unroutable::Headless),
        ("sample-alias", Unroutable::ExternalName),
        ("sample-other-port", Unroutable::PortNotServed(50051)),
    ];
    for (name, want) in cases {
        let address = format!("{name}.{ns}.svc:50051");
        let error = resolver
            .resolve(&address)
            .await
            .expect_err(&format!("{address} has no routable cluster IP"));
        match &error {
            Error::ServiceUnroutable {
                namespace,
                name: service,
                reason,
            } => {
                assert_eq!((namespace.as_str(), service.as_str()), (ns, name));
                assert_eq!(*reason, want, "{address}");
            }
            other => panic!("{address}: unexpected error {other:?}"),
        }
        let message = error.to_string();
        assert!(
            message.contains(&format!("service {ns}/{name}")),
            "{message}"
        );
        assert_eq!(error.category(), "service_unroutable");
    }
}
