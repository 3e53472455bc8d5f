//! The CatalogSource reconciler: resolves image templates, validates the
//! spec, runs the registry (ServiceAccount, Service, NetworkPolicies, Pod)
//! for image and ConfigMap catalogs, probes the registry over gRPC, and
//! writes what it found to status. Upstream: `syncCatalogSources` and the
//! catalog-template controller.

use std::{collections::BTreeMap, sync::Arc};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::{
    Api, Resource, ResourceExt,
    api::{DeleteParams, Patch, PatchParams, PostParams},
    runtime::controller::Action,
};
use olm_api::{catalog_source::CatalogSource, labels};
use olm_bus::events::CatalogUpdated;
use olm_runtime::apply;

use super::{Context, FIELD_MANAGER, promotion};
use crate::Error;

use crate::decide::{
    catalog_source::{
        self as decide, PollSchedule, RegistryObjects, Serving,
        pods::{self, ContentCheck, PodAction, RegistryPods},
        sync::{
            self as sync_rules, Admission, CatalogObservation, ConfigMapLookup, Probe, Recheck,
            RegistryRun,
        },
    },
    promotion as guard,
};

/// `namespace/name`, for log lines.
fn key(catalog: &CatalogSource) -> String {
    format!(
        "{}/{}",
        catalog.metadata.namespace.as_deref().unwrap_or_default(),
        catalog.name_any()
    )
}

/// Reconciles one CatalogSource.
pub(crate) async fn reconcile(
    catalog: Arc<CatalogSource>,
    context: Arc<Context>,
) -> Result<Action, Error> {
    sync(&catalog, &context).await
}

async fn sync(catalog: &CatalogSource, context: &Context) -> Result<Action, Error> {
    let namespace = catalog.metadata.namespace.clone().unwrap_or_default();
    let name = catalog.name_any();
    let api: Api<CatalogSource> = Api::namespaced(context.client.clone(), &namespace);
    let now = Timestamp::now();
    let original = catalog.status.clone().unwrap_or_default();

    let config_map = match sync_rules::config_map_to_read(catalog) {
        None => ConfigMapLookup::NotServed,
        Some(config_map) => {
            let config_maps: Api<ConfigMap> = Api::namespaced(context.client.clone(), &namespace);
            match config_maps.get_opt(&config_map).await {
                Ok(Some(found)) => ConfigMapLookup::Found {
                    uid: found.metadata.uid,
                    resource_version: found.metadata.resource_version,
                },
                Ok(None) => ConfigMapLookup::Missing,
                Err(error) => {
                    return Err(Error::kube(format!(
                        "reading configmap {namespace}/{config_map}"
                    ))(error));
                }
            }
        }
    };
    let admitted = sync_rules::admit(&CatalogObservation {
        catalog,
        kube_version: &context.kube_version,
        allowed_registries: &context.config.allowed_registries,
        allowed_catalog_addresses: &context.config.allowed_catalog_addresses,
        config_map: &config_map,
        now,
    });
    let mut status = admitted.status;
    let (serving, schedule) = match admitted.next {
        Admission::ResolveImage(image) => {
            context
                .write_status(catalog, catalog.status.as_ref(), &status)
                .await?;
            let patch = serde_json::json!({ "spec": { "image": image } });
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(Error::kube(format!(
                    "writing the resolved image of {namespace}/{name}"
                )))?;
            // The change comes back through the watch.
            return Ok(Action::await_change());
        }
        Admission::Refused => {
            context.connections.forget(&namespace, &name);
            context
                .write_status(catalog, catalog.status.as_ref(), &status)
                .await?;
            return Ok(Action::await_change());
        }
        Admission::ConfigMapMissing => {
            context
                .write_status(catalog, catalog.status.as_ref(), &status)
                .await?;
            return Ok(Action::requeue(sync_rules::NOT_READY_RECHECK));
        }
        Admission::Serve { serving, schedule } => (serving, schedule),
    };

    let mut updating = false;
    if !matches!(serving, Serving::Address { .. }) {
        let mut with_status = catalog.clone();
        with_status.status = Some(status.clone());
        if let Some(run) = run_registry(&with_status, &serving, schedule.as_ref(), context).await? {
            updating = run.updating;
            sync_rules::registry_ran(&mut status, &namespace, &run.recorded, now);
        }
    }

    // A registry pod replaced by a promoted update pod serves new content,
    // though the connection may never have looked down: reconnect, and take
    // no snapshot home until the old pod has surely left the Service.
    if sync_rules::registry_replaced(&original, &status) {
        context.connections.forget(&namespace, &name);
        context
            .snapshots
            .settle(&namespace, &name, sync_rules::REGISTRY_REPLACED_SETTLE);
    }
    let mut probed = catalog.clone();
    probed.status = Some(status.clone());
    let ready = match probed.registry_address() {
        Some(address) => {
            let probe = context
                .connections
                .probe(&namespace, &name, &address, context.config.registry_timeout)
                .await;
            let connection = sync_rules::connected(
                &mut status,
                Probe {
                    address: address.clone(),
                    state: probe.state,
                    settled: context.snapshots.settled(&namespace, &name),
                },
                now,
            );
            // Said once when the connection changes, not at every recheck.
            if let Some(error) = probe.error.as_deref().filter(|_| connection.changed) {
                tracing::debug!(
                    catalog = key(catalog),
                    address,
                    dialled = probe.dialled,
                    error,
                    "registry not ready"
                );
            }
            context
                .metrics
                .catalog_ready(&namespace, &name, connection.ready);
            if connection.ready && connection.changed {
                // New connection, maybe new content: resolve from fresh data.
                context.snapshots.invalidate(&namespace, &name);
                publish_ready(context, catalog, now).await;
            }
            connection.ready
        }
        None => false,
    };

    context
        .write_status(catalog, catalog.status.as_ref(), &status)
        .await?;
    Ok(Action::requeue(sync_rules::next_check(&Recheck {
        ready,
        settling: context.snapshots.settling(&namespace, &name),
        updating,
        schedule: schedule.as_ref(),
        resync: context.config.resync,
        ready_recheck: context.config.ready_recheck,
        jitter: rand::random(),
    })))
}

/// Tells the bus the catalog's registry became READY, so that readers of
/// catalog content (packageserver, resolution) refresh at once. A bus
/// outage only delays them until their own watch or resync.
async fn publish_ready(context: &Context, catalog: &CatalogSource, now: Timestamp) {
    let event = CatalogUpdated {
        catalog: Some(olm_bus::events::ObjectRef {
            api_version: "operators.coreos.com/v1alpha1".to_owned(),
            kind: "CatalogSource".to_owned(),
            namespace: catalog.metadata.namespace.clone().unwrap_or_default(),
            name: catalog.name_any(),
            uid: catalog.metadata.uid.clone().unwrap_or_default(),
            resource_version: catalog
                .metadata
                .resource_version
                .clone()
                .unwrap_or_default(),
        }),
        content_digest: String::new(),
        previous_content_digest: String::new(),
        reason: "ConnectionReady".to_owned(),
        occurred_at: Some(prost_types::Timestamp {
            seconds: now.as_second(),
            nanos: now.subsec_nanosecond(),
        }),
    };
    if let Err(error) = context.bus.publish(&event).await {
        tracing::debug!(error = %error, "catalog update not published");
    }
}

/// Whether a stored object still matches the desired one, by the hash
/// annotation catalog-operator stamps on what it applies.
fn up_to_date<K: Resource>(stored: Option<&K>, hash: &str) -> bool {
    stored.is_some_and(|s| {
        s.meta()
            .annotations
            .as_ref()
            .and_then(|a| a.get(SPEC_HASH_ANNOTATION))
            .is_some_and(|h| h == hash)
    })
}

/// The annotation holding the hash of what catalog-operator last applied to
/// a registry object, so unchanged objects are not written again.
pub const SPEC_HASH_ANNOTATION: &str = "olm.catalog-operator/spec-hash";

async fn apply_if_changed<K>(
    client: &kube::Client,
    namespace: &str,
    mut desired: K,
    stored: Option<&K>,
) -> Result<(), Error>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::Serialize
        + serde::de::DeserializeOwned,
{
    let hash = decide::spec_hash(&desired);
    if up_to_date(stored, &hash) {
        return Ok(());
    }
    desired
        .meta_mut()
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(SPEC_HASH_ANNOTATION.to_owned(), hash);
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    apply::apply(&api, &FIELD_MANAGER, &desired).await?;
    Ok(())
}

fn cached<K>(
    store: &kube::runtime::reflector::Store<K>,
    namespace: &str,
    name: &str,
) -> Option<Arc<K>>
where
    K: Resource<DynamicType = ()> + Clone,
{
    store.get(&kube::runtime::reflector::ObjectRef::new(name).within(namespace))
}

async fn delete_pod(api: &Api<Pod>, name: &str, grace_seconds: u32) -> Result<(), Error> {
    let params = DeleteParams {
        grace_period_seconds: Some(grace_seconds),
        ..DeleteParams::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(response)) if response.code == 404 => Ok(()),
        Err(error) => Err(Error::kube(format!("deleting registry pod {name}"))(error)),
    }
}

/// The digest the catalog image's tag points at now, by a registry HEAD
/// request with the catalog's pull secrets.
async fn resolve_digest(
    context: &Context,
    catalog: &CatalogSource,
    image: &str,
) -> Result<String, String> {
    let reference = olm_oci::Reference::parse(image).map_err(|e| e.to_string())?;
    let mut options = olm_oci::ClientOptions::default();
    for host in &context.config.insecure_registries {
        options = options.plain_http(host.clone());
    }
    let namespace = catalog.metadata.namespace.clone().unwrap_or_default();
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(context.client.clone(), &namespace);
    for name in &catalog.spec.secrets {
        let Some(secret) = secrets.get_opt(name).await.map_err(|e| e.to_string())? else {
            continue;
        };
        let data = secret.data.unwrap_or_default();
        for key in [".dockerconfigjson", ".dockercfg"] {
            if let Some(bytes) = data.get(key) {
                match olm_oci::DockerConfig::parse(&bytes.0) {
                    Ok(config) => options.credentials.merge(config),
                    Err(error) => {
                        tracing::warn!(secret = name, error = %error, "unreadable pull secret")
                    }
                }
            }
        }
    }
    let client = olm_oci::Client::new(options).map_err(|e| e.to_string())?;
    client
        .resolve(&reference)
        .await
        .map(|d| d.to_string())
        .map_err(|e| e.to_string())
}

/// The catalog image's digest now, or `None` (after saying why) when the
/// registry cannot tell.
async fn current_digest(context: &Context, catalog: &CatalogSource, image: &str) -> Option<String> {
    match resolve_digest(context, catalog, image).await {
        Ok(digest) => Some(digest),
        Err(error) => {
            tracing::warn!(
                catalog = key(catalog),
                error,
                "cannot resolve the catalog image digest"
            );
            None
        }
    }
}

/// Starts `desired` as the catalog's update pod, pinned to `digest` when
/// there is one, unless the guard refused exactly that content
/// ([`pods::may_start`]); whether it started.
async fn start_update_pod(
    context: &Context,
    catalog: &CatalogSource,
    pod_api: &Api<Pod>,
    desired: &Pod,
    image: Option<&str>,
    digest: Option<String>,
) -> Result<bool, Error> {
    let name = catalog.name_any();
    let mut update = desired.clone();
    if let (Some(image), Some(digest)) = (image, &digest) {
        decide::pin_pod(&mut update, image, digest);
    }
    decide::as_update_pod(&mut update, &name);
    if !pods::may_start(&update, context.guard.blocked(catalog).as_ref()) {
        return Ok(false);
    }
    pod_api
        .create(&PostParams::default(), &update)
        .await
        .map_err(Error::kube(format!(
            "creating the update pod of {}/{name}",
            catalog.metadata.namespace.as_deref().unwrap_or_default()
        )))?;
    Ok(true)
}

/// What a registry run did.
struct RegistryOutcome {
    /// An update pod is on its way (not ready, or not yet checked by the
    /// promotion guard).
    updating: bool,
    /// What the status records of it.
    recorded: RegistryRun,
}

/// Runs the registry of an image or ConfigMap catalog (`catalog` carries
/// the status decided so far): applies what changed and makes sure exactly
/// one pod with the current spec serves. `None` when there is nothing to
/// run.
async fn run_registry(
    catalog: &CatalogSource,
    serving: &Serving,
    schedule: Option<&PollSchedule>,
    context: &Context,
) -> Result<Option<RegistryOutcome>, Error> {
    let namespace = catalog.metadata.namespace.clone().unwrap_or_default();
    let name = catalog.name_any();
    let namespace_labels = context
        .caches
        .namespaces
        .get(&kube::runtime::reflector::ObjectRef::new(&namespace))
        .and_then(|ns| ns.metadata.labels.clone())
        .unwrap_or_default();
    let Some(RegistryObjects {
        service_account,
        service,
        pod,
        network_policies,
    }) = decide::registry_objects(
        catalog,
        serving,
        &namespace_labels,
        &context.config.pod_options,
    )
    else {
        return Ok(None);
    };
    let client = &context.client;
    let caches = &context.caches;

    let sa_name = service_account.metadata.name.clone().unwrap_or_default();
    let stored = cached(&caches.service_accounts, &namespace, &sa_name);
    apply_if_changed(client, &namespace, service_account, stored.as_deref()).await?;
    let service_name = service.metadata.name.clone().unwrap_or_default();
    let stored = cached(&caches.services, &namespace, &service_name);
    apply_if_changed(client, &namespace, service, stored.as_deref()).await?;
    for policy in network_policies {
        let policy_name = policy.metadata.name.clone().unwrap_or_default();
        let stored = cached(&caches.network_policies, &namespace, &policy_name);
        apply_if_changed(client, &namespace, policy, stored.as_deref()).await?;
    }

    let in_namespace = |p: &Arc<Pod>| p.metadata.namespace.as_deref() == Some(namespace.as_str());
    let labelled = |p: &Arc<Pod>, label: &str| {
        p.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(label))
            .is_some_and(|c| *c == name)
    };
    let all_pods = caches.pods.state();
    let serving_pods: Vec<&Pod> = all_pods
        .iter()
        .filter(|p| in_namespace(p) && labelled(p, labels::CATALOG_SOURCE))
        .map(AsRef::as_ref)
        .collect();
    let update_pods: Vec<&Pod> = all_pods
        .iter()
        .filter(|p| in_namespace(p) && labelled(p, labels::CATALOG_SOURCE_UPDATE))
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(AsRef::as_ref)
        .collect();
    let image = match serving {
        Serving::Image { image } => Some(image.as_str()),
        _ => None,
    };
    let mut observed = RegistryPods {
        desired: &pod,
        serving: &serving_pods,
        updates: &update_pods,
        image,
        schedule: image.and(schedule),
        guard_requested: guard::guarded(catalog),
        checks: &[],
        allowed_registries: &context.config.allowed_registries,
    };
    let guarded = observed.guarded();
    if !guarded {
        context.guard.forget(catalog);
    }
    let mut checks = Vec::new();
    for update in pods::to_check(&observed) {
        let check = promotion::check(context, update).await;
        if let ContentCheck::Pending(why) = &check {
            tracing::debug!(catalog = key(catalog), why, "new content not checked yet");
        }
        checks.push((update.name_any(), check));
    }
    observed.checks = &checks;
    let plan = pods::plan(&observed);
    // `Served` alone is repeated every pass of a guarded catalog: not news.
    if plan
        .actions
        .iter()
        .any(|a| !matches!(a, PodAction::Served(_)))
    {
        tracing::debug!(catalog = key(catalog), actions = ?plan.actions, "registry pods");
    }

    let pod_api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let mut pending = plan.pending;
    let mut polled = false;
    for action in &plan.actions {
        match action {
            PodAction::Block {
                content,
                reason,
                message,
            } => {
                promotion::block(
                    context,
                    catalog,
                    content.clone(),
                    reason.clone(),
                    message.clone(),
                )
                .await;
            }
            PodAction::Delete { name, grace } => delete_pod(&pod_api, name, *grace).await?,
            PodAction::Promote {
                name: update,
                passed,
            } => {
                if let Some(content) = passed {
                    context.guard.promoted(catalog, content);
                }
                let patch = serde_json::json!({"metadata": {
                    "labels": {
                        labels::CATALOG_SOURCE: name,
                        labels::CATALOG_SOURCE_UPDATE: null,
                    },
                    "annotations": {
                        decide::PROMOTED_AT_ANNOTATION: Timestamp::now().to_string(),
                    },
                }});
                pod_api
                    .patch(update, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(Error::kube(format!(
                        "promoting the update pod of {namespace}/{name}"
                    )))?;
            }
            PodAction::StartUpdate => {
                let digest = match image {
                    Some(image) => current_digest(context, catalog, image).await,
                    None => None,
                };
                pending |=
                    start_update_pod(context, catalog, &pod_api, &pod, image, digest).await?;
            }
            PodAction::CreateServing { pin } => {
                let mut fresh = pod.clone();
                if let Some(image) = image.filter(|_| *pin)
                    && let Some(resolved) = current_digest(context, catalog, image).await
                {
                    let mut candidate = fresh.clone();
                    decide::pin_pod(&mut candidate, image, &resolved);
                    let digest = pods::fresh_digest(
                        &candidate,
                        &resolved,
                        guarded,
                        context.guard.blocked(catalog).as_ref(),
                        context.guard.last_served(catalog).as_deref(),
                    );
                    decide::pin_pod(&mut fresh, image, &digest);
                    polled = true;
                }
                pod_api
                    .create(&PostParams::default(), &fresh)
                    .await
                    .map_err(Error::kube(format!(
                        "creating the registry pod of {namespace}/{name}"
                    )))?;
            }
            PodAction::Poll { serving } => {
                polled = true;
                let Some(image) = image else { continue };
                match resolve_digest(context, catalog, image).await {
                    Ok(digest) if serving.as_deref() != Some(digest.as_str()) => {
                        pending |= start_update_pod(
                            context,
                            catalog,
                            &pod_api,
                            &pod,
                            Some(image),
                            Some(digest),
                        )
                        .await?;
                    }
                    Ok(_) => {}
                    Err(error) => {
                        tracing::warn!(
                            catalog = key(catalog),
                            error,
                            "cannot poll the catalog image"
                        );
                    }
                }
            }
            PodAction::Served(digest) => context.guard.served(catalog, digest),
        }
    }
    Ok(Some(RegistryOutcome {
        updating: pending,
        recorded: RegistryRun {
            service_name,
            replaced: plan.replaced,
            polled,
            guarded,
            verdict: guarded.then(|| context.guard.verdict(catalog)).flatten(),
        },
    }))
}
