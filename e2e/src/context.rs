//! Per-test context: a client and a namespace of the test's own, and the clean-up of everything
//! the test created, cluster-scoped objects included, whether the test passes or panics.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, ObjectMeta, Patch, PatchParams};
use kube::api::{ApiResource, PostParams};
use kube::{Client, ResourceExt};

use crate::{Error, Result, cluster, kube_err};

/// Label on every object a test creates (the namespace and the cluster-scoped objects), whose
/// value is the test's namespace, so the test's clean-up finds exactly its own objects. After a
/// run that was killed outright, `kubectl delete catalogs,operators,bundledeployments,namespaces
/// -l olm-rs.io/e2e` removes what it left on a reused cluster.
pub const E2E_LABEL: &str = "olm-rs.io/e2e";

/// Label on a namespace a test makes besides its own (a bundle's install namespace), whose
/// value is the test's namespace: the clean-up deletes these with it.
pub const E2E_NAMESPACE_OF: &str = "olm-rs.io/e2e-namespace-of";

/// How long the clean-up waits for the objects to be gone (a Catalog's finalizer needs
/// catalogd) before it removes their finalizers itself.
const CLEANUP_DEADLINE: Duration = Duration::from_secs(60);

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// What a test works in: an admin client and its own namespace. Cluster-scoped objects a test
/// creates must carry [`TestContext::labels`] (the helpers here add them) and should be named
/// with [`TestContext::name`] so tests never collide. Everything is deleted by
/// [`TestContext::cleanup`], or when the context is dropped (a failing test).
pub struct TestContext {
    /// Admin client, made in the test's own runtime.
    pub client: Client,
    /// The test's namespace.
    pub namespace: String,
    cleaned: bool,
}

impl TestContext {
    /// Starts (or finds) the control plane and creates a namespace for the test `test`.
    pub async fn new(test: &str) -> Result<Self> {
        let cluster = cluster::cluster()?;
        let client = cluster.client().await?;
        let namespace = unique_name(test);
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(namespace.clone()),
                labels: Some([(E2E_LABEL.to_owned(), namespace.clone())].into()),
                ..Default::default()
            },
            ..Default::default()
        };
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .map_err(kube_err(format!("creating namespace {namespace}")))?;
        Ok(Self {
            client,
            namespace,
            cleaned: false,
        })
    }

    /// A name for a cluster-scoped object that no other test uses.
    pub fn name(&self, suffix: &str) -> String {
        format!("{}-{suffix}", self.namespace)
    }

    /// The labels every object the test creates must carry.
    pub fn labels(&self) -> BTreeMap<String, String> {
        [(E2E_LABEL.to_owned(), self.namespace.clone())].into()
    }

    /// The labels of a namespace the test makes besides its own (deleted by the clean-up).
    pub fn namespace_labels(&self) -> BTreeMap<String, String> {
        [(E2E_NAMESPACE_OF.to_owned(), self.namespace.clone())].into()
    }

    /// `doc` with this test's label added to its metadata. Namespaces are left as they are: a
    /// test's own is made by [`TestContext::new`], and others (catalogd's) are shared.
    pub fn labelled(&self, mut doc: serde_json::Value) -> serde_json::Value {
        if doc["kind"] == "Namespace" {
            return doc;
        }
        if let Some(meta) = doc.get_mut("metadata").and_then(|m| m.as_object_mut()) {
            let labels = meta
                .entry("labels")
                .or_insert_with(|| serde_json::json!({}));
            if let Some(labels) = labels.as_object_mut() {
                labels.insert(E2E_LABEL.into(), self.namespace.clone().into());
            }
        }
        doc
    }

    /// Applies `doc` (server-side) with this test's label; namespaced objects without a
    /// namespace go to the test's namespace.
    pub async fn apply(&self, doc: &serde_json::Value) -> Result<DynamicObject> {
        crate::apply::apply_document(&self.client, &self.labelled(doc.clone()), &self.namespace)
            .await
    }

    /// Deletes everything the test created: its cluster-scoped objects (waiting until they are
    /// gone) and its namespace. Call at the end of a test; a test that panics is cleaned up
    /// when its context is dropped.
    pub async fn cleanup(mut self) -> Result<()> {
        self.cleaned = true;
        delete_labelled(&self.client, &self.namespace).await
    }
}

impl Drop for TestContext {
    fn drop(&mut self) {
        if self.cleaned {
            return;
        }
        // A panicking test: clean up on a runtime of its own (the test's may be unwinding).
        let namespace = self.namespace.clone();
        let result = cluster::run_blocking(async move {
            let client = cluster::cluster()?.client().await?;
            delete_labelled(&client, &namespace).await
        });
        if let Err(e) | Ok(Err(e)) = result {
            let _ = std::io::Write::write_fmt(
                &mut std::io::stderr(),
                format_args!("e2e: cleaning up after {}: {e}\n", self.namespace),
            );
        }
    }
}

/// The kinds tests create outside their own namespace: cluster-scoped ones (ClusterRoleBindings
/// granting a test's ServiceAccount, say), and objects in catalogd's namespace (the samples'
/// ConfigMap and CatalogSource, test catalogs' ConfigMaps and Secrets).
fn kinds() -> Vec<ApiResource> {
    vec![
        ApiResource::erase::<olm_api::Catalog>(&()),
        ApiResource::erase::<olm_api::Operator>(&()),
        ApiResource::erase::<olm_api::BundleDeployment>(&()),
        ApiResource::erase::<olm_api::CatalogSource>(&()),
        ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
        ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&()),
        ApiResource::erase::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>(&()),
        // CRDs of the provisioner's test bundles.
        ApiResource::erase::<
            k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
        >(&()),
    ]
}

/// Deletes the objects labelled for `namespace` wherever they are, waits until they are gone
/// (removing their finalizers if nothing else does in time), then deletes the namespace.
pub async fn delete_labelled(client: &Client, namespace: &str) -> Result<()> {
    let selector = ListParams::default().labels(&format!("{E2E_LABEL}={namespace}"));
    for resource in kinds() {
        // All namespaces for namespaced kinds: one list, then each object in its own.
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let api_of = |obj: &kube::api::PartialObjectMeta<DynamicObject>| match obj.namespace() {
            Some(ns) => Api::<DynamicObject>::namespaced_with(client.clone(), &ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        let objects = api
            .list_metadata(&selector)
            .await
            .map_err(kube_err(format!("listing {} to clean up", resource.plural)))?;
        for obj in &objects.items {
            match api_of(obj)
                .delete(&obj.name_any(), &DeleteParams::background())
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.is_not_found() => {}
                Err(e) => return Err(kube_err(format!("deleting {}", obj.name_any()))(e)),
            }
        }
        let deadline = tokio::time::Instant::now() + CLEANUP_DEADLINE;
        loop {
            let left = api
                .list_metadata(&selector)
                .await
                .map_err(kube_err(format!("listing {}", resource.plural)))?;
            if left.items.is_empty() {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                // Nobody runs to remove the finalizers (catalogd stopped first): do it, so the
                // cluster is left clean.
                for obj in &left.items {
                    let _ = api_of(obj)
                        .patch_metadata(
                            &obj.name_any(),
                            &PatchParams::default(),
                            &Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}})),
                        )
                        .await;
                }
                break;
            }
            // Bounded by the deadline above; deletions are asynchronous (finalizers).
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
    let namespaces = Api::<Namespace>::all(client.clone());
    let extra = namespaces
        .list_metadata(&ListParams::default().labels(&format!("{E2E_NAMESPACE_OF}={namespace}")))
        .await
        .map_err(kube_err("listing the test's other namespaces".to_owned()))?;
    for ns in extra.items {
        match namespaces
            .delete(&ns.name_any(), &DeleteParams::background())
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.is_not_found() => {}
            Err(e) => return Err(kube_err(format!("deleting namespace {}", ns.name_any()))(e)),
        }
    }
    match namespaces
        .delete(namespace, &DeleteParams::background())
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.is_not_found() => Ok(()),
        Err(e) => Err(Error::Kube {
            context: format!("deleting namespace {namespace}"),
            source: e,
        }),
    }
}

/// `e2e-<test>-<n><pid>`, shortened to a valid namespace name.
fn unique_name(test: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let slug: String = test
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(30)
        .collect();
    let name = format!(
        "e2e-{}-{n}{}",
        slug.trim_matches('-'),
        std::process::id() % 10_000
    );
    name.trim_end_matches('-').to_owned()
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_are_valid_and_distinct() {
        let a = super::unique_name("Some_Test::with weird chars and a very long name indeed");
        let b = super::unique_name("Some_Test::with weird chars and a very long name indeed");
        assert_ne!(a, b);
        for n in [a, b] {
            assert!(n.len() <= 63, "{n}");
            assert!(
                n.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "{n}"
            );
        }
    }
}
