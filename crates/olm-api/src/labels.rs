//! Well-known label keys, annotation keys, finalizers and name prefixes that OLM
//! writes or reads, with exactly upstream's spelling.
//!
//! Every constant says who writes it and what it means, so a reader who meets
//! one of these keys on a cluster object can find out why it is there. Keys that
//! end in `/` or `.` are prefixes; the functions below build the full keys.

// ---------------------------------------------------------------------------
// Ownership and management
// ---------------------------------------------------------------------------

/// Label `olm.managed`, value [`MANAGED_VALUE`]. Written by every OLM component on
/// every object it creates. OLM's informers for Deployments, Services, RBAC,
/// ConfigMaps, CRDs, APIServices and webhook configurations only see objects
/// with this label, so an object without it is invisible to OLM.
pub const MANAGED: &str = "olm.managed";

/// The value of [`MANAGED`] on OLM-managed objects.
pub const MANAGED_VALUE: &str = "true";

/// Label `olm.owner`: name of the owning ClusterServiceVersion (or OperatorGroup).
/// Written by olm-operator on cluster-scoped or cross-namespace objects, where an
/// ownerReference cannot be used (ClusterRoles, bindings, webhook configurations,
/// APIServices, Deployments).
pub const OWNER: &str = "olm.owner";

/// Label `olm.owner.namespace`: namespace of the owner named by [`OWNER`].
/// Written together with [`OWNER`].
pub const OWNER_NAMESPACE: &str = "olm.owner.namespace";

/// Label `olm.owner.kind`: kind of the owner named by [`OWNER`]
/// (`ClusterServiceVersion` or `OperatorGroup`). Written together with [`OWNER`].
pub const OWNER_KIND: &str = "olm.owner.kind";

/// Finalizer `operators.coreos.com/csv-cleanup`. Added by olm-operator to every
/// non-copied CSV; on deletion OLM removes the cluster-scoped objects carrying the
/// CSV's owner labels, waits for them to be gone, then drops the finalizer.
pub const CSV_CLEANUP_FINALIZER: &str = "operators.coreos.com/csv-cleanup";

/// Label `olm.copiedFrom`: namespace of the parent CSV. Written by olm-operator on
/// copied CSVs (and on Roles/RoleBindings copied into target namespaces). The main
/// CSV informer excludes objects with this label (`!olm.copiedFrom`).
pub const COPIED_FROM: &str = "olm.copiedFrom";

/// Annotation `$copyhash-spec`: hash of the parent CSV's spec, written by
/// olm-operator on copied CSVs so that no-op copy updates are skipped.
pub const COPY_HASH_SPEC: &str = "$copyhash-spec";

/// Annotation `$copyhash-status`: hash of the parent CSV's status, written by
/// olm-operator on copied CSVs so that no-op copy updates are skipped.
pub const COPY_HASH_STATUS: &str = "$copyhash-status";

/// Annotation `kubectl.kubernetes.io/last-applied-configuration`, written by
/// `kubectl apply`. olm-operator leaves it out of copied CSVs.
pub const KUBECTL_LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

// ---------------------------------------------------------------------------
// OperatorGroup membership (on CSVs and OperatorGroups)
// ---------------------------------------------------------------------------

/// Annotation `olm.operatorGroup`: name of the OperatorGroup a CSV belongs to.
/// Written by olm-operator on member CSVs; copied to the operator's pod templates.
pub const OPERATOR_GROUP: &str = "olm.operatorGroup";

/// Annotation `olm.operatorNamespace`: namespace of the OperatorGroup a CSV belongs
/// to. Written by olm-operator on member CSVs; copied to pod templates.
pub const OPERATOR_NAMESPACE: &str = "olm.operatorNamespace";

/// Annotation `olm.targetNamespaces`: sorted, comma-separated namespaces the
/// operator watches (`""` means all namespaces). Written by olm-operator on member
/// CSVs and copied to pod templates; operators read it to know what to watch.
pub const TARGET_NAMESPACES: &str = "olm.targetNamespaces";

/// Annotation `olm.providedAPIs`: sorted, comma-separated `Kind.version.group`
/// list of the APIs provided by the CSVs of an OperatorGroup. Written by
/// olm-operator on OperatorGroups; used to detect intersecting groups.
pub const PROVIDED_APIS: &str = "olm.providedAPIs";

/// Label prefix `olm.operatorgroup.uid/`; the full key is
/// `olm.operatorgroup.uid/<OperatorGroup uid>` with value `""`. Written by
/// olm-operator on every namespace targeted by a non-AllNamespaces OperatorGroup;
/// webhook namespaceSelectors select on it. Build keys with
/// [`operator_group_uid_label`].
pub const OPERATOR_GROUP_UID_PREFIX: &str = "olm.operatorgroup.uid/";

/// Label prefix `olm.opgroup.permissions/aggregate-to-`; the full key is
/// `olm.opgroup.permissions/aggregate-to-<fnv64a hex of Kind.version.group>-<admin|edit|view>`.
/// Written by olm-operator on per-API ClusterRoles so that an OperatorGroup's
/// aggregate ClusterRoles pick them up.
pub const OPERATOR_GROUP_AGGREGATE_PREFIX: &str = "olm.opgroup.permissions/aggregate-to-";

/// Name prefix `olm.og.` of the aggregate ClusterRoles olm-operator creates per
/// OperatorGroup: `olm.og.<og name>.<admin|edit|view>-<hash>`.
pub const OPERATOR_GROUP_CLUSTER_ROLE_PREFIX: &str = "olm.og.";

/// Annotation `olm.operatorframework.io/exclude-global-namespace-resolution`. Set by
/// users on an OperatorGroup to `"true"` to leave the global catalog namespace out
/// of resolution for that namespace. Read by catalog-operator.
pub const EXCLUDE_GLOBAL_NAMESPACE_RESOLUTION: &str =
    "olm.operatorframework.io/exclude-global-namespace-resolution";

/// Annotation `operatorframework.io/bundle-unpack-timeout`. Set by users on an
/// OperatorGroup (Go duration, `0` = no deadline) to override the bundle unpack
/// timeout for that namespace. Read by catalog-operator.
pub const BUNDLE_UNPACK_TIMEOUT: &str = "operatorframework.io/bundle-unpack-timeout";

/// Annotation `operatorframework.io/bundle-unpack-min-retry-interval`. Set by users
/// on an OperatorGroup (Go duration) to retry failed bundle unpacks after at least
/// this interval. Read by catalog-operator.
pub const BUNDLE_UNPACK_MIN_RETRY_INTERVAL: &str =
    "operatorframework.io/bundle-unpack-min-retry-interval";

// ---------------------------------------------------------------------------
// CSV install and APIs
// ---------------------------------------------------------------------------

/// Label prefix `olm.api.`; the full key is `olm.api.<fnv64a hex of Kind.version.group>`
/// with value [`API_PROVIDED`] or [`API_REQUIRED`]. Written by olm-operator on CSVs
/// so that the providers and consumers of an API can be listed by label. Build keys
/// with [`api_label_key`].
pub const API_LABEL_PREFIX: &str = "olm.api.";

/// Value of an [`API_LABEL_PREFIX`] label on a CSV that provides the API.
pub const API_PROVIDED: &str = "provided";

/// Value of an [`API_LABEL_PREFIX`] label on a CSV that requires the API.
pub const API_REQUIRED: &str = "required";

/// Annotation `operatorframework.io/properties`: JSON `{"properties":[{"type","value"}…]}`
/// with the bundle's properties. Written by catalog-operator on resolved CSVs; the
/// resolver reads it back for installed operators.
pub const PROPERTIES: &str = "operatorframework.io/properties";

/// Annotation `olm.skipRange`: a semver range of versions this CSV can upgrade
/// from. Written by bundle authors on the CSV; read by the registry and resolver.
pub const SKIP_RANGE: &str = "olm.skipRange";

/// Label `olm.deployment-spec-hash`: hash of the final Deployment spec. Written by
/// olm-operator on install Deployments; a mismatch makes the CSV re-apply them.
pub const DEPLOYMENT_SPEC_HASH: &str = "olm.deployment-spec-hash";

/// Label `olm.permissions.hash`: hash of a permission set. Written by
/// catalog-operator on the Roles/ClusterRoles (and bindings) it creates from CSV
/// permissions; olm-operator finds them by it when checking requirements.
pub const PERMISSIONS_HASH: &str = "olm.permissions.hash";

/// Label `olm.webhook-description-generate-name`: the CSV webhook definition's
/// `generateName`. Written by olm-operator on the webhook configurations it creates.
pub const WEBHOOK_DESCRIPTION_GENERATE_NAME: &str = "olm.webhook-description-generate-name";

/// Annotation `olmcahash`: hex SHA-256 of the CA PEM. Written by olm-operator on
/// serving-certificate Secrets and on the pod template of the Deployment that uses
/// them, so that a new CA rolls the pods.
pub const CA_HASH: &str = "olmcahash";

/// Annotation prefix `operatorframework.io/installed-alongside-`; the full key is
/// `operatorframework.io/installed-alongside-<fnv64a hex>` with value `<ns>/<csv>`.
/// Written by catalog-operator on CRDs it installs, to record which CSVs a CRD was
/// installed with.
pub const INSTALLED_ALONGSIDE_PREFIX: &str = "operatorframework.io/installed-alongside-";

/// Environment variable `OPERATOR_CONDITION_NAME`, injected by olm-operator into
/// every container of a CSV's Deployments; names the operator's OperatorCondition.
pub const OPERATOR_CONDITION_NAME_ENV: &str = "OPERATOR_CONDITION_NAME";

/// Server-side-apply field manager `olm.install`, used by olm-operator for the
/// Services it creates for APIServices and webhooks.
pub const INSTALL_FIELD_MANAGER: &str = "olm.install";

// ---------------------------------------------------------------------------
// Subscriptions, InstallPlans and the Operator object
// ---------------------------------------------------------------------------

/// Annotation `olm.generated-by`: name of the InstallPlan that created a dependency
/// Subscription. Written by catalog-operator on Subscriptions it creates.
pub const GENERATED_BY: &str = "olm.generated-by";

/// Label prefix `operators.coreos.com/`; the full key is `operators.coreos.com/<operator name>`
/// with value `""`. Written by olm-operator's adoption controller on every component
/// of an operator; the Operator object selects its components by it. Build keys
/// with [`operator_component_label`].
pub const OPERATOR_COMPONENT_PREFIX: &str = "operators.coreos.com/";

// ---------------------------------------------------------------------------
// Catalogs
// ---------------------------------------------------------------------------

/// Label `olm.catalogSource`: name of the CatalogSource a registry pod serves.
/// Written by catalog-operator on registry pods (`""` on an update pod that is not
/// yet promoted).
pub const CATALOG_SOURCE: &str = "olm.catalogSource";

/// Label `catalogsource.operators.coreos.com/update`: name of the CatalogSource an
/// update pod polls for. Written by catalog-operator on registry update pods.
pub const CATALOG_SOURCE_UPDATE: &str = "catalogsource.operators.coreos.com/update";

/// Annotation `olm.promotionGuard` (ours). `"true"` on a CatalogSource puts
/// its content switches behind catalog-operator's promotion guard: new
/// content serves only once its registry answers and every bundle image it
/// names is inside the allowed-registries policy. Set by users, and by
/// marketplace-operator on the default catalogs.
pub const PROMOTION_GUARD: &str = "olm.promotionGuard";

/// Annotation `olm.catalogImageTemplate`. Set by users on a CatalogSource with
/// `{kube_major_version}`, `{kube_minor_version}`, `{kube_patch_version}`
/// placeholders; catalog-operator resolves it into `spec.image`.
pub const CATALOG_IMAGE_TEMPLATE: &str = "olm.catalogImageTemplate";

/// Annotation `operatorframework.io/priorityclass`. Set by users on a
/// CatalogSource; overrides the registry pod's priorityClassName.
pub const CATALOG_PRIORITY_CLASS: &str = "operatorframework.io/priorityclass";

/// Label `olm.pod-spec-hash`: hash of a registry pod's spec. Written by
/// catalog-operator; a mismatch makes it replace the pod.
pub const POD_SPEC_HASH: &str = "olm.pod-spec-hash";

/// Label `olm.service-spec-hash`: hash of a registry Service's spec. Written by
/// catalog-operator; a mismatch makes it replace the Service.
pub const SERVICE_SPEC_HASH: &str = "olm.service-spec-hash";

/// Label `olm.configMapResourceVersion`: resourceVersion of the ConfigMap a
/// configmap-type registry pod serves. Written by catalog-operator.
pub const CONFIG_MAP_RESOURCE_VERSION: &str = "olm.configMapResourceVersion";

/// Label `operatorframework.io/bundle-unpack-ref`: name of the bundle unpack Job.
/// Written by catalog-operator on unpack Jobs; the unpack NetworkPolicy selects on it.
pub const BUNDLE_UNPACK_REF: &str = "operatorframework.io/bundle-unpack-ref";

/// Annotation `olm.sourceImage`: the bundle image a bundle ConfigMap was unpacked
/// from. Written by the unpacker on bundle ConfigMaps.
pub const SOURCE_IMAGE: &str = "olm.sourceImage";

/// Annotation `olm.contentEncoding` (value `gzip+base64` when the files are in
/// `binaryData`). Written by the unpacker on bundle ConfigMaps.
pub const CONTENT_ENCODING: &str = "olm.contentEncoding";

/// Annotation `cluster-autoscaler.kubernetes.io/safe-to-evict`, set to `"true"` by
/// catalog-operator on registry pods.
pub const SAFE_TO_EVICT: &str = "cluster-autoscaler.kubernetes.io/safe-to-evict";

/// Namespace label `pod-security.kubernetes.io/enforce`; when it is `restricted`
/// and a CatalogSource sets no securityContextConfig, registry pods are restricted.
pub const POD_SECURITY_ENFORCE: &str = "pod-security.kubernetes.io/enforce";

/// Bundle metadata annotation keys (`metadata/annotations.yaml`), also written by
/// the unpacker on bundle ConfigMaps.
pub mod bundle {
    /// `operators.operatorframework.io.bundle.manifests.v1`: directory of the manifests.
    pub const MANIFESTS: &str = "operators.operatorframework.io.bundle.manifests.v1";
    /// `operators.operatorframework.io.bundle.metadata.v1`: directory of the metadata.
    pub const METADATA: &str = "operators.operatorframework.io.bundle.metadata.v1";
    /// `operators.operatorframework.io.bundle.mediatype.v1`: bundle format (`registry+v1`).
    pub const MEDIATYPE: &str = "operators.operatorframework.io.bundle.mediatype.v1";
    /// `operators.operatorframework.io.bundle.package.v1`: package name.
    pub const PACKAGE: &str = "operators.operatorframework.io.bundle.package.v1";
    /// `operators.operatorframework.io.bundle.channels.v1`: comma-separated channels.
    pub const CHANNELS: &str = "operators.operatorframework.io.bundle.channels.v1";
    /// `operators.operatorframework.io.bundle.channel.default.v1`: default channel.
    pub const CHANNEL_DEFAULT: &str = "operators.operatorframework.io.bundle.channel.default.v1";
}

/// PackageManifest labels written by packageserver.
pub mod package_manifest {
    /// Label `catalog`: name of the CatalogSource the package comes from.
    pub const CATALOG: &str = "catalog";
    /// Label `catalog-namespace`: namespace of that CatalogSource.
    pub const CATALOG_NAMESPACE: &str = "catalog-namespace";
    /// Label `provider`: the provider name of the default channel's CSV.
    pub const PROVIDER: &str = "provider";
    /// Label `provider-url`: the provider URL of the default channel's CSV.
    pub const PROVIDER_URL: &str = "provider-url";
    /// Label `operatorframework.io/os.linux` = `supported`, added when the CSV names no OS.
    pub const OS_LINUX: &str = "operatorframework.io/os.linux";
    /// Label `operatorframework.io/arch.amd64` = `supported`, added when the CSV names no architecture.
    pub const ARCH_AMD64: &str = "operatorframework.io/arch.amd64";
    /// The value of the OS and architecture labels.
    pub const SUPPORTED: &str = "supported";
}

/// Bundle and catalog property types (`properties[].type`), as written by bundle
/// authors and `opm` and read by the resolver.
pub mod property_type {
    /// `olm.package`: `{packageName, version}` of the bundle itself.
    pub const PACKAGE: &str = "olm.package";
    /// `olm.gvk`: an API the bundle provides, `{group, version, kind}`.
    pub const GVK: &str = "olm.gvk";
    /// `olm.gvk.required`: an API the bundle needs another bundle to provide.
    pub const GVK_REQUIRED: &str = "olm.gvk.required";
    /// `olm.package.required`: `{packageName, versionRange}` the bundle depends on.
    pub const PACKAGE_REQUIRED: &str = "olm.package.required";
    /// `olm.label`: a free label another bundle can require.
    pub const LABEL: &str = "olm.label";
    /// `olm.label.required`: a label the bundle needs another bundle to carry.
    pub const LABEL_REQUIRED: &str = "olm.label.required";
    /// `olm.constraint`: a generic constraint (gvk, package, all, any, not, cel).
    pub const CONSTRAINT: &str = "olm.constraint";
    /// `olm.deprecated`: legacy marker that makes a bundle uninstallable.
    pub const DEPRECATED: &str = "olm.deprecated";
    /// `olm.maxOpenShiftVersion`: highest OpenShift version the operator supports.
    pub const MAX_OPENSHIFT_VERSION: &str = "olm.maxOpenShiftVersion";
    /// `olm.csv.metadata`: CSV metadata carried in an FBC bundle without a CSV.
    pub const CSV_METADATA: &str = "olm.csv.metadata";
}

// ---------------------------------------------------------------------------
// Key builders
// ---------------------------------------------------------------------------

/// FNV-1a, 64 bit, over `bytes` (the hash OLM uses for API label keys).
pub fn fnv1a_64(bytes: &[u8]) -> u64 {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes.iter().fold(OFFSET_BASIS, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(PRIME)
    })
}

/// Hex form of FNV-1a 64 of `Kind.version.group`, as upstream's
/// `strconv.FormatUint(hash, 16)` writes it: lowercase and not zero-padded.
pub fn api_hash(kind: &str, version: &str, group: &str) -> String {
    let key = format!("{kind}.{version}.{group}");
    format!("{:x}", fnv1a_64(key.as_bytes()))
}

/// The `olm.api.<hash>` label key for an API (see [`API_LABEL_PREFIX`]).
pub fn api_label_key(kind: &str, version: &str, group: &str) -> String {
    format!("{API_LABEL_PREFIX}{}", api_hash(kind, version, group))
}

/// The `olm.operatorgroup.uid/<uid>` namespace label key (see [`OPERATOR_GROUP_UID_PREFIX`]).
pub fn operator_group_uid_label(uid: &str) -> String {
    format!("{OPERATOR_GROUP_UID_PREFIX}{uid}")
}

/// The `operators.coreos.com/<name>` component label key for an Operator object
/// (see [`OPERATOR_COMPONENT_PREFIX`]). Like upstream, a name longer than 63
/// characters is cut to 63 and then stripped of trailing `.`, `_` and `-`, so
/// the key stays a valid label key.
pub fn operator_component_label(operator_name: &str) -> String {
    let name = if operator_name.chars().count() > 63 {
        let cut: String = operator_name.chars().take(63).collect();
        cut.trim_end_matches(['.', '_', '-']).to_owned()
    } else {
        operator_name.to_owned()
    };
    format!("{OPERATOR_COMPONENT_PREFIX}{name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_64_matches_published_vectors() {
        // Vectors from the FNV reference test suite (Fowler/Noll/Vo).
        assert_eq!(fnv1a_64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a_64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a_64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn api_label_key_hashes_kind_version_group() {
        // Computed independently from the FNV-1a definition (offset basis
        // cbf29ce484222325, prime 100000001b3, xor then multiply per byte) by an
        // implementation checked against the published vectors above.
        assert_eq!(
            api_label_key("EtcdCluster", "v1beta2", "etcd.database.coreos.com"),
            "olm.api.c571d720f17289d3"
        );
        assert_eq!(
            api_label_key("PackageManifest", "v1", "packages.operators.coreos.com"),
            "olm.api.4bca9f23e412d79d"
        );
    }

    #[test]
    fn api_hash_is_not_zero_padded() {
        // This hash has a leading zero nibble; Go's FormatUint drops it.
        assert_eq!(api_hash("Widget12", "v1", "example.com"), "1dd888e67357b5a");
    }

    #[test]
    fn component_label_is_cut_and_trimmed() {
        assert_eq!(
            operator_component_label("etcd.my-ns"),
            "operators.coreos.com/etcd.my-ns"
        );
        let long = format!("{}-.x", "a".repeat(61));
        assert_eq!(
            operator_component_label(&long),
            format!("operators.coreos.com/{}", "a".repeat(61))
        );
        // Names that fit are used as they are.
        assert_eq!(
            operator_component_label("gizmo"),
            "operators.coreos.com/gizmo"
        );
    }

    #[test]
    fn uid_label_uses_prefix() {
        assert_eq!(
            operator_group_uid_label("1234"),
            "olm.operatorgroup.uid/1234"
        );
    }
}
