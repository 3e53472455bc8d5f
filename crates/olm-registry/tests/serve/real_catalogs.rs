//! Every RPC over each real catalog, with answers taken from the catalog
//! files (counts as in `shared/testdata/SOURCES.md`).

use futures::StreamExt;
use olm_registry::{GvkQuery, api};
use serde_json::Value;

use crate::fixtures::{code, real_catalog, serve};

/// How a catalog carries its bundles' manifests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Payload {
    /// `olm.csv.metadata`: the server synthesizes a stub CSV.
    CsvMetadata,
    /// `olm.bundle.object`: the manifests themselves, this many for the head.
    Objects(usize),
}

/// What a catalog must answer, read from its files.
struct Expected {
    catalog: &'static str,
    packages: usize,
    channel_entries: usize,
    package: &'static str,
    default_channel: &'static str,
    channels: &'static [&'static str],
    head: &'static str,
    head_version: &'static str,
    head_replaces: &'static str,
    head_skips: usize,
    head_skip_range: &'static str,
    payload: Payload,
    gvk: (&'static str, &'static str, &'static str),
    /// `GetChannelEntriesThatProvide` answers for `gvk`.
    providing_entries: usize,
    /// `GetLatestChannelEntriesThatProvide` answers for `gvk`.
    latest_providing_entries: usize,
    /// A CSV name and the bundles whose entries replace or skip it.
    replaced: &'static str,
    replaced_by: &'static [&'static str],
}

const COMMUNITY_V4_21: Expected = Expected {
    catalog: "community-operators-prod-v4.21",
    packages: 33,
    channel_entries: 873,
    package: "kube-green",
    default_channel: "alpha",
    channels: &["alpha"],
    head: "kube-green.v0.7.1",
    head_version: "0.7.1",
    head_replaces: "kube-green.v0.7.0",
    head_skips: 0,
    head_skip_range: "",
    payload: Payload::CsvMetadata,
    gvk: ("kube-green.com", "v1alpha1", "SleepInfo"),
    providing_entries: 10,
    latest_providing_entries: 1,
    replaced: "kube-green.v0.7.0",
    replaced_by: &["kube-green.v0.7.1"],
};

const COMMUNITY_V4_16: Expected = Expected {
    catalog: "community-operators-prod-v4.16",
    packages: 18,
    channel_entries: 268,
    package: "kube-green",
    default_channel: "alpha",
    channels: &["alpha"],
    head: "kube-green.v0.7.1",
    head_version: "0.7.1",
    head_replaces: "kube-green.v0.7.0",
    head_skips: 0,
    head_skip_range: "",
    payload: Payload::Objects(5),
    gvk: ("kube-green.com", "v1alpha1", "SleepInfo"),
    providing_entries: 10,
    latest_providing_entries: 1,
    replaced: "kube-green.v0.7.0",
    replaced_by: &["kube-green.v0.7.1"],
};

const SECONDARY_SCHEDULER_V4_16: Expected = Expected {
    catalog: "redhat-openshift-secondary-scheduler-v4.16",
    packages: 1,
    channel_entries: 9,
    package: "openshift-secondary-scheduler-operator",
    default_channel: "stable",
    channels: &["stable"],
    head: "secondaryscheduleroperator.v1.3.2",
    head_version: "1.3.2",
    head_replaces: "secondaryscheduleroperator.v1.2.0",
    head_skips: 15,
    head_skip_range: ">=1.2.0 <1.3.2",
    payload: Payload::Objects(4),
    gvk: ("operator.openshift.io", "v1", "SecondaryScheduler"),
    providing_entries: 24,
    latest_providing_entries: 8,
    replaced: "secondaryscheduleroperator.v1.2.0",
    replaced_by: &["secondaryscheduleroperator.v1.3.2"],
};

const SECONDARY_SCHEDULER_V4_20: Expected = Expected {
    catalog: "redhat-openshift-secondary-scheduler-v4.20",
    packages: 1,
    channel_entries: 14,
    package: "openshift-secondary-scheduler-operator",
    default_channel: "stable",
    channels: &["stable"],
    head: "secondaryscheduleroperator.v1.5.1",
    head_version: "1.5.1",
    head_replaces: "secondaryscheduleroperator.v1.4.0",
    head_skips: 29,
    head_skip_range: ">=1.4.0 <1.5.1",
    payload: Payload::CsvMetadata,
    gvk: ("operator.openshift.io", "v1", "SecondaryScheduler"),
    providing_entries: 42,
    latest_providing_entries: 13,
    replaced: "secondaryscheduleroperator.v1.4.0",
    replaced_by: &[
        "secondaryscheduleroperator.v1.5.0",
        "secondaryscheduleroperator.v1.5.1",
    ],
};

#[tokio::test]
async fn community_operators_v4_21() {
    check(&COMMUNITY_V4_21).await;
}

#[tokio::test]
async fn community_operators_v4_16() {
    check(&COMMUNITY_V4_16).await;
}

#[tokio::test]
async fn secondary_scheduler_v4_16() {
    check(&SECONDARY_SCHEDULER_V4_16).await;
}

#[tokio::test]
async fn secondary_scheduler_v4_20() {
    check(&SECONDARY_SCHEDULER_V4_20).await;
}

/// Checks a single-bundle answer for the channel head.
fn check_head_bundle(bundle: &api::Bundle, x: &Expected) {
    assert_eq!(bundle.csv_name, x.head);
    assert_eq!(bundle.package_name, x.package);
    assert_eq!(bundle.channel_name, x.default_channel);
    assert_eq!(bundle.version, x.head_version);
    assert_eq!(bundle.skip_range, x.head_skip_range);
    // Single-bundle answers leave out the entry's edges, as upstream does.
    assert_eq!(bundle.replaces, "");
    assert!(bundle.skips.is_empty());
    assert!(!bundle.bundle_path.is_empty(), "image reference is served");
    let gvk = api::GroupVersionKind {
        group: x.gvk.0.into(),
        version: x.gvk.1.into(),
        kind: x.gvk.2.into(),
        plural: String::new(),
    };
    assert!(
        bundle.provided_apis.contains(&gvk),
        "{:?}",
        bundle.provided_apis
    );

    // Properties: compact JSON with sorted keys, and never the big ones.
    let package_property = bundle
        .properties
        .iter()
        .find(|p| p.r#type == "olm.package")
        .expect("olm.package property");
    assert_eq!(
        package_property.value,
        format!(
            r#"{{"packageName":"{}","version":"{}"}}"#,
            x.package, x.head_version
        )
    );
    assert!(
        bundle
            .properties
            .iter()
            .all(|p| p.r#type != "olm.bundle.object" && p.r#type != "olm.csv.metadata")
    );

    let csv: Value = serde_json::from_str(&bundle.csv_json).expect("csvJson is JSON");
    assert_eq!(csv["kind"], "ClusterServiceVersion");
    assert_eq!(csv["metadata"]["name"], x.head);
    match x.payload {
        Payload::CsvMetadata => {
            // A stub CSV built from olm.csv.metadata, with the install
            // strategy stub that keeps packageserver from crashing.
            assert_eq!(csv["spec"]["install"]["strategy"], "deployment");
            // As upstream's opm v1.65.0 writes it: no zero creationTimestamp.
            assert!(
                csv["metadata"].get("creationTimestamp").is_none(),
                "{:.300}",
                bundle.csv_json
            );
            assert_eq!(csv["spec"]["version"], x.head_version);
            assert!(csv["spec"]["displayName"].is_string());
            assert_eq!(bundle.object, vec![bundle.csv_json.clone()]);
        }
        Payload::Objects(n) => {
            assert_eq!(bundle.object.len(), n);
            assert!(bundle.object.contains(&bundle.csv_json));
            for object in &bundle.object {
                let value: Value = serde_json::from_str(object).expect("each object is JSON");
                assert!(value["kind"].is_string(), "{object:.200}");
            }
        }
    }
}

async fn check(x: &Expected) {
    let Some(dir) = real_catalog(x.catalog) else {
        return;
    };
    let (_server, client) = serve(&dir).await;

    assert!(client.health_check("").await.unwrap());
    assert!(client.health_check("Registry").await.unwrap());

    let packages = client.list_packages().await.unwrap();
    assert_eq!(packages.len(), x.packages);
    assert!(
        packages.windows(2).all(|w| w[0] < w[1]),
        "sorted and distinct"
    );
    assert!(packages.iter().any(|p| p == x.package));

    let package = client.get_package(x.package).await.unwrap();
    assert_eq!(package.name, x.package);
    assert_eq!(package.default_channel_name, x.default_channel);
    let channel_names: Vec<&str> = package.channels.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(channel_names, x.channels);
    let default = package
        .channels
        .iter()
        .find(|c| c.name == x.default_channel)
        .expect("default channel listed");
    assert_eq!(default.csv_name, x.head);

    let head = client
        .get_bundle_for_channel(x.package, x.default_channel)
        .await
        .unwrap();
    check_head_bundle(&head, x);
    // The second answer comes from the decoded-manifest cache when the
    // bundle carries olm.bundle.object: it must be the first, exactly.
    let same = client
        .get_bundle(x.package, x.default_channel, x.head)
        .await
        .unwrap();
    assert_eq!(same, head);
    for name in &packages {
        let p = client.get_package(name).await.unwrap();
        let first = client
            .get_bundle_for_channel(name, &p.default_channel_name)
            .await
            .unwrap();
        let again = client
            .get_bundle(name, &p.default_channel_name, &first.csv_name)
            .await
            .unwrap();
        assert_eq!(again, first, "{name}");
    }

    let replacing = client
        .get_channel_entries_that_replace(x.replaced)
        .await
        .unwrap();
    let mut names: Vec<&str> = replacing.iter().map(|e| e.bundle_name.as_str()).collect();
    names.dedup();
    assert_eq!(names, x.replaced_by);
    assert!(replacing.iter().all(|e| e.package_name == x.package));
    let replacement = client
        .get_bundle_that_replaces(x.replaced, x.package, x.default_channel)
        .await
        .unwrap();
    assert!(x.replaced_by.contains(&replacement.csv_name.as_str()));

    let gvk = GvkQuery::new(x.gvk.0, x.gvk.1, x.gvk.2);
    let providing = client.get_channel_entries_that_provide(gvk).await.unwrap();
    assert_eq!(providing.len(), x.providing_entries);
    let latest = client
        .get_latest_channel_entries_that_provide(gvk)
        .await
        .unwrap();
    assert_eq!(latest.len(), x.latest_providing_entries);
    assert!(latest.iter().all(|e| e.bundle_name == x.head));
    assert_eq!(latest[0].replaces, x.head_replaces);
    let default_provider = client.get_default_bundle_that_provides(gvk).await.unwrap();
    assert_eq!(default_provider, head);

    // ListBundles: one bundle per channel entry, light, with the entry's edges.
    let mut stream = std::pin::pin!(client.list_bundles().await.unwrap());
    let mut count = 0;
    let mut seen_head = false;
    let mut last_key: Option<(String, String, String)> = None;
    while let Some(bundle) = stream.next().await {
        let bundle = bundle.unwrap();
        count += 1;
        let key = (
            bundle.channel_name.clone(),
            bundle.package_name.clone(),
            bundle.csv_name.clone(),
        );
        if let Some(last) = &last_key {
            assert!(
                last < &key,
                "ListBundles is ordered by channel, package, bundle"
            );
        }
        last_key = Some(key);
        assert!(!bundle.bundle_path.is_empty());
        assert!(
            bundle.csv_json.is_empty(),
            "csvJson is omitted when bundlePath is set"
        );
        assert!(
            bundle.object.is_empty(),
            "object is omitted when bundlePath is set"
        );
        assert!(!bundle.version.is_empty());
        if bundle.package_name == x.package && bundle.csv_name == x.head {
            seen_head = true;
            assert_eq!(bundle.replaces, x.head_replaces);
            assert_eq!(bundle.skips.len(), x.head_skips);
            assert_eq!(bundle.skip_range, x.head_skip_range);
        }
    }
    assert_eq!(count, x.channel_entries);
    assert!(seen_head);

    let missing = client.get_package("no-such-package").await.unwrap_err();
    assert_eq!(code(&missing), tonic::Code::NotFound);
    assert!(
        missing
            .to_string()
            .contains(r#"package "no-such-package" not found"#)
    );
}
