//! The demo's client side, against the cluster named by `KUBECONFIG`: starts catalogd as its own
//! ServiceAccount, applies `config/samples/`, waits for the ConfigMap catalog to be served, and
//! prints the objects as `kubectl get` would, the catalogs' conditions, and a query of the
//! served content.
//!
//! Usage: `olm-demo [SAMPLES_DIR]`

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use kube::ResourceExt;
use kube::api::Api;
use kube::discovery::pinned_kind;
use olm_api::catalog::Catalog;
use olm_api::conditions::find_condition;
use olm_e2e::{apply, cluster, manager, samples, table, wait};

/// The sample catalogs catalogd can serve without any network: one from a ConfigMap, one from
/// the demo's own HTTP server.
const SERVED_SAMPLES: [&str; 2] = ["example-configmaps", "example-http"];

/// Where `config/samples/catalog-http.yaml` expects its catalog.
const DEMO_HTTP_ADDRESS: &str = "127.0.0.1:8090";

/// Serves the ConfigMap sample's catalog at `/example/catalog.yaml`, so the http sample gets
/// the same content (and so the same contentHash) from a real HTTP server on loopback.
async fn serve_example_catalog(samples: &[samples::Sample]) -> Result<()> {
    let text = samples
        .iter()
        .find(|s| {
            s.doc["kind"] == "ConfigMap" && s.doc["metadata"]["name"] == "example-operator-catalog"
        })
        .and_then(|s| s.doc["data"]["catalog.yaml"].as_str())
        .context("config/samples has no example-operator-catalog ConfigMap")?
        .to_owned();
    let app = axum::Router::new().route(
        "/example/catalog.yaml",
        axum::routing::get(move || async move { text }),
    );
    let listener = tokio::net::TcpListener::bind(DEMO_HTTP_ADDRESS)
        .await
        .with_context(|| format!("binding {DEMO_HTTP_ADDRESS} for the http sample"))?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(())
}

#[tokio::main]
async fn main() -> Result<()> {
    let dir = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(samples::samples_dir);
    let kubeconfig =
        std::env::var_os("KUBECONFIG").context("set KUBECONFIG to the cluster's kubeconfig")?;
    // The harness (which starts catalogd) reuses the cluster named by this variable.
    if std::env::var_os(cluster::REUSE_ENV).is_none() {
        anyhow::bail!(
            "set {} to the same kubeconfig as KUBECONFIG",
            cluster::REUSE_ENV
        );
    }
    let client = cluster::client_for(&PathBuf::from(kubeconfig)).await?;
    let version = client
        .apiserver_version()
        .await
        .context("reading /version")?;
    println!(
        "Kubernetes control plane: kube-apiserver {}",
        version.git_version
    );
    apply::install_crds(&client).await?;
    println!("CRDs installed and established: Catalog, Operator, BundleDeployment, CatalogSource");
    let catalogd = tokio::task::spawn_blocking(manager::catalogd).await??;
    println!(
        "catalogd running as ServiceAccount olm-system/catalogd (content {}, metrics {}/metrics, log {})\n",
        catalogd.content_url,
        catalogd.admin_url,
        catalogd.manager.log.display()
    );

    let samples = samples::load(&dir)?;
    match serve_example_catalog(&samples).await {
        Ok(()) => println!(
            "serving the example catalog at http://{DEMO_HTTP_ADDRESS}/example/catalog.yaml for the http sample"
        ),
        Err(e) => println!(
            "not serving the http sample's catalog ({e:#}); example-http will report why it fails"
        ),
    }
    let mut kinds = Vec::new();
    for sample in &samples {
        let obj = apply::apply_document(&client, &sample.doc, "default")
            .await
            .with_context(|| format!("applying a document of {}", sample.file.display()))?;
        let gvk = apply::gvk_of(&sample.doc)?;
        println!(
            "{}/{} applied (from {})",
            gvk.kind.to_lowercase(),
            obj.name_any(),
            sample
                .file
                .file_name()
                .map(|f| f.to_string_lossy())
                .unwrap_or_default()
        );
        let ns = obj.namespace();
        if gvk.kind != "Namespace" && !kinds.contains(&(gvk.clone(), ns.clone())) {
            kinds.push((gvk, ns));
        }
    }

    let catalogs: Api<Catalog> = Api::all(client.clone());
    println!(
        "\nWaiting for catalogd to unpack and serve {} ...",
        SERVED_SAMPLES.join(" and ")
    );
    let mut served = Vec::new();
    for name in SERVED_SAMPLES {
        let result = wait::wait_for(
            &catalogs,
            name,
            "Unpacked=True",
            Duration::from_secs(60),
            |c| {
                c.and_then(|c| c.status.as_ref())
                    .is_some_and(|s| olm_api::conditions::is_true(&s.conditions, "Unpacked"))
            },
        )
        .await;
        match result {
            Ok(c) => served.push(c),
            Err(e) => println!("{name} was not served: {e}"),
        }
    }

    for (gvk, ns) in kinds {
        let (resource, _) = pinned_kind(&client, &gvk).await?;
        let scope = ns
            .as_deref()
            .map(|n| format!(" -n {n}"))
            .unwrap_or_default();
        println!("\n$ kubectl get {}{scope}", resource.plural);
        print!(
            "{}",
            table::get_table(&client, &resource, ns.as_deref()).await?
        );
    }

    println!(
        "\nWhy each catalog is in its phase (the image and git samples name quay.io and git.example.com, which a machine without internet cannot reach; the custom sample's generator Pod waits for a node, and the local control plane has none):"
    );
    for c in catalogs.list(&Default::default()).await?.items {
        let status = c.status.clone().unwrap_or_default();
        for type_ in ["Unpacked", "Serving"] {
            if let Some(cond) = find_condition(&status.conditions, type_) {
                println!(
                    "  {:<20} {type_}={} {}: {}",
                    c.name_any(),
                    cond.status,
                    cond.reason,
                    cond.message
                );
            }
        }
    }

    let hashes: Vec<String> = served
        .iter()
        .filter_map(|c| c.status.as_ref()?.short_content_hash.clone())
        .collect();
    if hashes.len() == 2 {
        println!(
            "\nThe same content from a ConfigMap and from HTTP has the same contentHash: {} and {}",
            hashes[0], hashes[1]
        );
    }
    let first = served.into_iter().next().context("no catalog was served")?;
    let url = first
        .status
        .and_then(|s| s.content_url)
        .context("the served catalog has no contentURL")?;
    let metas = url.replace(
        "/all.json",
        "/api/v1/metas?schema=olm.bundle&package=example-operator",
    );
    println!("\n$ curl '{metas}'");
    olm_runtime::client::install_crypto_provider();
    let body = reqwest::get(&metas).await?.text().await?;
    print!("{body}");
    Ok(())
}
