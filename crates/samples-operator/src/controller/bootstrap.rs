//! The default Config, made when there is none: the facts
//! [`crate::decide::bootstrap`] decides from are read here (the cluster
//! image policy and proxy, where the cluster serves them), and the
//! samples registry is probed when nothing else rules samples out.

use jiff::Timestamp;
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, PostParams},
};
use olm_api::samples::{CONFIG_FINALIZER, Config};
use olm_runtime::apply::write_status;
use tokio_util::sync::CancellationToken;

use super::{Apis, Error, FIELD_MANAGER, InventorySource, SamplesConfig};
use crate::decide::{
    bootstrap::{Bootstrap, BootstrapFacts, ImagePolicy, decide, default_config},
    inventory::Inventory,
};

/// The name of the cluster-wide Image and Proxy configs.
const CLUSTER: &str = "cluster";

/// The cluster image policy, `None` when the Image config `cluster` does
/// not exist.
pub(super) async fn image_policy(
    client: &Client,
    resource: &ApiResource,
) -> Result<Option<ImagePolicy>, Error> {
    let images: Api<DynamicObject> = Api::all_with(client.clone(), resource);
    let image = images
        .get_opt(CLUSTER)
        .await
        .map_err(|source| Error::Read {
            kind: "Image config",
            name: CLUSTER.to_owned(),
            source,
        })?;
    Ok(image.map(|image| {
        ImagePolicy::from_spec(image.data.get("spec").unwrap_or(&serde_json::Value::Null))
    }))
}

/// Whether the Proxy config `cluster` sets a global proxy.
async fn proxy_configured(client: &Client, resource: &ApiResource) -> bool {
    let proxies: Api<DynamicObject> = Api::all_with(client.clone(), resource);
    match proxies.get_opt(CLUSTER).await {
        Ok(Some(proxy)) => ["httpProxy", "httpsProxy"].iter().any(|field| {
            proxy
                .data
                .pointer(&format!("/status/{field}"))
                .and_then(serde_json::Value::as_str)
                .is_some_and(|value| !value.is_empty())
        }),
        Ok(None) => false,
        Err(error) => {
            tracing::info!(
                error = &error as &dyn std::error::Error,
                "unable to retrieve the proxy configuration; probing the samples registry"
            );
            false
        }
    }
}

/// Whether there are samples for `architecture`.
fn has_samples(config: &SamplesConfig, architecture: &str) -> bool {
    match &config.inventory {
        InventorySource::Fixed(inventory) => !inventory.image_streams.is_empty(),
        InventorySource::Embedded(flavour) => Inventory::embedded(*flavour, architecture)
            .ok()
            .flatten()
            .is_some_and(|inventory| !inventory.image_streams.is_empty()),
    }
}

/// Makes the default Config, deciding its management state first.
pub(super) async fn create_default(
    client: &Client,
    configs: &Api<Config>,
    config: &SamplesConfig,
    image_config: Option<&ApiResource>,
    proxy_config: Option<&ApiResource>,
    shutdown: &CancellationToken,
) -> Result<(), Error> {
    let settings = &config.bootstrap;
    // An architecture this flavour ships no samples for is as good as none.
    let architecture = settings
        .architecture
        .clone()
        .filter(|arch| has_samples(config, arch));
    let mut facts = BootstrapFacts {
        architecture,
        ipv6: settings.ipv6,
        image_policy: None,
        proxy: settings.proxy,
        registry_reachable: None,
    };
    if let Some(resource) = image_config {
        // Upstream reads an unreadable policy as blocking.
        facts.image_policy = Some(match image_policy(client, resource).await {
            Ok(policy) => Ok(policy.unwrap_or_default()),
            Err(error) => {
                tracing::info!(
                    error = &error as &dyn std::error::Error,
                    "unable to retrieve the image configuration"
                );
                Err(())
            }
        });
    }
    if !facts.proxy
        && let Some(resource) = proxy_config
    {
        facts.proxy = proxy_configured(client, resource).await;
    }
    let mut outcome = decide(&facts);
    if outcome == Bootstrap::Probe {
        facts.registry_reachable = match &settings.probe {
            None => Some(true),
            Some(probe) => {
                tracing::info!(
                    target = probe.target(),
                    deadline = ?settings.probe_deadline,
                    "probing the samples registry before making the default Config"
                );
                match probe
                    .reachable_within(settings.probe_deadline, settings.probe_interval, shutdown)
                    .await
                {
                    Some(reachable) => Some(reachable),
                    None => return Ok(()),
                }
            }
        };
        outcome = decide(&facts);
    }
    match outcome {
        Bootstrap::Removed(because) => {
            tracing::info!(reason = because.as_str(), "{}", because.explanation())
        }
        Bootstrap::Managed | Bootstrap::Probe => {
            tracing::info!("bootstrapping the samples as Managed");
        }
    }
    let default = default_config(
        &config.config_name,
        settings.architecture.as_deref(),
        outcome,
    );
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.as_str().to_owned()),
        ..PostParams::default()
    };
    match configs.create(&params, &default).await {
        Ok(_) => {
            tracing::info!(config = %config.config_name, "created the default Config");
            Ok(())
        }
        Err(kube::Error::Api(status)) if status.is_already_exists() => {
            tracing::info!("got already exists error on create default");
            Ok(())
        }
        Err(source) => Err(Error::CreateConfig {
            name: config.config_name.clone(),
            source,
        }),
    }
}

/// On a cluster without the image and template APIs: makes the default
/// Config when absent (without a probe: there is nothing to pull) and says
/// in its status that there is nothing to do.
pub(super) async fn report_apis_absent(
    client: &Client,
    config: &SamplesConfig,
    apis: &Apis,
) -> Result<(), Error> {
    let configs: Api<Config> = Api::all(client.clone());
    let read = |source| Error::Read {
        kind: "Config",
        name: config.config_name.clone(),
        source,
    };
    let current = match configs.get_opt(&config.config_name).await.map_err(read)? {
        Some(current) => current,
        None => {
            let mut quiet = config.clone();
            quiet.bootstrap.probe = None;
            create_default(
                client,
                &configs,
                &quiet,
                apis.image_config.as_ref(),
                apis.proxy_config.as_ref(),
                &CancellationToken::new(),
            )
            .await?;
            configs
                .get(&config.config_name)
                .await
                .map_err(|source| Error::Read {
                    kind: "Config",
                    name: config.config_name.clone(),
                    source,
                })?
        }
    };
    if current.metadata.deletion_timestamp.is_some() {
        // There are no samples to clean up: let it go (a new one is made
        // at the next look).
        let remaining: Vec<String> = current
            .metadata
            .finalizers
            .clone()
            .unwrap_or_default()
            .into_iter()
            .filter(|finalizer| finalizer != CONFIG_FINALIZER)
            .collect();
        let patch = serde_json::json!({"metadata": {
            "finalizers": remaining,
            "resourceVersion": current.metadata.resource_version,
        }});
        return match configs
            .patch(
                &config.config_name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
            Err(source) => Err(Error::Write {
                verb: "update",
                kind: "Config",
                name: config.config_name.clone(),
                source,
            }),
        };
    }
    if let Some(status) =
        crate::decide::bootstrap::apis_absent_status(current.status.as_ref(), Timestamp::now())
    {
        write_status(&configs, &FIELD_MANAGER, &current, &status, None)
            .await
            .map_err(|source| Error::WriteStatus {
                name: config.config_name.clone(),
                source,
            })?;
    }
    Ok(())
}
