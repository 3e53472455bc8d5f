//! `doctor`'s checks: the field incidents OLM clusters have had, found in
//! what the cluster holds, each with what to do and, where it is safe, a
//! fix `--fix` may carry out.
//!
//! - The staging-registry incident: InstallPlans failed on a bundle that
//!   could not be pulled, and the unpack records (our ConfigMaps, upstream's
//!   Jobs) it left. Deleting a failed plan makes catalog-operator plan again;
//!   deleting a stale record makes bundle-unpacker pull again.
//! - The packageserver incident: an APIService whose `caBundle` does not
//!   trust the certificate its Service serves, or a serving certificate past
//!   or near expiry; a CSV whose certificates are past their rotation time.
//! - The rollback incident: an OLM CRD whose status schema restricts values
//!   (`enum`), so that status writes of a newer OLM are refused.
//! - Unhealthy catalogs; more copied CSVs than a cluster should carry;
//!   namespaces with Subscriptions and no OperatorGroup, or several, and
//!   CSVs refused for intersecting OperatorGroups.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::{Duration, SystemTime},
};

use olm_api::{
    catalog_source::CatalogSource,
    csv::ClusterServiceVersion,
    install_plan::{InstallPlan, InstallPlanPhase},
    labels,
    operator_group::OperatorGroup,
    subscription::Subscription,
};
use serde::Serialize;

/// How soon before expiry a serving certificate is reported.
pub(crate) const EXPIRY_WARNING: Duration = Duration::from_secs(7 * 24 * 3600);

/// How many copied CSVs are reported as a load (`--copied-csv-threshold`).
pub(crate) const DEFAULT_COPIED_CSV_THRESHOLD: usize = 1000;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub(crate) enum Severity {
    /// Something is broken now.
    Error,
    /// Something will break, or costs more than it should.
    Warning,
}

/// A safe fix: deleting an object OLM re-creates or no longer needs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Fix {
    /// `InstallPlan`, `ConfigMap` or `Job`.
    pub kind: &'static str,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

/// One problem found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Finding {
    /// The check that found it (a stable id).
    pub check: &'static str,
    /// How bad.
    pub severity: Severity,
    /// The object, as `Kind namespace/name`.
    pub object: String,
    /// What is wrong.
    pub problem: String,
    /// What to do.
    pub next: String,
    /// What `--fix` does about it, if anything.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<Fix>,
}

/// An unpack record: one of bundle-unpacker's ConfigMaps, or an upstream
/// unpack Job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UnpackRecord {
    /// `ConfigMap` or `Job`.
    pub kind: &'static str,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Why it failed, when it records a failure.
    pub failure: Option<String>,
}

/// An APIService, or one webhook of an OLM webhook configuration, served
/// by a Service: what it trusts and what the Service serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServedApi {
    /// The object as findings name it (`APIService v1.packages...`,
    /// `ValidatingWebhookConfiguration x (webhook y)`).
    pub name: String,
    /// `namespace/name` of its Service.
    pub service: String,
    /// `spec.caBundle` (`clientConfig.caBundle`), as PEM.
    pub ca_bundle: String,
    /// The Secret `<service>-cert` and its `tls.crt`, when it exists.
    pub serving: Option<(String, String)>,
    /// `Available` when not True: its reason and message.
    pub unavailable: Option<String>,
}

/// A `StatusRejected` Warning event: an OLM service's status write the API
/// server refused (it then wrote a minimal status).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RejectedStatus {
    /// The object, as `Kind namespace/name`.
    pub object: String,
    /// The API server's answer.
    pub message: String,
    /// How many times.
    pub count: i32,
}

/// An OLM CRD version's status schema.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CrdStatusSchema {
    /// The CRD.
    pub crd: String,
    /// The version.
    pub version: String,
    /// `properties.status` of its schema.
    pub status: serde_json::Value,
}

/// Everything the checks read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Observed<'a> {
    pub subscriptions: &'a [Subscription],
    pub plans: &'a [InstallPlan],
    pub csvs: &'a [ClusterServiceVersion],
    pub catalogs: &'a [CatalogSource],
    pub groups: &'a [OperatorGroup],
    pub unpack_records: &'a [UnpackRecord],
    pub served_apis: &'a [ServedApi],
    pub crd_schemas: &'a [CrdStatusSchema],
    pub rejected_statuses: &'a [RejectedStatus],
    /// Whether OLMConfig disables copied CSVs.
    pub copied_csvs_disabled: bool,
    pub copied_csv_threshold: usize,
    pub now: SystemTime,
}

fn namespaced(
    kind: &str,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> String {
    format!(
        "{kind} {}/{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}

/// Every finding, errors first, then by check and object.
pub(crate) fn findings(observed: Observed<'_>) -> Vec<Finding> {
    let mut out = Vec::new();
    failed_plans(observed, &mut out);
    unpack_records(observed, &mut out);
    served_apis(observed, &mut out);
    csv_certificates(observed, &mut out);
    crd_schemas(observed, &mut out);
    rejected_statuses(observed, &mut out);
    catalogs(observed, &mut out);
    copied_csvs(observed, &mut out);
    operator_groups(observed, &mut out);
    out.sort_by(|a, b| (a.severity, a.check, &a.object).cmp(&(b.severity, b.check, &b.object)));
    out
}

fn failed_plans(observed: Observed<'_>, out: &mut Vec<Finding>) {
    for plan in observed.plans {
        let status = plan.status.clone().unwrap_or_default();
        if status.phase != InstallPlanPhase::FAILED {
            continue;
        }
        let namespace = plan.metadata.namespace.clone().unwrap_or_default();
        let name = plan.metadata.name.clone().unwrap_or_default();
        let cause = status
            .conditions
            .iter()
            .rev()
            .find_map(|c| c.message.clone())
            .or(status.message)
            .unwrap_or_else(|| "failed".to_owned());
        let referenced = observed.subscriptions.iter().any(|s| {
            s.metadata.namespace.as_deref() == Some(namespace.as_str())
                && s.status
                    .as_ref()
                    .and_then(|st| st.install_plan_ref.as_ref())
                    .and_then(|r| r.name.as_deref())
                    == Some(name.as_str())
        });
        let next = if referenced {
            "fix what the cause names (the bundle's registry, the policy), then delete the plan so catalog-operator plans again (`--fix` deletes it)"
        } else {
            "no Subscription uses it any more: delete it (`--fix` does)"
        };
        out.push(Finding {
            check: "failed-install-plan",
            severity: Severity::Error,
            object: format!("InstallPlan {namespace}/{name}"),
            problem: cause,
            next: next.to_owned(),
            fix: Some(Fix {
                kind: "InstallPlan",
                namespace,
                name,
            }),
        });
    }
}

fn unpack_records(observed: Observed<'_>, out: &mut Vec<Finding>) {
    // Bundles a plan still waits for: their records are in use.
    let pending: BTreeSet<String> = observed
        .plans
        .iter()
        .filter(|p| {
            p.status.as_ref().is_some_and(|s| {
                s.phase != InstallPlanPhase::FAILED && s.phase != InstallPlanPhase::COMPLETE
            })
        })
        .flat_map(|p| p.status.iter().flat_map(|s| s.bundle_lookups.iter()))
        .map(|lookup| olm_catalog::unpacked::config_map_name(&lookup.path))
        .collect();
    for record in observed.unpack_records {
        let Some(failure) = &record.failure else {
            continue;
        };
        if pending.contains(&record.name) {
            continue;
        }
        out.push(Finding {
            check: "stale-unpack-record",
            severity: Severity::Warning,
            object: format!("{} {}/{}", record.kind, record.namespace, record.name),
            problem: format!("a failed bundle unpack no plan waits for any more: {failure}"),
            next: "delete it so the next plan pulls the bundle again (`--fix` deletes it)"
                .to_owned(),
            fix: Some(Fix {
                kind: record.kind,
                namespace: record.namespace.clone(),
                name: record.name.clone(),
            }),
        });
    }
}

fn served_apis(observed: Observed<'_>, out: &mut Vec<Finding>) {
    for api in observed.served_apis {
        let object = api.name.clone();
        if let Some((secret, cert)) = &api.serving {
            let host = {
                let (namespace, name) = api.service.split_once('/').unwrap_or(("", &api.service));
                format!("{name}.{namespace}.svc")
            };
            let now = olm_certs::reload::verify_served(&api.ca_bundle, cert, &host, observed.now);
            let soon = olm_certs::reload::verify_served(
                &api.ca_bundle,
                cert,
                &host,
                observed.now + EXPIRY_WARNING,
            );
            match (now, soon) {
                (Err(error), _) => out.push(Finding {
                    check: "serving-certificate",
                    severity: Severity::Error,
                    object: object.clone(),
                    problem: format!(
                        "its caBundle does not accept the certificate Secret {secret} serves for {host}: {error}"
                    ),
                    next: format!(
                        "the aggregator refuses this API: check the logs of the component that owns Secret {secret} (it rotates the certificate and writes the caBundle)"
                    ),
                    fix: None,
                }),
                (Ok(()), Err(_)) => out.push(Finding {
                    check: "serving-certificate",
                    severity: Severity::Warning,
                    object: object.clone(),
                    problem: format!(
                        "the certificate Secret {secret} serves for {host} expires within {} days and has not been rotated",
                        EXPIRY_WARNING.as_secs() / 86_400
                    ),
                    next: format!(
                        "check the logs of the component that owns Secret {secret}: it should have rotated it"
                    ),
                    fix: None,
                }),
                (Ok(()), Ok(())) => {}
            }
        }
        if let Some(why) = &api.unavailable {
            out.push(Finding {
                check: "apiservice-unavailable",
                severity: Severity::Error,
                object,
                problem: format!("not Available: {why}"),
                next: format!(
                    "discovery and namespace deletion stall while it is down: check Service {} and its pods",
                    api.service
                ),
                fix: None,
            });
        }
    }
}

fn csv_certificates(observed: Observed<'_>, out: &mut Vec<Finding>) {
    let now = olm_certs::policy::unix_seconds(observed.now);
    for csv in observed.csvs.iter().filter(|c| !is_copied(c)) {
        let Some(rotate_at) = csv.status.as_ref().and_then(|s| s.certs_rotate_at.as_ref()) else {
            continue;
        };
        if rotate_at.0.as_second() < now {
            out.push(Finding {
                check: "serving-certificate",
                severity: Severity::Error,
                object: namespaced("ClusterServiceVersion", &csv.metadata),
                problem: format!(
                    "its webhook/APIService certificates were due for rotation at {} and were not rotated",
                    rotate_at.0
                ),
                next: "check olm-operator: it rotates them and rolls the Deployments".to_owned(),
                fix: None,
            });
        }
    }
}

/// The paths under `schema` that carry `enum`.
fn enum_paths(schema: &serde_json::Value, path: &str, out: &mut Vec<String>) {
    let Some(object) = schema.as_object() else {
        return;
    };
    if object.contains_key("enum") {
        out.push(path.to_owned());
    }
    if let Some(properties) = object.get("properties").and_then(|p| p.as_object()) {
        for (name, child) in properties {
            enum_paths(child, &format!("{path}.{name}"), out);
        }
    }
    if let Some(items) = object.get("items") {
        enum_paths(items, &format!("{path}[]"), out);
    }
}

fn crd_schemas(observed: Observed<'_>, out: &mut Vec<Finding>) {
    for schema in observed.crd_schemas {
        let mut paths = Vec::new();
        enum_paths(&schema.status, ".status", &mut paths);
        if paths.is_empty() {
            continue;
        }
        out.push(Finding {
            check: "status-schema",
            severity: Severity::Warning,
            object: format!("CustomResourceDefinition {} ({})", schema.crd, schema.version),
            problem: format!(
                "its status schema restricts values ({}): status writes of a newer OLM are refused, as after the rollback incident",
                paths.join(", ")
            ),
            next: "install OLM's CRDs of the running version (`helm upgrade`, or `kubectl apply --server-side -f deploy/crds`)".to_owned(),
            fix: None,
        });
    }
}

fn rejected_statuses(observed: Observed<'_>, out: &mut Vec<Finding>) {
    for rejected in observed.rejected_statuses {
        out.push(Finding {
            check: "status-rejected",
            severity: Severity::Error,
            object: rejected.object.clone(),
            problem: format!(
                "the API server refused its status {} time(s), so OLM wrote a minimal status: {}",
                rejected.count.max(1),
                rejected.message
            ),
            next: "the CRD is older than the OLM writing it (a rollback): install OLM's CRDs of the running version".to_owned(),
            fix: None,
        });
    }
}

fn catalogs(observed: Observed<'_>, out: &mut Vec<Finding>) {
    for catalog in observed.catalogs {
        let status = catalog.status.clone().unwrap_or_default();
        let object = namespaced("CatalogSource", &catalog.metadata);
        let state = status
            .connection_state
            .as_ref()
            .map(|c| c.last_observed_state.as_str().to_owned());
        let reason = status.reason.as_ref().map(|r| r.as_str().to_owned());
        let problem = match (&reason, &state) {
            (Some(reason), _) if !reason.is_empty() => Some(format!(
                "{reason}: {}",
                status.message.clone().unwrap_or_default()
            )),
            (_, Some(state)) if state != "READY" && state != "CONNECTING" => {
                Some(format!("its registry is {state}"))
            }
            _ => None,
        };
        if let Some(problem) = problem {
            out.push(Finding {
                check: "catalog-unhealthy",
                severity: Severity::Error,
                object: object.clone(),
                problem,
                next: "nothing resolves from it: check its registry pod or address (`kubectl olm status`)".to_owned(),
                fix: None,
            });
        }
        if let Some(blocked) = status
            .conditions
            .iter()
            .find(|c| c.type_ == "PromotionBlocked" && c.status == "True")
        {
            out.push(Finding {
                check: "catalog-promotion-blocked",
                severity: Severity::Warning,
                object,
                problem: blocked.message.clone(),
                next: "the catalog serves its previous content until new content passes: fix the catalog image".to_owned(),
                fix: None,
            });
        }
    }
}

fn is_copied(csv: &ClusterServiceVersion) -> bool {
    csv.metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(labels::COPIED_FROM))
}

fn copied_csvs(observed: Observed<'_>, out: &mut Vec<Finding>) {
    let copied = observed.csvs.iter().filter(|c| is_copied(c)).count();
    if copied > observed.copied_csv_threshold && !observed.copied_csvs_disabled {
        out.push(Finding {
            check: "copied-csvs",
            severity: Severity::Warning,
            object: "OLMConfig cluster".to_owned(),
            problem: format!(
                "{copied} copied CSVs (more than {}): every all-namespaces operator is copied into every namespace, which loads the API server and OLM",
                observed.copied_csv_threshold
            ),
            next: "set spec.features.disableCopiedCSVs: true on the OLMConfig named cluster".to_owned(),
            fix: None,
        });
    }
}

fn operator_groups(observed: Observed<'_>, out: &mut Vec<Finding>) {
    let mut groups: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for group in observed.groups {
        groups
            .entry(group.metadata.namespace.as_deref().unwrap_or_default())
            .or_default()
            .push(group.metadata.name.as_deref().unwrap_or_default());
    }
    let subscribed: BTreeSet<&str> = observed
        .subscriptions
        .iter()
        .filter_map(|s| s.metadata.namespace.as_deref())
        .collect();
    for namespace in &subscribed {
        if !groups.contains_key(namespace) {
            out.push(Finding {
                check: "operator-group",
                severity: Severity::Error,
                object: format!("Namespace {namespace}"),
                problem: "it has Subscriptions and no OperatorGroup: OLM installs nothing there"
                    .to_owned(),
                next: "create one OperatorGroup in it (`kubectl olm install --create-operator-group` makes one)".to_owned(),
                fix: None,
            });
        }
    }
    for (namespace, names) in &groups {
        if names.len() > 1 {
            out.push(Finding {
                check: "operator-group",
                severity: Severity::Error,
                object: format!("Namespace {namespace}"),
                problem: format!(
                    "{} OperatorGroups ({}): OLM installs nothing where there is more than one",
                    names.len(),
                    names.join(", ")
                ),
                next: "delete all but one".to_owned(),
                fix: None,
            });
        }
    }
    for csv in observed.csvs.iter().filter(|c| !is_copied(c)) {
        let status = csv.status.clone().unwrap_or_default();
        let reason = status
            .reason
            .map(|r| r.as_str().to_owned())
            .unwrap_or_default();
        if reason == "InterOperatorGroupOwnerConflict" {
            out.push(Finding {
                check: "operator-group",
                severity: Severity::Error,
                object: namespaced("ClusterServiceVersion", &csv.metadata),
                problem: format!(
                    "{reason}: {}",
                    status.message.unwrap_or_default()
                ),
                next: "another OperatorGroup whose namespaces overlap this one's provides the same APIs: narrow one of them (targetNamespaces) or install the operator once".to_owned(),
                fix: None,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn from<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
        serde_json::from_value(value).unwrap()
    }

    fn plan(name: &str, phase: &str, lookups: serde_json::Value) -> InstallPlan {
        from(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"approval": "Automatic", "approved": true, "clusterServiceVersionNames": ["a.v1"]},
            "status": {"phase": phase, "bundleLookups": lookups, "conditions": [
                {"type": "Installed", "status": "False", "reason": "InstallComponentFailed",
                 "message": "bundle unpacking failed: staging.example.com unreachable"}]},
        }))
    }

    fn at(observed: Observed<'_>) -> Vec<(&'static str, String)> {
        findings(observed)
            .into_iter()
            .map(|f| (f.check, f.object))
            .collect()
    }

    fn empty() -> Observed<'static> {
        Observed {
            subscriptions: &[],
            plans: &[],
            csvs: &[],
            catalogs: &[],
            groups: &[],
            unpack_records: &[],
            served_apis: &[],
            crd_schemas: &[],
            rejected_statuses: &[],
            copied_csvs_disabled: false,
            copied_csv_threshold: 2,
            now: SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
        }
    }

    #[test]
    fn a_healthy_cluster_has_no_findings() {
        let subscription: Subscription = from(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": "a", "namespace": "ns"},
            "spec": {"source": "c", "sourceNamespace": "ns", "name": "a"},
            "status": {"installPlanRef": {"name": "ok"}},
        }));
        let group: OperatorGroup = from(json!({
            "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
            "metadata": {"name": "g", "namespace": "ns"}, "spec": {}}));
        let catalog: CatalogSource = from(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
            "metadata": {"name": "c", "namespace": "ns"}, "spec": {"sourceType": "grpc"},
            "status": {"connectionState": {"lastObservedState": "READY"}}}));
        let plans = [plan("ok", "Complete", json!([]))];
        let crd = [CrdStatusSchema {
            crd: "subscriptions.operators.coreos.com".into(),
            version: "v1alpha1".into(),
            status: json!({"properties": {"state": {"type": "string"}}}),
        }];
        let observed = Observed {
            subscriptions: std::slice::from_ref(&subscription),
            plans: &plans,
            catalogs: std::slice::from_ref(&catalog),
            groups: std::slice::from_ref(&group),
            crd_schemas: &crd,
            ..empty()
        };
        assert_eq!(findings(observed), vec![]);
    }

    #[test]
    fn the_staging_registry_incident_is_found_with_safe_fixes() {
        let subscription: Subscription = from(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": "a", "namespace": "ns"},
            "spec": {"source": "c", "sourceNamespace": "ns", "name": "a"},
            "status": {"installPlanRef": {"name": "failed"}},
        }));
        let path = "staging.example.com/a-bundle:v1";
        let in_flight = olm_catalog::unpacked::config_map_name("quay.io/x/b:v1");
        let plans = [
            plan("failed", "Failed", json!([])),
            plan("orphan", "Failed", json!([])),
            plan(
                "waiting",
                "Installing",
                json!([{"path": "quay.io/x/b:v1", "identifier": "b.v1", "replaces": "", "catalogSourceRef": {"name": "c"}}]),
            ),
        ];
        let records = [
            UnpackRecord {
                kind: "ConfigMap",
                namespace: "olm".into(),
                name: olm_catalog::unpacked::config_map_name(path),
                failure: Some("ErrImagePull: no such host".into()),
            },
            UnpackRecord {
                kind: "ConfigMap",
                namespace: "olm".into(),
                name: in_flight.clone(),
                failure: Some("still retrying".into()),
            },
            UnpackRecord {
                kind: "ConfigMap",
                namespace: "olm".into(),
                name: "good".into(),
                failure: None,
            },
            UnpackRecord {
                kind: "Job",
                namespace: "olm".into(),
                name: "upstream-unpack".into(),
                failure: Some("BackoffLimitExceeded".into()),
            },
        ];
        let groups: OperatorGroup = from(json!({
            "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
            "metadata": {"name": "g", "namespace": "ns"}, "spec": {}}));
        let found = findings(Observed {
            subscriptions: std::slice::from_ref(&subscription),
            plans: &plans,
            groups: std::slice::from_ref(&groups),
            unpack_records: &records,
            ..empty()
        });
        let fixes: Vec<(&str, &str)> = found
            .iter()
            .filter_map(|f| f.fix.as_ref())
            .map(|f| (f.kind, f.name.as_str()))
            .collect();
        let stale = olm_catalog::unpacked::config_map_name(path);
        assert_eq!(
            fixes,
            vec![
                ("InstallPlan", "failed"),
                ("InstallPlan", "orphan"),
                ("ConfigMap", stale.as_str()),
                ("Job", "upstream-unpack"),
            ],
            "{found:#?}"
        );
        assert!(found[0].problem.contains("staging.example.com unreachable"));
        assert!(found[0].next.contains("plans again"));
        assert!(found[1].next.contains("no Subscription uses it"));
    }

    #[test]
    fn catalogs_groups_copies_and_schemas_are_checked() {
        let catalogs: Vec<CatalogSource> = [
            json!({"connectionState": {"lastObservedState": "TRANSIENT_FAILURE"}}),
            json!({"reason": "RegistryNotAllowed", "message": "not allowed"}),
            json!({"connectionState": {"lastObservedState": "CONNECTING"}}),
            json!({"connectionState": {"lastObservedState": "READY"},
                   "conditions": [{"type": "PromotionBlocked", "status": "True", "reason": "BundleRegistryNotAllowed",
                                   "message": "new content was not promoted", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}),
        ]
        .into_iter()
        .enumerate()
        .map(|(i, status)| {
            from(json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
                "metadata": {"name": format!("c{i}"), "namespace": "ns"}, "spec": {"sourceType": "grpc"}, "status": status}))
        })
        .collect();
        let subscription: Subscription = from(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": "a", "namespace": "lonely"},
            "spec": {"source": "c", "sourceNamespace": "ns", "name": "a"}}));
        let groups: Vec<OperatorGroup> = ["g1", "g2"]
            .iter()
            .map(|n| {
                from(
                    json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
                "metadata": {"name": n, "namespace": "crowded"}, "spec": {}}),
                )
            })
            .collect();
        let csvs: Vec<ClusterServiceVersion> = (0..3)
            .map(|i| from(json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
                "metadata": {"name": "x.v1", "namespace": format!("copy{i}"), "labels": {"olm.copiedFrom": "src"}},
                "spec": {"displayName": "x", "install": {"strategy": "deployment"}},
                "status": {"phase": "Succeeded", "reason": "Copied"}})))
            .chain([from(json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
                "metadata": {"name": "y.v1", "namespace": "crowded"},
                "spec": {"displayName": "y", "install": {"strategy": "deployment"}},
                "status": {"phase": "Failed", "reason": "InterOperatorGroupOwnerConflict",
                           "message": "intersecting operatorgroups provide the same apis",
                           "certsRotateAt": "2020-01-01T00:00:00Z"}}))])
            .collect();
        let crds = [CrdStatusSchema {
            crd: "operatorgroups.operators.coreos.com".into(),
            version: "v1".into(),
            status: json!({"properties": {"conditions": {"items": {"properties": {"status": {"enum": ["True", "False"]}}}}}}),
        }];
        let observed = Observed {
            subscriptions: std::slice::from_ref(&subscription),
            catalogs: &catalogs,
            groups: &groups,
            csvs: &csvs,
            crd_schemas: &crds,
            ..empty()
        };
        assert_eq!(
            at(observed),
            vec![
                ("catalog-unhealthy", "CatalogSource ns/c0".to_owned()),
                ("catalog-unhealthy", "CatalogSource ns/c1".to_owned()),
                (
                    "operator-group",
                    "ClusterServiceVersion crowded/y.v1".to_owned()
                ),
                ("operator-group", "Namespace crowded".to_owned()),
                ("operator-group", "Namespace lonely".to_owned()),
                (
                    "serving-certificate",
                    "ClusterServiceVersion crowded/y.v1".to_owned()
                ),
                (
                    "catalog-promotion-blocked",
                    "CatalogSource ns/c3".to_owned()
                ),
                ("copied-csvs", "OLMConfig cluster".to_owned()),
                (
                    "status-schema",
                    "CustomResourceDefinition operatorgroups.operators.coreos.com (v1)".to_owned()
                ),
            ]
        );
        let schema = &findings(observed)[8];
        assert!(
            schema.problem.contains(".status.conditions[].status"),
            "{}",
            schema.problem
        );
        // Disabled copies, or few of them, are no finding.
        let quiet = Observed {
            copied_csvs_disabled: true,
            ..observed
        };
        assert!(at(quiet).iter().all(|(check, _)| *check != "copied-csvs"));
    }

    #[test]
    fn refused_status_writes_are_found() {
        let rejected = [RejectedStatus {
            object: "ClusterServiceVersion ns/a.v1".into(),
            message: "status.conditions[0].status: Unsupported value".into(),
            count: 3,
        }];
        let found = findings(Observed {
            rejected_statuses: &rejected,
            ..empty()
        });
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].check, "status-rejected");
        assert!(
            found[0].problem.contains("3 time(s)"),
            "{}",
            found[0].problem
        );
        assert!(found[0].next.contains("CRDs of the running version"));
    }

    #[test]
    fn an_apiservice_is_checked_against_the_certificate_its_service_serves() {
        let now = SystemTime::now();
        let profile = olm_certs::material::Profile::for_service("pkg", "olm");
        let short = olm_certs::policy::RotationPolicy {
            ca_lifetime: Duration::from_secs(3 * 24 * 3600),
            serving_lifetime: Duration::from_secs(3 * 24 * 3600),
            ca_renew_before: Duration::from_secs(3600),
            ..olm_certs::policy::RotationPolicy::default()
        };
        let long = olm_certs::material::bootstrap(now, &Default::default(), &profile).unwrap();
        let other = olm_certs::material::bootstrap(now, &Default::default(), &profile).unwrap();
        let expiring = olm_certs::material::bootstrap(now, &short, &profile).unwrap();
        let api = |name: &str, bundle: &str, cert: &str, unavailable: Option<&str>| ServedApi {
            name: format!("APIService {name}"),
            service: "olm/pkg".to_owned(),
            ca_bundle: bundle.to_owned(),
            serving: Some(("olm/pkg-cert".to_owned(), cert.to_owned())),
            unavailable: unavailable.map(str::to_owned),
        };
        let apis = [
            api("v1.good", &long.ca_bundle_pem, &long.cert_pem, None),
            api(
                "v1.mismatch",
                &other.ca_bundle_pem,
                &long.cert_pem,
                Some("FailedDiscoveryCheck: x509"),
            ),
            api(
                "v1.expiring",
                &expiring.ca_bundle_pem,
                &expiring.cert_pem,
                None,
            ),
        ];
        let found = findings(Observed {
            served_apis: &apis,
            now,
            ..empty()
        });
        let summary: Vec<(&str, Severity, &str)> = found
            .iter()
            .map(|f| (f.check, f.severity, f.object.as_str()))
            .collect();
        assert_eq!(
            summary,
            vec![
                (
                    "apiservice-unavailable",
                    Severity::Error,
                    "APIService v1.mismatch"
                ),
                (
                    "serving-certificate",
                    Severity::Error,
                    "APIService v1.mismatch"
                ),
                (
                    "serving-certificate",
                    Severity::Warning,
                    "APIService v1.expiring"
                ),
            ]
        );
        assert!(
            found[1].problem.contains("pkg.olm.svc"),
            "{}",
            found[1].problem
        );
        assert!(
            found[2].problem.contains("expires within 7 days"),
            "{}",
            found[2].problem
        );
    }
}
