//! The allowed-registries policy (beyond upstream OLM): a list of registry
//! hosts, or wildcards over their subdomains, outside which nothing is pulled
//! or dialled. One rule type and one matcher for every place the policy
//! applies: bundle images (bundle-unpacker), the operator images a bundle
//! names (bundle-unpacker, optional), catalog images and catalog addresses
//! (catalog-operator, each optional).

use crate::reference::Reference;

/// One rule: a registry host (`quay.io`, `127.0.0.1:5000`) or a wildcard
/// over its subdomains (`*.example.com`, which does not match
/// `example.com` itself). Matching ignores case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryRule(String);

impl RegistryRule {
    /// A rule from its text (case-insensitive).
    pub fn new(text: &str) -> Self {
        Self(text.trim().to_ascii_lowercase())
    }

    /// The rule's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `host` (a registry as named in an image reference, or the
    /// `host[:port]` of an address) matches.
    pub fn matches(&self, host: &str) -> bool {
        let host = host.to_ascii_lowercase();
        match self.0.strip_prefix("*.") {
            Some(suffix) => host
                .strip_suffix(suffix)
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            None => host == self.0,
        }
    }
}

/// Whether `host` is allowed: an empty policy allows everything.
pub fn allows(rules: &[RegistryRule], host: &str) -> bool {
    rules.is_empty() || rules.iter().any(|r| r.matches(host))
}

fn listed(rules: &[RegistryRule]) -> String {
    rules
        .iter()
        .map(RegistryRule::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Why the image `what` (`bundle image`, `catalog image`, ...) at `image`
/// hosted on `registry` is refused: `None` when allowed.
pub fn refusal(rules: &[RegistryRule], what: &str, image: &str, registry: &str) -> Option<String> {
    (!allows(rules, registry)).then(|| {
        format!(
            "{what} {image} is hosted on registry {registry}, which the allowed-registries policy [{}] does not include",
            listed(rules)
        )
    })
}

/// Why the image reference `image` is refused (an unparsable reference is
/// refused too, since its registry cannot be known): `None` when allowed.
pub fn image_refusal(rules: &[RegistryRule], what: &str, image: &str) -> Option<String> {
    if rules.is_empty() {
        return None;
    }
    match Reference::parse(image) {
        Ok(reference) => refusal(rules, what, image, reference.registry()),
        Err(error) => Some(format!(
            "{what} {image:?} is not a valid image reference ({error}), so the allowed-registries policy cannot allow it"
        )),
    }
}

/// The host (with its port, if any) of a gRPC address as a CatalogSource's
/// `spec.address` gives it: `host:port`, `[v6]:port`, a URL or a gRPC target
/// (`dns:///host:port`).
pub fn address_host(address: &str) -> &str {
    let rest = address
        .split_once("://")
        .map_or(address, |(_, rest)| rest)
        // gRPC's `dns:///host:port` has an empty authority.
        .trim_start_matches('/');
    rest.split('/').next().unwrap_or(rest)
}

/// Why a catalog address is refused by `rules` (over its `host[:port]`, and
/// also its bare host so a rule need not name the port): `None` when allowed.
pub fn address_refusal(rules: &[RegistryRule], address: &str) -> Option<String> {
    let host_port = address_host(address);
    let bare = match host_port.rsplit_once(':') {
        Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host,
        _ => host_port,
    };
    let bare = bare.trim_start_matches('[').trim_end_matches(']');
    if allows(rules, host_port) || allows(rules, bare) {
        return None;
    }
    Some(format!(
        "catalog address {address} is on host {host_port}, which the allowed catalog addresses [{}] do not include",
        listed(rules)
    ))
}
