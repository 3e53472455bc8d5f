//! The status an OpenShift ClusterOperator (`config.openshift.io/v1`)
//! reports, the part OLM's components write: conditions, versions and
//! related objects. marketplace-operator writes it into its ClusterOperators
//! where the cluster serves that API, and into the OperatorHub's
//! `status.components` (ours) elsewhere; samples-operator writes it into the
//! ClusterOperator `openshift-samples`. We do not ship the ClusterOperator
//! CRD: OpenShift does.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::conditions::StatusCondition;

/// One condition (`ClusterOperatorStatusCondition`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterOperatorCondition {
    /// `Available`, `Progressing`, `Degraded`, `Upgradeable`, ...
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// When `status` last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// Why, in CamelCase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Why, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl ClusterOperatorCondition {
    /// A condition with no transition time yet. An empty `reason` or
    /// `message` is left out, as upstream leaves it out (`omitempty`), so
    /// that the condition compares equal to what is read back.
    pub fn new(type_: &str, status: &str, reason: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        Self {
            type_: type_.to_owned(),
            status: status.to_owned(),
            last_transition_time: None,
            reason: (!reason.is_empty()).then(|| reason.to_owned()),
            message: (!message.is_empty()).then_some(message),
        }
    }
}

impl StatusCondition for ClusterOperatorCondition {
    fn condition_type(&self) -> &str {
        &self.type_
    }

    fn condition_status(&self) -> &str {
        &self.status
    }

    fn last_transition_time(&self) -> Option<Timestamp> {
        self.last_transition_time.as_ref().map(|time| time.0)
    }

    fn set_last_transition_time(&mut self, at: Timestamp) {
        self.last_transition_time = Some(Time(at));
    }

    fn clear_timestamps(&mut self) {
        self.last_transition_time = None;
    }
}

/// One entry of `status.versions` (`OperandVersion`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OperandVersion {
    /// `operator` for the operator itself.
    pub name: String,
    /// The version it has rolled out.
    pub version: String,
}

/// The part of a ClusterOperator's `status` OLM owns.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ClusterOperatorStatus {
    /// The conditions.
    #[serde(default)]
    pub conditions: Vec<ClusterOperatorCondition>,
    /// The versions rolled out.
    #[serde(default)]
    pub versions: Vec<OperandVersion>,
    /// The objects `oc adm inspect` should collect for this operator.
    #[serde(
        default,
        rename = "relatedObjects",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub related_objects: Vec<RelatedObject>,
}

/// One entry of `status.relatedObjects` (`ObjectReference` of config/v1).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RelatedObject {
    /// The API group, empty for the core group.
    pub group: String,
    /// The resource (plural), e.g. `namespaces`.
    pub resource: String,
    /// The namespace, empty for cluster-scoped objects.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// The name.
    pub name: String,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn an_empty_reason_or_message_is_left_out_as_upstream_does() {
        let bare = ClusterOperatorCondition::new("Degraded", "False", "", "");
        assert_eq!((bare.reason, bare.message), (None, None));
        let written = serde_json::to_value(ClusterOperatorCondition::new(
            "Available",
            "True",
            "FixtureReason",
            "fixture message",
        ))
        .unwrap();
        assert_eq!(
            written,
            serde_json::json!({
                "type": "Available",
                "status": "True",
                "reason": "FixtureReason",
                "message": "fixture message",
            })
        );
        let read: ClusterOperatorCondition =
            serde_json::from_value(serde_json::json!({"type": "Degraded", "status": "False"}))
                .unwrap();
        assert_eq!(
            read,
            ClusterOperatorCondition::new("Degraded", "False", "", String::new())
        );
    }
}
