//! JetStream streams are declared at connect, idempotently, and updated
//! when their settings change.

use std::time::Duration;

use olm_bus::streams::{self, AUDIT_STREAM, Declared, WORK_QUEUE_STREAM};

use crate::fixtures;

#[tokio::test]
async fn streams_are_declared_at_connect_with_bounded_retention() {
    let server = fixtures::start_server();
    let bus = fixtures::connected_bus(&server, "streams").await;
    let jetstream = bus.jetstream().expect("enabled");

    let mut audit = jetstream
        .get_stream(AUDIT_STREAM)
        .await
        .expect("audit stream");
    let config = &audit.info().await.expect("info").config;
    assert_eq!(config.max_age, streams::AUDIT_MAX_AGE);
    assert_eq!(config.max_bytes, streams::AUDIT_MAX_BYTES);
    assert_eq!(
        config.retention,
        async_nats::jetstream::stream::RetentionPolicy::Limits
    );

    let mut queue = jetstream
        .get_stream(WORK_QUEUE_STREAM)
        .await
        .expect("work queue stream");
    let config = &queue.info().await.expect("info").config;
    assert_eq!(
        config.retention,
        async_nats::jetstream::stream::RetentionPolicy::WorkQueue
    );
    assert_eq!(config.max_messages, streams::WORK_QUEUE_MAX_MESSAGES);
    assert_eq!(config.max_bytes, streams::WORK_QUEUE_MAX_BYTES);
}

#[tokio::test]
async fn declaring_again_is_a_no_op_and_changed_settings_update() {
    let server = fixtures::start_server();
    let bus = fixtures::connected_bus(&server, "streams-idempotent").await;

    // Same settings: nothing to do, for this service and for another one.
    let again = bus.declare_streams().await.expect("declaring");
    assert!(
        again
            .iter()
            .all(|(_, declared)| *declared == Declared::Unchanged),
        "{again:?}"
    );
    let other = fixtures::connected_bus(&server, "streams-idempotent-2").await;
    assert!(
        other
            .declare_streams()
            .await
            .expect("declaring")
            .iter()
            .all(|(_, declared)| *declared == Declared::Unchanged)
    );

    // Someone (an older release, an admin) changed the audit retention.
    let jetstream = bus.jetstream().expect("enabled");
    let mut drifted = streams::audit_stream_config();
    drifted.max_age = Duration::from_secs(60 * 60);
    jetstream.update_stream(&drifted).await.expect("drifting");

    let declared = bus.declare_streams().await.expect("declaring");
    assert!(
        declared.contains(&(AUDIT_STREAM.to_owned(), Declared::Updated)),
        "{declared:?}"
    );
    assert!(
        declared.contains(&(WORK_QUEUE_STREAM.to_owned(), Declared::Unchanged)),
        "{declared:?}"
    );
    let mut audit = jetstream
        .get_stream(AUDIT_STREAM)
        .await
        .expect("audit stream");
    assert_eq!(
        audit.info().await.expect("info").config.max_age,
        streams::AUDIT_MAX_AGE
    );

    let settled = bus.declare_streams().await.expect("declaring");
    assert!(
        settled
            .iter()
            .all(|(_, declared)| *declared == Declared::Unchanged),
        "{settled:?}"
    );
}

#[tokio::test]
async fn a_deleted_stream_is_created_again() {
    let server = fixtures::start_server();
    let bus = fixtures::connected_bus(&server, "streams-recreate").await;
    let jetstream = bus.jetstream().expect("enabled");
    jetstream
        .delete_stream(AUDIT_STREAM)
        .await
        .expect("deleting");
    assert_eq!(
        streams::declare_stream(jetstream, &streams::audit_stream_config())
            .await
            .expect("declaring"),
        Declared::Created
    );
}

#[tokio::test]
async fn lifecycle_events_are_kept_in_the_audit_stream() {
    let server = fixtures::start_server();
    let bus = fixtures::connected_bus(&server, "audit").await;
    let event = fixtures::csv_phase_changed(fixtures::NAMESPACE, "77");
    bus.publish(&event).await.expect("publishing");
    // The same change reported twice (two replicas) is stored once.
    bus.publish(&event).await.expect("publishing");
    bus.publish(&fixtures::install_plan_phase_changed())
        .await
        .expect("publishing");
    bus.flush(fixtures::DEADLINE).await.expect("flushing");

    let jetstream = bus.jetstream().expect("enabled");
    let mut audit = jetstream
        .get_stream(AUDIT_STREAM)
        .await
        .expect("audit stream");
    tokio::time::timeout(fixtures::DEADLINE, async {
        while audit.info().await.expect("info").state.messages < 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("events stored within the deadline");
    let first = audit.get_raw_message(1).await.expect("first event");
    let stored: olm_bus::events::CsvPhaseChanged =
        olm_bus::events::decode(&first.payload).expect("decoding");
    assert_eq!(stored, event);
    let second = audit.get_raw_message(2).await.expect("second event");
    assert!(second.subject.as_str().starts_with("olm.v1.installplan."));
    assert_eq!(audit.info().await.expect("info").state.messages, 2);
}
