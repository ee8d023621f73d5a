//! The demo, against the cluster named by `KUBECONFIG` (a fresh local control plane, started by
//! hack/demo.sh): installs olm-rs with the real helm, runs each manager as its chart
//! ServiceAccount (no kubelet runs here, so the Deployments' containers run as local
//! processes, with the Deployments' own arguments), then walks through upstream's demo
//! "sourcing catalog content from a ConfigMap" step by step, as a tutorial: a step title, the
//! command a user would type, and what it printed.
//!
//! Usage: `olm-demo [SAMPLES_DIR]`

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, GroupVersionKind};
use kube::discovery::pinned_kind;
use olm_api::bundle_deployment::BundleDeployment;
use olm_api::catalog::Catalog;
use olm_api::operator::Operator;
use olm_e2e::chart::{self, ChartManager};
use olm_e2e::{apply, cluster, samples, table, wait};

const WAIT: Duration = Duration::from_secs(120);

fn step(n: u32, title: &str) {
    println!("\n== {n}. {title} ==\n");
}

fn command(text: &str) {
    println!("$ {text}");
}

async fn get(
    client: &kube::Client,
    group: &str,
    version: &str,
    kind: &str,
    ns: Option<&str>,
) -> Result<()> {
    let (resource, _) = pinned_kind(client, &GroupVersionKind::gvk(group, version, kind)).await?;
    let scope = ns.map(|n| format!(" -n {n}")).unwrap_or_default();
    command(&format!("kubectl get {}{scope}", resource.plural));
    print!("{}", table::get_table(client, &resource, ns).await?);
    Ok(())
}

/// The documents of a sample file.
fn sample(dir: &Path, file: &str) -> Result<Vec<serde_json::Value>> {
    let path = dir.join(file);
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    Ok(apply::parse_documents(&text)?)
}

/// A token of the ServiceAccount `namespace/name`, as `kubectl create token` makes.
async fn token(client: &kube::Client, namespace: &str, name: &str) -> Result<String> {
    use k8s_openapi::api::authentication::v1::TokenRequest;
    use k8s_openapi::api::core::v1::ServiceAccount;
    let request = TokenRequest::default();
    let issued = Api::<ServiceAccount>::namespaced(client.clone(), namespace)
        .create_token_request(name, &Default::default(), &request)
        .await
        .with_context(|| format!("requesting a token for {namespace}/{name}"))?;
    issued
        .status
        .map(|s| s.token)
        .context("the TokenRequest returned no token")
}

async fn apply_docs(client: &kube::Client, docs: &[serde_json::Value]) -> Result<()> {
    for doc in docs {
        let obj = apply::apply_document(client, doc, "default").await?;
        let kind = apply::gvk_of(doc)?.kind.to_lowercase();
        println!("{kind}/{} applied", obj.name_any());
    }
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
    if std::env::var_os(cluster::REUSE_ENV).is_none() {
        anyhow::bail!(
            "set {} to the same kubeconfig as KUBECONFIG",
            cluster::REUSE_ENV
        );
    }
    olm_runtime::client::install_crypto_provider();
    let client = cluster::client_for(&PathBuf::from(kubeconfig)).await?;

    step(1, "A local control plane");
    command("kubectl version");
    let version = client
        .apiserver_version()
        .await
        .context("reading /version")?;
    println!("Server Version: {}", version.git_version);
    println!("(a real kube-apiserver, etcd and kube-controller-manager; no node runs Pods)");

    step(2, "Install olm-rs with Helm");
    // The harness installs every CRD with the control plane, the BundleDeployment CRD
    // included, as rukpak would: the chart leaves that one alone.
    command("helm install olm charts/olm --set bundleDeploymentCRD.install=false");
    let out = chart::install(false, &["bundleDeploymentCRD.install=false"])?;
    for line in out.lines().take_while(|l| !l.starts_with("NOTES")) {
        println!("{line}");
    }
    get(&client, "apps", "v1", "Deployment", Some("olm-system")).await?;

    step(3, "Run the managers as their ServiceAccounts");
    println!(
        "No kubelet runs here, so each Deployment's container runs as a local process, with the\nDeployment's own arguments and a token of its ServiceAccount (only addresses point at\nloopback):"
    );
    let manifest = chart::manifest()?;
    let mut managers: Vec<(&str, ChartManager)> = Vec::new();
    for name in ["catalogd", "operator-controller", "catalog-switcher"] {
        let m = chart::run_manager(&client, &manifest, name).await?;
        println!(
            "  {name} as ServiceAccount olm-system/{name}: {name} {}",
            m.args.join(" ")
        );
        managers.push((name, m));
    }

    let catalog_docs = sample(&dir, "catalog-configmaps.yaml")?;
    let (config_map, catalog): (Vec<_>, Vec<_>) = catalog_docs
        .into_iter()
        .partition(|d| d["kind"] == "ConfigMap");

    step(4, "Put a File-Based Catalog in a ConfigMap");
    command("kubectl apply -f config/samples/catalog-configmaps.yaml   # the ConfigMap part");
    apply_docs(&client, &config_map).await?;

    step(
        5,
        "Create a Catalog that reads it, and wait until it is served",
    );
    command("kubectl apply -f config/samples/catalog-configmaps.yaml   # the Catalog part");
    apply_docs(&client, &catalog).await?;
    command("kubectl wait catalog/example-configmaps --for=condition=Unpacked");
    let catalogs: Api<Catalog> = Api::all(client.clone());
    let served = wait::wait_for(
        &catalogs,
        "example-configmaps",
        "Unpacked=True",
        WAIT,
        |c| {
            c.and_then(|c| c.status.as_ref())
                .is_some_and(|s| olm_api::conditions::is_true(&s.conditions, "Unpacked"))
        },
    )
    .await?;
    println!("catalog.catalogd.operatorframework.io/example-configmaps condition met");
    get(
        &client,
        "catalogd.operatorframework.io",
        "v1alpha1",
        "Catalog",
        None,
    )
    .await?;

    step(6, "Query the metadata catalogd serves");
    let url = served
        .status
        .and_then(|s| s.content_url)
        .context("the served catalog has no contentURL")?;
    let metas = url.replace(
        "/all.json",
        "/api/v1/metas?schema=olm.bundle&package=example-operator",
    );
    command(&format!("curl '{metas}'"));
    print!("{}", reqwest::get(&metas).await?.text().await?);

    step(
        7,
        "Ask for the operator: an Operator, resolved to a BundleDeployment",
    );
    command("kubectl apply -f config/samples/operator.yaml");
    apply_docs(&client, &sample(&dir, "operator.yaml")?).await?;
    command("kubectl wait operator/example-operator --for=condition=Resolved");
    let operators: Api<Operator> = Api::all(client.clone());
    wait::wait_for(&operators, "example-operator", "Resolved=True", WAIT, |o| {
        o.and_then(|o| o.status.as_ref())
            .is_some_and(|s| olm_api::conditions::is_true(&s.conditions, "Resolved"))
    })
    .await?;
    println!("operator.operators.operatorframework.io/example-operator condition met");
    get(
        &client,
        "operators.operatorframework.io",
        "v1alpha1",
        "Operator",
        None,
    )
    .await?;
    let bds: Api<BundleDeployment> = Api::all(client.clone());
    let bd = wait::wait_for(
        &bds,
        "example-operator",
        "the BundleDeployment",
        WAIT,
        |b| b.is_some(),
    )
    .await?;
    get(
        &client,
        "core.rukpak.io",
        "v1alpha1",
        "BundleDeployment",
        None,
    )
    .await?;
    command(
        "kubectl get bundledeployment example-operator -o jsonpath='{.spec.template.spec.source.image.ref}'",
    );
    let image = bd
        .spec
        .template
        .spec
        .source
        .image
        .map(|i| i.r#ref)
        .unwrap_or_default();
    println!("{image}");
    println!("(rukpak, which would unpack and install that bundle, is not part of this demo)");

    step(
        8,
        "The managers' metrics, over HTTPS to an authorized token",
    );
    println!(
        "/metrics answers only tokens the API server allows to get it (TokenReview and\nSubjectAccessReview): a ServiceAccount bound to the chart's ClusterRole\nolm-metrics-reader, as a Prometheus's would be."
    );
    command("kubectl -n olm-system create serviceaccount metrics-reader");
    command(
        "kubectl create clusterrolebinding olm-demo-metrics-reader --clusterrole=olm-metrics-reader --serviceaccount=olm-system:metrics-reader",
    );
    let reader = [
        serde_json::json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "metrics-reader", "namespace": "olm-system"}}),
        serde_json::json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "olm-demo-metrics-reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "olm-metrics-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "metrics-reader", "namespace": "olm-system"}]}),
    ];
    apply_docs(&client, &reader).await?;
    command("TOKEN=$(kubectl -n olm-system create token metrics-reader)");
    let token = token(&client, "olm-system", "metrics-reader").await?;
    // The managers' certificates are self-signed here (the chart's tls.source is none).
    let http = reqwest::Client::builder()
        .tls_danger_accept_invalid_certs(true)
        .build()?;
    for (name, m) in &managers {
        command(&format!(
            "curl -sk -H \"Authorization: Bearer $TOKEN\" {}/metrics | grep controller_runtime_reconcile_total   # {name}",
            m.admin_url
        ));
        let text = http
            .get(format!("{}/metrics", m.admin_url))
            .bearer_auth(&token)
            .send()
            .await?
            .text()
            .await?;
        for line in text
            .lines()
            .filter(|l| l.starts_with("controller_runtime_reconcile_total"))
        {
            println!("{line}");
        }
    }
    let (_, catalogd) = &managers[0];
    command(&format!(
        "curl -sk -o /dev/null -w '%{{http_code}}' {}/metrics   # without a token",
        catalogd.admin_url
    ));
    let status = http
        .get(format!("{}/metrics", catalogd.admin_url))
        .send()
        .await?
        .status();
    println!("{}", status.as_u16());

    step(9, "Delete the Operator and the Catalog: nothing is left");
    command("kubectl delete operator example-operator");
    operators
        .delete("example-operator", &DeleteParams::background())
        .await?;
    wait::wait_for_deletion(&operators, "example-operator", WAIT).await?;
    wait::wait_for_deletion(&bds, "example-operator", WAIT).await?;
    println!("operator.operators.operatorframework.io \"example-operator\" deleted");
    command("kubectl delete catalog example-configmaps");
    catalogs
        .delete("example-configmaps", &DeleteParams::background())
        .await?;
    wait::wait_for_deletion(&catalogs, "example-configmaps", WAIT).await?;
    println!("catalog.catalogd.operatorframework.io \"example-configmaps\" deleted");
    get(
        &client,
        "core.rukpak.io",
        "v1alpha1",
        "BundleDeployment",
        None,
    )
    .await?;
    command(&format!("curl -s -o /dev/null -w '%{{http_code}}' {url}"));
    println!("{}", reqwest::get(&url).await?.status().as_u16());

    step(10, "Uninstall olm-rs");
    for (_, m) in &managers {
        m.manager.stop()?;
    }
    command("kubectl delete clusterrolebinding olm-demo-metrics-reader");
    Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(client.clone())
        .delete("olm-demo-metrics-reader", &DeleteParams::background())
        .await?;
    command("helm uninstall olm");
    print!("{}", chart::uninstall()?);
    Ok(())
}
