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

/// An OperatorGroup CRD whose status refuses condition messages longer than
/// 16 bytes: an older schema, as after a rollback.
async fn strict_operator_group_crd(client: &kube::Client) {
    let mut crd = olm_testkit::crds::open_crd(
        "operators.coreos.com",
        "operatorgroups",
        "OperatorGroup",
        "Namespaced",
        true,
    );
    let schema = serde_json::from_value(json!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
        "properties": {"status": {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
            "properties": {"conditions": {"type": "array", "items": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": true,
                "properties": {"message": {"type": "string", "maxLength": 16}},
            }}},
        }},
    }))
    .expect("schema");
    crd.spec.versions[0].schema = Some(
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceValidation {
            open_api_v3_schema: Some(schema),
        },
    );
    olm_testkit::crds::install_open_crd(client, &crd).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_status_is_written_in_its_minimal_form() {
    use olm_api::operator_group::{OperatorGroup, OperatorGroupStatus};
    use olm_runtime::apply::{STATUS_REJECTED, StatusWrite, write_status};

    init_logs();
    let plane = olm_testkit::control_plane();
    let namespace = plane.namespace("status-minimal").await;
    let client = plane.client().await;
    strict_operator_group_crd(&client).await;
    let groups: Api<OperatorGroup> = Api::namespaced(client.clone(), namespace.name());
    let group: OperatorGroup = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
        "metadata": {"name": "sample-group", "namespace": namespace.name()},
        "spec": {},
    }))
    .expect("group");
    let group = groups
        .create(&Default::default(), &group)
        .await
        .expect("group created");
    let recorder =
        olm_runtime::events::EventRecorder::new(client.clone(), "olm-runtime-test", None);
    let status = |message: &str| -> OperatorGroupStatus {
        serde_json::from_value(json!({
            "namespaces": [namespace.name()],
            "lastUpdated": "2026-11-27T00:00:00Z",
            "conditions": [{"type": "SampleCondition", "status": "True", "reason": "Sample",
                "message": message, "lastTransitionTime": "2026-11-27T00:00:00Z"}],
        }))
        .expect("status")
    };

    let short = write_status(&groups, &MANAGER, &group, &status("fits"), Some(&recorder))
        .await
        .expect("short message written");
    assert_eq!(short, StatusWrite::Written);

    let refused = status("a message far longer than the old schema allows");
    let outcome = write_status(&groups, &MANAGER, &group, &refused, Some(&recorder))
        .await
        .expect("the minimal status is written instead");
    assert_eq!(outcome, StatusWrite::Minimal);
    let stored = groups
        .get("sample-group")
        .await
        .expect("group")
        .status
        .expect("status");
    assert_eq!(stored.namespaces, [namespace.name()]);
    assert_eq!(stored.conditions.len(), 1);
    assert_eq!(stored.conditions[0].reason, "Sample");
    assert_eq!(stored.conditions[0].message, "");

    let events =
        Api::<k8s_openapi::api::events::v1::Event>::namespaced(client.clone(), namespace.name())
            .list(&Default::default())
            .await
            .expect("events")
            .items;
    let rejected = events
        .iter()
        .find(|event| event.reason.as_deref() == Some(STATUS_REJECTED))
        .unwrap_or_else(|| panic!("no {STATUS_REJECTED} event in {events:?}"));
    assert_eq!(rejected.type_.as_deref(), Some("Warning"));
    assert!(
        rejected.note.as_deref().unwrap_or_default().contains("16"),
        "the note says what was refused: {rejected:?}"
    );

    groups
        .delete("sample-group", &Default::default())
        .await
        .expect("deleted");
    olm_testkit::wait::eventually("group gone", std::time::Duration::from_secs(30), || async {
        match groups.get_opt("sample-group").await {
            Ok(None) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let gone = write_status(&groups, &MANAGER, &group, &status("fits"), None)
        .await
        .expect("a deleted object is not an error");
    assert_eq!(gone, StatusWrite::Gone);
}
