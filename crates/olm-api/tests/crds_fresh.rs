//! The CRD YAML checked in under `deploy/crds/` and `charts/olm/crds/` must be
//! exactly what the types generate now.

use std::path::{Path, PathBuf};

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn check_dir(dir: &Path, problems: &mut Vec<String>) {
    let crds = olm_api::crd::all();
    let expected: Vec<String> = crds.iter().map(olm_api::crd::file_name).collect();
    for crd in &crds {
        let path = dir.join(olm_api::crd::file_name(crd));
        let want = olm_api::crd::to_yaml(crd);
        match std::fs::read_to_string(&path) {
            Ok(have) if have == want => {}
            Ok(have) => {
                let diff = similar::TextDiff::from_lines(&have, &want);
                problems.push(format!(
                    "{} is stale:\n{}",
                    path.display(),
                    diff.unified_diff()
                        .context_radius(2)
                        .header("checked in", "generated")
                ));
            }
            Err(error) => problems.push(format!(
                "{} is missing or unreadable: {error}",
                path.display()
            )),
        }
    }
    // A CRD we no longer generate must not linger in the directory either.
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".yaml") && !expected.contains(&name) {
                problems.push(format!(
                    "{} is not generated any more",
                    entry.path().display()
                ));
            }
        }
    }
}

#[test]
fn checked_in_crds_are_fresh() {
    let root = workspace_root();
    let mut problems = Vec::new();
    for dir in ["deploy/crds", "charts/olm/crds"] {
        check_dir(&root.join(dir), &mut problems);
    }
    assert!(
        problems.is_empty(),
        "generated CRDs differ from the checked-in files; run `cargo xtask crds` \
         (or `cargo run -p olm-api --example write_crds`) and commit the result.\n\n{}",
        problems.join("\n")
    );
}
