//! The resolver's input as plain data: catalogs ([`CatalogSnapshot`], built
//! once per catalog and shared through `Arc`) and the state of one namespace
//! ([`NamespaceState`]: installed CSVs and Subscriptions).
//!
//! A snapshot keeps one [`Entry`] per bundle per channel, as the registry's
//! `ListBundles` returns them; entries of one bundle share its decoded
//! properties ([`BundleData`]), and names are interned [`Name`]s, so a
//! snapshot of 20,000 entries holds each string once.

use std::{
    collections::{HashMap, HashSet},
    fmt,
    sync::Arc,
};

use olm_catalog::{
    fbc,
    graph::{ChannelEntry, sort_channel},
    property::{self, Gvk, Property, PropertyValue},
    semver::{Range, Version},
};

use crate::constraint::{Dependency, DependencyError, DependencyKind};

/// An interned, cheaply cloned string.
pub type Name = Arc<str>;

/// Hands out one [`Name`] per distinct string.
#[derive(Debug, Default, Clone)]
pub struct Interner {
    names: HashSet<Name>,
}

impl Interner {
    /// The shared copy of `s`.
    pub fn intern(&mut self, s: &str) -> Name {
        if let Some(name) = self.names.get(s) {
            return name.clone();
        }
        let name: Name = Arc::from(s);
        self.names.insert(name.clone());
        name
    }
}

/// The name of the virtual catalog of installed CSVs (upstream's
/// `@existing`).
pub const EXISTING_CATALOG: &str = "@existing";

/// A catalog: a CatalogSource's name and namespace.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CatalogKey {
    /// The CatalogSource name.
    pub name: Name,
    /// The CatalogSource namespace.
    pub namespace: Name,
}

impl CatalogKey {
    /// The key of catalog `name` in `namespace`.
    pub fn new(name: &str, namespace: &str) -> Self {
        Self {
            name: Arc::from(name),
            namespace: Arc::from(namespace),
        }
    }

    /// The virtual catalog of the CSVs installed in `namespace`.
    pub fn existing(namespace: &str) -> Self {
        Self::new(EXISTING_CATALOG, namespace)
    }

    /// Whether this is the virtual catalog of installed CSVs.
    pub fn is_virtual(&self) -> bool {
        &*self.name == EXISTING_CATALOG
    }
}

impl fmt::Display for CatalogKey {
    /// `name/namespace`, as upstream's `SourceKey.String`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.name, self.namespace)
    }
}

/// One property as the resolver reads it: its type and its JSON value, kept
/// as text (checked to be JSON) and decoded only when a CEL rule reads it,
/// so a catalog of 20,000 bundles costs its property text, not a tree of
/// maps per property.
#[derive(Debug, Clone)]
pub struct RawProperty {
    /// The property type, for example `olm.gvk`.
    pub type_: Name,
    /// The value, as JSON text.
    pub value: Box<serde_json::value::RawValue>,
}

impl RawProperty {
    /// A property with this type and JSON text, or why the text is not JSON.
    pub fn new(type_: Name, json: &str) -> Result<Self, serde_json::Error> {
        let value = serde_json::value::RawValue::from_string(json.to_owned())?;
        Ok(Self { type_, value })
    }

    /// The value, decoded.
    pub fn decoded(&self) -> serde_json::Value {
        // The text was checked to be JSON when the property was made.
        serde_json::from_str(self.value.get()).unwrap_or(serde_json::Value::Null)
    }
}

impl PartialEq for RawProperty {
    /// Equal when the types are, and the values are equal as JSON.
    fn eq(&self, other: &Self) -> bool {
        self.type_ == other.type_
            && (self.value.get() == other.value.get() || self.decoded() == other.decoded())
    }
}

/// What the resolver needs of one bundle, shared by its entries in every
/// channel.
#[derive(Debug, Clone)]
pub struct BundleData {
    /// The package, from `olm.package` (or the catalog when absent).
    pub package: Name,
    /// The version, from `olm.package` (tolerant parse), if any.
    pub version: Option<Version>,
    /// The APIs it provides (`olm.gvk`).
    pub provided: Vec<Gvk>,
    /// Its `olm.label`s.
    pub labels: Vec<String>,
    /// Its requirements, in property order.
    pub dependencies: Vec<Dependency>,
    /// Properties that could not be read as requirements; resolving a
    /// namespace that needs this bundle fails with them
    /// (ErrorPreventedResolution), as upstream.
    pub dependency_errors: Vec<DependencyError>,
    /// Whether it carries the legacy `olm.deprecated` property (it is then
    /// never chosen).
    pub deprecated: bool,
    /// Whether it has an `olm.package` property (catalog bundles always do;
    /// installed CSVs when annotated or inferred): only those count for the
    /// one-operator-per-package rule.
    pub has_package_property: bool,
    /// Every property, for CEL rules.
    pub properties: Vec<RawProperty>,
    /// The bundle image, if known.
    pub bundle_path: Option<Name>,
}

impl BundleData {
    /// Decodes `properties` (type, JSON text) of a bundle of `package`
    /// (used when the properties name none).
    pub fn from_properties<'a>(
        interner: &mut Interner,
        package: &str,
        properties: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Self {
        let mut data = BundleData {
            package: interner.intern(package),
            version: None,
            provided: Vec::new(),
            labels: Vec::new(),
            dependencies: Vec::new(),
            dependency_errors: Vec::new(),
            deprecated: false,
            has_package_property: true,
            properties: Vec::new(),
            bundle_path: None,
        };
        let mut package_seen = false;
        for (type_, json) in properties {
            // The large payload properties never matter to resolution.
            if property::is_payload(type_) {
                continue;
            }
            let raw = match RawProperty::new(interner.intern(type_), json) {
                Ok(raw) => raw,
                Err(e) => {
                    if is_dependency_type(type_) {
                        data.dependency_errors.push(DependencyError::Invalid {
                            type_: type_.to_owned(),
                            message: e.to_string(),
                        });
                    }
                    continue;
                }
            };
            let parsed = Property::from_json(type_, json).map(|p| p.parse());
            match parsed {
                Ok(Ok(PropertyValue::Package(p))) if !package_seen => {
                    package_seen = true;
                    if !p.package_name.is_empty() {
                        data.package = interner.intern(&p.package_name);
                    }
                    data.version = Version::parse_tolerant(&p.version).ok();
                }
                Ok(Ok(PropertyValue::Gvk(g))) => data.provided.push(g),
                Ok(Ok(PropertyValue::Label(l))) => data.labels.push(l.label),
                Ok(Ok(PropertyValue::Deprecated)) => data.deprecated = true,
                Ok(Ok(PropertyValue::GvkRequired(g))) => {
                    data.dependencies.push(Dependency::gvk(g));
                }
                Ok(Ok(PropertyValue::PackageRequired(p))) => {
                    match Dependency::package(&p.package_name, &p.version_range) {
                        Ok(d) => data.dependencies.push(d),
                        Err(e) => data.dependency_errors.push(e),
                    }
                }
                Ok(Ok(PropertyValue::LabelRequired(l))) => {
                    data.dependencies.push(Dependency::label(l.label));
                }
                Ok(Ok(PropertyValue::Constraint(c))) => match Dependency::from_constraint(&c) {
                    Ok(d) => data.dependencies.push(d),
                    Err(e) => data.dependency_errors.push(e),
                },
                Ok(Err(e)) if is_dependency_type(type_) => {
                    data.dependency_errors.push(DependencyError::Invalid {
                        type_: type_.to_owned(),
                        message: e.to_string(),
                    });
                }
                _ => {}
            }
            data.properties.push(raw);
        }
        data
    }

    /// Whether it provides `gvk`.
    pub fn provides(&self, gvk: &Gvk) -> bool {
        self.provided.iter().any(|g| g == gvk)
    }
}

fn is_dependency_type(type_: &str) -> bool {
    matches!(
        type_,
        property::GVK_REQUIRED
            | property::PACKAGE_REQUIRED
            | property::LABEL_REQUIRED
            | property::CONSTRAINT
    )
}

/// One bundle in one channel of one catalog: upstream's `cache.Entry`.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The bundle (CSV) name.
    pub name: Name,
    /// The channel; empty for installed CSVs.
    pub channel: Name,
    /// The bundle this entry replaces in this channel.
    pub replaces: Option<Name>,
    /// The bundles this entry skips.
    pub skips: Vec<Name>,
    /// The skip range as written.
    pub skip_range: Option<Name>,
    /// The skip range, parsed (unparsable ranges are ignored, as upstream).
    pub parsed_skip_range: Option<Arc<Range>>,
    /// Whether `channel` is the package's default channel.
    pub default_channel: bool,
    /// The bundle's data, shared across channels.
    pub bundle: Arc<BundleData>,
}

impl Entry {
    /// The package name.
    pub fn package(&self) -> &Name {
        &self.bundle.package
    }

    /// Whether an operator running `name` at `version` may upgrade to this
    /// entry: `replaces` or `skips` names it, or `skipRange` holds the
    /// version (upstream's `ReplacesPredicate` or `SkipRangeIncludesPredicate`).
    pub fn upgrades_from(&self, name: &str, version: Option<&Version>) -> bool {
        self.replaces.as_deref() == Some(name)
            || self.skips.iter().any(|s| &**s == name)
            || matches!((&self.parsed_skip_range, version), (Some(r), Some(v)) if r.contains(v))
    }
}

/// One channel entry of a bundle, as [`CatalogSnapshot::build`] takes it
/// (the fields of the registry API's `api.Bundle` that resolution reads).
#[derive(Debug, Clone, Default)]
pub struct BundleInput {
    /// The bundle (CSV) name.
    pub name: String,
    /// The package.
    pub package: String,
    /// The channel.
    pub channel: String,
    /// The bundle it replaces in this channel.
    pub replaces: String,
    /// The bundles it skips.
    pub skips: Vec<String>,
    /// The skip range.
    pub skip_range: String,
    /// The bundle image.
    pub bundle_path: String,
    /// Properties: type and JSON value text.
    pub properties: Vec<(String, String)>,
}

/// A package of a catalog: its name and default channel.
#[derive(Debug, Clone)]
pub struct PackageInfo {
    /// The package name.
    pub name: Name,
    /// The default channel.
    pub default_channel: Name,
}

/// Index of an entry within its snapshot.
pub type EntryId = u32;

/// Everything one catalog holds, indexed for resolution. Build it once per
/// catalog content and share it (`Arc`) between resolutions.
#[derive(Debug)]
pub struct CatalogSnapshot {
    /// The catalog.
    pub key: CatalogKey,
    /// `spec.priority`: higher is preferred.
    pub priority: i32,
    /// Whether the catalog is healthy (its registry answers and its spec is
    /// valid). Unhealthy catalogs block resolution in their scope.
    pub healthy: bool,
    /// The entries, in catalog order.
    pub entries: Vec<Entry>,
    pub(crate) by_package: HashMap<Name, Vec<EntryId>>,
    pub(crate) by_gvk: HashMap<Gvk, Vec<EntryId>>,
    pub(crate) by_label: HashMap<String, Vec<EntryId>>,
    /// Per (package, channel): the entries in `sortChannel` order, or the
    /// error upstream would report for that channel.
    pub(crate) sorted_channels: HashMap<(Name, Name), Result<Vec<EntryId>, String>>,
}

impl CatalogSnapshot {
    /// Builds the snapshot of catalog `key` from its packages and channel
    /// entries.
    pub fn build(
        key: CatalogKey,
        priority: i32,
        healthy: bool,
        packages: &[(String, String)],
        bundles: Vec<BundleInput>,
    ) -> Self {
        let mut interner = Interner::default();
        let defaults: HashMap<&str, &str> = packages
            .iter()
            .map(|(p, d)| (p.as_str(), d.as_str()))
            .collect();
        let mut shared: HashMap<(String, String), Arc<BundleData>> = HashMap::new();
        let mut entries = Vec::with_capacity(bundles.len());
        for b in bundles {
            let data = shared
                .entry((b.package.clone(), b.name.clone()))
                .or_insert_with(|| {
                    let mut data = BundleData::from_properties(
                        &mut interner,
                        &b.package,
                        b.properties.iter().map(|(t, v)| (t.as_str(), v.as_str())),
                    );
                    if !b.bundle_path.is_empty() {
                        data.bundle_path = Some(interner.intern(&b.bundle_path));
                    }
                    Arc::new(data)
                })
                .clone();
            let skip_range = (!b.skip_range.is_empty()).then(|| interner.intern(&b.skip_range));
            let parsed_skip_range = skip_range
                .as_deref()
                .and_then(|r| Range::parse(r).ok())
                .map(Arc::new);
            entries.push(Entry {
                name: interner.intern(&b.name),
                default_channel: defaults.get(b.package.as_str()).copied() == Some(&b.channel),
                channel: interner.intern(&b.channel),
                replaces: (!b.replaces.is_empty()).then(|| interner.intern(&b.replaces)),
                skips: b.skips.iter().map(|s| interner.intern(s)).collect(),
                skip_range,
                parsed_skip_range,
                bundle: data,
            });
        }
        Self::from_entries(key, priority, healthy, entries)
    }

    /// Builds the snapshot of a file-based catalog.
    pub fn from_fbc(key: CatalogKey, priority: i32, catalog: &fbc::Catalog) -> Self {
        let packages: Vec<(String, String)> = catalog
            .packages
            .iter()
            .map(|p| (p.name.clone(), p.default_channel.clone()))
            .collect();
        let bundles: HashMap<(&str, &str), &fbc::Bundle> = catalog
            .bundles
            .iter()
            .map(|b| ((b.package.as_str(), b.name.as_str()), b))
            .collect();
        let mut inputs = Vec::with_capacity(catalog.channel_entry_count());
        for channel in &catalog.channels {
            for e in &channel.entries {
                let Some(bundle) = bundles.get(&(channel.package.as_str(), e.name.as_str())) else {
                    continue;
                };
                inputs.push(BundleInput {
                    name: e.name.clone(),
                    package: channel.package.clone(),
                    channel: channel.name.clone(),
                    replaces: e.replaces.clone().unwrap_or_default(),
                    skips: e.skips.clone(),
                    skip_range: e.skip_range.clone().unwrap_or_default(),
                    bundle_path: bundle.image.clone(),
                    properties: bundle
                        .properties
                        .iter()
                        .filter(|p| !property::is_payload(&p.type_))
                        .map(|p| (p.type_.clone(), p.value.get().to_owned()))
                        .collect(),
                });
            }
        }
        Self::build(key, priority, true, &packages, inputs)
    }

    /// Indexes ready-made entries.
    pub fn from_entries(
        key: CatalogKey,
        priority: i32,
        healthy: bool,
        entries: Vec<Entry>,
    ) -> Self {
        let mut by_package: HashMap<Name, Vec<EntryId>> = HashMap::new();
        let mut by_gvk: HashMap<Gvk, Vec<EntryId>> = HashMap::new();
        let mut by_label: HashMap<String, Vec<EntryId>> = HashMap::new();
        let mut channels: HashMap<(Name, Name), Vec<EntryId>> = HashMap::new();
        for (i, e) in entries.iter().enumerate() {
            let id = i as EntryId;
            by_package.entry(e.package().clone()).or_default().push(id);
            for g in &e.bundle.provided {
                let ids = by_gvk.entry(g.clone()).or_default();
                if ids.last() != Some(&id) {
                    ids.push(id);
                }
            }
            for l in &e.bundle.labels {
                let ids = by_label.entry(l.clone()).or_default();
                if ids.last() != Some(&id) {
                    ids.push(id);
                }
            }
            channels
                .entry((e.package().clone(), e.channel.clone()))
                .or_default()
                .push(id);
        }
        let sorted_channels = channels
            .into_iter()
            .map(|((package, channel), ids)| {
                let sorted = sort_entries(&entries, &ids, &package, &channel);
                ((package, channel), sorted)
            })
            .collect();
        Self {
            key,
            priority,
            healthy,
            entries,
            by_package,
            by_gvk,
            by_label,
            sorted_channels,
        }
    }

    /// The entries of `package` (in catalog order).
    pub fn package_entries(&self, package: &str) -> impl Iterator<Item = (EntryId, &Entry)> {
        self.by_package
            .get(package)
            .into_iter()
            .flatten()
            .map(|&id| (id, &self.entries[id as usize]))
    }

    /// `sortChannel` over some entries of one channel.
    pub(crate) fn sort_subset(
        &self,
        ids: &[EntryId],
        package: &str,
        channel: &str,
    ) -> Result<Vec<EntryId>, String> {
        sort_entries(&self.entries, ids, package, channel)
    }

    /// The entries of one channel in OLM's preference order (head first), or
    /// upstream's error for a channel without a unique replacement chain.
    pub fn sorted_channel(&self, package: &str, channel: &str) -> Result<&[EntryId], String> {
        let key: (Name, Name) = (Arc::from(package), Arc::from(channel));
        match self.sorted_channels.get(&key) {
            Some(Ok(ids)) => Ok(ids),
            Some(Err(e)) => Err(e.clone()),
            None => Ok(&[]),
        }
    }
}

/// `sortChannel` over the entries `ids` of one channel, with upstream's
/// messages.
fn sort_entries(
    entries: &[Entry],
    ids: &[EntryId],
    package: &str,
    channel: &str,
) -> Result<Vec<EntryId>, String> {
    let graph: Vec<ChannelEntry> = ids
        .iter()
        .map(|&id| {
            let e = &entries[id as usize];
            ChannelEntry {
                name: e.name.to_string(),
                replaces: e.replaces.as_deref().map(str::to_owned),
                skips: e.skips.iter().map(|s| s.to_string()).collect(),
                skip_range: None,
            }
        })
        .collect();
    let by_name: HashMap<&str, EntryId> = ids
        .iter()
        .map(|&id| (&*entries[id as usize].name, id))
        .collect();
    match sort_channel(&graph) {
        Ok(sorted) => Ok(sorted
            .iter()
            .filter_map(|e| by_name.get(e.name.as_str()).copied())
            .collect()),
        Err(e) => Err(channel_error(&e, package, channel)),
    }
}

fn channel_error(e: &olm_catalog::graph::GraphError, package: &str, channel: &str) -> String {
    use olm_catalog::graph::GraphError;
    match e {
        GraphError::NoHead => format!(
            "no channel heads (entries not replaced by another entry) found in channel {channel:?} of package {package:?}"
        ),
        GraphError::MultipleHeads { heads } => format!(
            "a unique replacement chain within a channel is required to determine the relative order between channel entries, but {} replacement chains were found in channel {channel:?} of package {package:?}: {}",
            heads.len(),
            heads.join(", ")
        ),
        GraphError::Cycle { cycle } => format!(
            "a cycle exists in the chain of replacement beginning with {:?} in channel {channel:?} of package {package:?}",
            cycle.first().map(String::as_str).unwrap_or_default()
        ),
        other => format!("{other} in channel {channel:?} of package {package:?}"),
    }
}

/// A CSV installed in the namespace.
#[derive(Debug, Clone, Default)]
pub struct InstalledCsv {
    /// `metadata.name`.
    pub name: String,
    /// `spec.version`, if set.
    pub version: Option<String>,
    /// `spec.replaces`, if set.
    pub replaces: Option<String>,
    /// Its properties (from the `operatorframework.io/properties` annotation,
    /// or inferred from the CSV). Without an `olm.package` property the
    /// package is inferred from the Subscription that installed it.
    pub properties: Vec<(String, String)>,
}

/// A Subscription of the namespace.
#[derive(Debug, Clone, Default)]
pub struct Subscription {
    /// `metadata.name`.
    pub name: String,
    /// `spec.name`: the package.
    pub package: String,
    /// `spec.channel`; empty matches every channel of the package.
    pub channel: String,
    /// `spec.source`.
    pub catalog: String,
    /// `spec.sourceNamespace`.
    pub catalog_namespace: String,
    /// `spec.startingCSV`.
    pub starting_csv: String,
    /// `status.installedCSV`.
    pub installed_csv: String,
}

/// The observed state of one namespace.
#[derive(Debug, Clone, Default)]
pub struct NamespaceState {
    /// The namespace.
    pub namespace: String,
    /// Installed CSVs (copied CSVs excluded).
    pub csvs: Vec<InstalledCsv>,
    /// Subscriptions.
    pub subscriptions: Vec<Subscription>,
}

/// Which entries of a catalog may match a requirement: found through an
/// index, or every entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reach {
    /// Only entries in these index lists can match (sorted, deduplicated).
    Some(Vec<u32>),
    /// Any entry may match.
    All,
}

impl CatalogSnapshot {
    /// The entries of this snapshot that can match `dependency`, from its
    /// indexes.
    pub(crate) fn reach(&self, dependency: &Dependency) -> Reach {
        let snapshot = self;
        match &dependency.kind {
            DependencyKind::Gvk(g) => {
                Reach::Some(snapshot.by_gvk.get(g).cloned().unwrap_or_default())
            }
            DependencyKind::Package { name, .. } => Reach::Some(
                snapshot
                    .by_package
                    .get(name.as_str())
                    .cloned()
                    .unwrap_or_default(),
            ),
            DependencyKind::Label(l) => {
                Reach::Some(snapshot.by_label.get(l).cloned().unwrap_or_default())
            }
            DependencyKind::All(ds) => {
                // The smallest bounded child bounds the conjunction.
                ds.iter()
                    .filter_map(|d| match snapshot.reach(d) {
                        Reach::Some(ids) => Some(ids),
                        Reach::All => None,
                    })
                    .min_by_key(Vec::len)
                    .map_or(Reach::All, Reach::Some)
            }
            DependencyKind::Any(ds) => {
                let mut all = Vec::new();
                for d in ds {
                    match snapshot.reach(d) {
                        Reach::Some(ids) => all.extend(ids),
                        Reach::All => return Reach::All,
                    }
                }
                all.sort_unstable();
                all.dedup();
                Reach::Some(all)
            }
            DependencyKind::Not(_) | DependencyKind::Cel(_) => Reach::All,
        }
    }
}
