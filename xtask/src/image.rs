//! `cargo xtask image`: one OCI image per service, one for `opm`, one for
//! the example operator and one for NATS (Debian's `nats-server`, which the
//! Helm chart runs), built without a container engine by `olm_images` (see
//! its crate documentation for what an image holds).
//!
//! Images are written to an OCI image layout (`--oci-layout`) and/or pushed
//! to a registry (`--push`). One architecture is built: this machine's. A
//! multi-arch image would be one such image per architecture, built on (or
//! cross-compiled for) each, pushed by digest and tied together by an OCI
//! image index; `olm_oci` reads such indexes already.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail};
use olm_images::BinaryImage;
use olm_oci::BuiltImage;

use crate::workspace_root;

/// The images built: (cargo package, binary).
pub(crate) const IMAGES: &[(&str, &str)] = &[
    ("olm-operator", "olm-operator"),
    ("catalog-operator", "catalog-operator"),
    ("packageserver", "packageserver"),
    ("bundle-unpacker", "bundle-unpacker"),
    ("marketplace-operator", "marketplace-operator"),
    ("samples-operator", "samples-operator"),
    ("opm", "opm"),
    ("example-operator", "example-operator"),
];

/// Options of `cargo xtask image`.
#[derive(Debug, clap::Args)]
pub(crate) struct ImageArgs {
    /// Push each image to this registry (`host[:port][/prefix]`), as
    /// `<registry>/<name>:<tag>`. Loopback registries are reached over
    /// plain HTTP.
    #[arg(long)]
    push: Option<String>,
    /// Write the images into this OCI image layout folder.
    #[arg(long)]
    oci_layout: Option<PathBuf>,
    /// The cargo profile the binaries are built with.
    #[arg(long, default_value = "release")]
    profile: String,
    /// The tag (defaults to the workspace version).
    #[arg(long)]
    tag: Option<String>,
    /// Build only these images (by name); all when none is given.
    #[arg(long = "only", value_delimiter = ',')]
    only: Vec<String>,
}

pub(crate) fn build(args: &ImageArgs) -> Result<()> {
    if args.push.is_none() && args.oci_layout.is_none() {
        bail!("say where the images go: --push REGISTRY and/or --oci-layout DIR");
    }
    let selected: Vec<(&str, &str)> = IMAGES
        .iter()
        .copied()
        .filter(|(_, bin)| args.only.is_empty() || args.only.iter().any(|o| o == bin))
        .collect();
    let with_nats = args.only.is_empty() || args.only.iter().any(|o| o == olm_images::NATS);
    if selected.is_empty() && !with_nats {
        bail!(
            "no image named {:?}; the images are {:?} and {:?}",
            args.only,
            IMAGES.iter().map(|(_, b)| *b).collect::<Vec<_>>(),
            olm_images::NATS
        );
    }
    let root = workspace_root();
    let mut cargo = Command::new(env!("CARGO"));
    cargo
        .current_dir(&root)
        .args(["build", "--profile", &args.profile]);
    for (package, bin) in &selected {
        cargo.args(["-p", package, "--bin", bin]);
    }
    if !selected.is_empty() {
        let status = cargo.status().context("running cargo build")?;
        if !status.success() {
            bail!("building the binaries failed ({status})");
        }
    }
    let profile_dir = if args.profile == "dev" {
        "debug"
    } else {
        &args.profile
    };
    let tag = args
        .tag
        .clone()
        .unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_owned());
    let revision = olm_images::git_revision();
    let runtime = tokio::runtime::Runtime::new().context("starting tokio")?;
    let mut images = Vec::new();
    for (_, bin) in selected {
        let binary = root.join("target").join(profile_dir).join(bin);
        images.push((
            bin,
            tag.clone(),
            service_image(bin, &binary, &tag, &revision)?,
        ));
    }
    if with_nats {
        let (version, image) = olm_images::nats_image(&revision)?;
        images.push((olm_images::NATS, version, image));
    }
    for (bin, tag, image) in images {
        let name = format!("{bin}:{tag}");
        if let Some(dir) = &args.oci_layout {
            image
                .write_oci_layout(dir, &name)
                .with_context(|| format!("writing {name} to {}", dir.display()))?;
        }
        if let Some(registry) = &args.push {
            let reference = format!("{}/{name}", registry.trim_end_matches('/'));
            let pushed = runtime.block_on(olm_images::push(&reference, &image))?;
            println!("image: {bin} {} pushed as {pushed}", image.manifest_digest);
        } else {
            println!("image: {bin} {}", image.manifest_digest);
        }
    }
    Ok(())
}

/// The image of one binary: opm goes where upstream's opm image has it
/// (`/bin/opm`), so that catalog images built on it with upstream's
/// Dockerfile (`ENTRYPOINT ["/bin/opm"]`) run.
pub(crate) fn service_image(
    name: &str,
    binary: &Path,
    tag: &str,
    revision: &str,
) -> Result<BuiltImage> {
    BinaryImage {
        name,
        binary,
        install_path: (name == "opm").then_some("bin/opm"),
        tag,
        revision,
    }
    .build()
}
