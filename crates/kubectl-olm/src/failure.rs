//! Why a command failed, and the exit status it ends with. Every message
//! names the object concerned and the next step.

/// Exit status of success.
pub(crate) const EXIT_OK: u8 = 0;
/// The operation failed or was refused (an install that failed, an
/// uninstall refused because operands exist, nothing to approve).
pub(crate) const EXIT_FAILED: u8 = 1;
/// Unusable input: bad flags or files, or an object that does not exist.
pub(crate) const EXIT_INPUT: u8 = 2;
/// OLM cannot resolve the request (the explanation is printed).
pub(crate) const EXIT_UNRESOLVABLE: u8 = 3;
/// `--wait` ran out of time; the operation may still finish.
pub(crate) const EXIT_TIMEOUT: u8 = 4;
/// The cluster could not be reached, or refused a request.
pub(crate) const EXIT_CLUSTER: u8 = 5;

/// The exit statuses, for `--help`.
pub(crate) const EXIT_CODES_HELP: &str = "Exit status: 0 done; 1 the operation failed or was refused; \
2 bad input or an object that does not exist; 3 OLM cannot resolve the request; \
4 --wait timed out (the operation may still finish); 5 the cluster could not be reached or refused a request.";

/// A failure with a known exit status.
#[derive(Debug)]
pub(crate) enum Failure {
    /// [`EXIT_FAILED`].
    Failed(String),
    /// [`EXIT_INPUT`].
    Input(String),
    /// [`EXIT_UNRESOLVABLE`].
    Unresolvable(String),
    /// [`EXIT_TIMEOUT`].
    TimedOut(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Failed(m) | Self::Input(m) | Self::Unresolvable(m) | Self::TimedOut(m) => {
                f.write_str(m)
            }
        }
    }
}

impl std::error::Error for Failure {}

/// The exit status for `error`: a [`Failure`]'s own, else the cluster's.
pub(crate) fn exit_code(error: &anyhow::Error) -> u8 {
    match error.downcast_ref::<Failure>() {
        Some(Failure::Failed(_)) => EXIT_FAILED,
        Some(Failure::Input(_)) => EXIT_INPUT,
        Some(Failure::Unresolvable(_)) => EXIT_UNRESOLVABLE,
        Some(Failure::TimedOut(_)) => EXIT_TIMEOUT,
        None if error
            .chain()
            .any(|e| e.downcast_ref::<kube::Error>().is_some()) =>
        {
            EXIT_CLUSTER
        }
        None => EXIT_INPUT,
    }
}

/// `Err(Failure::Failed(message))`.
pub(crate) fn failed<T>(message: impl Into<String>) -> anyhow::Result<T> {
    Err(Failure::Failed(message.into()).into())
}

/// `Err(Failure::Input(message))`.
pub(crate) fn input<T>(message: impl Into<String>) -> anyhow::Result<T> {
    Err(Failure::Input(message.into()).into())
}
