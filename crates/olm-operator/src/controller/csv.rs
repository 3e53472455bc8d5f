//! The ClusterServiceVersion reconciler: dereference the CSV's surroundings
//! from the caches, build the [`CsvObservation`], [`decide`], then act on the
//! decision (metadata, installer, deletions, status, events, requeues).

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use jiff::Timestamp;
use k8s_openapi::{
    api::{
        apps::v1::Deployment,
        rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding},
    },
    kube_aggregator::pkg::apis::apiregistration::v1::APIService,
};
use kube::{
    Api, Resource, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams},
    runtime::{controller::Action, reflector::ObjectRef},
};
use olm_api::ownership::has_owner_labels;
use olm_api::{
    csv::{ClusterServiceVersion, CsvPhase},
    labels,
    operator_condition::OperatorCondition,
    operator_group::OperatorGroup,
};

use super::{Context, FIELD_MANAGER, install};
use crate::decide::Error as Decision;
use crate::{
    Error,
    decide::{
        copied_csv::is_copied,
        csv_phase::{
            CsvAction, CsvDecision, CsvObservation, DeploymentsCheck, InstallCheck, InstallOutcome,
            OwnedClusterObjects, after_install, decide,
        },
        csv_status::{self, CsvEvent, EventType},
        deployment::{DeploymentOverrides, check_deployments, validate_strategy},
        group_rbac::{
            ApiServiceUids, CrdUids, api_role_needs_write, api_service_cluster_roles,
            provided_api_cluster_roles,
        },
        operator_condition::{desired_operator_condition, operator_condition_needs_write},
        operator_group::ObservedNamespace,
        rbac::{binding_selector, role_selector},
        replacement::replaced_by_this,
        requirements::{
            CrdFacts, PermissionRule, RequirementFacts, RuleScope, ServiceAccountFacts, evaluate,
            permission_rules,
        },
    },
};

/// The delay of a requeue the decision asks for "now": long enough for the
/// cache to see this reconcile's own writes, which wake the CSV anyway.
const PROMPT_REQUEUE: Duration = Duration::from_secs(1);

fn kube_error(
    action: &'static str,
    kind: &'static str,
    name: String,
) -> impl FnOnce(kube::Error) -> Error {
    move |source| Error::Kube {
        action,
        kind,
        name,
        source: Box::new(source),
    }
}

/// The span of one CSV reconcile: until the CSV has succeeded or failed,
/// its reconciles belong to the install's trace (annotated by
/// catalog-operator); later resyncs are linked to it.
pub(crate) fn span(csv: &ClusterServiceVersion) -> tracing::Span {
    let namespace = csv.metadata.namespace.as_deref().unwrap_or_default();
    let phase = csv_status::phase_of(&csv.status.clone().unwrap_or_default());
    let span = tracing::info_span!(
        parent: None,
        "reconcile_csv",
        namespace,
        name = csv.name_any(),
        k8s.namespace.name = namespace,
        olm.csv = %csv.name_any(),
        olm.csv.phase = %phase,
        olm.csv.phase.written = tracing::field::Empty,
        trace_id = tracing::field::Empty,
    );
    olm_trace::follow(
        &span,
        Some(csv.annotations()),
        olm_trace::Handoff::while_in_flight(csv_status::installing(&phase)),
    );
    span
}

/// Reconciles one CSV (of a watched namespace).
pub(crate) async fn reconcile(
    csv: Arc<ClusterServiceVersion>,
    context: Arc<Context>,
) -> Result<Action, Error> {
    let result = sync(&csv, &context).await;
    context
        .metrics
        .set_csv_count(context.caches.csvs.state().len());
    result
}

/// The observed world of one CSV, owned, so the observation can borrow it.
struct Surroundings {
    namespace_operator_groups: Vec<OperatorGroup>,
    all_operator_groups: Vec<OperatorGroup>,
    namespaces: Vec<ObservedNamespace>,
    namespace_csvs: Vec<ClusterServiceVersion>,
    deployments: Vec<Deployment>,
}

fn dereference(context: &Context, namespace: &str) -> Surroundings {
    let caches = &context.caches;
    let all_operator_groups: Vec<OperatorGroup> = caches
        .operator_groups
        .state()
        .iter()
        .map(|g| OperatorGroup::clone(g))
        .collect();
    let namespace_operator_groups = all_operator_groups
        .iter()
        .filter(|g| g.metadata.namespace.as_deref() == Some(namespace))
        .cloned()
        .collect();
    Surroundings {
        namespace_operator_groups,
        all_operator_groups,
        namespaces: caches
            .namespaces
            .state()
            .iter()
            .map(|ns| ObservedNamespace::from(ns.as_ref()))
            .collect(),
        namespace_csvs: caches
            .csvs
            .state()
            .iter()
            .filter(|c| c.metadata.namespace.as_deref() == Some(namespace))
            .map(|c| ClusterServiceVersion::clone(c))
            .collect(),
        deployments: caches
            .deployments
            .state()
            .iter()
            .filter(|d| d.metadata.namespace.as_deref() == Some(namespace))
            .map(|d| Deployment::clone(d))
            .collect(),
    }
}

fn labels_match(
    object_labels: &BTreeMap<String, String>,
    wanted: &BTreeMap<String, String>,
) -> bool {
    wanted
        .iter()
        .all(|(key, value)| object_labels.get(key) == Some(value))
}

/// The permission rules not granted by the Roles and bindings OLM created
/// for them (found through `olm.permissions.hash`, as upstream first does).
/// Without an RBAC authorizer in this service yet, a rule granted some other
/// way is reported unsatisfied.
fn unsatisfied_rules(context: &Context, csv: &ClusterServiceVersion) -> Vec<PermissionRule> {
    let namespace = csv.metadata.namespace.as_deref();
    let strategy = &csv.spec.install.spec;
    let caches = &context.caches;
    let mut satisfied_accounts: Vec<(
        RuleScope,
        String,
        Vec<k8s_openapi::api::rbac::v1::PolicyRule>,
    )> = Vec::new();
    for permission in strategy.permissions.iter().flatten() {
        let wanted = role_selector(csv, permission);
        let role = caches.roles.state().into_iter().find(|r| {
            r.metadata.namespace.as_deref() == namespace && labels_match(r.labels(), &wanted)
        });
        let bound = role.is_some_and(|role| {
            let wanted = binding_selector(
                csv,
                "Role",
                &role.name_any(),
                &permission.service_account_name,
            );
            caches.role_bindings.state().iter().any(|b| {
                b.metadata.namespace.as_deref() == namespace && labels_match(b.labels(), &wanted)
            })
        });
        if bound {
            satisfied_accounts.push((
                RuleScope::Namespaced,
                permission.service_account_name.clone(),
                permission.rules.clone(),
            ));
        }
    }
    for permission in strategy.cluster_permissions.iter().flatten() {
        let wanted = role_selector(csv, permission);
        let role = caches
            .cluster_roles
            .state()
            .into_iter()
            .find(|r| labels_match(r.labels(), &wanted));
        let bound = role.is_some_and(|role| {
            let wanted = binding_selector(
                csv,
                "ClusterRole",
                &role.name_any(),
                &permission.service_account_name,
            );
            caches
                .cluster_role_bindings
                .state()
                .iter()
                .any(|b| labels_match(b.labels(), &wanted))
        });
        if bound {
            satisfied_accounts.push((
                RuleScope::Cluster,
                permission.service_account_name.clone(),
                permission.rules.clone(),
            ));
        }
    }
    permission_rules(csv)
        .into_iter()
        .filter(|rule| {
            !satisfied_accounts.iter().any(|(scope, account, rules)| {
                *scope == rule.scope
                    && *account == rule.service_account
                    && rules.contains(&rule.rule)
            })
        })
        .collect()
}

fn requirement_facts(context: &Context, csv: &ClusterServiceVersion) -> RequirementFacts {
    let caches = &context.caches;
    let namespace = csv.metadata.namespace.as_deref();
    let uid = csv.metadata.uid.clone().unwrap_or_default();
    RequirementFacts {
        server_version: context.server_version.clone(),
        crds: caches
            .crds
            .state()
            .iter()
            .map(|crd| (crd.name_any(), CrdFacts::of(crd)))
            .collect(),
        api_services: BTreeMap::new(),
        discovered: Default::default(),
        service_accounts: caches
            .service_accounts
            .state()
            .iter()
            .filter(|sa| sa.metadata.namespace.as_deref() == namespace)
            .map(|sa| (sa.name_any(), ServiceAccountFacts::of(sa, &uid)))
            .collect(),
        unsatisfied_rules: unsatisfied_rules(context, csv),
    }
}

fn owned_cluster_objects(context: &Context, csv: &ClusterServiceVersion) -> OwnedClusterObjects {
    let caches = &context.caches;
    OwnedClusterObjects {
        cluster_role_bindings: caches
            .cluster_role_bindings
            .state()
            .iter()
            .filter(|o| has_owner_labels(o.metadata.labels.as_ref(), csv))
            .count(),
        cluster_roles: caches
            .cluster_roles
            .state()
            .iter()
            .filter(|o| has_owner_labels(o.metadata.labels.as_ref(), csv))
            .count(),
    }
}

fn is_member(csv: &ClusterServiceVersion) -> bool {
    csv.annotations().contains_key(labels::OPERATOR_GROUP)
}

async fn sync(csv: &ClusterServiceVersion, context: &Context) -> Result<Action, Error> {
    let namespace = csv.metadata.namespace.clone().unwrap_or_default();
    let now = Timestamp::now();
    let phase = csv_status::phase_of(&csv.status.clone().unwrap_or_default());
    let deleting = csv.metadata.deletion_timestamp.is_some();

    // OLM's ServiceAccounts and RBAC come before the requirement check that
    // looks for them. Upstream leaves that to the InstallPlan; applying them
    // here lets a CSV created directly install (and is a no-op otherwise).
    if !deleting
        && phase == CsvPhase::PENDING
        && is_member(csv)
        && validate_strategy(csv).is_ok()
        && let Ok(install_client) = super::scoped::install_client(context, csv)
        && let Err(error) = install::ensure_rbac(&install_client, csv).await
    {
        // Refused (a scoped install whose ServiceAccount may not grant
        // this): fail as a refused install does, so the CSV says why and
        // is retried when RBAC changes.
        if error.category() == "kube_forbidden" {
            let message = olm_runtime::events::error_chain(&error);
            let decision = after_install(csv, &InstallOutcome::Forbidden(message), now);
            return act(csv, context, decision, &[], now).await;
        }
        tracing::warn!(
            error = &error as &dyn std::error::Error,
            "cannot apply the csv's service accounts and rbac"
        );
    }

    if !deleting {
        ensure_operator_condition(context, csv).await?;
    }

    let surroundings = dereference(context, &namespace);
    let mut facts = requirement_facts(context, csv);
    (facts.api_services, facts.discovered) =
        super::serving::requirement_discovery(&context.client, csv).await;
    let replaced_condition = replaced_by_this(csv, &surroundings.namespace_csvs).and_then(|old| {
        context.caches.operator_conditions.get(
            &ObjectRef::new(old.metadata.name.as_deref().unwrap_or_default()).within(&namespace),
        )
    });
    let config = super::subscriptions::config_for_csv(context, csv);
    let overrides = DeploymentOverrides {
        config: config.as_ref(),
        ..DeploymentOverrides::default()
    };
    // Owned APIServices and webhooks: certificates, availability, resources.
    let serving = if deleting || is_copied(csv) {
        super::serving::ServingObservation::default()
    } else {
        super::serving::observe(context, csv, &surroundings.deployments).await?
    };
    let overrides = DeploymentOverrides {
        serving_certs: serving.injections.as_deref().unwrap_or_default(),
        ..overrides
    };
    let deployments = match check_deployments(csv, &surroundings.deployments, overrides) {
        _ if serving.injections.is_none() => DeploymentsCheck::ExpectedSpecInvalid,
        Ok(()) => DeploymentsCheck::Healthy,
        Err(error) => DeploymentsCheck::Unhealthy(error),
    };
    let observation = CsvObservation {
        namespace_operator_groups: &surroundings.namespace_operator_groups,
        all_operator_groups: &surroundings.all_operator_groups,
        namespaces: &surroundings.namespaces,
        namespace_csvs: &surroundings.namespace_csvs,
        requirements: evaluate(csv, &facts, &surroundings.namespace_csvs),
        install: InstallCheck {
            deployments,
            api_services: serving.api_services.clone(),
            webhooks: serving.webhooks.clone(),
        },
        api_service_owner_conflict: serving.owner_conflict,
        api_service_resources: serving.resources.clone(),
        cert_rotation_due: serving.outlook.rotation_due(),
        owned_cluster_objects: owned_cluster_objects(context, csv),
        replaced_operator_condition: replaced_condition.as_deref(),
        ..CsvObservation::new(csv, now)
    };
    let mut decision = decide(&observation);
    // Certificates are looked at again when they next need a step, whatever
    // else happens (the decision is the certificates', not a status field's).
    if let Some(after) = serving.next_rotation_in(std::time::SystemTime::now()) {
        decision.actions.push(CsvAction::Requeue {
            name: csv.name_any(),
            after: Some(after),
        });
    }
    let action = act(csv, context, decision, &surroundings.deployments, now).await?;
    if !deleting
        && !is_copied(csv)
        && let Err(error) = super::operator::adopt_csv(context, csv).await
    {
        tracing::warn!(
            error = &error as &dyn std::error::Error,
            "cannot label the operator's components"
        );
    }
    Ok(action)
}

async fn act(
    csv: &ClusterServiceVersion,
    context: &Context,
    mut decision: CsvDecision,
    deployments: &[Deployment],
    now: Timestamp,
) -> Result<Action, Error> {
    let name = csv.name_any();
    let namespace = csv.metadata.namespace.clone().unwrap_or_default();
    let deleting = csv.metadata.deletion_timestamp.is_some();
    let api: Api<ClusterServiceVersion> = Api::namespaced(context.client.clone(), &namespace);

    // A CSV being deleted first cleans up, then lets go of its finalizer;
    // any other first gets its finalizer and membership, then acts.
    if !deleting {
        write_metadata(&api, csv, &decision).await?;
    }

    let mut requeue_self: Option<Duration> = None;
    let actions = std::mem::take(&mut decision.actions);
    let mut follow_ups = Vec::new();
    for action in actions {
        match action {
            CsvAction::RunInstaller => {
                // Upstream leaves the CSV as it is while the identity to
                // install with is unknown; the OperatorGroup's condition
                // says why, and the CSV is retried with backoff.
                let client = super::scoped::install_client(context, csv)
                    .map_err(|source| Decision::InstallIdentity { source })?;
                let config = super::subscriptions::config_for_csv(context, csv);
                let overrides = DeploymentOverrides {
                    config: config.as_ref(),
                    ..DeploymentOverrides::default()
                };
                let csvs = super::serving::all_csvs(context);
                let group = match context
                    .caches
                    .operator_groups
                    .state()
                    .iter()
                    .filter(|g| g.metadata.namespace == csv.metadata.namespace)
                    .collect::<Vec<_>>()
                    .as_slice()
                {
                    [only] => Some(OperatorGroup::clone(only)),
                    _ => None,
                };
                let serving = super::serving::ServingInputs {
                    olm_client: &context.client,
                    policy: &context.config.certificates,
                    operator_group: group.as_ref(),
                    csvs: &csvs,
                    subscription_annotations: config.as_ref().map(|c| &c.annotations),
                };
                let outcome =
                    install::run_installer(&client, csv, deployments, overrides, serving).await;
                let mut installed = csv.clone();
                if let Some(status) = &decision.status {
                    installed.status = Some(status.clone());
                }
                let after = after_install(&installed, &outcome, now);
                if after.status.is_some() {
                    decision.status = after.status;
                }
                decision.events.extend(after.events);
                follow_ups.extend(after.actions);
            }
            other => follow_ups.push(other),
        }
    }
    for action in follow_ups {
        match action {
            CsvAction::RunInstaller => {}
            CsvAction::DeleteDeployments(names) => {
                let deployments: Api<Deployment> =
                    Api::namespaced(context.client.clone(), &namespace);
                for deployment in names {
                    olm_runtime::apply::delete_if_exists(&deployments, &deployment)
                        .await
                        .map_err(Error::runtime("cannot delete deployment"))?;
                }
            }
            CsvAction::DeleteCsv => {
                olm_runtime::apply::delete_if_exists(&api, &name)
                    .await
                    .map_err(Error::runtime("cannot delete csv"))?;
            }
            CsvAction::DeleteOwnedClusterObjects => {
                delete_owned_cluster_objects(context, csv).await?
            }
            CsvAction::SetProvidedApis {
                operator_group,
                value,
            } => {
                let groups: Api<OperatorGroup> =
                    Api::namespaced(context.client.clone(), &namespace);
                let patch = serde_json::json!({
                    "metadata": { "annotations": { labels::PROVIDED_APIS: value } }
                });
                groups
                    .patch(
                        &operator_group,
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    )
                    .await
                    .map_err(kube_error(
                        "patch provided apis of",
                        "OperatorGroup",
                        format!("{namespace}/{operator_group}"),
                    ))?;
            }
            CsvAction::RequeueOperatorGroup(group) => {
                let _ = context
                    .operator_group_requeue
                    .unbounded_send(ObjectRef::new(&group).within(&namespace));
            }
            CsvAction::Requeue { name: other, after } => {
                let after = after.unwrap_or(PROMPT_REQUEUE);
                if other == name {
                    requeue_self = Some(requeue_self.map_or(after, |d| d.min(after)));
                } else {
                    let sender = context.csv_requeue.clone();
                    let target = ObjectRef::new(&other).within(&namespace);
                    tokio::spawn(async move {
                        tokio::time::sleep(after).await;
                        let _ = sender.unbounded_send(target);
                    });
                }
            }
            CsvAction::CountUpgrade => context
                .metrics
                .count_upgrade(csv.metadata.uid.as_deref().unwrap_or(&name)),
            CsvAction::EnsureProvidedApiClusterRoles => {
                ensure_provided_api_cluster_roles(context, csv).await?;
            }
            CsvAction::EnsureTargetNamespaceRbac | CsvAction::SyncCopies => {
                let _ = context
                    .copy_requeue
                    .unbounded_send(ObjectRef::from_obj(csv));
            }
        }
    }

    if deleting {
        if decision.finalizers.is_some() {
            context.metrics.forget_csv(csv);
        }
        write_metadata(&api, csv, &decision).await?;
    }

    if let Some(status) = &decision.status {
        context
            .write_status(&api, csv, status, "cannot write csv status")
            .await?;
        // Declared by `reconcile`'s span, the current one here.
        tracing::Span::current().record(
            "olm.csv.phase.written",
            tracing::field::display(csv_status::phase_of(status)),
        );
    }
    if !deleting {
        let status = decision
            .status
            .as_ref()
            .or(csv.status.as_ref())
            .cloned()
            .unwrap_or_default();
        context.metrics.observe_csv(csv, &status);
    }
    for event in &decision.events {
        record(context, csv, event).await;
    }

    if let Some(retry) = decision.retry {
        return Err(retry.into());
    }
    let resync = context.config.resync;
    Ok(Action::requeue(
        requeue_self.map_or(resync, |after| after.min(resync)),
    ))
}

/// Writes the labels, annotations and finalizers the decision changed, as a
/// merge patch guarded by the resource version the decision was made on.
async fn write_metadata(
    api: &Api<ClusterServiceVersion>,
    csv: &ClusterServiceVersion,
    decision: &CsvDecision,
) -> Result<(), Error> {
    if decision.labels.is_none() && decision.annotations.is_none() && decision.finalizers.is_none()
    {
        return Ok(());
    }
    let mut metadata = serde_json::Map::new();
    metadata.insert(
        "resourceVersion".to_owned(),
        serde_json::json!(csv.metadata.resource_version),
    );
    if let Some(labels) = &decision.labels {
        metadata.insert("labels".to_owned(), serde_json::json!(labels));
    }
    if let Some(annotations) = &decision.annotations {
        metadata.insert("annotations".to_owned(), serde_json::json!(annotations));
    }
    if let Some(finalizers) = &decision.finalizers {
        metadata.insert("finalizers".to_owned(), serde_json::json!(finalizers));
    }
    let patch = serde_json::json!({ "metadata": metadata });
    let name = csv.name_any();
    match api
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
        Err(source) => Err(kube_error(
            "patch metadata of",
            "ClusterServiceVersion",
            format!(
                "{}/{name}",
                csv.metadata.namespace.as_deref().unwrap_or_default()
            ),
        )(source)),
    }
}

async fn delete_namespaced<K>(
    context: &Context,
    namespace: &str,
    list: &ListParams,
    csv: &ClusterServiceVersion,
) -> Result<(), Error>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned,
{
    let api: Api<K> = Api::namespaced(context.client.clone(), namespace);
    api.delete_collection(&DeleteParams::background(), list)
        .await
        .map(|_| ())
        .map_err(kube_error(
            "delete owned objects of",
            "ClusterServiceVersion",
            csv.name_any(),
        ))
}

/// Creates or updates the CSV's OperatorCondition (upstream's generator)
/// when what OLM owns of it differs from the desired one.
async fn ensure_operator_condition(
    context: &Context,
    csv: &ClusterServiceVersion,
) -> Result<(), Error> {
    if csv.metadata.uid.is_none() {
        return Ok(());
    }
    let namespace = csv.metadata.namespace.clone().unwrap_or_default();
    context
        .metrics
        .reconcile_operator_condition_generator
        .inc(&namespace, &csv.name_any());
    let desired = desired_operator_condition(csv);
    let existing = context
        .caches
        .operator_conditions
        .get(&ObjectRef::new(&csv.name_any()).within(&namespace));
    if !operator_condition_needs_write(existing.as_deref(), &desired) {
        return Ok(());
    }
    let api: Api<OperatorCondition> = Api::namespaced(context.client.clone(), &namespace);
    olm_runtime::apply::apply(&api, &FIELD_MANAGER, &desired)
        .await
        .map(|_| ())
        .map_err(Error::runtime("cannot apply operatorcondition"))
}

/// The uids of the CSV's owned APIServices that exist, by name (read from
/// the API server: APIServices are not cached, and only CSVs owning some
/// ask).
async fn owned_api_service_uids(
    context: &Context,
    csv: &ClusterServiceVersion,
) -> Result<ApiServiceUids, Error> {
    let api: Api<APIService> = Api::all(context.client.clone());
    let mut uids = ApiServiceUids::new();
    for owned in csv.spec.owned_api_services() {
        let name = format!("{}.{}", owned.version, owned.group);
        let found = api
            .get_metadata_opt(&name)
            .await
            .map_err(|source| Error::Kube {
                action: "get",
                kind: "APIService",
                name: name.clone(),
                source: Box::new(source),
            })?;
        if let Some(uid) = found.and_then(|service| service.metadata.uid) {
            uids.insert(name, uid);
        }
    }
    Ok(uids)
}

/// Applies the per-API ClusterRoles of the CSV's owned CRDs and APIServices
/// that are missing or differ (upstream's `ensureClusterRolesForCSV`).
async fn ensure_provided_api_cluster_roles(
    context: &Context,
    csv: &ClusterServiceVersion,
) -> Result<(), Error> {
    let crd_uids: CrdUids = context
        .caches
        .crds
        .state()
        .iter()
        .filter_map(|crd| Some((crd.name_any(), crd.metadata.uid.clone()?)))
        .collect();
    let api_service_uids = owned_api_service_uids(context, csv).await?;
    // As upstream: the CRDs' roles first; a missing CRD stops there, a
    // missing APIService leaves the CRDs' roles written.
    let mut roles = Vec::new();
    for built in [
        provided_api_cluster_roles(csv, &crd_uids),
        api_service_cluster_roles(csv, &api_service_uids),
    ] {
        match built {
            Ok(built) => roles.extend(built),
            Err(error) => {
                tracing::info!(error = %error, "per-api cluster roles wait for their apis");
                break;
            }
        }
    }
    let existing = context.caches.cluster_roles.state();
    let api: Api<ClusterRole> = Api::all(context.client.clone());
    for role in roles {
        let current = existing
            .iter()
            .find(|r| r.metadata.name == role.metadata.name);
        if current.is_some_and(|current| !api_role_needs_write(current, &role)) {
            continue;
        }
        olm_runtime::apply::apply(&api, &FIELD_MANAGER, &role)
            .await
            .map_err(Error::runtime("cannot apply per-api cluster role"))?;
    }
    Ok(())
}

async fn record(context: &Context, csv: &ClusterServiceVersion, event: &CsvEvent) {
    let regarding = csv.object_ref(&());
    match event.event_type {
        EventType::Warning => {
            context
                .recorder
                .warning(&regarding, &event.reason, "Transition", &event.message)
                .await;
        }
        EventType::Normal => {
            context
                .recorder
                .normal(&regarding, &event.reason, "Transition", &event.message)
                .await;
        }
    }
}

/// Deletes what the CSV owned (the finalizer's work): the ClusterRoleBindings
/// and ClusterRoles carrying its owner labels, its copies, and the
/// Deployments, Roles and RoleBindings in its namespace carrying its owner
/// labels.
///
/// Upstream leaves the namespaced objects to the garbage collector, through
/// their ownerReferences. That collector resolves an owner's kind through a
/// discovery snapshot it refreshes only every 30 seconds and retries with a
/// growing backoff meanwhile, and it stops entirely while any aggregated API
/// is unavailable; on a cluster whose OLM CRDs are new, or whose metrics API
/// is down, an uninstalled operator kept running for a minute or more.
/// Deleting them here removes that dependency (the ownerReferences stay as a
/// second line, and for ServiceAccounts, which carry no owner labels).
async fn delete_owned_cluster_objects(
    context: &Context,
    csv: &ClusterServiceVersion,
) -> Result<(), Error> {
    let selector = olm_api::ownership::owner_labels(csv)
        .iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect::<Vec<_>>()
        .join(",");
    let list = ListParams::default().labels(&selector);
    let namespace = csv.metadata.namespace.clone().unwrap_or_default();
    let namespace_csvs: Vec<ClusterServiceVersion> = context
        .caches
        .csvs
        .state()
        .iter()
        .filter(|c| c.metadata.namespace.as_deref() == Some(namespace.as_str()))
        .map(|c| ClusterServiceVersion::clone(c))
        .collect();
    super::serving::cleanup(&context.client, csv, &namespace_csvs).await?;
    delete_namespaced::<Deployment>(context, &namespace, &list, csv).await?;
    delete_namespaced::<RoleBinding>(context, &namespace, &list, csv).await?;
    delete_namespaced::<Role>(context, &namespace, &list, csv).await?;
    for copy in context.caches.copies.of_parent(&namespace, &csv.name_any()) {
        let api: Api<ClusterServiceVersion> =
            Api::namespaced(context.client.clone(), &copy.namespace);
        olm_runtime::apply::delete_if_exists(&api, &copy.name)
            .await
            .map_err(Error::runtime("cannot delete copied csv"))?;
    }
    let bindings: Api<ClusterRoleBinding> = Api::all(context.client.clone());
    bindings
        .delete_collection(&DeleteParams::background(), &list)
        .await
        .map_err(kube_error(
            "delete cluster role bindings of",
            "ClusterServiceVersion",
            csv.name_any(),
        ))?;
    let roles: Api<ClusterRole> = Api::all(context.client.clone());
    roles
        .delete_collection(&DeleteParams::background(), &list)
        .await
        .map_err(kube_error(
            "delete cluster roles of",
            "ClusterServiceVersion",
            csv.name_any(),
        ))?;
    Ok(())
}
