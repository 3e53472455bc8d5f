//! Server-side apply with one field manager per service, the `olm.managed`
//! label on everything we create, status writes that fall back to a minimal
//! status rather than wedge, and a NotFound-tolerant delete.
//!
//! Server-side apply makes writes level-triggered: applying the same desired
//! object twice changes nothing, and the API server records which service
//! owns which field in `metadata.managedFields`.
//!
//! ```no_run
//! # async fn example(client: kube::Client) -> olm_runtime::Result<()> {
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::{Api, api::ObjectMeta};
//! use olm_runtime::apply::{FieldManager, apply};
//!
//! const MANAGER: FieldManager = FieldManager::new("catalog-operator");
//! let api: Api<ConfigMap> = Api::namespaced(client, "olm");
//! let desired = ConfigMap {
//!     metadata: ObjectMeta { name: Some("example".into()), ..Default::default() },
//!     ..Default::default()
//! };
//! let applied = apply(&api, &MANAGER, &desired).await?;
//! # Ok(())
//! # }
//! ```

use std::fmt::Debug;

use kube::{
    Api, Resource, ResourceExt as _,
    api::{DeleteParams, Patch, PatchParams},
};
use olm_api::labels;
use serde::{Serialize, de::DeserializeOwned};

use crate::error::{Error, Result};

/// The server-side-apply field manager of one service (for example
/// `olm-operator`); the API server records it in `metadata.managedFields`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FieldManager(&'static str);

impl FieldManager {
    /// A field manager named `name`; use the service's name, and one manager
    /// per service, so that ownership shows which service set a field.
    pub const fn new(name: &'static str) -> Self {
        Self(name)
    }

    /// The manager's name.
    pub const fn as_str(&self) -> &'static str {
        self.0
    }

    /// Parameters for applying an object: conflicts with another manager's
    /// fields are reported, not overridden.
    pub fn apply_params(&self) -> PatchParams {
        PatchParams::apply(self.0)
    }

    /// Parameters for applying status: forced, because the status we own is
    /// ours alone to write, and an older replica's stale ownership must not
    /// wedge it.
    pub fn status_params(&self) -> PatchParams {
        PatchParams::apply(self.0).force()
    }
}

impl std::fmt::Display for FieldManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// Stamps `olm.managed=true` on `object`.
pub fn mark_managed<K: Resource>(object: &mut K) {
    object
        .labels_mut()
        .insert(labels::MANAGED.to_owned(), labels::MANAGED_VALUE.to_owned());
}

/// Whether `object` carries `olm.managed=true`.
pub fn is_managed<K: Resource>(object: &K) -> bool {
    object.labels().get(labels::MANAGED).map(String::as_str) == Some(labels::MANAGED_VALUE)
}

fn kind_of<K: Resource>() -> String
where
    K::DynamicType: Default,
{
    K::kind(&K::DynamicType::default()).into_owned()
}

/// Server-side applies `desired` (with `olm.managed=true` added) as `manager`
/// and returns the object as stored. `desired` must contain only the fields
/// this service owns; fields it leaves out that it set before are removed.
pub async fn apply<K>(api: &Api<K>, manager: &FieldManager, desired: &K) -> Result<K>
where
    K: Resource + Clone + Debug + Serialize + DeserializeOwned,
    K::DynamicType: Default,
{
    let name = desired
        .meta()
        .name
        .clone()
        .ok_or_else(|| Error::MissingName {
            kind: kind_of::<K>(),
        })?;
    let mut object = desired.clone();
    mark_managed(&mut object);
    // The API server fills these in; sending them would make it reject the patch
    // or make us claim ownership of them.
    object.meta_mut().managed_fields = None;
    object.meta_mut().resource_version = None;
    api.patch(&name, &manager.apply_params(), &Patch::Apply(&object))
        .await
        .map_err(|source| Error::Apply {
            kind: kind_of::<K>(),
            name,
            source: Box::new(source),
        })
}

/// Server-side applies `status` to the `status` subresource of the object
/// named `name`, forced (see [`FieldManager::status_params`]). `status` must
/// contain only the status fields this service owns.
pub async fn apply_status<K, S>(
    api: &Api<K>,
    manager: &FieldManager,
    name: &str,
    status: &S,
) -> Result<K>
where
    K: Resource + Clone + Debug + DeserializeOwned,
    K::DynamicType: Default,
    S: Serialize,
{
    let dynamic_type = K::DynamicType::default();
    let status = serde_json::to_value(status).map_err(|source| Error::Serialize {
        kind: kind_of::<K>(),
        name: name.to_owned(),
        source,
    })?;
    let body = serde_json::json!({
        "apiVersion": K::api_version(&dynamic_type),
        "kind": K::kind(&dynamic_type),
        "metadata": { "name": name },
        "status": status,
    });
    api.patch_status(name, &manager.status_params(), &Patch::Apply(&body))
        .await
        .map_err(|source| Error::ApplyStatus {
            kind: kind_of::<K>(),
            name: name.to_owned(),
            source: Box::new(source),
        })
}

/// How [`write_status`] went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusWrite {
    /// The status was written as given.
    Written,
    /// The API server refused the status as invalid; its minimal form was
    /// written instead.
    Minimal,
    /// The object is gone: nothing was written.
    Gone,
}

/// The reason of the Warning event [`write_status`] publishes when a status
/// is refused.
pub const STATUS_REJECTED: &str = "StatusRejected";

/// Writes `status` to `object` with server-side apply (ARCHITECTURE rule
/// 4): a status the API server refuses as invalid (422: an older CRD after a
/// rollback refusing a newer value, a message past a limit) is logged,
/// published as a [`STATUS_REJECTED`] Warning event on the object when a
/// recorder is given, and written again in its minimal form
/// ([`olm_api::status::MinimalStatus`]), so the controller never wedges on
/// it. An object deleted meanwhile is not an error.
pub async fn write_status<K, S>(
    api: &Api<K>,
    manager: &FieldManager,
    object: &K,
    status: &S,
    recorder: Option<&crate::events::EventRecorder>,
) -> Result<StatusWrite>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned,
    S: Serialize + olm_api::status::MinimalStatus,
{
    let name = object.name_any();
    let refusal = match apply_status(api, manager, &name, status).await {
        Ok(_) => return Ok(StatusWrite::Written),
        Err(error) => match status_refusal(&error) {
            Refusal::Gone => return Ok(StatusWrite::Gone),
            Refusal::Invalid => error,
            Refusal::Other => return Err(error),
        },
    };
    tracing::error!(
        kind = kind_of::<K>(),
        namespace = object.namespace().unwrap_or_default(),
        name,
        error = &refusal as &dyn std::error::Error,
        "the api server refused the status; writing its minimal form instead"
    );
    if let Some(recorder) = recorder
        && let Err(error) = recorder
            .warning(
                &object.object_ref(&()),
                STATUS_REJECTED,
                "WriteStatus",
                &refusal,
            )
            .await
    {
        tracing::debug!(
            error = &error as &dyn std::error::Error,
            "event not published"
        );
    }
    match apply_status(api, manager, &name, &status.minimal()).await {
        Ok(_) => Ok(StatusWrite::Minimal),
        Err(error) => match status_refusal(&error) {
            Refusal::Gone => Ok(StatusWrite::Gone),
            Refusal::Invalid | Refusal::Other => Err(error),
        },
    }
}

/// What a failed status write means for [`write_status`].
enum Refusal {
    Gone,
    Invalid,
    Other,
}

fn status_refusal(error: &Error) -> Refusal {
    match error {
        Error::ApplyStatus { source, .. } => match source.as_ref() {
            kube::Error::Api(status) if status.is_not_found() => Refusal::Gone,
            kube::Error::Api(status) if status.code == 422 => Refusal::Invalid,
            _ => Refusal::Other,
        },
        _ => Refusal::Other,
    }
}

/// Deletes the object named `name` (in the background: dependents are
/// garbage-collected afterwards). Returns `false` when it did not exist, so
/// that cleanup is idempotent.
pub async fn delete_if_exists<K>(api: &Api<K>, name: &str) -> Result<bool>
where
    K: Resource + Clone + Debug + DeserializeOwned,
    K::DynamicType: Default,
{
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(false),
        Err(source) => Err(Error::Delete {
            kind: kind_of::<K>(),
            name: name.to_owned(),
            source: Box::new(source),
        }),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    use super::*;

    #[test]
    fn marking_adds_the_label_and_keeps_others() {
        let mut object = ConfigMap {
            metadata: ObjectMeta {
                name: Some("sample-config".to_owned()),
                labels: Some([("app".to_owned(), "sample".to_owned())].into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        assert!(!is_managed(&object));
        mark_managed(&mut object);
        assert!(is_managed(&object));
        assert_eq!(
            object.labels().get("app").map(String::as_str),
            Some("sample")
        );
    }

    #[test]
    fn status_is_forced_and_objects_are_not() {
        const MANAGER: FieldManager = FieldManager::new("sample-operator");
        assert!(MANAGER.status_params().force);
        assert!(!MANAGER.apply_params().force);
        assert_eq!(
            MANAGER.apply_params().field_manager.as_deref(),
            Some("sample-operator")
        );
    }
}
