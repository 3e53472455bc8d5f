//! The `olm-operator` binary: drives ClusterServiceVersions and OperatorGroups
//! as upstream OLM's `olm` binary does, serving `/metrics`, `/healthz` and
//! `/readyz` on the admin address.

use std::{sync::Arc, time::Duration};

use anyhow::Context as _;
use clap::Parser;
use olm_operator::{
    controller::{self, ControllerConfig},
    metrics::OperatorMetrics,
};
use olm_runtime::{
    admin::{AdminServer, Readiness},
    config::{AdminServerArgs, KubeArgs, LeaderElectionArgs, TelemetryArgs, parse_duration},
    leader::LeaderHandle,
    metrics::MetricsRegistry,
    shutdown::{DEFAULT_DRAIN_DEADLINE, TaskSet, on_signal},
    telemetry::{self, ServiceInfo},
};

/// The name of this service: its field manager, lease and telemetry name.
const SERVICE_NAME: &str = "olm-operator";

/// Operator Lifecycle Manager: ClusterServiceVersion lifecycle and
/// OperatorGroups.
#[derive(Debug, Parser)]
#[command(name = "olm-operator", version)]
struct Cli {
    /// How often every object is reconciled again even without a change.
    #[arg(
        long = "interval",
        env = "OLM_INTERVAL",
        default_value = "5m",
        value_parser = parse_duration
    )]
    interval: Duration,

    /// Comma-separated namespaces to watch; empty (or an empty element) means
    /// all namespaces.
    #[arg(
        long = "watchedNamespaces",
        env = "OLM_WATCHED_NAMESPACES",
        value_delimiter = ',',
        default_value = ""
    )]
    watched_namespaces: Vec<String>,

    /// Comma-separated namespaces that keep copied CSVs of operators
    /// installed for all namespaces even when the `cluster` OLMConfig sets
    /// `disableCopiedCSVs`.
    #[arg(
        long = "protectedCopiedCSVNamespaces",
        env = "OLM_PROTECTED_COPIED_CSV_NAMESPACES",
        value_delimiter = ',',
        default_value = ""
    )]
    protected_copied_csv_namespaces: Vec<String>,

    /// Lifetime of a new CA of the serving certificates of owned APIServices
    /// and webhooks (upstream: 730 days).
    #[arg(long = "cert-ca-lifetime", env = "OLM_CERT_CA_LIFETIME", default_value = "17520h", value_parser = parse_duration)]
    cert_ca_lifetime: Duration,

    /// Lifetime of a new serving certificate of owned APIServices and
    /// webhooks (upstream: 730 days).
    #[arg(long = "cert-serving-lifetime", env = "OLM_CERT_SERVING_LIFETIME", default_value = "17520h", value_parser = parse_duration)]
    cert_serving_lifetime: Duration,

    /// Fraction of its lifetime after which a serving certificate is renewed.
    #[arg(
        long = "cert-serving-renew-fraction",
        env = "OLM_CERT_SERVING_RENEW_FRACTION",
        default_value_t = 0.8
    )]
    cert_serving_renew_fraction: f64,

    /// Validity left on a CA when it is replaced.
    #[arg(long = "cert-ca-renew-before", env = "OLM_CERT_CA_RENEW_BEFORE", default_value = "720h", value_parser = parse_duration)]
    cert_ca_renew_before: Duration,

    /// Time a new CA bundle or certificate is given to reach every client
    /// before the next rotation step relies on it.
    #[arg(long = "cert-overlap", env = "OLM_CERT_OVERLAP", default_value = "1h", value_parser = parse_duration)]
    cert_overlap: Duration,

    #[command(flatten)]
    kube: KubeArgs,
    #[command(flatten)]
    telemetry: TelemetryArgs,
    #[command(flatten)]
    admin: AdminServerArgs,
    #[command(flatten)]
    leader_election: LeaderElectionArgs,
}

impl Cli {
    /// The serving-certificate lifetimes and thresholds of owned APIServices
    /// and webhooks.
    fn certificate_policy(&self) -> olm_certs::RotationPolicy {
        olm_certs::RotationPolicy {
            ca_lifetime: self.cert_ca_lifetime,
            serving_lifetime: self.cert_serving_lifetime,
            serving_renew_fraction: self.cert_serving_renew_fraction,
            ca_renew_before: self.cert_ca_renew_before,
            overlap: self.cert_overlap,
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let _telemetry = telemetry::init(
        &cli.telemetry,
        &ServiceInfo::new(SERVICE_NAME, env!("CARGO_PKG_VERSION")),
    )?;
    let mut registry = MetricsRegistry::default();
    let metrics = OperatorMetrics::register(&mut registry);
    let client = {
        let config = cli
            .kube
            .config_for(SERVICE_NAME, env!("CARGO_PKG_VERSION"))
            .await
            .context("reading the kube configuration")?;
        // Every request that changes something is counted
        // (`olm_operator_api_writes_total`), so the write load this service
        // puts on the API server is visible.
        let writes = metrics.api_write_counter();
        kube::client::ClientBuilder::try_from(config)
            .context("building the kube client")?
            .with_layer(&tower::util::MapRequestLayer::new(
                move |request: http::Request<kube::client::Body>| {
                    writes.observe(request.method().as_str());
                    request
                },
            ))
            .build()
    };
    let readiness = Readiness::default();
    let shutdown = on_signal()?;
    let admin =
        AdminServer::from_args(&cli.admin, &client, Arc::new(registry), readiness.clone()).await?;

    let mut tasks = TaskSet::new(shutdown.clone());
    tasks.spawn("admin-server", admin.serve(shutdown.clone()));

    let mut leader = match cli.leader_election.resolve(SERVICE_NAME, &client)? {
        Some(config) => LeaderHandle::spawn(client.clone(), config)?,
        None => LeaderHandle::always_leader(),
    };
    let certificates = cli.certificate_policy();
    certificates
        .validate()
        .context("invalid serving certificate settings")?;
    let config = ControllerConfig {
        certificates,
        watched_namespaces: cli.watched_namespaces,
        resync: cli.interval,
        protected_copied_csv_namespaces: cli
            .protected_copied_csv_namespaces
            .into_iter()
            .filter(|ns| !ns.is_empty())
            .collect(),
    };
    let stop = shutdown.clone();
    tasks.spawn("controllers", async move {
        tokio::select! {
            acquired = leader.acquired() => acquired?,
            () = stop.cancelled() => return Ok::<(), anyhow::Error>(()),
        }
        tracing::info!("leading; starting controllers");
        // Losing the lease stops the controllers like a shutdown does: a
        // replica that no longer leads must not act.
        let controllers = stop.child_token();
        let lost = leader.lost();
        let on_loss = controllers.clone();
        tokio::spawn(async move {
            lost.await;
            on_loss.cancel();
        });
        controller::run(client, config, metrics, readiness, controllers).await?;
        leader.release().await?;
        if !stop.is_cancelled() {
            anyhow::bail!("leadership lost");
        }
        Ok(())
    });
    tasks.run(DEFAULT_DRAIN_DEADLINE).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn command_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_flag_can_be_set_from_the_environment() {
        let command = Cli::command();
        let missing: Vec<_> = command
            .get_arguments()
            .filter(|arg| !matches!(arg.get_id().as_str(), "help" | "version"))
            .filter(|arg| arg.get_env().is_none())
            .map(|arg| arg.get_id().to_string())
            .collect();
        assert!(missing.is_empty(), "flags without env: {missing:?}");
    }

    #[test]
    fn default_certificate_settings_are_upstream_lifetimes_and_valid() {
        let cli = Cli::try_parse_from(["olm-operator"]).expect("defaults parse");
        let policy = cli.certificate_policy();
        policy.validate().expect("valid");
        assert_eq!(
            policy.ca_lifetime,
            olm_certs::policy::UPSTREAM_CERT_LIFETIME
        );
        assert_eq!(
            policy.serving_lifetime,
            olm_certs::policy::UPSTREAM_CERT_LIFETIME
        );
    }

    #[test]
    fn upstream_flags_parse() {
        let cli = Cli::try_parse_from([
            "olm-operator",
            "--interval",
            "30s",
            "--watchedNamespaces",
            "gadget-system,widget-system",
        ])
        .expect("flags parse");
        assert_eq!(cli.interval, Duration::from_secs(30));
        assert_eq!(cli.watched_namespaces, ["gadget-system", "widget-system"]);
        let defaults = Cli::try_parse_from(["olm-operator"]).expect("defaults parse");
        assert_eq!(defaults.interval, Duration::from_secs(300));
        assert_eq!(defaults.watched_namespaces, [""]);
    }
}
