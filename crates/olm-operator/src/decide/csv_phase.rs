//! The CSV state machine: from one observed snapshot of a CSV and its
//! surroundings to the next status, the metadata to write, the events to
//! record and the actions to take (upstream's `syncClusterServiceVersion` and
//! `transitionCSVState` in `pkg/controller/operators/olm/operator.go`).
//!
//! [`decide`] is called on every sync. Running the install strategy is I/O, so
//! for a CSV in `InstallReady` it returns [`CsvAction::RunInstaller`]; the
//! caller runs the installer and hands the outcome to [`after_install`],
//! which decides the phase that follows.
//!
//! Every phase, reason and message string is upstream's. Deliberate
//! differences, each to avoid a loop upstream falls into:
//!
//! - A few failures upstream re-sets on every sync with a fresh
//!   `lastUpdateTime` (no OperatorGroup, a static group that would need
//!   changing, an invalid strategy): its own status write then triggers the
//!   next sync. Here they are set only when phase, reason or message change.
//! - Where upstream requeues a CSV immediately while waiting for components
//!   (and both CSVs of an ongoing replacement), which spins while a rollout
//!   takes its time, the requeue here is delayed by [`WAIT_REQUEUE_AFTER`];
//!   watches on Deployments and CSVs still wake the CSV at once on change.
//! - The status is written whenever any part of it changed (see
//!   [`csv_status::status_changed`]).

use std::{collections::BTreeMap, time::Duration};

use jiff::Timestamp;
use olm_api::{
    csv::{ClusterServiceVersion, ClusterServiceVersionStatus, CsvPhase, CsvReason},
    labels,
    operator_condition::OperatorCondition,
    operator_group::OperatorGroup,
};

use super::Error;
use super::{
    api_surface::{api_surface, merge_api_labels},
    copied_csv::{is_copied, is_uncopiable},
    csv_status::{self, CsvEvent, phase_event},
    deployment::{InvalidStrategy, StrategyError, validate_strategy},
    operator_condition::{not_upgradeable_message, upgradeable},
    operator_group::{
        self, MISSING_TARGETS_ANNOTATION_MESSAGE, NO_OPERATOR_GROUP_MESSAGE,
        NO_TARGET_NAMESPACES_MESSAGE, ObservedNamespace, ProvidedApiDecision,
        TOO_MANY_OPERATOR_GROUPS_MESSAGE, install_mode_set, is_active_member,
        membership_annotations_differ, provided_api_decision, with_membership_annotations,
    },
    replacement::{crd_owner_conflict, newest_in_chain, replaced_by_this, replacing_this},
    requirements::RequirementsOutcome,
};

/// How long a CSV may stay Installing without its components becoming
/// healthy before it fails with `InstallCheckFailed` "install timeout".
pub const INSTALL_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// Delay before an owned APIService that is unavailable only because its pods
/// are being disrupted (restarting, being replaced) is checked again.
pub const API_SERVICE_RETRY_AFTER: Duration = Duration::from_secs(10);

/// Delay before a CSV waiting for its components (or for its replacement) is
/// checked again when no watch event wakes it earlier.
pub const WAIT_REQUEUE_AFTER: Duration = Duration::from_secs(5);

/// Message of a CSV failing an owned CRD owned elsewhere.
pub const CRD_OWNER_CONFLICT_MESSAGE: &str = "conflicting CRD owner in namespace";

/// Message of a CSV failing an owned APIService it cannot adopt.
pub const API_SERVICE_OWNER_CONFLICT_MESSAGE: &str = "unable to adopt APIService";

/// Result of the Deployment part of the install check.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum DeploymentsCheck {
    /// Every strategy Deployment is there, rolled out, annotated and hashed
    /// as it should be.
    #[default]
    Healthy,
    /// The first problem found (see
    /// [`crate::decide::deployment::check_deployments`]).
    Unhealthy(StrategyError),
    /// The expected Deployments could not be computed (for example the
    /// serving-certificate data of owned APIServices is broken).
    ExpectedSpecInvalid,
}

/// Availability of the CSV's owned APIServices.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ApiServicesCheck {
    /// All available and discoverable (or none owned).
    #[default]
    Available,
    /// Not available yet, without a specific error.
    NotAvailable,
    /// Not available because the backing pods are in an expected disruption;
    /// retried after [`API_SERVICE_RETRY_AFTER`] without a phase change.
    Retryable(String),
    /// Not available, and not for an expected reason.
    Failed(String),
}

/// Availability of the CSV's webhooks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum WebhooksCheck {
    /// All configured (or none declared).
    #[default]
    Available,
    /// Not installed yet.
    NotAvailable,
    /// Broken; the CSV goes back to InstallReady.
    Failed(String),
}

/// The install check: Deployments, owned APIServices, webhooks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InstallCheck {
    /// Deployments.
    pub deployments: DeploymentsCheck,
    /// Owned APIServices.
    pub api_services: ApiServicesCheck,
    /// Webhooks.
    pub webhooks: WebhooksCheck,
}

/// Health of the objects backing owned APIServices (certificates, Secret,
/// Service, RBAC), checked for Succeeded and Failed CSVs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ApiServiceResources {
    /// Everything is in place (or nothing is owned).
    #[default]
    Healthy,
    /// Something is missing or wrong.
    Broken {
        /// What.
        message: String,
        /// Whether OLM can repair it by reinstalling (false when the
        /// APIService belongs to someone else).
        actionable: bool,
    },
}

/// Cluster-scoped objects still carrying a deleted CSV's owner labels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OwnedClusterObjects {
    /// ClusterRoleBindings left.
    pub cluster_role_bindings: usize,
    /// ClusterRoles left.
    pub cluster_roles: usize,
}

/// Everything [`decide`] looks at for one CSV.
#[derive(Clone, Debug)]
pub struct CsvObservation<'a> {
    /// The CSV.
    pub csv: &'a ClusterServiceVersion,
    /// The OperatorGroups in the CSV's namespace.
    pub namespace_operator_groups: &'a [OperatorGroup],
    /// Every OperatorGroup in the cluster (for provided-API intersection).
    pub all_operator_groups: &'a [OperatorGroup],
    /// Every namespace in the cluster (to tell whether the group selects any).
    pub namespaces: &'a [ObservedNamespace],
    /// The CSVs of the CSV's namespace, itself included, copies excluded.
    pub namespace_csvs: &'a [ClusterServiceVersion],
    /// Result of [`crate::decide::requirements::evaluate`].
    pub requirements: Result<RequirementsOutcome, InvalidStrategy>,
    /// Result of the install check.
    pub install: InstallCheck,
    /// Whether an owned APIService exists that this CSV may not adopt.
    pub api_service_owner_conflict: bool,
    /// Health of owned-APIService resources.
    pub api_service_resources: ApiServiceResources,
    /// Whether serving certificates are due for rotation.
    pub cert_rotation_due: bool,
    /// The OperatorCondition of the CSV this one replaces, if any.
    pub replaced_operator_condition: Option<&'a OperatorCondition>,
    /// For a CSV being deleted: cluster-scoped objects still to go.
    pub owned_cluster_objects: OwnedClusterObjects,
    /// The time of this sync.
    pub now: Timestamp,
}

impl<'a> CsvObservation<'a> {
    /// An observation of `csv` at `now` with nothing else around it: no
    /// OperatorGroups, no other CSVs, all requirements met with no entries,
    /// and a healthy install.
    pub fn new(csv: &'a ClusterServiceVersion, now: Timestamp) -> Self {
        Self {
            csv,
            namespace_operator_groups: &[],
            all_operator_groups: &[],
            namespaces: &[],
            namespace_csvs: &[],
            requirements: Ok(RequirementsOutcome {
                met: true,
                statuses: Vec::new(),
            }),
            install: InstallCheck::default(),
            api_service_owner_conflict: false,
            api_service_resources: ApiServiceResources::default(),
            cert_rotation_due: false,
            replaced_operator_condition: None,
            owned_cluster_objects: OwnedClusterObjects::default(),
            now,
        }
    }
}

/// Something the caller must do besides writing metadata and status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CsvAction {
    /// Run the install strategy (certificates, Services, APIServices,
    /// webhooks, Deployments, then delete orphaned Deployments), then call
    /// [`after_install`].
    RunInstaller,
    /// Delete these Deployments of the CSV's namespace.
    DeleteDeployments(Vec<String>),
    /// Delete the CSV.
    DeleteCsv,
    /// Delete the ClusterRoles, ClusterRoleBindings and webhook
    /// configurations carrying the CSV's owner labels.
    DeleteOwnedClusterObjects,
    /// Set the OperatorGroup's `olm.providedAPIs` annotation.
    SetProvidedApis {
        /// Name of the group (in the CSV's namespace).
        operator_group: String,
        /// The new value.
        value: String,
    },
    /// Sync the named OperatorGroup of the CSV's namespace again.
    RequeueOperatorGroup(String),
    /// Sync the named CSV of the same namespace again, now or after a delay.
    Requeue {
        /// Name of the CSV.
        name: String,
        /// Delay, if any.
        after: Option<Duration>,
    },
    /// Count an upgrade (`csv_upgrade_count`).
    CountUpgrade,
    /// Ensure the per-API admin/edit/view ClusterRoles of the provided APIs.
    EnsureProvidedApiClusterRoles,
    /// Ensure the operator's RBAC in its target namespaces.
    EnsureTargetNamespaceRbac,
    /// Bring the CSV's copies in line (see [`crate::decide::copied_csv`]).
    SyncCopies,
}

/// What one sync decided.
#[derive(Debug, Default)]
pub struct CsvDecision {
    /// The status to write; `None` when nothing in it changed.
    pub status: Option<ClusterServiceVersionStatus>,
    /// The labels to write (`olm.api.*` added); `None` when unchanged.
    pub labels: Option<BTreeMap<String, String>>,
    /// The annotations to write (OperatorGroup membership); `None` when
    /// unchanged.
    pub annotations: Option<BTreeMap<String, String>>,
    /// The finalizers to write; `None` when unchanged.
    pub finalizers: Option<Vec<String>>,
    /// Events to record on the CSV, in order.
    pub events: Vec<CsvEvent>,
    /// Actions, in order.
    pub actions: Vec<CsvAction>,
    /// Retry the sync with backoff, for this reason.
    pub retry: Option<Error>,
}

impl CsvDecision {
    /// The phase after this decision (the written status, else the observed
    /// one).
    pub fn phase(&self, csv: &ClusterServiceVersion) -> CsvPhase {
        self.status
            .as_ref()
            .or(csv.status.as_ref())
            .map(csv_status::phase_of)
            .unwrap_or(CsvPhase::NONE)
    }
}

/// The state of one sync in progress.
struct SyncState<'o, 'a> {
    observation: &'o CsvObservation<'a>,
    status: ClusterServiceVersionStatus,
    decision: CsvDecision,
}

impl<'o, 'a> SyncState<'o, 'a> {
    fn new(observation: &'o CsvObservation<'a>) -> Self {
        Self {
            observation,
            status: observation.csv.status.clone().unwrap_or_default(),
            decision: CsvDecision::default(),
        }
    }

    fn csv(&self) -> &'a ClusterServiceVersion {
        self.observation.csv
    }

    fn name(&self) -> String {
        self.csv().metadata.name.clone().unwrap_or_default()
    }

    fn phase(&self) -> CsvPhase {
        csv_status::phase_of(&self.status)
    }

    fn reason(&self) -> CsvReason {
        csv_status::reason_of(&self.status)
    }

    /// Upstream's `SetPhaseWithEvent`.
    fn set(&mut self, phase: CsvPhase, reason: CsvReason, message: &str) {
        self.decision
            .events
            .push(phase_event(&phase, &reason, message));
        csv_status::set_phase(
            &mut self.status,
            phase,
            reason,
            message,
            self.observation.now,
        );
    }

    /// Upstream's `SetPhaseWithEventIfChanged`.
    fn set_if_changed(&mut self, phase: CsvPhase, reason: CsvReason, message: &str) {
        if csv_status::differs(&self.status, &phase, &reason, message) {
            self.set(phase, reason, message);
        }
    }

    fn act(&mut self, action: CsvAction) {
        self.decision.actions.push(action);
    }

    fn requeue(&mut self, name: String, after: Option<Duration>) {
        self.act(CsvAction::Requeue { name, after });
    }

    fn requeue_self(&mut self, after: Option<Duration>) {
        let name = self.name();
        self.requeue(name, after);
    }

    fn finish(mut self) -> CsvDecision {
        if csv_status::status_changed(self.observation.csv.status.as_ref(), &self.status) {
            self.decision.status = Some(self.status);
        }
        self.decision
    }
}

/// Decides one sync of a CSV.
pub fn decide(observation: &CsvObservation<'_>) -> CsvDecision {
    let csv = observation.csv;
    let mut sync = SyncState::new(observation);

    // Copies mirror their parent and are never driven themselves.
    if is_copied(csv) {
        return sync.finish();
    }

    let finalizers = csv.metadata.finalizers.clone().unwrap_or_default();
    let has_finalizer = finalizers
        .iter()
        .any(|f| f == labels::CSV_CLEANUP_FINALIZER);
    if csv.metadata.deletion_timestamp.is_some() {
        if has_finalizer {
            cleanup(&mut sync, finalizers);
        }
        return sync.finish();
    }
    if !has_finalizer {
        let mut with = finalizers;
        with.push(labels::CSV_CLEANUP_FINALIZER.to_owned());
        sync.decision.finalizers = Some(with);
    }

    // A CSV whose install was forbidden waits for an RBAC change elsewhere
    // (see `detected_cluster_change`); nothing else happens.
    if sync.reason() == CsvReason::INSTALL_COMPONENT_FAILED_NO_RETRY {
        return sync.finish();
    }

    transition(&mut sync);
    follow_up(&mut sync);
    sync.finish()
}

/// The finalizer's work for a CSV being deleted.
fn cleanup(sync: &mut SyncState<'_, '_>, finalizers: Vec<String>) {
    sync.act(CsvAction::DeleteOwnedClusterObjects);
    let remaining = sync.observation.owned_cluster_objects;
    let mut kinds = Vec::new();
    if remaining.cluster_role_bindings > 0 {
        kinds.push("ClusterRoleBindings");
    }
    if remaining.cluster_roles > 0 {
        kinds.push("ClusterRoles");
    }
    if kinds.is_empty() {
        sync.decision.finalizers = Some(
            finalizers
                .into_iter()
                .filter(|f| f != labels::CSV_CLEANUP_FINALIZER)
                .collect(),
        );
    } else {
        sync.decision.retry = Some(Error::CleanupPending {
            kinds: kinds.join(" and "),
        });
    }
}

/// The OperatorGroup preamble and the phase handlers.
fn transition(sync: &mut SyncState<'_, '_>) {
    let observation = sync.observation;
    let csv = observation.csv;
    let Ok(surface) = api_surface(&csv.spec) else {
        // The CSV itself must change before anything can be decided.
        return;
    };
    sync.decision.labels = merge_api_labels(csv.metadata.labels.as_ref(), &surface);

    let group = match observation.namespace_operator_groups {
        [] => {
            sync.set_if_changed(
                CsvPhase::FAILED,
                CsvReason::NO_OPERATOR_GROUP,
                NO_OPERATOR_GROUP_MESSAGE,
            );
            sync.decision.retry = Some(Error::NoOperatorGroup);
            return;
        }
        [group] => group,
        _ => {
            if sync.reason() != CsvReason::TOO_MANY_OPERATOR_GROUPS {
                sync.set(
                    CsvPhase::FAILED,
                    CsvReason::TOO_MANY_OPERATOR_GROUPS,
                    TOO_MANY_OPERATOR_GROUPS_MESSAGE,
                );
            }
            sync.decision.retry = Some(Error::TooManyOperatorGroups);
            return;
        }
    };

    let annotations = csv.metadata.annotations.as_ref();
    if membership_annotations_differ(annotations, group) {
        sync.decision.annotations = Some(with_membership_annotations(annotations, group));
        if operator_group::target_namespaces(group, observation.namespaces)
            .is_ok_and(|t| t.is_empty())
        {
            sync.set_if_changed(
                CsvPhase::FAILED,
                CsvReason::NO_TARGET_NAMESPACES,
                NO_TARGET_NAMESPACES_MESSAGE,
            );
        }
        sync.act(CsvAction::RequeueOperatorGroup(
            group.metadata.name.clone().unwrap_or_default(),
        ));
        return;
    }

    let modes = match install_mode_set(csv.spec.install_modes()) {
        Ok(modes) => modes,
        Err(message) => {
            sync.set_if_changed(CsvPhase::FAILED, CsvReason::INVALID_INSTALL_MODES, &message);
            return;
        }
    };
    match annotations.and_then(|a| a.get(labels::TARGET_NAMESPACES)) {
        Some(targets) => {
            let namespaces: Vec<String> = targets.split(',').map(str::to_owned).collect();
            let namespace = csv.metadata.namespace.as_deref().unwrap_or_default();
            if let Err(message) = modes.supports(namespace, &namespaces) {
                sync.set_if_changed(
                    CsvPhase::FAILED,
                    CsvReason::UNSUPPORTED_OPERATOR_GROUP,
                    &message,
                );
                return;
            }
        }
        None => {
            sync.set_if_changed(
                CsvPhase::FAILED,
                CsvReason::NO_TARGET_NAMESPACES,
                MISSING_TARGETS_ANNOTATION_MESSAGE,
            );
            return;
        }
    }

    match provided_api_decision(
        &surface.provided,
        group,
        observation.all_operator_groups,
        &sync.reason(),
    ) {
        ProvidedApiDecision::Proceed => {}
        ProvidedApiDecision::Stop => return,
        ProvidedApiDecision::Fail { reason, message } => {
            if csv_status::differs(&sync.status, &CsvPhase::FAILED, &reason, message) {
                sync.set(CsvPhase::FAILED, reason, message);
                sync.act(CsvAction::DeleteDeployments(strategy_deployment_names(csv)));
            }
            return;
        }
        ProvidedApiDecision::UpdateGroupAnnotation(value) => {
            sync.act(CsvAction::SetProvidedApis {
                operator_group: group.metadata.name.clone().unwrap_or_default(),
                value,
            });
            sync.requeue_self(None);
            return;
        }
    }

    let phase = sync.phase();
    if phase == CsvPhase::NONE {
        sync.set(
            CsvPhase::PENDING,
            CsvReason::REQUIREMENTS_UNKNOWN,
            "requirements not yet checked",
        );
    } else if phase == CsvPhase::PENDING {
        pending(sync);
    } else if phase == CsvPhase::INSTALL_READY {
        install_ready(sync);
    } else if phase == CsvPhase::INSTALLING {
        installing(sync);
    } else if phase == CsvPhase::SUCCEEDED {
        succeeded(sync);
    } else if phase == CsvPhase::FAILED {
        failed(sync, group);
    } else if phase == CsvPhase::REPLACING {
        replacing(sync, group);
    } else if phase == CsvPhase::DELETING {
        sync.act(CsvAction::DeleteCsv);
    }
}

fn strategy_deployment_names(csv: &ClusterServiceVersion) -> Vec<String> {
    csv.spec
        .install
        .spec
        .deployments
        .iter()
        .map(|d| d.name.clone())
        .collect()
}

fn set_requirement_status(sync: &mut SyncState<'_, '_>, outcome: &RequirementsOutcome) {
    sync.status.requirement_status =
        (!outcome.statuses.is_empty()).then(|| outcome.statuses.clone());
}

fn invalid_strategy_message(err: &InvalidStrategy) -> String {
    format!("install strategy invalid: {err}")
}

/// Upstream's `parseStrategiesAndUpdateStatus`: false (and Failed) when the
/// strategy cannot be used; otherwise the replaced CSV is requeued.
fn strategy_usable(sync: &mut SyncState<'_, '_>) -> bool {
    let csv = sync.csv();
    if let Err(err) = validate_strategy(csv) {
        sync.set_if_changed(
            CsvPhase::FAILED,
            CsvReason::INVALID_INSTALL_STRATEGY,
            &invalid_strategy_message(&err),
        );
        return false;
    }
    if let Some(previous) = replaced_by_this(csv, sync.observation.namespace_csvs) {
        sync.requeue(previous.metadata.name.clone().unwrap_or_default(), None);
    }
    true
}

fn pending(sync: &mut SyncState<'_, '_>) {
    let observation = sync.observation;
    let csv = observation.csv;
    let replaced = replaced_by_this(csv, observation.namespace_csvs);
    if replaced.is_some()
        && let Err(blocked) = upgradeable(observation.replaced_operator_condition)
    {
        sync.set_if_changed(
            CsvPhase::PENDING,
            CsvReason::OPERATOR_CONDITION_NOT_UPGRADEABLE,
            &not_upgradeable_message(&blocked),
        );
        return;
    }

    let outcome = match &observation.requirements {
        Ok(outcome) => outcome,
        Err(err) => {
            sync.set(
                CsvPhase::FAILED,
                CsvReason::INVALID_INSTALL_STRATEGY,
                &invalid_strategy_message(err),
            );
            return;
        }
    };
    set_requirement_status(sync, outcome);

    if let Some(previous) = replaced
        && csv_status::phase_of(&previous.status.clone().unwrap_or_default()) == CsvPhase::SUCCEEDED
    {
        sync.requeue(previous.metadata.name.clone().unwrap_or_default(), None);
    }

    if !outcome.met {
        sync.set_if_changed(
            CsvPhase::PENDING,
            CsvReason::REQUIREMENTS_NOT_MET,
            "one or more requirements couldn't be found",
        );
        sync.decision.retry = Some(Error::RequirementsNotMet);
        return;
    }

    if let Some(message) = webhook_problem(csv) {
        sync.set_if_changed(
            CsvPhase::FAILED,
            CsvReason::INVALID_WEBHOOK_DESCRIPTION,
            &message,
        );
        return;
    }

    if crd_owner_conflict(csv, observation.namespace_csvs) {
        sync.set(
            CsvPhase::FAILED,
            CsvReason::OWNER_CONFLICT,
            CRD_OWNER_CONFLICT_MESSAGE,
        );
        return;
    }
    if observation.api_service_owner_conflict {
        sync.set(
            CsvPhase::FAILED,
            CsvReason::OWNER_CONFLICT,
            API_SERVICE_OWNER_CONFLICT_MESSAGE,
        );
        return;
    }

    // Part of a replacement chain: wait until the replaced CSV is Replacing.
    if let Some(previous) = replaced
        && csv_status::phase_of(&previous.status.clone().unwrap_or_default()) != CsvPhase::REPLACING
    {
        return;
    }

    sync.set(
        CsvPhase::INSTALL_READY,
        CsvReason::ALL_REQUIREMENTS_MET,
        "all requirements found, attempting install",
    );
}

/// The first problem with the CSV's webhook definitions, as upstream words it:
/// a repeated `generateName`, or rules upstream refuses (`ValidWebhookRules`).
///
/// Upstream compares rule resources with the kind names
/// `MutatingWebhookConfiguration` and `ValidatingWebhookConfiguration`, which
/// never occur in rules (rules list plural resources), so only `*` is caught;
/// we also refuse the plural resource names, since a webhook on its own
/// configurations can lock administrators out.
pub fn webhook_problem(csv: &ClusterServiceVersion) -> Option<String> {
    let mut seen = std::collections::BTreeSet::new();
    for webhook in csv.spec.webhooks() {
        if !seen.insert(webhook.generate_name.as_str()) {
            return Some("CSV contains repeated WebhookDescription name".to_owned());
        }
        for rule in webhook.rules.iter().flatten() {
            let groups = rule.api_groups.as_deref().unwrap_or_default();
            let has_group = |name: &str| groups.iter().any(|g| g == name);
            if has_group("*") {
                return Some("webhook rules cannot include all groups".to_owned());
            }
            if has_group("operators.coreos.com") {
                return Some("webhook rules cannot include the OLM group".to_owned());
            }
            if has_group("admissionregistration.k8s.io") {
                let protected = rule.resources.iter().flatten().any(|resource| {
                    matches!(
                        resource.as_str(),
                        "*" | "MutatingWebhookConfiguration"
                            | "ValidatingWebhookConfiguration"
                            | "mutatingwebhookconfigurations"
                            | "validatingwebhookconfigurations"
                    )
                });
                if protected {
                    return Some(
                        "webhook rules cannot include MutatingWebhookConfiguration or ValidatingWebhookConfiguration resources"
                            .to_owned(),
                    );
                }
            }
        }
    }
    None
}

fn install_ready(sync: &mut SyncState<'_, '_>) {
    if strategy_usable(sync) {
        sync.act(CsvAction::RunInstaller);
    }
}

fn installing(sync: &mut SyncState<'_, '_>) {
    if !strategy_usable(sync) {
        return;
    }
    if sync.observation.install.deployments == DeploymentsCheck::ExpectedSpecInvalid {
        sync.set(
            CsvPhase::PENDING,
            CsvReason::NEEDS_REINSTALL,
            "calculated deployment install is bad",
        );
        return;
    }
    if !update_install_status(sync, CsvPhase::INSTALLING, CsvReason::INSTALL_WAITING) {
        let since = sync.status.last_transition_time.as_ref().map(|t| t.0);
        let now = sync.observation.now;
        if let Some(since) = since
            && now.as_second() - since.as_second() >= INSTALL_TIMEOUT.as_secs() as i64
        {
            sync.set(
                CsvPhase::FAILED,
                CsvReason::INSTALL_CHECK_FAILED,
                "install timeout",
            );
        }
    }
}

/// Upstream's `checkReplacementsAndUpdateStatus`: moves a CSV that another CSV
/// replaces to Replacing.
fn became_replaced(sync: &mut SyncState<'_, '_>) -> bool {
    let phase = sync.phase();
    if phase == CsvPhase::REPLACING || phase == CsvPhase::DELETING {
        return false;
    }
    let Some(replacement) = replacing_this(sync.csv(), sync.observation.namespace_csvs) else {
        return false;
    };
    let message = format!(
        "being replaced by csv: {}",
        replacement.metadata.name.as_deref().unwrap_or_default()
    );
    sync.set(CsvPhase::REPLACING, CsvReason::BEING_REPLACED, &message);
    sync.act(CsvAction::CountUpgrade);
    true
}

fn succeeded(sync: &mut SyncState<'_, '_>) {
    if became_replaced(sync) || !strategy_usable(sync) {
        return;
    }
    let observation = sync.observation;
    if let ApiServiceResources::Broken { message, .. } = &observation.api_service_resources {
        sync.set(
            CsvPhase::FAILED,
            CsvReason::API_SERVICE_RESOURCE_ISSUE,
            message,
        );
        return;
    }
    if observation.cert_rotation_due {
        sync.set(
            CsvPhase::PENDING,
            CsvReason::NEEDS_CERT_ROTATION,
            "CSV owns resources that require a cert refresh",
        );
        return;
    }
    match &observation.requirements {
        Err(err) => {
            sync.set(
                CsvPhase::FAILED,
                CsvReason::INVALID_INSTALL_STRATEGY,
                &invalid_strategy_message(err),
            );
            return;
        }
        Ok(outcome) if !outcome.met => {
            set_requirement_status(sync, outcome);
            sync.set(
                CsvPhase::FAILED,
                CsvReason::REQUIREMENTS_NOT_MET,
                "requirements no longer met",
            );
            return;
        }
        Ok(_) => {}
    }
    if observation.install.deployments == DeploymentsCheck::ExpectedSpecInvalid {
        sync.set(
            CsvPhase::PENDING,
            CsvReason::NEEDS_REINSTALL,
            "calculated deployment install is bad",
        );
        return;
    }
    if update_install_status(sync, CsvPhase::FAILED, CsvReason::COMPONENT_UNHEALTHY) {
        sync.act(CsvAction::EnsureProvidedApiClusterRoles);
    }
}

/// Reasons of OperatorGroup trouble that a Failed CSV recovers from once the
/// preamble passes again, with the message of the recovery.
fn operator_group_recovery(reason: &CsvReason) -> Option<&'static str> {
    if *reason == CsvReason::NO_TARGET_NAMESPACES
        || *reason == CsvReason::NO_OPERATOR_GROUP
        || *reason == CsvReason::TOO_MANY_OPERATOR_GROUPS
        || *reason == CsvReason::UNSUPPORTED_OPERATOR_GROUP
    {
        Some("InstallModes now support target namespaces")
    } else if *reason == CsvReason::INTER_OPERATOR_GROUP_OWNER_CONFLICT {
        Some("OperatorGroup no longer intersecting with conflicting owner")
    } else if *reason == CsvReason::CANNOT_MODIFY_STATIC_OPERATOR_GROUP_PROVIDED_APIS {
        Some("static OperatorGroup and intersecting groups now support providedAPIs")
    } else {
        None
    }
}

fn failed(sync: &mut SyncState<'_, '_>, group: &OperatorGroup) {
    let observation = sync.observation;
    let csv = observation.csv;
    if group.fail_forward_enabled()
        && let Some(replacement) = replacing_this(csv, observation.namespace_csvs)
    {
        let message = format!(
            "Fail Forward is enabled, allowing {} csv to be replaced by csv: {}",
            sync.phase(),
            replacement.metadata.name.as_deref().unwrap_or_default()
        );
        sync.set(CsvPhase::REPLACING, CsvReason::BEING_REPLACED, &message);
        sync.act(CsvAction::CountUpgrade);
        return;
    }
    if !strategy_usable(sync) {
        return;
    }
    if let Some(message) = operator_group_recovery(&sync.reason()) {
        sync.set(CsvPhase::PENDING, CsvReason::REQUIREMENTS_UNKNOWN, message);
        return;
    }
    match &observation.requirements {
        Err(err) if sync.reason() != CsvReason::INVALID_INSTALL_STRATEGY => {
            sync.set(
                CsvPhase::FAILED,
                CsvReason::INVALID_INSTALL_STRATEGY,
                &invalid_strategy_message(err),
            );
            return;
        }
        Err(_) => {
            sync.status.requirement_status = None;
            sync.set(
                CsvPhase::PENDING,
                CsvReason::REQUIREMENTS_NOT_MET,
                "requirements not met",
            );
            return;
        }
        Ok(outcome) if !outcome.met => {
            set_requirement_status(sync, outcome);
            sync.set(
                CsvPhase::PENDING,
                CsvReason::REQUIREMENTS_NOT_MET,
                "requirements not met",
            );
            return;
        }
        Ok(_) => {}
    }
    if let ApiServiceResources::Broken {
        message,
        actionable,
    } = &observation.api_service_resources
    {
        if *actionable {
            sync.set(
                CsvPhase::PENDING,
                CsvReason::API_SERVICE_RESOURCES_NEED_REINSTALL,
                message,
            );
        }
        return;
    }
    if observation.cert_rotation_due {
        sync.set(
            CsvPhase::PENDING,
            CsvReason::NEEDS_CERT_ROTATION,
            "owned APIServices need cert refresh",
        );
        return;
    }
    if observation.install.deployments == DeploymentsCheck::ExpectedSpecInvalid {
        sync.set(
            CsvPhase::PENDING,
            CsvReason::NEEDS_REINSTALL,
            "calculated deployment install is bad",
        );
        return;
    }
    update_install_status(sync, CsvPhase::PENDING, CsvReason::NEEDS_REINSTALL);
}

fn replacing(sync: &mut SyncState<'_, '_>, group: &OperatorGroup) {
    let observation = sync.observation;
    let csv = observation.csv;
    // Only the oldest CSV of a chain acts; deleting an intermediate one would
    // break the chain.
    if replaced_by_this(csv, observation.namespace_csvs).is_some() {
        return;
    }
    let mut next = replacing_this(csv, observation.namespace_csvs);
    if let Some(start) = next
        && group.fail_forward_enabled()
    {
        match newest_in_chain(start, observation.namespace_csvs) {
            Ok(newest) => next = Some(newest),
            Err(err) => {
                sync.decision.retry = Some(err);
                return;
            }
        }
    }
    match next {
        Some(next)
            if csv_status::phase_of(&next.status.clone().unwrap_or_default())
                == CsvPhase::SUCCEEDED =>
        {
            sync.set(
                CsvPhase::DELETING,
                CsvReason::REPLACED,
                "has been replaced by a newer ClusterServiceVersion that has successfully installed.",
            );
        }
        Some(next) => {
            sync.requeue(
                next.metadata.name.clone().unwrap_or_default(),
                Some(WAIT_REQUEUE_AFTER),
            );
            sync.requeue_self(Some(WAIT_REQUEUE_AFTER));
        }
        None => sync.decision.retry = Some(Error::NoReplacementFound),
    }
}

/// Upstream's `updateInstallStatus`: true when every component is healthy
/// (and the CSV Succeeded); otherwise the status says what is awaited, with
/// `requeue_phase` and `requeue_reason` for the ordinary waits.
fn update_install_status(
    sync: &mut SyncState<'_, '_>,
    requeue_phase: CsvPhase,
    requeue_reason: CsvReason,
) -> bool {
    let check = &sync.observation.install;
    let deployments_ok = check.deployments == DeploymentsCheck::Healthy;
    let api_services_ok = check.api_services == ApiServicesCheck::Available;
    let webhooks_ok = check.webhooks == WebhooksCheck::Available;
    if deployments_ok && api_services_ok && webhooks_ok {
        sync.set_if_changed(
            CsvPhase::SUCCEEDED,
            CsvReason::INSTALL_SUCCEEDED,
            "install strategy completed with no errors",
        );
        return true;
    }

    if let DeploymentsCheck::Unhealthy(err) = &check.deployments
        && err.reason.is_unrecoverable()
    {
        sync.set_if_changed(
            CsvPhase::FAILED,
            CsvReason::INSTALL_CHECK_FAILED,
            &format!("install failed: {err}"),
        );
        sync.decision.retry = Some(Error::InstallCheck {
            message: err.message.clone(),
        });
        return false;
    }

    match &check.api_services {
        ApiServicesCheck::Retryable(_) => {
            sync.requeue_self(Some(API_SERVICE_RETRY_AFTER));
            return false;
        }
        ApiServicesCheck::Failed(message) => {
            sync.set_if_changed(
                CsvPhase::FAILED,
                CsvReason::API_SERVICE_INSTALL_FAILED,
                &format!("APIService install failed: {message}"),
            );
            return false;
        }
        ApiServicesCheck::NotAvailable => {
            sync.set_if_changed(requeue_phase, requeue_reason, "apiServices not installed");
            sync.requeue_self(Some(WAIT_REQUEUE_AFTER));
            return false;
        }
        ApiServicesCheck::Available => {}
    }

    match &check.webhooks {
        WebhooksCheck::Failed(message) => {
            sync.set_if_changed(
                CsvPhase::INSTALL_READY,
                requeue_reason,
                &format!("Webhook install failed: {message}"),
            );
            return false;
        }
        WebhooksCheck::NotAvailable => {
            sync.set_if_changed(requeue_phase, requeue_reason, "webhooks not installed");
            sync.requeue_self(Some(WAIT_REQUEUE_AFTER));
            return false;
        }
        WebhooksCheck::Available => {}
    }

    if let DeploymentsCheck::Unhealthy(err) = &check.deployments {
        let message = format!("installing: {err}");
        if err.reason.needs_reapply() {
            sync.set_if_changed(CsvPhase::INSTALL_READY, requeue_reason, &message);
        } else {
            sync.set_if_changed(requeue_phase, requeue_reason, &message);
        }
        sync.requeue_self(Some(WAIT_REQUEUE_AFTER));
    }
    false
}

/// After the status: RBAC in target namespaces and copies, for a CSV that is
/// an active member of a group that targets more than its own namespace.
fn follow_up(sync: &mut SyncState<'_, '_>) {
    let csv = sync.csv();
    let Some(group_name) = csv
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(labels::OPERATOR_GROUP))
    else {
        return;
    };
    let Some(group) = sync
        .observation
        .namespace_operator_groups
        .iter()
        .find(|g| g.metadata.name.as_ref() == Some(group_name))
    else {
        return;
    };
    if !is_active_member(csv, group) {
        return;
    }
    let targets = group
        .status
        .as_ref()
        .map(|s| s.namespaces.as_slice())
        .unwrap_or_default();
    if let [only] = targets
        && Some(only) == group.metadata.namespace.as_ref()
    {
        return;
    }
    sync.act(CsvAction::EnsureTargetNamespaceRbac);
    let mut after = csv.clone();
    after.status = Some(sync.status.clone());
    if !is_uncopiable(&after) {
        sync.act(CsvAction::SyncCopies);
    }
}

/// Certificates issued by a successful install.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IssuedCertificates {
    /// When they were issued.
    pub issued_at: Timestamp,
    /// When they are due for rotation.
    pub rotate_at: Timestamp,
}

/// How running the install strategy went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InstallOutcome {
    /// Everything was applied.
    Installed {
        /// Certificates issued on the way, if any.
        certificates: Option<IssuedCertificates>,
    },
    /// The API server refused a component (Forbidden); the message is the
    /// API error.
    Forbidden(String),
    /// Another error.
    Failed(String),
}

/// The phase after running the installer for a CSV in InstallReady.
///
/// Forbidden becomes `InstallComponentFailedNoRetry` with upstream's message,
/// which carries the "install strategy failed: " prefix twice (once from the
/// strategy error, once from the phase message).
pub fn after_install(
    csv: &ClusterServiceVersion,
    outcome: &InstallOutcome,
    now: Timestamp,
) -> CsvDecision {
    let observation = CsvObservation::new(csv, now);
    let mut sync = SyncState::new(&observation);
    match outcome {
        InstallOutcome::Forbidden(message) => sync.set(
            CsvPhase::FAILED,
            CsvReason::INSTALL_COMPONENT_FAILED_NO_RETRY,
            &format!("install strategy failed: install strategy failed: {message}"),
        ),
        InstallOutcome::Failed(message) => sync.set(
            CsvPhase::FAILED,
            CsvReason::INSTALL_COMPONENT_FAILED,
            &format!("install strategy failed: {message}"),
        ),
        InstallOutcome::Installed { certificates } => {
            if let Some(certificates) = certificates {
                sync.status.certs_last_updated =
                    Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                        csv_status::truncate_to_seconds(certificates.issued_at),
                    ));
                sync.status.certs_rotate_at =
                    Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                        csv_status::truncate_to_seconds(certificates.rotate_at),
                    ));
            }
            sync.set(
                CsvPhase::INSTALLING,
                CsvReason::INSTALL_SUCCEEDED,
                "waiting for install components to report healthy",
            );
            sync.requeue_self(None);
        }
    }
    sync.finish()
}

/// Moves a CSV that failed with `InstallComponentFailedNoRetry` back to
/// Pending because RBAC changed in its namespace (a Role, RoleBinding or
/// ServiceAccount event) or its group's service account reference changed.
/// Returns `None` for any other CSV.
pub fn detected_cluster_change(
    csv: &ClusterServiceVersion,
    now: Timestamp,
) -> Option<ClusterServiceVersionStatus> {
    let mut status = csv.status.clone().unwrap_or_default();
    if csv_status::reason_of(&status) != CsvReason::INSTALL_COMPONENT_FAILED_NO_RETRY {
        return None;
    }
    csv_status::set_phase(
        &mut status,
        CsvPhase::PENDING,
        CsvReason::DETECTED_CLUSTER_CHANGE,
        "Cluster resources changed state",
        now,
    );
    Some(status)
}
