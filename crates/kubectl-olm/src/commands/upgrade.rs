//! `upgrade PACKAGE [--to VERSION]`: moves an operator to the update OLM
//! found for it: approves the waiting InstallPlan of a manually approved
//! Subscription (only if it leads to VERSION, when given), and with `--wait`
//! follows the upgrade to Succeeded.

use anyhow::Result;
use kube::Api;
use olm_api::install_plan::InstallPlan;

use crate::{
    cluster::ClusterArgs,
    decide::progress::{self, Observed, Stage},
    failure,
};

/// Examples for `--help`.
pub(crate) const HELP: &str = "Examples:
  # Upgrade etcd to the update OLM found, and wait for it
  kubectl olm upgrade etcd -n team-a --wait

  # Only if the update is version 0.9.4
  kubectl olm upgrade etcd -n team-a --to 0.9.4

OLM upgrades along the channel's graph, one InstallPlan at a time: --to approves the
waiting plan only when it installs that version. A Subscription with Automatic approval
upgrades by itself; this command then only reports (and, with --wait, follows) it.

Exit status: 0 upgraded, upgrading, or already at the latest version; 1 the waiting
update is not the one asked for, or the upgrade failed; 2 no such package; 4 --wait timed
out; 5 the cluster could not be reached or refused a request.";

/// Flags of `upgrade`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The installed package.
    pub package: String,
    /// The version the waiting update must install.
    #[arg(long)]
    pub to: Option<String>,
    #[command(flatten)]
    pub wait: super::WaitArgs,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// Whether the CSV name `csv` is for `version` (`name.v1.2.3` or
/// `name.1.2.3`, as bundles name their CSVs).
fn names_version(csv: &str, version: &str) -> bool {
    let version = version.trim_start_matches('v');
    csv.ends_with(&format!(".v{version}")) || csv.ends_with(&format!(".{version}"))
}

/// Runs `upgrade`.
pub(crate) async fn run(args: &Args) -> Result<()> {
    let cluster = args.cluster.connect().await?;
    let (client, namespace) = (&cluster.client, cluster.namespace.as_str());
    let subscription = super::subscription_of(client, namespace, &args.package).await?;
    let status = subscription.status.clone().unwrap_or_default();
    let installed = status.installed_csv.clone().unwrap_or_default();
    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), namespace);
    let plan = match status
        .install_plan_ref
        .as_ref()
        .and_then(|r| r.name.clone())
    {
        Some(name) => plans.get_opt(&name).await?,
        None => None,
    };
    let stage = progress::stage(Observed {
        subscription: &subscription,
        plan: plan.as_ref(),
        csv: None,
        from_csv: Some(installed.as_str()),
    });
    let current = status.current_csv.clone().unwrap_or_default();
    if current.is_empty() || current == installed {
        if let Some(to) = &args.to
            && !names_version(&installed, to)
        {
            return failure::failed(format!(
                "{} is at {installed}, and OLM found no update to {to} on its channel; \
                 see `kubectl olm search {}`",
                args.package, args.package
            ));
        }
        println!(
            "{} is at the latest version its channel offers: {installed}",
            args.package
        );
        return Ok(());
    }
    match &stage {
        Stage::WaitingForApproval { plan: name, csvs } => {
            if let Some(to) = &args.to
                && !csvs.iter().any(|c| names_version(c, to))
            {
                return failure::failed(format!(
                    "the update waiting for approval installs {} (InstallPlan {name}), not {to}; \
                     OLM upgrades one step of the channel at a time",
                    csvs.join(", ")
                ));
            }
            super::install::approve_plan(&plans, name).await?;
            println!(
                "installplan {namespace}/{name} approved: {installed} -> {}",
                csvs.join(", ")
            );
        }
        Stage::Failed { object, cause, .. } => {
            return failure::failed(format!(
                "the upgrade of {} failed: {object}: {cause}",
                args.package
            ));
        }
        other => println!(
            "{}: upgrading {installed} -> {current}: {}",
            args.package,
            other.line()
        ),
    }
    if args.wait.wait {
        super::install::follow(
            client,
            namespace,
            &args.package,
            Some(installed.as_str()),
            super::install::Approve::Nothing,
            args.wait.timeout(),
        )
        .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_match_csv_names() {
        for (csv, version, want) in [
            ("etcd.v0.9.4", "0.9.4", true),
            ("etcd.v0.9.4", "v0.9.4", true),
            ("etcd.0.9.4", "0.9.4", true),
            ("etcd.v0.9.40", "0.9.4", false),
            ("etcd.v10.9.4", "0.9.4", false),
        ] {
            assert_eq!(names_version(csv, version), want, "{csv} {version}");
        }
    }
}
