//! OperatorGroup changes a member CSV must follow: a target set its install
//! modes do not support (and back), and two intersecting groups providing
//! the same API.

use kube::{Api, ResourceExt, api::PostParams};
use olm_api::{csv::ClusterServiceVersion, operator_group::OperatorGroup};

use crate::{
    RunningOperator,
    csv_lifecycle::{
        CSV_NAME, create_widget_crd, custom_csv, delete_crd, explained, group_targeting, history,
        in_order, phase_and_reason, retarget, wait_for, wait_for_csv_phase,
    },
    init_logs, olm_crds_installed,
};

#[tokio::test]
async fn unsupported_targets_fail_the_csv_until_the_group_is_changed_back() {
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let home = plane.namespace("cog-home").await;
    let other = plane.namespace("cog-other").await;
    let (home, other) = (home.name().to_owned(), other.name().to_owned());
    let client = plane.client().await;
    let operator = RunningOperator::start_watching(&[&home, &other]).await;
    let crd = create_widget_crd(&client, &home).await;

    explained(&home, async {
        Api::<OperatorGroup>::namespaced(client.clone(), &home)
            .create(
                &PostParams::default(),
                &group_targeting(&home, "cog-group", &[&home]),
            )
            .await
            .unwrap();
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &home);
        csvs.create(
            &PostParams::default(),
            &custom_csv(&home, &home, CSV_NAME, &["OwnNamespace"]),
        )
        .await
        .unwrap();
        wait_for_csv_phase(&csvs, CSV_NAME, "Succeeded", "InstallSucceeded").await;

        retarget(&client, &home, "cog-group", &[&home, &other]).await;
        let failed =
            wait_for_csv_phase(&csvs, CSV_NAME, "Failed", "UnsupportedOperatorGroup").await;
        assert_eq!(
            phase_and_reason(&failed).2,
            "MultiNamespace InstallModeType not supported, cannot configure to watch 2 namespaces"
        );
        // An unsupported group gets no copies.
        let other_csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &other);
        assert!(other_csvs.get_opt(CSV_NAME).await.unwrap().is_none());

        retarget(&client, &home, "cog-group", &[&home]).await;
        let csv = wait_for_csv_phase(&csvs, CSV_NAME, "Succeeded", "InstallSucceeded").await;
        let phases = history(&csv);
        assert!(
            in_order(&phases, &["Succeeded", "Failed", "Pending", "Succeeded"]),
            "phase history {phases:?}"
        );
        assert_eq!(csv.annotations().get("olm.targetNamespaces"), Some(&home));
    })
    .await;

    operator.stop().await;
    delete_crd(&client, &crd).await;
}

#[tokio::test]
async fn intersecting_groups_cannot_provide_the_same_api() {
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let first = plane.namespace("axle-first").await;
    let second = plane.namespace("axle-second").await;
    let shared = plane.namespace("axle-shared").await;
    let (first, second, shared) = (
        first.name().to_owned(),
        second.name().to_owned(),
        shared.name().to_owned(),
    );
    let client = plane.client().await;
    let operator = RunningOperator::start_watching(&[&first, &second, &shared]).await;
    let crd = create_widget_crd(&client, &first).await;
    let modes = ["OwnNamespace", "MultiNamespace"];

    explained(&second, async {
        Api::<OperatorGroup>::namespaced(client.clone(), &first)
            .create(
                &PostParams::default(),
                &group_targeting(&first, "axle-group", &[&first, &shared]),
            )
            .await
            .unwrap();
        let first_csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &first);
        first_csvs
            .create(
                &PostParams::default(),
                &custom_csv(&first, &first, CSV_NAME, &modes),
            )
            .await
            .unwrap();
        wait_for_csv_phase(&first_csvs, CSV_NAME, "Succeeded", "InstallSucceeded").await;
        let groups: Api<OperatorGroup> = Api::namespaced(client.clone(), &first);
        let group = groups.get("axle-group").await.unwrap();
        assert_eq!(
            group.annotations().get("olm.providedAPIs"),
            Some(&format!("Widget.v1.{first}.example.test"))
        );

        // A second group, also targeting the shared namespace, with an
        // operator providing the same API.
        Api::<OperatorGroup>::namespaced(client.clone(), &second)
            .create(
                &PostParams::default(),
                &group_targeting(&second, "axle-group", &[&second, &shared]),
            )
            .await
            .unwrap();
        let second_csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &second);
        second_csvs
            .create(
                &PostParams::default(),
                &custom_csv(&second, &first, CSV_NAME, &modes),
            )
            .await
            .unwrap();
        let failed = wait_for_csv_phase(
            &second_csvs,
            CSV_NAME,
            "Failed",
            "InterOperatorGroupOwnerConflict",
        )
        .await;
        assert_eq!(
            phase_and_reason(&failed).2,
            "intersecting operatorgroups provide the same apis"
        );
        let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
            Api::namespaced(client.clone(), &second);
        assert!(
            deployments
                .list(&Default::default())
                .await
                .unwrap()
                .items
                .is_empty(),
            "a conflicting csv runs nothing"
        );
        // The first operator is untouched, and its copy in the shared
        // namespace stays its own.
        wait_for_csv_phase(&first_csvs, CSV_NAME, "Succeeded", "InstallSucceeded").await;
        let shared_csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &shared);
        wait_for(&shared_csvs, CSV_NAME, "first operator's copy", |c| {
            c.is_some_and(|c| c.labels().get("olm.copiedFrom") == Some(&first))
        })
        .await;

        // No longer intersecting, the second operator installs.
        retarget(&client, &second, "axle-group", &[&second]).await;
        wait_for_csv_phase(&second_csvs, CSV_NAME, "Succeeded", "InstallSucceeded").await;
    })
    .await;

    operator.stop().await;
    delete_crd(&client, &crd).await;
}
