//! `opm render`: bundle directories, catalog directories, bundle images and
//! catalog images to one stream of FBC documents.

use std::{io::Write as _, path::Path, process::ExitCode};

use anyhow::{Context as _, bail};
use olm_catalog::{
    bundle::{LoadBundleOptions, Payload, RegistryBundle, sort_related_images},
    fbc::{Bundle, Catalog, LoadOptions, PayloadChecks},
    render::{self, Format},
};

use crate::{
    cli::{RenderArgs, TlsOptions},
    images::{self, BUNDLE_PACKAGE_LABEL, CONFIGS_LOCATION_LABEL, DB_LOCATION_LABEL},
};

/// The migration that replaces bundle objects by CSV metadata.
pub(crate) const MIGRATION_BUNDLE_OBJECT_TO_CSV_METADATA: &str = "bundle-object-to-csv-metadata";
/// The migration that does nothing.
pub(crate) const MIGRATION_NONE: &str = "none";

/// The output format named by `-o`.
pub(crate) fn output_format(output: &str) -> anyhow::Result<Format> {
    match output {
        "json" => Ok(Format::Json),
        "yaml" => Ok(Format::Yaml),
        other => bail!("invalid --output value {other:?}, expected (json|yaml)"),
    }
}

/// The bundle payload after the migrations up to `level`.
pub(crate) fn payload_for(level: Option<&str>) -> anyhow::Result<Payload> {
    match level {
        None | Some("") | Some(MIGRATION_NONE) => Ok(Payload::BundleObjects),
        Some(MIGRATION_BUNDLE_OBJECT_TO_CSV_METADATA) => Ok(Payload::CsvMetadata),
        Some(other) => bail!("unknown migration level {other:?}"),
    }
}

/// What may be rendered (upstream's `RefMask`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Allowed {
    pub bundle_dirs: bool,
    pub catalog_dirs: bool,
    pub catalog_images: bool,
}

impl Allowed {
    pub(crate) const ALL: Self = Self {
        bundle_dirs: true,
        catalog_dirs: true,
        catalog_images: true,
    };
    pub(crate) const BUNDLE_IMAGES: Self = Self {
        bundle_dirs: false,
        catalog_dirs: false,
        catalog_images: false,
    };
}

/// How to render.
pub(crate) struct Renderer<'a> {
    pub tls: &'a TlsOptions,
    pub payload: Payload,
    pub image_ref_template: Option<ImageRefTemplate>,
    pub allowed: Allowed,
}

pub(crate) async fn run(args: &RenderArgs, tls: &TlsOptions) -> anyhow::Result<ExitCode> {
    let format = output_format(&args.output)?;
    let level = if args.migrate {
        Some(MIGRATION_BUNDLE_OBJECT_TO_CSV_METADATA)
    } else {
        args.migrate_level.as_deref()
    };
    let renderer = Renderer {
        tls,
        payload: payload_for(level)?,
        image_ref_template: args
            .alpha_image_ref_template
            .as_deref()
            .map(ImageRefTemplate::parse)
            .transpose()?,
        allowed: Allowed::ALL,
    };
    if let [reference] = args.refs.as_slice()
        && renderer.allowed.catalog_dirs
        && is_catalog_dir(Path::new(reference))
    {
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        return render_catalog_dir(Path::new(reference), format, RENDER_WHOLE_BYTES, &mut out)
            .and_then(|()| Ok(out.flush()?))
            .with_context(|| format!("render reference {reference:?}"))
            .map(|()| ExitCode::SUCCESS);
    }
    let mut catalog = Catalog::default();
    for reference in &args.refs {
        let mut rendered = renderer
            .render(reference)
            .await
            .with_context(|| format!("render reference {reference:?}"))?;
        normalise_bundles(&mut rendered);
        catalog.merge(rendered);
    }
    let mut out = std::io::stdout().lock();
    render::write(&catalog, format, &mut out)?;
    Ok(ExitCode::SUCCESS)
}

impl Renderer<'_> {
    /// Renders one reference: a directory if one exists at that path, an
    /// image otherwise.
    pub(crate) async fn render(&self, reference: &str) -> anyhow::Result<Catalog> {
        let path = Path::new(reference);
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_dir() => {
                if is_bundle_dir(path) {
                    if !self.allowed.bundle_dirs {
                        bail!("cannot render bundle directory {reference:?}: not allowed");
                    }
                    let bundle = RegistryBundle::load_dir(path)?;
                    let image = match &self.image_ref_template {
                        Some(template) => template.expand(&bundle),
                        None => String::new(),
                    };
                    Ok(single(bundle.to_fbc_bundle(&image, self.payload)))
                } else {
                    if !self.allowed.catalog_dirs {
                        bail!("cannot render declarative config directory: not allowed");
                    }
                    load_catalog(path)
                }
            }
            Ok(_) => bail!("ref {reference:?} is not a directory: not allowed"),
            Err(_) => self.render_image(reference).await,
        }
    }

    async fn render_image(&self, image: &str) -> anyhow::Result<Catalog> {
        let unpacked = images::pull(image, self.tls).await?;
        let labels = unpacked.labels();
        if let Some(configs) = labels.get(CONFIGS_LOCATION_LABEL) {
            if !self.allowed.catalog_images {
                bail!("cannot render declarative config image: not allowed");
            }
            return load_catalog(&unpacked.subdir(configs)?);
        }
        if labels.contains_key(BUNDLE_PACKAGE_LABEL) {
            let bundle = load_bundle_image(&unpacked)?;
            return Ok(single(bundle.to_fbc_bundle(image, self.payload)));
        }
        if labels.contains_key(DB_LOCATION_LABEL) {
            bail!(
                "render {image:?}: sqlite-based index images are no longer supported, migrate to a file-based catalog: not allowed"
            );
        }
        if labels.is_empty() {
            bail!("render {image:?}: image type could not be determined: image has no labels");
        }
        let found: Vec<String> = labels.iter().map(|(k, v)| format!("  {k}={v}")).collect();
        bail!(
            "render {image:?}: image type could not be determined, found labels\n{}",
            found.join("\n")
        )
    }
}

/// Whether `path` is a directory holding a catalog rather than a bundle.
fn is_catalog_dir(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_dir()) && !is_bundle_dir(path)
}

/// Catalog directories of up to this many bytes are rendered from one load
/// that keeps their payloads: reading the files twice costs more than
/// holding them, above all in YAML, which is slow to read. Such a load
/// takes about two and a half times the catalog's size in memory, so a
/// catalog this size stays well under 128 MiB.
pub(crate) const RENDER_WHOLE_BYTES: u64 = 32 << 20;

/// Renders one catalog directory. One of up to `whole_bytes` is loaded
/// whole. A larger one is rendered holding one bundle's payloads at a time:
/// the catalog is loaded without its payloads, and each bundle's are read
/// again from its file as it is written ([`render::PayloadsFromFiles`]).
/// The text is the same either way.
fn render_catalog_dir(
    dir: &Path,
    format: render::Format,
    whole_bytes: u64,
    out: &mut dyn std::io::Write,
) -> anyhow::Result<()> {
    if Catalog::bytes_in_dir(dir, &LoadOptions::default().limits)? <= whole_bytes {
        let mut catalog = load_catalog(dir)?;
        normalise_bundles(&mut catalog);
        render::write(&catalog, format, out)?;
        return Ok(());
    }
    // Each bundle's payloads are read again as it is written; the bundle
    // objects are checked first, as upstream refuses a catalog for one.
    let options = LoadOptions {
        drop_payloads: true,
        payload_checks: PayloadChecks::BundleObjects,
        payload_spans: true,
        ..LoadOptions::default()
    };
    let mut catalog = Catalog::load_dir_with(dir, &options)?;
    render::check_dropped_bundle_objects(&catalog)?;
    catalog.reencode_like_go(&options.limits)?;
    normalise_bundles(&mut catalog);
    let mut payloads =
        render::PayloadsFromFiles::reading_ahead(dir, options.limits.clone(), &catalog);
    render::write_filling(&catalog, format, out, &mut payloads)?;
    Ok(())
}

/// A catalog directory as upstream's loader leaves it: every document
/// re-encoded the way Go's `encoding/json` does (see
/// [`Catalog::reencode_like_go`]), so that it is written as upstream writes
/// it, and refused, as upstream's loader refuses it, when a bundle object
/// does not decode.
fn load_catalog(dir: &Path) -> anyhow::Result<Catalog> {
    let options = LoadOptions::default();
    let mut catalog = Catalog::load_dir_with(dir, &options)?;
    render::check_bundle_objects(&catalog.bundles)?;
    catalog.reencode_like_go(&options.limits)?;
    Ok(catalog)
}

/// What upstream's render does to every bundle it outputs: bundle objects
/// and CSV metadata move to the end of the properties, and related images
/// are sorted by image with Go's unstable sort
/// ([`olm_catalog::bundle::sort_related_images`], which leaves the lists of
/// bundles rendered here, sorted already, as they are).
pub(crate) fn normalise_bundles(catalog: &mut Catalog) {
    for bundle in &mut catalog.bundles {
        let (mut others, objects): (Vec<_>, Vec<_>) = std::mem::take(&mut bundle.properties)
            .into_iter()
            .partition(|p| !olm_catalog::property::is_payload(&p.type_));
        others.extend(objects);
        bundle.properties = others;
        sort_related_images(&mut bundle.related_images);
    }
}

/// Renders a bundle image, keeping the bundle as read (for templates that
/// need its CSV).
pub(crate) async fn render_bundle_image(
    image: &str,
    tls: &TlsOptions,
    payload: Payload,
) -> anyhow::Result<(Bundle, RegistryBundle)> {
    let unpacked = images::pull(image, tls).await?;
    if !unpacked.labels().contains_key(BUNDLE_PACKAGE_LABEL) {
        bail!("cannot render {image:?}: not a bundle image (no {BUNDLE_PACKAGE_LABEL} label)");
    }
    let bundle = load_bundle_image(&unpacked)?;
    let mut rendered = single(bundle.to_fbc_bundle(image, payload));
    normalise_bundles(&mut rendered);
    let fbc = rendered
        .bundles
        .pop()
        .ok_or_else(|| anyhow::anyhow!("no bundle rendered"))?;
    Ok((fbc, bundle))
}

fn load_bundle_image(unpacked: &images::Unpacked) -> anyhow::Result<RegistryBundle> {
    let options = LoadBundleOptions {
        image_labels: Some(unpacked.labels()),
        ..LoadBundleOptions::new()
    };
    Ok(RegistryBundle::load_dir_with(
        unpacked.dir.path(),
        &options,
    )?)
}

fn single(bundle: Bundle) -> Catalog {
    Catalog {
        bundles: vec![bundle],
        ..Catalog::default()
    }
}

/// A directory with `manifests` and `metadata` entries is a bundle, as
/// upstream decides.
fn is_bundle_dir(path: &Path) -> bool {
    path.join("manifests").exists() && path.join("metadata").exists()
}

/// `--alpha-image-ref-template`: Go template text with `{{.Package}}`,
/// `{{.Name}}` and `{{.Version}}` actions.
#[derive(Debug, Clone)]
pub(crate) struct ImageRefTemplate {
    parts: Vec<TemplatePart>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum TemplatePart {
    Text(String),
    Package,
    Name,
    Version,
}

impl ImageRefTemplate {
    pub(crate) fn parse(text: &str) -> anyhow::Result<Self> {
        let mut parts = Vec::new();
        let mut rest = text;
        while let Some(start) = rest.find("{{") {
            if start > 0 {
                parts.push(TemplatePart::Text(rest[..start].to_owned()));
            }
            let after = &rest[start + 2..];
            let end = after.find("}}").ok_or_else(|| {
                anyhow::anyhow!("invalid image reference template: unclosed action")
            })?;
            let action = after[..end].trim();
            parts.push(match action {
                ".Package" => TemplatePart::Package,
                ".Name" => TemplatePart::Name,
                ".Version" => TemplatePart::Version,
                other => bail!("invalid image reference template: unsupported action {other:?}"),
            });
            rest = &after[end + 2..];
        }
        if !rest.is_empty() {
            parts.push(TemplatePart::Text(rest.to_owned()));
        }
        Ok(Self { parts })
    }

    pub(crate) fn expand(&self, bundle: &RegistryBundle) -> String {
        self.parts
            .iter()
            .map(|part| match part {
                TemplatePart::Text(text) => text.as_str(),
                TemplatePart::Package => bundle.package.as_str(),
                TemplatePart::Name => bundle.name.as_str(),
                TemplatePart::Version => bundle.version(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_and_migration_flags_are_checked() {
        assert!(output_format("json").is_ok());
        assert!(output_format("yaml").is_ok());
        assert!(output_format("xml").is_err());
        assert_eq!(payload_for(None).unwrap(), Payload::BundleObjects);
        assert_eq!(payload_for(Some("none")).unwrap(), Payload::BundleObjects);
        assert_eq!(
            payload_for(Some("bundle-object-to-csv-metadata")).unwrap(),
            Payload::CsvMetadata
        );
        assert!(payload_for(Some("split-icon")).is_err());
    }

    #[test]
    fn a_catalog_renders_the_same_whole_or_a_bundle_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let object = olm_catalog::property::BundleObject::encode(
            br#"{"kind":"ConfigMap","metadata":{"name":"c"}}"#,
        )
        .data;
        for (package, format) in [("a", "yaml"), ("b", "json")] {
            let docs = [
                serde_json::json!({"schema": "olm.package", "name": package, "defaultChannel": "s"}),
                serde_json::json!({"schema": "olm.channel", "package": package, "name": "s", "entries": [{"name": format!("{package}.v1")}]}),
                serde_json::json!({"schema": "olm.bundle", "package": package, "name": format!("{package}.v1"), "image": "i", "properties": [
                    {"type": "olm.bundle.object", "value": {"data": object}},
                    {"type": "olm.package", "value": {"packageName": package, "version": "1.0.0"}},
                    {"type": "olm.csv.metadata", "value": {"displayName": "\u{e9}\u{2028}", "keywords": ["k"]}},
                ]}),
            ];
            std::fs::create_dir(dir.path().join(package)).unwrap();
            let text: String = docs
                .iter()
                .map(|d| match format {
                    "yaml" => format!("---\n{}", serde_yaml_ng::to_string(d).unwrap()),
                    _ => serde_json::to_string_pretty(d).unwrap(),
                })
                .collect();
            std::fs::write(
                dir.path().join(package).join(format!("catalog.{format}")),
                text,
            )
            .unwrap();
        }
        let bytes = Catalog::bytes_in_dir(dir.path(), &Default::default()).unwrap();
        assert!(bytes > 0);
        for format in [Format::Json, Format::Yaml] {
            let mut whole = Vec::new();
            render_catalog_dir(dir.path(), format, bytes, &mut whole).unwrap();
            let mut streamed = Vec::new();
            render_catalog_dir(dir.path(), format, bytes - 1, &mut streamed).unwrap();
            assert!(!whole.is_empty());
            assert_eq!(
                String::from_utf8(whole).unwrap(),
                String::from_utf8(streamed).unwrap()
            );
        }
    }

    #[test]
    fn a_bundle_object_that_does_not_decode_refuses_the_catalog_either_way() {
        // Not base64, and base64 of "hello: [unclosed".
        for data in ["!!", "aGVsbG86IFt1bmNsb3NlZA=="] {
            let dir = tempfile::tempdir().unwrap();
            let docs = [
                serde_json::json!({"schema": "olm.package", "name": "a", "defaultChannel": "s"}),
                serde_json::json!({"schema": "olm.channel", "package": "a", "name": "s", "entries": [{"name": "a.v1"}]}),
                serde_json::json!({"schema": "olm.bundle", "package": "a", "name": "a.v1", "image": "i", "properties": [
                    {"type": "olm.package", "value": {"packageName": "a", "version": "1.0.0"}},
                    {"type": "olm.bundle.object", "value": {"data": data}},
                ]}),
            ];
            let text: String = docs
                .iter()
                .map(|d| serde_json::to_string(d).unwrap() + "\n")
                .collect();
            std::fs::write(dir.path().join("catalog.json"), text).unwrap();
            let bytes = Catalog::bytes_in_dir(dir.path(), &Default::default()).unwrap();
            for whole_bytes in [bytes, bytes - 1] {
                let mut out = Vec::new();
                let err = render_catalog_dir(dir.path(), Format::Json, whole_bytes, &mut out)
                    .unwrap_err();
                assert!(
                    format!("{err:#}")
                        .contains("read bundle objects: package \"a\", bundle \"a.v1\""),
                    "{data}, whole up to {whole_bytes}: {err:#}"
                );
                // Refused before anything is written, as upstream refuses it.
                assert!(out.is_empty(), "{data}, whole up to {whole_bytes}");
            }
        }
    }

    #[test]
    fn image_ref_templates_take_the_three_actions() {
        let t =
            ImageRefTemplate::parse("quay.io/x/{{ .Package }}:v{{.Version}}-{{.Name}}").unwrap();
        assert_eq!(t.parts.len(), 6);
        for bad in ["{{.Nope}}", "{{.Package", "{{ printf \"%s\" .Name }}"] {
            assert!(ImageRefTemplate::parse(bad).is_err(), "{bad}");
        }
        assert!(ImageRefTemplate::parse("plain").is_ok());
    }
}
