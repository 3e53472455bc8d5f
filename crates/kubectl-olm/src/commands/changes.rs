//! What applying each resolved bundle would change, for `preview`: the
//! objects its InstallPlan would create or update, the verdict on each of
//! its CRDs, and the RBAC its CSV grants beside the CSV it replaces. The
//! steps and the verdicts come from `olm_plan`, the code catalog-operator
//! plans and applies with; this module only reads what they need from the
//! registry, the bundle image and the cluster.

use std::collections::BTreeMap;

use anyhow::{Context as _, Result, anyhow};
use k8s_openapi::{
    api::core::v1::{ConfigMap, Secret, ServiceAccount},
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, GroupVersionKind, ListParams},
    discovery::Scope,
};
use olm_api::{catalog_source::CatalogSource, csv::ClusterServiceVersion, install_plan::Step};
use olm_catalog::{
    bundle::{LoadBundleOptions, RegistryBundle},
    unpacked,
};
use olm_plan::{
    crd::{self, CrdVerdict},
    rbac::{RbacChange, rbac_diff},
    steps::{
        BundleContent, BundleSource, dependency_subscription_step, listing_order, needs_unpack,
        properties_annotation, steps_for_bundle,
    },
};
use olm_resolver::{Resolution, ResolvedOperator};
use serde::Serialize;

/// What applying one resolved bundle would change.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BundleChanges {
    /// The CSV.
    pub csv: String,
    /// The installed CSV it replaces.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
    /// Every step of its InstallPlan but its CRDs, in the plan's order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub objects: Vec<ObjectChange>,
    /// Its CRDs and what applying each would do.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub crds: Vec<CrdChange>,
    /// The RBAC its CSV grants and takes away, per service account.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rbac: Vec<RbacChange>,
    /// Why its content could not be read (then nothing else is shown).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

/// One object of a plan.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ObjectChange {
    /// Its kind, as the plan's step has it.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// `create`, `update`, `unchanged`, `present` (a CSV or Subscription
    /// that exists, which catalog-operator leaves as it is), or why that
    /// cannot be told.
    pub action: String,
    /// For an update, the fields it changes ([`changed_fields`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<String>,
}

/// The most changed fields listed for one object; more are summed up in a
/// last entry.
pub(crate) const MAX_FIELDS_SHOWN: usize = 20;

/// The fields replacing `live` with `desired` changes, as catalog-operator
/// replaces an object of a step that exists: every value `desired` sets
/// that `live` does not have, by path (`spec.replicas`,
/// `metadata.labels["app.kubernetes.io/name"]`), lists compared whole, in
/// `desired`'s order. Fields `desired` leaves out are not listed: the
/// server fills those in again. Of the metadata only labels and annotations
/// are the bundle's; `status` is never applied. At most
/// [`MAX_FIELDS_SHOWN`], then `... and N more`.
pub(crate) fn changed_fields(live: &serde_json::Value, desired: &serde_json::Value) -> Vec<String> {
    fn key(path: &str, key: &str) -> String {
        let plain = !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        match (path.is_empty(), plain) {
            (true, true) => key.to_owned(),
            (false, true) => format!("{path}.{key}"),
            (_, false) => format!("{path}[{key:?}]"),
        }
    }
    fn walk(
        path: &str,
        live: Option<&serde_json::Value>,
        desired: &serde_json::Value,
        out: &mut Vec<String>,
    ) {
        match desired {
            serde_json::Value::Object(fields) if !fields.is_empty() => {
                for (name, value) in fields {
                    if path.is_empty() && ["apiVersion", "kind", "status"].contains(&name.as_str())
                    {
                        continue;
                    }
                    if path == "metadata" && !["labels", "annotations"].contains(&name.as_str()) {
                        continue;
                    }
                    let child = live.and_then(|l| l.get(name));
                    walk(&key(path, name), child, value, out);
                }
            }
            leaf => {
                if live != Some(leaf) {
                    out.push(path.to_owned());
                }
            }
        }
    }
    let mut out = Vec::new();
    walk("", Some(live), desired, &mut out);
    if out.len() > MAX_FIELDS_SHOWN {
        let more = out.len() - MAX_FIELDS_SHOWN;
        out.truncate(MAX_FIELDS_SHOWN);
        out.push(format!("... and {more} more"));
    }
    out
}

/// One CRD of a plan.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CrdChange {
    /// The CRD's name.
    pub name: String,
    /// What applying it would do.
    #[serde(flatten)]
    pub verdict: CrdVerdict,
}

/// Where bundle content is read from.
pub(crate) struct ContentSources<'a> {
    /// The registry address of each catalog (`namespace/name`).
    pub registries: &'a BTreeMap<String, String>,
    /// Image registries reached over plain HTTP.
    pub insecure_registries: &'a [String],
}

/// The changes of every bundle `resolution` installs into `namespace`.
pub(crate) async fn changes(
    client: &Client,
    namespace: &str,
    resolution: &Resolution,
    sources: &ContentSources<'_>,
) -> Vec<BundleChanges> {
    let mut all = Vec::with_capacity(resolution.operators.len());
    for operator in &resolution.operators {
        all.push(bundle_changes(client, namespace, operator, sources).await);
    }
    all
}

async fn bundle_changes(
    client: &Client,
    namespace: &str,
    operator: &ResolvedOperator,
    sources: &ContentSources<'_>,
) -> BundleChanges {
    let mut changes = BundleChanges {
        csv: operator.name.clone(),
        replaces: operator.replaces.clone(),
        objects: Vec::new(),
        crds: Vec::new(),
        rbac: Vec::new(),
        unavailable: None,
    };
    let steps = match plan_steps(client, namespace, operator, sources).await {
        Ok(steps) => steps,
        Err(error) => {
            changes.unavailable = Some(format!("{error:#}"));
            return changes;
        }
    };
    for step in &steps {
        let manifest = step
            .resource
            .manifest
            .as_deref()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(text).ok())
            .unwrap_or_default();
        match step.resource.kind.as_str() {
            "CustomResourceDefinition" => changes.crds.push(CrdChange {
                name: step.resource.name.clone(),
                verdict: crd_verdict(client, &manifest).await,
            }),
            kind => {
                if kind == "ClusterServiceVersion" {
                    changes.rbac = rbac_change(client, namespace, operator, &manifest).await;
                }
                let (action, fields) = action(client, namespace, step, &manifest).await;
                changes.objects.push(ObjectChange {
                    kind: kind.to_owned(),
                    name: step.resource.name.clone(),
                    action,
                    fields,
                });
            }
        }
    }
    changes
}

/// The steps catalog-operator would plan for `operator`.
async fn plan_steps(
    client: &Client,
    namespace: &str,
    operator: &ResolvedOperator,
    sources: &ContentSources<'_>,
) -> Result<Vec<Step>> {
    let key = format!("{}/{}", operator.catalog_namespace, operator.catalog);
    let address = sources
        .registries
        .get(&key)
        .with_context(|| format!("catalog {key} has no registry address"))?;
    let registry = crate::sources::connect_registry(address)
        .await
        .with_context(|| format!("connecting to catalog {key} at {address}"))?;
    let bundle = registry
        .get_bundle(&operator.package, &operator.channel, &operator.name)
        .await
        .with_context(|| format!("reading {} from catalog {key}", operator.name))?;
    let properties = properties_annotation(
        bundle
            .properties
            .iter()
            .map(|p| (p.r#type.as_str(), p.value.as_str())),
    );
    let mut content = BundleContent {
        csv_name: bundle.csv_name.clone(),
        csv_json: bundle.csv_json.clone(),
        objects: bundle.object.clone(),
    };
    if needs_unpack(&content, &bundle.bundle_path) {
        content = BundleContent {
            csv_name: bundle.csv_name.clone(),
            csv_json: String::new(),
            objects: image_objects(
                client,
                (&operator.catalog_namespace, &operator.catalog),
                &bundle.bundle_path,
                sources,
            )
            .await?,
        };
    }
    let source = BundleSource {
        catalog: operator.catalog.clone(),
        catalog_namespace: operator.catalog_namespace.clone(),
    };
    let mut steps = steps_for_bundle(
        &content,
        &source,
        namespace,
        operator.replaces.as_deref(),
        Some(&properties),
    )?;
    if operator.subscription.is_none() {
        steps.push(dependency_subscription_step(operator));
    }
    listing_order(&mut steps);
    Ok(steps)
}

/// The credentials a bundle of `catalog` is pulled with: this machine's
/// auth files, then the pull secrets bundle-unpacker would use (the catalog
/// namespace's default ServiceAccount's, then the catalog's `spec.secrets`;
/// later wins). A secret the user may not read is said on stderr and left
/// out: the pull then goes as far as the other credentials take it.
async fn pull_credentials(
    client: &Client,
    catalog_namespace: &str,
    catalog: &str,
) -> olm_oci::DockerConfig {
    use olm_oci::pull_secrets::{self, PullSecret};
    let (mut config, notes) = pull_secrets::local_credentials();
    for note in notes {
        eprintln!("warning: ignoring an unreadable auth file: {note}");
    }
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), catalog_namespace);
    let account_secrets: Vec<String> = match accounts.get_opt("default").await {
        Ok(found) => found
            .and_then(|account| account.image_pull_secrets)
            .unwrap_or_default()
            .into_iter()
            .map(|r| r.name)
            .collect(),
        Err(_) => Vec::new(),
    };
    let catalogs: Api<CatalogSource> = Api::namespaced(client.clone(), catalog_namespace);
    let catalog_secrets = match catalogs.get_opt(catalog).await {
        Ok(found) => found.map(|c| c.spec.secrets).unwrap_or_default(),
        Err(_) => Vec::new(),
    };
    let names = pull_secrets::secret_names(
        account_secrets.iter().map(String::as_str),
        catalog_secrets.iter().map(String::as_str),
    );
    let secrets_api: Api<Secret> = Api::namespaced(client.clone(), catalog_namespace);
    let mut secrets = Vec::new();
    for name in names {
        match secrets_api.get_opt(&name).await {
            Ok(Some(secret)) => secrets.push(PullSecret {
                name,
                type_: secret.type_.unwrap_or_default(),
                data: secret
                    .data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(key, value)| (key, value.0))
                    .collect(),
            }),
            Ok(None) => eprintln!("warning: pull secret {catalog_namespace}/{name} not found"),
            Err(error) => {
                eprintln!("warning: cannot read pull secret {catalog_namespace}/{name}: {error}");
            }
        }
    }
    let (from_secrets, notes) = pull_secrets::credentials(&secrets);
    for note in notes {
        eprintln!("warning: pull secret ignored: {note}");
    }
    config.merge(from_secrets);
    config
}

/// A bundle image's manifests: as OLM stored them when it unpacked the
/// image already (in the catalog's namespace), else pulled.
async fn image_objects(
    client: &Client,
    (catalog_namespace, catalog): (&str, &str),
    image: &str,
    sources: &ContentSources<'_>,
) -> Result<Vec<String>> {
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), catalog_namespace);
    let name = unpacked::config_map_name(image);
    if let Ok(Some(stored)) = config_maps.get_opt(&name).await {
        let annotations = stored.metadata.annotations.clone().unwrap_or_default();
        let data: BTreeMap<String, Vec<u8>> = stored
            .binary_data
            .unwrap_or_default()
            .into_iter()
            .map(|(key, value)| (key, value.0))
            .collect();
        if annotations.get(unpacked::SOURCE_IMAGE).map(String::as_str) == Some(image)
            && let Ok(bundle) = unpacked::decode(&annotations, &data)
        {
            return Ok(bundle.objects);
        }
    }
    let reference = olm_oci::Reference::parse(image)
        .map_err(|error| anyhow!("bundle image {image}: {error}"))?;
    let mut options = olm_oci::ClientOptions {
        credentials: pull_credentials(client, catalog_namespace, catalog).await,
        ..olm_oci::ClientOptions::default()
    };
    for host in sources.insecure_registries {
        options = options.plain_http(host.clone());
    }
    let oci = olm_oci::Client::new(options)?;
    let pulled = oci
        .pull_to_memory(
            &reference,
            &olm_oci::ExtractOptions::only(&[
                olm_catalog::bundle::MANIFESTS_DIR,
                olm_catalog::bundle::METADATA_DIR,
            ]),
        )
        .await
        .with_context(|| format!("pulling the bundle image {image}"))?;
    let options = LoadBundleOptions {
        image_labels: Some(pulled.manifest.labels()),
        ..LoadBundleOptions::new()
    };
    let bundle = RegistryBundle::load_files(
        pulled
            .files
            .iter()
            .map(|(path, bytes)| (path.as_str(), bytes.clone())),
        &options,
    )
    .with_context(|| format!("reading the bundle image {image}"))?;
    Ok(bundle.objects.iter().map(|m| m.json.clone()).collect())
}

/// What applying `step` (its object `desired`) does: create it, or, when it
/// exists, update the fields [`changed_fields`] lists, or leave it.
async fn action(
    client: &Client,
    namespace: &str,
    step: &Step,
    desired: &serde_json::Value,
) -> (String, Vec<String>) {
    let gvk = GroupVersionKind::gvk(
        &step.resource.group,
        &step.resource.version,
        &step.resource.kind,
    );
    let kind = match step.resource.kind.as_str() {
        // Bundle Secrets are Secrets.
        "BundleSecret" => GroupVersionKind::gvk("", "v1", "Secret"),
        _ => gvk,
    };
    let (resource, capabilities) = match kube::discovery::pinned_kind(client, &kind).await {
        Ok(found) => found,
        // A kind the cluster does not serve yet (its CRD comes with the
        // bundle): nothing of it exists.
        Err(_) => return ("create".to_owned(), Vec::new()),
    };
    let api: Api<DynamicObject> = match capabilities.scope {
        Scope::Namespaced => Api::namespaced_with(client.clone(), namespace, &resource),
        Scope::Cluster => Api::all_with(client.clone(), &resource),
    };
    match api.get_opt(&step.resource.name).await {
        // catalog-operator creates these or leaves them as they are.
        Ok(Some(_))
            if ["ClusterServiceVersion", "Subscription"].contains(&step.resource.kind.as_str()) =>
        {
            ("present".to_owned(), Vec::new())
        }
        Ok(Some(live)) => {
            let live = serde_json::to_value(&live).unwrap_or_default();
            let fields = changed_fields(&live, desired);
            let action = if fields.is_empty() {
                "unchanged"
            } else {
                "update"
            };
            (action.to_owned(), fields)
        }
        Ok(None) => ("create".to_owned(), Vec::new()),
        Err(error) => (format!("unknown: {error}"), Vec::new()),
    }
}

/// What applying a bundle's CRD would do, judged as catalog-operator judges
/// it: stored versions kept, and every existing custom resource of a
/// changed, served version valid under the new schema.
async fn crd_verdict(client: &Client, manifest: &serde_json::Value) -> CrdVerdict {
    let desired: CustomResourceDefinition = match serde_json::from_value(manifest.clone()) {
        Ok(desired) => desired,
        Err(error) => {
            return CrdVerdict::Refused(format!("not a v1 CustomResourceDefinition: {error}"));
        }
    };
    let name = desired.metadata.name.clone().unwrap_or_default();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let existing = match crds.get_opt(&name).await {
        Ok(Some(existing)) => existing,
        Ok(None) => return CrdVerdict::Create,
        Err(error) => {
            return CrdVerdict::UpdateWithWarning(format!("cannot read CRD {name}: {error}"));
        }
    };
    if let Err(refusal) = crd::check_stored_versions_of(&existing, &desired) {
        return CrdVerdict::Refused(refusal);
    }
    if crd::unchanged(&existing, &desired) {
        return CrdVerdict::Unchanged;
    }
    for check in crd::versions_to_check(&existing, &desired) {
        let resource = ApiResource {
            group: existing.spec.group.clone(),
            version: check.version.clone(),
            api_version: format!("{}/{}", existing.spec.group, check.version),
            kind: existing.spec.names.kind.clone(),
            plural: existing.spec.names.plural.clone(),
        };
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let mut params = ListParams::default().limit(crd::CR_PAGE_SIZE);
        loop {
            let page = match api.list(&params).await {
                Ok(page) => page,
                Err(error) => {
                    return CrdVerdict::UpdateWithWarning(format!(
                        "cannot list the existing {} to check them: {error}",
                        existing.spec.names.plural
                    ));
                }
            };
            let objects: Vec<serde_json::Value> = page
                .items
                .iter()
                .filter_map(|object| serde_json::to_value(object).ok())
                .collect();
            if let Some(refusal) = crd::first_invalid(&name, &check, &objects) {
                return if crd::converts_by_webhook(&desired) {
                    CrdVerdict::UpdateWithWarning(refusal)
                } else {
                    CrdVerdict::Refused(refusal)
                };
            }
            match page.metadata.continue_.filter(|token| !token.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => break,
            }
        }
    }
    CrdVerdict::Update
}

/// The RBAC the new CSV grants beside the installed CSV it replaces.
async fn rbac_change(
    client: &Client,
    namespace: &str,
    operator: &ResolvedOperator,
    manifest: &serde_json::Value,
) -> Vec<RbacChange> {
    let Ok(new) = serde_json::from_value::<ClusterServiceVersion>(manifest.clone()) else {
        return Vec::new();
    };
    let old = match &operator.replaces {
        Some(replaced) => Api::<ClusterServiceVersion>::namespaced(client.clone(), namespace)
            .get_opt(replaced)
            .await
            .ok()
            .flatten(),
        None => None,
    };
    rbac_diff(old.as_ref(), &new)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn live_service() -> serde_json::Value {
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": "gadgets",
                "uid": "live-uid",
                "resourceVersion": "41",
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "labels": {"app": "gadgets"},
            },
            "spec": {
                "ports": [{"port": 80, "protocol": "TCP"}],
                "selector": {"app": "gadgets"},
                // Filled in by the server.
                "clusterIP": "10.0.0.7",
                "type": "ClusterIP",
            },
            "status": {"loadBalancer": {}},
        })
    }

    #[test]
    fn an_update_lists_the_fields_the_bundle_changes() {
        let same = json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "gadgets", "labels": {"app": "gadgets"}},
            "spec": {"ports": [{"port": 80, "protocol": "TCP"}], "selector": {"app": "gadgets"}},
        });
        for (case, desired, want) in [
            ("identical but for server fields", same.clone(), vec![]),
            (
                "a changed list is one field",
                json!({"spec": {"ports": [{"port": 8080, "protocol": "TCP"}]}}),
                vec!["spec.ports"],
            ),
            (
                "a new label, its key quoted",
                json!({"metadata": {"labels": {"app": "gadgets", "app.kubernetes.io/name": "g"}}}),
                vec![r#"metadata.labels["app.kubernetes.io/name"]"#],
            ),
            (
                "server metadata, kind and status are not the bundle's",
                json!({
                    "apiVersion": "v2",
                    "kind": "Other",
                    "metadata": {"uid": "other", "resourceVersion": "1", "name": "x"},
                    "status": {"loadBalancer": {"ingress": []}},
                }),
                vec![],
            ),
            (
                "a changed type and a new field, in the bundle's order",
                json!({"spec": {"type": 7, "sessionAffinity": "ClientIP"}}),
                vec!["spec.type", "spec.sessionAffinity"],
            ),
            (
                "an empty object that replaces a full one",
                json!({"spec": {"selector": {}}}),
                vec!["spec.selector"],
            ),
        ] {
            assert_eq!(changed_fields(&live_service(), &desired), want, "{case}");
        }
    }

    #[test]
    fn a_long_list_of_changes_is_cut_and_counted() {
        let desired: serde_json::Map<String, serde_json::Value> = (0..MAX_FIELDS_SHOWN + 5)
            .map(|i| (format!("key{i:02}"), json!(i)))
            .collect();
        let fields = changed_fields(&json!({}), &json!({"data": desired}));
        assert_eq!(fields.len(), MAX_FIELDS_SHOWN + 1);
        assert_eq!(fields[0], "data.key00");
        assert_eq!(fields[MAX_FIELDS_SHOWN], "... and 5 more");
    }
}
