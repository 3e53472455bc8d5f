//! Integration tests of the bus against a real `nats-server` with JetStream,
//! started on loopback by `olm-testkit`, one private server per test.
//!
//! Every wait has a deadline; where a test must observe that something does
//! *not* happen, it waits for a positive signal that comes after it instead
//! (a later message, an empty stream) rather than sleeping.

mod auth;
mod fixtures;
mod pubsub;
mod resilience;
mod streams;
mod tracing_context;
mod work_queue;
