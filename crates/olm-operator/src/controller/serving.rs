//! Owned APIServices and webhooks carried out: reading what the decisions of
//! [`crate::decide::certs`], [`crate::decide::api_service`] and
//! [`crate::decide::webhook`] look at, and applying what they return.
//!
//! Only CSVs that own an APIService or declare a webhook cost any request
//! here; their objects are read with direct GETs and label-selected LISTs at
//! sync time. Metadata-only watches on OLM-managed Secrets, webhook
//! configurations and APIServices wake the owning CSV when one changes or
//! goes (see `wakeups`); the certificates' own next rotation time and the
//! resync do the rest.

use crate::decide::Error as Decision;
use olm_api::ownership::owner_labels;
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
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ListParams, PostParams},
};
use olm_api::{
    csv::{ClusterServiceVersion, CsvPhase, WebhookAdmissionType},
    labels,
    operator_group::OperatorGroup,
};
use olm_certs::RotationPolicy;

use super::FIELD_MANAGER;
use crate::{
    Error,
    decide::{
        api_service::{
            ApiServiceResourceFacts, Discovery, api_service_name, api_service_resources,
            api_services_check, backend_disrupted, desired_api_service, is_adoptable, is_available,
            owner_conflict,
        },
        certs::{
            CertOutlook, KUBE_SYSTEM, ServingCertInjection, ServingTarget, auth_delegator_binding,
            auth_delegator_binding_name, auth_reader_binding, auth_reader_binding_name,
            ca_key_secret_for, cert_outlook, has_serving_resources, injections_from_secrets,
            material_from_secrets, secret_for, secret_reader_binding, secret_reader_role,
            service_for, serving_targets,
        },
        csv_phase::{ApiServiceResources, ApiServicesCheck, IssuedCertificates, WebhooksCheck},
        webhook::{
            AdmissionConfiguration, ObservedWebhooks, configuration, conversion_crds,
            conversions_to_reset, description_selector, namespace_selector, removed_configurations,
            updated_configuration, webhooks_check, with_conversion_webhook,
            without_conversion_webhook,
        },
    },
};

/// Extra delay on top of a certificate's next rotation time, so the sync
/// lands after it (certificates have second precision).
const ROTATION_SLACK: Duration = Duration::from_secs(1);

fn kube_error(
    action: &'static str,
    kind: &'static str,
    name: impl Into<String>,
) -> impl FnOnce(kube::Error) -> Error {
    let name = name.into();
    move |source| Error::Kube {
        action,
        kind,
        name,
        source: Box::new(source),
    }
}

fn runtime(what: &'static str) -> impl FnOnce(olm_runtime::Error) -> Error {
    move |source| Error::Runtime {
        what,
        source: Box::new(source),
    }
}

fn selector(wanted: &BTreeMap<String, String>) -> ListParams {
    ListParams::default().labels(
        &wanted
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(","),
    )
}

fn namespace_of(csv: &ClusterServiceVersion) -> String {
    csv.metadata.namespace.clone().unwrap_or_default()
}

async fn get_opt<K>(api: &Api<K>, kind: &'static str, name: &str) -> Result<Option<K>, Error>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    api.get_opt(name)
        .await
        .map_err(kube_error("read", kind, name))
}

/// The stored Secrets of the CSV's serving targets, by name.
async fn target_secrets(
    client: &Client,
    csv: &ClusterServiceVersion,
    targets: &[ServingTarget],
) -> Result<BTreeMap<String, Secret>, Error> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace_of(csv));
    let mut found = BTreeMap::new();
    for target in targets {
        for name in [target.secret.clone(), target.ca_key_secret()] {
            if let Some(secret) = get_opt(&secrets, "Secret", &name).await? {
                found.insert(name, secret);
            }
        }
    }
    Ok(found)
}

/// The owned APIServices found, by name.
async fn owned_api_services(
    client: &Client,
    csv: &ClusterServiceVersion,
) -> Result<BTreeMap<String, APIService>, Error> {
    let api: Api<APIService> = Api::all(client.clone());
    let mut found = BTreeMap::new();
    for description in csv.spec.owned_api_services() {
        let name = api_service_name(description);
        if let Some(object) = get_opt(&api, "APIService", &name).await? {
            found.insert(name, object);
        }
    }
    Ok(found)
}

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
    context: &super::Context,
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
pub(crate) fn all_csvs(context: &super::Context) -> Vec<ClusterServiceVersion> {
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

fn labels_by_name<K: kube::Resource>(items: Vec<K>) -> BTreeMap<String, BTreeMap<String, String>> {
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

/// What the installer needs besides the CSV.
#[derive(Clone, Copy)]
pub(crate) struct ServingInputs<'a> {
    /// OLM's own client. APIServices, webhook configurations and CRD
    /// conversion are cluster-wide registrations OLM makes on the operator's
    /// behalf, as upstream does with its own client: a scoped install's
    /// service account need not be allowed to write them.
    pub(crate) olm_client: &'a Client,
    /// Lifetimes and thresholds of the certificates.
    pub(crate) policy: &'a RotationPolicy,
    /// The CSV's OperatorGroup (for the webhooks' namespace selector).
    pub(crate) operator_group: Option<&'a OperatorGroup>,
    /// Every CSV (for APIService adoption).
    pub(crate) csvs: &'a [ClusterServiceVersion],
    /// `config.annotations` of the Subscription that installed the CSV.
    pub(crate) subscription_annotations: Option<&'a BTreeMap<String, String>>,
}

/// What the serving part of an install produced.
#[derive(Debug, Default)]
pub(crate) struct ServingInstall {
    /// Certificates to mount into the Deployments.
    pub(crate) injections: Vec<ServingCertInjection>,
    /// Set when certificates were issued or renewed, or are not yet recorded
    /// on the CSV.
    pub(crate) certificates: Option<IssuedCertificates>,
}

/// Installs the Services, certificates, RBAC, APIServices and webhooks of
/// the CSV (upstream's `installCertRequirements`, `createOrUpdateAPIService`
/// and `createOrUpdateWebhook`), before its Deployments.
pub(crate) async fn install(
    client: &Client,
    csv: &ClusterServiceVersion,
    inputs: ServingInputs<'_>,
) -> Result<ServingInstall, Error> {
    let mut out = ServingInstall::default();
    if !has_serving_resources(csv) {
        return Ok(out);
    }
    let namespace = namespace_of(csv);
    let now = SystemTime::now();
    let mut bundles: BTreeMap<String, String> = BTreeMap::new();
    let mut issued = false;
    let mut next: Option<i64> = None;
    for target in serving_targets(csv) {
        apply(
            client,
            &namespace,
            &service_for(csv, &target),
            "cannot apply service",
        )
        .await?;
        let (material, changed, target_next) =
            ensure_certificates(client, csv, &target, inputs.policy, now).await?;
        issued |= changed;
        next = Some(next.map_or(target_next, |n: i64| n.min(target_next)));
        apply(
            client,
            &namespace,
            &secret_reader_role(csv, &target),
            "cannot apply secret role",
        )
        .await?;
        apply(
            client,
            &namespace,
            &secret_reader_binding(csv, &target),
            "cannot apply secret role binding",
        )
        .await?;
        olm_runtime::apply::apply(
            &Api::<ClusterRoleBinding>::all(client.clone()),
            &FIELD_MANAGER,
            &auth_delegator_binding(csv, &target),
        )
        .await
        .map_err(runtime("cannot apply auth delegator cluster role binding"))?;
        apply(
            client,
            KUBE_SYSTEM,
            &auth_reader_binding(csv, &target),
            "cannot apply auth reader role binding",
        )
        .await?;
        out.injections.push(ServingCertInjection {
            deployment: target.deployment.clone(),
            secret: target.secret.clone(),
            ca_hash: olm_certs::ca_hash(&material.ca_bundle_pem),
        });
        bundles.insert(target.deployment.clone(), material.ca_bundle_pem);
    }
    let bundle_for = |deployment: Option<&str>| {
        bundles
            .get(deployment.unwrap_or_default())
            .cloned()
            .ok_or_else(|| {
                Error::from(Decision::Serving {
                    message: format!(
                        "no serving certificate for deployment {:?}",
                        deployment.unwrap_or_default()
                    ),
                })
            })
    };
    for description in csv.spec.owned_api_services() {
        let bundle = bundle_for(description.deployment_name.as_deref())?;
        install_api_service(inputs.olm_client, csv, description, &bundle, inputs).await?;
    }
    for description in csv.spec.webhooks() {
        let bundle = bundle_for(description.deployment_name.as_deref())?;
        install_webhook(
            inputs.olm_client,
            csv,
            description,
            &bundle,
            inputs.operator_group,
        )
        .await?;
    }
    remove_undeclared_webhooks(inputs.olm_client, csv).await?;
    // A retried install finds the certificates it issued last time still
    // valid; if that attempt's status write was lost, record them now so
    // `certsLastUpdated`/`certsRotateAt` are never missing on a CSV whose
    // serving certificates exist.
    let unrecorded = csv
        .status
        .as_ref()
        .is_none_or(|status| status.certs_last_updated.is_none());
    if issued || unrecorded {
        let issued_at = Timestamp::now();
        let rotate_at = next
            .and_then(|n| Timestamp::from_second(n).ok())
            .unwrap_or(issued_at);
        out.certificates = Some(IssuedCertificates {
            issued_at,
            rotate_at,
        });
    }
    Ok(out)
}

async fn apply<K>(
    client: &Client,
    namespace: &str,
    object: &K,
    what: &'static str,
) -> Result<(), Error>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::Serialize
        + serde::de::DeserializeOwned,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    olm_runtime::apply::apply(&api, &FIELD_MANAGER, object)
        .await
        .map(|_| ())
        .map_err(runtime(what))
}

/// Reads the target's Secrets, lets olm-certs decide from the certificates
/// in them, and writes them back when they changed (each guarded by its
/// resourceVersion): the CA key Secret first, so that a serving certificate
/// is never stored under a CA whose key was lost. Returns the material,
/// whether it changed, and when it next needs a step.
async fn ensure_certificates(
    client: &Client,
    csv: &ClusterServiceVersion,
    target: &ServingTarget,
    policy: &RotationPolicy,
    now: SystemTime,
) -> Result<(olm_certs::Material, bool, i64), Error> {
    let namespace = namespace_of(csv);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    let existing = get_opt(&secrets, "Secret", &target.secret).await?;
    let existing_ca_key = get_opt(&secrets, "Secret", &target.ca_key_secret()).await?;
    let stored = existing
        .as_ref()
        .and_then(|s| material_from_secrets(s, existing_ca_key.as_ref()));
    let outcome = olm_certs::reconcile(stored.as_ref(), now, policy, &target.profile(&namespace))
        .map_err(|source| Decision::Certificates {
        deployment: target.deployment.clone(),
        source,
    })?;
    write_secret(
        &secrets,
        csv,
        existing_ca_key.as_ref(),
        ca_key_secret_for(csv, target, &outcome.material),
    )
    .await?;
    write_secret(
        &secrets,
        csv,
        existing.as_ref(),
        secret_for(csv, target, &outcome.material),
    )
    .await?;
    for step in &outcome.steps {
        tracing::info!(secret = target.secret, ?step, "serving certificate step");
    }
    let changed = outcome.changed();
    Ok((outcome.material, changed, outcome.next))
}

/// Creates `desired`, or replaces `existing` with it when its data, CA-hash
/// annotation or owner labels differ (a serving Secret that still holds the
/// CA key differs, and so loses it).
async fn write_secret(
    secrets: &Api<Secret>,
    csv: &ClusterServiceVersion,
    existing: Option<&Secret>,
    mut desired: Secret,
) -> Result<(), Error> {
    let name = desired.metadata.name.clone().unwrap_or_default();
    let ca_hash = |s: &Secret| {
        s.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(labels::CA_HASH))
            .cloned()
    };
    match existing {
        None => {
            secrets
                .create(&PostParams::default(), &desired)
                .await
                .map_err(kube_error("create", "Secret", name))?;
        }
        Some(current)
            if current.data != desired.data
                || ca_hash(current) != ca_hash(&desired)
                || !olm_api::ownership::has_owner_labels(current.metadata.labels.as_ref(), csv) =>
        {
            desired.metadata.resource_version = current.metadata.resource_version.clone();
            secrets
                .replace(&name, &PostParams::default(), &desired)
                .await
                .map_err(kube_error("replace", "Secret", name))?;
        }
        Some(_) => {}
    }
    Ok(())
}

async fn install_api_service(
    client: &Client,
    csv: &ClusterServiceVersion,
    description: &olm_api::csv::ApiServiceDescription,
    bundle: &str,
    inputs: ServingInputs<'_>,
) -> Result<(), Error> {
    let api: Api<APIService> = Api::all(client.clone());
    let name = api_service_name(description);
    let existing = get_opt(&api, "APIService", &name).await?;
    if let Some(current) = &existing
        && !is_adoptable(current.metadata.labels.as_ref(), csv, inputs.csvs)
    {
        return Err(Decision::Serving {
            message: format!(
                "pre-existing APIService {}.{} is not adoptable",
                description.version, description.group
            ),
        }
        .into());
    }
    let desired = desired_api_service(
        csv,
        description,
        existing.as_ref(),
        bundle,
        inputs.subscription_annotations,
    );
    match existing {
        Some(current) if current.metadata == desired.metadata && current.spec == desired.spec => {}
        Some(_) => {
            api.replace(&name, &PostParams::default(), &desired)
                .await
                .map_err(kube_error("replace", "APIService", name.clone()))?;
        }
        None => {
            api.create(&PostParams::default(), &desired)
                .await
                .map_err(kube_error("create", "APIService", name.clone()))?;
        }
    }
    Ok(())
}

/// Creates the admission configuration of a description, or brings the
/// existing ones (found by their owner labels) up to date.
async fn ensure_configuration<C>(
    client: &Client,
    csv: &ClusterServiceVersion,
    description: &olm_api::csv::WebhookDescription,
    namespace_selector: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    bundle: &str,
    listed: &ListParams,
) -> Result<(), Error>
where
    C: AdmissionConfiguration
        + kube::Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
        + serde::Serialize
        + serde::de::DeserializeOwned,
{
    let kind = <C as AdmissionConfiguration>::KIND;
    let api: Api<C> = Api::all(client.clone());
    let existing = api
        .list(listed)
        .await
        .map_err(kube_error("list", kind, csv.name_any()))?;
    if existing.items.is_empty() {
        let desired: C = configuration(csv, description, namespace_selector, bundle)?;
        api.create(&PostParams::default(), &desired)
            .await
            .map_err(kube_error(
                "create",
                kind,
                description.generate_name.clone(),
            ))?;
    }
    for current in existing.items {
        let name = current.name_any();
        if let Some(updated) =
            updated_configuration(current, csv, description, namespace_selector, bundle)?
        {
            api.replace(&name, &PostParams::default(), &updated)
                .await
                .map_err(kube_error("replace", kind, name.clone()))?;
        }
    }
    Ok(())
}

async fn install_webhook(
    client: &Client,
    csv: &ClusterServiceVersion,
    description: &olm_api::csv::WebhookDescription,
    bundle: &str,
    group: Option<&OperatorGroup>,
) -> Result<(), Error> {
    let serving = |message: String| Error::from(Decision::Serving { message });
    let selector_of = || -> Result<_, Error> {
        match group {
            Some(group) => namespace_selector(group).map_err(serving),
            None => Err(serving("error retrieving OperatorGroup info".to_owned())),
        }
    };
    let listed = selector(&description_selector(csv, description));
    if description.type_ == WebhookAdmissionType::VALIDATING {
        let ns_selector = selector_of()?;
        ensure_configuration::<ValidatingWebhookConfiguration>(
            client,
            csv,
            description,
            ns_selector.as_ref(),
            bundle,
            &listed,
        )
        .await?;
    } else if description.type_ == WebhookAdmissionType::MUTATING {
        let ns_selector = selector_of()?;
        ensure_configuration::<MutatingWebhookConfiguration>(
            client,
            csv,
            description,
            ns_selector.as_ref(),
            bundle,
            &listed,
        )
        .await?;
    } else if description.type_ == WebhookAdmissionType::CONVERSION {
        let api: Api<CustomResourceDefinition> = Api::all(client.clone());
        for name in conversion_crds(description).map_err(serving)? {
            let Some(crd) = get_opt(&api, "CustomResourceDefinition", name).await? else {
                return Err(serving(format!(
                    "unable to get CRD {name} specified in Conversion Webhook: customresourcedefinitions.apiextensions.k8s.io \"{name}\" not found"
                )));
            };
            let desired =
                with_conversion_webhook(csv, description, &crd, bundle).map_err(serving)?;
            if desired.spec.conversion == crd.spec.conversion {
                continue;
            }
            api.replace(name, &PostParams::default(), &desired)
                .await
                .map_err(kube_error(
                    "update conversion of",
                    "CustomResourceDefinition",
                    name.clone(),
                ))?;
        }
    }
    Ok(())
}

/// Deletes the CSV's webhook configurations whose description it no longer
/// declares (upstream's `cleanUpRemovedWebhooks`).
async fn remove_undeclared_webhooks(
    client: &Client,
    csv: &ClusterServiceVersion,
) -> Result<(), Error> {
    let owned = selector(&owner_labels(csv));
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let found = validating.list_metadata(&owned).await.map_err(kube_error(
        "list",
        "ValidatingWebhookConfiguration",
        csv.name_any(),
    ))?;
    for name in removed_configurations(csv, &labels_by_name(found.items)) {
        olm_runtime::apply::delete_if_exists(&validating, &name)
            .await
            .map_err(runtime(
                "cannot delete removed validating webhook configuration",
            ))?;
    }
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let found = mutating.list_metadata(&owned).await.map_err(kube_error(
        "list",
        "MutatingWebhookConfiguration",
        csv.name_any(),
    ))?;
    for name in removed_configurations(csv, &labels_by_name(found.items)) {
        olm_runtime::apply::delete_if_exists(&mutating, &name)
            .await
            .map_err(runtime(
                "cannot delete removed mutating webhook configuration",
            ))?;
    }
    Ok(())
}

/// The serving part of a deleted CSV's cleanup: its webhook
/// configurations, APIServices and kube-system auth-reader bindings (by
/// owner labels), and, unless another CSV replaces it, the conversion of
/// the CRDs its conversion webhooks served, back to `None`.
pub(crate) async fn cleanup(
    client: &Client,
    csv: &ClusterServiceVersion,
    namespace_csvs: &[ClusterServiceVersion],
) -> Result<(), Error> {
    if !has_serving_resources(csv) {
        return Ok(());
    }
    let owned = selector(&owner_labels(csv));
    let delete = DeleteParams::background();
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .delete_collection(&delete, &owned)
        .await
        .map_err(kube_error(
            "delete",
            "ValidatingWebhookConfiguration",
            csv.name_any(),
        ))?;
    Api::<MutatingWebhookConfiguration>::all(client.clone())
        .delete_collection(&delete, &owned)
        .await
        .map_err(kube_error(
            "delete",
            "MutatingWebhookConfiguration",
            csv.name_any(),
        ))?;
    Api::<APIService>::all(client.clone())
        .delete_collection(&delete, &owned)
        .await
        .map_err(kube_error("delete", "APIService", csv.name_any()))?;
    Api::<RoleBinding>::namespaced(client.clone(), KUBE_SYSTEM)
        .delete_collection(&delete, &owned)
        .await
        .map_err(kube_error("delete", "RoleBinding", csv.name_any()))?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for name in conversions_to_reset(csv, namespace_csvs) {
        let Some(crd) = get_opt(&crds, "CustomResourceDefinition", &name).await? else {
            continue;
        };
        let reset = without_conversion_webhook(&crd);
        if reset.spec.conversion == crd.spec.conversion {
            continue;
        }
        crds.replace(&name, &PostParams::default(), &reset)
            .await
            .map_err(kube_error(
                "reset conversion of",
                "CustomResourceDefinition",
                name.clone(),
            ))?;
    }
    Ok(())
}

/// Metadata-only watches that wake a CSV when one of its serving objects
/// changes or goes: certificate Secrets (`olm.managed`), webhook
/// configurations and APIServices carrying its owner labels. Nothing is
/// cached from them beyond metadata (no Secret data is held in memory).
pub(crate) fn wakeups(
    client: &Client,
    secrets: Api<kube::core::PartialObjectMeta<Secret>>,
    readiness: &olm_runtime::admin::Readiness,
    csv_tx: &futures::channel::mpsc::UnboundedSender<
        kube::runtime::reflector::ObjectRef<ClusterServiceVersion>,
    >,
) -> Vec<futures::future::BoxFuture<'static, ()>> {
    fn watch<K>(
        api: Api<kube::core::PartialObjectMeta<K>>,
        gate: olm_runtime::admin::ReadinessGate,
        csv_tx: &futures::channel::mpsc::UnboundedSender<
            kube::runtime::reflector::ObjectRef<ClusterServiceVersion>,
        >,
    ) -> futures::future::BoxFuture<'static, ()>
    where
        K: kube::Resource<DynamicType = ()> + Clone + std::fmt::Debug + Send + Sync + 'static,
    {
        use kube::runtime::{WatchStreamExt, watcher};
        let csv_tx = csv_tx.clone();
        let stream = watcher(
            api,
            watcher::Config::default().labels(&format!(
                "{}={}",
                labels::MANAGED,
                labels::MANAGED_VALUE
            )),
        )
        .default_backoff();
        olm_runtime::cache::reflect_stream(
            stream,
            gate,
            move |object: &kube::core::PartialObjectMeta<K>, _| {
                if let Some(owner) = super::owner_of(object.labels()) {
                    let _ = csv_tx.unbounded_send(owner);
                }
            },
        )
        .task
    }
    vec![
        watch::<Secret>(secrets, readiness.gate("cache:Secret"), csv_tx),
        watch::<ValidatingWebhookConfiguration>(
            Api::all(client.clone()),
            readiness.gate("cache:ValidatingWebhookConfiguration"),
            csv_tx,
        ),
        watch::<MutatingWebhookConfiguration>(
            Api::all(client.clone()),
            readiness.gate("cache:MutatingWebhookConfiguration"),
            csv_tx,
        ),
        watch::<APIService>(
            Api::all(client.clone()),
            readiness.gate("cache:APIService"),
            csv_tx,
        ),
    ]
}

/// The facts the requirement check needs about aggregated and native APIs:
/// each required APIService (`<version>.<group>`), and which of the GVKs
/// named by required APIServices and `nativeAPIs` discovery lists. Costs
/// nothing for a CSV naming neither.
pub(crate) async fn requirement_discovery(
    client: &Client,
    csv: &ClusterServiceVersion,
) -> (
    BTreeMap<String, crate::decide::requirements::ApiServiceFacts>,
    BTreeSet<olm_api::csv::GroupVersionKind>,
) {
    let mut api_services = BTreeMap::new();
    let mut wanted: BTreeSet<olm_api::csv::GroupVersionKind> =
        csv.spec.native_apis.iter().flatten().cloned().collect();
    let api: Api<APIService> = Api::all(client.clone());
    for description in csv.spec.required_api_services() {
        let name = api_service_name(description);
        match api.get_opt(&name).await {
            Ok(Some(found)) => {
                api_services.insert(
                    name,
                    crate::decide::requirements::ApiServiceFacts::of(&found),
                );
            }
            Ok(None) => {}
            Err(error) => tracing::debug!(name, %error, "cannot read required apiservice"),
        }
        wanted.insert(crate::decide::api_service::served_gvk(description));
    }
    let mut by_group_version: BTreeMap<(String, String), Vec<olm_api::csv::GroupVersionKind>> =
        BTreeMap::new();
    for gvk in wanted {
        by_group_version
            .entry((gvk.group.clone(), gvk.version.clone()))
            .or_default()
            .push(gvk);
    }
    let mut discovered = BTreeSet::new();
    for ((group, version), gvks) in by_group_version {
        let listed = if group.is_empty() {
            client.list_core_api_resources(&version).await
        } else {
            client
                .list_api_group_resources(&format!("{group}/{version}"))
                .await
        };
        match listed {
            Ok(list) => discovered.extend(
                gvks.into_iter()
                    .filter(|gvk| list.resources.iter().any(|r| r.kind == gvk.kind)),
            ),
            Err(error) => tracing::debug!(group, version, %error, "not discoverable"),
        }
    }
    (api_services, discovered)
}
