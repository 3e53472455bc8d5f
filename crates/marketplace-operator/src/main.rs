//! The `marketplace-operator` binary: keeps the default CatalogSources of
//! the marketplace namespace as the OperatorHub `cluster` says, serving
//! `/metrics`, `/healthz` and `/readyz` on the admin address.

use std::{path::PathBuf, sync::Arc, time::Duration};

use anyhow::Context as _;
use clap::Parser;
use marketplace_operator::{
    controller::{self, DEFAULT_RESYNC, MarketplaceConfig},
    decide::sources::{DefaultSource, parse_default_sources},
    metrics::MarketplaceMetrics,
};
use olm_runtime::{
    admin::{AdminServer, Readiness},
    config::{AdminServerArgs, KubeArgs, LeaderElectionArgs, TelemetryArgs, parse_duration},
    metrics::MetricsRegistry,
    shutdown::{DEFAULT_DRAIN_DEADLINE, TaskSet, on_signal},
    telemetry::{self, ServiceInfo},
};

/// The name of this service: its field manager, lease and telemetry name.
const SERVICE_NAME: &str = "marketplace-operator";

/// Where a pod's own namespace is mounted.
const SERVICE_ACCOUNT_NAMESPACE_FILE: &str =
    "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// Operator Lifecycle Manager: the OperatorHub turned into default CatalogSources.
#[derive(Debug, Parser)]
#[command(name = "marketplace-operator", version)]
struct Cli {
    /// The namespace the default CatalogSources live in (default: the
    /// `POD_NAMESPACE` environment variable, else the pod's own namespace).
    #[arg(
        long = "namespace",
        env = "MARKETPLACE_NAMESPACE",
        value_name = "NAMESPACE"
    )]
    namespace: Option<String>,

    /// The namespace of the OLM Deployments (`app.kubernetes.io/part-of=olm`)
    /// reported in ClusterOperators where the cluster serves them (default:
    /// the marketplace namespace).
    #[arg(
        long = "olm-namespace",
        env = "MARKETPLACE_OLM_NAMESPACE",
        value_name = "NAMESPACE"
    )]
    olm_namespace: Option<String>,

    /// A YAML or JSON list of default sources (`name`, `image`,
    /// `displayName`, `publisher`, `priority`, `pollInterval`,
    /// `grpcPodConfig`). A missing file means no default sources.
    #[arg(
        long = "default-sources",
        env = "MARKETPLACE_DEFAULT_SOURCES",
        value_name = "FILE"
    )]
    default_sources: Option<PathBuf>,

    /// Take over an enabled default's same-named CatalogSource that lacks
    /// the `operatorframework.io/managed-by` annotation, as upstream does;
    /// `false` leaves it alone and reports an Error for the source.
    #[arg(
        long = "adopt-unmanaged-defaults",
        env = "MARKETPLACE_ADOPT_UNMANAGED_DEFAULTS",
        action = clap::ArgAction::Set,
        num_args = 0..=1,
        default_value_t = true,
        default_missing_value = "true",
        value_name = "BOOL"
    )]
    adopt_unmanaged_defaults: bool,

    /// How often everything is reconciled again without a change.
    #[arg(long = "resync", env = "MARKETPLACE_RESYNC", default_value = "5m", value_parser = parse_duration)]
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
            .context("no namespace for the default CatalogSources: set --namespace, MARKETPLACE_NAMESPACE or POD_NAMESPACE")
    }

    fn default_sources(&self) -> anyhow::Result<Vec<DefaultSource>> {
        let Some(path) = &self.default_sources else {
            return Ok(Vec::new());
        };
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                tracing::info!(path = %path.display(), "no default sources file; no default sources");
                return Ok(Vec::new());
            }
            Err(error) => {
                return Err(error).with_context(|| format!("reading {}", path.display()));
            }
        };
        parse_default_sources(&text).with_context(|| format!("reading {}", path.display()))
    }

    fn config(&self, pod_namespace: Option<String>) -> anyhow::Result<MarketplaceConfig> {
        let mut config =
            MarketplaceConfig::new(self.namespace(pod_namespace)?, self.default_sources()?);
        if let Some(olm_namespace) = &self.olm_namespace {
            config.olm_namespace.clone_from(olm_namespace);
        }
        config.adopt_unmanaged = self.adopt_unmanaged_defaults;
        config.resync = if self.resync.is_zero() {
            DEFAULT_RESYNC
        } else {
            self.resync
        };
        Ok(config)
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let _telemetry = telemetry::init(
        &cli.telemetry,
        &ServiceInfo::new(SERVICE_NAME, env!("CARGO_PKG_VERSION")),
    )?;
    let config = cli.config(std::env::var("POD_NAMESPACE").ok())?;
    tracing::info!(
        namespace = %config.namespace,
        sources = config.default_sources.len(),
        "serving the OperatorHub"
    );
    let mut registry = MetricsRegistry::default();
    let metrics = MarketplaceMetrics::register(&mut registry);
    let client = cli
        .kube
        .client_for(SERVICE_NAME, env!("CARGO_PKG_VERSION"))
        .await
        .context("connecting to the API server")?;
    let readiness = Readiness::default();
    let shutdown = on_signal()?;
    let admin =
        AdminServer::from_args(&cli.admin, &client, Arc::new(registry), readiness.clone()).await?;

    let mut tasks = TaskSet::new(shutdown.clone());
    tasks.spawn("admin-server", admin.serve(shutdown.clone()));

    let leader = cli.leader_election.handle(SERVICE_NAME, &client)?;
    let leading_rx = leader.leading(&mut tasks);
    let stop = shutdown.clone();
    tasks.spawn("operatorhub", async move {
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
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("default-sources.yaml");
        std::fs::write(&file, "- {name: fixture-hub, image: example.com/hub:1}\n").unwrap();
        let cli = Cli::try_parse_from([
            "marketplace-operator",
            "--namespace",
            "fixture-marketplace",
            "--default-sources",
            file.to_str().unwrap(),
            "--adopt-unmanaged-defaults=false",
            "--resync",
            "30s",
            "--olm-namespace",
            "fixture-olm",
        ])
        .unwrap();
        let config = cli.config(Some("pod-namespace".to_owned())).unwrap();
        assert_eq!(config.namespace, "fixture-marketplace");
        assert_eq!(config.olm_namespace, "fixture-olm");
        assert_eq!(config.default_sources[0].name, "fixture-hub");
        assert!(!config.adopt_unmanaged);
        assert_eq!(config.resync, Duration::from_secs(30));
        assert_eq!(config.operator_hub_name, "cluster");
    }

    #[test]
    fn defaults_fall_back_to_the_pod_namespace_and_no_sources() {
        let missing = tempfile::tempdir().unwrap().path().join("absent.yaml");
        let cli = Cli::try_parse_from([
            "marketplace-operator",
            "--default-sources",
            missing.to_str().unwrap(),
        ])
        .unwrap();
        let config = cli.config(Some("pod-namespace".to_owned())).unwrap();
        assert_eq!(config.namespace, "pod-namespace");
        assert_eq!(config.olm_namespace, "pod-namespace");
        assert!(config.default_sources.is_empty());
        assert!(config.adopt_unmanaged, "upstream adopts by default");
    }

    #[test]
    fn a_broken_sources_file_stops_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("default-sources.yaml");
        std::fs::write(&file, "- {name: Not_A_Label, image: x}\n").unwrap();
        let cli = Cli::try_parse_from([
            "marketplace-operator",
            "--namespace=n",
            &format!("--default-sources={}", file.display()),
        ])
        .unwrap();
        let error = format!("{:#}", cli.config(None).unwrap_err());
        assert!(error.contains("DNS label"), "{error}");
    }
}
