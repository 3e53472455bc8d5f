//! The OperatorHub and its default CatalogSources, end to end against the
//! API server.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::{
    Api, Client, ResourceExt as _,
    api::{Patch, PatchParams, PostParams},
};
use marketplace_operator::decide::{
    plan::NOT_A_DEFAULT_MESSAGE,
    sources::{MANAGED_BY_ANNOTATION, MANAGED_BY_VALUE},
};
use olm_api::{catalog_source::CatalogSource, operator_hub::OperatorHub};
use olm_runtime::leader::{LeaderElectionConfig, LeaderHandle};
use serde_json::json;

use crate::{RunningMarketplace, WAIT, crds_installed, default_source, eventually};

/// `(name, disabled, status, message)` of each `status.sources` entry.
type SourceSummary = Vec<(String, bool, String, Option<String>)>;

async fn hub_sources(client: &Client, hub: &str) -> Result<SourceSummary, String> {
    let hubs: Api<OperatorHub> = Api::all(client.clone());
    let hub = hubs
        .get_opt(hub)
        .await
        .map_err(|e| e.to_string())?
        .ok_or("no OperatorHub yet")?;
    Ok(hub
        .status
        .unwrap_or_default()
        .sources
        .into_iter()
        .map(|s| {
            (
                s.name.unwrap_or_default(),
                s.disabled.unwrap_or_default(),
                s.status.unwrap_or_default(),
                s.message,
            )
        })
        .collect())
}

/// Waits until `status.sources` has exactly `expected` as
/// `(name, disabled, status)`; returns the full entries.
async fn wait_for_status(
    client: &Client,
    hub: &str,
    expected: &[(&str, bool, &str)],
) -> SourceSummary {
    eventually("status.sources", WAIT, || async {
        let sources = hub_sources(client, hub).await?;
        let seen: Vec<_> = sources
            .iter()
            .map(|(n, d, s, _)| (n.as_str(), *d, s.as_str()))
            .collect();
        if seen == expected {
            Ok(sources)
        } else {
            Err(format!("status.sources: {sources:?}"))
        }
    })
    .await
}

async fn catalog(api: &Api<CatalogSource>, name: &str) -> Option<CatalogSource> {
    api.get_opt(name).await.unwrap()
}

async fn wait_for_catalog<F>(
    api: &Api<CatalogSource>,
    name: &str,
    what: &str,
    check: F,
) -> CatalogSource
where
    F: Fn(&CatalogSource) -> bool,
{
    eventually(what, WAIT, || async {
        match catalog(api, name).await {
            Some(found) if check(&found) => Ok(found),
            Some(found) => Err(format!("{name}: {:?}", found.spec)),
            None => Err(format!("{name}: absent")),
        }
    })
    .await
}

async fn wait_for_absence(api: &Api<CatalogSource>, name: &str) {
    eventually(&format!("{name} deleted"), WAIT, || async {
        match catalog(api, name).await {
            None => Ok(()),
            Some(_) => Err(format!("{name} still there")),
        }
    })
    .await;
}

/// Managed by marketplace-operator, and behind catalog-operator's promotion
/// guard as every default catalog is.
fn is_managed(catalog: &CatalogSource) -> bool {
    let annotation = |key: &str| catalog.annotations().get(key).map(String::as_str);
    annotation(MANAGED_BY_ANNOTATION) == Some(MANAGED_BY_VALUE)
        && annotation(olm_api::labels::PROMOTION_GUARD) == Some("true")
}

pub(crate) async fn patch_hub(client: &Client, hub: &str, spec: serde_json::Value) {
    let hubs: Api<OperatorHub> = Api::all(client.clone());
    hubs.patch(
        hub,
        &PatchParams::default(),
        &Patch::Merge(&json!({ "spec": spec })),
    )
    .await
    .unwrap();
}

async fn create_users_catalog(api: &Api<CatalogSource>, name: &str) -> CatalogSource {
    let catalog: CatalogSource = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "CatalogSource",
        "metadata": {"name": name},
        "spec": {"sourceType": "grpc", "image": "example.com/users/own-index:7", "displayName": "Mine"},
    }))
    .unwrap();
    api.create(&PostParams::default(), &catalog).await.unwrap()
}

#[tokio::test]
async fn absent_operatorhub_is_created_and_defaults_appear_with_the_annotation() {
    let namespace = olm_testkit::control_plane().namespace("marketplace").await;
    let config = RunningMarketplace::config(
        namespace.name(),
        vec![default_source("alpha"), default_source("beta")],
    );
    let service = RunningMarketplace::start(config).await;
    let catalogs: Api<CatalogSource> = Api::namespaced(service.client.clone(), namespace.name());

    let sources = wait_for_status(
        &service.client,
        &service.hub_name,
        &[("alpha", false, "Success"), ("beta", false, "Success")],
    )
    .await;
    assert!(sources.iter().all(|(_, _, _, message)| message.is_none()));
    let hubs: Api<OperatorHub> = Api::all(service.client.clone());
    let hub = hubs.get(&service.hub_name).await.unwrap();
    assert_eq!(hub.spec, Default::default(), "created with an empty spec");

    for name in ["alpha", "beta"] {
        let found = wait_for_catalog(&catalogs, name, "default created", is_managed).await;
        assert_eq!(found.spec, default_source(name).desired_spec());
        // Owned by the OperatorHub, so that deleting it collects them.
        let owners = found.metadata.owner_references.clone().unwrap_or_default();
        assert_eq!(owners.len(), 1, "{owners:?}");
        assert_eq!(owners[0].kind, "OperatorHub");
        assert_eq!(Some(&owners[0].uid), hub.metadata.uid.as_ref());
        assert_eq!(owners[0].block_owner_deletion, None);
        assert_eq!(
            found.spec.grpc_pod_config.unwrap().node_selector["kubernetes.io/os"],
            "linux"
        );
    }
    service.stop().await;
}

#[tokio::test]
async fn disable_all_removes_defaults_and_a_per_source_entry_keeps_one() {
    let namespace = olm_testkit::control_plane().namespace("marketplace").await;
    let config = RunningMarketplace::config(
        namespace.name(),
        vec![default_source("alpha"), default_source("beta")],
    );
    let service = RunningMarketplace::start(config).await;
    let catalogs: Api<CatalogSource> = Api::namespaced(service.client.clone(), namespace.name());
    wait_for_catalog(&catalogs, "alpha", "alpha created", is_managed).await;
    wait_for_catalog(&catalogs, "beta", "beta created", is_managed).await;

    patch_hub(
        &service.client,
        &service.hub_name,
        json!({"disableAllDefaultSources": true, "sources": [{"name": "beta", "disabled": false}]}),
    )
    .await;
    wait_for_absence(&catalogs, "alpha").await;
    wait_for_status(
        &service.client,
        &service.hub_name,
        &[("alpha", true, "Success"), ("beta", false, "Success")],
    )
    .await;
    assert!(
        catalog(&catalogs, "beta").await.is_some(),
        "beta stays enabled"
    );

    // Enabling everything again brings alpha back.
    patch_hub(
        &service.client,
        &service.hub_name,
        json!({"disableAllDefaultSources": false, "sources": null}),
    )
    .await;
    wait_for_catalog(&catalogs, "alpha", "alpha re-created", is_managed).await;
    assert!(service.metrics.write_count("delete", "succeeded") >= 1);
    service.stop().await;
}

#[tokio::test]
async fn drift_is_reverted_but_a_change_of_case_is_not_drift() {
    let namespace = olm_testkit::control_plane().namespace("marketplace").await;
    let config = RunningMarketplace::config(
        namespace.name(),
        vec![default_source("alpha"), default_source("beta")],
    );
    let service = RunningMarketplace::start(config).await;
    let catalogs: Api<CatalogSource> = Api::namespaced(service.client.clone(), namespace.name());
    wait_for_catalog(&catalogs, "alpha", "alpha created", is_managed).await;
    wait_for_catalog(&catalogs, "beta", "beta created", is_managed).await;

    // Upstream compares displayName (and image, publisher, ...) without
    // regard to case: this is no drift.
    catalogs
        .patch(
            "alpha",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"displayName": "FIXTURE ALPHA"}})),
        )
        .await
        .unwrap();
    // This is: another image, and a field the default does not have.
    catalogs
        .patch(
            "beta",
            &PatchParams::default(),
            &Patch::Merge(
                &json!({"spec": {"image": "example.com/evil/index:6", "secrets": ["stolen"]}}),
            ),
        )
        .await
        .unwrap();
    let beta = wait_for_catalog(&catalogs, "beta", "beta reverted", |c| {
        c.spec == default_source("beta").desired_spec()
    })
    .await;
    assert!(beta.spec.secrets.is_empty());
    let alpha = catalog(&catalogs, "alpha").await.unwrap();
    assert_eq!(alpha.spec.display_name.as_deref(), Some("FIXTURE ALPHA"));

    // Removing the annotation makes it drift too: it is put back.
    catalogs
        .patch(
            "beta",
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"annotations": {MANAGED_BY_ANNOTATION: null}}})),
        )
        .await
        .unwrap();
    wait_for_catalog(&catalogs, "beta", "annotation restored", is_managed).await;

    // Deleting a default brings it back.
    catalogs.delete("alpha", &Default::default()).await.unwrap();
    wait_for_catalog(&catalogs, "alpha", "alpha re-created", |c| {
        is_managed(c) && c.spec.display_name.as_deref() == Some("Fixture alpha")
    })
    .await;
    service.stop().await;
}

#[tokio::test]
async fn users_catalogs_are_never_touched_and_errors_are_reported() {
    crds_installed().await;
    let namespace = olm_testkit::control_plane().namespace("marketplace").await;
    let catalogs: Api<CatalogSource> = Api::namespaced(
        olm_testkit::control_plane().client().await,
        namespace.name(),
    );
    // A catalog of the user's own name, one named like the disabled default
    // alpha, and one named like the enabled default beta: none annotated.
    let own = create_users_catalog(&catalogs, "users-own").await;
    let alpha = create_users_catalog(&catalogs, "alpha").await;
    let beta = create_users_catalog(&catalogs, "beta").await;

    let mut config = RunningMarketplace::config(
        namespace.name(),
        vec![
            default_source("alpha"),
            default_source("beta"),
            default_source("gamma"),
        ],
    );
    config.adopt_unmanaged = false;
    let hubs: Api<OperatorHub> = Api::all(catalogs.clone().into_client());
    let hub: OperatorHub = serde_json::from_value(json!({
        "apiVersion": "config.openshift.io/v1",
        "kind": "OperatorHub",
        "metadata": {"name": config.operator_hub_name},
        "spec": {"sources": [
            {"name": "alpha", "disabled": true},
            {"name": "no-such-default", "disabled": false},
        ]},
    }))
    .unwrap();
    hubs.create(&PostParams::default(), &hub).await.unwrap();
    let service = RunningMarketplace::start(config).await;

    let sources = wait_for_status(
        &service.client,
        &service.hub_name,
        &[
            ("alpha", true, "Success"),
            ("beta", false, "Error"),
            ("gamma", false, "Success"),
            ("no-such-default", false, "Error"),
        ],
    )
    .await;
    assert!(
        sources[1]
            .3
            .as_deref()
            .unwrap()
            .contains(MANAGED_BY_ANNOTATION),
        "{sources:?}"
    );
    assert_eq!(sources[3].3.as_deref(), Some(NOT_A_DEFAULT_MESSAGE));
    wait_for_catalog(&catalogs, "gamma", "gamma created", is_managed).await;
    assert!(catalog(&catalogs, "no-such-default").await.is_none());

    // Another pass (the resync is short) still leaves the user's alone.
    tokio::time::sleep(Duration::from_secs(4)).await;
    for before in [own, alpha, beta] {
        let after = catalog(&catalogs, &before.name_any())
            .await
            .expect("still there");
        assert_eq!(
            after.resource_version(),
            before.resource_version(),
            "{} untouched",
            before.name_any()
        );
    }
    service.stop().await;
}

#[tokio::test]
async fn a_users_catalog_named_like_an_enabled_default_is_adopted_as_upstream_does() {
    crds_installed().await;
    let namespace = olm_testkit::control_plane().namespace("marketplace").await;
    let catalogs: Api<CatalogSource> = Api::namespaced(
        olm_testkit::control_plane().client().await,
        namespace.name(),
    );
    create_users_catalog(&catalogs, "alpha").await;
    let config = RunningMarketplace::config(namespace.name(), vec![default_source("alpha")]);
    let service = RunningMarketplace::start(config).await;
    wait_for_catalog(&catalogs, "alpha", "alpha adopted", |c| {
        is_managed(c) && c.spec == default_source("alpha").desired_spec()
    })
    .await;
    wait_for_status(
        &service.client,
        &service.hub_name,
        &[("alpha", false, "Success")],
    )
    .await;
    service.stop().await;
}

#[tokio::test]
async fn an_empty_lease_made_by_the_chart_is_acquired() {
    let namespace = olm_testkit::control_plane().namespace("marketplace").await;
    let client = olm_testkit::control_plane().client().await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), namespace.name());
    let lease: Lease =
        serde_json::from_value(json!({"metadata": {"name": "marketplace-operator"}})).unwrap();
    leases.create(&PostParams::default(), &lease).await.unwrap();

    let mut leader = LeaderHandle::spawn(
        client,
        LeaderElectionConfig::new("marketplace-operator", namespace.name(), "fixture-replica"),
    )
    .unwrap();
    tokio::time::timeout(WAIT, leader.acquired())
        .await
        .expect("acquired in time")
        .unwrap();
    let lease = leases.get("marketplace-operator").await.unwrap();
    assert_eq!(
        lease.spec.unwrap().holder_identity.as_deref(),
        Some("fixture-replica")
    );
    leader.release().await.unwrap();
}
