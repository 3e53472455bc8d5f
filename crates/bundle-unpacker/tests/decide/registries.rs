//! The allowed-registries policy.

use bundle_unpacker::decide::registries::{
    RegistryRule, operator_image_refusal, operator_images, refusal,
};

#[test]
fn rules_match_hosts_and_subdomain_wildcards() {
    let cases = [
        ("quay.io", "quay.io", true),
        ("QUAY.io", "quay.IO", true),
        ("quay.io", "quay.io.evil.example", false),
        ("quay.io", "evilquay.io", false),
        ("*.example.com", "registry.example.com", true),
        ("*.example.com", "a.b.example.com", true),
        ("*.example.com", "example.com", false),
        ("*.example.com", "badexample.com", false),
        ("*.example.com", ".example.com", false),
        ("127.0.0.1:5000", "127.0.0.1:5000", true),
        ("127.0.0.1:5000", "127.0.0.1:5001", false),
    ];
    for (rule, registry, expected) in cases {
        assert_eq!(
            RegistryRule::new(rule).matches(registry),
            expected,
            "{rule} vs {registry}"
        );
    }
}

#[test]
fn a_refusal_names_the_bundle_and_the_rules() {
    assert_eq!(refusal(&[], "staging.example/b:1", "staging.example"), None);
    let rules = [
        RegistryRule::new("quay.io"),
        RegistryRule::new("*.corp.example"),
    ];
    assert_eq!(refusal(&rules, "quay.io/op/b:1", "quay.io"), None);
    assert_eq!(
        refusal(&rules, "r.corp.example/op/b:1", "r.corp.example"),
        None
    );
    let message = refusal(&rules, "staging.example/op/b:1", "staging.example").unwrap();
    assert!(message.contains("staging.example/op/b:1"), "{message}");
    assert!(message.contains("[quay.io, *.corp.example]"), "{message}");
}

fn csv_naming(images: &[&str], related: &[&str]) -> serde_json::Value {
    let containers: Vec<_> = images
        .iter()
        .map(|i| serde_json::json!({"name": "c", "image": i}))
        .collect();
    let related: Vec<_> = related
        .iter()
        .map(|i| serde_json::json!({"name": "r", "image": i}))
        .collect();
    serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": "widget.v1"},
        "spec": {
            "install": {"strategy": "deployment", "spec": {"deployments": [
                {"name": "widget", "spec": {"template": {"spec": {
                    "containers": containers,
                    "initContainers": [{"name": "init", "image": "quay.io/widget/init:v1"}],
                }}}}
            ]}},
            "relatedImages": related,
        }
    })
}

#[test]
fn the_operator_images_are_the_csvs_containers_and_related_images() {
    let objects = vec![
        csv_naming(
            &["quay.io/widget/operator:v1", "quay.io/widget/operator:v1"],
            &["registry.corp.example/widget/agent@sha256:00"],
        ),
        serde_json::json!({"kind": "ConfigMap", "data": {"image": "evil.example/x:1"}}),
    ];
    assert_eq!(
        operator_images(&objects),
        [
            "quay.io/widget/init:v1",
            "quay.io/widget/operator:v1",
            "registry.corp.example/widget/agent@sha256:00"
        ]
    );
}

#[test]
fn a_bundle_naming_an_image_outside_the_policy_is_refused_naming_it() {
    let rules = [RegistryRule::new("quay.io")];
    let allowed = vec![csv_naming(&["quay.io/widget/operator:v1"], &[])];
    assert_eq!(
        operator_image_refusal(&rules, "quay.io/b:1", &allowed),
        None
    );
    assert_eq!(operator_image_refusal(&[], "quay.io/b:1", &allowed), None);
    let smuggling = vec![csv_naming(
        &["quay.io/widget/operator:v1"],
        &["staging.example/widget/agent:v1", "not a reference!"],
    )];
    let message = operator_image_refusal(&rules, "quay.io/b:1", &smuggling).unwrap();
    assert!(message.starts_with("bundle quay.io/b:1: "), "{message}");
    assert!(
        message.contains(
            "operator image staging.example/widget/agent:v1 is hosted on registry staging.example"
        ),
        "{message}"
    );
    assert!(
        message.contains("\"not a reference!\" is not a valid image reference"),
        "{message}"
    );
    assert!(!message.contains("quay.io/widget/operator"), "{message}");
}
