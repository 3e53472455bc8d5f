//! Helpers shared by the integration tests of olm-api.

#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;

/// The shared test data directory (`OLM_TESTDATA`, else `../shared/testdata`
/// next to the repository). `None` (after saying so) when it is missing and
/// the tests run outside CI; a missing directory fails the test in CI.
pub fn testdata() -> Option<PathBuf> {
    olm_testkit::testdata()
}

/// Reads a YAML file into JSON.
pub fn read_yaml(path: &std::path::Path) -> serde_json::Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
}
