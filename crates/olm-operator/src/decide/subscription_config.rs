//! Which Subscription's `spec.config` adjusts a CSV's Deployments, and what
//! olm-operator keeps of a Subscription.
//!
//! Upstream (`pkg/controller/operators/olm/overrides/config.go`,
//! `findOwner`) takes the first Subscription of the CSV's namespace whose
//! `status.installedCSV` names the CSV. catalog-operator sets `installedCSV`
//! only once the CSV exists, so upstream first rolls out the Deployments
//! without the config and then once more with it. Here a Subscription whose
//! `status.currentCSV` names the CSV is taken when none has it as
//! `installedCSV`, so the first rollout already carries the config; the
//! merge itself is [`crate::decide::deployment::apply_overrides`].
//!
//! Subscriptions are watched in full (the config is in the spec), but most of
//! what changes in one (conditions, catalog health, timestamps) is of no
//! interest here: [`trim_subscription`] keeps only what olm-operator reads,
//! and [`subscription_fingerprint`] tells a change that matters from one that
//! does not, so a Subscription's status churn wakes no CSV.

use std::hash::{Hash, Hasher};

use olm_api::subscription::{Subscription, SubscriptionConfig, SubscriptionStatus};

/// The Subscription whose config applies to the CSV `csv_name` of
/// `namespace`: the first whose `status.installedCSV` is the CSV, else the
/// first whose `status.currentCSV` is.
pub fn owning_subscription<'a>(
    csv_name: &str,
    namespace: &str,
    subscriptions: &'a [Subscription],
) -> Option<&'a Subscription> {
    let in_namespace = || {
        subscriptions
            .iter()
            .filter(move |s| s.metadata.namespace.as_deref() == Some(namespace))
    };
    let status = |s: &'a Subscription| s.status.as_ref();
    in_namespace()
        .find(|s| status(s).and_then(|st| st.installed_csv.as_deref()) == Some(csv_name))
        .or_else(|| {
            in_namespace()
                .find(|s| status(s).and_then(|st| st.current_csv.as_deref()) == Some(csv_name))
        })
}

/// The `spec.config` that applies to the CSV (see [`owning_subscription`]).
pub fn config_for<'a>(
    csv_name: &str,
    namespace: &str,
    subscriptions: &'a [Subscription],
) -> Option<&'a SubscriptionConfig> {
    owning_subscription(csv_name, namespace, subscriptions).and_then(|s| s.spec.config.as_ref())
}

/// Drops what olm-operator never reads of a Subscription before it is
/// cached: annotations, managed fields, and all of the status except
/// `installedCSV` and `currentCSV` (conditions and `catalogHealth` are most
/// of a Subscription's size and change on every catalog-operator pass).
pub fn trim_subscription(subscription: &mut Subscription) {
    let metadata = &mut subscription.metadata;
    metadata.managed_fields = None;
    metadata.annotations = None;
    subscription.status = subscription.status.take().map(|status| SubscriptionStatus {
        installed_csv: status.installed_csv,
        current_csv: status.current_csv,
        ..SubscriptionStatus::default()
    });
}

/// A digest of everything olm-operator reads of a Subscription: its labels,
/// package, config, `installedCSV` and `currentCSV`. Two versions with the
/// same fingerprint lead to the same decisions.
pub fn subscription_fingerprint(subscription: &Subscription) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    subscription.metadata.labels.hash(&mut hasher);
    subscription.spec.package.hash(&mut hasher);
    // The config's types implement neither Hash nor Ord; its JSON is canonical
    // enough (maps are BTreeMaps, lists keep their order).
    serde_json::to_string(&subscription.spec.config)
        .unwrap_or_default()
        .hash(&mut hasher);
    let status = subscription.status.as_ref();
    status
        .and_then(|s| s.installed_csv.as_deref())
        .hash(&mut hasher);
    status
        .and_then(|s| s.current_csv.as_deref())
        .hash(&mut hasher);
    hasher.finish()
}

/// The CSVs a Subscription names (`installedCSV`, `currentCSV`), without
/// repeats: the ones to look at again when its config changes.
pub fn named_csvs(subscription: &Subscription) -> Vec<String> {
    let mut names = Vec::new();
    if let Some(status) = &subscription.status {
        for name in [&status.installed_csv, &status.current_csv]
            .into_iter()
            .flatten()
        {
            if !name.is_empty() && !names.contains(name) {
                names.push(name.clone());
            }
        }
    }
    names
}
