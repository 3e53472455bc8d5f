//! `kubectl olm doctor` against a real control plane: silent on a healthy
//! install; on a namespace staged as the field incidents left theirs (a
//! failed InstallPlan and the unpack record of the staging-registry
//! incident, an APIService and a webhook whose caBundle does not trust
//! their Service's certificate, a CRD whose status schema restricts values
//! and a status write it refused, an unhealthy
//! catalog, copied CSVs, a Subscription without an OperatorGroup), every one
//! found; `--fix` deletes only the failed plan and the stale record.

// Test helpers: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::{collections::BTreeSet, time::SystemTime};

use k8s_openapi::{
    api::core::v1::{ConfigMap, Secret},
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    kube_aggregator::pkg::apis::apiregistration::v1::APIService,
};
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use olm_api::{
    catalog_source::CatalogSource, csv::ClusterServiceVersion, install_plan::InstallPlan,
    subscription::Subscription,
};
use olm_e2e::{
    eventually,
    harness::{
        BundleSpec, ServiceOptions, Setup, WAIT, publish, serve_bundles, start_services_with,
        subscribe, wait_installed,
    },
};
use serde_json::{Value, json};

/// Runs `kubectl-olm doctor ARGS -n NAMESPACE`: (exit status, stdout), the
/// namespace written `NS`.
async fn doctor(namespace: &str, args: &[&str]) -> (i32, String) {
    let args: Vec<&str> = std::iter::once("doctor")
        .chain(args.iter().copied())
        .collect();
    let out = olm_e2e::kubectl_olm(namespace, &args).await;
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).replace(namespace, "NS"),
    )
}

/// (check, severity, object, has a fix) of each finding `doctor -o json` prints.
async fn findings(namespace: &str) -> Result<BTreeSet<(String, String, String, bool)>, String> {
    let (code, out) = doctor(namespace, &["-o", "json", "--copied-csv-threshold", "0"]).await;
    let list: Vec<Value> = serde_json::from_str(&out).map_err(|e| format!("{e}: {out}"))?;
    if code != 1 {
        return Err(format!("exit {code}"));
    }
    Ok(list
        .iter()
        .map(|f| {
            (
                f["check"].as_str().unwrap().to_owned(),
                f["severity"].as_str().unwrap().to_owned(),
                f["object"].as_str().unwrap().to_owned(),
                f.get("fix").is_some(),
            )
        })
        .collect())
}

fn decode<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).unwrap()
}

const PROBE_CRD: &str = "doctorprobes.operators.coreos.com";
const PROBE_APISERVICE: &str = "v1alpha1.doctor.olm.test";
const PROBE_WEBHOOK: &str = "doctor-probe-hook";

/// Removes the cluster-wide objects the test staged, even when it fails.
struct Staged;

impl Drop for Staged {
    fn drop(&mut self) {
        let _ = olm_testkit::control_plane()
            .kubectl()
            .args([
                "delete",
                "--ignore-not-found",
                &format!("apiservice/{PROBE_APISERVICE}"),
                &format!("crd/{PROBE_CRD}"),
                &format!("validatingwebhookconfiguration/{PROBE_WEBHOOK}"),
            ])
            .output();
    }
}

#[tokio::test]
async fn doctor_is_silent_when_healthy_and_finds_each_incident_staged() {
    // A healthy install: no findings.
    let setup = Setup::new("doctor-ok").await;
    let ns = setup.namespace();
    let host = setup.registry.host();
    let spec = BundleSpec::new(&setup.group, "1.0.0");
    let (bundle, image) = publish(&host, &spec).await;
    let (catalog, _dir) = serve_bundles(&[(&bundle, &image)]).await;
    let services = start_services_with(ns, &host, ServiceOptions::default()).await;
    subscribe(&setup.client, ns, &catalog.addr().to_string(), None).await;
    wait_installed(&setup.client, ns, "gadgets", "gadgets.v1.0.0").await;
    eventually("doctor finds nothing", WAIT, || async {
        match doctor(ns, &[]).await {
            (0, out) if out == "no findings\n" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    services.stop().await;

    // A namespace left as the incidents left theirs; no OLM service watches it.
    let plane = olm_testkit::control_plane();
    let broken = plane.namespace("doctor-broken").await;
    let b = broken.name();
    let client = setup.client.clone();
    let _staged = Staged;
    let params = PostParams::default();
    let status_patch = |status: Value| Patch::Merge(json!({ "status": status }));

    let subscriptions: Api<Subscription> = Api::namespaced(client.clone(), b);
    subscriptions
        .create(&params, &decode(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": "staging"},
            "spec": {"name": "staging", "source": "down", "sourceNamespace": b, "channel": "stable"}})))
        .await
        .unwrap();
    subscriptions
        .patch_status("staging", &PatchParams::default(), &status_patch(json!({
            "state": "UpgradePending", "lastUpdated": "2026-01-01T00:00:00Z",
            "installPlanRef": {"name": "install-failed", "namespace": b, "kind": "InstallPlan", "apiVersion": "operators.coreos.com/v1alpha1"}})))
        .await
        .unwrap();
    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), b);
    plans
        .create(&params, &decode(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
            "metadata": {"name": "install-failed"},
            "spec": {"approval": "Automatic", "approved": true, "clusterServiceVersionNames": ["staging.v2"]}})))
        .await
        .unwrap();
    plans
        .patch_status("install-failed", &PatchParams::default(), &status_patch(json!({
            "phase": "Failed", "catalogSources": [],
            "conditions": [{"type": "Installed", "status": "False", "reason": "InstallComponentFailed",
                            "message": "bundle unpacking failed: staging.example.com/staging-bundle:v2: no such host"}]})))
        .await
        .unwrap();
    let record = olm_catalog::unpacked::config_map_name("staging.example.com/staging-bundle:v2");
    Api::<ConfigMap>::namespaced(client.clone(), b)
        .create(&params, &decode(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": record,
                "labels": {"operatorframework.io/bundle-unpack-ref": record, "olm.managed": "true"},
                "annotations": {"olm.unpackFailureReason": "ErrImagePull", "olm.unpackFailureMessage": "no such host"}}})))
        .await
        .unwrap();
    let catalogs: Api<CatalogSource> = Api::namespaced(client.clone(), b);
    catalogs
        .create(&params, &decode(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
            "metadata": {"name": "down"}, "spec": {"sourceType": "grpc", "address": "10.255.255.1:50051"}})))
        .await
        .unwrap();
    catalogs
        .patch_status("down", &PatchParams::default(), &status_patch(json!({
            "connectionState": {"address": "10.255.255.1:50051", "lastObservedState": "TRANSIENT_FAILURE"}})))
        .await
        .unwrap();
    Api::<ClusterServiceVersion>::namespaced(client.clone(), b)
        .create(&params, &decode(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": "copied.v1", "labels": {"olm.copiedFrom": "elsewhere"}},
            "spec": {"displayName": "copied", "install": {"strategy": "deployment", "spec": {"deployments": []}}}})))
        .await
        .unwrap();
    // The packageserver incident: the APIService trusts one CA, the Service
    // serves a certificate of another.
    let profile = olm_certs::material::Profile::for_service("pkg", b);
    let served =
        olm_certs::material::bootstrap(SystemTime::now(), &Default::default(), &profile).unwrap();
    let trusted =
        olm_certs::material::bootstrap(SystemTime::now(), &Default::default(), &profile).unwrap();
    Api::<Secret>::namespaced(client.clone(), b)
        .create(&params, &decode(json!({
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "pkg-cert"}, "type": "kubernetes.io/tls",
            "stringData": {"tls.crt": served.cert_pem, "tls.key": served.key_pem}})))
        .await
        .unwrap();
    use base64::Engine as _;
    Api::<APIService>::all(client.clone())
        .create(&params, &decode(json!({
            "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": PROBE_APISERVICE},
            "spec": {"group": "doctor.olm.test", "version": "v1alpha1", "groupPriorityMinimum": 100, "versionPriority": 1,
                     "service": {"namespace": b, "name": "pkg", "port": 443},
                     "caBundle": base64::engine::general_purpose::STANDARD.encode(&trusted.ca_bundle_pem)}})))
        .await
        .unwrap();
    // The same for one of OLM's webhooks (matching nothing, ignored on
    // failure, so the cluster is not disturbed).
    Api::<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration>::all(
        client.clone(),
    )
    .create(&params, &decode(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": PROBE_WEBHOOK, "labels": {"olm.owner": "probe.v1"}},
        "webhooks": [{
            "name": "probe.doctor.olm.test",
            "clientConfig": {"service": {"namespace": b, "name": "pkg", "path": "/validate", "port": 443},
                             "caBundle": base64::engine::general_purpose::STANDARD.encode(&trusted.ca_bundle_pem)},
            "rules": [{"apiGroups": ["doctor.olm.test"], "apiVersions": ["v1alpha1"], "resources": ["probes"], "operations": ["CREATE"]}],
            "failurePolicy": "Ignore", "sideEffects": "None", "admissionReviewVersions": ["v1"]}]})))
    .await
    .unwrap();
    // A status write an older CRD refused, as olm-operator reports it.
    Api::<k8s_openapi::api::core::v1::Event>::namespaced(client.clone(), b)
        .create(&params, &decode(json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "copied.v1.rejected"},
            "involvedObject": {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
                               "namespace": b, "name": "copied.v1"},
            "reason": "StatusRejected", "type": "Warning", "count": 2,
            "message": "status.conditions[0].status: Unsupported value: \"Unknown\""})))
        .await
        .unwrap();
    // The rollback incident: an OLM CRD whose status schema has an enum.
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&params, &decode(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": PROBE_CRD},
            "spec": {"group": "operators.coreos.com", "scope": "Namespaced",
                     "names": {"plural": "doctorprobes", "singular": "doctorprobe", "kind": "DoctorProbe"},
                     "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                        "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                            "status": {"type": "object", "properties": {"phase": {"type": "string", "enum": ["A", "B"]}}}}}}}]}})))
        .await
        .unwrap();

    let probe = format!("CustomResourceDefinition {PROBE_CRD} (v1)");
    let record_object = format!("ConfigMap NS/{record}");
    let expected: BTreeSet<(String, String, String, bool)> = [
        (
            "failed-install-plan",
            "Error",
            "InstallPlan NS/install-failed",
            true,
        ),
        (
            "stale-unpack-record",
            "Warning",
            record_object.as_str(),
            true,
        ),
        (
            "serving-certificate",
            "Error",
            "APIService v1alpha1.doctor.olm.test",
            false,
        ),
        (
            "apiservice-unavailable",
            "Error",
            "APIService v1alpha1.doctor.olm.test",
            false,
        ),
        ("status-schema", "Warning", probe.as_str(), false),
        (
            "serving-certificate",
            "Error",
            "ValidatingWebhookConfiguration doctor-probe-hook (webhook probe.doctor.olm.test)",
            false,
        ),
        (
            "status-rejected",
            "Error",
            "ClusterServiceVersion NS/copied.v1",
            false,
        ),
        ("catalog-unhealthy", "Error", "CatalogSource NS/down", false),
        ("copied-csvs", "Warning", "OLMConfig cluster", false),
        ("operator-group", "Error", "Namespace NS", false),
    ]
    .iter()
    .map(|(c, s, o, f)| ((*c).to_owned(), (*s).to_owned(), (*o).to_owned(), *f))
    .collect();
    let b_owned = b.to_owned();
    eventually("doctor finds every staged incident", WAIT, || async {
        let found = findings(&b_owned).await?;
        let found: BTreeSet<_> = found
            .into_iter()
            .map(|(c, s, o, f)| (c, s, o.replace(&b_owned, "NS"), f))
            .collect();
        if found == expected {
            Ok(())
        } else {
            Err(format!("{found:#?}"))
        }
    })
    .await;
    let (code, table) = doctor(b, &["--copied-csv-threshold", "0"]).await;
    assert_eq!(code, 1);
    assert!(
        table.starts_with("CHECK  ")
            && table.contains("no such host")
            && table.contains("pkg.NS.svc"),
        "{table}"
    );

    // --fix deletes the failed plan and the stale record, and nothing else.
    let (code, out) = doctor(b, &["--fix", "--copied-csv-threshold", "0"]).await;
    assert_eq!(code, 1, "findings needing a person remain: {out}");
    assert!(out.contains("fixing 2 finding(s):"), "{out}");
    assert!(
        out.contains("deleting installplan NS/install-failed"),
        "{out}"
    );
    assert!(
        out.contains(&format!("deleting configmap NS/{record}")),
        "{out}"
    );
    assert!(plans.get_opt("install-failed").await.unwrap().is_none());
    assert!(
        Api::<ConfigMap>::namespaced(client.clone(), b)
            .get_opt(&record)
            .await
            .unwrap()
            .is_none()
    );
    let left = findings(b).await.unwrap();
    assert_eq!(left.len(), expected.len() - 2, "{left:#?}");
    assert!(left.iter().all(|(_, _, _, fix)| !fix));
    assert!(
        subscriptions.get_opt("staging").await.unwrap().is_some(),
        "nothing else deleted"
    );

    // Cleanup of the cluster-wide objects before namespace deletion (an
    // unavailable APIService stalls it).
    Api::<APIService>::all(client.clone())
        .delete(PROBE_APISERVICE, &DeleteParams::default())
        .await
        .unwrap();
}
