//! `opm init`: an `olm.package` document.

use std::process::ExitCode;

use anyhow::{Context as _, bail};
use olm_catalog::{
    fbc::{Catalog, Icon, Package},
    render,
};

use crate::{cli::InitArgs, render::output_format};

pub(crate) fn run(args: &InitArgs) -> anyhow::Result<ExitCode> {
    let format = output_format(&args.output)?;
    let mut package = Package {
        name: args.package.clone(),
        default_channel: args.default_channel.clone(),
        ..Package::default()
    };
    if let Some(path) = &args.icon {
        let data =
            std::fs::read(path).with_context(|| format!("open icon file: {}", path.display()))?;
        let mediatype = image_media_type(&data).context("detect icon mediatype")?;
        package.icon = Some(Icon {
            base64data: base64_encode(&data),
            mediatype: mediatype.to_owned(),
            extra: Vec::new(),
        });
    }
    if let Some(path) = &args.description {
        let data = std::fs::read(path)
            .with_context(|| format!("open description file: {}", path.display()))?;
        package.description = String::from_utf8_lossy(&data).into_owned();
    }
    let catalog = Catalog {
        packages: vec![package],
        ..Catalog::default()
    };
    render::write(&catalog, format, &mut std::io::stdout().lock())?;
    Ok(ExitCode::SUCCESS)
}

/// The image media type of `data` by its magic bytes, as upstream's
/// `filetype.Match` decides; anything else is refused as upstream refuses
/// it (SVG included, which has no magic bytes).
fn image_media_type(data: &[u8]) -> anyhow::Result<&'static str> {
    let known: &[(&[u8], usize, &str)] = &[
        (b"\x89PNG\r\n\x1a\n", 0, "image/png"),
        (b"\xff\xd8\xff", 0, "image/jpeg"),
        (b"GIF87a", 0, "image/gif"),
        (b"GIF89a", 0, "image/gif"),
        (b"WEBP", 8, "image/webp"),
        (b"BM", 0, "image/bmp"),
        (b"\x00\x00\x01\x00", 0, "image/vnd.microsoft.icon"),
        (b"II*\x00", 0, "image/tiff"),
        (b"MM\x00*", 0, "image/tiff"),
    ];
    for (magic, offset, mediatype) in known {
        if data.len() >= offset + magic.len() && &data[*offset..offset + magic.len()] == *magic {
            return Ok(mediatype);
        }
    }
    bail!("detected invalid type \"\": not an image")
}

fn base64_encode(data: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn icons_are_typed_by_magic_bytes() {
        assert_eq!(
            image_media_type(b"\x89PNG\r\n\x1a\nrest").unwrap(),
            "image/png"
        );
        assert_eq!(image_media_type(b"GIF89a...").unwrap(), "image/gif");
        assert_eq!(
            image_media_type(b"RIFF\0\0\0\0WEBPVP8 ").unwrap(),
            "image/webp"
        );
        assert!(image_media_type(b"<svg xmlns='http://www.w3.org/2000/svg'/>").is_err());
        assert!(image_media_type(b"").is_err());
    }
}
