//! `--service-lookup cluster-ip` at the seam where a catalog is fetched:
//! a registry named by its Service's DNS name is dialled at the Service's
//! ClusterIP, and a missing Service is named in the refresh error. This
//! control plane has no kube-proxy, so nothing answers at the ClusterIP;
//! the error says what was dialled.

use std::time::Duration;

use olm_registry::ClientOptions;
use olm_runtime::service_address::AddressResolver;
use packageserver::{
    catalogs::{self, RefreshError, Target},
    manifest::CatalogMeta,
};

#[tokio::test]
async fn a_registry_service_is_fetched_from_its_cluster_ip() {
    let plane = olm_testkit::control_plane();
    let ns = plane.namespace("ps-lookup").await;
    let client = plane.client().await;
    let cluster_ip = plane
        .create_service(ns.name(), "sample-registry", 50051)
        .await
        .unwrap();
    let resolver = AddressResolver::cluster_ip(client);
    let options = ClientOptions {
        connect_timeout: Duration::from_secs(1),
        request_timeout: Duration::from_secs(1),
        ..ClientOptions::default()
    };
    let target = |address: String| Target {
        meta: CatalogMeta::default(),
        address: Some(address),
        content_hint: String::new(),
    };

    let address = format!("sample-registry.{}.svc:50051", ns.name());
    match catalogs::fetch(&target(address.clone()), options, &resolver).await {
        Err(RefreshError::Registry {
            address: called, ..
        }) => {
            assert_eq!(called, format!("{address} ({cluster_ip}:50051)"));
        }
        other => panic!("unexpected {other:?}"),
    }

    let missing = format!("sample-missing.{}.svc:50051", ns.name());
    let error = catalogs::fetch(&target(missing), options, &resolver)
        .await
        .unwrap_err();
    assert!(
        matches!(error, RefreshError::ServiceAddress { .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains(&format!("service {}/sample-missing", ns.name())),
        "{message}"
    );
}
