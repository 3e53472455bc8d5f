//! Delegated authentication and authorization: anonymous and unauthorized
//! callers are refused, through the aggregator and directly.

use std::process::Command;

use crate::harness::{
    SECRET, SERVER_NAMESPACE, SERVICE, TEAM_NAMESPACE, apply, harness, kubectl_ok,
};

/// kubectl as the holder of `token` (no client certificate).
fn kubectl_as(token: &str, args: &[&str]) -> (bool, String, String) {
    let plane = olm_testkit::control_plane();
    let kubeconfig: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(plane.kubeconfig_path()).unwrap())
            .unwrap();
    let ca = kubeconfig["clusters"][0]["cluster"]["certificate-authority"]
        .as_str()
        .unwrap()
        .to_owned();
    let empty = harness().dir.join("empty-kubeconfig");
    std::fs::write(&empty, "").unwrap();
    let kubectl = olm_testkit::assets::find_pinned("kubectl")
        .or_else(|_| olm_testkit::assets::find("kubectl"))
        .unwrap();
    let out = Command::new(kubectl)
        .arg(format!("--kubeconfig={}", empty.display()))
        .arg(format!("--server={}", plane.server_url()))
        .arg(format!("--certificate-authority={ca}"))
        .arg(format!("--token={token}"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn token_for(sa: &str) -> String {
    kubectl_ok(&["create", "token", sa, "-n", TEAM_NAMESPACE])
        .trim()
        .to_owned()
}

/// Calls a replica directly (not through the aggregator), verifying its
/// certificate with the published bundle; returns the HTTP status.
fn direct(path: &str, token: Option<&str>, extra_header: Option<&str>) -> String {
    let h = harness();
    let host = format!("{SERVICE}.{SERVER_NAMESPACE}.svc");
    for _ in 0..5 {
        let bundle = kubectl_ok(&[
            "get",
            "secret",
            SECRET,
            "-n",
            SERVER_NAMESPACE,
            "-o",
            "jsonpath={.data.ca\\.crt}",
        ]);
        let bundle =
            base64::Engine::decode(&base64::engine::general_purpose::STANDARD, bundle.trim())
                .unwrap();
        let ca = h.dir.join(format!("ca-{}.crt", std::process::id()));
        std::fs::write(&ca, bundle).unwrap();
        let mut command = Command::new("curl");
        command
            .args([
                "-s",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "--max-time",
                "10",
                "--cacert",
            ])
            .arg(&ca)
            .arg("--resolve")
            .arg(format!("{host}:5443:{}", h.replicas[0].address))
            .arg(format!("https://{host}:5443{path}"));
        if let Some(token) = token {
            command.args(["-H", &format!("Authorization: Bearer {token}")]);
        }
        if let Some(header) = extra_header {
            command.args(["-H", header]);
        }
        let out = command.output().unwrap();
        // 60: the bundle rotated between reading and calling; read it again.
        if out.status.code() == Some(60) || out.status.code() == Some(35) {
            continue;
        }
        assert!(out.status.success(), "curl failed: {:?}", out);
        return String::from_utf8_lossy(&out.stdout).into_owned();
    }
    panic!("could not verify the replica's certificate with the published bundle");
}

#[test]
fn anonymous_and_unauthorized_requests_are_refused() {
    harness();
    apply(&[
        serde_json::json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "nobody", "namespace": TEAM_NAMESPACE}}),
        serde_json::json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "reader", "namespace": TEAM_NAMESPACE}}),
        serde_json::json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "packagemanifest-reader", "namespace": TEAM_NAMESPACE},
            "rules": [{"apiGroups": ["packages.operators.coreos.com"], "resources": ["packagemanifests"], "verbs": ["get", "list"]}]}),
        serde_json::json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "packagemanifest-reader", "namespace": TEAM_NAMESPACE},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "packagemanifest-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": TEAM_NAMESPACE}]}),
    ]);
    let nobody = token_for("nobody");
    let reader = token_for("reader");
    let path = format!(
        "/apis/packages.operators.coreos.com/v1/namespaces/{TEAM_NAMESPACE}/packagemanifests"
    );

    // Through the aggregator.
    let (ok, _, err) = kubectl_as(&nobody, &["get", "packagemanifests", "-n", TEAM_NAMESPACE]);
    assert!(!ok && err.contains("forbidden"), "{err}");
    let (ok, out, err) = kubectl_as(
        &reader,
        &[
            "get",
            "packagemanifests",
            "-n",
            TEAM_NAMESPACE,
            "-o",
            "name",
        ],
    );
    assert!(ok && out.contains("gizmo-operator"), "{err}");
    let (ok, _, err) = kubectl_as(
        "not-a-token",
        &["get", "packagemanifests", "-n", TEAM_NAMESPACE],
    );
    assert!(!ok && err.contains("Unauthorized"), "{err}");

    // Directly: we authenticate and authorize ourselves.
    assert_eq!(direct(&path, None, None), "401", "anonymous");
    assert_eq!(
        direct(&path, None, Some("X-Remote-User: system:admin")),
        "401",
        "spoofed front-proxy header without its certificate"
    );
    assert_eq!(
        direct(&path, Some("not-a-token"), None),
        "401",
        "invalid token"
    );
    assert_eq!(
        direct(&path, Some(&nobody), None),
        "403",
        "token without RBAC"
    );
    assert_eq!(direct(&path, Some(&reader), None), "200", "token with RBAC");
    assert_eq!(
        direct(
            "/apis/packages.operators.coreos.com/v1/packagemanifests",
            Some(&reader),
            None
        ),
        "403",
        "reader may not list across namespaces"
    );
    assert_eq!(
        direct("/healthz", None, None),
        "200",
        "health needs no credentials"
    );
}
