//! Prometheus metrics: a registry with one sub-registry per component, and
//! the reconcile metrics every controller exports.
//!
//! Metrics are registered while the service starts, then the registry is
//! shared (read-only) with the admin server, which encodes it on each scrape.
//! The metric handles themselves are cheap to clone and update from anywhere.
//!
//! ```
//! use olm_runtime::metrics::{MetricsRegistry, ReconcileMetrics};
//!
//! let mut registry = MetricsRegistry::default();
//! let reconcile = ReconcileMetrics::register(registry.component("catalog_operator"));
//! let subscriptions = reconcile.controller("subscription");
//! let timer = subscriptions.start();
//! // ... reconcile ...
//! timer.failed("kube_conflict");
//! let text = registry.encode().unwrap();
//! assert!(text.contains("catalog_operator_reconcile_failures_total{controller=\"subscription\",category=\"kube_conflict\"} 1"));
//! ```

use std::time::Instant;

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{
        counter::Counter,
        family::Family,
        histogram::{Histogram, exponential_buckets},
    },
    registry::Registry,
};

use crate::error::{Error, Result};

/// A counter exported under exactly the name it is registered with, as
/// upstream OLM's Go client exports its counters (`csv_upgrade_count`,
/// `controller_reconcile_operator`): the OpenMetrics encoder appends
/// `_total` to a counter's name, which would break every query written for
/// upstream, so this one is typed `unknown` (Prometheus scrapes it as
/// untyped; `rate()` and `increase()` work on it as on a counter). Use it
/// only for upstream's names; our own counters keep the `_total` suffix.
#[derive(Clone, Debug, Default)]
pub struct ExactNameCounter(Counter);

impl ExactNameCounter {
    /// Adds one.
    pub fn inc(&self) {
        self.0.inc();
    }

    /// The count.
    pub fn get(&self) -> u64 {
        self.0.get()
    }
}

impl prometheus_client::metrics::TypedMetric for ExactNameCounter {
    const TYPE: prometheus_client::metrics::MetricType =
        prometheus_client::metrics::MetricType::Unknown;
}

impl prometheus_client::encoding::EncodeMetric for ExactNameCounter {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::MetricEncoder,
    ) -> std::result::Result<(), std::fmt::Error> {
        encoder.encode_gauge(&self.0.get())
    }

    fn metric_type(&self) -> prometheus_client::metrics::MetricType {
        prometheus_client::metrics::MetricType::Unknown
    }
}

/// The `Content-Type` of [`MetricsRegistry::encode`]'s output.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The process-wide metric registry.
#[derive(Debug, Default)]
pub struct MetricsRegistry {
    root: Registry,
}

impl MetricsRegistry {
    /// A sub-registry whose metric names are prefixed with `prefix` and an
    /// underscore (for example `olm_operator` or `leader_election`). Calling it
    /// again with the same prefix returns a further sub-registry that shares it.
    pub fn component(&mut self, prefix: &str) -> &mut Registry {
        self.root.sub_registry_with_prefix(prefix)
    }

    /// The unprefixed registry, for metrics that must keep upstream OLM's exact
    /// names (`csv_count`, `catalogsource_ready`, ...), which upstream
    /// registers without any prefix.
    pub fn upstream(&mut self) -> &mut Registry {
        &mut self.root
    }

    /// All metrics in the OpenMetrics text format, ending with `# EOF`.
    pub fn encode(&self) -> Result<String> {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.root)
            .map_err(|source| Error::MetricsEncode { source })?;
        Ok(text)
    }
}

/// Labels of the reconcile run counter and duration histogram.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabels {
    controller: String,
}

/// Labels of the reconcile failure counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FailureLabels {
    controller: String,
    category: String,
}

/// Reconcile runs, failures by error category and durations, labelled by
/// controller (`controller="subscription"`). Register once per component,
/// then hand each controller its [`ControllerMetrics`].
#[derive(Clone, Debug)]
pub struct ReconcileMetrics {
    runs: Family<ControllerLabels, Counter>,
    failures: Family<FailureLabels, Counter>,
    duration: Family<ControllerLabels, Histogram>,
}

/// Upper bounds of the reconcile duration buckets: 1 ms up to about 16 s,
/// doubling, since a reconcile is a few API round trips.
fn duration_buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(0.001, 2.0, 15)
}

impl ReconcileMetrics {
    /// Registers `reconcile_runs_total`, `reconcile_failures_total` and
    /// `reconcile_duration_seconds` in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            runs: Family::default(),
            failures: Family::default(),
            duration: Family::new_with_constructor(|| Histogram::new(duration_buckets())),
        };
        registry.register(
            "reconcile_runs",
            "Reconciliations started",
            metrics.runs.clone(),
        );
        registry.register(
            "reconcile_failures",
            "Reconciliations that failed, by error category",
            metrics.failures.clone(),
        );
        registry.register_with_unit(
            "reconcile_duration",
            "Time taken by one reconciliation",
            prometheus_client::registry::Unit::Seconds,
            metrics.duration.clone(),
        );
        metrics
    }

    /// The handle one controller uses to record its reconciles.
    pub fn controller(&self, name: &str) -> ControllerMetrics {
        ControllerMetrics {
            metrics: self.clone(),
            controller: name.to_owned(),
        }
    }
}

/// [`ReconcileMetrics`] bound to one controller's name.
#[derive(Clone, Debug)]
pub struct ControllerMetrics {
    metrics: ReconcileMetrics,
    controller: String,
}

impl ControllerMetrics {
    /// The controller's name: the `controller` label.
    pub fn name(&self) -> &str {
        &self.controller
    }

    /// Counts a reconcile run and starts timing it; the duration is recorded
    /// when the returned timer is dropped or [`ReconcileTimer::failed`] is called.
    pub fn start(&self) -> ReconcileTimer<'_> {
        self.metrics.runs.get_or_create(&self.labels()).inc();
        ReconcileTimer {
            controller: self,
            started: Instant::now(),
        }
    }

    /// Counts a failed reconcile under the error's category.
    pub fn failure(&self, category: &str) {
        self.metrics
            .failures
            .get_or_create(&FailureLabels {
                controller: self.controller.clone(),
                category: category.to_owned(),
            })
            .inc();
    }

    fn labels(&self) -> ControllerLabels {
        ControllerLabels {
            controller: self.controller.clone(),
        }
    }
}

/// Measures one reconcile; records its duration when dropped.
#[derive(Debug)]
#[must_use = "the duration is recorded when the timer is dropped"]
pub struct ReconcileTimer<'a> {
    controller: &'a ControllerMetrics,
    started: Instant,
}

impl ReconcileTimer<'_> {
    /// Ends the reconcile as failed with an error of `category`.
    pub fn failed(self, category: &str) {
        self.controller.failure(category);
    }
}

impl Drop for ReconcileTimer<'_> {
    fn drop(&mut self) {
        self.controller
            .metrics
            .duration
            .get_or_create(&self.controller.labels())
            .observe(self.started.elapsed().as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconcile_metrics_are_labelled_by_controller_and_category() {
        let mut registry = MetricsRegistry::default();
        let reconcile = ReconcileMetrics::register(registry.component("sample_operator"));
        let first = reconcile.controller("first-controller");
        let second = reconcile.controller("second-controller");
        drop(first.start());
        first.start().failed("kube_conflict");
        drop(second.start());

        let text = registry.encode().expect("encodes");
        for line in [
            "# TYPE sample_operator_reconcile_runs counter",
            "sample_operator_reconcile_runs_total{controller=\"first-controller\"} 2",
            "sample_operator_reconcile_runs_total{controller=\"second-controller\"} 1",
            "sample_operator_reconcile_failures_total{controller=\"first-controller\",category=\"kube_conflict\"} 1",
            "# TYPE sample_operator_reconcile_duration_seconds histogram",
            "# UNIT sample_operator_reconcile_duration_seconds seconds",
            "sample_operator_reconcile_duration_seconds_count{controller=\"first-controller\"} 2",
            "sample_operator_reconcile_duration_seconds_count{controller=\"second-controller\"} 1",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
        assert!(!text.contains("second-controller\",category"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn upstream_metrics_keep_their_names() {
        let mut registry = MetricsRegistry::default();
        let csv_count = prometheus_client::metrics::gauge::Gauge::<i64>::default();
        registry.upstream().register(
            "csv_count",
            "Number of CSVs successfully registered",
            csv_count.clone(),
        );
        csv_count.set(3);
        let text = registry.encode().expect("encodes");
        assert!(text.lines().any(|l| l == "csv_count 3"), "{text}");
    }
    #[test]
    fn an_exact_name_counter_keeps_upstream_s_name() {
        let mut registry = MetricsRegistry::default();
        let plain = ExactNameCounter::default();
        let family: Family<Vec<(String, String)>, ExactNameCounter> = Family::default();
        registry
            .upstream()
            .register("csv_upgrade_count", "upgrades", plain.clone());
        registry.upstream().register(
            "controller_reconcile_operator",
            "reconciles",
            family.clone(),
        );
        plain.inc();
        plain.inc();
        family
            .get_or_create(&vec![
                ("namespace".to_owned(), "ns".to_owned()),
                ("name".to_owned(), "op".to_owned()),
            ])
            .inc();
        let text = registry.encode().unwrap();
        assert!(text.contains("\ncsv_upgrade_count 2\n"), "{text}");
        assert!(text.contains("# TYPE csv_upgrade_count unknown"), "{text}");
        assert!(
            text.contains("controller_reconcile_operator{namespace=\"ns\",name=\"op\"} 1"),
            "{text}"
        );
        assert!(!text.contains("_total"), "{text}");
    }
}
