//! The demo, against the cluster named by `KUBECONFIG` (a fresh local cluster with one node,
//! started by hack/demo.sh): pushes the managers' images, assembled from this build, to the
//! node's registry, installs olm-rs with the real helm, waits until every manager Pod is Ready,
//! then tells the whole story step by step,
//! as a tutorial (a step title, the command a user would type, and what it printed): an
//! operator's bundles and catalog pushed to a registry, a Catalog of that image, an Operator
//! resolved to a BundleDeployment and installed by the provisioner, the Catalog moved to a new
//! version and the operator upgraded with it, and everything deleted again.
//!
//! Usage: `olm-demo [SAMPLES_DIR]`

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use olm_api::bundle_deployment::BundleDeployment;
use olm_api::catalog::Catalog;
use olm_api::operator::Operator;
use olm_e2e::chart;
use olm_e2e::demo::{apply_docs, command, get, push_example, sample, step, token};
use olm_e2e::manager::OLM_NAMESPACE;
use olm_e2e::{cluster, node, samples, wait};

const WAIT: Duration = Duration::from_secs(120);
const CATALOGS: (&str, &str, &str) = ("catalogd.operatorframework.io", "v1alpha1", "Catalog");
const OPERATORS: (&str, &str, &str) = ("operators.operatorframework.io", "v1alpha1", "Operator");
const BUNDLE_DEPLOYMENTS: (&str, &str, &str) = ("core.rukpak.io", "v1alpha1", "BundleDeployment");
/// The example operator's namespace, and the label its objects carry.
const OPERATOR_NS: &str = "example-operator-system";
const OWNED: &str = "core.rukpak.io/owner-name=example-operator";

/// `http://<ClusterIP>:<port>` of the Service `name` of olm-system: this machine routes the
/// node's Service range (`.svc` names resolve only inside the cluster).
async fn service_url(client: &kube::Client, scheme: &str, name: &str) -> Result<String> {
    let spec = Api::<Service>::namespaced(client.clone(), OLM_NAMESPACE)
        .get(name)
        .await?
        .spec
        .context("a Service without spec")?;
    let ip = spec.cluster_ip.context("a Service without a ClusterIP")?;
    let port = spec
        .ports
        .and_then(|p| p.first().map(|p| p.port))
        .context("a Service without ports")?;
    Ok(format!("{scheme}://{ip}:{port}"))
}

/// Waits until the Operator says it installed `version` and that it is healthy (its
/// Deployment available on the node).
async fn installed(operators: &Api<Operator>, version: &str) -> Result<Operator> {
    let version = version.to_owned();
    Ok(
        wait::wait_for(operators, "example-operator", "installed", WAIT, move |o| {
            o.and_then(|o| o.status.as_ref()).is_some_and(|s| {
                olm_api::conditions::is_true(&s.conditions, "Installed")
                    && olm_api::conditions::is_true(&s.conditions, "Healthy")
                    && s.installed_version.as_deref() == Some(version.as_str())
            })
        })
        .await?,
    )
}

/// What the operator's objects are: its ConfigMaps and its CRD, and the settings' version.
async fn show_installed(client: &kube::Client) -> Result<()> {
    get(
        client,
        ("", "v1", "ConfigMap"),
        Some(OPERATOR_NS),
        Some(OWNED),
    )
    .await?;
    get(
        client,
        ("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
        None,
        Some(OWNED),
    )
    .await?;
    command(&format!(
        "kubectl get configmap example-operator-settings -n {OPERATOR_NS} -o jsonpath='{{.data.version}}'"
    ));
    let settings = Api::<ConfigMap>::namespaced(client.clone(), OPERATOR_NS)
        .get("example-operator-settings")
        .await?;
    println!(
        "{}",
        settings
            .data
            .and_then(|d| d.get("version").cloned())
            .unwrap_or_default()
    );
    Ok(())
}

/// The operator's workload: its Deployment rolled out to `version`, its one Pod Running (the
/// previous version's gone), and what that Pod logs.
async fn show_workload(client: &kube::Client, version: &str) -> Result<()> {
    command(&format!(
        "kubectl rollout status deployment/example-operator -n {OPERATOR_NS}"
    ));
    node::wait_deployments_available(client, OPERATOR_NS, WAIT).await?;
    println!("deployment \"example-operator\" successfully rolled out");
    let pods: Api<Pod> = Api::namespaced(client.clone(), OPERATOR_NS);
    let wanted = format!("example-operator {version} running");
    let deadline = tokio::time::Instant::now() + WAIT;
    let pod = loop {
        let list = pods.list(&Default::default()).await?.items;
        if let [pod] = list.as_slice() {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let log = pods
                .logs(&name, &Default::default())
                .await
                .unwrap_or_default();
            if log.contains(&wanted) {
                break (name, log);
            }
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "the operator's Pods did not come to one Pod of {version} within {} s:\n{}",
            WAIT.as_secs(),
            node::pods_report(client, OPERATOR_NS).await
        );
        // Polling until the previous version's Pod is gone, bounded by the deadline.
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    get(client, ("", "v1", "Pod"), Some(OPERATOR_NS), None).await?;
    command(&format!(
        "kubectl logs deployment/example-operator -n {OPERATOR_NS}"
    ));
    print!("{}", pod.1);
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

    step(1, "A local cluster");
    command("kubectl version");
    let version = client
        .apiserver_version()
        .await
        .context("reading /version")?;
    println!("Server Version: {}", version.git_version);
    println!(
        "(a real kube-apiserver, etcd, kube-controller-manager and kube-scheduler, and one node:\na kubelet with containerd and runc, kube-proxy and CoreDNS)"
    );
    get(&client, ("", "v1", "Node"), None, None).await?;

    step(2, "Push olm-rs's images and install it with Helm");
    let registry = node::registry()?;
    println!(
        "No image can be pulled here and no Docker engine runs: each manager's image is assembled\nfrom this build (its binary, the libraries it links, a non-root user) and pushed to the\nnode's registry, {}:",
        registry.host
    );
    let images = node::push_managers(&registry, "demo").await?;
    for manager in node::MANAGERS {
        println!("  pushed {images}/{manager}:demo");
    }
    // The harness installs every CRD with the control plane, the BundleDeployment CRD
    // included, as rukpak would: the chart leaves that one alone. The node's registry speaks
    // plain HTTP, which catalogd and the provisioner use only for registries an admin names.
    let insecure = format!("--insecure-registries={}", registry.host);
    let sets = [
        "bundleDeploymentCRD.install=false".to_owned(),
        format!("image.registry={images}"),
        "image.tag=demo".to_owned(),
        format!("catalogd.extraArgs[0]={insecure}"),
        format!("provisioner.extraArgs[0]={insecure}"),
    ];
    command(&format!(
        "helm install olm charts/olm {}",
        sets.iter()
            .map(|s| format!("--set {s}"))
            .collect::<Vec<_>>()
            .join(" ")
    ));
    let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
    let out = chart::install(false, &sets)?;
    for line in out.lines().take_while(|l| !l.starts_with("NOTES")) {
        println!("{line}");
    }

    step(3, "Every manager runs as a Pod, Ready");
    command("kubectl wait deployments --all -n olm-system --for=condition=Available");
    node::wait_deployments_available(&client, OLM_NAMESPACE, WAIT).await?;
    get(
        &client,
        ("apps", "v1", "Deployment"),
        Some(OLM_NAMESPACE),
        None,
    )
    .await?;
    get(&client, ("", "v1", "Pod"), Some(OLM_NAMESPACE), None).await?;

    step(
        4,
        "Push the operator's bundles and its catalog to a registry",
    );
    println!(
        "The node's registry (the distribution registry, Debian's docker-registry) on {}; the\nexample operator's two registry+v1 bundles and two catalog images, from {}:",
        registry.host,
        dir.join("example-operator").display()
    );
    for pushed in push_example(&registry, &dir.join("example-operator")).await? {
        println!("  pushed {pushed}");
    }

    step(
        5,
        "Create a Catalog of the 0.1.0 catalog image, and wait until it is served",
    );
    let index = |v: &str| format!("{}/example-operator-index:{v}", registry.host);
    let catalog = serde_json::json!({
        "apiVersion": "catalogd.operatorframework.io/v1alpha1", "kind": "Catalog",
        "metadata": {"name": "example-operator-index", "labels": {"olm-rs.io/tier": "example"}},
        "spec": {"source": {"type": "image", "image": {"ref": index("0.1.0")}}},
    });
    command("kubectl apply -f - <<EOF");
    print!("{}", serde_saphyr::to_string(&catalog)?);
    println!("EOF");
    apply_docs(&client, &[catalog]).await?;
    command("kubectl wait catalog/example-operator-index --for=condition=Unpacked");
    let catalogs: Api<Catalog> = Api::all(client.clone());
    let served = wait::wait_for(
        &catalogs,
        "example-operator-index",
        "Unpacked=True",
        WAIT,
        |c| {
            c.and_then(|c| c.status.as_ref())
                .is_some_and(|s| olm_api::conditions::is_true(&s.conditions, "Unpacked"))
        },
    )
    .await?;
    println!("catalog.catalogd.operatorframework.io/example-operator-index condition met");
    get(&client, CATALOGS, None, None).await?;

    step(6, "Query the metadata catalogd serves");
    let content_url = served
        .status
        .and_then(|s| s.content_url)
        .context("the served catalog has no contentURL")?;
    println!(
        "Its contentURL is {content_url}:\ncatalogd's Service, by name inside the cluster; from this machine, by its ClusterIP:"
    );
    let service = service_url(&client, "http", "catalogd").await?;
    let path = content_url
        .split_once(".svc:")
        .and_then(|(_, rest)| rest.split_once('/'))
        .map(|(_, path)| format!("/{path}"))
        .context("a contentURL not of catalogd's Service")?;
    let url = format!("{service}{path}");
    let metas = url.replace(
        "/all.json",
        "/api/v1/metas?schema=olm.bundle&package=example-operator",
    );
    command(&format!("curl '{metas}'"));
    print!("{}", reqwest::get(&metas).await?.text().await?);

    step(
        7,
        "Ask for the operator: an Operator, a BundleDeployment, the operator installed",
    );
    command("kubectl apply -f config/samples/operator.yaml");
    apply_docs(&client, &sample(&dir.join("operator.yaml"))?).await?;
    command("kubectl wait operator/example-operator --for=condition=Installed");
    command("kubectl wait operator/example-operator --for=condition=Healthy");
    let operators: Api<Operator> = Api::all(client.clone());
    installed(&operators, "0.1.0").await?;
    println!("operator.operators.operatorframework.io/example-operator condition met");
    println!("operator.operators.operatorframework.io/example-operator condition met");
    get(&client, OPERATORS, None, None).await?;
    get(&client, BUNDLE_DEPLOYMENTS, None, None).await?;
    println!(
        "The provisioner pulled the registry+v1 bundle image and converted its ClusterServiceVersion:\nthe install Namespace, a ServiceAccount, a ClusterRole and binding from its\nclusterPermissions, its Deployment; with the CRD and ConfigMaps, each marked as the\nBundleDeployment's:"
    );
    get(
        &client,
        ("rbac.authorization.k8s.io", "v1", "ClusterRole"),
        None,
        Some(OWNED),
    )
    .await?;
    get(
        &client,
        ("", "v1", "ServiceAccount"),
        Some(OPERATOR_NS),
        Some(OWNED),
    )
    .await?;
    show_installed(&client).await?;
    println!("Its Deployment runs on the node:");
    show_workload(&client, "0.1.0").await?;

    step(
        8,
        "Move the Catalog to 0.2.0: the operator upgrades with it",
    );
    command(&format!(
        "kubectl patch catalog example-operator-index --type merge -p '{{\"spec\":{{\"source\":{{\"image\":{{\"ref\":\"{}\"}}}}}}}}'",
        index("0.2.0")
    ));
    catalogs
        .patch(
            "example-operator-index",
            &PatchParams::default(),
            &Patch::Merge(
                serde_json::json!({"spec": {"source": {"image": {"ref": index("0.2.0")}}}}),
            ),
        )
        .await?;
    command(
        "kubectl wait operator/example-operator --for=jsonpath='{.status.installedVersion}'=0.2.0",
    );
    installed(&operators, "0.2.0").await?;
    println!("operator.operators.operatorframework.io/example-operator condition met");
    get(&client, OPERATORS, None, None).await?;
    println!(
        "The same BundleDeployment now names 0.2.0's bundle; its settings changed, and the\nConfigMap 0.2.0 dropped was pruned:"
    );
    show_installed(&client).await?;
    println!("Its Deployment rolled to 0.2.0:");
    show_workload(&client, "0.2.0").await?;

    step(
        9,
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
    let mut metrics = Vec::new();
    for name in node::MANAGERS {
        metrics.push(service_url(&client, "https", &format!("{name}-metrics")).await?);
    }
    println!("Each manager's metrics Service, by its ClusterIP:");
    for (name, url) in node::MANAGERS.iter().zip(&metrics) {
        let family = if *name == "provisioner" {
            "provisioner_install_results_total"
        } else {
            "controller_runtime_reconcile_total"
        };
        command(&format!(
            "curl -sk -H \"Authorization: Bearer $TOKEN\" {url}/metrics | grep {family}   # {name}"
        ));
        let text = http
            .get(format!("{url}/metrics"))
            .bearer_auth(&token)
            .send()
            .await?
            .text()
            .await?;
        for line in text.lines().filter(|l| l.starts_with(family)) {
            println!("{line}");
        }
    }
    let catalogd = &metrics[0];
    command(&format!(
        "curl -sk -o /dev/null -w '%{{http_code}}' {catalogd}/metrics   # without a token"
    ));
    let status = http
        .get(format!("{catalogd}/metrics"))
        .send()
        .await?
        .status();
    println!("{}", status.as_u16());

    step(
        10,
        "Delete the Operator and the Catalog: nothing of the operator is left",
    );
    command("kubectl delete operator example-operator");
    operators
        .delete("example-operator", &DeleteParams::background())
        .await?;
    wait::wait_for_deletion(&operators, "example-operator", WAIT).await?;
    let bds: Api<BundleDeployment> = Api::all(client.clone());
    wait::wait_for_deletion(&bds, "example-operator", WAIT).await?;
    println!("operator.operators.operatorframework.io \"example-operator\" deleted");
    command("kubectl delete catalog example-operator-index");
    catalogs
        .delete("example-operator-index", &DeleteParams::background())
        .await?;
    wait::wait_for_deletion(&catalogs, "example-operator-index", WAIT).await?;
    println!("catalog.catalogd.operatorframework.io \"example-operator-index\" deleted");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    wait::wait_for_deletion(&namespaces, OPERATOR_NS, WAIT).await?;
    get(&client, BUNDLE_DEPLOYMENTS, None, None).await?;
    get(
        &client,
        ("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
        None,
        Some(OWNED),
    )
    .await?;
    command(&format!("kubectl get namespace {OPERATOR_NS}"));
    println!("Error from server (NotFound): namespaces \"{OPERATOR_NS}\" not found");
    command(&format!("curl -s -o /dev/null -w '%{{http_code}}' {url}"));
    println!("{}", reqwest::get(&url).await?.status().as_u16());

    step(11, "Uninstall olm-rs");
    command("kubectl delete clusterrolebinding olm-demo-metrics-reader");
    Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(client.clone())
        .delete("olm-demo-metrics-reader", &DeleteParams::background())
        .await?;
    command("helm uninstall olm --wait");
    print!("{}", chart::uninstall()?);
    get(&client, ("", "v1", "Pod"), Some(OLM_NAMESPACE), None).await?;
    Ok(())
}
