//! Logging and tracing setup: one [`init`] call per process that installs an
//! `EnvFilter`, plain or JSON log lines, and, when an OTLP endpoint is
//! configured, span export through OpenTelemetry with the W3C TraceContext
//! propagator.
//!
//! ```no_run
//! # async fn example(args: olm_runtime::config::TelemetryArgs) -> olm_runtime::Result<()> {
//! let service = olm_runtime::telemetry::ServiceInfo::new(env!("CARGO_PKG_NAME"), env!("CARGO_PKG_VERSION"));
//! let _telemetry = olm_runtime::telemetry::init(&args, &service)?;
//! // ... run the service; dropping the guard flushes pending spans.
//! # Ok(())
//! # }
//! ```

use opentelemetry::trace::{TraceContextExt as _, TraceId, TracerProvider as _};
use opentelemetry_sdk::{propagation::TraceContextPropagator, trace::SdkTracerProvider};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::{
    EnvFilter, Layer, Registry, layer::SubscriberExt as _, util::SubscriberInitExt as _,
};

use crate::{
    config::{LogFormat, TelemetryArgs},
    error::{Error, Result},
};

/// The span field [`record_trace_id`] fills in; declare it on reconcile spans
/// as `trace_id = tracing::field::Empty`.
pub const TRACE_ID_FIELD: &str = "trace_id";

pub use olm_trace::export::{EXPORT_SHUTDOWN_TIMEOUT, EXPORT_TIMEOUT};

/// Name and version of the running service, reported as the `service.name`
/// and `service.version` resource attributes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceInfo {
    /// The `service.name` unless overridden by `--service-name`.
    pub name: String,
    /// The `service.version`, normally the crate version.
    pub version: String,
}

impl ServiceInfo {
    /// Describes a service; pass `env!("CARGO_PKG_NAME")` and
    /// `env!("CARGO_PKG_VERSION")` from the binary crate.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            version: version.into(),
        }
    }
}

/// Keeps trace export alive; dropping it flushes pending spans (bounded by
/// [`EXPORT_SHUTDOWN_TIMEOUT`]). Hold it in `main` until the service has
/// stopped. One home for export: [`olm_trace::export`].
pub type TelemetryGuard = olm_trace::export::ExportGuard;

/// The subscriber layers stack on top of the filter, so that spans and events
/// the filter rejects cost nothing in any layer (including export).
type Filtered = tracing_subscriber::layer::Layered<EnvFilter, Registry>;
type BoxedLayer = Box<dyn Layer<Filtered> + Send + Sync>;

/// Installs the global `tracing` subscriber, OpenTelemetry tracer provider and
/// W3C TraceContext propagator. Must be called from within a Tokio runtime
/// when an OTLP endpoint is configured (the gRPC exporter runs on it).
pub fn init(args: &TelemetryArgs, service: &ServiceInfo) -> Result<TelemetryGuard> {
    let provider = match &args.otlp_endpoint {
        Some(endpoint) => Some(otlp_provider(endpoint, args, service)?),
        None => None,
    };
    let subscriber = subscriber(args, service, provider.clone(), std::io::stdout)?;
    subscriber
        .try_init()
        .map_err(|source| Error::TracingSubscriber { source })?;
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    if let Some(provider) = &provider {
        opentelemetry::global::set_tracer_provider(provider.clone());
    }
    Ok(TelemetryGuard::new(provider))
}

/// Builds the subscriber without installing it: log lines go to `writer`,
/// spans to `provider` when given.
fn subscriber<W>(
    args: &TelemetryArgs,
    service: &ServiceInfo,
    provider: Option<SdkTracerProvider>,
    writer: W,
) -> Result<
    impl tracing::Subscriber + Send + Sync + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
>
where
    W: for<'writer> tracing_subscriber::fmt::MakeWriter<'writer> + Send + Sync + 'static,
{
    let filter = EnvFilter::try_new(&args.log_filter).map_err(|source| Error::LogFilter {
        filter: args.log_filter.clone(),
        source,
    })?;
    let mut layers: Vec<BoxedLayer> = Vec::with_capacity(2);
    layers.push(match args.log_format {
        LogFormat::Plain => tracing_subscriber::fmt::layer().with_writer(writer).boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .with_writer(writer)
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .boxed(),
    });
    if let Some(provider) = provider {
        let tracer = provider.tracer(service_name(args, service));
        layers.push(tracing_opentelemetry::layer().with_tracer(tracer).boxed());
    }
    Ok(Registry::default().with(filter).with(layers))
}

fn service_name(args: &TelemetryArgs, service: &ServiceInfo) -> String {
    args.service_name
        .clone()
        .unwrap_or_else(|| service.name.clone())
}

fn otlp_provider(
    endpoint: &str,
    args: &TelemetryArgs,
    service: &ServiceInfo,
) -> Result<SdkTracerProvider> {
    olm_trace::export::otlp_provider(endpoint, &service_name(args, service), &service.version)
        .map_err(|source| Error::OtlpExporter {
            endpoint: endpoint.to_owned(),
            source: Box::new(source),
        })
}

/// The OpenTelemetry trace id of `span`, or `None` when the span is disabled
/// or no OpenTelemetry layer is installed.
pub fn trace_id(span: &Span) -> Option<TraceId> {
    let trace_id = span.context().span().span_context().trace_id();
    (trace_id != TraceId::INVALID).then_some(trace_id)
}

/// Records the trace id of `span` in its [`TRACE_ID_FIELD`] field (which the
/// span must declare as `Empty`), so that log lines can be matched with the
/// exported trace. Returns the trace id when there is one.
pub fn record_trace_id(span: &Span) -> Option<TraceId> {
    let trace_id = trace_id(span)?;
    span.record(TRACE_ID_FIELD, tracing::field::display(trace_id));
    Some(trace_id)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use opentelemetry_sdk::trace::InMemorySpanExporter;

    use super::*;

    /// Collects log output in memory.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Captured {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().expect("not poisoned").clone()).expect("utf-8 logs")
        }
    }

    impl std::io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .expect("not poisoned")
                .extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
        type Writer = Self;

        fn make_writer(&'a self) -> Self::Writer {
            self.clone()
        }
    }

    fn sample_service() -> ServiceInfo {
        ServiceInfo::new("sample-operator", "9.8.7")
    }

    fn args(filter: &str, format: LogFormat) -> TelemetryArgs {
        TelemetryArgs {
            log_format: format,
            log_filter: filter.to_owned(),
            otlp_endpoint: None,
            service_name: None,
        }
    }

    #[test]
    fn invalid_filter_is_rejected_with_its_text() {
        let error = subscriber(
            &args("info,=[", LogFormat::Plain),
            &sample_service(),
            None,
            Captured::default(),
        )
        .err()
        .expect("invalid filter");
        assert_eq!(error.category(), "telemetry");
        assert!(error.to_string().contains("info,=["), "{error}");
    }

    #[test]
    fn plain_and_json_lines_honour_the_filter() {
        for format in [LogFormat::Plain, LogFormat::Json] {
            let captured = Captured::default();
            let subscriber = subscriber(
                &args("info", format),
                &sample_service(),
                None,
                captured.clone(),
            )
            .expect("subscriber builds");
            tracing::subscriber::with_default(subscriber, || {
                tracing::info!(sample_field = "kept-value", "kept line");
                tracing::debug!("filtered line");
            });
            let text = captured.text();
            assert!(
                text.contains("kept line") && text.contains("kept-value"),
                "{text}"
            );
            assert!(!text.contains("filtered line"), "{text}");
            if format == LogFormat::Json {
                let line: serde_json::Value =
                    serde_json::from_str(text.trim()).expect("one JSON object");
                assert_eq!(line["message"], "kept line");
                assert_eq!(line["sample_field"], "kept-value");
            }
        }
    }

    #[test]
    fn the_service_name_is_the_crates_unless_overridden() {
        let plain = args("info", LogFormat::Plain);
        assert_eq!(service_name(&plain, &sample_service()), "sample-operator");
        let overridden = TelemetryArgs {
            service_name: Some("renamed-service".to_owned()),
            ..plain
        };
        assert_eq!(
            service_name(&overridden, &sample_service()),
            "renamed-service"
        );
    }

    #[test]
    fn trace_id_is_recorded_on_the_span_logged_and_exported() {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let captured = Captured::default();
        let subscriber = subscriber(
            &args("info", LogFormat::Json),
            &sample_service(),
            Some(provider.clone()),
            captured.clone(),
        )
        .expect("subscriber builds");
        let recorded = tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("reconcile", trace_id = tracing::field::Empty);
            let _entered = span.enter();
            let recorded = record_trace_id(&span);
            tracing::info!("inside the reconcile");
            recorded
        })
        .expect("a trace id");
        let line: serde_json::Value =
            serde_json::from_str(captured.text().trim()).expect("one JSON object");
        assert_eq!(line["span"]["trace_id"], recorded.to_string(), "{line}");
        provider.force_flush().expect("flush");
        let spans = exporter.get_finished_spans().expect("finished spans");
        let reconcile = spans
            .iter()
            .find(|span| span.name == "reconcile")
            .expect("reconcile span exported");
        assert_eq!(reconcile.span_context.trace_id(), recorded);
    }

    #[test]
    fn without_export_there_is_no_trace_id() {
        let subscriber = subscriber(
            &args("info", LogFormat::Plain),
            &sample_service(),
            None,
            Captured::default(),
        )
        .expect("subscriber builds");
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("reconcile", trace_id = tracing::field::Empty);
            assert_eq!(record_trace_id(&span), None);
        });
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn otlp_export_builds_and_guard_drops_promptly() {
        let args = TelemetryArgs {
            // Nothing listens here; the exporter connects lazily and only has to
            // give up within the shutdown timeout.
            otlp_endpoint: Some("http://127.0.0.1:9".to_owned()),
            ..args("info", LogFormat::Plain)
        };
        let provider =
            otlp_provider("http://127.0.0.1:9", &args, &sample_service()).expect("exporter builds");
        let guard = TelemetryGuard::new(Some(provider));
        assert!(guard.exports_traces());
        let started = std::time::Instant::now();
        drop(guard);
        assert!(started.elapsed() < EXPORT_SHUTDOWN_TIMEOUT + std::time::Duration::from_secs(1));
    }
}
