//! Copied CSVs: which namespaces get a copy of an operator's CSV, what a copy
//! looks like, when an existing copy must be updated, and when a copy is
//! garbage.
//!
//! A copy tells users and consoles of a target namespace that an operator in
//! another namespace manages it. Upstream: `ensureCSVsInNamespaces`,
//! `csvCopyPrototype`, `copyableCSVHash`, `copyToNamespace` in
//! `operatorgroup.go`; `syncCopyCSV`, `removeDanglingChildCSVs`,
//! `syncOLMConfig` in `operator.go`.
//!
//! ## Copy hashes
//!
//! Each copy carries two annotations, [`COPY_HASH_SPEC_ANNOTATION`] (over the
//! copy's name, labels, annotations and spec) and
//! [`COPY_HASH_STATUS_ANNOTATION`] (over its status), both [`crate::decide::hash::content_hash`]es of the
//! desired copy with the two hash annotations themselves left out. Comparing
//! the desired hashes with the ones on the existing copy tells whether its
//! metadata/spec or its status need writing, so a parent sync that changed
//! nothing writes nothing, and a watch of the copies' metadata alone is enough
//! to decide. (Upstream computes the same pair in an informer transform and
//! keeps it in memory only, under the keys `$copyhash-spec` and
//! `$copyhash-status`, which the API server would refuse as annotation keys;
//! its hash bytes differ from ours, see [`crate::decide::hash`].)

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use olm_api::{
    conditions,
    csv::{ClusterServiceVersion, CsvPhase, CsvReason},
    labels,
    olm_config::{OLMConfig, OLMConfigConditionReason, OLMConfigConditionType, OLMConfigStatus},
    operator_group::OperatorGroup,
};
use serde::Serialize;

use super::Error;
use super::{
    csv_status::{CsvEvent, EventType},
    hash::content_hash,
    operator_group::{NAMESPACE_ALL, NamespaceSet},
};

/// The annotation recording the hash of a copy's metadata and spec.
pub const COPY_HASH_SPEC_ANNOTATION: &str = "olm.copyhash/spec";

/// The annotation recording the hash of a copy's status.
pub const COPY_HASH_STATUS_ANNOTATION: &str = "olm.copyhash/status";

/// Whether a CSV is a copy (reason `Copied`, an `olm.operatorNamespace`
/// annotation naming another namespace, or an `olm.copiedFrom` label);
/// copies are never driven through the lifecycle.
pub fn is_copied(csv: &ClusterServiceVersion) -> bool {
    if csv.status.as_ref().and_then(|s| s.reason.as_ref()) == Some(&CsvReason::COPIED) {
        return true;
    }
    let namespace = csv.metadata.namespace.as_deref().unwrap_or_default();
    let foreign_operator_namespace = csv
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(labels::OPERATOR_NAMESPACE))
        .is_some_and(|operator_namespace| operator_namespace != namespace);
    let labelled = csv
        .metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(labels::COPIED_FROM));
    foreign_operator_namespace || labelled
}

/// Reasons for which a CSV is not copied: it is itself a copy, or it has no
/// usable OperatorGroup.
pub const UNCOPIABLE_REASONS: &[CsvReason] = &[
    CsvReason::COPIED,
    CsvReason::INVALID_INSTALL_MODES,
    CsvReason::NO_TARGET_NAMESPACES,
    CsvReason::UNSUPPORTED_OPERATOR_GROUP,
    CsvReason::NO_OPERATOR_GROUP,
    CsvReason::TOO_MANY_OPERATOR_GROUPS,
    CsvReason::INTER_OPERATOR_GROUP_OWNER_CONFLICT,
    CsvReason::CANNOT_MODIFY_STATIC_OPERATOR_GROUP_PROVIDED_APIS,
];

/// Whether a CSV must not be copied: phase None, or an uncopiable reason.
pub fn is_uncopiable(csv: &ClusterServiceVersion) -> bool {
    let status = csv.status.as_ref();
    let phase = status
        .and_then(|s| s.phase.clone())
        .unwrap_or(CsvPhase::NONE);
    if phase == CsvPhase::NONE {
        return true;
    }
    status
        .and_then(|s| s.reason.as_ref())
        .is_some_and(|reason| UNCOPIABLE_REASONS.contains(reason))
}

/// The message of a copy's status.
pub fn copied_message(parent_namespace: &str) -> String {
    format!("The operator is running in {parent_namespace} but is managing this namespace")
}

/// The copy of `parent` for `target_namespace`, with its copy-hash
/// annotations (upstream's `csvCopyPrototype`):
///
/// - same name, spec and status;
/// - annotations minus `olm.targetNamespaces` and
///   `kubectl.kubernetes.io/last-applied-configuration`;
/// - labels minus every `operators.coreos.com/*` label, plus
///   `olm.copiedFrom=<parent namespace>`;
/// - status reason `Copied`, message `The operator is running in <ns> but is
///   managing this namespace`.
///
/// No uid, resourceVersion, ownerReferences or finalizers are carried over.
pub fn copy_for_namespace(
    parent: &ClusterServiceVersion,
    target_namespace: &str,
) -> Result<ClusterServiceVersion, Error> {
    let parent_namespace = parent.metadata.namespace.clone().unwrap_or_default();
    let annotations: BTreeMap<String, String> = parent
        .metadata
        .annotations
        .iter()
        .flatten()
        .filter(|(key, _)| {
            !matches!(
                key.as_str(),
                labels::TARGET_NAMESPACES
                    | labels::KUBECTL_LAST_APPLIED
                    | COPY_HASH_SPEC_ANNOTATION
                    | COPY_HASH_STATUS_ANNOTATION
                    | labels::COPY_HASH_SPEC
                    | labels::COPY_HASH_STATUS
            )
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut copy_labels: BTreeMap<String, String> = parent
        .metadata
        .labels
        .iter()
        .flatten()
        .filter(|(key, _)| !key.starts_with(labels::OPERATOR_COMPONENT_PREFIX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    copy_labels.insert(labels::COPIED_FROM.to_owned(), parent_namespace.clone());

    let mut status = parent.status.clone().unwrap_or_default();
    status.reason = Some(CsvReason::COPIED);
    status.message = Some(copied_message(&parent_namespace));

    let mut copy = ClusterServiceVersion {
        metadata: ObjectMeta {
            name: parent.metadata.name.clone(),
            namespace: Some(target_namespace.to_owned()),
            annotations: Some(annotations),
            labels: Some(copy_labels),
            ..Default::default()
        },
        spec: parent.spec.clone(),
        status: Some(status),
    };
    let hashes = CopyHashes::of(&copy)?;
    let annotations = copy.metadata.annotations.get_or_insert_with(BTreeMap::new);
    annotations.insert(COPY_HASH_SPEC_ANNOTATION.to_owned(), hashes.spec);
    annotations.insert(COPY_HASH_STATUS_ANNOTATION.to_owned(), hashes.status);
    Ok(copy)
}

/// The two copy hashes of a CSV.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopyHashes {
    /// Hash of name, labels, annotations (without the hash annotations) and
    /// spec.
    pub spec: String,
    /// Hash of the status.
    pub status: String,
}

impl CopyHashes {
    /// Computes the hashes of a CSV (upstream's `copyableCSVHash`).
    pub fn of(csv: &ClusterServiceVersion) -> Result<Self, Error> {
        #[derive(Serialize)]
        struct HashedPart<'a> {
            name: &'a Option<String>,
            labels: &'a Option<BTreeMap<String, String>>,
            annotations: BTreeMap<&'a String, &'a String>,
            spec: &'a olm_api::csv::ClusterServiceVersionSpec,
        }
        let annotations = csv
            .metadata
            .annotations
            .iter()
            .flatten()
            .filter(|(key, _)| {
                !matches!(
                    key.as_str(),
                    COPY_HASH_SPEC_ANNOTATION | COPY_HASH_STATUS_ANNOTATION
                )
            })
            .collect();
        let part = HashedPart {
            name: &csv.metadata.name,
            labels: &csv.metadata.labels,
            annotations,
            spec: &csv.spec,
        };
        Ok(Self {
            spec: content_hash(&part, "copied csv metadata and spec")?,
            status: content_hash(&csv.status.clone().unwrap_or_default(), "copied csv status")?,
        })
    }

    /// The hashes recorded in a copy's annotations, if both are there.
    pub fn recorded(csv: &ClusterServiceVersion) -> Option<Self> {
        let annotations = csv.metadata.annotations.as_ref()?;
        Some(Self {
            spec: annotations.get(COPY_HASH_SPEC_ANNOTATION)?.clone(),
            status: annotations.get(COPY_HASH_STATUS_ANNOTATION)?.clone(),
        })
    }
}

/// What to do about the copy in one namespace.
#[derive(Clone, Debug, PartialEq)]
pub enum CopyAction {
    /// No copy yet: create this object, then write its status.
    Create(Box<ClusterServiceVersion>),
    /// The copy exists; write what changed.
    Update {
        /// The desired copy.
        copy: Box<ClusterServiceVersion>,
        /// Metadata or spec differ: update the object.
        spec: bool,
        /// Status differs: update the status subresource.
        status: bool,
    },
    /// The copy is up to date.
    UpToDate,
}

/// Compares a desired copy with the hashes recorded on the existing one
/// (`None` when there is no copy in that namespace).
pub fn copy_action(desired: ClusterServiceVersion, existing: Option<&CopyHashes>) -> CopyAction {
    let Some(existing) = existing else {
        return CopyAction::Create(Box::new(desired));
    };
    let wanted = CopyHashes::recorded(&desired);
    let spec = wanted.as_ref().map(|w| &w.spec) != Some(&existing.spec);
    let status = wanted.as_ref().map(|w| &w.status) != Some(&existing.status);
    if spec || status {
        CopyAction::Update {
            copy: Box::new(desired),
            spec,
            status,
        }
    } else {
        CopyAction::UpToDate
    }
}

/// Whether CSVs are copied: yes unless the `cluster` OLMConfig sets
/// `spec.features.disableCopiedCSVs` (a missing OLMConfig means yes).
pub fn copies_enabled(config: Option<&OLMConfig>) -> bool {
    config.is_none_or(|config| !config.copied_csvs_disabled())
}

/// Where copies of a CSV belong.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CopyTargets {
    /// Namespaces that must hold an up-to-date copy.
    pub copy_into: Vec<String>,
    /// Namespaces whose copies (belonging to this group) must be checked for
    /// garbage with [`dangling_copy`].
    pub check_for_garbage: Vec<String>,
    /// With copies disabled for an AllNamespaces group: namespaces whose copy
    /// must be deleted outright (every non-protected namespace holding one).
    pub delete_from: Vec<String>,
    /// A Warning event to record on the parent, when copying is disabled.
    pub event: Option<CsvEvent>,
}

/// Decides where the copies of `parent` (an active member of `group`) belong.
///
/// - With copying enabled, or for a group not targeting all namespaces: every
///   namespace of the cluster the group targets gets a copy, except the
///   group's own; the other namespaces are checked for stale copies.
/// - With `disableCopiedCSVs` for an AllNamespaces group: only the protected
///   namespaces (other than the parent's) get a copy; every other namespace
///   holding a copy loses it, and a Warning `DisabledCopiedCSVs` event
///   `CSV copying disabled for <ns>/<name>` is recorded.
///
/// `namespaces` are all namespaces of the cluster; `namespaces_with_copies`
/// those currently holding a copy of this parent (label `olm.copiedFrom`).
pub fn copy_targets(
    parent: &ClusterServiceVersion,
    group: &OperatorGroup,
    namespaces: &[String],
    copied_csvs_enabled: bool,
    protected_namespaces: &BTreeSet<String>,
    namespaces_with_copies: &[String],
) -> CopyTargets {
    let group_namespace = group.metadata.namespace.as_deref().unwrap_or_default();
    let targets = NamespaceSet::new(
        group
            .status
            .as_ref()
            .map(|s| s.namespaces.as_slice())
            .unwrap_or_default(),
    );
    let parent_namespace = parent.metadata.namespace.as_deref().unwrap_or_default();
    let mut plan = CopyTargets::default();

    if copied_csvs_enabled || !targets.is_all_namespaces() {
        for namespace in namespaces {
            if namespace == group_namespace || namespace == NAMESPACE_ALL {
                continue;
            }
            if targets.contains(namespace) {
                plan.copy_into.push(namespace.clone());
            } else {
                plan.check_for_garbage.push(namespace.clone());
            }
        }
        return plan;
    }

    plan.copy_into = protected_namespaces
        .iter()
        .filter(|ns| ns.as_str() != parent_namespace)
        .cloned()
        .collect();
    plan.delete_from = namespaces_with_copies
        .iter()
        .filter(|ns| !protected_namespaces.contains(*ns))
        .cloned()
        .collect();
    plan.event = Some(CsvEvent {
        event_type: EventType::Warning,
        reason: OLMConfigConditionType::DISABLED_COPIED_CSVS
            .as_str()
            .to_owned(),
        message: format!(
            "CSV copying disabled for {parent_namespace}/{}",
            parent.metadata.name.as_deref().unwrap_or_default()
        ),
    });
    plan
}

/// Why a copy is garbage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DanglingReason {
    /// The copy has no `olm.operatorNamespace` annotation.
    MissingOperatorNamespace,
    /// No CSV of that name exists in the operator namespace.
    ParentMissing,
    /// The parent failed with `InterOperatorGroupOwnerConflict`.
    ParentConflicting,
    /// The parent's `olm.targetNamespaces` no longer covers the copy's
    /// namespace.
    NoLongerTargeted,
    /// The "copy" sits in the parent's own namespace.
    SameNamespaceAsParent,
}

/// Whether a copy must be deleted (upstream's `removeDanglingChildCSVs`);
/// `parent` is the CSV of the same name in the copy's operator namespace.
pub fn dangling_copy(
    copy: &ClusterServiceVersion,
    parent: Option<&ClusterServiceVersion>,
) -> Option<DanglingReason> {
    let annotations = copy.metadata.annotations.as_ref();
    if annotations
        .and_then(|a| a.get(labels::OPERATOR_NAMESPACE))
        .is_none()
    {
        return Some(DanglingReason::MissingOperatorNamespace);
    }
    let Some(parent) = parent else {
        return Some(DanglingReason::ParentMissing);
    };
    let parent_status = parent.status.as_ref();
    if parent_status.and_then(|s| s.phase.as_ref()) == Some(&CsvPhase::FAILED)
        && parent_status.and_then(|s| s.reason.as_ref())
            == Some(&CsvReason::INTER_OPERATOR_GROUP_OWNER_CONFLICT)
    {
        return Some(DanglingReason::ParentConflicting);
    }
    let copy_namespace = copy.metadata.namespace.as_deref().unwrap_or_default();
    if let Some(parent_annotations) = parent.metadata.annotations.as_ref() {
        let targets = parent_annotations
            .get(labels::TARGET_NAMESPACES)
            .map(String::as_str)
            .unwrap_or_default();
        if !NamespaceSet::from_annotation(targets).contains(copy_namespace) {
            return Some(DanglingReason::NoLongerTargeted);
        }
    }
    if parent.metadata.namespace.as_deref() == Some(copy_namespace) {
        return Some(DanglingReason::SameNamespaceAsParent);
    }
    None
}

/// The OLMConfig status saying [`disabled_copied_csvs_condition`]; `None`
/// when `current` already says it.
pub fn olm_config_status(
    current: Option<&OLMConfigStatus>,
    copied_csvs_enabled: bool,
    copies_out_of_place: bool,
    now: jiff::Timestamp,
) -> Option<OLMConfigStatus> {
    let mut status = current.cloned().unwrap_or_default();
    let wanted = disabled_copied_csvs_condition(copied_csvs_enabled, copies_out_of_place);
    conditions::set(&mut status.conditions, wanted, now).then_some(status)
}

/// The OLMConfig `DisabledCopiedCSVs` condition (upstream's
/// `getCopiedCSVsCondition`): `copies_out_of_place` is true when some operator
/// installed for all namespaces does not have exactly the expected copies.
pub fn disabled_copied_csvs_condition(
    copied_csvs_enabled: bool,
    copies_out_of_place: bool,
) -> Condition {
    let condition_type = OLMConfigConditionType::DISABLED_COPIED_CSVS;
    if copied_csvs_enabled {
        let message = if copies_out_of_place {
            "Copied CSVs are enabled and at least one copied CSVs is missing"
        } else {
            "Copied CSVs are enabled and present across the cluster"
        };
        return conditions::metav1(
            condition_type.as_str(),
            conditions::FALSE,
            OLMConfigConditionReason::COPIED_CSVS_ENABLED.as_str(),
            message,
            None,
        );
    }
    let reason = OLMConfigConditionReason::COPIED_CSVS_DISABLED;
    if copies_out_of_place {
        conditions::metav1(
            condition_type.as_str(),
            conditions::FALSE,
            reason.as_str(),
            "Copied CSVs are disabled and at least one unexpected copied CSV was found for an operator installed in AllNamespace mode",
            None,
        )
    } else {
        conditions::metav1(
            condition_type.as_str(),
            conditions::TRUE,
            reason.as_str(),
            "Copied CSVs are disabled and no unexpected copied CSVs were found for operators installed in AllNamespace mode",
            None,
        )
    }
}

/// Whether an AllNamespaces operator has exactly the copies it should
/// (upstream's `getCopiedCSVEvaluatorFunc`): with copies enabled, one in every
/// active namespace but its own (`active_namespaces` counts them all); with
/// copies disabled, exactly one in each protected namespace.
pub fn copies_as_expected(
    copied_csvs_enabled: bool,
    active_namespaces: usize,
    protected_namespaces: &BTreeSet<String>,
    namespaces_with_copies: &BTreeSet<String>,
) -> bool {
    if copied_csvs_enabled {
        return active_namespaces.saturating_sub(1) == namespaces_with_copies.len();
    }
    protected_namespaces == namespaces_with_copies
}

/// What the copy watch keeps of one existing copy: where it is and the two
/// hashes recorded on it (`None` when it carries none, for example a copy
/// written by upstream OLM, which keeps its hashes in memory only).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExistingCopy {
    /// The hashes recorded in its annotations.
    pub hashes: Option<CopyHashes>,
}

/// One copy to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopyWrite {
    /// Target namespace.
    pub namespace: String,
    /// Metadata and spec must be written (always for a new copy).
    pub spec: bool,
    /// The status must be written (always for a new copy).
    pub status: bool,
}

/// Everything to do about the copies of one parent CSV.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CopyPlan {
    /// The copy as every target namespace gets it, with its hash
    /// annotations; its namespace is set per write. `None` when nothing is
    /// written.
    pub prototype: Option<ClusterServiceVersion>,
    /// Copies to create or update, sorted by namespace.
    pub writes: Vec<CopyWrite>,
    /// Namespaces whose copy must be deleted, sorted.
    pub deletes: Vec<String>,
    /// A Warning event to record on the parent (copies disabled and some
    /// deleted).
    pub event: Option<CsvEvent>,
}

/// What [`plan_copies`] looks at.
#[derive(Clone, Copy, Debug)]
pub struct CopyInputs<'a> {
    /// The parent CSV (never a copy).
    pub parent: &'a ClusterServiceVersion,
    /// The group the parent is an active member of
    /// ([`crate::decide::operator_group::is_active_member`]); `None` when it
    /// is not (yet) one.
    pub group: Option<&'a OperatorGroup>,
    /// Every namespace of the cluster.
    pub namespaces: &'a [String],
    /// Whether the `cluster` OLMConfig allows copies ([`copies_enabled`]).
    pub copied_csvs_enabled: bool,
    /// Namespaces that keep copies even when copying is disabled
    /// (`--protectedCopiedCSVNamespaces`).
    pub protected_namespaces: &'a BTreeSet<String>,
    /// The existing copies of this parent, by namespace.
    pub existing: &'a BTreeMap<String, ExistingCopy>,
}

/// Plans the copies of one parent CSV (upstream's `ensureCSVsInNamespaces`,
/// `removeDanglingChildCSVs` and the `disableCopiedCSVs` branch of
/// `syncCopyCSV`, in one pure step):
///
/// - a parent being deleted, or failed with `InterOperatorGroupOwnerConflict`,
///   loses every copy;
/// - a parent that is not an active member of a group keeps its copies as
///   they are (its membership is about to be written);
/// - otherwise a copy belongs in each namespace [`copy_targets`] names; copies
///   anywhere else are deleted; an uncopiable parent
///   ([`is_uncopiable`]) gets no writes but still loses copies outside its
///   targets;
/// - a copy is written only when the hashes recorded on it differ from the
///   desired ones, so re-planning an unchanged parent writes nothing.
///
/// The Warning event `DisabledCopiedCSVs` is planned only when copying is
/// disabled and copies are actually deleted; upstream records it on every
/// sync of such a parent, which floods the event stream on every resync.
pub fn plan_copies(inputs: CopyInputs<'_>) -> Result<CopyPlan, Error> {
    let parent = inputs.parent;
    let existing_namespaces = || inputs.existing.keys().cloned().collect::<Vec<_>>();
    let status = parent.status.as_ref();
    let conflicting = status.and_then(|s| s.phase.as_ref()) == Some(&CsvPhase::FAILED)
        && status.and_then(|s| s.reason.as_ref())
            == Some(&CsvReason::INTER_OPERATOR_GROUP_OWNER_CONFLICT);
    if parent.metadata.deletion_timestamp.is_some() || conflicting {
        return Ok(CopyPlan {
            deletes: existing_namespaces(),
            ..CopyPlan::default()
        });
    }
    let Some(group) = inputs.group else {
        return Ok(CopyPlan::default());
    };
    let with_copies = existing_namespaces();
    let targets = copy_targets(
        parent,
        group,
        inputs.namespaces,
        inputs.copied_csvs_enabled,
        inputs.protected_namespaces,
        &with_copies,
    );
    let wanted: BTreeSet<&String> = targets.copy_into.iter().collect();
    let parent_namespace = parent.metadata.namespace.as_deref().unwrap_or_default();
    let deletes: Vec<String> = with_copies
        .iter()
        .filter(|ns| !wanted.contains(ns) || ns.as_str() == parent_namespace)
        .cloned()
        .collect();
    let event = targets.event.filter(|_| !deletes.is_empty());
    let mut plan = CopyPlan {
        deletes,
        event,
        ..CopyPlan::default()
    };
    if is_uncopiable(parent) || targets.copy_into.is_empty() {
        return Ok(plan);
    }
    let prototype = copy_for_namespace(parent, parent_namespace)?;
    let desired = CopyHashes::recorded(&prototype);
    for namespace in targets.copy_into {
        if namespace == parent_namespace {
            continue;
        }
        let recorded = inputs.existing.get(&namespace).map(|c| c.hashes.as_ref());
        let (spec, status) = match (recorded, desired.as_ref()) {
            (None, _) => (true, true),
            (Some(Some(recorded)), Some(desired)) => (
                recorded.spec != desired.spec,
                recorded.status != desired.status,
            ),
            (Some(_), _) => (true, true),
        };
        if spec || status {
            plan.writes.push(CopyWrite {
                namespace,
                spec,
                status,
            });
        }
    }
    if !plan.writes.is_empty() {
        plan.prototype = Some(prototype);
    }
    Ok(plan)
}
