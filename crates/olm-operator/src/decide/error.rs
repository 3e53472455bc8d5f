//! Why a decision cannot be made: the error type of this folder's rules. It
//! names no client and no I/O (the service's [`crate::Error`] wraps it with
//! the failures of talking to the cluster), and every variant has a stable
//! [`Error::category`] for metrics and event reasons.

/// A failure in olm-operator's decisions.
///
/// The decision functions never fail because of the cluster (they do no I/O);
/// they fail when the objects they are given cannot be understood, or report
/// through [`crate::decide::csv_phase::CsvDecision::retry`] that a sync must be
/// retried with backoff and why.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An object could not be turned into JSON to be hashed.
    #[error("cannot serialize {what} for hashing")]
    Hash {
        /// What was being hashed.
        what: &'static str,
        /// Why serialization failed.
        #[source]
        source: serde_json::Error,
    },

    /// An owned or required CRD's name is not `<plural>.<group>`.
    #[error("error parsing crd name: {name}")]
    CrdName {
        /// The name as written in the CSV.
        name: String,
    },

    /// An OperatorGroup lists the empty namespace (all namespaces) among
    /// explicit `targetNamespaces`.
    #[error("targetNamespaces cannot contain NamespaceAll: {target_namespaces}")]
    TargetNamespacesContainAll {
        /// The list as upstream prints it, `[a b c]`.
        target_namespaces: String,
    },

    /// An OperatorGroup's `spec.selector` is not a valid label selector.
    #[error("invalid operatorgroup selector: {reason}")]
    InvalidSelector {
        /// What is wrong with it.
        reason: String,
    },

    /// The CSV's namespace has no OperatorGroup.
    #[error("csv in namespace with no operatorgroups")]
    NoOperatorGroup,

    /// The CSV's namespace has more than one OperatorGroup.
    #[error("csv created in namespace with multiple operatorgroups, can't pick one automatically")]
    TooManyOperatorGroups,

    /// Requirements of a Pending CSV are not met yet (upstream's
    /// `ErrRequirementsNotMet`); the CSV is retried with backoff.
    #[error("requirements were not met")]
    RequirementsNotMet,

    /// A CSV in phase Replacing has no CSV that replaces it.
    #[error("marked as replacement, but no replacement CSV found in cluster")]
    NoReplacementFound,

    /// Walking a fail-forward replacement chain met the same CSV twice.
    #[error("csv {namespace}/{name} has already been seen")]
    ReplacementCycle {
        /// Namespace of the chain.
        namespace: String,
        /// The CSV met twice.
        name: String,
    },

    /// The install strategy's components are not healthy yet; the CSV is
    /// retried with backoff.
    #[error("{message}")]
    InstallCheck {
        /// What the install check reported.
        message: String,
    },

    /// The identity a CSV must be installed with is not known yet (the
    /// OperatorGroup's ServiceAccount is missing, or the groups of the
    /// namespace are ambiguous); the CSV is retried with backoff.
    #[error("cannot pick the identity to install with")]
    InstallIdentity {
        /// Upstream's words for it.
        #[source]
        source: crate::decide::scoped::IdentityUnavailable,
    },

    /// Serving certificates of a Deployment behind an owned APIService or
    /// webhook could not be read or issued.
    #[error("serving certificates of deployment {deployment}")]
    Certificates {
        /// The strategy Deployment.
        deployment: String,
        /// Why.
        #[source]
        source: olm_certs::CertError,
    },

    /// An owned APIService or webhook cannot be installed; the message is
    /// upstream's.
    #[error("{message}")]
    Serving {
        /// What is wrong.
        message: String,
    },

    /// A CSV being deleted still has cluster-scoped objects carrying its owner
    /// labels; the finalizer stays until they are gone.
    #[error("waiting for {kinds} to delete")]
    CleanupPending {
        /// The kinds still present, for example `ClusterRoleBindings`.
        kinds: String,
    },
}

impl Error {
    /// A stable, short, CamelCase name of the failure, for metric labels and
    /// Warning event reasons.
    pub fn category(&self) -> &'static str {
        match self {
            Error::Hash { .. } => "HashFailed",
            Error::CrdName { .. } => "InvalidCrdName",
            Error::TargetNamespacesContainAll { .. } => "InvalidTargetNamespaces",
            Error::InvalidSelector { .. } => "InvalidSelector",
            Error::NoOperatorGroup => "NoOperatorGroup",
            Error::TooManyOperatorGroups => "TooManyOperatorGroups",
            Error::RequirementsNotMet => "RequirementsNotMet",
            Error::NoReplacementFound => "NoReplacementFound",
            Error::ReplacementCycle { .. } => "ReplacementCycle",
            Error::InstallCheck { .. } => "InstallCheckFailed",
            Error::CleanupPending { .. } => "CleanupPending",
            Error::Certificates { .. } => "CertificatesFailed",
            Error::Serving { .. } => "ServingInstallFailed",
            Error::InstallIdentity { .. } => "InstallIdentityUnavailable",
        }
    }
}
