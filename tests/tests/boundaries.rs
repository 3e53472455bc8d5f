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
    "Timestamp::now",
    "SystemTime::now",
    "Instant::now",
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
        // A file's tests may build fixtures as they like.
        let rules = text.split("#[cfg(test)]").next().unwrap_or_default();
        for (number, line) in rules.lines().enumerate() {
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

/// Whether a line of code sets a status field (`status.reason = ...`,
/// `x.status.phase = ...`) or a condition (`conditions::set`,
/// `conditions::remove`) itself.
fn sets_status(code: &str) -> bool {
    if code.contains("conditions::set(") || code.contains("conditions::remove(") {
        return true;
    }
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    code.match_indices("status.").any(|(at, _)| {
        let before = code[..at].chars().next_back();
        if before.is_some_and(ident) {
            return false;
        }
        let rest = &code[at + "status.".len()..];
        let field = rest.trim_start_matches(|c: char| ident(c) || c == '.');
        field.len() < rest.len() && field.starts_with(" = ")
    })
}

#[test]
fn the_status_check_tells_a_write_from_a_read() {
    for write in [
        "status.reason = Some(reason);",
        "    plan.status.phase = InstallPlanPhase::FAILED;",
        "status.registry_service.port = None;",
        "conditions::set(&mut status.conditions, condition, now);",
        "olm_api::conditions::remove(&mut s.conditions, \"Ready\");",
    ] {
        assert!(sets_status(write), "{write}");
    }
    for read in [
        "if status.reason == Some(reason) {",
        "let reason = status.reason.clone();",
        "with_status.status = Some(decided.clone());",
        "let done = conditions::is_true(&status.conditions, \"Ready\");",
        "step_status.phase = x;",
    ] {
        assert!(!sets_status(read), "{read}");
    }
}

/// Each service writes the statuses its rules decided: outside `decide/`,
/// no code sets a status field or a condition itself (the CSV's shape:
/// observation in, decision out, the controller applies it). Comments and
/// the `#[cfg(test)]` tail of a file are not counted.
#[test]
fn controllers_set_no_status_field_or_condition_themselves() {
    let root = olm_e2e::workspace_root().join("crates");
    let mut services = 0;
    let mut direct = Vec::new();
    for krate in std::fs::read_dir(&root).unwrap() {
        let src = krate.unwrap().path().join("src");
        let decide = src.join("decide");
        if !decide.is_dir() {
            continue;
        }
        services += 1;
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        for file in files.iter().filter(|f| !f.starts_with(&decide)) {
            let text = std::fs::read_to_string(file).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            for (number, line) in code.lines().enumerate() {
                if sets_status(line.split("//").next().unwrap_or_default()) {
                    direct.push(format!(
                        "{}:{}: {}",
                        file.strip_prefix(&root).unwrap().display(),
                        number + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(services >= 6, "crates with decide/ found: {services}");
    assert!(
        direct.is_empty(),
        "status set outside decide/; decide it there and apply what it returns: {direct:#?}"
    );
}

/// A crate's modules, by path (`["decide", "certs"]`), with the modules
/// each names in its code (`crate::x`, `super::x`; comments, doc links and
/// the `#[cfg(test)]` tail of a file are not counted).
fn module_graph(
    src: &std::path::Path,
) -> std::collections::BTreeMap<Vec<String>, Vec<Vec<String>>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let path_of = |file: &std::path::Path| -> Vec<String> {
        let relative = file.strip_prefix(src).unwrap().with_extension("");
        let mut parts: Vec<String> = relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if matches!(
            parts.last().map(String::as_str),
            Some("mod" | "lib" | "main")
        ) {
            parts.pop();
        }
        parts
    };
    let modules: std::collections::BTreeSet<Vec<String>> =
        files.iter().map(|f| path_of(f)).collect();
    let mut graph = std::collections::BTreeMap::new();
    for file in &files {
        let module = path_of(file);
        let text = std::fs::read_to_string(file).unwrap();
        let code: String = text
            .split("#[cfg(test)]")
            .next()
            .unwrap_or_default()
            .lines()
            .map(|line| line.split("//").next().unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n");
        let mut named = std::collections::BTreeSet::new();
        for (prefix, base) in [
            ("crate::", Vec::new()),
            ("super::", module[..module.len().saturating_sub(1)].to_vec()),
        ] {
            for (at, _) in code.match_indices(prefix) {
                let before = code[..at].chars().next_back();
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                    continue;
                }
                let rest = &code[at + prefix.len()..];
                let mut path = base.clone();
                for segment in rest.split("::") {
                    let word: String = segment
                        .chars()
                        .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                        .collect();
                    if word.is_empty() {
                        break;
                    }
                    path.push(word.clone());
                    if word.len() != segment.len() {
                        break;
                    }
                }
                while !path.is_empty() && !modules.contains(&path) {
                    path.pop();
                }
                if !path.is_empty() && !module.starts_with(&path) {
                    named.insert(path);
                }
            }
        }
        graph.insert(module, named.into_iter().collect());
    }
    graph
}

/// Modules of one crate that import each other, directly or around a loop.
fn cycles(graph: &std::collections::BTreeMap<Vec<String>, Vec<Vec<String>>>) -> Vec<Vec<String>> {
    let reaches = |from: &Vec<String>, to: &Vec<String>| {
        let mut seen = std::collections::BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(module) = stack.pop() {
            for next in graph.get(&module).into_iter().flatten() {
                if next == to {
                    return true;
                }
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        false
    };
    let mut found = Vec::new();
    for (module, named) in graph {
        for other in named {
            if module < other && reaches(other, module) {
                found.push(vec![module.join("::"), other.join("::")]);
            }
        }
    }
    found
}

/// No module imports, through any chain, a module that imports it: each
/// concept's home depends on the homes below it, never back.
#[test]
fn modules_within_a_crate_do_not_import_in_a_cycle() {
    let root = olm_e2e::workspace_root().join("crates");
    let mut found = Vec::new();
    let mut crates = 0;
    for krate in std::fs::read_dir(&root).unwrap() {
        let krate = krate.unwrap().path();
        let src = krate.join("src");
        if !src.is_dir() {
            continue;
        }
        crates += 1;
        for cycle in cycles(&module_graph(&src)) {
            found.push(format!(
                "{}: {}",
                krate.file_name().unwrap().to_string_lossy(),
                cycle.join(" <-> ")
            ));
        }
    }
    assert!(crates >= 15, "crates scanned: {crates}");
    assert!(found.is_empty(), "import cycles: {found:#?}");
}

/// The check finds a cycle where there is one.
#[test]
fn the_cycle_check_sees_a_cycle() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("lib.rs"), "mod a;\nmod b;\n").unwrap();
    std::fs::write(dir.path().join("a.rs"), "use crate::b::Thing;\n").unwrap();
    std::fs::write(
        dir.path().join("b.rs"),
        "// crate::a in a comment does not count\npub struct Thing(super::a::Other);\n",
    )
    .unwrap();
    let found = cycles(&module_graph(dir.path()));
    assert_eq!(found, [vec!["a".to_owned(), "b".to_owned()]]);
}
