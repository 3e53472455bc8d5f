//! ARCHITECTURE rule 4: no schema of ours restricts a status field to a list of
//! values, so an older CRD never rejects a newer controller's status write.

use serde_json::Value;

fn enum_paths(node: &Value, path: &str, found: &mut Vec<String>) {
    let Some(object) = node.as_object() else {
        return;
    };
    if object.contains_key("enum") {
        found.push(path.to_owned());
    }
    if let Some(properties) = object.get("properties").and_then(Value::as_object) {
        for (name, child) in properties {
            enum_paths(child, &format!("{path}.{name}"), found);
        }
    }
    if let Some(items) = object.get("items") {
        enum_paths(items, &format!("{path}[]"), found);
    }
    if let Some(values) = object.get("additionalProperties") {
        enum_paths(values, &format!("{path}{{}}"), found);
    }
    for keyword in ["anyOf", "oneOf", "allOf"] {
        for branch in object
            .get(keyword)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            enum_paths(branch, path, found);
        }
    }
}

#[test]
fn no_enum_under_status() {
    let mut found = Vec::new();
    let mut statuses = 0;
    for crd in olm_api::crd::all() {
        for version in &crd.spec.versions {
            let schema = version
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .expect("every version has a schema");
            let schema = serde_json::to_value(schema).expect("schema serializes");
            if let Some(status) = schema.pointer("/properties/status") {
                statuses += 1;
                let at = format!("{} {} .status", crd.spec.names.kind, version.name);
                enum_paths(status, &at, &mut found);
            }
        }
    }
    assert!(
        statuses >= 11,
        "expected a status schema in every CRD version, found {statuses}"
    );
    assert!(found.is_empty(), "enum under status at: {found:#?}");
}

#[test]
fn spec_enums_are_exactly_upstreams() {
    // The complete list of enums upstream's CRDs have outside status; ours must
    // have these and no others.
    let mut found = Vec::new();
    for crd in olm_api::crd::all() {
        for version in &crd.spec.versions {
            let schema = version
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .expect("schema");
            let schema = serde_json::to_value(schema).expect("schema serializes");
            enum_paths(
                &schema,
                &format!("{} {}", crd.spec.names.kind, version.name),
                &mut found,
            );
        }
    }
    found.sort();
    assert_eq!(
        found,
        [
            "CatalogSource v1alpha1.spec.grpcPodConfig.securityContextConfig",
            "ClusterServiceVersion v1alpha1.spec.webhookdefinitions[].type",
            "OperatorCondition v1.spec.overrides[].status",
            "OperatorCondition v2.spec.conditions[].status",
            "OperatorCondition v2.spec.overrides[].status",
            "OperatorGroup v1.spec.upgradeStrategy",
        ]
    );
}
