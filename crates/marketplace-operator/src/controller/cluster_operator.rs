//! The ClusterOperator status writer: it watches the OLM Deployments
//! (`app.kubernetes.io/part-of=olm`) of the OLM namespace and reports
//! marketplace and each OLM component as [`crate::decide::cluster_operator`]
//! says: in its ClusterOperator where the cluster serves
//! `clusteroperators.config.openshift.io` (OpenShift), and elsewhere in the
//! OperatorHub's `status.components` (ours).
//!
//! ClusterOperator is read and written as a dynamic object: we do not ship
//! its CRD, OpenShift does. `status.components` is applied by a field
//! manager of its own, so that the applies of `status.sources` (which leave
//! it out) do not remove it; an older OperatorHub CRD without the field
//! prunes it, which costs a rewrite at each wake and nothing else.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;
use kube::{
    Api, Client, ResourceExt as _,
    runtime::{reflector::Store, watcher},
};
use olm_api::operator_hub::{HubComponentStatus, OperatorHub, OperatorHubStatus};
use olm_runtime::{
    admin::Readiness,
    apply::{FieldManager, write_status},
    cache::reflect,
    cluster_operator::{ClusterOperators, GROUP, PLURAL},
};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use olm_runtime::{cache::wake_on_change as wake, retry::backoff};

use super::{Error, FIELD_MANAGER};
use crate::decide::cluster_operator::{
    ClusterOperatorStatus, Component, DeploymentObservation, Observed, PART_OF_SELECTOR,
    ReconcileHealth, VERSION_LABEL, cluster_operator_statuses,
};

/// How often the ClusterOperators are written again without a change, so
/// that an edit by someone else is put back.
const RESYNC: Duration = Duration::from_secs(5 * 60);

/// How soon the report is tried again while the OperatorHub it reports into
/// is not there yet (the OperatorHub reconcile creates it).
const HUB_ABSENT_RETRY: Duration = Duration::from_secs(2);

/// How a report went, when it did not fail.
enum Reported {
    Done,
    NoOperatorHubYet,
}

/// The field manager of `status.components` on the OperatorHub.
const COMPONENTS_FIELD_MANAGER: FieldManager = FieldManager::new("marketplace-operator-components");

/// Reports the components until `shutdown`, while `leading` holds `true`:
/// into ClusterOperators where the API exists, else into the OperatorHub
/// `hub_name`.
pub(super) async fn run(
    client: Client,
    olm_namespace: String,
    hub_name: String,
    mut health: watch::Receiver<ReconcileHealth>,
    readiness: Readiness,
    mut leading: watch::Receiver<bool>,
    shutdown: CancellationToken,
) {
    let sink = match discover_until_answered(&client, &shutdown).await {
        Answer::Served(operators) => {
            tracing::info!(namespace = %olm_namespace, "reporting OLM in ClusterOperators");
            Sink::ClusterOperators(*operators)
        }
        Answer::NotServed => {
            tracing::info!(
                namespace = %olm_namespace,
                operatorhub = %hub_name,
                "no {PLURAL}.{GROUP} API in this cluster; reporting OLM in the OperatorHub's status.components"
            );
            Sink::OperatorHub {
                hubs: Api::all(client.clone()),
                name: hub_name,
            }
        }
        Answer::ShuttingDown => return,
    };
    let changed = Arc::new(Notify::new());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &olm_namespace);
    let cache = reflect(
        deployments,
        watcher::Config::default().labels(PART_OF_SELECTOR),
        readiness.gate("cache:Deployment"),
        wake(&changed),
    );
    let watch = tokio::spawn(cache.task);
    let reporter = Reporter {
        sink,
        store: cache.store,
    };
    tokio::select! {
        () = shutdown.cancelled() => {}
        ready = reporter.store.wait_until_ready() => if ready.is_ok() {
            reporter.serve(&changed, &mut health, &mut leading, &shutdown).await;
        },
    }
    watch.abort();
}

/// What discovery said of the ClusterOperator API.
enum Answer {
    Served(Box<ClusterOperators>),
    NotServed,
    ShuttingDown,
}

/// Asks discovery for ClusterOperator until it answers, yes or no.
async fn discover_until_answered(client: &Client, shutdown: &CancellationToken) -> Answer {
    let mut failures = 0u32;
    loop {
        match ClusterOperators::discover(client, FIELD_MANAGER).await {
            Ok(Some(operators)) => return Answer::Served(Box::new(operators)),
            Ok(None) => return Answer::NotServed,
            Err(error) => {
                failures = failures.saturating_add(1);
                tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    "discovery of the ClusterOperator API failed; retrying with backoff"
                );
            }
        }
        tokio::select! {
            () = shutdown.cancelled() => return Answer::ShuttingDown,
            () = tokio::time::sleep(backoff(failures)) => {}
        }
    }
}

/// Where the statuses go.
enum Sink {
    /// One ClusterOperator per name (OpenShift).
    ClusterOperators(ClusterOperators),
    /// One `status.components` entry per name on the OperatorHub.
    OperatorHub {
        hubs: Api<OperatorHub>,
        name: String,
    },
}

struct Reporter {
    sink: Sink,
    store: Store<Deployment>,
}

impl Reporter {
    async fn serve(
        &self,
        changed: &Notify,
        health: &mut watch::Receiver<ReconcileHealth>,
        leading: &mut watch::Receiver<bool>,
        shutdown: &CancellationToken,
    ) {
        let mut failures_in_a_row = 0u32;
        loop {
            let delay = if *leading.borrow_and_update() {
                let marketplace = health.borrow_and_update().clone();
                match self.report(&marketplace).await {
                    Ok(Reported::Done) => {
                        failures_in_a_row = 0;
                        RESYNC
                    }
                    Ok(Reported::NoOperatorHubYet) => HUB_ABSENT_RETRY,
                    Err(error) => {
                        failures_in_a_row = failures_in_a_row.saturating_add(1);
                        tracing::warn!(
                            error = &error as &dyn std::error::Error,
                            "ClusterOperator status write failed; retrying with backoff"
                        );
                        backoff(failures_in_a_row)
                    }
                }
            } else {
                RESYNC
            };
            tokio::select! {
                () = changed.notified() => {}
                () = tokio::time::sleep(delay) => {}
                result = health.changed() => if result.is_err() { break },
                result = leading.changed() => if result.is_err() { break },
                () = shutdown.cancelled() => break,
            }
        }
    }

    #[tracing::instrument(skip_all)]
    async fn report(&self, marketplace: &ReconcileHealth) -> Result<Reported, Error> {
        let deployments: BTreeMap<Component, DeploymentObservation> = self
            .store
            .state()
            .iter()
            .filter(|deployment| deployment.metadata.deletion_timestamp.is_none())
            .filter_map(|deployment| {
                let component = Component::from_deployment_name(&deployment.name_any())?;
                Some((component, observe(deployment)))
            })
            .collect();
        match &self.sink {
            Sink::ClusterOperators(operators) => {
                let mut reported = BTreeMap::new();
                for component in deployments.keys() {
                    let name = component.cluster_operator();
                    if !reported.contains_key(name) {
                        let status = operators
                            .current_status(name)
                            .await
                            .map_err(|source| Error::ClusterOperator { source })?;
                        reported.insert(name.to_owned(), status);
                    }
                }
                let desired = cluster_operator_statuses(&Observed {
                    deployments: &deployments,
                    reported: &reported,
                    marketplace,
                    now: Timestamp::now(),
                });
                for (name, status) in desired {
                    if reported.get(&name) != Some(&status) {
                        operators
                            .write_status(&name, &status)
                            .await
                            .map_err(|source| Error::ClusterOperator { source })?;
                    }
                }
            }
            Sink::OperatorHub { hubs, name } => {
                let read_error = |source| Error::ReadHubForComponents {
                    name: name.clone(),
                    source,
                };
                // The OperatorHub reconcile creates it.
                let Some(hub) = hubs.get_opt(name).await.map_err(read_error)? else {
                    return Ok(Reported::NoOperatorHubYet);
                };
                let reported: BTreeMap<String, ClusterOperatorStatus> = hub
                    .status
                    .clone()
                    .map(|status| status.components)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|c| {
                        let status = ClusterOperatorStatus {
                            conditions: c.conditions,
                            versions: c.versions,
                            ..ClusterOperatorStatus::default()
                        };
                        (c.name, status)
                    })
                    .collect();
                let desired = cluster_operator_statuses(&Observed {
                    deployments: &deployments,
                    reported: &reported,
                    marketplace,
                    now: Timestamp::now(),
                });
                if desired != reported {
                    let status = OperatorHubStatus {
                        components: desired
                            .into_iter()
                            .map(|(name, status)| HubComponentStatus {
                                name,
                                conditions: status.conditions,
                                versions: status.versions,
                            })
                            .collect(),
                        ..OperatorHubStatus::default()
                    };
                    write_status(hubs, &COMPONENTS_FIELD_MANAGER, &hub, &status, None)
                        .await
                        .map_err(|source| Error::WriteHubComponents {
                            name: name.clone(),
                            source,
                        })?;
                    tracing::info!(operatorhub = %name, "wrote the OLM components' status");
                }
            }
        }
        Ok(Reported::Done)
    }
}

fn observe(deployment: &Deployment) -> DeploymentObservation {
    let spec = deployment.spec.as_ref();
    let status = deployment.status.as_ref();
    DeploymentObservation {
        replicas: spec.and_then(|spec| spec.replicas).unwrap_or(1),
        ready_replicas: status.and_then(|s| s.ready_replicas).unwrap_or(0),
        available_replicas: status.and_then(|s| s.available_replicas).unwrap_or(0),
        updated_replicas: status.and_then(|s| s.updated_replicas).unwrap_or(0),
        generation: deployment.metadata.generation,
        observed_generation: status.and_then(|s| s.observed_generation),
        version: spec
            .and_then(|spec| spec.template.metadata.as_ref())
            .and_then(|metadata| metadata.labels.as_ref())
            .and_then(|labels| labels.get(VERSION_LABEL))
            .cloned(),
    }
}
