//! The ClusterOperator status writer: where the cluster serves
//! `clusteroperators.config.openshift.io` (OpenShift), it watches the OLM
//! Deployments (`app.kubernetes.io/part-of=olm`) of the OLM namespace and
//! reports marketplace and each OLM component in its ClusterOperator, as
//! [`crate::decide::cluster_operator`] says. Elsewhere it logs once and does
//! nothing.
//!
//! ClusterOperator is read and written as a dynamic object: we do not ship
//! its CRD, OpenShift does.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;
use kube::{
    Api, Client, ResourceExt as _,
    api::{ApiResource, DynamicObject, Patch, PostParams},
    runtime::{reflector::Store, watcher},
};
use olm_runtime::{admin::Readiness, cache::reflect};
use serde_json::json;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use super::{Error, FIELD_MANAGER, backoff, wake};
use crate::decide::cluster_operator::{
    ClusterOperatorStatus, Component, DeploymentObservation, Observed, PART_OF_SELECTOR,
    ReconcileHealth, VERSION_LABEL, cluster_operator_statuses,
};

/// The API group of ClusterOperator.
const GROUP: &str = "config.openshift.io";

/// The resource (plural) of ClusterOperator.
const PLURAL: &str = "clusteroperators";

/// How often the ClusterOperators are written again without a change, so
/// that an edit by someone else is put back.
const RESYNC: Duration = Duration::from_secs(5 * 60);

/// Reports the ClusterOperators until `shutdown`, while `leading` holds
/// `true`; returns at once when the cluster has no ClusterOperator API.
pub(super) async fn run(
    client: Client,
    olm_namespace: String,
    mut health: watch::Receiver<ReconcileHealth>,
    readiness: Readiness,
    mut leading: watch::Receiver<bool>,
    shutdown: CancellationToken,
) {
    let Some(resource) = discover_until_answered(&client, &shutdown).await else {
        return;
    };
    tracing::info!(
        namespace = %olm_namespace,
        "reporting OLM in ClusterOperators"
    );
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
        operators: Api::all_with(client, &resource),
        resource,
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

/// Asks discovery for ClusterOperator until it answers, yes or no.
async fn discover_until_answered(
    client: &Client,
    shutdown: &CancellationToken,
) -> Option<ApiResource> {
    let mut failures = 0u32;
    loop {
        match discover(client).await {
            Ok(Some(resource)) => return Some(resource),
            Ok(None) => {
                tracing::info!(
                    "no {PLURAL}.{GROUP} API in this cluster; not reporting ClusterOperator status"
                );
                return None;
            }
            Err(error) => {
                failures = failures.saturating_add(1);
                tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    "discovery of the ClusterOperator API failed; retrying with backoff"
                );
            }
        }
        tokio::select! {
            () = shutdown.cancelled() => return None,
            () = tokio::time::sleep(backoff(failures)) => {}
        }
    }
}

/// The ClusterOperator resource, or `None` when the cluster does not serve it.
async fn discover(client: &Client) -> Result<Option<ApiResource>, Error> {
    match kube::discovery::group(client, GROUP).await {
        Ok(group) => Ok(group
            .recommended_resources()
            .into_iter()
            .map(|(resource, _)| resource)
            .find(|resource| resource.plural == PLURAL)),
        Err(kube::Error::Discovery(_)) => Ok(None),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(None),
        Err(source) => Err(Error::DiscoverClusterOperators { source }),
    }
}

struct Reporter {
    operators: Api<DynamicObject>,
    resource: ApiResource,
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
                    Ok(()) => {
                        failures_in_a_row = 0;
                        RESYNC
                    }
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
    async fn report(&self, marketplace: &ReconcileHealth) -> Result<(), Error> {
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
        let mut reported = BTreeMap::new();
        for component in deployments.keys() {
            let name = component.cluster_operator();
            if !reported.contains_key(name) {
                reported.insert(name.to_owned(), self.current_status(name).await?);
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
                self.write_status(&name, &status).await?;
            }
        }
        Ok(())
    }

    /// The status the ClusterOperator `name` reports now; creates it (with
    /// an empty spec, as OpenShift's operators do) when absent.
    async fn current_status(&self, name: &str) -> Result<ClusterOperatorStatus, Error> {
        let write_error = |verb, source| Error::WriteClusterOperator {
            verb,
            name: name.to_owned(),
            source,
        };
        let existing = match self.operators.get_opt(name).await {
            Ok(existing) => existing,
            Err(source) => return Err(write_error("get", source)),
        };
        let object = match existing {
            Some(object) => object,
            None => {
                let mut object = DynamicObject::new(name, &self.resource);
                object.data = json!({ "spec": {} });
                let params = PostParams {
                    field_manager: Some(FIELD_MANAGER.as_str().to_owned()),
                    ..PostParams::default()
                };
                match self.operators.create(&params, &object).await {
                    Ok(created) => {
                        tracing::info!(clusteroperator = name, "created the ClusterOperator");
                        created
                    }
                    Err(kube::Error::Api(status)) if status.is_already_exists() => object,
                    Err(source) => return Err(write_error("create", source)),
                }
            }
        };
        // A status this service cannot read is one it writes anew.
        Ok(object
            .data
            .get("status")
            .and_then(|status| serde_json::from_value(status.clone()).ok())
            .unwrap_or_default())
    }

    async fn write_status(&self, name: &str, status: &ClusterOperatorStatus) -> Result<(), Error> {
        let body = json!({
            "apiVersion": self.resource.api_version,
            "kind": self.resource.kind,
            "metadata": { "name": name },
            "status": status,
        });
        self.operators
            .patch_status(name, &FIELD_MANAGER.status_params(), &Patch::Apply(&body))
            .await
            .map_err(|source| Error::WriteClusterOperator {
                verb: "apply status of",
                name: name.to_owned(),
                source,
            })?;
        tracing::info!(clusteroperator = name, "wrote the ClusterOperator status");
        Ok(())
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
