//! Go's `time.Duration` text form (`300ms`, `1.5h`, `2h45m`, a bare `0`),
//! which upstream reads from the OperatorGroup annotations
//! `operatorframework.io/bundle-unpack-timeout` and
//! `operatorframework.io/bundle-unpack-min-retry-interval`.

use std::time::Duration;

/// The longest text considered: nothing sensible is longer, and it bounds
/// the work done on a hostile annotation.
pub const MAX_DURATION_TEXT: usize = 64;

/// Why a duration could not be read, in Go's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Not a duration at all (or longer than [`MAX_DURATION_TEXT`], or
    /// out of range).
    #[error("time: invalid duration {0:?}")]
    Invalid(String),
    /// A number without a unit.
    #[error("time: missing unit in duration {0:?}")]
    MissingUnit(String),
    /// A unit Go does not know.
    #[error("time: unknown unit {unit:?} in duration {input:?}")]
    UnknownUnit {
        /// The unit.
        unit: String,
        /// The whole text.
        input: String,
    },
    /// A negative duration, which no annotation read here may hold.
    #[error("negative duration {0:?}")]
    Negative(String),
}

const UNITS: &[(&str, u128)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("μs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// Go's int64 nanoseconds bound.
const MAX_NANOS: u128 = i64::MAX as u128;

/// Parses `input` as Go's `time.ParseDuration` does, refusing negative
/// values.
pub fn parse(input: &str) -> Result<Duration, DurationError> {
    let invalid = || DurationError::Invalid(input.to_owned());
    if input.len() > MAX_DURATION_TEXT {
        return Err(invalid());
    }
    let (negative, mut rest) = match input.as_bytes().first() {
        Some(b'-') => (true, &input[1..]),
        Some(b'+') => (false, &input[1..]),
        _ => (false, input),
    };
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (int_part, after) = rest.split_at(int_len);
        let (frac_part, after) = match after.strip_prefix('.') {
            Some(after) => after.split_at(after.bytes().take_while(u8::is_ascii_digit).count()),
            None => ("", after),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(invalid());
        }
        let unit_len = after
            .char_indices()
            .find(|(_, c)| *c == '.' || c.is_ascii_digit())
            .map_or(after.len(), |(i, _)| i);
        let (unit, after) = after.split_at(unit_len);
        if unit.is_empty() {
            return Err(DurationError::MissingUnit(input.to_owned()));
        }
        let Some(&(_, scale)) = UNITS.iter().find(|(name, _)| *name == unit) else {
            return Err(DurationError::UnknownUnit {
                unit: unit.to_owned(),
                input: input.to_owned(),
            });
        };
        let whole: u128 = if int_part.is_empty() {
            0
        } else {
            int_part.parse().map_err(|_| invalid())?
        };
        let mut nanos = whole.checked_mul(scale).ok_or_else(invalid)?;
        let (mut fraction, mut divisor) = (0u128, 1u128);
        for digit in frac_part.bytes().take(20) {
            fraction = fraction * 10 + u128::from(digit - b'0');
            divisor *= 10;
        }
        nanos += fraction * scale / divisor;
        total = total.checked_add(nanos).ok_or_else(invalid)?;
        if total > MAX_NANOS {
            return Err(invalid());
        }
        rest = after;
    }
    if negative && total > 0 {
        return Err(DurationError::Negative(input.to_owned()));
    }
    let nanos = u64::try_from(total).map_err(|_| invalid())?;
    Ok(Duration::from_nanos(nanos))
}
