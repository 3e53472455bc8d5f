//! The `olm-operator` binary: drives ClusterServiceVersions and OperatorGroups
//! as upstream OLM's `olm` binary does, serving `/metrics`, `/healthz` and
//! `/readyz` on the admin address. `olm-operator bus-credentials` instead
//! creates the bus's NKey Secrets once and exits (see [`bus_credentials`]);
//! `olm-operator apply-crds` creates or replaces CRDs from files and exits
//! (see [`apply_crds`]).

mod apply_crds;
mod bus_credentials;

use std::{sync::Arc, time::Duration};

use anyhow::Context as _;
use apply_crds::ApplyCrdsArgs;
use bus_credentials::BusCredentialsArgs;
use clap::{Parser, Subcommand};
use olm_operator::{
    controller::{self, ControllerConfig},
    metrics::OperatorMetrics,
};
use olm_runtime::{
    admin::{AdminServer, Readiness},
    config::{AdminServerArgs, KubeArgs, LeaderElectionArgs, TelemetryArgs, parse_duration},
    metrics::MetricsRegistry,
    shutdown::{DEFAULT_DRAIN_DEADLINE, TaskSet, on_signal},
    telemetry::{self, ServiceInfo},
};

/// The name of this service: its field manager, lease and telemetry name.
const SERVICE_NAME: &str = "olm-operator";
/// The name `bus-credentials` logs and sends requests under, so that the API
/// server's audit log tells the Job from the service.
const BUS_CREDENTIALS_NAME: &str = "olm-operator-bus-credentials";
/// The name `apply-crds` logs and sends requests under.
const APPLY_CRDS_NAME: &str = "olm-operator-apply-crds";

/// Operator Lifecycle Manager: ClusterServiceVersion lifecycle and
/// OperatorGroups.
///
/// Without a subcommand it runs the service; the service's flags cannot be
/// combined with a subcommand.
#[derive(Debug, Parser)]
#[command(name = "olm-operator", version, args_conflicts_with_subcommands = true)]
struct Cli {
    /// A one-off task to run instead of the service.
    #[command(subcommand)]
    command: Option<Command>,

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

/// One-off tasks of the `olm-operator` binary.
#[derive(Debug, Subcommand)]
enum Command {
    /// Create or repair the NKey Secrets of the bus's services and the NATS
    /// server's authorization Secret, then exit (for a Helm Job).
    BusCredentials(BusCredentialsArgs),
    /// Create or replace the CustomResourceDefinitions in a directory of
    /// YAML files and wait until they are Established, then exit (for a
    /// Helm hook Job).
    ApplyCrds(ApplyCrdsArgs),
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
    let mut cli = Cli::parse();
    match cli.command.take() {
        Some(Command::BusCredentials(args)) => issue_bus_credentials(args).await,
        Some(Command::ApplyCrds(args)) => apply_crds(args).await,
        None => run_service(cli).await,
    }
}

/// `olm-operator bus-credentials`.
async fn issue_bus_credentials(args: BusCredentialsArgs) -> anyhow::Result<()> {
    let _telemetry = telemetry::init(
        &args.telemetry,
        &ServiceInfo::new(BUS_CREDENTIALS_NAME, env!("CARGO_PKG_VERSION")),
    )?;
    let config = args
        .kube
        .config_for(BUS_CREDENTIALS_NAME, env!("CARGO_PKG_VERSION"))
        .await
        .context("reading the kube configuration")?;
    let client = kube::Client::try_from(config).context("building the kube client")?;
    bus_credentials::run(client, &args).await?;
    Ok(())
}

/// `olm-operator apply-crds`.
async fn apply_crds(args: ApplyCrdsArgs) -> anyhow::Result<()> {
    let _telemetry = telemetry::init(
        &args.telemetry,
        &ServiceInfo::new(APPLY_CRDS_NAME, env!("CARGO_PKG_VERSION")),
    )?;
    let config = args
        .kube
        .config_for(APPLY_CRDS_NAME, env!("CARGO_PKG_VERSION"))
        .await
        .context("reading the kube configuration")?;
    let client = kube::Client::try_from(config).context("building the kube client")?;
    apply_crds::run(client, &args).await?;
    Ok(())
}

/// The olm-operator service, until a signal stops it.
async fn run_service(cli: Cli) -> anyhow::Result<()> {
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

    let leader = cli.leader_election.handle(SERVICE_NAME, &client)?;
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
        leader
            .run_while_leading(&stop, |controllers| async move {
                controller::run(client, config, metrics, readiness, controllers)
                    .await
                    .map_err(anyhow::Error::from)
            })
            .await
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
        let missing = olm_runtime::config::flags_without_env(&Cli::command());
        assert!(missing.is_empty(), "flags without env: {missing:?}");
    }

    #[test]
    fn the_service_and_bus_credentials_both_parse() {
        let service = Cli::try_parse_from(["olm-operator", "--interval", "30s"]).expect("service");
        assert!(service.command.is_none());
        assert_eq!(service.interval, Duration::from_secs(30));

        let cli = Cli::try_parse_from([
            "olm-operator",
            "bus-credentials",
            "--namespace",
            "sample-bus-system",
            "--owner-service-account",
            "sample-installer",
            "--services",
            "catalog-operator,packageserver",
            "--kubeconfig",
            "/sample/kubeconfig",
        ])
        .expect("bus-credentials");
        let Some(Command::BusCredentials(args)) = cli.command else {
            panic!("no subcommand: {cli:?}");
        };
        assert_eq!(args.namespace, "sample-bus-system");
        assert_eq!(args.secret_prefix, "olm-bus");
        assert_eq!(
            args.owner_service_account.as_deref(),
            Some("sample-installer")
        );
        assert_eq!(args.services, ["catalog-operator", "packageserver"]);
        assert_eq!(
            args.kube.kubeconfig.as_deref(),
            Some(std::path::Path::new("/sample/kubeconfig"))
        );

        let defaults = Cli::try_parse_from([
            "olm-operator",
            "bus-credentials",
            "--namespace",
            "sample-bus-system",
        ])
        .expect("defaults");
        let Some(Command::BusCredentials(defaults)) = defaults.command else {
            panic!("no subcommand");
        };
        let every_service: Vec<_> = olm_bus::auth::SERVICES.iter().map(|p| p.service).collect();
        assert_eq!(defaults.services, every_service);
        assert_eq!(defaults.owner_service_account, None);
    }

    #[test]
    fn apply_crds_parses_with_a_default_timeout() {
        let cli = Cli::try_parse_from([
            "olm-operator",
            "apply-crds",
            "--dir=/sample/crds",
            "--kubeconfig",
            "/sample/kubeconfig",
        ])
        .expect("apply-crds");
        let Some(Command::ApplyCrds(args)) = cli.command else {
            panic!("no subcommand: {cli:?}");
        };
        assert_eq!(args.dir, std::path::Path::new("/sample/crds"));
        assert_eq!(args.timeout, Duration::from_secs(120));
        assert_eq!(
            args.kube.kubeconfig.as_deref(),
            Some(std::path::Path::new("/sample/kubeconfig"))
        );

        let cli = Cli::try_parse_from([
            "olm-operator",
            "apply-crds",
            "--dir",
            "/sample/crds",
            "--timeout",
            "30s",
        ])
        .expect("timeout");
        let Some(Command::ApplyCrds(args)) = cli.command else {
            panic!("no subcommand");
        };
        assert_eq!(args.timeout, Duration::from_secs(30));

        let missing = Cli::try_parse_from(["olm-operator", "apply-crds"]);
        assert!(missing.is_err(), "--dir is required: {missing:?}");
    }

    #[test]
    fn service_flags_and_a_subcommand_do_not_mix() {
        let mixed = Cli::try_parse_from([
            "olm-operator",
            "--interval",
            "30s",
            "bus-credentials",
            "--namespace",
            "sample-bus-system",
        ]);
        assert!(mixed.is_err(), "{mixed:?}");
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
