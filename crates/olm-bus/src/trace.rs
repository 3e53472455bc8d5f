//! W3C trace context (`traceparent`, `tracestate`) in NATS message headers,
//! so that one trace follows a change from the service that publishes an
//! event to the one that reacts to it.
//!
//! Injection and extraction go through OpenTelemetry's global text-map
//! propagator, which the service's telemetry set-up installs (a
//! `TraceContextPropagator`). Without one, nothing is injected and received
//! spans are roots; the bus works the same.

use std::str::FromStr;

use async_nats::{HeaderMap, HeaderName, HeaderValue};
use opentelemetry::{
    global,
    propagation::{Extractor, Injector},
};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// Writes the trace context of the current `tracing` span into `headers`.
pub fn inject_current_context(headers: &mut HeaderMap) {
    let context = tracing::Span::current().context();
    global::get_text_map_propagator(|propagator| {
        propagator.inject_context(&context, &mut HeaderInjector(headers));
    });
}

/// Reads the trace context a publisher put in `headers`. Missing or
/// malformed headers give an empty context, never an error.
pub fn extract_context(headers: Option<&HeaderMap>) -> opentelemetry::Context {
    match headers {
        Some(headers) => global::get_text_map_propagator(|propagator| {
            propagator.extract(&HeaderExtractor(headers))
        }),
        None => opentelemetry::Context::new(),
    }
}

/// Sets a header, skipping names or values NATS cannot carry (control
/// characters, line breaks) instead of panicking as `HeaderMap::insert`
/// does with `&str` arguments.
pub(crate) fn set_header(headers: &mut HeaderMap, name: &str, value: &str) -> bool {
    match (HeaderName::from_str(name), HeaderValue::from_str(value)) {
        (Ok(name), Ok(value)) => {
            headers.insert(name, value);
            true
        }
        _ => {
            tracing::debug!(header = name, "skipping a header NATS cannot carry");
            false
        }
    }
}

/// Reads a header by name, ignoring ASCII case as HTTP does, since other
/// clients may capitalise `Traceparent`.
pub(crate) fn get_header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    if let Some(value) = headers.get(name) {
        return Some(value.as_str());
    }
    headers
        .iter()
        .find(|(key, _)| AsRef::<str>::as_ref(*key).eq_ignore_ascii_case(name))
        .and_then(|(_, values)| values.first())
        .map(HeaderValue::as_str)
}

struct HeaderInjector<'a>(&'a mut HeaderMap);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        set_header(self.0, key, &value);
    }
}

struct HeaderExtractor<'a>(&'a HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        get_header(self.0, key)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.iter().map(|(key, _)| key.as_ref()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_header_values_are_skipped_not_panics() {
        let mut headers = HeaderMap::new();
        assert!(!set_header(&mut headers, "traceparent", "a\r\nb"));
        assert!(!set_header(&mut headers, "bad:name", "v"));
        assert!(!set_header(&mut headers, "bad\nname", "v"));
        assert!(set_header(&mut headers, "Good-Name", "value"));
        assert_eq!(headers.len(), 1);
    }

    #[test]
    fn headers_are_found_regardless_of_case() {
        let mut headers = HeaderMap::new();
        set_header(&mut headers, "Traceparent", "00-abc");
        assert_eq!(get_header(&headers, "traceparent"), Some("00-abc"));
        assert_eq!(get_header(&headers, "tracestate"), None);
    }

    #[test]
    fn missing_headers_give_an_empty_context() {
        use opentelemetry::trace::TraceContextExt as _;
        let context = extract_context(None);
        assert!(!context.span().span_context().is_valid());
    }
}
