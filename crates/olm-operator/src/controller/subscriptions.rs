//! The Subscription cache: what olm-operator reads of Subscriptions (the
//! `spec.config` that adjusts an operator's Deployments, and
//! `installedCSV`/`currentCSV` for that and for Operator adoption).
//!
//! Subscriptions are rewritten by catalog-operator on every resolution pass
//! (conditions, catalog health, timestamps). The cache keeps each one
//! trimmed ([`trim_subscription`]) and wakes the CSVs a Subscription names
//! only when something olm-operator reads of it changed
//! ([`subscription_fingerprint`]), so that churn costs neither memory nor
//! CSV syncs.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
};

use futures::channel::mpsc;
use kube::{
    Api,
    runtime::{WatchStreamExt, reflector::ObjectRef, watcher},
};
use olm_api::{
    csv::ClusterServiceVersion,
    subscription::{Subscription, SubscriptionConfig},
};
use olm_runtime::{admin::Readiness, cache as caches};

use super::Context;
use crate::decide::subscription_config::{
    config_for, named_csvs, subscription_fingerprint, trim_subscription,
};

/// What the cache remembers of each Subscription to tell changes apart: its
/// fingerprint and the CSVs it named.
type Seen = HashMap<(String, String), (u64, Vec<String>)>;

/// Builds the Subscription reflector: trimmed objects, and a CSV requeue
/// for each CSV a Subscription names (before and after the change) when its
/// fingerprint changes or it is deleted.
pub(crate) fn reflector(
    api: Api<Subscription>,
    readiness: &Readiness,
    csv_requeue: &mpsc::UnboundedSender<ObjectRef<ClusterServiceVersion>>,
) -> caches::Reflector<Subscription> {
    let csv_requeue = csv_requeue.clone();
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .modify(trim_subscription);
    caches::reflect_stream(
        stream,
        readiness.gate("cache:Subscription"),
        move |subscription: &Subscription, change| {
            let Some(namespace) = subscription.metadata.namespace.clone() else {
                return;
            };
            let key = (
                namespace.clone(),
                subscription.metadata.name.clone().unwrap_or_default(),
            );
            let mut seen = seen.lock().unwrap_or_else(PoisonError::into_inner);
            let mut wake = match change {
                caches::Change::Deleted => seen.remove(&key).map(|(_, names)| names),
                caches::Change::Applied => {
                    let fingerprint = subscription_fingerprint(subscription);
                    let names = named_csvs(subscription);
                    match seen.insert(key, (fingerprint, names.clone())) {
                        Some((before, _)) if before == fingerprint => None,
                        Some((_, mut before_names)) => {
                            before_names.extend(names);
                            Some(before_names)
                        }
                        None => Some(names),
                    }
                }
            }
            .unwrap_or_default();
            if change == caches::Change::Deleted {
                wake.extend(named_csvs(subscription));
            }
            wake.sort();
            wake.dedup();
            for name in wake {
                let _ = csv_requeue.unbounded_send(ObjectRef::new(&name).within(&namespace));
            }
        },
    )
}

/// The `spec.config` that applies to `csv` (see
/// [`crate::decide::subscription_config::owning_subscription`]), from the
/// cache.
pub(crate) fn config_for_csv(
    context: &Context,
    csv: &ClusterServiceVersion,
) -> Option<SubscriptionConfig> {
    let namespace = csv.metadata.namespace.as_deref().unwrap_or_default();
    let name = csv.metadata.name.as_deref().unwrap_or_default();
    let subscriptions: Vec<Subscription> = context
        .caches
        .subscriptions
        .state()
        .iter()
        .filter(|s| s.metadata.namespace.as_deref() == Some(namespace))
        .map(|s| Subscription::clone(s))
        .collect();
    config_for(name, namespace, &subscriptions).cloned()
}
