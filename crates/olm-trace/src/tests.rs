use opentelemetry::trace::{SpanId, TraceFlags, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use proptest::prelude::*;
use tracing_subscriber::layer::SubscriberExt as _;

use super::*;

/// A subscriber exporting to memory, and the exporter.
fn traced() -> (
    impl tracing::Subscriber + Send + Sync,
    SdkTracerProvider,
    InMemorySpanExporter,
) {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("olm-trace-test")));
    (subscriber, provider, exporter)
}

fn finished(provider: &SdkTracerProvider, exporter: &InMemorySpanExporter) -> Vec<SpanData> {
    provider.force_flush().expect("flush");
    exporter.get_finished_spans().expect("finished spans")
}

fn named<'a>(spans: &'a [SpanData], name: &str) -> &'a SpanData {
    spans
        .iter()
        .find(|span| span.name == name)
        .unwrap_or_else(|| panic!("span {name} exported: {spans:?}"))
}

/// A span's annotation, as the creating service writes it.
fn annotated_by(span_name: &'static str) -> (BTreeMap<String, String>, Vec<SpanData>) {
    let (subscriber, provider, exporter) = traced();
    let annotations = tracing::subscriber::with_default(subscriber, || {
        let span = tracing::info_span!("plan", name = span_name);
        let mut annotations = BTreeMap::new();
        assert!(annotate(&span, &mut annotations));
        annotations
    });
    (annotations, finished(&provider, &exporter))
}

#[test]
fn annotation_names_the_creating_span() {
    let (annotations, spans) = annotated_by("plan");
    let plan = named(&spans, "plan");
    let value = &annotations[TRACEPARENT_ANNOTATION];
    assert_eq!(
        value,
        &format!(
            "00-{}-{}-01",
            plan.span_context.trace_id(),
            plan.span_context.span_id()
        )
    );
    let parsed = annotated_context(&annotations).expect("well formed");
    assert_eq!(parsed.trace_id(), plan.span_context.trace_id());
    assert_eq!(parsed.span_id(), plan.span_context.span_id());
    assert!(parsed.is_remote());
}

#[test]
fn a_reconcile_in_flight_continues_the_annotated_trace() {
    let (annotations, before) = annotated_by("plan");
    let plan = named(&before, "plan").span_context.clone();
    let (subscriber, provider, exporter) = traced();
    let followed = tracing::subscriber::with_default(subscriber, || {
        let span = tracing::info_span!(parent: None, "reconcile");
        let followed = follow(&span, Some(&annotations), Handoff::while_in_flight(true));
        span.in_scope(|| tracing::info_span!("step").in_scope(|| {}));
        followed
    });
    assert_eq!(followed, Some(plan.trace_id()));
    let spans = finished(&provider, &exporter);
    let reconcile = named(&spans, "reconcile");
    assert_eq!(reconcile.span_context.trace_id(), plan.trace_id());
    assert_eq!(reconcile.parent_span_id, plan.span_id());
    let step = named(&spans, "step");
    assert_eq!(step.span_context.trace_id(), plan.trace_id());
    assert_eq!(step.parent_span_id, reconcile.span_context.span_id());
}

#[test]
fn a_resync_after_the_install_starts_a_linked_trace() {
    let (annotations, before) = annotated_by("plan");
    let plan = named(&before, "plan").span_context.clone();
    let (subscriber, provider, exporter) = traced();
    tracing::subscriber::with_default(subscriber, || {
        let span = tracing::info_span!(parent: None, "reconcile");
        assert_eq!(
            follow(&span, Some(&annotations), Handoff::while_in_flight(false)),
            Some(plan.trace_id())
        );
        span.in_scope(|| {});
    });
    let spans = finished(&provider, &exporter);
    let reconcile = named(&spans, "reconcile");
    assert_ne!(reconcile.span_context.trace_id(), plan.trace_id());
    assert_eq!(reconcile.parent_span_id, SpanId::INVALID);
    let links: Vec<&SpanContext> = reconcile.links.iter().map(|l| &l.span_context).collect();
    assert_eq!(links.len(), 1, "{links:?}");
    assert_eq!(links[0].trace_id(), plan.trace_id());
    assert_eq!(links[0].span_id(), plan.span_id());
}

#[test]
fn an_object_without_context_gets_a_root_span() {
    let (subscriber, provider, exporter) = traced();
    tracing::subscriber::with_default(subscriber, || {
        let span = tracing::info_span!(parent: None, "reconcile");
        assert_eq!(follow(&span, None, Handoff::Continue), None);
        assert_eq!(
            follow(&span, Some(&BTreeMap::new()), Handoff::Continue),
            None
        );
        span.in_scope(|| {});
    });
    let spans = finished(&provider, &exporter);
    let reconcile = named(&spans, "reconcile");
    assert_eq!(reconcile.parent_span_id, SpanId::INVALID);
    assert!(reconcile.links.is_empty());
}

#[test]
fn without_an_opentelemetry_layer_nothing_is_annotated_or_followed() {
    let subscriber = tracing_subscriber::registry();
    tracing::subscriber::with_default(subscriber, || {
        let span = tracing::info_span!("plan");
        let mut annotations = BTreeMap::new();
        assert!(!annotate(&span, &mut annotations));
        assert!(annotations.is_empty());
        assert_eq!(traceparent(&span), None);
        let mut metadata = MetadataMap::new();
        inject_metadata(&span, &mut metadata);
        assert!(metadata.is_empty());
    });
}

#[test]
fn malformed_annotations_are_ignored() {
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let span = "00f067aa0ba902b7";
    // A later version may append fields: up to the limit it is read, past
    // it not.
    let head = format!("01-{trace}-{span}-01-");
    let at_limit = format!("{head}{}", "a".repeat(MAX_TRACEPARENT_LEN - head.len()));
    assert_eq!(at_limit.len(), MAX_TRACEPARENT_LEN);
    assert!(
        parse_traceparent(&at_limit).is_some(),
        "a version-01 value at the limit"
    );
    let too_long = format!("{at_limit}a");
    for value in [
        "",
        "garbage",
        "00-xyz-abc-01",
        &format!("00-{}-{span}-01", "0".repeat(32)),
        &format!("00-{trace}-{}-01", "0".repeat(16)),
        &format!("ff-{trace}-{span}-01"),
        &format!("00-{trace}-{span}"),
        &format!("00-{}-{span}-01", &trace[1..]),
        &format!("00-{trace}-{span}-01\n"),
        &too_long,
    ] {
        assert_eq!(parse_traceparent(value), None, "{value:?}");
        let annotations = BTreeMap::from([(TRACEPARENT_ANNOTATION.to_owned(), value.to_owned())]);
        assert_eq!(annotated_context(&annotations), None, "{value:?}");
    }
    let sampled = parse_traceparent(&format!("00-{trace}-{span}-01")).expect("well formed");
    assert_eq!(sampled.trace_flags(), TraceFlags::SAMPLED);
    let unsampled = parse_traceparent(&format!("00-{trace}-{span}-00")).expect("well formed");
    assert_eq!(unsampled.trace_flags(), TraceFlags::default());
}

#[test]
fn grpc_metadata_carries_the_context_both_ways() {
    let (subscriber, provider, exporter) = traced();
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let mut metadata = MetadataMap::new();
    tracing::subscriber::with_default(subscriber, || {
        let span = tracing::info_span!("grpc_client");
        inject_metadata(&span, &mut metadata);
        span.in_scope(|| {});
    });
    let spans = finished(&provider, &exporter);
    let client = named(&spans, "grpc_client");
    let context = extract_metadata(&metadata);
    let remote = context.span().span_context().clone();
    assert_eq!(remote.trace_id(), client.span_context.trace_id());
    assert_eq!(remote.span_id(), client.span_context.span_id());

    // Hostile metadata: binary keys, values that are not text.
    let mut hostile = MetadataMap::new();
    hostile.insert_bin(
        "traceparent-bin",
        tonic::metadata::MetadataValue::from_bytes(b"\xff\x00"),
    );
    hostile.insert(
        "traceparent",
        MetadataValue::try_from("00-not-a-context-01").expect("ascii"),
    );
    assert!(!extract_metadata(&hostile).span().span_context().is_valid());
    assert!(
        !extract_metadata(&MetadataMap::new())
            .span()
            .span_context()
            .is_valid()
    );
}

#[test]
fn a_server_span_continues_the_callers_trace_from_request_headers() {
    let (subscriber, provider, exporter) = traced();
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    tracing::subscriber::with_default(subscriber, || {
        let client = tracing::info_span!("grpc_client");
        let mut metadata = MetadataMap::new();
        inject_metadata(&client, &mut metadata);
        // What a server sees: the request's HTTP/2 headers.
        let headers = metadata.into_headers();
        let server = tracing::info_span!(parent: None, "grpc_server");
        continue_from_headers(&server, &headers);
        server.in_scope(|| {});
        client.in_scope(|| {});
        // Without a context, a server span stays a root.
        let lone = tracing::info_span!(parent: None, "lone_server");
        continue_from_headers(&lone, &tonic::codegen::http::HeaderMap::new());
        lone.in_scope(|| {});
    });
    let spans = finished(&provider, &exporter);
    let client = named(&spans, "grpc_client");
    let server = named(&spans, "grpc_server");
    assert_eq!(
        server.span_context.trace_id(),
        client.span_context.trace_id()
    );
    assert_eq!(server.parent_span_id, client.span_context.span_id());
    assert_eq!(named(&spans, "lone_server").parent_span_id, SpanId::INVALID);
}

#[test]
fn a_recorded_error_fails_the_span() {
    let (subscriber, provider, exporter) = traced();
    tracing::subscriber::with_default(subscriber, || {
        let span = tracing::info_span!("apply_step");
        record_error(&span, &"creating Deployment: forbidden");
        span.in_scope(|| {});
    });
    let spans = finished(&provider, &exporter);
    let step = named(&spans, "apply_step");
    assert_eq!(step.status, Status::error("creating Deployment: forbidden"));
    let event = step
        .events
        .iter()
        .find(|e| e.name == "exception")
        .expect("exception event");
    assert!(
        event
            .attributes
            .iter()
            .any(|kv| kv.key.as_str() == "exception.message"
                && kv.value.as_str() == "creating Deployment: forbidden")
    );
}

proptest! {
    /// Any text is either refused or read as a valid context whose own
    /// `traceparent` names the same trace and span.
    #[test]
    fn any_annotation_value_is_refused_or_round_trips(
        value in prop_oneof![
            ".{0,300}",
            "[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(-[!-~]{0,240})?",
        ]
    ) {
        if let Some(context) = parse_traceparent(&value) {
            prop_assert!(context.is_valid());
            let reencoded = format!("00-{}-{}-{:02x}", context.trace_id(), context.span_id(), context.trace_flags().to_u8());
            prop_assert_eq!(parse_traceparent(&reencoded), Some(context));
        }
    }

    #[test]
    fn well_formed_values_are_read(trace in 1u128.., span in 1u64.., sampled: bool) {
        let value = format!("00-{trace:032x}-{span:016x}-{:02x}", u8::from(sampled));
        let context = parse_traceparent(&value).expect("well formed");
        prop_assert_eq!(context.trace_id(), TraceId::from(trace));
        prop_assert_eq!(context.span_id(), SpanId::from(span));
        prop_assert_eq!(context.is_sampled(), sampled);
    }
}
