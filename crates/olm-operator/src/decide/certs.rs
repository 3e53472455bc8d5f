//! Serving certificates of the Deployments behind a CSV's owned APIServices
//! and webhooks (upstream's `pkg/controller/install/certresources.go`): the
//! Service in front of each such Deployment, the Secret holding its CA and
//! serving certificate, the RBAC that lets the Deployment's ServiceAccount
//! read that Secret and delegate authentication, the volumes that mount it,
//! and the `olmcahash` pod-template annotation that rolls the pods when the
//! CA changes.
//!
//! Whether certificates must be (re)issued is decided by
//! [`olm_certs::decide`] from the certificates stored in the Secret and
//! nothing else: upstream once decided from `status.certsRotateAt`, that
//! field drifted from the real certificate, and certificates expired
//! unrotated. Issuing (key generation) is left to the caller.
//!
//! Deliberate differences from upstream, each documented where it is built:
//!
//! - OLM keeps the CA's private key (`olmCASigningKey`), so the serving
//!   certificate is renewed under the same CA and a new CA is published next
//!   to the old one before anything it signed is served (upstream makes a
//!   new CA and certificate at once, every time). The key is in a Secret of
//!   its own, `<service>-ca-key`, that no Role lets the operator read:
//!   with it, an operator could mint certificates the API server trusts for
//!   its service. `olmCAKey` keeps upstream's meaning: the CA *certificate*
//!   PEM (here the bundle, newest first). Secrets written before the key
//!   moved are read once and rewritten without it.
//! - The Service name replaces dots in the Deployment name with dashes for
//!   APIServices as well (upstream does it only for webhooks, so its
//!   APIService Service for a dotted Deployment name cannot be created).
//! - Every object carries the CSV's owner labels, so that a change to one of
//!   them wakes the CSV and the CSV's deletion removes them all.

use std::{collections::BTreeMap, time::SystemTime};

use k8s_openapi::{
    ByteString,
    api::{
        apps::v1::DeploymentSpec,
        core::v1::{
            KeyToPath, PodSpec, Secret, SecretVolumeSource, Service, ServicePort, ServiceSpec,
            Volume, VolumeMount,
        },
        rbac::v1::{ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject},
    },
    apimachinery::pkg::{apis::meta::v1::ObjectMeta, util::intstr::IntOrString},
};
use olm_api::{csv::ClusterServiceVersion, labels};
use olm_certs::{Decision, Material, RotationPolicy};

use olm_api::ownership::{non_blocking_owner, owner_labels};

/// Secret key of the serving certificate (as upstream).
pub const TLS_CERT_KEY: &str = "tls.crt";
/// Secret key of the serving certificate's private key (as upstream).
pub const TLS_KEY_KEY: &str = "tls.key";
/// Secret key of the CA certificate PEM (upstream's name, which despite it
/// holds the certificate; here the CA bundle, newest first).
pub const OLM_CA_KEY: &str = "olmCAKey";
/// Secret key of the signing CA's private key (ours; upstream keeps none),
/// in the CA key Secret ([`ServingTarget::ca_key_secret`]).
pub const CA_SIGNING_KEY_KEY: &str = "olmCASigningKey";
/// Type of the CA key Secret.
pub const SECRET_TYPE_OPAQUE: &str = "Opaque";
/// The Secret type.
pub const SECRET_TYPE_TLS: &str = "kubernetes.io/tls";
/// Port of the Service when the description names none (upstream's default).
pub const DEFAULT_SERVICE_PORT: i32 = 443;
/// The ServiceAccount a Deployment runs as when its pod spec names none.
pub const DEFAULT_SERVICE_ACCOUNT: &str = "default";
/// Namespace of the authentication-reader RoleBinding.
pub const KUBE_SYSTEM: &str = "kube-system";
/// ClusterRole an aggregated API server needs to delegate authentication.
pub const AUTH_DELEGATOR_CLUSTER_ROLE: &str = "system:auth-delegator";
/// Role (in kube-system) an aggregated API server needs to read the
/// client-CA ConfigMap.
pub const AUTH_READER_ROLE: &str = "extension-apiserver-authentication-reader";
/// Volume of the certificate as aggregated API servers expect it.
pub const APISERVICE_CERT_VOLUME: &str = "apiservice-cert";
/// Where [`APISERVICE_CERT_VOLUME`] is mounted.
pub const APISERVICE_CERT_PATH: &str = "/apiserver.local.config/certificates";
/// Volume of the certificate as controller-runtime webhook servers expect it.
pub const WEBHOOK_CERT_VOLUME: &str = "webhook-cert";
/// Where [`WEBHOOK_CERT_VOLUME`] is mounted.
pub const WEBHOOK_CERT_PATH: &str = "/tmp/k8s-webhook-server/serving-certs";

/// The Service in front of a Deployment: `<deployment with . → ->-service`.
pub fn service_name(deployment: &str) -> String {
    format!("{}-service", deployment.replace('.', "-"))
}

/// The Secret of a Service's certificates: `<service>-cert`.
pub fn secret_name(service: &str) -> String {
    format!("{service}-cert")
}

/// The auth-delegator ClusterRoleBinding of a Service.
pub fn auth_delegator_binding_name(service: &str) -> String {
    format!("{service}-system:auth-delegator")
}

/// The auth-reader RoleBinding (in kube-system) of a Service.
pub fn auth_reader_binding_name(service: &str) -> String {
    format!("{service}-auth-reader")
}

/// The names a Service is reached by inside the cluster.
pub fn hosts_for_service(service: &str, namespace: &str) -> Vec<String> {
    olm_certs::Profile::for_service(service, namespace).hosts
}

/// A strategy Deployment that serves an owned APIService or a webhook, and
/// the names of what OLM creates for it.
#[derive(Clone, Debug, PartialEq)]
pub struct ServingTarget {
    /// The strategy Deployment.
    pub deployment: String,
    /// The Service in front of it.
    pub service: String,
    /// The Secret of its certificates.
    pub secret: String,
    /// The Service's ports, one per distinct port of the descriptions.
    pub ports: Vec<ServicePort>,
    /// The Deployment's `selector.matchLabels`, the Service's selector.
    pub selector: BTreeMap<String, String>,
    /// The ServiceAccount its pods run as.
    pub service_account: String,
    /// Whether it serves an owned APIService (and so needs the
    /// authentication bindings checked).
    pub serves_api_service: bool,
}

impl ServingTarget {
    /// The names its serving certificate must cover.
    pub fn hosts(&self, namespace: &str) -> Vec<String> {
        hosts_for_service(&self.service, namespace)
    }

    /// The certificate profile olm-certs issues with.
    pub fn profile(&self, namespace: &str) -> olm_certs::Profile {
        olm_certs::Profile::for_service(&self.service, namespace)
    }

    /// The Secret holding the CA's private key, which only OLM reads.
    pub fn ca_key_secret(&self) -> String {
        format!("{}-ca-key", self.service)
    }
}

fn port(container_port: Option<i32>, target_port: Option<&IntOrString>) -> ServicePort {
    let port = container_port
        .filter(|p| *p > 0)
        .unwrap_or(DEFAULT_SERVICE_PORT);
    ServicePort {
        name: Some(port.to_string()),
        port,
        target_port: Some(target_port.cloned().unwrap_or(IntOrString::Int(port))),
        ..ServicePort::default()
    }
}

/// The strategy Deployments that back an owned APIService or a webhook, in
/// strategy order, with their Service ports (APIServices first, then
/// webhooks, duplicates dropped, as upstream's `getServicePorts`).
/// Descriptions naming no strategy Deployment are left out (the requirement
/// check reports owned APIServices of that kind as `DeploymentNotFound`).
pub fn serving_targets(csv: &ClusterServiceVersion) -> Vec<ServingTarget> {
    let api_services = csv.spec.owned_api_services();
    let webhooks = csv.spec.webhooks();
    let mut targets = Vec::new();
    for deployment in &csv.spec.install.spec.deployments {
        let name = deployment.name.as_str();
        let mut ports: Vec<ServicePort> = Vec::new();
        let mut serves_api_service = false;
        for description in api_services
            .iter()
            .filter(|d| d.deployment_name.as_deref() == Some(name))
        {
            serves_api_service = true;
            ports.push(port(description.container_port, None));
        }
        for description in webhooks
            .iter()
            .filter(|d| d.deployment_name.as_deref() == Some(name))
        {
            ports.push(port(
                description.container_port,
                description.target_port.as_ref(),
            ));
        }
        if ports.is_empty() {
            continue;
        }
        let mut distinct: Vec<ServicePort> = Vec::with_capacity(ports.len());
        for candidate in ports {
            if !distinct.contains(&candidate) {
                distinct.push(candidate);
            }
        }
        let service = service_name(name);
        let pod = deployment.spec.template.spec.as_ref();
        targets.push(ServingTarget {
            deployment: name.to_owned(),
            secret: secret_name(&service),
            service,
            ports: distinct,
            selector: deployment
                .spec
                .selector
                .match_labels
                .clone()
                .unwrap_or_default(),
            service_account: pod
                .and_then(|p| p.service_account_name.clone())
                .filter(|sa| !sa.is_empty())
                .unwrap_or_else(|| DEFAULT_SERVICE_ACCOUNT.to_owned()),
            serves_api_service,
        });
    }
    targets
}

/// Whether the CSV owns anything that needs serving certificates.
pub fn has_serving_resources(csv: &ClusterServiceVersion) -> bool {
    !csv.spec.owned_api_services().is_empty() || !csv.spec.webhooks().is_empty()
}

fn data_text(secret: &Secret, key: &str) -> Option<String> {
    let bytes = secret.data.as_ref()?.get(key)?;
    String::from_utf8(bytes.0.clone()).ok()
}

/// The certificates stored for a target: the serving Secret and the CA key
/// Secret; `None` when something is missing or not text (a Secret written
/// by upstream OLM has no CA key, so its certificates are replaced once).
/// A serving Secret written before the CA key moved still holds it, and it
/// is taken from there.
pub fn material_from_secrets(serving: &Secret, ca_key: Option<&Secret>) -> Option<Material> {
    let ca_key_pem = ca_key
        .and_then(|s| data_text(s, CA_SIGNING_KEY_KEY))
        .or_else(|| data_text(serving, CA_SIGNING_KEY_KEY))?;
    Some(Material {
        ca_bundle_pem: data_text(serving, OLM_CA_KEY)?,
        ca_key_pem,
        cert_pem: data_text(serving, TLS_CERT_KEY)?,
        key_pem: data_text(serving, TLS_KEY_KEY)?,
    })
}

/// What to do with a target's stored certificates now, decided from the
/// certificates alone.
pub fn rotation_decision(
    stored: Option<&Secret>,
    ca_key: Option<&Secret>,
    target: &ServingTarget,
    namespace: &str,
    now: SystemTime,
    policy: &RotationPolicy,
) -> Decision {
    let material = stored.and_then(|s| material_from_secrets(s, ca_key));
    let observed = Material::observe_stored(material.as_ref(), &target.hosts(namespace));
    olm_certs::decide(&observed, now, policy)
}

/// The certificate outlook of a CSV: whether any target needs new
/// certificates now, and otherwise when to look again at the latest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CertOutlook {
    /// The targets (by Deployment) whose certificates need a step now.
    pub due: Vec<String>,
    /// The earliest time (Unix seconds) a kept certificate needs a step.
    pub next: Option<i64>,
}

impl CertOutlook {
    /// Whether any certificate needs a step now.
    pub fn rotation_due(&self) -> bool {
        !self.due.is_empty()
    }
}

/// [`rotation_decision`] over every target; `secrets` maps Secret names to
/// the Secrets found.
pub fn cert_outlook(
    targets: &[ServingTarget],
    secrets: &BTreeMap<String, Secret>,
    namespace: &str,
    now: SystemTime,
    policy: &RotationPolicy,
) -> CertOutlook {
    let mut outlook = CertOutlook::default();
    for target in targets {
        let decision = rotation_decision(
            secrets.get(&target.secret),
            secrets.get(&target.ca_key_secret()),
            target,
            namespace,
            now,
            policy,
        );
        match decision {
            Decision::Keep { next } => {
                outlook.next = Some(outlook.next.map_or(next, |n| n.min(next)));
            }
            _ => outlook.due.push(target.deployment.clone()),
        }
    }
    outlook
}

/// Labels of every object built here: `olm.managed` and the owner labels.
fn managed_owner_labels(csv: &ClusterServiceVersion) -> BTreeMap<String, String> {
    let mut out = owner_labels(csv);
    out.insert(labels::MANAGED.to_owned(), labels::MANAGED_VALUE.to_owned());
    out
}

fn owned_meta(csv: &ClusterServiceVersion, name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: namespace.map(str::to_owned),
        labels: Some(managed_owner_labels(csv)),
        owner_references: namespace
            .filter(|ns| Some(*ns) == csv.metadata.namespace.as_deref())
            .map(|_| vec![non_blocking_owner(csv)]),
        ..ObjectMeta::default()
    }
}

/// The Service in front of a target Deployment.
pub fn service_for(csv: &ClusterServiceVersion, target: &ServingTarget) -> Service {
    Service {
        metadata: owned_meta(csv, &target.service, csv.metadata.namespace.as_deref()),
        spec: Some(ServiceSpec {
            ports: Some(target.ports.clone()),
            selector: Some(target.selector.clone()),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// The Secret storing `material`'s CA private key for a target: read by
/// OLM alone (no Role grants it to the operator).
pub fn ca_key_secret_for(
    csv: &ClusterServiceVersion,
    target: &ServingTarget,
    material: &Material,
) -> Secret {
    Secret {
        metadata: owned_meta(
            csv,
            &target.ca_key_secret(),
            csv.metadata.namespace.as_deref(),
        ),
        type_: Some(SECRET_TYPE_OPAQUE.to_owned()),
        data: Some(BTreeMap::from([(
            CA_SIGNING_KEY_KEY.to_owned(),
            ByteString(material.ca_key_pem.as_bytes().to_vec()),
        )])),
        ..Secret::default()
    }
}

/// The Secret the operator mounts for a target: its serving certificate and
/// key and the CA bundle (never the CA's private key), annotated with the
/// CA hash.
pub fn secret_for(
    csv: &ClusterServiceVersion,
    target: &ServingTarget,
    material: &Material,
) -> Secret {
    let mut metadata = owned_meta(csv, &target.secret, csv.metadata.namespace.as_deref());
    metadata.annotations = Some(BTreeMap::from([(
        labels::CA_HASH.to_owned(),
        olm_certs::ca_hash(&material.ca_bundle_pem),
    )]));
    let data = [
        (TLS_CERT_KEY, &material.cert_pem),
        (TLS_KEY_KEY, &material.key_pem),
        (OLM_CA_KEY, &material.ca_bundle_pem),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_owned(), ByteString(value.as_bytes().to_vec())))
    .collect();
    Secret {
        metadata,
        type_: Some(SECRET_TYPE_TLS.to_owned()),
        data: Some(data),
        ..Secret::default()
    }
}

fn service_account_subject(csv: &ClusterServiceVersion, target: &ServingTarget) -> Subject {
    Subject {
        kind: "ServiceAccount".to_owned(),
        api_group: Some(String::new()),
        name: target.service_account.clone(),
        namespace: csv.metadata.namespace.clone(),
    }
}

/// The Role letting the target's ServiceAccount read its Secret.
pub fn secret_reader_role(csv: &ClusterServiceVersion, target: &ServingTarget) -> Role {
    Role {
        metadata: owned_meta(csv, &target.secret, csv.metadata.namespace.as_deref()),
        rules: Some(vec![PolicyRule {
            verbs: vec!["get".to_owned()],
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["secrets".to_owned()]),
            resource_names: Some(vec![target.secret.clone()]),
            non_resource_urls: None,
        }]),
    }
}

/// The RoleBinding of [`secret_reader_role`].
pub fn secret_reader_binding(csv: &ClusterServiceVersion, target: &ServingTarget) -> RoleBinding {
    RoleBinding {
        metadata: owned_meta(csv, &target.secret, csv.metadata.namespace.as_deref()),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".to_owned(),
            kind: "Role".to_owned(),
            name: target.secret.clone(),
        },
        subjects: Some(vec![service_account_subject(csv, target)]),
    }
}

/// The ClusterRoleBinding to `system:auth-delegator`.
pub fn auth_delegator_binding(
    csv: &ClusterServiceVersion,
    target: &ServingTarget,
) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: owned_meta(csv, &auth_delegator_binding_name(&target.service), None),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".to_owned(),
            kind: "ClusterRole".to_owned(),
            name: AUTH_DELEGATOR_CLUSTER_ROLE.to_owned(),
        },
        subjects: Some(vec![service_account_subject(csv, target)]),
    }
}

/// The RoleBinding (in kube-system) to
/// `extension-apiserver-authentication-reader`.
pub fn auth_reader_binding(csv: &ClusterServiceVersion, target: &ServingTarget) -> RoleBinding {
    RoleBinding {
        metadata: owned_meta(
            csv,
            &auth_reader_binding_name(&target.service),
            Some(KUBE_SYSTEM),
        ),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".to_owned(),
            kind: "Role".to_owned(),
            name: AUTH_READER_ROLE.to_owned(),
        },
        subjects: Some(vec![service_account_subject(csv, target)]),
    }
}

/// What a strategy Deployment gets from its serving certificates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServingCertInjection {
    /// The strategy Deployment.
    pub deployment: String,
    /// The Secret to mount.
    pub secret: String,
    /// Hex SHA-256 of the CA bundle (the `olmcahash` annotation).
    pub ca_hash: String,
}

/// The injections for every target, from the Secrets found; `None` when a
/// target's Secret is missing or holds no CA (the expected Deployments cannot
/// be computed, upstream's "calculated deployment install is bad").
pub fn injections_from_secrets(
    targets: &[ServingTarget],
    secrets: &BTreeMap<String, Secret>,
) -> Option<Vec<ServingCertInjection>> {
    targets
        .iter()
        .map(|target| {
            let bundle = data_text(secrets.get(&target.secret)?, OLM_CA_KEY)?;
            Some(ServingCertInjection {
                deployment: target.deployment.clone(),
                secret: target.secret.clone(),
                ca_hash: olm_certs::ca_hash(&bundle),
            })
        })
        .collect()
}

fn secret_volume(name: &str, secret: &str, items: [(&str, &str); 2]) -> Volume {
    Volume {
        name: name.to_owned(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret.to_owned()),
            items: Some(
                items
                    .iter()
                    .map(|(key, path)| KeyToPath {
                        key: (*key).to_owned(),
                        path: (*path).to_owned(),
                        mode: None,
                    })
                    .collect(),
            ),
            ..SecretVolumeSource::default()
        }),
        ..Volume::default()
    }
}

/// Upstream's `addCertVolumeAndVolumeMount`: the volume replaces one of the
/// same name or is appended; every container gets the mount unless it has
/// one of that name already, and a mount at the same path is replaced.
fn add_volume_and_mount(pod: &mut PodSpec, volume: Volume, mount: VolumeMount) {
    let volumes = pod.volumes.get_or_insert_with(Vec::new);
    match volumes.iter_mut().find(|v| v.name == volume.name) {
        Some(existing) => *existing = volume,
        None => volumes.push(volume),
    }
    for container in &mut pod.containers {
        let mounts = container.volume_mounts.get_or_insert_with(Vec::new);
        if mounts.iter().any(|m| m.name == mount.name) {
            continue;
        }
        match mounts.iter_mut().find(|m| m.mount_path == mount.mount_path) {
            Some(existing) => *existing = mount.clone(),
            None => mounts.push(mount.clone()),
        }
    }
}

/// Adds the certificate volumes, the default ServiceAccount and the
/// `olmcahash` annotation to the spec of `deployment`, when an injection
/// names it (upstream's `AddDefaultCertVolumeAndVolumeMounts` and
/// `SetCAAnnotation`, applied before the Deployment is built).
pub fn inject_serving_cert(
    spec: &mut DeploymentSpec,
    deployment: &str,
    injections: &[ServingCertInjection],
) {
    let Some(injection) = injections.iter().find(|i| i.deployment == deployment) else {
        return;
    };
    let pod = spec.template.spec.get_or_insert_with(PodSpec::default);
    if pod
        .service_account_name
        .as_deref()
        .unwrap_or_default()
        .is_empty()
    {
        pod.service_account_name = Some(DEFAULT_SERVICE_ACCOUNT.to_owned());
    }
    add_volume_and_mount(
        pod,
        secret_volume(
            APISERVICE_CERT_VOLUME,
            &injection.secret,
            [
                (TLS_CERT_KEY, "apiserver.crt"),
                (TLS_KEY_KEY, "apiserver.key"),
            ],
        ),
        VolumeMount {
            name: APISERVICE_CERT_VOLUME.to_owned(),
            mount_path: APISERVICE_CERT_PATH.to_owned(),
            ..VolumeMount::default()
        },
    );
    add_volume_and_mount(
        pod,
        secret_volume(
            WEBHOOK_CERT_VOLUME,
            &injection.secret,
            [(TLS_CERT_KEY, TLS_CERT_KEY), (TLS_KEY_KEY, TLS_KEY_KEY)],
        ),
        VolumeMount {
            name: WEBHOOK_CERT_VOLUME.to_owned(),
            mount_path: WEBHOOK_CERT_PATH.to_owned(),
            ..VolumeMount::default()
        },
    );
    spec.template
        .metadata
        .get_or_insert_with(ObjectMeta::default)
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(labels::CA_HASH.to_owned(), injection.ca_hash.clone());
}
