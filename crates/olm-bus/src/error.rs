//! The error type of the bus, one variant per failure site.

use std::{path::PathBuf, time::Duration};

use async_nats::jetstream;

/// Everything that can go wrong on the bus.
///
/// None of these errors is fatal to a service: Kubernetes is the source of
/// truth, so a caller logs the error and carries on, relying on its watches
/// and resyncs.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A namespace, name or digest is too long to be put in a subject.
    #[error("{field} is {len} bytes long, more than the {max} bytes allowed in a subject")]
    TokenTooLong {
        /// Which value was too long (`namespace`, `name`, `digest`).
        field: &'static str,
        /// Its length in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },

    /// A subject token could not be decoded back into a value.
    #[error("malformed subject token {token:?}: {reason}")]
    MalformedToken {
        /// The token, cut to a readable length.
        token: String,
        /// What is wrong with it.
        reason: &'static str,
    },

    /// An event lacks the object reference its subject is built from.
    #[error("{event} has no {field}, which its subject is built from")]
    MissingField {
        /// Full protobuf name of the event.
        event: &'static str,
        /// The missing field.
        field: &'static str,
    },

    /// An encoded event or a received payload is larger than the bus allows.
    #[error("{event} payload is {len} bytes, more than the {max} bytes allowed")]
    PayloadTooLarge {
        /// Full protobuf name of the event.
        event: &'static str,
        /// Size of the payload in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },

    /// A received payload is not a valid encoding of the expected event.
    #[error("cannot decode {event} from {len} bytes")]
    Decode {
        /// Full protobuf name of the expected event.
        event: &'static str,
        /// Size of the payload in bytes.
        len: usize,
        /// What protobuf decoding reported.
        #[source]
        source: prost::DecodeError,
    },

    /// A received message says it carries a different event type than the
    /// subscriber expects.
    #[error("expected a {expected} event but the message carries {actual:?}")]
    UnexpectedEventType {
        /// Full protobuf name of the expected event.
        expected: &'static str,
        /// The type named by the message header, cut to a readable length.
        actual: String,
    },

    /// `--nats-url` does not parse.
    #[error("invalid NATS URL {url:?}")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// Why it does not parse.
        #[source]
        source: std::io::Error,
    },

    /// The NATS credentials file cannot be read.
    #[error("cannot read NATS credentials from {path:?}")]
    Credentials {
        /// The file.
        path: PathBuf,
        /// What reading it reported.
        #[source]
        source: std::io::Error,
    },

    /// An NKey seed or public key is malformed, or a service has no bus
    /// identity.
    #[error("bus identity: {0}")]
    Key(String),

    /// The NKey seed file cannot be read.
    #[error("cannot read the NATS NKey seed from {path:?}")]
    NkeyFile {
        /// The file.
        path: PathBuf,
        /// What reading it reported.
        #[source]
        source: std::io::Error,
    },

    /// The NATS client could not be created.
    #[error("cannot create the NATS client")]
    Connect(#[source] async_nats::ConnectError),

    /// A core NATS publish failed.
    #[error("cannot publish to {subject}")]
    Publish {
        /// The subject.
        subject: String,
        /// What the client reported.
        #[source]
        source: async_nats::PublishError,
    },

    /// A JetStream publish was not acknowledged by the stream.
    #[error("{subject} was not stored by JetStream")]
    JetStreamPublish {
        /// The subject.
        subject: String,
        /// What the client or server reported.
        #[source]
        source: jetstream::context::PublishError,
    },

    /// A subscription could not be made.
    #[error("cannot subscribe to {subject}")]
    Subscribe {
        /// The subject filter.
        subject: String,
        /// What the client reported.
        #[source]
        source: async_nats::SubscribeError,
    },

    /// Reading a stream's configuration failed.
    #[error("cannot read JetStream stream {stream}")]
    StreamInfo {
        /// The stream name.
        stream: String,
        /// What the client or server reported.
        #[source]
        source: jetstream::context::GetStreamError,
    },

    /// Creating or updating a stream failed.
    #[error("cannot declare JetStream stream {stream}")]
    DeclareStream {
        /// The stream name.
        stream: String,
        /// What the client or server reported.
        #[source]
        source: jetstream::context::CreateStreamError,
    },

    /// Creating or updating a work-queue consumer failed.
    #[error("cannot create consumer {consumer} on JetStream stream {stream}")]
    CreateConsumer {
        /// The stream name.
        stream: String,
        /// The durable consumer name.
        consumer: String,
        /// What the client or server reported.
        #[source]
        source: jetstream::stream::ConsumerError,
    },

    /// Pulling messages from a work-queue consumer failed.
    #[error("cannot pull from consumer {consumer}")]
    Pull {
        /// The durable consumer name.
        consumer: String,
        /// What the client or server reported.
        #[source]
        source: async_nats::Error,
    },

    /// Acknowledging a work-queue message failed; the server redelivers it
    /// after the ack wait.
    #[error("cannot {action} message of consumer {consumer}")]
    Ack {
        /// `ack`, `nak`, `term` or `progress`.
        action: &'static str,
        /// The durable consumer name.
        consumer: String,
        /// What the client reported.
        #[source]
        source: async_nats::Error,
    },

    /// The operation needs a connection and the bus is disabled (no
    /// `--nats-url`).
    #[error("the NATS bus is disabled (no --nats-url)")]
    Disabled,

    /// The operation did not complete in time.
    #[error("{operation} did not complete within {timeout:?}")]
    Timeout {
        /// What timed out.
        operation: &'static str,
        /// The deadline that passed.
        timeout: Duration,
    },
}

impl Error {
    /// A stable, low-cardinality label for metrics and event reasons.
    pub fn category(&self) -> &'static str {
        match self {
            Error::TokenTooLong { .. } | Error::MalformedToken { .. } => "subject",
            Error::MissingField { .. } => "event",
            Error::PayloadTooLarge { .. }
            | Error::Decode { .. }
            | Error::UnexpectedEventType { .. } => "decode",
            Error::InvalidUrl { .. }
            | Error::Credentials { .. }
            | Error::Key(_)
            | Error::NkeyFile { .. }
            | Error::Connect(_) => "config",
            Error::Publish { .. } | Error::JetStreamPublish { .. } => "publish",
            Error::Subscribe { .. } => "subscribe",
            Error::StreamInfo { .. } | Error::DeclareStream { .. } => "stream",
            Error::CreateConsumer { .. } | Error::Pull { .. } | Error::Ack { .. } => "consumer",
            Error::Disabled => "disabled",
            Error::Timeout { .. } => "timeout",
        }
    }
}
