//! The health of installed operators, as `status` shows it: one row per
//! Subscription, ClusterServiceVersion, InstallPlan and CatalogSource, with
//! a state, a health level and, for anything not healthy, the cause and the
//! next step.
//!
//! Which objects are shown: every Subscription (or those of one package),
//! the CSVs they name (`installedCSV`, `currentCSV`; without a package,
//! every CSV of the namespace but the copies OLM makes into target
//! namespaces), the InstallPlans they reference plus any plan still under
//! way, and the CatalogSources they subscribe from. A finished plan that no
//! Subscription references is history: a plan that failed and was retried
//! must not mark the namespace unhealthy forever.

use std::collections::BTreeSet;

use olm_api::{
    catalog_source::{CatalogSource, ConnectivityState},
    csv::{ClusterServiceVersion, CsvPhase, CsvReason},
    install_plan::{InstallPlan, InstallPlanConditionType, InstallPlanPhase},
    subscription::{Subscription, SubscriptionConditionType, SubscriptionState},
};
use serde::Serialize;

/// The kind of a row, in the order rows of one namespace are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub(crate) enum Kind {
    Subscription,
    ClusterServiceVersion,
    InstallPlan,
    CatalogSource,
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Subscription => "Subscription",
            Self::ClusterServiceVersion => "ClusterServiceVersion",
            Self::InstallPlan => "InstallPlan",
            Self::CatalogSource => "CatalogSource",
        })
    }
}

/// How an object is doing. Only `Unhealthy` makes `status` fail: an install
/// under way, or waiting for approval, is not a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) enum Health {
    /// Done and well.
    Healthy,
    /// Still moving (installing, resolving, waiting for approval).
    Progressing,
    /// Failed or broken; the cause says why.
    Unhealthy,
}

impl std::fmt::Display for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Healthy => "Healthy",
            Self::Progressing => "Progressing",
            Self::Unhealthy => "Unhealthy",
        })
    }
}

/// One object and its health.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Row {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
    /// The object's own state word (phase, state, connection state), or
    /// [`NONE`] when it has none yet.
    pub state: String,
    pub health: Health,
    /// Why the object is not healthy, and the next step; a note (such as a
    /// deprecation) on a healthy one; else empty.
    pub cause: String,
}

/// Shown for a state an object does not have yet, as kubectl shows it.
pub(crate) const NONE: &str = "<none>";

/// A CatalogSource by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct CatalogRef {
    pub namespace: String,
    pub name: String,
}

/// The catalogs the Subscriptions (of `package`, when given) subscribe from.
pub(crate) fn catalogs_used(
    subscriptions: &[Subscription],
    package: Option<&str>,
) -> BTreeSet<CatalogRef> {
    subscriptions
        .iter()
        .filter(|sub| of_package(sub, package))
        .map(catalog_of)
        .collect()
}

/// Whether any Subscription is for `package`.
pub(crate) fn has_package(subscriptions: &[Subscription], package: &str) -> bool {
    subscriptions.iter().any(|sub| sub.spec.package == package)
}

/// The rows `status` shows, sorted by kind, namespace and name. `catalogs`
/// need hold only those of [`catalogs_used`]; one that is missing gets an
/// unhealthy row of its own.
pub(crate) fn rows(
    subscriptions: &[Subscription],
    csvs: &[ClusterServiceVersion],
    plans: &[InstallPlan],
    catalogs: &[CatalogSource],
    package: Option<&str>,
) -> Vec<Row> {
    let subscriptions: Vec<&Subscription> = subscriptions
        .iter()
        .filter(|sub| of_package(sub, package))
        .collect();
    let mut rows: Vec<Row> = subscriptions.iter().map(|sub| subscription(sub)).collect();

    // The CSVs the Subscriptions name, by namespace and name.
    let named_csvs: BTreeSet<(String, String)> = subscriptions
        .iter()
        .flat_map(|sub| {
            let status = sub.status.as_ref();
            [
                status.and_then(|s| s.installed_csv.clone()),
                status.and_then(|s| s.current_csv.clone()),
            ]
            .into_iter()
            .flatten()
            .filter(|name| !name.is_empty())
            .map(|name| (namespace_of(&sub.metadata), name))
        })
        .collect();
    rows.extend(
        csvs.iter()
            .filter(|csv| match package {
                Some(_) => named_csvs.contains(&key(&csv.metadata)),
                None => !is_copy(csv),
            })
            .map(csv),
    );

    let referenced_plans: BTreeSet<(String, String)> = subscriptions
        .iter()
        .filter_map(|sub| {
            let status = sub.status.as_ref()?;
            let name = status
                .install_plan_ref
                .as_ref()
                .and_then(|r| r.name.clone())
                .or_else(|| status.install_plan.as_ref().map(|p| p.name.clone()))?;
            Some((namespace_of(&sub.metadata), name))
        })
        .collect();
    rows.extend(
        plans
            .iter()
            .filter(|plan| {
                let namespace = namespace_of(&plan.metadata);
                let under_way_for_these =
                    !plan.is_terminal()
                        && (package.is_none()
                            || plan.spec.cluster_service_version_names.iter().any(|name| {
                                named_csvs.contains(&(namespace.clone(), name.clone()))
                            }));
                under_way_for_these || referenced_plans.contains(&key(&plan.metadata))
            })
            .map(install_plan),
    );

    for used in subscriptions
        .iter()
        .map(|sub| catalog_of(sub))
        .collect::<BTreeSet<_>>()
    {
        let found = catalogs
            .iter()
            .find(|c| key(&c.metadata) == (used.namespace.clone(), used.name.clone()));
        rows.push(match found {
            Some(catalog) => catalog_source(catalog),
            None => Row {
                kind: Kind::CatalogSource,
                cause: format!(
                    "CatalogSource {} not found in namespace {}: create it, or point the \
                     Subscription at another catalog",
                    used.name, used.namespace
                ),
                namespace: used.namespace,
                name: used.name,
                state: "NotFound".to_owned(),
                health: Health::Unhealthy,
            },
        });
    }

    // By kind first, as `kubectl get subs,csv,ip,catsrc` lists them.
    rows.sort_by(|a, b| (a.kind, &a.namespace, &a.name).cmp(&(b.kind, &b.namespace, &b.name)));
    rows
}

/// Why `status` fails, when some row is unhealthy: the objects concerned.
pub(crate) fn unhealthy_summary(rows: &[Row]) -> Option<String> {
    let unhealthy: Vec<String> = rows
        .iter()
        .filter(|row| row.health == Health::Unhealthy)
        .map(|row| format!("{} {}/{}", row.kind, row.namespace, row.name))
        .collect();
    match unhealthy.as_slice() {
        [] => None,
        [one] => Some(format!("{one} is unhealthy; see its CAUSE above")),
        many => Some(format!(
            "{} objects are unhealthy ({}); see their CAUSE above",
            many.len(),
            many.join(", ")
        )),
    }
}

/// The health of a Subscription: a failing condition makes it unhealthy;
/// an InstallPlan waiting for approval, or an install under way, is
/// progress.
fn subscription(sub: &Subscription) -> Row {
    let status = sub.status.clone().unwrap_or_default();
    let state = status.state.clone().unwrap_or_default();
    let holds = |type_: &SubscriptionConditionType| {
        status
            .conditions
            .iter()
            .find(|c| c.type_ == *type_ && c.status == "True")
    };
    const FAILING: [SubscriptionConditionType; 5] = [
        SubscriptionConditionType::RESOLUTION_FAILED,
        SubscriptionConditionType::CATALOG_SOURCES_UNHEALTHY,
        SubscriptionConditionType::INSTALL_PLAN_FAILED,
        SubscriptionConditionType::INSTALL_PLAN_MISSING,
        SubscriptionConditionType::BUNDLE_UNPACK_FAILED,
    ];
    let mut causes: Vec<String> = FAILING
        .iter()
        .filter_map(holds)
        .map(|c| {
            let detail = detail(c.reason.as_ref().map(|r| r.as_str()), c.message.as_deref());
            format!("{}: {detail}", c.type_)
        })
        .collect();
    if causes.is_empty() && state == SubscriptionState::UPGRADE_FAILED {
        causes.push(format!(
            "the upgrade failed: {}",
            detail(status.reason.as_ref().map(|r| r.as_str()), None)
        ));
    }
    let pending = holds(&SubscriptionConditionType::INSTALL_PLAN_PENDING);
    let unpacking = holds(&SubscriptionConditionType::BUNDLE_UNPACKING);
    let current = status.current_csv.clone().unwrap_or_default();
    let (health, cause) = if !causes.is_empty() {
        (Health::Unhealthy, causes.join("; "))
    } else if let Some(pending) = pending {
        let reason = pending.reason.as_ref().map(|r| r.as_str()).unwrap_or("");
        if reason == InstallPlanPhase::REQUIRES_APPROVAL.as_str() {
            (
                Health::Progressing,
                format!(
                    "waiting for approval: kubectl olm approve {}",
                    sub.spec.package
                ),
            )
        } else {
            (
                Health::Progressing,
                format!("InstallPlan {}", detail(Some(reason), None)),
            )
        }
    } else if let Some(unpacking) = unpacking {
        (
            Health::Progressing,
            format!(
                "unpacking the bundle: {}",
                detail(None, unpacking.message.as_deref())
            ),
        )
    } else if state == SubscriptionState::AT_LATEST_KNOWN {
        (Health::Healthy, deprecation_note(&status.conditions))
    } else if state.is_empty() {
        (Health::Progressing, "not resolved yet".to_owned())
    } else if state == SubscriptionState::UPGRADE_PENDING && !current.is_empty() {
        (Health::Progressing, format!("installing {current}"))
    } else {
        (Health::Progressing, String::new())
    };
    Row {
        kind: Kind::Subscription,
        namespace: namespace_of(&sub.metadata),
        name: name_of(&sub.metadata),
        state: state_word(state.as_str()),
        health,
        cause: one_line(&cause),
    }
}

/// The note a healthy Subscription carries when its package, channel or
/// bundle is deprecated.
fn deprecation_note(conditions: &[olm_api::subscription::SubscriptionCondition]) -> String {
    const DEPRECATIONS: [SubscriptionConditionType; 3] = [
        SubscriptionConditionType::PACKAGE_DEPRECATED,
        SubscriptionConditionType::CHANNEL_DEPRECATED,
        SubscriptionConditionType::BUNDLE_DEPRECATED,
    ];
    let notes: Vec<String> = DEPRECATIONS
        .iter()
        .filter_map(|type_| {
            conditions
                .iter()
                .find(|c| c.type_ == *type_ && c.status == "True")
        })
        .map(|c| format!("{}: {}", c.type_, detail(None, c.message.as_deref())))
        .collect();
    notes.join("; ")
}

/// The health of a CSV: `Succeeded` is healthy, `Failed` is not, and the
/// phases on the way (`Pending`, `InstallReady`, `Installing`, `Replacing`,
/// `Deleting`) are progress.
fn csv(csv: &ClusterServiceVersion) -> Row {
    let status = csv.status.clone().unwrap_or_default();
    let phase = status.phase.unwrap_or_default();
    let explanation = detail(
        status.reason.as_ref().map(|r| r.as_str()),
        status.message.as_deref(),
    );
    let (health, cause) = if phase == CsvPhase::SUCCEEDED {
        (Health::Healthy, String::new())
    } else if phase == CsvPhase::FAILED || phase == CsvPhase::UNKNOWN {
        (Health::Unhealthy, explanation)
    } else if phase.is_empty() {
        (Health::Progressing, "not seen by OLM yet".to_owned())
    } else {
        (Health::Progressing, explanation)
    };
    Row {
        kind: Kind::ClusterServiceVersion,
        namespace: namespace_of(&csv.metadata),
        name: name_of(&csv.metadata),
        state: state_word(phase.as_str()),
        health,
        cause: one_line(&cause),
    }
}

/// The copies of a CSV that OLM writes into the target namespaces of an
/// OperatorGroup: the original shows the health.
fn is_copy(csv: &ClusterServiceVersion) -> bool {
    csv.status
        .as_ref()
        .is_some_and(|s| s.reason.as_ref() == Some(&CsvReason::COPIED))
}

/// The health of an InstallPlan: `Complete` is healthy, `Failed` is not,
/// `RequiresApproval` waits for a user, and the rest is progress.
fn install_plan(plan: &InstallPlan) -> Row {
    let status = plan.status.clone().unwrap_or_default();
    let name = name_of(&plan.metadata);
    let (health, cause) = if status.phase == InstallPlanPhase::COMPLETE {
        (Health::Healthy, String::new())
    } else if status.phase == InstallPlanPhase::FAILED {
        let installed = status
            .conditions
            .iter()
            .find(|c| c.type_ == InstallPlanConditionType::INSTALLED);
        let failed = status
            .conditions
            .iter()
            .find(|c| c.status == "False" && c.message.is_some());
        let message = installed
            .and_then(|c| c.message.clone())
            .or_else(|| status.message.clone())
            .or_else(|| failed.and_then(|c| c.message.clone()));
        let reason = installed.and_then(|c| c.reason.as_ref().map(|r| r.as_str().to_owned()));
        (
            Health::Unhealthy,
            detail(reason.as_deref(), message.as_deref()),
        )
    } else if status.phase == InstallPlanPhase::REQUIRES_APPROVAL {
        (
            Health::Progressing,
            format!("waiting for approval: kubectl olm approve {name}"),
        )
    } else {
        (Health::Progressing, String::new())
    };
    Row {
        kind: Kind::InstallPlan,
        namespace: namespace_of(&plan.metadata),
        name,
        state: state_word(status.phase.as_str()),
        health,
        cause: one_line(&cause),
    }
}

/// The health of a catalog: healthy when OLM's connection to its registry
/// is `READY`; progress while it first connects; unhealthy otherwise.
fn catalog_source(catalog: &CatalogSource) -> Row {
    let status = catalog.status.clone().unwrap_or_default();
    let connection = status
        .connection_state
        .as_ref()
        .map(|c| c.last_observed_state.clone());
    let problem = status.reason.is_some() || status.message.is_some();
    let (health, cause) = match &connection {
        Some(state) if *state == ConnectivityState::READY => (Health::Healthy, String::new()),
        _ if problem => (
            Health::Unhealthy,
            detail(
                status.reason.as_ref().map(|r| r.as_str()),
                status.message.as_deref(),
            ),
        ),
        None => (
            Health::Progressing,
            "OLM has not connected to the registry yet".to_owned(),
        ),
        Some(state) if *state == ConnectivityState::CONNECTING => {
            (Health::Progressing, "connecting to the registry".to_owned())
        }
        Some(state) => (
            Health::Unhealthy,
            format!(
                "the registry{} is not reachable (connection {state})",
                status
                    .connection_state
                    .as_ref()
                    .and_then(|c| c.address.as_deref())
                    .map(|a| format!(" at {a}"))
                    .unwrap_or_default()
            ),
        ),
    };
    Row {
        kind: Kind::CatalogSource,
        namespace: namespace_of(&catalog.metadata),
        name: name_of(&catalog.metadata),
        state: state_word(connection.as_ref().map_or("", |c| c.as_str())),
        health,
        cause: one_line(&cause),
    }
}

fn of_package(sub: &Subscription, package: Option<&str>) -> bool {
    package.is_none_or(|p| sub.spec.package == p)
}

/// The catalog a Subscription subscribes from (its own namespace when it
/// names none).
fn catalog_of(sub: &Subscription) -> CatalogRef {
    let namespace = if sub.spec.source_namespace.is_empty() {
        namespace_of(&sub.metadata)
    } else {
        sub.spec.source_namespace.clone()
    };
    CatalogRef {
        namespace,
        name: sub.spec.source.clone(),
    }
}

type Meta = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

fn namespace_of(meta: &Meta) -> String {
    meta.namespace.clone().unwrap_or_default()
}

fn name_of(meta: &Meta) -> String {
    meta.name.clone().unwrap_or_default()
}

fn key(meta: &Meta) -> (String, String) {
    (namespace_of(meta), name_of(meta))
}

fn state_word(state: &str) -> String {
    if state.is_empty() {
        NONE.to_owned()
    } else {
        state.to_owned()
    }
}

/// `reason: message`, either alone, or `unknown` when both are missing.
fn detail(reason: Option<&str>, message: Option<&str>) -> String {
    let reason = reason.filter(|r| !r.is_empty());
    let message = message.filter(|m| !m.trim().is_empty());
    match (reason, message) {
        (Some(reason), Some(message)) => format!("{reason}: {message}"),
        (Some(only), None) | (None, Some(only)) => only.to_owned(),
        (None, None) => "no reason given".to_owned(),
    }
}

/// A cause on one line, so that the table stays a table.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::{Value, json};

    use super::*;

    fn from<T: serde::de::DeserializeOwned>(value: Value) -> T {
        serde_json::from_value(value).unwrap()
    }

    /// A Subscription `widgets-sub` to package `widgets` from the catalog
    /// `widget-index` in `widget-ns`, with `status`.
    fn subscription_with(status: Value) -> Subscription {
        from(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": "widgets-sub", "namespace": "widget-ns"},
            "spec": {"name": "widgets", "source": "widget-index", "sourceNamespace": "widget-ns"},
            "status": status,
        }))
    }

    fn csv_with(name: &str, status: Value) -> ClusterServiceVersion {
        from(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": name, "namespace": "widget-ns"},
            "spec": {"displayName": "Widgets", "install": {"strategy": "deployment"}},
            "status": status,
        }))
    }

    fn plan_with(name: &str, csvs: &[&str], status: Value) -> InstallPlan {
        from(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
            "metadata": {"name": name, "namespace": "widget-ns"},
            "spec": {"clusterServiceVersionNames": csvs, "approval": "Automatic", "approved": true},
            "status": status,
        }))
    }

    fn catalog_with(status: Value) -> CatalogSource {
        from(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
            "metadata": {"name": "widget-index", "namespace": "widget-ns"},
            "spec": {"sourceType": "grpc", "address": "10.0.0.1:50051"},
            "status": status,
        }))
    }

    fn condition(type_: &str, reason: &str, message: &str) -> Value {
        json!({"type": type_, "status": "True", "reason": reason, "message": message})
    }

    fn health_and_cause(row: &Row) -> (Health, &str, &str) {
        (row.health, row.state.as_str(), row.cause.as_str())
    }

    #[test]
    fn subscription_health_follows_its_conditions_and_state() {
        let cases = [
            (
                "at latest known",
                json!({"state": "AtLatestKnown", "installedCSV": "widgets.v1", "currentCSV": "widgets.v1"}),
                (Health::Healthy, "AtLatestKnown", ""),
            ),
            (
                "resolution failed",
                json!({"conditions": [condition("ResolutionFailed", "ConstraintsNotSatisfiable",
                    "no operators found in package widgets\n in the catalog")]}),
                (
                    Health::Unhealthy,
                    NONE,
                    "ResolutionFailed: ConstraintsNotSatisfiable: no operators found in package widgets in the catalog",
                ),
            ),
            (
                "a false failure condition is no failure",
                json!({"state": "AtLatestKnown", "conditions": [
                    {"type": "ResolutionFailed", "status": "False", "reason": "x", "message": "y"}]}),
                (Health::Healthy, "AtLatestKnown", ""),
            ),
            (
                "catalog unhealthy and plan failed",
                json!({"state": "UpgradePending", "conditions": [
                    condition("InstallPlanFailed", "InstallPlanFailed", "step failed"),
                    condition("CatalogSourcesUnhealthy", "UnhealthyCatalogSourceFound", "widget-index is down"),
                ]}),
                (
                    Health::Unhealthy,
                    "UpgradePending",
                    "CatalogSourcesUnhealthy: UnhealthyCatalogSourceFound: widget-index is down; InstallPlanFailed: InstallPlanFailed: step failed",
                ),
            ),
            (
                "waiting for approval",
                json!({"state": "UpgradePending", "currentCSV": "widgets.v1", "conditions": [
                    condition("InstallPlanPending", "RequiresApproval", "")]}),
                (
                    Health::Progressing,
                    "UpgradePending",
                    "waiting for approval: kubectl olm approve widgets",
                ),
            ),
            (
                "plan installing",
                json!({"state": "UpgradePending", "conditions": [
                    condition("InstallPlanPending", "Installing", "")]}),
                (
                    Health::Progressing,
                    "UpgradePending",
                    "InstallPlan Installing",
                ),
            ),
            (
                "installing without a pending condition",
                json!({"state": "UpgradePending", "currentCSV": "widgets.v2"}),
                (
                    Health::Progressing,
                    "UpgradePending",
                    "installing widgets.v2",
                ),
            ),
            (
                "nothing yet",
                json!({}),
                (Health::Progressing, NONE, "not resolved yet"),
            ),
            (
                "upgrade failed without a condition",
                json!({"state": "UpgradeFailed", "reason": "InstallPlanFailed"}),
                (
                    Health::Unhealthy,
                    "UpgradeFailed",
                    "the upgrade failed: InstallPlanFailed",
                ),
            ),
            (
                "deprecated but healthy",
                json!({"state": "AtLatestKnown", "conditions": [
                    condition("ChannelDeprecated", "Deprecated", "use the stable channel")]}),
                (
                    Health::Healthy,
                    "AtLatestKnown",
                    "ChannelDeprecated: use the stable channel",
                ),
            ),
        ];
        for (case, status, want) in cases {
            let row = subscription(&subscription_with(status));
            assert_eq!(health_and_cause(&row), want, "{case}");
            assert_eq!(
                (row.kind, row.name.as_str()),
                (Kind::Subscription, "widgets-sub")
            );
        }
    }

    #[test]
    fn csv_health_follows_its_phase() {
        let cases = [
            (
                json!({"phase": "Succeeded", "reason": "InstallSucceeded", "message": "done"}),
                (Health::Healthy, "Succeeded", ""),
            ),
            (
                json!({"phase": "Failed", "reason": "InstallCheckFailed", "message": "deployment not ready"}),
                (
                    Health::Unhealthy,
                    "Failed",
                    "InstallCheckFailed: deployment not ready",
                ),
            ),
            (
                json!({"phase": "Pending", "reason": "RequirementsNotMet", "message": "missing CRD"}),
                (
                    Health::Progressing,
                    "Pending",
                    "RequirementsNotMet: missing CRD",
                ),
            ),
            (
                json!({"phase": "Installing", "reason": "InstallWaiting"}),
                (Health::Progressing, "Installing", "InstallWaiting"),
            ),
            (
                json!({}),
                (Health::Progressing, NONE, "not seen by OLM yet"),
            ),
        ];
        for (status, want) in cases {
            let row = csv(&csv_with("widgets.v1", status.clone()));
            assert_eq!(health_and_cause(&row), want, "{status}");
        }
    }

    #[test]
    fn install_plan_health_follows_its_phase() {
        let cases = [
            (
                json!({"phase": "Complete", "catalogSources": []}),
                (Health::Healthy, "Complete", ""),
            ),
            (
                json!({"phase": "Failed", "catalogSources": [], "conditions": [
                    {"type": "Installed", "status": "False", "reason": "InstallComponentFailed",
                     "message": "error creating csv widgets.v1: forbidden"}]}),
                (
                    Health::Unhealthy,
                    "Failed",
                    "InstallComponentFailed: error creating csv widgets.v1: forbidden",
                ),
            ),
            (
                json!({"phase": "Failed", "catalogSources": [], "message": "bundle unpacking failed"}),
                (Health::Unhealthy, "Failed", "bundle unpacking failed"),
            ),
            (
                json!({"phase": "RequiresApproval", "catalogSources": []}),
                (
                    Health::Progressing,
                    "RequiresApproval",
                    "waiting for approval: kubectl olm approve install-abcde",
                ),
            ),
            (
                json!({"phase": "Installing", "catalogSources": []}),
                (Health::Progressing, "Installing", ""),
            ),
        ];
        for (status, want) in cases {
            let row = install_plan(&plan_with("install-abcde", &["widgets.v1"], status.clone()));
            assert_eq!(health_and_cause(&row), want, "{status}");
        }
    }

    #[test]
    fn catalog_health_follows_its_connection() {
        let cases = [
            (
                json!({"connectionState": {"lastObservedState": "READY"}}),
                (Health::Healthy, "READY", ""),
            ),
            (
                json!({"connectionState": {"lastObservedState": "TRANSIENT_FAILURE", "address": "10.0.0.1:50051"}}),
                (
                    Health::Unhealthy,
                    "TRANSIENT_FAILURE",
                    "the registry at 10.0.0.1:50051 is not reachable (connection TRANSIENT_FAILURE)",
                ),
            ),
            (
                json!({"reason": "SpecInvalidError", "message": "no image and no address"}),
                (
                    Health::Unhealthy,
                    NONE,
                    "SpecInvalidError: no image and no address",
                ),
            ),
            (
                json!({"connectionState": {"lastObservedState": "CONNECTING"}}),
                (
                    Health::Progressing,
                    "CONNECTING",
                    "connecting to the registry",
                ),
            ),
            (
                json!({}),
                (
                    Health::Progressing,
                    NONE,
                    "OLM has not connected to the registry yet",
                ),
            ),
        ];
        for (status, want) in cases {
            let row = catalog_source(&catalog_with(status.clone()));
            assert_eq!(health_and_cause(&row), want, "{status}");
        }
    }

    /// Two packages in one namespace: `widgets` installed, `gears` waiting
    /// for approval; an old failed plan; a copied CSV; another package's CSV.
    fn namespace_objects() -> (
        Vec<Subscription>,
        Vec<ClusterServiceVersion>,
        Vec<InstallPlan>,
        Vec<CatalogSource>,
    ) {
        let widgets = subscription_with(json!({
            "state": "AtLatestKnown", "installedCSV": "widgets.v2", "currentCSV": "widgets.v2",
            "installPlanRef": {"name": "install-two", "namespace": "widget-ns"},
        }));
        let gears: Subscription = from(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": "gears-sub", "namespace": "widget-ns"},
            "spec": {"name": "gears", "source": "gear-index", "sourceNamespace": "global-catalogs"},
            "status": {"state": "UpgradePending", "currentCSV": "gears.v1",
                "conditions": [condition("InstallPlanPending", "RequiresApproval", "")]},
        }));
        let csvs = vec![
            csv_with("widgets.v2", json!({"phase": "Succeeded"})),
            csv_with(
                "copied.v1",
                json!({"phase": "Succeeded", "reason": "Copied"}),
            ),
        ];
        let plans = vec![
            plan_with(
                "install-one",
                &["widgets.v2"],
                json!({"phase": "Failed", "catalogSources": []}),
            ),
            plan_with(
                "install-two",
                &["widgets.v2"],
                json!({"phase": "Complete", "catalogSources": []}),
            ),
            plan_with(
                "install-gears",
                &["gears.v1"],
                json!({"phase": "RequiresApproval", "catalogSources": []}),
            ),
        ];
        let catalogs = vec![catalog_with(
            json!({"connectionState": {"lastObservedState": "READY"}}),
        )];
        (vec![widgets, gears], csvs, plans, catalogs)
    }

    fn summary(rows: &[Row]) -> Vec<String> {
        rows.iter()
            .map(|r| {
                format!(
                    "{}/{} {} {} {}",
                    r.namespace, r.name, r.kind, r.state, r.health
                )
            })
            .collect()
    }

    #[test]
    fn a_namespace_shows_live_objects_and_missing_catalogs() {
        let (subs, csvs, plans, catalogs) = namespace_objects();
        let rows = rows(&subs, &csvs, &plans, &catalogs, None);
        assert_eq!(
            summary(&rows),
            [
                "widget-ns/gears-sub Subscription UpgradePending Progressing",
                "widget-ns/widgets-sub Subscription AtLatestKnown Healthy",
                "widget-ns/widgets.v2 ClusterServiceVersion Succeeded Healthy",
                "widget-ns/install-gears InstallPlan RequiresApproval Progressing",
                "widget-ns/install-two InstallPlan Complete Healthy",
                "global-catalogs/gear-index CatalogSource NotFound Unhealthy",
                "widget-ns/widget-index CatalogSource READY Healthy",
            ]
        );
        assert_eq!(
            rows[5].cause,
            "CatalogSource gear-index not found in namespace global-catalogs: create it, or point the Subscription at another catalog"
        );
        assert_eq!(
            unhealthy_summary(&rows).as_deref(),
            Some("CatalogSource global-catalogs/gear-index is unhealthy; see its CAUSE above")
        );
        assert_eq!(
            catalogs_used(&subs, None)
                .into_iter()
                .map(|c| c.name)
                .collect::<Vec<_>>(),
            ["gear-index", "widget-index"]
        );
    }

    #[test]
    fn a_package_shows_only_its_own_objects() {
        let (subs, csvs, plans, catalogs) = namespace_objects();
        let rows = rows(&subs, &csvs, &plans, &catalogs, Some("gears"));
        assert_eq!(
            summary(&rows),
            [
                "widget-ns/gears-sub Subscription UpgradePending Progressing",
                "widget-ns/install-gears InstallPlan RequiresApproval Progressing",
                "global-catalogs/gear-index CatalogSource NotFound Unhealthy",
            ]
        );
        let rows = super::rows(&subs, &csvs, &plans, &catalogs, Some("widgets"));
        assert_eq!(
            summary(&rows),
            [
                "widget-ns/widgets-sub Subscription AtLatestKnown Healthy",
                "widget-ns/widgets.v2 ClusterServiceVersion Succeeded Healthy",
                "widget-ns/install-two InstallPlan Complete Healthy",
                "widget-ns/widget-index CatalogSource READY Healthy",
            ]
        );
        assert_eq!(unhealthy_summary(&rows), None);
        assert!(has_package(&subs, "widgets"));
        assert!(!has_package(&subs, "sprockets"));
    }

    #[test]
    fn rows_serialize_with_stable_names() {
        let row = catalog_source(&catalog_with(
            json!({"connectionState": {"lastObservedState": "READY"}}),
        ));
        assert_eq!(
            serde_json::to_value(row).unwrap(),
            json!({"kind": "CatalogSource", "namespace": "widget-ns", "name": "widget-index",
                "state": "READY", "health": "Healthy", "cause": ""})
        );
    }
}
