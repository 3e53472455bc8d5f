//! Bundle format and file-based catalog (FBC) model: parse, validate, render,
//! the update graph (replaces / skips / skipRange) and blang semver ranges,
//! with operator-registry's semantics.
//!
//! Modules, one per concept:
//!
//! * [`graph`]: channel heads, the replaces chain, cycles and upgrade edges,
//!   over a minimal [`graph::ChannelEntry`];
//! * [`semver`]: versions and version ranges as OLM reads them (Go's
//!   `blang/semver`, quirks included);
//! * [`fbc`]: the catalog model and its loader (directory or in-memory files,
//!   JSON and YAML, `.indexignore`, custom schemas kept verbatim);
//! * [`render`]: writing a catalog back as `opm` writes it, losslessly;
//! * [`bundle`]: `registry+v1` bundles and the properties `opm render` derives;
//! * [`validate`]: upstream's rules for catalogs and bundles, each problem
//!   naming its file, document and field;
//! * [`property`]: properties, kept raw and decoded on demand;
//! * [`limits`], [`files`], [`document`], [`location`]: bounded, located
//!   reading of untrusted input;
//! * [`field_names`], [`csv_keys`], [`go_json`], [`image_reference`]: Go's
//!   case-insensitive field matching, JSON encoding and image references.
//!
//! ```
//! use olm_catalog::graph::{ChannelEntry, channel_head};
//!
//! let entries = [
//!     ChannelEntry::new("etcd.v0.9.2"),
//!     ChannelEntry::new("etcd.v0.9.4").replacing("etcd.v0.9.2"),
//! ];
//! assert_eq!(channel_head(&entries)?.name, "etcd.v0.9.4");
//! # Ok::<(), olm_catalog::graph::GraphError>(())
//! ```
//!
//! ```no_run
//! use olm_catalog::{fbc::Catalog, validate::validate_catalog};
//!
//! let catalog = Catalog::load_dir("catalog")?;
//! let report = validate_catalog(&catalog);
//! if !report.is_valid() {
//!     eprint!("{report}");
//! }
//! # Ok::<(), olm_catalog::fbc::LoadError>(())
//! ```
//!
//! # Where this crate deliberately differs from upstream
//!
//! * **Errors are collected and located.** `opm validate` stops at the first
//!   problem; [`validate::validate_catalog`] reports all of them, each with
//!   file, document index, line and field path.
//! * **Duplicate keys** keep the last value, as upstream, but are reported as
//!   warnings instead of passing silently.
//! * **Empty YAML documents** (a stray `---`) are skipped; upstream fails
//!   with "missing root schema field".
//! * **Unknown fields** of FBC objects are kept and written back; upstream
//!   drops them.
//! * **CSV field names** are read case-insensitively through a named,
//!   reported normalisation ([`csv_keys::normalize_csv_keys`]) limited to
//!   known CSV fields, where upstream relies on Go's decoder.
//! * **Warnings** for what upstream accepts but OLM later refuses: malformed
//!   `olm.constraint`, unparsable dependency ranges, an unreadable metadata
//!   file that upstream silently ignores, a default channel that is not one of
//!   the bundle's channels.
//! * **Limits** on every input ([`limits`]); YAML brackets nested deeper than
//!   the limit are refused before parsing, even inside strings, because the
//!   YAML parser is quadratic in flow nesting.
//! * **Constraints and dependencies** are checked with the real constraint
//!   grammar; upstream's `opm alpha bundle validate` wrongly demands a `cel`
//!   field of every `olm.constraint` dependency.
//! * **Full CSV, CRD and object-metadata schema validation**
//!   (operator-framework/api's validators) is not part of this crate.

pub mod bundle;
pub mod csv_keys;
pub mod document;
pub mod fbc;
pub mod field_names;
pub mod files;
pub mod go_json;
mod go_null;
pub mod graph;
pub mod image_reference;
pub mod limits;
pub mod location;
pub mod property;
pub mod render;
pub mod semver;
pub mod unpacked;
pub mod validate;
