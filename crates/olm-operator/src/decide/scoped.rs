//! Scoped installs and the OperatorGroup bookkeeping that goes with them:
//! `spec.serviceAccountName` (`status.serviceAccountRef`, the
//! `OperatorGroupServiceAccount` condition, the identity a CSV is installed
//! with), the `MultipleOperatorGroup` condition, and the
//! `olm.operatorgroup.uid/<uid>` labels on target namespaces.
//!
//! Upstream: `pkg/lib/scoped` (`UserDefinedServiceAccountSyncer`,
//! `queryServiceAccountFromNamespace`), `syncOperatorGroups` and
//! `syncNamespace` in `pkg/controller/operators/olm/operatorgroup.go` and
//! `operator.go`.
//!
//! Upstream authenticates as the ServiceAccount with its token; this service
//! impersonates it instead ([`impersonation`]), which needs no token Secret
//! and no TokenRequest, and grants the operator exactly what the account may
//! do. Deliberate differences, each a fix:
//!
//! - Removing `serviceAccountName` while the account was missing leaves
//!   upstream's `ServiceAccountNotFound` condition in place for good; here it
//!   goes with the field.
//! - Upstream compares the old and new `serviceAccountRef` by pointer, so
//!   every OperatorGroup sync counts as a change and retries the group's
//!   forbidden installs; here only a real change does
//!   ([`GroupStatusUpdate::service_account_ref_changed`]), and RBAC changes
//!   retry them (see `controller::scoped`).

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::{api::core::v1::ObjectReference, apimachinery::pkg::apis::meta::v1::Condition};
pub use olm_api::install_identity::{
    IdentityUnavailable, impersonation, install_service_account, requested_service_account,
    service_account_reference,
};
use olm_api::{
    conditions,
    labels::{OPERATOR_GROUP_UID_PREFIX, operator_group_uid_label},
    operator_group::{OperatorGroup, OperatorGroupConditionReason, OperatorGroupConditionType},
};

/// Message of the `MultipleOperatorGroup` condition.
pub const MULTIPLE_OPERATOR_GROUPS_MESSAGE: &str =
    "Multiple OperatorGroup found in the same namespace";

/// Message of the `OperatorGroupServiceAccount` condition.
pub fn service_account_not_found_message(name: &str) -> String {
    format!("ServiceAccount {name} not found")
}

/// What a lookup of the group's ServiceAccount found.
#[derive(Clone, Debug, PartialEq)]
pub enum ServiceAccountLookup {
    /// The group names no ServiceAccount.
    NotRequested,
    /// It names one that does not exist.
    NotFound,
    /// It exists; upstream's `reference.GetReference` of it.
    Found(ObjectReference),
}

/// The status fields of an OperatorGroup this module owns, as they should be.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupStatusUpdate {
    /// `status.serviceAccountRef`.
    pub service_account_ref: Option<ObjectReference>,
    /// `status.conditions`.
    pub conditions: Vec<Condition>,
    /// Whether either differs from the observed status.
    pub changed: bool,
    /// Whether `serviceAccountRef` itself changed (upstream then moves the
    /// group's CSVs that failed with `InstallComponentFailedNoRetry` back to
    /// Pending).
    pub service_account_ref_changed: bool,
}

/// The group's `serviceAccountRef` and conditions after one sync.
///
/// - More than one group in the namespace: `MultipleOperatorGroup`=True
///   `MultipleOperatorGroupsFound`; back to one: the condition is removed.
/// - No `serviceAccountName`: no reference, no `OperatorGroupServiceAccount`.
/// - Named but missing: `OperatorGroupServiceAccount`=True
///   `ServiceAccountNotFound` "ServiceAccount <name> not found", no reference.
/// - Found: the reference, the condition removed.
pub fn group_status_update(
    group: &OperatorGroup,
    groups_in_namespace: usize,
    lookup: &ServiceAccountLookup,
    now: Timestamp,
) -> GroupStatusUpdate {
    let status = group.status.clone().unwrap_or_default();
    let mut conditions = status.conditions.clone();
    let multiple = OperatorGroupConditionType::MULTIPLE_OPERATOR_GROUP.as_str();
    if groups_in_namespace > 1 {
        conditions::set(
            &mut conditions,
            conditions::metav1(
                multiple,
                conditions::TRUE,
                OperatorGroupConditionReason::MULTIPLE_OPERATOR_GROUPS_FOUND.as_str(),
                MULTIPLE_OPERATOR_GROUPS_MESSAGE,
                None,
            ),
            now,
        );
    } else {
        conditions::remove(&mut conditions, multiple);
    }

    let account = OperatorGroupConditionType::SERVICE_ACCOUNT.as_str();
    let service_account_ref = match lookup {
        ServiceAccountLookup::NotRequested => {
            conditions::remove(&mut conditions, account);
            None
        }
        ServiceAccountLookup::NotFound => {
            let name = requested_service_account(group).unwrap_or_default();
            conditions::set(
                &mut conditions,
                conditions::metav1(
                    account,
                    conditions::TRUE,
                    OperatorGroupConditionReason::SERVICE_ACCOUNT_NOT_FOUND.as_str(),
                    &service_account_not_found_message(name),
                    None,
                ),
                now,
            );
            None
        }
        ServiceAccountLookup::Found(reference) => {
            conditions::remove(&mut conditions, account);
            Some(reference.clone())
        }
    };
    let service_account_ref_changed = service_account_ref != status.service_account_ref;
    GroupStatusUpdate {
        changed: service_account_ref_changed || conditions != status.conditions,
        service_account_ref,
        conditions,
        service_account_ref_changed,
    }
}

/// The `olm.operatorgroup.uid/<uid>: ""` labels `namespace` should carry:
/// one per group (among `groups`) that targets it without targeting all
/// namespaces.
pub fn namespace_group_labels(
    namespace: &str,
    groups: &[OperatorGroup],
) -> BTreeMap<String, String> {
    groups
        .iter()
        .filter(|g| g.metadata.deletion_timestamp.is_none())
        .filter_map(|g| {
            let targets = &g.status.as_ref()?.namespaces;
            let all = targets.iter().any(String::is_empty);
            let uid = g.metadata.uid.as_deref().filter(|u| !u.is_empty())?;
            (!all && targets.iter().any(|t| t == namespace))
                .then(|| (operator_group_uid_label(uid), String::new()))
        })
        .collect()
}

/// The label changes that bring a namespace's group labels to `desired`, as
/// a merge patch body for `metadata.labels` (`None` removes a label), or
/// `None` when nothing changes. A group label of a group not in
/// `known_uids` is removed only when `all_groups_known` (this service sees
/// every OperatorGroup of the cluster); otherwise it may belong to a group
/// another instance manages.
pub fn namespace_label_patch(
    current: Option<&BTreeMap<String, String>>,
    desired: &BTreeMap<String, String>,
    known_uids: &[&str],
    all_groups_known: bool,
) -> Option<BTreeMap<String, Option<String>>> {
    let mut patch = BTreeMap::new();
    for (key, value) in current.into_iter().flatten() {
        let Some(uid) = key.strip_prefix(OPERATOR_GROUP_UID_PREFIX) else {
            continue;
        };
        match desired.get(key) {
            Some(wanted) if wanted == value => {}
            Some(wanted) => {
                patch.insert(key.clone(), Some(wanted.clone()));
            }
            None if all_groups_known || known_uids.contains(&uid) => {
                patch.insert(key.clone(), None);
            }
            None => {}
        }
    }
    for (key, value) in desired {
        if current.is_none_or(|c| !c.contains_key(key)) {
            patch.insert(key.clone(), Some(value.clone()));
        }
    }
    (!patch.is_empty()).then_some(patch)
}
