//! Subscription `config` on the operator's Deployment (and its removal), a
//! scoped install through the OperatorGroup's `serviceAccountName`, and two
//! OperatorGroups in one namespace.

use std::collections::BTreeMap;

use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{Namespace, ServiceAccount},
    rbac::v1::ClusterRoleBinding,
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use olm_api::{
    csv::ClusterServiceVersion, labels, operator_group::OperatorGroup, subscription::Subscription,
};
use serde_json::json;

use crate::{
    RunningOperator,
    csv_lifecycle::{
        CSV_NAME, DEPLOYMENT_NAME, create_widget_crd, delete_crd, explained, group_targeting,
        own_namespace_group, phase_and_reason, wait_for, wait_for_csv_phase, widget_csv,
    },
    init_logs, olm_crds_installed,
};

fn env_of(deployment: &Deployment) -> BTreeMap<String, String> {
    deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .map(|p| p.containers[0].env.clone().unwrap_or_default())
        .unwrap_or_default()
        .into_iter()
        .map(|e| (e.name, e.value.unwrap_or_default()))
        .collect()
}

fn spec_hash(deployment: &Deployment) -> String {
    deployment.labels()[labels::DEPLOYMENT_SPEC_HASH].clone()
}

async fn set_config(client: &Client, namespace: &str, config: serde_json::Value) {
    Api::<Subscription>::namespaced(client.clone(), namespace)
        .patch(
            "widget-subscription",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "config": config } })),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn subscription_config_reaches_the_deployment_and_a_change_rolls_it() {
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let namespace = plane.namespace("sprocket-config").await;
    let namespace = namespace.name().to_owned();
    let client = plane.client().await;
    let operator = RunningOperator::start(&namespace).await;
    let crd = create_widget_crd(&client, &namespace).await;

    explained(&namespace, async {
        Api::<OperatorGroup>::namespaced(client.clone(), &namespace)
            .create(&PostParams::default(), &own_namespace_group(&namespace))
            .await
            .unwrap();
        // The Subscription as catalog-operator leaves it while the CSV is
        // being installed: currentCSV names it, installedCSV not yet.
        let subscriptions: Api<Subscription> = Api::namespaced(client.clone(), &namespace);
        let subscription: Subscription = serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "Subscription",
            "metadata": { "name": "widget-subscription", "namespace": namespace },
            "spec": {
                "name": "widget-operator", "source": "gizmo-catalog", "sourceNamespace": namespace,
                "config": {
                    "env": [{ "name": "LOG_LEVEL", "value": "debug" }],
                    "nodeSelector": { "type": "kwok" },
                    "tolerations": [{ "key": "sprocket.example.test/spinning", "operator": "Exists" }],
                    "resources": { "limits": { "cpu": "250m" } },
                    "volumes": [{ "name": "cache", "emptyDir": {} }],
                    "volumeMounts": [{ "name": "cache", "mountPath": "/var/cache/sprocket" }],
                    "annotations": { "sprocket.example.test/owner": "team-cog" }
                }
            }
        }))
        .unwrap();
        subscriptions
            .create(&PostParams::default(), &subscription)
            .await
            .unwrap();
        subscriptions
            .patch_status(
                "widget-subscription",
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": {
                    "currentCSV": CSV_NAME, "state": "UpgradePending",
                    "lastUpdated": "2031-01-01T00:00:00Z"
                } })),
            )
            .await
            .unwrap();

        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &namespace);
        csvs.create(&PostParams::default(), &widget_csv(&namespace))
            .await
            .unwrap();
        wait_for_csv_phase(&csvs, CSV_NAME, "Succeeded", "InstallSucceeded").await;

        let deployments: Api<Deployment> = Api::namespaced(client.clone(), &namespace);
        let first = deployments.get(DEPLOYMENT_NAME).await.unwrap();
        let pod = first.spec.clone().unwrap().template.spec.unwrap();
        assert_eq!(env_of(&first)["LOG_LEVEL"], "debug");
        assert_eq!(env_of(&first)["OPERATOR_CONDITION_NAME"], CSV_NAME);
        assert_eq!(pod.node_selector.unwrap()["type"], "kwok");
        assert_eq!(pod.tolerations.unwrap().len(), 1);
        assert_eq!(pod.volumes.unwrap()[0].name, "cache");
        assert_eq!(
            pod.containers[0].volume_mounts.as_ref().unwrap()[0].mount_path,
            "/var/cache/sprocket"
        );
        assert!(pod.containers[0].resources.as_ref().unwrap().limits.is_some());
        assert_eq!(
            first.annotations()["sprocket.example.test/owner"],
            "team-cog"
        );
        assert_eq!(
            first.spec.as_ref().unwrap().template.metadata.as_ref().unwrap().annotations.as_ref().unwrap()
                ["sprocket.example.test/owner"],
            "team-cog"
        );

        // catalog-operator marks it installed: nothing changes.
        subscriptions
            .patch_status(
                "widget-subscription",
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": { "installedCSV": CSV_NAME, "state": "AtLatestKnown" } })),
            )
            .await
            .unwrap();

        // A config change re-rolls the Deployment.
        // (A merge patch: the fields set to null leave the config.)
        set_config(
            &client,
            &namespace,
            json!({
                "env": [{ "name": "LOG_LEVEL", "value": "trace" }],
                "nodeSelector": null, "tolerations": null, "resources": null,
                "volumes": null, "volumeMounts": null, "annotations": null
            }),
        )
        .await;
        let rolled = wait_for(&deployments, DEPLOYMENT_NAME, "env LOG_LEVEL=trace", |d| {
            d.is_some_and(|d| env_of(d).get("LOG_LEVEL").map(String::as_str) == Some("trace"))
        })
        .await
        .unwrap();
        assert_ne!(spec_hash(&rolled), spec_hash(&first), "the spec hash moves");
        let pod = rolled.spec.clone().unwrap().template.spec.unwrap();
        assert!(pod.node_selector.is_none(), "what the old config added is gone");
        assert!(pod.tolerations.is_none());
        assert!(pod.volumes.is_none());
        assert!(pod.containers[0].volume_mounts.is_none());
        assert!(pod.containers[0].resources.as_ref().is_none_or(|r| r.limits.is_none()));

        // Removing the config removes what it added.
        Api::<Subscription>::namespaced(client.clone(), &namespace)
            .patch(
                "widget-subscription",
                &PatchParams::default(),
                &Patch::Merge(json!({ "spec": { "config": null } })),
            )
            .await
            .unwrap();
        let plain = wait_for(&deployments, DEPLOYMENT_NAME, "env without LOG_LEVEL", |d| {
            d.is_some_and(|d| !env_of(d).contains_key("LOG_LEVEL"))
        })
        .await
        .unwrap();
        assert_eq!(env_of(&plain)[labels::OPERATOR_CONDITION_NAME_ENV], CSV_NAME);
        assert!(!plain.annotations().contains_key("sprocket.example.test/owner"));
        wait_for_csv_phase(&csvs, CSV_NAME, "Succeeded", "InstallSucceeded").await;
    })
    .await;
    operator.stop().await;
    delete_crd(&client, &crd).await;
}

fn group_with_account(namespace: &str, account: &str) -> OperatorGroup {
    let mut group = own_namespace_group(namespace);
    group.spec.service_account_name = Some(account.to_owned());
    group
}

async fn group_condition(
    groups: &Api<OperatorGroup>,
    name: &str,
    condition: &str,
    present: bool,
) -> OperatorGroup {
    wait_for(
        groups,
        name,
        &format!("{name} condition {condition} present={present}"),
        |g| {
            g.is_some_and(|g| {
                g.status
                    .as_ref()
                    .is_some_and(|s| s.conditions.iter().any(|c| c.type_ == condition) == present)
            })
        },
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn a_scoped_install_gets_no_more_than_the_service_account_may_grant() {
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let namespace = plane.namespace("sprocket-scoped").await;
    let namespace = namespace.name().to_owned();
    let client = plane.client().await;
    let operator = RunningOperator::start(&namespace).await;
    let crd = create_widget_crd(&client, &namespace).await;
    let installer = "sprocket-installer";
    let binding_name = format!("{namespace}-{installer}");

    explained(&namespace, async {
        let groups: Api<OperatorGroup> = Api::namespaced(client.clone(), &namespace);
        groups
            .create(&PostParams::default(), &group_with_account(&namespace, installer))
            .await
            .unwrap();
        // The account does not exist yet: the group says so.
        let group = group_condition(&groups, "gadget-group", "OperatorGroupServiceAccount", true).await;
        let condition = &group.status.unwrap().conditions[0];
        assert_eq!(condition.reason, "ServiceAccountNotFound");
        assert_eq!(condition.message, format!("ServiceAccount {installer} not found"));

        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &namespace);
        accounts
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({ "metadata": { "name": installer } })).unwrap(),
            )
            .await
            .unwrap();
        let group = group_condition(&groups, "gadget-group", "OperatorGroupServiceAccount", false).await;
        let reference = group.status.unwrap().service_account_ref.unwrap();
        assert_eq!(reference.name.as_deref(), Some(installer));
        assert_eq!(reference.kind.as_deref(), Some("ServiceAccount"));
        let account = accounts.get(installer).await.unwrap();
        assert_eq!(reference.uid, account.metadata.uid);
        assert_eq!(account.labels()[labels::MANAGED], labels::MANAGED_VALUE);

        // An account with no permissions: the install is refused, and says so.
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &namespace);
        csvs.create(&PostParams::default(), &widget_csv(&namespace))
            .await
            .unwrap();
        let failed =
            wait_for_csv_phase(&csvs, CSV_NAME, "Failed", "InstallComponentFailedNoRetry").await;
        let message = phase_and_reason(&failed).2;
        assert!(
            message.starts_with("install strategy failed: install strategy failed: ")
                && message.contains(&format!("system:serviceaccount:{namespace}:{installer}"))
                && message.contains("forbidden"),
            "{message}"
        );
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), &namespace);
        assert!(deployments.get_opt(DEPLOYMENT_NAME).await.unwrap().is_none());

        // Granting the account what it lacked lets the install through.
        let binding: ClusterRoleBinding = serde_json::from_value(json!({
            "metadata": { "name": binding_name },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin" },
            "subjects": [{ "kind": "ServiceAccount", "name": installer, "namespace": namespace }]
        }))
        .unwrap();
        Api::<ClusterRoleBinding>::all(client.clone())
            .create(&PostParams::default(), &binding)
            .await
            .unwrap();
        let csv = wait_for_csv_phase(&csvs, CSV_NAME, "Succeeded", "InstallSucceeded").await;
        let reasons: Vec<String> = csv
            .status
            .unwrap()
            .conditions
            .unwrap_or_default()
            .into_iter()
            .filter_map(|c| c.reason.map(String::from))
            .collect();
        assert!(
            reasons.iter().any(|r| r == "DetectedClusterChange"),
            "{reasons:?}"
        );
        let deployment = deployments.get(DEPLOYMENT_NAME).await.unwrap();
        assert!(
            deployment
                .managed_fields()
                .iter()
                .any(|f| f.manager.as_deref() == Some("olm-operator")),
            "applied by olm-operator's field manager, as the account"
        );
    })
    .await;
    operator.stop().await;
    let _ = Api::<ClusterRoleBinding>::all(client.clone())
        .delete(&binding_name, &DeleteParams::default())
        .await;
    delete_crd(&client, &crd).await;
}

#[tokio::test]
async fn two_operator_groups_in_a_namespace_fail_its_csvs_until_one_goes() {
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let namespace = plane.namespace("sprocket-twins").await;
    let namespace = namespace.name().to_owned();
    let client = plane.client().await;
    let operator = RunningOperator::start(&namespace).await;
    let crd = create_widget_crd(&client, &namespace).await;

    explained(&namespace, async {
        let groups: Api<OperatorGroup> = Api::namespaced(client.clone(), &namespace);
        let first = groups
            .create(&PostParams::default(), &own_namespace_group(&namespace))
            .await
            .unwrap();
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &namespace);
        csvs.create(&PostParams::default(), &widget_csv(&namespace))
            .await
            .unwrap();
        wait_for_csv_phase(&csvs, CSV_NAME, "Succeeded", "InstallSucceeded").await;

        // The targeted namespace carries the group's uid label.
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let first_label = labels::operator_group_uid_label(&first.uid().unwrap());
        wait_for(
            &namespaces,
            &namespace,
            "namespace labelled with the group uid",
            |ns| ns.is_some_and(|ns| ns.labels().get(&first_label).map(String::as_str) == Some("")),
        )
        .await;

        groups
            .create(
                &PostParams::default(),
                &group_targeting(&namespace, "gadget-twin", &[&namespace]),
            )
            .await
            .unwrap();
        let failed = wait_for_csv_phase(&csvs, CSV_NAME, "Failed", "TooManyOperatorGroups").await;
        assert_eq!(
            phase_and_reason(&failed).2,
            "csv created in namespace with multiple operatorgroups, can't pick one automatically"
        );
        for name in ["gadget-group", "gadget-twin"] {
            let group = group_condition(&groups, name, "MultipleOperatorGroup", true).await;
            let condition = group
                .status
                .unwrap()
                .conditions
                .into_iter()
                .find(|c| c.type_ == "MultipleOperatorGroup")
                .unwrap();
            assert_eq!(condition.status, "True");
            assert_eq!(condition.reason, "MultipleOperatorGroupsFound");
            assert_eq!(
                condition.message,
                "Multiple OperatorGroup found in the same namespace"
            );
        }
        let twin_label = labels::operator_group_uid_label(
            &groups.get("gadget-twin").await.unwrap().uid().unwrap(),
        );
        wait_for(
            &namespaces,
            &namespace,
            "namespace labelled with both uids",
            |ns| {
                ns.is_some_and(|ns| {
                    ns.labels().contains_key(&first_label) && ns.labels().contains_key(&twin_label)
                })
            },
        )
        .await;

        groups
            .delete("gadget-twin", &DeleteParams::default())
            .await
            .unwrap();
        group_condition(&groups, "gadget-group", "MultipleOperatorGroup", false).await;
        wait_for_csv_phase(&csvs, CSV_NAME, "Succeeded", "InstallSucceeded").await;
        wait_for(
            &namespaces,
            &namespace,
            "the deleted group's label gone",
            |ns| {
                ns.is_some_and(|ns| {
                    ns.labels().contains_key(&first_label) && !ns.labels().contains_key(&twin_label)
                })
            },
        )
        .await;
    })
    .await;
    operator.stop().await;
    delete_crd(&client, &crd).await;
}
