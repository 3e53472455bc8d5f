//! One test per rule, each on a small catalog derived from a valid one.

use std::collections::HashSet;

use super::*;
use crate::{fbc::Catalog, limits::Limits, property};

const VALID: &str = r#"---
schema: olm.package
name: foo
defaultChannel: stable
---
schema: olm.channel
package: foo
name: stable
entries:
- name: foo.v0.2.0
  replaces: foo.v0.1.0
- name: foo.v0.1.0
---
schema: olm.bundle
name: foo.v0.1.0
package: foo
image: quay.io/example/foo-bundle:v0.1.0
properties:
- type: olm.package
  value: {packageName: foo, version: 0.1.0}
---
schema: olm.bundle
name: foo.v0.2.0
package: foo
image: quay.io/example/foo-bundle:v0.2.0
properties:
- type: olm.package
  value: {packageName: foo, version: 0.2.0}
- type: olm.gvk
  value: {group: example.com, kind: Foo, version: v1}
"#;

/// The report on `yaml`, which must be the same whether payloads are kept
/// or checked at load and left out (as `opm validate` loads).
#[track_caller]
fn report(yaml: &str) -> Report {
    let catalog = Catalog::load_file("foo/catalog.yaml", yaml.as_bytes(), &Limits::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let kept = validate_catalog(&catalog);
    let options = crate::fbc::LoadOptions {
        drop_payloads: true,
        ..crate::fbc::LoadOptions::default()
    };
    let lean = Catalog::load_files([("foo/catalog.yaml", yaml.as_bytes())], &options)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(lean.payloads_dropped);
    assert_eq!(
        validate_catalog(&lean).problems,
        kept.problems,
        "payloads left out at load"
    );
    kept
}

fn with(extra: &str) -> String {
    format!("{VALID}---\n{extra}")
}

/// Asserts that `yaml` breaks `rule` at `field` of document `document`.
#[track_caller]
fn assert_problem(yaml: &str, rule: Rule, document: usize, field: Option<&str>) -> Problem {
    let report = report(yaml);
    let found = report
        .of(rule)
        .find(|p| p.location.origin.document == document && p.location.field.as_deref() == field)
        .cloned();
    match found {
        Some(problem) => {
            assert_eq!(problem.location.origin.file.as_ref(), "foo/catalog.yaml");
            problem
        }
        None => panic!("expected {rule:?} at document {document} field {field:?}, got:\n{report}"),
    }
}

#[test]
fn the_valid_catalog_has_no_problems() {
    let report = report(VALID);
    assert!(report.problems.is_empty(), "{report}");
    assert!(report.is_valid());
}

#[test]
fn problems_print_location_rule_and_code() {
    let p = assert_problem(
        &VALID.replace("defaultChannel: stable", "defaultChannel: beta"),
        Rule::DefaultChannelUnknown,
        0,
        Some("defaultChannel"),
    );
    assert_eq!(
        p.to_string(),
        "error: foo/catalog.yaml, document index 0 (line 2), field defaultChannel: invalid package \"foo\": default channel \"beta\" not found in channels list [default-channel-unknown]"
    );
}

#[test]
fn package_name_missing() {
    assert_problem(
        &with("schema: olm.package\ndefaultChannel: x\n"),
        Rule::PackageNameMissing,
        4,
        Some("name"),
    );
}

#[test]
fn package_name_invalid() {
    assert_problem(
        &with("schema: olm.package\nname: Foo_Bar\ndefaultChannel: x\n"),
        Rule::PackageNameInvalid,
        4,
        Some("name"),
    );
    assert!(is_dns1123_label("a-1"));
    assert!(!is_dns1123_label("-a"));
    assert!(!is_dns1123_label(&"a".repeat(64)));
}

#[test]
fn duplicate_package() {
    let p = assert_problem(
        &with("schema: olm.package\nname: foo\ndefaultChannel: stable\n"),
        Rule::DuplicatePackage,
        4,
        Some("name"),
    );
    assert!(
        p.message
            .contains("first defined at foo/catalog.yaml, document index 0"),
        "{p}"
    );
}

#[test]
fn icon_invalid() {
    let yaml = VALID.replace(
        "defaultChannel: stable\n",
        "defaultChannel: stable\nicon: {base64data: '!!not base64', mediatype: image/png}\n",
    );
    let p = assert_problem(&yaml, Rule::IconInvalid, 0, Some("icon.base64data"));
    assert_eq!(
        p.message,
        "icon data is not valid base64: illegal base64 data at input byte 0"
    );
}

/// What Go's decoder takes is a valid icon: non-zero bits after the last
/// byte (`YR==` is `a`, as `YQ==` is) and line breaks, as a YAML block
/// scalar leaves them.
#[test]
fn icon_accepted_as_go_accepts_it() {
    for icon in [
        "{base64data: YR==, mediatype: image/png}",
        "{base64data: \"aGVs\\nbG8=\\r\\n\", mediatype: image/png}",
        "\n  base64data: |\n    aGVs\n    bG8=\n  mediatype: image/png",
    ] {
        let yaml = VALID.replace(
            "defaultChannel: stable\n",
            &format!("defaultChannel: stable\nicon: {icon}\n"),
        );
        let report = report(&yaml);
        assert_eq!(report.of(Rule::IconInvalid).count(), 0, "{icon}: {report}");
        assert!(report.is_valid(), "{icon}: {report}");
    }
}

#[test]
fn default_channel_missing() {
    assert_problem(
        &VALID.replace("defaultChannel: stable\n", ""),
        Rule::DefaultChannelMissing,
        0,
        Some("defaultChannel"),
    );
}

#[test]
fn default_channel_unknown() {
    assert_problem(
        &VALID.replace("defaultChannel: stable", "defaultChannel: beta"),
        Rule::DefaultChannelUnknown,
        0,
        Some("defaultChannel"),
    );
}

#[test]
fn package_without_channels() {
    assert_problem(
        &with("schema: olm.package\nname: bar\ndefaultChannel: x\n"),
        Rule::PackageWithoutChannels,
        4,
        None,
    );
}

#[test]
fn channel_unknown_package() {
    assert_problem(
        &with("schema: olm.channel\npackage: nope\nname: s\nentries: [{name: a}]\n"),
        Rule::ChannelUnknownPackage,
        4,
        Some("package"),
    );
}

#[test]
fn channel_name_missing() {
    assert_problem(
        &with("schema: olm.channel\npackage: foo\nentries: [{name: a}]\n"),
        Rule::ChannelNameMissing,
        4,
        Some("name"),
    );
}

#[test]
fn duplicate_channel() {
    assert_problem(
        &with("schema: olm.channel\npackage: foo\nname: stable\nentries: [{name: foo.v0.1.0}]\n"),
        Rule::DuplicateChannel,
        4,
        Some("name"),
    );
}

#[test]
fn channel_empty() {
    assert_problem(
        &with("schema: olm.channel\npackage: foo\nname: beta\nentries: []\n"),
        Rule::ChannelEmpty,
        4,
        Some("entries"),
    );
}

#[test]
fn entry_name_missing() {
    assert_problem(
        &with(
            "schema: olm.channel\npackage: foo\nname: beta\nentries: [{name: foo.v0.2.0}, {replaces: foo.v0.2.0}]\n",
        ),
        Rule::EntryNameMissing,
        4,
        Some("entries[1].name"),
    );
}

#[test]
fn duplicate_entry() {
    assert_problem(
        &with(
            "schema: olm.channel\npackage: foo\nname: beta\nentries: [{name: foo.v0.2.0}, {name: foo.v0.2.0}]\n",
        ),
        Rule::DuplicateEntry,
        4,
        Some("entries[1].name"),
    );
}

#[test]
fn entry_unknown_bundle() {
    let yaml = VALID.replace(
        "- name: foo.v0.2.0\n",
        "- name: foo.v0.3.0\n  replaces: foo.v0.2.0\n- name: foo.v0.2.0\n",
    );
    let p = assert_problem(&yaml, Rule::EntryUnknownBundle, 1, Some("entries[0].name"));
    assert!(
        p.message
            .contains("no olm.bundle blobs found in package \"foo\""),
        "{p}"
    );
}

#[test]
fn replaces_may_name_a_bundle_outside_the_catalog() {
    // Pruned tails are common in real catalogs: not a problem.
    let yaml = VALID.replace(
        "- name: foo.v0.1.0\n",
        "- name: foo.v0.1.0\n  replaces: foo.v0.0.1\n",
    );
    assert!(report(&yaml).problems.is_empty());
}

#[test]
fn empty_skip() {
    let yaml = VALID.replace(
        "  replaces: foo.v0.1.0\n",
        "  replaces: foo.v0.1.0\n  skips: ['']\n",
    );
    assert_problem(&yaml, Rule::EmptySkip, 1, Some("entries[0].skips[0]"));
}

#[test]
fn invalid_skip_range() {
    let yaml = VALID.replace(
        "  replaces: foo.v0.1.0\n",
        "  replaces: foo.v0.1.0\n  skipRange: '~0.1'\n",
    );
    let p = assert_problem(
        &yaml,
        Rule::InvalidSkipRange,
        1,
        Some("entries[0].skipRange"),
    );
    assert!(p.message.starts_with("invalid skipRange \"~0.1\""), "{p}");
    // Upstream's opm validate and serve accept it (its model never parses
    // skipRange): reported, but the catalog is valid.
    assert_eq!(p.severity(), Severity::Warning);
}

#[test]
fn channel_head() {
    let yaml = VALID.replace("  replaces: foo.v0.1.0\n", "");
    let p = assert_problem(&yaml, Rule::ChannelHead, 1, Some("entries"));
    assert!(
        p.message
            .ends_with("multiple channel heads found in graph: foo.v0.1.0, foo.v0.2.0"),
        "{p}"
    );
}

#[test]
fn replaces_cycle() {
    let yaml = VALID.replace(
        "- name: foo.v0.1.0\n",
        "- name: foo.v0.1.0\n  replaces: foo.v0.0.9\n- name: foo.v0.0.9\n  replaces: foo.v0.1.0\n",
    ) + "---\nschema: olm.bundle\nname: foo.v0.0.9\npackage: foo\nimage: quay.io/example/foo-bundle:v0.0.9\nproperties: [{type: olm.package, value: {packageName: foo, version: 0.0.9}}]\n";
    let p = assert_problem(&yaml, Rule::ReplacesCycle, 1, Some("entries"));
    assert!(
        p.message.contains("foo.v0.1.0 -> foo.v0.0.9 -> foo.v0.1.0"),
        "{p}"
    );
}

#[test]
fn stranded_bundles() {
    let yaml = VALID.replace(
        "- name: foo.v0.1.0\n",
        "- name: foo.v0.1.0\n- name: foo.v0.0.8\n  replaces: foo.v0.0.9\n- name: foo.v0.0.9\n  replaces: foo.v0.0.8\n",
    ) + "---\nschema: olm.bundle\nname: foo.v0.0.9\npackage: foo\nimage: i\nproperties: [{type: olm.package, value: {packageName: foo, version: 0.0.9}}]\n---\nschema: olm.bundle\nname: foo.v0.0.8\npackage: foo\nimage: i\nproperties: [{type: olm.package, value: {packageName: foo, version: 0.0.8}}]\n";
    let p = assert_problem(&yaml, Rule::StrandedBundles, 1, Some("entries"));
    assert!(
        p.message
            .ends_with("channel contains one or more stranded bundles: foo.v0.0.8, foo.v0.0.9"),
        "{p}"
    );
}

#[test]
fn bundle_package_missing() {
    assert_problem(
        &with("schema: olm.bundle\nname: x\nimage: i\n"),
        Rule::BundlePackageMissing,
        4,
        Some("package"),
    );
}

#[test]
fn bundle_unknown_package() {
    assert_problem(
        &with("schema: olm.bundle\nname: x\npackage: nope\nimage: i\n"),
        Rule::BundleUnknownPackage,
        4,
        Some("package"),
    );
}

#[test]
fn bundle_name_missing() {
    assert_problem(
        &with(
            "schema: olm.bundle\npackage: foo\nimage: i\nproperties: [{type: olm.package, value: {packageName: foo, version: 0.0.1}}]\n",
        ),
        Rule::BundleNameMissing,
        4,
        Some("name"),
    );
}

#[test]
fn duplicate_bundle() {
    assert_problem(
        &with(
            "schema: olm.bundle\nname: foo.v0.1.0\npackage: foo\nimage: i\nproperties: [{type: olm.package, value: {packageName: foo, version: 0.1.0}}]\n",
        ),
        Rule::DuplicateBundle,
        4,
        Some("name"),
    );
}

#[test]
fn bundle_not_in_channel() {
    assert_problem(
        &with(
            "schema: olm.bundle\nname: foo.v0.0.1\npackage: foo\nimage: i\nproperties: [{type: olm.package, value: {packageName: foo, version: 0.0.1}}]\n",
        ),
        Rule::BundleNotInChannel,
        4,
        Some("name"),
    );
}

#[test]
fn invalid_property() {
    let yaml = VALID.replace(
        "value: {group: example.com, kind: Foo, version: v1}",
        "value: [example.com]",
    );
    let p = assert_problem(&yaml, Rule::InvalidProperty, 3, Some("properties[1].value"));
    assert!(p.message.contains("invalid olm.gvk value"), "{p}");
}

#[test]
fn package_property_count() {
    let yaml = VALID.replace(
        "- type: olm.package\n  value: {packageName: foo, version: 0.1.0}\n",
        "- type: vendor.other\n  value: 1\n",
    );
    assert_problem(&yaml, Rule::PackagePropertyCount, 2, Some("properties"));
}

#[test]
fn package_property_mismatch() {
    let yaml = VALID.replace(
        "{packageName: foo, version: 0.1.0}",
        "{packageName: bar, version: 0.1.0}",
    );
    assert_problem(
        &yaml,
        Rule::PackagePropertyMismatch,
        2,
        Some("properties[0].value.packageName"),
    );
}

#[test]
fn invalid_version() {
    let yaml = VALID.replace(
        "{packageName: foo, version: 0.1.0}",
        "{packageName: foo, version: v0.1.0}",
    );
    assert_problem(
        &yaml,
        Rule::InvalidVersion,
        2,
        Some("properties[0].value.version"),
    );
}

#[test]
fn invalid_release() {
    let yaml = VALID.replace(
        "{packageName: foo, version: 0.1.0}",
        "{packageName: foo, version: 0.1.0, release: '01'}",
    );
    assert_problem(
        &yaml,
        Rule::InvalidRelease,
        2,
        Some("properties[0].value.release"),
    );
    let yaml = VALID
        .replace(
            "{packageName: foo, version: 0.1.0}",
            "{packageName: foo, version: 0.1.0+b1, release: '2'}",
        )
        .replace(
            "name: foo.v0.1.0\npackage",
            "name: foo-v0.1.0+b1-2\npackage",
        );
    assert_problem(
        &yaml,
        Rule::InvalidRelease,
        2,
        Some("properties[0].value.release"),
    );
    assert!(check_release(&"a".repeat(21)).is_err());
    assert_eq!(check_release("rc.1").unwrap().len(), 2);
}

#[test]
fn bundle_name_not_normalized() {
    let yaml = VALID.replace(
        "{packageName: foo, version: 0.1.0}",
        "{packageName: foo, version: 0.1.0, release: '2'}",
    );
    let p = assert_problem(&yaml, Rule::BundleNameNotNormalized, 2, Some("name"));
    assert!(p.message.contains("\"foo-v0.1.0-2\""), "{p}");
}

#[test]
fn duplicate_version() {
    let yaml = VALID.replace(
        "{packageName: foo, version: 0.2.0}",
        "{packageName: foo, version: 0.1.0}",
    );
    let p = assert_problem(&yaml, Rule::DuplicateVersion, 3, Some("properties"));
    assert!(
        p.message.contains("{0.1.0: [foo.v0.1.0, foo.v0.2.0]}"),
        "{p}"
    );
}

#[test]
fn image_missing() {
    let yaml = VALID.replace("image: quay.io/example/foo-bundle:v0.1.0\n", "");
    assert_problem(&yaml, Rule::ImageMissing, 2, Some("image"));
    // Bundle objects stand in for an image.
    let object = property::BundleObject::encode(b"kind: ConfigMap\n").data;
    let yaml = VALID.replace(
        "image: quay.io/example/foo-bundle:v0.1.0\n",
        "image: ''\nrelatedImages: []\n",
    ).replace(
        "  value: {packageName: foo, version: 0.1.0}\n",
        &format!("  value: {{packageName: foo, version: 0.1.0}}\n- type: olm.bundle.object\n  value: {{data: {object}}}\n"),
    );
    assert!(report(&yaml).is_valid(), "{}", report(&yaml));
}

#[test]
fn invalid_image_reference() {
    let yaml = VALID.replace(
        "image: quay.io/example/foo-bundle:v0.1.0",
        "image: quay.io/Example/foo:v1",
    );
    assert_problem(&yaml, Rule::InvalidImageReference, 2, Some("image"));
    let yaml = VALID.replace(
        "image: quay.io/example/foo-bundle:v0.1.0\n",
        "image: quay.io/example/foo-bundle:v0.1.0\nrelatedImages: [{name: op, image: 'quay.io/x@sha256:1'}]\n",
    );
    assert_problem(
        &yaml,
        Rule::InvalidImageReference,
        2,
        Some("relatedImages[0].image"),
    );
}

#[test]
fn csv_metadata_that_does_not_parse_is_reported_whether_kept_or_left_out() {
    let yaml = with(
        "schema: olm.bundle\nname: foo.v0.3.0\npackage: foo\nimage: i\nproperties:\n- type: olm.package\n  value: {packageName: foo, version: 0.3.0}\n- type: olm.csv.metadata\n  value: {displayName: [1, 2]}\n- type: olm.csv.metadata\n  value: null\n- type: olm.csv.metadata\n  value: {displayName: Foo}\n",
    );
    let problem = assert_problem(&yaml, Rule::InvalidProperty, 4, Some("properties[1].value"));
    assert!(problem.message.contains("foo.v0.3.0"), "{problem:?}");
    assert_eq!(report(&yaml).of(Rule::InvalidProperty).count(), 1);
}

#[test]
fn invalid_bundle_object() {
    let yaml = VALID.replace(
        "  value: {packageName: foo, version: 0.1.0}\n",
        "  value: {packageName: foo, version: 0.1.0}\n- type: olm.bundle.object\n  value: {data: '%%%'}\n",
    );
    let p = assert_problem(
        &yaml,
        Rule::InvalidBundleObject,
        2,
        Some("properties[1].value.data"),
    );
    assert!(
        p.message
            .ends_with("invalid base64: illegal base64 data at input byte 0"),
        "{p}"
    );
    // What Go's decoder takes decodes: `e31=` is `{}` with a non-zero bit
    // after it, and line breaks are skipped.
    for data in ["e31=", "\"e3\\n1=\\n\""] {
        let yaml = VALID.replace(
            "  value: {packageName: foo, version: 0.1.0}\n",
            &format!("  value: {{packageName: foo, version: 0.1.0}}\n- type: olm.bundle.object\n  value: {{data: {data}}}\n"),
        );
        let report = report(&yaml);
        assert_eq!(
            report.of(Rule::InvalidBundleObject).count(),
            0,
            "{data}: {report}"
        );
    }
}

const DEPRECATIONS: &str = "schema: olm.deprecations\npackage: foo\nentries:\n";

#[test]
fn deprecations_that_are_valid() {
    let yaml = with(&format!(
        "{DEPRECATIONS}- reference: {{schema: olm.package}}\n  message: gone\n- reference: {{schema: olm.channel, name: stable}}\n  message: old\n- reference: {{schema: olm.bundle, name: foo.v0.1.0}}\n  message: bad\n"
    ));
    assert!(report(&yaml).problems.is_empty(), "{}", report(&yaml));
}

#[test]
fn deprecation_package_missing() {
    assert_problem(
        &with("schema: olm.deprecations\nentries: []\n"),
        Rule::DeprecationPackageMissing,
        4,
        Some("package"),
    );
}

#[test]
fn deprecation_unknown_package() {
    assert_problem(
        &with("schema: olm.deprecations\npackage: nope\nentries: []\n"),
        Rule::DeprecationUnknownPackage,
        4,
        Some("package"),
    );
}

#[test]
fn duplicate_deprecation() {
    let empty = "schema: olm.deprecations\npackage: foo\nentries: []\n";
    let yaml = with(&format!("{empty}---\n{empty}"));
    assert_problem(&yaml, Rule::DuplicateDeprecation, 5, Some("package"));
}

#[test]
fn deprecation_schema_missing() {
    let yaml = with(&format!(
        "{DEPRECATIONS}- reference: {{name: x}}\n  message: m\n"
    ));
    assert_problem(
        &yaml,
        Rule::DeprecationSchemaMissing,
        4,
        Some("entries[0].reference.schema"),
    );
}

#[test]
fn deprecation_unknown_schema() {
    let yaml = with(&format!(
        "{DEPRECATIONS}- reference: {{schema: olm.thing, name: x}}\n  message: m\n"
    ));
    assert_problem(
        &yaml,
        Rule::DeprecationUnknownSchema,
        4,
        Some("entries[0].reference.schema"),
    );
}

#[test]
fn duplicate_deprecation_entry() {
    let entry = "- reference: {schema: olm.package}\n  message: m\n";
    let yaml = with(&format!("{DEPRECATIONS}{entry}{entry}"));
    assert_problem(
        &yaml,
        Rule::DuplicateDeprecationEntry,
        4,
        Some("entries[1].reference"),
    );
}

#[test]
fn deprecation_unknown_bundle() {
    let yaml = with(&format!(
        "{DEPRECATIONS}- reference: {{schema: olm.bundle, name: foo.v9}}\n  message: m\n"
    ));
    assert_problem(
        &yaml,
        Rule::DeprecationUnknownBundle,
        4,
        Some("entries[0].reference.name"),
    );
}

#[test]
fn deprecation_unknown_channel() {
    let yaml = with(&format!(
        "{DEPRECATIONS}- reference: {{schema: olm.channel, name: beta}}\n  message: m\n"
    ));
    assert_problem(
        &yaml,
        Rule::DeprecationUnknownChannel,
        4,
        Some("entries[0].reference.name"),
    );
}

#[test]
fn deprecation_package_name_set() {
    let yaml = with(&format!(
        "{DEPRECATIONS}- reference: {{schema: olm.package, name: foo}}\n  message: m\n"
    ));
    assert_problem(
        &yaml,
        Rule::DeprecationPackageNameSet,
        4,
        Some("entries[0].reference.name"),
    );
}

#[test]
fn deprecation_message_missing() {
    let yaml = with(&format!(
        "{DEPRECATIONS}- reference: {{schema: olm.package}}\n"
    ));
    assert_problem(
        &yaml,
        Rule::DeprecationMessageMissing,
        4,
        Some("entries[0].message"),
    );
}

fn with_bundle_property(type_: &str, value: &str) -> String {
    VALID.replace(
        "  value: {packageName: foo, version: 0.1.0}\n",
        &format!(
            "  value: {{packageName: foo, version: 0.1.0}}\n- type: {type_}\n  value: {value}\n"
        ),
    )
}

#[test]
fn invalid_constraint_is_a_warning() {
    let yaml = with_bundle_property("olm.constraint", "{}");
    let p = assert_problem(
        &yaml,
        Rule::InvalidConstraint,
        2,
        Some("properties[1].value"),
    );
    assert_eq!(p.severity(), Severity::Warning);
    assert!(report(&yaml).is_valid());
    let yaml = with_bundle_property(
        "olm.constraint",
        "{gvk: {group: g, version: v, kind: K}, unknown: 1}",
    );
    assert_problem(
        &yaml,
        Rule::InvalidConstraint,
        2,
        Some("properties[1].value"),
    );
    let yaml = with_bundle_property("olm.constraint", "{all: {constraints: [{}]}}");
    assert_problem(
        &yaml,
        Rule::InvalidConstraint,
        2,
        Some("properties[1].value.all.constraints[0]"),
    );
}

#[test]
fn ambiguous_constraint_is_a_warning() {
    let yaml = with_bundle_property(
        "olm.constraint",
        "{gvk: {group: g, version: v, kind: K}, cel: {rule: 'true'}}",
    );
    assert_problem(
        &yaml,
        Rule::AmbiguousConstraint,
        2,
        Some("properties[1].value"),
    );
}

#[test]
fn invalid_dependency_range_is_a_warning() {
    let yaml = with_bundle_property(
        "olm.package.required",
        "{packageName: bar, versionRange: '^1.0'}",
    );
    assert_problem(
        &yaml,
        Rule::InvalidDependencyRange,
        2,
        Some("properties[1].value.versionRange"),
    );
    let yaml = with_bundle_property(
        "olm.constraint",
        "{package: {packageName: bar, versionRange: 'x'}}",
    );
    let p = assert_problem(
        &yaml,
        Rule::InvalidDependencyRange,
        2,
        Some("properties[1].value.package.versionRange"),
    );
    assert!(report(&yaml).is_valid(), "{p}");
}

#[test]
fn duplicate_keys_are_warnings() {
    let yaml = VALID.replace(
        "defaultChannel: stable\n",
        "defaultChannel: stable\ndefaultChannel: stable\n",
    );
    let p = assert_problem(&yaml, Rule::DuplicateKey, 0, None);
    assert_eq!(p.severity(), Severity::Warning);
    assert!(report(&yaml).is_valid());
}

#[test]
fn codes_are_unique() {
    let rules = [
        Rule::PackageNameMissing,
        Rule::PackageNameInvalid,
        Rule::DuplicatePackage,
        Rule::IconInvalid,
        Rule::DefaultChannelMissing,
        Rule::DefaultChannelUnknown,
        Rule::PackageWithoutChannels,
        Rule::ChannelUnknownPackage,
        Rule::ChannelNameMissing,
        Rule::DuplicateChannel,
        Rule::ChannelEmpty,
        Rule::EntryNameMissing,
        Rule::DuplicateEntry,
        Rule::EntryUnknownBundle,
        Rule::EmptySkip,
        Rule::InvalidSkipRange,
        Rule::ChannelHead,
        Rule::ReplacesCycle,
        Rule::StrandedBundles,
        Rule::BundlePackageMissing,
        Rule::BundleUnknownPackage,
        Rule::BundleNameMissing,
        Rule::DuplicateBundle,
        Rule::BundleNotInChannel,
        Rule::InvalidProperty,
        Rule::PackagePropertyCount,
        Rule::PackagePropertyMismatch,
        Rule::InvalidVersion,
        Rule::InvalidRelease,
        Rule::BundleNameNotNormalized,
        Rule::DuplicateVersion,
        Rule::ImageMissing,
        Rule::InvalidImageReference,
        Rule::InvalidBundleObject,
        Rule::DeprecationPackageMissing,
        Rule::DeprecationUnknownPackage,
        Rule::DuplicateDeprecation,
        Rule::DeprecationSchemaMissing,
        Rule::DeprecationUnknownSchema,
        Rule::DuplicateDeprecationEntry,
        Rule::DeprecationUnknownBundle,
        Rule::DeprecationUnknownChannel,
        Rule::DeprecationPackageNameSet,
        Rule::DeprecationMessageMissing,
        Rule::InvalidConstraint,
        Rule::AmbiguousConstraint,
        Rule::InvalidDependencyRange,
    ];
    let codes: HashSet<&str> = rules.iter().map(|r| r.code()).collect();
    assert_eq!(codes.len(), rules.len());
}

/// The same catalog gives the same report, in document order, every time:
/// channel entries naming no bundle in several packages were reported in
/// the order of a hash map, which differs between runs (found by the
/// `fbc_load` fuzz target, comparing a load with and without payloads).
#[test]
fn reports_come_in_document_order_every_time() {
    let mut yaml = String::new();
    for package in ["zeta", "alpha", "mid", "beta", "omega", "gamma"] {
        yaml.push_str(&format!(
            "---\nschema: olm.package\nname: {package}\ndefaultChannel: s\n---\nschema: olm.channel\npackage: {package}\nname: s\nentries:\n- name: {package}.v9\n"
        ));
    }
    let first = report(&yaml);
    let unknown: Vec<usize> = first
        .of(Rule::EntryUnknownBundle)
        .map(|p| p.location.origin.document)
        .collect();
    assert_eq!(unknown, [1, 3, 5, 7, 9, 11]);
    for _ in 0..8 {
        assert_eq!(report(&yaml).problems, first.problems);
    }
}
