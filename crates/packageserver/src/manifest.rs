//! Building PackageManifests from what a catalog's registry API returns: a
//! pure function of the catalog's metadata, the package, each channel's head
//! bundle and the bundle list, as upstream's packageserver builds them.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use olm_api::{
    csv::{
        ApiServiceDefinitions, ApiServiceDescription, AppLink, CrdDescription,
        CustomResourceDefinitions, Icon,
    },
    labels::{package_manifest as labels, property_type},
    package_manifest::{
        ChannelEntry, CsvDescription, Deprecation, PackageChannel, PackageManifest,
        PackageManifestStatus,
    },
};
use olm_registry::api;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Label prefix of the operating systems a CSV declares.
pub const OS_LABEL_PREFIX: &str = "operatorframework.io/os.";

/// Label prefix of the architectures a CSV declares.
pub const ARCH_LABEL_PREFIX: &str = "operatorframework.io/arch.";

/// What packageserver knows about the CatalogSource a package comes from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CatalogMeta {
    /// Name of the CatalogSource.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// `spec.displayName`.
    pub display_name: String,
    /// `spec.publisher`.
    pub publisher: String,
    /// Its labels, copied onto every package.
    pub labels: BTreeMap<String, String>,
    /// Its creation time, which every package reports as its own.
    pub creation_timestamp: Option<Time>,
}

/// The head bundle of one channel, or why it could not be fetched.
pub type ChannelHead = Result<api::Bundle, String>;

/// Builds one PackageManifest; `None` when no channel has a usable head
/// (upstream elides such packages).
///
/// `heads` maps channel names to their head bundle; `bundles` are the
/// package's entries from `ListBundles` (one per bundle and channel).
pub fn build(
    catalog: &CatalogMeta,
    package: &api::Package,
    heads: &BTreeMap<String, ChannelHead>,
    bundles: &[api::Bundle],
) -> Option<PackageManifest> {
    let mut channels = Vec::new();
    let mut default_csv: Option<Value> = None;
    let mut first_csv: Option<Value> = None;
    let mut sorted: Vec<&api::Channel> = package.channels.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    for channel in sorted {
        let Some(Ok(head)) = heads.get(&channel.name) else {
            continue;
        };
        let Ok(csv) = serde_json::from_str::<Value>(&head.csv_json) else {
            continue;
        };
        if !csv.is_object() {
            continue;
        }
        let entries = bundles
            .iter()
            .filter(|b| b.channel_name == channel.name && !is_deprecated_bundle(b))
            .map(|b| ChannelEntry {
                name: b.csv_name.clone(),
                version: non_empty(&b.version),
                deprecation: b.deprecation.as_ref().map(deprecation),
            })
            .collect();
        let current_csv = csv
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .map_or_else(|| head.csv_name.clone(), str::to_owned);
        channels.push(PackageChannel {
            name: channel.name.clone(),
            current_csv,
            current_csv_desc: describe(&csv),
            deprecation: channel.deprecation.as_ref().map(deprecation),
            entries,
        });
        if channel.name == package.default_channel_name {
            default_csv = Some(csv);
        } else if first_csv.is_none() {
            first_csv = Some(csv);
        }
    }
    if channels.is_empty() {
        return None;
    }
    let default_present = channels
        .iter()
        .any(|c| c.name == package.default_channel_name);
    let default_channel = if default_present {
        package.default_channel_name.clone()
    } else {
        channels[0].name.clone()
    };
    let default_csv = default_csv.or(first_csv).unwrap_or(Value::Null);
    let provider: AppLink = field(&default_csv, "/spec/provider").unwrap_or_default();

    let mut manifest_labels = catalog.labels.clone();
    manifest_labels.insert(labels::CATALOG.to_owned(), catalog.name.clone());
    manifest_labels.insert(
        labels::CATALOG_NAMESPACE.to_owned(),
        catalog.namespace.clone(),
    );
    manifest_labels.insert(
        labels::PROVIDER.to_owned(),
        provider.name.clone().unwrap_or_default(),
    );
    manifest_labels.insert(
        labels::PROVIDER_URL.to_owned(),
        provider.url.clone().unwrap_or_default(),
    );
    let csv_labels: BTreeMap<String, String> =
        field(&default_csv, "/metadata/labels").unwrap_or_default();
    manifest_labels.extend(csv_labels);
    set_default_os_arch(&mut manifest_labels);

    Some(PackageManifest {
        metadata: ObjectMeta {
            name: Some(package.name.clone()),
            namespace: Some(catalog.namespace.clone()),
            labels: Some(manifest_labels),
            creation_timestamp: catalog.creation_timestamp.clone(),
            ..ObjectMeta::default()
        },
        spec: Default::default(),
        status: PackageManifestStatus {
            catalog_source: catalog.name.clone(),
            catalog_source_display_name: catalog.display_name.clone(),
            catalog_source_publisher: catalog.publisher.clone(),
            catalog_source_namespace: catalog.namespace.clone(),
            provider,
            package_name: package.name.clone(),
            deprecation: package.deprecation.as_ref().map(deprecation),
            channels,
            default_channel,
        },
    })
}

/// Adds `operatorframework.io/os.linux` and `operatorframework.io/arch.amd64`
/// (`supported`) when no label of that kind exists.
pub fn set_default_os_arch(labels_map: &mut BTreeMap<String, String>) {
    if !labels_map.keys().any(|k| k.starts_with(OS_LABEL_PREFIX)) {
        labels_map.insert(labels::OS_LINUX.to_owned(), labels::SUPPORTED.to_owned());
    }
    if !labels_map.keys().any(|k| k.starts_with(ARCH_LABEL_PREFIX)) {
        labels_map.insert(labels::ARCH_AMD64.to_owned(), labels::SUPPORTED.to_owned());
    }
}

fn is_deprecated_bundle(bundle: &api::Bundle) -> bool {
    bundle
        .properties
        .iter()
        .any(|p| p.r#type == property_type::DEPRECATED)
}

fn deprecation(d: &api::Deprecation) -> Deprecation {
    Deprecation {
        message: d.message.clone(),
    }
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_owned())
}

/// Reads the field at `pointer` as `T`, ignoring it when absent or malformed:
/// one odd field of a CSV must not hide the whole package.
fn field<T: DeserializeOwned>(csv: &Value, pointer: &str) -> Option<T> {
    csv.pointer(pointer)
        .filter(|v| !v.is_null())
        .and_then(|v| serde_json::from_value(v.clone()).ok())
}

fn trim_crds(list: Option<Vec<CrdDescription>>) -> Option<Vec<CrdDescription>> {
    list.map(|crds| {
        crds.into_iter()
            .map(|crd| CrdDescription {
                name: crd.name,
                version: crd.version,
                kind: crd.kind,
                display_name: crd.display_name,
                description: crd.description,
                ..CrdDescription::default()
            })
            .collect()
    })
}

fn trim_apis(list: Option<Vec<ApiServiceDescription>>) -> Option<Vec<ApiServiceDescription>> {
    list.map(|apis| {
        apis.into_iter()
            .map(|api| ApiServiceDescription {
                name: api.name,
                group: api.group,
                version: api.version,
                kind: api.kind,
                display_name: api.display_name,
                description: api.description,
                ..ApiServiceDescription::default()
            })
            .collect()
    })
}

/// The parts of a head CSV that PackageManifests carry. Owned and required
/// API descriptions keep only their names and texts (descriptors are left
/// out to keep responses small, as upstream does).
pub fn describe(csv: &Value) -> CsvDescription {
    let crds: CustomResourceDefinitions =
        field(csv, "/spec/customresourcedefinitions").unwrap_or_default();
    let apis: ApiServiceDefinitions = field(csv, "/spec/apiservicedefinitions").unwrap_or_default();
    let related: Option<Vec<Value>> = field(csv, "/spec/relatedImages");
    CsvDescription {
        display_name: field(csv, "/spec/displayName"),
        icon: field::<Vec<Icon>>(csv, "/spec/icon").filter(|icons| !icons.is_empty()),
        version: field(csv, "/spec/version"),
        provider: field(csv, "/spec/provider"),
        annotations: field(csv, "/metadata/annotations"),
        keywords: field(csv, "/spec/keywords"),
        links: field(csv, "/spec/links"),
        maintainers: field(csv, "/spec/maintainers"),
        maturity: field(csv, "/spec/maturity"),
        description: field(csv, "/spec/description"),
        install_modes: field(csv, "/spec/installModes"),
        customresourcedefinitions: Some(CustomResourceDefinitions {
            owned: trim_crds(crds.owned),
            required: trim_crds(crds.required),
        }),
        apiservicedefinitions: Some(ApiServiceDefinitions {
            owned: trim_apis(apis.owned),
            required: trim_apis(apis.required),
        }),
        native_apis: field(csv, "/spec/nativeAPIs"),
        min_kube_version: field(csv, "/spec/minKubeVersion"),
        related_images: related.map(|images| {
            images
                .iter()
                .filter_map(|i| i.get("image").and_then(Value::as_str).map(str::to_owned))
                .collect()
        }),
    }
}

/// Upstream's placeholder icon, served when a package has none.
pub const DEFAULT_ICON_SVG: &str = r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 258.51 258.51"><defs><style>.cls-1{fill:#d1d1d1;}.cls-2{fill:#8d8d8f;}</style></defs><title>Asset 4</title><g id="Layer_2" data-name="Layer 2"><g id="Layer_1-2" data-name="Layer 1"><path class="cls-1" d="M129.25,20A109.1,109.1,0,0,1,206.4,206.4,109.1,109.1,0,1,1,52.11,52.11,108.45,108.45,0,0,1,129.25,20m0-20h0C58.16,0,0,58.16,0,129.25H0c0,71.09,58.16,129.26,129.25,129.26h0c71.09,0,129.26-58.17,129.26-129.26h0C258.51,58.16,200.34,0,129.25,0Z"/><path class="cls-2" d="M177.54,103.41H141.66L154.9,65.76c1.25-4.4-2.33-8.76-7.21-8.76H102.93a7.32,7.32,0,0,0-7.4,6l-10,69.61c-.59,4.17,2.89,7.89,7.4,7.89h36.9L115.55,197c-1.12,4.41,2.48,8.55,7.24,8.55a7.58,7.58,0,0,0,6.47-3.48L184,113.85C186.86,109.24,183.29,103.41,177.54,103.41Z"/></g></g></svg>"#;

/// Upper bound on a decoded icon; larger icons are replaced by the default.
pub const MAX_ICON_BYTES: usize = 2 * 1024 * 1024;

/// The icon subresource: the first icon of the default channel's head,
/// decoded, with its media type; the default SVG when there is none or it
/// does not decode.
pub fn icon(manifest: &PackageManifest) -> (Vec<u8>, String) {
    use base64::Engine as _;
    let status = &manifest.status;
    let channel = status
        .channels
        .iter()
        .find(|c| c.name == status.default_channel)
        .or_else(|| status.channels.first());
    let first = channel
        .and_then(|c| c.current_csv_desc.icon.as_ref())
        .and_then(|icons| icons.first());
    if let Some(icon) = first
        && icon.base64_data.len() <= MAX_ICON_BYTES / 3 * 4 + 4
        && let Ok(bytes) =
            base64::engine::general_purpose::STANDARD.decode(icon.base64_data.trim().as_bytes())
        && !bytes.is_empty()
    {
        let media = if icon.media_type.is_empty() {
            "application/octet-stream".to_owned()
        } else {
            icon.media_type.clone()
        };
        return (bytes, media);
    }
    (
        DEFAULT_ICON_SVG.as_bytes().to_vec(),
        "image/svg+xml".to_owned(),
    )
}

/// Removes icons from every channel: GET and LIST responses leave them out
/// (clients fetch them through the `icon` subresource), as upstream does.
pub fn strip_icons(manifest: &mut PackageManifest) {
    for channel in &mut manifest.status.channels {
        channel.current_csv_desc.icon = None;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn catalog() -> CatalogMeta {
        CatalogMeta {
            name: "widget-index".into(),
            namespace: "widget-catalogs".into(),
            display_name: "Widget Index".into(),
            publisher: "Widget Works".into(),
            labels: BTreeMap::from([("team".into(), "widgets".into())]),
            creation_timestamp: None,
        }
    }

    fn package(default: &str, channels: &[&str]) -> api::Package {
        api::Package {
            name: "widget-operator".into(),
            channels: channels
                .iter()
                .map(|c| api::Channel {
                    name: (*c).into(),
                    csv_name: format!("widget-operator.{c}"),
                    deprecation: None,
                })
                .collect(),
            default_channel_name: default.into(),
            deprecation: None,
        }
    }

    fn head(channel: &str, extra: Value) -> api::Bundle {
        let mut csv = json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "ClusterServiceVersion",
            "metadata": {"name": format!("widget-operator.{channel}"), "annotations": {"capabilities": "Basic Install"}},
            "spec": {
                "displayName": "Widget",
                "version": "1.0.0",
                "provider": {"name": format!("Provider {channel}"), "url": "https://widgets.example"},
                "icon": [{"base64data": "PHN2Zz48L3N2Zz4=", "mediatype": "image/svg+xml"}],
                "customresourcedefinitions": {"owned": [{"name": "widgets.example.test", "version": "v1", "kind": "Widget",
                    "specDescriptors": [{"path": "size"}]}]},
                "relatedImages": [{"name": "op", "image": "registry.example/widget@sha256:01"}],
            }
        });
        if let (Some(base), Some(extra)) = (csv.as_object_mut(), extra.as_object()) {
            for (k, v) in extra {
                base.insert(k.clone(), v.clone());
            }
        }
        api::Bundle {
            csv_name: format!("widget-operator.{channel}"),
            package_name: "widget-operator".into(),
            channel_name: channel.into(),
            csv_json: csv.to_string(),
            ..api::Bundle::default()
        }
    }

    fn entry(channel: &str, name: &str, deprecated: bool) -> api::Bundle {
        api::Bundle {
            csv_name: name.into(),
            channel_name: channel.into(),
            version: "1.0.0".into(),
            properties: if deprecated {
                vec![api::Property {
                    r#type: "olm.deprecated".into(),
                    value: "{}".into(),
                }]
            } else {
                vec![]
            },
            ..api::Bundle::default()
        }
    }

    #[test]
    fn builds_upstream_shape() {
        let heads = BTreeMap::from([
            ("stable".to_owned(), Ok(head("stable", json!({})))),
            ("alpha".to_owned(), Ok(head("alpha", json!({})))),
        ]);
        let bundles = [
            entry("stable", "widget-operator.stable", false),
            entry("stable", "widget-operator.old", true),
            entry("alpha", "widget-operator.alpha", false),
        ];
        let m = build(
            &catalog(),
            &package("stable", &["stable", "alpha"]),
            &heads,
            &bundles,
        )
        .expect("a manifest");
        let names: Vec<_> = m.status.channels.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["alpha", "stable"], "channels sorted by name");
        assert_eq!(m.status.default_channel, "stable");
        assert_eq!(m.status.provider.name.as_deref(), Some("Provider stable"));
        let labels = m.metadata.labels.as_ref().expect("labels");
        assert_eq!(labels["catalog"], "widget-index");
        assert_eq!(labels["catalog-namespace"], "widget-catalogs");
        assert_eq!(labels["provider"], "Provider stable");
        assert_eq!(labels["provider-url"], "https://widgets.example");
        assert_eq!(labels["team"], "widgets");
        assert_eq!(labels["operatorframework.io/os.linux"], "supported");
        assert_eq!(labels["operatorframework.io/arch.amd64"], "supported");
        let stable = &m.status.channels[1];
        assert_eq!(stable.entries.len(), 1, "deprecated bundles left out");
        let desc = &stable.current_csv_desc;
        let owned = desc
            .customresourcedefinitions
            .as_ref()
            .and_then(|c| c.owned.as_ref())
            .expect("owned crds");
        assert!(owned[0].spec_descriptors.is_none(), "descriptors trimmed");
        assert_eq!(
            desc.related_images.as_deref(),
            Some(&["registry.example/widget@sha256:01".to_owned()][..])
        );
    }

    #[test]
    fn elides_broken_channels_and_resets_default() {
        let heads = BTreeMap::from([
            ("stable".to_owned(), Err("unavailable".to_owned())),
            ("beta".to_owned(), Ok(head("beta", json!({})))),
        ]);
        let m = build(
            &catalog(),
            &package("stable", &["stable", "beta"]),
            &heads,
            &[],
        )
        .expect("a manifest");
        assert_eq!(m.status.default_channel, "beta");
        assert_eq!(m.status.channels.len(), 1);
    }

    #[test]
    fn package_without_usable_channels_is_elided() {
        let mut broken = head("stable", json!({}));
        broken.csv_json = "{not json".into();
        let heads = BTreeMap::from([("stable".to_owned(), Ok(broken))]);
        assert!(build(&catalog(), &package("stable", &["stable"]), &heads, &[]).is_none());
    }

    #[test]
    fn declared_os_and_arch_labels_suppress_defaults() {
        let extra = json!({"metadata": {"name": "widget-operator.stable", "labels": {
            "operatorframework.io/os.windows": "supported",
            "operatorframework.io/arch.arm64": "supported"}}});
        let heads = BTreeMap::from([("stable".to_owned(), Ok(head("stable", extra)))]);
        let m = build(&catalog(), &package("stable", &["stable"]), &heads, &[]).expect("manifest");
        let labels = m.metadata.labels.expect("labels");
        assert!(!labels.contains_key("operatorframework.io/os.linux"));
        assert!(!labels.contains_key("operatorframework.io/arch.amd64"));
        assert_eq!(labels["operatorframework.io/arch.arm64"], "supported");
    }

    #[test]
    fn malformed_csv_fields_are_ignored_not_fatal() {
        let extra = json!({"spec": {"displayName": 42, "provider": "not an object", "icon": "x"}});
        let heads = BTreeMap::from([("stable".to_owned(), Ok(head("stable", extra)))]);
        let m = build(&catalog(), &package("stable", &["stable"]), &heads, &[]).expect("manifest");
        assert_eq!(m.status.channels[0].current_csv_desc.display_name, None);
        assert_eq!(m.status.provider, AppLink::default());
    }

    #[test]
    fn icon_decodes_or_falls_back() {
        let heads = BTreeMap::from([("stable".to_owned(), Ok(head("stable", json!({}))))]);
        let mut m =
            build(&catalog(), &package("stable", &["stable"]), &heads, &[]).expect("manifest");
        assert_eq!(
            icon(&m),
            (b"<svg></svg>".to_vec(), "image/svg+xml".to_owned())
        );
        strip_icons(&mut m);
        let (bytes, media) = icon(&m);
        assert_eq!(media, "image/svg+xml");
        assert_eq!(bytes, DEFAULT_ICON_SVG.as_bytes());
        // Garbage base64 falls back too.
        m.status.channels[0].current_csv_desc.icon = Some(vec![Icon {
            base64_data: "!!!".into(),
            media_type: "image/png".into(),
        }]);
        assert_eq!(icon(&m).1, "image/svg+xml");
        // An icon over the limit is not decoded.
        use base64::Engine as _;
        let huge = base64::engine::general_purpose::STANDARD.encode(vec![b'x'; MAX_ICON_BYTES + 3]);
        m.status.channels[0].current_csv_desc.icon = Some(vec![Icon {
            base64_data: huge,
            media_type: "image/png".into(),
        }]);
        assert_eq!(icon(&m).1, "image/svg+xml");
        let fits = base64::engine::general_purpose::STANDARD.encode(vec![b'x'; MAX_ICON_BYTES]);
        m.status.channels[0].current_csv_desc.icon = Some(vec![Icon {
            base64_data: fits,
            media_type: "image/png".into(),
        }]);
        assert_eq!(icon(&m).0.len(), MAX_ICON_BYTES);
    }
}
