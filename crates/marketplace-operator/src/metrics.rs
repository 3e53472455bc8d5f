//! marketplace-operator's metrics, under the `marketplace_operator_` prefix.
//!
//! Upstream operator-marketplace registers no metrics of its own
//! (`registerMetrics` in `pkg/metrics/metrics.go` is empty); its
//! `OperatorHubSourceError` alert (`manifests/12_prometheus_rule.yaml`) reads
//! `catalogsource_ready`, which catalog-operator exports. So this service
//! exports only its own: the reconcile metrics every controller has,
//! `marketplace_operator_source_status{name,status}` (1 for each configured
//! source's current `status.sources[].status`) and
//! `marketplace_operator_catalog_source_writes_total{action,outcome}`.

use olm_runtime::metrics::{ControllerMetrics, MetricsRegistry, ReconcileMetrics};
use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge},
};

/// The prefix of every metric of this service.
pub const PREFIX: &str = "marketplace_operator";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabels {
    name: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WriteLabels {
    action: String,
    outcome: String,
}

/// The metric handles; cheap to clone.
#[derive(Clone, Debug)]
pub struct MarketplaceMetrics {
    /// Runs, failures by category and duration of the OperatorHub reconcile.
    pub reconcile: ControllerMetrics,
    sources: Family<SourceLabels, Gauge>,
    writes: Family<WriteLabels, Counter>,
}

impl MarketplaceMetrics {
    /// Registers the metrics in `registry`.
    pub fn register(registry: &mut MetricsRegistry) -> Self {
        let registry = registry.component(PREFIX);
        let reconcile = ReconcileMetrics::register(registry).controller("operatorhub");
        let metrics = Self {
            reconcile,
            sources: Family::default(),
            writes: Family::default(),
        };
        registry.register(
            "source_status",
            "1 for each configured OperatorHub source and its status (Success or Error)",
            metrics.sources.clone(),
        );
        registry.register(
            "catalog_source_writes",
            "Writes to default CatalogSources, by action (create, update, delete) and outcome",
            metrics.writes.clone(),
        );
        metrics
    }

    /// Replaces the per-source status gauge with `sources` (name, status).
    pub fn set_sources<'a>(&self, sources: impl IntoIterator<Item = (&'a str, &'a str)>) {
        self.sources.clear();
        for (name, status) in sources {
            self.sources
                .get_or_create(&SourceLabels {
                    name: name.to_owned(),
                    status: status.to_owned(),
                })
                .set(1);
        }
    }

    /// Counts one write.
    pub fn wrote(&self, action: &str, succeeded: bool) {
        self.writes
            .get_or_create(&WriteLabels {
                action: action.to_owned(),
                outcome: if succeeded { "succeeded" } else { "failed" }.to_owned(),
            })
            .inc();
    }

    /// Writes of `action` with `outcome` so far (for tests and reports).
    pub fn write_count(&self, action: &str, outcome: &str) -> u64 {
        self.writes
            .get_or_create(&WriteLabels {
                action: action.to_owned(),
                outcome: outcome.to_owned(),
            })
            .get()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn metrics_are_named_under_the_prefix() {
        let mut registry = MetricsRegistry::default();
        let metrics = MarketplaceMetrics::register(&mut registry);
        metrics.set_sources([("fixture-a", "Success"), ("fixture-b", "Error")]);
        metrics.set_sources([("fixture-a", "Error")]);
        metrics.wrote("create", true);
        drop(metrics.reconcile.start());
        let text = registry.encode().unwrap();
        assert!(
            text.contains(
                "marketplace_operator_source_status{name=\"fixture-a\",status=\"Error\"} 1"
            )
        );
        assert!(!text.contains("fixture-b"), "{text}");
        assert!(text.contains(
            "marketplace_operator_catalog_source_writes_total{action=\"create\",outcome=\"succeeded\"} 1"
        ));
        assert!(
            text.contains(
                "marketplace_operator_reconcile_runs_total{controller=\"operatorhub\"} 1"
            )
        );
    }
}
