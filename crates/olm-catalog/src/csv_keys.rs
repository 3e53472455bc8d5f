//! The known field names of a `ClusterServiceVersion`, for Go-style
//! case-insensitive reading (see [`crate::field_names`]).
//!
//! Upstream decodes CSVs into Go structs, so `spec.MinKubeVersion` or an RBAC
//! rule's `apigroups` work there. [`normalize_csv_keys`] renames such keys to
//! their canonical spelling before the CSV is decoded with serde. It covers
//! the CSV's own fields down to RBAC rules, CRD and APIService descriptions,
//! webhooks and install modes; deployment specs, CRD schemas, annotations and
//! labels are left untouched (they are user data or Kubernetes types that
//! Kubernetes itself reads case-sensitively once applied).
//!
//! Use it on any CSV JSON read from a bundle or catalog, including catalogs
//! built by upstream `opm`, whose `olm.bundle.object` values keep the keys as
//! the author wrote them.

use serde_json::Value;

use crate::field_names::{Renamed, Shape, canonicalize};

const O: &Shape = &Shape::Opaque;

static NAME_URL: Shape = Shape::Object(&[("name", O), ("url", O)]);
static RESOURCE_REFERENCE: Shape = Shape::Object(&[("name", O), ("kind", O), ("version", O)]);
static DESCRIPTOR: Shape = Shape::Object(&[
    ("path", O),
    ("displayName", O),
    ("description", O),
    ("x-descriptors", O),
    ("value", O),
]);
static DESCRIPTORS: Shape = Shape::List(&DESCRIPTOR);
static CRD_DESCRIPTION: Shape = Shape::Object(&[
    ("name", O),
    ("version", O),
    ("kind", O),
    ("displayName", O),
    ("description", O),
    ("resources", &Shape::List(&RESOURCE_REFERENCE)),
    ("statusDescriptors", &DESCRIPTORS),
    ("specDescriptors", &DESCRIPTORS),
    ("actionDescriptors", &DESCRIPTORS),
]);
static API_SERVICE_DESCRIPTION: Shape = Shape::Object(&[
    ("name", O),
    ("group", O),
    ("version", O),
    ("kind", O),
    ("deploymentName", O),
    ("containerPort", O),
    ("displayName", O),
    ("description", O),
    ("resources", &Shape::List(&RESOURCE_REFERENCE)),
    ("statusDescriptors", &DESCRIPTORS),
    ("specDescriptors", &DESCRIPTORS),
    ("actionDescriptors", &DESCRIPTORS),
]);

/// `spec.customresourcedefinitions` (also `crdDescriptions` in `olm.csv.metadata`).
pub(crate) static CRD_DEFINITIONS_SHAPE: Shape = Shape::Object(&[
    ("owned", &Shape::List(&CRD_DESCRIPTION)),
    ("required", &Shape::List(&CRD_DESCRIPTION)),
]);

/// `spec.apiservicedefinitions` (also in `olm.csv.metadata`).
pub(crate) static API_SERVICE_DEFINITIONS_SHAPE: Shape = Shape::Object(&[
    ("owned", &Shape::List(&API_SERVICE_DESCRIPTION)),
    ("required", &Shape::List(&API_SERVICE_DESCRIPTION)),
]);

static POLICY_RULE: Shape = Shape::Object(&[
    ("verbs", O),
    ("apiGroups", O),
    ("resources", O),
    ("resourceNames", O),
    ("nonResourceURLs", O),
]);
static PERMISSION: Shape = Shape::Object(&[
    ("serviceAccountName", O),
    ("rules", &Shape::List(&POLICY_RULE)),
]);
static DEPLOYMENT: Shape = Shape::Object(&[("name", O), ("spec", O), ("label", O)]);
static INSTALL_SPEC: Shape = Shape::Object(&[
    ("deployments", &Shape::List(&DEPLOYMENT)),
    ("permissions", &Shape::List(&PERMISSION)),
    ("clusterPermissions", &Shape::List(&PERMISSION)),
]);
static INSTALL: Shape = Shape::Object(&[("strategy", O), ("spec", &INSTALL_SPEC)]);
static WEBHOOK: Shape = Shape::Object(&[
    ("generateName", O),
    ("type", O),
    ("deploymentName", O),
    ("containerPort", O),
    ("targetPort", O),
    ("sideEffects", O),
    ("rules", O),
    ("failurePolicy", O),
    ("matchPolicy", O),
    ("objectSelector", O),
    ("timeoutSeconds", O),
    ("admissionReviewVersions", O),
    ("reinvocationPolicy", O),
    ("webhookPath", O),
    ("conversionCRDs", O),
]);
static SPEC: Shape = Shape::Object(&[
    ("install", &INSTALL),
    ("version", O),
    ("release", O),
    ("maturity", O),
    ("customresourcedefinitions", &CRD_DEFINITIONS_SHAPE),
    ("apiservicedefinitions", &API_SERVICE_DEFINITIONS_SHAPE),
    ("webhookdefinitions", &Shape::List(&WEBHOOK)),
    (
        "nativeAPIs",
        &Shape::List(&Shape::Object(&[("group", O), ("version", O), ("kind", O)])),
    ),
    ("minKubeVersion", O),
    ("displayName", O),
    ("description", O),
    ("keywords", O),
    (
        "maintainers",
        &Shape::List(&Shape::Object(&[("name", O), ("email", O)])),
    ),
    ("provider", &NAME_URL),
    ("links", &Shape::List(&NAME_URL)),
    (
        "icon",
        &Shape::List(&Shape::Object(&[("base64data", O), ("mediatype", O)])),
    ),
    (
        "installModes",
        &Shape::List(&Shape::Object(&[("type", O), ("supported", O)])),
    ),
    ("replaces", O),
    ("labels", O),
    ("annotations", O),
    ("selector", O),
    ("cleanup", &Shape::Object(&[("enabled", O)])),
    ("skips", O),
    (
        "relatedImages",
        &Shape::List(&Shape::Object(&[("name", O), ("image", O)])),
    ),
]);
static METADATA: Shape = Shape::Object(&[
    ("name", O),
    ("namespace", O),
    ("generateName", O),
    ("annotations", O),
    ("labels", O),
]);
static CSV: Shape = Shape::Object(&[
    ("apiVersion", O),
    ("kind", O),
    ("metadata", &METADATA),
    ("spec", &SPEC),
    ("status", O),
]);

/// Renames case variants of known CSV field names (`MinKubeVersion`,
/// `apigroups`) to their canonical spelling and returns what it renamed.
pub fn normalize_csv_keys(csv: &mut Value) -> Vec<Renamed> {
    canonicalize(csv, &CSV)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn real_variants_are_normalised() {
        // strimzi's package manifests and oadp-operator 0.2.3 (see SOURCES.md).
        let mut csv = json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "ClusterServiceVersion",
            "metadata": {"name": "x", "annotations": {"MinKubeVersion": "kept"}},
            "spec": {
                "MinKubeVersion": "1.11.0",
                "install": {"strategy": "deployment", "spec": {
                    "permissions": [{"serviceAccountName": "sa", "rules": [{"apigroups": [""], "verbs": ["*"]}]}],
                    "deployments": [{"name": "d", "spec": {"Replicas": 1}}]
                }}
            }
        });
        let renamed = normalize_csv_keys(&mut csv);
        assert_eq!(renamed.len(), 2, "{renamed:?}");
        assert_eq!(csv["spec"]["minKubeVersion"], "1.11.0");
        assert_eq!(
            csv["spec"]["install"]["spec"]["permissions"][0]["rules"][0]["apiGroups"],
            json!([""])
        );
        // User data and Kubernetes types are not ours to rename.
        assert_eq!(csv["metadata"]["annotations"]["MinKubeVersion"], "kept");
        assert_eq!(
            csv["spec"]["install"]["spec"]["deployments"][0]["spec"]["Replicas"],
            1
        );
        assert_eq!(
            renamed[1].to_string(),
            r#"spec.install.spec.permissions[0].rules[0]."apigroups" read as "apiGroups""#
        );
    }

    #[test]
    fn canonical_csvs_are_untouched() {
        let mut csv = json!({"spec": {"minKubeVersion": "1.0.0", "customresourcedefinitions": {"owned": []}}});
        let before = csv.clone();
        assert!(normalize_csv_keys(&mut csv).is_empty());
        assert_eq!(csv, before);
    }
}
