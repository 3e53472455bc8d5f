//! One module per command: flags, help, and the I/O around [`crate::decide`].

pub(crate) mod approve;
pub(crate) mod changes;
pub(crate) mod doctor;
pub(crate) mod install;
pub(crate) mod preview;
pub(crate) mod resolve;
pub(crate) mod search;
pub(crate) mod status;
pub(crate) mod uninstall;
pub(crate) mod upgrade;

use std::time::Duration;

use anyhow::{Context as _, Result};
use kube::{Api, Client, api::ListParams};
use olm_api::subscription::Subscription;
use serde::de::DeserializeOwned;

use crate::failure;

/// The Subscription of `package` in `namespace` (by `spec.name`; several is
/// an error, as OLM resolves one per package).
pub(crate) async fn subscription_of(
    client: &Client,
    namespace: &str,
    package: &str,
) -> Result<Subscription> {
    let subscriptions: Api<Subscription> = Api::namespaced(client.clone(), namespace);
    let list = subscriptions
        .list(&ListParams::default())
        .await
        .with_context(|| format!("listing the Subscriptions of namespace {namespace}"))?;
    let mut found: Vec<Subscription> = list
        .items
        .into_iter()
        .filter(|s| s.spec.package == package)
        .collect();
    match found.len() {
        0 => failure::input(format!(
            "no Subscription for package {package} in namespace {namespace}; \
             see `kubectl olm status -n {namespace}`, or install it with `kubectl olm install {package} -n {namespace}`"
        )),
        1 => Ok(found.remove(0)),
        _ => failure::input(format!(
            "{} Subscriptions for package {package} in namespace {namespace} ({}); OLM resolves one per package: delete the extra ones",
            found.len(),
            found
                .iter()
                .filter_map(|s| s.metadata.name.clone())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// `--wait` and `--timeout` of the commands that can follow an install.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct WaitArgs {
    /// Follow the install or upgrade until it succeeds or fails.
    #[arg(long)]
    pub wait: bool,
    /// How long --wait waits, in seconds.
    #[arg(long, default_value_t = 300)]
    pub timeout: u64,
}

impl WaitArgs {
    /// `--timeout` as a duration.
    pub(crate) fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout)
    }
}

/// Every object of a kind in `namespace` (every namespace when `None`),
/// carrying `label` when given.
pub(crate) async fn list<K>(
    client: &Client,
    namespace: Option<&str>,
    label: Option<&str>,
) -> Result<Vec<K>>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = match namespace {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    };
    let params = match label {
        Some(label) => ListParams::default().labels(label),
        None => ListParams::default(),
    };
    let list = api.list(&params).await.with_context(|| {
        let place = namespace.map_or_else(
            || "every namespace".to_owned(),
            |ns| format!("namespace {ns}"),
        );
        format!("listing {} in {place}", K::plural(&()))
    })?;
    Ok(list.items)
}
