//! One sync of a CatalogSource, decided: what its spec and the cluster say
//! before anything runs ([`admit`]), what the registry run did
//! ([`registry_ran`]), what the connection probe found ([`connected`]), and
//! when to look again ([`next_check`]). Every status field and condition
//! catalog-operator writes on a CatalogSource is set here; the controller
//! only observes, acts and writes what these return.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use olm_api::{
    catalog_source::{
        CatalogSource, CatalogSourceConditionReason, CatalogSourceConditionType,
        CatalogSourceReason, CatalogSourceStatus, ConfigMapResourceReference, ConnectivityState,
        GrpcConnectionState, RegistryServiceStatus,
    },
    conditions, labels,
};
use olm_oci::policy::RegistryRule;

use super::{PollSchedule, REGISTRY_GRPC_PORT, Serving, policy_refusal, poll_schedule, serving};
use crate::decide::{
    image_template::{self, KubeVersion, TemplateOutcome},
    promotion::{self, Verdict},
};

/// How often a catalog whose registry is not READY is looked at again
/// (upstream's connection watcher gives each state 10 s).
pub const NOT_READY_RECHECK: Duration = Duration::from_secs(10);

/// How long after a registry pod was replaced its content is not trusted to
/// come from the new pod: the old one's 1 s grace period and kube-proxy's
/// next sync.
pub const REGISTRY_REPLACED_SETTLE: Duration = Duration::from_secs(3);

/// The ConfigMap a `configmap` catalog serves, as found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigMapLookup {
    /// The catalog serves no ConfigMap (nothing was read).
    NotServed,
    /// `spec.configMap` names a ConfigMap that does not exist.
    Missing,
    /// It exists, with this uid and resourceVersion.
    Found {
        /// Its uid.
        uid: Option<String>,
        /// Its resourceVersion.
        resource_version: Option<String>,
    },
}

/// The ConfigMap [`admit`] wants read, when the catalog serves one.
pub fn config_map_to_read(catalog: &CatalogSource) -> Option<String> {
    match serving(catalog) {
        Ok(Serving::ConfigMap { name }) => Some(name),
        _ => None,
    }
}

/// Everything [`admit`] looks at for one CatalogSource.
#[derive(Debug, Clone, Copy)]
pub struct CatalogObservation<'a> {
    /// The catalog.
    pub catalog: &'a CatalogSource,
    /// The cluster's version, for `olm.catalogImageTemplate`.
    pub kube_version: &'a KubeVersion,
    /// The allowed-registries policy for catalog images.
    pub allowed_registries: &'a [RegistryRule],
    /// The allowed-registries policy for `spec.address`.
    pub allowed_catalog_addresses: &'a [RegistryRule],
    /// The ConfigMap it serves, as read ([`config_map_to_read`]).
    pub config_map: &'a ConfigMapLookup,
    /// The time of this sync.
    pub now: Timestamp,
}

/// What comes after [`admit`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Write the status, then this image (from the image template) to
    /// `spec.image`; the change comes back through the watch.
    ResolveImage(String),
    /// Not to be served (invalid spec, or refused by policy): drop its
    /// connection, write the status, and wait for a change.
    Refused,
    /// The ConfigMap it serves is missing: write the status and look again
    /// in [`NOT_READY_RECHECK`].
    ConfigMapMissing,
    /// Run its registry (nothing to run for an address) and probe it.
    Serve {
        /// How it is served.
        serving: Serving,
        /// Its poll schedule, for a polled image catalog.
        schedule: Option<PollSchedule>,
    },
}

/// What [`admit`] decided.
#[derive(Debug, Clone, PartialEq)]
pub struct AdmitDecision {
    /// The status so far.
    pub status: CatalogSourceStatus,
    /// What comes next.
    pub next: Admission,
}

fn condition(
    type_: &CatalogSourceConditionType,
    status: &str,
    reason: &CatalogSourceConditionReason,
    message: &str,
) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
    conditions::metav1(type_.as_str(), status, reason.as_str(), message, None)
}

/// Applies `olm.catalogImageTemplate` to the conditions; returns the image
/// to write to `spec.image` when it differs from the current one.
fn image_template(
    catalog: &CatalogSource,
    status: &mut CatalogSourceStatus,
    kube_version: &KubeVersion,
    now: Timestamp,
) -> Option<String> {
    let templates = CatalogSourceConditionType::TEMPLATES_HAVE_RESOLVED;
    let resolved = CatalogSourceConditionType::RESOLVED_IMAGE;
    let template = catalog
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(labels::CATALOG_IMAGE_TEMPLATE));
    let Some(template) = template else {
        conditions::remove(&mut status.conditions, templates.as_str());
        conditions::remove(&mut status.conditions, resolved.as_str());
        return None;
    };
    match image_template::resolve(template, kube_version) {
        TemplateOutcome::Resolved(image) => {
            let reason = CatalogSourceConditionReason::ALL_TEMPLATES_RESOLVED;
            let message = "catalog image reference was successfully resolved";
            let all = condition(&templates, conditions::TRUE, &reason, message);
            conditions::set(&mut status.conditions, all, now);
            let image_condition = condition(&resolved, conditions::TRUE, &reason, &image);
            conditions::set(&mut status.conditions, image_condition, now);
            (catalog.spec.image.as_deref() != Some(image.as_str())).then_some(image)
        }
        TemplateOutcome::Unresolved(message) => {
            let reason = CatalogSourceConditionReason::UNABLE_TO_RESOLVE;
            for type_ in [&templates, &resolved] {
                let unresolved = condition(type_, conditions::FALSE, &reason, &message);
                conditions::set(&mut status.conditions, unresolved, now);
            }
            None
        }
    }
}

fn say(status: &mut CatalogSourceStatus, reason: CatalogSourceReason, message: String) {
    status.reason = Some(reason);
    status.message = Some(message);
}

/// The first part of a sync, before the registry runs: the image template,
/// the spec, the allowed-registries policy, the ConfigMap reference (its
/// `lastUpdateTime` moves only when the ConfigMap does), the registry
/// service of an address catalog, and upstream's `InvalidIntervalError`
/// (kept as the reason while the poll interval is unreadable; polling goes
/// on with the default).
pub fn admit(observation: &CatalogObservation<'_>) -> AdmitDecision {
    let CatalogObservation {
        catalog,
        kube_version,
        allowed_registries,
        allowed_catalog_addresses,
        config_map,
        now,
    } = *observation;
    let mut status = catalog.status.clone().unwrap_or_default();
    let decided = |status, next| AdmitDecision { status, next };

    if let Some(image) = image_template(catalog, &mut status, kube_version, now) {
        return decided(status, Admission::ResolveImage(image));
    }
    let serving = match serving(catalog) {
        Ok(serving) => serving,
        Err(invalid) => {
            say(
                &mut status,
                CatalogSourceReason::SPEC_INVALID_ERROR,
                invalid.0,
            );
            return decided(status, Admission::Refused);
        }
    };
    if let Some(refused) = policy_refusal(
        catalog,
        &serving,
        allowed_registries,
        allowed_catalog_addresses,
    ) {
        say(
            &mut status,
            CatalogSourceReason::REGISTRY_NOT_ALLOWED,
            refused,
        );
        return decided(status, Admission::Refused);
    }
    status.reason = None;
    status.message = None;

    match (&serving, config_map) {
        (Serving::Address { .. }, _) => {
            let created_at = status
                .registry_service
                .as_ref()
                .filter(|s| s.service_name.is_none())
                .and_then(|s| s.created_at.clone())
                .unwrap_or(Time(now));
            status.registry_service = Some(RegistryServiceStatus {
                protocol: Some("grpc".to_owned()),
                created_at: Some(created_at),
                ..RegistryServiceStatus::default()
            });
        }
        (
            Serving::ConfigMap { name },
            ConfigMapLookup::Found {
                uid,
                resource_version,
            },
        ) => {
            let unchanged = status
                .config_map_reference
                .as_ref()
                .is_some_and(|r| r.resource_version == *resource_version && r.name == *name);
            if !unchanged {
                status.config_map_reference = Some(ConfigMapResourceReference {
                    name: name.clone(),
                    namespace: catalog.metadata.namespace.clone().unwrap_or_default(),
                    uid: uid.clone(),
                    resource_version: resource_version.clone(),
                    last_update_time: Some(Time(now)),
                });
            }
        }
        (Serving::ConfigMap { name }, _) => {
            say(
                &mut status,
                CatalogSourceReason::CONFIG_MAP_ERROR,
                format!("failed to get catalog config map {name}: configmaps {name:?} not found"),
            );
            return decided(status, Admission::ConfigMapMissing);
        }
        (Serving::Image { .. }, _) => {}
    }

    let schedule = poll_schedule(catalog, now);
    if let Some(message) = schedule.as_ref().and_then(|s| s.invalid_interval.clone()) {
        say(
            &mut status,
            CatalogSourceReason::INVALID_INTERVAL_ERROR,
            message,
        );
    }
    decided(status, Admission::Serve { serving, schedule })
}

/// What running an image or ConfigMap catalog's registry did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryRun {
    /// The registry Service's name.
    pub service_name: String,
    /// Whether a serving pod was created or an update pod promoted: new
    /// content, a new `registryService.createdAt`.
    pub replaced: bool,
    /// Whether the catalog image's registry was asked for its digest (a
    /// poll, or a fresh pod of a polled catalog).
    pub polled: bool,
    /// Whether the promotion guard watches this catalog.
    pub guarded: bool,
    /// The guard's last verdict on it, if any.
    pub verdict: Option<Verdict>,
}

/// Records a registry run: `latestImageRegistryPoll`, the registry
/// Service (its `createdAt` moves when the pod serving behind it was
/// replaced or the Service is another), and `PromotionBlocked` (see
/// [`promotion::blocked_condition`]; removed from a catalog no longer
/// guarded).
pub fn registry_ran(
    status: &mut CatalogSourceStatus,
    namespace: &str,
    run: &RegistryRun,
    now: Timestamp,
) {
    if run.polled {
        status.latest_image_registry_poll = Some(Time(now));
    }
    let blocked = CatalogSourceConditionType::PROMOTION_BLOCKED;
    if !run.guarded {
        conditions::remove(&mut status.conditions, blocked.as_str());
    } else if let Some(condition) =
        promotion::blocked_condition(&status.conditions, run.verdict.as_ref())
    {
        conditions::set(&mut status.conditions, condition, now);
    }
    let same_service = status
        .registry_service
        .as_ref()
        .is_some_and(|s| s.service_name.as_deref() == Some(run.service_name.as_str()));
    let created_at = status
        .registry_service
        .as_ref()
        .filter(|_| same_service && !run.replaced)
        .and_then(|s| s.created_at.clone())
        .unwrap_or(Time(now));
    status.registry_service = Some(RegistryServiceStatus {
        protocol: Some("grpc".to_owned()),
        service_name: Some(run.service_name.clone()),
        service_namespace: Some(namespace.to_owned()),
        port: Some(REGISTRY_GRPC_PORT.to_string()),
        created_at: Some(created_at),
    });
}

/// Whether the pod behind the catalog's registry Service was replaced in
/// this sync (`registryService.createdAt` moved): its content is new even
/// though the connection may never have looked down.
pub fn registry_replaced(before: &CatalogSourceStatus, after: &CatalogSourceStatus) -> bool {
    let created_at = |s: &CatalogSourceStatus| {
        s.registry_service
            .as_ref()
            .and_then(|r| r.created_at.clone())
    };
    before.registry_service.is_some() && created_at(before) != created_at(after)
}

/// What probing the registry found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// The address dialled.
    pub address: String,
    /// The connection's state.
    pub state: ConnectivityState,
    /// Whether a replaced registry just settled (counts as a new
    /// connection: resolution reads the new content).
    pub settled: bool,
}

/// What [`connected`] found about the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Connection {
    /// READY.
    pub ready: bool,
    /// A new connection (state or address changed, or a replaced registry
    /// settled): `lastConnect` moves and, when READY, readers of its
    /// content refresh.
    pub changed: bool,
}

/// Records a probe in `status.connectionState`.
pub fn connected(status: &mut CatalogSourceStatus, probe: Probe, now: Timestamp) -> Connection {
    let previous = status.connection_state.as_ref();
    let changed = probe.settled
        || previous.is_none_or(|p| {
            p.last_observed_state != probe.state
                || p.address.as_deref() != Some(probe.address.as_str())
        });
    let last_connect = if changed {
        Some(Time(now))
    } else {
        previous.and_then(|p| p.last_connect.clone())
    };
    let ready = probe.state == ConnectivityState::READY;
    status.connection_state = Some(GrpcConnectionState {
        address: Some(probe.address),
        last_observed_state: probe.state,
        last_connect,
    });
    Connection { ready, changed }
}

/// What decides when a catalog is looked at again.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Recheck<'a> {
    /// Its registry is READY.
    pub ready: bool,
    /// A replaced registry is settling.
    pub settling: bool,
    /// An update pod is on its way.
    pub updating: bool,
    /// Its poll schedule, when polled.
    pub schedule: Option<&'a PollSchedule>,
    /// The resync period.
    pub resync: Duration,
    /// How often a READY catalog is checked.
    pub ready_recheck: Duration,
    /// A number in `[0, 1)` drawn by the caller, which spreads the next
    /// poll by upstream's ±10 % ([`super::jitter`]; 0.5 leaves it as it is),
    /// so that catalogs created together do not poll together.
    pub jitter: f64,
}

/// When to look at the catalog again: the soonest of what is pending (a
/// registry not READY, a settling replacement, an update pod, the next
/// poll with its jitter, at least 1 s away) and the periodic check.
pub fn next_check(recheck: &Recheck<'_>) -> Duration {
    let mut next = if recheck.ready {
        recheck.resync.min(recheck.ready_recheck)
    } else {
        NOT_READY_RECHECK
    };
    if recheck.settling {
        next = next.min(REGISTRY_REPLACED_SETTLE);
    }
    if recheck.updating {
        next = next.min(NOT_READY_RECHECK);
    }
    if let Some(schedule) = recheck.schedule {
        let poll = Duration::try_from(super::jitter(schedule.requeue_after, recheck.jitter))
            .unwrap_or(next);
        next = next.min(poll.max(Duration::from_secs(1)));
    }
    next
}
