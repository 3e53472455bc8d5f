//! The service wiring: caches, the work-queue consumer, the InstallPlan
//! watch, and the [`unpack::Worker`] both feed. Only this module touches a
//! client.
//!
//! Every replica consumes the bus work queue (JetStream hands each request
//! to one of them). The InstallPlan watch runs where `watch_enabled` says
//! (the leader, with leader election) and, while the bus is connected,
//! steps in only [`UnpackerConfig::watch_grace`] after catalog-operator
//! stated the need, so replicas do not race the queue; without a bus it
//! acts at once. A replica never works twice at once on the same image, and
//! the ConfigMap is created (never overwritten), so a race between replicas
//! costs one extra pull at most, counted as `duplicate`.

pub mod unpack;

use std::{collections::BTreeSet, sync::Arc, time::Duration};

use futures::{StreamExt, channel::mpsc};
use kube::{
    Api, Client, ResourceExt,
    runtime::{WatchStreamExt, controller::Action, reflector::ObjectRef, watcher},
};
use olm_api::{
    catalog_source::CatalogSource, install_plan::InstallPlan, operator_group::OperatorGroup,
};
use olm_bus::{Bus, ConnectionState, WorkItem, WorkQueueOptions, events::BundleUnpackRequest};
use olm_runtime::{
    admin::Readiness,
    cache,
    controller::{Controller, in_watched_namespaces},
};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::{
    decide::{
        lookups::{UnpackJob, pending_lookups, watch_due},
        registries::RegistryRule,
    },
    metrics::UnpackMetrics,
};
use olm_api::unpack_policy::DEFAULT_UNPACK_TIMEOUT;
use unpack::{Progress, Worker};

/// Default number of images pulled at once by one replica.
pub const DEFAULT_CONCURRENCY: usize = 4;
/// Default time the watch leaves the work queue before it steps in.
pub const DEFAULT_WATCH_GRACE: Duration = Duration::from_secs(15);
/// Default time after which every InstallPlan is looked at again.
pub const DEFAULT_RESYNC: Duration = Duration::from_secs(5 * 60);
/// How often a lookup whose CatalogSource is missing is looked at again.
pub const CATALOG_MISSING_RECHECK: Duration = Duration::from_secs(10);
/// How often a lookup whose image another task of this replica is working
/// on is looked at again.
pub const BUSY_RECHECK: Duration = Duration::from_secs(5);
/// The durable name of the work-queue consumer every replica shares.
pub const DEFAULT_QUEUE_CONSUMER: &str = "bundle-unpacker";
/// How often a long unpack tells JetStream it is still working.
pub const QUEUE_PROGRESS_INTERVAL: Duration = Duration::from_secs(20);
/// How long a request that cannot be handled now waits to be delivered
/// again.
pub const QUEUE_REDELIVERY_DELAY: Duration = Duration::from_secs(2);

const CACHE_POLL: Duration = Duration::from_millis(50);

/// How the service runs.
#[derive(Clone, Debug)]
pub struct UnpackerConfig {
    /// Namespaces whose InstallPlans are served; empty means all.
    pub watched_namespaces: Vec<String>,
    /// Images pulled at once.
    pub concurrency: usize,
    /// The unpack deadline when the OperatorGroup does not set one.
    pub default_timeout: Option<Duration>,
    /// Registries reached over plain HTTP (`host[:port]`).
    pub insecure_registries: BTreeSet<String>,
    /// The allowed-registries policy; empty allows every registry.
    pub allowed_registries: Vec<RegistryRule>,
    /// Whether the policy also covers the operator images a bundle names.
    pub check_operator_images: bool,
    /// How long the watch leaves a need to the work queue.
    pub watch_grace: Duration,
    /// How often every InstallPlan is looked at again.
    pub resync: Duration,
    /// The durable name of the shared work-queue consumer.
    pub queue_consumer: String,
}

impl Default for UnpackerConfig {
    fn default() -> Self {
        Self {
            watched_namespaces: Vec::new(),
            concurrency: DEFAULT_CONCURRENCY,
            default_timeout: Some(DEFAULT_UNPACK_TIMEOUT),
            insecure_registries: BTreeSet::new(),
            allowed_registries: Vec::new(),
            check_operator_images: false,
            watch_grace: DEFAULT_WATCH_GRACE,
            resync: DEFAULT_RESYNC,
            queue_consumer: DEFAULT_QUEUE_CONSUMER.to_owned(),
        }
    }
}

impl UnpackerConfig {
    /// Whether InstallPlans of `namespace` are served.
    pub fn watches(&self, namespace: &str) -> bool {
        olm_runtime::controller::watches(&self.watched_namespaces, namespace)
    }
}

struct Context {
    worker: Arc<Worker>,
    watch_enabled: watch::Receiver<bool>,
}

/// Runs the service until `shutdown` is cancelled: caches (readiness gates
/// `cache:<Kind>`), the work-queue consumer, and the InstallPlan watch while
/// `watch_enabled` holds `true`.
pub async fn run(
    client: Client,
    config: UnpackerConfig,
    metrics: UnpackMetrics,
    bus: Bus,
    readiness: Readiness,
    watch_enabled: watch::Receiver<bool>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let (plan_tx, plan_rx) = mpsc::unbounded::<ObjectRef<InstallPlan>>();
    let catalogs = cache::reflect(
        Api::<CatalogSource>::all(client.clone()),
        watcher::Config::default(),
        readiness.gate("cache:CatalogSource"),
        |_: &CatalogSource, _| {},
    );
    let operator_groups = cache::reflect(
        Api::<OperatorGroup>::all(client.clone()),
        watcher::Config::default(),
        readiness.gate("cache:OperatorGroup"),
        |_: &OperatorGroup, _| {},
    );
    let install_plans = {
        let tx = plan_tx.clone();
        // The steps (with their manifests) are the bulk of a plan and are
        // never read here: they are not kept.
        let stream = watcher(
            Api::<InstallPlan>::all(client.clone()),
            watcher::Config::default(),
        )
        .default_backoff()
        .modify(|plan: &mut InstallPlan| {
            cache::strip_managed_fields(plan);
            if let Some(status) = plan.status.as_mut() {
                status.plan.clear();
            }
        });
        cache::reflect_stream(
            stream,
            readiness.gate("cache:InstallPlan"),
            move |plan: &InstallPlan, change| {
                if change == cache::Change::Applied {
                    let _ = tx.unbounded_send(ObjectRef::from_obj(plan));
                }
            },
        )
    };
    let worker = Arc::new(Worker::new(
        client.clone(),
        config.clone(),
        catalogs.store.clone(),
        operator_groups.store.clone(),
        metrics,
        bus.clone(),
    ));
    let context = Arc::new(Context {
        worker: worker.clone(),
        watch_enabled,
    });
    let plans = install_plans.store.clone();
    let reflectors =
        futures::future::join_all([catalogs.task, operator_groups.task, install_plans.task]);

    let services = {
        let readiness = readiness.clone();
        let shutdown = shutdown.clone();
        async move {
            let warm = async {
                while !readiness.is_ready() {
                    tokio::time::sleep(CACHE_POLL).await;
                }
            };
            tokio::select! {
                () = warm => {}
                () = shutdown.cancelled() => return,
            }
            tracing::info!("caches warm; taking work");
            for plan in plans.state() {
                let _ = plan_tx.unbounded_send(ObjectRef::from_obj(plan.as_ref()));
            }
            // On gaining leadership, look at every plan at once rather than
            // at their next resync.
            let leadership = {
                let mut enabled = context.watch_enabled.clone();
                let plans = plans.clone();
                let tx = plan_tx.clone();
                let shutdown = shutdown.clone();
                async move {
                    loop {
                        tokio::select! {
                            changed = enabled.changed() => if changed.is_err() { return },
                            () = shutdown.cancelled() => return,
                        }
                        if *enabled.borrow_and_update() {
                            for plan in plans.state() {
                                let _ = tx.unbounded_send(ObjectRef::from_obj(plan.as_ref()));
                            }
                        }
                    }
                }
            };
            let watch_loop = Controller::new(worker.metrics.watch_reconciles.clone()).run(
                plans.clone(),
                in_watched_namespaces(config.watched_namespaces.clone(), plan_rx),
                context.clone(),
                reconcile,
                shutdown.clone(),
            );
            let queue_loop = consume_queue(worker, shutdown.clone());
            futures::join!(watch_loop, queue_loop, leadership);
        }
    };
    tokio::select! {
        () = services => {}
        _ = reflectors => {}
    }
    Ok(())
}

/// The watch: unpacks what a plan's pending lookups need.
async fn reconcile(plan: Arc<InstallPlan>, context: Arc<Context>) -> Result<Action, unpack::Error> {
    let worker = &context.worker;
    let resync = worker.config.resync;
    if !*context.watch_enabled.borrow() {
        return Ok(Action::requeue(resync));
    }
    let bus_connected = worker.bus.connection_state() == ConnectionState::Connected;
    let now = jiff::Timestamp::now();
    let mut next = resync;
    let mut due_jobs: Vec<UnpackJob> = Vec::new();
    for lookup in pending_lookups(&plan) {
        match watch_due(lookup.since, bus_connected, worker.config.watch_grace, now) {
            Ok(()) => due_jobs.push(lookup.job),
            Err(at) => next = next.min(until(at, now)),
        }
    }
    due_jobs.sort();
    due_jobs.dedup();
    if due_jobs.is_empty() {
        return Ok(Action::requeue(next));
    }
    // Work found through the watch joins the plan's trace, as work that
    // came over the bus does through the message's headers.
    let span = tracing::info_span!(
        parent: None,
        "unpack_lookups",
        k8s.namespace.name = plan.metadata.namespace.as_deref().unwrap_or_default(),
        olm.installplan = %plan.name_any(),
        source = "watch",
    );
    olm_trace::follow(
        &span,
        Some(plan.annotations()),
        olm_trace::Handoff::Continue,
    );
    let results = tracing::Instrument::instrument(
        futures::future::join_all(due_jobs.iter().map(|job| worker.process(job, "watch"))),
        span,
    )
    .await;
    for result in results {
        match result? {
            Progress::Done | Progress::Stored { .. } => {}
            Progress::Busy => next = next.min(BUSY_RECHECK),
            Progress::CatalogMissing => next = next.min(CATALOG_MISSING_RECHECK),
            Progress::WaitUntil(at) => next = next.min(until(at, jiff::Timestamp::now())),
        }
    }
    Ok(Action::requeue(next))
}

fn until(at: jiff::Timestamp, now: jiff::Timestamp) -> Duration {
    // A little past the due time, so the next look finds it due.
    Duration::try_from(at.duration_since(now)).unwrap_or(Duration::ZERO)
        + Duration::from_millis(100)
}

/// The work-queue consumer: every request is handled on its own task
/// (pulls are bounded by the worker), acknowledged when a result is stored
/// or nothing is needed, and redelivered when it could not be handled.
async fn consume_queue(worker: Arc<Worker>, shutdown: CancellationToken) {
    if !worker.bus.is_enabled() {
        return;
    }
    let options = WorkQueueOptions {
        batch: worker.config.concurrency.max(1),
        ..WorkQueueOptions::new(worker.config.queue_consumer.clone())
    };
    let mut queue = worker.bus.work_queue::<BundleUnpackRequest>(options);
    loop {
        let item = tokio::select! {
            () = shutdown.cancelled() => return,
            item = queue.next() => item,
        };
        let Some(item) = item else { return };
        let Ok(item) = item else { continue };
        let worker = worker.clone();
        tokio::spawn(async move {
            let span = item.span().clone();
            tracing::Instrument::instrument(handle_request(&worker, &item), span).await;
        });
    }
}

async fn handle_request(worker: &Worker, item: &WorkItem<BundleUnpackRequest>) {
    let request = item.event();
    let Some(job) = job_of(request) else {
        tracing::warn!(
            ?request,
            "unpack request without a bundle or catalog; dropped"
        );
        let _ = item.term().await;
        return;
    };
    if !worker.config.watches(&job.plan_namespace) {
        // Another deployment, scoped to that namespace, may take it.
        let _ = item.nak(Some(QUEUE_REDELIVERY_DELAY)).await;
        return;
    }
    // The bus is a hint: only an InstallPlan that still waits for this
    // bundle from this catalog makes it work. Read uncached, since the
    // request may outrun the watch that would bring the plan.
    let plans: kube::Api<InstallPlan> =
        kube::Api::namespaced(worker.client.clone(), &job.plan_namespace);
    let plan = if job.plan_name.is_empty() {
        None
    } else {
        match plans.get_opt(&job.plan_name).await {
            Ok(plan) => plan,
            Err(error) => {
                tracing::warn!(error = %error, "reading the InstallPlan of an unpack request; redelivering");
                let _ = item.nak(Some(QUEUE_REDELIVERY_DELAY)).await;
                return;
            }
        }
    };
    if let Err(unbacked) = crate::decide::lookups::check_request(&job, plan.as_ref()) {
        tracing::warn!(image = job.bundle_path, reason = %unbacked, "unpack request not backed by an InstallPlan; dropped");
        worker.metrics.refused();
        let _ = item.term().await;
        return;
    }
    if request.is_past_deadline(std::time::SystemTime::now()) {
        // Stale: the InstallPlan still says what is needed, and the watch
        // acts on it.
        let _ = item.term().await;
        return;
    }
    // Long pulls tell JetStream the request is still being worked on.
    let work = worker.process(&job, "queue");
    tokio::pin!(work);
    let mut ticker = tokio::time::interval_at(
        tokio::time::Instant::now() + QUEUE_PROGRESS_INTERVAL,
        QUEUE_PROGRESS_INTERVAL,
    );
    let result = loop {
        tokio::select! {
            result = &mut work => break result,
            _ = ticker.tick() => {
                let _ = item.in_progress().await;
            }
        }
    };
    match result {
        Ok(Progress::CatalogMissing) => {
            let _ = item.nak(Some(CATALOG_MISSING_RECHECK)).await;
        }
        Ok(_) => {
            let _ = item.ack().await;
        }
        Err(error) => {
            tracing::warn!(image = job.bundle_path, error = %error, "unpack request failed; redelivering");
            let _ = item.nak(Some(QUEUE_REDELIVERY_DELAY)).await;
        }
    }
}

/// The job a work request describes.
pub fn job_of(request: &BundleUnpackRequest) -> Option<UnpackJob> {
    let catalog = request.catalog.as_ref()?;
    let plan = request.install_plan.as_ref();
    let bundle_path = request.bundle_path.trim();
    if bundle_path.is_empty() || catalog.name.is_empty() {
        return None;
    }
    let plan_namespace = plan.map(|p| p.namespace.clone()).unwrap_or_default();
    Some(UnpackJob {
        bundle_path: bundle_path.to_owned(),
        bundle_name: request.bundle_name.clone(),
        catalog_namespace: if catalog.namespace.is_empty() {
            plan_namespace.clone()
        } else {
            catalog.namespace.clone()
        },
        catalog_name: catalog.name.clone(),
        plan_name: plan.map(|p| p.name.clone()).unwrap_or_default(),
        plan_namespace,
    })
}

#[cfg(test)]
mod tests {
    use olm_bus::events::ObjectRef as BusRef;

    use super::*;

    fn request(path: &str, catalog: Option<(&str, &str)>) -> BundleUnpackRequest {
        BundleUnpackRequest {
            bundle_path: path.to_owned(),
            bundle_name: "widget.v1".to_owned(),
            catalog: catalog.map(|(ns, name)| {
                BusRef::new("operators.coreos.com/v1alpha1", "CatalogSource", ns, name)
            }),
            install_plan: Some(BusRef::new(
                "operators.coreos.com/v1alpha1",
                "InstallPlan",
                "team-a",
                "install-x",
            )),
            ..BundleUnpackRequest::default()
        }
    }

    #[test]
    fn requests_become_jobs_or_are_refused() {
        let job = job_of(&request(" r.fixture/b:1 ", Some(("catalogs", "cat")))).unwrap();
        assert_eq!(job.bundle_path, "r.fixture/b:1");
        assert_eq!(
            (job.catalog_namespace.as_str(), job.catalog_name.as_str()),
            ("catalogs", "cat")
        );
        assert_eq!(
            (job.plan_namespace.as_str(), job.plan_name.as_str()),
            ("team-a", "install-x")
        );
        // A catalog without a namespace is in the plan's namespace.
        assert_eq!(
            job_of(&request("r/b:1", Some(("", "cat"))))
                .unwrap()
                .catalog_namespace,
            "team-a"
        );
        assert_eq!(job_of(&request("", Some(("catalogs", "cat")))), None);
        assert_eq!(job_of(&request("r/b:1", Some(("catalogs", "")))), None);
        assert_eq!(job_of(&request("r/b:1", None)), None);
        assert_eq!(job_of(&BundleUnpackRequest::default()), None);
    }

    #[test]
    fn watched_namespaces_filter() {
        let all = UnpackerConfig::default();
        assert!(all.watches("anything"));
        let some = UnpackerConfig {
            watched_namespaces: vec!["a".into()],
            ..UnpackerConfig::default()
        };
        assert!(some.watches("a"));
        assert!(!some.watches("b"));
    }
}
