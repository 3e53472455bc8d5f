//! Command-line and environment settings of the bus, flattened into every
//! service's CLI.

use std::path::PathBuf;

/// How a service reaches NATS. Flatten it into the service's clap struct:
///
/// ```
/// #[derive(clap::Parser)]
/// struct Cli {
///     #[command(flatten)]
///     bus: olm_bus::BusArgs,
/// }
/// # use clap::Parser as _;
/// let cli = Cli::parse_from(["svc", "--nats-url", "nats://127.0.0.1:4222"]);
/// assert!(cli.bus.nats_url.is_some());
/// ```
#[derive(clap::Args, Clone, Debug, Default, PartialEq, Eq)]
#[command(next_help_heading = "NATS bus")]
pub struct BusArgs {
    /// NATS server URL, or several separated by commas, for example
    /// `nats://nats.olm.svc:4222`. Without it the bus is disabled: events
    /// are not published and services converge through their Kubernetes
    /// watches and resyncs alone, only more slowly.
    #[arg(long = "nats-url", env = "OLM_NATS_URL", value_name = "URL")]
    pub nats_url: Option<String>,

    /// NATS credentials file (a user JWT and NKey seed, as `nsc` writes it).
    #[arg(
        long = "nats-credentials",
        env = "OLM_NATS_CREDENTIALS",
        value_name = "FILE"
    )]
    pub nats_credentials: Option<PathBuf>,

    /// File holding this service's NKey seed (`SU...`): the service then
    /// authenticates with it, and NATS grants it only that service's
    /// subjects (see `olm_bus::auth`).
    #[arg(
        long = "nats-nkey-file",
        env = "OLM_NATS_NKEY_FILE",
        value_name = "FILE"
    )]
    pub nats_nkey_file: Option<PathBuf>,

    /// PEM file of the CA certificates that sign the NATS server's
    /// certificate. Setting it requires TLS on the connection.
    #[arg(long = "nats-ca-file", env = "OLM_NATS_CA_FILE", value_name = "FILE")]
    pub nats_ca_file: Option<PathBuf>,
}

impl BusArgs {
    /// Settings for a bus at `url`, as tests and tools use them.
    pub fn with_url(url: impl Into<String>) -> BusArgs {
        BusArgs {
            nats_url: Some(url.into()),
            ..BusArgs::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory as _, Parser};

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        bus: BusArgs,
    }

    #[test]
    fn command_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn the_bus_is_disabled_without_a_url() {
        let cli = Cli::try_parse_from(["svc"]).expect("parses");
        // The environment of the test runner may set OLM_NATS_URL.
        if std::env::var_os("OLM_NATS_URL").is_none() {
            assert_eq!(cli.bus, BusArgs::default());
        }
    }

    #[test]
    fn flags_parse() {
        let cli = Cli::try_parse_from([
            "svc",
            "--nats-url",
            "nats://a:4222,nats://b:4222",
            "--nats-credentials",
            "/etc/olm/nats.creds",
            "--nats-ca-file",
            "/etc/olm/ca.pem",
        ])
        .expect("parses");
        assert_eq!(
            cli.bus.nats_url.as_deref(),
            Some("nats://a:4222,nats://b:4222")
        );
        assert_eq!(
            cli.bus.nats_credentials,
            Some(PathBuf::from("/etc/olm/nats.creds"))
        );
        assert_eq!(cli.bus.nats_ca_file, Some(PathBuf::from("/etc/olm/ca.pem")));
    }
}
