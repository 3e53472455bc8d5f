//! Losing NATS only slows convergence: a service starts without it, drops
//! events (bounded, counted) while it is away, and recovers by itself.

use std::time::{Duration, Instant};

use olm_bus::{
    Bus, BusArgs, ConnectionState, Published, WorkQueueOptions,
    events::{BundleUnpackRequest, CsvPhaseChanged},
};
use olm_testkit::nats::NatsServer;

use crate::fixtures::{self, DEADLINE};

#[tokio::test]
async fn nats_down_at_start_up_then_back() {
    let mut server = NatsServer::reserve().expect("reserving a port");
    assert!(!server.is_running());

    // Connecting does not wait for NATS.
    let started = Instant::now();
    let bus = tokio::time::timeout(
        Duration::from_secs(2),
        Bus::connect(&BusArgs::with_url(server.url()), "olm-operator"),
    )
    .await
    .expect("connect returns at once")
    .expect("valid settings");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(bus.connection_state(), ConnectionState::Pending);

    // Subscribing and consuming work while NATS is away is fine too.
    let mut changes = bus
        .subscribe_all::<CsvPhaseChanged>()
        .await
        .expect("subscribing");
    let mut queue =
        bus.work_queue::<BundleUnpackRequest>(WorkQueueOptions::new("fixture-unpacker"));

    // Publishing drops, fast and without growing memory.
    const WHILE_DOWN: u64 = 1_000;
    let event = fixtures::csv_phase_changed(fixtures::NAMESPACE, "1");
    tokio::time::timeout(DEADLINE, async {
        for _ in 0..WHILE_DOWN {
            assert_eq!(
                bus.publish(&event).await.expect("publishing"),
                Published::Dropped
            );
        }
        assert_eq!(
            bus.publish(&fixtures::bundle_unpack_request(1))
                .await
                .expect("publishing"),
            Published::Dropped
        );
    })
    .await
    .expect("publishing while NATS is down never blocks");
    assert_eq!(bus.stats().dropped, WHILE_DOWN + 1);
    assert_eq!(bus.stats().published, 0);

    // NATS comes up: the bus connects, declares its streams, and the
    // subscription made earlier delivers what is published now.
    server.restart().expect("starting nats-server");
    bus.wait_connected(DEADLINE).await.expect("connecting");
    bus.wait_streams_declared(DEADLINE)
        .await
        .expect("declaring streams");

    let after = fixtures::csv_phase_changed(fixtures::NAMESPACE, "2");
    assert_eq!(
        bus.publish(&after).await.expect("publishing"),
        Published::Sent
    );
    let received = tokio::time::timeout(DEADLINE, changes.recv())
        .await
        .expect("an event within the deadline")
        .expect("subscription open")
        .expect("decoding");
    assert_eq!(
        received.event, after,
        "nothing published while down was buffered"
    );

    let request = fixtures::bundle_unpack_request(2);
    assert!(matches!(
        bus.publish(&request).await.expect("publishing"),
        Published::Stored { .. }
    ));
    let item = tokio::time::timeout(DEADLINE, queue.recv())
        .await
        .expect("a request within the deadline")
        .expect("work queue open")
        .expect("decoding");
    assert_eq!(item.event(), &request);
    item.ack().await.expect("acking");
}

#[tokio::test]
async fn server_restart_mid_stream_reconnects() {
    let mut server = fixtures::start_server();
    let bus = fixtures::connected_bus(&server, "catalog-operator").await;
    let mut changes = bus
        .subscribe_all::<CsvPhaseChanged>()
        .await
        .expect("subscribing");
    let mut queue =
        bus.work_queue::<BundleUnpackRequest>(WorkQueueOptions::new("fixture-unpacker"));

    let before = fixtures::csv_phase_changed(fixtures::NAMESPACE, "1");
    bus.publish(&before).await.expect("publishing");
    let received = tokio::time::timeout(DEADLINE, changes.recv())
        .await
        .expect("an event within the deadline")
        .expect("subscription open")
        .expect("decoding");
    assert_eq!(received.event, before);
    bus.publish(&fixtures::bundle_unpack_request(1))
        .await
        .expect("publishing");
    let item = tokio::time::timeout(DEADLINE, queue.recv())
        .await
        .expect("a request within the deadline")
        .expect("work queue open")
        .expect("decoding");
    item.ack().await.expect("acking");

    server.stop();
    fixtures::wait_for_state(&bus, ConnectionState::Disconnected).await;
    assert_eq!(
        bus.publish(&fixtures::csv_phase_changed(fixtures::NAMESPACE, "2"))
            .await
            .expect("publishing"),
        Published::Dropped
    );

    server.restart().expect("restarting nats-server");
    bus.wait_connected(DEADLINE).await.expect("reconnecting");

    let after = fixtures::csv_phase_changed(fixtures::NAMESPACE, "3");
    bus.publish(&after).await.expect("publishing");
    let received = tokio::time::timeout(DEADLINE, changes.recv())
        .await
        .expect("an event within the deadline")
        .expect("subscription open")
        .expect("decoding");
    assert_eq!(received.event, after);

    // The work queue survived in the server's store and the consumer pulls
    // again.
    let request = fixtures::bundle_unpack_request(3);
    assert!(matches!(
        bus.publish(&request).await.expect("publishing"),
        Published::Stored { .. }
    ));
    let item = tokio::time::timeout(DEADLINE, queue.recv())
        .await
        .expect("a request within the deadline after the restart")
        .expect("work queue open")
        .expect("decoding");
    assert_eq!(item.event(), &request);
    item.ack().await.expect("acking");
}
