//! Kubernetes Events on the objects users look at (`kubectl describe`), through
//! `kube::runtime::events::Recorder`. Warning events carry the whole error
//! chain, cut to [`MAX_NOTE_BYTES`] as the API server requires.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

use crate::error::{Error, Result};

/// The longest event note (`message` in `kubectl describe`) the API server
/// accepts: 1 KiB.
pub const MAX_NOTE_BYTES: usize = 1024;

/// Marks a note that was cut to fit [`MAX_NOTE_BYTES`].
const TRUNCATION_MARKER: &str = "…";

/// Publishes events on behalf of one controller.
#[derive(Clone)]
pub struct EventRecorder {
    recorder: Recorder,
}

impl std::fmt::Debug for EventRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRecorder").finish_non_exhaustive()
    }
}

impl EventRecorder {
    /// A recorder reporting as `controller` (for example `catalog-operator`),
    /// with `instance` telling replicas apart (the pod name).
    pub fn new(client: kube::Client, controller: &str, instance: Option<String>) -> Self {
        let reporter = Reporter {
            controller: controller.to_owned(),
            instance,
        };
        Self {
            recorder: Recorder::new(client, reporter),
        }
    }

    /// Publishes a Normal event: `reason` is a short `PascalCase` word
    /// (`InstallSucceeded`), `action` what was done (`Install`).
    pub async fn normal(
        &self,
        regarding: &ObjectReference,
        reason: &str,
        action: &str,
        note: &str,
    ) -> Result<()> {
        self.publish(regarding, EventType::Normal, reason, action, note)
            .await
    }

    /// Publishes a Warning event whose note is already text (for example an
    /// upstream phase message such as `install timeout`), cut to
    /// [`MAX_NOTE_BYTES`].
    pub async fn warning_note(
        &self,
        regarding: &ObjectReference,
        reason: &str,
        action: &str,
        note: &str,
    ) -> Result<()> {
        self.publish(regarding, EventType::Warning, reason, action, note)
            .await
    }

    /// Publishes a Warning event whose note is `error` followed by each of its
    /// sources (`failed to apply ConfigMap x: connection refused`), cut to
    /// [`MAX_NOTE_BYTES`]. Use the error's category as `reason`.
    ///
    /// The error chain is rendered before the returned future starts, so the
    /// future does not hold the (not `Sync`) error and can be spawned on a
    /// multi-threaded runtime.
    pub fn warning<'a>(
        &'a self,
        regarding: &'a ObjectReference,
        reason: &'a str,
        action: &'a str,
        error: &(dyn std::error::Error + 'static),
    ) -> impl std::future::Future<Output = Result<()>> + Send + 'a {
        let note = error_chain(error);
        async move {
            self.publish(regarding, EventType::Warning, reason, action, &note)
                .await
        }
    }

    async fn publish(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        note: &str,
    ) -> Result<()> {
        let event = Event {
            type_,
            reason: reason.to_owned(),
            note: Some(truncate_note(note).into_owned()),
            action: action.to_owned(),
            secondary: None,
        };
        self.recorder
            .publish(&event, regarding)
            .await
            .map_err(|source| Error::PublishEvent {
                reason: reason.to_owned(),
                regarding: describe(regarding),
                source: Box::new(source),
            })
    }
}

fn describe(reference: &ObjectReference) -> String {
    let kind = reference.kind.as_deref().unwrap_or("object");
    let name = reference.name.as_deref().unwrap_or("");
    match reference.namespace.as_deref() {
        Some(namespace) => format!("{kind} {namespace}/{name}"),
        None => format!("{kind} {name}"),
    }
}

/// `error` and each of its sources, joined by `": "`.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut chain = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        chain.push_str(": ");
        chain.push_str(&cause.to_string());
        source = cause.source();
    }
    chain
}

/// `note` unchanged when it fits in [`MAX_NOTE_BYTES`], otherwise cut at a
/// character boundary and ended with `…` so that the result still fits.
pub fn truncate_note(note: &str) -> std::borrow::Cow<'_, str> {
    if note.len() <= MAX_NOTE_BYTES {
        return note.into();
    }
    let mut cut = MAX_NOTE_BYTES - TRUNCATION_MARKER.len();
    while !note.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{TRUNCATION_MARKER}", &note[..cut]).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("{message}")]
    struct Layer {
        message: String,
        #[source]
        source: Option<Box<Layer>>,
    }

    fn chain_of(messages: &[String]) -> Layer {
        messages
            .iter()
            .rev()
            .fold(None, |source, message| {
                Some(Layer {
                    message: message.clone(),
                    source: source.map(Box::new),
                })
            })
            .expect("at least one message")
    }

    #[test]
    fn chain_joins_every_source() {
        let error = chain_of(&[
            "failed to apply ConfigMap sample".into(),
            "connection refused".into(),
        ]);
        assert_eq!(
            error_chain(&error),
            "failed to apply ConfigMap sample: connection refused"
        );
    }

    #[test]
    fn short_notes_are_kept() {
        let note = "x".repeat(MAX_NOTE_BYTES);
        assert_eq!(truncate_note(&note), note.as_str());
    }

    #[test]
    fn long_chain_is_cut_to_the_limit() {
        let messages: Vec<String> = (0..100).map(|i| format!("layer {i} failed")).collect();
        let note = truncate_note(&error_chain(&chain_of(&messages))).into_owned();
        assert!(note.len() <= MAX_NOTE_BYTES, "{} bytes", note.len());
        assert!(note.len() > MAX_NOTE_BYTES - 4, "cut no more than needed");
        assert!(note.starts_with("layer 0 failed: layer 1 failed"));
        assert!(note.ends_with(TRUNCATION_MARKER));
    }

    #[test]
    fn multi_byte_characters_are_never_split() {
        // Shift the 4-byte characters across the cut so every offset is hit.
        for padding in 0..4 {
            let message = format!("{}{}", "a".repeat(padding), "𝄞".repeat(400));
            let chain = error_chain(&chain_of(&[message, "naïve ünïcödé".into()]));
            let note = truncate_note(&chain);
            assert!(note.len() <= MAX_NOTE_BYTES);
            assert!(note.len() > MAX_NOTE_BYTES - 4 - TRUNCATION_MARKER.len());
            assert!(note.ends_with(TRUNCATION_MARKER));
            let body = note.strip_suffix(TRUNCATION_MARKER).expect("marker");
            assert!(chain.starts_with(body), "a prefix of the original");
        }
    }
}

#[cfg(test)]
mod send_tests {
    use super::*;

    fn assert_send<T: Send>(_: &T) {}

    /// Controllers spawn reconciles on a multi-threaded runtime, so the
    /// warning future must be `Send` even though errors are not `Sync`.
    #[allow(dead_code)]
    fn warning_future_is_send(recorder: &EventRecorder, regarding: &ObjectReference) {
        let error = std::io::Error::other("boom");
        let future = recorder.warning(regarding, "Failed", "Reconcile", &error);
        assert_send(&future);
    }
}
