//! A resolved bundle becomes InstallPlan steps: the CSV first (with
//! `replaces` and the resolved properties), then the other objects, then
//! the RBAC of its install strategy.
#![allow(clippy::unwrap_used)]

use olm_catalog::bundle::{LoadBundleOptions, Payload, RegistryBundle};
use olm_plan::steps::{self, BundleContent, BundleSource, StepsError};

fn source() -> BundleSource {
    BundleSource {
        catalog: "community".into(),
        catalog_namespace: "olm".into(),
    }
}

fn manifest(api_version: &str, kind: &str, name: &str) -> String {
    serde_json::json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}})
        .to_string()
}

#[test]
fn the_csv_comes_first_then_the_bundle_order() {
    let bundle = BundleContent {
        csv_name: "etcd.v2".into(),
        csv_json: String::new(),
        objects: vec![
            manifest(
                "apiextensions.k8s.io/v1",
                "CustomResourceDefinition",
                "etcds.example.com",
            ),
            manifest(
                "operators.coreos.com/v1alpha1",
                "ClusterServiceVersion",
                "etcd.v2",
            ),
            manifest("v1", "Secret", "token"),
            manifest("v1", "ConfigMap", "settings"),
        ],
    };
    let steps = steps::steps_for_bundle(
        &bundle,
        &source(),
        "operators",
        Some("etcd.v1"),
        Some(r#"{"properties":[]}"#),
    )
    .unwrap();
    let kinds: Vec<_> = steps
        .iter()
        .map(|s| (s.resource.kind.as_str(), s.resource.name.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("ClusterServiceVersion", "etcd.v2"),
            ("CustomResourceDefinition", "etcds.example.com"),
            ("BundleSecret", "token"),
            ("ConfigMap", "settings"),
        ]
    );
    let csv: serde_json::Value =
        serde_json::from_str(steps[0].resource.manifest.as_deref().unwrap()).unwrap();
    assert_eq!(csv["spec"]["replaces"], "etcd.v1");
    assert_eq!(
        csv["metadata"]["annotations"]["operatorframework.io/properties"],
        r#"{"properties":[]}"#
    );
    for step in &steps {
        assert_eq!(step.resolving, "etcd.v2");
        assert_eq!(step.status.as_str(), "Unknown");
        assert_eq!(
            (
                step.resource.catalog_source.as_str(),
                step.resource.catalog_source_namespace.as_str()
            ),
            ("community", "olm")
        );
    }
    assert_eq!(
        (
            steps[1].resource.group.as_str(),
            steps[1].resource.version.as_str()
        ),
        ("apiextensions.k8s.io", "v1")
    );
    assert_eq!(
        (
            steps[3].resource.group.as_str(),
            steps[3].resource.version.as_str()
        ),
        ("", "v1")
    );
}

#[test]
fn csv_json_wins_and_replaces_is_only_set_for_upgrades() {
    let bundle = BundleContent {
        csv_name: "etcd.v1".into(),
        csv_json: manifest(
            "operators.coreos.com/v1alpha1",
            "ClusterServiceVersion",
            "etcd.v1",
        ),
        objects: vec![],
    };
    let steps = steps::steps_for_bundle(&bundle, &source(), "operators", None, None).unwrap();
    assert_eq!(steps.len(), 1);
    let csv: serde_json::Value =
        serde_json::from_str(steps[0].resource.manifest.as_deref().unwrap()).unwrap();
    assert!(csv["spec"].get("replaces").is_none());
}

#[test]
fn malformed_bundles_are_refused_with_the_position() {
    let cases = [
        (vec!["not json".to_owned()], "manifest 0"),
        (vec!["[1,2]".to_owned()], "not a JSON object"),
        (
            vec![r#"{"kind":"ConfigMap","metadata":{"name":"x"}}"#.to_owned()],
            "apiVersion is missing",
        ),
        (
            vec![r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{}}"#.to_owned()],
            "metadata.name is missing",
        ),
    ];
    for (objects, want) in cases {
        let bundle = BundleContent {
            csv_name: "x.v1".into(),
            csv_json: String::new(),
            objects,
        };
        let error =
            steps::steps_for_bundle(&bundle, &source(), "operators", None, None).unwrap_err();
        assert!(error.to_string().contains(want), "{error}");
    }
    let no_csv = BundleContent {
        csv_name: "x.v1".into(),
        csv_json: String::new(),
        objects: vec![manifest("v1", "ConfigMap", "c")],
    };
    assert_eq!(
        steps::steps_for_bundle(&no_csv, &source(), "operators", None, None),
        Err(StepsError::NoCsv { csv: "x.v1".into() })
    );
}

#[test]
fn a_real_bundle_becomes_steps() {
    let Some(testdata) = olm_testkit::testdata() else {
        return;
    };
    let bundle = RegistryBundle::load_dir_with(
        testdata.join("bundles/etcd/0.9.4"),
        &LoadBundleOptions::new(),
    )
    .unwrap();
    let fbc = bundle.to_fbc_bundle("quay.io/example/etcd-bundle:0.9.4", Payload::BundleObjects);
    let content = BundleContent {
        csv_name: fbc.name.clone(),
        csv_json: fbc.csv_json().unwrap().unwrap_or_default(),
        objects: fbc.objects().unwrap(),
    };
    let steps = steps::steps_for_bundle(
        &content,
        &source(),
        "operators",
        Some("etcdoperator.v0.9.2"),
        None,
    )
    .unwrap();
    let kinds: Vec<_> = steps.iter().map(|s| s.resource.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "ClusterServiceVersion",
            "CustomResourceDefinition",
            "CustomResourceDefinition",
            "CustomResourceDefinition",
            "ServiceAccount",
            "Role",
            "RoleBinding"
        ]
    );
    // The RBAC steps are named and labelled as upstream OLM v0.46.0 names
    // them for this CSV in `operators` (values printed by its
    // NewServiceAccountStepResources; `cargo xtask conformance` compares
    // every corpus CSV).
    let role_name = "etcdoperator.v0.9.4-etcd-1fPZ7OPuFW00B7hEHE0e67u7RQT89YSOavY623";
    assert_eq!(steps[4].resource.name, "etcd-operator");
    assert_eq!(steps[5].resource.name, role_name);
    assert_eq!(steps[6].resource.name, role_name);
    assert_eq!(
        (
            steps[5].resource.group.as_str(),
            steps[5].resource.version.as_str()
        ),
        ("rbac.authorization.k8s.io", "v1")
    );
    let label = |index: usize| -> serde_json::Value {
        let manifest: serde_json::Value =
            serde_json::from_str(steps[index].resource.manifest.as_deref().unwrap()).unwrap();
        manifest["metadata"]["labels"]["olm.permissions.hash"].clone()
    };
    assert_eq!(label(5), "2yopnz5NTItaVA9ySSXhLaM94ZfQ5fhp6RSIHH");
    assert_eq!(label(6), "cOaztjcJL74WdLG6959EG4lJMXeAabNOeqx87a");
    assert_eq!(steps[0].resource.name, "etcdoperator.v0.9.4");
    // The bundle leaves out `name` of its owned CRD's resources, which the
    // CSV CRD requires: the step carries it empty, as upstream writes it.
    let csv: serde_json::Value =
        serde_json::from_str(steps[0].resource.manifest.as_deref().unwrap()).unwrap();
    let resources = &csv["spec"]["customresourcedefinitions"]["owned"][0]["resources"];
    assert_eq!(
        resources,
        &serde_json::json!([
            {"name": "", "kind": "Service", "version": "v1"},
            {"name": "", "kind": "Pod", "version": "v1"}
        ])
    );
    // Nothing else is lost on the way; the CSV names its namespace.
    assert_eq!(csv["metadata"]["namespace"], "operators");
    assert_eq!(csv["spec"]["replaces"], "etcdoperator.v0.9.2");
    assert_eq!(
        csv["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert!(
        csv["metadata"]["annotations"]["alm-examples"]
            .as_str()
            .unwrap()
            .contains("EtcdCluster")
    );
    let mut crds: Vec<_> = steps[1..4]
        .iter()
        .map(|s| s.resource.name.clone())
        .collect();
    crds.sort();
    assert_eq!(
        crds,
        [
            "etcdbackups.etcd.database.coreos.com",
            "etcdclusters.etcd.database.coreos.com",
            "etcdrestores.etcd.database.coreos.com"
        ]
    );
}

#[test]
fn csv_metadata_stubs_and_empty_bundles_need_their_image() {
    let full_csv = serde_json::json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": "a.v1"}, "spec": {"install": {"strategy": "deployment", "spec": {"deployments": []}}}}).to_string();
    let stub_csv = serde_json::json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": "a.v1"}, "spec": {"install": {"strategy": "deployment"}}}).to_string();
    let content = |csv: &str, objects: Vec<String>| BundleContent {
        csv_name: "a.v1".into(),
        csv_json: csv.to_owned(),
        objects,
    };
    let cases = [
        (content(&full_csv, vec![full_csv.clone()]), "img", false),
        (content(&stub_csv, vec![stub_csv.clone()]), "img", true),
        (content("", vec![]), "img", true),
        (content("", vec![]), "", false),
        (content(&stub_csv, vec![stub_csv.clone()]), "", false),
        (content("", vec![full_csv.clone()]), "img", false),
        (content("not json", vec!["x".into()]), "img", true),
    ];
    for (bundle, path, want) in cases {
        assert_eq!(
            steps::needs_unpack(&bundle, path),
            want,
            "{bundle:?} {path}"
        );
    }
}

fn csv_with(permissions: serde_json::Value, strategy: &str) -> String {
    serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {"name": "gadget.v1"},
        "spec": {"install": {"strategy": strategy, "spec": permissions}}
    })
    .to_string()
}

#[test]
fn rbac_steps_follow_the_bundle_objects_per_service_account() {
    let rule =
        serde_json::json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]});
    let csv = csv_with(
        serde_json::json!({
            "deployments": [],
            "permissions": [
                {"serviceAccountName": "zeta", "rules": [rule]},
                {"serviceAccountName": "default", "rules": [rule]}
            ],
            "clusterPermissions": [{"serviceAccountName": "zeta", "rules": [rule]}]
        }),
        "deployment",
    );
    let bundle = BundleContent {
        csv_name: "gadget.v1".into(),
        csv_json: csv,
        objects: vec![manifest("v1", "ConfigMap", "settings")],
    };
    let steps = steps::steps_for_bundle(&bundle, &source(), "tools", None, None).unwrap();
    let kinds: Vec<_> = steps.iter().map(|s| s.resource.kind.as_str()).collect();
    // `default` is never created, but its Role and binding are; accounts
    // come in name order.
    assert_eq!(
        kinds,
        [
            "ClusterServiceVersion",
            "ConfigMap",
            "Role",
            "RoleBinding",
            "ServiceAccount",
            "Role",
            "RoleBinding",
            "ClusterRole",
            "ClusterRoleBinding"
        ]
    );
    for step in &steps[2..] {
        assert_eq!(step.resolving, "gadget.v1");
        let manifest: serde_json::Value =
            serde_json::from_str(step.resource.manifest.as_deref().unwrap()).unwrap();
        assert_eq!(manifest["kind"], step.resource.kind.as_str());
        assert_eq!(manifest["metadata"]["labels"]["olm.managed"], "true");
        if step.resource.kind.starts_with("Cluster") {
            assert_eq!(
                manifest["metadata"]["labels"]["olm.owner.namespace"],
                "tools"
            );
            assert!(manifest["metadata"].get("ownerReferences").is_none());
        } else {
            assert_eq!(manifest["metadata"]["namespace"], "tools");
            assert_eq!(
                manifest["metadata"]["ownerReferences"][0]["name"],
                "gadget.v1"
            );
        }
    }
    let binding: serde_json::Value =
        serde_json::from_str(steps[3].resource.manifest.as_deref().unwrap()).unwrap();
    assert_eq!(binding["subjects"][0]["name"], "default");
    assert_eq!(binding["roleRef"]["name"], steps[2].resource.name.as_str());
}

#[test]
fn a_csv_without_the_deployment_strategy_gets_no_rbac_steps() {
    let permissions = serde_json::json!({
        "permissions": [{"serviceAccountName": "zeta", "rules": []}]
    });
    for strategy in ["", "helm"] {
        let bundle = BundleContent {
            csv_name: "gadget.v1".into(),
            csv_json: csv_with(permissions.clone(), strategy),
            objects: vec![],
        };
        let steps = steps::steps_for_bundle(&bundle, &source(), "tools", None, None).unwrap();
        assert_eq!(steps.len(), 1, "{strategy:?}");
    }
}
