//! The minimal form of every status OLM writes (ARCHITECTURE rule 4): what
//! a controller writes instead when the API server refuses a status as
//! invalid (an older CRD, after a rollback, refusing a newer value; a
//! message past a length limit), so the object never stays without status
//! and the controller never wedges on it.
//!
//! One rule for every kind: keep what the next reconcile and OLM's clients
//! act on (phases, states, references, the plan, condition types, statuses
//! and reasons), and drop free text and history (condition messages,
//! requirement and health lists). The CSV keeps its phase's message, which
//! `kubectl get csv` shows, and drops its conditions, which are history.
//!
//! `olm_runtime::apply::write_status` writes a status and falls back to its
//! minimal form; this module holds only the data rule.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use crate::{
    catalog_source::CatalogSourceStatus, csv::ClusterServiceVersionStatus,
    install_plan::InstallPlanStatus, olm_config::OLMConfigStatus, operator::OperatorStatus,
    operator_condition::OperatorConditionStatus, operator_group::OperatorGroupStatus,
    operator_hub::OperatorHubStatus, samples::ConfigStatus, subscription::SubscriptionStatus,
};

/// A status with a minimal form to write when the full one is refused.
pub trait MinimalStatus: Sized {
    /// This status without what an older schema may refuse. Applying it to
    /// its own result changes nothing.
    fn minimal(&self) -> Self;
}

/// `conditions` with their messages blanked (a metav1 Condition requires
/// the field; empty is allowed).
fn without_messages(conditions: &[Condition]) -> Vec<Condition> {
    conditions
        .iter()
        .map(|condition| Condition {
            message: String::new(),
            ..condition.clone()
        })
        .collect()
}

impl MinimalStatus for ClusterServiceVersionStatus {
    fn minimal(&self) -> Self {
        Self {
            phase: self.phase.clone(),
            reason: self.reason.clone(),
            message: self.message.clone(),
            last_update_time: self.last_update_time.clone(),
            last_transition_time: self.last_transition_time.clone(),
            ..Self::default()
        }
    }
}

impl MinimalStatus for CatalogSourceStatus {
    fn minimal(&self) -> Self {
        Self {
            message: None,
            conditions: without_messages(&self.conditions),
            ..self.clone()
        }
    }
}

impl MinimalStatus for SubscriptionStatus {
    fn minimal(&self) -> Self {
        let mut minimal = Self {
            catalog_health: Vec::new(),
            ..self.clone()
        };
        for condition in &mut minimal.conditions {
            condition.message = None;
        }
        minimal
    }
}

impl MinimalStatus for InstallPlanStatus {
    fn minimal(&self) -> Self {
        let mut minimal = Self {
            message: None,
            ..self.clone()
        };
        for condition in &mut minimal.conditions {
            condition.message = None;
        }
        for lookup in &mut minimal.bundle_lookups {
            for condition in &mut lookup.conditions {
                condition.message = None;
            }
        }
        minimal
    }
}

impl MinimalStatus for OperatorGroupStatus {
    fn minimal(&self) -> Self {
        Self {
            conditions: without_messages(&self.conditions),
            ..self.clone()
        }
    }
}

impl MinimalStatus for OperatorConditionStatus {
    fn minimal(&self) -> Self {
        Self {
            conditions: without_messages(&self.conditions),
        }
    }
}

impl MinimalStatus for OLMConfigStatus {
    fn minimal(&self) -> Self {
        Self {
            conditions: without_messages(&self.conditions),
        }
    }
}

impl MinimalStatus for OperatorStatus {
    fn minimal(&self) -> Self {
        let mut minimal = self.clone();
        for reference in minimal
            .components
            .iter_mut()
            .flat_map(|c| c.refs.iter_mut())
        {
            for condition in &mut reference.conditions {
                condition.message = None;
            }
        }
        minimal
    }
}

impl MinimalStatus for OperatorHubStatus {
    fn minimal(&self) -> Self {
        let mut minimal = self.clone();
        for source in &mut minimal.sources {
            source.message = None;
        }
        for component in &mut minimal.components {
            for condition in &mut component.conditions {
                condition.message = None;
            }
        }
        minimal
    }
}

impl MinimalStatus for ConfigStatus {
    fn minimal(&self) -> Self {
        let mut minimal = self.clone();
        for condition in &mut minimal.conditions {
            condition.message = None;
        }
        minimal
    }
}

#[cfg(test)]
mod tests {
    use serde::{Serialize, de::DeserializeOwned};
    use serde_json::{Value, json};

    use super::*;

    const TIME: &str = "2026-11-27T00:00:00Z";

    fn condition(type_: &str) -> Value {
        json!({"type": type_, "status": "True", "reason": "Sample",
            "message": "a long sample message", "lastTransitionTime": TIME})
    }

    /// Every non-empty `message` in `value`, with its path.
    fn messages(value: &Value, path: &str, found: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (key, child) in map {
                    if key == "message" && child.as_str().is_some_and(|m| !m.is_empty()) {
                        found.push(format!("{path}.message"));
                    }
                    messages(child, &format!("{path}.{key}"), found);
                }
            }
            Value::Array(items) => {
                for (index, child) in items.iter().enumerate() {
                    messages(child, &format!("{path}[{index}]"), found);
                }
            }
            _ => {}
        }
    }

    /// The minimal form of the status `full` reads as: its messages left,
    /// and its JSON.
    fn check<S>(full: Value) -> (Vec<String>, Value)
    where
        S: MinimalStatus + Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
    {
        let status: S = serde_json::from_value(full.clone()).expect("fixture parses");
        let minimal = status.minimal();
        assert_eq!(minimal.minimal(), minimal, "minimal is idempotent");
        let mut full_messages = Vec::new();
        messages(&full, "status", &mut full_messages);
        assert!(!full_messages.is_empty(), "the fixture has messages");
        let value = serde_json::to_value(&minimal).expect("serialises");
        let mut left = Vec::new();
        messages(&value, "status", &mut left);
        (left, value)
    }

    #[test]
    fn the_csv_keeps_its_phase_and_message_and_drops_history() {
        let (left, value) = check::<ClusterServiceVersionStatus>(json!({
            "phase": "Failed", "reason": "InstallCheckFailed", "message": "install timeout",
            "lastUpdateTime": TIME, "lastTransitionTime": TIME,
            "conditions": [{"phase": "Pending", "reason": "RequirementsUnknown",
                "message": "requirements not yet checked", "lastUpdateTime": TIME,
                "lastTransitionTime": TIME}],
            "requirementStatus": [{"group": "", "version": "v1", "kind": "ServiceAccount",
                "name": "sample", "status": "Present", "message": "Service account present"}],
        }));
        assert_eq!(left, ["status.message"]);
        assert_eq!(value["phase"], "Failed");
        assert_eq!(value["reason"], "InstallCheckFailed");
        assert!(value.get("conditions").is_none(), "{value}");
        assert!(value.get("requirementStatus").is_none(), "{value}");
    }

    #[test]
    fn a_catalog_keeps_its_connection_and_registry() {
        let (left, value) = check::<CatalogSourceStatus>(json!({
            "message": "sample message", "reason": "SampleReason",
            "registryService": {"protocol": "grpc", "serviceName": "sample",
                "serviceNamespace": "olm", "port": "50051"},
            "connectionState": {"address": "sample.olm.svc:50051",
                "lastObservedState": "READY", "lastConnect": TIME},
            "conditions": [condition("Sample")],
        }));
        assert!(left.is_empty(), "{left:?}");
        assert_eq!(value["reason"], "SampleReason");
        assert_eq!(value["registryService"]["serviceName"], "sample");
        assert_eq!(value["connectionState"]["lastObservedState"], "READY");
        assert_eq!(value["conditions"][0]["reason"], "Sample");
    }

    #[test]
    fn a_subscription_keeps_its_state_and_references() {
        let (left, value) = check::<SubscriptionStatus>(json!({
            "currentCSV": "sample.v2", "installedCSV": "sample.v1", "state": "UpgradePending",
            "installPlanRef": {"kind": "InstallPlan", "name": "install-sample",
                "namespace": "sample"},
            "catalogHealth": [{"catalogSourceRef": {"name": "sample"}, "healthy": true,
                "lastUpdated": TIME}],
            "conditions": [{"type": "InstallPlanPending", "status": "True",
                "reason": "Installing", "message": "sample message"}],
            "lastUpdated": TIME,
        }));
        assert!(left.is_empty(), "{left:?}");
        assert_eq!(value["state"], "UpgradePending");
        assert_eq!(value["currentCSV"], "sample.v2");
        assert_eq!(value["installPlanRef"]["name"], "install-sample");
        assert_eq!(value["conditions"][0]["reason"], "Installing");
        assert!(value.get("catalogHealth").is_none(), "{value}");
    }

    #[test]
    fn an_install_plan_keeps_its_phase_and_plan() {
        let (left, value) = check::<InstallPlanStatus>(json!({
            "phase": "Installing", "message": "sample message", "catalogSources": ["sample"],
            "conditions": [{"type": "Installed", "status": "False", "reason": "InstallComponentFailed",
                "message": "sample message"}],
            "plan": [{"resolving": "sample.v1", "status": "Created",
                "resource": {"group": "", "version": "v1", "kind": "ServiceAccount",
                    "name": "sample", "sourceName": "sample", "sourceNamespace": "olm"}}],
            "bundleLookups": [{"path": "quay.io/sample/bundle:v1", "identifier": "sample.v1",
                "replaces": "", "catalogSourceRef": {"name": "sample", "namespace": "olm"},
                "conditions": [{"type": "BundleLookupPending", "status": "True",
                    "reason": "JobIncomplete", "message": "unpack job not completed"}]}],
        }));
        assert!(left.is_empty(), "{left:?}");
        assert_eq!(value["phase"], "Installing");
        assert_eq!(value["plan"][0]["status"], "Created");
        assert_eq!(
            value["bundleLookups"][0]["conditions"][0]["reason"],
            "JobIncomplete"
        );
    }

    #[test]
    fn kinds_whose_status_is_conditions_keep_them_without_messages() {
        for (left, value) in [
            check::<OperatorGroupStatus>(json!({"namespaces": ["sample"], "lastUpdated": TIME,
                "conditions": [condition("Sample")]})),
            check::<OperatorConditionStatus>(json!({"conditions": [condition("Upgradeable")]})),
            check::<OLMConfigStatus>(json!({"conditions": [condition("DisabledCopiedCSVs")]})),
        ] {
            assert!(left.is_empty(), "{left:?}");
            assert_eq!(value["conditions"][0]["status"], "True", "{value}");
            assert_eq!(value["conditions"][0]["reason"], "Sample", "{value}");
        }
    }

    #[test]
    fn operators_hubs_and_samples_keep_their_entries() {
        let (left, value) = check::<OperatorStatus>(json!({"components": {
            "labelSelector": {"matchExpressions": [{"key": "operators.coreos.com/sample.ns",
                "operator": "Exists"}]},
            "refs": [{"kind": "ClusterServiceVersion", "name": "sample.v1",
                "conditions": [{"type": "Succeeded", "status": "True",
                    "reason": "InstallSucceeded", "message": "install strategy completed"}]}]}}));
        assert!(left.is_empty(), "{left:?}");
        assert_eq!(value["components"]["refs"][0]["name"], "sample.v1");
        let (left, value) = check::<OperatorHubStatus>(json!({
            "sources": [{"name": "sample", "disabled": false, "status": "Error",
                "message": "sample message"}],
            "components": [{"name": "olm", "conditions": [{"type": "Available",
                "status": "True", "lastTransitionTime": TIME, "message": "sample"}]}]}));
        assert!(left.is_empty(), "{left:?}");
        assert_eq!(value["sources"][0]["status"], "Error");
        let (left, value) = check::<ConfigStatus>(json!({"managementState": "Managed",
            "conditions": [{"type": "ImportCredentialsExist", "status": "True",
                "reason": "Sample", "message": "sample message"}]}));
        assert!(left.is_empty(), "{left:?}");
        assert_eq!(value["managementState"], "Managed");
    }
}
