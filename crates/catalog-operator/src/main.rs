//! The `catalog-operator` binary: drives CatalogSources (and, as they land,
//! Subscriptions and InstallPlans) as upstream OLM's `catalog` binary does,
//! serving `/metrics`, `/healthz` and `/readyz` on the admin address.

use std::{sync::Arc, time::Duration};

use anyhow::Context as _;
use catalog_operator::{
    controller::{self, ControllerConfig},
    decide::catalog_source::RegistryPodOptions,
    metrics::CatalogMetrics,
};
use clap::Parser;
use olm_bus::{Bus, BusArgs};
use olm_runtime::{
    admin::{AdminServer, Readiness},
    config::{AdminServerArgs, KubeArgs, LeaderElectionArgs, TelemetryArgs, parse_duration},
    metrics::MetricsRegistry,
    service_address::ServiceLookupArgs,
    shutdown::{DEFAULT_DRAIN_DEADLINE, TaskSet, on_signal},
    telemetry::{self, ServiceInfo},
};

/// The name of this service: its field manager, lease and telemetry name.
const SERVICE_NAME: &str = "catalog-operator";

/// Operator Lifecycle Manager: catalogs, subscriptions and install plans.
#[derive(Debug, Parser)]
#[command(name = "catalog-operator", version)]
struct Cli {
    /// The global catalog namespace: its catalogs serve every namespace
    /// (upstream's `--namespace`; `GLOBAL_CATALOG_NAMESPACE` wins over it).
    #[arg(
        long = "namespace",
        env = "GLOBAL_CATALOG_NAMESPACE",
        default_value = "olm"
    )]
    namespace: String,

    /// How often every catalog is reconciled again without a change.
    #[arg(long = "interval", env = "OLM_CATALOG_INTERVAL", default_value = "15m", value_parser = parse_duration)]
    interval: Duration,

    /// The image that serves `configmap` catalogs.
    #[arg(
        long = "configmapServerImage",
        env = "OLM_CONFIGMAP_SERVER_IMAGE",
        default_value = "quay.io/operator-framework/configmap-operator-registry:latest"
    )]
    configmap_server_image: String,

    /// The opm image that serves extracted catalog content.
    #[arg(
        long = "opmImage",
        env = "OLM_OPM_IMAGE",
        default_value = "quay.io/operator-framework/opm:latest"
    )]
    opm_image: String,

    /// The image providing `copy-content` for `extractContent`.
    #[arg(
        long = "util-image",
        env = "OLM_UTIL_IMAGE",
        default_value = "quay.io/operator-framework/olm:latest"
    )]
    util_image: String,

    /// Run registry pods as user 1001 (non-root). Like upstream's Go flag,
    /// it is given alone or as `--set-workload-user-id=true|false`.
    #[arg(
        long = "set-workload-user-id",
        env = "OLM_SET_WORKLOAD_USER_ID",
        action = clap::ArgAction::Set,
        num_args = 0..=1,
        default_value_t = false,
        default_missing_value = "true",
        require_equals = true,
        value_name = "BOOL"
    )]
    set_workload_user_id: bool,

    /// How long connecting to a registry and one health check may take.
    #[arg(long = "registry-timeout", env = "OLM_REGISTRY_TIMEOUT", default_value = "5s", value_parser = parse_duration)]
    registry_timeout: Duration,

    /// How long after its start a failing InstallPlan keeps retrying before
    /// it is Failed.
    #[arg(
        long = "install-plan-retry-timeout",
        env = "OLM_INSTALL_PLAN_RETRY_TIMEOUT",
        default_value = "1m",
        value_parser = parse_duration
    )]
    install_plan_retry_timeout: Duration,

    /// Comma-separated namespaces whose catalogs, Subscriptions and
    /// InstallPlans are reconciled; empty means all (an addition to
    /// upstream's flags, for running several instances or tests).
    #[arg(
        long = "watchedNamespaces",
        env = "OLM_WATCHED_NAMESPACES",
        value_delimiter = ',',
        default_value = ""
    )]
    watched_namespaces: Vec<String>,

    /// Comma-separated registries (`host[:port]`) reached over plain HTTP
    /// when polling catalog images, for local test registries.
    #[arg(
        long = "insecure-registry",
        env = "OLM_INSECURE_REGISTRIES",
        value_delimiter = ','
    )]
    insecure_registries: Vec<String>,

    /// The allowed-registries policy for catalog images: registry hosts,
    /// or `*.domain` wildcards, comma-separated. A CatalogSource whose
    /// image is hosted elsewhere gets no registry pod and reason
    /// `RegistryNotAllowed`. Empty allows every registry.
    #[arg(
        long = "allowed-registries",
        env = "OLM_ALLOWED_REGISTRIES",
        value_delimiter = ',',
        default_value = ""
    )]
    allowed_registries: Vec<String>,

    /// Hosts (`host`, `host:port` or `*.domain`) a CatalogSource's
    /// `spec.address` may name, comma-separated; any other address is
    /// never dialled (reason `RegistryNotAllowed`). Empty allows every
    /// address. Registry Services OLM creates itself are always allowed.
    #[arg(
        long = "allowed-catalog-addresses",
        env = "OLM_ALLOWED_CATALOG_ADDRESSES",
        value_delimiter = ',',
        default_value = ""
    )]
    allowed_catalog_addresses: Vec<String>,

    #[command(flatten)]
    service_lookup: ServiceLookupArgs,
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

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let _telemetry = telemetry::init(
        &cli.telemetry,
        &ServiceInfo::new(SERVICE_NAME, env!("CARGO_PKG_VERSION")),
    )?;
    let mut registry = MetricsRegistry::default();
    let metrics = CatalogMetrics::register(&mut registry);
    // The bus's counters, exported once it is connected.
    let bus_metrics = olm_bus::metrics::BusCollector::new();
    registry
        .component("catalog_operator")
        .register_collector(Box::new(bus_metrics.clone()));
    let kube_config = cli
        .kube
        .config_for(SERVICE_NAME, env!("CARGO_PKG_VERSION"))
        .await
        .context("reading the kube configuration")?;
    let client = kube::Client::try_from(kube_config.clone()).context("building the kube client")?;
    let readiness = Readiness::default();
    let shutdown = on_signal()?;
    let admin =
        AdminServer::from_args(&cli.admin, &client, Arc::new(registry), readiness.clone()).await?;
    let bus = Bus::connect(&cli.bus, SERVICE_NAME).await?;
    bus_metrics.attach(&bus);

    let mut tasks = TaskSet::new(shutdown.clone());
    tasks.spawn("admin-server", admin.serve(shutdown.clone()));

    let leader = cli.leader_election.handle(SERVICE_NAME, &client)?;
    let config = ControllerConfig {
        global_catalog_namespace: cli.namespace,
        resync: cli.interval,
        pod_options: RegistryPodOptions {
            workload_user_id: cli.set_workload_user_id.then_some(1001),
            config_map_server_image: cli.configmap_server_image,
            opm_image: cli.opm_image,
            util_image: cli.util_image,
        },
        registry_timeout: cli.registry_timeout,
        insecure_registries: cli.insecure_registries,
        allowed_registries: rules(&cli.allowed_registries),
        allowed_catalog_addresses: rules(&cli.allowed_catalog_addresses),
        service_lookup: cli.service_lookup.service_lookup,
        watched_namespaces: cli
            .watched_namespaces
            .into_iter()
            .filter(|ns| !ns.is_empty())
            .collect(),
        install_plan_retry_timeout: jiff::SignedDuration::try_from(cli.install_plan_retry_timeout)
            .context("--install-plan-retry-timeout is too long")?,
        ..ControllerConfig::default()
    };
    let stop = shutdown.clone();
    tasks.spawn("controllers", async move {
        leader
            .run_while_leading(&stop, |controllers| async move {
                controller::run(kube_config, config, metrics, bus, readiness, controllers).await
            })
            .await
    });
    tasks.run(DEFAULT_DRAIN_DEADLINE).await?;
    Ok(())
}

/// Policy rules from comma-separated flag values (blanks dropped).
fn rules(values: &[String]) -> Vec<olm_oci::policy::RegistryRule> {
    values
        .iter()
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
        .map(olm_oci::policy::RegistryRule::new)
        .collect()
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
    fn upstream_flags_parse() {
        let cli = Cli::try_parse_from([
            "catalog-operator",
            "--namespace",
            "operator-lifecycle-manager",
            "--configmapServerImage",
            "example.com/cm:1",
            "--opmImage",
            "example.com/opm:1",
            "--util-image",
            "example.com/olm:1",
            "--set-workload-user-id",
            "--interval",
            "30m",
        ])
        .expect("flags parse");
        assert_eq!(cli.namespace, "operator-lifecycle-manager");
        assert_eq!(cli.interval, Duration::from_secs(1800));
        assert!(cli.set_workload_user_id);
        let defaults = Cli::try_parse_from(["catalog-operator"]).expect("defaults parse");
        assert_eq!(defaults.interval, Duration::from_secs(900));
        assert_eq!(defaults.namespace, "olm");
        assert!(!defaults.set_workload_user_id);
        // Upstream's deployments spell the boolean with a value.
        for (given, wanted) in [("=true", true), ("=false", false)] {
            let flag = format!("--set-workload-user-id{given}");
            let cli = Cli::try_parse_from(["catalog-operator", flag.as_str()]).expect("parses");
            assert_eq!(cli.set_workload_user_id, wanted, "{flag}");
        }
        assert!(Cli::try_parse_from(["catalog-operator", "--set-workload-user-id=maybe"]).is_err());
    }

    #[test]
    fn the_registry_policy_flags_become_rules() {
        let cli = Cli::try_parse_from([
            "catalog-operator",
            "--allowed-registries",
            "quay.io, *.corp.example,",
            "--allowed-catalog-addresses",
            "*.olm.svc",
        ])
        .expect("flags parse");
        let images = rules(&cli.allowed_registries);
        assert_eq!(
            images.iter().map(|r| r.as_str()).collect::<Vec<_>>(),
            ["quay.io", "*.corp.example"]
        );
        assert!(images[1].matches("registry.corp.example"));
        assert_eq!(rules(&cli.allowed_catalog_addresses).len(), 1);
        let defaults = Cli::try_parse_from(["catalog-operator"]).expect("defaults parse");
        assert!(
            rules(&defaults.allowed_registries).is_empty(),
            "allow all by default"
        );
        assert!(rules(&defaults.allowed_catalog_addresses).is_empty());
    }

    #[test]
    fn service_lookup_defaults_to_dns() {
        use olm_runtime::service_address::ServiceLookup;

        let defaults = Cli::try_parse_from(["catalog-operator"]).expect("defaults parse");
        assert_eq!(defaults.service_lookup.service_lookup, ServiceLookup::Dns);
        let cli = Cli::try_parse_from(["catalog-operator", "--service-lookup", "cluster-ip"])
            .expect("flags parse");
        assert_eq!(cli.service_lookup.service_lookup, ServiceLookup::ClusterIp);
    }
}
