//! The git source's network half (gix) against a real git server: git's own smart HTTP
//! backend, over HTTP and HTTPS, from the e2e harness. No control plane is needed: these tests
//! call the source's functions directly; the e2e tests prove the wiring into Catalogs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use catalogd_sources::SourceError;
use catalogd_sources::git::remote::{self, Remote};
use catalogd_sources::git::spec::Want;
use catalogd_sources::git::tree;
use gix::ObjectId;
use olm_puller::network::NetworkPolicy;
use olm_testkit::git::{GitCredentials, GitServer};

const CATALOG: &str = "schema: olm.package\nname: p\n";

fn remote(url: &str, account: Option<(&str, &str)>) -> Remote {
    Remote {
        url: url.to_owned(),
        account: account.map(|(u, p)| (u.to_owned(), p.to_owned())),
        ca: reqwest::Certificate::from_pem_bundle(olm_testkit::tls::ca().unwrap().pem.as_bytes())
            .unwrap(),
        timeout: Duration::from_secs(30),
        shown: url.to_owned(),
        ssh: None,
        // The test servers listen on loopback, which an admin allows here as the tests do.
        policy: Arc::new(NetworkPolicy {
            allow_loopback: true,
            ..Default::default()
        }),
    }
}

fn branch(name: &str) -> Want {
    Want::Branch(name.into())
}

/// Runs gix (blocking) off the runtime that serves the git server.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

async fn ls(r: &Remote, want: Want, scratch: PathBuf) -> Result<ObjectId, SourceError> {
    let r = r.clone();
    blocking(move || remote::ls_ref(&r, &want, &scratch)).await
}

async fn fetch_files(
    r: &Remote,
    want: Want,
    scratch: PathBuf,
    directory: &str,
    max: u64,
) -> Result<(ObjectId, Vec<(String, Vec<u8>)>), SourceError> {
    let r = r.clone();
    let directory = directory.to_owned();
    blocking(move || {
        let fetched = remote::fetch(&r, &want, &scratch, max)?;
        let files = tree::files(&fetched.objects(max), fetched.tree, &directory, max, "test")?;
        Ok((fetched.commit, files))
    })
    .await
}

/// A git server over a temporary folder (kept while the folder lives), and a folder for
/// scratch repositories.
async fn serve(credentials: Option<GitCredentials>) -> (tempfile::TempDir, PathBuf, GitServer) {
    olm_testkit::install_crypto_provider();
    let dir = tempfile::tempdir().unwrap();
    let scratch = dir.path().join("scratch");
    let server = GitServer::start(&dir.path().join("repos"), credentials)
        .await
        .unwrap();
    (dir, scratch, server)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn branches_tags_and_commits_are_listed_and_fetched_shallow() {
    let (_dir, scratch, server) = serve(None).await;
    let repo = server.create("catalogs").unwrap();
    let first = repo
        .commit(
            "main",
            &[("README.md", "# not FBC"), ("catalog/c.yaml", CATALOG)],
            "one",
        )
        .unwrap();
    repo.tag("v1").unwrap();
    repo.annotated_tag("v1-annotated", "release one").unwrap();
    let second = repo
        .commit("main", &[("catalog/more/d.json", "{}")], "two")
        .unwrap();
    let r = remote(&server.repo_url("catalogs"), None);

    // ls-refs: the handshake and one request, for the branch alone.
    let before = server.requests().len();
    let head = ls(&r, branch("main"), scratch.clone()).await.unwrap();
    assert_eq!(head.to_string(), second);
    let requests: Vec<String> = server.requests().into_iter().skip(before).collect();
    assert_eq!(
        requests,
        [
            "GET /catalogs.git/info/refs?service=git-upload-pack",
            "POST /catalogs.git/git-upload-pack"
        ]
    );
    // Tags, lightweight and annotated, peel to their commit.
    for tag in ["v1", "v1-annotated"] {
        let id = ls(&r, Want::Tag(tag.into()), scratch.clone())
            .await
            .unwrap();
        assert_eq!(id.to_string(), first, "{tag}");
    }

    // A branch: its commit, and only the directory asked for.
    let (commit, files) = fetch_files(&r, branch("main"), scratch.clone(), "catalog", 1 << 20)
        .await
        .unwrap();
    assert_eq!(commit.to_string(), second);
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["c.yaml", "more/d.json"]);
    assert_eq!(files[0].1, CATALOG.as_bytes());

    // An annotated tag: the commit it names, not the tag object.
    let (commit, files) = fetch_files(
        &r,
        Want::Tag("v1-annotated".into()),
        scratch.clone(),
        "catalog",
        1 << 20,
    )
    .await
    .unwrap();
    assert_eq!(commit.to_string(), first);
    assert_eq!(files.len(), 1);

    // A pinned commit that no ref points at any more.
    let pinned = ObjectId::from_hex(first.as_bytes()).unwrap();
    let (commit, _) = fetch_files(&r, Want::Commit(pinned), scratch.clone(), "", 1 << 20)
        .await
        .unwrap();
    assert_eq!(commit, pinned);

    // Nothing is left in the scratch directory.
    assert_eq!(std::fs::read_dir(&scratch).unwrap().count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_repositories_refs_and_commits_are_not_found() {
    let (_dir, scratch, server) = serve(None).await;
    let repo = server.create("catalogs").unwrap();
    repo.commit("main", &[("c.yaml", CATALOG)], "one").unwrap();
    let r = remote(&server.repo_url("catalogs"), None);

    let err = ls(&r, branch("nope"), scratch.clone()).await.unwrap_err();
    assert_eq!(err.reason, "SourceNotFound", "{err}");
    assert!(err.message.contains("has no branch \"nope\""), "{err}");
    let err = fetch_files(&r, Want::Tag("v9".into()), scratch.clone(), "", 1 << 20)
        .await
        .unwrap_err();
    assert_eq!(err.reason, "SourceNotFound", "{err}");

    let missing = remote(&server.repo_url("missing"), None);
    let err = ls(&missing, branch("main"), scratch.clone())
        .await
        .unwrap_err();
    assert_eq!(err.reason, "SourceNotFound", "{err}");

    let unknown = ObjectId::from_hex(b"0123456789abcdef0123456789abcdef01234567").unwrap();
    let err = fetch_files(&r, Want::Commit(unknown), scratch.clone(), "", 1 << 20)
        .await
        .unwrap_err();
    assert_eq!(err.reason, "SourceNotFound", "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_repositories_need_the_right_credentials_over_https() {
    let (_dir, scratch, server) = serve(Some(GitCredentials {
        user: "reader".into(),
        password: "git-s3cret".into(),
    }))
    .await;
    let repo = server.create("private/catalogs").unwrap();
    let head = repo.commit("main", &[("c.yaml", CATALOG)], "one").unwrap();
    let url = server.https_repo_url("private/catalogs");

    let err = ls(&remote(&url, None), branch("main"), scratch.clone())
        .await
        .unwrap_err();
    assert_eq!(err.reason, "Unauthorized", "{err}");
    assert!(err.message.contains("needs credentials"), "{err}");
    let wrong = remote(&url, Some(("reader", "wrong")));
    let err = ls(&wrong, branch("main"), scratch.clone())
        .await
        .unwrap_err();
    assert_eq!(err.reason, "Unauthorized", "{err}");
    assert!(err.message.contains("were refused"), "{err}");
    assert!(!err.message.contains("wrong"), "{err}");

    let right = remote(&url, Some(("reader", "git-s3cret")));
    let id = ls(&right, branch("main"), scratch.clone()).await.unwrap();
    assert_eq!(id.to_string(), head);
    let (commit, files) = fetch_files(&right, branch("main"), scratch.clone(), "", 1 << 20)
        .await
        .unwrap();
    assert_eq!(commit.to_string(), head);
    assert_eq!(files.len(), 1);

    // Without the harness CA, the server is not trusted.
    let untrusted = Remote {
        ca: Vec::new(),
        ..right.clone()
    };
    let err = ls(&untrusted, branch("main"), scratch.clone())
        .await
        .unwrap_err();
    assert_eq!(err.reason, "UnpackFailed", "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_packs_and_silent_servers_are_given_up_on() {
    let (_dir, scratch, server) = serve(None).await;
    let repo = server.create("big").unwrap();
    // 4 MiB that do not compress.
    let noise: String = (0..4 * 1024 * 1024 / 64)
        .map(|i| {
            format!(
                "{:064x}\n",
                (i as u128).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835)
            )
        })
        .collect();
    repo.commit(
        "main",
        &[("catalog/c.yaml", CATALOG), ("blob.txt", &noise)],
        "big",
    )
    .unwrap();
    let r = remote(&server.repo_url("big"), None);
    let err = fetch_files(&r, branch("main"), scratch.clone(), "catalog", 256 * 1024)
        .await
        .unwrap_err();
    assert_eq!(err.reason, "ContentTooLarge", "{err}");
    assert_eq!(std::fs::read_dir(&scratch).unwrap().count(), 0);

    // A server that accepts connections and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/r.git", silent.local_addr().unwrap());
    let slow = Remote {
        timeout: Duration::from_secs(2),
        ..remote(&url, None)
    };
    let started = std::time::Instant::now();
    let err = fetch_files(&slow, branch("main"), scratch.clone(), "", 1 << 20)
        .await
        .unwrap_err();
    assert!(err.message.contains("took longer than 2s"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(20));
    drop(silent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssh_repositories_need_a_known_host_and_an_accepted_key() {
    use catalogd_sources::git::ssh::SshAuth;
    use olm_testkit::ssh::SshServer;

    let (dir, scratch, server) = serve(None).await;
    let repo = server.create("catalogs").unwrap();
    let head = repo
        .commit("main", &[("catalog/c.yaml", CATALOG)], "one")
        .unwrap();
    repo.tag("v1").unwrap();
    let sshd = SshServer::start(&dir.path().join("sshd")).unwrap();
    let url = sshd.url(&server.root.join("catalogs.git"));
    let with = |key: &str, known: &str| Remote {
        ssh: Some(SshAuth {
            private_key: key.to_owned(),
            known_hosts: known.to_owned(),
        }),
        ..remote(&url, None)
    };
    let good = with(&sshd.private_key, &sshd.known_hosts);

    let id = ls(&good, branch("main"), scratch.clone()).await.unwrap();
    assert_eq!(id.to_string(), head);
    let id = ls(&good, Want::Tag("v1".into()), scratch.clone())
        .await
        .unwrap();
    assert_eq!(id.to_string(), head);
    let (commit, files) = fetch_files(&good, branch("main"), scratch.clone(), "catalog", 1 << 20)
        .await
        .unwrap();
    assert_eq!(commit.to_string(), head);
    assert_eq!(files.len(), 1);

    // Under the default network policy, the loopback server is never reached, over ssh or
    // http: refused with its own reason, before a connection.
    for refused in [
        Remote {
            policy: Arc::new(NetworkPolicy::default()),
            ..good.clone()
        },
        Remote {
            policy: Arc::new(NetworkPolicy::default()),
            ..remote(&server.repo_url("catalogs"), None)
        },
    ] {
        let err = ls(&refused, branch("main"), scratch.clone())
            .await
            .unwrap_err();
        assert_eq!(err.reason, "HostNotAllowed", "{err}");
        assert!(err.message.contains("--allow-loopback-sources"), "{err}");
    }

    // A repository the server does not have: its own words, and the reason they give.
    let missing = Remote {
        url: sshd.url(&server.root.join("missing.git")),
        ..good.clone()
    };
    let err = ls(&missing, branch("main"), scratch.clone())
        .await
        .unwrap_err();
    assert_eq!(err.reason, "SourceNotFound", "{err}");
    assert!(err.message.contains("the server said:"), "{err}");

    // A host key that is not the known one: refused before any credential is offered.
    let err = ls(
        &with(&sshd.private_key, &sshd.wrong_known_hosts),
        branch("main"),
        scratch.clone(),
    )
    .await
    .unwrap_err();
    assert_eq!(err.reason, "Unauthorized", "{err}");
    assert!(err.message.contains("host key"), "{err}");
    let err = ls(
        &with(&sshd.private_key, "# nothing\n"),
        branch("main"),
        scratch.clone(),
    )
    .await
    .unwrap_err();
    assert!(
        err.message.contains("is not in the ssh-knownhosts"),
        "{err}"
    );

    // A key the server does not accept.
    let err = ls(
        &with(&sshd.stranger_key, &sshd.known_hosts),
        branch("main"),
        scratch.clone(),
    )
    .await
    .unwrap_err();
    assert_eq!(err.reason, "Unauthorized", "{err}");
    assert!(err.message.contains("refused the ssh-privatekey"), "{err}");

    // Not a key at all.
    let err = ls(
        &with("not a key", &sshd.known_hosts),
        branch("main"),
        scratch.clone(),
    )
    .await
    .unwrap_err();
    assert_eq!(err.reason, "InvalidCredentials", "{err}");
    assert_eq!(std::fs::read_dir(&scratch).unwrap().count(), 0);
}

/// A server whose ref advertisement never ends (over HTTP; ssh is bounded by its session
/// reader): listing its refs stops at the budget (16 MiB) with `ContentTooLarge`, long before
/// the timeout, instead of reading for as long as the server sends. A hostile server, so a
/// small axum one: git's own backend never does this.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_ref_advertisement_is_cut_short() {
    use axum::http::header;
    use axum::response::IntoResponse;

    let (_dir, scratch, _server) = serve(None).await;
    let pkt = |payload: String| format!("{:04x}{payload}", payload.len() + 4);
    let id = "a".repeat(40);
    // The first ref carries the capabilities (protocol v0/v1); then refs without end.
    let first = format!(
        "{}0000{}",
        pkt("# service=git-upload-pack\n".into()),
        pkt(format!("{id} refs/heads/main\0side-band-64k\n"))
    );
    let first: &'static [u8] = Box::leak(first.into_bytes().into_boxed_slice());
    let line = pkt(format!("{id} refs/heads/more\n"));
    let line: &'static [u8] = Box::leak(line.into_bytes().into_boxed_slice());
    let app = axum::Router::new().fallback(move || async move {
        let head =
            futures::stream::iter([Ok::<_, std::io::Error>(bytes::Bytes::from_static(first))]);
        let refs = futures::stream::repeat_with(move || Ok(bytes::Bytes::from_static(line)));
        (
            [(
                header::CONTENT_TYPE,
                "application/x-git-upload-pack-advertisement",
            )],
            axum::body::Body::from_stream(futures::StreamExt::chain(head, refs)),
        )
            .into_response()
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let r = Remote {
        timeout: Duration::from_secs(120),
        ..remote(&format!("http://{addr}/endless.git"), None)
    };
    let started = std::time::Instant::now();
    let err = ls(&r, branch("main"), scratch).await.unwrap_err();
    assert_eq!(err.reason, "ContentTooLarge", "{err}");
    assert!(err.message.contains("ref advertisement"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(100),
        "it read until the timeout"
    );
}
