//! The catalog-switcher against a real control plane and registry, with catalogd, as local
//! processes under their own ServiceAccounts.

use std::time::Duration;

use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use olm_api::catalog::Catalog;
use olm_api::conditions::find_condition;
use olm_e2e::catalogs::{create_catalog, example_catalog, status, wait_unpacked};
use olm_e2e::context::TestContext;
use olm_e2e::images::push_catalog;
use olm_e2e::manager::{StopOnDrop, catalogd, start_catalog_switcher_with};
use olm_e2e::wait::wait_for;
use serde_json::json;

const ANNOTATION: &str = "olm.catalogImageTemplate";

/// Each test runs a switcher of its own (with its own flags, restarted at will); two at once
/// would both reconcile every Catalog, each by its own allowlist. One test at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn condition(c: Option<&Catalog>, type_: &str) -> Option<(String, String, String)> {
    find_condition(&status(c).conditions, type_)
        .map(|x| (x.status.clone(), x.reason.clone(), x.message.clone()))
}

async fn set_annotation(api: &Api<Catalog>, name: &str, value: serde_json::Value) {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {ANNOTATION: value}}})),
    )
    .await
    .unwrap();
}

/// Lets the switcher read the ConfigMaps of the test's namespace: a Role granting exactly that
/// read, bound to its ServiceAccount (with the allowlist naming them, as docs/catalog-switcher.md
/// tells an admin to do).
async fn grant_configmap_reads(ctx: &TestContext) {
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    let ns = &ctx.namespace;
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "catalog-switcher-read", "namespace": ns},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]
    }))
    .unwrap();
    Api::<Role>::namespaced(ctx.client.clone(), ns)
        .create(&Default::default(), &role)
        .await
        .unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "catalog-switcher-read", "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "catalog-switcher-read"},
        "subjects": [{"kind": "ServiceAccount", "name": "catalog-switcher", "namespace": "olm-system"}]
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(ctx.client.clone(), ns)
        .create(&Default::default(), &binding)
        .await
        .unwrap();
}

/// A kube-version template resolves to the test API server's real version; the switcher
/// writes the reference and catalogd unpacks that image. A bad template leaves the reference
/// alone with the column of the mistake; removing the annotation clears the switcher's status
/// and keeps the reference; a restarted switcher rewrites nothing.
#[tokio::test]
async fn a_kube_version_template_switches_the_catalog_image() {
    let _serial = SERIAL.lock().await;
    let ctx = TestContext::new("sw-version").await.unwrap();
    catalogd().unwrap();
    // A switcher of its own, since this test restarts it (it shares the Catalogs' field
    // manager with any other switcher, and writes only on change).
    let switcher = start_catalog_switcher_with(&ctx.name("switcher"), &[]).unwrap();
    let _stop = StopOnDrop(switcher.manager.clone());
    let registry = olm_e2e::registry::plain().unwrap();
    let info = ctx.client.apiserver_version().await.unwrap();
    let minor = info.minor.trim_end_matches('+').to_owned();
    let repository = format!("{}/catalog", ctx.namespace);
    let tag = format!("v{}.{minor}", info.major);
    push_catalog(
        registry,
        &repository,
        &tag,
        &[("c.yaml", example_catalog("0.1.0").as_str())],
    )
    .await
    .unwrap();

    let name = ctx.name("switched");
    let placeholder = format!("{}/{repository}:placeholder", registry.host);
    let api = create_catalog(
        &ctx,
        &name,
        json!({"type": "image", "image": {"ref": placeholder}}),
    )
    .await
    .unwrap();
    let template = format!(
        "{}/{repository}:v{{kube_major_version}}.{{kube_minor_version}}",
        registry.host
    );
    set_annotation(&api, &name, json!(template)).await;
    let expected = format!("{}/{repository}:{tag}", registry.host);
    let want = expected.clone();
    let c = wait_for(
        &api,
        &name,
        "the reference switched",
        Duration::from_secs(60),
        move |c| {
            c.and_then(|c| c.spec.source.image.as_ref())
                .is_some_and(|i| i.r#ref == want)
        },
    )
    .await
    .unwrap();
    let c = wait_unpacked(&api, &c.name_any(), None).await.unwrap();
    assert_eq!(
        condition(Some(&c), "TemplatesHaveResolved"),
        Some((
            "True".into(),
            "AllTemplatesResolved".into(),
            "catalog image reference was successfully resolved".into()
        ))
    );
    assert_eq!(
        condition(Some(&c), "ResolvedImage").map(|x| x.2),
        Some(expected.clone())
    );
    let it = status(Some(&c)).image_template.unwrap();
    assert_eq!(it.template.as_deref(), Some(template.as_str()));
    assert_eq!(it.resolved_image.as_deref(), Some(expected.as_str()));
    // catalogd's conditions and the switcher's live side by side.
    assert!(condition(Some(&c), "Unpacked").is_some());

    // A restarted switcher rewrites nothing.
    let before = api.get(&name).await.unwrap().resource_version();
    let switcher = switcher.restart().unwrap();
    let _stop_restarted = StopOnDrop(switcher.manager.clone());
    olm_e2e::catalogs::wait_metric(
        &switcher.admin_url,
        "controller_runtime_reconcile_total",
        &["result=\"success\""],
        "the restarted switcher reconciles",
        |total| total >= 1.0,
    )
    .await
    .unwrap();
    assert_eq!(api.get(&name).await.unwrap().resource_version(), before);

    // A bad template: the reference stays, the condition names the column.
    set_annotation(
        &api,
        &name,
        json!(format!("{}/x:{{kube_minor}}", registry.host)),
    )
    .await;
    let c = wait_for(
        &api,
        &name,
        "UnableToResolve",
        Duration::from_secs(60),
        |c| condition(c, "TemplatesHaveResolved").is_some_and(|x| x.1 == "UnableToResolve"),
    )
    .await
    .unwrap();
    let message = condition(Some(&c), "TemplatesHaveResolved").unwrap().2;
    assert!(
        message.contains("column") && message.contains("unknown variable \"kube_minor\""),
        "{message}"
    );
    assert_eq!(c.spec.source.image.as_ref().unwrap().r#ref, expected);

    // No annotation: the switcher's status goes, the reference stays.
    set_annotation(&api, &name, serde_json::Value::Null).await;
    let c = wait_for(
        &api,
        &name,
        "the switcher's status cleared",
        Duration::from_secs(60),
        |c| {
            condition(c, "TemplatesHaveResolved").is_none()
                && condition(c, "ResolvedImage").is_none()
                && status(c).image_template.is_none()
        },
    )
    .await
    .unwrap();
    assert_eq!(c.spec.source.image.as_ref().unwrap().r#ref, expected);
    assert!(
        condition(Some(&c), "Unpacked").is_some(),
        "catalogd's conditions stay"
    );
    ctx.cleanup().await.unwrap();
}

/// An object template reading a ConfigMap field: changing the ConfigMap switches the Catalog
/// within seconds (a watch, not a poll) and catalogd unpacks the new image. A value that is not
/// an image reference, a deleted ConfigMap and a resource off the allowlist each leave the
/// reference alone with a clear condition.
#[tokio::test]
async fn an_object_template_follows_a_configmap() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::DeleteParams;

    let _serial = SERIAL.lock().await;
    let ctx = TestContext::new("sw-object").await.unwrap();
    catalogd().unwrap();
    let ns = ctx.namespace.clone();
    // The allowlist names this namespace's ConfigMaps, and a Role grants exactly that read,
    // as docs/catalog-switcher.md tells an admin to do.
    grant_configmap_reads(&ctx).await;
    let switcher = start_catalog_switcher_with(
        &ctx.name("switcher"),
        &[format!("--allowed-resources=v1/configmaps@{ns}")],
    )
    .unwrap();
    let _stop = StopOnDrop(switcher.manager.clone());

    let registry = olm_e2e::registry::plain().unwrap();
    let repository = format!("{ns}/catalog");
    for (tag, version) in [("a", "0.1.0"), ("b", "0.2.0")] {
        push_catalog(
            registry,
            &repository,
            tag,
            &[("c.yaml", example_catalog(version).as_str())],
        )
        .await
        .unwrap();
    }
    let cms: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ns);
    let put_tag = |tag: &'static str| {
        let cms = cms.clone();
        async move {
            let cm: ConfigMap =
                serde_json::from_value(json!({"metadata": {"name": "tags"}, "data": {"tag": tag}}))
                    .unwrap();
            cms.patch(
                "tags",
                &PatchParams::apply("e2e").force(),
                &Patch::Apply(&cm),
            )
            .await
            .unwrap();
        }
    };
    put_tag("a").await;

    let name = ctx.name("follows");
    let api = create_catalog(
        &ctx,
        &name,
        json!({"type": "image", "image": {"ref": format!("{}/{repository}:placeholder", registry.host)}}),
    )
    .await
    .unwrap();
    let template = format!(
        "{}/{repository}:{{version:v1,kind:ConfigMap,name:tags,namespace:{ns},jsonpath:data.tag}}",
        registry.host
    );
    set_annotation(&api, &name, json!(template)).await;
    let reference = |tag: &str| format!("{}/{repository}:{tag}", registry.host);
    let wait_ref = |want: String| {
        let api = api.clone();
        let name = name.clone();
        async move {
            wait_for(
                &api,
                &name,
                "the reference",
                Duration::from_secs(30),
                move |c| {
                    c.and_then(|c| c.spec.source.image.as_ref())
                        .is_some_and(|i| i.r#ref == want)
                },
            )
            .await
            .unwrap()
        }
    };
    wait_ref(reference("a")).await;
    let first = wait_unpacked(&api, &name, None).await.unwrap();
    assert!(
        olm_e2e::catalogs::metric(&switcher.admin_url, "catalog_switcher_watched_objects", &[])
            .await
            .unwrap()
            >= 1.0
    );

    put_tag("b").await;
    wait_ref(reference("b")).await;
    wait_unpacked(&api, &name, status(Some(&first)).content_hash.as_deref())
        .await
        .unwrap();

    let unresolved = |why: &'static str| {
        let api = api.clone();
        let name = name.clone();
        async move {
            wait_for(&api, &name, why, Duration::from_secs(30), move |c| {
                condition(c, "TemplatesHaveResolved")
                    .is_some_and(|x| x.0 == "False" && x.2.contains(why))
            })
            .await
            .unwrap()
        }
    };
    put_tag("not an image!").await;
    let c = unresolved("is not an image reference").await;
    assert_eq!(c.spec.source.image.as_ref().unwrap().r#ref, reference("b"));
    // An unresolved template is looked at again later: a requeue, counted as one (as
    // docs/operations.md says), not as a success.
    olm_e2e::catalogs::wait_metric(
        &switcher.admin_url,
        "controller_runtime_reconcile_total",
        &[
            "controller=\"catalog-image-template\"",
            "result=\"requeue_after\"",
        ],
        "a requeue counted as requeue_after",
        |n| n >= 1.0,
    )
    .await
    .unwrap();
    // Said as events too: the switch, and the template that stopped resolving.
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(ctx.client.clone(), "default");
    crate::catalogd::wait_for_event(&events, &name, "ImageSwitched").await;
    let warning = crate::catalogd::wait_for_event(&events, &name, "UnableToResolve").await;
    assert!(
        warning
            .note
            .unwrap_or_default()
            .contains("is not an image reference"),
        "the warning says why"
    );

    cms.delete("tags", &DeleteParams::default()).await.unwrap();
    let c = unresolved("not found").await;
    assert_eq!(c.spec.source.image.as_ref().unwrap().r#ref, reference("b"));

    set_annotation(
        &api,
        &name,
        json!(format!(
            "{}/{repository}:{{version:v1,kind:Secret,name:s,namespace:{ns},jsonpath:data.tag}}",
            registry.host
        )),
    )
    .await;
    let c = wait_for(&api, &name, "NotAllowed", Duration::from_secs(30), |c| {
        condition(c, "TemplatesHaveResolved").is_some_and(|x| x.1 == "NotAllowed")
    })
    .await
    .unwrap();
    let message = condition(Some(&c), "TemplatesHaveResolved").unwrap().2;
    assert!(
        message.contains(&format!("v1/configmaps@{ns}")),
        "{message}"
    );
    assert_eq!(c.spec.source.image.as_ref().unwrap().r#ref, reference("b"));
    // The ConfigMap is read no more: its watch stopped (a Secret off the allowlist is never
    // watched).
    olm_e2e::catalogs::wait_metric(
        &switcher.admin_url,
        "catalog_switcher_watched_objects",
        &[],
        "the ConfigMap's watch stops",
        |watched| watched == 0.0,
    )
    .await
    .unwrap();
    // A name that would reach another path never leaves the parser.
    set_annotation(
        &api,
        &name,
        json!(format!(
            "{}/{repository}:{{version:v1,kind:ConfigMap,name:x/status,namespace:{ns},jsonpath:data.tag}}",
            registry.host
        )),
    )
    .await;
    unresolved("is not an object name").await;
    ctx.cleanup().await.unwrap();
}

/// Each object a template reads is a watch on the API server, and templates are written by
/// whoever may annotate a Catalog: one template may read at most --max-objects-per-template
/// objects (else `TooManyObjects`), and all of them together at most --max-watched-objects
/// (a template that would pass it gets `WatchLimitReached`, and starts no watch).
#[tokio::test]
async fn templates_read_a_bounded_number_of_objects() {
    let _serial = SERIAL.lock().await;
    let ctx = TestContext::new("sw-caps").await.unwrap();
    let ns = ctx.namespace.clone();
    grant_configmap_reads(&ctx).await;
    for cm in ["one", "two"] {
        ctx.apply(&json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": cm, "namespace": ns}, "data": {"tag": cm}
        }))
        .await
        .unwrap();
    }
    let switcher = start_catalog_switcher_with(
        &ctx.name("switcher"),
        &[
            format!("--allowed-resources=v1/configmaps@{ns}"),
            "--max-objects-per-template=1".to_owned(),
            "--max-watched-objects=1".to_owned(),
        ],
    )
    .unwrap();
    let _stop = StopOnDrop(switcher.manager.clone());
    let read = |cm: &str| {
        format!("{{version:v1,kind:ConfigMap,name:{cm},namespace:{ns},jsonpath:data.tag}}")
    };
    let template = |parts: &[&str]| {
        format!(
            "registry.example.com/catalog:{}",
            parts.iter().map(|p| read(p)).collect::<Vec<_>>().join("-")
        )
    };
    let source =
        json!({"type": "image", "image": {"ref": "registry.example.com/catalog:placeholder"}});
    let reason_of = |api: Api<Catalog>, name: String, reason: &'static str| async move {
        wait_for(&api, &name, reason, Duration::from_secs(30), move |c| {
            condition(c, "TemplatesHaveResolved").is_some_and(|x| x.1 == reason)
        })
        .await
        .unwrap()
    };

    // Two objects in one template: more than one template may read.
    let both = ctx.name("both");
    let api = create_catalog(&ctx, &both, source.clone()).await.unwrap();
    set_annotation(&api, &both, json!(template(&["one", "two"]))).await;
    let c = reason_of(api.clone(), both.clone(), "TooManyObjects").await;
    let message = condition(Some(&c), "TemplatesHaveResolved").unwrap().2;
    assert!(message.contains("--max-objects-per-template"), "{message}");

    // One object: resolved, and watched.
    let first = ctx.name("first");
    create_catalog(&ctx, &first, source.clone()).await.unwrap();
    set_annotation(&api, &first, json!(template(&["one"]))).await;
    wait_for(&api, &first, "resolved", Duration::from_secs(30), |c| {
        c.and_then(|c| c.spec.source.image.as_ref())
            .is_some_and(|i| i.r#ref == "registry.example.com/catalog:one")
    })
    .await
    .unwrap();
    // Another object: a second watch, past the limit of one. The first still resolves.
    let second = ctx.name("second");
    create_catalog(&ctx, &second, source.clone()).await.unwrap();
    set_annotation(&api, &second, json!(template(&["two"]))).await;
    let c = reason_of(api.clone(), second.clone(), "WatchLimitReached").await;
    let message = condition(Some(&c), "TemplatesHaveResolved").unwrap().2;
    assert!(message.contains("--max-watched-objects"), "{message}");
    assert_eq!(
        c.spec.source.image.as_ref().unwrap().r#ref,
        "registry.example.com/catalog:placeholder",
        "the reference is left alone"
    );
    assert_eq!(
        olm_e2e::catalogs::metric(&switcher.admin_url, "catalog_switcher_watched_objects", &[])
            .await
            .unwrap(),
        1.0
    );
    ctx.cleanup().await.unwrap();
}
