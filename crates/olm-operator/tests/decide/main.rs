//! Tests of olm-operator's decision core: OLM's rules as plain functions, fed
//! with YAML fixtures and readable builders, no cluster.

mod copied_csv;
mod csv_phase;
mod deployment;
mod fixtures;
mod group_rbac;
mod operator;
mod operator_condition;
mod operator_group;
mod properties;
mod purity;
mod requirements;
mod scoped;
mod serving;
mod subscription_config;
