//! `kubectl-olm`: a kubectl plugin for OLM, the admin's tool for day-2
//! work. Against a live cluster (through the kubeconfig, as kubectl):
//! `search`, `preview`, `install`, `status`, `approve`, `upgrade`,
//! `uninstall`, `doctor`. Offline: `resolve`, a dry run of OLM's resolver
//! over catalogs and a state file.
//!
//! It depends on the library crates only (`olm-api`, `olm-catalog`,
//! `olm-registry`, `olm-resolver`, `olm-plan`, `olm-oci`), never on a
//! service crate: it talks to
//! the services through the Kubernetes objects they watch, as a user does.
//! Its rules (stages, health, what to delete) are pure functions in
//! [`decide`]; the commands read the cluster, call them, and act.

mod cluster;
mod commands;
mod decide;
mod failure;
mod output;
mod sources;
mod state;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::failure::{EXIT_CODES_HELP, exit_code};

#[derive(Debug, Parser)]
#[command(name = "kubectl-olm", version, about = "OLM from kubectl", after_help = EXIT_CODES_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Resolve a namespace offline, from catalogs and a state file: the
    /// bundles OLM would install or upgrade to, or the constraints that
    /// conflict.
    #[command(after_help = EXIT_CODES_HELP)]
    Resolve(commands::resolve::ResolveArgs),
    /// Preview, against the cluster, what installing (or upgrading) a
    /// package would install, or why OLM could not.
    #[command(after_help = commands::preview::HELP)]
    Preview(commands::preview::Args),
    /// Find operators in the cluster's catalogs.
    #[command(visible_alias = "list-available", after_help = commands::search::HELP)]
    Search(commands::search::Args),
    /// Install an operator from a catalog.
    #[command(after_help = commands::install::HELP)]
    Install(commands::install::Args),
    /// Show the health of installed operators.
    #[command(after_help = commands::status::HELP)]
    Status(commands::status::Args),
    /// Approve an InstallPlan waiting for manual approval.
    #[command(after_help = commands::approve::HELP)]
    Approve(commands::approve::Args),
    /// Upgrade an operator to the update OLM found for it.
    #[command(after_help = commands::upgrade::HELP)]
    Upgrade(commands::upgrade::Args),
    /// Remove an installed operator.
    #[command(after_help = commands::uninstall::HELP)]
    Uninstall(commands::uninstall::Args),
    /// Find the known field incidents and say what to do; --fix does the safe part.
    #[command(after_help = commands::doctor::HELP)]
    Doctor(commands::doctor::Args),
}

async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        // Offline, with a runtime of its own for registry reads.
        Command::Resolve(args) => commands::resolve::run(&args),
        Command::Search(args) => commands::search::run(&args).await,
        Command::Install(args) => commands::install::run(&args).await,
        Command::Status(args) => commands::status::run(&args).await,
        Command::Approve(args) => commands::approve::run(&args).await,
        Command::Upgrade(args) => commands::upgrade::run(&args).await,
        Command::Uninstall(args) => commands::uninstall::run(&args).await,
        Command::Doctor(args) => commands::doctor::run(&args).await,
        Command::Preview(args) => commands::preview::run(&args).await,
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Resolve(args) = &cli.command {
        return finish(commands::resolve::run(args));
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start: {error}");
            return ExitCode::from(failure::EXIT_FAILED);
        }
    };
    finish(runtime.block_on(run(cli.command)))
}

fn finish(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::from(failure::EXIT_OK),
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(exit_code(&error))
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }
}
