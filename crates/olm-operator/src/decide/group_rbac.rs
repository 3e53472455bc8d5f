//! RBAC that follows from OperatorGroup membership, beyond the CSV's own
//! Roles and ClusterRoles ([`crate::decide::rbac`]):
//!
//! - the group's aggregated `admin`, `edit` and `view` ClusterRoles, which
//!   gather the per-API roles of every API the group provides
//!   ([`operator_group_cluster_roles`]);
//! - per provided API, `admin`/`edit`/`view` ClusterRoles (plus `crdview` for
//!   CRDs) labelled to aggregate into both Kubernetes' default roles and the
//!   group's roles ([`provided_api_cluster_roles`] for owned CRDs,
//!   [`api_service_cluster_roles`] for owned APIServices);
//! - for groups targeting other namespaces, the operator's Roles and
//!   RoleBindings copied into each target namespace
//!   ([`target_namespace_rbac`]); for groups targeting all namespaces, the
//!   same lifted to ClusterRoles and ClusterRoleBindings
//!   ([`lifted_cluster_rbac`]).
//!
//! Upstream: `ensureOpGroupClusterRole(s)`, `getClusterRoleName`,
//! `ensureProvidedAPIClusterRole`, `ensureClusterRolesForCSV`,
//! `ensureTenantRBAC` and `ensureSingletonRBAC` in `operatorgroup.go`.
//!
//! Deliberate differences:
//!
//! - Upstream copies Roles into a target namespace, or lifts them to the
//!   cluster, only where an RBAC authorizer says the operator's service
//!   account lacks the permission. This service has no authorizer, so the
//!   copies are always made; the operator ends up with exactly the access its
//!   CSV asks for in each target namespace, as it would on a cluster where no
//!   other grant exists.
//! - Per-API ClusterRoles of a CRD carry an ownerReference of kind
//!   `CustomResourceDefinition`; upstream writes the kind in lower case,
//!   which the garbage collector does not resolve.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::rbac::v1::{
        AggregationRule, ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef,
    },
    apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference},
};
use olm_api::{
    csv::ClusterServiceVersion,
    labels,
    operator_group::OperatorGroup,
    ownership::{non_blocking_owner, owner_labels},
};

use super::{
    api_surface::{ApiKey, ApiSet},
    hash::sha224_base62,
    rbac::RBAC_GROUP,
};

/// Suffix of the aggregated role for namespace administrators.
pub const ADMIN_SUFFIX: &str = "admin";
/// Suffix of the aggregated role for editors.
pub const EDIT_SUFFIX: &str = "edit";
/// Suffix of the aggregated role for viewers.
pub const VIEW_SUFFIX: &str = "view";

/// The three suffixes, in upstream's order.
pub const SUFFIXES: [&str; 3] = [ADMIN_SUFFIX, EDIT_SUFFIX, VIEW_SUFFIX];

/// The verbs each suffix grants on a provided API.
pub fn verbs_for(suffix: &str) -> &'static [&'static str] {
    match suffix {
        ADMIN_SUFFIX => &["*"],
        EDIT_SUFFIX => &["create", "update", "patch", "delete"],
        _ => &["get", "list", "watch"],
    }
}

/// The longest name of a Kubernetes object (a DNS subdomain).
pub const KUBE_RESOURCE_NAME_LIMIT: usize = 253;

/// The fixed characters of `olm.og.<group>.<suffix>-<hash>`.
const GROUP_ROLE_NAME_FIXED: &str = "olm.og..-";

/// The owner labels of objects an OperatorGroup owns (`olm.owner.kind` is
/// `OperatorGroup`).
pub fn group_owner_labels(group: &OperatorGroup) -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            labels::OWNER.to_owned(),
            group.metadata.name.clone().unwrap_or_default(),
        ),
        (
            labels::OWNER_NAMESPACE.to_owned(),
            group.metadata.namespace.clone().unwrap_or_default(),
        ),
        (labels::OWNER_KIND.to_owned(), "OperatorGroup".to_owned()),
    ])
}

/// The name of a group's aggregated ClusterRole:
/// `olm.og.<group>.<suffix>-<base62(sha224("<ns>/<group>/<suffix>"))>`, the
/// group name cut so the whole fits 253 characters (upstream's
/// `getClusterRoleName`).
pub fn group_cluster_role_name(group: &OperatorGroup, suffix: &str) -> String {
    let namespace = group.metadata.namespace.as_deref().unwrap_or_default();
    let name = group.metadata.name.as_deref().unwrap_or_default();
    let hash = sha224_base62(format!("{namespace}/{name}/{suffix}").as_bytes());
    let limit = KUBE_RESOURCE_NAME_LIMIT
        .saturating_sub(GROUP_ROLE_NAME_FIXED.len())
        .saturating_sub(suffix.len())
        .saturating_sub(hash.len());
    let mut shown = name;
    if shown.len() >= limit {
        let mut cut = limit;
        while !shown.is_char_boundary(cut) {
            cut -= 1;
        }
        shown = &shown[..cut];
    }
    format!("olm.og.{shown}.{suffix}-{hash}")
}

/// The label by which a per-API role joins a group's aggregated role:
/// `olm.opgroup.permissions/aggregate-to-<fnv64a-hex(Kind.version.group)>-<suffix>`.
pub fn aggregation_label(api: &ApiKey, suffix: &str) -> String {
    format!(
        "{}{}-{suffix}",
        labels::OPERATOR_GROUP_AGGREGATE_PREFIX,
        labels::api_hash(&api.kind, &api.version, &api.group)
    )
}

/// The aggregation rule of a group's role for these APIs: one selector per
/// API, sorted by label so that an unchanged set never causes a write; none
/// when the group provides nothing.
pub fn aggregation_rule(apis: &ApiSet, suffix: &str) -> Option<AggregationRule> {
    if apis.is_empty() {
        return None;
    }
    let mut keys: Vec<String> = apis.iter().map(|a| aggregation_label(a, suffix)).collect();
    keys.sort();
    keys.dedup();
    Some(AggregationRule {
        cluster_role_selectors: Some(
            keys.into_iter()
                .map(|key| LabelSelector {
                    match_labels: Some(BTreeMap::from([(key, "true".to_owned())])),
                    match_expressions: None,
                })
                .collect(),
        ),
    })
}

/// The group's `admin`, `edit` and `view` ClusterRoles for the APIs it
/// provides: owner labels of the group, `olm.managed=true`, and the
/// aggregation rule (the rules themselves are filled in by Kubernetes'
/// aggregation controller, so they are never written here).
pub fn operator_group_cluster_roles(group: &OperatorGroup, apis: &ApiSet) -> Vec<ClusterRole> {
    SUFFIXES
        .iter()
        .map(|suffix| {
            let mut role_labels = group_owner_labels(group);
            role_labels.insert(labels::MANAGED.to_owned(), labels::MANAGED_VALUE.to_owned());
            ClusterRole {
                metadata: ObjectMeta {
                    name: Some(group_cluster_role_name(group, suffix)),
                    labels: Some(role_labels),
                    ..Default::default()
                },
                aggregation_rule: aggregation_rule(apis, suffix),
                rules: None,
            }
        })
        .collect()
}

/// Whether an existing group role must be written: it lacks one of the
/// desired labels, or its aggregation rule differs (upstream's check).
pub fn group_role_needs_write(existing: &ClusterRole, desired: &ClusterRole) -> bool {
    let have = existing.metadata.labels.clone().unwrap_or_default();
    let missing_label = desired
        .metadata
        .labels
        .iter()
        .flatten()
        .any(|(key, value)| have.get(key) != Some(value));
    missing_label || existing.aggregation_rule != desired.aggregation_rule
}

/// What the per-API roles of a CSV need to know of its owned CRDs: their
/// uids, by name.
pub type CrdUids = BTreeMap<String, String>;

/// What the per-API roles of a CSV need to know of its owned APIServices:
/// their uids, by APIService name (`<version>.<group>`).
pub type ApiServiceUids = BTreeMap<String, String>;

/// Why per-API roles cannot be built yet.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ApiRoleError {
    /// An owned CRD is not in the cluster (upstream: `crd "<name>" not
    /// found`).
    #[error("crd {0:?} not found")]
    CrdNotFound(String),
    /// An owned CRD's name is not `<plural>.<group>`.
    #[error("invalid parsing of name '{0}'")]
    InvalidName(String),
    /// An owned APIService is not in the cluster (upstream: `apiservice
    /// "<version>.<group>" not found`).
    #[error("apiservice {0:?} not found")]
    ApiServiceNotFound(String),
}

fn crd_owner(name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: "apiextensions.k8s.io/v1".to_owned(),
        kind: "CustomResourceDefinition".to_owned(),
        name: name.to_owned(),
        uid: uid.to_owned(),
        block_owner_deletion: Some(false),
        controller: Some(false),
    }
}

fn api_service_owner(name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: "apiregistration.k8s.io/v1".to_owned(),
        kind: "APIService".to_owned(),
        name: name.to_owned(),
        uid: uid.to_owned(),
        block_owner_deletion: Some(false),
        controller: Some(false),
    }
}

fn api_role(
    name: String,
    suffix: &str,
    rule: PolicyRule,
    api: &ApiKey,
    owner: OwnerReference,
) -> ClusterRole {
    ClusterRole {
        metadata: ObjectMeta {
            name: Some(name),
            labels: Some(BTreeMap::from([
                (
                    format!("rbac.authorization.k8s.io/aggregate-to-{suffix}"),
                    "true".to_owned(),
                ),
                (aggregation_label(api, suffix), "true".to_owned()),
                (labels::MANAGED.to_owned(), labels::MANAGED_VALUE.to_owned()),
            ])),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        rules: Some(vec![rule]),
        aggregation_rule: None,
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// The per-API ClusterRoles of a CSV's owned CRDs: for each,
/// `<crd name>-<version>-admin|edit|view` on `<plural>` in its group and
/// `<crd name>-<version>-crdview` (get on the CRD itself), each labelled to
/// aggregate into Kubernetes' `admin`/`edit`/`view` and into the group roles,
/// owned (non-blocking) by the CRD. Owned APIServices get theirs from
/// [`api_service_cluster_roles`].
pub fn provided_api_cluster_roles(
    csv: &ClusterServiceVersion,
    crd_uids: &CrdUids,
) -> Result<Vec<ClusterRole>, ApiRoleError> {
    let mut roles = Vec::new();
    for owned in csv.spec.owned_crds() {
        let uid = crd_uids
            .get(&owned.name)
            .ok_or_else(|| ApiRoleError::CrdNotFound(owned.name.clone()))?;
        let (plural, group) = owned
            .name
            .split_once('.')
            .ok_or_else(|| ApiRoleError::InvalidName(owned.name.clone()))?;
        let api = ApiKey::new(group, &owned.version, &owned.kind);
        let prefix = format!("{}-{}-", owned.name, owned.version);
        for suffix in SUFFIXES {
            roles.push(api_role(
                format!("{prefix}{suffix}"),
                suffix,
                PolicyRule {
                    verbs: strings(verbs_for(suffix)),
                    api_groups: Some(vec![group.to_owned()]),
                    resources: Some(vec![plural.to_owned()]),
                    ..Default::default()
                },
                &api,
                crd_owner(&owned.name, uid),
            ));
        }
        roles.push(api_role(
            format!("{prefix}crd{VIEW_SUFFIX}"),
            VIEW_SUFFIX,
            PolicyRule {
                verbs: strings(&["get"]),
                api_groups: Some(vec!["apiextensions.k8s.io".to_owned()]),
                resources: Some(vec!["customresourcedefinitions".to_owned()]),
                resource_names: Some(vec![owned.name.clone()]),
                ..Default::default()
            },
            &api,
            crd_owner(&owned.name, uid),
        ));
    }
    Ok(roles)
}

/// The per-API ClusterRoles of a CSV's owned APIServices (upstream's second
/// loop of `ensureClusterRolesForCSV`): for each,
/// `<name>-<version>-admin|edit|view` on the resource `<name>` (the
/// description's name is the resource's plural) in `<group>`, labelled like
/// the CRD roles and owned (non-blocking) by the APIService
/// `<version>.<group>`. No `crdview` role: there is no CRD to read.
pub fn api_service_cluster_roles(
    csv: &ClusterServiceVersion,
    api_service_uids: &ApiServiceUids,
) -> Result<Vec<ClusterRole>, ApiRoleError> {
    let mut roles = Vec::new();
    for owned in csv.spec.owned_api_services() {
        let service = format!("{}.{}", owned.version, owned.group);
        let uid = api_service_uids
            .get(&service)
            .ok_or_else(|| ApiRoleError::ApiServiceNotFound(service.clone()))?;
        let api = ApiKey::new(&owned.group, &owned.version, &owned.kind);
        let prefix = format!("{}-{}-", owned.name, owned.version);
        for suffix in SUFFIXES {
            roles.push(api_role(
                format!("{prefix}{suffix}"),
                suffix,
                PolicyRule {
                    verbs: strings(verbs_for(suffix)),
                    api_groups: Some(vec![owned.group.clone()]),
                    resources: Some(vec![owned.name.clone()]),
                    ..Default::default()
                },
                &api,
                api_service_owner(&service, uid),
            ));
        }
    }
    Ok(roles)
}

/// Whether an existing per-API role must be written: rules or labels differ,
/// or the owner is missing (upstream's check).
pub fn api_role_needs_write(existing: &ClusterRole, desired: &ClusterRole) -> bool {
    let owned = desired
        .metadata
        .owner_references
        .iter()
        .flatten()
        .all(|want| {
            existing
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|have| have.uid == want.uid)
        });
    existing.rules != desired.rules || existing.metadata.labels != desired.metadata.labels || !owned
}

/// The rule a lifted ClusterRole gets on top of the Role's: reading
/// namespaces, which an operator watching all namespaces needs.
pub fn namespace_view_rule() -> PolicyRule {
    PolicyRule {
        verbs: strings(verbs_for(VIEW_SUFFIX)),
        api_groups: Some(vec![String::new()]),
        resources: Some(vec!["namespaces".to_owned()]),
        ..Default::default()
    }
}

/// For a group targeting all namespaces: the CSV's Roles and RoleBindings
/// (those carrying its owner labels in its namespace) as same-named
/// ClusterRoles (with [`namespace_view_rule`] added) and ClusterRoleBindings,
/// keeping their labels, so that the finalizer's cleanup by owner labels
/// removes them (upstream's `ensureSingletonRBAC`; like upstream, they are
/// created once and never updated).
pub fn lifted_cluster_rbac(
    roles: &[Role],
    bindings: &[RoleBinding],
) -> (Vec<ClusterRole>, Vec<ClusterRoleBinding>) {
    let cluster_roles = roles
        .iter()
        .map(|role| {
            let mut rules = role.rules.clone().unwrap_or_default();
            rules.push(namespace_view_rule());
            ClusterRole {
                metadata: ObjectMeta {
                    name: role.metadata.name.clone(),
                    labels: role.metadata.labels.clone(),
                    ..Default::default()
                },
                rules: Some(rules),
                aggregation_rule: None,
            }
        })
        .collect();
    let cluster_bindings = bindings
        .iter()
        .map(|binding| ClusterRoleBinding {
            metadata: ObjectMeta {
                name: binding.metadata.name.clone(),
                labels: binding.metadata.labels.clone(),
                ..Default::default()
            },
            role_ref: RoleRef {
                api_group: binding.role_ref.api_group.clone(),
                kind: "ClusterRole".to_owned(),
                name: binding.role_ref.name.clone(),
            },
            subjects: binding.subjects.clone(),
        })
        .collect();
    (cluster_roles, cluster_bindings)
}

/// For a group targeting other namespaces: the CSV's Roles and RoleBindings
/// as they belong in `copy`'s namespace, owned by that copy (non-blocking
/// ownerReference and owner labels naming the copy), labelled
/// `olm.copiedFrom=<operator namespace>` and `olm.managed=true` (upstream's
/// `ensureTenantRBAC`).
pub fn target_namespace_rbac(
    copy: &ClusterServiceVersion,
    roles: &[Role],
    bindings: &[RoleBinding],
) -> (Vec<Role>, Vec<RoleBinding>) {
    let target = copy.metadata.namespace.clone().unwrap_or_default();
    let operator_namespace = copy
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(labels::COPIED_FROM))
        .cloned()
        .unwrap_or_default();
    let relabel = |source: &Option<BTreeMap<String, String>>| {
        let mut object_labels = source.clone().unwrap_or_default();
        object_labels.extend(owner_labels(copy));
        object_labels.insert(labels::COPIED_FROM.to_owned(), operator_namespace.clone());
        object_labels.insert(labels::MANAGED.to_owned(), labels::MANAGED_VALUE.to_owned());
        Some(object_labels)
    };
    let meta = |source: &ObjectMeta| ObjectMeta {
        name: source.name.clone(),
        namespace: Some(target.clone()),
        labels: relabel(&source.labels),
        owner_references: Some(vec![non_blocking_owner(copy)]),
        ..Default::default()
    };
    let copied_roles = roles
        .iter()
        .map(|role| Role {
            metadata: meta(&role.metadata),
            rules: role.rules.clone(),
        })
        .collect();
    let copied_bindings = bindings
        .iter()
        .map(|binding| RoleBinding {
            metadata: meta(&binding.metadata),
            role_ref: binding.role_ref.clone(),
            subjects: binding.subjects.clone(),
        })
        .collect();
    (copied_roles, copied_bindings)
}

/// Whether a copied Role must be written: missing, or its rules differ
/// (upstream updates only the rules of an existing one).
pub fn copied_role_needs_write(existing: Option<&Role>, desired: &Role) -> bool {
    existing.is_none_or(|existing| existing.rules != desired.rules)
}

/// Whether a RoleBinding refers to a Role of the RBAC API group (the only
/// kind OLM copies).
pub fn binds_role(binding: &RoleBinding) -> bool {
    binding.role_ref.kind == "Role" && binding.role_ref.api_group == RBAC_GROUP
}
