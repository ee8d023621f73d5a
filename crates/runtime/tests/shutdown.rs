//! SIGTERM really cancels the shutdown token. Its own test binary (one process), and one
//! signal only: a second signal would exit the process by design.

use std::time::Duration;

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

#[tokio::test]
async fn sigterm_cancels_the_shutdown_token() -> TestResult {
    let token = olm_runtime::try_shutdown_on_signals()?;
    assert!(!token.is_cancelled());

    let status = std::process::Command::new("kill")
        .args(["-TERM", &std::process::id().to_string()])
        .status()?;
    assert!(status.success(), "kill exited with {status}");

    tokio::time::timeout(Duration::from_secs(10), token.cancelled()).await?;
    Ok(())
}
