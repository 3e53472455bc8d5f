//! The Helm chart's alerts (the PrometheusRule `olm-alert-rules` of
//! `charts/olm/templates/monitoring.yaml`), unit-tested with the real
//! `promtool test rules` at the version `cargo xtask envtest` builds.
//!
//! The rules tested are the chart's own: each test renders the chart with
//! monitoring, marketplace-operator and samples-operator on, writes the
//! PrometheusRule's `spec` as a Prometheus rule file into a temporary
//! directory, and copies the promtool test files of `tests/alerts/` beside
//! it (their `rule_files` name it). A second test holds every rendered alert
//! to at least one case where it fires and one where it stays quiet, and a
//! negative control shows that a wrong expectation makes promtool, and so
//! the test, fail.
//!
//! Run with `CI=true cargo test -p olm-e2e --test alerts`.

// Test helpers: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::{
    collections::{BTreeMap, BTreeSet},
    fs::File,
    path::{Path, PathBuf},
    process::{Command, ExitStatus},
};

use olm_e2e::{files_ending_with, workspace_root};
use serde_json::Value;
use tempfile::TempDir;

/// The release name and namespace of the rendering (the chart's default
/// global catalog namespace is the release namespace, so `olm` too).
const RELEASE: &str = "olm";
const NAMESPACE: &str = "olm";

/// The rule file every test file's `rule_files` names; promtool resolves it
/// relative to the test file, so it is written beside the copies.
const RULE_FILE: &str = "olm-alert-rules.yaml";

/// A binary at its pinned version, or `None` (after saying why) when it is
/// not installed outside CI.
fn pinned(name: &str) -> Option<PathBuf> {
    olm_testkit::assets::pinned_or_skip(name, "the alert tests")
}

/// `helm` and `promtool`, or `None` when either is missing outside CI.
fn binaries() -> Option<(PathBuf, PathBuf)> {
    Some((pinned("helm")?, pinned("promtool")?))
}

/// The `spec` (`groups:`) of the PrometheusRule `olm-alert-rules`, as
/// `helm template` renders it with every service that has alerts enabled.
fn rendered_rules(helm: &Path) -> Value {
    let chart = workspace_root().join("charts/olm");
    let output = Command::new(helm)
        .args(["template", RELEASE])
        .arg(&chart)
        .args(["--namespace", NAMESPACE])
        .args(["--set", "monitoring.enabled=true"])
        .args(["--set", "marketplaceOperator.enabled=true"])
        .args(["--set", "samplesOperator.enabled=true"])
        .output()
        .unwrap_or_else(|err| panic!("running {}: {err}", helm.display()));
    let rendered = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "helm template: {rendered}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    rendered
        .split("\n---")
        .map(|text| {
            serde_yaml_ng::from_str::<Value>(text)
                .unwrap_or_else(|err| panic!("rendered YAML: {err}\n{text}"))
        })
        .find(|doc| doc["kind"] == "PrometheusRule" && doc["metadata"]["name"] == "olm-alert-rules")
        .map(|doc| doc["spec"].clone())
        .expect("the PrometheusRule olm-alert-rules in the rendering")
}

/// The alert names of a rule file's groups.
fn alert_names(rules: &Value) -> BTreeSet<String> {
    rules["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|group| group["rules"].as_array().expect("rules"))
        .filter_map(|rule| rule["alert"].as_str())
        .map(str::to_owned)
        .collect()
}

/// The promtool test files of `tests/alerts/`, by file name.
fn test_files() -> BTreeMap<String, String> {
    let dir = workspace_root().join("tests/alerts");
    let files: BTreeMap<String, String> = files_ending_with(&dir, ".yaml")
        .into_iter()
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|err| panic!("{}: {err}", path.display()));
            (name, text)
        })
        .collect();
    assert!(
        !files.is_empty(),
        "no promtool test files in {}",
        dir.display()
    );
    files
}

/// A directory holding the rendered rules as [`RULE_FILE`] and `tests`
/// (file name to text) beside it, each of which must read the rules from
/// there and from nowhere else.
fn stage(rules: &Value, tests: &BTreeMap<String, String>) -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join(RULE_FILE),
        serde_yaml_ng::to_string(rules).unwrap(),
    )
    .unwrap();
    for (name, text) in tests {
        let test: Value =
            serde_yaml_ng::from_str(text).unwrap_or_else(|err| panic!("{name}: {err}"));
        assert_eq!(
            test["rule_files"],
            serde_json::json!([RULE_FILE]),
            "{name}: rule_files must be exactly [{RULE_FILE}], the rendered chart's rules"
        );
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    dir
}

/// What `promtool test rules` said of the staged `tests`, run in `dir`.
struct Promtool {
    status: ExitStatus,
    /// Its stdout and stderr in the order it wrote them: it reports a
    /// file's failures on stderr and the file's name on stdout.
    output: String,
}

fn promtool_test_rules(promtool: &Path, dir: &Path, tests: &BTreeMap<String, String>) -> Promtool {
    let log_path = dir.join("promtool.log");
    let log = File::create(&log_path).unwrap();
    let status = Command::new(promtool)
        .current_dir(dir)
        .args(["test", "rules"])
        .args(tests.keys())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .status()
        .unwrap_or_else(|err| panic!("running {}: {err}", promtool.display()));
    Promtool {
        status,
        output: std::fs::read_to_string(&log_path).unwrap(),
    }
}

#[test]
fn every_alert_fires_and_stays_quiet_as_its_promtool_tests_expect() {
    let Some((helm, promtool)) = binaries() else {
        return;
    };
    let tests = test_files();
    let dir = stage(&rendered_rules(&helm), &tests);
    let run = promtool_test_rules(&promtool, dir.path(), &tests);
    if !run.status.success() {
        // Kept, so that promtool can be run again by hand on what failed.
        let kept = dir.keep();
        panic!(
            "promtool test rules failed ({}; the rendered rules and tests are kept in {}):\n{}",
            run.status,
            kept.display(),
            run.output
        );
    }
}

/// Every alert the chart renders has a promtool case where it fires and one
/// where it does not, and no case names an alert the chart lacks (promtool
/// would pass a quiet expectation of an alert that does not exist).
#[test]
fn every_alert_has_a_firing_and_a_quiet_promtool_case() {
    let Some((helm, _)) = binaries() else { return };
    let rendered = alert_names(&rendered_rules(&helm));
    let mut firing = BTreeSet::new();
    let mut quiet = BTreeSet::new();
    for (name, text) in test_files() {
        let file: Value =
            serde_yaml_ng::from_str(&text).unwrap_or_else(|err| panic!("{name}: {err}"));
        for group in file["tests"]
            .as_array()
            .unwrap_or_else(|| panic!("{name}: tests"))
        {
            for case in group["alert_rule_test"]
                .as_array()
                .unwrap_or_else(|| panic!("{name}: {}: alert_rule_test", group["name"]))
            {
                let alert = case["alertname"].as_str().unwrap().to_owned();
                assert!(
                    rendered.contains(&alert),
                    "{name} tests {alert}, which the chart does not render"
                );
                let fires = case["exp_alerts"].as_array().is_some_and(|a| !a.is_empty());
                let cases = if fires { &mut firing } else { &mut quiet };
                cases.insert(alert);
            }
        }
    }
    let without = |cases: &BTreeSet<String>| -> Vec<&String> {
        rendered.iter().filter(|a| !cases.contains(*a)).collect()
    };
    assert!(
        without(&firing).is_empty() && without(&quiet).is_empty(),
        "alerts without a firing case: {:?}; without a quiet case: {:?} (add them to tests/alerts/)",
        without(&firing),
        without(&quiet)
    );
}

/// A negative control: promtool, given the rendered rules, fails on an
/// expectation the rules cannot meet, and names the alert and time. Without
/// it, a harness that never really ran promtool's checks would pass.
#[test]
fn promtool_fails_on_a_wrong_expectation() {
    let Some((helm, promtool)) = binaries() else {
        return;
    };
    let rules = rendered_rules(&helm);
    let series = r#"csv_abnormal{job="olm-operator-metrics", namespace="olm", exported_namespace="team-a", name="fixture-etcd.v1.0.0", version="1.0.0", phase="Failed", reason="InstallCheckFailed"}"#;
    let firing = r"
          - exp_labels:
              severity: warning
              job: olm-operator-metrics
              namespace: olm
              exported_namespace: team-a
              name: fixture-etcd.v1.0.0
              version: 1.0.0
              phase: Failed
              reason: InstallCheckFailed
            exp_annotations:
              summary: CSV failed for over 2 minutes
              description: Failed to install Operator fixture-etcd.v1.0.0 version 1.0.0. Reason-InstallCheckFailed";
    // The first two are wrong (firing before its `for: 2m`, quiet after
    // it); the third is right, so that the failures are the expectations'
    // and not the file's.
    for (eval_time, expected, succeeds) in [
        ("1m", firing, false),
        ("2m", " []", false),
        ("2m", firing, true),
    ] {
        let test = format!(
            r"rule_files:
  - {RULE_FILE}
evaluation_interval: 1m
tests:
  - name: negative control
    interval: 1m
    input_series:
      - series: '{series}'
        values: '1x10'
    alert_rule_test:
      - eval_time: {eval_time}
        alertname: CsvAbnormalFailedOver2Min
        exp_alerts:{expected}
"
        );
        let tests = BTreeMap::from([("negative-control.yaml".to_owned(), test)]);
        let dir = stage(&rules, &tests);
        let run = promtool_test_rules(&promtool, dir.path(), &tests);
        assert_eq!(
            run.status.success(),
            succeeds,
            "CsvAbnormalFailedOver2Min expected {expected:?} at {eval_time}: promtool {}:\n{}",
            run.status,
            run.output
        );
        if !succeeds {
            assert!(
                run.output.contains("alertname: CsvAbnormalFailedOver2Min")
                    && run.output.contains(&format!("time: {eval_time}")),
                "promtool failed, but not on the expectation at {eval_time}:\n{}",
                run.output
            );
        }
    }
}
