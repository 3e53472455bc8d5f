//! Differential test: the RBAC InstallPlan steps of every CSV in the corpus
//! (`../shared/testdata/bundles`), ours against upstream OLM's (v0.46.0's
//! `NewServiceAccountStepResources`, through the harness in
//! `xtask/upstream/resolver/rbac`). Kinds, names, `olm.permissions.hash`
//! labels, owner references, rules, subjects and role references must be
//! upstream's; names and hashes are a lookup contract (olm-operator finds
//! the RBAC again by them).
//!
//! The differences that are deliberate, and normalised away here:
//! - our manifests carry `apiVersion` and `kind` (upstream's leave them to
//!   the step's group, version and kind);
//! - ours carry `olm.managed=true` already (upstream adds it when it applies
//!   the step);
//! - a ServiceAccount that has only `clusterPermissions` gets the CSV's
//!   namespace (upstream leaves it out and fills it in when it applies);
//! - upstream's ClusterRoleBindings carry the CSV's namespace, which a
//!   cluster-scoped object cannot have (the API server drops it); ours do
//!   not;
//! - a CSV whose `apiVersion` is misspelled in its bundle
//!   (service-binding-operator 0.10.0 says
//!   `binding.operators.coreos.com/v1alpha1`): upstream copies it into the
//!   ownerReferences, pointing the garbage collector at an API that does
//!   not exist; ours name `operators.coreos.com/v1alpha1`, where the CSV
//!   is created;
//! - the order of service accounts: ours by name, upstream's by Go map
//!   iteration, which changes per run. Steps are compared sorted.
//!
//! `cargo xtask conformance` builds the harness and runs this test;
//! `OLM_UPSTREAM_RBAC` names another build. Without either it prints why
//! and passes (CI does not build upstream).
#![allow(clippy::unwrap_used)]

use std::{path::PathBuf, process::Command};

use olm_catalog::bundle::{LoadBundleOptions, Payload, RegistryBundle};
use olm_plan::steps::{self, BundleSource};
use serde_json::Value;

const NAMESPACE: &str = "operators";

/// One step, comparable: kind, group, version, name and the manifest with
/// the deliberate differences taken out.
type Comparable = (String, String, String, String, Value);

fn normalise(kind: &str, manifest: &str) -> Value {
    let mut value: Value = serde_json::from_str(manifest).unwrap();
    let object = value.as_object_mut().unwrap();
    object.remove("apiVersion");
    object.remove("kind");
    let metadata = object
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
        .unwrap();
    for owner in metadata
        .get_mut("ownerReferences")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if owner["kind"] == "ClusterServiceVersion" {
            owner["apiVersion"] = Value::from(olm_api::ownership::CSV_API_VERSION);
        }
    }
    if let Some(labels) = metadata.get_mut("labels").and_then(Value::as_object_mut) {
        labels.remove("olm.managed");
        if labels.is_empty() {
            metadata.remove("labels");
        }
    }
    if kind == "ServiceAccount" || kind == "ClusterRoleBinding" {
        metadata.remove("namespace");
    }
    value
}

fn csv_files() -> Vec<(PathBuf, PathBuf)> {
    let testdata = olm_testkit::testdata().unwrap();
    let mut found = Vec::new();
    for package in std::fs::read_dir(testdata.join("bundles")).unwrap() {
        let package = package.unwrap().path();
        for version in std::fs::read_dir(&package).unwrap() {
            let bundle = version.unwrap().path();
            let Ok(manifests) = std::fs::read_dir(bundle.join("manifests")) else {
                continue;
            };
            for file in manifests {
                let file = file.unwrap().path();
                let name = file.file_name().unwrap().to_string_lossy().into_owned();
                if name.contains("clusterserviceversion") {
                    found.push((bundle.clone(), file));
                }
            }
        }
    }
    found.sort();
    found
}

#[test]
fn rbac_steps_are_upstreams_for_every_corpus_csv() {
    let Some(harness) = olm_testkit::assets::upstream_or_skip(
        olm_testkit::assets::upstream_rbac(),
        "the differential test of RBAC steps against upstream OLM",
    ) else {
        return;
    };
    if olm_testkit::testdata().is_none() {
        return;
    }
    let files = csv_files();
    assert!(files.len() > 50, "corpus CSVs: {}", files.len());
    let output = Command::new(&harness)
        .arg(format!("--namespace={NAMESPACE}"))
        .args(files.iter().map(|(_, csv)| csv))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let answers: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(answers.len(), files.len());
    let source = BundleSource {
        catalog: String::new(),
        catalog_namespace: String::new(),
    };
    let (mut compared, mut steps_seen) = (0, 0);
    for ((bundle_dir, csv_file), answer) in files.iter().zip(&answers) {
        let upstream_error = answer["error"].as_str().unwrap();
        let bundle = RegistryBundle::load_dir_with(bundle_dir, &LoadBundleOptions::new());
        let Ok(bundle) = bundle else {
            // A bundle our loader refuses never reaches a plan; upstream's
            // CSV reader must have refused it too, or it has no RBAC.
            continue;
        };
        let fbc = bundle.to_fbc_bundle("example.test/bundle:v1", Payload::BundleObjects);
        let csv_json = fbc.csv_json().unwrap().unwrap_or_default();
        let mut csv: olm_api::csv::ClusterServiceVersion = serde_json::from_str(&csv_json).unwrap();
        csv.metadata.namespace = Some(NAMESPACE.to_owned());
        let ours = steps::rbac_steps(&csv, &source);
        if !upstream_error.is_empty() {
            assert!(
                ours.is_empty(),
                "{}: upstream refused ({upstream_error}); we planned {} RBAC steps",
                csv_file.display(),
                ours.len()
            );
            continue;
        }
        let mut ours: Vec<Comparable> = ours
            .iter()
            .map(|s| {
                (
                    s.resource.kind.clone(),
                    s.resource.group.clone(),
                    s.resource.version.clone(),
                    s.resource.name.clone(),
                    normalise(
                        &s.resource.kind,
                        s.resource.manifest.as_deref().unwrap_or_default(),
                    ),
                )
            })
            .collect();
        let mut theirs: Vec<Comparable> = answer["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                let text = |key: &str| s[key].as_str().unwrap().to_owned();
                (
                    text("kind"),
                    text("group"),
                    text("version"),
                    text("name"),
                    normalise(&text("kind"), &text("manifest")),
                )
            })
            .collect();
        ours.sort_by(|a, b| (&a.0, &a.3).cmp(&(&b.0, &b.3)));
        theirs.sort_by(|a, b| (&a.0, &a.3).cmp(&(&b.0, &b.3)));
        let names = |steps: &[Comparable]| -> Vec<String> {
            steps.iter().map(|s| format!("{} {}", s.0, s.3)).collect()
        };
        assert_eq!(names(&ours), names(&theirs), "{}", csv_file.display());
        for (mine, upstream) in ours.iter().zip(&theirs) {
            assert_eq!(
                mine.4,
                upstream.4,
                "{}: {} {}\nours:     {}\nupstream: {}",
                csv_file.display(),
                mine.0,
                mine.3,
                mine.4,
                upstream.4
            );
        }
        compared += 1;
        steps_seen += ours.len();
    }
    println!(
        "{compared} of {} corpus CSVs give upstream's RBAC steps ({steps_seen} steps)",
        files.len()
    );
    assert!(compared * 10 >= files.len() * 9, "compared {compared}");
}
