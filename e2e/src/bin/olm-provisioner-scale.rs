//! Scale benchmark of the provisioner on a real control plane (a benchmark, not a test), as
//! the origin asked of rukpak ("memory and CPU with 1, 10 and 100 BundleDeployments"): 1, 10,
//! 100 and then 1,000 BundleDeployments of a 10-object plain bundle each (a ServiceAccount, a
//! Role, a RoleBinding, a Secret and six ConfigMaps, from an immutable ConfigMap). At each
//! level it measures the time until every new BundleDeployment is `Installed`, then, idle for
//! a minute in which every BundleDeployment is resynced three times
//! (`--resync-interval-seconds=20`): the provisioner's resident memory, its CPU, and the writes
//! it sent the API server (from the audit log, leases aside). Then 10,000 unrelated ConfigMaps
//! are added to the cluster and the idle minute is measured again (the provisioner's watches
//! see only its own objects, so its memory should not move), and last every BundleDeployment
//! is deleted and the time until all 10,000 objects are gone is measured.
//!
//! With `OLM_SCALE_BUNDLE=argocd` it measures real bundles instead: 10, then 50
//! BundleDeployments of argocd-operator v0.6.0's five CRDs (1.3 MB, the repository's test data),
//! each BundleDeployment's with a group of its own (`argoproj-<i>.io`), from five immutable
//! ConfigMaps; no unrelated objects are added.
//!
//! With `OLM_SCALE_BUNDLE=helm` it measures Helm charts: 10, then 100 BundleDeployments of one
//! chart (config/samples/charts/hello: a Deployment, a Service, a ConfigMap, from two immutable
//! ConfigMaps all share), each with values of its own, rendered by the real helm; besides the
//! rest it reports the mean time of one render (`provisioner_render_duration_seconds`).
//!
//! Usage, with release builds:
//!
//! ```text
//! cargo build --release -p provisioner -p olm-e2e -p olm-cluster --bins
//! OLM_E2E_BIN_DIR=target/release target/release/olm-provisioner-scale
//! OLM_SCALE_BUNDLE=argocd OLM_E2E_BIN_DIR=target/release target/release/olm-provisioner-scale
//! OLM_SCALE_BUNDLE=helm OLM_E2E_BIN_DIR=target/release target/release/olm-provisioner-scale
//! ```
//!
//! It starts its own control plane (or uses the one named by `OLM_E2E_KUBECONFIG`) and deletes
//! what it created.

use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use olm_api::bundle_deployment::BundleDeployment;
use olm_e2e::context::TestContext;
use olm_e2e::manager::{OLM_NAMESPACE, start_provisioner_with};
use olm_e2e::process::{cpu_seconds, peak_rss_mib, rss_mib};
use olm_e2e::scale::{each, watch_until};
use serde_json::json;

const LEVELS: [usize; 4] = [1, 10, 100, 1_000];
/// The levels with real bundles (`OLM_SCALE_BUNDLE=argocd`).
const REAL_LEVELS: [usize; 2] = [10, 50];
/// The levels with Helm charts (`OLM_SCALE_BUNDLE=helm`).
const HELM_LEVELS: [usize; 2] = [10, 100];

/// What the BundleDeployments install.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Bundle {
    /// Ten objects of a plain bundle.
    Plain,
    /// argocd-operator's five CRDs.
    Argocd,
    /// The hello chart with values of its own.
    Helm,
}
const UNRELATED: usize = 10_000;
const RESYNC_SECONDS: u64 = 20;
const IDLE: Duration = Duration::from_secs(60);
/// Time for the reconciles an install causes (its own status write comes back as a change)
/// to pass before the idle minute starts.
const SETTLE: Duration = Duration::from_secs(10);

/// The bundle of BundleDeployment `i`: ten objects in `namespace`, named after `i` so no two
/// bundles claim the same object.
fn bundle(namespace: &str, i: usize) -> Result<String> {
    let name = |what: &str| format!("b{i:04}-{what}");
    let meta = |what: &str| json!({"name": name(what), "namespace": namespace});
    let mut objects = vec![
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta("sa")}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta("role"),
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta("rb"),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name("role")},
            "subjects": [{"kind": "ServiceAccount", "name": name("sa"), "namespace": namespace}]}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": meta("secret"),
            "stringData": {"token": format!("not-a-secret-{i}")}}),
    ];
    objects.extend((0..6).map(|c| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(&format!("cm-{c}")),
            "data": {"index": i.to_string(), "settings": "a: 1\nb: two\n"}})
    }));
    let yaml = objects
        .iter()
        .map(|o| serde_saphyr::to_string(o).map(|y| format!("---\n{y}")))
        .collect::<Result<String, _>>()?;
    Ok(yaml)
}

/// argocd-operator v0.6.0's CRDs, as files of a plain bundle: each BundleDeployment `i` gets
/// them in a group of its own, so that no two claim the same CRD.
fn argocd_crds(i: usize) -> Result<Vec<(String, String)>> {
    let dir = olm_e2e::repo_root()
        .join("crates/provisioner/tests/data/registry-v1/argocd-operator.v0.6.0/manifests");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&dir).with_context(|| dir.display().to_string())? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("argoproj.io_") {
            let text = std::fs::read_to_string(entry.path())?
                .replace("argoproj.io", &format!("argoproj-{i}.io"));
            files.push((name.replace("argoproj.io_", ""), text));
        }
    }
    files.sort();
    Ok(files)
}

/// Waits until `done` holds for the BundleDeployments named with `prefix`.
async fn until_ours(
    bds: &Api<BundleDeployment>,
    prefix: &str,
    what: &str,
    done: impl Fn(&[&BundleDeployment]) -> bool,
) -> Result<()> {
    let prefix = prefix.to_owned();
    watch_until(bds, Duration::from_secs(1_800), what, move |items| {
        let ours: Vec<&BundleDeployment> = items
            .iter()
            .copied()
            .filter(|b| b.name_any().starts_with(&prefix))
            .collect();
        done(&ours)
    })
    .await?;
    Ok(())
}

fn installed(bd: &BundleDeployment) -> bool {
    bd.status.as_ref().is_some_and(|s| {
        s.observed_generation == bd.metadata.generation
            && s.conditions
                .iter()
                .any(|c| c.type_ == "Installed" && c.status == "True")
    })
}

/// The hello chart's files as two immutable ConfigMaps (the chart's root, its templates), the
/// `configMaps` source of every Helm BundleDeployment.
async fn hello_chart(ctx: &TestContext, maps: &Api<ConfigMap>) -> Result<serde_json::Value> {
    let root = olm_e2e::repo_root().join("config/samples/charts/hello");
    let mut sources = Vec::new();
    for (dir, path) in [
        (root.clone(), None),
        (root.join("templates"), Some("templates")),
    ] {
        let mut data = serde_json::Map::new();
        for entry in std::fs::read_dir(&dir).with_context(|| dir.display().to_string())? {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                let name = entry.file_name().to_string_lossy().into_owned();
                data.insert(name, std::fs::read_to_string(entry.path())?.into());
            }
        }
        let name = ctx.name(&format!("chart-{}", path.unwrap_or("root")));
        let map: ConfigMap = serde_json::from_value(ctx.labelled(json!({
            "metadata": {"name": name}, "immutable": true, "data": data,
        })))?;
        maps.create(&PostParams::default(), &map).await?;
        sources.push(match path {
            Some(p) => json!({"configMap": {"name": name}, "path": p}),
            None => json!({"configMap": {"name": name}}),
        });
    }
    Ok(serde_json::Value::Array(sources))
}

/// The mean of a histogram the provisioner exports, in seconds (`None` before any sample).
async fn mean(admin_url: &str, histogram: &str) -> Result<Option<f64>> {
    let text = reqwest::get(format!("{admin_url}/metrics"))
        .await?
        .text()
        .await?;
    let value = |suffix: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{histogram}_{suffix} ")))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
    };
    Ok(match (value("sum"), value("count")) {
        (Some(sum), Some(count)) if count > 0.0 => Some(sum / count),
        _ => None,
    })
}

/// The provisioner's reconciles so far (`controller_runtime_reconcile_time_seconds_count`).
async fn reconciles(admin_url: &str) -> Result<f64> {
    let text = reqwest::get(format!("{admin_url}/metrics"))
        .await?
        .text()
        .await?;
    Ok(text
        .lines()
        .filter(|l| {
            l.starts_with("controller_runtime_reconcile_time_seconds_count")
                && l.contains("controller=\"bundledeployment\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>()
        .max(0.0))
}

/// What an idle minute shows.
struct Idle {
    rss_mib: u64,
    cpu_percent: f64,
    writes: usize,
    reconciles: f64,
}

async fn idle(pid: u32, admin_url: &str) -> Result<Idle> {
    tokio::time::sleep(SETTLE).await;
    let since = SystemTime::now();
    let (cpu, counted) = (cpu_seconds(pid), reconciles(admin_url).await?);
    tokio::time::sleep(IDLE).await;
    let cpu_percent = (cpu_seconds(pid) - cpu) * 100.0 / IDLE.as_secs_f64();
    let writes = olm_e2e::audit::writes_by("provisioner/", since)?
        .into_iter()
        .filter(|w| !w.uri.contains("/leases/"))
        .collect::<Vec<_>>();
    for w in writes.iter().take(5) {
        println!("  a write while idle: {} {}", w.verb, w.uri);
    }
    Ok(Idle {
        rss_mib: rss_mib(pid),
        cpu_percent,
        writes: writes.len(),
        reconciles: reconciles(admin_url).await? - counted,
    })
}

fn report(what: &str, idle: &Idle) {
    println!(
        "{what}: steady RSS {} MiB, idle CPU {:.2} % of a core, {} writes and {} reconciles in the idle minute",
        idle.rss_mib, idle.cpu_percent, idle.writes, idle.reconciles
    );
}

#[tokio::main]
async fn main() -> Result<()> {
    olm_e2e::install_crypto_provider();
    let ctx = TestContext::new("prov-scale").await?;
    let result = run(&ctx).await;
    ctx.cleanup().await?;
    result
}

async fn run(ctx: &TestContext) -> Result<()> {
    let selector = format!(
        "--bundle-deployment-selector={}={}",
        olm_e2e::context::E2E_LABEL,
        ctx.namespace
    );
    let resync = format!("--resync-interval-seconds={RESYNC_SECONDS}");
    let provisioner = tokio::task::spawn_blocking(move || {
        start_provisioner_with("provisioner-scale", &[selector, resync])
    })
    .await??;
    let pid = provisioner.manager.pid;
    let admin_url = provisioner.admin_url.clone();
    println!(
        "provisioner started: RSS {} MiB, {} reconciles",
        rss_mib(pid),
        reconciles(&admin_url).await?
    );

    let maps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), OLM_NAMESPACE);
    let bds: Api<BundleDeployment> = Api::all(ctx.client.clone());
    let prefix = ctx.name("bd-");
    let kind = match std::env::var("OLM_SCALE_BUNDLE").as_deref() {
        Ok("argocd") => Bundle::Argocd,
        Ok("helm") => Bundle::Helm,
        _ => Bundle::Plain,
    };
    let real = kind == Bundle::Argocd;
    let (levels, objects_each): (&[usize], usize) = match kind {
        Bundle::Argocd => (&REAL_LEVELS, 5),
        Bundle::Helm => (&HELM_LEVELS, 3),
        Bundle::Plain => (&LEVELS, 10),
    };
    let chart = match kind {
        Bundle::Helm => Some(hello_chart(ctx, &maps).await?),
        _ => None,
    };
    let mut created = 0;
    for &level in levels {
        let started = Instant::now();
        each(created..level, if real { 4 } else { 16 }, |i| {
            let (maps, bds, prefix, chart) = (&maps, &bds, &prefix, &chart);
            async move {
                if let Some(chart) = chart {
                    // One chart, values of its own: a release per BundleDeployment.
                    let bd: BundleDeployment = serde_json::from_value(ctx.labelled(json!({
                        "apiVersion": "core.rukpak.io/v1alpha1", "kind": "BundleDeployment",
                        "metadata": {"name": format!("{prefix}{i:04}")},
                        "spec": {"provisionerClassName": "core-rukpak-io-plain",
                            "config": {"namespace": ctx.namespace,
                                "values": {"greeting": format!("hello {i}"), "port": 8000 + i}},
                            "template": {"spec": {"provisionerClassName": "core-rukpak-io-helm",
                                "source": {"type": "configMaps", "configMaps": chart}}}},
                    })))?;
                    bds.create(&PostParams::default(), &bd).await?;
                    return anyhow::Ok(());
                }
                // One ConfigMap per file (each within Kubernetes' 1 MiB).
                let files = if real {
                    // Labelled for the test, so that a run cut short leaves no CRD behind.
                    argocd_crds(i)?
                        .into_iter()
                        .map(|(file, text)| {
                            let crd: serde_json::Value = serde_saphyr::from_str(&text)?;
                            anyhow::Ok((file, serde_json::to_string(&ctx.labelled(crd))?))
                        })
                        .collect::<Result<Vec<_>>>()?
                } else {
                    vec![("objects.yaml".to_owned(), bundle(&ctx.namespace, i)?)]
                };
                let mut sources = Vec::new();
                for (n, (file, text)) in files.iter().enumerate() {
                    let bundle_name = ctx.name(&format!("bundle-{i:04}-{n}"));
                    let map: ConfigMap = serde_json::from_value(ctx.labelled(json!({
                        "metadata": {"name": bundle_name},
                        "immutable": true,
                        "data": {file: text},
                    })))?;
                    maps.create(&PostParams::default(), &map).await?;
                    sources.push(json!({"configMap": {"name": bundle_name}, "path": "manifests"}));
                }
                let bd: BundleDeployment = serde_json::from_value(ctx.labelled(json!({
                    "apiVersion": "core.rukpak.io/v1alpha1", "kind": "BundleDeployment",
                    "metadata": {"name": format!("{prefix}{i:04}")},
                    "spec": {"provisionerClassName": "core-rukpak-io-plain",
                        "template": {"spec": {"provisionerClassName": "core-rukpak-io-plain",
                            "source": {"type": "configMaps", "configMaps": sources}}}},
                })))?;
                bds.create(&PostParams::default(), &bd).await?;
                anyhow::Ok(())
            }
        })
        .await?;
        until_ours(&bds, &prefix, "every BundleDeployment installed", |ours| {
            ours.iter().filter(|b| installed(b)).count() == level
        })
        .await?;
        println!(
            "{level} BundleDeployments ({} new, {} objects): installed {:.1?} after the first new one was created",
            level - created,
            level * objects_each,
            started.elapsed()
        );
        created = level;
        if let Some(render) = mean(&admin_url, "provisioner_render_duration_seconds").await? {
            println!(
                "{level} BundleDeployments: one render took {:.0} ms on average",
                render * 1000.0
            );
        }
        report(
            &format!("{level} BundleDeployments"),
            &idle(pid, &admin_url).await?,
        );
    }

    if kind == Bundle::Helm {
        helm_peer(ctx, created).await?;
    }
    if kind != Bundle::Plain {
        return finish(ctx, &bds, &prefix, created, pid, provisioner).await;
    }
    // The rest of the cluster grows; the provisioner's memory should not.
    let started = Instant::now();
    let unrelated: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    each(0..UNRELATED, 32, |i| {
        let unrelated = &unrelated;
        async move {
            let map: ConfigMap = serde_json::from_value(json!({
                "metadata": {"name": format!("unrelated-{i:05}")},
                "data": {"payload": "x".repeat(512)},
            }))?;
            unrelated.create(&PostParams::default(), &map).await?;
            anyhow::Ok(())
        }
    })
    .await?;
    println!(
        "{UNRELATED} unrelated ConfigMaps created in {:.1?}",
        started.elapsed()
    );
    report(
        &format!(
            "{} BundleDeployments and {UNRELATED} unrelated ConfigMaps",
            created
        ),
        &idle(pid, &admin_url).await?,
    );

    finish(ctx, &bds, &prefix, created, pid, provisioner).await
}

/// The peer, in the same run on the same cluster: the real `helm install` of the same chart
/// with the same values, `count` releases (four at a time, as a script or a GitOps tool would
/// run them), into a namespace of its own; the time, and the release Secrets helm keeps in
/// etcd (olm-rs keeps none). The namespace goes with the run.
async fn helm_peer(ctx: &TestContext, count: usize) -> Result<()> {
    use k8s_openapi::api::core::v1::{Namespace, Secret};
    let namespace = format!("{}-helm", ctx.namespace);
    let ns: Namespace = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": namespace, "labels": ctx.namespace_labels()},
    }))?;
    Api::<Namespace>::all(ctx.client.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    let helm = olm_e2e::helm::helm()?;
    let kubeconfig = olm_e2e::cluster::cluster()?.kubeconfig.clone();
    let chart = olm_e2e::repo_root().join("config/samples/charts/hello");
    let home = tempfile::tempdir()?;
    let started = Instant::now();
    each(0..count, 4, |i| {
        let (helm, kubeconfig, chart, namespace, home) = (
            helm.clone(),
            kubeconfig.clone(),
            chart.clone(),
            namespace.clone(),
            home.path().to_path_buf(),
        );
        async move {
            let out = tokio::process::Command::new(&helm)
                .args(["install", &format!("r{i:04}")])
                .arg(&chart)
                .args(["--namespace", &namespace])
                .args(["--set", &format!("greeting=hello {i},port={}", 8000 + i)])
                .env("KUBECONFIG", &kubeconfig)
                .env("HOME", &home)
                .env("HELM_CACHE_HOME", home.join("cache"))
                .env("HELM_CONFIG_HOME", home.join("config"))
                .env("HELM_DATA_HOME", home.join("data"))
                .output()
                .await?;
            anyhow::ensure!(
                out.status.success(),
                "helm install: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            anyhow::Ok(())
        }
    })
    .await?;
    let took = started.elapsed();
    let secrets = Api::<Secret>::namespaced(ctx.client.clone(), &namespace)
        .list(&kube::api::ListParams::default().labels("owner=helm"))
        .await?;
    let bytes: usize = secrets
        .items
        .iter()
        .flat_map(|s| s.data.iter().flatten())
        .map(|(_, v)| v.0.len())
        .sum();
    println!(
        "helm install (the peer), {count} releases of the same chart and values: {took:.1?}, {} release Secrets holding {} KiB",
        secrets.items.len(),
        bytes / 1024
    );
    Ok(())
}

/// Deletes every BundleDeployment, timing until all are gone, and says the run's peak memory.
async fn finish(
    ctx: &TestContext,
    bds: &Api<BundleDeployment>,
    prefix: &str,
    created: usize,
    pid: u32,
    provisioner: olm_e2e::manager::Provisioner,
) -> Result<()> {
    let started = Instant::now();
    each(0..created, 16, |i| {
        let (bds, prefix) = (&bds, &prefix);
        async move {
            bds.delete(&format!("{prefix}{i:04}"), &DeleteParams::default())
                .await?;
            anyhow::Ok(())
        }
    })
    .await?;
    until_ours(bds, prefix, "every BundleDeployment uninstalled", |ours| {
        ours.is_empty()
    })
    .await?;
    let left: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let remaining = left
        .list_metadata(&kube::api::ListParams::default().labels("core.rukpak.io/owner-kind"))
        .await
        .context("listing what is left")?
        .items
        .len();
    println!(
        "{created} BundleDeployments deleted: all gone {:.1?} after the first deletion; {remaining} of their ConfigMaps left",
        started.elapsed()
    );
    println!(
        "peak memory (VmHWM) over the run: {} MiB",
        peak_rss_mib(pid)
    );
    provisioner.manager.stop()?;
    Ok(())
}
