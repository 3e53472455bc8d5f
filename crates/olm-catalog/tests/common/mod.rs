//! Shared helpers for the corpus tests: where the shared test data lives.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

/// The shared test data directory: `OLM_TESTDATA`, else
/// `CARGO_MANIFEST_DIR/../../../shared/testdata`. `None` (with a printed
/// message) when it is missing and `CI` is not set; a panic when `CI` is set.
pub(crate) fn testdata() -> Option<PathBuf> {
    let dir = std::env::var_os("OLM_TESTDATA").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/testdata"),
        PathBuf::from,
    );
    if dir.join("SOURCES.md").is_file() {
        return Some(dir);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "test data not found at {} (set OLM_TESTDATA); CI is set, so this is a failure",
        dir.display()
    );
    println!(
        "skipping: test data not found at {} (set OLM_TESTDATA)",
        dir.display()
    );
    None
}
