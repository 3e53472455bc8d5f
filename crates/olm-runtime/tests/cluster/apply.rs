//! Server-side apply helpers against a real API server.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Service, ServicePort, ServiceSpec};
use kube::{
    Api, ResourceExt as _,
    api::{ObjectMeta, Patch, PatchParams},
};
use olm_runtime::apply::{FieldManager, apply, apply_status, delete_if_exists, is_managed};
use serde_json::json;

use crate::init_logs;

const MANAGER: FieldManager = FieldManager::new("olm-runtime-test");

fn sample_config(data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some("sample-config".to_owned()),
            labels: Some([("app".to_owned(), "sample-app".to_owned())].into()),
            ..ObjectMeta::default()
        },
        data: Some(
            data.iter()
                .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
                .collect::<BTreeMap<_, _>>(),
        ),
        ..ConfigMap::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_is_idempotent_and_marks_objects_managed() {
    init_logs();
    let plane = olm_testkit::control_plane();
    let namespace = plane.namespace("apply-object").await;
    let configs: Api<ConfigMap> = Api::namespaced(plane.client().await, namespace.name());

    let desired = sample_config(&[("first-key", "first-value"), ("second-key", "second-value")]);
    let first = apply(&configs, &MANAGER, &desired)
        .await
        .expect("first apply");
    let second = apply(&configs, &MANAGER, &desired)
        .await
        .expect("second apply");
    assert_eq!(
        first.resource_version(),
        second.resource_version(),
        "applying the same object again changes nothing"
    );

    let stored = configs.get("sample-config").await.expect("stored");
    assert!(is_managed(&stored), "labels: {:?}", stored.labels());
    assert_eq!(
        stored.labels().get("olm.managed").map(String::as_str),
        Some("true")
    );
    assert_eq!(
        stored.labels().get("app").map(String::as_str),
        Some("sample-app")
    );
    let ours: Vec<_> = stored
        .managed_fields()
        .iter()
        .filter(|entry| entry.manager.as_deref() == Some(MANAGER.as_str()))
        .collect();
    assert_eq!(
        ours.len(),
        1,
        "managed fields: {:?}",
        stored.managed_fields()
    );
    assert_eq!(ours[0].operation.as_deref(), Some("Apply"));

    // A field this manager no longer sets is removed: desired state, not a merge.
    let smaller = sample_config(&[("first-key", "first-value")]);
    let third = apply(&configs, &MANAGER, &smaller)
        .await
        .expect("third apply");
    let data = third.data.clone().unwrap_or_default();
    assert_eq!(data.keys().collect::<Vec<_>>(), ["first-key"]);
    assert!(is_managed(&third));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_apply_takes_over_fields_of_another_manager() {
    init_logs();
    let plane = olm_testkit::control_plane();
    let namespace = plane.namespace("apply-status").await;
    let services: Api<Service> = Api::namespaced(plane.client().await, namespace.name());

    let desired = Service {
        metadata: ObjectMeta {
            name: Some("sample-service".to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".to_owned()),
            ports: Some(vec![ServicePort {
                port: 8443,
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    };
    apply(&services, &MANAGER, &desired)
        .await
        .expect("service applied");

    let ingress = |ip: &str| json!({ "loadBalancer": { "ingress": [{ "ip": ip }] } });
    services
        .patch_status(
            "sample-service",
            &PatchParams::apply("another-manager"),
            &Patch::Apply(json!({
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": { "name": "sample-service" },
                "status": ingress("192.0.2.10"),
            })),
        )
        .await
        .expect("another manager sets the status");

    let updated = apply_status(
        &services,
        &MANAGER,
        "sample-service",
        &ingress("192.0.2.20"),
    )
    .await
    .expect("forced status apply");
    let ips: Vec<_> = updated
        .status
        .clone()
        .and_then(|status| status.load_balancer)
        .and_then(|balancer| balancer.ingress)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|ingress| ingress.ip)
        .collect();
    assert_eq!(ips, ["192.0.2.20"]);
    assert!(
        updated.managed_fields().iter().any(|entry| {
            entry.manager.as_deref() == Some(MANAGER.as_str())
                && entry.subresource.as_deref() == Some("status")
        }),
        "managed fields: {:?}",
        updated.managed_fields()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_tolerates_absence() {
    init_logs();
    let plane = olm_testkit::control_plane();
    let namespace = plane.namespace("apply-delete").await;
    let configs: Api<ConfigMap> = Api::namespaced(plane.client().await, namespace.name());

    apply(&configs, &MANAGER, &sample_config(&[("key", "value")]))
        .await
        .expect("applied");
    assert!(
        delete_if_exists(&configs, "sample-config")
            .await
            .expect("deleted")
    );
    assert!(
        configs
            .get_opt("sample-config")
            .await
            .expect("readable")
            .is_none()
    );
    assert!(
        !delete_if_exists(&configs, "sample-config")
            .await
            .expect("absent is fine")
    );
}
