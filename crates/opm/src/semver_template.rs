//! The `olm.semver` template: channels generated from bundle versions, as
//! upstream's `alpha/template/semver` generates them.
//!
//! Bundles listed under `candidate`, `fast` and `stable` go into channels
//! named `<archetype>-v<major>` and/or `<archetype>-v<major>.<minor>`. In
//! each (archetype, kind) stream, ordered by version, the highest patch of a
//! minor version replaces the highest patch of the previous minor version
//! and skips every other version seen since the last major, archetype or
//! kind change. The default channel is the "high-water" channel: the most
//! stable archetype, then the highest version, then the preferred kind.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context as _, bail};
use olm_catalog::{fbc::Channel, graph::ChannelEntry, semver::Version};
use serde::Deserialize;

/// The template's schema.
pub(crate) const SCHEMA: &str = "olm.semver";

/// Channel archetypes, least stable first.
pub(crate) const ARCHETYPES: [&str; 3] = ["candidate", "fast", "stable"];

/// Kinds of generated channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum StreamKind {
    /// Unset (never a channel kind; lowest preference).
    Default,
    /// `<archetype>-v<major>`.
    Major,
    /// `<archetype>-v<major>.<minor>`.
    Minor,
}

impl StreamKind {
    fn priority(self) -> u8 {
        match self {
            Self::Default => 0,
            Self::Major => 1,
            Self::Minor => 2,
        }
    }
}

/// The template document.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct SemverTemplate {
    pub schema: String,
    #[serde(default)]
    pub generate_major_channels: bool,
    #[serde(default)]
    pub generate_minor_channels: bool,
    #[serde(default)]
    pub default_channel_type_preference: String,
    #[serde(default)]
    pub candidate: ChannelBundles,
    #[serde(default)]
    pub fast: ChannelBundles,
    #[serde(default)]
    pub stable: ChannelBundles,
}

/// The bundles of one archetype.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ChannelBundles {
    #[serde(default)]
    pub bundles: Vec<BundleEntry>,
}

/// One bundle image.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BundleEntry {
    #[serde(default)]
    pub image: String,
}

/// A checked template: which kinds to generate and which is preferred.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub major: bool,
    pub minor: bool,
    pub preference: StreamKind,
}

impl SemverTemplate {
    /// Parses and checks the template as upstream's `readFile` does.
    pub(crate) fn parse(document: serde_json::Value) -> anyhow::Result<(Self, Settings)> {
        let template: Self =
            serde_json::from_value(document).context("render: unable to read file")?;
        if template.schema != SCHEMA {
            bail!(
                "render: unable to read file: readFile: input file has unknown schema, should be {SCHEMA:?}"
            );
        }
        let (major, mut minor) = (
            template.generate_major_channels,
            template.generate_minor_channels,
        );
        if !major && !minor {
            minor = true;
        }
        let preference = match template.default_channel_type_preference.as_str() {
            "" if minor => StreamKind::Minor,
            "" => StreamKind::Major,
            "minor" if !minor => bail!(
                "render: unable to read file: schema attribute mismatch: DefaultChannelTypePreference set to 'minor' doesn't make sense if not generating minor-version channels"
            ),
            "major" if !major => bail!(
                "render: unable to read file: schema attribute mismatch: DefaultChannelTypePreference set to 'major' doesn't make sense if not generating major-version channels"
            ),
            "minor" => StreamKind::Minor,
            "major" => StreamKind::Major,
            other => bail!(
                "render: unable to read file: unknown DefaultChannelTypePreference: {other:?}\nValid values are 'major' or 'minor'"
            ),
        };
        Ok((
            template,
            Settings {
                major,
                minor,
                preference,
            },
        ))
    }

    /// The bundles of each archetype, in archetype order.
    pub(crate) fn archetypes(&self) -> [(&'static str, &[BundleEntry]); 3] {
        [
            (ARCHETYPES[0], &self.candidate.bundles),
            (ARCHETYPES[1], &self.fast.bundles),
            (ARCHETYPES[2], &self.stable.bundles),
        ]
    }
}

/// Refuses versions of one archetype that differ only by build metadata.
pub(crate) fn check_build_metadata(versions: &BTreeMap<String, Version>) -> anyhow::Result<()> {
    let mut seen = BTreeSet::new();
    let mut conflicts = Vec::new();
    for version in versions.values() {
        let stripped = Version {
            build: Vec::new(),
            ..version.clone()
        }
        .to_string();
        if !seen.insert(stripped.clone()) {
            conflicts.push(format!(
                "bundle version {:?} cannot be compared to {stripped:?}",
                version.to_string()
            ));
        }
    }
    if !conflicts.is_empty() {
        bail!(
            "encountered bundle versions which differ only by build metadata, which cannot be ordered: [{}]",
            conflicts.join(", ")
        );
    }
    Ok(())
}

struct Edge {
    archetype: usize,
    kind: StreamKind,
    channel: String,
    name: String,
    version: Version,
    index: usize,
}

/// Generates the linked channels of `package` and the default channel's
/// name from the versions of each archetype (`versions[i]` for
/// [`ARCHETYPES`]`[i]`, bundle name to version).
pub(crate) fn generate_channels(
    package: &str,
    settings: &Settings,
    versions: &[BTreeMap<String, Version>; 3],
) -> (Vec<Channel>, String) {
    let mut channels: BTreeMap<String, Channel> = BTreeMap::new();
    let mut edges: Vec<Edge> = Vec::new();
    // The high-water channel: (archetype, version, kind, name).
    let mut high: (usize, Version, StreamKind, String) =
        (0, Version::new(0, 0, 0), StreamKind::Default, String::new());
    for (archetype, bundles) in versions.iter().enumerate() {
        let mut names: Vec<&String> = bundles.keys().collect();
        names.sort_by(|a, b| bundles[*a].cmp_precedence(&bundles[*b]));
        for name in names {
            let version = &bundles[name];
            let mut kinds = Vec::new();
            if settings.major {
                kinds.push((
                    StreamKind::Major,
                    format!("{}-v{}", ARCHETYPES[archetype], version.major),
                ));
            }
            if settings.minor {
                kinds.push((
                    StreamKind::Minor,
                    format!(
                        "{}-v{}.{}",
                        ARCHETYPES[archetype], version.major, version.minor
                    ),
                ));
            }
            for (kind, channel_name) in kinds {
                let channel = channels.entry(channel_name.clone()).or_insert_with(|| {
                    let candidate = (archetype, version.clone(), kind, channel_name.clone());
                    if higher(&candidate, &high, settings.preference) {
                        high = candidate;
                    }
                    Channel {
                        name: channel_name.clone(),
                        package: package.to_owned(),
                        ..Channel::default()
                    }
                });
                channel.entries.push(ChannelEntry::new(name.clone()));
                edges.push(Edge {
                    archetype,
                    kind,
                    channel: channel_name,
                    name: name.clone(),
                    version: version.clone(),
                    index: channel.entries.len() - 1,
                });
            }
        }
    }
    link(&mut channels, &mut edges);
    (channels.into_values().collect(), high.3)
}

fn higher(
    a: &(usize, Version, StreamKind, String),
    b: &(usize, Version, StreamKind, String),
    preference: StreamKind,
) -> bool {
    if a.0 != b.0 {
        return a.0 > b.0;
    }
    if a.1.cmp_precedence(&b.1) != std::cmp::Ordering::Equal {
        return a.1.cmp_precedence(&b.1) == std::cmp::Ordering::Greater;
    }
    if a.2 != b.2 {
        if a.2 == preference {
            return true;
        }
        if b.2 == preference {
            return false;
        }
        return a.2.priority() > b.2.priority();
    }
    false
}

fn set_edges(
    channels: &mut BTreeMap<String, Channel>,
    edge: &Edge,
    replaces: &str,
    skips: &BTreeSet<String>,
) {
    if let Some(entry) = channels
        .get_mut(&edge.channel)
        .and_then(|c| c.entries.get_mut(edge.index))
    {
        entry.replaces = (!replaces.is_empty()).then(|| replaces.to_owned());
        entry.skips = skips
            .iter()
            .filter(|s| s.as_str() != replaces)
            .cloned()
            .collect();
    }
}

fn link(channels: &mut BTreeMap<String, Channel>, edges: &mut [Edge]) {
    edges.sort_by(|a, b| {
        a.archetype
            .cmp(&b.archetype)
            .then(a.kind.priority().cmp(&b.kind.priority()))
            .then_with(|| a.version.cmp_precedence(&b.version))
    });
    let mut previous_z_max = String::new();
    let mut skips: BTreeSet<String> = BTreeSet::new();
    for i in 1..edges.len() {
        let (previous, current) = (&edges[i - 1], &edges[i]);
        let stream_change =
            current.archetype != previous.archetype || current.kind != previous.kind;
        let x_change = current.version.major != previous.version.major;
        let y_change = current.version.minor != previous.version.minor || x_change;
        if stream_change || x_change || y_change {
            set_edges(channels, previous, &previous_z_max, &skips);
        }
        if stream_change || x_change {
            skips.clear();
            previous_z_max.clear();
        } else {
            if y_change {
                previous_z_max = previous.name.clone();
            }
            skips.insert(previous.name.clone());
        }
    }
    if edges.len() > 1 {
        let (previous, last) = (&edges[edges.len() - 2], &edges[edges.len() - 1]);
        let change = previous.archetype != last.archetype
            || previous.kind != last.kind
            || previous.version.major != last.version.major;
        if !change {
            set_edges(channels, last, &previous_z_max, &skips);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn versions(list: &[(&str, &str)]) -> BTreeMap<String, Version> {
        list.iter()
            .map(|(name, v)| ((*name).to_owned(), Version::parse(v).unwrap()))
            .collect()
    }

    fn entries(channel: &Channel) -> Vec<String> {
        channel
            .entries
            .iter()
            .map(|e| {
                let mut text = e.name.clone();
                if let Some(r) = &e.replaces {
                    text.push_str(&format!(" replaces {r}"));
                }
                if !e.skips.is_empty() {
                    text.push_str(&format!(" skips {}", e.skips.join(",")));
                }
                text
            })
            .collect()
    }

    fn settings(major: bool, minor: bool, preference: StreamKind) -> Settings {
        Settings {
            major,
            minor,
            preference,
        }
    }

    #[test]
    fn minor_channels_link_within_a_major_version() {
        let stable = versions(&[
            ("op.v1.0.0", "1.0.0"),
            ("op.v1.0.1", "1.0.1"),
            ("op.v1.1.0", "1.1.0"),
            ("op.v2.0.0", "2.0.0"),
        ]);
        let (channels, default) = generate_channels(
            "op",
            &settings(false, true, StreamKind::Minor),
            &[BTreeMap::new(), BTreeMap::new(), stable],
        );
        let names: Vec<&str> = channels.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["stable-v1.0", "stable-v1.1", "stable-v2.0"]);
        assert_eq!(default, "stable-v2.0");
        assert_eq!(
            entries(&channels[0]),
            ["op.v1.0.0", "op.v1.0.1 skips op.v1.0.0"]
        );
        assert_eq!(
            entries(&channels[1]),
            ["op.v1.1.0 replaces op.v1.0.1 skips op.v1.0.0"]
        );
        assert_eq!(entries(&channels[2]), ["op.v2.0.0"]);
    }

    #[test]
    fn major_and_minor_channels_and_the_default_preference() {
        let candidate = versions(&[("op.v1.0.0", "1.0.0"), ("op.v1.1.0", "1.1.0")]);
        let stable = versions(&[("op.v1.0.0", "1.0.0")]);
        let (channels, default) = generate_channels(
            "op",
            &settings(true, true, StreamKind::Major),
            &[candidate, BTreeMap::new(), stable],
        );
        let names: Vec<&str> = channels.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "candidate-v1",
                "candidate-v1.0",
                "candidate-v1.1",
                "stable-v1",
                "stable-v1.0"
            ]
        );
        // The most stable archetype wins, then the preferred kind.
        assert_eq!(default, "stable-v1");
        assert_eq!(
            entries(&channels[0]),
            ["op.v1.0.0", "op.v1.1.0 replaces op.v1.0.0"]
        );
    }

    #[test]
    fn template_settings_follow_upstream() {
        let parse = |json: serde_json::Value| SemverTemplate::parse(json).map(|(_, s)| s);
        let s = parse(serde_json::json!({"schema": "olm.semver"})).unwrap();
        assert!(s.minor && !s.major && s.preference == StreamKind::Minor);
        let s = parse(serde_json::json!({"schema": "olm.semver", "generateMajorChannels": true}))
            .unwrap();
        assert!(s.major && !s.minor && s.preference == StreamKind::Major);
        for bad in [
            serde_json::json!({"schema": "olm.other"}),
            serde_json::json!({"schema": "olm.semver", "unknown": 1}),
            serde_json::json!({"schema": "olm.semver", "generateMajorChannels": true, "defaultChannelTypePreference": "minor"}),
            serde_json::json!({"schema": "olm.semver", "defaultChannelTypePreference": "major"}),
            serde_json::json!({"schema": "olm.semver", "defaultChannelTypePreference": "patch"}),
            serde_json::json!({"schema": "olm.semver", "stable": {"bundles": [{"image": "x", "extra": 1}]}}),
        ] {
            assert!(parse(bad.clone()).is_err(), "{bad}");
        }
    }

    #[test]
    fn build_metadata_only_differences_are_refused() {
        assert!(check_build_metadata(&versions(&[("a", "1.0.0+1"), ("b", "1.0.0+2")])).is_err());
        assert!(check_build_metadata(&versions(&[("a", "1.0.0+1"), ("b", "1.0.1")])).is_ok());
    }
}
