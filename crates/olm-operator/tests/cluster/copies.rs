//! Copied CSVs and the RBAC that follows a group's targets: copies appear
//! and vanish with target namespaces, are written once, and go when copying
//! is disabled for an operator watching all namespaces.

use std::time::Duration;

use k8s_openapi::api::rbac::v1::{ClusterRole, Role};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use olm_api::{csv::ClusterServiceVersion, olm_config::OLMConfig, operator_group::OperatorGroup};
use serde_json::json;

use crate::{
    RunningOperator,
    csv_lifecycle::{
        PHASE_DEADLINE, create_widget_crd, custom_csv, delete_crd, explained, group_targeting,
        retarget, wait_for, wait_for_csv_phase,
    },
    eventually, init_logs, olm_crds_installed,
};

const COPIED_NAME: &str = "gearbox-operator.v0.2.0";

fn is_copy_of(copy: Option<&ClusterServiceVersion>, parent_namespace: &str) -> bool {
    copy.is_some_and(|copy| {
        let status = copy.status.clone().unwrap_or_default();
        copy.labels().get("olm.copiedFrom").map(String::as_str) == Some(parent_namespace)
            && status.reason.map(String::from).as_deref() == Some("Copied")
            && status.phase.map(String::from).as_deref() == Some("Succeeded")
            && status.message.as_deref()
                == Some(
                    format!(
                        "The operator is running in {parent_namespace} but is managing this namespace"
                    )
                    .as_str(),
                )
    })
}

#[tokio::test]
async fn copies_follow_the_groups_target_namespaces() {
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let home = plane.namespace("gearbox-home").await;
    let east = plane.namespace("gearbox-east").await;
    let west = plane.namespace("gearbox-west").await;
    let (home, east, west) = (
        home.name().to_owned(),
        east.name().to_owned(),
        west.name().to_owned(),
    );
    let client = plane.client().await;
    let operator = RunningOperator::start_watching(&[&home, &east, &west]).await;
    let crd = create_widget_crd(&client, &home).await;

    explained(&home, async {
        Api::<OperatorGroup>::namespaced(client.clone(), &home)
            .create(
                &PostParams::default(),
                &group_targeting(&home, "gearbox-group", &[&home, &east]),
            )
            .await
            .unwrap();
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &home);
        csvs.create(
            &PostParams::default(),
            &custom_csv(
                &home,
                &home,
                COPIED_NAME,
                &["OwnNamespace", "MultiNamespace"],
            ),
        )
        .await
        .unwrap();
        wait_for_csv_phase(&csvs, COPIED_NAME, "Succeeded", "InstallSucceeded").await;

        let east_csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &east);
        let west_csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &west);
        let copy = wait_for(&east_csvs, COPIED_NAME, "copy in east", |c| {
            is_copy_of(c, &home)
        })
        .await
        .unwrap();
        let annotations = copy.annotations();
        assert!(
            !annotations.contains_key("olm.targetNamespaces"),
            "{annotations:?}"
        );
        assert_eq!(annotations.get("olm.operatorNamespace"), Some(&home));
        assert!(
            annotations.contains_key("olm.copyhash/spec"),
            "{annotations:?}"
        );
        assert!(west_csvs.get_opt(COPIED_NAME).await.unwrap().is_none());
        // The copy carries the parent's spec as written (the apply body is
        // serialized from the prototype, not from a clone per namespace).
        let parent = csvs.get(COPIED_NAME).await.unwrap();
        assert_eq!(copy.spec, parent.spec);

        // The operator's Role follows it into the target namespace, owned by
        // the copy there.
        let copied_roles = eventually("role copied into east", PHASE_DEADLINE, || {
            let client = client.clone();
            let east = east.clone();
            async move {
                let roles = Api::<Role>::namespaced(client, &east)
                    .list(&ListParams::default().labels("olm.copiedFrom"))
                    .await
                    .map_err(|e| e.to_string())?;
                if roles.items.is_empty() {
                    Err("no copied role".to_owned())
                } else {
                    Ok(roles.items)
                }
            }
        })
        .await;
        let owner = &copied_roles[0].owner_references()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("ClusterServiceVersion", copy.uid().unwrap().as_str())
        );

        // The group's aggregated roles gather the per-API roles.
        let group_roles = Api::<ClusterRole>::all(client.clone())
            .list(&ListParams::default().labels(&format!(
                "olm.owner=gearbox-group,olm.owner.namespace={home},olm.owner.kind=OperatorGroup"
            )))
            .await
            .unwrap();
        let mut names: Vec<String> = group_roles.items.iter().map(|r| r.name_any()).collect();
        names.sort();
        assert_eq!(names.len(), 3, "{names:?}");
        assert!(
            names[0].starts_with("olm.og.gearbox-group.admin-"),
            "{names:?}"
        );
        let selectors = group_roles.items[0]
            .aggregation_rule
            .clone()
            .and_then(|r| r.cluster_role_selectors)
            .unwrap_or_default();
        assert_eq!(selectors.len(), 1, "one provided api");
        // The per-API roles are ensured by the pass after the one that
        // wrote Succeeded, as upstream does: wait for them.
        let cluster_roles = Api::<ClusterRole>::all(client.clone());
        let role = |suffix: &'static str| {
            let cluster_roles = cluster_roles.clone();
            let name = format!("{crd}-v1-{suffix}");
            async move {
                cluster_roles
                    .get_opt(&name)
                    .await
                    .map_err(|e| e.to_string())?
                    .ok_or_else(|| format!("no {name} yet"))
            }
        };
        let per_api = eventually("the per-API ClusterRoles", PHASE_DEADLINE, || async {
            role("crdview").await?;
            role("admin").await
        })
        .await;
        let label = selectors[0]
            .match_labels
            .clone()
            .unwrap()
            .into_keys()
            .next()
            .unwrap();
        assert_eq!(
            per_api.labels().get(&label).map(String::as_str),
            Some("true")
        );
        assert_eq!(
            per_api
                .labels()
                .get("rbac.authorization.k8s.io/aggregate-to-admin")
                .map(String::as_str),
            Some("true")
        );

        // A new target gets a copy; a copy is not written again while its
        // parent does not change.
        retarget(&client, &home, "gearbox-group", &[&home, &east, &west]).await;
        let copy = wait_for(&west_csvs, COPIED_NAME, "copy in west", |c| {
            is_copy_of(c, &home)
        })
        .await
        .unwrap();
        let version = copy.resource_version();
        tokio::time::sleep(Duration::from_secs(5)).await;
        let again = west_csvs.get(COPIED_NAME).await.unwrap();
        assert_eq!(
            again.resource_version(),
            version,
            "copy rewritten without a change"
        );

        // A namespace leaving the group loses its copy.
        retarget(&client, &home, "gearbox-group", &[&home, &west]).await;
        wait_for(&east_csvs, COPIED_NAME, "copy gone from east", |c| {
            c.is_none()
        })
        .await;
        assert!(west_csvs.get_opt(COPIED_NAME).await.unwrap().is_some());

        // The parent going takes its copies along.
        csvs.delete(COPIED_NAME, &DeleteParams::default())
            .await
            .unwrap();
        wait_for(&west_csvs, COPIED_NAME, "copy gone from west", |c| {
            c.is_none()
        })
        .await;
    })
    .await;

    operator.stop().await;
    delete_crd(&client, &crd).await;
}

const GLOBAL_NAME: &str = "turbine-operator.v1.0.0";

/// Sets `disableCopiedCSVs` on the `cluster` OLMConfig, creating it if needed.
async fn set_copies_disabled(client: &kube::Client, disabled: bool) {
    let api: Api<OLMConfig> = Api::all(client.clone());
    let config = json!({
        "apiVersion": "operators.coreos.com/v1",
        "kind": "OLMConfig",
        "metadata": { "name": "cluster" },
        "spec": { "features": { "disableCopiedCSVs": disabled } }
    });
    api.patch(
        "cluster",
        &PatchParams::apply("copies-test").force(),
        &Patch::Apply(&config),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn disabling_copied_csvs_removes_the_copies_of_global_operators() {
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let home = plane.namespace("turbine-home").await;
    let tenant = plane.namespace("turbine-tenant").await;
    let (home, tenant) = (home.name().to_owned(), tenant.name().to_owned());
    let client = plane.client().await;
    let operator = RunningOperator::start_watching(&[&home, &tenant]).await;
    let crd = create_widget_crd(&client, &home).await;
    set_copies_disabled(&client, false).await;

    explained(&home, async {
        Api::<OperatorGroup>::namespaced(client.clone(), &home)
            .create(
                &PostParams::default(),
                &group_targeting(&home, "turbine-group", &[]),
            )
            .await
            .unwrap();
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &home);
        csvs.create(
            &PostParams::default(),
            &custom_csv(&home, &home, GLOBAL_NAME, &["AllNamespaces"]),
        )
        .await
        .unwrap();
        let parent = wait_for_csv_phase(&csvs, GLOBAL_NAME, "Succeeded", "InstallSucceeded").await;
        assert_eq!(
            parent
                .annotations()
                .get("olm.targetNamespaces")
                .map(String::as_str),
            Some("")
        );
        let tenant_csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &tenant);
        wait_for(&tenant_csvs, GLOBAL_NAME, "copy in tenant", |c| {
            is_copy_of(c, &home)
        })
        .await;

        // Operators watching all namespaces get their Roles lifted to the
        // cluster, with read access to namespaces.
        let role = Api::<Role>::namespaced(client.clone(), &home)
            .list(&ListParams::default().labels(&format!("olm.owner={GLOBAL_NAME}")))
            .await
            .unwrap()
            .items
            .remove(0);
        let lifted = Api::<ClusterRole>::all(client.clone());
        let lifted = wait_for(&lifted, &role.name_any(), "lifted cluster role", |r| {
            r.is_some()
        })
        .await
        .unwrap();
        assert!(
            lifted.rules.unwrap_or_default().iter().any(|rule| rule
                .resources
                .as_deref()
                .unwrap_or_default()
                .contains(&"namespaces".to_owned())),
            "namespaces rule"
        );

        set_copies_disabled(&client, true).await;
        wait_for(&tenant_csvs, GLOBAL_NAME, "copy gone from tenant", |c| {
            c.is_none()
        })
        .await;
        let copies_left = || {
            let client = client.clone();
            let home = home.clone();
            async move {
                let left = Api::<ClusterServiceVersion>::all(client)
                    .list(&ListParams::default().labels(&format!("olm.copiedFrom={home}")))
                    .await
                    .map_err(|e| e.to_string())?
                    .items
                    .len();
                if left == 0 {
                    Ok(())
                } else {
                    Err(format!("{left} copies left"))
                }
            }
        };
        eventually("no copies anywhere", PHASE_DEADLINE, copies_left).await;
        let configs: Api<OLMConfig> = Api::all(client.clone());
        wait_for(
            &configs,
            "cluster",
            "DisabledCopiedCSVs condition",
            |config| {
                config.and_then(|c| c.status.clone()).is_some_and(|status| {
                    status.conditions.iter().any(|c| {
                        c.type_ == "DisabledCopiedCSVs"
                            && c.status == "True"
                            && c.reason == "CopiedCSVsDisabled"
                    })
                })
            },
        )
        .await;
        eventually("DisabledCopiedCSVs event", PHASE_DEADLINE, || {
            let home = home.clone();
            async move {
                let output = olm_testkit::control_plane()
                    .kubectl()
                    .args(["get", "events", "-n", &home, "-o", "json"])
                    .output()
                    .map_err(|e| e.to_string())?;
                let text = String::from_utf8_lossy(&output.stdout).to_string();
                let wanted = format!("CSV copying disabled for {home}/{GLOBAL_NAME}");
                if text.contains("DisabledCopiedCSVs") && text.contains(&wanted) {
                    Ok(())
                } else {
                    Err("no event yet".to_owned())
                }
            }
        })
        .await;

        // Enabled again, the copies come back.
        set_copies_disabled(&client, false).await;
        wait_for(&tenant_csvs, GLOBAL_NAME, "copy back in tenant", |c| {
            is_copy_of(c, &home)
        })
        .await;

        csvs.delete(GLOBAL_NAME, &DeleteParams::default())
            .await
            .unwrap();
        eventually("copies gone with the parent", PHASE_DEADLINE, copies_left).await;
    })
    .await;

    operator.stop().await;
    delete_crd(&client, &crd).await;
}
