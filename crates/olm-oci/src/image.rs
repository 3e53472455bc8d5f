//! Whole-image operations over [`Client`]: pull an image's layers into a
//! directory or into memory within [`ExtractOptions`], and push a
//! [`BuiltImage`].

use crate::{
    build::BuiltImage,
    client::{Client, PulledManifest},
    digest::Digest,
    error::Error,
    layer::{ExtractOptions, Extractor, MemoryTree},
    manifest::OCI_MANIFEST,
    reference::Reference,
};

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

    /// Pushes a built image: the layer and config (skipped when present),
    /// then the manifest under the reference's tag. Returns the manifest
    /// digest.
    pub async fn push_image(
        &self,
        reference: &Reference,
        image: &BuiltImage,
    ) -> Result<Digest, Error> {
        self.push_blob(reference, image.layer.clone()).await?;
        self.push_blob(reference, image.config.clone()).await?;
        self.push_manifest(reference, OCI_MANIFEST, image.manifest.clone())
            .await
    }
}
