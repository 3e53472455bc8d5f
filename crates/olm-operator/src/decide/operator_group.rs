//! OperatorGroup rules: which namespaces a group targets, the membership
//! annotations OLM writes on CSVs, whether a CSV's install modes allow the
//! group's namespaces, and how the APIs provided by intersecting groups are
//! kept apart (`olm.providedAPIs`).
//!
//! Upstream: `pkg/controller/operators/olm/operatorgroup.go`, `groups.go`,
//! `operator.go` (`operatorGroupForCSV`, the provided-API switch of
//! `transitionCSVState`) and operator-framework/api's `InstallModeSet`.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Namespace;
use olm_api::{
    csv::{ClusterServiceVersion, CsvPhase, CsvReason, InstallMode, InstallModeType},
    labels,
    operator_group::OperatorGroup,
};

use super::Error;
use super::{
    api_surface::{ApiSet, format_api_set, parse_api_set},
    label_selector::Selector,
};

/// The namespace name that stands for "all namespaces" (`metav1.NamespaceAll`).
pub const NAMESPACE_ALL: &str = "";

/// Message of a CSV that fails because its namespace has no OperatorGroup.
pub const NO_OPERATOR_GROUP_MESSAGE: &str = "csv in namespace with no operatorgroups";

/// Message of a CSV that fails because its namespace has several
/// OperatorGroups.
pub const TOO_MANY_OPERATOR_GROUPS_MESSAGE: &str =
    "csv created in namespace with multiple operatorgroups, can't pick one automatically";

/// Message of a CSV whose group selects no namespace at all.
pub const NO_TARGET_NAMESPACES_MESSAGE: &str =
    "no targetNamespaces are matched operatorgroups namespace selection";

/// Message of a CSV without the `olm.targetNamespaces` annotation.
pub const MISSING_TARGETS_ANNOTATION_MESSAGE: &str = "csv missing olm.targetNamespaces annotation";

/// Message of a CSV whose static group would need other provided APIs.
pub const STATIC_PROVIDED_APIS_MESSAGE: &str =
    "static provided api operatorgroup cannot be modified by these apis";

/// Message of a CSV whose APIs are provided by an intersecting group.
pub const INTERSECTING_GROUPS_MESSAGE: &str = "intersecting operatorgroups provide the same apis";

/// A namespace as the target computation needs to see it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObservedNamespace {
    /// Name of the namespace.
    pub name: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
}

impl ObservedNamespace {
    /// A namespace with a name and labels.
    pub fn new(name: &str, labels: &[(&str, &str)]) -> Self {
        Self {
            name: name.to_owned(),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }
}

impl From<&Namespace> for ObservedNamespace {
    fn from(namespace: &Namespace) -> Self {
        Self {
            name: namespace.metadata.name.clone().unwrap_or_default(),
            labels: namespace.metadata.labels.clone().unwrap_or_default(),
        }
    }
}

/// The namespaces an OperatorGroup targets, as `status.namespaces` should
/// list them: sorted and without duplicates, `[""]` for all namespaces.
///
/// - `spec.targetNamespaces`, if not empty (an empty entry in it is an error).
/// - Otherwise `spec.selector` over the given namespaces; no selector, or one
///   without requirements, means all namespaces. A selector may match none.
///
/// The group's own namespace is not added. Upstream returns the set in map
/// order; we sort, so `status.namespaces` is stable.
pub fn target_namespaces(
    group: &OperatorGroup,
    namespaces: &[ObservedNamespace],
) -> Result<Vec<String>, Error> {
    let spec = &group.spec;
    let mut targets = BTreeSet::new();
    if !spec.target_namespaces.is_empty() {
        if spec.target_namespaces.iter().any(|ns| ns == NAMESPACE_ALL) {
            return Err(Error::TargetNamespacesContainAll {
                target_namespaces: format!("[{}]", spec.target_namespaces.join(" ")),
            });
        }
        targets.extend(spec.target_namespaces.iter().cloned());
    } else {
        let selector = spec.selector.as_ref().map(Selector::new).transpose()?;
        match selector {
            Some(selector) if !selector.is_empty() => {
                targets.extend(
                    namespaces
                        .iter()
                        .filter(|ns| selector.matches(&ns.labels))
                        .map(|ns| ns.name.clone()),
                );
            }
            _ => {
                targets.insert(NAMESPACE_ALL.to_owned());
            }
        }
    }
    Ok(targets.into_iter().collect())
}

/// Whether newly computed targets differ from `status.namespaces` as sets
/// (upstream's `namespacesChanged`); the status is rewritten only then.
pub fn namespaces_changed(computed: &[String], status: &[String]) -> bool {
    if computed.len() != status.len() {
        return true;
    }
    let computed: BTreeSet<&String> = computed.iter().collect();
    status.iter().any(|ns| !computed.contains(ns))
}

/// The `olm.targetNamespaces` value for a group's `status.namespaces`: a sorted
/// copy joined with `,` (upstream's `BuildTargetNamespaces`). `""` stands for
/// all namespaces, and also comes out of an empty list.
pub fn build_target_namespaces(status_namespaces: &[String]) -> String {
    let mut sorted = status_namespaces.to_vec();
    sorted.sort();
    sorted.join(",")
}

fn status_namespaces(group: &OperatorGroup) -> &[String] {
    group
        .status
        .as_ref()
        .map(|status| status.namespaces.as_slice())
        .unwrap_or_default()
}

/// Whether the group has computed its namespaces. The API server drops an
/// empty `status.namespaces`, so a group whose selector matched nothing reads
/// like a group that was never synced; upstream writes no
/// `olm.targetNamespaces` annotation in either case.
fn has_target_list(group: &OperatorGroup) -> bool {
    !status_namespaces(group).is_empty()
}

/// Whether a CSV's membership annotations differ from what the group says
/// (upstream's `operatorGroupAnnotationsDiffer`).
pub fn membership_annotations_differ(
    annotations: Option<&BTreeMap<String, String>>,
    group: &OperatorGroup,
) -> bool {
    let Some(annotations) = annotations else {
        return true;
    };
    let wanted = [
        (
            labels::OPERATOR_NAMESPACE,
            group.metadata.namespace.clone().unwrap_or_default(),
        ),
        (
            labels::OPERATOR_GROUP,
            group.metadata.name.clone().unwrap_or_default(),
        ),
        (
            labels::TARGET_NAMESPACES,
            build_target_namespaces(status_namespaces(group)),
        ),
    ];
    wanted
        .iter()
        .any(|(key, value)| annotations.get(*key) != Some(value))
}

/// The CSV's annotations with the membership annotations of `group` set:
/// `olm.operatorNamespace`, `olm.operatorGroup`, and `olm.targetNamespaces`
/// when the group has a target list (upstream's `setOperatorGroupAnnotations`).
pub fn with_membership_annotations(
    annotations: Option<&BTreeMap<String, String>>,
    group: &OperatorGroup,
) -> BTreeMap<String, String> {
    let mut annotations = annotations.cloned().unwrap_or_default();
    annotations.insert(
        labels::OPERATOR_NAMESPACE.to_owned(),
        group.metadata.namespace.clone().unwrap_or_default(),
    );
    annotations.insert(
        labels::OPERATOR_GROUP.to_owned(),
        group.metadata.name.clone().unwrap_or_default(),
    );
    if has_target_list(group) {
        annotations.insert(
            labels::TARGET_NAMESPACES.to_owned(),
            build_target_namespaces(status_namespaces(group)),
        );
    }
    annotations
}

/// Whether `annotations` place a CSV in `group` and agree with its targets
/// (upstream's `operatorGroupFromAnnotations`, given the group the
/// `olm.operatorGroup` annotation names). Copies, RBAC in target namespaces and
/// similar follow-ups run only for such CSVs.
pub fn is_active_member(csv: &ClusterServiceVersion, group: &OperatorGroup) -> bool {
    let Some(annotations) = csv.metadata.annotations.as_ref() else {
        return false;
    };
    let namespace = csv.metadata.namespace.as_deref().unwrap_or_default();
    annotations
        .get(labels::OPERATOR_NAMESPACE)
        .map(String::as_str)
        == Some(namespace)
        && group.metadata.namespace.as_deref() == Some(namespace)
        && annotations.get(labels::OPERATOR_GROUP) == group.metadata.name.as_ref()
        && annotations
            .get(labels::TARGET_NAMESPACES)
            .map(String::as_str)
            == Some(build_target_namespaces(status_namespaces(group)).as_str())
}

/// The install modes a CSV declares, as a set (operator-framework/api's
/// `InstallModeSet`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InstallModeSet(BTreeMap<String, bool>);

impl InstallModeSet {
    /// Whether the mode is declared and supported.
    pub fn supports_mode(&self, mode: &InstallModeType) -> bool {
        self.0.get(mode.as_str()).copied().unwrap_or(false)
    }

    /// Whether this set allows an operator in `operator_namespace` to watch
    /// `namespaces` (the split `olm.targetNamespaces` value); `Err` carries
    /// upstream's message, which becomes the CSV message with reason
    /// `UnsupportedOperatorGroup`.
    pub fn supports(&self, operator_namespace: &str, namespaces: &[String]) -> Result<(), String> {
        let own = InstallModeType::OWN_NAMESPACE;
        match namespaces {
            [] => Err("operatorgroup has invalid selected namespaces, cannot configure to watch zero namespaces".to_owned()),
            [only] if only == operator_namespace => {
                if self.supports_mode(&own) {
                    Ok(())
                } else {
                    Err(format!("{own} InstallModeType not supported, cannot configure to watch own namespace"))
                }
            }
            [only] if only == NAMESPACE_ALL => {
                let all = InstallModeType::ALL_NAMESPACES;
                if self.supports_mode(&all) {
                    Ok(())
                } else {
                    Err(format!("{all} InstallModeType not supported, cannot configure to watch all namespaces"))
                }
            }
            [_] => {
                let single = InstallModeType::SINGLE_NAMESPACE;
                if self.supports_mode(&single) {
                    Ok(())
                } else {
                    Err(format!("{single} InstallModeType not supported, cannot configure to watch one namespace"))
                }
            }
            many => {
                let multi = InstallModeType::MULTI_NAMESPACE;
                if !self.supports_mode(&multi) {
                    return Err(format!(
                        "{multi} InstallModeType not supported, cannot configure to watch {} namespaces",
                        many.len()
                    ));
                }
                for namespace in many {
                    if namespace == operator_namespace && !self.supports_mode(&own) {
                        return Err(format!(
                            "{own} InstallModeType not supported, cannot configure to watch own namespace"
                        ));
                    }
                    if namespace == NAMESPACE_ALL {
                        return Err("operatorgroup has invalid selected namespaces, NamespaceAll found when |selected namespaces| > 1".to_owned());
                    }
                }
                Ok(())
            }
        }
    }
}

/// Builds the install mode set; a mode type listed twice is an error whose
/// message (Go's `%v` of the list) becomes the CSV message with reason
/// `InvalidInstallModes`.
pub fn install_mode_set(modes: &[InstallMode]) -> Result<InstallModeSet, String> {
    let mut set = BTreeMap::new();
    for mode in modes {
        if set
            .insert(mode.type_.as_str().to_owned(), mode.supported)
            .is_some()
        {
            let listed: Vec<String> = modes
                .iter()
                .map(|m| format!("{{{} {}}}", m.type_, m.supported))
                .collect();
            return Err(format!(
                "InstallMode list contains duplicates, cannot make set: [{}]",
                listed.join(" ")
            ));
        }
    }
    Ok(InstallModeSet(set))
}

/// A set of namespace names where `{""}` means all namespaces (upstream's
/// `NamespaceSet`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NamespaceSet(BTreeSet<String>);

impl NamespaceSet {
    /// A set of the given names.
    pub fn new<S: AsRef<str>>(namespaces: impl IntoIterator<Item = S>) -> Self {
        Self(
            namespaces
                .into_iter()
                .map(|ns| ns.as_ref().to_owned())
                .collect(),
        )
    }

    /// The set written in an `olm.targetNamespaces` value (`""` is all).
    pub fn from_annotation(value: &str) -> Self {
        Self::new(value.split(','))
    }

    /// Whether the set stands for all namespaces.
    pub fn is_all_namespaces(&self) -> bool {
        self.0.len() == 1 && self.0.contains(NAMESPACE_ALL)
    }

    /// Whether the set covers a namespace.
    pub fn contains(&self, namespace: &str) -> bool {
        self.is_all_namespaces() || self.0.contains(namespace)
    }

    /// Whether the set is empty (covers nothing).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The names in the set, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }

    /// The namespaces both sets cover; all namespaces intersected with a set is
    /// that set.
    pub fn intersection(&self, other: &NamespaceSet) -> NamespaceSet {
        if self.is_all_namespaces() {
            return other.clone();
        }
        if other.is_all_namespaces() {
            return self.clone();
        }
        NamespaceSet(self.0.intersection(&other.0).cloned().collect())
    }
}

/// What the intersection rules need to know of a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSurface {
    /// Namespace of the group.
    pub namespace: String,
    /// Name of the group.
    pub name: String,
    /// Its targets, including its own namespace unless it targets all.
    pub targets: NamespaceSet,
    /// Its `olm.providedAPIs` annotation, parsed.
    pub provided_apis: ApiSet,
}

impl GroupSurface {
    /// The surface of a group: `status.namespaces` plus the group's own
    /// namespace when the first entry is not all namespaces (an unsynced group
    /// covers nothing, not even its own namespace, as upstream has it).
    pub fn of(group: &OperatorGroup) -> Self {
        let namespace = group.metadata.namespace.clone().unwrap_or_default();
        let mut namespaces = status_namespaces(group).to_vec();
        if namespaces
            .first()
            .is_some_and(|first| first != NAMESPACE_ALL)
        {
            namespaces.push(namespace.clone());
        }
        let provided = group
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(labels::PROVIDED_APIS))
            .map(|value| parse_api_set(value))
            .unwrap_or_default();
        Self {
            namespace,
            name: group.metadata.name.clone().unwrap_or_default(),
            targets: NamespaceSet::new(namespaces),
            provided_apis: provided,
        }
    }

    fn same_group(&self, other: &GroupSurface) -> bool {
        self.name == other.name && self.namespace == other.namespace
    }
}

/// How a CSV's provided APIs relate to its group and intersecting groups
/// (upstream's `APIReconciliationResult`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApiReconciliation {
    /// The APIs are in the group's annotation but also provided by an
    /// intersecting group: take them out of this group's annotation.
    RemoveApis,
    /// The APIs are not all in the group's annotation and no intersecting group
    /// provides them: add them.
    AddApis,
    /// An intersecting group provides some of them and this group does not
    /// list them all: conflict.
    ApiConflict,
    /// Nothing to do.
    NoApiConflict,
}

/// Upstream's `ReconcileAPIIntersection`: `add` are the CSV's provided APIs,
/// `group` its own group, `others` every other group in the cluster (the
/// group itself is skipped if present).
pub fn reconcile_api_intersection(
    add: &ApiSet,
    group: &GroupSurface,
    others: &[GroupSurface],
) -> ApiReconciliation {
    let provided_by_intersecting: ApiSet = others
        .iter()
        .filter(|other| !other.same_group(group))
        .filter(|other| !group.targets.intersection(&other.targets).is_empty())
        .flat_map(|other| other.provided_apis.iter().cloned())
        .collect();
    let intersecting = add.iter().any(|api| provided_by_intersecting.contains(api));
    let subset = add.is_subset(&group.provided_apis);
    match (subset, intersecting) {
        (true, true) => ApiReconciliation::RemoveApis,
        (false, true) => ApiReconciliation::ApiConflict,
        (false, false) => ApiReconciliation::AddApis,
        (true, false) => ApiReconciliation::NoApiConflict,
    }
}

/// What a CSV's sync does about provided APIs before its phase is handled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProvidedApiDecision {
    /// Nothing to change; go on with the phase.
    Proceed,
    /// Write this value into the group's `olm.providedAPIs` annotation,
    /// requeue the CSV, and stop this sync.
    UpdateGroupAnnotation(String),
    /// Fail the CSV with this reason and message and delete its deployments.
    Fail {
        /// `CannotModifyStaticOperatorGroupProvidedAPIs` or
        /// `InterOperatorGroupOwnerConflict`.
        reason: CsvReason,
        /// The matching message.
        message: &'static str,
    },
    /// Stop this sync without changes: the CSV already failed with an
    /// intersection conflict.
    Stop,
}

/// The provided-API step of a CSV sync: `provided` are the CSV's provided APIs,
/// `group` its group, `all_groups` every group in the cluster, `reason` the
/// CSV's current reason.
pub fn provided_api_decision(
    provided: &ApiSet,
    group: &OperatorGroup,
    all_groups: &[OperatorGroup],
    reason: &CsvReason,
) -> ProvidedApiDecision {
    let surface = GroupSurface::of(group);
    let others: Vec<GroupSurface> = all_groups.iter().map(GroupSurface::of).collect();
    let result = reconcile_api_intersection(provided, &surface, &others);
    let is_static = group.spec.static_provided_apis.unwrap_or(false);
    let already_conflicting = *reason == CsvReason::INTER_OPERATOR_GROUP_OWNER_CONFLICT;
    match result {
        ApiReconciliation::AddApis | ApiReconciliation::RemoveApis if is_static => {
            if already_conflicting {
                ProvidedApiDecision::Stop
            } else {
                ProvidedApiDecision::Fail {
                    reason: CsvReason::CANNOT_MODIFY_STATIC_OPERATOR_GROUP_PROVIDED_APIS,
                    message: STATIC_PROVIDED_APIS_MESSAGE,
                }
            }
        }
        ApiReconciliation::ApiConflict => {
            if already_conflicting {
                ProvidedApiDecision::Stop
            } else {
                ProvidedApiDecision::Fail {
                    reason: CsvReason::INTER_OPERATOR_GROUP_OWNER_CONFLICT,
                    message: INTERSECTING_GROUPS_MESSAGE,
                }
            }
        }
        ApiReconciliation::AddApis => {
            let union: ApiSet = surface.provided_apis.union(provided).cloned().collect();
            let value = format_api_set(&union);
            let current = group
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(labels::PROVIDED_APIS));
            // The parsed annotation may not say what is written (spaces,
            // invalid entries); when the written form is already right, there
            // is nothing to do and the CSV goes on to its requirements.
            if current == Some(&value) {
                ProvidedApiDecision::Proceed
            } else {
                ProvidedApiDecision::UpdateGroupAnnotation(value)
            }
        }
        ApiReconciliation::RemoveApis => {
            let difference: ApiSet = surface
                .provided_apis
                .difference(provided)
                .cloned()
                .collect();
            ProvidedApiDecision::UpdateGroupAnnotation(format_api_set(&difference))
        }
        ApiReconciliation::NoApiConflict => ProvidedApiDecision::Proceed,
    }
}

/// A member CSV of a group as provided-API pruning sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberApis {
    /// The APIs the CSV provides.
    pub provided: ApiSet,
    /// Its phase.
    pub phase: CsvPhase,
    /// Whether it is being deleted.
    pub deleting: bool,
}

/// The new `olm.providedAPIs` value after pruning APIs no member CSV provides
/// any more, or `None` to leave it (upstream's `pruneProvidedAPIs`).
///
/// Static groups are never pruned. Pruning waits while a member that is not
/// being deleted is still None or Pending and provides an API the annotation
/// lacks (it is about to be added). Upstream checks one arbitrary member per
/// such API; we check every member providing it, so the result does not
/// depend on map order.
pub fn pruned_provided_apis(group: &OperatorGroup, members: &[MemberApis]) -> Option<String> {
    if group.spec.static_provided_apis.unwrap_or(false) {
        return None;
    }
    let annotated = GroupSurface::of(group).provided_apis;
    let mut kept = ApiSet::new();
    for member in members {
        for api in &member.provided {
            if annotated.contains(api) {
                kept.insert(api.clone());
            } else if !member.deleting
                && (member.phase == CsvPhase::NONE || member.phase == CsvPhase::PENDING)
            {
                return None;
            }
        }
    }
    (kept.len() < annotated.len()).then(|| format_api_set(&kept))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_install_modes_print_like_go() {
        let modes = vec![
            InstallMode {
                type_: InstallModeType::OWN_NAMESPACE,
                supported: true,
            },
            InstallMode {
                type_: InstallModeType::OWN_NAMESPACE,
                supported: false,
            },
        ];
        assert_eq!(
            install_mode_set(&modes).expect_err("duplicate"),
            "InstallMode list contains duplicates, cannot make set: [{OwnNamespace true} {OwnNamespace false}]"
        );
    }

    #[test]
    fn namespace_set_intersection_handles_all_namespaces() {
        let all = NamespaceSet::new([""]);
        let some = NamespaceSet::new(["gadgets", "gears"]);
        assert_eq!(all.intersection(&some), some);
        assert_eq!(some.intersection(&all), some);
        assert!(all.intersection(&NamespaceSet::default()).is_empty());
        assert!(all.contains("anything"));
        assert!(!some.contains("anything"));
        assert!(NamespaceSet::from_annotation("").is_all_namespaces());
    }
}
