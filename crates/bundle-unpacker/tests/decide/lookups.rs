//! Which lookups of an InstallPlan need an unpack, and when the watch acts.

use std::time::Duration;

use bundle_unpacker::decide::lookups::{
    Unbacked, UnpackJob, check_request, pending_lookups, watch_due,
};
use jiff::Timestamp;
use olm_api::install_plan::InstallPlan;
use serde_json::json;

fn plan(lookups: serde_json::Value) -> InstallPlan {
    serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "InstallPlan",
        "metadata": {"name": "install-abc", "namespace": "team-a", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"clusterServiceVersionNames": ["x"], "approval": "Automatic", "approved": true},
        "status": {"phase": "Installing", "catalogSources": [], "bundleLookups": lookups}
    }))
    .unwrap()
}

fn lookup(path: &str, not_persisted: &str, catalog_ns: Option<&str>) -> serde_json::Value {
    let mut catalog = json!({"name": "fixture-catalog"});
    if let Some(ns) = catalog_ns {
        catalog["namespace"] = json!(ns);
    }
    json!({
        "path": path,
        "identifier": "widget.v1",
        "replaces": "",
        "catalogSourceRef": catalog,
        "conditions": [
            {"type": "BundleLookupNotPersisted", "status": not_persisted, "reason": "BundleNotUnpacked"},
            {"type": "BundleLookupPending", "status": "True", "reason": "UnpackPending",
             "lastUpdateTime": "2026-01-01T00:05:00Z"}
        ]
    })
}

#[test]
fn only_lookups_not_yet_persisted_are_pending() {
    let plan = plan(json!([
        lookup(
            "registry.fixture/widget-bundle:v1",
            "True",
            Some("catalogs")
        ),
        lookup(
            "registry.fixture/widget-bundle:v2",
            "False",
            Some("catalogs")
        ),
        lookup("  ", "True", Some("catalogs")),
        lookup(" registry.fixture/gadget-bundle:v1 ", "True", None),
    ]));
    let pending = pending_lookups(&plan);
    let paths: Vec<_> = pending.iter().map(|p| p.job.bundle_path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "registry.fixture/widget-bundle:v1",
            "registry.fixture/gadget-bundle:v1"
        ]
    );
    let first = &pending[0];
    assert_eq!(first.job.catalog_namespace, "catalogs");
    assert_eq!(first.job.catalog_name, "fixture-catalog");
    assert_eq!(first.job.plan_namespace, "team-a");
    assert_eq!(first.job.plan_name, "install-abc");
    assert_eq!(first.job.bundle_name, "widget.v1");
    // The latest time written about the lookup.
    assert_eq!(first.since, Some("2026-01-01T00:05:00Z".parse().unwrap()));
    // Without a catalog namespace, the plan's namespace (as catalog-operator reads it).
    assert_eq!(pending[1].job.catalog_namespace, "team-a");
    // Jobs for the same image in the same namespace share a key.
    assert_eq!(
        first.job.key().1,
        olm_catalog::unpacked::config_map_name("registry.fixture/widget-bundle:v1")
    );
}

#[test]
fn a_plan_without_status_needs_nothing() {
    let mut plan = plan(json!([]));
    assert!(pending_lookups(&plan).is_empty());
    plan.status = None;
    assert!(pending_lookups(&plan).is_empty());
}

/// (name, since, bus connected, now, expected)
type Case = (
    &'static str,
    Option<Timestamp>,
    bool,
    Timestamp,
    Result<(), Timestamp>,
);

#[test]
fn the_watch_leaves_fresh_needs_to_the_queue_while_the_bus_is_up() {
    let t = |s: i64| Timestamp::from_second(1_800_000_000 + s).unwrap();
    let grace = Duration::from_secs(15);
    let cases: Vec<Case> = vec![
        ("no bus: at once", Some(t(0)), false, t(1), Ok(())),
        ("bus up, fresh: wait", Some(t(0)), true, t(1), Err(t(15))),
        ("bus up, at grace", Some(t(0)), true, t(15), Ok(())),
        ("bus up, old", Some(t(0)), true, t(1000), Ok(())),
        ("bus up, no time known", None, true, t(0), Ok(())),
    ];
    for (name, since, bus, now, expected) in cases {
        assert_eq!(watch_due(since, bus, grace, now), expected, "{name}");
    }
}

fn job(path: &str, catalog: (&str, &str), plan: (&str, &str)) -> UnpackJob {
    UnpackJob {
        bundle_path: path.to_owned(),
        bundle_name: "widget.v1".to_owned(),
        catalog_namespace: catalog.0.to_owned(),
        catalog_name: catalog.1.to_owned(),
        plan_namespace: plan.0.to_owned(),
        plan_name: plan.1.to_owned(),
    }
}

#[test]
fn only_a_plan_still_waiting_for_the_bundle_backs_a_bus_request() {
    let waiting = plan(json!([
        lookup("example.com/widget:v1", "True", Some("catalogs")),
        lookup("example.com/widget:v0", "False", Some("catalogs")),
    ]));
    let genuine = job(
        "example.com/widget:v1",
        ("catalogs", "fixture-catalog"),
        ("team-a", "install-abc"),
    );
    assert_eq!(check_request(&genuine, Some(&waiting)), Ok(()));

    let rows: Vec<(&str, UnpackJob, Option<&InstallPlan>)> = vec![
        (
            "no plan named",
            job(
                "example.com/widget:v1",
                ("catalogs", "fixture-catalog"),
                ("", ""),
            ),
            Some(&waiting),
        ),
        ("the plan is gone", genuine.clone(), None),
        (
            "an image the plan never asked for",
            job(
                "attacker.example/evil:v1",
                ("catalogs", "fixture-catalog"),
                ("team-a", "install-abc"),
            ),
            Some(&waiting),
        ),
        (
            "another catalog's pull secrets",
            job(
                "example.com/widget:v1",
                ("catalogs", "private-catalog"),
                ("team-a", "install-abc"),
            ),
            Some(&waiting),
        ),
        (
            "content written to another namespace",
            job(
                "example.com/widget:v1",
                ("kube-system", "fixture-catalog"),
                ("team-a", "install-abc"),
            ),
            Some(&waiting),
        ),
        (
            "a lookup already persisted",
            job(
                "example.com/widget:v0",
                ("catalogs", "fixture-catalog"),
                ("team-a", "install-abc"),
            ),
            Some(&waiting),
        ),
        (
            "another plan's name",
            job(
                "example.com/widget:v1",
                ("catalogs", "fixture-catalog"),
                ("team-a", "install-xyz"),
            ),
            Some(&waiting),
        ),
    ];
    for (what, job, plan) in rows {
        assert!(check_request(&job, plan).is_err(), "{what}");
    }
    assert_eq!(
        check_request(&genuine, None),
        Err(Unbacked::PlanMissing {
            namespace: "team-a".to_owned(),
            name: "install-abc".to_owned()
        })
    );
}
