//! samples-operator's metrics: upstream cluster-samples-operator's six under
//! their exact, unprefixed names (its alerts in
//! `manifests/010-prometheus-rules.yaml` query them), and ours under the
//! `samples_operator_` prefix.
//!
//! Upstream's (`pkg/metrics/metrics.go`), with upstream's HELP text:
//!
//! - `openshift_samples_failed_imagestream_import_info{name}` (gauge): 1 for
//!   each inventory stream whose import failed, 0 for the others;
//! - `openshift_samples_invalidsecret_info{reason}` (gauge): `missing_secret`
//!   and `missing_tbr_credential`;
//! - `openshift_samples_degraded_info`, `openshift_samples_invalidconfig_info`,
//!   `openshift_samples_tbr_inaccessible_info` (gauges);
//! - `openshift_samples_retry_imagestream_import_total{imagestreamname}`
//!   (counter): registered as `openshift_samples_retry_imagestream_import`,
//!   since the OpenMetrics encoder names a counter's sample `<family>_total`,
//!   which gives upstream's series name while keeping the counter type.
//!
//! Upstream computes the per-stream and secret gauges on each scrape and
//! emits none of them while the Config is missing, Removed or Unmanaged;
//! here the controller hands a [`MetricsSnapshot`] to
//! [`SamplesMetrics::observe`], which empties those families when it is not
//! reporting (their `# HELP` and `# TYPE` lines stay, with no sample).
//!
//! Ours: the reconcile metrics every controller has (`controller="config"`)
//! and `samples_operator_sample_writes_total{kind,action,outcome}`.

use olm_runtime::metrics::{ControllerMetrics, MetricsRegistry, ReconcileMetrics};
use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::Registry,
};

/// The prefix of every metric of ours.
pub const PREFIX: &str = "samples_operator";

/// `reason` of the invalid-secret gauge when `ImportCredentialsExist` is not
/// True.
pub const MISSING_SECRET: &str = "missing_secret";

/// `reason` of the invalid-secret gauge when the pull secret has no
/// credentials for `registry.redhat.io`.
pub const MISSING_TBR_CREDENTIAL: &str = "missing_tbr_credential";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StreamLabels {
    name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SecretLabels {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RetryLabels {
    imagestreamname: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WriteLabels {
    kind: String,
    action: String,
    outcome: String,
}

/// What the upstream gauges show, as the controller last saw it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetricsSnapshot {
    /// Whether the per-stream and secret gauges are reported: false when the
    /// Config is missing, Removed or Unmanaged (upstream's collector then
    /// emits nothing for them).
    pub reporting: bool,
    /// The ClusterOperator reports `Degraded` True.
    pub degraded: bool,
    /// The Config's `ConfigurationValid` is not True.
    pub invalid_config: bool,
    /// The operator bootstrapped as Removed because `registry.redhat.io` was
    /// unreachable.
    pub registry_unreachable_at_bootstrap: bool,
    /// Every inventory stream, and whether its import is failing (a skipped
    /// stream is never failing).
    pub streams: Vec<(String, bool)>,
    /// `ImportCredentialsExist` is not True.
    pub missing_secret: bool,
    /// No `samplesRegistry` is set and the pull secret has no credentials for
    /// `registry.redhat.io` (or cannot be read).
    pub missing_registry_credential: bool,
}

/// The metric handles; cheap to clone.
#[derive(Clone, Debug)]
pub struct SamplesMetrics {
    /// Runs, failures by category and duration of the Config reconcile.
    pub reconcile: ControllerMetrics,
    failed_imports: Family<StreamLabels, Gauge>,
    invalid_secret: Family<SecretLabels, Gauge>,
    degraded: Gauge,
    invalid_config: Gauge,
    tbr_inaccessible: Gauge,
    import_retries: Family<RetryLabels, Counter>,
    writes: Family<WriteLabels, Counter>,
}

impl SamplesMetrics {
    /// Registers the metrics in `registry`: ours under [`PREFIX`], upstream's
    /// at the root.
    pub fn register(registry: &mut MetricsRegistry) -> Self {
        let own = registry.component(PREFIX);
        let metrics = Self {
            reconcile: ReconcileMetrics::register(own).controller("config"),
            failed_imports: Family::default(),
            invalid_secret: Family::default(),
            degraded: Gauge::default(),
            invalid_config: Gauge::default(),
            tbr_inaccessible: Gauge::default(),
            import_retries: Family::default(),
            writes: Family::default(),
        };
        own.register(
            "sample_writes",
            "Writes of samples and of the operator's ConfigMaps, by kind (ImageStream, Template, ConfigMap), action (create, update, delete) and outcome",
            metrics.writes.clone(),
        );
        let upstream = registry.upstream();
        register_upstream(
            upstream,
            "openshift_samples_failed_imagestream_import_info",
            "Indicates by name whether a samples imagestream import has failed or not (1 == failure, 0 == succes).",
            metrics.failed_imports.clone(),
        );
        register_upstream(
            upstream,
            "openshift_samples_invalidsecret_info",
            "Indicates if the install pull secret is valid for pulling images from registry.redhat.io.  If invalid, the reason supplied either points to it being inaccessible, or if it is missing credentials for registry.redhat.io when they should exist (1 == not functional, 0 == functional).",
            metrics.invalid_secret.clone(),
        );
        register_upstream(
            upstream,
            "openshift_samples_degraded_info",
            "Indicates if the samples operator is degraded.",
            metrics.degraded.clone(),
        );
        register_upstream(
            upstream,
            "openshift_samples_invalidconfig_info",
            "Indicates the configuration for the samples operator has an invalid configuration setting.",
            metrics.invalid_config.clone(),
        );
        register_upstream(
            upstream,
            "openshift_samples_tbr_inaccessible_info",
            "Indicates that during its initial installation the samples operator could not access registry.redhat.io and it bootstrapped as removed.",
            metrics.tbr_inaccessible.clone(),
        );
        register_upstream(
            upstream,
            "openshift_samples_retry_imagestream_import",
            "Indicates the number of retries on imagestream import.",
            metrics.import_retries.clone(),
        );
        metrics
    }

    /// Sets upstream's gauges from `snapshot`. The per-stream and secret
    /// families are replaced, so streams that left the inventory disappear,
    /// and are left empty when not `reporting`.
    pub fn observe(&self, snapshot: &MetricsSnapshot) {
        self.degraded.set(i64::from(snapshot.degraded));
        self.invalid_config.set(i64::from(snapshot.invalid_config));
        self.tbr_inaccessible
            .set(i64::from(snapshot.registry_unreachable_at_bootstrap));
        self.failed_imports.clear();
        self.invalid_secret.clear();
        if !snapshot.reporting {
            return;
        }
        for (name, failing) in &snapshot.streams {
            self.failed_imports
                .get_or_create(&StreamLabels { name: name.clone() })
                .set(i64::from(*failing));
        }
        for (reason, missing) in [
            (MISSING_SECRET, snapshot.missing_secret),
            (MISSING_TBR_CREDENTIAL, snapshot.missing_registry_credential),
        ] {
            self.invalid_secret
                .get_or_create(&SecretLabels {
                    reason: reason.to_owned(),
                })
                .set(i64::from(missing));
        }
    }

    /// Counts one `ImageStreamImport` created to retry `stream`'s imports.
    pub fn retried_import(&self, stream: &str) {
        self.import_retries
            .get_or_create(&RetryLabels {
                imagestreamname: stream.to_owned(),
            })
            .inc();
    }

    /// Counts one write of a `kind` (`ImageStream`, `Template`, `ConfigMap`)
    /// by `verb` (`create`, `update`, `delete`).
    pub fn wrote(&self, kind: &str, verb: &str, succeeded: bool) {
        self.writes
            .get_or_create(&WriteLabels {
                kind: kind.to_owned(),
                action: verb.to_owned(),
                outcome: if succeeded { "succeeded" } else { "failed" }.to_owned(),
            })
            .inc();
    }

    /// Writes of `kind` by `verb` with `outcome` (`succeeded`, `failed`) so
    /// far (for tests and reports).
    pub fn write_count(&self, kind: &str, verb: &str, outcome: &str) -> u64 {
        self.writes
            .get_or_create(&WriteLabels {
                kind: kind.to_owned(),
                action: verb.to_owned(),
                outcome: outcome.to_owned(),
            })
            .get()
    }
}

/// Registers one of upstream's metrics under its exact name and HELP text.
/// The encoder appends a period to every HELP text; upstream's already end
/// with one, so it is taken off here.
fn register_upstream(
    registry: &mut Registry,
    name: &str,
    help: &str,
    metric: impl prometheus_client::registry::Metric,
) {
    registry.register(name, help.strip_suffix('.').unwrap_or(help), metric);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn snapshot() -> MetricsSnapshot {
        MetricsSnapshot {
            reporting: true,
            degraded: true,
            invalid_config: false,
            registry_unreachable_at_bootstrap: true,
            streams: vec![
                ("fixture-ruby".to_owned(), true),
                ("fixture-java".to_owned(), false),
            ],
            missing_secret: false,
            missing_registry_credential: true,
        }
    }

    #[test]
    fn upstream_metrics_keep_their_exact_names_help_and_types() {
        let mut registry = MetricsRegistry::default();
        let metrics = SamplesMetrics::register(&mut registry);
        metrics.observe(&snapshot());
        metrics.retried_import("fixture-ruby");
        metrics.retried_import("fixture-ruby");
        let text = registry.encode().unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for expected in [
            "# HELP openshift_samples_failed_imagestream_import_info Indicates by name whether a samples imagestream import has failed or not (1 == failure, 0 == succes).",
            "# TYPE openshift_samples_failed_imagestream_import_info gauge",
            "openshift_samples_failed_imagestream_import_info{name=\"fixture-ruby\"} 1",
            "openshift_samples_failed_imagestream_import_info{name=\"fixture-java\"} 0",
            "# HELP openshift_samples_invalidsecret_info Indicates if the install pull secret is valid for pulling images from registry.redhat.io.  If invalid, the reason supplied either points to it being inaccessible, or if it is missing credentials for registry.redhat.io when they should exist (1 == not functional, 0 == functional).",
            "# TYPE openshift_samples_invalidsecret_info gauge",
            "openshift_samples_invalidsecret_info{reason=\"missing_secret\"} 0",
            "openshift_samples_invalidsecret_info{reason=\"missing_tbr_credential\"} 1",
            "# HELP openshift_samples_degraded_info Indicates if the samples operator is degraded.",
            "# TYPE openshift_samples_degraded_info gauge",
            "openshift_samples_degraded_info 1",
            "# HELP openshift_samples_invalidconfig_info Indicates the configuration for the samples operator has an invalid configuration setting.",
            "# TYPE openshift_samples_invalidconfig_info gauge",
            "openshift_samples_invalidconfig_info 0",
            "# HELP openshift_samples_tbr_inaccessible_info Indicates that during its initial installation the samples operator could not access registry.redhat.io and it bootstrapped as removed.",
            "# TYPE openshift_samples_tbr_inaccessible_info gauge",
            "openshift_samples_tbr_inaccessible_info 1",
            "# HELP openshift_samples_retry_imagestream_import Indicates the number of retries on imagestream import.",
            "# TYPE openshift_samples_retry_imagestream_import counter",
            "openshift_samples_retry_imagestream_import_total{imagestreamname=\"fixture-ruby\"} 2",
        ] {
            assert!(lines.contains(&expected), "missing {expected:?} in\n{text}");
        }
        assert!(!text.contains("samples_operator_openshift"), "{text}");
    }

    #[test]
    fn not_reporting_drops_the_per_stream_and_secret_gauges() {
        let mut registry = MetricsRegistry::default();
        let metrics = SamplesMetrics::register(&mut registry);
        metrics.observe(&snapshot());
        metrics.observe(&MetricsSnapshot {
            reporting: false,
            ..snapshot()
        });
        let text = registry.encode().unwrap();
        let samples: Vec<&str> = text.lines().filter(|line| !line.starts_with('#')).collect();
        assert!(
            !samples.iter().any(|line| line
                .starts_with("openshift_samples_failed_imagestream_import_info")
                || line.starts_with("openshift_samples_invalidsecret_info")),
            "{text}"
        );
        assert!(
            samples.contains(&"openshift_samples_degraded_info 1"),
            "{text}"
        );

        // A stream that left the inventory disappears.
        metrics.observe(&MetricsSnapshot {
            streams: vec![("fixture-java".to_owned(), false)],
            ..snapshot()
        });
        let text = registry.encode().unwrap();
        assert!(!text.contains("fixture-ruby"), "{text}");
        assert!(
            text.contains(
                "openshift_samples_failed_imagestream_import_info{name=\"fixture-java\"} 0"
            )
        );
    }

    #[test]
    fn our_metrics_are_named_under_the_prefix() {
        let mut registry = MetricsRegistry::default();
        let metrics = SamplesMetrics::register(&mut registry);
        metrics.wrote("ImageStream", "create", true);
        metrics.wrote("ConfigMap", "delete", false);
        drop(metrics.reconcile.start());
        let text = registry.encode().unwrap();
        assert!(text.contains(
            "samples_operator_sample_writes_total{kind=\"ImageStream\",action=\"create\",outcome=\"succeeded\"} 1"
        ), "{text}");
        assert_eq!(metrics.write_count("ConfigMap", "delete", "failed"), 1);
        assert!(text.contains("samples_operator_reconcile_runs_total{controller=\"config\"} 1"));
    }
}
