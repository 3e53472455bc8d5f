//! The one error type of catalog-operator's reconciles, with a stable
//! [`Error::category`] for the `reconcile_failures_total` label. A failed
//! reconcile is retried with backoff; what a user should see about it is
//! written to status by the reconcile itself, not carried here.

/// Why a reconcile (of a CatalogSource, an InstallPlan or a namespace's
/// Subscriptions) did not finish.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request to the API server failed.
    #[error("{action}: {source}")]
    Kube {
        /// What was being done.
        action: String,
        /// The failure.
        #[source]
        source: kube::Error,
    },
    /// A helper of the shared runtime failed (an apply, a status write).
    #[error(transparent)]
    Runtime(#[from] olm_runtime::Error),
    /// A catalog's registry could not be read.
    #[error("reading catalog {catalog}: {source}")]
    Registry {
        /// The catalog.
        catalog: String,
        /// The failure.
        #[source]
        source: olm_registry::ClientError,
    },
    /// A catalog the resolution used has no connection (it stopped
    /// answering since).
    #[error("catalog {catalog} is not connected")]
    NotConnected {
        /// The catalog.
        catalog: String,
    },
}

impl Error {
    /// A wrapper of a failed API request that says what was being done.
    pub fn kube(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let action = action.into();
        move |source| Self::Kube { action, source }
    }

    /// A short, stable, lowercase name for the kind of failure.
    pub fn category(&self) -> &'static str {
        match self {
            Self::Kube { source, .. } => olm_runtime::error::kube_error_category(source),
            Self::Runtime(source) => source.category(),
            Self::Registry { .. } => "registry",
            Self::NotConnected { .. } => "registry_not_connected",
        }
    }
}

impl olm_runtime::controller::Categorized for Error {
    fn category(&self) -> &'static str {
        Error::category(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_sort_failures_by_what_to_do() {
        let conflict = kube::Error::Api(
            kube::core::Status::failure("conflict", "Conflict")
                .with_code(409)
                .boxed(),
        );
        let cases = [
            (Error::kube("apply")(conflict), "kube_conflict"),
            (
                Error::Runtime(olm_runtime::Error::LeadershipLost),
                "leader_election",
            ),
            (
                Error::NotConnected {
                    catalog: "olm/sample".to_owned(),
                },
                "registry_not_connected",
            ),
        ];
        for (error, wanted) in cases {
            assert_eq!(error.category(), wanted, "{error}");
        }
    }
}
