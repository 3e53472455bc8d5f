//! `preview PACKAGE`: what OLM's resolver would decide in a namespace if
//! PACKAGE were installed there now (or, when it is subscribed already,
//! what it decides for it now: an upgrade, or nothing), computed against the
//! cluster's installed CSVs, Subscriptions and catalogs with the code
//! catalog-operator runs: installed CSVs through
//! `olm_resolver::objects`, catalog bundles through
//! `olm_registry::resolver_input`, and `olm_resolver::resolve`; then, for
//! each bundle, what its InstallPlan would create and update, the verdict
//! on its CRDs and the RBAC it grants ([`super::changes`], with
//! `olm_plan`'s rules, catalog-operator's too).

use std::{collections::BTreeMap, sync::Arc};

use anyhow::{Context as _, Result};
use olm_api::{
    catalog_source::CatalogSource, csv::ClusterServiceVersion, labels,
    operator_group::OperatorGroup, subscription::Subscription,
};
use olm_resolver::{CatalogKey, CatalogSnapshot, NamespaceState, ResolveRequest};

use crate::{
    cluster::ClusterArgs,
    commands::{
        changes::{BundleChanges, ContentSources},
        install::{PackageArgs, target},
        resolve::{Output, Report, report},
    },
    failure::Failure,
    sources::{self, CatalogArg},
};

/// Examples for `--help`.
pub(crate) const HELP: &str = "Examples:
  # What installing etcd into team-a would install (and any dependency)
  kubectl olm preview etcd -n team-a

  # From a given catalog and channel, as JSON
  kubectl olm preview etcd -n team-a --catalog operatorhub --catalog-namespace olm --channel alpha -o json

  # An installed package: the upgrade OLM would make now, if any
  kubectl olm preview etcd -n team-a

  # Outside the cluster network, reach a catalog's registry through a port-forward
  kubectl -n olm port-forward svc/operatorhub 50051:50051 &
  kubectl olm preview etcd -n team-a --registry olm/operatorhub=127.0.0.1:50051

Catalogs are read from their registry address (spec.address, or the registry Service);
one that cannot be reached counts as unhealthy, as it would for OLM, and is reported.

For each bundle the report lists the objects its InstallPlan would create or
update (with the fields an update changes; unchanged, or present for a CSV or
Subscription OLM leaves as it is), each CRD with the verdict catalog-operator would
reach (create, unchanged, update, or refused with the InstallPlan's message: a stored
version dropped, or an existing custom resource the new schema refuses) and the RBAC
its CSV grants and takes away beside the CSV it replaces. Bundle content comes from
the catalog, from what OLM unpacked already, or from the bundle image (pulled with the
catalog's pull secrets and this machine's auth files; --insecure-registry for
plain-HTTP registries).

Exit status: 0 resolved; 2 bad input; 3 OLM could not resolve it (the conflict is
printed); 5 the cluster could not be reached or refused a request.";

/// Flags of `preview`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    pub wanted: PackageArgs,
    /// Read a catalog from another address: NAMESPACE/NAME=HOST:PORT.
    #[arg(long = "registry", value_parser = sources::parse_catalog_arg)]
    pub registries: Vec<CatalogArg>,
    /// The global catalog namespace.
    #[arg(long, default_value = "olm")]
    pub global_namespace: String,
    /// Reach this image registry (`host[:port]`) over plain HTTP when a
    /// bundle image must be pulled.
    #[arg(long = "insecure-registry", value_name = "HOST")]
    pub insecure_registries: Vec<String>,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "yaml")]
    pub output: Output,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// Runs `preview`.
pub(crate) async fn run(args: &Args) -> Result<()> {
    let cluster = args.cluster.connect().await?;
    let (client, namespace) = (&cluster.client, cluster.namespace.as_str());
    let subscriptions: Vec<Subscription> = super::list(client, Some(namespace), None).await?;
    let csvs: Vec<ClusterServiceVersion> = super::list(client, Some(namespace), None).await?;
    let groups: Vec<OperatorGroup> = super::list(client, Some(namespace), None).await?;
    let exclude_global = groups.iter().any(|g| {
        g.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(labels::EXCLUDE_GLOBAL_NAMESPACE_RESOLUTION))
            .is_some_and(|v| v == "true")
    });

    let mut state = NamespaceState {
        namespace: namespace.to_owned(),
        csvs: Vec::new(),
        subscriptions: subscriptions
            .iter()
            .map(|s| {
                olm_resolver::objects::subscription(&serde_json::to_value(s).unwrap_or_default())
            })
            .collect(),
    };
    for csv in &csvs {
        let value = serde_json::to_value(csv).context("reading a CSV")?;
        if !olm_resolver::objects::is_copied(&value) {
            state.csvs.push(
                olm_resolver::objects::installed_csv(&value)
                    .map_err(|e| Failure::Input(e.to_string()))?,
            );
        }
    }
    if !subscriptions
        .iter()
        .any(|s| s.spec.package == args.wanted.package)
    {
        let target = target(client, namespace, (&args.wanted).into()).await?;
        state.subscriptions.push(olm_resolver::Subscription {
            name: args.wanted.package.clone(),
            package: args.wanted.package.clone(),
            channel: target.channel.unwrap_or_default(),
            catalog: target.catalog,
            catalog_namespace: target.catalog_namespace,
            starting_csv: target.starting_csv.unwrap_or_default(),
            installed_csv: String::new(),
        });
    }

    let mut namespaces = vec![namespace.to_owned()];
    if !exclude_global && args.global_namespace != namespace {
        namespaces.push(args.global_namespace.clone());
    }
    let mut catalogs = Vec::new();
    let mut registries = BTreeMap::new();
    for ns in &namespaces {
        let sources: Vec<CatalogSource> = super::list(client, Some(ns), None).await?;
        for source in sources {
            if let Some(endpoint) = endpoint_of(&source, &args.registries) {
                registries.insert(
                    format!(
                        "{}/{}",
                        source.metadata.namespace.as_deref().unwrap_or_default(),
                        source.metadata.name.as_deref().unwrap_or_default()
                    ),
                    endpoint,
                );
            }
            catalogs.push(Arc::new(snapshot(&source, &args.registries).await));
        }
    }

    let request = ResolveRequest {
        state: &state,
        catalogs: &catalogs,
        global_namespace: &args.global_namespace,
        exclude_global,
    };
    let (report, resolved) = report(namespace.to_owned(), olm_resolver::resolve(&request));
    let changes = match &report {
        Report::Resolved(resolution) => {
            let sources = ContentSources {
                registries: &registries,
                insecure_registries: &args.insecure_registries,
            };
            super::changes::changes(client, namespace, resolution, &sources).await
        }
        Report::Failed { .. } => Vec::new(),
    };
    print_preview(&Preview { report, changes }, args.output)?;
    if resolved {
        Ok(())
    } else {
        Err(Failure::Unresolvable(format!(
            "OLM cannot resolve {} in namespace {namespace} (see above)",
            args.wanted.package
        ))
        .into())
    }
}

/// What `preview` prints: the resolution report and, when it resolved,
/// what each bundle would change.
#[derive(serde::Serialize)]
struct Preview {
    #[serde(flatten)]
    report: Report,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    changes: Vec<BundleChanges>,
}

fn print_preview(preview: &Preview, output: Output) -> Result<()> {
    use std::io::Write as _;
    let text = match output {
        Output::Yaml => serde_yaml_ng::to_string(preview)?,
        Output::Json => serde_json::to_string_pretty(preview)? + "\n",
    };
    std::io::stdout().write_all(text.as_bytes())?;
    Ok(())
}

/// The registry endpoint of a catalog (`http://host:port`), `--registry`
/// first.
fn endpoint_of(source: &CatalogSource, overrides: &[CatalogArg]) -> Option<String> {
    let namespace = source.metadata.namespace.as_deref().unwrap_or_default();
    let name = source.metadata.name.as_deref().unwrap_or_default();
    let address = overrides
        .iter()
        .find(|o| o.namespace == namespace && o.name == name)
        .map(|o| o.source.clone())
        .or_else(|| source.registry_address())?;
    Some(if address.contains("://") {
        address
    } else {
        format!("http://{address}")
    })
}

/// The catalog as resolution sees it: its content read from its registry
/// (or the address `--registry` gives), healthy when OLM last saw it READY
/// and it answered now; unhealthy and empty otherwise (reported).
async fn snapshot(source: &CatalogSource, overrides: &[CatalogArg]) -> CatalogSnapshot {
    let namespace = source.metadata.namespace.clone().unwrap_or_default();
    let name = source.metadata.name.clone().unwrap_or_default();
    let key = CatalogKey::new(&name, &namespace);
    let priority = i32::try_from(source.spec.priority.unwrap_or(0)).unwrap_or(0);
    let ready = source
        .status
        .as_ref()
        .and_then(|s| s.connection_state.as_ref())
        .is_some_and(|c| c.last_observed_state.as_str() == "READY");
    let unhealthy = || CatalogSnapshot::build(key.clone(), priority, false, &[], Vec::new());
    let Some(endpoint) = endpoint_of(source, overrides) else {
        eprintln!("catalog {namespace}/{name}: no registry address yet; treated as unhealthy");
        return unhealthy();
    };
    if !ready {
        eprintln!("catalog {namespace}/{name}: not READY; treated as unhealthy, as OLM does");
        return unhealthy();
    }
    let address = endpoint.trim_start_matches("http://");
    match sources::list_registry(&endpoint).await {
        Ok((packages, bundles)) => {
            CatalogSnapshot::build(key.clone(), priority, true, &packages, bundles)
        }
        Err(error) => {
            eprintln!(
                "catalog {namespace}/{name}: cannot read {address} ({error:#}); treated as unhealthy \
                 (outside the cluster network, pass --registry {namespace}/{name}=HOST:PORT)"
            );
            unhealthy()
        }
    }
}
