//! Whether a bundle's CustomResourceDefinition may replace the one the
//! cluster has, as upstream decides before it updates a CRD
//! (`pkg/controller/operators/catalog/step.go`, `ensureCRDUpgrade`): no
//! version listed in `status.storedVersions` may disappear, and every
//! existing custom resource of a served version whose schema changes must
//! still be valid under the new schema. Listing the custom resources is the
//! caller's; judging them is [`first_invalid`]'s.

pub mod schema;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

/// Custom resources read per list request while checking a CRD update
/// (its existing resources are paged through, never read all at once).
pub const CR_PAGE_SIZE: u32 = 500;

/// The CRD-update refusal upstream gives when a new CRD drops a version
/// listed in the old CRD's `status.storedVersions`.
pub fn check_stored_versions(
    crd_name: &str,
    stored_versions: &[String],
    new_versions: &[String],
) -> Result<(), String> {
    for stored in stored_versions {
        if !new_versions.contains(stored) {
            return Err(format!(
                "risk of data loss updating {crd_name:?}: new CRD removes version {stored} that is listed as a stored version on the existing CRD"
            ));
        }
    }
    Ok(())
}

/// [`check_stored_versions`] for two CRDs.
pub fn check_stored_versions_of(
    existing: &CustomResourceDefinition,
    desired: &CustomResourceDefinition,
) -> Result<(), String> {
    let stored = existing
        .status
        .as_ref()
        .and_then(|status| status.stored_versions.clone())
        .unwrap_or_default();
    let new: Vec<String> = desired
        .spec
        .versions
        .iter()
        .map(|version| version.name.clone())
        .collect();
    check_stored_versions(
        existing.metadata.name.as_deref().unwrap_or_default(),
        &stored,
        &new,
    )
}

/// The refusal upstream gives when an existing custom resource does not
/// validate against the new CRD's schema.
pub fn invalid_existing_cr_message(
    crd_name: &str,
    version: &str,
    object: &str,
    detail: &str,
) -> String {
    format!(
        "error validating existing CRs against new CRD's schema for {crd_name:?}: error validating {object} (version {version}): updated validation is too restrictive: {detail}"
    )
}

/// Whether replacing `existing` with `desired` would change nothing: the
/// same spec, and every annotation `desired` has already there.
pub fn unchanged(existing: &CustomResourceDefinition, desired: &CustomResourceDefinition) -> bool {
    let annotations_present = desired.metadata.annotations.iter().flatten().all(|(k, v)| {
        existing
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(k))
            == Some(v)
    });
    let spec_same =
        serde_json::to_value(&existing.spec).ok() == serde_json::to_value(&desired.spec).ok();
    annotations_present && spec_same
}

/// A served version whose schema the update changes: its existing custom
/// resources must be checked against `schema`.
#[derive(Clone, Debug, PartialEq)]
pub struct VersionToCheck {
    /// The version's name.
    pub version: String,
    /// The new `openAPIV3Schema`.
    pub schema: Value,
}

/// The versions an update must check existing custom resources of: those
/// `existing` serves and `desired` keeps with a different schema.
pub fn versions_to_check(
    existing: &CustomResourceDefinition,
    desired: &CustomResourceDefinition,
) -> Vec<VersionToCheck> {
    desired
        .spec
        .versions
        .iter()
        .filter_map(|new_version| {
            let old_version = existing
                .spec
                .versions
                .iter()
                .find(|v| v.name == new_version.name && v.served)?;
            let schema = new_version
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())?;
            if old_version.schema.as_ref() == new_version.schema.as_ref() {
                return None;
            }
            Some(VersionToCheck {
                version: new_version.name.clone(),
                schema: serde_json::to_value(schema).ok()?,
            })
        })
        .collect()
}

/// Whether `desired` converts between versions with a webhook: upstream
/// then only warns about custom resources the new schema refuses (the
/// webhook may convert them), and so do we.
pub fn converts_by_webhook(desired: &CustomResourceDefinition) -> bool {
    desired
        .spec
        .conversion
        .as_ref()
        .is_some_and(|conversion| conversion.strategy == "Webhook")
}

/// The first of `objects` (custom resources of `check.version`) the new
/// schema refuses, as upstream's refusal message; `objects` are whole
/// custom resources as JSON.
pub fn first_invalid<'a>(
    crd_name: &str,
    check: &VersionToCheck,
    objects: impl IntoIterator<Item = &'a Value>,
) -> Option<String> {
    objects.into_iter().find_map(|object| {
        let problems = schema::validate(&check.schema, object);
        if problems.is_empty() {
            return None;
        }
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let id = match object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
        {
            Some(namespace) if !namespace.is_empty() => format!("{namespace}/{name}"),
            _ => name.to_owned(),
        };
        Some(invalid_existing_cr_message(
            crd_name,
            &check.version,
            &id,
            &problems.join("; "),
        ))
    })
}

/// What applying a bundle's CRD would do.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase", tag = "verdict", content = "message")]
pub enum CrdVerdict {
    /// There is none: it is created.
    Create,
    /// The cluster's is the same: nothing is written.
    Unchanged,
    /// It is replaced, safely.
    Update,
    /// It is replaced although custom resources may not validate, since a
    /// conversion webhook may convert them (upstream only warns).
    UpdateWithWarning(String),
    /// The update is refused, and the InstallPlan fails with this message.
    Refused(String),
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn crd(versions: Value, stored: &[&str]) -> CustomResourceDefinition {
        serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "gadgets.fixture.example"},
            "spec": {"group": "fixture.example", "scope": "Namespaced",
                     "names": {"plural": "gadgets", "kind": "Gadget"},
                     "versions": versions},
            "status": {"storedVersions": stored}
        }))
        .unwrap()
    }

    fn version(name: &str, served: bool, schema: Value) -> Value {
        json!({"name": name, "served": served, "storage": true,
               "schema": {"openAPIV3Schema": schema}})
    }

    #[test]
    fn a_dropped_stored_version_is_refused_with_upstreams_message() {
        let open = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
        let existing = crd(json!([version("v1", true, open.clone())]), &["v1"]);
        let desired = crd(json!([version("v2", true, open)]), &[]);
        assert_eq!(
            check_stored_versions_of(&existing, &desired).unwrap_err(),
            "risk of data loss updating \"gadgets.fixture.example\": new CRD removes version v1 that is listed as a stored version on the existing CRD"
        );
        assert!(check_stored_versions_of(&existing, &existing).is_ok());
    }

    #[test]
    fn only_served_versions_with_a_changed_schema_are_checked() {
        let open = json!({"type": "object"});
        let strict = json!({"type": "object", "properties": {"spec": {"type": "object",
            "properties": {"size": {"type": "integer"}}}}});
        let existing = crd(
            json!([
                version("v1", true, open.clone()),
                version("v2", false, open.clone()),
                version("v3", true, strict.clone())
            ]),
            &["v1"],
        );
        let desired = crd(
            json!([
                version("v1", true, strict.clone()),
                version("v2", true, strict.clone()),
                version("v3", true, strict.clone())
            ]),
            &[],
        );
        let checks = versions_to_check(&existing, &desired);
        assert_eq!(
            checks,
            [VersionToCheck {
                version: "v1".to_owned(),
                schema: strict
            }]
        );
        let objects = [
            json!({"metadata": {"name": "fine", "namespace": "ns"}, "spec": {"size": 3}}),
            json!({"metadata": {"name": "big", "namespace": "ns"}, "spec": {"size": "big"}}),
        ];
        let refusal = first_invalid("gadgets.fixture.example", &checks[0], &objects).unwrap();
        assert!(
            refusal.starts_with("error validating existing CRs against new CRD's schema for \"gadgets.fixture.example\": error validating ns/big (version v1): updated validation is too restrictive: "),
            "{refusal}"
        );
        assert_eq!(first_invalid("x", &checks[0], &objects[..1]), None);
        assert!(!unchanged(&existing, &desired));
        assert!(unchanged(&existing, &existing));
    }
}
