//! The InstallPlan steps of one resolved bundle: its CSV (with `replaces`
//! set to the CSV it upgrades and the resolved properties recorded), then
//! every other object of the bundle in bundle order, then the RBAC its
//! install strategy asks for; the Subscription step a dependency gets; and
//! the order upstream lists a plan's steps in.
//! Upstream: `NewStepResourceFromBundle`, `NewStepsFromBundle` and
//! `NewServiceAccountStepResources` (`pkg/controller/registry/resolver/steps.go`).

use olm_api::install_plan::{Step, StepResource, StepStatus};
use olm_resolver::ResolvedOperator;
use serde_json::{Map, Value, json};

/// Where a bundle came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleSource {
    /// The catalog's name.
    pub catalog: String,
    /// The catalog's namespace.
    pub catalog_namespace: String,
}

/// A resolved bundle's content, as the registry returns it (`GetBundle`:
/// `csvJson` and `object`) or as the unpacker stored it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BundleContent {
    /// The CSV's name.
    pub csv_name: String,
    /// The CSV as JSON; when empty, the CSV is looked for among `objects`.
    pub csv_json: String,
    /// Every manifest of the bundle as JSON, the CSV included.
    pub objects: Vec<String>,
}

/// Why a bundle cannot become steps.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StepsError {
    /// A manifest is not a JSON object with apiVersion, kind and name.
    #[error("bundle {csv}: manifest {index} is not a Kubernetes object: {reason}")]
    BadManifest {
        /// The bundle's CSV.
        csv: String,
        /// Position of the manifest in the bundle.
        index: usize,
        /// What is wrong.
        reason: String,
    },
    /// The bundle has no CSV.
    #[error("bundle {csv}: no ClusterServiceVersion in the bundle")]
    NoCsv {
        /// The bundle's CSV name, as resolved.
        csv: String,
    },
}

/// The annotation upstream records resolved properties under.
pub const PROPERTIES_ANNOTATION: &str = olm_api::labels::PROPERTIES;

fn parse(csv: &str, index: usize, text: &str) -> Result<Map<String, Value>, StepsError> {
    let bad = |reason: &str| StepsError::BadManifest {
        csv: csv.to_owned(),
        index,
        reason: reason.to_owned(),
    };
    let value: Value = serde_json::from_str(text).map_err(|e| bad(&e.to_string()))?;
    let Value::Object(object) = value else {
        return Err(bad("not a JSON object"));
    };
    for field in ["apiVersion", "kind"] {
        if object
            .get(field)
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            return Err(bad(&format!("{field} is missing")));
        }
    }
    if object
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return Err(bad("metadata.name is missing"));
    }
    Ok(object)
}

fn step_of(resolving: &str, source: &BundleSource, object: &Map<String, Value>) -> Step {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let mut kind = object["kind"].as_str().unwrap_or_default().to_owned();
    if kind == "Secret" {
        // Bundle secrets are their own step kind upstream.
        kind = "BundleSecret".to_owned();
    }
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    Step {
        resolving: resolving.to_owned(),
        resource: StepResource {
            catalog_source: source.catalog.clone(),
            catalog_source_namespace: source.catalog_namespace.clone(),
            group: group.to_owned(),
            version: version.to_owned(),
            kind,
            name: name.to_owned(),
            manifest: Some(Value::Object(object.clone()).to_string()),
        },
        optional: None,
        status: StepStatus::UNKNOWN,
    }
}

/// The steps of one bundle installed into `namespace`. `replaces` is the
/// installed CSV the bundle upgrades (written into the CSV's `spec.replaces`,
/// as upstream does), and `properties` the resolved properties JSON for the
/// `operatorframework.io/properties` annotation.
///
/// After the bundle's own objects come the RBAC steps of the CSV's install
/// strategy ([`rbac_steps`]).
pub fn steps_for_bundle(
    bundle: &BundleContent,
    source: &BundleSource,
    namespace: &str,
    replaces: Option<&str>,
    properties: Option<&str>,
) -> Result<Vec<Step>, StepsError> {
    let csv_name = &bundle.csv_name;
    let mut parsed = Vec::with_capacity(bundle.objects.len());
    for (index, text) in bundle.objects.iter().enumerate() {
        parsed.push(parse(csv_name, index, text)?);
    }
    let is_csv = |o: &Map<String, Value>| o["kind"] == "ClusterServiceVersion";
    let mut csv = if bundle.csv_json.trim().is_empty() {
        parsed
            .iter()
            .find(|o| is_csv(o))
            .cloned()
            .ok_or_else(|| StepsError::NoCsv {
                csv: csv_name.clone(),
            })?
    } else {
        parse(csv_name, usize::MAX, &bundle.csv_json)?
    };
    if let Some(Value::Object(metadata)) = csv.get_mut("metadata")
        && !namespace.is_empty()
    {
        metadata.insert("namespace".to_owned(), Value::String(namespace.to_owned()));
    }
    let spec = csv
        .entry("spec")
        .or_insert_with(|| Value::Object(Map::new()));
    if let (Some(replaces), Value::Object(spec)) = (replaces, spec) {
        spec.insert("replaces".to_owned(), Value::String(replaces.to_owned()));
    }
    if let (Some(properties), Some(Value::Object(metadata))) = (properties, csv.get_mut("metadata"))
    {
        let annotations = metadata
            .entry("annotations")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(annotations) = annotations {
            annotations.insert(
                PROPERTIES_ANNOTATION.to_owned(),
                Value::String(properties.to_owned()),
            );
        }
    }
    let csv = as_upstream_writes(csv);
    let mut steps = vec![step_of(csv_name, source, &csv)];
    steps.extend(
        parsed
            .iter()
            .filter(|o| !is_csv(o))
            .map(|o| step_of(csv_name, source, o)),
    );
    if let Ok(typed) =
        serde_json::from_value::<olm_api::csv::ClusterServiceVersion>(Value::Object(csv))
    {
        steps.extend(rbac_steps(&typed, source));
    }
    Ok(steps)
}

/// The RBAC steps of a CSV (its `metadata.namespace` set to where it is
/// installed): for each service account of its install strategy, the
/// ServiceAccount (unless it is `default`), then its Roles, RoleBindings,
/// ClusterRoles and ClusterRoleBindings, built by [`crate::csv_rbac`], the
/// rules olm-operator also creates them with, so both write the same
/// objects. Service accounts come in name order; upstream walks a Go map,
/// whose order changes from run to run.
///
/// A CSV whose install strategy is not `deployment` gets no RBAC steps:
/// upstream refuses to build the plan at all, where we install the CSV and
/// olm-operator marks it Failed with upstream's `InvalidInstallStrategy`
/// reason, which says what is wrong where the user looks.
pub fn rbac_steps(csv: &olm_api::csv::ClusterServiceVersion, source: &BundleSource) -> Vec<Step> {
    let csv_name = csv.metadata.name.clone().unwrap_or_default();
    let Ok(by_account) = crate::csv_rbac::rbac_for_csv(csv) else {
        return Vec::new();
    };
    let mut steps = Vec::new();
    let mut push = |value: Result<Value, serde_json::Error>| {
        if let Ok(Value::Object(object)) = value {
            steps.push(step_of(&csv_name, source, &object));
        }
    };
    for (account, permissions) in by_account {
        if account != "default" {
            push(serde_json::to_value(&permissions.service_account));
        }
        permissions
            .roles
            .iter()
            .for_each(|o| push(serde_json::to_value(o)));
        permissions
            .role_bindings
            .iter()
            .for_each(|o| push(serde_json::to_value(o)));
        permissions
            .cluster_roles
            .iter()
            .for_each(|o| push(serde_json::to_value(o)));
        permissions
            .cluster_role_bindings
            .iter()
            .for_each(|o| push(serde_json::to_value(o)));
    }
    steps
}

/// The CSV as upstream writes it: upstream decodes the bundle's CSV into its
/// Go types and encodes it again, which writes every field its CRD requires
/// even where the bundle left it out (`resources[].name` of an owned CRD,
/// for one: etcd 0.9.4 omits it, and the API server refuses the CSV without
/// it). Our typed CSV does the same (`olm-api`'s corpus round-trip test holds
/// it to losing nothing else). A CSV our types cannot read is left as it is
/// for the API server to judge.
fn as_upstream_writes(csv: Map<String, Value>) -> Map<String, Value> {
    let Ok(typed) =
        serde_json::from_value::<olm_api::csv::ClusterServiceVersion>(Value::Object(csv.clone()))
    else {
        return csv;
    };
    match serde_json::to_value(&typed) {
        Ok(Value::Object(written)) => written,
        _ => csv,
    }
}

/// Whether a resolved bundle's content must come from its image rather than
/// from the catalog: the catalog carries no manifests, or only the CSV stub
/// a registry builds from `olm.csv.metadata` (it has no install strategy
/// deployments, so it cannot be installed). Catalogs built with
/// `--migrate-level bundle-object-to-csv-metadata`, as current ones are,
/// always need the image. A bundle with no image is installed from whatever
/// the catalog has.
pub fn needs_unpack(bundle: &BundleContent, bundle_path: &str) -> bool {
    if bundle_path.is_empty() {
        return false;
    }
    if bundle.objects.is_empty() {
        return true;
    }
    let csv_text = if bundle.csv_json.trim().is_empty() {
        bundle
            .objects
            .iter()
            .find(|o| o.contains("\"ClusterServiceVersion\""))
    } else {
        Some(&bundle.csv_json)
    };
    let Some(csv) = csv_text.and_then(|t| serde_json::from_str::<Value>(t).ok()) else {
        return true;
    };
    csv.pointer("/spec/install/spec/deployments")
        .is_none_or(Value::is_null)
}

/// The order upstream lists steps in a plan: CSVs, then CRDs, then the rest
/// (a stable sort: bundle order within each).
pub fn listing_order(steps: &mut [Step]) {
    let rank = |s: &Step| match s.resource.kind.as_str() {
        "ClusterServiceVersion" => 0,
        "CustomResourceDefinition" => 1,
        _ => 2,
    };
    steps.sort_by_key(rank);
}

/// The name upstream gives the Subscription it creates for a dependency:
/// `<package>-<channel>-<catalog>-<catalog namespace>`.
pub fn dependency_subscription_name(
    package: &str,
    channel: &str,
    catalog: &str,
    catalog_namespace: &str,
) -> String {
    format!("{package}-{channel}-{catalog}-{catalog_namespace}")
}

/// The Subscription step of a resolved dependency (an operator no
/// Subscription asked for): it starts at the resolved CSV, approved
/// automatically, as upstream creates it.
pub fn dependency_subscription_step(operator: &ResolvedOperator) -> Step {
    let name = dependency_subscription_name(
        &operator.package,
        &operator.channel,
        &operator.catalog,
        &operator.catalog_namespace,
    );
    let manifest = json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "Subscription",
        "metadata": { "name": name },
        "spec": {
            "name": operator.package,
            "channel": operator.channel,
            "source": operator.catalog,
            "sourceNamespace": operator.catalog_namespace,
            "startingCSV": operator.name,
            "installPlanApproval": "Automatic",
        }
    });
    Step {
        resolving: operator.name.clone(),
        resource: StepResource {
            catalog_source: operator.catalog.clone(),
            catalog_source_namespace: operator.catalog_namespace.clone(),
            group: "operators.coreos.com".to_owned(),
            version: "v1alpha1".to_owned(),
            kind: "Subscription".to_owned(),
            name,
            manifest: Some(manifest.to_string()),
        },
        optional: None,
        status: StepStatus::UNKNOWN,
    }
}

/// The `operatorframework.io/properties` annotation of a resolved bundle's
/// CSV: `{"properties": [{"type": ..., "value": ...}]}` with each value as
/// JSON (kept as a string when it is not JSON), from the registry's
/// `(type, value)` pairs.
pub fn properties_annotation<'a>(
    properties: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> String {
    let properties: Vec<Value> = properties
        .into_iter()
        .map(|(type_, value)| {
            let value = serde_json::from_str::<Value>(value)
                .unwrap_or_else(|_| Value::String(value.to_owned()));
            json!({"type": type_, "value": value})
        })
        .collect();
    json!({ "properties": properties }).to_string()
}
