//! Upgrade gating through the replaced operator's OperatorCondition.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use olm_api::{
    conditions,
    operator_condition::{ConditionOverride, OperatorCondition},
};
use olm_operator::decide::operator_condition::{
    NotUpgradeable, not_upgradeable_message, upgradeable,
};

use super::fixtures::{minute, upgrade_blocked_condition};

fn upgradeable_override(status: &str, message: &str) -> ConditionOverride {
    ConditionOverride {
        type_: "Upgradeable".into(),
        status: status.into(),
        reason: "AdminDecision".into(),
        message: message.into(),
        observed_generation: None,
        last_transition_time: Some(Time(minute(0))),
    }
}

fn reporting(status: &str, observed_generation: i64) -> OperatorCondition {
    let mut condition = upgrade_blocked_condition();
    let reported = &mut condition.status.as_mut().expect("status").conditions[0];
    reported.status = status.into();
    reported.observed_generation = Some(observed_generation);
    condition
}

#[test]
fn gating_follows_overrides_then_reported_conditions() {
    let blocked = |message: &str| Err(NotUpgradeable(message.to_owned()));
    let cases: Vec<(&str, Option<OperatorCondition>, Result<(), NotUpgradeable>)> = vec![
        ("no OperatorCondition allows the upgrade", None, Ok(())),
        (
            "the operator reporting Upgradeable=False blocks with its message",
            Some(upgrade_blocked_condition()),
            blocked("the operator is not upgradeable: widgets are being migrated"),
        ),
        (
            "the operator reporting Upgradeable=True allows",
            Some(reporting(conditions::TRUE, 3)),
            Ok(()),
        ),
        (
            "a report for an older generation blocks as outdated",
            Some(reporting(conditions::TRUE, 2)),
            blocked(r#"the operatorcondition status "Upgradeable"="True" is outdated"#),
        ),
        (
            "Upgradeable=Unknown allows",
            Some(reporting(conditions::UNKNOWN, 3)),
            Ok(()),
        ),
        (
            "an administrator's True override wins over the operator's False",
            Some({
                let mut c = upgrade_blocked_condition();
                c.spec.overrides = vec![upgradeable_override(conditions::TRUE, "ship it")];
                c
            }),
            Ok(()),
        ),
        (
            "an administrator's False override blocks with its message",
            Some({
                let mut c = reporting(conditions::TRUE, 3);
                c.spec.overrides = vec![upgradeable_override(conditions::FALSE, "change freeze")];
                c
            }),
            blocked("the operator is not upgradeable: change freeze"),
        ),
        (
            "an override of another type is ignored",
            Some({
                let mut c = reporting(conditions::TRUE, 3);
                let mut other = upgradeable_override(conditions::FALSE, "nope");
                other.type_ = "Sleepy".into();
                c.spec.overrides = vec![other];
                c
            }),
            Ok(()),
        ),
    ];
    for (name, condition, expected) in cases {
        assert_eq!(upgradeable(condition.as_ref()), expected, "{name}");
    }
    assert_eq!(
        not_upgradeable_message(&NotUpgradeable("the operator is not upgradeable: x".into())),
        "operator is not upgradeable: the operator is not upgradeable: x"
    );
}

mod generated {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    use olm_operator::decide::operator_condition::{
        condition_binding_needs_write, condition_role_needs_write, desired_operator_condition,
        operator_condition_needs_write, operator_condition_rbac, synced_status_conditions,
    };

    use super::super::fixtures::{minute, upgrade_blocked_condition, widget_operator};

    #[test]
    fn every_csv_gets_a_condition_naming_its_accounts_and_deployments() {
        let csv = widget_operator();
        let condition = desired_operator_condition(&csv);
        assert_eq!(
            condition.metadata.name.as_deref(),
            Some("widget-operator.v1.2.0")
        );
        assert_eq!(
            condition.metadata.namespace.as_deref(),
            Some("gadget-system")
        );
        // clusterPermissions first, then permissions, without dedup (upstream).
        assert_eq!(
            condition.spec.service_accounts,
            ["widget-sa", "cog-reader", "widget-sa"]
        );
        assert_eq!(condition.spec.deployments, ["widget-controller"]);
        let owner = &condition.metadata.owner_references.clone().expect("owner")[0];
        assert_eq!(
            (
                owner.kind.as_str(),
                owner.controller,
                owner.block_owner_deletion
            ),
            ("ClusterServiceVersion", Some(true), Some(false))
        );

        let mut bare = widget_operator();
        bare.spec.install.spec.permissions = None;
        bare.spec.install.spec.cluster_permissions = None;
        assert_eq!(
            desired_operator_condition(&bare).spec.service_accounts,
            ["default"]
        );

        assert!(operator_condition_needs_write(None, &condition));
        let mut existing = condition.clone();
        existing.spec.overrides = vec![super::upgradeable_override("True", "admin says so")];
        assert!(
            !operator_condition_needs_write(Some(&existing), &condition),
            "overrides and conditions are not OLM's"
        );
        existing.spec.deployments = vec!["old-controller".into()];
        assert!(operator_condition_needs_write(Some(&existing), &condition));
    }

    #[test]
    fn the_operator_may_update_its_own_condition() {
        let mut condition = desired_operator_condition(&widget_operator());
        condition.metadata.uid = Some("uid-condition".into());
        let (role, binding) = operator_condition_rbac(&condition);
        assert_eq!(
            role.metadata.name.as_deref(),
            Some("widget-operator.v1.2.0")
        );
        let rule = &role.rules.clone().expect("rules")[0];
        assert_eq!(rule.verbs, ["get", "update", "patch"]);
        assert_eq!(rule.resources, Some(vec!["operatorconditions".to_owned()]));
        assert_eq!(
            rule.resource_names,
            Some(vec!["widget-operator.v1.2.0".to_owned()])
        );
        assert_eq!(
            role.metadata.labels.clone().expect("labels")["olm.managed"],
            "true"
        );
        let subjects: Vec<String> = binding
            .subjects
            .clone()
            .expect("subjects")
            .into_iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(subjects, ["widget-sa", "cog-reader", "widget-sa"]);
        assert_eq!(binding.role_ref.kind, "Role");

        assert!(condition_role_needs_write(None, &role));
        assert!(!condition_role_needs_write(Some(&role), &role));
        assert!(!condition_binding_needs_write(Some(&binding), &binding));
        let mut foreign = binding.clone();
        foreign.metadata.owner_references = None;
        assert!(condition_binding_needs_write(Some(&foreign), &binding));
    }

    fn upgradeable(status: &str, generation: Option<i64>) -> Condition {
        Condition {
            type_: "Upgradeable".into(),
            status: status.into(),
            reason: "Migrating".into(),
            message: "widgets are being migrated".into(),
            observed_generation: generation,
            last_transition_time: Time(minute(1)),
        }
    }

    #[test]
    fn spec_conditions_are_mirrored_with_the_observed_generation() {
        let mut condition = upgrade_blocked_condition();
        assert_eq!(
            synced_status_conditions(&condition),
            None,
            "already in sync"
        );

        let original = condition.status.as_ref().expect("status").conditions[0]
            .last_transition_time
            .clone();
        condition.metadata.generation = Some(4);
        let synced = synced_status_conditions(&condition).expect("generation moved");
        assert_eq!(synced[0].observed_generation, Some(4));
        assert_eq!(
            synced[0].last_transition_time, original,
            "same status keeps its transition time"
        );

        condition.spec.conditions = vec![upgradeable("True", None)];
        let flipped = synced_status_conditions(&condition).expect("status changed");
        assert_eq!(flipped[0].status, "True");
        assert_eq!(flipped[0].last_transition_time, Time(minute(1)));

        condition.status = None;
        let added = synced_status_conditions(&condition).expect("added");
        assert_eq!(added.len(), 1);
        assert_eq!(added[0].observed_generation, Some(4));
    }
}
