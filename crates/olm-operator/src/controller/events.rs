//! Kubernetes Events on CSVs and OperatorGroups, through olm-runtime's
//! recorder. An Event that cannot be recorded is logged and never fails the
//! reconcile that tried to record it.

use k8s_openapi::api::core::v1::ObjectReference;
use olm_runtime::events::EventRecorder;

/// Records Events for olm-operator's controllers.
#[derive(Clone, Debug)]
pub(crate) struct Events {
    recorder: EventRecorder,
}

impl Events {
    /// A recorder reporting as `controller`.
    pub(crate) fn new(client: kube::Client, controller: &str) -> Self {
        Self {
            recorder: EventRecorder::new(client, controller, None),
        }
    }

    /// The recorder itself, for helpers that publish their own events.
    pub(crate) fn recorder(&self) -> &EventRecorder {
        &self.recorder
    }

    /// A Normal event with a text note.
    pub(crate) async fn normal(
        &self,
        regarding: &ObjectReference,
        reason: &str,
        action: &str,
        note: &str,
    ) {
        let recorded = self.recorder.normal(regarding, reason, action, note).await;
        log_failure(reason, recorded);
    }

    /// A Warning event with a text note (callers render errors with
    /// `olm_runtime::events::error_chain`).
    pub(crate) async fn warning(
        &self,
        regarding: &ObjectReference,
        reason: &str,
        action: &str,
        note: &str,
    ) {
        let recorded = self
            .recorder
            .warning_note(regarding, reason, action, note)
            .await;
        log_failure(reason, recorded);
    }
}

fn log_failure(reason: &str, recorded: olm_runtime::Result<()>) {
    if let Err(error) = recorded {
        tracing::warn!(
            reason,
            error = &error as &dyn std::error::Error,
            "cannot record event"
        );
    }
}
