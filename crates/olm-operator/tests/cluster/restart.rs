//! The real binary killed with SIGKILL in the middle of an install, then
//! started again: the install converges, and nothing exists twice.

use std::{
    process::{Child, Command, Stdio},
    time::Duration,
};

use futures::StreamExt as _;
use k8s_openapi::api::{
    apps::v1::Deployment,
    rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding},
};
use kube::{
    Api,
    api::{ListParams, PostParams},
    runtime::{WatchStreamExt as _, watcher},
};
use olm_api::{
    csv::ClusterServiceVersion, operator_condition::OperatorCondition,
    operator_group::OperatorGroup,
};

use crate::{
    csv_lifecycle::{
        CSV_NAME, PHASE_DEADLINE, create_widget_crd, custom_csv, delete_crd, explained,
        group_targeting, phase_and_reason, wait_for, wait_for_csv_phase,
    },
    init_logs, olm_crds_installed,
};

/// The `olm-operator` binary running as a child process; killed (SIGKILL)
/// when dropped.
struct OperatorProcess(Child);

impl OperatorProcess {
    fn start(namespaces: &[&str]) -> Self {
        let plane = olm_testkit::control_plane();
        let child = Command::new(env!("CARGO_BIN_EXE_olm-operator"))
            .arg("--kubeconfig")
            .arg(plane.kubeconfig_path())
            .arg("--watchedNamespaces")
            .arg(namespaces.join(","))
            .args(["--admin-bind-address", "127.0.0.1:0"])
            .env("RUST_LOG", "olm_operator=info")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Self(child)
    }

    /// SIGKILL: no drain, no lease release, no last status write.
    fn kill(mut self) {
        self.0.kill().unwrap();
        self.0.wait().unwrap();
    }
}

impl Drop for OperatorProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn count<K>(api: &Api<K>, selector: &str) -> usize
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list(&ListParams::default().labels(selector))
        .await
        .unwrap()
        .items
        .len()
}

#[tokio::test]
async fn a_killed_operator_finishes_the_install_after_restart_without_duplicates() {
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let home = plane.namespace("crank-home").await;
    let east = plane.namespace("crank-east").await;
    let (home, east) = (home.name().to_owned(), east.name().to_owned());
    let client = plane.client().await;
    let crd = create_widget_crd(&client, &home).await;

    explained(&home, async {
        Api::<OperatorGroup>::namespaced(client.clone(), &home)
            .create(
                &PostParams::default(),
                &group_targeting(&home, "crank-group", &[&home, &east]),
            )
            .await
            .unwrap();
        let first = OperatorProcess::start(&[&home, &east]);
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &home);
        // Every status write shows in a watch; a poll can miss the short
        // Installing window (kwok makes the Deployment Available in about
        // 0.2 s) on a busy machine. The watch starts before the CSV exists.
        let mut phases = std::pin::pin!(
            watcher(
                csvs.clone(),
                watcher::Config::default().fields(&format!("metadata.name={CSV_NAME}")),
            )
            .applied_objects()
        );
        csvs.create(
            &PostParams::default(),
            &custom_csv(&home, &home, CSV_NAME, &["OwnNamespace", "MultiNamespace"]),
        )
        .await
        .unwrap();

        // Kill it as soon as the install is under way.
        let killed_in = tokio::time::timeout(PHASE_DEADLINE, async {
            while let Some(csv) = phases.next().await {
                let phase = phase_and_reason(&csv.expect("watch")).0;
                assert_ne!(phase, "Succeeded", "the install finished before it was under way");
                if ["Pending", "InstallReady", "Installing"].contains(&phase.as_str()) {
                    return phase;
                }
            }
            panic!("the csv watch ended");
        })
        .await
        .expect("install under way within the phase deadline");
        first.kill();
        tracing::info!(killed_in, "olm-operator killed");

        let _second = OperatorProcess::start(&[&home, &east]);
        let csv = wait_for_csv_phase(&csvs, CSV_NAME, "Succeeded", "InstallSucceeded").await;
        let east_csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &east);
        wait_for(&east_csvs, CSV_NAME, "copy in east", |c| c.is_some()).await;
        let conditions: Api<OperatorCondition> = Api::namespaced(client.clone(), &home);
        wait_for(&conditions, CSV_NAME, "operatorcondition", |c| c.is_some()).await;
        // Let the restarted operator settle before counting.
        tokio::time::sleep(Duration::from_secs(3)).await;

        // Every phase transition was recorded once.
        let history: Vec<(String, String)> = csv
            .status
            .clone()
            .unwrap_or_default()
            .conditions
            .unwrap_or_default()
            .into_iter()
            .map(|c| {
                (
                    c.phase.map(String::from).unwrap_or_default(),
                    c.reason.map(String::from).unwrap_or_default(),
                )
            })
            .collect();
        assert!(
            history.windows(2).all(|pair| pair[0] != pair[1]),
            "repeated transition in {history:?}"
        );

        let owner = format!(
            "olm.owner={CSV_NAME},olm.owner.namespace={home},olm.owner.kind=ClusterServiceVersion"
        );
        let counts = (
            count(&Api::<Deployment>::namespaced(client.clone(), &home), &owner).await,
            count(&Api::<Role>::namespaced(client.clone(), &home), &owner).await,
            count(&Api::<RoleBinding>::namespaced(client.clone(), &home), &owner).await,
            count(&Api::<ClusterRole>::all(client.clone()), &owner).await,
            count(&Api::<ClusterRoleBinding>::all(client.clone()), &owner).await,
            count(
                &Api::<ClusterServiceVersion>::all(client.clone()),
                &format!("olm.copiedFrom={home}"),
            )
            .await,
            count(
                &Api::<Role>::namespaced(client.clone(), &east),
                &format!("olm.copiedFrom={home}"),
            )
            .await,
        );
        assert_eq!(
            counts,
            (1, 1, 1, 1, 1, 1, 1),
            "(deployments, roles, role bindings, cluster roles, cluster role bindings, copies, copied roles)"
        );

        // Uninstall while the operator still runs, so the namespaces can go.
        csvs.delete(CSV_NAME, &Default::default()).await.unwrap();
        wait_for(&csvs, CSV_NAME, "csv deleted", |c| c.is_none()).await;
    })
    .await;

    delete_crd(&client, &crd).await;
}
