//! An ordinary Kubernetes operator that OLM installs as the example package
//! (`examples/bundles/example-operator`): it reconciles `Greeting` objects
//! (`greetings.example.olm-rs.dev/v1`) and writes a greeting, its own
//! version and a Ready condition into their status, so that a user sees an
//! operator at work once OLM has installed it.
//!
//! It stands for a user's workload, so it must not depend on any OLM crate:
//! it knows OLM only through what OLM gives every operator, the
//! `WATCH_NAMESPACE` and `OPERATOR_VERSION` variables its CSV sets. OLM's
//! crates appear only as dev-dependencies, to validate the bundles and to
//! start a test control plane.
//!
//! The binary is a thin wrapper over [`run`], which tests call in-process:
//!
//! ```no_run
//! # async fn example() -> Result<(), kube::Error> {
//! use example_operator::{Readiness, WatchNamespaces};
//!
//! let client = kube::Client::try_default().await?;
//! let namespaces = WatchNamespaces::parse("team-a,team-b");
//! example_operator::run(client, &namespaces, "0.1.0", Readiness::default(), async {
//!     let _ = tokio::signal::ctrl_c().await;
//! })
//! .await;
//! # Ok(())
//! # }
//! ```

pub mod controller;
pub mod error;
pub mod greeting;
pub mod health;
pub mod settings;
pub mod status;

pub use controller::run;
pub use error::Error;
pub use greeting::{Greeting, GreetingSpec, GreetingStatus};
pub use health::Readiness;
pub use settings::WatchNamespaces;
