//! The unpack policy of a namespace: how long one bundle unpack may take and
//! how soon a recorded failure is retried, from the OperatorGroup annotations
//! upstream defines. bundle-unpacker enforces it; catalog-operator puts the
//! deadline on the unpack requests it sends, so both read the annotations
//! the same way.

use std::{collections::BTreeMap, time::Duration};

use crate::{
    go_duration,
    labels::{BUNDLE_UNPACK_MIN_RETRY_INTERVAL, BUNDLE_UNPACK_TIMEOUT},
};

/// Upstream's default unpack deadline (`--bundle-unpack-timeout`).
pub const DEFAULT_UNPACK_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// How long a recorded failure stands before it is retried when the
/// OperatorGroup does not say (`bundle-unpack-min-retry-interval` unset or
/// `0`). Upstream retries after its failed unpack Job is garbage-collected,
/// 5 minutes (`ttlSecondsAfterFinished: 300`) after it finished; this keeps
/// that rhythm.
pub const DEFAULT_RETRY_INTERVAL: Duration = Duration::from_secs(5 * 60);

/// The shortest retry interval honoured, whatever the annotation says, so
/// that a failing bundle is never retried in a tight loop.
pub const MIN_RETRY_INTERVAL: Duration = Duration::from_secs(1);

/// How unpacks of one namespace's bundles are run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnpackPolicy {
    /// The deadline of one unpack; `None` when the OperatorGroup sets `0`.
    pub timeout: Option<Duration>,
    /// The least time a recorded failure stands before it is retried.
    pub retry_interval: Duration,
    /// Annotations that could not be read (their defaults are used).
    pub warnings: Vec<String>,
}

/// The policy for a namespace whose OperatorGroups carry `annotations`
/// (upstream expects one OperatorGroup per namespace; with several, the
/// first by name that sets an annotation wins), with `default_timeout`
/// from the command line.
pub fn unpack_policy<'a>(
    operator_groups: impl IntoIterator<Item = (&'a str, &'a BTreeMap<String, String>)>,
    default_timeout: Option<Duration>,
) -> UnpackPolicy {
    let mut groups: Vec<_> = operator_groups.into_iter().collect();
    groups.sort_by_key(|(name, _)| *name);
    let find = |key: &str| {
        groups
            .iter()
            .find_map(|(name, annotations)| annotations.get(key).map(|v| (*name, v.as_str())))
    };
    let mut warnings = Vec::new();
    let timeout = match find(BUNDLE_UNPACK_TIMEOUT) {
        None => default_timeout,
        Some((name, text)) => match go_duration::parse_non_negative(text.trim()) {
            Ok(d) if d.is_zero() => None,
            Ok(d) => Some(d),
            Err(error) => {
                warnings.push(format!(
                    "operatorgroup {name}: annotation {BUNDLE_UNPACK_TIMEOUT}: {error}; using the default"
                ));
                default_timeout
            }
        },
    };
    let retry_interval = match find(BUNDLE_UNPACK_MIN_RETRY_INTERVAL) {
        None => DEFAULT_RETRY_INTERVAL,
        Some((name, text)) => match go_duration::parse_non_negative(text.trim()) {
            Ok(d) if d.is_zero() => DEFAULT_RETRY_INTERVAL,
            Ok(d) => d.max(MIN_RETRY_INTERVAL),
            Err(error) => {
                warnings.push(format!(
                    "operatorgroup {name}: annotation {BUNDLE_UNPACK_MIN_RETRY_INTERVAL}: {error}; using the default"
                ));
                DEFAULT_RETRY_INTERVAL
            }
        },
    };
    UnpackPolicy {
        timeout,
        retry_interval,
        warnings,
    }
}
