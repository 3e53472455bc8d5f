//! Security properties of the whole install path, played end to end against
//! the real control plane with every service running: what a tenant can and
//! cannot make OLM do on its behalf.

// Test helpers: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use k8s_openapi::api::{
    core::v1::ServiceAccount,
    rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding},
};
use kube::{
    Api,
    api::{ListParams, PostParams},
};
use olm_api::operator_group::OperatorGroup;
use olm_e2e::{
    eventually,
    harness::{
        BundleSpec, WAIT, create_catalog, create_subscription, describe, install_plans, publish,
        serve_catalog, start_services,
    },
};
use serde_json::{Value, json};

fn decode<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).unwrap()
}

/// The cluster-scoped RBAC in the cluster that names `namespace`: bindings
/// with a subject there, and roles OLM labelled as owned by a CSV of that
/// namespace (the aggregation roles OLM makes for every OperatorGroup are
/// OLM's own and not counted).
async fn cluster_rbac_for(client: &kube::Client, namespace: &str) -> Vec<String> {
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    let mut found = Vec::new();
    for role in roles
        .list(&ListParams::default().labels(&format!(
            "olm.owner.namespace={namespace},olm.owner.kind=ClusterServiceVersion"
        )))
        .await
        .unwrap()
    {
        found.push(format!(
            "ClusterRole/{}",
            role.metadata.name.unwrap_or_default()
        ));
    }
    for binding in bindings.list(&ListParams::default()).await.unwrap() {
        let names_namespace = binding
            .subjects
            .iter()
            .flatten()
            .any(|s| s.namespace.as_deref() == Some(namespace));
        if names_namespace {
            found.push(format!(
                "ClusterRoleBinding/{}",
                binding.metadata.name.unwrap_or_default()
            ));
        }
    }
    found
}

/// The escape a security review found (issue: "a second OperatorGroup
/// removes serviceAccountName scoping"). An admin scopes a namespace to a
/// ServiceAccount that may do anything in the namespace and nothing
/// cluster-wide; a tenant subscribes to an operator asking for
/// clusterPermissions, which the account may not grant, then adds an
/// OperatorGroup of its own while the InstallPlan retries. No cluster-scoped
/// RBAC for the namespace may appear, however long the plan retries.
#[tokio::test]
async fn a_tenants_second_operator_group_cannot_lift_an_admins_scoping() {
    let plane = olm_testkit::control_plane();
    plane.install_crds(&olm_e2e::workspace_root().join("deploy/crds"));
    let ns = plane.namespace("e2e-escape").await;
    let namespace = ns.name().to_owned();
    let client = plane.client().await;
    let registry = olm_testkit::registry::Registry::start().unwrap();
    let group = format!("{namespace}.e2e.olm.io");
    // The operator asks for cluster-wide rights twice: through the CSV's
    // clusterPermissions (created by olm-operator) and as RBAC objects in
    // the bundle (InstallPlan steps, applied by catalog-operator).
    let escalated = format!("{namespace}-everything");
    let spec = BundleSpec::new(&group, "1.0.0")
        .cluster_permission(json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}))
        .manifest(
            "everything.clusterrole.yaml",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": escalated},
                "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}),
        )
        .manifest(
            "everything.clusterrolebinding.yaml",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": escalated},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": escalated},
                "subjects": [{"kind": "ServiceAccount", "name": "gadget-operator", "namespace": namespace}]}),
        );
    let (bundle, image) = publish(&registry.host(), &spec).await;
    let (server, _dir) = serve_catalog(&bundle, &image).await;
    let (shutdown, tasks) = start_services(&namespace, &registry.host()).await;

    // The admin: a ServiceAccount that administers the namespace, and a
    // group that installs everything as it.
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &namespace);
    accounts
        .create(
            &PostParams::default(),
            &decode(json!({"metadata": {"name": "installer"}})),
        )
        .await
        .unwrap();
    let roles: Api<Role> = Api::namespaced(client.clone(), &namespace);
    roles
        .create(
            &PostParams::default(),
            &decode(json!({"metadata": {"name": "installer"},
                "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]})),
        )
        .await
        .unwrap();
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), &namespace);
    bindings
        .create(
            &PostParams::default(),
            &decode(json!({"metadata": {"name": "installer"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "installer"},
                "subjects": [{"kind": "ServiceAccount", "name": "installer", "namespace": namespace}]})),
        )
        .await
        .unwrap();
    let groups: Api<OperatorGroup> = Api::namespaced(client.clone(), &namespace);
    groups
        .create(
            &PostParams::default(),
            &decode(json!({
                "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
                "metadata": {"name": "admin-scoped"},
                "spec": {"serviceAccountName": "installer", "targetNamespaces": [namespace]}
            })),
        )
        .await
        .unwrap();

    // The tenant subscribes; the plan is applied as the account, which may
    // not create the ClusterRole, so it retries.
    create_catalog(
        &client,
        &namespace,
        "gadgets-catalog",
        &server.addr().to_string(),
    )
    .await;
    create_subscription(&client, &namespace, "gadgets", "gadgets-catalog", None).await;
    let plan = eventually("the plan refused the cluster RBAC", WAIT, || async {
        let plans = install_plans(&client, &namespace).await;
        let plan = plans
            .iter()
            .find(|p| {
                p["status"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("forbidden"))
            })
            .cloned();
        plan.ok_or(describe(&client, &namespace).await)
    })
    .await;
    assert_eq!(
        plan["status"]["attenuatedServiceAccountRef"]["name"],
        "installer"
    );
    let plan_name = plan["metadata"]["name"].as_str().unwrap().to_owned();
    assert_eq!(
        cluster_rbac_for(&client, &namespace).await,
        Vec::<String>::new()
    );

    // The tenant adds a group of its own while the plan retries.
    groups
        .create(
            &PostParams::default(),
            &decode(json!({
                "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
                "metadata": {"name": "tenant-own"}, "spec": {"targetNamespaces": [namespace]}
            })),
        )
        .await
        .unwrap();
    eventually(
        "the plan stopped for want of one identity",
        WAIT,
        || async {
            let plans = install_plans(&client, &namespace).await;
            let plan = plans
                .iter()
                .find(|p| p["metadata"]["name"] == plan_name.as_str())
                .ok_or_else(|| "plan gone".to_owned())?;
            let stopped = plan["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["reason"] == "InstallCheckFailed");
            if stopped {
                Ok(())
            } else {
                Err(plan["status"].to_string())
            }
        },
    )
    .await;
    // Several retries later (plans are looked at every 5 s), nothing
    // cluster-scoped was created for the namespace by anyone.
    tokio::time::sleep(Duration::from_secs(12)).await;
    assert_eq!(
        cluster_rbac_for(&client, &namespace).await,
        Vec::<String>::new(),
        "{}",
        describe(&client, &namespace).await
    );
    let roles: Api<ClusterRole> = Api::all(client.clone());
    assert!(roles.get_opt(&escalated).await.unwrap().is_none());
    for plan in install_plans(&client, &namespace).await {
        for step in plan["status"]["plan"].as_array().into_iter().flatten() {
            let kind = step["resource"]["kind"].as_str().unwrap_or_default();
            if kind.starts_with("Cluster") && kind != "ClusterServiceVersion" {
                assert!(
                    !matches!(step["status"].as_str(), Some("Created" | "Present")),
                    "{step}"
                );
            }
        }
    }

    shutdown.cancel();
    for task in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(20), task).await;
    }
}
