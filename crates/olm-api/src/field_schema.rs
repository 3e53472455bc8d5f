//! Schema fragments for fields whose derived schema would differ from upstream's
//! CRDs (Go `int` fields, metav1 Condition validation, required fields that we
//! still read leniently).
//!
//! Reading leniently matters: one object missing a required field must not make
//! a whole list or watch fail to decode and wedge a controller. So a field that
//! upstream's schema requires is `#[serde(default)]` in Rust where its type has a
//! natural empty value, and [`require`] puts it back into the schema's `required`.

use schemars::{Schema, SchemaGenerator, json_schema};

/// A Go `int` field: an integer with no `format`, as controller-gen writes it.
pub(crate) fn go_int(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "integer" })
}

/// Marks `fields` as required in an object schema (sorted, as controller-gen
/// writes them). The `default` schemars derives from `#[serde(default)]` is
/// removed from those fields: it exists only for lenient reading, and a schema
/// default would make the API server fill in a field upstream requires.
pub(crate) fn require(schema: &mut Schema, fields: &[&str]) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    if let Some(properties) = object
        .get_mut("properties")
        .and_then(serde_json::Value::as_object_mut)
    {
        for field in fields {
            if let Some(property) = properties
                .get_mut(*field)
                .and_then(serde_json::Value::as_object_mut)
            {
                property.remove("default");
            }
        }
    }
    let required = object
        .entry("required")
        .or_insert_with(|| serde_json::Value::Array(Vec::new()));
    if let Some(list) = required.as_array_mut() {
        for field in fields {
            if !list.iter().any(|v| v == field) {
                list.push(serde_json::Value::from(*field));
            }
        }
        list.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
    }
}

/// Regular expression upstream's metav1.Condition schema puts on `type`.
pub(crate) const CONDITION_TYPE_PATTERN: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$";

/// Regular expression upstream's metav1.Condition schema puts on `reason`.
pub(crate) const CONDITION_REASON_PATTERN: &str = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$";

/// The schema of a Kubernetes `metav1.Condition` with the validation
/// controller-gen derives from its Go markers (k8s-openapi's schema has none).
///
/// `status` carries the `True`/`False`/`Unknown` enum here; the CRD pipeline
/// removes every enum below `.status` (see `crd::schema`), so it stays only
/// where upstream has it on spec fields.
pub(crate) fn metav1_condition(with_transition_time: bool) -> Schema {
    let mut schema = json_schema!({
        "description": "A condition describes one aspect of the current state of an object.",
        "type": "object",
        "properties": {
            "lastTransitionTime": {
                "description": "When the condition last changed from one status to another.",
                "type": "string",
                "format": "date-time",
            },
            "message": {
                "description": "A human-readable explanation of the condition; may be empty.",
                "type": "string",
                "maxLength": 32768,
            },
            "observedGeneration": {
                "description": "The metadata.generation of the object this condition was computed from.",
                "type": "integer",
                "format": "int64",
                "minimum": 0,
            },
            "reason": {
                "description": "A CamelCase, machine-readable reason for the condition's last transition.",
                "type": "string",
                "maxLength": 1024,
                "minLength": 1,
                "pattern": CONDITION_REASON_PATTERN,
            },
            "status": {
                "description": "Status of the condition: True, False or Unknown.",
                "type": "string",
                "enum": ["True", "False", "Unknown"],
            },
            "type": {
                "description": "Type of the condition, in CamelCase or foo.example.com/CamelCase.",
                "type": "string",
                "maxLength": 316,
                "pattern": CONDITION_TYPE_PATTERN,
            },
        },
        "required": ["message", "reason", "status", "type"],
    });
    if with_transition_time {
        require(&mut schema, &["lastTransitionTime"]);
    }
    schema
}

/// [`metav1_condition`] with every upstream-required field, for
/// `Vec<metav1::Condition>` fields: `#[schemars(schema_with = "...")]`.
pub(crate) fn metav1_conditions(_: &mut SchemaGenerator) -> Schema {
    let item = metav1_condition(true);
    json_schema!({ "type": "array", "items": item })
}

/// Like [`metav1_conditions`], plus `x-kubernetes-list-type: map` keyed by `type`
/// (CatalogSource status conditions carry these markers upstream).
pub(crate) fn metav1_conditions_map(generator: &mut SchemaGenerator) -> Schema {
    let mut schema = metav1_conditions(generator);
    if let Some(object) = schema.as_object_mut() {
        object.insert(
            "x-kubernetes-list-map-keys".into(),
            serde_json::json!(["type"]),
        );
        object.insert("x-kubernetes-list-type".into(), "map".into());
    }
    schema
}

/// [`metav1_condition`] without `lastTransitionTime` in `required`, for
/// OperatorCondition `spec.overrides` (an administrator writes those by hand).
pub(crate) fn metav1_override_conditions(_: &mut SchemaGenerator) -> Schema {
    let item = metav1_condition(false);
    json_schema!({ "type": "array", "items": item })
}
