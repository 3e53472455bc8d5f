//! Whole-image operations over [`Client`]: pull an image's layers into a
//! directory or into memory within [`ExtractOptions`], pull an image whole
//! to build on it, and push a [`BuiltImage`].

use crate::{
    build::{BaseImage, BuiltImage},
    client::{Client, PulledManifest},
    digest::Digest,
    error::Error,
    layer::{ExtractOptions, Extractor, MemoryTree},
    manifest::{Descriptor, OCI_MANIFEST},
    reference::Reference,
};

/// Most bytes (compressed, all layers together) of a base image pulled by
/// [`Client::pull_base`]. The layers are held in memory until the image
/// built on them is pushed; an `opm` image is tens of megabytes.
pub const MAX_BASE_IMAGE_BYTES: u64 = 512 * 1024 * 1024;

/// An image pulled into memory.
#[derive(Debug, Clone)]
pub struct PulledImage {
    /// Its manifest, config and digest.
    pub manifest: PulledManifest,
    /// Its files by relative path.
    pub files: MemoryTree,
}

impl Client {
    /// Pulls `reference` and extracts its layers into memory.
    pub async fn pull_to_memory(
        &self,
        reference: &Reference,
        options: &ExtractOptions,
    ) -> Result<PulledImage, Error> {
        let manifest = self.pull_manifest(reference).await?;
        let mut layers = Vec::with_capacity(manifest.manifest.layers.len());
        for layer in &manifest.manifest.layers {
            let bytes = self
                .fetch_blob(reference, layer, options.limits.max_compressed_bytes)
                .await?;
            layers.push((layer.digest.clone(), bytes));
        }
        let options = options.clone();
        let files = tokio::task::spawn_blocking(move || {
            let mut extractor = Extractor::new(&options);
            let mut tree = MemoryTree::new();
            for (digest, bytes) in layers {
                extractor
                    .extract_to_memory(bytes.as_ref(), &mut tree)
                    .map_err(|source| Error::Extract { digest, source })?;
            }
            Ok::<_, Error>(tree)
        })
        .await
        .map_err(|e| Error::Io {
            path: "<extract>".into(),
            source: std::io::Error::other(e.to_string()),
        })??;
        Ok(PulledImage { manifest, files })
    }

    /// Pulls `reference` and extracts its layers into `root`; each layer is
    /// streamed to a temporary file first, verified, then extracted.
    pub async fn pull_to_dir(
        &self,
        reference: &Reference,
        root: &std::path::Path,
        options: &ExtractOptions,
    ) -> Result<PulledManifest, Error> {
        let manifest = self.pull_manifest(reference).await?;
        let scratch = tempfile::Builder::new()
            .prefix("olm-oci-layers-")
            .tempdir()
            .map_err(|source| Error::Io {
                path: std::env::temp_dir().display().to_string(),
                source,
            })?;
        let mut files = Vec::new();
        for (i, layer) in manifest.manifest.layers.iter().enumerate() {
            let path = scratch.path().join(format!("layer-{i}"));
            self.fetch_blob_to_file(reference, layer, options.limits.max_compressed_bytes, &path)
                .await?;
            files.push((layer.digest.clone(), path));
        }
        let options = options.clone();
        let root = root.to_path_buf();
        tokio::task::spawn_blocking(move || {
            let mut extractor = Extractor::new(&options);
            for (digest, path) in files {
                let file = std::fs::File::open(&path).map_err(|source| Error::Io {
                    path: path.display().to_string(),
                    source,
                })?;
                extractor
                    .extract_to_dir(std::io::BufReader::new(file), &root)
                    .map_err(|source| Error::Extract { digest, source })?;
            }
            Ok::<_, Error>(())
        })
        .await
        .map_err(|e| Error::Io {
            path: "<extract>".into(),
            source: std::io::Error::other(e.to_string()),
        })??;
        drop(scratch);
        Ok(manifest)
    }

    /// Pulls `reference` whole, to build on it: its manifest (for this
    /// client's platform), its config and every layer's bytes, each
    /// verified, within [`MAX_BASE_IMAGE_BYTES`].
    pub async fn pull_base(&self, reference: &Reference) -> Result<BaseImage, Error> {
        self.pull_base_within(reference, MAX_BASE_IMAGE_BYTES).await
    }

    /// [`Client::pull_base`] with another limit on the layers' total size;
    /// an image whose manifest declares more is refused before any layer
    /// is downloaded.
    pub async fn pull_base_within(
        &self,
        reference: &Reference,
        max_bytes: u64,
    ) -> Result<BaseImage, Error> {
        let (pulled, config_bytes) = self.pull_manifest_and_config(reference).await?;
        check_base_size(reference, &pulled.manifest.layers, max_bytes)?;
        let layer_count = pulled.manifest.layers.len();
        let diff_id_count = pulled.config.rootfs.diff_ids.len();
        if diff_id_count != layer_count {
            return Err(Error::DiffIdsMismatch {
                reference: reference.to_string(),
                diff_ids: diff_id_count,
                layers: layer_count,
            });
        }
        let raw_config = serde_json::from_slice(&config_bytes).map_err(|source| Error::Config {
            reference: reference.to_string(),
            source,
        })?;
        let mut layers = Vec::with_capacity(layer_count);
        for layer in &pulled.manifest.layers {
            // Each blob is capped at its descriptor's size, and the sizes
            // were summed against the limit above.
            layers.push(self.fetch_blob(reference, layer, layer.size).await?);
        }
        Ok(BaseImage::from_verified_parts(
            pulled.digest,
            pulled.manifest,
            pulled.config,
            raw_config,
            layers,
        ))
    }

    /// Pushes a built image: the layers, base layers first, and the config
    /// (each skipped when present), then the manifest under the
    /// reference's tag. Returns the manifest digest.
    pub async fn push_image(
        &self,
        reference: &Reference,
        image: &BuiltImage,
    ) -> Result<Digest, Error> {
        for (_, layer) in image.layers() {
            self.push_blob(reference, layer.clone()).await?;
        }
        self.push_blob(reference, image.config.clone()).await?;
        self.push_manifest(reference, OCI_MANIFEST, image.manifest.clone())
            .await
    }
}

/// Refuses a base image whose layers, as its manifest declares them, add up
/// to more than `max_bytes`.
pub fn check_base_size(
    reference: &Reference,
    layers: &[Descriptor],
    max_bytes: u64,
) -> Result<(), Error> {
    let size = layers
        .iter()
        .fold(0u64, |sum, layer| sum.saturating_add(layer.size));
    if size > max_bytes {
        return Err(Error::BaseImageTooLarge {
            reference: reference.to_string(),
            size,
            limit: max_bytes,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn layer_of(size: u64) -> Descriptor {
        Descriptor {
            media_type: crate::manifest::OCI_LAYER_GZIP.into(),
            digest: Digest::of(size.to_string().as_bytes()),
            size,
            platform: None,
            annotations: BTreeMap::new(),
        }
    }

    #[test]
    fn base_images_are_capped_by_the_sum_of_their_layers() {
        let reference = Reference::parse("registry.example/base/opm:v1").unwrap();
        let layers = [layer_of(60), layer_of(40)];
        assert!(check_base_size(&reference, &layers, 100).is_ok());
        let refused = check_base_size(&reference, &layers, 99).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "base image registry.example/base/opm:v1: its layers are 100 bytes, more than the limit of 99 bytes"
        );
        assert_eq!(refused.category(), "too_large");
        // Declared sizes that overflow a u64 do not wrap under the limit.
        let huge = [layer_of(u64::MAX), layer_of(2)];
        assert!(check_base_size(&reference, &huge, MAX_BASE_IMAGE_BYTES).is_err());
        assert!(check_base_size(&reference, &[], 0).is_ok());
    }
}
