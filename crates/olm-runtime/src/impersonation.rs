//! Clients that act as a ServiceAccount: every request carries the
//! `Impersonate-User` header of that account (and no `Impersonate-Group`:
//! the API server adds the account's own groups), so the API server grants
//! it no more than the account may do. This is the one
//! impersonation mechanism of the services; which account to impersonate is
//! decided by [`olm_api::install_identity`].
//!
//! Impersonation needs no token Secret and no TokenRequest (upstream
//! authenticates with the account's token instead); the calling service's
//! own credentials must be allowed to `impersonate` serviceaccounts, and
//! nothing else.

use http::HeaderValue;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use olm_api::{
    install_identity::{IdentityUnavailable, impersonation, install_service_account},
    operator_group::OperatorGroup,
};

/// A client that sends every request of `client` as the ServiceAccount
/// `reference`. It shares `client`'s connections, credentials and layers
/// (a warning counter, say).
pub fn impersonating(
    client: &Client,
    reference: &ObjectReference,
) -> Result<Client, IdentityUnavailable> {
    let user = impersonation(reference);
    let header = |value: &str| {
        HeaderValue::from_str(value).map_err(|_| {
            IdentityUnavailable(format!(
                "service account name {value:?} is not a valid header"
            ))
        })
    };
    let user = header(&user)?;
    let base = client.clone();
    let service = tower::service_fn(move |mut request: http::Request<kube::client::Body>| {
        let base = base.clone();
        let headers = request.headers_mut();
        // Headers a caller set are replaced, never added to: an
        // Impersonate-Group would widen the identity.
        headers.remove("Impersonate-Group");
        headers.insert("Impersonate-User", user.clone());
        async move { base.send(request).await }
    });
    Ok(Client::new(service, client.default_namespace()))
}

/// The client the operators of `namespace` are installed with, by the one
/// identity rule ([`install_service_account`]) over `groups` (the cached
/// OperatorGroups; those of other namespaces are ignored): `base` itself,
/// or `base` impersonating the account, returned with its reference.
pub fn install_client<'a>(
    base: &Client,
    namespace: &str,
    groups: impl IntoIterator<Item = &'a OperatorGroup>,
) -> Result<(Client, Option<ObjectReference>), IdentityUnavailable> {
    match install_service_account(namespace, groups)? {
        None => Ok((base.clone(), None)),
        Some(reference) => Ok((impersonating(base, &reference)?, Some(reference))),
    }
}
