//! `samples-operator uninstall`: what the Helm chart's pre-delete hook runs
//! so that uninstalling leaves nothing of the samples operator behind and
//! no Config whose finalizer nobody will ever remove. It stops the
//! operator first (its Deployment scaled to zero, its pods gone), since a
//! running operator would put the samples back and make a new Config; then
//! it deletes the managed samples, the operator's ConfigMaps and the
//! Config, its finalizer removed.

use std::time::Duration;

use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{ConfigMap, Pod},
};
use kube::{
    Api, Client, ResourceExt as _,
    api::{ListParams, Patch, PatchParams},
};
use olm_api::{
    openshift::{IMAGE_GROUP, ImageStream, TEMPLATE_GROUP, Template},
    samples::{Config, MANAGED_LABEL},
};
use serde_json::json;

use super::{Error, SamplesConfig};
use crate::decide::{
    imports::{IMAGESTREAM_ERROR_LABEL, TAG_TO_IMAGE_CONFIG_MAP},
    plan::is_managed,
};

/// How often the uninstall looks whether the operator's pods are gone.
const POLL: Duration = Duration::from_millis(500);

/// What an uninstall removed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Removed {
    /// Managed ImageStreams deleted.
    pub image_streams: usize,
    /// Managed Templates deleted.
    pub templates: usize,
    /// ConfigMaps deleted.
    pub config_maps: usize,
    /// Whether the Config was there to delete.
    pub config: bool,
}

/// Stops the operator's Deployment `deployment` (waiting at most `timeout`
/// for its pods to go), then removes what it made.
///
/// # Errors
///
/// [`Error::Read`] or [`Error::Write`] naming the object that failed, and
/// [`Error::OperatorStillRunning`] when its pods outlive `timeout`.
pub async fn uninstall(
    client: &Client,
    config: &SamplesConfig,
    deployment: &str,
    timeout: Duration,
) -> Result<Removed, Error> {
    stop_operator(client, &config.operator_namespace, deployment, timeout).await?;
    let mut removed = Removed::default();
    let selector = ListParams::default().labels(&format!("{MANAGED_LABEL}=true"));
    // Where the image and template APIs are not served there are no samples.
    if served(client, IMAGE_GROUP, "imagestreams").await? {
        let streams: Api<ImageStream> = Api::namespaced(client.clone(), &config.samples_namespace);
        let list = streams
            .list(&selector)
            .await
            .map_err(read("ImageStream", "*"))?;
        for stream in list.items.iter().filter(|s| is_managed(&s.metadata)) {
            delete(&streams, "ImageStream", &stream.name_any()).await?;
            removed.image_streams += 1;
        }
    }
    if served(client, TEMPLATE_GROUP, "templates").await? {
        let templates: Api<Template> = Api::namespaced(client.clone(), &config.samples_namespace);
        let list = templates
            .list(&selector)
            .await
            .map_err(read("Template", "*"))?;
        for template in list.items.iter().filter(|t| is_managed(&t.metadata)) {
            delete(&templates, "Template", &template.name_any()).await?;
            removed.templates += 1;
        }
    }
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &config.operator_namespace);
    let errors = ListParams::default().labels(&format!("{IMAGESTREAM_ERROR_LABEL}=true"));
    let mut names: Vec<String> = config_maps
        .list(&errors)
        .await
        .map_err(read("ConfigMap", "*"))?
        .items
        .iter()
        .map(|config_map| config_map.name_any())
        .collect();
    names.push(TAG_TO_IMAGE_CONFIG_MAP.to_owned());
    for name in names {
        if delete(&config_maps, "ConfigMap", &name).await? {
            removed.config_maps += 1;
        }
    }
    let configs: Api<Config> = Api::all(client.clone());
    let name = &config.config_name;
    let unfinalized = configs
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"finalizers": null}})),
        )
        .await;
    match unfinalized {
        Ok(_) => removed.config = delete(&configs, "Config", name).await?,
        Err(kube::Error::Api(status)) if status.is_not_found() => {}
        Err(source) => {
            return Err(Error::Write {
                verb: "update",
                kind: "Config",
                name: name.clone(),
                source,
            });
        }
    }
    Ok(removed)
}

async fn served(client: &Client, group: &str, plural: &str) -> Result<bool, Error> {
    olm_runtime::discovery::served_resource(client, group, plural)
        .await
        .map(|resource| resource.is_some())
        .map_err(|source| Error::Discover {
            what: "image and template",
            source,
        })
}

/// Scales the operator to zero and waits until its pods are gone.
async fn stop_operator(
    client: &Client,
    namespace: &str,
    deployment: &str,
    timeout: Duration,
) -> Result<(), Error> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let Some(found) = deployments
        .get_opt(deployment)
        .await
        .map_err(read("Deployment", deployment))?
    else {
        return Ok(());
    };
    deployments
        .patch(
            deployment,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"replicas": 0}})),
        )
        .await
        .map_err(|source| Error::Write {
            verb: "update",
            kind: "Deployment",
            name: deployment.to_owned(),
            source,
        })?;
    let selector = found
        .spec
        .and_then(|spec| spec.selector.match_labels)
        .unwrap_or_default()
        .iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect::<Vec<_>>()
        .join(",");
    if selector.is_empty() {
        return Ok(());
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let running = pods
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(read("Pod", &selector))?
            .items
            .len();
        if running == 0 {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::OperatorStillRunning {
                deployment: format!("{namespace}/{deployment}"),
                pods: running,
                timeout,
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

fn read(kind: &'static str, name: &str) -> impl Fn(kube::Error) -> Error {
    let name = name.to_owned();
    move |source| Error::Read {
        kind,
        name: name.clone(),
        source,
    }
}

/// Deletes `name`; returns whether it was there.
async fn delete<K>(api: &Api<K>, kind: &'static str, name: &str) -> Result<bool, Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    super::write::delete(api, name)
        .await
        .map_err(|source| Error::Write {
            verb: "delete",
            kind,
            name: name.to_owned(),
            source,
        })
}
