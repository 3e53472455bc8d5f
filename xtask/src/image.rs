//! `cargo xtask image`: one OCI image per service and one for `opm`, built
//! without a container engine by `olm_oci::ImageBuilder`.
//!
//! Each image holds the binary at `/usr/local/bin/<name>` (the entrypoint),
//! the shared libraries it links against (copied from this machine, as `ldd`
//! lists them, so no base image is needed), the CA certificates, and an
//! `/etc/passwd` naming the non-root user it runs as (65532). Labels follow
//! the OCI annotations: source, version, revision, title, licenses. Nothing
//! time-dependent goes in, so the same binary gives the same digest.
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
use olm_oci::{BuiltImage, ImageBuilder, Reference};

use crate::workspace_root;

/// The images built: (cargo package, binary).
pub(crate) const IMAGES: &[(&str, &str)] = &[
    ("olm-operator", "olm-operator"),
    ("catalog-operator", "catalog-operator"),
    ("packageserver", "packageserver"),
    ("bundle-unpacker", "bundle-unpacker"),
    ("opm", "opm"),
];

/// The user every image runs as: non-root, with no login.
pub(crate) const NONROOT: &str = "65532:65532";

/// Where the CA certificates are read from and put.
const CA_CERTIFICATES: &str = "etc/ssl/certs/ca-certificates.crt";

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
    if selected.is_empty() {
        bail!(
            "no image named {:?}; the images are {:?}",
            args.only,
            IMAGES.iter().map(|(_, b)| *b).collect::<Vec<_>>()
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
    let status = cargo.status().context("running cargo build")?;
    if !status.success() {
        bail!("building the binaries failed ({status})");
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
    let revision = git_revision(&root);
    let runtime = tokio::runtime::Runtime::new().context("starting tokio")?;
    for (_, bin) in selected {
        let binary = root.join("target").join(profile_dir).join(bin);
        let image = service_image(bin, &binary, &tag, &revision)?;
        let name = format!("{bin}:{tag}");
        if let Some(dir) = &args.oci_layout {
            image
                .write_oci_layout(dir, &name)
                .with_context(|| format!("writing {name} to {}", dir.display()))?;
        }
        if let Some(registry) = &args.push {
            let pushed = runtime.block_on(push(registry, &name, &image))?;
            println!("image: {bin} {} pushed as {pushed}", image.manifest_digest);
        } else {
            println!("image: {bin} {}", image.manifest_digest);
        }
    }
    Ok(())
}

/// The image of one binary.
pub(crate) fn service_image(
    name: &str,
    binary: &Path,
    tag: &str,
    revision: &str,
) -> Result<BuiltImage> {
    Ok(service_builder(name, binary, tag, revision)?.build()?)
}

/// The files and configuration of [`service_image`], before it is built.
fn service_builder(name: &str, binary: &Path, tag: &str, revision: &str) -> Result<ImageBuilder> {
    let content = std::fs::read(binary).with_context(|| format!("reading {}", binary.display()))?;
    let mut builder = ImageBuilder::new()
        .add_executable(&format!("usr/local/bin/{name}"), content)?
        .add_file(
            "etc/passwd",
            b"root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
                .to_vec(),
        )?
        .add_file("etc/group", b"root:x:0:\nnonroot:x:65532:\n".to_vec())?
        .entrypoint(&[&format!("/usr/local/bin/{name}")])
        .user(NONROOT)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("SSL_CERT_FILE", &format!("/{CA_CERTIFICATES}"))
        .label("org.opencontainers.image.title", name)
        .label("org.opencontainers.image.version", tag)
        .label("org.opencontainers.image.revision", revision)
        .label(
            "org.opencontainers.image.source",
            env!("CARGO_PKG_REPOSITORY"),
        )
        .label("org.opencontainers.image.licenses", "Apache-2.0");
    let certificates = Path::new("/").join(CA_CERTIFICATES);
    if let Ok(bytes) = std::fs::read(&certificates) {
        builder = builder.add_file(CA_CERTIFICATES, bytes)?;
    }
    for library in linked_libraries(binary)? {
        let bytes =
            std::fs::read(&library).with_context(|| format!("reading {}", library.display()))?;
        let inside = library.to_string_lossy().trim_start_matches('/').to_owned();
        builder = builder.add_executable(&inside, bytes)?;
    }
    Ok(builder)
}

/// The shared libraries `binary` loads, by the paths it asks for them.
fn linked_libraries(binary: &Path) -> Result<Vec<PathBuf>> {
    let output = Command::new("ldd")
        .arg(binary)
        .output()
        .context("running ldd (from libc-bin) to list the shared libraries")?;
    Ok(parse_ldd(&String::from_utf8_lossy(&output.stdout)))
}

/// The library paths in `ldd`'s output: `name => /path (addr)` lines and
/// the interpreter's `/path (addr)` line; the vDSO and unresolved names
/// are skipped. A static binary lists none.
pub(crate) fn parse_ldd(output: &str) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = output
        .lines()
        .filter_map(|line| {
            let line = line.trim();
            let path = match line.split_once("=>") {
                Some((_, target)) => target.trim(),
                None => line,
            };
            let path = path.split(" (").next().unwrap_or_default().trim();
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect();
    paths.sort();
    paths.dedup();
    paths
}

fn git_revision(root: &Path) -> String {
    Command::new("git")
        .current_dir(root)
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".to_owned())
}

async fn push(registry: &str, name: &str, image: &BuiltImage) -> Result<String> {
    let reference = format!("{}/{name}", registry.trim_end_matches('/'));
    let parsed = Reference::parse(&reference)
        .map_err(|e| anyhow::anyhow!("{reference:?} is not an image reference: {e}"))?;
    let host = parsed.registry().to_owned();
    let mut options = olm_oci::ClientOptions::default();
    if is_loopback(&host) {
        options = options.plain_http(&host);
    }
    let client = olm_oci::Client::new(options)?;
    let digest = client
        .push_image(&parsed, image)
        .await
        .with_context(|| format!("pushing {reference}"))?;
    Ok(format!("{reference}@{digest}"))
}

fn is_loopback(host: &str) -> bool {
    let name = host.rsplit_once(':').map_or(host, |(name, _)| name);
    name == "localhost" || name.starts_with("127.") || name == "[::1]"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_output_gives_the_paths_the_binary_asks_for() {
        let output = "\tlinux-vdso.so.1 (0x00007ffc)\n\
            \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f1)\n\
            \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f2)\n\
            \tlibmissing.so => not found\n\
            \t/lib64/ld-linux-x86-64.so.2 (0x00007f3)\n";
        assert_eq!(
            parse_ldd(output),
            [
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/lib/x86_64-linux-gnu/libgcc_s.so.1"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2"),
            ]
        );
        assert!(parse_ldd("\tstatically linked\n").is_empty());
        assert!(parse_ldd("\tnot a dynamic executable\n").is_empty());
    }

    #[test]
    fn the_same_binary_gives_the_same_image_and_runs_as_nonroot() {
        // This test binary stands in for a service: real, dynamically linked.
        let binary = std::env::current_exe().unwrap_or_default();
        let first = service_image("fixture-service", &binary, "0.1.0", "abc123")
            .unwrap_or_else(|e| panic!("{e:#}"));
        let again = service_image("fixture-service", &binary, "0.1.0", "abc123")
            .unwrap_or_else(|e| panic!("{e:#}"));
        assert_eq!(first.manifest_digest, again.manifest_digest);
        let other = service_image("fixture-service", &binary, "0.1.0", "def456")
            .unwrap_or_else(|e| panic!("{e:#}"));
        assert_ne!(
            first.manifest_digest, other.manifest_digest,
            "the revision is a label"
        );
        let config: serde_json::Value = serde_json::from_slice(&first.config).unwrap_or_default();
        assert_eq!(config["config"]["User"], NONROOT);
        assert_eq!(
            config["config"]["Entrypoint"],
            serde_json::json!(["/usr/local/bin/fixture-service"])
        );
        assert_eq!(
            config["config"]["Labels"]["org.opencontainers.image.revision"],
            "abc123"
        );
        // Everything the binary needs to start is inside: it, its loader
        // and libc, the certificates, the user.
        let builder = service_builder("fixture-service", &binary, "0.1.0", "abc123")
            .unwrap_or_else(|e| panic!("{e:#}"));
        let paths: Vec<&str> = builder.paths().collect();
        assert!(
            paths.contains(&"usr/local/bin/fixture-service"),
            "{paths:?}"
        );
        assert!(paths.contains(&"etc/passwd"), "{paths:?}");
        assert!(paths.iter().any(|p| p.contains("libc.so")), "{paths:?}");
        assert!(paths.iter().any(|p| p.contains("ld-linux")), "{paths:?}");
    }
}
