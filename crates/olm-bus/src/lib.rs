//! The NATS event bus of OLM: subjects, typed protobuf events, JetStream
//! streams and W3C trace context in message headers.
//!
//! Services use it to react in milliseconds instead of on their next resync:
//! catalog-operator asks bundle-unpacker for bundles through a JetStream work
//! queue, and every service announces lifecycle changes (a catalog updated, a
//! CSV or InstallPlan changing phase, a Subscription resolved) that others
//! subscribe to. Kubernetes remains the source of truth: an event is a hint
//! to reconcile the object it names, never the state itself, and losing NATS
//! (or any message) only slows convergence. So the bus never blocks a
//! service: it starts without NATS, drops events while NATS is away (see
//! [`bus`] for why dropping rather than buffering), and resumes
//! by itself.
//!
//! ```no_run
//! use olm_bus::{Bus, BusArgs, events::{self, CsvPhaseChanged, ObjectRef}};
//! use tracing::Instrument as _;
//!
//! # async fn example() -> Result<(), olm_bus::Error> {
//! let bus = Bus::connect(&BusArgs::with_url("nats://127.0.0.1:4222"), "olm-operator").await?;
//! let mut changes = bus.subscribe_all::<CsvPhaseChanged>().await?;
//!
//! let csv = ObjectRef::new("operators.coreos.com/v1alpha1", "ClusterServiceVersion", "operators", "etcd.v0.9.4")
//!     .at("3c5a9f1e-uid", "1234");
//! bus.publish(&CsvPhaseChanged {
//!     csv: Some(csv),
//!     old_phase: "Installing".into(),
//!     new_phase: "Succeeded".into(),
//!     occurred_at: Some(events::now()),
//!     ..Default::default()
//! })
//! .await?;
//!
//! while let Some(received) = changes.recv().await {
//!     let Ok(received) = received else { continue };
//!     let span = received.span().clone();
//!     async { /* enqueue a reconcile of received.event.csv */ }.instrument(span).await;
//! }
//! # Ok(())
//! # }
//! ```
//!
//! The wire contract is `proto/olm/bus/v1/events.proto`; its generated code
//! is committed in `src/gen/` and checked by `tests/codegen_fresh.rs`.
//!
//! This crate is a library shared by every service: it must not depend on
//! `kube`, on Kubernetes API types, or on any service crate. Callers turn
//! their objects into [`events::ObjectRef`]s.

mod args;
pub mod auth;
pub mod bus;
mod error;
pub mod events;
pub mod metrics;
pub mod streams;
pub mod subjects;
pub mod trace;
pub mod work_queue;

pub use args::BusArgs;
pub use bus::{
    Bus, BusStats, ConnectionState, HEADER_EVENT_TYPE, Published, Received, Subscription,
};
pub use error::Error;
pub use events::{Event, WorkRequest};
pub use work_queue::{WorkItem, WorkQueue, WorkQueueOptions};
