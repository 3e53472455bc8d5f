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
