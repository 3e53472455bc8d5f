//! bundle-unpacker's rules as plain functions: tables of inputs and the
//! decisions they must give, and properties over generated inputs.

#![allow(clippy::unwrap_used)]

mod content;
mod failure;
mod lookups;
mod registries;
mod retry;
