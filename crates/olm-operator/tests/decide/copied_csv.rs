//! Copied CSVs: shape, hashes, placement, garbage, OLMConfig condition.

use std::collections::BTreeSet;

use olm_api::{
    csv::{CsvPhase, CsvReason},
    labels,
};
use olm_operator::decide::{
    copied_csv::{
        COPY_HASH_SPEC_ANNOTATION, COPY_HASH_STATUS_ANNOTATION, CopyAction, CopyHashes,
        DanglingReason, copied_message, copies_as_expected, copies_enabled, copy_action,
        copy_for_namespace, copy_targets, dangling_copy, disabled_copied_csvs_condition, is_copied,
        is_uncopiable, olm_config_status,
    },
    csv_status::EventType,
};

use super::fixtures::{CsvFixture, GroupFixture, gadget_group, minute, widget_operator};

fn parent() -> olm_api::csv::ClusterServiceVersion {
    let group = gadget_group().targeting(&["gadget-system", "cog-works"]);
    widget_operator().member_of(&group).in_phase(
        CsvPhase::SUCCEEDED,
        CsvReason::INSTALL_SUCCEEDED,
        minute(0),
    )
}

#[test]
fn a_copy_says_where_the_operator_runs() {
    let parent = parent();
    let copy = copy_for_namespace(&parent, "cog-works").expect("copyable");
    assert_eq!(
        copy.metadata.name.as_deref(),
        Some("widget-operator.v1.2.0")
    );
    assert_eq!(copy.metadata.namespace.as_deref(), Some("cog-works"));
    assert!(copy.metadata.uid.is_none() && copy.metadata.finalizers.is_none());

    let annotations = copy.metadata.annotations.as_ref().expect("annotations");
    assert!(!annotations.contains_key(labels::TARGET_NAMESPACES));
    assert!(!annotations.contains_key(labels::KUBECTL_LAST_APPLIED));
    assert_eq!(annotations[labels::OPERATOR_GROUP], "gadget-group");
    assert_eq!(annotations[labels::OPERATOR_NAMESPACE], "gadget-system");
    assert!(annotations.contains_key(COPY_HASH_SPEC_ANNOTATION));
    assert!(annotations.contains_key(COPY_HASH_STATUS_ANNOTATION));

    let copy_labels = copy.metadata.labels.as_ref().expect("labels");
    assert_eq!(copy_labels[labels::COPIED_FROM], "gadget-system");
    assert_eq!(copy_labels["tier"], "gold");
    assert!(
        !copy_labels
            .keys()
            .any(|k| k.starts_with("operators.coreos.com/"))
    );

    let status = copy.status.as_ref().expect("status");
    assert_eq!(status.reason, Some(CsvReason::COPIED));
    assert_eq!(status.phase, Some(CsvPhase::SUCCEEDED));
    assert_eq!(
        status.message.as_deref(),
        Some("The operator is running in gadget-system but is managing this namespace")
    );
    assert_eq!(
        copied_message("x"),
        "The operator is running in x but is managing this namespace"
    );
    assert_eq!(copy.spec, parent.spec);
    assert!(is_copied(&copy));
    assert!(is_uncopiable(&copy), "a copy is never copied again");
}

#[test]
fn hashes_decide_what_to_write() {
    let parent = parent();
    let desired = copy_for_namespace(&parent, "cog-works").expect("copyable");
    let recorded = CopyHashes::recorded(&desired).expect("recorded");
    assert_eq!(
        recorded,
        CopyHashes::of(&desired).expect("hashes"),
        "hash annotations do not hash themselves"
    );

    assert!(matches!(
        copy_action(desired.clone(), None),
        CopyAction::Create(_)
    ));
    assert_eq!(
        copy_action(desired.clone(), Some(&recorded)),
        CopyAction::UpToDate
    );

    // The parent moved on: only the status differs.
    let mut moved = parent.clone();
    moved.status.as_mut().expect("status").last_update_time = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(minute(5)),
    );
    let desired = copy_for_namespace(&moved, "cog-works").expect("copyable");
    match copy_action(desired, Some(&recorded)) {
        CopyAction::Update { spec, status, .. } => assert!(!spec && status),
        other => panic!("expected a status update, got {other:?}"),
    }

    // The parent's spec changed: metadata and spec differ.
    let mut edited = parent;
    edited.spec.display_name = "Widget Operator Deluxe".into();
    let desired = copy_for_namespace(&edited, "cog-works").expect("copyable");
    match copy_action(desired, Some(&recorded)) {
        CopyAction::Update { spec, status, .. } => assert!(spec && !status),
        other => panic!("expected a spec update, got {other:?}"),
    }
}

#[test]
fn copies_go_to_targets_except_the_groups_own_namespace() {
    let parent = parent();
    let namespaces: Vec<String> = ["gadget-system", "cog-works", "sprocket-yard"]
        .map(str::to_owned)
        .to_vec();
    let group = gadget_group().targeting(&["gadget-system", "cog-works"]);
    let plan = copy_targets(&parent, &group, &namespaces, true, &BTreeSet::new(), &[]);
    assert_eq!(plan.copy_into, ["cog-works"]);
    assert_eq!(plan.check_for_garbage, ["sprocket-yard"]);
    assert!(plan.delete_from.is_empty() && plan.event.is_none());

    let all = gadget_group().targeting_all_namespaces();
    let plan = copy_targets(&parent, &all, &namespaces, true, &BTreeSet::new(), &[]);
    assert_eq!(plan.copy_into, ["cog-works", "sprocket-yard"]);

    // Copying disabled: only protected namespaces keep a copy.
    let protected: BTreeSet<String> =
        ["sprocket-yard".to_owned(), "gadget-system".to_owned()].into();
    let with_copies = ["cog-works".to_owned(), "sprocket-yard".to_owned()];
    let plan = copy_targets(&parent, &all, &namespaces, false, &protected, &with_copies);
    assert_eq!(
        plan.copy_into,
        ["sprocket-yard"],
        "not into the parent's own namespace"
    );
    assert_eq!(plan.delete_from, ["cog-works"]);
    let event = plan.event.expect("warning event");
    assert_eq!(event.event_type, EventType::Warning);
    assert_eq!(event.reason, "DisabledCopiedCSVs");
    assert_eq!(
        event.message,
        "CSV copying disabled for gadget-system/widget-operator.v1.2.0"
    );

    // Disabling only concerns AllNamespaces groups.
    let plan = copy_targets(
        &parent,
        &group,
        &namespaces,
        false,
        &protected,
        &with_copies,
    );
    assert_eq!(plan.copy_into, ["cog-works"]);
    assert!(plan.event.is_none());
}

#[test]
fn uncopiable_reasons_are_upstreams() {
    for reason in [
        CsvReason::COPIED,
        CsvReason::INVALID_INSTALL_MODES,
        CsvReason::NO_TARGET_NAMESPACES,
        CsvReason::UNSUPPORTED_OPERATOR_GROUP,
        CsvReason::NO_OPERATOR_GROUP,
        CsvReason::TOO_MANY_OPERATOR_GROUPS,
        CsvReason::INTER_OPERATOR_GROUP_OWNER_CONFLICT,
        CsvReason::CANNOT_MODIFY_STATIC_OPERATOR_GROUP_PROVIDED_APIS,
    ] {
        let csv = widget_operator().in_phase(CsvPhase::FAILED, reason.clone(), minute(0));
        assert!(is_uncopiable(&csv), "{reason}");
    }
    assert!(is_uncopiable(&widget_operator()), "phase None");
    assert!(!is_uncopiable(&widget_operator().in_phase(
        CsvPhase::FAILED,
        CsvReason::INSTALL_CHECK_FAILED,
        minute(0)
    )));
}

#[test]
fn stale_copies_are_garbage() {
    let parent = parent();
    let copy = copy_for_namespace(&parent, "cog-works").expect("copyable");
    assert_eq!(dangling_copy(&copy, Some(&parent)), None);
    assert_eq!(
        dangling_copy(&copy, None),
        Some(DanglingReason::ParentMissing)
    );

    let conflicting = parent.clone().in_phase(
        CsvPhase::FAILED,
        CsvReason::INTER_OPERATOR_GROUP_OWNER_CONFLICT,
        minute(1),
    );
    assert_eq!(
        dangling_copy(&copy, Some(&conflicting)),
        Some(DanglingReason::ParentConflicting)
    );

    let narrowed = parent
        .clone()
        .annotated(labels::TARGET_NAMESPACES, "gadget-system");
    assert_eq!(
        dangling_copy(&copy, Some(&narrowed)),
        Some(DanglingReason::NoLongerTargeted)
    );

    let widened = parent.clone().annotated(labels::TARGET_NAMESPACES, "");
    assert_eq!(
        dangling_copy(&copy, Some(&widened)),
        None,
        "all namespaces covers it"
    );

    let mut orphan = copy.clone();
    orphan
        .metadata
        .annotations
        .as_mut()
        .expect("annotations")
        .remove(labels::OPERATOR_NAMESPACE);
    assert_eq!(
        dangling_copy(&orphan, Some(&parent)),
        Some(DanglingReason::MissingOperatorNamespace)
    );

    let misplaced = copy.in_namespace("gadget-system");
    let wide_parent = parent.annotated(labels::TARGET_NAMESPACES, "");
    assert_eq!(
        dangling_copy(&misplaced, Some(&wide_parent)),
        Some(DanglingReason::SameNamespaceAsParent)
    );
}

#[test]
fn olm_config_switches_copies_off() {
    use olm_api::olm_config::{Features, OLMConfig, OLMConfigSpec};
    let config = |disable: Option<bool>| {
        OLMConfig::new(
            "cluster",
            OLMConfigSpec {
                features: Some(Features {
                    disable_copied_csvs: disable,
                    package_server_sync_interval: None,
                }),
            },
        )
    };
    assert!(copies_enabled(None));
    assert!(copies_enabled(Some(&config(None))));
    assert!(copies_enabled(Some(&config(Some(false)))));
    assert!(!copies_enabled(Some(&config(Some(true)))));
}

#[test]
fn olm_config_reports_copied_csvs() {
    let cases = [
        (
            true,
            false,
            "False",
            "CopiedCSVsEnabled",
            "Copied CSVs are enabled and present across the cluster",
        ),
        (
            true,
            true,
            "False",
            "CopiedCSVsEnabled",
            "Copied CSVs are enabled and at least one copied CSVs is missing",
        ),
        (
            false,
            true,
            "False",
            "CopiedCSVsDisabled",
            "Copied CSVs are disabled and at least one unexpected copied CSV was found for an operator installed in AllNamespace mode",
        ),
        (
            false,
            false,
            "True",
            "CopiedCSVsDisabled",
            "Copied CSVs are disabled and no unexpected copied CSVs were found for operators installed in AllNamespace mode",
        ),
    ];
    for (enabled, out_of_place, status, reason, message) in cases {
        let condition = disabled_copied_csvs_condition(enabled, out_of_place);
        assert_eq!(condition.type_, "DisabledCopiedCSVs");
        assert_eq!(
            (
                condition.status.as_str(),
                condition.reason.as_str(),
                condition.message.as_str()
            ),
            (status, reason, message)
        );
    }

    // The OLMConfig status is written when the condition says something
    // new, and only then.
    let now = jiff::Timestamp::from_second(1_800_000_000).unwrap();
    let first = olm_config_status(None, true, false, now).unwrap();
    assert_eq!(first.conditions.len(), 1);
    assert_eq!(olm_config_status(Some(&first), true, false, now), None);
    let flipped = olm_config_status(Some(&first), false, true, now).unwrap();
    assert_eq!(flipped.conditions[0].reason, "CopiedCSVsDisabled");

    let with =
        |names: &[&str]| -> BTreeSet<String> { names.iter().map(|n| (*n).to_owned()).collect() };
    assert!(copies_as_expected(true, 3, &with(&[]), &with(&["a", "b"])));
    assert!(!copies_as_expected(true, 3, &with(&[]), &with(&["a"])));
    assert!(copies_as_expected(false, 3, &with(&["p"]), &with(&["p"])));
    assert!(!copies_as_expected(
        false,
        3,
        &with(&["p"]),
        &with(&["p", "q"])
    ));
}

mod plan {
    use std::collections::{BTreeMap, BTreeSet};

    use olm_api::csv::{CsvPhase, CsvReason};
    use olm_operator::decide::copied_csv::{
        CopyHashes, CopyInputs, CopyWrite, ExistingCopy, copy_for_namespace, plan_copies,
    };

    use super::super::fixtures::{CsvFixture, GroupFixture, gadget_group, minute, widget_operator};

    fn namespaces() -> Vec<String> {
        ["gadget-system", "cog-works", "sprocket-yard", "axle-depot"]
            .map(str::to_owned)
            .to_vec()
    }

    fn up_to_date(namespace: &str, parent: &olm_api::csv::ClusterServiceVersion) -> ExistingCopy {
        let copy = copy_for_namespace(parent, namespace).expect("copy");
        ExistingCopy {
            hashes: CopyHashes::recorded(&copy),
        }
    }

    fn write(namespace: &str, spec: bool, status: bool) -> CopyWrite {
        CopyWrite {
            namespace: namespace.to_owned(),
            spec,
            status,
        }
    }

    #[test]
    fn copies_are_written_once_and_rewritten_only_on_change() {
        let group = gadget_group().targeting(&["gadget-system", "cog-works", "sprocket-yard"]);
        let parent = widget_operator().member_of(&group).in_phase(
            CsvPhase::SUCCEEDED,
            CsvReason::INSTALL_SUCCEEDED,
            minute(0),
        );
        let protected = BTreeSet::new();
        let mut existing = BTreeMap::new();
        let plan = |existing: &BTreeMap<String, ExistingCopy>,
                    parent: &olm_api::csv::ClusterServiceVersion| {
            plan_copies(CopyInputs {
                parent,
                group: Some(&group),
                namespaces: &namespaces(),
                copied_csvs_enabled: true,
                protected_namespaces: &protected,
                existing,
            })
            .expect("plan")
        };

        let first = plan(&existing, &parent);
        assert_eq!(
            first.writes,
            [
                write("cog-works", true, true),
                write("sprocket-yard", true, true)
            ]
        );
        assert!(first.deletes.is_empty() && first.event.is_none());
        let prototype = first.prototype.expect("prototype");
        assert_eq!(
            prototype.metadata.namespace.as_deref(),
            Some("gadget-system")
        );

        for namespace in ["cog-works", "sprocket-yard"] {
            existing.insert(namespace.to_owned(), up_to_date(namespace, &parent));
        }
        let again = plan(&existing, &parent);
        assert!(
            again.writes.is_empty() && again.prototype.is_none(),
            "{again:?}"
        );

        // A status change rewrites the status only.
        let moved =
            parent
                .clone()
                .in_phase(CsvPhase::FAILED, CsvReason::COMPONENT_UNHEALTHY, minute(9));
        let moved = moved.member_of(&group);
        let update = plan(&existing, &moved);
        assert_eq!(
            update.writes,
            [
                write("cog-works", false, true),
                write("sprocket-yard", false, true)
            ]
        );

        // A copy in a namespace the group no longer targets goes; a copy
        // without recorded hashes is rewritten whole.
        existing.insert("axle-depot".to_owned(), ExistingCopy { hashes: None });
        existing.insert("cog-works".to_owned(), ExistingCopy { hashes: None });
        let cleanup = plan(&existing, &parent);
        assert_eq!(cleanup.deletes, ["axle-depot"]);
        assert_eq!(cleanup.writes, [write("cog-works", true, true)]);
    }

    #[test]
    fn copies_go_with_a_deleted_or_conflicting_parent_and_stay_for_an_unsynced_one() {
        let group = gadget_group().targeting(&["gadget-system", "cog-works"]);
        let parent = widget_operator().member_of(&group).in_phase(
            CsvPhase::SUCCEEDED,
            CsvReason::INSTALL_SUCCEEDED,
            minute(0),
        );
        let protected = BTreeSet::new();
        let existing: BTreeMap<String, ExistingCopy> =
            [("cog-works".to_owned(), up_to_date("cog-works", &parent))].into();
        let inputs = |parent, group| CopyInputs {
            parent,
            group,
            namespaces: &[],
            copied_csvs_enabled: true,
            protected_namespaces: &protected,
            existing: &existing,
        };

        let mut deleting = parent.clone();
        deleting.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(minute(3)),
        );
        assert_eq!(
            plan_copies(inputs(&deleting, Some(&group)))
                .expect("plan")
                .deletes,
            ["cog-works"]
        );
        let conflicting = parent.clone().in_phase(
            CsvPhase::FAILED,
            CsvReason::INTER_OPERATOR_GROUP_OWNER_CONFLICT,
            minute(3),
        );
        assert_eq!(
            plan_copies(inputs(&conflicting, Some(&group)))
                .expect("plan")
                .deletes,
            ["cog-works"]
        );
        let unsynced = plan_copies(inputs(&parent, None)).expect("plan");
        assert!(unsynced.deletes.is_empty() && unsynced.writes.is_empty());

        // Uncopiable but still targeted: nothing written, nothing deleted.
        let unsupported = parent.clone().in_phase(
            CsvPhase::FAILED,
            CsvReason::UNSUPPORTED_OPERATOR_GROUP,
            minute(3),
        );
        let namespaces = vec!["gadget-system".to_owned(), "cog-works".to_owned()];
        let plan = plan_copies(CopyInputs {
            namespaces: &namespaces,
            ..inputs(&unsupported, Some(&group))
        })
        .expect("plan");
        assert!(
            plan.writes.is_empty() && plan.deletes.is_empty(),
            "{plan:?}"
        );
    }

    #[test]
    fn disabled_copies_of_global_operators_are_deleted_with_one_warning() {
        let all = gadget_group().targeting_all_namespaces();
        let parent = widget_operator().member_of(&all).in_phase(
            CsvPhase::SUCCEEDED,
            CsvReason::INSTALL_SUCCEEDED,
            minute(0),
        );
        let protected: BTreeSet<String> = ["axle-depot".to_owned()].into();
        let existing: BTreeMap<String, ExistingCopy> = ["cog-works", "sprocket-yard", "axle-depot"]
            .into_iter()
            .map(|ns| (ns.to_owned(), up_to_date(ns, &parent)))
            .collect();
        let inputs = CopyInputs {
            parent: &parent,
            group: Some(&all),
            namespaces: &namespaces(),
            copied_csvs_enabled: false,
            protected_namespaces: &protected,
            existing: &existing,
        };
        let plan = plan_copies(inputs).expect("plan");
        assert_eq!(plan.deletes, ["cog-works", "sprocket-yard"]);
        assert!(plan.writes.is_empty(), "the protected copy is up to date");
        assert_eq!(plan.event.expect("event").reason, "DisabledCopiedCSVs");

        // Nothing left to delete: no event.
        let remaining: BTreeMap<String, ExistingCopy> =
            [("axle-depot".to_owned(), up_to_date("axle-depot", &parent))].into();
        let quiet = plan_copies(CopyInputs {
            existing: &remaining,
            ..inputs
        })
        .expect("plan");
        assert!(quiet.deletes.is_empty() && quiet.event.is_none());
    }
}
