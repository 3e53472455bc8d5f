//! `approve PLAN|PACKAGE`: approves an InstallPlan waiting for manual
//! approval, named directly or as the plan a package's Subscription waits on.

use anyhow::Result;
use kube::Api;
use olm_api::{
    install_plan::{InstallPlan, InstallPlanPhase},
    subscription::Approval,
};

use crate::{cluster::ClusterArgs, failure};

/// Examples for `--help`.
pub(crate) const HELP: &str = "Examples:
  # Approve the plan etcd's Subscription waits on
  kubectl olm approve etcd -n team-a

  # Approve a plan by name, and follow the install it starts
  kubectl olm approve install-7x2kq -n team-a --wait

Exit status: 0 approved (or already approved); 1 nothing waits for approval (or, with
--wait, the install failed); 2 no such plan or package; 4 --wait timed out; 5 the cluster
could not be reached or refused a request.";

/// Flags of `approve`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// An InstallPlan name, or a package whose Subscription waits on one.
    pub target: String,
    #[command(flatten)]
    pub wait: super::WaitArgs,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// Runs `approve`.
pub(crate) async fn run(args: &Args) -> Result<()> {
    let cluster = args.cluster.connect().await?;
    let (client, namespace) = (&cluster.client, cluster.namespace.as_str());
    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), namespace);
    let (plan, package) = match plans.get_opt(&args.target).await? {
        Some(plan) => (plan, None),
        None => {
            let subscription = super::subscription_of(client, namespace, &args.target)
                .await
                .map_err(|_| {
                    failure::Failure::Input(format!(
                        "no InstallPlan named {0} and no Subscription for a package {0} in namespace {namespace}; \
                         see `kubectl olm status -n {namespace}`",
                        args.target
                    ))
                })?;
            let Some(name) = subscription
                .status
                .as_ref()
                .and_then(|s| s.install_plan_ref.as_ref())
                .and_then(|r| r.name.clone())
            else {
                return failure::failed(format!(
                    "the Subscription of {} in namespace {namespace} has no InstallPlan yet; \
                     see `kubectl olm status {} -n {namespace}`",
                    args.target, args.target
                ));
            };
            let Some(plan) = plans.get_opt(&name).await? else {
                return failure::failed(format!(
                    "InstallPlan {namespace}/{name} of {} is gone; catalog-operator makes a new one \
                     at its next resolution",
                    args.target
                ));
            };
            (plan, Some(subscription.spec.package.clone()))
        }
    };
    let name = plan.metadata.name.clone().unwrap_or_default();
    let csvs = plan.spec.cluster_service_version_names.join(", ");
    let phase = plan
        .status
        .as_ref()
        .map(|s| s.phase.clone())
        .unwrap_or_default();
    if plan.spec.approved {
        println!("installplan {namespace}/{name} ({csvs}) is already approved");
    } else if plan.spec.approval != Approval::MANUAL && phase != InstallPlanPhase::REQUIRES_APPROVAL
    {
        return failure::failed(format!(
            "installplan {namespace}/{name} ({csvs}) does not wait for approval (phase {})",
            phase.as_str()
        ));
    } else if phase == InstallPlanPhase::FAILED || phase == InstallPlanPhase::COMPLETE {
        return failure::failed(format!(
            "installplan {namespace}/{name} ({csvs}) is {} already; nothing to approve",
            phase.as_str()
        ));
    } else {
        super::install::approve_plan(&plans, &name).await?;
        println!("installplan {namespace}/{name} approved: {csvs}");
    }
    match (args.wait.wait, package) {
        (true, Some(package)) => {
            super::install::follow(
                client,
                namespace,
                &package,
                None,
                super::install::Approve::Nothing,
                args.wait.timeout(),
            )
            .await
        }
        (true, None) => {
            failure::input("--wait follows a package: pass the package name instead of the plan's")
        }
        (false, _) => Ok(()),
    }
}
