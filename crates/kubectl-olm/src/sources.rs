//! Loading catalogs for the preview: a file-based catalog directory (through
//! the index `olm-registry`'s server answers from) or a registry address
//! (through `olm-registry`'s client and `ListBundles`, as catalog-operator
//! reads catalogs). Both become resolver input through
//! `olm_registry::resolver_input`, so a directory and the registry serving it
//! give the same snapshot.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use futures::TryStreamExt;
use olm_registry::{CatalogIndex, ClientOptions, IndexOptions, RegistryClient, api};
use olm_resolver::{BundleInput, CatalogKey, CatalogSnapshot};

/// How long connecting to a registry may take.
pub(crate) const REGISTRY_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long listing a registry's bundles may take (upstream gives each
/// catalog one minute).
pub(crate) const REGISTRY_LIST_TIMEOUT: Duration = Duration::from_secs(60);

/// One `--catalog NAMESPACE/NAME=SOURCE` argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CatalogArg {
    /// The CatalogSource namespace.
    pub namespace: String,
    /// The CatalogSource name.
    pub name: String,
    /// A directory, or a `grpc://` / `http://` registry address.
    pub source: String,
}

/// Parses `NAMESPACE/NAME=SOURCE`.
pub(crate) fn parse_catalog_arg(arg: &str) -> Result<CatalogArg, String> {
    let (key, source) = arg
        .split_once('=')
        .ok_or_else(|| format!("expected NAMESPACE/NAME=SOURCE, got {arg:?}"))?;
    let (namespace, name) = key
        .split_once('/')
        .ok_or_else(|| format!("expected NAMESPACE/NAME before '=', got {key:?}"))?;
    if namespace.is_empty() || name.is_empty() || source.is_empty() {
        return Err(format!("expected NAMESPACE/NAME=SOURCE, got {arg:?}"));
    }
    Ok(CatalogArg {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        source: source.to_owned(),
    })
}

/// Loads one catalog.
pub(crate) fn load(arg: &CatalogArg, priority: i32, healthy: bool) -> Result<CatalogSnapshot> {
    let key = CatalogKey::new(&arg.name, &arg.namespace);
    if let Some(address) = arg
        .source
        .strip_prefix("grpc://")
        .map(|a| format!("http://{a}"))
        .or_else(|| {
            arg.source
                .starts_with("http://")
                .then(|| arg.source.clone())
        })
    {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (packages, bundles) = runtime
            .block_on(list_registry(&address))
            .with_context(|| format!("catalog {key}: registry {address}"))?;
        return Ok(CatalogSnapshot::build(
            key, priority, healthy, &packages, bundles,
        ));
    }
    // The index keeps names and channel graphs, and the snapshot reads the
    // bundle documents back one at a time: a large catalog is never held in
    // memory whole.
    let index = CatalogIndex::build(&arg.source, &IndexOptions::default())
        .with_context(|| format!("catalog {key}: loading {}", arg.source))?;
    olm_registry::resolver_input::snapshot(&index, key.clone(), priority, healthy)
        .with_context(|| format!("catalog {key}: reading {}", arg.source))
}

/// A client of the registry at `address` (`http://host:port`), with this
/// tool's timeouts.
pub(crate) async fn connect_registry(address: &str) -> Result<RegistryClient> {
    Ok(RegistryClient::connect(
        address,
        ClientOptions {
            connect_timeout: REGISTRY_CONNECT_TIMEOUT,
            request_timeout: REGISTRY_LIST_TIMEOUT,
            ..ClientOptions::default()
        },
    )
    .await?)
}

/// Packages (name, default channel) and bundles of the registry at
/// `address` (`http://host:port`), as resolver input.
pub(crate) async fn list_registry(
    address: &str,
) -> Result<(Vec<(String, String)>, Vec<BundleInput>)> {
    let client = connect_registry(address).await?;
    let mut packages = Vec::new();
    for name in client.list_packages().await? {
        let package = client.get_package(&name).await?;
        packages.push((package.name, package.default_channel_name));
    }
    let list = tokio::time::timeout(REGISTRY_LIST_TIMEOUT, async {
        client
            .list_bundles()
            .await?
            .try_collect::<Vec<api::Bundle>>()
            .await
    })
    .await;
    let bundles = match list {
        Ok(result) => result?,
        Err(_) => bail!("listing bundles took longer than {REGISTRY_LIST_TIMEOUT:?}"),
    };
    Ok((
        packages,
        bundles
            .into_iter()
            .map(olm_registry::resolver_input::bundle_input)
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_args_parse() {
        assert_eq!(
            parse_catalog_arg("olm/community=./dir").unwrap(),
            CatalogArg {
                namespace: "olm".into(),
                name: "community".into(),
                source: "./dir".into()
            }
        );
        for bad in ["olm/community", "community=./dir", "/x=y", "a/b=", "=x"] {
            assert!(parse_catalog_arg(bad).is_err(), "{bad}");
        }
    }
}
