//! The bus as a refresh trigger: a `CatalogUpdated` event on real NATS makes
//! both replicas fetch the catalog again at once, long before their timer
//! (`--interval 1m` in the harness) would, and without any change of the
//! CatalogSource that their watch could see.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use kube::{Api, api::ListParams};
use olm_api::package_manifest::PackageManifest;
use olm_bus::{
    Bus, BusArgs,
    events::{CatalogUpdated, ObjectRef},
};
use serde_json::json;

use crate::{
    eventually,
    harness::{apply, harness, serve_registry, switchable_relay, write_simple_catalog},
};

const NAMESPACE: &str = "ps-bus";
const CATALOG: &str = "bus-catalog";

/// The refresh interval the harness gives the replicas.
const TIMER: Duration = Duration::from_secs(60);

/// How many LISTs in a row must agree, so that both replicas (the aggregator
/// picks one per request) are seen.
const AGREEING_LISTS: usize = 6;

async fn package_names(api: &Api<PackageManifest>) -> Result<Vec<String>, String> {
    let list = api
        .list(&ListParams::default().labels(&format!("catalog={CATALOG}")))
        .await
        .map_err(|e| e.to_string())?;
    let mut names: Vec<String> = list
        .items
        .into_iter()
        .filter_map(|m| m.metadata.name)
        .collect();
    names.sort();
    Ok(names)
}

async fn every_replica_lists(api: &Api<PackageManifest>, want: &[&str]) -> Result<(), String> {
    for _ in 0..AGREEING_LISTS {
        let names = package_names(api).await?;
        if names != want {
            return Err(format!("listed {names:?}"));
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catalog_updated_event_refreshes_before_the_timer() {
    let h = harness();
    let dir = h.dir.join("bus");
    write_simple_catalog(&dir.join("before"), &["bus-alpha"]);
    write_simple_catalog(&dir.join("after"), &["bus-alpha", "bus-beta"]);
    let before = serve_registry(h.host_address, &dir.join("before")).await;
    let after = serve_registry(h.host_address, &dir.join("after")).await;
    // The catalog's address never changes: only what answers behind it does,
    // as when a catalog pod is replaced by one serving a new image.
    let target = Arc::new(Mutex::new(before));
    let address = switchable_relay(h.host_address, Arc::clone(&target)).await;
    let created = Instant::now();
    tokio::task::block_in_place(|| {
        apply(&[
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
            json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
                   "metadata": {"name": CATALOG, "namespace": NAMESPACE},
                   "spec": {"sourceType": "grpc", "address": address.to_string(), "displayName": "Bus Catalog"}}),
        ]);
    });
    let client = olm_testkit::control_plane().client().await;
    let api: Api<PackageManifest> = Api::namespaced(client, NAMESPACE);
    eventually(
        "both replicas serve the first content",
        Duration::from_secs(30),
        || every_replica_lists(&api, &["bus-alpha"]),
    )
    .await;
    // Readiness of the subscription: both replicas connected to NATS.
    eventually(
        "both replicas connected to NATS",
        Duration::from_secs(30),
        || async {
            match h
                .replicas
                .iter()
                .all(|r| r.log().contains("connected to NATS"))
            {
                true => Ok(()),
                false => Err("not yet".to_owned()),
            }
        },
    )
    .await;

    *target.lock().unwrap() = after;
    // Nothing else refreshes the catalog now: its CatalogSource is unchanged
    // and the timer is a minute away.
    for _ in 0..10 {
        let names = package_names(&api).await.unwrap();
        assert_eq!(names, ["bus-alpha"], "refreshed without an event");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let bus = Bus::connect(&BusArgs::with_url(h.nats.url()), "packageserver-test")
        .await
        .unwrap();
    bus.wait_connected(Duration::from_secs(10)).await.unwrap();
    let published = Instant::now();
    bus.publish(&CatalogUpdated {
        catalog: Some(ObjectRef::new(
            "operators.coreos.com/v1alpha1",
            "CatalogSource",
            NAMESPACE,
            CATALOG,
        )),
        reason: "ConnectionReady".to_owned(),
        ..CatalogUpdated::default()
    })
    .await
    .unwrap();
    bus.flush(Duration::from_secs(5)).await.unwrap();
    eventually(
        "both replicas serve the new content after the event",
        Duration::from_secs(15),
        || every_replica_lists(&api, &["bus-alpha", "bus-beta"]),
    )
    .await;
    let visible = published.elapsed();
    eprintln!(
        "bus: new catalog content visible through the aggregator {} ms after the event",
        visible.as_millis()
    );
    assert!(
        created.elapsed() < TIMER,
        "too slow to tell the event from the timer ({:?} since the catalog appeared)",
        created.elapsed()
    );
}
