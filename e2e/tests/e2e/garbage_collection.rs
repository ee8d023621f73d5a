use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use kube::{Resource, ResourceExt};
use olm_api::operator::{Operator, OperatorSpec, UpgradeConstraintPolicy};
use olm_e2e::context::TestContext;
use olm_e2e::wait::wait_for_deletion;

/// kube-controller-manager's garbage collector really runs: an object owned by an Operator
/// goes away with it.
#[tokio::test]
async fn a_configmap_owned_by_an_operator_is_collected_with_it() {
    let ctx = TestContext::new("gc").await.unwrap();
    let operators: Api<Operator> = Api::all(ctx.client.clone());
    let spec = OperatorSpec {
        package_name: "gc-test".into(),
        version: None,
        channel: None,
        upgrade_constraint_policy: UpgradeConstraintPolicy::Enforce,
        catalog_selector: None,
        namespace: None,
        watch_namespace: None,
        target_namespaces: None,
        deployment_config: None,
        values: None,
        values_from: None,
    };
    let mut op = Operator::new(&ctx.name("owner"), spec);
    op.metadata.labels = Some(ctx.labels());
    let op = operators.create(&PostParams::default(), &op).await.unwrap();
    let owner = OwnerReference {
        api_version: Operator::api_version(&()).into_owned(),
        kind: Operator::kind(&()).into_owned(),
        name: op.name_any(),
        uid: op.uid().unwrap(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let configmaps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some("owned".into()),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        data: Some([("k".to_owned(), "v".to_owned())].into()),
        ..Default::default()
    };
    configmaps
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();

    operators
        .delete(&op.name_any(), &DeleteParams::background())
        .await
        .unwrap();
    // The collector reacts within about a second; the deadline covers a loaded CI machine and
    // one 30 s discovery resync in case the CRD was new to it.
    wait_for_deletion(&configmaps, "owned", Duration::from_secs(60))
        .await
        .unwrap();
    ctx.cleanup().await.unwrap();
}
