//! The rules of a file-based catalog (`opm validate <dir>`): packages,
//! channels and their upgrade graphs, bundles and their properties,
//! deprecations.

use std::{
    borrow::Cow,
    collections::{HashMap, HashSet},
};

use crate::{
    fbc::{Bundle, Catalog, Channel, Package, SCHEMA_BUNDLE, SCHEMA_CHANNEL, SCHEMA_PACKAGE},
    go_json::decode_base64,
    graph::{self},
    image_reference,
    property::{self, ConstraintKind, PropertyValue},
    semver::{Range, Version},
};

use super::{Report, Rule, check_release, is_dns1123_label, message};

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
                message::icon_invalid(e),
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
                message::channel_unknown_package(&c.package, &c.name),
            );
            continue;
        }
        if c.name.is_empty() {
            report.push(
                Rule::ChannelNameMissing,
                c.origin.field("name"),
                message::channel_name_missing(&c.package),
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
    // Problems of each bundle's payloads, by property index, found at load
    // when the payloads were left out then.
    let mut dropped: HashMap<&crate::location::Origin, Vec<(usize, String)>> = HashMap::new();
    if catalog.payloads_dropped {
        for problem in &catalog.payload_problems {
            dropped
                .entry(&problem.origin)
                .or_default()
                .push((problem.property, problem.error.clone()));
        }
    }
    // What each bundle's own properties and images say, on all CPUs:
    // decoding every property (and every manifest, when the payloads are
    // here) is by far the most expensive check.
    let own = in_parallel(&catalog.bundles, |b| {
        let payload_problems: Cow<'_, [(usize, String)]> = if catalog.payloads_dropped {
            dropped
                .get(&b.origin)
                .map_or(Cow::Borrowed(&[]), |p| Cow::Borrowed(p))
        } else {
            Cow::Owned(b.undecodable_objects().collect())
        };
        let mut own = Report::default();
        check_bundle_properties(b, &payload_problems, &mut own);
        check_bundle_images(b, &mut own);
        own
    });
    for (b, own) in catalog.bundles.iter().zip(own) {
        if b.package.is_empty() {
            report.push(
                Rule::BundlePackageMissing,
                b.origin.field("package"),
                message::bundle_package_missing(&b.name),
            );
            continue;
        }
        if !index.packages.contains_key(b.package.as_str()) {
            report.push(
                Rule::BundleUnknownPackage,
                b.origin.field("package"),
                message::bundle_unknown_package(&b.package, &b.name),
            );
            continue;
        }
        if b.name.is_empty() {
            report.push(
                Rule::BundleNameMissing,
                b.origin.field("name"),
                message::BUNDLE_NAME_MISSING,
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
        report.problems.extend(own.problems);
    }
}

/// `check` of each item, in order, computed on all CPUs.
fn in_parallel<T: Sync, R: Send>(items: &[T], check: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    if threads == 1 || items.len() < 64 {
        return items.iter().map(check).collect();
    }
    let chunk = items.len().div_ceil(threads);
    let check = &check;
    std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|part| scope.spawn(move || part.iter().map(check).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    })
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
            message::bundle_object_invalid(&b.package, &b.name, err),
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
                    message::property_invalid(&b.name, problem),
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
                    message::property_invalid(&b.name, err),
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
            message::bundle_image_missing(&b.name),
        );
    }
}

fn check_entries_and_defaults(catalog: &Catalog, index: &Index<'_>, report: &mut Report) {
    let no_bundles = HashMap::new();
    // In document order, across packages: the index's maps have none, and
    // the same catalog must give the same report every time.
    let mut channels: Vec<&Channel> = index
        .channels
        .values()
        .flat_map(|channels| channels.values().copied())
        .collect();
    channels.sort_by_key(|c| (&c.origin.file, c.origin.document));
    for c in channels {
        let package = c.package.as_str();
        let bundles = index.bundles.get(package).unwrap_or(&no_bundles);
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
    let mut packages: Vec<&&str> = index.bundles.keys().collect();
    packages.sort();
    // Each package on its own, on all CPUs: each bundle's version is read
    // from its properties again.
    for own in in_parallel(&packages, |package| package_versions(index, package)) {
        report.problems.extend(own.problems);
    }
}

/// Bundles of one package, in its channels, that share a version.
fn package_versions(index: &Index<'_>, package: &str) -> Report {
    let mut report = Report::default();
    let no_entries = HashSet::new();
    let entries = index.entries.get(package).unwrap_or(&no_entries);
    let mut by_version: HashMap<String, Vec<&Bundle>> = HashMap::new();
    for b in index.bundles[package].values() {
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
    report
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
                message::DEPRECATION_PACKAGE_MISSING,
            );
            continue;
        }
        if !index.packages.contains_key(d.package.as_str()) {
            report.push(
                Rule::DeprecationUnknownPackage,
                d.origin.field("package"),
                message::deprecation_unknown_package(&d.package),
            );
            continue;
        }
        if !seen_packages.insert(&d.package) {
            report.push(
                Rule::DuplicateDeprecation,
                d.origin.field("package"),
                message::duplicate_deprecation(&d.package),
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
                    message::deprecation_schema_missing(j, &d.package),
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
                            message::deprecation_unknown_bundle(&e.name, &d.package),
                        );
                        continue;
                    }
                }
                SCHEMA_CHANNEL => {
                    if !channels.contains_key(e.name.as_str()) {
                        report.push(
                            Rule::DeprecationUnknownChannel,
                            d.origin.field(field("reference.name")),
                            message::deprecation_unknown_channel(&e.name, &d.package),
                        );
                        continue;
                    }
                }
                SCHEMA_PACKAGE => {
                    if !e.name.is_empty() {
                        report.push(
                            Rule::DeprecationPackageNameSet,
                            d.origin.field(field("reference.name")),
                            message::deprecation_package_name_set(&d.package, &e.name),
                        );
                        continue;
                    }
                }
                other => {
                    report.push(
                        Rule::DeprecationUnknownSchema,
                        d.origin.field(field("reference.schema")),
                        message::deprecation_unknown_schema(other, &e.name, j, &d.package),
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
