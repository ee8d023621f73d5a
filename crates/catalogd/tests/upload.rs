//! The collector (`catalogd collect`) against catalogd's real upload endpoint, in process: an
//! accepted upload, then a replay, a forged token, and an output over the endpoint's limit,
//! each refused with the reason catalogd reads back into the Catalog's condition.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;

use catalogd::collect::{CollectArgs, collect};
use catalogd::source::custom::runs::Runs;
use catalogd::source::custom::upload;

async fn serve(runs: Arc<Runs>, max: u64) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, upload::router(runs, max, None)).await });
    format!("http://{addr}")
}

fn args(dir: &std::path::Path, url: String) -> CollectArgs {
    CollectArgs {
        file: dir.join("catalog.json"),
        url,
        max_bytes: 1 << 20,
        termination_log: dir.join("termination-log"),
        timeout_seconds: 10,
    }
}

async fn run(args: CollectArgs, token: &str) -> Result<u64, catalogd::collect::Failure> {
    let token = token.to_owned();
    tokio::task::spawn_blocking(move || {
        olm_runtime::install_crypto_provider();
        collect(&args, &token)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_collector_uploads_once_with_its_token() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("catalog.json"),
        b"{\"schema\":\"olm.package\"}",
    )
    .unwrap();
    let runs = Arc::new(Runs::default());
    let base = serve(runs.clone(), 1 << 20).await;
    runs.start("uid", "pod-a", "h", "right-token");
    let url = format!("{base}/uploads/pod-a");

    let err = run(args(dir.path(), url.clone()), "forged")
        .await
        .unwrap_err();
    assert_eq!(err.reason, "UploadRejected", "{err:?}");
    assert!(err.message.contains("HTTP 403"), "{err:?}");

    assert_eq!(
        run(args(dir.path(), url.clone()), "right-token")
            .await
            .unwrap(),
        24
    );
    let run_state = runs.get("uid").unwrap();
    assert_eq!(
        run_state.upload.unwrap().bytes,
        b"{\"schema\":\"olm.package\"}"
    );
    assert_eq!(run_state.rejected.len(), 1);

    let err = run(args(dir.path(), url), "right-token").await.unwrap_err();
    assert_eq!(err.reason, "UploadRejected");
    assert!(err.message.contains("one upload"), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_output_over_the_endpoints_limit_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("catalog.json"), vec![b' '; 4096]).unwrap();
    let runs = Arc::new(Runs::default());
    let base = serve(runs.clone(), 1024).await;
    runs.start("uid", "pod-a", "h", "t");
    let err = run(args(dir.path(), format!("{base}/uploads/pod-a")), "t")
        .await
        .unwrap_err();
    assert_eq!(err.reason, "ContentTooLarge", "{err:?}");
    assert!(runs.get("uid").unwrap().upload.is_none());
}
