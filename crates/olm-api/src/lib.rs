//! Rust types for every Kubernetes object that OLM owns or reads, wire-compatible
//! with upstream OLM (`operators.coreos.com`, `packages.operators.coreos.com`,
//! `config.openshift.io` OperatorHub, `samples.operator.openshift.io` Config,
//! and OpenShift's ImageStream and Template as the samples operator sees
//! them), plus the CRD YAML generated from them and
//! the well-known labels, annotations and condition helpers every service shares.
//!
//! This crate depends on nothing of ours and performs no I/O against a cluster:
//! it is data and pure functions only.

mod field_schema;
mod open_value;
mod optional_spec;

pub mod catalog_source;
pub mod cluster_operator;
pub mod conditions;
pub mod crd;
pub mod csv;
pub mod go_duration;
pub mod go_text;
pub mod install_identity;
pub mod install_plan;
pub mod labels;
pub mod olm_config;
pub mod openshift;
pub mod operator;
pub mod operator_condition;
pub mod operator_group;
pub mod operator_hub;
pub mod ownership;
pub mod package_manifest;
pub mod samples;
pub mod status;
pub mod subscription;
pub mod unpack_policy;
