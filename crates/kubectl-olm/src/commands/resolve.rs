//! `resolve`: an offline dry run of what OLM's resolver
//! would install or upgrade in a namespace, or why it cannot, from catalogs
//! (file-based catalog directories or registry addresses) and a state file
//! of the namespace's CSVs and Subscriptions. It talks to no cluster.

use std::{collections::HashSet, io::Write, path::PathBuf, sync::Arc};

use anyhow::{Context, Result};
use clap::ValueEnum;
use olm_resolver::{NamespaceState, ResolveError, ResolveRequest, resolve};
use serde::Serialize;

use crate::{failure::Failure, sources, state};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Output {
    Yaml,
    Json,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ResolveArgs {
    /// A catalog: NAMESPACE/NAME=SOURCE, where SOURCE is a file-based catalog
    /// directory or a registry address (grpc://host:port). Priority and
    /// health come from the matching CatalogSource in the state file.
    #[arg(long = "catalog", value_parser = sources::parse_catalog_arg, required = true, env = "KUBECTL_OLM_CATALOGS", value_delimiter = ',')]
    catalogs: Vec<sources::CatalogArg>,
    /// The namespace state: YAML of ClusterServiceVersions, Subscriptions,
    /// CatalogSources and the OperatorGroup (several documents or a List).
    #[arg(long, env = "KUBECTL_OLM_STATE")]
    state: PathBuf,
    /// The namespace to resolve (default: the first namespaced object's).
    #[arg(short, long, env = "KUBECTL_OLM_NAMESPACE")]
    namespace: Option<String>,
    /// The global catalog namespace.
    #[arg(long, default_value = "olm", env = "KUBECTL_OLM_GLOBAL_NAMESPACE")]
    global_namespace: String,
    /// Treat a catalog (NAMESPACE/NAME) as unhealthy.
    #[arg(
        long = "unhealthy",
        env = "KUBECTL_OLM_UNHEALTHY",
        value_delimiter = ','
    )]
    unhealthy: Vec<String>,
    /// Output format.
    #[arg(
        short,
        long,
        value_enum,
        default_value = "yaml",
        env = "KUBECTL_OLM_OUTPUT"
    )]
    output: Output,
}

/// What `resolve` prints.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase", tag = "decision")]
pub(crate) enum Report {
    /// Resolution succeeded.
    #[serde(rename = "Resolved")]
    Resolved(olm_resolver::Resolution),
    /// Resolution failed: the ResolutionFailed condition upstream would set.
    #[serde(rename = "ResolutionFailed", rename_all = "camelCase")]
    Failed {
        namespace: String,
        reason: &'static str,
        message: String,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        conflicts: Vec<olm_resolver::Conflict>,
    },
}

fn run_resolve(args: &ResolveArgs) -> Result<(Report, bool)> {
    let text = state::read_state_file(&args.state, state::MAX_STATE_BYTES)?;
    let file = state::parse_state(&text).with_context(|| format!("{}", args.state.display()))?;
    let namespace =
        args.namespace.clone().or(file.namespace.clone()).context(
            "no namespace: pass --namespace or put namespaced objects in the state file",
        )?;
    let unhealthy: HashSet<&str> = args.unhealthy.iter().map(String::as_str).collect();
    let mut catalogs = Vec::with_capacity(args.catalogs.len());
    for arg in &args.catalogs {
        let source = file
            .catalog_sources
            .iter()
            .find(|c| c.name == arg.name && c.namespace == arg.namespace);
        let priority = source.map_or(0, |s| s.priority);
        let healthy = source.is_none_or(|s| s.healthy)
            && !unhealthy.contains(format!("{}/{}", arg.namespace, arg.name).as_str());
        catalogs.push(Arc::new(sources::load(arg, priority, healthy)?));
    }
    let state = NamespaceState {
        namespace: namespace.clone(),
        csvs: file.csvs.get(&namespace).cloned().unwrap_or_default(),
        subscriptions: file
            .subscriptions
            .get(&namespace)
            .cloned()
            .unwrap_or_default(),
    };
    let request = ResolveRequest {
        state: &state,
        catalogs: &catalogs,
        global_namespace: &args.global_namespace,
        exclude_global: file.exclude_global.contains(&namespace),
    };
    Ok(report(namespace, resolve(&request)))
}

/// The report of a resolution, and whether it resolved.
pub(crate) fn report(
    namespace: String,
    result: Result<olm_resolver::Resolution, ResolveError>,
) -> (Report, bool) {
    match result {
        Ok(resolution) => (Report::Resolved(resolution), true),
        Err(e) => {
            let conflicts = match &e {
                ResolveError::NotSatisfiable { conflicts } => conflicts.clone(),
                _ => Vec::new(),
            };
            (
                Report::Failed {
                    namespace,
                    reason: e.reason(),
                    message: e.to_string(),
                    conflicts,
                },
                false,
            )
        }
    }
}

/// Prints a report as YAML or JSON.
pub(crate) fn print(report: &Report, output: Output) -> Result<()> {
    let text = match output {
        Output::Yaml => serde_yaml_ng::to_string(report)?,
        Output::Json => serde_json::to_string_pretty(report)? + "\n",
    };
    std::io::stdout().write_all(text.as_bytes())?;
    Ok(())
}

/// Runs `resolve`: prints the report; an unresolvable namespace is a
/// [`Failure::Unresolvable`] after the report is printed.
pub(crate) fn run(args: &ResolveArgs) -> Result<()> {
    let (report, resolved) = run_resolve(args)?;
    print(&report, args.output)?;
    if resolved {
        Ok(())
    } else {
        Err(Failure::Unresolvable("the namespace cannot be resolved (see above)".to_owned()).into())
    }
}
