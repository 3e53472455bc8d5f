//! One unpack: read what is stored, decide, pull the image with the
//! catalog's pull secrets, store content or a failure, announce it.

use std::{
    collections::{BTreeMap, HashSet},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, PostParams, Preconditions},
    runtime::reflector::{ObjectRef, Store},
};
use olm_api::{catalog_source::CatalogSource, operator_group::OperatorGroup};
use olm_bus::{
    Bus,
    events::{self, BundleUnpacked, ObjectRef as BusRef, bundle_unpacked::Outcome},
};
use olm_oci::{Client as OciClient, ClientOptions, Reference};
use tokio::sync::Semaphore;
use tracing::Instrument as _;

use super::UnpackerConfig;
use crate::{
    decide::{
        content::{self, Content, Owner},
        failure::{self, Failure},
        lookups::UnpackJob,
        registries,
        retry::{self, Next},
    },
    metrics::{self, UnpackMetrics},
};
use olm_api::unpack_policy::{UnpackPolicy, unpack_policy};
use olm_oci::pull_secrets::{self, PullSecret};

/// How many times a pull that failed for a transient cause (network, 5xx,
/// 429) is tried within one unpack before the failure is recorded.
pub const TRANSIENT_PULL_ATTEMPTS: u32 = 3;
/// The first wait between such tries; doubled each time.
pub const TRANSIENT_PULL_BACKOFF: Duration = Duration::from_secs(1);

/// The field manager of the ConfigMaps written.
pub const FIELD_MANAGER: &str = "bundle-unpacker";

/// Why a step of an unpack could not be carried out (the unpack is tried
/// again; failures of the image itself are recorded, not returned).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Kubernetes request failed.
    #[error("{action}: {source}")]
    Kube {
        /// What was being done.
        action: String,
        /// The failure.
        #[source]
        source: kube::Error,
    },
}

impl Error {
    /// A stable category for metrics and logs.
    pub fn category(&self) -> &'static str {
        match self {
            Self::Kube { source, .. } => olm_runtime::error::kube_error_category(source),
        }
    }
}

impl olm_runtime::controller::Categorized for Error {
    fn category(&self) -> &'static str {
        Error::category(self)
    }
}

fn kube(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let action = action.into();
    move |source| Error::Kube { action, source }
}

/// What became of a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// Nothing to do: the content is stored (or the object is not ours).
    Done,
    /// This pass stored content or a failure.
    Stored {
        /// The failure reason, if a failure was stored.
        failure: Option<String>,
    },
    /// Another task of this replica is working on the same image.
    Busy,
    /// A recorded failure stands until then.
    WaitUntil(Timestamp),
    /// The CatalogSource is not (yet) in the cache: nothing can own the
    /// content and its pull secrets are unknown.
    CatalogMissing,
}

/// Does unpacks; shared by the queue consumer and the watch.
pub struct Worker {
    pub(crate) client: Client,
    pub(crate) config: UnpackerConfig,
    pub(crate) catalogs: Store<CatalogSource>,
    pub(crate) operator_groups: Store<OperatorGroup>,
    pub(crate) metrics: UnpackMetrics,
    pub(crate) bus: Bus,
    in_flight: Mutex<HashSet<(String, String)>>,
    pulls: Semaphore,
}

/// Releases an in-flight claim when dropped.
struct Claim<'a> {
    worker: &'a Worker,
    key: (String, String),
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.worker
            .in_flight
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&self.key);
    }
}

impl Worker {
    pub(crate) fn new(
        client: Client,
        config: UnpackerConfig,
        catalogs: Store<CatalogSource>,
        operator_groups: Store<OperatorGroup>,
        metrics: UnpackMetrics,
        bus: Bus,
    ) -> Self {
        let permits = config.concurrency.max(1);
        Self {
            client,
            config,
            catalogs,
            operator_groups,
            metrics,
            bus,
            in_flight: Mutex::new(HashSet::new()),
            pulls: Semaphore::new(permits),
        }
    }

    fn claim(&self, key: (String, String)) -> Option<Claim<'_>> {
        let mut in_flight = self
            .in_flight
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        in_flight
            .insert(key.clone())
            .then(|| Claim { worker: self, key })
    }

    /// The unpack policy of `namespace`'s OperatorGroups.
    pub(crate) fn policy(&self, namespace: &str) -> UnpackPolicy {
        let groups: Vec<_> = self
            .operator_groups
            .state()
            .into_iter()
            .filter(|og| og.metadata.namespace.as_deref() == Some(namespace))
            .collect();
        let named: Vec<(String, BTreeMap<String, String>)> = groups
            .iter()
            .map(|og| (og.name_any(), og.annotations().clone()))
            .collect();
        unpack_policy(
            named.iter().map(|(n, a)| (n.as_str(), a)),
            self.config.default_timeout,
        )
    }

    /// Brings `job`'s image to a stored result if it needs one.
    pub async fn process(&self, job: &UnpackJob, source: &str) -> Result<Progress, Error> {
        let key = job.key();
        let Some(_claim) = self.claim(key.clone()) else {
            return Ok(Progress::Busy);
        };
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &job.catalog_namespace);
        let found = api
            .get_opt(&key.1)
            .await
            .map_err(kube(format!("read configmap {}/{}", key.0, key.1)))?;
        let stored = content::stored_state(&job.bundle_path, found.as_ref());
        let policy = self.policy(&job.plan_namespace);
        for warning in &policy.warnings {
            tracing::warn!(namespace = job.plan_namespace, warning, "unpack policy");
        }
        match retry::next_step(&stored, policy.retry_interval, Timestamp::now()) {
            Next::Done => Ok(Progress::Done),
            Next::WaitUntil(at) => Ok(Progress::WaitUntil(at)),
            Next::Unpack { attempt } => self.unpack(job, attempt, &policy, source).await,
            Next::Retry {
                attempt,
                uid,
                resource_version,
            } => {
                let params = DeleteParams {
                    preconditions: Some(Preconditions {
                        uid: Some(uid),
                        resource_version: Some(resource_version),
                    }),
                    ..DeleteParams::default()
                };
                match api.delete(&key.1, &params).await {
                    Ok(_) => {}
                    // Someone else cleared or replaced it first.
                    Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {
                        return Ok(Progress::Busy);
                    }
                    Err(error) => {
                        return Err(kube(format!("delete failure record {}/{}", key.0, key.1))(
                            error,
                        ));
                    }
                }
                tracing::info!(image = job.bundle_path, attempt, "retrying a failed unpack");
                self.metrics.retried();
                self.unpack(job, attempt, &policy, source).await
            }
        }
    }

    async fn unpack(
        &self,
        job: &UnpackJob,
        attempt: u32,
        policy: &UnpackPolicy,
        source: &str,
    ) -> Result<Progress, Error> {
        let Some(catalog) = self
            .catalogs
            .get(&ObjectRef::new(&job.catalog_name).within(&job.catalog_namespace))
        else {
            tracing::debug!(
                catalog = format!("{}/{}", job.catalog_namespace, job.catalog_name),
                "catalogsource not found; waiting for it"
            );
            return Ok(Progress::CatalogMissing);
        };
        let owner = Owner {
            name: catalog.name_any(),
            uid: catalog.uid().unwrap_or_default(),
        };
        let Ok(_permit) = self.pulls.acquire().await else {
            return Ok(Progress::Busy);
        };
        self.metrics.work(source);
        let started = Instant::now();
        let span = tracing::info_span!(
            "unpack",
            k8s.namespace.name = job.plan_namespace,
            olm.bundle.image = job.bundle_path,
            olm.catalog = job.catalog_name,
            attempt,
            source,
        );
        let pulled = {
            let pull = self.pull(job, &catalog).instrument(span.clone());
            match policy.timeout {
                Some(timeout) => tokio::time::timeout(timeout, pull)
                    .await
                    .unwrap_or_else(|_| {
                        Err((None, failure::deadline_exceeded(&job.bundle_path, timeout)))
                    }),
                None => pull.await,
            }
        };
        let (config_map, digest, failure) = match &pulled {
            Ok((digest, content)) => (
                content::content_config_map(
                    &job.catalog_namespace,
                    &job.bundle_path,
                    digest,
                    &owner,
                    content,
                ),
                Some(digest.clone()),
                None,
            ),
            Err((digest, failure)) => (
                content::failure_config_map(
                    &job.catalog_namespace,
                    &job.bundle_path,
                    digest.as_deref(),
                    &owner,
                    failure,
                    attempt,
                ),
                digest.clone(),
                Some(failure.clone()),
            ),
        };
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &job.catalog_namespace);
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PostParams::default()
        };
        let seconds = started.elapsed().as_secs_f64();
        let created = match api.create(&params, &config_map).await {
            Ok(created) => created,
            Err(kube::Error::Api(status)) if status.code == 409 => {
                self.metrics.unpacked(metrics::DUPLICATE, "", seconds);
                return Ok(Progress::Done);
            }
            Err(error) => {
                return Err(kube(format!(
                    "create configmap {}/{}",
                    job.catalog_namespace,
                    config_map.name_any()
                ))(error));
            }
        };
        match &failure {
            None => {
                tracing::info!(image = job.bundle_path, seconds, "bundle unpacked");
                self.metrics.unpacked(metrics::SUCCEEDED, "", seconds);
            }
            Some(failure) => {
                olm_trace::record_error(&span, &format!("{}: {}", failure.reason, failure.message));
                tracing::warn!(
                    image = job.bundle_path,
                    reason = failure.reason,
                    message = failure.message,
                    attempt,
                    "bundle unpack failed; recorded"
                );
                self.metrics
                    .unpacked(metrics::FAILED, failure.reason, seconds);
            }
        }
        self.announce(
            job,
            &created,
            digest.as_deref(),
            pulled.as_ref().ok().map(|(_, c)| c),
            failure.as_ref(),
        )
        .await;
        Ok(Progress::Stored {
            failure: failure.map(|f| f.reason.to_owned()),
        })
    }

    /// Pulls and reads the bundle, retrying transient failures a few times.
    async fn pull(
        &self,
        job: &UnpackJob,
        catalog: &CatalogSource,
    ) -> Result<(String, Content), (Option<String>, Failure)> {
        let reference = Reference::parse(&job.bundle_path).map_err(|error| {
            (
                None,
                Failure::new(
                    failure::INVALID_IMAGE_REFERENCE,
                    format!(
                        "invalid bundle image reference {:?}: {error}",
                        job.bundle_path
                    ),
                ),
            )
        })?;
        if let Some(message) = registries::refusal(
            &self.config.allowed_registries,
            &job.bundle_path,
            reference.registry(),
        ) {
            return Err((None, Failure::new(failure::REGISTRY_NOT_ALLOWED, message)));
        }
        let credentials = self.pull_credentials(catalog).await;
        let options = ClientOptions {
            plain_http_hosts: self.config.insecure_registries.clone(),
            credentials,
            ..ClientOptions::default()
        };
        let client = OciClient::new(options)
            .map_err(|e| (None, failure::from_pull_error(&job.bundle_path, &e)))?;
        let mut delay = TRANSIENT_PULL_BACKOFF;
        let mut tries = 0;
        loop {
            tries += 1;
            match pull_once(&client, &reference, &job.bundle_path).await {
                Err((_, failure)) if failure.transient && tries < TRANSIENT_PULL_ATTEMPTS => {
                    tracing::debug!(
                        image = job.bundle_path,
                        error = failure.message,
                        "transient pull failure; trying again"
                    );
                    tokio::time::sleep(delay).await;
                    delay = delay.saturating_mul(2);
                }
                Ok((digest, content)) if self.config.check_operator_images => {
                    // Only CSVs name operator images; the (often large)
                    // CRDs are not parsed again.
                    let csvs: Vec<serde_json::Value> = content
                        .bundle
                        .objects
                        .iter()
                        .filter(|o| o.contains("ClusterServiceVersion"))
                        .filter_map(|o| serde_json::from_str(o).ok())
                        .collect();
                    return match registries::operator_image_refusal(
                        &self.config.allowed_registries,
                        &job.bundle_path,
                        &csvs,
                    ) {
                        Some(message) => Err((
                            Some(digest),
                            Failure::new(failure::REGISTRY_NOT_ALLOWED, message),
                        )),
                        None => Ok((digest, content)),
                    };
                }
                other => return other,
            }
        }
    }

    /// Credentials from the namespace's default ServiceAccount's
    /// imagePullSecrets, then the CatalogSource's `spec.secrets` (which win).
    async fn pull_credentials(&self, catalog: &CatalogSource) -> olm_oci::DockerConfig {
        let namespace = catalog.namespace().unwrap_or_default();
        let accounts: Api<ServiceAccount> = Api::namespaced(self.client.clone(), &namespace);
        let account_secrets: Vec<String> = match accounts.get_opt("default").await {
            Ok(Some(account)) => account
                .image_pull_secrets
                .unwrap_or_default()
                .into_iter()
                .map(|r| r.name)
                .collect(),
            Ok(None) => Vec::new(),
            Err(error) => {
                tracing::debug!(namespace, error = %error, "cannot read the default serviceaccount");
                Vec::new()
            }
        };
        let names = pull_secrets::secret_names(
            account_secrets.iter().map(String::as_str),
            catalog.spec.secrets.iter().map(String::as_str),
        );
        let secrets_api: Api<Secret> = Api::namespaced(self.client.clone(), &namespace);
        let mut secrets = Vec::new();
        for name in names {
            match secrets_api.get_opt(&name).await {
                Ok(Some(secret)) => secrets.push(PullSecret {
                    name: name.clone(),
                    type_: secret.type_.unwrap_or_default(),
                    data: secret
                        .data
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(k, v)| (k, v.0))
                        .collect(),
                }),
                Ok(None) => tracing::warn!(namespace, secret = name, "pull secret not found"),
                Err(error) => {
                    tracing::warn!(namespace, secret = name, error = %error, "cannot read pull secret")
                }
            }
        }
        let (config, notes) = pull_secrets::credentials(&secrets);
        for note in notes {
            tracing::warn!(namespace, note, "pull secret ignored");
        }
        config
    }

    async fn announce(
        &self,
        job: &UnpackJob,
        config_map: &ConfigMap,
        digest: Option<&str>,
        content: Option<&Content>,
        failure: Option<&Failure>,
    ) {
        if !self.bus.is_enabled() {
            return;
        }
        let outcome = match failure {
            None => Outcome::Succeeded,
            Some(f) if f.reason == failure::DEADLINE_EXCEEDED => Outcome::DeadlineExceeded,
            Some(_) => Outcome::Failed,
        };
        let event = BundleUnpacked {
            bundle_path: job.bundle_path.clone(),
            image_digest: digest.unwrap_or_default().to_owned(),
            content: content.map(|_| {
                BusRef::new(
                    "v1",
                    "ConfigMap",
                    job.catalog_namespace.as_str(),
                    config_map.name_any(),
                )
                .at(
                    config_map.uid().unwrap_or_default(),
                    config_map.resource_version().unwrap_or_default(),
                )
            }),
            content_digest: content
                .map(|c| olm_oci::Digest::of(&c.encoded).to_string())
                .unwrap_or_default(),
            install_plan: Some(BusRef::new(
                "operators.coreos.com/v1alpha1",
                "InstallPlan",
                job.plan_namespace.as_str(),
                job.plan_name.as_str(),
            )),
            catalog: Some(BusRef::new(
                "operators.coreos.com/v1alpha1",
                "CatalogSource",
                job.catalog_namespace.as_str(),
                job.catalog_name.as_str(),
            )),
            outcome: outcome.into(),
            failure_message: failure.map(|f| f.message.clone()).unwrap_or_default(),
            occurred_at: Some(events::now()),
        };
        if let Err(error) = self.bus.publish(&event).await {
            tracing::debug!(error = %error, "bundle unpacked event not published");
        }
    }
}

async fn pull_once(
    client: &OciClient,
    reference: &Reference,
    bundle_path: &str,
) -> Result<(String, Content), (Option<String>, Failure)> {
    let digest = client
        .resolve(reference)
        .await
        .map_err(|e| (None, failure::from_pull_error(bundle_path, &e)))?;
    let pinned = reference.with_digest(digest.clone());
    let digest = digest.to_string();
    let image = client
        .pull_to_memory(&pinned, &content::extract_options())
        .await
        .map_err(|e| {
            (
                Some(digest.clone()),
                failure::from_pull_error(bundle_path, &e),
            )
        })?;
    let labels = image.manifest.labels();
    let files = image.files;
    let path = bundle_path.to_owned();
    // Reading a bundle is CPU work (YAML of large CRDs).
    let content =
        tokio::task::spawn_blocking(move || content::bundle_content(&path, &files, &labels))
            .await
            .map_err(|e| {
                (
                    Some(digest.clone()),
                    Failure::new(
                        failure::INVALID_BUNDLE,
                        format!("{bundle_path}: reading the bundle failed: {e}"),
                    ),
                )
            })?
            .map_err(|f| (Some(digest.clone()), f))?;
    Ok((digest, content))
}

/// Shared handle.
pub type SharedWorker = Arc<Worker>;
