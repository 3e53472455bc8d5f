//! Upgrades: the OperatorCondition every CSV gets, a replacement along
//! `replaces` (new CSV installs, old one Replacing, Deleting, gone), and an
//! `Upgradeable=False` condition holding the replacement until an override
//! releases it.

use std::time::Duration;

use k8s_openapi::api::{
    apps::v1::Deployment,
    rbac::v1::{Role, RoleBinding},
};
use kube::{
    Api, Client, ResourceExt,
    api::{Patch, PatchParams, PostParams},
};
use olm_api::{
    csv::ClusterServiceVersion, operator_condition::OperatorCondition,
    operator_group::OperatorGroup,
};
use serde_json::json;

use crate::{
    RunningOperator,
    csv_lifecycle::{
        CSV_NAME, DEPLOYMENT_NAME, PHASE_DEADLINE, SERVICE_ACCOUNT, create_widget_crd, delete_crd,
        explained, metrics_until, own_namespace_group, phase_and_reason, wait_for,
        wait_for_csv_phase, widget_csv,
    },
    eventually, init_logs, olm_crds_installed,
};

const NEXT_NAME: &str = "widget-operator.v0.2.0";

/// Version 0.2.0 of the widget operator, replacing 0.1.0.
fn next_csv(namespace: &str) -> ClusterServiceVersion {
    let mut csv = serde_json::to_value(widget_csv(namespace)).unwrap();
    csv["metadata"]["name"] = json!(NEXT_NAME);
    csv["spec"]["version"] = json!("0.2.0");
    csv["spec"]["replaces"] = json!(CSV_NAME);
    csv["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"]["containers"][0]
        ["image"] = json!("registry.example.test/widget-operator:v0.2.0");
    serde_json::from_value(csv).unwrap()
}

async fn patch_condition(client: &Client, namespace: &str, spec: serde_json::Value) {
    Api::<OperatorCondition>::namespaced(client.clone(), namespace)
        .patch(
            CSV_NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": spec })),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn upgradeable_false_holds_the_replacement_until_overridden() {
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let test_namespace = plane.namespace("widget-upgrade").await;
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
        let installed = wait_for_csv_phase(&csvs, CSV_NAME, "Succeeded", "InstallSucceeded").await;

        // The CSV's OperatorCondition, and the RBAC to update it.
        let conditions: Api<OperatorCondition> = Api::namespaced(client.clone(), &namespace);
        let condition = wait_for(&conditions, CSV_NAME, "operatorcondition", |c| c.is_some())
            .await
            .unwrap();
        assert_eq!(
            condition.spec.service_accounts,
            [SERVICE_ACCOUNT, SERVICE_ACCOUNT]
        );
        assert_eq!(condition.spec.deployments, [DEPLOYMENT_NAME]);
        let owner = &condition.owner_references()[0];
        assert_eq!(
            (owner.name.as_str(), owner.controller, owner.uid.as_str()),
            (CSV_NAME, Some(true), installed.uid().unwrap().as_str())
        );
        let roles: Api<Role> = Api::namespaced(client.clone(), &namespace);
        let role = wait_for(&roles, CSV_NAME, "operatorcondition role", |r| r.is_some())
            .await
            .unwrap();
        let rule = &role.rules.unwrap()[0];
        assert_eq!(rule.verbs, ["get", "update", "patch"]);
        assert_eq!(
            rule.resource_names.as_deref(),
            Some([CSV_NAME.to_owned()].as_slice())
        );
        let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), &namespace);
        let binding = wait_for(&bindings, CSV_NAME, "operatorcondition binding", |b| {
            b.is_some()
        })
        .await
        .unwrap();
        assert_eq!(binding.subjects.unwrap()[0].name, SERVICE_ACCOUNT);

        // The operator says it must not be upgraded now; OLM mirrors that.
        patch_condition(
            &client,
            &namespace,
            json!({ "conditions": [{
                "type": "Upgradeable", "status": "False", "reason": "Migrating",
                "message": "migration in progress", "lastTransitionTime": "2026-01-01T00:00:00Z"
            }]}),
        )
        .await;
        wait_for(&conditions, CSV_NAME, "status mirrors spec", |c| {
            c.is_some_and(|c| {
                let generation = c.metadata.generation;
                c.status.as_ref().is_some_and(|s| {
                    s.conditions.iter().any(|entry| {
                        entry.type_ == "Upgradeable"
                            && entry.status == "False"
                            && entry.observed_generation == generation
                    })
                })
            })
        })
        .await;

        csvs.create(&PostParams::default(), &next_csv(&namespace))
            .await
            .unwrap();
        let held = wait_for_csv_phase(
            &csvs,
            NEXT_NAME,
            "Pending",
            "OperatorConditionNotUpgradeable",
        )
        .await;
        assert_eq!(
            phase_and_reason(&held).2,
            "operator is not upgradeable: the operator is not upgradeable: migration in progress"
        );
        // Held means held: the old CSV knows it is being replaced (as
        // upstream, it goes Replacing at once) but keeps its Deployment, and
        // the new one stays Pending.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let old = csvs.get(CSV_NAME).await.unwrap();
        assert_eq!(
            phase_and_reason(&old),
            (
                "Replacing".to_owned(),
                "BeingReplaced".to_owned(),
                format!("being replaced by csv: {NEXT_NAME}")
            )
        );
        let deployment = Api::<Deployment>::namespaced(client.clone(), &namespace)
            .get(DEPLOYMENT_NAME)
            .await
            .unwrap();
        assert_eq!(
            deployment.labels().get("olm.owner").map(String::as_str),
            Some(CSV_NAME)
        );
        assert_eq!(
            phase_and_reason(&csvs.get(NEXT_NAME).await.unwrap()).1,
            "OperatorConditionNotUpgradeable"
        );

        // An administrator's override releases it.
        patch_condition(
            &client,
            &namespace,
            json!({ "overrides": [{
                "type": "Upgradeable", "status": "True", "reason": "Approved",
                "message": "upgrade approved"
            }]}),
        )
        .await;

        // The old CSV goes Replacing, then Deleting, then away.
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        eventually("old csv replaced and gone", PHASE_DEADLINE, || {
            let csvs = csvs.clone();
            let seen = seen.clone();
            async move {
                match csvs.get_opt(CSV_NAME).await.map_err(|e| e.to_string())? {
                    Some(old) => {
                        let phase = phase_and_reason(&old).0;
                        let mut seen = seen.lock().unwrap();
                        if seen.last() != Some(&phase) {
                            seen.push(phase);
                        }
                        Err(format!("old csv still {seen:?}"))
                    }
                    None => Ok(()),
                }
            }
        })
        .await;
        let seen = seen.lock().unwrap().clone();
        assert!(
            seen.contains(&"Replacing".to_owned()),
            "old csv phases seen: {seen:?}"
        );
        let next = wait_for_csv_phase(&csvs, NEXT_NAME, "Succeeded", "InstallSucceeded").await;
        let deployment = Api::<Deployment>::namespaced(client.clone(), &namespace)
            .get(DEPLOYMENT_NAME)
            .await
            .unwrap();
        assert_eq!(
            deployment.labels().get("olm.owner").map(String::as_str),
            Some(NEXT_NAME)
        );
        assert_eq!(
            deployment
                .owner_references()
                .iter()
                .map(|o| o.uid.clone())
                .collect::<Vec<_>>(),
            [next.uid().unwrap()]
        );
        // Upstream's exact name (no `_total`), and its per-object
        // reconcile counters.
        metrics_until(&operator, |text| {
            text.lines().any(|l| l == "csv_upgrade_count 1")
                && text.lines().any(|l| {
                    l.starts_with("controller_reconcile_adoption_csv{")
                        && l.contains(&format!("namespace=\"{namespace}\""))
                })
                && text
                    .lines()
                    .any(|l| l.starts_with("controller_reconcile_operator_condition_generator{"))
        })
        .await;
    })
    .await;

    operator.stop().await;
    delete_crd(&client, &crd).await;
}
