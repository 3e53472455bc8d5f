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

use std::{future::Future, time::Duration};

/// Polls `check` until it returns `Ok`, failing the test with the last
/// error after `deadline`.
pub(crate) async fn eventually<T, F, Fut>(what: &str, deadline: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let started = tokio::time::Instant::now();
    let mut last = String::from("not checked yet");
    while started.elapsed() < deadline {
        match check().await {
            Ok(value) => return value,
            Err(error) => last = error,
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what}: not within {deadline:?}; last: {last}");
}
