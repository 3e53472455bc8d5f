//! The `packageserver` binary: serves `packages.operators.coreos.com/v1`
//! PackageManifests through the Kubernetes aggregation layer on its secure
//! port, with `/metrics`, `/healthz` and `/readyz` on the admin address.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use anyhow::Context as _;
use clap::Parser;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use olm_bus::{Bus, BusArgs, events::CatalogUpdated};
use olm_certs::{HotCertificate, Profile, RotationPolicy};
use olm_runtime::{
    admin::{AdminServer, Readiness},
    config::{AdminServerArgs, KubeArgs, TelemetryArgs, parse_duration},
    metrics::MetricsRegistry,
    service_address::{AddressResolver, ServiceLookupArgs},
    shutdown::{CancellationToken, DEFAULT_DRAIN_DEADLINE, TaskSet, on_signal},
    telemetry::{self, ServiceInfo},
};
use packageserver::{
    api::{App, OpenApi},
    auth::{
        AUTH_CONFIGMAP_NAME, AUTH_CONFIGMAP_NAMESPACE, AuthConfig, ClientCaVerifier, Delegated,
    },
    catalogs,
    certs::{CertConfig, CertController},
    metrics::Metrics,
    server,
    store::Store,
};

/// The name of this service, for telemetry.
const SERVICE_NAME: &str = "packageserver";

/// How often the delegated authentication settings are read again.
const AUTH_CONFIG_RESYNC: Duration = Duration::from_secs(30);

/// packageserver: the PackageManifest aggregated API.
#[derive(Debug, Parser)]
#[command(name = "packageserver", version)]
struct Cli {
    /// Port of the HTTPS API server.
    #[arg(
        long = "secure-port",
        env = "PACKAGESERVER_SECURE_PORT",
        default_value_t = 5443
    )]
    secure_port: u16,

    /// Address the HTTPS API server binds.
    #[arg(
        long = "bind-address",
        env = "PACKAGESERVER_BIND_ADDRESS",
        default_value = "0.0.0.0"
    )]
    secure_bind_address: std::net::IpAddr,

    /// Namespace whose catalogs every namespace sees.
    #[arg(
        long = "global-namespace",
        env = "GLOBAL_CATALOG_NAMESPACE",
        default_value = "olm"
    )]
    global_namespace: String,

    /// How often every catalog is refreshed even without a change.
    #[arg(long = "interval", env = "PACKAGESERVER_INTERVAL", default_value = "12h", value_parser = parse_duration)]
    interval: Duration,

    /// Namespace of packageserver's Service and certificate Secret.
    #[arg(
        long = "namespace",
        env = "PACKAGESERVER_NAMESPACE",
        default_value = "olm"
    )]
    namespace: String,

    /// Service the APIService points at (its names go into the certificate).
    #[arg(
        long = "service",
        env = "PACKAGESERVER_SERVICE",
        default_value = "packageserver-service"
    )]
    service: String,

    /// Port of that Service.
    #[arg(
        long = "service-port",
        env = "PACKAGESERVER_SERVICE_PORT",
        default_value_t = 443
    )]
    service_port: i32,

    /// Secret that stores the CA and serving certificate.
    #[arg(
        long = "cert-secret",
        env = "PACKAGESERVER_CERT_SECRET",
        default_value = "packageserver-service-cert"
    )]
    cert_secret: String,

    /// APIService whose caBundle packageserver keeps current.
    #[arg(
        long = "apiservice-name",
        env = "PACKAGESERVER_APISERVICE_NAME",
        default_value = "v1.packages.operators.coreos.com"
    )]
    apiservice_name: String,

    /// Create the APIService when it is missing.
    #[arg(long = "create-apiservice", env = "PACKAGESERVER_CREATE_APISERVICE", default_value_t = true, action = clap::ArgAction::Set)]
    create_apiservice: bool,

    /// Lifetime of a new CA.
    #[arg(long = "ca-lifetime", env = "PACKAGESERVER_CA_LIFETIME", default_value = "17520h", value_parser = parse_duration)]
    ca_lifetime: Duration,

    /// Lifetime of a new serving certificate.
    #[arg(long = "serving-cert-lifetime", env = "PACKAGESERVER_SERVING_CERT_LIFETIME", default_value = "2160h", value_parser = parse_duration)]
    serving_lifetime: Duration,

    /// Fraction of its lifetime after which the serving certificate is renewed.
    #[arg(
        long = "serving-cert-renew-fraction",
        env = "PACKAGESERVER_SERVING_CERT_RENEW_FRACTION",
        default_value_t = 0.8
    )]
    serving_renew_fraction: f64,

    /// Validity left on the CA when it is replaced.
    #[arg(long = "ca-renew-before", env = "PACKAGESERVER_CA_RENEW_BEFORE", default_value = "1440h", value_parser = parse_duration)]
    ca_renew_before: Duration,

    /// Time given to a new CA bundle or certificate to reach every client and
    /// replica before the next rotation step relies on it.
    #[arg(long = "cert-overlap", env = "PACKAGESERVER_CERT_OVERLAP", default_value = "1h", value_parser = parse_duration)]
    cert_overlap: Duration,

    #[command(flatten)]
    service_lookup: ServiceLookupArgs,
    #[command(flatten)]
    kube: KubeArgs,
    #[command(flatten)]
    bus: BusArgs,
    #[command(flatten)]
    telemetry: TelemetryArgs,
    #[command(flatten)]
    admin: AdminServerArgs,
}

impl Cli {
    fn policy(&self) -> RotationPolicy {
        RotationPolicy {
            ca_lifetime: self.ca_lifetime,
            serving_lifetime: self.serving_lifetime,
            serving_renew_fraction: self.serving_renew_fraction,
            ca_renew_before: self.ca_renew_before,
            overlap: self.cert_overlap,
        }
    }
}

async fn load_auth_config(client: &kube::Client) -> anyhow::Result<AuthConfig> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), AUTH_CONFIGMAP_NAMESPACE);
    let configmap = api
        .get(AUTH_CONFIGMAP_NAME)
        .await
        .with_context(|| format!("reading {AUTH_CONFIGMAP_NAMESPACE}/{AUTH_CONFIGMAP_NAME}"))?;
    Ok(AuthConfig::from_configmap(
        &configmap.data.unwrap_or_default(),
    )?)
}

async fn keep_auth_config(
    client: kube::Client,
    delegated: Arc<Delegated>,
    verifier: Arc<ClientCaVerifier>,
    ready: impl FnOnce() + Send,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let mut ready = Some(ready);
    loop {
        match load_auth_config(&client).await {
            Ok(config) => {
                if *delegated.config() != config {
                    verifier.set_cas(config.all_client_cas())?;
                    delegated.set_config(config);
                    tracing::info!("loaded delegated authentication settings");
                }
                if let Some(ready) = ready.take() {
                    ready();
                }
            }
            Err(error) => tracing::warn!(
                error = format!("{error:#}"),
                "cannot read delegated authentication settings"
            ),
        }
        let wait = if ready.is_some() {
            Duration::from_secs(2)
        } else {
            AUTH_CONFIG_RESYNC
        };
        tokio::select! {
            () = stop.cancelled() => return Ok(()),
            () = tokio::time::sleep(wait) => {}
        }
    }
}

fn initial_resource_version() -> u64 {
    // Clock-derived (microseconds), so the version ranges of replicas started
    // at different times rarely overlap: a watch that reconnects to another
    // replica then gets 410 Gone and relists instead of resuming from a
    // version that means something else there.
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX / 2))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let _telemetry = telemetry::init(
        &cli.telemetry,
        &ServiceInfo::new(SERVICE_NAME, env!("CARGO_PKG_VERSION")),
    )?;
    let policy = cli.policy();
    policy.validate().context("invalid certificate settings")?;
    let config = cli
        .kube
        .config_for(SERVICE_NAME, env!("CARGO_PKG_VERSION"))
        .await
        .context("reading the kube configuration")?;
    let client = kube::Client::try_from(config).context("building the kube client")?;

    let mut registry = MetricsRegistry::default();
    let metrics = Metrics::register(&mut registry);
    // The bus's counters, exported once it is connected.
    let bus_metrics = olm_bus::metrics::BusCollector::new();
    registry
        .component("packageserver")
        .register_collector(Box::new(bus_metrics.clone()));
    let readiness = Readiness::default();
    let certificates_ready = readiness.gate("certificates");
    let auth_ready = readiness.gate("authentication");
    let catalogs_ready = readiness.gate("catalogsources");
    let shutdown = on_signal()?;
    let admin =
        AdminServer::from_args(&cli.admin, &client, Arc::new(registry), readiness.clone()).await?;
    let mut tasks = TaskSet::new(shutdown.clone());
    tasks.spawn("admin-server", admin.serve(shutdown.clone()));

    let store = Arc::new(Store::new(
        cli.global_namespace.clone(),
        initial_resource_version(),
    ));
    let delegated = Arc::new(Delegated::new(client.clone()));
    let verifier = ClientCaVerifier::new();
    tasks.spawn(
        "authentication-settings",
        keep_auth_config(
            client.clone(),
            Arc::clone(&delegated),
            Arc::clone(&verifier),
            move || auth_ready.set(),
            shutdown.clone(),
        ),
    );

    let certificate = HotCertificate::new();
    let certs = CertController::new(
        client.clone(),
        CertConfig {
            namespace: cli.namespace.clone(),
            secret_name: cli.cert_secret.clone(),
            apiservice_name: cli.apiservice_name.clone(),
            service_name: cli.service.clone(),
            service_port: cli.service_port,
            create_apiservice: cli.create_apiservice,
            policy,
            profile: Profile::for_service(&cli.service, &cli.namespace),
        },
        Arc::clone(&certificate),
        metrics.certs.clone(),
    );
    let stop = shutdown.clone();
    tasks.spawn("certificates", async move {
        certs.run(move || certificates_ready.set(), stop).await;
        Ok::<(), anyhow::Error>(())
    });

    // Catalog content changes announced on the bus refresh the catalog at
    // once; without NATS the watch and the timer do it alone.
    let bus = Bus::connect(&cli.bus, SERVICE_NAME)
        .await
        .context("connecting to the NATS bus")?;
    bus_metrics.attach(&bus);
    let updates = bus
        .subscribe_all::<CatalogUpdated>()
        .await
        .context("subscribing to catalog updates")?;
    let (pokes, poked) = tokio::sync::mpsc::channel(catalogs::POKE_CHANNEL_CAPACITY);
    let stop = shutdown.clone();
    tasks.spawn("catalog-updates", async move {
        catalogs::forward_catalog_updates(updates, pokes, stop).await;
        Ok::<(), anyhow::Error>(())
    });
    tasks.spawn(
        "catalogs",
        catalogs::run(
            client.clone(),
            Arc::clone(&store),
            metrics.catalogs.clone(),
            catalogs::RefreshSettings {
                interval: cli.interval,
                resolver: AddressResolver::new(cli.service_lookup.service_lookup, client.clone()),
            },
            poked,
            move || catalogs_ready.set(),
            shutdown.clone(),
        ),
    );

    let tls = Arc::new(olm_certs::server_config(certificate, Some(verifier))?);
    let app = Arc::new(App {
        store,
        gate: delegated,
        readiness,
        openapi: OpenApi::render(),
        metrics: metrics.api,
    });
    let address = SocketAddr::new(cli.secure_bind_address, cli.secure_port);
    let stop = shutdown.clone();
    tasks.spawn("api-server", async move {
        // Accept connections only once a certificate is served and client
        // certificates can be verified: a handshake refused now would make
        // the aggregator mark the APIService unavailable for a while.
        while app
            .readiness
            .unmet()
            .iter()
            .any(|gate| gate == "certificates" || gate == "authentication")
        {
            tokio::select! {
                () = stop.cancelled() => return Ok(()),
                () = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .with_context(|| format!("binding {address}"))?;
        server::serve(listener, tls, app, stop).await?;
        Ok::<(), anyhow::Error>(())
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
    fn default_certificate_settings_are_valid() {
        let cli = Cli::try_parse_from(["packageserver"]).unwrap();
        cli.policy().validate().unwrap();
        assert_eq!(cli.ca_lifetime, olm_certs::policy::UPSTREAM_CERT_LIFETIME);
    }

    #[test]
    fn upstream_flags_parse() {
        let cli = Cli::try_parse_from([
            "packageserver",
            "--interval",
            "30s",
            "--global-namespace",
            "operator-lifecycle-manager",
            "--secure-port",
            "5443",
        ])
        .unwrap();
        assert_eq!(cli.interval, Duration::from_secs(30));
        assert_eq!(cli.global_namespace, "operator-lifecycle-manager");
    }

    #[test]
    fn service_lookup_defaults_to_dns() {
        use olm_runtime::service_address::ServiceLookup;

        let defaults = Cli::try_parse_from(["packageserver"]).unwrap();
        assert_eq!(defaults.service_lookup.service_lookup, ServiceLookup::Dns);
        let cli = Cli::try_parse_from(["packageserver", "--service-lookup", "cluster-ip"]).unwrap();
        assert_eq!(cli.service_lookup.service_lookup, ServiceLookup::ClusterIp);
    }
}
