//! OperatorGroup rules: targets, membership annotations, install modes,
//! provided-API intersection and pruning.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use olm_api::{
    csv::{CsvPhase, InstallMode, InstallModeType},
    labels,
};
use olm_operator::decide::{
    Error,
    api_surface::{ApiKey, ApiSet, parse_api_set},
    operator_group::{
        ApiReconciliation, GroupSurface, InstallModeSet, MemberApis, NamespaceSet,
        ObservedNamespace, build_target_namespaces, install_mode_set,
        membership_annotations_differ, namespaces_changed, pruned_provided_apis,
        reconcile_api_intersection, target_namespaces, with_membership_annotations,
    },
};

use super::fixtures::{GroupFixture, gadget_group, widget_operator};

fn cluster() -> Vec<ObservedNamespace> {
    vec![
        ObservedNamespace::new("gadget-system", &[("team", "gadgets")]),
        ObservedNamespace::new("cog-works", &[("team", "cogs"), ("tier", "gold")]),
        ObservedNamespace::new("sprocket-yard", &[("team", "sprockets"), ("tier", "gold")]),
        ObservedNamespace::new("axle-depot", &[]),
    ]
}

#[test]
fn targets_come_from_the_list_or_the_selector() {
    let mut group = gadget_group();
    group.spec.target_namespaces = vec![
        "sprocket-yard".into(),
        "cog-works".into(),
        "sprocket-yard".into(),
    ];
    assert_eq!(
        target_namespaces(&group, &cluster()).expect("valid"),
        ["cog-works", "sprocket-yard"],
        "an explicit list, sorted and without duplicates"
    );

    group.spec.target_namespaces = vec!["cog-works".into(), String::new()];
    let err = target_namespaces(&group, &cluster()).expect_err("all namespaces in a list");
    assert!(matches!(err, Error::TargetNamespacesContainAll { .. }));
    assert_eq!(
        err.to_string(),
        "targetNamespaces cannot contain NamespaceAll: [cog-works ]"
    );

    group.spec.target_namespaces.clear();
    group.spec.selector = Some(LabelSelector {
        match_labels: Some([("tier".to_owned(), "gold".to_owned())].into()),
        ..Default::default()
    });
    assert_eq!(
        target_namespaces(&group, &cluster()).expect("valid"),
        ["cog-works", "sprocket-yard"],
        "a selector picks labelled namespaces; the group's own is not added"
    );

    group.spec.selector = Some(LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: "team".into(),
            operator: "In".into(),
            values: Some(vec!["nobody".into()]),
        }]),
        ..Default::default()
    });
    assert!(
        target_namespaces(&group, &cluster())
            .expect("valid")
            .is_empty()
    );

    group.spec.selector = Some(LabelSelector::default());
    assert_eq!(target_namespaces(&group, &cluster()).expect("valid"), [""]);
    group.spec.selector = None;
    assert_eq!(target_namespaces(&group, &cluster()).expect("valid"), [""]);

    group.spec.selector = Some(LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: "team".into(),
            operator: "Roughly".into(),
            values: None,
        }]),
        ..Default::default()
    });
    assert!(matches!(
        target_namespaces(&group, &cluster()),
        Err(Error::InvalidSelector { .. })
    ));
}

#[test]
fn status_is_rewritten_only_when_the_set_changes() {
    let a = ["cog-works".to_owned(), "gadget-system".to_owned()];
    let b = ["gadget-system".to_owned(), "cog-works".to_owned()];
    assert!(!namespaces_changed(&a, &b));
    assert!(namespaces_changed(&a, &a[..1]));
    assert!(namespaces_changed(
        &a,
        &["cog-works".to_owned(), "axle-depot".to_owned()]
    ));
}

#[test]
fn membership_annotations_follow_the_group() {
    let group = gadget_group().targeting(&["sprocket-yard", "cog-works"]);
    let csv = widget_operator();
    assert!(membership_annotations_differ(
        csv.metadata.annotations.as_ref(),
        &group
    ));
    let annotations = with_membership_annotations(csv.metadata.annotations.as_ref(), &group);
    assert_eq!(annotations[labels::OPERATOR_GROUP], "gadget-group");
    assert_eq!(annotations[labels::OPERATOR_NAMESPACE], "gadget-system");
    assert_eq!(
        annotations[labels::TARGET_NAMESPACES],
        "cog-works,sprocket-yard"
    );
    assert_eq!(
        annotations["widgets.example.test/tier"], "gold",
        "others are kept"
    );
    assert!(!membership_annotations_differ(Some(&annotations), &group));

    let all = gadget_group().targeting_all_namespaces();
    let annotations = with_membership_annotations(None, &all);
    assert_eq!(annotations[labels::TARGET_NAMESPACES], "");
    assert!(!membership_annotations_differ(Some(&annotations), &all));

    let mut unsynced = gadget_group();
    unsynced.status = None;
    let annotations = with_membership_annotations(None, &unsynced);
    assert!(
        !annotations.contains_key(labels::TARGET_NAMESPACES),
        "no targets until the group computed them"
    );
    assert!(membership_annotations_differ(Some(&annotations), &unsynced));
    assert_eq!(build_target_namespaces(&["b".into(), "a".into()]), "a,b");
}

#[test]
fn install_modes_decide_which_target_sets_are_supported() {
    let modes = |own: bool, single: bool, multi: bool, all: bool| {
        install_mode_set(&[
            InstallMode {
                type_: InstallModeType::OWN_NAMESPACE,
                supported: own,
            },
            InstallMode {
                type_: InstallModeType::SINGLE_NAMESPACE,
                supported: single,
            },
            InstallMode {
                type_: InstallModeType::MULTI_NAMESPACE,
                supported: multi,
            },
            InstallMode {
                type_: InstallModeType::ALL_NAMESPACES,
                supported: all,
            },
        ])
        .expect("a set")
    };
    let targets = |list: &[&str]| -> Vec<String> { list.iter().map(|s| (*s).to_owned()).collect() };
    type Case = (
        &'static str,
        InstallModeSet,
        Vec<String>,
        Result<(), &'static str>,
    );
    let cases: [Case; 8] = [
        (
            "no namespaces at all",
            modes(true, true, true, true),
            targets(&[]),
            Err(
                "operatorgroup has invalid selected namespaces, cannot configure to watch zero namespaces",
            ),
        ),
        (
            "own namespace without OwnNamespace",
            modes(false, true, true, true),
            targets(&["gadget-system"]),
            Err(
                "OwnNamespace InstallModeType not supported, cannot configure to watch own namespace",
            ),
        ),
        (
            "all namespaces without AllNamespaces",
            modes(true, true, true, false),
            targets(&[""]),
            Err(
                "AllNamespaces InstallModeType not supported, cannot configure to watch all namespaces",
            ),
        ),
        (
            "another namespace without SingleNamespace",
            modes(true, false, true, true),
            targets(&["cog-works"]),
            Err(
                "SingleNamespace InstallModeType not supported, cannot configure to watch one namespace",
            ),
        ),
        (
            "several namespaces without MultiNamespace",
            modes(true, true, false, true),
            targets(&["cog-works", "sprocket-yard", "axle-depot"]),
            Err(
                "MultiNamespace InstallModeType not supported, cannot configure to watch 3 namespaces",
            ),
        ),
        (
            "several including its own without OwnNamespace",
            modes(false, true, true, true),
            targets(&["cog-works", "gadget-system"]),
            Err(
                "OwnNamespace InstallModeType not supported, cannot configure to watch own namespace",
            ),
        ),
        (
            "several including all namespaces",
            modes(true, true, true, true),
            targets(&["cog-works", ""]),
            Err(
                "operatorgroup has invalid selected namespaces, NamespaceAll found when |selected namespaces| > 1",
            ),
        ),
        (
            "several supported",
            modes(true, true, true, false),
            targets(&["cog-works", "gadget-system"]),
            Ok(()),
        ),
    ];
    for (name, set, namespaces, expected) in cases {
        assert_eq!(
            set.supports("gadget-system", &namespaces),
            expected.map_err(str::to_owned),
            "{name}"
        );
    }
}

fn apis(list: &str) -> ApiSet {
    parse_api_set(list)
}

#[test]
fn intersecting_groups_keep_their_apis_apart() {
    let widget = "Widget.v1.gadgets.example.test";
    let gadget = |provides: &str| {
        GroupSurface::of(
            &gadget_group()
                .targeting(&["gadget-system"])
                .providing(provides),
        )
    };
    let cog = |targets: &[&str], provides: &str| {
        GroupSurface::of(
            &gadget_group()
                .named("cog-group")
                .in_namespace("cog-works")
                .targeting(targets)
                .providing(provides),
        )
    };
    let cases = [
        (
            "new APIs, nobody else: add",
            gadget(""),
            vec![cog(&["cog-works"], widget)],
            ApiReconciliation::AddApis,
        ),
        (
            "listed APIs, nobody else: nothing",
            gadget(widget),
            vec![cog(&["cog-works"], widget)],
            ApiReconciliation::NoApiConflict,
        ),
        (
            "new APIs an intersecting group provides: conflict",
            gadget(""),
            vec![cog(&["gadget-system"], widget)],
            ApiReconciliation::ApiConflict,
        ),
        (
            "listed APIs an intersecting group provides: remove",
            gadget(widget),
            vec![cog(&["gadget-system"], widget)],
            ApiReconciliation::RemoveApis,
        ),
        (
            "an AllNamespaces group intersects everyone",
            gadget(""),
            vec![GroupSurface::of(
                &gadget_group()
                    .named("cog-group")
                    .in_namespace("cog-works")
                    .targeting_all_namespaces()
                    .providing(widget),
            )],
            ApiReconciliation::ApiConflict,
        ),
        (
            "the group itself among the others is skipped",
            gadget(""),
            vec![gadget(widget)],
            ApiReconciliation::AddApis,
        ),
    ];
    for (name, group, others, expected) in cases {
        assert_eq!(
            reconcile_api_intersection(&apis(widget), &group, &others),
            expected,
            "{name}"
        );
    }
}

#[test]
fn group_surfaces_include_their_own_namespace() {
    let surface = GroupSurface::of(&gadget_group().targeting(&["cog-works"]));
    assert!(surface.targets.contains("gadget-system"));
    assert!(surface.targets.contains("cog-works"));
    let all = GroupSurface::of(&gadget_group().targeting_all_namespaces());
    assert!(all.targets.is_all_namespaces());
    let mut unsynced = gadget_group();
    unsynced.status = None;
    assert!(GroupSurface::of(&unsynced).targets.is_empty());
    assert!(NamespaceSet::from_annotation("a,b").contains("b"));
}

#[test]
fn provided_apis_are_pruned_when_no_member_provides_them() {
    let widget = ApiKey::new("gadgets.example.test", "v1", "Widget");
    let cog = ApiKey::new("gears.example.test", "v2", "Cog");
    let group =
        gadget_group().providing("Cog.v2.gears.example.test,Widget.v1.gadgets.example.test");
    let member = |provided: &[&ApiKey], phase: CsvPhase| MemberApis {
        provided: provided.iter().map(|k| (*k).clone()).collect(),
        phase,
        deleting: false,
    };
    assert_eq!(
        pruned_provided_apis(&group, &[member(&[&widget], CsvPhase::SUCCEEDED)]),
        Some("Widget.v1.gadgets.example.test".to_owned())
    );
    assert_eq!(
        pruned_provided_apis(&group, &[member(&[&widget, &cog], CsvPhase::SUCCEEDED)]),
        None,
        "nothing to prune"
    );
    let sprocket = ApiKey::new("sprockets.example.test", "v1", "Sprocket");
    assert_eq!(
        pruned_provided_apis(
            &group,
            &[
                member(&[&widget], CsvPhase::SUCCEEDED),
                member(&[&sprocket], CsvPhase::PENDING)
            ]
        ),
        None,
        "a new member is about to add its APIs: wait"
    );
    assert_eq!(
        pruned_provided_apis(&group.clone().with_static_provided_apis(), &[]),
        None,
        "static groups are never pruned"
    );
    assert_eq!(pruned_provided_apis(&group, &[]), Some(String::new()));
}
