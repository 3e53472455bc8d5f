//! `install PACKAGE`: creates what an install needs (an OperatorGroup when
//! asked, the Subscription) and, with `--wait`, follows it stage by stage
//! until the CSV Succeeded or something failed for good.

use std::{
    io::{IsTerminal as _, Write as _},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result};
use kube::{
    Api, Client,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use olm_api::{
    csv::ClusterServiceVersion,
    install_plan::InstallPlan,
    operator_group::OperatorGroup,
    package_manifest::PackageManifest,
    subscription::{Approval, Subscription},
};
use serde_json::json;

use crate::{
    cluster::ClusterArgs,
    decide::progress::{self, Observed, Stage},
    failure::{self, Failure},
};

/// Examples for `--help`.
pub(crate) const HELP: &str = "Examples:
  # Install from the catalog that carries the package, on its default channel, and wait
  kubectl olm install etcd -n team-a --create-operator-group --wait

  # A given channel and version, from a given catalog, approving upgrades by hand
  kubectl olm install etcd -n team-a --channel alpha --version 0.9.2 \\
      --catalog operatorhub --catalog-namespace olm --approval Manual --wait

  # An OperatorGroup that watches two namespaces (or '*': all of them)
  kubectl olm install etcd -n team-a --create-operator-group --watch team-a,team-b

Without --catalog, the package's PackageManifest (served by packageserver) says which
catalog carries it and its default channel. With --version, the Subscription starts at
that version's CSV and upgrades wait for approval unless --approval Automatic is given.

Exit status: 0 installed (or, without --wait, subscribed); 1 the install failed; 2 bad
input (no OperatorGroup, already subscribed, unknown package); 3 OLM cannot resolve the
package; 4 --wait timed out; 5 the cluster could not be reached or refused a request.";

/// How often `--wait` looks at the objects.
const POLL: Duration = Duration::from_millis(500);

/// Flags of `install`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    pub wanted: PackageArgs,
    /// How upgrades are approved (default: Automatic, or Manual with --version).
    #[arg(long, value_parser = ["Automatic", "Manual"])]
    pub approval: Option<String>,
    /// Create an OperatorGroup when the namespace has none.
    #[arg(long)]
    pub create_operator_group: bool,
    /// The namespaces the created OperatorGroup targets, `*` for all
    /// (default: the install namespace, or all when the operator supports
    /// only that).
    #[arg(long, value_delimiter = ',')]
    pub watch: Vec<String>,
    #[command(flatten)]
    pub wait: super::WaitArgs,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// What the Subscription will say, and what the package supports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    pub catalog: String,
    pub catalog_namespace: String,
    pub channel: Option<String>,
    pub starting_csv: Option<String>,
    /// Whether the channel head supports only all-namespaces installs (from
    /// its PackageManifest; `false` when unknown).
    pub all_namespaces_only: bool,
}

/// Runs `install`.
pub(crate) async fn run(args: &Args) -> Result<()> {
    let cluster = args.cluster.connect().await?;
    let (client, namespace) = (&cluster.client, cluster.namespace.as_str());
    let target = target(client, namespace, (&args.wanted).into()).await?;
    ensure_operator_group(client, namespace, args, target.all_namespaces_only).await?;

    let subscriptions: Api<Subscription> = Api::namespaced(client.clone(), namespace);
    let existing = subscriptions.list(&ListParams::default()).await?;
    if let Some(other) = existing
        .items
        .iter()
        .find(|s| s.spec.package == args.wanted.package)
    {
        return failure::input(format!(
            "package {} is already subscribed in namespace {namespace} (Subscription {}); \
             see `kubectl olm status {} -n {namespace}`, or `kubectl olm upgrade`",
            args.wanted.package,
            other.metadata.name.as_deref().unwrap_or_default(),
            args.wanted.package
        ));
    }
    let manual = match args.approval.as_deref() {
        Some(approval) => approval == Approval::MANUAL.as_str(),
        None => target.starting_csv.is_some(),
    };
    let subscription: Subscription = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "Subscription",
        "metadata": {"name": args.wanted.package, "namespace": namespace},
        "spec": {
            "name": args.wanted.package,
            "source": target.catalog,
            "sourceNamespace": target.catalog_namespace,
            "channel": target.channel,
            "startingCSV": target.starting_csv,
            "installPlanApproval": if manual { "Manual" } else { "Automatic" },
        },
    }))
    .context("building the Subscription")?;
    subscriptions
        .create(&PostParams::default(), &subscription)
        .await
        .with_context(|| format!("creating Subscription {namespace}/{}", args.wanted.package))?;
    println!(
        "subscription {namespace}/{} created: package {} from catalog {}/{}{}",
        args.wanted.package,
        args.wanted.package,
        target.catalog_namespace,
        target.catalog,
        target
            .channel
            .as_deref()
            .map(|c| format!(", channel {c}"))
            .unwrap_or_default()
    );
    if !args.wait.wait {
        if manual {
            println!(
                "approval is Manual: approve the install with `kubectl olm approve {} -n {namespace}`",
                args.wanted.package
            );
        }
        println!(
            "follow it with `kubectl olm status {} -n {namespace}`",
            args.wanted.package
        );
        return Ok(());
    }
    // Asking to install and wait is approving the install: with Manual
    // approval the first plan (the one that installs the starting CSV, with
    // --version) is approved here; later ones wait for the admin.
    let approve = if manual {
        Approve::First(target.starting_csv.as_deref())
    } else {
        Approve::Nothing
    };
    follow(
        client,
        namespace,
        &args.wanted.package,
        None,
        approve,
        args.wait.timeout(),
    )
    .await
}

/// Which waiting InstallPlan [`follow`] approves on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Approve<'a> {
    /// None: the admin approves.
    Nothing,
    /// The install's first plan (if it installs this CSV, when given).
    First(Option<&'a str>),
}

/// The package flags of `install` and `preview`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct PackageArgs {
    /// The package.
    pub package: String,
    /// The channel (default: the package's default channel).
    #[arg(short, long)]
    pub channel: Option<String>,
    /// The version to start at (a CSV version of the channel).
    #[arg(short = 'v', long)]
    pub version: Option<String>,
    /// The CatalogSource (default: the one whose PackageManifest lists the package).
    #[arg(long)]
    pub catalog: Option<String>,
    /// The CatalogSource's namespace (default: the PackageManifest's, else `olm`).
    #[arg(long)]
    pub catalog_namespace: Option<String>,
}

/// The package asked for, borrowed from [`PackageArgs`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Wanted<'a> {
    pub package: &'a str,
    pub channel: Option<&'a str>,
    pub version: Option<&'a str>,
    pub catalog: Option<&'a str>,
    pub catalog_namespace: Option<&'a str>,
}

impl<'a> From<&'a PackageArgs> for Wanted<'a> {
    fn from(args: &'a PackageArgs) -> Self {
        Self {
            package: &args.package,
            channel: args.channel.as_deref(),
            version: args.version.as_deref(),
            catalog: args.catalog.as_deref(),
            catalog_namespace: args.catalog_namespace.as_deref(),
        }
    }
}

/// Which catalog, channel and starting CSV: from the flags, and from the
/// package's PackageManifest for what they leave out.
pub(crate) async fn target(client: &Client, namespace: &str, args: Wanted<'_>) -> Result<Target> {
    let needs_manifest = args.catalog.is_none() || args.channel.is_none() || args.version.is_some();
    let manifest = if needs_manifest {
        package_manifest(client, namespace, args.package, args.catalog.is_none()).await?
    } else {
        None
    };
    let (catalog, catalog_namespace) = match (args.catalog, &manifest) {
        (Some(catalog), _) => (
            catalog.to_owned(),
            args.catalog_namespace
                .map(str::to_owned)
                .or_else(|| {
                    manifest
                        .as_ref()
                        .map(|m| m.status.catalog_source_namespace.clone())
                })
                .unwrap_or_else(|| "olm".to_owned()),
        ),
        (None, Some(manifest)) => (
            manifest.status.catalog_source.clone(),
            manifest.status.catalog_source_namespace.clone(),
        ),
        (None, None) => {
            return failure::input(format!(
                "cannot tell which catalog carries package {}: pass --catalog and --catalog-namespace",
                args.package
            ));
        }
    };
    let channel = args.channel.map(str::to_owned).or_else(|| {
        manifest
            .as_ref()
            .map(|m| m.status.default_channel.clone())
            .filter(|c| !c.is_empty())
    });
    let starting_csv = match args.version {
        None => None,
        Some(version) => {
            let Some(manifest) = &manifest else {
                return failure::input(
                    "--version needs the package's PackageManifest (packageserver), which is not available",
                );
            };
            let channel_name = channel.clone().unwrap_or_default();
            let Some(entries) = manifest
                .status
                .channels
                .iter()
                .find(|c| c.name == channel_name)
                .map(|c| &c.entries)
            else {
                return failure::input(format!(
                    "package {} has no channel {channel_name:?}; see `kubectl olm search {}`",
                    args.package, args.package
                ));
            };
            let found = entries
                .iter()
                .find(|e| e.version.as_deref() == Some(version))
                .map(|e| e.name.clone());
            match found {
                Some(name) => Some(name),
                None => {
                    return failure::input(format!(
                        "channel {channel_name} of package {} has no version {version} (it has {})",
                        args.package,
                        entries
                            .iter()
                            .filter_map(|e| e.version.clone())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
            }
        }
    };
    let all_namespaces_only = manifest.as_ref().is_some_and(|manifest| {
        let head = manifest
            .status
            .channels
            .iter()
            .find(|c| Some(&c.name) == channel.as_ref());
        let modes = head
            .and_then(|c| c.current_csv_desc.install_modes.clone())
            .unwrap_or_default();
        let supports = |mode: &str| {
            modes
                .iter()
                .any(|m| m.type_.as_str() == mode && m.supported)
        };
        !supports("OwnNamespace") && supports("AllNamespaces")
    });
    Ok(Target {
        catalog,
        catalog_namespace,
        channel,
        starting_csv,
        all_namespaces_only,
    })
}

/// The package's PackageManifest; `None` when the API is not served and
/// `required` is false.
async fn package_manifest(
    client: &Client,
    namespace: &str,
    package: &str,
    required: bool,
) -> Result<Option<PackageManifest>> {
    let manifests: Api<PackageManifest> = Api::namespaced(client.clone(), namespace);
    match manifests.get_opt(package).await {
        Ok(Some(manifest)) => Ok(Some(manifest)),
        Ok(None) => failure::input(format!(
            "no catalog visible from namespace {namespace} carries package {package}; \
             see `kubectl olm search` for what is available"
        )),
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 503 => {
            if required {
                failure::input(format!(
                    "the PackageManifest API is not available ({}): check packageserver \
                     (`kubectl get apiservice v1.packages.operators.coreos.com`), or pass \
                     --catalog, --catalog-namespace and --channel",
                    status.message
                ))
            } else {
                Ok(None)
            }
        }
        Err(error) => Err(error).context(format!("reading PackageManifest {namespace}/{package}")),
    }
}

/// The target namespaces of the OperatorGroup `install` creates: `--watch`
/// (`*` for all), else the install namespace alone, as kubectl-operator
/// does, unless the operator supports only all namespaces. `None` is all
/// namespaces. Own-namespace by default keeps a new group from
/// intersecting others that provide the same APIs.
fn group_targets(
    namespace: &str,
    watch: &[String],
    all_namespaces_only: bool,
) -> Option<Vec<String>> {
    if watch.iter().any(|w| w == "*") || (watch.is_empty() && all_namespaces_only) {
        None
    } else if watch.is_empty() {
        Some(vec![namespace.to_owned()])
    } else {
        Some(watch.to_vec())
    }
}

/// Makes sure the namespace has exactly one OperatorGroup.
async fn ensure_operator_group(
    client: &Client,
    namespace: &str,
    args: &Args,
    all_namespaces_only: bool,
) -> Result<()> {
    let groups: Api<OperatorGroup> = Api::namespaced(client.clone(), namespace);
    let list = groups
        .list(&ListParams::default())
        .await
        .with_context(|| format!("listing the OperatorGroups of namespace {namespace}"))?;
    match list.items.len() {
        0 if args.create_operator_group => {
            let targets = group_targets(namespace, &args.watch, all_namespaces_only);
            let spec = match &targets {
                None => json!({}),
                Some(targets) => json!({"targetNamespaces": targets}),
            };
            let group: OperatorGroup = serde_json::from_value(json!({
                "apiVersion": "operators.coreos.com/v1",
                "kind": "OperatorGroup",
                "metadata": {"name": namespace, "namespace": namespace},
                "spec": spec,
            }))
            .context("building the OperatorGroup")?;
            groups
                .create(&PostParams::default(), &group)
                .await
                .with_context(|| format!("creating OperatorGroup {namespace}/{namespace}"))?;
            println!(
                "operatorgroup {namespace}/{namespace} created, watching {}",
                targets.map_or_else(|| "all namespaces".to_owned(), |t| t.join(", "))
            );
            Ok(())
        }
        0 => failure::input(format!(
            "namespace {namespace} has no OperatorGroup, so OLM would not install there: pass \
             --create-operator-group (it watches the namespace itself; --watch NS,... or '*' to \
             watch others or all)"
        )),
        1 => Ok(()),
        n => failure::input(format!(
            "namespace {namespace} has {n} OperatorGroups ({}); OLM installs nothing where there \
             is more than one: delete all but one",
            list.items
                .iter()
                .filter_map(|g| g.metadata.name.clone())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// Prints stage lines: rewritten in place on a terminal, one per change
/// otherwise.
struct Progress {
    terminal: bool,
    last: Option<String>,
    started: Instant,
}

impl Progress {
    fn new() -> Self {
        Self {
            terminal: std::io::stdout().is_terminal(),
            last: None,
            started: Instant::now(),
        }
    }

    fn show(&mut self, stage: &Stage) {
        let line = stage.line();
        if self.last.as_deref() == Some(line.as_str()) {
            return;
        }
        let mut out = std::io::stdout().lock();
        if self.terminal {
            let elapsed = self.started.elapsed().as_secs();
            let _ = write!(out, "\r\x1b[2K[{elapsed:>3}s] {line}");
            if stage.is_final() {
                let _ = writeln!(out);
            }
        } else {
            let _ = writeln!(out, "{line}");
        }
        let _ = out.flush();
        self.last = Some(line);
    }

    fn end(&self) {
        if self.terminal && self.last.is_some() {
            println!();
        }
    }
}

/// Follows `package`'s Subscription until the stage is final: Ok on
/// Succeeded, a [`Failure`] naming the object otherwise. `from_csv` is the
/// CSV an upgrade starts from; `approve` says which plan may be approved on
/// the way.
pub(crate) async fn follow(
    client: &Client,
    namespace: &str,
    package: &str,
    from_csv: Option<&str>,
    approve: Approve<'_>,
    timeout: Duration,
) -> Result<()> {
    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), namespace);
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), namespace);
    let deadline = Instant::now() + timeout;
    let mut progress = Progress::new();
    loop {
        let subscription = super::subscription_of(client, namespace, package).await?;
        let status = subscription.status.clone().unwrap_or_default();
        let plan = match status
            .install_plan_ref
            .as_ref()
            .and_then(|r| r.name.clone())
        {
            Some(name) => plans.get_opt(&name).await?,
            None => None,
        };
        let csv = match status.current_csv.as_deref().filter(|c| !c.is_empty()) {
            Some(name) => csvs.get_opt(name).await?,
            None => None,
        };
        let stage = progress::stage(Observed {
            subscription: &subscription,
            plan: plan.as_ref(),
            csv: csv.as_ref(),
            from_csv,
        });
        if let (Stage::WaitingForApproval { plan: name, csvs }, Approve::First(only)) =
            (&stage, approve)
            && status.installed_csv.is_none()
            && only.is_none_or(|csv| csvs.iter().any(|c| c == csv))
        {
            approve_plan(&plans, name).await?;
        }
        progress.show(&stage);
        match stage {
            Stage::Succeeded { csv } => {
                progress.end();
                println!("{package} installed: {csv} Succeeded in namespace {namespace}");
                return Ok(());
            }
            Stage::Failed {
                object,
                cause,
                unresolvable,
            } => {
                progress.end();
                let message =
                    format!("{object}: {cause}; see `kubectl olm status {package} -n {namespace}`");
                return Err(if unresolvable {
                    Failure::Unresolvable(message)
                } else {
                    Failure::Failed(message)
                }
                .into());
            }
            _ => {}
        }
        if Instant::now() >= deadline {
            progress.end();
            return Err(Failure::TimedOut(format!(
                "still {} after {}s; OLM carries on: see `kubectl olm status {package} -n {namespace}`",
                progress.last.clone().unwrap_or_default(),
                timeout.as_secs()
            ))
            .into());
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Sets `spec.approved` on the InstallPlan.
pub(crate) async fn approve_plan(plans: &Api<InstallPlan>, name: &str) -> Result<()> {
    plans
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"approved": true}})),
        )
        .await
        .with_context(|| format!("approving InstallPlan {name}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_created_group_watches_its_own_namespace_unless_told() {
        let own = Some(vec!["team-a".to_owned()]);
        let list = |l: &[&str]| l.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(group_targets("team-a", &[], false), own);
        assert_eq!(group_targets("team-a", &[], true), None);
        assert_eq!(group_targets("team-a", &list(&["*"]), false), None);
        assert_eq!(
            group_targets("team-a", &list(&["team-a", "team-b"]), true),
            Some(list(&["team-a", "team-b"]))
        );
    }
}
