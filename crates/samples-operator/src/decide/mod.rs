//! The samples operator's rules, as pure functions over plain data: no
//! `kube`, no `tokio`, no I/O.

pub mod bootstrap;
pub mod cluster_operator;
pub mod credentials;
pub mod imports;
pub mod inventory;
pub mod plan;
pub mod registry;
