//! Converting JSON documents to `google.protobuf.Struct`, as upstream's
//! `structpb.NewStruct` does (every number becomes a double).

use prost_types::{ListValue, Struct, Value, value::Kind};

/// A JSON object as a protobuf `Struct`.
pub(crate) fn to_struct(map: serde_json::Map<String, serde_json::Value>) -> Struct {
    Struct {
        fields: map.into_iter().map(|(k, v)| (k, to_value(v))).collect(),
    }
}

fn to_value(value: serde_json::Value) -> Value {
    let kind = match value {
        serde_json::Value::Null => Kind::NullValue(0),
        serde_json::Value::Bool(b) => Kind::BoolValue(b),
        serde_json::Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(f64::NAN)),
        serde_json::Value::String(s) => Kind::StringValue(s),
        serde_json::Value::Array(items) => Kind::ListValue(ListValue {
            values: items.into_iter().map(to_value).collect(),
        }),
        serde_json::Value::Object(map) => Kind::StructValue(to_struct(map)),
    };
    Value { kind: Some(kind) }
}

/// A protobuf `Struct` as a JSON object (for clients).
pub(crate) fn from_struct(s: Struct) -> serde_json::Map<String, serde_json::Value> {
    s.fields
        .into_iter()
        .map(|(k, v)| (k, from_value(v)))
        .collect()
}

fn from_value(value: Value) -> serde_json::Value {
    match value.kind {
        None | Some(Kind::NullValue(_)) => serde_json::Value::Null,
        Some(Kind::BoolValue(b)) => serde_json::Value::Bool(b),
        Some(Kind::NumberValue(n)) => serde_json::Number::from_f64(n)
            .map_or(serde_json::Value::Null, serde_json::Value::Number),
        Some(Kind::StringValue(s)) => serde_json::Value::String(s),
        Some(Kind::ListValue(l)) => {
            serde_json::Value::Array(l.values.into_iter().map(from_value).collect())
        }
        Some(Kind::StructValue(s)) => serde_json::Value::Object(from_struct(s)),
    }
}
