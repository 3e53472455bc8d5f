//! Upstream's answers on small catalogs written by the tests, one rule each.

use futures::StreamExt;
use olm_registry::{GvkQuery, api};

use crate::fixtures::{bundle, catalog, channel, code, package, serve};

const GVK_ETCD: &str = r#"{"type":"olm.gvk","value":{"group":"etcd.database.coreos.com","kind":"EtcdCluster","version":"v1beta2"}}"#;

/// Two packages providing the same API; `zeta` sorts after `alpha`.
fn two_providers() -> tempfile::TempDir {
    catalog(&[
        (
            "zeta/catalog.json",
            &[
                package("zeta", "stable"),
                channel("zeta", "stable", r#"[{"name":"zeta.v1.0.0"}]"#),
                bundle("zeta", "zeta.v1.0.0", "1.0.0", GVK_ETCD),
            ]
            .join("\n"),
        ),
        (
            "alpha/catalog.json",
            &[
                package("alpha", "stable"),
                channel(
                    "alpha",
                    "stable",
                    r#"[{"name":"alpha.v1.0.0"},{"name":"alpha.v1.1.0","replaces":"alpha.v1.0.0","skips":["alpha.v0.9.0"]}]"#,
                ),
                // `fast` is not the default channel; its head also provides.
                channel("alpha", "fast", r#"[{"name":"alpha.v2.0.0","replaces":"alpha.v1.1.0"}]"#),
                bundle("alpha", "alpha.v1.0.0", "1.0.0", GVK_ETCD),
                bundle("alpha", "alpha.v1.1.0", "1.1.0", GVK_ETCD),
                bundle("alpha", "alpha.v2.0.0", "2.0.0", GVK_ETCD),
            ]
            .join("\n"),
        ),
    ])
}

#[tokio::test]
async fn the_default_provider_is_the_first_package_by_name_in_its_default_channel() {
    let dir = two_providers();
    let (_server, client) = serve(dir.path()).await;
    let gvk = GvkQuery::new("etcd.database.coreos.com", "v1beta2", "EtcdCluster");
    let bundle = client.get_default_bundle_that_provides(gvk).await.unwrap();
    assert_eq!(bundle.csv_name, "alpha.v1.1.0");
    assert_eq!(bundle.channel_name, "stable");

    let latest = client
        .get_latest_channel_entries_that_provide(gvk)
        .await
        .unwrap();
    let heads: Vec<(&str, &str, &str)> = latest
        .iter()
        .map(|e| {
            (
                e.package_name.as_str(),
                e.channel_name.as_str(),
                e.replaces.as_str(),
            )
        })
        .collect();
    // alpha.v1.1.0 skips alpha.v0.9.0, which is not in the channel: only
    // GetChannelEntriesThatProvide reports edges to bundles outside it.
    assert_eq!(
        heads,
        [
            ("alpha", "fast", "alpha.v1.1.0"),
            ("alpha", "stable", "alpha.v1.0.0"),
            ("zeta", "stable", ""),
        ]
    );
    let all = client.get_channel_entries_that_provide(gvk).await.unwrap();
    assert_eq!(all.len(), 5, "{all:?}");
    assert!(
        all.iter()
            .any(|e| e.bundle_name == "alpha.v1.1.0" && e.replaces == "alpha.v0.9.0")
    );

    let unknown = GvkQuery::new("example.com", "v1", "Nothing");
    let err = client
        .get_default_bundle_that_provides(unknown)
        .await
        .unwrap_err();
    assert_eq!(code(&err), tonic::Code::NotFound);
    let err = client
        .get_channel_entries_that_provide(unknown)
        .await
        .unwrap_err();
    assert_eq!(code(&err), tonic::Code::NotFound);
}

#[tokio::test]
async fn list_bundles_orders_by_channel_then_package_then_bundle() {
    let dir = two_providers();
    let (_server, client) = serve(dir.path()).await;
    let stream = client.list_bundles().await.unwrap();
    let bundles: Vec<api::Bundle> = stream.map(|b| b.unwrap()).collect().await;
    let keys: Vec<(&str, &str, &str)> = bundles
        .iter()
        .map(|b| {
            (
                b.channel_name.as_str(),
                b.package_name.as_str(),
                b.csv_name.as_str(),
            )
        })
        .collect();
    assert_eq!(
        keys,
        [
            ("fast", "alpha", "alpha.v2.0.0"),
            ("stable", "alpha", "alpha.v1.0.0"),
            ("stable", "alpha", "alpha.v1.1.0"),
            ("stable", "zeta", "zeta.v1.0.0"),
        ]
    );
    let v11 = &bundles[2];
    assert_eq!(v11.replaces, "alpha.v1.0.0");
    assert_eq!(v11.skips, ["alpha.v0.9.0"]);
}

#[tokio::test]
async fn replacements_follow_replaces_and_skips() {
    let dir = catalog(&[(
        "etcd/catalog.json",
        &[
            package("etcd", "stable"),
            channel(
                "etcd",
                "stable",
                r#"[{"name":"etcd.v1"},{"name":"etcd.v2","replaces":"etcd.v1"},{"name":"etcd.v3","replaces":"etcd.v2","skips":["etcd.v1"]}]"#,
            ),
            bundle("etcd", "etcd.v1", "1.0.0", ""),
            bundle("etcd", "etcd.v2", "2.0.0", ""),
            bundle("etcd", "etcd.v3", "3.0.0", ""),
        ]
        .join("\n"),
    )]);
    let (_server, client) = serve(dir.path()).await;
    let entries = client
        .get_channel_entries_that_replace("etcd.v1")
        .await
        .unwrap();
    // Upstream quirk kept for compatibility: an entry that skips the bundle
    // is reported with its own `replaces`, not with the skipped name.
    let got: Vec<(&str, &str)> = entries
        .iter()
        .map(|e| (e.bundle_name.as_str(), e.replaces.as_str()))
        .collect();
    assert_eq!(got, [("etcd.v2", "etcd.v1"), ("etcd.v3", "etcd.v2")]);

    let bundle = client
        .get_bundle_that_replaces("etcd.v2", "etcd", "stable")
        .await
        .unwrap();
    assert_eq!(bundle.csv_name, "etcd.v3");
    let err = client
        .get_bundle_that_replaces("etcd.v3", "etcd", "stable")
        .await
        .unwrap_err();
    assert_eq!(code(&err), tonic::Code::NotFound);
    assert!(
        err.to_string()
            .contains(r#"no entry found for package "etcd", channel "stable""#)
    );
    let err = client
        .get_channel_entries_that_replace("etcd.v3")
        .await
        .unwrap_err();
    assert_eq!(code(&err), tonic::Code::NotFound);
    let err = client
        .get_bundle("etcd", "stable", "etcd.v9")
        .await
        .unwrap_err();
    assert_eq!(code(&err), tonic::Code::NotFound);
    assert!(
        err.to_string()
            .contains(r#"package "etcd", channel "stable", bundle "etcd.v9" not found"#)
    );
    let err = client
        .get_bundle_for_channel("etcd", "beta")
        .await
        .unwrap_err();
    assert_eq!(code(&err), tonic::Code::NotFound);
    assert!(
        err.to_string()
            .contains(r#"package "etcd", channel "beta" not found"#)
    );
}

#[tokio::test]
async fn properties_are_canonical_and_requirements_become_dependencies() {
    let extra = [
        // Unsorted keys and blanks: served compact with sorted keys.
        r#"{"type":"example.com/custom","value":{ "z": 1, "a": [true, null, 1.50], "m": "<&>" }}"#,
        r#"{"type":"olm.gvk.required","value":{"group":"etcd.database.coreos.com","kind":"EtcdCluster","version":"v1beta2"}}"#,
        r#"{"type":"olm.package.required","value":{"packageName":"etcd","versionRange":">=0.9.0"}}"#,
    ]
    .join(",");
    let dir = catalog(&[(
        "app/catalog.json",
        &[
            package("app", "stable"),
            channel(
                "app",
                "stable",
                r#"[{"name":"app.v1.0.0","skipRange":"<1.0.0"}]"#,
            ),
            bundle("app", "app.v1.0.0", "1.0.0", &extra),
        ]
        .join("\n"),
    )]);
    let (_server, client) = serve(dir.path()).await;
    let bundle = client
        .get_bundle_for_channel("app", "stable")
        .await
        .unwrap();
    let custom = bundle
        .properties
        .iter()
        .find(|p| p.r#type == "example.com/custom")
        .expect("custom property");
    assert_eq!(custom.value, r#"{"a":[true,null,1.5],"m":"<&>","z":1}"#);
    assert_eq!(
        bundle.dependencies,
        [
            api::Dependency {
                r#type: "olm.gvk".into(),
                value: r#"{"group":"etcd.database.coreos.com","kind":"EtcdCluster","version":"v1beta2"}"#.into(),
            },
            api::Dependency {
                r#type: "olm.package".into(),
                value: r#"{"packageName":"etcd","version":">=0.9.0"}"#.into(),
            },
        ]
    );
    assert_eq!(bundle.required_apis.len(), 1);
    assert_eq!(bundle.required_apis[0].kind, "EtcdCluster");
    assert!(bundle.provided_apis.is_empty());
    assert_eq!(bundle.skip_range, "<1.0.0");
    assert_eq!(
        bundle.properties.len(),
        4,
        "package, custom, and the two requirements"
    );
}

#[tokio::test]
async fn deprecations_reach_packages_channels_and_bundles() {
    let dir = catalog(&[(
        "old/catalog.yaml",
        r#"---
schema: olm.package
name: old
defaultChannel: stable
---
schema: olm.channel
package: old
name: stable
entries:
  - name: old.v1.0.0
---
schema: olm.channel
package: old
name: legacy
entries:
  - name: old.v1.0.0
---
schema: olm.bundle
package: old
name: old.v1.0.0
image: example.com/old-bundle:v1.0.0
properties:
  - type: olm.package
    value:
      packageName: old
      version: 1.0.0
---
schema: olm.deprecations
package: old
entries:
  - reference:
      schema: olm.package
    message: the package is retired
  - reference:
      schema: olm.channel
      name: legacy
    message: use stable
  - reference:
      schema: olm.bundle
      name: old.v1.0.0
    message: upgrade now
"#,
    )]);
    let (_server, client) = serve(dir.path()).await;
    let package = client.get_package("old").await.unwrap();
    let message = |d: &Option<api::Deprecation>| d.as_ref().map(|d| d.message.clone());
    assert_eq!(
        message(&package.deprecation).as_deref(),
        Some("the package is retired")
    );
    assert_eq!(package.channels.len(), 2);
    assert_eq!(package.channels[0].name, "legacy");
    assert_eq!(
        message(&package.channels[0].deprecation).as_deref(),
        Some("use stable")
    );
    assert_eq!(message(&package.channels[1].deprecation), None);
    let bundle = client
        .get_bundle_for_channel("old", "stable")
        .await
        .unwrap();
    assert_eq!(message(&bundle.deprecation).as_deref(), Some("upgrade now"));
}

#[tokio::test]
async fn bundles_without_an_image_carry_their_manifests_in_list_bundles() {
    use base64::Engine as _;
    let csv = r#"{"apiVersion":"operators.coreos.com/v1alpha1","kind":"ClusterServiceVersion","metadata":{"name":"inline.v1.0.0"},"spec":{"displayName":"Inline <demo>"}}"#;
    let crd = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: demos.example.com\n";
    let object = |data: &str| {
        format!(
            r#"{{"type":"olm.bundle.object","value":{{"data":"{}"}}}}"#,
            base64::engine::general_purpose::STANDARD.encode(data)
        )
    };
    let dir = catalog(&[(
        "inline/catalog.json",
        &[
            package("inline", "stable"),
            channel("inline", "stable", r#"[{"name":"inline.v1.0.0"}]"#),
            format!(
                r#"{{"schema":"olm.bundle","package":"inline","name":"inline.v1.0.0","image":"",
                "properties":[{{"type":"olm.package","value":{{"packageName":"inline","version":"1.0.0"}}}},{},{}]}}"#,
                object(crd),
                object(csv)
            ),
        ]
        .join("\n"),
    )]);
    let (_server, client) = serve(dir.path()).await;
    let stream = client.list_bundles().await.unwrap();
    let bundles: Vec<api::Bundle> = stream.map(|b| b.unwrap()).collect().await;
    assert_eq!(bundles.len(), 1);
    let b = &bundles[0];
    assert_eq!(b.bundle_path, "");
    assert_eq!(b.object.len(), 2);
    // Manifests are re-encoded as Go's json.Marshal does: sorted keys, HTML escaped.
    assert_eq!(
        b.object[0],
        r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"demos.example.com"}}"#
    );
    assert_eq!(b.csv_json, b.object[1]);
    assert!(
        b.csv_json
            .contains(r#""displayName":"Inline \u003cdemo\u003e""#)
    );

    // Once a single answer is built (and kept), the listed bundle takes its
    // manifests from it: the same list again.
    let single = client
        .get_bundle("inline", "stable", "inline.v1.0.0")
        .await
        .unwrap();
    assert_eq!(single.object, b.object);
    let stream = client.list_bundles().await.unwrap();
    let again: Vec<api::Bundle> = stream.map(|b| b.unwrap()).collect().await;
    assert_eq!(again, bundles);
}

/// One bundle heads two channels, with a different `skipRange` in each; the
/// single answer is built once and then kept, so the second round of asks
/// comes from the answer cache.
#[tokio::test]
async fn a_kept_answer_carries_the_channel_entry_it_is_asked_through() {
    let dir = catalog(&[(
        "twin/catalog.json",
        &[
            package("twin", "stable"),
            channel(
                "twin",
                "stable",
                r#"[{"name":"twin.v1.0.0","skipRange":"<1.0.0"}]"#,
            ),
            channel("twin", "fast", r#"[{"name":"twin.v1.0.0"}]"#),
            bundle(
                "twin",
                "twin.v1.0.0",
                "1.0.0",
                &format!(
                    r#"{GVK_ETCD},{{"type":"olm.csv.metadata","value":{{"displayName":"Twin"}}}}"#
                ),
            ),
        ]
        .join("\n"),
    )]);
    let (_server, client) = serve(dir.path()).await;
    let mut seen = Vec::new();
    for round in 0..2 {
        for (channel, skip_range) in [("stable", "<1.0.0"), ("fast", ""), ("stable", "<1.0.0")] {
            let b = client
                .get_bundle_for_channel("twin", channel)
                .await
                .unwrap();
            assert_eq!(
                (b.channel_name.as_str(), b.skip_range.as_str()),
                (channel, skip_range),
                "round {round}"
            );
            assert!(b.replaces.is_empty() && b.skips.is_empty());
            let by_name = client
                .get_bundle("twin", channel, "twin.v1.0.0")
                .await
                .unwrap();
            assert_eq!(by_name, b, "round {round}, {channel}");
            seen.push(b);
        }
    }
    // Everything but the entry's fields is the same answer every time.
    let strip = |mut b: api::Bundle| {
        b.channel_name.clear();
        b.skip_range.clear();
        b
    };
    let first = strip(seen[0].clone());
    assert!(!first.csv_json.is_empty() && first.object == [first.csv_json.clone()]);
    assert!(seen.into_iter().map(strip).all(|b| b == first));
}

#[tokio::test]
async fn custom_schemas_need_the_experimental_header() {
    let dir = catalog(&[(
        "app/catalog.json",
        &[
            package("app", "stable"),
            channel("app", "stable", r#"[{"name":"app.v1.0.0"}]"#),
            bundle("app", "app.v1.0.0", "1.0.0", ""),
            r#"{"schema":"example.com.notes","package":"app","note":"first","count":2}"#.to_owned(),
            r#"{"schema":"example.com.notes","package":"app","note":"second","entries":"not a list"}"#.to_owned(),
            r#"{"schema":"example.com.notes","note":"global"}"#.to_owned(),
        ]
        .join("\n"),
    )]);
    let (_server, client) = serve(dir.path()).await;
    let docs = client
        .list_package_custom_schemas("example.com.notes", "app")
        .await
        .unwrap();
    let notes: Vec<&str> = docs.iter().map(|d| d["note"].as_str().unwrap()).collect();
    assert_eq!(notes, ["first", "second"]);
    assert_eq!(docs[0]["count"], 2.0);
    let global = client
        .list_package_custom_schemas("example.com.notes", "")
        .await
        .unwrap();
    assert_eq!(global.len(), 1);
    assert_eq!(global[0]["note"], "global");

    let err = client
        .list_package_custom_schemas("", "app")
        .await
        .unwrap_err();
    assert_eq!(code(&err), tonic::Code::InvalidArgument);
    let err = client
        .list_package_custom_schemas("../etc", "app")
        .await
        .unwrap_err();
    assert_eq!(code(&err), tonic::Code::InvalidArgument);

    // Without the acknowledgement header, the stream is empty.
    let mut raw =
        olm_registry::api::experimental_registry_client::ExperimentalRegistryClient::connect(
            _server.endpoint(),
        )
        .await
        .unwrap();
    let mut stream = raw
        .experimental_list_package_custom_schemas(
            api::ExperimentalListPackageCustomSchemasRequest {
                schema: "example.com.notes".into(),
                package_name: "app".into(),
            },
        )
        .await
        .unwrap()
        .into_inner();
    assert!(stream.message().await.unwrap().is_none());
}

#[tokio::test]
async fn yaml_and_json_files_mix_and_indexignore_is_honoured() {
    let dir = catalog(&[
        (
            "a/catalog.yaml",
            "# a comment before the first document\n---\nschema: olm.package\nname: a\ndefaultChannel: stable\n---\nschema: olm.channel\npackage: a\nname: stable\nentries:\n- name: a.v1.0.0\n---\nschema: olm.bundle\npackage: a\nname: a.v1.0.0\nimage: example.com/a:v1\nproperties:\n- type: olm.package\n  value: {packageName: a, version: 1.0.0}\n",
        ),
        (
            "b/catalog.json",
            &[
                package("b", "stable"),
                channel("b", "stable", r#"[{"name":"b.v1.0.0"}]"#),
                bundle("b", "b.v1.0.0", "1.0.0", ""),
            ]
            .join("\n"),
        ),
        (".indexignore", "*.md\n/ignored/\n"),
        ("README.md", "not a catalog"),
        ("ignored/broken.json", "{ this is not json"),
    ]);
    let (server, client) = serve(dir.path()).await;
    assert_eq!(client.list_packages().await.unwrap(), ["a", "b"]);
    let a = client.get_bundle_for_channel("a", "stable").await.unwrap();
    assert_eq!(a.version, "1.0.0");
    assert_eq!(a.bundle_path, "example.com/a:v1");
    drop(server);
}
