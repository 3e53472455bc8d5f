//! Resolver input read from the Kubernetes objects of a namespace, in JSON
//! form: the one home of how an installed CSV becomes an [`InstalledCsv`]
//! (its properties annotation, else the properties upstream infers), of
//! which CSVs are OLM's copies, and of how a Subscription is read. catalog-operator (from its caches) and
//! `kubectl olm` (from a state file) both read CSVs through here, so a
//! preview and the controller cannot disagree.

use serde_json::Value;

use crate::model::InstalledCsv;

/// The annotation that carries a CSV's properties (upstream's
/// `projection.PropertiesAnnotationKey`).
pub const PROPERTIES_ANNOTATION: &str = "operatorframework.io/properties";

/// The string at `path` in `v`, or `""`.
fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    let mut cur = v;
    for p in path {
        match cur.get(p) {
            Some(next) => cur = next,
            None => return "",
        }
    }
    cur.as_str().unwrap_or("")
}

/// The resolver's view of a Subscription object.
pub fn subscription(subscription: &Value) -> crate::model::Subscription {
    let spec = |k: &str| str_at(subscription, &["spec", k]).to_owned();
    crate::model::Subscription {
        name: str_at(subscription, &["metadata", "name"]).to_owned(),
        package: spec("name"),
        channel: spec("channel"),
        catalog: spec("source"),
        catalog_namespace: spec("sourceNamespace"),
        starting_csv: spec("startingCSV"),
        installed_csv: str_at(subscription, &["status", "installedCSV"]).to_owned(),
    }
}

/// Whether the CSV is a copy OLM made into a target namespace (label
/// `olm.copiedFrom`, or reason `Copied`): copies take no part in resolution.
pub fn is_copied(csv: &Value) -> bool {
    !str_at(csv, &["metadata", "labels", "olm.copiedFrom"]).is_empty()
        || str_at(csv, &["status", "reason"]) == "Copied"
}

/// A CSV's properties: its annotation when present, otherwise the APIs it
/// owns (`olm.gvk`) and requires (`olm.gvk.required`), as upstream infers.
pub fn installed_csv(csv: &Value) -> Result<InstalledCsv, String> {
    let name = str_at(csv, &["metadata", "name"]);
    let spec = |k: &str| Some(str_at(csv, &["spec", k]).to_owned()).filter(|s| !s.is_empty());
    let annotation = str_at(csv, &["metadata", "annotations", PROPERTIES_ANNOTATION]);
    let mut properties = Vec::new();
    if annotation.is_empty() {
        let gvk = |group: &str, version: &str, kind: &str| {
            serde_json::json!({"group": group, "version": version, "kind": kind}).to_string()
        };
        for (section, crd) in [
            ("customresourcedefinitions", true),
            ("apiservicedefinitions", false),
        ] {
            for (list, type_) in [("owned", "olm.gvk"), ("required", "olm.gvk.required")] {
                let items = csv
                    .pointer(&format!("/spec/{section}/{list}"))
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                for item in items {
                    let group = if crd {
                        str_at(&item, &["name"])
                            .split_once('.')
                            .map(|(_, g)| g.to_owned())
                            .unwrap_or_default()
                    } else {
                        str_at(&item, &["group"]).to_owned()
                    };
                    properties.push((
                        type_.to_owned(),
                        gvk(
                            &group,
                            str_at(&item, &["version"]),
                            str_at(&item, &["kind"]),
                        ),
                    ));
                }
            }
        }
    } else {
        let parsed: Value = serde_json::from_str(annotation)
            .map_err(|e| format!("csv {name}: annotation {PROPERTIES_ANNOTATION}: {e}"))?;
        for p in parsed
            .get("properties")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let type_ = str_at(p, &["type"]).to_owned();
            let value = p.get("value").cloned().unwrap_or(Value::Null);
            // Upstream stores values as JSON objects or as JSON strings.
            let text = match value {
                Value::String(s) if serde_json::from_str::<Value>(&s).is_ok() => s,
                other => other.to_string(),
            };
            properties.push((type_, text));
        }
    }
    Ok(InstalledCsv {
        name: name.to_owned(),
        version: spec("version"),
        replaces: spec("replaces"),
        properties,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_come_from_the_annotation_or_are_inferred() {
        let annotated = serde_json::json!({
            "metadata": {"name": "a.v1", "annotations": {PROPERTIES_ANNOTATION:
                r#"{"properties":[{"type":"olm.package","value":{"packageName":"a","version":"1.0.0"}},{"type":"olm.gvk","value":"{\"group\":\"g\",\"version\":\"v1\",\"kind\":\"K\"}"}]}"#}},
            "spec": {"version": "1.0.0", "replaces": "a.v0"},
        });
        let csv = installed_csv(&annotated).unwrap();
        assert_eq!(csv.name, "a.v1");
        assert_eq!(csv.version.as_deref(), Some("1.0.0"));
        assert_eq!(csv.replaces.as_deref(), Some("a.v0"));
        assert_eq!(csv.properties[0].0, "olm.package");
        // A value stored as a JSON string is the JSON it holds.
        assert_eq!(
            csv.properties[1].1,
            r#"{"group":"g","version":"v1","kind":"K"}"#
        );

        let bare = serde_json::json!({
            "metadata": {"name": "b.v1"},
            "spec": {"customresourcedefinitions": {
                "owned": [{"name": "widgets.example.com", "version": "v1", "kind": "Widget"}],
                "required": [{"name": "gadgets.example.com", "version": "v2", "kind": "Gadget"}]},
                "apiservicedefinitions": {"owned": [{"group": "api.example.com", "version": "v1", "kind": "Thing"}]}},
        });
        // Compared as JSON: key order depends on serde_json's features.
        let found: Vec<(String, Value)> = installed_csv(&bare)
            .unwrap()
            .properties
            .into_iter()
            .map(|(t, v)| (t, serde_json::from_str(&v).unwrap()))
            .collect();
        let gvk =
            |g: &str, v: &str, k: &str| serde_json::json!({"group": g, "version": v, "kind": k});
        assert_eq!(
            found,
            vec![
                ("olm.gvk".to_owned(), gvk("example.com", "v1", "Widget")),
                (
                    "olm.gvk.required".to_owned(),
                    gvk("example.com", "v2", "Gadget")
                ),
                ("olm.gvk".to_owned(), gvk("api.example.com", "v1", "Thing")),
            ]
        );

        let broken = serde_json::json!({"metadata": {"name": "c", "annotations": {PROPERTIES_ANNOTATION: "{"}}});
        assert!(installed_csv(&broken).unwrap_err().contains("csv c"));
    }

    #[test]
    fn subscriptions_are_read_from_spec_and_status() {
        let sub = subscription(&serde_json::json!({
            "metadata": {"name": "etcd-sub"},
            "spec": {"name": "etcd", "channel": "alpha", "source": "c", "sourceNamespace": "olm",
                     "startingCSV": "etcd.v1"},
            "status": {"installedCSV": "etcd.v1"},
        }));
        assert_eq!(
            (
                sub.name.as_str(),
                sub.package.as_str(),
                sub.channel.as_str()
            ),
            ("etcd-sub", "etcd", "alpha")
        );
        assert_eq!(
            (sub.catalog.as_str(), sub.catalog_namespace.as_str()),
            ("c", "olm")
        );
        assert_eq!(
            (sub.starting_csv.as_str(), sub.installed_csv.as_str()),
            ("etcd.v1", "etcd.v1")
        );
        let bare =
            subscription(&serde_json::json!({"metadata": {"name": "x"}, "spec": {"name": "x"}}));
        assert_eq!(
            (bare.channel.as_str(), bare.installed_csv.as_str()),
            ("", "")
        );
    }

    #[test]
    fn copies_are_told_apart() {
        assert!(is_copied(
            &serde_json::json!({"metadata": {"labels": {"olm.copiedFrom": "ns"}}})
        ));
        assert!(is_copied(
            &serde_json::json!({"status": {"reason": "Copied"}})
        ));
        assert!(!is_copied(&serde_json::json!({"metadata": {"name": "a"}})));
    }
}
