//! Reading a namespace state file: plain Kubernetes YAML (several documents,
//! or a `List`) of ClusterServiceVersions, Subscriptions, CatalogSources and
//! an OperatorGroup, turned into the resolver's plain data.

use std::{collections::BTreeMap, io::Read as _, path::Path};

use anyhow::{Context, Result, bail};
use olm_resolver::{InstalledCsv, Subscription};
use serde_json::Value;

/// The OperatorGroup annotation that keeps the global catalog namespace out
/// of resolution.
pub(crate) const EXCLUDE_GLOBAL_ANNOTATION: &str =
    "olm.operatorframework.io/exclude-global-namespace-resolution";
/// The most documents a state file may hold.
pub(crate) const MAX_STATE_DOCUMENTS: usize = 10_000;
/// The largest state file read, in bytes.
pub(crate) const MAX_STATE_BYTES: u64 = 64 << 20;

/// A CatalogSource as the preview reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CatalogSourceInfo {
    /// Name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// `spec.priority`.
    pub priority: i32,
    /// False when `status.connectionState.lastObservedState` is set and not
    /// `READY`.
    pub healthy: bool,
}

/// Everything the state file says.
#[derive(Debug, Clone, Default)]
pub(crate) struct StateFile {
    /// Namespace of the first namespaced object, if any.
    pub namespace: Option<String>,
    /// Installed CSVs by namespace.
    pub csvs: BTreeMap<String, Vec<InstalledCsv>>,
    /// Subscriptions by namespace.
    pub subscriptions: BTreeMap<String, Vec<Subscription>>,
    /// CatalogSources.
    pub catalog_sources: Vec<CatalogSourceInfo>,
    /// Namespaces whose OperatorGroup excludes the global catalog namespace.
    pub exclude_global: Vec<String>,
}

/// The text of the state file at `path`, refused when it is larger than
/// `max_bytes`. The read itself stops past the limit: the file's size as
/// listed says nothing for a pipe or a device (`/dev/zero` lists 0 bytes),
/// and a file can grow between listing and reading.
pub(crate) fn read_state_file(path: &Path, max_bytes: u64) -> Result<String> {
    let reading = || format!("reading {}", path.display());
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .with_context(reading)?
        .take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .with_context(reading)?;
    if bytes.len() as u64 > max_bytes {
        bail!("{} is larger than {max_bytes} bytes", path.display());
    }
    String::from_utf8(bytes).with_context(reading)
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    let mut cur = v;
    for p in path {
        match cur.get(p) {
            Some(next) => cur = next,
            None => return "",
        }
    }
    cur.as_str().unwrap_or("")
}

/// Parses the YAML text of a state file.
pub(crate) fn parse_state(text: &str) -> Result<StateFile> {
    let mut state = StateFile::default();
    let mut objects = Vec::new();
    for (i, doc) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        if i >= MAX_STATE_DOCUMENTS {
            bail!("state file has more than {MAX_STATE_DOCUMENTS} documents");
        }
        let value: Value = serde::Deserialize::deserialize(doc)
            .with_context(|| format!("state file document {}", i + 1))?;
        match value {
            Value::Null => {}
            Value::Object(_) if value.get("kind").and_then(Value::as_str) == Some("List") => {
                if let Some(items) = value.get("items").and_then(Value::as_array) {
                    objects.extend(items.iter().cloned());
                }
            }
            Value::Object(_) => objects.push(value),
            _ => bail!("state file document {} is not an object", i + 1),
        }
    }
    for o in &objects {
        let kind = str_at(o, &["kind"]);
        let name = str_at(o, &["metadata", "name"]).to_owned();
        let namespace = str_at(o, &["metadata", "namespace"]).to_owned();
        if name.is_empty() {
            bail!("a {kind} in the state file has no metadata.name");
        }
        if state.namespace.is_none() && !namespace.is_empty() && kind != "CatalogSource" {
            state.namespace = Some(namespace.clone());
        }
        match kind {
            "ClusterServiceVersion" => {
                if olm_resolver::objects::is_copied(o) {
                    continue;
                }
                state
                    .csvs
                    .entry(namespace)
                    .or_default()
                    .push(olm_resolver::objects::installed_csv(o).map_err(anyhow::Error::msg)?);
            }
            "Subscription" => {
                state
                    .subscriptions
                    .entry(namespace)
                    .or_default()
                    .push(olm_resolver::objects::subscription(o));
            }
            "CatalogSource" => {
                let observed = str_at(o, &["status", "connectionState", "lastObservedState"]);
                let priority = o
                    .pointer("/spec/priority")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                state.catalog_sources.push(CatalogSourceInfo {
                    name,
                    namespace,
                    priority: i32::try_from(priority).context("spec.priority out of range")?,
                    healthy: observed.is_empty() || observed == "READY",
                });
            }
            "OperatorGroup"
                if str_at(o, &["metadata", "annotations", EXCLUDE_GLOBAL_ANNOTATION]) == "true" =>
            {
                state.exclude_global.push(namespace);
            }
            _ => {}
        }
    }
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_files_over_the_limit_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        // Sparse files: the test costs a read of the limit, not a write.
        let sparse = |name: &str, len: u64| {
            let path = dir.path().join(name);
            std::fs::File::create(&path).unwrap().set_len(len).unwrap();
            path
        };
        let at_limit = sparse("at-limit.yaml", MAX_STATE_BYTES);
        let over_limit = sparse("over-limit.yaml", MAX_STATE_BYTES + 1);
        // Lists no size at all, and never ends.
        let endless = Path::new("/dev/zero");
        assert_eq!(
            read_state_file(&at_limit, MAX_STATE_BYTES).unwrap().len() as u64,
            MAX_STATE_BYTES
        );
        for path in [over_limit.as_path(), endless] {
            let error = read_state_file(path, MAX_STATE_BYTES).unwrap_err();
            assert_eq!(
                error.to_string(),
                format!("{} is larger than 67108864 bytes", path.display())
            );
        }
    }

    #[test]
    fn reads_objects_and_infers_properties() {
        let state = parse_state(
            r#"
apiVersion: v1
kind: List
items:
- apiVersion: operators.coreos.com/v1alpha1
  kind: ClusterServiceVersion
  metadata: {name: etcd.v0.9.2, namespace: ns}
  spec:
    version: 0.9.2
    replaces: etcd.v0.9.0
    customresourcedefinitions:
      owned: [{name: etcdclusters.etcd.database.coreos.com, version: v1beta2, kind: EtcdCluster}]
- kind: ClusterServiceVersion
  metadata: {name: copied, namespace: ns, labels: {olm.copiedFrom: other}}
---
kind: Subscription
metadata: {name: etcd, namespace: ns}
spec: {name: etcd, channel: alpha, source: community, sourceNamespace: olm}
status: {installedCSV: etcd.v0.9.2}
---
kind: CatalogSource
metadata: {name: community, namespace: olm}
spec: {priority: -100}
status: {connectionState: {lastObservedState: TRANSIENT_FAILURE}}
"#,
        )
        .unwrap();
        assert_eq!(state.namespace.as_deref(), Some("ns"));
        let csvs = &state.csvs["ns"];
        assert_eq!(csvs.len(), 1);
        assert_eq!(
            csvs[0].properties,
            vec![(
                "olm.gvk".to_owned(),
                r#"{"group":"etcd.database.coreos.com","version":"v1beta2","kind":"EtcdCluster"}"#
                    .to_owned()
            )]
        );
        assert_eq!(state.subscriptions["ns"][0].installed_csv, "etcd.v0.9.2");
        assert_eq!(
            state.catalog_sources,
            vec![CatalogSourceInfo {
                name: "community".into(),
                namespace: "olm".into(),
                priority: -100,
                healthy: false
            }]
        );
    }

    #[test]
    fn hostile_input_is_refused_with_a_message() {
        for bad in [
            "- a\n- b\n",
            "kind: Subscription\nmetadata: {}\n",
            "kind: CatalogSource\nmetadata: {name: x}\nspec: {priority: 99999999999}\n",
            "kind: ClusterServiceVersion\nmetadata:\n  name: x\n  annotations:\n    operatorframework.io/properties: '{not json'\n",
            "{{{{",
        ] {
            assert!(parse_state(bad).is_err(), "{bad}");
        }
        let many = "---\nkind: X\nmetadata: {name: a}\n".repeat(MAX_STATE_DOCUMENTS + 1);
        assert!(parse_state(&many).is_err());
    }
}
