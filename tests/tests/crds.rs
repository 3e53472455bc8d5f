//! OLM's CRDs against a real kube-apiserver: `kubectl apply` accepts them,
//! `kubectl get csv` shows upstream's columns, and every ClusterServiceVersion
//! in the shared corpus is stored exactly as upstream's own CRD would store it.
//!
//! The last check is differential: upstream's CRD YAML is installed under a
//! private group (`upstream-oracle.olm.test`) beside ours, each CSV is created
//! through both, and what the API server hands back must be identical. Any
//! field our schema prunes or rejects that upstream's keeps is a failure.

// Helpers of a test binary: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::{collections::BTreeMap, path::Path, process::Output};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api,
    api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams},
};
use olm_api::csv::ClusterServiceVersion;
use olm_e2e::{files_ending_with, read_yaml, testdata, workspace_root};
use serde_json::Value;
use tokio::sync::OnceCell;

const ORACLE_GROUP: &str = "upstream-oracle.olm.test";

/// Installs our CRDs with `kubectl apply` (as a user would, from the checked-in
/// files) and upstream's CSV CRD under the oracle group, once per test binary.
async fn installed() {
    static INSTALLED: OnceCell<()> = OnceCell::const_new();
    INSTALLED
        .get_or_init(|| async {
            olm_testkit::control_plane().install_crds(&workspace_root().join("deploy/crds"));
        })
        .await;
}

fn assert_success(what: &str, output: &Output) {
    assert!(
        output.status.success(),
        "{what} failed: {}\n{}",
        String::from_utf8_lossy(&output.stderr),
        String::from_utf8_lossy(&output.stdout)
    );
}

#[tokio::test]
async fn kubectl_lists_every_olm_crd() {
    installed().await;
    let plane = olm_testkit::control_plane();
    let output = plane
        .kubectl()
        .args(["get", "crd", "-o", "name"])
        .output()
        .unwrap();
    assert_success("kubectl get crd", &output);
    let listed = String::from_utf8_lossy(&output.stdout);
    for crd in olm_api::crd::all() {
        let name = crd.metadata.name.unwrap();
        assert!(
            listed.contains(&format!(
                "customresourcedefinition.apiextensions.k8s.io/{name}"
            )),
            "{name} missing from:\n{listed}"
        );
    }
    for short in ["csv", "catsrc", "sub", "ip", "og"] {
        let output = plane.kubectl().args(["get", short, "-A"]).output().unwrap();
        assert_success(&format!("kubectl get {short}"), &output);
    }
}

#[tokio::test]
async fn kubectl_apply_of_a_real_csv_shows_upstream_columns() {
    let Some(testdata) = testdata() else { return };
    installed().await;
    let plane = olm_testkit::control_plane();
    let namespace = plane.namespace("e2e-kubectl-csv").await;
    let csv =
        testdata.join("bundles/kube-green/0.7.1/manifests/kube-green.clusterserviceversion.yaml");
    let fallback = files_ending_with(
        &testdata.join("bundles/kube-green"),
        ".clusterserviceversion.yaml",
    );
    let csv = if csv.exists() {
        csv
    } else {
        fallback.last().expect("a kube-green CSV").clone()
    };
    // Bundle CSVs name a placeholder namespace; kubectl refuses a mismatch,
    // so the test applies a copy without it, as a user would edit it.
    let mut document = read_yaml(&csv).unwrap();
    document["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("namespace");
    let scratch = tempfile::tempdir().unwrap();
    let copy = scratch.path().join("csv.yaml");
    std::fs::write(&copy, serde_yaml_ng::to_string(&document).unwrap()).unwrap();
    let output = plane
        .kubectl()
        .args(["apply", "-n", namespace.name(), "-f"])
        .arg(&copy)
        .output()
        .unwrap();
    assert_success(&format!("kubectl apply -f {}", csv.display()), &output);

    let output = plane
        .kubectl()
        .args(["get", "csv", "-n", namespace.name()])
        .output()
        .unwrap();
    assert_success("kubectl get csv", &output);
    let table = String::from_utf8_lossy(&output.stdout);
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    let mut expected = vec!["NAME".to_owned()];
    expected.extend(upstream_columns(
        &testdata.join("crds/operators.coreos.com_clusterserviceversions.yaml"),
    ));
    assert_eq!(header, expected, "kubectl get csv header:\n{table}");

    let row = table.lines().nth(1).unwrap_or_default();
    let name = document["metadata"]["name"].as_str().unwrap();
    let version = document["spec"]["version"].as_str().unwrap();
    assert!(row.starts_with(name), "row {row:?}");
    assert!(row.contains(version), "row {row:?} lacks version {version}");
}

/// Upstream's printer-column names, upper-cased as kubectl prints them.
fn upstream_columns(crd: &Path) -> Vec<String> {
    let crd = read_yaml(crd).unwrap();
    crd["spec"]["versions"][0]["additionalPrinterColumns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|column| column["name"].as_str().unwrap().to_uppercase())
        .collect()
}

/// Upstream's CSV CRD, moved to the oracle group so it can sit beside ours.
fn oracle_crd(testdata: &Path) -> CustomResourceDefinition {
    let mut crd =
        read_yaml(&testdata.join("crds/operators.coreos.com_clusterserviceversions.yaml")).unwrap();
    crd["metadata"] =
        serde_json::json!({ "name": format!("clusterserviceversions.{ORACLE_GROUP}") });
    crd["spec"]["group"] = Value::from(ORACLE_GROUP);
    // Short names and categories are cluster-wide; the oracle must not steal them.
    crd["spec"]["names"]
        .as_object_mut()
        .unwrap()
        .retain(|key, _| !matches!(key.as_str(), "shortNames" | "categories"));
    serde_json::from_value(crd).unwrap()
}

fn csv_resource(group: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, "v1alpha1", "ClusterServiceVersion"),
        "clusterserviceversions",
    )
}

/// What the API server stored, minus the fields it assigns itself.
fn stored(object: DynamicObject) -> Value {
    let mut value = serde_json::to_value(object).unwrap();
    let metadata = value["metadata"].as_object_mut().unwrap();
    for server_field in [
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "generation",
        "managedFields",
        "namespace",
        "selfLink",
    ] {
        metadata.remove(server_field);
    }
    value.as_object_mut().unwrap().remove("apiVersion");
    value
}

#[tokio::test]
async fn every_corpus_csv_is_stored_as_upstream_stores_it() {
    let Some(testdata) = testdata() else { return };
    installed().await;
    let plane = olm_testkit::control_plane();
    let client = plane.client().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let oracle = oracle_crd(&testdata);
    crds.patch(
        oracle.metadata.name.as_deref().unwrap(),
        &PatchParams::apply("olm-e2e").force(),
        &Patch::Apply(&oracle),
    )
    .await
    .unwrap();
    plane.wait_crd_established(oracle.metadata.name.as_deref().unwrap());

    let namespace = plane.namespace("e2e-corpus-csv").await;
    let ours: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        namespace.name(),
        &csv_resource("operators.coreos.com"),
    );
    let upstream: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        namespace.name(),
        &csv_resource(ORACLE_GROUP),
    );

    let mut files = files_ending_with(&testdata.join("bundles"), ".clusterserviceversion.yaml");
    files.extend(files_ending_with(
        &testdata.join("packagemanifests"),
        ".clusterserviceversion.yaml",
    ));
    assert!(files.len() > 400, "only {} CSV files found", files.len());

    let mut checked = 0;
    let mut rejected_by_both = 0;
    let mut failures: BTreeMap<String, String> = BTreeMap::new();
    for (index, file) in files.iter().enumerate() {
        let relative = file.strip_prefix(&testdata).unwrap().display().to_string();
        let Ok(document) = read_yaml(file) else {
            failures.insert(relative, "unreadable YAML".to_owned());
            continue;
        };
        // What catalog-operator will create: the CSV as our typed model
        // writes it (required fields Go would write empty are present).
        let mut typed: ClusterServiceVersion = match serde_json::from_value(document) {
            Ok(typed) => typed,
            Err(err) => {
                failures.insert(relative, format!("not readable as a CSV: {err}"));
                continue;
            }
        };
        // Distinct names: several corpus files share a CSV name.
        typed.metadata.name = Some(format!("corpus-{index}"));
        typed.metadata.namespace = None;
        let document = serde_json::to_value(&typed).unwrap();
        let mut submitted = document.clone();
        submitted.as_object_mut().unwrap().remove("apiVersion");
        let mut as_ours = document.clone();
        as_ours["apiVersion"] = Value::from("operators.coreos.com/v1alpha1");
        let mut as_upstream = document;
        as_upstream["apiVersion"] = Value::from(format!("{ORACLE_GROUP}/v1alpha1"));

        let ours_created = ours
            .create(
                &PostParams::default(),
                &serde_json::from_value(as_ours).unwrap(),
            )
            .await;
        let upstream_created = upstream
            .create(
                &PostParams::default(),
                &serde_json::from_value(as_upstream).unwrap(),
            )
            .await;
        match (ours_created, upstream_created) {
            (Ok(ours), Ok(theirs)) => {
                let (ours, theirs) = (stored(ours), stored(theirs));
                if ours != theirs {
                    failures.insert(relative, first_difference(&ours, &theirs, String::new()));
                } else if let Some(pruned) = first_pruned(&submitted, &ours, String::new()) {
                    failures.insert(relative, format!("{pruned} was pruned by both"));
                }
                checked += 1;
            }
            (Err(ours), Err(theirs)) => {
                rejected_by_both += 1;
                failures.insert(
                    relative,
                    format!("rejected by both:\n    ours: {ours}\n    upstream: {theirs}"),
                );
            }
            (Err(err), Ok(_)) => {
                failures.insert(relative, format!("rejected by ours only: {err}"));
            }
            (Ok(_), Err(err)) => {
                failures.insert(relative, format!("rejected by upstream only: {err}"));
            }
        }
    }
    println!(
        "{} CSV files: {checked} stored identically, {rejected_by_both} rejected by both, {} differ",
        files.len(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "CSVs stored differently from upstream's CRD:\n{}",
        failures
            .iter()
            .map(|(file, problem)| format!("  {file}: {problem}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_eq!(rejected_by_both, 0);
    assert!(checked > 400, "only {checked} CSVs were compared");
}

/// The first field of `submitted` that `stored` lacks (values may differ:
/// the API server applies schema defaults, but must not drop a field).
fn first_pruned(submitted: &Value, stored: &Value, pointer: String) -> Option<String> {
    match (submitted, stored) {
        (Value::Object(a), Value::Object(b)) => a.iter().find_map(|(key, value)| {
            let path = format!("{pointer}/{key}");
            match b.get(key) {
                None if !value.is_null() => Some(path),
                None => None,
                Some(kept) => first_pruned(value, kept, path),
            }
        }),
        (Value::Array(a), Value::Array(b)) => {
            if a.len() != b.len() {
                return Some(format!("{pointer} (length {} became {})", a.len(), b.len()));
            }
            a.iter()
                .zip(b)
                .enumerate()
                .find_map(|(index, (x, y))| first_pruned(x, y, format!("{pointer}/{index}")))
        }
        _ => None,
    }
}

/// The JSON pointer and both values at the first place two documents differ.
fn first_difference(ours: &Value, theirs: &Value, pointer: String) -> String {
    match (ours, theirs) {
        (Value::Object(a), Value::Object(b)) => {
            for key in a.keys().chain(b.keys()) {
                let path = format!("{pointer}/{key}");
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) if x != y => return first_difference(x, y, path),
                    (Some(_), None) => return format!("{path}: only ours kept it"),
                    (None, Some(y)) => return format!("{path}: pruned by ours, upstream kept {y}"),
                    _ => {}
                }
            }
            format!("{pointer}: differ")
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (index, (x, y)) in a.iter().zip(b).enumerate() {
                if x != y {
                    return first_difference(x, y, format!("{pointer}/{index}"));
                }
            }
            format!("{pointer}: differ")
        }
        _ => format!("{pointer}: ours {ours}, upstream {theirs}"),
    }
}
