//! Discovery documents and OpenAPI (v2 and v3) for
//! `packages.operators.coreos.com/v1`, as the aggregator and kubectl read
//! them.

use olm_api::package_manifest::{
    GROUP, ICON_SUBRESOURCE, PLURAL, PackageManifest, PackageManifestList, VERSION,
};
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

/// The group/version string.
pub fn group_version() -> String {
    format!("{GROUP}/{VERSION}")
}

/// `/apis`: the one group this server serves.
pub fn api_group_list() -> Value {
    json!({
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [api_group_body()],
    })
}

fn api_group_body() -> Value {
    json!({
        "name": GROUP,
        "versions": [{"groupVersion": group_version(), "version": VERSION}],
        "preferredVersion": {"groupVersion": group_version(), "version": VERSION},
    })
}

/// `/apis/packages.operators.coreos.com`.
pub fn api_group() -> Value {
    let mut group = api_group_body();
    if let Some(object) = group.as_object_mut() {
        object.insert("kind".into(), "APIGroup".into());
        object.insert("apiVersion".into(), "v1".into());
    }
    group
}

/// `/apis/packages.operators.coreos.com/v1`: packagemanifests (get, list,
/// watch) and packagemanifests/icon (get).
pub fn api_resource_list() -> Value {
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version(),
        "resources": [
            {
                "name": PLURAL,
                "singularName": "packagemanifest",
                "namespaced": true,
                "kind": "PackageManifest",
                "verbs": ["get", "list", "watch"],
            },
            {
                "name": format!("{PLURAL}/{ICON_SUBRESOURCE}"),
                "singularName": "",
                "namespaced": true,
                "kind": "PackageManifest",
                "verbs": ["get"],
            },
        ],
    })
}

/// Prefix of our OpenAPI definition names, so that they never collide with
/// the API server's own definitions when the aggregator merges specs.
pub const DEFINITION_PREFIX: &str = "com.github.operator-framework.operator-lifecycle-manager.pkg.package-server.apis.operators.v1.";

fn definitions(settings: SchemaSettings, ref_prefix: &str) -> Map<String, Value> {
    let mut generator = SchemaGenerator::new(settings);
    generator.subschema_for::<PackageManifest>();
    generator.subschema_for::<PackageManifestList>();
    let defs = generator.take_definitions(true);
    // Rename every definition and rewrite the references to it.
    let mut text = Value::Object(defs).to_string();
    let old_ref = format!("\"{ref_prefix}");
    let new_ref = format!("\"{ref_prefix}{DEFINITION_PREFIX}");
    text = text.replace(&old_ref, &new_ref);
    let Ok(Value::Object(renamed)) = serde_json::from_str::<Value>(&text) else {
        return Map::new();
    };
    let mut out = Map::new();
    for (name, mut schema) in renamed {
        let gvk = match name.as_str() {
            "PackageManifest" => Some("PackageManifest"),
            "PackageManifestList" => Some("PackageManifestList"),
            _ => None,
        };
        if let (Some(kind), Some(object)) = (gvk, schema.as_object_mut()) {
            object.insert(
                "x-kubernetes-group-version-kind".into(),
                json!([{"group": GROUP, "version": VERSION, "kind": kind}]),
            );
        }
        out.insert(format!("{DEFINITION_PREFIX}{name}"), schema);
    }
    out
}

fn operation(id: &str, description: &str, response_ref: &str, kind: &str) -> Value {
    json!({
        "description": description,
        "operationId": id,
        "produces": ["application/json", "application/yaml"],
        "schemes": ["https"],
        "tags": ["packagesOperatorsCoreosComV1"],
        "responses": {
            "200": {"description": "OK", "schema": {"$ref": response_ref}},
            "401": {"description": "Unauthorized"},
        },
        "x-kubernetes-action": if id.starts_with("list") { "list" } else { "get" },
        "x-kubernetes-group-version-kind": {"group": GROUP, "version": VERSION, "kind": kind},
    })
}

/// Rewrites JSON Schema into the subset Swagger 2.0 accepts: nullable
/// `anyOf`/`oneOf` alternatives become the non-null alternative, type arrays
/// their non-null type, and keywords Swagger lacks are dropped. One invalid
/// keyword makes the API server refuse every aggregated spec, which breaks
/// `kubectl apply` validation cluster-wide.
pub fn swagger2_sanitize(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for key in ["anyOf", "oneOf"] {
                if let Some(Value::Array(alternatives)) = map.remove(key) {
                    let mut kept: Vec<Value> = alternatives
                        .into_iter()
                        .filter(|alt| alt.get("type") != Some(&Value::String("null".into())))
                        .collect();
                    if kept.len() == 1
                        && let Some(Value::Object(only)) = kept.pop()
                    {
                        for (k, v) in only {
                            map.entry(k).or_insert(v);
                        }
                    }
                    // Several non-null alternatives: leave the field untyped.
                }
            }
            if let Some(Value::Array(types)) = map.get("type") {
                let first = types.iter().find(|t| t.as_str() != Some("null")).cloned();
                match first {
                    Some(t) => {
                        map.insert("type".into(), t);
                    }
                    None => {
                        map.remove("type");
                    }
                }
            }
            for key in [
                "$schema",
                "const",
                "examples",
                "nullable",
                "unevaluatedProperties",
                "$defs",
                "prefixItems",
                "if",
                "then",
                "else",
                "not",
            ] {
                map.remove(key);
            }
            if map.contains_key("$ref") {
                map.retain(|k, _| k == "$ref");
            }
            for v in map.values_mut() {
                swagger2_sanitize(v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(swagger2_sanitize),
        _ => {}
    }
}

/// `/openapi/v2`: a Swagger 2.0 document of our paths and types.
pub fn openapi_v2() -> Value {
    let mut defs = Value::Object(definitions(SchemaSettings::draft07(), "#/definitions/"));
    swagger2_sanitize(&mut defs);
    let item = format!("#/definitions/{DEFINITION_PREFIX}PackageManifest");
    let list = format!("#/definitions/{DEFINITION_PREFIX}PackageManifestList");
    let base = format!("/apis/{GROUP}/{VERSION}");
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": VERSION},
        "paths": {
            format!("{base}/{PLURAL}"): {"get": operation(
                "listPackagesOperatorsCoreosComV1PackageManifestForAllNamespaces",
                "list objects of kind PackageManifest", &list, "PackageManifest")},
            format!("{base}/namespaces/{{namespace}}/{PLURAL}"): {"get": operation(
                "listPackagesOperatorsCoreosComV1NamespacedPackageManifest",
                "list objects of kind PackageManifest", &list, "PackageManifest")},
            format!("{base}/namespaces/{{namespace}}/{PLURAL}/{{name}}"): {"get": operation(
                "readPackagesOperatorsCoreosComV1NamespacedPackageManifest",
                "read the specified PackageManifest", &item, "PackageManifest")},
        },
        "definitions": defs,
    })
}

/// `/openapi/v3/apis/packages.operators.coreos.com/v1`: an OpenAPI 3.0
/// document of our paths and types.
pub fn openapi_v3_group() -> Value {
    let defs = definitions(SchemaSettings::openapi3(), "#/components/schemas/");
    let item = format!("#/components/schemas/{DEFINITION_PREFIX}PackageManifest");
    let list = format!("#/components/schemas/{DEFINITION_PREFIX}PackageManifestList");
    let base = format!("/apis/{GROUP}/{VERSION}");
    let op = |id: &str, schema: &str| {
        json!({"get": {
            "operationId": id,
            "responses": {"200": {"description": "OK", "content": {
                "application/json": {"schema": {"$ref": schema}}}}},
        }})
    };
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": VERSION},
        "paths": {
            format!("{base}/{PLURAL}"): op("listPackagesOperatorsCoreosComV1PackageManifestForAllNamespaces", &list),
            format!("{base}/namespaces/{{namespace}}/{PLURAL}"): op("listPackagesOperatorsCoreosComV1NamespacedPackageManifest", &list),
            format!("{base}/namespaces/{{namespace}}/{PLURAL}/{{name}}"): op("readPackagesOperatorsCoreosComV1NamespacedPackageManifest", &item),
        },
        "components": {"schemas": defs},
    })
}

/// `/openapi/v3`: the index pointing at the group document, with a hash
/// that changes when the document does.
pub fn openapi_v3_index(group_document: &[u8]) -> Value {
    let hash: String = Sha256::digest(group_document)
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect();
    json!({"paths": {
        format!("apis/{GROUP}/{VERSION}"): {
            "serverRelativeURL": format!("/openapi/v3/apis/{GROUP}/{VERSION}?hash={hash}"),
        },
    }})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (k, v) in map {
                    if k == "$ref" {
                        out.extend(v.as_str().map(str::to_owned));
                    }
                    refs(v, out);
                }
            }
            Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }

    #[test]
    fn every_reference_resolves() {
        for (doc, prefix, defs) in [
            (openapi_v2(), "#/definitions/", "/definitions"),
            (
                openapi_v3_group(),
                "#/components/schemas/",
                "/components/schemas",
            ),
        ] {
            let mut found = Vec::new();
            refs(&doc, &mut found);
            assert!(!found.is_empty());
            for r in found {
                let name = r.strip_prefix(prefix).unwrap_or_else(|| panic!("{r}"));
                assert!(
                    doc.pointer(defs).and_then(|d| d.get(name)).is_some(),
                    "dangling {r}"
                );
                assert!(name.starts_with(DEFINITION_PREFIX));
            }
        }
    }

    fn keys(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (k, v) in map {
                    out.push(k.clone());
                    if k == "type" && v.is_array() {
                        out.push("type-array".into());
                    }
                    keys(v, out);
                }
            }
            Value::Array(items) => items.iter().for_each(|v| keys(v, out)),
            _ => {}
        }
    }

    #[test]
    fn openapi_v2_uses_only_swagger_keywords() {
        let mut found = Vec::new();
        keys(&openapi_v2()["definitions"], &mut found);
        for banned in [
            "anyOf",
            "oneOf",
            "const",
            "$schema",
            "nullable",
            "type-array",
        ] {
            assert!(
                !found.iter().any(|k| k == banned),
                "{banned} in the swagger 2.0 document"
            );
        }
        let mut nullable =
            json!({"anyOf": [{"$ref": "#/definitions/X"}, {"type": "null"}], "description": "d"});
        swagger2_sanitize(&mut nullable);
        assert_eq!(nullable, json!({"$ref": "#/definitions/X"}));
        let mut arr = json!({"type": ["string", "null"]});
        swagger2_sanitize(&mut arr);
        assert_eq!(arr, json!({"type": "string"}));
    }

    #[test]
    fn discovery_names_upstream_resources() {
        let list = api_resource_list();
        assert_eq!(list["groupVersion"], "packages.operators.coreos.com/v1");
        assert_eq!(list["resources"][0]["name"], "packagemanifests");
        assert_eq!(list["resources"][0]["kind"], "PackageManifest");
        assert_eq!(list["resources"][1]["name"], "packagemanifests/icon");
        assert_eq!(api_group()["kind"], "APIGroup");
        assert_eq!(api_group_list()["groups"][0]["name"], GROUP);
        let v2 = openapi_v2();
        let gvk = &v2["definitions"][format!("{DEFINITION_PREFIX}PackageManifest")]["x-kubernetes-group-version-kind"];
        assert_eq!(gvk[0]["kind"], "PackageManifest");
    }
}
