//! `kubectl olm status` against a real control plane, as an admin runs it:
//! the built binary with a kubeconfig, after an operator installs from a
//! catalog served over gRPC, and after a Subscription that cannot resolve.
//!
//! `kubectl olm search` reads packageserver's PackageManifest API, which
//! this control plane does not run: here only its message for that case is
//! tested; its rows are unit-tested in the crate.

// Test helpers: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::process::Output;

use olm_catalog::bundle::{LoadBundleOptions, RegistryBundle};
use olm_e2e::{
    eventually,
    harness::{
        Setup, WAIT, bundle_files_at, create_subscription, push_bundle, serve_catalog,
        start_services_with, subscribe, wait_installed,
    },
};
use serde_json::Value;

/// What a run said: its exit status, and stdout with the test's random
/// names made fixed (the namespace, and the InstallPlan's five random
/// letters, so the columns keep their width).
fn said(output: &Output, namespace: &str) -> (Option<i32>, String) {
    let stdout = String::from_utf8_lossy(&output.stdout).replace(namespace, "NAMESPACE");
    let mut fixed = String::new();
    let mut rest = stdout.as_str();
    while let Some(at) = rest.find("install-") {
        let end = (at + "install-".len() + 5).min(rest.len());
        fixed.push_str(&rest[..at]);
        fixed.push_str("install-xxxxx");
        rest = &rest[end..];
    }
    fixed.push_str(rest);
    (output.status.code(), fixed)
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[tokio::test]
async fn status_shows_a_healthy_install_and_the_cause_of_a_failure() {
    let setup = Setup::new("e2e-olm-status").await;
    let namespace = setup.namespace().to_owned();
    let files = bundle_files_at(&setup.group, "1.0.0", None);
    let bundle = RegistryBundle::load_files(files.clone(), &LoadBundleOptions::new()).unwrap();
    let image = push_bundle(&setup.registry.host(), &files, &bundle).await;
    let (server, _dir) = serve_catalog(&bundle, &image).await;
    let services =
        start_services_with(&namespace, &setup.registry.host(), Default::default()).await;
    subscribe(&setup.client, &namespace, &server.addr().to_string(), None).await;
    wait_installed(&setup.client, &namespace, "gadgets", "gadgets.v1.0.0").await;

    // Installed: everything healthy, exit 0. The catalog's connection state
    // may trail the install by a resync.
    let healthy = eventually("status healthy", WAIT, || async {
        let output = olm_e2e::kubectl_olm(&namespace, &["status"]).await;
        match said(&output, &namespace) {
            (Some(0), table) => Ok(table),
            (code, table) => Err(format!("exit {code:?}\n{table}{}", stderr(&output))),
        }
    })
    .await;
    let expected = "\
KIND                   NAME             STATE          HEALTH   CAUSE
Subscription           gadgets          AtLatestKnown  Healthy
ClusterServiceVersion  gadgets.v1.0.0   Succeeded      Healthy
InstallPlan            install-xxxxx    Complete       Healthy
CatalogSource          gadgets-catalog  READY          Healthy
";
    assert_eq!(healthy, expected);
    let output = olm_e2e::kubectl_olm(&namespace, &["status", "gadgets"]).await;
    assert_eq!(said(&output, &namespace), (Some(0), expected.to_owned()));

    let output = olm_e2e::kubectl_olm(&namespace, &["status", "-o", "json"]).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let rows: Value = serde_json::from_slice(&output.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 4, "{rows:?}");
    assert!(
        rows.iter()
            .all(|r| r["health"] == "Healthy" && r["namespace"] == namespace.as_str()),
        "{rows:?}"
    );
    assert_eq!(rows[0]["kind"], "Subscription");
    assert_eq!(rows[0]["name"], "gadgets");

    // A package without a Subscription is bad input.
    let output = olm_e2e::kubectl_olm(&namespace, &["status", "sprockets"]).await;
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains(&format!(
            "no Subscription for package sprockets in namespace {namespace}; see kubectl olm search / install"
        )),
        "{}",
        stderr(&output)
    );

    // A Subscription to a package the catalog lacks cannot resolve: status
    // prints the table with the cause and exits 1.
    create_subscription(
        &setup.client,
        &namespace,
        "no-such-package",
        "gadgets-catalog",
        None,
    )
    .await;
    let (table, output) = eventually("status unhealthy", WAIT, || async {
        let output = olm_e2e::kubectl_olm(&namespace, &["status", "no-such-package"]).await;
        match said(&output, &namespace) {
            (Some(1), table) if table.contains("ResolutionFailed") => Ok((table, output)),
            (code, table) => Err(format!("exit {code:?}\n{table}{}", stderr(&output))),
        }
    })
    .await;
    assert_eq!(
        table,
        "\
KIND           NAME             STATE   HEALTH     CAUSE
Subscription   no-such-package  <none>  Unhealthy  ResolutionFailed: ConstraintsNotSatisfiable: \
constraints not satisfiable: no operators found in package no-such-package in the catalog \
referenced by subscription no-such-package, subscription no-such-package exists
CatalogSource  gadgets-catalog  READY   Healthy
"
    );
    assert!(
        stderr(&output).contains(&format!(
            "Subscription {namespace}/no-such-package is unhealthy"
        )),
        "{}",
        stderr(&output)
    );

    // Without packageserver (this control plane runs none), search says
    // what to check, and exits as a cluster failure.
    let output = olm_e2e::kubectl_olm(&namespace, &["search", "gadgets"]).await;
    assert_eq!(output.status.code(), Some(5), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("kubectl get apiservice v1.packages.operators.coreos.com"),
        "{}",
        stderr(&output)
    );

    services.stop().await;
    olm_e2e::harness::delete_crds(&setup.client, &[format!("gadgets.{}", setup.group)]).await;
}
