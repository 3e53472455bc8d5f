//! The catalog-operator service: CatalogSources (registry pods, connections,
//! polling for new catalog images), Subscriptions (resolution of a
//! namespace's subscriptions together) and InstallPlans (step execution), as
//! upstream OLM's `catalog` binary does them.
//!
//! [`decide`] holds the rules as pure functions over plain data; it must
//! never depend on `kube` or do I/O. The service wiring reads the cluster,
//! calls `decide`, and applies what it returns. This crate must not be a
//! dependency of any library crate.

pub mod controller;
pub mod decide;
mod error;
pub mod metrics;

pub use error::Error;
