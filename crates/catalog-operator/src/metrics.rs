//! catalog-operator's metrics under upstream OLM's exact, unprefixed names
//! (`catalog_source_count`, `catalogsource_ready`, `subscription_count`,
//! `subscription_sync_total`, `install_plan_count`,
//! `catalog_source_snapshots_total`, `installplan_warnings_total`,
//! `olm_resolution_duration_seconds`).
//!
//! One difference: upstream's `olm_resolution_duration_seconds` is a
//! summary with 0.9/0.95/0.99 quantiles; the Prometheus client used here has
//! no summaries, so it is a histogram (`_bucket`, `_sum`, `_count`), from
//! which the same quantiles are computed with `histogram_quantile`.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use olm_runtime::metrics::{ControllerMetrics, MetricsRegistry, ReconcileMetrics};
use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{
        counter::Counter,
        family::Family,
        gauge::Gauge,
        histogram::{Histogram, exponential_buckets},
    },
};

/// Labels naming a catalog.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CatalogLabels {
    namespace: String,
    name: String,
}

/// Labels of `subscription_sync_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SubscriptionLabels {
    /// The Subscription's name.
    pub name: String,
    /// `status.installedCSV`.
    pub installed: String,
    /// `spec.channel`.
    pub channel: String,
    /// `spec.name`.
    pub package: String,
    /// `spec.installPlanApproval`.
    pub approval: String,
}

/// Labels of `olm_resolution_duration_seconds`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: String,
}

fn resolution_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

/// Every metric catalog-operator exports.
#[derive(Clone, Debug)]
pub struct CatalogMetrics {
    catalog_source_count: Gauge,
    catalogsource_ready: Family<CatalogLabels, Gauge>,
    catalog_source_snapshots: Family<CatalogLabels, Counter>,
    subscription_count: Gauge,
    subscription_sync: Family<SubscriptionLabels, Counter>,
    install_plan_count: Gauge,
    installplan_warnings: Counter,
    resolution_duration: Family<OutcomeLabels, Histogram, fn() -> Histogram>,
    /// The `subscription_sync_total` series last counted per Subscription,
    /// so a change of labels deletes the old series as upstream does.
    sync_series: Arc<Mutex<HashMap<(String, String), SubscriptionLabels>>>,
    /// Reconciles of CatalogSources
    /// (`catalog_operator_reconcile_*{controller="catalogsource"}`).
    pub catalog_source_reconciles: ControllerMetrics,
    /// Reconciles of InstallPlans (`controller="installplan"`).
    pub install_plan_reconciles: ControllerMetrics,
    /// Resolution passes of a namespace's Subscriptions
    /// (`controller="subscription"`).
    pub resolution_reconciles: ControllerMetrics,
}

impl CatalogMetrics {
    /// Registers every metric in `registry` and returns the handles.
    pub fn register(registry: &mut MetricsRegistry) -> Self {
        let reconciles = ReconcileMetrics::register(registry.component("catalog_operator"));
        let metrics = Self {
            catalog_source_count: Gauge::default(),
            catalogsource_ready: Family::default(),
            catalog_source_snapshots: Family::default(),
            subscription_count: Gauge::default(),
            subscription_sync: Family::default(),
            install_plan_count: Gauge::default(),
            installplan_warnings: Counter::default(),
            resolution_duration: Family::new_with_constructor(resolution_histogram),
            sync_series: Arc::default(),
            catalog_source_reconciles: reconciles.controller("catalogsource"),
            install_plan_reconciles: reconciles.controller("installplan"),
            resolution_reconciles: reconciles.controller("subscription"),
        };
        let upstream = registry.upstream();
        upstream.register(
            "catalog_source_count",
            "Number of catalog sources",
            metrics.catalog_source_count.clone(),
        );
        upstream.register(
            "catalogsource_ready",
            "State of a CatalogSource. 1 indicates that the CatalogSource is in a READY state. 0 indicates CatalogSource is in a Non READY state.",
            metrics.catalogsource_ready.clone(),
        );
        upstream.register(
            "catalog_source_snapshots",
            "The number of times the catalog operator has requested a snapshot of data from a catalog source",
            metrics.catalog_source_snapshots.clone(),
        );
        upstream.register(
            "subscription_count",
            "Number of Subscriptions",
            metrics.subscription_count.clone(),
        );
        upstream.register(
            "subscription_sync",
            "Monotonic count of subscription syncs",
            metrics.subscription_sync.clone(),
        );
        upstream.register(
            "install_plan_count",
            "Number of install plans",
            metrics.install_plan_count.clone(),
        );
        upstream.register(
            "installplan_warnings",
            "monotonic count of resources that generated warnings when applied as part of an InstallPlan",
            metrics.installplan_warnings.clone(),
        );
        upstream.register(
            "olm_resolution_duration_seconds",
            "The duration of a dependency resolution attempt",
            metrics.resolution_duration.clone(),
        );
        metrics
    }

    /// Sets the object counts.
    pub fn set_counts(&self, catalogs: usize, subscriptions: usize, install_plans: usize) {
        let gauge = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.catalog_source_count.set(gauge(catalogs));
        self.subscription_count.set(gauge(subscriptions));
        self.install_plan_count.set(gauge(install_plans));
    }

    /// Records whether a catalog's registry is READY.
    pub fn catalog_ready(&self, namespace: &str, name: &str, ready: bool) {
        self.catalogsource_ready
            .get_or_create(&CatalogLabels {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            })
            .set(i64::from(ready));
    }

    /// Forgets a deleted catalog's series.
    pub fn catalog_deleted(&self, namespace: &str, name: &str) {
        let labels = CatalogLabels {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        };
        self.catalogsource_ready.remove(&labels);
        self.catalog_source_snapshots.remove(&labels);
    }

    /// Counts one snapshot read from a catalog.
    pub fn snapshot_taken(&self, namespace: &str, name: &str) {
        self.catalog_source_snapshots
            .get_or_create(&CatalogLabels {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            })
            .inc();
    }

    /// Counts one sync of a Subscription in `namespace`; a changed label set
    /// replaces the old series.
    pub fn subscription_synced(&self, namespace: &str, labels: SubscriptionLabels) {
        let key = (namespace.to_owned(), labels.name.clone());
        let mut series = self
            .sync_series
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(old) = series.get(&key)
            && *old != labels
        {
            self.subscription_sync.remove(old);
        }
        self.subscription_sync.get_or_create(&labels).inc();
        series.insert(key, labels);
    }

    /// Counts one object applied with warnings.
    pub fn install_plan_warning(&self) {
        self.installplan_warnings.inc();
    }

    /// Records how long one resolution took and whether it succeeded.
    pub fn resolution(&self, took: Duration, succeeded: bool) {
        let outcome = if succeeded { "succeeded" } else { "failed" };
        self.resolution_duration
            .get_or_create(&OutcomeLabels {
                outcome: outcome.to_owned(),
            })
            .observe(took.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_upstreams() {
        let mut registry = MetricsRegistry::default();
        let metrics = CatalogMetrics::register(&mut registry);
        metrics.set_counts(2, 3, 4);
        metrics.catalog_ready("olm", "community", true);
        metrics.snapshot_taken("olm", "community");
        metrics.install_plan_warning();
        metrics.resolution(Duration::from_millis(3), true);
        let labels = |installed: &str| SubscriptionLabels {
            name: "etcd".into(),
            installed: installed.into(),
            channel: "alpha".into(),
            package: "etcd".into(),
            approval: "Automatic".into(),
        };
        metrics.subscription_synced("ns", labels("etcd.v1"));
        metrics.subscription_synced("ns", labels("etcd.v2"));
        metrics
            .install_plan_reconciles
            .start()
            .failed("kube_conflict");
        let text = registry.encode().unwrap();
        for line in [
            "catalog_source_count 2",
            "subscription_count 3",
            "install_plan_count 4",
            "catalogsource_ready{namespace=\"olm\",name=\"community\"} 1",
            "catalog_source_snapshots_total{namespace=\"olm\",name=\"community\"} 1",
            "installplan_warnings_total 1",
            "olm_resolution_duration_seconds_count{outcome=\"succeeded\"} 1",
            "subscription_sync_total{name=\"etcd\",installed=\"etcd.v2\",channel=\"alpha\",package=\"etcd\",approval=\"Automatic\"} 1",
            "catalog_operator_reconcile_runs_total{controller=\"installplan\"} 1",
            "catalog_operator_reconcile_failures_total{controller=\"installplan\",category=\"kube_conflict\"} 1",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
        assert!(
            !text.contains("installed=\"etcd.v1\""),
            "the old series is deleted:\n{text}"
        );
    }
}
