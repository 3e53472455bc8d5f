//! A CSV from creation to Succeeded, without and then with an OperatorGroup,
//! and its deletion.

use std::{collections::BTreeMap, time::Duration};

use k8s_openapi::{
    api::{
        apps::v1::Deployment,
        core::v1::ServiceAccount,
        rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding},
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ListParams, PostParams},
};
use olm_api::{csv::ClusterServiceVersion, operator_group::OperatorGroup};
use serde_json::json;

use crate::{RunningOperator, eventually, init_logs, olm_crds_installed};

/// How long a CSV may take to reach a phase (the Deployment becomes
/// Available about 0.2 s after creation under kwok).
pub(crate) const PHASE_DEADLINE: Duration = Duration::from_secs(60);

pub(crate) const CSV_NAME: &str = "widget-operator.v0.1.0";
pub(crate) const DEPLOYMENT_NAME: &str = "widget-controller";
pub(crate) const SERVICE_ACCOUNT: &str = "widget-operator-sa";

/// The API group of the test's own CRD: unique per namespace, since CRDs
/// are cluster-scoped and tests run in parallel.
pub(crate) fn fixture_group(namespace: &str) -> String {
    format!("{namespace}.example.test")
}

/// The `widgets` CRD the CSV owns, created by the test (as an InstallPlan
/// would) before the CSV.
pub(crate) async fn create_widget_crd(client: &Client, namespace: &str) -> String {
    let crd = olm_testkit::open_crd(
        &fixture_group(namespace),
        "widgets",
        "Widget",
        "Namespaced",
        false,
    );
    olm_testkit::install_open_crd(client, &crd).await;
    crd.metadata.name.unwrap()
}

pub(crate) async fn delete_crd(client: &Client, name: &str) {
    let _ = Api::<CustomResourceDefinition>::all(client.clone())
        .delete(name, &DeleteParams::default())
        .await;
}

/// A small operator: one Deployment, one namespaced and one cluster-wide
/// permission rule, one owned CRD.
pub(crate) fn widget_csv(namespace: &str) -> ClusterServiceVersion {
    let group = fixture_group(namespace);
    serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {
            "name": CSV_NAME,
            "namespace": namespace,
            "annotations": { "fixture.example.test/note": "carried-to-pods" }
        },
        "spec": {
            "displayName": "Widget Operator",
            "version": "0.1.0",
            "installModes": [
                { "type": "OwnNamespace", "supported": true },
                { "type": "SingleNamespace", "supported": true },
                { "type": "MultiNamespace", "supported": false },
                { "type": "AllNamespaces", "supported": false }
            ],
            "customresourcedefinitions": {
                "owned": [{ "name": format!("widgets.{group}"), "version": "v1", "kind": "Widget" }]
            },
            "install": {
                "strategy": "deployment",
                "spec": {
                    "permissions": [{
                        "serviceAccountName": SERVICE_ACCOUNT,
                        "rules": [{ "apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"] }]
                    }],
                    "clusterPermissions": [{
                        "serviceAccountName": SERVICE_ACCOUNT,
                        "rules": [{ "apiGroups": [group], "resources": ["widgets"], "verbs": ["get", "list", "watch"] }]
                    }],
                    "deployments": [{
                        "name": DEPLOYMENT_NAME,
                        "spec": {
                            "replicas": 1,
                            "selector": { "matchLabels": { "app": DEPLOYMENT_NAME } },
                            "template": {
                                "metadata": { "labels": { "app": DEPLOYMENT_NAME } },
                                "spec": {
                                    "serviceAccountName": SERVICE_ACCOUNT,
                                    "containers": [{
                                        "name": "manager",
                                        "image": "registry.example.test/widget-operator:v0.1.0"
                                    }]
                                }
                            }
                        }
                    }]
                }
            }
        }
    }))
    .unwrap()
}

/// An OperatorGroup targeting its own namespace.
pub(crate) fn own_namespace_group(namespace: &str) -> OperatorGroup {
    serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1",
        "kind": "OperatorGroup",
        "metadata": { "name": "gadget-group", "namespace": namespace },
        "spec": { "targetNamespaces": [namespace] }
    }))
    .unwrap()
}

/// What a failing test prints: the objects of the namespace and its events.
pub(crate) fn dump(namespace: &str) -> String {
    let plane = olm_testkit::control_plane();
    let mut text = String::new();
    for args in [
        vec![
            "get",
            "csv,og,deploy,sa,role,rolebinding",
            "-n",
            namespace,
            "-o",
            "yaml",
        ],
        vec![
            "get",
            "clusterrole,clusterrolebinding",
            "-l",
            "olm.owner.kind=ClusterServiceVersion",
            "-o",
            "yaml",
        ],
        vec!["get", "events", "-n", namespace],
    ] {
        if let Ok(output) = plane.kubectl().args(&args).output() {
            text.push_str(&format!(
                "\n$ kubectl {}\n{}{}",
                args.join(" "),
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
    }
    text
}

/// Fails the test with a dump of the namespace if `future` panics or takes
/// longer than its own deadlines.
pub(crate) async fn explained<T>(namespace: &str, future: impl Future<Output = T>) -> T {
    use futures::FutureExt;
    match std::panic::AssertUnwindSafe(future).catch_unwind().await {
        Ok(value) => value,
        Err(panic) => {
            eprintln!("state of namespace {namespace}:{}", dump(namespace));
            std::panic::resume_unwind(panic)
        }
    }
}

pub(crate) fn phase_and_reason(csv: &ClusterServiceVersion) -> (String, String, String) {
    let status = csv.status.clone().unwrap_or_default();
    (
        status.phase.map(String::from).unwrap_or_default(),
        status.reason.map(String::from).unwrap_or_default(),
        status.message.unwrap_or_default(),
    )
}

async fn wait_for_phase(
    csvs: &Api<ClusterServiceVersion>,
    phase: &str,
    reason: &str,
) -> ClusterServiceVersion {
    wait_for_csv_phase(csvs, CSV_NAME, phase, reason).await
}

/// Waits until the CSV `name` has `phase` and `reason`.
pub(crate) async fn wait_for_csv_phase(
    csvs: &Api<ClusterServiceVersion>,
    name: &str,
    phase: &str,
    reason: &str,
) -> ClusterServiceVersion {
    eventually(
        &format!("csv {name} {phase}/{reason}"),
        PHASE_DEADLINE,
        || async move {
            let csv = csvs.get(name).await.map_err(|e| e.to_string())?;
            let seen = phase_and_reason(&csv);
            if seen.0 == phase && seen.1 == reason {
                Ok(csv)
            } else {
                Err(format!("{seen:?}"))
            }
        },
    )
    .await
}

/// Whether `wanted` appears in `phases` in order (other phases may lie
/// between).
pub(crate) fn in_order(phases: &[String], wanted: &[&str]) -> bool {
    let mut rest = phases.iter();
    wanted.iter().all(|w| rest.any(|p| p == w))
}

pub(crate) fn history(csv: &ClusterServiceVersion) -> Vec<String> {
    csv.status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|c| c.phase.map(String::from))
        .collect()
}

fn owner_selector(namespace: &str) -> ListParams {
    ListParams::default().labels(&format!(
        "olm.owner={CSV_NAME},olm.owner.namespace={namespace},olm.owner.kind=ClusterServiceVersion"
    ))
}

#[tokio::test]
async fn csv_installs_through_every_phase_to_succeeded() {
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let test_namespace = plane.namespace("widget-install").await;
    let namespace = test_namespace.name().to_owned();
    let client = plane.client().await;
    let operator = RunningOperator::start(&namespace).await;
    let crd = create_widget_crd(&client, &namespace).await;

    explained(&namespace, async {
        Api::<OperatorGroup>::namespaced(client.clone(), &namespace)
            .create(&PostParams::default(), &own_namespace_group(&namespace))
            .await
            .unwrap();
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &namespace);
        csvs.create(&PostParams::default(), &widget_csv(&namespace))
            .await
            .unwrap();

        let csv = wait_for_phase(&csvs, "Succeeded", "InstallSucceeded").await;
        let phases = history(&csv);
        assert!(
            in_order(
                &phases,
                &["Pending", "InstallReady", "Installing", "Succeeded"]
            ),
            "phase history {phases:?}"
        );
        assert!(
            csv.finalizers()
                .contains(&"operators.coreos.com/csv-cleanup".to_owned()),
            "finalizer on {:?}",
            csv.finalizers()
        );
        let annotations = csv.annotations();
        assert_eq!(
            annotations.get("olm.operatorGroup").map(String::as_str),
            Some("gadget-group")
        );
        assert_eq!(annotations.get("olm.targetNamespaces"), Some(&namespace));

        // The OperatorGroup's status lists its targets.
        let group = Api::<OperatorGroup>::namespaced(client.clone(), &namespace)
            .get("gadget-group")
            .await
            .unwrap();
        let status = group.status.unwrap();
        assert_eq!(status.namespaces, std::slice::from_ref(&namespace));
        assert!(status.last_updated.is_some());

        // The Deployment as upstream builds it.
        let deployment = Api::<Deployment>::namespaced(client.clone(), &namespace)
            .get(DEPLOYMENT_NAME)
            .await
            .unwrap();
        let labels = deployment.labels();
        let expected: BTreeMap<&str, &str> = BTreeMap::from([
            ("olm.managed", "true"),
            ("olm.owner", CSV_NAME),
            ("olm.owner.kind", "ClusterServiceVersion"),
            ("olm.owner.namespace", namespace.as_str()),
        ]);
        for (key, value) in expected {
            assert_eq!(
                labels.get(key).map(String::as_str),
                Some(value),
                "label {key}"
            );
        }
        assert!(
            labels.contains_key("olm.deployment-spec-hash"),
            "{labels:?}"
        );
        let template = deployment.spec.clone().unwrap().template;
        let pod_annotations = template.metadata.unwrap().annotations.unwrap();
        assert_eq!(
            pod_annotations.get("olm.targetNamespaces"),
            Some(&namespace)
        );
        assert_eq!(
            pod_annotations
                .get("fixture.example.test/note")
                .map(String::as_str),
            Some("carried-to-pods")
        );
        let container = &template.spec.unwrap().containers[0];
        let env = container.env.clone().unwrap_or_default();
        assert!(
            env.iter().any(
                |e| e.name == "OPERATOR_CONDITION_NAME" && e.value.as_deref() == Some(CSV_NAME)
            ),
            "{env:?}"
        );

        // The RBAC of its permissions.
        Api::<ServiceAccount>::namespaced(client.clone(), &namespace)
            .get(SERVICE_ACCOUNT)
            .await
            .unwrap();
        let selector = owner_selector(&namespace);
        let roles = Api::<Role>::namespaced(client.clone(), &namespace)
            .list(&selector)
            .await
            .unwrap();
        let bindings = Api::<RoleBinding>::namespaced(client.clone(), &namespace)
            .list(&selector)
            .await
            .unwrap();
        let cluster_roles = Api::<ClusterRole>::all(client.clone())
            .list(&selector)
            .await
            .unwrap();
        let cluster_bindings = Api::<ClusterRoleBinding>::all(client.clone())
            .list(&selector)
            .await
            .unwrap();
        assert_eq!(
            (
                roles.items.len(),
                bindings.items.len(),
                cluster_roles.items.len(),
                cluster_bindings.items.len()
            ),
            (1, 1, 1, 1)
        );

        // Upstream's metrics.
        let text = metrics_until(&operator, |text| {
            text.lines()
                .any(|l| l.starts_with("csv_succeeded{") && l.contains(&namespace))
        })
        .await;
        let succeeded = text
            .lines()
            .find(|l| l.starts_with("csv_succeeded{") && l.contains(&namespace))
            .unwrap_or_else(|| panic!("no csv_succeeded series in\n{text}"));
        assert!(succeeded.ends_with(" 1"), "{succeeded}");
        assert!(text.contains("csv_count "), "{text}");
        assert!(text.contains("olm_operator_reconcile_runs_total"), "{text}");
    })
    .await;

    operator.stop().await;
    delete_crd(&client, &crd).await;
}

/// The metrics text once `ready` holds: a reconcile records metrics after it
/// writes status, so a series may trail the phase a test just saw.
pub(crate) async fn metrics_until(
    operator: &RunningOperator,
    ready: impl Fn(&str) -> bool,
) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let text = operator.metrics_text();
        if ready(&text) {
            return text;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "expected series missing after 10 s:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn csv_without_operator_group_fails_then_recovers() {
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let test_namespace = plane.namespace("widget-no-og").await;
    let namespace = test_namespace.name().to_owned();
    let client = plane.client().await;
    let operator = RunningOperator::start(&namespace).await;
    let crd = create_widget_crd(&client, &namespace).await;

    explained(&namespace, async {
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &namespace);
        csvs.create(&PostParams::default(), &widget_csv(&namespace))
            .await
            .unwrap();
        let csv = wait_for_phase(&csvs, "Failed", "NoOperatorGroup").await;
        assert_eq!(
            phase_and_reason(&csv).2,
            "csv in namespace with no operatorgroups"
        );
        metrics_until(&operator, |text| {
            text.lines().any(|l| {
                l.starts_with("csv_abnormal{")
                    && l.contains("reason=\"NoOperatorGroup\"")
                    && l.contains(&namespace)
            })
        })
        .await;

        Api::<OperatorGroup>::namespaced(client.clone(), &namespace)
            .create(&PostParams::default(), &own_namespace_group(&namespace))
            .await
            .unwrap();
        let csv = wait_for_phase(&csvs, "Succeeded", "InstallSucceeded").await;
        let phases = history(&csv);
        assert!(
            in_order(&phases, &["Failed", "Pending", "Succeeded"]),
            "phase history {phases:?}"
        );
    })
    .await;

    operator.stop().await;
    delete_crd(&client, &crd).await;
}

#[tokio::test]
async fn deleting_a_csv_removes_what_it_owned() {
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let test_namespace = plane.namespace("widget-delete").await;
    let namespace = test_namespace.name().to_owned();
    let client = plane.client().await;
    let operator = RunningOperator::start(&namespace).await;
    let crd = create_widget_crd(&client, &namespace).await;

    explained(&namespace, async {
        Api::<OperatorGroup>::namespaced(client.clone(), &namespace)
            .create(&PostParams::default(), &own_namespace_group(&namespace))
            .await
            .unwrap();
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &namespace);
        csvs.create(&PostParams::default(), &widget_csv(&namespace))
            .await
            .unwrap();
        wait_for_phase(&csvs, "Succeeded", "InstallSucceeded").await;

        csvs.delete(CSV_NAME, &DeleteParams::default()).await.unwrap();
        let selector = owner_selector(&namespace);
        let cluster_roles = Api::<ClusterRole>::all(client.clone());
        let cluster_bindings = Api::<ClusterRoleBinding>::all(client.clone());
        let deployments = Api::<Deployment>::namespaced(client.clone(), &namespace);
        let roles = Api::<Role>::namespaced(client.clone(), &namespace);
        eventually("everything the csv owned is gone", PHASE_DEADLINE, || {
            let (csvs, cluster_roles, cluster_bindings, deployments, roles, selector) = (
                csvs.clone(),
                cluster_roles.clone(),
                cluster_bindings.clone(),
                deployments.clone(),
                roles.clone(),
                selector.clone(),
            );
            async move {
                let left = (
                    csvs.get_opt(CSV_NAME).await.map_err(|e| e.to_string())?.is_some(),
                    cluster_roles.list(&selector).await.map_err(|e| e.to_string())?.items.len(),
                    cluster_bindings.list(&selector).await.map_err(|e| e.to_string())?.items.len(),
                    deployments.get_opt(DEPLOYMENT_NAME).await.map_err(|e| e.to_string())?.is_some(),
                    roles.list(&selector).await.map_err(|e| e.to_string())?.items.len(),
                );
                if left == (false, 0, 0, false, 0) {
                    Ok(())
                } else {
                    Err(format!(
                        "(csv, cluster roles, cluster role bindings, deployment, roles) left: {left:?}"
                    ))
                }
            }
        })
        .await;
    })
    .await;

    operator.stop().await;
    delete_crd(&client, &crd).await;
}

/// The widget CSV named `name` in `namespace`, owning the widgets CRD of
/// `crd_namespace`'s fixture group, supporting exactly `modes`.
pub(crate) fn custom_csv(
    namespace: &str,
    crd_namespace: &str,
    name: &str,
    modes: &[&str],
) -> ClusterServiceVersion {
    let mut csv = serde_json::to_value(widget_csv(crd_namespace)).unwrap();
    csv["metadata"]["name"] = json!(name);
    csv["metadata"]["namespace"] = json!(namespace);
    csv["spec"]["installModes"] = json!(
        [
            "OwnNamespace",
            "SingleNamespace",
            "MultiNamespace",
            "AllNamespaces"
        ]
        .iter()
        .map(|mode| json!({ "type": mode, "supported": modes.contains(mode) }))
        .collect::<Vec<_>>()
    );
    serde_json::from_value(csv).unwrap()
}

/// An OperatorGroup named `name` in `namespace` targeting `targets` (all
/// namespaces when empty).
pub(crate) fn group_targeting(namespace: &str, name: &str, targets: &[&str]) -> OperatorGroup {
    let spec = if targets.is_empty() {
        json!({})
    } else {
        json!({ "targetNamespaces": targets })
    };
    serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1",
        "kind": "OperatorGroup",
        "metadata": { "name": name, "namespace": namespace },
        "spec": spec
    }))
    .unwrap()
}

/// Sets a group's `spec.targetNamespaces`.
pub(crate) async fn retarget(client: &Client, namespace: &str, name: &str, targets: &[&str]) {
    Api::<OperatorGroup>::namespaced(client.clone(), namespace)
        .patch(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({ "spec": { "targetNamespaces": targets } })),
        )
        .await
        .unwrap();
}

/// Waits until `check` holds for the object `name` in `api` (`None` when it
/// does not exist).
pub(crate) async fn wait_for<K, F>(api: &Api<K>, name: &str, what: &str, check: F) -> Option<K>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    F: Fn(Option<&K>) -> bool,
{
    let check = &check;
    eventually(what, PHASE_DEADLINE, || async move {
        let object = api.get_opt(name).await.map_err(|e| e.to_string())?;
        if check(object.as_ref()) {
            Ok(object)
        } else {
            Err(format!("{object:?}").chars().take(400).collect())
        }
    })
    .await
}
