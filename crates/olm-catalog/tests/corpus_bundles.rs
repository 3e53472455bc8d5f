//! Every real bundle in the shared test data reads and validates as upstream
//! `opm` decides, the quirks SOURCES.md lists are tolerated, and bundles that
//! the v4.21 catalog was rendered from render to the same properties.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use olm_catalog::{
    bundle::{BundleWarning, Payload, RegistryBundle},
    fbc::Catalog,
    property::{self, raw_to_value},
    validate::{Rule, Severity, validate_bundle},
};

/// Every directory with a `manifests/` subdirectory, sorted.
fn bundle_dirs(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_dir())
            .collect();
        entries.sort();
        if entries
            .iter()
            .any(|p| p.file_name().unwrap() == "manifests")
        {
            out.push(dir);
            continue;
        }
        stack.extend(entries);
    }
    out.sort();
    out
}

fn relative(path: &Path, root: &Path) -> String {
    path.strip_prefix(root).unwrap().display().to_string()
}

#[test]
fn every_bundle_reads_and_validates() {
    let Some(testdata) = common::testdata() else {
        return;
    };
    let root = testdata.join("bundles");
    let dirs = bundle_dirs(&root);
    assert_eq!(dirs.len(), 422);
    let mut per_package: BTreeMap<String, usize> = BTreeMap::new();
    let mut warnings_by_rule: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut channels = BTreeMap::<String, std::collections::BTreeSet<String>>::new();
    for dir in &dirs {
        let name = relative(dir, &root);
        let bundle = RegistryBundle::load_dir(dir).unwrap_or_else(|e| panic!("{name}: {e}"));
        let report = validate_bundle(&bundle);
        assert!(report.is_valid(), "{name}:\n{report}");
        for warning in report.warnings() {
            warnings_by_rule
                .entry(warning.rule.code())
                .or_default()
                .push(name.clone());
        }
        *per_package.entry(bundle.package.clone()).or_default() += 1;
        channels
            .entry(bundle.package.clone())
            .or_default()
            .extend(bundle.channels.iter().cloned());
        // Every bundle has exactly one olm.package property, first among
        // non-object properties after sorting, with the CSV's version.
        let packages: Vec<_> = bundle
            .properties
            .iter()
            .filter(|p| p.type_ == property::PACKAGE)
            .collect();
        assert_eq!(packages.len(), 1, "{name}");
        assert!(
            packages[0]
                .value
                .get()
                .contains(&format!("\"version\":\"{}\"", bundle.version())),
            "{name}"
        );
    }
    println!("bundles per package:");
    for (package, count) in &per_package {
        println!(
            "  {package}: {count} bundles, {} channels",
            channels[package].len()
        );
    }
    for (rule, bundles) in &warnings_by_rule {
        println!(
            "warning {rule}: {} bundles: {}",
            bundles.len(),
            bundles.join(", ")
        );
    }
    assert_eq!(per_package.len(), 32);
    assert_eq!(per_package.values().sum::<usize>(), 422);
    assert_eq!(channels.values().map(|c| c.len()).sum::<usize>(), 88);
    // The only metadata files upstream cannot read are eventing-kogito's
    // dependencies files (quirk 2).
    assert_eq!(
        warnings_by_rule
            .get("unreadable-metadata-file")
            .cloned()
            .unwrap_or_default(),
        ["eventing-kogito/1.1.0", "eventing-kogito/1.2.0"]
    );
}

fn load(testdata: &Path, bundle: &str) -> RegistryBundle {
    RegistryBundle::load_dir(testdata.join("bundles").join(bundle)).unwrap()
}

#[test]
fn quirk_2_invalid_dependencies_yaml_is_ignored_with_a_reason() {
    let Some(testdata) = common::testdata() else {
        return;
    };
    for version in ["1.1.0", "1.2.0"] {
        let bundle = load(&testdata, &format!("eventing-kogito/{version}"));
        assert!(bundle.dependencies.is_empty());
        assert!(
            !bundle
                .properties
                .iter()
                .any(|p| p.type_ == property::GVK_REQUIRED)
        );
        let report = validate_bundle(&bundle);
        let problem = report.of(Rule::UnreadableMetadataFile).next().unwrap();
        assert_eq!(problem.severity(), Severity::Warning);
        assert_eq!(
            problem.location.origin.file.as_ref(),
            "metadata/dependencies.yaml"
        );
        assert!(
            problem.message.contains("mapping values are not allowed"),
            "{problem}"
        );
    }
}

#[test]
fn quirks_3_and_4_metadata_files_are_read_by_content() {
    let Some(testdata) = common::testdata() else {
        return;
    };
    // A misnamed dependency.yaml, with extra keys in olm.package values.
    let bundle = load(&testdata, "ndmspc-operator/0.20250209.0");
    assert_eq!(
        bundle.dependencies_file.as_deref(),
        Some("metadata/dependency.yaml")
    );
    let required: Vec<&str> = bundle
        .properties
        .iter()
        .filter(|p| p.type_ == property::PACKAGE_REQUIRED)
        .map(|p| p.value.get())
        .collect();
    assert_eq!(
        required,
        [
            r#"{"packageName":"knative-operator","versionRange":">=1.17.0"}"#,
            r#"{"packageName":"sailoperator","versionRange":">=0.2.0"}"#
        ]
    );
    // A properties.yaml that holds dependencies.
    let bundle = load(&testdata, "pelorus-operator/0.0.1");
    assert_eq!(
        bundle.dependencies_file.as_deref(),
        Some("metadata/properties.yaml")
    );
    assert!(bundle.declared_properties.is_empty());
    assert!(
        bundle
            .properties
            .iter()
            .any(|p| p.type_ == property::PACKAGE_REQUIRED
                && p.value.get() == r#"{"packageName":"prometheus","versionRange":"0.47.0"}"#)
    );
}

#[test]
fn quirks_1_5_6_7_8_are_tolerated() {
    let Some(testdata) = common::testdata() else {
        return;
    };
    // 1: a bare `=` in a CRD enum.
    let bundle = load(&testdata, "prometheus/0.56.3");
    let crd = bundle
        .objects
        .iter()
        .find(|o| o.file.ends_with("alertmanagerconfigs.yaml"))
        .unwrap();
    assert!(crd.json.contains(r#""=""#));
    // 5: extra files in metadata/.
    load(&testdata, "project-onboarding-operator/0.0.51");
    // 6: a nested bundle directory.
    let bundle = load(
        &testdata,
        "rabbitmq-messaging-topology-operator/1.18.3/bundle",
    );
    assert_eq!(bundle.package, "rabbitmq-messaging-topology-operator");
    // 7: flat copies beside manifests/ are not part of the bundle.
    let bundle = load(&testdata, "aqua/6.5.0");
    assert!(bundle.ignored_csv_files.is_empty());
    assert_eq!(
        bundle
            .objects
            .iter()
            .filter(|o| o.kind == "ClusterServiceVersion")
            .count(),
        1
    );
    // 8: the directory name is not the version.
    assert_eq!(load(&testdata, "virt-git-sync/0.1.3").version(), "0.1.0");
    assert_eq!(load(&testdata, "ndmspc-operator/0.7.2").version(), "0.7.1");
}

#[test]
fn quirk_13_csv_properties_annotation_becomes_properties() {
    let Some(testdata) = common::testdata() else {
        return;
    };
    let root = testdata.join("bundles");
    let mut with_max_ocp = 0;
    for dir in bundle_dirs(&root) {
        let bundle = RegistryBundle::load_dir(&dir).unwrap();
        if bundle
            .properties
            .iter()
            .any(|p| p.type_ == "olm.maxOpenShiftVersion")
        {
            with_max_ocp += 1;
        }
    }
    // SOURCES.md counts 59 CSVs: one of them is aqua 6.5.0's flat copy
    // beside manifests/ (quirk 7), which is not part of the bundle.
    assert_eq!(with_max_ocp, 58);
}

#[test]
fn dbaas_constraint_in_properties_yaml_is_kept() {
    let Some(testdata) = common::testdata() else {
        return;
    };
    let bundle = load(&testdata, "dbaas-operator/0.5.0");
    let constraint = bundle
        .properties
        .iter()
        .find(|p| p.type_ == property::CONSTRAINT)
        .unwrap();
    let property::PropertyValue::Constraint(c) = constraint.parse().unwrap() else {
        panic!()
    };
    assert!(matches!(c.kind(), Some(property::ConstraintKind::Any(subs)) if subs.len() == 2));
}

/// Compares properties as (type, JSON value) pairs.
fn values(properties: &[property::Property]) -> Vec<(String, serde_json::Value)> {
    properties
        .iter()
        .map(|p| (p.type_.clone(), raw_to_value(&p.value).unwrap()))
        .collect()
}

#[test]
fn rendering_matches_the_catalog_built_from_the_same_bundles() {
    let Some(testdata) = common::testdata() else {
        return;
    };
    let catalog =
        Catalog::load_dir(testdata.join("catalogs/community-operators-prod-v4.21")).unwrap();
    let root = testdata.join("bundles");
    let mut compared = 0;
    for package in ["kube-green", "rabbitmq-cluster-operator"] {
        for dir in bundle_dirs(&root.join(package)) {
            let bundle = RegistryBundle::load_dir(&dir).unwrap();
            let Some(expected) = catalog.bundles.iter().find(|b| b.name == bundle.name) else {
                continue;
            };
            let rendered = bundle.to_fbc_bundle(&expected.image, Payload::CsvMetadata);
            let name = relative(&dir, &root);
            assert_eq!(
                values(&rendered.properties),
                values(&expected.properties),
                "{name}"
            );
            let images = |b: &olm_catalog::fbc::Bundle| -> Vec<(String, String)> {
                b.related_images
                    .iter()
                    .map(|r| (r.name.clone(), r.image.clone()))
                    .collect()
            };
            assert_eq!(images(&rendered), images(expected), "{name}");
            compared += 1;
        }
    }
    println!("compared {compared} bundles with the v4.21 catalog");
    assert_eq!(compared, 36);
}

#[test]
fn bundles_read_from_memory_equal_bundles_read_from_disk() {
    let Some(testdata) = common::testdata() else {
        return;
    };
    let dir = testdata.join("bundles/kube-green/0.5.2");
    let from_disk = RegistryBundle::load_dir(&dir).unwrap();
    let mut files = Vec::new();
    for sub in ["manifests", "metadata"] {
        for entry in std::fs::read_dir(dir.join(sub)).unwrap() {
            let path = entry.unwrap().path();
            files.push((
                format!("{sub}/{}", path.file_name().unwrap().to_str().unwrap()),
                std::fs::read(&path).unwrap(),
            ));
        }
    }
    files.push((
        "tests/scorecard/config.yaml".to_owned(),
        b"ignored: true".to_vec(),
    ));
    let from_memory =
        RegistryBundle::load_files(files, &olm_catalog::bundle::LoadBundleOptions::new()).unwrap();
    assert_eq!(from_memory.properties, from_disk.properties);
    assert_eq!(from_memory.name, from_disk.name);
    assert!(
        !from_disk
            .warnings
            .iter()
            .any(|w| matches!(w, BundleWarning::ExtraCsv { .. }))
    );
}
