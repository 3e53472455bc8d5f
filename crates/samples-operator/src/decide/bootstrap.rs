//! The default Config, made when there is none: its architecture (the
//! operator's own) and its management state, `Managed` unless samples
//! could not work here, in which case it starts `Removed` as upstream's
//! does: on an IPv6 cluster (registry.redhat.io serves no IPv6), when the
//! cluster image policy blocks registry.redhat.io or quay.io, or when
//! registry.redhat.io cannot be reached (a global proxy means it can).

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use olm_api::samples::{CONFIG_FINALIZER, Config, ConfigSpec, architecture, management_state};

/// The registry upstream's probe dials and its policy checks name.
pub const TERMS_BASED_REGISTRY: &str = "registry.redhat.io";

/// The other registry the sample images come from.
pub const QUAY: &str = "quay.io";

/// Ours: the annotation recording why the default Config started
/// `Removed`; its value is a [`RemovedBecause::as_str`]. Upstream infers the
/// same from its ClusterOperator's reason after a restart, which a cluster
/// without ClusterOperators does not have.
pub const BOOTSTRAP_ANNOTATION: &str = "olm.samplesBootstrap";

/// The architectures a Config may name.
pub const SUPPORTED_ARCHITECTURES: [&str; 5] = [
    architecture::X86_64,
    architecture::AMD64,
    architecture::ARM64,
    architecture::PPC64LE,
    architecture::S390X,
];

/// The cluster image policy (`config.openshift.io/v1` Image `cluster`), the
/// part that decides whether ImageStreams may use a registry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImagePolicy {
    /// `spec.allowedRegistriesForImport[].domainName`.
    pub allowed_domains_for_import: Vec<String>,
    /// `spec.registrySources.allowedRegistries`.
    pub allowed_registries: Vec<String>,
    /// `spec.registrySources.blockedRegistries`.
    pub blocked_registries: Vec<String>,
}

impl ImagePolicy {
    /// Reads the policy from an Image object's `spec`; fields that cannot
    /// be read count as empty.
    pub fn from_spec(spec: &serde_json::Value) -> Self {
        let strings = |value: Option<&serde_json::Value>| -> Vec<String> {
            value
                .and_then(serde_json::Value::as_array)
                .map(|items| {
                    items
                        .iter()
                        .filter_map(serde_json::Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default()
        };
        let sources = spec.get("registrySources");
        Self {
            allowed_domains_for_import: spec
                .get("allowedRegistriesForImport")
                .and_then(serde_json::Value::as_array)
                .map(|items| {
                    items
                        .iter()
                        .filter_map(|item| item.get("domainName")?.as_str())
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
            allowed_registries: strings(sources.and_then(|s| s.get("allowedRegistries"))),
            blocked_registries: strings(sources.and_then(|s| s.get("blockedRegistries"))),
        }
    }

    /// Whether the policy keeps ImageStreams from using `registry` (empty:
    /// the default registries, registry.redhat.io and quay.io), by
    /// upstream's rules: an allow list must name it (by domain suffix for
    /// `allowedRegistriesForImport`, exactly for `allowedRegistries`), and
    /// the block list must not.
    pub fn blocks(&self, registry: &str) -> bool {
        let registry = registry.trim();
        if !self.allowed_domains_for_import.is_empty() {
            let domains: BTreeSet<&str> = self
                .allowed_domains_for_import
                .iter()
                .map(String::as_str)
                .collect();
            let allowed = domains.iter().any(|domain| registry.ends_with(domain))
                || (registry.is_empty() && default_domains_allowed(&domains));
            if !allowed {
                return true;
            }
        }
        if !self.allowed_registries.is_empty() {
            let registries: BTreeSet<&str> =
                self.allowed_registries.iter().map(|r| r.trim()).collect();
            let allowed = registries.contains(registry)
                || (registry.is_empty()
                    && registries.contains(TERMS_BASED_REGISTRY)
                    && registries.contains(QUAY));
            if !allowed {
                return true;
            }
        }
        self.blocked_registries
            .iter()
            .any(|blocked| blocked.trim() == registry)
    }
}

/// Whether allowed import domains cover both default registries, in one of
/// the four combinations upstream accepts.
fn default_domains_allowed(domains: &BTreeSet<&str>) -> bool {
    let has = |domain: &str| domains.contains(domain);
    has(QUAY) && (has(TERMS_BASED_REGISTRY) || has("redhat.io"))
}

/// What the operator knows about the cluster when it makes the default
/// Config.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BootstrapFacts {
    /// The operator's architecture as a Config spells it, when supported.
    pub architecture: Option<String>,
    /// The cluster's network is IPv6.
    pub ipv6: bool,
    /// The cluster image policy: `None` when the cluster serves no Image
    /// config API, `Some(Err(()))` when it does but the policy could not be
    /// read (upstream then assumes it blocks).
    pub image_policy: Option<Result<ImagePolicy, ()>>,
    /// A global proxy is configured: registry.redhat.io is assumed reachable.
    pub proxy: bool,
    /// Whether a TLS handshake with registry.redhat.io succeeded within the
    /// probe's deadline; `None` when it was not tried (there was no need,
    /// or probing is turned off).
    pub registry_reachable: Option<bool>,
}

/// Why the default Config starts `Removed`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RemovedBecause {
    /// The operator runs on an architecture no Config can name.
    UnsupportedArchitecture,
    /// The cluster network is IPv6.
    Ipv6,
    /// The cluster image policy blocks registry.redhat.io or quay.io (or
    /// could not be read).
    ImagePolicy,
    /// registry.redhat.io could not be reached.
    RegistryUnreachable,
}

impl RemovedBecause {
    /// The value of [`BOOTSTRAP_ANNOTATION`].
    pub fn as_str(self) -> &'static str {
        match self {
            Self::UnsupportedArchitecture => "UnsupportedArchitecture",
            Self::Ipv6 => "IPv6",
            Self::ImagePolicy => "ImagePolicy",
            Self::RegistryUnreachable => "RegistryUnreachable",
        }
    }

    /// Why, for the log, in upstream's words where it has them.
    pub fn explanation(self) -> &'static str {
        match self {
            Self::UnsupportedArchitecture => {
                "samples are not installed on an unsupported architecture"
            }
            Self::Ipv6 => "registry.redhat.io does not support ipv6, bootstrap to removed",
            Self::ImagePolicy => {
                "the global openshift image configuration prevents the creation of imagestreams using registry.redhat.io or quay.io, bootstrap to removed"
            }
            Self::RegistryUnreachable => {
                "unable to establish HTTPS connection to registry.redhat.io, bootstrap to Removed"
            }
        }
    }
}

/// What the facts known so far decide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bootstrap {
    /// Start `Managed`.
    Managed,
    /// Start `Removed`, for this reason.
    Removed(RemovedBecause),
    /// Nothing rules samples out yet: probe registry.redhat.io, then decide
    /// again with [`BootstrapFacts::registry_reachable`] set.
    Probe,
}

/// Decides the default Config's management state, checking in upstream's
/// order: architecture, IPv6, image policy, proxy, reachability.
pub fn decide(facts: &BootstrapFacts) -> Bootstrap {
    if facts.architecture.is_none() {
        return Bootstrap::Removed(RemovedBecause::UnsupportedArchitecture);
    }
    if facts.ipv6 {
        return Bootstrap::Removed(RemovedBecause::Ipv6);
    }
    match &facts.image_policy {
        Some(Err(())) => return Bootstrap::Removed(RemovedBecause::ImagePolicy),
        Some(Ok(policy)) if policy.blocks(TERMS_BASED_REGISTRY) || policy.blocks(QUAY) => {
            return Bootstrap::Removed(RemovedBecause::ImagePolicy);
        }
        _ => {}
    }
    if facts.proxy {
        return Bootstrap::Managed;
    }
    match facts.registry_reachable {
        Some(false) => Bootstrap::Removed(RemovedBecause::RegistryUnreachable),
        Some(true) => Bootstrap::Managed,
        None => Bootstrap::Probe,
    }
}

/// The architecture a Config names for a Rust target architecture
/// (`std::env::consts::ARCH`), `None` when samples have none.
pub fn config_architecture(target_arch: &str) -> Option<&'static str> {
    match target_arch {
        "x86_64" => Some(architecture::X86_64),
        "aarch64" => Some(architecture::ARM64),
        "powerpc64" => Some(architecture::PPC64LE),
        "s390x" => Some(architecture::S390X),
        _ => None,
    }
}

/// The default Config: `name`, the operator's architecture, empty skip
/// lists, the finalizer, and the management state `outcome` says (`Probe`
/// is read as `Managed`: call [`decide`] again after probing).
pub fn default_config(name: &str, architecture: Option<&str>, outcome: Bootstrap) -> Config {
    let (state, reason) = match outcome {
        Bootstrap::Managed | Bootstrap::Probe => (management_state::MANAGED, None),
        Bootstrap::Removed(because) => (management_state::REMOVED, Some(because)),
    };
    Config {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            finalizers: Some(vec![CONFIG_FINALIZER.to_owned()]),
            annotations: reason.map(|because| {
                [(BOOTSTRAP_ANNOTATION.to_owned(), because.as_str().to_owned())].into()
            }),
            ..ObjectMeta::default()
        },
        spec: ConfigSpec {
            management_state: Some(state.to_owned()),
            architectures: architecture.into_iter().map(str::to_owned).collect(),
            ..ConfigSpec::default()
        },
        status: None,
    }
}

/// The reason of `SamplesExist` on a cluster without the image and
/// template APIs (ours: upstream only runs on OpenShift).
pub const APIS_ABSENT_REASON: &str = "ImageAndTemplateAPIsAbsent";

/// The Config status saying the image and template APIs are absent
/// (`SamplesExist` False, [`APIS_ABSENT_REASON`]); `None` when `current`
/// already says it.
pub fn apis_absent_status(
    current: Option<&olm_api::samples::ConfigStatus>,
    now: jiff::Timestamp,
) -> Option<olm_api::samples::ConfigStatus> {
    let mut status = current.cloned().unwrap_or_default();
    let absent = olm_api::samples::ConfigCondition::new(
        olm_api::samples::condition::SAMPLES_EXIST,
        olm_api::conditions::FALSE,
        APIS_ABSENT_REASON,
        "this cluster serves no image.openshift.io ImageStreams or template.openshift.io Templates, so there are no samples to keep; the samples operator does nothing else",
    );
    olm_api::conditions::set(&mut status.conditions, absent, now).then_some(status)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn policy(domains: &[&str], allowed: &[&str], blocked: &[&str]) -> ImagePolicy {
        let owned = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect();
        ImagePolicy {
            allowed_domains_for_import: owned(domains),
            allowed_registries: owned(allowed),
            blocked_registries: owned(blocked),
        }
    }

    #[test]
    fn image_policy_follows_upstreams_rules() {
        let cases: &[(&str, ImagePolicy, &str, bool)] = &[
            (
                "no policy",
                ImagePolicy::default(),
                "registry.redhat.io",
                false,
            ),
            (
                "blocked exactly",
                policy(&[], &[], &[" registry.redhat.io "]),
                "registry.redhat.io",
                true,
            ),
            (
                "blocked elsewhere",
                policy(&[], &[], &["fixture.example"]),
                "quay.io",
                false,
            ),
            (
                "allowed list lacks it",
                policy(&[], &["fixture.example"], &[]),
                "quay.io",
                true,
            ),
            (
                "allowed list has it",
                policy(&[], &["quay.io"], &[]),
                "quay.io",
                false,
            ),
            (
                "empty registry needs both defaults allowed",
                policy(&[], &["quay.io"], &[]),
                "",
                true,
            ),
            (
                "empty registry with both defaults",
                policy(&[], &["quay.io", "registry.redhat.io"], &[]),
                "",
                false,
            ),
            (
                "import domain suffix allows",
                policy(&["redhat.io"], &[], &[]),
                "registry.redhat.io",
                false,
            ),
            (
                "import domain misses",
                policy(&["fixture.example"], &[], &[]),
                "quay.io",
                true,
            ),
            (
                "empty registry with redhat.io and quay.io domains",
                policy(&["redhat.io", "quay.io"], &[], &[]),
                "",
                false,
            ),
            (
                "empty registry with only quay.io domain",
                policy(&["quay.io"], &[], &[]),
                "",
                true,
            ),
        ];
        for (name, policy, registry, blocks) in cases {
            assert_eq!(policy.blocks(registry), *blocks, "{name}");
        }
    }

    #[test]
    fn policy_reads_from_an_image_spec() {
        let spec = serde_json::json!({
            "allowedRegistriesForImport": [{"domainName": "fixture.example", "insecure": false}],
            "registrySources": {"allowedRegistries": ["a.example"], "blockedRegistries": ["b.example"]}
        });
        assert_eq!(
            ImagePolicy::from_spec(&spec),
            policy(&["fixture.example"], &["a.example"], &["b.example"])
        );
        assert_eq!(
            ImagePolicy::from_spec(&serde_json::json!({"registrySources": 7})),
            ImagePolicy::default()
        );
    }

    #[test]
    fn bootstrap_decides_in_upstreams_order() {
        let base = BootstrapFacts {
            architecture: Some("x86_64".to_owned()),
            ..BootstrapFacts::default()
        };
        let with = |change: &dyn Fn(&mut BootstrapFacts)| {
            let mut facts = base.clone();
            change(&mut facts);
            decide(&facts)
        };
        assert_eq!(decide(&base), Bootstrap::Probe);
        assert_eq!(
            with(&|f| f.architecture = None),
            Bootstrap::Removed(RemovedBecause::UnsupportedArchitecture)
        );
        assert_eq!(
            with(&|f| {
                f.ipv6 = true;
                f.proxy = true;
            }),
            Bootstrap::Removed(RemovedBecause::Ipv6)
        );
        assert_eq!(
            with(&|f| f.image_policy = Some(Err(()))),
            Bootstrap::Removed(RemovedBecause::ImagePolicy)
        );
        assert_eq!(
            with(&|f| f.image_policy = Some(Ok(policy(&[], &[], &["quay.io"])))),
            Bootstrap::Removed(RemovedBecause::ImagePolicy)
        );
        assert_eq!(
            with(&|f| {
                f.proxy = true;
                f.registry_reachable = Some(false);
            }),
            Bootstrap::Managed,
            "a proxy means reachable"
        );
        assert_eq!(
            with(&|f| f.registry_reachable = Some(false)),
            Bootstrap::Removed(RemovedBecause::RegistryUnreachable)
        );
        assert_eq!(
            with(&|f| f.registry_reachable = Some(true)),
            Bootstrap::Managed
        );
    }

    #[test]
    fn default_config_carries_the_finalizer_arch_and_reason() {
        let config = default_config(
            "cluster",
            Some("arm64"),
            Bootstrap::Removed(RemovedBecause::RegistryUnreachable),
        );
        assert_eq!(
            config.metadata.finalizers.as_deref(),
            Some(&[CONFIG_FINALIZER.to_owned()][..])
        );
        assert_eq!(config.spec.architectures, ["arm64"]);
        assert_eq!(config.spec.management_state.as_deref(), Some("Removed"));
        assert_eq!(
            config.metadata.annotations.unwrap()[BOOTSTRAP_ANNOTATION],
            "RegistryUnreachable"
        );
        let managed = default_config("cluster", None, Bootstrap::Managed);
        assert!(managed.metadata.annotations.is_none());
        assert!(managed.spec.architectures.is_empty());
    }

    #[test]
    fn target_architectures_map_to_config_spellings() {
        for (target, expected) in [
            ("x86_64", Some("x86_64")),
            ("aarch64", Some("arm64")),
            ("powerpc64", Some("ppc64le")),
            ("s390x", Some("s390x")),
            ("riscv64", None),
        ] {
            assert_eq!(config_architecture(target), expected, "{target}");
            if let Some(arch) = expected {
                assert!(SUPPORTED_ARCHITECTURES.contains(&arch));
            }
        }
    }

    #[test]
    fn absent_apis_are_said_once() {
        let now = jiff::Timestamp::from_second(1_800_000_000).unwrap();
        let said = apis_absent_status(None, now).unwrap();
        let exists = &said.conditions[0];
        assert_eq!(
            (exists.status.as_str(), exists.reason.as_deref()),
            ("False", Some(APIS_ABSENT_REASON))
        );
        assert_eq!(apis_absent_status(Some(&said), now), None);
    }
}
