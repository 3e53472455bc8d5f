//! `status`: one table of the Subscriptions, ClusterServiceVersions,
//! InstallPlans and CatalogSources of a namespace (or of one package, or of
//! every namespace), each with its health and, for anything not healthy,
//! the cause and the next step. The rules are in [`crate::decide::status`];
//! this reads the cluster and prints.

use anyhow::{Context as _, Result};
use kube::Api;
use olm_api::{
    catalog_source::CatalogSource, csv::ClusterServiceVersion, install_plan::InstallPlan,
    subscription::Subscription,
};

use crate::{
    cluster::ClusterArgs,
    decide::status::{self as decide, Row},
    failure,
    output::{self, Format, FormatArg},
};

/// Examples for `--help`.
pub(crate) const HELP: &str = "\
Examples:
  # The health of every operator in the current namespace
  kubectl olm status

  # One package, in namespace operators
  kubectl olm status etcd -n operators

  # Every namespace, as JSON
  kubectl olm status -A -o json

HEALTH is Healthy, Progressing (installing, resolving, or waiting for
approval) or Unhealthy; CAUSE says why and what to do next. status exits
with 1, after printing, when anything is Unhealthy.

Exit status: see kubectl olm --help.";

/// Flags of `status`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Show only this package's Subscription, CSVs, InstallPlans and catalog.
    #[arg(value_name = "PACKAGE")]
    pub package: Option<String>,
    /// Every namespace (`-n` is ignored).
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    #[command(flatten)]
    pub format: FormatArg,
}

/// Runs `status`.
pub(crate) async fn run(args: &Args) -> Result<()> {
    let cluster = args.cluster.connect().await?;
    let scope = if args.all_namespaces {
        None
    } else {
        Some(cluster.namespace.as_str())
    };
    let client = &cluster.client;
    let subscriptions: Vec<Subscription> = super::list(client, scope, None).await?;
    let package = args.package.as_deref();
    if let Some(package) = package
        && !decide::has_package(&subscriptions, package)
    {
        let place = scope.map_or_else(
            || "any namespace".to_owned(),
            |ns| format!("namespace {ns}"),
        );
        return failure::input(format!(
            "no Subscription for package {package} in {place}; see kubectl olm search / install"
        ));
    }
    let csvs: Vec<ClusterServiceVersion> = super::list(client, scope, None).await?;
    let plans: Vec<InstallPlan> = super::list(client, scope, None).await?;
    let mut catalogs = Vec::new();
    for used in decide::catalogs_used(&subscriptions, package) {
        let api: Api<CatalogSource> = Api::namespaced(client.clone(), &used.namespace);
        let found = api.get_opt(&used.name).await.with_context(|| {
            format!(
                "reading CatalogSource {} in namespace {}",
                used.name, used.namespace
            )
        })?;
        catalogs.extend(found);
    }
    let rows = decide::rows(&subscriptions, &csvs, &plans, &catalogs, package);

    match args.format.output {
        Format::Table if rows.is_empty() => {
            let place = scope.map_or_else(
                || "any namespace".to_owned(),
                |ns| format!("namespace {ns}"),
            );
            eprintln!("No operators in {place}; see kubectl olm search / install.");
        }
        Format::Table => print!("{}", render(&rows, scope)),
        format => output::print_data(&rows, format)?,
    }
    match decide::unhealthy_summary(&rows) {
        Some(summary) => failure::failed(summary),
        None => Ok(()),
    }
}

/// The table: NAMESPACE only for every namespace; otherwise an object of
/// another namespace (a catalog in the global catalog namespace) is named
/// `namespace/name`.
fn render(rows: &[Row], namespace: Option<&str>) -> String {
    let mut header = vec!["KIND", "NAME", "STATE", "HEALTH", "CAUSE"];
    if namespace.is_none() {
        header.insert(0, "NAMESPACE");
    }
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            let name = match namespace {
                Some(ns) if ns != row.namespace => format!("{}/{}", row.namespace, row.name),
                _ => row.name.clone(),
            };
            let mut cells = vec![
                row.kind.to_string(),
                name,
                row.state.clone(),
                row.health.to_string(),
                row.cause.clone(),
            ];
            if namespace.is_none() {
                cells.insert(0, row.namespace.clone());
            }
            cells
        })
        .collect();
    output::table(&header, &cells)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::status::{Health, Kind};

    fn row(kind: Kind, namespace: &str, name: &str, health: Health, cause: &str) -> Row {
        Row {
            kind,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            state: "READY".to_owned(),
            health,
            cause: cause.to_owned(),
        }
    }

    #[test]
    fn the_table_names_other_namespaces_and_shows_namespace_only_for_all() {
        let rows = [
            row(Kind::Subscription, "team-a", "widgets", Health::Healthy, ""),
            row(
                Kind::CatalogSource,
                "global",
                "index",
                Health::Unhealthy,
                "down",
            ),
        ];
        assert_eq!(
            render(&rows, Some("team-a")),
            "KIND           NAME          STATE  HEALTH     CAUSE\n\
             Subscription   widgets       READY  Healthy\n\
             CatalogSource  global/index  READY  Unhealthy  down\n"
        );
        assert_eq!(
            render(&rows, None),
            "NAMESPACE  KIND           NAME     STATE  HEALTH     CAUSE\n\
             team-a     Subscription   widgets  READY  Healthy\n\
             global     CatalogSource  index    READY  Unhealthy  down\n"
        );
    }
}
