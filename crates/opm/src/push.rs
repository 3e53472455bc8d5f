//! `opm alpha bundle push` and `opm alpha catalog push`: build an image from
//! a bundle or catalog directory with upstream's layout and labels, and push
//! it over the distribution API, with no container engine.
//!
//! A bundle image holds `/manifests/`, `/metadata/` (and
//! `/tests/scorecard/` when present) and carries every annotation of
//! `metadata/annotations.yaml` as a label, as upstream's generated
//! `bundle.Dockerfile` does. A catalog image holds the catalog at
//! `/configs` with the `operators.operatorframework.io.index.configs.v1`
//! label. Both are validated before anything is pushed.

use std::process::ExitCode;

use anyhow::{Context as _, bail};
use olm_catalog::{
    bundle::RegistryBundle,
    fbc::Catalog,
    validate::{validate_bundle, validate_catalog},
};
use olm_oci::{ImageBuilder, Reference};

use crate::{
    cli::{PushArgs, TlsOptions},
    images::{CONFIGS_DIR, CONFIGS_LOCATION_LABEL, client_for},
};

/// Bundle directories copied into a bundle image.
const BUNDLE_DIRS: [&str; 3] = ["manifests", "metadata", "tests/scorecard"];

pub(crate) async fn bundle(args: &PushArgs, tls: &TlsOptions) -> anyhow::Result<ExitCode> {
    let reference = parse(&args.image)?;
    let bundle = RegistryBundle::load_dir(&args.dir)
        .with_context(|| format!("read bundle {}", args.dir.display()))?;
    let report = validate_bundle(&bundle);
    if !report.is_valid() {
        bail!("invalid bundle {}:\n{report}", args.dir.display());
    }
    let mut builder = ImageBuilder::new().labels(bundle.annotations.clone());
    for dir in BUNDLE_DIRS {
        let source = args.dir.join(dir);
        if source.is_dir() {
            builder = builder.add_dir(&source, dir)?;
        }
    }
    push(&reference, builder, tls, args.insecure).await
}

pub(crate) async fn catalog(args: &PushArgs, tls: &TlsOptions) -> anyhow::Result<ExitCode> {
    let reference = parse(&args.image)?;
    let catalog = Catalog::load_dir(&args.dir)
        .with_context(|| format!("read catalog {}", args.dir.display()))?;
    let report = validate_catalog(&catalog);
    if !report.is_valid() {
        bail!("invalid catalog {}:\n{report}", args.dir.display());
    }
    let builder = ImageBuilder::new()
        .label(CONFIGS_LOCATION_LABEL, CONFIGS_DIR)
        .add_dir(&args.dir, CONFIGS_DIR)?;
    push(&reference, builder, tls, args.insecure).await
}

fn parse(image: &str) -> anyhow::Result<Reference> {
    Reference::parse(image).with_context(|| format!("invalid image reference {image:?}"))
}

async fn push(
    reference: &Reference,
    builder: ImageBuilder,
    tls: &TlsOptions,
    insecure: bool,
) -> anyhow::Result<ExitCode> {
    let image = builder.build()?;
    let client = client_for(reference, tls, insecure)?;
    let digest = client
        .push_image(reference, &image)
        .await
        .with_context(|| format!("push {reference}"))?;
    println!("{}@{digest}", reference.name());
    Ok(ExitCode::SUCCESS)
}
