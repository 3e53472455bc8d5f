//! An arbitrary image layer (plain, or wrapped in gzip so the fuzzer reaches
//! the tar reader through the decompressor too), extracted into memory and
//! into a directory with bundle-unpacker's prefixes and small limits: it
//! must be extracted or refused, never panic, nothing may land outside the
//! extraction root or outside `manifests/` and `metadata/`, and no link left
//! in the root may lead outside it.
#![no_main]

use std::io::Write as _;

use libfuzzer_sys::fuzz_target;
use olm_oci::{
    ExtractLimits, ExtractOptions,
    layer::{extract_layers_to_dir, extract_layers_to_memory},
};

fn options() -> ExtractOptions {
    ExtractOptions {
        limits: ExtractLimits {
            max_compressed_bytes: 1024 * 1024,
            max_uncompressed_bytes: 4 * 1024 * 1024,
            max_entries: 256,
            max_compression_ratio: 100,
        },
        path_prefixes: vec!["manifests".to_owned(), "metadata".to_owned()],
    }
}

fuzz_target!(|input: (bool, Vec<u8>)| {
    let (gzip, raw) = input;
    let layer = if gzip {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        if encoder.write_all(&raw).is_err() {
            return;
        }
        match encoder.finish() {
            Ok(bytes) => bytes,
            Err(_) => return,
        }
    } else {
        raw
    };
    let options = options();

    if let Ok(tree) = extract_layers_to_memory([layer.as_slice()], &options) {
        for path in tree.keys() {
            assert!(!path.starts_with('/'), "absolute path {path:?}");
            assert!(!path.split('/').any(|part| part == ".."), "traversal {path:?}");
            assert!(
                path.starts_with("manifests/") || path.starts_with("metadata/"),
                "outside the prefixes: {path:?}"
            );
        }
    }

    let Ok(parent) = tempfile::tempdir() else { return };
    let root = parent.path().join("root");
    let _ = extract_layers_to_dir([layer.as_slice()], &root, &options);
    // Whatever happened, the parent holds nothing but the root.
    let outside: Vec<_> = std::fs::read_dir(parent.path())
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.file_name())
                .filter(|name| name != "root")
                .collect()
        })
        .unwrap_or_default();
    assert!(outside.is_empty(), "written outside the root: {outside:?}");
    // And no link left in the root leads outside it, even through other
    // links (a chain like `x/sub -> ..`, `x/l -> sub/../..`).
    let Ok(real_root) = std::fs::canonicalize(&root) else { return };
    let mut dirs = vec![real_root.clone()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.filter_map(Result::ok) {
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_symlink() {
                if let Ok(resolved) = std::fs::canonicalize(entry.path()) {
                    assert!(
                        resolved.starts_with(&real_root),
                        "link {:?} leads outside the root to {resolved:?}",
                        entry.path()
                    );
                }
            } else if kind.is_dir() {
                dirs.push(entry.path());
            }
        }
    }
});
