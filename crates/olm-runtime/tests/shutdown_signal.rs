//! SIGTERM cancels the shutdown token. A test binary of its own, because a
//! signal is delivered to the whole process.

use std::time::Duration;

#[tokio::test]
async fn sigterm_cancels_the_token() {
    let shutdown = olm_runtime::shutdown::on_signal().expect("handlers installed");
    assert!(!shutdown.is_cancelled());
    let status = std::process::Command::new("kill")
        .args(["-TERM", &std::process::id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    tokio::time::timeout(Duration::from_secs(10), shutdown.cancelled())
        .await
        .expect("token cancelled after SIGTERM");
}
