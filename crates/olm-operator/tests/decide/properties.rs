//! Invariants that must hold for any input, checked with proptest.

use std::collections::BTreeSet;

use jiff::{SignedDuration, Timestamp};
use olm_api::{
    csv::{ClusterServiceVersion, ClusterServiceVersionStatus, CsvPhase, CsvReason},
    labels,
};
use olm_operator::decide::{
    api_surface::{ApiKey, ApiSet, format_api_set, parse_api_set},
    copied_csv::{COPY_HASH_SPEC_ANNOTATION, copy_for_namespace},
    csv_phase::{self, CsvAction, DeploymentsCheck, InstallCheck, InstallOutcome},
    csv_status::{CONDITIONS_LENGTH_LIMIT, set_phase},
    deployment::{DeploymentOverrides, StrategyError, StrategyErrorReason, build_deployment},
    hash::{base62, content_hash},
    operator_group::{ObservedNamespace, target_namespaces},
    requirements::RequirementsOutcome,
};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::fixtures::{CsvFixture, World, gadget_group, minute, widget_operator};

const PHASES: [CsvPhase; 8] = [
    CsvPhase::NONE,
    CsvPhase::PENDING,
    CsvPhase::INSTALL_READY,
    CsvPhase::INSTALLING,
    CsvPhase::SUCCEEDED,
    CsvPhase::FAILED,
    CsvPhase::REPLACING,
    CsvPhase::DELETING,
];

const REASONS: [CsvReason; 5] = [
    CsvReason::REQUIREMENTS_UNKNOWN,
    CsvReason::REQUIREMENTS_NOT_MET,
    CsvReason::INSTALL_WAITING,
    CsvReason::INSTALL_SUCCEEDED,
    CsvReason::COMPONENT_UNHEALTHY,
];

fn ltt(status: &ClusterServiceVersionStatus) -> Option<Timestamp> {
    status.last_transition_time.as_ref().map(|t| t.0)
}

proptest! {
    #[test]
    fn set_phase_history_is_bounded_and_transitions_follow_the_phase(
        steps in proptest::collection::vec((0usize..8, 0usize..5, 0usize..3, 0i64..3_600), 0..80),
    ) {
        let mut status = ClusterServiceVersionStatus::default();
        let mut now = minute(0);
        for (phase, reason, message, seconds) in steps {
            let before = status.clone();
            now += SignedDuration::from_secs(seconds);
            let (phase, reason) = (PHASES[phase].clone(), REASONS[reason].clone());
            set_phase(&mut status, phase.clone(), reason.clone(), &format!("message {message}"), now);

            let history = status.conditions.clone().unwrap_or_default();
            prop_assert!(history.len() <= CONDITIONS_LENGTH_LIMIT);
            prop_assert_eq!(status.last_update_time.as_ref().map(|t| t.0), Some(now));
            let phase_changed = before.phase.clone().unwrap_or(CsvPhase::NONE) != phase;
            if phase_changed {
                prop_assert_eq!(ltt(&status), Some(now));
            } else {
                prop_assert_eq!(ltt(&status), ltt(&before));
            }
            let previous = before.conditions.clone().unwrap_or_default();
            let appended = previous
                .last()
                .is_none_or(|last| last.phase.as_ref() != Some(&phase) || last.reason.as_ref() != Some(&reason));
            let expected_len = (previous.len() + usize::from(appended)).min(CONDITIONS_LENGTH_LIMIT);
            prop_assert_eq!(history.len(), expected_len);
            let last = history.last().expect("never empty after a set");
            prop_assert_eq!(last.phase.as_ref(), Some(&phase));
            prop_assert_eq!(last.reason.as_ref(), Some(&reason));
            if appended {
                prop_assert_eq!(last.last_update_time.as_ref().map(|t| t.0), Some(now));
                prop_assert_eq!(last.last_transition_time.as_ref().map(|t| t.0), ltt(&status));
            }
        }
    }

    #[test]
    fn the_lifecycle_never_breaks_its_bookkeeping(
        steps in proptest::collection::vec((any::<bool>(), 0usize..4, 0i64..600), 1..40),
    ) {
        let mut world = World::widget_in(CsvPhase::NONE, CsvReason::new(""));
        world.csv.status = None;
        let mut now = minute(1);
        for (met, install, seconds) in steps {
            now += SignedDuration::from_secs(seconds);
            world.now = now;
            world.requirements = Ok(RequirementsOutcome { met, statuses: Vec::new() });
            world.install = match install {
                0 => InstallCheck::default(),
                1 => InstallCheck {
                    deployments: DeploymentsCheck::Unhealthy(StrategyError::new(StrategyErrorReason::Waiting, "waiting")),
                    ..InstallCheck::default()
                },
                2 => InstallCheck {
                    deployments: DeploymentsCheck::Unhealthy(StrategyError::new(StrategyErrorReason::ComponentMissing, "missing")),
                    ..InstallCheck::default()
                },
                _ => InstallCheck {
                    deployments: DeploymentsCheck::Unhealthy(StrategyError::new(StrategyErrorReason::DeploymentUpdated, "drifted")),
                    ..InstallCheck::default()
                },
            };
            let before = world.csv.status.clone().unwrap_or_default();
            let decision = world.decide();
            let mut after = decision.status.clone().unwrap_or_else(|| before.clone());
            if decision.actions.contains(&CsvAction::RunInstaller) {
                let mut installed = world.csv.clone();
                installed.status = Some(after.clone());
                let next = csv_phase::after_install(&installed, &InstallOutcome::Installed { certificates: None }, now);
                after = next.status.unwrap_or(after);
            }
            prop_assert!(after.conditions.as_ref().map_or(0, Vec::len) <= CONDITIONS_LENGTH_LIMIT);
            let phase_changed = before.phase != after.phase;
            if phase_changed {
                prop_assert_eq!(ltt(&after), Some(now));
            } else {
                prop_assert_eq!(ltt(&after), ltt(&before));
            }
            world.csv.status = Some(after);
            if let Some(labels) = decision.labels {
                world.csv.metadata.labels = Some(labels);
            }
        }
    }

    #[test]
    fn deployment_hash_ignores_map_order(
        annotations in proptest::collection::btree_map("[a-z]{1,8}\\.example\\.test/[a-z]{1,6}", "[a-z0-9]{0,6}", 0..8),
        selector in proptest::collection::btree_map("[a-z]{1,8}", "[a-z]{1,6}", 0..5),
    ) {
        let build = |reverse: bool| -> String {
            let mut csv = serde_json::to_value(widget_operator()).expect("serializes");
            let mut ordered: Vec<(&String, &String)> = annotations.iter().collect();
            if reverse {
                ordered.reverse();
            }
            let mut map = Map::new();
            for (k, v) in &ordered {
                map.insert((*k).clone(), json!(v));
            }
            csv["metadata"]["annotations"] = Value::Object(map);
            let mut node_selector = Map::new();
            let mut pairs: Vec<(&String, &String)> = selector.iter().collect();
            if reverse {
                pairs.reverse();
            }
            for (k, v) in pairs {
                node_selector.insert(k.clone(), json!(v));
            }
            csv["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"]["nodeSelector"] =
                Value::Object(node_selector);
            let csv: ClusterServiceVersion = serde_json::from_value(csv).expect("still a CSV");
            let deployment = build_deployment(&csv, &csv.spec.install.spec.deployments[0], DeploymentOverrides::default())
                .expect("builds");
            deployment.metadata.labels.expect("labels")[labels::DEPLOYMENT_SPEC_HASH].clone()
        };
        prop_assert_eq!(build(false), build(true));
    }

    #[test]
    fn content_hash_ignores_object_key_order(
        entries in proptest::collection::btree_map("[a-z]{1,6}", proptest::collection::btree_map("[a-z]{1,4}", 0u32..100, 0..4), 0..8),
    ) {
        let object = |reverse: bool| -> Value {
            let mut keys: Vec<(&String, _)> = entries.iter().collect();
            if reverse {
                keys.reverse();
            }
            let mut map = Map::new();
            for (key, inner) in keys {
                let mut nested: Vec<(&String, &u32)> = inner.iter().collect();
                if reverse {
                    nested.reverse();
                }
                let mut inner_map = Map::new();
                for (k, v) in nested {
                    inner_map.insert(k.clone(), json!(v));
                }
                map.insert(key.clone(), Value::Object(inner_map));
            }
            Value::Object(map)
        };
        prop_assert_eq!(
            content_hash(&object(false), "test").expect("hashes"),
            content_hash(&object(true), "test").expect("hashes")
        );
    }

    #[test]
    fn explicit_targets_are_sorted_and_deduplicated(
        targets in proptest::collection::vec("[a-d]{1,2}", 1..12),
    ) {
        let mut group = gadget_group();
        group.spec.target_namespaces = targets.clone();
        let computed = target_namespaces(&group, &[]).expect("no empty names");
        let expected: Vec<String> = targets.into_iter().collect::<BTreeSet<_>>().into_iter().collect();
        prop_assert_eq!(computed, expected);
    }

    #[test]
    fn selected_targets_are_sorted_unique_and_matching(
        namespaces in proptest::collection::vec(("[a-d]{1,2}", proptest::option::of("[xy]")), 0..12),
        wanted in "[xy]",
    ) {
        let observed: Vec<ObservedNamespace> = namespaces
            .iter()
            .map(|(name, tier)| match tier {
                Some(tier) => ObservedNamespace::new(name, &[("tier", tier.as_str())]),
                None => ObservedNamespace::new(name, &[]),
            })
            .collect();
        let mut group = gadget_group();
        group.spec.target_namespaces.clear();
        group.spec.selector = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
            match_labels: Some([("tier".to_owned(), wanted.clone())].into()),
            ..Default::default()
        });
        let computed = target_namespaces(&group, &observed).expect("valid selector");
        let mut sorted = computed.clone();
        sorted.sort();
        sorted.dedup();
        prop_assert_eq!(&computed, &sorted);
        for name in &computed {
            prop_assert!(observed.iter().any(|ns| &ns.name == name && ns.labels.get("tier") == Some(&wanted)));
        }
    }

    #[test]
    fn a_copied_csv_never_carries_target_namespaces(
        annotations in proptest::collection::btree_map(
            prop_oneof![
                Just(labels::TARGET_NAMESPACES.to_owned()),
                Just(labels::KUBECTL_LAST_APPLIED.to_owned()),
                Just(COPY_HASH_SPEC_ANNOTATION.to_owned()),
                "[a-z]{1,6}\\.example\\.test/[a-z]{1,4}",
            ],
            "[a-z,]{0,12}",
            0..6,
        ),
        component_labels in proptest::collection::btree_map("operators\\.coreos\\.com/[a-z]{1,6}", Just(String::new()), 0..3),
        plain_labels in proptest::collection::btree_map("[a-z]{1,6}", "[a-z]{0,4}", 0..3),
        target in "[a-z]{1,8}",
    ) {
        let mut parent = widget_operator().in_phase(CsvPhase::SUCCEEDED, CsvReason::INSTALL_SUCCEEDED, minute(0));
        parent.metadata.annotations = Some(annotations.clone());
        let mut all_labels = plain_labels.clone();
        all_labels.extend(component_labels);
        parent.metadata.labels = Some(all_labels);
        let copy = copy_for_namespace(&parent, &target).expect("copyable");
        let copy_annotations = copy.metadata.annotations.clone().unwrap_or_default();
        prop_assert!(!copy_annotations.contains_key(labels::TARGET_NAMESPACES));
        prop_assert!(!copy_annotations.contains_key(labels::KUBECTL_LAST_APPLIED));
        for (key, value) in &annotations {
            if key.ends_with(".example.test") || key.contains(".example.test/") {
                prop_assert_eq!(copy_annotations.get(key), Some(value));
            }
        }
        let copy_labels = copy.metadata.labels.clone().unwrap_or_default();
        prop_assert!(!copy_labels.keys().any(|k| k.starts_with(labels::OPERATOR_COMPONENT_PREFIX)));
        prop_assert_eq!(copy_labels.get(labels::COPIED_FROM).map(String::as_str), Some("gadget-system"));
        prop_assert_eq!(copy.status.and_then(|s| s.reason), Some(CsvReason::COPIED));
    }

    #[test]
    fn provided_apis_round_trip_through_the_annotation(
        keys in proptest::collection::btree_set(("[A-Z][a-z]{0,5}", "v[0-9]", "([a-z]{1,5}(\\.[a-z]{1,5}){0,2})?"), 0..6),
    ) {
        let set: ApiSet = keys.iter().map(|(kind, version, group)| ApiKey::new(group, version, kind)).collect();
        let text = format_api_set(&set);
        prop_assert_eq!(parse_api_set(&text), set.clone());
        let mut parts: Vec<&str> = if text.is_empty() { Vec::new() } else { text.split(',').collect() };
        let unsorted = parts.clone();
        parts.sort();
        prop_assert_eq!(parts, unsorted, "sorted as Go's sort.Strings");
    }

    #[test]
    fn base62_is_positional_notation(number in any::<u128>()) {
        let mut reference = String::new();
        let mut n = number;
        const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
        loop {
            reference.insert(0, char::from(DIGITS[(n % 62) as usize]));
            n /= 62;
            if n == 0 {
                break;
            }
        }
        prop_assert_eq!(base62(&number.to_be_bytes()), reference.clone());
    }
}
