//! The test kit's error type.

use std::path::PathBuf;

/// Why a component of the test control plane could not be started or used.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A binary the test kit needs is not installed.
    #[error(
        "{name} not found (looked in {looked_in}); run `cargo xtask envtest` to install the test control plane"
    )]
    MissingBinary {
        /// The command that is missing.
        name: String,
        /// Where it was looked for.
        looked_in: String,
    },
    /// A process could not be spawned.
    #[error("cannot start {name}")]
    Spawn {
        /// The component being started.
        name: String,
        /// The operating system's reason.
        #[source]
        source: std::io::Error,
    },
    /// A component did not become ready before its deadline.
    #[error("{name} not ready after {waited_secs} s; last error: {last_error}; log: {log}")]
    NotReady {
        /// The component.
        name: String,
        /// How long the kit waited.
        waited_secs: u64,
        /// What the last readiness probe said.
        last_error: String,
        /// The component's log file.
        log: PathBuf,
    },
    /// A component exited while the kit waited for it.
    #[error("{name} exited during start-up ({status}); log tail:\n{log_tail}")]
    Exited {
        /// The component.
        name: String,
        /// Its exit status.
        status: String,
        /// The last lines it wrote.
        log_tail: String,
    },
    /// This machine cannot run the component (not root, a piece missing, a
    /// host change refused), and why.
    #[error("{0}")]
    Unsupported(String),
    /// Generating certificates failed.
    #[error("cannot generate test certificates")]
    Pki(#[from] rcgen::Error),
    /// A file of the test environment could not be written or read.
    #[error("cannot use {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's reason.
        #[source]
        source: std::io::Error,
    },
    /// An HTTP request to a component (Jaeger's query API) failed.
    #[error("GET {url}")]
    Http {
        /// The URL requested.
        url: String,
        /// The client's reason.
        #[source]
        source: reqwest::Error,
    },
    /// A component answered an HTTP request with an error status.
    #[error("GET {url} answered {status}: {body}")]
    HttpStatus {
        /// The URL requested.
        url: String,
        /// The status code.
        status: u16,
        /// The answer's body.
        body: String,
    },
    /// A component's answer could not be read.
    #[error("cannot read the answer of GET {url}")]
    Decode {
        /// The URL requested.
        url: String,
        /// Why it could not be read.
        #[source]
        source: serde_json::Error,
    },
    /// The Kubernetes client could not be built or a request failed.
    #[error("kubernetes client")]
    Kube(#[from] kube::Error),
    /// The kubeconfig written by the kit could not be loaded.
    #[error("kubeconfig")]
    Kubeconfig(#[from] kube::config::KubeconfigError),
}

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}
