//! Registry credentials from pull secrets: `kubernetes.io/dockerconfigjson`
//! (`.dockerconfigjson`) and `kubernetes.io/dockercfg` (`.dockercfg`)
//! Secrets, merged in order (a later secret wins for the same registry).

use std::collections::BTreeMap;

use olm_oci::DockerConfig;

/// The Secret type of a Docker `config.json`.
pub const DOCKER_CONFIG_JSON_TYPE: &str = "kubernetes.io/dockerconfigjson";
/// Its key.
pub const DOCKER_CONFIG_JSON_KEY: &str = ".dockerconfigjson";
/// The Secret type of a legacy `.dockercfg`.
pub const DOCKERCFG_TYPE: &str = "kubernetes.io/dockercfg";
/// Its key.
pub const DOCKERCFG_KEY: &str = ".dockercfg";

/// A pull secret as read (name, type and data).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PullSecret {
    /// Its name.
    pub name: String,
    /// Its `type`.
    pub type_: String,
    /// Its data.
    pub data: BTreeMap<String, Vec<u8>>,
}

/// The credentials of `secrets`, and a note for each secret that gave none.
pub fn credentials(secrets: &[PullSecret]) -> (DockerConfig, Vec<String>) {
    let mut config = DockerConfig::default();
    let mut notes = Vec::new();
    for secret in secrets {
        // The type says which key holds the document; an untyped secret is
        // tried with both keys, as kubelets tolerate.
        let key = match secret.type_.as_str() {
            DOCKER_CONFIG_JSON_TYPE => Some(DOCKER_CONFIG_JSON_KEY),
            DOCKERCFG_TYPE => Some(DOCKERCFG_KEY),
            _ => None,
        };
        let body = match key {
            Some(key) => secret.data.get(key),
            None => secret
                .data
                .get(DOCKER_CONFIG_JSON_KEY)
                .or_else(|| secret.data.get(DOCKERCFG_KEY)),
        };
        let Some(body) = body else {
            notes.push(format!(
                "secret {} (type {:?}) holds no {DOCKER_CONFIG_JSON_KEY} or {DOCKERCFG_KEY}",
                secret.name, secret.type_
            ));
            continue;
        };
        match DockerConfig::parse(body) {
            Ok(parsed) => config.merge(parsed),
            Err(error) => notes.push(format!("secret {}: {error}", secret.name)),
        }
    }
    (config, notes)
}
