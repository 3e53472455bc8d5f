//! What can go wrong while reconciling or serving probes.

/// A failure of the operator, one variant per place it can happen.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Greeting came without a namespace, which a namespaced watch never
    /// delivers.
    #[error("greeting {name} has no namespace")]
    MissingNamespace {
        /// The Greeting's name.
        name: String,
    },
    /// The API server refused or lost the status update.
    #[error("writing the status of greeting {namespace}/{name}")]
    WriteStatus {
        /// The Greeting's namespace.
        namespace: String,
        /// The Greeting's name.
        name: String,
        /// What the client reported.
        #[source]
        source: kube::Error,
    },
    /// The probe server could not bind or serve.
    #[error("serving health probes")]
    Probes(#[source] std::io::Error),
}

impl Error {
    /// A stable, short name of the failure, for log fields and event reasons.
    pub fn category(&self) -> &'static str {
        match self {
            Error::MissingNamespace { .. } => "MissingNamespace",
            Error::WriteStatus { .. } => "WriteStatusFailed",
            Error::Probes(_) => "ProbesFailed",
        }
    }
}
