//! Go's case-insensitive JSON field matching, as a named normalisation step.
//!
//! Go's `encoding/json` matches an object key to a struct field exactly, or
//! else case-insensitively. Upstream therefore accepts CSVs with
//! `MinKubeVersion` (strimzi's package manifests) or RBAC rules with
//! `apigroups` (oadp-operator 0.2.3), and properties with `PackageName`.
//! serde matches exactly, so before typed decoding we rename such keys to
//! their canonical spelling — but only for fields we know, described by a
//! [`Shape`], so that user data (annotations, labels, CRD schemas, opaque
//! property values) is never touched.
//!
//! A key is renamed only when it differs from a known field in ASCII case and
//! the canonical spelling is not present as well; if both are present the
//! canonical one wins and the variant stays as it is (Go would keep whichever
//! comes last, which is an accident of ordering). Every rename is reported.

use serde_json::{Map, Value};

/// The known fields of a JSON value, for [`canonicalize`].
#[derive(Debug)]
pub enum Shape {
    /// A value whose keys, if any, are not ours to rename.
    Opaque,
    /// An object with these known fields (canonical spelling, shape).
    Object(&'static [(&'static str, &'static Shape)]),
    /// A list whose items all have this shape.
    List(&'static Shape),
    /// An object with arbitrary keys whose values all have this shape.
    MapOf(&'static Shape),
}

/// A key [`canonicalize`] renamed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Renamed {
    /// Where the object is, for example `spec.install.spec.permissions[0].rules[1]`.
    pub path: String,
    /// The key as written.
    pub from: String,
    /// The canonical key.
    pub to: String,
}

impl std::fmt::Display for Renamed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            write!(f, "{:?} read as {:?}", self.from, self.to)
        } else {
            write!(f, "{}.{:?} read as {:?}", self.path, self.from, self.to)
        }
    }
}

/// Renames keys of `value` that match a known field of `shape` only up to
/// ASCII case, recursively, and returns what it renamed.
pub fn canonicalize(value: &mut Value, shape: &Shape) -> Vec<Renamed> {
    let mut renamed = Vec::new();
    walk(value, shape, &mut String::new(), &mut renamed);
    renamed
}

fn walk(value: &mut Value, shape: &Shape, path: &mut String, renamed: &mut Vec<Renamed>) {
    match (shape, value) {
        (Shape::Object(fields), Value::Object(object)) => {
            rename_keys(object, fields, path, renamed);
            for (name, field_shape) in fields.iter() {
                if let Some(child) = object.get_mut(*name) {
                    let len = path.len();
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(name);
                    walk(child, field_shape, path, renamed);
                    path.truncate(len);
                }
            }
        }
        (Shape::List(item), Value::Array(items)) => {
            for (i, child) in items.iter_mut().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                walk(child, item, path, renamed);
                path.truncate(len);
            }
        }
        (Shape::MapOf(item), Value::Object(object)) => {
            for (key, child) in object.iter_mut() {
                let len = path.len();
                path.push_str(&format!("[{key:?}]"));
                walk(child, item, path, renamed);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

fn rename_keys(
    object: &mut Map<String, Value>,
    fields: &[(&'static str, &'static Shape)],
    path: &str,
    renamed: &mut Vec<Renamed>,
) {
    // Most objects are already canonical: look before allocating.
    let needs_work = object.keys().any(|key| {
        !fields.iter().any(|(name, _)| name == key)
            && fields
                .iter()
                .any(|(name, _)| name.eq_ignore_ascii_case(key))
    });
    if !needs_work {
        return;
    }
    let entries = std::mem::take(object);
    let present: Vec<String> = entries.keys().cloned().collect();
    for (key, value) in entries {
        let canonical = fields
            .iter()
            .map(|(name, _)| *name)
            .find(|name| *name != key && name.eq_ignore_ascii_case(&key))
            .filter(|name| !present.iter().any(|p| p == name));
        match canonical {
            Some(name) if !object.contains_key(name) => {
                renamed.push(Renamed {
                    path: path.to_owned(),
                    from: key,
                    to: name.to_owned(),
                });
                object.insert(name.to_owned(), value);
            }
            _ => {
                object.insert(key, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    static RULE: Shape = Shape::Object(&[("apiGroups", &Shape::Opaque), ("verbs", &Shape::Opaque)]);
    static RULES: Shape = Shape::List(&RULE);
    static ROOT: Shape = Shape::Object(&[
        ("minKubeVersion", &Shape::Opaque),
        ("rules", &RULES),
        ("labels", &Shape::Opaque),
    ]);
    static TREE: Shape = Shape::Object(&[("child", &TREE), ("name", &Shape::Opaque)]);

    #[test]
    fn known_fields_are_renamed_and_reported() {
        let mut value = json!({
            "MinKubeVersion": "1.11.0",
            "rules": [{"apigroups": [""], "verbs": ["get"]}],
            "labels": {"MinKubeVersion": "user data stays"}
        });
        let renamed = canonicalize(&mut value, &ROOT);
        assert_eq!(
            value,
            json!({
                "minKubeVersion": "1.11.0",
                "rules": [{"apiGroups": [""], "verbs": ["get"]}],
                "labels": {"MinKubeVersion": "user data stays"}
            })
        );
        assert_eq!(renamed.len(), 2);
        assert_eq!(
            renamed[1].to_string(),
            r#"rules[0]."apigroups" read as "apiGroups""#
        );
    }

    #[test]
    fn the_canonical_spelling_wins_over_a_variant() {
        let mut value = json!({"minKubeVersion": "1", "MINKUBEVERSION": "2"});
        assert!(canonicalize(&mut value, &ROOT).is_empty());
        assert_eq!(value["minKubeVersion"], "1");
        assert_eq!(value["MINKUBEVERSION"], "2");
    }

    #[test]
    fn key_order_is_kept() {
        let mut value = json!({"a": 1, "MinKubeVersion": "1", "z": 2});
        canonicalize(&mut value, &ROOT);
        let keys: Vec<&String> = value.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["a", "minKubeVersion", "z"]);
    }

    #[test]
    fn recursive_shapes_work() {
        let mut value = json!({"Child": {"Child": {"NAME": "x"}}});
        assert_eq!(canonicalize(&mut value, &TREE).len(), 3);
        assert_eq!(value, json!({"child": {"child": {"name": "x"}}}));
    }
}
