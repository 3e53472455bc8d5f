//! Leader election between real electors on a real Lease: hand-over on
//! release and on expiry, and no two leaders under contention.

use std::time::{Duration, Instant};

use futures::{StreamExt as _, future::select_all};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube::{
    Api,
    api::{ObjectMeta, PostParams},
    runtime::{WatchStreamExt as _, watcher},
};
use olm_runtime::{
    config::{DEFAULT_LEASE_DURATION, DEFAULT_RETRY_PERIOD, MAX_CRASH_HAND_OVER},
    leader::{LeaderElectionConfig, LeaderHandle, Role},
};
use tokio::sync::watch;

use crate::{init_logs, within};

const LEASE: &str = "sample-operator-lease";

/// Bound on anything that should happen within a couple of API round trips.
const PROMPTLY: Duration = Duration::from_secs(10);

fn config(namespace: &str, identity: &str) -> LeaderElectionConfig {
    LeaderElectionConfig::new(LEASE, namespace, identity)
}

async fn holder(leases: &Api<Lease>) -> (Option<String>, i32) {
    let lease = leases.get(LEASE).await.expect("lease exists");
    let spec = lease.spec.unwrap_or_default();
    (
        spec.holder_identity.filter(|holder| !holder.is_empty()),
        spec.lease_transitions.unwrap_or_default(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standby_takes_over_at_once_when_the_leader_releases() {
    init_logs();
    let plane = olm_testkit::control_plane();
    let namespace = plane.namespace("leader-release").await;
    let client = plane.client().await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), namespace.name());

    let mut first = LeaderHandle::spawn(client.clone(), config(namespace.name(), "replica-first"))
        .expect("valid config");
    within(
        PROMPTLY,
        "first replica acquires the absent lease",
        first.acquired(),
    )
    .await
    .expect("elector running");
    let mut second =
        LeaderHandle::spawn(client.clone(), config(namespace.name(), "replica-second"))
            .expect("valid config");
    // The standby must not lead while the leader renews: watch it for a few
    // renewal periods.
    assert!(
        tokio::time::timeout(DEFAULT_RETRY_PERIOD * 2, second.acquired())
            .await
            .is_err(),
        "the standby acquired a lease that is being renewed"
    );
    assert!(first.is_leader());
    assert_eq!(holder(&leases).await, (Some("replica-first".to_owned()), 0));

    let released = Instant::now();
    within(PROMPTLY, "leader releases", first.release())
        .await
        .expect("release succeeds");
    within(
        PROMPTLY,
        "standby takes over after the release",
        second.acquired(),
    )
    .await
    .expect("elector running");
    let hand_over = released.elapsed();
    println!("hand-over on release: {hand_over:?}");
    assert!(
        hand_over < Duration::from_secs(3),
        "hand-over on release took {hand_over:?}"
    );
    assert_eq!(
        holder(&leases).await,
        (Some("replica-second".to_owned()), 1)
    );
    within(PROMPTLY, "second leader releases", second.release())
        .await
        .expect("release succeeds");
    assert_eq!(holder(&leases).await.0, None, "released lease names nobody");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standby_takes_over_after_expiry_when_the_leader_dies() {
    init_logs();
    let plane = olm_testkit::control_plane();
    let namespace = plane.namespace("leader-expiry").await;
    let client = plane.client().await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), namespace.name());

    let mut doomed =
        LeaderHandle::spawn(client.clone(), config(namespace.name(), "replica-doomed"))
            .expect("valid config");
    within(PROMPTLY, "first replica acquires", doomed.acquired())
        .await
        .expect("elector running");
    let mut survivor =
        LeaderHandle::spawn(client.clone(), config(namespace.name(), "replica-survivor"))
            .expect("valid config");
    // Let the survivor see at least one renewal, as a real standby would have.
    let mut changes = survivor.subscribe();
    assert!(
        tokio::time::timeout(DEFAULT_RETRY_PERIOD * 2, changes.changed())
            .await
            .is_err(),
        "the standby changed role while the leader renews"
    );

    // Dropping the handle kills the elector without releasing, like a crash.
    let killed = Instant::now();
    drop(doomed);
    within(
        DEFAULT_LEASE_DURATION + Duration::from_secs(10),
        "standby takes over after expiry",
        survivor.acquired(),
    )
    .await
    .expect("elector running");
    let hand_over = killed.elapsed();
    println!("hand-over on expiry: {hand_over:?}");
    // The leader renewed at most one retry period before it died, and the
    // standby counts the lease duration from when it saw that renewal.
    let earliest = DEFAULT_LEASE_DURATION - DEFAULT_RETRY_PERIOD - Duration::from_secs(1);
    assert!(
        hand_over >= earliest,
        "took over after {hand_over:?}, before the lease expired"
    );
    assert!(
        hand_over <= DEFAULT_LEASE_DURATION + DEFAULT_RETRY_PERIOD,
        "hand-over on expiry took {hand_over:?}"
    );
    assert!(
        hand_over < MAX_CRASH_HAND_OVER,
        "hand-over on expiry took {hand_over:?}, over the {MAX_CRASH_HAND_OVER:?} promise"
    );
    assert_eq!(
        holder(&leases).await,
        (Some("replica-survivor".to_owned()), 1)
    );
    within(PROMPTLY, "survivor releases", survivor.release())
        .await
        .expect("release succeeds");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_steps_down_when_its_lease_is_taken() {
    init_logs();
    let plane = olm_testkit::control_plane();
    let namespace = plane.namespace("leader-taken").await;
    let client = plane.client().await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), namespace.name());

    let mut leader =
        LeaderHandle::spawn(client.clone(), config(namespace.name(), "replica-robbed"))
            .expect("valid config");
    within(PROMPTLY, "replica acquires", leader.acquired())
        .await
        .expect("elector running");
    let lost = leader.lost();

    take_lease(&leases, "intruder").await;

    within(PROMPTLY, "leader notices the lease was taken", lost).await;
    assert!(!leader.is_leader());
    within(PROMPTLY, "follower stops", leader.release())
        .await
        .expect("nothing to release");
    assert_eq!(
        holder(&leases).await.0.as_deref(),
        Some("intruder"),
        "a follower never releases a lease it does not hold"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_run_while_leading_stops_when_the_lease_is_taken() {
    init_logs();
    let plane = olm_testkit::control_plane();
    let namespace = plane.namespace("leader-work").await;
    let client = plane.client().await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), namespace.name());
    let shutdown = tokio_util::sync::CancellationToken::new();

    let leader = LeaderHandle::spawn(client.clone(), config(namespace.name(), "replica-working"))
        .expect("valid config");
    let (started_tx, started) = tokio::sync::oneshot::channel();
    let (stopped_tx, stopped) = tokio::sync::oneshot::channel();
    let run = tokio::spawn({
        let shutdown = shutdown.clone();
        async move {
            leader
                .run_while_leading(&shutdown, |working| async move {
                    let _ = started_tx.send(());
                    working.cancelled().await;
                    let _ = stopped_tx.send(());
                    Ok::<(), olm_runtime::Error>(())
                })
                .await
        }
    });
    within(PROMPTLY, "work starts once leading", started)
        .await
        .expect("work started");

    take_lease(&leases, "intruder").await;

    within(PROMPTLY, "work is told to stop", stopped)
        .await
        .expect("work stopped");
    let outcome = within(PROMPTLY, "run_while_leading returns", run)
        .await
        .expect("task finished");
    assert!(
        matches!(outcome, Err(olm_runtime::Error::LeadershipLost)),
        "{outcome:?}"
    );
    assert!(!shutdown.is_cancelled());
    assert_eq!(holder(&leases).await.0.as_deref(), Some("intruder"));
}

/// Another party rewrites the lease (at its current resourceVersion) to
/// hold it for an hour.
async fn take_lease(leases: &Api<Lease>, holder: &str) {
    let mut lease = leases.get(LEASE).await.expect("lease exists");
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    spec.holder_identity = Some(holder.to_owned());
    spec.lease_duration_seconds = Some(3600);
    leases
        .replace(LEASE, &PostParams::default(), &lease)
        .await
        .expect("the lease is taken");
}

/// A lease's holder and transition count.
type HolderEntry = (Option<String>, i32);

/// Follows every holder change of the lease, with its transition count.
fn record_holders(
    leases: Api<Lease>,
) -> (
    watch::Receiver<Vec<HolderEntry>>,
    tokio::task::JoinHandle<()>,
) {
    let (record, seen) = watch::channel(Vec::new());
    let task = tokio::spawn(async move {
        let config = watcher::Config::default().fields(&format!("metadata.name={LEASE}"));
        let mut leases =
            std::pin::pin!(watcher(leases, config).default_backoff().applied_objects());
        while let Some(Ok(lease)) = leases.next().await {
            let spec = lease.spec.unwrap_or_default();
            let entry = (
                spec.holder_identity.filter(|holder| !holder.is_empty()),
                spec.lease_transitions.unwrap_or_default(),
            );
            record.send_if_modified(|seen| {
                let new = seen.last() != Some(&entry);
                if new {
                    seen.push(entry);
                }
                new
            });
        }
    });
    (seen, task)
}

/// Waits for any role change among the running candidates and returns the
/// indexes of those that lead right after it.
async fn next_change(roles: &mut [(usize, watch::Receiver<Role>)]) -> Vec<usize> {
    let changes = roles.iter_mut().map(|(_, role)| Box::pin(role.changed()));
    let (changed, _, _) = select_all(changes).await;
    changed.expect("elector running");
    roles
        .iter()
        .filter(|(_, role)| *role.borrow() == Role::Leader)
        .map(|(index, _)| *index)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contending_candidates_never_lead_together() {
    init_logs();
    let plane = olm_testkit::control_plane();
    let namespace = plane.namespace("leader-contention").await;
    let client = plane.client().await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), namespace.name());

    // A lease held by a replica that is gone, expiring one second after the
    // candidates first see it: they all try to take it over at once, from the
    // same resourceVersion.
    let ghost = Lease {
        metadata: ObjectMeta {
            name: Some(LEASE.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("replica-ghost".to_owned()),
            lease_duration_seconds: Some(1),
            lease_transitions: Some(0),
            ..LeaseSpec::default()
        }),
    };
    leases
        .create(&PostParams::default(), &ghost)
        .await
        .expect("ghost lease created");
    let (mut holders, watch_task) = record_holders(leases.clone());
    within(
        PROMPTLY,
        "the lease watch sees the ghost",
        holders.wait_for(|history| !history.is_empty()),
    )
    .await
    .expect("lease watch running");

    let names = ["replica-alpha", "replica-beta", "replica-gamma"];
    let mut candidates: Vec<Option<LeaderHandle>> = names
        .iter()
        .map(|name| {
            Some(
                LeaderHandle::spawn(client.clone(), config(namespace.name(), name))
                    .expect("valid config"),
            )
        })
        .collect();
    let mut roles: Vec<(usize, watch::Receiver<Role>)> = candidates
        .iter()
        .enumerate()
        .map(|(index, candidate)| (index, candidate.as_ref().expect("running").subscribe()))
        .collect();

    let mut leaders_in_turn = Vec::new();
    for round in 0..names.len() {
        // Wait until someone leads, checking after every role change that
        // nobody else does.
        let leader = within(PROMPTLY, "a candidate leads", async {
            loop {
                let leading = next_change(&mut roles).await;
                assert!(
                    leading.len() <= 1,
                    "{leading:?} lead at once in round {round}"
                );
                if let [leader] = leading[..] {
                    break leader;
                }
            }
        })
        .await;
        // The losers keep campaigning; over a few renewal periods none of them
        // may lead while the winner does.
        let quiet = tokio::time::timeout(DEFAULT_RETRY_PERIOD * 2, async {
            loop {
                let leading = next_change(&mut roles).await;
                assert!(
                    leading.len() <= 1,
                    "{leading:?} lead at once in round {round}"
                );
            }
        })
        .await;
        assert!(quiet.is_err(), "roles changed while the winner led");
        leaders_in_turn.push(names[leader]);
        roles.retain(|(index, _)| *index != leader);
        let winner = candidates[leader]
            .take()
            .expect("the winner is still running");
        within(PROMPTLY, "winner releases", winner.release())
            .await
            .expect("release succeeds");
    }

    let mut expected = names.to_vec();
    let mut actual = leaders_in_turn.clone();
    expected.sort_unstable();
    actual.sort_unstable();
    assert_eq!(actual, expected, "every candidate led exactly once");

    // The lease itself tells the same story: one holder at a time, each change
    // counted as a transition.
    let history = within(
        PROMPTLY,
        "the lease watch sees the last release",
        holders.wait_for(|history| history.last() == Some(&(None, 3))),
    )
    .await
    .expect("lease watch running")
    .clone();
    watch_task.abort();
    let holders_only: Vec<Option<&str>> = history
        .iter()
        .map(|(holder, _)| holder.as_deref())
        .collect();
    let mut expected_holders = vec![Some("replica-ghost")];
    for name in &leaders_in_turn {
        expected_holders.push(Some(*name));
        expected_holders.push(None);
    }
    assert_eq!(holders_only, expected_holders, "holder history {history:?}");
    let transitions: Vec<i32> = history
        .iter()
        .map(|(_, transitions)| *transitions)
        .collect();
    assert_eq!(
        transitions,
        [0, 1, 1, 2, 2, 3, 3],
        "holder history {history:?}"
    );
}
