//! `cargo xtask samples-inventory`: refreshes the sample ImageStreams and
//! Templates the samples operator ships (`crates/samples-operator/inventory`)
//! from upstream's copy of openshift/library.

use std::{fs, path::PathBuf};

use anyhow::{Context, Result, bail};
use samples_operator::{decide::inventory::SHIPPED_INVENTORIES, inventory_dir::load_dir};

/// Where to read the samples from.
#[derive(Debug, clap::Args)]
pub(crate) struct SamplesInventoryArgs {
    /// The cluster-samples-operator's `assets/operator` directory, or a
    /// checkout of openshift/library's `operator` directory: either holds one
    /// `<flavour>-<arch>` directory per shipped inventory (`ocp-x86_64`,
    /// `okd-x86_64`, ...).
    #[arg(long, value_name = "DIR")]
    from: PathBuf,
}

/// Rewrites every shipped inventory whose `<flavour>-<arch>` directory is
/// present under `--from`, and leaves the others as they are.
pub(crate) fn refresh(args: &SamplesInventoryArgs) -> Result<()> {
    let out = crate::workspace_root().join("crates/samples-operator/inventory");
    let mut written = 0;
    for (flavour, arch) in SHIPPED_INVENTORIES {
        let name = format!("{flavour}-{arch}");
        let dir = args.from.join(&name);
        if !dir.is_dir() {
            println!("{name}: no {} directory, left as it is", dir.display());
            continue;
        }
        let inventory = load_dir(&dir).with_context(|| format!("loading {}", dir.display()))?;
        let text = inventory
            .to_shipped_json()
            .with_context(|| format!("rendering {name}"))?;
        let file = out.join(format!("{name}.json"));
        fs::write(&file, text).with_context(|| format!("writing {}", file.display()))?;
        println!(
            "{name}: {} ImageStreams, {} Templates -> {}",
            inventory.image_streams.len(),
            inventory.templates.len(),
            file.display()
        );
        written += 1;
    }
    if written == 0 {
        bail!(
            "{} holds none of the <flavour>-<arch> directories ({})",
            args.from.display(),
            SHIPPED_INVENTORIES
                .map(|(flavour, arch)| format!("{flavour}-{arch}"))
                .join(", ")
        );
    }
    Ok(())
}
