//! The work queue of bundle unpack requests: shared between consumers, each
//! request handled once, unacknowledged requests delivered again.

use std::{collections::BTreeMap, time::Duration};

use futures::FutureExt as _;
use olm_bus::{
    Bus, Error, Published, WorkItem, WorkQueue, WorkQueueOptions, events::BundleUnpackRequest,
    streams::WORK_QUEUE_STREAM,
};

use crate::fixtures::{self, DEADLINE};

async fn next_request(queue: &mut WorkQueue<BundleUnpackRequest>) -> WorkItem<BundleUnpackRequest> {
    tokio::time::timeout(DEADLINE, queue.recv())
        .await
        .expect("a request within the deadline")
        .expect("work queue open")
        .expect("decoding")
}

fn plan_name(item: &WorkItem<BundleUnpackRequest>) -> String {
    item.event()
        .install_plan
        .as_ref()
        .map(|plan| plan.name.clone())
        .unwrap_or_default()
}

/// Waits until `n` pull requests wait on the consumer, so that work
/// published afterwards is shared between its consumers.
async fn wait_for_waiting_pulls(bus: &Bus, durable_name: &str, n: usize) {
    let jetstream = bus.jetstream().expect("enabled");
    tokio::time::timeout(DEADLINE, async {
        loop {
            if let Ok(stream) = jetstream.get_stream(WORK_QUEUE_STREAM).await
                && let Ok(mut consumer) = stream
                    .get_consumer::<async_nats::jetstream::consumer::pull::Config>(durable_name)
                    .await
                && let Ok(info) = consumer.info().await
                && info.num_waiting >= n
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{n} consumers did not start pulling within {DEADLINE:?}"));
}

/// Waits until every request was acknowledged and left the queue.
async fn wait_for_empty_queue(bus: &Bus) {
    let jetstream = bus.jetstream().expect("enabled");
    let mut stream = jetstream
        .get_stream(WORK_QUEUE_STREAM)
        .await
        .expect("work queue stream");
    tokio::time::timeout(DEADLINE, async {
        while stream.info().await.expect("info").state.messages > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the queue empties within the deadline");
}

#[tokio::test]
async fn consumers_share_the_queue_and_each_request_is_delivered_once() {
    let server = fixtures::start_server();
    let requester = fixtures::connected_bus(&server, "catalog-operator").await;
    let unpacker_a = fixtures::connected_bus(&server, "bundle-unpacker-a").await;
    let unpacker_b = fixtures::connected_bus(&server, "bundle-unpacker-b").await;
    let options = WorkQueueOptions {
        batch: 2,
        ..WorkQueueOptions::new("fixture-unpacker")
    };
    let mut queue_a = unpacker_a.work_queue::<BundleUnpackRequest>(options.clone());
    let mut queue_b = unpacker_b.work_queue::<BundleUnpackRequest>(options);
    wait_for_waiting_pulls(&requester, "fixture-unpacker", 2).await;

    const REQUESTS: u32 = 24;
    for n in 0..REQUESTS {
        let published = requester
            .publish(&fixtures::bundle_unpack_request(n))
            .await
            .expect("publishing");
        assert!(
            matches!(
                published,
                Published::Stored {
                    duplicate: false,
                    ..
                }
            ),
            "{published:?}"
        );
    }
    // A resync sending the same request again is deduplicated by JetStream.
    let again = requester
        .publish(&fixtures::bundle_unpack_request(0))
        .await
        .expect("publishing");
    assert!(
        matches!(
            again,
            Published::Stored {
                duplicate: true,
                ..
            }
        ),
        "{again:?}"
    );

    let mut deliveries: BTreeMap<String, Vec<char>> = BTreeMap::new();
    let mut total = 0;
    while total < REQUESTS {
        let (item, consumer) = tokio::select! {
            item = next_request(&mut queue_a) => (item, 'a'),
            item = next_request(&mut queue_b) => (item, 'b'),
        };
        assert_eq!(item.delivered(), 1);
        item.ack().await.expect("acking");
        deliveries
            .entry(plan_name(&item))
            .or_default()
            .push(consumer);
        total += 1;
    }
    wait_for_empty_queue(&requester).await;

    assert_eq!(
        deliveries.len(),
        REQUESTS as usize,
        "every request arrived once"
    );
    let by_a = deliveries.values().flatten().filter(|c| **c == 'a').count();
    let by_b = deliveries.values().flatten().filter(|c| **c == 'b').count();
    assert!(
        by_a > 0 && by_b > 0,
        "both consumers got work: a={by_a} b={by_b}"
    );
    // Nothing else is pending for either consumer.
    assert!(queue_a.recv().now_or_never().is_none());
    assert!(queue_b.recv().now_or_never().is_none());
}

#[tokio::test]
async fn unacknowledged_requests_are_delivered_again() {
    let server = fixtures::start_server();
    let bus = fixtures::connected_bus(&server, "bundle-unpacker").await;
    let options = WorkQueueOptions {
        ack_wait: Duration::from_secs(1),
        ..WorkQueueOptions::new("fixture-unpacker")
    };
    let mut queue = bus.work_queue::<BundleUnpackRequest>(options);
    let request = fixtures::bundle_unpack_request(42);
    bus.publish(&request).await.expect("publishing");

    // Delivery 1: the unpacker dies before acknowledging.
    let first = next_request(&mut queue).await;
    assert_eq!(first.event(), &request);
    assert_eq!(first.delivered(), 1);
    drop(first);

    // Delivery 2, after the ack wait: the registry is unreachable, so the
    // unpacker asks for a retry shortly.
    let second = next_request(&mut queue).await;
    assert_eq!(second.event(), &request);
    assert_eq!(second.delivered(), 2);
    second
        .nak(Some(Duration::from_millis(200)))
        .await
        .expect("naking");

    // Delivery 3: done.
    let third = next_request(&mut queue).await;
    assert_eq!(third.delivered(), 3);
    third.in_progress().await.expect("extending the ack wait");
    third.ack().await.expect("acking");
    wait_for_empty_queue(&bus).await;
}

#[tokio::test]
async fn malformed_requests_are_reported_and_terminated() {
    let server = fixtures::start_server();
    let bus = fixtures::connected_bus(&server, "bundle-unpacker").await;
    let mut queue =
        bus.work_queue::<BundleUnpackRequest>(WorkQueueOptions::new("fixture-unpacker"));
    let jetstream = bus.jetstream().expect("enabled");
    jetstream
        .publish(
            olm_bus::subjects::BUNDLE_UNPACK_REQUESTS,
            bytes::Bytes::from_static(&[0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]),
        )
        .await
        .expect("publishing")
        .await
        .expect("stored");
    let request = fixtures::bundle_unpack_request(5);
    bus.publish(&request).await.expect("publishing");

    let first = tokio::time::timeout(DEADLINE, queue.recv())
        .await
        .expect("an item within the deadline")
        .expect("work queue open");
    assert!(matches!(first, Err(Error::Decode { .. })), "{first:?}");
    let second = next_request(&mut queue).await;
    assert_eq!(second.event(), &request);
    second.ack().await.expect("acking");
    // The malformed request was terminated, not left for redelivery.
    wait_for_empty_queue(&bus).await;
    assert_eq!(bus.stats().decode_errors, 1);
}
