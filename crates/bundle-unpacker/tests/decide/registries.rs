//! The allowed-registries policy.

use bundle_unpacker::decide::registries::{RegistryRule, refusal};

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
