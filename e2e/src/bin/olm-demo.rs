//! The demo's client side: applies `config/samples/` to the cluster named by `KUBECONFIG` and
//! prints the objects the way `kubectl get` would.
//!
//! Usage: `olm-demo [SAMPLES_DIR]`

use std::path::PathBuf;

use anyhow::{Context, Result};
use kube::ResourceExt;
use kube::discovery::pinned_kind;
use olm_e2e::{apply, cluster, samples, table};

#[tokio::main]
async fn main() -> Result<()> {
    let dir = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(samples::samples_dir);
    let kubeconfig =
        std::env::var_os("KUBECONFIG").context("set KUBECONFIG to the cluster's kubeconfig")?;
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
    println!(
        "CRDs installed and established: Catalog, Operator, BundleDeployment, CatalogSource\n"
    );

    let samples = samples::load(&dir)?;
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
    Ok(())
}
