//! W3C trace context across OLM's hand-offs, so that one Subscription's
//! install or upgrade is one trace from resolution to the CSV's last phase.
//!
//! - **Through Kubernetes objects.** The service that creates an object other
//!   services act on (the InstallPlan, the CSV) writes its span's
//!   `traceparent` into [`TRACEPARENT_ANNOTATION`] ([`annotate`]). A reconcile
//!   of that object [`follow`]s it: while the object's work is in flight the
//!   reconcile's span is a child of the annotated span ([`Handoff::Continue`]);
//!   once it is done, a resync starts a trace of its own, linked to the
//!   install's ([`Handoff::Link`]). An object without the annotation (made by
//!   hand, or while tracing was off) gets root spans.
//! - **Through gRPC.** A client writes its span's context into the request
//!   metadata ([`inject_metadata`]); a server reads it back
//!   ([`extract_metadata`]). NATS headers are `olm-bus`'s, through the same
//!   global propagator.
//!
//! [`export`] builds the OTLP span exporter; installing it with the
//! propagator is the service's telemetry set-up (`olm-runtime`). Without an OpenTelemetry layer, spans
//! have no valid context, so nothing is annotated or injected and every
//! reconcile behaves as before. A malformed or hostile annotation is ignored,
//! never an error.
//!
//! This crate must not depend on `kube`, `k8s-openapi` or any OLM crate: it
//! works on plain annotation maps and on tonic metadata, so that the registry
//! client and `opm` can use it too.

pub mod export;

use std::collections::{BTreeMap, HashMap};

use opentelemetry::{
    Context, KeyValue, global,
    propagation::{Extractor, Injector, TextMapPropagator as _},
    trace::{SpanContext, Status, TraceContextExt as _, TraceId},
};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tonic::metadata::{KeyRef, MetadataKey, MetadataMap, MetadataValue};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// The annotation that carries the W3C `traceparent` of the span that made
/// an object (InstallPlan, CSV), so that the services acting on it join the
/// same trace.
pub const TRACEPARENT_ANNOTATION: &str = "olm.operatorframework.io/traceparent";

/// The longest annotation value read as a `traceparent`. Version 00 is 55
/// characters; later versions may append fields, which the W3C format lets a
/// reader ignore. Anything longer is not a trace context, and is not parsed.
pub const MAX_TRACEPARENT_LEN: usize = 256;

/// The W3C header (and metadata key) name.
const TRACEPARENT: &str = "traceparent";

/// How a reconcile relates to the trace annotated on its object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handoff {
    /// The object's work is part of the install still: the reconcile's span
    /// is a child of the annotated span.
    Continue,
    /// The install is over (a resync, a later change): the reconcile starts
    /// a trace of its own, linked to the install's.
    Link,
}

impl Handoff {
    /// [`Handoff::Continue`] while the object's work is in flight, else
    /// [`Handoff::Link`].
    pub fn while_in_flight(in_flight: bool) -> Self {
        if in_flight {
            Self::Continue
        } else {
            Self::Link
        }
    }
}

/// The W3C `traceparent` of `span`, when it belongs to a valid trace (only
/// when an OpenTelemetry layer is installed and the span is enabled).
pub fn traceparent(span: &Span) -> Option<String> {
    let context = span.context();
    if !context.span().span_context().is_valid() {
        return None;
    }
    let mut carrier: HashMap<String, String> = HashMap::with_capacity(2);
    TraceContextPropagator::new().inject_context(&context, &mut carrier);
    carrier.remove(TRACEPARENT)
}

/// Writes `span`'s `traceparent` into `annotations` under
/// [`TRACEPARENT_ANNOTATION`]; returns whether there was one to write.
pub fn annotate(span: &Span, annotations: &mut BTreeMap<String, String>) -> bool {
    match traceparent(span) {
        Some(value) => {
            annotations.insert(TRACEPARENT_ANNOTATION.to_owned(), value);
            true
        }
        None => false,
    }
}

/// The span context [`TRACEPARENT_ANNOTATION`] names, if the annotation is
/// there and well formed.
pub fn annotated_context(annotations: &BTreeMap<String, String>) -> Option<SpanContext> {
    parse_traceparent(annotations.get(TRACEPARENT_ANNOTATION)?)
}

/// The span context of a W3C `traceparent` value; `None` when it is
/// malformed, too long or names the invalid (all-zero) trace or span. The
/// annotation is read as W3C Trace Context whatever propagator the process
/// installed globally.
pub fn parse_traceparent(value: &str) -> Option<SpanContext> {
    if value.len() > MAX_TRACEPARENT_LEN || !w3c_shaped(value) {
        return None;
    }
    let carrier = HashMap::from([(TRACEPARENT.to_owned(), value.to_owned())]);
    let context = TraceContextPropagator::new().extract(&carrier);
    let span_context = context.span().span_context().clone();
    span_context.is_valid().then_some(span_context)
}

/// Whether `value` has the W3C shape: lowercase hex fields of 2, 32, 16 and
/// 2 digits, version `ff` forbidden, version `00` with no more fields. The
/// SDK's propagator is lenient (it reads a 31-digit trace id); an
/// annotation anyone can write is held to the letter.
fn w3c_shaped(value: &str) -> bool {
    let hex = |field: &str, len: usize| {
        field.len() == len
            && field
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let fields: Vec<&str> = value.split('-').collect();
    match fields.as_slice() {
        [version, trace_id, span_id, flags, rest @ ..] => {
            hex(version, 2)
                && *version != "ff"
                && (*version != "00" || rest.is_empty())
                && hex(trace_id, 32)
                && hex(span_id, 16)
                && hex(flags, 2)
        }
        _ => false,
    }
}

/// Joins `span` to the trace annotated on its object, as `handoff` says.
/// Call it right after creating the span, before entering it or reading its
/// context (a started span's parent cannot change). Returns the annotated
/// trace id when there was one.
pub fn follow(
    span: &Span,
    annotations: Option<&BTreeMap<String, String>>,
    handoff: Handoff,
) -> Option<TraceId> {
    let remote = annotations.and_then(annotated_context)?;
    let trace_id = remote.trace_id();
    match handoff {
        Handoff::Continue => {
            let parent = Context::new().with_remote_span_context(remote);
            if let Err(error) = span.set_parent(parent) {
                // Only without an OpenTelemetry layer or on a started span:
                // the reconcile is then traced on its own.
                tracing::debug!(%error, "cannot join the annotated trace");
            }
        }
        Handoff::Link => span.add_link(remote),
    }
    Some(trace_id)
}

/// Marks `span` failed with `error`'s text (span status `Error` and an
/// `exception` event), as OpenTelemetry's conventions record failures.
pub fn record_error(span: &Span, error: &dyn std::fmt::Display) {
    let message = error.to_string();
    span.add_event(
        "exception",
        vec![KeyValue::new("exception.message", message.clone())],
    );
    span.set_status(Status::error(message));
}

/// Writes `span`'s trace context into gRPC request metadata, through the
/// global propagator (as NATS headers are).
pub fn inject_metadata(span: &Span, metadata: &mut MetadataMap) {
    let context = span.context();
    if !context.span().span_context().is_valid() {
        return;
    }
    global::get_text_map_propagator(|propagator| {
        propagator.inject_context(&context, &mut MetadataInjector(metadata));
    });
}

/// Makes `span` (fresh, not yet entered) a child of the trace context in an
/// incoming request's headers, when there is a valid one: the `trace_fn`
/// of a gRPC server.
pub fn continue_from_headers(span: &Span, headers: &tonic::codegen::http::HeaderMap) {
    let context =
        global::get_text_map_propagator(|propagator| propagator.extract(&HeaderExtractor(headers)));
    if context.span().span_context().is_valid()
        && let Err(error) = span.set_parent(context)
    {
        tracing::debug!(%error, "cannot join the caller's trace");
    }
}

/// The trace context a gRPC client put in `metadata`; an empty context when
/// there is none or it is malformed.
pub fn extract_metadata(metadata: &MetadataMap) -> Context {
    global::get_text_map_propagator(|propagator| propagator.extract(&MetadataExtractor(metadata)))
}

struct MetadataInjector<'a>(&'a mut MetadataMap);

impl Injector for MetadataInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        // A key or value gRPC cannot carry is skipped, never a panic.
        if let (Ok(key), Ok(value)) = (
            MetadataKey::from_bytes(key.to_ascii_lowercase().as_bytes()),
            MetadataValue::try_from(value.as_str()),
        ) {
            self.0.insert(key, value);
        }
    }
}

struct HeaderExtractor<'a>(&'a tonic::codegen::http::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|value| value.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|key| key.as_str()).collect()
    }
}

struct MetadataExtractor<'a>(&'a MetadataMap);

impl Extractor for MetadataExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|value| value.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0
            .keys()
            .filter_map(|key| match key {
                KeyRef::Ascii(key) => Some(key.as_str()),
                KeyRef::Binary(_) => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
