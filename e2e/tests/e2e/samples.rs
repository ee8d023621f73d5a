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
        let applied = apply::apply_document(&ctx.client, &sample.doc, &ctx.namespace)
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

#[tokio::test]
async fn an_operator_without_a_policy_defaults_to_enforce() {
    let ctx = TestContext::new("defaults").await.unwrap();
    let api: Api<olm_api::Operator> = Api::all(ctx.client.clone());
    let name = ctx.name("op");
    let doc = serde_json::json!({
        "apiVersion": "operators.operatorframework.io/v1alpha1",
        "kind": "Operator",
        "metadata": {"name": name},
        "spec": {"packageName": "foo"}
    });
    apply::apply_document(&ctx.client, &doc, &ctx.namespace)
        .await
        .unwrap();
    let op = api.get(&name).await.unwrap();
    assert_eq!(
        op.spec.upgrade_constraint_policy,
        olm_api::operator::UpgradeConstraintPolicy::Enforce
    );
    api.delete(&name, &Default::default()).await.unwrap();
    ctx.cleanup().await.unwrap();
}
