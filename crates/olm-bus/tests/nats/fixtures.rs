//! Events as the services would publish them, with fixture names that differ
//! from real ones so that a swapped field shows.

use std::time::{Duration, SystemTime};

use olm_bus::{
    Bus, BusArgs, ConnectionState,
    events::{
        self, BundleUnpackRequest, BundleUnpacked, CatalogUpdated, CsvPhaseChanged,
        InstallPlanPhaseChanged, ObjectRef, SubscriptionResolved, bundle_unpacked,
    },
};
use olm_testkit::nats::NatsServer;

/// Deadline of any single wait in these tests.
pub(crate) const DEADLINE: Duration = Duration::from_secs(20);

/// Namespace of every fixture object.
pub(crate) const NAMESPACE: &str = "fixture-ns";

const OPERATORS_V1ALPHA1: &str = "operators.coreos.com/v1alpha1";

pub(crate) fn start_server() -> NatsServer {
    NatsServer::start().expect("starting nats-server")
}

/// A bus of service `service` connected to `server`, with its streams
/// declared.
pub(crate) async fn connected_bus(server: &NatsServer, service: &str) -> Bus {
    let bus = Bus::connect(&BusArgs::with_url(server.url()), service)
        .await
        .expect("creating the bus");
    bus.wait_connected(DEADLINE).await.expect("connecting");
    bus.wait_streams_declared(DEADLINE)
        .await
        .expect("declaring streams");
    bus
}

/// Waits until the bus reports `state`, polling because the state is only
/// observable, not awaitable, from outside the bus.
pub(crate) async fn wait_for_state(bus: &Bus, state: ConnectionState) {
    tokio::time::timeout(DEADLINE, async {
        while bus.connection_state() != state {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the bus did not become {state:?} within {DEADLINE:?}"));
}

fn object(kind: &str, name: &str, uid: &str, resource_version: &str) -> ObjectRef {
    ObjectRef::new(OPERATORS_V1ALPHA1, kind, NAMESPACE, name).at(uid, resource_version)
}

pub(crate) fn fixture_catalog() -> ObjectRef {
    object("CatalogSource", "fixture-catalog", "uid-catalog", "101")
}

pub(crate) fn fixture_install_plan(n: u32) -> ObjectRef {
    object(
        "InstallPlan",
        &format!("install-fixture-{n}"),
        &format!("uid-plan-{n}"),
        "202",
    )
}

pub(crate) fn fixture_csv(namespace: &str, resource_version: &str) -> ObjectRef {
    ObjectRef::new(
        OPERATORS_V1ALPHA1,
        "ClusterServiceVersion",
        namespace,
        "fixture-operator.v1.2.3",
    )
    .at("uid-csv", resource_version)
}

pub(crate) fn catalog_updated() -> CatalogUpdated {
    CatalogUpdated {
        catalog: Some(fixture_catalog()),
        content_digest: "sha256:c0ffee".into(),
        previous_content_digest: "sha256:decaf".into(),
        reason: "ImageDigestChanged".into(),
        occurred_at: Some(events::now()),
    }
}

/// Request number `n`; distinct `n` are distinct requests for JetStream's
/// deduplication.
pub(crate) fn bundle_unpack_request(n: u32) -> BundleUnpackRequest {
    BundleUnpackRequest {
        bundle_path: format!("registry.fixture/bundles/fixture-operator@sha256:{n:064x}"),
        bundle_name: "fixture-operator.v1.2.3".into(),
        catalog: Some(fixture_catalog()),
        install_plan: Some(fixture_install_plan(n)),
        deadline: Some((SystemTime::now() + Duration::from_secs(600)).into()),
        occurred_at: Some(events::now()),
    }
}

pub(crate) fn bundle_unpacked() -> BundleUnpacked {
    BundleUnpacked {
        bundle_path: "registry.fixture/bundles/fixture-operator@sha256:ab".into(),
        image_digest: "sha256:ab".into(),
        content: Some(
            ObjectRef::new("v1", "ConfigMap", NAMESPACE, "fixture-bundle-content")
                .at("uid-cm", "303"),
        ),
        content_digest: "sha256:fe".into(),
        install_plan: Some(fixture_install_plan(1)),
        catalog: Some(fixture_catalog()),
        outcome: bundle_unpacked::Outcome::Succeeded.into(),
        failure_message: String::new(),
        occurred_at: Some(events::now()),
    }
}

pub(crate) fn csv_phase_changed(namespace: &str, resource_version: &str) -> CsvPhaseChanged {
    CsvPhaseChanged {
        csv: Some(fixture_csv(namespace, resource_version)),
        old_phase: "Installing".into(),
        new_phase: "Succeeded".into(),
        reason: "InstallSucceeded".into(),
        message: "install strategy completed with no errors".into(),
        occurred_at: Some(events::now()),
    }
}

pub(crate) fn install_plan_phase_changed() -> InstallPlanPhaseChanged {
    InstallPlanPhaseChanged {
        install_plan: Some(fixture_install_plan(7)),
        old_phase: "RequiresApproval".into(),
        new_phase: "Installing".into(),
        reason: "Approved".into(),
        message: "approved by fixture-admin".into(),
        csv_names: vec!["fixture-operator.v1.2.3".into()],
        occurred_at: Some(events::now()),
    }
}

pub(crate) fn subscription_resolved() -> SubscriptionResolved {
    SubscriptionResolved {
        subscription: Some(object("Subscription", "fixture-sub", "uid-sub", "404")),
        install_plan: Some(fixture_install_plan(7)),
        catalog: Some(fixture_catalog()),
        package: "fixture-package".into(),
        channel: "fixture-channel".into(),
        resolved_csv: "fixture-operator.v1.2.3".into(),
        installed_csv: "fixture-operator.v1.2.2".into(),
        occurred_at: Some(events::now()),
    }
}
