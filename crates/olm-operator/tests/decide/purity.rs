//! The decision core stays pure: no kube, no clock, no I/O, no async.

use std::path::Path;

#[test]
fn decide_depends_on_no_client_and_reads_no_clock() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("manifest");
    let dependencies = manifest
        .split("[dependencies]")
        .nth(1)
        .and_then(|rest| rest.split("\n[").next())
        .expect("a [dependencies] table");
    for forbidden in ["kube", "tokio", "futures", "reqwest", "hyper"] {
        assert!(
            !dependencies
                .lines()
                .any(|line| line.trim_start().starts_with(forbidden)),
            "olm-operator's decision core must not depend on {forbidden}"
        );
    }

    let forbidden_code = [
        "kube::",
        "async fn",
        ".await",
        "std::fs",
        "std::net",
        "std::process",
        "SystemTime::now",
        "Timestamp::now",
        "Instant::now",
    ];
    let decide = root.join("src/decide");
    let mut checked = 0;
    for entry in std::fs::read_dir(&decide).expect("src/decide") {
        let path = entry.expect("entry").path();
        let source = std::fs::read_to_string(&path).expect("source");
        for pattern in forbidden_code {
            assert!(
                !source.contains(pattern),
                "{} uses {pattern}; decide must stay pure",
                path.display()
            );
        }
        checked += 1;
    }
    assert!(checked > 5, "found the decide modules");
}
