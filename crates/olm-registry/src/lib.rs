//! The registry gRPC API of OLM catalogs: a server over an indexed
//! file-based catalog, and a typed client.
//!
//! The wire contract is `proto/api/registry.proto`, wire-compatible with
//! operator-registry's `api.Registry` and `api.ExperimentalRegistry`, so OLM,
//! packageserver and `grpcurl` talk to this server as they talk to
//! `opm serve`, and this client talks to either. Its generated code is
//! committed in `src/gen/` and checked by `tests/codegen_fresh.rs`.
//!
//! * [`CatalogIndex`] reads a catalog directory once, streaming its
//!   documents, and keeps only names, versions, the channel graphs and the
//!   byte ranges of documents; full documents are read back from the files
//!   when an answer needs them. Memory stays flat whatever the catalog's size.
//! * [`RegistryServer`] serves every RPC of the contract, plus
//!   `grpc.health.v1.Health` and server reflection.
//! * [`RegistryClient`] calls a registry with deadlines and returns Rust types.
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use olm_registry::{CatalogIndex, ClientOptions, IndexOptions, RegistryClient, RegistryServer};
//!
//! let index = CatalogIndex::build("/configs", &IndexOptions::default())?;
//! let server = RegistryServer::new(index).spawn_loopback().await?;
//! let client = RegistryClient::connect(&server.endpoint(), ClientOptions::default()).await?;
//! let packages = client.list_packages().await?;
//! # Ok(())
//! # }
//! ```
//!
//! This crate is a library for catalog-facing services (the catalog's
//! registry pod, packageserver, the catalog operator, `opm serve`): it must
//! not depend on `kube`, on Kubernetes API types, or on any service crate.
//! The catalog model and graph rules come from `olm-catalog`.

/// Messages, server traits and clients generated from
/// `proto/api/registry.proto` (package `api`).
#[allow(
    missing_docs,
    unreachable_pub,
    clippy::all,
    clippy::pedantic,
    clippy::unwrap_used
)]
pub mod api {
    include!("gen/api.rs");
}

mod answer_cache;
mod bundle;
mod client;
mod csv_types;
mod error;
mod index;
mod limits;
#[cfg(feature = "resolver-input")]
pub mod resolver_input;
mod server;
mod structs;

pub use answer_cache::ANSWER_CACHE_BYTES;
pub use client::{ClientOptions, GvkQuery, RegistryClient, collect_stream};
pub use error::{ClientError, IndexError, Problem, ReadError, ServeError};
pub use index::{CatalogIndex, IndexOptions, IndexStats};
pub use limits::{
    DEFAULT_MAX_DOCUMENT_BYTES, DEFAULT_MAX_STREAM_BYTES, DEFAULT_MAX_STREAM_DURATION,
    DEFAULT_MAX_STREAM_MESSAGES, IndexLimits, MAX_NAME_BYTES, MAX_REQUEST_MESSAGE_BYTES,
    MAX_RESPONSE_MESSAGE_BYTES, StreamLimits,
};
pub use server::{
    FILE_DESCRIPTOR_SET, HEADER_ACKNOWLEDGE_EXPERIMENTAL, RegistryServer, RunningServer,
};
