//! bundle-unpacker's metrics, under the `bundle_unpacker_` prefix: unpacks
//! by outcome and reason, their duration, retries of recorded failures, and
//! work taken up by where it came from (the bus work queue or the watch).

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{
        counter::Counter,
        family::Family,
        histogram::{Histogram, exponential_buckets},
    },
    registry::Unit,
};

/// The prefix of every metric of this service.
pub const PREFIX: &str = "bundle_unpacker";

/// Outcome: the content was stored.
pub const SUCCEEDED: &str = "succeeded";
/// Outcome: a failure was recorded.
pub const FAILED: &str = "failed";
/// Outcome: another replica stored the image first (work done twice).
pub const DUPLICATE: &str = "duplicate";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UnpackLabels {
    outcome: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabels {
    source: String,
}

/// The metric handles; cheap to clone.
#[derive(Clone, Debug)]
pub struct UnpackMetrics {
    unpacks: Family<UnpackLabels, Counter>,
    duration: Family<OutcomeLabels, Histogram>,
    retries: Counter,
    work: Family<SourceLabels, Counter>,
    refused: Counter,
    /// The InstallPlan watch's reconciles
    /// (`bundle_unpacker_reconcile_*{controller="installplan"}`).
    pub(crate) watch_reconciles: olm_runtime::metrics::ControllerMetrics,
}

impl UnpackMetrics {
    /// Registers `bundle_unpacker_unpacks_total{outcome,reason}`,
    /// `bundle_unpacker_unpack_duration_seconds{outcome}`,
    /// `bundle_unpacker_retries_total`, `bundle_unpacker_work_total{source}`
    /// and `bundle_unpacker_requests_refused_total`, and the reconcile
    /// metrics of the InstallPlan watch.
    pub fn register(registry: &mut olm_runtime::metrics::MetricsRegistry) -> Self {
        let registry = registry.component(PREFIX);
        let reconciles = olm_runtime::metrics::ReconcileMetrics::register(registry);
        let metrics = Self {
            unpacks: Family::default(),
            // 50 ms to about 14 minutes: past the default deadline.
            duration: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.05, 2.0, 15))
            }),
            retries: Counter::default(),
            work: Family::default(),
            refused: Counter::default(),
            watch_reconciles: reconciles.controller("installplan"),
        };
        registry.register(
            "unpacks",
            "Bundle unpacks finished, by outcome and failure reason",
            metrics.unpacks.clone(),
        );
        registry.register_with_unit(
            "unpack_duration",
            "Time from the start of a pull to the stored result",
            Unit::Seconds,
            metrics.duration.clone(),
        );
        registry.register(
            "retries",
            "Recorded failures cleared to unpack again",
            metrics.retries.clone(),
        );
        registry.register(
            "work",
            "Unpack work taken up, by where it came from (queue or watch)",
            metrics.work.clone(),
        );
        registry.register(
            "requests_refused",
            "Work requests from the bus that no InstallPlan backs (forged or stale), dropped unread",
            metrics.refused.clone(),
        );
        metrics
    }

    /// Records a bus request dropped because no InstallPlan backs it.
    pub fn refused(&self) {
        self.refused.inc();
    }

    /// Bus requests refused so far.
    pub fn refused_count(&self) -> u64 {
        self.refused.get()
    }

    /// Records a finished unpack.
    pub fn unpacked(&self, outcome: &str, reason: &str, seconds: f64) {
        self.unpacks
            .get_or_create(&UnpackLabels {
                outcome: outcome.to_owned(),
                reason: reason.to_owned(),
            })
            .inc();
        self.duration
            .get_or_create(&OutcomeLabels {
                outcome: outcome.to_owned(),
            })
            .observe(seconds);
    }

    /// Records a retry.
    pub fn retried(&self) {
        self.retries.inc();
    }

    /// Records work taken up from `source` (`queue` or `watch`).
    pub fn work(&self, source: &str) {
        self.work
            .get_or_create(&SourceLabels {
                source: source.to_owned(),
            })
            .inc();
    }

    /// Unpacks finished with `outcome`, any reason (for tests and reports).
    pub fn count(&self, outcome: &str) -> u64 {
        // Families cannot be listed; the reasons are a known, small set.
        [
            "",
            crate::decide::failure::IMAGE_PULL_FAILED,
            crate::decide::failure::UNAUTHORIZED,
            crate::decide::failure::INVALID_BUNDLE,
            crate::decide::failure::TOO_LARGE,
            crate::decide::failure::DEADLINE_EXCEEDED,
            crate::decide::failure::INVALID_IMAGE_REFERENCE,
            crate::decide::failure::REGISTRY_NOT_ALLOWED,
        ]
        .iter()
        .map(|reason| {
            self.unpacks
                .get_or_create(&UnpackLabels {
                    outcome: outcome.to_owned(),
                    reason: (*reason).to_owned(),
                })
                .get()
        })
        .sum()
    }

    /// Retries so far.
    pub fn retry_count(&self) -> u64 {
        self.retries.get()
    }

    /// Work taken up from `source` so far.
    pub fn work_count(&self, source: &str) -> u64 {
        self.work
            .get_or_create(&SourceLabels {
                source: source.to_owned(),
            })
            .get()
    }
}
