//! The CustomResourceDefinitions we ship, generated from the Rust types.
//!
//! [`all`] builds every CRD (the eight `operators.coreos.com` ones and
//! `config.openshift.io` OperatorHub and `samples.operator.openshift.io`
//! Config), multi-version CRDs merged, each schema
//! made structural and shaped like upstream's (the private `schema` module
//! says how). The YAML in `deploy/crds/` and `charts/olm/crds/` is written by
//! [`write_all`] (`cargo xtask crds`) and checked by the `crds_fresh` test.

use std::{
    fs,
    path::{Path, PathBuf},
};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceValidation, JSONSchemaProps,
};
use kube::core::{CustomResourceExt, crd::merge_crds};
use schemars::JsonSchema;
use serde_json::json;

mod k8s_markers;
mod schema;

use schema::RootShape;

use crate::{
    catalog_source::CatalogSource, csv::ClusterServiceVersion, install_plan::InstallPlan,
    olm_config::OLMConfig, operator::Operator, operator_condition, operator_group,
    operator_hub::OperatorHub, samples::Config as SamplesConfig, subscription::Subscription,
};

/// First lines of every generated CRD file.
pub const GENERATED_HEADER: &str =
    "# Generated from the Rust types in crates/olm-api by `cargo xtask crds`; do not edit.\n";

/// Why a CRD could not be generated. These are bugs in the types or in the
/// schema pipeline, found by the tests, never runtime conditions.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    /// The derived schema cannot be turned into a structural CRD schema.
    #[error("crd schema: {0}")]
    Schema(String),
    /// Merging the versions of a multi-version CRD failed.
    #[error("merging crd versions of {kind}")]
    Merge {
        /// Kind of the CRD.
        kind: String,
        /// What kube reported.
        #[source]
        source: kube::core::crd::MergeError,
    },
    /// The schema does not fit the apiextensions JSONSchemaProps type.
    #[error("converting schema of {kind} {version}")]
    Convert {
        /// Kind of the CRD.
        kind: String,
        /// Version within the CRD.
        version: String,
        /// What serde reported.
        #[source]
        source: serde_json::Error,
    },
}

/// Every CRD we ship, in a stable order (by file name).
///
/// # Panics
///
/// Panics if a type's schema cannot be made structural; the tests in this crate
/// exercise every CRD, so this does not happen in a build that passed them.
pub fn all() -> Vec<CustomResourceDefinition> {
    match try_all() {
        Ok(crds) => crds,
        Err(error) => panic!("olm-api CRD generation is broken: {error}"),
    }
}

/// Every CRD we ship, or the first generation error.
pub fn try_all() -> Result<Vec<CustomResourceDefinition>, CrdError> {
    let metadata_and_spec: &'static [&'static str] = &["metadata", "spec"];
    let metadata_only: &'static [&'static str] = &["metadata"];
    let mut crds = vec![
        single::<CatalogSource>(RootShape {
            required: metadata_and_spec,
            ..RootShape::default()
        })?,
        single::<ClusterServiceVersion>(RootShape {
            required: metadata_and_spec,
            // Pod template labels and annotations must survive pruning; upstream
            // marks the embedded metadata the same way.
            preserve_unknown_fields: &[".spec.install.spec.deployments[].spec.template.metadata"],
            ..RootShape::default()
        })?,
        single::<InstallPlan>(RootShape {
            required: metadata_and_spec,
            ..RootShape::default()
        })?,
        single::<OLMConfig>(RootShape {
            required: metadata_only,
            ..RootShape::default()
        })?,
        merged(
            vec![
                single::<operator_condition::v2::OperatorCondition>(RootShape {
                    required: metadata_only,
                    ..RootShape::default()
                })?,
                single::<operator_condition::v1::OperatorCondition>(RootShape {
                    required: metadata_only,
                    ..RootShape::default()
                })?,
            ],
            "v2",
        )?,
        merged(
            vec![
                single::<operator_group::v1::OperatorGroup>(RootShape {
                    required: metadata_only,
                    spec_default: Some(json!({ "upgradeStrategy": "Default" })),
                    ..RootShape::default()
                })?,
                single::<operator_group::v1alpha2::OperatorGroup>(RootShape {
                    required: metadata_only,
                    ..RootShape::default()
                })?,
            ],
            "v1",
        )?,
        single::<Operator>(RootShape::default())?,
        single::<Subscription>(RootShape {
            required: metadata_and_spec,
            ..RootShape::default()
        })?,
        single::<OperatorHub>(RootShape::default())?,
        single::<SamplesConfig>(RootShape {
            required: metadata_and_spec,
            ..RootShape::default()
        })?,
    ];
    crds.sort_by_key(file_name);
    for crd in &crds {
        let problems = structural_problems(crd);
        if !problems.is_empty() {
            return Err(CrdError::Schema(format!(
                "{} is not structural: {}",
                crd.spec.names.kind,
                problems.join("; ")
            )));
        }
    }
    Ok(crds)
}

/// The CRD of one custom resource type, with our structural schema.
fn single<K: CustomResourceExt + JsonSchema>(
    shape: RootShape,
) -> Result<CustomResourceDefinition, CrdError> {
    let mut crd = K::crd();
    let kind = crd.spec.names.kind.clone();
    // kube-derive leaves listKind to the API server's default; upstream spells it out.
    crd.spec.names.list_kind = Some(format!("{kind}List"));
    let schema = schema::structural_schema::<K>(&shape)?;
    for version in &mut crd.spec.versions {
        let props: JSONSchemaProps =
            serde_json::from_value(schema.clone()).map_err(|source| CrdError::Convert {
                kind: kind.clone(),
                version: version.name.clone(),
                source,
            })?;
        version.schema = Some(CustomResourceValidation {
            open_api_v3_schema: Some(props),
        });
    }
    Ok(crd)
}

/// Merges single-version CRDs of one kind; versions are listed by name, as
/// upstream lists them.
fn merged(
    crds: Vec<CustomResourceDefinition>,
    storage: &str,
) -> Result<CustomResourceDefinition, CrdError> {
    let kind = crds
        .first()
        .map(|c| c.spec.names.kind.clone())
        .unwrap_or_default();
    let mut crd = merge_crds(crds, storage).map_err(|source| CrdError::Merge { kind, source })?;
    crd.spec.versions.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(crd)
}

/// Every reason a CRD's schemas would not be structural (empty when fine).
pub fn structural_problems(crd: &CustomResourceDefinition) -> Vec<String> {
    let mut problems = Vec::new();
    for version in &crd.spec.versions {
        let Some(schema) = version
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
        else {
            problems.push(format!("{}: no schema", version.name));
            continue;
        };
        match serde_json::to_value(schema) {
            Ok(value) => schema::structural_problems(&value, &version.name, &mut problems),
            Err(error) => problems.push(format!("{}: {error}", version.name)),
        }
    }
    problems
}

/// Upstream's file name for a CRD: `<group>_<plural>.yaml`.
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural)
}

/// The CRD as YAML, with [`GENERATED_HEADER`]. The output depends only on the
/// types: object keys are in a fixed order and nothing time- or
/// host-dependent is included.
pub fn to_yaml(crd: &CustomResourceDefinition) -> String {
    // Serializing a CRD cannot fail: every map key is a string.
    let body = serde_yaml_ng::to_string(crd)
        .unwrap_or_else(|error| format!("# serialization failed: {error}\n"));
    format!("{GENERATED_HEADER}{body}")
}

/// Writes every CRD into `dir` (created if missing) under [`file_name`] and
/// returns the paths written. Other files in `dir` are left alone.
pub fn write_all(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    for crd in all() {
        let path = dir.join(file_name(&crd));
        fs::write(&path, to_yaml(&crd))?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_crd_is_structural() {
        for crd in all() {
            assert!(
                structural_problems(&crd).is_empty(),
                "{}: {:?}",
                crd.spec.names.kind,
                structural_problems(&crd)
            );
        }
    }

    #[test]
    fn file_names_follow_upstream() {
        let names: Vec<String> = all().iter().map(file_name).collect();
        assert_eq!(
            names,
            [
                "config.openshift.io_operatorhubs.yaml",
                "operators.coreos.com_catalogsources.yaml",
                "operators.coreos.com_clusterserviceversions.yaml",
                "operators.coreos.com_installplans.yaml",
                "operators.coreos.com_olmconfigs.yaml",
                "operators.coreos.com_operatorconditions.yaml",
                "operators.coreos.com_operatorgroups.yaml",
                "operators.coreos.com_operators.yaml",
                "operators.coreos.com_subscriptions.yaml",
                "samples.operator.openshift.io_configs.yaml",
            ]
        );
    }

    #[test]
    fn yaml_is_deterministic() {
        let first: Vec<String> = all().iter().map(to_yaml).collect();
        let second: Vec<String> = all().iter().map(to_yaml).collect();
        assert_eq!(first, second);
    }

    /// `kubectl explain` shows these descriptions: every property of every CRD
    /// must have one (the root `metadata` is the API server's own).
    #[test]
    fn every_property_is_documented() {
        fn walk(node: &serde_json::Value, path: &str, missing: &mut Vec<String>) {
            if let Some(properties) = node
                .get("properties")
                .and_then(serde_json::Value::as_object)
            {
                for (name, child) in properties {
                    let child_path = format!("{path}.{name}");
                    if child.get("description").is_none() && child_path != ".metadata" {
                        missing.push(child_path.clone());
                    }
                    walk(child, &child_path, missing);
                }
            }
            if let Some(items) = node.get("items") {
                walk(items, &format!("{path}[]"), missing);
            }
            if let Some(values) = node.get("additionalProperties") {
                walk(values, &format!("{path}{{}}"), missing);
            }
        }
        let mut missing = Vec::new();
        for crd in all() {
            for version in &crd.spec.versions {
                let schema = version
                    .schema
                    .as_ref()
                    .and_then(|s| s.open_api_v3_schema.as_ref());
                let schema = serde_json::to_value(schema).unwrap_or_default();
                let mut here = Vec::new();
                walk(&schema, "", &mut here);
                missing.extend(
                    here.into_iter()
                        .map(|p| format!("{} {}{p}", crd.spec.names.kind, version.name)),
                );
            }
        }
        assert!(
            missing.is_empty(),
            "properties without description: {missing:#?}"
        );
    }

    #[test]
    fn multi_version_crds_have_one_storage_version() {
        for crd in all() {
            let storage = crd.spec.versions.iter().filter(|v| v.storage).count();
            assert_eq!(storage, 1, "{}", crd.spec.names.kind);
        }
    }
}
