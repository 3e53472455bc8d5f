//! The allowed-registries policy (beyond upstream): when set, a bundle whose
//! image is hosted elsewhere is refused before any pull.

/// One rule: a registry host (`quay.io`, `127.0.0.1:5000`) or a wildcard
/// over its subdomains (`*.example.com`, which does not match
/// `example.com` itself).
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

    /// Whether `registry` (as named in an image reference) matches.
    pub fn matches(&self, registry: &str) -> bool {
        let registry = registry.to_ascii_lowercase();
        match self.0.strip_prefix("*.") {
            Some(suffix) => registry
                .strip_suffix(suffix)
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            None => registry == self.0,
        }
    }
}

/// Why a bundle image is refused: `None` when allowed (an empty policy
/// allows everything).
pub fn refusal(rules: &[RegistryRule], bundle_path: &str, registry: &str) -> Option<String> {
    if rules.is_empty() || rules.iter().any(|r| r.matches(registry)) {
        return None;
    }
    let listed: Vec<&str> = rules.iter().map(RegistryRule::as_str).collect();
    Some(format!(
        "bundle image {bundle_path} is hosted on registry {registry}, which the allowed-registries policy [{}] does not include",
        listed.join(", ")
    ))
}
