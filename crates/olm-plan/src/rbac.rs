//! The RBAC a CSV grants (`spec.install.spec.permissions`, namespaced, and
//! `clusterPermissions`), compared with the CSV it replaces: what an
//! install or upgrade adds and takes away, per service account.

use std::collections::BTreeSet;

use k8s_openapi::api::rbac::v1::PolicyRule;
use olm_api::csv::{ClusterServiceVersion, StrategyDeploymentPermissions};
use serde::Serialize;

/// Where a rule applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Scope {
    /// A Role in each namespace the operator watches.
    Namespace,
    /// A ClusterRole.
    Cluster,
}

/// What changes for one service account at one scope.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RbacChange {
    /// Namespaced or cluster-wide.
    pub scope: Scope,
    /// The service account the rules are bound to.
    pub service_account: String,
    /// Rules granted now that were not, each as [`rule_text`] writes it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub added: Vec<String>,
    /// Rules granted before that are not any more.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<String>,
}

/// A rule in one line: `verbs on resources in groups [names ...]`, with
/// non-resource URLs when it has them; `""` is the core group.
pub fn rule_text(rule: &PolicyRule) -> String {
    let list = |items: &Option<Vec<String>>| {
        let mut items = items.clone().unwrap_or_default();
        items.sort();
        items.join(",")
    };
    let groups = rule
        .api_groups
        .clone()
        .unwrap_or_default()
        .iter()
        .map(|g| {
            if g.is_empty() {
                "\"\"".to_owned()
            } else {
                g.clone()
            }
        })
        .collect::<Vec<_>>();
    let mut text = format!("{} on ", list(&Some(rule.verbs.clone())));
    if rule
        .non_resource_urls
        .as_ref()
        .is_some_and(|u| !u.is_empty())
    {
        text.push_str(&format!("urls {}", list(&rule.non_resource_urls)));
    } else {
        text.push_str(&format!(
            "{} in {}",
            list(&rule.resources),
            list(&Some(groups))
        ));
    }
    if rule.resource_names.as_ref().is_some_and(|n| !n.is_empty()) {
        text.push_str(&format!(" named {}", list(&rule.resource_names)));
    }
    text
}

fn grants(permissions: Option<&Vec<StrategyDeploymentPermissions>>) -> BTreeSet<(String, String)> {
    permissions
        .into_iter()
        .flatten()
        .flat_map(|p| {
            p.rules
                .iter()
                .map(|rule| (p.service_account_name.clone(), rule_text(rule)))
        })
        .collect()
}

/// What `new` grants beyond `old` (none: a first install) and what it no
/// longer grants, per scope and service account, sorted.
pub fn rbac_diff(
    old: Option<&ClusterServiceVersion>,
    new: &ClusterServiceVersion,
) -> Vec<RbacChange> {
    let of = |csv: Option<&ClusterServiceVersion>, scope: Scope| {
        let spec = csv.map(|csv| &csv.spec.install.spec);
        grants(spec.and_then(|spec| match scope {
            Scope::Namespace => spec.permissions.as_ref(),
            Scope::Cluster => spec.cluster_permissions.as_ref(),
        }))
    };
    let mut changes = Vec::new();
    for scope in [Scope::Namespace, Scope::Cluster] {
        let (before, after) = (of(old, scope), of(Some(new), scope));
        let accounts: BTreeSet<&String> = before.iter().chain(&after).map(|(sa, _)| sa).collect();
        for account in accounts {
            let pick = |from: &BTreeSet<(String, String)>, not_in: &BTreeSet<(String, String)>| {
                from.iter()
                    .filter(|(sa, _)| sa == account)
                    .filter(|grant| !not_in.contains(*grant))
                    .map(|(_, rule)| rule.clone())
                    .collect::<Vec<_>>()
            };
            let (added, removed) = (pick(&after, &before), pick(&before, &after));
            if !added.is_empty() || !removed.is_empty() {
                changes.push(RbacChange {
                    scope,
                    service_account: account.clone(),
                    added,
                    removed,
                });
            }
        }
    }
    changes
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn csv(permissions: serde_json::Value, cluster: serde_json::Value) -> ClusterServiceVersion {
        serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": "fixture.v1", "namespace": "ns"},
            "spec": {"displayName": "fixture", "install": {"strategy": "deployment", "spec": {
                "deployments": [], "permissions": permissions, "clusterPermissions": cluster}}}
        }))
        .unwrap()
    }

    #[test]
    fn a_first_install_adds_everything_and_an_upgrade_the_difference() {
        let v1 = csv(
            json!([{"serviceAccountName": "fixture-sa", "rules": [
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]}]),
            json!([{"serviceAccountName": "fixture-sa", "rules": [
                {"apiGroups": ["fixture.example"], "resources": ["gadgets"], "verbs": ["*"]}]}]),
        );
        let v2 = csv(
            json!([{"serviceAccountName": "fixture-sa", "rules": [
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list", "get"]},
                {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": ["fixture-tls"]}]}]),
            json!([]),
        );
        let first = rbac_diff(None, &v1);
        assert_eq!(first.len(), 2);
        assert_eq!(first[0].added, ["get,list on configmaps in \"\""]);
        assert_eq!(first[1].scope, Scope::Cluster);
        let upgrade = rbac_diff(Some(&v1), &v2);
        assert_eq!(
            upgrade,
            [
                RbacChange {
                    scope: Scope::Namespace,
                    service_account: "fixture-sa".to_owned(),
                    added: vec!["get on secrets in \"\" named fixture-tls".to_owned()],
                    removed: vec![],
                },
                RbacChange {
                    scope: Scope::Cluster,
                    service_account: "fixture-sa".to_owned(),
                    added: vec![],
                    removed: vec!["* on gadgets in fixture.example".to_owned()],
                },
            ],
            "verb order does not matter; the cluster rule went"
        );
        assert!(rbac_diff(Some(&v2), &v2).is_empty());
    }

    #[test]
    fn non_resource_urls_are_written_as_urls() {
        let rule: PolicyRule =
            serde_json::from_value(json!({"nonResourceURLs": ["/metrics"], "verbs": ["get"]}))
                .unwrap();
        assert_eq!(rule_text(&rule), "get on urls /metrics");
    }
}
