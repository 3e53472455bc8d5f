//! The operator's whole rule, as a pure function: from a Greeting's spec to
//! the status it should have.
//!
//! The controller reads the Greeting, calls [`desired_status`] and writes the
//! result when it differs from what is there; nothing here touches the API
//! server or the clock, so the rule is tested as a plain function.

use k8s_openapi::{
    apimachinery::pkg::apis::meta::v1::{Condition, Time},
    jiff::Timestamp,
};

use crate::greeting::{GreetingSpec, GreetingStatus, READY};

/// Condition status `True`.
pub const TRUE: &str = "True";
/// Condition status `False`.
pub const FALSE: &str = "False";

/// The reasons of the Ready condition.
pub mod reason {
    /// The message greets the current spec.
    pub const GREETED: &str = "Greeted";
    /// `spec.name` is blank, so there is no one to greet.
    pub const NAME_MISSING: &str = "NameMissing";
}

/// The greeting for `spec`, or `None` when the spec names no one (a blank
/// `name`; the CRD schema already refuses an empty one).
pub fn greeting_message(spec: &GreetingSpec) -> Option<String> {
    let name = spec.name.trim();
    if name.is_empty() {
        return None;
    }
    let ending = if spec.excited.unwrap_or(false) {
        "!!!"
    } else {
        "!"
    };
    Some(format!("Hello, {name}{ending}"))
}

/// The status a Greeting with `spec` at `generation` should have, written by
/// operator `version`, given the status it has (`previous`) and the time
/// (`now`).
///
/// The Ready condition keeps the previous `lastTransitionTime` unless its
/// status changes, so calling this again on its own result changes nothing:
/// the controller writes only when the answer differs. Conditions of other
/// types are left out: they are not this operator's, and server-side apply
/// leaves other managers' entries of the list alone.
pub fn desired_status(
    spec: &GreetingSpec,
    generation: Option<i64>,
    version: &str,
    previous: Option<&GreetingStatus>,
    now: Timestamp,
) -> GreetingStatus {
    let message = greeting_message(spec);
    let (status, reason, condition_message) = match &message {
        Some(greeting) => (TRUE, reason::GREETED, format!("Greeted: {greeting}")),
        None => (
            FALSE,
            reason::NAME_MISSING,
            "spec.name is blank: there is no one to greet".to_owned(),
        ),
    };
    let last_transition_time = previous
        .and_then(ready_condition)
        .filter(|ready| ready.status == status)
        .map_or(Time(now), |ready| ready.last_transition_time.clone());
    GreetingStatus {
        message,
        operator_version: Some(version.to_owned()),
        observed_generation: generation,
        conditions: vec![Condition {
            type_: READY.to_owned(),
            status: status.to_owned(),
            reason: reason.to_owned(),
            message: condition_message,
            observed_generation: generation,
            last_transition_time,
        }],
    }
}

/// The Ready condition of `status`, if it has one.
pub fn ready_condition(status: &GreetingStatus) -> Option<&Condition> {
    status
        .conditions
        .iter()
        .find(|condition| condition.type_ == READY)
}

/// Whether `current` already says everything `desired` says: the same
/// greeting, version and generation, and the same Ready condition. Conditions
/// of other types in `current` do not count (see [`desired_status`]).
pub fn is_up_to_date(current: Option<&GreetingStatus>, desired: &GreetingStatus) -> bool {
    current.is_some_and(|current| {
        current.message == desired.message
            && current.operator_version == desired.operator_version
            && current.observed_generation == desired.observed_generation
            && ready_condition(current) == ready_condition(desired)
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const VERSION: &str = "9.8.7-test";

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).expect("a valid test timestamp")
    }

    fn spec(name: &str, excited: Option<bool>) -> GreetingSpec {
        GreetingSpec {
            name: name.to_owned(),
            excited,
        }
    }

    /// A status as the operator would have written it at `seconds` for `spec`.
    fn written_at(seconds: i64, spec: &GreetingSpec, generation: i64) -> GreetingStatus {
        desired_status(spec, Some(generation), VERSION, None, at(seconds))
    }

    #[test]
    fn greetings_read_as_the_spec_asks() {
        let cases = [
            ("Ada", None, Some("Hello, Ada!")),
            ("Ada", Some(false), Some("Hello, Ada!")),
            ("Ada", Some(true), Some("Hello, Ada!!!")),
            ("  Grace Hopper ", None, Some("Hello, Grace Hopper!")),
            ("", None, None),
            ("   ", Some(true), None),
        ];
        for (name, excited, want) in cases {
            assert_eq!(
                greeting_message(&spec(name, excited)).as_deref(),
                want,
                "name {name:?}, excited {excited:?}"
            );
        }
    }

    #[test]
    fn status_follows_spec_and_keeps_the_transition_time_while_ready_holds() {
        struct Case {
            what: &'static str,
            previous: Option<GreetingStatus>,
            spec: GreetingSpec,
            generation: i64,
            message: Option<&'static str>,
            ready: (&'static str, &'static str),
            transition_at: i64,
        }
        let ada = spec("Ada", None);
        let cases = [
            Case {
                what: "a new greeting is greeted now",
                previous: None,
                spec: ada.clone(),
                generation: 1,
                message: Some("Hello, Ada!"),
                ready: (TRUE, reason::GREETED),
                transition_at: 100,
            },
            Case {
                what: "a changed name keeps Ready's transition time",
                previous: Some(written_at(10, &ada, 1)),
                spec: spec("Grace", None),
                generation: 2,
                message: Some("Hello, Grace!"),
                ready: (TRUE, reason::GREETED),
                transition_at: 10,
            },
            Case {
                what: "excitement keeps Ready's transition time",
                previous: Some(written_at(10, &ada, 1)),
                spec: spec("Ada", Some(true)),
                generation: 2,
                message: Some("Hello, Ada!!!"),
                ready: (TRUE, reason::GREETED),
                transition_at: 10,
            },
            Case {
                what: "a blank name turns Ready False now",
                previous: Some(written_at(10, &ada, 1)),
                spec: spec(" ", None),
                generation: 2,
                message: None,
                ready: (FALSE, reason::NAME_MISSING),
                transition_at: 100,
            },
            Case {
                what: "a name again turns Ready True now",
                previous: Some(written_at(10, &spec("", None), 1)),
                spec: ada.clone(),
                generation: 2,
                message: Some("Hello, Ada!"),
                ready: (TRUE, reason::GREETED),
                transition_at: 100,
            },
            Case {
                what: "a status without conditions gets Ready now",
                previous: Some(GreetingStatus {
                    message: Some("Hello, Ada!".to_owned()),
                    ..GreetingStatus::default()
                }),
                spec: ada.clone(),
                generation: 3,
                message: Some("Hello, Ada!"),
                ready: (TRUE, reason::GREETED),
                transition_at: 100,
            },
        ];
        for case in cases {
            let status = desired_status(
                &case.spec,
                Some(case.generation),
                VERSION,
                case.previous.as_ref(),
                at(100),
            );
            let what = case.what;
            assert_eq!(status.message.as_deref(), case.message, "{what}");
            assert_eq!(status.operator_version.as_deref(), Some(VERSION), "{what}");
            assert_eq!(status.observed_generation, Some(case.generation), "{what}");
            let ready = ready_condition(&status).expect("a Ready condition");
            assert_eq!(
                (ready.status.as_str(), ready.reason.as_str()),
                case.ready,
                "{what}"
            );
            assert_eq!(ready.observed_generation, Some(case.generation), "{what}");
            assert_eq!(
                ready.last_transition_time,
                Time(at(case.transition_at)),
                "{what}"
            );
        }
    }

    #[test]
    fn a_new_operator_version_rewrites_the_status_but_not_the_transition() {
        let ada = spec("Ada", None);
        let old = written_at(10, &ada, 1);
        let new = desired_status(&ada, Some(1), "10.0.0", Some(&old), at(100));
        assert!(!is_up_to_date(Some(&old), &new));
        assert_eq!(new.operator_version.as_deref(), Some("10.0.0"));
        assert_eq!(
            ready_condition(&new).map(|ready| &ready.last_transition_time),
            Some(&Time(at(10)))
        );
    }

    #[test]
    fn other_conditions_do_not_make_a_status_stale() {
        let ada = spec("Ada", None);
        let mut current = written_at(10, &ada, 1);
        current.conditions.push(Condition {
            type_: "Audited".to_owned(),
            status: TRUE.to_owned(),
            reason: "SomeoneElse".to_owned(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: Time(at(5)),
        });
        let desired = desired_status(&ada, Some(1), VERSION, Some(&current), at(100));
        assert!(is_up_to_date(Some(&current), &desired));
        assert!(!is_up_to_date(None, &desired));
    }

    fn arbitrary_spec() -> impl Strategy<Value = GreetingSpec> {
        (
            prop_oneof![
                Just(String::new()),
                Just("  ".to_owned()),
                "[ a-zA-Z]{1,12}"
            ],
            proptest::option::of(any::<bool>()),
        )
            .prop_map(|(name, excited)| GreetingSpec { name, excited })
    }

    proptest! {
        /// Level-triggered: a second reconcile of an unchanged Greeting,
        /// however much later, has nothing to write.
        #[test]
        fn the_rule_is_idempotent(
            spec in arbitrary_spec(),
            generation in 1i64..1000,
            first in 0i64..1_000_000,
            later in 0i64..1_000_000,
        ) {
            let once = desired_status(&spec, Some(generation), VERSION, None, at(first));
            let twice = desired_status(&spec, Some(generation), VERSION, Some(&once), at(first + later));
            prop_assert_eq!(&once, &twice);
            prop_assert!(is_up_to_date(Some(&once), &twice));
        }

        /// lastTransitionTime moves exactly when Ready's status does.
        #[test]
        fn the_transition_time_moves_only_with_the_status(
            before in arbitrary_spec(),
            after in arbitrary_spec(),
            then in 0i64..1_000_000,
        ) {
            let now = then + 1;
            let previous = desired_status(&before, Some(1), VERSION, None, at(then));
            let next = desired_status(&after, Some(2), VERSION, Some(&previous), at(now));
            let (was, is) = (
                ready_condition(&previous).expect("Ready before"),
                ready_condition(&next).expect("Ready after"),
            );
            let expected = if was.status == is.status { at(then) } else { at(now) };
            prop_assert_eq!(&is.last_transition_time, &Time(expected));
            prop_assert_eq!(is.status == TRUE, next.message.is_some());
        }
    }
}
