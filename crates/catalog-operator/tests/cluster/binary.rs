//! The real `catalog-operator` binary: it installs from a Subscription, and
//! killed with SIGKILL mid-way then started again, it converges without
//! writing a second InstallPlan.

use std::{
    process::{Child, Command, Stdio},
    time::Duration,
};

use kube::Api;
use olm_api::{csv::ClusterServiceVersion, install_plan::InstallPlan, subscription::Subscription};
use serde_json::json;

use crate::{
    eventually, init_logs, managing_group, olm_crds_installed, plans_complete,
    subscriptions::{serve_widgets, subscribe, widgets_catalog},
};

/// The binary as a child process; killed (SIGKILL) when dropped.
struct Process(Child);

impl Process {
    fn start(namespace: &str) -> Self {
        let plane = olm_testkit::control_plane();
        let child = Command::new(env!("CARGO_BIN_EXE_catalog-operator"))
            .arg("--kubeconfig")
            .arg(plane.kubeconfig_path())
            .args(["--watchedNamespaces", namespace])
            .args(["--admin-bind-address", "127.0.0.1:0"])
            .env("RUST_LOG", "catalog_operator=info")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Self(child)
    }

    fn kill(mut self) {
        self.0.kill().unwrap();
        self.0.wait().unwrap();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn the_binary_installs_and_survives_sigkill_without_duplicates() {
    init_logs();
    olm_crds_installed().await;
    let plane = olm_testkit::control_plane();
    let ns = plane.namespace("binary").await;
    let client = plane.client().await;
    let (server, _dir, group) = serve_widgets(ns.name()).await;
    widgets_catalog(&client, ns.name(), &server.addr().to_string()).await;
    managing_group(&client, ns.name(), "og", json!({})).await;
    let subs: Api<Subscription> = Api::namespaced(client.clone(), ns.name());
    subscribe(&client, ns.name(), "widgets").await;

    // Killed as soon as the InstallPlan exists, before it can finish.
    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), ns.name());
    let first = Process::start(ns.name());
    eventually("an InstallPlan", Duration::from_secs(60), || async {
        let list = plans
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?;
        if list.items.is_empty() {
            Err("none yet".to_owned())
        } else {
            Ok(())
        }
    })
    .await;
    first.kill();

    let second = Process::start(ns.name());
    eventually(
        "Subscription AtLatestKnown",
        Duration::from_secs(60),
        || async {
            let sub = subs.get("widgets").await.map_err(|e| e.to_string())?;
            let status = serde_json::to_value(sub.status.unwrap_or_default()).unwrap();
            if status["state"] == "AtLatestKnown" {
                Ok(())
            } else {
                Err(status.to_string())
            }
        },
    )
    .await;
    let list = plans_complete(&plans).await;
    assert_eq!(list.len(), 1, "one InstallPlan, not one per start");
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), ns.name());
    assert_eq!(csvs.list(&Default::default()).await.unwrap().items.len(), 1);
    drop(second);
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    let _ = crds
        .delete(&format!("widgets.{group}"), &Default::default())
        .await;
}
