//! Parity with upstream's own test fixtures (operator-registry, OLM,
//! operator-framework/api), where the expected outcome is evident from the
//! fixture's name or from the upstream test that uses it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use olm_catalog::{
    bundle::{BundleError, LoadBundleOptions, RegistryBundle},
    fbc::Catalog,
    limits::Limits,
    validate::{Report, Rule, validate_bundle, validate_catalog},
};

fn fixtures() -> Option<PathBuf> {
    Some(common::testdata()?.join("upstream-fixtures"))
}

/// A bundle whose directory has `manifests/` and `metadata/`.
fn load_bundle(dir: &Path) -> Result<RegistryBundle, BundleError> {
    RegistryBundle::load_dir(dir)
}

/// A directory of manifests only (upstream validates these with
/// `ValidateBundleContent`), read as a bundle with minimal annotations.
fn load_manifests(dir: &Path) -> Result<RegistryBundle, BundleError> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            (
                format!("manifests/{}", p.file_name().unwrap().to_str().unwrap()),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    files.push((
        "metadata/annotations.yaml".to_owned(),
        b"annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: registry+v1\n  \
          operators.operatorframework.io.bundle.manifests.v1: manifests/\n  \
          operators.operatorframework.io.bundle.metadata.v1: metadata/\n  \
          operators.operatorframework.io.bundle.package.v1: fixture\n  \
          operators.operatorframework.io.bundle.channels.v1: stable\n"
            .to_vec(),
    ));
    RegistryBundle::load_files(files, &LoadBundleOptions::new())
}

fn report_of(bundle: &RegistryBundle) -> Report {
    validate_bundle(bundle)
}

#[test]
fn valid_bundles_read_and_validate() {
    let Some(f) = fixtures() else { return };
    for dir in [
        "operator-registry/pkg/lib/bundle/testdata/validate/valid_bundle",
        "operator-registry/pkg/lib/bundle/testdata/validate/valid_bundle_2",
    ] {
        let bundle = load_bundle(&f.join(dir)).unwrap_or_else(|e| panic!("{dir}: {e}"));
        let report = report_of(&bundle);
        assert!(report.problems.is_empty(), "{dir}:\n{report}");
    }
    for dir in [
        "operator-registry/pkg/lib/validation/testdata/valid_bundle",
        "api/pkg/manifests/testdata/valid_bundle",
    ] {
        let bundle = load_manifests(&f.join(dir)).unwrap_or_else(|e| panic!("{dir}: {e}"));
        assert!(
            report_of(&bundle).is_valid(),
            "{dir}:\n{}",
            report_of(&bundle)
        );
    }
}

#[test]
fn render_inputs_read() {
    // `opm render`'s test inputs: they render, and lack only the annotations
    // `opm alpha bundle validate` requires beyond package and channels. Four
    // of operator-registry's bundles are a lone CSV without metadata (inputs
    // of other upstream tests, which `opm render` cannot read either).
    let Some(f) = fixtures() else { return };
    let mut dirs = Vec::new();
    for parent in [
        "operator-registry/bundles",
        "operator-registry/alpha/action/testdata",
    ] {
        for entry in std::fs::read_dir(f.join(parent)).unwrap() {
            let dir = entry.unwrap().path();
            if dir.join("manifests").is_dir() && dir.join("metadata").is_dir() {
                dirs.push(dir);
            }
        }
    }
    dirs.sort();
    assert_eq!(dirs.len(), 23);
    for dir in dirs {
        let bundle = load_bundle(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let report = report_of(&bundle);
        assert!(
            report.errors().all(|p| p.rule == Rule::MissingAnnotation),
            "{}:\n{report}",
            dir.display()
        );
    }
}

#[test]
fn invalid_annotations_bundle_has_the_wrong_media_type() {
    let Some(f) = fixtures() else { return };
    let bundle = load_bundle(
        &f.join("operator-registry/pkg/lib/bundle/testdata/validate/invalid_annotations_bundle"),
    )
    .unwrap();
    let report = report_of(&bundle);
    let errors: Vec<_> = report.errors().collect();
    assert_eq!(errors.len(), 1, "{report}");
    assert_eq!(errors[0].rule, Rule::WrongMediaType);
    assert!(
        errors[0].message.contains("instead of \"registry+v2\""),
        "{}",
        errors[0]
    );
}

#[test]
fn invalid_dependencies_bundles_fail_with_upstreams_reasons() {
    let Some(f) = fixtures() else { return };
    let base =
        f.join("operator-registry/pkg/lib/bundle/testdata/validate/invalid_dependencies_bundle");
    // An olm.gvk dependency without a value: upstream cannot decode it, and
    // `opm render` fails on it too.
    let err = load_bundle(&base.join("invalid_gvk_dependency")).unwrap_err();
    assert!(matches!(err, BundleError::InvalidProperty { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("dependencies[0].value: unexpected end of JSON input"),
        "{err}"
    );
    for (dir, expected) in [
        (
            "invalid_package_dependency",
            vec![
                "package name is empty",
                "invalid semver format version \">!0.2.0\"",
                "package version is empty",
            ],
        ),
        (
            "invalid_dependency_type",
            vec!["couldn't parse dependency of type olm.crd"],
        ),
        (
            "invalid_label_dependency",
            vec!["label information is missing"],
        ),
    ] {
        let bundle = load_bundle(&base.join(dir)).unwrap();
        let report = report_of(&bundle);
        let messages: Vec<&str> = report.errors().map(|p| p.message.as_str()).collect();
        assert_eq!(messages, expected, "{dir}");
        assert!(report.errors().all(|p| p.rule == Rule::InvalidDependency));
    }
}

#[test]
fn invalid_manifests_fail_where_our_rules_cover_them() {
    let Some(f) = fixtures() else { return };
    let base =
        f.join("operator-registry/pkg/lib/bundle/testdata/validate/invalid_manifests_bundle");
    // ResourceQuota is not a registry+v1 kind.
    let report = report_of(&load_manifests(&base.join("invalid_type")).unwrap());
    let errors: Vec<_> = report.errors().collect();
    assert_eq!(errors.len(), 1, "{report}");
    assert_eq!(errors[0].rule, Rule::UnsupportedKind);
    assert!(
        errors[0]
            .message
            .starts_with("ResourceQuota is not supported type for registryV1 bundle")
    );
    // An owned CRD missing from the bundle: a read error, as for `opm render`.
    for dir in [
        base.join("invalid_bundle"),
        f.join("operator-registry/pkg/lib/validation/testdata/invalid_bundle"),
    ] {
        let err = load_manifests(&dir).unwrap_err();
        assert!(matches!(err, BundleError::OwnedCrdMissing { .. }), "{err}");
        assert!(
            err.to_string()
                .contains("etcd.database.coreos.com/v1beta2/EtcdCluster (etcdclusters)"),
            "{err}"
        );
    }
    // A CRD the CSV does not own: a warning only, as upstream.
    for dir in [
        base.join("invalid_bundle_2"),
        f.join("operator-registry/pkg/lib/validation/testdata/invalid_bundle_2"),
    ] {
        let report = report_of(&load_manifests(&dir).unwrap());
        assert!(report.is_valid(), "{report}");
        let warning = report.of(Rule::CrdNotInCsv).next().unwrap();
        assert!(
            warning.message.contains("CRD etcdclusters.etcd.database.coreos.com/v1beta2, Kind=EtcdCluster is present in bundle \"etcdoperator.v0.9.4\" but not defined in CSV"),
            "{warning}"
        );
    }
}

#[test]
fn fixtures_that_need_upstreams_schema_validators_still_read() {
    // Full CSV, CRD and ObjectMeta schema validation (operator-framework/api's
    // validators) is not part of this crate; these fixtures, invalid by those
    // validators, read without error here.
    let Some(f) = fixtures() else { return };
    let base =
        f.join("operator-registry/pkg/lib/bundle/testdata/validate/invalid_manifests_bundle");
    for dir in [
        "invalid_csv",
        "invalid_crd",
        "invalid_sa",
        "invalid_annotation_name",
    ] {
        load_manifests(&base.join(dir)).unwrap_or_else(|e| panic!("{dir}: {e}"));
    }
}

#[test]
fn fbc_fixtures_load_and_validate() {
    let Some(f) = fixtures() else { return };
    let mut dirs = vec![
        f.join("operator-registry/fbc-dir/file-based-catalog"),
        f.join("operator-registry/alpha/action/testdata/list-index"),
        f.join("operator-registry/alpha/action/testdata/foo-index-v0.2.0-declcfg"),
    ];
    for entry in
        std::fs::read_dir(f.join("operator-registry/alpha/action/testdata/index-declcfgs")).unwrap()
    {
        dirs.push(entry.unwrap().path());
    }
    dirs.sort();
    for dir in &dirs {
        let catalog = Catalog::load_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        assert!(!catalog.packages.is_empty(), "{}", dir.display());
        let report = validate_catalog(&catalog);
        assert!(report.is_valid(), "{}:\n{report}", dir.display());
        for warning in report.warnings() {
            if dir.parent().unwrap().ends_with("index-declcfgs") {
                // These repeat a key (`packageName: bar` twice in an
                // olm.package.required value), which upstream reads as the
                // last value.
                assert_eq!(warning.rule, Rule::DuplicateKey, "{warning}");
                assert!(
                    warning.message.starts_with("duplicate key \"packageName\""),
                    "{warning}"
                );
            } else {
                // list-index requires `baz` in range "v0.1.0", which OLM's
                // resolver cannot parse.
                assert!(dir.ends_with("list-index"), "{warning}");
                assert_eq!(warning.rule, Rule::InvalidDependencyRange, "{warning}");
            }
        }
    }
    let mut files = Vec::new();
    for dir in [
        "operator-lifecycle-manager/test/e2e/testdata/magiccatalog",
        "operator-lifecycle-manager/test/e2e/testdata/subscription",
    ] {
        for entry in std::fs::read_dir(f.join(dir)).unwrap() {
            files.push(entry.unwrap().path());
        }
    }
    files.sort();
    let mut with_deprecations = 0;
    for file in &files {
        let catalog = Catalog::load_file(
            &file.display().to_string(),
            &std::fs::read(file).unwrap(),
            &Limits::default(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let report = validate_catalog(&catalog);
        assert!(report.problems.is_empty(), "{}:\n{report}", file.display());
        with_deprecations += usize::from(!catalog.deprecations.is_empty());
    }
    assert_eq!(with_deprecations, 2);
}

#[test]
fn deprecation_fixtures_break_the_rules_when_their_targets_go() {
    let Some(f) = fixtures() else { return };
    let file = f.join("operator-lifecycle-manager/test/e2e/testdata/subscription/example-operator.v0.3.0-deprecations.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    // Deprecate a channel the catalog does not have.
    let broken = text.replace(
        "schema: olm.channel\n      name: stable",
        "schema: olm.channel\n      name: fast",
    );
    assert_ne!(broken, text, "fixture changed shape");
    let catalog =
        Catalog::load_file("deprecations.yaml", broken.as_bytes(), &Limits::default()).unwrap();
    let report = validate_catalog(&catalog);
    assert_eq!(
        report.errors().map(|p| p.rule).collect::<Vec<_>>(),
        [Rule::DeprecationUnknownChannel]
    );
}

#[test]
fn strimzi_min_kube_version_is_read_case_insensitively() {
    // strimzi's CSVs spell `MinKubeVersion`, which upstream's Go decoding
    // accepts; the key is normalised, and the rename is reported.
    let Some(f) = fixtures() else { return };
    let dir = f.join("operator-registry/manifests/strimzi-kafka-operator");
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_str().unwrap();
            name.ends_with(".crd.yaml")
                || name == "strimzi-cluster-operator.v0.12.1.clusterserviceversion.yaml"
        })
        .map(|p| {
            (
                format!("manifests/{}", p.file_name().unwrap().to_str().unwrap()),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    files.push((
        "metadata/annotations.yaml".to_owned(),
        b"annotations:\n  operators.operatorframework.io.bundle.package.v1: strimzi\n  operators.operatorframework.io.bundle.channels.v1: stable\n".to_vec(),
    ));
    let bundle = RegistryBundle::load_files(files, &LoadBundleOptions::new()).unwrap();
    assert_eq!(bundle.csv.spec.min_kube_version.as_deref(), Some("1.11.0"));
    assert!(
        bundle.warnings.iter().any(|w| w
            .to_string()
            .ends_with(r#"spec."MinKubeVersion" read as "minKubeVersion""#)),
        "{:?}",
        bundle.warnings
    );
    assert_eq!(bundle.csv_metadata().min_kube_version, "1.11.0");
}
