//! Publishing and subscribing typed events.

use std::fmt::Debug;

use bytes::Bytes;
use olm_bus::{Bus, Error, Event, Published, subjects};

use crate::fixtures::{self, DEADLINE};

/// Publishes `event` and checks that a subscriber to every event of its
/// type receives it unchanged, on its subject, with its dedup id.
async fn assert_round_trip<E: Event + PartialEq + Debug>(bus: &Bus, event: E) {
    let mut subscription = bus.subscribe_all::<E>().await.expect("subscribing");
    let published = bus.publish(&event).await.expect("publishing");
    assert!(
        matches!(published, Published::Sent | Published::Stored { .. }),
        "{} was {published:?}",
        E::FULL_NAME
    );

    let received = tokio::time::timeout(DEADLINE, subscription.recv())
        .await
        .unwrap_or_else(|_| panic!("no {} within {DEADLINE:?}", E::FULL_NAME))
        .expect("subscription ended")
        .expect("decoding");
    assert_eq!(received.event, event);
    assert_eq!(received.subject, event.subject().expect("subject").as_str());
    assert_eq!(received.message_id, event.message_id());
    assert!(received.message_id.is_some());
}

#[tokio::test]
async fn every_event_type_round_trips() {
    let server = fixtures::start_server();
    let bus = fixtures::connected_bus(&server, "round-trip").await;

    assert_round_trip(&bus, fixtures::catalog_updated()).await;
    assert_round_trip(&bus, fixtures::bundle_unpack_request(1)).await;
    assert_round_trip(&bus, fixtures::bundle_unpacked()).await;
    assert_round_trip(&bus, fixtures::csv_phase_changed(fixtures::NAMESPACE, "1")).await;
    assert_round_trip(&bus, fixtures::install_plan_phase_changed()).await;
    assert_round_trip(&bus, fixtures::subscription_resolved()).await;

    let stats = bus.stats();
    assert_eq!(stats.published, 6);
    assert_eq!(stats.received, 6);
    assert_eq!(
        stats.dropped + stats.publish_errors + stats.decode_errors,
        0
    );
}

#[tokio::test]
async fn namespace_filters_only_match_their_namespace() {
    let server = fixtures::start_server();
    let bus = fixtures::connected_bus(&server, "filters").await;
    let filter = subjects::csv_phase_filter(Some("fixture-team-a")).expect("filter");
    let mut team_a = bus
        .subscribe::<olm_bus::events::CsvPhaseChanged>(filter)
        .await
        .expect("subscribing");

    // Messages of one connection arrive in order, so receiving team A's
    // event first proves team B's was not delivered.
    let other = fixtures::csv_phase_changed("fixture-team-b", "1");
    let own = fixtures::csv_phase_changed("fixture-team-a", "2");
    bus.publish(&other).await.expect("publishing");
    bus.publish(&own).await.expect("publishing");

    let received = tokio::time::timeout(DEADLINE, team_a.recv())
        .await
        .expect("an event within the deadline")
        .expect("subscription open")
        .expect("decoding");
    assert_eq!(received.event, own);
}

#[tokio::test]
async fn malformed_payloads_are_reported_and_the_subscription_goes_on() {
    let server = fixtures::start_server();
    let bus = fixtures::connected_bus(&server, "malformed").await;
    let mut subscription = bus
        .subscribe_all::<olm_bus::events::CsvPhaseChanged>()
        .await
        .expect("subscribing");
    // Publish through the bus's own connection so that order is kept.
    let client = bus.jetstream().expect("enabled").client();
    let subject = subjects::csv_phase("fixture-ns", "hostile").expect("subject");
    let hostile: [&[u8]; 3] = [
        &[0x0f],
        &[0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f],
        &[0x12, 0x02, 0xff, 0xfe],
    ];
    for payload in hostile {
        client
            .publish(
                String::from(subject.clone()),
                Bytes::copy_from_slice(payload),
            )
            .await
            .expect("publishing raw bytes");
    }
    let good = fixtures::csv_phase_changed(fixtures::NAMESPACE, "9");
    bus.publish(&good).await.expect("publishing");

    for _ in hostile {
        let item = tokio::time::timeout(DEADLINE, subscription.recv())
            .await
            .expect("an item within the deadline")
            .expect("subscription open");
        match item {
            Err(Error::Decode { .. }) => {}
            other => panic!("expected a decode error, got {other:?}"),
        }
    }
    let received = tokio::time::timeout(DEADLINE, subscription.recv())
        .await
        .expect("an event within the deadline")
        .expect("subscription open")
        .expect("the valid event decodes");
    assert_eq!(received.event, good);
    assert_eq!(bus.stats().decode_errors, 3);
}

#[tokio::test]
async fn queue_groups_share_events() {
    use futures::FutureExt as _;
    use olm_bus::events::CatalogUpdated;

    let server = fixtures::start_server();
    let bus = fixtures::connected_bus(&server, "queue-group").await;
    let own_namespace =
        subjects::catalog_updated_filter(Some(fixtures::NAMESPACE)).expect("filter");
    let mut first = bus
        .queue_subscribe::<CatalogUpdated>(own_namespace.clone(), "fixture-replicas")
        .await
        .expect("subscribing");
    let mut second = bus
        .queue_subscribe::<CatalogUpdated>(own_namespace, "fixture-replicas")
        .await
        .expect("subscribing");
    let mut everyone = bus
        .subscribe_all::<CatalogUpdated>()
        .await
        .expect("subscribing");

    const EVENTS: usize = 20;
    for n in 0..EVENTS {
        let mut event = fixtures::catalog_updated();
        event.content_digest = format!("sha256:{n:02}");
        bus.publish(&event).await.expect("publishing");
    }
    // A last event outside the group's namespace: once the plain subscriber
    // has it, every delivery of the earlier events has reached the client.
    let mut sentinel = fixtures::catalog_updated();
    if let Some(catalog) = sentinel.catalog.as_mut() {
        catalog.namespace = "fixture-sentinel-ns".into();
    }
    bus.publish(&sentinel).await.expect("publishing");
    for _ in 0..=EVENTS {
        tokio::time::timeout(DEADLINE, everyone.recv())
            .await
            .expect("an event within the deadline");
    }

    let mut per_member = [0; 2];
    for (count, subscription) in per_member.iter_mut().zip([&mut first, &mut second]) {
        while let Some(item) = subscription.recv().now_or_never() {
            item.expect("subscription open").expect("decoding");
            *count += 1;
        }
    }
    assert_eq!(
        per_member.iter().sum::<usize>(),
        EVENTS,
        "each event goes to exactly one group member: {per_member:?}"
    );
}
