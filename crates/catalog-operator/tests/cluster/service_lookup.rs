//! `--service-lookup cluster-ip`: registries named by a Service's DNS name
//! are dialled at its ClusterIP, while status keeps the DNS name.
//!
//! This control plane has no kube-proxy, so nothing answers at a ClusterIP
//! and no probe through one can become READY here. What these tests show
//! instead: at the connection seam, the address dialled for a Service is its
//! ClusterIP (and a missing Service is named in the probe's error); through
//! the running controllers, status still reports the DNS name, and
//! addresses that name no Service are dialled as given.

use std::time::Duration;

use kube::{Api, api::PostParams};
use olm_api::catalog_source::{CatalogSource, ConnectivityState};
use olm_runtime::service_address::{AddressResolver, ServiceLookup};

use crate::{
    RunningOperator,
    catalogs::{catalog, serve_fixture, status_of},
    eventually, init_logs, olm_crds_installed,
};

const WAIT: Duration = Duration::from_secs(30);

/// How long a probe may wait on an address nothing answers at.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

#[tokio::test]
async fn a_registry_service_is_dialled_at_its_cluster_ip() {
    init_logs();
    let plane = olm_testkit::control_plane();
    let ns = plane.namespace("lookup-connections").await;
    let client = plane.client().await;
    let cluster_ip = plane
        .create_service(ns.name(), "sample-registry", 50051)
        .await
        .unwrap();
    let address = format!("sample-registry.{}.svc:50051", ns.name());

    let by_cluster_ip =
        catalog_operator::controller::Connections::new(AddressResolver::cluster_ip(client.clone()));
    let probe = by_cluster_ip
        .probe(ns.name(), "sample-catalog", &address, PROBE_TIMEOUT)
        .await;
    assert_eq!(
        probe.dialled.as_deref(),
        Some(format!("{cluster_ip}:50051").as_str()),
        "{probe:?}"
    );
    // No kube-proxy here: the ClusterIP does not answer.
    assert_eq!(probe.state, ConnectivityState::TRANSIENT_FAILURE);
    let error = probe.error.unwrap_or_default();
    assert!(error.contains(&cluster_ip), "{error}");

    let missing = by_cluster_ip
        .probe(
            ns.name(),
            "sample-catalog",
            &format!("sample-missing.{}.svc:50051", ns.name()),
            PROBE_TIMEOUT,
        )
        .await;
    assert_eq!(missing.state, ConnectivityState::TRANSIENT_FAILURE);
    assert_eq!(missing.dialled, None);
    let error = missing.error.unwrap_or_default();
    assert!(
        error.contains(&format!("service {}/sample-missing", ns.name())),
        "{error}"
    );

    // The default dials the DNS name itself.
    let by_dns = catalog_operator::controller::Connections::new(AddressResolver::new(
        ServiceLookup::Dns,
        client,
    ));
    let probe = by_dns
        .probe(ns.name(), "sample-catalog", &address, PROBE_TIMEOUT)
        .await;
    assert_eq!(probe.dialled.as_deref(), Some(address.as_str()));
}

#[tokio::test]
async fn with_cluster_ip_lookup_status_keeps_the_dns_name() {
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let ns = plane.namespace("lookup-status").await;
    let client = plane.client().await;
    let (server, _dir) = serve_fixture().await;
    let operator = RunningOperator::start_with(ns.name(), |config| {
        config.service_lookup = ServiceLookup::ClusterIp;
    })
    .await;
    let api: Api<CatalogSource> = Api::namespaced(client.clone(), ns.name());
    let address = server.addr().to_string();
    api.create(
        &PostParams::default(),
        &catalog(
            "sample-address",
            serde_json::json!({"sourceType": "grpc", "address": address}),
        ),
    )
    .await
    .unwrap();
    api.create(
        &PostParams::default(),
        &catalog(
            "sample-image",
            serde_json::json!({"sourceType": "grpc", "image": "quay.io/example/catalog:v1"}),
        ),
    )
    .await
    .unwrap();

    // An address naming no Service is dialled as given, and connects.
    eventually("the address catalog READY", WAIT, || async {
        let status = status_of(&api, "sample-address").await?;
        match status
            .pointer("/connectionState/lastObservedState")
            .and_then(|s| s.as_str())
        {
            Some("READY") if status["connectionState"]["address"] == address.as_str() => Ok(()),
            _ => Err(status.to_string()),
        }
    })
    .await;

    // The registry Service is dialled at its ClusterIP, which nothing
    // routes here; status names the Service by its DNS name all the same.
    let status = eventually("the image catalog probed", WAIT, || async {
        let status = status_of(&api, "sample-image").await?;
        if status
            .pointer("/connectionState/lastObservedState")
            .is_some()
        {
            Ok(status)
        } else {
            Err(status.to_string())
        }
    })
    .await;
    assert_eq!(
        status["connectionState"]["address"],
        format!("sample-image.{}.svc:50051", ns.name()).as_str(),
        "{status}"
    );
    assert_ne!(
        status["connectionState"]["lastObservedState"], "READY",
        "{status}"
    );
    operator.stop().await;
}
