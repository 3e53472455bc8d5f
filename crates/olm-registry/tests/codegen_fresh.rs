//! Checks that the committed protobuf code and descriptor set in `src/gen/`
//! are what `proto/api/registry.proto` generates today.
//!
//! The code is generated with protox (a protobuf compiler written in Rust, so
//! no `protoc` is needed) and tonic-prost-build (messages, server and client).
//! The descriptor set serves gRPC reflection. To update both committed files
//! after changing the `.proto`, run:
//!
//! ```text
//! OLM_BLESS=1 cargo test -p olm-registry --test codegen_fresh
//! ```
//!
//! `cargo xtask codegen` is expected to run exactly that command.

use std::{env, fs, path::PathBuf};

use prost::Message;

/// The `.proto` file of the registry contract, relative to the workspace `proto/` folder.
const PROTO_FILE: &str = "api/registry.proto";

/// The committed generated code, relative to this crate.
const GENERATED_FILE: &str = "src/gen/api.rs";

/// The committed encoded `FileDescriptorSet` (the contract and its imports,
/// without source comments), relative to this crate.
const DESCRIPTOR_FILE: &str = "src/gen/api.fds.bin";

/// The file prost-build writes for package `api`.
const PROST_OUTPUT: &str = "api.rs";

/// First lines of the committed code, so a reader knows not to edit it.
const HEADER: &str = "// @generated from proto/api/registry.proto by \
crates/olm-registry/tests/codegen_fresh.rs.\n\
// Do not edit: change the .proto, then run\n\
// `OLM_BLESS=1 cargo test -p olm-registry --test codegen_fresh`.\n";

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn proto_root() -> PathBuf {
    crate_dir().join("../../proto")
}

/// Generates the Rust code for the registry contract into a temporary folder
/// and returns it with the header prepended.
fn generate_code() -> String {
    let root = proto_root();
    let descriptors = protox::compile([PROTO_FILE], [&root])
        .unwrap_or_else(|err| panic!("compiling {PROTO_FILE} under {root:?}: {err}"));
    let out_dir = tempfile::tempdir().expect("creating a temporary folder for generated code");
    tonic_prost_build::configure()
        .out_dir(out_dir.path())
        .build_server(true)
        .build_client(true)
        .build_transport(true)
        .compile_fds(descriptors)
        .expect("generating Rust code with tonic-prost-build");
    let generated = fs::read_to_string(out_dir.path().join(PROST_OUTPUT))
        .expect("reading the code tonic-prost-build generated");
    format!("{HEADER}{generated}")
}

/// The encoded descriptor set that reflection serves: the contract plus the
/// well-known types it imports, without comments (they only add bytes).
fn generate_descriptors() -> Vec<u8> {
    let root = proto_root();
    let mut compiler = protox::Compiler::new([&root])
        .unwrap_or_else(|err| panic!("preparing protox under {root:?}: {err}"));
    compiler.include_imports(true).include_source_info(false);
    compiler
        .open_file(PROTO_FILE)
        .unwrap_or_else(|err| panic!("compiling {PROTO_FILE}: {err}"));
    compiler.file_descriptor_set().encode_to_vec()
}

fn blessing() -> bool {
    env::var_os("OLM_BLESS").is_some_and(|value| value == "1")
}

#[test]
fn committed_protobuf_code_is_fresh() {
    let expected = generate_code();
    let path = crate_dir().join(GENERATED_FILE);

    if blessing() {
        fs::write(&path, &expected).unwrap_or_else(|err| panic!("writing {path:?}: {err}"));
        return;
    }

    let committed = fs::read_to_string(&path).unwrap_or_default();
    if committed != expected {
        let diff = similar::TextDiff::from_lines(&committed, &expected)
            .unified_diff()
            .header("committed", "generated")
            .to_string();
        panic!(
            "{GENERATED_FILE} is stale: it differs from what proto/{PROTO_FILE} generates.\n\
             Run `cargo xtask codegen` or \
             `OLM_BLESS=1 cargo test -p olm-registry --test codegen_fresh` and commit the result.\n\n{diff}"
        );
    }
}

#[test]
fn committed_descriptor_set_is_fresh() {
    let expected = generate_descriptors();
    let path = crate_dir().join(DESCRIPTOR_FILE);

    if blessing() {
        fs::write(&path, &expected).unwrap_or_else(|err| panic!("writing {path:?}: {err}"));
        return;
    }

    let committed = fs::read(&path).unwrap_or_default();
    assert!(
        committed == expected,
        "{DESCRIPTOR_FILE} is stale ({} bytes committed, {} generated): it differs from what \
         proto/{PROTO_FILE} compiles to.\nRun `cargo xtask codegen` or \
         `OLM_BLESS=1 cargo test -p olm-registry --test codegen_fresh` and commit the result.",
        committed.len(),
        expected.len()
    );
}

#[test]
fn descriptor_set_keeps_the_upstream_wire_contract() {
    // Spot checks of names and numbers that upstream clients depend on; a
    // rename in the .proto would otherwise only show up against a real client.
    let set = prost_types::FileDescriptorSet::decode(generate_descriptors().as_slice())
        .expect("decoding the descriptor set");
    let file = set
        .file
        .iter()
        .find(|f| f.name() == PROTO_FILE)
        .expect("the contract file is in the set");
    assert_eq!(file.package(), "api");
    let services: Vec<&str> = file.service.iter().map(|s| s.name()).collect();
    assert_eq!(services, ["Registry", "ExperimentalRegistry"]);
    let bundle = file
        .message_type
        .iter()
        .find(|m| m.name() == "Bundle")
        .expect("message Bundle");
    let fields: Vec<(&str, i32)> = bundle
        .field
        .iter()
        .map(|f| (f.name(), f.number()))
        .collect();
    assert_eq!(
        fields,
        [
            ("csvName", 1),
            ("packageName", 2),
            ("channelName", 3),
            ("csvJson", 4),
            ("object", 5),
            ("bundlePath", 6),
            ("providedApis", 7),
            ("requiredApis", 8),
            ("version", 9),
            ("skipRange", 10),
            ("dependencies", 11),
            ("properties", 12),
            ("replaces", 13),
            ("skips", 14),
            ("deprecation", 15),
        ]
    );
    assert!(
        set.file
            .iter()
            .any(|f| f.name() == "google/protobuf/struct.proto"),
        "reflection needs the imported Struct definition too"
    );
}
