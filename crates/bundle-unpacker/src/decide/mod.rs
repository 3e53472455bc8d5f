//! bundle-unpacker's rules as pure functions: plain data and an injected
//! `now` in, decisions out. Nothing here may depend on `kube`, touch a
//! client, a clock, the network or the file system, or be `async`.

pub mod content;
pub mod failure;
pub mod lookups;
pub mod registries;
pub mod retry;
