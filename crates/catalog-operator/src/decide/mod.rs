//! catalog-operator's rules as pure functions: plain data and an injected
//! `now` in, decisions out. Nothing here may depend on `kube`, touch a
//! client, a clock, the network or the file system, or be `async`.

pub mod catalog_source;
pub mod image_template;
pub mod install_plan;
pub mod promotion;
pub mod subscription;
