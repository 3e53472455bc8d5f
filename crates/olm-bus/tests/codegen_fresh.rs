//! Checks that the committed protobuf code in `src/gen/` is what
//! `proto/olm/bus/v1/events.proto` generates today.
//!
//! The code is generated with protox (a protobuf compiler written in Rust, so
//! no `protoc` is needed) and prost-build. To update the committed file after
//! changing the `.proto`, run:
//!
//! ```text
//! OLM_BLESS=1 cargo test -p olm-bus --test codegen_fresh
//! ```
//!
//! `cargo xtask codegen` is expected to run exactly that command.

use std::{env, fs, path::PathBuf};

/// The `.proto` files of the bus contract, relative to the workspace `proto/` folder.
const PROTO_FILES: &[&str] = &["olm/bus/v1/events.proto"];

/// The committed generated file, relative to this crate.
const GENERATED_FILE: &str = "src/gen/olm.bus.v1.rs";

/// The file prost-build writes for package `olm.bus.v1`.
const PROST_OUTPUT: &str = "olm.bus.v1.rs";

/// First lines of the committed file, so a reader knows not to edit it.
const HEADER: &str = "// @generated from proto/olm/bus/v1/events.proto by \
crates/olm-bus/tests/codegen_fresh.rs.\n\
// Do not edit: change the .proto, then run\n\
// `OLM_BLESS=1 cargo test -p olm-bus --test codegen_fresh`.\n";

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Generates the Rust code for the bus contract into a temporary folder and
/// returns it with the header prepended.
fn generate() -> String {
    let proto_root = crate_dir().join("../../proto");
    let descriptors = protox::compile(PROTO_FILES, [&proto_root])
        .unwrap_or_else(|err| panic!("compiling {PROTO_FILES:?} under {proto_root:?}: {err}"));
    let out_dir = tempfile::tempdir().expect("creating a temporary folder for generated code");
    prost_build::Config::new()
        .out_dir(out_dir.path())
        // `prost::Name` gives each event its full protobuf name, which the
        // bus sends in a header so that audit readers can decode any event.
        .enable_type_names()
        .compile_fds(descriptors)
        .expect("generating Rust code with prost-build");
    let generated = fs::read_to_string(out_dir.path().join(PROST_OUTPUT))
        .expect("reading the code prost-build generated");
    format!("{HEADER}{generated}")
}

#[test]
fn committed_protobuf_code_is_fresh() {
    let expected = generate();
    let path = crate_dir().join(GENERATED_FILE);

    if env::var_os("OLM_BLESS").is_some_and(|value| value == "1") {
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
            "{GENERATED_FILE} is stale: it differs from what proto/olm/bus/v1/events.proto \
             generates.\nRun `cargo xtask codegen` or \
             `OLM_BLESS=1 cargo test -p olm-bus --test codegen_fresh` and commit the result.\n\n{diff}"
        );
    }
}
