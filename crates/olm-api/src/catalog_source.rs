//! `CatalogSource` (`operators.coreos.com/v1alpha1`): a repository of operator
//! bundles that OLM can resolve from and packageserver can list.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::core::v1::{Affinity, Toleration},
    apimachinery::pkg::{
        api::resource::Quantity,
        apis::meta::v1::{Condition, Time},
    },
};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::open_value::open_string;

/// The desired state of a catalog: where its content comes from and how the
/// registry pod serving it is run.
// Every `printcolumn(...)` repeats `type_ = "string"`, which clippy mistakes for
// duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "CatalogSource",
    plural = "catalogsources",
    singular = "catalogsource",
    shortname = "catsrc",
    category = "olm",
    namespaced,
    status = "CatalogSourceStatus",
    derive = "PartialEq",
    doc = "A repository of operator bundles (a catalog) that OLM resolves Subscriptions against.",
    printcolumn(
        name = "Display",
        type_ = "string",
        json_path = ".spec.displayName",
        description = "The name shown to users"
    ),
    printcolumn(
        name = "Type",
        type_ = "string",
        json_path = ".spec.sourceType",
        description = "How the catalog is served"
    ),
    printcolumn(
        name = "Publisher",
        type_ = "string",
        json_path = ".spec.publisher",
        description = "Who publishes the catalog"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct CatalogSourceSpec {
    /// How the catalog is served: `grpc` (an image OLM runs, or an address it
    /// connects to), `configmap` (a ConfigMap OLM serves), or the legacy `internal`.
    pub source_type: SourceType,

    /// Preference among catalogs when resolving dependencies: higher wins.
    /// Defaults to 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::field_schema::go_int")]
    pub priority: Option<i64>,

    /// Name of the ConfigMap holding the catalog, for `configmap` catalogs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<String>,

    /// `host:port` of an existing registry server, for `grpc` catalogs that OLM
    /// does not run itself. Takes precedence over `image`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,

    /// Catalog image that OLM runs as a registry pod, for `grpc` catalogs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,

    /// Names of Secrets in this namespace used to pull the catalog and its
    /// bundle images.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,

    /// Name of the catalog shown to users.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,

    /// Description of the catalog shown to users.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,

    /// Who publishes the catalog.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publisher: Option<String>,

    /// Icon shown for the catalog.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon: Option<Icon>,

    /// How OLM keeps an image-based catalog up to date.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_strategy: Option<UpdateStrategy>,

    /// Scheduling, security and resource overrides for the registry pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc_pod_config: Option<GrpcPodConfig>,
}

open_string! {
    /// How a catalog is served (`spec.sourceType`). A free string upstream.
    pub struct SourceType (schema = open) {
        /// Served by a registry pod OLM runs (`image`) or at an existing `address`.
        GRPC = "grpc",
        /// Served from a ConfigMap by a pod OLM runs.
        CONFIG_MAP = "configmap",
        /// Legacy name for `configmap`, served the same way.
        INTERNAL = "internal",
    }
}

/// An image shown for a catalog.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Icon {
    /// The image, base64-encoded.
    #[serde(rename = "base64data")]
    pub base64_data: String,

    /// Media type of the image, for example `image/svg+xml`.
    #[serde(rename = "mediatype")]
    pub media_type: String,
}

/// How OLM keeps an image-based catalog up to date.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateStrategy {
    /// Poll the catalog image's registry for a new digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry_poll: Option<RegistryPoll>,
}

/// Polling of a catalog image for updates.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegistryPoll {
    /// How often to poll, as a Go duration such as `45m` or `1h30m`. An
    /// unparsable value falls back to 15m and is reported in the status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
}

/// Overrides for the registry pod OLM runs for an image-based catalog.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrpcPodConfig {
    /// Node labels the registry pod must match; replaces the default
    /// `kubernetes.io/os: linux`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,

    /// Taints the registry pod tolerates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,

    /// Scheduling affinity of the registry pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,

    /// PriorityClass of the registry pod. The CatalogSource annotation
    /// `operatorframework.io/priorityclass` takes precedence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,

    /// Pod security profile of the registry pod: `restricted` or `legacy`. When
    /// unset, `restricted` is used if the namespace enforces the restricted pod
    /// security standard, `legacy` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context_config: Option<SecurityConfig>,

    /// Memory the registry server should aim to stay under; becomes the pod's
    /// memory request and the server's `GOMEMLIMIT`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_target: Option<Quantity>,

    /// Serve the catalog content extracted from the image by `opm serve`
    /// instead of running the image's own server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extract_content: Option<ExtractContentConfig>,
}

open_string! {
    /// Pod security profile for registry pods (`spec.grpcPodConfig.securityContextConfig`).
    /// Upstream's schema restricts it to the known values; unknown values are
    /// still read.
    pub struct SecurityConfig (schema = closed) {
        /// No extra restrictions (root allowed, no seccomp profile).
        LEGACY = "legacy",
        /// The restricted pod security standard.
        RESTRICTED = "restricted",
    }
}

/// Where the catalog content lives inside the catalog image.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExtractContentConfig {
    /// Directory of the file-based catalog inside the image.
    pub catalog_dir: String,

    /// Directory of a pre-built serving cache inside the image, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_dir: Option<String>,
}

/// What OLM observed about a catalog.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CatalogSourceStatus {
    /// Human-readable detail about the last sync, usually set with `reason`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,

    /// Machine-readable reason for the last sync outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<CatalogSourceReason>,

    /// The ConfigMap a `configmap` catalog was last served from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map_reference: Option<ConfigMapResourceReference>,

    /// The Service through which the registry server is reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry_service: Option<RegistryServiceStatus>,

    /// State of OLM's gRPC connection to the registry server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_state: Option<GrpcConnectionState>,

    /// When OLM last started a poll of the catalog image for updates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest_image_registry_poll: Option<Time>,

    /// Conditions of the catalog, such as the resolution of an image template.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::field_schema::metav1_conditions_map")]
    pub conditions: Vec<Condition>,
}

open_string! {
    /// Reason for a catalog's last sync outcome (`status.reason`).
    pub struct CatalogSourceReason (schema = open) {
        /// The spec is invalid (for example, no image and no address).
        SPEC_INVALID_ERROR = "SpecInvalidError",
        /// The ConfigMap of a `configmap` catalog could not be read or served.
        CONFIG_MAP_ERROR = "ConfigMapError",
        /// The registry server could not be created or checked.
        REGISTRY_SERVER_ERROR = "RegistryServerError",
        /// `spec.updateStrategy.registryPoll.interval` could not be parsed.
        INVALID_INTERVAL_ERROR = "InvalidIntervalError",
        /// Ours: the catalog image or address is outside the allowed
        /// registries or addresses; nothing is run or dialled.
        REGISTRY_NOT_ALLOWED = "RegistryNotAllowed",
    }
}

open_string! {
    /// Catalog condition types (`status.conditions[].type`).
    pub struct CatalogSourceConditionType (schema = open) {
        /// Whether every placeholder of `olm.catalogImageTemplate` was resolved.
        TEMPLATES_HAVE_RESOLVED = "TemplatesHaveResolved",
        /// Whether the resolved template is a valid image reference.
        RESOLVED_IMAGE = "ResolvedImage",
        /// Ours: whether the promotion guard holds new content back (the
        /// catalog keeps serving its previous content while `True`).
        PROMOTION_BLOCKED = "PromotionBlocked",
    }
}

open_string! {
    /// Catalog condition reasons (`status.conditions[].reason`).
    pub struct CatalogSourceConditionReason (schema = open) {
        /// Every image template placeholder was resolved.
        ALL_TEMPLATES_RESOLVED = "AllTemplatesResolved",
        /// The image template could not be resolved.
        UNABLE_TO_RESOLVE = "UnableToResolve",
        /// Ours: new content names bundle images outside the
        /// allowed-registries policy.
        BUNDLE_REGISTRY_NOT_ALLOWED = "BundleRegistryNotAllowed",
        /// Ours: the registry of new content never became healthy.
        NEW_CONTENT_UNHEALTHY = "NewContentUnhealthy",
        /// Ours: the guard let the catalog's latest content through.
        CONTENT_PROMOTED = "ContentPromoted",
    }
}

/// The ConfigMap a `configmap` catalog was last served from.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = |s: &mut schemars::Schema| crate::field_schema::require(s, &["name", "namespace"]))]
pub struct ConfigMapResourceReference {
    /// Name of the ConfigMap.
    #[serde(default)]
    pub name: String,

    /// Namespace of the ConfigMap.
    #[serde(default)]
    pub namespace: String,

    /// UID of the ConfigMap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,

    /// resourceVersion of the ConfigMap that is being served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,

    /// When OLM last updated this reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
}

/// The Service through which a registry server is reached.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegistryServiceStatus {
    /// Protocol spoken by the registry server (`grpc`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,

    /// Name of the Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,

    /// Namespace of the Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_namespace: Option<String>,

    /// Port of the Service, as a string (`"50051"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<String>,

    /// When OLM (re)created the registry server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Time>,
}

/// State of OLM's gRPC connection to a registry server.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = |s: &mut schemars::Schema| crate::field_schema::require(s, &["lastObservedState"]))]
pub struct GrpcConnectionState {
    /// Address OLM connects to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,

    /// Last gRPC connectivity state seen: `IDLE`, `CONNECTING`, `READY`,
    /// `TRANSIENT_FAILURE` or `SHUTDOWN`.
    #[serde(default)]
    pub last_observed_state: ConnectivityState,

    /// When the connection state last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_connect: Option<Time>,
}

open_string! {
    /// gRPC connectivity state (`status.connectionState.lastObservedState`).
    pub struct ConnectivityState (schema = open) {
        /// No connection attempt in progress.
        IDLE = "IDLE",
        /// Connecting.
        CONNECTING = "CONNECTING",
        /// Connected and ready for calls.
        READY = "READY",
        /// The last attempt failed; retrying.
        TRANSIENT_FAILURE = "TRANSIENT_FAILURE",
        /// The connection was closed.
        SHUTDOWN = "SHUTDOWN",
    }
}

impl CatalogSource {
    /// Whether OLM runs a registry pod for this catalog (a `grpc` catalog with
    /// an image and no address).
    pub fn runs_registry_pod(&self) -> bool {
        self.spec.source_type == SourceType::GRPC
            && self.spec.address.as_deref().is_none_or(str::is_empty)
            && self.spec.image.as_deref().is_some_and(|i| !i.is_empty())
    }

    /// The address OLM dials for this catalog: `spec.address` when set,
    /// otherwise its registry Service from the status,
    /// `<name>.<namespace>.svc:<port>` (the catalog's namespace when the
    /// status names none, port 50051 when it names none). The one place this
    /// address is built: catalog-operator and packageserver both dial it
    /// (through `olm_runtime::service_address` when there is no cluster DNS).
    pub fn registry_address(&self) -> Option<String> {
        if let Some(address) = self.spec.address.as_deref().filter(|a| !a.is_empty()) {
            return Some(address.to_owned());
        }
        let service = self.status.as_ref()?.registry_service.as_ref()?;
        let name = service.service_name.as_deref().filter(|s| !s.is_empty())?;
        let namespace = service
            .service_namespace
            .clone()
            .filter(|n| !n.is_empty())
            .or_else(|| self.metadata.namespace.clone())?;
        let port = service
            .port
            .as_deref()
            .filter(|p| !p.is_empty())
            .unwrap_or("50051");
        Some(format!("{name}.{namespace}.svc:{port}"))
    }
}
