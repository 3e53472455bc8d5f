//! Consumers of the JetStream work queue: each request goes to one consumer,
//! which acknowledges it when done; an unacknowledged request returns to the
//! queue after the ack wait, up to a bounded number of deliveries.
//!
//! Handling must be idempotent: delivery is at least once (an ack lost on
//! the way back means a second delivery), which a reconcile-style handler
//! that checks Kubernetes first gets for free.

use std::{
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use async_nats::jetstream::{
    self, AckKind,
    consumer::{AckPolicy, DeliverPolicy, PullConsumer, pull},
};
use futures::{Stream, StreamExt as _};
use tokio::{
    sync::{mpsc, watch},
    task::JoinHandle,
};

use crate::{
    Error,
    bus::{Backoff, ConnectionState, Link, Received, Shared},
    events::WorkRequest,
    streams,
};

/// Default time a consumer has to acknowledge a request before it is
/// delivered again. Long work should call [`WorkItem::in_progress`].
pub const DEFAULT_ACK_WAIT: Duration = Duration::from_secs(60);

/// Default number of deliveries of one request before JetStream gives up on
/// it. The InstallPlan still records the need, so catalog-operator asks
/// again on its next resync.
pub const DEFAULT_MAX_DELIVER: i64 = 5;

/// Default number of requests delivered and not yet acknowledged, across
/// every consumer sharing the queue.
pub const DEFAULT_MAX_ACK_PENDING: i64 = 64;

/// Default number of requests a consumer asks the server for at once.
pub const DEFAULT_BATCH: usize = 4;

/// How often the server tells an idle consumer that it is still there, so
/// that a broken pull is noticed and renewed.
pub const IDLE_HEARTBEAT: Duration = Duration::from_secs(5);

/// How long one pull request waits for work before it is renewed.
pub const PULL_EXPIRES: Duration = Duration::from_secs(30);

/// Settings of a work-queue consumer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkQueueOptions {
    /// Name of the durable consumer. Every replica of a service uses the
    /// same name, so that they share the queue.
    pub durable_name: String,
    /// Time to acknowledge a request before it is delivered again.
    pub ack_wait: Duration,
    /// Deliveries of one request before JetStream stops delivering it.
    pub max_deliver: i64,
    /// Requests delivered and not yet acknowledged, across all replicas.
    pub max_ack_pending: i64,
    /// Requests pulled from the server at once by this consumer.
    pub batch: usize,
}

impl WorkQueueOptions {
    /// Default settings for the durable consumer `durable_name`.
    pub fn new(durable_name: impl Into<String>) -> WorkQueueOptions {
        WorkQueueOptions {
            durable_name: durable_name.into(),
            ack_wait: DEFAULT_ACK_WAIT,
            max_deliver: DEFAULT_MAX_DELIVER,
            max_ack_pending: DEFAULT_MAX_ACK_PENDING,
            batch: DEFAULT_BATCH,
        }
    }

    fn consumer_config<E: WorkRequest>(&self) -> pull::Config {
        pull::Config {
            durable_name: Some(self.durable_name.clone()),
            description: Some(format!("OLM work queue consumer of {}", E::FULL_NAME)),
            filter_subject: E::all_subjects().as_str().to_owned(),
            deliver_policy: DeliverPolicy::All,
            ack_policy: AckPolicy::Explicit,
            ack_wait: self.ack_wait,
            max_deliver: self.max_deliver,
            max_ack_pending: self.max_ack_pending,
            ..pull::Config::default()
        }
    }
}

/// A consumer of a work queue. Read it with [`WorkQueue::recv`] or as a
/// [`Stream`]. Each item is a request to handle and then acknowledge, or
/// the error of one message that could not be decoded (that message is
/// terminated so it is not delivered again; the queue goes on).
///
/// Dropping it stops the consumer; unacknowledged requests return to the
/// queue after their ack wait.
#[derive(Debug)]
pub struct WorkQueue<E> {
    items: Option<mpsc::Receiver<Result<WorkItem<E>, Error>>>,
    task: Option<JoinHandle<()>>,
}

impl<E> Drop for WorkQueue<E> {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

impl<E: WorkRequest> WorkQueue<E> {
    pub(crate) fn disabled() -> WorkQueue<E> {
        WorkQueue {
            items: None,
            task: None,
        }
    }

    pub(crate) fn start(
        jetstream: jetstream::Context,
        link: watch::Receiver<Link>,
        shared: Arc<Shared>,
        options: WorkQueueOptions,
    ) -> WorkQueue<E> {
        let (tx, rx) = mpsc::channel(options.batch.max(1));
        let task = tokio::spawn(run_consumer::<E>(jetstream, link, shared, options, tx));
        WorkQueue {
            items: Some(rx),
            task: Some(task),
        }
    }

    /// The next request. Never returns on a disabled bus.
    pub async fn recv(&mut self) -> Option<Result<WorkItem<E>, Error>> {
        self.next().await
    }
}

impl<E: WorkRequest> Stream for WorkQueue<E> {
    type Item = Result<WorkItem<E>, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.get_mut().items.as_mut() {
            Some(items) => items.poll_recv(cx),
            None => Poll::Pending,
        }
    }
}

/// One request taken from the work queue. Handle [`WorkItem::event`] in
/// [`WorkItem::span`], then call exactly one of [`WorkItem::ack`],
/// [`WorkItem::nak`] or [`WorkItem::term`]; doing nothing redelivers the
/// request after the ack wait.
#[derive(Debug)]
pub struct WorkItem<E> {
    received: Received<E>,
    message: jetstream::Message,
    consumer: String,
    delivered: i64,
}

impl<E: WorkRequest> WorkItem<E> {
    /// The request.
    pub fn event(&self) -> &E {
        &self.received.event
    }

    /// The span to handle the request in, a child of the requester's span.
    pub fn span(&self) -> &tracing::Span {
        self.received.span()
    }

    /// The trace context the requester sent (empty if none).
    pub fn parent_context(&self) -> &opentelemetry::Context {
        self.received.parent_context()
    }

    /// How many times this request has been delivered, this time included.
    pub fn delivered(&self) -> i64 {
        self.delivered
    }

    /// The request was handled: remove it from the queue.
    pub async fn ack(&self) -> Result<(), Error> {
        self.reply("ack", AckKind::Ack).await
    }

    /// The request could not be handled now: deliver it again, after
    /// `delay` if given (else at once), counting towards the maximum number
    /// of deliveries.
    pub async fn nak(&self, delay: Option<Duration>) -> Result<(), Error> {
        self.reply("nak", AckKind::Nak(delay)).await
    }

    /// Work is still going on: restart the ack wait.
    pub async fn in_progress(&self) -> Result<(), Error> {
        self.reply("progress", AckKind::Progress).await
    }

    /// The request can never be handled (for example its deadline passed):
    /// remove it without handling it.
    pub async fn term(&self) -> Result<(), Error> {
        self.reply("term", AckKind::Term).await
    }

    async fn reply(&self, action: &'static str, kind: AckKind) -> Result<(), Error> {
        self.message
            .ack_with(kind)
            .await
            .map_err(|source| Error::Ack {
                action,
                consumer: self.consumer.clone(),
                source,
            })
    }
}

/// Keeps a pull consumer running across connection losses and server
/// restarts, feeding decoded requests to `tx` until the [`WorkQueue`] is
/// dropped.
async fn run_consumer<E: WorkRequest>(
    jetstream: jetstream::Context,
    mut link: watch::Receiver<Link>,
    shared: Arc<Shared>,
    options: WorkQueueOptions,
    tx: mpsc::Sender<Result<WorkItem<E>, Error>>,
) {
    let mut backoff = Backoff::default();
    loop {
        if link
            .wait_for(|l| l.state == ConnectionState::Connected)
            .await
            .is_err()
        {
            return;
        }
        match consume::<E>(&jetstream, &shared, &options, &tx, &mut backoff).await {
            Ok(Consumed::ReceiverGone) => return,
            Ok(Consumed::StreamEnded) => {
                tracing::debug!(consumer = %options.durable_name, "pull stream ended; renewing it");
            }
            Err(err) => {
                tracing::warn!(
                    consumer = %options.durable_name,
                    error = %err,
                    "work queue consumer failed; renewing it"
                );
            }
        }
        tokio::select! {
            () = tx.closed() => return,
            () = tokio::time::sleep(backoff.next_delay()) => {}
        }
    }
}

enum Consumed {
    ReceiverGone,
    StreamEnded,
}

async fn consume<E: WorkRequest>(
    jetstream: &jetstream::Context,
    shared: &Shared,
    options: &WorkQueueOptions,
    tx: &mpsc::Sender<Result<WorkItem<E>, Error>>,
    backoff: &mut Backoff,
) -> Result<Consumed, Error> {
    let stream = streams::work_queue_stream_config();
    streams::declare_stream(jetstream, &stream).await?;
    let consumer: PullConsumer = jetstream
        .create_consumer_on_stream(options.consumer_config::<E>(), &stream.name)
        .await
        .map_err(|source| Error::CreateConsumer {
            stream: stream.name.clone(),
            consumer: options.durable_name.clone(),
            source,
        })?;
    let mut messages = consumer
        .stream()
        .max_messages_per_batch(options.batch.max(1))
        .expires(PULL_EXPIRES)
        .heartbeat(IDLE_HEARTBEAT)
        .messages()
        .await
        .map_err(|source| Error::Pull {
            consumer: options.durable_name.clone(),
            source: Box::new(source),
        })?;
    backoff.reset();
    tracing::debug!(consumer = %options.durable_name, "work queue consumer running");

    loop {
        let next = tokio::select! {
            () = tx.closed() => return Ok(Consumed::ReceiverGone),
            next = messages.next() => next,
        };
        let Some(next) = next else {
            return Ok(Consumed::StreamEnded);
        };
        let message = match next {
            Ok(message) => message,
            Err(err) if err.kind() == pull::MessagesErrorKind::MissingHeartbeat => {
                // The pull stream renews itself; this only means the server
                // was silent for a while (for example while it restarted).
                tracing::debug!(consumer = %options.durable_name, "missed heartbeats from NATS");
                continue;
            }
            Err(err) => {
                return Err(Error::Pull {
                    consumer: options.durable_name.clone(),
                    source: Box::new(err),
                });
            }
        };
        let item = work_item::<E>(message, &options.durable_name, shared).await;
        if tx.send(item).await.is_err() {
            return Ok(Consumed::ReceiverGone);
        }
    }
}

/// Decodes one delivered message. A message that cannot be decoded will not
/// decode on the next delivery either, so it is terminated.
async fn work_item<E: WorkRequest>(
    message: jetstream::Message,
    consumer: &str,
    shared: &Shared,
) -> Result<WorkItem<E>, Error> {
    let delivered = message.info().map_or(1, |info| info.delivered);
    match Received::<E>::from_message(
        message.subject.as_str(),
        message.headers.as_ref(),
        &message.payload,
    ) {
        Ok(received) => {
            shared.count_received();
            Ok(WorkItem {
                received,
                message,
                consumer: consumer.to_owned(),
                delivered,
            })
        }
        Err(err) => {
            shared.count_decode_error();
            tracing::warn!(consumer, error = %err, "terminating a work request that cannot be decoded");
            if let Err(ack_err) = message.ack_with(AckKind::Term).await {
                tracing::debug!(consumer, error = %ack_err, "cannot terminate the malformed request");
            }
            Err(err)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::BundleUnpackRequest;

    #[test]
    fn consumer_config_is_explicit_ack_on_the_request_subject() {
        let options = WorkQueueOptions::new("bundle-unpacker");
        let config = options.consumer_config::<BundleUnpackRequest>();
        assert_eq!(config.durable_name.as_deref(), Some("bundle-unpacker"));
        assert_eq!(config.ack_policy, AckPolicy::Explicit);
        assert_eq!(
            config.filter_subject,
            crate::subjects::BUNDLE_UNPACK_REQUESTS
        );
        assert_eq!(config.max_deliver, DEFAULT_MAX_DELIVER);
        assert_eq!(config.ack_wait, DEFAULT_ACK_WAIT);
    }
}
