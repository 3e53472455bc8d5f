//! Upgrade gating through OperatorConditions: whether the operator a new CSV
//! replaces allows being upgraded now.
//!
//! Upstream: `isOperatorUpgradeable` in
//! `pkg/controller/operators/olm/operatorconditions.go`. The check runs against
//! the OperatorCondition of the *replaced* CSV (same name and namespace) while
//! the new CSV is Pending; a block keeps the new CSV Pending with reason
//! `OperatorConditionNotUpgradeable`. Resolution and InstallPlans are not
//! affected.

use olm_api::{
    conditions::{self, StatusCondition},
    operator_condition::{OperatorCondition, UPGRADEABLE},
};

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
