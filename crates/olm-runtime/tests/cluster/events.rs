//! Kubernetes Events published through the recorder are stored and readable.

use k8s_openapi::api::{core::v1::ConfigMap, events::v1::Event};
use kube::{Api, Resource as _, api::ObjectMeta};
use olm_runtime::{
    apply::{FieldManager, apply},
    events::{EventRecorder, MAX_NOTE_BYTES},
};

use crate::init_logs;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_are_published_on_the_object() {
    init_logs();
    let plane = olm_testkit::control_plane();
    let namespace = plane.namespace("events").await;
    let client = plane.client().await;
    let configs: Api<ConfigMap> = Api::namespaced(client.clone(), namespace.name());
    let regarding = apply(
        &configs,
        &FieldManager::new("olm-runtime-test"),
        &ConfigMap {
            metadata: ObjectMeta {
                name: Some("sample-regarding".to_owned()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        },
    )
    .await
    .expect("object to report on")
    .object_ref(&());

    let recorder = EventRecorder::new(
        client.clone(),
        "olm-runtime-test",
        Some("sample-pod".to_owned()),
    );
    recorder
        .normal(
            &regarding,
            "SampleInstalled",
            "Install",
            "installed the sample",
        )
        .await
        .expect("normal event published");
    let failure = olm_runtime::Error::Task {
        name: "sample-reconciler".to_owned(),
        source: Box::new(std::io::Error::other("é".repeat(1000))),
    };
    recorder
        .warning(&regarding, "SampleFailed", "Reconcile", &failure)
        .await
        .expect("warning event published");

    let events: Vec<Event> = Api::<Event>::namespaced(client, namespace.name())
        .list(&Default::default())
        .await
        .expect("events listed")
        .items;
    let find = |reason: &str| {
        events
            .iter()
            .find(|event| event.reason.as_deref() == Some(reason))
            .unwrap_or_else(|| panic!("no {reason} event in {events:?}"))
    };

    let normal = find("SampleInstalled");
    assert_eq!(normal.type_.as_deref(), Some("Normal"));
    assert_eq!(normal.note.as_deref(), Some("installed the sample"));
    assert_eq!(
        normal.reporting_controller.as_deref(),
        Some("olm-runtime-test")
    );
    assert_eq!(normal.reporting_instance.as_deref(), Some("sample-pod"));
    let about = normal.regarding.as_ref().expect("regarding");
    assert_eq!(about.name.as_deref(), Some("sample-regarding"));
    assert_eq!(about.kind.as_deref(), Some("ConfigMap"));

    let warning = find("SampleFailed");
    assert_eq!(warning.type_.as_deref(), Some("Warning"));
    assert_eq!(warning.action.as_deref(), Some("Reconcile"));
    let note = warning.note.as_deref().expect("note");
    assert!(
        note.starts_with("task sample-reconciler failed: éé"),
        "{note}"
    );
    assert!(note.len() <= MAX_NOTE_BYTES, "{} bytes", note.len());
    assert!(note.ends_with('…'), "{note}");
}
