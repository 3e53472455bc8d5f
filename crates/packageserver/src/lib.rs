//! packageserver: the `packages.operators.coreos.com/v1` aggregated API that
//! serves every catalog's packages as PackageManifests, with certificates
//! that rotate themselves.
//!
//! Pure parts ([`manifest`], [`paging`], [`selector`], [`store`]) hold
//! upstream's and the API server's rules;
//! the I/O around them is kept thin.
//!
//! This is a service crate: it may depend on any library crate of ours; no
//! library crate may depend on it.

pub mod api;
pub mod auth;
pub mod catalogs;
pub mod certs;
pub mod discovery;
pub mod manifest;
pub mod metrics;
pub mod paging;
pub mod request;
pub mod selector;
pub mod server;
pub mod store;
pub mod table;
