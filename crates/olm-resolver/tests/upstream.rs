//! Differential tests: this resolver and upstream OLM's (v0.46.0, through
//! the harness in `xtask/upstream/resolver`, which drives
//! `Resolver.Resolve` as catalog-operator does) on the same file-based
//! catalogs and Subscriptions. A resolution must choose the same CSVs from
//! the same catalogs; a failure must give upstream's message word for word.
//!
//! `cargo xtask conformance` builds the harness and runs these tests;
//! `OLM_UPSTREAM_RESOLVER` names another build. Without either they print
//! why and pass (CI does not build upstream).
#![allow(clippy::unwrap_used)]

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    sync::Arc,
};

use olm_resolver::{
    CatalogKey, CatalogSnapshot, NamespaceState, ResolveRequest, Subscription, resolve,
};
use serde_json::{Value, json};

const NAMESPACE: &str = "operators";
const CATALOG_NAMESPACE: &str = "olm";

/// Upstream's resolver harness (`cargo xtask upstream` builds it;
/// `OLM_UPSTREAM_RESOLVER` names another), or `None` after saying why.
fn harness() -> Option<PathBuf> {
    olm_testkit::assets::upstream_or_skip(
        olm_testkit::assets::upstream_resolver(),
        "the differential tests against upstream's resolver",
    )
}

/// What a resolution decided: the CSVs with their catalogs, or the message.
type Outcome = Result<BTreeSet<(String, String)>, String>;

fn bundle(package: &str, version: &str, extra: &[Value]) -> Value {
    let mut properties =
        vec![json!({"type": "olm.package", "value": {"packageName": package, "version": version}})];
    properties.extend(extra.iter().cloned());
    json!({
        "schema": "olm.bundle",
        "name": format!("{package}.v{version}"),
        "package": package,
        "image": format!("quay.io/example/{package}:v{version}"),
        "properties": properties,
    })
}

fn gvk(kind: &str) -> Value {
    json!({"type": "olm.gvk", "value": {"group": "example.com", "version": "v1", "kind": kind}})
}

fn requires_gvk(kind: &str) -> Value {
    json!({"type": "olm.gvk.required", "value": {"group": "example.com", "version": "v1", "kind": kind}})
}

fn requires_package(package: &str, range: &str) -> Value {
    json!({"type": "olm.package.required", "value": {"packageName": package, "versionRange": range}})
}

/// A package with one channel `stable` whose versions replace each other.
fn package(name: &str, versions: &[(&str, Vec<Value>)]) -> Vec<Value> {
    let mut docs = vec![json!({"schema": "olm.package", "name": name, "defaultChannel": "stable"})];
    let entries: Vec<Value> = versions
        .iter()
        .enumerate()
        .map(|(i, (v, _))| {
            let mut e = json!({"name": format!("{name}.v{v}")});
            if i > 0 {
                e["replaces"] = json!(format!("{name}.v{}", versions[i - 1].0));
            }
            e
        })
        .collect();
    docs.push(
        json!({"schema": "olm.channel", "package": name, "name": "stable", "entries": entries}),
    );
    for (v, extra) in versions {
        docs.push(bundle(name, v, extra));
    }
    docs
}

fn sub(package: &str, channel: &str, catalog: &str) -> Subscription {
    Subscription {
        name: package.to_owned(),
        package: package.to_owned(),
        channel: channel.to_owned(),
        catalog: catalog.to_owned(),
        catalog_namespace: CATALOG_NAMESPACE.to_owned(),
        ..Subscription::default()
    }
}

struct Case {
    name: &'static str,
    /// Catalog name and its documents.
    catalogs: Vec<(&'static str, Vec<Value>)>,
    subscriptions: Vec<Subscription>,
}

fn cases() -> Vec<Case> {
    let widget = || {
        package(
            "widget",
            &[
                ("1.0.0", vec![gvk("Widget")]),
                ("1.1.0", vec![gvk("Widget"), requires_gvk("Gadget")]),
            ],
        )
    };
    let gadget = || {
        package(
            "gadget",
            &[
                ("0.1.0", vec![gvk("Gadget")]),
                ("0.2.0", vec![gvk("Gadget")]),
            ],
        )
    };
    vec![
        Case {
            name: "a dependency is pulled in",
            catalogs: vec![("community", [widget(), gadget()].concat())],
            subscriptions: vec![sub("widget", "stable", "community")],
        },
        Case {
            name: "an unmet requirement of the head falls back to the version before",
            catalogs: vec![("community", widget())],
            subscriptions: vec![sub("widget", "stable", "community")],
        },
        Case {
            name: "no version satisfies its requirements",
            catalogs: vec![(
                "community",
                package("lonely", &[("1.0.0", vec![requires_gvk("Nothing")])]),
            )],
            subscriptions: vec![sub("lonely", "stable", "community")],
        },
        Case {
            name: "two unmet requirements",
            catalogs: vec![(
                "community",
                package(
                    "needy",
                    &[(
                        "1.0.0",
                        vec![requires_gvk("Nothing"), requires_package("absent", ">=1.0.0")],
                    )],
                ),
            )],
            subscriptions: vec![sub("needy", "stable", "community")],
        },
        Case {
            name: "a package requirement with a version range nobody meets",
            catalogs: vec![(
                "community",
                [
                    package("app", &[("1.0.0", vec![requires_package("gadget", ">=1.0.0")])]),
                    gadget(),
                ]
                .concat(),
            )],
            subscriptions: vec![sub("app", "stable", "community")],
        },
        Case {
            name: "an unknown package",
            catalogs: vec![("community", gadget())],
            subscriptions: vec![sub("nope", "stable", "community")],
        },
        Case {
            name: "an unknown channel",
            catalogs: vec![("community", gadget())],
            subscriptions: vec![sub("gadget", "fast", "community")],
        },
        Case {
            name: "an unknown startingCSV",
            catalogs: vec![("community", gadget())],
            subscriptions: vec![Subscription {
                starting_csv: "gadget.v9.9.9".to_owned(),
                ..sub("gadget", "stable", "community")
            }],
        },
        Case {
            name: "an unknown catalog",
            catalogs: vec![("community", gadget())],
            subscriptions: vec![sub("gadget", "stable", "elsewhere")],
        },
        Case {
            name: "two subscribed packages provide the same API",
            catalogs: vec![(
                "community",
                [
                    gadget(),
                    package("copycat", &[("1.0.0", vec![gvk("Gadget")])]),
                ]
                .concat(),
            )],
            subscriptions: vec![
                sub("gadget", "stable", "community"),
                sub("copycat", "stable", "community"),
            ],
        },
        Case {
            name: "the default channel when none is named",
            catalogs: vec![("community", [widget(), gadget()].concat())],
            subscriptions: vec![sub("widget", "", "community")],
        },
        Case {
            name: "colocated subscriptions need two versions of one package",
            catalogs: vec![(
                "community",
                [
                    package("x", &[("1.0.0", vec![requires_package("db", ">=2.0.0")])]),
                    package("y", &[("1.0.0", vec![requires_package("db", "<2.0.0")])]),
                    package("db", &[("1.0.0", vec![]), ("2.0.0", vec![])]),
                ]
                .concat(),
            )],
            subscriptions: vec![sub("x", "stable", "community"), sub("y", "stable", "community")],
        },
        Case {
            name: "a CEL constraint nothing meets",
            catalogs: vec![(
                "community",
                [
                    package(
                        "picky",
                        &[(
                            "1.0.0",
                            vec![json!({"type": "olm.constraint", "value": {
                                "failureMessage": "needs gadget 1.x",
                                "cel": {"rule": "properties.exists(p, p.type == \"olm.package\" && p.value.packageName == \"gadget\" && semver_compare(p.value.version, \"1.0.0\") >= 0)"},
                            }})],
                        )],
                    ),
                    gadget(),
                ]
                .concat(),
            )],
            subscriptions: vec![sub("picky", "stable", "community")],
        },
        Case {
            name: "compound constraints, a failureMessage upstream does not show",
            catalogs: vec![(
                "community",
                [
                    package(
                        "strict",
                        &[(
                            "1.0.0",
                            vec![json!({"type": "olm.constraint", "value": {
                                "failureMessage": "needs gadget 9 and no widget",
                                "all": {"constraints": [
                                    {"package": {"packageName": "gadget", "versionRange": ">=9.0.0"}},
                                    {"not": {"constraints": [
                                        {"gvk": {"group": "example.com", "version": "v1", "kind": "Widget"}},
                                        {"package": {"packageName": "widget", "versionRange": ">=1.0.0"}},
                                    ]}},
                                ]},
                            }})],
                        )],
                    ),
                    gadget(),
                ]
                .concat(),
            )],
            subscriptions: vec![sub("strict", "stable", "community")],
        },
        Case {
            name: "a dependency from another catalog",
            catalogs: vec![("community", widget()), ("extras", gadget())],
            subscriptions: vec![sub("widget", "stable", "community")],
        },
    ]
}

fn write(dir: &Path, case: &Case) {
    for (name, docs) in &case.catalogs {
        let catalog = dir.join(name);
        std::fs::create_dir_all(&catalog).unwrap();
        let text: String = docs.iter().map(|d| format!("{d}\n")).collect();
        std::fs::write(catalog.join("catalog.json"), text).unwrap();
    }
}

fn ours(dir: &Path, case: &Case) -> Outcome {
    let catalogs: Vec<Arc<CatalogSnapshot>> = case
        .catalogs
        .iter()
        .map(|(name, _)| {
            let catalog = olm_catalog::fbc::Catalog::load_dir(dir.join(name)).unwrap();
            Arc::new(CatalogSnapshot::from_fbc(
                CatalogKey::new(name, CATALOG_NAMESPACE),
                0,
                &catalog,
            ))
        })
        .collect();
    let state = NamespaceState {
        namespace: NAMESPACE.to_owned(),
        csvs: vec![],
        subscriptions: case.subscriptions.clone(),
    };
    let request = ResolveRequest {
        state: &state,
        catalogs: &catalogs,
        global_namespace: CATALOG_NAMESPACE,
        exclude_global: false,
    };
    match resolve(&request) {
        Ok(r) => Ok(r
            .operators
            .into_iter()
            .map(|o| (o.name, o.catalog))
            .collect()),
        Err(e) => Err(e.to_string()),
    }
}

fn theirs(harness: &Path, dir: &Path, case: &Case) -> Outcome {
    let subscriptions: Vec<olm_testkit::upstream_resolver::Subscription> = case
        .subscriptions
        .iter()
        .map(|s| olm_testkit::upstream_resolver::Subscription {
            namespace: NAMESPACE.to_owned(),
            name: s.name.clone(),
            package: s.package.clone(),
            channel: s.channel.clone(),
            catalog: s.catalog.clone(),
            catalog_namespace: s.catalog_namespace.clone(),
            starting_csv: s.starting_csv.clone(),
        })
        .collect();
    olm_testkit::upstream_resolver::run(
        harness,
        &dir.join("catalogs"),
        &subscriptions,
        1,
        CATALOG_NAMESPACE,
        dir,
    )
    .outcome
}

#[test]
fn decisions_and_messages_match_upstream() {
    let Some(harness) = harness() else {
        return;
    };
    let mut failures = 0;
    for case in cases() {
        let scratch = tempfile::tempdir().unwrap();
        let catalogs = scratch.path().join("catalogs");
        write(&catalogs, &case);
        let mine = ours(&catalogs, &case);
        let upstream = theirs(&harness, scratch.path(), &case);
        println!("{}: {upstream:?}", case.name);
        assert_eq!(mine, upstream, "{}", case.name);
        failures += usize::from(upstream.is_err());
    }
    // Both kinds of outcome are exercised, or the comparison proves little.
    assert!(
        (3..cases().len()).contains(&failures),
        "{failures} failures"
    );
}
