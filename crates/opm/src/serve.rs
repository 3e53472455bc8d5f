//! `opm serve`: the registry gRPC API over a catalog directory, with
//! upstream's flags. The index is built at start (no pre-built cache is
//! needed); `--cache-dir` holds the index's spill file and `--cache-only`
//! builds the index and exits.

use std::process::ExitCode;

use anyhow::Context as _;
use olm_registry::{CatalogIndex, IndexOptions, RegistryServer};

use crate::cli::ServeArgs;

/// The standard OpenTelemetry variable naming the OTLP/gRPC endpoint spans
/// go to; unset, `opm serve` exports nothing (upstream's `opm` has no
/// tracing flags, so none are added).
const OTLP_ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";

/// The standard variable naming the service in exported spans (`opm` when
/// unset).
const SERVICE_NAME_ENV: &str = "OTEL_SERVICE_NAME";

pub(crate) async fn run(args: &ServeArgs, debug: bool) -> anyhow::Result<ExitCode> {
    let provider = match std::env::var(OTLP_ENDPOINT_ENV) {
        Ok(endpoint) if !endpoint.is_empty() => {
            let name = std::env::var(SERVICE_NAME_ENV)
                .ok()
                .filter(|name| !name.is_empty())
                .unwrap_or_else(|| env!("CARGO_PKG_NAME").to_owned());
            Some(
                olm_trace::export::otlp_provider(&endpoint, &name, env!("CARGO_PKG_VERSION"))
                    .with_context(|| format!("{OTLP_ENDPOINT_ENV}={endpoint}"))?,
            )
        }
        _ => None,
    };
    crate::init_logging(debug || args.debug, provider.as_ref());
    if provider.is_some() {
        // Callers' trace context arrives as W3C `traceparent` metadata.
        opentelemetry::global::set_text_map_propagator(
            opentelemetry_sdk::propagation::TraceContextPropagator::new(),
        );
    }
    // Flushes pending spans when serving ends.
    let _export = olm_trace::export::ExportGuard::new(provider);
    let result = serve(args).await;
    if let Err(error) = &result {
        // Like upstream, the fatal error also goes to the termination log
        // when it can be written.
        let _ = std::fs::write(&args.termination_log, format!("{error:#}\n"));
    }
    result
}

async fn serve(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let enforce = args
        .cache_enforce_integrity
        .unwrap_or(!args.cache_dir.is_empty() && !args.cache_only);
    if args.cache_dir.is_empty() && enforce {
        anyhow::bail!("--cache-dir must be specified with --cache-enforce-integrity");
    }
    let mut options = IndexOptions::default();
    if !args.cache_dir.is_empty() {
        std::fs::create_dir_all(&args.cache_dir)
            .with_context(|| format!("create cache dir {}", args.cache_dir))?;
        options.spill_dir = Some(args.cache_dir.clone().into());
    }
    let source = args.source.clone();
    let index = tokio::task::spawn_blocking(move || CatalogIndex::build(&source, &options))
        .await?
        .context("failed to load or rebuild cache")?;
    tracing::info!(configs = %args.source.display(), stats = ?index.stats(), "catalog indexed");
    if args.cache_only {
        return Ok(ExitCode::SUCCESS);
    }
    let port: u16 = args
        .port
        .parse()
        .with_context(|| format!("failed to listen: invalid port {:?}", args.port))?;
    let listener = tokio::net::TcpListener::bind(("0.0.0.0", port))
        .await
        .context("failed to listen")?;
    tracing::info!(port, "serving registry");
    RegistryServer::new(index)
        .serve(listener, shutdown_signal())
        .await?;
    tracing::info!("shutting down server");
    Ok(ExitCode::SUCCESS)
}

async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let Ok(mut terminate) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        else {
            let _ = interrupt.await;
            return;
        };
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
}
