//! Publishing the example operator's catalog (`examples/`) to a registry
//! with `opm`, as a user publishes theirs: each bundle pushed as an image,
//! the bundles rendered from those images (so their references name where
//! they were pushed), the committed package and channel added, and the
//! catalog pushed as an image that serves itself (on the `opm` image).

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail};

/// The example package.
pub const PACKAGE: &str = "example-operator";
/// The versions shipped in `examples/bundles`, oldest first.
pub const VERSIONS: &[&str] = &["0.1.0", "0.2.0", "0.3.0"];

/// Where the example's bundles and catalog fragment live.
pub fn examples_dir() -> PathBuf {
    crate::workspace_root().join("examples")
}

/// The image a version's bundle is pushed as, in `registry`.
pub fn bundle_image(registry: &str, version: &str) -> String {
    format!("{registry}/olm-rs/{PACKAGE}-bundle:v{version}")
}

/// The example catalog's image in `registry`, with `tag`.
pub fn catalog_image(registry: &str, tag: &str) -> String {
    format!("{registry}/olm-rs/example-catalog:{tag}")
}

/// Publishes the catalog holding `versions` (a prefix of [`VERSIONS`]) to
/// `registry` (a loopback registry, reached over plain HTTP) as
/// [`catalog_image`]`(registry, tag)`, on `base_image` (the `opm` image).
/// Returns the catalog image with its digest.
pub fn publish(
    opm: &Path,
    registry: &str,
    versions: &[&str],
    tag: &str,
    base_image: &str,
) -> Result<String> {
    publish_relocated(opm, registry, versions, tag, base_image, &[])
}

/// [`publish`], with the bundle of each `(version, registry)` of
/// `relocated` named in the catalog as if pushed to that other registry
/// (its `image` and its own `relatedImages` entry): content that points
/// somewhere it should not, as a catalog published by mistake does.
pub fn publish_relocated(
    opm: &Path,
    registry: &str,
    versions: &[&str],
    tag: &str,
    base_image: &str,
    relocated: &[(&str, &str)],
) -> Result<String> {
    let bundles = examples_dir().join("bundles").join(PACKAGE);
    let mut images = Vec::new();
    for version in versions {
        let image = bundle_image(registry, version);
        run_opm(
            opm,
            &[
                "alpha",
                "bundle",
                "push",
                &bundles.join(version).display().to_string(),
                &image,
                "--insecure",
            ],
        )?;
        images.push(image);
    }
    let catalog = tempfile::Builder::new()
        .prefix("olm-example-catalog-")
        .tempdir()
        .context("creating a folder for the catalog")?;
    let root = catalog.path().join(PACKAGE);
    std::fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
    let mut render = vec!["render", "--use-http", "-o", "json"];
    render.extend(images.iter().map(String::as_str));
    let mut rendered = run_opm(opm, &render)?;
    if !relocated.is_empty() {
        rendered = relocate(&rendered, registry, relocated)?;
    }
    std::fs::write(root.join("bundles.json"), rendered).context("writing the bundles")?;
    let fragment = examples_dir().join("catalog").join(PACKAGE);
    let documents = package_documents(&fragment, versions)?;
    std::fs::write(
        root.join("package.json"),
        documents
            .iter()
            .map(|d| serde_json::to_string_pretty(d).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n"),
    )
    .context("writing the package and channels")?;
    let image = catalog_image(registry, tag);
    let pushed = run_opm(
        opm,
        &[
            "alpha",
            "catalog",
            "push",
            &catalog.path().display().to_string(),
            &image,
            "--insecure",
            "--base-image",
            base_image,
        ],
    )?;
    let pushed = String::from_utf8_lossy(&pushed).trim().to_owned();
    if pushed.is_empty() {
        bail!("opm alpha catalog push printed no digest for {image}");
    }
    Ok(pushed)
}

/// The rendered bundles (a stream of JSON documents) with the image of each
/// relocated version's bundle moved to its new registry.
fn relocate(rendered: &[u8], registry: &str, relocated: &[(&str, &str)]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    for document in serde_json::Deserializer::from_slice(rendered).into_iter::<serde_json::Value>()
    {
        let mut document = document.context("reading what opm render printed")?;
        for (version, elsewhere) in relocated {
            let from = bundle_image(registry, version);
            let to = bundle_image(elsewhere, version);
            if document["image"] == from.as_str() {
                document["image"] = serde_json::Value::String(to.clone());
            }
            if let Some(related) = document["relatedImages"].as_array_mut() {
                for entry in related.iter_mut().filter(|e| e["image"] == from.as_str()) {
                    entry["image"] = serde_json::Value::String(to.clone());
                }
            }
        }
        serde_json::to_writer(&mut out, &document).context("writing a bundle")?;
        out.push(b'\n');
    }
    Ok(out)
}

/// The package and channel documents of the committed catalog fragment,
/// with each channel's entries cut to `versions`: a catalog that ships
/// fewer versions names only those.
pub fn package_documents(fragment: &Path, versions: &[&str]) -> Result<Vec<serde_json::Value>> {
    let names: Vec<String> = versions.iter().map(|v| format!("{PACKAGE}.v{v}")).collect();
    let mut documents = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(fragment)
        .with_context(|| format!("reading {}", fragment.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.extension()
                .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
        })
        .collect();
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("reading {}", file.display()))?;
        for document in serde_yaml_ng::Deserializer::from_str(&text) {
            let mut value: serde_json::Value = serde::Deserialize::deserialize(document)
                .with_context(|| format!("parsing {}", file.display()))?;
            if value.is_null() {
                continue;
            }
            if value["schema"] == "olm.channel"
                && let Some(entries) = value["entries"].as_array_mut()
            {
                entries.retain(|e| {
                    e["name"]
                        .as_str()
                        .is_some_and(|n| names.iter().any(|m| m == n))
                });
            }
            documents.push(value);
        }
    }
    if !documents.iter().any(|d| d["schema"] == "olm.package") {
        bail!("{} has no olm.package document", fragment.display());
    }
    Ok(documents)
}

fn run_opm(opm: &Path, args: &[&str]) -> Result<Vec<u8>> {
    let output = Command::new(opm)
        .args(args)
        .output()
        .with_context(|| format!("running {}", opm.display()))?;
    if !output.status.success() {
        bail!(
            "opm {} failed ({}): {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(output.stdout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_catalog_of_fewer_versions_names_only_those() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("package.yaml"),
            "schema: olm.package\nname: example-operator\ndefaultChannel: stable\n---\n\
             schema: olm.channel\nname: stable\npackage: example-operator\nentries:\n\
             - name: example-operator.v0.1.0\n\
             - name: example-operator.v0.2.0\n  replaces: example-operator.v0.1.0\n",
        )
        .unwrap();
        let documents = package_documents(dir.path(), &["0.1.0"]).unwrap();
        assert_eq!(documents.len(), 2);
        assert_eq!(
            documents[1]["entries"],
            serde_json::json!([{"name": "example-operator.v0.1.0"}])
        );
        let all = package_documents(dir.path(), &["0.1.0", "0.2.0"]).unwrap();
        assert_eq!(all[1]["entries"].as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn relocation_moves_only_the_named_bundle() {
        let rendered = format!(
            "{}\n{}",
            serde_json::json!({"schema": "olm.bundle", "name": "example-operator.v0.1.0",
                "image": bundle_image("reg:5000", "0.1.0"),
                "relatedImages": [{"image": bundle_image("reg:5000", "0.1.0")}, {"image": "op:1"}]}),
            serde_json::json!({"schema": "olm.bundle", "name": "example-operator.v0.2.0",
                "image": bundle_image("reg:5000", "0.2.0"),
                "relatedImages": [{"image": bundle_image("reg:5000", "0.2.0")}, {"image": "op:2"}]}),
        );
        let out = relocate(
            rendered.as_bytes(),
            "reg:5000",
            &[("0.2.0", "evil.example.com")],
        )
        .unwrap();
        let documents: Vec<serde_json::Value> = serde_json::Deserializer::from_slice(&out)
            .into_iter()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(documents[0]["image"], bundle_image("reg:5000", "0.1.0"));
        assert_eq!(
            documents[1]["image"],
            bundle_image("evil.example.com", "0.2.0")
        );
        assert_eq!(
            documents[1]["relatedImages"],
            serde_json::json!([{"image": bundle_image("evil.example.com", "0.2.0")}, {"image": "op:2"}])
        );
        assert!(relocate(b"{not json", "reg:5000", &[("0.2.0", "x")]).is_err());
    }

    #[test]
    fn a_fragment_without_a_package_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("c.yaml"), "schema: olm.channel\nname: s\n").unwrap();
        let err = package_documents(dir.path(), &["0.1.0"]).unwrap_err();
        assert!(err.to_string().contains("no olm.package"), "{err}");
    }
}
