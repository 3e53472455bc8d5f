//! Pulling bundle and catalog images with `olm-oci`: registry options from
//! the global flags, credentials from the usual auth files, and what an
//! image's labels say it is.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use anyhow::Context as _;
use olm_oci::{Client, ClientOptions, DockerConfig, ExtractOptions, PulledManifest, Reference};

/// Label of a catalog image naming its FBC root (upstream's
/// `containertools.ConfigsLocationLabel`).
pub(crate) const CONFIGS_LOCATION_LABEL: &str = "operators.operatorframework.io.index.configs.v1";
/// Label of a bundle image naming its package.
pub(crate) const BUNDLE_PACKAGE_LABEL: &str = "operators.operatorframework.io.bundle.package.v1";
/// Label of the sqlite index images upstream no longer supports.
pub(crate) const DB_LOCATION_LABEL: &str = "operators.operatorframework.io.index.database.v1";
/// Where catalog images built here keep the catalog.
pub(crate) const CONFIGS_DIR: &str = "/configs";
/// The `opm` image published with this version (`cargo xtask image`): what
/// catalog images are built on by default, so that they serve themselves.
pub(crate) const DEFAULT_OPM_IMAGE: &str =
    concat!("ghcr.io/olm-rs/opm:", env!("CARGO_PKG_VERSION"));

/// How to reach registries, from the global flags.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TlsOptions {
    /// Accept any certificate.
    pub skip_tls_verify: bool,
    /// Plain HTTP.
    pub use_http: bool,
}

/// A client for `reference`'s registry.
pub(crate) fn client_for(
    reference: &Reference,
    tls: &TlsOptions,
    insecure: bool,
) -> anyhow::Result<Client> {
    let mut options = ClientOptions {
        skip_tls_verify: tls.skip_tls_verify,
        credentials: credentials(),
        ..ClientOptions::default()
    };
    if tls.use_http || insecure {
        options = options.plain_http(reference.registry());
    }
    Ok(Client::new(options)?)
}

/// Credentials from the files containers tools and Docker write
/// ([`olm_oci::pull_secrets::local_auth_files`]); unreadable files are
/// skipped with a warning.
fn credentials() -> DockerConfig {
    let (config, notes) = olm_oci::pull_secrets::local_credentials();
    for note in notes {
        tracing::warn!(note, "ignoring unreadable auth file");
    }
    config
}

/// An image unpacked into a temporary directory.
pub(crate) struct Unpacked {
    /// Where its files are; removed on drop.
    pub dir: tempfile::TempDir,
    /// Its manifest and config.
    pub manifest: PulledManifest,
}

impl Unpacked {
    /// The image's labels.
    pub(crate) fn labels(&self) -> BTreeMap<String, String> {
        self.manifest.labels()
    }

    /// A directory of the image named by an absolute image path (from a
    /// label), refused if it leaves the image.
    pub(crate) fn subdir(&self, image_path: &str) -> anyhow::Result<PathBuf> {
        let mut path = self.dir.path().to_path_buf();
        for part in Path::new(image_path).components() {
            match part {
                std::path::Component::Normal(p) => path.push(p),
                std::path::Component::RootDir | std::path::Component::CurDir => {}
                _ => anyhow::bail!("image path {image_path:?} leaves the image"),
            }
        }
        Ok(path)
    }
}

/// Pulls and unpacks `image`.
pub(crate) async fn pull(image: &str, tls: &TlsOptions) -> anyhow::Result<Unpacked> {
    let reference =
        Reference::parse(image).with_context(|| format!("failed to pull image {image:?}"))?;
    let client = client_for(&reference, tls, false)?;
    let dir = tempfile::Builder::new()
        .prefix("render-unpack-")
        .tempdir()
        .context("create tempdir")?;
    let manifest = client
        .pull_to_dir(&reference, dir.path(), &ExtractOptions::default())
        .await
        .with_context(|| format!("failed to pull image {image:?}"))?;
    Ok(Unpacked { dir, manifest })
}
