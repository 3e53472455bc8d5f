//! `opm alpha render-template [TYPE] [FILE]`: the `basic` template
//! (`olm.template.basic`), whose bundle entries name only an image and are
//! rendered from it; the type is detected from the schema when not given.

use std::{io::Read as _, process::ExitCode};

use anyhow::{Context as _, bail};
use olm_catalog::{
    bundle::{Payload, RegistryBundle},
    fbc::{Catalog, Icon, Package},
    limits::Limits,
    render,
};

use crate::{
    cli::{RenderTemplateArgs, TlsOptions},
    render::{Allowed, Renderer, output_format, payload_for, render_bundle_image},
    semver_template::{SemverTemplate, check_build_metadata, generate_channels},
};

/// The basic template's schema.
pub(crate) const BASIC_SCHEMA: &str = "olm.template.basic";
/// The semver template's schema.
pub(crate) const SEMVER_SCHEMA: &str = crate::semver_template::SCHEMA;
/// Template types, as `TYPE` names them.
const TYPES: [&str; 2] = ["basic", "semver"];
/// Largest template read.
pub(crate) const MAX_TEMPLATE_BYTES: u64 = 64 * 1024 * 1024;

pub(crate) async fn run(args: &RenderTemplateArgs, tls: &TlsOptions) -> anyhow::Result<ExitCode> {
    let (kind, file) = match args.args.as_slice() {
        [] => (None, "-".to_owned()),
        [one] if TYPES.contains(&one.as_str()) => (Some(one.clone()), "-".to_owned()),
        [one] => (None, one.clone()),
        [kind, file, ..] => {
            if !TYPES.contains(&kind.as_str()) {
                bail!(
                    "invalid template type {kind:?}, must be one of: [{}]",
                    TYPES.join(" ")
                );
            }
            (Some(kind.clone()), file.clone())
        }
    };
    let format = match args.output.as_str() {
        "mermaid" => bail!("mermaid output is not supported by this opm"),
        other => output_format(other).map_err(|_| {
            anyhow::anyhow!("invalid --output value {other:?}, expected (json|yaml|mermaid)")
        })?,
    };
    let mut bytes = Vec::new();
    if file == "-" {
        std::io::stdin()
            .take(MAX_TEMPLATE_BYTES + 1)
            .read_to_end(&mut bytes)?;
    } else {
        std::fs::File::open(&file)
            .with_context(|| format!("unable to open {file:?}"))?
            .take(MAX_TEMPLATE_BYTES + 1)
            .read_to_end(&mut bytes)
            .with_context(|| format!("unable to open {file:?}"))?;
    }
    if bytes.len() as u64 > MAX_TEMPLATE_BYTES {
        bail!("template is larger than {MAX_TEMPLATE_BYTES} bytes");
    }
    let document: serde_json::Value = first_document(&bytes).context("decoding template schema")?;
    let schema = document
        .get("schema")
        .and_then(|s| s.as_str())
        .unwrap_or_default();
    let kind = match kind {
        Some(kind) => kind,
        None => match schema {
            BASIC_SCHEMA => "basic".to_owned(),
            SEMVER_SCHEMA => "semver".to_owned(),
            other => bail!("auto-detecting template type: unknown template schema: {other}"),
        },
    };
    let payload = payload_for(args.migrate_level.as_deref())?;
    if kind == "semver" {
        let catalog = render_semver(document, tls, payload)
            .await
            .context("rendering template")?;
        render::write(&catalog, format, &mut std::io::stdout().lock()).context("writing output")?;
        return Ok(ExitCode::SUCCESS);
    }
    if schema != BASIC_SCHEMA {
        bail!(
            "rendering template: template has unknown schema ({schema:?}), should be {BASIC_SCHEMA:?}"
        );
    }
    let renderer = Renderer {
        tls,
        payload,
        image_ref_template: None,
        allowed: Allowed::BUNDLE_IMAGES,
    };
    let catalog = render_basic(&document, &renderer)
        .await
        .context("rendering template")?;
    render::write(&catalog, format, &mut std::io::stdout().lock()).context("writing output")?;
    Ok(ExitCode::SUCCESS)
}

/// The first YAML or JSON document of `bytes`.
fn first_document(bytes: &[u8]) -> anyhow::Result<serde_json::Value> {
    let text = std::str::from_utf8(bytes)?;
    let documents = serde_yaml_ng::Deserializer::from_str(text);
    for document in documents {
        let value = serde_json::Value::deserialize_yaml(document)?;
        if !value.is_null() {
            return Ok(value);
        }
    }
    bail!("empty template")
}

trait FromYamlDocument: Sized {
    fn deserialize_yaml(document: serde_yaml_ng::Deserializer<'_>) -> anyhow::Result<Self>;
}

impl FromYamlDocument for serde_json::Value {
    fn deserialize_yaml(document: serde_yaml_ng::Deserializer<'_>) -> anyhow::Result<Self> {
        Ok(serde::Deserialize::deserialize(document)?)
    }
}

/// Loads the entries as a catalog, then replaces every bundle entry (which
/// must name only `schema` and `image`) by the bundle rendered from its
/// image.
async fn render_basic(
    document: &serde_json::Value,
    renderer: &Renderer<'_>,
) -> anyhow::Result<Catalog> {
    let entries = document
        .get("entries")
        .and_then(|e| e.as_array())
        .cloned()
        .unwrap_or_default();
    let mut text = String::new();
    for entry in &entries {
        text.push_str(&serde_json::to_string(entry)?);
        text.push('\n');
    }
    let mut catalog = Catalog::load_file("template", text.as_bytes(), &Limits::default())?;
    let templates = std::mem::take(&mut catalog.bundles);
    for bundle in templates {
        let is_template = !bundle.image.is_empty()
            && bundle.package.is_empty()
            && bundle.properties.is_empty()
            && bundle.related_images.is_empty();
        if !is_template {
            bail!("unexpected fields present in basic template bundle");
        }
        let rendered = renderer.render(&bundle.image).await?;
        catalog.bundles.extend(rendered.bundles);
    }
    catalog.clear_origins();
    Ok(catalog)
}

/// Renders an `olm.semver` template: every bundle image once, channels
/// generated from their versions, the package with the default channel and
/// the description and icon of the default channel head's CSV.
async fn render_semver(
    document: serde_json::Value,
    tls: &TlsOptions,
    payload: Payload,
) -> anyhow::Result<Catalog> {
    let (template, settings) = SemverTemplate::parse(document)?;
    let mut rendered: Vec<(String, olm_catalog::fbc::Bundle, RegistryBundle)> = Vec::new();
    for (_, entries) in template.archetypes() {
        for entry in entries {
            if rendered.iter().all(|(image, ..)| image != &entry.image) {
                let (fbc, bundle) = render_bundle_image(&entry.image, tls, payload).await?;
                rendered.push((entry.image.clone(), fbc, bundle));
            }
        }
    }
    if rendered.is_empty() {
        bail!("render: no bundles specified or no bundles could be rendered");
    }
    let mut package = String::new();
    let mut versions: [std::collections::BTreeMap<String, olm_catalog::semver::Version>; 3] =
        Default::default();
    for (i, (_, entries)) in template.archetypes().into_iter().enumerate() {
        for entry in entries {
            let Some((_, fbc, _)) = rendered.iter().find(|(image, ..)| image == &entry.image)
            else {
                bail!(
                    "render: unable to post-process bundle info: supplied bundle image name {:?} not found in rendered bundle images",
                    entry.image
                );
            };
            let property = fbc.package_property().map_err(|e| {
                anyhow::anyhow!("render: unable to post-process bundle info: parse properties for bundle {:?}: {e}", fbc.name)
            })?;
            let version = olm_catalog::semver::Version::parse(&property.version).map_err(|e| {
                anyhow::anyhow!(
                    "render: unable to post-process bundle info: bundle {:?} has invalid version {:?}: {e}",
                    fbc.name,
                    property.version
                )
            })?;
            if package.is_empty() {
                package = property.package_name.clone();
            } else if property.package_name != package {
                bail!(
                    "render: unable to post-process bundle info: bundle {:?} does not belong to this package: {package:?}",
                    property.package_name
                );
            }
            if versions[i].insert(fbc.name.clone(), version).is_some() {
                bail!(
                    "render: unable to post-process bundle info: duplicate bundle name {:?}",
                    fbc.name
                );
            }
        }
        check_build_metadata(&versions[i]).context("render: unable to post-process bundle info")?;
    }
    let (channels, default_channel) = generate_channels(&package, &settings, &versions);
    let mut package_doc = Package {
        name: package.clone(),
        default_channel: default_channel.clone(),
        ..Package::default()
    };
    // Description and icon from the default channel's head.
    let head = channels
        .iter()
        .find(|c| c.name == default_channel)
        .and_then(|c| c.entries.last())
        .map(|e| e.name.clone());
    if let Some((_, _, bundle)) =
        head.and_then(|head| rendered.iter().find(|(_, fbc, _)| fbc.name == head))
    {
        let spec = &bundle.csv.spec;
        if let Some(description) = spec.description.as_ref().filter(|d| !d.is_empty()) {
            package_doc.description = description.clone();
        }
        if let Some(icon) = spec.icon.as_ref().and_then(|icons| icons.first()) {
            use base64::Engine as _;
            let engine = base64::engine::general_purpose::STANDARD;
            if let Ok(bytes) = engine.decode(icon.base64_data.trim()) {
                package_doc.icon = Some(Icon {
                    base64data: engine.encode(bytes),
                    mediatype: icon.media_type.clone(),
                    extra: Vec::new(),
                });
            }
        }
    }
    Ok(Catalog {
        packages: vec![package_doc],
        channels,
        bundles: rendered.into_iter().map(|(_, fbc, _)| fbc).collect(),
        ..Catalog::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn templates_over_the_limit_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let tls = TlsOptions {
            skip_tls_verify: false,
            use_http: false,
        };
        for (len, refused) in [(MAX_TEMPLATE_BYTES, false), (MAX_TEMPLATE_BYTES + 1, true)] {
            // Sparse: the test costs a read of the limit, not a write.
            let path = dir.path().join(format!("template-{len}.yaml"));
            std::fs::File::create(&path).unwrap().set_len(len).unwrap();
            let args = RenderTemplateArgs {
                args: vec!["basic".into(), path.display().to_string()],
                output: "json".into(),
                migrate_level: None,
            };
            let error = run(&args, &tls).await.unwrap_err().to_string();
            let named = "template is larger than 67108864 bytes";
            if refused {
                assert_eq!(error, named);
            } else {
                // Read whole, then refused for what it holds.
                assert_eq!(error, "decoding template schema");
            }
        }
    }
}
