//! The RBAC objects a CSV's `permissions` and `clusterPermissions` turn into:
//! per service account a ServiceAccount, and per permission entry a Role and
//! RoleBinding (namespaced) or a ClusterRole and ClusterRoleBinding
//! (cluster-wide), named and labelled exactly as upstream does.
//!
//! Upstream: `RBACForClusterServiceVersion` in
//! `pkg/controller/registry/resolver/rbac.go` (run by catalog-operator when it
//! builds InstallPlan steps; olm-operator finds the objects again through
//! their `olm.permissions.hash` label when it checks requirements). Because the
//! names and hashes are part of that lookup, they are byte-for-byte upstream's:
//!
//! - `olm.permissions.hash` on a Role/ClusterRole is `base62(sha224(json(rules)))`
//!   ([`policy_rule_hash`]); on a binding it is
//!   `base62(sha224(json({RoleRef, Subjects})))` ([`role_binding_hash`]).
//! - A Role is named `<csv>-<serviceAccount>-<hash>`, a ClusterRole
//!   `<csv>-<hash>`, where the hash covers the CSV name (and namespace for
//!   ClusterRoles) and the permission; the prefix is cut so that prefix and hash
//!   fit 63 characters ([`generated_name`]). A binding has its role's name.
//!
//! JSON is written as Go's `encoding/json` writes it (see the private
//! `go_json` module). Every object also carries the CSV's owner labels and
//! `olm.managed=true`; namespaced ones a non-blocking ownerReference to the CSV.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::{
        core::v1::ServiceAccount,
        rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding, RoleRef, Subject},
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use olm_api::{
    csv::{ClusterServiceVersion, StrategyDeploymentPermissions, StrategyName},
    labels,
    ownership::{non_blocking_owner, owner_labels},
};

use crate::{go_json, hash::sha224_base62};

/// The install strategy cannot be used; the text is upstream's and follows
/// "install strategy invalid: " in the CSV message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidStrategy(pub String);

/// Checks that the CSV uses the one strategy OLM implements, `deployment`.
pub fn validate_strategy(csv: &ClusterServiceVersion) -> Result<(), InvalidStrategy> {
    if csv.spec.install.strategy == StrategyName::DEPLOYMENT {
        Ok(())
    } else {
        Err(InvalidStrategy("unrecognized install strategy".to_owned()))
    }
}

/// API group of RBAC objects.
pub const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// Longest name [`generated_name`] aims for.
pub const MAX_GENERATED_NAME_LENGTH: usize = 63;

/// The `olm.permissions.hash` of a Role or ClusterRole with these rules.
pub fn policy_rule_hash(rules: &[k8s_openapi::api::rbac::v1::PolicyRule]) -> String {
    let mut json = String::new();
    go_json::policy_rules(&mut json, rules);
    sha224_base62(json.as_bytes())
}

/// The `olm.permissions.hash` of a binding with this role reference and these
/// subjects.
pub fn role_binding_hash(role_ref: &RoleRef, subjects: &[Subject]) -> String {
    let mut json = String::from("{\"RoleRef\":");
    go_json::role_ref(&mut json, role_ref);
    json.push_str(",\"Subjects\":[");
    for (index, subject) in subjects.iter().enumerate() {
        if index > 0 {
            json.push(',');
        }
        go_json::subject(&mut json, subject);
    }
    json.push_str("]}");
    sha224_base62(json.as_bytes())
}

/// `<base>-<hash>`, with `base` cut when the two together exceed 63
/// characters (upstream's `generateName`; like upstream, a base and hash of
/// exactly 63 characters together give a 64-character name).
pub fn generated_name(base: &str, hash: &str) -> String {
    let mut base = base;
    if base.len() + hash.len() > MAX_GENERATED_NAME_LENGTH {
        let mut cut = MAX_GENERATED_NAME_LENGTH.saturating_sub(hash.len() + 1);
        while !base.is_char_boundary(cut) {
            cut -= 1;
        }
        base = &base[..cut];
    }
    format!("{base}-{hash}")
}

/// The hash in a Role's or ClusterRole's name: Go's `json.Encoder` output
/// (with its trailing newline) of `{"name":<csv>,"namespace":<ns>,
/// "permission":<permission>}`, empty fields left out (`omitempty`). A
/// Role's hash has no namespace: pass `""`.
fn name_hash(
    csv_name: &str,
    csv_namespace: &str,
    permission: &StrategyDeploymentPermissions,
) -> String {
    let mut json = String::from("{");
    for (key, value) in [("name", csv_name), ("namespace", csv_namespace)] {
        if !value.is_empty() {
            go_json::string(&mut json, key);
            json.push(':');
            go_json::string(&mut json, value);
            json.push(',');
        }
    }
    json.push_str("\"permission\":");
    go_json::permission(&mut json, permission);
    json.push_str("}\n");
    sha224_base62(json.as_bytes())
}

/// The RBAC objects for one service account.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OperatorPermissions {
    /// The service account, in the CSV's namespace, owned by the CSV.
    pub service_account: ServiceAccount,
    /// One Role per `permissions` entry for this account.
    pub roles: Vec<Role>,
    /// One RoleBinding per Role, same name.
    pub role_bindings: Vec<RoleBinding>,
    /// One ClusterRole per `clusterPermissions` entry for this account.
    pub cluster_roles: Vec<ClusterRole>,
    /// One ClusterRoleBinding per ClusterRole, same name.
    pub cluster_role_bindings: Vec<ClusterRoleBinding>,
}

fn labelled(csv: &ClusterServiceVersion, hash: String) -> BTreeMap<String, String> {
    let mut object_labels = owner_labels(csv);
    object_labels.insert(labels::MANAGED.to_owned(), labels::MANAGED_VALUE.to_owned());
    object_labels.insert(labels::PERMISSIONS_HASH.to_owned(), hash);
    object_labels
}

fn service_account_subject(name: &str, namespace: &str) -> Subject {
    Subject {
        kind: "ServiceAccount".to_owned(),
        api_group: None,
        name: name.to_owned(),
        namespace: Some(namespace.to_owned()),
    }
}

/// The RBAC objects for every service account of the CSV's strategy, by
/// service account name.
///
/// Upstream leaves the ServiceAccount of a `clusterPermissions`-only account
/// without a namespace (the InstallPlan step fills it in); here every
/// ServiceAccount is placed in the CSV's namespace. Whether to create the
/// `default` account is the caller's call (InstallPlans skip it).
pub fn rbac_for_csv(
    csv: &ClusterServiceVersion,
) -> Result<BTreeMap<String, OperatorPermissions>, InvalidStrategy> {
    validate_strategy(csv)?;
    let name = csv.metadata.name.clone().unwrap_or_default();
    let namespace = csv.metadata.namespace.clone().unwrap_or_default();
    let strategy = &csv.spec.install.spec;
    let mut by_account: BTreeMap<String, OperatorPermissions> = BTreeMap::new();
    let account = |by_account: &mut BTreeMap<String, OperatorPermissions>, account: &str| {
        by_account
            .entry(account.to_owned())
            .or_insert_with(|| OperatorPermissions {
                service_account: ServiceAccount {
                    metadata: ObjectMeta {
                        name: Some(account.to_owned()),
                        namespace: Some(namespace.clone()),
                        owner_references: Some(vec![non_blocking_owner(csv)]),
                        labels: Some(BTreeMap::from([(
                            labels::MANAGED.to_owned(),
                            labels::MANAGED_VALUE.to_owned(),
                        )])),
                        ..Default::default()
                    },
                    ..Default::default()
                },
                ..Default::default()
            });
    };

    for permission in strategy.permissions.iter().flatten() {
        let sa = &permission.service_account_name;
        account(&mut by_account, sa);
        let role_name = generated_name(&format!("{name}-{sa}"), &name_hash(&name, "", permission));
        let role = Role {
            metadata: ObjectMeta {
                name: Some(role_name.clone()),
                namespace: Some(namespace.clone()),
                owner_references: Some(vec![non_blocking_owner(csv)]),
                labels: Some(labelled(csv, policy_rule_hash(&permission.rules))),
                ..Default::default()
            },
            rules: Some(permission.rules.clone()),
        };
        let role_ref = RoleRef {
            api_group: RBAC_GROUP.to_owned(),
            kind: "Role".to_owned(),
            name: role_name.clone(),
        };
        let subjects = vec![service_account_subject(sa, &namespace)];
        let binding = RoleBinding {
            metadata: ObjectMeta {
                name: Some(role_name),
                namespace: Some(namespace.clone()),
                owner_references: Some(vec![non_blocking_owner(csv)]),
                labels: Some(labelled(csv, role_binding_hash(&role_ref, &subjects))),
                ..Default::default()
            },
            role_ref,
            subjects: Some(subjects),
        };
        if let Some(entry) = by_account.get_mut(sa) {
            entry.roles.push(role);
            entry.role_bindings.push(binding);
        }
    }

    for permission in strategy.cluster_permissions.iter().flatten() {
        let sa = &permission.service_account_name;
        account(&mut by_account, sa);
        let role_name = generated_name(&name, &name_hash(&name, &namespace, permission));
        let role = ClusterRole {
            metadata: ObjectMeta {
                name: Some(role_name.clone()),
                labels: Some(labelled(csv, policy_rule_hash(&permission.rules))),
                ..Default::default()
            },
            rules: Some(permission.rules.clone()),
            aggregation_rule: None,
        };
        let role_ref = RoleRef {
            api_group: RBAC_GROUP.to_owned(),
            kind: "ClusterRole".to_owned(),
            name: role_name.clone(),
        };
        let subjects = vec![service_account_subject(sa, &namespace)];
        let binding = ClusterRoleBinding {
            metadata: ObjectMeta {
                name: Some(role_name),
                labels: Some(labelled(csv, role_binding_hash(&role_ref, &subjects))),
                ..Default::default()
            },
            role_ref,
            subjects: Some(subjects),
        };
        if let Some(entry) = by_account.get_mut(sa) {
            entry.cluster_roles.push(role);
            entry.cluster_role_bindings.push(binding);
        }
    }
    Ok(by_account)
}

/// The label selector values olm-operator uses to find the Role (or
/// ClusterRole) OLM created for a permission: the CSV's owner labels plus
/// `olm.permissions.hash` of its rules (upstream's
/// `permissionsPreviouslyCreated`).
pub fn role_selector(
    csv: &ClusterServiceVersion,
    permission: &StrategyDeploymentPermissions,
) -> BTreeMap<String, String> {
    let mut selector = owner_labels(csv);
    selector.insert(
        labels::PERMISSIONS_HASH.to_owned(),
        policy_rule_hash(&permission.rules),
    );
    selector
}

/// The label selector values of the binding for `role_name` (kind `Role` or
/// `ClusterRole`) and the permission's service account.
pub fn binding_selector(
    csv: &ClusterServiceVersion,
    role_kind: &str,
    role_name: &str,
    service_account: &str,
) -> BTreeMap<String, String> {
    // Upstream hashes a RoleRef of kind "Role" even when it looks for a
    // ClusterRoleBinding, so a binding OLM created for a ClusterRole is never
    // found this way and the RBAC authorizer decides instead. The kind is
    // taken as given here; pass "Role" to reproduce upstream.
    let role_ref = RoleRef {
        api_group: RBAC_GROUP.to_owned(),
        kind: role_kind.to_owned(),
        name: role_name.to_owned(),
    };
    let namespace = csv.metadata.namespace.clone().unwrap_or_default();
    let subjects = [service_account_subject(service_account, &namespace)];
    let mut selector = owner_labels(csv);
    selector.insert(
        labels::PERMISSIONS_HASH.to_owned(),
        role_binding_hash(&role_ref, &subjects),
    );
    selector
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::rbac::v1::PolicyRule;

    use super::*;

    fn rules() -> Vec<PolicyRule> {
        vec![
            PolicyRule {
                verbs: vec!["get".into(), "list".into()],
                api_groups: Some(vec![String::new()]),
                resources: Some(vec!["configmaps".into()]),
                ..Default::default()
            },
            PolicyRule {
                verbs: vec!["*".into()],
                api_groups: Some(vec!["gadgets.example.test".into()]),
                resources: Some(vec!["widgets".into(), "widgets/status".into()]),
                resource_names: Some(vec!["a<b&c>".into()]),
                ..Default::default()
            },
            PolicyRule {
                verbs: vec!["get".into()],
                non_resource_urls: Some(vec!["/healthz".into()]),
                ..Default::default()
            },
        ]
    }

    // Every expected value below was computed by upstream's Go code
    // (PolicyRuleHashLabelValue, RoleReferenceAndSubjectHashLabelValue,
    // generateName with DeepHashObject) on the same input.

    #[test]
    fn permission_hashes_match_upstream() {
        assert_eq!(
            policy_rule_hash(&rules()),
            "b4hArWoIRu4LArdV9KKA6NqD6TxstLqgeOV3MD"
        );
        let role_ref = RoleRef {
            api_group: RBAC_GROUP.into(),
            kind: "Role".into(),
            name: "widget-role".into(),
        };
        let subjects = [service_account_subject("widget-sa", "gadget-system")];
        assert_eq!(
            role_binding_hash(&role_ref, &subjects),
            "7d4RqQ30cFANA5odQYrpZ55Se7VtbWWhVjlhrb"
        );
    }

    #[test]
    fn generated_names_match_upstream() {
        let permission = StrategyDeploymentPermissions {
            service_account_name: "widget-sa".into(),
            rules: rules(),
        };
        assert_eq!(
            generated_name(
                "widget-operator.v0.3.1-widget-sa",
                &name_hash("widget-operator.v0.3.1", "", &permission)
            ),
            "widget-operator.v0.3.1-w-2RcIV0xB9mdeDmStsjTp4dGaZceT92lsdmOPFT"
        );
        assert_eq!(
            generated_name(
                "widget-operator.v0.3.1",
                &name_hash("widget-operator.v0.3.1", "gadget-system", &permission)
            ),
            "widget-operator.v0.3.1-Y8HvnoBjkL0zCWuokgRvRMhwY21vy2LGSPLUf"
        );
        assert_eq!(
            generated_name(
                "a-very-long-operator-name-that-goes-on-and-on.v10.20.30-some-service-account",
                &name_hash("x", "", &permission)
            ),
            "a-very-long-operator-nam-5ZPW9a0itM4zzVylizsujnm6pIB5LyCPhF0Kun"
        );
    }
}
