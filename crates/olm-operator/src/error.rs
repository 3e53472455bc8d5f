//! The one error type of this service: a decision that cannot be made
//! ([`crate::decide::Error`]), or a failure talking to the cluster. Every
//! variant has a stable [`Error::category`] for metrics and event reasons.

/// Why a reconcile of olm-operator did not finish.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A decision cannot be made, or says to retry.
    #[error(transparent)]
    Decide(#[from] crate::decide::Error),

    /// A call to the API server failed.
    #[error("cannot {action} {kind} {name}")]
    Kube {
        /// What was attempted, for example `patch metadata of`.
        action: &'static str,
        /// Kind of the object.
        kind: &'static str,
        /// `<namespace>/<name>` or `<name>` of the object.
        name: String,
        /// The client's error.
        #[source]
        source: Box<kube::Error>,
    },

    /// A shared runtime helper (apply, status, leader election, caches) failed.
    #[error("{what}")]
    Runtime {
        /// What was being done.
        what: &'static str,
        /// The runtime's error.
        #[source]
        source: Box<olm_runtime::Error>,
    },
}

impl Error {
    /// A wrapper of a failed runtime helper that says what was being done.
    pub(crate) fn runtime(what: &'static str) -> impl FnOnce(olm_runtime::Error) -> Self {
        move |source| Error::Runtime {
            what,
            source: Box::new(source),
        }
    }

    /// A stable, short name of the failure, for metric labels and Warning
    /// event reasons: the decision's CamelCase category, or the category of
    /// the client's or runtime's error.
    pub fn category(&self) -> &'static str {
        match self {
            Error::Decide(error) => error.category(),
            Error::Kube { source, .. } => olm_runtime::error::kube_error_category(source),
            Error::Runtime { source, .. } => source.category(),
        }
    }
}

impl olm_runtime::controller::Categorized for Error {
    fn category(&self) -> &'static str {
        Error::category(self)
    }
}
