//! Loading catalogs for the preview: a file-based catalog directory (through
//! `olm-catalog`) or a registry address (through `olm-registry`'s client and
//! `ListBundles`, as catalog-operator reads catalogs).

use std::time::Duration;

use anyhow::{Context, Result, bail};
use futures::TryStreamExt;
use olm_catalog::fbc::Catalog;
use olm_registry::{ClientOptions, RegistryClient, api};
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
    let catalog = Catalog::load_dir(&arg.source)
        .with_context(|| format!("catalog {key}: loading {}", arg.source))?;
    let mut snapshot = CatalogSnapshot::from_fbc(key, priority, &catalog);
    snapshot.priority = priority;
    snapshot.healthy = healthy;
    Ok(snapshot)
}

async fn list_registry(address: &str) -> Result<(Vec<(String, String)>, Vec<BundleInput>)> {
    let client = RegistryClient::connect(
        address,
        ClientOptions {
            connect_timeout: REGISTRY_CONNECT_TIMEOUT,
            request_timeout: REGISTRY_LIST_TIMEOUT,
            ..ClientOptions::default()
        },
    )
    .await?;
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
    Ok((packages, bundles.into_iter().map(bundle_input).collect()))
}

/// One `ListBundles` answer as resolver input, with upstream's fallbacks for
/// bundles without properties: provided APIs become `olm.gvk`, legacy
/// dependencies and required APIs become requirements, and an `olm.package`
/// property is always present.
pub(crate) fn bundle_input(b: api::Bundle) -> BundleInput {
    let gvk = |g: &api::GroupVersionKind| {
        serde_json::json!({"group": g.group, "version": g.version, "kind": g.kind}).to_string()
    };
    let mut properties: Vec<(String, String)> = b
        .properties
        .iter()
        .map(|p| (p.r#type.clone(), p.value.clone()))
        .collect();
    if properties.is_empty() {
        properties.extend(
            b.provided_apis
                .iter()
                .map(|g| ("olm.gvk".to_owned(), gvk(g))),
        );
        if b.dependencies.is_empty() {
            properties.extend(
                b.required_apis
                    .iter()
                    .map(|g| ("olm.gvk.required".to_owned(), gvk(g))),
            );
        } else {
            for d in &b.dependencies {
                let type_ = match d.r#type.as_str() {
                    "olm.gvk" => "olm.gvk.required",
                    "olm.package" => "olm.package.required",
                    other => other,
                };
                let mut value: serde_json::Value =
                    serde_json::from_str(&d.value).unwrap_or(serde_json::Value::Null);
                if type_ == "olm.package.required"
                    && let Some(obj) = value.as_object_mut()
                    && let Some(v) = obj.remove("version")
                {
                    obj.insert("versionRange".to_owned(), v);
                }
                properties.push((type_.to_owned(), value.to_string()));
            }
        }
    }
    if !properties.iter().any(|(t, _)| t == "olm.package") {
        properties.push((
            "olm.package".to_owned(),
            serde_json::json!({"packageName": b.package_name, "version": b.version}).to_string(),
        ));
    }
    BundleInput {
        name: b.csv_name,
        package: b.package_name,
        channel: b.channel_name,
        replaces: b.replaces,
        skips: b.skips,
        skip_range: b.skip_range,
        bundle_path: b.bundle_path,
        properties,
    }
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

    #[test]
    fn bundles_without_properties_get_upstreams_fallbacks() {
        let b = api::Bundle {
            csv_name: "a.v1".into(),
            package_name: "a".into(),
            channel_name: "stable".into(),
            version: "1.0.0".into(),
            provided_apis: vec![api::GroupVersionKind {
                group: "g".into(),
                version: "v1".into(),
                kind: "K".into(),
                plural: "ks".into(),
            }],
            dependencies: vec![api::Dependency {
                r#type: "olm.package".into(),
                value: r#"{"packageName":"b","version":">=1.0.0"}"#.into(),
            }],
            ..Default::default()
        };
        let input = bundle_input(b);
        let types: Vec<&str> = input.properties.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(types, ["olm.gvk", "olm.package.required", "olm.package"]);
        assert!(input.properties[1].1.contains("versionRange"));
    }
}
