//! The rules of a `registry+v1` bundle (`opm alpha bundle validate`).

use std::collections::HashSet;

use crate::{
    location::Location,
    property::{self, ConstraintKind},
    semver::{Range, Version},
};

use super::{Report, Rule};

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
