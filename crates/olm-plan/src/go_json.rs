//! Byte-exact Go `encoding/json` output for the few types whose JSON upstream
//! hashes or shows to users: RBAC policy rules, role references, subjects and
//! CSV permissions.
//!
//! Go writes struct fields in declaration order, omits `omitempty` fields that
//! are nil or empty, and escapes `<`, `>`, `&`, U+2028 and U+2029 (HTML-safe
//! escaping is on for both `json.Marshal` and `json.Encoder`). Reproducing that
//! lets `olm.permissions.hash` labels and generated RBAC names match the ones
//! upstream OLM wrote, so objects created by upstream are found again
//! ([`crate::csv_rbac`]).
//!
//! One ambiguity cannot be resolved: Go writes a nil slice without
//! `omitempty` as `null` and an empty one as `[]`; the Rust types cannot tell
//! them apart, and we write `[]` (what a CSV that spells the field out gives).

use k8s_openapi::api::rbac::v1::{PolicyRule, RoleRef, Subject};
use olm_api::csv::StrategyDeploymentPermissions;

/// Appends a Go-escaped JSON string, HTML escaping on (`json.Marshal`).
pub fn string(out: &mut String, value: &str) {
    olm_api::go_text::write_json_string(out, value, true);
}

fn string_list(out: &mut String, values: &[String]) {
    out.push('[');
    for (index, value) in values.iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        string(out, value);
    }
    out.push(']');
}

/// Writes `,"key":[...]` when the list is set and not empty (`omitempty`).
fn omitempty_list(out: &mut String, key: &str, values: Option<&Vec<String>>) {
    if let Some(values) = values.filter(|v| !v.is_empty()) {
        out.push(',');
        string(out, key);
        out.push(':');
        string_list(out, values);
    }
}

/// `rbacv1.PolicyRule` as Go marshals it.
pub fn policy_rule(out: &mut String, rule: &PolicyRule) {
    out.push_str("{\"verbs\":");
    string_list(out, &rule.verbs);
    omitempty_list(out, "apiGroups", rule.api_groups.as_ref());
    omitempty_list(out, "resources", rule.resources.as_ref());
    omitempty_list(out, "resourceNames", rule.resource_names.as_ref());
    omitempty_list(out, "nonResourceURLs", rule.non_resource_urls.as_ref());
    out.push('}');
}

/// A single rule as Go marshals it.
pub fn policy_rule_string(rule: &PolicyRule) -> String {
    let mut out = String::new();
    policy_rule(&mut out, rule);
    out
}

/// `[]rbacv1.PolicyRule` as Go marshals it.
pub fn policy_rules(out: &mut String, rules: &[PolicyRule]) {
    out.push('[');
    for (index, rule) in rules.iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        policy_rule(out, rule);
    }
    out.push(']');
}

/// `rbacv1.RoleRef` as Go marshals it.
pub fn role_ref(out: &mut String, role_ref: &RoleRef) {
    out.push_str("{\"apiGroup\":");
    string(out, &role_ref.api_group);
    out.push_str(",\"kind\":");
    string(out, &role_ref.kind);
    out.push_str(",\"name\":");
    string(out, &role_ref.name);
    out.push('}');
}

/// `rbacv1.Subject` as Go marshals it.
pub fn subject(out: &mut String, subject: &Subject) {
    out.push_str("{\"kind\":");
    string(out, &subject.kind);
    if let Some(api_group) = subject.api_group.as_deref().filter(|g| !g.is_empty()) {
        out.push_str(",\"apiGroup\":");
        string(out, api_group);
    }
    out.push_str(",\"name\":");
    string(out, &subject.name);
    if let Some(namespace) = subject.namespace.as_deref().filter(|n| !n.is_empty()) {
        out.push_str(",\"namespace\":");
        string(out, namespace);
    }
    out.push('}');
}

/// `v1alpha1.StrategyDeploymentPermissions` as Go marshals it.
pub fn permission(out: &mut String, permission: &StrategyDeploymentPermissions) {
    out.push_str("{\"serviceAccountName\":");
    string(out, &permission.service_account_name);
    out.push_str(",\"rules\":");
    policy_rules(out, &permission.rules);
    out.push('}');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_escaped_like_go() {
        // Go 1.22+: json.Marshal("ctl\b\f\n\r\t\x01\u2028 \"q\" \\ <>&").
        let mut out = String::new();
        string(&mut out, "ctl\u{8}\u{c}\n\r\t\u{1}\u{2028} \"q\" \\ <>&");
        assert_eq!(
            out,
            r#""ctl\b\f\n\r\t\u0001\u2028 \"q\" \\ \u003c\u003e\u0026""#
        );
    }

    #[test]
    fn policy_rules_follow_go_field_order_and_omitempty() {
        let rules = vec![
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
                non_resource_urls: Some(vec![]),
            },
            PolicyRule {
                verbs: vec!["get".into()],
                non_resource_urls: Some(vec!["/healthz".into()]),
                ..Default::default()
            },
        ];
        let mut out = String::new();
        policy_rules(&mut out, &rules);
        // Output of Go's json.Marshal for the same rules.
        assert_eq!(
            out,
            r#"[{"verbs":["get","list"],"apiGroups":[""],"resources":["configmaps"]},{"verbs":["*"],"apiGroups":["gadgets.example.test"],"resources":["widgets","widgets/status"],"resourceNames":["a\u003cb\u0026c\u003e"]},{"verbs":["get"],"nonResourceURLs":["/healthz"]}]"#
        );
    }
}
