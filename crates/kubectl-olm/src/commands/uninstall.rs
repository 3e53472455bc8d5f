//! `uninstall PACKAGE`: removes an installed operator cleanly. Operands go
//! first (only with `--operand-strategy delete`, while the operator still
//! runs to finalize them), then the Subscription, the CSVs (olm-operator's
//! finalizer removes what they installed) and their InstallPlans, then, with
//! `--delete-crds`, the CRDs no other operator owns and the package's
//! `Operator` object, and with `--delete-operator-group` the OperatorGroup
//! when nothing else is installed in the namespace.

use std::{
    collections::BTreeSet,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api, Client,
    api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams},
};
use olm_api::{
    csv::ClusterServiceVersion, install_plan::InstallPlan, labels, operator::Operator,
    operator_group::OperatorGroup, subscription::Subscription,
};

use crate::{
    cluster::ClusterArgs,
    decide::uninstall::{OperandStrategy, OwnedCrd, removal},
    failure::{self, Failure},
};

/// Examples for `--help`.
pub(crate) const HELP: &str = "Examples:
  # Remove etcd, keeping its CRDs; refused while etcd resources exist
  kubectl olm uninstall etcd -n team-a

  # Remove etcd, its resources and its CRDs
  kubectl olm uninstall etcd -n team-a --operand-strategy delete --delete-crds

  # Also remove the namespace's OperatorGroup when nothing else is installed there
  kubectl olm uninstall etcd -n team-a --delete-operator-group

Exit status: 0 removed; 1 refused (operands exist, or a CRD would take operands with it);
2 no such package installed; 4 a deletion did not finish in time; 5 the cluster could not
be reached or refused a request.";

/// Flags of `uninstall`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The package to remove.
    pub package: String,
    /// What to do with operands (resources of the CRDs the operator owns).
    #[arg(long, value_enum, default_value_t = OperandStrategy::Abort)]
    pub operand_strategy: OperandStrategy,
    /// Also delete the CRDs the operator owns (not those another operator owns).
    #[arg(long)]
    pub delete_crds: bool,
    /// Also delete the namespace's OperatorGroup if nothing else is installed there.
    #[arg(long)]
    pub delete_operator_group: bool,
    /// How long to wait for each deletion to finish, in seconds.
    #[arg(long, default_value_t = 120)]
    pub timeout: u64,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// Runs `uninstall`.
pub(crate) async fn run(args: &Args) -> Result<()> {
    let cluster = args.cluster.connect().await?;
    let (client, namespace) = (&cluster.client, cluster.namespace.as_str());
    let timeout = Duration::from_secs(args.timeout);
    let subscription = super::subscription_of(client, namespace, &args.package).await?;
    let subscription_name = subscription.metadata.name.clone().unwrap_or_default();
    let status = subscription.status.clone().unwrap_or_default();
    let csv_names: BTreeSet<String> = [status.installed_csv, status.current_csv]
        .into_iter()
        .flatten()
        .filter(|c| !c.is_empty())
        .collect();
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), namespace);
    let mut installed = Vec::new();
    for name in &csv_names {
        if let Some(csv) = csvs.get_opt(name).await? {
            installed.push(csv);
        }
    }

    let owned = owned_crds(client, namespace, &installed).await?;
    let removal = removal(&owned, args.operand_strategy, args.delete_crds).map_err(|refusal| {
        Failure::Failed(format!(
            "not uninstalling {} from namespace {namespace}: {refusal}",
            args.package
        ))
    })?;

    for (crd, operand) in &removal.operands {
        let api = operand_api(client, crd).await?;
        let (operand_namespace, name) = split(operand);
        let api = match operand_namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &api.1),
            None => api.0,
        };
        delete_and_wait(&api, name, &format!("{crd} {operand}"), timeout).await?;
    }

    let subscriptions: Api<Subscription> = Api::namespaced(client.clone(), namespace);
    delete_and_wait(
        &subscriptions,
        &subscription_name,
        &format!("subscription {namespace}/{subscription_name}"),
        timeout,
    )
    .await?;
    for name in &csv_names {
        delete_and_wait(
            &csvs,
            name,
            &format!("clusterserviceversion {namespace}/{name}"),
            timeout,
        )
        .await?;
    }
    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), namespace);
    for plan in plans.list(&ListParams::default()).await?.items {
        let of_package = plan
            .spec
            .cluster_service_version_names
            .iter()
            .any(|c| csv_names.contains(c));
        if of_package {
            let name = plan.metadata.name.clone().unwrap_or_default();
            delete_and_wait(
                &plans,
                &name,
                &format!("installplan {namespace}/{name}"),
                timeout,
            )
            .await?;
        }
    }

    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in &removal.crds {
        delete_and_wait(
            &crds,
            crd,
            &format!("customresourcedefinition {crd}"),
            timeout,
        )
        .await?;
    }
    for (crd, why) in &removal.kept_crds {
        println!("customresourcedefinition {crd} kept: {why}");
    }
    if args.delete_crds {
        // With its CRDs gone nothing carries the component label: the
        // Operator object would list nothing.
        let operators: Api<Operator> = Api::all(client.clone());
        let name = format!("{}.{namespace}", args.package);
        delete_and_wait(&operators, &name, &format!("operator {name}"), timeout).await?;
    }
    if args.delete_operator_group {
        remove_operator_group(client, namespace, timeout).await?;
    }
    println!("{} uninstalled from namespace {namespace}", args.package);
    Ok(())
}

/// The CRDs the CSVs own, with their operands and other owners.
async fn owned_crds(
    client: &Client,
    namespace: &str,
    installed: &[ClusterServiceVersion],
) -> Result<Vec<OwnedCrd>> {
    let names: BTreeSet<String> = installed
        .iter()
        .flat_map(|csv| csv.spec.owned_crds().iter().map(|d| d.name.clone()))
        .collect();
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let ours: BTreeSet<String> = installed
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    let all_csvs: Api<ClusterServiceVersion> = Api::all(client.clone());
    let others: Vec<ClusterServiceVersion> = all_csvs
        .list(&ListParams::default())
        .await
        .context("listing the cluster's CSVs")?
        .items
        .into_iter()
        .filter(|c| {
            let copied = c
                .metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key(labels::COPIED_FROM));
            let same = c.metadata.namespace.as_deref() == Some(namespace)
                && c.metadata.name.as_ref().is_some_and(|n| ours.contains(n));
            !copied && !same
        })
        .collect();
    let mut out = Vec::new();
    for name in names {
        let operands = match operand_api(client, &name).await {
            Ok((api, _)) => api
                .list(&ListParams::default())
                .await
                .with_context(|| format!("listing the resources of CRD {name}"))?
                .items
                .into_iter()
                .map(|o| match o.metadata.namespace {
                    Some(ns) => format!("{ns}/{}", o.metadata.name.unwrap_or_default()),
                    None => o.metadata.name.unwrap_or_default(),
                })
                .collect(),
            // The CRD is gone already: no operands.
            Err(error) if is_input(&error) => Vec::new(),
            Err(error) => return Err(error),
        };
        let also_owned_by = others
            .iter()
            .filter(|c| c.spec.owned_crds().iter().any(|d| d.name == name))
            .map(|c| {
                format!(
                    "{}/{}",
                    c.metadata.namespace.as_deref().unwrap_or_default(),
                    c.metadata.name.as_deref().unwrap_or_default()
                )
            })
            .collect();
        out.push(OwnedCrd {
            name,
            operands,
            also_owned_by,
        });
    }
    Ok(out)
}

fn is_input(error: &anyhow::Error) -> bool {
    matches!(error.downcast_ref::<Failure>(), Some(Failure::Input(_)))
}

/// A cluster-wide API over the resources of CRD `name`, and its resource.
async fn operand_api(client: &Client, name: &str) -> Result<(Api<DynamicObject>, ApiResource)> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let Some(crd) = crds
        .get_opt(name)
        .await
        .with_context(|| format!("reading CRD {name}"))?
    else {
        return failure::input(format!("CRD {name} does not exist"));
    };
    let version = crd
        .spec
        .versions
        .iter()
        .find(|v| v.storage)
        .or_else(|| crd.spec.versions.first())
        .map(|v| v.name.clone())
        .unwrap_or_default();
    let gvk = GroupVersionKind::gvk(&crd.spec.group, &version, &crd.spec.names.kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, &crd.spec.names.plural);
    Ok((Api::all_with(client.clone(), &resource), resource))
}

fn split(operand: &str) -> (Option<&str>, &str) {
    match operand.split_once('/') {
        Some((namespace, name)) => (Some(namespace), name),
        None => (None, operand),
    }
}

/// Deletes `name` (in the foreground, so its dependents go first) and waits
/// until it is gone; absent already is fine.
async fn delete_and_wait<K>(api: &Api<K>, name: &str, what: &str, timeout: Duration) -> Result<()>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    match api.delete(name, &DeleteParams::foreground()).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
        Err(error) => return Err(error).with_context(|| format!("deleting {what}")),
    }
    let deadline = Instant::now() + timeout;
    loop {
        if api.get_opt(name).await?.is_none() {
            println!("{what} deleted");
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(Failure::TimedOut(format!(
                "{what} is still there after {}s (a finalizer may be waiting: see \
                 `kubectl get {what} -o yaml`)",
                timeout.as_secs()
            ))
            .into());
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Deletes the namespace's OperatorGroup when no Subscription or CSV is left.
async fn remove_operator_group(client: &Client, namespace: &str, timeout: Duration) -> Result<()> {
    let subscriptions: Api<Subscription> = Api::namespaced(client.clone(), namespace);
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), namespace);
    let left_subscriptions = subscriptions
        .list(&ListParams::default())
        .await?
        .items
        .len();
    let left_csvs = csvs
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .filter(|c| {
            !c.metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key(labels::COPIED_FROM))
        })
        .count();
    let groups: Api<OperatorGroup> = Api::namespaced(client.clone(), namespace);
    if left_subscriptions + left_csvs > 0 {
        println!(
            "operatorgroup kept: {left_subscriptions} Subscription(s) and {left_csvs} CSV(s) remain in namespace {namespace}"
        );
        return Ok(());
    }
    for group in groups.list(&ListParams::default()).await?.items {
        let name = group.metadata.name.unwrap_or_default();
        delete_and_wait(
            &groups,
            &name,
            &format!("operatorgroup {namespace}/{name}"),
            timeout,
        )
        .await?;
    }
    Ok(())
}
