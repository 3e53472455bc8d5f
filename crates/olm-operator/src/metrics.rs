//! olm-operator's metrics: upstream OLM's CSV metrics under their exact,
//! unprefixed names (`csv_count`, `csv_succeeded`, `csv_abnormal`,
//! `csv_upgrade_count`), plus reconcile runs, failures and durations per
//! controller under the `olm_operator_` prefix.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex, PoisonError},
};

use olm_api::csv::ClusterServiceVersion;
use olm_runtime::metrics::ExactNameCounter;
use olm_runtime::metrics::{ControllerMetrics, MetricsRegistry, ReconcileMetrics};
use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge},
};

use crate::decide::csv_status;

/// Labels of `csv_succeeded`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CsvLabels {
    namespace: String,
    name: String,
    version: String,
}

/// Labels of `csv_abnormal`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AbnormalLabels {
    namespace: String,
    name: String,
    version: String,
    phase: String,
    reason: String,
}

/// Labels of upstream's `controller_reconcile_*` counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ObjectLabels {
    namespace: String,
    name: String,
}

/// Upstream's per-object reconcile counters (`controller_reconcile_<what>`,
/// labels `namespace` and `name`), under their exact names.
#[derive(Clone, Debug, Default)]
pub(crate) struct ObjectReconciles(Family<ObjectLabels, ExactNameCounter>);

impl ObjectReconciles {
    /// Counts one reconcile of `namespace/name` (`namespace` empty for a
    /// cluster-scoped object).
    pub(crate) fn inc(&self, namespace: &str, name: &str) {
        self.0
            .get_or_create(&ObjectLabels {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            })
            .inc();
    }
}

/// CSVs remembered as already counted in `csv_upgrade_count`.
pub const MAX_REMEMBERED_UPGRADES: usize = 10_000;

/// Every metric olm-operator exports.
#[derive(Clone, Debug)]
pub struct OperatorMetrics {
    csv_count: Gauge,
    csv_succeeded: Family<CsvLabels, Gauge>,
    csv_abnormal: Family<AbnormalLabels, Gauge>,
    csv_upgrade_count: ExactNameCounter,
    /// `controller_reconcile_operator`: Operator objects reconciled.
    pub(crate) reconcile_operator: ObjectReconciles,
    /// `controller_reconcile_adoption_csv`: CSVs through adoption.
    pub(crate) reconcile_adoption_csv: ObjectReconciles,
    /// `controller_reconcile_adoption_subscription`: Subscriptions through
    /// adoption.
    pub(crate) reconcile_adoption_subscription: ObjectReconciles,
    /// `controller_reconcile_operator_condition`: OperatorConditions
    /// reconciled.
    pub(crate) reconcile_operator_condition: ObjectReconciles,
    /// `controller_reconcile_operator_condition_generator`: CSVs whose
    /// OperatorCondition was generated.
    pub(crate) reconcile_operator_condition_generator: ObjectReconciles,
    /// The CSVs (by uid) already counted in `csv_upgrade_count`: a reconcile
    /// working from a cache that has not yet seen its own Replacing status
    /// decides the move again, and must not count it twice.
    upgraded: Arc<Mutex<HashSet<String>>>,
    /// The `csv_abnormal` series last set per CSV, so that a change of phase
    /// or reason deletes the old series as upstream does.
    abnormal_series: Arc<Mutex<HashMap<(String, String), AbnormalLabels>>>,
    /// Reconciles of ClusterServiceVersions.
    pub csv_reconciles: ControllerMetrics,
    /// Reconciles of OperatorGroups.
    pub(crate) operator_group_reconciles: ControllerMetrics,
    /// Reconciles of a CSV's copies and target-namespace RBAC.
    pub(crate) target_reconciles: ControllerMetrics,
    /// Reconciles of OperatorConditions.
    pub(crate) operator_condition_reconciles: ControllerMetrics,
    /// Reconciles of Operator objects.
    pub(crate) operator_reconciles: ControllerMetrics,
    /// Reconciles of the OLMConfig's condition.
    pub(crate) olm_config_reconciles: ControllerMetrics,
    /// Copied CSVs written (created or updated).
    copied_csv_writes: Counter,
    /// Requests to the API server that change something, by HTTP method.
    api_writes: Family<VerbLabels, Counter>,
}

/// Labels of `olm_operator_api_writes_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerbLabels {
    verb: String,
}

/// Counts the API requests of a client that change something (every method
/// but GET, HEAD and OPTIONS), by method; see
/// [`OperatorMetrics::api_write_counter`].
#[derive(Clone, Debug)]
pub struct ApiWriteCounter(Family<VerbLabels, Counter>);

impl ApiWriteCounter {
    /// Counts one request with this HTTP method, if it writes.
    pub fn observe(&self, method: &str) {
        if !matches!(method, "GET" | "HEAD" | "OPTIONS") {
            self.0
                .get_or_create(&VerbLabels {
                    verb: method.to_owned(),
                })
                .inc();
        }
    }
}

impl OperatorMetrics {
    /// Registers olm-operator's metrics in `registry`.
    pub fn register(registry: &mut MetricsRegistry) -> Self {
        let reconciles = ReconcileMetrics::register(registry.component("olm_operator"));
        let metrics = Self {
            csv_count: Gauge::default(),
            csv_succeeded: Family::default(),
            csv_abnormal: Family::default(),
            csv_upgrade_count: ExactNameCounter::default(),
            reconcile_operator: ObjectReconciles::default(),
            reconcile_adoption_csv: ObjectReconciles::default(),
            reconcile_adoption_subscription: ObjectReconciles::default(),
            reconcile_operator_condition: ObjectReconciles::default(),
            reconcile_operator_condition_generator: ObjectReconciles::default(),
            upgraded: Arc::default(),
            abnormal_series: Arc::default(),
            csv_reconciles: reconciles.controller("clusterserviceversion"),
            operator_group_reconciles: reconciles.controller("operatorgroup"),
            target_reconciles: reconciles.controller("copiedcsv"),
            operator_condition_reconciles: reconciles.controller("operatorcondition"),
            operator_reconciles: reconciles.controller("operator"),
            olm_config_reconciles: reconciles.controller("olmconfig"),
            copied_csv_writes: Counter::default(),
            api_writes: Family::default(),
        };
        let own = registry.component("olm_operator");
        own.register(
            "copied_csv_writes",
            "Copied CSVs created or updated",
            metrics.copied_csv_writes.clone(),
        );
        own.register(
            "api_writes",
            "Requests to the API server that change something, by HTTP method",
            metrics.api_writes.clone(),
        );
        let upstream = registry.upstream();
        upstream.register(
            "csv_count",
            "Number of CSVs successfully registered",
            metrics.csv_count.clone(),
        );
        upstream.register(
            "csv_succeeded",
            "Successful CSV install",
            metrics.csv_succeeded.clone(),
        );
        upstream.register(
            "csv_abnormal",
            "CSV is not installed",
            metrics.csv_abnormal.clone(),
        );
        upstream.register(
            "csv_upgrade_count",
            "Monotonic count of CSV upgrades",
            metrics.csv_upgrade_count.clone(),
        );
        for (name, help, family) in [
            (
                "controller_reconcile_operator",
                "Total number of reconciliations occurred in the Operator controller",
                &metrics.reconcile_operator,
            ),
            (
                "controller_reconcile_adoption_csv",
                "Total number of CSV reconciliations occurred in the adoption controller",
                &metrics.reconcile_adoption_csv,
            ),
            (
                "controller_reconcile_adoption_subscription",
                "Total number of Subscription reconciliations occurred in the adoption controller",
                &metrics.reconcile_adoption_subscription,
            ),
            (
                "controller_reconcile_operator_condition",
                "Total number of reconciliations occurred in the OperatorCondition controller",
                &metrics.reconcile_operator_condition,
            ),
            (
                "controller_reconcile_operator_condition_generator",
                "Total number of reconciliations occurred in the OperatorCondition generator",
                &metrics.reconcile_operator_condition_generator,
            ),
        ] {
            upstream.register(name, help, family.0.clone());
        }
        metrics
    }

    /// Sets `csv_count` to the number of (non-copied) CSVs.
    pub(crate) fn set_csv_count(&self, count: usize) {
        self.csv_count.set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// Counts one copied CSV written.
    pub(crate) fn count_copy_write(&self) {
        self.copied_csv_writes.inc();
    }

    /// The counter of API writes, for the client's request layer.
    pub fn api_write_counter(&self) -> ApiWriteCounter {
        ApiWriteCounter(self.api_writes.clone())
    }

    /// Counts one upgrade (a CSV moving to Replacing), once per CSV (`uid`).
    pub(crate) fn count_upgrade(&self, uid: &str) {
        let mut upgraded = self.upgraded.lock().unwrap_or_else(PoisonError::into_inner);
        // Replaced CSVs are deleted soon after; the set only needs to
        // outlive the cache lag, so it is simply emptied when it grows large.
        if upgraded.len() >= MAX_REMEMBERED_UPGRADES {
            upgraded.clear();
        }
        if upgraded.insert(uid.to_owned()) {
            self.csv_upgrade_count.inc();
        }
    }

    /// Records the phase of `csv` as `status` says: `csv_succeeded` 1 or 0,
    /// and `csv_abnormal` 1 while not Succeeded (the previous series of the
    /// CSV deleted when phase or reason changed).
    pub fn observe_csv(
        &self,
        csv: &ClusterServiceVersion,
        status: &olm_api::csv::ClusterServiceVersionStatus,
    ) {
        let namespace = csv.metadata.namespace.clone().unwrap_or_default();
        let name = csv.metadata.name.clone().unwrap_or_default();
        let version = csv
            .spec
            .version
            .as_ref()
            .map(|v| v.0.clone())
            .unwrap_or_default();
        let phase = csv_status::phase_of(status);
        let succeeded = phase == olm_api::csv::CsvPhase::SUCCEEDED;
        self.csv_succeeded
            .get_or_create(&CsvLabels {
                namespace: namespace.clone(),
                name: name.clone(),
                version: version.clone(),
            })
            .set(i64::from(succeeded));

        let mut series = self
            .abnormal_series
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let key = (namespace.clone(), name.clone());
        if let Some(previous) = series.remove(&key) {
            self.csv_abnormal.remove(&previous);
        }
        if !succeeded {
            let labels = AbnormalLabels {
                namespace,
                name,
                version,
                phase: phase.to_string(),
                reason: csv_status::reason_of(status).to_string(),
            };
            self.csv_abnormal.get_or_create(&labels).set(1);
            series.insert(key, labels);
        }
    }

    /// Drops every series of a CSV that is gone.
    pub(crate) fn forget_csv(&self, csv: &ClusterServiceVersion) {
        let namespace = csv.metadata.namespace.clone().unwrap_or_default();
        let name = csv.metadata.name.clone().unwrap_or_default();
        let version = csv
            .spec
            .version
            .as_ref()
            .map(|v| v.0.clone())
            .unwrap_or_default();
        self.csv_succeeded.remove(&CsvLabels {
            namespace: namespace.clone(),
            name: name.clone(),
            version,
        });
        let mut series = self
            .abnormal_series
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(previous) = series.remove(&(namespace, name)) {
            self.csv_abnormal.remove(&previous);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_types_and_labels_are_upstreams() {
        let mut registry = MetricsRegistry::default();
        let metrics = OperatorMetrics::register(&mut registry);
        let csv: ClusterServiceVersion = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": "etcd.v1", "namespace": "ns"},
            "spec": {"displayName": "etcd", "version": "1.0.0", "install": {"strategy": "deployment"}},
        }))
        .unwrap();
        let failed: olm_api::csv::ClusterServiceVersionStatus = serde_json::from_value(
            serde_json::json!({"phase": "Failed", "reason": "InstallCheckFailed"}),
        )
        .unwrap();
        metrics.set_csv_count(3);
        metrics.observe_csv(&csv, &failed);
        metrics.count_upgrade("uid");
        metrics.reconcile_operator.inc("", "etcd.ns");
        metrics.reconcile_adoption_csv.inc("ns", "etcd.v1");
        metrics.reconcile_adoption_subscription.inc("ns", "etcd");
        metrics.reconcile_operator_condition.inc("ns", "etcd.v1");
        metrics
            .reconcile_operator_condition_generator
            .inc("ns", "etcd.v1");
        let text = registry.encode().unwrap();
        // (name as Prometheus stores it, TYPE line, a sample line)
        let named = |name: &str, labels: &str| format!("{name}{{{labels}}} 1");
        for (type_line, sample) in [
            ("# TYPE csv_count gauge", "csv_count 3".to_owned()),
            (
                "# TYPE csv_succeeded gauge",
                "csv_succeeded{namespace=\"ns\",name=\"etcd.v1\",version=\"1.0.0\"} 0".to_owned(),
            ),
            (
                "# TYPE csv_abnormal gauge",
                "csv_abnormal{namespace=\"ns\",name=\"etcd.v1\",version=\"1.0.0\",phase=\"Failed\",reason=\"InstallCheckFailed\"} 1".to_owned(),
            ),
            ("# TYPE csv_upgrade_count unknown", "csv_upgrade_count 1".to_owned()),
            (
                "# TYPE controller_reconcile_operator unknown",
                named("controller_reconcile_operator", "namespace=\"\",name=\"etcd.ns\""),
            ),
            (
                "# TYPE controller_reconcile_adoption_csv unknown",
                named("controller_reconcile_adoption_csv", "namespace=\"ns\",name=\"etcd.v1\""),
            ),
            (
                "# TYPE controller_reconcile_adoption_subscription unknown",
                named("controller_reconcile_adoption_subscription", "namespace=\"ns\",name=\"etcd\""),
            ),
            (
                "# TYPE controller_reconcile_operator_condition unknown",
                named("controller_reconcile_operator_condition", "namespace=\"ns\",name=\"etcd.v1\""),
            ),
            (
                "# TYPE controller_reconcile_operator_condition_generator unknown",
                named(
                    "controller_reconcile_operator_condition_generator",
                    "namespace=\"ns\",name=\"etcd.v1\"",
                ),
            ),
        ] {
            assert!(text.contains(type_line), "missing {type_line:?} in\n{text}");
            assert!(
                text.lines().any(|l| l == sample),
                "missing {sample:?} in\n{text}"
            );
        }
    }

    #[test]
    fn an_upgrade_decided_twice_is_counted_once() {
        let mut registry = MetricsRegistry::default();
        let metrics = OperatorMetrics::register(&mut registry);
        metrics.count_upgrade("uid-widget-v1");
        // The cache had not yet seen the Replacing status: decided again.
        metrics.count_upgrade("uid-widget-v1");
        assert_eq!(metrics.csv_upgrade_count.get(), 1);
        metrics.count_upgrade("uid-widget-v2");
        assert_eq!(metrics.csv_upgrade_count.get(), 2);
    }

    #[test]
    fn the_memory_of_counted_upgrades_is_bounded() {
        let mut registry = MetricsRegistry::default();
        let metrics = OperatorMetrics::register(&mut registry);
        for n in 0..MAX_REMEMBERED_UPGRADES {
            metrics.count_upgrade(&format!("uid-{n}"));
        }
        let remembered = || metrics.upgraded.lock().map(|s| s.len()).unwrap_or_default();
        assert_eq!(remembered(), MAX_REMEMBERED_UPGRADES);
        // Full: forgotten, so the set never outgrows the limit.
        metrics.count_upgrade("uid-one-more");
        assert_eq!(remembered(), 1);
        assert_eq!(
            metrics.csv_upgrade_count.get(),
            MAX_REMEMBERED_UPGRADES as u64 + 1
        );
    }
}
