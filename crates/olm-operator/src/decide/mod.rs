//! OLM's rules for the objects olm-operator owns, as pure functions: observed
//! objects and an injected `now` in, desired status, objects and actions out.
//!
//! Nothing under `decide` may depend on `kube`, read a clock, or do I/O; the
//! service wiring reads the caches, calls these functions, and applies what they
//! return. Its failures are its own [`Error`], which names no client; the
//! purity test in `tests/tests/boundaries.rs` holds every `decide` folder to
//! this. Upstream behaviour is followed literally (phase, reason and message
//! strings are byte-for-byte those of operator-lifecycle-manager v0.46); where
//! this code deliberately differs, the item's documentation says so and why.
//!
//! - [`csv_phase`]: the CSV state machine (`transitionCSVState`).
//! - [`csv_status`]: `SetPhase` bookkeeping (history, timestamps, events).
//! - [`requirements`]: `status.requirementStatus` from observed facts.
//! - [`operator_group`]: target namespaces, membership annotations, install
//!   modes, provided-API intersection between groups.
//! - [`api_surface`]: the APIs a CSV provides and requires, their labels and
//!   the `olm.providedAPIs` format.
//! - [`replacement`]: who replaces whom among the CSVs of a namespace.
//! - [`copied_csv`]: copies of a CSV in its target namespaces.
//! - [`deployment`]: the install Deployments, Subscription `config` overrides
//!   and the install check.
//! - [`rbac`]: Roles, ClusterRoles and bindings from CSV permissions.
//! - [`group_rbac`]: OperatorGroup and per-API ClusterRoles, RBAC in target
//!   namespaces.
//! - [`operator_condition`]: the OperatorCondition of a CSV, its RBAC and
//!   status, and upgrade gating through it.
//! - [`operator`]: the Operator aggregate object and adoption.
//! - [`hash`]: the content hashes used in labels and annotations.
//! - [`certs`]: serving certificates, Services, Secrets and RBAC of the
//!   Deployments behind owned APIServices and webhooks.
//! - [`api_service`]: owned APIServices, their adoption and checks.
//! - [`webhook`]: webhook configurations and conversion webhooks.
//! - [`subscription_config`]: which Subscription's `config` applies to a
//!   CSV, and what olm-operator keeps of Subscriptions.
//! - [`scoped`]: OperatorGroup `serviceAccountName` (scoped installs) and the
//!   group conditions and namespace labels upstream keeps.

pub mod api_service;
pub mod api_surface;
pub mod certs;
pub mod copied_csv;
pub mod csv_phase;
pub mod csv_status;
pub mod deployment;
mod error;
pub mod group_rbac;
pub mod hash;
mod label_selector;
pub mod operator;
pub mod operator_condition;
pub mod operator_group;
pub mod rbac;
pub mod replacement;
pub mod requirements;
pub mod scoped;
pub mod subscription_config;
pub mod webhook;

pub use error::Error;
