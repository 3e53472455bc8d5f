//! Starts the real components OLM is tested against, on loopback, for one test
//! binary: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
//! kwok (fake nodes that run pods), a real node when asked for ([`node`]:
//! containerd, kubelet, kube-proxy), a NATS server with JetStream, an OCI
//! distribution registry, and Jaeger to read exported traces from
//! ([`jaeger`]).
//!
//! Binaries come from the cache that `cargo xtask envtest` fills (see
//! [`assets`]); nothing here downloads or builds anything. Every server runs
//! under a small guardian process that stops it when the test process exits,
//! however it exits, so a panicking or aborted test leaves nothing behind.
//!
//! [`side_by_side`] is the benches' common ground for figures of ours and
//! upstream's: rows of runs, the report and chart of `cargo xtask bench
//! --vs-upstream`, and a process's peak RSS and CPU time.
//!
//! This crate is for tests and development only. It must not depend on any
//! other crate of ours, so that every crate can use it.

pub mod assets;
pub mod audit;
mod control_plane;
pub mod crds;
mod error;
pub mod jaeger;
pub mod nats;
pub mod node;
mod pki;
mod process;
pub mod registry;
pub mod side_by_side;
pub mod synthetic_catalog;
mod testdata;
pub mod upstream_resolver;
pub mod wait;

pub use control_plane::{
    AUDIT_ENV, CRD_ESTABLISHED_TIMEOUT, ControlPlane, ControlPlaneOptions, ControlPlaneTimings,
    FAKE_NODE_TAINT, KWOK_NODE_NAME, SERVICE_ACCOUNT_TOKEN_LIFETIME, TestNamespace, control_plane,
    set_control_plane,
};
pub use crds::{install_open_crd, open_crd};
pub use error::Error;
pub use process::Supervised;
pub use testdata::testdata;
pub use wait::{eventually, olm_crds_installed, operators_crds_installed};
