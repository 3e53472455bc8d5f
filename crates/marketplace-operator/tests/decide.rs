//! The OperatorHub rules as plain functions: table-driven cases for each
//! upstream behaviour, and properties that hold for any input.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use marketplace_operator::decide::{
    plan::{
        Action, Inputs, NOT_A_DEFAULT_MESSAGE, ObservedCatalog, PROMOTION_GUARD_VALUE,
        STATUS_ERROR, STATUS_SUCCESS, effective_config, plan, status_sources,
    },
    sources::{DefaultSource, MANAGED_BY_ANNOTATION, MANAGED_BY_VALUE},
};
use olm_api::operator_hub::{HubSource, OperatorHubSpec};
use proptest::prelude::*;

fn default_source(name: &str) -> DefaultSource {
    DefaultSource {
        name: name.to_owned(),
        image: format!("quay.io/fixture/{name}-index:v1"),
        display_name: Some(format!("Fixture {name}")),
        publisher: Some("Fixture Publisher".to_owned()),
        priority: Some(-100),
        poll_interval: Some("30m".to_owned()),
        grpc_pod_config: None,
    }
}

fn hub(disable_all: Option<bool>, sources: &[(&str, Option<bool>)]) -> OperatorHubSpec {
    OperatorHubSpec {
        disable_all_default_sources: disable_all,
        sources: sources
            .iter()
            .map(|(name, disabled)| HubSource {
                name: Some((*name).to_owned()),
                disabled: *disabled,
            })
            .collect(),
    }
}

fn managed_catalog_of(source: &DefaultSource) -> ObservedCatalog {
    ObservedCatalog {
        name: source.name.clone(),
        annotations: [
            (
                MANAGED_BY_ANNOTATION.to_owned(),
                MANAGED_BY_VALUE.to_owned(),
            ),
            (
                olm_api::labels::PROMOTION_GUARD.to_owned(),
                PROMOTION_GUARD_VALUE.to_owned(),
            ),
        ]
        .into(),
        spec: source.desired_spec(),
        deleting: false,
    }
}

fn users_catalog_named(name: &str) -> ObservedCatalog {
    ObservedCatalog {
        name: name.to_owned(),
        annotations: BTreeMap::new(),
        spec: serde_json::from_value(
            serde_json::json!({"sourceType": "grpc", "image": "example.com/users/own:1"}),
        )
        .unwrap(),
        deleting: false,
    }
}

fn decide(
    defaults: &[DefaultSource],
    hub: &OperatorHubSpec,
    observed: &[ObservedCatalog],
    adopt_unmanaged: bool,
) -> marketplace_operator::decide::plan::Plan {
    plan(Inputs {
        defaults,
        hub,
        observed,
        adopt_unmanaged,
    })
}

fn verbs(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .map(|a| format!("{} {}", a.verb(), a.name()))
        .collect()
}

#[test]
fn disable_all_and_per_source_entries_combine_as_upstream() {
    let defaults = [default_source("alpha"), default_source("beta")];
    let cases: [(OperatorHubSpec, &[(&str, bool)]); 6] = [
        (hub(None, &[]), &[("alpha", false), ("beta", false)]),
        (hub(Some(true), &[]), &[("alpha", true), ("beta", true)]),
        (
            hub(Some(true), &[("beta", Some(false))]),
            &[("alpha", true), ("beta", false)],
        ),
        // An entry without `disabled` enables its source (Go's zero value).
        (
            hub(Some(true), &[("beta", None)]),
            &[("alpha", true), ("beta", false)],
        ),
        (
            hub(Some(false), &[("alpha", Some(true))]),
            &[("alpha", true), ("beta", false)],
        ),
        (
            hub(None, &[("gamma", Some(true))]),
            &[("alpha", false), ("beta", false), ("gamma", true)],
        ),
    ];
    for (spec, expected) in cases {
        let config = effective_config(&defaults, &spec);
        let expected: BTreeMap<String, bool> = expected
            .iter()
            .map(|(name, disabled)| ((*name).to_owned(), *disabled))
            .collect();
        assert_eq!(config, expected, "{spec:?}");
    }
}

/// (case, hub spec, observed catalogs, adopt, expected writes).
type Case<'a> = (
    &'a str,
    &'a OperatorHubSpec,
    Vec<ObservedCatalog>,
    bool,
    Vec<&'a str>,
);

#[test]
fn the_writes_follow_the_observed_state() {
    let alpha = default_source("alpha");
    let mut drifted = managed_catalog_of(&alpha);
    drifted.spec.image = Some("quay.io/elsewhere/index:v9".to_owned());
    let mut case_only = managed_catalog_of(&alpha);
    case_only.spec.image = Some("QUAY.IO/Fixture/Alpha-Index:V1".to_owned());
    case_only.spec.display_name = Some("FIXTURE ALPHA".to_owned());
    let mut deleting = managed_catalog_of(&alpha);
    deleting.deleting = true;
    let mut wrong_annotation = managed_catalog_of(&alpha);
    wrong_annotation
        .annotations
        .insert(MANAGED_BY_ANNOTATION.to_owned(), "someone-else".to_owned());

    let mut unguarded = managed_catalog_of(&alpha);
    unguarded.annotations.insert(
        olm_api::labels::PROMOTION_GUARD.to_owned(),
        "false".to_owned(),
    );

    let enabled = hub(None, &[]);
    let disabled = hub(Some(true), &[]);
    let cases: Vec<Case<'_>> = vec![
        (
            "absent and enabled",
            &enabled,
            vec![],
            true,
            vec!["create alpha"],
        ),
        (
            "in place",
            &enabled,
            vec![managed_catalog_of(&alpha)],
            true,
            vec![],
        ),
        (
            "drifted",
            &enabled,
            vec![drifted.clone()],
            true,
            vec!["update alpha"],
        ),
        ("only case differs", &enabled, vec![case_only], true, vec![]),
        (
            "promotion guard switched off",
            &enabled,
            vec![unguarded],
            true,
            vec!["update alpha"],
        ),
        (
            "being deleted",
            &enabled,
            vec![deleting.clone()],
            true,
            vec![],
        ),
        (
            "user's, adopted",
            &enabled,
            vec![users_catalog_named("alpha")],
            true,
            vec!["update alpha"],
        ),
        (
            "user's, refused",
            &enabled,
            vec![users_catalog_named("alpha")],
            false,
            vec![],
        ),
        (
            "other manager",
            &enabled,
            vec![wrong_annotation.clone()],
            false,
            vec![],
        ),
        (
            "managed, disabled",
            &disabled,
            vec![drifted],
            true,
            vec!["delete alpha"],
        ),
        (
            "deleting, disabled",
            &disabled,
            vec![deleting],
            true,
            vec![],
        ),
        (
            "user's, disabled",
            &disabled,
            vec![users_catalog_named("alpha")],
            true,
            vec![],
        ),
        (
            "other manager, disabled",
            &disabled,
            vec![wrong_annotation],
            true,
            vec![],
        ),
        ("absent, disabled", &disabled, vec![], true, vec![]),
        (
            "other names untouched",
            &disabled,
            vec![
                users_catalog_named("zeta"),
                ObservedCatalog {
                    name: "omega".into(),
                    ..managed_catalog_of(&alpha)
                },
            ],
            true,
            vec![],
        ),
    ];
    for (case, spec, observed, adopt, expected) in cases {
        let decided = decide(std::slice::from_ref(&alpha), spec, &observed, adopt);
        assert_eq!(verbs(&decided.actions), expected, "{case}");
    }
}

#[test]
fn writes_carry_the_desired_spec() {
    let alpha = default_source("alpha");
    let decided = decide(std::slice::from_ref(&alpha), &hub(None, &[]), &[], true);
    assert_eq!(
        decided.actions,
        [Action::Create {
            name: "alpha".to_owned(),
            spec: alpha.desired_spec()
        }]
    );
}

#[test]
fn status_has_one_entry_per_configured_name() {
    let defaults = [default_source("alpha"), default_source("beta")];
    let spec = hub(
        Some(true),
        &[("beta", Some(false)), ("not-a-default", Some(false))],
    );
    let observed = [users_catalog_named("beta")];
    let decided = decide(&defaults, &spec, &observed, false);
    let failures: BTreeMap<String, String> = BTreeMap::new();
    let status = status_sources(&decided, &failures);
    let summary: Vec<_> = status
        .iter()
        .map(|s| {
            (
                s.name.clone().unwrap(),
                s.disabled.unwrap(),
                s.status.clone().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("alpha".to_owned(), true, STATUS_SUCCESS.to_owned()),
            ("beta".to_owned(), false, STATUS_ERROR.to_owned()),
            ("not-a-default".to_owned(), false, STATUS_ERROR.to_owned()),
        ]
    );
    assert!(status[0].message.is_none());
    assert!(
        status[1]
            .message
            .as_deref()
            .unwrap()
            .contains(MANAGED_BY_ANNOTATION)
    );
    assert_eq!(status[2].message.as_deref(), Some(NOT_A_DEFAULT_MESSAGE));

    let failures = [("alpha".to_owned(), "cannot delete: forbidden".to_owned())].into();
    let status = status_sources(&decided, &failures);
    assert_eq!(status[0].status.as_deref(), Some(STATUS_ERROR));
    assert_eq!(
        status[0].message.as_deref(),
        Some("cannot delete: forbidden")
    );

    // What is written if an older CRD refuses this status.
    let minimal =
        olm_api::status::MinimalStatus::minimal(&olm_api::operator_hub::OperatorHubStatus {
            sources: status,
            ..Default::default()
        });
    assert!(
        minimal
            .sources
            .iter()
            .all(|s| s.message.is_none() && s.status.is_some())
    );
}

/// Applies `actions` to `observed` as the API server would.
fn apply(observed: &[ObservedCatalog], actions: &[Action]) -> Vec<ObservedCatalog> {
    let mut world: BTreeMap<String, ObservedCatalog> = observed
        .iter()
        .map(|c| (c.name.clone(), c.clone()))
        .collect();
    for action in actions {
        match action {
            Action::Create { name, spec } | Action::Update { name, spec } => {
                let entry = world
                    .entry(name.clone())
                    .or_insert_with(|| ObservedCatalog {
                        name: name.clone(),
                        ..ObservedCatalog::default()
                    });
                entry.spec = spec.clone();
                entry.annotations.insert(
                    MANAGED_BY_ANNOTATION.to_owned(),
                    MANAGED_BY_VALUE.to_owned(),
                );
                entry.annotations.insert(
                    olm_api::labels::PROMOTION_GUARD.to_owned(),
                    PROMOTION_GUARD_VALUE.to_owned(),
                );
            }
            Action::Delete { name } => {
                world.remove(name);
            }
        }
    }
    world.into_values().collect()
}

const NAMES: &[&str] = &["alpha", "beta", "gamma", "delta"];

fn arb_catalog() -> impl Strategy<Value = ObservedCatalog> {
    (
        prop::sample::select(NAMES),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(name, managed, drifted, deleting)| {
            let mut catalog = if managed {
                managed_catalog_of(&default_source(name))
            } else {
                users_catalog_named(name)
            };
            if drifted {
                catalog.spec.image = Some("example.com/drifted:2".to_owned());
            }
            catalog.deleting = deleting;
            catalog
        })
}

fn arb_hub() -> impl Strategy<Value = OperatorHubSpec> {
    (
        prop::option::of(any::<bool>()),
        prop::collection::vec(
            (prop::sample::select(NAMES), prop::option::of(any::<bool>())),
            0..4,
        ),
    )
        .prop_map(|(disable_all, sources)| hub(disable_all, &sources))
}

proptest! {
    #[test]
    fn the_rules_hold_for_any_input(
        default_names in prop::sample::subsequence(NAMES, 0..=NAMES.len()),
        spec in arb_hub(),
        observed in prop::collection::vec(arb_catalog(), 0..4),
        adopt in any::<bool>(),
    ) {
        let defaults: Vec<_> = default_names.iter().map(|n| default_source(n)).collect();
        // One object per name, as in a namespace.
        let observed: Vec<_> = observed
            .into_iter()
            .map(|c| (c.name.clone(), c))
            .collect::<BTreeMap<_, _>>()
            .into_values()
            .collect();
        let decided = decide(&defaults, &spec, &observed, adopt);
        let config = effective_config(&defaults, &spec);

        for action in &decided.actions {
            // Only default sources are ever written.
            prop_assert!(default_names.contains(&action.name()));
            let current = observed.iter().find(|c| c.name == action.name());
            match action {
                // Only managed catalogs of disabled sources are deleted.
                Action::Delete { name } => {
                    prop_assert!(config[name]);
                    prop_assert!(current.is_some_and(ObservedCatalog::is_managed));
                }
                Action::Create { name, .. } | Action::Update { name, .. } => {
                    prop_assert!(!config[name]);
                    // A user's catalog is only taken over when adopting.
                    prop_assert!(adopt || current.is_none_or(ObservedCatalog::is_managed));
                }
            }
        }

        // One status entry per configured name, sorted.
        let status = status_sources(&decided, &BTreeMap::new());
        let names: Vec<_> = status.iter().map(|s| s.name.clone().unwrap()).collect();
        prop_assert_eq!(names, config.keys().cloned().collect::<Vec<_>>());
        for entry in &status {
            let name = entry.name.as_deref().unwrap();
            prop_assert_eq!(entry.disabled, Some(config[name]));
            if !default_names.contains(&name) {
                prop_assert_eq!(entry.status.as_deref(), Some(STATUS_ERROR));
            }
        }

        // Level-triggered: once the writes are done (and deletions
        // finished), deciding again writes nothing.
        let settled: Vec<_> = observed.iter().filter(|c| !c.deleting).cloned().collect();
        let decided = decide(&defaults, &spec, &settled, adopt);
        let after = apply(&settled, &decided.actions);
        let again = decide(&defaults, &spec, &after, adopt);
        prop_assert!(again.actions.is_empty(), "{:?}", again.actions);
    }
}
