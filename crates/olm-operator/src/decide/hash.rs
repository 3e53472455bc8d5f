//! Content hashes written into labels and annotations, so that a changed input
//! is noticed and an unchanged one costs no write.
//!
//! Upstream hashes Go values with `base62(sha224(json))`
//! (`pkg/lib/kubernetes/pkg/util/hash.DeepHashObject`). We keep that shape:
//!
//! - [`sha224_base62`] is exactly upstream's encoding of a SHA-224 digest
//!   (its home is `olm_plan::hash`, shared with the RBAC rules).
//! - [`content_hash`] hashes the *canonical JSON* of a value: the value as
//!   serde writes it (`k8s-openapi` and `olm-api` omit unset fields), with
//!   every object's keys sorted by byte order and no whitespace. Sorting makes
//!   the hash independent of map ordering, so it is stable across runs,
//!   processes and versions of this code that serialize the same fields.
//!
//! Go writes struct fields in declaration order, so for large Kubernetes types
//! (a `DeploymentSpec`) our bytes and therefore our hashes differ from
//! upstream's; the only effect is that Deployments installed by upstream OLM
//! are re-applied once after a switch. Where upstream's hash is part of a
//! lookup contract (`olm.permissions.hash`, RBAC object names)
//! `olm_plan::csv_rbac` reproduces upstream's bytes exactly.

use serde::Serialize;
use serde_json::Value;

use super::Error;

pub use olm_plan::hash::{base62, sha224_base62};

/// The canonical JSON of a value: keys sorted, no whitespace.
pub fn canonical_json<T: Serialize + ?Sized>(
    value: &T,
    what: &'static str,
) -> Result<String, Error> {
    let value = serde_json::to_value(value).map_err(|source| Error::Hash { what, source })?;
    let mut out = String::new();
    write_canonical(&value, &mut out);
    Ok(out)
}

/// `base62(sha224(canonical JSON))` of a value; `what` names it in errors.
pub fn content_hash<T: Serialize + ?Sized>(value: &T, what: &'static str) -> Result<String, Error> {
    canonical_json(value, what).map(|json| sha224_base62(json.as_bytes()))
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (index, (key, item)) in entries.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(item, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;

    #[test]
    fn canonical_json_sorts_keys_at_every_depth() {
        let value = json!({"b": {"z": 1, "a": [{"y": true, "x": null}]}, "a": "é\""});
        assert_eq!(
            canonical_json(&value, "test").expect("serializes"),
            r#"{"a":"é\"","b":{"a":[{"x":null,"y":true}],"z":1}}"#
        );
    }

    #[test]
    fn content_hash_ignores_insertion_order() {
        let mut forward = serde_json::Map::new();
        let mut backward = serde_json::Map::new();
        for key in ["gear", "sprocket", "axle"] {
            forward.insert(key.to_owned(), json!(key.len()));
        }
        for key in ["axle", "sprocket", "gear"] {
            backward.insert(key.to_owned(), json!(key.len()));
        }
        assert_eq!(
            content_hash(&forward, "test").expect("hashes"),
            content_hash(&backward, "test").expect("hashes")
        );
        let tree: BTreeMap<&str, usize> = [("gear", 4), ("sprocket", 8), ("axle", 4)].into();
        assert_eq!(
            content_hash(&tree, "test").expect("hashes"),
            content_hash(&forward, "test").expect("hashes")
        );
    }
}
