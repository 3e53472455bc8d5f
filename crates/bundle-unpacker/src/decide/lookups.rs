//! Which bundle images an InstallPlan waits for, and when the watch (rather
//! than the work queue) should unpack them.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use olm_api::install_plan::{BundleLookupConditionType, InstallPlan};

/// One bundle image to unpack for one InstallPlan.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct UnpackJob {
    /// The bundle image (`bundleLookups[].path`).
    pub bundle_path: String,
    /// The bundle (CSV) name.
    pub bundle_name: String,
    /// The CatalogSource's namespace, where the content is stored.
    pub catalog_namespace: String,
    /// The CatalogSource's name.
    pub catalog_name: String,
    /// The InstallPlan's namespace (whose OperatorGroup sets the policy).
    pub plan_namespace: String,
    /// The InstallPlan's name.
    pub plan_name: String,
}

impl UnpackJob {
    /// The key concurrent work on the same stored object shares.
    pub fn key(&self) -> (String, String) {
        (
            self.catalog_namespace.clone(),
            olm_catalog::unpacked::config_map_name(&self.bundle_path),
        )
    }
}

/// A pending lookup of a plan and when its need was last stated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingLookup {
    /// What to unpack.
    pub job: UnpackJob,
    /// The latest time catalog-operator wrote about the lookup (its
    /// conditions' times, else the plan's creation).
    pub since: Option<Timestamp>,
}

/// Every lookup of `plan` with `BundleLookupNotPersisted=True` and a bundle
/// image, in status order. A lookup without a CatalogSource namespace uses
/// the plan's namespace, as catalog-operator reads it.
pub fn pending_lookups(plan: &InstallPlan) -> Vec<PendingLookup> {
    let plan_namespace = plan.metadata.namespace.clone().unwrap_or_default();
    let plan_name = plan.metadata.name.clone().unwrap_or_default();
    let created = plan.metadata.creation_timestamp.as_ref().map(|t| t.0);
    let Some(status) = plan.status.as_ref() else {
        return Vec::new();
    };
    status
        .bundle_lookups
        .iter()
        .filter(|lookup| !lookup.path.trim().is_empty())
        .filter(|lookup| {
            lookup
                .conditions
                .iter()
                .any(|c| c.type_ == BundleLookupConditionType::NOT_PERSISTED && c.status == "True")
        })
        .map(|lookup| {
            let catalog = lookup.catalog_source_ref.as_ref();
            let since = lookup
                .conditions
                .iter()
                .flat_map(|c| [c.last_transition_time.as_ref(), c.last_update_time.as_ref()])
                .flatten()
                .map(|t| t.0)
                .chain(created)
                .max();
            PendingLookup {
                job: UnpackJob {
                    bundle_path: lookup.path.trim().to_owned(),
                    bundle_name: lookup.identifier.clone(),
                    catalog_namespace: catalog
                        .and_then(|c| c.namespace.clone())
                        .filter(|n| !n.is_empty())
                        .unwrap_or_else(|| plan_namespace.clone()),
                    catalog_name: catalog.and_then(|c| c.name.clone()).unwrap_or_default(),
                    plan_namespace: plan_namespace.clone(),
                    plan_name: plan_name.clone(),
                },
                since,
            }
        })
        .collect()
}

/// Whether the watch should take up a pending lookup now, or at which time.
///
/// While the bus is connected catalog-operator's request on the work queue
/// is the fast path, and some replica takes it at once; the watch waits
/// `grace` after the need was stated before it steps in, so that replicas do
/// not race the queue. Without a bus, the watch is the only path and acts
/// at once.
pub fn watch_due(
    since: Option<Timestamp>,
    bus_connected: bool,
    grace: Duration,
    now: Timestamp,
) -> Result<(), Timestamp> {
    if !bus_connected {
        return Ok(());
    }
    let Some(since) = since else {
        return Ok(());
    };
    let due = SignedDuration::try_from(grace)
        .ok()
        .and_then(|g| since.checked_add(g).ok())
        .unwrap_or(since);
    if now >= due { Ok(()) } else { Err(due) }
}

/// Why a work request from the bus is not acted on: the bus is a hint, and
/// only an InstallPlan that still waits for exactly this bundle, from
/// exactly this catalog, makes it work (architecture rule 1).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unbacked {
    /// The request names no InstallPlan.
    #[error("the request names no InstallPlan")]
    NoPlan,
    /// The InstallPlan it names does not exist.
    #[error("InstallPlan {namespace}/{name} does not exist")]
    PlanMissing {
        /// The plan's namespace.
        namespace: String,
        /// The plan's name.
        name: String,
    },
    /// The plan exists but waits for no such bundle from that catalog
    /// (forged, or already unpacked).
    #[error(
        "InstallPlan {namespace}/{name} waits for no bundle {bundle_path:?} from catalog {catalog}"
    )]
    NotPending {
        /// The plan's namespace.
        namespace: String,
        /// The plan's name.
        name: String,
        /// The image asked for.
        bundle_path: String,
        /// The catalog asked for, `namespace/name`.
        catalog: String,
    },
}

/// Checks a job taken from a bus request against the InstallPlan it names,
/// as read from the API server (`None`: not found). The job is acted on only
/// if the plan has a pending lookup of the same image from the same
/// CatalogSource; the image, the catalog (whose pull secrets are used) and
/// the namespace the content is written to all come from that lookup, never
/// from the request alone.
pub fn check_request(job: &UnpackJob, plan: Option<&InstallPlan>) -> Result<(), Unbacked> {
    if job.plan_name.is_empty() || job.plan_namespace.is_empty() {
        return Err(Unbacked::NoPlan);
    }
    let Some(plan) = plan else {
        return Err(Unbacked::PlanMissing {
            namespace: job.plan_namespace.clone(),
            name: job.plan_name.clone(),
        });
    };
    let pending = pending_lookups(plan).into_iter().any(|lookup| {
        let wanted = &lookup.job;
        wanted.bundle_path == job.bundle_path
            && wanted.catalog_namespace == job.catalog_namespace
            && wanted.catalog_name == job.catalog_name
            && wanted.plan_namespace == job.plan_namespace
            && wanted.plan_name == job.plan_name
    });
    if pending {
        Ok(())
    } else {
        Err(Unbacked::NotPending {
            namespace: job.plan_namespace.clone(),
            name: job.plan_name.clone(),
            bundle_path: job.bundle_path.clone(),
            catalog: format!("{}/{}", job.catalog_namespace, job.catalog_name),
        })
    }
}
