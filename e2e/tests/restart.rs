//! catalogd across restarts, in a test binary of its own (so its own control plane and its own
//! catalogd, which this test stops and starts): content belongs to the Catalog object that
//! stored it, not to its name, and `contentURL` follows `--external-address`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use kube::ResourceExt;
use kube::api::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use olm_api::bundle_deployment::BundleDeployment;
use olm_api::conditions::find_condition;
use olm_e2e::catalogs::{
    DEADLINE, configmap_source, create_catalog, example_catalog, put_catalog_configmap, status,
    unpacked_configmap_catalog, wait_reason, wait_unpacked,
};
use olm_e2e::context::TestContext;
use olm_e2e::manager::{catalogd, operator_controller};
use olm_e2e::operators::{
    bundle_image, cond, create_operator, one_bundle_catalog, wait_bd_image, wait_resolved,
};
use olm_e2e::wait::{wait_for, wait_for_deletion};

/// The tests of this binary stop and start the managers they share: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test]
async fn catalogd_restarts_serve_only_what_belongs_to_each_catalog() {
    let _serial = SERIAL.lock().await;
    let ctx = TestContext::new("restart").await.unwrap();
    // Afresh, with its first flags, whatever the other test left.
    let cd = catalogd().unwrap().restart(&[]).unwrap();
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
    // The next test starts the shared catalogd afresh.
    cd.manager.stop().unwrap();
}

/// catalogd stopped: the Operator goes Resolved=Unknown and its BundleDeployment stays as it
/// is; catalogd back: resolved again. operator-controller restarted: nothing is rewritten.
#[tokio::test]
async fn operators_wait_out_a_stopped_catalogd_and_a_restart_rewrites_nothing() {
    let _serial = SERIAL.lock().await;
    let ctx = TestContext::new("op-restart").await.unwrap();
    // Afresh, with its first flags, whatever the other test left.
    let cd = catalogd().unwrap().restart(&[]).unwrap();
    let oc = operator_controller().unwrap();
    let pkg = "restart-pkg";
    let text = one_bundle_catalog(pkg);
    unpacked_configmap_catalog(&ctx, &ctx.name("c"), &ctx.name("c"), &text)
        .await
        .unwrap();
    let name = ctx.name("op");
    let ops = create_operator(&ctx, &name, serde_json::json!({"packageName": pkg}))
        .await
        .unwrap();
    let bd = wait_bd_image(&ctx, &name, &bundle_image(pkg, "1.0.0", ""))
        .await
        .unwrap();
    wait_resolved(&ops, &name, "True", "Success").await.unwrap();

    cd.manager.stop().unwrap();
    let op = wait_resolved(&ops, &name, "Unknown", "ResolutionUnknown")
        .await
        .unwrap();
    let (_, _, message) = cond(Some(&op), "Resolved");
    assert!(message.contains("could not be reached"), "{message}");
    let status = op.status.unwrap();
    assert_eq!(status.resolved_version.as_deref(), Some("1.0.0"));
    let bds: Api<BundleDeployment> = Api::all(ctx.client.clone());
    assert_eq!(
        bds.get(&name).await.unwrap().resource_version(),
        bd.resource_version()
    );

    let cd = cd.restart(&[]).unwrap();
    let op = wait_resolved(&ops, &name, "True", "Success").await.unwrap();
    assert_eq!(
        bds.get(&name).await.unwrap().resource_version(),
        bd.resource_version()
    );

    // A restarted operator-controller reconciles the Operator (at start-up) and writes
    // nothing.
    let oc = oc.restart().unwrap();
    olm_e2e::catalogs::wait_metric(
        &oc.admin_url,
        "controller_runtime_reconcile_total",
        &["controller=\"operator\"", "result=\"requeue_after\""],
        "operator-controller reconciles",
        |done| done >= 1.0,
    )
    .await
    .unwrap();
    let after = ops.get(&name).await.unwrap();
    assert_eq!(
        after.resource_version(),
        op.resource_version(),
        "rewritten: {:#?} -> {:#?}",
        (&op.status, &op.metadata.managed_fields),
        (&after.status, &after.metadata.managed_fields)
    );
    assert_eq!(
        bds.get(&name).await.unwrap().resource_version(),
        bd.resource_version()
    );
    assert!(cd.manager.is_running());
    ctx.cleanup().await.unwrap();
    cd.manager.stop().unwrap();
}

/// A registry whose certificate catalogd does not trust: the pull fails and says why, and
/// `insecureSkipTLSVerify` gets past it. Here because it needs a catalogd that does not trust
/// the harness CA (this binary's catalogd is restarted with the system's CAs only).
#[tokio::test]
async fn an_untrusted_registry_certificate_fails_until_verification_is_skipped() {
    use olm_e2e::images::push_catalog;
    use olm_e2e::registry::{Credentials, Registry};

    let _serial = SERIAL.lock().await;
    let ctx = TestContext::new("img-tls").await.unwrap();
    let cd = catalogd()
        .unwrap()
        .restart(&["--registry-ca-file=/etc/ssl/certs/ca-certificates.crt".to_owned()])
        .unwrap();
    // Stopped even if this test fails: the next test starts catalogd on the same ports.
    let _stop = olm_e2e::manager::StopOnDrop(cd.manager.clone());
    let (user, password) = ("olm-e2e", "tls-s3cret");
    let registry = Registry::start(
        &ctx.name("tls"),
        Some(Credentials {
            user: user.into(),
            password: password.into(),
        }),
    )
    .unwrap();
    let repository = format!("{}/index", ctx.namespace);
    let catalog = example_catalog("0.1.0");
    push_catalog(&registry, &repository, "1", &[("c.yaml", catalog.as_str())])
        .await
        .unwrap();
    let secret = ctx.name("pull");
    let auth = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    };
    let s: k8s_openapi::api::core::v1::Secret =
        serde_json::from_value(ctx.labelled(serde_json::json!({
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
            "metadata": {"name": secret, "namespace": olm_e2e::manager::OLM_NAMESPACE,
                         "labels": {"olm-rs.io/catalog-credential": "true"},
                         "annotations": {"olm-rs.io/credential-hosts": registry.host.clone()}},
            "stringData": {".dockerconfigjson": serde_json::json!(
                {"auths": {registry.host.clone(): {"auth": auth}}}).to_string()}
        })))
        .unwrap();
    Api::<k8s_openapi::api::core::v1::Secret>::namespaced(
        ctx.client.clone(),
        olm_e2e::manager::OLM_NAMESPACE,
    )
    .create(&Default::default(), &s)
    .await
    .unwrap();
    let name = ctx.name("tls");
    let api = create_catalog(
        &ctx,
        &name,
        serde_json::json!({"type": "image", "image": {
            "ref": format!("{}/{repository}:1", registry.host),
            "pullSecret": secret,
        }}),
    )
    .await
    .unwrap();
    let c = wait_reason(&api, &name, "UnpackFailed").await.unwrap();
    let message = olm_e2e::catalogs::unpacked_message(&c);
    assert!(message.contains("certificate"), "{message}");
    assert!(!message.contains(password), "{message}");

    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(
            serde_json::json!({"spec": {"source": {"image": {"insecureSkipTLSVerify": true}}}}),
        ),
    )
    .await
    .unwrap();
    // Credentials to a registry whose certificate is not checked could go to anyone in
    // between: refused, naming the admin's flag, with nothing sent.
    let c = wait_reason(&api, &name, "CredentialNotAllowed")
        .await
        .unwrap();
    let message = olm_e2e::catalogs::unpacked_message(&c);
    assert!(
        message.contains("--allow-credentials-without-tls-verify"),
        "{message}"
    );
    let cd = cd
        .restart(&[
            "--registry-ca-file=/etc/ssl/certs/ca-certificates.crt".to_owned(),
            "--allow-credentials-without-tls-verify".to_owned(),
        ])
        .unwrap();
    let _stop = olm_e2e::manager::StopOnDrop(cd.manager.clone());
    wait_unpacked(&api, &name, None).await.unwrap();
    registry.stop().unwrap();
    ctx.cleanup().await.unwrap();
}

/// OLM v0 CatalogSources: without their CRD the switcher runs and says so once; once the CRD
/// is installed, a CatalogSource with a template is switched like a Catalog (`spec.image`,
/// upstream's conditions). Here because it removes and re-installs a CRD of this binary's own
/// control plane.
#[tokio::test]
async fn catalog_sources_are_switched_once_their_crd_is_served() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::CustomResourceExt;
    use olm_api::catalog_source_v0::CatalogSource;
    use olm_e2e::manager::{StopOnDrop, start_catalog_switcher_with};

    let _serial = SERIAL.lock().await;
    let ctx = TestContext::new("sw-v0").await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
    let crd_name = "catalogsources.operators.coreos.com";
    if crds.get_opt(crd_name).await.unwrap().is_some() {
        crds.delete(crd_name, &DeleteParams::default())
            .await
            .unwrap();
        wait_for_deletion(&crds, crd_name, DEADLINE).await.unwrap();
    }
    let switcher = start_catalog_switcher_with(&ctx.name("switcher"), &[]).unwrap();
    let _stop = StopOnDrop(switcher.manager.clone());
    let log = switcher.manager.log.clone();
    let log_says = |text: &'static str| {
        let log = log.clone();
        async move {
            let deadline = std::time::Instant::now() + DEADLINE;
            loop {
                let content = std::fs::read_to_string(&log).unwrap_or_default();
                if content.contains(text) {
                    return content.matches(text).count();
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "the log never said {text:?}"
                );
                // Polling a log file, bounded by the deadline above.
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
        }
    };
    log_says("CatalogSource (operators.coreos.com/v1alpha1) is not served").await;

    // The CRD comes (as OLM v0 would install it): the switcher notices through its watch.
    crds.create(&Default::default(), &CatalogSource::crd())
        .await
        .unwrap();
    log_says("is served: switching CatalogSources too").await;
    let info = ctx.client.apiserver_version().await.unwrap();
    let expected = format!(
        "quay.io/example/catalog:v{}.{}",
        info.major,
        info.minor.trim_end_matches('+')
    );
    let sources: Api<CatalogSource> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let name = "operatorhubio";
    let source: CatalogSource = serde_json::from_value(ctx.labelled(serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
        "metadata": {"name": name, "namespace": ctx.namespace, "annotations": {
            "olm.catalogImageTemplate": "quay.io/example/catalog:v{kube_major_version}.{kube_minor_version}"
        }},
        "spec": {"sourceType": "grpc", "image": "quay.io/example/catalog:old", "displayName": "Community"}
    })))
    .unwrap();
    sources.create(&Default::default(), &source).await.unwrap();
    let want = expected.clone();
    let switched = wait_for(&sources, name, "spec.image switched", DEADLINE, move |s| {
        s.is_some_and(|s| {
            s.spec.image.as_deref() == Some(want.as_str())
                && s.status.as_ref().is_some_and(|st| {
                    find_condition(&st.conditions, "TemplatesHaveResolved")
                        .is_some_and(|c| c.status == "True" && c.reason == "AllTemplatesResolved")
                })
        })
    })
    .await
    .unwrap();
    // Fields the switcher does not own are kept.
    assert_eq!(switched.spec.display_name.as_deref(), Some("Community"));
    let status = switched.status.unwrap();
    assert_eq!(
        find_condition(&status.conditions, "ResolvedImage").map(|c| c.message.clone()),
        Some(expected)
    );
    let content = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(content.matches("is not served").count(), 1, "said once");

    // A CatalogSource's template reads only its own namespace, whatever the allowlist says.
    let other = serde_json::json!({"metadata": {"annotations": {
        "olm.catalogImageTemplate": "quay.io/example/catalog:{version:v1,kind:ConfigMap,name:c,namespace:kube-system,jsonpath:data.tag}"
    }}});
    sources
        .patch(name, &PatchParams::default(), &Patch::Merge(&other))
        .await
        .unwrap();
    wait_for(
        &sources,
        name,
        "NotAllowed outside its namespace",
        DEADLINE,
        |s| {
            s.and_then(|s| s.status.as_ref()).is_some_and(|st| {
                find_condition(&st.conditions, "TemplatesHaveResolved").is_some_and(|c| {
                    c.reason == "NotAllowed" && c.message.contains("is outside namespace")
                })
            })
        },
    )
    .await
    .unwrap();
    ctx.cleanup().await.unwrap();

    // The CRD goes: the switcher stops switching CatalogSources, and says so. (Installed again
    // afterwards, as the harness had it.)
    crds.delete(crd_name, &DeleteParams::default())
        .await
        .unwrap();
    wait_for_deletion(&crds, crd_name, DEADLINE).await.unwrap();
    log_says("is no longer served: stopped switching CatalogSources").await;
    crds.create(&Default::default(), &CatalogSource::crd())
        .await
        .unwrap();
}

/// A generator Pod of an earlier catalogd is deleted at start-up (its run, and its token, are
/// forgotten, so its upload could never be accepted), and its Catalog runs a new one. The
/// node cannot pull their image (`registry.example` resolves nowhere), which this test does not
/// need: a run failed that way is run again after the restart all the same.
#[tokio::test]
async fn generator_pods_left_by_a_restart_are_removed_and_run_again() {
    use k8s_openapi::api::core::v1::{Pod, Secret};
    use kube::api::{ListParams, PostParams};

    let _serial = SERIAL.lock().await;
    let ctx = TestContext::new("restart-gen").await.unwrap();
    let cd = catalogd().unwrap().restart(&[]).unwrap();
    let name = ctx.name("gen");
    let api = create_catalog(
        &ctx,
        &name,
        serde_json::json!({"type": "custom", "custom": {
            "image": "registry.example/gen:1", "command": ["true"]}}),
    )
    .await
    .unwrap();
    let created = api.get(&name).await.unwrap();
    let selector =
        ListParams::default().labels(&format!("olm-rs.io/catalog-uid={}", created.uid().unwrap()));
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), olm_e2e::manager::OLM_NAMESPACE);
    let deadline = tokio::time::Instant::now() + DEADLINE;
    let first = loop {
        let list = pods.list_metadata(&selector).await.unwrap();
        if let Some(p) = list.items.first() {
            break p.name_any();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no generator pod was created"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    let c = wait_for(&api, &name, "Unpacking with the pod named", DEADLINE, |c| {
        find_condition(&status(c).conditions, "Unpacked")
            .is_some_and(|u| u.reason == "Unpacking" && u.message.contains("catalog-gen-"))
    })
    .await
    .unwrap();
    assert!(
        status(Some(&c))
            .conditions
            .iter()
            .any(|c| c.message.contains(&first)),
        "{:?}",
        status(Some(&c)).conditions
    );

    // Beside it, a labelled Pod of no Catalog and two Secrets that are not its token Secret:
    // one of a user's, sharing the Pod's name; one labelled, but owned by nothing. The clean-up
    // deletes the Pod and neither Secret.
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), olm_e2e::manager::OLM_NAMESPACE);
    let decoy = ctx.name("decoy");
    let labelled = format!("{decoy}-labelled");
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(serde_json::json!({
            "metadata": {"name": decoy, "labels": {"olm-rs.io/catalog-generator": "true"}},
            // Restricted, as the namespace enforces.
            "spec": {
                "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
                "containers": [{"name": "c", "image": "registry.example/x:1", "securityContext": {
                    "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}]
            }
        }))
        .unwrap(),
    )
    .await
    .unwrap();
    for (secret, labels) in [
        (decoy.clone(), serde_json::json!({})),
        (
            labelled.clone(),
            serde_json::json!({"olm-rs.io/catalog-generator": "true"}),
        ),
    ] {
        secrets
            .create(
                &PostParams::default(),
                &serde_json::from_value(serde_json::json!({
                    "metadata": {"name": secret, "labels": labels},
                    "stringData": {"mine": "keep me"}
                }))
                .unwrap(),
            )
            .await
            .unwrap();
    }

    let cd = cd.restart(&[]).unwrap();
    wait_for_deletion(&pods, &decoy, DEADLINE).await.unwrap();
    for secret in [&decoy, &labelled] {
        assert!(
            secrets.get_opt(secret).await.unwrap().is_some(),
            "the clean-up deleted Secret {secret}, which is not a generator's token Secret"
        );
        secrets
            .delete(secret, &DeleteParams::default())
            .await
            .unwrap();
    }
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let names: Vec<String> = pods
            .list_metadata(&selector)
            .await
            .unwrap()
            .items
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(|p| p.name_any())
            .collect();
        if names.len() == 1 && names[0] != first {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the old pod {first} was not replaced by one new pod: {names:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    ctx.cleanup().await.unwrap();
    // The next test starts the shared catalogd afresh.
    cd.manager.stop().unwrap();
}

/// The network policy's default, as in a cluster: loopback is refused, by address and by a
/// name that resolves to it, and the server sees no request at all. This binary's catalogd is
/// restarted without the harness's `--allow-loopback-sources`, then with it again.
#[tokio::test]
async fn loopback_sources_are_refused_unless_the_admin_allows_them() {
    let _serial = SERIAL.lock().await;
    let ctx = TestContext::new("net-loopback").await.unwrap();
    let cd = catalogd()
        .unwrap()
        .restart(&["--allow-loopback-sources=false".to_owned()])
        .unwrap();
    let _stop = olm_e2e::manager::StopOnDrop(cd.manager.clone());
    let (server, url) = olm_e2e::serve::http_file("/catalog.yaml", example_catalog("0.1.0"))
        .await
        .unwrap();
    let by_name = url.replace("127.0.0.1", "localhost");
    let mut apis = Vec::new();
    for (suffix, url) in [("ip", url.clone()), ("name", by_name)] {
        let name = ctx.name(&format!("lo-{suffix}"));
        let api = create_catalog(
            &ctx,
            &name,
            serde_json::json!({"type": "http", "http": {"url": url}}),
        )
        .await
        .unwrap();
        let c = wait_reason(&api, &name, "HostNotAllowed").await.unwrap();
        let message = olm_e2e::catalogs::unpacked_message(&c);
        assert!(message.contains("--allow-loopback-sources"), "{message}");
        apis.push((api, name));
    }
    assert_eq!(server.full(), 0, "a refused source was asked");
    // Allowed by the admin (the harness's first flags): the same Catalogs unpack.
    drop(_stop);
    let cd = catalogd().unwrap().restart(&[]).unwrap();
    let _stop = olm_e2e::manager::StopOnDrop(cd.manager.clone());
    for (api, name) in &apis {
        wait_unpacked(api, name, None).await.unwrap();
    }
    ctx.cleanup().await.unwrap();
}

/// The worst catalog for memory: blobs as small as a valid FBC blob can be (`{"schema":"x"}`),
/// `size` bytes in all, with the one valid package a catalog needs.
fn tiny_blob_catalog(size: usize) -> String {
    let head = concat!(
        r#"{"schema":"olm.package","name":"p","defaultChannel":"s"}"#,
        r#"{"schema":"olm.channel","package":"p","name":"s","entries":[{"name":"b"}]}"#,
        r#"{"schema":"olm.bundle","package":"p","name":"b","image":"i","properties":"#,
        r#"[{"type":"olm.package","value":{"packageName":"p","version":"1.0.0"}}]}"#
    );
    let blob = r#"{"schema":"x"}"#;
    let mut text = String::with_capacity(size);
    text.push_str(head);
    while text.len() + blob.len() <= size {
        text.push_str(blob);
    }
    text
}

/// A realistic catalog (`olm_resolver::synth`: bundles with CSV-sized metadata) of at most
/// `size` bytes, different for each `seed`.
fn realistic_catalog(size: usize, seed: u64) -> Vec<u8> {
    let mut config = olm_resolver::synth::SynthConfig {
        seed,
        ..Default::default()
    };
    config.bundles = size / 5_300;
    config.packages = (config.bundles / 16).max(1);
    loop {
        let text = olm_resolver::synth::generate(&config);
        if text.len() <= size || config.bundles < 2 {
            return text;
        }
        config.bundles = config.bundles * 95 / 100;
    }
}

/// catalogd's memory stays within the bound of its settings (docs/install.md, "Memory";
/// catalogd::budget::memory_bound) with the chart's proportions: four realistic catalogs at the
/// content limit at once, and two that do not fit and fail cleanly with `ContentTooLarge`: one
/// over the limit, and one at the limit made of the smallest blobs, whose in-memory index
/// would exceed --max-served-index-bytes (the worst case for memory: unpacking it costs about
/// 10 times its size, and serving it 3 times). Bodies are read only once their share of the
/// budget is held, so the catalogs are fetched and unpacked one after another (the others
/// say `UnpackPending`). `OLM_E2E_MEMORY_MIB`
/// sets the content limit (16 here; the chart's 64 is measured for docs/performance.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catalogd_memory_stays_within_its_bound_at_the_content_limit() {
    let _serial = SERIAL.lock().await;
    let mib: u64 = std::env::var("OLM_E2E_MEMORY_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16);
    let max = mib << 20;
    // The chart's proportions: the budget is the content limit, served indexes 1.5 times it.
    let index_budget = max * 3 / 2;
    let ctx = TestContext::new("memory").await.unwrap();
    let cd = catalogd()
        .unwrap()
        .restart(&[
            format!("--max-content-bytes={max}"),
            format!("--unpack-budget-bytes={max}"),
            format!("--max-served-index-bytes={index_budget}"),
            "--http-timeout-seconds=300".to_owned(),
        ])
        .unwrap();
    let _stop = olm_e2e::manager::StopOnDrop(cd.manager.clone());
    let pid = cd.manager.pid;
    let mut servers = Vec::new();
    let mut urls = Vec::new();
    for seed in 0..4 {
        let (server, url) =
            olm_e2e::serve::http_file("/catalog.json", realistic_catalog(max as usize, seed))
                .await
                .unwrap();
        servers.push(server);
        urls.push(url);
    }
    let (_tiny, tiny) =
        olm_e2e::serve::http_file("/catalog.json", tiny_blob_catalog(max as usize - 4096))
            .await
            .unwrap();
    let (_big, too_large) =
        olm_e2e::serve::http_file("/catalog.json", tiny_blob_catalog(max as usize + 4096))
            .await
            .unwrap();
    // catalogd settled, then its peak from here on.
    let idle = olm_e2e::memory::process_status_kib(pid, "VmRSS").unwrap();
    assert!(olm_e2e::memory::reset_process_peak(pid));
    let http = |url: &str| serde_json::json!({"type": "http", "http": {"url": url}});
    let mut apis = Vec::new();
    for (i, url) in urls.iter().enumerate() {
        let name = ctx.name(&format!("max-{i}"));
        apis.push((create_catalog(&ctx, &name, http(url)).await.unwrap(), name));
    }
    let mut refused = Vec::new();
    for (suffix, url, words) in [
        ("tiny", &tiny, "--max-served-index-bytes"),
        ("over", &too_large, "--max-content-bytes"),
    ] {
        let name = ctx.name(suffix);
        refused.push((
            create_catalog(&ctx, &name, http(url)).await.unwrap(),
            name,
            words,
        ));
    }
    for (api, name) in &apis {
        wait_for(
            api,
            name,
            "unpacked",
            std::time::Duration::from_secs(600),
            |c| {
                find_condition(&status(c).conditions, "Unpacked")
                    .is_some_and(|u| u.status == "True")
            },
        )
        .await
        .unwrap();
    }
    for (api, name, words) in &refused {
        let c = wait_for(
            api,
            name,
            "ContentTooLarge",
            std::time::Duration::from_secs(600),
            |c| {
                find_condition(&status(c).conditions, "Unpacked")
                    .is_some_and(|u| u.reason == "ContentTooLarge")
            },
        )
        .await
        .unwrap();
        let message = olm_e2e::catalogs::unpacked_message(&c);
        assert!(message.contains(words), "{message}");
    }
    let peak = olm_e2e::memory::process_status_kib(pid, "VmHWM").unwrap() / 1024;
    let after = olm_e2e::memory::process_status_kib(pid, "VmRSS").unwrap() / 1024;
    let rise = peak.saturating_sub(idle / 1024);
    // catalogd::budget::memory_bound with these flags (2 generators, 2 pulls).
    let bound = 128 + 10 * mib + 2 * mib + 16 + index_budget / (1 << 20);
    eprintln!(
        "memory: 4 realistic catalogs of {mib} MiB, one of the smallest blobs and one over the limit: catalogd idle {} MiB, peak {peak} MiB (rise {rise} MiB = {:.1} × the budget), after {after} MiB; bound {bound} MiB",
        idle / 1024,
        rise as f64 / mib as f64
    );
    assert!(peak <= bound, "peak {peak} MiB over the bound {bound} MiB");
    ctx.cleanup().await.unwrap();
    drop(_stop);
    catalogd()
        .unwrap()
        .restart(&[])
        .unwrap()
        .manager
        .stop()
        .unwrap();
}

/// A valid catalog as YAML documents (one package, channel and bundle), for hostile files to
/// follow.
fn yaml_catalog_head() -> String {
    [
        "---\nschema: olm.package\nname: p\ndefaultChannel: s\n",
        "---\nschema: olm.channel\npackage: p\nname: s\nentries:\n- name: b\n",
        "---\nschema: olm.bundle\npackage: p\nname: b\nimage: i\nproperties:\n- type: olm.package\n  value:\n    packageName: p\n    version: 1.0.0\n",
    ]
    .concat()
}

/// Hostile catalog files (issue 36) against catalogd itself, each once a crash, 2.1 GB or
/// hours: 200 KB of `- ` nested 100,000 deep is `InvalidContent` naming the depth (it aborted
/// every replica, its 2 MiB unpack stack overflowed); a one-line flow mapping of 200,000 keys
/// is served; a valid catalog followed by 60 MiB of newlines is served within catalogd's
/// memory bound (the fast YAML path kept 40 bytes a line). catalogd is the same process
/// throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_catalog_files_are_conditions_and_catalogd_stays_within_its_memory() {
    let _serial = SERIAL.lock().await;
    let mib: u64 = 64;
    let max = mib << 20;
    let ctx = TestContext::new("hostile").await.unwrap();
    let cd = catalogd()
        .unwrap()
        .restart(&[
            format!("--max-content-bytes={max}"),
            format!("--unpack-budget-bytes={max}"),
            "--http-timeout-seconds=300".to_owned(),
        ])
        .unwrap();
    let _stop = olm_e2e::manager::StopOnDrop(cd.manager.clone());
    let pid = cd.manager.pid;
    let http = |url: &str| serde_json::json!({"type": "http", "http": {"url": url}});
    let alive = || std::path::Path::new(&format!("/proc/{pid}")).exists();

    let deep = format!(
        "{}---\nschema: x\nv:\n{}x\n",
        yaml_catalog_head(),
        "- ".repeat(100_000)
    );
    let keys: Vec<String> = (0..200_000).map(|i| format!("k{i}: {i}")).collect();
    let flow = format!(
        "{}---\nschema: x\nv: {{{}}}\n",
        yaml_catalog_head(),
        keys.join(", ")
    );
    let (_deep, deep_url) = olm_e2e::serve::http_file("/catalog.yaml", deep)
        .await
        .unwrap();
    let (_flow, flow_url) = olm_e2e::serve::http_file("/catalog.yaml", flow)
        .await
        .unwrap();
    let name = ctx.name("deep");
    let api = create_catalog(&ctx, &name, http(&deep_url)).await.unwrap();
    let c = wait_reason(&api, &name, "InvalidContent").await.unwrap();
    let message = olm_e2e::catalogs::unpacked_message(&c);
    assert!(message.contains("depth"), "{message}");
    assert!(alive(), "catalogd is gone");
    let name = ctx.name("flow");
    let api = create_catalog(&ctx, &name, http(&flow_url)).await.unwrap();
    wait_unpacked(&api, &name, None).await.unwrap();

    let mut newlines = yaml_catalog_head();
    newlines.extend(std::iter::repeat_n('\n', 60 << 20));
    let (_newlines, newlines_url) = olm_e2e::serve::http_file("/catalog.yaml", newlines)
        .await
        .unwrap();
    let idle = olm_e2e::memory::process_status_kib(pid, "VmRSS").unwrap();
    assert!(olm_e2e::memory::reset_process_peak(pid));
    let name = ctx.name("newlines");
    let api = create_catalog(&ctx, &name, http(&newlines_url))
        .await
        .unwrap();
    wait_for(
        &api,
        &name,
        "unpacked",
        std::time::Duration::from_secs(600),
        |c| find_condition(&status(c).conditions, "Unpacked").is_some_and(|u| u.status == "True"),
    )
    .await
    .unwrap();
    let peak = olm_e2e::memory::process_status_kib(pid, "VmHWM").unwrap() / 1024;
    // catalogd::budget::memory_bound with these flags, as the memory test above.
    let bound = 128 + 10 * mib + 2 * mib + 16 + 96;
    eprintln!(
        "memory: 60 MiB of newlines after a catalog: catalogd idle {} MiB, peak {peak} MiB; bound {bound} MiB",
        idle / 1024
    );
    assert!(peak <= bound, "peak {peak} MiB over the bound {bound} MiB");
    assert!(alive(), "catalogd is gone");
    ctx.cleanup().await.unwrap();
    drop(_stop);
    catalogd()
        .unwrap()
        .restart(&[])
        .unwrap()
        .manager
        .stop()
        .unwrap();
}
