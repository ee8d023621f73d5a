use kube::ResourceExt;
use kube::api::{Api, DynamicObject};
use kube::discovery::pinned_kind;
use olm_e2e::context::TestContext;
use olm_e2e::{apply, samples};

/// Fields the API server prunes are fields our schema lacks: every field of every sample must
/// come back exactly as it was sent.
fn assert_contains(sent: &serde_json::Value, stored: &serde_json::Value, path: &str) {
    match (sent, stored) {
        (serde_json::Value::Object(a), serde_json::Value::Object(b)) => {
            for (k, v) in a {
                let child = format!("{path}.{k}");
                let other = b
                    .get(k)
                    .unwrap_or_else(|| panic!("{child} was pruned by the API server"));
                assert_contains(v, other, &child);
            }
        }
        (serde_json::Value::Array(a), serde_json::Value::Array(b)) => {
            assert_eq!(a.len(), b.len(), "{path} changed length");
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                assert_contains(x, y, &format!("{path}[{i}]"));
            }
        }
        _ => assert_eq!(sent, stored, "{path} changed"),
    }
}

#[tokio::test]
async fn every_sample_is_accepted_and_stored_unchanged() {
    let ctx = TestContext::new("samples").await.unwrap();
    let loaded = samples::load(&samples::samples_dir()).unwrap();
    assert!(
        loaded.len() >= 8,
        "config/samples/ holds too few objects: {}",
        loaded.len()
    );
    for sample in &loaded {
        let applied = ctx
            .apply(&sample.doc)
            .await
            .unwrap_or_else(|e| panic!("{} was rejected: {e}", sample.file.display()));
        let gvk = apply::gvk_of(&sample.doc).unwrap();
        let (resource, _) = pinned_kind(&ctx.client, &gvk).await.unwrap();
        let api: Api<DynamicObject> = match applied.namespace() {
            Some(ns) => Api::namespaced_with(ctx.client.clone(), &ns, &resource),
            None => Api::all_with(ctx.client.clone(), &resource),
        };
        let stored = serde_json::to_value(api.get(&applied.name_any()).await.unwrap()).unwrap();
        for field in ["spec", "data"] {
            if let Some(sent) = sample.doc.get(field) {
                assert_contains(
                    sent,
                    &stored[field],
                    &format!("{} {field}", sample.file.display()),
                );
            }
        }
        println!(
            "accepted {} {} from {}",
            gvk.kind,
            applied.name_any(),
            sample.file.display()
        );
    }
    ctx.cleanup().await.unwrap();
}

/// The default comes from the CRD, not from our types: the object is read untyped, so a serde
/// default on the Rust side cannot fill in a value the API server did not store.
#[tokio::test]
async fn an_operator_without_a_policy_defaults_to_enforce() {
    let ctx = TestContext::new("defaults").await.unwrap();
    let name = ctx.name("op");
    let doc = serde_json::json!({
        "apiVersion": "operators.operatorframework.io/v1alpha1",
        "kind": "Operator",
        "metadata": {"name": name},
        "spec": {"packageName": "foo"}
    });
    let applied = ctx.apply(&doc).await.unwrap();
    assert_eq!(
        applied.data["spec"]["upgradeConstraintPolicy"],
        serde_json::json!("Enforce"),
        "the API server did not default upgradeConstraintPolicy: {:?}",
        applied.data["spec"]
    );
    let gvk = apply::gvk_of(&doc).unwrap();
    let (resource, _) = pinned_kind(&ctx.client, &gvk).await.unwrap();
    let stored = Api::<DynamicObject>::all_with(ctx.client.clone(), &resource)
        .get(&name)
        .await
        .unwrap();
    assert_eq!(stored.data["spec"]["upgradeConstraintPolicy"], "Enforce");
    ctx.cleanup().await.unwrap();
}
