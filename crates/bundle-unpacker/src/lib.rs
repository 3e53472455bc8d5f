//! The bundle-unpacker service: it turns the bundle images catalog-operator
//! resolves (`status.bundleLookups` of InstallPlans) into stored content,
//! pulling each image straight from its registry over the OCI distribution
//! API (no Job, no pod), extracting `manifests/` and `metadata/` within
//! limits, validating the bundle, and writing the ConfigMap whose format
//! [`olm_catalog::unpacked`] defines. Work arrives on the NATS work queue
//! (shared by every replica) and from its own InstallPlan watch, so a lost
//! message only delays it.
//!
//! [`decide`] holds the rules as pure functions over plain data; it must
//! never depend on `kube` or do I/O. [`controller`] reads the cluster, calls
//! `decide`, and does what it returns. This crate must not be a dependency
//! of any library crate.

pub mod controller;
pub mod decide;
pub mod metrics;
