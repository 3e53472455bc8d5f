//! The Helm chart (`charts/olm`), with the `helm` that `cargo xtask envtest`
//! builds at the pinned version.
//!
//! Without a cluster: `helm lint`, the rendering against committed snapshots
//! (default and full values), the values schema refusing bad values, every
//! pod restricted and probed, the hook carrying exactly the chart's CRDs,
//! and the RBAC no wider than the rules `docs/helm-chart.md` lists.
//!
//! On the real node: a server-side dry run of the rendered chart, then
//! `helm install` with every pod Ready, the example operator installed
//! through the chart-installed OLM, no request of OLM's ServiceAccounts
//! refused (the audit log), `helm upgrade` to a chart version whose CRD has
//! a new field and `helm rollback` with no status write failing, and `helm
//! uninstall` leaving nothing but the CRDs, the kept `operators` namespace
//! and users' objects.

// Test helpers: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use olm_e2e::workspace_root;
use serde_json::{Value, json};

/// The release name and namespace every rendering uses.
const RELEASE: &str = "olm";
const NAMESPACE: &str = "olm";

/// `helm`, or `None` (after saying why) when it is not installed outside CI.
fn helm_binary() -> Option<PathBuf> {
    olm_testkit::assets::pinned_or_skip("helm", "the chart tests")
}

fn chart() -> PathBuf {
    workspace_root().join("charts/olm")
}

/// Runs helm; `Err(stderr)` when it fails.
fn try_helm(helm: &Path, args: &[&str]) -> Result<String, String> {
    let output = Command::new(helm)
        .args(args)
        .output()
        .unwrap_or_else(|err| panic!("running {}: {err}", helm.display()));
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

fn run_helm(helm: &Path, args: &[&str]) -> String {
    try_helm(helm, args).unwrap_or_else(|err| panic!("helm {}: {err}", args.join(" ")))
}

/// `helm template` of the chart with `extra` arguments.
fn render(helm: &Path, extra: &[&str]) -> String {
    let chart = chart();
    let mut args = vec![
        "template",
        RELEASE,
        chart.to_str().unwrap(),
        "--namespace",
        NAMESPACE,
    ];
    args.extend_from_slice(extra);
    run_helm(helm, &args)
}

/// The documents of a rendering, with the template each came from.
fn documents(rendered: &str) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for text in rendered.split("\n---") {
        let source = text
            .lines()
            .find_map(|l| l.strip_prefix("# Source: "))
            .unwrap_or_default()
            .to_owned();
        let value: Value = serde_yaml_ng::from_str(text)
            .unwrap_or_else(|err| panic!("rendered YAML from {source}: {err}\n{text}"));
        if !value.is_null() {
            out.push((source, value));
        }
    }
    out
}

fn full_values() -> String {
    chart().join("ci/full-values.yaml").display().to_string()
}

#[test]
fn the_chart_lints_with_default_and_full_values() {
    let Some(helm) = helm_binary() else { return };
    let chart = chart();
    let chart = chart.to_str().unwrap();
    run_helm(&helm, &["lint", "--strict", chart]);
    run_helm(&helm, &["lint", "--strict", chart, "-f", &full_values()]);
}

/// The rendering with default and with full values, against the snapshots
/// in `tests/snapshots/helm/` (`OLM_BLESS=1` rewrites them). The CRDs the
/// upgrade hook carries are replaced by their size: the CRD files are their
/// own source of truth.
#[test]
fn the_rendering_matches_the_snapshots() {
    let Some(helm) = helm_binary() else { return };
    let full = full_values();
    for (name, extra) in [("default", vec![]), ("full", vec!["-f", full.as_str()])] {
        let rendered = normalize(&render(&helm, &extra));
        let path = workspace_root().join(format!("tests/snapshots/helm/{name}.yaml"));
        if std::env::var_os("OLM_BLESS").is_some_and(|v| v == "1") {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &rendered).unwrap();
            continue;
        }
        let expected = std::fs::read_to_string(&path).unwrap_or_else(|err| {
            panic!(
                "{}: {err}; write it with OLM_BLESS=1 cargo test -p olm-e2e --test helm_chart",
                path.display()
            )
        });
        if expected != rendered {
            let diff = similar_lines(&expected, &rendered);
            panic!(
                "the {name} rendering changed; if that is intended, run \
                 OLM_BLESS=1 cargo test -p olm-e2e --test helm_chart\n{diff}"
            );
        }
    }
}

/// The rendering with the hook's CRD copies cut to their length.
fn normalize(rendered: &str) -> String {
    let mut out = String::new();
    let mut skipping = false;
    for line in rendered.lines() {
        if skipping {
            if line.starts_with("    ") {
                continue;
            }
            skipping = false;
        }
        if let Some(file) = line
            .strip_prefix("  operators.coreos.com_")
            .or_else(|| line.strip_prefix("  config.openshift.io_"))
            .or_else(|| line.strip_prefix("  samples.operator.openshift.io_"))
            && file.ends_with(".yaml: |")
        {
            out.push_str(line.trim_end_matches(" |"));
            out.push_str(" <the CRD file>\n");
            skipping = true;
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The first lines where `a` and `b` differ, for a readable failure.
fn similar_lines(a: &str, b: &str) -> String {
    let mut out = String::new();
    for (n, (x, y)) in a.lines().zip(b.lines()).enumerate() {
        if x != y {
            out.push_str(&format!("line {}:\n- {x}\n+ {y}\n", n + 1));
            if out.len() > 2000 {
                break;
            }
        }
    }
    if out.is_empty() {
        out = format!(
            "same first lines; {} vs {} lines",
            a.lines().count(),
            b.lines().count()
        );
    }
    out
}

#[test]
fn the_values_schema_refuses_bad_values() {
    let Some(helm) = helm_binary() else { return };
    let chart = chart();
    let chart = chart.to_str().unwrap();
    let cases = [
        ("nats.mode=bogus", "/nats/mode"),
        ("nats.replicas=2", "/nats/replicas"),
        ("olmOperator.replicas=-1", "/olmOperator/replicas"),
        ("olmOperator.interval=5x", "/olmOperator/interval"),
        ("serviceLookup=etcd", "/serviceLookup"),
        ("logging.format=xml", "/logging/format"),
        ("images.digests.opm=latest", "/images/digests/opm"),
        (
            "tracing.otlpEndpoint=collector:4317",
            "/tracing/otlpEndpoint",
        ),
        ("unknownValue=1", "additional properties 'unknownValue'"),
        ("olmOperator.replica=2", "additional properties 'replica'"),
        (
            "bundleUnpacker.concurrency=0",
            "/bundleUnpacker/concurrency",
        ),
        (
            "namespaces.operators.name=Not_A_Name",
            "/namespaces/operators/name",
        ),
        ("monitoring.interval=often", "/monitoring/interval"),
        ("monitoring.enabled=maybe", "/monitoring/enabled"),
    ];
    for (set, complaint) in cases {
        let err = try_helm(&helm, &["template", RELEASE, chart, "--set", set])
            .expect_err(&format!("--set {set} was accepted"));
        assert!(err.contains(complaint), "--set {set}: {err}");
    }
    let err = try_helm(
        &helm,
        &["template", RELEASE, chart, "--set", "nats.mode=external"],
    )
    .expect_err("external NATS without a URL was accepted");
    assert!(err.contains("nats.externalUrl is required"), "{err}");
    // And the values a user is most likely to set are accepted.
    for set in [
        "nats.mode=disabled",
        "nats.mode=external,nats.externalUrl=nats://nats.messaging:4222",
        "nats.replicas=3",
        "defaultCatalogs=null",
        "networkPolicies.enabled=false",
    ] {
        try_helm(&helm, &["template", RELEASE, chart, "--set", set])
            .unwrap_or_else(|err| panic!("--set {set}: {err}"));
    }
}

/// Every container of every workload, default and full values: non-root,
/// read-only root filesystem, no capabilities, no privilege escalation,
/// seccomp RuntimeDefault, a memory limit; services probed on `/healthz`
/// and `/readyz`.
#[test]
fn every_pod_runs_restricted_with_probes_and_limits() {
    let Some(helm) = helm_binary() else { return };
    let full = full_values();
    for extra in [vec![], vec!["-f", full.as_str()]] {
        let mut workloads = 0;
        for (source, doc) in documents(&render(&helm, &extra)) {
            let kind = doc["kind"].as_str().unwrap_or_default();
            if !matches!(kind, "Deployment" | "StatefulSet" | "Job") {
                continue;
            }
            workloads += 1;
            let name = format!("{kind} {} ({source})", doc["metadata"]["name"]);
            let pod = &doc["spec"]["template"]["spec"];
            assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{name}");
            assert_eq!(
                pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault",
                "{name}"
            );
            for container in pod["containers"].as_array().unwrap() {
                let security = &container["securityContext"];
                assert_eq!(security["readOnlyRootFilesystem"], true, "{name}");
                assert_eq!(security["allowPrivilegeEscalation"], false, "{name}");
                assert_eq!(security["capabilities"]["drop"], json!(["ALL"]), "{name}");
                assert!(
                    container["resources"]["limits"]["memory"].is_string(),
                    "{name}: no memory limit"
                );
                assert!(
                    container["resources"]["requests"]["memory"].is_string(),
                    "{name}: no memory request"
                );
                if kind == "Deployment" {
                    assert_eq!(
                        container["livenessProbe"]["httpGet"]["path"], "/healthz",
                        "{name}"
                    );
                    assert_eq!(
                        container["readinessProbe"]["httpGet"]["path"], "/readyz",
                        "{name}"
                    );
                }
            }
        }
        assert!(workloads >= 7, "only {workloads} workloads rendered");
    }
}

/// Every metric name the services' registries carry once each labelled
/// family has a series (a family without one prints nothing): names as
/// Prometheus stores them (`_total` on counters, `_bucket`, `_sum` and
/// `_count` on histograms).
fn exported_metric_names() -> BTreeSet<String> {
    let mut registry = olm_runtime::metrics::MetricsRegistry::default();
    let olm = olm_operator::metrics::OperatorMetrics::register(&mut registry);
    let catalog = catalog_operator::metrics::CatalogMetrics::register(&mut registry);
    let unpacker = bundle_unpacker::metrics::UnpackMetrics::register(&mut registry);
    let packages = packageserver::metrics::Metrics::register(&mut registry);
    let marketplace = marketplace_operator::metrics::MarketplaceMetrics::register(&mut registry);
    let samples = samples_operator::metrics::SamplesMetrics::register(&mut registry);
    let csv: olm_api::csv::ClusterServiceVersion = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": "a.v1", "namespace": "ns"},
        "spec": {"displayName": "a", "install": {"strategy": "deployment"}}}))
    .unwrap();
    let failed = serde_json::from_value(json!({"phase": "Failed", "reason": "x"})).unwrap();
    olm.observe_csv(&csv, &failed);
    olm.csv_reconciles.failure("kube");
    catalog.catalog_ready("ns", "c", false);
    catalog.snapshot_taken("ns", "c");
    catalog.install_plan_warning();
    catalog.resolution(Duration::from_millis(1), true);
    unpacker.unpacked("failed", "x", 0.1);
    unpacker.retried();
    unpacker.work("watch");
    packages.api.observe("get", 200, Duration::from_millis(1));
    packages.certs.rotated("issued");
    packages
        .certs
        .set_expiry(Some(std::time::SystemTime::now()), None);
    marketplace.set_sources([("s", "Success")]);
    marketplace.wrote("create", true);
    samples.observe(&samples_operator::metrics::MetricsSnapshot {
        reporting: true,
        degraded: false,
        invalid_config: false,
        registry_unreachable_at_bootstrap: false,
        streams: vec![("s".to_owned(), false)],
        missing_secret: false,
        missing_registry_credential: false,
    });
    samples.retried_import("s");
    let text = registry.encode().unwrap();
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let (name, type_) = rest.split_once(' ').unwrap();
        let suffixes: &[&str] = match type_ {
            "counter" => &["_total"],
            "histogram" => &["_bucket", "_sum", "_count"],
            _ => &[""],
        };
        for suffix in suffixes {
            names.insert(format!("{name}{suffix}"));
        }
    }
    names
}

/// The metric names a PromQL expression reads: identifiers followed by a
/// selector, a range, or nothing, less PromQL's functions and keywords.
fn metric_names_in(expr: &str) -> BTreeSet<String> {
    const NOT_METRICS: &[&str] = &[
        "sum",
        "by",
        "increase",
        "rate",
        "last_over_time",
        "time",
        "and",
        "or",
        "unless",
        "without",
        "max",
        "min",
        "avg",
        "count",
        "histogram_quantile",
        "vector",
        "offset",
    ];
    let mut names = BTreeSet::new();
    let mut in_braces = false;
    let mut in_string = false;
    // After `by` or `without`, the parenthesised label list is no metric.
    let mut grouping = false;
    let mut in_grouping = false;
    let mut word = String::new();
    let flush = |word: &mut String, names: &mut BTreeSet<String>, grouping: &mut bool| {
        if word == "by" || word == "without" {
            *grouping = true;
        }
        let is_name = word
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && !NOT_METRICS.contains(&word.as_str());
        if is_name {
            names.insert(word.clone());
        }
        word.clear();
    };
    for c in expr.chars() {
        if in_string {
            in_string = c != '"';
            continue;
        }
        if in_grouping {
            in_grouping = c != ')';
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' => {
                flush(&mut word, &mut names, &mut grouping);
                in_braces = true;
            }
            '}' => in_braces = false,
            _ if in_braces => {}
            c if c.is_ascii_alphanumeric() || c == '_' || c == ':' => word.push(c),
            '(' if grouping || word == "by" || word == "without" => {
                word.clear();
                grouping = false;
                in_grouping = true;
            }
            _ => flush(&mut word, &mut names, &mut grouping),
        }
    }
    flush(&mut word, &mut names, &mut grouping);
    // Range durations (`5m`) and numbers are no metrics.
    names.retain(|n| !n.chars().next().is_some_and(|c| c.is_ascii_digit()));
    names
}

/// With monitoring on: a ServiceMonitor per service, upstream's alerts by
/// name and expression, ours, and no expression naming a metric the
/// services do not export.
#[test]
fn the_alerts_are_upstreams_and_read_only_exported_metrics() {
    let Some(helm) = helm_binary() else { return };
    let docs = documents(&render(
        &helm,
        &[
            "--set",
            "monitoring.enabled=true",
            "--set",
            "marketplaceOperator.enabled=true",
            "--set",
            "samplesOperator.enabled=true",
        ],
    ));
    let monitors: BTreeSet<String> = docs
        .iter()
        .filter(|(_, d)| d["kind"] == "ServiceMonitor")
        .map(|(_, d)| d["metadata"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        monitors,
        [
            "bundle-unpacker",
            "catalog-operator",
            "marketplace-operator",
            "olm-operator",
            "packageserver",
            "samples-operator"
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect()
    );
    let rule = docs
        .iter()
        .find(|(_, d)| d["kind"] == "PrometheusRule")
        .map(|(_, d)| d)
        .expect("a PrometheusRule");
    let alerts: BTreeMap<String, String> = rule["spec"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap().iter())
        .map(|r| {
            (
                r["alert"].as_str().unwrap().to_owned(),
                r["expr"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    // Upstream's, word for word.
    for (alert, expr) in [
        (
            "CsvAbnormalFailedOver2Min",
            r#"last_over_time(csv_abnormal{phase="Failed"}[5m])"#,
        ),
        (
            "CsvAbnormalOver30Min",
            r#"last_over_time(csv_abnormal{phase=~"(Replacing|Pending|Deleting|Unknown)"}[5m])"#,
        ),
        (
            "InstallPlanStepAppliedWithWarnings",
            "sum by(namespace) (increase(installplan_warnings_total[5m])) > 0",
        ),
        (
            "OperatorHubSourceError",
            r#"catalogsource_ready{exported_namespace="olm"} == 0"#,
        ),
        ("SamplesDegraded", "openshift_samples_degraded_info == 1"),
        (
            "SamplesInvalidConfig",
            "openshift_samples_invalidconfig_info == 1",
        ),
        (
            "SamplesMissingSecret",
            r#"openshift_samples_invalidsecret_info{reason="missing_secret"} == 1"#,
        ),
        (
            "SamplesMissingTBRCredential",
            r#"openshift_samples_invalidsecret_info{reason="missing_tbr_credential"} == 1"#,
        ),
        (
            "SamplesTBRInaccessibleOnBoot",
            "openshift_samples_tbr_inaccessible_info == 1",
        ),
        (
            "SamplesImagestreamImportFailing",
            "sum(openshift_samples_retry_imagestream_import_total) - sum(openshift_samples_retry_imagestream_import_total offset 30m) > sum(openshift_samples_failed_imagestream_import_info)",
        ),
        (
            "SamplesRetriesMissingOnImagestreamImportFailing",
            "sum(openshift_samples_failed_imagestream_import_info) > sum(openshift_samples_retry_imagestream_import_total) - sum(openshift_samples_retry_imagestream_import_total offset 30m)",
        ),
    ] {
        assert_eq!(alerts.get(alert).map(String::as_str), Some(expr), "{alert}");
    }
    for ours in [
        "OLMCatalogSourceUnhealthy",
        "OLMBundleUnpackFailing",
        "OLMServingCertificateNearExpiry",
    ] {
        assert!(alerts.contains_key(ours), "{ours}");
    }
    let exported = exported_metric_names();
    for (alert, expr) in &alerts {
        let read = metric_names_in(expr);
        assert!(!read.is_empty(), "{alert}: no metric found in {expr}");
        for name in read {
            assert!(
                exported.contains(&name),
                "{alert} reads {name}, which no OLM service exports (exported: {exported:?})"
            );
        }
    }
    // The dashboard: valid JSON, and every panel reads exported metrics.
    let dashboard = docs
        .iter()
        .find(|(_, d)| d["kind"] == "ConfigMap" && d["metadata"]["name"] == "olm-dashboard")
        .map(|(_, d)| d)
        .expect("the dashboard ConfigMap");
    assert_eq!(dashboard["metadata"]["labels"]["grafana_dashboard"], "1");
    let dashboard: Value =
        serde_json::from_str(dashboard["data"]["olm.json"].as_str().unwrap()).unwrap();
    let panels = dashboard["panels"].as_array().unwrap();
    assert!(panels.len() >= 10, "{} panels", panels.len());
    for panel in panels {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            let read = metric_names_in(expr);
            assert!(!read.is_empty(), "{}: no metric in {expr}", panel["title"]);
            for name in read {
                assert!(
                    exported.contains(&name),
                    "panel {} reads {name}, which no OLM service exports",
                    panel["title"]
                );
            }
        }
    }
    // The extraction itself.
    assert_eq!(
        metric_names_in(r#"sum by (namespace) (increase(a_total{x="y"}[5m])) > 0 and b"#),
        ["a_total", "b"].iter().map(|s| (*s).to_owned()).collect()
    );
}

/// The samples Config CRD's file in `crds/`.
const SAMPLES_CRD_FILE: &str = "samples.operator.openshift.io_configs.yaml";

/// The upgrade hook's ConfigMaps hold exactly the files of `crds/`, its
/// ClusterRole names exactly those CRDs and its Job mounts exactly those
/// ConfigMaps; but the samples Config CRD only when samples-operator is
/// enabled, so that on OpenShift, where OpenShift's own samples operator
/// runs and ours is off, the hook does not replace OpenShift's CRD.
#[test]
fn the_crd_hook_carries_exactly_the_chart_crds() {
    let Some(helm) = helm_binary() else { return };
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(chart().join("crds")).unwrap() {
        let path = entry.unwrap().path();
        let content = std::fs::read_to_string(&path).unwrap();
        files.insert(
            path.file_name().unwrap().to_string_lossy().into_owned(),
            content,
        );
    }
    assert!(files.contains_key(SAMPLES_CRD_FILE), "{files:?}");
    let without_samples: BTreeMap<String, String> = files
        .iter()
        .filter(|(file, _)| *file != SAMPLES_CRD_FILE)
        .map(|(file, content)| (file.clone(), content.clone()))
        .collect();
    // By default (`auto`, and `helm template` sees no OpenShift APIs) the
    // samples operator is off.
    assert_hook_carries(&documents(&render(&helm, &[])), &without_samples);
    assert_hook_carries(
        &documents(&render(&helm, &["--set", "samplesOperator.enabled=true"])),
        &files,
    );
}

/// The upgrade hook of a rendering carries exactly `files` (name to
/// content): one ConfigMap each, their CRDs named in the ClusterRole, the
/// ConfigMaps projected into the Job's volume.
fn assert_hook_carries(docs: &[(String, Value)], files: &BTreeMap<String, String>) {
    let mut carried = BTreeMap::new();
    let mut config_maps = BTreeSet::new();
    for (_, doc) in docs {
        let name = doc["metadata"]["name"].as_str().unwrap_or_default();
        if doc["kind"] == "ConfigMap" && name.starts_with("olm-crd-") {
            config_maps.insert(name.to_owned());
            for (file, content) in doc["data"].as_object().unwrap() {
                carried.insert(file.clone(), content.as_str().unwrap().to_owned());
            }
        }
    }
    assert_eq!(
        carried.keys().collect::<Vec<_>>(),
        files.keys().collect::<Vec<_>>()
    );
    let mut names = BTreeSet::new();
    for (file, content) in files {
        assert_eq!(
            carried[file].trim_end(),
            content.trim_end(),
            "{file} differs"
        );
        let crd: Value = serde_yaml_ng::from_str(content).unwrap();
        names.insert(crd["metadata"]["name"].as_str().unwrap().to_owned());
    }
    let hook = |kind: &str| {
        docs.iter()
            .find(|(_, d)| d["kind"] == kind && d["metadata"]["name"] == "olm-crd-upgrade")
            .map(|(_, d)| d)
            .unwrap_or_else(|| panic!("no {kind} olm-crd-upgrade"))
    };
    let named: BTreeSet<String> = hook("ClusterRole")["rules"][0]["resourceNames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(named, names);
    let projected: BTreeSet<String> =
        hook("Job")["spec"]["template"]["spec"]["volumes"][0]["projected"]["sources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|source| source["configMap"]["name"].as_str().unwrap().to_owned())
            .collect();
    assert_eq!(projected, config_maps);
}

/// One RBAC rule as the chart grants it or the docs list it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Rule {
    account: String,
    scope: String,
    groups: Vec<String>,
    resources: Vec<String>,
    names: Vec<String>,
    verbs: Vec<String>,
}

fn sorted(value: &Value) -> Vec<String> {
    let mut list: Vec<String> = value
        .as_array()
        .map(|a| {
            a.iter()
                .map(|v| v.as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default();
    list.sort();
    list
}

/// Every rule the rendering grants a ServiceAccount, through the Roles and
/// ClusterRoles it renders; and the bindings to roles it does not render
/// (`system:auth-delegator`, ...), as `(account, binding, role)`.
fn granted(docs: &[(String, Value)]) -> (Vec<Rule>, BTreeSet<(String, String, String)>) {
    let roles: BTreeMap<(String, String), &Value> = docs
        .iter()
        .filter(|(_, d)| d["kind"] == "Role" || d["kind"] == "ClusterRole")
        .map(|(_, d)| {
            (
                (
                    d["kind"].as_str().unwrap().to_owned(),
                    d["metadata"]["name"].as_str().unwrap().to_owned(),
                ),
                d,
            )
        })
        .collect();
    let mut rules = Vec::new();
    let mut external = BTreeSet::new();
    for (_, binding) in docs
        .iter()
        .filter(|(_, d)| d["kind"] == "RoleBinding" || d["kind"] == "ClusterRoleBinding")
    {
        let role_kind = binding["roleRef"]["kind"].as_str().unwrap().to_owned();
        let role_name = binding["roleRef"]["name"].as_str().unwrap().to_owned();
        // A Role in the release's namespace is "namespace"; in another
        // namespace, that namespace's name.
        let scope = if binding["kind"] == "ClusterRoleBinding" {
            "cluster"
        } else if binding["metadata"]["namespace"] == NAMESPACE {
            "namespace"
        } else {
            binding["metadata"]["namespace"].as_str().unwrap()
        };
        for subject in binding["subjects"].as_array().unwrap() {
            assert_eq!(subject["kind"], "ServiceAccount", "{binding}");
            let account = subject["name"].as_str().unwrap().to_owned();
            match roles.get(&(role_kind.clone(), role_name.clone())) {
                Some(role) => {
                    for rule in role["rules"].as_array().unwrap() {
                        rules.push(Rule {
                            account: account.clone(),
                            scope: scope.to_owned(),
                            groups: sorted(&rule["apiGroups"]),
                            resources: sorted(&rule["resources"]),
                            names: sorted(&rule["resourceNames"]),
                            verbs: sorted(&rule["verbs"]),
                        });
                    }
                }
                None => {
                    external.insert((
                        account,
                        binding["kind"].as_str().unwrap().to_owned(),
                        role_name.clone(),
                    ));
                }
            }
        }
    }
    rules.sort();
    (rules, external)
}

/// The cells of a Markdown list cell: "`a`, `b`" or "—".
fn cell_list(cell: &str) -> Vec<String> {
    let cell = cell.trim();
    if cell == "—" {
        return Vec::new();
    }
    let mut list: Vec<String> = cell
        .split(", ")
        .map(|item| item.trim().trim_matches('`').replace("\"\"", ""))
        .collect();
    list.sort();
    list
}

/// The rules and bindings `docs/helm-chart.md` lists.
fn documented() -> (Vec<Rule>, BTreeSet<(String, String, String)>) {
    let text = std::fs::read_to_string(workspace_root().join("docs/helm-chart.md")).unwrap();
    let mut rules = Vec::new();
    let mut bindings = BTreeSet::new();
    let mut table = "";
    for line in text.lines() {
        if line.starts_with("<!-- rbac-rules -->") {
            table = "rules";
            continue;
        }
        if line.starts_with("<!-- rbac-bindings -->") {
            table = "bindings";
            continue;
        }
        if line.starts_with("<!-- end -->") {
            table = "";
            continue;
        }
        if table.is_empty() || !line.starts_with('|') || line.starts_with("|---") {
            continue;
        }
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
        if cells[0] == "ServiceAccount" {
            continue;
        }
        if table == "rules" {
            assert_eq!(cells.len(), 7, "{line}");
            rules.push(Rule {
                account: cells[0].to_owned(),
                scope: cells[1].to_owned(),
                groups: cell_list(cells[2]),
                resources: cell_list(cells[3]),
                names: cell_list(cells[4]),
                verbs: cell_list(cells[5]),
            });
            assert!(!cells[6].is_empty(), "a rule without a reason: {line}");
        } else {
            assert_eq!(cells.len(), 4, "{line}");
            bindings.insert((
                cells[0].to_owned(),
                cells[1].to_owned(),
                cells[2].trim_matches('`').to_owned(),
            ));
        }
    }
    rules.sort();
    (rules, bindings)
}

/// What the chart grants is exactly what `docs/helm-chart.md` lists, rule
/// by rule, each with its reason: widening the chart's RBAC without saying
/// why fails here. With `--service-lookup cluster-ip`, packageserver may
/// also read Services, and nothing else changes.
#[test]
fn the_rbac_is_exactly_the_documented_rules() {
    let Some(helm) = helm_binary() else { return };
    // Every optional service on, so that every ServiceAccount is seen.
    let all = [
        "--set",
        "marketplaceOperator.enabled=true,samplesOperator.enabled=true",
    ];
    let (granted_rules, granted_bindings) = granted(&documents(&render(&helm, &all)));
    let (listed_rules, listed_bindings) = documented();
    let extra: Vec<_> = granted_rules
        .iter()
        .filter(|r| !listed_rules.contains(r))
        .collect();
    let missing: Vec<_> = listed_rules
        .iter()
        .filter(|r| !granted_rules.contains(r))
        .collect();
    assert!(
        extra.is_empty() && missing.is_empty(),
        "granted but not documented: {extra:#?}\ndocumented but not granted: {missing:#?}"
    );
    assert_eq!(granted_bindings, listed_bindings);

    let (cluster_ip, _) = granted(&documents(&render(
        &helm,
        &[
            "--set",
            "serviceLookup=cluster-ip,marketplaceOperator.enabled=true,samplesOperator.enabled=true",
        ],
    )));
    let added: Vec<_> = cluster_ip
        .iter()
        .filter(|r| !granted_rules.contains(r))
        .collect();
    assert_eq!(
        added,
        [&Rule {
            account: "packageserver".into(),
            scope: "cluster".into(),
            groups: vec![String::new()],
            resources: vec!["services".into()],
            names: vec![],
            verbs: vec!["get".into()],
        }]
    );
    // No wildcard verb anywhere, and a wildcard resource only where listed.
    for rule in &granted_rules {
        assert!(!rule.verbs.iter().any(|v| v == "*"), "{rule:?}");
    }
    let wildcards: Vec<_> = granted_rules
        .iter()
        .filter(|r| r.resources.iter().any(|x| x == "*"))
        .map(|r| (r.account.as_str(), r.verbs.clone()))
        .collect();
    assert_eq!(wildcards, [("catalog-operator", vec!["list".to_owned()])]);
}

/// The real-node part: dry run, install, an operator through it, the audit
/// log, upgrade and rollback, uninstall.
mod on_a_real_node {
    use super::*;
    use k8s_openapi::api::{apps::v1::Deployment, core::v1::Pod};
    use kube::{
        Api,
        api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams},
    };
    use olm_api::catalog_source::CatalogSource;
    use olm_e2e::{
        eventually,
        harness::{
            ServiceOptions, create_operator_group, create_subscription, describe, init_logs,
            start_services_with, wait_installed,
        },
        workspace_binary,
    };
    use olm_images::example;
    use olm_testkit::{
        ControlPlaneOptions,
        node::{Mirror, NODE_IP, NODE_NAME, NODE_TAINT, NodeOptions, RealNode},
        registry::Registry,
    };

    /// How long a step on the real node may take.
    const NODE_WAIT: Duration = Duration::from_secs(240);

    /// Runs the built `kubectl-olm` with `args` in `namespace`: (exit
    /// status, stdout, stderr).
    async fn kubectl_olm(namespace: &str, args: &[&str]) -> (i32, String, String) {
        let out = olm_e2e::kubectl_olm(namespace, args).await;
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// The tag of the example catalog the chart's default catalog serves
    /// (the adopted namespace's catalog serves `latest`).
    const DEFAULT_TAG: &str = "default";

    /// The registry the incident's content wrongly points at.
    const OUTSIDE: &str = "staging.example.com";

    /// The `PromotionBlocked` condition of the chart's default catalog, as
    /// (status, reason, message).
    async fn promotion_condition(
        client: &kube::Client,
    ) -> Result<(String, String, String), String> {
        let catalog = Api::<CatalogSource>::namespaced(client.clone(), NAMESPACE)
            .get("example-catalog")
            .await
            .map_err(|e| e.to_string())?;
        let status = catalog.status.unwrap_or_default();
        status
            .conditions
            .iter()
            .find(|c| c.type_ == "PromotionBlocked")
            .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
            .ok_or_else(|| format!("no PromotionBlocked condition: {:?}", status.conditions))
    }

    /// The incident that started the promotion guard, replayed: the default
    /// catalog's image is re-pushed with content whose new bundle lives on a
    /// registry outside the policy. Nothing new is installed, the running
    /// operator is untouched, the condition names the registry; fixed
    /// content clears it and the upgrade goes through with nothing left
    /// behind. Returns how long blocking and clearing took.
    async fn incident_replay(
        client: &kube::Client,
        namespace: &str,
        opm: &Path,
        pod_host: &str,
        base: &str,
    ) -> (Duration, Duration) {
        let started = Instant::now();
        example::publish_relocated(
            opm,
            pod_host,
            &["0.1.0", "0.2.0"],
            DEFAULT_TAG,
            base,
            &[("0.2.0", OUTSIDE)],
        )
        .unwrap();
        let (_, reason, message) = eventually("the promotion guard blocks", NODE_WAIT, || async {
            match promotion_condition(client).await? {
                blocked if blocked.0 == "True" => Ok(blocked),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
        let blocked = started.elapsed();
        assert_eq!(reason, "BundleRegistryNotAllowed", "{message}");
        for needle in [OUTSIDE, "example-operator.v0.2.0"] {
            assert!(message.contains(needle), "{needle} not in {message}");
        }
        // Two polls later, nothing new was planned and the operator runs on.
        tokio::time::sleep(Duration::from_secs(20)).await;
        let plans = kubectl(
            &["-n", namespace, "get", "installplans", "-o", "json"],
            None,
        )
        .unwrap();
        assert!(
            !plans.contains("example-operator.v0.2.0") && !plans.contains(OUTSIDE),
            "an InstallPlan came from the refused content:\n{plans}"
        );
        let csv = csvs(client, namespace)
            .get("example-operator.v0.1.0")
            .await
            .unwrap();
        assert_eq!(csv.data["status"]["phase"], "Succeeded");
        assert!(
            Api::<Deployment>::namespaced(client.clone(), namespace)
                .get("example-operator")
                .await
                .unwrap()
                .status
                .and_then(|s| s.available_replicas)
                .unwrap_or(0)
                > 0,
            "the running operator was disturbed"
        );

        // The content is fixed: the guard clears, the upgrade goes through.
        let fixed = Instant::now();
        example::publish(opm, pod_host, &["0.1.0", "0.2.0"], DEFAULT_TAG, base).unwrap();
        let upgraded = tokio::time::timeout(
            NODE_WAIT,
            wait_installed(
                client,
                namespace,
                example::PACKAGE,
                "example-operator.v0.2.0",
            ),
        )
        .await;
        if upgraded.is_err() {
            panic!(
                "no upgrade to the fixed content:\n{}\n{:?}",
                describe(client, namespace).await,
                promotion_condition(client).await
            );
        }
        let cleared = fixed.elapsed();
        let (status, reason, _) = promotion_condition(client).await.unwrap();
        assert_eq!(
            (status.as_str(), reason.as_str()),
            ("False", "ContentPromoted")
        );
        let left = kubectl(
            &[
                "-n",
                NAMESPACE,
                "get",
                "pods",
                "-l",
                "catalogsource.operators.coreos.com/update",
                "-o",
                "name",
            ],
            None,
        )
        .unwrap();
        assert_eq!(left.trim(), "", "update pods left behind");
        let plans = kubectl(
            &[
                "-n",
                namespace,
                "get",
                "installplans",
                "-o",
                "jsonpath={.items[*].status.phase}",
            ],
            None,
        )
        .unwrap();
        assert!(
            plans.split_whitespace().all(|phase| phase == "Complete"),
            "InstallPlans not Complete: {plans}"
        );
        (blocked, cleared)
    }

    fn kubectl(args: &[&str], stdin: Option<&str>) -> Result<String, String> {
        let mut command = olm_testkit::control_plane().kubectl();
        command.args(args);
        let output = match stdin {
            None => command.output().unwrap(),
            Some(input) => {
                use std::io::Write as _;
                command
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped());
                let mut child = command.spawn().unwrap();
                child
                    .stdin
                    .take()
                    .unwrap()
                    .write_all(input.as_bytes())
                    .unwrap();
                child.wait_with_output().unwrap()
            }
        };
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&output.stderr).into_owned())
        }
    }

    /// helm against the test cluster.
    fn helm_on_cluster(helm: &Path, args: &[&str]) -> String {
        let kubeconfig = olm_testkit::control_plane()
            .kubeconfig_path()
            .display()
            .to_string();
        let mut all = vec!["--kubeconfig", kubeconfig.as_str()];
        all.extend_from_slice(args);
        try_helm(helm, &all)
            .unwrap_or_else(|err| panic!("helm {}: {err}\n{}", args.join(" "), cluster_report()))
    }

    /// What the cluster looks like, for a failure report: OLM's pods and
    /// their events, and the logs of those not Ready.
    fn cluster_report() -> String {
        let mut report = String::new();
        for args in [
            vec![
                "get",
                "pods,jobs,deployments,statefulsets",
                "-A",
                "-o",
                "wide",
            ],
            vec!["-n", NAMESPACE, "get", "events", "--sort-by=.lastTimestamp"],
        ] {
            report.push_str(&kubectl(&args, None).unwrap_or_else(|e| e));
            report.push('\n');
        }
        let pods =
            kubectl(&["-n", NAMESPACE, "get", "pods", "-o", "name"], None).unwrap_or_default();
        for pod in pods.lines() {
            report.push_str(&format!("--- logs of {pod}\n"));
            let logs = kubectl(
                &[
                    "-n",
                    NAMESPACE,
                    "logs",
                    pod,
                    "--all-containers",
                    "--tail=30",
                ],
                None,
            )
            .unwrap_or_else(|e| e);
            report.push_str(&logs);
        }
        report
    }

    /// Every object of every listable kind, as `kind/namespace/name`.
    fn inventory() -> BTreeSet<String> {
        let kinds = kubectl(&["api-resources", "--verbs=list", "-o", "name"], None).unwrap();
        let kinds: Vec<&str> = kinds
            .lines()
            .filter(|k| !k.starts_with("events") && !k.contains("packagemanifests"))
            .collect();
        let listed = kubectl(
            &[
                "get",
                &kinds.join(","),
                "-A",
                "-o",
                "jsonpath={range .items[*]}{.kind}/{.metadata.namespace}/{.metadata.name}{\"\\n\"}{end}",
            ],
            None,
        )
        .unwrap();
        listed.lines().map(str::to_owned).collect()
    }

    /// The pods of the release in `olm`, all Ready (the Job's finished pods
    /// aside).
    async fn olm_pods_ready(client: &kube::Client) -> Vec<Pod> {
        let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
        eventually("every OLM pod Ready", NODE_WAIT, || async {
            let list = pods
                .list(&ListParams::default().labels("app.kubernetes.io/part-of=olm"))
                .await
                .map_err(|e| e.to_string())?;
            let running: Vec<Pod> = list
                .items
                .into_iter()
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Succeeded"))
                .collect();
            let unready: Vec<String> = running
                .iter()
                .filter(|p| {
                    !p.status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
                })
                .map(|p| p.metadata.name.clone().unwrap_or_default())
                .collect();
            if unready.is_empty() && running.len() >= 6 {
                Ok(running)
            } else {
                Err(format!("{} pods, unready: {unready:?}", running.len()))
            }
        })
        .await
    }

    /// Every request logged since the last read, kept for [`refused`] too.
    fn audit_requests(log: &mut Audit) -> Vec<olm_testkit::audit::Request> {
        let new = log.0.read_new().unwrap();
        log.1.extend(new);
        log.1.clone()
    }

    /// The audit log and what has been read from it.
    struct Audit(
        olm_testkit::audit::AuditLog,
        Vec<olm_testkit::audit::Request>,
    );

    /// Requests of OLM's ServiceAccounts the API server refused (403), or
    /// whose status write failed, since the last call.
    fn refused(log: &mut Audit) -> Vec<String> {
        audit_requests(log);
        std::mem::take(&mut log.1)
            .into_iter()
            .filter(|r| {
                r.user
                    .starts_with(&format!("system:serviceaccount:{NAMESPACE}:"))
            })
            .filter(|r| {
                r.code == Some(403)
                    || (r.resource.ends_with("/status")
                        && r.code.is_some_and(|c| c >= 400 && c != 404 && c != 409))
            })
            .map(|r| {
                format!(
                    "{} {} {} in {:?}: {:?}",
                    r.user, r.verb, r.resource, r.namespace, r.code
                )
            })
            .collect()
    }

    /// Resident memory of each OLM service process on this host, in MiB.
    fn service_rss() -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(exe) = std::fs::read_link(entry.path().join("exe")) else {
                continue;
            };
            let name = exe
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            if !olm_images::SERVICES.contains(&name.as_str()) && name != "nats-server" {
                continue;
            }
            let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else {
                continue;
            };
            let rss = status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
                .unwrap_or(0);
            let top = out.entry(name).or_insert(0);
            *top = (*top).max(rss / 1024);
        }
        out
    }

    fn csvs(client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(
            client.clone(),
            namespace,
            &ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk("operators.coreos.com", "v1alpha1", "ClusterServiceVersion"),
                "clusterserviceversions",
            ),
        )
    }

    /// A copy of the chart as a newer version whose OperatorGroup CRD has
    /// one more field, as a chart upgrade that extends an API would be.
    fn newer_chart(dir: &Path) -> PathBuf {
        let copy = dir.join("olm");
        let status = Command::new("cp")
            .args(["-r", chart().to_str().unwrap(), copy.to_str().unwrap()])
            .status()
            .unwrap();
        assert!(status.success());
        let manifest = copy.join("Chart.yaml");
        let text = std::fs::read_to_string(&manifest).unwrap();
        std::fs::write(
            &manifest,
            text.replacen("\nversion: 0.1.0", "\nversion: 0.1.1", 1),
        )
        .unwrap();
        let crd_path = copy.join("crds/operators.coreos.com_operatorgroups.yaml");
        let mut crd: Value =
            serde_yaml_ng::from_str(&std::fs::read_to_string(&crd_path).unwrap()).unwrap();
        for version in crd["spec"]["versions"].as_array_mut().unwrap() {
            version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["upgradeProbe"] =
                json!({"type": "string", "description": "Added by a newer chart."});
        }
        std::fs::write(&crd_path, serde_yaml_ng::to_string(&crd).unwrap()).unwrap();
        copy
    }

    async fn has_upgrade_probe(client: &kube::Client) -> bool {
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        let crd = crds
            .get("operatorgroups.operators.coreos.com")
            .await
            .unwrap();
        let crd = serde_json::to_value(crd).unwrap();
        crd["spec"]["versions"].as_array().unwrap().iter().all(|v| {
            !v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["upgradeProbe"]
                .is_null()
        })
    }

    #[tokio::test]
    async fn the_chart_installs_olm_that_installs_an_operator_and_upgrades_rolls_back_and_uninstalls()
     {
        init_logs();
        let Some(helm) = helm_binary() else { return };
        if let Some(reason) = RealNode::unsupported() {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must run the real-node tests: {reason}"
            );
            eprintln!("skipping the chart on the real node: {reason}");
            return;
        }
        let version = env!("CARGO_PKG_VERSION");
        // Start-up blocks on runtimes of its own.
        let (registry, node, started) = std::thread::spawn(move || {
            let started = Instant::now();
            let registry = Registry::start_listening_on("0.0.0.0").unwrap();
            let plane = olm_testkit::ControlPlane::start_with(&ControlPlaneOptions {
                audit: true,
                ..ControlPlaneOptions::for_real_node()
            })
            .unwrap();
            let plane = olm_testkit::set_control_plane(plane).unwrap();
            let host = registry.host();
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime
                .block_on(async {
                    olm_images::push_node_images(
                        &host,
                        &workspace_binary("opm"),
                        &workspace_binary("example-operator"),
                        "e2e",
                    )
                    .await?;
                    olm_images::push_service_images(
                        &host,
                        workspace_binary("olm-operator").parent().unwrap(),
                        version,
                        "e2e",
                    )
                    .await
                })
                .unwrap();
            let mut mirrors: Vec<Mirror> = olm_images::node_mirrors(&host)
                .into_iter()
                .map(|(registry, endpoint)| Mirror { registry, endpoint })
                .collect();
            // Pods reach the registry at the node's address.
            mirrors.push(Mirror {
                registry: registry.host_at(NODE_IP),
                endpoint: format!("http://{host}"),
            });
            let node = RealNode::start(plane, &NodeOptions { mirrors }).unwrap();
            (registry, node, started.elapsed())
        })
        .join()
        .unwrap();
        eprintln!(
            "control plane, images and node: {:.1} s",
            started.as_secs_f64()
        );
        let plane = olm_testkit::control_plane();
        let client = plane.client().await;
        let pod_host = registry.host_at(NODE_IP);
        let opm = workspace_binary("opm");
        let base = format!("{pod_host}/olm-rs/opm:{version}");
        for tag in ["latest", DEFAULT_TAG] {
            example::publish(&opm, &pod_host, &["0.1.0"], tag, &base).unwrap();
        }

        let scratch = tempfile::tempdir().unwrap();
        let values = scratch.path().join("values.yaml");
        let toleration = json!({"key": NODE_TAINT, "operator": "Exists", "effect": "NoSchedule"});
        std::fs::write(
            &values,
            serde_yaml_ng::to_string(&json!({
                "tolerations": [toleration],
                "nodeSelector": {"kubernetes.io/hostname": NODE_NAME},
                "serviceLookup": "cluster-ip",
                // The default catalog is made by marketplace-operator.
                "marketplaceOperator": {"enabled": true},
                // `auto`: on, since the image and template APIs are served;
                // registry.redhat.io cannot be reached from here.
                "samplesOperator": {"registryProbe": "none"},
                "insecureRegistries": [pod_host],
                // Bundles come from the node's registry, and nowhere else.
                "allowedRegistries": [pod_host],
                "defaultCatalogs": [{
                    "name": "example-catalog",
                    "image": example::catalog_image(&pod_host, DEFAULT_TAG),
                    "displayName": "Example operators",
                    "pollInterval": "10s",
                }],
            }))
            .unwrap(),
        )
        .unwrap();
        let values = values.display().to_string();
        let chart_path = chart().display().to_string();

        // OpenShift's image and template APIs, stood in for, so that the
        // chart's samplesOperator `auto` finds them and runs it.
        let stand_ins = workspace_root().join("deploy/dev/openshift-image-and-template-apis.yaml");
        apply_crds_file(&stand_ins);
        kubectl(&["create", "namespace", "openshift"], None).unwrap();

        let before = inventory();

        // Drop-in: an operator installed by an OLM running under upstream's
        // CRDs (here our services, in-process, as the previous OLM) is
        // adopted by the chart with no reinstall.
        let adopted = adopt_from_upstream(&client, &pod_host).await;

        // A server-side dry run of everything the chart renders, on a
        // cluster that has OLM's CRDs (upstream's, or the chart's as `helm
        // install` gives it them first) and the namespaces (a dry run creates
        // nothing, so the objects of a namespace the chart creates need it to
        // exist: `operators` is made with the marks by which Helm adopts it
        // into the release).
        kubectl(&["create", "namespace", NAMESPACE], None).unwrap();
        kubectl(
            &[
                "create",
                "namespace",
                "operators",
                "--dry-run=client",
                "-o",
                "json",
            ],
            None,
        )
        .map(|json| {
            let mut namespace: Value = serde_json::from_str(&json).unwrap();
            namespace["metadata"]["labels"] = json!({"app.kubernetes.io/managed-by": "Helm"});
            namespace["metadata"]["annotations"] = json!({
                "meta.helm.sh/release-name": RELEASE,
                "meta.helm.sh/release-namespace": NAMESPACE,
            });
            kubectl(&["create", "-f", "-"], Some(&namespace.to_string())).unwrap();
        })
        .unwrap();
        if adopted.is_none() {
            apply_crds(&chart().join("crds"));
        }
        let rendered = render(&helm, &["-f", &values]);
        kubectl(
            &[
                "apply",
                "--server-side",
                "--force-conflicts",
                "--dry-run=server",
                "-f",
                "-",
            ],
            Some(&rendered),
        )
        .unwrap_or_else(|err| panic!("server-side dry run: {err}"));

        let mut audit = Audit(
            olm_testkit::audit::AuditLog::from_end(&plane.audit_log().unwrap()).unwrap(),
            Vec::new(),
        );
        let install_started = Instant::now();
        helm_on_cluster(
            &helm,
            &[
                "install",
                RELEASE,
                &chart_path,
                "-n",
                NAMESPACE,
                "-f",
                &values,
                "--wait",
                "--timeout",
                "3m",
            ],
        );
        let pods = olm_pods_ready(&client).await;
        let install_time = install_started.elapsed();
        for pod in &pods {
            assert_eq!(
                pod.spec.as_ref().unwrap().node_name.as_deref(),
                Some(NODE_NAME),
                "{:?}",
                pod.metadata.name
            );
        }

        // The PackageManifest API answers through the aggregator.
        let manifests = eventually(
            "packagemanifests list example-operator",
            NODE_WAIT,
            || async {
                let out = kubectl(
                    &["get", "packagemanifests", "-n", "default", "-o", "name"],
                    None,
                )?;
                if out.contains("example-operator") {
                    Ok(out)
                } else {
                    Err(out)
                }
            },
        )
        .await;
        assert!(manifests.contains("example-operator"), "{manifests}");

        // An operator, installed end to end by the chart-installed OLM, as
        // an admin would: found with `kubectl olm search` (PackageManifests
        // through the aggregator) and installed with `kubectl olm install`,
        // which reads the catalog and default channel from them.
        let ns = plane.namespace("helm-e2e").await;
        let namespace = ns.name();
        let found = kubectl_olm(namespace, &["search", "example"]).await;
        assert_eq!(found.0, 0, "{found:?}");
        assert!(
            found.1.lines().any(|l| l.starts_with("example-operator")
                && l.contains("example-catalog")
                && l.contains("stable")),
            "{found:?}"
        );
        let operator_started = Instant::now();
        let install = kubectl_olm(
            namespace,
            &[
                "install",
                example::PACKAGE,
                "--create-operator-group",
                "--wait",
                "--timeout",
                "240",
            ],
        )
        .await;
        let installed: Result<(), ()> = if install.0 == 0 { Ok(()) } else { Err(()) };
        eprintln!("kubectl olm install:\n{}{}", install.1, install.2);
        if installed.is_err() {
            panic!(
                "example-operator.v0.1.0 not installed through the chart's OLM:\n{}\n{}",
                describe(&client, namespace).await,
                kubectl(
                    &["-n", NAMESPACE, "get", "pods,catalogsources", "-o", "wide"],
                    None
                )
                .unwrap_or_default()
            );
        }
        let operator_time = operator_started.elapsed();
        if let Some(adopted) = &adopted {
            // The hook replaced upstream's CRDs with the chart's in place...
            let replaced = audit_requests(&mut audit)
                .into_iter()
                .filter(|r| {
                    r.user == format!("system:serviceaccount:{NAMESPACE}:olm-crd-upgrade")
                        && r.verb == "update"
                        && r.resource == "customresourcedefinitions"
                        && r.code == Some(200)
                })
                .count();
            assert!(replaced > 0, "the hook replaced none of upstream's CRDs");
            // ... and the operator installed before is still Succeeded.
            let csv = csvs(&client, adopted.name())
                .get("example-operator.v0.1.0")
                .await
                .unwrap();
            assert_eq!(
                csv.data["status"]["phase"], "Succeeded",
                "{:?}",
                csv.data["status"]
            );
        }
        let samples_time = samples_installed(&client).await;
        let rss = service_rss();
        let refusals = refused(&mut audit);
        assert!(
            refusals.is_empty(),
            "OLM's ServiceAccounts were refused:\n{}",
            refusals.join("\n")
        );

        let (blocked_time, cleared_time) =
            incident_replay(&client, namespace, &opm, &pod_host, &base).await;

        // Upgrade to a chart whose CRD has a new field, then roll back, while
        // the controllers run.
        let newer = newer_chart(scratch.path());
        let upgrade_started = Instant::now();
        helm_on_cluster(
            &helm,
            &[
                "upgrade",
                RELEASE,
                newer.to_str().unwrap(),
                "-n",
                NAMESPACE,
                "-f",
                &values,
                "--wait",
                "--timeout",
                "5m",
            ],
        );
        olm_pods_ready(&client).await;
        let upgrade_time = upgrade_started.elapsed();
        assert!(
            has_upgrade_probe(&client).await,
            "the upgrade did not reach the CRD"
        );
        let rollback_started = Instant::now();
        helm_on_cluster(
            &helm,
            &[
                "rollback",
                RELEASE,
                "1",
                "-n",
                NAMESPACE,
                "--wait",
                "--timeout",
                "5m",
            ],
        );
        olm_pods_ready(&client).await;
        let rollback_time = rollback_started.elapsed();
        assert!(
            has_upgrade_probe(&client).await,
            "a rollback must not take fields away from a CRD"
        );
        // The subscription keeps upgrading under the rolled-back OLM.
        for tag in ["latest", DEFAULT_TAG] {
            example::publish(&opm, &pod_host, example::VERSIONS, tag, &base).unwrap();
        }
        let upgraded = tokio::time::timeout(
            NODE_WAIT,
            wait_installed(
                &client,
                namespace,
                example::PACKAGE,
                "example-operator.v0.3.0",
            ),
        )
        .await;
        if upgraded.is_err() {
            panic!(
                "no upgrade to example-operator.v0.3.0 after the rollback:\n{}",
                describe(&client, namespace).await
            );
        }
        if let Some(adopted) = &adopted {
            let upgraded = tokio::time::timeout(
                NODE_WAIT,
                wait_installed(
                    &client,
                    adopted.name(),
                    example::PACKAGE,
                    "example-operator.v0.3.0",
                ),
            )
            .await;
            if upgraded.is_err() {
                panic!(
                    "the adopted subscription did not upgrade to v0.3.0:\n{}",
                    describe(&client, adopted.name()).await
                );
            }
        }
        let phase = csvs(&client, namespace)
            .get("example-operator.v0.3.0")
            .await
            .unwrap()
            .data["status"]["phase"]
            .clone();
        assert_eq!(phase, "Succeeded");
        let refusals = refused(&mut audit);
        assert!(
            refusals.is_empty(),
            "during upgrade and rollback, OLM's ServiceAccounts were refused or failed to write status:\n{}",
            refusals.join("\n")
        );

        eprintln!(
            "helm chart on the real node: install to all Ready {:.1} s, example operator \
             installed {:.1} s, refused content blocked {:.1} s after its push, fixed \
             content installed {:.1} s after its push, upgrade {:.1} s, rollback {:.1} s; \
             every shipped sample in place {:.0} s after the samples Config was made (1 s resolution); RSS MiB {rss:?}",
            install_time.as_secs_f64(),
            operator_time.as_secs_f64(),
            blocked_time.as_secs_f64(),
            cleared_time.as_secs_f64(),
            upgrade_time.as_secs_f64(),
            rollback_time.as_secs_f64(),
            samples_time.as_secs_f64(),
        );

        // Uninstall: everything the chart made goes, but the CRDs, the kept
        // operators namespace and users' objects.
        let uninstall_started = Instant::now();
        helm_on_cluster(
            &helm,
            &[
                "uninstall",
                RELEASE,
                "-n",
                NAMESPACE,
                "--wait",
                "--timeout",
                "3m",
            ],
        );
        let uninstall_time = uninstall_started.elapsed();
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
        let left = eventually("the release's objects gone", NODE_WAIT, || async {
            let left: Vec<String> = inventory()
                .difference(&before)
                .filter(|o| {
                    let users = [Some(namespace), adopted.as_ref().map(|a| a.name())];
                    !users
                        .into_iter()
                        .flatten()
                        .any(|ns| expected_after_uninstall(o, ns) || ip_of_a_service_in(o, ns))
                })
                .cloned()
                .collect();
            if left.is_empty() {
                Ok(left)
            } else {
                Err(format!("{left:#?}"))
            }
        })
        .await;
        assert!(left.is_empty(), "{left:?}");
        assert!(
            deployments
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .is_empty()
        );
        // The user's operator still runs.
        assert_eq!(
            csvs(&client, namespace)
                .get("example-operator.v0.3.0")
                .await
                .unwrap()
                .data["status"]["phase"],
            "Succeeded"
        );

        // The uninstall hook took the samples and the Config with it.
        assert_eq!(
            kubectl(
                &[
                    "-n",
                    "openshift",
                    "get",
                    "imagestreams,templates",
                    "-o",
                    "name"
                ],
                None
            )
            .unwrap()
            .trim(),
            "",
            "samples left after uninstall"
        );
        eprintln!("helm uninstall {:.1} s", uninstall_time.as_secs_f64());
        drop(node);
    }

    /// The chart's samples-operator made the Config `cluster`, Managed, and
    /// every shipped sample in `openshift`; returns how long after the
    /// Config was made it said so (`SamplesExist`'s transition).
    async fn samples_installed(client: &kube::Client) -> Duration {
        let inventory = samples_operator::decide::inventory::Inventory::embedded(
            samples_operator::decide::inventory::Flavour::Ocp,
            std::env::consts::ARCH,
        )
        .unwrap()
        .unwrap_or_default();
        let configs: Api<olm_api::samples::Config> = Api::all(client.clone());
        let config = eventually(
            "the samples Config says SamplesExist",
            NODE_WAIT,
            || async {
                let config = configs
                    .get_opt("cluster")
                    .await
                    .map_err(|e| e.to_string())?
                    .ok_or_else(|| "no Config".to_owned())?;
                let status = config.status.clone().unwrap_or_default();
                (olm_api::conditions::is_true(&status.conditions, "SamplesExist")
                    && status.management_state.as_deref() == Some("Managed"))
                .then_some(config)
                .ok_or_else(|| format!("{status:?}"))
            },
        )
        .await;
        let made = config.metadata.creation_timestamp.clone().unwrap().0;
        let exists = olm_api::conditions::find(
            &config.status.unwrap_or_default().conditions,
            "SamplesExist",
        )
        .and_then(|c| c.last_transition_time.clone())
        .unwrap()
        .0;
        let elapsed = Duration::try_from(exists.duration_since(made)).unwrap_or_default();
        let streams = kubectl(
            &[
                "-n",
                "openshift",
                "get",
                "imagestreams",
                "-l",
                "samples.operator.openshift.io/managed=true",
                "-o",
                "name",
            ],
            None,
        )
        .unwrap();
        assert_eq!(
            streams.lines().count(),
            inventory.image_streams.len(),
            "{streams}"
        );
        let templates =
            kubectl(&["-n", "openshift", "get", "templates", "-o", "name"], None).unwrap();
        assert_eq!(templates.lines().count(), inventory.templates.len());
        elapsed
    }

    /// Applies the CRDs of one file and waits until they are Established.
    fn apply_crds_file(file: &Path) {
        kubectl(
            &["apply", "--server-side", "-f", &file.display().to_string()],
            None,
        )
        .unwrap();
        let text = std::fs::read_to_string(file).unwrap();
        for document in serde_yaml_ng::Deserializer::from_str(&text) {
            let crd = <Value as serde::Deserialize>::deserialize(document).unwrap();
            olm_testkit::control_plane()
                .wait_crd_established(crd["metadata"]["name"].as_str().unwrap());
        }
    }

    /// Applies the CRDs of `dir` and waits until they are Established.
    fn apply_crds(dir: &Path) {
        kubectl(
            &["apply", "--server-side", "-f", &dir.display().to_string()],
            None,
        )
        .unwrap();
        for crd in std::fs::read_dir(dir).unwrap() {
            let text = std::fs::read_to_string(crd.unwrap().path()).unwrap();
            let crd: Value = serde_yaml_ng::from_str(&text).unwrap();
            olm_testkit::control_plane()
                .wait_crd_established(crd["metadata"]["name"].as_str().unwrap());
        }
    }

    /// Upstream's CRDs, and the example operator installed under them in a
    /// namespace of its own by OLM's services run in-process (then
    /// stopped), from a catalog of that namespace: what a cluster running
    /// upstream OLM looks like to the chart. `None` (after saying why)
    /// without the shared test data, outside CI.
    async fn adopt_from_upstream(
        client: &kube::Client,
        registry: &str,
    ) -> Option<olm_testkit::TestNamespace> {
        let Some(testdata) = olm_e2e::testdata() else {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must run the adoption test: ../shared/testdata is missing"
            );
            eprintln!("skipping adoption from upstream's CRDs: ../shared/testdata is missing");
            return None;
        };
        apply_crds(&testdata.join("crds"));
        let plane = olm_testkit::control_plane();
        let ns = plane.namespace("helm-adopt").await;
        let namespace = ns.name();
        let services = start_services_with(
            namespace,
            registry,
            ServiceOptions {
                service_lookup: olm_runtime::service_address::ServiceLookup::ClusterIp,
                ..ServiceOptions::default()
            },
        )
        .await;
        create_operator_group(client, namespace, json!({})).await;
        let catalogs: Api<CatalogSource> = Api::namespaced(client.clone(), namespace);
        catalogs
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({
                    "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
                    "metadata": {"name": "example-catalog"},
                    "spec": {
                        "sourceType": "grpc",
                        "image": example::catalog_image(registry, "latest"),
                        "updateStrategy": {"registryPoll": {"interval": "10s"}},
                        "grpcPodConfig": {
                            "nodeSelector": {"kubernetes.io/hostname": NODE_NAME},
                            "tolerations": [{"key": NODE_TAINT, "operator": "Exists", "effect": "NoSchedule"}],
                            "securityContextConfig": "restricted",
                        },
                    }
                }))
                .unwrap(),
            )
            .await
            .unwrap();
        create_subscription(client, namespace, example::PACKAGE, "example-catalog", None).await;
        let installed = tokio::time::timeout(
            NODE_WAIT,
            wait_installed(
                client,
                namespace,
                example::PACKAGE,
                "example-operator.v0.1.0",
            ),
        )
        .await;
        if installed.is_err() {
            panic!(
                "example-operator.v0.1.0 not installed under upstream's CRDs:\n{}",
                describe(client, namespace).await
            );
        }
        services.stop().await;
        Some(ns)
    }

    /// Whether `object` is the IPAddress a Service of `namespace` holds
    /// (Kubernetes' bookkeeping of ClusterIPs).
    fn ip_of_a_service_in(object: &str, namespace: &str) -> bool {
        let Some(address) = object.strip_prefix("IPAddress//") else {
            return false;
        };
        kubectl(
            &[
                "get",
                "ipaddress",
                address,
                "-o",
                "jsonpath={.spec.parentRef.namespace}",
            ],
            None,
        )
        .is_ok_and(|owner| owner.trim() == namespace)
    }

    /// What may remain after uninstall: OLM's CRDs (and the APIServices
    /// Kubernetes registers for CRD groups), the kept `operators` namespace
    /// with its global OperatorGroup and that group's aggregated
    /// ClusterRoles, the `olm` namespace the test created (with what
    /// Kubernetes puts in every namespace), the user's namespace with
    /// everything in it and the user's cluster-wide objects (its operator's
    /// CRD, its OperatorGroup's roles, its Operator), and the node's Lease.
    /// packageserver's APIService is not among them.
    fn expected_after_uninstall(object: &str, user_namespace: &str) -> bool {
        let mut parts = object.splitn(3, '/');
        let (kind, namespace, name) = (
            parts.next().unwrap_or_default(),
            parts.next().unwrap_or_default(),
            parts.next().unwrap_or_default(),
        );
        let olm_group = |name: &str| {
            name.ends_with(".operators.coreos.com")
                || name.ends_with(".config.openshift.io")
                || name.ends_with(".samples.operator.openshift.io")
        };
        let user_group = |name: &str| name.ends_with(".example.olm-rs.dev");
        match (kind, namespace) {
            ("Namespace", "") => [NAMESPACE, "operators", user_namespace].contains(&name),
            // The aggregated roles of a user's OperatorGroup (`og`, or named
            // after its namespace by `kubectl olm install`) stay with it.
            ("ClusterRole", "")
                if name.starts_with("olm.og.og.")
                    || name.starts_with(&format!("olm.og.{user_namespace}.")) =>
            {
                true
            }
            (_, ns) if ns == user_namespace => true,
            (_, "kube-node-lease") => true,
            ("ServiceAccount", ns) if ns == NAMESPACE || ns == "operators" => name == "default",
            ("ConfigMap", ns) if ns == NAMESPACE || ns == "operators" => name == "kube-root-ca.crt",
            ("OperatorGroup", "operators") => name == "global-operators",
            ("CustomResourceDefinition", "") => olm_group(name) || user_group(name),
            ("APIService", "") => {
                name != "v1.packages.operators.coreos.com" && (olm_group(name) || user_group(name))
            }
            ("ClusterRole", "") => {
                name.starts_with("olm.og.global-operators.")
                    || name.starts_with("olm.og.og.")
                    || name.starts_with("greetings.example.olm-rs.dev-")
            }
            ("Operator", "") => name.ends_with(&format!(".{user_namespace}")),
            _ => false,
        }
    }
}
