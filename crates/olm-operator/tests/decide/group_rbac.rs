//! OperatorGroup and per-API ClusterRoles, lifted and copied RBAC.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use olm_api::{
    csv::{ApiServiceDefinitions, ApiServiceDescription, ClusterServiceVersion},
    labels,
};
use olm_operator::decide::{
    api_surface::{ApiKey, ApiSet},
    copied_csv::copy_for_namespace,
    group_rbac::{
        ApiRoleError, ApiServiceUids, CrdUids, KUBE_RESOURCE_NAME_LIMIT, aggregation_label,
        api_role_needs_write, api_service_cluster_roles, copied_role_needs_write,
        group_cluster_role_name, group_role_needs_write, lifted_cluster_rbac,
        operator_group_cluster_roles, provided_api_cluster_roles, target_namespace_rbac,
    },
};

use super::fixtures::{CsvFixture, GroupFixture, gadget_group, minute, widget_operator};

fn widget_api() -> ApiKey {
    ApiKey::new("gadgets.example.test", "v1", "Widget")
}

#[test]
fn group_role_names_follow_upstreams_format_and_fit() {
    let group = gadget_group();
    let name = group_cluster_role_name(&group, "admin");
    assert!(name.starts_with("olm.og.gadget-group.admin-"), "{name}");
    // base62(sha224("gadget-system/gadget-group/admin")) as upstream's hash().
    let hash = olm_operator::decide::hash::sha224_base62(b"gadget-system/gadget-group/admin");
    assert_eq!(name, format!("olm.og.gadget-group.admin-{hash}"));
    assert_ne!(name, group_cluster_role_name(&group, "view"));

    let long = gadget_group().named(&"g".repeat(300));
    for suffix in ["admin", "edit", "view"] {
        let name = group_cluster_role_name(&long, suffix);
        assert!(
            name.len() <= KUBE_RESOURCE_NAME_LIMIT,
            "{} chars",
            name.len()
        );
        assert!(name.contains(&format!(".{suffix}-")), "{name}");
    }
}

#[test]
fn group_roles_aggregate_the_provided_apis() {
    let group = gadget_group();
    let apis: ApiSet = [widget_api(), ApiKey::new("gears.example.test", "v2", "Cog")].into();
    let roles = operator_group_cluster_roles(&group, &apis);
    assert_eq!(roles.len(), 3);
    let admin = &roles[0];
    let role_labels = admin.metadata.labels.clone().expect("labels");
    assert_eq!(role_labels[labels::OWNER], "gadget-group");
    assert_eq!(role_labels[labels::OWNER_NAMESPACE], "gadget-system");
    assert_eq!(role_labels[labels::OWNER_KIND], "OperatorGroup");
    assert_eq!(role_labels[labels::MANAGED], "true");
    assert!(
        admin.rules.is_none(),
        "rules belong to the aggregation controller"
    );
    let selectors = admin
        .aggregation_rule
        .clone()
        .and_then(|r| r.cluster_role_selectors)
        .expect("selectors");
    let keys: Vec<String> = selectors
        .iter()
        .flat_map(|s| s.match_labels.clone().unwrap_or_default().into_keys())
        .collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted, "sorted, so an unchanged set never writes");
    assert!(keys.contains(&aggregation_label(&widget_api(), "admin")));
    assert!(
        aggregation_label(&widget_api(), "admin").starts_with(&format!(
            "olm.opgroup.permissions/aggregate-to-{}",
            labels::api_hash("Widget", "v1", "gadgets.example.test")
        ))
    );

    // No APIs: no aggregation rule at all.
    let empty = operator_group_cluster_roles(&group, &ApiSet::new());
    assert!(empty.iter().all(|r| r.aggregation_rule.is_none()));

    // Only a missing label or a different rule causes a write.
    assert!(!group_role_needs_write(admin, admin));
    let mut extra = admin.clone();
    extra
        .metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert("someone.else/label".into(), "x".into());
    assert!(
        !group_role_needs_write(&extra, admin),
        "foreign labels are kept"
    );
    assert!(group_role_needs_write(&empty[0], admin));
}

#[test]
fn per_api_roles_cover_each_owned_crd() {
    let csv = widget_operator();
    let uids: CrdUids = [(
        "widgets.gadgets.example.test".to_owned(),
        "uid-widgets".to_owned(),
    )]
    .into();
    let roles = provided_api_cluster_roles(&csv, &uids).expect("crd known");
    let names: Vec<String> = roles
        .iter()
        .map(|r| r.metadata.name.clone().unwrap_or_default())
        .collect();
    assert_eq!(
        names,
        [
            "widgets.gadgets.example.test-v1-admin",
            "widgets.gadgets.example.test-v1-edit",
            "widgets.gadgets.example.test-v1-view",
            "widgets.gadgets.example.test-v1-crdview",
        ]
    );
    let verbs: Vec<Vec<String>> = roles
        .iter()
        .map(|r| r.rules.clone().unwrap_or_default()[0].verbs.clone())
        .collect();
    assert_eq!(verbs[0], ["*"]);
    assert_eq!(verbs[1], ["create", "update", "patch", "delete"]);
    assert_eq!(verbs[2], ["get", "list", "watch"]);
    assert_eq!(verbs[3], ["get"]);
    let crdview = &roles[3];
    assert_eq!(
        crdview.rules.clone().unwrap_or_default()[0].resource_names,
        Some(vec!["widgets.gadgets.example.test".to_owned()])
    );
    let view_labels = crdview.metadata.labels.clone().expect("labels");
    assert_eq!(
        view_labels["rbac.authorization.k8s.io/aggregate-to-view"],
        "true"
    );
    assert_eq!(
        view_labels[&aggregation_label(&widget_api(), "view")],
        "true"
    );
    let owner = &crdview.metadata.owner_references.clone().expect("owner")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("CustomResourceDefinition", "uid-widgets", Some(false))
    );

    assert!(!api_role_needs_write(&roles[0], &roles[0]));
    let mut edited = roles[0].clone();
    edited.rules = Some(vec![PolicyRule::default()]);
    assert!(api_role_needs_write(&edited, &roles[0]));

    assert_eq!(
        provided_api_cluster_roles(&csv, &CrdUids::new()),
        Err(ApiRoleError::CrdNotFound(
            "widgets.gadgets.example.test".into()
        ))
    );
}

fn owned_api_service(name: &str, group: &str, version: &str, kind: &str) -> ApiServiceDescription {
    ApiServiceDescription {
        name: name.to_owned(),
        group: group.to_owned(),
        version: version.to_owned(),
        kind: kind.to_owned(),
        ..Default::default()
    }
}

fn with_owned_api_services(services: Vec<ApiServiceDescription>) -> ClusterServiceVersion {
    let mut csv = widget_operator();
    csv.spec.apiservicedefinitions = Some(ApiServiceDefinitions {
        owned: Some(services),
        required: Some(vec![owned_api_service(
            "gears",
            "gears.example.test",
            "v1",
            "Gear",
        )]),
    });
    csv
}

#[test]
fn per_api_roles_of_owned_api_services_table() {
    let fortunes = || owned_api_service("fortunes", "fortune.example.test", "v1alpha1", "Fortune");
    let fortunes_v2 = || owned_api_service("fortunes", "fortune.example.test", "v2", "Fortune");
    let known = |names: &[&str]| -> ApiServiceUids {
        names
            .iter()
            .map(|n| ((*n).to_owned(), format!("uid-{n}")))
            .collect()
    };
    type Expected = Result<Vec<&'static str>, ApiRoleError>;
    let cases: Vec<(&str, Vec<ApiServiceDescription>, ApiServiceUids, Expected)> = vec![
        (
            "none owned: no roles (required ones never get any)",
            vec![],
            known(&[]),
            Ok(vec![]),
        ),
        (
            "one owned and present",
            vec![fortunes()],
            known(&["v1alpha1.fortune.example.test"]),
            Ok(vec![
                "fortunes-v1alpha1-admin",
                "fortunes-v1alpha1-edit",
                "fortunes-v1alpha1-view",
            ]),
        ),
        (
            "two versions of one API: three roles each, in declaration order",
            vec![fortunes_v2(), fortunes()],
            known(&["v1alpha1.fortune.example.test", "v2.fortune.example.test"]),
            Ok(vec![
                "fortunes-v2-admin",
                "fortunes-v2-edit",
                "fortunes-v2-view",
                "fortunes-v1alpha1-admin",
                "fortunes-v1alpha1-edit",
                "fortunes-v1alpha1-view",
            ]),
        ),
        (
            "owned but not in the cluster yet",
            vec![fortunes()],
            known(&[]),
            Err(ApiRoleError::ApiServiceNotFound(
                "v1alpha1.fortune.example.test".into(),
            )),
        ),
        (
            "the second of two missing fails the whole set",
            vec![fortunes(), fortunes_v2()],
            known(&["v1alpha1.fortune.example.test"]),
            Err(ApiRoleError::ApiServiceNotFound(
                "v2.fortune.example.test".into(),
            )),
        ),
    ];
    for (name, services, uids, expected) in cases {
        let csv = with_owned_api_services(services);
        let got = api_service_cluster_roles(&csv, &uids).map(|roles| {
            roles
                .iter()
                .map(|r| r.metadata.name.clone().unwrap_or_default())
                .collect::<Vec<_>>()
        });
        let expected = expected.map(|names| names.iter().map(|n| (*n).to_owned()).collect());
        assert_eq!(got, expected, "{name}");
    }
}

#[test]
fn per_api_roles_of_an_owned_api_service_match_upstream() {
    let csv = with_owned_api_services(vec![owned_api_service(
        "fortunes",
        "fortune.example.test",
        "v1alpha1",
        "Fortune",
    )]);
    let uids: ApiServiceUids = [(
        "v1alpha1.fortune.example.test".to_owned(),
        "uid-fortunes".to_owned(),
    )]
    .into();
    let roles = api_service_cluster_roles(&csv, &uids).expect("apiservice known");
    let api = ApiKey::new("fortune.example.test", "v1alpha1", "Fortune");
    let expected_verbs: [&[&str]; 3] = [
        &["*"],
        &["create", "update", "patch", "delete"],
        &["get", "list", "watch"],
    ];
    for ((role, suffix), verbs) in roles
        .iter()
        .zip(["admin", "edit", "view"])
        .zip(expected_verbs)
    {
        let rules = role.rules.clone().unwrap_or_default();
        assert_eq!(rules.len(), 1, "{suffix}");
        assert_eq!(rules[0].verbs, verbs, "{suffix}");
        assert_eq!(
            rules[0].api_groups,
            Some(vec!["fortune.example.test".to_owned()])
        );
        assert_eq!(rules[0].resources, Some(vec!["fortunes".to_owned()]));
        assert_eq!(rules[0].resource_names, None);
        let role_labels = role.metadata.labels.clone().expect("labels");
        assert_eq!(
            role_labels,
            BTreeMap::from([
                (
                    format!("rbac.authorization.k8s.io/aggregate-to-{suffix}"),
                    "true".to_owned()
                ),
                (aggregation_label(&api, suffix), "true".to_owned()),
                (labels::MANAGED.to_owned(), labels::MANAGED_VALUE.to_owned()),
            ])
        );
        let owners = role.metadata.owner_references.clone().expect("owner");
        assert_eq!(owners.len(), 1);
        assert_eq!(
            (
                owners[0].api_version.as_str(),
                owners[0].kind.as_str(),
                owners[0].name.as_str(),
                owners[0].uid.as_str(),
                owners[0].controller,
                owners[0].block_owner_deletion,
            ),
            (
                "apiregistration.k8s.io/v1",
                "APIService",
                "v1alpha1.fortune.example.test",
                "uid-fortunes",
                Some(false),
                Some(false)
            )
        );
        assert!(role.aggregation_rule.is_none());
        assert!(!api_role_needs_write(role, role));
    }
    // The same API joins the group's aggregated roles under the same label
    // whether a CRD or an APIService provides it.
    assert_ne!(
        aggregation_label(&api, "admin"),
        aggregation_label(&widget_api(), "admin")
    );
    // A role owned by another APIService object (recreated, new uid) is
    // written again.
    let mut stale = roles[0].clone();
    stale.metadata.owner_references.as_mut().expect("owner")[0].uid = "old".into();
    assert!(api_role_needs_write(&stale, &roles[0]));
}

fn operator_role() -> (Role, RoleBinding) {
    let csv = widget_operator();
    let mut role_labels = olm_api::ownership::owner_labels(&csv);
    role_labels.insert(labels::PERMISSIONS_HASH.into(), "h".into());
    let meta = ObjectMeta {
        name: Some("widget-operator.v1.2.0-widget-sa-abc".into()),
        namespace: Some("gadget-system".into()),
        labels: Some(role_labels),
        ..Default::default()
    };
    let role = Role {
        metadata: meta.clone(),
        rules: Some(vec![PolicyRule {
            verbs: vec!["get".into()],
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["configmaps".into()]),
            ..Default::default()
        }]),
    };
    let binding = RoleBinding {
        metadata: meta,
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: "widget-operator.v1.2.0-widget-sa-abc".into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: "widget-sa".into(),
            namespace: Some("gadget-system".into()),
            api_group: None,
        }]),
    };
    (role, binding)
}

#[test]
fn global_groups_lift_roles_to_the_cluster() {
    let (role, binding) = operator_role();
    let (cluster_roles, cluster_bindings) =
        lifted_cluster_rbac(std::slice::from_ref(&role), &[binding]);
    let lifted = &cluster_roles[0];
    assert_eq!(lifted.metadata.name, role.metadata.name);
    assert_eq!(
        lifted.metadata.labels, role.metadata.labels,
        "owner labels kept for cleanup"
    );
    assert!(lifted.metadata.namespace.is_none());
    let rules = lifted.rules.clone().expect("rules");
    assert_eq!(rules.len(), 2);
    assert_eq!(rules[1].resources, Some(vec!["namespaces".to_owned()]));
    assert_eq!(rules[1].verbs, ["get", "list", "watch"]);
    assert_eq!(cluster_bindings[0].role_ref.kind, "ClusterRole");
    assert_eq!(
        cluster_bindings[0].subjects.clone().expect("subjects")[0].name,
        "widget-sa"
    );
}

#[test]
fn targeted_groups_copy_roles_owned_by_the_copy() {
    let group = gadget_group().targeting(&["gadget-system", "cog-works"]);
    let parent = widget_operator().member_of(&group).in_phase(
        olm_api::csv::CsvPhase::SUCCEEDED,
        olm_api::csv::CsvReason::INSTALL_SUCCEEDED,
        minute(0),
    );
    let mut copy = copy_for_namespace(&parent, "cog-works").expect("copy");
    copy.metadata.uid = Some("uid-of-copy".into());
    let (role, binding) = operator_role();
    let (roles, bindings) = target_namespace_rbac(&copy, &[role], &[binding]);
    let copied = &roles[0];
    assert_eq!(copied.metadata.namespace.as_deref(), Some("cog-works"));
    let copied_labels = copied.metadata.labels.clone().expect("labels");
    assert_eq!(copied_labels[labels::OWNER_NAMESPACE], "cog-works");
    assert_eq!(copied_labels[labels::COPIED_FROM], "gadget-system");
    assert_eq!(copied_labels[labels::MANAGED], "true");
    assert_eq!(copied_labels[labels::PERMISSIONS_HASH], "h");
    let owner = &copied.metadata.owner_references.clone().expect("owner")[0];
    assert_eq!(owner.uid, "uid-of-copy");
    assert_eq!(bindings[0].metadata.namespace.as_deref(), Some("cog-works"));

    assert!(copied_role_needs_write(None, copied));
    assert!(!copied_role_needs_write(Some(copied), copied));
    let mut stale = copied.clone();
    stale.rules = None;
    assert!(copied_role_needs_write(Some(&stale), copied));
}
