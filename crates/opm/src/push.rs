//! `opm alpha bundle push` and `opm alpha catalog push`: build an image from
//! a bundle or catalog directory with upstream's layout and labels, and push
//! it over the distribution API, with no container engine.
//!
//! A bundle image holds `/manifests/`, `/metadata/` (and
//! `/tests/scorecard/` when present) and carries every annotation of
//! `metadata/annotations.yaml` as a label, as upstream's generated
//! `bundle.Dockerfile` does. A catalog image holds the catalog at
//! `/configs` with the `operators.operatorframework.io.index.configs.v1`
//! label, on top of a base image whose `/bin/opm` serves it (the entrypoint
//! and command of upstream's generated catalog Dockerfile), or alone when
//! the base is `scratch`. Both are validated, and the base pulled, before
//! anything is pushed.

use std::process::ExitCode;

use anyhow::{Context as _, bail};
use olm_catalog::{
    bundle::RegistryBundle,
    fbc::Catalog,
    validate::{validate_bundle, validate_catalog},
};
use olm_oci::{ImageBuilder, Reference};

use crate::{
    cli::{CatalogPushArgs, PushArgs, TlsOptions},
    images::{CONFIGS_DIR, CONFIGS_LOCATION_LABEL, client_for},
};

/// Bundle directories copied into a bundle image.
const BUNDLE_DIRS: [&str; 3] = ["manifests", "metadata", "tests/scorecard"];
/// The `--base-image` that means no base: the catalog alone.
const SCRATCH: &str = "scratch";
/// The entrypoint of a catalog image with a base, as upstream's catalog
/// Dockerfile sets it.
const CATALOG_ENTRYPOINT: [&str; 1] = ["/bin/opm"];
/// The command of a catalog image with a base, as upstream's catalog
/// Dockerfile sets it.
const CATALOG_CMD: [&str; 3] = ["serve", "/configs", "--cache-dir=/tmp/cache"];

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

pub(crate) async fn catalog(args: &CatalogPushArgs, tls: &TlsOptions) -> anyhow::Result<ExitCode> {
    let CatalogPushArgs {
        push: args,
        base_image,
    } = args;
    let reference = parse(&args.image)?;
    let base = match base_image.as_str() {
        SCRATCH => None,
        other => Some(parse(other).context("invalid --base-image")?),
    };
    let catalog = Catalog::load_dir(&args.dir)
        .with_context(|| format!("read catalog {}", args.dir.display()))?;
    let report = validate_catalog(&catalog);
    if !report.is_valid() {
        bail!("invalid catalog {}:\n{report}", args.dir.display());
    }
    let mut builder = ImageBuilder::new();
    if let Some(base) = base {
        let client = client_for(&base, tls, base_insecure(&base, &reference, args.insecure))?;
        let pulled = client
            .pull_base(&base)
            .await
            .with_context(|| format!("pull base image {base}"))?;
        tracing::debug!(base = %base, digest = %pulled.digest(), "building on base image");
        builder = builder
            .on_base(pulled)
            .entrypoint(&CATALOG_ENTRYPOINT)
            .cmd(&CATALOG_CMD);
    }
    let builder = builder
        .label(CONFIGS_LOCATION_LABEL, CONFIGS_DIR)
        .add_dir(&args.dir, CONFIGS_DIR)?;
    push(&reference, builder, tls, args.insecure).await
}

/// Whether `--insecure` (plain HTTP to the pushed image's registry) also
/// reaches the base image's registry: when it is the same one, or on
/// loopback. A base on a public registry keeps HTTPS, so the default base
/// still works when pushing to a loopback registry.
fn base_insecure(base: &Reference, target: &Reference, insecure: bool) -> bool {
    insecure && (base.registry() == target.registry() || is_loopback(base.registry()))
}

/// Whether a registry (`host[:port]`, as in references) is on loopback.
fn is_loopback(registry: &str) -> bool {
    let host = match registry.strip_prefix('[') {
        Some(bracketed) => bracketed.split(']').next().unwrap_or_default(),
        None => registry.split(':').next().unwrap_or_default(),
    };
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insecure_reaches_the_base_on_the_same_registry_or_loopback_only() {
        let reference = |text: &str| Reference::parse(text).unwrap();
        let target = reference("127.0.0.1:5000/fixtures/catalog:latest");
        for (base, insecure, want) in [
            ("127.0.0.1:5000/fixtures/base:v1", true, true),
            ("127.0.0.1:5001/fixtures/base:v1", true, true),
            ("localhost:5000/fixtures/base:v1", true, true),
            ("[::1]:5000/fixtures/base:v1", true, true),
            ("ghcr.io/olm-rs/opm:0.1.0", true, false),
            ("127.0.0.1:5000/fixtures/base:v1", false, false),
        ] {
            assert_eq!(
                base_insecure(&reference(base), &target, insecure),
                want,
                "{base} insecure={insecure}"
            );
        }
        let remote_target = reference("registry.fixture.example:5000/catalog:latest");
        let same_remote = reference("registry.fixture.example:5000/base:v1");
        assert!(base_insecure(&same_remote, &remote_target, true));
    }
}
