//! Semantic versions and version ranges exactly as OLM reads them (Go's
//! `github.com/blang/semver/v4`), not Cargo's syntax.
//!
//! OLM uses blang ranges for `olm.skipRange`, `olm.package.required`
//! `versionRange` and `olm.constraint` package ranges. The grammar:
//!
//! * comparators `<`, `<=`, `>`, `>=`, `=`, `==`, none (equality), `!`, `!=`,
//!   each followed by a strict `MAJOR.MINOR.PATCH[-pre][+build]` version; a space
//!   after an operator is allowed (`>= 1.0.0`);
//! * comparators separated by spaces are ANDed, `||` separates ORed groups, and
//!   AND binds tighter; there are no brackets, tildes, carets or hyphen ranges;
//! * `x` wildcards: `1.2.x` means `>=1.2.0 <1.3.0`, `>1.x` means `>=2.0.0`, and so
//!   on (blang's `expandWildcardVersion`).
//!
//! blang's parser has quirks that real ranges may depend on, and this module
//! keeps them so that a range means here what it means to upstream: a token of a
//! single character is dropped (`1.0.0 - 2.0.0` is `=1.0.0 =2.0.0`), any token
//! that contains the letter `x` goes through wildcard expansion (so
//! `1.0.0-x.1` as a bare comparator is rejected), and `1.x.x` behaves like
//! `1.x.0`. Comparisons follow semver precedence: build metadata is ignored and a
//! pre-release sorts before its release (`2.5.3-final < 2.5.3`).
//!
//! Bundle versions are parsed strictly ([`Version::parse`], blang `Parse`);
//! [`Version::parse_tolerant`] is blang's `ParseTolerant`, which OLM's resolver
//! uses for versions reported by a registry.

use std::{cmp::Ordering, fmt, str::FromStr};

/// Why a version does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    /// The input is empty.
    #[error("version string is empty")]
    Empty,
    /// Fewer than three dot-separated parts.
    #[error("no major.minor.patch elements found in {input:?}")]
    MissingParts {
        /// The version as given.
        input: String,
    },
    /// A numeric part has a character other than a digit, or is empty.
    #[error("invalid {part} number {value:?}: must be decimal digits")]
    NotANumber {
        /// `major`, `minor` or `patch`.
        part: &'static str,
        /// The offending text.
        value: String,
    },
    /// A numeric part starts with `0` and has more digits.
    #[error("{part} number {value:?} must not contain leading zeroes")]
    LeadingZero {
        /// `major`, `minor`, `patch` or `pre-release`.
        part: &'static str,
        /// The offending text.
        value: String,
    },
    /// A numeric part does not fit in 64 bits.
    #[error("{part} number {value:?} is too large")]
    TooLarge {
        /// `major`, `minor`, `patch` or `pre-release`.
        part: &'static str,
        /// The offending text.
        value: String,
    },
    /// A pre-release identifier is empty (`1.0.0-` or `1.0.0-a..b`).
    #[error("pre-release identifier is empty in {input:?}")]
    EmptyPreRelease {
        /// The version as given.
        input: String,
    },
    /// A pre-release identifier has a character outside `[0-9A-Za-z-]`.
    #[error("invalid character(s) in pre-release identifier {value:?}")]
    InvalidPreRelease {
        /// The offending identifier.
        value: String,
    },
    /// A build metadata identifier is empty.
    #[error("build metadata identifier is empty in {input:?}")]
    EmptyBuild {
        /// The version as given.
        input: String,
    },
    /// A build metadata identifier has a character outside `[0-9A-Za-z-]`.
    #[error("invalid character(s) in build metadata {value:?}")]
    InvalidBuild {
        /// The offending identifier.
        value: String,
    },
    /// Tolerant parsing: a version with fewer than three parts carries a
    /// pre-release or build suffix.
    #[error("short version {input:?} cannot contain pre-release or build metadata")]
    ShortWithMetadata {
        /// The version as given.
        input: String,
    },
}

/// Why a version range does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    /// The range has no comparators (it is empty or blank).
    #[error("version range {range:?} is empty")]
    Empty {
        /// The range as given.
        range: String,
    },
    /// The range starts with `||`.
    #[error("version range {range:?} starts with '||'")]
    LeadingOr {
        /// The range as given.
        range: String,
    },
    /// The range ends with `||`.
    #[error("version range {range:?} ends with '||'")]
    TrailingOr {
        /// The range as given.
        range: String,
    },
    /// A comparator has no digit, so no version can be found in it.
    #[error("no version in comparator {comparator:?} of range {range:?}")]
    NoVersion {
        /// The comparator token after wildcard expansion.
        comparator: String,
        /// The range as given.
        range: String,
    },
    /// The text before the version is not a known operator.
    #[error("unknown operator {operator:?} in comparator {comparator:?} of range {range:?}")]
    UnknownOperator {
        /// The text before the version.
        operator: String,
        /// The comparator token.
        comparator: String,
        /// The range as given.
        range: String,
    },
    /// The version of a comparator does not parse.
    #[error("invalid version in comparator {comparator:?} of range {range:?}")]
    InvalidVersion {
        /// The comparator token.
        comparator: String,
        /// The range as given.
        range: String,
        /// Why the version is invalid.
        #[source]
        source: VersionError,
    },
}

/// One pre-release identifier: numeric identifiers sort before alphanumeric ones.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PreRelease {
    /// A purely numeric identifier, without leading zeroes.
    Numeric(u64),
    /// An identifier with at least one non-digit, compared as ASCII text.
    Alphanumeric(String),
}

impl PreRelease {
    fn parse(s: &str, input: &str) -> Result<Self, VersionError> {
        if s.is_empty() {
            return Err(VersionError::EmptyPreRelease {
                input: input.to_owned(),
            });
        }
        if s.bytes().all(|b| b.is_ascii_digit()) {
            if s.len() > 1 && s.starts_with('0') {
                return Err(VersionError::LeadingZero {
                    part: "pre-release",
                    value: s.to_owned(),
                });
            }
            return s
                .parse()
                .map(Self::Numeric)
                .map_err(|_| VersionError::TooLarge {
                    part: "pre-release",
                    value: s.to_owned(),
                });
        }
        if is_identifier(s) {
            Ok(Self::Alphanumeric(s.to_owned()))
        } else {
            Err(VersionError::InvalidPreRelease {
                value: s.to_owned(),
            })
        }
    }
}

impl Ord for PreRelease {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Self::Numeric(a), Self::Numeric(b)) => a.cmp(b),
            (Self::Numeric(_), Self::Alphanumeric(_)) => Ordering::Less,
            (Self::Alphanumeric(_), Self::Numeric(_)) => Ordering::Greater,
            (Self::Alphanumeric(a), Self::Alphanumeric(b)) => a.cmp(b),
        }
    }
}

impl PartialOrd for PreRelease {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for PreRelease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Numeric(n) => write!(f, "{n}"),
            Self::Alphanumeric(s) => f.write_str(s),
        }
    }
}

/// `[0-9A-Za-z-]+` without the emptiness check.
fn is_identifier(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// A semantic version as blang models it.
///
/// Equality and hashing include build metadata, so that two differently
/// written versions stay distinct; [`Ord`] orders by semver precedence and
/// breaks ties by build metadata. Use [`Version::cmp_precedence`] for the
/// comparison ranges use, which ignores build metadata.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Version {
    /// The major number.
    pub major: u64,
    /// The minor number.
    pub minor: u64,
    /// The patch number.
    pub patch: u64,
    /// Pre-release identifiers (after `-`), empty for a release.
    pub pre: Vec<PreRelease>,
    /// Build metadata identifiers (after `+`); they do not affect precedence.
    pub build: Vec<String>,
}

impl Version {
    /// A release version without pre-release or build metadata.
    pub const fn new(major: u64, minor: u64, patch: u64) -> Self {
        Self {
            major,
            minor,
            patch,
            pre: Vec::new(),
            build: Vec::new(),
        }
    }

    /// Parses a strict semantic version (blang `Parse`): exactly
    /// `MAJOR.MINOR.PATCH`, optional `-pre.release` and `+build.meta`, no
    /// leading `v`, no leading zeroes.
    pub fn parse(input: &str) -> Result<Self, VersionError> {
        if input.is_empty() {
            return Err(VersionError::Empty);
        }
        let mut parts = input.splitn(3, '.');
        let (Some(major), Some(minor), Some(rest)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(VersionError::MissingParts {
                input: input.to_owned(),
            });
        };
        let major = parse_number(major, "major")?;
        let minor = parse_number(minor, "minor")?;
        let (rest, build) = match rest.split_once('+') {
            Some((rest, build)) => (rest, Some(build)),
            None => (rest, None),
        };
        let (patch, pre) = match rest.split_once('-') {
            Some((patch, pre)) => (patch, Some(pre)),
            None => (rest, None),
        };
        let patch = parse_number(patch, "patch")?;
        let pre = match pre {
            Some(pre) => pre
                .split('.')
                .map(|p| PreRelease::parse(p, input))
                .collect::<Result<_, _>>()?,
            None => Vec::new(),
        };
        let build = match build {
            Some(build) => build
                .split('.')
                .map(|b| {
                    if b.is_empty() {
                        Err(VersionError::EmptyBuild {
                            input: input.to_owned(),
                        })
                    } else if is_identifier(b) {
                        Ok(b.to_owned())
                    } else {
                        Err(VersionError::InvalidBuild {
                            value: b.to_owned(),
                        })
                    }
                })
                .collect::<Result<_, _>>()?,
            None => Vec::new(),
        };
        Ok(Self {
            major,
            minor,
            patch,
            pre,
            build,
        })
    }

    /// Parses a version leniently (blang `ParseTolerant`): surrounding
    /// whitespace and a leading `v` are dropped, leading zeroes are removed, and
    /// a missing minor or patch is taken as `0` (`v1.2` is `1.2.0`).
    pub fn parse_tolerant(input: &str) -> Result<Self, VersionError> {
        let trimmed = input.trim();
        let trimmed = trimmed.strip_prefix('v').unwrap_or(trimmed);
        let mut parts: Vec<String> = trimmed
            .splitn(3, '.')
            .map(|p| {
                if p.len() > 1 {
                    let stripped = p.trim_start_matches('0');
                    if stripped.as_bytes().first().is_some_and(u8::is_ascii_digit) {
                        stripped.to_owned()
                    } else {
                        format!("0{stripped}")
                    }
                } else {
                    p.to_owned()
                }
            })
            .collect();
        if parts.len() < 3 {
            if parts
                .last()
                .is_some_and(|p| p.contains('+') || p.contains('-'))
            {
                return Err(VersionError::ShortWithMetadata {
                    input: input.to_owned(),
                });
            }
            parts.resize(3, "0".to_owned());
        }
        Self::parse(&parts.join("."))
    }

    /// Compares by semver precedence, ignoring build metadata (blang `Compare`).
    pub fn cmp_precedence(&self, other: &Self) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(other.major, other.minor, other.patch))
            .then_with(|| match (self.pre.is_empty(), other.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => self.pre.cmp(&other.pre),
            })
    }

    /// Whether this is a pre-release.
    pub fn is_pre_release(&self) -> bool {
        !self.pre.is_empty()
    }
}

fn parse_number(s: &str, part: &'static str) -> Result<u64, VersionError> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(VersionError::NotANumber {
            part,
            value: s.to_owned(),
        });
    }
    if s.len() > 1 && s.starts_with('0') {
        return Err(VersionError::LeadingZero {
            part,
            value: s.to_owned(),
        });
    }
    s.parse().map_err(|_| VersionError::TooLarge {
        part,
        value: s.to_owned(),
    })
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        self.cmp_precedence(other)
            .then_with(|| self.build.cmp(&other.build))
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl FromStr for Version {
    type Err = VersionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        for (i, pre) in self.pre.iter().enumerate() {
            f.write_str(if i == 0 { "-" } else { "." })?;
            write!(f, "{pre}")?;
        }
        for (i, build) in self.build.iter().enumerate() {
            f.write_str(if i == 0 { "+" } else { "." })?;
            f.write_str(build)?;
        }
        Ok(())
    }
}

/// A comparison operator of a range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operator {
    /// `=`, `==` or no operator.
    Equal,
    /// `!` or `!=`.
    NotEqual,
    /// `>`.
    Greater,
    /// `>=`.
    GreaterOrEqual,
    /// `<`.
    Less,
    /// `<=`.
    LessOrEqual,
}

impl Operator {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "" | "=" | "==" => Self::Equal,
            "!" | "!=" => Self::NotEqual,
            ">" => Self::Greater,
            ">=" => Self::GreaterOrEqual,
            "<" => Self::Less,
            "<=" => Self::LessOrEqual,
            _ => return None,
        })
    }

    fn holds(self, ordering: Ordering) -> bool {
        match self {
            Self::Equal => ordering == Ordering::Equal,
            Self::NotEqual => ordering != Ordering::Equal,
            Self::Greater => ordering == Ordering::Greater,
            Self::GreaterOrEqual => ordering != Ordering::Less,
            Self::Less => ordering == Ordering::Less,
            Self::LessOrEqual => ordering != Ordering::Greater,
        }
    }
}

/// One `operator version` test of a range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comparator {
    /// How the candidate is compared with [`Comparator::version`].
    pub operator: Operator,
    /// The version compared against.
    pub version: Version,
}

impl Comparator {
    /// Whether `version` passes this test.
    pub fn matches(&self, version: &Version) -> bool {
        self.operator.holds(version.cmp_precedence(&self.version))
    }
}

/// A parsed blang version range: a disjunction of conjunctions of comparators.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Range {
    source: String,
    alternatives: Vec<Vec<Comparator>>,
}

impl Range {
    /// Parses a range with blang's `ParseRange` grammar and quirks (see the
    /// module documentation).
    pub fn parse(range: &str) -> Result<Self, RangeError> {
        let tokens = split_and_trim(range);
        let groups = split_or_groups(&tokens, range)?;
        let mut expanded = Vec::with_capacity(groups.len());
        for group in groups {
            let mut tokens = Vec::with_capacity(group.len());
            for token in group {
                expand_wildcard(token, range, &mut tokens)?;
            }
            expanded.push(tokens);
        }
        let alternatives = expanded
            .into_iter()
            .map(|group| {
                group
                    .into_iter()
                    .map(|token| build_comparator(&token, range))
                    .collect::<Result<Vec<_>, _>>()
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            source: range.to_owned(),
            alternatives,
        })
    }

    /// Whether `version` is in the range.
    pub fn contains(&self, version: &Version) -> bool {
        self.alternatives
            .iter()
            .any(|group| group.iter().all(|c| c.matches(version)))
    }

    /// The ORed groups of ANDed comparators, after wildcard expansion.
    pub fn alternatives(&self) -> &[Vec<Comparator>] {
        &self.alternatives
    }

    /// The range as it was written.
    pub fn as_str(&self) -> &str {
        &self.source
    }
}

impl FromStr for Range {
    type Err = RangeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

/// blang `splitAndTrim`: splits at spaces, except a space right after `>`,
/// `<` or `=`; drops tokens shorter than two bytes; removes inner spaces.
fn split_and_trim(s: &str) -> Vec<String> {
    let bytes = s.as_bytes();
    let mut tokens = Vec::new();
    let mut last = 0usize;
    let mut last_char = 0u8;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b' ' && !matches!(last_char, b'>' | b'<' | b'=') {
            if last + 1 < i {
                tokens.push(&s[last..i]);
            }
            last = i + 1;
        } else if b != b' ' {
            last_char = b;
        }
    }
    if last + 1 < bytes.len() {
        tokens.push(&s[last..]);
    }
    tokens.into_iter().map(|t| t.replace(' ', "")).collect()
}

/// blang `splitORParts`.
fn split_or_groups<'a>(tokens: &'a [String], range: &str) -> Result<Vec<&'a [String]>, RangeError> {
    if tokens.is_empty() {
        return Err(RangeError::Empty {
            range: range.to_owned(),
        });
    }
    let mut groups = Vec::new();
    let mut last = 0;
    for (i, token) in tokens.iter().enumerate() {
        if token == "||" {
            if i == 0 {
                return Err(RangeError::LeadingOr {
                    range: range.to_owned(),
                });
            }
            groups.push(&tokens[last..i]);
            last = i + 1;
        }
    }
    if last == tokens.len() {
        return Err(RangeError::TrailingOr {
            range: range.to_owned(),
        });
    }
    groups.push(&tokens[last..]);
    Ok(groups)
}

/// blang `splitComparatorVersion`: everything before the first digit is the
/// operator.
fn split_operator<'t>(token: &'t str, range: &str) -> Result<(&'t str, &'t str), RangeError> {
    let i = token
        .bytes()
        .position(|b| b.is_ascii_digit())
        .ok_or_else(|| RangeError::NoVersion {
            comparator: token.to_owned(),
            range: range.to_owned(),
        })?;
    Ok((token[..i].trim(), &token[i..]))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Wildcard {
    None,
    Major,
    Minor,
    Patch,
}

/// Adds one to the dot-separated number at `index`, as blang's
/// `increment{Major,Minor}Version` do (including Go `Atoi`'s optional sign);
/// `None` where blang yields an empty string.
fn increment_part(version: &str, index: usize) -> Option<String> {
    let mut parts: Vec<String> = version.split('.').map(str::to_owned).collect();
    let part = parts.get_mut(index)?;
    let n: i64 = part.parse().ok()?;
    *part = n.wrapping_add(1).to_string();
    Some(parts.join("."))
}

/// blang `expandWildcardVersion` for one token: pushes the expanded tokens.
fn expand_wildcard(token: &str, range: &str, out: &mut Vec<String>) -> Result<(), RangeError> {
    if !token.contains('x') {
        out.push(token.to_owned());
        return Ok(());
    }
    let (operator, version) = split_operator(token, range)?;
    let parts: Vec<&str> = version.split('.').collect();
    let wildcard = if parts.last() == Some(&"x") {
        match parts.len() {
            1 => Wildcard::Major,
            2 => Wildcard::Minor,
            3 => Wildcard::Patch,
            _ => Wildcard::None,
        }
    } else {
        Wildcard::None
    };
    let flat = {
        let v = version.replacen(".x.x", ".x", 1).replacen(".x", ".0", 1);
        if v.split('.').count() == 2 {
            format!("{v}.0")
        } else {
            v
        }
    };
    let (result_operator, increment) = match operator {
        ">" => (">=", true),
        ">=" => (">=", false),
        "<" => ("<", false),
        "<=" => ("<", true),
        "" | "=" | "==" => {
            out.push(format!(">={flat}"));
            ("<", true)
        }
        "!=" | "!" => {
            out.push(format!("<{flat}"));
            (">=", true)
        }
        _ => ("", false),
    };
    let result_version = if increment {
        match wildcard {
            Wildcard::Patch => increment_part(&flat, 1).unwrap_or_default(),
            Wildcard::Minor => increment_part(&flat, 0).unwrap_or_default(),
            Wildcard::None | Wildcard::Major => String::new(),
        }
    } else {
        flat
    };
    out.push(format!("{result_operator}{result_version}"));
    Ok(())
}

/// blang `buildVersionRange` for one expanded token.
fn build_comparator(token: &str, range: &str) -> Result<Comparator, RangeError> {
    let (operator, version) = split_operator(token, range)?;
    let op = Operator::parse(operator).ok_or_else(|| RangeError::UnknownOperator {
        operator: operator.to_owned(),
        comparator: token.to_owned(),
        range: range.to_owned(),
    })?;
    let version = Version::parse(version).map_err(|source| RangeError::InvalidVersion {
        comparator: token.to_owned(),
        range: range.to_owned(),
        source,
    })?;
    Ok(Comparator {
        operator: op,
        version,
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    fn r(s: &str) -> Range {
        Range::parse(s).unwrap()
    }

    #[test]
    fn strict_versions_parse_and_print_back() {
        for s in [
            "0.0.0",
            "1.2.3",
            "1.2.3-alpha.1",
            "1.2.3+build.5",
            "1.0.0-rc.1+b-2",
            "4.8.0-202107191148",
        ] {
            assert_eq!(v(s).to_string(), s);
        }
    }

    #[test]
    fn strict_parsing_rejects_what_blang_rejects() {
        assert_eq!(Version::parse(""), Err(VersionError::Empty));
        assert!(matches!(
            Version::parse("1.0"),
            Err(VersionError::MissingParts { .. })
        ));
        assert!(matches!(
            Version::parse("v1.0.0"),
            Err(VersionError::NotANumber { part: "major", .. })
        ));
        assert!(matches!(
            Version::parse("01.0.0"),
            Err(VersionError::LeadingZero { .. })
        ));
        assert!(matches!(
            Version::parse("1.0.0-01"),
            Err(VersionError::LeadingZero { .. })
        ));
        assert!(matches!(
            Version::parse("1.0.0-"),
            Err(VersionError::EmptyPreRelease { .. })
        ));
        assert!(matches!(
            Version::parse("1.0.0+"),
            Err(VersionError::EmptyBuild { .. })
        ));
        assert!(matches!(
            Version::parse("1.0.0-a_b"),
            Err(VersionError::InvalidPreRelease { .. })
        ));
        assert!(matches!(
            Version::parse("99999999999999999999.0.0"),
            Err(VersionError::TooLarge { .. })
        ));
        // A hyphen in the build part is part of the build, not a pre-release.
        assert_eq!(v("1.0.0+a-b").pre, Vec::<PreRelease>::new());
    }

    #[test]
    fn error_messages_are_lowercase_and_name_the_input() {
        let err = Range::parse(">=1.0 <2.0.0").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid version in comparator \">=1.0\" of range \">=1.0 <2.0.0\""
        );
        assert_eq!(
            std::error::Error::source(&err)
                .map(ToString::to_string)
                .as_deref(),
            Some("no major.minor.patch elements found in \"1.0\"")
        );
    }

    #[test]
    fn tolerant_parsing_follows_blang() {
        assert_eq!(Version::parse_tolerant("v1.2").unwrap(), v("1.2.0"));
        assert_eq!(Version::parse_tolerant(" 1 ").unwrap(), v("1.0.0"));
        assert_eq!(Version::parse_tolerant("01.02.03").unwrap(), v("1.2.3"));
        assert_eq!(
            Version::parse_tolerant("1.0.00-beta").unwrap(),
            v("1.0.0-beta")
        );
        assert!(matches!(
            Version::parse_tolerant("1.2-beta"),
            Err(VersionError::ShortWithMetadata { .. })
        ));
    }

    #[test]
    fn precedence_follows_semver() {
        let ordered = [
            "1.0.0-alpha",
            "1.0.0-alpha.1",
            "1.0.0-alpha.beta",
            "1.0.0-beta",
            "1.0.0-beta.2",
            "1.0.0-beta.11",
            "1.0.0-rc.1",
            "1.0.0",
            "2.0.0",
        ];
        for pair in ordered.windows(2) {
            assert_eq!(
                v(pair[0]).cmp_precedence(&v(pair[1])),
                Ordering::Less,
                "{pair:?}"
            );
        }
        assert_eq!(v("1.0.0+a").cmp_precedence(&v("1.0.0+b")), Ordering::Equal);
        assert_ne!(v("1.0.0+a"), v("1.0.0+b"));
    }

    #[test]
    fn ranges_as_olm_writes_them() {
        let range = r(">=1.0.0 <2.0.0");
        assert!(range.contains(&v("1.0.0")));
        assert!(range.contains(&v("1.9.9")));
        assert!(!range.contains(&v("2.0.0")));
        assert!(!range.contains(&v("0.9.9")));
        // A pre-release of 2.0.0 is below 2.0.0.
        assert!(range.contains(&v("2.0.0-rc.1")));

        let not = r("!1.2.1");
        assert!(!not.contains(&v("1.2.1")));
        assert!(not.contains(&v("1.2.2")));

        let either = r("<1.0.0 || >=3.0.0");
        assert!(either.contains(&v("0.5.0")));
        assert!(!either.contains(&v("2.0.0")));
        assert!(either.contains(&v("3.0.0")));

        let precedence = r(">1.0.0 <2.0.0 || >3.0.0 !4.2.1");
        for yes in ["1.2.3", "1.9.9", "3.1.1"] {
            assert!(precedence.contains(&v(yes)), "{yes}");
        }
        for no in ["4.2.1", "2.1.1"] {
            assert!(!precedence.contains(&v(no)), "{no}");
        }
    }

    #[test]
    fn real_skip_ranges_from_the_corpus() {
        let final_ = r(">2.5.3-final");
        assert!(final_.contains(&v("2.5.3")));
        assert!(!final_.contains(&v("2.5.3-final")));
        assert!(!final_.contains(&v("2.5.3-alpha")));
        let calver = r(">=1.0.2 <2022.4.6");
        assert!(calver.contains(&v("2022.4.5")));
        assert!(!calver.contains(&v("2022.4.6")));
        // Operators followed by a space.
        assert!(r(">= 4.3.0 < 4.5.0").contains(&v("4.4.0")));
        assert!(r("=1.0.0").contains(&v("1.0.0")));
        assert!(r("==1.0.0").contains(&v("1.0.0+build")));
        assert!(r("1.0.0").contains(&v("1.0.0")));
    }

    #[test]
    fn wildcards_expand_like_blang() {
        let patch = r("1.2.x");
        assert!(patch.contains(&v("1.2.0")));
        assert!(patch.contains(&v("1.2.99")));
        assert!(!patch.contains(&v("1.3.0")));
        let minor = r("1.x");
        assert!(minor.contains(&v("1.0.0")));
        assert!(!minor.contains(&v("2.0.0")));
        assert!(r(">1.2.x").contains(&v("1.3.0")));
        assert!(!r(">1.2.x").contains(&v("1.2.9")));
        assert!(!r("<=1.2.x").contains(&v("1.3.0")));
        assert!(r("<=1.2.x").contains(&v("1.2.9")));
        assert!(!r("<1.2.x").contains(&v("1.2.0")));
        // blang quirk: "!=1.2.x" becomes "<1.2.0 >=1.3.0", ANDed, so it
        // matches nothing at all.
        for any in ["1.1.0", "1.2.5", "1.3.0"] {
            assert!(!r("!=1.2.x").contains(&v(any)), "{any}");
        }
        assert!(r(">=1.x").contains(&v("1.0.0")));
        // blang quirk: "1.x.x" is treated like a patch wildcard on "1.0".
        assert!(r("1.x.x").contains(&v("1.0.5")));
        assert!(!r("1.x.x").contains(&v("1.1.0")));
    }

    #[test]
    fn blang_quirks_are_kept() {
        // Single-character tokens are dropped.
        let hyphen = r("1.0.0 - 2.0.0");
        assert_eq!(hyphen.alternatives()[0].len(), 2);
        assert!(!hyphen.contains(&v("1.5.0")));
        // Any token with an `x` is expanded, which breaks bare pre-releases.
        assert!(Range::parse("1.0.0-x.1").is_err());
        assert!(Range::parse(">=1.0.0-x.1").is_ok());
    }

    #[test]
    fn malformed_ranges_are_clear_errors() {
        assert!(matches!(Range::parse(""), Err(RangeError::Empty { .. })));
        assert!(matches!(Range::parse("   "), Err(RangeError::Empty { .. })));
        assert!(matches!(
            Range::parse("|| >1.0.0"),
            Err(RangeError::LeadingOr { .. })
        ));
        assert!(matches!(
            Range::parse(">1.0.0 ||"),
            Err(RangeError::TrailingOr { .. })
        ));
        assert!(matches!(
            Range::parse("~1.0.0"),
            Err(RangeError::UnknownOperator { .. })
        ));
        assert!(matches!(
            Range::parse("^1.0.0"),
            Err(RangeError::UnknownOperator { .. })
        ));
        assert!(matches!(
            Range::parse("v1.0.0"),
            Err(RangeError::UnknownOperator { .. })
        ));
        assert!(matches!(
            Range::parse(">=abc"),
            Err(RangeError::NoVersion { .. })
        ));
        assert!(matches!(Range::parse("*"), Err(RangeError::Empty { .. })));
        assert!(matches!(
            Range::parse("**"),
            Err(RangeError::NoVersion { .. })
        ));
        assert!(matches!(
            Range::parse(">x"),
            Err(RangeError::NoVersion { .. })
        ));
    }

    /// Versions without the letter `x`, which blang's range parser treats as
    /// a wildcard wherever it appears (see `blang_quirks_are_kept`).
    fn version_strategy() -> impl Strategy<Value = Version> {
        let pre = prop_oneof![
            (0u64..20).prop_map(PreRelease::Numeric),
            "[a-wyz][a-wyz0-9-]{0,5}".prop_map(PreRelease::Alphanumeric),
        ];
        (
            0u64..5,
            0u64..5,
            0u64..5,
            prop::collection::vec(pre, 0..3),
            prop::collection::vec("[a-wyz0-9]{1,4}", 0..2),
        )
            .prop_map(|(major, minor, patch, pre, build)| Version {
                major,
                minor,
                patch,
                pre,
                build,
            })
    }

    proptest! {
        #[test]
        fn display_then_parse_is_identity(version in version_strategy()) {
            prop_assert_eq!(Version::parse(&version.to_string()).unwrap(), version);
        }

        #[test]
        fn precedence_is_a_total_order(a in version_strategy(), b in version_strategy(), c in version_strategy()) {
            prop_assert_eq!(a.cmp_precedence(&b), b.cmp_precedence(&a).reverse());
            if a.cmp_precedence(&b) != Ordering::Greater && b.cmp_precedence(&c) != Ordering::Greater {
                prop_assert_ne!(a.cmp_precedence(&c), Ordering::Greater);
            }
        }

        #[test]
        fn bounded_ranges_contain_exactly_the_interval(lo in version_strategy(), hi in version_strategy(), x in version_strategy()) {
            let lo = Version { build: vec![], ..lo };
            let hi = Version { build: vec![], ..hi };
            let range = Range::parse(&format!(">={lo} <{hi}")).unwrap();
            let expected = x.cmp_precedence(&lo) != Ordering::Less && x.cmp_precedence(&hi) == Ordering::Less;
            prop_assert_eq!(range.contains(&x), expected);
        }

        #[test]
        fn or_is_the_union(a in version_strategy(), b in version_strategy(), x in version_strategy()) {
            let a = Version { build: vec![], ..a };
            let b = Version { build: vec![], ..b };
            let left = Range::parse(&format!("<{a}")).unwrap();
            let right = Range::parse(&format!(">{b}")).unwrap();
            let both = Range::parse(&format!("<{a} || >{b}")).unwrap();
            prop_assert_eq!(both.contains(&x), left.contains(&x) || right.contains(&x));
        }

        #[test]
        fn not_equal_excludes_only_equal_precedence(a in version_strategy(), x in version_strategy()) {
            let a = Version { build: vec![], ..a };
            let range = Range::parse(&format!("!{a}")).unwrap();
            prop_assert_eq!(range.contains(&x), x.cmp_precedence(&a) != Ordering::Equal);
        }

        #[test]
        fn patch_wildcards_match_the_minor_line(major in 0u64..50, minor in 0u64..50, x in version_strategy()) {
            let range = Range::parse(&format!("{major}.{minor}.x")).unwrap();
            let lo = Version::new(major, minor, 0);
            let hi = Version::new(major, minor + 1, 0);
            let expected = x.cmp_precedence(&lo) != Ordering::Less && x.cmp_precedence(&hi) == Ordering::Less;
            prop_assert_eq!(range.contains(&x), expected);
        }

        #[test]
        fn parsers_never_panic(s in "\\PC{0,40}") {
            let _ = Version::parse(&s);
            let _ = Version::parse_tolerant(&s);
            let _ = Range::parse(&s);
        }

        #[test]
        fn range_like_inputs_never_panic(s in "[<>=!|x0-9. v-]{0,30}") {
            let _ = Range::parse(&s);
        }
    }
}
