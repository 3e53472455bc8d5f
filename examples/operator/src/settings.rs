//! What the operator reads from its environment: the namespaces to watch,
//! its own version (OLM sets both through the Deployment in the CSV) and
//! where to serve its probes.

/// Comma-separated namespaces to watch; empty (or unset) means all of them.
/// The CSV fills it from the pod's `olm.targetNamespaces` annotation, as
/// operator-sdk operators do, so it follows the OperatorGroup.
pub const WATCH_NAMESPACE_ENV: &str = "WATCH_NAMESPACE";
/// The operator's version as the bundle names it; the crate's version when
/// unset.
pub const OPERATOR_VERSION_ENV: &str = "OPERATOR_VERSION";

/// Where to serve the health probes, `host:port`; [`DEFAULT_PROBE_ADDRESS`]
/// when unset (named after operator-sdk's `--health-probe-bind-address`).
pub const PROBE_ADDRESS_ENV: &str = "HEALTH_PROBE_BIND_ADDRESS";
/// Where the probes are served in a pod; the CSV's probes name this port.
pub const DEFAULT_PROBE_ADDRESS: &str = "0.0.0.0:8081";

/// Which namespaces the operator reconciles Greetings in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchNamespaces {
    /// Every namespace (OLM's AllNamespaces install mode).
    All,
    /// These namespaces only, sorted and without repeats.
    Only(Vec<String>),
}

impl WatchNamespaces {
    /// Reads a `WATCH_NAMESPACE` value: names separated by commas, blanks
    /// around them ignored; no name at all means every namespace.
    pub fn parse(value: &str) -> WatchNamespaces {
        let mut names: Vec<String> = value
            .split(',')
            .map(str::trim)
            .filter(|name| !name.is_empty())
            .map(str::to_owned)
            .collect();
        names.sort();
        names.dedup();
        if names.is_empty() {
            WatchNamespaces::All
        } else {
            WatchNamespaces::Only(names)
        }
    }

    /// Reads [`WATCH_NAMESPACE_ENV`]; unset means every namespace.
    pub fn from_env() -> WatchNamespaces {
        WatchNamespaces::parse(&std::env::var(WATCH_NAMESPACE_ENV).unwrap_or_default())
    }
}

impl std::fmt::Display for WatchNamespaces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WatchNamespaces::All => f.write_str("all namespaces"),
            WatchNamespaces::Only(names) => f.write_str(&names.join(",")),
        }
    }
}

/// The version to report in each Greeting's status: `from_env` (the value of
/// [`OPERATOR_VERSION_ENV`]) unless it is blank, else the crate's version.
pub fn operator_version(from_env: Option<&str>) -> String {
    from_env
        .map(str::trim)
        .filter(|version| !version.is_empty())
        .unwrap_or(env!("CARGO_PKG_VERSION"))
        .to_owned()
}

/// The address to serve probes on: `from_env` (the value of
/// [`PROBE_ADDRESS_ENV`]) unless it is blank, else [`DEFAULT_PROBE_ADDRESS`].
pub fn probe_address(from_env: Option<&str>) -> String {
    from_env
        .map(str::trim)
        .filter(|address| !address.is_empty())
        .unwrap_or(DEFAULT_PROBE_ADDRESS)
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_namespace_values_read_as_operator_sdk_reads_them() {
        let only = |names: &[&str]| {
            WatchNamespaces::Only(names.iter().map(|name| (*name).to_owned()).collect())
        };
        let cases = [
            ("", WatchNamespaces::All),
            (" , ,", WatchNamespaces::All),
            ("team-a", only(&["team-a"])),
            ("team-b, team-a", only(&["team-a", "team-b"])),
            ("team-a,team-a,", only(&["team-a"])),
        ];
        for (value, want) in cases {
            assert_eq!(
                WatchNamespaces::parse(value),
                want,
                "WATCH_NAMESPACE={value:?}"
            );
        }
    }

    #[test]
    fn the_version_falls_back_to_the_crate_version() {
        assert_eq!(operator_version(Some("0.3.0")), "0.3.0");
        assert_eq!(operator_version(Some(" ")), env!("CARGO_PKG_VERSION"));
        assert_eq!(operator_version(None), env!("CARGO_PKG_VERSION"));
    }

    #[test]
    fn probes_are_served_on_8081_unless_told_otherwise() {
        assert_eq!(probe_address(None), "0.0.0.0:8081");
        assert_eq!(probe_address(Some("")), "0.0.0.0:8081");
        assert_eq!(probe_address(Some("127.0.0.1:9000")), "127.0.0.1:9000");
    }
}
