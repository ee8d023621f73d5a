//! The aggregated API (`catalogApi.enabled=true`) on the node, for real: the chart's
//! APIService, Service, certificate and bindings; kubectl on this machine (outside the
//! cluster's network) reads `packages`, `channels` and `bundles` through the API server, whose
//! aggregator proxies to catalogd's Pods; a user without RBAC is refused; a watch sees a
//! Catalog move to new content; and while the leader's Pod is deleted, `kubectl api-resources`
//! and namespace deletion keep working, measured every few hundred milliseconds.

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Namespace, Pod, Secret, Service};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use kube::runtime::watcher;
use olm_e2e::catalogs::{
    example_catalog, put_catalog_configmap, unpacked_configmap_catalog, wait_unpacked,
};
use olm_e2e::context::TestContext;
use olm_e2e::helm::kubectl;
use olm_e2e::manager::OLM_NAMESPACE;
use olm_e2e::node::wait_deployments_available;
use olm_e2e::wait::{apiservice_available, wait_apiservice_available, wait_for_deletion};
use serde_json::json;

use super::{READY_WITHIN, SERIAL, images, leader_pod};

const APISERVICE: &str = "v1alpha1.catalogs.olm-rs.io";

/// Runs kubectl until its output satisfies `done` (catalogd's second replica copies content
/// a moment after the leader serves it, and either may answer).
async fn kubectl_until(args: &[&str], what: &str, done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = kubectl(args);
        if let Ok(out) = &out
            && done(out)
        {
            return out.clone();
        }
        assert!(
            Instant::now() < deadline,
            "kubectl {}: {what} not seen: {out:?}",
            args.join(" ")
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Waits until every catalogd Pod serves `hash` for `catalog` (asked at each Pod's IP, which
/// this machine routes): the follower copies the leader's content a moment after it serves
/// it, and the API server may send a request to either.
async fn every_replica_serves(client: &kube::Client, catalog: &str, hash: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let etag = format!("\"{hash}\"");
    loop {
        let mut serving = 0;
        let pods = super::catalogd_pods(client).await;
        for pod in &pods {
            let Some(ip) = pod.status.as_ref().and_then(|s| s.pod_ip.clone()) else {
                continue;
            };
            let url = format!("http://{ip}:8083/catalogs/{catalog}/all.json");
            let head = reqwest::Client::new().head(&url).send().await;
            if head.is_ok_and(|r| r.headers().get("etag").is_some_and(|e| e == etag.as_str())) {
                serving += 1;
            }
        }
        if serving == pods.len() && serving > 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{serving} of {} catalogd Pods serve {catalog} at {hash}",
            pods.len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The example package with 0.1.0 and 0.2.0 in its channel, 0.1.0 deprecated.
fn two_versions() -> String {
    let bundle = |v: &str| {
        format!(
            "---\nschema: olm.bundle\nname: example-operator.v{v}\npackage: example-operator\nimage: quay.io/olmtest/example-operator-bundle:v{v}\nproperties:\n- type: olm.package\n  value:\n    packageName: example-operator\n    version: {v}\n"
        )
    };
    format!(
        "---\nschema: olm.package\nname: example-operator\ndefaultChannel: stable\n---\nschema: olm.channel\nname: stable\npackage: example-operator\nentries:\n- name: example-operator.v0.1.0\n- name: example-operator.v0.2.0\n  replaces: example-operator.v0.1.0\n{}{}---\nschema: olm.deprecations\npackage: example-operator\nentries:\n- reference:\n    schema: olm.bundle\n    name: example-operator.v0.1.0\n  message: use 0.2.0\n",
        bundle("0.1.0"),
        bundle("0.2.0")
    )
}

/// A kubeconfig for the cluster that authenticates with `token` only.
fn token_kubeconfig(dir: &std::path::Path, token: &str) -> std::path::PathBuf {
    let cluster = olm_e2e::cluster::cluster().unwrap();
    let config = kube::config::Kubeconfig::read_from(&cluster.kubeconfig).unwrap();
    let server = olm_e2e::control_plane::kubeconfig::current_cluster(&config).unwrap();
    let config = olm_e2e::control_plane::kubeconfig::token(server, "browser", token);
    let path = dir.join("token.kubeconfig");
    std::fs::write(&path, serde_json::to_string(&config).unwrap()).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catalog_content_is_read_through_the_api_server_and_a_catalogd_restart_breaks_nothing() {
    let _serial = SERIAL.lock().await;
    olm_e2e::install_crypto_provider();
    let ctx = TestContext::new("node-api").await.unwrap();
    let client = ctx.client.clone();
    let images = images().await;
    olm_e2e::chart::install(
        false,
        &[
            &format!("image.registry={images}"),
            "image.tag=e2e",
            "bundleDeploymentCRD.install=false",
            "logFormat=plain",
            "catalogApi.enabled=true",
        ],
    )
    .unwrap();
    wait_deployments_available(&client, OLM_NAMESPACE, READY_WITHIN)
        .await
        .unwrap();
    let pods = super::catalogd_pods(&client).await;
    assert_eq!(pods.len(), 2, "the API on runs two catalogd replicas");
    let apiservices: Api<APIService> = Api::all(client.clone());
    wait_apiservice_available(&client, APISERVICE, READY_WITHIN)
        .await
        .unwrap();

    // Content, as kubectl shows it: through the API server, by label, wide, and one object.
    let (name, cm) = (ctx.name("cat"), ctx.name("cat-cm"));
    let (catalogs, unpacked) =
        unpacked_configmap_catalog(&ctx, &name, &cm, &example_catalog("0.1.0"))
            .await
            .unwrap();
    let first_hash = unpacked
        .status
        .as_ref()
        .and_then(|s| s.content_hash.clone())
        .unwrap();
    every_replica_serves(&client, &name, &first_hash).await;
    let by_catalog = format!("catalog={name}");
    let packages = kubectl_until(
        &["get", "packages", "-l", &by_catalog],
        "the package",
        |o| o.contains("example-operator"),
    )
    .await;
    println!("kubectl get packages -l {by_catalog}\n{packages}");
    assert!(packages.contains("DEFAULT CHANNEL"), "{packages}");
    assert!(packages.contains("0.1.0"), "{packages}");
    let selector = format!("package=example-operator,{by_catalog}");
    let channels = kubectl(&["get", "channels", "-l", &selector]).unwrap();
    println!("kubectl get channels -l {selector}\n{channels}");
    assert!(channels.contains("example-operator.v0.1.0"), "{channels}");
    let bundles = kubectl(&["get", "bundles", "-l", &selector, "-o", "wide"]).unwrap();
    println!("kubectl get bundles -l {selector} -o wide\n{bundles}");
    assert!(bundles.contains("INSTALL MODES"), "{bundles}");
    let bundle = format!("{name}.example-operator.example-operator.v0.1.0");
    let yaml = kubectl(&["get", "bundle", &bundle, "-o", "yaml"]).unwrap();
    assert!(
        yaml.contains("image: quay.io/olmtest/example-operator-bundle:v0.1.0"),
        "{yaml}"
    );
    assert!(yaml.contains("kind: Bundle"), "{yaml}");
    let field = format!("spec.package=example-operator,spec.catalog={name}");
    let by_field = kubectl(&["get", "bundles", "--field-selector", &field, "-o", "name"]).unwrap();
    assert_eq!(
        by_field.trim(),
        format!("bundle.catalogs.olm-rs.io/{bundle}")
    );

    // client-go's watch-list (kube's streaming lists: sendInitialEvents) syncs: the initial
    // events end with the bookmark such clients wait for.
    let bundles_api: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("catalogs.olm-rs.io", "v1alpha1", "Bundle"),
            "bundles",
        ),
    );
    let config = watcher::Config::default()
        .streaming_lists()
        .labels(&by_catalog);
    let mut events = watcher(bundles_api, config).boxed();
    let synced = tokio::time::timeout(Duration::from_secs(60), async {
        let mut seen = 0;
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::InitApply(_)) => seen += 1,
                Ok(watcher::Event::InitDone) => return Ok(seen),
                Err(e) => return Err(e.to_string()),
                _ => {}
            }
        }
        Err("the watch ended".to_owned())
    })
    .await;
    assert_eq!(
        synced,
        Ok(Ok(1)),
        "a streaming list of the catalog's one bundle"
    );
    drop(events);

    // A user without RBAC is refused by name.
    ctx.apply(&json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "browser", "namespace": ctx.namespace}}))
        .await
        .unwrap();
    let token = olm_e2e::demo::token(&client, &ctx.namespace, "browser")
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = token_kubeconfig(dir.path(), &token);
    let refused = Command::new(olm_e2e::helm::cached("kubectl").unwrap())
        .args(["get", "packages"])
        .env("KUBECONFIG", &config)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        stderr.contains("Forbidden") && stderr.contains("cannot list resource \"packages\""),
        "{stderr}"
    );

    // Straight to catalogd's Service, not through the API server: catalogd's own review refuses
    // that user, and front-proxy headers without the front proxy's certificate count for
    // nothing.
    let tls = Api::<Secret>::namespaced(client.clone(), OLM_NAMESPACE)
        .get("catalogd-api-tls")
        .await
        .unwrap();
    let ca = tls.data.unwrap()["ca.crt"].0.clone();
    let ip: std::net::IpAddr = Api::<Service>::namespaced(client.clone(), OLM_NAMESPACE)
        .get("catalogd-api")
        .await
        .unwrap()
        .spec
        .unwrap()
        .cluster_ip
        .unwrap()
        .parse()
        .unwrap();
    let host = format!("catalogd-api.{OLM_NAMESPACE}.svc");
    let direct = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap())
        .resolve(&host, std::net::SocketAddr::new(ip, 443))
        .no_proxy()
        .build()
        .unwrap();
    let url = format!("https://{host}/apis/catalogs.olm-rs.io/v1alpha1/packages");
    let forged = [
        ("X-Remote-User", "system:admin"),
        ("X-Remote-Group", "system:masters"),
    ];
    let mut anonymous = direct.get(&url);
    for (k, v) in forged {
        anonymous = anonymous.header(k, v);
    }
    assert_eq!(anonymous.send().await.unwrap().status(), 401);
    let mut with_token = direct.get(&url).bearer_auth(&token);
    for (k, v) in forged {
        with_token = with_token.header(k, v);
    }
    let refused = with_token.send().await.unwrap();
    assert_eq!(refused.status(), 403);
    let status: serde_json::Value = serde_json::from_str(&refused.text().await.unwrap()).unwrap();
    let message = status["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("cannot list resource \"packages\""),
        "{status}"
    );

    // A watch sees the Catalog move to new content: the new bundle is added.
    let mut watch = Command::new(olm_e2e::helm::cached("kubectl").unwrap())
        .args(["get", "bundles", "-l", &by_catalog, "--watch", "-o", "name"])
        .env(
            "KUBECONFIG",
            &olm_e2e::cluster::cluster().unwrap().kubeconfig,
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = watch.stdout.take().unwrap();
    let (lines_tx, lines_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    // kubectl printed its list (so it watches from that list's version) before the content
    // moves.
    let listed = format!("bundle.catalogs.olm-rs.io/{bundle}");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    while !seen.contains(&listed) {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines_rx.recv_timeout(left) {
            Ok(line) => seen.push(line),
            Err(_) => panic!("kubectl get --watch did not list {listed}: {seen:?}"),
        }
    }
    put_catalog_configmap(&ctx, &cm, &two_versions())
        .await
        .unwrap();
    let moved = wait_unpacked(&catalogs, &name, Some(&first_hash))
        .await
        .unwrap();
    let added =
        format!("bundle.catalogs.olm-rs.io/{name}.example-operator.example-operator.v0.2.0");
    while !seen.contains(&added) {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines_rx.recv_timeout(left) {
            Ok(line) => seen.push(line),
            Err(_) => panic!("the watch did not see {added}: {seen:?}"),
        }
    }
    let _ = watch.kill();
    let _ = watch.wait();
    let second_hash = moved.status.and_then(|s| s.content_hash).unwrap();
    every_replica_serves(&client, &name, &second_hash).await;

    // Pages: kubectl follows continue tokens one object at a time; a deprecation shows.
    let paged = kubectl_until(
        &[
            "get",
            "bundles",
            "-l",
            &by_catalog,
            "--chunk-size=1",
            "-o",
            "name",
        ],
        "both bundles",
        |o| o.lines().count() == 2,
    )
    .await;
    assert!(
        paged.contains("v0.1.0") && paged.contains("v0.2.0"),
        "{paged}"
    );
    let path =
        format!("/apis/catalogs.olm-rs.io/v1alpha1/bundles?limit=1&labelSelector=catalog%3D{name}");
    let first: serde_json::Value =
        serde_json::from_str(&kubectl(&["get", "--raw", &path]).unwrap()).unwrap();
    assert_eq!(first["items"].as_array().unwrap().len(), 1, "{first}");
    assert!(
        first["metadata"]["continue"]
            .as_str()
            .is_some_and(|c| !c.is_empty())
    );
    let deprecated = kubectl(&["get", "bundles", "-l", &selector]).unwrap();
    let old_row = deprecated.lines().find(|l| l.contains("v0.1.0")).unwrap();
    assert!(old_row.contains("True"), "{deprecated}");
    let metas = kubectl(&["get", "metas", "-l", &by_catalog]).unwrap();
    assert!(metas.contains("olm.deprecations"), "{metas}");

    // The leader's Pod deleted while kubectl api-resources and namespace deletions run.
    let stop = Arc::new(AtomicBool::new(false));
    let discovery = {
        let stop = stop.clone();
        tokio::task::spawn_blocking(move || {
            let (mut runs, mut failures) = (0u32, Vec::new());
            while !stop.load(Ordering::SeqCst) {
                runs += 1;
                if let Err(e) = kubectl(&["api-resources", "-o", "name"]) {
                    failures.push(e.to_string());
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            (runs, failures)
        })
    };
    let availability = {
        let (stop, apiservices) = (stop.clone(), apiservices.clone());
        tokio::spawn(async move {
            let (mut checks, mut unavailable) = (0u32, 0u32);
            while !stop.load(Ordering::SeqCst) {
                checks += 1;
                if !apiservice_available(apiservices.get(APISERVICE).await.ok().as_ref()) {
                    unavailable += 1;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            (checks, unavailable)
        })
    };
    // A namespace created and deleted every second, each deletion timed on its own.
    let deletions = {
        let (stop, client, prefix) = (stop.clone(), client.clone(), ctx.name("gone"));
        tokio::spawn(async move {
            let namespaces: Api<Namespace> = Api::all(client);
            let mut each = Vec::new();
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                i += 1;
                let (namespaces, ns) = (namespaces.clone(), format!("{prefix}-{i}"));
                each.push(tokio::spawn(async move {
                    namespaces
                        .create(
                            &PostParams::default(),
                            &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap(),
                        )
                        .await
                        .unwrap();
                    let started = Instant::now();
                    namespaces
                        .delete(&ns, &DeleteParams::default())
                        .await
                        .unwrap();
                    wait_for_deletion(&namespaces, &ns, Duration::from_secs(60))
                        .await
                        .unwrap();
                    started.elapsed()
                }));
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            let mut took = Vec::new();
            for deletion in each {
                took.push(deletion.await.unwrap());
            }
            took
        })
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    let leader = leader_pod(&client, "catalogd").await;
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), OLM_NAMESPACE);
    let deleted_at = Instant::now();
    pods_api
        .delete(&leader, &DeleteParams::default())
        .await
        .unwrap();
    wait_for_deletion(&pods_api, &leader, READY_WITHIN)
        .await
        .unwrap();
    wait_deployments_available(&client, OLM_NAMESPACE, READY_WITHIN)
        .await
        .unwrap();
    // And a little after the new Pod is Ready, when the API server sees its endpoints change.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let restart = deleted_at.elapsed();
    stop.store(true, Ordering::SeqCst);
    let (runs, failures) = discovery.await.unwrap();
    let (checks, unavailable) = availability.await.unwrap();
    let took = deletions.await.unwrap();
    let slowest = took.iter().max().copied().unwrap_or_default();
    println!(
        "catalogd's leader Pod deleted and replaced in {restart:?}: kubectl api-resources ran {runs} times, {} failed; the APIService was checked {checks} times, unavailable {unavailable}; {} namespaces deleted, the slowest in {slowest:?}",
        failures.len(),
        took.len()
    );
    assert!(failures.is_empty(), "{failures:?}");
    assert_eq!(unavailable, 0);
    assert!(runs >= 5 && !took.is_empty());
    // No deletion waited on discovery (the namespace controller's DiscoveryFailed retries
    // back off for many seconds).
    assert!(slowest < Duration::from_secs(10), "{took:?}");

    // `helm upgrade --reuse-values` keeps the API's CA (the APIService's caBundle does not
    // change) and the API comes back Available.
    let ca_bundle = |a: APIService| a.spec.and_then(|s| s.ca_bundle).map(|b| b.0);
    let before = ca_bundle(apiservices.get(APISERVICE).await.unwrap());
    olm_e2e::helm::install_in("default", &["upgrade", "--reuse-values"]).unwrap();
    wait_deployments_available(&client, OLM_NAMESPACE, READY_WITHIN)
        .await
        .unwrap();
    let after = wait_apiservice_available(&client, APISERVICE, READY_WITHIN)
        .await
        .unwrap();
    assert!(before.is_some());
    assert_eq!(ca_bundle(after), before);

    ctx.cleanup().await.unwrap();
    olm_e2e::chart::uninstall().unwrap();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let _ = namespaces
        .delete(OLM_NAMESPACE, &DeleteParams::default())
        .await;
    wait_for_deletion(&namespaces, OLM_NAMESPACE, READY_WITHIN)
        .await
        .unwrap();
    assert!(apiservices.get_opt(APISERVICE).await.unwrap().is_none());
}
