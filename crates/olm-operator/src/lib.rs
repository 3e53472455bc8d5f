//! The olm-operator service: the ClusterServiceVersion lifecycle, OperatorGroup
//! membership and RBAC, copied CSVs, install Deployments and RBAC,
//! OperatorConditions and upgrade gating, and the Operator aggregate objects,
//! as upstream OLM's `olm` binary does them.
//!
//! The crate is built the way ARCHITECTURE rule 2 ("decide, then act") asks:
//!
//! - [`decide`] holds OLM's rules as pure functions: observed objects and an
//!   injected `now` in, the desired status, objects and actions out. It must
//!   never depend on `kube`, never touch a client, a clock, the network or the
//!   file system, and never be `async`; everything it needs is passed in as
//!   plain data. That is what lets the rules be tested exhaustively with YAML
//!   fixtures and no cluster.
//! - [`controller`], the service wiring (watches, server-side apply, status
//!   writes, events), reads the caches, calls `decide`, and carries out what
//!   it returns; [`metrics`] are upstream's CSV metrics plus reconcile
//!   counters. The `olm-operator` binary (`src/main.rs`) runs them.

pub mod controller;
pub mod decide;
mod error;
pub mod metrics;

pub use error::Error;
