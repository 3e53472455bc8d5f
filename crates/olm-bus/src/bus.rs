//! The bus: one NATS connection per service that publishes typed events,
//! delivers them to typed subscriptions, and keeps the JetStream streams
//! declared.
//!
//! # When NATS is away
//!
//! [`Bus::connect`] never waits for NATS: the client connects (and
//! reconnects) in the background, forever, with a capped backoff.
//! Subscriptions made while NATS is away take effect when it comes back.
//!
//! Publishing while NATS is away **drops** the event, counts it
//! ([`BusStats::dropped`]) and logs once per outage at `warn` (then at
//! `debug`). Events are not buffered for later because Kubernetes is the
//! source of truth: every consumer also watches the API server and resyncs,
//! so a lost event only delays a reaction, while a buffer would replay stale
//! hints after the outage, hold memory while NATS is away, and still lose
//! everything on a restart. A few events handed to the client in the instant
//! before it notices a broken connection may still be sent after the
//! reconnect; that is harmless for the same reason.

use std::{
    marker::PhantomData,
    pin::Pin,
    str::FromStr,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    task::{Context, Poll},
    time::Duration,
};

use async_nats::{Client, ConnectOptions, HeaderMap, ServerAddr, connection::State, jetstream};
use futures::{Stream, StreamExt as _};
use opentelemetry::trace::TraceContextExt as _;
use tokio::{sync::watch, task::JoinHandle};
use tracing::Instrument as _;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use crate::{
    BusArgs, Error,
    events::{self, Delivery, Event, WorkRequest},
    streams,
    subjects::{Subject, SubjectFilter},
    trace,
    work_queue::{WorkQueue, WorkQueueOptions},
};

/// Header naming the protobuf type of the payload, for example
/// `olm.bus.v1.CsvPhaseChanged`, so that readers of the audit stream can
/// decode any message.
pub const HEADER_EVENT_TYPE: &str = "Olm-Event-Type";

/// Header JetStream deduplicates messages by.
pub const HEADER_MESSAGE_ID: &str = "Nats-Msg-Id";

/// Header with the content type of the payload.
pub const HEADER_CONTENT_TYPE: &str = "Content-Type";

/// Content type of every payload.
pub const CONTENT_TYPE_PROTOBUF: &str = "application/protobuf";

/// Longest wait between two reconnection attempts. Short, because a service
/// that reconnects late only reacts late; the server is on the cluster
/// network and attempts are cheap.
pub const RECONNECT_DELAY_MAX: Duration = Duration::from_secs(2);

/// Deadline of JetStream API requests and publish acknowledgements.
pub const JETSTREAM_TIMEOUT: Duration = Duration::from_secs(5);

/// Deadline for handing one message to the client. Only reached when the
/// client's outgoing buffer is full, that is when the connection is stalled.
pub const PUBLISH_TIMEOUT: Duration = Duration::from_secs(2);

/// First delay before retrying a failed stream declaration or consumer.
pub const RETRY_DELAY_MIN: Duration = Duration::from_millis(100);

/// Longest delay between retries of a failed stream declaration or consumer.
pub const RETRY_DELAY_MAX: Duration = Duration::from_secs(10);

/// Whether the bus can reach NATS right now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectionState {
    /// No `--nats-url`: the bus does nothing.
    Disabled,
    /// Not connected yet since start-up.
    Pending,
    /// Connected.
    Connected,
    /// Connected before, reconnecting now.
    Disconnected,
}

/// What became of a published event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Published {
    /// Handed to the NATS connection (core NATS, fire and forget).
    Sent,
    /// Stored by JetStream (work requests).
    Stored {
        /// Sequence of the message in its stream.
        sequence: u64,
        /// Whether JetStream recognised the `Nats-Msg-Id` of an already
        /// stored message and kept only the first.
        duplicate: bool,
    },
    /// The bus is disabled; nothing was sent.
    Disabled,
    /// NATS is not connected; the event was dropped and counted.
    Dropped,
}

/// Counters of what the bus did since it was created, for metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BusStats {
    /// Events sent or stored.
    pub published: u64,
    /// Events and work requests received and decoded.
    pub received: u64,
    /// Events dropped because NATS was not connected.
    pub dropped: u64,
    /// Publishes that failed or timed out.
    pub publish_errors: u64,
    /// Received messages that could not be decoded.
    pub decode_errors: u64,
}

/// The connection state plus how many times the bus has connected, so that
/// a waiter can tell a new connection from the one it already handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Link {
    pub(crate) state: ConnectionState,
    pub(crate) connects: u64,
}

/// State shared by the bus, its subscriptions and its background tasks.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    published: AtomicU64,
    received: AtomicU64,
    dropped: AtomicU64,
    publish_errors: AtomicU64,
    decode_errors: AtomicU64,
    /// Whether the current outage has been logged at `warn` already.
    outage_logged: AtomicBool,
}

impl Shared {
    pub(crate) fn count_decode_error(&self) {
        self.decode_errors.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_received(&self) {
        self.received.fetch_add(1, Ordering::Relaxed);
    }
}

/// A service's connection to the NATS bus. Cheap to clone; clones share the
/// connection. See the [module documentation](self) for what happens while
/// NATS is away.
#[derive(Clone, Debug)]
pub struct Bus {
    inner: Option<Arc<Inner>>,
}

#[derive(Debug)]
struct Inner {
    client: Client,
    jetstream: jetstream::Context,
    link: watch::Receiver<Link>,
    declared: watch::Receiver<u64>,
    shared: Arc<Shared>,
    declarer: JoinHandle<()>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.declarer.abort();
    }
}

impl Bus {
    /// A bus that publishes nothing and whose subscriptions never yield.
    pub fn disabled() -> Bus {
        Bus { inner: None }
    }

    /// Creates the connection to NATS described by `args`, or a disabled bus
    /// when `args` has no URL. `service` names the connection on the server
    /// (`nats server report connections`).
    ///
    /// Returns at once, whether or not NATS is reachable: the client
    /// connects in the background and reconnects forever. Fails only on
    /// invalid settings (a URL that does not parse, an unreadable
    /// credentials file). Must be called within a Tokio runtime.
    pub async fn connect(args: &BusArgs, service: &str) -> Result<Bus, Error> {
        let Some(urls) = args.nats_url.as_deref() else {
            tracing::info!("NATS bus disabled (no --nats-url); relying on Kubernetes watches");
            return Ok(Bus::disabled());
        };
        let addrs = parse_urls(urls)?;

        let (link_tx, link) = watch::channel(Link {
            state: ConnectionState::Pending,
            connects: 0,
        });
        let shared = Arc::new(Shared::default());
        let mut options = ConnectOptions::new()
            .name(service)
            .retry_on_initial_connect()
            .max_reconnects(Option::<usize>::None)
            .reconnect_delay_callback(reconnect_delay)
            .request_timeout(Some(JETSTREAM_TIMEOUT))
            .event_callback({
                let shared = shared.clone();
                let link_tx = Arc::new(link_tx);
                move |event| {
                    on_connection_event(&link_tx, &shared, &event);
                    std::future::ready(())
                }
            });
        if let Some(path) = &args.nats_credentials {
            options =
                options
                    .credentials_file(path)
                    .await
                    .map_err(|source| Error::Credentials {
                        path: path.clone(),
                        source,
                    })?;
        }
        if let Some(path) = &args.nats_nkey_file {
            let seed = std::fs::read_to_string(path).map_err(|source| Error::NkeyFile {
                path: path.clone(),
                source,
            })?;
            // Checked here so that a wrong file is a clear error at start,
            // not an endless reconnect loop.
            crate::auth::public_key_of(&seed)?;
            options = options.nkey(seed.trim().to_owned());
        }
        if let Some(ca_file) = &args.nats_ca_file {
            options = options
                .add_root_certificates(ca_file.clone())
                .require_tls(true);
        }

        let client = async_nats::connect_with_options(addrs, options)
            .await
            .map_err(Error::Connect)?;
        let jetstream = jetstream::ContextBuilder::new()
            .timeout(JETSTREAM_TIMEOUT)
            .build(client.clone());

        let (declared_tx, declared) = watch::channel(0);
        let declarer = tokio::spawn(keep_streams_declared(
            jetstream.clone(),
            link.clone(),
            declared_tx,
        ));
        tracing::info!(url = urls, "NATS bus enabled; connecting in the background");
        Ok(Bus {
            inner: Some(Arc::new(Inner {
                client,
                jetstream,
                link,
                declared,
                shared,
                declarer,
            })),
        })
    }

    /// Whether the bus has a NATS URL.
    pub fn is_enabled(&self) -> bool {
        self.inner.is_some()
    }

    /// Whether the bus can reach NATS right now.
    pub fn connection_state(&self) -> ConnectionState {
        match &self.inner {
            None => ConnectionState::Disabled,
            Some(inner) => inner.link.borrow().state,
        }
    }

    /// Waits until the bus is connected, at most `timeout`. For tests and
    /// readiness reporting; publishing never needs it.
    pub async fn wait_connected(&self, timeout: Duration) -> Result<(), Error> {
        let inner = self.inner.as_ref().ok_or(Error::Disabled)?;
        let mut link = inner.link.clone();
        wait_within(timeout, "connecting to NATS", async {
            let _ = link
                .wait_for(|link| link.state == ConnectionState::Connected)
                .await;
        })
        .await
    }

    /// Waits until the JetStream streams are declared on the current
    /// connection, at most `timeout`.
    pub async fn wait_streams_declared(&self, timeout: Duration) -> Result<(), Error> {
        let inner = self.inner.as_ref().ok_or(Error::Disabled)?;
        let mut link = inner.link.clone();
        let mut declared = inner.declared.clone();
        wait_within(timeout, "declaring JetStream streams", async {
            let Ok(connects) = link
                .wait_for(|link| link.state == ConnectionState::Connected)
                .await
                .map(|link| link.connects)
            else {
                return;
            };
            let _ = declared.wait_for(|declared| *declared >= connects).await;
        })
        .await
    }

    /// Counters of what the bus did, for metrics.
    pub fn stats(&self) -> BusStats {
        let Some(inner) = &self.inner else {
            return BusStats::default();
        };
        let shared = &inner.shared;
        BusStats {
            published: shared.published.load(Ordering::Relaxed),
            received: shared.received.load(Ordering::Relaxed),
            dropped: shared.dropped.load(Ordering::Relaxed),
            publish_errors: shared.publish_errors.load(Ordering::Relaxed),
            decode_errors: shared.decode_errors.load(Ordering::Relaxed),
        }
    }

    /// The JetStream context of the connection, for operations this crate
    /// does not wrap (for example reading the audit stream); `None` when the
    /// bus is disabled.
    pub fn jetstream(&self) -> Option<&jetstream::Context> {
        self.inner.as_ref().map(|inner| &inner.jetstream)
    }

    /// Publishes an event on its subject.
    ///
    /// Lifecycle events go out with core NATS ([`Published::Sent`]); work
    /// requests are stored by JetStream and acknowledged
    /// ([`Published::Stored`]). Either way the message carries the event
    /// type, a `Nats-Msg-Id` for deduplication when the event has one, and
    /// the W3C trace context of the current span.
    ///
    /// A disabled bus returns [`Published::Disabled`] and a disconnected one
    /// [`Published::Dropped`]. Errors are for the caller to log: the change
    /// is in Kubernetes already, so a lost event only slows convergence.
    pub async fn publish<E: Event>(&self, event: &E) -> Result<Published, Error> {
        let subject = event.subject()?;
        let payload = events::encode(event)?;
        let Some(inner) = &self.inner else {
            tracing::debug!(%subject, event = E::FULL_NAME, "NATS bus disabled; not publishing");
            return Ok(Published::Disabled);
        };
        let span = tracing::info_span!(
            "olm.bus.publish",
            otel.kind = "producer",
            messaging.system = "nats",
            messaging.destination.name = %subject,
            olm.event = E::FULL_NAME,
        );
        inner
            .publish(event, subject, payload)
            .instrument(span)
            .await
    }

    /// Subscribes to events of type `E` on the subjects `filter` matches
    /// (build it with [`crate::subjects`], or use [`Bus::subscribe_all`]).
    ///
    /// The subscription lasts while NATS is away and delivers again when it
    /// returns; events published meanwhile are lost, so a consumer
    /// reconciles from Kubernetes as it would anyway.
    pub async fn subscribe<E: Event>(
        &self,
        filter: SubjectFilter,
    ) -> Result<Subscription<E>, Error> {
        self.subscribe_inner(filter, None).await
    }

    /// Subscribes to every event of type `E`.
    pub async fn subscribe_all<E: Event>(&self) -> Result<Subscription<E>, Error> {
        self.subscribe(E::all_subjects()).await
    }

    /// Like [`Bus::subscribe`], but each event goes to one member of
    /// `queue_group` only: for replicas that share the handling of events.
    pub async fn queue_subscribe<E: Event>(
        &self,
        filter: SubjectFilter,
        queue_group: &str,
    ) -> Result<Subscription<E>, Error> {
        self.subscribe_inner(filter, Some(queue_group)).await
    }

    async fn subscribe_inner<E: Event>(
        &self,
        filter: SubjectFilter,
        queue_group: Option<&str>,
    ) -> Result<Subscription<E>, Error> {
        let Some(inner) = &self.inner else {
            return Ok(Subscription::disabled());
        };
        let subject = filter.as_str().to_owned();
        let subscribed = match queue_group {
            Some(group) => {
                inner
                    .client
                    .queue_subscribe(subject.clone(), group.to_owned())
                    .await
            }
            None => inner.client.subscribe(subject.clone()).await,
        };
        let subscriber = subscribed.map_err(|source| Error::Subscribe { subject, source })?;
        Ok(Subscription {
            subscriber: Some(subscriber),
            shared: Some(inner.shared.clone()),
            event: PhantomData,
        })
    }

    /// A consumer of the work queue of `E` (bundle unpack requests), shared
    /// with every other consumer created with the same
    /// [`WorkQueueOptions::durable_name`]: each request goes to one of them,
    /// and returns to the queue when it is not acknowledged in time.
    ///
    /// The consumer (re)creates itself in the background when NATS comes
    /// and goes; on a disabled bus it never yields.
    pub fn work_queue<E: WorkRequest>(&self, options: WorkQueueOptions) -> WorkQueue<E> {
        match &self.inner {
            None => WorkQueue::disabled(),
            Some(inner) => WorkQueue::start(
                inner.jetstream.clone(),
                inner.link.clone(),
                inner.shared.clone(),
                options,
            ),
        }
    }

    /// Declares the JetStream streams now and reports what it did. The bus
    /// already does this on every connection; this is for tools and tests.
    pub async fn declare_streams(&self) -> Result<Vec<(String, streams::Declared)>, Error> {
        let inner = self.inner.as_ref().ok_or(Error::Disabled)?;
        streams::declare_streams(&inner.jetstream).await
    }

    /// Waits until every message handed to the client so far is written to
    /// the connection, at most `timeout`.
    pub async fn flush(&self, timeout: Duration) -> Result<(), Error> {
        let Some(inner) = &self.inner else {
            return Ok(());
        };
        wait_within(timeout, "flushing the NATS connection", async {
            let _ = inner.client.flush().await;
        })
        .await
    }
}

impl Inner {
    async fn publish<E: Event>(
        &self,
        event: &E,
        subject: Subject,
        payload: bytes::Bytes,
    ) -> Result<Published, Error> {
        let shared = &self.shared;
        if self.client.connection_state() != State::Connected {
            shared.dropped.fetch_add(1, Ordering::Relaxed);
            if shared.outage_logged.swap(true, Ordering::Relaxed) {
                tracing::debug!(%subject, "NATS not connected; dropping event");
            } else {
                tracing::warn!(
                    %subject,
                    "NATS not connected; dropping events until it is back \
                     (Kubernetes watches still deliver every change)"
                );
            }
            return Ok(Published::Dropped);
        }

        let mut headers = HeaderMap::new();
        trace::set_header(&mut headers, HEADER_EVENT_TYPE, E::FULL_NAME);
        trace::set_header(&mut headers, HEADER_CONTENT_TYPE, CONTENT_TYPE_PROTOBUF);
        if let Some(id) = event.message_id() {
            trace::set_header(&mut headers, HEADER_MESSAGE_ID, &id);
        }
        trace::inject_current_context(&mut headers);

        let result = match E::DELIVERY {
            Delivery::Broadcast => self.publish_core(subject, headers, payload).await,
            Delivery::WorkQueue => self.publish_stored(subject, headers, payload).await,
        };
        match &result {
            Ok(_) => shared.published.fetch_add(1, Ordering::Relaxed),
            Err(_) => shared.publish_errors.fetch_add(1, Ordering::Relaxed),
        };
        result
    }

    async fn publish_core(
        &self,
        subject: Subject,
        headers: HeaderMap,
        payload: bytes::Bytes,
    ) -> Result<Published, Error> {
        let send =
            self.client
                .publish_with_headers(String::from(subject.clone()), headers, payload);
        match tokio::time::timeout(PUBLISH_TIMEOUT, send).await {
            Ok(Ok(())) => Ok(Published::Sent),
            Ok(Err(source)) => Err(Error::Publish {
                subject: subject.into(),
                source,
            }),
            Err(_) => Err(Error::Timeout {
                operation: "publish",
                timeout: PUBLISH_TIMEOUT,
            }),
        }
    }

    async fn publish_stored(
        &self,
        subject: Subject,
        headers: HeaderMap,
        payload: bytes::Bytes,
    ) -> Result<Published, Error> {
        let stored = async {
            self.jetstream
                .publish_with_headers(String::from(subject.clone()), headers, payload)
                .await?
                .await
        };
        match tokio::time::timeout(JETSTREAM_TIMEOUT, stored).await {
            Ok(Ok(ack)) => Ok(Published::Stored {
                sequence: ack.sequence,
                duplicate: ack.duplicate,
            }),
            Ok(Err(source)) => Err(Error::JetStreamPublish {
                subject: subject.into(),
                source,
            }),
            Err(_) => Err(Error::Timeout {
                operation: "JetStream publish",
                timeout: JETSTREAM_TIMEOUT,
            }),
        }
    }
}

/// A typed subscription. Read it with [`Subscription::recv`] or as a
/// [`Stream`]. Each item is an event, or the error of one message that could
/// not be decoded (the subscription goes on).
#[derive(Debug)]
pub struct Subscription<E> {
    subscriber: Option<async_nats::Subscriber>,
    shared: Option<Arc<Shared>>,
    event: PhantomData<fn() -> E>,
}

impl<E: Event> Subscription<E> {
    fn disabled() -> Subscription<E> {
        Subscription {
            subscriber: None,
            shared: None,
            event: PhantomData,
        }
    }

    /// The next event. Never returns on a disabled bus, so that a
    /// `select!` arm on it is simply inert.
    pub async fn recv(&mut self) -> Option<Result<Received<E>, Error>> {
        self.next().await
    }
}

impl<E: Event> Stream for Subscription<E> {
    type Item = Result<Received<E>, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let Some(subscriber) = this.subscriber.as_mut() else {
            return Poll::Pending;
        };
        subscriber.poll_next_unpin(cx).map(|message| {
            message.map(|message| {
                let received = Received::from_message(
                    message.subject.as_str(),
                    message.headers.as_ref(),
                    &message.payload,
                );
                if let Some(shared) = &this.shared {
                    if received.is_ok() {
                        shared.count_received();
                    } else {
                        shared.count_decode_error();
                    }
                }
                received
            })
        })
    }
}

/// One received event with the trace context it came with.
#[derive(Debug)]
pub struct Received<E> {
    /// The event.
    pub event: E,
    /// The subject it arrived on.
    pub subject: String,
    /// Its `Nats-Msg-Id`, if the publisher set one.
    pub message_id: Option<String>,
    span: tracing::Span,
    parent: opentelemetry::Context,
}

impl<E: Event> Received<E> {
    /// Decodes a message, checking its type header, and opens the span its
    /// handler runs in.
    pub(crate) fn from_message(
        subject: &str,
        headers: Option<&HeaderMap>,
        payload: &[u8],
    ) -> Result<Received<E>, Error> {
        if let Some(actual) = headers.and_then(|h| trace::get_header(h, HEADER_EVENT_TYPE))
            && actual != E::FULL_NAME
        {
            return Err(Error::UnexpectedEventType {
                expected: E::FULL_NAME,
                actual: actual.chars().take(128).collect(),
            });
        }
        let event = events::decode::<E>(payload)?;
        let parent = trace::extract_context(headers);
        let span = tracing::info_span!(
            parent: None,
            "olm.bus.receive",
            otel.kind = "consumer",
            messaging.system = "nats",
            messaging.destination.name = subject,
            olm.event = E::FULL_NAME,
        );
        if parent.span().span_context().is_valid() {
            // Fails only without an OpenTelemetry layer, where there is no
            // trace to join anyway.
            let _ = span.set_parent(parent.clone());
        }
        let message_id = headers
            .and_then(|h| trace::get_header(h, HEADER_MESSAGE_ID))
            .map(str::to_owned);
        Ok(Received {
            event,
            subject: subject.to_owned(),
            message_id,
            span,
            parent,
        })
    }

    /// The span to handle the event in: a child of the publisher's span when
    /// the message carried a trace context. Use it with
    /// `handler(event).instrument(received.span().clone())`.
    pub fn span(&self) -> &tracing::Span {
        &self.span
    }

    /// The trace context the publisher sent (empty if none).
    pub fn parent_context(&self) -> &opentelemetry::Context {
        &self.parent
    }

    /// The event, dropping the trace context.
    pub fn into_event(self) -> E {
        self.event
    }
}

fn parse_urls(urls: &str) -> Result<Vec<ServerAddr>, Error> {
    urls.split(',')
        .map(str::trim)
        .filter(|url| !url.is_empty())
        .map(|url| {
            ServerAddr::from_str(url).map_err(|source| Error::InvalidUrl {
                url: url.to_owned(),
                source,
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .and_then(|addrs| {
            if addrs.is_empty() {
                Err(Error::InvalidUrl {
                    url: urls.to_owned(),
                    source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "no URL given"),
                })
            } else {
                Ok(addrs)
            }
        })
}

fn reconnect_delay(attempts: usize) -> Duration {
    Backoff::delay(attempts, Duration::from_millis(50), RECONNECT_DELAY_MAX)
}

fn on_connection_event(link: &watch::Sender<Link>, shared: &Shared, event: &async_nats::Event) {
    match event {
        async_nats::Event::Connected => {
            shared.outage_logged.store(false, Ordering::Relaxed);
            link.send_modify(|link| {
                link.state = ConnectionState::Connected;
                link.connects += 1;
            });
            tracing::info!("connected to NATS");
        }
        async_nats::Event::Disconnected | async_nats::Event::Closed => {
            link.send_modify(|link| link.state = ConnectionState::Disconnected);
            tracing::warn!("lost the connection to NATS; reconnecting in the background");
        }
        other => tracing::debug!(event = %other, "NATS connection event"),
    }
}

/// Declares the streams on every new connection, retrying with a capped
/// backoff while the connection lasts.
async fn keep_streams_declared(
    jetstream: jetstream::Context,
    mut link: watch::Receiver<Link>,
    declared: watch::Sender<u64>,
) {
    let mut handled = 0;
    loop {
        let Ok(connects) = link
            .wait_for(|l| l.state == ConnectionState::Connected && l.connects > handled)
            .await
            .map(|l| l.connects)
        else {
            return;
        };
        let mut backoff = Backoff::default();
        loop {
            match streams::declare_streams(&jetstream).await {
                Ok(_) => {
                    declared.send_replace(connects);
                    break;
                }
                Err(err) => {
                    let delay = backoff.next_delay();
                    tracing::warn!(
                        error = %err,
                        retry_in = ?delay,
                        "cannot declare the JetStream streams; work requests are refused until they exist"
                    );
                    tokio::time::sleep(delay).await;
                    if link.borrow().state != ConnectionState::Connected {
                        break;
                    }
                }
            }
        }
        handled = connects;
    }
}

/// Runs `wait` with a deadline.
pub(crate) async fn wait_within(
    timeout: Duration,
    operation: &'static str,
    wait: impl Future<Output = ()>,
) -> Result<(), Error> {
    tokio::time::timeout(timeout, wait)
        .await
        .map_err(|_| Error::Timeout { operation, timeout })
}

/// Capped exponential backoff without jitter: retries of one process are
/// rare and independent of other processes' retries.
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    attempts: usize,
}

impl Backoff {
    pub(crate) fn next_delay(&mut self) -> Duration {
        let delay = Backoff::delay(self.attempts, RETRY_DELAY_MIN, RETRY_DELAY_MAX);
        self.attempts = self.attempts.saturating_add(1);
        delay
    }

    pub(crate) fn reset(&mut self) {
        self.attempts = 0;
    }

    fn delay(attempts: usize, min: Duration, max: Duration) -> Duration {
        let factor = 1u32 << attempts.min(16);
        min.saturating_mul(factor).min(max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_is_capped() {
        let mut backoff = Backoff::default();
        let delays: Vec<_> = (0..40).map(|_| backoff.next_delay()).collect();
        assert_eq!(delays[0], RETRY_DELAY_MIN);
        assert!(delays.windows(2).all(|pair| pair[0] <= pair[1]));
        assert_eq!(delays[39], RETRY_DELAY_MAX);
        backoff.reset();
        assert_eq!(backoff.next_delay(), RETRY_DELAY_MIN);
        assert_eq!(reconnect_delay(usize::MAX), RECONNECT_DELAY_MAX);
    }

    #[test]
    fn urls_are_validated() {
        assert_eq!(
            parse_urls("nats://a:4222, nats://b:4222")
                .expect("parses")
                .len(),
            2
        );
        assert!(parse_urls("").is_err());
        assert!(parse_urls(" , ").is_err());
        assert!(parse_urls("nats://[::1").is_err());
    }

    #[tokio::test]
    async fn a_disabled_bus_publishes_nothing_and_never_yields() {
        use crate::events::{CsvPhaseChanged, ObjectRef};
        let bus = Bus::disabled();
        assert!(!bus.is_enabled());
        assert_eq!(bus.connection_state(), ConnectionState::Disabled);
        let event = CsvPhaseChanged {
            csv: Some(ObjectRef::new("v1", "ClusterServiceVersion", "ns", "csv")),
            ..Default::default()
        };
        assert_eq!(
            bus.publish(&event).await.expect("publishes"),
            Published::Disabled
        );
        // Invalid events are still refused, so bugs show without NATS.
        assert!(bus.publish(&CsvPhaseChanged::default()).await.is_err());

        let mut subscription = bus
            .subscribe_all::<CsvPhaseChanged>()
            .await
            .expect("subscribes");
        let next = tokio::time::timeout(Duration::from_millis(50), subscription.recv()).await;
        assert!(next.is_err(), "a disabled subscription yielded");
        assert!(matches!(
            bus.wait_connected(Duration::from_millis(1)).await,
            Err(Error::Disabled)
        ));
        assert_eq!(bus.stats(), BusStats::default());
    }

    #[tokio::test]
    async fn connect_without_a_url_gives_a_disabled_bus() {
        let bus = Bus::connect(&BusArgs::default(), "test")
            .await
            .expect("connects");
        assert!(!bus.is_enabled());
    }

    #[test]
    fn received_messages_of_another_type_are_refused() {
        use crate::events::{CatalogUpdated, CsvPhaseChanged};
        let mut headers = HeaderMap::new();
        trace::set_header(&mut headers, HEADER_EVENT_TYPE, "olm.bus.v1.CatalogUpdated");
        let payload = events::encode(&CatalogUpdated::default()).expect("encodes");
        let err = Received::<CsvPhaseChanged>::from_message("s", Some(&headers), &payload)
            .expect_err("wrong type");
        assert!(matches!(err, Error::UnexpectedEventType { .. }), "{err:?}");
        // Without the header the payload is decoded as asked.
        assert!(Received::<CatalogUpdated>::from_message("s", None, &payload).is_ok());
        let err = Received::<CsvPhaseChanged>::from_message("s", None, &[0xff, 0xff])
            .expect_err("garbage");
        assert_eq!(err.category(), "decode");
    }
}
