//! `kubectl-olm resolve` driven as a user drives it: catalogs as file-based
//! catalog directories (or a real registry on loopback) and a namespace
//! state file, with the decision read back from its YAML or JSON output.
#![allow(clippy::unwrap_used)]

use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
    process::{Command, Output},
};

use serde_json::Value;
use tempfile::TempDir;

/// One bundle of a test catalog.
struct Bundle {
    name: &'static str,
    package: &'static str,
    version: &'static str,
    replaces: Option<&'static str>,
    skip_range: Option<&'static str>,
    extra: Vec<String>,
}

fn bundle(name: &'static str, package: &'static str, version: &'static str) -> Bundle {
    Bundle {
        name,
        package,
        version,
        replaces: None,
        skip_range: None,
        extra: Vec::new(),
    }
}

impl Bundle {
    fn replaces(mut self, r: &'static str) -> Self {
        self.replaces = Some(r);
        self
    }
    fn skip_range(mut self, r: &'static str) -> Self {
        self.skip_range = Some(r);
        self
    }
    fn provides(mut self, kind: &str) -> Self {
        self.extra.push(format!(
            "- type: olm.gvk\n  value: {{group: example.com, version: v1, kind: {kind}}}"
        ));
        self
    }
    fn requires(mut self, kind: &str) -> Self {
        self.extra.push(format!(
            "- type: olm.gvk.required\n  value: {{group: example.com, version: v1, kind: {kind}}}"
        ));
        self
    }
}

/// Writes a file-based catalog with one package per distinct package name
/// (default channel `stable`).
fn write_catalog(root: &Path, name: &str, bundles: &[Bundle]) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let mut packages: Vec<&str> = bundles.iter().map(|b| b.package).collect();
    packages.sort_unstable();
    packages.dedup();
    let mut text = String::new();
    for p in packages {
        writeln!(
            text,
            "---\nschema: olm.package\nname: {p}\ndefaultChannel: stable"
        )
        .unwrap();
        writeln!(
            text,
            "---\nschema: olm.channel\npackage: {p}\nname: stable\nentries:"
        )
        .unwrap();
        for b in bundles.iter().filter(|b| b.package == p) {
            writeln!(text, "- name: {}", b.name).unwrap();
            if let Some(r) = b.replaces {
                writeln!(text, "  replaces: {r}").unwrap();
            }
            if let Some(r) = b.skip_range {
                writeln!(text, "  skipRange: '{r}'").unwrap();
            }
        }
        for b in bundles.iter().filter(|b| b.package == p) {
            writeln!(
                text,
                "---\nschema: olm.bundle\nname: {}\npackage: {p}\nimage: quay.io/example/{}:latest\nproperties:\n- type: olm.package\n  value: {{packageName: {p}, version: {}}}",
                b.name, b.name, b.version
            )
            .unwrap();
            for e in &b.extra {
                writeln!(text, "{e}").unwrap();
            }
        }
    }
    std::fs::write(dir.join("catalog.yaml"), text).unwrap();
    dir
}

fn write_state(root: &Path, yaml: &str) -> PathBuf {
    let path = root.join("state.yaml");
    std::fs::write(&path, yaml).unwrap();
    path
}

fn kubectl_olm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kubectl-olm"))
        .args(args)
        .env_remove("KUBECTL_OLM_CATALOGS")
        .env_remove("KUBECTL_OLM_STATE")
        .env_remove("KUBECTL_OLM_OUTPUT")
        .output()
        .unwrap()
}

fn resolve(catalogs: &[(&str, &Path)], state: &Path, json: bool) -> (Value, i32) {
    let mut args: Vec<String> = vec!["resolve".into()];
    for (key, dir) in catalogs {
        args.push("--catalog".into());
        args.push(format!("{key}={}", dir.display()));
    }
    args.push("--state".into());
    args.push(state.display().to_string());
    if json {
        args.extend(["-o".into(), "json".into()]);
    }
    let out = kubectl_olm(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let stdout = String::from_utf8(out.stdout).unwrap();
    let value: Value = if json {
        serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)))
    } else {
        serde_yaml_ng::from_str(&stdout)
            .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)))
    };
    (value, out.status.code().unwrap())
}

fn names(report: &Value) -> Vec<String> {
    let mut names: Vec<String> = report["operators"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

const SUB_APP: &str = "
apiVersion: operators.coreos.com/v1alpha1
kind: Subscription
metadata: {name: app, namespace: operators}
spec: {name: app, channel: stable, source: community, sourceNamespace: olm}
";

#[test]
fn a_fresh_install_pulls_in_its_dependency_json() {
    let tmp = TempDir::new().unwrap();
    let community = write_catalog(
        tmp.path(),
        "community",
        &[
            bundle("app.v1.0.0", "app", "1.0.0").requires("Database"),
            bundle("db.v1.0.0", "db", "1.0.0").provides("Database"),
            bundle("db.v1.1.0", "db", "1.1.0")
                .replaces("db.v1.0.0")
                .provides("Database"),
        ],
    );
    let state = write_state(tmp.path(), SUB_APP);
    let (report, code) = resolve(&[("olm/community", &community)], &state, true);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["decision"], "Resolved");
    assert_eq!(report["namespace"], "operators");
    assert_eq!(names(&report), ["app.v1.0.0", "db.v1.1.0"]);
    let db = report["operators"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["package"] == "db")
        .unwrap();
    assert_eq!(db["catalog"], "community");
    assert_eq!(db["catalogNamespace"], "olm");
    assert_eq!(db["bundlePath"], "quay.io/example/db.v1.1.0:latest");
    assert!(db.get("subscription").is_none());
    assert_eq!(report["subscriptions"][0]["csv"], "app.v1.0.0");
}

#[test]
fn an_upgrade_with_skip_range_from_an_installed_csv_yaml() {
    let tmp = TempDir::new().unwrap();
    let community = write_catalog(
        tmp.path(),
        "community",
        &[
            bundle("app.v1.0.0", "app", "1.0.0"),
            bundle("app.v1.0.1", "app", "1.0.1").replaces("app.v1.0.0"),
            bundle("app.v1.1.0", "app", "1.1.0")
                .replaces("app.v1.0.1")
                .skip_range(">=1.0.0 <1.1.0"),
        ],
    );
    let state = write_state(
        tmp.path(),
        &format!(
            "{SUB_APP}status: {{installedCSV: app.v1.0.0}}
---
apiVersion: operators.coreos.com/v1alpha1
kind: ClusterServiceVersion
metadata:
  name: app.v1.0.0
  namespace: operators
  annotations:
    operatorframework.io/properties: '{{\"properties\":[{{\"type\":\"olm.package\",\"value\":{{\"packageName\":\"app\",\"version\":\"1.0.0\"}}}}]}}'
spec: {{version: 1.0.0}}
"
        ),
    );
    let (report, code) = resolve(&[("olm/community", &community)], &state, false);
    assert_eq!(code, 0, "{report:?}");
    assert_eq!(names(&report), ["app.v1.1.0"]);
    assert_eq!(report["operators"][0]["replaces"], "app.v1.0.0");
    assert_eq!(report["operators"][0]["subscription"], "app");
}

#[test]
fn an_unsatisfiable_namespace_is_explained_with_exit_status_3() {
    let tmp = TempDir::new().unwrap();
    let community = write_catalog(
        tmp.path(),
        "community",
        &[bundle("app.v1.0.0", "app", "1.0.0").requires("Database")],
    );
    let state = write_state(tmp.path(), SUB_APP);
    let (report, code) = resolve(&[("olm/community", &community)], &state, false);
    assert_eq!(code, 3);
    assert_eq!(report["decision"], "ResolutionFailed");
    assert_eq!(report["reason"], "ConstraintsNotSatisfiable");
    assert_eq!(
        report["message"],
        "constraints not satisfiable: bundle app.v1.0.0 requires an operator providing an API with group: example.com, version: v1, kind: Database, subscription app exists, subscription app requires community/olm/stable/app.v1.0.0"
    );
    let conflicts = report["conflicts"].as_array().unwrap();
    assert_eq!(conflicts.len(), 3);
    assert!(
        conflicts[0]["explanation"]
            .as_str()
            .unwrap()
            .ends_with("no catalog visible to namespace operators has one")
    );
}

#[test]
fn catalog_priority_and_health_come_from_catalog_sources_in_the_state() {
    let tmp = TempDir::new().unwrap();
    let apps = write_catalog(
        tmp.path(),
        "apps",
        &[bundle("app.v1.0.0", "app", "1.0.0").requires("Database")],
    );
    let low = write_catalog(
        tmp.path(),
        "low",
        &[bundle("db-low.v1.0.0", "db-low", "1.0.0").provides("Database")],
    );
    let high = write_catalog(
        tmp.path(),
        "high",
        &[bundle("db-high.v1.0.0", "db-high", "1.0.0").provides("Database")],
    );
    let sub = SUB_APP.replace("source: community", "source: apps");
    let sources = "
---
kind: CatalogSource
metadata: {name: high, namespace: olm}
spec: {priority: 10}
---
kind: CatalogSource
metadata: {name: low, namespace: olm}
spec: {priority: -10}
";
    let state = write_state(tmp.path(), &format!("{sub}{sources}"));
    let catalogs = [
        ("olm/apps", apps.as_path()),
        ("olm/low", low.as_path()),
        ("olm/high", high.as_path()),
    ];
    let (report, code) = resolve(&catalogs, &state, true);
    assert_eq!(code, 0, "{report}");
    assert_eq!(names(&report), ["app.v1.0.0", "db-high.v1.0.0"]);

    let unhealthy = format!(
        "{sub}{sources}
---
kind: CatalogSource
metadata: {{name: apps, namespace: olm}}
status: {{connectionState: {{lastObservedState: TRANSIENT_FAILURE}}}}
"
    );
    let state = write_state(tmp.path(), &unhealthy);
    let (report, code) = resolve(&catalogs, &state, true);
    assert_eq!(code, 3);
    assert_eq!(report["reason"], "ErrorPreventedResolution");
    assert_eq!(
        report["message"],
        "failed to populate resolver cache from source apps/olm: catalog source is unhealthy"
    );
}

#[test]
fn unusable_input_fails_with_a_message_and_exit_status_2() {
    let tmp = TempDir::new().unwrap();
    let community = write_catalog(
        tmp.path(),
        "community",
        &[bundle("app.v1.0.0", "app", "1.0.0")],
    );
    let catalog_arg = format!("olm/community={}", community.display());
    let missing = tmp.path().join("missing.yaml");
    let out = kubectl_olm(&[
        "resolve",
        "--catalog",
        &catalog_arg,
        "--state",
        missing.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing.yaml"));

    let bad = write_state(tmp.path(), "kind: Subscription\nmetadata: {namespace: x}\n");
    let out = kubectl_olm(&[
        "resolve",
        "--catalog",
        &catalog_arg,
        "--state",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no metadata.name"));

    let out = kubectl_olm(&[
        "resolve",
        "--catalog",
        "community",
        "--state",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("NAMESPACE/NAME=SOURCE"));

    let state = write_state(tmp.path(), SUB_APP);
    let nowhere = tmp.path().join("nowhere");
    let out = kubectl_olm(&[
        "resolve",
        "--catalog",
        &format!("olm/community={}", nowhere.display()),
        "--state",
        state.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("catalog community/olm"));
}

#[test]
fn preview_is_the_live_command_and_resolve_the_offline_one() {
    // `preview` was once an alias of the offline `resolve`; it now reads the
    // cluster, and refuses the offline flags with a usage error.
    let tmp = TempDir::new().unwrap();
    let state = write_state(tmp.path(), SUB_APP);
    let out = kubectl_olm(&["preview", "--state", state.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let help = kubectl_olm(&["preview", "--help"]);
    assert!(help.status.success());
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(
        text.contains("--registry") && text.contains("PACKAGE"),
        "{text}"
    );
}

#[test]
fn a_registry_address_is_read_through_list_bundles() {
    let tmp = TempDir::new().unwrap();
    let community = write_catalog(
        tmp.path(),
        "community",
        &[
            bundle("app.v1.0.0", "app", "1.0.0").requires("Database"),
            bundle("db.v1.0.0", "db", "1.0.0").provides("Database"),
        ],
    );
    let state = write_state(tmp.path(), SUB_APP);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime.block_on(async {
        let index =
            olm_registry::CatalogIndex::build(&community, &olm_registry::IndexOptions::default())
                .unwrap();
        olm_registry::RegistryServer::new(index)
            .spawn_loopback()
            .await
            .unwrap()
    });
    let address = server.endpoint().replace("http://", "grpc://");
    let out = kubectl_olm(&[
        "resolve",
        "--catalog",
        &format!("olm/community={address}"),
        "--state",
        state.to_str().unwrap(),
        "-o",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(names(&report), ["app.v1.0.0", "db.v1.0.0"]);
    drop(server);
}

#[test]
fn real_catalog_from_the_corpus() {
    let Some(testdata) = olm_testkit::testdata() else {
        return;
    };
    let dir = testdata.join("catalogs/community-operators-prod-v4.21");
    let tmp = TempDir::new().unwrap();
    let state = write_state(
        tmp.path(),
        "
kind: Subscription
metadata: {name: topology, namespace: rabbitmq}
spec: {name: rabbitmq-messaging-topology-operator, channel: stable, source: community-operators, sourceNamespace: openshift-marketplace}
",
    );
    let out = kubectl_olm(&[
        "resolve",
        "--catalog",
        &format!(
            "openshift-marketplace/community-operators={}",
            dir.display()
        ),
        "--global-namespace",
        "openshift-marketplace",
        "--state",
        state.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_yaml_ng::from_str(&String::from_utf8(out.stdout).unwrap()).unwrap();
    let packages: Vec<&str> = report["operators"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["package"].as_str().unwrap())
        .collect();
    assert!(
        packages.contains(&"rabbitmq-cluster-operator"),
        "{packages:?}"
    );
    assert!(
        packages.contains(&"rabbitmq-messaging-topology-operator"),
        "{packages:?}"
    );
}
