//! Waiting in tests: for a condition to hold, and for OLM's CRDs to be
//! installed once per test binary. One home for what every crate's cluster
//! tests did with a copy of their own.

use std::{
    future::Future,
    path::PathBuf,
    time::{Duration, Instant},
};

/// How often [`eventually`] checks again.
pub const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Polls `check` until it returns `Ok` (at least once, however short the
/// deadline), and panics naming `what` and the last error seen when
/// `deadline` passes first.
pub async fn eventually<T, F, Fut>(what: &str, deadline: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let started = Instant::now();
    loop {
        match check().await {
            Ok(value) => return value,
            Err(last) if started.elapsed() >= deadline => {
                panic!("{what}: not true after {deadline:?}; last seen: {last}")
            }
            Err(_) => tokio::time::sleep(POLL_INTERVAL).await,
        }
    }
}

/// The workspace's generated CRDs (`deploy/crds`).
pub fn olm_crds_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/crds")
}

/// Applies OLM's CRDs (`deploy/crds`) to the shared control plane once per
/// test binary, and waits until they are Established.
pub async fn olm_crds_installed() {
    static INSTALLED: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    INSTALLED
        .get_or_init(|| async {
            crate::control_plane().install_crds(&olm_crds_dir());
        })
        .await;
}

/// Applies only the `operators.coreos.com` CRDs of `deploy/crds`, the set
/// upstream OLM ships, to the shared control plane, and waits until they
/// are Established. For runs of upstream's own operators: with any
/// `config.openshift.io` CRD present (our OperatorHub), upstream's
/// olm-operator takes the cluster for OpenShift, waits for a Proxy
/// informer that can never sync, and exits.
pub fn operators_crds_installed() {
    let dir = tempfile::tempdir().unwrap_or_else(|err| panic!("a temporary folder: {err}"));
    let entries = std::fs::read_dir(olm_crds_dir())
        .unwrap_or_else(|err| panic!("{}: {err}", olm_crds_dir().display()));
    for entry in entries {
        let path = entry
            .unwrap_or_else(|err| panic!("{}: {err}", olm_crds_dir().display()))
            .path();
        let Some(name) = path.file_name() else {
            continue;
        };
        if name.to_string_lossy().starts_with("operators.coreos.com_") {
            std::fs::copy(&path, dir.path().join(name))
                .unwrap_or_else(|err| panic!("{}: {err}", path.display()));
        }
    }
    crate::control_plane().install_crds(dir.path());
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test]
    async fn a_condition_that_holds_at_once_is_checked_once() {
        let calls = AtomicUsize::new(0);
        let value = eventually("at once", Duration::ZERO, || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Ok::<_, String>(7)
        })
        .await;
        assert_eq!((value, calls.load(Ordering::SeqCst)), (7, 1));
    }

    #[tokio::test]
    async fn a_condition_is_polled_until_it_holds() {
        let calls = AtomicUsize::new(0);
        let value = eventually("third time", Duration::from_secs(5), || async {
            match calls.fetch_add(1, Ordering::SeqCst) {
                0 | 1 => Err("not yet".to_owned()),
                n => Ok(n),
            }
        })
        .await;
        assert_eq!(value, 2);
    }

    #[tokio::test]
    #[should_panic(expected = "never: not true after 200ms; last seen: still no")]
    async fn a_condition_that_never_holds_fails_with_the_last_error() {
        eventually("never", Duration::from_millis(200), || async {
            Err::<(), _>("still no".to_owned())
        })
        .await;
    }

    #[test]
    fn the_crds_dir_holds_olm_s_crds() {
        assert!(
            olm_crds_dir()
                .join("operators.coreos.com_clusterserviceversions.yaml")
                .exists()
        );
    }
}
