//! The wait before retrying a controller that reconciles one object (the
//! samples Config, the OperatorHub) after failures in a row: 1 s, doubling,
//! at most [`MAX_BACKOFF`].

use std::time::Duration;

/// The first wait after a failed reconcile.
pub const FIRST_BACKOFF: Duration = Duration::from_secs(1);

/// The longest wait after failed reconciles.
pub const MAX_BACKOFF: Duration = Duration::from_secs(5 * 60);

/// The wait after `failures` failed reconciles in a row.
pub fn backoff(failures: u32) -> Duration {
    let exponent = failures.saturating_sub(1).min(16);
    FIRST_BACKOFF.saturating_mul(1 << exponent).min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        assert_eq!(backoff(0), Duration::from_secs(1));
        assert_eq!(backoff(1), Duration::from_secs(1));
        assert_eq!(backoff(2), Duration::from_secs(2));
        assert_eq!(backoff(5), Duration::from_secs(16));
        assert_eq!(backoff(40), MAX_BACKOFF);
    }
}
