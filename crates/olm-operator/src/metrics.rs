//! olm-operator's metrics: upstream OLM's CSV metrics under their exact,
//! unprefixed names (`csv_count`, `csv_succeeded`, `csv_abnormal`,
//! `csv_upgrade_count`), plus reconcile runs, failures and durations per
//! controller under the `olm_operator_` prefix.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex, PoisonError},
};

use olm_api::csv::ClusterServiceVersion;
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

/// CSVs remembered as already counted in `csv_upgrade_count`.
pub const MAX_REMEMBERED_UPGRADES: usize = 10_000;

/// Every metric olm-operator exports.
#[derive(Clone, Debug)]
pub struct OperatorMetrics {
    csv_count: Gauge,
    csv_succeeded: Family<CsvLabels, Gauge>,
    csv_abnormal: Family<AbnormalLabels, Gauge>,
    csv_upgrade_count: Counter,
    /// The CSVs (by uid) already counted in `csv_upgrade_count`: a reconcile
    /// working from a cache that has not yet seen its own Replacing status
    /// decides the move again, and must not count it twice.
    upgraded: Arc<Mutex<HashSet<String>>>,
    /// The `csv_abnormal` series last set per CSV, so that a change of phase
    /// or reason deletes the old series as upstream does.
    abnormal_series: Arc<Mutex<HashMap<(String, String), AbnormalLabels>>>,
    /// Reconciles of ClusterServiceVersions.
    pub(crate) csv_reconciles: ControllerMetrics,
    /// Reconciles of OperatorGroups.
    pub(crate) operator_group_reconciles: ControllerMetrics,
    /// Reconciles of a CSV's copies and target-namespace RBAC.
    pub(crate) target_reconciles: ControllerMetrics,
    /// Reconciles of OperatorConditions.
    pub(crate) operator_condition_reconciles: ControllerMetrics,
    /// Reconciles of Operator objects.
    pub(crate) operator_reconciles: ControllerMetrics,
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
            csv_upgrade_count: Counter::default(),
            upgraded: Arc::default(),
            abnormal_series: Arc::default(),
            csv_reconciles: reconciles.controller("clusterserviceversion"),
            operator_group_reconciles: reconciles.controller("operatorgroup"),
            target_reconciles: reconciles.controller("copiedcsv"),
            operator_condition_reconciles: reconciles.controller("operatorcondition"),
            operator_reconciles: reconciles.controller("operator"),
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
    pub(crate) fn observe_csv(
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
