//! The API server rejects invalid objects with a message a person can act on.

use kube::api::{Api, DynamicObject, PostParams};
use kube::discovery::pinned_kind;
use olm_api::Operator;
use olm_e2e::apply;
use olm_e2e::context::TestContext;
use serde_json::json;

/// Creates `doc` and returns the API server's rejection message; fails if it was accepted.
async fn rejection(ctx: &TestContext, doc: serde_json::Value) -> String {
    let gvk = apply::gvk_of(&doc).unwrap();
    let (resource, _) = pinned_kind(&ctx.client, &gvk).await.unwrap();
    let api: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &resource);
    // Labelled, so that an object accepted by mistake is still cleaned up.
    let obj: DynamicObject = serde_json::from_value(ctx.labelled(doc.clone())).unwrap();
    match api.create(&PostParams::default(), &obj).await {
        Ok(_) => panic!("the API server accepted an invalid object: {doc}"),
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422, "expected 422 Invalid, got {status:?}");
            println!("rejected as expected: {}", status.message);
            status.message
        }
        Err(e) => panic!("unexpected error: {e}"),
    }
}

fn catalog(name: &str, source: serde_json::Value) -> serde_json::Value {
    json!({
        "apiVersion": "catalogd.operatorframework.io/v1alpha1",
        "kind": "Catalog",
        "metadata": {"name": name},
        "spec": {"source": source}
    })
}

fn operator(name: &str, spec: serde_json::Value) -> serde_json::Value {
    json!({
        "apiVersion": "operators.operatorframework.io/v1alpha1",
        "kind": "Operator",
        "metadata": {"name": name},
        "spec": spec
    })
}

fn assert_mentions(message: &str, parts: &[&str]) {
    for part in parts {
        assert!(
            message.contains(part),
            "message {message:?} does not mention {part:?}"
        );
    }
}

#[tokio::test]
async fn a_catalog_with_two_source_members_is_rejected() {
    let ctx = TestContext::new("two-members").await.unwrap();
    let msg = rejection(
        &ctx,
        catalog(
            &ctx.name("c"),
            json!({"type": "image", "image": {"ref": "example.com/c:1"},
                   "http": {"url": "https://example.com/c.json"}}),
        ),
    )
    .await;
    assert_mentions(
        &msg,
        &["source.http must be set when source.type is http, and only then"],
    );
    ctx.cleanup().await.unwrap();
}

#[tokio::test]
async fn a_catalog_without_its_source_member_is_rejected() {
    let ctx = TestContext::new("no-member").await.unwrap();
    let msg = rejection(&ctx, catalog(&ctx.name("c"), json!({"type": "image"}))).await;
    assert_mentions(
        &msg,
        &["source.image must be set when source.type is image, and only then"],
    );
    let msg = rejection(&ctx, catalog(&ctx.name("d"), json!({}))).await;
    assert_mentions(&msg, &["spec.source.type", "Required value"]);
    ctx.cleanup().await.unwrap();
}

#[tokio::test]
async fn a_catalog_with_an_unknown_source_type_is_rejected() {
    let ctx = TestContext::new("bad-type").await.unwrap();
    let msg = rejection(&ctx, catalog(&ctx.name("c"), json!({"type": "ftp"}))).await;
    assert_mentions(
        &msg,
        &[
            "spec.source.type",
            "Unsupported value: \"ftp\"",
            "\"image\"",
            "\"configMaps\"",
        ],
    );
    ctx.cleanup().await.unwrap();
}

#[tokio::test]
async fn a_digest_image_with_a_poll_interval_is_rejected() {
    let ctx = TestContext::new("digest-poll").await.unwrap();
    let digest = format!("example.com/c@sha256:{}", "a".repeat(64));
    let msg = rejection(
        &ctx,
        catalog(
            &ctx.name("c"),
            json!({"type": "image", "image": {"ref": digest, "pollInterval": "5m"}}),
        ),
    )
    .await;
    assert_mentions(
        &msg,
        &["cannot specify PollInterval while using digest-based image"],
    );
    ctx.cleanup().await.unwrap();
}

#[tokio::test]
async fn a_git_source_needs_exactly_one_ref() {
    let ctx = TestContext::new("git-ref").await.unwrap();
    for (i, r#ref) in [json!({}), json!({"branch": "main", "tag": "v1"})]
        .into_iter()
        .enumerate()
    {
        let msg = rejection(
            &ctx,
            catalog(
                &ctx.name(&format!("g{i}")),
                json!({"type": "git", "git": {"repository": "https://example.com/r.git", "ref": r#ref}}),
            ),
        )
        .await;
        assert_mentions(
            &msg,
            &["exactly one of git.ref.branch, git.ref.tag and git.ref.commit must be set"],
        );
    }
    // A glob is not a branch name, and catalogd never reads its own filesystem.
    let msg = rejection(
        &ctx,
        catalog(
            &ctx.name("glob"),
            json!({"type": "git", "git": {"repository": "https://example.com/r.git", "ref": {"branch": "rel*"}}}),
        ),
    )
    .await;
    assert_mentions(&msg, &["spec.source.git.ref.branch", "should match"]);
    for (i, repository) in ["file:///var/lib/catalogd", "/etc", "git://h/r.git"]
        .into_iter()
        .enumerate()
    {
        let msg = rejection(
            &ctx,
            catalog(
                &ctx.name(&format!("local{i}")),
                json!({"type": "git", "git": {"repository": repository, "ref": {"branch": "main"}}}),
            ),
        )
        .await;
        assert_mentions(&msg, &["spec.source.git.repository", "should match"]);
    }
    ctx.cleanup().await.unwrap();
}

#[tokio::test]
async fn a_custom_source_stays_inside_its_volume_and_reads_no_secret() {
    let ctx = TestContext::new("custom-spec").await.unwrap();
    for (i, (field, value, words)) in [
        (
            "outputFile",
            json!("../etc/passwd"),
            vec!["outputFile may not hold . or .. segments"],
        ),
        (
            "outputFile",
            json!("/abs.json"),
            vec!["spec.source.custom.outputFile", "should match"],
        ),
        (
            "mountPath",
            json!("/output/.."),
            vec!["mountPath may not hold . or .. segments"],
        ),
        (
            "mountPath",
            json!("relative"),
            vec!["spec.source.custom.mountPath", "should match"],
        ),
        (
            "env",
            json!([{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]),
            vec!["spec.source.custom.env[0].value", "Required value"],
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let mut custom = json!({"image": "gen:1"});
        custom[field] = value;
        let msg = rejection(
            &ctx,
            catalog(
                &ctx.name(&format!("c{i}")),
                json!({"type": "custom", "custom": custom}),
            ),
        )
        .await;
        assert_mentions(&msg, &words);
    }
    ctx.cleanup().await.unwrap();
}

#[tokio::test]
async fn a_bad_poll_interval_is_rejected() {
    let ctx = TestContext::new("poll").await.unwrap();
    let msg = rejection(
        &ctx,
        catalog(
            &ctx.name("c"),
            json!({"type": "http", "http": {"url": "https://e.com/c", "pollInterval": "often"}}),
        ),
    )
    .await;
    assert_mentions(&msg, &["spec.source.http.pollInterval", "should match"]);
    // Out of range: refused with the range, never clamped behind the user's back.
    for (i, (source, interval)) in [
        ("http", "0s"),
        ("http", "1s"),
        ("http", "4999ms"),
        ("image", "169h"),
        ("git", "0s"),
    ]
    .into_iter()
    .enumerate()
    {
        let member = match source {
            "http" => json!({"url": "https://e.com/c", "pollInterval": interval}),
            "image" => json!({"ref": "e.com/c:1", "pollInterval": interval}),
            _ => {
                json!({"repository": "https://e.com/r.git", "ref": {"branch": "main"}, "pollInterval": interval})
            }
        };
        let msg = rejection(
            &ctx,
            catalog(
                &ctx.name(&format!("r{i}")),
                json!({"type": source, source: member}),
            ),
        )
        .await;
        assert_mentions(
            &msg,
            &[
                &format!("spec.source.{source}.pollInterval"),
                "pollInterval must be between 5s and 168h",
            ],
        );
    }
    // The bounds themselves are accepted.
    for (i, interval) in ["5s", "168h", "1h30m"].into_iter().enumerate() {
        let doc = catalog(
            &ctx.name(&format!("ok{i}")),
            json!({"type": "http", "http": {"url": "https://e.com/c", "pollInterval": interval}}),
        );
        ctx.apply(&doc)
            .await
            .unwrap_or_else(|e| panic!("pollInterval {interval} was rejected: {e}"));
    }
    ctx.cleanup().await.unwrap();
}

#[tokio::test]
async fn an_operator_with_an_invalid_package_name_is_rejected() {
    let ctx = TestContext::new("pkg-name").await.unwrap();
    let msg = rejection(
        &ctx,
        operator(&ctx.name("o"), json!({"packageName": "Not_A-Valid.Name"})),
    )
    .await;
    assert_mentions(
        &msg,
        &[
            "spec.packageName",
            "should match '^[a-z0-9]+(-[a-z0-9]+)*$'",
        ],
    );
    let long = "a".repeat(49);
    let msg = rejection(&ctx, operator(&ctx.name("p"), json!({"packageName": long}))).await;
    assert_mentions(&msg, &["spec.packageName", "48"]);
    ctx.cleanup().await.unwrap();
}

#[tokio::test]
async fn an_operator_names_namespaces_it_installs_in_and_watches_or_is_rejected() {
    let ctx = TestContext::new("op-namespaces").await.unwrap();
    let msg = rejection(
        &ctx,
        operator(
            &ctx.name("both"),
            json!({"packageName": "foo", "watchNamespace": "a", "targetNamespaces": ["b"]}),
        ),
    )
    .await;
    assert_mentions(&msg, &["watchNamespace and targetNamespaces are both set"]);
    let msg = rejection(
        &ctx,
        operator(
            &ctx.name("bad"),
            json!({"packageName": "foo", "namespace": "Not_A_Namespace"}),
        ),
    )
    .await;
    assert_mentions(&msg, &["spec.namespace", "should match"]);
    let msg = rejection(
        &ctx,
        operator(
            &ctx.name("dup"),
            json!({"packageName": "foo", "targetNamespaces": ["a", "a"]}),
        ),
    )
    .await;
    assert_mentions(&msg, &["spec.targetNamespaces", "Duplicate value"]);
    // "" is all namespaces for watchNamespace, and accepted.
    let api: Api<Operator> = Api::all(ctx.client.clone());
    let all: Operator = serde_json::from_value(ctx.labelled(operator(
        &ctx.name("all"),
        json!({"packageName": "foo", "namespace": "ops", "watchNamespace": ""}),
    )))
    .unwrap();
    api.create(&PostParams::default(), &all).await.unwrap();
    ctx.cleanup().await.unwrap();
}

#[tokio::test]
async fn an_operator_version_longer_than_64_characters_is_rejected() {
    let ctx = TestContext::new("version-len").await.unwrap();
    let version = format!(">=1.0.0 {}", "<2.0.0 ".repeat(9))
        .trim_end()
        .to_owned();
    assert!(version.len() > 64);
    let msg = rejection(
        &ctx,
        operator(
            &ctx.name("o"),
            json!({"packageName": "foo", "version": version}),
        ),
    )
    .await;
    assert_mentions(&msg, &["spec.version", "64"]);
    ctx.cleanup().await.unwrap();
}

#[tokio::test]
async fn an_operator_version_that_is_not_a_range_is_rejected() {
    let ctx = TestContext::new("version-syntax").await.unwrap();
    let msg = rejection(
        &ctx,
        operator(
            &ctx.name("o"),
            json!({"packageName": "foo", "version": "latest please"}),
        ),
    )
    .await;
    assert_mentions(&msg, &["spec.version", "should match"]);
    ctx.cleanup().await.unwrap();
}

#[tokio::test]
async fn an_operator_with_an_unknown_upgrade_policy_is_rejected() {
    let ctx = TestContext::new("policy").await.unwrap();
    let msg = rejection(
        &ctx,
        operator(
            &ctx.name("o"),
            json!({"packageName": "foo", "upgradeConstraintPolicy": "Sometimes"}),
        ),
    )
    .await;
    assert_mentions(
        &msg,
        &[
            "spec.upgradeConstraintPolicy",
            "Unsupported value: \"Sometimes\"",
            "\"Enforce\"",
            "\"Ignore\"",
        ],
    );
    ctx.cleanup().await.unwrap();
}

#[tokio::test]
async fn an_operator_with_an_invalid_channel_is_rejected() {
    let ctx = TestContext::new("channel").await.unwrap();
    let msg = rejection(
        &ctx,
        operator(
            &ctx.name("o"),
            json!({"packageName": "foo", "channel": "-stable"}),
        ),
    )
    .await;
    assert_mentions(&msg, &["spec.channel", "should match"]);
    ctx.cleanup().await.unwrap();
}

#[tokio::test]
async fn valid_version_ranges_are_accepted() {
    let ctx = TestContext::new("ranges").await.unwrap();
    let api: Api<olm_api::Operator> = Api::all(ctx.client.clone());
    for (i, version) in [
        "1.2.3",
        ">=1.0.0 <2.0.0",
        ">=1.0.0, <2.0.0",
        "1.2.x",
        "~1.2",
        "^1.2",
        "<1.0 || >=2.0",
    ]
    .into_iter()
    .enumerate()
    {
        let doc = operator(
            &ctx.name(&format!("r{i}")),
            json!({"packageName": "foo", "version": version}),
        );
        let obj: olm_api::Operator = serde_json::from_value(ctx.labelled(doc)).unwrap();
        api.create(&PostParams::default(), &obj)
            .await
            .unwrap_or_else(|e| panic!("version {version:?} was rejected: {e}"));
    }
    ctx.cleanup().await.unwrap();
}

#[tokio::test]
async fn credentials_over_plain_http_are_rejected() {
    let ctx = TestContext::new("auth-http").await.unwrap();
    let msg = rejection(
        &ctx,
        catalog(
            &ctx.name("c"),
            json!({"type": "http", "http": {"url": "http://e.com/c.json", "authSecret": {"name": "s"}}}),
        ),
    )
    .await;
    assert_mentions(&msg, &["authSecret is sent only to https URLs"]);
    ctx.cleanup().await.unwrap();
}
