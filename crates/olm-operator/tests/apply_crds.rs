//! `olm-operator apply-crds`, the real binary against a real API server
//! (olm-testkit): from a directory laid out like a ConfigMap volume it
//! creates a CRD and waits until it is Established, keeps it on a rerun,
//! replaces it when the file gains a field, refuses to drop a version
//! objects are stored in, applies nothing when one file is bad, and works
//! with exactly the permissions its module documents.
//!
//! The CRDs are test CRDs of their own group, not OLM's, and each test
//! deletes the cluster-scoped objects it made.

// A test binary: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::{
    collections::BTreeMap,
    path::Path,
    process::{Output, Stdio},
    time::Duration,
};

use k8s_openapi::{
    api::{
        core::v1::ServiceAccount,
        rbac::v1::{ClusterRole, ClusterRoleBinding},
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{Api, api::PostParams};
use serde_json::json;

/// The group of every CRD these tests make; no other test uses it.
const GROUP: &str = "applycrds.test.olm-rs.dev";
/// How long a new ClusterRole may take to be enforced.
const RBAC_DEADLINE: Duration = Duration::from_secs(30);
/// A test CRD file: a namespaced kind of [`GROUP`] whose versions each have
/// a `spec` with `properties`.
#[derive(Clone)]
struct TestCrd {
    kind: &'static str,
    /// Every version served, in order.
    versions: Vec<&'static str>,
    /// The one stored.
    storage: &'static str,
    properties: Vec<&'static str>,
    labels: BTreeMap<&'static str, &'static str>,
}

impl TestCrd {
    /// `kind` in version `v1alpha1`, with a `spec.size`.
    fn of_kind(kind: &'static str) -> TestCrd {
        TestCrd {
            kind,
            versions: vec!["v1alpha1"],
            storage: "v1alpha1",
            properties: vec!["size"],
            labels: BTreeMap::from([("app.kubernetes.io/part-of", "sample-chart")]),
        }
    }

    fn with_property(mut self, property: &'static str) -> TestCrd {
        self.properties.push(property);
        self
    }

    fn with_label(mut self, key: &'static str, value: &'static str) -> TestCrd {
        self.labels.insert(key, value);
        self
    }

    fn serving(mut self, versions: &[&'static str], storage: &'static str) -> TestCrd {
        self.versions = versions.to_vec();
        self.storage = storage;
        self
    }

    fn plural(&self) -> String {
        format!("{}s", self.kind.to_lowercase())
    }

    fn name(&self) -> String {
        format!("{}.{GROUP}", self.plural())
    }

    /// The file name the chart would give it.
    fn file_name(&self) -> String {
        format!("{GROUP}_{}.yaml", self.plural())
    }

    fn yaml(&self) -> String {
        let properties: serde_json::Map<String, serde_json::Value> = self
            .properties
            .iter()
            .map(|property| ((*property).to_owned(), json!({ "type": "string" })))
            .collect();
        let versions: Vec<serde_json::Value> = self
            .versions
            .iter()
            .map(|version| {
                json!({
                    "name": version,
                    "served": true,
                    "storage": *version == self.storage,
                    "schema": { "openAPIV3Schema": {
                        "type": "object",
                        "properties": { "spec": { "type": "object", "properties": properties } },
                    } },
                })
            })
            .collect();
        let crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": { "name": self.name(), "labels": self.labels },
            "spec": {
                "group": GROUP,
                "names": { "kind": self.kind, "plural": self.plural() },
                "scope": "Namespaced",
                "versions": versions,
            },
        });
        format!(
            "# A test CRD of apply-crds.\n{}",
            serde_yaml_ng::to_string(&crd).unwrap()
        )
    }
}

/// A directory laid out as the kubelet lays out a ConfigMap volume: each
/// file a link `name -> ..data/name`, `..data` a link to a hidden
/// timestamped directory that is swapped for a new one on every change.
struct Volume {
    dir: tempfile::TempDir,
    generation: usize,
}

impl Volume {
    fn new() -> Volume {
        Volume {
            dir: tempfile::tempdir().unwrap(),
            generation: 0,
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Makes the volume hold exactly `files` (name, content).
    fn holding(&mut self, files: &[(String, String)]) {
        self.generation += 1;
        let data = format!("..2024_01_01_00_00_00.{:09}", self.generation);
        std::fs::create_dir(self.path().join(&data)).unwrap();
        for (name, content) in files {
            std::fs::write(self.path().join(&data).join(name), content).unwrap();
        }
        let link = self.path().join("..data");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&data, &link).unwrap();
        for entry in std::fs::read_dir(self.path()).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().into_string().unwrap();
            if !name.starts_with('.') && !files.iter().any(|(file, _)| *file == name) {
                std::fs::remove_file(entry.path()).unwrap();
            }
        }
        for (name, _) in files {
            let path = self.path().join(name);
            if std::fs::symlink_metadata(&path).is_err() {
                std::os::unix::fs::symlink(Path::new("..data").join(name), path).unwrap();
            }
        }
    }

    /// Makes the volume hold the files of `crds`.
    fn holding_crds(&mut self, crds: &[&TestCrd]) {
        let files: Vec<(String, String)> = crds
            .iter()
            .map(|crd| (crd.file_name(), crd.yaml()))
            .collect();
        self.holding(&files);
    }
}

/// Cluster-scoped objects (`kind/name`, as kubectl names them) a test made,
/// deleted when it ends, even when it fails.
struct Cleanup(Vec<String>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for object in &self.0 {
            let deleted = olm_testkit::control_plane()
                .kubectl()
                .args(["delete", object, "--ignore-not-found", "--wait=false"])
                .output();
            if !deleted.is_ok_and(|output| output.status.success()) {
                eprintln!("could not delete {object}");
            }
        }
    }
}

/// Runs `olm-operator apply-crds --dir dir` with `kubeconfig`, with nothing
/// taken from this process's environment.
async fn apply_crds(kubeconfig: &Path, dir: &Path) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_olm-operator"))
        .arg("apply-crds")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--dir")
        .arg(dir)
        .args(["--timeout", "30s"])
        .env_clear()
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap()
}

/// The `customresourcedefinition/<name> <outcome>` lines of a successful
/// run, by name.
fn outcomes(output: &Output) -> BTreeMap<String, String> {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "apply-crds failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    stdout
        .lines()
        .filter_map(|line| line.strip_prefix("customresourcedefinition/"))
        .map(|line| {
            let (name, outcome) = line.split_once(' ').unwrap();
            (name.to_owned(), outcome.to_owned())
        })
        .collect()
}

/// `outcome` for `crd` alone.
fn only(crd: &TestCrd, outcome: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(crd.name(), outcome.to_owned())])
}

/// The standard error of a failed run.
fn failure(output: &Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        !output.status.success(),
        "apply-crds succeeded:\n{}\n{stderr}",
        String::from_utf8_lossy(&output.stdout)
    );
    stderr
}

fn is_true(crd: &CustomResourceDefinition, condition: &str) -> bool {
    crd.status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == condition && c.status == "True")
        })
}

/// The properties of `spec` in `version` of the live CRD.
fn spec_properties(crd: &CustomResourceDefinition, version: &str) -> Vec<String> {
    let version = crd
        .spec
        .versions
        .iter()
        .find(|v| v.name == version)
        .unwrap();
    let schema = version.schema.as_ref().unwrap();
    let root = schema.open_api_v3_schema.as_ref().unwrap();
    let spec = &root.properties.as_ref().unwrap()["spec"];
    spec.properties.as_ref().unwrap().keys().cloned().collect()
}

fn stored_versions(crd: &CustomResourceDefinition) -> Vec<String> {
    crd.status
        .as_ref()
        .and_then(|status| status.stored_versions.clone())
        .unwrap_or_default()
}

#[tokio::test]
async fn creates_keeps_replaces_and_refuses_to_strand_a_stored_version() {
    let plane = olm_testkit::control_plane();
    let client = plane.client().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let kubeconfig = plane.kubeconfig_path();
    let widgets = TestCrd::of_kind("Widget");
    let bad_neighbour = TestCrd::of_kind("Sprocket");
    let _cleanup = Cleanup(vec![
        format!("crd/{}", widgets.name()),
        format!("crd/{}", bad_neighbour.name()),
    ]);
    let mut volume = Volume::new();

    // Created, and Established by the time the run says so.
    volume.holding_crds(&[&widgets]);
    let first = apply_crds(kubeconfig, volume.path()).await;
    assert_eq!(outcomes(&first), only(&widgets, "created"));
    let created = crds.get(&widgets.name()).await.unwrap();
    assert!(is_true(&created, "Established"), "{:?}", created.status);
    assert!(is_true(&created, "NamesAccepted"), "{:?}", created.status);
    assert_eq!(
        created.metadata.labels.as_ref().unwrap()["app.kubernetes.io/part-of"],
        "sample-chart"
    );

    // A rerun writes nothing: the server's defaults are not a difference.
    let rerun = apply_crds(kubeconfig, volume.path()).await;
    assert_eq!(outcomes(&rerun), only(&widgets, "kept"));
    let kept = crds.get(&widgets.name()).await.unwrap();
    assert_eq!(
        kept.metadata.resource_version,
        created.metadata.resource_version
    );

    // Someone labels the live CRD; the chart then adds a field and a label.
    let mut labelled = kept.clone();
    labelled
        .metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert("sample.test/owner".to_owned(), "sample-team".to_owned());
    crds.replace(&widgets.name(), &PostParams::default(), &labelled)
        .await
        .unwrap();
    let coloured = widgets
        .clone()
        .with_property("colour")
        .with_label("app.kubernetes.io/version", "sample-2");
    volume.holding_crds(&[&coloured]);
    let replace = apply_crds(kubeconfig, volume.path()).await;
    assert_eq!(outcomes(&replace), only(&widgets, "replaced"));
    let replaced = crds.get(&widgets.name()).await.unwrap();
    assert_eq!(spec_properties(&replaced, "v1alpha1"), ["colour", "size"]);
    let labels = replaced.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["sample.test/owner"], "sample-team");
    assert_eq!(labels["app.kubernetes.io/version"], "sample-2");
    assert_eq!(replaced.metadata.uid, created.metadata.uid);
    assert!(is_true(&replaced, "Established"));

    // A new storage version beside the old one: both are stored now.
    let promoted = coloured.clone().serving(&["v1alpha1", "v1"], "v1");
    volume.holding_crds(&[&promoted]);
    let promote = apply_crds(kubeconfig, volume.path()).await;
    assert_eq!(outcomes(&promote), only(&widgets, "replaced"));
    let both = crds.get(&widgets.name()).await.unwrap();
    assert_eq!(stored_versions(&both), ["v1alpha1", "v1"]);

    // Dropping v1alpha1 would strand what is stored in it: refused, and
    // the CRD stays as it was.
    let dropped = promoted.clone().serving(&["v1"], "v1");
    volume.holding_crds(&[&dropped]);
    let refused = apply_crds(kubeconfig, volume.path()).await;
    let stderr = failure(&refused);
    assert!(
        stderr.contains(&format!(
            "refusing to replace customresourcedefinition/{}: stored versions v1alpha1 are missing from spec.versions",
            widgets.name()
        )),
        "{stderr}"
    );
    let unchanged = crds.get(&widgets.name()).await.unwrap();
    assert_eq!(
        unchanged.metadata.resource_version,
        both.metadata.resource_version
    );

    // One bad file: nothing is applied, not even the good CRD beside it.
    volume.holding(&[
        (bad_neighbour.file_name(), bad_neighbour.yaml()),
        (
            "sample-bad.yaml".to_owned(),
            format!("{}---\n{}", bad_neighbour.yaml(), promoted.yaml()),
        ),
        (promoted.file_name(), promoted.yaml()),
    ]);
    let bad = apply_crds(kubeconfig, volume.path()).await;
    let stderr = failure(&bad);
    assert!(
        stderr.contains("sample-bad.yaml holds 2 YAML documents"),
        "{stderr}"
    );
    assert_eq!(crds.get_opt(&bad_neighbour.name()).await.unwrap(), None);
    let untouched = crds.get(&widgets.name()).await.unwrap();
    assert_eq!(
        untouched.metadata.resource_version,
        both.metadata.resource_version
    );
}

#[tokio::test]
async fn the_documented_permissions_suffice_and_a_refusal_names_the_crd_and_verb() {
    let plane = olm_testkit::control_plane();
    let ns = plane.namespace("apply-crds-rbac").await;
    let client = plane.client().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let gadgets = TestCrd::of_kind("Gadget");
    let unlisted = TestCrd::of_kind("Gimmick");
    // The Job's account, bound to exactly the rules the module documents,
    // with `get` and `update` limited to the chart's CRD.
    let job = format!("{}-crd-job", ns.name());
    let _cleanup = Cleanup(vec![
        format!("crd/{}", gadgets.name()),
        format!("crd/{}", unlisted.name()),
        format!("clusterrolebinding/{job}"),
        format!("clusterrole/{job}"),
    ]);
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), ns.name());
    let account = serde_json::from_value(json!({ "metadata": { "name": job } })).unwrap();
    accounts
        .create(&PostParams::default(), &account)
        .await
        .unwrap();
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let role = serde_json::from_value(json!({
        "metadata": { "name": job },
        "rules": [
            {
                "apiGroups": ["apiextensions.k8s.io"],
                "resources": ["customresourcedefinitions"],
                "resourceNames": [gadgets.name()],
                "verbs": ["get", "update"],
            },
            {
                "apiGroups": ["apiextensions.k8s.io"],
                "resources": ["customresourcedefinitions"],
                "verbs": ["create"],
            },
        ],
    }))
    .unwrap();
    roles.create(&PostParams::default(), &role).await.unwrap();
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    let binding = serde_json::from_value(json!({
        "metadata": { "name": job },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": job },
        "subjects": [{ "kind": "ServiceAccount", "name": job, "namespace": ns.name() }],
    }))
    .unwrap();
    bindings
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let job_kubeconfig = olm_testkit::control_plane()
        .service_account_kubeconfig(ns.name(), &job, dir.path())
        .await
        .unwrap();
    let as_job: Api<CustomResourceDefinition> = Api::all(
        olm_testkit::ControlPlane::client_from(&job_kubeconfig)
            .await
            .unwrap(),
    );
    let started = tokio::time::Instant::now();
    while as_job.get_opt(&gadgets.name()).await.is_err() {
        assert!(
            started.elapsed() < RBAC_DEADLINE,
            "the ClusterRole of {job} not enforced within {RBAC_DEADLINE:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let mut volume = Volume::new();
    volume.holding_crds(&[&gadgets]);
    let create = apply_crds(&job_kubeconfig, volume.path()).await;
    assert_eq!(outcomes(&create), only(&gadgets, "created"));
    let kept = apply_crds(&job_kubeconfig, volume.path()).await;
    assert_eq!(outcomes(&kept), only(&gadgets, "kept"));
    volume.holding_crds(&[&gadgets.clone().with_property("colour")]);
    let replace = apply_crds(&job_kubeconfig, volume.path()).await;
    assert_eq!(outcomes(&replace), only(&gadgets, "replaced"));
    let replaced = crds.get(&gadgets.name()).await.unwrap();
    assert_eq!(spec_properties(&replaced, "v1alpha1"), ["colour", "size"]);

    // A CRD outside resourceNames cannot even be read: the run says which
    // permission it lacks, and writes nothing.
    volume.holding_crds(&[&gadgets, &unlisted]);
    let refused = apply_crds(&job_kubeconfig, volume.path()).await;
    let stderr = failure(&refused);
    let expected = format!(
        "forbidden to get customresourcedefinition/{}: this needs `get` on customresourcedefinitions.apiextensions.k8s.io",
        unlisted.name()
    );
    assert!(stderr.contains(&expected), "{stderr}");
    let unchanged = crds.get(&gadgets.name()).await.unwrap();
    assert_eq!(
        unchanged.metadata.resource_version,
        replaced.metadata.resource_version
    );
    assert_eq!(crds.get_opt(&unlisted.name()).await.unwrap(), None);
}
