//! `cargo xtask upstream`: builds upstream OLM's own binaries from their Go
//! modules at pinned versions, for the side-by-side benchmarks
//! (`cargo xtask bench --vs-upstream`) and the differential conformance
//! tests (`cargo xtask conformance`). CI never builds them: they are
//! measuring sticks, not test infrastructure the product needs.
//!
//! Each binary lands in [`olm_testkit::assets::upstream_bin_dir`] under a
//! name that carries its version (`opm-v1.65.0`), written through a
//! temporary file, so an interrupted build never leaves a half binary and a
//! version bump never runs a stale one.

use std::{
    path::{Path, PathBuf},
    time::Instant,
};

use anyhow::{Context, Result};
use clap::Args;
use olm_testkit::assets;

use crate::{envtest, workspace_root};

/// Arguments of `cargo xtask upstream`.
#[derive(Debug, Args, Default)]
pub(crate) struct UpstreamArgs {
    /// Rebuild even when this version is already built.
    #[arg(long)]
    pub(crate) force: bool,
}

/// One upstream binary and how its module builds it.
pub(crate) struct Upstream {
    /// The binary's name, before the version suffix.
    pub(crate) name: &'static str,
    /// The wrapper module under `xtask/upstream` that pins it.
    pub(crate) module: &'static str,
    /// The package built inside that module's build list.
    pub(crate) package: &'static str,
    /// The module whose version is pinned.
    pub(crate) pins: &'static str,
    /// The pinned version (the module's), for the file name.
    pub(crate) version: &'static str,
    /// Build tags, as upstream's Makefile passes them.
    pub(crate) tags: &'static str,
    /// The Go variable upstream's Makefile stamps the version into (`-X`),
    /// if any; the value is `v` + [`Upstream::version`].
    pub(crate) version_var: Option<&'static str>,
    /// Whether cgo stays on (opm's sqlite backend needs it).
    pub(crate) cgo: bool,
    /// The variable that names the binary to the bench and tests.
    pub(crate) env: &'static str,
}

/// Upstream's `opm`, built as operator-registry's Makefile builds it.
pub(crate) const OPM: Upstream = Upstream {
    name: "opm",
    module: "xtask/upstream/opm",
    package: "github.com/operator-framework/operator-registry/cmd/opm",
    pins: "github.com/operator-framework/operator-registry",
    version: assets::UPSTREAM_OPM_VERSION,
    tags: "json1,containers_image_openpgp",
    version_var: Some("github.com/operator-framework/operator-registry/cmd/opm/version.opmVersion"),
    cgo: true,
    env: "OLM_UPSTREAM_OPM",
};

/// A harness around upstream OLM's resolver (`xtask/upstream/resolver`),
/// driving it as catalog-operator does.
pub(crate) const OLM_RESOLVER: Upstream = Upstream {
    name: "olm-resolve-upstream",
    module: "xtask/upstream/resolver",
    package: ".",
    pins: "github.com/operator-framework/operator-lifecycle-manager",
    version: assets::UPSTREAM_OLM_VERSION,
    tags: "",
    version_var: None,
    cgo: false,
    env: "OLM_UPSTREAM_RESOLVER",
};

/// A harness printing the RBAC InstallPlan steps upstream OLM builds for a
/// CSV (`xtask/upstream/resolver/rbac`, same module and pins as
/// [`OLM_RESOLVER`]).
pub(crate) const OLM_RBAC: Upstream = Upstream {
    name: "olm-rbac-upstream",
    module: "xtask/upstream/resolver",
    package: "./rbac",
    pins: "github.com/operator-framework/operator-lifecycle-manager",
    version: assets::UPSTREAM_OLM_VERSION,
    tags: "",
    version_var: None,
    cgo: false,
    env: "OLM_UPSTREAM_RBAC",
};

/// One of OLM v0.46.0's own commands (`cmd/olm`, `cmd/catalog`,
/// `cmd/package-server`), built as upstream's Makefile builds it (cgo off,
/// tag `json1`), in the resolver harness's module, whose build list pins
/// OLM. The side-by-side install, scale and packageserver scenarios run
/// them out of cluster against the test control plane.
const fn olm_command(name: &'static str, package: &'static str, env: &'static str) -> Upstream {
    Upstream {
        name,
        module: "xtask/upstream/resolver",
        package,
        pins: "github.com/operator-framework/operator-lifecycle-manager",
        version: assets::UPSTREAM_OLM_VERSION,
        tags: "json1",
        version_var: Some(
            "github.com/operator-framework/operator-lifecycle-manager/pkg/version.OLMVersion",
        ),
        cgo: false,
        env,
    }
}

/// Upstream's olm-operator.
pub(crate) const OLM_OPERATOR: Upstream = olm_command(
    "olm-upstream",
    "github.com/operator-framework/operator-lifecycle-manager/cmd/olm",
    "OLM_UPSTREAM_OLM",
);

/// Upstream's catalog-operator.
pub(crate) const OLM_CATALOG: Upstream = olm_command(
    "catalog-upstream",
    "github.com/operator-framework/operator-lifecycle-manager/cmd/catalog",
    "OLM_UPSTREAM_CATALOG",
);

/// Upstream's packageserver.
pub(crate) const OLM_PACKAGESERVER: Upstream = olm_command(
    "package-server-upstream",
    "github.com/operator-framework/operator-lifecycle-manager/cmd/package-server",
    "OLM_UPSTREAM_PACKAGESERVER",
);

/// What `cargo xtask conformance` compares against.
pub(crate) const CONFORMANCE: &[&Upstream] = &[&OPM, &OLM_RESOLVER, &OLM_RBAC];

/// Every upstream binary `cargo xtask upstream` builds.
pub(crate) const ALL: &[&Upstream] = &[
    &OPM,
    &OLM_RESOLVER,
    &OLM_RBAC,
    &OLM_OPERATOR,
    &OLM_CATALOG,
    &OLM_PACKAGESERVER,
];

impl Upstream {
    /// Where the build of this version lives.
    pub(crate) fn path(&self) -> PathBuf {
        assets::upstream_bin_dir().join(format!("{}-v{}", self.name, self.version))
    }
}

/// `cargo xtask upstream`: build every upstream binary that is missing.
pub(crate) fn run(args: &UpstreamArgs) -> Result<()> {
    for upstream in ALL {
        let path = install(upstream, args.force)?;
        println!("{}", path.display());
    }
    Ok(())
}

/// Builds `upstream` unless this version is already built; returns its path.
pub(crate) fn install(upstream: &Upstream, force: bool) -> Result<PathBuf> {
    let path = upstream.path();
    if path.is_file() && !force {
        return Ok(path);
    }
    envtest::check_go()?;
    let dir = assets::upstream_bin_dir();
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let partial = dir.join(format!(".{}-v{}.partial", upstream.name, upstream.version));
    let started = Instant::now();
    println!(
        "upstream: building {} ({} v{}) from {} (first time: a few minutes)",
        upstream.name, upstream.pins, upstream.version, upstream.module
    );
    let mut command = envtest::go_command(&workspace_root().join(upstream.module));
    command.env("CGO_ENABLED", if upstream.cgo { "1" } else { "0" });
    command.args(["build", "-trimpath"]);
    if !upstream.tags.is_empty() {
        command.arg(format!("-tags={}", upstream.tags));
    }
    let mut ldflags = String::from("-ldflags=-s -w");
    if let Some(var) = upstream.version_var {
        ldflags.push_str(&format!(" -X {var}=v{}", upstream.version));
    }
    command.arg(ldflags);
    command.arg("-o").arg(&partial).arg(upstream.package);
    envtest::run(&mut command)?;
    rename(&partial, &path)?;
    println!(
        "upstream: {} v{} built in {:.0} s",
        upstream.name,
        upstream.version,
        started.elapsed().as_secs_f64()
    );
    Ok(path)
}

fn rename(from: &Path, to: &Path) -> Result<()> {
    std::fs::rename(from, to)
        .with_context(|| format!("moving {} to {}", from.display(), to.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The version in each wrapper module's go.mod is the version the file
    /// name and the binary's version stamp are derived from.
    #[test]
    fn pinned_versions_agree_with_the_wrapper_modules() {
        for upstream in ALL {
            let go_mod =
                std::fs::read_to_string(workspace_root().join(upstream.module).join("go.mod"))
                    .expect("wrapper go.mod");
            // Required directly: alone, or as a line of a require block.
            let line = format!("{} v{}", upstream.pins, upstream.version);
            assert!(
                go_mod
                    .lines()
                    .any(|l| l == format!("require {line}") || l == format!("\t{line}")),
                "{}: go.mod does not require {line} directly",
                upstream.module,
            );
        }
    }
}
