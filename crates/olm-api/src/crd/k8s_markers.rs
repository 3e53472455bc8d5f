//! Markers that Kubernetes' Go types carry and k8s-openapi's schemas do not.
//!
//! controller-gen reads `+listType`, `+listMapKey`, `+mapType`/`+structType`
//! and `+default` markers from `k8s.io/api` and writes them into every CRD that
//! embeds a core type (a Subscription's `config.env`, a CSV's pod template).
//! k8s-openapi's schemars impls leave them out, so this table puts them back,
//! keyed by the definition name k8s-openapi gives each type.
//!
//! The topology markers were taken from the Kubernetes v1.34 OpenAPI v3
//! document (`api/openapi-spec/v3`), which records the same Go markers, for
//! every core type reachable from our CRDs. Defaults are only those written as
//! literal `+default=` markers (OpenAPI also lists zero-value defaults for
//! required fields, which controller-gen does not emit). Types that embed
//! `LocalObjectReference` inline inherit its `+structType=atomic` (and its
//! optional, defaulted `name`), as controller-gen propagates them.

use serde_json::{Value, json};

use self::Marker::{DefaultBool, DefaultStr, ListMapKeys, ListType, MapType, Optional};

/// One marker on a type (`""`) or on one of its properties.
#[derive(Clone, Copy, Debug)]
enum Marker {
    /// `x-kubernetes-list-type`.
    ListType(&'static str),
    /// `x-kubernetes-list-map-keys`.
    ListMapKeys(&'static [&'static str]),
    /// `x-kubernetes-map-type`.
    MapType(&'static str),
    /// A string `default`.
    DefaultStr(&'static str),
    /// A boolean `default`.
    DefaultBool(bool),
    /// Not required: the Go field is `omitempty` with `+default`, though
    /// k8s-openapi lists it as required.
    Optional,
}

/// The pattern controller-gen puts on every `resource.Quantity`.
pub(crate) const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// A schema that replaces a definition outright (instead of inlining it).
pub(super) fn replacement(name: &str) -> Option<Value> {
    match name {
        "io.k8s.apimachinery.pkg.api.resource.Quantity" => Some(json!({
            "anyOf": [{ "type": "integer" }, { "type": "string" }],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": true,
        })),
        "io.k8s.apimachinery.pkg.util.intstr.IntOrString" => Some(json!({
            "anyOf": [{ "type": "integer" }, { "type": "string" }],
            "x-kubernetes-int-or-string": true,
        })),
        // Embedded object metadata is validated by the API server itself;
        // controller-gen writes only its type.
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" => Some(json!({ "type": "object" })),
        _ => None,
    }
}

/// Applies the markers of definition `name` to its inlined `schema`.
pub(super) fn apply(name: &str, schema: &mut Value) {
    let Some((_, markers)) = MARKERS.iter().find(|(n, _)| *n == name) else {
        return;
    };
    for (property, marker) in *markers {
        if let Optional = marker {
            not_required(schema, property);
            continue;
        }
        let target = if property.is_empty() {
            Some(&mut *schema)
        } else {
            schema.pointer_mut(&format!("/properties/{property}"))
        };
        let Some(Value::Object(target)) = target else {
            continue;
        };
        let (key, value) = match marker {
            ListType(t) => ("x-kubernetes-list-type", json!(t)),
            ListMapKeys(keys) => ("x-kubernetes-list-map-keys", json!(keys)),
            MapType(t) => ("x-kubernetes-map-type", json!(t)),
            DefaultStr(v) => ("default", json!(v)),
            DefaultBool(v) => ("default", json!(v)),
            Optional => continue,
        };
        target.insert(key.to_owned(), value);
    }
}

/// Removes `property` from the `required` list of `schema`.
fn not_required(schema: &mut Value, property: &str) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    if let Some(Value::Array(required)) = object.get_mut("required") {
        required.retain(|name| name != property);
        if required.is_empty() {
            object.remove("required");
        }
    }
}

/// Markers per k8s-openapi definition name.
#[rustfmt::skip]
const MARKERS: &[(&str, &[(&str, Marker)])] = &[
    (
        "io.k8s.api.admissionregistration.v1.RuleWithOperations",
        &[
            ("apiGroups", ListType("atomic")),
            ("apiVersions", ListType("atomic")),
            ("operations", ListType("atomic")),
            ("resources", ListType("atomic")),
        ],
    ),
    (
        "io.k8s.api.core.v1.AzureDiskVolumeSource",
        &[
            ("fsType", DefaultStr("ext4")),
            ("readOnly", DefaultBool(false)),
        ],
    ),
    (
        "io.k8s.api.core.v1.Capabilities",
        &[
            ("add", ListType("atomic")),
            ("drop", ListType("atomic")),
        ],
    ),
    (
        "io.k8s.api.core.v1.CephFSVolumeSource",
        &[
            ("monitors", ListType("atomic")),
        ],
    ),
    (
        "io.k8s.api.core.v1.ConfigMapEnvSource",
        &[
            ("", MapType("atomic")),
            ("name", DefaultStr("")),
            ("name", Optional),
        ],
    ),
    (
        "io.k8s.api.core.v1.ConfigMapKeySelector",
        &[
            ("", MapType("atomic")),
            ("name", DefaultStr("")),
            ("name", Optional),
        ],
    ),
    (
        "io.k8s.api.core.v1.ConfigMapProjection",
        &[
            ("", MapType("atomic")),
            ("items", ListType("atomic")),
            ("name", DefaultStr("")),
            ("name", Optional),
        ],
    ),
    (
        "io.k8s.api.core.v1.ConfigMapVolumeSource",
        &[
            ("", MapType("atomic")),
            ("items", ListType("atomic")),
            ("name", DefaultStr("")),
            ("name", Optional),
        ],
    ),
    (
        "io.k8s.api.core.v1.Container",
        &[
            ("args", ListType("atomic")),
            ("command", ListType("atomic")),
            ("env", ListType("map")),
            ("env", ListMapKeys(&["name"])),
            ("envFrom", ListType("atomic")),
            ("ports", ListType("map")),
            ("ports", ListMapKeys(&["containerPort", "protocol"])),
            ("resizePolicy", ListType("atomic")),
            ("restartPolicyRules", ListType("atomic")),
            ("volumeDevices", ListType("map")),
            ("volumeDevices", ListMapKeys(&["devicePath"])),
            ("volumeMounts", ListType("map")),
            ("volumeMounts", ListMapKeys(&["mountPath"])),
        ],
    ),
    (
        "io.k8s.api.core.v1.ContainerPort",
        &[
            ("protocol", DefaultStr("TCP")),
        ],
    ),
    (
        "io.k8s.api.core.v1.ContainerRestartRuleOnExitCodes",
        &[
            ("values", ListType("set")),
        ],
    ),
    (
        "io.k8s.api.core.v1.DownwardAPIProjection",
        &[
            ("items", ListType("atomic")),
        ],
    ),
    (
        "io.k8s.api.core.v1.DownwardAPIVolumeSource",
        &[
            ("items", ListType("atomic")),
        ],
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        &[
            ("args", ListType("atomic")),
            ("command", ListType("atomic")),
            ("env", ListType("map")),
            ("env", ListMapKeys(&["name"])),
            ("envFrom", ListType("atomic")),
            ("ports", ListType("map")),
            ("ports", ListMapKeys(&["containerPort", "protocol"])),
            ("resizePolicy", ListType("atomic")),
            ("restartPolicyRules", ListType("atomic")),
            ("volumeDevices", ListType("map")),
            ("volumeDevices", ListMapKeys(&["devicePath"])),
            ("volumeMounts", ListType("map")),
            ("volumeMounts", ListMapKeys(&["mountPath"])),
        ],
    ),
    (
        "io.k8s.api.core.v1.ExecAction",
        &[
            ("command", ListType("atomic")),
        ],
    ),
    (
        "io.k8s.api.core.v1.FCVolumeSource",
        &[
            ("targetWWNs", ListType("atomic")),
            ("wwids", ListType("atomic")),
        ],
    ),
    (
        "io.k8s.api.core.v1.FileKeySelector",
        &[
            ("", MapType("atomic")),
            ("optional", DefaultBool(false)),
        ],
    ),
    (
        "io.k8s.api.core.v1.GRPCAction",
        &[
            ("service", DefaultStr("")),
        ],
    ),
    (
        "io.k8s.api.core.v1.HTTPGetAction",
        &[
            ("httpHeaders", ListType("atomic")),
        ],
    ),
    (
        "io.k8s.api.core.v1.HostAlias",
        &[
            ("hostnames", ListType("atomic")),
            ("ip", DefaultStr("")),
        ],
    ),
    (
        "io.k8s.api.core.v1.ISCSIVolumeSource",
        &[
            ("iscsiInterface", DefaultStr("default")),
            ("portals", ListType("atomic")),
        ],
    ),
    (
        "io.k8s.api.core.v1.LocalObjectReference",
        &[
            ("", MapType("atomic")),
            ("name", DefaultStr("")),
            ("name", Optional),
        ],
    ),
    (
        "io.k8s.api.core.v1.NodeAffinity",
        &[
            ("preferredDuringSchedulingIgnoredDuringExecution", ListType("atomic")),
        ],
    ),
    (
        "io.k8s.api.core.v1.NodeSelector",
        &[
            ("", MapType("atomic")),
            ("nodeSelectorTerms", ListType("atomic")),
        ],
    ),
    (
        "io.k8s.api.core.v1.NodeSelectorRequirement",
        &[
            ("values", ListType("atomic")),
        ],
    ),
    (
        "io.k8s.api.core.v1.NodeSelectorTerm",
        &[
            ("", MapType("atomic")),
            ("matchExpressions", ListType("atomic")),
            ("matchFields", ListType("atomic")),
        ],
    ),
    (
        "io.k8s.api.core.v1.ObjectFieldSelector",
        &[
            ("", MapType("atomic")),
        ],
    ),
    (
        "io.k8s.api.core.v1.ObjectReference",
        &[
            ("", MapType("atomic")),
        ],
    ),
    (
        "io.k8s.api.core.v1.PersistentVolumeClaimSpec",
        &[
            ("accessModes", ListType("atomic")),
        ],
    ),
    (
        "io.k8s.api.core.v1.PodAffinity",
        &[
            ("preferredDuringSchedulingIgnoredDuringExecution", ListType("atomic")),
            ("requiredDuringSchedulingIgnoredDuringExecution", ListType("atomic")),
        ],
    ),
    (
        "io.k8s.api.core.v1.PodAffinityTerm",
        &[
            ("matchLabelKeys", ListType("atomic")),
            ("mismatchLabelKeys", ListType("atomic")),
            ("namespaces", ListType("atomic")),
        ],
    ),
    (
        "io.k8s.api.core.v1.PodAntiAffinity",
        &[
            ("preferredDuringSchedulingIgnoredDuringExecution", ListType("atomic")),
            ("requiredDuringSchedulingIgnoredDuringExecution", ListType("atomic")),
        ],
    ),
    (
        "io.k8s.api.core.v1.PodDNSConfig",
        &[
            ("nameservers", ListType("atomic")),
            ("options", ListType("atomic")),
            ("searches", ListType("atomic")),
        ],
    ),
    (
        "io.k8s.api.core.v1.PodSecurityContext",
        &[
            ("supplementalGroups", ListType("atomic")),
            ("sysctls", ListType("atomic")),
        ],
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        &[
            ("containers", ListType("map")),
            ("containers", ListMapKeys(&["name"])),
            ("ephemeralContainers", ListType("map")),
            ("ephemeralContainers", ListMapKeys(&["name"])),
            ("hostAliases", ListType("map")),
            ("hostAliases", ListMapKeys(&["ip"])),
            ("imagePullSecrets", ListType("map")),
            ("imagePullSecrets", ListMapKeys(&["name"])),
            ("initContainers", ListType("map")),
            ("initContainers", ListMapKeys(&["name"])),
            ("nodeSelector", MapType("atomic")),
            ("readinessGates", ListType("atomic")),
            ("resourceClaims", ListType("map")),
            ("resourceClaims", ListMapKeys(&["name"])),
            ("schedulingGates", ListType("map")),
            ("schedulingGates", ListMapKeys(&["name"])),
            ("tolerations", ListType("atomic")),
            ("topologySpreadConstraints", ListType("map")),
            ("topologySpreadConstraints", ListMapKeys(&["topologyKey", "whenUnsatisfiable"])),
            ("volumes", ListType("map")),
            ("volumes", ListMapKeys(&["name"])),
        ],
    ),
    (
        "io.k8s.api.core.v1.ProjectedVolumeSource",
        &[
            ("sources", ListType("atomic")),
        ],
    ),
    (
        "io.k8s.api.core.v1.RBDVolumeSource",
        &[
            ("keyring", DefaultStr("/etc/ceph/keyring")),
            ("monitors", ListType("atomic")),
            ("pool", DefaultStr("rbd")),
            ("user", DefaultStr("admin")),
        ],
    ),
    (
        "io.k8s.api.core.v1.ResourceFieldSelector",
        &[
            ("", MapType("atomic")),
        ],
    ),
    (
        "io.k8s.api.core.v1.ResourceRequirements",
        &[
            ("claims", ListType("map")),
            ("claims", ListMapKeys(&["name"])),
        ],
    ),
    (
        "io.k8s.api.core.v1.ScaleIOVolumeSource",
        &[
            ("fsType", DefaultStr("xfs")),
            ("storageMode", DefaultStr("ThinProvisioned")),
        ],
    ),
    (
        "io.k8s.api.core.v1.SecretEnvSource",
        &[
            ("", MapType("atomic")),
            ("name", DefaultStr("")),
            ("name", Optional),
        ],
    ),
    (
        "io.k8s.api.core.v1.SecretKeySelector",
        &[
            ("", MapType("atomic")),
            ("name", DefaultStr("")),
            ("name", Optional),
        ],
    ),
    (
        "io.k8s.api.core.v1.SecretProjection",
        &[
            ("", MapType("atomic")),
            ("items", ListType("atomic")),
            ("name", DefaultStr("")),
            ("name", Optional),
        ],
    ),
    (
        "io.k8s.api.core.v1.SecretVolumeSource",
        &[
            ("items", ListType("atomic")),
        ],
    ),
    (
        "io.k8s.api.core.v1.TopologySpreadConstraint",
        &[
            ("matchLabelKeys", ListType("atomic")),
        ],
    ),
    (
        "io.k8s.api.core.v1.TypedLocalObjectReference",
        &[
            ("", MapType("atomic")),
        ],
    ),
    (
        "io.k8s.api.rbac.v1.PolicyRule",
        &[
            ("apiGroups", ListType("atomic")),
            ("nonResourceURLs", ListType("atomic")),
            ("resourceNames", ListType("atomic")),
            ("resources", ListType("atomic")),
            ("verbs", ListType("atomic")),
        ],
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector",
        &[
            ("", MapType("atomic")),
            ("matchExpressions", ListType("atomic")),
        ],
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelectorRequirement",
        &[
            ("values", ListType("atomic")),
        ],
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        &[
            ("finalizers", ListType("set")),
            ("managedFields", ListType("atomic")),
            ("ownerReferences", ListType("map")),
            ("ownerReferences", ListMapKeys(&["uid"])),
        ],
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference",
        &[
            ("", MapType("atomic")),
        ],
    ),

];
