//! The InstallPlan reconciler: moves approved plans to Installing and
//! carries out their steps (CRDs first, then CSVs, then the rest), recording
//! each step's status, until the plan is Complete or Failed. Upstream:
//! `syncInstallPlans` and `ExecutePlan`.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use jiff::Timestamp;
use k8s_openapi::{
    api::core::v1::ObjectReference,
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    apimachinery::pkg::apis::meta::v1::OwnerReference,
};
use kube::{
    Api, ResourceExt,
    api::{ApiResource, DynamicObject, GroupVersionKind, PostParams},
    discovery::{self, Scope},
    runtime::controller::Action,
};
use olm_api::{
    csv::ClusterServiceVersion,
    install_plan::{InstallPlan, InstallPlanStatus, Step, StepStatus},
    labels,
};
use olm_runtime::apply;

use super::{Context, FIELD_MANAGER};
use crate::decide::install_plan::{self as decide, Execution, PlanAction};

/// Why an InstallPlan reconcile failed; it is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Writing the plan's status failed.
    #[error(transparent)]
    Apply(#[from] olm_runtime::Error),
}

fn key(plan: &InstallPlan) -> String {
    format!(
        "{}/{}",
        plan.metadata.namespace.as_deref().unwrap_or_default(),
        plan.name_any()
    )
}

/// Retries a failed reconcile with capped exponential backoff.
pub(crate) fn error_policy(plan: Arc<InstallPlan>, error: &Error, context: Arc<Context>) -> Action {
    tracing::warn!(plan = key(&plan), error = %error, "reconcile failed");
    Action::requeue(context.backoff(key(&plan)))
}

/// Reconciles one InstallPlan.
pub(crate) async fn reconcile(
    plan: Arc<InstallPlan>,
    context: Arc<Context>,
) -> Result<Action, Error> {
    let action = sync(&plan, &context).await?;
    context.succeeded(&key(&plan));
    Ok(action)
}

async fn sync(plan: &InstallPlan, context: &Context) -> Result<Action, Error> {
    let namespace = plan.metadata.namespace.clone().unwrap_or_default();
    let name = plan.name_any();
    let Some(original) = plan.status.clone() else {
        return Ok(Action::await_change());
    };
    if decide::terminal(&original) {
        return Ok(Action::await_change());
    }
    let now = Timestamp::now();
    let mut status = original.clone();
    let (action, _) = decide::before_execution(plan, &mut status, now);
    if action == PlanAction::Nothing {
        write_status(context, &namespace, &name, &original, &status).await?;
        return Ok(Action::await_change());
    }
    let execution = execute(context, &namespace, &mut status.plan).await;
    decide::after_execution(
        &mut status,
        &execution,
        context.config.install_plan_retry_timeout,
        now,
    );
    write_status(context, &namespace, &name, &original, &status).await?;
    if decide::terminal(&status) {
        Ok(Action::await_change())
    } else {
        let recheck =
            Duration::try_from(decide::INSTALLING_RECHECK).unwrap_or(Duration::from_secs(5));
        Ok(Action::requeue(recheck))
    }
}

async fn write_status(
    context: &Context,
    namespace: &str,
    name: &str,
    original: &InstallPlanStatus,
    status: &InstallPlanStatus,
) -> Result<(), Error> {
    if original == status {
        return Ok(());
    }
    let api: Api<InstallPlan> = Api::namespaced(context.client.clone(), namespace);
    apply::apply_status(&api, &FIELD_MANAGER, name, status).await?;
    Ok(())
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
async fn execute(context: &Context, namespace: &str, steps: &mut [Step]) -> Execution {
    // A plan with a kind we do not install is invalid as a whole: nothing
    // of it is applied.
    let mut invalid = false;
    for step in steps.iter_mut() {
        if !decide::supported_kind(&step.resource.kind) {
            step.status = StepStatus::UNSUPPORTED_RESOURCE;
            invalid = true;
        }
    }
    if invalid {
        return Execution::Failed {
            message: decide::INVALID_PLAN_MESSAGE.to_owned(),
            forbidden: false,
            permanent: true,
        };
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
        match apply_step(context, namespace, step).await {
            Ok(status) => {
                waiting |= status == StepStatus::WAITING_FOR_API;
                step.status = status;
            }
            Err(error) => {
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
    namespace: &str,
    step: &Step,
) -> Result<StepStatus, StepError> {
    let mut object = manifest(step)?;
    add_label(&mut object, labels::MANAGED, labels::MANAGED_VALUE);
    match step.resource.kind.as_str() {
        "CustomResourceDefinition" => apply_crd(context, namespace, step, object).await,
        "ClusterServiceVersion" => {
            let api: Api<DynamicObject> = Api::namespaced_with(
                context.client.clone(),
                namespace,
                &ApiResource::erase::<ClusterServiceVersion>(&()),
            );
            object.metadata.namespace = Some(namespace.to_owned());
            create_or_present(&api, &object, false).await
        }
        "Subscription" => {
            let api: Api<DynamicObject> = Api::namespaced_with(
                context.client.clone(),
                namespace,
                &ApiResource::erase::<olm_api::subscription::Subscription>(&()),
            );
            object.metadata.namespace = Some(namespace.to_owned());
            create_or_present(&api, &object, false).await
        }
        _ => apply_other(context, namespace, step, object).await,
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
                api.replace(&name, &PostParams::default(), &replacement)
                    .await
                    .map_err(|e| StepError::kube(&format!("updating {name}"), &e))?;
            }
            Ok(StepStatus::PRESENT)
        }
        Err(error) => Err(StepError::kube(&format!("creating {name}"), &error)),
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
            let stored_versions = existing
                .status
                .as_ref()
                .and_then(|s| s.stored_versions.clone())
                .unwrap_or_default();
            let new_versions: Vec<String> = desired
                .spec
                .versions
                .iter()
                .map(|v| v.name.clone())
                .collect();
            decide::check_stored_versions(&name, &stored_versions, &new_versions).map_err(
                |message| StepError {
                    message,
                    forbidden: false,
                    permanent: false,
                },
            )?;
            if crd_unchanged(&existing, &desired) {
                existing
            } else {
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

fn crd_unchanged(existing: &CustomResourceDefinition, desired: &CustomResourceDefinition) -> bool {
    let annotations_present = desired.metadata.annotations.iter().flatten().all(|(k, v)| {
        existing
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(k))
            == Some(v)
    });
    let spec_same =
        serde_json::to_value(&existing.spec).ok() == serde_json::to_value(&desired.spec).ok();
    annotations_present && spec_same
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
        if let Some(csv) = &csv {
            object
                .metadata
                .owner_references
                .get_or_insert_with(Vec::new)
                .push(owner_reference(csv));
        }
        Api::namespaced_with(context.client.clone(), namespace, &resource)
    } else {
        add_label(&mut object, labels::OWNER, &step.resolving);
        add_label(&mut object, labels::OWNER_NAMESPACE, namespace);
        add_label(&mut object, labels::OWNER_KIND, "ClusterServiceVersion");
        Api::all_with(context.client.clone(), &resource)
    };
    object.types = Some(kube::api::TypeMeta {
        api_version: resource.api_version.clone(),
        kind: resource.kind.clone(),
    });
    create_or_present(&api, &object, true).await
}

fn owner_reference(csv: &ClusterServiceVersion) -> OwnerReference {
    OwnerReference {
        api_version: "operators.coreos.com/v1alpha1".to_owned(),
        kind: "ClusterServiceVersion".to_owned(),
        name: csv.name_any(),
        uid: csv.metadata.uid.clone().unwrap_or_default(),
        controller: Some(false),
        block_owner_deletion: Some(false),
    }
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

/// A reference to an InstallPlan, as Subscriptions record it.
pub fn reference(plan: &InstallPlan) -> ObjectReference {
    ObjectReference {
        api_version: Some("operators.coreos.com/v1alpha1".to_owned()),
        kind: Some("InstallPlan".to_owned()),
        name: plan.metadata.name.clone(),
        namespace: plan.metadata.namespace.clone(),
        uid: plan.metadata.uid.clone(),
        resource_version: plan.metadata.resource_version.clone(),
        ..ObjectReference::default()
    }
}
