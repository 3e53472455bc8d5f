//! Shared helpers for the corpus tests: where the shared test data lives.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

/// The shared test data directory: `OLM_TESTDATA`, else
/// `CARGO_MANIFEST_DIR/../../../shared/testdata`. `None` (with a printed
/// message) when it is missing and `CI` is not set; a panic when `CI` is set.
pub(crate) fn testdata() -> Option<PathBuf> {
    olm_testkit::testdata()
}
