//! The loop of a controller that reconciles one object (the samples Config,
//! the OperatorHub): reconcile while leading, again on a change, at the
//! resync period, or after failures in a row with a backoff of 1 s,
//! doubling, at most [`MAX_BACKOFF`]. One home for it, so both controllers
//! wait, back off and stop alike.

use std::time::Duration;

use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

/// The first wait after a failed reconcile.
pub const FIRST_BACKOFF: Duration = Duration::from_secs(1);

/// The longest wait after failed reconciles.
pub const MAX_BACKOFF: Duration = Duration::from_secs(5 * 60);

/// The shortest wait a reconcile may ask for with [`Next::After`], so that
/// a plan asking for "now" cannot spin the loop.
pub const MIN_REQUEUE: Duration = Duration::from_millis(500);

/// The wait after `failures` failed reconciles in a row.
pub fn backoff(failures: u32) -> Duration {
    let exponent = failures.saturating_sub(1).min(16);
    FIRST_BACKOFF.saturating_mul(1 << exponent).min(MAX_BACKOFF)
}

/// What one reconcile of the single object asks for next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Converged: look again at the resync period, or on a change.
    Resync,
    /// Converged, but look again after this long (at least
    /// [`MIN_REQUEUE`], at most the resync period).
    After(Duration),
    /// Failed, or met a stale cache: back off and try again.
    Retry,
}

/// The wait before the next reconcile after one that said `next`;
/// `failures_in_a_row` counts retries and is reset by a success.
pub fn next_wait(next: Next, failures_in_a_row: &mut u32, resync: Duration) -> Duration {
    match next {
        Next::Retry => {
            *failures_in_a_row = failures_in_a_row.saturating_add(1);
            backoff(*failures_in_a_row)
        }
        Next::After(after) => {
            *failures_in_a_row = 0;
            after.clamp(MIN_REQUEUE, resync.max(MIN_REQUEUE))
        }
        Next::Resync => {
            *failures_in_a_row = 0;
            resync
        }
    }
}

/// A controller of one object, as [`serve_one`] runs it.
pub trait ReconcileOne {
    /// Brings the object (and what it owns) to its desired state once, and
    /// says when to look again. Failures are the reconciler's to log and
    /// count; they answer [`Next::Retry`].
    fn reconcile_once(&mut self, shutdown: &CancellationToken)
    -> impl Future<Output = Next> + Send;
}

/// Runs `reconciler` while `leading` says so: at once, whenever `changed`
/// is notified or leadership is gained, and after the wait [`next_wait`]
/// gives. Not leading, it only waits. Returns when `shutdown` is cancelled
/// or the leadership channel closes.
pub async fn serve_one(
    reconciler: &mut impl ReconcileOne,
    changed: &Notify,
    leading: &mut watch::Receiver<bool>,
    shutdown: &CancellationToken,
    resync: Duration,
) {
    let mut failures_in_a_row = 0u32;
    loop {
        if shutdown.is_cancelled() {
            break;
        }
        let wait = if *leading.borrow_and_update() {
            let next = reconciler.reconcile_once(shutdown).await;
            next_wait(next, &mut failures_in_a_row, resync)
        } else {
            resync
        };
        tokio::select! {
            // Shutdown first: a change noted meanwhile must not start
            // another reconcile.
            biased;
            () = shutdown.cancelled() => break,
            () = changed.notified() => {}
            () = tokio::time::sleep(wait) => {}
            result = leading.changed() => if result.is_err() { break },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tokio::time::Instant;

    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        assert_eq!(backoff(0), Duration::from_secs(1));
        assert_eq!(backoff(1), Duration::from_secs(1));
        assert_eq!(backoff(2), Duration::from_secs(2));
        assert_eq!(backoff(5), Duration::from_secs(16));
        assert_eq!(backoff(40), MAX_BACKOFF);
    }

    #[test]
    fn the_next_wait_backs_off_on_retries_and_resets_on_success() {
        let resync = Duration::from_secs(600);
        let mut failures = 0;
        let waits: Vec<Duration> = [
            Next::Retry,
            Next::Retry,
            Next::Retry,
            Next::After(Duration::from_secs(30)),
            Next::Retry,
            Next::After(Duration::from_secs(3600)),
            Next::After(Duration::ZERO),
            Next::Resync,
        ]
        .into_iter()
        .map(|next| next_wait(next, &mut failures, resync))
        .collect();
        let millis: Vec<u128> = waits.iter().map(Duration::as_millis).collect();
        // A success resets the backoff; After is held between MIN_REQUEUE
        // and the resync.
        assert_eq!(
            millis,
            [
                1000,
                2000,
                4000,
                30_000,
                1000,
                600_000,
                MIN_REQUEUE.as_millis(),
                600_000
            ]
        );
        assert_eq!(failures, 0);
    }

    /// The times (since the start) at which the loop reconciled.
    #[derive(Clone, Default)]
    struct Calls(Arc<Mutex<Vec<Duration>>>);

    impl Calls {
        fn seconds(&self) -> Vec<u64> {
            let calls = self.0.lock().expect("not poisoned");
            calls.iter().map(Duration::as_secs).collect()
        }
    }

    /// Answers from a script (then `Resync`), recording when it was called.
    struct Scripted {
        start: Instant,
        calls: Calls,
        answers: Vec<Next>,
    }

    impl ReconcileOne for Scripted {
        async fn reconcile_once(&mut self, _shutdown: &CancellationToken) -> Next {
            self.calls
                .0
                .lock()
                .expect("not poisoned")
                .push(self.start.elapsed());
            if self.answers.is_empty() {
                Next::Resync
            } else {
                self.answers.remove(0)
            }
        }
    }

    /// Runs [`serve_one`] with `scripted` on a task, resync 600 s.
    fn spawn_loop(
        mut scripted: Scripted,
        changed: &Arc<Notify>,
        mut leading: watch::Receiver<bool>,
        shutdown: &CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let (changed, shutdown) = (changed.clone(), shutdown.clone());
        tokio::spawn(async move {
            serve_one(
                &mut scripted,
                &changed,
                &mut leading,
                &shutdown,
                Duration::from_secs(600),
            )
            .await;
        })
    }

    /// Lets the loop run until it waits again.
    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_loop_reconciles_on_changes_resyncs_backs_off_and_stops() {
        let changed = Arc::new(Notify::new());
        let (lead, leading) = watch::channel(true);
        let shutdown = CancellationToken::new();
        let calls = Calls::default();
        let scripted = Scripted {
            start: Instant::now(),
            calls: calls.clone(),
            answers: vec![
                Next::Resync,
                Next::Resync,
                Next::Retry,
                Next::Retry,
                Next::Resync,
            ],
        };
        let task = spawn_loop(scripted, &changed, leading, &shutdown);
        settle().await;
        assert_eq!(calls.seconds(), [0], "at once");
        tokio::time::advance(Duration::from_secs(5)).await;
        changed.notify_one();
        settle().await;
        assert_eq!(calls.seconds(), [0, 5], "on a change");
        // The change's reconcile failed twice in a row: 1 s, then 2 s.
        changed.notify_one();
        settle().await;
        tokio::time::advance(Duration::from_secs(1)).await;
        settle().await;
        tokio::time::advance(Duration::from_secs(2)).await;
        settle().await;
        assert_eq!(calls.seconds(), [0, 5, 5, 6, 8], "backed off");
        // Converged: nothing until the resync period.
        tokio::time::advance(Duration::from_secs(599)).await;
        settle().await;
        assert_eq!(calls.seconds().len(), 5);
        tokio::time::advance(Duration::from_secs(1)).await;
        settle().await;
        assert_eq!(calls.seconds(), [0, 5, 5, 6, 8, 608], "resynced");
        // Not leading: changes are not reconciled; gaining it reconciles.
        lead.send_replace(false);
        settle().await;
        changed.notify_one();
        settle().await;
        tokio::time::advance(Duration::from_secs(700)).await;
        settle().await;
        assert_eq!(calls.seconds().len(), 6, "idle while not leading");
        lead.send_replace(true);
        settle().await;
        assert_eq!(calls.seconds().len(), 7, "leadership gained");
        shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(1), task)
            .await
            .expect("stops at shutdown")
            .expect("no panic");
    }

    /// A change noted during the last reconcile does not start another one
    /// once shutdown is asked for.
    #[tokio::test(start_paused = true)]
    async fn a_pending_change_does_not_outlive_shutdown() {
        let changed = Arc::new(Notify::new());
        let (_lead, leading) = watch::channel(true);
        let shutdown = CancellationToken::new();
        let calls = Calls::default();
        let scripted = Scripted {
            start: Instant::now(),
            calls: calls.clone(),
            answers: Vec::new(),
        };
        let task = spawn_loop(scripted, &changed, leading, &shutdown);
        settle().await;
        assert_eq!(calls.seconds().len(), 1);
        for _ in 0..20 {
            changed.notify_one();
        }
        shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(1), task)
            .await
            .expect("stops at shutdown")
            .expect("no panic");
        assert_eq!(calls.seconds().len(), 1, "no reconcile after shutdown");
    }

    #[tokio::test(start_paused = true)]
    async fn the_loop_stops_when_the_leadership_channel_closes() {
        let changed = Notify::new();
        let (lead, mut leading) = watch::channel(false);
        let shutdown = CancellationToken::new();
        drop(lead);
        let mut scripted = Scripted {
            start: Instant::now(),
            calls: Calls::default(),
            answers: Vec::new(),
        };
        tokio::time::timeout(
            Duration::from_secs(1),
            serve_one(
                &mut scripted,
                &changed,
                &mut leading,
                &shutdown,
                Duration::from_secs(600),
            ),
        )
        .await
        .expect("returns");
    }
}
