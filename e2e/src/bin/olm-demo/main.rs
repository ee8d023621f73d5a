//! The demo, against the cluster named by `KUBECONFIG` (a fresh local cluster with one node,
//! started by hack/demo.sh): pushes the managers' images, assembled from this build, to the
//! node's registry, installs olm-rs with the real helm, waits until every manager Pod is Ready,
//! then tells the whole story step by step,
//! as a tutorial (a step title, the command a user would type, and what it printed): an
//! operator's bundles and catalog pushed to a registry, a Catalog of that image, an Operator
//! resolved to a BundleDeployment and installed by the provisioner, the Catalog moved to a new
//! version and the operator upgraded with it, an OwnNamespace operator and a webhook and
//! APIService operator from a second Catalog, a Helm chart from an OCI artifact, and everything
//! deleted again.
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

mod charts;

const WAIT: Duration = Duration::from_secs(120);
const CATALOGS: (&str, &str, &str) = ("catalogd.operatorframework.io", "v1alpha1", "Catalog");
/// The group of catalogd's aggregated API.
const CATALOG_API: &str = "catalogs.olm-rs.io";
const OPERATORS: (&str, &str, &str) = ("operators.operatorframework.io", "v1alpha1", "Operator");
const BUNDLE_DEPLOYMENTS: (&str, &str, &str) = ("core.rukpak.io", "v1alpha1", "BundleDeployment");
/// The example operator's namespace, and the label its objects carry.
const OPERATOR_NS: &str = "example-operator-system";
const OWNED: &str = "core.rukpak.io/owner-name=example-operator";
/// The OwnNamespace operator's namespace (`<package>-system`, made for it).
const OWN_NS: &str = "own-operator-system";
const WIDGETS: (&str, &str, &str) = ("webhook.test.olm-rs.io", "v1", "Widget");

/// Waits until the Operator `name` is installed and healthy.
async fn healthy(operators: &Api<Operator>, name: &str) -> Result<Operator> {
    let done = wait::wait_for(operators, name, "Installed and Healthy", WAIT, |o| {
        o.and_then(|o| o.status.as_ref()).is_some_and(|s| {
            olm_api::conditions::is_true(&s.conditions, "Installed")
                && olm_api::conditions::is_true(&s.conditions, "Healthy")
        })
    })
    .await?;
    Ok(done)
}

/// Step 9: an OwnNamespace-only operator and one with webhooks and an aggregated API,
/// installed from a second Catalog beside the example operator.
async fn more_operators(
    client: &kube::Client,
    registry: &olm_e2e::registry::Registry,
    dir: &std::path::Path,
) -> Result<()> {
    step(
        9,
        "Operators as OLM v0's users run them: one watching only its own namespace, one with webhooks and an aggregated API",
    );
    println!(
        "Their bundles and catalog, from {}:",
        dir.join("more-operators").display()
    );
    for pushed in olm_e2e::demo::push_more(registry, &dir.join("more-operators")).await? {
        println!("  pushed {pushed}");
    }
    let catalog = serde_json::json!({
        "apiVersion": "catalogd.operatorframework.io/v1alpha1", "kind": "Catalog",
        "metadata": {"name": "more-operators"},
        "spec": {"source": {"type": "image", "image": {"ref": format!("{}/more-operators-index:1.0.0", registry.host)}}},
    });
    let operators = ["own-operator", "webhook-operator"].map(|name| {
        serde_json::json!({"apiVersion": "operators.operatorframework.io/v1alpha1", "kind": "Operator",
            "metadata": {"name": name}, "spec": {"packageName": name}})
    });
    command("kubectl apply -f - <<EOF");
    for doc in std::iter::once(&catalog).chain(&operators) {
        println!("---");
        print!("{}", serde_saphyr::to_string(doc)?);
    }
    println!("EOF");
    apply_docs(client, &[catalog]).await?;
    apply_docs(client, &operators).await?;
    command("kubectl wait operator/own-operator operator/webhook-operator --for=condition=Healthy");
    let api: Api<Operator> = Api::all(client.clone());
    for name in ["own-operator", "webhook-operator"] {
        healthy(&api, name).await?;
        println!("operator.operators.operatorframework.io/{name} condition met");
    }
    get(client, OPERATORS, None, None).await?;

    println!(
        "\nown-operator supports only OwnNamespace: with nothing asked it was installed in\n{OWN_NS} (made for it), watching that namespace alone. Its permissions are a Role\nthere, not a ClusterRole, and its Deployment says what it watches:"
    );
    get(
        client,
        ("rbac.authorization.k8s.io", "v1", "Role"),
        Some(OWN_NS),
        None,
    )
    .await?;
    command(&format!("kubectl logs -n {OWN_NS} deployment/own-operator"));
    let pods: Api<Pod> = Api::namespaced(client.clone(), OWN_NS);
    let logs = wait_for_log(&pods, "app.kubernetes.io/name=own-operator", "watching").await?;
    print!("{logs}");

    println!(
        "\nwebhook-operator's validating, mutating and conversion webhooks and its APIService call\nits Deployment through a Service, on a certificate the provisioner issued from a CA of its\nown (no cert-manager), rotated long before it expires:"
    );
    let owned = "core.rukpak.io/owner-name=webhook-operator";
    for kind in [
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
    ] {
        get(
            client,
            ("admissionregistration.k8s.io", "v1", kind),
            None,
            Some(owned),
        )
        .await?;
    }
    get(
        client,
        ("apiregistration.k8s.io", "v1", "APIService"),
        None,
        Some(owned),
    )
    .await?;
    let widget = |name: &str, spec: serde_json::Value| {
        serde_json::json!({"apiVersion": "webhook.test.olm-rs.io/v1", "kind": "Widget",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec})
    };
    command("kubectl apply -f - <<EOF");
    let demo = widget("demo", serde_json::json!({"size": 3}));
    print!("{}", serde_saphyr::to_string(&demo)?);
    println!("EOF");
    apply_docs(client, &[demo]).await?;
    println!("The mutating webhook labelled it:");
    command("kubectl get widgets -n default --show-labels");
    let widgets = kube::discovery::pinned_kind(
        client,
        &kube::api::GroupVersionKind::gvk(WIDGETS.0, WIDGETS.1, WIDGETS.2),
    )
    .await?
    .0;
    let api: Api<kube::api::DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &widgets);
    let stored = api.get("demo").await?;
    println!("NAME   LABELS");
    println!(
        "demo   {}",
        stored
            .metadata
            .labels
            .unwrap_or_default()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    );
    println!(
        "Stored as v1 (spec.size), read as v2 (spec.replicas) through the conversion webhook:"
    );
    command("kubectl get widgets.v2.webhook.test.olm-rs.io demo -n default -o jsonpath='{.spec}'");
    let v2 = kube::discovery::pinned_kind(
        client,
        &kube::api::GroupVersionKind::gvk(WIDGETS.0, "v2", WIDGETS.2),
    )
    .await?
    .0;
    let as_v2 = Api::<kube::api::DynamicObject>::namespaced_with(client.clone(), "default", &v2)
        .get("demo")
        .await?;
    println!("{}", as_v2.data["spec"]);
    println!("The validating webhook refuses a forbidden one:");
    command(
        "kubectl create -f - <<< '{\"apiVersion\": \"webhook.test.olm-rs.io/v1\", \"kind\": \"Widget\", \"metadata\": {\"name\": \"bad\"}, \"spec\": {\"forbidden\": true}}'",
    );
    let bad: kube::api::DynamicObject =
        serde_json::from_value(widget("bad", serde_json::json!({"forbidden": true})))?;
    match api.create(&Default::default(), &bad).await {
        Err(kube::Error::Api(e)) => println!("Error from server: {}", e.message),
        other => anyhow::bail!("the forbidden Widget was not refused: {other:?}"),
    }
    println!("The aggregated API answers through the API server:");
    get(
        client,
        ("readings.test.olm-rs.io", "v1", "Reading"),
        None,
        None,
    )
    .await?;
    command("kubectl delete widget demo -n default");
    api.delete("demo", &DeleteParams::background()).await?;
    wait::wait_for_deletion(&api, "demo", WAIT).await?;
    println!("widget.webhook.test.olm-rs.io \"demo\" deleted");
    Ok(())
}

/// The logs of the first Pod of `selector` once they hold `text`.
async fn wait_for_log(pods: &Api<Pod>, selector: &str, text: &str) -> Result<String> {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let list = pods
            .list(&kube::api::ListParams::default().labels(selector))
            .await?;
        if let Some(name) = list.items.first().and_then(|p| p.metadata.name.clone())
            && let Ok(logs) = pods.logs(&name, &Default::default()).await
            && logs.contains(text)
        {
            return Ok(logs);
        }
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "no {text:?} in the logs of {selector}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

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
        // Catalog content in the Kubernetes API (`kubectl get packages`, step 6).
        "catalogApi.enabled=true".to_owned(),
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
    wait::wait_for(
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

    step(6, "Browse the catalog's content through the Kubernetes API");
    println!(
        "catalogd serves what it unpacked as read-only objects (catalogs.olm-rs.io), through the\nAPI server: from this machine, outside the cluster's network, with RBAC saying who may read:"
    );
    command("kubectl wait apiservice v1alpha1.catalogs.olm-rs.io --for=condition=Available");
    wait::wait_apiservice_available(&client, "v1alpha1.catalogs.olm-rs.io", WAIT).await?;
    println!("apiservice.apiregistration.k8s.io/v1alpha1.catalogs.olm-rs.io condition met");
    // Either catalogd replica may answer: the follower has copied the leader's content once
    // the package shows.
    let packages = (CATALOG_API, "v1alpha1", "Package");
    let (resource, _) = kube::discovery::pinned_kind(
        &client,
        &kube::api::GroupVersionKind::gvk(packages.0, packages.1, packages.2),
    )
    .await?;
    let deadline = std::time::Instant::now() + WAIT;
    while !olm_e2e::table::get_table_selected(&client, &resource, None, None)
        .await?
        .contains("example-operator")
    {
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "the package never showed in kubectl get packages"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    get(&client, packages, None, None).await?;
    get(
        &client,
        (CATALOG_API, "v1alpha1", "Channel"),
        None,
        Some("package=example-operator"),
    )
    .await?;
    get(
        &client,
        (CATALOG_API, "v1alpha1", "Bundle"),
        None,
        Some("package=example-operator"),
    )
    .await?;

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

    more_operators(&client, &registry, &dir).await?;

    charts::helm_chart(10, &client, &registry, &dir).await?;

    step(
        11,
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
        12,
        "Delete the Operators and the Catalogs: nothing of the operators is left",
    );
    let bds: Api<BundleDeployment> = Api::all(client.clone());
    for name in ["example-operator", "own-operator", "webhook-operator"] {
        command(&format!("kubectl delete operator {name}"));
        operators.delete(name, &DeleteParams::background()).await?;
        wait::wait_for_deletion(&operators, name, WAIT).await?;
        wait::wait_for_deletion(&bds, name, WAIT).await?;
        println!("operator.operators.operatorframework.io \"{name}\" deleted");
    }
    for name in ["example-operator-index", "more-operators"] {
        command(&format!("kubectl delete catalog {name}"));
        catalogs.delete(name, &DeleteParams::background()).await?;
        wait::wait_for_deletion(&catalogs, name, WAIT).await?;
        println!("catalog.catalogd.operatorframework.io \"{name}\" deleted");
    }
    let namespaces: Api<Namespace> = Api::all(client.clone());
    wait::wait_for_deletion(&namespaces, OPERATOR_NS, WAIT).await?;
    wait::wait_for_deletion(&namespaces, OWN_NS, WAIT).await?;
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
    // The catalogs' content went with them (either replica may answer: until both dropped it).
    let (resource, _) = kube::discovery::pinned_kind(
        &client,
        &kube::api::GroupVersionKind::gvk(CATALOG_API, "v1alpha1", "Package"),
    )
    .await?;
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let listed = olm_e2e::table::get_table_selected(&client, &resource, None, None).await?;
        if !["example-operator", "own-operator", "webhook-operator"]
            .iter()
            .any(|p| listed.contains(p))
        {
            break;
        }
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "the deleted catalogs' packages are still listed"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    get(&client, (CATALOG_API, "v1alpha1", "Package"), None, None).await?;

    step(13, "Uninstall olm-rs");
    command("kubectl delete clusterrolebinding olm-demo-metrics-reader");
    Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(client.clone())
        .delete("olm-demo-metrics-reader", &DeleteParams::background())
        .await?;
    command("helm uninstall olm --wait");
    print!("{}", chart::uninstall()?);
    get(&client, ("", "v1", "Pod"), Some(OLM_NAMESPACE), None).await?;
    Ok(())
}
