//! The update graph of one channel: heads, the replaces chain, cycles, and which
//! entries upgrade from a given bundle (by `replaces`, `skips` or `skipRange`).
//!
//! Everything here is a pure function over a slice of [`ChannelEntry`], so the
//! registry server, the resolver and the validator share one reading of
//! upstream's rules. The rules, and where upstream states them:
//!
//! * **Head** (operator-registry `alpha/model.Channel.Head`): the entries that no
//!   entry of the channel names in its `replaces` or `skips`. Exactly one is
//!   required. `skipRange` never makes an entry "replaced" for this purpose, and a
//!   `replaces` or `skips` naming a bundle outside the channel is ignored.
//! * **Replaces chain** (`Channel.validateReplacesChain`): walking `replaces` from
//!   the head must not cycle and must reach every entry that no entry skips; an
//!   edge to a skipped entry ends the walk, and the tail may replace a bundle that
//!   is not in the channel (pruned history is common in real catalogs).
//! * **Replacements** (registry `GetChannelEntriesThatReplace`,
//!   `GetBundleThatReplaces`): entries whose `replaces` or `skips` names the
//!   bundle. The registry API does not consult `skipRange`.
//! * **Upgrade candidates** (OLM resolver: `ReplacesPredicate` or
//!   `SkipRangeIncludesPredicate`): the replacements plus every entry whose
//!   `skipRange` contains the installed version.
//! * **Channel order** (OLM resolver `sortChannel`): head first, then along
//!   `replaces`, leaving out entries that some entry skips.

use std::collections::{HashMap, HashSet};

use crate::semver::{Range, Version};

/// One entry of a channel, reduced to what the update graph needs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ChannelEntry {
    /// The bundle (CSV) name of the entry, for example `etcdoperator.v0.9.4`.
    pub name: String,
    /// The bundle this entry replaces, if any. It may name a bundle that is not
    /// in the channel.
    pub replaces: Option<String>,
    /// Bundles this entry skips: they are upgraded from directly and are never
    /// chosen themselves.
    pub skips: Vec<String>,
    /// A blang semver range (see [`crate::semver`]); installed versions in it can
    /// upgrade to this entry directly. Stored as written; unparsable ranges are
    /// treated as empty, as upstream's resolver does.
    pub skip_range: Option<String>,
}

impl ChannelEntry {
    /// An entry that replaces nothing, skips nothing and has no skip range.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ..Self::default()
        }
    }

    /// Sets the bundle this entry replaces.
    #[must_use]
    pub fn replacing(mut self, replaces: impl Into<String>) -> Self {
        self.replaces = Some(replaces.into());
        self
    }

    /// Adds a bundle this entry skips.
    #[must_use]
    pub fn skipping(mut self, skipped: impl Into<String>) -> Self {
        self.skips.push(skipped.into());
        self
    }

    /// Sets the skip range.
    #[must_use]
    pub fn with_skip_range(mut self, range: impl Into<String>) -> Self {
        self.skip_range = Some(range.into());
        self
    }

    /// Whether this entry names `bundle` in its `replaces` or `skips`: the
    /// registry API's definition of "replaces".
    pub fn replaces_bundle(&self, bundle: &str) -> bool {
        self.replaces.as_deref() == Some(bundle) || self.skips.iter().any(|s| s == bundle)
    }

    /// This entry's skip range, parsed. `None` when there is none or it does not
    /// parse (upstream's resolver ignores an unparsable `skipRange`).
    pub fn parsed_skip_range(&self) -> Option<Range> {
        self.skip_range
            .as_deref()
            .filter(|r| !r.is_empty())
            .and_then(|r| Range::parse(r).ok())
    }

    /// Whether a cluster running `bundle` at `version` may upgrade straight to
    /// this entry: `replaces` or `skips` names it, or `skipRange` contains its
    /// version. This is the resolver's rule, not the registry API's.
    pub fn upgrades_from(&self, bundle: &str, version: Option<&Version>) -> bool {
        self.replaces_bundle(bundle)
            || version.is_some_and(|v| self.parsed_skip_range().is_some_and(|r| r.contains(v)))
    }
}

/// Why a channel's update graph is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GraphError {
    /// Every entry is replaced or skipped by another (or the channel is empty).
    #[error("no channel head found in graph")]
    NoHead,
    /// More than one entry is not replaced or skipped by any other.
    #[error("multiple channel heads found in graph: {}", .heads.join(", "))]
    MultipleHeads {
        /// The head candidates, sorted by name.
        heads: Vec<String>,
    },
    /// Two entries of the channel have the same name.
    #[error("duplicate entry {name:?} in channel")]
    DuplicateEntry {
        /// The repeated bundle name.
        name: String,
    },
    /// Following `replaces` from the head comes back to an entry already seen.
    #[error("detected cycle in replaces chain of upgrade graph: {}", .cycle.join(" -> "))]
    Cycle {
        /// The cycle, starting and ending with the same bundle.
        cycle: Vec<String>,
    },
    /// Entries that the replaces chain from the head never reaches and no entry
    /// skips.
    #[error("channel contains one or more stranded bundles: {}", .stranded.join(", "))]
    Stranded {
        /// The stranded bundle names, sorted.
        stranded: Vec<String>,
    },
}

impl GraphError {
    /// A stable, short name of the failure for metrics and event reasons.
    pub fn category(&self) -> &'static str {
        match self {
            Self::NoHead => "NoChannelHead",
            Self::MultipleHeads { .. } => "MultipleChannelHeads",
            Self::DuplicateEntry { .. } => "DuplicateChannelEntry",
            Self::Cycle { .. } => "ReplacesCycle",
            Self::Stranded { .. } => "StrandedBundles",
        }
    }
}

/// The entries by name, refusing duplicates.
fn index_by_name(entries: &[ChannelEntry]) -> Result<HashMap<&str, &ChannelEntry>, GraphError> {
    let mut by_name = HashMap::with_capacity(entries.len());
    for entry in entries {
        if by_name.insert(entry.name.as_str(), entry).is_some() {
            return Err(GraphError::DuplicateEntry {
                name: entry.name.clone(),
            });
        }
    }
    Ok(by_name)
}

/// The entries that no entry of the channel replaces or skips, in input order.
/// A well-formed channel has exactly one; see [`channel_head`].
pub fn head_candidates(entries: &[ChannelEntry]) -> Vec<&ChannelEntry> {
    let mut incoming: HashSet<&str> = HashSet::with_capacity(entries.len());
    for entry in entries {
        if let Some(replaces) = entry.replaces.as_deref().filter(|r| !r.is_empty()) {
            incoming.insert(replaces);
        }
        incoming.extend(entry.skips.iter().map(String::as_str));
    }
    entries
        .iter()
        .filter(|e| !incoming.contains(e.name.as_str()))
        .collect()
}

/// The channel head: the single entry that no entry replaces or skips.
///
/// This is operator-registry's `Channel.Head`: the head is what
/// `GetPackage` reports as a channel's `csvName` and what packageserver shows
/// as `currentCSV`.
pub fn channel_head(entries: &[ChannelEntry]) -> Result<&ChannelEntry, GraphError> {
    index_by_name(entries)?;
    let mut heads = head_candidates(entries);
    match heads.len() {
        0 => Err(GraphError::NoHead),
        1 => Ok(heads.remove(0)),
        _ => {
            let mut names: Vec<String> = heads.iter().map(|h| h.name.clone()).collect();
            names.sort();
            Err(GraphError::MultipleHeads { heads: names })
        }
    }
}

/// The replaces chain: the head, then each entry it replaces in turn, as long as
/// the replaced bundle is in the channel. A cycle is an error.
///
/// Unlike [`validate_replaces_chain`] this walks through skipped entries too: it
/// is the raw chain, for display and for callers that apply their own rules.
pub fn replaces_chain(entries: &[ChannelEntry]) -> Result<Vec<&ChannelEntry>, GraphError> {
    let by_name = index_by_name(entries)?;
    let head = channel_head(entries)?;
    walk_replaces(head, &by_name, |_| false).map(|walk| walk.chain)
}

struct Walk<'a> {
    chain: Vec<&'a ChannelEntry>,
    /// Every name reached, including a final `replaces` outside the channel.
    reached: HashSet<&'a str>,
}

/// Follows `replaces` from `head`. The walk stops before an edge for which
/// `stop_at` holds, at an edge to a bundle outside the channel, or with an error
/// at a cycle.
fn walk_replaces<'a>(
    head: &'a ChannelEntry,
    by_name: &HashMap<&str, &'a ChannelEntry>,
    stop_at: impl Fn(&str) -> bool,
) -> Result<Walk<'a>, GraphError> {
    let mut chain = vec![head];
    let mut reached: HashSet<&str> = HashSet::from([head.name.as_str()]);
    let mut current = head;
    while let Some(next) = current.replaces.as_deref().filter(|r| !r.is_empty()) {
        if stop_at(next) {
            break;
        }
        if !reached.insert(next) {
            let start = chain.iter().position(|e| e.name == next).unwrap_or(0);
            let mut cycle: Vec<String> = chain[start..].iter().map(|e| e.name.clone()).collect();
            cycle.push(next.to_owned());
            return Err(GraphError::Cycle { cycle });
        }
        match by_name.get(next) {
            Some(entry) => {
                chain.push(entry);
                current = entry;
            }
            None => break,
        }
    }
    Ok(Walk { chain, reached })
}

/// Checks a channel the way `opm validate` does: exactly one head; no cycle in
/// the replaces chain from the head; every entry that no entry skips is on that
/// chain (otherwise it is "stranded"). The walk ends at an edge to a skipped
/// entry, and the tail may replace a bundle outside the channel.
pub fn validate_replaces_chain(entries: &[ChannelEntry]) -> Result<(), GraphError> {
    let by_name = index_by_name(entries)?;
    let head = channel_head(entries)?;
    let skipped: HashSet<&str> = entries
        .iter()
        .flat_map(|e| e.skips.iter().map(String::as_str))
        .collect();
    let walk = walk_replaces(head, &by_name, |next| skipped.contains(next))?;
    let mut stranded: Vec<String> = entries
        .iter()
        .map(|e| e.name.as_str())
        .filter(|name| !walk.reached.contains(name) && !skipped.contains(name))
        .map(str::to_owned)
        .collect();
    if stranded.is_empty() {
        Ok(())
    } else {
        stranded.sort();
        Err(GraphError::Stranded { stranded })
    }
}

/// The entries that replace `bundle` by `replaces` or `skips`, in input order:
/// the registry API's `GetChannelEntriesThatReplace` within one channel.
pub fn entries_that_replace<'a>(
    entries: &'a [ChannelEntry],
    bundle: &str,
) -> Vec<&'a ChannelEntry> {
    entries
        .iter()
        .filter(|e| e.replaces_bundle(bundle))
        .collect()
}

/// The entries a cluster running `bundle` (at `version`, when known) may upgrade
/// to directly, in input order: `replaces` or `skips` names it, or `skipRange`
/// contains its version. This is OLM's resolver rule for an installed operator.
pub fn upgrade_candidates<'a>(
    entries: &'a [ChannelEntry],
    bundle: &str,
    version: Option<&Version>,
) -> Vec<&'a ChannelEntry> {
    entries
        .iter()
        .filter(|e| e.upgrades_from(bundle, version))
        .collect()
}

/// The channel in OLM's preference order (the resolver's `sortChannel`): the
/// head first, then along `replaces` within the channel, leaving out entries
/// that any entry skips ("skipped bundles are never chosen").
///
/// Unlike [`channel_head`], an entry only counts as replaced here when the
/// replacing edge points at an entry of this channel, exactly as upstream's
/// resolver does, and several head candidates are an error only when they form
/// separate chains.
pub fn sort_channel(entries: &[ChannelEntry]) -> Result<Vec<&ChannelEntry>, GraphError> {
    if entries.is_empty() {
        return Ok(Vec::new());
    }
    let by_name = index_by_name(entries)?;
    let mut replaced: HashSet<&str> = HashSet::new();
    let mut skipped: HashSet<&str> = HashSet::new();
    for entry in entries {
        if let Some(r) = entry
            .replaces
            .as_deref()
            .filter(|r| by_name.contains_key(r))
        {
            replaced.insert(r);
        }
        for s in entry
            .skips
            .iter()
            .filter(|s| by_name.contains_key(s.as_str()))
        {
            replaced.insert(s);
            skipped.insert(s);
        }
    }
    let heads: Vec<&ChannelEntry> = entries
        .iter()
        .filter(|e| !replaced.contains(e.name.as_str()))
        .collect();
    match heads.as_slice() {
        [] => Err(GraphError::NoHead),
        [head] => {
            let walk = walk_replaces(head, &by_name, |_| false)?;
            Ok(walk
                .chain
                .into_iter()
                .filter(|e| !skipped.contains(e.name.as_str()))
                .collect())
        }
        _ => {
            let mut names: Vec<String> = heads.iter().map(|h| h.name.clone()).collect();
            names.sort();
            Err(GraphError::MultipleHeads { heads: names })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str) -> ChannelEntry {
        ChannelEntry::new(name)
    }

    fn names(entries: &[&ChannelEntry]) -> Vec<String> {
        entries.iter().map(|e| e.name.clone()).collect()
    }

    /// foo.v3 replaces foo.v2 replaces foo.v1.
    fn linear() -> Vec<ChannelEntry> {
        vec![
            entry("foo.v1"),
            entry("foo.v2").replacing("foo.v1"),
            entry("foo.v3").replacing("foo.v2"),
        ]
    }

    #[test]
    fn the_head_is_the_entry_nothing_replaces() {
        assert_eq!(channel_head(&linear()).unwrap().name, "foo.v3");
    }

    #[test]
    fn a_single_entry_is_its_own_head() {
        assert_eq!(channel_head(&[entry("solo.v1")]).unwrap().name, "solo.v1");
    }

    #[test]
    fn an_empty_channel_has_no_head() {
        assert_eq!(channel_head(&[]), Err(GraphError::NoHead));
    }

    #[test]
    fn skips_make_an_entry_replaced_for_head_purposes() {
        let entries = vec![entry("foo.v1"), entry("foo.v2").skipping("foo.v1")];
        assert_eq!(channel_head(&entries).unwrap().name, "foo.v2");
    }

    #[test]
    fn skip_range_does_not_make_an_entry_replaced() {
        let entries = vec![
            entry("foo.v1"),
            entry("foo.v2").with_skip_range(">=0.0.0 <2.0.0"),
        ];
        let err = channel_head(&entries).unwrap_err();
        assert_eq!(
            err.to_string(),
            "multiple channel heads found in graph: foo.v1, foo.v2"
        );
    }

    #[test]
    fn two_unrelated_entries_are_two_heads() {
        let entries = vec![entry("b.v1"), entry("a.v1")];
        assert_eq!(
            channel_head(&entries),
            Err(GraphError::MultipleHeads {
                heads: vec!["a.v1".into(), "b.v1".into()]
            })
        );
    }

    #[test]
    fn a_pure_cycle_has_no_head() {
        let entries = vec![
            entry("a.v1").replacing("a.v2"),
            entry("a.v2").replacing("a.v1"),
        ];
        assert_eq!(channel_head(&entries), Err(GraphError::NoHead));
    }

    #[test]
    fn duplicate_names_are_refused() {
        let entries = vec![entry("a.v1"), entry("a.v1")];
        assert!(matches!(
            channel_head(&entries),
            Err(GraphError::DuplicateEntry { .. })
        ));
    }

    #[test]
    fn an_empty_replaces_string_is_no_edge() {
        let entries = vec![entry("a.v1").replacing(""), entry("a.v2").replacing("a.v1")];
        assert_eq!(channel_head(&entries).unwrap().name, "a.v2");
        validate_replaces_chain(&entries).unwrap();
    }

    #[test]
    fn the_chain_follows_replaces_from_the_head() {
        let entries = linear();
        assert_eq!(
            names(&replaces_chain(&entries).unwrap()),
            ["foo.v3", "foo.v2", "foo.v1"]
        );
    }

    #[test]
    fn the_chain_ends_at_a_replaced_bundle_outside_the_channel() {
        let entries = vec![
            entry("foo.v2").replacing("foo.v1"),
            entry("foo.v3").replacing("foo.v2"),
        ];
        assert_eq!(
            names(&replaces_chain(&entries).unwrap()),
            ["foo.v3", "foo.v2"]
        );
        validate_replaces_chain(&entries).unwrap();
    }

    #[test]
    fn a_cycle_below_the_head_is_detected() {
        let entries = vec![
            entry("a.v3").replacing("a.v2"),
            entry("a.v2").replacing("a.v1"),
            entry("a.v1").replacing("a.v2"),
        ];
        let err = validate_replaces_chain(&entries).unwrap_err();
        assert_eq!(
            err.to_string(),
            "detected cycle in replaces chain of upgrade graph: a.v2 -> a.v1 -> a.v2"
        );
        assert_eq!(replaces_chain(&entries).unwrap_err(), err);
    }

    #[test]
    fn a_self_replacing_entry_is_a_cycle_not_a_head() {
        let entries = vec![entry("a.v1").replacing("a.v1")];
        assert_eq!(channel_head(&entries), Err(GraphError::NoHead));
    }

    #[test]
    fn entries_off_the_chain_are_stranded() {
        // b.v1 and b.v2 replace each other: both have incoming edges, so a.v2 is
        // the only head, and the walk from it never reaches them.
        let entries = vec![
            entry("a.v1"),
            entry("a.v2").replacing("a.v1"),
            entry("b.v1").replacing("b.v2"),
            entry("b.v2").replacing("b.v1"),
        ];
        assert_eq!(
            validate_replaces_chain(&entries),
            Err(GraphError::Stranded {
                stranded: vec!["b.v1".into(), "b.v2".into()]
            })
        );
    }

    #[test]
    fn skipped_entries_off_the_chain_are_not_stranded() {
        let entries = vec![
            entry("a.v1"),
            entry("a.v2").replacing("a.v1"),
            entry("a.v3").replacing("a.v2").skipping("b.v9"),
            entry("b.v9"),
        ];
        validate_replaces_chain(&entries).unwrap();
    }

    #[test]
    fn an_entry_only_reachable_through_a_skipped_edge_is_stranded() {
        // v3 replaces v2, which v3 also skips: the walk stops at v3, so v1
        // (replaced by the skipped v2 only) is stranded.
        let entries = vec![
            entry("a.v1"),
            entry("a.v2").replacing("a.v1"),
            entry("a.v3").replacing("a.v2").skipping("a.v2"),
        ];
        assert_eq!(
            validate_replaces_chain(&entries),
            Err(GraphError::Stranded {
                stranded: vec!["a.v1".into()]
            })
        );
    }

    #[test]
    fn replacements_are_by_replaces_or_skips_only() {
        let entries = vec![
            entry("a.v1"),
            entry("a.v2").replacing("a.v1"),
            entry("a.v3").skipping("a.v1").with_skip_range("<3.0.0"),
            entry("a.v4").with_skip_range("<4.0.0"),
        ];
        assert_eq!(
            names(&entries_that_replace(&entries, "a.v1")),
            ["a.v2", "a.v3"]
        );
        assert!(entries_that_replace(&entries, "a.v9").is_empty());
    }

    #[test]
    fn upgrade_candidates_include_skip_range_matches() {
        let entries = vec![
            entry("a.v1"),
            entry("a.v2").replacing("a.v1"),
            entry("a.v3").with_skip_range(">=1.0.0 <3.0.0"),
            entry("a.v4").with_skip_range("not a range"),
        ];
        let v1 = Version::parse("1.0.0").unwrap();
        assert_eq!(
            names(&upgrade_candidates(&entries, "a.v1", Some(&v1))),
            ["a.v2", "a.v3"]
        );
        assert_eq!(names(&upgrade_candidates(&entries, "a.v1", None)), ["a.v2"]);
    }

    #[test]
    fn pre_release_skip_ranges_follow_semver_precedence() {
        // A real skipRange from the corpus (quirk 14).
        let e = entry("x.v2.6.0").with_skip_range(">2.5.3-final");
        assert!(e.upgrades_from("x.v2.5.3", Some(&Version::parse("2.5.3").unwrap())));
        assert!(!e.upgrades_from(
            "x.v2.5.3-final",
            Some(&Version::parse("2.5.3-final").unwrap())
        ));
    }

    #[test]
    fn sort_channel_drops_skipped_entries() {
        let entries = vec![
            entry("a.v1"),
            entry("a.v2").replacing("a.v1"),
            entry("a.v3").replacing("a.v2").skipping("a.v2"),
        ];
        assert_eq!(names(&sort_channel(&entries).unwrap()), ["a.v3", "a.v1"]);
    }

    #[test]
    fn sort_channel_ignores_edges_to_bundles_outside_the_channel() {
        let entries = vec![
            entry("a.v2").replacing("a.v1").skipping("gone.v0"),
            entry("a.v3").replacing("a.v2"),
        ];
        assert_eq!(names(&sort_channel(&entries).unwrap()), ["a.v3", "a.v2"]);
    }

    #[test]
    fn sort_channel_reports_cycles_and_multiple_chains() {
        let cyclic = vec![
            entry("a.v3").replacing("a.v2"),
            entry("a.v2").replacing("a.v1"),
            entry("a.v1").replacing("a.v2"),
        ];
        assert!(matches!(
            sort_channel(&cyclic),
            Err(GraphError::Cycle { .. })
        ));
        let two = vec![entry("a.v1"), entry("b.v1")];
        assert!(matches!(
            sort_channel(&two),
            Err(GraphError::MultipleHeads { .. })
        ));
        assert!(sort_channel(&[]).unwrap().is_empty());
    }

    #[test]
    fn categories_are_stable() {
        assert_eq!(GraphError::NoHead.category(), "NoChannelHead");
    }
}
