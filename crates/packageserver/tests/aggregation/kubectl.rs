//! What admins see with kubectl: columns, YAML, selectors, discovery.

use serde_json::Value;

use crate::harness::{
    GLOBAL_CATALOG, GLOBAL_CATALOG_DISPLAY, GLOBAL_NAMESPACE, TEAM_CATALOG, TEAM_NAMESPACE,
    harness, kubectl_ok, kubectl_try,
};

#[test]
fn get_all_namespaces_prints_upstream_columns() {
    harness();
    let out = kubectl_ok(&["get", "packagemanifests", "-A"]);
    let mut lines = out.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAMESPACE", "NAME", "CATALOG", "AGE"], "{out}");
    let rows: Vec<&str> = lines.collect();
    for package in ["gizmo-operator", "sprocket-operator"] {
        assert!(
            rows.iter().any(|r| r.starts_with(GLOBAL_NAMESPACE)
                && r.contains(package)
                && r.contains(GLOBAL_CATALOG_DISPLAY)),
            "{package} of the global catalog missing:\n{out}"
        );
        assert!(
            rows.iter()
                .any(|r| r.starts_with(TEAM_NAMESPACE) && r.contains(package)),
            "{package} of the team catalog missing:\n{out}"
        );
    }
    // All namespaces: each package once per catalog, in its catalog's namespace.
    assert_eq!(
        rows.iter().filter(|r| r.contains("gizmo-operator")).count(),
        2,
        "{out}"
    );
}

#[test]
fn get_one_as_yaml_has_upstream_shape() {
    harness();
    let yaml = kubectl_ok(&[
        "get",
        "packagemanifest",
        "gizmo-operator",
        "-n",
        TEAM_NAMESPACE,
        "-o",
        "yaml",
    ]);
    let m: Value = serde_yaml_ng::from_str(&yaml).unwrap();
    assert_eq!(m["apiVersion"], "packages.operators.coreos.com/v1");
    assert_eq!(m["kind"], "PackageManifest");
    assert_eq!(m["metadata"]["namespace"], TEAM_NAMESPACE);
    assert_eq!(
        m["status"]["catalogSource"], TEAM_CATALOG,
        "the namespace's own catalog comes first"
    );
    assert_eq!(m["status"]["packageName"], "gizmo-operator");
    assert_eq!(m["status"]["defaultChannel"], "stable");
    assert_eq!(m["status"]["provider"]["name"], "Gizmo Works");
    let labels = &m["metadata"]["labels"];
    assert_eq!(labels["catalog"], TEAM_CATALOG);
    assert_eq!(labels["catalog-namespace"], TEAM_NAMESPACE);
    assert_eq!(labels["provider"], "Gizmo Works");
    assert_eq!(labels["provider-url"], "https://gizmo.example");
    assert_eq!(labels["operatorframework.io/os.linux"], "supported");
    assert_eq!(labels["operatorframework.io/arch.amd64"], "supported");
    let channels: Vec<&str> = m["status"]["channels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(channels, ["fast", "stable"]);
    let stable = &m["status"]["channels"][1];
    assert_eq!(stable["currentCSV"], "gizmo-operator.v1.1.0");
    assert_eq!(stable["currentCSVDesc"]["displayName"], "Gizmo");
    assert!(
        stable["currentCSVDesc"].get("icon").is_none(),
        "icons only through the subresource"
    );
    let entries: Vec<&str> = stable["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        entries,
        ["gizmo-operator.v1.1.0"],
        "deprecated bundles left out"
    );
    assert!(m["metadata"]["creationTimestamp"].is_string());
}

#[test]
fn label_and_field_selectors_filter() {
    harness();
    let json = kubectl_ok(&[
        "get",
        "packagemanifests",
        "-n",
        TEAM_NAMESPACE,
        "-l",
        &format!("catalog={GLOBAL_CATALOG}"),
        "-o",
        "json",
    ]);
    let list: Value = serde_json::from_str(&json).unwrap();
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{json}");
    assert!(
        items
            .iter()
            .all(|i| i["status"]["catalogSource"] == GLOBAL_CATALOG
                && i["metadata"]["namespace"] == TEAM_NAMESPACE)
    );
    let names = kubectl_ok(&[
        "get",
        "packagemanifests",
        "-A",
        "-l",
        "catalog-namespace=ps-global,operatorframework.io/os.linux=supported",
        "-o",
        "name",
    ]);
    assert_eq!(names.lines().count(), 2, "{names}");
    let named = kubectl_ok(&[
        "get",
        "packagemanifests",
        "-n",
        TEAM_NAMESPACE,
        "--field-selector",
        "metadata.name=sprocket-operator",
        "-o",
        "name",
    ]);
    assert_eq!(
        named.lines().collect::<Vec<_>>(),
        ["packagemanifest.packages.operators.coreos.com/sprocket-operator"; 2]
    );
    let (ok, _, err) = kubectl_try(&[
        "get",
        "packagemanifests",
        "-A",
        "--field-selector",
        "spec.x=y",
    ]);
    assert!(!ok && err.contains("field label not supported"), "{err}");
    let none = kubectl_ok(&[
        "get",
        "packagemanifests",
        "-n",
        "default",
        "-l",
        "catalog=team-catalog",
        "-o",
        "name",
    ]);
    assert!(
        none.trim().is_empty(),
        "team catalog leaked into another namespace: {none}"
    );
}

#[tokio::test]
async fn discovery_and_icon_through_the_aggregator() {
    harness();
    let list: Value = serde_json::from_str(&kubectl_ok(&[
        "get",
        "--raw",
        "/apis/packages.operators.coreos.com/v1",
    ]))
    .unwrap();
    assert_eq!(list["kind"], "APIResourceList");
    assert_eq!(list["resources"][0]["name"], "packagemanifests");
    let resources = kubectl_ok(&[
        "api-resources",
        "--api-group=packages.operators.coreos.com",
        "-o",
        "name",
    ]);
    assert!(
        resources
            .lines()
            .any(|l| l == "packagemanifests.packages.operators.coreos.com"),
        "{resources}"
    );
    let groups: Value = serde_json::from_str(&kubectl_ok(&[
        "get",
        "--raw",
        "/apis/packages.operators.coreos.com",
    ]))
    .unwrap();
    assert_eq!(
        groups["preferredVersion"]["groupVersion"],
        "packages.operators.coreos.com/v1"
    );
    let icon = kubectl_ok(&[
        "get",
        "--raw",
        &format!(
            "/apis/packages.operators.coreos.com/v1/namespaces/{TEAM_NAMESPACE}/packagemanifests/gizmo-operator/icon"
        ),
    ]);
    assert_eq!(icon, r#"<svg xmlns="http://www.w3.org/2000/svg"/>"#);
    let default_icon = kubectl_ok(&[
        "get",
        "--raw",
        &format!(
            "/apis/packages.operators.coreos.com/v1/namespaces/{TEAM_NAMESPACE}/packagemanifests/sprocket-operator/icon"
        ),
    ]);
    assert!(default_icon.starts_with("<svg"), "{default_icon}");
    let (ok, _, err) = kubectl_try(&[
        "get",
        "packagemanifest",
        "no-such-package",
        "-n",
        TEAM_NAMESPACE,
    ]);
    assert!(
        !ok && err.contains(
            "packagemanifests.packages.operators.coreos.com \"no-such-package\" not found"
        ),
        "{err}"
    );
    crate::eventually(
        "the aggregated openapi v3 lists our group",
        std::time::Duration::from_secs(30),
        || async {
            let v3: Value =
                serde_json::from_str(&kubectl_ok(&["get", "--raw", "/openapi/v3"])).unwrap();
            match v3["paths"].get("apis/packages.operators.coreos.com/v1") {
                Some(_) => Ok(()),
                None => Err("not yet".to_owned()),
            }
        },
    )
    .await;
    let doc: Value = serde_json::from_str(&kubectl_ok(&[
        "get",
        "--raw",
        "/openapi/v3/apis/packages.operators.coreos.com/v1",
    ]))
    .unwrap();
    assert!(
        doc["components"]["schemas"]
            .as_object()
            .unwrap()
            .keys()
            .any(|k| k.ends_with("PackageManifest"))
    );
    let (ok, _, err) = kubectl_try(&[
        "delete",
        "packagemanifest",
        "gizmo-operator",
        "-n",
        TEAM_NAMESPACE,
    ]);
    assert!(!ok, "delete must be refused: {err}");
}
