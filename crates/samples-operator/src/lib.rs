//! The samples-operator service: OpenShift's sample ImageStreams and
//! Templates in the `openshift` namespace, kept as the cluster-scoped
//! `samples.operator.openshift.io/v1` Config `cluster` says, as OpenShift's
//! cluster-samples-operator keeps them.
//!
//! [`decide`] holds the rules as pure functions over plain data (the
//! inventory, the registry rewrite, the management-state machine, import
//! tracking, the ClusterOperator status); it must never depend on `kube`,
//! `tokio` or do I/O. [`controller`] reads the cluster, calls `decide`, and
//! does what it returns. This crate must not be a dependency of any library
//! crate, and needs no other OLM service.

pub mod controller;
pub mod decide;
pub mod inventory_dir;
pub mod metrics;
pub mod probe;
