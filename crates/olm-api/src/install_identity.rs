//! The identity an operator is installed with: OLM's own, or the
//! ServiceAccount an OperatorGroup names in `spec.serviceAccountName`
//! (a scoped install). Both catalog-operator (InstallPlan steps) and
//! olm-operator (the CSV's install strategy) decide with this one rule, so
//! the two can never disagree about whether an install is scoped.
//!
//! Upstream: `pkg/lib/scoped/querier.go` (`queryServiceAccountFromNamespace`)
//! and its callers in both operators. The rule fails closed: when the
//! namespace has no OperatorGroup managing it, or more than one, nothing is
//! installed at all, because falling back to OLM's own identity would let
//! whoever can create an OperatorGroup lift an admin's scoping.

use k8s_openapi::api::core::v1::ObjectReference;

use crate::operator_group::OperatorGroup;

/// The service account named by a group's `spec.serviceAccountName`, if any
/// (an empty name is none).
pub fn requested_service_account(group: &OperatorGroup) -> Option<&str> {
    group
        .spec
        .service_account_name
        .as_deref()
        .filter(|name| !name.is_empty())
}

/// The reference upstream records in `status.serviceAccountRef`: kind,
/// apiVersion, namespace, name, uid and resourceVersion of the account.
pub fn service_account_reference(
    namespace: &str,
    name: &str,
    uid: Option<&str>,
    resource_version: Option<&str>,
) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("ServiceAccount".to_owned()),
        namespace: Some(namespace.to_owned()),
        name: Some(name.to_owned()),
        uid: uid.map(str::to_owned),
        resource_version: resource_version.map(str::to_owned),
        field_path: None,
    }
}

/// Why nothing of a namespace may be installed yet: upstream's
/// `OperatorGroupError`s, with their messages.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct IdentityUnavailable(pub String);

/// The ServiceAccount the operators of `namespace` are installed as:
/// `Ok(None)` means OLM's own identity, which only a single managing group
/// without `serviceAccountName` grants.
///
/// - Groups of other namespaces, and groups whose `status.namespaces` is
///   empty (not managing anything yet), are ignored.
/// - No managing group, or several: refused.
/// - The group names an account: the account recorded in its
///   `status.serviceAccountRef` (set by olm-operator once the account
///   exists), never the spec field alone; until then, refused.
pub fn install_service_account<'a>(
    namespace: &str,
    groups: impl IntoIterator<Item = &'a OperatorGroup>,
) -> Result<Option<ObjectReference>, IdentityUnavailable> {
    let managing: Vec<&OperatorGroup> = groups
        .into_iter()
        .filter(|g| g.metadata.namespace.as_deref() == Some(namespace))
        .filter(|g| g.status.as_ref().is_some_and(|s| !s.namespaces.is_empty()))
        .collect();
    let group = match managing.as_slice() {
        [] => {
            return Err(IdentityUnavailable(
                "no operator group found that is managing this namespace".to_owned(),
            ));
        }
        [group] => *group,
        more => {
            return Err(IdentityUnavailable(format!(
                "more than one operator group(s) are managing this namespace count={}",
                more.len()
            )));
        }
    };
    let Some(name) = requested_service_account(group) else {
        return Ok(None);
    };
    let recorded = group
        .status
        .as_ref()
        .and_then(|s| s.service_account_ref.clone())
        // A reference to another account than the one now asked for is
        // stale (the spec changed and olm-operator has not caught up):
        // installing with either would be a guess.
        .filter(|r| r.name.as_deref() == Some(name) && r.namespace.as_deref() == Some(namespace));
    match recorded {
        Some(reference) => Ok(Some(reference)),
        None => Err(IdentityUnavailable(format!(
            "please make sure the service account exists. sa={name} operatorgroup={namespace}/{}",
            group.metadata.name.as_deref().unwrap_or_default()
        ))),
    }
}

/// The `Impersonate-User` of a request made on behalf of a ServiceAccount.
/// No `Impersonate-Group` goes with it: the API server gives an impersonated
/// ServiceAccount exactly the groups its own token has
/// (`system:serviceaccounts`, `system:serviceaccounts:<namespace>`,
/// `system:authenticated`), and naming them would need the right to
/// impersonate any group (`system:masters` included), since the
/// per-namespace group cannot be listed in RBAC.
pub fn impersonation(reference: &ObjectReference) -> String {
    let namespace = reference.namespace.as_deref().unwrap_or_default();
    let name = reference.name.as_deref().unwrap_or_default();
    format!("system:serviceaccount:{namespace}:{name}")
}
