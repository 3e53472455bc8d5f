//! `cargo xtask envtest`: installs the real components the tests run against,
//! pinned by version, into the cache folder that `olm-testkit` reads.
//!
//! - kube-apiserver, kube-controller-manager, kube-scheduler and kubectl are
//!   built from the Go module `k8s.io/kubernetes` at the release pinned in
//!   `xtask/envtest/go.mod` (which carries the `replace` directives its
//!   staging modules need);
//! - kwok is built from `sigs.k8s.io/kwok` at [`olm_testkit::assets::KWOK_VERSION`];
//! - etcd is built from `go.etcd.io/etcd/server/v3` at the release pinned in
//!   `xtask/envtest/etcd/go.mod` (Debian's 3.4 is too old for Kubernetes 1.34);
//! - Jaeger (v2, the trace store tests read exported spans from) is built
//!   from `github.com/jaegertracing/jaeger` at [`assets::JAEGER_VERSION`],
//!   pinned in `xtask/envtest/jaeger/go.mod` (its module has a `replace`, so
//!   `go install` refuses it), beside Kubernetes with a stamp of its own;
//! - grpcurl, helm, krew (the `kubectl olm` release test) and promtool (the
//!   alerts' unit tests) are built from their Go modules at
//!   [`assets::GRPCURL_VERSION`], [`assets::HELM_VERSION`],
//!   [`assets::KREW_VERSION`] and [`assets::PROMTOOL_VERSION`], while
//!   Kubernetes builds (each has its own stamp, so adding or bumping one does
//!   not rebuild the control plane);
//! - nats-server, the OCI registry and the real node's runtime come from
//!   Debian's packages (`nats-server`, `docker-registry`, `containerd`,
//!   `runc`, `containernetworking-plugins`, `iptables`).

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

use anyhow::{Context, Result, bail};
use olm_testkit::assets;

use crate::workspace_root;

/// Options of `cargo xtask envtest`.
#[derive(Debug, Default, clap::Args)]
pub(crate) struct EnvtestArgs {
    /// Rebuild even when the cache is complete.
    #[arg(long)]
    force: bool,
}

/// The Kubernetes commands built from `k8s.io/kubernetes`.
const KUBERNETES_COMMANDS: &[&str] = &[
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    // The real node (`olm_testkit::node`).
    "kubelet",
    "kube-proxy",
];

/// Debian packages and the command each one provides (a name looked up on
/// `PATH`, or an absolute path).
const DEBIAN_PACKAGES: &[(&str, &str)] = &[
    ("nats-server", "nats-server"),
    ("docker-registry", "docker-registry"),
    // `ip netns` and veth pairs: packageserver's aggregation tests.
    ("iproute2", "ip"),
    // The real node: container runtime, pod network, Service routing.
    ("containerd", "containerd"),
    ("runc", "runc"),
    ("containernetworking-plugins", "/usr/lib/cni/bridge"),
    ("iptables", "iptables"),
];

/// A Go command built with `go install package@version`, with its own stamp.
struct GoTool {
    name: &'static str,
    package: &'static str,
    version: &'static str,
    /// Linker flags beyond `-s -w`.
    ldflags: fn() -> String,
}

/// The Go tools beside the control plane.
const GO_TOOLS: &[GoTool] = &[
    GoTool {
        name: "grpcurl",
        package: "github.com/fullstorydev/grpcurl/cmd/grpcurl",
        version: assets::GRPCURL_VERSION,
        ldflags: String::new,
    },
    GoTool {
        name: "helm",
        package: "helm.sh/helm/v3/cmd/helm",
        version: assets::HELM_VERSION,
        ldflags: helm_ldflags,
    },
    GoTool {
        name: "krew",
        package: "sigs.k8s.io/krew/cmd/krew",
        version: assets::KREW_VERSION,
        ldflags: String::new,
    },
    GoTool {
        name: "promtool",
        package: "github.com/prometheus/prometheus/cmd/promtool",
        version: assets::PROMTOOL_VERSION,
        ldflags: String::new,
    },
];

/// What Helm's own build stamps in: its version, and the Kubernetes release
/// `helm template` and `helm lint` assume (without it they assume 1.20 and
/// refuse a chart that needs newer).
fn helm_ldflags() -> String {
    let mut parts = assets::KUBERNETES_VERSION.split('.');
    let major = parts.next().unwrap_or("1");
    let minor = parts.next().unwrap_or("0");
    let mut flags = format!(
        "-X helm.sh/helm/v3/internal/version.version=v{}",
        assets::HELM_VERSION
    );
    for package in [
        "helm.sh/helm/v3/pkg/chartutil",
        "helm.sh/helm/v3/pkg/lint/rules",
    ] {
        flags.push_str(&format!(
            " -X {package}.k8sVersionMajor={major} -X {package}.k8sVersionMinor={minor}"
        ));
    }
    flags
}

pub(crate) fn install(args: &EnvtestArgs) -> Result<()> {
    let started = Instant::now();
    install_debian_packages()?;
    let bin = assets::bin_dir();
    std::fs::create_dir_all(&bin).with_context(|| format!("creating {}", bin.display()))?;
    // The small Go tools build beside Kubernetes: their module downloads
    // overlap its compilation.
    let force = args.force;
    let tools_bin = bin.clone();
    let tools = std::thread::spawn(move || -> Result<()> {
        for tool in GO_TOOLS {
            install_go_tool(&tools_bin, tool, force)?;
        }
        Ok(())
    });
    // Jaeger is the biggest of them (a few minutes from a cold module
    // cache), so it gets a thread of its own.
    let jaeger_bin = bin.clone();
    let jaeger = std::thread::spawn(move || install_jaeger(&jaeger_bin, force));
    let kubernetes = install_control_plane(&bin, force);
    let tools = tools
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    let jaeger = jaeger
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    kubernetes?;
    tools?;
    jaeger?;
    println!("envtest: done in {:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// Kubernetes, etcd and kwok, unless the stamp says this set is installed.
fn install_control_plane(bin: &Path, force: bool) -> Result<()> {
    let started = Instant::now();
    let stamp = bin.join(format!(
        ".installed-k8s-{}-etcd-{}-kwok-{}",
        assets::KUBERNETES_VERSION,
        assets::ETCD_VERSION,
        assets::KWOK_VERSION
    ));
    let complete = stamp.exists()
        && KUBERNETES_COMMANDS
            .iter()
            .chain(["kwok", "etcd"].iter())
            .all(|name| bin.join(name).exists());
    if complete && !force {
        println!("envtest: control plane up to date in {}", bin.display());
        return Ok(());
    }
    check_go()?;
    build_kubernetes(bin)?;
    build_etcd(bin)?;
    build_kwok(bin)?;
    std::fs::write(&stamp, "").with_context(|| format!("writing {}", stamp.display()))?;
    println!(
        "envtest: installed Kubernetes {}, etcd {} and kwok {} into {} in {:.0} s",
        assets::KUBERNETES_VERSION,
        assets::ETCD_VERSION,
        assets::KWOK_VERSION,
        bin.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn install_debian_packages() -> Result<()> {
    let missing: Vec<&str> = DEBIAN_PACKAGES
        .iter()
        .filter(|(_, command)| {
            if command.starts_with('/') {
                !Path::new(command).exists()
            } else {
                assets::find(command).is_err()
            }
        })
        .map(|(package, _)| *package)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    if assets::find("apt-get").is_err() || !assets::is_root() {
        bail!(
            "missing commands from Debian packages {missing:?}; install them (apt-get install {})",
            missing.join(" ")
        );
    }
    println!("envtest: installing Debian packages {missing:?}");
    run(Command::new("apt-get").arg("update").arg("-q"))?;
    run(Command::new("apt-get")
        .args(["install", "-y", "-q", "--no-install-recommends"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive"))?;
    Ok(())
}

pub(crate) fn check_go() -> Result<()> {
    let output = Command::new("go").arg("version").output().context(
        "the Go toolchain is needed to build kube-apiserver and kwok (https://go.dev/dl)",
    )?;
    println!(
        "envtest: {}",
        String::from_utf8_lossy(&output.stdout).trim()
    );
    Ok(())
}

pub(crate) fn go_command(dir: &Path) -> Command {
    let mut command = Command::new("go");
    command
        .current_dir(dir)
        // Never fetch another toolchain: the pinned modules build with any Go
        // at least as new as their go.mod asks for.
        .env("GOTOOLCHAIN", "local")
        .env("CGO_ENABLED", "0")
        .env("GOFLAGS", "-mod=mod -buildvcs=false");
    command
}

fn build_kubernetes(bin: &Path) -> Result<()> {
    let module = workspace_root().join("xtask/envtest");
    let started = Instant::now();
    println!(
        "envtest: building {} from k8s.io/kubernetes v{} (first time: several minutes)",
        KUBERNETES_COMMANDS.join(", "),
        assets::KUBERNETES_VERSION
    );
    let packages: Vec<String> = KUBERNETES_COMMANDS
        .iter()
        .map(|name| format!("k8s.io/kubernetes/cmd/{name}"))
        .collect();
    let mut out_dir = PathBuf::from(bin);
    out_dir.push("");
    run(go_command(&module)
        .args(["build", "-trimpath"])
        .arg(format!("-ldflags=-s -w {}", version_ldflags()))
        .arg("-o")
        .arg(&out_dir)
        .args(&packages))?;
    println!(
        "envtest: Kubernetes built in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Stamps the release into the binaries, as Kubernetes' own build does, so
/// that `/version` and `kubectl version` report it (a module build otherwise
/// says `v0.0.0-master`).
fn version_ldflags() -> String {
    let version = assets::KUBERNETES_VERSION;
    let mut parts = version.split('.');
    let major = parts.next().unwrap_or("1");
    let minor = parts.next().unwrap_or("0");
    [
        "k8s.io/component-base/version",
        "k8s.io/client-go/pkg/version",
    ]
    .iter()
    .map(|package| {
        format!(
            "-X {package}.gitVersion=v{version} -X {package}.gitMajor={major} \
                 -X {package}.gitMinor={minor} -X {package}.gitTreeState=clean"
        )
    })
    .collect::<Vec<_>>()
    .join(" ")
}

fn build_etcd(bin: &Path) -> Result<()> {
    let started = Instant::now();
    run(go_command(&workspace_root().join("xtask/envtest/etcd"))
        .args(["build", "-trimpath", "-ldflags=-s -w", "-o"])
        .arg(bin.join("etcd"))
        .arg("go.etcd.io/etcd/server/v3"))?;
    println!(
        "envtest: etcd built in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Jaeger from `xtask/envtest/jaeger`, unless its stamp says this version is
/// installed.
fn install_jaeger(bin: &Path, force: bool) -> Result<()> {
    let version = assets::JAEGER_VERSION;
    // The stamp names the build: bump the suffix when the build changes.
    let stamp = bin.join(format!(".installed-jaeger-{version}-1"));
    if stamp.exists() && bin.join("jaeger").exists() && !force {
        return Ok(());
    }
    check_go()?;
    let started = Instant::now();
    println!("envtest: building jaeger {version} (first time: a few minutes)");
    run(go_command(&workspace_root().join("xtask/envtest/jaeger"))
        .args(["build", "-trimpath", "-ldflags=-s -w", "-o"])
        .arg(bin.join("jaeger"))
        .arg("github.com/jaegertracing/jaeger/cmd/jaeger"))?;
    std::fs::write(&stamp, "").with_context(|| format!("writing {}", stamp.display()))?;
    println!(
        "envtest: jaeger {version} built in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// A Go command built from its module at a pinned version, with its own
/// stamp so that adding or bumping it does not rebuild the control plane.
fn install_go_tool(bin: &Path, tool: &GoTool, force: bool) -> Result<()> {
    let GoTool {
        name,
        package,
        version,
        ldflags,
    } = tool;
    let ldflags = ldflags();
    // The stamp names the build: a change of linker flags rebuilds.
    let stamp = bin.join(format!(".installed-{name}-{version}-2"));
    if stamp.exists() && bin.join(name).exists() && !force {
        return Ok(());
    }
    check_go()?;
    let started = Instant::now();
    let scratch = tempfile_dir(name)?;
    run(go_command(&scratch)
        .env("GOBIN", bin)
        .args(["install", "-trimpath"])
        .arg(format!("-ldflags=-s -w {ldflags}"))
        .arg(format!("{package}@v{version}")))?;
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::write(&stamp, "").with_context(|| format!("writing {}", stamp.display()))?;
    println!(
        "envtest: {name} {version} built in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn build_kwok(bin: &Path) -> Result<()> {
    let started = Instant::now();
    let scratch = tempfile_dir("kwok")?;
    run(go_command(&scratch)
        .env("GOBIN", bin)
        .args(["install", "-trimpath", "-ldflags=-s -w"])
        .arg(format!(
            "sigs.k8s.io/kwok/cmd/kwok@v{}",
            assets::KWOK_VERSION
        )))?;
    let _ = std::fs::remove_dir_all(&scratch);
    println!(
        "envtest: kwok built in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `go install pkg@version` must run outside any module.
fn tempfile_dir(name: &str) -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("olm-xtask-go-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

pub(crate) fn run(command: &mut Command) -> Result<()> {
    let status = command
        .status()
        .with_context(|| format!("running {command:?}"))?;
    if !status.success() {
        bail!("{command:?} failed ({status})");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Go module and the test kit must name the same Kubernetes release,
    /// or the kit would look for binaries in a folder nobody fills.
    #[test]
    fn go_module_pins_the_release_the_test_kit_expects() {
        let go_mod = std::fs::read_to_string(workspace_root().join("xtask/envtest/go.mod"))
            .expect("xtask/envtest/go.mod");
        let wanted = format!("k8s.io/kubernetes v{}", assets::KUBERNETES_VERSION);
        assert!(go_mod.contains(&wanted), "go.mod does not require {wanted}");
        let etcd_mod = std::fs::read_to_string(workspace_root().join("xtask/envtest/etcd/go.mod"))
            .expect("xtask/envtest/etcd/go.mod");
        let wanted_etcd = format!("go.etcd.io/etcd/server/v3 v{}", assets::ETCD_VERSION);
        assert!(
            etcd_mod.contains(&wanted_etcd),
            "etcd go.mod does not require {wanted_etcd}"
        );
        let jaeger_mod =
            std::fs::read_to_string(workspace_root().join("xtask/envtest/jaeger/go.mod"))
                .expect("xtask/envtest/jaeger/go.mod");
        let wanted_jaeger = format!(
            "require github.com/jaegertracing/jaeger v{}\n",
            assets::JAEGER_VERSION
        );
        assert!(
            jaeger_mod.contains(&wanted_jaeger),
            "jaeger go.mod does not require {wanted_jaeger} directly (run go mod tidy there)"
        );
        let staging = assets::KUBERNETES_VERSION.replacen('1', "0", 1);
        for line in go_mod.lines().filter(|line| line.contains(" => ")) {
            assert!(
                line.trim_end().ends_with(&format!("v{staging}")),
                "staging replace not at v{staging}: {line}"
            );
        }
    }
}
