//! Open CustomResourceDefinitions: an API a test needs the API server to
//! serve (OpenShift's ClusterOperator, a fixture operator's `widgets`) whose
//! objects' content the test does not want validated, so any content is
//! kept. One home for what several crates' cluster tests wrote themselves.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{Api, Client, api::PostParams, core::GroupVersion};
use serde_json::json;

use crate::wait::eventually;

/// How long [`install_open_crd`] waits for discovery to serve a new CRD.
pub const CRD_SERVED_TIMEOUT: Duration = Duration::from_secs(60);

/// A CRD named `<plural>.<group>` with one served and stored version `v1`
/// whose schema keeps any content (`x-kubernetes-preserve-unknown-fields`).
/// `scope` is `Namespaced` or `Cluster`; the singular is the lowercase kind
/// and the list kind `<kind>List`; `status_subresource` adds the `status`
/// subresource. Change the returned value for anything more (short names,
/// more versions, a stricter schema).
pub fn open_crd(
    group: &str,
    plural: &str,
    kind: &str,
    scope: &str,
    status_subresource: bool,
) -> CustomResourceDefinition {
    let mut version = json!({
        "name": "v1",
        "served": true,
        "storage": true,
        "schema": { "openAPIV3Schema": {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
        }},
    });
    if status_subresource {
        version["subresources"] = json!({ "status": {} });
    }
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": format!("{plural}.{group}") },
        "spec": {
            "group": group,
            "scope": scope,
            "names": {
                "plural": plural,
                "singular": kind.to_lowercase(),
                "kind": kind,
                "listKind": format!("{kind}List"),
            },
            "versions": [version],
        },
    });
    serde_json::from_value(crd)
        .unwrap_or_else(|err| panic!("open CRD {plural}.{group} is not a CRD: {err}"))
}

/// Creates `crd` unless a CRD of its name exists, then waits (up to
/// [`CRD_SERVED_TIMEOUT`]) until discovery serves its resource in every
/// served version, so that clients and watches started next find it.
///
/// # Panics
///
/// When the API server refuses the CRD, or does not serve it in time.
pub async fn install_open_crd(client: &Client, crd: &CustomResourceDefinition) {
    let name = crd.metadata.name.clone().unwrap_or_default();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    match crds.create(&PostParams::default(), crd).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.is_already_exists() => {}
        Err(err) => panic!("cannot create CRD {name}: {err}"),
    }
    let group = &crd.spec.group;
    let plural = &crd.spec.names.plural;
    for version in crd.spec.versions.iter().filter(|v| v.served) {
        let group_version = GroupVersion::gv(group, &version.name);
        eventually(
            &format!("{name} served in {}", version.name),
            CRD_SERVED_TIMEOUT,
            || async {
                let served = kube::discovery::pinned_group(client, &group_version)
                    .await
                    .map_err(|err| err.to_string())?;
                served
                    .versioned_resources(&version.name)
                    .iter()
                    .any(|(resource, _)| resource.plural == *plural)
                    .then_some(())
                    .ok_or_else(|| format!("{group}/{} has no {plural} yet", version.name))
            },
        )
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_open_crd_keeps_any_content_in_one_version() {
        let crd = open_crd("fixture.example.test", "gadgets", "Gadget", "Cluster", true);
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("gadgets.fixture.example.test")
        );
        assert_eq!(crd.spec.scope, "Cluster");
        assert_eq!(crd.spec.names.singular.as_deref(), Some("gadget"));
        assert_eq!(crd.spec.names.list_kind.as_deref(), Some("GadgetList"));
        let [version] = crd.spec.versions.as_slice() else {
            panic!("{:?}", crd.spec.versions)
        };
        assert!(version.served && version.storage);
        assert!(
            version
                .subresources
                .as_ref()
                .is_some_and(|s| s.status.is_some())
        );
        let schema = version
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref());
        assert_eq!(
            schema.and_then(|s| s.x_kubernetes_preserve_unknown_fields),
            Some(true)
        );

        // As a manifest (a bundle's object, an InstallPlan step), it says
        // what it is.
        let manifest = serde_json::to_value(&crd).unwrap_or_default();
        assert_eq!(manifest["apiVersion"], "apiextensions.k8s.io/v1");
        assert_eq!(manifest["kind"], "CustomResourceDefinition");

        let without_status = open_crd(
            "fixture.example.test",
            "gadgets",
            "Gadget",
            "Namespaced",
            false,
        );
        assert!(without_status.spec.versions[0].subresources.is_none());
    }
}
