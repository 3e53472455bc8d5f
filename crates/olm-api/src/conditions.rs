//! The one helper every controller uses to set, find and remove status
//! conditions.
//!
//! Setting a condition is idempotent: setting what is already there changes
//! nothing (so a level-triggered reconcile that runs ten times writes status
//! once), `lastTransitionTime` moves only when `status` changes, and the
//! "last probed" time (`lastUpdateTime` / `lastHeartbeatTime`, where a condition
//! type has one) moves only when something other than a timestamp changes. The
//! current time is passed in, never read from a clock here.
//!
//! It works for Kubernetes' `metav1.Condition` and for OLM's own condition
//! structs, each of which implements [`StatusCondition`].
//!
//! ```
//! use jiff::Timestamp;
//! use olm_api::conditions::{self, Metav1Condition};
//!
//! let mut list = Vec::new();
//! let t0 = Timestamp::from_second(1_000).unwrap();
//! let ready = conditions::metav1("Ready", conditions::TRUE, "AllGood", "ok", Some(3));
//! assert!(conditions::set(&mut list, ready.clone(), t0));
//! // Setting the same condition later changes nothing.
//! let t1 = Timestamp::from_second(2_000).unwrap();
//! assert!(!conditions::set(&mut list, ready, t1));
//! assert_eq!(list[0].last_transition_time.0, t0);
//! # let _: &Vec<Metav1Condition> = &list;
//! ```

use jiff::Timestamp;
pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition as Metav1Condition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// Condition status `True`.
pub const TRUE: &str = "True";
/// Condition status `False`.
pub const FALSE: &str = "False";
/// Condition status `Unknown`.
pub const UNKNOWN: &str = "Unknown";

/// A condition in a status (or spec) list, as [`set`] needs to see it.
pub trait StatusCondition: Clone + PartialEq {
    /// The condition type; a list holds at most one condition per type.
    fn condition_type(&self) -> &str;

    /// The condition status (`True`, `False`, `Unknown`).
    fn condition_status(&self) -> &str;

    /// When the status last changed, if recorded.
    fn last_transition_time(&self) -> Option<Timestamp>;

    /// Records when the status last changed.
    fn set_last_transition_time(&mut self, at: Timestamp);

    /// Records when the condition was last changed in any way other than a
    /// timestamp (`lastUpdateTime` / `lastHeartbeatTime`). Types without such a
    /// field keep the default, which does nothing.
    fn set_last_update_time(&mut self, at: Timestamp) {
        let _ = at;
    }

    /// Sets every timestamp to the same fixed value, so that two conditions can
    /// be compared on everything else.
    fn clear_timestamps(&mut self);
}

impl StatusCondition for Metav1Condition {
    fn condition_type(&self) -> &str {
        &self.type_
    }

    fn condition_status(&self) -> &str {
        &self.status
    }

    fn last_transition_time(&self) -> Option<Timestamp> {
        Some(self.last_transition_time.0)
    }

    fn set_last_transition_time(&mut self, at: Timestamp) {
        self.last_transition_time = Time(at);
    }

    fn clear_timestamps(&mut self) {
        self.last_transition_time = Time(Timestamp::UNIX_EPOCH);
    }
}

/// Builds a `metav1.Condition`. Its `lastTransitionTime` is a placeholder that
/// [`set`] replaces; put conditions into a list only through [`set`].
pub fn metav1(
    condition_type: &str,
    status: &str,
    reason: &str,
    message: &str,
    observed_generation: Option<i64>,
) -> Metav1Condition {
    Metav1Condition {
        last_transition_time: Time(Timestamp::UNIX_EPOCH),
        message: message.to_owned(),
        observed_generation,
        reason: reason.to_owned(),
        status: status.to_owned(),
        type_: condition_type.to_owned(),
    }
}

/// Whether two conditions are equal on everything but their timestamps.
pub fn same_content<C: StatusCondition>(a: &C, b: &C) -> bool {
    let (mut a, mut b) = (a.clone(), b.clone());
    a.clear_timestamps();
    b.clear_timestamps();
    a == b
}

/// Sets `condition` in `conditions`, replacing the one of the same type or
/// appending it, and returns whether the list changed.
///
/// - Same status and content as the existing one: nothing changes.
/// - Same status, other reason/message/generation/...: the content is replaced,
///   `lastTransitionTime` is kept, the last-update time becomes `now`.
/// - Different status, or a new type: `lastTransitionTime` and the last-update
///   time become `now`.
///
/// The timestamps on `condition` itself are ignored: this function owns them.
pub fn set<C: StatusCondition>(conditions: &mut Vec<C>, mut condition: C, now: Timestamp) -> bool {
    let existing = conditions
        .iter()
        .position(|c| c.condition_type() == condition.condition_type());
    match existing {
        None => {
            condition.set_last_transition_time(now);
            condition.set_last_update_time(now);
            conditions.push(condition);
            true
        }
        Some(index) => {
            let current = &conditions[index];
            if same_content(current, &condition) {
                return false;
            }
            match current.last_transition_time() {
                Some(at) if current.condition_status() == condition.condition_status() => {
                    condition.set_last_transition_time(at);
                }
                _ => condition.set_last_transition_time(now),
            }
            condition.set_last_update_time(now);
            conditions[index] = condition;
            true
        }
    }
}

/// Removes the condition of `condition_type`; returns whether one was removed.
pub fn remove<C: StatusCondition>(conditions: &mut Vec<C>, condition_type: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.condition_type() != condition_type);
    conditions.len() != before
}

/// The condition of `condition_type`, if present.
pub fn find<'a, C: StatusCondition>(conditions: &'a [C], condition_type: &str) -> Option<&'a C> {
    conditions
        .iter()
        .find(|c| c.condition_type() == condition_type)
}

/// Whether the condition of `condition_type` is present with status `True`.
pub fn is_true<C: StatusCondition>(conditions: &[C], condition_type: &str) -> bool {
    find(conditions, condition_type).is_some_and(|c| c.condition_status() == TRUE)
}

/// Whether the condition of `condition_type` is present with status `False`.
pub fn is_false<C: StatusCondition>(conditions: &[C], condition_type: &str) -> bool {
    find(conditions, condition_type).is_some_and(|c| c.condition_status() == FALSE)
}

/// Implements [`StatusCondition`] for an OLM condition struct whose fields are
/// `type_`, `status` (open strings), `last_transition_time: Option<Time>` and an
/// optional "last probed" field.
macro_rules! impl_status_condition {
    ($ty:ty, update = $update:ident) => {
        impl $crate::conditions::StatusCondition for $ty {
            fn condition_type(&self) -> &str {
                self.type_.as_str()
            }

            fn condition_status(&self) -> &str {
                self.status.as_str()
            }

            fn last_transition_time(&self) -> Option<::jiff::Timestamp> {
                self.last_transition_time.as_ref().map(|t| t.0)
            }

            fn set_last_transition_time(&mut self, at: ::jiff::Timestamp) {
                self.last_transition_time =
                    Some(::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at));
            }

            fn set_last_update_time(&mut self, at: ::jiff::Timestamp) {
                self.$update = Some(::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at));
            }

            fn clear_timestamps(&mut self) {
                self.last_transition_time = None;
                self.$update = None;
            }
        }
    };
    ($ty:ty) => {
        impl $crate::conditions::StatusCondition for $ty {
            fn condition_type(&self) -> &str {
                self.type_.as_str()
            }

            fn condition_status(&self) -> &str {
                self.status.as_str()
            }

            fn last_transition_time(&self) -> Option<::jiff::Timestamp> {
                self.last_transition_time.as_ref().map(|t| t.0)
            }

            fn set_last_transition_time(&mut self, at: ::jiff::Timestamp) {
                self.last_transition_time =
                    Some(::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at));
            }

            fn clear_timestamps(&mut self) {
                self.last_transition_time = None;
            }
        }
    };
}

pub(crate) use impl_status_condition;

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::{
        install_plan::{InstallPlanCondition, InstallPlanConditionType},
        subscription::{SubscriptionCondition, SubscriptionConditionType},
    };

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).expect("valid test timestamp")
    }

    struct Case {
        name: &'static str,
        existing: Vec<Metav1Condition>,
        set: Metav1Condition,
        changed: bool,
        expect_transition: Timestamp,
        expect_reason: &'static str,
        expect_len: usize,
    }

    fn stamped(mut c: Metav1Condition, t: Timestamp) -> Metav1Condition {
        c.last_transition_time = Time(t);
        c
    }

    #[test]
    fn set_metav1_table() {
        let t_old = at(100);
        let now = at(500);
        let cases = [
            Case {
                name: "new type is appended with transition now",
                existing: vec![stamped(metav1("Other", TRUE, "Fine", "", None), t_old)],
                set: metav1("Widget", TRUE, "Built", "done", Some(1)),
                changed: true,
                expect_transition: now,
                expect_reason: "Built",
                expect_len: 2,
            },
            Case {
                name: "identical condition changes nothing",
                existing: vec![stamped(
                    metav1("Widget", TRUE, "Built", "done", Some(1)),
                    t_old,
                )],
                set: metav1("Widget", TRUE, "Built", "done", Some(1)),
                changed: false,
                expect_transition: t_old,
                expect_reason: "Built",
                expect_len: 1,
            },
            Case {
                name: "same status, new reason keeps transition time",
                existing: vec![stamped(
                    metav1("Widget", TRUE, "Built", "done", Some(1)),
                    t_old,
                )],
                set: metav1("Widget", TRUE, "Rebuilt", "done again", Some(1)),
                changed: true,
                expect_transition: t_old,
                expect_reason: "Rebuilt",
                expect_len: 1,
            },
            Case {
                name: "same status, new generation keeps transition time",
                existing: vec![stamped(
                    metav1("Widget", TRUE, "Built", "done", Some(1)),
                    t_old,
                )],
                set: metav1("Widget", TRUE, "Built", "done", Some(2)),
                changed: true,
                expect_transition: t_old,
                expect_reason: "Built",
                expect_len: 1,
            },
            Case {
                name: "status change moves transition time",
                existing: vec![stamped(
                    metav1("Widget", TRUE, "Built", "done", Some(1)),
                    t_old,
                )],
                set: metav1("Widget", FALSE, "Broken", "gone", Some(1)),
                changed: true,
                expect_transition: now,
                expect_reason: "Broken",
                expect_len: 1,
            },
        ];
        for case in cases {
            let mut list = case.existing.clone();
            let changed = set(&mut list, case.set.clone(), now);
            assert_eq!(changed, case.changed, "{}", case.name);
            assert_eq!(list.len(), case.expect_len, "{}", case.name);
            let got = find(&list, &case.set.type_).expect(case.name);
            assert_eq!(
                got.last_transition_time.0, case.expect_transition,
                "{}",
                case.name
            );
            assert_eq!(got.reason, case.expect_reason, "{}", case.name);
            assert_eq!(
                got.observed_generation, case.set.observed_generation,
                "{}",
                case.name
            );
        }
    }

    #[test]
    fn set_keeps_position_of_replaced_condition() {
        let mut list = Vec::new();
        set(&mut list, metav1("A", TRUE, "R", "", None), at(1));
        set(&mut list, metav1("B", TRUE, "R", "", None), at(1));
        set(&mut list, metav1("A", FALSE, "R", "", None), at(2));
        let types: Vec<_> = list.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, ["A", "B"]);
    }

    #[test]
    fn remove_and_queries() {
        let mut list = Vec::new();
        set(&mut list, metav1("A", TRUE, "R", "", None), at(1));
        set(&mut list, metav1("B", FALSE, "R", "", None), at(1));
        assert!(is_true(&list, "A"));
        assert!(is_false(&list, "B"));
        assert!(!is_true(&list, "C"));
        assert!(remove(&mut list, "A"));
        assert!(!remove(&mut list, "A"));
        assert!(find(&list, "A").is_none());
    }

    #[test]
    fn olm_condition_update_time_follows_content() {
        let mut list: Vec<SubscriptionCondition> = Vec::new();
        let pending = SubscriptionCondition {
            type_: SubscriptionConditionType::INSTALL_PLAN_PENDING,
            status: TRUE.into(),
            reason: Some("RequiresApproval".into()),
            ..Default::default()
        };
        assert!(set(&mut list, pending.clone(), at(10)));
        assert!(!set(&mut list, pending.clone(), at(20)));
        assert_eq!(
            list[0].last_heartbeat_time.as_ref().map(|t| t.0),
            Some(at(10))
        );

        let installing = SubscriptionCondition {
            reason: Some("Installing".into()),
            ..pending
        };
        assert!(set(&mut list, installing, at(30)));
        assert_eq!(
            list[0].last_transition_time.as_ref().map(|t| t.0),
            Some(at(10))
        );
        assert_eq!(
            list[0].last_heartbeat_time.as_ref().map(|t| t.0),
            Some(at(30))
        );

        let mut ip: Vec<InstallPlanCondition> = Vec::new();
        let installed = InstallPlanCondition {
            type_: InstallPlanConditionType::INSTALLED,
            status: FALSE.into(),
            ..Default::default()
        };
        assert!(set(&mut ip, installed.clone(), at(1)));
        assert!(set(
            &mut ip,
            InstallPlanCondition {
                status: TRUE.into(),
                ..installed
            },
            at(2)
        ));
        assert_eq!(
            ip[0].last_transition_time.as_ref().map(|t| t.0),
            Some(at(2))
        );
        assert_eq!(ip[0].last_update_time.as_ref().map(|t| t.0), Some(at(2)));
    }

    fn status_strategy() -> impl Strategy<Value = &'static str> {
        prop_oneof![Just(TRUE), Just(FALSE), Just(UNKNOWN)]
    }

    fn condition_strategy() -> impl Strategy<Value = Metav1Condition> {
        (
            prop_oneof![Just("Alpha"), Just("Beta"), Just("Gamma")],
            status_strategy(),
            "[A-Z][a-z]{0,6}",
            ".{0,12}",
            proptest::option::of(0i64..5),
        )
            .prop_map(|(t, s, r, m, g)| metav1(t, s, &r, &m, g))
    }

    proptest! {
        #[test]
        fn setting_twice_never_moves_transition_time(
            history in proptest::collection::vec(condition_strategy(), 0..6),
            condition in condition_strategy(),
            t1 in 0i64..1_000_000,
            dt in 1i64..1_000_000,
        ) {
            let mut list = Vec::new();
            for (i, c) in history.into_iter().enumerate() {
                set(&mut list, c, at(i as i64));
            }
            set(&mut list, condition.clone(), at(t1));
            let first = find(&list, &condition.type_).cloned().expect("just set");
            let changed = set(&mut list, condition.clone(), at(t1 + dt));
            let second = find(&list, &condition.type_).cloned().expect("still set");
            prop_assert!(!changed);
            prop_assert_eq!(first, second);
        }

        #[test]
        fn changing_status_always_moves_transition_time(
            history in proptest::collection::vec(condition_strategy(), 0..6),
            condition in condition_strategy(),
            other_status in status_strategy(),
            t1 in 0i64..1_000_000,
            dt in 1i64..1_000_000,
        ) {
            prop_assume!(other_status != condition.status);
            let mut list = Vec::new();
            for (i, c) in history.into_iter().enumerate() {
                set(&mut list, c, at(i as i64));
            }
            set(&mut list, condition.clone(), at(t1));
            let flipped = Metav1Condition { status: other_status.to_owned(), ..condition.clone() };
            prop_assert!(set(&mut list, flipped, at(t1 + dt)));
            let got = find(&list, &condition.type_).expect("still set");
            prop_assert_eq!(got.last_transition_time.0, at(t1 + dt));
            prop_assert_eq!(got.status.as_str(), other_status);
        }

        #[test]
        fn at_most_one_condition_per_type(
            ops in proptest::collection::vec(condition_strategy(), 0..20),
        ) {
            let mut list = Vec::new();
            for (i, c) in ops.into_iter().enumerate() {
                set(&mut list, c, at(i as i64));
            }
            let mut types: Vec<_> = list.iter().map(|c| c.type_.clone()).collect();
            let before = types.len();
            types.sort();
            types.dedup();
            prop_assert_eq!(types.len(), before);
        }
    }
}
