//! Tests of the parts of `olm-runtime` that talk to Kubernetes, against a real
//! kube-apiserver started by `olm-testkit` (one per test binary, so they share
//! this one binary).

mod apply;
mod config;
mod events;
mod leader_election;
mod secure_metrics;
mod service_address;

use std::{future::Future, time::Duration};

/// Installs a log subscriber that the test harness captures, once.
pub(crate) fn init_logs() {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "olm_runtime=debug".into()),
        )
        .try_init();
}

/// Awaits `future`, failing the test with `what` if it takes longer than
/// `deadline`.
pub(crate) async fn within<T>(
    deadline: Duration,
    what: &str,
    future: impl Future<Output = T>,
) -> T {
    tokio::time::timeout(deadline, future)
        .await
        .unwrap_or_else(|_| panic!("{what}: not done within {deadline:?}"))
}
