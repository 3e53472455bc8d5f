//! The allowed-registries policy: rules over registry hosts and catalog
//! addresses.
#![allow(clippy::unwrap_used)]

use olm_oci::policy::{RegistryRule, address_host, address_refusal, image_refusal};

fn rules(texts: &[&str]) -> Vec<RegistryRule> {
    texts.iter().map(|t| RegistryRule::new(t)).collect()
}

#[test]
fn an_empty_policy_allows_everything() {
    assert_eq!(image_refusal(&[], "catalog image", "anything/at:all"), None);
    assert_eq!(address_refusal(&[], "10.0.0.1:50051"), None);
}

#[test]
fn catalog_images_are_matched_on_their_registry() {
    let policy = rules(&["quay.io", "*.corp.example"]);
    assert_eq!(
        image_refusal(
            &policy,
            "catalog image",
            "quay.io/operatorhubio/catalog:latest"
        ),
        None
    );
    assert_eq!(
        image_refusal(&policy, "catalog image", "registry.corp.example/cat:v1"),
        None
    );
    // A reference without a registry is Docker Hub's.
    let message = image_refusal(&policy, "catalog image", "busybox").unwrap();
    assert!(message.contains("registry docker.io"), "{message}");
    let message = image_refusal(&policy, "catalog image", "staging.example/cat:v1").unwrap();
    assert_eq!(
        message,
        "catalog image staging.example/cat:v1 is hosted on registry staging.example, which the allowed-registries policy [quay.io, *.corp.example] does not include"
    );
}

#[test]
fn catalog_addresses_are_matched_on_their_host_with_or_without_port() {
    let cases = [
        ("catalog.olm.svc:50051", "catalog.olm.svc:50051"),
        ("dns:///catalog.olm.svc:50051", "catalog.olm.svc:50051"),
        ("http://[::1]:50051/x", "[::1]:50051"),
    ];
    for (address, host) in cases {
        assert_eq!(address_host(address), host, "{address}");
    }
    let policy = rules(&["*.olm.svc", "127.0.0.1:50051", "::1"]);
    for allowed in [
        "catalog.olm.svc:50051",
        "catalog.olm.svc",
        "127.0.0.1:50051",
        "[::1]:50051",
        "CATALOG.OLM.SVC:1",
    ] {
        assert_eq!(address_refusal(&policy, allowed), None, "{allowed}");
    }
    for refused in [
        "127.0.0.1:50052",
        "kubernetes.default.svc:443",
        "169.254.169.254:80",
        "olm.svc:50051",
    ] {
        let message = address_refusal(&policy, refused).unwrap();
        assert!(message.contains(refused), "{message}");
        assert!(
            message.contains("[*.olm.svc, 127.0.0.1:50051, ::1]"),
            "{message}"
        );
    }
}
