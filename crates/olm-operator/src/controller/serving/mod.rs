//! Owned APIServices and webhooks carried out: reading what the decisions of
//! [`crate::decide::certs`], [`crate::decide::api_service`] and
//! [`crate::decide::webhook`] look at, and applying what they return.
//!
//! Only CSVs that own an APIService or declare a webhook cost any request
//! here; their objects are read with direct GETs and label-selected LISTs at
//! sync time. Metadata-only watches on OLM-managed Secrets, webhook
//! configurations and APIServices wake the owning CSV when one changes or
//! goes (see `wakeups`); the certificates' own next rotation time and the
//! resync do the rest.
//!
//! [`observe()`] reads what the decisions look at; [`install()`] and [`cleanup`]
//! carry out what they return; this module holds the watches that wake a
//! CSV and the helpers both share.

mod install;
mod observe;

pub(crate) use install::{ServingInputs, cleanup, install};
pub(crate) use observe::{ServingObservation, all_csvs, observe};

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use k8s_openapi::{
    api::{
        admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration},
        core::v1::Secret,
    },
    kube_aggregator::pkg::apis::apiregistration::v1::APIService,
};
use kube::{Api, Client, ResourceExt, api::ListParams};
use olm_api::{csv::ClusterServiceVersion, labels};

use crate::{
    Error,
    decide::{api_service::api_service_name, certs::ServingTarget},
};

/// Extra delay on top of a certificate's next rotation time, so the sync
/// lands after it (certificates have second precision).
pub(super) const ROTATION_SLACK: Duration = Duration::from_secs(1);

pub(super) fn kube_error(
    action: &'static str,
    kind: &'static str,
    name: impl Into<String>,
) -> impl FnOnce(kube::Error) -> Error {
    let name = name.into();
    move |source| Error::Kube {
        action,
        kind,
        name,
        source: Box::new(source),
    }
}

pub(super) fn selector(wanted: &BTreeMap<String, String>) -> ListParams {
    ListParams::default().labels(
        &wanted
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(","),
    )
}

pub(super) fn namespace_of(csv: &ClusterServiceVersion) -> String {
    csv.metadata.namespace.clone().unwrap_or_default()
}

pub(super) async fn get_opt<K>(
    api: &Api<K>,
    kind: &'static str,
    name: &str,
) -> Result<Option<K>, Error>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    api.get_opt(name)
        .await
        .map_err(kube_error("read", kind, name))
}

/// The stored Secrets of the CSV's serving targets, by name.
pub(super) async fn target_secrets(
    client: &Client,
    csv: &ClusterServiceVersion,
    targets: &[ServingTarget],
) -> Result<BTreeMap<String, Secret>, Error> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace_of(csv));
    let mut found = BTreeMap::new();
    for target in targets {
        for name in [target.secret.clone(), target.ca_key_secret()] {
            if let Some(secret) = get_opt(&secrets, "Secret", &name).await? {
                found.insert(name, secret);
            }
        }
    }
    Ok(found)
}

/// The owned APIServices found, by name.
pub(super) async fn owned_api_services(
    client: &Client,
    csv: &ClusterServiceVersion,
) -> Result<BTreeMap<String, APIService>, Error> {
    let api: Api<APIService> = Api::all(client.clone());
    let mut found = BTreeMap::new();
    for description in csv.spec.owned_api_services() {
        let name = api_service_name(description);
        if let Some(object) = get_opt(&api, "APIService", &name).await? {
            found.insert(name, object);
        }
    }
    Ok(found)
}

/// Metadata-only watches that wake a CSV when one of its serving objects
/// changes or goes: certificate Secrets (`olm.managed`), webhook
/// configurations and APIServices carrying its owner labels. Nothing is
/// cached from them beyond metadata (no Secret data is held in memory).
pub(crate) fn wakeups(
    client: &Client,
    secrets: Api<kube::core::PartialObjectMeta<Secret>>,
    readiness: &olm_runtime::admin::Readiness,
    csv_tx: &futures::channel::mpsc::UnboundedSender<
        kube::runtime::reflector::ObjectRef<ClusterServiceVersion>,
    >,
) -> Vec<futures::future::BoxFuture<'static, ()>> {
    fn watch<K>(
        api: Api<kube::core::PartialObjectMeta<K>>,
        gate: olm_runtime::admin::ReadinessGate,
        csv_tx: &futures::channel::mpsc::UnboundedSender<
            kube::runtime::reflector::ObjectRef<ClusterServiceVersion>,
        >,
    ) -> futures::future::BoxFuture<'static, ()>
    where
        K: kube::Resource<DynamicType = ()> + Clone + std::fmt::Debug + Send + Sync + 'static,
    {
        use kube::runtime::{WatchStreamExt, watcher};
        let csv_tx = csv_tx.clone();
        let stream = watcher(
            api,
            watcher::Config::default().labels(&format!(
                "{}={}",
                labels::MANAGED,
                labels::MANAGED_VALUE
            )),
        )
        .default_backoff();
        olm_runtime::cache::reflect_stream(
            stream,
            gate,
            move |object: &kube::core::PartialObjectMeta<K>, _| {
                if let Some(owner) = super::owner_of(object.labels()) {
                    let _ = csv_tx.unbounded_send(owner);
                }
            },
        )
        .task
    }
    vec![
        watch::<Secret>(secrets, readiness.gate("cache:Secret"), csv_tx),
        watch::<ValidatingWebhookConfiguration>(
            Api::all(client.clone()),
            readiness.gate("cache:ValidatingWebhookConfiguration"),
            csv_tx,
        ),
        watch::<MutatingWebhookConfiguration>(
            Api::all(client.clone()),
            readiness.gate("cache:MutatingWebhookConfiguration"),
            csv_tx,
        ),
        watch::<APIService>(
            Api::all(client.clone()),
            readiness.gate("cache:APIService"),
            csv_tx,
        ),
    ]
}

/// The facts the requirement check needs about aggregated and native APIs:
/// each required APIService (`<version>.<group>`), and which of the GVKs
/// named by required APIServices and `nativeAPIs` discovery lists. Costs
/// nothing for a CSV naming neither.
pub(crate) async fn requirement_discovery(
    client: &Client,
    csv: &ClusterServiceVersion,
) -> (
    BTreeMap<String, crate::decide::requirements::ApiServiceFacts>,
    BTreeSet<olm_api::csv::GroupVersionKind>,
) {
    let mut api_services = BTreeMap::new();
    let mut wanted: BTreeSet<olm_api::csv::GroupVersionKind> =
        csv.spec.native_apis.iter().flatten().cloned().collect();
    let api: Api<APIService> = Api::all(client.clone());
    for description in csv.spec.required_api_services() {
        let name = api_service_name(description);
        match api.get_opt(&name).await {
            Ok(Some(found)) => {
                api_services.insert(
                    name,
                    crate::decide::requirements::ApiServiceFacts::of(&found),
                );
            }
            Ok(None) => {}
            Err(error) => tracing::debug!(name, %error, "cannot read required apiservice"),
        }
        wanted.insert(crate::decide::api_service::served_gvk(description));
    }
    let mut by_group_version: BTreeMap<(String, String), Vec<olm_api::csv::GroupVersionKind>> =
        BTreeMap::new();
    for gvk in wanted {
        by_group_version
            .entry((gvk.group.clone(), gvk.version.clone()))
            .or_default()
            .push(gvk);
    }
    let mut discovered = BTreeSet::new();
    for ((group, version), gvks) in by_group_version {
        let listed = if group.is_empty() {
            client.list_core_api_resources(&version).await
        } else {
            client
                .list_api_group_resources(&format!("{group}/{version}"))
                .await
        };
        match listed {
            Ok(list) => discovered.extend(
                gvks.into_iter()
                    .filter(|gvk| list.resources.iter().any(|r| r.kind == gvk.kind)),
            ),
            Err(error) => tracing::debug!(group, version, %error, "not discoverable"),
        }
    }
    (api_services, discovered)
}
