//! The custom source: a generator container writes the catalog, the collector uploads it.
//! The Pods run on the cluster's node under the real kubelet and containerd (busybox and
//! catalogd's own image from the node's registry); they upload to this test process's catalogd
//! at this machine's address on the node's link.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use olm_api::catalog::Catalog;
use olm_e2e::catalogs::{
    EXAMPLE_CATALOG_JSON as CATALOG_JSON, create_catalog, metric, status, unpacked_message,
    wait_reason, wait_unpacked,
};
use olm_e2e::context::TestContext;
use olm_e2e::manager::{OLM_NAMESPACE, catalogd};
use olm_e2e::node::{
    exited_zero, push_busybox, push_manager, ran_on_the_node, registry, watch_generator_pods,
};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::catalogd::wait_for_event;

/// A custom source running `script` with /bin/sh of `image`, as in the elemental example.
fn generator(image: &str, script: &str) -> serde_json::Value {
    json!({"type": "custom", "custom": {
        "image": image,
        "command": ["/bin/sh", "-c"],
        "args": [script],
        "outputFile": "catalog.json",
        "mountPath": "/output",
        "timeout": "60s",
    }})
}

async fn set_custom(api: &Api<Catalog>, name: &str, custom: serde_json::Value) {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"source": {"custom": custom}}})),
    )
    .await
    .unwrap();
}

/// The generator Pods (and token Secrets) of the Catalog `uid`.
async fn leftovers(ctx: &TestContext, uid: &str) -> usize {
    let selector = ListParams::default().labels(&format!("olm-rs.io/catalog-uid={uid}"));
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), OLM_NAMESPACE);
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), OLM_NAMESPACE);
    let pods = pods.list_metadata(&selector).await.unwrap().items.len();
    // Token Secrets carry no uid label; they are owned by their Pod: any left of this test?
    let all = secrets
        .list_metadata(&ListParams::default().labels("olm-rs.io/catalog-generator=true"))
        .await
        .unwrap();
    pods + all
        .items
        .iter()
        .filter(|s| s.name_any().contains(&ctx.namespace))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generators_are_collected_and_their_failures_explained() {
    let ctx = TestContext::new("custom").await.unwrap();
    let cd = catalogd().unwrap();
    let registry = registry().unwrap();
    let busybox = push_busybox(&registry, "1.36").await.unwrap();
    push_manager(&registry, "catalogd", "e2e").await.unwrap();
    let generator = |script: &str| generator(&busybox, script);
    let (seen, watch) = watch_generator_pods(&ctx.client, OLM_NAMESPACE);
    let name = ctx.name("gen");
    let events: Api<Event> = Api::namespaced(ctx.client.clone(), "default");

    // The elemental example: a shell command echoes JSON into the output file. It sleeps a
    // moment first, so that the test can read the Pod's token while it runs.
    let script = format!("sleep 2; echo '{CATALOG_JSON}' > /output/catalog.json");
    let api = create_catalog(&ctx, &name, generator(&script))
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), OLM_NAMESPACE);
    let (pod, token) = token_secret(&secrets, &ctx.namespace).await;
    // The spec sets no resources: the generator runs with catalogd's default limits, never
    // unbounded.
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), OLM_NAMESPACE);
    // (It runs for 2 s, and its token Secret, which it owns, was just read.)
    let p = pods.get(&pod).await.unwrap();
    let container = &p.spec.unwrap().init_containers.unwrap()[0];
    let limits = container.resources.clone().unwrap().limits.unwrap();
    for resource in ["cpu", "memory", "ephemeral-storage"] {
        assert!(
            limits.contains_key(resource),
            "no {resource} limit: {limits:?}"
        );
    }
    let served = wait_unpacked(&api, &name, None).await.unwrap();
    let s = status(Some(&served));
    let custom = s.resolved_source.clone().unwrap().custom.unwrap();
    let expected = hex::encode(Sha256::digest(format!("{CATALOG_JSON}\n")));
    assert_eq!(custom.sha256, expected);
    let content = reqwest::get(s.content_url.clone().unwrap())
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(content.contains("example-operator.v0.1.0"), "{content}");
    let good = s.content_hash.clone().unwrap();
    let uid = served.uid().unwrap();
    // The kubelet ran it, both containers to their end.
    let ran = seen
        .lock()
        .unwrap()
        .iter()
        .find(|p| p.name_any() == pod && exited_zero(p, "generator") && exited_zero(p, "collector"))
        .cloned();
    let ran = ran.unwrap_or_else(|| panic!("pod {pod} was not seen to run to its end"));
    assert!(ran_on_the_node(&ran), "{:?}", ran.status);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while leftovers(&ctx, &uid).await > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the generator pod was left behind"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // The run's token again, after its upload: replayed, refused.
    let rejected = ["result=\"rejected\""];
    let rejected_before = metric(&cd.admin_url, "catalogd_custom_uploads_total", &rejected)
        .await
        .unwrap();
    let replay = reqwest::Client::new()
        .put(format!("{}/uploads/{pod}", cd.upload_url))
        .bearer_auth(&token)
        .header("x-content-sha256", &expected)
        .body(format!("{CATALOG_JSON}\n"))
        .send()
        .await
        .unwrap();
    assert_eq!(replay.status(), reqwest::StatusCode::FORBIDDEN);
    let rejected_after = metric(&cd.admin_url, "catalogd_custom_uploads_total", &rejected)
        .await
        .unwrap();
    assert_eq!(rejected_after, rejected_before + 1.0);

    // Failures, each explained, each keeping the good content served, none leaving a Pod.
    let failures = vec![
        (
            generator("echo 'cannot reach the package server' >&2; exit 3"),
            "GeneratorFailed",
            vec!["exited with code 3", "cannot reach the package server"],
        ),
        (
            {
                let mut g = generator("sleep 60");
                g["custom"]["timeout"] = json!("3s");
                g
            },
            "GeneratorTimedOut",
            vec!["did not finish within 3s"],
        ),
        (
            generator(r#"echo '{"schema":"olm.package"}' > /output/catalog.json"#),
            "InvalidContent",
            vec!["catalog.json"],
        ),
        (generator("true"), "OutputMissing", vec!["wrote no file at"]),
    ];
    for (custom, reason, words) in failures {
        set_custom(&api, &name, custom["custom"].clone()).await;
        let failed = wait_reason(&api, &name, reason).await.unwrap();
        let message = unpacked_message(&failed);
        for w in words {
            assert!(message.contains(w), "{reason}: {message}");
        }
        assert_eq!(
            status(Some(&failed)).content_hash.as_deref(),
            Some(good.as_str()),
            "{reason}"
        );
        wait_for_event(&events, &name, reason).await;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while leftovers(&ctx, &uid).await > 0 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{reason}: a pod was left behind"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    // A stolen token: whoever reads a run's token Secret (the test, here) uploads first; the
    // token is then used, the run's own collector is refused, and the Catalog says so. What
    // the thief uploaded is never served.
    let script = format!("sleep 5; echo '{CATALOG_JSON}' > /output/catalog.json");
    set_custom(&api, &name, generator(&script)["custom"].clone()).await;
    let (pod, token) = token_secret(&secrets, &ctx.namespace).await;
    let forged = CATALOG_JSON.replace("0.1.0", "9.9.9");
    let stolen = reqwest::Client::new()
        .put(format!("{}/uploads/{pod}", cd.upload_url))
        .bearer_auth(&token)
        .header("x-content-sha256", hex::encode(Sha256::digest(&forged)))
        .body(forged)
        .send()
        .await
        .unwrap();
    assert!(stolen.status().is_success(), "{}", stolen.status());
    let failed = wait_reason(&api, &name, "UploadRejected").await.unwrap();
    let message = unpacked_message(&failed);
    assert!(message.contains("uploaded already"), "{message}");
    assert_eq!(
        status(Some(&failed)).content_hash.as_deref(),
        Some(good.as_str())
    );
    wait_for_event(&events, &name, "UploadRejected").await;

    let still = reqwest::get(status(Some(&served)).content_url.unwrap())
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(still, content, "the last good content stays served");
    watch.abort();
    ctx.cleanup().await.unwrap();
}

/// The name and token of the first generator token Secret of the test's Catalogs that appears.
async fn token_secret(secrets: &Api<Secret>, namespace: &str) -> (String, String) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let list = secrets
            .list(&ListParams::default().labels("olm-rs.io/catalog-generator=true"))
            .await
            .unwrap();
        let mine = list
            .items
            .into_iter()
            .find(|s| s.name_any().contains(namespace));
        if let Some(secret) = mine {
            let token = secret.data.unwrap()["token"].0.clone();
            return (
                secret.metadata.name.unwrap(),
                String::from_utf8(token).unwrap(),
            );
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no token Secret appeared"
        );
        // Polling for the Secret catalogd creates with the run's Pod, bounded by the deadline.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
