//! Certificates for OLM's own TLS endpoints (packageserver's aggregated API,
//! and the webhooks and APIServices olm-operator serves for operators): a
//! self-signed CA and serving certificates made with rcgen (ECDSA P-256),
//! a pure rotation policy, PEM bundle handling, and a rustls server
//! configuration whose certificate is swapped without a restart.
//!
//! * [`policy`]: [`decide`] maps the stored certificates' own validity (never
//!   a timestamp kept elsewhere), the time and a [`RotationPolicy`] to one
//!   [`Decision`]. Serving certificates are renewed at a fraction of their
//!   life, the CA before it expires, with old and new CA published together
//!   while anything the old one signed may still be served.
//! * [`material`]: the stored PEM [`Material`], read into the policy's facts,
//!   and [`apply`] / [`reconcile`] to carry decisions out.
//! * [`reload`]: [`HotCertificate`], a `ResolvesServerCert` swapped
//!   atomically, [`server_config`] and [`verify_served`].
//!
//! This library must not depend on `kube`, on Kubernetes API types or on any
//! service crate: where the material is stored (a Secret, files) is the
//! caller's business.

mod error;
pub mod material;
pub mod policy;
pub mod reload;

pub use error::CertError;
pub use material::{
    CA_COMMON_NAME_PREFIX, MAX_BUNDLE_CERTS, MAX_PEM_BYTES, Material, Profile, Reconciled,
    UPSTREAM_ORGANIZATION, apply, bootstrap, bundle_pem, ca_hash, parse_certificates, reconcile,
};
pub use policy::{
    BootstrapReason, Decision, Observed, PolicyError, RotationPolicy, ServingReason, decide,
};
pub use reload::{HotCertificate, certified_key, root_store, server_config, verify_served};
