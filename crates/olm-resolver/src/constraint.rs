//! Requirements of a bundle as predicates over catalog entries: `olm.gvk.required`,
//! `olm.package.required`, `olm.label.required` and `olm.constraint` (`gvk`,
//! `package`, `all`, `any`, `not`, `cel`, nested, with `failureMessage`).
//!
//! Each [`Dependency`] describes itself in upstream's words (the predicate
//! strings of OLM's `cache` package, which become the text after
//! "bundle X requires an operator "), and can name a superset of the entries
//! that can match it from a catalog's indexes, so that resolution never scans
//! a whole catalog for a GVK or package requirement.

use std::{fmt, sync::Arc};

use olm_catalog::{
    property::{Constraint, ConstraintKind, Gvk},
    semver::Range,
};

use crate::{
    cel::{CelError, CelRule},
    model::Entry,
};

/// Why a requirement property cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DependencyError {
    /// The property value does not decode (including upstream's constraint
    /// size limit, "olm.constraint value is greater than max constraint size
    /// 131072 bytes").
    #[error("{type_}: {message}")]
    Invalid {
        /// The property type.
        type_: String,
        /// What is wrong.
        message: String,
    },
    /// A version range does not parse.
    #[error("failed to parse version range {range:?}: {message}")]
    Range {
        /// The range as written.
        range: String,
        /// What is wrong.
        message: String,
    },
    /// An `olm.constraint` sets no alternative.
    #[error("constraint is empty")]
    Empty,
    /// A CEL rule does not compile or exceeds a limit.
    #[error(transparent)]
    Cel(#[from] CelError),
}

/// What a requirement asks of a candidate.
#[derive(Debug, Clone)]
pub enum DependencyKind {
    /// It provides this API (`olm.gvk`).
    Gvk(Gvk),
    /// It is of this package, at a version in the range.
    Package {
        /// The package.
        name: String,
        /// The range as written.
        range_text: String,
        /// The parsed range.
        range: Arc<Range>,
    },
    /// It carries this `olm.label`.
    Label(String),
    /// It satisfies every one of these.
    All(Vec<Dependency>),
    /// It satisfies at least one of these.
    Any(Vec<Dependency>),
    /// It satisfies none of these.
    Not(Vec<Dependency>),
    /// Its properties satisfy this CEL rule.
    Cel(Arc<CelRule>),
}

/// One requirement of a bundle.
#[derive(Debug, Clone)]
pub struct Dependency {
    /// What it asks.
    pub kind: DependencyKind,
    /// The constraint's `failureMessage`; messages show it with a CEL rule
    /// only, as upstream.
    pub failure_message: Option<String>,
}

impl Dependency {
    /// `olm.gvk.required`.
    pub fn gvk(gvk: Gvk) -> Self {
        Self {
            kind: DependencyKind::Gvk(gvk),
            failure_message: None,
        }
    }

    /// `olm.package.required`: an error when the range does not parse.
    pub fn package(name: &str, range: &str) -> Result<Self, DependencyError> {
        let parsed = Range::parse(range).map_err(|e| DependencyError::Range {
            range: range.to_owned(),
            message: e.to_string(),
        })?;
        Ok(Self {
            kind: DependencyKind::Package {
                name: name.to_owned(),
                range_text: range.to_owned(),
                range: Arc::new(parsed),
            },
            failure_message: None,
        })
    }

    /// `olm.label.required`.
    pub fn label(label: String) -> Self {
        Self {
            kind: DependencyKind::Label(label),
            failure_message: None,
        }
    }

    /// An `olm.constraint`, compiled (CEL rules included).
    pub fn from_constraint(c: &Constraint) -> Result<Self, DependencyError> {
        let children = |cs: &[Constraint]| -> Result<Vec<Dependency>, DependencyError> {
            cs.iter().map(Self::from_constraint).collect()
        };
        let kind = match c.kind().ok_or(DependencyError::Empty)? {
            ConstraintKind::Gvk(g) => DependencyKind::Gvk(g.clone()),
            ConstraintKind::Package(p) => Self::package(&p.package_name, &p.version_range)?.kind,
            ConstraintKind::All(cs) => DependencyKind::All(children(cs)?),
            ConstraintKind::Any(cs) => DependencyKind::Any(children(cs)?),
            ConstraintKind::Not(cs) => DependencyKind::Not(children(cs)?),
            ConstraintKind::Cel(cel) => DependencyKind::Cel(Arc::new(CelRule::compile(&cel.rule)?)),
        };
        Ok(Self {
            kind,
            failure_message: (!c.failure_message.is_empty()).then(|| c.failure_message.clone()),
        })
    }

    /// Whether `entry` satisfies this requirement. CEL runtime errors count
    /// as "no", as upstream.
    pub fn matches(&self, entry: &Entry) -> bool {
        match &self.kind {
            DependencyKind::Gvk(g) => entry.bundle.provides(g),
            DependencyKind::Package { name, range, .. } => {
                **entry.package() == **name
                    && entry
                        .bundle
                        .version
                        .as_ref()
                        .is_some_and(|v| range.contains(v))
            }
            DependencyKind::Label(l) => entry.bundle.labels.iter().any(|x| x == l),
            DependencyKind::All(ds) => ds.iter().all(|d| d.matches(entry)),
            DependencyKind::Any(ds) => ds.iter().any(|d| d.matches(entry)),
            DependencyKind::Not(ds) => !ds.iter().any(|d| d.matches(entry)),
            DependencyKind::Cel(rule) => rule.evaluate(&entry.bundle.properties).unwrap_or(false),
        }
    }

    /// A key that is equal for requirements that select the same entries.
    pub fn cache_key(&self) -> String {
        let mut key = self.to_string();
        if let Some(m) = &self.failure_message {
            key.push('\u{0}');
            key.push_str(m);
        }
        key
    }
}

impl fmt::Display for Dependency {
    /// Upstream's predicate description (OLM v0.46 `cache` predicates'
    /// `String`). A `failureMessage` shows only with a CEL rule, as
    /// upstream passes it only to its CEL predicate.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let join = |f: &mut fmt::Formatter<'_>, ds: &[Dependency], sep: &str, prefix: &str| {
            for (i, d) in ds.iter().enumerate() {
                if i > 0 {
                    f.write_str(sep)?;
                }
                write!(f, "{prefix}{d}")?;
            }
            Ok(())
        };
        match &self.kind {
            DependencyKind::Gvk(g) => write!(
                f,
                "providing an API with group: {}, version: {}, kind: {}",
                g.group, g.version, g.kind
            ),
            DependencyKind::Package {
                name, range_text, ..
            } => write!(
                f,
                "with package: {name} and with version in range: {range_text}"
            ),
            DependencyKind::Label(l) => write!(f, "with label: {l}"),
            DependencyKind::All(ds) => join(f, ds, " and ", ""),
            DependencyKind::Any(ds) => join(f, ds, " or ", ""),
            // Upstream's words: the parts joined by " and not ", so the
            // first part carries no "not".
            DependencyKind::Not(ds) => join(f, ds, " and not ", ""),
            DependencyKind::Cel(rule) => write!(
                f,
                "with constraint: {} and message: {}",
                olm_api::go_text::quote(rule.source()),
                olm_api::go_text::quote(self.failure_message.as_deref().unwrap_or(""))
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn described(json: &str) -> String {
        let constraint = Constraint::parse(json).unwrap();
        Dependency::from_constraint(&constraint)
            .unwrap()
            .to_string()
    }

    #[test]
    fn descriptions_are_upstreams_predicate_strings() {
        // failureMessage shows with a CEL rule only, Go-quoted with it.
        assert_eq!(
            described(
                r#"{"failureMessage":"needs \"db\"","cel":{"rule":"properties.exists(p, p.type == \"olm.label\")"}}"#
            ),
            r#"with constraint: "properties.exists(p, p.type == \"olm.label\")" and message: "needs \"db\"""#
        );
        assert_eq!(
            described(
                r#"{"failureMessage":"ignored","gvk":{"group":"g","version":"v1","kind":"K"}}"#
            ),
            "providing an API with group: g, version: v1, kind: K"
        );
        // not: the parts joined by " and not ", the first without "not".
        assert_eq!(
            described(
                r#"{"not":{"constraints":[{"package":{"packageName":"a","versionRange":">=1.0.0"}},{"gvk":{"group":"g","version":"v1","kind":"K"}}]}}"#
            ),
            "with package: a and with version in range: >=1.0.0 and not providing an API with group: g, version: v1, kind: K"
        );
    }
}
