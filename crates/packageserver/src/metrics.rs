//! packageserver's metrics: certificate expiry (so an alert fires long before
//! anything expires), catalog freshness, and API requests.

use std::time::{Duration, SystemTime};

use olm_runtime::metrics::MetricsRegistry;
use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{
        counter::Counter,
        family::Family,
        gauge::Gauge,
        histogram::{Histogram, exponential_buckets},
    },
};

/// Labels of request metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    verb: String,
    code: String,
}

/// Labels of per-catalog metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CatalogLabels {
    /// Namespace of the CatalogSource.
    pub namespace: String,
    /// Name of the CatalogSource.
    pub name: String,
}

/// Labels of rotation counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RotationLabels {
    action: String,
}

/// API request metrics.
#[derive(Clone, Debug)]
pub struct ApiMetrics {
    requests: Family<RequestLabels, Counter>,
    duration: Family<RequestLabels, Histogram, fn() -> Histogram>,
}

fn request_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 14))
}

impl ApiMetrics {
    /// Records one answered request.
    pub fn observe(&self, verb: &str, code: u16, elapsed: Duration) {
        let labels = RequestLabels {
            verb: verb.to_owned(),
            code: code.to_string(),
        };
        self.requests.get_or_create(&labels).inc();
        self.duration
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
    }
}

/// Certificate metrics.
#[derive(Clone, Debug, Default)]
pub struct CertMetrics {
    /// Expiry of the served certificate, Unix seconds.
    pub serving_expiry: Gauge<f64, std::sync::atomic::AtomicU64>,
    /// Expiry of the newest CA of the published bundle, Unix seconds.
    pub ca_expiry: Gauge<f64, std::sync::atomic::AtomicU64>,
    rotations: Family<RotationLabels, Counter>,
}

impl CertMetrics {
    /// Counts one step carried out (`bootstrap`, `renew-serving`,
    /// `rotate-ca`, `retire-ca`).
    pub fn rotated(&self, action: &str) {
        self.rotations
            .get_or_create(&RotationLabels {
                action: action.to_owned(),
            })
            .inc();
    }

    /// Records the expiries of the served material.
    pub fn set_expiry(&self, serving: Option<SystemTime>, ca: Option<SystemTime>) {
        let seconds = |t: SystemTime| {
            t.duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64())
        };
        if let Some(t) = serving {
            self.serving_expiry.set(seconds(t));
        }
        if let Some(t) = ca {
            self.ca_expiry.set(seconds(t));
        }
    }
}

/// Catalog metrics.
#[derive(Clone, Debug, Default)]
pub struct CatalogMetrics {
    /// Packages served per catalog.
    pub packages: Family<CatalogLabels, Gauge>,
    /// Failed refreshes per catalog.
    pub refresh_failures: Family<CatalogLabels, Counter>,
    /// Last successful refresh per catalog, Unix seconds.
    pub last_success: Family<CatalogLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
}

/// Every metric packageserver exports.
#[derive(Clone, Debug)]
pub struct Metrics {
    /// API requests.
    pub api: ApiMetrics,
    /// Certificates.
    pub certs: CertMetrics,
    /// Catalogs.
    pub catalogs: CatalogMetrics,
}

impl Metrics {
    /// Registers every metric under the `packageserver_` prefix.
    pub fn register(registry: &mut MetricsRegistry) -> Self {
        let metrics = Self {
            api: ApiMetrics {
                requests: Family::default(),
                duration: Family::new_with_constructor(request_histogram),
            },
            certs: CertMetrics::default(),
            catalogs: CatalogMetrics::default(),
        };
        let r = registry.component("packageserver");
        r.register(
            "requests",
            "API requests answered",
            metrics.api.requests.clone(),
        );
        r.register(
            "request_duration_seconds",
            "Time to answer API requests (watches excluded)",
            metrics.api.duration.clone(),
        );
        r.register(
            "serving_cert_expiry_timestamp_seconds",
            "When the served TLS certificate expires",
            metrics.certs.serving_expiry.clone(),
        );
        r.register(
            "ca_cert_expiry_timestamp_seconds",
            "When the newest CA of the published bundle expires",
            metrics.certs.ca_expiry.clone(),
        );
        r.register(
            "cert_rotations",
            "Certificate rotation steps carried out, by action",
            metrics.certs.rotations.clone(),
        );
        r.register(
            "catalog_packages",
            "Packages served per catalog",
            metrics.catalogs.packages.clone(),
        );
        r.register(
            "catalog_refresh_failures",
            "Failed catalog refreshes",
            metrics.catalogs.refresh_failures.clone(),
        );
        r.register(
            "catalog_last_success_timestamp_seconds",
            "When each catalog was last refreshed successfully",
            metrics.catalogs.last_success.clone(),
        );
        metrics
    }
}
