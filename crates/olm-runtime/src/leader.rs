//! Leader election on a `coordination.k8s.io/v1` Lease, so that a service can
//! run a hot standby replica: only the leader acts, and the standby takes over
//! within moments of a graceful release, or once the lease expires if the
//! leader died.
//!
//! Upstream OLM runs single replicas without leader election; this follows
//! client-go's `leaderelection` semantics so that the Lease looks familiar:
//!
//! - a candidate takes the lease when it is absent, released (no holder), or
//!   has not changed for a whole lease duration *as measured on the
//!   candidate's own clock* (so clock skew between nodes does not matter);
//! - the leader renews every retry period and steps down when it has not
//!   managed to renew for the renew deadline, which is shorter than the lease
//!   duration, so it has stopped before anyone else may take over;
//! - every write carries the `resourceVersion` it was decided on, so two
//!   candidates racing for the same lease cannot both win;
//! - on graceful shutdown the leader clears `holderIdentity`, and a standby
//!   (which watches the Lease) takes over at once.
//!
//! The rules live in the pure [`decide`] function; the elector task behind
//! [`LeaderHandle`] does the I/O. It needs `get`, `list`, `watch`, `create` and
//! `update` on `leases.coordination.k8s.io` in the Lease's namespace.
//!
//! ```no_run
//! # async fn example(client: kube::Client, args: olm_runtime::config::LeaderElectionArgs) -> olm_runtime::Result<()> {
//! use olm_runtime::leader::LeaderHandle;
//!
//! let mut leader = match args.resolve("catalog-operator", &client)? {
//!     Some(config) => LeaderHandle::spawn(client.clone(), config)?,
//!     None => LeaderHandle::always_leader(),
//! };
//! leader.acquired().await?;
//! let lost = leader.lost();
//! // ... run the controllers until shutdown or `lost` resolves (then exit and
//! // let Kubernetes restart the pod as a standby) ...
//! // Once the controllers have stopped, hand over at once:
//! leader.release().await?;
//! # drop(lost);
//! # Ok(())
//! # }
//! ```

use std::{future::Future, sync::Arc, time::Duration};

use futures::StreamExt as _;
use jiff::Timestamp;
use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::MicroTime,
};
use kube::{
    Api,
    api::{ObjectMeta, PostParams},
    runtime::{WatchStreamExt as _, watcher},
};
use tokio::{
    sync::{Notify, watch},
    task::JoinHandle,
};
use tokio_util::sync::CancellationToken;

use crate::{
    config::{DEFAULT_LEASE_DURATION, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD},
    error::{Error, Result},
};

/// Where the Lease is, who we are, and the election's timing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderElectionConfig {
    /// Name of the Lease object.
    pub lease_name: String,
    /// Namespace of the Lease object.
    pub lease_namespace: String,
    /// This replica's identity; must be unique among the replicas.
    pub identity: String,
    /// How long the lease is valid after its last renewal; written to the
    /// Lease, so candidates honour the holder's value.
    pub lease_duration: Duration,
    /// How long the leader keeps retrying a failed renewal before it steps down.
    pub renew_deadline: Duration,
    /// How often the leader renews and a candidate retries.
    pub retry_period: Duration,
}

impl LeaderElectionConfig {
    /// A configuration with the default timing (12 s, 8 s, 2 s).
    pub fn new(
        lease_name: impl Into<String>,
        lease_namespace: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        Self {
            lease_name: lease_name.into(),
            lease_namespace: lease_namespace.into(),
            identity: identity.into(),
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
        }
    }

    /// Checks that the settings make a safe election: a non-empty identity,
    /// a lease duration of whole seconds (the Lease stores seconds), and
    /// `lease duration > renew deadline > retry period > 0`.
    pub fn validate(&self) -> Result<()> {
        let invalid = |reason: String| Err(Error::LeaderElectionConfig { reason });
        if self.identity.trim().is_empty() {
            return invalid("identity must not be empty".to_owned());
        }
        if self.lease_name.is_empty() || self.lease_namespace.is_empty() {
            return invalid("lease name and namespace must not be empty".to_owned());
        }
        if self.lease_duration.subsec_nanos() != 0 || self.lease_duration.is_zero() {
            return invalid(format!(
                "lease duration {:?} must be a positive whole number of seconds",
                self.lease_duration
            ));
        }
        if self.renew_deadline >= self.lease_duration {
            return invalid(format!(
                "renew deadline {:?} must be shorter than lease duration {:?}",
                self.renew_deadline, self.lease_duration
            ));
        }
        if self.retry_period.is_zero() || self.retry_period >= self.renew_deadline {
            return invalid(format!(
                "retry period {:?} must be positive and shorter than renew deadline {:?}",
                self.retry_period, self.renew_deadline
            ));
        }
        Ok(())
    }

    fn timing(&self) -> Timing {
        Timing {
            lease_duration: self.lease_duration,
            renew_deadline: self.renew_deadline,
            retry_period: self.retry_period,
        }
    }
}

/// The durations [`decide`] works with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// Our lease duration, used when the Lease does not state one.
    pub lease_duration: Duration,
    /// How long a leader may go without a successful renewal.
    pub renew_deadline: Duration,
    /// How often the leader renews.
    pub retry_period: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
        }
    }
}

/// The election-relevant content of a Lease's spec.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaseRecord {
    /// Who holds the lease; `None` when absent or empty (released).
    pub holder: Option<String>,
    /// How long the holder's lease is valid after a renewal.
    pub lease_duration: Option<Duration>,
    /// When the current holder acquired the lease (by its clock).
    pub acquire_time: Option<Timestamp>,
    /// When the holder last renewed (by its clock; informational only).
    pub renew_time: Option<Timestamp>,
    /// How many times the lease changed hands.
    pub transitions: i32,
}

impl LeaseRecord {
    /// Reads the record from a Lease's spec.
    pub fn from_spec(spec: Option<&LeaseSpec>) -> Self {
        let Some(spec) = spec else {
            return Self::default();
        };
        Self {
            holder: spec
                .holder_identity
                .clone()
                .filter(|holder| !holder.is_empty()),
            lease_duration: spec
                .lease_duration_seconds
                .and_then(|seconds| u64::try_from(seconds).ok())
                .filter(|seconds| *seconds > 0)
                .map(Duration::from_secs),
            acquire_time: spec.acquire_time.as_ref().map(|time| time.0),
            renew_time: spec.renew_time.as_ref().map(|time| time.0),
            transitions: spec.lease_transitions.unwrap_or(0),
        }
    }
}

/// A [`LeaseRecord`] and when we first saw it in this form, by our own clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observation {
    /// The record as read.
    pub record: LeaseRecord,
    /// When this record was first read (any change to it restarts the clock).
    pub observed_at: Timestamp,
}

/// Folds a freshly read record into what we knew: the observation time only
/// moves when the record changed, which is how a candidate measures expiry
/// without trusting the holder's clock.
pub fn observe(previous: Option<Observation>, record: LeaseRecord, now: Timestamp) -> Observation {
    match previous {
        Some(previous) if previous.record == record => previous,
        _ => Observation {
            record,
            observed_at: now,
        },
    }
}

/// What we know about the Lease at decision time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaseState {
    /// The Lease does not exist.
    Absent,
    /// The Lease could not be read just now.
    Unreadable,
    /// The Lease as last read.
    Present(Observation),
}

/// Everything [`decide`] looks at besides the clock and our identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElectionState {
    /// The Lease.
    pub lease: LeaseState,
    /// When we last renewed successfully, while we believe we lead; `None`
    /// while we do not.
    pub last_renewed: Option<Timestamp>,
    /// The election's durations.
    pub timing: Timing,
}

/// Why a leader stops leading.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepDownReason {
    /// No successful renewal within the renew deadline.
    RenewDeadlineExceeded,
    /// The Lease now names another holder (or none).
    LeaseTaken,
    /// The Lease was deleted.
    LeaseDeleted,
}

/// What to do next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Write ourselves as holder: create the Lease if absent, else update it
    /// at the resourceVersion that was read.
    Acquire,
    /// Refresh `renewTime` of the Lease we hold.
    Renew,
    /// Stop leading at once.
    StepDown(StepDownReason),
    /// Nothing to do before `until` (or before the Lease changes).
    Wait {
        /// When to decide again at the latest.
        until: Timestamp,
    },
}

/// The election rules, as a pure function of what we know, the time and our
/// identity.
pub fn decide(state: &ElectionState, now: Timestamp, me: &str) -> Action {
    let timing = &state.timing;
    if let Some(last_renewed) = state.last_renewed {
        let deadline = last_renewed + timing.renew_deadline;
        if now >= deadline {
            return Action::StepDown(StepDownReason::RenewDeadlineExceeded);
        }
        return match &state.lease {
            LeaseState::Absent => Action::StepDown(StepDownReason::LeaseDeleted),
            LeaseState::Unreadable => Action::Wait {
                until: deadline.min(now + timing.retry_period),
            },
            LeaseState::Present(observation)
                if observation.record.holder.as_deref() == Some(me) =>
            {
                let due = last_renewed + timing.retry_period;
                if now >= due {
                    Action::Renew
                } else {
                    Action::Wait { until: due }
                }
            }
            LeaseState::Present(_) => Action::StepDown(StepDownReason::LeaseTaken),
        };
    }
    match &state.lease {
        LeaseState::Absent => Action::Acquire,
        LeaseState::Unreadable => Action::Wait {
            until: now + timing.retry_period,
        },
        LeaseState::Present(observation) => match observation.record.holder.as_deref() {
            // Released, or ours from before a restart with the same identity.
            None => Action::Acquire,
            Some(holder) if holder == me => Action::Acquire,
            Some(_) => {
                let duration = observation
                    .record
                    .lease_duration
                    .unwrap_or(timing.lease_duration);
                let expiry = observation.observed_at + duration;
                if now >= expiry {
                    Action::Acquire
                } else {
                    Action::Wait { until: expiry }
                }
            }
        },
    }
}

/// Whether this replica currently leads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Another replica leads (or nobody yet); do not act.
    Follower,
    /// This replica leads; act.
    Leader,
}

/// The running election, as seen by the service. Dropping it stops the
/// elector *without* releasing the lease (as if the process had died); call
/// [`LeaderHandle::release`] for a graceful hand-over.
#[derive(Debug)]
pub struct LeaderHandle {
    role: watch::Receiver<Role>,
    stop: CancellationToken,
    task: Option<JoinHandle<Result<()>>>,
    /// Keeps the channel open when there is no elector task (election disabled).
    _fixed_role: Option<watch::Sender<Role>>,
}

impl LeaderHandle {
    /// Starts campaigning for the lease in a background task (on the current
    /// Tokio runtime).
    pub fn spawn(client: kube::Client, config: LeaderElectionConfig) -> Result<Self> {
        config.validate()?;
        let (role_tx, role) = watch::channel(Role::Follower);
        let stop = CancellationToken::new();
        let elector = LeaderElector::new(client, config, role_tx);
        let task = tokio::spawn(elector.run(stop.clone()));
        Ok(Self {
            role,
            stop,
            task: Some(task),
            _fixed_role: None,
        })
    }

    /// A handle that leads from the start and forever, for when leader election
    /// is disabled, so that services handle both cases alike.
    pub fn always_leader() -> Self {
        let (role_tx, role) = watch::channel(Role::Leader);
        Self {
            role,
            stop: CancellationToken::new(),
            task: None,
            _fixed_role: Some(role_tx),
        }
    }

    /// Whether this replica leads right now.
    pub fn is_leader(&self) -> bool {
        *self.role.borrow() == Role::Leader
    }

    /// A receiver of every role change.
    pub fn subscribe(&self) -> watch::Receiver<Role> {
        self.role.clone()
    }

    /// Waits until this replica leads. Fails when the elector has stopped.
    pub async fn acquired(&mut self) -> Result<()> {
        let mut role = self.role.clone();
        match role.wait_for(|role| *role == Role::Leader).await {
            Ok(_) => Ok(()),
            Err(_closed) => Err(Error::LeaderElectorStopped),
        }
    }

    /// A future that resolves when this replica stops leading (or the elector
    /// stops); it resolves at once if the replica does not lead now.
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut role = self.role.clone();
        async move {
            let _ = role.wait_for(|role| *role != Role::Leader).await;
        }
    }

    /// Stops campaigning and, if leading, clears `holderIdentity` so that a
    /// standby takes over at once. Call it only after the work that needed
    /// leadership has stopped.
    pub async fn release(mut self) -> Result<()> {
        self.stop.cancel();
        match self.task.take() {
            Some(task) => task
                .await
                .map_err(|source| Error::LeaderElectorTask { source })?,
            None => Ok(()),
        }
    }

    /// Runs `work` once this replica leads, and only while it leads: `work`
    /// gets a token that is cancelled when `shutdown` is, or when leadership
    /// is lost, and must stop acting once it is. The lease is released after
    /// `work` returns, so a standby takes over at once.
    ///
    /// Returns at once with `Ok` if `shutdown` comes before leadership.
    /// Without a shutdown, `work` ending is an error: [`Error::LeadershipLost`]
    /// if leadership was lost, else [`Error::LeadingWorkEnded`].
    pub async fn run_while_leading<F, Fut, E>(
        mut self,
        shutdown: &CancellationToken,
        work: F,
    ) -> std::result::Result<(), E>
    where
        F: FnOnce(CancellationToken) -> Fut,
        Fut: Future<Output = std::result::Result<(), E>>,
        E: From<Error>,
    {
        tokio::select! {
            acquired = self.acquired() => acquired?,
            () = shutdown.cancelled() => return Ok(()),
        }
        tracing::info!("leading; starting controllers");
        // Losing the lease stops the work like a shutdown does: a replica
        // that no longer leads must not act.
        let working = shutdown.child_token();
        let lost = self.lost();
        let on_loss = working.clone();
        let loss_watch = AbortOnDrop(tokio::spawn(async move {
            lost.await;
            on_loss.cancel();
        }));
        let outcome = work(working).await;
        drop(loss_watch);
        let stepped_down = !self.is_leader();
        self.release().await?;
        outcome?;
        match (shutdown.is_cancelled(), stepped_down) {
            (true, _) => Ok(()),
            (false, true) => Err(Error::LeadershipLost.into()),
            (false, false) => Err(Error::LeadingWorkEnded.into()),
        }
    }

    /// Follows this replica's role as a watch of "leading now?", for a
    /// controller that works only while leading; a task of `tasks` keeps it
    /// current and releases the lease once shutdown is asked for (the
    /// drain then waits for it).
    pub fn leading(self, tasks: &mut crate::shutdown::TaskSet) -> watch::Receiver<bool> {
        let (leading_tx, leading_rx) = watch::channel(self.is_leader());
        let mut roles = self.subscribe();
        let stop = tasks.shutdown_token().clone();
        tasks.spawn("leadership", async move {
            loop {
                let _ = leading_tx.send(*roles.borrow() == Role::Leader);
                tokio::select! {
                    changed = roles.changed() => if changed.is_err() { break },
                    () = stop.cancelled() => break,
                }
            }
            self.release().await
        });
        leading_rx
    }
}

impl Drop for LeaderHandle {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Aborts a background task when dropped, so that the lease watch dies with
/// the elector even when the elector is aborted.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The I/O half of the election: reads the Lease, asks [`decide`], writes.
struct LeaderElector {
    api: Api<Lease>,
    config: LeaderElectionConfig,
    role: watch::Sender<Role>,
    clock: MonotonicClock,
    observation: Option<Observation>,
    last_renewed: Option<Timestamp>,
}

/// The elector's clock for decisions: wall-clock time when the elector
/// started, advanced by the monotonic clock, so that a wall-clock jump (an
/// NTP step) can neither make a candidate take over early nor keep a leader
/// leading. Times written into the Lease use the wall clock, as client-go's do.
struct MonotonicClock {
    wall_at_start: Timestamp,
    started: std::time::Instant,
}

impl MonotonicClock {
    fn start() -> Self {
        Self {
            wall_at_start: Timestamp::now(),
            started: std::time::Instant::now(),
        }
    }

    fn now(&self) -> Timestamp {
        self.wall_at_start + self.started.elapsed()
    }
}

/// What was read: the Lease itself (to write back at its resourceVersion).
enum Read {
    Absent,
    Unreadable,
    Present(Box<Lease>),
}

impl LeaderElector {
    fn new(client: kube::Client, config: LeaderElectionConfig, role: watch::Sender<Role>) -> Self {
        Self {
            api: Api::namespaced(client, &config.lease_namespace),
            config,
            role,
            clock: MonotonicClock::start(),
            observation: None,
            last_renewed: None,
        }
    }

    async fn run(mut self, stop: CancellationToken) -> Result<()> {
        let lease_changed = Arc::new(Notify::new());
        let _watch = AbortOnDrop(tokio::spawn(watch_lease(
            self.api.clone(),
            self.config.lease_name.clone(),
            lease_changed.clone(),
        )));
        tracing::info!(
            lease = %self.lease_ref(),
            identity = %self.config.identity,
            "leader election started"
        );
        while !stop.is_cancelled() {
            let now = self.clock.now();
            let read = self.read(now).await;
            let state = ElectionState {
                lease: match (&read, &self.observation) {
                    (Read::Present(_), Some(observation)) => {
                        LeaseState::Present(observation.clone())
                    }
                    (Read::Absent, _) => LeaseState::Absent,
                    _ => LeaseState::Unreadable,
                },
                last_renewed: self.last_renewed,
                timing: self.config.timing(),
            };
            let action = decide(&state, now, &self.config.identity);
            tracing::trace!(?action, "leader election decision");
            let wait_until = match action {
                Action::Acquire => match self.acquire(read, now).await {
                    // Lost a race: the next read shows the winner.
                    Ok(false) => continue,
                    _ => now + self.config.retry_period,
                },
                Action::Renew => {
                    if let Read::Present(lease) = read {
                        self.renew(*lease, now).await;
                    }
                    now + self.config.retry_period
                }
                Action::StepDown(reason) => {
                    self.step_down(reason);
                    continue;
                }
                Action::Wait { until } => until,
            };
            let pause =
                Duration::try_from(wait_until.duration_since(self.clock.now())).unwrap_or_default();
            tokio::select! {
                () = stop.cancelled() => {}
                () = lease_changed.notified() => {}
                () = tokio::time::sleep(pause) => {}
            }
        }
        self.release().await
    }

    fn lease_ref(&self) -> String {
        format!("{}/{}", self.config.lease_namespace, self.config.lease_name)
    }

    fn lease_error(&self, verb: &'static str, source: kube::Error) -> Error {
        Error::Lease {
            verb,
            namespace: self.config.lease_namespace.clone(),
            name: self.config.lease_name.clone(),
            source: Box::new(source),
        }
    }

    /// How long one request may take: while leading, no longer than the
    /// remaining renew deadline, so that a hung request cannot keep us leading.
    fn request_timeout(&self, now: Timestamp) -> Duration {
        const MINIMUM: Duration = Duration::from_millis(100);
        match self.last_renewed {
            Some(last_renewed) => {
                let remaining = (last_renewed + self.config.renew_deadline).duration_since(now);
                Duration::try_from(remaining)
                    .unwrap_or_default()
                    .max(MINIMUM)
            }
            None => self.config.renew_deadline,
        }
    }

    async fn call<T>(
        &self,
        verb: &'static str,
        now: Timestamp,
        request: impl Future<Output = std::result::Result<T, kube::Error>>,
    ) -> Result<T> {
        let timeout = self.request_timeout(now);
        match tokio::time::timeout(timeout, request).await {
            Ok(result) => result.map_err(|source| self.lease_error(verb, source)),
            Err(_elapsed) => Err(Error::LeaseTimeout {
                verb,
                namespace: self.config.lease_namespace.clone(),
                name: self.config.lease_name.clone(),
                timeout,
            }),
        }
    }

    async fn read(&mut self, now: Timestamp) -> Read {
        match self
            .call("get", now, self.api.get_opt(&self.config.lease_name))
            .await
        {
            Ok(Some(lease)) => {
                let record = LeaseRecord::from_spec(lease.spec.as_ref());
                self.observation = Some(observe(self.observation.take(), record, now));
                Read::Present(Box::new(lease))
            }
            Ok(None) => {
                self.observation = None;
                Read::Absent
            }
            Err(error) => {
                tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    "failed to read the lease"
                );
                Read::Unreadable
            }
        }
    }

    fn lease_duration_seconds(&self) -> i32 {
        i32::try_from(self.config.lease_duration.as_secs()).unwrap_or(i32::MAX)
    }

    /// Takes the lease; `Ok(false)` when another writer got there first.
    async fn acquire(&mut self, read: Read, now: Timestamp) -> Result<bool> {
        let me = self.config.identity.clone();
        let wall = Timestamp::now();
        let result = match read {
            Read::Absent => {
                let mut lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.config.lease_name.clone()),
                        namespace: Some(self.config.lease_namespace.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(LeaseSpec {
                        holder_identity: Some(me.clone()),
                        lease_duration_seconds: Some(self.lease_duration_seconds()),
                        acquire_time: Some(MicroTime(wall)),
                        renew_time: Some(MicroTime(wall)),
                        lease_transitions: Some(0),
                        ..LeaseSpec::default()
                    }),
                };
                crate::apply::mark_managed(&mut lease);
                self.call(
                    "create",
                    now,
                    self.api.create(&PostParams::default(), &lease),
                )
                .await
            }
            Read::Present(lease) => {
                let mut lease = *lease;
                let previous = LeaseRecord::from_spec(lease.spec.as_ref());
                let transitions = if previous.holder.as_deref() == Some(me.as_str()) {
                    previous.transitions
                } else {
                    previous.transitions.saturating_add(1)
                };
                let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
                spec.holder_identity = Some(me.clone());
                spec.lease_duration_seconds = Some(self.lease_duration_seconds());
                spec.acquire_time = Some(MicroTime(wall));
                spec.renew_time = Some(MicroTime(wall));
                spec.lease_transitions = Some(transitions);
                // `lease` carries the resourceVersion we decided on: if anyone
                // wrote since, this fails with a conflict instead of overwriting.
                self.call(
                    "update",
                    now,
                    self.api
                        .replace(&self.config.lease_name, &PostParams::default(), &lease),
                )
                .await
            }
            Read::Unreadable => return Ok(false),
        };
        match result {
            Ok(lease) => {
                self.took(&lease, now);
                tracing::info!(lease = %self.lease_ref(), identity = %me, "acquired leadership");
                Ok(true)
            }
            Err(error) if is_lost_race(&error) => {
                tracing::debug!(lease = %self.lease_ref(), "another candidate wrote the lease first");
                Ok(false)
            }
            Err(error) => {
                tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    "failed to acquire the lease"
                );
                Err(error)
            }
        }
    }

    async fn renew(&mut self, mut lease: Lease, now: Timestamp) {
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        spec.lease_duration_seconds = Some(self.lease_duration_seconds());
        let result = self
            .call(
                "update",
                now,
                self.api
                    .replace(&self.config.lease_name, &PostParams::default(), &lease),
            )
            .await;
        match result {
            Ok(lease) => self.took(&lease, now),
            // The next round decides what the failure means: a new holder makes
            // us step down, a passing outage is retried until the deadline.
            Err(error) => tracing::warn!(
                error = &error as &dyn std::error::Error,
                "failed to renew the lease"
            ),
        }
    }

    /// Records a successful write of ourselves as holder.
    fn took(&mut self, lease: &Lease, now: Timestamp) {
        let record = LeaseRecord::from_spec(lease.spec.as_ref());
        self.observation = Some(observe(self.observation.take(), record, now));
        self.last_renewed = Some(now);
        self.role
            .send_if_modified(|role| std::mem::replace(role, Role::Leader) != Role::Leader);
    }

    fn step_down(&mut self, reason: StepDownReason) {
        tracing::warn!(lease = %self.lease_ref(), ?reason, "stepping down as leader");
        self.last_renewed = None;
        self.role.send_replace(Role::Follower);
    }

    /// Clears `holderIdentity` if the lease names us (even after stepping
    /// down, while nobody else has taken it), so that a standby takes over
    /// without waiting for expiry.
    async fn release(&mut self) -> Result<()> {
        // Stop acting before giving the lease away.
        self.last_renewed = None;
        self.role.send_replace(Role::Follower);
        let now = Timestamp::now();
        let Some(mut lease) = self
            .call("get", now, self.api.get_opt(&self.config.lease_name))
            .await?
        else {
            return Ok(());
        };
        if LeaseRecord::from_spec(lease.spec.as_ref())
            .holder
            .as_deref()
            != Some(self.config.identity.as_str())
        {
            return Ok(());
        }
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        spec.holder_identity = None;
        spec.acquire_time = None;
        spec.renew_time = Some(MicroTime(now));
        let result = self
            .call(
                "update",
                now,
                self.api
                    .replace(&self.config.lease_name, &PostParams::default(), &lease),
            )
            .await;
        match result {
            Ok(_) => {
                tracing::info!(lease = %self.lease_ref(), "released leadership");
                Ok(())
            }
            // Someone else wrote the lease since: it is no longer ours to release.
            Err(error) if is_lost_race(&error) => Ok(()),
            Err(error) => Err(error),
        }
    }
}

/// A conflict or already-exists answer: another writer was first.
fn is_lost_race(error: &Error) -> bool {
    match error {
        Error::Lease { source, .. } => {
            matches!(&**source, kube::Error::Api(status) if status.code == 409)
        }
        _ => false,
    }
}

/// Wakes the elector whenever the Lease changes, so that a standby notices a
/// release at once rather than at its next poll.
async fn watch_lease(api: Api<Lease>, name: String, changed: Arc<Notify>) {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = std::pin::pin!(watcher(api, config).default_backoff());
    while let Some(event) = events.next().await {
        match event {
            Ok(_) => changed.notify_one(),
            Err(error) => tracing::debug!(
                error = &error as &dyn std::error::Error,
                "lease watch interrupted"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn work_while_leading_ends_quietly_on_shutdown() {
        let shutdown = CancellationToken::new();
        let outcome = LeaderHandle::always_leader()
            .run_while_leading(&shutdown, |working| {
                let shutdown = shutdown.clone();
                async move {
                    shutdown.cancel();
                    working.cancelled().await;
                    Ok::<(), Error>(())
                }
            })
            .await;
        assert!(outcome.is_ok(), "{outcome:?}");
    }

    #[tokio::test]
    async fn work_that_ends_on_its_own_while_leading_is_an_error() {
        let shutdown = CancellationToken::new();
        let outcome = LeaderHandle::always_leader()
            .run_while_leading(&shutdown, |_working| async { Ok::<(), Error>(()) })
            .await;
        assert!(
            matches!(outcome, Err(Error::LeadingWorkEnded)),
            "{outcome:?}"
        );
    }

    #[tokio::test]
    async fn the_work_error_is_returned() {
        let shutdown = CancellationToken::new();
        let outcome = LeaderHandle::always_leader()
            .run_while_leading(&shutdown, |_working| async {
                Err::<(), Error>(Error::LeaderElectorStopped)
            })
            .await;
        assert!(
            matches!(outcome, Err(Error::LeaderElectorStopped)),
            "{outcome:?}"
        );
    }

    #[tokio::test]
    async fn no_work_starts_when_shutdown_comes_first() {
        let shutdown = CancellationToken::new();
        shutdown.cancel();
        let (role_tx, role) = watch::channel(Role::Follower);
        let follower = LeaderHandle {
            role,
            stop: CancellationToken::new(),
            task: None,
            _fixed_role: Some(role_tx),
        };
        let outcome = follower
            .run_while_leading(&shutdown, |_working| async {
                panic!("work ran without leadership")
            })
            .await;
        assert!(matches!(outcome, Ok::<(), Error>(())), "{outcome:?}");
    }

    const ME: &str = "replica-me";
    const OTHER: &str = "replica-other";

    /// The injected clock: seconds after a fixed instant.
    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + seconds).expect("valid timestamp")
    }

    fn held_by(holder: Option<&str>, observed_at: i64) -> LeaseState {
        LeaseState::Present(Observation {
            record: LeaseRecord {
                holder: holder.map(str::to_owned),
                lease_duration: Some(Duration::from_secs(15)),
                acquire_time: Some(at(-100)),
                renew_time: Some(at(-100)),
                transitions: 3,
            },
            observed_at: at(observed_at),
        })
    }

    fn state(lease: LeaseState, last_renewed: Option<i64>) -> ElectionState {
        ElectionState {
            lease,
            last_renewed: last_renewed.map(at),
            // Fixed here so the table reads in round numbers whatever the
            // defaults become.
            timing: Timing {
                lease_duration: Duration::from_secs(15),
                renew_deadline: Duration::from_secs(10),
                retry_period: Duration::from_secs(2),
            },
        }
    }

    #[test]
    fn decisions() {
        use Action::*;
        use StepDownReason::*;
        let cases: Vec<(&str, ElectionState, i64, Action)> = vec![
            // Candidate.
            (
                "absent lease is acquired",
                state(LeaseState::Absent, None),
                0,
                Acquire,
            ),
            (
                "released lease is acquired",
                state(held_by(None, 0), None),
                0,
                Acquire,
            ),
            (
                "own lease from before a restart is acquired",
                state(held_by(Some(ME), 0), None),
                0,
                Acquire,
            ),
            (
                "fresh foreign lease is waited for until expiry",
                state(held_by(Some(OTHER), 0), None),
                5,
                Wait { until: at(15) },
            ),
            (
                "foreign lease one second before expiry",
                state(held_by(Some(OTHER), 0), None),
                14,
                Wait { until: at(15) },
            ),
            (
                "foreign lease at expiry is taken",
                state(held_by(Some(OTHER), 0), None),
                15,
                Acquire,
            ),
            (
                "expiry counts from our observation, not the holder's renewTime",
                state(held_by(Some(OTHER), 10), None),
                20,
                Wait { until: at(25) },
            ),
            (
                "unreadable lease is retried",
                state(LeaseState::Unreadable, None),
                0,
                Wait { until: at(2) },
            ),
            // Leader.
            (
                "leader renews when due",
                state(held_by(Some(ME), 0), Some(0)),
                2,
                Renew,
            ),
            (
                "leader waits for the next renewal",
                state(held_by(Some(ME), 0), Some(0)),
                1,
                Wait { until: at(2) },
            ),
            (
                "leader whose renewals fail steps down at the deadline",
                state(held_by(Some(ME), 0), Some(0)),
                10,
                StepDown(RenewDeadlineExceeded),
            ),
            (
                "leader just before the deadline renews",
                state(held_by(Some(ME), 0), Some(0)),
                9,
                Renew,
            ),
            (
                "leader unable to read retries before the deadline",
                state(LeaseState::Unreadable, Some(0)),
                9,
                Wait { until: at(10) },
            ),
            (
                "leader unable to read steps down at the deadline",
                state(LeaseState::Unreadable, Some(0)),
                10,
                StepDown(RenewDeadlineExceeded),
            ),
            (
                "leader whose lease names another steps down",
                state(held_by(Some(OTHER), 1), Some(0)),
                1,
                StepDown(LeaseTaken),
            ),
            (
                "leader whose lease was released by someone else steps down",
                state(held_by(None, 1), Some(0)),
                1,
                StepDown(LeaseTaken),
            ),
            (
                "leader whose lease was deleted steps down",
                state(LeaseState::Absent, Some(0)),
                1,
                StepDown(LeaseDeleted),
            ),
        ];
        for (name, state, now, expected) in cases {
            assert_eq!(decide(&state, at(now), ME), expected, "{name}");
        }
    }

    #[test]
    fn holder_duration_wins_over_ours() {
        let mut lease = held_by(Some(OTHER), 0);
        if let LeaseState::Present(observation) = &mut lease {
            observation.record.lease_duration = Some(Duration::from_secs(60));
        }
        assert_eq!(
            decide(&state(lease.clone(), None), at(30), ME),
            Action::Wait { until: at(60) }
        );
        if let LeaseState::Present(observation) = &mut lease {
            observation.record.lease_duration = None;
        }
        assert_eq!(
            decide(&state(lease, None), at(15), ME),
            Action::Acquire,
            "ours when unstated"
        );
    }

    #[test]
    fn observation_time_moves_only_when_the_record_changes() {
        let record = LeaseRecord {
            holder: Some(OTHER.to_owned()),
            renew_time: Some(at(0)),
            ..LeaseRecord::default()
        };
        let first = observe(None, record.clone(), at(1));
        assert_eq!(first.observed_at, at(1));
        let unchanged = observe(Some(first.clone()), record.clone(), at(5));
        assert_eq!(unchanged.observed_at, at(1));
        let renewed = LeaseRecord {
            renew_time: Some(at(4)),
            ..record
        };
        assert_eq!(observe(Some(unchanged), renewed, at(6)).observed_at, at(6));
    }

    #[test]
    fn empty_holder_reads_as_released() {
        let spec = LeaseSpec {
            holder_identity: Some(String::new()),
            lease_duration_seconds: Some(0),
            ..LeaseSpec::default()
        };
        let record = LeaseRecord::from_spec(Some(&spec));
        assert_eq!(record.holder, None);
        assert_eq!(record.lease_duration, None);
    }

    #[test]
    fn unsafe_timing_is_rejected() {
        let valid = LeaderElectionConfig::new("sample-lease", "sample-namespace", ME);
        assert!(valid.validate().is_ok());
        let cases = [
            LeaderElectionConfig {
                renew_deadline: Duration::from_secs(15),
                ..valid.clone()
            },
            LeaderElectionConfig {
                retry_period: Duration::from_secs(10),
                ..valid.clone()
            },
            LeaderElectionConfig {
                lease_duration: Duration::from_millis(15_500),
                ..valid.clone()
            },
            LeaderElectionConfig {
                identity: " ".to_owned(),
                ..valid.clone()
            },
        ];
        for config in cases {
            let error = config.validate().expect_err("invalid");
            assert_eq!(error.category(), "config", "{error}");
        }
    }

    #[tokio::test]
    async fn disabled_election_always_leads() {
        let mut handle = LeaderHandle::always_leader();
        assert!(handle.is_leader());
        tokio::time::timeout(Duration::from_secs(1), handle.acquired())
            .await
            .expect("immediate")
            .expect("leads");
        let lost = handle.lost();
        tokio::pin!(lost);
        assert!(
            futures::poll!(&mut lost).is_pending(),
            "leadership is never lost while the handle lives"
        );
        handle.release().await.expect("nothing to release");
    }
}
