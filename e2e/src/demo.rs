//! What the demo (`olm-demo`) prints and pushes: a step's title, the command a user would type,
//! a `kubectl get` table, and the example operator's bundle and catalog images
//! (config/samples/example-operator) pushed to a registry on loopback.

use std::path::Path;

use kube::ResourceExt;
use kube::api::{Api, GroupVersionKind};
use kube::discovery::pinned_kind;
use olm_testkit::images::{self, Entry};
use olm_testkit::registry::Registry;

use crate::{Error, Result, apply, table};

/// Prints a step's title.
pub fn step(n: u32, title: &str) {
    println!("\n== {n}. {title} ==\n");
}

/// Prints the command a user would type.
pub fn command(text: &str) {
    println!("$ {text}");
}

/// `kubectl get <kind> [-n ns] [-l selector]`, as its table.
pub async fn get(
    client: &kube::Client,
    (group, version, kind): (&str, &str, &str),
    ns: Option<&str>,
    selector: Option<&str>,
) -> Result<()> {
    let (resource, _) = pinned_kind(client, &GroupVersionKind::gvk(group, version, kind))
        .await
        .map_err(crate::kube_err(format!("finding {kind}")))?;
    let scope = ns.map(|n| format!(" -n {n}")).unwrap_or_default();
    let labels = selector.map(|l| format!(" -l {l}")).unwrap_or_default();
    command(&format!("kubectl get {}{scope}{labels}", resource.plural));
    print!(
        "{}",
        table::get_table_selected(client, &resource, ns, selector).await?
    );
    Ok(())
}

/// The documents of a sample file.
pub fn sample(path: &Path) -> Result<Vec<serde_json::Value>> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.display().to_string(),
        source,
    })?;
    apply::parse_documents(&text)
}

/// A token of the ServiceAccount `namespace/name`, as `kubectl create token` makes.
pub async fn token(client: &kube::Client, namespace: &str, name: &str) -> Result<String> {
    use k8s_openapi::api::authentication::v1::TokenRequest;
    use k8s_openapi::api::core::v1::ServiceAccount;
    let issued = Api::<ServiceAccount>::namespaced(client.clone(), namespace)
        .create_token_request(name, &Default::default(), &TokenRequest::default())
        .await
        .map_err(crate::kube_err(format!(
            "requesting a token for {namespace}/{name}"
        )))?;
    issued
        .status
        .map(|s| s.token)
        .ok_or_else(|| Error::Cluster("the TokenRequest returned no token".into()))
}

/// Applies `docs` (server-side), printing each as `kubectl apply` does.
pub async fn apply_docs(client: &kube::Client, docs: &[serde_json::Value]) -> Result<()> {
    for doc in docs {
        let obj = apply::apply_document(client, doc, "default").await?;
        let kind = apply::gvk_of(doc)?.kind.to_lowercase();
        println!("{kind}/{} applied", obj.name_any());
    }
    Ok(())
}

/// The files of `dir`, by path below it (a bundle's `manifests/`, say).
fn files_of(dir: &Path, below: &str) -> Result<Vec<Entry>> {
    let mut entries = vec![Entry::Dir(below.to_owned())];
    let listed = std::fs::read_dir(dir).map_err(|source| Error::Io {
        path: dir.display().to_string(),
        source,
    })?;
    let mut paths: Vec<_> = listed.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        let content = std::fs::read(&path).map_err(|source| Error::Io {
            path: path.display().to_string(),
            source,
        })?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        entries.push(Entry::File(format!("{below}/{name}"), content));
    }
    Ok(entries)
}

/// Pushes example-operator's bundles (`example-operator-bundle:v<version>`, each a registry+v1
/// bundle, `manifests/` and `metadata/`, as the whole image, `REGISTRY` in its files filled in), the busybox its
/// Deployment runs (`library/busybox:1.36`), and catalogs (`example-operator-index:<version>`, the FBC under
/// `/configs` with `REGISTRY` filled in) from `dir`; returns the references pushed.
pub async fn push_example(registry: &Registry, dir: &Path) -> Result<Vec<String>> {
    let mut pushed = vec![crate::node::push_busybox(registry, "1.36").await?];
    for version in ["0.1.0", "0.2.0"] {
        let bundle = dir.join(format!("bundle-{version}"));
        pushed.push(
            push_bundle(
                registry,
                &bundle,
                "example-operator-bundle",
                &format!("v{version}"),
            )
            .await?,
        );
    }
    for version in ["0.1.0", "0.2.0"] {
        let index = dir.join(format!("index-{version}.yaml"));
        pushed.push(push_index(registry, &index, "example-operator-index", version).await?);
    }
    Ok(pushed)
}

/// Pushes the operators of the kinds OLM v0's users run (config/samples/more-operators): the
/// test operator's image (`olm-rs/olm-test-operator:demo`, assembled from this build), the
/// bundles `own-operator-bundle:v1.0.0` and `webhook-operator-bundle:v1.0.0`, and the catalog
/// `more-operators-index:1.0.0`; returns the references pushed.
pub async fn push_more(registry: &Registry, dir: &Path) -> Result<Vec<String>> {
    let mut pushed = vec![crate::node::push_manager(registry, "olm-test-operator", "demo").await?];
    for package in ["own-operator", "webhook-operator"] {
        let bundle = dir.join(package);
        pushed.push(push_bundle(registry, &bundle, &format!("{package}-bundle"), "v1.0.0").await?);
    }
    pushed.push(
        push_index(
            registry,
            &dir.join("index.yaml"),
            "more-operators-index",
            "1.0.0",
        )
        .await?,
    );
    Ok(pushed)
}

/// Pushes the registry+v1 bundle in `dir` (`manifests/`, `metadata/`) as the whole image
/// `<repository>:<tag>`, `REGISTRY` in its files (the workload's image) filled in with the
/// registry it is pushed to; its reference.
async fn push_bundle(
    registry: &Registry,
    dir: &Path,
    repository: &str,
    tag: &str,
) -> Result<String> {
    let mut files = files_of(&dir.join("manifests"), "manifests")?;
    files.extend(files_of(&dir.join("metadata"), "metadata")?);
    let files = files.into_iter().map(|e| match e {
        Entry::File(path, bytes) => Entry::File(
            path,
            String::from_utf8_lossy(&bytes)
                .replace("REGISTRY", &registry.host)
                .into_bytes(),
        ),
        other => other,
    });
    let layer = images::layer(&files.collect::<Vec<_>>());
    images::push(registry, repository, tag, &[layer], &Default::default()).await?;
    Ok(format!("{}/{repository}:{tag}", registry.host))
}

/// Pushes the File-Based Catalog `file` as the catalog image `<repository>:<tag>`, `REGISTRY`
/// filled in; its reference.
async fn push_index(
    registry: &Registry,
    file: &Path,
    repository: &str,
    tag: &str,
) -> Result<String> {
    let fbc = std::fs::read_to_string(file)
        .map_err(|source| Error::Io {
            path: file.display().to_string(),
            source,
        })?
        .replace("REGISTRY", &registry.host);
    images::push_catalog(registry, repository, tag, &[("catalog.yaml", fbc.as_str())]).await?;
    Ok(format!("{}/{repository}:{tag}", registry.host))
}
