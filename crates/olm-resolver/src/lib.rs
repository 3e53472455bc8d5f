//! OLM's dependency resolution, as a pure function: given the installed
//! operators of a namespace, its Subscriptions and the catalogs visible to it,
//! decide which bundles to install or upgrade to, exactly as upstream OLM
//! (operator-lifecycle-manager `pkg/controller/registry/resolver`) decides, or
//! explain which constraints conflict.
//!
//! ```
//! use std::sync::Arc;
//! use olm_resolver::{BundleInput, CatalogKey, CatalogSnapshot, NamespaceState, ResolveRequest, Subscription, resolve};
//!
//! let bundle = |name: &str, replaces: &str| BundleInput {
//!     name: name.into(),
//!     package: "etcd".into(),
//!     channel: "stable".into(),
//!     replaces: replaces.into(),
//!     properties: vec![(
//!         "olm.package".into(),
//!         format!(r#"{{"packageName":"etcd","version":"{}"}}"#, &name[6..]),
//!     )],
//!     ..Default::default()
//! };
//! let catalog = Arc::new(CatalogSnapshot::build(
//!     CatalogKey::new("community", "olm"),
//!     0,
//!     true,
//!     &[("etcd".into(), "stable".into())],
//!     vec![bundle("etcd.v0.9.0", ""), bundle("etcd.v0.9.2", "etcd.v0.9.0")],
//! ));
//! let state = NamespaceState {
//!     namespace: "operators".into(),
//!     subscriptions: vec![Subscription {
//!         name: "etcd".into(),
//!         package: "etcd".into(),
//!         channel: "stable".into(),
//!         catalog: "community".into(),
//!         catalog_namespace: "olm".into(),
//!         ..Default::default()
//!     }],
//!     ..Default::default()
//! };
//! let resolution = resolve(&ResolveRequest {
//!     state: &state,
//!     catalogs: &[catalog],
//!     global_namespace: "olm",
//!     exclude_global: false,
//! })?;
//! assert_eq!(resolution.operators[0].name, "etcd.v0.9.2");
//! # Ok::<(), olm_resolver::ResolveError>(())
//! ```
//!
//! # Input
//!
//! A [`CatalogSnapshot`] holds one catalog's entries (one per bundle per
//! channel, as the registry's `ListBundles` returns them), indexed by package,
//! provided API and label, with every channel pre-sorted in OLM's order.
//! Entries of one bundle share one `Arc<BundleData>` and every name is
//! interned, so catalog-operator builds a snapshot once per catalog content
//! (from `ListBundles` through [`BundleInput`], or from a file-based catalog
//! with [`CatalogSnapshot::from_fbc`]) and shares it between namespaces. The
//! namespace is a [`NamespaceState`]: installed CSVs (name, version, replaces,
//! properties) and Subscriptions.
//!
//! # The encoding (see [`sat`] for the clauses)
//!
//! Variables, with upstream's identifiers: one per catalog entry that may be
//! needed (`<catalog>/<namespace>/<channel>/<csv>`, installed CSVs as
//! `@existing/<namespace>//<csv>`) and one per Subscription
//! (`subscription:<name>`). Constraints, with upstream's messages:
//!
//! * each Subscription is Mandatory ("subscription S exists") and depends on
//!   its candidates in preference order ("subscription S requires at least
//!   one of a, b or c"); with an installed CSV, candidates are the entries
//!   whose `replaces` or `skips` name it or whose `skipRange` holds its
//!   version, each in Conflict with it, and the installed CSV itself comes
//!   last (staying put is the least preferred choice); with no installed CSV
//!   and a `startingCSV`, only that CSV is a candidate;
//! * a Subscription that finds nothing is Prohibited with upstream's reason
//!   ("no operators found in channel c of package p in the catalog referenced
//!   by subscription s", ...);
//! * an installed CSV that no Subscription claims is Mandatory
//!   ("clusterserviceversion X exists and is not referenced by a
//!   subscription"), so its dependants are never broken;
//! * each requirement of a bundle (`olm.gvk.required`,
//!   `olm.package.required`, `olm.label.required`, `olm.constraint`) is a
//!   Dependency on every entry that satisfies it, in preference order
//!   ("bundle X requires an operator with package: p and with version in
//!   range: r");
//! * a bundle with the legacy `olm.deprecated` property is Prohibited;
//! * at most one provider of each API ("A and B provide Kind (group/version)")
//!   and at most one operator of each package ("A and B originate from
//!   package p").
//!
//! # Preferences
//!
//! Subscription candidates: the default channel first, then the other
//! channels by name; within a channel the head first, then down the
//! `replaces` chain, skipped entries left out. Requirement candidates: the
//! installed CSVs first, then the dependant's own catalog, then higher
//! catalog priority, then catalogs of the resolving namespace, then by
//! namespace and name; within a catalog the default channel first, then by
//! package and channel name, each channel head first. The search takes the
//! Subscriptions and unclaimed installed CSVs first, then each requirement
//! breadth-first, and gives each the first candidate consistent with every
//! choice before it: upstream's lexicographic search, with the same result.
//!
//! # Why batsat
//!
//! The solver is [`batsat`], a Rust port of MiniSat (CDCL with clause
//! learning, restarts and phase saving), pure Rust and small. Upstream's
//! search needs exactly what MiniSat-style solvers offer: incremental solving
//! under assumptions (each preference guess is an assumption) and the failed
//! assumptions of an unsatisfiable call (each constraint is guarded by an
//! activation literal, so the core names the conflicting constraints, as gini
//! does for upstream). `resolvo` models one solvable per package name and
//! orders decisions by its own heuristics, which cannot express upstream's
//! per-API uniqueness or its breadth-first preference order; `varisat` is
//! unmaintained since 2020; `splr` offers no failed-assumption core; `rustsat`
//! wraps C solvers (and batsat itself for pure Rust).
//!
//! # Messages
//!
//! [`ResolveError::NotSatisfiable`] renders as upstream's
//! "constraints not satisfiable: …" with a *minimal* set of conflicting
//! constraints, each also explained in plain words ([`Conflict`]).
//! [`ResolveError::reason`] gives the `ResolutionFailed` reason
//! (`ConstraintsNotSatisfiable` or `ErrorPreventedResolution`).
//!
//! # Limits
//!
//! `olm.constraint` values larger than 131072 bytes are refused (upstream's
//! limit, enforced by `olm-catalog`); CEL rules are bounded by
//! [`cel::MAX_CEL_RULE_BYTES`], [`cel::MAX_CEL_NODES`],
//! [`cel::MAX_CEL_COMPREHENSION_DEPTH`] and [`cel::MAX_CEL_COST`].
//!
//! This crate is I/O-free and must not depend on `kube`, on the registry
//! client, or on any service crate: callers fill the snapshots.

pub mod cel;
pub mod constraint;
pub mod model;
pub mod objects;
mod resolve;
pub mod sat;

#[cfg(test)]
mod proptests;

pub use constraint::{Dependency, DependencyError, DependencyKind};
pub use model::{
    BundleData, BundleInput, CatalogKey, CatalogSnapshot, EXISTING_CATALOG, Entry, InstalledCsv,
    Interner, NamespaceState, Subscription,
};
pub use resolve::{
    Conflict, Resolution, ResolveError, ResolveRequest, ResolvedOperator, SubscriptionDecision,
    resolve,
};
