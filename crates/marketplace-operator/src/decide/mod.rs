//! marketplace-operator's rules as pure functions: the default sources, the
//! OperatorHub spec and the observed CatalogSources in, the writes and
//! `status.sources` out; and the OLM Deployments in, the ClusterOperator
//! status out. Nothing here may depend on `kube` or `tokio`, touch
//! a client, a clock, the network or the file system, or be `async`.

pub mod cluster_operator;
pub mod compare;
pub mod plan;
pub mod sources;
