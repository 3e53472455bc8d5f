//! The rotation soak: continuous LIST traffic through the aggregator while
//! the CA rotates at least five times (lifetimes shortened to seconds) and
//! one replica restarts, with zero failed requests; the restarted replica
//! reuses the Secret instead of making new certificates.

use std::{
    collections::HashSet,
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Secret;
use kube::{Api, api::ListParams};
use olm_api::package_manifest::PackageManifest;

use crate::{
    eventually,
    harness::{SECRET, SERVER_NAMESPACE, apply, endpoints, harness},
};

/// CA rotations the soak waits for.
const ROTATIONS: usize = 5;

/// Longest the soak may take.
const SOAK_DEADLINE: Duration = Duration::from_secs(150);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_never_fail_across_ca_rotations_and_a_restart() {
    let h = harness();
    let client = olm_testkit::control_plane().client().await;
    let manifests: Api<PackageManifest> = Api::all(client.clone());
    let secrets: Api<Secret> = Api::namespaced(client.clone(), SERVER_NAMESPACE);
    let started = Instant::now();

    // The restart runs beside the traffic, once two rotations are through:
    // the replica is taken out of the endpoints first, as a kubelet's
    // failing readiness probe would, then stopped, started and put back.
    let restart = async {
        let replica = &h.replicas[1];
        let both_ready = [(h.replicas[0].address, true), (replica.address, true)];
        let draining = [(h.replicas[0].address, true), (replica.address, false)];
        tokio::task::block_in_place(|| apply(&[endpoints(&draining)]));
        tokio::time::sleep(Duration::from_secs(2)).await;
        tokio::task::block_in_place(|| replica.stop());
        tokio::task::block_in_place(|| replica.start());
        eventually(
            "the restarted replica is ready",
            Duration::from_secs(30),
            || async {
                if replica.ready().await {
                    Ok(())
                } else {
                    Err("not ready".to_owned())
                }
            },
        )
        .await;
        tokio::task::block_in_place(|| apply(&[endpoints(&both_ready)]));
        let metrics = replica.metrics().await;
        assert!(
            !metrics.contains("action=\"bootstrap\""),
            "the restarted replica made new certificates instead of reusing the Secret:\n{metrics}"
        );
    };
    let mut restart = Some(Box::pin(restart));
    let mut restarted = false;

    let mut ca_keys: HashSet<Vec<u8>> = HashSet::new();
    let mut failures: Vec<String> = Vec::new();
    let mut lists = 0usize;
    let mut last_secret_look = Instant::now() - Duration::from_secs(1);
    while ca_keys.len() <= ROTATIONS || !restarted {
        assert!(
            started.elapsed() < SOAK_DEADLINE,
            "soak did not finish within {SOAK_DEADLINE:?}: {} CAs seen, restarted {restarted}, failures {failures:?}",
            ca_keys.len()
        );
        if last_secret_look.elapsed() >= Duration::from_millis(250) {
            last_secret_look = Instant::now();
            if let Some(key) = secrets
                .get_opt(SECRET)
                .await
                .unwrap()
                .and_then(|s| s.data)
                .and_then(|d| d.get("olmCASigningKey").map(|k| k.0.clone()))
            {
                ca_keys.insert(key);
            }
        }
        let n = lists;
        let list = async {
            match manifests.list(&ListParams::default()).await {
                Ok(list) if list.items.len() >= 4 => None,
                Ok(list) => Some(format!("list {n} returned {} items", list.items.len())),
                Err(error) => Some(format!("list {n} at {:?}: {error}", started.elapsed())),
            }
        };
        match (&mut restart, ca_keys.len() >= 3) {
            (Some(pending), true) => {
                // Keep listing while the restart proceeds.
                let mut pending = pending.as_mut();
                loop {
                    tokio::select! {
                        () = &mut pending => break,
                        () = tokio::time::sleep(Duration::from_millis(40)) => {
                            if let Some(failure) = manifests.list(&ListParams::default()).await.err() {
                                failures.push(format!("list during restart at {:?}: {failure}", started.elapsed()));
                            }
                            lists += 1;
                        }
                    }
                }
                restart = None;
                restarted = true;
            }
            _ => {
                if let Some(failure) = list.await {
                    failures.push(failure);
                }
                lists += 1;
                tokio::time::sleep(Duration::from_millis(40)).await;
            }
        }
    }
    eprintln!(
        "soak: {lists} LISTs through the aggregator over {:.1} s across {} CA rotations and a restart, {} failures",
        started.elapsed().as_secs_f64(),
        ca_keys.len() - 1,
        failures.len()
    );
    assert!(failures.is_empty(), "failed requests: {failures:#?}");
    // Each replica exports the expiry it serves; the rotations are counted
    // by whichever replica won the write.
    let mut all = String::new();
    for replica in &h.replicas {
        let metrics = replica.metrics().await;
        assert!(
            metrics.contains("packageserver_serving_cert_expiry_timestamp_seconds"),
            "{metrics}"
        );
        all.push_str(&metrics);
    }
    assert!(all.contains("action=\"rotate-ca\""), "{all}");
}
