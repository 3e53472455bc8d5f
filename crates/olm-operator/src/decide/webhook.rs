//! The webhooks a CSV declares (`spec.webhookdefinitions`), as upstream's
//! `pkg/controller/install/webhook.go` and `areWebhooksAvailable` in
//! `pkg/controller/operators/olm/apiservices.go` build and check them:
//!
//! - a Validating- or MutatingWebhookConfiguration per description, named
//!   `<generateName>-<random>` by the API server, labelled with the owner
//!   labels, `olm.webhook-description-generate-name`,
//!   `olm.webhook-description-hash` and `olm.managed`, holding one webhook
//!   that calls the Service in front of the description's Deployment with
//!   the CA bundle, limited to the OperatorGroup's namespaces;
//! - for conversion webhooks, `spec.conversion` of each owned CRD listed,
//!   reset to `None` when the CSV is deleted and nothing replaces it.
//!
//! `olm.webhook-description-hash` is [`content_hash`] of the description
//! (upstream hashes the Go value; the label only needs to change when the
//! description does).

use std::collections::BTreeMap;

use k8s_openapi::{
    ByteString,
    api::admissionregistration::v1::{
        MutatingWebhook, MutatingWebhookConfiguration, ServiceReference, ValidatingWebhook,
        ValidatingWebhookConfiguration, WebhookClientConfig,
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        CustomResourceConversion, CustomResourceDefinition,
        ServiceReference as CrdServiceReference, WebhookClientConfig as CrdWebhookClientConfig,
        WebhookConversion,
    },
    apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta},
};
use olm_api::ownership::owner_labels;
use olm_api::{
    csv::{ClusterServiceVersion, InstallModeType, WebhookAdmissionType, WebhookDescription},
    labels,
    operator_group::OperatorGroup,
};

use super::Error;
use super::{
    certs::{DEFAULT_SERVICE_PORT, service_name},
    csv_phase::WebhooksCheck,
    hash::content_hash,
};

/// Label with the hash of the description a configuration was built from.
pub const WEBHOOK_HASH_LABEL: &str = "olm.webhook-description-hash";

/// Conversion strategy of a CRD without a conversion webhook.
pub const CONVERSION_NONE: &str = "None";

/// Conversion strategy of a CRD with a conversion webhook.
pub const CONVERSION_WEBHOOK: &str = "Webhook";

/// Path of a conversion webhook whose description names none.
pub const DEFAULT_CONVERSION_PATH: &str = "/";

/// Message of an unready conversion webhook in the install check.
pub const CONVERSION_NOT_READY: &str = "conversionWebhook not ready";

/// The labels selecting the configurations of one description: the owner
/// labels and `olm.webhook-description-generate-name`.
pub fn description_selector(
    csv: &ClusterServiceVersion,
    description: &WebhookDescription,
) -> BTreeMap<String, String> {
    let mut out = owner_labels(csv);
    out.insert(
        labels::WEBHOOK_DESCRIPTION_GENERATE_NAME.to_owned(),
        description.generate_name.clone(),
    );
    out
}

/// The hash label value of a description.
pub fn description_hash(description: &WebhookDescription) -> Result<String, Error> {
    content_hash(description, "webhook description")
}

/// Every label of a description's configuration.
pub fn configuration_labels(
    csv: &ClusterServiceVersion,
    description: &WebhookDescription,
) -> Result<BTreeMap<String, String>, Error> {
    let mut out = description_selector(csv, description);
    out.insert(
        WEBHOOK_HASH_LABEL.to_owned(),
        description_hash(description)?,
    );
    out.insert(labels::MANAGED.to_owned(), labels::MANAGED_VALUE.to_owned());
    Ok(out)
}

/// Upstream's `OperatorGroup.NamespaceLabelSelector`: `None` (every
/// namespace) for a group without targets or selector, the group's selector
/// when it has no explicit targets, else the `olm.operatorgroup.uid/<uid>`
/// label OLM puts on each target namespace.
pub fn namespace_selector(group: &OperatorGroup) -> Result<Option<LabelSelector>, String> {
    if group.spec.target_namespaces.is_empty() {
        return Ok(group.spec.selector.clone());
    }
    let uid = group
        .metadata
        .uid
        .as_deref()
        .filter(|uid| !uid.is_empty())
        .ok_or_else(|| "Missing UID".to_owned())?;
    Ok(Some(LabelSelector {
        match_labels: Some(BTreeMap::from([(
            format!("{}{uid}", labels::OPERATOR_GROUP_UID_PREFIX),
            String::new(),
        )])),
        match_expressions: None,
    }))
}

fn container_port(description: &WebhookDescription) -> i32 {
    description
        .container_port
        .filter(|p| *p > 0)
        .unwrap_or(DEFAULT_SERVICE_PORT)
}

fn client_config(
    csv: &ClusterServiceVersion,
    description: &WebhookDescription,
    ca_bundle: &str,
) -> WebhookClientConfig {
    WebhookClientConfig {
        service: Some(ServiceReference {
            name: service_name(description.deployment_name.as_deref().unwrap_or_default()),
            namespace: csv.metadata.namespace.clone().unwrap_or_default(),
            path: description.webhook_path.clone(),
            port: Some(container_port(description)),
        }),
        ca_bundle: Some(ByteString(ca_bundle.as_bytes().to_vec())),
        url: None,
    }
}

fn configuration_meta(
    csv: &ClusterServiceVersion,
    description: &WebhookDescription,
) -> Result<ObjectMeta, Error> {
    Ok(ObjectMeta {
        generate_name: Some(format!("{}-", description.generate_name)),
        labels: Some(configuration_labels(csv, description)?),
        ..ObjectMeta::default()
    })
}

/// The webhook of a validating description (upstream's
/// `GetValidatingWebhook`).
pub fn validating_webhook(
    csv: &ClusterServiceVersion,
    description: &WebhookDescription,
    namespace_selector: Option<&LabelSelector>,
    ca_bundle: &str,
) -> ValidatingWebhook {
    ValidatingWebhook {
        name: description.generate_name.clone(),
        rules: description.rules.clone(),
        failure_policy: description.failure_policy.clone(),
        match_policy: description.match_policy.clone(),
        namespace_selector: namespace_selector.cloned(),
        object_selector: description.object_selector.clone(),
        side_effects: description.side_effects.clone().unwrap_or_default(),
        timeout_seconds: description.timeout_seconds,
        admission_review_versions: description.admission_review_versions.clone(),
        client_config: client_config(csv, description, ca_bundle),
        match_conditions: None,
    }
}

/// The webhook of a mutating description (upstream's `GetMutatingWebhook`).
pub fn mutating_webhook(
    csv: &ClusterServiceVersion,
    description: &WebhookDescription,
    namespace_selector: Option<&LabelSelector>,
    ca_bundle: &str,
) -> MutatingWebhook {
    MutatingWebhook {
        name: description.generate_name.clone(),
        rules: description.rules.clone(),
        failure_policy: description.failure_policy.clone(),
        match_policy: description.match_policy.clone(),
        namespace_selector: namespace_selector.cloned(),
        object_selector: description.object_selector.clone(),
        side_effects: description.side_effects.clone().unwrap_or_default(),
        timeout_seconds: description.timeout_seconds,
        admission_review_versions: description.admission_review_versions.clone(),
        client_config: client_config(csv, description, ca_bundle),
        reinvocation_policy: description.reinvocation_policy.clone(),
        match_conditions: None,
    }
}

/// The two admission webhook configuration kinds, so that one code path
/// creates and updates both: each holds the one webhook a description makes.
pub trait AdmissionConfiguration:
    k8s_openapi::Metadata<Ty = ObjectMeta> + Clone + std::fmt::Debug + Sized
{
    /// The kind, for messages.
    const KIND: &'static str;
    /// The kind's webhook.
    type Webhook;
    /// The webhook a description makes (upstream's `GetValidatingWebhook` /
    /// `GetMutatingWebhook`).
    fn webhook(
        csv: &ClusterServiceVersion,
        description: &WebhookDescription,
        namespace_selector: Option<&LabelSelector>,
        ca_bundle: &str,
    ) -> Self::Webhook;
    /// A configuration of `metadata` holding `webhooks`.
    fn new(metadata: ObjectMeta, webhooks: Vec<Self::Webhook>) -> Self;
    /// Its webhooks.
    fn webhooks(&self) -> Option<&[Self::Webhook]>;
    /// Replaces its webhooks.
    fn set_webhooks(&mut self, webhooks: Vec<Self::Webhook>);
    /// Where a webhook sends its reviews, and for which namespaces: what
    /// [`webhook_current`] compares.
    fn target(webhook: &Self::Webhook) -> (&WebhookClientConfig, Option<&LabelSelector>);
}

impl AdmissionConfiguration for ValidatingWebhookConfiguration {
    const KIND: &'static str = "ValidatingWebhookConfiguration";
    type Webhook = ValidatingWebhook;
    fn webhook(
        csv: &ClusterServiceVersion,
        description: &WebhookDescription,
        namespace_selector: Option<&LabelSelector>,
        ca_bundle: &str,
    ) -> ValidatingWebhook {
        validating_webhook(csv, description, namespace_selector, ca_bundle)
    }
    fn new(metadata: ObjectMeta, webhooks: Vec<ValidatingWebhook>) -> Self {
        Self {
            metadata,
            webhooks: Some(webhooks),
        }
    }
    fn webhooks(&self) -> Option<&[ValidatingWebhook]> {
        self.webhooks.as_deref()
    }
    fn set_webhooks(&mut self, webhooks: Vec<ValidatingWebhook>) {
        self.webhooks = Some(webhooks);
    }
    fn target(webhook: &ValidatingWebhook) -> (&WebhookClientConfig, Option<&LabelSelector>) {
        (&webhook.client_config, webhook.namespace_selector.as_ref())
    }
}

impl AdmissionConfiguration for MutatingWebhookConfiguration {
    const KIND: &'static str = "MutatingWebhookConfiguration";
    type Webhook = MutatingWebhook;
    fn webhook(
        csv: &ClusterServiceVersion,
        description: &WebhookDescription,
        namespace_selector: Option<&LabelSelector>,
        ca_bundle: &str,
    ) -> MutatingWebhook {
        mutating_webhook(csv, description, namespace_selector, ca_bundle)
    }
    fn new(metadata: ObjectMeta, webhooks: Vec<MutatingWebhook>) -> Self {
        Self {
            metadata,
            webhooks: Some(webhooks),
        }
    }
    fn webhooks(&self) -> Option<&[MutatingWebhook]> {
        self.webhooks.as_deref()
    }
    fn set_webhooks(&mut self, webhooks: Vec<MutatingWebhook>) {
        self.webhooks = Some(webhooks);
    }
    fn target(webhook: &MutatingWebhook) -> (&WebhookClientConfig, Option<&LabelSelector>) {
        (&webhook.client_config, webhook.namespace_selector.as_ref())
    }
}

/// A new configuration of kind `C` for a description (created with
/// `generateName`); an existing one is brought up to date with
/// [`updated_configuration`].
pub fn configuration<C: AdmissionConfiguration>(
    csv: &ClusterServiceVersion,
    description: &WebhookDescription,
    namespace_selector: Option<&LabelSelector>,
    ca_bundle: &str,
) -> Result<C, Error> {
    Ok(C::new(
        configuration_meta(csv, description)?,
        vec![C::webhook(csv, description, namespace_selector, ca_bundle)],
    ))
}

/// An existing configuration brought up to date (its webhook and owner
/// labels), or `None` when it already is.
pub fn updated_configuration<C: AdmissionConfiguration>(
    mut current: C,
    csv: &ClusterServiceVersion,
    description: &WebhookDescription,
    namespace_selector: Option<&LabelSelector>,
    ca_bundle: &str,
) -> Result<Option<C>, Error> {
    let webhook = C::webhook(csv, description, namespace_selector, ca_bundle);
    let wanted_labels = configuration_labels(csv, description)?;
    let labelled = {
        let current_labels = current.metadata().labels.as_ref();
        wanted_labels
            .iter()
            .all(|(k, v)| current_labels.and_then(|l| l.get(k)) == Some(v))
    };
    let up_to_date = match current.webhooks() {
        Some([found]) => webhook_current(C::target(found), C::target(&webhook)),
        _ => false,
    };
    if labelled && up_to_date {
        return Ok(None);
    }
    current
        .metadata_mut()
        .labels
        .get_or_insert_with(BTreeMap::new)
        .extend(wanted_labels);
    current.set_webhooks(vec![webhook]);
    Ok(Some(current))
}

/// Whether a webhook found in a configuration already calls what `desired`
/// calls, with the same CA bundle and namespace selector. The rest of the
/// description is covered by [`WEBHOOK_HASH_LABEL`]; comparing whole webhooks
/// would see the API server's defaults (an empty selector for none, a match
/// policy, a timeout) as a difference and rewrite them on every sync.
pub fn webhook_current(
    found: (&WebhookClientConfig, Option<&LabelSelector>),
    desired: (&WebhookClientConfig, Option<&LabelSelector>),
) -> bool {
    let normalized = |selector: Option<&LabelSelector>| {
        selector
            .cloned()
            .map(|s| LabelSelector {
                match_expressions: s.match_expressions.filter(|e| !e.is_empty()),
                match_labels: s.match_labels.filter(|l| !l.is_empty()),
            })
            .filter(|s| *s != LabelSelector::default())
    };
    found.0.ca_bundle == desired.0.ca_bundle
        && found.0.service == desired.0.service
        && found.0.url == desired.0.url
        && normalized(found.1) == normalized(desired.1)
}

/// Upstream's `isSingletonOperator`: no install mode other than
/// AllNamespaces is supported, and AllNamespaces is not declared
/// unsupported.
pub fn supports_only_all_namespaces(csv: &ClusterServiceVersion) -> bool {
    csv.spec.install_modes().iter().all(|mode| {
        if mode.type_ == InstallModeType::ALL_NAMESPACES {
            mode.supported
        } else {
            !mode.supported
        }
    })
}

/// `crd` with its conversion handed to a conversion webhook description, or
/// upstream's error when the CSV may not do that.
pub fn with_conversion_webhook(
    csv: &ClusterServiceVersion,
    description: &WebhookDescription,
    crd: &CustomResourceDefinition,
    ca_bundle: &str,
) -> Result<CustomResourceDefinition, String> {
    if !supports_only_all_namespaces(csv) {
        return Err("unable to manage conversion webhook: CSVs with conversion webhooks must support only AllNamespaces".to_owned());
    }
    let name = crd.metadata.name.clone().unwrap_or_default();
    if !csv.spec.owned_crds().iter().any(|owned| owned.name == name) {
        return Err(format!(
            "csv {} does not own CRD {name}",
            csv.metadata.name.as_deref().unwrap_or_default()
        ));
    }
    if crd.spec.preserve_unknown_fields == Some(true) {
        return Err("crd.Spec.PreserveUnknownFields must be false to let API Server call webhook to do the conversion".to_owned());
    }
    let mut updated = crd.clone();
    updated.spec.conversion = Some(CustomResourceConversion {
        strategy: CONVERSION_WEBHOOK.to_owned(),
        webhook: Some(WebhookConversion {
            client_config: Some(CrdWebhookClientConfig {
                service: Some(CrdServiceReference {
                    name: service_name(description.deployment_name.as_deref().unwrap_or_default()),
                    namespace: csv.metadata.namespace.clone().unwrap_or_default(),
                    path: Some(
                        description
                            .webhook_path
                            .clone()
                            .unwrap_or_else(|| DEFAULT_CONVERSION_PATH.to_owned()),
                    ),
                    port: Some(container_port(description)),
                }),
                ca_bundle: Some(ByteString(ca_bundle.as_bytes().to_vec())),
                url: None,
            }),
            conversion_review_versions: description.admission_review_versions.clone(),
        }),
    });
    Ok(updated)
}

/// The conversion CRDs of a CSV's descriptions, with the error upstream
/// reports for a conversion description listing none.
pub fn conversion_crds(description: &WebhookDescription) -> Result<&[String], String> {
    match description.conversion_crds.as_deref() {
        Some(crds) if !crds.is_empty() => Ok(crds),
        _ => Err("unable to manager conversion webhook: conversion webhook must have at least one CRD specified".to_owned()),
    }
}

/// The names of the CRDs whose conversion must go back to `None` when a
/// CSV is deleted: none while another CSV of the namespace replaces it
/// (the replacement takes the conversion over).
pub fn conversions_to_reset(
    csv: &ClusterServiceVersion,
    namespace_csvs: &[ClusterServiceVersion],
) -> Vec<String> {
    let name = csv.metadata.name.as_deref().unwrap_or_default();
    if namespace_csvs
        .iter()
        .any(|other| other.spec.replaces.as_deref() == Some(name))
    {
        return Vec::new();
    }
    csv.spec
        .webhooks()
        .iter()
        .filter(|d| d.type_ == WebhookAdmissionType::CONVERSION)
        .flat_map(|d| d.conversion_crds.iter().flatten().cloned())
        .collect()
}

/// `crd` with its conversion reset to `None`.
pub fn without_conversion_webhook(crd: &CustomResourceDefinition) -> CustomResourceDefinition {
    let mut updated = crd.clone();
    updated.spec.conversion = Some(CustomResourceConversion {
        strategy: CONVERSION_NONE.to_owned(),
        webhook: None,
    });
    updated
}

/// Whether a CRD's conversion is a webhook with a CA bundle.
pub fn conversion_ready(crd: &CustomResourceDefinition) -> bool {
    crd.spec.conversion.as_ref().is_some_and(|conversion| {
        conversion.strategy == CONVERSION_WEBHOOK
            && conversion
                .webhook
                .as_ref()
                .and_then(|w| w.client_config.as_ref())
                .and_then(|c| c.ca_bundle.as_ref())
                .is_some()
    })
}

/// The webhook objects found for a CSV: the labels of its Validating- and
/// MutatingWebhookConfigurations (by owner labels), and its conversion CRDs
/// by name.
#[derive(Clone, Debug, Default)]
pub struct ObservedWebhooks {
    /// Labels of each ValidatingWebhookConfiguration carrying the owner
    /// labels, by name.
    pub validating: BTreeMap<String, BTreeMap<String, String>>,
    /// Labels of each MutatingWebhookConfiguration carrying the owner
    /// labels, by name.
    pub mutating: BTreeMap<String, BTreeMap<String, String>>,
    /// The CRDs named by conversion descriptions (absent when not found).
    pub conversion_crds: BTreeMap<String, CustomResourceDefinition>,
}

fn matches(object: &BTreeMap<String, String>, wanted: &BTreeMap<String, String>) -> bool {
    wanted.iter().all(|(k, v)| object.get(k) == Some(v))
}

/// Upstream's `areWebhooksAvailable`: every admission description has a
/// configuration carrying its current hash, every conversion CRD converts
/// through a webhook with a CA bundle.
pub fn webhooks_check(csv: &ClusterServiceVersion, observed: &ObservedWebhooks) -> WebhooksCheck {
    for description in csv.spec.webhooks() {
        let Ok(wanted) = configuration_labels(csv, description) else {
            return WebhooksCheck::Failed("cannot hash the webhook description".to_owned());
        };
        let found = if description.type_ == WebhookAdmissionType::VALIDATING {
            observed.validating.values().any(|l| matches(l, &wanted))
        } else if description.type_ == WebhookAdmissionType::MUTATING {
            observed.mutating.values().any(|l| matches(l, &wanted))
        } else if description.type_ == WebhookAdmissionType::CONVERSION {
            let mut count = 0;
            for name in description.conversion_crds.iter().flatten() {
                match observed.conversion_crds.get(name) {
                    Some(crd) if conversion_ready(crd) => count += 1,
                    Some(_) => return WebhooksCheck::Failed(CONVERSION_NOT_READY.to_owned()),
                    None => {
                        return WebhooksCheck::Failed(format!(
                            "customresourcedefinitions.apiextensions.k8s.io \"{name}\" not found"
                        ));
                    }
                }
            }
            count > 0
        } else {
            true
        };
        if !found {
            return WebhooksCheck::NotAvailable;
        }
    }
    WebhooksCheck::Available
}

/// Upstream's `cleanUpRemovedWebhooks`: the configurations (by name) whose
/// description the CSV no longer declares.
pub fn removed_configurations(
    csv: &ClusterServiceVersion,
    configurations: &BTreeMap<String, BTreeMap<String, String>>,
) -> Vec<String> {
    let declared: Vec<&str> = csv
        .spec
        .webhooks()
        .iter()
        .map(|d| d.generate_name.as_str())
        .collect();
    configurations
        .iter()
        .filter(|(_, l)| {
            l.get(labels::WEBHOOK_DESCRIPTION_GENERATE_NAME)
                .is_none_or(|name| !declared.contains(&name.as_str()))
        })
        .map(|(name, _)| name.clone())
        .collect()
}
