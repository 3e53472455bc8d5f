//! Kubernetes Events on CSVs and OperatorGroups.
//!
//! `olm_runtime::events::EventRecorder::warning` holds a
//! `&dyn std::error::Error` (not `Sync`) across an await, so its future is
//! not `Send` and cannot run in a spawned reconcile; this thin wrapper over
//! kube's recorder takes the note as text instead (callers format errors with
//! `olm_runtime::events::error_chain`), cut with olm-runtime's
//! `truncate_note`.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use olm_runtime::events::truncate_note;

/// Publishes Events as `olm-operator`.
#[derive(Clone)]
pub(crate) struct Events {
    recorder: Recorder,
}

impl Events {
    pub(crate) fn new(client: kube::Client, controller: &str) -> Self {
        Self {
            recorder: Recorder::new(
                client,
                Reporter {
                    controller: controller.to_owned(),
                    instance: None,
                },
            ),
        }
    }

    /// A Normal event.
    pub(crate) async fn normal(
        &self,
        regarding: &ObjectReference,
        reason: &str,
        action: &str,
        note: &str,
    ) {
        self.publish(
            regarding,
            EventType::Normal,
            reason,
            action,
            note.to_owned(),
        )
        .await;
    }

    /// A Warning event whose note is the text given.
    pub(crate) async fn warning(
        &self,
        regarding: &ObjectReference,
        reason: &str,
        action: &str,
        note: &str,
    ) {
        self.publish(
            regarding,
            EventType::Warning,
            reason,
            action,
            note.to_owned(),
        )
        .await;
    }

    async fn publish(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let event = Event {
            type_,
            reason: reason.to_owned(),
            note: Some(truncate_note(&note).into_owned()),
            action: action.to_owned(),
            secondary: None,
        };
        // An Event that cannot be recorded must not fail the reconcile.
        if let Err(error) = self.recorder.publish(&event, regarding).await {
            tracing::warn!(
                reason,
                error = &error as &dyn std::error::Error,
                "cannot record event"
            );
        }
    }
}
