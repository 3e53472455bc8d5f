//! Our CRDs against upstream's (`../shared/testdata/crds`), which are the
//! contract: names, scope, versions, subresources, printer columns and every
//! schema keyword except `description`, at every property path.
//!
//! A difference fails the test unless [`DELIBERATE`] lists it (by exact CRD,
//! version, path and keyword) with the reason. Every difference found is printed
//! so a failure can be triaged in one run, and an entry of [`DELIBERATE`] that no
//! longer matches anything fails too, so the list only shrinks.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// Differences we keep on purpose: (CRD name, version, path, keyword, reason).
const DELIBERATE: &[(&str, &str, &str, &str, &str)] = &[
    // ARCHITECTURE rule 4: no enum anywhere under status. Upstream's
    // metav1.Condition schema restricts status to True/False/Unknown; an enum in
    // status is what wedged status writes after the OpenShift rollback, so our
    // status schemas stay open (values are still True/False/Unknown in practice).
    (
        "catalogsources.operators.coreos.com",
        "v1alpha1",
        ".status.conditions[].status",
        "enum",
        "rule 4: no enum in status schemas",
    ),
    (
        "olmconfigs.operators.coreos.com",
        "v1",
        ".status.conditions[].status",
        "enum",
        "rule 4: no enum in status schemas",
    ),
    (
        "operatorconditions.operators.coreos.com",
        "v1",
        ".status.conditions[].status",
        "enum",
        "rule 4: no enum in status schemas",
    ),
    (
        "operatorconditions.operators.coreos.com",
        "v2",
        ".status.conditions[].status",
        "enum",
        "rule 4: no enum in status schemas",
    ),
    (
        "operatorgroups.operators.coreos.com",
        "v1",
        ".status.conditions[].status",
        "enum",
        "rule 4: no enum in status schemas",
    ),
    // Upstream generated its CRDs against k8s.io/api v0.35; the workspace builds
    // against the Kubernetes 1.34 API (k8s-openapi feature v1_34), whose core
    // types lack these 1.35 fields. They appear when the workspace moves to 1.35.
    (
        "clusterserviceversions.operators.coreos.com",
        "v1alpha1",
        ".spec.install.spec.deployments[].spec.template.spec.schedulingGroup",
        "presence",
        "Kubernetes 1.35 PodSpec field; we build against the 1.34 API",
    ),
    (
        "clusterserviceversions.operators.coreos.com",
        "v1alpha1",
        ".spec.install.spec.deployments[].spec.template.spec.volumes[].projected.sources[].podCertificate.userAnnotations",
        "presence",
        "Kubernetes 1.35 volume field; we build against the 1.34 API",
    ),
    (
        "subscriptions.operators.coreos.com",
        "v1alpha1",
        ".spec.config.volumes[].projected.sources[].podCertificate.userAnnotations",
        "presence",
        "Kubernetes 1.35 volume field; we build against the 1.34 API",
    ),
    // Issue 14: where there is no ClusterOperator API, marketplace-operator
    // reports OLM's components (the ClusterOperator conditions and versions)
    // in the OperatorHub's status. Additive: an older CRD prunes the field.
    (
        "operatorhubs.config.openshift.io",
        "v1",
        ".status.components",
        "presence",
        "ours: ClusterOperator-style status where there is no ClusterOperator API",
    ),
];

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Difference {
    crd: String,
    version: String,
    path: String,
    keyword: String,
    upstream: String,
    ours: String,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} {} [{}]: upstream {} / ours {}",
            self.crd, self.version, self.path, self.keyword, self.upstream, self.ours
        )
    }
}

struct Collector {
    crd: String,
    version: String,
    found: Vec<Difference>,
}

impl Collector {
    fn add(&mut self, path: &str, keyword: &str, upstream: Option<&Value>, ours: Option<&Value>) {
        let show = |v: Option<&Value>| v.map_or_else(|| "<absent>".to_owned(), Value::to_string);
        self.found.push(Difference {
            crd: self.crd.clone(),
            version: self.version.clone(),
            path: path.to_owned(),
            keyword: keyword.to_owned(),
            upstream: show(upstream),
            ours: show(ours),
        });
    }

    fn compare(
        &mut self,
        path: &str,
        keyword: &str,
        upstream: Option<&Value>,
        ours: Option<&Value>,
    ) {
        if normalise(keyword, upstream) != normalise(keyword, ours) {
            self.add(path, keyword, upstream, ours);
        }
    }

    /// Compares two schema nodes and everything below them.
    fn schema(&mut self, path: &str, upstream: &Value, ours: &Value) {
        let empty = serde_json::Map::new();
        let up = upstream.as_object().unwrap_or(&empty);
        let our = ours.as_object().unwrap_or(&empty);
        let keywords: BTreeSet<&String> = up.keys().chain(our.keys()).collect();
        for keyword in keywords {
            match keyword.as_str() {
                "description" => {}
                "properties" => {
                    let up_props = up
                        .get("properties")
                        .and_then(Value::as_object)
                        .unwrap_or(&empty);
                    let our_props = our
                        .get("properties")
                        .and_then(Value::as_object)
                        .unwrap_or(&empty);
                    let names: BTreeSet<&String> =
                        up_props.keys().chain(our_props.keys()).collect();
                    for name in names {
                        let child = format!("{path}.{name}");
                        match (up_props.get(name), our_props.get(name)) {
                            (Some(u), Some(o)) => self.schema(&child, u, o),
                            (u, o) => self.add(
                                &child,
                                "presence",
                                u.map(|_| &Value::Bool(true)),
                                o.map(|_| &Value::Bool(true)),
                            ),
                        }
                    }
                }
                "items" | "additionalProperties" => {
                    let suffix = if keyword == "items" { "[]" } else { "{}" };
                    match (up.get(keyword), our.get(keyword)) {
                        (Some(u @ Value::Object(_)), Some(o @ Value::Object(_))) => {
                            self.schema(&format!("{path}{suffix}"), u, o);
                        }
                        (u, o) => self.compare(path, keyword, u, o),
                    }
                }
                other => self.compare(path, other, up.get(other), our.get(other)),
            }
        }
    }
}

/// Makes order-insensitive keywords comparable.
fn normalise(keyword: &str, value: Option<&Value>) -> Option<Value> {
    let value = value?.clone();
    match (keyword, value) {
        ("required" | "shortNames" | "categories", Value::Array(mut items)) => {
            items.sort_by_key(Value::to_string);
            Some(Value::Array(items))
        }
        // JSONSchemaProps holds bounds as floats; upstream's YAML has integers.
        (_, Value::Number(n)) => n.as_f64().map(Value::from),
        (_, value) => Some(value),
    }
}

fn strip_descriptions(columns: Option<&Value>) -> Value {
    let mut columns = columns.cloned().unwrap_or(Value::Array(Vec::new()));
    if let Value::Array(items) = &mut columns {
        for item in items {
            if let Value::Object(object) = item {
                object.remove("description");
            }
        }
    }
    columns
}

fn compare_crd(upstream: &Value, ours: &Value) -> Vec<Difference> {
    let name = upstream["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let mut c = Collector {
        crd: name,
        version: "-".into(),
        found: Vec::new(),
    };
    c.compare(
        ".spec",
        "group",
        upstream["spec"].get("group"),
        ours["spec"].get("group"),
    );
    c.compare(
        ".spec",
        "scope",
        upstream["spec"].get("scope"),
        ours["spec"].get("scope"),
    );
    for field in [
        "kind",
        "listKind",
        "plural",
        "singular",
        "shortNames",
        "categories",
    ] {
        c.compare(
            ".spec.names",
            field,
            upstream["spec"]["names"].get(field),
            ours["spec"]["names"].get(field),
        );
    }
    let versions = |crd: &Value| -> BTreeMap<String, Value> {
        crd["spec"]["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| (v["name"].as_str().unwrap_or_default().to_owned(), v.clone()))
            .collect()
    };
    let (up_versions, our_versions) = (versions(upstream), versions(ours));
    let names: BTreeSet<&String> = up_versions.keys().chain(our_versions.keys()).collect();
    for version in names {
        c.version = version.clone();
        let (Some(u), Some(o)) = (up_versions.get(version), our_versions.get(version)) else {
            c.add(
                "",
                "version",
                up_versions.get(version),
                our_versions.get(version),
            );
            continue;
        };
        for field in [
            "served",
            "storage",
            "subresources",
            "deprecated",
            "deprecationWarning",
            "selectableFields",
        ] {
            c.compare("", field, u.get(field), o.get(field));
        }
        c.compare(
            "",
            "additionalPrinterColumns",
            Some(&strip_descriptions(u.get("additionalPrinterColumns"))),
            Some(&strip_descriptions(o.get("additionalPrinterColumns"))),
        );
        c.schema(
            "",
            &u["schema"]["openAPIV3Schema"],
            &o["schema"]["openAPIV3Schema"],
        );
    }
    c.found
}

/// CRDs we ship whose upstream is not in the testdata, and where it is.
const OUTSIDE_TESTDATA: &[(&str, &str)] = &[(
    "configs.samples.operator.openshift.io",
    "OpenShift's samples API: openshift/api samples/v1/zz_generated.crd-manifests/00_configs.crd.yaml",
)];

#[test]
fn crds_match_upstream_except_deliberate_differences() {
    let Some(testdata) = common::testdata() else {
        return;
    };
    let ours: BTreeMap<String, Value> = olm_api::crd::all()
        .into_iter()
        .map(|crd| {
            let value = serde_json::to_value(&crd).expect("crd serializes");
            (crd.metadata.name.clone().unwrap_or_default(), value)
        })
        .collect();

    let mut upstream_files: Vec<_> = std::fs::read_dir(testdata.join("crds"))
        .expect("testdata/crds is readable")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    upstream_files.sort();
    assert_eq!(
        upstream_files.len(),
        9,
        "expected the 9 upstream CRDs in {}",
        testdata.display()
    );

    let mut differences = Vec::new();
    let mut seen = BTreeSet::new();
    for file in &upstream_files {
        let upstream = common::read_yaml(file);
        let name = upstream["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        seen.insert(name.clone());
        match ours.get(&name) {
            Some(our) => differences.extend(compare_crd(&upstream, our)),
            None => panic!("we ship no CRD named {name} (upstream {})", file.display()),
        }
    }
    for name in ours.keys() {
        assert!(
            seen.contains(name) || OUTSIDE_TESTDATA.iter().any(|(crd, _)| crd == name),
            "we ship {name}, which upstream does not have"
        );
    }

    let deliberate = |d: &Difference| {
        DELIBERATE.iter().any(|(crd, version, path, keyword, _)| {
            d.crd == *crd && d.version == *version && d.path == *path && d.keyword == *keyword
        })
    };
    let (allowed, unexpected): (Vec<_>, Vec<_>) = differences.iter().partition(|d| deliberate(d));
    let stale: Vec<_> = DELIBERATE
        .iter()
        .filter(|(crd, version, path, keyword, _)| {
            !allowed.iter().any(|d| {
                d.crd == *crd && d.version == *version && d.path == *path && d.keyword == *keyword
            })
        })
        .collect();

    println!("{} deliberate differences:", allowed.len());
    for d in &allowed {
        println!("  {d}");
    }
    if !unexpected.is_empty() || !stale.is_empty() {
        let mut report = format!(
            "{} unexpected differences from upstream:\n",
            unexpected.len()
        );
        for d in &unexpected {
            report.push_str(&format!("  {d}\n"));
        }
        if !stale.is_empty() {
            report.push_str("entries of DELIBERATE that match nothing any more (remove them):\n");
            for entry in stale {
                report.push_str(&format!("  {entry:?}\n"));
            }
        }
        panic!("{report}");
    }
}
