//! Registry credentials from pull secrets: `kubernetes.io/dockerconfigjson`
//! (`.dockerconfigjson`) and `kubernetes.io/dockercfg` (`.dockercfg`)
//! Secrets, merged in order (a later secret wins for the same registry);
//! which secrets a bundle pull uses ([`secret_names`]); and the auth files
//! of the machine a CLI runs on ([`local_credentials`]). One home for
//! bundle-unpacker, `kubectl olm preview` and `opm`; reading the Secrets is
//! the caller's.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::PathBuf,
};

use crate::DockerConfig;

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

/// The pull secrets a bundle of a catalog is pulled with, in merge order:
/// the catalog namespace's default ServiceAccount's `imagePullSecrets`, then
/// the CatalogSource's `spec.secrets` (which win), each name once, empty
/// names skipped.
pub fn secret_names<'a>(
    service_account_secrets: impl IntoIterator<Item = &'a str>,
    catalog_secrets: impl IntoIterator<Item = &'a str>,
) -> Vec<String> {
    let mut seen = BTreeSet::new();
    service_account_secrets
        .into_iter()
        .chain(catalog_secrets)
        .filter(|name| !name.is_empty() && seen.insert(*name))
        .map(str::to_owned)
        .collect()
}

/// The auth files container tools and Docker write on this machine, in
/// merge order (a later file wins): Docker's `config.json`
/// (`$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`), then
/// `$XDG_RUNTIME_DIR/containers/auth.json`, then `$REGISTRY_AUTH_FILE`.
pub fn local_auth_files(env: impl Fn(&str) -> Option<std::ffi::OsString>) -> Vec<PathBuf> {
    let mut files = Vec::new();
    if let Some(dir) = env("DOCKER_CONFIG") {
        files.push(PathBuf::from(dir).join("config.json"));
    } else if let Some(home) = env("HOME") {
        files.push(PathBuf::from(home).join(".docker/config.json"));
    }
    if let Some(runtime) = env("XDG_RUNTIME_DIR") {
        files.push(PathBuf::from(runtime).join("containers/auth.json"));
    }
    if let Some(file) = env("REGISTRY_AUTH_FILE") {
        files.push(PathBuf::from(file));
    }
    files
}

/// The credentials of this machine's auth files ([`local_auth_files`]),
/// and a note for each file that exists but cannot be used (missing files
/// are not worth a note).
pub fn local_credentials() -> (DockerConfig, Vec<String>) {
    let mut config = DockerConfig::default();
    let mut notes = Vec::new();
    for file in local_auth_files(|name| std::env::var_os(name)) {
        let Ok(bytes) = std::fs::read(&file) else {
            continue;
        };
        match DockerConfig::parse(&bytes) {
            Ok(found) => config.merge(found),
            Err(error) => notes.push(format!("{}: {error}", file.display())),
        }
    }
    (config, notes)
}
