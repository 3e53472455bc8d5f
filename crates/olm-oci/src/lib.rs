//! An OCI distribution client and image tooling: what `opm` and the
//! bundle-unpacker need to pull bundle and catalog images straight from a
//! registry, and to publish them, with no container engine.
//!
//! * [`reference`]: image references with Docker's normalisation;
//! * [`auth`]: Docker `config.json` / `kubernetes.io/dockerconfigjson`
//!   credentials and `WWW-Authenticate` challenges;
//! * [`client`]: resolve tags to digests, fetch manifests (OCI and Docker,
//!   images and indexes, platform selection), fetch blobs with size caps and
//!   sha256 verification, push blobs and manifests, anonymous, basic and
//!   bearer-token auth, plain HTTP per host;
//! * [`layer`]: bounded extraction of tar / gzip / zstd layers into a
//!   directory or memory (sizes, entries, ratio, traversal, links,
//!   whiteouts, path prefixes);
//! * [`build`]: a reproducible OCI image from local files, alone or on a
//!   base image;
//! * [`image`]: pull whole images (to extract, or to build on) and push
//!   built ones;
//! * [`policy`]: the allowed-registries policy.
//!
//! ```no_run
//! # async fn example() -> Result<(), olm_oci::Error> {
//! use olm_oci::{Client, ClientOptions, ExtractOptions, Reference};
//!
//! let client = Client::new(ClientOptions::default().plain_http("127.0.0.1:5000"))?;
//! let image = Reference::parse("127.0.0.1:5000/olm/etcd-bundle:v0.9.4").expect("valid reference");
//! let pulled = client
//!     .pull_to_memory(&image, &ExtractOptions::only(&["manifests", "metadata"]))
//!     .await?;
//! println!("{} files, labels {:?}", pulled.files.len(), pulled.manifest.labels());
//! # Ok(())
//! # }
//! ```
//!
//! This crate is a library for any crate that reads images: it must not
//! depend on `kube`, on Kubernetes API types, or on any service crate
//! (credentials from a pull secret are passed in as its body).

pub mod auth;
pub mod build;
pub mod client;
pub mod digest;
mod error;
pub mod image;
pub mod layer;
pub mod manifest;
pub mod policy;
pub mod pull_secrets;
pub mod reference;

pub use auth::{Credentials, DockerConfig};
pub use build::{BaseImage, BuiltImage, ImageBuilder};
pub use client::{Client, ClientOptions, PulledManifest};
pub use digest::Digest;
pub use error::Error;
pub use image::{MAX_BASE_IMAGE_BYTES, PulledImage};
pub use layer::{ExtractLimits, ExtractOptions};
pub use manifest::Platform;
pub use reference::Reference;
