//! The registry pods of an image or ConfigMap catalog, decided: exactly one
//! pod with the current spec serves; a polled catalog's new content starts
//! as an update pod that takes over once it is ready (and, for a guarded
//! catalog, once the promotion guard passed it); outdated, broken and
//! evicted pods go. [`plan`] turns what the cluster holds into ordered
//! [`PodAction`]s; the controller carries them out, resolving image
//! digests where an action asks for one.

use k8s_openapi::api::core::v1::Pod;
use olm_api::{catalog_source::CatalogSourceConditionReason, labels};
use olm_oci::policy::RegistryRule;

use super::{IMAGE_DIGEST_ANNOTATION, PROMOTED_AT_ANNOTATION, PollSchedule, pod_broken, pod_ready};
use crate::decide::promotion::{self, Refusal};

/// The grace period of a registry pod that is replaced or outdated.
pub const GRACE_SECONDS: u32 = 1;

/// What the promotion guard found in a ready update pod's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContentCheck {
    /// Every bundle image is allowed.
    Allowed,
    /// These bundles are not.
    Refused(Vec<Refusal>),
    /// The content could not be read yet (why); look again later.
    Pending(String),
}

/// Everything [`plan`] looks at.
#[derive(Debug, Clone, Copy)]
pub struct RegistryPods<'a> {
    /// The pod the current spec asks for.
    pub desired: &'a Pod,
    /// The pods labelled as serving the catalog, terminating ones included.
    pub serving: &'a [&'a Pod],
    /// The catalog's update pods that are not terminating.
    pub updates: &'a [&'a Pod],
    /// The catalog image, for an image catalog.
    pub image: Option<&'a str>,
    /// Its poll schedule, for a polled image catalog.
    pub schedule: Option<&'a PollSchedule>,
    /// Whether the catalog asks for the promotion guard
    /// ([`promotion::guarded`]); only image catalogs are guarded.
    pub guard_requested: bool,
    /// What the guard found in the update pods [`to_check`] named, by pod
    /// name; a pod with no entry counts as not checked yet.
    pub checks: &'a [(String, ContentCheck)],
    /// The allowed-registries policy, for the guard's messages.
    pub allowed_registries: &'a [RegistryRule],
}

impl RegistryPods<'_> {
    /// Whether the promotion guard watches the catalog: an image catalog
    /// that asks for it.
    pub fn guarded(&self) -> bool {
        self.guard_requested && self.image.is_some()
    }
}

/// One thing to do about the registry pods, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodAction {
    /// Remember that the guard refused this content (it is not started
    /// again), with a Warning event when that is news.
    Block {
        /// The content, as [`promotion::content_key`] names it.
        content: (String, String),
        /// `NewContentUnhealthy` or `BundleRegistryNotAllowed`.
        reason: CatalogSourceConditionReason,
        /// What was refused and why.
        message: String,
    },
    /// Delete this pod.
    Delete {
        /// The pod's name.
        name: String,
        /// Its grace period, in seconds.
        grace: u32,
    },
    /// Make this update pod the serving one (relabel it).
    Promote {
        /// The pod's name.
        name: String,
        /// For a guarded catalog, the content the guard passed (its image).
        passed: Option<String>,
    },
    /// Start the desired pod as an update pod (a guarded catalog whose spec
    /// changed: its old pods serve until the new content passes), pinned to
    /// the image's digest when it resolves; not if the guard refused
    /// exactly that content ([`may_start`]).
    StartUpdate,
    /// Create the desired pod to serve now. `pin`: pinned to the image's
    /// current digest (a polled catalog, so later polls compare like with
    /// like; see [`fresh_digest`]).
    CreateServing {
        /// Whether to pin it.
        pin: bool,
    },
    /// Poll the catalog image: new content (a digest other than `serving`)
    /// starts as an update pod ([`may_start`] permitting).
    Poll {
        /// The digest the serving pods run.
        serving: Option<String>,
    },
    /// Remember the digest the catalog's serving pods run (a guarded
    /// catalog comes back on it while newer content is refused).
    Served(String),
}

/// What [`plan`] decided.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodPlan {
    /// The actions, in order.
    pub actions: Vec<PodAction>,
    /// An update pod is on its way (not ready, or not checked yet).
    pub pending: bool,
    /// A serving pod is created or promoted: new content.
    pub replaced: bool,
}

fn spec_hash(pod: &Pod) -> Option<&str> {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(labels::POD_SPEC_HASH))
        .map(String::as_str)
}

fn name(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}

fn terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// Whether the pod is being evicted (the `DisruptionTarget` condition).
pub fn disrupted(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter()
                .any(|c| c.type_ == "DisruptionTarget" && c.status == "True")
        })
}

/// The update pods whose content the guard must check before [`plan`]:
/// for a guarded catalog, those with the current spec that are ready and
/// not broken.
pub fn to_check<'a>(observed: &RegistryPods<'a>) -> Vec<&'a Pod> {
    if !observed.guarded() {
        return Vec::new();
    }
    let wanted = spec_hash(observed.desired);
    observed
        .updates
        .iter()
        .copied()
        .filter(|p| spec_hash(p) == wanted && !pod_broken(p) && pod_ready(p))
        .collect()
}

/// Since when `pod` serves: when it was promoted, or else when it was
/// created.
fn serving_since(pod: &Pod) -> Option<jiff::Timestamp> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(PROMOTED_AT_ANNOTATION))
        .and_then(|at| at.parse().ok())
        .or_else(|| pod.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

/// Decides what to do about the registry pods.
pub fn plan(observed: &RegistryPods<'_>) -> PodPlan {
    let wanted = spec_hash(observed.desired);
    let (mut current, stale): (Vec<&Pod>, Vec<&Pod>) =
        observed.serving.iter().copied().partition(|p| {
            !terminating(p) && !disrupted(p) && spec_hash(p).is_some() && spec_hash(p) == wanted
        });
    // Several pods serve the current spec when a promotion is seen half
    // done (the cache has the relabelled pod but not yet the old one's
    // deletion), or was cut short between the two. The one that began to
    // serve last stays; polling from the others' digest would start their
    // successor's content again, and leaving them would serve two contents.
    current.sort_by_key(|p| std::cmp::Reverse((serving_since(p), p.metadata.name.as_deref())));
    let surplus = current.split_off(current.len().min(1));
    let serving_digest = current.iter().find_map(|p| {
        p.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(IMAGE_DIGEST_ANNOTATION))
            .cloned()
    });
    let guarded = observed.guarded();
    // A guarded catalog whose spec changed keeps its ready pods serving the
    // previous content until the guard lets the new content through.
    let previous: Vec<&Pod> = if guarded && current.is_empty() {
        stale
            .iter()
            .copied()
            .filter(|p| !terminating(p) && !disrupted(p) && pod_ready(p))
            .collect()
    } else {
        Vec::new()
    };
    let mut plan = PodPlan::default();
    let delete = |pod: &Pod, grace: u32| PodAction::Delete {
        name: name(pod),
        grace,
    };
    for extra in surplus {
        plan.actions.push(delete(extra, GRACE_SECONDS));
    }

    // A ready update pod with the current spec takes over from the serving
    // pods (once the guard agrees, for a guarded catalog); a broken or
    // outdated one is dropped.
    let mut promoted = false;
    for update in observed.updates.iter().copied() {
        let same_spec = spec_hash(update).is_some() && spec_hash(update) == wanted;
        if !same_spec || promoted {
            plan.actions.push(delete(update, GRACE_SECONDS));
            continue;
        }
        let content = promotion::content_key(update);
        if pod_broken(update) {
            if guarded {
                plan.actions.push(PodAction::Block {
                    message: promotion::unhealthy_message(&content.1),
                    content,
                    reason: CatalogSourceConditionReason::NEW_CONTENT_UNHEALTHY,
                });
            }
            plan.actions.push(delete(update, GRACE_SECONDS));
            continue;
        }
        if !pod_ready(update) {
            plan.pending = true;
            continue;
        }
        let mut passed = None;
        if guarded {
            let check = observed
                .checks
                .iter()
                .find(|(pod, _)| update.metadata.name.as_deref() == Some(pod.as_str()))
                .map(|(_, check)| check);
            match check {
                Some(ContentCheck::Allowed) => passed = Some(content.1),
                Some(ContentCheck::Refused(refused)) => {
                    let rules = observed.allowed_registries;
                    plan.actions.push(PodAction::Block {
                        message: promotion::refused_message(&content.1, refused, rules),
                        content,
                        reason: CatalogSourceConditionReason::BUNDLE_REGISTRY_NOT_ALLOWED,
                    });
                    plan.actions.push(delete(update, GRACE_SECONDS));
                    continue;
                }
                Some(ContentCheck::Pending(_)) | None => {
                    plan.pending = true;
                    continue;
                }
            }
        }
        plan.actions.push(PodAction::Promote {
            name: name(update),
            passed,
        });
        promoted = true;
    }

    if promoted {
        for old in current.iter().chain(&previous) {
            plan.actions.push(delete(old, GRACE_SECONDS));
        }
        plan.replaced = true;
    } else if current.is_empty() && !previous.is_empty() {
        // Guarded replacement: the new spec starts as an update pod, unless
        // one is on its way.
        if !plan.pending {
            plan.actions.push(PodAction::StartUpdate);
        }
    } else if current.is_empty() {
        // No serving pod: start one.
        let pin = observed.image.is_some() && observed.schedule.is_some();
        plan.actions.push(PodAction::CreateServing { pin });
        plan.replaced = true;
    } else if observed.image.is_some()
        && observed.schedule.is_some_and(|s| s.due)
        && observed.updates.is_empty()
    {
        // Polling: only new content starts an update pod, which serves once
        // it is ready (and, for a guarded catalog, once the guard agrees).
        plan.actions.push(PodAction::Poll {
            serving: serving_digest.clone(),
        });
    }
    if guarded
        && !promoted
        && let Some(digest) = serving_digest
    {
        plan.actions.push(PodAction::Served(digest));
    }
    // The previous pods were deleted above when the new content was
    // promoted, and are kept serving otherwise.
    let previous_pod = |p: &Pod| previous.iter().any(|k| std::ptr::eq(*k, p));
    for old in stale.iter().filter(|p| !terminating(p) && !previous_pod(p)) {
        let grace = if disrupted(old) { 0 } else { GRACE_SECONDS };
        plan.actions.push(delete(old, grace));
    }
    plan
}

/// Whether `candidate` (the desired pod, pinned) may start as an update
/// pod: not when the guard refused exactly that content last.
pub fn may_start(candidate: &Pod, blocked: Option<&(String, String)>) -> bool {
    blocked.is_none_or(|blocked| *blocked != promotion::content_key(candidate))
}

/// The digest a polled catalog's fresh serving pod runs: the image's
/// current one, unless the guard refused exactly that content (a guarded
/// catalog whose pod went comes back on what it served last, when known).
pub fn fresh_digest(
    candidate: &Pod,
    resolved: &str,
    guarded: bool,
    blocked: Option<&(String, String)>,
    last_served: Option<&str>,
) -> String {
    let refused = guarded && !may_start(candidate, blocked);
    match last_served {
        Some(served) if refused => served.to_owned(),
        _ => resolved.to_owned(),
    }
}
