//! The loop every Kubernetes controller of ours runs. A controller brings its
//! reconcile function, the cache it reads objects from and the stream of
//! objects to look at (its triggers); the loop owns everything around a
//! reconcile, so each controller writes it once, alike:
//!
//! - the reconcile's span, detached from any caller, with its trace id
//!   recorded for the logs, and marked failed with the error's text;
//! - `<component>_reconcile_runs_total`, `_failures_total{category}` and
//!   `_duration_seconds`, labelled by controller;
//! - a log line for each failed reconcile, with its category;
//! - a capped exponential backoff per object over failures in a row,
//!   forgotten after a success ([`retry_delay`]);
//! - shutdown: no new reconcile starts once the token is cancelled, and the
//!   loop returns when those running have finished.
//!
//! Debouncing and the requeue a reconcile asks for are kube-runtime's
//! `applier`, which this wraps.

use std::{
    collections::HashMap,
    convert::Infallible,
    fmt::Debug,
    future::Future,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use futures::{Stream, StreamExt as _, future::BoxFuture};
use kube::{
    Resource,
    runtime::{
        applier,
        controller::{Action, Config},
        reflector::{ObjectRef, Store},
    },
};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument as _, Span};

use crate::metrics::ControllerMetrics;

/// The delay before the first retry of a failing reconcile; it doubles on
/// every further failure in a row.
pub const RETRY_BACKOFF_BASE: Duration = Duration::from_millis(500);

/// The longest delay between retries of a failing reconcile.
pub const RETRY_BACKOFF_CAP: Duration = Duration::from_secs(60);

/// How many objects' failure counts are kept before the counts of objects
/// gone from the cache are dropped (a failing object that is deleted is
/// never reconciled again, so nothing else would forget it).
pub const FAILURE_MEMORY_PRUNE_AT: usize = 1024;

/// An error a reconcile fails with: its category is the `category` label of
/// the failure counter (short, stable, lowercase).
pub trait Categorized {
    /// The kind of failure.
    fn category(&self) -> &'static str;
}

impl Categorized for crate::Error {
    fn category(&self) -> &'static str {
        crate::Error::category(self)
    }
}

/// The delay before retrying an object that failed `failures_in_a_row`
/// times (the first failure is 1): [`RETRY_BACKOFF_BASE`], doubling, at most
/// [`RETRY_BACKOFF_CAP`].
pub fn retry_delay(failures_in_a_row: u32) -> Duration {
    let doublings = failures_in_a_row.saturating_sub(1).min(16);
    RETRY_BACKOFF_BASE
        .saturating_mul(2u32.saturating_pow(doublings))
        .min(RETRY_BACKOFF_CAP)
}

/// Whether a service that watches `watched` reconciles objects of
/// `namespace`: every namespace when the list is empty or has an empty
/// entry (upstream's `--watchedNamespaces=""`), else the ones listed.
pub fn watches(watched: &[String], namespace: &str) -> bool {
    watched.is_empty() || watched.iter().any(|n| n.is_empty() || n == namespace)
}

/// The triggers of objects in the namespaces a service watches
/// ([`watches`]): objects of other namespaces are never reconciled.
pub fn in_watched_namespaces<K>(
    watched: Vec<String>,
    triggers: impl Stream<Item = ObjectRef<K>> + Send + 'static,
) -> impl Stream<Item = ObjectRef<K>> + Send + 'static
where
    K: Resource<DynamicType = ()> + 'static,
{
    triggers.filter(move |object| {
        std::future::ready(watches(
            &watched,
            object.namespace.as_deref().unwrap_or_default(),
        ))
    })
}

/// One controller: its metrics (whose `controller` label names it, and
/// names its span `reconcile_<name>` unless it brings its own span) and how
/// it debounces triggers.
pub struct Controller<K> {
    metrics: ControllerMetrics,
    /// `reconcile_<name>`, made once rather than on every reconcile.
    span_name: String,
    span: Option<fn(&K) -> Span>,
    debounce: Duration,
}

impl<K> Controller<K>
where
    K: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
{
    /// A controller recording its reconciles in `metrics`.
    pub fn new(metrics: ControllerMetrics) -> Self {
        Self {
            span_name: format!("reconcile_{}", metrics.name()),
            metrics,
            span: None,
            debounce: Duration::ZERO,
        }
    }

    /// Gives each reconcile the span `span` makes (a root span: `parent:
    /// None`, with a `trace_id` field left empty for the loop to fill),
    /// instead of the default one.
    pub fn span(mut self, span: fn(&K) -> Span) -> Self {
        self.span = Some(span);
        self
    }

    /// Waits this long after a trigger before reconciling, so a burst of
    /// triggers for one object becomes one reconcile.
    pub fn debounce(mut self, debounce: Duration) -> Self {
        self.debounce = debounce;
        self
    }

    /// Reconciles the objects `triggers` names (when `store` holds them),
    /// and again when a reconcile asks for it or fails, until `shutdown` is
    /// cancelled and the reconciles running then have finished.
    ///
    /// The loop is boxed: its type is deep, and a service joining several
    /// would otherwise exceed the compiler's recursion limit proving it
    /// `Send`.
    pub fn run<C, E, Fut, R>(
        self,
        store: Store<K>,
        triggers: impl Stream<Item = ObjectRef<K>> + Send + 'static,
        context: Arc<C>,
        reconcile: R,
        shutdown: CancellationToken,
    ) -> BoxFuture<'static, ()>
    where
        C: Send + Sync + 'static,
        R: Fn(Arc<K>, Arc<C>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: std::error::Error + Categorized + Send + Sync + 'static,
    {
        let name = self.metrics.name().to_owned();
        let debounce = self.debounce;
        let this = Arc::new(self);
        let failures = Failures::<K>::default();
        let reconciler = {
            let this = this.clone();
            let failures = failures.clone();
            move |object: Arc<K>, context: Arc<C>| {
                let this = this.clone();
                let failures = failures.clone();
                let work = reconcile(object.clone(), context);
                Box::pin(async move { this.observe(&object, work, &failures).await })
            }
        };
        let error_policy = {
            let store = store.clone();
            move |object: Arc<K>, _error: &E, _context: Arc<C>| {
                Action::requeue(failures.failed(ObjectRef::from_obj(object.as_ref()), &store))
            }
        };
        let stream = applier(
            reconciler,
            error_policy,
            context,
            store,
            triggers
                .map(Ok::<_, Infallible>)
                .take_until(shutdown.cancelled_owned()),
            Config::default().debounce(debounce),
        )
        .for_each(move |result| {
            if let Err(error) = result {
                // Not a reconcile failure (those are logged as they happen):
                // an object named by a trigger but not in the cache, or the
                // requeue buffer being full.
                tracing::debug!(controller = name, error = %error, "controller");
            }
            std::future::ready(())
        });
        Box::pin(stream)
    }

    fn span_of(&self, object: &K) -> Span {
        match self.span {
            Some(span) => span(object),
            None => {
                let meta = object.meta();
                tracing::info_span!(
                    parent: None,
                    "reconcile",
                    otel.name = self.span_name.as_str(),
                    controller = self.metrics.name(),
                    k8s.namespace.name = meta.namespace.as_deref().unwrap_or_default(),
                    name = meta.name.as_deref().unwrap_or_default(),
                    trace_id = tracing::field::Empty,
                )
            }
        }
    }

    async fn observe<E>(
        &self,
        object: &K,
        work: impl Future<Output = Result<Action, E>>,
        failures: &Failures<K>,
    ) -> Result<Action, E>
    where
        E: std::error::Error + Categorized + 'static,
    {
        let span = self.span_of(object);
        crate::telemetry::record_trace_id(&span);
        let timer = self.metrics.start();
        let result = work.instrument(span.clone()).await;
        match &result {
            Ok(_) => failures.succeeded(&ObjectRef::from_obj(object)),
            Err(error) => {
                olm_trace::record_error(&span, error);
                let meta = object.meta();
                tracing::info!(
                    parent: &span,
                    controller = self.metrics.name(),
                    namespace = meta.namespace.as_deref().unwrap_or_default(),
                    name = meta.name.as_deref().unwrap_or_default(),
                    category = error.category(),
                    error = error as &dyn std::error::Error,
                    "reconcile did not finish; retrying with backoff"
                );
                timer.failed(error.category());
            }
        }
        result
    }
}

/// Failures in a row per object.
struct Failures<K: Resource<DynamicType = ()>>(Arc<Mutex<HashMap<ObjectRef<K>, u32>>>);

impl<K: Resource<DynamicType = ()>> Clone for Failures<K> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<K: Resource<DynamicType = ()>> Default for Failures<K> {
    fn default() -> Self {
        Self(Arc::default())
    }
}

impl<K> Failures<K>
where
    K: Resource<DynamicType = ()> + Clone,
{
    /// Counts one more failure of `object` and returns the delay before its
    /// retry.
    fn failed(&self, object: ObjectRef<K>, store: &Store<K>) -> Duration {
        let mut failures = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if failures.len() >= FAILURE_MEMORY_PRUNE_AT {
            failures.retain(|object, _| store.get(object).is_some());
        }
        let count = failures.entry(object).or_insert(0);
        *count = count.saturating_add(1);
        retry_delay(*count)
    }

    fn succeeded(&self, object: &ObjectRef<K>) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(object);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_delays_double_from_the_base_to_the_cap() {
        let cases = [
            (0, RETRY_BACKOFF_BASE),
            (1, Duration::from_millis(500)),
            (2, Duration::from_secs(1)),
            (3, Duration::from_secs(2)),
            (7, Duration::from_secs(32)),
            (8, RETRY_BACKOFF_CAP),
            (9, RETRY_BACKOFF_CAP),
            (u32::MAX, RETRY_BACKOFF_CAP),
        ];
        for (failures, wanted) in cases {
            assert_eq!(retry_delay(failures), wanted, "{failures} failures");
        }
    }

    #[test]
    fn watched_namespaces() {
        let list = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
        let cases = [
            (list(&[]), "sample", true),
            (list(&[""]), "sample", true),
            (list(&["sample"]), "sample", true),
            (list(&["sample", "other"]), "other", true),
            (list(&["sample"]), "other", false),
            (list(&["sample"]), "", false),
        ];
        for (watched, namespace, wanted) in cases {
            assert_eq!(
                watches(&watched, namespace),
                wanted,
                "{watched:?} {namespace:?}"
            );
        }
    }

    #[test]
    fn retry_delays_never_shrink() {
        let mut last = Duration::ZERO;
        for failures in 0..100 {
            let delay = retry_delay(failures);
            assert!(delay >= last, "{failures}: {delay:?} < {last:?}");
            last = delay;
        }
    }

    #[test]
    fn failure_counts_of_deleted_objects_are_pruned() {
        use k8s_openapi::api::core::v1::ConfigMap;
        use kube::runtime::{reflector, watcher};
        let (store, mut writer) = reflector::store::<ConfigMap>();
        let kept = ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: Some("kept".to_owned()),
                namespace: Some("sample".to_owned()),
                ..Default::default()
            },
            ..Default::default()
        };
        writer.apply_watcher_event(&watcher::Event::Apply(kept.clone()));
        let failures = Failures::<ConfigMap>::default();
        for index in 0..FAILURE_MEMORY_PRUNE_AT - 1 {
            failures.failed(
                ObjectRef::new(&format!("gone-{index}")).within("sample"),
                &store,
            );
        }
        let kept = ObjectRef::from_obj(&kept);
        assert_eq!(failures.failed(kept.clone(), &store), retry_delay(1));
        assert_eq!(failures.len(), FAILURE_MEMORY_PRUNE_AT);
        // The next failure prunes the objects the cache no longer has; the
        // kept object's count survives.
        assert_eq!(failures.failed(kept.clone(), &store), retry_delay(2));
        assert_eq!(failures.len(), 1);
        failures.succeeded(&kept);
        assert_eq!(failures.len(), 0);
    }

    /// The metrics text of one controller's reconciles, and a handle to
    /// record them.
    fn metrics() -> (prometheus_client::registry::Registry, ControllerMetrics) {
        let mut registry = prometheus_client::registry::Registry::with_prefix("sample");
        let metrics =
            crate::metrics::ReconcileMetrics::register(&mut registry).controller("sample");
        (registry, metrics)
    }

    fn text(registry: &prometheus_client::registry::Registry) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).expect("encodes");
        text
    }

    fn config_map(name: &str) -> k8s_openapi::api::core::v1::ConfigMap {
        k8s_openapi::api::core::v1::ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some("sample".to_owned()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// A cache that has listed `objects`, as a reflector's does once its
    /// first list is in (the loop waits for that).
    fn listed(
        objects: impl IntoIterator<Item = k8s_openapi::api::core::v1::ConfigMap>,
    ) -> (
        Store<k8s_openapi::api::core::v1::ConfigMap>,
        kube::runtime::reflector::store::Writer<k8s_openapi::api::core::v1::ConfigMap>,
    ) {
        use kube::runtime::watcher::Event;
        let (store, mut writer) = kube::runtime::reflector::store();
        writer.apply_watcher_event(&Event::Init);
        for object in objects {
            writer.apply_watcher_event(&Event::InitApply(object));
        }
        writer.apply_watcher_event(&Event::InitDone);
        (store, writer)
    }

    #[derive(Debug, thiserror::Error)]
    #[error("sample conflict")]
    struct Conflict;

    impl Categorized for Conflict {
        fn category(&self) -> &'static str {
            "kube_conflict"
        }
    }

    /// What the loop's reconciles saw.
    #[derive(Default)]
    struct Seen {
        calls: Mutex<Vec<tokio::time::Instant>>,
        /// The calls (counted from 1) that fail.
        failing: Vec<usize>,
    }

    async fn flaky(
        _object: Arc<k8s_openapi::api::core::v1::ConfigMap>,
        seen: Arc<Seen>,
    ) -> Result<Action, Conflict> {
        let mut calls = seen.calls.lock().unwrap_or_else(PoisonError::into_inner);
        calls.push(tokio::time::Instant::now());
        if seen.failing.contains(&calls.len()) {
            Err(Conflict)
        } else {
            Ok(Action::await_change())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn failures_are_retried_with_backoff_counted_and_forgotten() {
        let (store, _writer) = listed([config_map("flaky")]);
        let (registry, metrics) = metrics();
        let (triggers, trigger_rx) = futures::channel::mpsc::unbounded();
        let shutdown = CancellationToken::new();
        let seen = Arc::new(Seen {
            failing: vec![1, 2, 3, 5],
            ..Seen::default()
        });
        let run = tokio::spawn(Controller::new(metrics).run(
            store,
            trigger_rx,
            seen.clone(),
            flaky,
            shutdown.clone(),
        ));
        triggers
            .unbounded_send(ObjectRef::new("flaky").within("sample"))
            .expect("loop running");
        tokio::time::sleep(Duration::from_secs(10)).await;
        let calls = || {
            seen.calls
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
        };
        let first = calls();
        assert_eq!(first.len(), 4, "three failures, then a success");
        let gaps: Vec<Duration> = first.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(
            gaps,
            [retry_delay(1), retry_delay(2), retry_delay(3)],
            "the retries back off"
        );
        let metrics = text(&registry);
        assert!(
            metrics.contains("sample_reconcile_runs_total{controller=\"sample\"} 4"),
            "{metrics}"
        );
        assert!(
            metrics.contains(
                "sample_reconcile_failures_total{controller=\"sample\",category=\"kube_conflict\"} 3"
            ),
            "{metrics}"
        );

        // The success forgot the failures: the next failure is retried
        // after the first delay again.
        triggers
            .unbounded_send(ObjectRef::new("flaky").within("sample"))
            .expect("loop running");
        tokio::time::sleep(Duration::from_secs(10)).await;
        let all = calls();
        assert_eq!(all.len(), 6, "a failure, then a success");
        assert_eq!(all[5] - all[4], retry_delay(1));
        shutdown.cancel();
        run.await.expect("loop ends on shutdown");
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_waits_for_the_running_reconcile_and_starts_no_other() {
        let (store, _writer) = listed([config_map("slow"), config_map("late")]);
        let (_registry, metrics) = metrics();
        let (triggers, trigger_rx) = futures::channel::mpsc::unbounded();
        let shutdown = CancellationToken::new();
        let (started_tx, started) = tokio::sync::oneshot::channel::<()>();
        let started_tx = Arc::new(Mutex::new(Some(started_tx)));
        let reconciled = Arc::new(Mutex::new(Vec::<String>::new()));
        let finished = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let run = tokio::spawn(Controller::new(metrics).run(
            store,
            trigger_rx,
            Arc::new((started_tx, reconciled.clone(), finished.clone())),
            |object: Arc<k8s_openapi::api::core::v1::ConfigMap>, context| async move {
                let (started, reconciled, finished) = context.as_ref();
                reconciled
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(object.metadata.name.clone().unwrap_or_default());
                if let Some(started) = started
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take()
                {
                    let _ = started.send(());
                }
                tokio::time::sleep(Duration::from_secs(30)).await;
                finished.store(true, std::sync::atomic::Ordering::SeqCst);
                Ok::<_, Conflict>(Action::await_change())
            },
            shutdown.clone(),
        ));
        triggers
            .unbounded_send(ObjectRef::new("slow").within("sample"))
            .expect("loop running");
        started.await.expect("reconcile started");
        shutdown.cancel();
        // A trigger after shutdown, while the first reconcile still runs.
        triggers
            .unbounded_send(ObjectRef::new("late").within("sample"))
            .expect("loop still running");
        run.await.expect("loop ends");
        assert!(
            finished.load(std::sync::atomic::Ordering::SeqCst),
            "the loop returned before its reconcile finished"
        );
        assert_eq!(
            *reconciled.lock().unwrap_or_else(PoisonError::into_inner),
            ["slow"],
            "no reconcile starts after shutdown"
        );
    }
}
