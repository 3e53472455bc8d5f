//! One reconcile of the Config `cluster`, as a pure function: from the
//! Config, the inventory and what the cluster holds, the writes to make
//! and the status to report.
//!
//! It is level-triggered: what it decides depends only on what it is
//! shown, so running it again after its writes land converges and then
//! decides nothing. The state that must survive a restart lives in the
//! Config's status (management state, `RemovePending`, version, the
//! settings in effect); the only memory outside it is when each import was
//! last retried, which a restart may forget at the cost of one early retry.
//!
//! - **Managed**: every inventory sample not skipped exists as the
//!   inventory has it (image references rewritten for `samplesRegistry`),
//!   labelled managed and annotated with the operator version. An edit to
//!   one is put back, whatever its version annotation says (upstream puts
//!   edits back only when the annotation differs), but tags an ImageStream
//!   gained outside the inventory are kept, as upstream keeps them. Skipped
//!   samples are left in place with the managed label set to `false`.
//!   `SamplesExist` is true once every managed sample exists, and
//!   `status.version` moves to the operator's version once each carries it.
//! - **Unmanaged**: nothing is written but the status.
//! - **Removed**: upstream's three steps, one status write each:
//!   `RemovePending` true; then, once no import is in flight (or after
//!   [`REMOVAL_IMPORT_WAIT`]), the managed samples and the import-error
//!   ConfigMaps are deleted and the status says `Removed`; then, once the
//!   cluster shows them gone, `RemovePending` false.
//! - **Deleted Config**: the finalizer's cleanup: managed samples and
//!   import-error ConfigMaps deleted, `SamplesExist` false, then the
//!   finalizer removed (the controller then makes a new default Config).
//!
//! Import tracking (Managed only): one ConfigMap per ImageStream whose tags
//! failed to import, a retry of those imports every
//! [`IMPORT_RETRY_INTERVAL`], and the `imagestreamtag-to-image` ConfigMap
//! for mirroring, kept in every state.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use jiff::Timestamp;
use k8s_openapi::{api::core::v1::ConfigMap, apimachinery::pkg::apis::meta::v1::ObjectMeta};
use olm_api::{
    conditions::{self, FALSE, TRUE, UNKNOWN},
    openshift::{ImageStream, Template},
    samples::{
        CONFIG_FINALIZER, Config, ConfigCondition, ConfigStatus, MANAGED_LABEL, VERSION_ANNOTATION,
        condition, management_state,
    },
};
use serde_json::Value;

use super::{
    bootstrap::{BOOTSTRAP_ANNOTATION, ImagePolicy, SUPPORTED_ARCHITECTURES},
    imports::{
        IMPORT_ERRORS_MESSAGE, IMPORT_RETRY_INTERVAL, error_config_map, failing_tags,
        import_request, pending_tags, retry_due, tag_to_image_config_map,
    },
    inventory::Inventory,
    registry::with_samples_registry,
};

/// How long a switch to `Removed` waits for imports in flight before it
/// deletes the samples anyway.
pub const REMOVAL_IMPORT_WAIT: Duration = Duration::from_secs(2 * 60);

/// How soon a reconcile that is waiting on the cluster runs again when no
/// watch event wakes it first.
pub const WAIT_POLL: Duration = Duration::from_secs(5);

/// The reason upstream gives every `ConfigurationValid=False`.
pub const INVALID_CONFIGURATION_REASON: &str = "GlobalImageStreamConfigRegistryMismatch";

/// The conditions a status always carries, in upstream's order, and the
/// status each starts with.
const CONDITIONS: [(&str, &str); 7] = [
    (condition::SAMPLES_EXIST, FALSE),
    (condition::IMPORT_CREDENTIALS_EXIST, TRUE),
    (condition::CONFIGURATION_VALID, TRUE),
    (condition::IMAGE_CHANGES_IN_PROGRESS, FALSE),
    (condition::REMOVE_PENDING, FALSE),
    (condition::MIGRATION_IN_PROGRESS, FALSE),
    (condition::IMPORT_IMAGE_ERRORS_EXIST, FALSE),
];

/// What a reconcile is shown.
#[derive(Clone, Copy, Debug)]
pub struct Observed<'a> {
    /// The Config.
    pub config: &'a Config,
    /// The samples of the Config's architecture (empty when there are none).
    pub inventory: &'a Inventory,
    /// The ImageStreams of the samples namespace, by name.
    pub image_streams: &'a BTreeMap<String, ImageStream>,
    /// The Templates of the samples namespace, by name.
    pub templates: &'a BTreeMap<String, Template>,
    /// The import-error ConfigMaps (labelled
    /// [`super::imports::IMAGESTREAM_ERROR_LABEL`])
    /// of the operator namespace, by name.
    pub error_config_maps: &'a BTreeMap<String, ConfigMap>,
    /// The `imagestreamtag-to-image` ConfigMap, when it exists.
    pub tag_to_image: Option<&'a ConfigMap>,
    /// The operator namespace (where the ConfigMaps live).
    pub operator_namespace: &'a str,
    /// The operator's version.
    pub operator_version: &'a str,
    /// The cluster image policy, where the cluster serves it; `Err` with
    /// why when it could not be read (upstream then reads it as blocking).
    pub image_policy: Option<Result<&'a ImagePolicy, &'a str>>,
    /// The last reconcile's failed sample write that should show in the
    /// status (one the API server will keep refusing).
    pub write_failure: Option<&'a WriteFailure>,
    /// When each ImageStream's imports were last retried.
    pub last_retries: &'a BTreeMap<String, Timestamp>,
    /// Now.
    pub now: Timestamp,
}

/// A sample write the API server refused for a reason that will not go
/// away by retrying (forbidden, a webhook's denial, quota, ...), shown as
/// upstream shows it: `SamplesExist=Unknown`, reason
/// `APIServer<StatusReason>Error`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteFailure {
    /// The API server's status reason (`Forbidden`, ...).
    pub status_reason: String,
    /// The error, for the message.
    pub message: String,
}

/// One write to the cluster.
#[derive(Clone, Debug, PartialEq)]
pub enum Write {
    /// Create an ImageStream in the samples namespace.
    CreateImageStream(ImageStream),
    /// Replace an ImageStream (it carries the observed resourceVersion).
    ReplaceImageStream(ImageStream),
    /// Delete an ImageStream by name.
    DeleteImageStream(String),
    /// Create a Template in the samples namespace.
    CreateTemplate(Template),
    /// Replace a Template (it carries the observed resourceVersion).
    ReplaceTemplate(Template),
    /// Delete a Template by name.
    DeleteTemplate(String),
    /// Write a ConfigMap of the operator namespace: created when it carries
    /// no resourceVersion, else replaced (so keys it no longer has go).
    ApplyConfigMap(ConfigMap),
    /// Delete a ConfigMap of the operator namespace by name.
    DeleteConfigMap(String),
    /// Retry a stream's failed imports: record the attempt, and create the
    /// ImageStreamImport when there is one (`None`: no tag can be retried).
    RetryImport {
        /// The ImageStream.
        stream: String,
        /// The ImageStreamImport.
        request: Option<Value>,
    },
    /// Remove the finalizer from the Config (its cleanup is done).
    RemoveFinalizer,
    /// Remove the Config's [`BOOTSTRAP_ANNOTATION`]: it left `Removed`, so
    /// why it once started there no longer matters (upstream forgets it
    /// the same way).
    ForgetBootstrapReason,
}

impl Write {
    /// The kind written, for metrics and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::CreateImageStream(_)
            | Self::ReplaceImageStream(_)
            | Self::DeleteImageStream(_) => "ImageStream",
            Self::CreateTemplate(_) | Self::ReplaceTemplate(_) | Self::DeleteTemplate(_) => {
                "Template"
            }
            Self::ApplyConfigMap(_) | Self::DeleteConfigMap(_) => "ConfigMap",
            Self::RetryImport { .. } => "ImageStreamImport",
            Self::RemoveFinalizer | Self::ForgetBootstrapReason => "Config",
        }
    }

    /// The action, for metrics and logs.
    pub fn verb(&self) -> &'static str {
        match self {
            Self::CreateImageStream(_) | Self::CreateTemplate(_) | Self::RetryImport { .. } => {
                "create"
            }
            Self::ReplaceImageStream(_)
            | Self::ReplaceTemplate(_)
            | Self::ApplyConfigMap(_)
            | Self::RemoveFinalizer
            | Self::ForgetBootstrapReason => "update",
            Self::DeleteImageStream(_) | Self::DeleteTemplate(_) | Self::DeleteConfigMap(_) => {
                "delete"
            }
        }
    }

    /// The name of the object written.
    pub fn name(&self) -> &str {
        match self {
            Self::CreateImageStream(object) | Self::ReplaceImageStream(object) => {
                object.metadata.name.as_deref().unwrap_or_default()
            }
            Self::CreateTemplate(object) | Self::ReplaceTemplate(object) => {
                object.metadata.name.as_deref().unwrap_or_default()
            }
            Self::ApplyConfigMap(object) => object.metadata.name.as_deref().unwrap_or_default(),
            Self::DeleteImageStream(name)
            | Self::DeleteTemplate(name)
            | Self::DeleteConfigMap(name)
            | Self::RetryImport { stream: name, .. } => name,
            Self::RemoveFinalizer | Self::ForgetBootstrapReason => "",
        }
    }
}

/// What one reconcile decided.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// The writes, creates and updates before deletes.
    pub writes: Vec<Write>,
    /// The status to report.
    pub status: ConfigStatus,
    /// Run again after this long even without a change (a wait or a retry
    /// is due).
    pub requeue_after: Option<Duration>,
    /// The managed ImageStreams with failed imports, sorted.
    pub failing_streams: Vec<String>,
    /// Every inventory ImageStream and whether its imports fail (skipped
    /// ones never do); empty unless Managed.
    pub streams: Vec<(String, bool)>,
    /// Things worth a log line that are not errors.
    pub notes: Vec<String>,
}

/// Decides one reconcile.
pub fn plan(observed: &Observed<'_>) -> Plan {
    let mut plan = Plan {
        status: observed.config.status.clone().unwrap_or_default(),
        ..Plan::default()
    };
    ensure_conditions(&mut plan.status, observed.now);
    if observed.config.metadata.deletion_timestamp.is_some() {
        finalize(observed, &mut plan);
        return plan;
    }
    let spec = &observed.config.spec;
    let state = spec.effective_management_state();
    if state != management_state::REMOVED
        && observed
            .config
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(BOOTSTRAP_ANNOTATION))
    {
        plan.writes.push(Write::ForgetBootstrapReason);
    }
    match state {
        management_state::UNMANAGED => unmanaged(observed, &mut plan),
        management_state::REMOVED => {
            // Kept while Removed: it is what a disconnected cluster mirrors
            // from before it turns the samples on.
            keep_tag_to_image(observed, &mut plan);
            removed(observed, &mut plan);
        }
        management_state::MANAGED => {
            let forced = spec.management_state.as_deref() == Some(management_state::FORCE);
            match validate(observed) {
                Ok(()) => {
                    let message = if forced {
                        format!(
                            "Unexpected management state {} received, switching to Managed",
                            management_state::FORCE
                        )
                    } else {
                        String::new()
                    };
                    set(
                        &mut plan.status,
                        condition::CONFIGURATION_VALID,
                        TRUE,
                        "",
                        &message,
                        observed.now,
                    );
                    keep_tag_to_image(observed, &mut plan);
                    managed(observed, &mut plan);
                }
                Err(message) => set(
                    &mut plan.status,
                    condition::CONFIGURATION_VALID,
                    FALSE,
                    INVALID_CONFIGURATION_REASON,
                    &message,
                    observed.now,
                ),
            }
        }
        other => {
            // The schema allows no other value; an older CRD might.
            set(
                &mut plan.status,
                condition::CONFIGURATION_VALID,
                FALSE,
                INVALID_CONFIGURATION_REASON,
                &format!(
                    "management state {other} unsupported; only Managed, Unmanaged, Removed and Force are"
                ),
                observed.now,
            );
        }
    }
    order_writes(&mut plan.writes);
    plan
}

/// Checks the spec as upstream does, in its order, returning upstream's
/// message for the first problem.
fn validate(observed: &Observed<'_>) -> Result<(), String> {
    let spec = &observed.config.spec;
    if let Some(unsupported) = spec
        .architectures
        .iter()
        .find(|arch| !SUPPORTED_ARCHITECTURES.contains(&arch.as_str()))
    {
        return Err(format!(
            "architecture {unsupported} unsupported; only support {}",
            SUPPORTED_ARCHITECTURES.join(",")
        ));
    }
    let status = observed.config.status.clone().unwrap_or_default();
    let processed = conditions::is_true(&status.conditions, condition::SAMPLES_EXIST)
        || conditions::is_true(&status.conditions, condition::IMAGE_CHANGES_IN_PROGRESS);
    if processed && !status.architectures.is_empty() && status.architectures != spec.architectures {
        return Err(if status.architectures.len() == spec.architectures.len() {
            format!(
                "cannot change architectures from {} to {}",
                status.architectures.join(" "),
                spec.architectures.join(" ")
            )
        } else {
            format!(
                "cannot change architectures from {} to {}",
                go_string_slice(&status.architectures),
                go_string_slice(&spec.architectures)
            )
        });
    }
    let registry = spec.samples_registry.as_deref().unwrap_or_default();
    match observed.image_policy {
        Some(Ok(policy)) if policy.blocks(registry) => Err(format!(
            "global openshift image configuration prevents the creation of imagestreams using the registry {registry}"
        )),
        Some(Err(why)) => Err(format!(
            "the global openshift image configuration cannot be read, so it may prevent the creation of imagestreams using the registry {registry}: {why}"
        )),
        _ => Ok(()),
    }
}

/// A string list as Go's `%#v` prints it: `[]string{"a", "b"}`.
fn go_string_slice(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|item| format!("{item:?}")).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

fn managed(observed: &Observed<'_>, plan: &mut Plan) {
    let spec = &observed.config.spec;
    let now = observed.now;
    plan.status.management_state = Some(management_state::MANAGED.to_owned());
    set(
        &mut plan.status,
        condition::REMOVE_PENDING,
        FALSE,
        "",
        "",
        now,
    );

    let skipped_streams: BTreeSet<&str> = spec
        .skipped_imagestreams
        .iter()
        .map(String::as_str)
        .collect();
    let skipped_templates: BTreeSet<&str> =
        spec.skipped_templates.iter().map(String::as_str).collect();
    let registry = spec
        .samples_registry
        .as_deref()
        .filter(|registry| !registry.is_empty());
    let version = observed.operator_version;
    let mut all_present = true;
    let mut all_at_version = true;

    for (name, inventory_stream) in &observed.inventory.image_streams {
        let found = observed.image_streams.get(name);
        if skipped_streams.contains(name.as_str()) {
            if let Some(found) = found.filter(|found| is_managed(&found.metadata)) {
                let mut unmanaged = found.clone();
                unmanaged.status = Value::Null;
                label_unmanaged(&mut unmanaged.metadata);
                plan.writes.push(Write::ReplaceImageStream(unmanaged));
            }
            continue;
        }
        let desired = desired_stream(inventory_stream, registry, version, found);
        match found {
            None => {
                all_present = false;
                plan.writes.push(Write::CreateImageStream(desired));
            }
            // Its deletion event wakes the reconcile that re-creates it.
            Some(found) if found.metadata.deletion_timestamp.is_some() => all_present = false,
            Some(found) => {
                all_at_version &= at_version(&found.metadata, version);
                if !stream_in_sync(found, &desired) {
                    plan.writes
                        .push(Write::ReplaceImageStream(replacement_stream(
                            found, desired,
                        )));
                }
            }
        }
    }
    for (name, inventory_template) in &observed.inventory.templates {
        let found = observed.templates.get(name);
        if skipped_templates.contains(name.as_str()) {
            if let Some(found) = found.filter(|found| is_managed(&found.metadata)) {
                let mut unmanaged = found.clone();
                label_unmanaged(&mut unmanaged.metadata);
                plan.writes.push(Write::ReplaceTemplate(unmanaged));
            }
            continue;
        }
        let desired = desired_template(inventory_template, version);
        match found {
            None => {
                all_present = false;
                plan.writes.push(Write::CreateTemplate(desired));
            }
            Some(found) if found.metadata.deletion_timestamp.is_some() => all_present = false,
            Some(found) => {
                all_at_version &= at_version(&found.metadata, version);
                if !template_in_sync(found, &desired) {
                    plan.writes
                        .push(Write::ReplaceTemplate(replacement_template(found, desired)));
                }
            }
        }
    }

    track_imports(observed, &skipped_streams, plan);

    match observed.write_failure {
        Some(failure) => set(
            &mut plan.status,
            condition::SAMPLES_EXIST,
            UNKNOWN,
            &format!("APIServer{}Error", failure.status_reason),
            &format!("error creating samples: {}", failure.message),
            now,
        ),
        None => set(
            &mut plan.status,
            condition::SAMPLES_EXIST,
            if all_present { TRUE } else { FALSE },
            "",
            "",
            now,
        ),
    }
    set(
        &mut plan.status,
        condition::IMPORT_CREDENTIALS_EXIST,
        TRUE,
        "",
        "",
        now,
    );
    if all_present {
        // The samples now reflect the spec: it is the configuration in
        // effect, against which a later change of architecture is judged.
        plan.status.samples_registry = spec.samples_registry.clone().filter(|r| !r.is_empty());
        plan.status.architectures.clone_from(&spec.architectures);
        plan.status
            .skipped_imagestreams
            .clone_from(&spec.skipped_imagestreams);
        plan.status
            .skipped_templates
            .clone_from(&spec.skipped_templates);
        if all_at_version {
            plan.status.version = Some(version.to_owned());
        }
    }
}

/// Import-error ConfigMaps, import retries and `ImportImageErrorsExist`.
fn track_imports(observed: &Observed<'_>, skipped: &BTreeSet<&str>, plan: &mut Plan) {
    let now = observed.now;
    let mut kept = BTreeSet::new();
    for name in observed.inventory.image_streams.keys() {
        if skipped.contains(name.as_str()) {
            plan.streams.push((name.clone(), false));
            continue;
        }
        let Some(found) = observed.image_streams.get(name) else {
            plan.streams.push((name.clone(), false));
            continue;
        };
        let failing = failing_tags(found);
        plan.streams.push((name.clone(), !failing.is_empty()));
        if failing.is_empty() {
            continue;
        }
        plan.failing_streams.push(name.clone());
        kept.insert(name.clone());
        let mut desired = error_config_map(name, &failing, observed.operator_namespace);
        let current = observed.error_config_maps.get(name);
        if current.map(|cm| &cm.data) != Some(&desired.data) {
            desired.metadata.resource_version =
                current.and_then(|cm| cm.metadata.resource_version.clone());
            plan.writes.push(Write::ApplyConfigMap(desired));
        }
        let last = observed.last_retries.get(name).copied();
        if retry_due(last, now, IMPORT_RETRY_INTERVAL) {
            let tags: Vec<String> = failing.keys().cloned().collect();
            // The attempt is recorded even when no tag can be retried, so
            // that saying so waits for the next interval too.
            let request = match import_request(found, &tags) {
                Ok(request) => {
                    plan.notes.extend(request.left_out.iter().map(|(tag, why)| {
                        format!("not retrying the import of {name}:{tag}: {why}")
                    }));
                    request.body
                }
                Err(error) => {
                    plan.notes
                        .push(format!("not retrying the imports of {name}: {error}"));
                    None
                }
            };
            plan.writes.push(Write::RetryImport {
                stream: name.clone(),
                request,
            });
            plan.requeue_after = soonest(plan.requeue_after, IMPORT_RETRY_INTERVAL);
        } else if let Some(last) = last {
            let due = last
                .checked_add(IMPORT_RETRY_INTERVAL)
                .ok()
                .and_then(|due| Duration::try_from(due.duration_since(now)).ok())
                .unwrap_or(WAIT_POLL);
            plan.requeue_after = soonest(plan.requeue_after, due.max(WAIT_POLL));
        }
    }
    for name in observed.error_config_maps.keys() {
        if !kept.contains(name) {
            plan.writes.push(Write::DeleteConfigMap(name.clone()));
        }
    }
    let (status, message) = if plan.failing_streams.is_empty() {
        (FALSE, "")
    } else {
        (TRUE, IMPORT_ERRORS_MESSAGE)
    };
    set(
        &mut plan.status,
        condition::IMPORT_IMAGE_ERRORS_EXIST,
        status,
        "",
        message,
        now,
    );
}

fn unmanaged(observed: &Observed<'_>, plan: &mut Plan) {
    plan.status.management_state = Some(management_state::UNMANAGED.to_owned());
    plan.status.version = Some(observed.operator_version.to_owned());
    set(
        &mut plan.status,
        condition::REMOVE_PENDING,
        FALSE,
        "",
        "",
        observed.now,
    );
}

fn removed(observed: &Observed<'_>, plan: &mut Plan) {
    let now = observed.now;
    let reported_removed =
        plan.status.management_state.as_deref() == Some(management_state::REMOVED);
    let remove_pending = conditions::find(&plan.status.conditions, condition::REMOVE_PENDING)
        .filter(|c| c.status == TRUE)
        .cloned();
    plan.status.version = Some(observed.operator_version.to_owned());
    match (reported_removed, remove_pending) {
        // Step 1: say a removal is pending, and nothing else.
        (false, None) => set(
            &mut plan.status,
            condition::REMOVE_PENDING,
            TRUE,
            "",
            "",
            now,
        ),
        // Step 2: remove, once imports in flight are done or waited for.
        (false, Some(pending)) => {
            let in_flight: Vec<&String> = observed
                .image_streams
                .iter()
                .filter(|(_, stream)| is_managed(&stream.metadata))
                .filter(|(_, stream)| !pending_tags(stream).is_empty())
                .map(|(name, _)| name)
                .collect();
            let waited = pending
                .last_transition_time
                .map(|since| now.duration_since(since.0))
                .and_then(|waited| Duration::try_from(waited).ok())
                .unwrap_or(REMOVAL_IMPORT_WAIT);
            if !in_flight.is_empty() && waited < REMOVAL_IMPORT_WAIT {
                plan.notes.push(format!(
                    "waiting for imports in flight before removing the samples: {}",
                    in_flight
                        .iter()
                        .map(|name| name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
                plan.requeue_after = Some(WAIT_POLL.min(REMOVAL_IMPORT_WAIT - waited));
                return;
            }
            delete_managed(observed, plan);
            plan.status.management_state = Some(management_state::REMOVED.to_owned());
            plan.status.architectures.clear();
            for done in [
                condition::SAMPLES_EXIST,
                condition::IMAGE_CHANGES_IN_PROGRESS,
                condition::IMPORT_IMAGE_ERRORS_EXIST,
            ] {
                set(&mut plan.status, done, FALSE, "", "", now);
            }
        }
        // Step 3: once the cluster shows them gone, the removal is done.
        // What is still there is deleted again (a cache behind the API
        // server), what is terminating is waited for, and said so.
        (true, Some(_)) => {
            let remaining = delete_managed(observed, plan);
            if remaining.is_empty() {
                set(
                    &mut plan.status,
                    condition::REMOVE_PENDING,
                    FALSE,
                    "",
                    "",
                    now,
                );
            } else {
                set(
                    &mut plan.status,
                    condition::REMOVE_PENDING,
                    TRUE,
                    "",
                    &waiting_for(&remaining),
                    now,
                );
            }
        }
        (true, None) => {}
    }
}

/// The finalizer's cleanup of a deleted Config.
fn finalize(observed: &Observed<'_>, plan: &mut Plan) {
    let has_finalizer = observed
        .config
        .metadata
        .finalizers
        .as_ref()
        .is_some_and(|finalizers| finalizers.iter().any(|f| f == CONFIG_FINALIZER));
    if !has_finalizer {
        return;
    }
    let samples_reported = conditions::is_true(&plan.status.conditions, condition::SAMPLES_EXIST);
    let remaining = delete_managed(observed, plan);
    if remaining.is_empty() && !samples_reported {
        plan.writes.push(Write::RemoveFinalizer);
    } else {
        // The status says so first; the deletions' events (or this status
        // write's) wake the reconcile that removes the finalizer.
        let message = if remaining.is_empty() {
            String::new()
        } else {
            waiting_for(&remaining)
        };
        set(
            &mut plan.status,
            condition::SAMPLES_EXIST,
            FALSE,
            "",
            &message,
            observed.now,
        );
    }
}

/// What a removal still waits for, for a condition message.
fn waiting_for(remaining: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut names = remaining[..remaining.len().min(SHOWN)].join(", ");
    if remaining.len() > SHOWN {
        names.push_str(&format!(" and {} more", remaining.len() - SHOWN));
    }
    format!("waiting for {} to be deleted: {names}", remaining.len())
}

/// Deletes every sample labelled managed and every import-error ConfigMap
/// the cluster shows, but those already terminating (deleting them again
/// changes nothing); returns every one still there (`kind/name`), the
/// terminating ones included.
///
/// As upstream, "managed" is the label, not the inventory: samples an older
/// release managed and this one no longer ships go too.
fn delete_managed(observed: &Observed<'_>, plan: &mut Plan) -> Vec<String> {
    let mut remaining = Vec::new();
    for (name, stream) in observed.image_streams {
        if is_managed(&stream.metadata) {
            remaining.push(format!("imagestream/{name}"));
            if stream.metadata.deletion_timestamp.is_none() {
                plan.writes.push(Write::DeleteImageStream(name.clone()));
            }
        }
    }
    for (name, template) in observed.templates {
        if is_managed(&template.metadata) {
            remaining.push(format!("template/{name}"));
            if template.metadata.deletion_timestamp.is_none() {
                plan.writes.push(Write::DeleteTemplate(name.clone()));
            }
        }
    }
    for (name, config_map) in observed.error_config_maps {
        remaining.push(format!("configmap/{name}"));
        if config_map.metadata.deletion_timestamp.is_none() {
            plan.writes.push(Write::DeleteConfigMap(name.clone()));
        }
    }
    remaining
}

/// Keeps the `imagestreamtag-to-image` ConfigMap equal to the inventory's
/// map, annotated with the operator version.
fn keep_tag_to_image(observed: &Observed<'_>, plan: &mut Plan) {
    if observed.inventory.image_streams.is_empty() {
        return;
    }
    let desired = tag_to_image_config_map(
        observed.inventory.tag_to_image(),
        observed.operator_version,
        observed.operator_namespace,
    );
    let current = observed.tag_to_image;
    let same = current.is_some_and(|current| {
        current.data == desired.data
            && version_of(&current.metadata) == Some(observed.operator_version)
    });
    if !same {
        let mut desired = desired;
        desired.metadata.resource_version =
            current.and_then(|cm| cm.metadata.resource_version.clone());
        plan.writes.push(Write::ApplyConfigMap(desired));
    }
}

/// Creates and updates first, then deletes, each group in a stable order.
fn order_writes(writes: &mut [Write]) {
    writes.sort_by_key(|write| match write {
        Write::ApplyConfigMap(_) => 0,
        Write::CreateImageStream(_) | Write::ReplaceImageStream(_) => 1,
        Write::CreateTemplate(_) | Write::ReplaceTemplate(_) => 2,
        Write::RetryImport { .. } => 3,
        Write::DeleteImageStream(_) | Write::DeleteTemplate(_) | Write::DeleteConfigMap(_) => 4,
        Write::RemoveFinalizer | Write::ForgetBootstrapReason => 5,
    });
}

/// The ImageStream the inventory asks for: image references rewritten,
/// labelled managed, annotated with `version`, and keeping the tags the
/// cluster's copy has beyond the inventory's (as upstream keeps them, so
/// that tags dropped from a newer inventory stay usable).
pub fn desired_stream(
    inventory: &ImageStream,
    registry: Option<&str>,
    version: &str,
    found: Option<&ImageStream>,
) -> ImageStream {
    let mut desired = with_samples_registry(inventory, registry);
    desired.status = Value::Null;
    label_managed(&mut desired.metadata, version);
    if let Some(found) = found {
        let extra: Vec<Value> = found
            .spec
            .get("tags")
            .and_then(Value::as_array)
            .map(|tags| {
                let known: BTreeSet<&str> = desired
                    .spec
                    .get("tags")
                    .and_then(Value::as_array)
                    .map(|tags| tags.iter().filter_map(tag_name).collect())
                    .unwrap_or_default();
                tags.iter()
                    .filter(|tag| tag_name(tag).is_some_and(|name| !known.contains(name)))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        if !extra.is_empty()
            && let Some(tags) = desired
                .spec
                .as_object_mut()
                .map(|spec| {
                    spec.entry("tags")
                        .or_insert_with(|| Value::Array(Vec::new()))
                })
                .and_then(Value::as_array_mut)
        {
            tags.extend(extra);
        }
    }
    desired
}

fn tag_name(tag: &Value) -> Option<&str> {
    tag.get("name").and_then(Value::as_str)
}

/// The Template the inventory asks for: labelled managed and annotated
/// with `version`.
pub fn desired_template(inventory: &Template, version: &str) -> Template {
    let mut desired = inventory.clone();
    label_managed(&mut desired.metadata, version);
    desired
}

fn label_managed(metadata: &mut ObjectMeta, version: &str) {
    metadata.namespace = None;
    metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(MANAGED_LABEL.to_owned(), "true".to_owned());
    metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(VERSION_ANNOTATION.to_owned(), version.to_owned());
}

fn label_unmanaged(metadata: &mut ObjectMeta) {
    metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(MANAGED_LABEL.to_owned(), "false".to_owned());
}

/// Whether an object carries the managed label (`true`, spaces ignored,
/// as upstream reads it).
pub fn is_managed(metadata: &ObjectMeta) -> bool {
    metadata
        .labels
        .as_ref()
        .and_then(|labels| labels.get(MANAGED_LABEL))
        .is_some_and(|value| value.trim() == "true")
}

fn version_of(metadata: &ObjectMeta) -> Option<&str> {
    metadata
        .annotations
        .as_ref()?
        .get(VERSION_ANNOTATION)
        .map(String::as_str)
}

fn at_version(metadata: &ObjectMeta, version: &str) -> bool {
    version_of(metadata) == Some(version)
}

/// Whether the cluster's ImageStream has everything the desired one has.
///
/// `spec.tags` is compared as a map by tag name: OpenShift's API server
/// keeps tags in a map and returns them sorted by name, whatever order they
/// were sent in, and it reads a `referencePolicy.type` of `""` as `Source`.
pub fn stream_in_sync(found: &ImageStream, desired: &ImageStream) -> bool {
    let without_tags = |spec: &Value| {
        let mut spec = spec.clone();
        if let Some(spec) = spec.as_object_mut() {
            spec.remove("tags");
        }
        spec
    };
    metadata_in_sync(&found.metadata, &desired.metadata)
        && contains(&without_tags(&found.spec), &without_tags(&desired.spec))
        && tags_in_sync(&found.spec, &desired.spec)
}

/// The tags of a spec by name, as the API server stores them.
fn tags_by_name(spec: &Value) -> BTreeMap<&str, Value> {
    spec.get("tags")
        .and_then(Value::as_array)
        .map(|tags| {
            tags.iter()
                .filter_map(|tag| Some((tag_name(tag)?, normalized_tag(tag))))
                .collect()
        })
        .unwrap_or_default()
}

fn normalized_tag(tag: &Value) -> Value {
    let mut tag = tag.clone();
    if let Some(policy) = tag
        .get_mut("referencePolicy")
        .and_then(Value::as_object_mut)
        && policy.get("type").is_none_or(|t| t == "")
    {
        policy.insert("type".to_owned(), Value::String("Source".to_owned()));
    }
    tag
}

fn tags_in_sync(found: &Value, desired: &Value) -> bool {
    let (found, desired) = (tags_by_name(found), tags_by_name(desired));
    found.len() == desired.len()
        && desired.iter().all(|(name, tag)| {
            found
                .get(name)
                .is_some_and(|found_tag| contains(found_tag, tag))
        })
}

/// Whether the cluster's Template has everything the desired one has.
pub fn template_in_sync(found: &Template, desired: &Template) -> bool {
    metadata_in_sync(&found.metadata, &desired.metadata)
        && desired
            .body
            .iter()
            .all(|(key, value)| contains(found.body.get(key).unwrap_or(&Value::Null), value))
}

fn metadata_in_sync(found: &ObjectMeta, desired: &ObjectMeta) -> bool {
    let subset = |found: &Option<BTreeMap<String, String>>,
                  desired: &Option<BTreeMap<String, String>>| {
        desired.iter().flatten().all(|(key, value)| {
            found
                .as_ref()
                .and_then(|found| found.get(key))
                .is_some_and(|found| found == value)
        })
    };
    subset(&found.labels, &desired.labels) && subset(&found.annotations, &desired.annotations)
}

/// Whether `found` has everything `desired` has: every field of an object
/// (a `null` in `desired` asks for nothing), the same number of list items
/// each containing the desired one, and equal scalars. Fields the API
/// server fills in (defaults, generations) are thus not drift; a changed
/// value, a removed field or an added list item is.
pub fn contains(found: &Value, desired: &Value) -> bool {
    match (found, desired) {
        (_, Value::Null) => true,
        (Value::Object(found), Value::Object(desired)) => desired
            .iter()
            .all(|(key, value)| contains(found.get(key).unwrap_or(&Value::Null), value)),
        (Value::Array(found), Value::Array(desired)) => {
            found.len() == desired.len()
                && found
                    .iter()
                    .zip(desired)
                    .all(|(found, desired)| contains(found, desired))
        }
        (found, desired) => found == desired,
    }
}

/// The cluster's ImageStream with the desired spec, labels and annotations,
/// keeping its identity (resourceVersion, uid) and other metadata.
fn replacement_stream(found: &ImageStream, desired: ImageStream) -> ImageStream {
    ImageStream {
        metadata: merged_metadata(&found.metadata, desired.metadata),
        status: Value::Null,
        ..desired
    }
}

/// The cluster's Template with the desired body, labels and annotations.
fn replacement_template(found: &Template, desired: Template) -> Template {
    Template {
        metadata: merged_metadata(&found.metadata, desired.metadata),
        ..desired
    }
}

fn merged_metadata(found: &ObjectMeta, desired: ObjectMeta) -> ObjectMeta {
    let merge = |found: &Option<BTreeMap<String, String>>,
                 desired: Option<BTreeMap<String, String>>| {
        let mut merged = found.clone().unwrap_or_default();
        merged.extend(desired.unwrap_or_default());
        Some(merged)
    };
    ObjectMeta {
        labels: merge(&found.labels, desired.labels),
        annotations: merge(&found.annotations, desired.annotations),
        managed_fields: None,
        ..found.clone()
    }
}

/// Adds the conditions a status always carries, in upstream's order.
fn ensure_conditions(status: &mut ConfigStatus, now: Timestamp) {
    for (type_, initial) in CONDITIONS {
        if conditions::find(&status.conditions, type_).is_none() {
            conditions::set(
                &mut status.conditions,
                ConfigCondition::new(type_, initial, "", ""),
                now,
            );
        }
    }
}

fn set(
    status: &mut ConfigStatus,
    type_: &str,
    value: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) {
    conditions::set(
        &mut status.conditions,
        ConfigCondition::new(type_, value, reason, message),
        now,
    );
}

fn soonest(current: Option<Duration>, candidate: Duration) -> Option<Duration> {
    Some(current.map_or(candidate, |current| current.min(candidate)))
}

#[cfg(test)]
mod tests;
