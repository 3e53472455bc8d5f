//! The Go types of the CSV parts that `olm.csv.metadata` carries, so the
//! stub CSV upstream synthesizes from that property can be written as Go
//! writes it: upstream decodes the property into `property.CSVMetadata`
//! (operator-framework/api v0.42.0 `v1alpha1` structs) and encodes the CSV
//! again, so fields come out in struct order, `omitempty` fields that are
//! empty are dropped, missing fields without `omitempty` are written as
//! their zero value, unknown fields are dropped, and field names match case
//! insensitively (Go's decoder).

use serde_json::Value;

use olm_catalog::go_json;

/// A Go type, as far as its JSON encoding goes.
pub(crate) enum GoType {
    /// Written as the value is (strings, numbers, `[]string`, raw JSON).
    Any,
    /// A struct: its fields in declaration order.
    Struct(&'static [Field]),
    /// A slice of the element type.
    List(&'static GoType),
}

/// One field of a Go struct.
pub(crate) struct Field {
    name: &'static str,
    omit_empty: bool,
    ty: &'static GoType,
    /// The zero value's JSON, written when the field is missing and not
    /// `omitempty`.
    zero: &'static str,
}

const fn field(name: &'static str, ty: &'static GoType, zero: &'static str) -> Field {
    Field {
        name,
        omit_empty: false,
        ty,
        zero,
    }
}

const fn omit(name: &'static str, ty: &'static GoType) -> Field {
    Field {
        name,
        omit_empty: true,
        ty,
        zero: "",
    }
}

const ANY: &GoType = &GoType::Any;

/// `v1alpha1.APIResourceReference`.
static RESOURCE_REFERENCE: GoType = GoType::Struct(&[
    field("name", ANY, "\"\""),
    field("kind", ANY, "\"\""),
    field("version", ANY, "\"\""),
]);

/// `v1alpha1.SpecDescriptor`, `StatusDescriptor` and `ActionDescriptor`.
static DESCRIPTOR: GoType = GoType::Struct(&[
    field("path", ANY, "\"\""),
    omit("displayName", ANY),
    omit("description", ANY),
    omit("x-descriptors", ANY),
    omit("value", ANY),
]);

/// `v1alpha1.CRDDescription`.
static CRD_DESCRIPTION: GoType = GoType::Struct(&[
    field("name", ANY, "\"\""),
    field("version", ANY, "\"\""),
    field("kind", ANY, "\"\""),
    omit("displayName", ANY),
    omit("description", ANY),
    omit("resources", &GoType::List(&RESOURCE_REFERENCE)),
    omit("statusDescriptors", &GoType::List(&DESCRIPTOR)),
    omit("specDescriptors", &GoType::List(&DESCRIPTOR)),
    omit("actionDescriptors", &GoType::List(&DESCRIPTOR)),
]);

/// `v1alpha1.APIServiceDescription`.
static API_SERVICE_DESCRIPTION: GoType = GoType::Struct(&[
    field("name", ANY, "\"\""),
    field("group", ANY, "\"\""),
    field("version", ANY, "\"\""),
    field("kind", ANY, "\"\""),
    omit("deploymentName", ANY),
    omit("containerPort", ANY),
    omit("displayName", ANY),
    omit("description", ANY),
    omit("resources", &GoType::List(&RESOURCE_REFERENCE)),
    omit("statusDescriptors", &GoType::List(&DESCRIPTOR)),
    omit("specDescriptors", &GoType::List(&DESCRIPTOR)),
    omit("actionDescriptors", &GoType::List(&DESCRIPTOR)),
]);

/// `v1alpha1.CustomResourceDefinitions`.
pub(crate) static CUSTOM_RESOURCE_DEFINITIONS: GoType = GoType::Struct(&[
    omit("owned", &GoType::List(&CRD_DESCRIPTION)),
    omit("required", &GoType::List(&CRD_DESCRIPTION)),
]);

/// `v1alpha1.APIServiceDefinitions`.
pub(crate) static API_SERVICE_DEFINITIONS: GoType = GoType::Struct(&[
    omit("owned", &GoType::List(&API_SERVICE_DESCRIPTION)),
    omit("required", &GoType::List(&API_SERVICE_DESCRIPTION)),
]);

/// `[]metav1.GroupVersionKind`.
pub(crate) static NATIVE_APIS: GoType = GoType::List(&GoType::Struct(&[
    field("group", ANY, "\"\""),
    field("version", ANY, "\"\""),
    field("kind", ANY, "\"\""),
]));

/// `v1alpha1.AppLink`.
pub(crate) static APP_LINK: GoType = GoType::Struct(&[omit("name", ANY), omit("url", ANY)]);

/// `[]v1alpha1.AppLink`.
pub(crate) static APP_LINKS: GoType = GoType::List(&APP_LINK);

/// `[]v1alpha1.Maintainer`.
pub(crate) static MAINTAINERS: GoType =
    GoType::List(&GoType::Struct(&[omit("name", ANY), omit("email", ANY)]));

/// `[]v1alpha1.InstallMode`.
pub(crate) static INSTALL_MODES: GoType = GoType::List(&GoType::Struct(&[
    field("type", ANY, "\"\""),
    field("supported", ANY, "false"),
]));

/// Whether Go's `omitempty` drops this value: `false`, `0`, `""`, and
/// empty or null slices and maps.
fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

/// The value of `name` in `object`: the exact key, else one that matches
/// ignoring case (Go's decoder).
fn lookup<'v>(object: &'v serde_json::Map<String, Value>, name: &str) -> Option<&'v Value> {
    object.get(name).or_else(|| {
        object
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    })
}

/// Writes `value` as Go writes it once decoded into `ty`. A value of
/// another shape than the type's is written as it is.
pub(crate) fn write(out: &mut String, value: &Value, ty: &GoType) {
    match (ty, value) {
        (GoType::Struct(fields), Value::Object(object)) => {
            out.push('{');
            let mut first = true;
            for f in *fields {
                let v = lookup(object, f.name);
                // A struct-typed field is never empty to Go; none here is.
                if f.omit_empty && v.is_none_or(is_empty) {
                    continue;
                }
                if !first {
                    out.push(',');
                }
                first = false;
                go_json::write_string(out, f.name, true);
                out.push(':');
                match v {
                    // A null decodes to the zero value.
                    Some(Value::Null) | None => out.push_str(f.zero),
                    Some(v) => write(out, v, f.ty),
                }
            }
            out.push('}');
        }
        (GoType::List(element), Value::Array(items)) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(out, item, element);
            }
            out.push(']');
        }
        _ => go_json::write_value(out, value, true, go_json::Numbers::Float64),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn written(value: &Value, ty: &GoType) -> String {
        let mut out = String::new();
        write(&mut out, value, ty);
        out
    }

    #[test]
    fn structs_come_out_in_field_order_without_empty_or_unknown_fields() {
        let value = json!({"owned": [{
            "description": "A <widget>",
            "kind": "Widget",
            "displayName": "",
            "resources": [],
            "name": "widgets.example.com",
            "specDescriptors": [{"x-descriptors": ["a"], "path": "size", "value": {"b": 1, "a": 2}}],
            "unknown": true,
        }]});
        assert_eq!(
            written(&value, &CUSTOM_RESOURCE_DEFINITIONS),
            r#"{"owned":[{"name":"widgets.example.com","version":"","kind":"Widget","description":"A \u003cwidget\u003e","specDescriptors":[{"path":"size","x-descriptors":["a"],"value":{"a":2,"b":1}}]}]}"#
        );
    }

    #[test]
    fn names_match_ignoring_case_and_zero_values_fill_missing_fields() {
        let value = json!([{"Type": "OwnNamespace"}, {"type": "AllNamespaces", "supported": true}]);
        assert_eq!(
            written(&value, &INSTALL_MODES),
            r#"[{"type":"OwnNamespace","supported":false},{"type":"AllNamespaces","supported":true}]"#
        );
        assert_eq!(
            written(&json!({"url": "u", "NAME": "n"}), &APP_LINK),
            r#"{"name":"n","url":"u"}"#
        );
        assert_eq!(written(&json!({}), &APP_LINK), "{}");
    }

    #[test]
    fn values_of_another_shape_are_written_as_they_are() {
        assert_eq!(written(&json!("x"), &CUSTOM_RESOURCE_DEFINITIONS), r#""x""#);
        assert_eq!(written(&json!({"a": 1}), &NATIVE_APIS), r#"{"a":1}"#);
    }
}
