//! What the serving decisions look at: the CSV's certificates, Services,
//! RBAC, APIServices and webhook configurations, read at sync time.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::{Duration, SystemTime},
};

use jiff::Timestamp;
use k8s_openapi::{
    api::{
        admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration},
        apps::v1::Deployment,
        core::v1::{Pod, Secret, Service, ServiceAccount},
        rbac::v1::{ClusterRoleBinding, Role, RoleBinding},
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    kube_aggregator::pkg::apis::apiregistration::v1::APIService,
};
use kube::{Api, Client, ResourceExt};
use olm_api::ownership::owner_labels;
use olm_api::{
    csv::{ClusterServiceVersion, CsvPhase, WebhookAdmissionType},
    labels,
};

use crate::{
    Error,
    decide::{
        api_service::{
            ApiServiceResourceFacts, Discovery, api_service_name, api_service_resources,
            api_services_check, backend_disrupted, is_available, owner_conflict,
        },
        certs::{
            CertOutlook, KUBE_SYSTEM, ServingCertInjection, ServingTarget,
            auth_delegator_binding_name, auth_reader_binding_name, cert_outlook,
            has_serving_resources, injections_from_secrets, serving_targets,
        },
        csv_phase::{ApiServiceResources, ApiServicesCheck, WebhooksCheck},
        webhook::{ObservedWebhooks, webhooks_check},
    },
};

use super::{
    ROTATION_SLACK, get_opt, kube_error, namespace_of, owned_api_services, selector, target_secrets,
};

/// What the CSV's sync needs to know about its serving resources.
#[derive(Debug)]
pub(crate) struct ServingObservation {
    /// Certificates to mount into the expected Deployments; `None` when a
    /// Secret is missing (the expected Deployments cannot be computed).
    pub(crate) injections: Option<Vec<ServingCertInjection>>,
    /// Whether certificates are due, and when they next will be.
    pub(crate) outlook: CertOutlook,
    /// The install check of owned APIServices.
    pub(crate) api_services: ApiServicesCheck,
    /// The install check of webhooks.
    pub(crate) webhooks: WebhooksCheck,
    /// Health of owned-APIService resources (Succeeded and Failed CSVs).
    pub(crate) resources: ApiServiceResources,
    /// Whether an owned APIService exists that the CSV may not adopt.
    pub(crate) owner_conflict: bool,
}

impl Default for ServingObservation {
    fn default() -> Self {
        Self {
            injections: Some(Vec::new()),
            outlook: CertOutlook::default(),
            api_services: ApiServicesCheck::Available,
            webhooks: WebhooksCheck::Available,
            resources: ApiServiceResources::Healthy,
            owner_conflict: false,
        }
    }
}

impl ServingObservation {
    /// How long until the certificates need a step, when they will.
    pub(crate) fn next_rotation_in(&self, now: SystemTime) -> Option<Duration> {
        let next = olm_certs::policy::system_time(self.outlook.next?);
        Some(next.duration_since(now).unwrap_or_default() + ROTATION_SLACK)
    }
}

/// Reads the CSV's serving resources and runs the checks over them.
pub(crate) async fn observe(
    context: &crate::controller::Context,
    csv: &ClusterServiceVersion,
    deployments: &[Deployment],
) -> Result<ServingObservation, Error> {
    if !has_serving_resources(csv) {
        return Ok(ServingObservation::default());
    }
    let client = &context.client;
    let policy = &context.config.certificates;
    let namespace = namespace_of(csv);
    let targets = serving_targets(csv);
    let secrets = target_secrets(client, csv, &targets).await?;
    let now = SystemTime::now();
    let mut observation = ServingObservation {
        injections: injections_from_secrets(&targets, &secrets),
        outlook: cert_outlook(&targets, &secrets, &namespace, now, policy),
        ..ServingObservation::default()
    };

    if !csv.spec.owned_api_services().is_empty() {
        let csvs = all_csvs(context);
        let csvs = csvs.as_slice();
        let found = owned_api_services(client, csv).await?;
        observation.owner_conflict = owner_conflict(csv, &found, csvs);
        let discovery = discover(client, csv, &found).await;
        let disrupted = if found.values().all(is_available) {
            false
        } else {
            backend_disrupted(
                &disrupted_pods(client, csv, deployments).await?,
                Timestamp::now(),
            )
        };
        observation.api_services = api_services_check(csv, &found, &discovery, disrupted);
        let phase = crate::decide::csv_status::phase_of(&csv.status.clone().unwrap_or_default());
        if phase == CsvPhase::SUCCEEDED || phase == CsvPhase::FAILED {
            let facts =
                resource_facts(client, csv, found, secrets.clone(), deployments, &targets).await?;
            observation.resources = api_service_resources(csv, csvs, &facts);
        }
    }

    if !csv.spec.webhooks().is_empty() {
        let crds: Vec<CustomResourceDefinition> = context
            .caches
            .crds
            .state()
            .iter()
            .map(|crd| CustomResourceDefinition::clone(crd))
            .collect();
        let observed = observe_webhooks(client, csv, &crds).await?;
        observation.webhooks = webhooks_check(csv, &observed);
    }
    Ok(observation)
}

/// Every CSV in the cache (copies excluded), for APIService adoption.
pub(crate) fn all_csvs(context: &crate::controller::Context) -> Vec<ClusterServiceVersion> {
    context
        .caches
        .csvs
        .state()
        .iter()
        .map(|c| ClusterServiceVersion::clone(c))
        .collect()
}

/// The GVKs of available owned APIServices that discovery lists.
async fn discover(
    client: &Client,
    csv: &ClusterServiceVersion,
    found: &BTreeMap<String, APIService>,
) -> Discovery {
    let mut discovery = Discovery::default();
    for description in csv.spec.owned_api_services() {
        if !found
            .get(&api_service_name(description))
            .is_some_and(is_available)
        {
            continue;
        }
        let group_version = format!("{}/{}", description.group, description.version);
        match client.list_api_group_resources(&group_version).await {
            Ok(list) if list.resources.iter().any(|r| r.kind == description.kind) => {
                discovery
                    .discovered
                    .insert(crate::decide::api_service::served_gvk(description));
            }
            Ok(_) => {}
            Err(error) => {
                tracing::debug!(group_version, %error, "apiservice not discoverable");
                discovery.error.get_or_insert_with(|| error.to_string());
            }
        }
    }
    discovery
}

/// The pods of the CSV's Deployments that have unavailable or outdated
/// replicas.
async fn disrupted_pods(
    client: &Client,
    csv: &ClusterServiceVersion,
    deployments: &[Deployment],
) -> Result<Vec<Pod>, Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace_of(csv));
    let mut out = Vec::new();
    for strategy in &csv.spec.install.spec.deployments {
        let Some(deployment) = deployments
            .iter()
            .find(|d| d.metadata.name.as_deref() == Some(strategy.name.as_str()))
        else {
            continue;
        };
        let status = deployment.status.clone().unwrap_or_default();
        let rolling = status.unavailable_replicas.unwrap_or(0) > 0
            || status.updated_replicas.unwrap_or(0) < status.replicas.unwrap_or(0);
        let Some(match_labels) = deployment
            .spec
            .as_ref()
            .and_then(|s| s.selector.match_labels.clone())
        else {
            continue;
        };
        if !rolling || match_labels.is_empty() {
            continue;
        }
        let list = pods
            .list(&selector(&match_labels))
            .await
            .map_err(kube_error("list", "Pod", strategy.name.clone()))?;
        out.extend(list.items);
    }
    Ok(out)
}

async fn exists<K>(api: &Api<K>, kind: &'static str, name: &str) -> Result<bool, Error>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    Ok(get_opt(api, kind, name).await?.is_some())
}

async fn resource_facts(
    client: &Client,
    csv: &ClusterServiceVersion,
    api_services: BTreeMap<String, APIService>,
    secrets: BTreeMap<String, Secret>,
    deployments: &[Deployment],
    targets: &[ServingTarget],
) -> Result<ApiServiceResourceFacts, Error> {
    let namespace = namespace_of(csv);
    let services: Api<Service> = Api::namespaced(client.clone(), &namespace);
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &namespace);
    let roles: Api<Role> = Api::namespaced(client.clone(), &namespace);
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), &namespace);
    let cluster_bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    let kube_system: Api<RoleBinding> = Api::namespaced(client.clone(), KUBE_SYSTEM);
    let mut facts = ApiServiceResourceFacts {
        api_services,
        secrets,
        ..ApiServiceResourceFacts::default()
    };
    for deployment in deployments {
        let name = deployment.name_any();
        let template = deployment.spec.as_ref().map(|s| &s.template);
        facts.deployments.insert(
            name,
            (
                template
                    .and_then(|t| t.metadata.as_ref())
                    .and_then(|m| m.annotations.as_ref())
                    .and_then(|a| a.get(labels::CA_HASH).cloned()),
                template
                    .and_then(|t| t.spec.as_ref())
                    .and_then(|s| s.service_account_name.clone()),
            ),
        );
    }
    for target in targets.iter().filter(|t| t.serves_api_service) {
        if exists(&services, "Service", &target.service).await? {
            facts.services.insert(target.service.clone());
        }
        if exists(&accounts, "ServiceAccount", &target.service_account).await? {
            facts
                .service_accounts
                .insert(target.service_account.clone());
        }
        if exists(&roles, "Role", &target.secret).await? {
            facts.roles.insert(target.secret.clone());
        }
        if exists(&bindings, "RoleBinding", &target.secret).await? {
            facts.role_bindings.insert(target.secret.clone());
        }
        let delegator = auth_delegator_binding_name(&target.service);
        if exists(&cluster_bindings, "ClusterRoleBinding", &delegator).await? {
            facts.cluster_role_bindings.insert(delegator);
        }
        let reader = auth_reader_binding_name(&target.service);
        if exists(&kube_system, "RoleBinding", &reader).await? {
            facts.kube_system_role_bindings.insert(reader);
        }
    }
    Ok(facts)
}

pub(super) fn labels_by_name<K: kube::Resource>(
    items: Vec<K>,
) -> BTreeMap<String, BTreeMap<String, String>> {
    items
        .into_iter()
        .filter_map(|item| {
            let meta = item.meta();
            Some((meta.name.clone()?, meta.labels.clone().unwrap_or_default()))
        })
        .collect()
}

async fn observe_webhooks(
    client: &Client,
    csv: &ClusterServiceVersion,
    crds: &[CustomResourceDefinition],
) -> Result<ObservedWebhooks, Error> {
    let owned = selector(&owner_labels(csv));
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let wanted: BTreeSet<&String> = csv
        .spec
        .webhooks()
        .iter()
        .filter(|d| d.type_ == WebhookAdmissionType::CONVERSION)
        .flat_map(|d| d.conversion_crds.iter().flatten())
        .collect();
    Ok(ObservedWebhooks {
        validating: labels_by_name(
            validating
                .list_metadata(&owned)
                .await
                .map_err(kube_error(
                    "list",
                    "ValidatingWebhookConfiguration",
                    csv.name_any(),
                ))?
                .items,
        ),
        mutating: labels_by_name(
            mutating
                .list_metadata(&owned)
                .await
                .map_err(kube_error(
                    "list",
                    "MutatingWebhookConfiguration",
                    csv.name_any(),
                ))?
                .items,
        ),
        conversion_crds: crds
            .iter()
            .filter(|crd| {
                crd.metadata
                    .name
                    .as_ref()
                    .is_some_and(|n| wanted.contains(n))
            })
            .map(|crd| (crd.name_any(), crd.clone()))
            .collect(),
    })
}
