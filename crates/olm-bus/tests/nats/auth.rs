//! The authenticated bus: each service connects with its own NKey and may
//! publish only its own subjects; nobody connects without a key.

use std::time::Duration;

use olm_bus::{
    Bus, BusArgs, ConnectionState, Published,
    auth::{self, ServiceKey},
};
use olm_testkit::nats::NatsServer;

use crate::fixtures::{self, DEADLINE};

/// A server that knows every service's key, and the keys.
fn secured_server() -> (NatsServer, Vec<ServiceKey>) {
    let keys = auth::generate_keys().expect("generating keys");
    let pairs: Vec<(&str, &str)> = keys
        .iter()
        .map(|k| (k.service, k.public.as_str()))
        .collect();
    let config = auth::server_authorization(&pairs).expect("rendering the authorization");
    let server = NatsServer::start_with_config(&config).expect("starting nats-server");
    (server, keys)
}

/// Connects as `service` with its seed written to a file, as a pod would
/// mount it.
async fn bus_as(
    server: &NatsServer,
    keys: &[ServiceKey],
    service: &str,
) -> (Bus, tempfile::TempDir) {
    let key = keys.iter().find(|k| k.service == service).expect("a key");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("nkey.seed");
    std::fs::write(&path, format!("{}\n", key.seed)).expect("writing the seed");
    let args = BusArgs {
        nats_nkey_file: Some(path),
        ..BusArgs::with_url(server.url())
    };
    let bus = Bus::connect(&args, service)
        .await
        .expect("creating the bus");
    (bus, dir)
}

#[tokio::test]
async fn each_service_connects_with_its_own_key_and_publishes_its_own_subjects() {
    let (server, keys) = secured_server();
    let (catalog, _seed) = bus_as(&server, &keys, "catalog-operator").await;
    catalog
        .wait_connected(DEADLINE)
        .await
        .expect("catalog-operator connects");
    catalog
        .wait_streams_declared(DEADLINE)
        .await
        .expect("catalog-operator declares the streams");
    let published = catalog
        .publish(&fixtures::bundle_unpack_request(1))
        .await
        .expect("catalog-operator may ask for unpacks");
    assert!(
        matches!(published, Published::Stored { .. }),
        "{published:?}"
    );

    // bundle-unpacker is known too, but may not ask for unpacks itself.
    let (unpacker, _seed) = bus_as(&server, &keys, "bundle-unpacker").await;
    unpacker
        .wait_connected(DEADLINE)
        .await
        .expect("bundle-unpacker connects");
    let forged = tokio::time::timeout(
        DEADLINE,
        unpacker.publish(&fixtures::bundle_unpack_request(2)),
    )
    .await
    .expect("the publish ends");
    assert!(
        forged.is_err(),
        "bundle-unpacker published an unpack request: {forged:?}"
    );
    let log = std::fs::read_to_string(server.log()).unwrap_or_default();
    assert!(
        log.contains("Publish Violation")
            && log.contains(olm_bus::subjects::BUNDLE_UNPACK_REQUESTS),
        "the server logs the refusal: {log}"
    );
}

#[tokio::test]
async fn a_client_without_a_key_never_connects() {
    let (server, _keys) = secured_server();
    let anonymous = Bus::connect(&BusArgs::with_url(server.url()), "intruder")
        .await
        .expect("creating the bus");
    // It keeps trying in the background and never gets in.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_ne!(anonymous.connection_state(), ConnectionState::Connected);

    // A key the server does not know is refused as well.
    let stranger = auth::generate_keys().expect("generating keys");
    let (outsider, _seed) = bus_as(&server, &stranger, "catalog-operator").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_ne!(outsider.connection_state(), ConnectionState::Connected);
}
