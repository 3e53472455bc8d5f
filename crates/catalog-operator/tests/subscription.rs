//! Subscription status rules, table-driven from upstream's behaviour.
#![allow(clippy::unwrap_used)]

use catalog_operator::decide::subscription::{self, CatalogHealth, Deprecations};
use jiff::Timestamp;
use olm_api::{
    conditions,
    install_plan::{InstallPlan, InstallPlanStatus},
    subscription::{Approval, Subscription, SubscriptionState, SubscriptionStatus},
};

fn sub(yaml_spec: &str) -> Subscription {
    serde_yaml_ng::from_str(&format!(
        "{{apiVersion: operators.coreos.com/v1alpha1, kind: Subscription, metadata: {{name: s, namespace: ns}}, spec: {yaml_spec}}}"
    ))
    .unwrap()
}

fn etcd() -> Subscription {
    sub("{name: etcd, channel: alpha, source: cat, sourceNamespace: olm}")
}

fn t(n: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + n).unwrap()
}

fn health(ns: &str, name: &str, healthy: bool) -> CatalogHealth {
    CatalogHealth {
        namespace: ns.into(),
        name: name.into(),
        uid: format!("uid-{ns}-{name}"),
        resource_version: "1".into(),
        healthy,
    }
}

fn cond<'a>(status: &'a SubscriptionStatus, type_: &str) -> (&'a str, String, String) {
    let c = conditions::find(&status.conditions, type_).unwrap_or_else(|| panic!("no {type_}"));
    (
        c.status.as_str(),
        c.reason.as_ref().map(|r| r.to_string()).unwrap_or_default(),
        c.message.clone().unwrap_or_default(),
    )
}

#[test]
fn catalog_health_reasons_and_messages() {
    let s = etcd();
    let cases: Vec<(Vec<CatalogHealth>, &str, &str, &str)> = vec![
        (
            vec![health("olm", "cat", true), health("ns", "local", true)],
            "False",
            "CatalogSourcesAdded",
            "all available catalogsources are healthy",
        ),
        (
            vec![health("olm", "cat", false)],
            "True",
            "CatalogSourcesAdded",
            "targeted catalogsource olm/cat unhealthy",
        ),
        (
            vec![health("olm", "other", true)],
            "True",
            "CatalogSourcesAdded",
            "targeted catalogsource olm/cat missing",
        ),
        (
            vec![],
            "True",
            "NoCatalogSourcesFound",
            "dependency resolution requires at least one catalogsource",
        ),
    ];
    for (catalogs, status, reason, message) in cases {
        let mut st = SubscriptionStatus::default();
        assert!(subscription::update_catalog_health(
            &s,
            &mut st,
            &catalogs,
            t(0)
        ));
        let (got_status, got_reason, got_message) = cond(&st, "CatalogSourcesUnhealthy");
        assert_eq!(
            (got_status, got_reason.as_str(), got_message.as_str()),
            (status, reason, message)
        );
        assert_eq!(st.catalog_health.len(), catalogs.len());
    }
}

#[test]
fn catalog_health_settles_then_reports_changes() {
    let s = etcd();
    let mut st = SubscriptionStatus::default();
    let both = vec![health("olm", "cat", true), health("ns", "local", true)];
    assert!(subscription::update_catalog_health(
        &s,
        &mut st,
        &both,
        t(0)
    ));
    // Sorted by namespace, then name.
    let names: Vec<_> = st
        .catalog_health
        .iter()
        .map(|h| h.catalog_source_ref.as_ref().unwrap().name.clone().unwrap())
        .collect();
    assert_eq!(names, ["local", "cat"]);
    // Same set, healthy: the reason settles on AllCatalogSourcesHealthy.
    assert!(subscription::update_catalog_health(
        &s,
        &mut st,
        &both,
        t(1)
    ));
    assert_eq!(
        cond(&st, "CatalogSourcesUnhealthy").1,
        "AllCatalogSourcesHealthy"
    );
    // And then nothing changes.
    assert!(!subscription::update_catalog_health(
        &s,
        &mut st,
        &both,
        t(2)
    ));

    let sick = vec![health("olm", "cat", false), health("ns", "local", true)];
    assert!(subscription::update_catalog_health(
        &s,
        &mut st,
        &sick,
        t(3)
    ));
    assert_eq!(
        cond(&st, "CatalogSourcesUnhealthy"),
        (
            "True",
            "CatalogSourcesUpdated".into(),
            "targeted catalogsource olm/cat unhealthy".into()
        )
    );
    assert!(subscription::update_catalog_health(
        &s,
        &mut st,
        &[health("olm", "cat", false)],
        t(4)
    ));
    assert_eq!(
        cond(&st, "CatalogSourcesUnhealthy").1,
        "CatalogSourcesDeleted"
    );
}

fn plan(yaml: &str) -> InstallPlanStatus {
    serde_yaml_ng::from_str(yaml).unwrap()
}

fn referenced(state: &str) -> SubscriptionStatus {
    serde_yaml_ng::from_str(&format!(
        "{{state: '{state}', currentCSV: etcd.v1, installPlanRef: {{name: install-1, namespace: ns}}, installplan: {{apiVersion: operators.coreos.com/v1alpha1, kind: InstallPlan, name: install-1, uuid: u}}}}"
    ))
    .unwrap()
}

#[test]
fn install_plan_conditions_follow_the_phase() {
    let cases = [
        (
            "{phase: '', catalogSources: []}",
            "InstallPlanPending",
            "InstallPlanNotYetReconciled",
            "",
        ),
        (
            "{phase: Installing, catalogSources: []}",
            "InstallPlanPending",
            "Installing",
            "",
        ),
        (
            "{phase: RequiresApproval, catalogSources: []}",
            "InstallPlanPending",
            "RequiresApproval",
            "",
        ),
        (
            "{phase: Installing, catalogSources: [], bundleLookups: [{path: p, identifier: a, replaces: '', conditions: [{type: BundleLookupPending, status: 'True', message: unpack job not completed}]}, {path: q, identifier: b, replaces: '', conditions: [{type: BundleLookupPending, status: 'True', message: still going}]}]}",
            "InstallPlanPending",
            "Installing",
            "unpack job not completed. still going.",
        ),
        (
            "{phase: Failed, catalogSources: [], conditions: [{type: Installed, status: 'False', reason: InstallComponentFailed, message: boom}]}",
            "InstallPlanFailed",
            "InstallComponentFailed",
            "boom",
        ),
        (
            "{phase: Failed, catalogSources: []}",
            "InstallPlanFailed",
            "InstallPlanFailed",
            "",
        ),
    ];
    for (ip, type_, reason, message) in cases {
        let mut st = referenced("UpgradePending");
        assert!(
            subscription::update_install_plan_conditions(&mut st, Some(&plan(ip)), t(0)),
            "{ip}"
        );
        assert_eq!(
            cond(&st, type_),
            ("True", reason.to_owned(), message.to_owned()),
            "{ip}"
        );
        let other = if type_ == "InstallPlanPending" {
            "InstallPlanFailed"
        } else {
            "InstallPlanPending"
        };
        assert!(conditions::find(&st.conditions, other).is_none());
        // Idempotent.
        assert!(!subscription::update_install_plan_conditions(
            &mut st,
            Some(&plan(ip)),
            t(1)
        ));
    }
    // Complete clears both.
    let mut st = referenced("UpgradePending");
    subscription::update_install_plan_conditions(
        &mut st,
        Some(&plan("{phase: Installing, catalogSources: []}")),
        t(0),
    );
    assert!(subscription::update_install_plan_conditions(
        &mut st,
        Some(&plan("{phase: Complete, catalogSources: []}")),
        t(1)
    ));
    assert!(st.conditions.is_empty());
}

#[test]
fn a_missing_install_plan_resets_a_pending_upgrade_or_is_reported() {
    let mut pending = referenced("UpgradePending");
    assert!(subscription::update_install_plan_conditions(
        &mut pending,
        None,
        t(0)
    ));
    assert_eq!(pending.install_plan_ref, None);
    assert_eq!(pending.install_plan, None);
    assert_eq!(pending.current_csv, None);
    assert_eq!(pending.state, Some(SubscriptionState::NONE));

    let mut latest = referenced("AtLatestKnown");
    assert!(subscription::update_install_plan_conditions(
        &mut latest,
        None,
        t(0)
    ));
    assert_eq!(
        cond(&latest, "InstallPlanMissing"),
        (
            "True",
            "ReferencedInstallPlanNotFound".into(),
            String::new()
        )
    );
    assert!(latest.install_plan_ref.is_some());
}

#[test]
fn state_follows_the_current_csv() {
    let cases = [
        (true, false, false, "AtLatestKnown", Some("etcd.v1")),
        (false, false, false, "UpgradePending", None),
        (false, true, false, "UpgradePending", None),
        (false, true, true, "UpgradeFailed", None),
    ];
    for (exists, failed, fail_forward, state, installed) in cases {
        let mut st = referenced("");
        subscription::update_state(&mut st, exists, failed, fail_forward, t(0));
        assert_eq!(
            st.state.as_ref().map(|s| s.to_string()).as_deref(),
            Some(state)
        );
        assert_eq!(st.installed_csv.as_deref(), installed);
    }
    let mut empty = SubscriptionStatus::default();
    assert!(!subscription::update_state(
        &mut empty,
        true,
        false,
        false,
        t(0)
    ));
}

#[test]
fn any_manual_subscription_makes_the_namespace_manual() {
    let auto = sub("{name: a, source: c, sourceNamespace: n, installPlanApproval: Automatic}");
    let manual = sub("{name: b, source: c, sourceNamespace: n, installPlanApproval: Manual}");
    let lower = sub("{name: b, source: c, sourceNamespace: n, installPlanApproval: manual}");
    assert_eq!(
        subscription::namespace_approval([&auto]),
        Approval::AUTOMATIC
    );
    assert_eq!(
        subscription::namespace_approval([&auto, &manual]),
        Approval::MANUAL
    );
    assert_eq!(
        subscription::namespace_approval([&auto, &lower]),
        Approval::AUTOMATIC,
        "only the exact Manual"
    );
    assert_eq!(subscription::namespace_approval([]), Approval::AUTOMATIC);
}

#[test]
fn next_generation_is_above_every_subscription_and_plan() {
    let mut a = etcd();
    a.status = Some(serde_yaml_ng::from_str("{installPlanGeneration: 3}").unwrap());
    let ip: InstallPlan = serde_yaml_ng::from_str(
        "{apiVersion: operators.coreos.com/v1alpha1, kind: InstallPlan, metadata: {name: i}, spec: {clusterServiceVersionNames: [], approval: Automatic, approved: true, generation: 5}}",
    )
    .unwrap();
    assert_eq!(subscription::next_install_plan_generation(&[], &[]), 1);
    assert_eq!(
        subscription::next_install_plan_generation(&[a.clone()], &[]),
        4
    );
    assert_eq!(subscription::next_install_plan_generation(&[a], &[ip]), 6);
}

#[test]
fn dependency_subscriptions_are_named_as_upstream() {
    assert_eq!(
        olm_plan::steps::dependency_subscription_name("etcd", "alpha", "cat", "olm"),
        "etcd-alpha-cat-olm"
    );
}

#[test]
fn deprecation_conditions_roll_up() {
    let s = etcd();
    let mut st = SubscriptionStatus {
        installed_csv: Some("etcd.v1".into()),
        ..SubscriptionStatus::default()
    };
    let all = Deprecations {
        package: Some("use etcd-ng".into()),
        channel: Some("alpha is over".into()),
        bundle: Some("v1 has a CVE".into()),
    };
    assert!(subscription::update_deprecations(&s, &mut st, &all, t(0)));
    assert_eq!(
        cond(&st, "PackageDeprecated").2,
        "olm.package/etcd: use etcd-ng"
    );
    assert_eq!(
        cond(&st, "ChannelDeprecated").2,
        "olm.channel/alpha: alpha is over"
    );
    assert_eq!(
        cond(&st, "BundleDeprecated").2,
        "olm.bundle/etcd.v1: v1 has a CVE"
    );
    assert_eq!(
        cond(&st, "Deprecated").2,
        "olm.package/etcd: use etcd-ng; olm.channel/alpha: alpha is over; olm.bundle/etcd.v1: v1 has a CVE"
    );
    assert!(
        !subscription::update_deprecations(&s, &mut st, &all, t(1)),
        "idempotent"
    );

    // No channel on the Subscription: no channel condition.
    let unchanneled = sub("{name: etcd, source: cat, sourceNamespace: olm}");
    let mut st2 = SubscriptionStatus::default();
    subscription::update_deprecations(&unchanneled, &mut st2, &all, t(0));
    assert!(conditions::find(&st2.conditions, "ChannelDeprecated").is_none());

    // Nothing deprecated any more: every condition goes.
    assert!(subscription::update_deprecations(
        &s,
        &mut st,
        &Deprecations::default(),
        t(2)
    ));
    assert!(st.conditions.is_empty());
}

#[test]
fn unpack_conditions_follow_the_lookups() {
    let pending = plan(
        "{phase: Installing, catalogSources: [], bundleLookups: [{path: p, identifier: a, replaces: '', conditions: [{type: BundleLookupNotPersisted, status: 'True'}, {type: BundleLookupPending, status: 'True', message: waiting for bundle-unpacker}]}]}",
    );
    let failed = plan(
        "{phase: Installing, catalogSources: [], bundleLookups: [{path: p, identifier: a, replaces: '', conditions: [{type: BundleLookupNotPersisted, status: 'True'}, {type: BundleLookupFailed, status: 'True', reason: ImagePullFailed, message: manifest unknown}]}]}",
    );
    let done = plan("{phase: Complete, catalogSources: []}");
    let mut st = referenced("UpgradePending");
    assert!(subscription::update_unpack_conditions(
        &mut st,
        Some(&pending),
        t(0)
    ));
    assert_eq!(
        cond(&st, "BundleUnpacking"),
        (
            "True",
            "UnpackingInProgress".into(),
            "waiting for bundle-unpacker".into()
        )
    );
    assert!(conditions::find(&st.conditions, "BundleUnpackFailed").is_none());
    assert!(
        !subscription::update_unpack_conditions(&mut st, Some(&pending), t(1)),
        "idempotent"
    );

    assert!(subscription::update_unpack_conditions(
        &mut st,
        Some(&failed),
        t(2)
    ));
    assert_eq!(
        cond(&st, "BundleUnpackFailed"),
        (
            "True",
            "BundleUnpackFailed".into(),
            "Bundle unpacking failed - ImagePullFailed: manifest unknown".into()
        )
    );
    assert!(conditions::find(&st.conditions, "BundleUnpacking").is_none());

    assert!(subscription::update_unpack_conditions(
        &mut st,
        Some(&done),
        t(3)
    ));
    assert!(st.conditions.is_empty());
}

/// A plan named `name` with `csvs`, phase and lookups (`(path, failed)`).
fn full_plan(name: &str, csvs: &[&str], phase: &str, lookups: &[(&str, bool)]) -> InstallPlan {
    let lookups: Vec<serde_json::Value> = lookups
        .iter()
        .map(|(path, failed)| {
            let mut conditions = vec![serde_json::json!({"type": "BundleLookupNotPersisted", "status": "True"})];
            if *failed {
                conditions.push(serde_json::json!({"type": "BundleLookupFailed", "status": "True", "reason": "DeadlineExceeded"}));
            }
            serde_json::json!({"path": path, "identifier": "a", "replaces": "", "conditions": conditions})
        })
        .collect();
    serde_json::from_value(serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"clusterServiceVersionNames": csvs, "approval": "Automatic", "approved": true},
        "status": {"phase": phase, "catalogSources": [], "bundleLookups": lookups}
    }))
    .unwrap()
}

#[test]
fn a_plan_is_stuck_only_on_a_failed_lookup_of_a_live_plan() {
    let cases = [
        ("Installing", vec![("img", true)], true),
        ("Installing", vec![("ok", false), ("img", true)], true),
        ("Installing", vec![("img", false)], false),
        ("Installing", vec![], false),
        ("RequiresApproval", vec![("img", true)], true),
        ("Failed", vec![("img", true)], false),
        ("Complete", vec![("img", true)], false),
    ];
    for (phase, lookups, stuck) in cases {
        let plan = full_plan("p", &["a"], phase, &lookups);
        assert_eq!(
            subscription::stuck_on_unpack(plan.status.as_ref().unwrap()),
            stuck,
            "{phase} {lookups:?}"
        );
    }
}

#[test]
fn a_stuck_plan_is_not_written_again_for_the_same_images() {
    let stuck = full_plan("p", &["b", "a"], "Installing", &[("x", true), ("y", false)]);
    let s = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    // Same CSVs and images in any order: the same plan.
    assert!(subscription::same_as_stuck(
        &stuck,
        &s(&["a", "b"]),
        &s(&["y", "x"])
    ));
    // A fixed image, another CSV, or one lookup fewer: a new plan.
    assert!(!subscription::same_as_stuck(
        &stuck,
        &s(&["a", "b"]),
        &s(&["x2", "y"])
    ));
    assert!(!subscription::same_as_stuck(
        &stuck,
        &s(&["a", "c"]),
        &s(&["x", "y"])
    ));
    assert!(!subscription::same_as_stuck(
        &stuck,
        &s(&["a", "b"]),
        &s(&["y"])
    ));
}

#[test]
fn only_unreferenced_stuck_plans_are_superseded() {
    let plans = vec![
        full_plan("old-stuck", &["a"], "Installing", &[("bad", true)]),
        full_plan("current-stuck", &["a"], "Installing", &[("bad2", true)]),
        full_plan("waiting", &["a"], "Installing", &[("slow", false)]),
        full_plan("done", &["a"], "Complete", &[]),
        full_plan("failed", &["a"], "Failed", &[("bad", true)]),
    ];
    let superseded: Vec<&str> = subscription::superseded_stuck_plans(&plans, &["current-stuck"])
        .iter()
        .map(|p| p.metadata.name.as_deref().unwrap())
        .collect();
    assert_eq!(superseded, ["old-stuck"]);
}

fn owned_plan(
    name: &str,
    generation: i64,
    owner_uid: &str,
    resolved: Option<&str>,
) -> std::sync::Arc<InstallPlan> {
    let mut plan: InstallPlan = serde_yaml_ng::from_str(&format!(
        "{{apiVersion: operators.coreos.com/v1alpha1, kind: InstallPlan, metadata: {{name: {name}, namespace: ns, ownerReferences: [{{apiVersion: operators.coreos.com/v1alpha1, kind: Subscription, name: s, uid: {owner_uid}}}]}}, spec: {{clusterServiceVersionNames: [etcd.v2], approval: Automatic, approved: true, generation: {generation}}}}}"
    ))
    .unwrap();
    if let Some(resolved) = resolved {
        plan.metadata.annotations = Some(
            [(
                subscription::RESOLVED_SUBSCRIPTIONS.to_owned(),
                resolved.to_owned(),
            )]
            .into(),
        );
    }
    std::sync::Arc::new(plan)
}

#[test]
fn a_plan_written_before_a_crash_is_adopted_not_written_again() {
    let mut s = etcd();
    s.metadata.uid = Some("sub-uid".to_owned());
    let resolved = subscription::resolved_subscriptions_annotation([("s", "etcd.v2")]);
    assert_eq!(resolved, r#"{"s":"etcd.v2"}"#);

    // A fresh Subscription whose status was never written: the plan is its.
    let fresh = SubscriptionStatus::default();
    let plans = vec![owned_plan("install-aaaaa", 1, "sub-uid", Some(&resolved))];
    let (plan, csv) = subscription::orphaned_plan(&s, &fresh, &plans).unwrap();
    assert_eq!(
        (plan.metadata.name.as_deref(), csv.as_str()),
        (Some("install-aaaaa"), "etcd.v2")
    );

    // An upgrade's plan (generation 2) the status does not point at yet;
    // the newest such plan wins.
    let upgrading: SubscriptionStatus =
        serde_yaml_ng::from_str("{installPlanGeneration: 1, currentCSV: etcd.v1}").unwrap();
    let plans = vec![
        owned_plan("install-aaaaa", 1, "sub-uid", Some(r#"{"s":"etcd.v1"}"#)),
        owned_plan("install-bbbbb", 2, "sub-uid", Some(&resolved)),
    ];
    let (plan, _) = subscription::orphaned_plan(&s, &upgrading, &plans).unwrap();
    assert_eq!(plan.metadata.name.as_deref(), Some("install-bbbbb"));

    // Nothing to adopt: already recorded; another Subscription's plan (by
    // uid or by name); a plan without the annotation (written by upstream).
    let recorded: SubscriptionStatus =
        serde_yaml_ng::from_str("{installPlanGeneration: 2}").unwrap();
    assert!(subscription::orphaned_plan(&s, &recorded, &plans).is_none());
    let others = vec![
        owned_plan("install-ccccc", 3, "other-uid", Some(&resolved)),
        owned_plan(
            "install-ddddd",
            3,
            "sub-uid",
            Some(r#"{"another":"etcd.v2"}"#),
        ),
        owned_plan("install-eeeee", 3, "sub-uid", None),
    ];
    assert!(subscription::orphaned_plan(&s, &upgrading, &others).is_none());
}

#[test]
fn a_plan_created_without_its_status_is_filled_in_not_written_again() {
    let mut s = etcd();
    s.metadata.uid = Some("sub-uid".to_owned());
    let csvs = vec!["etcd.v2".to_owned()];
    let bare = owned_plan("install-aaaaa", 1, "sub-uid", None);
    let plans = vec![bare.clone()];
    assert_eq!(
        subscription::unfinished_plan(std::slice::from_ref(&s), &plans, &csvs)
            .and_then(|p| p.metadata.name.as_deref()),
        Some("install-aaaaa")
    );
    // Another resolution, another owner, or a plan already written: no.
    assert!(
        subscription::unfinished_plan(std::slice::from_ref(&s), &plans, &["etcd.v3".to_owned()])
            .is_none()
    );
    let mut stranger = s.clone();
    stranger.metadata.uid = Some("other-uid".to_owned());
    assert!(subscription::unfinished_plan(&[stranger], &plans, &csvs).is_none());
    let mut written = bare.as_ref().clone();
    written.status = Some(plan(
        "{phase: Installing, catalogSources: [], plan: [{resolving: etcd.v2, resource: {sourceName: c, sourceNamespace: n, group: operators.coreos.com, version: v1alpha1, kind: ClusterServiceVersion, name: etcd.v2}, status: Unknown}]}",
    ));
    assert!(subscription::unfinished_plan(&[s], &[std::sync::Arc::new(written)], &csvs).is_none());
}

/// The refresh of one Subscription, table-driven: what it finds in its
/// namespace (plans, CSVs) decides its plan reference, state and installed
/// CSV, and whether anything is written at all.
#[test]
fn refresh_decides_the_status_from_what_the_namespace_holds() {
    /// state, currentCSV, installedCSV, installPlanRef's name, adopted plan.
    type Want = (
        Option<&'static str>,
        Option<&'static str>,
        Option<&'static str>,
        Option<&'static str>,
        Option<&'static str>,
    );
    struct Case {
        name: &'static str,
        status: Option<&'static str>,
        annotations: &'static [(&'static str, &'static str)],
        plans: Vec<std::sync::Arc<InstallPlan>>,
        csvs: &'static [&'static str],
        want: Want,
    }
    let with_status = |p: std::sync::Arc<InstallPlan>, phase: &str| {
        let mut p = p.as_ref().clone();
        p.status = Some(plan(&format!("{{phase: {phase}, catalogSources: []}}")));
        std::sync::Arc::new(p)
    };
    let resolved = r#"{"s":"etcd.v2"}"#;
    let cases = vec![
        Case {
            name: "nothing resolved yet: only catalog health",
            status: None,
            annotations: &[],
            plans: vec![],
            csvs: &[],
            want: (None, None, None, None, None),
        },
        Case {
            name: "generated by a plan step: adopts that plan and its starting CSV",
            status: None,
            annotations: &[("olm.generated-by", "install-aaaaa")],
            plans: vec![with_status(
                owned_plan("install-aaaaa", 1, "someone", None),
                "Installing",
            )],
            csvs: &[],
            want: (
                Some("UpgradePending"),
                Some("etcd.v0"),
                None,
                Some("install-aaaaa"),
                None,
            ),
        },
        Case {
            name: "generated by a plan that is gone: nothing to adopt",
            status: None,
            annotations: &[("olm.generated-by", "install-gone")],
            plans: vec![],
            csvs: &[],
            want: (None, None, None, None, None),
        },
        Case {
            name: "a plan a restart orphaned: adopted with the CSV it chose",
            status: None,
            annotations: &[],
            plans: vec![with_status(
                owned_plan("install-bbbbb", 1, "sub-uid", Some(resolved)),
                "Installing",
            )],
            csvs: &[],
            want: (
                Some("UpgradePending"),
                Some("etcd.v2"),
                None,
                Some("install-bbbbb"),
                Some("install-bbbbb"),
            ),
        },
        Case {
            name: "the current CSV exists: at latest known, installed",
            status: Some(
                "{state: UpgradePending, currentCSV: etcd.v2, installPlanGeneration: 1, installPlanRef: {name: install-bbbbb}}",
            ),
            annotations: &[],
            plans: vec![with_status(
                owned_plan("install-bbbbb", 1, "sub-uid", Some(resolved)),
                "Complete",
            )],
            csvs: &["etcd.v2"],
            want: (
                Some("AtLatestKnown"),
                Some("etcd.v2"),
                Some("etcd.v2"),
                Some("install-bbbbb"),
                None,
            ),
        },
        Case {
            name: "the plan failed and fail-forward is off: still pending",
            status: Some(
                "{state: UpgradePending, currentCSV: etcd.v2, installPlanGeneration: 1, installPlanRef: {name: install-bbbbb}}",
            ),
            annotations: &[],
            plans: vec![with_status(
                owned_plan("install-bbbbb", 1, "sub-uid", Some(resolved)),
                "Failed",
            )],
            csvs: &[],
            want: (
                Some("UpgradePending"),
                Some("etcd.v2"),
                None,
                Some("install-bbbbb"),
                None,
            ),
        },
    ];
    for case in cases {
        let mut s = sub(
            "{name: etcd, channel: alpha, source: cat, sourceNamespace: olm, startingCSV: etcd.v0}",
        );
        s.metadata.uid = Some("sub-uid".to_owned());
        s.status = case.status.map(|y| serde_yaml_ng::from_str(y).unwrap());
        s.metadata.annotations = Some(
            case.annotations
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        let csvs: Vec<String> = case.csvs.iter().map(|c| (*c).to_owned()).collect();
        let catalogs = [health("olm", "cat", true)];
        let refresh = subscription::refresh(&subscription::SubscriptionObservation {
            subscription: &s,
            plans: &case.plans,
            csvs: &csvs,
            catalogs: &catalogs,
            now: t(1),
        });
        let st = &refresh.status;
        let got = (
            st.state.as_ref().map(|s| s.as_str()),
            st.current_csv.as_deref(),
            st.installed_csv.as_deref(),
            st.install_plan_ref.as_ref().and_then(|r| r.name.as_deref()),
            refresh.adopted.as_deref(),
        );
        assert_eq!(got, case.want, "{}", case.name);
        // Catalog health is always kept, so a first refresh always writes.
        assert_eq!(
            cond(st, "CatalogSourcesUnhealthy").0,
            "False",
            "{}",
            case.name
        );
        assert!(refresh.to_write(&s).is_some(), "{}", case.name);

        // Refreshing what was written settles: the health reason moves
        // from CatalogSourcesAdded to AllCatalogSourcesHealthy (upstream's
        // two steps), then nothing more is written.
        let mut stored = s.clone();
        let mut writes = 0;
        let mut status = refresh.status.clone();
        for pass in 2..6 {
            stored.status = Some(status.clone());
            let next = subscription::refresh(&subscription::SubscriptionObservation {
                subscription: &stored,
                plans: &case.plans,
                csvs: &csvs,
                catalogs: &catalogs,
                now: t(pass),
            });
            match next.to_write(&stored) {
                Some(written) => {
                    writes += 1;
                    status = written.clone();
                }
                None => break,
            }
        }
        assert_eq!(writes, 1, "{}", case.name);
        assert_eq!(
            cond(&status, "CatalogSourcesUnhealthy").1,
            "AllCatalogSourcesHealthy"
        );
    }
}

#[test]
fn resolution_outcomes_set_and_clear_the_failure_once() {
    let mut s = etcd();
    let failed = subscription::resolution_failed(
        &s,
        "ConstraintsNotSatisfiable".into(),
        "no operators found",
        t(1),
    );
    assert_eq!(
        cond(&failed, "ResolutionFailed"),
        (
            "True",
            "ConstraintsNotSatisfiable".to_owned(),
            "no operators found".to_owned()
        )
    );
    assert_eq!(failed.last_updated.as_ref().map(|t| t.0), Some(t(1)));
    s.status = Some(failed);
    // The same failure again writes nothing (lastUpdated kept).
    let same = subscription::resolution_failed(
        &s,
        "ConstraintsNotSatisfiable".into(),
        "no operators found",
        t(2),
    );
    assert!(!subscription::changed(&s, &same));

    let cleared = subscription::resolution_succeeded(&s, t(3));
    assert!(conditions::find(&cleared.conditions, "ResolutionFailed").is_none());
    assert_eq!(cleared.last_updated.as_ref().map(|t| t.0), Some(t(3)));
    s.status = Some(cleared);
    assert!(!subscription::changed(
        &s,
        &subscription::resolution_succeeded(&s, t(4))
    ));
}

#[test]
fn a_resolved_csv_hands_the_subscription_to_its_plan_or_lets_a_stuck_one_go() {
    let mut s = etcd();
    s.status = Some(
        serde_yaml_ng::from_str(
            "{state: UpgradePending, currentCSV: etcd.v1, installPlanRef: {name: install-old}, installplan: {apiVersion: operators.coreos.com/v1alpha1, kind: InstallPlan, name: install-old, uuid: u}, conditions: [{type: ResolutionFailed, status: 'True'}, {type: BundleUnpackFailed, status: 'True'}, {type: BundleUnpacking, status: 'True'}, {type: CatalogSourcesUnhealthy, status: 'False'}]}",
        )
        .unwrap(),
    );
    let mut new_plan = owned_plan("install-new", 7, "sub-uid", None)
        .as_ref()
        .clone();
    new_plan.metadata.uid = Some("plan-uid".to_owned());

    let handed = subscription::resolved(
        &s,
        "etcd.v2",
        subscription::HandOff::Plan {
            plan: &new_plan,
            generation: 7,
        },
        t(1),
    );
    assert_eq!(handed.current_csv.as_deref(), Some("etcd.v2"));
    assert_eq!(
        handed.state.as_ref().map(|s| s.as_str()),
        Some("UpgradePending")
    );
    assert_eq!(handed.install_plan_generation, Some(7));
    let reference = handed.install_plan_ref.as_ref().unwrap();
    assert_eq!(
        (
            reference.name.as_deref(),
            reference.kind.as_deref(),
            reference.uid.as_deref()
        ),
        (Some("install-new"), Some("InstallPlan"), Some("plan-uid"))
    );
    assert_eq!(handed.install_plan.as_ref().unwrap().uuid, "plan-uid");
    // Only the unrelated condition is left.
    let types: Vec<&str> = handed.conditions.iter().map(|c| c.type_.as_str()).collect();
    assert_eq!(types, ["CatalogSourcesUnhealthy"]);
    assert_eq!(handed.last_updated.as_ref().map(|t| t.0), Some(t(1)));

    let let_go = subscription::resolved(&s, "etcd.v1", subscription::HandOff::LetGo, t(1));
    assert!(let_go.install_plan_ref.is_none() && let_go.install_plan.is_none());
    assert_eq!(let_go.current_csv.as_deref(), Some("etcd.v1"));

    let nothing = subscription::resolved(&s, "etcd.v1", subscription::HandOff::Nothing, t(1));
    assert_eq!(
        nothing
            .install_plan_ref
            .as_ref()
            .and_then(|r| r.name.as_deref()),
        Some("install-old")
    );
    // Already as decided: nothing to write.
    let mut settled = s.clone();
    settled.status = Some(nothing);
    assert!(!subscription::changed(
        &settled,
        &subscription::resolved(&settled, "etcd.v1", subscription::HandOff::Nothing, t(2))
    ));
}
