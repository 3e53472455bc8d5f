//! A `ListBundles` answer as resolver input (feature `resolver-input`): the
//! one home of upstream's fallbacks for bundles without properties, used by
//! catalog-operator's catalog snapshots and by `kubectl olm`, so that a
//! preview and the controller read a catalog the same way. Upstream:
//! `EntryFromBundle` and `legacyDependenciesToProperties` of OLM's resolver
//! cache.
//!
//! [`snapshot`] reads a local catalog directory the same way, through the
//! [`CatalogIndex`] the server answers from, without a server.

use olm_resolver::{BundleInput, CatalogKey, CatalogSnapshot};

use crate::{api, bundle::BundleForm, error::ReadError, index::CatalogIndex};

/// The resolver's snapshot of an indexed catalog: what a client of a
/// registry serving `index` builds from its packages (name and default
/// channel) and its `ListBundles` answer through [`bundle_input`], read from
/// the index directly.
///
/// The bundles' manifests (`csvJson`, `object`) are neither decoded nor
/// synthesized, since resolver input does not read them, and bundle
/// documents are read one at a time per thread: memory holds the index, the
/// resolver input and the snapshot, never the catalog's documents.
///
/// ```no_run
/// # fn example() -> Result<(), Box<dyn std::error::Error>> {
/// use olm_registry::{CatalogIndex, IndexOptions, resolver_input};
/// use olm_resolver::CatalogKey;
///
/// let index = CatalogIndex::build("/configs", &IndexOptions::default())?;
/// let key = CatalogKey::new("community", "olm");
/// let snapshot = resolver_input::snapshot(&index, key, 0, true)?;
/// # Ok(())
/// # }
/// ```
pub fn snapshot(
    index: &CatalogIndex,
    key: CatalogKey,
    priority: i32,
    healthy: bool,
) -> Result<CatalogSnapshot, ReadError> {
    let packages: Vec<(String, String)> = index
        .packages
        .iter()
        .map(|p| {
            (
                index.str(p.name).to_owned(),
                index.str(p.default_channel).to_owned(),
            )
        })
        .collect();
    Ok(CatalogSnapshot::build(
        key,
        priority,
        healthy,
        &packages,
        listed_bundle_inputs(index)?,
    ))
}

/// The `ListBundles` answer as resolver input, in order. Reading the bundle
/// documents back is most of the cost, so threads (as many as indexing
/// uses) read consecutive runs of the answer.
fn listed_bundle_inputs(index: &CatalogIndex) -> Result<Vec<BundleInput>, ReadError> {
    let count = index.listed_count();
    let run = count.div_ceil(crate::index::read_threads(None)).max(1);
    let runs: Vec<Result<Vec<BundleInput>, ReadError>> = std::thread::scope(|s| {
        let readers: Vec<_> = (0..count)
            .step_by(run)
            .map(|start| {
                s.spawn(move || {
                    index
                        .listed_bundles(BundleForm::ListedMetadata, start..(start + run).min(count))
                        .map(|b| b.map(bundle_input))
                        .collect()
                })
            })
            .collect();
        readers
            .into_iter()
            .map(|r| {
                r.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    let mut inputs = Vec::with_capacity(count);
    for run in runs {
        inputs.extend(run?);
    }
    Ok(inputs)
}

/// One `ListBundles` answer as resolver input, with upstream's fallbacks for
/// bundles without properties: provided APIs become `olm.gvk`, legacy
/// dependencies and required APIs become requirements, and an `olm.package`
/// property is always present.
pub fn bundle_input(b: api::Bundle) -> BundleInput {
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
