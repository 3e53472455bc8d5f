//! The marketplace-operator service: it turns the cluster-scoped OperatorHub
//! `cluster` (`config.openshift.io/v1`) into the default CatalogSources of
//! the marketplace namespace, as upstream operator-marketplace does. It
//! creates the OperatorHub when absent, creates each enabled default
//! CatalogSource with the annotation `operatorframework.io/managed-by:
//! marketplace-operator`, puts back edits to it, deletes it when its source
//! is disabled (`spec.disableAllDefaultSources`, overridden per source by
//! `spec.sources[].disabled`), and reports each source in
//! `status.sources`. CatalogSources without the annotation are never
//! deleted, and those of other names never touched. The default
//! CatalogSources are owned by the OperatorHub (an owner reference), so
//! deleting it (uninstalling the Helm chart) garbage-collects them.
//!
//! [`decide`] holds the rules as pure functions over plain data; it must
//! never depend on `kube` or `tokio` or do I/O. [`controller`] reads the
//! cluster, calls `decide`, and does what it returns. This crate must not be
//! a dependency of any library crate, and needs no other OLM service: it
//! only writes CatalogSource objects, which catalog-operator then serves.
//! Where the cluster serves `clusteroperators.config.openshift.io`
//! (OpenShift), it also reports marketplace and the OLM Deployments of the
//! OLM namespace in ClusterOperator status.

pub mod controller;
pub mod decide;
pub mod metrics;
