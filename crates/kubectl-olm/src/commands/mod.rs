//! One module per command: flags, help, and the I/O around [`crate::decide`].

pub(crate) mod approve;
pub(crate) mod doctor;
pub(crate) mod install;
pub(crate) mod preview;
pub(crate) mod resolve;
pub(crate) mod search;
pub(crate) mod status;
pub(crate) mod uninstall;
pub(crate) mod upgrade;

use anyhow::{Context as _, Result};
use kube::{Api, Client, api::ListParams};
use olm_api::subscription::Subscription;

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
