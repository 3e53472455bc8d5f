//! The `bundle-unpacker` binary: pulls the bundle images InstallPlans wait
//! for straight from their registries and stores their content for
//! catalog-operator, serving `/metrics`, `/healthz` and `/readyz` on the
//! admin address.

use std::{sync::Arc, time::Duration};

use anyhow::Context as _;
use bundle_unpacker::{
    controller::{self, DEFAULT_QUEUE_CONSUMER, UnpackerConfig},
    decide::registries::RegistryRule,
    metrics::UnpackMetrics,
};
use clap::Parser;
use olm_bus::{Bus, BusArgs};
use olm_runtime::{
    admin::{AdminServer, Readiness},
    config::{AdminServerArgs, KubeArgs, LeaderElectionArgs, TelemetryArgs, parse_duration},
    metrics::MetricsRegistry,
    shutdown::{DEFAULT_DRAIN_DEADLINE, TaskSet, on_signal},
    telemetry::{self, ServiceInfo},
};

/// The name of this service: its field manager, lease and telemetry name.
const SERVICE_NAME: &str = "bundle-unpacker";

/// Operator Lifecycle Manager: bundle images to stored content, with no Job.
#[derive(Debug, Parser)]
#[command(name = "bundle-unpacker", version)]
struct Cli {
    /// Registries (`host[:port]`, comma-separated) reached over plain HTTP
    /// instead of HTTPS; meant for loopback and in-cluster test registries.
    #[arg(
        long = "insecure-registry",
        env = "OLM_INSECURE_REGISTRIES",
        value_delimiter = ',',
        default_value = ""
    )]
    insecure_registries: Vec<String>,

    /// The allowed-registries policy: registry hosts, or `*.domain`
    /// wildcards, comma-separated; a bundle hosted elsewhere is refused
    /// before any pull. Empty allows every registry.
    #[arg(
        long = "allowed-registries",
        env = "OLM_ALLOWED_REGISTRIES",
        value_delimiter = ',',
        default_value = ""
    )]
    allowed_registries: Vec<String>,

    /// Also apply the allowed-registries policy to the operator images a
    /// bundle's CSV names (its Deployments' containers and
    /// `relatedImages`): a bundle naming an image hosted elsewhere is
    /// refused, with each such image named, and nothing of it is stored.
    #[arg(
        long = "check-operator-images",
        env = "OLM_CHECK_OPERATOR_IMAGES",
        default_value_t = false
    )]
    check_operator_images: bool,

    /// Comma-separated namespaces whose InstallPlans are served; empty
    /// means all.
    #[arg(
        long = "watchedNamespaces",
        env = "OLM_WATCHED_NAMESPACES",
        value_delimiter = ',',
        default_value = ""
    )]
    watched_namespaces: Vec<String>,

    /// How many images one replica pulls at once.
    #[arg(long = "concurrency", env = "OLM_UNPACK_CONCURRENCY", default_value_t = controller::DEFAULT_CONCURRENCY)]
    concurrency: usize,

    /// The unpack deadline when the OperatorGroup sets no
    /// `operatorframework.io/bundle-unpack-timeout`; `0` means none.
    #[arg(long = "bundle-unpack-timeout", env = "OLM_BUNDLE_UNPACK_TIMEOUT", default_value = "10m", value_parser = parse_duration)]
    bundle_unpack_timeout: Duration,

    /// How long the InstallPlan watch leaves a need to the work queue
    /// before it unpacks itself (while the bus is connected).
    #[arg(long = "watch-grace", env = "OLM_UNPACK_WATCH_GRACE", default_value = "15s", value_parser = parse_duration)]
    watch_grace: Duration,

    /// How often every InstallPlan is looked at again without a change.
    #[arg(long = "resync", env = "OLM_UNPACK_RESYNC", default_value = "5m", value_parser = parse_duration)]
    resync: Duration,

    /// The durable name of the work-queue consumer all replicas share.
    #[arg(long = "queue-consumer", env = "OLM_UNPACK_QUEUE_CONSUMER", default_value = DEFAULT_QUEUE_CONSUMER)]
    queue_consumer: String,

    #[command(flatten)]
    kube: KubeArgs,
    #[command(flatten)]
    telemetry: TelemetryArgs,
    #[command(flatten)]
    admin: AdminServerArgs,
    #[command(flatten)]
    leader_election: LeaderElectionArgs,
    #[command(flatten)]
    bus: BusArgs,
}

impl Cli {
    fn config(&self) -> UnpackerConfig {
        let non_empty = |values: &[String]| -> Vec<String> {
            values
                .iter()
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
                .collect()
        };
        UnpackerConfig {
            watched_namespaces: non_empty(&self.watched_namespaces),
            concurrency: self.concurrency.max(1),
            default_timeout: (!self.bundle_unpack_timeout.is_zero())
                .then_some(self.bundle_unpack_timeout),
            insecure_registries: non_empty(&self.insecure_registries).into_iter().collect(),
            allowed_registries: non_empty(&self.allowed_registries)
                .iter()
                .map(|r| RegistryRule::new(r))
                .collect(),
            check_operator_images: self.check_operator_images,
            watch_grace: self.watch_grace,
            resync: self.resync,
            queue_consumer: self.queue_consumer.clone(),
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
    let metrics = UnpackMetrics::register(&mut registry);
    // The bus's counters, exported once it is connected.
    let bus_metrics = olm_bus::metrics::BusCollector::new();
    registry
        .component(bundle_unpacker::metrics::PREFIX)
        .register_collector(Box::new(bus_metrics.clone()));
    let client = cli
        .kube
        .client_for(SERVICE_NAME, env!("CARGO_PKG_VERSION"))
        .await
        .context("connecting to the API server")?;
    let readiness = Readiness::default();
    let shutdown = on_signal()?;
    let admin =
        AdminServer::from_args(&cli.admin, &client, Arc::new(registry), readiness.clone()).await?;
    let bus = Bus::connect(&cli.bus, SERVICE_NAME).await?;
    bus_metrics.attach(&bus);

    let mut tasks = TaskSet::new(shutdown.clone());
    tasks.spawn("admin-server", admin.serve(shutdown.clone()));

    // Every replica consumes the work queue; the InstallPlan watch follows
    // leadership (always, without leader election).
    let leader = cli.leader_election.handle(SERVICE_NAME, &client)?;
    let watch_rx = leader.leading(&mut tasks);
    let config = cli.config();
    let stop = shutdown.clone();
    tasks.spawn("unpacker", async move {
        controller::run(client, config, metrics, bus, readiness, watch_rx, stop).await
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
    fn flags_parse_into_the_config() {
        let cli = Cli::try_parse_from([
            "bundle-unpacker",
            "--insecure-registry",
            "127.0.0.1:5000,localhost:5001",
            "--watchedNamespaces",
            "a,b",
            "--concurrency",
            "0",
            "--bundle-unpack-timeout",
            "0s",
            "--allowed-registries",
            "quay.io,*.example.com",
        ])
        .expect("flags parse");
        let config = cli.config();
        assert_eq!(config.insecure_registries.len(), 2);
        assert!(config.insecure_registries.contains("localhost:5001"));
        assert_eq!(config.watched_namespaces, ["a", "b"]);
        assert_eq!(config.concurrency, 1, "at least one pull at a time");
        assert_eq!(config.default_timeout, None);
        assert_eq!(config.allowed_registries.len(), 2);
        let defaults = Cli::try_parse_from(["bundle-unpacker"])
            .expect("defaults parse")
            .config();
        assert!(defaults.insecure_registries.is_empty());
        assert!(defaults.watched_namespaces.is_empty());
        assert!(defaults.allowed_registries.is_empty());
        assert_eq!(defaults.default_timeout, Some(Duration::from_secs(600)));
    }
}
