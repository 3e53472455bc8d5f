//! What installing (or upgrading to) resolved bundles changes, as pure
//! rules over plain data: each bundle's InstallPlan steps and the order they
//! are listed in ([`steps`]), whether a CRD may be replaced by a bundle's
//! ([`crd`]), the RBAC objects a CSV's install strategy becomes, named and
//! hashed byte for byte as upstream names them ([`csv_rbac`], with the Go
//! encodings it hashes: [`go_json`], [`hash`]; olm-operator creates the same
//! objects with it), and the RBAC a CSV grants compared with the CSV it
//! replaces ([`rbac`]). catalog-operator plans and applies with them; `kubectl olm
//! preview` shows them before anything is applied. One home, so that the
//! preview and what OLM then does cannot disagree.
//!
//! This crate does no I/O and must not depend on `kube`'s client or runtime,
//! nor on any service crate: callers read the cluster and registries, and
//! hand the objects in.

pub mod crd;
pub mod csv_rbac;
pub mod go_json;
pub mod hash;
pub mod rbac;
pub mod steps;
