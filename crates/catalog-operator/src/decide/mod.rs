//! catalog-operator's rules as pure functions: an observation (the object,
//! what the caches hold, what a probe or a content check found, `now`) in,
//! a decision (the status to write, the actions to take) out. Nothing here
//! may depend on `kube`, touch a client, a clock, the network or the file
//! system, or be `async`; the controllers set no status field or condition
//! themselves. Both are held by the tidy tests in `tests/tests/boundaries.rs`.
//!
//! - [`catalog_source`] decides the serving mode and registry objects,
//!   [`catalog_source::sync`] one sync's status and next check, and
//!   [`catalog_source::pods`] the registry pods' actions.
//! - [`image_template`] fills `olm.catalogImageTemplate`.
//! - [`promotion`] holds the promotion guard's rules and verdicts.
//! - [`subscription`] decides a Subscription's status before and after
//!   resolution.
//! - [`install_plan`] holds phases, retries, GC, kinds, order and bundle
//!   lookups.

pub mod catalog_source;
pub mod image_template;
pub mod install_plan;
pub mod promotion;
pub mod subscription;
