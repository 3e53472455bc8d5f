//! The writes: CatalogSource create, update (a merge patch guarded by the
//! resourceVersion the decision read) and delete (guarded by UID and
//! resourceVersion), and the OperatorHub status with its minimal fallback.
//!
//! A default CatalogSource is owned by the OperatorHub (an owner reference,
//! without `blockOwnerDeletion`), so deleting the OperatorHub (uninstalling
//! the Helm chart that made it) garbage-collects the default catalogs and
//! their registry pods.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::{
    Resource as _, ResourceExt as _,
    api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions},
    runtime::reflector::ObjectRef,
};
use olm_api::{
    catalog_source::{CatalogSource, CatalogSourceSpec},
    labels,
    operator_hub::{HubSourceStatus, OperatorHub, OperatorHubStatus},
};
use olm_runtime::apply::write_status;
use serde_json::json;

use super::{Error, FIELD_MANAGER, Reconciler};
use crate::decide::{
    compare::merge_patch,
    plan::{Action, PROMOTION_GUARD_VALUE},
    sources::{MANAGED_BY_ANNOTATION, MANAGED_BY_VALUE},
};

/// How a write went, when it did not fail.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Written {
    /// Done.
    Done,
    /// The object changed since the cache was read (conflict, already
    /// exists, or gone); the watch brings the news and we decide again.
    Stale,
}

fn is_stale(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409 || status.is_not_found())
}

impl Reconciler {
    pub(super) async fn execute(
        &self,
        action: &Action,
        hub: &OperatorHub,
    ) -> Result<Written, Error> {
        let namespace = &self.config.namespace;
        let owner = hub.controller_owner_ref(&()).map(|mut owner| {
            // Owned, not controlled: nothing here needs the GC to wait.
            owner.controller = None;
            owner.block_owner_deletion = None;
            owner
        });
        let result = match action {
            Action::Create { name, spec } => self.create(name, spec, owner).await,
            Action::Update { name, spec } => self.update(name, spec, owner).await,
            Action::Delete { name } => self.delete(name).await,
        };
        match result {
            Ok(()) => {
                tracing::info!(
                    catalog = action.name(),
                    verb = action.verb(),
                    "wrote a default CatalogSource"
                );
                Ok(Written::Done)
            }
            Err(Some(source)) if is_stale(&source) => {
                tracing::debug!(
                    catalog = action.name(),
                    "cache behind the API server; deciding again"
                );
                Ok(Written::Stale)
            }
            Err(None) => Ok(Written::Stale),
            Err(Some(source)) => Err(Error::WriteCatalog {
                verb: action.verb(),
                namespace: namespace.clone(),
                name: action.name().to_owned(),
                source,
            }),
        }
    }

    /// The cached object, or `Err(None)` when the cache lost it meanwhile.
    fn cached(&self, name: &str) -> Result<std::sync::Arc<CatalogSource>, Option<kube::Error>> {
        self.catalog_store
            .get(&ObjectRef::new(name).within(&self.config.namespace))
            .ok_or(None)
    }

    async fn create(
        &self,
        name: &str,
        spec: &CatalogSourceSpec,
        owner: Option<OwnerReference>,
    ) -> Result<(), Option<kube::Error>> {
        let mut catalog = CatalogSource::new(name, spec.clone());
        catalog.metadata.namespace = Some(self.config.namespace.clone());
        catalog.metadata.owner_references = owner.map(|owner| vec![owner]);
        catalog.annotations_mut().insert(
            MANAGED_BY_ANNOTATION.to_owned(),
            MANAGED_BY_VALUE.to_owned(),
        );
        catalog.annotations_mut().insert(
            labels::PROMOTION_GUARD.to_owned(),
            PROMOTION_GUARD_VALUE.to_owned(),
        );
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.as_str().to_owned()),
            ..PostParams::default()
        };
        self.catalogs
            .create(&params, &catalog)
            .await
            .map(|_| ())
            .map_err(Some)
    }

    /// Replaces the spec with `spec` (fields it lacks are removed, as
    /// upstream's whole-spec update does) and sets the annotation, only if
    /// the object is still the one the decision read.
    async fn update(
        &self,
        name: &str,
        spec: &CatalogSourceSpec,
        owner: Option<OwnerReference>,
    ) -> Result<(), Option<kube::Error>> {
        let current = self.cached(name)?;
        let observed = serde_json::to_value(&current.spec).unwrap_or_default();
        let desired = serde_json::to_value(spec).unwrap_or_default();
        let mut patch = json!({
            "metadata": {
                "resourceVersion": current.resource_version(),
                "annotations": {
                    MANAGED_BY_ANNOTATION: MANAGED_BY_VALUE,
                    labels::PROMOTION_GUARD: PROMOTION_GUARD_VALUE,
                },
            },
            "spec": merge_patch(&observed, &desired),
        });
        // A merge patch replaces the list: keep every owner it has.
        let mut owners = current.owner_references().to_vec();
        if let Some(owner) = owner
            && !owners.iter().any(|o| o.uid == owner.uid)
        {
            owners.push(owner);
            patch["metadata"]["ownerReferences"] = json!(owners);
        }
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.as_str().to_owned()),
            ..PatchParams::default()
        };
        self.catalogs
            .patch(name, &params, &Patch::Merge(&patch))
            .await
            .map(|_| ())
            .map_err(Some)
    }

    /// Deletes the object only if it is still the one the decision read, so
    /// that a user's catalog created meanwhile under the name survives.
    async fn delete(&self, name: &str) -> Result<(), Option<kube::Error>> {
        let current = self.cached(name)?;
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: current.uid(),
                resource_version: current.resource_version(),
            }),
            ..DeleteParams::background()
        };
        match self.catalogs.delete(name, &params).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
            Err(error) => Err(Some(error)),
        }
    }

    /// Writes `status.sources` when it differs from what the OperatorHub
    /// has. A status the API server rejects as invalid (an older CRD) is
    /// logged, reported in a Warning event, and written again without
    /// messages, so that the controller never wedges on it.
    pub(super) async fn write_status(
        &self,
        hub: &OperatorHub,
        sources: Vec<HubSourceStatus>,
    ) -> Result<(), Error> {
        let current = hub.status.as_ref().map(|status| status.sources.as_slice());
        if current.unwrap_or_default() == sources.as_slice() && hub.status.is_some() {
            return Ok(());
        }
        let name = hub.name_any();
        let status = OperatorHubStatus {
            sources,
            ..OperatorHubStatus::default()
        };
        write_status(
            &self.hubs,
            &FIELD_MANAGER,
            hub,
            &status,
            Some(&self.recorder),
        )
        .await
        .map(|_| ())
        .map_err(|source| Error::WriteStatus { name, source })
    }
}
