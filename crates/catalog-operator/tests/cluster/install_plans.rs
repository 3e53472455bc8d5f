//! InstallPlans end to end: steps carried out in order with their statuses,
//! the RBAC steps of a CSV's permissions, manual approval, invalid plans,
//! and CRD updates that would lose data.

use std::time::Duration;

use k8s_openapi::{
    api::{core::v1::ServiceAccount, rbac::v1::ClusterRole},
    apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        CustomResourceDefinition, CustomResourceDefinitionVersion,
    },
};
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
};
use olm_api::{csv::ClusterServiceVersion, install_plan::InstallPlan};
use serde_json::{Value, json};

use crate::{RunningOperator, eventually, init_logs, managing_group, olm_crds_installed};

const WAIT: Duration = Duration::from_secs(40);

/// The open `widgets` CRD of `group` with `versions`, the last one stored,
/// as a step's manifest.
fn crd(group: &str, versions: &[&str]) -> Value {
    let mut crd = olm_testkit::open_crd(group, "widgets", "Widget", "Namespaced", false);
    let open = crd.spec.versions.remove(0);
    crd.spec.versions = versions
        .iter()
        .enumerate()
        .map(|(i, name)| CustomResourceDefinitionVersion {
            name: (*name).to_owned(),
            storage: i == versions.len() - 1,
            ..open.clone()
        })
        .collect();
    serde_json::to_value(crd).unwrap()
}

fn csv(name: &str) -> Value {
    json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {"name": name},
        "spec": {
            "displayName": "Widgets",
            "version": "1.0.0",
            "install": {"strategy": "deployment", "spec": {"deployments": []}},
            "installModes": [{"type": "OwnNamespace", "supported": true}],
        }
    })
}

fn step(
    resolving: &str,
    group: &str,
    version: &str,
    kind: &str,
    name: &str,
    manifest: &Value,
) -> Value {
    json!({
        "resolving": resolving,
        "resource": {
            "sourceName": "cat", "sourceNamespace": "olm",
            "group": group, "version": version, "kind": kind, "name": name,
            "manifest": manifest.to_string(),
        },
        "status": "Unknown",
    })
}

/// A plan is carried out only in a namespace one OperatorGroup manages:
/// gives the namespace one, unless the test made its own.
async fn ensure_managed(namespace: &str) {
    let client = olm_testkit::control_plane().client().await;
    let groups: Api<olm_api::operator_group::OperatorGroup> =
        Api::namespaced(client.clone(), namespace);
    if groups
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .is_empty()
    {
        managing_group(
            &client,
            namespace,
            "og",
            json!({"targetNamespaces": [namespace]}),
        )
        .await;
    }
}

async fn create_plan(
    api: &Api<InstallPlan>,
    name: &str,
    approved: bool,
    phase: &str,
    steps: Vec<Value>,
) {
    let plan: InstallPlan = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "InstallPlan",
        "metadata": {"name": name},
        "spec": {
            "clusterServiceVersionNames": ["widgets.v1"],
            "approval": if approved { "Automatic" } else { "Manual" },
            "approved": approved,
            "generation": 1,
        }
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &plan).await.unwrap();
    ensure_managed(&created.metadata.namespace.unwrap()).await;
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(
            json!({"status": {"phase": phase, "catalogSources": ["cat"], "plan": steps}}),
        ),
    )
    .await
    .unwrap();
}

async fn wait_phase(api: &Api<InstallPlan>, name: &str, phase: &str) -> Value {
    eventually(&format!("{name} {phase}"), WAIT, || async {
        let plan = api.get(name).await.map_err(|e| e.to_string())?;
        let status = serde_json::to_value(plan.status.unwrap_or_default()).unwrap();
        if status["phase"] == phase {
            Ok(status)
        } else {
            Err(status.to_string())
        }
    })
    .await
}

fn widget_steps(group: &str) -> Vec<Value> {
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "widget-operator"}});
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": format!("widgets-{group}")},
        "rules": [{"apiGroups": [group], "resources": ["widgets"], "verbs": ["get"]}],
    });
    vec![
        step(
            "widgets.v1",
            "operators.coreos.com",
            "v1alpha1",
            "ClusterServiceVersion",
            "widgets.v1",
            &csv("widgets.v1"),
        ),
        step(
            "widgets.v1",
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            &format!("widgets.{group}"),
            &crd(group, &["v1"]),
        ),
        step(
            "widgets.v1",
            "",
            "v1",
            "ServiceAccount",
            "widget-operator",
            &sa,
        ),
        step(
            "widgets.v1",
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRole",
            &format!("widgets-{group}"),
            &role,
        ),
    ]
}

#[tokio::test]
async fn an_approved_plan_is_carried_out_step_by_step() {
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let ns = plane.namespace("ip-install").await;
    let client = plane.client().await;
    let operator = RunningOperator::start(ns.name()).await;
    let api: Api<InstallPlan> = Api::namespaced(client.clone(), ns.name());
    let group = format!("{}.test.olm.io", ns.name());
    create_plan(
        &api,
        "install-auto",
        true,
        "Installing",
        widget_steps(&group),
    )
    .await;

    let status = wait_phase(&api, "install-auto", "Complete").await;
    let statuses: Vec<_> = status["plan"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["status"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        statuses,
        ["Created", "Created", "Created", "Created"],
        "{status}"
    );
    let installed = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Installed")
        .unwrap();
    assert_eq!(installed["status"], "True");
    assert!(status["startTime"].is_string());
    assert_eq!(
        warnings_counted(&operator),
        0.0,
        "nothing here draws a warning"
    );

    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = crds.get(&format!("widgets.{group}")).await.unwrap();
    assert_eq!(crd.metadata.labels.as_ref().unwrap()["olm.managed"], "true");
    let alongside = format!("{}/widgets.v1", ns.name());
    assert!(
        crd.metadata
            .annotations
            .as_ref()
            .unwrap()
            .iter()
            .any(
                |(k, v)| k.starts_with("operatorframework.io/installed-alongside-")
                    && *v == alongside
            ),
        "{:?}",
        crd.metadata.annotations
    );
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), ns.name());
    let csv = csvs.get("widgets.v1").await.unwrap();
    assert_eq!(csv.metadata.labels.as_ref().unwrap()["olm.managed"], "true");
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), ns.name());
    let account = accounts.get("widget-operator").await.unwrap();
    let owner = &account.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("ClusterServiceVersion", "widgets.v1")
    );
    assert_eq!(owner.uid, csv.metadata.uid.unwrap());
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let role = roles.get(&format!("widgets-{group}")).await.unwrap();
    let role_labels = role.metadata.labels.unwrap();
    assert_eq!(role_labels["olm.owner"], "widgets.v1");
    assert_eq!(role_labels["olm.owner.namespace"], ns.name());
    assert_eq!(role_labels["olm.owner.kind"], "ClusterServiceVersion");
    roles
        .delete(&format!("widgets-{group}"), &Default::default())
        .await
        .unwrap();
    crds.delete(&format!("widgets.{group}"), &Default::default())
        .await
        .unwrap();
    operator.stop().await;
}

#[tokio::test]
async fn a_manual_plan_waits_for_approval() {
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let ns = plane.namespace("ip-manual").await;
    let client = plane.client().await;
    let operator = RunningOperator::start(ns.name()).await;
    let api: Api<InstallPlan> = Api::namespaced(client.clone(), ns.name());
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "waiting"}});
    create_plan(
        &api,
        "install-manual",
        false,
        "RequiresApproval",
        vec![step("", "", "v1", "ServiceAccount", "waiting", &sa)],
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), ns.name());
    assert!(
        accounts.get_opt("waiting").await.unwrap().is_none(),
        "nothing happens before approval"
    );
    assert_eq!(
        wait_phase(&api, "install-manual", "RequiresApproval").await["plan"][0]["status"],
        "Unknown"
    );
    api.patch(
        "install-manual",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"approved": true}})),
    )
    .await
    .unwrap();
    wait_phase(&api, "install-manual", "Complete").await;
    assert!(accounts.get_opt("waiting").await.unwrap().is_some());
    operator.stop().await;
}

#[tokio::test]
async fn plans_with_unsupported_kinds_fail_without_applying_anything() {
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let ns = plane.namespace("ip-invalid").await;
    let client = plane.client().await;
    let operator = RunningOperator::start(ns.name()).await;
    let api: Api<InstallPlan> = Api::namespaced(client.clone(), ns.name());
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "never"}});
    let deployment =
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "sneaky"}});
    create_plan(
        &api,
        "install-invalid",
        true,
        "Installing",
        vec![
            step("", "", "v1", "ServiceAccount", "never", &sa),
            step("", "apps", "v1", "Deployment", "sneaky", &deployment),
        ],
    )
    .await;
    let status = wait_phase(&api, "install-invalid", "Failed").await;
    assert_eq!(status["message"], "the InstallPlan contains invalid data");
    assert_eq!(status["plan"][1]["status"], "UnsupportedResource");
    let installed = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Installed")
        .unwrap();
    assert_eq!(
        (installed["status"].as_str(), installed["reason"].as_str()),
        (Some("False"), Some("InstallComponentFailed"))
    );
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), ns.name());
    assert!(accounts.get_opt("never").await.unwrap().is_none());
    operator.stop().await;
}

#[tokio::test]
async fn a_crd_update_that_drops_a_stored_version_is_refused() {
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let ns = plane.namespace("ip-crd-safety").await;
    let client = plane.client().await;
    let operator = RunningOperator::start(ns.name()).await;
    let api: Api<InstallPlan> = Api::namespaced(client.clone(), ns.name());
    let group = format!("{}.test.olm.io", ns.name());
    let name = format!("widgets.{group}");
    create_plan(
        &api,
        "install-v1",
        true,
        "Installing",
        vec![step(
            "widgets.v1",
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            &name,
            &crd(&group, &["v1"]),
        )],
    )
    .await;
    wait_phase(&api, "install-v1", "Complete").await;
    create_plan(
        &api,
        "install-v2",
        true,
        "Installing",
        vec![step(
            "widgets.v2",
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            &name,
            &crd(&group, &["v2"]),
        )],
    )
    .await;
    // Retried within the retry timeout (2 s in these tests), then Failed.
    let status = wait_phase(&api, "install-v2", "Failed").await;
    assert_eq!(
        status["message"],
        format!("risk of data loss updating \"{name}\": new CRD removes version v1 that is listed as a stored version on the existing CRD").as_str()
    );
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let stored = crds.get(&name).await.unwrap();
    assert_eq!(
        stored.spec.versions[0].name, "v1",
        "the CRD is left as it was"
    );
    crds.delete(&name, &Default::default()).await.unwrap();
    operator.stop().await;
}

fn lookup_plan_status(path: &str, catalog_namespace: &str) -> Value {
    json!({
        "phase": "Installing",
        "catalogSources": ["cat"],
        "bundleLookups": [{
            "path": path,
            "identifier": "widgets.v1",
            "replaces": "",
            "catalogSourceRef": {"name": "cat", "namespace": catalog_namespace},
            "properties": "{\"properties\":[]}",
            "conditions": [
                {"type": "BundleLookupNotPersisted", "status": "True", "reason": "BundleNotUnpacked", "message": "bundle contents have not yet been persisted to installplan status"},
                {"type": "BundleLookupPending", "status": "True", "reason": "JobNotStarted", "message": "unpack job not yet started"},
            ],
        }],
    })
}

async fn create_lookup_plan(api: &Api<InstallPlan>, name: &str, status: Value) {
    let plan: InstallPlan = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "InstallPlan",
        "metadata": {"name": name},
        "spec": {"clusterServiceVersionNames": ["widgets.v1"], "approval": "Automatic", "approved": true, "generation": 1}
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &plan).await.unwrap();
    ensure_managed(&created.metadata.namespace.unwrap()).await;
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": status})),
    )
    .await
    .unwrap();
}

/// Writes what bundle-unpacker writes: the stored form of an unpacked bundle.
async fn store_unpacked(
    client: &kube::Client,
    namespace: &str,
    path: &str,
    annotations: Vec<(&str, &str)>,
    content: Option<&olm_catalog::unpacked::UnpackedBundle>,
) {
    use olm_catalog::unpacked;
    let mut all: std::collections::BTreeMap<String, String> = annotations
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    all.insert(unpacked::SOURCE_IMAGE.to_owned(), path.to_owned());
    let mut map = k8s_openapi::api::core::v1::ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(unpacked::config_map_name(path)),
            labels: Some(
                [
                    ("olm.managed".to_owned(), "true".to_owned()),
                    (
                        "operatorframework.io/bundle-unpack-ref".to_owned(),
                        unpacked::config_map_name(path),
                    ),
                ]
                .into(),
            ),
            annotations: Some(all),
            ..Default::default()
        },
        ..Default::default()
    };
    if let Some(content) = content {
        map.metadata.annotations.as_mut().unwrap().insert(
            unpacked::CONTENT_ENCODING.to_owned(),
            unpacked::ENCODING.to_owned(),
        );
        map.binary_data = Some(
            [(
                unpacked::CONTENT_KEY.to_owned(),
                k8s_openapi::ByteString(unpacked::encode(content).unwrap()),
            )]
            .into(),
        );
    }
    let maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), namespace);
    maps.create(&PostParams::default(), &map).await.unwrap();
}

#[tokio::test]
async fn unpacked_bundles_become_steps() {
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let ns = plane.namespace("ip-lookup").await;
    let client = plane.client().await;
    let operator = RunningOperator::start(ns.name()).await;
    let api: Api<InstallPlan> = Api::namespaced(client.clone(), ns.name());
    let path = format!("quay.io/example/widgets-bundle:{}", ns.name());
    create_lookup_plan(&api, "install-lookup", lookup_plan_status(&path, ns.name())).await;

    // Nothing is stored yet: the plan waits, and says what for.
    let waiting = eventually("lookup pending", WAIT, || async {
        let plan = api.get("install-lookup").await.map_err(|e| e.to_string())?;
        let status = serde_json::to_value(plan.status.unwrap_or_default()).unwrap();
        let pending = &status["bundleLookups"][0]["conditions"];
        let reason = pending
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "BundleLookupPending"))
            .map(|c| c["reason"].clone());
        if reason == Some(json!("UnpackPending")) {
            Ok(status)
        } else {
            Err(status.to_string())
        }
    })
    .await;
    assert_eq!(waiting["phase"], "Installing");

    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "unpacked-operator"}});
    let content = olm_catalog::unpacked::UnpackedBundle {
        csv_name: "widgets.v1".into(),
        objects: vec![csv("widgets.v1").to_string(), sa.to_string()],
        annotations: Default::default(),
    };
    store_unpacked(&client, ns.name(), &path, vec![], Some(&content)).await;
    let status = wait_phase(&api, "install-lookup", "Complete").await;
    assert!(
        status
            .get("bundleLookups")
            .is_none_or(|l| l.as_array().is_none_or(Vec::is_empty)),
        "{status}"
    );
    let kinds: Vec<_> = status["plan"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["resource"]["kind"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(kinds, ["ClusterServiceVersion", "ServiceAccount"]);
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), ns.name());
    accounts.get("unpacked-operator").await.unwrap();
    operator.stop().await;
}

#[tokio::test]
async fn a_csvs_permissions_become_rbac_steps_owned_by_the_csv() {
    use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, Role, RoleBinding};
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let ns = plane.namespace("ip-rbac").await;
    let client = plane.client().await;
    // The account exists already, with a pull secret and an annotation
    // someone else gave it: the step keeps both.
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), ns.name());
    let existing: ServiceAccount = serde_json::from_value(json!({
        "metadata": {"name": "widget-operator", "annotations": {"example.test/keep": "me"}},
        "imagePullSecrets": [{"name": "pull"}],
    }))
    .unwrap();
    accounts
        .create(&PostParams::default(), &existing)
        .await
        .unwrap();
    let operator = RunningOperator::start(ns.name()).await;
    let api: Api<InstallPlan> = Api::namespaced(client.clone(), ns.name());
    let path = format!("quay.io/example/widgets-bundle:{}", ns.name());
    create_lookup_plan(&api, "install-rbac", lookup_plan_status(&path, ns.name())).await;
    let mut csv = csv("widgets.v1");
    let rule =
        |resource: &str| json!({"apiGroups": [""], "resources": [resource], "verbs": ["get"]});
    csv["spec"]["install"]["spec"]["permissions"] =
        json!([{"serviceAccountName": "widget-operator", "rules": [rule("configmaps")]}]);
    csv["spec"]["install"]["spec"]["clusterPermissions"] =
        json!([{"serviceAccountName": "widget-operator", "rules": [rule("namespaces")]}]);
    let content = olm_catalog::unpacked::UnpackedBundle {
        csv_name: "widgets.v1".into(),
        objects: vec![csv.to_string()],
        annotations: Default::default(),
    };
    store_unpacked(&client, ns.name(), &path, vec![], Some(&content)).await;
    let status = wait_phase(&api, "install-rbac", "Complete").await;
    let steps: Vec<(String, String, String)> = status["plan"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let text = |v: &Value| v.as_str().unwrap().to_owned();
            (
                text(&s["resource"]["kind"]),
                text(&s["resource"]["name"]),
                text(&s["status"]),
            )
        })
        .collect();
    let kinds: Vec<(&str, &str)> = steps
        .iter()
        .map(|(kind, _, status)| (kind.as_str(), status.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("ClusterServiceVersion", "Created"),
            ("ServiceAccount", "Present"),
            ("Role", "Created"),
            ("RoleBinding", "Created"),
            ("ClusterRole", "Created"),
            ("ClusterRoleBinding", "Created"),
        ]
    );
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), ns.name());
    let uid = csvs.get("widgets.v1").await.unwrap().metadata.uid.unwrap();
    let owned_by_csv = |meta: &kube::api::ObjectMeta| {
        let refs = meta.owner_references.clone().unwrap_or_default();
        refs.len() == 1 && refs[0].uid == uid && refs[0].name == "widgets.v1"
    };
    let account = accounts.get("widget-operator").await.unwrap();
    assert!(owned_by_csv(&account.metadata), "{account:?}");
    assert_eq!(account.image_pull_secrets.unwrap()[0].name, "pull");
    assert_eq!(
        account.metadata.annotations.unwrap()["example.test/keep"],
        "me"
    );
    let role = Api::<Role>::namespaced(client.clone(), ns.name())
        .get(&steps[2].1)
        .await
        .unwrap();
    assert!(owned_by_csv(&role.metadata), "{role:?}");
    let labels = role.metadata.labels.unwrap();
    assert_eq!(labels["olm.managed"], "true");
    assert_eq!(
        labels["olm.permissions.hash"],
        olm_plan::csv_rbac::policy_rule_hash(&role.rules.unwrap())
    );
    let binding = Api::<RoleBinding>::namespaced(client.clone(), ns.name())
        .get(&steps[3].1)
        .await
        .unwrap();
    assert_eq!(binding.role_ref.name, steps[2].1);
    assert!(owned_by_csv(&binding.metadata), "{binding:?}");
    let cluster_roles: Api<ClusterRole> = Api::all(client.clone());
    let cluster_role = cluster_roles.get(&steps[4].1).await.unwrap();
    let labels = cluster_role.metadata.labels.unwrap();
    assert_eq!(labels["olm.owner"], "widgets.v1");
    assert_eq!(labels["olm.owner.namespace"], ns.name());
    let cluster_bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    let cluster_binding = cluster_bindings.get(&steps[5].1).await.unwrap();
    assert_eq!(
        cluster_binding.subjects.unwrap()[0].namespace.as_deref(),
        Some(ns.name())
    );
    operator.stop().await;
    // Cluster-scoped objects outlive the namespace.
    let _ = cluster_bindings
        .delete(&steps[5].1, &Default::default())
        .await;
    let _ = cluster_roles.delete(&steps[4].1, &Default::default()).await;
}

#[tokio::test]
async fn a_recorded_unpack_failure_shows_on_the_lookup() {
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let ns = plane.namespace("ip-lookup-fail").await;
    let client = plane.client().await;
    let operator = RunningOperator::start(ns.name()).await;
    let api: Api<InstallPlan> = Api::namespaced(client.clone(), ns.name());
    let path = format!("quay.io/example/missing-bundle:{}", ns.name());
    store_unpacked(
        &client,
        ns.name(),
        &path,
        vec![
            (olm_catalog::unpacked::FAILURE_REASON, "ImagePullFailed"),
            (olm_catalog::unpacked::FAILURE_MESSAGE, "manifest unknown"),
        ],
        None,
    )
    .await;
    create_lookup_plan(&api, "install-fail", lookup_plan_status(&path, ns.name())).await;
    eventually("lookup failed", WAIT, || async {
        let plan = api.get("install-fail").await.map_err(|e| e.to_string())?;
        let status = serde_json::to_value(plan.status.unwrap_or_default()).unwrap();
        let failed = status["bundleLookups"][0]["conditions"]
            .as_array()
            .and_then(|c| {
                c.iter()
                    .find(|c| c["type"] == "BundleLookupFailed")
                    .cloned()
            });
        match failed {
            Some(c)
                if c["status"] == "True"
                    && c["reason"] == "ImagePullFailed"
                    && c["message"] == "manifest unknown" =>
            {
                Ok(())
            }
            _ => Err(status.to_string()),
        }
    })
    .await;
    operator.stop().await;
}

#[tokio::test]
async fn a_crd_update_that_would_invalidate_existing_resources_is_refused() {
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let ns = plane.namespace("ip-crd-schema").await;
    let client = plane.client().await;
    let operator = RunningOperator::start(ns.name()).await;
    let api: Api<InstallPlan> = Api::namespaced(client.clone(), ns.name());
    let group = format!("{}.test.olm.io", ns.name());
    let name = format!("widgets.{group}");
    create_plan(
        &api,
        "install-v1",
        true,
        "Installing",
        vec![step(
            "widgets.v1",
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            &name,
            &crd(&group, &["v1"]),
        )],
    )
    .await;
    wait_phase(&api, "install-v1", "Complete").await;

    // A widget that the stricter schema below would refuse.
    let resource = kube::api::ApiResource {
        group: group.clone(),
        version: "v1".into(),
        api_version: format!("{group}/v1"),
        kind: "Widget".into(),
        plural: "widgets".into(),
    };
    let widgets: Api<kube::api::DynamicObject> =
        Api::namespaced_with(client.clone(), ns.name(), &resource);
    let widget: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{group}/v1"), "kind": "Widget",
        "metadata": {"name": "small"}, "spec": {"size": 1}
    }))
    .unwrap();
    widgets
        .create(&PostParams::default(), &widget)
        .await
        .unwrap();

    let mut strict = crd(&group, &["v1"]);
    strict["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = json!({
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer", "minimum": 3}}}}
    });
    create_plan(
        &api,
        "install-strict",
        true,
        "Installing",
        vec![step(
            "widgets.v2",
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            &name,
            &strict,
        )],
    )
    .await;
    let status = wait_phase(&api, "install-strict", "Failed").await;
    let message = status["message"].as_str().unwrap();
    assert!(
        message.contains("updated validation is too restrictive"),
        "{message}"
    );
    assert!(
        message.contains(&format!("{}/small", ns.name())),
        "{message}"
    );
    assert!(message.contains("version v1"), "{message}");

    // A compatible update goes through.
    let mut lenient = crd(&group, &["v1"]);
    lenient["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = json!({
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer", "minimum": 1}}}}
    });
    create_plan(
        &api,
        "install-lenient",
        true,
        "Installing",
        vec![step(
            "widgets.v2",
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            &name,
            &lenient,
        )],
    )
    .await;
    wait_phase(&api, "install-lenient", "Complete").await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.delete(&name, &Default::default()).await.unwrap();
    operator.stop().await;
}

#[tokio::test]
async fn a_scoped_install_gets_no_more_than_its_service_account_may_grant() {
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let ns = plane.namespace("ip-scoped").await;
    let client = plane.client().await;
    installer_account(&client, ns.name()).await;
    managing_group(
        &client,
        ns.name(),
        "og",
        json!({"serviceAccountName": "installer", "targetNamespaces": [ns.name()]}),
    )
    .await;
    let operator = RunningOperator::start(ns.name()).await;
    let api: Api<InstallPlan> = Api::namespaced(client.clone(), ns.name());
    let config = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "scoped-settings"}, "data": {"a": "b"}});
    create_plan(
        &api,
        "install-scoped",
        true,
        "Installing",
        vec![step("", "", "v1", "ConfigMap", "scoped-settings", &config)],
    )
    .await;

    // The installer may not create ConfigMaps: the plan keeps retrying
    // (Forbidden is never final), and says why.
    let status = eventually("forbidden and retrying", WAIT, || async {
        let plan = api.get("install-scoped").await.map_err(|e| e.to_string())?;
        let status = serde_json::to_value(plan.status.unwrap_or_default()).unwrap();
        let message = status["message"].as_str().unwrap_or_default().to_owned();
        if message.starts_with("retrying execution due to error") && message.contains("forbidden") {
            Ok(status)
        } else {
            Err(status.to_string())
        }
    })
    .await;
    assert_eq!(status["phase"], "Installing");
    assert_eq!(status["attenuatedServiceAccountRef"]["name"], "installer");
    let maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), ns.name());
    assert!(maps.get_opt("scoped-settings").await.unwrap().is_none());

    // Granting the account the permission lets the plan complete.
    grant_installer(
        &client,
        ns.name(),
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "create", "update"]},
               {"apiGroups": ["operators.coreos.com"], "resources": ["clusterserviceversions"], "verbs": ["get"]}]),
    )
    .await;
    wait_phase(&api, "install-scoped", "Complete").await;
    assert!(maps.get_opt("scoped-settings").await.unwrap().is_some());
    operator.stop().await;
}

/// Creates the ServiceAccount `installer` a scoped OperatorGroup names.
async fn installer_account(client: &kube::Client, namespace: &str) {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    accounts
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "installer"}})).unwrap(),
        )
        .await
        .unwrap();
}

/// Grants `installer` the Role `rules` in its namespace.
async fn grant_installer(client: &kube::Client, namespace: &str, rules: Value) {
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    let roles: Api<Role> = Api::namespaced(client.clone(), namespace);
    roles
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "installer"}, "rules": rules}))
                .unwrap(),
        )
        .await
        .unwrap();
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), namespace);
    bindings
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "installer"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "installer"},
                "subjects": [{"kind": "ServiceAccount", "name": "installer", "namespace": namespace}]
            }))
            .unwrap(),
        )
        .await
        .unwrap();
}

/// `installplan_warnings_total` as the operator's `/metrics` serves it.
fn warnings_counted(operator: &RunningOperator) -> f64 {
    let text = operator.metrics_text();
    text.lines()
        .find_map(|line| line.strip_prefix("installplan_warnings_total "))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no installplan_warnings_total in {text}"))
}

#[tokio::test]
async fn api_warnings_while_applying_a_plan_are_counted() {
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let ns = plane.namespace("ip-warn").await;
    let client = plane.client().await;
    let operator = RunningOperator::start(ns.name()).await;
    let api: Api<InstallPlan> = Api::namespaced(client.clone(), ns.name());
    // kube-apiserver warns about this deprecated Service annotation
    // (pkg/api/service/warnings.go) and creates the Service anyway.
    let service = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "widget-metrics",
            "annotations": {"service.kubernetes.io/topology-aware-hints": "auto"}},
        "spec": {"ports": [{"port": 8443}], "selector": {"app": "widget-operator"}},
    });
    let steps = vec![
        step(
            "widgets.v1",
            "operators.coreos.com",
            "v1alpha1",
            "ClusterServiceVersion",
            "widgets.v1",
            &csv("widgets.v1"),
        ),
        step(
            "widgets.v1",
            "",
            "v1",
            "Service",
            "widget-metrics",
            &service,
        ),
    ];
    create_plan(&api, "install-warn", true, "Installing", steps).await;
    wait_phase(&api, "install-warn", "Complete").await;
    let services: Api<k8s_openapi::api::core::v1::Service> =
        Api::namespaced(client.clone(), ns.name());
    services.get("widget-metrics").await.unwrap();
    assert!(
        warnings_counted(&operator) >= 1.0,
        "{}",
        operator.metrics_text()
    );
    operator.stop().await;
}

/// The escape a security review found: a tenant subscribes under an admin's
/// scoped OperatorGroup, then adds a second group while the plan retries.
/// Before the fix, the plan's cluster-scoped RBAC was then created with
/// OLM's own identity. Now the plan stops with `InstallCheckFailed` and
/// nothing beyond what the ServiceAccount may create ever exists.
#[tokio::test]
async fn a_second_operator_group_stops_a_scoped_plan_instead_of_lifting_its_scope() {
    use k8s_openapi::api::{core::v1::ConfigMap, rbac::v1::ClusterRoleBinding};
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let ns = plane.namespace("ip-escape").await;
    let client = plane.client().await;
    installer_account(&client, ns.name()).await;
    // The admin's account may create ConfigMaps in its namespace, and
    // nothing cluster-scoped.
    grant_installer(
        &client,
        ns.name(),
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "create", "update"]}]),
    )
    .await;
    managing_group(
        &client,
        ns.name(),
        "admin-scoped",
        json!({"serviceAccountName": "installer", "targetNamespaces": [ns.name()]}),
    )
    .await;
    let operator = RunningOperator::start(ns.name()).await;

    let escalated = format!("escape-{}", ns.name());
    let settings = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "escape-settings"}, "data": {"a": "b"}});
    let cluster_role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": escalated},
        "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}],
    });
    let cluster_binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": escalated},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": escalated},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": ns.name()}],
    });
    let api: Api<InstallPlan> = Api::namespaced(client.clone(), ns.name());
    create_plan(
        &api,
        "install-escape",
        true,
        "Installing",
        vec![
            step("", "", "v1", "ConfigMap", "escape-settings", &settings),
            step(
                "",
                "rbac.authorization.k8s.io",
                "v1",
                "ClusterRole",
                &escalated,
                &cluster_role,
            ),
            step(
                "",
                "rbac.authorization.k8s.io",
                "v1",
                "ClusterRoleBinding",
                &escalated,
                &cluster_binding,
            ),
        ],
    )
    .await;
    // Scoped: what the account may create is created, the rest is refused
    // and retried.
    eventually("forbidden and retrying", WAIT, || async {
        let plan = api.get("install-escape").await.map_err(|e| e.to_string())?;
        let status = serde_json::to_value(plan.status.unwrap_or_default()).unwrap();
        let message = status["message"].as_str().unwrap_or_default();
        if message.contains("forbidden") {
            Ok(())
        } else {
            Err(status.to_string())
        }
    })
    .await;
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    assert!(maps.get_opt("escape-settings").await.unwrap().is_some());

    // The tenant adds a group of its own.
    managing_group(
        &client,
        ns.name(),
        "tenant-unscoped",
        json!({"targetNamespaces": [ns.name()]}),
    )
    .await;
    let status = eventually("InstallCheckFailed", WAIT, || async {
        let plan = api.get("install-escape").await.map_err(|e| e.to_string())?;
        let status = serde_json::to_value(plan.status.unwrap_or_default()).unwrap();
        let refused = status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| {
                c["type"] == "Installed"
                    && c["status"] == "False"
                    && c["reason"] == "InstallCheckFailed"
                    && c["message"]
                        == "more than one operator group(s) are managing this namespace count=2"
            });
        if refused {
            Ok(status)
        } else {
            Err(status.to_string())
        }
    })
    .await;
    assert_eq!(status["phase"], "Installing", "retried, not failed");
    // Several retries later, still nothing cluster-scoped exists.
    tokio::time::sleep(Duration::from_secs(12)).await;
    let cluster_roles: Api<ClusterRole> = Api::all(client.clone());
    let cluster_bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    assert!(cluster_roles.get_opt(&escalated).await.unwrap().is_none());
    assert!(
        cluster_bindings
            .get_opt(&escalated)
            .await
            .unwrap()
            .is_none()
    );
    let plan = api.get("install-escape").await.unwrap();
    let steps = serde_json::to_value(plan.status.unwrap().plan).unwrap();
    for step in steps.as_array().unwrap() {
        if step["resource"]["kind"] != "ConfigMap" {
            assert_ne!(step["status"], "Created", "{step}");
            assert_ne!(step["status"], "Present", "{step}");
        }
    }

    // The tenant's group goes: the plan is scoped again, says so, and is
    // still refused the cluster-scoped objects.
    let groups: Api<olm_api::operator_group::OperatorGroup> =
        Api::namespaced(client.clone(), ns.name());
    groups
        .delete("tenant-unscoped", &Default::default())
        .await
        .unwrap();
    eventually("scoped and retrying again", WAIT, || async {
        let plan = api.get("install-escape").await.map_err(|e| e.to_string())?;
        let status = serde_json::to_value(plan.status.unwrap_or_default()).unwrap();
        let reset = status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Installed" && c["reason"] == "Unknown");
        if reset && status["attenuatedServiceAccountRef"]["name"] == "installer" {
            Ok(())
        } else {
            Err(status.to_string())
        }
    })
    .await;
    assert!(cluster_roles.get_opt(&escalated).await.unwrap().is_none());
    operator.stop().await;
}

#[tokio::test]
async fn a_plan_in_a_namespace_no_operator_group_manages_applies_nothing() {
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let ns = plane.namespace("ip-ungrouped").await;
    let client = plane.client().await;
    let operator = RunningOperator::start(ns.name()).await;
    let api: Api<InstallPlan> = Api::namespaced(client.clone(), ns.name());
    // Written by hand, as create_plan would, but without giving the
    // namespace an OperatorGroup.
    let plan: InstallPlan = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
        "metadata": {"name": "install-orphan"},
        "spec": {"clusterServiceVersionNames": ["widgets.v1"], "approval": "Automatic", "approved": true, "generation": 1}
    }))
    .unwrap();
    api.create(&PostParams::default(), &plan).await.unwrap();
    let settings = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "orphan-settings"}, "data": {"a": "b"}});
    api.patch_status(
        "install-orphan",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"status": {"phase": "Installing", "catalogSources": ["cat"],
            "plan": [step("", "", "v1", "ConfigMap", "orphan-settings", &settings)]}}),
        ),
    )
    .await
    .unwrap();
    eventually("InstallCheckFailed", WAIT, || async {
        let plan = api.get("install-orphan").await.map_err(|e| e.to_string())?;
        let status = serde_json::to_value(plan.status.unwrap_or_default()).unwrap();
        let refused = status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| {
                c["reason"] == "InstallCheckFailed"
                    && c["message"] == "no operator group found that is managing this namespace"
            });
        if refused {
            Ok(())
        } else {
            Err(status.to_string())
        }
    })
    .await;
    let maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), ns.name());
    assert!(maps.get_opt("orphan-settings").await.unwrap().is_none());
    operator.stop().await;
}
