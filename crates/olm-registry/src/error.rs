//! Errors of this crate: building the index, reading documents while serving,
//! serving, and calling a registry as a client.

use std::{fmt, io, path::PathBuf};

/// One thing wrong with a catalog, located in its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file, relative to the catalog directory.
    pub path: PathBuf,
    /// Byte offset of the document (or of the error) in the file, when known.
    pub offset: Option<u64>,
    /// 1-based line of `offset`, when known.
    pub line: Option<u64>,
    /// What is wrong, in upstream's words where upstream has words for it.
    pub message: String,
    /// The `opm validate` rule the problem breaks (the same rule, with the
    /// same code, that validate reports); `None` for a document that cannot
    /// be read at all, which validate reports as a load error.
    pub rule: Option<olm_catalog::validate::Rule>,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        match (self.line, self.offset) {
            (Some(line), _) => write!(f, ":{line}")?,
            (None, Some(offset)) => write!(f, "@{offset}")?,
            (None, None) => {}
        }
        write!(f, ": {}", self.message)?;
        // The rule's code, as `opm validate` prints it.
        match self.rule {
            Some(rule) => write!(f, " [{}]", rule.code()),
            None => Ok(()),
        }
    }
}

/// Why a catalog directory could not be indexed.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// A file or directory of the catalog could not be read.
    #[error("reading catalog path {path}: {source}")]
    Read {
        /// The path that failed.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// The catalog path is not a directory.
    #[error("catalog path {path} is not a directory")]
    NotADirectory {
        /// The path given.
        path: PathBuf,
    },
    /// The temporary file for converted YAML documents could not be written.
    #[error("writing the spill file for converted yaml documents in {dir}: {source}")]
    Spill {
        /// The directory of the spill file.
        dir: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// The catalog is bigger than a named limit of [`crate::IndexLimits`].
    #[error("catalog exceeds the limit of {limit} {what} (IndexLimits::{field})")]
    LimitExceeded {
        /// What was counted, in words.
        what: &'static str,
        /// The limit's field name in [`crate::IndexLimits`].
        field: &'static str,
        /// The limit.
        limit: u64,
    },
    /// The catalog has invalid documents or an inconsistent model.
    #[error("{}", invalid_summary(.problems, *.total))]
    Invalid {
        /// The first problems found, sorted by file and position.
        problems: Vec<Problem>,
        /// How many problems were found in all (at least `problems.len()`).
        total: usize,
    },
}

fn invalid_summary(problems: &[Problem], total: usize) -> String {
    let mut out = format!("invalid catalog: {total} problem(s)");
    for problem in problems {
        out.push_str("\n  ");
        out.push_str(&problem.to_string());
    }
    if total > problems.len() {
        out.push_str(&format!("\n  ... and {} more", total - problems.len()));
    }
    out
}

impl IndexError {
    /// A stable, short name of the failure for metrics and event reasons.
    pub fn category(&self) -> &'static str {
        match self {
            Self::Read { .. } | Self::NotADirectory { .. } => "CatalogUnreadable",
            Self::Spill { .. } => "SpillFailed",
            Self::LimitExceeded { .. } => "CatalogTooLarge",
            Self::Invalid { .. } => "CatalogInvalid",
        }
    }
}

/// Why a document could not be read back from the catalog while serving.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be opened or read.
    #[error("reading {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// The file is not what was indexed: it changed after the server started.
    #[error(
        "catalog file {path} changed after it was indexed; restart the server to index it again"
    )]
    Changed {
        /// The file.
        path: PathBuf,
    },
    /// The document no longer parses as it did when indexed.
    #[error("document at {path}@{offset} no longer parses: {message}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Byte offset of the document.
        offset: u64,
        /// The parser's error.
        message: String,
    },
}

/// Why the server stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The gRPC transport failed.
    #[error("grpc transport: {0}")]
    Transport(#[from] tonic::transport::Error),
    /// The listener's address could not be read.
    #[error("reading the listener address: {0}")]
    Listener(#[source] io::Error),
}

/// Why a client call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The endpoint string is not a valid URI.
    #[error("invalid registry endpoint {endpoint:?}: {source}")]
    InvalidEndpoint {
        /// The endpoint given.
        endpoint: String,
        /// The parser's error.
        #[source]
        source: tonic::transport::Error,
    },
    /// The connection could not be made before the deadline.
    #[error("connecting to registry {endpoint}: {source}")]
    Connect {
        /// The endpoint.
        endpoint: String,
        /// The transport's error.
        #[source]
        source: tonic::transport::Error,
    },
    /// The server answered with an error status.
    #[error("registry call {rpc} failed: {:?}: {}", .status.code(), .status.message())]
    Status {
        /// The RPC name, for example `GetPackage`.
        rpc: &'static str,
        /// The status the server (or the transport) returned.
        #[source]
        status: tonic::Status,
    },
    /// A streaming answer went past one of the client's
    /// [`crate::StreamLimits`]; nothing of it is used.
    #[error("registry call {rpc} exceeded the limit {limit} ({value}); the answer was dropped")]
    LimitExceeded {
        /// The RPC name.
        rpc: &'static str,
        /// The limit's field name in [`crate::StreamLimits`].
        limit: &'static str,
        /// The limit's value, with its unit.
        value: String,
    },
}

impl ClientError {
    /// The gRPC status code, when the failure is a status.
    pub fn code(&self) -> Option<tonic::Code> {
        match self {
            Self::Status { status, .. } => Some(status.code()),
            _ => None,
        }
    }
}
