//! The demo's step for formats most software ships in: a Helm chart (config/samples/charts/
//! hello) packaged and pushed by the real helm as a Helm OCI chart artifact, installed by the
//! provisioner's Pod (which renders it with the helm its image ships, sandboxed), previewed
//! first with `provisioner render`, its values changed, and removed.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use olm_api::bundle_deployment::BundleDeployment;
use olm_e2e::demo::{apply_docs, command, get, sample, step};
use olm_e2e::helm::helm_run;
use olm_e2e::registry::Registry;
use olm_e2e::wait;

const WAIT: Duration = Duration::from_secs(120);
const NS: &str = "hello";

/// Step `n`: the hello chart through the provisioner.
pub async fn helm_chart(
    n: u32,
    client: &kube::Client,
    registry: &Registry,
    dir: &Path,
) -> Result<()> {
    step(
        n,
        "A Helm chart, rendered by the real helm in the provisioner's Pod and applied like every bundle",
    );
    let chart = dir.join("charts/hello");
    let home = tempfile::tempdir()?;
    let packages = home.path().to_string_lossy();
    command(&format!("helm package {} -d /tmp", chart.display()));
    print!(
        "{}",
        helm_run(&["package", &chart.to_string_lossy(), "-d", &packages])?
    );
    let target = format!("oci://{}/charts", registry.host);
    command(&format!(
        "helm push /tmp/hello-1.0.0.tgz {target} --plain-http"
    ));
    helm_run(&[
        "push",
        &format!("{packages}/hello-1.0.0.tgz"),
        &target,
        "--plain-http",
    ])?;
    println!("Pushed: {}/charts/hello:1.0.0", registry.host);

    let docs = sample(&dir.join("bundledeployment-helm.yaml"))?;
    let text = serde_json::to_string(docs.first().context("an empty sample")?)?
        .replace("REGISTRY", &registry.host);
    let bd: serde_json::Value = serde_json::from_str(&text)?;
    println!(
        "\nWhat it would apply, before anything is applied: `provisioner render` converts a\nbundle exactly as an install does (the same code, the same helm), in apply order."
    );
    let values = home.path().join("values.yaml");
    std::fs::write(
        &values,
        serde_saphyr::to_string(&bd["spec"]["config"]["values"])?,
    )?;
    command(
        "provisioner render config/samples/charts/hello --format helm+v3 --name hello -f values.yaml | grep -E '^kind|^  name'",
    );
    let out = Command::new(olm_e2e::binary("provisioner")?)
        .args([
            "render",
            &chart.to_string_lossy(),
            "--format",
            "helm+v3",
            "--name",
            "hello",
        ])
        .arg("--helm-binary")
        .arg(olm_e2e::helm::helm()?)
        .arg("-f")
        .arg(&values)
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for line in String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with("kind") || l.starts_with("  name:"))
    {
        println!("{line}");
    }

    let namespace =
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}});
    command(&format!("kubectl create namespace {NS}"));
    apply_docs(client, &[namespace]).await?;
    command("kubectl apply -f config/samples/bundledeployment-helm.yaml   # REGISTRY filled in");
    apply_docs(client, &[bd]).await?;
    command("kubectl wait bundledeployment/hello --for=condition=Healthy");
    let bds: Api<BundleDeployment> = Api::all(client.clone());
    wait::wait_for(&bds, "hello", "Installed and Healthy", WAIT, |bd| {
        let true_ =
            |t: &str| olm_e2e::operators::bd_condition(bd, t).is_some_and(|(s, _, _)| s == "True");
        true_("Installed") && true_("Healthy")
    })
    .await?;
    println!("bundledeployment.core.rukpak.io/hello condition met");
    for kind in [
        ("apps", "v1", "Deployment"),
        ("", "v1", "Service"),
        ("", "v1", "ConfigMap"),
    ] {
        get(
            client,
            kind,
            Some(NS),
            Some("app.kubernetes.io/instance=hello"),
        )
        .await?;
    }
    command(&format!("kubectl logs -n {NS} deployment/hello"));
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    print!("{}", log_of(&pods, "hello from the values").await?);
    println!(
        "(No Helm release Secret: the applied set, an ApplySet on the BundleDeployment, is the record.)"
    );

    println!(
        "\nNew values render again and roll the Pod; a value the chart's schema refuses is said in its words, and nothing changes:"
    );
    command(
        "kubectl patch bundledeployment hello --type merge -p '{\"spec\":{\"config\":{\"values\":{\"replicaCount\":0}}}}'",
    );
    let bad = serde_json::json!({"spec": {"config": {"values": {"replicaCount": 0}}}});
    bds.patch("hello", &PatchParams::default(), &Patch::Merge(&bad))
        .await?;
    let refused = wait::wait_for(&bds, "hello", "refused", WAIT, |bd| {
        olm_e2e::operators::bd_condition(bd, "HasValidBundle")
            .is_some_and(|(s, r, _)| s == "False" && r == "InvalidValues")
    })
    .await?;
    command(
        "kubectl get bundledeployment hello -o jsonpath='{.status.conditions[?(@.type==\"HasValidBundle\")].message}'",
    );
    if let Some((_, _, message)) =
        olm_e2e::operators::bd_condition(Some(&refused), "HasValidBundle")
    {
        println!("{message}");
    }
    command(
        "kubectl patch bundledeployment hello --type merge -p '{\"spec\":{\"config\":{\"values\":{\"replicaCount\":1,\"greeting\":\"hello again\"}}}}'",
    );
    let good = serde_json::json!({"spec": {"config": {"values": {"replicaCount": 1, "greeting": "hello again"}}}});
    bds.patch("hello", &PatchParams::default(), &Patch::Merge(&good))
        .await?;
    command(&format!("kubectl logs -n {NS} deployment/hello"));
    print!("{}", log_of(&pods, "hello again").await?);

    command("kubectl delete bundledeployment hello");
    bds.delete("hello", &DeleteParams::background()).await?;
    wait::wait_for_deletion(&bds, "hello", WAIT).await?;
    println!("bundledeployment.core.rukpak.io \"hello\" deleted");
    get(client, ("apps", "v1", "Deployment"), Some(NS), None).await?;
    command(&format!("kubectl delete namespace {NS}"));
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces.delete(NS, &DeleteParams::background()).await?;
    wait::wait_for_deletion(&namespaces, NS, WAIT).await?;
    println!("namespace \"{NS}\" deleted");
    Ok(())
}

/// The log of the one running Pod of `pods` once it holds `text`.
async fn log_of(pods: &Api<Pod>, text: &str) -> Result<String> {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let list = pods
            .list(&kube::api::ListParams::default().labels("app.kubernetes.io/instance=hello"))
            .await?;
        for pod in &list.items {
            let running = pod.metadata.deletion_timestamp.is_none();
            if let (true, Some(name)) = (running, pod.metadata.name.as_deref())
                && let Ok(logs) = pods.logs(name, &Default::default()).await
                && logs.contains(text)
            {
                return Ok(logs);
            }
        }
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "no Pod printed {text:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
