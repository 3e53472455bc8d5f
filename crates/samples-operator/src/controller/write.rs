//! The writes of a plan: samples created, replaced (guarded by the
//! resourceVersion the plan read) and deleted; ConfigMaps applied and
//! deleted; import retries created; the Config's finalizer removed.

use jiff::Timestamp;
use kube::{
    Api, Resource, ResourceExt as _,
    api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams},
};
use olm_api::samples::{CONFIG_FINALIZER, Config};
use olm_runtime::apply::apply;
use serde::{Serialize, de::DeserializeOwned};
use serde_json::json;

use super::{Error, FIELD_MANAGER, Reconciler};
use crate::decide::plan::Write;

/// How a write went, when it did not fail.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Written {
    /// Done.
    Done,
    /// The object changed since the cache was read (conflict, already
    /// exists); the watch brings the news and the next plan decides again.
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
        let failed = |source| Error::Write {
            verb: write.verb(),
            kind: write.kind(),
            name: write.name().to_owned(),
            source,
        };
        let result = match write {
            Write::CreateImageStream(stream) => create(&self.streams, stream).await,
            Write::ReplaceImageStream(stream) => replace(&self.streams, stream).await,
            Write::DeleteImageStream(name) => delete(&self.streams, name).await,
            Write::CreateTemplate(template) => create(&self.templates, template).await,
            Write::ReplaceTemplate(template) => replace(&self.templates, template).await,
            Write::DeleteTemplate(name) => delete(&self.templates, name).await,
            Write::DeleteConfigMap(name) => delete(&self.config_maps, name).await,
            Write::ApplyConfigMap(config_map) => {
                apply(&self.config_maps, &FIELD_MANAGER, config_map)
                    .await
                    .map_err(|source| Error::ApplyConfigMap {
                        name: write.name().to_owned(),
                        source,
                    })?;
                Ok(())
            }
            Write::RetryImport { stream, request } => {
                // Whatever the outcome, wait a whole interval before the
                // next retry: a failing create must not become a hot loop.
                self.last_retries.insert(stream.clone(), now);
                let Some(imports) = &self.imports else {
                    tracing::info!(
                        imagestream = %stream,
                        "the cluster serves no ImageStreamImports; the failed imports are not retried"
                    );
                    return Ok(Written::Done);
                };
                let body: DynamicObject =
                    serde_json::from_value(request.clone()).map_err(|error| Error::Write {
                        verb: "create",
                        kind: "ImageStreamImport",
                        name: stream.clone(),
                        source: kube::Error::SerdeError(error),
                    })?;
                let created = imports.create(&post_params(), &body).await;
                if created.is_ok() {
                    self.metrics.retried_import(stream);
                    tracing::info!(imagestream = %stream, "initiated an imagestreamimport retry");
                }
                created.map(|_| ())
            }
            Write::RemoveFinalizer => remove_finalizer(&self.configs, config).await,
        };
        match result {
            Ok(()) => {
                tracing::info!(
                    kind = write.kind(),
                    verb = write.verb(),
                    name = write.name(),
                    "wrote"
                );
                Ok(Written::Done)
            }
            Err(source) if is_stale(&source) => {
                tracing::debug!(
                    kind = write.kind(),
                    name = write.name(),
                    "cache behind the API server; deciding again"
                );
                Ok(Written::Stale)
            }
            Err(source) => Err(failed(source)),
        }
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

async fn delete<K>(api: &Api<K>, name: &str) -> Result<(), kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
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
    let patch = json!({
        "metadata": {
            "finalizers": remaining,
            "resourceVersion": config.resource_version(),
        }
    });
    match configs
        .patch(
            &config.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
        Err(error) => Err(error),
    }
}
