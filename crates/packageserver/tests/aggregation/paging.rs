//! `limit`/`continue` through the aggregator (which sends each page to
//! either replica), and Table output on watches.
//!
//! Lists here are in namespace `default`, which sees only the global catalog:
//! other tests change the team catalog and add catalogs of their own, and a
//! change of the listed content legitimately expires a continue token.

use std::time::Duration;

use base64::Engine as _;
use futures::{AsyncBufReadExt as _, StreamExt as _};
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use olm_api::catalog_source::CatalogSource;
use serde_json::{Value, json};

use crate::harness::{TEAM_CATALOG, TEAM_NAMESPACE, harness, kubectl_ok, kubectl_try};

const LIST: &str = "/apis/packages.operators.coreos.com/v1/namespaces/default/packagemanifests";

/// Page pairs fetched: each page goes to a replica the aggregator picks, so
/// this many pairs include, but for a chance of 2^-8, a token honoured by
/// the replica that did not issue it.
const PAGE_PAIRS: usize = 8;

#[test]
fn kubectl_chunked_lists_match_whole_lists() {
    harness();
    let whole = kubectl_ok(&["get", "packagemanifests", "-n", "default", "-o", "name"]);
    assert_eq!(whole.lines().count(), 2, "{whole}");
    for chunk in ["1", "2", "500"] {
        let chunked = kubectl_ok(&[
            "get",
            "packagemanifests",
            "-n",
            "default",
            &format!("--chunk-size={chunk}"),
            "-o",
            "name",
        ]);
        assert_eq!(chunked, whole, "--chunk-size={chunk}");
    }
    // kubectl's default output is a Table, fetched in chunks as well.
    let table = kubectl_ok(&["get", "packagemanifests", "-n", "default", "--chunk-size=1"]);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 3, "one header, two rows:\n{table}");
    assert!(lines[0].starts_with("NAME"), "{table}");
    assert!(lines[1].starts_with("gizmo-operator") && lines[2].starts_with("sprocket-operator"));
}

fn raw(path: &str) -> Value {
    serde_json::from_str(&kubectl_ok(&["get", "--raw", path])).unwrap()
}

#[test]
fn continue_tokens_hold_across_replicas_and_refuse_hostile_input() {
    harness();
    for _ in 0..PAGE_PAIRS {
        let first = raw(&format!("{LIST}?limit=1"));
        assert_eq!(first["items"].as_array().unwrap().len(), 1, "{first}");
        assert_eq!(first["metadata"]["remainingItemCount"], 1, "{first}");
        let token = first["metadata"]["continue"].as_str().unwrap().to_owned();
        let second = raw(&format!("{LIST}?limit=1&continue={token}"));
        let items = second["items"].as_array().unwrap();
        assert_eq!(items.len(), 1, "{second}");
        assert!(second["metadata"].get("continue").is_none(), "{second}");
        assert_eq!(
            [
                first["items"][0]["metadata"]["name"].as_str().unwrap(),
                items[0]["metadata"]["name"].as_str().unwrap()
            ],
            ["gizmo-operator", "sprocket-operator"]
        );
    }

    let encode = |text: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text);
    let bad_requests = [
        "continue=not-a-token".to_owned(),
        format!("continue={}", encode("{}")),
        format!(
            "continue={}",
            encode(r#"{"v":"meta.k8s.io/v1","rv":5,"start":"/x"}"#)
        ),
        "limit=many".to_owned(),
    ];
    for query in bad_requests {
        let (ok, _, err) = kubectl_try(&["get", "--raw", &format!("{LIST}?{query}")]);
        assert!(!ok && err.contains("BadRequest"), "{query}: {err}");
    }
    let (ok, _, err) = kubectl_try(&["get", "--raw", &format!("{LIST}?continue=%00")]);
    assert!(!ok && err.contains("invalid continue token"), "{err}");

    // A token of content that is not current: 410 Expired, as the API server
    // answers for a compacted one.
    let stale = encode(&format!(
        r#"{{"v":"meta.k8s.io/v1","gen":"{}","start":[true,"gizmo-operator","fixture-catalog","ps-global"]}}"#,
        "0".repeat(32)
    ));
    let (ok, _, err) = kubectl_try(&["get", "--raw", &format!("{LIST}?limit=1&continue={stale}")]);
    assert!(
        !ok && err.contains("Expired") && err.contains("too old to display a consistent list"),
        "{err}"
    );
}

#[tokio::test]
async fn table_watches_carry_the_list_columns() {
    harness();
    let client = olm_testkit::control_plane().client().await;
    let accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
    let path = format!(
        "/apis/packages.operators.coreos.com/v1/namespaces/{TEAM_NAMESPACE}/packagemanifests"
    );
    let list: Value = serde_json::from_str(
        &client
            .request_text(
                http::Request::get(format!("{path}?labelSelector=catalog%3D{TEAM_CATALOG}"))
                    .header(http::header::ACCEPT, accept)
                    .body(vec![])
                    .unwrap(),
            )
            .await
            .unwrap(),
    )
    .unwrap();
    // A watch without a resourceVersion starts with the current packages, so
    // it does not matter which replica the aggregator picks.
    let body = client
        .request_stream(
            http::Request::get(format!(
                "{path}?watch=true&labelSelector=catalog%3D{TEAM_CATALOG}"
            ))
            .header(http::header::ACCEPT, accept)
            .body(vec![])
            .unwrap(),
        )
        .await
        .unwrap();
    let mut lines = body.lines();
    let mut next = async || -> Value {
        let line = tokio::time::timeout(Duration::from_secs(20), lines.next())
            .await
            .expect("a watch event within 20 s")
            .unwrap()
            .unwrap();
        serde_json::from_str(&line).unwrap()
    };
    let first = next().await;
    assert_eq!(first["type"], "ADDED");
    assert_eq!(first["object"]["kind"], "Table", "{first}");
    assert_eq!(
        first["object"]["columnDefinitions"], list["columnDefinitions"],
        "the first event declares the list's columns"
    );
    let second = next().await;
    assert!(second["object"]["columnDefinitions"].is_null(), "{second}");
    let mut initial: Vec<&str> = [&first, &second]
        .iter()
        .map(|e| e["object"]["rows"][0]["cells"][0].as_str().unwrap())
        .collect();
    initial.sort_unstable();
    assert_eq!(initial, ["gizmo-operator", "sprocket-operator"]);

    // A change arrives as a one-row Table. (A label, not the display name:
    // the informer test changes that one at the same time.)
    let mark = std::process::id().to_string();
    let catalogs: Api<CatalogSource> = Api::namespaced(client, TEAM_NAMESPACE);
    catalogs
        .patch(
            TEAM_CATALOG,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"table-watch": mark}}})),
        )
        .await
        .unwrap();
    loop {
        let event = next().await;
        let row = &event["object"]["rows"][0];
        if row["object"]["metadata"]["labels"]["table-watch"] == mark.as_str() {
            assert_eq!(event["type"], "MODIFIED");
            assert!(event["object"]["columnDefinitions"].is_null());
            assert_eq!(row["object"]["kind"], "PartialObjectMetadata");
            assert_eq!(row["cells"].as_array().unwrap().len(), 3);
            break;
        }
    }
}
