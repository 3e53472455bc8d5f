//! Shared helpers: finding the test data, starting a server, writing small
//! catalogs.

use std::path::{Path, PathBuf};

use olm_registry::{
    CatalogIndex, ClientOptions, IndexOptions, RegistryClient, RegistryServer, RunningServer,
};

/// The shared test data folder, or `None` (with a printed reason) when it is
/// absent and `CI` is not set. Under CI a missing folder fails the test.
pub(crate) fn testdata() -> Option<PathBuf> {
    olm_testkit::testdata()
}

/// A real catalog directory by name, or `None` when the test data is absent.
pub(crate) fn real_catalog(name: &str) -> Option<PathBuf> {
    let dir = testdata()?.join("catalogs").join(name);
    assert!(
        dir.is_dir(),
        "catalog {name} missing from the test data at {}",
        dir.display()
    );
    Some(dir)
}

/// A running server over `dir` and a client connected to it.
pub(crate) async fn serve(dir: &Path) -> (RunningServer, RegistryClient) {
    let index = CatalogIndex::build(dir, &IndexOptions::default())
        .unwrap_or_else(|e| panic!("indexing {}: {e}", dir.display()));
    serve_index(index).await
}

/// A running server over an index and a client connected to it.
pub(crate) async fn serve_index(index: CatalogIndex) -> (RunningServer, RegistryClient) {
    let server = RegistryServer::new(index)
        .spawn_loopback()
        .await
        .expect("starting the server");
    let client = RegistryClient::connect(&server.endpoint(), ClientOptions::default())
        .await
        .expect("connecting the client");
    (server, client)
}

/// A catalog directory holding `files` (relative path, content).
pub(crate) fn catalog(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temporary catalog directory");
    for (path, content) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("creating folders");
        std::fs::write(&path, content).expect("writing a catalog file");
    }
    dir
}

/// An `olm.package` document in JSON.
pub(crate) fn package(name: &str, default_channel: &str) -> String {
    format!(r#"{{"schema":"olm.package","name":"{name}","defaultChannel":"{default_channel}"}}"#)
}

/// An `olm.channel` document in JSON; `entries` is the JSON array text.
pub(crate) fn channel(package: &str, name: &str, entries: &str) -> String {
    format!(
        r#"{{"schema":"olm.channel","package":"{package}","name":"{name}","entries":{entries}}}"#
    )
}

/// An `olm.bundle` document in JSON with an image, its `olm.package`
/// property, and `extra` more properties (JSON objects, comma-separated).
pub(crate) fn bundle(package: &str, name: &str, version: &str, extra: &str) -> String {
    let sep = if extra.is_empty() { "" } else { "," };
    format!(
        r#"{{"schema":"olm.bundle","package":"{package}","name":"{name}","image":"example.com/{package}-bundle:v{version}",
"properties":[{{"type":"olm.package","value":{{"packageName":"{package}","version":"{version}"}}}}{sep}{extra}]}}"#
    )
}

/// The gRPC code of a client error.
pub(crate) fn code(err: &olm_registry::ClientError) -> tonic::Code {
    err.code()
        .unwrap_or_else(|| panic!("expected a status, got {err}"))
}
