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
    install_plan::identity_available(&mut st, None, t(9));
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
    install_plan::identity_available(&mut st, None, t(3));
    assert_eq!(st, before);
    let mut fresh = status("Installing");
    install_plan::identity_available(&mut fresh, None, t(3));
    assert!(fresh.conditions.is_empty());

    // A scoped install records the ServiceAccount steps are applied as;
    // OLM's own identity records none.
    let account = k8s_openapi::api::core::v1::ObjectReference {
        kind: Some("ServiceAccount".to_owned()),
        namespace: Some("ns".to_owned()),
        name: Some("scoped".to_owned()),
        ..Default::default()
    };
    install_plan::identity_available(&mut fresh, Some(account.clone()), t(4));
    assert_eq!(fresh.attenuated_service_account_ref, Some(account));
    install_plan::identity_available(&mut fresh, None, t(5));
    assert_eq!(fresh.attenuated_service_account_ref, None);
}

const CSV_JSON: &str = r#"{"apiVersion":"operators.coreos.com/v1alpha1","kind":"ClusterServiceVersion","metadata":{"name":"a.v1"},"spec":{}}"#;

/// The unpacked-bundle ConfigMap of `path`, with `annotations` on top of
/// the source image and, when `content` is given, that bundle stored.
fn unpacked_config_map(
    path: &str,
    annotations: &[(&str, &str)],
    content: Option<&olm_catalog::unpacked::UnpackedBundle>,
) -> k8s_openapi::api::core::v1::ConfigMap {
    use olm_catalog::unpacked;
    let mut all: std::collections::BTreeMap<String, String> = annotations
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    all.entry(unpacked::SOURCE_IMAGE.to_owned())
        .or_insert_with(|| path.to_owned());
    let mut map = k8s_openapi::api::core::v1::ConfigMap::default();
    map.metadata.name = Some(unpacked::config_map_name(path));
    map.metadata.namespace = Some("olm".to_owned());
    if let Some(content) = content {
        all.insert(
            unpacked::CONTENT_ENCODING.to_owned(),
            unpacked::ENCODING.to_owned(),
        );
        map.binary_data = Some(
            [(
                unpacked::CONTENT_KEY.to_owned(),
                k8s_openapi::ByteString(unpacked::encode(content).unwrap()),
            )]
            .into(),
        );
    }
    map.metadata.annotations = Some(all);
    map
}

fn bundle(csv: &str) -> olm_catalog::unpacked::UnpackedBundle {
    olm_catalog::unpacked::UnpackedBundle {
        csv_name: csv.to_owned(),
        objects: vec![CSV_JSON.replace("a.v1", csv)],
        annotations: Default::default(),
    }
}

#[test]
fn unpacked_config_maps_are_judged_by_image_then_failure_then_content() {
    use install_plan::Unpacked;
    let good = bundle("a.v1");
    let failure = [
        ("olm.unpackFailureReason", "DeadlineExceeded"),
        ("olm.unpackFailureMessage", "took too long"),
    ];
    let mut corrupt = unpacked_config_map("r/a:1", &[], Some(&good));
    corrupt.binary_data.as_mut().unwrap().insert(
        "bundle.json.gz".to_owned(),
        k8s_openapi::ByteString(b"not gzip".to_vec()),
    );
    let cases = [
        ("absent", None, "Pending"),
        (
            "another image's content",
            Some(unpacked_config_map("r/other:1", &[], Some(&good))),
            "Unreadable: configmap olm/",
        ),
        (
            "a failure record",
            Some(unpacked_config_map("r/a:1", &failure, None)),
            "Failed: DeadlineExceeded took too long",
        ),
        (
            "content",
            Some(unpacked_config_map("r/a:1", &[], Some(&good))),
            "Ready: a.v1",
        ),
        (
            "no content, no failure",
            Some(unpacked_config_map("r/a:1", &[], None)),
            "Unreadable: unknown content encoding",
        ),
        (
            "corrupt content",
            Some(corrupt),
            "Unreadable: the stored bundle is corrupt",
        ),
    ];
    for (name, found, want) in cases {
        let got = match install_plan::unpacked("r/a:1", found.as_ref()) {
            Unpacked::Pending => "Pending".to_owned(),
            Unpacked::Failed { reason, message } => format!("Failed: {reason} {message}"),
            Unpacked::Ready(bundle) => format!("Ready: {}", bundle.csv_name),
            Unpacked::Unreadable(error) => format!("Unreadable: {error}"),
        };
        assert!(got.starts_with(want), "{name}: {got}");
    }
}

fn lookup(path: &str, identifier: &str, failed: bool) -> serde_json::Value {
    let mut conditions =
        vec![serde_json::json!({"type": "BundleLookupNotPersisted", "status": "True"})];
    if failed {
        conditions.push(serde_json::json!({"type": "BundleLookupFailed", "status": "True", "reason": "DeadlineExceeded"}));
    }
    serde_json::json!({
        "path": path, "identifier": identifier, "replaces": "",
        "catalogSourceRef": {"name": "cat", "namespace": "olm"},
        "conditions": conditions,
    })
}

fn lookup_condition(
    status: &InstallPlanStatus,
    path: &str,
    type_: &str,
) -> Option<(String, String)> {
    let lookup = status.bundle_lookups.iter().find(|l| l.path == path)?;
    let c = lookup
        .conditions
        .iter()
        .find(|c| c.type_.as_str() == type_)?;
    Some((c.status.clone(), c.reason.clone().unwrap_or_default()))
}

#[test]
fn persisted_lookups_become_steps_or_say_why_not() {
    use install_plan::Unpacked;
    let mut st: InstallPlanStatus = serde_json::from_value(serde_json::json!({
        "phase": "Installing", "catalogSources": ["cat"], "plan": [],
        "bundleLookups": [
            lookup("r/ready:1", "a.v1", false),
            lookup("r/wrong:1", "b.v1", false),
            lookup("r/failed:1", "c.v1", false),
            lookup("r/retried:1", "d.v1", true),
            lookup("r/unreadable:1", "e.v1", false),
        ],
    }))
    .unwrap();
    let unpacked = vec![
        Unpacked::Ready(bundle("a.v1")),
        Unpacked::Ready(bundle("not-b.v1")),
        Unpacked::Failed {
            reason: "DeadlineExceeded".to_owned(),
            message: "took too long".to_owned(),
        },
        Unpacked::Pending,
        Unpacked::Unreadable("apiserver down".to_owned()),
    ];
    let before_unreadable = st.bundle_lookups[4].clone();
    let requests = install_plan::persist_lookups(&mut st, "ns", unpacked, t(1));

    // The ready bundle became its steps, sourced from its catalog, and its
    // lookup is gone.
    assert!(st.bundle_lookups.iter().all(|l| l.path != "r/ready:1"));
    let csv_step = st
        .plan
        .iter()
        .find(|s| s.resource.kind == "ClusterServiceVersion")
        .unwrap();
    assert_eq!(
        (
            csv_step.resource.name.as_str(),
            csv_step.resource.catalog_source.as_str(),
            csv_step.resource.catalog_source_namespace.as_str()
        ),
        ("a.v1", "cat", "olm")
    );
    // Another bundle than resolved: failed, nothing installed of it.
    assert_eq!(
        lookup_condition(&st, "r/wrong:1", "BundleLookupFailed"),
        Some(("True".to_owned(), "BundleMismatch".to_owned()))
    );
    assert!(st.plan.iter().all(|s| s.resolving != "not-b.v1"));
    // A recorded failure: failed and no longer pending.
    assert_eq!(
        lookup_condition(&st, "r/failed:1", "BundleLookupFailed"),
        Some(("True".to_owned(), "DeadlineExceeded".to_owned()))
    );
    assert_eq!(
        lookup_condition(&st, "r/failed:1", "BundleLookupPending"),
        Some(("False".to_owned(), "DeadlineExceeded".to_owned()))
    );
    // A failure record removed for a retry: pending again, asked for.
    assert_eq!(
        lookup_condition(&st, "r/retried:1", "BundleLookupFailed"),
        Some(("False".to_owned(), "Retrying".to_owned()))
    );
    assert_eq!(
        lookup_condition(&st, "r/retried:1", "BundleLookupPending"),
        Some(("True".to_owned(), "UnpackPending".to_owned()))
    );
    let asked: Vec<&str> = requests.iter().map(|l| l.path.as_str()).collect();
    assert_eq!(asked, ["r/retried:1"]);
    // Unreadable now: left exactly as it was.
    assert_eq!(
        st.bundle_lookups
            .iter()
            .find(|l| l.path == "r/unreadable:1"),
        Some(&before_unreadable)
    );
    assert!(install_plan::lookups_pending(&st));

    // Asked again with nothing new: the pending lookup's conditions keep
    // their times (nothing to write but the request).
    let again = st.clone();
    let mut st2 = st.clone();
    let unpacked = again
        .bundle_lookups
        .iter()
        .map(|l| match l.path.as_str() {
            "r/retried:1" => Unpacked::Pending,
            _ => Unpacked::Unreadable("still down".to_owned()),
        })
        .collect();
    let requests = install_plan::persist_lookups(&mut st2, "ns", unpacked, t(9));
    assert_eq!(st2, again);
    assert_eq!(requests.len(), 1);
}

#[test]
fn one_unsupported_kind_fails_the_whole_plan_before_anything_is_applied() {
    let mut st = status("Installing");
    assert!(install_plan::reject_unsupported(&mut st.plan).is_none());
    assert_eq!(st.plan[0].status.as_str(), "Unknown");
    let mut odd = st.plan[0].clone();
    odd.resource.kind = "DaemonSet".to_owned();
    st.plan.push(odd);
    let Some(Execution::Failed {
        message,
        permanent,
        forbidden,
    }) = install_plan::reject_unsupported(&mut st.plan)
    else {
        panic!("an unsupported kind must fail the plan");
    };
    assert_eq!(message, install_plan::INVALID_PLAN_MESSAGE);
    assert!(permanent && !forbidden);
    let statuses: Vec<&str> = st.plan.iter().map(|s| s.status.as_str()).collect();
    assert_eq!(statuses, ["Unknown", "UnsupportedResource"]);
}
