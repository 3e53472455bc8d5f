//! Whether the cluster's install pull secret can pull from
//! registry.redhat.io, as upstream's metrics collector judges it
//! (`pkg/metrics/metrics.go`): the Secret `openshift-config/pull-secret`
//! must exist and its `.dockerconfigjson` must hold an `auths` entry for
//! registry.redhat.io. A samplesRegistry of one's own needs none of it.

use serde_json::Value;

use super::bootstrap::TERMS_BASED_REGISTRY;

/// The namespace of the cluster's install pull secret.
pub const PULL_SECRET_NAMESPACE: &str = "openshift-config";

/// Its name.
pub const PULL_SECRET_NAME: &str = "pull-secret";

/// Its key.
pub const DOCKER_CONFIG_KEY: &str = ".dockerconfigjson";

/// Whether samples would lack credentials for registry.redhat.io:
/// `samples_registry` is empty (the default images are used) and
/// `docker_config` (the pull secret's `.dockerconfigjson`; `None` when the
/// Secret or the key is missing) is unreadable or has no entry for it.
pub fn missing_registry_credential(samples_registry: &str, docker_config: Option<&[u8]>) -> bool {
    if !samples_registry.trim().is_empty() {
        return false;
    }
    let Some(bytes) = docker_config else {
        return true;
    };
    serde_json::from_slice::<Value>(bytes)
        .ok()
        .and_then(|config| config.get("auths")?.get(TERMS_BASED_REGISTRY).cloned())
        .is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registry_redhat_io_entry_is_what_counts() {
        let with = br#"{"auths": {"registry.redhat.io": {"auth": "Zml4dHVyZTpmaXh0dXJl"}, "quay.io": {}}}"#;
        let without = br#"{"auths": {"quay.io": {"auth": "x"}}}"#;
        let cases: &[(&str, Option<&[u8]>, bool)] = &[
            ("", Some(with), false),
            ("", Some(without), true),
            ("", Some(b"not json"), true),
            ("", Some(br#"{"auths": []}"#), true),
            ("", None, true),
            ("mirror.fixture:5000", None, false),
            ("mirror.fixture:5000", Some(without), false),
        ];
        for (registry, config, missing) in cases {
            assert_eq!(
                missing_registry_credential(registry, *config),
                *missing,
                "{registry:?} {:?}",
                config.map(String::from_utf8_lossy)
            );
        }
    }
}
