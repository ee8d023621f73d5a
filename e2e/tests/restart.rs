//! catalogd across restarts, in a test binary of its own (so its own control plane and its own
//! catalogd, which this test stops and starts): content belongs to the Catalog object that
//! stored it, not to its name, and `contentURL` follows `--external-address`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use kube::api::{DeleteParams, Patch, PatchParams};
use olm_api::conditions::find_condition;
use olm_e2e::catalogs::{
    DEADLINE, configmap_source, create_catalog, example_catalog, put_catalog_configmap, status,
    unpacked_configmap_catalog, wait_reason, wait_unpacked,
};
use olm_e2e::context::TestContext;
use olm_e2e::manager::catalogd;
use olm_e2e::wait::{wait_for, wait_for_deletion};

#[tokio::test]
async fn catalogd_restarts_serve_only_what_belongs_to_each_catalog() {
    let ctx = TestContext::new("restart").await.unwrap();
    let cd = catalogd().unwrap();
    let (name, cm) = (ctx.name("cat"), ctx.name("cat-cm"));
    let (api, first) = unpacked_configmap_catalog(&ctx, &name, &cm, &example_catalog("0.1.0"))
        .await
        .unwrap();
    let url = first.status.unwrap().content_url.unwrap();
    assert_eq!(reqwest::get(&url).await.unwrap().status(), 200);

    // While catalogd is down, the Catalog is deleted (its finalizer removed by hand, as an
    // admin would) and created again under the same name, now with a source that fails.
    cd.manager.stop().unwrap();
    api.delete(&name, &DeleteParams::default()).await.unwrap();
    api.patch_metadata(
        &name,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    wait_for_deletion(&api, &name, DEADLINE).await.unwrap();
    let api = create_catalog(&ctx, &name, configmap_source(&ctx.name("missing")))
        .await
        .unwrap();
    let cd = cd.restart(&[]).unwrap();

    // The new object inherits nothing: not served, and its status says so.
    let c = wait_reason(&api, &name, "SourceNotFound").await.unwrap();
    let s = c.status.unwrap();
    assert_eq!(
        find_condition(&s.conditions, "Serving").unwrap().status,
        "False"
    );
    assert_eq!(s.content_hash, None);
    assert_eq!(reqwest::get(&url).await.unwrap().status(), 404);

    // It unpacks its own content once its source exists.
    put_catalog_configmap(&ctx, &ctx.name("missing"), &example_catalog("0.2.0"))
        .await
        .unwrap();
    let unpacked = wait_unpacked(&api, &name, None).await.unwrap();
    let hash = unpacked.status.unwrap().content_hash.unwrap();

    // Restarted with another external address, catalogd rewrites contentURL of content it
    // already serves, without re-unpacking it.
    let external = "http://catalogd.example.test:8443";
    let cd = cd
        .restart(&[format!("--external-address={external}")])
        .unwrap();
    let expected = format!("{external}/catalogs/{name}/all.json");
    let moved = wait_for(
        &api,
        &name,
        "contentURL at the new address",
        DEADLINE,
        move |c| status(c).content_url.as_deref() == Some(expected.as_str()),
    )
    .await
    .unwrap();
    assert_eq!(moved.status.unwrap().content_hash, Some(hash));
    assert!(cd.manager.is_running());
    ctx.cleanup().await.unwrap();
}
