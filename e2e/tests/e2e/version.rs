use olm_e2e::context::TestContext;

/// The pinned version of tools/testbin/versions.sh.
fn pinned_kubernetes_version() -> String {
    let text =
        std::fs::read_to_string(olm_e2e::repo_root().join("tools/testbin/versions.sh")).unwrap();
    let v = text
        .lines()
        .find_map(|l| l.strip_prefix("K8S_VERSION="))
        .expect("K8S_VERSION in versions.sh");
    format!("v{}", v.trim())
}

/// The API server is the real one we built, and says so: `/version` carries the version
/// ldflags (without them it would report v0.0.0-master).
#[tokio::test]
async fn the_api_server_is_real_and_reports_the_pinned_version() {
    let ctx = TestContext::new("version").await.unwrap();
    let info = ctx.client.apiserver_version().await.unwrap();
    println!(
        "kube-apiserver {} ({}), go {}",
        info.git_version, info.platform, info.go_version
    );
    assert_eq!(info.git_version, pinned_kubernetes_version());
    assert_eq!(info.major, "1");
    assert_eq!(
        format!("v1.{}", info.minor),
        pinned_kubernetes_version().rsplit_once('.').unwrap().0
    );
    ctx.cleanup().await.unwrap();
}
