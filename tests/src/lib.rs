//! Helpers for OLM's end-to-end tests, which run against the real control
//! plane that `olm-testkit` starts: locating the shared corpus, reading
//! manifests, and waiting on conditions with deadlines.
//!
//! [`harness`] holds what the install tests and the install benchmark share.
//!
//! Only tests and benchmarks depend on this crate; no service may.

pub mod harness;

pub use olm_testkit::eventually;

use std::path::{Path, PathBuf};

/// The shared test data directory (`OLM_TESTDATA`, else `shared/testdata`
/// beside the repository). `None`, after saying so, when it is missing outside
/// CI; in CI (`CI` set) a missing corpus fails the test loudly.
pub fn testdata() -> Option<PathBuf> {
    olm_testkit::testdata()
}

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_owned)
}

/// Every file below `dir` whose name ends with `suffix`, sorted.
pub fn files_ending_with(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if path
                .file_name()
                .is_some_and(|name| name.to_string_lossy().ends_with(suffix))
            {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// Reads one YAML document into JSON, or says why it cannot.
pub fn read_yaml(path: &Path) -> Result<serde_json::Value, String> {
    let text = std::fs::read_to_string(path).map_err(|err| format!("{}: {err}", path.display()))?;
    serde_yaml_ng::from_str(&text).map_err(|err| format!("{}: {err}", path.display()))
}

/// A binary of this workspace that `cargo xtask test` (`cargo test
/// --workspace`) built before the tests run, in the debug profile of the
/// target directory. A test cannot build it itself: the test run holds
/// cargo's lock.
pub fn workspace_binary(name: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace_root().join("target"), PathBuf::from);
    let path = target.join("debug").join(name);
    assert!(
        path.exists(),
        "{} is missing: run the tests with `cargo xtask test`, or `cargo build -p {name}` first",
        path.display()
    );
    path
}

/// Runs the built `kubectl-olm` with `args` in `namespace` against the test
/// control plane (`--kubeconfig`, `-n`), on a blocking thread so that
/// services running on the test's runtime keep working meanwhile. The
/// environment's `KUBECTL_OLM_OUTPUT` is ignored.
pub async fn kubectl_olm(namespace: &str, args: &[&str]) -> std::process::Output {
    let mut command = std::process::Command::new(workspace_binary("kubectl-olm"));
    command
        .args(args)
        .arg("--kubeconfig")
        .arg(olm_testkit::control_plane().kubeconfig_path())
        .args(["-n", namespace])
        .env_remove("KUBECTL_OLM_OUTPUT");
    tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap_or_else(|err| panic!("kubectl-olm: {err}"))
        .unwrap_or_else(|err| panic!("kubectl-olm: {err}"))
}
