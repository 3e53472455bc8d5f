//! The JetStream streams of the bus and their idempotent declaration.
//!
//! Two streams exist:
//!
//! - [`WORK_QUEUE_STREAM`] holds bundle unpack requests until one
//!   bundle-unpacker replica acknowledges each (retention `WorkQueue`);
//! - [`AUDIT_STREAM`] keeps every lifecycle event for a bounded time and
//!   size, as an answer to "what changed on my cluster, and why"
//!   (`nats stream view OLM_AUDIT`).
//!
//! Every service declares both when it connects (and again after every
//! reconnect, in case the server lost its store). Declaring compares the
//! settings this module manages with the server's: equal settings are left
//! alone, so concurrent declarations by many replicas are no-ops; different
//! settings are updated, so changing a constant here rolls out with the next
//! release.

use std::time::Duration;

use async_nats::jetstream::{
    self,
    context::GetStreamErrorKind,
    stream::{Config, DiscardPolicy, RetentionPolicy, StorageType},
};

use crate::{Error, events::MAX_EVENT_BYTES, subjects};

/// Name of the stream of bundle unpack requests.
pub const WORK_QUEUE_STREAM: &str = "OLM_BUNDLE_UNPACK";

/// Most unpack requests the work queue holds. When it is full, new requests
/// are refused (the publisher sees an error and catalog-operator asks again
/// on its next resync) rather than silently dropping older ones.
pub const WORK_QUEUE_MAX_MESSAGES: i64 = 10_000;

/// Most bytes the work queue holds.
pub const WORK_QUEUE_MAX_BYTES: i64 = 64 * 1024 * 1024;

/// Age after which an unhandled unpack request is removed. Requests carry
/// their own, shorter deadline; this only bounds what a long outage of every
/// unpacker leaves behind.
pub const WORK_QUEUE_MAX_AGE: Duration = Duration::from_secs(24 * 60 * 60);

/// Name of the audit stream of lifecycle events.
pub const AUDIT_STREAM: &str = "OLM_AUDIT";

/// How long the audit stream keeps an event.
pub const AUDIT_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// Most bytes the audit stream keeps; the oldest events go first.
pub const AUDIT_MAX_BYTES: i64 = 256 * 1024 * 1024;

/// Window in which JetStream drops a message whose `Nats-Msg-Id` it has
/// already stored, so two replicas reporting the same change store it once.
pub const DUPLICATE_WINDOW: Duration = Duration::from_secs(2 * 60);

/// Largest message (payload and headers) either stream accepts: an event of
/// [`MAX_EVENT_BYTES`] plus room for the trace and dedup headers.
pub const MAX_STREAM_MESSAGE_BYTES: i32 = MAX_EVENT_BYTES as i32 + 16 * 1024;

/// What declaring a stream did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Declared {
    /// The stream did not exist and was created.
    Created,
    /// The stream existed with the desired settings; nothing was written.
    Unchanged,
    /// The stream existed with other settings and was updated.
    Updated,
}

/// Settings of the work queue of bundle unpack requests.
pub fn work_queue_stream_config() -> Config {
    Config {
        name: WORK_QUEUE_STREAM.to_owned(),
        description: Some("OLM bundle unpack requests, one consumer per request".to_owned()),
        subjects: vec![subjects::BUNDLE_UNPACK_REQUESTS.to_owned()],
        retention: RetentionPolicy::WorkQueue,
        discard: DiscardPolicy::New,
        max_messages: WORK_QUEUE_MAX_MESSAGES,
        max_bytes: WORK_QUEUE_MAX_BYTES,
        max_age: WORK_QUEUE_MAX_AGE,
        max_message_size: MAX_STREAM_MESSAGE_BYTES,
        duplicate_window: DUPLICATE_WINDOW,
        storage: StorageType::File,
        num_replicas: 1,
        ..Config::default()
    }
}

/// Settings of the audit stream of lifecycle events.
pub fn audit_stream_config() -> Config {
    Config {
        name: AUDIT_STREAM.to_owned(),
        description: Some("OLM lifecycle events: what changed on the cluster, and why".to_owned()),
        subjects: subjects::audit_subjects(),
        retention: RetentionPolicy::Limits,
        discard: DiscardPolicy::Old,
        max_messages: -1,
        max_bytes: AUDIT_MAX_BYTES,
        max_age: AUDIT_MAX_AGE,
        max_message_size: MAX_STREAM_MESSAGE_BYTES,
        duplicate_window: DUPLICATE_WINDOW,
        storage: StorageType::File,
        num_replicas: 1,
        ..Config::default()
    }
}

/// Every stream of the bus.
pub fn stream_configs() -> [Config; 2] {
    [work_queue_stream_config(), audit_stream_config()]
}

/// Creates the stream if it is missing, updates it if the settings this
/// module manages differ, and otherwise writes nothing.
pub async fn declare_stream(
    jetstream: &jetstream::Context,
    desired: &Config,
) -> Result<Declared, Error> {
    let declare_error = |source| Error::DeclareStream {
        stream: desired.name.clone(),
        source,
    };
    match jetstream.get_stream(&desired.name).await {
        Ok(stream) => {
            let actual = &stream.cached_info().config;
            if same_managed_settings(desired, actual) {
                return Ok(Declared::Unchanged);
            }
            tracing::info!(stream = %desired.name, "updating JetStream stream settings");
            jetstream
                .update_stream(desired)
                .await
                .map_err(declare_error)?;
            Ok(Declared::Updated)
        }
        Err(err) if is_stream_not_found(&err) => {
            match jetstream.create_stream(desired.clone()).await {
                Ok(_) => Ok(Declared::Created),
                // Another replica created it between our read and our create;
                // declare again to converge on the settings.
                Err(_) if jetstream.get_stream(&desired.name).await.is_ok() => {
                    Box::pin(declare_stream(jetstream, desired)).await
                }
                Err(source) => Err(declare_error(source)),
            }
        }
        Err(source) => Err(Error::StreamInfo {
            stream: desired.name.clone(),
            source,
        }),
    }
}

/// Declares every stream of the bus, see [`declare_stream`].
pub async fn declare_streams(
    jetstream: &jetstream::Context,
) -> Result<Vec<(String, Declared)>, Error> {
    let mut declared = Vec::new();
    for config in stream_configs() {
        let outcome = declare_stream(jetstream, &config).await?;
        tracing::debug!(stream = %config.name, ?outcome, "declared JetStream stream");
        declared.push((config.name, outcome));
    }
    Ok(declared)
}

fn is_stream_not_found(err: &jetstream::context::GetStreamError) -> bool {
    matches!(
        err.kind(),
        GetStreamErrorKind::JetStream(ref error)
            if error.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND
    )
}

/// Whether the server's settings match ours on every field this module sets.
/// Fields we leave at their defaults, and fields a newer server adds, are
/// not compared, so a server upgrade does not cause updates.
fn same_managed_settings(desired: &Config, actual: &Config) -> bool {
    let mut desired_subjects = desired.subjects.clone();
    let mut actual_subjects = actual.subjects.clone();
    desired_subjects.sort();
    actual_subjects.sort();
    desired_subjects == actual_subjects
        && desired.description == actual.description
        && desired.retention == actual.retention
        && desired.discard == actual.discard
        && desired.max_messages == actual.max_messages
        && desired.max_bytes == actual.max_bytes
        && desired.max_age == actual.max_age
        && desired.max_message_size == actual.max_message_size
        && desired.duplicate_window == actual.duplicate_window
        && desired.storage == actual.storage
        && desired.num_replicas == actual.num_replicas
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_bounded() {
        for config in stream_configs() {
            assert!(config.max_bytes > 0, "{} has no byte limit", config.name);
            assert!(
                !config.max_age.is_zero(),
                "{} has no age limit",
                config.name
            );
            assert!(config.max_message_size > 0);
            // The server refuses a dedup window longer than the retention.
            assert!(config.duplicate_window <= config.max_age, "{}", config.name);
        }
        assert_eq!(
            work_queue_stream_config().retention,
            RetentionPolicy::WorkQueue
        );
        assert_eq!(audit_stream_config().retention, RetentionPolicy::Limits);
    }

    #[test]
    fn comparison_ignores_subject_order_and_unmanaged_fields() {
        let desired = audit_stream_config();
        let mut actual = desired.clone();
        actual.subjects.reverse();
        actual.allow_direct = true;
        assert!(same_managed_settings(&desired, &actual));
        actual.max_age = Duration::from_secs(1);
        assert!(!same_managed_settings(&desired, &actual));
    }
}
