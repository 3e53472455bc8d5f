//! Carrying out the serving decisions: Services, certificates, RBAC,
//! APIServices and webhook configurations written before the Deployments,
//! and removed with the CSV.

use std::{collections::BTreeMap, time::SystemTime};

use jiff::Timestamp;
use k8s_openapi::{
    api::{
        admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration},
        core::v1::Secret,
        rbac::v1::{ClusterRoleBinding, RoleBinding},
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    kube_aggregator::pkg::apis::apiregistration::v1::APIService,
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ListParams, PostParams},
};
use olm_api::ownership::owner_labels;
use olm_api::{
    csv::{ClusterServiceVersion, WebhookAdmissionType},
    labels,
    operator_group::OperatorGroup,
};
use olm_certs::RotationPolicy;

use super::super::FIELD_MANAGER;
use crate::decide::Error as Decision;
use crate::{
    Error,
    decide::{
        api_service::{api_service_name, desired_api_service, is_adoptable},
        certs::{
            KUBE_SYSTEM, ServingCertInjection, ServingTarget, auth_delegator_binding,
            auth_reader_binding, ca_key_secret_for, has_serving_resources, material_from_secrets,
            secret_for, secret_reader_binding, secret_reader_role, service_for, serving_targets,
        },
        csv_phase::IssuedCertificates,
        webhook::{
            AdmissionConfiguration, configuration, conversion_crds, conversions_to_reset,
            description_selector, namespace_selector, removed_configurations,
            updated_configuration, with_conversion_webhook, without_conversion_webhook,
        },
    },
};

use super::observe::labels_by_name;
use super::{get_opt, kube_error, namespace_of, selector};

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
        .map_err(Error::runtime(
            "cannot apply auth delegator cluster role binding",
        ))?;
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
        .map_err(Error::runtime(what))
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
            .map_err(Error::runtime(
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
            .map_err(Error::runtime(
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
