//! The real `bundle-unpacker` binary, as `cargo xtask run bundle-unpacker`
//! starts it: it serves a pending lookup, and killed with SIGKILL and
//! started again it leaves the stored content alone.

use std::{
    process::{Child, Command, Stdio},
    time::Duration,
};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, ResourceExt};
use olm_catalog::unpacked;
use olm_testkit::{nats::NatsServer, registry::Registry};

use crate::{
    eventually,
    fixtures::{Stored, create_catalog, create_plan, push_bundle, wait_stored},
    init_logs, olm_crds_installed,
};

/// The binary as a child process; killed (SIGKILL) when dropped.
struct Process(Child);

impl Process {
    fn start(namespace: &str, registry: &str, nats: &str) -> Self {
        let plane = olm_testkit::control_plane();
        let child = Command::new(env!("CARGO_BIN_EXE_bundle-unpacker"))
            .arg("--kubeconfig")
            .arg(plane.kubeconfig_path())
            .args(["--watchedNamespaces", namespace])
            .args(["--insecure-registry", registry])
            .args(["--admin-bind-address", "127.0.0.1:0"])
            .args(["--nats-url", nats])
            .args(["--watch-grace", "1s"])
            .env("RUST_LOG", "bundle_unpacker=info")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Self(child)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_unpacks_and_a_restart_leaves_the_content_alone() {
    init_logs();
    let Some(testdata) = olm_testkit::testdata() else {
        return;
    };
    olm_crds_installed().await;
    let registry = Registry::start().unwrap();
    let nats = NatsServer::start().unwrap();
    let plane = olm_testkit::control_plane();
    let ns = plane.namespace("unpack-binary").await;
    let client = plane.client().await;
    let image = format!("{}/olm/etcd-bundle:v0.9.4", registry.host());
    push_bundle(&testdata.join("bundles/etcd/0.9.4"), &image, None).await;
    create_catalog(&client, ns.name(), "fixture-catalog", &[]).await;

    let first = Process::start(ns.name(), &registry.host(), &nats.url());
    create_plan(
        &client,
        ns.name(),
        "install-binary",
        "fixture-catalog",
        &[&image],
    )
    .await;
    let Stored::Content(bundle, cm) = wait_stored(&client, ns.name(), &image).await else {
        panic!("expected content");
    };
    assert_eq!(bundle.csv_name, "etcdoperator.v0.9.4");
    drop(first);

    let _second = Process::start(ns.name(), &registry.host(), &nats.url());
    // Give the restarted binary time to see the plan (its grace is 1 s).
    tokio::time::sleep(Duration::from_secs(5)).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    let name = unpacked::config_map_name(&image);
    let again = eventually("the content", Duration::from_secs(10), || {
        let cms = cms.clone();
        let name = name.clone();
        async move {
            cms.get_opt(&name)
                .await
                .map_err(|e| e.to_string())?
                .ok_or_else(|| "absent".to_owned())
        }
    })
    .await;
    assert_eq!(again.uid(), cm.uid(), "stored once, never replaced");
    assert_eq!(again.resource_version(), cm.resource_version());
}
