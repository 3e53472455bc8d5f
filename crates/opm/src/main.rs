//! `opm`, the catalog authoring CLI, compatible with operator-registry's
//! `opm` for `init`, `render`, `validate`, `serve`, `generate dockerfile`
//! and `alpha render-template basic`: same subcommands, flags, output (JSON
//! by default, `-o yaml`) and exit codes (0 on success, 1 on any error,
//! including usage errors). Beyond upstream, `alpha bundle push` and
//! `alpha catalog push` build and publish images with no container engine,
//! catalogs on top of an `opm` image so that they serve themselves.
//!
//! Images are pulled and pushed with `olm-oci`; catalogs and bundles are
//! read, validated and written by `olm-catalog`; `serve` is `olm-registry`'s
//! server. This binary must not depend on `kube` or on any service crate.

mod cli;
mod dockerfile;
mod images;
mod init;
mod push;
mod render;
mod semver_template;
mod serve;
mod template;
mod validate;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Alpha, AlphaBundle, AlphaCatalog, Cli, Command, Generate};

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            let usage = error.use_stderr();
            let _ = error.print();
            // cobra exits 1 on usage errors, 0 for --help and version.
            return if usage {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    // `serve` sets up its logging inside the runtime, where its optional
    // span exporter runs.
    if !matches!(cli.command, Some(Command::Serve(_))) {
        init_logging(cli.debug, None);
    }
    match run(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("Error: {error:#}");
            ExitCode::from(1)
        }
    }
}

/// Log lines to stderr (`OPM_LOG` filters them); with `spans`, spans are
/// also exported through OpenTelemetry.
fn init_logging(debug: bool, spans: Option<&opentelemetry_sdk::trace::SdkTracerProvider>) {
    use opentelemetry::trace::TracerProvider as _;
    use tracing_subscriber::{layer::SubscriberExt as _, util::SubscriberInitExt as _};
    let filter = if debug { "debug" } else { "info" };
    let filter = tracing_subscriber::EnvFilter::try_from_env("OPM_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(filter));
    let export = spans.map(|provider| {
        tracing_opentelemetry::layer().with_tracer(provider.tracer(env!("CARGO_PKG_NAME")))
    });
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
        .with(export)
        .try_init();
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

/// The worker threads `opm serve` answers with, unless `TOKIO_WORKER_THREADS`
/// says otherwise. A registry answers a few long-lived connections
/// (catalog-operator, packageserver) with short synchronous work per call;
/// one worker answers them without handing each call between threads. In
/// the side-by-side bench GetBundleForChannel took 0.24 ms instead of 0.33
/// on v4.21, and one client's ListBundles ran 13 % faster; eight clients
/// streaming ListBundles at once got 10 % less throughput (docs/performance.md).
/// The index is built on every core either way (its own threads).
const SERVE_WORKER_THREADS: usize = 1;

fn serve_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if std::env::var_os("TOKIO_WORKER_THREADS").is_none() {
        builder.worker_threads(SERVE_WORKER_THREADS);
    }
    Ok(builder.enable_all().build()?)
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let tls = cli.tls_options()?;
    match cli.command {
        None => Ok(ExitCode::SUCCESS),
        Some(Command::Init(args)) => init::run(&args),
        Some(Command::Render(args)) => runtime()?.block_on(render::run(&args, &tls)),
        Some(Command::Validate(args)) => validate::run(&args),
        Some(Command::Serve(args)) => serve_runtime()?.block_on(serve::run(&args, cli.debug)),
        Some(Command::Generate(Generate::Dockerfile(args))) => dockerfile::run(&args),
        Some(Command::Version) => {
            println!(
                "Version: version.Version{{OpmVersion:\"v{}\", GitCommit:\"\", BuildDate:\"\", GoOs:\"{}\", GoArch:\"{}\"}}",
                env!("CARGO_PKG_VERSION"),
                std::env::consts::OS,
                go_arch()
            );
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Alpha(alpha)) => match alpha {
            Alpha::RenderTemplate(args) => runtime()?.block_on(template::run(&args, &tls)),
            Alpha::Bundle(AlphaBundle::Push(args)) => {
                runtime()?.block_on(push::bundle(&args, &tls))
            }
            Alpha::Catalog(AlphaCatalog::Push(args)) => {
                runtime()?.block_on(push::catalog(&args, &tls))
            }
        },
    }
}

fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "powerpc64" => "ppc64le",
        other => other,
    }
}
