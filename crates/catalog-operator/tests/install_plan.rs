//! InstallPlan rules: phases, retries, garbage collection, kinds and order.
#![allow(clippy::unwrap_used)]

use catalog_operator::decide::install_plan::{self, DEFAULT_RETRY_TIMEOUT, Execution, PlanAction};
use jiff::Timestamp;
use olm_api::{
    conditions,
    install_plan::{InstallPlan, InstallPlanPhase, InstallPlanStatus, Step},
};

fn t(n: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + n).unwrap()
}

fn ip(approved: bool, generation: i64, name: &str) -> InstallPlan {
    serde_yaml_ng::from_str(&format!(
        "{{apiVersion: operators.coreos.com/v1alpha1, kind: InstallPlan, metadata: {{name: {name}, namespace: ns}}, spec: {{clusterServiceVersionNames: [a.v1], approval: Manual, approved: {approved}, generation: {generation}}}}}"
    ))
    .unwrap()
}

fn status(phase: &str) -> InstallPlanStatus {
    serde_yaml_ng::from_str(&format!(
        "{{phase: '{phase}', catalogSources: [], plan: [{{resolving: a.v1, resource: {{sourceName: c, sourceNamespace: n, group: operators.coreos.com, version: v1alpha1, kind: ClusterServiceVersion, name: a.v1}}, status: Unknown}}]}}"
    ))
    .unwrap()
}

#[test]
fn approval_moves_a_plan_to_installing_once() {
    let cases = [
        (
            "RequiresApproval",
            false,
            PlanAction::Nothing,
            "RequiresApproval",
            false,
        ),
        (
            "RequiresApproval",
            true,
            PlanAction::Execute,
            "Installing",
            true,
        ),
        ("Installing", false, PlanAction::Execute, "Installing", true),
        ("Complete", true, PlanAction::Nothing, "Complete", false),
        ("Failed", true, PlanAction::Nothing, "Failed", false),
    ];
    for (phase, approved, action, after, changed) in cases {
        let mut st = status(phase);
        let got = install_plan::before_execution(&ip(approved, 1, "i"), &mut st, t(0));
        assert_eq!(
            got,
            (action.clone(), changed),
            "{phase} approved={approved}"
        );
        assert_eq!(st.phase.as_str(), after);
        if action == PlanAction::Execute {
            assert_eq!(st.start_time.as_ref().map(|t| t.0), Some(t(0)));
            // The start time is kept on later passes.
            install_plan::before_execution(&ip(approved, 1, "i"), &mut st, t(9));
            assert_eq!(st.start_time.as_ref().map(|t| t.0), Some(t(0)));
        }
    }
    let mut empty: InstallPlanStatus =
        serde_yaml_ng::from_str("{phase: Installing, catalogSources: []}").unwrap();
    assert_eq!(
        install_plan::before_execution(&ip(true, 1, "i"), &mut empty, t(0)),
        (PlanAction::Nothing, false),
        "plans without steps or lookups are ignored"
    );
}

fn failed(message: &str, forbidden: bool, permanent: bool) -> Execution {
    Execution::Failed {
        message: message.into(),
        forbidden,
        permanent,
    }
}

#[test]
fn errors_retry_within_the_timeout_then_fail() {
    let cases = [
        (
            30,
            failed("conflict", false, false),
            "Installing",
            Some("retrying execution due to error: conflict"),
        ),
        (
            61,
            failed("conflict", false, false),
            "Failed",
            Some("conflict"),
        ),
        (
            3600,
            failed("forbidden: no", true, false),
            "Installing",
            Some("retrying execution due to error: forbidden: no"),
        ),
        (
            1,
            failed(install_plan::INVALID_PLAN_MESSAGE, false, true),
            "Failed",
            Some("the InstallPlan contains invalid data"),
        ),
        (30, Execution::Waiting, "Installing", None),
        (30, Execution::Done, "Complete", None),
    ];
    for (after_secs, execution, phase, message) in cases {
        let mut st = status("Installing");
        install_plan::before_execution(&ip(true, 1, "i"), &mut st, t(0));
        install_plan::after_execution(&mut st, &execution, DEFAULT_RETRY_TIMEOUT, t(after_secs));
        assert_eq!(st.phase.as_str(), phase, "{execution:?}");
        assert_eq!(st.message.as_deref(), message, "{execution:?}");
        let installed = conditions::find(&st.conditions, "Installed");
        match phase {
            "Complete" => assert_eq!(installed.unwrap().status, "True"),
            "Failed" => {
                let c = installed.unwrap();
                assert_eq!(
                    (c.status.as_str(), c.reason.as_ref().unwrap().as_str()),
                    ("False", "InstallComponentFailed")
                );
            }
            _ => assert!(installed.is_none()),
        }
    }
    assert!(install_plan::terminal(&{
        let mut s = status("");
        s.phase = InstallPlanPhase::COMPLETE;
        s
    }));
}

#[test]
fn garbage_collection_keeps_five_and_never_a_referenced_plan() {
    let plans: Vec<InstallPlan> = (1..=12)
        .map(|g| ip(true, g, &format!("install-{g}")))
        .collect();
    assert!(install_plan::garbage(&plans[..5], &[]).is_empty());
    // 12 plans: 7 too many, at most 5 per sweep, oldest generations first.
    assert_eq!(
        install_plan::garbage(&plans, &[]),
        [
            "install-1",
            "install-2",
            "install-3",
            "install-4",
            "install-5"
        ]
    );
    // A plan a Subscription still points at is skipped.
    assert_eq!(
        install_plan::garbage(&plans[..7], &["install-1"]),
        ["install-2", "install-3"]
    );
}

#[test]
fn step_kinds_outside_upstreams_list_are_refused() {
    for kind in [
        "ClusterServiceVersion",
        "CustomResourceDefinition",
        "Secret",
        "ConsolePlugin",
        "NetworkPolicy",
        "PriorityClass",
    ] {
        assert!(install_plan::supported_kind(kind), "{kind}");
    }
    for kind in [
        "Deployment",
        "Pod",
        "DaemonSet",
        "MutatingWebhookConfiguration",
        "",
        "secret",
    ] {
        assert!(!install_plan::supported_kind(kind), "{kind}");
    }
}

fn step(kind: &str, name: &str) -> Step {
    serde_yaml_ng::from_str(&format!(
        "{{resolving: a.v1, resource: {{sourceName: c, sourceNamespace: n, group: '', version: v1, kind: {kind}, name: {name}}}, status: Unknown}}"
    ))
    .unwrap()
}

#[test]
fn crds_are_applied_first_and_listed_after_csvs() {
    let mut steps = vec![
        step("ServiceAccount", "sa"),
        step("CustomResourceDefinition", "b.crd"),
        step("ClusterServiceVersion", "a.v1"),
        step("CustomResourceDefinition", "a.crd"),
    ];
    let order: Vec<_> = install_plan::apply_order(&steps)
        .into_iter()
        .map(|i| steps[i].resource.name.clone())
        .collect();
    assert_eq!(order, ["b.crd", "a.crd", "a.v1", "sa"]);
    olm_plan::steps::listing_order(&mut steps);
    let listed: Vec<_> = steps.iter().map(|s| s.resource.name.as_str()).collect();
    assert_eq!(listed, ["a.v1", "b.crd", "a.crd", "sa"]);
}

#[test]
fn crd_updates_may_not_drop_stored_versions() {
    let v = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    assert!(
        olm_plan::crd::check_stored_versions("etcds.example.com", &v(&["v1"]), &v(&["v1", "v2"]))
            .is_ok()
    );
    assert_eq!(
        olm_plan::crd::check_stored_versions("etcds.example.com", &v(&["v1", "v1beta1"]), &v(&["v1"])),
        Err("risk of data loss updating \"etcds.example.com\": new CRD removes version v1beta1 that is listed as a stored version on the existing CRD".into())
    );
    let message = olm_plan::crd::invalid_existing_cr_message(
        "etcds.example.com",
        "v1",
        "ns/my-etcd",
        "spec.size: must be >= 3",
    );
    assert!(
        message.contains("updated validation is too restrictive"),
        "{message}"
    );
    assert!(message.contains("ns/my-etcd"), "{message}");
}

#[test]
fn a_plan_waits_for_the_bundles_its_lookups_name() {
    let plan = |phase: &str, lookups: &str| -> InstallPlan {
        serde_yaml_ng::from_str(&format!(
            "{{apiVersion: operators.coreos.com/v1alpha1, kind: InstallPlan, metadata: {{name: p, namespace: ns}}, spec: {{clusterServiceVersionNames: [a.v1], approval: Automatic, approved: true, generation: 1}}, status: {{phase: {phase}, catalogSources: [], bundleLookups: [{lookups}]}}}}"
        ))
        .unwrap()
    };
    let lookup = |path: &str, namespace: Option<&str>| {
        let reference = match namespace {
            Some(ns) => format!("{{name: c, namespace: '{ns}'}}"),
            None => "{name: c}".to_owned(),
        };
        format!(
            "{{path: '{path}', identifier: a.v1, replaces: '', catalogSourceRef: {reference}, conditions: []}}"
        )
    };
    // (phase, lookups, catalog namespace of the ConfigMap, image, waits)
    let cases = [
        (
            "Installing",
            lookup("r/a:1", Some("cat")),
            "cat",
            "r/a:1",
            true,
        ),
        (
            "Installing",
            lookup("r/a:1", Some("cat")),
            "ns",
            "r/a:1",
            false,
        ),
        (
            "Installing",
            lookup("r/a:1", Some("cat")),
            "cat",
            "r/a:2",
            false,
        ),
        ("Installing", lookup("r/a:1", None), "ns", "r/a:1", true),
        ("Installing", lookup("r/a:1", Some("")), "ns", "r/a:1", true),
        (
            "RequiresApproval",
            lookup("r/a:1", Some("cat")),
            "cat",
            "r/a:1",
            true,
        ),
        (
            "Complete",
            lookup("r/a:1", Some("cat")),
            "cat",
            "r/a:1",
            false,
        ),
        (
            "Failed",
            lookup("r/a:1", Some("cat")),
            "cat",
            "r/a:1",
            false,
        ),
    ];
    for (phase, lookups, namespace, image, waits) in cases {
        assert_eq!(
            install_plan::waits_for_bundle(&plan(phase, &lookups), namespace, image),
            waits,
            "{phase} {lookups} vs {namespace}/{image}"
        );
    }
    let no_lookups = plan("Installing", "");
    assert!(!install_plan::waits_for_bundle(&no_lookups, "ns", "r/a:1"));
    let mut no_status = no_lookups;
    no_status.status = None;
    assert!(!install_plan::waits_for_bundle(&no_status, "ns", "r/a:1"));
}

#[test]
fn a_plan_without_an_install_identity_says_why_and_keeps_its_phase() {
    let mut st = status("Installing");
    let refused = "more than one operator group(s) are managing this namespace count=2";
    install_plan::identity_unavailable(&mut st, refused, t(0));
    assert_eq!(st.phase.as_str(), "Installing", "retried, not failed");
    let installed = conditions::find(&st.conditions, "Installed").unwrap();
    assert_eq!(installed.status, "False");
    assert_eq!(
        installed.reason.as_ref().map(|r| r.as_str()),
        Some("InstallCheckFailed")
    );
    assert_eq!(installed.message.as_deref(), Some(refused));

    // Refused again for the same reason: nothing to write.
    let before = st.clone();
    install_plan::identity_unavailable(&mut st, refused, t(5));
    assert_eq!(st, before);

    // Once the identity is back, upstream's reset: False, Unknown, no message.
    install_plan::identity_available(&mut st, t(9));
    let installed = conditions::find(&st.conditions, "Installed").unwrap();
    assert_eq!(installed.status, "False");
    assert_eq!(
        installed.reason.as_ref().map(|r| r.as_str()),
        Some("Unknown")
    );
    assert_eq!(installed.message, None);
}

#[test]
fn an_available_identity_leaves_other_installed_conditions_alone() {
    let mut st = status("Installing");
    install_plan::after_execution(
        &mut st,
        &failed("boom", false, true),
        DEFAULT_RETRY_TIMEOUT,
        t(0),
    );
    let before = st.clone();
    install_plan::identity_available(&mut st, t(3));
    assert_eq!(st, before);
    let mut fresh = status("Installing");
    install_plan::identity_available(&mut fresh, t(3));
    assert!(fresh.conditions.is_empty());
}
