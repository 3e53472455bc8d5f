//! The namespace resolution pass: keeps every Subscription's status true
//! (catalog health, InstallPlan conditions, state), resolves all
//! Subscriptions of a namespace together with olm-resolver, and writes one
//! InstallPlan for what must be installed. Upstream:
//! `syncResolvingNamespace` (`pkg/controller/operators/catalog/operator.go`).

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use jiff::Timestamp;
use k8s_openapi::{
    api::core::v1::{Namespace, ObjectReference},
    apimachinery::pkg::apis::meta::v1::OwnerReference,
};
use kube::{Api, Resource, ResourceExt, api::PostParams, runtime::controller::Action};
use olm_api::{
    catalog_source::{CatalogSource, CatalogSourceReason, ConnectivityState},
    conditions,
    csv::ClusterServiceVersion,
    install_plan::{
        BundleLookup, BundleLookupCondition, BundleLookupConditionType, InstallPlan,
        InstallPlanPhase, InstallPlanStatus, Step,
    },
    labels,
    subscription::{
        Approval, Subscription, SubscriptionConditionReason, SubscriptionState, SubscriptionStatus,
    },
};
use olm_resolver::{
    CatalogSnapshot, InstalledCsv, NamespaceState, Resolution, ResolveError, ResolveRequest,
    ResolvedOperator,
};
use olm_runtime::apply;
use sha2::{Digest, Sha256};
use tracing::Instrument as _;

use super::Context;
use crate::Error;
use olm_plan::steps::{self, BundleContent, BundleSource};

use crate::decide::{
    install_plan as plan_rules,
    subscription::{self as rules, CatalogHealth},
};

/// Reason of the Warning event on a CatalogSource whose content could not
/// be read while resolving (it is then treated as unhealthy).
pub const CATALOG_UNREADABLE: &str = "CatalogSourceUnreadable";

/// How long to wait before resolving again after an error that may pass.
pub const RESOLUTION_RETRY: Duration = Duration::from_secs(30);

/// The span of one namespace's resolution pass: each pass is a trace of
/// its own; the pass that writes an InstallPlan starts the install's trace,
/// which the plan carries on.
pub(crate) fn span(namespace: &Namespace) -> tracing::Span {
    tracing::info_span!(
        parent: None,
        "resolve",
        k8s.namespace.name = %namespace.name_any(),
        trace_id = tracing::field::Empty,
    )
}

/// Runs the resolution pass of one namespace.
pub(crate) async fn reconcile(
    namespace: Arc<Namespace>,
    context: Arc<Context>,
) -> Result<Action, Error> {
    sync(&namespace.name_any(), &context).await
}

fn in_namespace<K: Resource<DynamicType = ()> + Clone>(
    store: &kube::runtime::reflector::Store<K>,
    namespace: &str,
) -> Vec<Arc<K>> {
    store
        .state()
        .into_iter()
        .filter(|o| o.meta().namespace.as_deref() == Some(namespace))
        .collect()
}

/// Whether a catalog can be resolved from: a valid spec and a READY registry.
pub(crate) fn healthy(catalog: &CatalogSource) -> bool {
    let status = catalog.status.as_ref();
    let invalid =
        status.and_then(|s| s.reason.as_ref()) == Some(&CatalogSourceReason::SPEC_INVALID_ERROR);
    let ready = status
        .and_then(|s| s.connection_state.as_ref())
        .is_some_and(|c| c.last_observed_state == ConnectivityState::READY);
    !invalid && ready
}

async fn sync(namespace: &str, context: &Context) -> Result<Action, Error> {
    // Only watched namespaces get here: the loop's triggers are filtered
    // (`controller::run`).
    let caches = &context.caches;
    context.metrics.set_counts(
        caches.catalogs.state().len(),
        caches.subscriptions.state().len(),
        caches.install_plans.state().len(),
    );
    let subscriptions = in_namespace(&context.caches.subscriptions, namespace);
    let plans = in_namespace(&context.caches.install_plans, namespace);
    collect_garbage(context, namespace, &plans, &subscriptions).await?;
    if subscriptions.is_empty() {
        return Ok(Action::await_change());
    }
    let now = Timestamp::now();
    let global = context.config.global_catalog_namespace.as_str();
    let catalogs: Vec<Arc<CatalogSource>> = context
        .caches
        .catalogs
        .state()
        .into_iter()
        .filter(|c| {
            let ns = c.metadata.namespace.as_deref().unwrap_or_default();
            ns == namespace || ns == global
        })
        .collect();
    let health: Vec<CatalogHealth> = catalogs
        .iter()
        .map(|c| CatalogHealth {
            namespace: c.metadata.namespace.clone().unwrap_or_default(),
            name: c.name_any(),
            uid: c.metadata.uid.clone().unwrap_or_default(),
            resource_version: c.metadata.resource_version.clone().unwrap_or_default(),
            healthy: healthy(c),
        })
        .collect();
    let csvs = in_namespace(&context.caches.csvs, namespace);

    // Keep every Subscription's status true before resolving.
    let csv_names: Vec<String> = csvs.iter().map(|c| c.name_any()).collect();
    let mut changed = false;
    for sub in &subscriptions {
        let mut refresh = rules::refresh(&rules::SubscriptionObservation {
            subscription: sub,
            plans: &plans,
            csvs: &csv_names,
            catalogs: &health,
            now,
        });
        if let Some(plan) = &refresh.adopted {
            tracing::info!(
                subscription = sub.name_any(),
                plan,
                "adopting the InstallPlan written for this subscription before a restart"
            );
        }
        if let Some(deprecations) = deprecations_of(context, sub, &refresh.status).await {
            rules::update_deprecations(sub, &mut refresh.status, &deprecations, now);
        }
        context.metrics.subscription_synced(
            namespace,
            crate::metrics::SubscriptionLabels {
                name: sub.name_any(),
                installed: refresh.status.installed_csv.clone().unwrap_or_default(),
                channel: sub.spec.channel.clone().unwrap_or_default(),
                package: sub.spec.package.clone(),
                approval: sub
                    .spec
                    .install_plan_approval
                    .as_ref()
                    .map(|a| a.to_string())
                    .unwrap_or_default(),
            },
        );
        changed |= context
            .write_status(sub.as_ref(), sub.status.as_ref(), &refresh.status)
            .await?;
    }
    if changed {
        // The next pass resolves from the written state.
        return Ok(Action::requeue(Duration::from_millis(200)));
    }
    // A plan stuck on a failed unpack is not waited on: resolving again
    // picks up a fixed catalog (the staging-registry incident).
    let all_pending = subscriptions.iter().all(|s| {
        s.status.as_ref().is_some_and(|st| {
            st.install_plan_ref.is_some()
                && st.state.as_ref() == Some(&SubscriptionState::UPGRADE_PENDING)
                && stuck_plan_of(s, &plans).is_none()
        })
    });
    if all_pending {
        return Ok(Action::await_change());
    }

    let started = std::time::Instant::now();
    let outcome = resolve_namespace(context, namespace, &subscriptions, &csvs, &catalogs).await?;
    context
        .metrics
        .resolution(started.elapsed(), outcome.is_ok());
    match outcome {
        Err(error) => {
            record_failure(context, namespace, &subscriptions, &error, now).await?;
            Ok(match error {
                ResolveError::NotSatisfiable { .. } => Action::await_change(),
                _ => Action::requeue(RESOLUTION_RETRY),
            })
        }
        Ok(resolution) => {
            install(context, namespace, &subscriptions, &plans, &resolution, now).await?;
            Ok(Action::await_change())
        }
    }
}

/// The plan `sub` references, when it is stuck on a failed unpack.
fn stuck_plan_of<'a>(sub: &Subscription, plans: &'a [Arc<InstallPlan>]) -> Option<&'a InstallPlan> {
    let name = sub
        .status
        .as_ref()?
        .install_plan_ref
        .as_ref()?
        .name
        .as_deref()?;
    plans
        .iter()
        .find(|p| p.name_any() == name)
        .map(AsRef::as_ref)
        .filter(|p| p.status.as_ref().is_some_and(rules::stuck_on_unpack))
}

async fn resolve_namespace(
    context: &Context,
    namespace: &str,
    subscriptions: &[Arc<Subscription>],
    csvs: &[Arc<ClusterServiceVersion>],
    catalogs: &[Arc<CatalogSource>],
) -> Result<Result<Resolution, ResolveError>, Error> {
    let groups = in_namespace(&context.caches.operator_groups, namespace);
    let [group] = groups.as_slice() else {
        return Ok(Err(ResolveError::Invalid {
            errors: vec![format!(
                "expected 1 OperatorGroup in the namespace, found {}",
                groups.len()
            )],
        }));
    };
    let exclude_global = group
        .annotations()
        .get(labels::EXCLUDE_GLOBAL_NAMESPACE_RESOLUTION)
        .is_some_and(|v| v == "true");
    let mut snapshots: Vec<Arc<CatalogSnapshot>> = Vec::new();
    for catalog in catalogs {
        let ns = catalog.metadata.namespace.clone().unwrap_or_default();
        if exclude_global && ns != namespace {
            continue;
        }
        let name = catalog.name_any();
        let priority = i32::try_from(catalog.spec.priority.unwrap_or(0)).unwrap_or(0);
        let client = healthy(catalog)
            .then(|| context.connections.client(&ns, &name))
            .flatten();
        let snapshot = match client {
            Some(client) => match context
                .snapshots
                .get(&ns, &name, priority, &client, || {
                    context.metrics.snapshot_taken(&ns, &name)
                })
                .await
            {
                Ok(snapshot) => snapshot,
                Err(error) => {
                    tracing::warn!(catalog = format!("{ns}/{name}"), error = %error, "cannot read catalog");
                    // Said on the catalog too, so `kubectl describe catsrc`
                    // names the cause (a hostile server's answer past a
                    // limit names that limit).
                    let regarding = ObjectReference {
                        api_version: Some("operators.coreos.com/v1alpha1".to_owned()),
                        kind: Some("CatalogSource".to_owned()),
                        namespace: Some(ns.clone()),
                        name: Some(name.clone()),
                        uid: catalog.metadata.uid.clone(),
                        ..ObjectReference::default()
                    };
                    let note = format!("cannot read the catalog, treated as unhealthy: {error}");
                    if let Err(error) = context
                        .recorder
                        .warning_note(&regarding, CATALOG_UNREADABLE, "Resolve", &note)
                        .await
                    {
                        tracing::debug!(error = %error, "event not recorded");
                    }
                    super::snapshots::Snapshots::unhealthy(&ns, &name, priority)
                }
            },
            None => super::snapshots::Snapshots::unhealthy(&ns, &name, priority),
        };
        snapshots.push(snapshot);
    }
    let state = NamespaceState {
        namespace: namespace.to_owned(),
        csvs: csvs
            .iter()
            .filter_map(|c| {
                let value = serde_json::to_value(c.as_ref()).unwrap_or_default();
                (!olm_resolver::objects::is_copied(&value)).then(|| installed_csv(c, &value))
            })
            .collect(),
        subscriptions: subscriptions
            .iter()
            .map(|s| {
                olm_resolver::objects::subscription(
                    &serde_json::to_value(s.as_ref()).unwrap_or_default(),
                )
            })
            .collect(),
    };
    let request = ResolveRequest {
        state: &state,
        catalogs: &snapshots,
        global_namespace: &context.config.global_catalog_namespace,
        exclude_global,
    };
    Ok(olm_resolver::resolve(&request))
}

/// The resolver's view of an installed CSV, read as `kubectl olm` reads it
/// (one home: [`olm_resolver::objects::installed_csv`]). An unreadable
/// properties annotation leaves the CSV without properties, and is logged.
fn installed_csv(csv: &ClusterServiceVersion, value: &serde_json::Value) -> InstalledCsv {
    olm_resolver::objects::installed_csv(value).unwrap_or_else(|error| {
        tracing::warn!(
            error,
            "unreadable CSV properties; resolving it without them"
        );
        InstalledCsv {
            name: csv.name_any(),
            version: csv.spec.version.clone().map(|v| v.to_string()),
            replaces: csv.spec.replaces.clone(),
            properties: Vec::new(),
        }
    })
}

async fn record_failure(
    context: &Context,
    namespace: &str,
    subscriptions: &[Arc<Subscription>],
    error: &ResolveError,
    now: Timestamp,
) -> Result<(), Error> {
    let message = error.to_string();
    let reason = SubscriptionConditionReason::from(error.reason());
    for sub in subscriptions {
        let status = rules::resolution_failed(sub, reason.clone(), &message, now);
        context
            .write_status(sub.as_ref(), sub.status.as_ref(), &status)
            .await?;
    }
    let regarding = ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("Namespace".to_owned()),
        name: Some(namespace.to_owned()),
        ..ObjectReference::default()
    };
    if let Err(error) = context
        .recorder
        .warning_note(&regarding, "ResolutionFailed", "Resolve", &message)
        .await
    {
        tracing::debug!(error = %error, "event not recorded");
    }
    Ok(())
}

/// The name of the InstallPlan of a resolution: `install-` and five
/// characters derived from the namespace, generation and CSVs, so that a
/// pass repeated after a crash finds the plan it already created instead of
/// writing a second one.
pub fn install_plan_name(namespace: &str, generation: i64, csvs: &[String]) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut hasher = Sha256::new();
    hasher.update(namespace.as_bytes());
    hasher.update(generation.to_be_bytes());
    for csv in csvs {
        hasher.update([0]);
        hasher.update(csv.as_bytes());
    }
    let digest = hasher.finalize();
    let suffix: String = digest
        .iter()
        .take(5)
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
        .collect();
    format!("install-{suffix}")
}

/// The resolved properties of a registry bundle, for the CSV's annotation.
fn properties_annotation(bundle: &olm_registry::api::Bundle) -> String {
    olm_plan::steps::properties_annotation(
        bundle
            .properties
            .iter()
            .map(|p| (p.r#type.as_str(), p.value.as_str())),
    )
}

async fn install(
    context: &Context,
    namespace: &str,
    subscriptions: &[Arc<Subscription>],
    plans: &[Arc<InstallPlan>],
    resolution: &Resolution,
    now: Timestamp,
) -> Result<(), Error> {
    // Subscriptions whose plan is stuck on a failed unpack move to the new
    // plan even when their CSV is unchanged (same CSV, fixed image).
    let stuck: Vec<(&str, &InstallPlan)> = subscriptions
        .iter()
        .filter_map(|s| Some((s.metadata.name.as_deref()?, stuck_plan_of(s, plans)?)))
        .collect();
    let decisions: Vec<_> = resolution
        .subscriptions
        .iter()
        .filter(|d| !d.unchanged || stuck.iter().any(|(name, _)| *name == d.name))
        .collect();
    if resolution.operators.is_empty() && decisions.is_empty() {
        clear_failures(context, subscriptions, now).await?;
        return Ok(());
    }
    let mut plan_steps: Vec<Step> = Vec::new();
    let mut lookups: Vec<BundleLookup> = Vec::new();
    let mut catalog_sources: Vec<String> = Vec::new();
    for op in &resolution.operators {
        let catalog = format!("{}/{}", op.catalog_namespace, op.catalog);
        if !catalog_sources.contains(&op.catalog) {
            catalog_sources.push(op.catalog.clone());
        }
        let client = context
            .connections
            .client(&op.catalog_namespace, &op.catalog)
            .ok_or_else(|| Error::NotConnected {
                catalog: catalog.clone(),
            })?;
        let call = super::catalog_call_span("GetBundle", &op.catalog_namespace, &op.catalog);
        call.record("olm.package", op.package.as_str());
        call.record("olm.csv", op.name.as_str());
        let bundle = client
            .get_bundle(&op.package, &op.channel, &op.name)
            .instrument(call)
            .await
            .map_err(|source| Error::Registry {
                catalog: catalog.clone(),
                source,
            })?;
        let source = BundleSource {
            catalog: op.catalog.clone(),
            catalog_namespace: op.catalog_namespace.clone(),
        };
        let content = BundleContent {
            csv_name: bundle.csv_name.clone(),
            csv_json: bundle.csv_json.clone(),
            objects: bundle.object.clone(),
        };
        if steps::needs_unpack(&content, &bundle.bundle_path) {
            // Only the image holds the content: the bundle-unpacker
            // fetches it, as upstream's unpack Job does.
            lookups.push(bundle_lookup(op, &bundle, &source));
        } else {
            let properties = properties_annotation(&bundle);
            match steps::steps_for_bundle(
                &content,
                &source,
                namespace,
                op.replaces.as_deref(),
                Some(&properties),
            ) {
                Ok(steps) => plan_steps.extend(steps),
                Err(error) => {
                    let error = ResolveError::Invalid {
                        errors: vec![error.to_string()],
                    };
                    record_failure(context, namespace, subscriptions, &error, now).await?;
                    return Ok(());
                }
            }
        }
        if op.subscription.is_none() {
            plan_steps.push(steps::dependency_subscription_step(op));
        }
    }
    steps::listing_order(&mut plan_steps);
    let resolved_csvs: Vec<String> = resolution
        .operators
        .iter()
        .map(|o| o.name.clone())
        .collect();
    let lookup_paths: Vec<String> = lookups.iter().map(|l| l.path.clone()).collect();
    if stuck
        .iter()
        .any(|(_, plan)| rules::same_as_stuck(plan, &resolved_csvs, &lookup_paths))
    {
        // The catalog still offers what failed: the unpack is retried with
        // backoff, and no second plan is written.
        return Ok(());
    }

    let subs: Vec<Subscription> = subscriptions.iter().map(|s| s.as_ref().clone()).collect();
    let existing: Vec<InstallPlan> = plans.iter().map(|p| p.as_ref().clone()).collect();
    let csv_names: Vec<String> = resolution
        .operators
        .iter()
        .map(|o| o.name.clone())
        .collect();
    // A plan created for this very resolution whose status was never
    // written (catalog-operator stopped in between) is filled in, not
    // written a second time under the next generation.
    let unfinished = rules::unfinished_plan(&subs, plans, &csv_names);
    let generation = unfinished
        .and_then(|p| p.spec.generation)
        .unwrap_or_else(|| rules::next_install_plan_generation(&subs, &existing));
    let approval = rules::namespace_approval(subscriptions.iter().map(AsRef::as_ref));
    // As upstream's ensureInstallPlan: nothing to install, no plan (an
    // empty plan would stay Installing forever).
    let plan = if plan_steps.is_empty() && lookups.is_empty() {
        None
    } else {
        let name = unfinished
            .and_then(|p| p.metadata.name.clone())
            .unwrap_or_else(|| install_plan_name(namespace, generation, &csv_names));
        let resolved = rules::resolved_subscriptions_annotation(
            decisions.iter().map(|d| (d.name.as_str(), d.csv.as_str())),
        );
        let plan = ensure_plan(
            context,
            namespace,
            subscriptions,
            PlanSpec {
                name: &name,
                generation,
                approval: &approval,
                csv_names: &csv_names,
                resolved: &resolved,
            },
        )
        .await?;
        let status = InstallPlanStatus {
            phase: if approval == Approval::MANUAL {
                InstallPlanPhase::REQUIRES_APPROVAL
            } else {
                InstallPlanPhase::INSTALLING
            },
            catalog_sources: catalog_sources.clone(),
            plan: plan_steps,
            bundle_lookups: lookups,
            ..InstallPlanStatus::default()
        };
        if plan.status.as_ref().is_none_or(plan_rules::unplanned) {
            context
                .write_status(&plan, plan.status.as_ref(), &status)
                .await?;
        }
        Some(plan)
    };

    for decision in decisions {
        let Some(sub) = subscriptions.iter().find(|s| s.name_any() == decision.name) else {
            continue;
        };
        let hand_off = match &plan {
            Some(plan) => rules::HandOff::Plan { plan, generation },
            // The catalog no longer offers what the stuck plan waits for
            // (reverted): let go of it, so it is collected.
            None if stuck.iter().any(|(name, _)| *name == decision.name) => rules::HandOff::LetGo,
            None => rules::HandOff::Nothing,
        };
        let status = rules::resolved(sub, &decision.csv, hand_off, now);
        context
            .write_status(sub.as_ref(), sub.status.as_ref(), &status)
            .await?;
    }
    Ok(())
}

fn bundle_lookup(
    op: &ResolvedOperator,
    bundle: &olm_registry::api::Bundle,
    source: &BundleSource,
) -> BundleLookup {
    let condition =
        |type_: BundleLookupConditionType, reason: &str, message: &str| BundleLookupCondition {
            type_,
            status: conditions::TRUE.to_owned(),
            reason: Some(reason.to_owned()),
            message: Some(message.to_owned()),
            ..BundleLookupCondition::default()
        };
    BundleLookup {
        path: bundle.bundle_path.clone(),
        identifier: op.name.clone(),
        replaces: op.replaces.clone().unwrap_or_default(),
        catalog_source_ref: Some(ObjectReference {
            name: Some(source.catalog.clone()),
            namespace: Some(source.catalog_namespace.clone()),
            ..ObjectReference::default()
        }),
        conditions: vec![
            condition(
                BundleLookupConditionType::NOT_PERSISTED,
                olm_api::install_plan::bundle_lookup_reason::BUNDLE_NOT_UNPACKED,
                "bundle contents have not yet been persisted to installplan status",
            ),
            condition(
                BundleLookupConditionType::PENDING,
                olm_api::install_plan::bundle_lookup_reason::JOB_NOT_STARTED,
                "unpack job not yet started",
            ),
        ],
        properties: Some(properties_annotation(bundle)),
    }
}

/// What a new InstallPlan is made of.
struct PlanSpec<'a> {
    name: &'a str,
    generation: i64,
    approval: &'a Approval,
    csv_names: &'a [String],
    /// The [`rules::RESOLVED_SUBSCRIPTIONS`] annotation.
    resolved: &'a str,
}

async fn ensure_plan(
    context: &Context,
    namespace: &str,
    subscriptions: &[Arc<Subscription>],
    spec: PlanSpec<'_>,
) -> Result<InstallPlan, Error> {
    let PlanSpec {
        name,
        generation,
        approval,
        csv_names,
        resolved,
    } = spec;
    let api: Api<InstallPlan> = Api::namespaced(context.client.clone(), namespace);
    if let Some(found) = api.get_opt(name).await.map_err(Error::kube(format!(
        "reading InstallPlan {namespace}/{name}"
    )))? {
        return Ok(found);
    }
    let owners: Vec<OwnerReference> = subscriptions
        .iter()
        .map(|s| OwnerReference {
            api_version: "operators.coreos.com/v1alpha1".to_owned(),
            kind: "Subscription".to_owned(),
            name: s.name_any(),
            uid: s.metadata.uid.clone().unwrap_or_default(),
            controller: Some(false),
            block_owner_deletion: Some(false),
        })
        .collect();
    let mut annotations = BTreeMap::from([(
        rules::RESOLVED_SUBSCRIPTIONS.to_owned(),
        resolved.to_owned(),
    )]);
    // The plan carries the install's trace to its reconciles, the
    // bundle-unpacker and the CSV.
    olm_trace::annotate(&tracing::Span::current(), &mut annotations);
    let plan: InstallPlan = serde_json::from_value(serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "InstallPlan",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": BTreeMap::from([(labels::MANAGED, labels::MANAGED_VALUE)]),
            "annotations": annotations,
            "ownerReferences": owners,
        },
        "spec": {
            "clusterServiceVersionNames": csv_names,
            "approval": approval.as_str(),
            "approved": *approval == Approval::AUTOMATIC,
            "generation": generation,
        }
    }))
    .map_err(|e| Error::Kube {
        action: format!("building InstallPlan {name}"),
        source: kube::Error::SerdeError(e),
    })?;
    match api.create(&PostParams::default(), &plan).await {
        Ok(created) => Ok(created),
        Err(kube::Error::Api(r)) if r.code == 409 => api.get(name).await.map_err(Error::kube(
            format!("reading InstallPlan {namespace}/{name}"),
        )),
        Err(error) => Err(Error::kube(format!(
            "creating InstallPlan {namespace}/{name}"
        ))(error)),
    }
}

async fn clear_failures(
    context: &Context,
    subscriptions: &[Arc<Subscription>],
    now: Timestamp,
) -> Result<(), Error> {
    for sub in subscriptions {
        context
            .write_status(
                sub.as_ref(),
                sub.status.as_ref(),
                &rules::resolution_succeeded(sub, now),
            )
            .await?;
    }
    Ok(())
}

async fn collect_garbage(
    context: &Context,
    namespace: &str,
    plans: &[Arc<InstallPlan>],
    subscriptions: &[Arc<Subscription>],
) -> Result<(), Error> {
    let all: Vec<InstallPlan> = plans.iter().map(|p| p.as_ref().clone()).collect();
    let referenced: Vec<String> = subscriptions
        .iter()
        .filter_map(|s| s.status.as_ref()?.install_plan_ref.as_ref()?.name.clone())
        .collect();
    let referenced: Vec<&str> = referenced.iter().map(String::as_str).collect();
    let api: Api<InstallPlan> = Api::namespaced(context.client.clone(), namespace);
    for name in plan_rules::garbage(&all, &referenced) {
        apply::delete_if_exists(&api, name).await?;
    }
    for plan in rules::superseded_stuck_plans(&all, &referenced) {
        let name = plan.name_any();
        tracing::info!(namespace, plan = %name, "deleting an InstallPlan superseded while stuck on a failed unpack");
        apply::delete_if_exists(&api, &name).await?;
        let lookups = plan
            .status
            .as_ref()
            .map(|s| s.bundle_lookups.as_slice())
            .unwrap_or_default();
        for lookup in lookups {
            let still_needed = all.iter().any(|other| {
                other.name_any() != name
                    && other
                        .status
                        .as_ref()
                        .is_some_and(|s| s.bundle_lookups.iter().any(|l| l.path == lookup.path))
            });
            if !still_needed {
                delete_failure_record(context, namespace, lookup).await?;
            }
        }
    }
    Ok(())
}

/// Deletes the unpack failure record (never content) of a lookup's bundle,
/// exactly the record read (uid and resourceVersion preconditions).
async fn delete_failure_record(
    context: &Context,
    namespace: &str,
    lookup: &BundleLookup,
) -> Result<(), Error> {
    let catalog_namespace = plan_rules::lookup_catalog_namespace(lookup, namespace);
    let name = olm_catalog::unpacked::config_map_name(&lookup.path);
    let api: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(context.client.clone(), catalog_namespace);
    let Some(record) = api.get_opt(&name).await.map_err(Error::kube(format!(
        "reading ConfigMap {catalog_namespace}/{name}"
    )))?
    else {
        return Ok(());
    };
    let is_failure = olm_catalog::unpacked::failure(record.annotations()).is_some()
        && record.binary_data.as_ref().is_none_or(|d| d.is_empty());
    if !is_failure {
        return Ok(());
    }
    let params = kube::api::DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: record.metadata.uid.clone(),
            resource_version: record.metadata.resource_version.clone(),
        }),
        ..kube::api::DeleteParams::default()
    };
    match api.delete(&name, &params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(r)) if r.code == 404 || r.code == 409 => Ok(()),
        Err(error) => Err(Error::kube(format!(
            "deleting ConfigMap {catalog_namespace}/{name}"
        ))(error)),
    }
}

/// What the Subscription's catalog says is deprecated about its package, its
/// channel and its installed bundle; `None` when that cannot be asked now
/// (nothing installed, or the catalog is not connected).
async fn deprecations_of(
    context: &Context,
    sub: &Subscription,
    status: &SubscriptionStatus,
) -> Option<rules::Deprecations> {
    let installed = status.installed_csv.as_deref().filter(|c| !c.is_empty())?;
    let client = context
        .connections
        .client(&sub.spec.source_namespace, &sub.spec.source)?;
    let package = client.get_package(&sub.spec.package).await.ok()?;
    let channel_name = sub
        .spec
        .channel
        .clone()
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| package.default_channel_name.clone());
    let channel = package.channels.iter().find(|c| c.name == channel_name);
    let bundle = client
        .get_bundle(&sub.spec.package, &channel_name, installed)
        .await
        .ok();
    let message = |d: Option<&olm_registry::api::Deprecation>| {
        d.map(|d| d.message.clone()).filter(|m| !m.is_empty())
    };
    Some(rules::Deprecations {
        package: message(package.deprecation.as_ref()),
        channel: message(channel.and_then(|c| c.deprecation.as_ref())),
        bundle: message(bundle.as_ref().and_then(|b| b.deprecation.as_ref())),
    })
}
