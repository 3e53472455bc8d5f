//! Where the shared corpus of real bundles, catalogs and upstream CRDs lives.
//!
//! The corpus is other people's data, read in place and never copied: every
//! crate's tests find it through [`testdata`].

use std::path::{Path, PathBuf};

/// The shared test data folder: `OLM_TESTDATA`, else `shared/testdata` beside
/// the repository. When it is missing, CI (`CI` set) fails loudly; elsewhere
/// this prints why the test is skipped and returns `None`.
pub fn testdata() -> Option<PathBuf> {
    let explicit = std::env::var_os("OLM_TESTDATA").map(PathBuf::from);
    let dir = explicit
        .clone()
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/testdata"));
    if dir.is_dir() {
        return Some(dir);
    }
    assert!(
        explicit.is_none(),
        "OLM_TESTDATA={} is not a directory",
        dir.display()
    );
    assert!(
        std::env::var_os("CI").is_none(),
        "test data not found at {} (set OLM_TESTDATA); it is required in CI",
        dir.display()
    );
    println!(
        "skipping: test data not found at {} (set OLM_TESTDATA)",
        dir.display()
    );
    None
}
