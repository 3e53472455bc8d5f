//! Command-line argument groups shared by every service binary.
//!
//! Each group is a `clap::Args` struct meant to be `#[command(flatten)]`ed into
//! the one clap struct of a binary, so every service spells the same setting the
//! same way. Every flag can also be set from the environment, because that is
//! how a Deployment configures a container.
//!
//! ```
//! use clap::Parser;
//! use olm_runtime::config::{AdminServerArgs, KubeArgs, LeaderElectionArgs, TelemetryArgs};
//!
//! /// Example operator.
//! #[derive(Parser)]
//! struct Cli {
//!     #[command(flatten)]
//!     kube: KubeArgs,
//!     #[command(flatten)]
//!     telemetry: TelemetryArgs,
//!     #[command(flatten)]
//!     admin: AdminServerArgs,
//!     #[command(flatten)]
//!     leader_election: LeaderElectionArgs,
//! }
//!
//! let cli = Cli::parse_from(["example-operator", "--leader-elect"]);
//! assert!(cli.leader_election.enabled);
//! ```

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use clap::{ArgAction, Args, ValueEnum};
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::error::{Error, Result};

/// Where the admin server (`/metrics`, `/healthz`, `/readyz`) listens unless told
/// otherwise; upstream OLM serves the same endpoints on `:8080`.
pub const DEFAULT_ADMIN_BIND_ADDRESS: &str = "0.0.0.0:8080";

/// How long a lease is valid after its last renewal. Shorter than client-go's
/// 15 s so that a standby replaces a crashed leader within
/// [`MAX_CRASH_HAND_OVER`]: expiry is counted from the last renewal the standby
/// saw, which can be one retry period before the crash.
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(12);

/// The longest a standby may take to lead after the leader crashed without
/// releasing its lease (a graceful release hands over at once).
pub const MAX_CRASH_HAND_OVER: Duration = Duration::from_secs(15);

/// How long a leader keeps trying to renew before it steps down. Must be
/// shorter than [`DEFAULT_LEASE_DURATION`] so that a leader that cannot renew
/// has stopped before anyone else may take over.
pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(8);

/// How often a leader renews and a candidate retries (client-go's default).
pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(2);

/// The file in which Kubernetes tells a pod its namespace.
const SERVICE_ACCOUNT_NAMESPACE_FILE: &str =
    "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// How to reach the Kubernetes API server.
#[derive(Args, Clone, Debug, Default, PartialEq, Eq)]
pub struct KubeArgs {
    /// Path to a kubeconfig file (a list separated by the platform's path
    /// separator is merged like kubectl does); in-cluster configuration is used
    /// when neither this nor `~/.kube/config` exists.
    #[arg(long = "kubeconfig", env = "KUBECONFIG", value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,

    /// The kubeconfig context to use instead of its current context.
    #[arg(long = "context", env = "KUBE_CONTEXT", value_name = "NAME")]
    pub context: Option<String>,
}

impl KubeArgs {
    /// Builds the client configuration these arguments describe.
    pub async fn config(&self) -> Result<kube::Config> {
        let options = KubeConfigOptions {
            context: self.context.clone(),
            ..KubeConfigOptions::default()
        };
        match &self.kubeconfig {
            Some(paths) => {
                let mut merged: Option<Kubeconfig> = None;
                for path in std::env::split_paths(paths).filter(|p| !p.as_os_str().is_empty()) {
                    let next =
                        Kubeconfig::read_from(&path).map_err(|source| Error::Kubeconfig {
                            source: Box::new(source),
                        })?;
                    merged = Some(match merged {
                        Some(current) => {
                            current.merge(next).map_err(|source| Error::Kubeconfig {
                                source: Box::new(source),
                            })?
                        }
                        None => next,
                    });
                }
                let kubeconfig = merged.ok_or_else(|| Error::InvalidArgument {
                    argument: "--kubeconfig",
                    reason: "no path given".to_owned(),
                })?;
                kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                    .await
                    .map_err(|source| Error::Kubeconfig {
                        source: Box::new(source),
                    })
            }
            None if self.context.is_some() => kube::Config::from_kubeconfig(&options)
                .await
                .map_err(|source| Error::Kubeconfig {
                    source: Box::new(source),
                }),
            None => kube::Config::infer()
                .await
                .map_err(|source| Error::InferKubeConfig {
                    source: Box::new(source),
                }),
        }
    }

    /// [`Self::config`], with `<service>/<version>` as the User-Agent of
    /// every request (see [`identify`]): what a service binary connects with.
    pub async fn config_for(&self, service: &str, version: &str) -> Result<kube::Config> {
        let mut config = self.config().await?;
        identify(&mut config, service, version);
        Ok(config)
    }

    /// A client with [`Self::config_for`]'s configuration: what a service
    /// binary that needs nothing more than its client connects with.
    pub async fn client_for(&self, service: &str, version: &str) -> Result<kube::Client> {
        let config = self.config_for(service, version).await?;
        kube::Client::try_from(config).map_err(|source| Error::KubeClient {
            source: Box::new(source),
        })
    }

    /// Builds a client for the API server these arguments describe.
    pub async fn client(&self) -> Result<kube::Client> {
        let config = self.config().await?;
        kube::Client::try_from(config).map_err(|source| Error::KubeClient {
            source: Box::new(source),
        })
    }
}

/// How log lines are written to standard output.
#[derive(ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Plain,
    /// One JSON object per line, for log collectors.
    Json,
}

/// Logging and trace export.
#[derive(Args, Clone, Debug, Default, PartialEq, Eq)]
pub struct TelemetryArgs {
    /// Log line format.
    #[arg(long = "log-format", env = "OLM_LOG_FORMAT", value_enum, default_value_t = LogFormat::Plain)]
    pub log_format: LogFormat,

    /// Which logs and spans to keep, in `tracing-subscriber` `EnvFilter` syntax
    /// (for example `info,olm_runtime=debug`).
    #[arg(
        long = "log-filter",
        env = "RUST_LOG",
        default_value = "info",
        value_name = "FILTER"
    )]
    pub log_filter: String,

    /// OTLP/gRPC endpoint to export traces to (for example
    /// `http://otel-collector:4317`); no traces are exported when unset.
    #[arg(
        long = "otlp-endpoint",
        env = "OTEL_EXPORTER_OTLP_ENDPOINT",
        value_name = "URL"
    )]
    pub otlp_endpoint: Option<String>,

    /// Overrides the `service.name` resource attribute of exported traces
    /// (the binary's name by default).
    #[arg(long = "service-name", env = "OTEL_SERVICE_NAME", value_name = "NAME")]
    pub service_name: Option<String>,
}

/// How the secured `/metrics` listener checks its callers.
#[derive(ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MetricsAuth {
    /// Every request needs `Authorization: Bearer <token>`; the token is
    /// checked with a TokenReview and its user authorized for `get` on the
    /// non-resource URL `/metrics` with a SubjectAccessReview, as
    /// kube-rbac-proxy does.
    #[default]
    Kubernetes,
    /// Anyone who can reach the port may read the metrics (TLS only), for
    /// local development.
    None,
}

/// The admin server: plain HTTP for kubelet probes (and, unless a secured
/// metrics address is given, for metrics scraping), plus an opt-in HTTPS
/// listener for `/metrics` alone.
#[derive(Args, Clone, Debug, PartialEq, Eq)]
pub struct AdminServerArgs {
    /// Address serving `/healthz` and `/readyz` over plain HTTP, and
    /// `/metrics` too unless `--metrics-bind-address` is given.
    #[arg(
        long = "admin-bind-address",
        env = "OLM_ADMIN_BIND_ADDRESS",
        default_value = DEFAULT_ADMIN_BIND_ADDRESS,
        value_name = "ADDR"
    )]
    pub bind_address: SocketAddr,

    /// Serve `/metrics` over HTTPS on this address (for example
    /// `0.0.0.0:8443`), checked as `--metrics-auth` says, and no longer on the
    /// plain admin address.
    #[arg(
        long = "metrics-bind-address",
        env = "OLM_METRICS_BIND_ADDRESS",
        value_name = "ADDR"
    )]
    pub metrics_bind_address: Option<SocketAddr>,

    /// PEM certificate chain of the secured metrics listener; a self-signed
    /// certificate is made in memory at start when neither this nor the key
    /// is given. Read once at start.
    #[arg(
        long = "metrics-tls-cert-file",
        env = "OLM_METRICS_TLS_CERT_FILE",
        value_name = "PATH",
        requires = "metrics_tls_key_file",
        requires = "metrics_bind_address"
    )]
    pub metrics_tls_cert_file: Option<PathBuf>,

    /// PEM private key of `--metrics-tls-cert-file`.
    #[arg(
        long = "metrics-tls-key-file",
        env = "OLM_METRICS_TLS_KEY_FILE",
        value_name = "PATH",
        requires = "metrics_tls_cert_file"
    )]
    pub metrics_tls_key_file: Option<PathBuf>,

    /// Who may read the secured `/metrics`: `kubernetes` (a bearer token
    /// allowed `get` on `/metrics` by RBAC) or `none`. Only used with
    /// `--metrics-bind-address`.
    #[arg(
        long = "metrics-auth",
        env = "OLM_METRICS_AUTH",
        value_enum,
        default_value_t = MetricsAuth::Kubernetes
    )]
    pub metrics_auth: MetricsAuth,
}

impl Default for AdminServerArgs {
    fn default() -> Self {
        Self {
            bind_address: SocketAddr::from(([0, 0, 0, 0], 8080)),
            metrics_bind_address: None,
            metrics_tls_cert_file: None,
            metrics_tls_key_file: None,
            metrics_auth: MetricsAuth::default(),
        }
    }
}

/// Leader election on a `coordination.k8s.io/v1` Lease. Flag names follow
/// Kubernetes' own components (`--leader-elect`, `--leader-elect-*`).
#[derive(Args, Clone, Debug, PartialEq, Eq)]
pub struct LeaderElectionArgs {
    /// Take part in leader election, so that only one replica acts at a time.
    #[arg(
        long = "leader-elect",
        env = "OLM_LEADER_ELECT",
        action = ArgAction::Set,
        num_args = 0..=1,
        default_value_t = false,
        default_missing_value = "true",
        value_name = "BOOL"
    )]
    pub enabled: bool,

    /// Name of the Lease object (the service's name by default).
    #[arg(
        long = "leader-elect-resource-name",
        env = "OLM_LEADER_ELECT_RESOURCE_NAME",
        value_name = "NAME"
    )]
    pub lease_name: Option<String>,

    /// Namespace of the Lease object (the pod's namespace by default).
    #[arg(
        long = "leader-elect-resource-namespace",
        env = "POD_NAMESPACE",
        value_name = "NAMESPACE"
    )]
    pub lease_namespace: Option<String>,

    /// This replica's identity in the Lease (the pod's name by default, else
    /// `<hostname>_<pid>`); it must differ between replicas.
    #[arg(long = "leader-elect-identity", env = "POD_NAME", value_name = "ID")]
    pub identity: Option<String>,

    /// How long a lease is valid after its last renewal (for example `15s`).
    #[arg(
        long = "leader-elect-lease-duration",
        env = "OLM_LEADER_ELECT_LEASE_DURATION",
        default_value = "12s",
        value_parser = parse_duration,
        value_name = "DURATION"
    )]
    pub lease_duration: Duration,

    /// How long the leader keeps retrying a failed renewal before it steps down.
    #[arg(
        long = "leader-elect-renew-deadline",
        env = "OLM_LEADER_ELECT_RENEW_DEADLINE",
        default_value = "8s",
        value_parser = parse_duration,
        value_name = "DURATION"
    )]
    pub renew_deadline: Duration,

    /// How often the leader renews and a candidate retries.
    #[arg(
        long = "leader-elect-retry-period",
        env = "OLM_LEADER_ELECT_RETRY_PERIOD",
        default_value = "2s",
        value_parser = parse_duration,
        value_name = "DURATION"
    )]
    pub retry_period: Duration,
}

impl Default for LeaderElectionArgs {
    fn default() -> Self {
        Self {
            enabled: false,
            lease_name: None,
            lease_namespace: None,
            identity: None,
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
        }
    }
}

impl LeaderElectionArgs {
    /// This replica's leadership: campaigning for the Lease named
    /// `default_lease_name` (see [`Self::resolve`]), or always leading when
    /// leader election is off.
    pub fn handle(
        &self,
        default_lease_name: &str,
        client: &kube::Client,
    ) -> Result<crate::leader::LeaderHandle> {
        match self.resolve(default_lease_name, client)? {
            Some(election) => crate::leader::LeaderHandle::spawn(client.clone(), election),
            None => Ok(crate::leader::LeaderHandle::always_leader()),
        }
    }

    /// Turns the arguments into an election configuration, filling in defaults
    /// from the environment: the Lease is named `default_lease_name` unless
    /// overridden, lives in the pod's namespace (or the client's default
    /// namespace outside a cluster), and this replica is named after its pod
    /// (or `<hostname>_<pid>`). Returns `None` when leader election is disabled.
    pub fn resolve(
        &self,
        default_lease_name: &str,
        client: &kube::Client,
    ) -> Result<Option<crate::leader::LeaderElectionConfig>> {
        if !self.enabled {
            return Ok(None);
        }
        let namespace = match &self.lease_namespace {
            Some(namespace) => namespace.clone(),
            None => std::fs::read_to_string(SERVICE_ACCOUNT_NAMESPACE_FILE)
                .ok()
                .map(|namespace| namespace.trim().to_owned())
                .filter(|namespace| !namespace.is_empty())
                .unwrap_or_else(|| client.default_namespace().to_owned()),
        };
        let identity = self.identity.clone().unwrap_or_else(default_identity);
        let config = crate::leader::LeaderElectionConfig {
            lease_name: self
                .lease_name
                .clone()
                .unwrap_or_else(|| default_lease_name.to_owned()),
            lease_namespace: namespace,
            identity,
            lease_duration: self.lease_duration,
            renew_deadline: self.renew_deadline,
            retry_period: self.retry_period,
        };
        config.validate()?;
        Ok(Some(config))
    }
}

/// `<hostname>_<pid>`: unique per process on one host, so that two processes
/// on a developer's machine never believe they hold the same lease.
fn default_identity() -> String {
    let hostname = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "unknown-host".to_owned());
    format!("{hostname}_{}", std::process::id())
}

/// Parses a duration such as `15s`, `1m30s` or `500ms` (Go's and jiff's
/// "friendly" notation); negative durations are rejected.
pub fn parse_duration(text: &str) -> std::result::Result<Duration, String> {
    let signed: jiff::SignedDuration = text
        .trim()
        .parse()
        .map_err(|error| format!("invalid duration {text:?}: {error}"))?;
    Duration::try_from(signed)
        .map_err(|_| format!("invalid duration {text:?}: must not be negative"))
}

/// Names the service in the `User-Agent` of every request made with
/// `config` (`<service>/<version>`), as client-go's binaries do, so that the
/// API server's audit log and request metrics tell OLM's services apart.
pub fn identify(config: &mut kube::Config, service: &str, version: &str) {
    let agent = format!("{service}/{version}");
    match http::HeaderValue::from_str(&agent) {
        Ok(value) => {
            config
                .headers
                .retain(|(name, _)| name != http::header::USER_AGENT);
            config.headers.push((http::header::USER_AGENT, value));
        }
        Err(_) => tracing::warn!(agent, "not a valid User-Agent; requests go without one"),
    }
}

/// The flags of `command` (and of its subcommands) that cannot be set from
/// the environment: every service's flags can, so that a Deployment sets
/// them all the same way. `help` and `version` are not flags of the kind.
pub fn flags_without_env(command: &clap::Command) -> Vec<String> {
    let own = command
        .get_arguments()
        .filter(|arg| !matches!(arg.get_id().as_str(), "help" | "version"))
        .filter(|arg| !arg.is_positional() && arg.get_env().is_none())
        .map(|arg| format!("{} {}", command.get_name(), arg.get_id()));
    let nested = command.get_subcommands().flat_map(flags_without_env);
    own.chain(nested).collect()
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::*;

    #[test]
    fn flags_without_env_are_found_in_subcommands_too() {
        let command = clap::Command::new("svc")
            .arg(clap::Arg::new("with").long("with").env("SVC_WITH"))
            .arg(clap::Arg::new("without").long("without"))
            .arg(clap::Arg::new("file"))
            .subcommand(clap::Command::new("sub").arg(clap::Arg::new("bare").long("bare")));
        assert_eq!(flags_without_env(&command), ["svc without", "sub bare"]);
    }

    /// The shape every service binary has: its own flags plus the shared groups.
    #[derive(Parser, Debug)]
    #[command(name = "sample-operator")]
    struct SampleCli {
        /// A flag of the service itself.
        #[arg(long, env = "SAMPLE_INTERVAL", default_value = "5m", value_parser = parse_duration)]
        interval: Duration,
        #[command(flatten)]
        kube: KubeArgs,
        #[command(flatten)]
        telemetry: TelemetryArgs,
        #[command(flatten)]
        admin: AdminServerArgs,
        #[command(flatten)]
        leader_election: LeaderElectionArgs,
    }

    #[test]
    fn composite_command_is_well_formed() {
        SampleCli::command().debug_assert();
    }

    #[test]
    fn every_flag_can_be_set_from_the_environment() {
        let command = SampleCli::command();
        let missing: Vec<_> = command
            .get_arguments()
            .filter(|arg| !matches!(arg.get_id().as_str(), "help" | "version"))
            .filter(|arg| arg.get_env().is_none())
            .map(|arg| arg.get_id().to_string())
            .collect();
        assert!(missing.is_empty(), "flags without env: {missing:?}");
    }

    #[test]
    fn defaults_match_the_named_constants() {
        let cli = SampleCli::try_parse_from(["sample-operator"]).expect("defaults parse");
        assert_eq!(cli.admin, AdminServerArgs::default());
        assert_eq!(
            cli.admin.bind_address,
            DEFAULT_ADMIN_BIND_ADDRESS
                .parse::<SocketAddr>()
                .expect("valid address")
        );
        assert_eq!(cli.leader_election.lease_duration, DEFAULT_LEASE_DURATION);
        assert_eq!(cli.leader_election.renew_deadline, DEFAULT_RENEW_DEADLINE);
        assert_eq!(cli.leader_election.retry_period, DEFAULT_RETRY_PERIOD);
        assert!(!cli.leader_election.enabled);
        assert_eq!(cli.telemetry.log_format, LogFormat::Plain);
    }

    #[test]
    fn flags_parse() {
        let cli = SampleCli::try_parse_from([
            "sample-operator",
            "--kubeconfig",
            "/tmp/kubeconfig-of-sample",
            "--context",
            "sample-context",
            "--log-format",
            "json",
            "--log-filter",
            "debug",
            "--otlp-endpoint",
            "http://127.0.0.1:4317",
            "--service-name",
            "sample-service",
            "--admin-bind-address",
            "127.0.0.1:18080",
            "--metrics-bind-address",
            "127.0.0.1:18443",
            "--metrics-tls-cert-file",
            "/tmp/sample-metrics.crt",
            "--metrics-tls-key-file",
            "/tmp/sample-metrics.key",
            "--metrics-auth",
            "none",
            "--leader-elect",
            "--leader-elect-resource-name",
            "sample-lease",
            "--leader-elect-resource-namespace",
            "sample-namespace",
            "--leader-elect-identity",
            "sample-pod",
            "--leader-elect-lease-duration",
            "30s",
            "--leader-elect-renew-deadline",
            "20s",
            "--leader-elect-retry-period",
            "500ms",
        ])
        .expect("flags parse");
        assert_eq!(cli.kube.context.as_deref(), Some("sample-context"));
        assert_eq!(cli.telemetry.log_format, LogFormat::Json);
        assert_eq!(
            cli.telemetry.service_name.as_deref(),
            Some("sample-service")
        );
        assert!(cli.leader_election.enabled);
        assert_eq!(cli.leader_election.lease_duration, Duration::from_secs(30));
        assert_eq!(cli.leader_election.retry_period, Duration::from_millis(500));
        assert_eq!(cli.admin.bind_address.port(), 18080);
        assert_eq!(
            cli.admin.metrics_bind_address.map(|address| address.port()),
            Some(18443)
        );
        assert_eq!(
            cli.admin.metrics_tls_key_file.as_deref(),
            Some(std::path::Path::new("/tmp/sample-metrics.key"))
        );
        assert_eq!(cli.admin.metrics_auth, MetricsAuth::None);
    }

    #[test]
    fn secured_metrics_default_to_kubernetes_auth_and_a_generated_certificate() {
        let cli = SampleCli::try_parse_from([
            "sample-operator",
            "--metrics-bind-address",
            "127.0.0.1:18443",
        ])
        .expect("flags parse");
        assert_eq!(cli.admin.metrics_auth, MetricsAuth::Kubernetes);
        assert_eq!(cli.admin.metrics_tls_cert_file, None);
        assert_eq!(cli.admin.metrics_tls_key_file, None);
    }

    #[test]
    fn metrics_certificate_flags_come_together_with_an_address() {
        for args in [
            &[
                "--metrics-bind-address",
                "127.0.0.1:18443",
                "--metrics-tls-cert-file",
                "/tmp/c",
            ][..],
            &[
                "--metrics-bind-address",
                "127.0.0.1:18443",
                "--metrics-tls-key-file",
                "/tmp/k",
            ],
            &[
                "--metrics-tls-cert-file",
                "/tmp/c",
                "--metrics-tls-key-file",
                "/tmp/k",
            ],
        ] {
            let error = SampleCli::try_parse_from(
                std::iter::once("sample-operator").chain(args.iter().copied()),
            )
            .expect_err("incomplete");
            assert_eq!(
                error.kind(),
                clap::error::ErrorKind::MissingRequiredArgument,
                "{args:?}: {error}"
            );
        }
    }

    #[test]
    fn leader_elect_accepts_an_explicit_value() {
        let cli = SampleCli::try_parse_from(["sample-operator", "--leader-elect=false"])
            .expect("flag parses");
        assert!(!cli.leader_election.enabled);
        let cli = SampleCli::try_parse_from(["sample-operator", "--leader-elect=true"])
            .expect("flag parses");
        assert!(cli.leader_election.enabled);
    }

    /// A client for an address where nothing listens; building it needs no
    /// server.
    fn offline_client() -> kube::Client {
        let mut config = kube::Config::new("http://127.0.0.1:9".parse().expect("valid URL"));
        config.default_namespace = "sample-default-namespace".to_owned();
        kube::Client::try_from(config).expect("client builds")
    }

    #[tokio::test]
    async fn disabled_election_resolves_to_nothing() {
        let args = LeaderElectionArgs::default();
        assert_eq!(
            args.resolve("sample-operator", &offline_client())
                .expect("valid"),
            None
        );
    }

    #[tokio::test]
    async fn election_defaults_come_from_the_service_and_environment() {
        let args = LeaderElectionArgs {
            enabled: true,
            ..LeaderElectionArgs::default()
        };
        let config = args
            .resolve("sample-operator", &offline_client())
            .expect("valid")
            .expect("enabled");
        assert_eq!(config.lease_name, "sample-operator");
        assert!(!config.identity.is_empty());
        assert!(
            config
                .identity
                .ends_with(&format!("_{}", std::process::id())),
            "{}",
            config.identity
        );
        if !std::path::Path::new(SERVICE_ACCOUNT_NAMESPACE_FILE).exists() {
            assert_eq!(config.lease_namespace, "sample-default-namespace");
        }

        let explicit = LeaderElectionArgs {
            enabled: true,
            lease_name: Some("sample-lease".to_owned()),
            lease_namespace: Some("sample-namespace".to_owned()),
            identity: Some("sample-pod".to_owned()),
            ..LeaderElectionArgs::default()
        };
        let config = explicit
            .resolve("sample-operator", &offline_client())
            .expect("valid")
            .expect("enabled");
        assert_eq!(
            (
                config.lease_name.as_str(),
                config.lease_namespace.as_str(),
                config.identity.as_str()
            ),
            ("sample-lease", "sample-namespace", "sample-pod")
        );
    }

    #[tokio::test]
    async fn unsafe_election_timing_is_rejected() {
        let args = LeaderElectionArgs {
            enabled: true,
            identity: Some("sample-pod".to_owned()),
            renew_deadline: Duration::from_secs(20),
            ..LeaderElectionArgs::default()
        };
        let error = args
            .resolve("sample-operator", &offline_client())
            .expect_err("renew deadline longer than the lease");
        assert!(error.to_string().contains("renew deadline"), "{error}");
    }

    #[test]
    fn durations_parse_in_friendly_notation() {
        assert_eq!(parse_duration("15s"), Ok(Duration::from_secs(15)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("soon").is_err());
    }

    #[test]
    fn identify_sets_one_user_agent() {
        let mut config = kube::Config::new("https://127.0.0.1:6443".parse().unwrap());
        identify(&mut config, "catalog-operator", "0.1.0");
        identify(&mut config, "catalog-operator", "0.2.0");
        let agents: Vec<_> = config
            .headers
            .iter()
            .filter(|(name, _)| name == http::header::USER_AGENT)
            .map(|(_, value)| value.to_str().unwrap().to_owned())
            .collect();
        assert_eq!(agents, ["catalog-operator/0.2.0"]);
        identify(&mut config, "bad\nname", "1");
        assert_eq!(config.headers.len(), 1, "an invalid agent is not sent");
    }
}
