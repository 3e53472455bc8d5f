//! Self-rotating certificates: the CA and serving certificate live in a
//! Secret; every replica reads it, lets [`olm_certs::reconcile`] decide from
//! the certificates alone, writes changes back with the Secret's
//! resourceVersion as a precondition (so two replicas never both rotate: the
//! loser re-reads and adopts the winner's material), publishes the CA bundle
//! in the APIService and swaps the served certificate without a restart.

use std::{
    collections::BTreeMap,
    sync::Arc,
    time::{Duration, SystemTime},
};

use futures::StreamExt;
use k8s_openapi::{
    ByteString,
    api::core::v1::Secret,
    kube_aggregator::pkg::apis::apiregistration::v1::{
        APIService, APIServiceSpec, ServiceReference,
    },
};
use kube::{
    Api,
    api::{ObjectMeta, Patch, PatchParams, PostParams},
    runtime::watcher,
};
use olm_certs::{Decision, HotCertificate, Material, Profile, RotationPolicy, ca_hash};
use thiserror::Error;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::metrics::CertMetrics;

/// Secret key of the served certificate (as upstream).
pub const TLS_CERT_KEY: &str = "tls.crt";
/// Secret key of the served certificate's private key (as upstream).
pub const TLS_KEY_KEY: &str = "tls.key";
/// Secret key of the CA bundle.
pub const CA_BUNDLE_KEY: &str = "ca.crt";
/// Secret key of the signing CA's private key: the name olm-operator uses
/// for the same thing in operators' certificate Secrets.
pub const CA_SIGNING_KEY_KEY: &str = "olmCASigningKey";
/// Secret key of the CA certificate (the bundle, newest first), with the
/// meaning upstream and olm-operator give it. Earlier versions of this
/// service stored the CA's *private key* under this name; such a Secret is
/// read once ([`material_from_secret`]) and rewritten ([`needs_migration`]).
pub const OLM_CA_KEY: &str = "olmCAKey";
/// Annotation with the hex SHA-256 of the CA bundle (as upstream).
pub const CA_HASH_ANNOTATION: &str = "olmcahash";

/// Longest time between two looks at the Secret, whatever the certificates
/// say (a watch event wakes the loop sooner).
pub const RESYNC: Duration = Duration::from_secs(60);

/// Wait before retrying after an API error.
pub const ERROR_RETRY: Duration = Duration::from_secs(2);

/// Upstream's APIService priorities for packageserver.
pub const GROUP_PRIORITY_MINIMUM: i32 = 2000;
/// See [`GROUP_PRIORITY_MINIMUM`].
pub const VERSION_PRIORITY: i32 = 15;

/// Why a certificate step failed.
#[derive(Debug, Error)]
pub enum CertControllerError {
    /// An API call failed.
    #[error("{action}: {source}")]
    Api {
        /// What was attempted.
        action: &'static str,
        /// The error.
        #[source]
        source: kube::Error,
    },
    /// The material could not be made or loaded.
    #[error(transparent)]
    Certs(#[from] olm_certs::CertError),
}

/// Where the certificates live and whom they are for.
#[derive(Debug, Clone)]
pub struct CertConfig {
    /// Namespace of the Secret and the Service.
    pub namespace: String,
    /// Name of the Secret.
    pub secret_name: String,
    /// Name of the APIService to publish the CA bundle in.
    pub apiservice_name: String,
    /// Name of the Service the APIService points at.
    pub service_name: String,
    /// Port of that Service.
    pub service_port: i32,
    /// Whether to create the APIService when it is missing.
    pub create_apiservice: bool,
    /// Lifetimes and thresholds.
    pub policy: RotationPolicy,
    /// Names and subject.
    pub profile: Profile,
}

fn data_str(secret: &Secret, key: &str) -> Option<String> {
    let bytes = secret.data.as_ref()?.get(key)?;
    String::from_utf8(bytes.0.clone()).ok()
}

/// Whether a PEM text holds a private key.
fn is_private_key(pem: &str) -> bool {
    pem.contains("PRIVATE KEY-----")
}

/// Reads stored material from a Secret; `None` when a key is missing. A
/// Secret written before the CA key was renamed keeps the key under
/// [`OLM_CA_KEY`]; it is taken from there.
pub fn material_from_secret(secret: &Secret) -> Option<Material> {
    let ca_key_pem = data_str(secret, CA_SIGNING_KEY_KEY)
        .or_else(|| data_str(secret, OLM_CA_KEY).filter(|pem| is_private_key(pem)))?;
    Some(Material {
        ca_bundle_pem: data_str(secret, CA_BUNDLE_KEY)?,
        ca_key_pem,
        cert_pem: data_str(secret, TLS_CERT_KEY)?,
        key_pem: data_str(secret, TLS_KEY_KEY)?,
    })
}

/// Whether a Secret still has the old layout (a private key under
/// [`OLM_CA_KEY`], or no [`CA_SIGNING_KEY_KEY`]) and must be rewritten even
/// when its certificates need nothing.
pub fn needs_migration(secret: &Secret) -> bool {
    data_str(secret, CA_SIGNING_KEY_KEY).is_none()
        || data_str(secret, OLM_CA_KEY).is_none_or(|pem| is_private_key(&pem))
}

/// The Secret that stores `material` (keeping what else `existing` holds).
pub fn secret_for(existing: Option<&Secret>, config: &CertConfig, material: &Material) -> Secret {
    let mut secret = existing.cloned().unwrap_or_else(|| Secret {
        metadata: ObjectMeta {
            name: Some(config.secret_name.clone()),
            namespace: Some(config.namespace.clone()),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/tls".to_owned()),
        ..Secret::default()
    });
    let data = secret.data.get_or_insert_with(BTreeMap::new);
    for (key, value) in [
        (TLS_CERT_KEY, &material.cert_pem),
        (TLS_KEY_KEY, &material.key_pem),
        (CA_BUNDLE_KEY, &material.ca_bundle_pem),
        (OLM_CA_KEY, &material.ca_bundle_pem),
        (CA_SIGNING_KEY_KEY, &material.ca_key_pem),
    ] {
        data.insert(key.to_owned(), ByteString(value.as_bytes().to_vec()));
    }
    secret
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(
            CA_HASH_ANNOTATION.to_owned(),
            ca_hash(&material.ca_bundle_pem),
        );
    secret
        .metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert("olm.managed".to_owned(), "true".to_owned());
    secret
}

fn action(decision: &Decision) -> &'static str {
    match decision {
        Decision::Keep { .. } => "keep",
        Decision::Bootstrap(_) => "bootstrap",
        Decision::RenewServing(_) => "renew-serving",
        Decision::RotateCa => "rotate-ca",
        Decision::RetireCa(_) => "retire-ca",
    }
}

fn is_conflict(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409)
}

/// The APIService registering our group, pointing at our Service.
pub fn apiservice_for(config: &CertConfig, ca_bundle: &str) -> APIService {
    APIService {
        metadata: ObjectMeta {
            name: Some(config.apiservice_name.clone()),
            labels: Some(BTreeMap::from([(
                "olm.managed".to_owned(),
                "true".to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        spec: Some(APIServiceSpec {
            group: Some(olm_api::package_manifest::GROUP.to_owned()),
            version: Some(olm_api::package_manifest::VERSION.to_owned()),
            group_priority_minimum: GROUP_PRIORITY_MINIMUM,
            version_priority: VERSION_PRIORITY,
            ca_bundle: Some(ByteString(ca_bundle.as_bytes().to_vec())),
            service: Some(ServiceReference {
                name: Some(config.service_name.clone()),
                namespace: Some(config.namespace.clone()),
                port: Some(config.service_port),
            }),
            insecure_skip_tls_verify: None,
        }),
        status: None,
    }
}

/// Keeps the certificates fresh and served until `stop`.
pub struct CertController {
    client: kube::Client,
    config: CertConfig,
    certificate: Arc<HotCertificate>,
    metrics: CertMetrics,
}

impl std::fmt::Debug for CertController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertController")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl CertController {
    /// A controller serving through `certificate`.
    pub fn new(
        client: kube::Client,
        config: CertConfig,
        certificate: Arc<HotCertificate>,
        metrics: CertMetrics,
    ) -> Self {
        Self {
            client,
            config,
            certificate,
            metrics,
        }
    }

    /// One pass: read, decide, write if needed, publish, serve. Returns when
    /// to look again.
    pub async fn sync_once(
        &self,
        served: &mut Option<Material>,
    ) -> Result<SystemTime, CertControllerError> {
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &self.config.namespace);
        let existing = secrets
            .get_opt(&self.config.secret_name)
            .await
            .map_err(|source| CertControllerError::Api {
                action: "reading the certificate secret",
                source,
            })?;
        let stored = existing.as_ref().and_then(material_from_secret);
        let now = SystemTime::now();
        let outcome = olm_certs::reconcile(
            stored.as_ref(),
            now,
            &self.config.policy,
            &self.config.profile,
        )?;
        let migrate = existing.as_ref().is_some_and(needs_migration);
        if outcome.changed() || migrate {
            let secret = secret_for(existing.as_ref(), &self.config, &outcome.material);
            let written = match &existing {
                Some(_) => {
                    secrets
                        .replace(&self.config.secret_name, &PostParams::default(), &secret)
                        .await
                }
                None => secrets.create(&PostParams::default(), &secret).await,
            };
            match written {
                Ok(_) => {
                    if migrate {
                        tracing::info!(secret = %self.config.secret_name, "moved the CA private key out of olmCAKey");
                    }
                    for step in &outcome.steps {
                        tracing::info!(step = ?step, secret = %self.config.secret_name, "certificate step");
                        self.metrics.rotated(action(step));
                    }
                }
                // Another replica wrote first: adopt its material next pass.
                Err(error) if is_conflict(&error) => {
                    tracing::info!("certificate secret changed concurrently; re-reading");
                    return Ok(SystemTime::now());
                }
                Err(source) => {
                    return Err(CertControllerError::Api {
                        action: "writing the certificate secret",
                        source,
                    });
                }
            }
        }
        let material = outcome.material;
        self.publish(&material.ca_bundle_pem).await?;
        if served.as_ref() != Some(&material) {
            self.certificate
                .set_pem(&material.cert_pem, &material.key_pem)?;
            self.metrics
                .set_expiry(material.serving_not_after(), material.ca_not_after());
            *served = Some(material);
        }
        Ok(olm_certs::policy::system_time(outcome.next))
    }

    async fn publish(&self, ca_bundle: &str) -> Result<(), CertControllerError> {
        let api: Api<APIService> = Api::all(self.client.clone());
        let current = api
            .get_opt(&self.config.apiservice_name)
            .await
            .map_err(|source| CertControllerError::Api {
                action: "reading the apiservice",
                source,
            })?;
        match current {
            None if self.config.create_apiservice => {
                let created = api
                    .create(
                        &PostParams::default(),
                        &apiservice_for(&self.config, ca_bundle),
                    )
                    .await;
                match created {
                    Ok(_) => Ok(()),
                    Err(error) if is_conflict(&error) => Ok(()),
                    Err(source) => Err(CertControllerError::Api {
                        action: "creating the apiservice",
                        source,
                    }),
                }
            }
            None => Ok(()),
            Some(apiservice) => {
                let published = apiservice
                    .spec
                    .as_ref()
                    .and_then(|s| s.ca_bundle.as_ref())
                    .map(|b| b.0.as_slice());
                if published == Some(ca_bundle.as_bytes()) {
                    return Ok(());
                }
                let patch = serde_json::json!({"spec": {"caBundle": ByteString(ca_bundle.as_bytes().to_vec())}});
                api.patch(
                    &self.config.apiservice_name,
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
                .map_err(|source| CertControllerError::Api {
                    action: "publishing the ca bundle",
                    source,
                })?;
                tracing::info!(apiservice = %self.config.apiservice_name, "published the ca bundle");
                Ok(())
            }
        }
    }

    /// Runs until `stop`; `ready` is called once a certificate is served.
    pub async fn run(self, ready: impl FnOnce() + Send, stop: CancellationToken) {
        let wake = Arc::new(Notify::new());
        let watch_task = {
            let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &self.config.namespace);
            let config = watcher::Config::default()
                .fields(&format!("metadata.name={}", self.config.secret_name));
            let wake = Arc::clone(&wake);
            let stop = stop.clone();
            tokio::spawn(async move {
                let mut events = std::pin::pin!(watcher(secrets, config));
                loop {
                    tokio::select! {
                        () = stop.cancelled() => return,
                        event = events.next() => match event {
                            Some(Ok(_)) => wake.notify_one(),
                            Some(Err(_)) => tokio::time::sleep(ERROR_RETRY).await,
                            None => return,
                        },
                    }
                }
            })
        };
        let mut ready = Some(ready);
        let mut served = None;
        loop {
            let wait = match self.sync_once(&mut served).await {
                Ok(next) => {
                    if served.is_some()
                        && let Some(ready) = ready.take()
                    {
                        ready();
                    }
                    next.duration_since(SystemTime::now())
                        .unwrap_or(Duration::ZERO)
                        .min(RESYNC)
                }
                Err(error) => {
                    tracing::warn!(
                        error = &error as &dyn std::error::Error,
                        "certificate sync failed; retrying"
                    );
                    ERROR_RETRY
                }
            };
            tokio::select! {
                () = stop.cancelled() => break,
                () = wake.notified() => {}
                // Certificates have one-second precision: wake just after the
                // second a step becomes due.
                () = tokio::time::sleep(wait + Duration::from_millis(50)) => {}
            }
        }
        watch_task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> CertConfig {
        CertConfig {
            namespace: "olm".into(),
            secret_name: "packageserver-service-cert".into(),
            apiservice_name: "v1.packages.operators.coreos.com".into(),
            service_name: "packageserver-service".into(),
            service_port: 443,
            create_apiservice: true,
            policy: RotationPolicy::default(),
            profile: Profile::for_service("packageserver-service", "olm"),
        }
    }

    #[test]
    fn secret_round_trips_material() {
        let material = olm_certs::bootstrap(
            SystemTime::now(),
            &RotationPolicy::default(),
            &config().profile,
        )
        .unwrap();
        let secret = secret_for(None, &config(), &material);
        assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
        assert_eq!(
            secret.metadata.annotations.as_ref().unwrap()[CA_HASH_ANNOTATION],
            ca_hash(&material.ca_bundle_pem)
        );
        assert_eq!(material_from_secret(&secret), Some(material.clone()));
        assert!(!needs_migration(&secret));
        // olmCAKey holds the CA certificate, as upstream; the private key
        // is under its own name.
        let data = secret.data.as_ref().unwrap();
        assert_eq!(data[OLM_CA_KEY].0, material.ca_bundle_pem.as_bytes());
        assert_eq!(data[CA_SIGNING_KEY_KEY].0, material.ca_key_pem.as_bytes());
        let mut partial = secret.clone();
        partial.data.as_mut().unwrap().remove(CA_SIGNING_KEY_KEY);
        assert_eq!(material_from_secret(&partial), None);
    }

    #[test]
    fn a_secret_with_the_ca_key_under_olm_ca_key_is_read_and_migrated() {
        let material = olm_certs::bootstrap(
            SystemTime::now(),
            &RotationPolicy::default(),
            &config().profile,
        )
        .unwrap();
        // The layout earlier versions wrote.
        let mut old = secret_for(None, &config(), &material);
        let data = old.data.as_mut().unwrap();
        data.remove(CA_SIGNING_KEY_KEY);
        data.insert(
            OLM_CA_KEY.to_owned(),
            ByteString(material.ca_key_pem.as_bytes().to_vec()),
        );
        assert_eq!(material_from_secret(&old), Some(material.clone()));
        assert!(needs_migration(&old));
        let rewritten = secret_for(Some(&old), &config(), &material);
        assert!(!needs_migration(&rewritten));
        assert_eq!(
            rewritten.data.as_ref().unwrap()[OLM_CA_KEY].0,
            material.ca_bundle_pem.as_bytes()
        );
    }

    #[test]
    fn apiservice_matches_upstream_registration() {
        let a = apiservice_for(&config(), "bundle");
        let spec = a.spec.unwrap();
        assert_eq!(
            a.metadata.name.as_deref(),
            Some("v1.packages.operators.coreos.com")
        );
        assert_eq!(spec.group.as_deref(), Some("packages.operators.coreos.com"));
        assert_eq!(
            (spec.group_priority_minimum, spec.version_priority),
            (2000, 15)
        );
        assert_eq!(
            spec.service.unwrap().name.as_deref(),
            Some("packageserver-service")
        );
    }
}
