//! What `uninstall` removes, and when it refuses. As kubectl-operator: by
//! default operands (custom resources of the CRDs the operator owns) make
//! it refuse, and CRDs are kept. Beyond it: a CRD another installed operator
//! also owns is never deleted, and deleting CRDs while keeping operands is
//! refused (deleting a CRD deletes every resource of it).

/// `--operand-strategy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub(crate) enum OperandStrategy {
    /// Refuse while operands exist.
    #[default]
    Abort,
    /// Leave operands in place.
    Ignore,
    /// Delete operands first, while the operator still runs to finalize them.
    Delete,
}

/// A CRD the operator's CSV owns, as found in the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OwnedCrd {
    /// `plural.group`.
    pub name: String,
    /// Its custom resources, as `namespace/name` (or `name`).
    pub operands: Vec<String>,
    /// Other CSVs (`namespace/name`) that also own it.
    pub also_owned_by: Vec<String>,
}

/// What to remove beyond the Subscription, CSVs and InstallPlans.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Removal {
    /// Operands to delete first: (CRD, `namespace/name`).
    pub operands: Vec<(String, String)>,
    /// CRDs to delete last.
    pub crds: Vec<String>,
    /// CRDs kept, with why.
    pub kept_crds: Vec<(String, String)>,
}

/// How many operands a refusal names per CRD.
pub(crate) const LISTED_OPERANDS: usize = 5;

fn listed(crd: &OwnedCrd) -> String {
    let shown: Vec<&str> = crd
        .operands
        .iter()
        .take(LISTED_OPERANDS)
        .map(String::as_str)
        .collect();
    let more = crd.operands.len().saturating_sub(shown.len());
    let tail = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    format!(
        "{} {} ({}{tail})",
        crd.operands.len(),
        crd.name,
        shown.join(", ")
    )
}

/// The removal for `crds` under `strategy`, or why it is refused.
pub(crate) fn removal(
    crds: &[OwnedCrd],
    strategy: OperandStrategy,
    delete_crds: bool,
) -> Result<Removal, String> {
    let with_operands: Vec<&OwnedCrd> = crds.iter().filter(|c| !c.operands.is_empty()).collect();
    if strategy == OperandStrategy::Abort && !with_operands.is_empty() {
        return Err(format!(
            "operands exist: {}; delete them first, or pass --operand-strategy delete (deletes them) \
             or ignore (leaves them)",
            with_operands
                .iter()
                .map(|c| listed(c))
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    let mut out = Removal::default();
    for crd in crds {
        if strategy == OperandStrategy::Delete {
            out.operands.extend(
                crd.operands
                    .iter()
                    .map(|operand| (crd.name.clone(), operand.clone())),
            );
        }
        if !delete_crds {
            continue;
        }
        if !crd.also_owned_by.is_empty() {
            out.kept_crds.push((
                crd.name.clone(),
                format!("also owned by {}", crd.also_owned_by.join(", ")),
            ));
            continue;
        }
        if strategy == OperandStrategy::Ignore && !crd.operands.is_empty() {
            return Err(format!(
                "deleting CRD {} would delete its operands too ({}); pass --operand-strategy delete, \
                 or keep the CRDs",
                crd.name,
                listed(crd)
            ));
        }
        out.crds.push(crd.name.clone());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(name: &str, operands: &[&str], others: &[&str]) -> OwnedCrd {
        OwnedCrd {
            name: name.to_owned(),
            operands: operands.iter().map(|s| (*s).to_owned()).collect(),
            also_owned_by: others.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    #[test]
    fn operands_and_crds_follow_the_strategy() {
        use OperandStrategy::{Abort, Delete, Ignore};
        let empty = crd("widgets.example.com", &[], &[]);
        let used = crd("gadgets.example.com", &["a/one", "b/two"], &[]);
        let shared = crd("shared.example.com", &[], &["other/shared-op.v1"]);

        // Nothing to refuse: CRDs kept by default, deleted when asked.
        assert_eq!(
            removal(std::slice::from_ref(&empty), Abort, false),
            Ok(Removal::default())
        );
        assert_eq!(
            removal(&[empty.clone(), shared.clone()], Abort, true).unwrap(),
            Removal {
                operands: vec![],
                crds: vec!["widgets.example.com".into()],
                kept_crds: vec![(
                    "shared.example.com".into(),
                    "also owned by other/shared-op.v1".into()
                )],
            }
        );
        // Operands: abort names them; ignore leaves them; delete deletes them.
        let refused = removal(&[empty.clone(), used.clone()], Abort, false).unwrap_err();
        assert!(
            refused.contains("2 gadgets.example.com (a/one, b/two)"),
            "{refused}"
        );
        assert!(!refused.contains("widgets"), "{refused}");
        assert_eq!(
            removal(std::slice::from_ref(&used), Ignore, false),
            Ok(Removal::default())
        );
        assert_eq!(
            removal(std::slice::from_ref(&used), Delete, true).unwrap(),
            Removal {
                operands: vec![
                    ("gadgets.example.com".into(), "a/one".into()),
                    ("gadgets.example.com".into(), "b/two".into()),
                ],
                crds: vec!["gadgets.example.com".into()],
                kept_crds: vec![],
            }
        );
        // Deleting a CRD while keeping its operands is refused.
        let refused = removal(std::slice::from_ref(&used), Ignore, true).unwrap_err();
        assert!(
            refused.contains("deleting CRD gadgets.example.com"),
            "{refused}"
        );
    }

    #[test]
    fn a_refusal_lists_a_few_operands_and_counts_the_rest() {
        let many: Vec<String> = (0..LISTED_OPERANDS + 2)
            .map(|i| format!("ns/w{i}"))
            .collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        let refused = removal(
            &[crd("w.example.com", &refs, &[])],
            OperandStrategy::Abort,
            false,
        )
        .unwrap_err();
        assert!(refused.contains("and 2 more"), "{refused}");
        assert!(!refused.contains(&format!("ns/w{}", LISTED_OPERANDS)));
    }
}
