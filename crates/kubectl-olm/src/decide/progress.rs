//! Where an install or upgrade stands, read from the objects OLM's services
//! hand it through: the Subscription (resolution), its InstallPlan
//! (approval, unpacking, applying) and the CSV it leads to (installing,
//! Succeeded or Failed). `install --wait` and `upgrade --wait` print each
//! new stage and stop on the last.

use olm_api::{
    csv::{ClusterServiceVersion, CsvPhase},
    install_plan::{InstallPlan, InstallPlanPhase},
    subscription::{
        Approval, Subscription, SubscriptionConditionReason, SubscriptionConditionType,
    },
};

/// One stage of an install.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stage {
    /// catalog-operator has not planned the install yet; the note says why,
    /// when the Subscription says (a catalog not ready, say).
    Resolving { note: Option<String> },
    /// The InstallPlan waits for `kubectl olm approve`.
    WaitingForApproval { plan: String, csvs: Vec<String> },
    /// bundle-unpacker is pulling the bundle.
    Unpacking { plan: String },
    /// catalog-operator is applying the plan's steps.
    Applying { plan: String },
    /// olm-operator is installing the CSV (its phase).
    Installing { csv: String, phase: String },
    /// Done.
    Succeeded { csv: String },
    /// Stopped for good: the object to look at and why.
    Failed {
        object: String,
        cause: String,
        unresolvable: bool,
    },
}

impl Stage {
    /// A short line for people.
    pub(crate) fn line(&self) -> String {
        match self {
            Self::Resolving { note: None } => "resolving".to_owned(),
            Self::Resolving { note: Some(note) } => format!("resolving ({note})"),
            Self::WaitingForApproval { plan, csvs } => format!(
                "waiting for approval of InstallPlan {plan} ({}): run `kubectl olm approve {plan}`",
                csvs.join(", ")
            ),
            Self::Unpacking { plan } => format!("unpacking the bundle (InstallPlan {plan})"),
            Self::Applying { plan } => format!("applying InstallPlan {plan}"),
            Self::Installing { csv, phase } => format!("installing {csv} ({phase})"),
            Self::Succeeded { csv } => format!("succeeded: {csv}"),
            Self::Failed { object, cause, .. } => format!("failed: {object}: {cause}"),
        }
    }

    /// Whether waiting is over.
    pub(crate) fn is_final(&self) -> bool {
        matches!(self, Self::Succeeded { .. } | Self::Failed { .. })
    }
}

/// What [`stage`] reads.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Observed<'a> {
    /// The Subscription.
    pub subscription: &'a Subscription,
    /// The InstallPlan its status references, if any.
    pub plan: Option<&'a InstallPlan>,
    /// The CSV named by its `status.currentCSV`, if it exists.
    pub csv: Option<&'a ClusterServiceVersion>,
    /// The CSV the install started from (`status.installedCSV` before an
    /// upgrade): its success is not the end of an upgrade.
    pub from_csv: Option<&'a str>,
}

/// The stage the objects show.
pub(crate) fn stage(observed: Observed<'_>) -> Stage {
    let subscription = observed.subscription;
    let namespace = subscription
        .metadata
        .namespace
        .as_deref()
        .unwrap_or_default();
    let status = subscription.status.clone().unwrap_or_default();
    let resolution = status
        .conditions
        .iter()
        .find(|c| c.type_ == SubscriptionConditionType::RESOLUTION_FAILED && c.status == "True");
    if let Some(failed) = resolution
        && failed.reason.as_ref() == Some(&SubscriptionConditionReason::CONSTRAINTS_NOT_SATISFIABLE)
    {
        return Stage::Failed {
            object: format!(
                "Subscription {namespace}/{}",
                subscription.metadata.name.as_deref().unwrap_or_default()
            ),
            cause: failed.message.clone().unwrap_or_default(),
            unresolvable: true,
        };
    }

    let current = status.current_csv.as_deref().filter(|c| !c.is_empty());
    if let (Some(csv), Some(name)) = (observed.csv, current)
        && Some(name) != observed.from_csv
    {
        let csv_status = csv.status.clone().unwrap_or_default();
        let phase = csv_status.phase.unwrap_or_default();
        // Done once the Subscription, too, says it is installed: what
        // `status` and `upgrade` read next then agrees.
        if phase == CsvPhase::SUCCEEDED && status.installed_csv.as_deref() == Some(name) {
            return Stage::Succeeded {
                csv: name.to_owned(),
            };
        }
        if phase == CsvPhase::FAILED {
            let reason = csv_status.reason.map(|r| r.as_str().to_owned());
            let message = csv_status.message.unwrap_or_default();
            return Stage::Failed {
                object: format!("ClusterServiceVersion {namespace}/{name}"),
                cause: match reason {
                    Some(reason) if !reason.is_empty() => format!("{reason}: {message}"),
                    _ => message,
                },
                unresolvable: false,
            };
        }
        if phase.as_str() != "" {
            return Stage::Installing {
                csv: name.to_owned(),
                phase: phase.as_str().to_owned(),
            };
        }
    }

    let Some(plan) = observed.plan else {
        return Stage::Resolving {
            note: resolution.and_then(|c| c.message.clone()),
        };
    };
    let name = plan.metadata.name.clone().unwrap_or_default();
    let plan_status = plan.status.clone().unwrap_or_default();
    let phase = plan_status.phase;
    if phase == InstallPlanPhase::FAILED {
        let cause = plan_status
            .conditions
            .iter()
            .rev()
            .find_map(|c| c.message.clone())
            .or(plan_status.message)
            .unwrap_or_else(|| "the InstallPlan failed".to_owned());
        return Stage::Failed {
            object: format!("InstallPlan {namespace}/{name}"),
            cause,
            unresolvable: false,
        };
    }
    let awaiting = phase == InstallPlanPhase::REQUIRES_APPROVAL
        || (plan.spec.approval == Approval::MANUAL && !plan.spec.approved);
    if awaiting {
        return Stage::WaitingForApproval {
            plan: name,
            csvs: plan.spec.cluster_service_version_names.clone(),
        };
    }
    if phase == InstallPlanPhase::COMPLETE {
        let csv = current
            .map(str::to_owned)
            .or_else(|| plan.spec.cluster_service_version_names.first().cloned())
            .unwrap_or_default();
        return Stage::Installing {
            csv,
            phase: "Pending".to_owned(),
        };
    }
    if !plan_status.bundle_lookups.is_empty() || phase != InstallPlanPhase::INSTALLING {
        return Stage::Unpacking { plan: name };
    }
    Stage::Applying { plan: name }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn subscription(status: serde_json::Value) -> Subscription {
        serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": "etcd", "namespace": "ns"},
            "spec": {"source": "cat", "sourceNamespace": "olm", "name": "etcd"},
            "status": status,
        }))
        .unwrap()
    }

    fn plan(spec: serde_json::Value, status: serde_json::Value) -> InstallPlan {
        let mut spec = spec;
        spec["clusterServiceVersionNames"] = json!(["etcd.v2"]);
        serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
            "metadata": {"name": "install-abc", "namespace": "ns"},
            "spec": spec, "status": status,
        }))
        .unwrap()
    }

    fn csv(status: serde_json::Value) -> ClusterServiceVersion {
        serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": "etcd.v2", "namespace": "ns"},
            "spec": {"displayName": "etcd", "install": {"strategy": "deployment"}},
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn stages_follow_the_objects() {
        let resolving = subscription(json!({}));
        let unsatisfiable = subscription(json!({"conditions": [{
            "type": "ResolutionFailed", "status": "True",
            "reason": "ConstraintsNotSatisfiable", "message": "no operators found in package etcd"}]}));
        let catalog_down = subscription(json!({"conditions": [{
            "type": "ResolutionFailed", "status": "True",
            "reason": "ErrorPreventedResolution", "message": "catalog unhealthy"}]}));
        let planned = subscription(json!({"currentCSV": "etcd.v2", "installedCSV": "etcd.v1",
            "installPlanRef": {"name": "install-abc", "namespace": "ns"}}));
        let manual = plan(
            json!({"approval": "Manual", "approved": false}),
            json!({"phase": "RequiresApproval"}),
        );
        let unpacking = plan(
            json!({"approval": "Automatic", "approved": true}),
            json!({"phase": "Installing", "bundleLookups": [{"path": "img", "identifier": "etcd.v2", "replaces": "", "catalogSourceRef": {"name": "cat"}}]}),
        );
        let applying = plan(
            json!({"approval": "Automatic", "approved": true}),
            json!({"phase": "Installing"}),
        );
        let failed_plan = plan(
            json!({"approval": "Automatic", "approved": true}),
            json!({"phase": "Failed", "conditions": [{"type": "Installed", "status": "False", "reason": "InstallComponentFailed", "message": "bundle unpacking failed: registry not allowed"}]}),
        );
        let still_v2 = subscription(json!({"currentCSV": "etcd.v2"}));
        let done = subscription(json!({"currentCSV": "etcd.v2", "installedCSV": "etcd.v2",
            "installPlanRef": {"name": "install-abc", "namespace": "ns"}}));
        let complete = plan(
            json!({"approval": "Automatic", "approved": true}),
            json!({"phase": "Complete"}),
        );
        let installing = csv(json!({"phase": "InstallReady", "reason": "AllRequirementsMet"}));
        let succeeded = csv(json!({"phase": "Succeeded", "reason": "InstallSucceeded"}));
        let failed_csv = csv(
            json!({"phase": "Failed", "reason": "InstallCheckFailed", "message": "install timeout"}),
        );

        let at = |subscription, plan, csv, from| {
            stage(Observed {
                subscription,
                plan,
                csv,
                from_csv: from,
            })
        };
        let cases: Vec<(&str, Stage, &str)> = vec![
            ("nothing yet", at(&resolving, None, None, None), "resolving"),
            (
                "catalog down is not final",
                at(&catalog_down, None, None, None),
                "resolving (catalog unhealthy)",
            ),
            (
                "unsatisfiable",
                at(&unsatisfiable, None, None, None),
                "failed: Subscription ns/etcd: no operators found in package etcd",
            ),
            (
                "manual",
                at(&planned, Some(&manual), None, Some("etcd.v1")),
                "waiting for approval of InstallPlan install-abc (etcd.v2): run `kubectl olm approve install-abc`",
            ),
            (
                "unpacking",
                at(&planned, Some(&unpacking), None, Some("etcd.v1")),
                "unpacking the bundle (InstallPlan install-abc)",
            ),
            (
                "applying",
                at(&planned, Some(&applying), None, Some("etcd.v1")),
                "applying InstallPlan install-abc",
            ),
            (
                "plan failed",
                at(&planned, Some(&failed_plan), None, Some("etcd.v1")),
                "failed: InstallPlan ns/install-abc: bundle unpacking failed: registry not allowed",
            ),
            (
                "plan done, CSV not yet",
                at(&planned, Some(&complete), None, Some("etcd.v1")),
                "installing etcd.v2 (Pending)",
            ),
            (
                "installing",
                at(
                    &planned,
                    Some(&complete),
                    Some(&installing),
                    Some("etcd.v1"),
                ),
                "installing etcd.v2 (InstallReady)",
            ),
            (
                "succeeded, the Subscription not caught up",
                at(&planned, Some(&complete), Some(&succeeded), Some("etcd.v1")),
                "installing etcd.v2 (Succeeded)",
            ),
            (
                "succeeded",
                at(&done, Some(&complete), Some(&succeeded), Some("etcd.v1")),
                "succeeded: etcd.v2",
            ),
            (
                "csv failed",
                at(
                    &planned,
                    Some(&complete),
                    Some(&failed_csv),
                    Some("etcd.v1"),
                ),
                "failed: ClusterServiceVersion ns/etcd.v2: InstallCheckFailed: install timeout",
            ),
            (
                "an upgrade is not over when the old CSV is still current",
                at(&still_v2, None, Some(&succeeded), Some("etcd.v2")),
                "resolving",
            ),
        ];
        for (name, got, want) in cases {
            assert_eq!(got.line(), want, "{name}");
        }
        assert!(at(&done, Some(&complete), Some(&succeeded), None).is_final());
        assert!(!at(&planned, Some(&manual), None, None).is_final());
        assert!(matches!(
            at(&unsatisfiable, None, None, None),
            Stage::Failed {
                unresolvable: true,
                ..
            }
        ));
    }
}
