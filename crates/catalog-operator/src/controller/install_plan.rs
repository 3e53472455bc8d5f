//! The InstallPlan reconciler: moves approved plans to Installing and
//! carries out their steps (CRDs first, then CSVs, then the rest), recording
//! each step's status, until the plan is Complete or Failed. Upstream:
//! `syncInstallPlans` and `ExecutePlan`.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use jiff::Timestamp;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api, ResourceExt,
    api::{ApiResource, DynamicObject, GroupVersionKind, PostParams},
    discovery::{self, Scope},
    runtime::controller::Action,
};
use olm_api::{
    csv::ClusterServiceVersion,
    install_plan::{InstallPlan, Step, StepStatus},
    labels, ownership,
};
use olm_runtime::impersonation::install_client;

use tracing::Instrument as _;

use super::Context;
use crate::Error;
use crate::decide::install_plan::{self as decide, Execution, PlanAction};

/// The span of one InstallPlan reconcile: while the plan is being carried
/// out its reconciles belong to the install's trace; a resync of a finished
/// plan is linked to it.
pub(crate) fn span(plan: &InstallPlan) -> tracing::Span {
    let span = tracing::info_span!(
        parent: None,
        "reconcile_installplan",
        k8s.namespace.name = plan.metadata.namespace.as_deref().unwrap_or_default(),
        olm.installplan = %plan.name_any(),
        trace_id = tracing::field::Empty,
    );
    let in_flight = plan.status.as_ref().is_none_or(|s| !decide::terminal(s));
    olm_trace::follow(
        &span,
        Some(plan.annotations()),
        olm_trace::Handoff::while_in_flight(in_flight),
    );
    span
}

/// Reconciles one InstallPlan.
pub(crate) async fn reconcile(
    plan: Arc<InstallPlan>,
    context: Arc<Context>,
) -> Result<Action, Error> {
    sync(&plan, &context).await
}

async fn sync(plan: &InstallPlan, context: &Context) -> Result<Action, Error> {
    let namespace = plan.metadata.namespace.clone().unwrap_or_default();
    let name = plan.name_any();
    let Some(original) = plan.status.clone() else {
        return Ok(Action::await_change());
    };
    if decide::terminal(&original) || decide::unplanned(&original) {
        return Ok(Action::await_change());
    }
    let now = Timestamp::now();
    let mut status = original.clone();
    // The identity comes first, as upstream's querier does: a plan whose
    // namespace has no single managing OperatorGroup says so even while it
    // awaits approval, and nothing of it is ever applied with OLM's own
    // identity instead.
    let groups = context.caches.operator_groups.state();
    let identity = install_client(
        &context.plan_client,
        &namespace,
        groups.iter().map(AsRef::as_ref),
    );
    let client = match identity {
        Ok((client, service_account)) => {
            decide::identity_available(&mut status, service_account, now);
            client
        }
        Err(refused) => {
            tracing::info!(plan = %format!("{namespace}/{name}"), reason = %refused, "install identity unavailable");
            decide::identity_unavailable(&mut status, &refused.0, now);
            context.write_status(plan, Some(&original), &status).await?;
            return Ok(Action::requeue(
                Duration::try_from(decide::IDENTITY_RECHECK).unwrap_or(Duration::from_secs(5)),
            ));
        }
    };
    let (action, _) = decide::before_execution(plan, &mut status, now);
    if action == PlanAction::Nothing {
        context.write_status(plan, Some(&original), &status).await?;
        return Ok(Action::await_change());
    }
    let mut unpacked = Vec::with_capacity(status.bundle_lookups.len());
    for lookup in &status.bundle_lookups {
        let catalog_namespace = decide::lookup_catalog_namespace(lookup, &namespace);
        let found = read_unpacked(context, catalog_namespace, &lookup.path).await;
        if let decide::Unpacked::Unreadable(error) = &found {
            tracing::warn!(
                plan = format!("{namespace}/{name}"),
                path = lookup.path,
                error,
                "cannot read unpacked bundle"
            );
        }
        unpacked.push(found);
    }
    for lookup in decide::persist_lookups(&mut status, &namespace, unpacked, now) {
        request_unpack(context, &namespace, &name, &lookup, now).await;
    }
    let lookups_pending = decide::lookups_pending(&status);
    let mut execution = execute(context, &client, &namespace, &name, &mut status.plan).await;
    let only_content_missing = lookups_pending && execution == Execution::Done;
    if only_content_missing {
        // Bundle content still to be unpacked: more steps will come.
        execution = Execution::Waiting;
    }
    decide::after_execution(
        &mut status,
        &execution,
        context.config.install_plan_retry_timeout,
        now,
    );
    context.write_status(plan, Some(&original), &status).await?;
    if decide::terminal(&status) {
        Ok(Action::await_change())
    } else {
        let recheck = if only_content_missing {
            decide::LOOKUP_RECHECK
        } else {
            decide::INSTALLING_RECHECK
        };
        Ok(Action::requeue(
            Duration::try_from(recheck).unwrap_or(Duration::from_secs(5)),
        ))
    }
}

/// A step that could not be carried out.
struct StepError {
    message: String,
    forbidden: bool,
    permanent: bool,
}

impl StepError {
    fn permanent(message: String) -> Self {
        Self {
            message,
            forbidden: false,
            permanent: true,
        }
    }

    fn kube(what: &str, error: &kube::Error) -> Self {
        let forbidden = matches!(error, kube::Error::Api(r) if r.code == 403);
        Self {
            message: format!("{what}: {error}"),
            forbidden,
            permanent: false,
        }
    }
}

/// Carries out every pending step in apply order, stopping at the first
/// failure. Each step's status is updated in place.
async fn execute(
    context: &Context,
    client: &kube::Client,
    namespace: &str,
    plan_name: &str,
    steps: &mut [Step],
) -> Execution {
    if let Some(invalid) = decide::reject_unsupported(steps) {
        return invalid;
    }
    let mut waiting = false;
    for index in decide::apply_order(steps) {
        let step = &mut steps[index];
        // CRDs waiting for their API are looked at again until Established.
        let crd_waiting = step.resource.kind == "CustomResourceDefinition"
            && step.status == StepStatus::WAITING_FOR_API;
        if !(decide::step_pending(step) || crd_waiting) {
            continue;
        }
        let span = tracing::info_span!(
            "apply_step",
            olm.step.kind = %step.resource.kind,
            olm.step.name = %step.resource.name,
            olm.csv = %step.resolving,
        );
        match apply_step(context, client, namespace, plan_name, step)
            .instrument(span.clone())
            .await
        {
            Ok(status) => {
                waiting |= status == StepStatus::WAITING_FOR_API;
                step.status = status;
            }
            Err(error) => {
                olm_trace::record_error(&span, &error.message);
                return Execution::Failed {
                    message: error.message,
                    forbidden: error.forbidden,
                    permanent: error.permanent,
                };
            }
        }
    }
    if waiting {
        Execution::Waiting
    } else {
        Execution::Done
    }
}

fn manifest(step: &Step) -> Result<DynamicObject, StepError> {
    let text = step.resource.manifest.as_deref().ok_or_else(|| {
        StepError::permanent(format!(
            "step {} {} has no manifest",
            step.resource.kind, step.resource.name
        ))
    })?;
    serde_json::from_str(text).map_err(|error| {
        StepError::permanent(format!(
            "the manifest of step {} {} is not a Kubernetes object: {error}",
            step.resource.kind, step.resource.name
        ))
    })
}

fn gvk_of(step: &Step) -> GroupVersionKind {
    // BundleSecret steps carry Secrets.
    let kind = if step.resource.kind == "BundleSecret" {
        "Secret"
    } else {
        step.resource.kind.as_str()
    };
    GroupVersionKind::gvk(&step.resource.group, &step.resource.version, kind)
}

fn gvk_text(gvk: &GroupVersionKind) -> String {
    if gvk.group.is_empty() {
        format!("{}, Kind={}", gvk.version, gvk.kind)
    } else {
        format!("{}/{}, Kind={}", gvk.group, gvk.version, gvk.kind)
    }
}

fn add_label(object: &mut DynamicObject, key: &str, value: &str) {
    object
        .metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(key.to_owned(), value.to_owned());
}

async fn apply_step(
    context: &Context,
    client: &kube::Client,
    namespace: &str,
    plan_name: &str,
    step: &Step,
) -> Result<StepStatus, StepError> {
    let mut object = manifest(step)?;
    add_label(&mut object, labels::MANAGED, labels::MANAGED_VALUE);
    match step.resource.kind.as_str() {
        "CustomResourceDefinition" => apply_crd(context, namespace, step, object).await,
        "ClusterServiceVersion" => {
            let api: Api<DynamicObject> = Api::namespaced_with(
                client.clone(),
                namespace,
                &ApiResource::erase::<ClusterServiceVersion>(&()),
            );
            object.metadata.namespace = Some(namespace.to_owned());
            // The CSV carries the install's trace on to olm-operator.
            olm_trace::annotate(
                &tracing::Span::current(),
                object
                    .metadata
                    .annotations
                    .get_or_insert_with(BTreeMap::new),
            );
            create_or_present(&api, &object, false).await
        }
        "Subscription" => {
            // The Subscription adopts this plan (upstream's olm.generated-by).
            object
                .metadata
                .annotations
                .get_or_insert_with(BTreeMap::new)
                .insert(labels::GENERATED_BY.to_owned(), plan_name.to_owned());
            let api: Api<DynamicObject> = Api::namespaced_with(
                client.clone(),
                namespace,
                &ApiResource::erase::<olm_api::subscription::Subscription>(&()),
            );
            object.metadata.namespace = Some(namespace.to_owned());
            create_or_present(&api, &object, false).await
        }
        _ => apply_other(context, client, namespace, step, object).await,
    }
}

/// Creates `object`; when it exists, updates it (`update`) or leaves it.
async fn create_or_present(
    api: &Api<DynamicObject>,
    object: &DynamicObject,
    update: bool,
) -> Result<StepStatus, StepError> {
    let name = object.name_any();
    match api.create(&PostParams::default(), object).await {
        Ok(_) => Ok(StepStatus::CREATED),
        Err(kube::Error::Api(r)) if r.code == 409 => {
            if update {
                let existing = api
                    .get(&name)
                    .await
                    .map_err(|e| StepError::kube(&format!("reading {name}"), &e))?;
                let mut replacement = object.clone();
                replacement.metadata.resource_version = existing.metadata.resource_version.clone();
                merge_owner_references(&mut replacement, &existing);
                keep_service_account_fields(&mut replacement, &existing);
                api.replace(&name, &PostParams::default(), &replacement)
                    .await
                    .map_err(|e| StepError::kube(&format!("updating {name}"), &e))?;
            }
            Ok(StepStatus::PRESENT)
        }
        Err(error) => Err(StepError::kube(&format!("creating {name}"), &error)),
    }
}

/// A ServiceAccount replaced by a step keeps what others gave it: its token
/// and pull secrets (written by the token controller, OpenShift's registry
/// controller, or a user) and the annotations the step does not set, as
/// upstream's `EnsureServiceAccount` keeps them.
fn keep_service_account_fields(object: &mut DynamicObject, existing: &DynamicObject) {
    if object
        .types
        .as_ref()
        .is_none_or(|t| t.kind != "ServiceAccount")
    {
        return;
    }
    for field in ["secrets", "imagePullSecrets"] {
        if let (Some(kept), serde_json::Value::Object(data)) =
            (existing.data.get(field), &mut object.data)
        {
            data.entry(field.to_owned()).or_insert_with(|| kept.clone());
        }
    }
    if let Some(kept) = &existing.metadata.annotations {
        let annotations = object
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new);
        for (key, value) in kept {
            annotations
                .entry(key.clone())
                .or_insert_with(|| value.clone());
        }
    }
}

fn merge_owner_references(object: &mut DynamicObject, existing: &DynamicObject) {
    let Some(existing_refs) = existing.metadata.owner_references.as_ref() else {
        return;
    };
    let refs = object
        .metadata
        .owner_references
        .get_or_insert_with(Vec::new);
    for r in existing_refs {
        if !refs.iter().any(|o| o.uid == r.uid) {
            refs.push(r.clone());
        }
    }
}

async fn apply_crd(
    context: &Context,
    namespace: &str,
    step: &Step,
    mut object: DynamicObject,
) -> Result<StepStatus, StepError> {
    let (key, value) = decide::installed_alongside(namespace, &step.resolving);
    object
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(key, value);
    let name = object.name_any();
    let api: Api<CustomResourceDefinition> = Api::all(context.client.clone());
    let desired: CustomResourceDefinition = serde_json::to_value(&object)
        .and_then(serde_json::from_value)
        .map_err(|error| {
            StepError::permanent(format!(
                "CRD {name} is not a v1 CustomResourceDefinition: {error}"
            ))
        })?;
    let stored = match api.get_opt(&name).await {
        Ok(stored) => stored,
        Err(error) => return Err(StepError::kube(&format!("reading CRD {name}"), &error)),
    };
    let result = match stored {
        None => match api.create(&PostParams::default(), &desired).await {
            Ok(created) => created,
            Err(kube::Error::Api(r)) if r.code == 409 => {
                return Ok(StepStatus::WAITING_FOR_API);
            }
            Err(error) => return Err(StepError::kube(&format!("creating CRD {name}"), &error)),
        },
        Some(existing) => {
            olm_plan::crd::check_stored_versions_of(&existing, &desired).map_err(|message| {
                StepError {
                    message,
                    forbidden: false,
                    permanent: false,
                }
            })?;
            if olm_plan::crd::unchanged(&existing, &desired) {
                existing
            } else {
                check_existing_resources(context, &existing, &desired).await?;
                let mut replacement = desired.clone();
                replacement.metadata.resource_version = existing.metadata.resource_version.clone();
                // Keep every alongside annotation of earlier installs.
                let mut annotations = existing.metadata.annotations.clone().unwrap_or_default();
                annotations.extend(replacement.metadata.annotations.clone().unwrap_or_default());
                replacement.metadata.annotations = Some(annotations);
                api.replace(&name, &PostParams::default(), &replacement)
                    .await
                    .map_err(|e| StepError::kube(&format!("updating CRD {name}"), &e))?
            }
        }
    };
    Ok(if crd_established(&result) {
        if step.status == StepStatus::WAITING_FOR_API || step.status == StepStatus::UNKNOWN {
            StepStatus::CREATED
        } else {
            StepStatus::PRESENT
        }
    } else {
        StepStatus::WAITING_FOR_API
    })
}

fn crd_established(crd: &CustomResourceDefinition) -> bool {
    let conditions = crd.status.as_ref().and_then(|s| s.conditions.as_ref());
    let is_true = |type_: &str| {
        conditions.is_some_and(|c| c.iter().any(|c| c.type_ == type_ && c.status == "True"))
    };
    is_true("Established") && is_true("NamesAccepted")
}

async fn apply_other(
    context: &Context,
    client: &kube::Client,
    namespace: &str,
    step: &Step,
    mut object: DynamicObject,
) -> Result<StepStatus, StepError> {
    let gvk = gvk_of(step);
    let (resource, capabilities) = match discovery::pinned_kind(&context.client, &gvk).await {
        Ok(found) => found,
        Err(kube::Error::Api(r)) if r.code == 404 => {
            return Err(StepError {
                message: decide::api_not_found_message(
                    &step.resource.kind,
                    &step.resource.name,
                    &gvk_text(&gvk),
                ),
                forbidden: false,
                permanent: false,
            });
        }
        Err(kube::Error::Discovery(_)) => {
            return Err(StepError {
                message: decide::api_not_found_message(
                    &step.resource.kind,
                    &step.resource.name,
                    &gvk_text(&gvk),
                ),
                forbidden: false,
                permanent: false,
            });
        }
        Err(error) => return Err(StepError::kube("discovering the step's API", &error)),
    };
    let csv = resolving_csv(context, namespace, &step.resolving).await?;
    let api: Api<DynamicObject> = if capabilities.scope == Scope::Namespaced {
        object.metadata.namespace = Some(namespace.to_owned());
        // References to CSVs planned before the CSV existed (the RBAC steps
        // carry them) get the CSV's uid, as upstream's do; one that cannot
        // be given a uid is left out rather than refused by the API server.
        let references = object
            .metadata
            .owner_references
            .get_or_insert_with(Vec::new);
        references.retain(|r| !(ownership::is_csv_reference(r) && r.uid.is_empty()));
        if let Some(csv) = &csv {
            let owner = ownership::non_blocking_owner(csv);
            if !references.iter().any(|r| r.uid == owner.uid) {
                references.push(owner);
            }
        }
        if references.is_empty() {
            object.metadata.owner_references = None;
        }
        Api::namespaced_with(client.clone(), namespace, &resource)
    } else {
        add_label(&mut object, labels::OWNER, &step.resolving);
        add_label(&mut object, labels::OWNER_NAMESPACE, namespace);
        add_label(&mut object, labels::OWNER_KIND, "ClusterServiceVersion");
        Api::all_with(client.clone(), &resource)
    };
    object.types = Some(kube::api::TypeMeta {
        api_version: resource.api_version.clone(),
        kind: resource.kind.clone(),
    });
    create_or_present(&api, &object, true).await
}

/// The CSV a step is resolved for, if it exists yet (it is created before
/// the objects it owns).
async fn resolving_csv(
    context: &Context,
    namespace: &str,
    name: &str,
) -> Result<Option<ClusterServiceVersion>, StepError> {
    if name.is_empty() {
        return Ok(None);
    }
    let api: Api<ClusterServiceVersion> = Api::namespaced(context.client.clone(), namespace);
    api.get_opt(name)
        .await
        .map_err(|e| StepError::kube(&format!("reading CSV {namespace}/{name}"), &e))
}

/// What the unpacked-bundle ConfigMap of the bundle `path` says, read
/// from the cluster and judged by [`decide::unpacked`].
async fn read_unpacked(context: &Context, namespace: &str, path: &str) -> decide::Unpacked {
    let name = olm_catalog::unpacked::config_map_name(path);
    // The watch on unpacked bundles wakes this plan when the ConfigMap
    // appears; until the cache has it there is nothing to read.
    let cached = kube::runtime::reflector::ObjectRef::new(&name).within(namespace);
    if context.caches.unpacked.get(&cached).is_none() {
        return decide::Unpacked::Pending;
    }
    let api: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(context.client.clone(), namespace);
    match api.get_opt(&name).await {
        Ok(found) => decide::unpacked(path, found.as_ref()),
        Err(error) => decide::Unpacked::Unreadable(error.to_string()),
    }
}

/// When an unpack requested now for a plan in `namespace` is due: the
/// OperatorGroup's `operatorframework.io/bundle-unpack-timeout`, read as
/// bundle-unpacker reads it, else upstream's 10 minutes; `None` when the
/// group sets `0` (no deadline).
fn unpack_deadline(context: &Context, namespace: &str, now: Timestamp) -> Option<Timestamp> {
    let groups: Vec<_> = context
        .caches
        .operator_groups
        .state()
        .into_iter()
        .filter(|g| g.metadata.namespace.as_deref() == Some(namespace))
        .collect();
    let policy = olm_api::unpack_policy::unpack_policy(
        groups.iter().map(|g| {
            (
                g.metadata.name.as_deref().unwrap_or_default(),
                g.metadata
                    .annotations
                    .as_ref()
                    .unwrap_or(&EMPTY_ANNOTATIONS),
            )
        }),
        Some(olm_api::unpack_policy::DEFAULT_UNPACK_TIMEOUT),
    );
    let timeout = jiff::SignedDuration::try_from(policy.timeout?).ok()?;
    now.checked_add(timeout).ok()
}

static EMPTY_ANNOTATIONS: BTreeMap<String, String> = BTreeMap::new();

/// Asks the bundle-unpackers (over the bus work queue) to unpack a bundle;
/// they also watch InstallPlans, so a lost request only delays the work.
async fn request_unpack(
    context: &Context,
    namespace: &str,
    plan_name: &str,
    lookup: &olm_api::install_plan::BundleLookup,
    now: Timestamp,
) {
    let reference = |api_version: &str, kind: &str, namespace: String, name: String| {
        olm_bus::events::ObjectRef {
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
            namespace,
            name,
            uid: String::new(),
            resource_version: String::new(),
        }
    };
    let timestamp = |t: Timestamp| prost_types::Timestamp {
        seconds: t.as_second(),
        nanos: t.subsec_nanosecond(),
    };
    let catalog = lookup.catalog_source_ref.as_ref();
    let request = olm_bus::events::BundleUnpackRequest {
        bundle_path: lookup.path.clone(),
        bundle_name: lookup.identifier.clone(),
        catalog: Some(reference(
            "operators.coreos.com/v1alpha1",
            "CatalogSource",
            catalog
                .and_then(|c| c.namespace.clone())
                .unwrap_or_default(),
            catalog.and_then(|c| c.name.clone()).unwrap_or_default(),
        )),
        install_plan: Some(reference(
            "operators.coreos.com/v1alpha1",
            "InstallPlan",
            namespace.to_owned(),
            plan_name.to_owned(),
        )),
        deadline: unpack_deadline(context, namespace, now).map(timestamp),
        occurred_at: Some(timestamp(now)),
    };
    if let Err(error) = context.bus.publish(&request).await {
        tracing::debug!(error = %error, "unpack request not published");
    }
}

/// Upstream's second safety check before a CRD update: every existing custom
/// resource of a version served before and after must validate against the
/// new schema of that version. With a conversion webhook the API server
/// converts, so a failure is only logged, as upstream only warns.
async fn check_existing_resources(
    context: &Context,
    existing: &CustomResourceDefinition,
    desired: &CustomResourceDefinition,
) -> Result<(), StepError> {
    let name = existing.metadata.name.clone().unwrap_or_default();
    let webhook = olm_plan::crd::converts_by_webhook(desired);
    for check in olm_plan::crd::versions_to_check(existing, desired) {
        let resource = ApiResource {
            group: existing.spec.group.clone(),
            version: check.version.clone(),
            api_version: format!("{}/{}", existing.spec.group, check.version),
            kind: existing.spec.names.kind.clone(),
            plural: existing.spec.names.plural.clone(),
        };
        let api: Api<DynamicObject> = Api::all_with(context.client.clone(), &resource);
        let mut params = kube::api::ListParams::default().limit(olm_plan::crd::CR_PAGE_SIZE);
        loop {
            let page = api
                .list(&params)
                .await
                .map_err(|e| StepError::kube(&format!("listing {} {}", name, check.version), &e))?;
            let objects = page
                .items
                .iter()
                .map(serde_json::to_value)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| StepError::permanent(e.to_string()))?;
            if let Some(message) = olm_plan::crd::first_invalid(&name, &check, &objects) {
                if webhook {
                    tracing::warn!(crd = name, "{message}");
                } else {
                    return Err(StepError {
                        message,
                        forbidden: false,
                        permanent: false,
                    });
                }
            }
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => break,
            }
        }
    }
    Ok(())
}

// The client steps are applied with comes from the one identity rule both
// operators share ([`olm_api::install_identity`]): OLM's own when the
// namespace's single OperatorGroup names no ServiceAccount, one
// impersonating the account recorded in the group's status when it does
// (CRDs always use OLM's own client, as upstream). No managing group, or
// several, refuses the plan: nothing is applied.

/// A client for carrying out plans: every response that carries a
/// `Warning` header (a deprecated API or field, an ignored value) counts in
/// `installplan_warnings_total`, as upstream counts the objects it applied
/// with warnings.
pub(crate) fn counting_warnings(
    config: kube::Config,
    metrics: crate::metrics::CatalogMetrics,
) -> Result<kube::Client, kube::Error> {
    let layer = tower::util::MapResponseLayer::new(
        move |response: http::Response<Box<kube::client::DynBody>>| {
            if response.headers().contains_key(http::header::WARNING) {
                metrics.install_plan_warning();
            }
            response
        },
    );
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&layer)
        .build())
}
