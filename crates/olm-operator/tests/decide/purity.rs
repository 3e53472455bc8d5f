//! The decision core stays pure: no kube, no clock, no I/O, no async.

use std::path::Path;

#[test]
fn decide_depends_on_no_client_and_reads_no_clock() {
    // The crate also holds the service wiring (src/controller, src/main.rs),
    // which needs kube and tokio; so the guard is on decide's source, not on
    // the manifest.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let forbidden_code = [
        "kube::",
        "kube_runtime",
        "tokio",
        "futures",
        "olm_runtime",
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
