//! packageserver through the real kube-apiserver aggregation layer: two
//! replicas of the binary in network namespaces behind an APIService, a real
//! registry server, kubectl and kube-rs as clients. One test binary, so the
//! control plane and the deployment start once.

// Helpers of a test binary: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod auth;
mod bus;
mod harness;
mod kubectl;
mod paging;
mod service_lookup;
mod soak;
mod watch;

pub(crate) use olm_testkit::eventually;
