//! Running upstream OLM's resolver through the harness in
//! `xtask/upstream/resolver` (`cargo xtask upstream` builds it; see
//! [`crate::assets::upstream_resolver`]): one home for its input and output,
//! shared by the differential tests and the side-by-side bench.

use std::{collections::BTreeSet, path::Path, process::Command};

use serde_json::{Value, json};

/// One Subscription as the harness reads it.
#[derive(Debug, Clone, Default)]
pub struct Subscription {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// `spec.name`, the package.
    pub package: String,
    /// `spec.channel`; empty for the package's default channel.
    pub channel: String,
    /// `spec.source`.
    pub catalog: String,
    /// `spec.sourceNamespace`.
    pub catalog_namespace: String,
    /// `spec.startingCSV`; may be empty.
    pub starting_csv: String,
}

/// What one harness run gave.
#[derive(Debug, Clone)]
pub struct Run {
    /// Loading the catalogs (and warming upstream's resolver cache).
    pub load_ms: f64,
    /// Each timed resolution.
    pub resolve_ms: Vec<f64>,
    /// The CSVs chosen with their catalogs, or upstream's message (without
    /// the harness's "namespace N: " prefix).
    pub outcome: Result<BTreeSet<(String, String)>, String>,
}

/// Resolves `subscriptions` against the catalogs in `catalogs` (one FBC
/// directory per CatalogSource, named as it, all in `catalog_namespace`),
/// `runs` times through `Resolver.Resolve`. The subscriptions file is
/// written into `scratch`.
///
/// # Panics
///
/// When the harness cannot run or its answer cannot be read (a test or
/// bench fixture).
pub fn run(
    harness: &Path,
    catalogs: &Path,
    subscriptions: &[Subscription],
    runs: usize,
    catalog_namespace: &str,
    scratch: &Path,
) -> Run {
    let input: Vec<Value> = subscriptions
        .iter()
        .map(|s| {
            json!({"namespace": s.namespace, "name": s.name, "package": s.package, "channel": s.channel,
                "catalog": s.catalog, "catalogNamespace": s.catalog_namespace, "startingCSV": s.starting_csv})
        })
        .collect();
    let file = scratch.join("subscriptions.json");
    std::fs::write(&file, serde_json::to_vec_pretty(&input).unwrap_or_default())
        .unwrap_or_else(|e| panic!("writing {}: {e}", file.display()));
    let output = Command::new(harness)
        .arg("--catalogs")
        .arg(catalogs)
        .arg("--subscriptions")
        .arg(&file)
        .args([
            "--runs",
            &runs.to_string(),
            "--namespace",
            catalog_namespace,
        ])
        // Resolver.Resolve alone (the default, `steps`, adds
        // catalog-operator's step generation).
        .args(["--entry", "resolve"])
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", harness.display()));
    assert!(
        output.status.success(),
        "upstream's resolver harness failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("reading the harness's answer: {e}"));
    let error = result["error"].as_str().unwrap_or_default();
    let outcome = if error.is_empty() {
        Ok(result["operators"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|o| {
                (
                    o["name"].as_str().unwrap_or_default().to_owned(),
                    o["catalog"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect())
    } else {
        // The harness names the namespace it resolved; upstream's message
        // follows.
        let message = subscriptions
            .iter()
            .find_map(|s| error.strip_prefix(&format!("namespace {}: ", s.namespace)))
            .unwrap_or(error);
        Err(message.to_owned())
    };
    Run {
        load_ms: result["load_ms"].as_f64().unwrap_or_default(),
        resolve_ms: result["resolve_ms"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_f64)
            .collect(),
        outcome,
    }
}
