//! Writes every generated CRD into `deploy/crds/` and `charts/olm/crds/` of the
//! workspace (or into the directories given as arguments). `cargo xtask crds`
//! does the same; this example is for when xtask is not at hand:
//! `cargo run -p olm-api --example write_crds`.

use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let dirs: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let dirs = if dirs.is_empty() {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
        let root = root.canonicalize().unwrap_or(root);
        vec![root.join("deploy/crds"), root.join("charts/olm/crds")]
    } else {
        dirs
    };
    for dir in dirs {
        for path in olm_api::crd::write_all(&dir)? {
            println!("wrote {}", path.display());
        }
    }
    Ok(())
}
