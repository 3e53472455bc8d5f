//! Subscription status rules: catalog health, the InstallPlan conditions, the
//! state after an install, shared approval and InstallPlan generations.
//! Upstream: `pkg/controller/operators/catalog/subscription/state.go` and
//! `operator.go` (`syncResolvingNamespace`, `ensureSubscriptionInstallPlanState`).

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use olm_api::{
    conditions::{self, FALSE, TRUE},
    install_plan::{
        BundleLookupConditionType, InstallPlan, InstallPlanConditionType, InstallPlanPhase,
        InstallPlanStatus,
    },
    subscription::{
        Approval, InstallPlanReference, Subscription, SubscriptionCatalogHealth,
        SubscriptionCondition, SubscriptionConditionReason as Reason,
        SubscriptionConditionType as Type, SubscriptionState, SubscriptionStatus,
    },
};

/// One catalog a Subscription can resolve from, and whether it is healthy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogHealth {
    /// The catalog's namespace.
    pub namespace: String,
    /// The catalog's name.
    pub name: String,
    /// The catalog's UID.
    pub uid: String,
    /// The catalog's resourceVersion (part of the reference upstream keeps).
    pub resource_version: String,
    /// Whether its registry server passes the check.
    pub healthy: bool,
}

fn condition(type_: &Type, status: &str, reason: Reason, message: String) -> SubscriptionCondition {
    SubscriptionCondition {
        type_: type_.clone(),
        status: status.to_owned(),
        reason: Some(reason),
        message: (!message.is_empty()).then_some(message),
        ..SubscriptionCondition::default()
    }
}

/// Updates `status.catalogHealth` and the `CatalogSourcesUnhealthy`
/// condition from the catalogs of the Subscription's namespace and the
/// global catalog namespace, as upstream's `UpdateHealth` does. Returns
/// whether the status changed.
pub fn update_catalog_health(
    subscription: &Subscription,
    status: &mut SubscriptionStatus,
    catalogs: &[CatalogHealth],
    now: Timestamp,
) -> bool {
    let mut catalogs: Vec<&CatalogHealth> = catalogs.iter().collect();
    catalogs.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    let spec = &subscription.spec;
    let mut healthy = catalogs.iter().all(|c| c.healthy);
    let mut message = String::new();
    let targeted = catalogs
        .iter()
        .find(|c| c.namespace == spec.source_namespace && c.name == spec.source);
    match targeted {
        None => {
            healthy = false;
            message = format!(
                "targeted catalogsource {}/{} missing",
                spec.source_namespace, spec.source
            );
        }
        Some(c) if !c.healthy => {
            message = format!(
                "targeted catalogsource {}/{} unhealthy",
                c.namespace, c.name
            );
        }
        Some(_) => {}
    }
    let (mut cond_status, mut reason) = if healthy {
        message = "all available catalogsources are healthy".to_owned();
        (FALSE, Reason::ALL_CATALOG_SOURCES_HEALTHY)
    } else {
        (TRUE, Reason::UNHEALTHY_CATALOG_SOURCE_FOUND)
    };

    let old = &status.catalog_health;
    let mut update = true;
    if catalogs.len() > old.len() {
        reason = Reason::CATALOG_SOURCES_ADDED;
    } else if catalogs.len() < old.len() {
        reason = Reason::CATALOG_SOURCES_DELETED;
    } else if catalogs.is_empty() {
        cond_status = TRUE;
        reason = Reason::NO_CATALOG_SOURCES_FOUND;
        message = "dependency resolution requires at least one catalogsource".to_owned();
        update = false;
    } else {
        let changed = old.iter().any(|before| {
            let uid = before
                .catalog_source_ref
                .as_ref()
                .and_then(|r| r.uid.as_deref())
                .unwrap_or_default();
            catalogs.iter().find(|c| c.uid == uid).is_none_or(|now| {
                now.healthy != before.healthy
                    || before
                        .catalog_source_ref
                        .as_ref()
                        .and_then(|r| r.resource_version.as_deref())
                        != Some(now.resource_version.as_str())
            })
        });
        if changed {
            reason = Reason::CATALOG_SOURCES_UPDATED;
        }
        update = false;
    }
    let condition = condition(
        &Type::CATALOG_SOURCES_UNHEALTHY,
        cond_status,
        reason,
        message,
    );
    let unchanged_condition =
        conditions::find(&status.conditions, Type::CATALOG_SOURCES_UNHEALTHY.as_str())
            .is_some_and(|c| conditions::same_content(c, &with_times_of(&condition, c)));
    if !update && unchanged_condition {
        return false;
    }
    conditions::set(&mut status.conditions, condition, now);
    status.catalog_health = catalogs
        .iter()
        .map(|c| SubscriptionCatalogHealth {
            catalog_source_ref: Some(ObjectReference {
                api_version: Some("operators.coreos.com/v1alpha1".to_owned()),
                kind: Some("CatalogSource".to_owned()),
                name: Some(c.name.clone()),
                namespace: Some(c.namespace.clone()),
                uid: Some(c.uid.clone()),
                resource_version: Some(c.resource_version.clone()),
                ..ObjectReference::default()
            }),
            last_updated: Some(Time(now)),
            healthy: c.healthy,
        })
        .collect();
    status.last_updated = Some(Time(now));
    true
}

fn with_times_of(
    new: &SubscriptionCondition,
    old: &SubscriptionCondition,
) -> SubscriptionCondition {
    SubscriptionCondition {
        last_transition_time: old.last_transition_time.clone(),
        last_heartbeat_time: old.last_heartbeat_time.clone(),
        ..new.clone()
    }
}

/// Sets the InstallPlan conditions from the referenced InstallPlan (`None`
/// when it does not exist), as upstream's `CheckInstallPlanStatus` and
/// `InstallPlanNotFound` do. Returns whether the status changed.
pub fn update_install_plan_conditions(
    status: &mut SubscriptionStatus,
    install_plan: Option<&InstallPlanStatus>,
    now: Timestamp,
) -> bool {
    if status.install_plan_ref.is_none() {
        return false;
    }
    let before = status.clone();
    let pending_or_failed = [Type::INSTALL_PLAN_PENDING, Type::INSTALL_PLAN_FAILED];
    match install_plan {
        None => {
            for t in &pending_or_failed {
                conditions::remove(&mut status.conditions, t.as_str());
            }
            if status.state.as_ref() == Some(&SubscriptionState::UPGRADE_PENDING) {
                // A fresh InstallPlan will be generated.
                status.install_plan_ref = None;
                status.install_plan = None;
                status.current_csv = None;
                status.state = Some(SubscriptionState::NONE);
            } else {
                conditions::set(
                    &mut status.conditions,
                    condition(
                        &Type::INSTALL_PLAN_MISSING,
                        TRUE,
                        Reason::REFERENCED_INSTALL_PLAN_NOT_FOUND,
                        String::new(),
                    ),
                    now,
                );
            }
        }
        Some(plan) => {
            conditions::remove(&mut status.conditions, Type::INSTALL_PLAN_MISSING.as_str());
            let phase = &plan.phase;
            let new = if *phase == InstallPlanPhase::NONE
                || *phase == InstallPlanPhase::PLANNING
                || *phase == InstallPlanPhase::INSTALLING
                || *phase == InstallPlanPhase::REQUIRES_APPROVAL
            {
                let reason = if *phase == InstallPlanPhase::NONE {
                    Reason::INSTALL_PLAN_NOT_YET_RECONCILED
                } else {
                    Reason::from(phase.as_str())
                };
                conditions::remove(&mut status.conditions, Type::INSTALL_PLAN_FAILED.as_str());
                Some(condition(
                    &Type::INSTALL_PLAN_PENDING,
                    TRUE,
                    reason,
                    pending_message(plan),
                ))
            } else if *phase == InstallPlanPhase::FAILED {
                let installed = conditions::find(
                    &plan.conditions,
                    InstallPlanConditionType::INSTALLED.as_str(),
                );
                let reason = match installed {
                    Some(c) if c.status == FALSE => c
                        .reason
                        .as_ref()
                        .map_or(Reason::INSTALL_PLAN_FAILED, |r| Reason::from(r.as_str())),
                    _ => Reason::INSTALL_PLAN_FAILED,
                };
                conditions::remove(&mut status.conditions, Type::INSTALL_PLAN_PENDING.as_str());
                Some(condition(
                    &Type::INSTALL_PLAN_FAILED,
                    TRUE,
                    reason,
                    pending_message(plan),
                ))
            } else {
                for t in &pending_or_failed {
                    conditions::remove(&mut status.conditions, t.as_str());
                }
                None
            };
            if let Some(new) = new {
                conditions::set(&mut status.conditions, new, now);
            }
        }
    }
    let changed = *status != before;
    if changed {
        status.last_updated = Some(Time(now));
    }
    changed
}

/// The message upstream puts on InstallPlan conditions: the `Installed`
/// condition's message, else the pending bundle lookups' messages.
pub fn pending_message(plan: &InstallPlanStatus) -> String {
    let installed = conditions::find(
        &plan.conditions,
        InstallPlanConditionType::INSTALLED.as_str(),
    )
    .filter(|c| c.status != conditions::UNKNOWN)
    .and_then(|c| c.message.as_deref())
    .filter(|m| !m.is_empty());
    if let Some(message) = installed {
        return message.to_owned();
    }
    let mut out = String::new();
    let pending = plan.bundle_lookups.iter().filter_map(|lookup| {
        lookup
            .conditions
            .iter()
            .find(|c| c.type_ == BundleLookupConditionType::PENDING)
            .filter(|c| c.status != conditions::UNKNOWN)
            .and_then(|c| c.message.as_deref())
            .filter(|m| !m.is_empty())
    });
    for message in pending {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(message);
        out.push('.');
    }
    out
}

/// Step 3 of a resolution pass: a Subscription whose `currentCSV` exists is
/// `AtLatestKnown` with `installedCSV` set; otherwise it is `UpgradePending`,
/// or `UpgradeFailed` when fail-forward is on and its InstallPlan failed.
/// Returns whether the status changed.
pub fn update_state(
    status: &mut SubscriptionStatus,
    current_csv_exists: bool,
    install_plan_failed: bool,
    fail_forward: bool,
    now: Timestamp,
) -> bool {
    let Some(current) = status.current_csv.clone().filter(|c| !c.is_empty()) else {
        return false;
    };
    let before = status.clone();
    if current_csv_exists {
        status.state = Some(SubscriptionState::AT_LATEST_KNOWN);
        status.installed_csv = Some(current);
    } else if fail_forward && install_plan_failed {
        status.state = Some(SubscriptionState::UPGRADE_FAILED);
    } else {
        status.state = Some(SubscriptionState::UPGRADE_PENDING);
    }
    let changed = *status != before;
    if changed {
        status.last_updated = Some(Time(now));
    }
    changed
}

/// The approval of the one InstallPlan a resolution pass writes: `Manual` if
/// any Subscription of the namespace asks for it (only the exact `Manual`
/// counts), else `Automatic`.
pub fn namespace_approval<'a>(
    subscriptions: impl IntoIterator<Item = &'a Subscription>,
) -> Approval {
    if subscriptions
        .into_iter()
        .any(Subscription::requires_manual_approval)
    {
        Approval::MANUAL
    } else {
        Approval::AUTOMATIC
    }
}

/// The generation of the next InstallPlan of a namespace: one more than the
/// highest of the Subscriptions' `installPlanGeneration` and the InstallPlans'
/// `spec.generation`.
pub fn next_install_plan_generation(
    subscriptions: &[Subscription],
    install_plans: &[InstallPlan],
) -> i64 {
    let from_subscriptions = subscriptions
        .iter()
        .filter_map(|s| s.status.as_ref()?.install_plan_generation);
    let from_plans = install_plans.iter().filter_map(|p| p.spec.generation);
    from_subscriptions
        .chain(from_plans)
        .max()
        .unwrap_or(0)
        .saturating_add(1)
}

/// What the catalog says is deprecated about a Subscription's package,
/// channel and installed bundle.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Deprecations {
    /// The package's deprecation message.
    pub package: Option<String>,
    /// The followed channel's deprecation message.
    pub channel: Option<String>,
    /// The installed bundle's deprecation message.
    pub bundle: Option<String>,
}

/// Sets the deprecation conditions (`PackageDeprecated`, `ChannelDeprecated`,
/// `BundleDeprecated` and the `Deprecated` roll-up) as upstream does; the
/// channel condition is suppressed when the Subscription names no channel.
/// Upstream sets these conditions with a message and no reason.
/// Returns whether the status changed.
pub fn update_deprecations(
    subscription: &Subscription,
    status: &mut SubscriptionStatus,
    deprecations: &Deprecations,
    now: Timestamp,
) -> bool {
    let before = status.clone();
    let channel = subscription.spec.channel.as_deref().unwrap_or_default();
    let installed = status.installed_csv.clone().unwrap_or_default();
    let entries = [
        (
            Type::PACKAGE_DEPRECATED,
            deprecations
                .package
                .as_ref()
                .map(|m| format!("olm.package/{}: {m}", subscription.spec.package)),
        ),
        (
            Type::CHANNEL_DEPRECATED,
            deprecations
                .channel
                .as_ref()
                .filter(|_| !channel.is_empty())
                .map(|m| format!("olm.channel/{channel}: {m}")),
        ),
        (
            Type::BUNDLE_DEPRECATED,
            deprecations
                .bundle
                .as_ref()
                .map(|m| format!("olm.bundle/{installed}: {m}")),
        ),
    ];
    let mut messages = Vec::new();
    for (type_, message) in entries {
        match message {
            Some(message) => {
                messages.push(message.clone());
                conditions::set(
                    &mut status.conditions,
                    SubscriptionCondition {
                        type_: type_.clone(),
                        status: TRUE.to_owned(),
                        message: Some(message),
                        ..SubscriptionCondition::default()
                    },
                    now,
                );
            }
            None => {
                conditions::remove(&mut status.conditions, type_.as_str());
            }
        }
    }
    if messages.is_empty() {
        conditions::remove(&mut status.conditions, Type::DEPRECATED.as_str());
    } else {
        conditions::set(
            &mut status.conditions,
            SubscriptionCondition {
                type_: Type::DEPRECATED,
                status: TRUE.to_owned(),
                message: Some(messages.join("; ")),
                ..SubscriptionCondition::default()
            },
            now,
        );
    }
    let changed = *status != before;
    if changed {
        status.last_updated = Some(Time(now));
    }
    changed
}

/// Sets `BundleUnpacking` and `BundleUnpackFailed` from the bundle lookups
/// of the Subscription's InstallPlan: failed lookups make
/// `BundleUnpackFailed` (upstream's message), pending ones
/// `BundleUnpacking` (`UnpackingInProgress`); with neither, both go.
/// Returns whether the status changed.
pub fn update_unpack_conditions(
    status: &mut SubscriptionStatus,
    install_plan: Option<&InstallPlanStatus>,
    now: Timestamp,
) -> bool {
    let before = status.clone();
    let lookups = install_plan
        .map(|p| p.bundle_lookups.as_slice())
        .unwrap_or_default();
    let is_true = |l: &olm_api::install_plan::BundleLookup, t: &BundleLookupConditionType| {
        l.conditions
            .iter()
            .any(|c| c.type_ == *t && c.status == TRUE)
    };
    let failed: Vec<String> = lookups
        .iter()
        .filter_map(|l| {
            l.conditions
                .iter()
                .find(|c| c.type_ == BundleLookupConditionType::FAILED && c.status == TRUE)
                .map(|c| {
                    format!(
                        "Bundle unpacking failed - {}: {}",
                        c.reason.as_deref().unwrap_or_default(),
                        c.message.as_deref().unwrap_or_default()
                    )
                })
        })
        .collect();
    let pending = lookups.iter().any(|l| {
        is_true(l, &BundleLookupConditionType::NOT_PERSISTED)
            && !is_true(l, &BundleLookupConditionType::FAILED)
    });
    if failed.is_empty() {
        conditions::remove(&mut status.conditions, Type::BUNDLE_UNPACK_FAILED.as_str());
    } else {
        conditions::set(
            &mut status.conditions,
            condition(
                &Type::BUNDLE_UNPACK_FAILED,
                TRUE,
                Reason::BUNDLE_UNPACK_FAILED,
                failed.join("; "),
            ),
            now,
        );
    }
    if pending {
        let messages: Vec<String> = lookups
            .iter()
            .filter_map(|l| {
                l.conditions
                    .iter()
                    .find(|c| c.type_ == BundleLookupConditionType::PENDING && c.status == TRUE)
                    .and_then(|c| c.message.clone())
            })
            .collect();
        conditions::set(
            &mut status.conditions,
            condition(
                &Type::BUNDLE_UNPACKING,
                TRUE,
                Reason::UNPACKING_IN_PROGRESS,
                messages.join("; "),
            ),
            now,
        );
    } else {
        conditions::remove(&mut status.conditions, Type::BUNDLE_UNPACKING.as_str());
    }
    let changed = *status != before;
    if changed {
        status.last_updated = Some(Time(now));
    }
    changed
}

/// Whether an InstallPlan waits on a bundle whose unpack failed: it cannot
/// finish by itself, so its Subscriptions are resolved again (a fixed
/// catalog then gives a new plan) instead of waiting on it forever.
/// Terminal plans are never stuck.
pub fn stuck_on_unpack(plan: &InstallPlanStatus) -> bool {
    let terminal =
        plan.phase == InstallPlanPhase::COMPLETE || plan.phase == InstallPlanPhase::FAILED;
    !terminal
        && plan.bundle_lookups.iter().any(|l| {
            l.conditions
                .iter()
                .any(|c| c.type_ == BundleLookupConditionType::FAILED && c.status == TRUE)
        })
}

/// Whether a stuck plan already is what a resolution would write again:
/// the same CSVs from the same bundle images. Then nothing new is written;
/// the unpack is retried with backoff.
pub fn same_as_stuck(plan: &InstallPlan, csv_names: &[String], lookup_paths: &[String]) -> bool {
    let mut planned = plan.spec.cluster_service_version_names.clone();
    planned.sort();
    let mut resolved = csv_names.to_vec();
    resolved.sort();
    let mut stuck_paths: Vec<&str> = plan
        .status
        .as_ref()
        .map(|s| s.bundle_lookups.iter().map(|l| l.path.as_str()).collect())
        .unwrap_or_default();
    stuck_paths.sort_unstable();
    let mut paths: Vec<&str> = lookup_paths.iter().map(String::as_str).collect();
    paths.sort_unstable();
    planned == resolved && stuck_paths == paths
}

/// Plans stuck on a failed unpack that no Subscription references any more
/// (a later resolution replaced them): they would wait forever, so they are
/// deleted, with the failure records of their bundles.
pub fn superseded_stuck_plans<'a>(
    plans: &'a [InstallPlan],
    referenced: &[&str],
) -> Vec<&'a InstallPlan> {
    plans
        .iter()
        .filter(|p| {
            let name = p.metadata.name.as_deref().unwrap_or_default();
            !referenced.contains(&name) && p.status.as_ref().is_some_and(stuck_on_unpack)
        })
        .collect()
}

/// Annotation on an InstallPlan naming, for each Subscription it was
/// resolved for, the CSV chosen for it (a JSON object, Subscription name to
/// CSV name). Ours, not upstream's: it lets a restarted catalog-operator
/// finish the hand-off a crash interrupted (see [`orphaned_plan`]).
pub const RESOLVED_SUBSCRIPTIONS: &str = "olm.catalog-operator/resolved-subscriptions";

/// The annotation value for `decisions` (Subscription name, CSV name).
pub fn resolved_subscriptions_annotation<'a>(
    decisions: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> String {
    let map: std::collections::BTreeMap<&str, &str> = decisions.into_iter().collect();
    serde_json::to_string(&map).unwrap_or_default()
}

/// Whether one of the Subscriptions `uids` owns `plan`.
fn owned_by(plan: &InstallPlan, uids: &[&str]) -> bool {
    plan.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| uids.contains(&o.uid.as_str()))
}

/// A plan written for `sub` that its status does not point at yet: the
/// newest plan owned by the Subscription (by uid) whose
/// [`RESOLVED_SUBSCRIPTIONS`] annotation names it, with a generation above
/// the one its status records. That happens only when catalog-operator
/// stopped between creating a plan and writing the Subscription's status;
/// resolving again instead would write a second plan, or find the first
/// plan's CSV installed and claimed by nobody. Returns the plan and the CSV
/// it chose for the Subscription.
pub fn orphaned_plan<'a>(
    sub: &Subscription,
    status: &SubscriptionStatus,
    plans: &'a [std::sync::Arc<InstallPlan>],
) -> Option<(&'a InstallPlan, String)> {
    let uid = sub.metadata.uid.as_deref().filter(|u| !u.is_empty())?;
    let name = sub.metadata.name.as_deref()?;
    let recorded = status.install_plan_generation.unwrap_or(0);
    plans
        .iter()
        .filter(|p| owned_by(p, &[uid]))
        .filter(|p| p.spec.generation.unwrap_or(0) > recorded)
        .filter_map(|p| {
            let resolved = p
                .metadata
                .annotations
                .as_ref()?
                .get(RESOLVED_SUBSCRIPTIONS)?;
            let map: std::collections::BTreeMap<String, String> =
                serde_json::from_str(resolved).ok()?;
            Some((p.as_ref(), map.get(name)?.clone()))
        })
        .max_by_key(|(p, _)| p.spec.generation.unwrap_or(0))
}

/// A plan created for exactly the CSVs `csvs` by one of `subscriptions`
/// (an owner by uid) that has neither steps nor lookups yet: its status
/// was never written because catalog-operator stopped right after creating
/// it. The newest such plan, to be filled in rather than written again.
pub fn unfinished_plan<'a>(
    subscriptions: &[Subscription],
    plans: &'a [std::sync::Arc<InstallPlan>],
    csvs: &[String],
) -> Option<&'a InstallPlan> {
    let uids: Vec<&str> = subscriptions
        .iter()
        .filter_map(|s| s.metadata.uid.as_deref())
        .collect();
    let mut wanted: Vec<&str> = csvs.iter().map(String::as_str).collect();
    wanted.sort_unstable();
    plans
        .iter()
        .map(AsRef::as_ref)
        .filter(|p| owned_by(p, &uids))
        .filter(|p| {
            p.status
                .as_ref()
                .is_none_or(|s| s.plan.is_empty() && s.bundle_lookups.is_empty())
        })
        .filter(|p| {
            let mut names: Vec<&str> = p
                .spec
                .cluster_service_version_names
                .iter()
                .map(String::as_str)
                .collect();
            names.sort_unstable();
            names == wanted
        })
        .max_by_key(|p| p.spec.generation.unwrap_or(0))
}

/// A reference to an InstallPlan, as `status.installPlanRef` records it.
pub fn plan_reference(plan: &InstallPlan) -> ObjectReference {
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

/// The deprecated `status.installplan` reference upstream still writes.
pub fn legacy_plan_reference(plan: &InstallPlan) -> InstallPlanReference {
    InstallPlanReference {
        api_version: "operators.coreos.com/v1alpha1".to_owned(),
        kind: "InstallPlan".to_owned(),
        name: plan.metadata.name.clone().unwrap_or_default(),
        uuid: plan.metadata.uid.clone().unwrap_or_default(),
    }
}

/// Points `status` at `plan` and the upgrade at `csv`, pending.
fn hand_to(status: &mut SubscriptionStatus, plan: &InstallPlan, csv: Option<String>) {
    status.install_plan_ref = Some(plan_reference(plan));
    status.install_plan = Some(legacy_plan_reference(plan));
    status.install_plan_generation = plan.spec.generation;
    status.state = Some(SubscriptionState::UPGRADE_PENDING);
    status.current_csv = csv;
}

/// Everything [`refresh`] looks at for one Subscription.
#[derive(Clone, Copy, Debug)]
pub struct SubscriptionObservation<'a> {
    /// The Subscription.
    pub subscription: &'a Subscription,
    /// The InstallPlans of its namespace.
    pub plans: &'a [std::sync::Arc<InstallPlan>],
    /// The names of the CSVs of its namespace.
    pub csvs: &'a [String],
    /// The catalogs it may resolve from (its namespace's and the global
    /// catalog namespace's), with their health.
    pub catalogs: &'a [CatalogHealth],
    /// The time of this pass.
    pub now: Timestamp,
}

/// What [`refresh`] decided for one Subscription.
#[derive(Clone, Debug, PartialEq)]
pub struct Refresh {
    /// The status, true again; written when it differs from the stored one.
    pub status: SubscriptionStatus,
    /// The plan adopted because a restart interrupted its hand-off (see
    /// [`orphaned_plan`]), for the log.
    pub adopted: Option<String>,
}

impl Refresh {
    /// The status to write, when it differs from the one stored.
    pub fn to_write(&self, subscription: &Subscription) -> Option<&SubscriptionStatus> {
        changed(subscription, &self.status).then_some(&self.status)
    }
}

/// Whether `status` differs from the one `subscription` carries.
pub fn changed(subscription: &Subscription, status: &SubscriptionStatus) -> bool {
    match &subscription.status {
        Some(stored) => stored != status,
        None => *status != SubscriptionStatus::default(),
    }
}

/// The first part of a resolution pass for one Subscription, before
/// anything is resolved: adopt the plan a step generated it from
/// (`olm.generated-by`, as upstream) or the plan a restart orphaned, then
/// catalog health, the InstallPlan and unpack conditions and the state.
///
/// Deprecations are not part of it: they are asked of the catalog for the
/// CSV this decides is installed, then applied with
/// [`update_deprecations`].
pub fn refresh(observation: &SubscriptionObservation<'_>) -> Refresh {
    let SubscriptionObservation {
        subscription: sub,
        plans,
        csvs,
        catalogs,
        now,
    } = *observation;
    let mut status = sub.status.clone().unwrap_or_default();
    let by_name = |name: &str| {
        plans
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(name))
    };

    // A Subscription created by an InstallPlan step adopts that plan.
    let generating = sub
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(olm_api::labels::GENERATED_BY))
        .and_then(|plan| by_name(plan));
    if status.install_plan_ref.is_none()
        && let Some(plan) = generating
    {
        hand_to(&mut status, plan, sub.spec.starting_csv.clone());
    }
    let adopted = orphaned_plan(sub, &status, plans).map(|(plan, csv)| {
        hand_to(&mut status, plan, Some(csv));
        plan.metadata.name.clone().unwrap_or_default()
    });

    update_catalog_health(sub, &mut status, catalogs, now);
    let plan = status
        .install_plan_ref
        .as_ref()
        .and_then(|r| r.name.as_deref())
        .and_then(by_name)
        .and_then(|p| p.status.as_ref());
    update_install_plan_conditions(&mut status, plan, now);
    update_unpack_conditions(&mut status, plan, now);
    let current_exists = status
        .current_csv
        .as_deref()
        .is_some_and(|c| csvs.iter().any(|csv| csv == c));
    let plan_failed = plan.is_some_and(|s| s.phase == InstallPlanPhase::FAILED);
    update_state(&mut status, current_exists, plan_failed, false, now);
    Refresh { status, adopted }
}

/// Sets `lastUpdated` when `status` differs from the stored one.
fn touched(
    subscription: &Subscription,
    mut status: SubscriptionStatus,
    now: Timestamp,
) -> SubscriptionStatus {
    if changed(subscription, &status) {
        status.last_updated = Some(Time(now));
    }
    status
}

/// The status of every Subscription of a namespace whose resolution
/// failed: `ResolutionFailed` true with the resolver's reason and message.
pub fn resolution_failed(
    subscription: &Subscription,
    reason: Reason,
    message: &str,
    now: Timestamp,
) -> SubscriptionStatus {
    let mut status = subscription.status.clone().unwrap_or_default();
    conditions::set(
        &mut status.conditions,
        condition(&Type::RESOLUTION_FAILED, TRUE, reason, message.to_owned()),
        now,
    );
    touched(subscription, status, now)
}

/// The status of a Subscription of a namespace that resolved with nothing
/// to change: no `ResolutionFailed` left.
pub fn resolution_succeeded(subscription: &Subscription, now: Timestamp) -> SubscriptionStatus {
    let mut status = subscription.status.clone().unwrap_or_default();
    conditions::remove(&mut status.conditions, Type::RESOLUTION_FAILED.as_str());
    touched(subscription, status, now)
}

/// What a resolution pass did about the InstallPlan of a Subscription it
/// resolved a CSV for.
#[derive(Clone, Copy, Debug)]
pub enum HandOff<'a> {
    /// A plan was written (or found) for the resolution.
    Plan {
        /// The plan.
        plan: &'a InstallPlan,
        /// Its generation.
        generation: i64,
    },
    /// Nothing to install, and the plan the Subscription waited on was
    /// stuck on a failed unpack of what the catalog no longer offers: it
    /// lets go of that plan, so the plan is collected.
    LetGo,
    /// Nothing to install.
    Nothing,
}

/// The status of a Subscription the resolver chose `csv` for: the plan
/// hand-off, and no resolution or unpack failure left.
pub fn resolved(
    subscription: &Subscription,
    csv: &str,
    hand_off: HandOff<'_>,
    now: Timestamp,
) -> SubscriptionStatus {
    let mut status = subscription.status.clone().unwrap_or_default();
    match hand_off {
        HandOff::Plan { plan, generation } => {
            hand_to(&mut status, plan, Some(csv.to_owned()));
            status.install_plan_generation = Some(generation);
        }
        HandOff::LetGo => {
            status.current_csv = Some(csv.to_owned());
            status.install_plan_ref = None;
            status.install_plan = None;
        }
        HandOff::Nothing => status.current_csv = Some(csv.to_owned()),
    }
    for type_ in [
        Type::RESOLUTION_FAILED,
        Type::BUNDLE_UNPACKING,
        Type::BUNDLE_UNPACK_FAILED,
    ] {
        conditions::remove(&mut status.conditions, type_.as_str());
    }
    touched(subscription, status, now)
}
