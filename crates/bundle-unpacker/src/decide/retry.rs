//! What to do about one bundle image given what is stored for it: nothing
//! (content stored), unpack it, retry a recorded failure that has stood long
//! enough (with backoff over repeated failures), or wait.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

/// The longest wait between retries that backoff grows to (unless the
/// configured interval is longer still).
pub const MAX_RETRY_BACKOFF: Duration = Duration::from_secs(60 * 60);

/// What is stored for a bundle image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stored {
    /// Nothing: the image was never unpacked (or the failure was cleared).
    Nothing,
    /// The content.
    Content,
    /// A recorded failure.
    Failure {
        /// When it was recorded.
        recorded_at: Timestamp,
        /// How many unpacks have failed in a row, this one included.
        attempts: u32,
        /// The object's UID, to delete exactly this record.
        uid: String,
        /// The object's resource version, likewise.
        resource_version: String,
    },
    /// An object of that name that is not ours (another image's content,
    /// or written by something else); left alone.
    Foreign,
}

/// The next step for one bundle image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Nothing to do.
    Done,
    /// Unpack it; `attempt` counts failures in a row before plus one.
    Unpack {
        /// The attempt number (1 for a first unpack).
        attempt: u32,
    },
    /// Delete the failure record (exactly this one) and unpack again.
    Retry {
        /// The attempt number of the retry.
        attempt: u32,
        /// The record's UID.
        uid: String,
        /// The record's resource version.
        resource_version: String,
    },
    /// Look again at this time.
    WaitUntil(Timestamp),
}

/// How long a failure of `attempts` failures in a row stands: the interval,
/// doubled for each further failure, up to [`MAX_RETRY_BACKOFF`] (or the
/// interval itself, when it is longer).
pub fn retry_delay(interval: Duration, attempts: u32) -> Duration {
    let cap = interval.max(MAX_RETRY_BACKOFF);
    let factor = 2u32.saturating_pow(attempts.saturating_sub(1).min(20));
    interval.saturating_mul(factor).min(cap)
}

/// Decides the next step for a bundle image with `stored`, retrying
/// failures after `retry_interval` (backed off), at `now`.
pub fn next_step(stored: &Stored, retry_interval: Duration, now: Timestamp) -> Next {
    match stored {
        Stored::Nothing => Next::Unpack { attempt: 1 },
        Stored::Content | Stored::Foreign => Next::Done,
        Stored::Failure {
            recorded_at,
            attempts,
            uid,
            resource_version,
        } => {
            let delay = retry_delay(retry_interval, (*attempts).max(1));
            let due = SignedDuration::try_from(delay)
                .ok()
                .and_then(|d| recorded_at.checked_add(d).ok())
                .unwrap_or(Timestamp::MAX);
            if now >= due {
                Next::Retry {
                    attempt: attempts.saturating_add(1),
                    uid: uid.clone(),
                    resource_version: resource_version.clone(),
                }
            } else {
                Next::WaitUntil(due)
            }
        }
    }
}
