//! Where the test control plane's binaries live, and which versions they are.
//!
//! `cargo xtask envtest` installs them into [`bin_dir`]. A developer who already
//! has envtest binaries can point `KUBEBUILDER_ASSETS` at them (it is searched for
//! `kube-apiserver`, `etcd` and `kubectl`, as controller-runtime's envtest does),
//! and `OLM_ENVTEST_BIN` overrides the whole folder.

use std::path::{Path, PathBuf};

use crate::Error;

/// The Kubernetes release whose kube-apiserver, kube-controller-manager,
/// kube-scheduler and kubectl the tests run against.
pub const KUBERNETES_VERSION: &str = "1.34.4";
/// The kwok release that simulates nodes and pods.
pub const KWOK_VERSION: &str = "0.7.0";
/// The grpcurl release the registry API is exercised with (a gRPC client
/// that reads the API through server reflection, as users do).
pub const GRPCURL_VERSION: &str = "1.9.3";
/// The Helm release the chart (`charts/olm`) is linted, rendered and
/// installed with.
pub const HELM_VERSION: &str = "3.19.0";
/// The Prometheus module release (`github.com/prometheus/prometheus`,
/// Prometheus 3.x) whose `promtool test rules` unit-tests the chart's
/// alerts.
pub const PROMTOOL_VERSION: &str = "0.316.0";
/// The krew release that installs `kubectl olm` from its release archive
/// and manifest in the xtask release test.
pub const KREW_VERSION: &str = "0.4.3";
/// The etcd release. It must support watch progress requests (3.5.13 or
/// newer): Kubernetes 1.34 clients stream lists through them, and Debian
/// bookworm's etcd 3.4.23 does not.
pub const ETCD_VERSION: &str = "3.5.21";
/// The Jaeger release (the Go module's version; its `jaeger` command is
/// Jaeger v2, 2.13.0) that stores the traces OLM's services export, for
/// tests that assert on them ([`crate::jaeger`]).
pub const JAEGER_VERSION: &str = "1.76.0";

/// Upstream's operator-registry release whose `opm` the differential tests
/// (`cargo xtask conformance`) and the side-by-side benchmarks
/// (`cargo xtask bench --vs-upstream`) compare ours with. Pinned in
/// `xtask/upstream/opm/go.mod`; never installed by CI.
pub const UPSTREAM_OPM_VERSION: &str = "1.65.0";

/// Upstream OLM's release whose resolver the side-by-side benchmark
/// (`cargo xtask bench --vs-upstream resolve`) runs through the harness in
/// `xtask/upstream/resolver`. Never installed by CI.
pub const UPSTREAM_OLM_VERSION: &str = "0.46.0";

/// The cache root: `OLM_CACHE_DIR`, else `$XDG_CACHE_HOME/olm-rs`, else
/// `$HOME/.cache/olm-rs`.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("OLM_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(dir).join("olm-rs");
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
    home.join(".cache").join("olm-rs")
}

/// The folder holding this version's binaries: `OLM_ENVTEST_BIN`, else
/// `<cache>/envtest/k8s-v<KUBERNETES_VERSION>/bin`.
pub fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("OLM_ENVTEST_BIN") {
        return PathBuf::from(dir);
    }
    cache_dir()
        .join("envtest")
        .join(format!("k8s-v{KUBERNETES_VERSION}"))
        .join("bin")
}

/// The folder `cargo xtask upstream` builds upstream's binaries into:
/// `<cache>/upstream/bin`. Each is named with its version (`opm-v1.65.0`),
/// so a bump never runs a stale build.
pub fn upstream_bin_dir() -> PathBuf {
    cache_dir().join("upstream").join("bin")
}

/// Upstream's `opm` at [`UPSTREAM_OPM_VERSION`]: `OLM_UPSTREAM_OPM` when set,
/// else the build in [`upstream_bin_dir`], else `None`.
pub fn upstream_opm() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("OLM_UPSTREAM_OPM") {
        return Some(PathBuf::from(path));
    }
    let path = upstream_bin_dir().join(format!("opm-v{UPSTREAM_OPM_VERSION}"));
    path.is_file().then_some(path)
}

/// The harness around upstream OLM's resolver at [`UPSTREAM_OLM_VERSION`]
/// (`xtask/upstream/resolver`): `OLM_UPSTREAM_RESOLVER` when set, else the
/// build in [`upstream_bin_dir`], else `None`.
pub fn upstream_resolver() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("OLM_UPSTREAM_RESOLVER") {
        return Some(PathBuf::from(path));
    }
    let path = upstream_bin_dir().join(format!("olm-resolve-upstream-v{UPSTREAM_OLM_VERSION}"));
    path.is_file().then_some(path)
}

/// The harness printing upstream OLM's RBAC InstallPlan steps for a CSV, at
/// [`UPSTREAM_OLM_VERSION`] (`xtask/upstream/resolver/rbac`):
/// `OLM_UPSTREAM_RBAC` when set, else the build in [`upstream_bin_dir`],
/// else `None`.
pub fn upstream_rbac() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("OLM_UPSTREAM_RBAC") {
        return Some(PathBuf::from(path));
    }
    let path = upstream_bin_dir().join(format!("olm-rbac-upstream-v{UPSTREAM_OLM_VERSION}"));
    path.is_file().then_some(path)
}

/// `found` (one of upstream's binaries, from [`upstream_opm`] or
/// [`upstream_resolver`]) for the tests `what` names, or `None` after
/// saying why. `cargo xtask conformance` sets `OLM_REQUIRE_UPSTREAM`, and a
/// missing binary then fails those tests; elsewhere, CI included (which
/// never builds upstream), they skip. The upstream twin of
/// [`pinned_or_skip`].
pub fn upstream_or_skip(found: Option<PathBuf>, what: &str) -> Option<PathBuf> {
    match found {
        Some(path) => {
            assert!(path.is_file(), "{what}: {} is not a file", path.display());
            Some(path)
        }
        None => {
            assert!(
                std::env::var_os("OLM_REQUIRE_UPSTREAM").is_none(),
                "{what} need upstream's binaries: run `cargo xtask upstream`"
            );
            println!(
                "skipping {what}: run `cargo xtask conformance` to build upstream and run them"
            );
            None
        }
    }
}

/// Whether this process runs as root: what a real node (mounts, bridges,
/// iptables) and installing Debian packages need.
pub fn is_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

/// Finds `name`: first in [`bin_dir`], then in `KUBEBUILDER_ASSETS`, then on
/// `PATH` and in `/usr/sbin` (where Debian puts `nats-server`).
pub fn find(name: &str) -> Result<PathBuf, Error> {
    let mut candidates = pinned_dirs();
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path));
    }
    candidates.push(PathBuf::from("/usr/sbin"));
    search(name, &candidates)
}

/// Finds `name` in [`bin_dir`] or `KUBEBUILDER_ASSETS` only: for binaries
/// whose version must be the pinned one (a `kube-apiserver` on `PATH` could be
/// any release).
pub fn find_pinned(name: &str) -> Result<PathBuf, Error> {
    search(name, &pinned_dirs())
}

/// The pinned binary `name` for the tests `what` names, or `None` after
/// saying why when it is not installed; with `CI` set a missing binary
/// fails those tests instead (CI installs everything with
/// `cargo xtask envtest`). One home for "run it, or skip loudly outside CI".
pub fn pinned_or_skip(name: &str, what: &str) -> Option<PathBuf> {
    match find_pinned(name) {
        Ok(path) => Some(path),
        Err(err) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must run {what}: {err} (cargo xtask envtest builds {name})"
            );
            eprintln!("skipping {what}: {err}; run `cargo xtask envtest`");
            None
        }
    }
}

fn pinned_dirs() -> Vec<PathBuf> {
    let mut dirs = vec![bin_dir()];
    if let Some(dir) = std::env::var_os("KUBEBUILDER_ASSETS") {
        dirs.push(PathBuf::from(dir));
    }
    dirs
}

fn search(name: &str, dirs: &[PathBuf]) -> Result<PathBuf, Error> {
    dirs.iter()
        .map(|dir| dir.join(name))
        .find(|path| is_executable(path))
        .ok_or_else(|| Error::MissingBinary {
            name: name.to_owned(),
            looked_in: dirs
                .iter()
                .map(|dir| dir.display().to_string())
                .collect::<Vec<_>>()
                .join(":"),
        })
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_binary_names_the_install_command() {
        let err = find_pinned("no-such-binary-olm-testkit").unwrap_err();
        let message = err.to_string();
        assert!(message.contains("no-such-binary-olm-testkit"), "{message}");
        assert!(message.contains("cargo xtask envtest"), "{message}");
    }

    #[test]
    fn finds_a_binary_on_path() {
        assert!(find("sh").is_ok());
    }
}
