//! The registry server over real and synthetic catalogs, exercised through
//! the typed client on a loopback port.
//!
//! One test binary (so one link) with a module per concern:
//!
//! * `real_catalogs`: every RPC over each catalog in `shared/testdata/catalogs`,
//!   with concrete answers;
//! * `semantics`: upstream's rules on small catalogs written by the tests;
//! * `hostile`: malformed catalogs, limits, and bad requests;
//! * `hostile_server`: a hostile server against the client's stream limits;
//! * `protocol`: health, reflection and message sizes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod fixtures;
mod hostile;
mod hostile_server;
mod protocol;
mod real_catalogs;
mod semantics;
