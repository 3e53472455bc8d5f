//! Go's `time.Duration` text form, which upstream OLM reads from
//! `spec.updateStrategy.registryPoll.interval` and from the OperatorGroup
//! annotations `operatorframework.io/bundle-unpack-timeout` and
//! `operatorframework.io/bundle-unpack-min-retry-interval`, and prints in
//! messages ("Using the default value of 15m0s instead"). One parser for
//! every service, so an annotation means the same everywhere.

use std::fmt::Write as _;

use jiff::SignedDuration;

/// Why a duration could not be read; the text is Go's error text, which
/// upstream puts in status messages.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Not a duration at all (or longer than [`MAX_DURATION_TEXT`], or out
    /// of range).
    #[error("time: invalid duration {}", crate::go_text::quote(.0))]
    Invalid(String),
    /// A number without a unit.
    #[error("time: missing unit in duration {}", crate::go_text::quote(.0))]
    MissingUnit(String),
    /// A unit Go does not know.
    #[error("time: unknown unit {} in duration {}", crate::go_text::quote(.unit), crate::go_text::quote(.input))]
    UnknownUnit {
        /// The unit.
        unit: String,
        /// The whole text.
        input: String,
    },
    /// A negative duration where only a length of time makes sense (see
    /// [`parse_non_negative`]).
    #[error("negative duration {}", crate::go_text::quote(.0))]
    Negative(String),
}

/// The longest input considered; Go has no such limit, but nothing sensible
/// is longer and it bounds the work done on hostile annotations.
pub const MAX_DURATION_TEXT: usize = 64;

const NANOS_PER: &[(&str, u128)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("μs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60 * 1_000_000_000),
    ("h", 3_600 * 1_000_000_000),
];

/// Fraction digits taken into account: with the largest unit (an hour,
/// 3.6e12 ns) 10^18 times the scale still fits a u128, and 18 digits are
/// finer than a nanosecond for every unit.
const MAX_FRACTION_DIGITS: usize = 18;

/// The largest magnitude Go's int64 nanoseconds hold.
const MAX_NANOS: u128 = i64::MAX as u128;

/// Parses a duration as Go's `time.ParseDuration` does: an optional sign, then
/// one or more decimal numbers each followed by a unit (`ns`, `us`, `µs`,
/// `ms`, `s`, `m`, `h`), for example `300ms`, `1.5h` or `2h45m`; a bare `0` is
/// zero.
pub fn parse(input: &str) -> Result<SignedDuration, DurationError> {
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
        return Ok(SignedDuration::ZERO);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (int_part, after) = rest.split_at(int_len);
        let (frac_part, after) = match after.strip_prefix('.') {
            Some(after) => {
                let frac_len = after.bytes().take_while(u8::is_ascii_digit).count();
                after.split_at(frac_len)
            }
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
        let Some(&(_, scale)) = NANOS_PER.iter().find(|(name, _)| *name == unit) else {
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
        if !frac_part.is_empty() {
            // Go keeps the precision an int64 of nanoseconds allows; more
            // digits than MAX_FRACTION_DIGITS cannot change the result, and
            // would overflow the arithmetic below.
            let mut frac_nanos: u128 = 0;
            let mut divisor: u128 = 1;
            for digit in frac_part.bytes().take(MAX_FRACTION_DIGITS) {
                frac_nanos = frac_nanos * 10 + u128::from(digit - b'0');
                divisor *= 10;
            }
            nanos += frac_nanos * scale / divisor;
        }
        total = total.checked_add(nanos).ok_or_else(invalid)?;
        if total > MAX_NANOS {
            return Err(invalid());
        }
        rest = after;
    }
    let nanos = i64::try_from(total).map_err(|_| invalid())?;
    let nanos = if negative { -nanos } else { nanos };
    Ok(SignedDuration::from_nanos(nanos))
}

/// Parses a length of time (a deadline, an interval): as [`parse`], but a
/// negative value is an error rather than a duration.
pub fn parse_non_negative(input: &str) -> Result<std::time::Duration, DurationError> {
    let duration = parse(input)?;
    if duration.is_negative() {
        return Err(DurationError::Negative(input.to_owned()));
    }
    std::time::Duration::try_from(duration).map_err(|_| DurationError::Invalid(input.to_owned()))
}

/// Formats a duration as Go's `Duration.String` does: `15m0s`, `1h30m0s`,
/// `1.5s`, `300ms`, `0s`.
pub fn format(duration: SignedDuration) -> String {
    let nanos = duration.as_nanos();
    if nanos == 0 {
        return "0s".to_owned();
    }
    let mut out = String::new();
    if nanos < 0 {
        out.push('-');
    }
    let magnitude = nanos.unsigned_abs();
    if magnitude < 1_000_000_000 {
        // Below one second: the largest sub-second unit with a fraction.
        let (scale, unit) = match magnitude {
            n if n < 1_000 => (1, "ns"),
            n if n < 1_000_000 => (1_000, "µs"),
            _ => (1_000_000, "ms"),
        };
        push_fraction(&mut out, magnitude, scale);
        out.push_str(unit);
        return out;
    }
    let hours = magnitude / 3_600_000_000_000;
    let minutes = (magnitude / 60_000_000_000) % 60;
    let second_nanos = magnitude % 60_000_000_000;
    if hours > 0 {
        let _ = write!(out, "{hours}h");
    }
    if hours > 0 || minutes > 0 {
        let _ = write!(out, "{minutes}m");
    }
    push_fraction(&mut out, second_nanos, 1_000_000_000);
    out.push('s');
    out
}

fn push_fraction(out: &mut String, value: u128, scale: u128) {
    let whole = value / scale;
    let fraction = value % scale;
    let _ = write!(out, "{whole}");
    if fraction > 0 {
        let width = scale.ilog10() as usize;
        let digits = format!("{fraction:0width$}");
        let _ = write!(out, ".{}", digits.trim_end_matches('0'));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_go_parses() {
        let cases = [
            ("0", 0),
            ("15m", 900_000_000_000),
            ("1h30m", 5_400_000_000_000),
            ("1.5h", 5_400_000_000_000),
            ("300ms", 300_000_000),
            ("-2s", -2_000_000_000),
            ("+2s", 2_000_000_000),
            ("1µs", 1_000),
            ("1us", 1_000),
            (".5s", 500_000_000),
            ("5.s", 5_000_000_000),
            ("1h1m1s1ms1us1ns", 3_661_001_001_001),
        ];
        for (text, nanos) in cases {
            assert_eq!(parse(text), Ok(SignedDuration::from_nanos(nanos)), "{text}");
        }
    }

    #[test]
    fn refuses_what_go_refuses_with_go_messages() {
        let cases = [
            ("", "time: invalid duration \"\""),
            ("5", "time: missing unit in duration \"5\""),
            ("5x", "time: unknown unit \"x\" in duration \"5x\""),
            ("-", "time: invalid duration \"-\""),
            (".s", "time: invalid duration \".s\""),
            ("1d", "time: unknown unit \"d\" in duration \"1d\""),
            ("10000000000h", "time: invalid duration \"10000000000h\""),
        ];
        for (text, message) in cases {
            assert_eq!(
                parse(text).map_err(|e| e.to_string()),
                Err(message.to_owned()),
                "{text}"
            );
        }
        let long = format!("{}s", "1".repeat(MAX_DURATION_TEXT));
        assert_eq!(parse(&long), Err(DurationError::Invalid(long.clone())));
        let fits = format!("{}s", "0".repeat(MAX_DURATION_TEXT - 1));
        assert_eq!(parse(&fits), Ok(SignedDuration::ZERO));
    }

    #[test]
    fn long_fractions_neither_overflow_nor_lose_the_value() {
        let nines = format!("0.{}", "9".repeat(30));
        for unit in ["ns", "us", "ms", "s", "m", "h"] {
            let text = format!("{nines}{unit}");
            assert!(parse(&text).is_ok(), "{text}");
        }
        assert_eq!(
            parse(&format!("{nines}s")),
            Ok(SignedDuration::from_nanos(999_999_999))
        );
        assert_eq!(
            parse(&format!("{nines}h")),
            Ok(SignedDuration::from_nanos(3_599_999_999_999))
        );
    }

    #[test]
    fn lengths_of_time_may_not_be_negative() {
        assert_eq!(
            parse_non_negative("90s"),
            Ok(std::time::Duration::from_secs(90))
        );
        assert_eq!(parse_non_negative("-0"), Ok(std::time::Duration::ZERO));
        assert_eq!(
            parse_non_negative("-1s"),
            Err(DurationError::Negative("-1s".to_owned()))
        );
        assert_eq!(
            parse_non_negative("-1s").unwrap_err().to_string(),
            "negative duration \"-1s\""
        );
        assert_eq!(
            parse_non_negative("5"),
            Err(DurationError::MissingUnit("5".to_owned()))
        );
    }

    #[test]
    fn formats_as_go_does() {
        let cases = [
            (0, "0s"),
            (900_000_000_000, "15m0s"),
            (5_400_000_000_000, "1h30m0s"),
            (1_500_000_000, "1.5s"),
            (300_000_000, "300ms"),
            (1_500, "1.5µs"),
            (7, "7ns"),
            (-60_000_000_000, "-1m0s"),
            (3_600_000_000_000, "1h0m0s"),
        ];
        for (nanos, text) in cases {
            assert_eq!(format(SignedDuration::from_nanos(nanos)), text);
        }
    }

    proptest::proptest! {
        #[test]
        fn format_then_parse_is_identity(nanos in -(1i64 << 62)..(1i64 << 62)) {
            let d = SignedDuration::from_nanos(nanos);
            proptest::prop_assert_eq!(parse(&format(d)), Ok(d));
        }

        #[test]
        fn never_panics(text in "\\PC{0,40}") {
            let _ = parse(&text);
        }
    }
}
