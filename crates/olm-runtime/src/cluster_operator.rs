//! OpenShift's ClusterOperators (`config.openshift.io/v1`), read and written
//! as dynamic objects: we do not ship their CRD, OpenShift does. A service
//! asks [`ClusterOperators::discover`] whether the cluster serves them, then
//! reads a status (creating the object when absent) and applies the part it
//! owns with its own field manager.

use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, Patch, PostParams},
};
use olm_api::cluster_operator::ClusterOperatorStatus;
use serde_json::json;

use crate::{
    apply::FieldManager,
    discovery::served_resource,
    error::{Error, Result},
};

/// The group of ClusterOperators.
pub const GROUP: &str = "config.openshift.io";

/// Their resource (plural).
pub const PLURAL: &str = "clusteroperators";

/// The ClusterOperators of a cluster that serves them.
#[derive(Clone)]
pub struct ClusterOperators {
    api: Api<DynamicObject>,
    resource: ApiResource,
    manager: FieldManager,
}

impl ClusterOperators {
    /// The ClusterOperator API, written with `manager`, when the cluster
    /// serves it.
    ///
    /// # Errors
    ///
    /// [`Error::Discovery`] when the API server did not answer.
    pub async fn discover(client: &Client, manager: FieldManager) -> Result<Option<Self>> {
        Ok(served_resource(client, GROUP, PLURAL)
            .await?
            .map(|resource| Self {
                api: Api::all_with(client.clone(), &resource),
                resource,
                manager,
            }))
    }

    /// The status the ClusterOperator `name` reports now; creates it (with an
    /// empty spec, as OpenShift's operators do) when absent. A status that
    /// cannot be read is reported as empty, so that it is written anew.
    ///
    /// # Errors
    ///
    /// [`Error::ClusterOperator`] when the read or the create failed.
    pub async fn current_status(&self, name: &str) -> Result<ClusterOperatorStatus> {
        let failed = |verb, source| Error::ClusterOperator {
            verb,
            name: name.to_owned(),
            source: Box::new(source),
        };
        let existing = self
            .api
            .get_opt(name)
            .await
            .map_err(|source| failed("get", source))?;
        let object = match existing {
            Some(object) => object,
            None => {
                let mut object = DynamicObject::new(name, &self.resource);
                object.data = json!({ "spec": {} });
                let params = PostParams {
                    field_manager: Some(self.manager.as_str().to_owned()),
                    ..PostParams::default()
                };
                match self.api.create(&params, &object).await {
                    Ok(created) => {
                        tracing::info!(clusteroperator = name, "created the ClusterOperator");
                        created
                    }
                    Err(kube::Error::Api(status)) if status.is_already_exists() => object,
                    Err(source) => return Err(failed("create", source)),
                }
            }
        };
        Ok(object
            .data
            .get("status")
            .and_then(|status| serde_json::from_value(status.clone()).ok())
            .unwrap_or_default())
    }

    /// Applies `status` to the ClusterOperator `name` with this writer's
    /// field manager.
    ///
    /// # Errors
    ///
    /// [`Error::ClusterOperator`] when the apply failed.
    pub async fn write_status(&self, name: &str, status: &ClusterOperatorStatus) -> Result<()> {
        let body = json!({
            "apiVersion": self.resource.api_version,
            "kind": self.resource.kind,
            "metadata": { "name": name },
            "status": status,
        });
        self.api
            .patch_status(name, &self.manager.status_params(), &Patch::Apply(&body))
            .await
            .map_err(|source| Error::ClusterOperator {
                verb: "apply status of",
                name: name.to_owned(),
                source: Box::new(source),
            })?;
        tracing::info!(clusteroperator = name, "wrote the ClusterOperator status");
        Ok(())
    }
}
