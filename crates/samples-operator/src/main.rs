//! The `samples-operator` binary: keeps OpenShift's sample ImageStreams and
//! Templates as the samples Config `cluster` says, serving `/metrics`,
//! `/healthz` and `/readyz` on the admin address.

use std::{path::PathBuf, sync::Arc, time::Duration};

use anyhow::Context as _;
use clap::Parser;
use olm_runtime::{
    admin::{AdminServer, Readiness},
    config::{AdminServerArgs, KubeArgs, LeaderElectionArgs, TelemetryArgs, parse_duration},
    metrics::MetricsRegistry,
    shutdown::{DEFAULT_DRAIN_DEADLINE, TaskSet, on_signal},
    telemetry::{self, ServiceInfo},
};
use samples_operator::{
    controller::{self, DEFAULT_RESYNC, InventorySource, SamplesConfig},
    decide::inventory::Flavour,
    inventory_dir::load_dir,
    metrics::SamplesMetrics,
    probe::{self, Probe},
};

/// The name of this service: its field manager, lease and telemetry name.
const SERVICE_NAME: &str = "samples-operator";

/// Where a pod's own namespace is mounted.
const SERVICE_ACCOUNT_NAMESPACE_FILE: &str =
    "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// The value of `--registry-probe` that turns the probe off.
const NO_PROBE: &str = "none";

/// What to do instead of running the operator.
#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Remove everything the operator made and exit (the Helm chart's
    /// pre-delete hook): its Deployment scaled to zero, then the managed
    /// samples, its ConfigMaps and the Config, its finalizer removed.
    Uninstall {
        /// The operator's Deployment, in the operator namespace.
        #[arg(
            long,
            env = "SAMPLES_OPERATOR_DEPLOYMENT",
            default_value = "samples-operator"
        )]
        deployment: String,
        /// How long to wait for the operator's pods to go.
        #[arg(long, env = "SAMPLES_UNINSTALL_TIMEOUT", default_value = "2m", value_parser = parse_duration)]
        timeout: Duration,
    },
}

/// OpenShift's samples operator: sample ImageStreams and Templates kept as the samples Config says.
#[derive(Debug, Parser)]
#[command(name = "samples-operator", version)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,

    /// The namespace of the operator's ConfigMaps (default: the
    /// `POD_NAMESPACE` environment variable, else the pod's own namespace).
    #[arg(
        long = "namespace",
        env = "SAMPLES_OPERATOR_NAMESPACE",
        value_name = "NAMESPACE"
    )]
    namespace: Option<String>,

    /// The namespace the samples live in.
    #[arg(
        long = "samples-namespace",
        env = "SAMPLES_NAMESPACE",
        default_value = "openshift"
    )]
    samples_namespace: String,

    /// The version written on every sample and reported as done (upstream
    /// reads the same variable).
    #[arg(long = "release-version", env = "RELEASE_VERSION", default_value = env!("CARGO_PKG_VERSION"))]
    release_version: String,

    /// Which shipped samples: `ocp` (registry.redhat.io images) or `okd`
    /// (community images, x86_64 only).
    #[arg(long = "flavour", env = "SAMPLES_FLAVOUR", default_value = "ocp")]
    flavour: Flavour,

    /// Read the samples from this directory instead (upstream's image
    /// layout for one architecture: `<sample>/{imagestreams,templates}/*.json`).
    #[arg(long = "inventory", env = "SAMPLES_INVENTORY", value_name = "DIR")]
    inventory: Option<PathBuf>,

    /// The registry dialled (`host:port`, TLS) before the first Config is
    /// made; unreachable, the samples start `Removed`. `none` assumes it
    /// reachable.
    #[arg(long = "registry-probe", env = "SAMPLES_REGISTRY_PROBE", default_value = probe::DEFAULT_TARGET)]
    registry_probe: String,

    /// How long the registry probe keeps trying.
    #[arg(long = "registry-probe-deadline", env = "SAMPLES_REGISTRY_PROBE_DEADLINE", default_value = "3m", value_parser = parse_duration)]
    registry_probe_deadline: Duration,

    /// The pod's IP (from the downward API): an IPv6 address means an IPv6
    /// cluster, where the samples start `Removed`.
    #[arg(long = "pod-ip", env = "POD_IP", value_name = "IP")]
    pod_ip: Option<String>,

    /// How often everything is reconciled again without a change.
    #[arg(long = "resync", env = "SAMPLES_RESYNC", default_value = "10m", value_parser = parse_duration)]
    resync: Duration,

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
    fn namespace(&self, pod_namespace: Option<String>) -> anyhow::Result<String> {
        self.namespace
            .clone()
            .or(pod_namespace)
            .or_else(|| std::fs::read_to_string(SERVICE_ACCOUNT_NAMESPACE_FILE).ok())
            .map(|namespace| namespace.trim().to_owned())
            .filter(|namespace| !namespace.is_empty())
            .context("no namespace for the operator's ConfigMaps: set --namespace, SAMPLES_OPERATOR_NAMESPACE or POD_NAMESPACE")
    }

    fn config(&self, pod_namespace: Option<String>, proxy: bool) -> anyhow::Result<SamplesConfig> {
        let mut config = SamplesConfig::new(self.namespace(pod_namespace)?, &self.release_version);
        config.samples_namespace.clone_from(&self.samples_namespace);
        config.inventory = match &self.inventory {
            Some(dir) => InventorySource::Fixed(Arc::new(
                load_dir(dir)
                    .with_context(|| format!("reading the samples in {}", dir.display()))?,
            )),
            None => InventorySource::Embedded(self.flavour),
        };
        config.bootstrap.probe =
            (self.registry_probe != NO_PROBE).then(|| Probe::public(self.registry_probe.clone()));
        config.bootstrap.probe_deadline = self.registry_probe_deadline;
        config.bootstrap.ipv6 = self
            .pod_ip
            .as_deref()
            .and_then(|ip| ip.parse::<std::net::IpAddr>().ok())
            .is_some_and(|ip| ip.is_ipv6());
        config.bootstrap.proxy = proxy;
        config.resync = if self.resync.is_zero() {
            DEFAULT_RESYNC
        } else {
            self.resync
        };
        Ok(config)
    }
}

/// Whether the environment sets a global proxy.
fn proxy_in_environment() -> bool {
    ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"]
        .iter()
        .any(|name| std::env::var(name).is_ok_and(|value| !value.is_empty()))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let _telemetry = telemetry::init(
        &cli.telemetry,
        &ServiceInfo::new(SERVICE_NAME, env!("CARGO_PKG_VERSION")),
    )?;
    let config = cli.config(std::env::var("POD_NAMESPACE").ok(), proxy_in_environment())?;
    tracing::info!(
        namespace = %config.operator_namespace,
        samples_namespace = %config.samples_namespace,
        version = %config.operator_version,
        "keeping the samples"
    );
    let mut registry = MetricsRegistry::default();
    let metrics = SamplesMetrics::register(&mut registry);
    let client = cli
        .kube
        .client_for(SERVICE_NAME, env!("CARGO_PKG_VERSION"))
        .await
        .context("connecting to the API server")?;
    if let Some(Command::Uninstall {
        deployment,
        timeout,
    }) = &cli.command
    {
        let removed = controller::uninstall::uninstall(&client, &config, deployment, *timeout)
            .await
            .context("removing what the samples operator made")?;
        tracing::info!(?removed, "removed what the samples operator made");
        return Ok(());
    }
    let readiness = Readiness::default();
    let shutdown = on_signal()?;
    let admin =
        AdminServer::from_args(&cli.admin, &client, Arc::new(registry), readiness.clone()).await?;

    let mut tasks = TaskSet::new(shutdown.clone());
    tasks.spawn("admin-server", admin.serve(shutdown.clone()));

    let leader = cli.leader_election.handle(SERVICE_NAME, &client)?;
    let leading_rx = leader.leading(&mut tasks);
    let stop = shutdown.clone();
    tasks.spawn("samples", async move {
        controller::run(client, config, metrics, readiness, leading_rx, stop).await
    });
    tasks.run(DEFAULT_DRAIN_DEADLINE).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

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
            "samples-operator",
            "--namespace",
            "fixture-samples-operator",
            "--samples-namespace",
            "fixture-openshift",
            "--release-version",
            "9.9.9-fixture",
            "--flavour",
            "okd",
            "--registry-probe",
            "none",
            "--pod-ip",
            "fd00::12",
            "--resync",
            "30s",
        ])
        .unwrap();
        let config = cli.config(Some("pod-namespace".to_owned()), false).unwrap();
        assert_eq!(config.operator_namespace, "fixture-samples-operator");
        assert_eq!(config.samples_namespace, "fixture-openshift");
        assert_eq!(config.operator_version, "9.9.9-fixture");
        assert!(matches!(
            config.inventory,
            InventorySource::Embedded(Flavour::Okd)
        ));
        assert!(config.bootstrap.probe.is_none());
        assert!(config.bootstrap.ipv6);
        assert_eq!(config.resync, Duration::from_secs(30));
        assert_eq!(config.config_name, "cluster");
    }

    #[test]
    fn defaults_match_upstream() {
        let cli = Cli::try_parse_from(["samples-operator", "--pod-ip", "10.0.0.7"]).unwrap();
        let config = cli.config(Some("pod-namespace".to_owned()), true).unwrap();
        assert_eq!(config.operator_namespace, "pod-namespace");
        assert_eq!(config.samples_namespace, "openshift");
        assert!(matches!(
            config.inventory,
            InventorySource::Embedded(Flavour::Ocp)
        ));
        assert_eq!(
            config.bootstrap.probe.as_ref().map(Probe::target),
            Some("registry.redhat.io:443")
        );
        assert!(!config.bootstrap.ipv6);
        assert!(config.bootstrap.proxy);
    }

    #[test]
    fn uninstall_parses_with_its_defaults() {
        let cli = Cli::try_parse_from(["samples-operator", "--namespace=n", "uninstall"]).unwrap();
        let Some(Command::Uninstall {
            deployment,
            timeout,
        }) = cli.command
        else {
            panic!("no uninstall: {:?}", cli.command);
        };
        assert_eq!(deployment, "samples-operator");
        assert_eq!(timeout, Duration::from_secs(120));
    }

    #[test]
    fn an_unreadable_inventory_stops_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let streams = dir.path().join("fixture/imagestreams");
        std::fs::create_dir_all(&streams).unwrap();
        std::fs::write(streams.join("broken.json"), "{ not json").unwrap();
        let cli = Cli::try_parse_from([
            "samples-operator",
            "--namespace=n",
            &format!("--inventory={}", dir.path().display()),
        ])
        .unwrap();
        let error = format!("{:#}", cli.config(None, false).unwrap_err());
        assert!(error.contains("broken.json"), "{error}");
    }
}
