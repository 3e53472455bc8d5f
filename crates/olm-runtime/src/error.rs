//! The one error type of this crate, with a stable [`Error::category`] for
//! metric labels and Warning event reasons.

use std::time::Duration;

/// A `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A boxed error from code this crate runs on a caller's behalf (a task).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Everything that can go wrong in the shared runtime plumbing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A command-line or environment setting is unusable.
    #[error("invalid {argument}: {reason}")]
    InvalidArgument {
        /// The flag (or setting) at fault.
        argument: &'static str,
        /// Why it is unusable.
        reason: String,
    },

    /// A kubeconfig file could not be read or used.
    #[error("failed to load kubeconfig")]
    Kubeconfig {
        /// The underlying cause.
        #[source]
        source: Box<kube::config::KubeconfigError>,
    },

    /// Neither a kubeconfig nor an in-cluster configuration was found.
    #[error("failed to infer the kubernetes client configuration")]
    InferKubeConfig {
        /// The underlying cause.
        #[source]
        source: Box<kube::config::InferConfigError>,
    },

    /// The Kubernetes client could not be built from its configuration.
    #[error("failed to build the kubernetes client")]
    KubeClient {
        /// The underlying cause.
        #[source]
        source: Box<kube::Error>,
    },

    /// The log filter is not valid `EnvFilter` syntax.
    #[error("invalid log filter {filter:?}")]
    LogFilter {
        /// The filter as given.
        filter: String,
        /// The underlying cause.
        #[source]
        source: tracing_subscriber::filter::ParseError,
    },

    /// The OTLP trace exporter could not be built.
    #[error("failed to build the otlp trace exporter for {endpoint}")]
    OtlpExporter {
        /// The configured endpoint.
        endpoint: String,
        /// The underlying cause.
        #[source]
        source: Box<opentelemetry_otlp::ExporterBuildError>,
    },

    /// A global `tracing` subscriber was already installed.
    #[error("failed to install the tracing subscriber")]
    TracingSubscriber {
        /// The underlying cause.
        #[source]
        source: tracing_subscriber::util::TryInitError,
    },

    /// The admin server could not bind its address.
    #[error("failed to bind the admin server to {address}")]
    AdminBind {
        /// The address it tried.
        address: std::net::SocketAddr,
        /// The underlying cause.
        #[source]
        source: std::io::Error,
    },

    /// The admin server stopped with an I/O error.
    #[error("admin server failed")]
    AdminServe {
        /// The underlying cause.
        #[source]
        source: std::io::Error,
    },

    /// The metrics could not be encoded.
    #[error("failed to encode metrics")]
    MetricsEncode {
        /// The underlying cause.
        #[source]
        source: std::fmt::Error,
    },

    /// The leader election settings contradict each other.
    #[error("invalid leader election configuration: {reason}")]
    LeaderElectionConfig {
        /// What is wrong.
        reason: String,
    },

    /// A request about the leader election Lease failed.
    #[error("failed to {verb} lease {namespace}/{name}")]
    Lease {
        /// What was attempted (`get`, `create`, `update`).
        verb: &'static str,
        /// The Lease's namespace.
        namespace: String,
        /// The Lease's name.
        name: String,
        /// The underlying cause.
        #[source]
        source: Box<kube::Error>,
    },

    /// A request about the leader election Lease did not finish in time.
    #[error("{verb} lease {namespace}/{name} timed out after {timeout:?}")]
    LeaseTimeout {
        /// What was attempted (`get`, `create`, `update`).
        verb: &'static str,
        /// The Lease's namespace.
        namespace: String,
        /// The Lease's name.
        name: String,
        /// How long it waited.
        timeout: Duration,
    },

    /// The leader elector stopped before this replica acquired the lease.
    #[error("leader elector stopped before acquiring the lease")]
    LeaderElectorStopped,

    /// This replica stopped leading while its work ran (its lease was taken
    /// or could not be renewed): the process exits and starts afresh, as
    /// upstream's services do.
    #[error("leadership lost")]
    LeadershipLost,

    /// The work run while leading ended on its own, with no shutdown asked
    /// for and while still leading (a watch ended): the process exits rather
    /// than lead without acting.
    #[error("the controllers stopped while leading")]
    LeadingWorkEnded,

    /// The leader elector task panicked or was cancelled from outside.
    #[error("leader elector task ended abnormally")]
    LeaderElectorTask {
        /// The underlying cause.
        #[source]
        source: tokio::task::JoinError,
    },

    /// An object handed to an apply helper has no `metadata.name`.
    #[error("{kind} has no metadata.name")]
    MissingName {
        /// The object's kind.
        kind: String,
    },

    /// A server-side apply of an object failed.
    #[error("failed to apply {kind} {name}")]
    Apply {
        /// The object's kind.
        kind: String,
        /// The object's name.
        name: String,
        /// The underlying cause.
        #[source]
        source: Box<kube::Error>,
    },

    /// A server-side apply of an object's status failed.
    #[error("failed to apply the status of {kind} {name}")]
    ApplyStatus {
        /// The object's kind.
        kind: String,
        /// The object's name.
        name: String,
        /// The underlying cause.
        #[source]
        source: Box<kube::Error>,
    },

    /// An object could not be serialized for a request.
    #[error("failed to serialize {kind} {name}")]
    Serialize {
        /// The object's kind.
        kind: String,
        /// The object's name.
        name: String,
        /// The underlying cause.
        #[source]
        source: serde_json::Error,
    },

    /// Deleting an object failed for a reason other than its absence.
    #[error("failed to delete {kind} {name}")]
    Delete {
        /// The object's kind.
        kind: String,
        /// The object's name.
        name: String,
        /// The underlying cause.
        #[source]
        source: Box<kube::Error>,
    },

    /// Discovery of an API group failed (its absence is not an error).
    #[error("failed to discover the {group} API group")]
    Discovery {
        /// The group.
        group: String,
        /// The underlying cause.
        #[source]
        source: Box<kube::Error>,
    },

    /// A ClusterOperator read or write failed.
    #[error("failed to {verb} ClusterOperator {name}")]
    ClusterOperator {
        /// `get`, `create` or `apply status of`.
        verb: &'static str,
        /// Its name.
        name: String,
        /// The underlying cause.
        #[source]
        source: Box<kube::Error>,
    },

    /// A Kubernetes Event could not be published.
    #[error("failed to publish event {reason} for {regarding}")]
    PublishEvent {
        /// The event's reason.
        reason: String,
        /// The object the event is about (`kind namespace/name`).
        regarding: String,
        /// The underlying cause.
        #[source]
        source: Box<kube::Error>,
    },

    /// A Service whose ClusterIP stands for its DNS name could not be read.
    #[error("failed to look up service {namespace}/{name}")]
    ServiceLookup {
        /// The Service's namespace.
        namespace: String,
        /// The Service's name.
        name: String,
        /// The underlying cause.
        #[source]
        source: Box<kube::Error>,
    },

    /// A Service has no ClusterIP that kube-proxy would route.
    #[error("cannot dial service {namespace}/{name} by its cluster IP: {reason}")]
    ServiceUnroutable {
        /// The Service's namespace.
        namespace: String,
        /// The Service's name.
        name: String,
        /// Why it cannot be dialled.
        reason: Unroutable,
    },

    /// The process could not listen for termination signals.
    #[error("failed to install the {signal} handler")]
    Signal {
        /// The signal's name.
        signal: &'static str,
        /// The underlying cause.
        #[source]
        source: std::io::Error,
    },

    /// A supervised task returned an error.
    #[error("task {name} failed")]
    Task {
        /// The task's name.
        name: String,
        /// The underlying cause.
        #[source]
        source: BoxError,
    },

    /// A supervised task panicked.
    #[error("task {name} panicked")]
    TaskPanicked {
        /// The task's name.
        name: String,
    },

    /// Some tasks had not finished when the drain deadline passed.
    #[error("tasks still running {deadline:?} after shutdown began: {}", pending.join(", "))]
    DrainTimeout {
        /// How long they were given.
        deadline: Duration,
        /// The names of the tasks that were aborted.
        pending: Vec<String>,
    },
}

/// Why a Service cannot be dialled by its ClusterIP.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Unroutable {
    /// There is no such Service.
    #[error("it does not exist")]
    NotFound,
    /// The Service is headless: it has no ClusterIP for kube-proxy to route.
    #[error("it is headless (clusterIP: None)")]
    Headless,
    /// The Service is a DNS alias, with no ClusterIP.
    #[error("it is of type ExternalName")]
    ExternalName,
    /// The Service has no ClusterIP (yet).
    #[error("it has no cluster IP")]
    NoClusterIp,
    /// The Service's ClusterIP does not parse as an IP address.
    #[error("its cluster IP {0:?} is not an IP address")]
    InvalidClusterIp(String),
    /// The Service does not serve the port the address names, so kube-proxy
    /// would not route it.
    #[error("it has no port {0}")]
    PortNotServed(u16),
}

impl Error {
    /// A short, stable, lowercase name for the kind of failure: a Prometheus
    /// label value and the basis of a Warning event reason. Errors from the
    /// API server are split by what the caller should do about them (see
    /// [`kube_error_category`]).
    pub fn category(&self) -> &'static str {
        match self {
            Self::InvalidArgument { .. } | Self::LeaderElectionConfig { .. } => "config",
            Self::Kubeconfig { .. } | Self::InferKubeConfig { .. } | Self::KubeClient { .. } => {
                "kube_config"
            }
            Self::LogFilter { .. } | Self::OtlpExporter { .. } | Self::TracingSubscriber { .. } => {
                "telemetry"
            }
            Self::AdminBind { .. } | Self::AdminServe { .. } | Self::MetricsEncode { .. } => {
                "admin_server"
            }
            Self::LeaseTimeout { .. } => "kube_timeout",
            Self::LeaderElectorStopped
            | Self::LeadershipLost
            | Self::LeadingWorkEnded
            | Self::LeaderElectorTask { .. } => "leader_election",
            Self::MissingName { .. } | Self::Serialize { .. } => "invalid_object",
            Self::Lease { source, .. }
            | Self::Apply { source, .. }
            | Self::ApplyStatus { source, .. }
            | Self::Delete { source, .. }
            | Self::PublishEvent { source, .. }
            | Self::Discovery { source, .. }
            | Self::ClusterOperator { source, .. }
            | Self::ServiceLookup { source, .. } => kube_error_category(source),
            Self::ServiceUnroutable { .. } => "service_unroutable",
            Self::Signal { .. } => "signal",
            Self::Task { .. } | Self::TaskPanicked { .. } => "task",
            Self::DrainTimeout { .. } => "drain_timeout",
        }
    }
}

/// Sorts an error from the Kubernetes client by what the caller should do:
/// `kube_conflict` (re-read and retry), `kube_not_found`, `kube_already_exists`,
/// `kube_invalid` (the object is wrong: do not hot-loop), `kube_forbidden`
/// (RBAC), `kube_unavailable` (the API server is unhealthy or unreachable),
/// `kube_api` (any other API status) or `kube_client` (a local failure).
pub fn kube_error_category(error: &kube::Error) -> &'static str {
    match error {
        kube::Error::Api(status) => match status.code {
            409 if status.is_already_exists() => "kube_already_exists",
            409 => "kube_conflict",
            404 => "kube_not_found",
            422 => "kube_invalid",
            401 | 403 => "kube_forbidden",
            429 | 500.. => "kube_unavailable",
            _ => "kube_api",
        },
        kube::Error::HyperError(_) | kube::Error::Service(_) => "kube_unavailable",
        _ => "kube_client",
    }
}

#[cfg(test)]
mod tests {
    use kube::core::Status;

    use super::*;

    fn api_error(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(
            Status::failure("sample failure", reason)
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn api_errors_are_categorised_by_what_to_do() {
        let cases = [
            (409, "Conflict", "kube_conflict"),
            (409, "AlreadyExists", "kube_already_exists"),
            (404, "NotFound", "kube_not_found"),
            (422, "Invalid", "kube_invalid"),
            (403, "Forbidden", "kube_forbidden"),
            (429, "TooManyRequests", "kube_unavailable"),
            (503, "ServiceUnavailable", "kube_unavailable"),
            (400, "BadRequest", "kube_api"),
        ];
        for (code, reason, category) in cases {
            assert_eq!(
                kube_error_category(&api_error(code, reason)),
                category,
                "{code} {reason}"
            );
        }
    }

    #[test]
    fn wrapped_api_errors_keep_their_category() {
        let error = Error::Apply {
            kind: "ConfigMap".to_owned(),
            name: "sample".to_owned(),
            source: Box::new(api_error(422, "Invalid")),
        };
        assert_eq!(error.category(), "kube_invalid");
        assert_eq!(error.to_string(), "failed to apply ConfigMap sample");
    }

    #[test]
    fn messages_are_lowercase_without_trailing_period() {
        let errors = [
            Error::InvalidArgument {
                argument: "--kubeconfig",
                reason: "no path given".to_owned(),
            },
            Error::DrainTimeout {
                deadline: Duration::from_secs(1),
                pending: vec!["admin-server".to_owned(), "reconciler".to_owned()],
            },
            Error::TaskPanicked {
                name: "reconciler".to_owned(),
            },
        ];
        for error in errors {
            let message = error.to_string();
            assert!(message.starts_with(|c: char| c.is_lowercase()), "{message}");
            assert!(!message.ends_with('.'), "{message}");
        }
    }
}
