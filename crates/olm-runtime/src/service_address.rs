//! Dialling a Service by its ClusterIP instead of its cluster DNS name.
//!
//! OLM reaches catalog registries at `<service>.<namespace>.svc:<port>`, a
//! name only cluster DNS resolves. A service running as a host process next
//! to a cluster (the developer loop, end-to-end tests with a real node) has
//! no cluster DNS, but kube-proxy still routes ClusterIPs from the host. With
//! [`ServiceLookup::ClusterIp`] an [`AddressResolver`] reads the Service
//! through the API and dials `<spec.clusterIP>:<port>` instead; every other
//! address is dialled as given.
//!
//! ```
//! use olm_runtime::service_address::{ServiceHost, parse_service_host};
//!
//! assert_eq!(
//!     parse_service_host("http://widgets.team.svc.cluster.local:50051"),
//!     Some(ServiceHost { name: "widgets", namespace: "team", port: Some(50051) })
//! );
//! assert_eq!(parse_service_host("10.96.0.12:50051"), None);
//! ```

use std::net::{IpAddr, SocketAddr};

use clap::{Args, ValueEnum};
use k8s_openapi::api::core::v1::Service;
use kube::{Api, Client};

use crate::error::{Error, Result};

/// The longest host name DNS allows (RFC 1035, without the trailing dot).
const MAX_HOST_LEN: usize = 253;

/// The longest label of a host name, and of a Kubernetes Service or
/// Namespace name.
const MAX_LABEL_LEN: usize = 63;

/// The `spec.clusterIP` of a headless Service.
const HEADLESS: &str = "None";

/// How an address naming a Service (`<service>.<namespace>.svc[:port]`) is
/// dialled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum ServiceLookup {
    /// As given, through cluster DNS: right for a pod in the cluster.
    #[default]
    Dns,
    /// At the Service's ClusterIP, read through the API: for a process
    /// outside the cluster network (or a pod without cluster DNS) on a host
    /// where kube-proxy routes ClusterIPs.
    ClusterIp,
}

/// The `--service-lookup` flag, to flatten into a binary's clap struct so
/// that every service spells it the same way.
#[derive(Args, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServiceLookupArgs {
    /// How registry addresses naming a Service
    /// (`<service>.<namespace>.svc[:port]`) are dialled: `dns` as given, or
    /// `cluster-ip` at the Service's ClusterIP read through the API, for
    /// running outside the cluster network where kube-proxy routes
    /// ClusterIPs but cluster DNS does not resolve.
    #[arg(
        long = "service-lookup",
        env = "OLM_SERVICE_LOOKUP",
        value_enum,
        default_value_t = ServiceLookup::Dns
    )]
    pub service_lookup: ServiceLookup,
}

/// A Service named by a cluster DNS address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServiceHost<'a> {
    /// The Service's name.
    pub name: &'a str,
    /// The Service's namespace.
    pub namespace: &'a str,
    /// The port after the host, if the address has one.
    pub port: Option<u16>,
}

/// The Service an address names through cluster DNS:
/// `<service>.<namespace>.svc`, optionally followed by the cluster domain
/// (`.cluster.local`, or any other), a trailing root dot and `:<port>`, and
/// optionally preceded by a scheme (`http://`). Anything else (IP
/// addresses, other host names, paths, malformed names or ports) is `None`.
///
/// Labels must be lowercase DNS labels, as Kubernetes object names are; a
/// port must be a decimal number from 1 to 65535.
pub fn parse_service_host(address: &str) -> Option<ServiceHost<'_>> {
    let (_, authority) = split_scheme(address)?;
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) => (host, Some(parse_port(port)?)),
        None => (authority, None),
    };
    let host = host.strip_suffix('.').unwrap_or(host);
    if host.len() > MAX_HOST_LEN {
        return None;
    }
    let mut labels = host.split('.');
    let name = labels.next()?;
    let namespace = labels.next()?;
    if labels.next()? != "svc" {
        return None;
    }
    // What follows `.svc` is the cluster domain, whatever it is.
    let valid = is_dns_label(name) && is_dns_label(namespace) && labels.all(is_dns_label);
    valid.then_some(ServiceHost {
        name,
        namespace,
        port,
    })
}

/// Splits `scheme://rest` into `("scheme://", rest)`, and an address without
/// a scheme into `("", address)`; `None` when what precedes `://` is no
/// scheme.
fn split_scheme(address: &str) -> Option<(&str, &str)> {
    match address.find("://") {
        Some(at) => {
            let scheme = &address[..at];
            let is_scheme = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
            let split = at + "://".len();
            is_scheme.then(|| (&address[..split], &address[split..]))
        }
        None => Some(("", address)),
    }
}

/// A port as written in an address: 1 to 5 decimal digits (no sign), not 0.
fn parse_port(port: &str) -> Option<u16> {
    if port.is_empty() || port.len() > 5 || !port.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    port.parse().ok().filter(|&port| port != 0)
}

/// An RFC 1123 label as Kubernetes names use it: lowercase letters, digits
/// and `-`, starting and ending with a letter or digit, at most 63 long.
fn is_dns_label(label: &str) -> bool {
    let bytes = label.as_bytes();
    let alphanumeric = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    !bytes.is_empty()
        && bytes.len() <= MAX_LABEL_LEN
        && bytes.first().is_some_and(alphanumeric)
        && bytes.last().is_some_and(alphanumeric)
        && bytes.iter().all(|b| alphanumeric(b) || *b == b'-')
}

pub use crate::error::Unroutable;

/// Rewrites addresses naming a Service as [`ServiceLookup`] says; cheap to
/// clone.
#[derive(Clone, Default)]
pub struct AddressResolver {
    /// The client to read Services with; `None` dials through DNS.
    client: Option<Client>,
}

impl std::fmt::Debug for AddressResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AddressResolver")
            .field("lookup", &self.lookup())
            .finish()
    }
}

impl AddressResolver {
    /// A resolver for `lookup`, reading Services with `client` when it needs
    /// to.
    pub fn new(lookup: ServiceLookup, client: Client) -> Self {
        match lookup {
            ServiceLookup::Dns => Self::dns(),
            ServiceLookup::ClusterIp => Self::cluster_ip(client),
        }
    }

    /// A resolver that returns every address unchanged, for cluster DNS.
    pub fn dns() -> Self {
        Self { client: None }
    }

    /// A resolver that dials Services at their ClusterIP, read with
    /// `client`.
    pub fn cluster_ip(client: Client) -> Self {
        Self {
            client: Some(client),
        }
    }

    /// How this resolver dials Services.
    pub fn lookup(&self) -> ServiceLookup {
        match self.client {
            Some(_) => ServiceLookup::ClusterIp,
            None => ServiceLookup::Dns,
        }
    }

    /// The address to dial for `address`. With [`ServiceLookup::Dns`], and
    /// for any address [`parse_service_host`] does not recognise, that is
    /// `address` itself. With [`ServiceLookup::ClusterIp`], a Service's
    /// address becomes `<spec.clusterIP>:<port>` (keeping its scheme, and
    /// without a port when it has none), read through the API on every
    /// call so that a re-created Service is followed.
    ///
    /// # Errors
    ///
    /// [`Error::ServiceLookup`] when the Service cannot be read, and
    /// [`Error::ServiceUnroutable`] when it has no ClusterIP to dial: it does
    /// not exist, is headless or of type ExternalName, or does not serve
    /// the port. Both name the Service.
    pub async fn resolve(&self, address: &str) -> Result<String> {
        let Some(client) = &self.client else {
            return Ok(address.to_owned());
        };
        let (Some(host), Some((scheme, _))) = (parse_service_host(address), split_scheme(address))
        else {
            return Ok(address.to_owned());
        };
        let unroutable = |reason| Error::ServiceUnroutable {
            namespace: host.namespace.to_owned(),
            name: host.name.to_owned(),
            reason,
        };
        let services: Api<Service> = Api::namespaced(client.clone(), host.namespace);
        let service = services
            .get_opt(host.name)
            .await
            .map_err(|source| Error::ServiceLookup {
                namespace: host.namespace.to_owned(),
                name: host.name.to_owned(),
                source: Box::new(source),
            })?
            .ok_or_else(|| unroutable(Unroutable::NotFound))?;
        let ip = cluster_ip(&service, host.port).map_err(unroutable)?;
        let dialled = match host.port {
            Some(port) => SocketAddr::new(ip, port).to_string(),
            None if ip.is_ipv6() => format!("[{ip}]"),
            None => ip.to_string(),
        };
        Ok(format!("{scheme}{dialled}"))
    }
}

/// The ClusterIP kube-proxy routes for `service` (and `port`, when given).
fn cluster_ip(service: &Service, port: Option<u16>) -> Result<IpAddr, Unroutable> {
    let spec = service.spec.as_ref().ok_or(Unroutable::NoClusterIp)?;
    if spec.type_.as_deref() == Some("ExternalName") {
        return Err(Unroutable::ExternalName);
    }
    let ip = match spec.cluster_ip.as_deref() {
        Some(HEADLESS) => return Err(Unroutable::Headless),
        None | Some("") => return Err(Unroutable::NoClusterIp),
        Some(ip) => ip
            .parse::<IpAddr>()
            .map_err(|_| Unroutable::InvalidClusterIp(ip.to_owned()))?,
    };
    if let Some(port) = port {
        let served = spec
            .ports
            .iter()
            .flatten()
            .any(|p| i32::from(port) == p.port);
        if !served {
            return Err(Unroutable::PortNotServed(port));
        }
    }
    Ok(ip)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ServicePort, ServiceSpec};
    use proptest::prelude::*;

    use super::*;

    fn host(
        name: &'static str,
        namespace: &'static str,
        port: Option<u16>,
    ) -> ServiceHost<'static> {
        ServiceHost {
            name,
            namespace,
            port,
        }
    }

    #[test]
    fn service_addresses_are_recognised() {
        let cases = [
            (
                "widgets.team.svc:50051",
                host("widgets", "team", Some(50051)),
            ),
            ("widgets.team.svc", host("widgets", "team", None)),
            (
                "widgets.team.svc.cluster.local:50051",
                host("widgets", "team", Some(50051)),
            ),
            (
                "widgets.team.svc.corp.example.internal:1",
                host("widgets", "team", Some(1)),
            ),
            (
                "widgets.team.svc.cluster.local.:50051",
                host("widgets", "team", Some(50051)),
            ),
            (
                "widgets.team.svc.:65535",
                host("widgets", "team", Some(65535)),
            ),
            (
                "http://widgets.team.svc:50051",
                host("widgets", "team", Some(50051)),
            ),
            (
                "https://widgets.team.svc.cluster.local",
                host("widgets", "team", None),
            ),
            ("svc.svc.svc:80", host("svc", "svc", Some(80))),
            (
                "my-catalog.olm-2.svc:50051",
                host("my-catalog", "olm-2", Some(50051)),
            ),
            ("0a.9z.svc:08080", host("0a", "9z", Some(8080))),
        ];
        for (address, want) in cases {
            assert_eq!(parse_service_host(address), Some(want), "{address:?}");
        }
    }

    #[test]
    fn other_addresses_are_not_services() {
        let long_label = "a".repeat(64);
        let long_host = format!("widgets.team.svc.{}", vec!["x".repeat(60); 4].join("."));
        let huge = "a.".repeat(100_000);
        let cases = [
            "",
            ":50051",
            "10.96.0.12:50051",
            "10.96.0.12",
            "[fd00::12]:50051",
            "localhost:50051",
            "registry.example.com:50051",
            "http://registry.example.com",
            // Not `<service>.<namespace>.svc`.
            "widgets.svc:50051",
            "svc:50051",
            "widgets.team.other.svc:50051",
            "a.b.c.svc:50051",
            "widgets.team.service:50051",
            "widgets.team.svcx:50051",
            "widgets.team.SVC:50051",
            // Empty labels.
            ".team.svc:50051",
            "widgets..svc:50051",
            "widgets.team..svc:50051",
            "widgets.team.svc..cluster.local:50051",
            "widgets.team.svc.cluster.local..:50051",
            "..svc",
            ".",
            "...",
            // Labels Kubernetes would not accept.
            "Widgets.team.svc:50051",
            "widgets.Team.svc:50051",
            "-widgets.team.svc:50051",
            "widgets-.team.svc:50051",
            "wid_gets.team.svc:50051",
            "wid gets.team.svc:50051",
            "widgets.team.svc.cluster_local:50051",
            // Unicode.
            "wïdgets.team.svc:50051",
            "widgets.team.ſvc:50051",
            "widgets.team.svc:５００５１",
            "🦀.team.svc:50051",
            // Ports.
            "widgets.team.svc:",
            "widgets.team.svc:0",
            "widgets.team.svc:65536",
            "widgets.team.svc:99999",
            "widgets.team.svc:123456",
            "widgets.team.svc:+80",
            "widgets.team.svc:-1",
            "widgets.team.svc: 80",
            "widgets.team.svc:80 ",
            "widgets.team.svc:grpc",
            "widgets.team.svc:0x50",
            "widgets.team.svc:80:80",
            // Schemes, paths, user info.
            "://widgets.team.svc:50051",
            "1http://widgets.team.svc:50051",
            "ht tp://widgets.team.svc:50051",
            "http://http://widgets.team.svc:50051",
            "http://widgets.team.svc:50051/",
            "http://widgets.team.svc:50051/path",
            "http://user@widgets.team.svc:50051",
            "dns:///widgets.team.svc:50051",
            "widgets.team.svc:50051?x=1",
        ];
        for address in cases {
            assert_eq!(parse_service_host(address), None, "{address:?}");
        }
        for address in [
            format!("{long_label}.team.svc:50051"),
            format!("widgets.{long_label}.svc:50051"),
            format!("widgets.team.svc.{long_label}:50051"),
            long_host,
            huge,
            format!("widgets.team.svc.{}", "a.".repeat(200)),
        ] {
            assert_eq!(parse_service_host(&address), None, "{:.80}…", address);
        }
    }

    #[test]
    fn labels_of_the_longest_allowed_length_are_services() {
        let name = "n".repeat(63);
        let namespace = "s".repeat(63);
        let address = format!("{name}.{namespace}.svc:50051");
        assert_eq!(
            parse_service_host(&address),
            Some(ServiceHost {
                name: &name,
                namespace: &namespace,
                port: Some(50051)
            })
        );
    }

    fn service(spec: ServiceSpec) -> Service {
        Service {
            spec: Some(spec),
            ..Service::default()
        }
    }

    fn serving(cluster_ip: &str, ports: &[i32]) -> Service {
        service(ServiceSpec {
            cluster_ip: Some(cluster_ip.to_owned()),
            ports: Some(
                ports
                    .iter()
                    .map(|&port| ServicePort {
                        port,
                        ..ServicePort::default()
                    })
                    .collect(),
            ),
            ..ServiceSpec::default()
        })
    }

    #[test]
    fn the_cluster_ip_is_what_kube_proxy_routes() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(
            cluster_ip(&serving("10.96.0.12", &[50051]), Some(50051)),
            Ok(ip("10.96.0.12"))
        );
        assert_eq!(
            cluster_ip(&serving("fd00::12", &[50051, 8080]), Some(8080)),
            Ok(ip("fd00::12"))
        );
        assert_eq!(
            cluster_ip(&serving("10.96.0.12", &[50051]), None),
            Ok(ip("10.96.0.12"))
        );
        assert_eq!(
            cluster_ip(&serving("10.96.0.12", &[8080]), Some(50051)),
            Err(Unroutable::PortNotServed(50051))
        );
        assert_eq!(
            cluster_ip(&serving("None", &[50051]), Some(50051)),
            Err(Unroutable::Headless)
        );
        assert_eq!(
            cluster_ip(&serving("", &[50051]), Some(50051)),
            Err(Unroutable::NoClusterIp)
        );
        assert_eq!(
            cluster_ip(&serving("ten.dot.zero", &[50051]), Some(50051)),
            Err(Unroutable::InvalidClusterIp("ten.dot.zero".to_owned()))
        );
        assert_eq!(
            cluster_ip(&Service::default(), None),
            Err(Unroutable::NoClusterIp)
        );
        let alias = service(ServiceSpec {
            type_: Some("ExternalName".to_owned()),
            external_name: Some("registry.example.com".to_owned()),
            ..ServiceSpec::default()
        });
        assert_eq!(cluster_ip(&alias, None), Err(Unroutable::ExternalName));
    }

    #[test]
    fn errors_name_the_service_and_why() {
        let error = Error::ServiceUnroutable {
            namespace: "team".to_owned(),
            name: "widgets".to_owned(),
            reason: Unroutable::Headless,
        };
        assert_eq!(
            error.to_string(),
            "cannot dial service team/widgets by its cluster IP: it is headless (clusterIP: None)"
        );
        assert_eq!(error.category(), "service_unroutable");
    }

    #[tokio::test]
    async fn dns_lookup_leaves_every_address_alone() {
        let resolver = AddressResolver::dns();
        assert_eq!(resolver.lookup(), ServiceLookup::Dns);
        for address in ["widgets.team.svc:50051", "10.96.0.12:50051", "", "🦀"] {
            assert_eq!(resolver.resolve(address).await.unwrap(), address);
        }
    }

    #[test]
    fn the_flag_takes_kebab_case_values() {
        use clap::Parser;

        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            lookup: ServiceLookupArgs,
        }
        let parse = |args: &[&str]| {
            Cli::try_parse_from(std::iter::once("sample").chain(args.iter().copied()))
                .map(|cli| cli.lookup.service_lookup)
        };
        assert_eq!(parse(&[]).unwrap(), ServiceLookup::Dns);
        assert_eq!(
            parse(&["--service-lookup", "cluster-ip"]).unwrap(),
            ServiceLookup::ClusterIp
        );
        assert_eq!(
            parse(&["--service-lookup", "dns"]).unwrap(),
            ServiceLookup::Dns
        );
        assert!(parse(&["--service-lookup", "clusterip"]).is_err());
    }

    fn label() -> impl Strategy<Value = String> {
        "[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?"
    }

    proptest! {
        #[test]
        fn well_formed_service_addresses_parse_back(
            name in label(),
            namespace in label(),
            domain in prop::collection::vec(label(), 0..3),
            port in prop::option::of(1..=u16::MAX),
            scheme in prop::option::of(prop_oneof![Just("http://"), Just("https://")]),
        ) {
            let mut host = format!("{name}.{namespace}.svc");
            for label in &domain {
                host.push('.');
                host.push_str(label);
            }
            let port_suffix = port.map(|port| format!(":{port}")).unwrap_or_default();
            let address = format!("{}{host}{port_suffix}", scheme.unwrap_or(""));
            let want = (host.len() <= MAX_HOST_LEN)
                .then_some(ServiceHost { name: &name, namespace: &namespace, port });
            prop_assert_eq!(parse_service_host(&address), want);
        }

        #[test]
        fn anything_parsed_names_a_valid_service(address in "\\PC{0,80}") {
            if let Some(host) = parse_service_host(&address) {
                prop_assert!(is_dns_label(host.name), "{:?}", host);
                prop_assert!(is_dns_label(host.namespace), "{:?}", host);
                prop_assert!(host.port != Some(0));
                let prefix = format!("{}.{}.svc", host.name, host.namespace);
                prop_assert!(address.contains(&prefix));
            }
        }

        #[test]
        fn near_misses_of_a_service_address_do_not_panic(
            address in "(https?://)?[a-zA-Z0-9.:_-]{0,40}(\\.svc)?[a-z.]{0,20}(:[0-9+-]{0,7})?"
        ) {
            if let Some(host) = parse_service_host(&address) {
                prop_assert!(address.contains(".svc"));
                prop_assert!(is_dns_label(host.name) && is_dns_label(host.namespace));
            }
        }

        #[test]
        fn ip_addresses_are_never_services(ip in any::<IpAddr>(), port in any::<u16>()) {
            let bare = ip.to_string();
            let with_port = SocketAddr::new(ip, port).to_string();
            prop_assert_eq!(parse_service_host(&bare), None);
            prop_assert_eq!(parse_service_host(&with_port), None);
        }
    }
}
