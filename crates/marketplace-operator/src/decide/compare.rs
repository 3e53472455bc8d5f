//! Whether a CatalogSource's spec has drifted from its default, compared as
//! upstream compares it, and the merge patch that puts it back.

use olm_api::catalog_source::{CatalogSourceSpec, SourceType};
use serde_json::{Map, Value};

/// Whether `observed` matches `desired`, as upstream's
/// `AreCatsrcSpecsEqual` (operator-marketplace
/// `pkg/defaults/catsrcHelpers.go`) decides: `sourceType`, `configMap`,
/// `address`, `displayName`, `publisher` and `image` compare without regard
/// to case; every other field must be equal. Like Go's comparison of typed
/// structs, an absent field equals its zero value (`priority: 0`, `""`).
pub fn specs_match(desired: &CatalogSourceSpec, observed: &CatalogSourceSpec) -> bool {
    normalized(desired) == normalized(observed)
}

fn normalized(spec: &CatalogSourceSpec) -> CatalogSourceSpec {
    fn folded(value: &Option<String>) -> Option<String> {
        value
            .as_deref()
            .filter(|v| !v.is_empty())
            .map(str::to_lowercase)
    }
    let mut spec = spec.clone();
    spec.source_type = SourceType::new(spec.source_type.as_str().to_lowercase());
    spec.config_map = folded(&spec.config_map);
    spec.address = folded(&spec.address);
    spec.display_name = folded(&spec.display_name);
    spec.publisher = folded(&spec.publisher);
    spec.image = folded(&spec.image);
    spec.description = spec.description.filter(|v| !v.is_empty());
    spec.priority = spec.priority.filter(|p| *p != 0);
    spec.update_strategy = spec.update_strategy.filter(|s| *s != Default::default());
    spec.grpc_pod_config = spec.grpc_pod_config.filter(|c| *c != Default::default());
    spec
}

/// A JSON merge patch (RFC 7386) that turns `observed` into exactly
/// `desired`: fields `desired` lacks are set to `null` (removed), objects
/// are patched key by key, anything else is replaced. Upstream replaces the
/// whole spec on update; a merge patch of the difference does the same
/// without a read-modify-write of the rest of the object.
pub fn merge_patch(observed: &Value, desired: &Value) -> Value {
    match (observed, desired) {
        (Value::Object(observed), Value::Object(desired)) => {
            let mut patch = Map::new();
            for (key, old) in observed {
                match desired.get(key) {
                    None => {
                        patch.insert(key.clone(), Value::Null);
                    }
                    Some(new) if new != old => {
                        patch.insert(key.clone(), merge_patch(old, new));
                    }
                    Some(_) => {}
                }
            }
            for (key, new) in desired {
                if !observed.contains_key(key) {
                    patch.insert(key.clone(), new.clone());
                }
            }
            Value::Object(patch)
        }
        _ => desired.clone(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn spec(value: Value) -> CatalogSourceSpec {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn upstream_case_insensitive_fields_ignore_case() {
        let desired = spec(json!({
            "sourceType": "grpc", "image": "Quay.io/Fixture/Catalog:V1",
            "displayName": "Fixture Operators", "publisher": "Fixture",
            "address": "", "priority": -100
        }));
        let observed = spec(json!({
            "sourceType": "GRPC", "image": "quay.io/fixture/catalog:v1",
            "displayName": "FIXTURE operators", "publisher": "fixture", "priority": -100
        }));
        assert!(specs_match(&desired, &observed));
    }

    #[test]
    fn other_fields_and_different_values_are_drift() {
        let desired = spec(json!({"sourceType": "grpc", "image": "a:1", "priority": 1}));
        let cases = [
            json!({"sourceType": "grpc", "image": "a:2", "priority": 1}),
            json!({"sourceType": "grpc", "image": "a:1", "priority": 2}),
            json!({"sourceType": "grpc", "image": "a:1", "priority": 1, "secrets": ["s"]}),
            json!({"sourceType": "grpc", "image": "a:1", "priority": 1, "description": "d"}),
            json!({"sourceType": "grpc", "image": "a:1", "priority": 1,
                   "updateStrategy": {"registryPoll": {"interval": "10m"}}}),
            json!({"sourceType": "grpc", "image": "a:1", "priority": 1,
                   "grpcPodConfig": {"nodeSelector": {"a": "b"}}}),
            json!({"sourceType": "configmap", "image": "a:1", "priority": 1}),
        ];
        for observed in cases {
            assert!(
                !specs_match(&desired, &spec(observed.clone())),
                "{observed}"
            );
        }
    }

    #[test]
    fn zero_values_equal_absent_ones() {
        let desired = spec(json!({"sourceType": "grpc", "image": "a:1"}));
        let observed = spec(json!({"sourceType": "grpc", "image": "a:1", "priority": 0,
            "displayName": "", "updateStrategy": {}, "grpcPodConfig": {}}));
        assert!(specs_match(&desired, &observed));
    }

    #[test]
    fn merge_patch_removes_adds_and_replaces() {
        let observed = json!({"image": "a:2", "secrets": ["s"], "grpcPodConfig":
            {"nodeSelector": {"a": "b", "c": "d"}}, "priority": 1});
        let desired = json!({"image": "a:1", "grpcPodConfig": {"nodeSelector": {"a": "b"}},
            "priority": 1, "publisher": "p"});
        assert_eq!(
            merge_patch(&observed, &desired),
            json!({"image": "a:1", "secrets": null,
                "grpcPodConfig": {"nodeSelector": {"c": null}}, "publisher": "p"})
        );
        assert_eq!(merge_patch(&desired, &desired), json!({}));
    }
}
