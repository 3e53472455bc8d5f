//! Validation of custom resources against a CRD version's structural
//! `openAPIV3Schema`, for the safety check before a CRD is updated: every
//! existing custom resource must still be valid under the new schema, or
//! the update would leave objects the API server refuses to write back.
//!
//! The keywords of Kubernetes' structural schemas are checked: `type`,
//! `nullable`, `enum`, `properties`, `required`, `additionalProperties`,
//! `items`, `minItems`/`maxItems`, `uniqueItems`, `minLength`/`maxLength`,
//! `pattern`, `minimum`/`maximum` (and their exclusive forms), `multipleOf`,
//! `minProperties`/`maxProperties`, `allOf`/`anyOf`/`oneOf`/`not`,
//! `x-kubernetes-int-or-string` and `x-kubernetes-preserve-unknown-fields`.
//! Fields the schema does not name are pruned by the API server, not
//! refused, so they are not errors here either. CEL rules
//! (`x-kubernetes-validations`) and formats are not checked.

use serde_json::Value;

/// The most errors reported for one object.
pub const MAX_ERRORS: usize = 10;
/// The deepest nesting walked; deeper objects are reported, not recursed.
pub const MAX_DEPTH: usize = 64;

/// Validates `object` (a whole custom resource) against `schema`; returns
/// the problems found, each naming the field path, at most
/// [`MAX_ERRORS`].
pub fn validate(schema: &Value, object: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    check(schema, object, "", 0, &mut errors);
    errors.truncate(MAX_ERRORS);
    errors
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn field(path: &str) -> &str {
    if path.is_empty() { "<root>" } else { path }
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn number(schema: &Value, key: &str) -> Option<f64> {
    schema.get(key).and_then(Value::as_f64)
}

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool).unwrap_or(false)
}

fn check(schema: &Value, value: &Value, path: &str, depth: usize, errors: &mut Vec<String>) {
    if errors.len() >= MAX_ERRORS {
        return;
    }
    if depth > MAX_DEPTH {
        errors.push(format!(
            "{}: nested deeper than {MAX_DEPTH} levels",
            field(path)
        ));
        return;
    }
    let Value::Object(_) = schema else {
        return;
    };
    if value.is_null() {
        if flag(schema, "nullable") || schema.get("type").is_none() {
            return;
        }
        errors.push(format!(
            "{}: Invalid value: \"null\": {} in body must be of type {}",
            field(path),
            field(path),
            schema["type"].as_str().unwrap_or("object")
        ));
        return;
    }
    if flag(schema, "x-kubernetes-int-or-string") {
        if !matches!(type_name(value), "integer" | "string") {
            errors.push(format!(
                "{}: Invalid value: {}: must be an integer or a string",
                field(path),
                value
            ));
            return;
        }
    } else if let Some(expected) = schema.get("type").and_then(Value::as_str) {
        let actual = type_name(value);
        let ok = actual == expected || (expected == "number" && actual == "integer");
        if !ok {
            errors.push(format!(
                "{}: Invalid value: \"{actual}\": {} in body must be of type {expected}: \"{actual}\"",
                field(path),
                field(path)
            ));
            return;
        }
    }
    if let Some(Value::Array(allowed)) = schema.get("enum")
        && !allowed.contains(value)
    {
        let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
        errors.push(format!(
            "{}: Unsupported value: {value}: supported values: {}",
            field(path),
            list.join(", ")
        ));
    }
    match value {
        Value::String(text) => check_string(schema, text, path, errors),
        Value::Number(_) => check_number(schema, value, path, errors),
        Value::Array(items) => check_array(schema, items, path, depth, errors),
        Value::Object(map) => check_object(schema, map, path, depth, errors),
        _ => {}
    }
    check_combinators(schema, value, path, depth, errors);
}

fn check_string(schema: &Value, text: &str, path: &str, errors: &mut Vec<String>) {
    let length = text.chars().count() as f64;
    if let Some(min) = number(schema, "minLength")
        && length < min
    {
        errors.push(format!(
            "{}: Invalid value: {text:?}: should be at least {min} chars long",
            field(path)
        ));
    }
    if let Some(max) = number(schema, "maxLength")
        && length > max
    {
        errors.push(format!(
            "{}: Too long: may not be longer than {max}",
            field(path)
        ));
    }
    if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
        match regex::Regex::new(pattern) {
            Ok(re) if !re.is_match(text) => errors.push(format!(
                "{}: Invalid value: {text:?}: {} in body should match '{pattern}'",
                field(path),
                field(path)
            )),
            Ok(_) => {}
            // An unusable pattern cannot be enforced by us; the API server
            // would have refused the CRD.
            Err(_) => {}
        }
    }
}

fn check_number(schema: &Value, value: &Value, path: &str, errors: &mut Vec<String>) {
    let Some(n) = value.as_f64() else {
        return;
    };
    if let Some(min) = number(schema, "minimum") {
        let exclusive = flag(schema, "exclusiveMinimum");
        if n < min || (exclusive && n <= min) {
            let how = if exclusive {
                "greater than"
            } else {
                "greater than or equal to"
            };
            errors.push(format!(
                "{}: Invalid value: {value}: {} in body should be {how} {min}",
                field(path),
                field(path)
            ));
        }
    }
    if let Some(max) = number(schema, "maximum") {
        let exclusive = flag(schema, "exclusiveMaximum");
        if n > max || (exclusive && n >= max) {
            let how = if exclusive {
                "less than"
            } else {
                "less than or equal to"
            };
            errors.push(format!(
                "{}: Invalid value: {value}: {} in body should be {how} {max}",
                field(path),
                field(path)
            ));
        }
    }
    if let Some(multiple) = number(schema, "multipleOf").filter(|m| *m > 0.0) {
        let ratio = n / multiple;
        if (ratio - ratio.round()).abs() > 1e-9 {
            errors.push(format!(
                "{}: Invalid value: {value}: {} in body should be a multiple of {multiple}",
                field(path),
                field(path)
            ));
        }
    }
}

fn check_array(
    schema: &Value,
    items: &[Value],
    path: &str,
    depth: usize,
    errors: &mut Vec<String>,
) {
    let count = items.len() as f64;
    if let Some(min) = number(schema, "minItems")
        && count < min
    {
        errors.push(format!(
            "{}: Invalid value: {count}: {} in body should have at least {min} items",
            field(path),
            field(path)
        ));
    }
    if let Some(max) = number(schema, "maxItems")
        && count > max
    {
        errors.push(format!(
            "{}: Too many: {count}: must have at most {max} items",
            field(path)
        ));
    }
    if flag(schema, "uniqueItems") {
        for (i, item) in items.iter().enumerate() {
            if items[..i].contains(item) {
                errors.push(format!("{}[{i}]: Duplicate value: {item}", field(path)));
                break;
            }
        }
    }
    if let Some(item_schema) = schema.get("items") {
        for (i, item) in items.iter().enumerate() {
            check(
                item_schema,
                item,
                &format!("{path}[{i}]"),
                depth + 1,
                errors,
            );
        }
    }
}

fn check_object(
    schema: &Value,
    map: &serde_json::Map<String, Value>,
    path: &str,
    depth: usize,
    errors: &mut Vec<String>,
) {
    let count = map.len() as f64;
    if let Some(min) = number(schema, "minProperties")
        && count < min
    {
        errors.push(format!(
            "{}: Invalid value: {count}: {} in body should have at least {min} properties",
            field(path),
            field(path)
        ));
    }
    if let Some(max) = number(schema, "maxProperties")
        && count > max
    {
        errors.push(format!(
            "{}: Too many: {count}: must have at most {max} properties",
            field(path)
        ));
    }
    if let Some(Value::Array(required)) = schema.get("required") {
        for name in required.iter().filter_map(Value::as_str) {
            if !map.contains_key(name) {
                errors.push(format!("{}: Required value", child(path, name)));
            }
        }
    }
    let properties = schema.get("properties").and_then(Value::as_object);
    for (key, item) in map {
        // The root's apiVersion, kind and metadata are the API server's.
        if path.is_empty() && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        match properties.and_then(|p| p.get(key)) {
            Some(property) => check(property, item, &child(path, key), depth + 1, errors),
            None => {
                if let Some(additional) =
                    schema.get("additionalProperties").filter(|a| a.is_object())
                {
                    check(additional, item, &child(path, key), depth + 1, errors);
                }
            }
        }
    }
}

fn check_combinators(
    schema: &Value,
    value: &Value,
    path: &str,
    depth: usize,
    errors: &mut Vec<String>,
) {
    let passes = |s: &Value| {
        let mut inner = Vec::new();
        check(s, value, path, depth + 1, &mut inner);
        inner.is_empty()
    };
    if let Some(Value::Array(all)) = schema.get("allOf") {
        for s in all {
            check(s, value, path, depth + 1, errors);
        }
    }
    if let Some(Value::Array(any)) = schema.get("anyOf")
        && !any.iter().any(passes)
    {
        errors.push(format!(
            "{}: Invalid value: {value}: must validate at least one schema (anyOf)",
            field(path)
        ));
    }
    if let Some(Value::Array(one)) = schema.get("oneOf") {
        let matching = one.iter().filter(|s| passes(s)).count();
        if matching != 1 {
            errors.push(format!("{}: Invalid value: {value}: must validate one and only one schema (oneOf), {matching} matched", field(path)));
        }
    }
    if let Some(not) = schema.get("not")
        && passes(not)
    {
        errors.push(format!(
            "{}: Invalid value: {value}: must not validate the schema (not)",
            field(path)
        ));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["size"],
                    "properties": {
                        "size": {"type": "integer", "minimum": 3, "maximum": 9},
                        "mode": {"type": "string", "enum": ["fast", "safe"]},
                        "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 8},
                        "port": {"x-kubernetes-int-or-string": true},
                        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2, "uniqueItems": true},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "note": {"type": "string", "nullable": true},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "either": {"anyOf": [{"type": "integer"}, {"type": "string", "minLength": 2}]},
                    }
                }
            }
        })
    }

    fn errors_of(spec: Value) -> Vec<String> {
        validate(
            &schema(),
            &json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "n"}, "spec": spec}),
        )
    }

    #[test]
    fn valid_objects_pass() {
        let spec = json!({
            "size": 3, "mode": "safe", "name": "abc", "port": "http", "tags": ["a", "b"],
            "labels": {"k": "v"}, "note": null, "free": {"anything": [1, {"x": true}]},
            "either": 7, "unknown": "pruned, not refused",
        });
        assert_eq!(errors_of(spec), Vec::<String>::new());
    }

    #[test]
    fn each_keyword_is_enforced() {
        let cases = [
            (json!({}), "spec.size: Required value"),
            (json!({"size": 1}), "should be greater than or equal to 3"),
            (json!({"size": 10}), "should be less than or equal to 9"),
            (json!({"size": "3"}), "must be of type integer"),
            (json!({"size": 3, "mode": "slow"}), "Unsupported value"),
            (json!({"size": 3, "name": "ABC"}), "should match '^[a-z]+$'"),
            (
                json!({"size": 3, "name": "abcdefghij"}),
                "may not be longer than 8",
            ),
            (
                json!({"size": 3, "port": 1.5}),
                "must be an integer or a string",
            ),
            (
                json!({"size": 3, "tags": ["a", "b", "c"]}),
                "must have at most 2 items",
            ),
            (json!({"size": 3, "tags": ["a", "a"]}), "Duplicate value"),
            (json!({"size": 3, "tags": [1]}), "spec.tags[0]"),
            (json!({"size": 3, "labels": {"k": 1}}), "spec.labels.k"),
            (json!({"size": 3, "either": "x"}), "anyOf"),
            (json!({"size": 3, "mode": null}), "must be of type string"),
        ];
        for (spec, want) in cases {
            let errors = errors_of(spec.clone());
            assert!(
                errors.iter().any(|e| e.contains(want)),
                "{spec}: want {want:?}, got {errors:?}"
            );
        }
    }

    #[test]
    fn hostile_input_is_bounded() {
        let mut deep = json!("leaf");
        let mut deep_schema = json!({"type": "string"});
        for _ in 0..200 {
            deep = json!({"a": deep});
            deep_schema = json!({"type": "object", "properties": {"a": deep_schema}});
        }
        let errors = validate(&deep_schema, &deep);
        assert!(
            errors.iter().any(|e| e.contains("nested deeper")),
            "{errors:?}"
        );
        let many: Vec<Value> = (0..1000).map(|i| json!(i)).collect();
        let errors = validate(
            &json!({"type": "array", "items": {"type": "string"}}),
            &Value::Array(many),
        );
        assert_eq!(errors.len(), MAX_ERRORS);
    }
}
