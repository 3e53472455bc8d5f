//! Go durations as lengths of time, and the OperatorGroup annotations read
//! with them (the unpack policy).
#![allow(clippy::unwrap_used)]

use std::{collections::BTreeMap, time::Duration};

use olm_api::{
    go_duration::{self, DurationError, MAX_DURATION_TEXT},
    labels::{BUNDLE_UNPACK_MIN_RETRY_INTERVAL, BUNDLE_UNPACK_TIMEOUT},
    unpack_policy::{
        DEFAULT_RETRY_INTERVAL, DEFAULT_UNPACK_TIMEOUT, MIN_RETRY_INTERVAL, unpack_policy,
    },
};
use proptest::prelude::*;

#[test]
fn go_durations_parse_as_go_parses_them() {
    let ms = Duration::from_millis;
    let cases: &[(&str, Result<Duration, ()>)] = &[
        ("0", Ok(Duration::ZERO)),
        ("-0", Ok(Duration::ZERO)),
        ("300ms", Ok(ms(300))),
        ("1.5h", Ok(Duration::from_secs(5400))),
        ("2h45m", Ok(Duration::from_secs(9900))),
        ("1m30s", Ok(Duration::from_secs(90))),
        (".5s", Ok(ms(500))),
        ("1µs", Ok(Duration::from_micros(1))),
        ("1us", Ok(Duration::from_micros(1))),
        ("10ns", Ok(Duration::from_nanos(10))),
        ("+5m", Ok(Duration::from_secs(300))),
        ("", Err(())),
        ("5", Err(())),
        ("5d", Err(())),
        ("-5m", Err(())),
        ("m", Err(())),
        (".s", Err(())),
        ("1.2.3s", Err(())),
        ("9999999999999999999h", Err(())),
        ("3000000h", Err(())),
        ("5 m", Err(())),
    ];
    for (input, expected) in cases {
        let got = go_duration::parse_non_negative(input);
        match expected {
            Ok(d) => assert_eq!(got.as_ref().ok(), Some(d), "{input:?}: {got:?}"),
            Err(()) => assert!(got.is_err(), "{input:?} must fail, got {got:?}"),
        }
    }
    assert!(matches!(
        go_duration::parse_non_negative("5"),
        Err(DurationError::MissingUnit(_))
    ));
    assert!(matches!(
        go_duration::parse_non_negative("5d"),
        Err(DurationError::UnknownUnit { .. })
    ));
    assert!(matches!(
        go_duration::parse_non_negative("-1s"),
        Err(DurationError::Negative(_))
    ));
    assert_eq!(
        go_duration::parse_non_negative("5d")
            .unwrap_err()
            .to_string(),
        "time: unknown unit \"d\" in duration \"5d\""
    );
}

#[test]
fn over_long_duration_text_is_refused() {
    let long = format!("{}s", "1".repeat(MAX_DURATION_TEXT));
    assert!(matches!(
        go_duration::parse_non_negative(&long),
        Err(DurationError::Invalid(_))
    ));
    let fits = format!("{}s", "0".repeat(MAX_DURATION_TEXT - 2));
    assert!(go_duration::parse_non_negative(&fits).is_ok());
}

proptest! {
    #[test]
    fn any_text_parses_or_fails_without_panicking(text in "\\PC{0,80}") {
        let _ = go_duration::parse_non_negative(&text);
    }

    #[test]
    fn whole_units_round_trip(h in 0u64..1000, m in 0u64..60, s in 0u64..60) {
        let text = format!("{h}h{m}m{s}s");
        prop_assert_eq!(go_duration::parse_non_negative(&text).unwrap(), Duration::from_secs(h * 3600 + m * 60 + s));
    }
}

fn og(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// (annotations, timeout, retry interval, warnings)
type PolicyCase = (
    Vec<(&'static str, &'static str)>,
    Option<Duration>,
    Duration,
    usize,
);

#[test]
fn operator_group_annotations_set_the_policy() {
    let default = Some(DEFAULT_UNPACK_TIMEOUT);
    let secs = Duration::from_secs;
    // (annotations, timeout, retry interval, warnings)
    let cases: Vec<PolicyCase> = vec![
        (vec![], default, DEFAULT_RETRY_INTERVAL, 0),
        (
            vec![(BUNDLE_UNPACK_TIMEOUT, "2m")],
            Some(secs(120)),
            DEFAULT_RETRY_INTERVAL,
            0,
        ),
        (
            vec![(BUNDLE_UNPACK_TIMEOUT, "0")],
            None,
            DEFAULT_RETRY_INTERVAL,
            0,
        ),
        (
            vec![(BUNDLE_UNPACK_TIMEOUT, "soon")],
            default,
            DEFAULT_RETRY_INTERVAL,
            1,
        ),
        (
            vec![(BUNDLE_UNPACK_TIMEOUT, "-1m")],
            default,
            DEFAULT_RETRY_INTERVAL,
            1,
        ),
        (
            vec![(BUNDLE_UNPACK_MIN_RETRY_INTERVAL, "30s")],
            default,
            secs(30),
            0,
        ),
        (
            vec![(BUNDLE_UNPACK_MIN_RETRY_INTERVAL, "0")],
            default,
            DEFAULT_RETRY_INTERVAL,
            0,
        ),
        (
            vec![(BUNDLE_UNPACK_MIN_RETRY_INTERVAL, "1ms")],
            default,
            MIN_RETRY_INTERVAL,
            0,
        ),
        (
            vec![(BUNDLE_UNPACK_MIN_RETRY_INTERVAL, "x")],
            default,
            DEFAULT_RETRY_INTERVAL,
            1,
        ),
        (
            vec![
                (BUNDLE_UNPACK_TIMEOUT, " 90s "),
                (BUNDLE_UNPACK_MIN_RETRY_INTERVAL, "1h"),
            ],
            Some(secs(90)),
            secs(3600),
            0,
        ),
    ];
    for (annotations, timeout, retry, warnings) in cases {
        let annotations = og(&annotations);
        let policy = unpack_policy([("og", &annotations)], default);
        assert_eq!(policy.timeout, timeout, "{annotations:?}");
        assert_eq!(policy.retry_interval, retry, "{annotations:?}");
        assert_eq!(
            policy.warnings.len(),
            warnings,
            "{annotations:?}: {:?}",
            policy.warnings
        );
    }
}

#[test]
fn without_an_operator_group_the_command_line_default_holds() {
    assert_eq!(unpack_policy([], None).timeout, None);
    assert_eq!(
        unpack_policy([], Some(Duration::from_secs(5))).timeout,
        Some(Duration::from_secs(5))
    );
}

#[test]
fn with_several_operator_groups_the_first_by_name_that_sets_it_wins() {
    let b = og(&[(BUNDLE_UNPACK_TIMEOUT, "1m")]);
    let a = og(&[(BUNDLE_UNPACK_TIMEOUT, "2m")]);
    let c = og(&[]);
    let policy = unpack_policy([("b", &b), ("c", &c), ("a", &a)], None);
    assert_eq!(policy.timeout, Some(Duration::from_secs(120)));
}
