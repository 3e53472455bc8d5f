//! OLM's images, built from binaries on this machine with `olm_oci`'s
//! builder and no container engine, and the example catalog published from
//! `examples/`. `cargo xtask image`, `cargo xtask dev` and the end-to-end
//! tests on the real node share these recipes, so what a developer runs is
//! what the tests run.
//!
//! An image of a binary holds it (at `/usr/local/bin/<name>`, or where the
//! recipe says), the shared libraries it links against (copied from this
//! machine, as `ldd` lists them, so no base image is needed), the CA
//! certificates, and an `/etc/passwd` naming the non-root user it runs as
//! (65532). Labels follow the OCI annotations. Nothing time-dependent goes
//! in, so the same binary gives the same digest.
//!
//! This crate is developer tooling: no service may depend on it. It depends
//! on `olm-oci` only (and runs `ldd` and, to publish the example, `opm`).

pub mod example;

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result};
use olm_oci::{BuiltImage, ImageBuilder, Reference};

/// Where the project's images are published; the chart, the example bundles
/// and the real node's registry mirror all use these names.
pub const PUBLIC_REGISTRY: &str = "ghcr.io/olm-rs";

/// The user every image runs as: non-root, with no login.
pub const NONROOT: &str = "65532:65532";

/// Where the CA certificates are read from and put.
const CA_CERTIFICATES: &str = "etc/ssl/certs/ca-certificates.crt";

/// The name and tag containerd's CRI asks for as the pod sandbox image.
pub const PAUSE_IMAGE: &str = "pause:3.10";

/// One binary made into an image.
#[derive(Debug, Clone)]
pub struct BinaryImage<'a> {
    /// The image's title, and the binary's name inside it.
    pub name: &'a str,
    /// The binary on this machine.
    pub binary: &'a Path,
    /// Where the binary goes in the image (no leading `/`); defaults to
    /// `usr/local/bin/<name>`.
    pub install_path: Option<&'a str>,
    /// The version label.
    pub tag: &'a str,
    /// The source revision label.
    pub revision: &'a str,
}

impl BinaryImage<'_> {
    fn install_path(&self) -> String {
        self.install_path
            .map_or_else(|| format!("usr/local/bin/{}", self.name), str::to_owned)
    }

    /// The image.
    pub fn build(&self) -> Result<BuiltImage> {
        Ok(self.builder()?.build()?)
    }

    /// The files and configuration of the image, before it is built.
    pub fn builder(&self) -> Result<ImageBuilder> {
        let content = std::fs::read(self.binary)
            .with_context(|| format!("reading {}", self.binary.display()))?;
        let inside = self.install_path();
        let builder = ImageBuilder::new()
            .add_executable(&inside, content)?
            .entrypoint(&[&format!("/{inside}")])
            .label("org.opencontainers.image.title", self.name)
            .label("org.opencontainers.image.version", self.tag)
            .label("org.opencontainers.image.revision", self.revision)
            .label(
                "org.opencontainers.image.source",
                env!("CARGO_PKG_REPOSITORY"),
            )
            .label("org.opencontainers.image.licenses", "Apache-2.0");
        runtime_files(builder, self.binary)
    }
}

/// What every image of a binary needs to run as the non-root user: its
/// libraries, users and groups, CA certificates and environment.
fn runtime_files(builder: ImageBuilder, binary: &Path) -> Result<ImageBuilder> {
    let mut builder = builder
        .add_file(
            "etc/passwd",
            b"root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
                .to_vec(),
        )?
        .add_file("etc/group", b"root:x:0:\nnonroot:x:65532:\n".to_vec())?
        // Caches and scratch files (`opm serve --cache-dir=/tmp/cache`).
        .add_scratch_dir("tmp")?
        .user(NONROOT)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("SSL_CERT_FILE", &format!("/{CA_CERTIFICATES}"));
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

/// The pod sandbox ("pause") image: this machine's `sleep`, which sleeps
/// forever as the sandbox's first process. No registry is reachable here to
/// pull the upstream one from.
pub fn pause_image() -> Result<BuiltImage> {
    let sleep = ["/bin/sleep", "/usr/bin/sleep"]
        .into_iter()
        .map(Path::new)
        .find(|p| p.exists())
        .context("no sleep binary on this machine (coreutils)")?;
    let content = std::fs::read(sleep).with_context(|| format!("reading {}", sleep.display()))?;
    let builder = ImageBuilder::new()
        .add_executable("pause", content)?
        .entrypoint(&["/pause", "infinity"])
        .label("org.opencontainers.image.title", "pause");
    Ok(runtime_files(builder, sleep)?.user("65535:65535").build()?)
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
pub fn parse_ldd(output: &str) -> Vec<PathBuf> {
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

/// Whether `host` (`name[:port]`) is this machine, reached over plain HTTP.
pub fn is_loopback(host: &str) -> bool {
    let name = host.rsplit_once(':').map_or(host, |(name, _)| name);
    name == "localhost" || name.starts_with("127.") || name == "[::1]"
}

/// Pushes `image` as `reference`; loopback registries are reached over
/// plain HTTP. Returns `reference@digest`.
pub async fn push(reference: &str, image: &BuiltImage) -> Result<String> {
    let parsed = Reference::parse(reference)
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

/// The images a real node needs to run OLM's catalogs and the example
/// operator, pushed to `registry` (loopback): the pause image (as
/// `<registry>/pause:3.10`), the `opm` image (as
/// `<registry>/olm-rs/opm:<version>`, the catalogs' base) and the example
/// operator's image under each example version's tag. Returns the `opm`
/// image's reference, to build catalogs on.
pub async fn push_node_images(
    registry: &str,
    opm: &Path,
    example_operator: &Path,
    revision: &str,
) -> Result<String> {
    let version = env!("CARGO_PKG_VERSION");
    push(&format!("{registry}/{PAUSE_IMAGE}"), &pause_image()?).await?;
    let opm_image = BinaryImage {
        name: "opm",
        binary: opm,
        install_path: Some("bin/opm"),
        tag: version,
        revision,
    }
    .build()?;
    let opm_reference = format!("{registry}/olm-rs/opm:{version}");
    push(&opm_reference, &opm_image).await?;
    let operator = BinaryImage {
        name: example::PACKAGE,
        binary: example_operator,
        install_path: None,
        tag: version,
        revision,
    }
    .build()?;
    for v in example::VERSIONS {
        push(
            &format!("{registry}/olm-rs/{}:{v}", example::PACKAGE),
            &operator,
        )
        .await?;
    }
    Ok(opm_reference)
}

/// OLM's services, one image each, named after the binary: what the Helm
/// chart runs (`ghcr.io/olm-rs/<service>:<version>`).
pub const SERVICES: &[&str] = &[
    "olm-operator",
    "catalog-operator",
    "packageserver",
    "bundle-unpacker",
    "marketplace-operator",
    "samples-operator",
];

/// The NATS server's image name (`ghcr.io/olm-rs/nats:<version>`).
pub const NATS: &str = "nats";

/// The NATS server image: Debian's `nats-server` (the one the tests run) at
/// `/usr/local/bin/nats-server`, tagged with its version. Returns the tag
/// and the image.
pub fn nats_image(revision: &str) -> Result<(String, BuiltImage)> {
    let binary = ["/usr/sbin/nats-server", "/usr/bin/nats-server"]
        .into_iter()
        .map(Path::new)
        .find(|p| p.exists())
        .context("nats-server is not installed (apt-get install nats-server)")?;
    let output = Command::new(binary)
        .arg("--version")
        .output()
        .with_context(|| format!("running {} --version", binary.display()))?;
    let version = nats_version(&String::from_utf8_lossy(&output.stdout)).with_context(|| {
        format!(
            "{} --version said {:?}",
            binary.display(),
            String::from_utf8_lossy(&output.stdout)
        )
    })?;
    let image = BinaryImage {
        name: "nats-server",
        binary,
        install_path: None,
        tag: &version,
        revision,
    }
    .build()?;
    Ok((version, image))
}

/// The version in `nats-server --version`'s output (`nats-server: v2.9.10`).
pub fn nats_version(output: &str) -> Option<String> {
    let version = output.trim().rsplit(' ').next()?.trim_start_matches('v');
    let valid = !version.is_empty()
        && version
            .split('.')
            .all(|part| !part.is_empty() && part.chars().all(|c| c.is_ascii_digit()));
    valid.then(|| version.to_owned())
}

/// Pushes the service images (binaries from `bin_dir`) to `registry` as
/// `<registry>/olm-rs/<service>:<tag>`, and the NATS image as
/// `<registry>/olm-rs/nats:<nats version>`. Returns the NATS version.
pub async fn push_service_images(
    registry: &str,
    bin_dir: &Path,
    tag: &str,
    revision: &str,
) -> Result<String> {
    for service in SERVICES {
        let binary = bin_dir.join(service);
        let image = BinaryImage {
            name: service,
            binary: &binary,
            install_path: None,
            tag,
            revision,
        }
        .build()?;
        push(&format!("{registry}/olm-rs/{service}:{tag}"), &image).await?;
    }
    let (nats_version, nats) = nats_image(revision)?;
    push(&format!("{registry}/olm-rs/{NATS}:{nats_version}"), &nats).await?;
    Ok(nats_version)
}

/// The registry mirrors a real node needs when every image lives in the
/// loopback `registry`: `(registry a pod names, endpoint pulled from)` for
/// containerd's pause image host, the project's public registry, and the
/// loopback registry itself (so it is reached over plain HTTP).
pub fn node_mirrors(registry: &str) -> Vec<(String, String)> {
    let endpoint = format!("http://{registry}");
    let public = PUBLIC_REGISTRY.split('/').next().unwrap_or(PUBLIC_REGISTRY);
    ["registry.k8s.io", public, registry]
        .into_iter()
        .map(|host| (host.to_owned(), endpoint.clone()))
        .collect()
}

/// The workspace's root folder (for `examples/`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map_or_else(|| PathBuf::from("."), Path::to_owned)
}

/// The current source revision (`git rev-parse HEAD`), or `unknown`.
pub fn git_revision() -> String {
    Command::new("git")
        .current_dir(workspace_root())
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".to_owned())
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

    fn fixture(revision: &str) -> BuiltImage {
        // This test binary stands in for a service: real, dynamically linked.
        let binary = std::env::current_exe().unwrap_or_default();
        BinaryImage {
            name: "fixture-service",
            binary: &binary,
            install_path: None,
            tag: "0.1.0",
            revision,
        }
        .build()
        .unwrap_or_else(|e| panic!("{e:#}"))
    }

    #[test]
    fn the_same_binary_gives_the_same_image_and_runs_as_nonroot() {
        let first = fixture("abc123");
        assert_eq!(first.manifest_digest, fixture("abc123").manifest_digest);
        assert_ne!(
            first.manifest_digest,
            fixture("def456").manifest_digest,
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
        let binary = std::env::current_exe().unwrap_or_default();
        let builder = BinaryImage {
            name: "fixture-service",
            binary: &binary,
            install_path: Some("bin/fixture"),
            tag: "0.1.0",
            revision: "abc123",
        }
        .builder()
        .unwrap_or_else(|e| panic!("{e:#}"));
        let paths: Vec<&str> = builder.paths().collect();
        assert!(paths.contains(&"bin/fixture"), "{paths:?}");
        assert!(paths.contains(&"etc/passwd"), "{paths:?}");
        assert!(paths.iter().any(|p| p.contains("libc.so")), "{paths:?}");
        assert!(paths.iter().any(|p| p.contains("ld-linux")), "{paths:?}");
    }

    #[test]
    fn the_pause_image_sleeps_forever() {
        let image = pause_image().unwrap_or_else(|e| panic!("{e:#}"));
        let config: serde_json::Value = serde_json::from_slice(&image.config).unwrap_or_default();
        assert_eq!(
            config["config"]["Entrypoint"],
            serde_json::json!(["/pause", "infinity"])
        );
        assert_eq!(
            image.manifest_digest,
            pause_image().unwrap().manifest_digest
        );
    }

    #[test]
    fn a_node_pulls_public_and_pause_images_from_the_loopback_registry() {
        let mirrors = node_mirrors("127.0.0.1:5000");
        for host in ["registry.k8s.io", "ghcr.io", "127.0.0.1:5000"] {
            assert!(
                mirrors
                    .iter()
                    .any(|(h, e)| h == host && e == "http://127.0.0.1:5000"),
                "{host}: {mirrors:?}"
            );
        }
    }

    #[test]
    fn the_nats_version_is_read_from_its_version_output() {
        assert_eq!(
            nats_version("nats-server: v2.9.10\n").as_deref(),
            Some("2.9.10")
        );
        assert_eq!(
            nats_version("nats-server: v2.10.1").as_deref(),
            Some("2.10.1")
        );
        for bad in [
            "",
            "nats-server:",
            "nats-server: vX.1",
            "nats-server: v2..1",
        ] {
            assert_eq!(nats_version(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn loopback_hosts_are_recognised() {
        for host in ["localhost:5000", "127.0.0.1:5000", "127.1.2.3", "[::1]:80"] {
            assert!(is_loopback(host), "{host}");
        }
        for host in ["ghcr.io", "10.0.0.1:5000", "localhost.example.com"] {
            assert!(!is_loopback(host), "{host}");
        }
    }
}
