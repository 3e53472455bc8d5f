//! One test per bundle rule, each on a small in-memory bundle.

use super::*;
use crate::{
    bundle::{LoadBundleOptions, RegistryBundle},
    property,
};

const CSV: &str = "apiVersion: operators.coreos.com/v1alpha1
kind: ClusterServiceVersion
metadata:
  name: widget.v1.0.0
spec:
  version: 1.0.0
  displayName: Widget
  customresourcedefinitions:
    owned:
    - name: widgets.example.test
      version: v1
      kind: Widget
  install:
    strategy: deployment
    spec:
      deployments:
      - name: widget
        spec:
          selector: {matchLabels: {app: widget}}
          template:
            metadata: {labels: {app: widget}}
            spec:
              containers:
              - name: manager
                image: quay.io/example/widget:v1.0.0
";

const CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.test
spec:
  group: example.test
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
";

const ANNOTATIONS: &str = "annotations:
  operators.operatorframework.io.bundle.mediatype.v1: registry+v1
  operators.operatorframework.io.bundle.manifests.v1: manifests/
  operators.operatorframework.io.bundle.metadata.v1: metadata/
  operators.operatorframework.io.bundle.package.v1: widget
  operators.operatorframework.io.bundle.channels.v1: stable
  operators.operatorframework.io.bundle.channel.default.v1: stable
";

fn bundle(files: &[(&str, &str)]) -> RegistryBundle {
    let mut all: Vec<(String, Vec<u8>)> = vec![
        (
            "manifests/widget.csv.yaml".to_owned(),
            CSV.as_bytes().to_vec(),
        ),
        (
            "manifests/widgets.crd.yaml".to_owned(),
            CRD.as_bytes().to_vec(),
        ),
        (
            "metadata/annotations.yaml".to_owned(),
            ANNOTATIONS.as_bytes().to_vec(),
        ),
    ];
    for (path, text) in files {
        all.retain(|(p, _)| p != path);
        all.push(((*path).to_owned(), text.as_bytes().to_vec()));
    }
    RegistryBundle::load_files(all, &LoadBundleOptions::new()).unwrap_or_else(|e| panic!("{e}"))
}

#[track_caller]
fn assert_rule(bundle: &RegistryBundle, rule: Rule, file: &str, field: Option<&str>) -> Problem {
    let report = validate_bundle(bundle);
    report
        .of(rule)
        .find(|p| p.location.origin.file.as_ref() == file && p.location.field.as_deref() == field)
        .cloned()
        .unwrap_or_else(|| panic!("expected {rule:?} at {file} {field:?}, got:\n{report}"))
}

#[test]
fn the_base_bundle_is_valid() {
    let report = validate_bundle(&bundle(&[]));
    assert!(report.problems.is_empty(), "{report}");
}

#[test]
fn multiple_csvs() {
    let second = CSV.replace("widget.v1.0.0", "widget.v2.0.0");
    let b = bundle(&[("manifests/zz.csv.yaml", &second)]);
    assert_eq!(b.name, "widget.v1.0.0");
    assert_rule(&b, Rule::MultipleCsvs, "manifests/zz.csv.yaml", None);
}

#[test]
fn missing_annotation() {
    let annotations = ANNOTATIONS.replace(
        "  operators.operatorframework.io.bundle.mediatype.v1: registry+v1\n",
        "",
    );
    let b = bundle(&[("metadata/annotations.yaml", &annotations)]);
    assert_rule(
        &b,
        Rule::MissingAnnotation,
        "metadata/annotations.yaml",
        Some("annotations[\"operators.operatorframework.io.bundle.mediatype.v1\"]"),
    );
}

#[test]
fn no_channels() {
    let annotations = ANNOTATIONS.replace("channels.v1: stable", "channels.v1: ''");
    let b = bundle(&[("metadata/annotations.yaml", &annotations)]);
    assert!(b.channels.is_empty());
    assert_rule(
        &b,
        Rule::NoChannels,
        "metadata/annotations.yaml",
        Some("annotations[\"operators.operatorframework.io.bundle.channels.v1\"]"),
    );
}

#[test]
fn empty_default_channel() {
    let annotations = ANNOTATIONS.replace("channel.default.v1: stable", "channel.default.v1: ''");
    let b = bundle(&[("metadata/annotations.yaml", &annotations)]);
    assert_rule(
        &b,
        Rule::EmptyDefaultChannel,
        "metadata/annotations.yaml",
        Some("annotations[\"operators.operatorframework.io.bundle.channel.default.v1\"]"),
    );
}

#[test]
fn default_channel_not_in_bundle_is_a_warning() {
    let annotations = ANNOTATIONS.replace("channel.default.v1: stable", "channel.default.v1: fast");
    let b = bundle(&[("metadata/annotations.yaml", &annotations)]);
    let p = assert_rule(
        &b,
        Rule::DefaultChannelNotInBundle,
        "metadata/annotations.yaml",
        Some("annotations[\"operators.operatorframework.io.bundle.channel.default.v1\"]"),
    );
    assert_eq!(p.severity(), Severity::Warning);
}

#[test]
fn wrong_media_type() {
    let annotations = ANNOTATIONS.replace("registry+v1", "helm");
    let b = bundle(&[("metadata/annotations.yaml", &annotations)]);
    assert_rule(
        &b,
        Rule::WrongMediaType,
        "metadata/annotations.yaml",
        Some("annotations[\"operators.operatorframework.io.bundle.mediatype.v1\"]"),
    );
}

#[test]
fn unsupported_kind() {
    let b = bundle(&[(
        "manifests/deployment.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n",
    )]);
    let p = assert_rule(
        &b,
        Rule::UnsupportedKind,
        "manifests/deployment.yaml",
        Some("kind"),
    );
    assert_eq!(
        p.message,
        "Deployment is not supported type for registryV1 bundle: manifests/deployment.yaml"
    );
}

#[test]
fn unreadable_manifest() {
    let b = bundle(&[
        ("manifests/broken.yaml", "kind: [\n"),
        ("manifests/nokind.yaml", "apiVersion: v1\n"),
    ]);
    assert_rule(&b, Rule::UnreadableManifest, "manifests/broken.yaml", None);
    let p = assert_rule(&b, Rule::UnreadableManifest, "manifests/nokind.yaml", None);
    assert!(p.message.contains("Object 'Kind' is missing"), "{p}");
}

#[test]
fn unreadable_metadata_file_is_a_warning() {
    let b = bundle(&[(
        "metadata/dependencies.yaml",
        "dependencies:\n  - type: olm.gvk\n      value: 1\n",
    )]);
    let p = assert_rule(
        &b,
        Rule::UnreadableMetadataFile,
        "metadata/dependencies.yaml",
        None,
    );
    assert_eq!(p.severity(), Severity::Warning);
    assert!(b.dependencies.is_empty());
}

#[test]
fn crd_not_in_csv_is_a_warning() {
    let extra = CRD
        .replace("widgets", "gadgets")
        .replace("Widget", "Gadget");
    let b = bundle(&[("manifests/gadgets.crd.yaml", &extra)]);
    let p = assert_rule(
        &b,
        Rule::CrdNotInCsv,
        "manifests/widget.csv.yaml",
        Some("spec.customresourcedefinitions.owned"),
    );
    assert_eq!(p.severity(), Severity::Warning);
}

#[test]
fn invalid_dependency() {
    let b = bundle(&[(
        "metadata/dependencies.yaml",
        "dependencies:\n- type: olm.gvk\n  value: {group: example.test, kind: Widget}\n- type: olm.label\n  value: {}\n- type: olm.constraint\n  value: {cel: {rule: ''}}\n",
    )]);
    let problems: Vec<String> = validate_bundle(&b)
        .of(Rule::InvalidDependency)
        .map(|p| {
            format!(
                "{} {}",
                p.location.field.as_deref().unwrap_or(""),
                p.message
            )
        })
        .collect();
    assert_eq!(
        problems,
        [
            "dependencies[0] API Version is empty",
            "dependencies[1] label information is missing",
            "dependencies[2] the CEL expression is missing"
        ]
    );
}

#[test]
fn invalid_csv_version() {
    let b = bundle(&[(
        "manifests/widget.csv.yaml",
        &CSV.replace("version: 1.0.0", "version: v1.0"),
    )]);
    assert_rule(
        &b,
        Rule::InvalidCsvVersion,
        "manifests/widget.csv.yaml",
        Some("spec.version"),
    );
}

#[test]
fn release_with_substitutes_for() {
    let csv = CSV
        .replace(
            "  name: widget.v1.0.0\n",
            "  name: widget.v1.0.0\n  annotations: {olm.substitutesFor: widget.v0.9.0}\n",
        )
        .replace("  version: 1.0.0\n", "  version: 1.0.0\n  release: '2'\n");
    let b = bundle(&[("manifests/widget.csv.yaml", &csv)]);
    assert_rule(
        &b,
        Rule::ReleaseWithSubstitutesFor,
        "manifests/widget.csv.yaml",
        Some("spec.release"),
    );
}

#[test]
fn duplicate_key_is_a_warning() {
    let csv = CSV.replace(
        "  displayName: Widget\n",
        "  displayName: Widget\n  displayName: Widget 2\n",
    );
    let b = bundle(&[("manifests/widget.csv.yaml", &csv)]);
    assert_eq!(b.csv.spec.display_name, "Widget 2");
    let p = assert_rule(&b, Rule::DuplicateKey, "manifests/widget.csv.yaml", None);
    assert_eq!(p.severity(), Severity::Warning);
}

#[test]
fn image_labels_disagreeing_with_annotations_lose() {
    let mut files: Vec<(String, Vec<u8>)> = vec![
        (
            "manifests/widget.csv.yaml".to_owned(),
            CSV.as_bytes().to_vec(),
        ),
        (
            "manifests/widgets.crd.yaml".to_owned(),
            CRD.as_bytes().to_vec(),
        ),
        (
            "metadata/annotations.yaml".to_owned(),
            ANNOTATIONS.as_bytes().to_vec(),
        ),
    ];
    files.sort();
    let options = LoadBundleOptions {
        image_labels: Some(
            [(
                olm_api::labels::bundle::PACKAGE.to_owned(),
                "gadget".to_owned(),
            )]
            .into(),
        ),
        ..LoadBundleOptions::new()
    };
    let b = RegistryBundle::load_files(files, &options).unwrap();
    assert_eq!(b.package, "widget");
    assert!(b.warnings.iter().any(|w| matches!(w, crate::bundle::BundleWarning::LabelMismatch { label, .. } if label == "gadget")));
}

#[test]
fn derived_properties_follow_opm_render() {
    let b = bundle(&[(
        "metadata/dependencies.yaml",
        "dependencies:\n- type: olm.package\n  value: {packageName: gear, version: '>=1.0.0'}\n- type: olm.gvk\n  value: {group: g.test, kind: Gear, version: v1}\n",
    )]);
    let summary: Vec<(String, String)> = b
        .properties
        .iter()
        .filter(|p| p.type_ != property::BUNDLE_OBJECT)
        .map(|p| (p.type_.clone(), p.value.get().to_owned()))
        .collect();
    assert_eq!(
        summary,
        [
            (
                "olm.gvk".to_owned(),
                r#"{"group":"example.test","kind":"Widget","version":"v1"}"#.to_owned()
            ),
            (
                "olm.gvk.required".to_owned(),
                r#"{"group":"g.test","kind":"Gear","version":"v1"}"#.to_owned()
            ),
            (
                "olm.package".to_owned(),
                r#"{"packageName":"widget","version":"1.0.0"}"#.to_owned()
            ),
            (
                "olm.package.required".to_owned(),
                r#"{"packageName":"gear","versionRange":">=1.0.0"}"#.to_owned()
            ),
        ]
    );
    // One object per manifest, first in sorted order, then moved last when
    // rendered.
    assert_eq!(
        b.properties
            .iter()
            .filter(|p| p.type_ == property::BUNDLE_OBJECT)
            .count(),
        2
    );
    let fbc = b.to_fbc_bundle(
        "quay.io/example/widget-bundle:v1.0.0",
        crate::bundle::Payload::BundleObjects,
    );
    assert_eq!(
        fbc.properties.last().unwrap().type_,
        property::BUNDLE_OBJECT
    );
    let images: Vec<&str> = fbc
        .related_images
        .iter()
        .map(|r| r.image.as_str())
        .collect();
    assert_eq!(
        images,
        [
            "quay.io/example/widget-bundle:v1.0.0",
            "quay.io/example/widget:v1.0.0"
        ]
    );
    let fbc = b.to_fbc_bundle(
        "quay.io/example/widget-bundle:v1.0.0",
        crate::bundle::Payload::CsvMetadata,
    );
    assert_eq!(fbc.properties.last().unwrap().type_, property::CSV_METADATA);
    assert_eq!(b.channel_entry().name, "widget.v1.0.0");
}
