//! Developer tasks for the OLM workspace, run as `cargo xtask <task>`:
//! generating CRDs, installing the real control plane the tests run against,
//! starting a development cluster, and running every test.
//!
//! xtask is a tool, not part of the product: services never depend on it.

mod dev;
mod envtest;
mod image;
mod krew;
mod samples_inventory;
mod upstream;

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};

/// Developer tasks for the OLM workspace.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", version)]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Debug, Subcommand)]
enum Task {
    /// Write the CRD YAML generated from olm-api into deploy/crds and charts/olm/crds.
    Crds,
    /// Regenerate committed generated code (protobuf bindings of the bus events and the registry API).
    Codegen,
    /// Install the pinned control-plane binaries (kube-apiserver, etcd, kwok, NATS, registry, Jaeger) into the cache.
    Envtest(envtest::EnvtestArgs),
    /// Build one OCI image per service and one for opm, without a container
    /// engine, into an OCI layout and/or a registry.
    Image(image::ImageArgs),
    /// Run the whole of OLM on this machine (control plane, real node,
    /// registry, OLM's services, the example catalog) until Ctrl-C.
    Dev(dev::DevArgs),
    /// Refresh the sample ImageStreams and Templates the samples operator
    /// ships (crates/samples-operator/inventory) from upstream's copy.
    SamplesInventory(samples_inventory::SamplesInventoryArgs),
    /// Pack `kubectl-olm` for krew (`kubectl-olm_<os>_<arch>.tar.gz`) and fill
    /// the krew manifest deploy/krew/olm.yaml for a release tag.
    Krew(krew::KrewArgs),
    /// Build upstream OLM's binaries (opm, the resolver and RBAC harnesses)
    /// from their Go modules at pinned versions into the cache, for
    /// `bench --vs-upstream` and `conformance`.
    Upstream(upstream::UpstreamArgs),
    /// Build upstream's opm and harnesses, then run the differential tests
    /// (crates/opm/tests/upstream.rs, crates/olm-resolver/tests/upstream.rs,
    /// crates/olm-plan/tests/upstream.rs) that hold ours to their output.
    Conformance {
        /// Extra arguments passed to the test binary (a test name filter).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Run a service against the development cluster of `cargo xtask dev`
    /// (KUBECONFIG defaults to .cache/dev/kubeconfig when it exists).
    Run {
        /// The service's package, for example `olm-operator`.
        service: String,
        /// Arguments passed to the service.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Run a benchmark scenario and print its figures (`cargo xtask bench --list` names them).
    Bench {
        /// The scenario, for example `catalog` or `resolve`.
        #[arg(required_unless_present = "list")]
        scenario: Option<String>,
        /// List the scenarios and the bench targets they run.
        #[arg(long)]
        list: bool,
        /// Run ours and upstream's alternately on the same input, building
        /// upstream's binaries first (`--list` names the bench targets).
        #[arg(long)]
        vs_upstream: bool,
        /// Extra arguments passed to the bench binary.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Install what is missing, then run every test in the workspace.
    Test {
        /// Extra arguments passed to `cargo test`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        cargo_args: Vec<String>,
    },
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.task {
        Task::Crds => crds(),
        Task::Codegen => codegen(),
        Task::Envtest(args) => envtest::install(&args),
        Task::Image(args) => image::build(&args),
        Task::Dev(args) => dev::run(&args),
        Task::SamplesInventory(args) => samples_inventory::refresh(&args),
        Task::Krew(args) => krew::run(&args),
        Task::Run { service, args } => run(&service, &args),
        Task::Upstream(args) => upstream::run(&args),
        Task::Conformance { args } => conformance(&args),
        Task::Bench {
            scenario,
            list,
            vs_upstream: true,
            args,
        } => bench_vs_upstream(scenario.as_deref(), list, &args),
        Task::Bench {
            scenario,
            list,
            vs_upstream: false,
            args,
        } => bench(scenario.as_deref(), list, &args),
        Task::Test { cargo_args } => test(&cargo_args),
    }
}

/// The workspace root (xtask lives one level below it).
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_owned)
}

fn crds() -> Result<()> {
    let root = workspace_root();
    for dir in [root.join("deploy/crds"), root.join("charts/olm/crds")] {
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let written = olm_api::crd::write_all(&dir)
            .with_context(|| format!("writing CRDs into {}", dir.display()))?;
        println!("wrote {} CRDs into {}", written.len(), dir.display());
    }
    Ok(())
}

/// Crates whose generated code is owned by a `codegen_fresh` test.
const CODEGEN_CRATES: &[&str] = &["olm-bus", "olm-registry"];

fn codegen() -> Result<()> {
    // Each freshness test owns its generator: blessing it rewrites the files,
    // so a generator and its check can never disagree.
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    for krate in CODEGEN_CRATES {
        let status = Command::new(&cargo)
            .current_dir(workspace_root())
            .args(["test", "--quiet", "-p", krate, "--test", "codegen_fresh"])
            .env("OLM_BLESS", "1")
            .status()
            .context("running cargo test")?;
        if !status.success() {
            bail!("regenerating the protobuf code of {krate} failed ({status})");
        }
        println!("regenerated crates/{krate}/src/gen");
    }
    Ok(())
}

fn run(service: &str, args: &[String]) -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut command = Command::new(cargo);
    command
        .current_dir(workspace_root())
        .args(["run", "-p", service, "--"])
        .args(args);
    let dev_kubeconfig = workspace_root().join(".cache/dev/kubeconfig");
    if std::env::var_os("KUBECONFIG").is_none() && dev_kubeconfig.exists() {
        println!("KUBECONFIG={}", dev_kubeconfig.display());
        command.env("KUBECONFIG", &dev_kubeconfig);
    }
    // Nothing listens beyond loopback on a developer's machine.
    if std::env::var_os("OLM_ADMIN_BIND_ADDRESS").is_none() {
        command.env("OLM_ADMIN_BIND_ADDRESS", "127.0.0.1:8080");
    }
    let status = command.status().context("running cargo run")?;
    if !status.success() {
        bail!("{service} exited with {status}");
    }
    Ok(())
}

/// A benchmark scenario: a `harness = false` bench target of one package
/// that prints its own figures.
struct Scenario {
    name: &'static str,
    package: &'static str,
    bench: &'static str,
    what: &'static str,
}

/// Every scenario `cargo xtask bench` knows. A crate adds its bench target
/// (`[[bench]] harness = false`) and one line here.
const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "catalog",
        package: "olm-registry",
        bench: "serve",
        what: "registry start-up, first ListPackages, GetBundleForChannel latency and RSS on a large synthetic catalog",
    },
    Scenario {
        name: "scale",
        package: "olm-operator",
        bench: "scale",
        what: "olm-operator on a real control plane: 1,000 namespaces, 10 AllNamespaces operators; RSS, CPU seconds, API writes, copies with disableCopiedCSVs",
    },
    Scenario {
        name: "packageserver",
        package: "packageserver",
        bench: "list",
        what: "PackageManifest LIST/GET latency through the aggregator, RSS and catalog-update visibility with 3 x 1,000 packages",
    },
    Scenario {
        name: "resolve",
        package: "olm-resolver",
        bench: "resolve",
        what: "resolution p50/p99 and peak RSS: 10 and 100 subscriptions with transitive requirements against 3 catalogs of 20,000 bundles",
    },
    Scenario {
        name: "install",
        package: "olm-e2e",
        bench: "install",
        what: "Subscription -> CSV Succeeded on a real control plane: p50 of 20 sequential installs, 20 at once, API requests per install (audit log)",
    },
];

fn bench(scenario: Option<&str>, list: bool, args: &[String]) -> Result<()> {
    if list {
        for s in SCENARIOS {
            println!(
                "{:<14} cargo bench -p {} --bench {}\n{:<14} {}",
                s.name, s.package, s.bench, "", s.what
            );
        }
        return Ok(());
    }
    let name = scenario.context("a scenario name is required")?;
    let Some(s) = SCENARIOS.iter().find(|s| s.name == name) else {
        let known: Vec<&str> = SCENARIOS.iter().map(|s| s.name).collect();
        bail!(
            "unknown bench scenario {name:?}; known: {}",
            known.join(", ")
        );
    };
    let needs_cluster = matches!(s.name, "scale" | "packageserver" | "install");
    if needs_cluster {
        envtest::install(&envtest::EnvtestArgs::default())?;
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let status = Command::new(cargo)
        .current_dir(workspace_root())
        .args(["bench", "-p", s.package, "--bench", s.bench, "--"])
        .args(args)
        .status()
        .context("running cargo bench")?;
    if !status.success() {
        bail!("bench {name} failed ({status})");
    }
    Ok(())
}

/// A scenario of `cargo xtask bench --vs-upstream`: ours and upstream's on
/// the same input, alternately, in one run.
struct VsUpstream {
    name: &'static str,
    what: &'static str,
    /// Upstream's binaries it runs.
    needs: &'static [&'static upstream::Upstream],
    /// The package and bench target that run it, and the arguments that
    /// select it.
    package: &'static str,
    bench: &'static str,
    args: &'static [&'static str],
    /// Whether it runs on the test control plane (`cargo xtask envtest`).
    cluster: bool,
}

/// Every side-by-side scenario: the single-process ones run in
/// `crates/opm/benches/vs_upstream.rs`, the ones on a control plane in the
/// bench of the service they measure.
const VS_UPSTREAM: &[VsUpstream] = &[
    VsUpstream {
        name: "catalog",
        what: "opm serve: spawn to first ListPackages, peak RSS, GetPackage and GetBundleForChannel latency on one connection; the corpus catalogs and a generated one (upstream with and without its pre-built cache)",
        needs: &[&upstream::OPM],
        package: "opm",
        bench: "vs_upstream",
        args: &["--scenario=catalog"],
        cluster: false,
    },
    VsUpstream {
        name: "render",
        what: "opm render of the same catalogs: wall time and peak RSS",
        needs: &[&upstream::OPM],
        package: "opm",
        bench: "vs_upstream",
        args: &["--scenario=render"],
        cluster: false,
    },
    VsUpstream {
        name: "validate",
        what: "opm validate of the same catalogs: wall time and peak RSS",
        needs: &[&upstream::OPM],
        package: "opm",
        bench: "vs_upstream",
        args: &["--scenario=validate"],
        cluster: false,
    },
    VsUpstream {
        name: "resolve",
        what: "the resolver: the same Subscriptions against the same catalogs (a real one; three generated ones of 20,000 entries with requirement chains), load and resolve times, decisions compared",
        needs: &[&upstream::OLM_RESOLVER],
        package: "opm",
        bench: "vs_upstream",
        args: &["--scenario=resolve"],
        cluster: false,
    },
    VsUpstream {
        name: "install",
        what: "Subscription -> CSV Succeeded with catalog-operator and olm-operator run as processes against a fresh control plane per run (bundle content in the catalog, so no unpacking): p50/p90 of sequential installs, N at once, API requests per install from the audit log, the operators' peak RSS",
        needs: &[&upstream::OLM_OPERATOR, &upstream::OLM_CATALOG],
        package: "olm-e2e",
        bench: "install",
        args: &["--vs-upstream"],
        cluster: true,
    },
    VsUpstream {
        name: "scale",
        what: "olm-operator at 1,000 namespaces with 10 AllNamespaces operators, on a fresh control plane per run: time and CPU seconds to converge (every copy written), API writes (audit log), peak RSS, disableCopiedCSVs",
        needs: &[&upstream::OLM_OPERATOR],
        package: "olm-operator",
        bench: "scale",
        args: &["--vs-upstream"],
        cluster: true,
    },
    VsUpstream {
        name: "packageserver",
        what: "packageserver through the aggregator (two replicas in network namespaces, three catalogs of 1,000 packages), on a fresh control plane per run: time until LIST shows the catalogs, full LIST and GET p50/p99, LIST by label, catalog-update visibility, replicas' RSS and CPU (needs root)",
        needs: &[&upstream::OLM_PACKAGESERVER],
        package: "packageserver",
        bench: "list",
        args: &["--vs-upstream"],
        cluster: true,
    },
];

fn bench_vs_upstream(scenario: Option<&str>, list: bool, args: &[String]) -> Result<()> {
    if list {
        for s in VS_UPSTREAM {
            println!(
                "{:<14} cargo bench -p {} --bench {} -- {}\n{:<14} {}",
                s.name,
                s.package,
                s.bench,
                s.args.join(" "),
                "",
                s.what
            );
        }
        return Ok(());
    }
    let name = scenario.context("a scenario name is required")?;
    let scenarios: Vec<&VsUpstream> = if name == "all" {
        VS_UPSTREAM.iter().collect()
    } else {
        let Some(s) = VS_UPSTREAM.iter().find(|s| s.name == name) else {
            let known: Vec<&str> = VS_UPSTREAM.iter().map(|s| s.name).collect();
            bail!(
                "no side-by-side scenario {name:?}; known: {}, all",
                known.join(", ")
            );
        };
        vec![s]
    };
    if scenarios.iter().any(|s| s.cluster) {
        envtest::install(&envtest::EnvtestArgs::default())?;
    }
    // One `cargo bench` per bench target, its scenarios' arguments together.
    let mut targets: Vec<(&str, &str)> = Vec::new();
    for s in &scenarios {
        if !targets.contains(&(s.package, s.bench)) {
            targets.push((s.package, s.bench));
        }
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    for (package, bench) in targets {
        let mut command = Command::new(&cargo);
        command
            .current_dir(workspace_root())
            .args(["bench", "-p", package, "--bench", bench, "--"]);
        for s in scenarios
            .iter()
            .filter(|s| (s.package, s.bench) == (package, bench))
        {
            for needed in s.needs {
                let path = upstream::install(needed, false)?;
                command.env(needed.env, path);
            }
            command.args(s.args);
        }
        let status = command.args(args).status().context("running cargo bench")?;
        if !status.success() {
            bail!("bench --vs-upstream {name} ({package} {bench}) failed ({status})");
        }
    }
    Ok(())
}

fn conformance(args: &[String]) -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut command = Command::new(cargo);
    command.current_dir(workspace_root()).args([
        "test",
        "-p",
        "opm",
        "-p",
        "olm-resolver",
        "-p",
        "olm-plan",
        "--test",
        "upstream",
        "--",
    ]);
    for needed in upstream::CONFORMANCE {
        command.env(needed.env, upstream::install(needed, false)?);
    }
    // Without upstream's binaries these tests skip; here they must run.
    let status = command
        .args(args)
        .env("OLM_REQUIRE_UPSTREAM", "1")
        .status()
        .context("running cargo test")?;
    if !status.success() {
        bail!(
            "the differential tests against upstream opm v{} and OLM v{} failed ({status})",
            upstream::OPM.version,
            upstream::OLM_RESOLVER.version
        );
    }
    Ok(())
}

fn test(cargo_args: &[String]) -> Result<()> {
    envtest::install(&envtest::EnvtestArgs::default())?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let status = Command::new(cargo)
        .current_dir(workspace_root())
        .args(["test", "--workspace", "--no-fail-fast"])
        .args(cargo_args)
        .status()
        .context("running cargo test")?;
    if !status.success() {
        bail!("tests failed ({status})");
    }
    Ok(())
}
