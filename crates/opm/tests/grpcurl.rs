//! `opm serve` through grpcurl, a client that knows the registry API only
//! from the server's reflection service, as users and upstream's docs use
//! it: every RPC of `api.Registry` plus the health service answers.
#![allow(clippy::unwrap_used)]

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use serde_json::Value;

/// grpcurl from the test kit's pinned tools; `None` (after saying so) when
/// it is not installed outside CI.
fn grpcurl() -> Option<PathBuf> {
    match olm_testkit::assets::find_pinned("grpcurl") {
        Ok(path) => Some(path),
        Err(error) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "grpcurl is required in CI (cargo xtask envtest installs it): {error}"
            );
            println!("skipping: grpcurl not installed (cargo xtask envtest): {error}");
            None
        }
    }
}

const CATALOG: &str = r#"
{"schema": "olm.package", "name": "widget", "defaultChannel": "stable"}
{"schema": "olm.channel", "name": "stable", "package": "widget", "entries": [
  {"name": "widget-operator.v0.1.0"},
  {"name": "widget-operator.v0.2.0", "replaces": "widget-operator.v0.1.0"}]}
{"schema": "olm.bundle", "name": "widget-operator.v0.1.0", "package": "widget",
 "image": "registry.fixture.example/widget/bundle:v0.1.0",
 "properties": [{"type": "olm.package", "value": {"packageName": "widget", "version": "0.1.0"}},
                {"type": "olm.gvk", "value": {"group": "example.com", "version": "v1", "kind": "Widget"}}]}
{"schema": "olm.bundle", "name": "widget-operator.v0.2.0", "package": "widget",
 "image": "registry.fixture.example/widget/bundle:v0.2.0",
 "properties": [{"type": "olm.package", "value": {"packageName": "widget", "version": "0.2.0"}},
                {"type": "olm.gvk", "value": {"group": "example.com", "version": "v1", "kind": "Widget"}}]}
"#;

struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(dir: &Path) -> (Server, String) {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let child = Command::new(env!("CARGO_BIN_EXE_opm"))
        .args(["serve", dir.to_str().unwrap(), "--port", &port.to_string()])
        .arg("-t")
        .arg(dir.join("termination-log"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    (Server(child), format!("127.0.0.1:{port}"))
}

/// Runs `grpcurl <flags> <address> <rest>`; returns its stdout, or its
/// stderr as the error.
fn call(grpcurl: &Path, address: &str, flags: &[&str], rest: &[&str]) -> Result<String, String> {
    let output = Command::new(grpcurl)
        .args(["-plaintext", "-max-time", "10"])
        .args(flags)
        .arg(address)
        .args(rest)
        .output()
        .unwrap();
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

/// grpcurl prints streamed messages as consecutive JSON documents.
fn documents(text: &str) -> Vec<Value> {
    serde_json::Deserializer::from_str(text)
        .into_iter::<Value>()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn every_rpc_answers_a_reflection_client() {
    let Some(grpcurl) = grpcurl() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let catalog = dir.path().join("catalog");
    std::fs::create_dir_all(catalog.join("widget")).unwrap();
    std::fs::write(catalog.join("widget/catalog.json"), CATALOG).unwrap();
    let (_server, address) = serve(&catalog);

    // Reflection: the services are listed (waiting for the server to start).
    let deadline = Instant::now() + Duration::from_secs(30);
    let services = loop {
        match call(&grpcurl, &address, &[], &["list"]) {
            Ok(list) => break list,
            Err(error) => {
                assert!(
                    Instant::now() < deadline,
                    "opm serve did not answer: {error}"
                );
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    };
    for service in ["api.Registry", "grpc.health.v1.Health"] {
        assert!(
            services.lines().any(|l| l == service),
            "{service} not listed: {services}"
        );
    }
    let methods = call(&grpcurl, &address, &[], &["list", "api.Registry"]).unwrap();
    for rpc in [
        "ListPackages",
        "GetPackage",
        "GetBundle",
        "GetBundleForChannel",
        "GetChannelEntriesThatReplace",
        "GetBundleThatReplaces",
        "GetChannelEntriesThatProvide",
        "GetLatestChannelEntriesThatProvide",
        "GetDefaultBundleThatProvides",
        "ListBundles",
    ] {
        assert!(
            methods.contains(&format!("api.Registry.{rpc}")),
            "{rpc} not listed: {methods}"
        );
    }
    let described = call(&grpcurl, &address, &[], &["describe", "api.Bundle"]).unwrap();
    assert!(described.contains("string csvName = 1;"), "{described}");

    let rpc = |method: &str, body: &str| -> Vec<Value> {
        let text = call(
            &grpcurl,
            &address,
            &["-d", body],
            &[&format!("api.Registry/{method}")],
        )
        .unwrap_or_else(|e| panic!("{method} {body}: {e}"));
        documents(&text)
    };
    let gvk = r#"{"group": "example.com", "version": "v1", "kind": "Widget"}"#;
    assert_eq!(
        rpc("ListPackages", "{}"),
        [serde_json::json!({"name": "widget"})]
    );
    assert_eq!(
        rpc("GetPackage", r#"{"name": "widget"}"#)[0]["defaultChannelName"],
        "stable"
    );
    let bundle = rpc(
        "GetBundle",
        r#"{"pkgName": "widget", "channelName": "stable", "csvName": "widget-operator.v0.1.0"}"#,
    );
    assert_eq!(bundle[0]["csvName"], "widget-operator.v0.1.0");
    assert_eq!(
        bundle[0]["bundlePath"],
        "registry.fixture.example/widget/bundle:v0.1.0"
    );
    let head = rpc(
        "GetBundleForChannel",
        r#"{"pkgName": "widget", "channelName": "stable"}"#,
    );
    assert_eq!(head[0]["csvName"], "widget-operator.v0.2.0");
    let replacing = rpc(
        "GetChannelEntriesThatReplace",
        r#"{"csvName": "widget-operator.v0.1.0"}"#,
    );
    assert_eq!(replacing.len(), 1);
    assert_eq!(replacing[0]["bundleName"], "widget-operator.v0.2.0");
    let replacement = rpc(
        "GetBundleThatReplaces",
        r#"{"csvName": "widget-operator.v0.1.0", "pkgName": "widget", "channelName": "stable"}"#,
    );
    assert_eq!(replacement[0]["csvName"], "widget-operator.v0.2.0");
    assert_eq!(rpc("GetChannelEntriesThatProvide", gvk).len(), 2);
    let latest = rpc("GetLatestChannelEntriesThatProvide", gvk);
    assert_eq!(latest.len(), 1);
    assert_eq!(latest[0]["bundleName"], "widget-operator.v0.2.0");
    assert_eq!(
        rpc("GetDefaultBundleThatProvides", gvk)[0]["csvName"],
        "widget-operator.v0.2.0"
    );
    let all = rpc("ListBundles", "{}");
    let mut names: Vec<_> = all
        .iter()
        .map(|b| b["csvName"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["widget-operator.v0.1.0", "widget-operator.v0.2.0"]);

    let health = call(
        &grpcurl,
        &address,
        &["-d", "{}"],
        &["grpc.health.v1.Health/Check"],
    )
    .unwrap();
    assert_eq!(documents(&health)[0]["status"], "SERVING");

    // Errors come back as gRPC statuses, not crashes.
    let missing = call(
        &grpcurl,
        &address,
        &["-d", r#"{"name": "nope"}"#],
        &["api.Registry/GetPackage"],
    );
    assert!(
        missing.unwrap_err().contains("NotFound"),
        "an unknown package is NotFound"
    );
}
