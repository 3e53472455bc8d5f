//! The example operator's binary: reads its settings from the environment,
//! logs JSON lines to stderr, serves probes (on port 8081) and runs the
//! Greeting controller until SIGTERM or Ctrl-C.

use anyhow::Context as _;
use example_operator::{
    Readiness, WatchNamespaces, health,
    settings::{OPERATOR_VERSION_ENV, PROBE_ADDRESS_ENV, operator_version, probe_address},
};
use futures::FutureExt;
use tokio::signal::unix::{SignalKind, signal};
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .json()
        .with_writer(std::io::stderr)
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .init();

    let namespaces = WatchNamespaces::from_env();
    let version = operator_version(std::env::var(OPERATOR_VERSION_ENV).ok().as_deref());
    let client = kube::Client::try_default()
        .await
        .context("no Kubernetes client configuration (in-cluster or kubeconfig)")?;

    let mut terminate = signal(SignalKind::terminate()).context("cannot watch for SIGTERM")?;
    let shutdown = async move {
        tokio::select! {
            _ = terminate.recv() => tracing::info!("SIGTERM received; shutting down"),
            _ = tokio::signal::ctrl_c() => tracing::info!("interrupted; shutting down"),
        }
    }
    .boxed()
    .shared();

    let readiness = Readiness::default();
    let address = probe_address(std::env::var(PROBE_ADDRESS_ENV).ok().as_deref());
    let listener = tokio::net::TcpListener::bind(&address)
        .await
        .with_context(|| format!("cannot serve probes on {address}"))?;
    let probes = tokio::spawn(health::serve(listener, readiness.clone(), shutdown.clone()));

    example_operator::run(client, &namespaces, &version, readiness, shutdown).await;
    probes
        .await
        .context("the probe server panicked")?
        .context("the probe server failed")?;
    tracing::info!("stopped");
    Ok(())
}
