//! kubectl-olm's rules as pure functions over plain data: no client, no
//! clock, no I/O. Each is table-tested.

pub(crate) mod doctor;
pub(crate) mod progress;
pub(crate) mod status;
pub(crate) mod uninstall;
