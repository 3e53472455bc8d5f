//! Matching a `metav1.LabelSelector` against a label set, as
//! `metav1.LabelSelectorAsSelector` followed by `Matches` does.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::Error;

/// One requirement of a selector.
#[derive(Debug)]
enum Requirement<'a> {
    In(&'a str, &'a [String]),
    NotIn(&'a str, &'a [String]),
    Exists(&'a str),
    DoesNotExist(&'a str),
    Equals(&'a str, &'a str),
}

/// A validated selector.
#[derive(Debug)]
pub(crate) struct Selector<'a> {
    requirements: Vec<Requirement<'a>>,
}

impl<'a> Selector<'a> {
    /// Validates a selector the way `LabelSelectorAsSelector` does (operator
    /// known, values present for `In`/`NotIn`, absent for `Exists`/
    /// `DoesNotExist`).
    pub(crate) fn new(selector: &'a LabelSelector) -> Result<Self, Error> {
        let mut requirements = Vec::new();
        for (key, value) in selector.match_labels.iter().flatten() {
            requirements.push(Requirement::Equals(key, value));
        }
        for expression in selector.match_expressions.iter().flatten() {
            let values = expression.values.as_deref().unwrap_or_default();
            let key = expression.key.as_str();
            let requirement = match expression.operator.as_str() {
                "In" | "NotIn" if values.is_empty() => {
                    return Err(Error::InvalidSelector {
                        reason: format!(
                            "values for key {key:?} must not be empty for operator {}",
                            expression.operator
                        ),
                    });
                }
                "Exists" | "DoesNotExist" if !values.is_empty() => {
                    return Err(Error::InvalidSelector {
                        reason: format!(
                            "values for key {key:?} must be empty for operator {}",
                            expression.operator
                        ),
                    });
                }
                "In" => Requirement::In(key, values),
                "NotIn" => Requirement::NotIn(key, values),
                "Exists" => Requirement::Exists(key),
                "DoesNotExist" => Requirement::DoesNotExist(key),
                other => {
                    return Err(Error::InvalidSelector {
                        reason: format!("{other:?} is not a valid label selector operator"),
                    });
                }
            };
            requirements.push(requirement);
        }
        Ok(Self { requirements })
    }

    /// Whether the selector has no requirements (and so selects everything).
    pub(crate) fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether a label set satisfies every requirement.
    pub(crate) fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements
            .iter()
            .all(|requirement| match requirement {
                Requirement::Equals(key, value) => labels.get(*key).is_some_and(|v| v == value),
                Requirement::In(key, values) => {
                    labels.get(*key).is_some_and(|v| values.contains(v))
                }
                Requirement::NotIn(key, values) => {
                    labels.get(*key).is_none_or(|v| !values.contains(v))
                }
                Requirement::Exists(key) => labels.contains_key(*key),
                Requirement::DoesNotExist(key) => !labels.contains_key(*key),
            })
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    use super::*;

    fn expression(key: &str, operator: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: operator.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| (*v).to_owned()).collect()),
        }
    }

    #[test]
    fn expressions_match_like_kubernetes() {
        let selector = LabelSelector {
            match_labels: Some([("team".to_owned(), "gears".to_owned())].into()),
            match_expressions: Some(vec![
                expression("tier", "In", &["gold", "silver"]),
                expression("frozen", "DoesNotExist", &[]),
                expression("zone", "NotIn", &["moon"]),
            ]),
        };
        let selector = Selector::new(&selector).expect("valid");
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        assert!(selector.matches(&labels(&[("team", "gears"), ("tier", "gold")])));
        assert!(!selector.matches(&labels(&[("team", "gears"), ("tier", "bronze")])));
        assert!(!selector.matches(&labels(&[
            ("team", "gears"),
            ("tier", "gold"),
            ("frozen", "")
        ])));
        assert!(!selector.matches(&labels(&[
            ("team", "gears"),
            ("tier", "gold"),
            ("zone", "moon")
        ])));
    }

    #[test]
    fn invalid_selectors_are_rejected() {
        for bad in [
            expression("a", "In", &[]),
            expression("a", "Exists", &["x"]),
            expression("a", "Sometimes", &[]),
        ] {
            let selector = LabelSelector {
                match_expressions: Some(vec![bad]),
                ..Default::default()
            };
            assert!(Selector::new(&selector).is_err());
        }
        assert!(
            Selector::new(&LabelSelector::default())
                .expect("valid")
                .is_empty()
        );
    }
}
