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
//!
//! This module holds the vocabulary (rules, severities, the report), shared
//! with `opm serve`'s streaming index; `catalog` and `bundle` hold the
//! rules of a catalog and of a bundle.

use std::fmt;

use crate::{
    graph::GraphError,
    location::Location,
    semver::{PreRelease, Version},
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

mod bundle;
mod catalog;
pub mod message;

pub use bundle::{SUPPORTED_KINDS, validate_bundle};
pub use catalog::validate_catalog;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod bundle_tests;
