//! The example's committed YAML, checked without a cluster: the CRD copies
//! are what the Rust types generate, the bundles pass OLM's own validation
//! and say what their versions should, the catalog fragment becomes a valid
//! catalog once the bundles are rendered into it, and the install manifests
//! fit the package.
//!
//! When the Greeting types change, regenerate the CRD copies with
//!
//! ```sh
//! OLM_BLESS=1 cargo test -p example-operator --test manifests
//! ```

// Test helpers: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use example_operator::{
    Greeting,
    greeting::CRD_NAME,
    settings::{DEFAULT_PROBE_ADDRESS, OPERATOR_VERSION_ENV, WATCH_NAMESPACE_ENV},
};
use kube::CustomResourceExt;
use olm_catalog::{
    bundle::{Payload, RegistryBundle},
    fbc::Catalog,
    validate::{validate_bundle, validate_catalog},
};
use serde_json::{Value, json};

/// The package's versions, oldest first.
const VERSIONS: [&str; 3] = ["0.1.0", "0.2.0", "0.3.0"];
/// The package name every bundle, the catalog and the Subscription use.
const PACKAGE: &str = "example-operator";
/// The CRD's file in each bundle's `manifests/`, named as operator-sdk names it.
const CRD_FILE: &str = "example.olm-rs.dev_greetings.yaml";
/// The first lines of each generated CRD copy.
const CRD_HEADER: &str = "# Generated from the Rust types in examples/operator/src/greeting.rs;\n\
     # do not edit. Regenerate with\n\
     #   OLM_BLESS=1 cargo test -p example-operator --test manifests\n";

fn examples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn bundle_dir(version: &str) -> PathBuf {
    examples_dir().join("bundles").join(PACKAGE).join(version)
}

fn csv_name(version: &str) -> String {
    format!("{PACKAGE}.v{version}")
}

fn load_bundle(version: &str) -> RegistryBundle {
    let dir = bundle_dir(version);
    RegistryBundle::load_dir(&dir)
        .unwrap_or_else(|error| panic!("cannot read bundle {}: {error}", dir.display()))
}

/// The CSV as JSON, as OLM serves it.
fn csv_of(bundle: &RegistryBundle) -> Value {
    serde_json::from_str(&bundle.csv_json).unwrap()
}

fn read_yaml(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()));
    serde_yaml_ng::from_str(&text)
        .unwrap_or_else(|error| panic!("{} is not YAML: {error}", path.display()))
}

fn generated_crd_yaml() -> String {
    let body = serde_yaml_ng::to_string(&Greeting::crd()).unwrap();
    format!("{CRD_HEADER}{body}")
}

#[test]
fn committed_crds_are_what_the_rust_types_generate() {
    let want = generated_crd_yaml();
    let bless = std::env::var_os("OLM_BLESS").is_some_and(|value| value == "1");
    let mut stale = Vec::new();
    for version in VERSIONS {
        let path = bundle_dir(version).join("manifests").join(CRD_FILE);
        if bless {
            // Written outside manifests/ and renamed into it, so that the
            // tests reading the bundles meanwhile never see half a file.
            let fresh = bundle_dir(version).join(format!(".{CRD_FILE}.new"));
            std::fs::write(&fresh, &want).unwrap();
            std::fs::rename(&fresh, &path).unwrap();
            continue;
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        if have != want {
            let diff = similar::TextDiff::from_lines(&have, &want);
            stale.push(format!(
                "{} is stale:\n{}",
                path.display(),
                diff.unified_diff()
                    .context_radius(2)
                    .header("committed", "generated")
            ));
        }
    }
    assert!(
        stale.is_empty(),
        "the bundles' Greeting CRD differs from the Rust types; run \
         `OLM_BLESS=1 cargo test -p example-operator --test manifests` and commit the result.\n\n{}",
        stale.join("\n")
    );
}

#[test]
fn every_bundle_passes_olm_validation_without_a_warning() {
    for version in VERSIONS {
        let report = validate_bundle(&load_bundle(version));
        assert!(report.problems.is_empty(), "bundle {version}:\n{report}");
    }
}

#[test]
fn every_bundle_names_its_own_version_everywhere() {
    for version in VERSIONS {
        let bundle = load_bundle(version);
        let csv = csv_of(&bundle);
        assert_eq!(bundle.name, csv_name(version));
        assert_eq!(bundle.package, PACKAGE);
        assert_eq!(bundle.channels, ["stable"]);
        assert_eq!(bundle.default_channel.as_deref(), Some("stable"));
        assert_eq!(csv["spec"]["version"], version);

        let image = format!("ghcr.io/olm-rs/example-operator:{version}");
        assert_eq!(
            csv["metadata"]["annotations"]["containerImage"],
            image.as_str()
        );
        let container = operator_container(&csv);
        assert_eq!(container["image"], image.as_str(), "bundle {version}");
        assert_eq!(
            env_var(container, OPERATOR_VERSION_ENV)["value"],
            version,
            "bundle {version}"
        );
    }
}

#[test]
fn the_bundles_form_the_upgrade_graph_of_the_channel() {
    let graph: Vec<(Option<String>, Option<String>)> = VERSIONS
        .iter()
        .map(|version| {
            let csv = csv_of(&load_bundle(version));
            (
                csv["spec"]["replaces"].as_str().map(str::to_owned),
                csv["metadata"]["annotations"]["olm.skipRange"]
                    .as_str()
                    .map(str::to_owned),
            )
        })
        .collect();
    assert_eq!(
        graph,
        [
            (None, None),
            (Some(csv_name("0.1.0")), None),
            (Some(csv_name("0.2.0")), Some(">=0.1.0 <0.3.0".to_owned())),
        ]
    );
}

#[test]
fn the_csv_describes_what_the_operator_does() {
    let crd = serde_json::to_value(Greeting::crd()).unwrap();
    let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"];
    for version in VERSIONS {
        let csv = csv_of(&load_bundle(version));
        let owned = &csv["spec"]["customresourcedefinitions"]["owned"];
        assert_eq!(owned.as_array().map(Vec::len), Some(1), "bundle {version}");
        let owned = &owned[0];
        assert_eq!(
            (&owned["name"], &owned["version"], &owned["kind"]),
            (&json!(CRD_NAME), &json!("v1"), &json!("Greeting"))
        );
        // Descriptors point at fields the schema has, so a renamed field
        // cannot leave the console describing a field that is gone.
        for (descriptors, part) in [("specDescriptors", "spec"), ("statusDescriptors", "status")] {
            for descriptor in owned[descriptors].as_array().unwrap() {
                let path = descriptor["path"].as_str().unwrap();
                assert!(
                    schema[part]["properties"].get(path).is_some(),
                    "bundle {version}: {descriptors} path {path:?} is not a field of {part}"
                );
            }
        }
        let message_described = owned["statusDescriptors"]
            .as_array()
            .unwrap()
            .iter()
            .any(|descriptor| descriptor["path"] == "message");
        assert!(
            message_described,
            "bundle {version}: status.message undescribed"
        );

        // The sample a console offers is a Greeting this operator accepts.
        let examples: Vec<Greeting> = serde_json::from_str(
            csv["metadata"]["annotations"]["alm-examples"]
                .as_str()
                .unwrap(),
        )
        .unwrap_or_else(|error| panic!("bundle {version}: alm-examples: {error}"));
        assert_eq!(examples.len(), 1, "bundle {version}");

        let modes: BTreeMap<&str, bool> = csv["spec"]["installModes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|mode| {
                (
                    mode["type"].as_str().unwrap(),
                    mode["supported"].as_bool().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            modes,
            BTreeMap::from([
                ("AllNamespaces", true),
                ("MultiNamespace", true),
                ("OwnNamespace", true),
                ("SingleNamespace", true),
            ]),
            "bundle {version}"
        );
        for field in [
            "displayName",
            "description",
            "minKubeVersion",
            "provider",
            "maintainers",
        ] {
            assert!(
                !csv["spec"][field].is_null(),
                "bundle {version}: spec.{field} missing"
            );
        }
    }
}

#[test]
fn the_deployment_runs_restricted_probed_and_scoped_by_olm() {
    let probe_port: u16 = DEFAULT_PROBE_ADDRESS
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    for version in VERSIONS {
        let csv = csv_of(&load_bundle(version));
        let install = &csv["spec"]["install"];
        assert_eq!(install["strategy"], "deployment");
        let deployments = install["spec"]["deployments"].as_array().unwrap();
        assert_eq!(deployments.len(), 1, "bundle {version}");
        assert_eq!(deployments[0]["name"], "example-operator");
        let spec = &deployments[0]["spec"];
        assert_eq!(spec["replicas"], 1);
        let pod = &spec["template"]["spec"];
        assert_eq!(pod["serviceAccountName"], "example-operator");
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        assert_eq!(
            pod["securityContext"]["seccompProfile"]["type"],
            "RuntimeDefault"
        );
        assert!(
            pod["tolerations"]
                .as_array()
                .unwrap()
                .iter()
                .any(|toleration| {
                    toleration["key"] == "olm.operatorframework.io/real-node"
                        && toleration["operator"] == "Exists"
                        && toleration["effect"] == "NoSchedule"
                }),
            "bundle {version}: no toleration for the real node"
        );

        let container = operator_container(&csv);
        assert_eq!(
            container["securityContext"],
            json!({
                "allowPrivilegeEscalation": false,
                "readOnlyRootFilesystem": true,
                "runAsNonRoot": true,
                "capabilities": {"drop": ["ALL"]},
                "seccompProfile": {"type": "RuntimeDefault"},
            }),
            "bundle {version}"
        );
        assert_eq!(
            env_var(container, WATCH_NAMESPACE_ENV)["valueFrom"]["fieldRef"]["fieldPath"],
            "metadata.annotations['olm.targetNamespaces']"
        );
        let ports = container["ports"].as_array().unwrap();
        assert!(
            ports
                .iter()
                .any(|port| port["name"] == "probes" && port["containerPort"] == probe_port),
            "bundle {version}: the probes port is not {probe_port}"
        );
        for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
            assert_eq!(
                container[probe]["httpGet"],
                json!({"path": path, "port": "probes"}),
                "bundle {version}: {probe}"
            );
        }
        assert!(container["resources"]["requests"]["cpu"].is_string());
        assert!(container["resources"]["requests"]["memory"].is_string());
        assert!(container["resources"]["limits"]["memory"].is_string());
    }
}

#[test]
fn the_operator_may_do_what_it_does_and_no_more() {
    for version in VERSIONS {
        let csv = csv_of(&load_bundle(version));
        let install = &csv["spec"]["install"]["spec"];
        assert!(
            install["clusterPermissions"].is_null(),
            "bundle {version}: cluster permissions are not needed"
        );
        let permissions = install["permissions"].as_array().unwrap();
        assert_eq!(permissions.len(), 1);
        assert_eq!(permissions[0]["serviceAccountName"], "example-operator");
        let rules = &permissions[0]["rules"];
        assert_eq!(
            rules,
            &json!([
                {"apiGroups": ["example.olm-rs.dev"], "resources": ["greetings"],
                 "verbs": ["get", "list", "watch"]},
                {"apiGroups": ["example.olm-rs.dev"], "resources": ["greetings/status"],
                 "verbs": ["get", "update", "patch"]},
                {"apiGroups": ["", "events.k8s.io"], "resources": ["events"],
                 "verbs": ["create", "patch"]},
            ]),
            "bundle {version}"
        );
    }
}

/// The catalog fragment plus the bundles rendered as `opm render` renders
/// them (with a stand-in image) must be a catalog `opm validate` accepts,
/// whose channel says what the bundles' CSVs say.
#[test]
fn the_catalog_fragment_with_the_rendered_bundles_is_a_valid_catalog() {
    let dir = examples_dir().join("catalog").join(PACKAGE);
    let mut catalog = Catalog::load_dir(&dir)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", dir.display()));
    assert!(catalog.warnings.is_empty(), "{:?}", catalog.warnings);
    assert!(
        catalog.bundles.is_empty(),
        "olm.bundle documents are rendered at publish time, not committed"
    );
    assert_eq!(catalog.packages.len(), 1);
    assert_eq!(catalog.packages[0].name, PACKAGE);
    assert_eq!(catalog.packages[0].default_channel, "stable");
    assert_eq!(catalog.channels.len(), 1);
    let channel = catalog.channels[0].clone();
    assert_eq!(
        (channel.package.as_str(), channel.name.as_str()),
        (PACKAGE, "stable")
    );

    let bundles: Vec<RegistryBundle> = VERSIONS.iter().map(|v| load_bundle(v)).collect();
    let entries: Vec<(String, Option<String>, Option<String>)> = channel
        .entries
        .iter()
        .map(|entry| {
            (
                entry.name.clone(),
                entry.replaces.clone(),
                entry.skip_range.clone(),
            )
        })
        .collect();
    let from_csvs: Vec<(String, Option<String>, Option<String>)> = bundles
        .iter()
        .map(|bundle| {
            let csv = csv_of(bundle);
            (
                bundle.name.clone(),
                csv["spec"]["replaces"].as_str().map(str::to_owned),
                csv["metadata"]["annotations"]["olm.skipRange"]
                    .as_str()
                    .map(str::to_owned),
            )
        })
        .collect();
    assert_eq!(entries, from_csvs, "the channel and the CSVs disagree");

    for (bundle, version) in bundles.iter().zip(VERSIONS) {
        let image = format!("registry.invalid/olm-rs/example-operator-bundle:v{version}");
        catalog
            .bundles
            .push(bundle.to_fbc_bundle(&image, Payload::BundleObjects));
    }
    let report = validate_catalog(&catalog);
    assert!(report.problems.is_empty(), "{report}");
}

#[test]
fn the_install_manifests_subscribe_to_the_package() {
    let install = examples_dir().join("install");
    let namespace = read_yaml(&install.join("namespace.yaml"));
    let group = read_yaml(&install.join("operatorgroup.yaml"));
    let subscription = read_yaml(&install.join("subscription.yaml"));
    let namespace = namespace["metadata"]["name"].as_str().unwrap();
    assert_eq!(namespace, "example-operator");

    assert_eq!(group["kind"], "OperatorGroup");
    assert_eq!(group["metadata"]["namespace"], namespace);
    assert_eq!(group["spec"]["targetNamespaces"], json!([namespace]));

    assert_eq!(subscription["kind"], "Subscription");
    assert_eq!(subscription["metadata"]["namespace"], namespace);
    let spec = &subscription["spec"];
    assert_eq!(spec["name"], PACKAGE);
    assert_eq!(spec["channel"], "stable");
    assert_eq!(spec["source"], "example-catalog");
    assert_eq!(spec["sourceNamespace"], "olm");
    assert_eq!(spec["installPlanApproval"], "Automatic");
    assert!(spec["startingCSV"].is_null(), "startingCSV pins a version");

    let greeting: Greeting =
        serde_json::from_value(read_yaml(&install.join("greeting.yaml"))).unwrap();
    assert_eq!(greeting.metadata.namespace.as_deref(), Some(namespace));
}

/// The operator stands for a user's workload: it must build without OLM.
#[test]
fn the_operator_depends_on_no_olm_crate() {
    let manifest =
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
            .unwrap();
    let mut section = "";
    let mut olm_dependencies = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
        } else if section == "[dependencies]" && line.starts_with("olm") {
            olm_dependencies.push(line);
        }
    }
    assert!(
        olm_dependencies.is_empty(),
        "OLM crates among the operator's dependencies: {olm_dependencies:?}"
    );
}

fn operator_container(csv: &Value) -> &Value {
    let containers =
        &csv["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"]["containers"];
    assert_eq!(containers.as_array().map(Vec::len), Some(1));
    &containers[0]
}

fn env_var<'a>(container: &'a Value, name: &str) -> &'a Value {
    container["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|var| var["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in the container's env"))
}
