//! The git source against a real git server (git's own smart HTTP backend on 127.0.0.1, over
//! HTTP and HTTPS), with catalogd as a local process under its own ServiceAccount: a branch
//! that moves, a tag, a pinned commit, polls that cost one ls-refs, refusals that keep the
//! last good content, and a private repository with and without credentials.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, Patch, PatchParams, PostParams};
use olm_api::catalog::Catalog;
use olm_api::conditions::find_condition;
use olm_e2e::catalogs::{
    create_catalog, example_catalog, metric, scope_secret, status, unpacked_message, wait_reason,
    wait_unpacked,
};
use olm_e2e::context::TestContext;
use olm_e2e::git::{GitCredentials, GitServer, Repo};
use olm_e2e::manager::{OLM_NAMESPACE, catalogd};
use olm_e2e::wait::wait_for;
use serde_json::json;

use crate::catalogd::wait_for_event;

const USER: &str = "reader";
const PASSWORD: &str = "git-s3cret";

fn git_source(repository: &str, reference: serde_json::Value) -> serde_json::Value {
    json!({"type": "git", "git": {"repository": repository, "ref": reference, "directory": "catalog"}})
}

fn commit_of(c: Option<&Catalog>) -> Option<String> {
    status(c)
        .resolved_source
        .and_then(|r| r.git)
        .map(|g| g.commit)
}

fn last_poll(c: Option<&Catalog>) -> Option<String> {
    status(c)
        .resolved_source
        .and_then(|r| r.git)
        .and_then(|g| g.last_poll_attempt)
        .map(|t| t.0.to_string())
}

/// Waits for a poll recorded after `after`; returns its time.
async fn wait_poll_after(api: &Api<Catalog>, name: &str, after: Option<String>) -> Option<String> {
    olm_e2e::catalogs::wait_poll_after(api, name, after, last_poll)
        .await
        .unwrap()
}

/// Commits the example catalog at `version` under `catalog/`, beside a README that is not
/// FBC (outside the directory, so never read).
fn commit_example(repo: &Repo, version: &str) -> String {
    let catalog = example_catalog(version);
    repo.commit(
        "main",
        &[
            ("README.md", "# Catalogs\n"),
            ("catalog/example-operator/catalog.yaml", catalog.as_str()),
        ],
        &format!("example-operator {version}"),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moving_branch_a_tag_and_a_pinned_commit_are_served() {
    let ctx = TestContext::new("git-refs").await.unwrap();
    let cd = catalogd().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = GitServer::start(dir.path(), None).await.unwrap();
    let repo = server.create("catalogs").unwrap();
    let first = commit_example(&repo, "0.1.0");
    repo.annotated_tag("v0.1.0", "the first release").unwrap();
    let second = commit_example(&repo, "0.2.0");
    let url = server.repo_url("catalogs");

    // A branch, polled every 5 s.
    let branch = ctx.name("branch");
    let mut source = git_source(&url, json!({"branch": "main"}));
    source["git"]["pollInterval"] = json!("5s");
    let api = create_catalog(&ctx, &branch, source).await.unwrap();
    let served = wait_unpacked(&api, &branch, None).await.unwrap();
    assert_eq!(commit_of(Some(&served)).as_deref(), Some(second.as_str()));
    let content = reqwest::get(status(Some(&served)).content_url.unwrap())
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(content.contains("example-operator.v0.2.0"), "{content}");
    assert!(
        !content.contains("Catalogs"),
        "the README was read: {content}"
    );

    // Each poll of the unchanged branch is the handshake and one ls-refs, nothing more.
    let settled = wait_poll_after(&api, &branch, last_poll(Some(&served))).await;
    let ls_refs = ["operation=\"ls-refs\"", "result=\"success\""];
    let polls_before = metric(&cd.admin_url, "catalogd_git_operations_total", &ls_refs)
        .await
        .unwrap();
    let before = server.requests().len();
    let once = wait_poll_after(&api, &branch, settled).await;
    wait_poll_after(&api, &branch, once).await;
    let during: Vec<String> = server.requests().into_iter().skip(before).collect();
    let poll = [
        "GET /catalogs.git/info/refs?service=git-upload-pack",
        "POST /catalogs.git/git-upload-pack",
    ];
    assert!(
        during.len() >= 2 && during.len() <= 4 && during.chunks(2).all(|c| c == poll),
        "requests of one or two polls: {during:?}"
    );
    let polls_after = metric(&cd.admin_url, "catalogd_git_operations_total", &ls_refs)
        .await
        .unwrap();
    assert!(
        polls_after >= polls_before + 2.0,
        "{polls_after} < {polls_before} + 2"
    );
    let fetched = metric(&cd.admin_url, "catalogd_git_fetched_bytes_total", &[])
        .await
        .unwrap();
    assert!(fetched > 0.0);
    let after_polls = api.get(&branch).await.unwrap();
    assert_eq!(
        status(Some(&after_polls)).content_hash,
        status(Some(&served)).content_hash,
        "unchanged polls change nothing"
    );

    // The branch moves: the next poll fetches the new commit.
    let third = commit_example(&repo, "0.3.0");
    let moved = wait_unpacked(&api, &branch, status(Some(&served)).content_hash.as_deref())
        .await
        .unwrap();
    assert_eq!(commit_of(Some(&moved)).as_deref(), Some(third.as_str()));

    // A tag (annotated: peeled to its commit) and the same commit pinned serve the same
    // content, so the same hash.
    let tag = ctx.name("tag");
    let tagged = create_catalog(&ctx, &tag, git_source(&url, json!({"tag": "v0.1.0"})))
        .await
        .unwrap();
    let by_tag = wait_unpacked(&tagged, &tag, None).await.unwrap();
    assert_eq!(commit_of(Some(&by_tag)).as_deref(), Some(first.as_str()));
    let pinned = ctx.name("pinned");
    let pins = create_catalog(&ctx, &pinned, git_source(&url, json!({"commit": first})))
        .await
        .unwrap();
    let by_commit = wait_unpacked(&pins, &pinned, None).await.unwrap();
    assert_eq!(commit_of(Some(&by_commit)).as_deref(), Some(first.as_str()));
    assert_eq!(
        status(Some(&by_commit)).content_hash,
        status(Some(&by_tag)).content_hash
    );

    // A branch that does not exist.
    let missing = ctx.name("missing");
    let gone = create_catalog(&ctx, &missing, git_source(&url, json!({"branch": "nope"})))
        .await
        .unwrap();
    let failed = wait_reason(&gone, &missing, "SourceNotFound")
        .await
        .unwrap();
    assert!(
        unpacked_message(&failed).contains("has no branch \"nope\""),
        "{}",
        unpacked_message(&failed)
    );

    // Broken commits on the branch: invalid FBC, then a symlink out of the directory. Each
    // fails with its reason and an event, and the last good content stays served.
    let good = status(Some(&moved)).content_hash.unwrap();
    repo.commit(
        "main",
        &[(
            "catalog/example-operator/catalog.yaml",
            "schema: olm.package\n",
        )],
        "broken",
    )
    .unwrap();
    let invalid = wait_reason(&api, &branch, "InvalidContent").await.unwrap();
    assert_eq!(
        status(Some(&invalid)).content_hash.as_deref(),
        Some(good.as_str())
    );
    let conditions = status(Some(&invalid)).conditions;
    let serving = find_condition(&conditions, "Serving").unwrap();
    assert_eq!(serving.status, "True");
    let events: Api<Event> = Api::namespaced(ctx.client.clone(), "default");
    wait_for_event(&events, &branch, "InvalidContent").await;

    std::os::unix::fs::symlink(
        "../../../etc/passwd",
        repo.work_dir().join("catalog/escape.yaml"),
    )
    .unwrap();
    commit_example(&repo, "0.3.0");
    let refused = wait_reason(&api, &branch, "UnpackFailed").await.unwrap();
    let message = unpacked_message(&refused);
    assert!(message.contains("outside the catalog"), "{message}");
    assert_eq!(
        status(Some(&refused)).content_hash.as_deref(),
        Some(good.as_str())
    );
    wait_for_event(&events, &branch, "UnpackFailed").await;
    let served_now = reqwest::get(status(Some(&refused)).content_url.unwrap())
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(served_now.contains("example-operator.v0.3.0"));
    ctx.cleanup().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_repository_needs_an_opted_in_secret_over_https() {
    let ctx = TestContext::new("git-private").await.unwrap();
    catalogd().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = GitServer::start(
        dir.path(),
        Some(GitCredentials {
            user: USER.into(),
            password: PASSWORD.into(),
        }),
    )
    .await
    .unwrap();
    let repo = server.create("private/catalogs").unwrap();
    let head = commit_example(&repo, "0.1.0");
    let url = server.https_repo_url("private/catalogs");
    let ca = ctx.name("git-ca");
    ctx.apply(&json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": ca, "namespace": OLM_NAMESPACE},
        "data": {"ca.crt": olm_e2e::tls::ca().unwrap().pem},
    }))
    .await
    .unwrap();

    // No credentials.
    let name = ctx.name("private");
    let mut source = git_source(&url, json!({"branch": "main"}));
    source["git"]["caBundle"] = json!({"configMap": ca});
    let api = create_catalog(&ctx, &name, source).await.unwrap();
    let c = wait_reason(&api, &name, "Unauthorized").await.unwrap();
    assert!(
        unpacked_message(&c).contains("needs credentials"),
        "{}",
        unpacked_message(&c)
    );

    // A Secret that did not opt in is not even read.
    let secret = ctx.name("git-auth");
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), OLM_NAMESPACE);
    let mut doc = ctx.labelled(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": secret, "namespace": OLM_NAMESPACE},
        "stringData": {"username": USER, "password": "wrong"},
    }));
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(doc.clone()).unwrap(),
        )
        .await
        .unwrap();
    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"source": {"git": {"authSecret": {"name": secret}}}}})),
    )
    .await
    .unwrap();
    wait_reason(&api, &name, "SecretNotOptedIn").await.unwrap();

    // Opted in, but saying nowhere where it may be sent: still not sent.
    doc["metadata"]["labels"]["olm-rs.io/catalog-credential"] = json!("true");
    secrets
        .patch(&secret, &PatchParams::default(), &Patch::Merge(doc.clone()))
        .await
        .unwrap();
    let c = wait_reason(&api, &name, "CredentialNotAllowed")
        .await
        .unwrap();
    assert!(
        unpacked_message(&c).contains("olm-rs.io/credential-hosts"),
        "{}",
        unpacked_message(&c)
    );
    // Scoped to another path of the server: not this repository.
    let origin = url.split("/private/").next().unwrap().to_owned();
    scope_secret(&ctx, &secret, &format!("{origin}/public/"))
        .await
        .unwrap();
    wait_for(
        &api,
        &name,
        "refused for another prefix",
        Duration::from_secs(60),
        |c| {
            find_condition(&status(c).conditions, "Unpacked").is_some_and(|u| {
                u.reason == "CredentialNotAllowed" && u.message.contains("may be sent only to")
            })
        },
    )
    .await
    .unwrap();

    // Opted in and scoped to this repository's prefix, with a wrong password: refused by the
    // server, and the password is never shown.
    scope_secret(&ctx, &secret, &format!("{origin}/private/"))
        .await
        .unwrap();
    let refused = wait_for(
        &api,
        &name,
        "refused credentials",
        Duration::from_secs(60),
        |c| {
            find_condition(&status(c).conditions, "Unpacked")
                .is_some_and(|u| u.reason == "Unauthorized" && u.message.contains("were refused"))
        },
    )
    .await
    .unwrap();
    assert!(!unpacked_message(&refused).contains("wrong"));

    // The right password: served from the private repository.
    secrets
        .patch(
            &secret,
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"password": PASSWORD}})),
        )
        .await
        .unwrap();
    let served = wait_unpacked(&api, &name, None).await.unwrap();
    assert_eq!(commit_of(Some(&served)).as_deref(), Some(head.as_str()));

    // Credentials are never sent in clear text: the API server refuses an http:// repository
    // with an authSecret.
    let clear = ctx.name("clear");
    let mut source = git_source(
        &server.repo_url("private/catalogs"),
        json!({"branch": "main"}),
    );
    source["git"]["authSecret"] = json!({"name": secret});
    let err = create_catalog(&ctx, &clear, source).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("authSecret is sent only over https"),
        "{err}"
    );
    ctx.cleanup().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ssh_repository_needs_a_key_and_the_hosts_known_key() {
    let ctx = TestContext::new("git-ssh").await.unwrap();
    catalogd().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = GitServer::start(&dir.path().join("repos"), None)
        .await
        .unwrap();
    let repo = server.create("catalogs").unwrap();
    let head = commit_example(&repo, "0.1.0");
    let sshd = olm_e2e::ssh::SshServer::start(&dir.path().join("sshd")).unwrap();
    let url = sshd.url(&server.root.join("catalogs.git"));

    // A Secret with the key but no known hosts: catalogd never trusts a host key on first use.
    let secret = ctx.name("ssh-auth");
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), OLM_NAMESPACE);
    let doc = ctx.labelled(json!({
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/ssh-auth",
        "metadata": {"name": secret, "namespace": OLM_NAMESPACE,
            "labels": {"olm-rs.io/catalog-credential": "true"},
            // The ssh server's host (any port).
            "annotations": {"olm-rs.io/credential-hosts": "127.0.0.1"}},
        "stringData": {"ssh-privatekey": sshd.private_key},
    }));
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(doc).unwrap(),
        )
        .await
        .unwrap();
    let name = ctx.name("ssh");
    let mut source = git_source(&url, json!({"branch": "main"}));
    source["git"]["authSecret"] = json!({"name": secret});
    let api = create_catalog(&ctx, &name, source).await.unwrap();
    let c = wait_reason(&api, &name, "InvalidCredentials")
        .await
        .unwrap();
    assert!(
        unpacked_message(&c).contains("ssh-knownhosts"),
        "{}",
        unpacked_message(&c)
    );

    // The server's known_hosts line added: served over ssh.
    secrets
        .patch(
            &secret,
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"ssh-knownhosts": sshd.known_hosts}})),
        )
        .await
        .unwrap();
    let served = wait_unpacked(&api, &name, None).await.unwrap();
    assert_eq!(commit_of(Some(&served)).as_deref(), Some(head.as_str()));
    ctx.cleanup().await.unwrap();
}
