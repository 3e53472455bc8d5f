//! When a recorded failure is retried.

use std::time::Duration;

use bundle_unpacker::decide::retry::{MAX_RETRY_BACKOFF, Next, Stored, next_step, retry_delay};
use jiff::{SignedDuration, Timestamp};
use proptest::prelude::*;

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + seconds).unwrap()
}

fn failure(recorded: i64, attempts: u32) -> Stored {
    Stored::Failure {
        recorded_at: at(recorded),
        attempts,
        uid: "uid-1".into(),
        resource_version: "42".into(),
    }
}

#[test]
fn next_steps() {
    let interval = Duration::from_secs(60);
    let retry = |attempt| Next::Retry {
        attempt,
        uid: "uid-1".into(),
        resource_version: "42".into(),
    };
    let cases: Vec<(&str, Stored, i64, Next)> = vec![
        (
            "never unpacked",
            Stored::Nothing,
            0,
            Next::Unpack { attempt: 1 },
        ),
        ("content stored", Stored::Content, 0, Next::Done),
        ("not ours", Stored::Foreign, 0, Next::Done),
        (
            "fresh failure waits",
            failure(0, 1),
            59,
            Next::WaitUntil(at(60)),
        ),
        ("failure at the interval", failure(0, 1), 60, retry(2)),
        ("old failure", failure(0, 1), 10_000, retry(2)),
        (
            "second failure backs off",
            failure(0, 2),
            119,
            Next::WaitUntil(at(120)),
        ),
        ("second failure due", failure(0, 2), 120, retry(3)),
        (
            "third failure",
            failure(0, 3),
            200,
            Next::WaitUntil(at(240)),
        ),
        ("zero attempts is one", failure(0, 0), 60, retry(1)),
    ];
    for (name, stored, now, expected) in cases {
        assert_eq!(next_step(&stored, interval, at(now)), expected, "{name}");
    }
}

#[test]
fn backoff_is_capped() {
    let minute = Duration::from_secs(60);
    assert_eq!(retry_delay(minute, 1), minute);
    assert_eq!(retry_delay(minute, 2), minute * 2);
    assert_eq!(retry_delay(minute, 100), MAX_RETRY_BACKOFF);
    // An interval longer than the cap is honoured as it is.
    let day = Duration::from_secs(86_400);
    assert_eq!(retry_delay(day, 5), day);
}

proptest! {
    #[test]
    fn a_failure_is_never_retried_before_its_interval(
        interval in 1u64..100_000,
        attempts in 0u32..1000,
        elapsed in 0i64..1_000_000,
    ) {
        let interval = Duration::from_secs(interval);
        let next = next_step(&failure(0, attempts), interval, at(elapsed));
        let delay = retry_delay(interval, attempts.max(1));
        prop_assert!(delay >= interval);
        prop_assert!(delay <= interval.max(MAX_RETRY_BACKOFF));
        match next {
            Next::Retry { attempt, .. } => {
                prop_assert!(SignedDuration::from_secs(elapsed) >= SignedDuration::try_from(interval).unwrap());
                prop_assert_eq!(attempt, attempts.saturating_add(1));
            }
            Next::WaitUntil(due) => prop_assert!(due > at(elapsed)),
            other => prop_assert!(false, "unexpected {other:?}"),
        }
    }
}
