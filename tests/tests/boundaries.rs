//! Boundaries below the code: the libraries that only need OLM's types, and
//! the `opm` CLI, never compile kube's client or its runtime.
//! Each crate names the kube features it needs (the workspace names none),
//! and this test reads the dependency graph Cargo resolves for each crate
//! alone, as a user building only that crate gets it.

// Test helpers: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::process::Command;

/// Crates that must stay free of kube's client and runtime: the API types,
/// the pure rules and formats, the wire contracts, and `opm`.
const TYPES_ONLY: &[&str] = &[
    "olm-api",
    "olm-resolver",
    "olm-plan",
    "olm-catalog",
    "olm-registry",
    "olm-bus",
    "olm-trace",
    "olm-certs",
    "olm-oci",
    "opm",
];

/// What must not appear in their graphs.
const FORBIDDEN: &[&str] = &["kube-client", "kube-runtime"];

/// The names of the packages in `package`'s normal dependency graph, with
/// the features Cargo enables when `package` is built alone.
fn dependencies(package: &str) -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(cargo)
        .current_dir(olm_e2e::workspace_root())
        .args([
            "tree", "--locked", "-p", package, "-e", "normal", "--prefix", "none", "--format",
            "{p}",
        ])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "cargo tree -p {package}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn libraries_and_opm_never_compile_the_kube_client_or_runtime() {
    let mut reached = Vec::new();
    for package in TYPES_ONLY {
        let graph = dependencies(package);
        assert!(
            graph.iter().any(|name| name == package),
            "{package} is in its own graph: {graph:?}"
        );
        for forbidden in FORBIDDEN {
            if graph.iter().any(|name| name == forbidden) {
                reached.push(format!("{package} -> {forbidden}"));
            }
        }
    }
    assert!(
        reached.is_empty(),
        "a types-only crate reaches kube's client or runtime (name kube's features in the crate that needs them, not in the workspace): {reached:?}"
    );
}

/// The check sees the client where it is meant to be: a service's library.
#[test]
fn the_check_sees_the_client_where_a_service_needs_it() {
    let graph = dependencies("olm-runtime");
    for wanted in ["kube-client", "kube-runtime"] {
        assert!(
            graph.iter().any(|name| name == wanted),
            "olm-runtime reaches {wanted}: {graph:?}"
        );
    }
}

/// What a rule in a `decide` folder must not name: a client, the runtime, a
/// service's error type (which carries the client's), or I/O.
const IMPURE: &[&str] = &[
    "kube::",
    "use kube",
    "kube_client",
    "tokio",
    "reqwest",
    "std::fs",
    "std::net",
    "async fn",
    ".await",
    "crate::controller",
    "crate::Error",
];

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &std::path::Path, found: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

/// Each service keeps OLM's rules in `src/decide/` as pure functions over
/// plain data; the I/O is elsewhere. Comments may name anything.
#[test]
fn decide_folders_are_pure() {
    let root = olm_e2e::workspace_root().join("crates");
    let mut files = Vec::new();
    let mut folders = 0;
    for krate in std::fs::read_dir(&root).unwrap() {
        let decide = krate.unwrap().path().join("src/decide");
        if decide.is_dir() {
            folders += 1;
            rust_files(&decide, &mut files);
        }
    }
    assert!(folders >= 6, "decide folders found: {folders}");
    let mut impure = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (number, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            for word in IMPURE {
                if code.contains(word) {
                    impure.push(format!(
                        "{}:{}: {word}",
                        file.strip_prefix(&root).unwrap().display(),
                        number + 1
                    ));
                }
            }
        }
    }
    assert!(
        impure.is_empty(),
        "rules in decide/ reach for I/O or a client; move it to the controller: {impure:#?}"
    );
}
