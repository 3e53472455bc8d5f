//! The krew manifest (`deploy/krew/olm.yaml`), rendered as krew-release-bot
//! renders it, is a valid krew Plugin for `kubectl-olm` on every platform
//! it names.

// Test helpers: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

/// Fills the template as krew-release-bot does: the tag, and each
/// `addURIAndSha "URL" .TagName` as `uri:` and `sha256:` lines.
fn render(template: &str, tag: &str) -> String {
    let mut out = String::new();
    for line in template.lines() {
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix("{{ addURIAndSha \"") {
            let indent = &line[..line.len() - trimmed.len()];
            let url = rest
                .split('"')
                .next()
                .unwrap()
                .replace("{{ .TagName }}", tag);
            out.push_str(&format!(
                "{indent}uri: {url}\n{indent}sha256: {}\n",
                "0".repeat(64)
            ));
        } else {
            out.push_str(&line.replace("{{ .TagName }}", tag));
            out.push('\n');
        }
    }
    out
}

#[test]
fn the_krew_manifest_is_a_plugin_for_every_platform() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/krew/olm.yaml");
    let template = std::fs::read_to_string(&path).unwrap();
    let rendered = render(&template, "v0.1.0");
    let plugin: serde_yaml_ng::Value = serde_yaml_ng::from_str(&rendered).unwrap();
    assert_eq!(
        plugin["apiVersion"],
        "krew.googlecontainertools.github.com/v1alpha2"
    );
    assert_eq!(plugin["kind"], "Plugin");
    // `kubectl olm` runs `kubectl-olm`: the plugin name is what follows the dash.
    assert_eq!(plugin["metadata"]["name"], "olm");
    let spec = &plugin["spec"];
    assert_eq!(spec["version"], "v0.1.0");
    let short = spec["shortDescription"].as_str().unwrap();
    assert!(!short.is_empty() && short.len() <= 50, "{short:?}");
    let mut seen = Vec::new();
    for platform in spec["platforms"].as_sequence().unwrap() {
        let labels = &platform["selector"]["matchLabels"];
        let (os, arch) = (
            labels["os"].as_str().unwrap(),
            labels["arch"].as_str().unwrap(),
        );
        assert_eq!(platform["bin"], "kubectl-olm");
        let uri = platform["uri"].as_str().unwrap();
        assert_eq!(
            uri,
            format!(
                "https://github.com/olm-rs/olm-rs/releases/download/v0.1.0/kubectl-olm_{os}_{arch}.tar.gz"
            )
        );
        assert_eq!(platform["sha256"].as_str().unwrap().len(), 64);
        seen.push(format!("{os}/{arch}"));
    }
    seen.sort();
    assert_eq!(
        seen,
        ["darwin/amd64", "darwin/arm64", "linux/amd64", "linux/arm64"]
    );
}
