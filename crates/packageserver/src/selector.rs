//! Label and field selectors as the Kubernetes API accepts them in
//! `labelSelector` and `fieldSelector`, parsed into plain data and matched
//! against PackageManifests.

use std::collections::BTreeMap;

use thiserror::Error;

/// Upper bound on the length of a selector; longer ones are refused.
pub const MAX_SELECTOR_BYTES: usize = 4096;

/// Upper bound on the requirements of one selector.
pub const MAX_REQUIREMENTS: usize = 64;

/// Why a selector was refused.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum SelectorError {
    /// The selector text is longer than [`MAX_SELECTOR_BYTES`].
    #[error("selector is longer than {MAX_SELECTOR_BYTES} bytes")]
    TooLong,
    /// The selector has more than [`MAX_REQUIREMENTS`] requirements.
    #[error("selector has more than {MAX_REQUIREMENTS} requirements")]
    TooManyRequirements,
    /// The selector does not parse.
    #[error("unable to parse requirement: {0}")]
    Syntax(String),
    /// A field selector names a field other than `metadata.name`.
    #[error("field label not supported: {0}")]
    UnsupportedField(String),
}

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    /// `key=value`, `key==value`, `key in (a,b)`.
    In(String, Vec<String>),
    /// `key!=value`, `key notin (a,b)`.
    NotIn(String, Vec<String>),
    /// `key`.
    Exists(String),
    /// `!key`.
    DoesNotExist(String),
}

/// A parsed label selector: every requirement must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(pub Vec<Requirement>);

fn valid_key(key: &str) -> bool {
    // A qualified name with an optional DNS prefix: kept permissive on the
    // characters Kubernetes allows, strict on emptiness and length.
    !key.is_empty()
        && key.len() <= 317
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn valid_value(value: &str) -> bool {
    value.len() <= 63
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Splits on commas that are not inside parentheses.
fn split_top_level(text: &str) -> Result<Vec<&str>, SelectorError> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| SelectorError::Syntax(text.to_owned()))?;
            }
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(SelectorError::Syntax(text.to_owned()));
    }
    parts.push(&text[start..]);
    Ok(parts)
}

fn parse_set(text: &str, whole: &str) -> Result<Vec<String>, SelectorError> {
    let inner = text
        .trim()
        .strip_prefix('(')
        .and_then(|t| t.strip_suffix(')'))
        .ok_or_else(|| SelectorError::Syntax(whole.to_owned()))?;
    let values: Vec<String> = inner.split(',').map(|v| v.trim().to_owned()).collect();
    if values.iter().any(|v| !valid_value(v)) {
        return Err(SelectorError::Syntax(whole.to_owned()));
    }
    Ok(values)
}

impl LabelSelector {
    /// Parses `labelSelector` text; empty text selects everything.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        if text.len() > MAX_SELECTOR_BYTES {
            return Err(SelectorError::TooLong);
        }
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        let parts = split_top_level(text)?;
        if parts.len() > MAX_REQUIREMENTS {
            return Err(SelectorError::TooManyRequirements);
        }
        let mut out = Vec::with_capacity(parts.len());
        for part in parts {
            out.push(parse_requirement(part.trim())?);
        }
        Ok(Self(out))
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        let get = |k: &str| labels.and_then(|l| l.get(k));
        self.0.iter().all(|req| match req {
            Requirement::In(k, values) => get(k).is_some_and(|v| values.contains(v)),
            Requirement::NotIn(k, values) => get(k).is_none_or(|v| !values.contains(v)),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::DoesNotExist(k) => get(k).is_none(),
        })
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

fn parse_requirement(part: &str) -> Result<Requirement, SelectorError> {
    let err = || SelectorError::Syntax(part.to_owned());
    if part.is_empty() {
        return Err(err());
    }
    if let Some(key) = part.strip_prefix('!') {
        let key = key.trim();
        return if valid_key(key) {
            Ok(Requirement::DoesNotExist(key.to_owned()))
        } else {
            Err(err())
        };
    }
    for (op, negated) in [("!=", true), ("==", false), ("=", false)] {
        if let Some((key, value)) = part.split_once(op) {
            let (key, value) = (key.trim(), value.trim());
            if !valid_key(key) || !valid_value(value) {
                return Err(err());
            }
            let values = vec![value.to_owned()];
            return Ok(if negated {
                Requirement::NotIn(key.to_owned(), values)
            } else {
                Requirement::In(key.to_owned(), values)
            });
        }
    }
    let mut words = part.splitn(2, char::is_whitespace);
    let key = words.next().unwrap_or_default().trim();
    let rest = words.next().unwrap_or_default().trim();
    if rest.is_empty() {
        return if valid_key(key) {
            Ok(Requirement::Exists(key.to_owned()))
        } else {
            Err(err())
        };
    }
    if !valid_key(key) {
        return Err(err());
    }
    if let Some(set) = rest.strip_prefix("notin") {
        return Ok(Requirement::NotIn(key.to_owned(), parse_set(set, part)?));
    }
    if let Some(set) = rest.strip_prefix("in") {
        return Ok(Requirement::In(key.to_owned(), parse_set(set, part)?));
    }
    Err(err())
}

/// A parsed field selector: only `metadata.name` is supported, as upstream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    /// The name required by `metadata.name=<name>`.
    pub name: Option<String>,
    /// The name excluded by `metadata.name!=<name>`.
    pub not_name: Option<String>,
}

impl FieldSelector {
    /// Parses `fieldSelector` text.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        if text.len() > MAX_SELECTOR_BYTES {
            return Err(SelectorError::TooLong);
        }
        let mut out = Self::default();
        if text.trim().is_empty() {
            return Ok(out);
        }
        for part in text.split(',') {
            let part = part.trim();
            let (field, value, negated) = if let Some((f, v)) = part.split_once("!=") {
                (f, v, true)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, v, false)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, v, false)
            } else {
                return Err(SelectorError::Syntax(part.to_owned()));
            };
            let field = field.trim();
            if field != "metadata.name" {
                return Err(SelectorError::UnsupportedField(field.to_owned()));
            }
            let value = value.trim().to_owned();
            if negated {
                out.not_name = Some(value);
            } else {
                out.name = Some(value);
            }
        }
        Ok(out)
    }

    /// Whether an object named `name` is selected.
    pub fn matches(&self, name: &str) -> bool {
        self.name.as_deref().is_none_or(|n| n == name)
            && self.not_name.as_deref().is_none_or(|n| n != name)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn label_selectors_match_as_kubernetes_does() {
        let l = labels(&[
            ("catalog", "widget-index"),
            ("catalog-namespace", "olm"),
            ("operatorframework.io/arch.amd64", "supported"),
        ]);
        let table = [
            ("", true),
            ("catalog=widget-index", true),
            ("catalog==widget-index", true),
            ("catalog!=widget-index", false),
            ("catalog=other", false),
            ("catalog in (other, widget-index)", true),
            ("catalog notin (other,widget-index)", false),
            ("provider notin (x)", true),
            ("catalog", true),
            ("!catalog", false),
            ("!provider", true),
            ("operatorframework.io/arch.amd64=supported", true),
            ("catalog=widget-index,catalog-namespace=olm", true),
            ("catalog=widget-index, catalog-namespace=default", false),
        ];
        for (text, want) in table {
            let selector = LabelSelector::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(selector.matches(Some(&l)), want, "{text}");
        }
    }

    #[test]
    fn malformed_label_selectors_are_refused() {
        for text in [
            "=x",
            "catalog in (a",
            "catalog in a)",
            "catalog inn (a)",
            "a b c",
            "catalog=(x)",
            "!",
            ",",
            "catalog=a b",
            "cat alog",
            ")(",
        ] {
            assert!(LabelSelector::parse(text).is_err(), "{text:?} accepted");
        }
        assert_eq!(
            LabelSelector::parse(&"a".repeat(MAX_SELECTOR_BYTES + 1)),
            Err(SelectorError::TooLong)
        );
        let many = vec!["a=b"; MAX_REQUIREMENTS + 1].join(",");
        assert_eq!(
            LabelSelector::parse(&many),
            Err(SelectorError::TooManyRequirements)
        );
    }

    #[test]
    fn field_selector_supports_only_the_name() {
        let f = FieldSelector::parse("metadata.name=widget").expect("parses");
        assert!(f.matches("widget"));
        assert!(!f.matches("gadget"));
        let f = FieldSelector::parse("metadata.name!=widget").expect("parses");
        assert!(!f.matches("widget"));
        assert_eq!(
            FieldSelector::parse("metadata.namespace=x"),
            Err(SelectorError::UnsupportedField("metadata.namespace".into()))
        );
        assert!(FieldSelector::parse("garbage").is_err());
        assert!(FieldSelector::parse("").expect("empty").matches("anything"));
    }

    proptest! {
        #[test]
        fn parsing_never_panics(text in ".{0,200}") {
            let _ = LabelSelector::parse(&text);
            let _ = FieldSelector::parse(&text);
        }

        #[test]
        fn equality_selector_matches_exactly_its_value(
            key in "[a-z][a-z0-9-]{0,20}", value in "[a-z0-9]{1,20}", other in "[a-z0-9]{1,20}"
        ) {
            let s = LabelSelector::parse(&format!("{key}={value}")).expect("parses");
            prop_assert!(s.matches(Some(&labels(&[(&key, &value)]))));
            prop_assert_eq!(s.matches(Some(&labels(&[(&key, &other)]))), value == other);
            let n = LabelSelector::parse(&format!("{key}!={value}")).expect("parses");
            prop_assert_eq!(n.matches(Some(&labels(&[(&key, &other)]))), value != other);
        }
    }
}
