//! Graceful shutdown: a cancellation token that SIGTERM or SIGINT cancels,
//! and a [`TaskSet`] that runs a service's long-lived tasks until shutdown and
//! then drains them within a deadline.
//!
//! ```no_run
//! # async fn example() -> olm_runtime::Result<()> {
//! use olm_runtime::shutdown::{self, TaskSet, DEFAULT_DRAIN_DEADLINE};
//!
//! let shutdown = shutdown::on_signal()?;
//! let mut tasks = TaskSet::new(shutdown.clone());
//! let token = shutdown.clone();
//! tasks.spawn("reconciler", async move {
//!     token.cancelled().await;
//!     Ok::<_, std::io::Error>(())
//! });
//! tasks.run(DEFAULT_DRAIN_DEADLINE).await
//! # }
//! ```

use std::{collections::HashMap, future::Future, time::Duration};

use tokio::task::{Id, JoinError, JoinSet};
pub use tokio_util::sync::CancellationToken;

use crate::error::{BoxError, Error, Result};

/// How long tasks may take to finish after shutdown began. Kubernetes waits
/// 30 s (the default `terminationGracePeriodSeconds`) before it kills a pod;
/// this leaves room for the leader lease release and the trace flush.
pub const DEFAULT_DRAIN_DEADLINE: Duration = Duration::from_secs(20);

/// A token that is cancelled on the first SIGTERM or SIGINT. Must be called
/// from within a Tokio runtime; the handlers stay installed for the life of
/// the process.
pub fn on_signal() -> Result<CancellationToken> {
    let token = CancellationToken::new();
    let signals = Signals::install()?;
    let cancel = token.clone();
    tokio::spawn(async move {
        let signal = signals.recv().await;
        tracing::info!(signal, "shutdown requested");
        cancel.cancel();
    });
    Ok(token)
}

#[cfg(unix)]
struct Signals {
    terminate: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
}

#[cfg(unix)]
impl Signals {
    fn install() -> Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Self {
            terminate: signal(SignalKind::terminate()).map_err(|source| Error::Signal {
                signal: "SIGTERM",
                source,
            })?,
            interrupt: signal(SignalKind::interrupt()).map_err(|source| Error::Signal {
                signal: "SIGINT",
                source,
            })?,
        })
    }

    async fn recv(mut self) -> &'static str {
        tokio::select! {
            _ = self.terminate.recv() => "SIGTERM",
            _ = self.interrupt.recv() => "SIGINT",
        }
    }
}

#[cfg(not(unix))]
struct Signals;

#[cfg(not(unix))]
impl Signals {
    fn install() -> Result<Self> {
        Ok(Self)
    }

    async fn recv(self) -> &'static str {
        // Without a handler the process would simply exit, so an error here
        // still has to end in shutdown.
        let _ = tokio::signal::ctrl_c().await;
        "ctrl-c"
    }
}

type TaskOutput = std::result::Result<(), BoxError>;

/// The long-lived tasks of a service. Every task is expected to run until the
/// shutdown token is cancelled; one that ends earlier (successfully or not)
/// starts the shutdown of all the others, because a service missing one of its
/// parts should rather restart than limp on.
#[derive(Debug)]
pub struct TaskSet {
    shutdown: CancellationToken,
    tasks: JoinSet<TaskOutput>,
    names: HashMap<Id, String>,
}

impl TaskSet {
    /// An empty set whose tasks stop when `shutdown` is cancelled.
    pub fn new(shutdown: CancellationToken) -> Self {
        Self {
            shutdown,
            tasks: JoinSet::new(),
            names: HashMap::new(),
        }
    }

    /// The token the tasks are expected to watch.
    pub fn shutdown_token(&self) -> &CancellationToken {
        &self.shutdown
    }

    /// Spawns `task`, which must return once the shutdown token is cancelled.
    pub fn spawn<F, E>(&mut self, name: impl Into<String>, task: F)
    where
        F: Future<Output = std::result::Result<(), E>> + Send + 'static,
        E: Into<BoxError>,
    {
        let handle = self
            .tasks
            .spawn(async move { task.await.map_err(Into::into) });
        self.names.insert(handle.id(), name.into());
    }

    /// Waits for shutdown (or for any task to end), then gives the remaining
    /// tasks `drain_deadline` to finish and aborts those that do not. Returns
    /// the first task failure, or [`Error::DrainTimeout`] naming the tasks
    /// that had to be aborted.
    pub async fn run(mut self, drain_deadline: Duration) -> Result<()> {
        let mut first_error = None;
        // Running: until shutdown is requested or a task ends on its own.
        while !self.shutdown.is_cancelled() {
            tokio::select! {
                () = self.shutdown.cancelled() => {}
                joined = self.tasks.join_next_with_id() => match joined {
                    Some(joined) => {
                        let outcome = self.outcome(joined);
                        tracing::warn!(
                            task = outcome.0,
                            error = outcome.1.as_ref().map(|e| e as &dyn std::error::Error),
                            "task ended before shutdown; shutting down"
                        );
                        first_error = first_error.or(outcome.1);
                        self.shutdown.cancel();
                    }
                    None => return Ok(()),
                },
            }
        }

        // Draining: every task has been told to stop.
        let deadline = tokio::time::Instant::now() + drain_deadline;
        loop {
            match tokio::time::timeout_at(deadline, self.tasks.join_next_with_id()).await {
                Ok(Some(joined)) => {
                    let (name, error) = self.outcome(joined);
                    match &error {
                        Some(error) => tracing::warn!(
                            task = name,
                            error = error as &dyn std::error::Error,
                            "task failed"
                        ),
                        None => tracing::debug!(task = name, "task stopped"),
                    }
                    first_error = first_error.or(error);
                }
                Ok(None) => break,
                Err(_elapsed) => {
                    let mut pending: Vec<String> =
                        self.names.drain().map(|(_, name)| name).collect();
                    pending.sort();
                    self.tasks.abort_all();
                    return Err(Error::DrainTimeout {
                        deadline: drain_deadline,
                        pending,
                    });
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// The task's name and its failure, if any.
    fn outcome(
        &mut self,
        joined: std::result::Result<(Id, TaskOutput), JoinError>,
    ) -> (String, Option<Error>) {
        match joined {
            Ok((id, output)) => {
                let name = self.names.remove(&id).unwrap_or_default();
                let error = output.err().map(|source| Error::Task {
                    name: name.clone(),
                    source,
                });
                (name, error)
            }
            Err(join_error) => {
                let name = self.names.remove(&join_error.id()).unwrap_or_default();
                (name.clone(), Some(Error::TaskPanicked { name }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::{
        io,
        sync::{
            Arc,
            atomic::{AtomicBool, Ordering},
        },
    };

    use super::*;

    /// Bounds every test so that a bug cannot hang the suite.
    const TEST_DEADLINE: Duration = Duration::from_secs(10);

    #[tokio::test]
    async fn tasks_drain_after_shutdown() {
        let shutdown = CancellationToken::new();
        let mut tasks = TaskSet::new(shutdown.clone());
        let cleaned_up = Arc::new(AtomicBool::new(false));
        for name in ["first", "second"] {
            let token = shutdown.clone();
            let cleaned_up = cleaned_up.clone();
            tasks.spawn(name, async move {
                token.cancelled().await;
                tokio::task::yield_now().await;
                cleaned_up.store(true, Ordering::SeqCst);
                Ok::<_, io::Error>(())
            });
        }
        shutdown.cancel();
        tokio::time::timeout(TEST_DEADLINE, tasks.run(TEST_DEADLINE))
            .await
            .expect("within deadline")
            .expect("clean drain");
        assert!(cleaned_up.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn a_failing_task_shuts_the_others_down_and_is_reported() {
        let shutdown = CancellationToken::new();
        let mut tasks = TaskSet::new(shutdown.clone());
        let token = shutdown.clone();
        tasks.spawn("steady", async move {
            token.cancelled().await;
            Ok::<_, io::Error>(())
        });
        tasks.spawn("broken", async { Err(io::Error::other("sample failure")) });
        let error = tokio::time::timeout(TEST_DEADLINE, tasks.run(TEST_DEADLINE))
            .await
            .expect("within deadline")
            .expect_err("the failure is reported");
        assert!(
            matches!(&error, Error::Task { name, .. } if name == "broken"),
            "{error}"
        );
        assert!(shutdown.is_cancelled());
    }

    #[tokio::test]
    async fn a_panicking_task_is_reported() {
        let shutdown = CancellationToken::new();
        let mut tasks = TaskSet::new(shutdown.clone());
        tasks.spawn("panicky", async {
            #[allow(clippy::panic)]
            if true {
                panic!("sample panic");
            }
            Ok::<_, io::Error>(())
        });
        let error = tokio::time::timeout(TEST_DEADLINE, tasks.run(TEST_DEADLINE))
            .await
            .expect("within deadline")
            .expect_err("the panic is reported");
        assert!(
            matches!(&error, Error::TaskPanicked { name } if name == "panicky"),
            "{error}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn stragglers_are_aborted_at_the_drain_deadline() {
        let shutdown = CancellationToken::new();
        let mut tasks = TaskSet::new(shutdown.clone());
        let token = shutdown.clone();
        tasks.spawn("prompt", async move {
            token.cancelled().await;
            Ok::<_, io::Error>(())
        });
        tasks.spawn(
            "stuck",
            std::future::pending::<std::result::Result<(), io::Error>>(),
        );
        shutdown.cancel();
        let error = tasks
            .run(Duration::from_secs(3))
            .await
            .expect_err("the straggler is reported");
        match error {
            Error::DrainTimeout { pending, deadline } => {
                assert_eq!(pending, ["stuck"]);
                assert_eq!(deadline, Duration::from_secs(3));
            }
            other => panic!("unexpected error: {other}"),
        }
    }
}
