//! Install Deployments, Subscription config overrides, the install check, and
//! the RBAC objects from CSV permissions.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::{
        apps::v1::{Deployment, DeploymentCondition, DeploymentStatus},
        core::v1::{Container, EnvVar},
    },
    apimachinery::pkg::apis::meta::v1::OwnerReference,
};
use olm_api::labels;
use olm_operator::decide::{
    deployment::{
        DeploymentOverrides, Rollout, StrategyErrorReason, build_deployment, build_deployments,
        check_deployments, deployment_spec_hash, has_operator_condition_env, merge_env,
        orphaned_deployments, rollout,
    },
    operator_group::with_membership_annotations,
    rbac::{policy_rule_hash, rbac_for_csv, role_binding_hash, role_selector},
};

use super::fixtures::{
    CsvFixture, GroupFixture, gadget_group, sprocket_subscription, widget_operator,
};

fn member_widget() -> olm_api::csv::ClusterServiceVersion {
    let group = gadget_group().targeting(&["gadget-system", "cog-works"]);
    widget_operator().member_of(&group)
}

fn env_of(container: &Container) -> Vec<(String, String)> {
    container
        .env
        .iter()
        .flatten()
        .map(|e| (e.name.clone(), e.value.clone().unwrap_or_default()))
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn deployments_are_built_as_upstream_builds_them() {
    let csv = member_widget();
    let deployments = build_deployments(&csv, DeploymentOverrides::default()).expect("builds");
    assert_eq!(deployments.len(), 1);
    let deployment = &deployments[0];
    assert_eq!(
        deployment.metadata.name.as_deref(),
        Some("widget-controller")
    );
    assert_eq!(
        deployment.metadata.namespace.as_deref(),
        Some("gadget-system")
    );

    let deployment_labels = deployment.metadata.labels.as_ref().expect("labels");
    assert_eq!(deployment_labels["app"], "widget");
    assert_eq!(deployment_labels[labels::MANAGED], "true");
    assert_eq!(deployment_labels[labels::OWNER], "widget-operator.v1.2.0");
    assert_eq!(deployment_labels[labels::OWNER_NAMESPACE], "gadget-system");
    assert_eq!(
        deployment_labels[labels::OWNER_KIND],
        "ClusterServiceVersion"
    );

    let spec = deployment.spec.as_ref().expect("spec");
    assert_eq!(
        deployment_labels[labels::DEPLOYMENT_SPEC_HASH],
        deployment_spec_hash(spec).expect("hash"),
        "the hash is of the final spec"
    );
    assert_eq!(spec.revision_history_limit, Some(1));

    assert_eq!(
        deployment.metadata.owner_references,
        Some(vec![OwnerReference {
            api_version: "operators.coreos.com/v1alpha1".into(),
            kind: "ClusterServiceVersion".into(),
            name: "widget-operator.v1.2.0".into(),
            uid: "0c0ffee0-0000-4000-8000-000000000120".into(),
            block_owner_deletion: Some(false),
            controller: Some(false),
        }])
    );

    let template = spec.template.metadata.as_ref().expect("template metadata");
    let annotations = template.annotations.as_ref().expect("annotations");
    assert_eq!(
        annotations["widgets.example.test/tier"], "gold",
        "the CSV wins"
    );
    assert_eq!(
        annotations["prometheus.io/scrape"], "true",
        "the template's own stay"
    );
    assert_eq!(
        annotations[labels::TARGET_NAMESPACES],
        "cog-works,gadget-system"
    );
    assert_eq!(annotations[labels::OPERATOR_GROUP], "gadget-group");

    let pod = spec.template.spec.as_ref().expect("pod");
    assert!(has_operator_condition_env(
        &pod.containers,
        "widget-operator.v1.2.0"
    ));
    assert_eq!(
        env_of(&pod.containers[0]),
        pairs(&[
            ("LOG_LEVEL", "info"),
            ("HTTP_PROXY", "http://old-proxy:3128"),
            ("OPERATOR_CONDITION_NAME", "widget-operator.v1.2.0"),
        ])
    );
}

#[test]
fn subscription_config_adjusts_every_deployment() {
    let csv = member_widget();
    let subscriptions = [sprocket_subscription()];
    let config = olm_operator::decide::subscription_config::config_for(
        "widget-operator.v1.2.0",
        "gadget-system",
        &subscriptions,
    );
    assert!(config.is_some(), "found by status.installedCSV");
    assert!(
        olm_operator::decide::subscription_config::config_for(
            "widget-operator.v9.9.9",
            "gadget-system",
            &subscriptions
        )
        .is_none()
    );
    let proxy = [
        EnvVar {
            name: "HTTPS_PROXY".into(),
            value: Some("http://proxy.example:3128".into()),
            value_from: None,
        },
        EnvVar {
            name: "NO_PROXY".into(),
            value: Some(String::new()),
            value_from: None,
        },
    ];
    let overrides = DeploymentOverrides {
        config,
        proxy_env: &proxy,
        ..DeploymentOverrides::default()
    };
    let deployment =
        build_deployment(&csv, &csv.spec.install.spec.deployments[0], overrides).expect("builds");
    let spec = deployment.spec.as_ref().expect("spec");
    let pod = spec.template.spec.as_ref().expect("pod");
    let manager = &pod.containers[0];

    assert_eq!(
        env_of(manager),
        pairs(&[
            ("LOG_LEVEL", "debug"),
            ("HTTP_PROXY", "http://old-proxy:3128"),
            ("FEATURE_SPIN", "on"),
            ("HTTPS_PROXY", "http://proxy.example:3128"),
            ("OPERATOR_CONDITION_NAME", "widget-operator.v1.2.0"),
        ]),
        "merged by name in place, new ones appended, empty proxy values dropped"
    );
    assert_eq!(manager.env_from.as_ref().map(Vec::len), Some(1));
    let mounts: Vec<(&str, &str)> = manager
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| (m.name.as_str(), m.mount_path.as_str()))
        .collect();
    assert_eq!(
        mounts,
        [("cache", "/var/cache/widget"), ("certs", "/etc/certs")]
    );
    assert!(
        pod.containers[1]
            .resources
            .as_ref()
            .and_then(|r| r.limits.as_ref())
            .is_some(),
        "resources replace every container's"
    );
    let volumes: Vec<(&str, bool)> = pod
        .volumes
        .iter()
        .flatten()
        .map(|v| (v.name.as_str(), v.config_map.is_some()))
        .collect();
    assert_eq!(volumes, [("cache", true), ("certs", false)]);
    assert_eq!(
        pod.tolerations.as_ref().map(Vec::len),
        Some(2),
        "present ones are not repeated"
    );
    assert_eq!(
        pod.node_selector,
        Some(BTreeMap::from([(
            "gadgets.example.test/pool".to_owned(),
            "widgets".to_owned()
        )]))
    );
    let affinity = pod.affinity.as_ref().expect("node affinity stays");
    assert!(affinity.node_affinity.is_some());
    assert!(
        affinity.pod_anti_affinity.is_none(),
        "an empty override clears it"
    );

    let deployment_annotations = deployment
        .metadata
        .annotations
        .as_ref()
        .expect("annotations");
    assert_eq!(
        deployment_annotations["sprocket.example.test/owner"],
        "team-cog"
    );
    assert_eq!(
        deployment_annotations["widgets.example.test/tier"],
        "bronze"
    );
    let pod_annotations = spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.annotations.as_ref())
        .expect("annotations");
    assert_eq!(
        pod_annotations["widgets.example.test/tier"], "gold",
        "only unset keys are added"
    );
    assert_eq!(pod_annotations["sprocket.example.test/owner"], "team-cog");

    let plain = build_deployment(
        &csv,
        &csv.spec.install.spec.deployments[0],
        DeploymentOverrides::default(),
    )
    .expect("builds");
    assert_ne!(
        plain
            .metadata
            .labels
            .as_ref()
            .map(|l| &l[labels::DEPLOYMENT_SPEC_HASH]),
        deployment
            .metadata
            .labels
            .as_ref()
            .map(|l| &l[labels::DEPLOYMENT_SPEC_HASH]),
        "a config change changes the hash, so the deployment is re-applied"
    );
}

#[test]
fn a_subscription_setting_a_proxy_variable_turns_off_cluster_proxy_injection() {
    let csv = member_widget();
    let mut subscription = sprocket_subscription();
    if let Some(config) = subscription.spec.config.as_mut() {
        config.env.push(EnvVar {
            name: "NO_PROXY".into(),
            value: Some(".cluster.local".into()),
            value_from: None,
        });
    }
    let proxy = [EnvVar {
        name: "HTTPS_PROXY".into(),
        value: Some("http://proxy.example:3128".into()),
        value_from: None,
    }];
    let deployment = build_deployment(
        &csv,
        &csv.spec.install.spec.deployments[0],
        DeploymentOverrides {
            config: subscription.spec.config.as_ref(),
            proxy_env: &proxy,
            ..DeploymentOverrides::default()
        },
    )
    .expect("builds");
    let pod = deployment.spec.and_then(|s| s.template.spec).expect("pod");
    assert!(
        !env_of(&pod.containers[0])
            .iter()
            .any(|(name, _)| name == "HTTPS_PROXY")
    );
}

#[test]
fn env_merge_keeps_order_and_lets_new_values_win() {
    let var = |name: &str, value: &str| EnvVar {
        name: name.into(),
        value: Some(value.into()),
        value_from: None,
    };
    let merged = merge_env(
        &[var("A", "1"), var("B", "2"), var("A", "dup")],
        &[var("C", "3"), var("A", "x"), var("C", "4")],
    );
    let got: Vec<(String, String)> = merged
        .iter()
        .map(|e| (e.name.clone(), e.value.clone().unwrap_or_default()))
        .collect();
    assert_eq!(got, pairs(&[("A", "x"), ("B", "2"), ("C", "4")]));
}

/// The deployment as the cluster would hold it after a healthy rollout.
fn rolled_out(mut deployment: Deployment) -> Deployment {
    deployment.metadata.generation = Some(2);
    deployment.status = Some(DeploymentStatus {
        observed_generation: Some(2),
        replicas: Some(1),
        updated_replicas: Some(1),
        conditions: Some(vec![DeploymentCondition {
            type_: "Available".into(),
            status: "True".into(),
            ..Default::default()
        }]),
        ..Default::default()
    });
    deployment
}

#[test]
fn install_check_reports_the_first_problem() {
    let csv = member_widget();
    let built = build_deployments(&csv, DeploymentOverrides::default()).expect("builds");
    let healthy = rolled_out(built[0].clone());
    let check = |deployment: Deployment| {
        check_deployments(&csv, &[deployment], DeploymentOverrides::default())
    };
    assert_eq!(check(healthy.clone()), Ok(()));

    let error = |deployment: Deployment| check(deployment).expect_err("not healthy");
    let missing =
        check_deployments(&csv, &[], DeploymentOverrides::default()).expect_err("missing");
    assert_eq!(missing.reason, StrategyErrorReason::ComponentMissing);
    assert_eq!(
        missing.message,
        "missing deployment with name=widget-controller"
    );

    let mut not_owned = healthy.clone();
    not_owned
        .metadata
        .labels
        .as_mut()
        .expect("labels")
        .remove(labels::OWNER);
    assert_eq!(
        error(not_owned).reason,
        StrategyErrorReason::ComponentMissing
    );

    let mut unavailable = healthy.clone();
    unavailable.status.as_mut().expect("status").conditions = Some(vec![DeploymentCondition {
        type_: "Available".into(),
        status: "False".into(),
        message: Some("Deployment does not have minimum availability.".into()),
        ..Default::default()
    }]);
    let err = error(unavailable);
    assert_eq!(err.reason, StrategyErrorReason::Waiting);
    assert_eq!(
        err.message,
        "waiting for deployment widget-controller to become ready: deployment \"widget-controller\" not available: Deployment does not have minimum availability."
    );

    let mut stuck = healthy.clone();
    stuck.status.as_mut().expect("status").conditions = Some(vec![DeploymentCondition {
        type_: "Progressing".into(),
        status: "False".into(),
        reason: Some("ProgressDeadlineExceeded".into()),
        ..Default::default()
    }]);
    let err = error(stuck);
    assert_eq!(err.reason, StrategyErrorReason::Timeout);
    assert!(err.reason.is_unrecoverable());
    assert_eq!(
        err.message,
        "deployment widget-controller not ready before timeout: deployment \"widget-controller\" exceeded its progress deadline"
    );

    let mut annotations_dropped = healthy.clone();
    if let Some(metadata) = annotations_dropped
        .spec
        .as_mut()
        .and_then(|s| s.template.metadata.as_mut())
    {
        metadata
            .annotations
            .as_mut()
            .expect("annotations")
            .remove(labels::TARGET_NAMESPACES);
    }
    let err = error(annotations_dropped);
    assert_eq!(err.reason, StrategyErrorReason::AnnotationsMissing);
    assert_eq!(
        err.message,
        "annotations on deployment does not contain expected key: olm.targetNamespaces"
    );

    let mut hand_edited = healthy.clone();
    hand_edited
        .metadata
        .labels
        .as_mut()
        .expect("labels")
        .insert(labels::DEPLOYMENT_SPEC_HASH.into(), "stale".into());
    let err = error(hand_edited);
    assert_eq!(err.reason, StrategyErrorReason::DeploymentUpdated);
    assert!(
        err.message
            .starts_with("deployment changed old hash=stale, new hash=")
    );

    let mut unhashed = healthy;
    unhashed
        .metadata
        .labels
        .as_mut()
        .expect("labels")
        .remove(labels::DEPLOYMENT_SPEC_HASH);
    assert_eq!(
        error(unhashed).message,
        "deployment widget-controller doesn't have a spec hash, update it"
    );

    // The target namespaces changed: the CSV annotation moved on, the pods did not.
    let group = gadget_group().targeting(&["gadget-system"]);
    let moved = csv
        .clone()
        .annotated(labels::TARGET_NAMESPACES, "gadget-system");
    let moved = {
        let mut moved = moved;
        moved.metadata.annotations = Some(with_membership_annotations(
            moved.metadata.annotations.as_ref(),
            &group,
        ));
        moved
    };
    let err = check_deployments(
        &moved,
        &[rolled_out(built[0].clone())],
        DeploymentOverrides::default(),
    )
    .expect_err("stale annotation");
    assert_eq!(
        err.message,
        "unexpected annotation on deployment. Expected olm.targetNamespaces:gadget-system, found olm.targetNamespaces:cog-works,gadget-system"
    );
}

#[test]
fn rollout_states() {
    let csv = member_widget();
    let built = build_deployments(&csv, DeploymentOverrides::default()).expect("builds");
    let mut fresh = rolled_out(built[0].clone());
    fresh.metadata.generation = Some(3);
    assert_eq!(
        rollout(&fresh),
        Rollout::Waiting(
            "waiting for spec update of deployment \"widget-controller\" to be observed...".into()
        )
    );
    let mut surging = rolled_out(built[0].clone());
    surging.status.as_mut().expect("status").replicas = Some(3);
    assert_eq!(
        rollout(&surging),
        Rollout::Waiting(
            "deployment \"widget-controller\" waiting for 2 outdated replica(s) to be terminated"
                .into()
        )
    );
    let mut silent = rolled_out(built[0].clone());
    silent.status.as_mut().expect("status").conditions = None;
    assert_eq!(
        rollout(&silent),
        Rollout::Waiting(
            "deployment \"widget-controller\" not available: missing condition \"Available\""
                .into()
        )
    );
}

#[test]
fn deployments_the_strategy_dropped_are_orphans() {
    let csv = member_widget();
    let built = build_deployments(&csv, DeploymentOverrides::default()).expect("builds");
    let mut old = built[0].clone();
    old.metadata.name = Some("widget-legacy-controller".into());
    let mut foreign = old.clone();
    foreign.metadata.name = Some("gizmo-controller".into());
    foreign.metadata.owner_references = None;
    assert_eq!(
        orphaned_deployments(&csv, &[built[0].clone(), old, foreign]),
        ["widget-legacy-controller"]
    );
}

#[test]
fn rbac_objects_follow_upstreams_names_and_labels() {
    let csv = member_widget();
    let rbac = rbac_for_csv(&csv).expect("deployment strategy");
    assert_eq!(rbac.keys().collect::<Vec<_>>(), ["cog-reader", "widget-sa"]);

    let widget_sa = &rbac["widget-sa"];
    assert_eq!(
        widget_sa.service_account.metadata.namespace.as_deref(),
        Some("gadget-system")
    );
    assert_eq!(widget_sa.roles.len(), 1);
    assert_eq!(widget_sa.cluster_roles.len(), 1);

    let role = &widget_sa.roles[0];
    let role_name = role.metadata.name.clone().expect("named");
    assert!(
        role_name.starts_with("widget-operator.v1.2.0-w"),
        "{role_name}"
    );
    assert!(role_name.len() <= 63);
    let role_labels = role.metadata.labels.as_ref().expect("labels");
    let rules = &csv
        .spec
        .install
        .spec
        .permissions
        .as_ref()
        .expect("permissions")[0]
        .rules;
    assert_eq!(
        role_labels[labels::PERMISSIONS_HASH],
        policy_rule_hash(rules)
    );
    assert_eq!(role_labels[labels::OWNER], "widget-operator.v1.2.0");
    assert_eq!(role_labels[labels::MANAGED], "true");
    assert_eq!(
        role_selector(
            &csv,
            &csv.spec
                .install
                .spec
                .permissions
                .as_ref()
                .expect("permissions")[0]
        )
        .get(labels::PERMISSIONS_HASH),
        Some(&policy_rule_hash(rules))
    );

    let binding = &widget_sa.role_bindings[0];
    assert_eq!(binding.metadata.name.as_deref(), Some(role_name.as_str()));
    assert_eq!(binding.role_ref.kind, "Role");
    assert_eq!(binding.role_ref.name, role_name);
    let subjects = binding.subjects.as_ref().expect("subjects");
    assert_eq!(subjects[0].name, "widget-sa");
    assert_eq!(subjects[0].namespace.as_deref(), Some("gadget-system"));
    assert_eq!(
        binding.metadata.labels.as_ref().expect("labels")[labels::PERMISSIONS_HASH],
        role_binding_hash(&binding.role_ref, subjects)
    );

    let cluster_role = &widget_sa.cluster_roles[0];
    assert!(
        cluster_role.metadata.owner_references.is_none(),
        "cluster-scoped: owner labels only"
    );
    assert!(
        cluster_role
            .metadata
            .name
            .as_deref()
            .is_some_and(|n| n.starts_with("widget-operator.v1.2.0-"))
    );
    assert_eq!(
        widget_sa.cluster_role_bindings[0].role_ref.kind,
        "ClusterRole"
    );

    let reader = &rbac["cog-reader"];
    assert!(reader.roles.is_empty());
    assert_eq!(reader.cluster_roles.len(), 1);
    assert_ne!(
        reader.cluster_roles[0].metadata.name, cluster_role.metadata.name,
        "one ClusterRole per permission entry"
    );

    assert!(rbac_for_csv(&csv.clone().with_strategy("helm")).is_err());
}
