//! OperatorConditions: the one every CSV gets, the RBAC that lets the
//! operator update it, its `spec.conditions` mirrored into status, and
//! upgrade gating (whether the operator a new CSV replaces allows being
//! upgraded now).
//!
//! Upstream: `operatorconditiongenerator_controller.go` and
//! `operatorcondition_controller.go` in `pkg/controller/operators`.
//!
//! Upstream: `isOperatorUpgradeable` in
//! `pkg/controller/operators/olm/operatorconditions.go`. The check runs against
//! the OperatorCondition of the *replaced* CSV (same name and namespace) while
//! the new CSV is Pending; a block keeps the new CSV Pending with reason
//! `OperatorConditionNotUpgradeable`. Resolution and InstallPlans are not
//! affected.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject},
    apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, OwnerReference},
};
use olm_api::{
    conditions::{self, StatusCondition},
    csv::ClusterServiceVersion,
    labels,
    operator_condition::{OperatorCondition, OperatorConditionSpec, UPGRADEABLE},
};

use olm_api::ownership::non_blocking_owner;

/// Why the operator may not be upgraded; the text is upstream's error and
/// becomes part of the CSV message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotUpgradeable(pub String);

/// Whether the operator owning `condition` may be upgraded.
///
/// - No OperatorCondition: upgradeable.
/// - An `Upgradeable` entry in `spec.overrides` decides: `True` allows,
///   anything else blocks with `the operator is not upgradeable: <message>`.
/// - Otherwise the `Upgradeable` entry in `status.conditions`: written for an
///   older generation of the OperatorCondition blocks (`the operatorcondition
///   status "Upgradeable"="<status>" is outdated`); `False` blocks with its
///   message; anything else (or no entry) allows.
pub fn upgradeable(condition: Option<&OperatorCondition>) -> Result<(), NotUpgradeable> {
    let Some(condition) = condition else {
        return Ok(());
    };
    if let Some(override_) = conditions::find(&condition.spec.overrides, UPGRADEABLE) {
        if override_.condition_status() == conditions::TRUE {
            return Ok(());
        }
        return Err(NotUpgradeable(format!(
            "the operator is not upgradeable: {}",
            override_.message
        )));
    }
    let reported = condition
        .status
        .as_ref()
        .and_then(|status| conditions::find(&status.conditions, UPGRADEABLE));
    if let Some(reported) = reported {
        let generation = condition.metadata.generation.unwrap_or(0);
        if reported.observed_generation.unwrap_or(0) != generation {
            return Err(NotUpgradeable(format!(
                "the operatorcondition status {:?}={:?} is outdated",
                reported.type_, reported.status
            )));
        }
        if reported.status == conditions::FALSE {
            return Err(NotUpgradeable(format!(
                "the operator is not upgradeable: {}",
                reported.message
            )));
        }
    }
    Ok(())
}

/// The CSV message for a blocked upgrade. Upstream wraps the error once more,
/// so the text reads `operator is not upgradeable: the operator is not
/// upgradeable: <message>`; we keep it byte for byte.
pub fn not_upgradeable_message(blocked: &NotUpgradeable) -> String {
    format!("operator is not upgradeable: {blocked}")
}

/// The OperatorCondition every (non-copied) CSV gets, as upstream's
/// generator builds it: same name and namespace, the CSV as controller
/// owner, `spec.serviceAccounts` from `clusterPermissions` then
/// `permissions` (in that order, as upstream; `["default"]` when there are
/// none) and `spec.deployments` from the strategy. Only these fields are
/// OLM's; `spec.conditions` belongs to the operator and `spec.overrides` to
/// administrators.
pub fn desired_operator_condition(csv: &ClusterServiceVersion) -> OperatorCondition {
    let strategy = &csv.spec.install.spec;
    let mut service_accounts: Vec<String> = strategy
        .cluster_permissions
        .iter()
        .flatten()
        .chain(strategy.permissions.iter().flatten())
        .map(|p| p.service_account_name.clone())
        .filter(|name| !name.is_empty())
        .collect();
    if service_accounts.is_empty() {
        service_accounts.push(DEFAULT_SERVICE_ACCOUNT.to_owned());
    }
    let deployments = strategy
        .deployments
        .iter()
        .map(|d| d.name.clone())
        .filter(|name| !name.is_empty())
        .collect();
    let mut owner = non_blocking_owner(csv);
    owner.controller = Some(true);
    OperatorCondition {
        metadata: ObjectMeta {
            name: csv.metadata.name.clone(),
            namespace: csv.metadata.namespace.clone(),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        spec: OperatorConditionSpec {
            service_accounts,
            deployments,
            ..Default::default()
        },
        status: None,
    }
}

/// The ServiceAccount named when a CSV lists none.
pub const DEFAULT_SERVICE_ACCOUNT: &str = "default";

/// Whether the existing OperatorCondition must be written: its owners,
/// service accounts or deployments differ from the desired ones (upstream's
/// check).
pub fn operator_condition_needs_write(
    existing: Option<&OperatorCondition>,
    desired: &OperatorCondition,
) -> bool {
    let Some(existing) = existing else {
        return true;
    };
    existing.metadata.owner_references != desired.metadata.owner_references
        || existing.spec.service_accounts != desired.spec.service_accounts
        || existing.spec.deployments != desired.spec.deployments
}

fn condition_owner(condition: &OperatorCondition) -> OwnerReference {
    OwnerReference {
        api_version: "operators.coreos.com/v2".to_owned(),
        kind: "OperatorCondition".to_owned(),
        name: condition.metadata.name.clone().unwrap_or_default(),
        uid: condition.metadata.uid.clone().unwrap_or_default(),
        block_owner_deletion: Some(false),
        controller: Some(true),
    }
}

/// The Role and RoleBinding that let the operator's service accounts read
/// and update their OperatorCondition: both named after it, labelled
/// `olm.managed=true`, owned by it; the Role allows get/update/patch on
/// `operatorconditions` with `resourceNames: [<name>]`, the binding names
/// each service account of `spec.serviceAccounts` (without a namespace, as
/// upstream: a RoleBinding's ServiceAccount subject defaults to its own
/// namespace).
pub fn operator_condition_rbac(condition: &OperatorCondition) -> (Role, RoleBinding) {
    let name = condition.metadata.name.clone().unwrap_or_default();
    let meta = ObjectMeta {
        name: Some(name.clone()),
        namespace: condition.metadata.namespace.clone(),
        labels: Some(BTreeMap::from([(
            labels::MANAGED.to_owned(),
            labels::MANAGED_VALUE.to_owned(),
        )])),
        owner_references: Some(vec![condition_owner(condition)]),
        ..Default::default()
    };
    let role = Role {
        metadata: meta.clone(),
        rules: Some(vec![PolicyRule {
            verbs: ["get", "update", "patch"].map(str::to_owned).to_vec(),
            api_groups: Some(vec!["operators.coreos.com".to_owned()]),
            resources: Some(vec!["operatorconditions".to_owned()]),
            resource_names: Some(vec![name.clone()]),
            ..Default::default()
        }]),
    };
    let binding = RoleBinding {
        metadata: meta,
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".to_owned(),
            kind: "Role".to_owned(),
            name,
        },
        subjects: Some(
            condition
                .spec
                .service_accounts
                .iter()
                .map(|account| Subject {
                    kind: "ServiceAccount".to_owned(),
                    name: account.clone(),
                    api_group: None,
                    namespace: None,
                })
                .collect(),
        ),
    };
    (role, binding)
}

/// Whether an existing Role or RoleBinding of an OperatorCondition must be
/// written: missing, not owned by the condition, or its content differs.
pub fn condition_role_needs_write(existing: Option<&Role>, desired: &Role) -> bool {
    existing.is_none_or(|existing| {
        existing.rules != desired.rules || !same_owner(&existing.metadata, &desired.metadata)
    })
}

/// As [`condition_role_needs_write`], for the RoleBinding.
pub fn condition_binding_needs_write(
    existing: Option<&RoleBinding>,
    desired: &RoleBinding,
) -> bool {
    existing.is_none_or(|existing| {
        existing.role_ref != desired.role_ref
            || normalized_subjects(existing) != normalized_subjects(desired)
            || !same_owner(&existing.metadata, &desired.metadata)
    })
}

fn normalized_subjects(binding: &RoleBinding) -> Vec<(String, String)> {
    binding
        .subjects
        .iter()
        .flatten()
        .map(|s| (s.kind.clone(), s.name.clone()))
        .collect()
}

fn same_owner(existing: &ObjectMeta, desired: &ObjectMeta) -> bool {
    desired.owner_references.iter().flatten().all(|want| {
        existing
            .owner_references
            .iter()
            .flatten()
            .any(|have| have.uid == want.uid)
    })
}

/// The `status.conditions` an OperatorCondition should have, or `None` when
/// they are up to date (upstream's `syncOperatorConditionStatus`): each
/// `spec.conditions` entry is copied with `observedGeneration` set to the
/// object's generation unless an entry of that type with the same status
/// and generation is already there; `lastTransitionTime` is kept when the
/// status did not change (`meta.SetStatusCondition`).
pub fn synced_status_conditions(condition: &OperatorCondition) -> Option<Vec<Condition>> {
    let generation = condition.metadata.generation.unwrap_or(0);
    let mut status = condition
        .status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    let mut changed = false;
    for wanted in &condition.spec.conditions {
        let current = status.iter_mut().find(|c| c.type_ == wanted.type_);
        match current {
            Some(current)
                if current.status == wanted.status
                    && current.observed_generation == Some(generation) =>
            {
                continue;
            }
            Some(current) => {
                if current.status != wanted.status {
                    current.last_transition_time = wanted.last_transition_time.clone();
                }
                current.status = wanted.status.clone();
                current.reason = wanted.reason.clone();
                current.message = wanted.message.clone();
                current.observed_generation = Some(generation);
            }
            None => {
                let mut added = wanted.clone();
                added.observed_generation = Some(generation);
                status.push(added);
            }
        }
        changed = true;
    }
    changed.then_some(status)
}
