//! The I/O of the promotion guard ([`crate::decide::promotion`]): reads
//! what a ready update pod offers over the registry API, remembers each
//! guarded catalog's last verdict (and the content not to start again),
//! which the sync writes into `PromotionBlocked`, and publishes a Warning
//! event on a new refusal.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use futures::TryStreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Resource;
use olm_api::catalog_source::{CatalogSource, CatalogSourceConditionReason};
use olm_registry::{ClientOptions, RegistryClient};

use super::Context;
use crate::decide::{
    catalog_source::REGISTRY_GRPC_PORT,
    catalog_source::pods::ContentCheck,
    promotion::{self, OfferedBundle, Verdict},
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

/// Lists the bundles the update pod serves and checks them against the
/// policy.
pub(crate) async fn check(context: &Context, pod: &Pod) -> ContentCheck {
    let address = match &context.config.content_dial {
        ContentDial::Fixed(address) => address.clone(),
        ContentDial::PodIp => match pod.status.as_ref().and_then(|s| s.pod_ip.as_deref()) {
            Some(ip) if ip.contains(':') => format!("[{ip}]:{REGISTRY_GRPC_PORT}"),
            Some(ip) => format!("{ip}:{REGISTRY_GRPC_PORT}"),
            None => return ContentCheck::Pending("the update pod has no IP yet".to_owned()),
        },
    };
    match offered(&address, context.config.registry_timeout).await {
        Ok(bundles) => {
            let refused = promotion::refusals(&bundles, &context.config.allowed_registries);
            if refused.is_empty() {
                ContentCheck::Allowed
            } else {
                ContentCheck::Refused(refused)
            }
        }
        Err(error) => {
            ContentCheck::Pending(format!("reading the new content at {address}: {error}"))
        }
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

/// What the guard decided last for one catalog, and the digest it served.
#[derive(Debug, Clone, Default)]
struct Entry {
    verdict: Option<Verdict>,
    served_digest: Option<String>,
}

/// The guard's memory of each guarded catalog. The `PromotionBlocked`
/// condition is written from it on every reconcile (level-triggered: a
/// status write lost to a conflict, or overwritten from a stale cache, is
/// put right at the next one). Lost on restart: the condition is then left
/// as found until the next verdict, and refused content is checked once
/// more.
/// Shared by clones; an entry goes when its catalog is deleted or stops
/// being guarded.
#[derive(Debug, Default, Clone)]
pub(crate) struct Memory(Arc<Mutex<HashMap<(String, String), Entry>>>);

fn key_of(catalog: &CatalogSource) -> (String, String) {
    (
        catalog.metadata.namespace.clone().unwrap_or_default(),
        kube::ResourceExt::name_any(catalog),
    )
}

impl Memory {
    /// Changes the catalog's entry, making it if needed.
    fn with<T>(&self, catalog: &CatalogSource, f: impl FnOnce(&mut Entry) -> T) -> T {
        let mut entries = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        f(entries.entry(key_of(catalog)).or_default())
    }

    /// Reads the catalog's entry, if it has one (reading makes none).
    fn read<T>(&self, catalog: &CatalogSource, f: impl FnOnce(&Entry) -> T) -> Option<T> {
        let entries = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        entries.get(&key_of(catalog)).map(f)
    }

    /// Remembers the digest the catalog's serving pod runs.
    pub(crate) fn served(&self, catalog: &CatalogSource, digest: &str) {
        self.with(catalog, |entry| {
            entry.served_digest = Some(digest.to_owned())
        });
    }

    /// The digest the catalog served last, if known.
    pub(crate) fn last_served(&self, catalog: &CatalogSource) -> Option<String> {
        self.read(catalog, |entry| entry.served_digest.clone())
            .flatten()
    }

    /// Records that `content` passed and was promoted.
    pub(crate) fn promoted(&self, catalog: &CatalogSource, content: &str) {
        self.with(catalog, |entry| {
            entry.verdict = Some(Verdict::Promoted {
                content: content.to_owned(),
            });
        });
    }

    /// Forgets the catalog (it is no longer guarded, or was deleted).
    pub(crate) fn forget(&self, catalog: &CatalogSource) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&key_of(catalog));
    }

    /// The content the guard refused last for the catalog, if any.
    pub(crate) fn blocked(&self, catalog: &CatalogSource) -> Option<(String, String)> {
        match self.verdict(catalog)? {
            Verdict::Blocked { content, .. } => Some(content),
            Verdict::Promoted { .. } => None,
        }
    }

    /// The last verdict on the catalog, if any (written into
    /// `PromotionBlocked` by [`crate::decide::promotion::blocked_condition`]).
    pub(crate) fn verdict(&self, catalog: &CatalogSource) -> Option<Verdict> {
        self.read(catalog, |entry| entry.verdict.clone()).flatten()
    }
}

/// Refuses `content`: remembers it (so it is not started again) and
/// publishes a Warning event when it is news.
pub(crate) async fn block(
    context: &Context,
    catalog: &CatalogSource,
    content: (String, String),
    reason: CatalogSourceConditionReason,
    message: String,
) {
    let (namespace, name) = key_of(catalog);
    tracing::warn!(catalog = %format!("{namespace}/{name}"), %message, "promotion blocked");
    let news = context.guard.blocked(catalog).as_ref() != Some(&content);
    context.guard.with(catalog, |entry| {
        entry.verdict = Some(Verdict::Blocked {
            content,
            reason,
            message: message.clone(),
        });
    });
    if news {
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
