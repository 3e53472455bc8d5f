//! Resolution of real packages from the shared corpus of file-based catalogs
//! (community-operators-prod v4.21), with expectations computed from the
//! catalog through `olm-catalog`'s graph functions rather than the resolver.
#![allow(clippy::unwrap_used)]

mod common;

use std::{path::PathBuf, sync::Arc, time::Instant};

use olm_catalog::{
    fbc::Catalog,
    graph::{channel_head, sort_channel},
};
use olm_resolver::{
    CatalogKey, CatalogSnapshot, InstalledCsv, NamespaceState, ResolveError, ResolveRequest,
    Subscription, resolve,
};

const MARKETPLACE: &str = "openshift-marketplace";
const SOURCE: &str = "community-operators";

fn corpus() -> Option<(Catalog, Arc<CatalogSnapshot>)> {
    let dir: PathBuf = olm_testkit::testdata()?.join("catalogs/community-operators-prod-v4.21");
    let catalog = Catalog::load_dir(&dir).unwrap();
    let snapshot = Arc::new(CatalogSnapshot::from_fbc(
        CatalogKey::new(SOURCE, MARKETPLACE),
        0,
        &catalog,
    ));
    Some((catalog, snapshot))
}

fn subscription(package: &str, channel: &str) -> Subscription {
    Subscription {
        name: package.into(),
        package: package.into(),
        channel: channel.into(),
        catalog: SOURCE.into(),
        catalog_namespace: MARKETPLACE.into(),
        ..Default::default()
    }
}

fn run(
    snapshot: &Arc<CatalogSnapshot>,
    csvs: Vec<InstalledCsv>,
    subs: Vec<Subscription>,
) -> Result<olm_resolver::Resolution, ResolveError> {
    let state = NamespaceState {
        namespace: "operators".into(),
        csvs,
        subscriptions: subs,
    };
    resolve(&ResolveRequest {
        state: &state,
        catalogs: std::slice::from_ref(snapshot),
        global_namespace: MARKETPLACE,
        exclude_global: false,
    })
}

fn default_channel(catalog: &Catalog, package: &str) -> String {
    catalog
        .packages
        .iter()
        .find(|p| p.name == package)
        .unwrap()
        .default_channel
        .clone()
}

fn head(catalog: &Catalog, package: &str, channel: &str) -> String {
    let ch = catalog
        .channels
        .iter()
        .find(|c| c.package == package && c.name == channel)
        .unwrap();
    channel_head(&ch.entries).unwrap().name.clone()
}

#[test]
fn a_real_package_with_api_and_package_requirements_pulls_in_its_dependency() {
    let Some((catalog, snapshot)) = corpus() else {
        return;
    };
    let topology = "rabbitmq-messaging-topology-operator";
    let cluster = "rabbitmq-cluster-operator";
    let channel = default_channel(&catalog, topology);
    let r = run(&snapshot, vec![], vec![subscription(topology, &channel)]).unwrap();
    let mut got: Vec<(String, String)> = r
        .operators
        .iter()
        .map(|o| (o.package.clone(), o.name.clone()))
        .collect();
    got.sort();
    let cluster_channel = default_channel(&catalog, cluster);
    assert_eq!(
        got,
        vec![
            (
                cluster.to_owned(),
                head(&catalog, cluster, &cluster_channel)
            ),
            (topology.to_owned(), head(&catalog, topology, &channel)),
        ]
    );
    let dependency = r.operators.iter().find(|o| o.package == cluster).unwrap();
    assert_eq!(dependency.subscription, None);
    assert!(
        dependency
            .bundle_path
            .as_deref()
            .is_some_and(|p| !p.is_empty())
    );
}

#[test]
fn every_package_resolves_to_its_default_channel_head() {
    let Some((catalog, snapshot)) = corpus() else {
        return;
    };
    let mut checked = 0;
    let mut problems = Vec::new();
    for package in &catalog.packages {
        let channel = &package.default_channel;
        let Some(ch) = catalog
            .channels
            .iter()
            .find(|c| c.package == package.name && c.name == *channel)
        else {
            continue;
        };
        // The expected choice: the first entry in OLM's channel order.
        let Ok(order) = sort_channel(&ch.entries) else {
            continue;
        };
        let want = order[0].name.clone();
        match run(
            &snapshot,
            vec![],
            vec![subscription(&package.name, channel)],
        ) {
            Ok(r) => {
                let got = r.subscriptions[0].csv.clone();
                if got != want {
                    problems.push(format!("{}: chose {got}, want {want}", package.name));
                }
            }
            Err(e) => problems.push(format!("{}: {e}", package.name)),
        }
        checked += 1;
    }
    assert!(checked >= 25, "only {checked} packages checked");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn installed_operators_upgrade_along_the_real_update_graph() {
    let Some((catalog, snapshot)) = corpus() else {
        return;
    };
    let mut upgrades = 0;
    for package in &catalog.packages {
        let channel = &package.default_channel;
        let Some(ch) = catalog
            .channels
            .iter()
            .find(|c| c.package == package.name && c.name == *channel)
        else {
            continue;
        };
        let Ok(order) = sort_channel(&ch.entries) else {
            continue;
        };
        // Pretend the oldest entry of the channel order is installed.
        let Some(installed) = order.last() else {
            continue;
        };
        let bundle = catalog
            .bundles
            .iter()
            .find(|b| b.package == package.name && b.name == installed.name)
            .unwrap();
        let Ok(version) = bundle.version() else {
            continue;
        };
        let properties: Vec<(String, String)> = bundle
            .properties
            .iter()
            .filter(|p| p.type_ != "olm.bundle.object" && p.type_ != "olm.csv.metadata")
            .map(|p| (p.type_.clone(), p.value.get().to_owned()))
            .collect();
        let csv = InstalledCsv {
            name: installed.name.clone(),
            version: Some(version.to_string()),
            replaces: installed.replaces.clone(),
            properties,
        };
        let mut sub = subscription(&package.name, channel);
        sub.installed_csv = installed.name.clone();
        // Expected: the first entry in channel order that upgrades from the
        // installed one (replaces, skips or skipRange), else stay.
        let want = ch
            .entries
            .iter()
            .filter(|e| e.upgrades_from(&installed.name, Some(&version)))
            .min_by_key(|e| {
                order
                    .iter()
                    .position(|o| o.name == e.name)
                    .unwrap_or(usize::MAX)
            })
            .filter(|e| order.iter().any(|o| o.name == e.name))
            .map_or(installed.name.clone(), |e| e.name.clone());
        let r = run(&snapshot, vec![csv], vec![sub])
            .unwrap_or_else(|e| panic!("{}: {e}", package.name));
        assert_eq!(r.subscriptions[0].csv, want, "{}", package.name);
        if want != installed.name {
            upgrades += 1;
            let op = r.operators.iter().find(|o| o.name == want).unwrap();
            assert_eq!(op.replaces.as_deref(), Some(installed.name.as_str()));
        }
    }
    assert!(upgrades >= 10, "only {upgrades} upgrades exercised");
}

#[test]
fn the_whole_catalog_in_one_namespace() {
    let Some((catalog, snapshot)) = corpus() else {
        return;
    };
    let subs: Vec<Subscription> = catalog
        .packages
        .iter()
        .map(|p| subscription(&p.name, &p.default_channel))
        .collect();
    let start = Instant::now();
    let r = run(&snapshot, vec![], subs.clone());
    println!(
        "{} subscriptions resolved in {:?}",
        subs.len(),
        start.elapsed()
    );
    // Real packages overlap in the APIs they provide, so all of them at once
    // may not fit in one namespace; either way the answer must be explained.
    match r {
        Ok(r) => assert!(r.operators.len() >= subs.len()),
        Err(ResolveError::NotSatisfiable { conflicts }) => {
            assert!(!conflicts.is_empty());
            println!(
                "{}",
                conflicts
                    .iter()
                    .map(|c| c.explanation.as_str())
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
        Err(e) => panic!("{e}"),
    }
}
