//! InstallPlan rules: the phase machine, garbage collection, which kinds a
//! step may carry, the order steps are applied in, and the safety checks
//! before a CRD is updated. Upstream:
//! `pkg/controller/operators/catalog/operator.go` (`syncInstallPlans`,
//! `ExecutePlan`, `gcInstallPlans`), `pkg/controller/install/...` and
//! `pkg/controller/operators/catalog/step.go`.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::{
    api::core::v1::{ConfigMap, ObjectReference},
    apimachinery::pkg::apis::meta::v1::Time,
};
use olm_api::{
    conditions::{self, FALSE, TRUE},
    install_plan::{
        BundleLookup, BundleLookupCondition, BundleLookupConditionType, InstallPlan,
        InstallPlanCondition, InstallPlanConditionReason, InstallPlanConditionType,
        InstallPlanPhase, InstallPlanStatus, Step, StepStatus,
    },
};

/// How long after `startTime` a failing InstallPlan keeps retrying
/// (upstream's `--install-plan-retry-timeout` default).
pub const DEFAULT_RETRY_TIMEOUT: SignedDuration = SignedDuration::from_mins(1);
/// How often an Installing InstallPlan is looked at again.
pub const INSTALLING_RECHECK: SignedDuration = SignedDuration::from_secs(5);
/// How often an InstallPlan waiting only for bundle content is looked at
/// again. The content's arrival wakes it through the watch on unpacked
/// bundles (see [`waits_for_bundle`]); this is the safety net, and each look
/// re-sends the unpack request in case the bus lost it.
pub const LOOKUP_RECHECK: SignedDuration = SignedDuration::from_secs(30);
/// InstallPlans kept per namespace.
pub const MAX_INSTALL_PLANS_PER_NAMESPACE: usize = 5;
/// InstallPlans deleted per namespace in one sweep.
pub const MAX_DELETES_PER_SWEEP: usize = 5;

/// The outcome of one attempt to carry out a plan's steps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Execution {
    /// Every step is done.
    Done,
    /// Some step waits for an API (a CRD not yet Established).
    Waiting,
    /// A step failed.
    Failed {
        /// What went wrong.
        message: String,
        /// The API server refused for lack of permission (always retried,
        /// since RBAC may yet be granted).
        forbidden: bool,
        /// Retrying cannot help (invalid data in the plan).
        permanent: bool,
    },
}

/// What to do with an InstallPlan now.
#[derive(Debug, Clone, PartialEq)]
pub enum PlanAction {
    /// Nothing: terminal, empty, or awaiting approval.
    Nothing,
    /// Execute the steps, then call [`after_execution`].
    Execute,
}

/// Whether a plan has nothing to act on yet: neither steps nor bundle
/// lookups (the Subscription sync writes those first).
pub fn unplanned(status: &InstallPlanStatus) -> bool {
    status.plan.is_empty() && status.bundle_lookups.is_empty()
}

/// How often a plan refused for want of an install identity (no single
/// managing OperatorGroup, or its ServiceAccount not found yet) is looked
/// at again.
pub const IDENTITY_RECHECK: SignedDuration = SignedDuration::from_secs(5);

/// Records that the plan's install identity is unavailable: `Installed`
/// False `InstallCheckFailed` with the reason, as upstream. The phase is
/// left alone, so the plan is retried rather than failed.
pub fn identity_unavailable(status: &mut InstallPlanStatus, message: &str, now: Timestamp) {
    conditions::set(
        &mut status.conditions,
        installed(
            FALSE,
            Some(InstallPlanConditionReason::INSTALL_CHECK_FAILED),
            Some(message.to_owned()),
        ),
        now,
    );
}

/// Records the identity steps are applied with
/// (`status.attenuatedServiceAccountRef`, `None` for OLM's own) and clears
/// a previous `InstallCheckFailed`: upstream overwrites it with `Installed`
/// False, reason `Unknown` and no message, and so do we. Any other
/// `Installed` condition stays.
pub fn identity_available(
    status: &mut InstallPlanStatus,
    service_account: Option<ObjectReference>,
    now: Timestamp,
) {
    status.attenuated_service_account_ref = service_account;
    let check_failed = status.conditions.iter().any(|c| {
        c.type_ == InstallPlanConditionType::INSTALLED
            && c.reason.as_ref() == Some(&InstallPlanConditionReason::INSTALL_CHECK_FAILED)
    });
    if check_failed {
        conditions::set(
            &mut status.conditions,
            installed(FALSE, Some(InstallPlanConditionReason::UNKNOWN), None),
            now,
        );
    }
}

/// Decides whether an InstallPlan is to be executed, moving an approved
/// `RequiresApproval` plan to `Installing` and stamping `startTime`. Returns
/// the action and whether the status changed.
pub fn before_execution(
    plan: &InstallPlan,
    status: &mut InstallPlanStatus,
    now: Timestamp,
) -> (PlanAction, bool) {
    if unplanned(status) {
        return (PlanAction::Nothing, false);
    }
    let mut changed = false;
    if status.phase == InstallPlanPhase::REQUIRES_APPROVAL && plan.spec.approved {
        status.phase = InstallPlanPhase::INSTALLING;
        changed = true;
    }
    if status.phase != InstallPlanPhase::INSTALLING {
        return (PlanAction::Nothing, changed);
    }
    if status.start_time.is_none() {
        status.start_time = Some(Time(now));
        changed = true;
    }
    (PlanAction::Execute, changed)
}

fn installed(
    status: &str,
    reason: Option<InstallPlanConditionReason>,
    message: Option<String>,
) -> InstallPlanCondition {
    InstallPlanCondition {
        type_: InstallPlanConditionType::INSTALLED,
        status: status.to_owned(),
        reason,
        message,
        ..InstallPlanCondition::default()
    }
}

/// Records the outcome of an execution: `Complete` when done, still
/// `Installing` while waiting or while an error may be transient (within
/// the retry timeout of `startTime`, or Forbidden), else `Failed`. Returns
/// whether the status changed.
pub fn after_execution(
    status: &mut InstallPlanStatus,
    execution: &Execution,
    retry_timeout: SignedDuration,
    now: Timestamp,
) -> bool {
    let before = status.clone();
    match execution {
        Execution::Done => {
            status.phase = InstallPlanPhase::COMPLETE;
            status.message = None;
            conditions::set(&mut status.conditions, installed(TRUE, None, None), now);
        }
        Execution::Waiting => {
            status.message = None;
        }
        Execution::Failed {
            message,
            forbidden,
            permanent,
        } => {
            let started = status.start_time.as_ref().map_or(now, |t| t.0);
            let within = now.duration_since(started) < retry_timeout;
            if !permanent && (*forbidden || within) {
                status.message = Some(format!("retrying execution due to error: {message}"));
            } else {
                status.phase = InstallPlanPhase::FAILED;
                status.message = Some(message.clone());
                conditions::set(
                    &mut status.conditions,
                    installed(
                        FALSE,
                        Some(InstallPlanConditionReason::INSTALL_COMPONENT_FAILED),
                        Some(message.clone()),
                    ),
                    now,
                );
            }
        }
    }
    *status != before
}

/// The InstallPlans of one namespace to delete: the oldest generations
/// beyond [`MAX_INSTALL_PLANS_PER_NAMESPACE`], at most
/// [`MAX_DELETES_PER_SWEEP`] per sweep. Plans still referenced (by a
/// Subscription's `installPlanRef`) are never deleted.
pub fn garbage<'a>(plans: &'a [InstallPlan], referenced: &[&str]) -> Vec<&'a str> {
    if plans.len() <= MAX_INSTALL_PLANS_PER_NAMESPACE {
        return Vec::new();
    }
    let mut by_age: Vec<&InstallPlan> = plans.iter().collect();
    by_age.sort_by_key(|p| {
        (
            p.spec.generation.unwrap_or(0),
            p.metadata.creation_timestamp.as_ref().map(|t| t.0),
            p.metadata.name.clone(),
        )
    });
    let excess = plans.len() - MAX_INSTALL_PLANS_PER_NAMESPACE;
    by_age
        .into_iter()
        .filter_map(|p| p.metadata.name.as_deref())
        .filter(|name| !referenced.contains(name))
        .take(excess.min(MAX_DELETES_PER_SWEEP))
        .collect()
}

/// Kinds a step may create besides the core ones, as upstream allows
/// (`pkg/controller/operators/catalog/supportedresources.go`).
pub const EXTRA_SUPPORTED_KINDS: &[&str] = &[
    "PrometheusRule",
    "ServiceMonitor",
    "PodDisruptionBudget",
    "PriorityClass",
    "VerticalPodAutoscaler",
    "ConsoleYAMLSample",
    "ConsoleQuickStart",
    "ConsoleCLIDownload",
    "ConsoleLink",
    "ConsolePlugin",
    "NetworkPolicy",
];

/// The core kinds a step may carry.
pub const CORE_KINDS: &[&str] = &[
    "ClusterServiceVersion",
    "CustomResourceDefinition",
    "Subscription",
    "Secret",
    "BundleSecret",
    "ServiceAccount",
    "Service",
    "ConfigMap",
    "Role",
    "RoleBinding",
    "ClusterRole",
    "ClusterRoleBinding",
];

/// Whether an InstallPlan step of this kind can be applied; any other kind
/// makes the step `UnsupportedResource` and the plan invalid.
pub fn supported_kind(kind: &str) -> bool {
    CORE_KINDS.contains(&kind) || EXTRA_SUPPORTED_KINDS.contains(&kind)
}

/// The message of a plan that carries an unsupported kind.
pub const INVALID_PLAN_MESSAGE: &str = "the InstallPlan contains invalid data";

/// The order steps are applied in: CRDs first (their APIs must exist before
/// anything that uses them), then CSVs, then everything else, each group in
/// plan order. Returns indexes into `steps`.
pub fn apply_order(steps: &[Step]) -> Vec<usize> {
    let rank = |s: &Step| match s.resource.kind.as_str() {
        "CustomResourceDefinition" => 0,
        "ClusterServiceVersion" => 1,
        _ => 2,
    };
    let mut order: Vec<usize> = (0..steps.len()).collect();
    order.sort_by_key(|&i| rank(&steps[i]));
    order
}

/// Whether a step still has to be applied: `Unknown` and `NotPresent` are
/// applied; `Present`, `Created` and `WaitingForApi` are done (CRDs are
/// checked again until Established).
pub fn step_pending(step: &Step) -> bool {
    step.status == StepStatus::UNKNOWN || step.status == StepStatus::NOT_PRESENT
}

/// Whether `plan` is still waiting for the content of `image` from a catalog
/// in `catalog_namespace`: the unpacked bundle stored for that image (or a
/// failure recorded for it) is what it needs to go on. A lookup without a
/// catalog namespace uses the plan's own namespace, as upstream does.
pub fn waits_for_bundle(plan: &InstallPlan, catalog_namespace: &str, image: &str) -> bool {
    let Some(status) = plan.status.as_ref() else {
        return false;
    };
    if terminal(status) {
        return false;
    }
    let plan_namespace = plan.metadata.namespace.as_deref().unwrap_or_default();
    status.bundle_lookups.iter().any(|lookup| {
        lookup.path == image
            && lookup_catalog_namespace(lookup, plan_namespace) == catalog_namespace
    })
}

/// The namespace of the catalog a bundle lookup names, where its unpacked
/// content is stored: the plan's own namespace when the reference leaves it
/// out (or empty), as upstream does.
pub fn lookup_catalog_namespace<'a>(
    lookup: &'a olm_api::install_plan::BundleLookup,
    plan_namespace: &'a str,
) -> &'a str {
    lookup
        .catalog_source_ref
        .as_ref()
        .and_then(|r| r.namespace.as_deref())
        .filter(|n| !n.is_empty())
        .unwrap_or(plan_namespace)
}

/// Whether an InstallPlan is finished (nothing more will happen to it).
pub fn terminal(status: &InstallPlanStatus) -> bool {
    status.phase == InstallPlanPhase::COMPLETE || status.phase == InstallPlanPhase::FAILED
}

/// The annotation catalog-operator puts on a CRD it installs, recording the
/// CSV it was installed alongside: key
/// `operatorframework.io/installed-alongside-<fnv64a hex of "<ns>/<csv>">`,
/// value `<ns>/<csv>`.
pub fn installed_alongside(namespace: &str, csv: &str) -> (String, String) {
    let value = format!("{namespace}/{csv}");
    let key = format!(
        "{}{:x}",
        olm_api::labels::INSTALLED_ALONGSIDE_PREFIX,
        olm_api::labels::fnv1a_64(value.as_bytes())
    );
    (key, value)
}

/// The error upstream reports when a step's kind is not served by the
/// cluster.
pub fn api_not_found_message(kind: &str, name: &str, gvk: &str) -> String {
    format!(
        "api-server resource not found installing {kind} {name}: GroupVersionKind {gvk} not found on the cluster. This API may have been deprecated and removed, see https://kubernetes.io/docs/reference/using-api/deprecation-guide/ for more information."
    )
}

/// What the unpacked-bundle ConfigMap of a bundle lookup says.
#[derive(Debug)]
pub enum Unpacked {
    /// Not there yet.
    Pending,
    /// The bundle-unpacker recorded a failure.
    Failed {
        /// Its reason.
        reason: String,
        /// Its message.
        message: String,
    },
    /// The content, ready to become steps.
    Ready(olm_catalog::unpacked::UnpackedBundle),
    /// It could not be read now (the lookup stays as it is).
    Unreadable(String),
}

/// Judges the unpacked-bundle ConfigMap of the bundle `path` (`None`: not
/// there): it must say it holds that image's content, then holds either a
/// failure record or content that decodes.
pub fn unpacked(path: &str, found: Option<&ConfigMap>) -> Unpacked {
    use olm_catalog::unpacked;
    let Some(found) = found else {
        return Unpacked::Pending;
    };
    let annotations = found.metadata.annotations.clone().unwrap_or_default();
    if annotations.get(unpacked::SOURCE_IMAGE).map(String::as_str) != Some(path) {
        let namespace = found.metadata.namespace.as_deref().unwrap_or_default();
        let name = found.metadata.name.as_deref().unwrap_or_default();
        return Unpacked::Unreadable(format!(
            "configmap {namespace}/{name} holds another image's content"
        ));
    }
    if let Some((reason, message)) = unpacked::failure(&annotations) {
        return Unpacked::Failed { reason, message };
    }
    let data: std::collections::BTreeMap<String, Vec<u8>> = found
        .binary_data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect();
    match unpacked::decode(&annotations, &data) {
        Ok(bundle) => Unpacked::Ready(bundle),
        Err(error) => Unpacked::Unreadable(error.to_string()),
    }
}

/// Sets a condition of a bundle lookup, as upstream's `SetCondition`:
/// `lastTransitionTime` moves only when the status does, `lastUpdateTime`
/// whenever anything does.
pub fn set_lookup_condition(
    lookup: &mut BundleLookup,
    type_: BundleLookupConditionType,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) {
    let time = Some(Time(now));
    match lookup.conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            let changed = c.status != status
                || c.reason.as_deref() != Some(reason)
                || c.message.as_deref() != Some(message);
            if changed {
                if c.status != status {
                    c.last_transition_time = time.clone();
                }
                c.status = status.to_owned();
                c.reason = Some(reason.to_owned());
                c.message = Some(message.to_owned());
                c.last_update_time = time;
            }
        }
        None => lookup.conditions.push(BundleLookupCondition {
            type_,
            status: status.to_owned(),
            reason: Some(reason.to_owned()),
            message: Some(message.to_owned()),
            last_transition_time: time.clone(),
            last_update_time: time,
        }),
    }
}

/// Turns unpacked bundles into steps. `unpacked` holds what was read for
/// each of `status.bundleLookups`, in order. A lookup whose content is
/// there becomes the bundle's steps and is removed; a recorded failure, a
/// bundle that is not the one resolved, or content that makes no steps
/// marks the lookup failed; a missing one is pending again (a failure
/// record removed for a retry stops counting). Returns the lookups to ask
/// the bundle-unpacker for.
pub fn persist_lookups(
    status: &mut InstallPlanStatus,
    namespace: &str,
    unpacked: Vec<Unpacked>,
    now: Timestamp,
) -> Vec<BundleLookup> {
    use BundleLookupConditionType as Type;
    let mut remaining = Vec::new();
    let mut added = Vec::new();
    let mut requests = Vec::new();
    let lookups = std::mem::take(&mut status.bundle_lookups);
    for (mut lookup, found) in lookups.into_iter().zip(unpacked) {
        match found {
            Unpacked::Ready(content) if content.csv_name != lookup.identifier => {
                // The image does not hold the bundle the catalog described:
                // installing it would install something nobody resolved.
                let message = format!(
                    "the image {} holds the bundle {:?}, but the catalog resolved {:?}",
                    lookup.path, content.csv_name, lookup.identifier
                );
                set_lookup_condition(
                    &mut lookup,
                    Type::FAILED,
                    TRUE,
                    "BundleMismatch",
                    &message,
                    now,
                );
                remaining.push(lookup);
            }
            Unpacked::Ready(content) => {
                let source = olm_plan::steps::BundleSource {
                    catalog: lookup
                        .catalog_source_ref
                        .as_ref()
                        .and_then(|r| r.name.clone())
                        .unwrap_or_default(),
                    catalog_namespace: lookup_catalog_namespace(&lookup, namespace).to_owned(),
                };
                let bundle = olm_plan::steps::BundleContent {
                    csv_name: content.csv_name.clone(),
                    csv_json: String::new(),
                    objects: content.objects,
                };
                let replaces = (!lookup.replaces.is_empty()).then_some(lookup.replaces.as_str());
                match olm_plan::steps::steps_for_bundle(
                    &bundle,
                    &source,
                    namespace,
                    replaces,
                    lookup.properties.as_deref(),
                ) {
                    Ok(steps) => added.extend(steps),
                    Err(error) => {
                        let message = error.to_string();
                        set_lookup_condition(
                            &mut lookup,
                            Type::FAILED,
                            TRUE,
                            "InvalidBundle",
                            &message,
                            now,
                        );
                        remaining.push(lookup);
                    }
                }
            }
            Unpacked::Failed { reason, message } => {
                set_lookup_condition(&mut lookup, Type::FAILED, TRUE, &reason, &message, now);
                set_lookup_condition(&mut lookup, Type::PENDING, FALSE, &reason, &message, now);
                remaining.push(lookup);
            }
            Unpacked::Pending => {
                // A failure record removed for a retry: the lookup is
                // pending again, not failed.
                if lookup
                    .conditions
                    .iter()
                    .any(|c| c.type_ == Type::FAILED && c.status == TRUE)
                {
                    let message = "the unpack is being retried";
                    set_lookup_condition(
                        &mut lookup,
                        Type::FAILED,
                        FALSE,
                        "Retrying",
                        message,
                        now,
                    );
                }
                let message = format!("waiting for bundle-unpacker to unpack {}", lookup.path);
                set_lookup_condition(
                    &mut lookup,
                    Type::PENDING,
                    TRUE,
                    "UnpackPending",
                    &message,
                    now,
                );
                requests.push(lookup.clone());
                remaining.push(lookup);
            }
            Unpacked::Unreadable(_) => remaining.push(lookup),
        }
    }
    status.bundle_lookups = remaining;
    if !added.is_empty() {
        status.plan.extend(added);
        olm_plan::steps::listing_order(&mut status.plan);
    }
    requests
}

/// Whether a lookup still waits for its content to become steps.
pub fn lookups_pending(status: &InstallPlanStatus) -> bool {
    status.bundle_lookups.iter().any(|l| {
        l.conditions
            .iter()
            .any(|c| c.type_ == BundleLookupConditionType::NOT_PERSISTED && c.status == TRUE)
    })
}

/// Marks the steps of a kind OLM does not install `UnsupportedResource`;
/// any such step makes the whole plan invalid, and nothing of it is
/// applied. Returns the failed execution in that case.
pub fn reject_unsupported(steps: &mut [Step]) -> Option<Execution> {
    let mut invalid = false;
    for step in steps
        .iter_mut()
        .filter(|s| !supported_kind(&s.resource.kind))
    {
        step.status = StepStatus::UNSUPPORTED_RESOURCE;
        invalid = true;
    }
    invalid.then(|| Execution::Failed {
        message: INVALID_PLAN_MESSAGE.to_owned(),
        forbidden: false,
        permanent: true,
    })
}
