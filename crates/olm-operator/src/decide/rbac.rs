//! The RBAC objects a CSV's `permissions` and `clusterPermissions` turn into.
//! The rules live in `olm_plan::csv_rbac`, shared with catalog-operator,
//! which lists the same objects as InstallPlan steps: both services create
//! objects with the same names, labels and rules, so whichever writes first
//! the other finds equal.

pub use olm_plan::csv_rbac::*;
