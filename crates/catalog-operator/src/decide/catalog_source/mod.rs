//! What a CatalogSource needs: which way it is served, the registry objects
//! OLM runs for an image catalog, when its image is polled for updates, and
//! its connection address. Upstream: `pkg/controller/registry/reconciler`
//! (`reconciler.go`, `grpc.go`), `pkg/controller/operators/catalog/operator.go`
//! (`syncCatalogSources`), `pkg/controller/registry/grpc/source.go`.

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::{
    api::{
        core::v1::{
            Capabilities, Container, ContainerPort, EnvVar, GRPCAction, LocalObjectReference, Pod,
            PodSecurityContext, PodSpec, Probe, ResourceRequirements, SeccompProfile,
            SecurityContext, Service, ServiceAccount, ServicePort, ServiceSpec,
        },
        networking::v1::{
            NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPort, NetworkPolicySpec,
        },
    },
    apimachinery::pkg::{
        api::resource::Quantity, apis::meta::v1::LabelSelector, apis::meta::v1::ObjectMeta,
        apis::meta::v1::OwnerReference, util::intstr::IntOrString,
    },
};
use olm_api::{
    catalog_source::{CatalogSource, SecurityConfig, SourceType},
    labels,
};
use sha2::{Digest, Sha256};

use olm_api::go_duration;

pub mod pods;
pub mod sync;

/// The gRPC port every registry server listens on.
pub const REGISTRY_GRPC_PORT: i32 = 50051;
/// The name of that port on pods and services.
pub const REGISTRY_PORT_NAME: &str = "grpc";
/// The registry server container's name.
pub const REGISTRY_CONTAINER: &str = "registry-server";
/// How often an image catalog is polled when its interval cannot be read.
pub const DEFAULT_POLL_INTERVAL: SignedDuration = SignedDuration::from_mins(15);
/// The longest a catalog waits between resyncs while a poll is scheduled.
pub const MAX_POLL_REQUEUE: SignedDuration = SignedDuration::from_mins(15);
/// How often an update pod is checked while it starts.
pub const UPDATE_POD_RECHECK: SignedDuration = SignedDuration::from_secs(30);

/// How a CatalogSource is served, decided from its spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Serving {
    /// `grpc` with an image: OLM runs a registry pod and Service.
    Image {
        /// The catalog image.
        image: String,
    },
    /// `grpc` with only an address: OLM connects to it and runs nothing.
    Address {
        /// The `host:port` to dial.
        address: String,
    },
    /// `configmap` (or legacy `internal`): a registry pod serves a ConfigMap.
    ConfigMap {
        /// The ConfigMap's name, in the catalog's namespace.
        name: String,
    },
}

/// A spec OLM cannot serve; upstream sets reason `SpecInvalidError` with this
/// message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SpecInvalid(pub String);

/// Decides how a catalog is served. Upstream (`ReconcilerForSource`) prefers
/// the image when a `grpc` catalog sets both image and address; the
/// connection then still dials the address (see [`CatalogSource::registry_address`]).
pub fn serving(catalog: &CatalogSource) -> Result<Serving, SpecInvalid> {
    let spec = &catalog.spec;
    let non_empty = |s: &Option<String>| s.as_deref().filter(|s| !s.is_empty()).map(str::to_owned);
    let source_type = &spec.source_type;
    if *source_type == SourceType::CONFIG_MAP || *source_type == SourceType::INTERNAL {
        return non_empty(&spec.config_map)
            .map(|name| Serving::ConfigMap { name })
            .ok_or_else(|| {
                SpecInvalid(format!(
                    "configmap name unset: must be set for sourcetype: {source_type}"
                ))
            });
    }
    if *source_type == SourceType::GRPC {
        if let Some(image) = non_empty(&spec.image) {
            return Ok(Serving::Image { image });
        }
        if let Some(address) = non_empty(&spec.address) {
            return Ok(Serving::Address { address });
        }
        return Err(SpecInvalid(format!(
            "image and address unset: at least one must be set for sourcetype: {source_type}"
        )));
    }
    Err(SpecInvalid(format!("unknown sourcetype: {source_type}")))
}

/// Why the allowed-registries policy refuses a catalog: its image (when it
/// is served from one) outside `image_rules`, or its `spec.address` (when
/// set, image or not, since that is what is dialled) outside
/// `address_rules`. `None` when allowed; empty rules allow everything.
pub fn policy_refusal(
    catalog: &CatalogSource,
    serving: &Serving,
    image_rules: &[olm_oci::policy::RegistryRule],
    address_rules: &[olm_oci::policy::RegistryRule],
) -> Option<String> {
    if let Serving::Image { image } = serving
        && let Some(refused) = olm_oci::policy::image_refusal(image_rules, "catalog image", image)
    {
        return Some(refused);
    }
    let address = catalog.spec.address.as_deref().filter(|a| !a.is_empty())?;
    olm_oci::policy::address_refusal(address_rules, address)
}

/// Whether the catalog's registry pod runs under the restricted pod security
/// profile: as configured, or else when its namespace enforces `restricted`.
pub fn restricted(catalog: &CatalogSource, namespace_labels: &BTreeMap<String, String>) -> bool {
    let configured = catalog
        .spec
        .grpc_pod_config
        .as_ref()
        .and_then(|c| c.security_context_config.as_ref());
    match configured {
        Some(config) if *config == SecurityConfig::RESTRICTED => true,
        Some(config) if *config == SecurityConfig::LEGACY => false,
        _ => namespace_labels
            .get(labels::POD_SECURITY_ENFORCE)
            .is_some_and(|level| level == "restricted"),
    }
}

/// Options of the catalog operator that shape registry pods.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegistryPodOptions {
    /// Run restricted registry containers as this user (upstream's
    /// `--set-workload-user-id` gives 1001).
    pub workload_user_id: Option<i64>,
    /// The image serving `configmap` catalogs.
    pub config_map_server_image: String,
    /// The opm image used when content is extracted from the catalog image.
    pub opm_image: String,
    /// The image providing `copy-content` for `extractContent`.
    pub util_image: String,
}

/// Everything OLM runs for a catalog served by a registry pod.
#[derive(Debug, Clone, PartialEq)]
pub struct RegistryObjects {
    /// The pod's ServiceAccount (named after the catalog).
    pub service_account: ServiceAccount,
    /// The Service in front of the pod.
    pub service: Service,
    /// The registry pod (created with `generateName`).
    pub pod: Pod,
    /// `<catsrc>-grpc-server` and `<catsrc>-unpack-bundles`.
    pub network_policies: Vec<NetworkPolicy>,
}

/// The Service name upstream gives a catalog's registry: the catalog's name
/// with dots turned into dashes (a Service name is a DNS label).
pub fn service_name(catalog_name: &str) -> String {
    catalog_name.replace('.', "-")
}

fn owner_reference(catalog: &CatalogSource, controller: bool) -> OwnerReference {
    OwnerReference {
        api_version: "operators.coreos.com/v1alpha1".to_owned(),
        kind: "CatalogSource".to_owned(),
        name: catalog.metadata.name.clone().unwrap_or_default(),
        uid: catalog.metadata.uid.clone().unwrap_or_default(),
        controller: Some(controller),
        block_owner_deletion: Some(false),
    }
}

fn meta(catalog: &CatalogSource, name: String, labels: BTreeMap<String, String>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: catalog.metadata.namespace.clone(),
        labels: Some(labels),
        owner_references: Some(vec![owner_reference(catalog, true)]),
        ..ObjectMeta::default()
    }
}

/// The labels that select a catalog's serving pods.
pub fn pod_selector(catalog_name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (labels::CATALOG_SOURCE.to_owned(), catalog_name.to_owned()),
        (labels::MANAGED.to_owned(), labels::MANAGED_VALUE.to_owned()),
    ])
}

/// A stable hash of a value's JSON, short enough for a label value.
pub fn spec_hash<T: serde::Serialize>(value: &T) -> String {
    // Serializing k8s-openapi types to a Value cannot fail; an empty hash
    // would only force one extra rollout.
    let json = serde_json::to_vec(value).unwrap_or_default();
    let digest = Sha256::digest(&json);
    digest[..12].iter().map(|b| format!("{b:02x}")).collect()
}

fn grpc_probe(initial_delay: Option<i32>) -> Probe {
    Probe {
        grpc: Some(GRPCAction {
            port: REGISTRY_GRPC_PORT,
            service: None,
        }),
        initial_delay_seconds: initial_delay,
        timeout_seconds: Some(5),
        ..Probe::default()
    }
}

fn pull_policy(image: &str) -> String {
    if image.contains("@sha256:") || image.contains("@sha512:") {
        "IfNotPresent".to_owned()
    } else {
        "Always".to_owned()
    }
}

/// Builds the registry objects for a catalog served by a pod, as upstream's
/// `GrpcRegistryReconciler` and `ConfigMapRegistryReconciler` do.
pub fn registry_objects(
    catalog: &CatalogSource,
    serving: &Serving,
    namespace_labels: &BTreeMap<String, String>,
    options: &RegistryPodOptions,
) -> Option<RegistryObjects> {
    let name = catalog.metadata.name.clone().unwrap_or_default();
    let restricted = restricted(catalog, namespace_labels);
    let pod_config = catalog.spec.grpc_pod_config.clone().unwrap_or_default();

    let (service_account_name, mut container, init_containers, volumes, is_config_map) =
        match serving {
            Serving::Address { .. } => return None,
            Serving::Image { image } => {
                let mut container = Container {
                    name: REGISTRY_CONTAINER.to_owned(),
                    image: Some(image.clone()),
                    image_pull_policy: Some(pull_policy(image)),
                    ..Container::default()
                };
                let mut init = Vec::new();
                let mut volumes = Vec::new();
                if let Some(extract) = &pod_config.extract_content {
                    let (c, i, v) = extract_content(image, extract, options);
                    container = c;
                    init = i;
                    volumes = v;
                }
                (name.clone(), container, init, volumes, false)
            }
            Serving::ConfigMap { name: config_map } => {
                let namespace = catalog.metadata.namespace.clone().unwrap_or_default();
                let image = options.config_map_server_image.clone();
                let container = Container {
                    name: REGISTRY_CONTAINER.to_owned(),
                    image: Some(image.clone()),
                    image_pull_policy: Some(pull_policy(&image)),
                    command: Some(vec![
                        "configmap-server".to_owned(),
                        "-c".to_owned(),
                        config_map.clone(),
                        "-n".to_owned(),
                        namespace,
                    ]),
                    ..Container::default()
                };
                (
                    format!("{name}-configmap-server"),
                    container,
                    Vec::new(),
                    Vec::new(),
                    true,
                )
            }
        };

    container.ports = Some(vec![ContainerPort {
        name: Some(REGISTRY_PORT_NAME.to_owned()),
        container_port: REGISTRY_GRPC_PORT,
        ..ContainerPort::default()
    }]);
    container.readiness_probe = Some(grpc_probe(Some(5)));
    container.liveness_probe = Some(grpc_probe(Some(if is_config_map { 5 } else { 10 })));
    container.startup_probe = Some(Probe {
        failure_threshold: Some(15),
        period_seconds: Some(10),
        ..grpc_probe(None)
    });
    let mut requests = BTreeMap::from([
        ("cpu".to_owned(), Quantity("10m".to_owned())),
        ("memory".to_owned(), Quantity("50Mi".to_owned())),
    ]);
    if let Some(target) = &pod_config.memory_target {
        requests.insert("memory".to_owned(), target.clone());
        let bytes = quantity_bytes(&target.0).map_or_else(|| target.0.clone(), |b| b.to_string());
        container.env.get_or_insert_with(Vec::new).push(EnvVar {
            name: "GOMEMLIMIT".to_owned(),
            value: Some(format!("{bytes}B")),
            value_from: None,
        });
    }
    container.resources = Some(ResourceRequirements {
        requests: Some(requests),
        ..ResourceRequirements::default()
    });
    container.termination_message_policy = Some("FallbackToLogsOnError".to_owned());

    let mut containers = vec![container];
    let mut init_containers = init_containers;
    let mut pod_security = None;
    if restricted {
        pod_security = Some(PodSecurityContext {
            seccomp_profile: Some(SeccompProfile {
                type_: "RuntimeDefault".to_owned(),
                localhost_profile: None,
            }),
            run_as_user: options.workload_user_id,
            run_as_non_root: options.workload_user_id.map(|_| true),
            ..PodSecurityContext::default()
        });
        for c in containers.iter_mut().chain(init_containers.iter_mut()) {
            let security = c
                .security_context
                .get_or_insert_with(SecurityContext::default);
            security.allow_privilege_escalation = Some(false);
            security.capabilities = Some(Capabilities {
                drop: Some(vec!["ALL".to_owned()]),
                add: None,
            });
        }
    }

    let node_selector = if pod_config.node_selector.is_empty() {
        BTreeMap::from([("kubernetes.io/os".to_owned(), "linux".to_owned())])
    } else {
        pod_config.node_selector.clone()
    };
    let annotations = catalog.metadata.annotations.clone().unwrap_or_default();
    let priority_class_name = annotations
        .get(labels::CATALOG_PRIORITY_CLASS)
        .cloned()
        .or_else(|| pod_config.priority_class_name.clone());
    let pod_spec = PodSpec {
        containers,
        init_containers: (!init_containers.is_empty()).then_some(init_containers),
        volumes: (!volumes.is_empty()).then_some(volumes),
        node_selector: Some(node_selector),
        tolerations: (!pod_config.tolerations.is_empty()).then(|| pod_config.tolerations.clone()),
        affinity: pod_config.affinity.clone(),
        priority_class_name,
        service_account_name: Some(service_account_name.clone()),
        security_context: pod_security,
        ..PodSpec::default()
    };

    let mut pod_labels = pod_selector(&name);
    pod_labels.insert(labels::POD_SPEC_HASH.to_owned(), spec_hash(&pod_spec));
    if is_config_map {
        let version = catalog
            .status
            .as_ref()
            .and_then(|s| s.config_map_reference.as_ref())
            .and_then(|r| r.resource_version.clone())
            .unwrap_or_default();
        pod_labels.insert(labels::CONFIG_MAP_RESOURCE_VERSION.to_owned(), version);
    }
    let mut pod_annotations = annotations;
    pod_annotations.insert(labels::SAFE_TO_EVICT.to_owned(), "true".to_owned());
    let pod = Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{name}-")),
            namespace: catalog.metadata.namespace.clone(),
            labels: Some(pod_labels),
            annotations: Some(pod_annotations),
            owner_references: Some(vec![owner_reference(catalog, true)]),
            ..ObjectMeta::default()
        },
        spec: Some(pod_spec),
        status: None,
    };

    let service_spec = ServiceSpec {
        ports: Some(vec![ServicePort {
            name: Some(REGISTRY_PORT_NAME.to_owned()),
            port: REGISTRY_GRPC_PORT,
            target_port: Some(IntOrString::Int(REGISTRY_GRPC_PORT)),
            ..ServicePort::default()
        }]),
        selector: Some(pod_selector(&name)),
        ..ServiceSpec::default()
    };
    let service_name = if is_config_map {
        name.clone()
    } else {
        service_name(&name)
    };
    let mut service_labels =
        BTreeMap::from([(labels::MANAGED.to_owned(), labels::MANAGED_VALUE.to_owned())]);
    service_labels.insert(
        labels::SERVICE_SPEC_HASH.to_owned(),
        spec_hash(&service_spec),
    );
    let service = Service {
        metadata: meta(catalog, service_name, service_labels),
        spec: Some(service_spec),
        status: None,
    };

    let service_account = ServiceAccount {
        metadata: meta(
            catalog,
            service_account_name,
            BTreeMap::from([(labels::MANAGED.to_owned(), labels::MANAGED_VALUE.to_owned())]),
        ),
        image_pull_secrets: (!catalog.spec.secrets.is_empty()).then(|| {
            catalog
                .spec
                .secrets
                .iter()
                .map(|s| LocalObjectReference { name: s.clone() })
                .collect()
        }),
        ..ServiceAccount::default()
    };

    Some(RegistryObjects {
        service_account,
        service,
        pod,
        network_policies: network_policies(catalog, is_config_map),
    })
}

fn extract_content(
    image: &str,
    extract: &olm_api::catalog_source::ExtractContentConfig,
    options: &RegistryPodOptions,
) -> (
    Container,
    Vec<Container>,
    Vec<k8s_openapi::api::core::v1::Volume>,
) {
    use k8s_openapi::api::core::v1::{EmptyDirVolumeSource, Volume, VolumeMount};
    let empty = |name: &str| Volume {
        name: name.to_owned(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    };
    let mount = |name: &str, path: &str| VolumeMount {
        name: name.to_owned(),
        mount_path: path.to_owned(),
        ..VolumeMount::default()
    };
    let mut copy = vec![
        "/utilities/copy-content".to_owned(),
        format!("--catalog.from={}", extract.catalog_dir),
        "--catalog.to=/extracted-catalog/catalog".to_owned(),
    ];
    let mut serve = vec![
        "/bin/opm".to_owned(),
        "serve".to_owned(),
        "/extracted-catalog/catalog".to_owned(),
    ];
    let mut volumes = vec![empty("utilities"), empty("catalog-content")];
    let mut mounts = vec![mount("catalog-content", "/extracted-catalog")];
    match extract.cache_dir.as_deref().filter(|d| !d.is_empty()) {
        Some(cache) => {
            copy.push(format!("--cache.from={cache}"));
            copy.push("--cache.to=/extracted-catalog/cache".to_owned());
            serve.push("--cache-dir=/extracted-catalog/cache".to_owned());
        }
        None => {
            volumes.push(empty("tmp"));
            mounts.push(mount("tmp", "/tmp"));
        }
    }
    let init = vec![
        Container {
            name: "extract-utilities".to_owned(),
            image: Some(options.util_image.clone()),
            image_pull_policy: Some(pull_policy(&options.util_image)),
            command: Some(vec![
                "cp".to_owned(),
                "/bin/copy-content".to_owned(),
                "/utilities/copy-content".to_owned(),
            ]),
            volume_mounts: Some(vec![mount("utilities", "/utilities")]),
            termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
            ..Container::default()
        },
        Container {
            name: "extract-content".to_owned(),
            image: Some(image.to_owned()),
            image_pull_policy: Some(pull_policy(image)),
            command: Some(copy),
            volume_mounts: Some(vec![
                mount("utilities", "/utilities"),
                mount("catalog-content", "/extracted-catalog"),
            ]),
            termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
            ..Container::default()
        },
    ];
    let container = Container {
        name: REGISTRY_CONTAINER.to_owned(),
        image: Some(options.opm_image.clone()),
        image_pull_policy: Some(pull_policy(&options.opm_image)),
        command: Some(serve),
        volume_mounts: Some(mounts),
        security_context: Some(SecurityContext {
            read_only_root_filesystem: Some(true),
            ..SecurityContext::default()
        }),
        ..Container::default()
    };
    (container, init, volumes)
}

fn network_policies(catalog: &CatalogSource, is_config_map: bool) -> Vec<NetworkPolicy> {
    let name = catalog.metadata.name.clone().unwrap_or_default();
    let managed = BTreeMap::from([(labels::MANAGED.to_owned(), labels::MANAGED_VALUE.to_owned())]);
    let grpc = NetworkPolicy {
        metadata: meta(catalog, format!("{name}-grpc-server"), managed.clone()),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(pod_selector(&name)),
                match_expressions: None,
            }),
            ingress: Some(vec![NetworkPolicyIngressRule {
                ports: Some(vec![NetworkPolicyPort {
                    port: Some(IntOrString::Int(REGISTRY_GRPC_PORT)),
                    protocol: Some("TCP".to_owned()),
                    end_port: None,
                }]),
                from: None,
            }]),
            // Image-served registries need no egress at all; the configmap
            // server reads its ConfigMap from the API server.
            egress: is_config_map.then(|| vec![Default::default()]),
            policy_types: Some(if is_config_map {
                vec!["Ingress".to_owned()]
            } else {
                vec!["Ingress".to_owned(), "Egress".to_owned()]
            }),
        }),
    };
    let unpack = NetworkPolicy {
        metadata: meta(catalog, format!("{name}-unpack-bundles"), managed),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_expressions: Some(vec![
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
                        key: labels::BUNDLE_UNPACK_REF.to_owned(),
                        operator: "Exists".to_owned(),
                        values: None,
                    },
                ]),
                match_labels: Some(BTreeMap::from([(
                    labels::MANAGED.to_owned(),
                    labels::MANAGED_VALUE.to_owned(),
                )])),
            }),
            egress: Some(vec![Default::default()]),
            ingress: None,
            policy_types: Some(vec!["Ingress".to_owned(), "Egress".to_owned()]),
        }),
    };
    vec![grpc, unpack]
}

/// Reads a memory quantity as bytes (`512Mi`, `1G`, `1e9`); `None` for
/// anything else, in which case the text is used as it is.
pub fn quantity_bytes(text: &str) -> Option<u128> {
    const SUFFIXES: &[(&str, u128)] = &[
        ("Ki", 1 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("Ti", 1 << 40),
        ("Pi", 1 << 50),
        ("Ei", 1 << 60),
        ("k", 1_000),
        ("M", 1_000_000),
        ("G", 1_000_000_000),
        ("T", 1_000_000_000_000),
        ("P", 1_000_000_000_000_000),
        ("E", 1_000_000_000_000_000_000),
    ];
    let text = text.trim();
    for (suffix, scale) in SUFFIXES {
        if let Some(number) = text.strip_suffix(suffix) {
            return number.parse::<u128>().ok()?.checked_mul(*scale);
        }
    }
    if let Some((mantissa, exponent)) = text.split_once(['e', 'E']) {
        let exponent: u32 = exponent.parse().ok()?;
        return mantissa
            .parse::<u128>()
            .ok()?
            .checked_mul(10u128.checked_pow(exponent)?);
    }
    text.parse().ok()
}

/// What the poll schedule of an image catalog says now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PollSchedule {
    /// The interval in force (the default when the spec's is unreadable).
    pub interval: SignedDuration,
    /// Set when the spec's interval could not be read: upstream's
    /// `InvalidIntervalError` message.
    pub invalid_interval: Option<String>,
    /// Whether a poll is due now.
    pub due: bool,
    /// When to look again, before jitter.
    pub requeue_after: SignedDuration,
}

/// Decides whether a `grpc` image catalog with `updateStrategy.registryPoll`
/// is due for a poll: the last poll (or the catalog's creation) plus the
/// interval has passed. `None` when the catalog is not polled.
pub fn poll_schedule(catalog: &CatalogSource, now: Timestamp) -> Option<PollSchedule> {
    if !matches!(serving(catalog), Ok(Serving::Image { .. })) {
        return None;
    }
    let poll = catalog
        .spec
        .update_strategy
        .as_ref()?
        .registry_poll
        .as_ref()?;
    let text = poll.interval.as_deref().unwrap_or_default();
    let (interval, invalid_interval) = match go_duration::parse(text) {
        Ok(interval) if interval.is_positive() => (interval, None),
        Ok(_) => (
            DEFAULT_POLL_INTERVAL,
            Some(invalid_interval_message("interval must be positive")),
        ),
        Err(error) => (
            DEFAULT_POLL_INTERVAL,
            Some(invalid_interval_message(&error.to_string())),
        ),
    };
    let last = catalog
        .status
        .as_ref()
        .and_then(|s| s.latest_image_registry_poll.as_ref())
        .map(|t| t.0)
        .or_else(|| catalog.metadata.creation_timestamp.as_ref().map(|t| t.0))
        .unwrap_or(now);
    let next = last.checked_add(interval).unwrap_or(now);
    let due = next < now;
    let until_next = if due {
        interval
    } else {
        next.duration_since(now)
    };
    let requeue_after = if interval <= MAX_POLL_REQUEUE {
        interval
    } else {
        until_next.min(MAX_POLL_REQUEUE)
    };
    Some(PollSchedule {
        interval,
        invalid_interval,
        due,
        requeue_after,
    })
}

fn invalid_interval_message(error: &str) -> String {
    format!(
        "error parsing spec.updateStrategy.registryPoll.interval. Using the default value of {} instead. Error: {error}",
        go_duration::format(DEFAULT_POLL_INTERVAL)
    )
}

/// Adds upstream's ±10 % jitter to a requeue delay; `unit` is a number in
/// `[0, 1)` supplied by the caller (the only randomness).
pub fn jitter(delay: SignedDuration, unit: f64) -> SignedDuration {
    let factor = 0.9 + 0.2 * unit.clamp(0.0, 1.0);
    SignedDuration::from_secs_f64(delay.as_secs_f64() * factor)
}

/// The annotation on a registry pod recording the image digest it serves.
pub const IMAGE_DIGEST_ANNOTATION: &str = "olm.catalog-operator/image-digest";

/// The annotation on a promoted update pod recording when it began to
/// serve (RFC 3339, to the nanosecond): of several pods serving one spec,
/// the one promoted last is kept ([`pods::plan`]). A pod created to serve
/// has its creation time instead.
pub const PROMOTED_AT_ANNOTATION: &str = "olm.catalog-operator/promoted-at";

/// `image` pinned to `digest`: its tag (and any digest) replaced by
/// `@digest`, so the pod runs exactly the content that was polled.
pub fn pinned_image(image: &str, digest: &str) -> String {
    let without_digest = image.split_once('@').map_or(image, |(name, _)| name);
    let last_slash = without_digest.rfind('/').map_or(0, |i| i + 1);
    let name = match without_digest[last_slash..].rfind(':') {
        Some(colon) => &without_digest[..last_slash + colon],
        None => without_digest,
    };
    format!("{name}@{digest}")
}

/// Pins every container of `pod` that runs `image` to `digest`, and records
/// the digest on the pod.
pub fn pin_pod(pod: &mut Pod, image: &str, digest: &str) {
    let pinned = pinned_image(image, digest);
    if let Some(spec) = pod.spec.as_mut() {
        let containers = spec
            .containers
            .iter_mut()
            .chain(spec.init_containers.iter_mut().flatten());
        for container in containers {
            if container.image.as_deref() == Some(image) {
                container.image = Some(pinned.clone());
                container.image_pull_policy = Some("IfNotPresent".to_owned());
            }
        }
    }
    pod.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(IMAGE_DIGEST_ANNOTATION.to_owned(), digest.to_owned());
}

/// Turns a registry pod into an update pod: it does not serve (no
/// `olm.catalogSource` label the Service selects) until it is promoted.
pub fn as_update_pod(pod: &mut Pod, catalog_name: &str) {
    let labels = pod.metadata.labels.get_or_insert_with(BTreeMap::new);
    labels.insert(labels::CATALOG_SOURCE.to_owned(), String::new());
    labels.insert(
        labels::CATALOG_SOURCE_UPDATE.to_owned(),
        catalog_name.to_owned(),
    );
}

/// Whether a pod reports the Ready condition.
pub fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Whether an update pod will never become ready (failed, or crash-looping).
pub fn pod_broken(pod: &Pod) -> bool {
    let Some(status) = pod.status.as_ref() else {
        return false;
    };
    let phase_failed = matches!(status.phase.as_deref(), Some("Failed" | "Unknown"));
    let crash_looping = status.container_statuses.iter().flatten().any(|c| {
        c.state
            .as_ref()
            .and_then(|s| s.waiting.as_ref())
            .and_then(|w| w.reason.as_deref())
            == Some("CrashLoopBackOff")
    });
    phase_failed || crash_looping
}
