//! Who replaces whom among the CSVs of one namespace: the CSV a CSV replaces,
//! the CSV replacing it, the end of a fail-forward chain, and the replacement
//! chain used to tell a CRD's legitimate owners from conflicting ones.
//!
//! Upstream: `pkg/lib/csv/replace_finder.go`, `getReplacementChain` and
//! `crdOwnerConflicts` in `operator.go`, `WalkReplacementChain` in the
//! resolver. Every function takes the CSVs of the namespace (copies are
//! ignored) and returns references into that slice.

use std::collections::BTreeSet;

use olm_api::csv::ClusterServiceVersion;

use super::Error;
use super::copied_csv::is_copied;

fn name_of(csv: &ClusterServiceVersion) -> &str {
    csv.metadata.name.as_deref().unwrap_or_default()
}

fn replaces_of(csv: &ClusterServiceVersion) -> &str {
    csv.spec.replaces.as_deref().unwrap_or_default()
}

/// The CSV that `csv` replaces (`spec.replaces`), if it exists; a CSV naming
/// itself is ignored (upstream's `IsReplacing`).
pub fn replaced_by_this<'a>(
    csv: &ClusterServiceVersion,
    namespace_csvs: &'a [ClusterServiceVersion],
) -> Option<&'a ClusterServiceVersion> {
    let replaces = replaces_of(csv);
    if replaces.is_empty() || replaces == name_of(csv) {
        return None;
    }
    namespace_csvs
        .iter()
        .find(|other| name_of(other) == replaces)
}

/// A non-copied CSV whose `spec.replaces` names `csv`, if any (upstream's
/// `IsBeingReplaced`). Should several exist, the first by name is taken
/// (upstream takes whichever its map yields first).
pub fn replacing_this<'a>(
    csv: &ClusterServiceVersion,
    namespace_csvs: &'a [ClusterServiceVersion],
) -> Option<&'a ClusterServiceVersion> {
    let name = name_of(csv);
    namespace_csvs
        .iter()
        .filter(|other| !is_copied(other) && name_of(other) != name && replaces_of(other) == name)
        .min_by(|a, b| name_of(a).cmp(name_of(b)))
}

/// The newest CSV of the replacement chain starting at `start`: follow "who
/// replaces this" until nobody does (upstream's `WalkReplacementChain` with
/// `WithUniqueCSVs`). A cycle is an error.
pub fn newest_in_chain<'a>(
    start: &'a ClusterServiceVersion,
    namespace_csvs: &'a [ClusterServiceVersion],
) -> Result<&'a ClusterServiceVersion, Error> {
    let mut visited = BTreeSet::new();
    let mut current = start;
    loop {
        let name = name_of(current);
        let next = namespace_csvs
            .iter()
            .filter(|other| !is_copied(other) && replaces_of(other) == name)
            .min_by(|a, b| name_of(a).cmp(name_of(b)));
        let Some(next) = next else {
            return Ok(current);
        };
        if !visited.insert(name.to_owned()) {
            return Err(Error::ReplacementCycle {
                namespace: current.metadata.namespace.clone().unwrap_or_default(),
                name: name.to_owned(),
            });
        }
        current = next;
    }
}

/// The names of every CSV in `csv`'s replacement chain, forwards and
/// backwards, including `csv` itself (upstream's `getReplacementChain`).
pub fn replacement_chain(
    csv: &ClusterServiceVersion,
    namespace_csvs: &[ClusterServiceVersion],
) -> BTreeSet<String> {
    let csvs: Vec<&ClusterServiceVersion> =
        namespace_csvs.iter().filter(|c| !is_copied(c)).collect();
    let mut chain = BTreeSet::from([name_of(csv).to_owned()]);

    // Forwards: who replaces the current one.
    let mut current = name_of(csv).to_owned();
    while let Some(next) = csvs
        .iter()
        .find(|c| replaces_of(c) == current)
        .map(|c| name_of(c).to_owned())
    {
        if !chain.insert(next.clone()) {
            break;
        }
        current = next;
    }

    // Backwards: what the current one replaces, while it exists.
    let mut current = replaces_of(csv).to_owned();
    let replaces_of_named = |name: &str| {
        csvs.iter()
            .find(|c| name_of(c) == name)
            .map(|c| replaces_of(c).to_owned())
    };
    let mut previous = replaces_of_named(&current);
    if previous.is_some() {
        chain.insert(current.clone());
    }
    while let Some(prev) = previous.filter(|p| !p.is_empty()) {
        if !chain.insert(prev.clone()) {
            break;
        }
        current = prev;
        previous = replaces_of_named(&current);
    }
    chain
}

/// Whether a CSV outside `csv`'s replacement chain owns one of the CRDs `csv`
/// owns (upstream's `crdOwnerConflicts`).
pub fn crd_owner_conflict(
    csv: &ClusterServiceVersion,
    namespace_csvs: &[ClusterServiceVersion],
) -> bool {
    let chain = replacement_chain(csv, namespace_csvs);
    let owned: BTreeSet<&str> = csv
        .spec
        .owned_crds()
        .iter()
        .map(|crd| crd.name.as_str())
        .collect();
    namespace_csvs
        .iter()
        .filter(|other| !is_copied(other) && !chain.contains(name_of(other)))
        .any(|other| {
            other
                .spec
                .owned_crds()
                .iter()
                .any(|crd| owned.contains(crd.name.as_str()))
        })
}
