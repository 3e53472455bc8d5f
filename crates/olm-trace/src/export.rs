//! Span export over OTLP/gRPC: the tracer provider every OLM binary builds
//! when it is given an endpoint, and the guard that flushes it on exit. The
//! services install it through `olm_runtime::telemetry::init`; `opm serve`
//! directly, since `opm` must not depend on `olm-runtime`.

use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry_otlp::{ExporterBuildError, WithExportConfig as _};
use opentelemetry_sdk::{Resource, trace::SdkTracerProvider};

/// How long dropping the [`ExportGuard`] may wait for pending spans to be
/// exported before giving up, so that a dead collector cannot stall shutdown.
pub const EXPORT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// How long one OTLP export request may take.
pub const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// The `service.name` and `service.version` resource, on top of what the
/// SDK detects from the environment (`OTEL_RESOURCE_ATTRIBUTES`).
pub fn resource(service_name: &str, service_version: &str) -> Resource {
    Resource::builder()
        .with_service_name(service_name.to_owned())
        .with_attribute(KeyValue::new("service.version", service_version.to_owned()))
        .build()
}

/// A tracer provider exporting batches of spans to `endpoint` over
/// OTLP/gRPC. The batch schedule follows the SDK's environment
/// (`OTEL_BSP_SCHEDULE_DELAY`, ...). Build it within a Tokio runtime: the
/// gRPC exporter runs on it.
pub fn otlp_provider(
    endpoint: &str,
    service_name: &str,
    service_version: &str,
) -> Result<SdkTracerProvider, ExporterBuildError> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(endpoint)
        .with_timeout(EXPORT_TIMEOUT)
        .build()?;
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource(service_name, service_version))
        .build())
}

/// Keeps span export alive; dropping it flushes pending spans (bounded by
/// [`EXPORT_SHUTDOWN_TIMEOUT`]). Hold it in `main` until the process has
/// stopped.
#[must_use = "dropping the guard stops trace export"]
#[derive(Debug, Default)]
pub struct ExportGuard {
    provider: Option<SdkTracerProvider>,
}

impl ExportGuard {
    /// A guard over `provider` (`None`: nothing is exported).
    pub fn new(provider: Option<SdkTracerProvider>) -> Self {
        Self { provider }
    }

    /// Whether spans are exported over OTLP.
    pub fn exports_traces(&self) -> bool {
        self.provider.is_some()
    }
}

impl Drop for ExportGuard {
    fn drop(&mut self) {
        let Some(provider) = self.provider.take() else {
            return;
        };
        let shutdown = move || {
            if let Err(error) = provider.shutdown_with_timeout(EXPORT_SHUTDOWN_TIMEOUT) {
                eprintln!("failed to flush traces: {error}");
            }
        };
        // The batch exporter's gRPC client runs on the Tokio runtime; blocking a
        // runtime worker while it waits would starve that client, so let the
        // runtime move its other work elsewhere first.
        match tokio::runtime::Handle::try_current() {
            Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(shutdown);
            }
            _ => shutdown(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_names_service_and_version() {
        let resource = resource("sample-operator", "9.8.7");
        assert_eq!(
            resource.get(&opentelemetry::Key::new("service.name")),
            Some("sample-operator".into())
        );
        assert_eq!(
            resource.get(&opentelemetry::Key::new("service.version")),
            Some("9.8.7".into())
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_guard_of_an_unreachable_collector_drops_promptly() {
        // Nothing listens here; the exporter connects lazily and only has to
        // give up within the shutdown timeout.
        let provider = otlp_provider("http://127.0.0.1:9", "sample-operator", "9.8.7")
            .expect("exporter builds");
        let guard = ExportGuard::new(Some(provider));
        assert!(guard.exports_traces());
        let started = std::time::Instant::now();
        drop(guard);
        assert!(started.elapsed() < EXPORT_SHUTDOWN_TIMEOUT + Duration::from_secs(1));
    }

    #[test]
    fn an_invalid_endpoint_is_refused() {
        assert!(otlp_provider("not a uri \u{0}", "sample-operator", "9.8.7").is_err());
    }
}
