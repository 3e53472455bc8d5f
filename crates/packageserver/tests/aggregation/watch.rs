//! Informers: a kube-rs watcher on PackageManifests through the aggregator
//! sees the initial packages and later changes.

use std::time::Duration;

use futures::StreamExt;
use kube::{
    Api,
    api::{Patch, PatchParams},
    runtime::{WatchStreamExt, watcher},
};
use olm_api::{catalog_source::CatalogSource, package_manifest::PackageManifest};
use serde_json::json;

use crate::harness::{TEAM_CATALOG, TEAM_NAMESPACE, harness};

#[tokio::test]
async fn kube_rs_watcher_follows_catalog_changes() {
    harness();
    let client = olm_testkit::control_plane().client().await;
    let api: Api<PackageManifest> = Api::namespaced(client.clone(), TEAM_NAMESPACE);
    let stream = watcher(
        api,
        watcher::Config::default().labels(&format!("catalog={TEAM_CATALOG}")),
    )
    .default_backoff()
    .applied_objects();
    let mut stream = std::pin::pin!(stream);
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let m = tokio::time::timeout(Duration::from_secs(20), stream.next())
            .await
            .expect("initial packages within 20 s")
            .unwrap();
        // An informer rides out errors: with two replicas, a watch that
        // reconnects to the other one gets 410 Gone and relists.
        let Ok(m) = m else { continue };
        let name = m.metadata.name.unwrap();
        if !seen.contains(&name) {
            seen.push(name);
        }
    }
    seen.sort();
    assert_eq!(seen, ["gizmo-operator", "sprocket-operator"]);

    // A change of the CatalogSource refreshes its packages: the watcher sees
    // the new display name.
    let display = format!("Team Catalog {}", std::process::id());
    let catalogs: Api<CatalogSource> = Api::namespaced(client, TEAM_NAMESPACE);
    catalogs
        .patch(
            TEAM_CATALOG,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"displayName": display}})),
        )
        .await
        .unwrap();
    let changed = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(event) = stream.next().await {
            let Ok(m) = event else { continue };
            if m.status.catalog_source_display_name == display {
                return m;
            }
        }
        panic!("watch ended");
    })
    .await
    .expect("the change within 20 s");
    assert_eq!(changed.metadata.namespace.as_deref(), Some(TEAM_NAMESPACE));
}
