//! `opm serve`: the registry gRPC API over a catalog directory, with
//! upstream's flags. The index is built at start (no pre-built cache is
//! needed); `--cache-dir` holds the index's spill file and `--cache-only`
//! builds the index and exits.

use std::process::ExitCode;

use anyhow::Context as _;
use olm_registry::{CatalogIndex, IndexOptions, RegistryServer};

use crate::cli::ServeArgs;

pub(crate) async fn run(args: &ServeArgs) -> anyhow::Result<ExitCode> {
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
