//! Validation of a loaded catalog with upstream's rules (`opm validate`:
//! operator-registry's `declcfg.ConvertToModel` and `model.Validate`), each
//! reported with the file, document and field it concerns.
//!
//! Upstream stops at the first problem of `ConvertToModel`; this reports every
//! problem it finds. Problems upstream rejects are [`Severity::Error`]. A few
//! problems upstream's `opm validate` accepts but OLM's resolver later
//! refuses (a malformed `olm.constraint`, an unparsable dependency range) are
//! [`Severity::Warning`]: the catalog is served, but a bundle with them can
//! never be installed. So is a `skipRange` that does not parse, which
//! upstream serves and no upgrade can use.

use std::{
    collections::{HashMap, HashSet},
    fmt,
};

use crate::{
    fbc::{Bundle, Catalog, Channel, Package, SCHEMA_BUNDLE, SCHEMA_CHANNEL, SCHEMA_PACKAGE},
    go_json::decode_base64,
    graph::{self, GraphError},
    image_reference,
    location::Location,
    property::{self, ConstraintKind, PropertyValue},
    semver::{PreRelease, Range, Version},
};

/// How serious a problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Severity {
    /// Upstream refuses the catalog.
    Error,
    /// Upstream serves the catalog, but something will not work.
    Warning,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Error => "error",
            Self::Warning => "warning",
        })
    }
}

/// The rules, one per kind of problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rule {
    /// A package has no name.
    PackageNameMissing,
    /// A package name is not a DNS-1123 label.
    PackageNameInvalid,
    /// Two `olm.package` documents have the same name.
    DuplicatePackage,
    /// A package's icon is not valid base64.
    IconInvalid,
    /// A package has no default channel.
    DefaultChannelMissing,
    /// A package's default channel is not one of its channels.
    DefaultChannelUnknown,
    /// A package has no channels.
    PackageWithoutChannels,
    /// A channel belongs to no known package.
    ChannelUnknownPackage,
    /// A channel has no name.
    ChannelNameMissing,
    /// Two channels of a package have the same name.
    DuplicateChannel,
    /// A channel has no entries.
    ChannelEmpty,
    /// A channel entry has no name.
    EntryNameMissing,
    /// Two entries of a channel have the same name.
    DuplicateEntry,
    /// A channel entry names a bundle the package does not have.
    EntryUnknownBundle,
    /// An entry's `skips` has an empty name.
    EmptySkip,
    /// An entry's `skipRange` does not parse.
    InvalidSkipRange,
    /// A channel has no head, or several.
    ChannelHead,
    /// Following `replaces` from the head loops.
    ReplacesCycle,
    /// Entries neither on the replaces chain nor skipped.
    StrandedBundles,
    /// A bundle names no package.
    BundlePackageMissing,
    /// A bundle belongs to no known package.
    BundleUnknownPackage,
    /// A bundle has no name.
    BundleNameMissing,
    /// Two bundles of a package have the same name.
    DuplicateBundle,
    /// A bundle is in no channel.
    BundleNotInChannel,
    /// A property of a known type does not decode.
    InvalidProperty,
    /// A bundle has no `olm.package` property, or several.
    PackagePropertyCount,
    /// A bundle's `olm.package` names another package.
    PackagePropertyMismatch,
    /// A bundle's version is not strict semver.
    InvalidVersion,
    /// A bundle's release is invalid, or combined with build metadata.
    InvalidRelease,
    /// A bundle with a release is not named `<package>-v<version>-<release>`.
    BundleNameNotNormalized,
    /// Two bundles of a package have the same version.
    DuplicateVersion,
    /// A bundle has neither an image nor `olm.bundle.object` properties.
    ImageMissing,
    /// A bundle or related image reference is malformed.
    InvalidImageReference,
    /// An `olm.bundle.object` does not decode to a manifest.
    InvalidBundleObject,
    /// An `olm.deprecations` document names no package.
    DeprecationPackageMissing,
    /// An `olm.deprecations` document names an unknown package.
    DeprecationUnknownPackage,
    /// Two `olm.deprecations` documents for one package.
    DuplicateDeprecation,
    /// A deprecation entry's reference has no schema.
    DeprecationSchemaMissing,
    /// A deprecation entry's reference has an unknown schema.
    DeprecationUnknownSchema,
    /// The same reference is deprecated twice.
    DuplicateDeprecationEntry,
    /// A deprecated bundle does not exist.
    DeprecationUnknownBundle,
    /// A deprecated channel does not exist.
    DeprecationUnknownChannel,
    /// A package deprecation names something.
    DeprecationPackageNameSet,
    /// A deprecation has no message.
    DeprecationMessageMissing,
    /// An `olm.constraint` is malformed, too large, or empty (warning).
    InvalidConstraint,
    /// An `olm.constraint` sets several alternatives; only the first counts
    /// (warning).
    AmbiguousConstraint,
    /// A dependency's version range does not parse (warning).
    InvalidDependencyRange,
    /// A bundle's `manifests/` holds more than one CSV.
    MultipleCsvs,
    /// A required bundle annotation is missing.
    MissingAnnotation,
    /// The bundle lists no channel.
    NoChannels,
    /// The default channel annotation is present but empty.
    EmptyDefaultChannel,
    /// The default channel is not one of the bundle's channels (warning).
    DefaultChannelNotInBundle,
    /// The media type annotation is not `registry+v1`.
    WrongMediaType,
    /// A manifest's kind cannot be shipped in a `registry+v1` bundle.
    UnsupportedKind,
    /// A manifest file was skipped (it does not decode to an object).
    UnreadableManifest,
    /// A metadata file does not decode and was ignored (warning).
    UnreadableMetadataFile,
    /// A CRD in the bundle is not owned by the CSV (warning).
    CrdNotInCsv,
    /// A dependency is malformed.
    InvalidDependency,
    /// The CSV's version is not strict semver.
    InvalidCsvVersion,
    /// The CSV has both a release and `olm.substitutesFor`.
    ReleaseWithSubstitutesFor,
    /// A key appears twice in one mapping; the last value is used (warning).
    DuplicateKey,
    /// A bundle has more than one `olm.csv.metadata` property (warning):
    /// upstream's `validate` accepts it and its `serve` refuses the catalog
    /// (`parseProperties`, when bundles are converted for the API), and so
    /// do ours.
    CsvMetadataCount,
}

impl Rule {
    /// A stable identifier, for tests, metrics and suppressions.
    pub fn code(self) -> &'static str {
        match self {
            Self::PackageNameMissing => "package-name-missing",
            Self::PackageNameInvalid => "package-name-invalid",
            Self::DuplicatePackage => "duplicate-package",
            Self::IconInvalid => "icon-invalid",
            Self::DefaultChannelMissing => "default-channel-missing",
            Self::DefaultChannelUnknown => "default-channel-unknown",
            Self::PackageWithoutChannels => "package-without-channels",
            Self::ChannelUnknownPackage => "channel-unknown-package",
            Self::ChannelNameMissing => "channel-name-missing",
            Self::DuplicateChannel => "duplicate-channel",
            Self::ChannelEmpty => "channel-empty",
            Self::EntryNameMissing => "entry-name-missing",
            Self::DuplicateEntry => "duplicate-entry",
            Self::EntryUnknownBundle => "entry-unknown-bundle",
            Self::EmptySkip => "empty-skip",
            Self::InvalidSkipRange => "invalid-skip-range",
            Self::ChannelHead => "channel-head",
            Self::ReplacesCycle => "replaces-cycle",
            Self::StrandedBundles => "stranded-bundles",
            Self::BundlePackageMissing => "bundle-package-missing",
            Self::BundleUnknownPackage => "bundle-unknown-package",
            Self::BundleNameMissing => "bundle-name-missing",
            Self::DuplicateBundle => "duplicate-bundle",
            Self::BundleNotInChannel => "bundle-not-in-channel",
            Self::InvalidProperty => "invalid-property",
            Self::PackagePropertyCount => "package-property-count",
            Self::PackagePropertyMismatch => "package-property-mismatch",
            Self::InvalidVersion => "invalid-version",
            Self::InvalidRelease => "invalid-release",
            Self::BundleNameNotNormalized => "bundle-name-not-normalized",
            Self::DuplicateVersion => "duplicate-version",
            Self::ImageMissing => "image-missing",
            Self::InvalidImageReference => "invalid-image-reference",
            Self::InvalidBundleObject => "invalid-bundle-object",
            Self::DeprecationPackageMissing => "deprecation-package-missing",
            Self::DeprecationUnknownPackage => "deprecation-unknown-package",
            Self::DuplicateDeprecation => "duplicate-deprecation",
            Self::DeprecationSchemaMissing => "deprecation-schema-missing",
            Self::DeprecationUnknownSchema => "deprecation-unknown-schema",
            Self::DuplicateDeprecationEntry => "duplicate-deprecation-entry",
            Self::DeprecationUnknownBundle => "deprecation-unknown-bundle",
            Self::DeprecationUnknownChannel => "deprecation-unknown-channel",
            Self::DeprecationPackageNameSet => "deprecation-package-name-set",
            Self::DeprecationMessageMissing => "deprecation-message-missing",
            Self::InvalidConstraint => "invalid-constraint",
            Self::AmbiguousConstraint => "ambiguous-constraint",
            Self::InvalidDependencyRange => "invalid-dependency-range",
            Self::MultipleCsvs => "multiple-csvs",
            Self::MissingAnnotation => "missing-annotation",
            Self::NoChannels => "no-channels",
            Self::EmptyDefaultChannel => "empty-default-channel",
            Self::DefaultChannelNotInBundle => "default-channel-not-in-bundle",
            Self::WrongMediaType => "wrong-media-type",
            Self::UnsupportedKind => "unsupported-kind",
            Self::UnreadableManifest => "unreadable-manifest",
            Self::UnreadableMetadataFile => "unreadable-metadata-file",
            Self::CrdNotInCsv => "crd-not-in-csv",
            Self::InvalidDependency => "invalid-dependency",
            Self::InvalidCsvVersion => "invalid-csv-version",
            Self::ReleaseWithSubstitutesFor => "release-with-substitutes-for",
            Self::DuplicateKey => "duplicate-key",
            Self::CsvMetadataCount => "csv-metadata-count",
        }
    }

    /// The rule a channel's upgrade graph breaks (one mapping for `opm
    /// validate` and `opm serve`).
    pub fn of_graph_error(error: &GraphError) -> Self {
        match error {
            GraphError::NoHead | GraphError::MultipleHeads { .. } => Self::ChannelHead,
            GraphError::Cycle { .. } => Self::ReplacesCycle,
            GraphError::Stranded { .. } => Self::StrandedBundles,
            GraphError::DuplicateEntry { .. } => Self::DuplicateEntry,
        }
    }

    /// Whether upstream refuses a catalog with this problem.
    pub fn severity(self) -> Severity {
        match self {
            Self::InvalidConstraint
            | Self::AmbiguousConstraint
            | Self::InvalidDependencyRange
            | Self::DefaultChannelNotInBundle
            | Self::UnreadableMetadataFile
            | Self::CrdNotInCsv
            | Self::DuplicateKey
            | Self::CsvMetadataCount
            | Self::InvalidSkipRange => Severity::Warning,
            _ => Severity::Error,
        }
    }
}

/// One problem found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The rule broken.
    pub rule: Rule,
    /// Where: file, document and field.
    pub location: Location,
    /// What is wrong, in upstream's words where it has them.
    pub message: String,
}

impl Problem {
    /// The rule's severity.
    pub fn severity(&self) -> Severity {
        self.rule.severity()
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}: {} [{}]",
            self.severity(),
            self.location,
            self.message,
            self.rule.code()
        )
    }
}

/// Everything validation found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// The problems, in the order found.
    pub problems: Vec<Problem>,
}

impl Report {
    /// Whether no problem is an error (warnings allowed).
    pub fn is_valid(&self) -> bool {
        self.errors().next().is_none()
    }

    /// The errors.
    pub fn errors(&self) -> impl Iterator<Item = &Problem> {
        self.problems
            .iter()
            .filter(|p| p.severity() == Severity::Error)
    }

    /// The warnings.
    pub fn warnings(&self) -> impl Iterator<Item = &Problem> {
        self.problems
            .iter()
            .filter(|p| p.severity() == Severity::Warning)
    }

    /// The problems of one rule.
    pub fn of(&self, rule: Rule) -> impl Iterator<Item = &Problem> {
        self.problems.iter().filter(move |p| p.rule == rule)
    }

    fn push(&mut self, rule: Rule, location: Location, message: impl Into<String>) {
        self.problems.push(Problem {
            rule,
            location,
            message: message.into(),
        });
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for problem in &self.problems {
            writeln!(f, "{problem}")?;
        }
        Ok(())
    }
}

/// Whether `name` is a DNS-1123 label (what upstream requires of package
/// names): at most 63 lowercase alphanumerics or `-`, starting and ending
/// with an alphanumeric.
pub fn is_dns1123_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes.first().is_some_and(alnum)
        && bytes.last().is_some_and(alnum)
        && bytes.iter().all(|b| alnum(b) || *b == b'-')
}

/// Checks a release string as upstream's `NewRelease` does: at most 20
/// characters of dot-separated pre-release identifiers.
pub fn check_release(release: &str) -> Result<Vec<PreRelease>, String> {
    if release.len() > 20 {
        return Err(format!(
            "invalid release {release:?}: exceeds maximum length of 20 characters"
        ));
    }
    // Reuse the version parser's pre-release rules.
    let probe = format!("0.0.0-{release}");
    Version::parse(&probe)
        .map(|v| v.pre)
        .map_err(|e| format!("invalid release {release:?}: {e}"))
}

/// The package-level indexes validation needs.
struct Index<'a> {
    packages: HashMap<&'a str, &'a Package>,
    /// Channel names of each package (valid channels only).
    channels: HashMap<&'a str, HashMap<&'a str, &'a Channel>>,
    /// Bundle names of each package (first of each name).
    bundles: HashMap<&'a str, HashMap<&'a str, &'a Bundle>>,
    /// Names that appear as entries in some channel of the package.
    entries: HashMap<&'a str, HashSet<&'a str>>,
}

/// Validates a catalog with every rule.
pub fn validate_catalog(catalog: &Catalog) -> Report {
    let mut report = Report::default();
    for warning in &catalog.warnings {
        match warning {
            crate::fbc::LoadWarning::DuplicateKey { location, key } => report.push(
                Rule::DuplicateKey,
                location.clone(),
                format!("duplicate key {key:?}: the last value is used, as upstream uses it"),
            ),
        }
    }
    let mut index = Index {
        packages: HashMap::new(),
        channels: HashMap::new(),
        bundles: HashMap::new(),
        entries: HashMap::new(),
    };
    check_packages(catalog, &mut index, &mut report);
    check_channels(catalog, &mut index, &mut report);
    check_bundles(catalog, &mut index, &mut report);
    check_entries_and_defaults(catalog, &index, &mut report);
    check_versions(&index, &mut report);
    check_deprecations(catalog, &index, &mut report);
    report
}

fn check_packages<'a>(catalog: &'a Catalog, index: &mut Index<'a>, report: &mut Report) {
    for p in &catalog.packages {
        if p.name.is_empty() {
            report.push(
                Rule::PackageNameMissing,
                p.origin.field("name"),
                "package has no name",
            );
            continue;
        }
        if let Some(first) = index.packages.get(p.name.as_str()) {
            report.push(
                Rule::DuplicatePackage,
                p.origin.field("name"),
                format!(
                    "duplicate package {:?} (first defined at {})",
                    p.name, first.origin
                ),
            );
            continue;
        }
        if !is_dns1123_label(&p.name) {
            report.push(
                Rule::PackageNameInvalid,
                p.origin.field("name"),
                format!(
                    "invalid package name {:?}: a DNS-1123 label must consist of at most 63 lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
                    p.name
                ),
            );
        }
        if let Some(icon) = &p.icon
            && let Err(e) = decode_base64(&icon.base64data)
        {
            report.push(
                Rule::IconInvalid,
                p.origin.field("icon.base64data"),
                format!("icon data is not valid base64: {e}"),
            );
        }
        index.packages.insert(&p.name, p);
    }
}

fn check_channels<'a>(catalog: &'a Catalog, index: &mut Index<'a>, report: &mut Report) {
    for c in &catalog.channels {
        if !index.packages.contains_key(c.package.as_str()) {
            report.push(
                Rule::ChannelUnknownPackage,
                c.origin.field("package"),
                format!("unknown package {:?} for channel {:?}", c.package, c.name),
            );
            continue;
        }
        if c.name.is_empty() {
            report.push(
                Rule::ChannelNameMissing,
                c.origin.field("name"),
                format!("package {:?} contains channel with no name", c.package),
            );
            continue;
        }
        let channels = index.channels.entry(&c.package).or_default();
        if let Some(first) = channels.get(c.name.as_str()) {
            report.push(
                Rule::DuplicateChannel,
                c.origin.field("name"),
                format!(
                    "package {:?} has duplicate channel {:?} (first defined at {})",
                    c.package, c.name, first.origin
                ),
            );
            continue;
        }
        channels.insert(&c.name, c);
        let names = index.entries.entry(&c.package).or_default();
        let mut seen = HashSet::new();
        let mut duplicates = false;
        for (i, entry) in c.entries.iter().enumerate() {
            names.insert(&entry.name);
            if entry.name.is_empty() {
                report.push(
                    Rule::EntryNameMissing,
                    c.origin.field(format!("entries[{i}].name")),
                    "channel entry has no name",
                );
            }
            if !seen.insert(entry.name.as_str()) {
                duplicates = true;
                report.push(
                    Rule::DuplicateEntry,
                    c.origin.field(format!("entries[{i}].name")),
                    format!(
                        "invalid package {:?}, channel {:?}: duplicate entry {:?}",
                        c.package, c.name, entry.name
                    ),
                );
            }
            for (j, skip) in entry.skips.iter().enumerate() {
                if skip.is_empty() {
                    report.push(
                        Rule::EmptySkip,
                        c.origin.field(format!("entries[{i}].skips[{j}]")),
                        format!("skip[{j}] is empty"),
                    );
                }
            }
            if let Some(range) = &entry.skip_range
                && let Err(e) = Range::parse(range)
            {
                report.push(
                    Rule::InvalidSkipRange,
                    c.origin.field(format!("entries[{i}].skipRange")),
                    format!("invalid skipRange {range:?}: {e}"),
                );
            }
        }
        if c.entries.is_empty() {
            report.push(
                Rule::ChannelEmpty,
                c.origin.field("entries"),
                format!(
                    "invalid channel {:?}: channel must contain at least one bundle",
                    c.name
                ),
            );
        } else if !duplicates && let Err(err) = graph::validate_replaces_chain(&c.entries) {
            let rule = Rule::of_graph_error(&err);
            report.push(
                rule,
                c.origin.field("entries"),
                format!(
                    "invalid channel {:?} of package {:?}: {err}",
                    c.name, c.package
                ),
            );
        }
    }
}

fn check_bundles<'a>(catalog: &'a Catalog, index: &mut Index<'a>, report: &mut Report) {
    // Problems of each bundle's payloads, by property index: computed here,
    // or, when the payloads were left out at load, found then.
    let payload_problems: Vec<Vec<(usize, String)>> = if catalog.payloads_dropped {
        let mut found: HashMap<&crate::location::Origin, Vec<(usize, String)>> = HashMap::new();
        for problem in &catalog.payload_problems {
            found
                .entry(&problem.origin)
                .or_default()
                .push((problem.property, problem.error.clone()));
        }
        catalog
            .bundles
            .iter()
            .map(|b| found.remove(&b.origin).unwrap_or_default())
            .collect()
    } else {
        bundle_object_problems(&catalog.bundles)
    };
    for (b, payload_problems) in catalog.bundles.iter().zip(&payload_problems) {
        if b.package.is_empty() {
            report.push(
                Rule::BundlePackageMissing,
                b.origin.field("package"),
                format!("package name must be set for bundle {:?}", b.name),
            );
            continue;
        }
        if !index.packages.contains_key(b.package.as_str()) {
            report.push(
                Rule::BundleUnknownPackage,
                b.origin.field("package"),
                format!("unknown package {:?} for bundle {:?}", b.package, b.name),
            );
            continue;
        }
        if b.name.is_empty() {
            report.push(
                Rule::BundleNameMissing,
                b.origin.field("name"),
                "bundle name must be set",
            );
        }
        let bundles = index.bundles.entry(&b.package).or_default();
        if let Some(first) = bundles.get(b.name.as_str()) {
            report.push(
                Rule::DuplicateBundle,
                b.origin.field("name"),
                format!(
                    "package {:?} has duplicate bundle {:?} (first defined at {})",
                    b.package, b.name, first.origin
                ),
            );
            continue;
        }
        bundles.insert(&b.name, b);
        check_bundle_properties(b, payload_problems, report);
        check_bundle_images(b, report);
    }
}

/// Why each `olm.bundle.object` of each bundle does not decode, computed on
/// all CPUs: decoding every manifest is by far the most expensive check (a
/// large catalog carries hundreds of MiB of them).
fn bundle_object_problems(bundles: &[Bundle]) -> Vec<Vec<(usize, String)>> {
    let check = |b: &Bundle| -> Vec<(usize, String)> {
        b.properties
            .iter()
            .enumerate()
            .filter(|(_, p)| p.type_ == property::BUNDLE_OBJECT)
            .filter_map(|(i, p)| check_bundle_object(p).err().map(|e| (i, e)))
            .collect()
    };
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    if threads == 1 || bundles.len() < 64 {
        return bundles.iter().map(check).collect();
    }
    let chunk = bundles.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = bundles
            .chunks(chunk)
            .map(|part| scope.spawn(move || part.iter().map(check).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    })
}

fn check_bundle_object(p: &property::Property) -> Result<(), String> {
    crate::fbc::check_bundle_object(&p.value)
}

/// `payload_problems`: why payload properties (by index) do not decode.
fn check_bundle_properties(b: &Bundle, payload_problems: &[(usize, String)], report: &mut Report) {
    let is_object = |i: usize| {
        b.properties
            .get(i)
            .is_some_and(|p| p.type_ == property::BUNDLE_OBJECT)
    };
    for (i, err) in payload_problems.iter().filter(|(i, _)| is_object(*i)) {
        report.push(
            Rule::InvalidBundleObject,
            b.origin.field(format!("properties[{i}].value.data")),
            format!(
                "package {:?}, bundle {:?}: bundle object does not decode: {err}",
                b.package, b.name
            ),
        );
    }
    let mut packages = Vec::new();
    for (i, p) in b.properties.iter().enumerate() {
        if p.type_ == property::BUNDLE_OBJECT {
            // Checked above, in parallel.
            continue;
        }
        if p.type_ == property::CSV_METADATA && p.value.get() == "null" {
            // Null in the catalog, which upstream reads as empty, or left out
            // at load (`LoadOptions::drop_payloads`) after a check whose
            // verdict is kept.
            if let Some((_, problem)) = payload_problems.iter().find(|(at, _)| *at == i) {
                report.push(
                    Rule::InvalidProperty,
                    b.origin.field(format!("properties[{i}].value")),
                    format!("parse properties for bundle {:?}: {problem}", b.name),
                );
            }
            continue;
        }
        let field = format!("properties[{i}].value");
        let value = match p.parse() {
            Ok(value) => value,
            Err(err) => {
                let rule = if p.type_ == property::CONSTRAINT {
                    Rule::InvalidConstraint
                } else {
                    Rule::InvalidProperty
                };
                report.push(
                    rule,
                    b.origin.field(field),
                    format!("parse properties for bundle {:?}: {err}", b.name),
                );
                continue;
            }
        };
        match value {
            PropertyValue::Package(package) => packages.push((i, package)),
            PropertyValue::PackageRequired(required) => {
                if let Err(err) = Range::parse(&required.version_range) {
                    report.push(
                        Rule::InvalidDependencyRange,
                        b.origin.field(format!("{field}.versionRange")),
                        format!(
                            "bundle {:?} requires package {:?} with an invalid range: {err}",
                            b.name, required.package_name
                        ),
                    );
                }
            }
            PropertyValue::Constraint(constraint) => {
                check_constraint(b, &field, &constraint, report)
            }
            _ => {}
        }
    }
    let csv_metadata = b
        .properties
        .iter()
        .filter(|p| p.type_ == property::CSV_METADATA)
        .count();
    if csv_metadata > 1 {
        report.push(
            Rule::CsvMetadataCount,
            b.origin.field("properties"),
            format!(
                "bundle {:?}: expected at most 1 property of type {:?}, found {csv_metadata} (opm serve refuses the catalog)",
                b.name,
                property::CSV_METADATA
            ),
        );
    }
    match packages.as_slice() {
        [(i, package)] => {
            let field = |name: &str| format!("properties[{i}].value.{name}");
            if package.package_name != b.package {
                report.push(
                    Rule::PackagePropertyMismatch,
                    b.origin.field(field("packageName")),
                    format!(
                        "package {:?} does not match \"olm.package\" property {:?}",
                        b.package, package.package_name
                    ),
                );
            }
            let version = match Version::parse(&package.version) {
                Ok(v) => Some(v),
                Err(err) => {
                    report.push(
                        Rule::InvalidVersion,
                        b.origin.field(field("version")),
                        format!(
                            "error parsing bundle {:?} version {:?}: {err}",
                            b.name, package.version
                        ),
                    );
                    None
                }
            };
            if !package.release.is_empty() {
                match check_release(&package.release) {
                    Err(err) => report.push(
                        Rule::InvalidRelease,
                        b.origin.field(field("release")),
                        format!("error parsing bundle {:?} release version: {err}", b.name),
                    ),
                    Ok(_) => {
                        if let Some(version) = &version {
                            if !version.build.is_empty() {
                                report.push(
                                    Rule::InvalidRelease,
                                    b.origin.field(field("release")),
                                    "cannot use build metadata in version with a release version",
                                );
                            }
                            let expected =
                                format!("{}-v{}-{}", b.package, version, package.release);
                            if b.name != expected {
                                report.push(
                                    Rule::BundleNameNotNormalized,
                                    b.origin.field("name"),
                                    format!(
                                        "name {:?} does not match normalized name {expected:?}",
                                        b.name
                                    ),
                                );
                            }
                        }
                    }
                }
            }
        }
        _ => report.push(
            Rule::PackagePropertyCount,
            b.origin.field("properties"),
            format!(
                "package {:?} bundle {:?} must have exactly 1 \"olm.package\" property, found {}",
                b.package,
                b.name,
                packages.len()
            ),
        ),
    }
}

fn check_constraint(
    b: &Bundle,
    field: &str,
    constraint: &property::Constraint,
    report: &mut Report,
) {
    fn walk(c: &property::Constraint, path: &str, out: &mut Vec<(Rule, String, String)>) {
        if c.alternatives_set() > 1 {
            out.push((
                Rule::AmbiguousConstraint,
                path.to_owned(),
                "constraint sets several alternatives; only the first of gvk, package, all, any, not, cel is used".to_owned(),
            ));
        }
        match c.kind() {
            None => out.push((
                Rule::InvalidConstraint,
                path.to_owned(),
                "constraint is empty".to_owned(),
            )),
            Some(ConstraintKind::Package(p)) => {
                if let Err(err) = Range::parse(&p.version_range) {
                    out.push((
                        Rule::InvalidDependencyRange,
                        format!("{path}.package.versionRange"),
                        format!("invalid version range: {err}"),
                    ));
                }
            }
            Some(ConstraintKind::All(subs)) => {
                walk_all(subs, &format!("{path}.all.constraints"), out)
            }
            Some(ConstraintKind::Any(subs)) => {
                walk_all(subs, &format!("{path}.any.constraints"), out)
            }
            Some(ConstraintKind::Not(subs)) => {
                walk_all(subs, &format!("{path}.not.constraints"), out)
            }
            Some(ConstraintKind::Gvk(_) | ConstraintKind::Cel(_)) => {}
        }
    }
    fn walk_all(subs: &[property::Constraint], path: &str, out: &mut Vec<(Rule, String, String)>) {
        for (i, sub) in subs.iter().enumerate() {
            walk(sub, &format!("{path}[{i}]"), out);
        }
    }
    let mut found = Vec::new();
    walk(constraint, field, &mut found);
    for (rule, path, message) in found {
        report.push(
            rule,
            b.origin.field(path),
            format!("bundle {:?}: olm.constraint: {message}", b.name),
        );
    }
}

fn check_bundle_images(b: &Bundle, report: &mut Report) {
    if !b.image.is_empty()
        && let Err(err) = image_reference::validate(&b.image)
    {
        report.push(
            Rule::InvalidImageReference,
            b.origin.field("image"),
            format!(
                "package {:?} bundle {:?} image: invalid image pull spec {:?}: {err}",
                b.package, b.name, b.image
            ),
        );
    }
    for (i, related) in b.related_images.iter().enumerate() {
        if !related.image.is_empty()
            && let Err(err) = image_reference::validate(&related.image)
        {
            report.push(
                Rule::InvalidImageReference,
                b.origin.field(format!("relatedImages[{i}].image")),
                format!(
                    "package {:?} bundle {:?} relatedImages[{i}].image: invalid image pull spec {:?}: {err}",
                    b.package, b.name, related.image
                ),
            );
        }
    }
    if b.image.is_empty()
        && !b
            .properties
            .iter()
            .any(|p| p.type_ == property::BUNDLE_OBJECT)
    {
        report.push(
            Rule::ImageMissing,
            b.origin.field("image"),
            format!("invalid bundle {:?}: bundle image must be set", b.name),
        );
    }
}

fn check_entries_and_defaults(catalog: &Catalog, index: &Index<'_>, report: &mut Report) {
    let no_bundles = HashMap::new();
    for (package, channels) in &index.channels {
        let bundles = index.bundles.get(package).unwrap_or(&no_bundles);
        let mut channels: Vec<&&Channel> = channels.values().collect();
        channels.sort_by_key(|c| (&c.origin.file, c.origin.document));
        for c in channels {
            for (i, entry) in c.entries.iter().enumerate() {
                if !entry.name.is_empty() && !bundles.contains_key(entry.name.as_str()) {
                    report.push(
                        Rule::EntryUnknownBundle,
                        c.origin.field(format!("entries[{i}].name")),
                        format!(
                            "no olm.bundle blobs found in package {package:?} for olm.channel entry {:?}",
                            entry.name
                        ),
                    );
                }
            }
        }
    }
    let no_entries = HashSet::new();
    for b in &catalog.bundles {
        let Some(bundles) = index.bundles.get(b.package.as_str()) else {
            continue;
        };
        // Only the first bundle of each name was indexed; duplicates are
        // reported already.
        if !bundles
            .get(b.name.as_str())
            .is_some_and(|first| std::ptr::eq(*first, b))
        {
            continue;
        }
        if !index
            .entries
            .get(b.package.as_str())
            .unwrap_or(&no_entries)
            .contains(b.name.as_str())
        {
            report.push(
                Rule::BundleNotInChannel,
                b.origin.field("name"),
                format!(
                    "package {:?}, bundle {:?} not found in any channel entries",
                    b.package, b.name
                ),
            );
        }
    }
    for p in &catalog.packages {
        if !index
            .packages
            .get(p.name.as_str())
            .is_some_and(|first| std::ptr::eq(*first, p))
        {
            continue;
        }
        let channels = index.channels.get(p.name.as_str());
        if p.default_channel.is_empty() {
            report.push(
                Rule::DefaultChannelMissing,
                p.origin.field("defaultChannel"),
                format!("invalid package {:?}: default channel must be set", p.name),
            );
        } else if !channels.is_some_and(|c| c.contains_key(p.default_channel.as_str())) {
            report.push(
                Rule::DefaultChannelUnknown,
                p.origin.field("defaultChannel"),
                format!(
                    "invalid package {:?}: default channel {:?} not found in channels list",
                    p.name, p.default_channel
                ),
            );
        }
        if channels.is_none_or(HashMap::is_empty) {
            report.push(
                Rule::PackageWithoutChannels,
                p.origin.location(),
                format!(
                    "invalid package {:?}: package must contain at least one channel",
                    p.name
                ),
            );
        }
    }
}

fn check_versions(index: &Index<'_>, report: &mut Report) {
    let no_entries = HashSet::new();
    let mut packages: Vec<&&str> = index.bundles.keys().collect();
    packages.sort();
    for package in packages {
        let entries = index.entries.get(*package).unwrap_or(&no_entries);
        let mut by_version: HashMap<String, Vec<&Bundle>> = HashMap::new();
        for b in index.bundles[*package].values() {
            if !entries.contains(b.name.as_str()) {
                continue;
            }
            let Ok(package_property) = b.package_property() else {
                continue;
            };
            let Ok(version) = Version::parse(&package_property.version) else {
                continue;
            };
            let key = if package_property.release.is_empty() {
                version.to_string()
            } else {
                format!("{version}-{}", package_property.release)
            };
            by_version.entry(key).or_default().push(b);
        }
        let mut duplicates: Vec<(String, Vec<&Bundle>)> = by_version
            .into_iter()
            .filter(|(_, b)| b.len() > 1)
            .collect();
        duplicates.sort_by(|a, b| a.0.cmp(&b.0));
        for (version, mut bundles) in duplicates {
            bundles.sort_by(|a, b| a.name.cmp(&b.name));
            let names: Vec<&str> = bundles.iter().map(|b| b.name.as_str()).collect();
            for b in &bundles[1..] {
                report.push(
                    Rule::DuplicateVersion,
                    b.origin.field("properties"),
                    format!(
                        "invalid package {package:?}: duplicate versions found in bundles: {{{version}: [{}]}}",
                        names.join(", ")
                    ),
                );
            }
        }
    }
}

fn check_deprecations(catalog: &Catalog, index: &Index<'_>, report: &mut Report) {
    let mut seen_packages: HashSet<&str> = HashSet::new();
    let no_bundles = HashMap::new();
    let no_channels = HashMap::new();
    for d in &catalog.deprecations {
        if d.package.is_empty() {
            report.push(
                Rule::DeprecationPackageMissing,
                d.origin.field("package"),
                "package name must be set for deprecation item",
            );
            continue;
        }
        if !index.packages.contains_key(d.package.as_str()) {
            report.push(
                Rule::DeprecationUnknownPackage,
                d.origin.field("package"),
                format!(
                    "cannot apply deprecations to an unknown package {:?}",
                    d.package
                ),
            );
            continue;
        }
        if !seen_packages.insert(&d.package) {
            report.push(
                Rule::DuplicateDeprecation,
                d.origin.field("package"),
                format!(
                    "expected a maximum of one deprecation per package: {:?}",
                    d.package
                ),
            );
            continue;
        }
        let bundles = index.bundles.get(d.package.as_str()).unwrap_or(&no_bundles);
        let channels = index
            .channels
            .get(d.package.as_str())
            .unwrap_or(&no_channels);
        let mut references = HashSet::new();
        for (j, e) in d.entries.iter().enumerate() {
            let field = |name: &str| format!("entries[{j}].{name}");
            if e.schema.is_empty() {
                report.push(
                    Rule::DeprecationSchemaMissing,
                    d.origin.field(field("reference.schema")),
                    format!(
                        "schema must be set for deprecation entry [{j}] for package {:?}",
                        d.package
                    ),
                );
                continue;
            }
            if !references.insert((e.schema.as_str(), e.name.as_str())) {
                report.push(
                    Rule::DuplicateDeprecationEntry,
                    d.origin.field(field("reference")),
                    format!(
                        "duplicate deprecation entry {{schema: {:?}, name: {:?}}} for package {:?}",
                        e.schema, e.name, d.package
                    ),
                );
                continue;
            }
            match e.schema.as_str() {
                SCHEMA_BUNDLE => {
                    if !bundles.contains_key(e.name.as_str()) {
                        report.push(
                            Rule::DeprecationUnknownBundle,
                            d.origin.field(field("reference.name")),
                            format!(
                                "cannot deprecate bundle {:?} for package {:?}: bundle not found",
                                e.name, d.package
                            ),
                        );
                        continue;
                    }
                }
                SCHEMA_CHANNEL => {
                    if !channels.contains_key(e.name.as_str()) {
                        report.push(
                            Rule::DeprecationUnknownChannel,
                            d.origin.field(field("reference.name")),
                            format!(
                                "cannot deprecate channel {:?} for package {:?}: channel not found",
                                e.name, d.package
                            ),
                        );
                        continue;
                    }
                }
                SCHEMA_PACKAGE => {
                    if !e.name.is_empty() {
                        report.push(
                            Rule::DeprecationPackageNameSet,
                            d.origin.field(field("reference.name")),
                            format!(
                                "package name must be empty for deprecated package {:?} (specified {:?})",
                                d.package, e.name
                            ),
                        );
                        continue;
                    }
                }
                other => {
                    report.push(
                        Rule::DeprecationUnknownSchema,
                        d.origin.field(field("reference.schema")),
                        format!(
                            "cannot deprecate object {{schema: {other:?}, name: {:?}}} referenced by entry {j} for package {:?}: object schema unknown",
                            e.name, d.package
                        ),
                    );
                    continue;
                }
            }
            if e.message.is_empty() {
                report.push(
                    Rule::DeprecationMessageMissing,
                    d.origin.field(field("message")),
                    "invalid deprecation: message must be set",
                );
            }
        }
    }
}

/// The kinds a `registry+v1` bundle may ship (upstream
/// `pkg/lib/bundle/supported_resources.go`).
pub const SUPPORTED_KINDS: [&str; 22] = [
    "ClusterServiceVersion",
    "CustomResourceDefinition",
    "Secret",
    "ClusterRole",
    "ClusterRoleBinding",
    "ConfigMap",
    "ServiceAccount",
    "Service",
    "Role",
    "RoleBinding",
    "PrometheusRule",
    "ServiceMonitor",
    "PodDisruptionBudget",
    "PriorityClass",
    "VerticalPodAutoscaler",
    "ConsoleYAMLSample",
    "ConsoleQuickStart",
    "ConsoleCLIDownload",
    "ConsoleLink",
    "ConsolePlugin",
    "NetworkPolicy",
    "PodMonitor",
];

/// Validates a bundle with the rules of `opm alpha bundle validate` (format
/// and content) that reading it leniently does not already enforce.
pub fn validate_bundle(bundle: &crate::bundle::RegistryBundle) -> Report {
    use olm_api::labels::bundle as annotation;

    use crate::{bundle::BundleWarning, location::Origin};

    let mut report = Report::default();
    let in_file = |file: &str, field: Option<String>| Location {
        origin: Origin::new(file, 0, 0),
        field,
    };
    let annotations = |key: &str| {
        in_file(
            &bundle.annotations_file,
            Some(format!("annotations[{key:?}]")),
        )
    };

    for file in &bundle.ignored_csv_files {
        report.push(
            Rule::MultipleCsvs,
            in_file(file, None),
            format!(
                "more than one ClusterServiceVersion is found in bundle: {} and {file}",
                bundle.csv_file
            ),
        );
    }
    for key in [
        annotation::MEDIATYPE,
        annotation::MANIFESTS,
        annotation::METADATA,
        annotation::PACKAGE,
        annotation::CHANNELS,
    ] {
        if !bundle.annotations.contains_key(key) {
            report.push(
                Rule::MissingAnnotation,
                annotations(key),
                format!("missing annotation {key:?}"),
            );
        }
    }
    if bundle.channels.is_empty() {
        report.push(
            Rule::NoChannels,
            annotations(annotation::CHANNELS),
            format!(
                "expecting annotation {:?} to have non-empty value",
                annotation::CHANNELS
            ),
        );
    }
    if let Some(media_type) = bundle.annotations.get(annotation::MEDIATYPE)
        && media_type != crate::bundle::MEDIA_TYPE_REGISTRY_V1
    {
        report.push(
            Rule::WrongMediaType,
            annotations(annotation::MEDIATYPE),
            format!(
                "expecting annotation {:?} to have value {:?} instead of {media_type:?}",
                annotation::MEDIATYPE,
                crate::bundle::MEDIA_TYPE_REGISTRY_V1
            ),
        );
    }
    match bundle.default_channel.as_deref() {
        Some("") => report.push(
            Rule::EmptyDefaultChannel,
            annotations(annotation::CHANNEL_DEFAULT),
            format!(
                "expecting annotation {:?} to have non-empty value",
                annotation::CHANNEL_DEFAULT
            ),
        ),
        Some(default) if !bundle.channels.iter().any(|c| c == default) => report.push(
            Rule::DefaultChannelNotInBundle,
            annotations(annotation::CHANNEL_DEFAULT),
            format!(
                "default channel {default:?} is not one of the bundle's channels ({})",
                bundle.channels.join(",")
            ),
        ),
        _ => {}
    }
    for object in &bundle.objects {
        if !SUPPORTED_KINDS.contains(&object.kind.as_str()) {
            report.push(
                Rule::UnsupportedKind,
                in_file(&object.file, Some("kind".to_owned())),
                format!(
                    "{} is not supported type for registryV1 bundle: {}",
                    object.kind, object.file
                ),
            );
        }
    }
    for warning in &bundle.warnings {
        match warning {
            BundleWarning::SkippedManifest { file, reason } => report.push(
                Rule::UnreadableManifest,
                in_file(file, None),
                format!("manifest does not decode: {reason}"),
            ),
            BundleWarning::DuplicateKey { file, key } => report.push(
                Rule::DuplicateKey,
                in_file(file, None),
                format!("duplicate key {key:?}: the last value is used, as upstream uses it"),
            ),
            BundleWarning::UnreadableMetadataFile { file, reason } => report.push(
                Rule::UnreadableMetadataFile,
                in_file(file, None),
                format!("metadata file ignored, as upstream ignores it: {reason}"),
            ),
            _ => {}
        }
    }
    let owned: HashSet<(&str, &str, &str)> = bundle
        .csv
        .spec
        .owned_crds()
        .iter()
        .map(|c| (c.name.as_str(), c.version.as_str(), c.kind.as_str()))
        .collect();
    for api in &bundle.provided_apis {
        let name = format!("{}.{}", api.plural, api.group);
        let is_crd = bundle
            .objects
            .iter()
            .any(|o| o.kind == "CustomResourceDefinition" && o.name == name);
        if is_crd && !owned.contains(&(name.as_str(), api.version.as_str(), api.kind.as_str())) {
            report.push(
                Rule::CrdNotInCsv,
                in_file(
                    &bundle.csv_file,
                    Some("spec.customresourcedefinitions.owned".to_owned()),
                ),
                format!(
                    "CRD {}/{}, Kind={} is present in bundle {:?} but not defined in CSV",
                    name, api.version, api.kind, bundle.name
                ),
            );
        }
    }
    let dependencies_file = bundle.dependencies_file.as_deref().unwrap_or_default();
    for (i, dependency) in bundle.dependencies.iter().enumerate() {
        for message in dependency_problems(dependency) {
            report.push(
                Rule::InvalidDependency,
                in_file(dependencies_file, Some(format!("dependencies[{i}]"))),
                message,
            );
        }
    }
    if let Err(err) = Version::parse(bundle.version()) {
        report.push(
            Rule::InvalidCsvVersion,
            in_file(&bundle.csv_file, Some("spec.version".to_owned())),
            format!("invalid CSV version {:?}: {err}", bundle.version()),
        );
    }
    let release = bundle.csv.spec.release.as_ref().map_or("", |r| r.as_str());
    let substitutes_for = bundle
        .csv
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(crate::bundle::SUBSTITUTES_FOR_ANNOTATION))
        .map_or("", String::as_str);
    if !release.is_empty() && !substitutes_for.is_empty() {
        report.push(
            Rule::ReleaseWithSubstitutesFor,
            in_file(&bundle.csv_file, Some("spec.release".to_owned())),
            format!(
                "bundle {:?} cannot have both a release version ({release:?}) and olm.substitutesFor annotation ({substitutes_for:?})",
                bundle.name
            ),
        );
    }
    report
}

/// Upstream's dependency checks (`registry.*Dependency.Validate`).
fn dependency_problems(dependency: &property::Property) -> Vec<String> {
    use serde_json::Value;

    // Go decodes `null` into an empty struct without complaint.
    let value: Value = match serde_json::from_str(dependency.value.get()) {
        Ok(Value::Null) => Value::Object(serde_json::Map::new()),
        Ok(value) => value,
        Err(_) => Value::Null,
    };
    let field = |name: &str| -> String {
        value
            .as_object()
            .and_then(|o| o.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)))
            .and_then(|(_, v)| v.as_str())
            .unwrap_or_default()
            .to_owned()
    };
    let mut problems = Vec::new();
    if !value.is_object() {
        return vec![format!(
            "couldn't parse dependency of type {}",
            dependency.type_
        )];
    }
    match dependency.type_.as_str() {
        property::GVK => {
            for (name, label) in [
                ("group", "API Group"),
                ("version", "API Version"),
                ("kind", "API Kind"),
            ] {
                if field(name).is_empty() {
                    problems.push(format!("{label} is empty"));
                }
            }
        }
        property::PACKAGE => {
            if field("packageName").is_empty() {
                problems.push("package name is empty".to_owned());
            }
            let version = field("version");
            if version.is_empty() {
                problems.push("package version is empty".to_owned());
            } else if Range::parse(&version).is_err() {
                problems.push(format!("invalid semver format version {version:?}"));
            }
        }
        property::LABEL => {
            if field("label").is_empty() {
                problems.push("label information is missing".to_owned());
            }
        }
        property::CONSTRAINT => match property::Constraint::parse(dependency.value.get()) {
            Err(err) => problems.push(err.to_string()),
            Ok(constraint) => {
                if let Some(ConstraintKind::Cel(cel)) = constraint.kind()
                    && cel.rule.is_empty()
                {
                    problems.push("the CEL expression is missing".to_owned());
                }
            }
        },
        // Upstream's wording for a type it does not know.
        other => problems.push(format!("couldn't parse dependency of type {other}")),
    }
    problems
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod bundle_tests;
