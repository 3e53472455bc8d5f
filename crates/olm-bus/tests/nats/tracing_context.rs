//! The W3C trace context travels from the publisher's span to the span the
//! subscriber handles the event in.

use futures::StreamExt as _;
use olm_bus::{Event as _, events::CsvPhaseChanged};
use opentelemetry::trace::{TraceContextExt as _, TracerProvider as _};
use opentelemetry_sdk::{propagation::TraceContextPropagator, trace::SdkTracerProvider};
use tracing::Instrument as _;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::layer::SubscriberExt as _;

use crate::fixtures::{self, DEADLINE};

#[tokio::test]
async fn trace_context_follows_the_event() {
    // An SDK tracer without exporter: spans get real, sampled ids.
    let provider = SdkTracerProvider::builder().build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("olm-bus-test")));
    // The test runs on a current-thread runtime, so a thread-local default
    // covers the bus's tasks too.
    let _default = tracing::subscriber::set_default(subscriber);
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());

    let server = fixtures::start_server();
    let bus = fixtures::connected_bus(&server, "tracing").await;
    let mut subscription = bus
        .subscribe_all::<CsvPhaseChanged>()
        .await
        .expect("subscribing");
    // A raw subscriber on the same connection, to look at the headers.
    let mut raw = bus
        .jetstream()
        .expect("enabled")
        .client()
        .subscribe(CsvPhaseChanged::all_subjects().as_str().to_owned())
        .await
        .expect("subscribing");

    let reconcile = tracing::info_span!("reconcile", csv = "fixture-operator.v1.2.3");
    let trace_id = reconcile.context().span().span_context().trace_id();
    assert_ne!(trace_id, opentelemetry::trace::TraceId::INVALID);
    let event = fixtures::csv_phase_changed(fixtures::NAMESPACE, "5");
    bus.publish(&event)
        .instrument(reconcile.clone())
        .await
        .expect("publishing");

    let message = tokio::time::timeout(DEADLINE, raw.next())
        .await
        .expect("a raw message within the deadline")
        .expect("subscription open");
    let headers = message.headers.expect("headers");
    let traceparent = headers.get("traceparent").expect("a traceparent header");
    assert!(
        traceparent.as_str().contains(&trace_id.to_string()),
        "{traceparent} does not carry trace {trace_id}"
    );
    assert_eq!(
        headers.get(olm_bus::HEADER_EVENT_TYPE).map(|v| v.as_str()),
        Some("olm.bus.v1.CsvPhaseChanged")
    );

    let received = tokio::time::timeout(DEADLINE, subscription.recv())
        .await
        .expect("an event within the deadline")
        .expect("subscription open")
        .expect("decoding");
    let remote = received.parent_context().span().span_context().clone();
    assert!(remote.is_remote());
    assert_eq!(remote.trace_id(), trace_id);

    // The handler's span is a child in the same trace.
    let handler = received.span().context().span().span_context().clone();
    assert_eq!(handler.trace_id(), trace_id);
    assert_ne!(handler.span_id(), remote.span_id());

    // And a span opened inside the handler stays in it.
    let inner_trace = async {
        tracing::Span::current()
            .context()
            .span()
            .span_context()
            .trace_id()
    }
    .instrument(received.span().clone())
    .await;
    assert_eq!(inner_trace, trace_id);
}
