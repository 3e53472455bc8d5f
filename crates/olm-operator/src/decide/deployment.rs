//! The install strategy's Deployments: how each is built from the CSV (labels,
//! owner, annotations, `OPERATOR_CONDITION_NAME`, Subscription `config`
//! overrides, `olm.deployment-spec-hash`), and the install check that compares
//! the Deployments found in the cluster with what should be there.
//!
//! Upstream: `pkg/controller/install/deployment.go` (`deploymentForSpec`,
//! `checkForDeployments`), `status_viewer.go` (`DeploymentStatus`),
//! `errors.go` (`StrategyError`), and the Subscription config injection in
//! `pkg/controller/operators/olm/overrides`.
//!
//! Build order, as upstream: pod-template annotations overlaid by all CSV
//! annotations; labels = the strategy's `label` + `olm.managed` + owner labels;
//! a non-blocking ownerReference to the CSV; Subscription `config` (and cluster
//! proxy env); `OPERATOR_CONDITION_NAME` into every container;
//! `revisionHistoryLimit: 1`; finally `olm.deployment-spec-hash` over the spec
//! ([`deployment_spec_hash`], see [`crate::decide::hash`] for its definition).

use std::collections::BTreeMap;

use k8s_openapi::{
    api::{
        apps::v1::{Deployment, DeploymentSpec},
        core::v1::{
            Affinity, Container, EnvVar, NodeAffinity, PodAffinity, PodAntiAffinity, PodSpec,
        },
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use olm_api::{
    csv::{ClusterServiceVersion, StrategyDeploymentSpec},
    labels,
    subscription::SubscriptionConfig,
};

use super::Error;
use super::hash::content_hash;

use olm_api::ownership::{has_owner_labels, non_blocking_owner, owner_labels};
pub use olm_plan::csv_rbac::{InvalidStrategy, validate_strategy};

/// What adjusts the strategy's Deployments beyond the CSV itself.
#[derive(Clone, Copy, Debug, Default)]
pub struct DeploymentOverrides<'a> {
    /// `spec.config` of the Subscription that installed this CSV (see
    /// [`super::subscription_config::config_for`]).
    pub config: Option<&'a SubscriptionConfig>,
    /// The cluster-wide proxy variables (`HTTP_PROXY`, `HTTPS_PROXY`,
    /// `NO_PROXY`, from OpenShift's Proxy status); empty elsewhere.
    pub proxy_env: &'a [EnvVar],
    /// Serving certificates to mount into the Deployments behind owned
    /// APIServices and webhooks (see [`super::certs::inject_serving_cert`]).
    pub serving_certs: &'a [super::certs::ServingCertInjection],
}

/// Names of the proxy variables; setting any of them in a Subscription's
/// `config.env` turns off the cluster proxy injection.
pub const PROXY_ENV_NAMES: [&str; 3] = ["HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"];

/// The spec hash that goes into `olm.deployment-spec-hash`.
pub fn deployment_spec_hash(spec: &DeploymentSpec) -> Result<String, Error> {
    content_hash(spec, "deployment spec")
}

/// Builds every Deployment of the CSV's install strategy.
pub fn build_deployments(
    csv: &ClusterServiceVersion,
    overrides: DeploymentOverrides<'_>,
) -> Result<Vec<Deployment>, Error> {
    csv.spec
        .install
        .spec
        .deployments
        .iter()
        .map(|spec| build_deployment(csv, spec, overrides))
        .collect()
}

/// Builds one Deployment of the CSV's install strategy as upstream's
/// `deploymentForSpec` does.
pub fn build_deployment(
    csv: &ClusterServiceVersion,
    strategy: &StrategyDeploymentSpec,
    overrides: DeploymentOverrides<'_>,
) -> Result<Deployment, Error> {
    let mut spec = strategy.spec.clone();
    super::certs::inject_serving_cert(&mut spec, &strategy.name, overrides.serving_certs);

    // CSV annotations win over the pod template's own.
    let template_annotations = spec
        .template
        .metadata
        .get_or_insert_with(ObjectMeta::default);
    let mut annotations = template_annotations.annotations.clone().unwrap_or_default();
    annotations.extend(csv.metadata.annotations.clone().unwrap_or_default());
    template_annotations.annotations = Some(annotations);

    let mut deployment_labels = strategy.label.clone().unwrap_or_default();
    deployment_labels.insert(labels::MANAGED.to_owned(), labels::MANAGED_VALUE.to_owned());
    deployment_labels.extend(owner_labels(csv));

    let mut deployment = Deployment {
        metadata: ObjectMeta {
            name: Some(strategy.name.clone()),
            namespace: csv.metadata.namespace.clone(),
            labels: Some(deployment_labels),
            owner_references: Some(vec![non_blocking_owner(csv)]),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    };

    apply_overrides(&mut deployment, overrides);

    let spec = deployment.spec.get_or_insert_with(DeploymentSpec::default);
    let pod = spec.template.spec.get_or_insert_with(PodSpec::default);
    inject_env(
        pod,
        &[EnvVar {
            name: labels::OPERATOR_CONDITION_NAME_ENV.to_owned(),
            value: csv.metadata.name.clone(),
            value_from: None,
        }],
    );
    // OLM does not roll back, so older ReplicaSets are of no use.
    spec.revision_history_limit = Some(1);

    let hash = deployment_spec_hash(spec)?;
    deployment
        .metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(labels::DEPLOYMENT_SPEC_HASH.to_owned(), hash);
    Ok(deployment)
}

/// Applies the Subscription `config` and the cluster proxy variables to a
/// Deployment (upstream's `DeploymentInitializer`):
///
/// - `env` (followed by the proxy variables, unless `env` sets one of them;
///   empty proxy values are dropped) merged by name into every container;
/// - `envFrom` appended to every container unless already present;
/// - `volumes` merged by name into the pod, `volumeMounts` by name into every
///   container (the Subscription wins);
/// - `tolerations` appended unless already present;
/// - `resources` replaces every container's resources;
/// - a non-empty `nodeSelector` replaces the pod's;
/// - `affinity` overrides per sub-field, an empty sub-field clears it, an empty
///   `affinity` clears all of it;
/// - `annotations` are added to the Deployment and its pod template for keys
///   not already set.
///
/// Init containers are left alone, as upstream does.
pub fn apply_overrides(deployment: &mut Deployment, overrides: DeploymentOverrides<'_>) {
    let config = overrides.config;
    let config_env = config.map(|c| c.env.as_slice()).unwrap_or_default();
    let mut env = config_env.to_vec();
    let proxy_overridden = config_env
        .iter()
        .any(|e| PROXY_ENV_NAMES.contains(&e.name.as_str()));
    if !proxy_overridden {
        env.extend(
            overrides
                .proxy_env
                .iter()
                .filter(|e| e.value.as_deref().is_some_and(|v| !v.is_empty()))
                .cloned(),
        );
    }

    let spec = deployment.spec.get_or_insert_with(DeploymentSpec::default);
    let pod = spec.template.spec.get_or_insert_with(PodSpec::default);
    inject_env(pod, &env);
    let Some(config) = config else {
        return;
    };

    for container in &mut pod.containers {
        let env_from = container.env_from.get_or_insert_with(Vec::new);
        for source in &config.env_from {
            if !env_from.contains(source) {
                env_from.push(source.clone());
            }
        }
        if env_from.is_empty() {
            container.env_from = None;
        }
    }
    merge_by_name(&mut pod.volumes, &config.volumes, |v| &v.name);
    for container in &mut pod.containers {
        merge_by_name(&mut container.volume_mounts, &config.volume_mounts, |m| {
            &m.name
        });
    }
    if !config.tolerations.is_empty() {
        let tolerations = pod.tolerations.get_or_insert_with(Vec::new);
        for toleration in &config.tolerations {
            if !tolerations.contains(toleration) {
                tolerations.push(toleration.clone());
            }
        }
    }
    if let Some(resources) = &config.resources {
        for container in &mut pod.containers {
            container.resources = Some(resources.clone());
        }
    }
    if !config.node_selector.is_empty() {
        pod.node_selector = Some(config.node_selector.clone());
    }
    if let Some(affinity) = &config.affinity {
        override_affinity(pod, affinity);
    }
    if !config.annotations.is_empty() {
        add_missing(&mut deployment.metadata.annotations, &config.annotations);
        if let Some(spec) = deployment.spec.as_mut() {
            let template = spec
                .template
                .metadata
                .get_or_insert_with(ObjectMeta::default);
            add_missing(&mut template.annotations, &config.annotations);
        }
    }
}

fn add_missing(target: &mut Option<BTreeMap<String, String>>, extra: &BTreeMap<String, String>) {
    let target = target.get_or_insert_with(BTreeMap::new);
    for (key, value) in extra {
        target.entry(key.clone()).or_insert_with(|| value.clone());
    }
}

/// Merges `extra` into `list` by name: same name replaces in place, a new name
/// is appended.
fn merge_by_name<T: Clone>(list: &mut Option<Vec<T>>, extra: &[T], name: impl Fn(&T) -> &String) {
    if extra.is_empty() {
        return;
    }
    let list = list.get_or_insert_with(Vec::new);
    for item in extra {
        match list
            .iter_mut()
            .find(|existing| name(existing) == name(item))
        {
            Some(existing) => *existing = item.clone(),
            None => list.push(item.clone()),
        }
    }
}

/// Merges variables into every container's `env` by name (upstream's
/// `mergeEnvVars`): existing variables keep their place and take the new
/// value; new names are appended in the given order.
pub fn inject_env(pod: &mut PodSpec, env: &[EnvVar]) {
    if env.is_empty() {
        return;
    }
    for container in &mut pod.containers {
        container.env = Some(merge_env(container.env.as_deref().unwrap_or_default(), env));
    }
}

/// `existing` with `new` merged in by name.
pub fn merge_env(existing: &[EnvVar], new: &[EnvVar]) -> Vec<EnvVar> {
    let mut merged: Vec<EnvVar> = Vec::with_capacity(existing.len() + new.len());
    for variable in existing {
        // A name listed twice in a container keeps its first place only.
        if merged.iter().any(|m| m.name == variable.name) {
            continue;
        }
        let value = new
            .iter()
            .rev()
            .find(|n| n.name == variable.name)
            .unwrap_or(variable);
        merged.push(value.clone());
    }
    for variable in new {
        if merged.iter().any(|m| m.name == variable.name) {
            continue;
        }
        let value = new
            .iter()
            .rev()
            .find(|n| n.name == variable.name)
            .unwrap_or(variable);
        merged.push(value.clone());
    }
    merged
}

/// Upstream's `OverrideDeploymentAffinity`, except that an empty
/// `podAntiAffinity` clears only the pod anti-affinity: upstream clears the
/// whole affinity there, which contradicts its own documentation.
fn override_affinity(pod: &mut PodSpec, affinity: &Affinity) {
    let empty = Affinity::default();
    let current_empty = pod.affinity.as_ref().is_none_or(|a| *a == empty);
    if current_empty {
        // Upstream copies the override as it is, empty sub-fields included;
        // those are dropped here, as the merge below drops them, so applying
        // the same config twice gives the same Deployment (and hash).
        let mut normalized = affinity.clone();
        if normalized.node_affinity.as_ref() == Some(&NodeAffinity::default()) {
            normalized.node_affinity = None;
        }
        if normalized.pod_affinity.as_ref() == Some(&PodAffinity::default()) {
            normalized.pod_affinity = None;
        }
        if normalized.pod_anti_affinity.as_ref() == Some(&PodAntiAffinity::default()) {
            normalized.pod_anti_affinity = None;
        }
        pod.affinity = (normalized != empty).then_some(normalized);
        return;
    }
    if *affinity == empty {
        pod.affinity = None;
        return;
    }
    let current = pod.affinity.get_or_insert_with(Affinity::default);
    if let Some(node) = &affinity.node_affinity {
        current.node_affinity = (*node != NodeAffinity::default()).then(|| node.clone());
    }
    if let Some(pod_affinity) = &affinity.pod_affinity {
        current.pod_affinity =
            (*pod_affinity != PodAffinity::default()).then(|| pod_affinity.clone());
    }
    if let Some(anti) = &affinity.pod_anti_affinity {
        current.pod_anti_affinity = (*anti != PodAntiAffinity::default()).then(|| anti.clone());
    }
    if *current == empty {
        pod.affinity = None;
    }
}

/// Why an install check did not pass (upstream's `StrategyError` reasons).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StrategyErrorReason {
    /// `ComponentMissing`: a Deployment does not exist.
    ComponentMissing,
    /// `AnnotationsMissing`: the pod template lacks a CSV annotation.
    AnnotationsMissing,
    /// `Waiting`: a rollout is in progress or the Deployment is not available.
    Waiting,
    /// `InvalidStrategy`: the strategy cannot be used.
    InvalidStrategy,
    /// `Timeout`: the Deployment exceeded its progress deadline.
    Timeout,
    /// `Unknown`.
    Unknown,
    /// `PatchUnsuccessful`.
    PatchUnsuccessful,
    /// `DeploymentUpdated`: the spec hash is missing or differs.
    DeploymentUpdated,
    /// `InsufficentPermissions` (sic): creating a component was forbidden.
    InsufficientPermissions,
}

impl StrategyErrorReason {
    /// The reason string upstream uses.
    pub fn as_str(self) -> &'static str {
        match self {
            StrategyErrorReason::ComponentMissing => "ComponentMissing",
            StrategyErrorReason::AnnotationsMissing => "AnnotationsMissing",
            StrategyErrorReason::Waiting => "Waiting",
            StrategyErrorReason::InvalidStrategy => "InvalidStrategy",
            StrategyErrorReason::Timeout => "Timeout",
            StrategyErrorReason::Unknown => "Unknown",
            StrategyErrorReason::PatchUnsuccessful => "PatchUnsuccessful",
            StrategyErrorReason::DeploymentUpdated => "DeploymentUpdated",
            StrategyErrorReason::InsufficientPermissions => "InsufficentPermissions",
        }
    }

    /// Whether no amount of waiting fixes it (upstream's
    /// `IsErrorUnrecoverable`).
    pub fn is_unrecoverable(self) -> bool {
        matches!(
            self,
            StrategyErrorReason::InvalidStrategy
                | StrategyErrorReason::Timeout
                | StrategyErrorReason::PatchUnsuccessful
                | StrategyErrorReason::InsufficientPermissions
        )
    }

    /// Whether the Deployments must be applied again (the CSV goes back to
    /// InstallReady).
    pub fn needs_reapply(self) -> bool {
        matches!(
            self,
            StrategyErrorReason::DeploymentUpdated | StrategyErrorReason::AnnotationsMissing
        )
    }
}

/// The outcome of a failed install check.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct StrategyError {
    /// Why.
    pub reason: StrategyErrorReason,
    /// Upstream's message.
    pub message: String,
}

impl StrategyError {
    /// A strategy error.
    pub fn new(reason: StrategyErrorReason, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }
}

/// How a Deployment's rollout stands (upstream's `DeploymentStatus`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rollout {
    /// Up to date and available.
    Ready,
    /// Not there yet; the message says what is awaited.
    Waiting(String),
    /// The progress deadline passed.
    TimedOut(String),
}

/// The rollout state of a Deployment.
pub fn rollout(deployment: &Deployment) -> Rollout {
    let name = deployment.metadata.name.as_deref().unwrap_or_default();
    let generation = deployment.metadata.generation.unwrap_or(0);
    let status = deployment.status.clone().unwrap_or_default();
    if generation > status.observed_generation.unwrap_or(0) {
        return Rollout::Waiting(format!(
            "waiting for spec update of deployment {name:?} to be observed..."
        ));
    }
    let condition = |type_: &str| {
        status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == type_)
    };
    if condition("Progressing")
        .is_some_and(|c| c.reason.as_deref() == Some("ProgressDeadlineExceeded"))
    {
        return Rollout::TimedOut(format!(
            "deployment {name:?} exceeded its progress deadline"
        ));
    }
    let replicas = status.replicas.unwrap_or(0);
    let updated = status.updated_replicas.unwrap_or(0);
    if replicas > updated {
        return Rollout::Waiting(format!(
            "deployment {name:?} waiting for {} outdated replica(s) to be terminated",
            replicas - updated
        ));
    }
    match condition("Available") {
        Some(available) if available.status == "True" => Rollout::Ready,
        Some(available) => Rollout::Waiting(format!(
            "deployment {name:?} not available: {}",
            available.message.as_deref().unwrap_or_default()
        )),
        None => Rollout::Waiting(format!(
            "deployment {name:?} not available: missing condition \"Available\""
        )),
    }
}

/// Upstream's install check (`checkForDeployments`): every strategy
/// Deployment must exist among the CSV's Deployments (found by owner labels in
/// `existing`), be rolled out and available, carry every CSV annotation on its
/// pod template, and carry the spec hash of what [`build_deployment`] builds
/// now. The first problem found is reported.
pub fn check_deployments(
    csv: &ClusterServiceVersion,
    existing: &[Deployment],
    overrides: DeploymentOverrides<'_>,
) -> Result<(), StrategyError> {
    let owned: BTreeMap<&str, &Deployment> = existing
        .iter()
        .filter(|d| has_owner_labels(d.metadata.labels.as_ref(), csv))
        .filter_map(|d| d.metadata.name.as_deref().map(|name| (name, d)))
        .collect();
    let expected_annotations = csv.metadata.annotations.clone().unwrap_or_default();
    for strategy in &csv.spec.install.spec.deployments {
        let Some(deployment) = owned.get(strategy.name.as_str()) else {
            return Err(StrategyError::new(
                StrategyErrorReason::ComponentMissing,
                format!("missing deployment with name={}", strategy.name),
            ));
        };
        let name = deployment.metadata.name.as_deref().unwrap_or_default();
        match rollout(deployment) {
            Rollout::Ready => {}
            Rollout::TimedOut(message) => {
                return Err(StrategyError::new(
                    StrategyErrorReason::Timeout,
                    format!("deployment {name} not ready before timeout: {message}"),
                ));
            }
            Rollout::Waiting(message) => {
                return Err(StrategyError::new(
                    StrategyErrorReason::Waiting,
                    format!("waiting for deployment {name} to become ready: {message}"),
                ));
            }
        }

        let template_annotations = deployment
            .spec
            .as_ref()
            .and_then(|s| s.template.metadata.as_ref())
            .and_then(|m| m.annotations.as_ref())
            .filter(|a| !a.is_empty());
        if !expected_annotations.is_empty() && template_annotations.is_none() {
            return Err(StrategyError::new(
                StrategyErrorReason::AnnotationsMissing,
                "no annotations found on deployment",
            ));
        }
        let template_annotations = template_annotations.cloned().unwrap_or_default();
        for (key, value) in &expected_annotations {
            match template_annotations.get(key) {
                None => {
                    return Err(StrategyError::new(
                        StrategyErrorReason::AnnotationsMissing,
                        format!("annotations on deployment does not contain expected key: {key}"),
                    ));
                }
                Some(actual) if actual != value => {
                    return Err(StrategyError::new(
                        StrategyErrorReason::AnnotationsMissing,
                        format!(
                            "unexpected annotation on deployment. Expected {key}:{value}, found {key}:{actual}"
                        ),
                    ));
                }
                Some(_) => {}
            }
        }

        let existing_hash = deployment
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(labels::DEPLOYMENT_SPEC_HASH));
        let Some(existing_hash) = existing_hash else {
            return Err(StrategyError::new(
                StrategyErrorReason::DeploymentUpdated,
                format!("deployment {name} doesn't have a spec hash, update it"),
            ));
        };
        let wanted_hash = build_deployment(csv, strategy, overrides)
            .map_err(|err| {
                StrategyError::new(
                    StrategyErrorReason::DeploymentUpdated,
                    format!("couldn't calculate deployment spec hash: {err}"),
                )
            })?
            .metadata
            .labels
            .and_then(|mut l| l.remove(labels::DEPLOYMENT_SPEC_HASH))
            .unwrap_or_default();
        if *existing_hash != wanted_hash {
            return Err(StrategyError::new(
                StrategyErrorReason::DeploymentUpdated,
                format!("deployment changed old hash={existing_hash}, new hash={wanted_hash}"),
            ));
        }
    }
    Ok(())
}

/// Deployments of the CSV (owner labels and an ownerReference to its uid) that
/// the strategy no longer lists; upstream deletes them after an install.
pub fn orphaned_deployments(csv: &ClusterServiceVersion, existing: &[Deployment]) -> Vec<String> {
    let wanted: Vec<&str> = csv
        .spec
        .install
        .spec
        .deployments
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    let uid = csv.metadata.uid.as_deref().unwrap_or_default();
    existing
        .iter()
        .filter(|d| has_owner_labels(d.metadata.labels.as_ref(), csv))
        .filter(|d| {
            d.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|r| r.uid == uid)
        })
        .filter_map(|d| d.metadata.name.clone())
        .filter(|name| !wanted.contains(&name.as_str()))
        .collect()
}

/// Whether every container has `OPERATOR_CONDITION_NAME` set to `value` (what
/// the OperatorCondition reconciler ensures on the strategy's Deployments).
pub fn has_operator_condition_env(containers: &[Container], value: &str) -> bool {
    containers.iter().all(|c| {
        c.env.iter().flatten().any(|e| {
            e.name == labels::OPERATOR_CONDITION_NAME_ENV && e.value.as_deref() == Some(value)
        })
    })
}
