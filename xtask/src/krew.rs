//! `cargo xtask krew`: the release of `kubectl olm` for krew. It packs the
//! `kubectl-olm` binary into `kubectl-olm_<os>_<arch>.tar.gz` (the binary at
//! the archive's root, reproducible: fixed times, owner and mode) and fills
//! the manifest template `deploy/krew/olm.yaml` as krew-release-bot fills
//! it on a release tag: the tag, and each archive's `uri` and `sha256`.
//! Platforms whose archive is not in the output folder are left out of the
//! manifest, and said so; a release that built them all gets them all.
//!
//! The result installs with krew as users install from the index:
//! `kubectl krew install --manifest=olm.yaml --archive=<archive>` (tested
//! with the real krew, built by `cargo xtask envtest`).

use std::{collections::BTreeMap, io::Write as _, path::PathBuf, process::Command};

use anyhow::{Context, Result, bail};
use sha2::{Digest as _, Sha256};

use crate::workspace_root;

/// The binary krew installs, and the name in every archive.
pub(crate) const BINARY: &str = "kubectl-olm";

/// Where release archives are downloaded from; `{tag}` and `{file}` are
/// filled in. The template names the same place.
const DOWNLOAD_URL: &str = "https://github.com/olm-rs/olm-rs/releases/download/{tag}/{file}";

/// `cargo xtask krew`.
#[derive(Debug, clap::Args)]
pub(crate) struct KrewArgs {
    /// The release tag, `v` and a semantic version (krew's rule).
    #[arg(long)]
    tag: String,
    /// The `kubectl-olm` binary to pack; without it `cargo build --release
    /// -p kubectl-olm` builds one for this machine.
    #[arg(long)]
    binary: Option<PathBuf>,
    /// Where the archive and `olm.yaml` go (default `target/krew/<tag>`,
    /// so an archive of another tag is never signed for this one);
    /// archives of other platforms already there are listed in the
    /// manifest too.
    #[arg(long)]
    out: Option<PathBuf>,
}

pub(crate) fn run(args: &KrewArgs) -> Result<()> {
    check_tag(&args.tag)?;
    let binary = match &args.binary {
        Some(binary) => binary.clone(),
        None => build_release()?,
    };
    let out = match &args.out {
        Some(out) => workspace_root().join(out),
        None => workspace_root().join("target/krew").join(&args.tag),
    };
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let (os, arch) = host_platform()?;
    let archive = out.join(archive_name(os, arch));
    let bytes = std::fs::read(&binary).with_context(|| format!("reading {}", binary.display()))?;
    std::fs::write(&archive, pack(&bytes)?)
        .with_context(|| format!("writing {}", archive.display()))?;
    println!("krew: {}", archive.display());

    let mut shas = BTreeMap::new();
    for entry in std::fs::read_dir(&out).with_context(|| format!("reading {}", out.display()))? {
        let path = entry?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if name.starts_with(&format!("{BINARY}_")) && name.ends_with(".tar.gz") {
            let bytes = std::fs::read(&path)?;
            shas.insert(name.to_owned(), sha256_hex(&bytes));
        }
    }
    let template_path = workspace_root().join("deploy/krew/olm.yaml");
    let template = std::fs::read_to_string(&template_path)
        .with_context(|| format!("reading {}", template_path.display()))?;
    let rendered = render(&template, &args.tag, &shas)?;
    for missing in &rendered.left_out {
        println!("krew: no archive for {missing}; left out of the manifest");
    }
    let manifest = out.join("olm.yaml");
    std::fs::write(&manifest, &rendered.manifest)
        .with_context(|| format!("writing {}", manifest.display()))?;
    println!("krew: {}", manifest.display());
    println!(
        "krew: try it with `kubectl krew install --manifest={} --archive={}`",
        manifest.display(),
        archive.display()
    );
    Ok(())
}

/// krew refuses versions that are not `v` and a semantic version.
fn check_tag(tag: &str) -> Result<()> {
    let Some(version) = tag.strip_prefix('v') else {
        bail!("the tag {tag:?} must start with v (krew's rule), e.g. v0.1.0");
    };
    let core = version.split(['-', '+']).next().unwrap_or_default();
    let parts: Vec<&str> = core.split('.').collect();
    if parts.len() != 3
        || parts
            .iter()
            .any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
    {
        bail!("the tag {tag:?} is not v<major>.<minor>.<patch>");
    }
    if parts.iter().any(|p| p.len() > 1 && p.starts_with('0')) {
        bail!("the tag {tag:?} has a number with a leading zero, which semantic versions forbid");
    }
    Ok(())
}

fn build_release() -> Result<PathBuf> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let status = Command::new(cargo)
        .current_dir(workspace_root())
        .args(["build", "--release", "-p", "kubectl-olm"])
        .status()
        .context("running cargo build --release -p kubectl-olm")?;
    if !status.success() {
        bail!("cargo build --release -p kubectl-olm failed ({status})");
    }
    Ok(workspace_root().join("target/release").join(BINARY))
}

/// This machine's platform in krew's (Go's) words.
fn host_platform() -> Result<(&'static str, &'static str)> {
    // The manifest names linux and darwin only (a Windows archive would
    // need `kubectl-olm.exe`).
    let os = match std::env::consts::OS {
        "linux" => "linux",
        "macos" => "darwin",
        other => bail!("no krew platform of the manifest for the OS {other}"),
    };
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => bail!("no krew platform for the architecture {other}"),
    };
    Ok((os, arch))
}

/// The archive of a platform, as the manifest names it.
pub(crate) fn archive_name(os: &str, arch: &str) -> String {
    format!("{BINARY}_{os}_{arch}.tar.gz")
}

/// A gzipped tar holding `binary` as `kubectl-olm` at its root, mode 0755,
/// owned by root, dated the epoch: the same bytes for the same binary.
pub(crate) fn pack(binary: &[u8]) -> Result<Vec<u8>> {
    let mut header = tar::Header::new_gnu();
    header.set_size(u64::try_from(binary.len())?);
    header.set_mode(0o755);
    header.set_uid(0);
    header.set_gid(0);
    header.set_mtime(0);
    header.set_entry_type(tar::EntryType::Regular);
    let gzip = flate2::GzBuilder::new()
        .mtime(0)
        .write(Vec::new(), flate2::Compression::best());
    let mut archive = tar::Builder::new(gzip);
    archive.mode(tar::HeaderMode::Deterministic);
    archive.append_data(&mut header, BINARY, binary)?;
    let mut gzip = archive.into_inner()?;
    gzip.flush()?;
    Ok(gzip.finish()?)
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A filled manifest, and the platforms left out for want of an archive.
#[derive(Debug)]
pub(crate) struct Rendered {
    pub manifest: String,
    pub left_out: Vec<String>,
}

/// Fills the template as krew-release-bot does (`{{ .TagName }}`, and each
/// `{{ addURIAndSha "URL" .TagName }}` as `uri:` and `sha256:`), taking each
/// archive's sha256 from `shas` (by file name) and leaving out platforms
/// without one. Refuses a template with no platform left.
pub(crate) fn render(
    template: &str,
    tag: &str,
    shas: &BTreeMap<String, String>,
) -> Result<Rendered> {
    const MARK: &str = "{{ addURIAndSha \"";
    let mut filled = String::with_capacity(template.len());
    for line in template.lines() {
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix(MARK) {
            let indent = &line[..line.len() - trimmed.len()];
            let url = rest
                .split('"')
                .next()
                .unwrap_or_default()
                .replace("{{ .TagName }}", tag);
            let file = url.rsplit('/').next().unwrap_or_default();
            let expected = DOWNLOAD_URL.replace("{tag}", tag).replace("{file}", file);
            if url != expected {
                bail!("the template downloads {url}, not from the releases ({expected})");
            }
            let sha = shas.get(file).map_or("", String::as_str);
            filled.push_str(&format!("{indent}uri: {url}\n{indent}sha256: \"{sha}\"\n"));
        } else {
            filled.push_str(&line.replace("{{ .TagName }}", tag));
            filled.push('\n');
        }
    }
    let mut plugin: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&filled).context("the filled template is not YAML")?;
    let platforms = plugin["spec"]["platforms"]
        .as_sequence_mut()
        .context("the template has no spec.platforms")?;
    let mut left_out = Vec::new();
    platforms.retain(|platform| {
        let has_sha = platform["sha256"].as_str().is_some_and(|s| !s.is_empty());
        if !has_sha {
            let labels = &platform["selector"]["matchLabels"];
            left_out.push(format!(
                "{}/{}",
                labels["os"].as_str().unwrap_or("?"),
                labels["arch"].as_str().unwrap_or("?")
            ));
        }
        has_sha
    });
    if platforms.is_empty() {
        bail!("no archive for any platform of the template");
    }
    let manifest = format!(
        "# kubectl olm {tag} for krew, filled by `cargo xtask krew` from deploy/krew/olm.yaml.\n{}",
        serde_yaml_ng::to_string(&plugin)?
    );
    Ok(Rendered { manifest, left_out })
}

/// The real krew, when `cargo xtask envtest` built it.
#[cfg(test)]
fn krew_binary() -> Option<PathBuf> {
    olm_testkit::assets::pinned_or_skip("krew", "the krew release test")
}

/// Installs `archive` with `manifest` through the real krew into
/// `krew_root`; krew's output on failure.
#[cfg(test)]
fn krew_install(
    krew: &std::path::Path,
    krew_root: &std::path::Path,
    manifest: &std::path::Path,
    archive: &std::path::Path,
) -> std::result::Result<(), String> {
    let output = Command::new(krew)
        .env("KREW_ROOT", krew_root)
        .arg("install")
        .arg(format!("--manifest={}", manifest.display()))
        .arg(format!("--archive={}", archive.display()))
        .output()
        .map_err(|e| e.to_string())?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template() -> String {
        std::fs::read_to_string(workspace_root().join("deploy/krew/olm.yaml")).unwrap()
    }

    #[test]
    fn tags_follow_krews_rule() {
        for good in ["v0.1.0", "v1.22.333", "v1.0.0-rc.1", "v1.0.0+build.5"] {
            assert!(check_tag(good).is_ok(), "{good}");
        }
        for bad in [
            "0.1.0", "v0.1", "v0.1.x", "v.1.0", "v1..0", "v01.0.0", "v1.00.1", "",
        ] {
            assert!(check_tag(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_archive_is_reproducible_and_holds_only_the_binary() {
        let first = pack(b"#!/bin/sh\necho fixture\n").unwrap();
        let second = pack(b"#!/bin/sh\necho fixture\n").unwrap();
        assert_eq!(first, second, "same binary, same bytes");
        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(first.as_slice()));
        let entries: Vec<(String, u32, u64)> = archive
            .entries()
            .unwrap()
            .map(|entry| {
                let entry = entry.unwrap();
                let header = entry.header();
                (
                    entry.path().unwrap().display().to_string(),
                    header.mode().unwrap(),
                    header.mtime().unwrap(),
                )
            })
            .collect();
        assert_eq!(entries, [(BINARY.to_owned(), 0o755, 0)]);
    }

    #[test]
    fn the_manifest_names_the_archives_there_are() {
        let shas = BTreeMap::from([
            (archive_name("linux", "amd64"), "a".repeat(64)),
            (archive_name("darwin", "arm64"), "b".repeat(64)),
        ]);
        let rendered = render(&template(), "v0.3.1", &shas).unwrap();
        let plugin: serde_yaml_ng::Value = serde_yaml_ng::from_str(&rendered.manifest).unwrap();
        assert_eq!(plugin["spec"]["version"], "v0.3.1");
        let platforms = plugin["spec"]["platforms"].as_sequence().unwrap();
        let listed: Vec<(String, String)> = platforms
            .iter()
            .map(|p| {
                (
                    p["uri"].as_str().unwrap().to_owned(),
                    p["sha256"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        assert_eq!(
            listed,
            [
                (
                    "https://github.com/olm-rs/olm-rs/releases/download/v0.3.1/kubectl-olm_linux_amd64.tar.gz".to_owned(),
                    "a".repeat(64)
                ),
                (
                    "https://github.com/olm-rs/olm-rs/releases/download/v0.3.1/kubectl-olm_darwin_arm64.tar.gz".to_owned(),
                    "b".repeat(64)
                ),
            ]
        );
        assert!(rendered.left_out.contains(&"linux/arm64".to_owned()));
        assert!(render(&template(), "v0.3.1", &BTreeMap::new()).is_err());
    }

    /// With an archive for every platform the template names, the manifest
    /// is a krew Plugin for `kubectl-olm` on each of them.
    #[test]
    fn the_template_is_a_plugin_for_every_platform() {
        let platforms = [
            ("darwin", "amd64"),
            ("darwin", "arm64"),
            ("linux", "amd64"),
            ("linux", "arm64"),
        ];
        let shas: BTreeMap<String, String> = platforms
            .iter()
            .map(|(os, arch)| (archive_name(os, arch), "c".repeat(64)))
            .collect();
        let rendered = render(&template(), "v0.1.0", &shas).unwrap();
        assert!(rendered.left_out.is_empty(), "{:?}", rendered.left_out);
        let plugin: serde_yaml_ng::Value = serde_yaml_ng::from_str(&rendered.manifest).unwrap();
        assert_eq!(
            plugin["apiVersion"],
            "krew.googlecontainertools.github.com/v1alpha2"
        );
        assert_eq!(plugin["kind"], "Plugin");
        // `kubectl olm` runs `kubectl-olm`: the plugin name follows the dash.
        assert_eq!(plugin["metadata"]["name"], "olm");
        let short = plugin["spec"]["shortDescription"].as_str().unwrap();
        assert!(!short.is_empty() && short.len() <= 50, "{short:?}");
        let mut seen: Vec<(String, String)> = plugin["spec"]["platforms"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|platform| {
                let labels = &platform["selector"]["matchLabels"];
                let (os, arch) = (
                    labels["os"].as_str().unwrap().to_owned(),
                    labels["arch"].as_str().unwrap().to_owned(),
                );
                assert_eq!(platform["bin"], BINARY);
                assert_eq!(
                    platform["uri"].as_str().unwrap(),
                    format!(
                        "https://github.com/olm-rs/olm-rs/releases/download/v0.1.0/{}",
                        archive_name(&os, &arch)
                    )
                );
                (os, arch)
            })
            .collect();
        seen.sort();
        let expected: Vec<(String, String)> = platforms
            .iter()
            .map(|(os, arch)| ((*os).to_owned(), (*arch).to_owned()))
            .collect();
        assert_eq!(seen, expected);
    }

    /// The whole release, installed by the real krew as a user installs
    /// it; a manifest whose sha256 does not match the archive is refused.
    #[test]
    fn krew_installs_the_release_and_refuses_a_wrong_checksum() {
        let Some(krew) = krew_binary() else { return };
        let binary = workspace_root().join("target/debug").join(BINARY);
        if !binary.exists() {
            assert!(
                std::env::var_os("CI").is_none(),
                "{} is missing: cargo xtask test builds it",
                binary.display()
            );
            eprintln!("skipping: {} is not built", binary.display());
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        run(&KrewArgs {
            tag: "v0.1.0".to_owned(),
            binary: Some(binary),
            out: Some(out.clone()),
        })
        .unwrap();
        let (os, arch) = host_platform().unwrap();
        let archive = out.join(archive_name(os, arch));
        let manifest = out.join("olm.yaml");

        let root = dir.path().join("krew-root");
        krew_install(&krew, &root, &manifest, &archive).unwrap();
        let installed = root.join("bin").join(BINARY);
        let help = Command::new(&installed).arg("--help").output().unwrap();
        assert!(help.status.success(), "{installed:?} --help");
        assert!(
            String::from_utf8_lossy(&help.stdout).contains("preview"),
            "{}",
            String::from_utf8_lossy(&help.stdout)
        );

        // The same archive under a manifest with another checksum.
        let text = std::fs::read_to_string(&manifest).unwrap();
        let sha = sha256_hex(&std::fs::read(&archive).unwrap());
        let wrong = dir.path().join("wrong.yaml");
        std::fs::write(&wrong, text.replace(&sha, &"0".repeat(64))).unwrap();
        let refused = krew_install(&krew, &dir.path().join("other-root"), &wrong, &archive)
            .expect_err("a wrong sha256 is refused");
        assert!(refused.to_lowercase().contains("sha256"), "{refused}");
    }
}
