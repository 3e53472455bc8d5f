//! Turns the JSON Schema that schemars derives from our types into a
//! structural OpenAPI v3 schema a kube-apiserver accepts, shaped like
//! controller-gen's output for upstream's Go types.
//!
//! schemars is asked to keep every type as a named definition; this module
//! then inlines the definitions itself. That way Kubernetes core types can be
//! recognised by name and given the list/map topology markers, scalar defaults
//! and quantity patterns that their Go markers give them (k8s-openapi's
//! schemas carry none of these; see [`super::k8s_markers`]).
//!
//! Rules applied to every node:
//! - `Option<T>` (`anyOf [T, null]`, `type: [T, "null"]`) becomes plain `T`;
//!   optional fields are simply absent, as upstream, so no `nullable`.
//! - documented unit enums (`oneOf` of `const`) become `type: string` + `enum`.
//! - `additionalProperties: true` / untyped `true` schemas become
//!   `x-kubernetes-preserve-unknown-fields: true`; `uniqueItems` is dropped.
//! - any keyword the API server does not know is an error, never dropped
//!   silently.
//! - no `enum` anywhere under `.status` (ARCHITECTURE rule 4).

use std::collections::BTreeSet;

use schemars::{JsonSchema, generate::SchemaSettings};
use serde_json::{Map, Value, json};

use super::{CrdError, k8s_markers};

/// Keywords a CRD's JSONSchemaProps can carry (apiextensions.k8s.io/v1).
const ALLOWED_KEYWORDS: &[&str] = &[
    "description",
    "type",
    "format",
    "title",
    "default",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "multipleOf",
    "enum",
    "maxProperties",
    "minProperties",
    "required",
    "items",
    "allOf",
    "oneOf",
    "anyOf",
    "not",
    "properties",
    "additionalProperties",
    "nullable",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-list-type",
    "x-kubernetes-map-type",
    "x-kubernetes-validations",
];

/// Keywords schemars may emit that carry nothing a CRD needs.
const DROPPED_KEYWORDS: &[&str] = &[
    "$schema",
    "title",
    "$defs",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "uniqueItems",
];

/// How the root object of one CRD version must look, beyond what the types say.
#[derive(Clone, Debug, Default)]
pub(crate) struct RootShape {
    /// Upstream's root `required` list (usually `metadata` and maybe `spec`).
    pub(crate) required: &'static [&'static str],
    /// A `default` for the root `spec` property, if upstream has one.
    pub(crate) spec_default: Option<Value>,
    /// Paths (`.a.b[].c`) of embedded objects whose unknown fields the API
    /// server must keep, as upstream marks them.
    pub(crate) preserve_unknown_fields: &'static [&'static str],
}

/// The structural `openAPIV3Schema` of the custom resource type `K`.
pub(crate) fn structural_schema<K: JsonSchema>(shape: &RootShape) -> Result<Value, CrdError> {
    let settings = SchemaSettings::draft2020_12().with(|s| {
        s.meta_schema = None;
        s.inline_subschemas = false;
    });
    let generator = settings.into_generator();
    let root = generator.into_root_schema_for::<K>().to_value();
    let Value::Object(mut root) = root else {
        return Err(CrdError::Schema("root schema is not an object".into()));
    };
    let defs = match root.remove("$defs") {
        Some(Value::Object(defs)) => defs,
        _ => Map::new(),
    };
    let mut inliner = Inliner {
        defs: &defs,
        stack: Vec::new(),
    };
    let mut schema = inliner.node(&Value::Object(root), "")?;
    shape_root(&mut schema, shape)?;
    for path in shape.preserve_unknown_fields {
        let node = node_at(&mut schema, path)
            .ok_or_else(|| CrdError::Schema(format!("{path}: no such schema path")))?;
        node.insert("x-kubernetes-preserve-unknown-fields".into(), true.into());
    }
    strip_status_enums(&mut schema);
    Ok(schema)
}

/// The schema object at `path`, written as in error messages: `.a.b[].c`,
/// `{}` for map values.
fn node_at<'a>(schema: &'a mut Value, path: &str) -> Option<&'a mut Map<String, Value>> {
    let mut node = schema;
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("[]") {
            node = node.get_mut("items")?;
            rest = after;
        } else if let Some(after) = rest.strip_prefix("{}") {
            node = node.get_mut("additionalProperties")?;
            rest = after;
        } else {
            let after = rest.strip_prefix('.')?;
            let end = after.find(['.', '[', '{']).unwrap_or(after.len());
            node = node.get_mut("properties")?.get_mut(&after[..end])?;
            rest = &after[end..];
        }
    }
    node.as_object_mut()
}

struct Inliner<'a> {
    defs: &'a Map<String, Value>,
    stack: Vec<String>,
}

impl Inliner<'_> {
    /// Normalises one schema node found at `path` (used in error messages). A
    /// node that says nothing about its type (`serde_json::Value`, perhaps with
    /// a description) accepts anything, so it keeps unknown fields.
    fn node(&mut self, node: &Value, path: &str) -> Result<Value, CrdError> {
        let mut out = self.keywords(node, path)?;
        if let Value::Object(object) = &mut out {
            let typed = [
                "type",
                "x-kubernetes-int-or-string",
                "x-kubernetes-preserve-unknown-fields",
                "anyOf",
                "oneOf",
                "allOf",
            ]
            .iter()
            .any(|k| object.contains_key(*k));
            if !typed {
                object.insert("x-kubernetes-preserve-unknown-fields".into(), true.into());
            }
        }
        Ok(out)
    }

    /// Normalises the keywords of one node (also used for the siblings of a
    /// `$ref`, which only add to the referenced schema).
    fn keywords(&mut self, node: &Value, path: &str) -> Result<Value, CrdError> {
        let object = match node {
            Value::Bool(true) => {
                return Ok(json!({ "x-kubernetes-preserve-unknown-fields": true }));
            }
            Value::Object(object) => object,
            other => {
                return Err(CrdError::Schema(format!(
                    "{path}: unsupported schema {other}"
                )));
            }
        };

        // A reference: inline the definition, then let the siblings (usually a
        // field's own description) override it.
        if let Some(reference) = object.get("$ref").and_then(Value::as_str) {
            let mut base = self.definition(reference, path)?;
            let mut siblings = object.clone();
            siblings.remove("$ref");
            let siblings = self.keywords(&Value::Object(siblings), path)?;
            merge_into(&mut base, siblings);
            return Ok(base);
        }

        // `Option<T>`: `anyOf: [T, {type: null}]` (siblings describe the field).
        for keyword in ["anyOf", "oneOf"] {
            if let Some(Value::Array(branches)) = object.get(keyword) {
                let non_null: Vec<&Value> =
                    branches.iter().filter(|b| !is_null_schema(b)).collect();
                if non_null.len() + 1 == branches.len() && non_null.len() == 1 {
                    let mut base = self.node(non_null[0], path)?;
                    let mut siblings = object.clone();
                    siblings.remove(keyword);
                    let siblings = self.keywords(&Value::Object(siblings), path)?;
                    merge_into(&mut base, siblings);
                    return Ok(base);
                }
            }
        }

        let mut out = Map::new();
        for (key, value) in object {
            match key.as_str() {
                k if DROPPED_KEYWORDS.contains(&k) => {}
                "type" => {
                    if let Some(t) = non_null_type(value) {
                        out.insert("type".into(), Value::String(t));
                    }
                }
                "const" => {
                    if !value.is_null() {
                        out.insert("enum".into(), json!([value]));
                    }
                }
                "enum" => {
                    let values: Vec<Value> = value
                        .as_array()
                        .map(|a| a.iter().filter(|v| !v.is_null()).cloned().collect())
                        .unwrap_or_default();
                    out.insert("enum".into(), Value::Array(values));
                }
                "oneOf" if is_const_alternatives(value) => {
                    let values: Vec<Value> = value
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter(|b| !is_null_schema(b))
                        .flat_map(branch_values)
                        .collect();
                    out.insert("type".into(), "string".into());
                    out.insert("enum".into(), Value::Array(values));
                }
                "properties" => {
                    let mut properties = Map::new();
                    let mut names: Vec<&String> = value
                        .as_object()
                        .into_iter()
                        .flat_map(|m| m.keys())
                        .collect();
                    names.sort();
                    for name in names {
                        let child = &value[name.as_str()];
                        properties
                            .insert(name.clone(), self.node(child, &format!("{path}.{name}"))?);
                    }
                    out.insert("properties".into(), Value::Object(properties));
                }
                "items" => {
                    out.insert("items".into(), self.node(value, &format!("{path}[]"))?);
                }
                "additionalProperties" => match value {
                    Value::Bool(true) => {
                        out.insert("x-kubernetes-preserve-unknown-fields".into(), true.into());
                    }
                    Value::Bool(false) => {}
                    other => {
                        out.insert(
                            "additionalProperties".into(),
                            self.node(other, &format!("{path}{{}}"))?,
                        );
                    }
                },
                "anyOf" | "oneOf" | "allOf" => {
                    let mut branches = Vec::new();
                    for branch in value.as_array().into_iter().flatten() {
                        if !is_null_schema(branch) {
                            branches.push(self.node(branch, path)?);
                        }
                    }
                    out.insert(key.clone(), Value::Array(branches));
                }
                k if ALLOWED_KEYWORDS.contains(&k) => {
                    out.insert(key.clone(), value.clone());
                }
                other => {
                    return Err(CrdError::Schema(format!(
                        "{path}: keyword {other:?} is not allowed in a CRD schema"
                    )));
                }
            }
        }
        Ok(Value::Object(out))
    }

    /// Inlines the definition `reference` (`#/$defs/<name>`), with the markers
    /// Kubernetes gives that type applied.
    fn definition(&mut self, reference: &str, path: &str) -> Result<Value, CrdError> {
        let name = reference.rsplit('/').next().unwrap_or(reference).to_owned();
        // `#` is the root type referring to itself.
        if reference == "#" || self.stack.contains(&name) {
            return Err(CrdError::Schema(format!(
                "{path}: recursive type {name} cannot be expressed in a structural schema"
            )));
        }
        if let Some(replacement) = k8s_markers::replacement(&name) {
            return Ok(replacement);
        }
        let definition = self
            .defs
            .get(&name)
            .ok_or_else(|| CrdError::Schema(format!("{path}: missing definition {name}")))?;
        self.stack.push(name.clone());
        let result = self.node(definition, path);
        self.stack.pop();
        let mut schema = result?;
        k8s_markers::apply(&name, &mut schema);
        Ok(schema)
    }
}

/// Overlays `top` onto `base` (keys of `top` win, `properties` are merged).
fn merge_into(base: &mut Value, top: Value) {
    let (Value::Object(base), Value::Object(top)) = (base, top) else {
        return;
    };
    for (key, value) in top {
        match (key.as_str(), base.get_mut(&key), value) {
            ("properties", Some(Value::Object(existing)), Value::Object(more)) => {
                existing.extend(more);
            }
            ("required", Some(Value::Array(existing)), Value::Array(more)) => {
                for name in more {
                    if !existing.contains(&name) {
                        existing.push(name);
                    }
                }
            }
            (_, _, value) => {
                base.insert(key, value);
            }
        }
    }
}

fn is_null_schema(value: &Value) -> bool {
    match value.get("type") {
        Some(Value::String(t)) => t == "null",
        _ => {
            value.get("const").is_some_and(Value::is_null)
                || value.get("enum") == Some(&json!([null]))
        }
    }
}

fn non_null_type(value: &Value) -> Option<String> {
    match value {
        Value::String(t) if t != "null" => Some(t.clone()),
        Value::Array(types) => {
            let rest: Vec<&str> = types
                .iter()
                .filter_map(Value::as_str)
                .filter(|t| *t != "null")
                .collect();
            match rest.as_slice() {
                [single] => Some((*single).to_owned()),
                _ => None,
            }
        }
        _ => None,
    }
}

/// Whether a `oneOf` only lists string constants (a documented unit enum).
fn is_const_alternatives(value: &Value) -> bool {
    value.as_array().is_some_and(|branches| {
        branches
            .iter()
            .filter(|b| !is_null_schema(b))
            .all(|b| branch_values(b).iter().all(Value::is_string) && !branch_values(b).is_empty())
    })
}

fn branch_values(branch: &Value) -> Vec<Value> {
    if let Some(c) = branch.get("const") {
        return vec![c.clone()];
    }
    branch
        .get("enum")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// Adds what kube-derive leaves out of the root object (`apiVersion`, `kind`,
/// `metadata`) and sets upstream's root `required` list and `spec` default.
fn shape_root(schema: &mut Value, shape: &RootShape) -> Result<(), CrdError> {
    let root = schema
        .as_object_mut()
        .ok_or_else(|| CrdError::Schema("root schema is not an object".into()))?;
    root.insert("type".into(), "object".into());
    let properties = root
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or_else(|| CrdError::Schema("root properties is not an object".into()))?;
    properties.insert(
        "apiVersion".into(),
        json!({
            "description": "The versioned schema of this representation of an object; see https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources",
            "type": "string",
        }),
    );
    properties.insert(
        "kind".into(),
        json!({
            "description": "The REST resource this object represents, in CamelCase; see https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
            "type": "string",
        }),
    );
    properties.insert("metadata".into(), json!({ "type": "object" }));
    if let Some(default) = &shape.spec_default
        && let Some(spec) = properties.get_mut("spec").and_then(Value::as_object_mut)
    {
        spec.insert("default".into(), default.clone());
    }
    let mut sorted: Vec<(String, Value)> = std::mem::take(properties).into_iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    properties.extend(sorted);
    if shape.required.is_empty() {
        root.remove("required");
    } else {
        root.insert("required".into(), json!(shape.required));
    }
    Ok(())
}

/// Removes every `enum` below the root `status` property: status values are
/// open sets, and an enum there would make an older CRD reject a newer
/// controller's status writes after a rollback.
fn strip_status_enums(schema: &mut Value) {
    fn strip(node: &mut Value) {
        match node {
            Value::Object(object) => {
                object.remove("enum");
                for value in object.values_mut() {
                    strip(value);
                }
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    if let Some(status) = schema.pointer_mut("/properties/status") {
        strip(status);
    }
}

/// Every reason the schema below `node` would not be accepted as a structural
/// schema by a kube-apiserver (empty when it is fine). Used by tests and by
/// [`super::try_all`] as a last check.
pub(crate) fn structural_problems(node: &Value, path: &str, problems: &mut Vec<String>) {
    let Some(object) = node.as_object() else {
        problems.push(format!("{path}: schema is not an object"));
        return;
    };
    let int_or_string = object.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    let preserve = object.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    match object.get("type").and_then(Value::as_str) {
        Some("object" | "array" | "string" | "integer" | "number" | "boolean") => {}
        Some(other) => problems.push(format!("{path}: unknown type {other:?}")),
        None if int_or_string || preserve => {}
        None => problems.push(format!("{path}: missing type")),
    }
    if object.contains_key("nullable") && !object.contains_key("type") {
        problems.push(format!("{path}: nullable without type"));
    }
    if object.contains_key("properties") && object.contains_key("additionalProperties") {
        problems.push(format!("{path}: both properties and additionalProperties"));
    }
    if object.get("uniqueItems") == Some(&Value::Bool(true)) {
        problems.push(format!("{path}: uniqueItems is forbidden"));
    }
    for keyword in ["anyOf", "oneOf", "allOf"] {
        if let Some(branches) = object.get(keyword) {
            let int_or_string_branches = keyword == "anyOf"
                && int_or_string
                && branches == &json!([{ "type": "integer" }, { "type": "string" }]);
            if !int_or_string_branches {
                problems.push(format!("{path}: {keyword} is not allowed here"));
            }
        }
    }
    for key in object.keys() {
        if !ALLOWED_KEYWORDS.contains(&key.as_str()) {
            problems.push(format!("{path}: unknown keyword {key:?}"));
        }
    }
    if object.get("type").and_then(Value::as_str) == Some("array") && !object.contains_key("items")
    {
        problems.push(format!("{path}: array without items"));
    }
    if let Some(keys) = object
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
    {
        let required: BTreeSet<&str> = object
            .get("items")
            .and_then(|i| i.get("required"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        for key in keys.iter().filter_map(Value::as_str) {
            let has_default = object
                .get("items")
                .and_then(|i| i.pointer(&format!("/properties/{key}/default")))
                .is_some();
            if !required.contains(key) && !has_default {
                problems.push(format!(
                    "{path}: list-map key {key:?} is neither required nor defaulted"
                ));
            }
        }
    }
    if let Some(properties) = object.get("properties").and_then(Value::as_object) {
        for (name, child) in properties {
            structural_problems(child, &format!("{path}.{name}"), problems);
        }
        if let Some(required) = object.get("required").and_then(Value::as_array) {
            for name in required.iter().filter_map(Value::as_str) {
                if !properties.contains_key(name) {
                    problems.push(format!("{path}: required {name:?} is not a property"));
                }
            }
        }
    }
    if let Some(items) = object.get("items") {
        structural_problems(items, &format!("{path}[]"), problems);
    }
    if let Some(additional) = object.get("additionalProperties") {
        structural_problems(additional, &format!("{path}{{}}"), problems);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Serialize};

    use super::*;

    /// A documented unit enum: schemars writes it as `oneOf` of `const`s.
    #[derive(Serialize, Deserialize, JsonSchema)]
    enum Shade {
        /// Light.
        Pale,
        /// Dark.
        Deep,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    struct Sample {
        /// An optional string.
        maybe_text: Option<String>,
        /// An optional enum.
        shade: Option<Shade>,
        /// Anything at all.
        anything: serde_json::Value,
        /// A string map.
        labels: BTreeMap<String, String>,
        /// Status-like part.
        status: Option<SampleStatus>,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    struct SampleStatus {
        /// An enum under status.
        shade: Shade,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    struct Loop {
        /// Recursion cannot be expressed in a structural schema.
        next: Option<Box<Loop>>,
    }

    fn sample() -> Value {
        structural_schema::<Sample>(&RootShape::default()).expect("sample schema")
    }

    #[test]
    fn options_become_plain_optional_fields() {
        let schema = sample();
        assert_eq!(
            schema.pointer("/properties/maybeText"),
            Some(&json!({ "description": "An optional string.", "type": "string" }))
        );
        assert!(!schema.to_string().contains("nullable"));
        assert!(!schema.to_string().contains("\"null\""));
    }

    #[test]
    fn documented_enums_become_string_enums() {
        let shade = sample()
            .pointer("/properties/shade")
            .cloned()
            .expect("shade");
        assert_eq!(shade["type"], "string");
        assert_eq!(shade["enum"], json!(["Pale", "Deep"]));
    }

    #[test]
    fn untyped_values_preserve_unknown_fields() {
        let schema = sample();
        assert_eq!(
            schema.pointer("/properties/anything/x-kubernetes-preserve-unknown-fields"),
            Some(&Value::Bool(true))
        );
        assert_eq!(
            schema.pointer("/properties/labels/additionalProperties/type"),
            Some(&json!("string"))
        );
    }

    #[test]
    fn enums_are_removed_under_status_only() {
        let schema = sample();
        assert!(
            schema
                .pointer("/properties/status/properties/shade/enum")
                .is_none()
        );
        assert!(schema.pointer("/properties/shade/enum").is_some());
    }

    #[test]
    fn root_gets_type_meta_and_required_list() {
        let schema = structural_schema::<Sample>(&RootShape {
            required: &["metadata"],
            ..RootShape::default()
        })
        .expect("schema");
        assert_eq!(schema["required"], json!(["metadata"]));
        assert_eq!(
            schema.pointer("/properties/metadata"),
            Some(&json!({ "type": "object" }))
        );
        assert_eq!(
            schema.pointer("/properties/kind/type"),
            Some(&json!("string"))
        );
        let mut problems = Vec::new();
        structural_problems(&schema, "", &mut problems);
        assert!(problems.is_empty(), "{problems:?}");
    }

    #[test]
    fn recursive_types_are_rejected() {
        let error = structural_schema::<Loop>(&RootShape::default()).expect_err("recursion");
        assert!(error.to_string().contains("recursive type"), "{error}");
    }

    #[test]
    fn structural_problems_are_found() {
        let mut problems = Vec::new();
        structural_problems(
            &json!({
                "type": "object",
                "properties": {
                    "untyped": { "nullable": true },
                    "list": { "type": "array" },
                    "either": { "type": "string", "anyOf": [{ "type": "string" }] },
                },
                "required": ["missing"],
            }),
            "",
            &mut problems,
        );
        assert_eq!(problems.len(), 5, "{problems:#?}");
    }
}
