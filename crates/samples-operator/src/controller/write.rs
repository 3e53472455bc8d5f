//! The writes of a plan: samples created, replaced (guarded by the
//! resourceVersion the plan read) and deleted; ConfigMaps created or
//! replaced and deleted; import retries started; the Config's finalizer and
//! bootstrap annotation removed.

use jiff::Timestamp;
use kube::{
    Api, Resource, ResourceExt as _,
    api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams},
};
use olm_api::samples::{CONFIG_FINALIZER, Config};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::json;

use super::{Error, FIELD_MANAGER, Reconciler};
use crate::decide::{bootstrap::BOOTSTRAP_ANNOTATION, plan::Write};

/// How a write went, when it did not fail.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Written {
    /// Done (or, for an import retry, started).
    Done,
    /// The object changed since the cache was read (a conflict on replace,
    /// or it exists already on create); the watch brings the news and the
    /// next plan decides again.
    Stale,
}

fn is_stale(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409)
}

fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.as_str().to_owned()),
        ..PostParams::default()
    }
}

impl Reconciler {
    pub(super) async fn execute(
        &mut self,
        write: &Write,
        config: &Config,
        now: Timestamp,
    ) -> Result<Written, Error> {
        let result = match write {
            Write::CreateImageStream(stream) => create(&self.streams, stream).await,
            Write::ReplaceImageStream(stream) => replace(&self.streams, stream).await,
            Write::DeleteImageStream(name) => delete(&self.streams, name).await.map(drop),
            Write::CreateTemplate(template) => create(&self.templates, template).await,
            Write::ReplaceTemplate(template) => replace(&self.templates, template).await,
            Write::DeleteTemplate(name) => delete(&self.templates, name).await.map(drop),
            Write::DeleteConfigMap(name) => delete(&self.config_maps, name).await.map(drop),
            // Created, or replaced whole: keys it no longer has go, whoever
            // wrote them (upstream's operator, before ours took over).
            Write::ApplyConfigMap(config_map) if config_map.metadata.resource_version.is_some() => {
                replace(&self.config_maps, config_map).await
            }
            Write::ApplyConfigMap(config_map) => create(&self.config_maps, config_map).await,
            Write::RetryImport { stream, request } => {
                self.retry_import(stream, request.as_ref(), now);
                return Ok(Written::Done);
            }
            Write::RemoveFinalizer => remove_finalizer(&self.configs, config).await,
            Write::ForgetBootstrapReason => forget_bootstrap_reason(&self.configs, config).await,
        };
        // The Config's writes name no object of their own: it is this one.
        let name = match write {
            Write::RemoveFinalizer | Write::ForgetBootstrapReason => config.name_any(),
            other => other.name().to_owned(),
        };
        match result {
            Ok(()) => {
                tracing::info!(
                    kind = write.kind(),
                    verb = write.verb(),
                    name = %name,
                    "wrote"
                );
                Ok(Written::Done)
            }
            Err(source) if is_stale(&source) => {
                tracing::debug!(
                    kind = write.kind(),
                    name = %name,
                    "cache behind the API server; deciding again"
                );
                Ok(Written::Stale)
            }
            Err(source) => Err(Error::Write {
                verb: write.verb(),
                kind: write.kind(),
                name,
                source,
            }),
        }
    }

    /// Records the attempt and starts the ImageStreamImport beside the
    /// reconcile: OpenShift imports from the registry before it answers,
    /// which on a disconnected cluster can take long. Whatever the outcome,
    /// the next retry waits a whole interval, so a failing create never
    /// becomes a hot loop.
    fn retry_import(&mut self, stream: &str, request: Option<&serde_json::Value>, now: Timestamp) {
        self.last_retries.insert(stream.to_owned(), now);
        let Some(request) = request else { return };
        let Some(imports) = self.imports.clone() else {
            tracing::info!(
                imagestream = %stream,
                "the cluster serves no ImageStreamImports; the failed imports are not retried"
            );
            return;
        };
        let body: DynamicObject = match serde_json::from_value(request.clone()) {
            Ok(body) => body,
            Err(error) => {
                tracing::warn!(imagestream = %stream, %error, "an unreadable import retry request");
                return;
            }
        };
        let slots = self.import_slots.clone();
        let metrics = self.metrics.clone();
        let stream = stream.to_owned();
        tokio::spawn(async move {
            let Ok(_slot) = slots.acquire_owned().await else {
                return;
            };
            match imports.create(&post_params(), &body).await {
                Ok(_) => {
                    metrics.retried_import(&stream);
                    tracing::info!(imagestream = %stream, "initiated an imagestreamimport retry");
                }
                Err(error) => tracing::warn!(
                    imagestream = %stream,
                    error = &error as &dyn std::error::Error,
                    "an imagestreamimport retry was refused"
                ),
            }
        });
    }
}

async fn create<K>(api: &Api<K>, object: &K) -> Result<(), kube::Error>
where
    K: Resource + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    api.create(&post_params(), object).await.map(|_| ())
}

async fn replace<K>(api: &Api<K>, object: &K) -> Result<(), kube::Error>
where
    K: Resource + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    api.replace(&object.name_any(), &post_params(), object)
        .await
        .map(|_| ())
}

/// Deletes `name` (gone already is done); returns whether it was there.
pub(super) async fn delete<K>(api: &Api<K>, name: &str) -> Result<bool, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(false),
        Err(error) => Err(error),
    }
}

/// Removes the finalizer, guarded by the resourceVersion read, leaving any
/// other finalizer in place.
async fn remove_finalizer(configs: &Api<Config>, config: &Config) -> Result<(), kube::Error> {
    let remaining: Vec<&String> = config
        .finalizers()
        .iter()
        .filter(|finalizer| *finalizer != CONFIG_FINALIZER)
        .collect();
    merge_patch_guarded(
        configs,
        config,
        json!({ "finalizers": remaining, "resourceVersion": config.resource_version() }),
    )
    .await
}

/// Removes the bootstrap annotation.
async fn forget_bootstrap_reason(
    configs: &Api<Config>,
    config: &Config,
) -> Result<(), kube::Error> {
    let mut annotations = serde_json::Map::new();
    annotations.insert(BOOTSTRAP_ANNOTATION.to_owned(), serde_json::Value::Null);
    merge_patch_guarded(
        configs,
        config,
        json!({ "annotations": annotations, "resourceVersion": config.resource_version() }),
    )
    .await
}

async fn merge_patch_guarded(
    configs: &Api<Config>,
    config: &Config,
    metadata: serde_json::Value,
) -> Result<(), kube::Error> {
    match configs
        .patch(
            &config.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&json!({ "metadata": metadata })),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
        Err(error) => Err(error),
    }
}
