//! Shared controller plumbing for every OLM service: command-line groups, the
//! Kubernetes client, the controller loop, telemetry (tracing +
//! OpenTelemetry), Prometheus metrics, the admin server (`/metrics`,
//! `/healthz`, `/readyz`), leader election on a `Lease`, server-side-apply
//! helpers, Kubernetes Events, graceful shutdown, and dialling Services by
//! ClusterIP from outside the cluster network.
//!
//! This is a library crate: it may depend on `olm-api` but must never depend on
//! a service crate (olm-operator, catalog-operator, packageserver, ...). Each
//! service flattens the argument groups from [`config`] into its single clap
//! struct and wires the rest together in `main`.

pub mod admin;
pub mod apply;
pub mod cache;
pub mod cluster_operator;
pub mod config;
pub mod controller;
pub mod discovery;
pub mod error;
pub mod events;
pub mod impersonation;
pub mod leader;
pub mod metrics;
pub mod retry;
pub mod service_address;
pub mod shutdown;
pub mod telemetry;

pub use error::{Error, Result};
