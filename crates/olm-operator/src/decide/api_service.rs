//! The APIServices a CSV owns (`spec.apiservicedefinitions.owned`), as
//! upstream's `pkg/controller/install/apiservice.go` and
//! `pkg/controller/operators/olm/apiservices.go` build and check them:
//!
//! - [`desired_api_service`]: `<version>.<group>`, `groupPriorityMinimum`
//!   2000, `versionPriority` 15, the Service in front of the description's
//!   Deployment, the CA bundle, owner labels and `olm.managed`;
//! - [`is_adoptable`]: who may take over an existing APIService;
//! - [`api_services_check`]: the install check's availability part, with
//!   upstream's "expected disruption" retry ([`backend_disrupted`]);
//! - [`api_service_resources`]: `checkAPIServiceResources`, run for
//!   Succeeded and Failed CSVs.

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use k8s_openapi::{
    ByteString,
    api::core::v1::{Pod, Secret},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
    kube_aggregator::pkg::apis::apiregistration::v1::{
        APIService, APIServiceSpec, ServiceReference,
    },
};
use olm_api::{
    csv::{ApiServiceDescription, ClusterServiceVersion, CsvPhase, GroupVersionKind},
    labels,
};

use super::{
    certs::{
        DEFAULT_SERVICE_PORT, OLM_CA_KEY, auth_delegator_binding_name, auth_reader_binding_name,
        secret_name, service_name,
    },
    csv_phase::{ApiServiceResources, ApiServicesCheck},
    csv_status,
};
use olm_api::ownership::owner_labels;

/// Upstream's `groupPriorityMinimum` of the APIServices it creates.
pub const GROUP_PRIORITY_MINIMUM: i32 = 2000;

/// Upstream's `versionPriority` of the APIServices it creates.
pub const VERSION_PRIORITY: i32 = 15;

/// How long an unavailable APIService's pods may be starting before their
/// trouble no longer counts as an expected disruption (upstream's
/// `maxDisruptionDuration`).
pub const MAX_DISRUPTION_SECONDS: i64 = 5 * 60;

/// Container waiting reasons of pods on their way up.
const STARTING_REASONS: [&str; 2] = ["ContainerCreating", "PodInitializing"];

/// Container waiting reasons no amount of waiting fixes.
const FAILING_REASONS: [&str; 5] = [
    "ImagePullBackOff",
    "ErrImagePull",
    "CrashLoopBackOff",
    "CreateContainerConfigError",
    "InvalidImageName",
];

/// `<version>.<group>`.
pub fn api_service_name(description: &ApiServiceDescription) -> String {
    format!("{}.{}", description.version, description.group)
}

/// The GVK an owned APIService serves.
pub fn served_gvk(description: &ApiServiceDescription) -> GroupVersionKind {
    GroupVersionKind {
        group: description.group.clone(),
        version: description.version.clone(),
        kind: description.kind.clone(),
    }
}

/// Upstream's `IsAPIServiceAdoptable`: the APIService carries complete
/// owner labels of kind ClusterServiceVersion naming `csv`, the CSV it
/// replaces, or a current owner (in `csvs`) that is Replacing or Deleting.
pub fn is_adoptable(
    api_service_labels: Option<&BTreeMap<String, String>>,
    csv: &ClusterServiceVersion,
    csvs: &[ClusterServiceVersion],
) -> bool {
    let Some(found) = api_service_labels else {
        return false;
    };
    let (Some(kind), Some(name), Some(namespace)) = (
        found.get(labels::OWNER_KIND),
        found.get(labels::OWNER),
        found.get(labels::OWNER_NAMESPACE),
    ) else {
        return false;
    };
    if kind.is_empty() || name.is_empty() || namespace.is_empty() || kind != "ClusterServiceVersion"
    {
        return false;
    }
    let csv_namespace = csv.metadata.namespace.as_deref().unwrap_or_default();
    let is = |candidate_name: &str, candidate_namespace: &str| {
        name == candidate_name && namespace == candidate_namespace
    };
    if is(
        csv.metadata.name.as_deref().unwrap_or_default(),
        csv_namespace,
    ) {
        return true;
    }
    if let Some(replaces) = csv.spec.replaces.as_deref()
        && is(replaces, csv_namespace)
        && csvs.iter().any(|c| {
            c.metadata.name.as_deref() == Some(replaces)
                && c.metadata.namespace.as_deref() == Some(csv_namespace)
        })
    {
        return true;
    }
    csvs.iter().any(|owner| {
        owner.metadata.name.as_deref() == Some(name.as_str())
            && owner.metadata.namespace.as_deref() == Some(namespace.as_str())
            && {
                let phase = csv_status::phase_of(&owner.status.clone().unwrap_or_default());
                phase == CsvPhase::REPLACING || phase == CsvPhase::DELETING
            }
    })
}

/// Whether any owned APIService exists that `csv` may not adopt (Pending's
/// `OwnerConflict` "unable to adopt APIService").
pub fn owner_conflict(
    csv: &ClusterServiceVersion,
    found: &BTreeMap<String, APIService>,
    csvs: &[ClusterServiceVersion],
) -> bool {
    csv.spec.owned_api_services().iter().any(|description| {
        found
            .get(&api_service_name(description))
            .is_some_and(|api| !is_adoptable(api.metadata.labels.as_ref(), csv, csvs))
    })
}

/// The APIService of an owned description: `existing` (kept for its other
/// fields) or a new one (with the installing Subscription's
/// `config.annotations`, as upstream), with owner labels, `olm.managed`,
/// the Service reference and the CA bundle.
pub fn desired_api_service(
    csv: &ClusterServiceVersion,
    description: &ApiServiceDescription,
    existing: Option<&APIService>,
    ca_bundle: &str,
    subscription_annotations: Option<&BTreeMap<String, String>>,
) -> APIService {
    let mut api = existing.cloned().unwrap_or_else(|| APIService {
        metadata: ObjectMeta {
            name: Some(api_service_name(description)),
            annotations: subscription_annotations.filter(|a| !a.is_empty()).cloned(),
            ..ObjectMeta::default()
        },
        spec: Some(APIServiceSpec {
            group: Some(description.group.clone()),
            version: Some(description.version.clone()),
            group_priority_minimum: GROUP_PRIORITY_MINIMUM,
            version_priority: VERSION_PRIORITY,
            ..APIServiceSpec::default()
        }),
        status: None,
    });
    let api_labels = api.metadata.labels.get_or_insert_with(BTreeMap::new);
    api_labels.extend(owner_labels(csv));
    api_labels.insert(labels::MANAGED.to_owned(), labels::MANAGED_VALUE.to_owned());
    let spec = api.spec.get_or_insert_with(APIServiceSpec::default);
    spec.service = Some(ServiceReference {
        namespace: csv.metadata.namespace.clone(),
        name: Some(service_name(
            description.deployment_name.as_deref().unwrap_or_default(),
        )),
        port: Some(
            description
                .container_port
                .filter(|p| *p > 0)
                .unwrap_or(DEFAULT_SERVICE_PORT),
        ),
    });
    spec.ca_bundle = Some(ByteString(ca_bundle.as_bytes().to_vec()));
    api.status = None;
    api
}

/// Whether an APIService's `Available` condition is True.
pub fn is_available(api: &APIService) -> bool {
    api.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == "Available" && c.status == "True")
        })
}

fn waiting_reasons(pod: &Pod) -> impl Iterator<Item = &str> {
    let status = pod.status.as_ref();
    status
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .chain(
            status
                .and_then(|s| s.init_container_statuses.as_ref())
                .into_iter()
                .flatten(),
        )
        .filter_map(|c| c.state.as_ref()?.waiting.as_ref()?.reason.as_deref())
}

/// Upstream's `isAPIServiceBackendDisrupted` for the pods of Deployments
/// with unavailable or outdated replicas: a pod younger than
/// [`MAX_DISRUPTION_SECONDS`] that is terminating, or Pending while its
/// containers are being created (and none fails for good, and it is not
/// unschedulable), or not yet reporting containers.
pub fn backend_disrupted(pods: &[Pod], now: Timestamp) -> bool {
    pods.iter().any(|pod| {
        let created = pod
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(now.as_second(), |t| t.0.as_second());
        if now.as_second() - created > MAX_DISRUPTION_SECONDS {
            return false;
        }
        if pod.metadata.deletion_timestamp.is_some() {
            return true;
        }
        let status = pod.status.as_ref();
        let pending = status.and_then(|s| s.phase.as_deref()) == Some("Pending");
        let reasons: Vec<&str> = waiting_reasons(pod).collect();
        if pending {
            let unschedulable = status
                .and_then(|s| s.conditions.as_ref())
                .into_iter()
                .flatten()
                .any(|c| {
                    c.type_ == "PodScheduled"
                        && c.status == "False"
                        && c.reason.as_deref() == Some("Unschedulable")
                });
            if unschedulable || reasons.iter().any(|r| FAILING_REASONS.contains(r)) {
                return false;
            }
            if reasons.iter().any(|r| STARTING_REASONS.contains(r)) {
                return true;
            }
            let no_statuses = status.is_none_or(|s| {
                s.container_statuses.as_ref().is_none_or(Vec::is_empty)
                    && s.init_container_statuses.as_ref().is_none_or(Vec::is_empty)
            });
            if no_statuses {
                return true;
            }
        }
        status
            .and_then(|s| s.container_statuses.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|c| c.state.as_ref()?.waiting.as_ref()?.reason.as_deref())
            .any(|r| STARTING_REASONS.contains(&r))
    })
}

/// What discovery said about the GVKs of available owned APIServices.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Discovery {
    /// The GVKs discovery lists.
    pub discovered: BTreeSet<GroupVersionKind>,
    /// The first discovery request that failed, with its error.
    pub error: Option<String>,
}

/// Upstream's `areAPIServicesAvailable`: each owned APIService exists, is
/// Available and its GVK is discoverable; an unavailable one whose backing
/// pods are in an expected disruption (`disrupted`) is retried; a discovery
/// request that fails for an available one fails the install
/// (`APIServiceInstallFailed`).
pub fn api_services_check(
    csv: &ClusterServiceVersion,
    found: &BTreeMap<String, APIService>,
    discovery: &Discovery,
    disrupted: bool,
) -> ApiServicesCheck {
    for description in csv.spec.owned_api_services() {
        let name = api_service_name(description);
        let Some(api) = found.get(&name) else {
            return ApiServicesCheck::NotAvailable;
        };
        if !is_available(api) {
            if disrupted {
                return ApiServicesCheck::Retryable(format!(
                    "APIService {name} temporarily unavailable due to pod disruption"
                ));
            }
            return ApiServicesCheck::NotAvailable;
        }
        if !discovery.discovered.contains(&served_gvk(description)) {
            return match &discovery.error {
                Some(error) => ApiServicesCheck::Failed(error.clone()),
                None => ApiServicesCheck::NotAvailable,
            };
        }
    }
    ApiServicesCheck::Available
}

/// What [`api_service_resources`] looks at, for the CSV's namespace.
#[derive(Clone, Debug, Default)]
pub struct ApiServiceResourceFacts {
    /// Owned APIServices found, by name.
    pub api_services: BTreeMap<String, APIService>,
    /// Names of Services found.
    pub services: BTreeSet<String>,
    /// Secrets found, by name.
    pub secrets: BTreeMap<String, Secret>,
    /// Strategy Deployments found: pod-template `olmcahash` and
    /// ServiceAccount, by name.
    pub deployments: BTreeMap<String, (Option<String>, Option<String>)>,
    /// Names of ServiceAccounts found.
    pub service_accounts: BTreeSet<String>,
    /// Names of Roles found.
    pub roles: BTreeSet<String>,
    /// Names of RoleBindings found.
    pub role_bindings: BTreeSet<String>,
    /// Names of ClusterRoleBindings found.
    pub cluster_role_bindings: BTreeSet<String>,
    /// Names of RoleBindings found in kube-system.
    pub kube_system_role_bindings: BTreeSet<String>,
}

fn not_found(resource: &str, name: &str) -> String {
    format!("{resource} \"{name}\" not found")
}

/// Upstream's `checkAPIServiceResources`: for each owned APIService, that it
/// exists and is adoptable (else not actionable), its Service exists and is
/// referenced, its CA bundle parses, its Secret exists with a parsable
/// certificate and `olmcahash` equal to the bundle's hash, the Deployment's
/// pod template carries that hash, and the ServiceAccount, Secret Role and
/// RoleBinding, auth-delegator and auth-reader bindings exist. Messages are
/// joined as upstream's error aggregate prints them.
pub fn api_service_resources(
    csv: &ClusterServiceVersion,
    csvs: &[ClusterServiceVersion],
    facts: &ApiServiceResourceFacts,
) -> ApiServiceResources {
    let namespace = csv.metadata.namespace.as_deref().unwrap_or_default();
    let mut errors: Vec<String> = Vec::new();
    for description in csv.spec.owned_api_services() {
        let name = api_service_name(description);
        let Some(api) = facts.api_services.get(&name) else {
            errors.push(not_found("apiservices.apiregistration.k8s.io", &name));
            continue;
        };
        if !is_adoptable(api.metadata.labels.as_ref(), csv, csvs) {
            errors.push(format!("{name} is not adoptable"));
            return broken(errors, false);
        }
        let deployment = description.deployment_name.as_deref().unwrap_or_default();
        let service = service_name(deployment);
        if !facts.services.contains(&service) {
            errors.push(not_found("services", &service));
            continue;
        }
        let reference = api.spec.as_ref().and_then(|s| s.service.as_ref());
        if reference.and_then(|r| r.name.as_deref()) != Some(service.as_str())
            || reference.and_then(|r| r.namespace.as_deref()) != Some(namespace)
        {
            errors.push("found APIService and service reference mismatch".to_owned());
            continue;
        }
        let bundle = api
            .spec
            .as_ref()
            .and_then(|s| s.ca_bundle.as_ref())
            .map(|b| String::from_utf8_lossy(&b.0).into_owned())
            .unwrap_or_default();
        if let Err(error) = olm_certs::parse_certificates(&bundle) {
            errors.push(error.to_string());
            continue;
        }
        let secret = secret_name(&service);
        let Some(stored) = facts.secrets.get(&secret) else {
            errors.push(not_found("secrets", &secret));
            continue;
        };
        let cert = stored
            .data
            .as_ref()
            .and_then(|d| d.get(super::certs::TLS_CERT_KEY))
            .map(|b| String::from_utf8_lossy(&b.0).into_owned())
            .unwrap_or_default();
        if let Err(error) = olm_certs::parse_certificates(&cert) {
            errors.push(error.to_string());
            continue;
        }
        let hash = olm_certs::ca_hash(&bundle);
        let secret_hash = stored
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(labels::CA_HASH));
        let stored_bundle = stored
            .data
            .as_ref()
            .and_then(|d| d.get(OLM_CA_KEY))
            .map(|b| String::from_utf8_lossy(&b.0).into_owned());
        if secret_hash != Some(&hash) || stored_bundle.as_deref() != Some(bundle.as_str()) {
            errors.push(format!(
                "secret {secret} CA cert hash does not match expected"
            ));
            continue;
        }
        let Some((template_hash, account)) = facts.deployments.get(deployment) else {
            errors.push(not_found("deployments.apps", deployment));
            continue;
        };
        if template_hash.as_deref() != Some(hash.as_str()) {
            errors.push(format!(
                "deployment {deployment} CA cert hash does not match expected"
            ));
            continue;
        }
        let account = account
            .clone()
            .filter(|a| !a.is_empty())
            .unwrap_or_else(|| super::certs::DEFAULT_SERVICE_ACCOUNT.to_owned());
        if !facts.service_accounts.contains(&account) {
            errors.push(not_found("serviceaccounts", &account));
        }
        if !facts.roles.contains(&secret) {
            errors.push(not_found("roles.rbac.authorization.k8s.io", &secret));
        }
        if !facts.role_bindings.contains(&secret) {
            errors.push(not_found("rolebindings.rbac.authorization.k8s.io", &secret));
        }
        let delegator = auth_delegator_binding_name(&service);
        if !facts.cluster_role_bindings.contains(&delegator) {
            errors.push(not_found(
                "clusterrolebindings.rbac.authorization.k8s.io",
                &delegator,
            ));
        }
        let reader = auth_reader_binding_name(&service);
        if !facts.kube_system_role_bindings.contains(&reader) {
            errors.push(not_found("rolebindings.rbac.authorization.k8s.io", &reader));
        }
    }
    if errors.is_empty() {
        ApiServiceResources::Healthy
    } else {
        broken(errors, true)
    }
}

/// Upstream's aggregate error text: the one message, or `[a, b]`.
fn broken(errors: Vec<String>, actionable: bool) -> ApiServiceResources {
    let message = match errors.as_slice() {
        [only] => only.clone(),
        _ => format!("[{}]", errors.join(", ")),
    };
    ApiServiceResources::Broken {
        message,
        actionable,
    }
}
