//! `PackageManifest` (`packages.operators.coreos.com/v1`): a read-only view of
//! one package of one catalog, served by packageserver through the Kubernetes
//! aggregation layer.
//!
//! It is not a CRD, so there is no derive: the [`k8s_openapi::Resource`] and
//! [`k8s_openapi::Metadata`] implementations below are what make
//! `kube::Api<PackageManifest>` work. Field names and emptiness rules follow
//! upstream's Go types (`pkg/package-server/apis/operators/v1`): fields that Go
//! always writes are plain values here, and fields Go omits when empty are
//! `Option`s. The CSV-derived parts reuse the [`crate::csv`] types.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ListMeta, ObjectMeta};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize, ser::SerializeStruct};

use crate::csv::{
    ApiServiceDefinitions, AppLink, CustomResourceDefinitions, GroupVersionKind, Icon, InstallMode,
    Maintainer, OperatorVersion,
};

/// API group of the PackageManifest API.
pub const GROUP: &str = "packages.operators.coreos.com";

/// API version of the PackageManifest API within its group.
pub const VERSION: &str = "v1";

/// Resource name (plural) of PackageManifests.
pub const PLURAL: &str = "packagemanifests";

/// Name of the subresource that serves the default channel's icon, decoded.
pub const ICON_SUBRESOURCE: &str = "icon";

/// One package of one catalog: its channels, their heads and what users need to
/// choose it. Named after the package, in the namespace of the catalog (or of
/// the request, for catalogs in the global namespace).
#[derive(Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PackageManifest {
    /// Standard object metadata. Labels carry the catalog, its namespace, the
    /// provider and the default channel head's labels.
    #[serde(default)]
    pub metadata: ObjectMeta,

    /// Always empty: a PackageManifest has no desired state.
    #[serde(default)]
    pub spec: PackageManifestSpec,

    /// What the catalog holds for this package.
    #[serde(default)]
    pub status: PackageManifestStatus,
}

impl Serialize for PackageManifest {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut object = serializer.serialize_struct("PackageManifest", 5)?;
        object.serialize_field("apiVersion", <Self as k8s_openapi::Resource>::API_VERSION)?;
        object.serialize_field("kind", <Self as k8s_openapi::Resource>::KIND)?;
        object.serialize_field("metadata", &self.metadata)?;
        object.serialize_field("spec", &self.spec)?;
        object.serialize_field("status", &self.status)?;
        object.end()
    }
}

impl k8s_openapi::Resource for PackageManifest {
    const API_VERSION: &'static str = "packages.operators.coreos.com/v1";
    const GROUP: &'static str = GROUP;
    const KIND: &'static str = "PackageManifest";
    const VERSION: &'static str = VERSION;
    const URL_PATH_SEGMENT: &'static str = PLURAL;
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::ListableResource for PackageManifest {
    const LIST_KIND: &'static str = "PackageManifestList";
}

impl k8s_openapi::Metadata for PackageManifest {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// A list of PackageManifests, as packageserver serves it.
#[derive(Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct PackageManifestList {
    /// Standard list metadata.
    #[serde(default)]
    pub metadata: ListMeta,

    /// The packages.
    #[serde(default)]
    pub items: Vec<PackageManifest>,
}

impl Serialize for PackageManifestList {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut object = serializer.serialize_struct("PackageManifestList", 4)?;
        object.serialize_field(
            "apiVersion",
            <PackageManifest as k8s_openapi::Resource>::API_VERSION,
        )?;
        object.serialize_field(
            "kind",
            <PackageManifest as k8s_openapi::ListableResource>::LIST_KIND,
        )?;
        object.serialize_field("metadata", &self.metadata)?;
        object.serialize_field("items", &self.items)?;
        object.end()
    }
}

/// The (empty) desired state of a PackageManifest.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct PackageManifestSpec {}

/// What a catalog holds for one package.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PackageManifestStatus {
    /// Name of the CatalogSource the package comes from.
    #[serde(default)]
    pub catalog_source: String,

    /// Display name of that CatalogSource.
    #[serde(default)]
    pub catalog_source_display_name: String,

    /// Publisher of that CatalogSource.
    #[serde(default)]
    pub catalog_source_publisher: String,

    /// Namespace of that CatalogSource.
    #[serde(default)]
    pub catalog_source_namespace: String,

    /// Provider of the package, taken from the default channel's head CSV.
    #[serde(default)]
    pub provider: AppLink,

    /// Name of the package, for example `etcd`.
    #[serde(default)]
    pub package_name: String,

    /// Set when the catalog marks the whole package as deprecated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecation: Option<Deprecation>,

    /// The package's channels, sorted by name.
    #[serde(default)]
    pub channels: Vec<PackageChannel>,

    /// Channel a Subscription follows when it names none.
    #[serde(default)]
    pub default_channel: String,
}

impl PackageManifestStatus {
    /// The default channel, or the only channel when the package has one and
    /// names no default; `None` when neither applies.
    pub fn effective_default_channel(&self) -> Option<&PackageChannel> {
        if self.default_channel.is_empty() {
            return match self.channels.as_slice() {
                [only] => Some(only),
                _ => None,
            };
        }
        self.channels
            .iter()
            .find(|channel| channel.name == self.default_channel)
    }
}

/// Why a package, channel or bundle is deprecated.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Deprecation {
    /// Human-readable explanation, usually naming what to use instead.
    #[serde(default)]
    pub message: String,
}

/// One channel of a package.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PackageChannel {
    /// Name of the channel, for example `stable`.
    #[serde(default)]
    pub name: String,

    /// Name of the channel's head CSV: what a new Subscription installs.
    #[serde(default, rename = "currentCSV")]
    pub current_csv: String,

    /// Presentation details of the head CSV.
    #[serde(default, rename = "currentCSVDesc")]
    pub current_csv_desc: CsvDescription,

    /// Set when the catalog marks the channel as deprecated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecation: Option<Deprecation>,

    /// Every bundle of the channel (deprecated bundles left out).
    #[serde(default)]
    pub entries: Vec<ChannelEntry>,
}

/// One bundle of a channel.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ChannelEntry {
    /// Name of the bundle's CSV.
    #[serde(default)]
    pub name: String,

    /// Version of the bundle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,

    /// Set when the catalog marks the bundle as deprecated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecation: Option<Deprecation>,
}

/// The parts of a CSV that users need to pick a package, copied from a
/// channel's head.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CsvDescription {
    /// Human-readable name of the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,

    /// Logos of the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon: Option<Vec<Icon>>,

    /// Semantic version of the head CSV.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<OperatorVersion>,

    /// The organisation that publishes the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<AppLink>,

    /// The head CSV's metadata annotations (for example `alm-examples`,
    /// `capabilities`, `categories`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,

    /// Words users may search for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keywords: Option<Vec<String>>,

    /// Links to documentation and other resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub links: Option<Vec<AppLink>>,

    /// People or teams who maintain the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintainers: Option<Vec<Maintainer>>,

    /// Self-declared maturity, such as `alpha` or `stable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maturity: Option<String>,

    /// Long description of the operator, in Markdown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,

    /// Supported OperatorGroup target-namespace configurations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_modes: Option<Vec<InstallMode>>,

    /// CustomResourceDefinitions the operator owns and requires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub customresourcedefinitions: Option<CustomResourceDefinitions>,

    /// Aggregated APIs the operator serves and requires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apiservicedefinitions: Option<ApiServiceDefinitions>,

    /// Built-in Kubernetes APIs the operator needs. Note the spelling:
    /// `nativeApis` here, `nativeAPIs` in the CSV.
    #[serde(
        default,
        rename = "nativeApis",
        skip_serializing_if = "Option::is_none"
    )]
    pub native_apis: Option<Vec<GroupVersionKind>>,

    /// Oldest Kubernetes version the operator runs on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_kube_version: Option<String>,

    /// Image references the operator uses (just the references, unlike the
    /// CSV's name/image pairs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub related_images: Option<Vec<String>>,
}

#[cfg(test)]
mod tests {
    use kube::Resource;
    use serde_json::json;

    use super::*;

    fn gizmo_manifest() -> serde_json::Value {
        json!({
            "apiVersion": "packages.operators.coreos.com/v1",
            "kind": "PackageManifest",
            "metadata": {
                "name": "gizmo-operator",
                "namespace": "gizmo-catalogs",
                "labels": {"catalog": "gizmo-index", "catalog-namespace": "gizmo-catalogs"},
            },
            "spec": {},
            "status": {
                "catalogSource": "gizmo-index",
                "catalogSourceDisplayName": "Gizmo Index",
                "catalogSourcePublisher": "Gizmo Works",
                "catalogSourceNamespace": "gizmo-catalogs",
                "provider": {"name": "Gizmo Works"},
                "packageName": "gizmo-operator",
                "deprecation": {"message": "use sprocket-operator"},
                "channels": [{
                    "name": "fast",
                    "currentCSV": "gizmo-operator.v2.0.0",
                    "currentCSVDesc": {
                        "displayName": "Gizmo",
                        "icon": [{"base64data": "PHN2Zz48L3N2Zz4=", "mediatype": "image/svg+xml"}],
                        "version": "2.0.0",
                        "provider": {"name": "Gizmo Works"},
                        "installModes": [{"type": "AllNamespaces", "supported": true}],
                        "customresourcedefinitions": {"owned": [
                            {"name": "gizmos.gizmo.example.test", "version": "v1", "kind": "Gizmo"}
                        ]},
                        "apiservicedefinitions": {},
                        "nativeApis": [{"group": "", "version": "v1", "kind": "ConfigMap"}],
                        "relatedImages": ["registry.example/gizmo@sha256:89ab"],
                    },
                    "entries": [
                        {"name": "gizmo-operator.v2.0.0", "version": "2.0.0"},
                        {"name": "gizmo-operator.v1.9.0", "version": "1.9.0",
                         "deprecation": {"message": "has a known bug"}},
                    ],
                }],
                "defaultChannel": "fast",
            },
        })
    }

    #[test]
    fn round_trips_with_api_version_and_kind() {
        let original = gizmo_manifest();
        let manifest: PackageManifest =
            serde_json::from_value(original.clone()).expect("manifest decodes");
        assert_eq!(
            manifest.status.channels[0].current_csv,
            "gizmo-operator.v2.0.0"
        );
        assert_eq!(
            manifest
                .status
                .effective_default_channel()
                .map(|c| c.name.as_str()),
            Some("fast")
        );
        assert_eq!(
            serde_json::to_value(&manifest).expect("manifest serializes"),
            original
        );
    }

    #[test]
    fn kube_resource_names_match_upstream() {
        assert_eq!(
            PackageManifest::api_version(&()),
            "packages.operators.coreos.com/v1"
        );
        assert_eq!(PackageManifest::kind(&()), "PackageManifest");
        assert_eq!(PackageManifest::plural(&()), "packagemanifests");
        let url = PackageManifest::url_path(&(), Some("gizmo-catalogs"));
        assert_eq!(
            url,
            "/apis/packages.operators.coreos.com/v1/namespaces/gizmo-catalogs/packagemanifests"
        );
    }

    #[test]
    fn single_channel_is_the_default_when_none_is_named() {
        let status = PackageManifestStatus {
            channels: vec![PackageChannel {
                name: "only".into(),
                ..PackageChannel::default()
            }],
            ..PackageManifestStatus::default()
        };
        assert_eq!(
            status.effective_default_channel().map(|c| c.name.as_str()),
            Some("only")
        );
    }

    #[test]
    fn list_carries_list_kind() {
        let list = PackageManifestList {
            items: vec![serde_json::from_value(gizmo_manifest()).expect("manifest decodes")],
            ..PackageManifestList::default()
        };
        let written = serde_json::to_value(&list).expect("list serializes");
        assert_eq!(written["kind"], "PackageManifestList");
        assert_eq!(written["apiVersion"], "packages.operators.coreos.com/v1");
        let read: PackageManifestList = serde_json::from_value(written).expect("list decodes");
        assert_eq!(read, list);
    }
}
