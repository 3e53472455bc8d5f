//! The `Operator` aggregate objects: adoption (the component label put on a
//! Subscription, the CSV it installed and that CSV's components), creation of
//! the Operator for every component label in use, and its
//! `status.components` from the objects carrying the label (upstream's
//! adoption and operator controllers; rules in [`crate::decide::operator`]).

use std::{collections::BTreeMap, sync::Arc};

use kube::{
    Api, Resource, ResourceExt,
    api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams},
    runtime::{controller::Action, reflector::ObjectRef},
};
use olm_api::ownership::has_owner_labels;
use olm_api::{csv::ClusterServiceVersion, labels, operator::Operator, subscription::Subscription};
use olm_runtime::apply::apply;
use serde::{Serialize, de::DeserializeOwned};

use super::{Context, FIELD_MANAGER};
use crate::{
    Error,
    decide::operator::{
        COMPONENT_KINDS, component_labels, component_ref, csv_component_labels,
        missing_component_labels, operator_of_label, operator_status,
    },
};

/// Adds `missing` labels to one object by a merge patch.
async fn add_labels<K>(
    api: &Api<K>,
    name: &str,
    missing: &BTreeMap<String, String>,
) -> Result<(), Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Serialize,
    K::DynamicType: Default,
{
    let patch = serde_json::json!({ "metadata": { "labels": missing } });
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
        Err(source) => Err(Error::Kube {
            action: "label component",
            kind: "Object",
            name: name.to_owned(),
            source: Box::new(source),
        }),
    }
}

/// Labels one cached namespaced object if it lacks any of `wanted`.
async fn adopt<K>(context: &Context, object: &K, wanted: &[String]) -> Result<(), Error>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Serialize,
{
    let Some(missing) = missing_component_labels(object.meta().labels.as_ref(), wanted) else {
        return Ok(());
    };
    let namespace = object.meta().namespace.clone().unwrap_or_default();
    let api: Api<K> = Api::namespaced(context.client.clone(), &namespace);
    add_labels(&api, &object.name_any(), &missing).await
}

/// Labels one cached cluster-scoped object if it lacks any of `wanted`.
async fn adopt_cluster<K>(context: &Context, object: &K, wanted: &[String]) -> Result<(), Error>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Serialize,
{
    let Some(missing) = missing_component_labels(object.meta().labels.as_ref(), wanted) else {
        return Ok(());
    };
    let api: Api<K> = Api::all(context.client.clone());
    add_labels(&api, &object.name_any(), &missing).await
}

/// Adoption for one (non-copied, live) CSV: the component labels of the
/// Subscriptions that installed it go on those Subscriptions, on the CSV and
/// on its components; then the Operator objects named by the CSV's labels
/// are created if missing and requeued.
pub(crate) async fn adopt_csv(context: &Context, csv: &ClusterServiceVersion) -> Result<(), Error> {
    let namespace = csv.metadata.namespace.clone().unwrap_or_default();
    context
        .metrics
        .reconcile_adoption_csv
        .inc(&namespace, &csv.name_any());
    let subscriptions: Vec<Subscription> = context
        .caches
        .subscriptions
        .state()
        .iter()
        .filter(|s| s.metadata.namespace.as_deref() == Some(namespace.as_str()))
        .map(|s| Subscription::clone(s))
        .collect();
    let from_subscriptions = csv_component_labels(csv, &subscriptions);
    for subscription in &subscriptions {
        let installed = subscription
            .status
            .as_ref()
            .and_then(|s| s.installed_csv.as_deref())
            == csv.metadata.name.as_deref();
        if installed {
            context
                .metrics
                .reconcile_adoption_subscription
                .inc(&namespace, &subscription.name_any());
            let wanted = crate::decide::operator::subscription_component_label(subscription)
                .into_iter()
                .collect::<Vec<_>>();
            adopt(context, subscription, &wanted).await?;
        }
    }
    let mut wanted = component_labels(csv.metadata.labels.as_ref());
    for label in from_subscriptions {
        if !wanted.contains(&label) {
            wanted.push(label);
        }
    }
    if wanted.is_empty() {
        return Ok(());
    }
    adopt(context, csv, &wanted).await?;

    let caches = &context.caches;
    let owned = |labels: Option<&BTreeMap<String, String>>| has_owner_labels(labels, csv);
    for deployment in caches.deployments.state() {
        if owned(deployment.metadata.labels.as_ref()) {
            adopt(context, deployment.as_ref(), &wanted).await?;
        }
    }
    for role in caches.roles.state() {
        if owned(role.metadata.labels.as_ref()) {
            adopt(context, role.as_ref(), &wanted).await?;
        }
    }
    for binding in caches.role_bindings.state() {
        if owned(binding.metadata.labels.as_ref()) {
            adopt(context, binding.as_ref(), &wanted).await?;
        }
    }
    for role in caches.cluster_roles.state() {
        if owned(role.metadata.labels.as_ref()) {
            adopt_cluster(context, role.as_ref(), &wanted).await?;
        }
    }
    for binding in caches.cluster_role_bindings.state() {
        if owned(binding.metadata.labels.as_ref()) {
            adopt_cluster(context, binding.as_ref(), &wanted).await?;
        }
    }
    let accounts: Vec<&str> = csv
        .spec
        .install
        .spec
        .permissions
        .iter()
        .flatten()
        .chain(csv.spec.install.spec.cluster_permissions.iter().flatten())
        .map(|p| p.service_account_name.as_str())
        .collect();
    for account in caches.service_accounts.state() {
        if account.metadata.namespace.as_deref() == Some(namespace.as_str())
            && accounts.contains(&account.name_any().as_str())
        {
            adopt(context, account.as_ref(), &wanted).await?;
        }
    }
    if let Some(condition) = caches
        .operator_conditions
        .get(&ObjectRef::new(&csv.name_any()).within(&namespace))
    {
        adopt(context, condition.as_ref(), &wanted).await?;
    }
    for owned_crd in csv.spec.owned_crds() {
        if let Some(crd) = caches.crds.get(&ObjectRef::new(&owned_crd.name)) {
            adopt_cluster(context, crd.as_ref(), &wanted).await?;
        }
    }

    let operators: Api<Operator> = Api::all(context.client.clone());
    for label in &wanted {
        let Some(name) = operator_of_label(label) else {
            continue;
        };
        if caches.operators.get(&ObjectRef::new(name)).is_none() {
            let operator = Operator::new(name, Default::default());
            apply(&operators, &FIELD_MANAGER, &operator)
                .await
                .map_err(Error::runtime("cannot create operator"))?;
        }
        let _ = context.operator_requeue.unbounded_send(name.to_owned());
    }
    Ok(())
}

/// Reconciles one Operator's `status.components`.
pub(crate) async fn reconcile(
    operator: Arc<Operator>,
    context: Arc<Context>,
) -> Result<Action, Error> {
    context
        .metrics
        .reconcile_operator
        .inc("", &operator.name_any());
    sync(&operator, &context).await
}

async fn sync(operator: &Operator, context: &Context) -> Result<Action, Error> {
    let name = operator.name_any();
    let label = labels::operator_component_label(&name);
    let list = ListParams::default().labels(&label);
    let mut refs = Vec::new();
    for (group, version, kind, plural, _namespaced) in COMPONENT_KINDS {
        let resource =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
        let api: Api<DynamicObject> = Api::all_with(context.client.clone(), &resource);
        let objects = match api.list(&list).await {
            Ok(objects) => objects,
            // A kind this cluster does not serve has no components.
            Err(kube::Error::Api(status)) if status.is_not_found() => continue,
            Err(source) => {
                return Err(Error::Kube {
                    action: "list components of",
                    kind: "Operator",
                    name,
                    source: Box::new(source),
                });
            }
        };
        for object in objects {
            let value = serde_json::to_value(&object).unwrap_or_default();
            refs.push(component_ref(&resource.api_version, kind, &value));
        }
    }
    let status = operator_status(&label, refs);
    if operator.status.as_ref() != Some(&status) {
        let api: Api<Operator> = Api::all(context.client.clone());
        context
            .write_status(&api, operator, &status, "cannot write operator status")
            .await?;
    }
    Ok(Action::requeue(context.config.resync))
}
