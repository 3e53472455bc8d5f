//! The I/O of the promotion guard ([`crate::decide::promotion`]): reads
//! what a ready update pod offers over the registry API, and records a
//! block or a clear on the catalog (condition, Warning event, and the
//! content not to start again).

use std::{
    collections::HashMap,
    sync::{Mutex, PoisonError},
    time::Duration,
};

use futures::TryStreamExt;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::Resource;
use olm_api::{
    catalog_source::{
        CatalogSource, CatalogSourceConditionReason, CatalogSourceConditionType,
        CatalogSourceStatus,
    },
    conditions,
};
use olm_registry::{ClientOptions, RegistryClient};

use super::Context;
use crate::decide::{
    catalog_source::REGISTRY_GRPC_PORT,
    promotion::{self, OfferedBundle, Refusal},
};

/// Where the guard reads an update pod's content from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ContentDial {
    /// The pod's IP and the registry port: what a cluster gives.
    #[default]
    PodIp,
    /// One fixed `host:port`, whatever the pod: the seam for tests on a
    /// control plane whose pods do not really run (a loopback registry
    /// stands in for the update pod).
    Fixed(String),
}

/// What checking an update pod's content found.
#[derive(Debug)]
pub(crate) enum Check {
    /// Every bundle image is allowed.
    Allowed,
    /// These bundles are not.
    Refused(Vec<Refusal>),
    /// The content could not be read yet (why); try again later.
    Pending(String),
}

/// The content an update pod serves, as a block is keyed: its spec hash and
/// its image (pinned to a digest when the catalog is polled).
pub(crate) fn content_key(pod: &Pod) -> (String, String) {
    let hash = pod
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(olm_api::labels::POD_SPEC_HASH))
        .cloned()
        .unwrap_or_default();
    let image = pod
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default();
    (hash, image)
}

/// Lists the bundles the update pod serves and checks them against the
/// policy.
pub(crate) async fn check(context: &Context, pod: &Pod) -> Check {
    let address = match &context.config.content_dial {
        ContentDial::Fixed(address) => address.clone(),
        ContentDial::PodIp => match pod.status.as_ref().and_then(|s| s.pod_ip.as_deref()) {
            Some(ip) if ip.contains(':') => format!("[{ip}]:{REGISTRY_GRPC_PORT}"),
            Some(ip) => format!("{ip}:{REGISTRY_GRPC_PORT}"),
            None => return Check::Pending("the update pod has no IP yet".to_owned()),
        },
    };
    match offered(&address, context.config.registry_timeout).await {
        Ok(bundles) => {
            let refused = promotion::refusals(&bundles, &context.config.allowed_registries);
            if refused.is_empty() {
                Check::Allowed
            } else {
                Check::Refused(refused)
            }
        }
        Err(error) => Check::Pending(format!("reading the new content at {address}: {error}")),
    }
}

async fn offered(address: &str, timeout: Duration) -> Result<Vec<OfferedBundle>, String> {
    let options = ClientOptions {
        connect_timeout: timeout,
        request_timeout: timeout,
        ..ClientOptions::default()
    };
    let client = RegistryClient::connect(&format!("http://{address}"), options)
        .await
        .map_err(|e| olm_runtime::events::error_chain(&e))?;
    client
        .list_bundles()
        .await
        .map_err(|e| olm_runtime::events::error_chain(&e))?
        .map_ok(|b| OfferedBundle {
            name: b.csv_name,
            image: b.bundle_path,
        })
        .try_collect()
        .await
        .map_err(|e| olm_runtime::events::error_chain(&e))
}

/// The content each guarded catalog refused last, so that it is not started
/// again until the content changes. Lost on restart, which costs one more
/// check of the same content.
#[derive(Debug, Default)]
pub(crate) struct Blocked(Mutex<HashMap<(String, String), (String, String)>>);

impl Blocked {
    /// Whether `content` is what the catalog refused last.
    pub(crate) fn is_blocked(
        &self,
        namespace: &str,
        name: &str,
        content: &(String, String),
    ) -> bool {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&(namespace.to_owned(), name.to_owned()))
            .is_some_and(|blocked| blocked == content)
    }

    /// Records the refusal; `true` when it is news.
    fn block(&self, namespace: &str, name: &str, content: (String, String)) -> bool {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert((namespace.to_owned(), name.to_owned()), content.clone())
            .is_none_or(|previous| previous != content)
    }

    fn clear(&self, namespace: &str, name: &str) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&(namespace.to_owned(), name.to_owned()));
    }
}

/// Holds `content` back: sets `PromotionBlocked`, remembers the content,
/// and publishes a Warning event the first time.
pub(crate) async fn block(
    context: &Context,
    catalog: &CatalogSource,
    status: &mut CatalogSourceStatus,
    content: (String, String),
    reason: CatalogSourceConditionReason,
    message: String,
    now: Timestamp,
) {
    let namespace = catalog.metadata.namespace.clone().unwrap_or_default();
    let name = kube::ResourceExt::name_any(catalog);
    tracing::warn!(catalog = %format!("{namespace}/{name}"), %message, "promotion blocked");
    conditions::set(
        &mut status.conditions,
        conditions::metav1(
            CatalogSourceConditionType::PROMOTION_BLOCKED.as_str(),
            conditions::TRUE,
            reason.as_str(),
            &message,
            None,
        ),
        now,
    );
    if context.blocked.block(&namespace, &name, content) {
        let regarding = catalog.object_ref(&());
        if let Err(error) = context
            .recorder
            .warning_note(&regarding, "PromotionBlocked", "Promote", &message)
            .await
        {
            tracing::warn!(error = %error, "cannot publish the promotion event");
        }
    }
}

/// The guard let `content` through: forgets any block, and turns a
/// `PromotionBlocked` condition False.
pub(crate) fn clear(
    context: &Context,
    catalog: &CatalogSource,
    status: &mut CatalogSourceStatus,
    content: &str,
    now: Timestamp,
) {
    let namespace = catalog.metadata.namespace.clone().unwrap_or_default();
    let name = kube::ResourceExt::name_any(catalog);
    context.blocked.clear(&namespace, &name);
    let type_ = CatalogSourceConditionType::PROMOTION_BLOCKED;
    if status.conditions.iter().any(|c| c.type_ == type_.as_str()) {
        conditions::set(
            &mut status.conditions,
            conditions::metav1(
                type_.as_str(),
                conditions::FALSE,
                CatalogSourceConditionReason::CONTENT_PROMOTED.as_str(),
                &promotion::promoted_message(content),
                None,
            ),
            now,
        );
    }
}
