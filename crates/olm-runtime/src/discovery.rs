//! Whether the cluster serves an API, told apart from "the API server
//! failed": for the APIs a service uses only where they exist (OpenShift's
//! ClusterOperators, image and template APIs, cluster configs).

use kube::{Client, api::ApiResource};

use crate::error::{Error, Result};

/// The resource `plural` of `group` when the cluster serves it (at its
/// preferred version), `None` when it does not.
///
/// # Errors
///
/// [`Error::Discovery`] when the API server did not answer.
pub async fn served_resource(
    client: &Client,
    group: &str,
    plural: &str,
) -> Result<Option<ApiResource>> {
    match kube::discovery::group(client, group).await {
        Ok(found) => Ok(found
            .recommended_resources()
            .into_iter()
            .map(|(resource, _)| resource)
            .find(|resource| resource.plural == plural)),
        Err(kube::Error::Discovery(_)) => Ok(None),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(None),
        Err(source) => Err(Error::Discovery {
            group: group.to_owned(),
            source: Box::new(source),
        }),
    }
}
