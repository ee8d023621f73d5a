//! The harness's git server (git's smart HTTP backend behind a CGI bridge), checked with git
//! itself, so that the git source's tests stand on a server known to behave: clone over HTTP,
//! protocol v2 `ls-refs` in one round trip, a moving branch and a tag, and a private
//! repository that wants basic credentials. No control plane is needed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use olm_e2e::git::{GitCredentials, GitServer};

fn git(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .unwrap()
}

// Multi-threaded: the test runs git (blocking) while the server answers it on another thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_git_server_serves_clones_ls_refs_and_private_repositories() {
    let dir = tempfile::tempdir().unwrap();
    let server = GitServer::start(
        &dir.path().join("repos"),
        Some(GitCredentials {
            user: "reader".into(),
            password: "git-s3cret".into(),
        }),
    )
    .await
    .unwrap();
    let repo = server.create("catalogs").unwrap();
    let first = repo
        .commit(
            "main",
            &[("catalog/c.yaml", "schema: olm.package\nname: p\n")],
            "one",
        )
        .unwrap();
    repo.tag("v1").unwrap();
    let second = repo
        .commit(
            "main",
            &[("catalog/c.yaml", "schema: olm.package\nname: q\n")],
            "two",
        )
        .unwrap();
    assert_ne!(first, second);

    // Protocol v2: one ls-refs round trip (after the capability advertisement).
    let before = server.requests().len();
    let out = git(
        dir.path(),
        &[
            "-c",
            "protocol.version=2",
            "ls-remote",
            &server.repo_url("catalogs"),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let refs = String::from_utf8_lossy(&out.stdout);
    assert!(
        refs.contains(&format!("{second}\trefs/heads/main")),
        "{refs}"
    );
    assert!(refs.contains(&format!("{first}\trefs/tags/v1")), "{refs}");
    let requests: Vec<String> = server.requests().into_iter().skip(before).collect();
    assert_eq!(
        requests,
        [
            "GET /catalogs.git/info/refs?service=git-upload-pack",
            "POST /catalogs.git/git-upload-pack"
        ]
    );

    // A shallow clone of the tag.
    let clone = dir.path().join("clone");
    let out = git(
        dir.path(),
        &[
            "clone",
            "-q",
            "--depth",
            "1",
            "--branch",
            "v1",
            &server.repo_url("catalogs"),
            &clone.display().to_string(),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(clone.join("catalog/c.yaml")).unwrap(),
        "schema: olm.package\nname: p\n"
    );

    // A private repository: refused without credentials, served with them.
    let private = server.create("private/team").unwrap();
    private.commit("main", &[("c.yaml", "x")], "one").unwrap();
    let out = git(dir.path(), &["ls-remote", &server.repo_url("private/team")]);
    assert!(!out.status.success());
    let with_credentials = server
        .repo_url("private/team")
        .replace("http://", "http://reader:git-s3cret@");
    let out = git(dir.path(), &["ls-remote", &with_credentials]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
