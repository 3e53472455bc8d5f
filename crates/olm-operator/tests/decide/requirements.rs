//! Requirement statuses with upstream's exact strings, from observed facts.

use k8s_openapi::{
    api::{core::v1::ServiceAccount, rbac::v1::PolicyRule},
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference},
};
use olm_api::csv::{
    ApiServiceDefinitions, ApiServiceDescription, ClusterServiceVersion, CsvPhase, CsvReason,
    GroupVersionKind, RequirementStatus,
};
use olm_operator::decide::requirements::{
    ApiServiceFacts, CrdFacts, PermissionRule, RequirementFacts, RuleScope, ServiceAccountFacts,
    evaluate, permission_rules,
};

use super::fixtures::{CsvFixture, widget_operator, widget_version};

fn established(uid: &str, versions: &[(&str, bool)]) -> CrdFacts {
    CrdFacts {
        uid: Some(uid.to_owned()),
        versions: versions
            .iter()
            .map(|(v, s)| ((*v).to_owned(), *s))
            .collect(),
        established: true,
        names_accepted: true,
        installed_alongside: Vec::new(),
    }
}

fn gvk(group: &str, version: &str, kind: &str) -> GroupVersionKind {
    GroupVersionKind {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
    }
}

/// Everything the widget operator needs is there.
fn healthy_cluster() -> RequirementFacts {
    RequirementFacts {
        server_version: Some("v1.31.2".into()),
        crds: [
            (
                "widgets.gadgets.example.test".to_owned(),
                established("uid-widgets", &[("v1", true)]),
            ),
            (
                "cogs.gears.example.test".to_owned(),
                established("uid-cogs", &[("v1", false), ("v2", true)]),
            ),
        ]
        .into(),
        discovered: [gvk("apps", "v1", "Deployment")].into(),
        service_accounts: [
            ("widget-sa".to_owned(), ServiceAccountFacts::default()),
            ("cog-reader".to_owned(), ServiceAccountFacts::default()),
        ]
        .into(),
        ..Default::default()
    }
}

fn widget() -> ClusterServiceVersion {
    widget_operator().replacing("")
}

fn summary(statuses: &[RequirementStatus]) -> Vec<(String, String, String, String)> {
    statuses
        .iter()
        .map(|s| {
            (
                s.kind.clone(),
                s.name.clone(),
                s.status.to_string(),
                s.message.clone(),
            )
        })
        .collect()
}

fn owned(strings: [&str; 4]) -> (String, String, String, String) {
    (
        strings[0].to_owned(),
        strings[1].to_owned(),
        strings[2].to_owned(),
        strings[3].to_owned(),
    )
}

#[test]
fn everything_present_is_met_with_upstream_messages() {
    let outcome = evaluate(&widget(), &healthy_cluster(), &[]).expect("deployment strategy");
    assert!(outcome.met);
    assert_eq!(
        summary(&outcome.statuses),
        vec![
            owned([
                "ClusterServiceVersion",
                "widget-operator.v1.2.0",
                "Present",
                "CSV minKubeVersion (1.27.0) less than server version (v1.31.2)"
            ]),
            owned([
                "CustomResourceDefinition",
                "cogs.gears.example.test",
                "Present",
                "CRD is present and Established condition is true"
            ]),
            owned([
                "CustomResourceDefinition",
                "widgets.gadgets.example.test",
                "Present",
                "CRD is present and Established condition is true"
            ]),
            owned(["Deployment", "v1.apps", "Present", "Native API exists"]),
            owned(["ServiceAccount", "cog-reader", "Present", ""]),
            owned(["ServiceAccount", "widget-sa", "Present", ""]),
        ]
    );
    let crd = &outcome.statuses[1];
    assert_eq!(
        (
            crd.group.as_str(),
            crd.version.as_str(),
            crd.uuid.as_deref()
        ),
        ("apiextensions.k8s.io", "v1", Some("uid-cogs"))
    );
    let min_kube = &outcome.statuses[0];
    assert_eq!(
        (min_kube.group.as_str(), min_kube.version.as_str()),
        ("operators.coreos.com", "v1alpha1")
    );
    let account = &outcome.statuses[5];
    assert_eq!(
        (account.group.as_str(), account.version.as_str()),
        ("", "v1")
    );
    let dependents = account.dependents.as_ref().expect("one per rule");
    let messages: Vec<&str> = dependents
        .iter()
        .filter_map(|d| d.message.as_deref())
        .collect();
    assert_eq!(
        messages,
        [
            r#"namespaced rule:{"verbs":["get","list"],"apiGroups":[""],"resources":["configmaps"]}"#,
            r#"namespaced rule:{"verbs":["*"],"apiGroups":["gadgets.example.test"],"resources":["widgets"]}"#,
            r#"cluster rule:{"verbs":["get","list","watch"],"apiGroups":["gears.example.test"],"resources":["cogs"]}"#,
        ]
    );
    assert!(dependents.iter().all(|d| d.status == "Satisfied"
        && d.kind == "PolicyRule"
        && d.group == "rbac.authorization.k8s.io"
        && d.version == "v1"));
}

#[test]
fn each_missing_piece_is_named() {
    struct Case {
        name: &'static str,
        change: fn(&mut RequirementFacts, &mut ClusterServiceVersion),
        expect: [&'static str; 4],
    }
    let cases = [
        Case {
            name: "a missing CRD is not present",
            change: |facts, _| {
                facts.crds.remove("cogs.gears.example.test");
            },
            expect: [
                "CustomResourceDefinition",
                "cogs.gears.example.test",
                "NotPresent",
                "CRD is not present",
            ],
        },
        Case {
            name: "a CRD that does not serve the version is not present",
            change: |facts, _| {
                facts.crds.insert(
                    "cogs.gears.example.test".into(),
                    established("uid-cogs", &[("v1", true), ("v2", false)]),
                );
            },
            expect: [
                "CustomResourceDefinition",
                "cogs.gears.example.test",
                "NotPresent",
                "CRD version not served",
            ],
        },
        Case {
            name: "a CRD without the version is not present",
            change: |facts, _| {
                facts.crds.insert(
                    "cogs.gears.example.test".into(),
                    established("uid-cogs", &[("v1", true)]),
                );
            },
            expect: [
                "CustomResourceDefinition",
                "cogs.gears.example.test",
                "NotPresent",
                "CRD version not served",
            ],
        },
        Case {
            name: "a CRD not yet established is present but not available",
            change: |facts, _| {
                if let Some(crd) = facts.crds.get_mut("widgets.gadgets.example.test") {
                    crd.names_accepted = false;
                }
            },
            expect: [
                "CustomResourceDefinition",
                "widgets.gadgets.example.test",
                "PresentNotAvailable",
                "CRD is present but the Established condition is False (not available)",
            ],
        },
        Case {
            name: "a Kubernetes older than minKubeVersion does not satisfy",
            change: |facts, _| facts.server_version = Some("v1.26.3-gke.100".into()),
            expect: [
                "ClusterServiceVersion",
                "widget-operator.v1.2.0",
                "PresentNotSatisfied",
                "CSV version requirement not met: minKubeVersion (1.27.0) > server version (1.26.3)",
            ],
        },
        Case {
            name: "an unknown server version does not satisfy",
            change: |facts, _| facts.server_version = None,
            expect: [
                "ClusterServiceVersion",
                "widget-operator.v1.2.0",
                "PresentNotSatisfied",
                "Server version discovery error",
            ],
        },
        Case {
            name: "an unparsable minKubeVersion does not satisfy",
            change: |_, csv| csv.spec.min_kube_version = Some("1.27".into()),
            expect: [
                "ClusterServiceVersion",
                "widget-operator.v1.2.0",
                "PresentNotSatisfied",
                "CSV version parsing error",
            ],
        },
        Case {
            name: "an unparsable server version does not satisfy",
            change: |facts, _| facts.server_version = Some("v1".into()),
            expect: [
                "ClusterServiceVersion",
                "widget-operator.v1.2.0",
                "PresentNotSatisfied",
                "Server version parsing error",
            ],
        },
        Case {
            name: "a native API the server does not serve is not present",
            change: |facts, _| facts.discovered.clear(),
            expect: [
                "Deployment",
                "v1.apps",
                "NotPresent",
                "Native API does not exist",
            ],
        },
        Case {
            name: "a missing service account is not present",
            change: |facts, _| {
                facts.service_accounts.remove("widget-sa");
            },
            expect: [
                "ServiceAccount",
                "widget-sa",
                "NotPresent",
                "Service account does not exist",
            ],
        },
        Case {
            name: "a service account of another CSV does not satisfy",
            change: |facts, _| {
                facts.service_accounts.insert(
                    "widget-sa".into(),
                    ServiceAccountFacts {
                        owned_by_other_csv: true,
                    },
                );
            },
            expect: [
                "ServiceAccount",
                "widget-sa",
                "PresentNotSatisfied",
                "Service account is owned by another ClusterServiceVersion",
            ],
        },
        Case {
            name: "an unsatisfied rule makes its service account unsatisfied",
            change: |facts, _| {
                facts.unsatisfied_rules.push(PermissionRule {
                    scope: RuleScope::Cluster,
                    service_account: "cog-reader".into(),
                    rule: PolicyRule {
                        verbs: vec!["get".into()],
                        non_resource_urls: Some(vec!["/healthz".into()]),
                        ..Default::default()
                    },
                });
            },
            expect: [
                "ServiceAccount",
                "cog-reader",
                "PresentNotSatisfied",
                "Policy rule not satisfied for service account",
            ],
        },
    ];
    for case in cases {
        let mut facts = healthy_cluster();
        let mut csv = widget();
        (case.change)(&mut facts, &mut csv);
        let outcome = evaluate(&csv, &facts, &[]).expect("deployment strategy");
        assert!(!outcome.met, "{}", case.name);
        let expected = owned(case.expect);
        assert!(
            summary(&outcome.statuses).contains(&expected),
            "{}: {expected:?} not in {:#?}",
            case.name,
            summary(&outcome.statuses)
        );
    }
}

#[test]
fn unsatisfied_rule_is_a_not_satisfied_dependent() {
    let mut facts = healthy_cluster();
    facts.unsatisfied_rules = permission_rules(&widget())
        .into_iter()
        .filter(|r| r.scope == RuleScope::Cluster && r.service_account == "cog-reader")
        .collect();
    let outcome = evaluate(&widget(), &facts, &[]).expect("deployment strategy");
    let reader = outcome
        .statuses
        .iter()
        .find(|s| s.name == "cog-reader")
        .expect("listed");
    let dependents = reader.dependents.as_ref().expect("dependent");
    assert_eq!(dependents[0].status, "NotSatisfied");
    assert_eq!(
        dependents[0].message.as_deref(),
        Some(r#"cluster rule:{"verbs":["get"],"nonResourceURLs":["/healthz"]}"#)
    );
}

#[test]
fn crds_installed_only_alongside_an_older_version_wait_for_the_install_plan() {
    let older = widget_version(
        "widget-operator.v1.1.0",
        "",
        CsvPhase::SUCCEEDED,
        CsvReason::INSTALL_SUCCEEDED,
    );
    let csv = widget().replacing("widget-operator.v1.1.0");
    let mut facts = healthy_cluster();
    if let Some(crd) = facts.crds.get_mut("widgets.gadgets.example.test") {
        crd.installed_alongside = vec![("gadget-system".into(), "widget-operator.v1.1.0".into())];
    }
    let outcome =
        evaluate(&csv, &facts, &[csv.clone(), older.clone()]).expect("deployment strategy");
    assert!(!outcome.met);
    assert!(summary(&outcome.statuses).contains(&owned([
        "CustomResourceDefinition",
        "widgets.gadgets.example.test",
        "PresentNotSatisfied",
        "CRD installed alongside other CSV(s): widget-operator.v1.1.0",
    ])));

    // Once the InstallPlan also recorded the new CSV, the CRD is fine.
    if let Some(crd) = facts.crds.get_mut("widgets.gadgets.example.test") {
        crd.installed_alongside
            .push(("gadget-system".into(), "widget-operator.v1.2.0".into()));
    }
    let outcome =
        evaluate(&csv, &facts, &[csv.clone(), older.clone()]).expect("deployment strategy");
    assert!(outcome.met);

    // A CSV that is no ancestor does not count.
    if let Some(crd) = facts.crds.get_mut("widgets.gadgets.example.test") {
        crd.installed_alongside = vec![("gadget-system".into(), "gizmo-operator.v3.0.0".into())];
    }
    let gizmo = widget_version(
        "gizmo-operator.v3.0.0",
        "",
        CsvPhase::SUCCEEDED,
        CsvReason::INSTALL_SUCCEEDED,
    );
    let outcome =
        evaluate(&csv, &facts, &[csv.clone(), older, gizmo]).expect("deployment strategy");
    assert!(outcome.met);
}

#[test]
fn api_services_are_checked_by_name_and_deployment() {
    let mut csv = widget();
    csv.spec.apiservicedefinitions = Some(ApiServiceDefinitions {
        owned: Some(vec![ApiServiceDescription {
            name: "sprockets".into(),
            group: "sprockets.example.test".into(),
            version: "v1".into(),
            kind: "Sprocket".into(),
            deployment_name: Some("widget-controller".into()),
            ..Default::default()
        }]),
        required: Some(vec![ApiServiceDescription {
            name: "gears".into(),
            group: "gears.example.test".into(),
            version: "v1beta1".into(),
            kind: "Gear".into(),
            ..Default::default()
        }]),
    });
    let mut facts = healthy_cluster();
    let outcome = evaluate(&csv, &facts, &[]).expect("deployment strategy");
    assert!(!outcome.met, "required APIService missing");
    assert!(summary(&outcome.statuses).contains(&owned([
        "APIService",
        "v1beta1.gears.example.test",
        "NotPresent",
        ""
    ])));
    assert!(summary(&outcome.statuses).contains(&owned([
        "APIService",
        "v1.sprockets.example.test",
        "DeploymentFound",
        ""
    ])));

    facts.api_services.insert(
        "v1beta1.gears.example.test".into(),
        ApiServiceFacts {
            uid: Some("uid-gears".into()),
            available: true,
        },
    );
    facts
        .discovered
        .insert(gvk("gears.example.test", "v1beta1", "Gear"));
    let outcome = evaluate(&csv, &facts, &[]).expect("deployment strategy");
    assert!(outcome.met);
    let required = outcome
        .statuses
        .iter()
        .find(|s| s.name == "v1beta1.gears.example.test")
        .expect("listed");
    assert_eq!(required.status, "Present");
    assert_eq!(required.uuid.as_deref(), Some("uid-gears"));
    assert_eq!(required.group, "apiregistration.k8s.io");

    if let Some(owned_api) = csv
        .spec
        .apiservicedefinitions
        .as_mut()
        .and_then(|d| d.owned.as_mut())
    {
        owned_api[0].deployment_name = Some("gizmo-controller".into());
    }
    let outcome = evaluate(&csv, &facts, &[]).expect("deployment strategy");
    assert!(!outcome.met);
    assert!(summary(&outcome.statuses).contains(&owned([
        "APIService",
        "v1.sprockets.example.test",
        "DeploymentNotFound",
        ""
    ])));
}

#[test]
fn an_unknown_strategy_cannot_be_evaluated() {
    let csv = widget().with_strategy("helm");
    let err = evaluate(&csv, &healthy_cluster(), &[]).expect_err("invalid strategy");
    assert_eq!(err.to_string(), "unrecognized install strategy");
}

#[test]
fn facts_are_read_from_cluster_objects() {
    let crd: CustomResourceDefinition = serde_yaml_ng::from_str(
        r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.gadgets.example.test
  uid: uid-widgets
  annotations:
    operatorframework.io/installed-alongside-96b9f1e6b1b0e5c3: gadget-system/widget-operator.v1.1.0
    operatorframework.io/installed-alongside-bogus: not-a-reference
    unrelated: gadget-system/widget-operator.v0.9.0
spec:
  group: gadgets.example.test
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
    - {name: v1, served: true, storage: true}
    - {name: v1alpha1, served: false, storage: false}
status:
  conditions:
    - {type: NamesAccepted, status: "True"}
    - {type: Established, status: "True"}
"#,
    )
    .expect("valid CRD");
    let facts = CrdFacts::of(&crd);
    assert_eq!(facts.uid.as_deref(), Some("uid-widgets"));
    assert!(facts.established && facts.names_accepted);
    assert_eq!(
        facts.versions,
        [("v1".to_owned(), true), ("v1alpha1".to_owned(), false)]
    );
    assert_eq!(
        facts.installed_alongside,
        [(
            "gadget-system".to_owned(),
            "widget-operator.v1.1.0".to_owned()
        )]
    );

    let csv = widget();
    let reference = |kind: &str, uid: &str| OwnerReference {
        api_version: "operators.coreos.com/v1alpha1".into(),
        kind: kind.into(),
        name: "someone".into(),
        uid: uid.into(),
        ..Default::default()
    };
    let account = |refs: Vec<OwnerReference>| ServiceAccount {
        metadata: ObjectMeta {
            owner_references: Some(refs),
            ..Default::default()
        },
        ..Default::default()
    };
    let uid = csv.metadata.uid.clone().unwrap_or_default();
    assert!(
        ServiceAccountFacts::of(
            &account(vec![reference("ClusterServiceVersion", "other")]),
            &uid
        )
        .owned_by_other_csv
    );
    assert!(
        !ServiceAccountFacts::of(
            &account(vec![reference("ClusterServiceVersion", &uid)]),
            &uid
        )
        .owned_by_other_csv
    );
    assert!(
        !ServiceAccountFacts::of(&account(vec![reference("Deployment", "other")]), &uid)
            .owned_by_other_csv
    );
}

#[test]
fn permission_rules_list_every_rule_with_scope() {
    let rules = permission_rules(&widget());
    let listed: Vec<(RuleScope, &str)> = rules
        .iter()
        .map(|r| (r.scope, r.service_account.as_str()))
        .collect();
    assert_eq!(
        listed,
        [
            (RuleScope::Namespaced, "widget-sa"),
            (RuleScope::Namespaced, "widget-sa"),
            (RuleScope::Cluster, "widget-sa"),
            (RuleScope::Cluster, "cog-reader"),
        ]
    );
}
